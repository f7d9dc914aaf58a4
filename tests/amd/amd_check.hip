/*
 * AMD device-code compile check (tests/amd/check.sh): kernels of the
 * forward pipeline (MFMA, pipeline/fwd_mfma.h: forward, batch prefill,
 * decode) and the backward (dq_dk_dv on MFMA, pipeline/bwd_mfma.h;
 * dot_do_o and convert_dq, which have no products), compiled device-only
 * for CDNA (gfx942, gfx90a; gfx950 where the compiler knows it).
 *
 * Default: a representative subset, fp16 and bf16 at head dims 64, 128 and
 * 256, each with every feature on (MASK + SOFTCAP + ALIBI) and every feature
 * off, on the GFX9 tuned tiles (12 kernels), five 16-bit batch prefill
 * kernels (both layouts, the page classes), two FP8-KV batch prefill
 * kernels, four decode kernels (16-bit and FP8 KV; contiguous, LINEAR and
 * VECTORIZED pages), one elementwise-bias forward kernel, and the
 * backward's three stages (4 dq_dk_dv kernels: both
 * dtypes, head dims 64/128/256, masks, soft cap, ALiBi, deterministic, the
 * two-sweep hdim 256). With FMHA_AMD_CHECK_FULL: the library's whole default
 * forward, batch prefill (16-bit and FP8 KV), decode and backward sets as
 * an AMD build declares them (many times the time). With
 * FMHA_AMD_CHECK_BWD: the default backward set alone (80 kernels, a few
 * minutes).
 */
#include "fmha_tile.h"

/* Backward: the three stages; dq_dk_dv with all features on at hdim 128
 * (fp16), all off at hdim 64 (bf16), deterministic with ALiBi at hdim 128
 * (bf16), the two sweeps of hdim 256 (fp16), on the GFX9 tuned tiles, and
 * an elementwise-bias (dbias) row, on MFMA as the others. */
#define AMD_CHECK_BWD(X)                                                                          \
    X(BWD,            FP16, 128, MASK,   SOFTCAP,   NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   FP16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, FP16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            BF16, 64,  NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        BF16, 128, MASK,   NOSOFTCAP, ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        FP16, 256, MASK,   SOFTCAP,   NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            BF16, 64,  MASK,   NOSOFTCAP, BIAS,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)

/* FP8 (e4m3) KV batch prefill (the e4m3 tiles decoded to f16 in LDS): 64-
 * and 32-key tiles, page classes 3 and 1. */
#define AMD_CHECK_FP8(X)                                                                          \
    X(PREFILL, FP8, 128, MASK,   NOSOFTCAP, 16, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)           \
    X(PREFILL, FP8, 256, NOMASK, NOSOFTCAP, 1,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)

/* 16-bit batch prefill (the MFMA pipeline): LINEAR pages of every class
 * (1: per-row lookup, 16: class 3 read per row, 64: a page a tile) and
 * VECTORIZED pages (chunk-major K and V^T tiles) */
#define AMD_CHECK_PREFILL16(X)                                                                    \
    X(PREFILL,     FP16, 128, MASK,   SOFTCAP,   1,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)     \
    X(PREFILL,     BF16, 256, NOMASK, NOSOFTCAP, 16, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)     \
    X(PREFILL,     BF16, 64,  MASK,   NOSOFTCAP, 64, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)     \
    X(PREFILL_VEC, FP16, 128, MASK,   SOFTCAP,   1,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)     \
    X(PREFILL_VEC, BF16, 64,  MASK,   NOSOFTCAP, 64, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)

/* decode (the MFMA pipeline): packed GQA rows and the split-KV epilogue,
 * contiguous cache, small LINEAR pages and VECTORIZED pages, 16-bit and
 * e4m3 KV (and, in every set, the combine kernel) */
#define AMD_CHECK_DECODE(X)                                                                       \
    X(DECODE,     BF16, 128, MASK, SOFTCAP, 0,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)          \
    X(DECODE,     FP8,  128, MASK, SOFTCAP, 1,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)          \
    X(DECODE,     FP8,  256, MASK, SOFTCAP, 16, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)          \
    X(DECODE_VEC, FP16, 64,  MASK, SOFTCAP, 16, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)

#if defined(FMHA_AMD_CHECK_BWD)
DECL_FMHA_KERNEL_SET(amd_set, FMHA_DEFAULT_BWD_SET)
#elif !defined(FMHA_AMD_CHECK_FULL)
#  define AMD_CHECK_HD(X, dt, hd)                                                        \
    X(FWD, dt, hd, MASK,   SOFTCAP,   ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#  define AMD_CHECK_SET(X)                                                               \
    AMD_CHECK_HD(X, FP16, 64) AMD_CHECK_HD(X, FP16, 128) AMD_CHECK_HD(X, FP16, 256)      \
    AMD_CHECK_HD(X, BF16, 64) AMD_CHECK_HD(X, BF16, 128) AMD_CHECK_HD(X, BF16, 256)      \
    AMD_CHECK_PREFILL16(X) AMD_CHECK_FP8(X) AMD_CHECK_BWD(X) AMD_CHECK_DECODE(X)         \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, BIAS, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(amd_set, AMD_CHECK_SET)
#else
/* the library's default sets as an AMD build declares them (no VECTORIZED
 * rows at hdim 256: kernel_set.h) */
#  define AMD_CHECK_FULL_SET(X) FMHA_DEFAULT_FWD_SET(X) FMHA_DEFAULT_PREFILL_SET(X) FMHA_DEFAULT_BWD_SET(X) \
    FMHA_DEFAULT_DECODE_SET(X)
DECL_FMHA_KERNEL_SET(amd_set, AMD_CHECK_FULL_SET)
#endif

/* Host code (compiled by the check's host pass): the entry points on this set,
 * so registry.h's HIP branches are instantiated against the HIP names. */
fmha_status fmha_amd_check_fwd(const fmha_fwd_args *args, void *stream)
{
    return fmha_fwd(&amd_set, args, stream);
}
fmha_status fmha_amd_check_plan(const fmha_fwd_args *args, fmha_fwd_plan *plan)
{
    return fmha_fwd_check(&amd_set, args, plan);
}
fmha_status fmha_amd_check_bwd(const fmha_bwd_traits *traits, const fmha_bwd_args *args, void *ws,
                               size_t ws_size, const int32_t *sq, const int32_t *sk, void *staging, void *stream)
{
    fmha_bwd_plan plan;
    fmha_status st = fmha_bwd_plan_make(&amd_set, traits, &plan);
    if (st == FMHA_OK) st = fmha_bwd_prepare_workspace_async(&plan, ws, ws_size, sq, sk, staging, stream);
    if (st == FMHA_OK) st = fmha_bwd_prepare_workspace(&plan, ws, ws_size, sq, sk, stream);
    if (st == FMHA_OK) st = fmha_bwd(&plan, args, stream);
    return st;
}
