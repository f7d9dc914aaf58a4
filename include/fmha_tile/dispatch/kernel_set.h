/*
 * DECL_FMHA_KERNEL_SET: kernels plus a dispatch table, in the user's own
 * translation unit, from an X-macro list of rows.
 *
 * Macros (expand to code):
 *   DECL_FMHA_KERNEL_SET(name, LIST)
 *       defines `static const fmha_kernel_set name;` and one kernel per row;
 *       LIST(X) must expand to rows
 *   X(family, dtype, hdim, mask, softcap, alibi, tile_m, tile_n, warps, stages)
 *       family  FWD | PREFILL (batch prefill, LINEAR pages) | PREFILL_VEC
 *               (batch prefill, VECTORIZED pages) | DECODE (decode with
 *               split-KV over a contiguous cache, page 0, or LINEAR pages)
 *               | DECODE_VEC (decode, VECTORIZED pages)
 *       dtype   FP16 | BF16 | FP8 (PREFILL rows: e4m3 KV, bf16 or e4m3
 *               queries chosen at run time, bf16 output; FWD rows: e4m3
 *               Q, K and V, bf16 output, Hopper wildcard rows only)
 *       hdim    kernel head dim: 32, 64, 96, 128, 192, 256 (serves every
 *               d <= hdim; 32 and 96: 16-bit FWD and backward rows,
 *               NVIDIA only),
 *               or Q_V for unequal Q/K and V/O head dims (FWD rows only):
 *               192_128 is DeepSeek MLA prefill's (hdim_q 192, hdim_v 128);
 *               it serves hdim_q <= 192 with hdim_v <= 128
 *       mask    NOMASK | MASK        (MASK serves every mask type at run time)
 *       softcap NOSOFTCAP | SOFTCAP  (logits soft cap compiled in or out)
 *       alibi   NOALIBI | ALIBI | BIAS | DROPOUT   (FWD rows, and but
 *               DROPOUT the backward's BWD / BWD_DET rows in bwd_set.h;
 *               BIAS: CK's elementwise bias, fmha_fwd_args.bias, in place
 *               of ALiBi: the column is CK's bias enum {no_bias, alibi,
 *               elementwise_bias}; DROPOUT (FWD): no bias, dropout
 *               compiled in: the wgmma hdim-64 kernel, whose plain row
 *               leaves dropout out (it cost that kernel 3%); every other
 *               kernel decides dropout at run time; a DROPOUT row serves
 *               only problems with dropout)
 *       page    smallest KV page size served, a power of two 1..2048, or
 *               FMHA_ANY (tuned classes: PREFILL 1, 16 and 64; PREFILL_VEC
 *               1 and 64; DECODE 0 (contiguous cache), 1, 16 and 64;
 *               DECODE_VEC 1, 16 and 64)   (PREFILL and DECODE rows, in
 *               place of alibi: decode kernels take ALiBi at run time,
 *               prefill ones have none); a kernel for
 *               page P serves every power of two >= P. P a multiple of
 *               tile_n reads one page index per tile; LINEAR 16 <= P <
 *               tile_n one per 16-row run; smaller P stages per-row offsets
 *       tile_m, tile_n, warps, stages: numbers, or FMHA_ANY
 *
 * A row with no FMHA_ANY is built as written, for the platform's portable
 * pipeline, and checked against FMHAI_FWD_CONSTRAINTS at compile time. A row
 * with FMHA_ANY in any tile/warp column expands into the tuned rows of
 * policy/fwd_tiles.h for its family and head dim, keeping those that agree
 * with the columns it does give (a compile error says so if none does).
 *
 * How it works: LIST is expanded twice, once with a row macro that defines
 * the kernels (a thin __global__ wrapper around the pipeline body, shape
 * arguments as constants) and once with a row macro that writes the table
 * entries. Kernel identifiers carry the row's columns and the line of the
 * DECL, so two sets in one file may share rows.
 */
#ifndef FMHA_TILE_KERNEL_SET_H
#define FMHA_TILE_KERNEL_SET_H

#include "../api.h"
#include "../policy/fwd_tiles.h"
#include "registry.h"

/* The wildcard: an enumerator, not a macro, so the preprocessor can still
 * recognise the token while C code reads it as -1. */
enum fmha_wildcard { FMHA_ANY = -1 };

#if defined(__GNUC__) || defined(__clang__) || defined(__CUDACC__)
#  define FMHAI_UNUSED __attribute__((unused))
#else
#  define FMHAI_UNUSED
#endif

/* ---- preprocessor helpers ------------------------------------------------ */
#define FMHAI_CAT(a, b) FMHAI_CAT_(a, b)
#define FMHAI_CAT_(a, b) a##b
#define FMHAI_SECOND(a, b, ...) b
#define FMHAI_SECOND_(...) FMHAI_SECOND(__VA_ARGS__, 0)
#define FMHAI_ANYPROBE_FMHA_ANY ~, 1
#define FMHAI_IS_ANY(x) FMHAI_SECOND_(FMHAI_ANYPROBE_##x, 0)
#define FMHAI_OR_00 0
#define FMHAI_OR_01 1
#define FMHAI_OR_10 1
#define FMHAI_OR_11 1
#define FMHAI_OR(a, b) FMHAI_CAT(FMHAI_OR_, FMHAI_CAT(a, b))
#define FMHAI_ANY4(a, b, c, d) \
    FMHAI_OR(FMHAI_OR(FMHAI_IS_ANY(a), FMHAI_IS_ANY(b)), FMHAI_OR(FMHAI_IS_ANY(c), FMHAI_IS_ANY(d)))
#define FMHAI_MATCH(user, tuned) ((user) == FMHA_ANY || (user) == (tuned))

/* ---- head dims: a plain number is both; Q_V (a pp-number such as 192_128)
 * names the pair through FMHAI_HDP_Q_V, so the token can still be pasted
 * into identifiers and table names while C code reads the two numbers. ---- */
#define FMHAI_HDP_192_128 ~, 192, 128
#define FMHAI_THIRD(a, b, c, ...) c
#define FMHAI_HDQ_(...) FMHAI_SECOND(__VA_ARGS__, 0)
#define FMHAI_HDV_(...) FMHAI_THIRD(__VA_ARGS__, 0, 0)
#define FMHAI_HDQ(hd) FMHAI_HDQ_(FMHAI_HDP_##hd, hd)
#define FMHAI_HDV(hd) FMHAI_HDV_(FMHAI_HDP_##hd, hd, hd)

/* ---- column tokens -> values and name fragments -------------------------- */
#define FMHAI_DT_FP16 FMHA_DTYPE_FP16
#define FMHAI_DT_BF16 FMHA_DTYPE_BF16
#define FMHAI_DT_FP8 FMHA_DTYPE_FP8
#define FMHAI_DTS_FP16 "fp16"
#define FMHAI_DTS_BF16 "bf16"
#define FMHAI_DTS_FP8 "fp8kv"
#define FMHAI_DTF_FP16 "fp16"     /* forward names: e4m3 Q, K and V */
#define FMHAI_DTF_BF16 "bf16"
#define FMHAI_DTF_FP8 "fp8"
/* which tuned table a family's wildcard rows of a dtype expand into
 * (policy/fwd_tiles.h): the contiguous forward has its own (Hopper rows;
 * e4m3: 192-key tiles at hdim 128, where the prefill rows keep 128) */
#define FMHAI_TTAB_FWD_FP16 FWDC
#define FMHAI_TTAB_FWD_BF16 FWDC
#define FMHAI_TTAB_FWD_FP8 FP8FWDC
/* 16-bit batch prefill: the Hopper rows first, as the forward (a build may
 * predefine FMHAI_TTAB_PREFILL_16 as FWD: portable rows only) */
#ifndef FMHAI_TTAB_PREFILL_16
#define FMHAI_TTAB_PREFILL_16 FWDX
#endif
#define FMHAI_TTAB_PREFILL_FP16 FMHAI_TTAB_PREFILL_16
#define FMHAI_TTAB_PREFILL_BF16 FMHAI_TTAB_PREFILL_16
/* e4m3-KV batch prefill: the Hopper e4m3 rows (e4m3 queries) first (a build
 * may predefine FMHAI_TTAB_PREFILL_8 as FP8: portable rows only) */
#ifndef FMHAI_TTAB_PREFILL_8
#define FMHAI_TTAB_PREFILL_8 FP8X
#endif
#define FMHAI_TTAB_PREFILL_FP8 FMHAI_TTAB_PREFILL_8
#define FMHAI_TTAB_PREFILL_VEC_FP16 FMHAI_TTAB_PREFILL_16
#define FMHAI_TTAB_PREFILL_VEC_BF16 FMHAI_TTAB_PREFILL_16
#define FMHAI_TTAB_PREFILL_VEC_FP8 FP8
/* decode: the portable pipeline's decode rows (DEC tables) */
#define FMHAI_TTAB_DECODE_FP16 DEC
#define FMHAI_TTAB_DECODE_BF16 DEC
#define FMHAI_TTAB_DECODE_FP8 DEC
#define FMHAI_TTAB_DECODE_VEC_FP16 DECV
#define FMHAI_TTAB_DECODE_VEC_BF16 DECV
#define FMHAI_TTAB_DECODE_VEC_FP8 DEC    /* stopped by fp8_kv_linear_pages */
#define FMHAI_ON_MASK 1
#define FMHAI_ON_NOMASK 0
#define FMHAI_ON_SOFTCAP 1
#define FMHAI_ON_NOSOFTCAP 0
#define FMHAI_ON_ALIBI 1
#define FMHAI_ON_NOALIBI 0
#define FMHAI_ON_BIAS 2      /* the pipelines' ALiBi column value 2: elementwise bias */
#define FMHAI_ON_DROPOUT 4   /* value 4: no ALiBi, dropout compiled in (wgmma hdim 64) */
#define FMHAI_ONS_MASK "_mask"
#define FMHAI_ONS_NOMASK "_nmask"
#define FMHAI_ONS_SOFTCAP "_softcap"
#define FMHAI_ONS_NOSOFTCAP "_nsoftcap"
#define FMHAI_ONS_ALIBI "_alibi"
#define FMHAI_ONS_NOALIBI "_nalibi"
#define FMHAI_ONS_BIAS "_bias"
#define FMHAI_ONS_DROPOUT "_dropout"
#define FMHAI_FAM_FWD FMHA_FAMILY_FWD
#define FMHAI_FAM_PREFILL FMHA_FAMILY_BATCH_PREFILL
#define FMHAI_FAM_PREFILL_VEC FMHA_FAMILY_BATCH_PREFILL
#define FMHAI_FAM_DECODE FMHA_FAMILY_DECODE
#define FMHAI_FAM_DECODE_VEC FMHA_FAMILY_DECODE
#define FMHAI_VEC_FWD 0
#define FMHAI_VEC_PREFILL 0
#define FMHAI_VEC_PREFILL_VEC 1
#define FMHAI_VEC_DECODE 0
#define FMHAI_VEC_DECODE_VEC 1
#define FMHAI_LAYOUT_FWD FMHA_KV_LAYOUT_LINEAR
#define FMHAI_LAYOUT_PREFILL FMHA_KV_LAYOUT_LINEAR
#define FMHAI_LAYOUT_PREFILL_VEC FMHA_KV_LAYOUT_VECTORIZED
#define FMHAI_LAYOUT_DECODE FMHA_KV_LAYOUT_LINEAR
#define FMHAI_LAYOUT_DECODE_VEC FMHA_KV_LAYOUT_VECTORIZED
/* decode kernels (packed GQA rows, split-KV epilogue) take ALiBi at run
 * time; a SOFTCAP decode kernel serves problems with and without a soft cap
 * (as a MASK kernel serves any mask) */
#define FMHAI_DEC_FWD 0
#define FMHAI_DEC_PREFILL 0
#define FMHAI_DEC_PREFILL_VEC 0
#define FMHAI_DEC_DECODE 1
#define FMHAI_DEC_DECODE_VEC 1
#define FMHAI_ALIBI_ON(fam, al) (FMHAI_ON_##al | FMHAI_DEC_##fam)
#define FMHAI_ARCHS_SM80 "sm80"
#define FMHAI_ARCHS_SM90A "sm90a"
#define FMHAI_ARCHS_GFX9 "gfx9"

/* Every row is normalised to the columns
 *     (fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st)
 * u* = the user's column (maybe FMHA_ANY), plain = the concrete value; al is
 * the ALiBi token (NOALIBI for prefill), pg the page size (0 for forward). */

/* Kernel identifier: columns + the DECL's line (unique per set and row). */
#define FMHAI_KID(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st) \
    FMHAI_CAT(fmhai_k_##fam##_##dt##_##hd##_##mask##_##sc##_##al##_##upg##_##pg##_##ubm##_##ubn \
              ##_##uw##_##ust##_##arch##_##bm##_##bn##_##w##_##st##_L, __LINE__)

/* Self-describing kernel names (CK style): family, head dim, dtype, features,
 * page class, then the tile, warps, stages, pipeline and arch. */
#define FMHAI_KNAME_TILE(bm, bn, w, st, arch) \
    "_b" #bm "x" #bn "_w" #w "_s" #st "_" FMHAI_FWD_PIPE_##arch "_" FMHAI_ARCHS_##arch
#define FMHAI_KNAME_FWD(dt, hd, mask, sc, al, pg, bm, bn, w, st, arch)                    \
    "fmha_fwd_d" #hd "_" FMHAI_DTF_##dt FMHAI_ONS_##mask FMHAI_ONS_##sc FMHAI_ONS_##al     \
    FMHAI_KNAME_TILE(bm, bn, w, st, arch)
#define FMHAI_KNAME_PREFILL(dt, hd, mask, sc, al, pg, bm, bn, w, st, arch)                \
    "fmha_batch_prefill_d" #hd "_" FMHAI_DTS_##dt FMHAI_ONS_##mask FMHAI_ONS_##sc         \
    "_linear_page" #pg FMHAI_KNAME_TILE(bm, bn, w, st, arch)
#define FMHAI_KNAME_PREFILL_VEC(dt, hd, mask, sc, al, pg, bm, bn, w, st, arch)            \
    "fmha_batch_prefill_d" #hd "_" FMHAI_DTS_##dt FMHAI_ONS_##mask FMHAI_ONS_##sc         \
    "_vectorized_page" #pg FMHAI_KNAME_TILE(bm, bn, w, st, arch)
/* decode: page0 is the contiguous cache */
#define FMHAI_KNAME_DECODE(dt, hd, mask, sc, al, pg, bm, bn, w, st, arch)                 \
    "fmha_decode_d" #hd "_" FMHAI_DTS_##dt FMHAI_ONS_##mask FMHAI_ONS_##sc                \
    "_page" #pg FMHAI_KNAME_TILE(bm, bn, w, st, arch)
#define FMHAI_KNAME_DECODE_VEC(dt, hd, mask, sc, al, pg, bm, bn, w, st, arch)             \
    "fmha_decode_d" #hd "_" FMHAI_DTS_##dt FMHAI_ONS_##mask FMHAI_ONS_##sc                \
    "_vectorized_page" #pg FMHAI_KNAME_TILE(bm, bn, w, st, arch)

/* K/V source of the pipeline (FMHAI_PAGING, policy/fwd_tiles.h): 0
 * contiguous, 1 pages of any size (staged row offsets), 2 pages that are
 * multiples of the tile, 3 pages of 16+ tokens below the tile size. */
#define FMHAI_KV8(dt) (FMHAI_DT_##dt == FMHA_DTYPE_FP8)
#define FMHAI_ROW_ENABLED(arch, upg, pg, ubm, ubn, uw, ust, bm, bn, w, st)               \
    (FMHAI_MATCH(upg, pg) && FMHAI_MATCH(ubm, bm) && FMHAI_MATCH(ubn, bn) &&             \
     FMHAI_MATCH(uw, w) && FMHAI_MATCH(ust, st) && FMHAI_CAT(FMHAI_PAGES_OK_, arch)(upg, pg))

/* The pipeline body of a row's arch (the Hopper one's kv8 rows compute in
 * e4m3: the forward, and batch prefill with e4m3 queries; GFX9: the MFMA
 * pipeline where it serves the row, else the portable one, chosen on the
 * row's constants in pipeline/fwd_mfma.h). */
#define FMHAI_FWD_BODY_SM80 fmhai_fwd_portable
#define FMHAI_FWD_BODY_GFX9 fmhai_fwd_gfx9
#define FMHAI_FWD_BODY_SM90A(p, smem, bf16, hd, hdv, bm, bn, w, st, mask, sc, al, paging, vec, kv8, dec) \
    fmhai_fwd_sm90(p, smem, bf16, hd, hdv, bm, bn, w, st, mask, sc, al, paging, vec, kv8)

/* ---- pass 1: kernels ------------------------------------------------------- */
#if defined(FMHA_PLATFORM_HOST_ONLY)
#  define FMHAI_KERNEL_ROW(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st) \
    FMHAI_CAT(FMHAI_FWD_CHECKS_, arch)(FMHAI_CONSTRAINT_ASSERT, FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, w, st, pg, \
                                       FMHAI_VEC_##fam, FMHAI_KV8(dt))
#  define FMHAI_KFN(kid) 0
#else
#  define FMHAI_KERNEL_ROW(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st) \
    FMHAI_CAT(FMHAI_FWD_CHECKS_, arch)(FMHAI_CONSTRAINT_ASSERT, FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, w, st, pg, \
                                       FMHAI_VEC_##fam, FMHAI_KV8(dt))                         \
    FMHA_STATIC_ASSERT(FMHAI_CAT(FMHAI_FWD_XSMEM_, arch)(FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, st, pg,  \
                                                       FMHAI_VEC_##fam, FMHAI_KV8(dt),            \
                                                       FMHAI_ON_##al == FMHAI_ON_BIAS) <= 227 * 1024, \
                       "fmha_tile: shared memory of the row with its bias tiles must fit in 227 KB"); \
    static __global__ void FMHAI_LAUNCH_BOUNDS((w) * 32, FMHAI_CAT(FMHAI_FWD_MINB_, arch)(FMHAI_HDV(hd), bm, w)) \
    FMHAI_KID(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st)(      \
        const FMHAI_GRID_CONSTANT fmhai_fwd_params p)                                           \
    {                                                                                           \
        extern __shared__ __align__(128) char fmhai_smem[];                                     \
        if (FMHAI_ROW_ENABLED(arch, upg, pg, ubm, ubn, uw, ust, bm, bn, w, st))                       \
            FMHAI_CAT(FMHAI_FWD_BODY_, arch)(&p, fmhai_smem, FMHAI_DT_##dt == FMHA_DTYPE_BF16,       \
                                  FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn,                         \
                                  w, st, FMHAI_ON_##mask, FMHAI_ON_##sc, FMHAI_ALIBI_ON(fam, al), \
                                  FMHAI_PAGING(pg, bn), FMHAI_VEC_##fam, FMHAI_KV8(dt),         \
                                  FMHAI_DEC_##fam);                                             \
    }                                                                                           \
    FMHAI_CAT(FMHAI_Q16K_, arch)(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st)
#  define FMHAI_KFN(kid) ((const void *)kid)
#endif

/* Hopper e4m3 batch-prefill rows get a second kernel, for bf16 queries (MIX
 * in pipeline/fwd_sm90.h: the 16-bit pipeline computing in f16 on pages
 * widened in shared memory), so that each kernel holds only its own bodies
 * and takes only the shared memory they need: as a third body in the e4m3
 * kernel it had cost e4m3 queries 1-2% (bench/RESULTS.md, session 28). The
 * entry carries it as fn_q16 with its shared memory smem_q16 (0 elsewhere;
 * the forward's e4m3 rows, page 0, get an empty one). */
#define FMHAI_Q16K_SM80(...)
#define FMHAI_Q16K_GFX9(...)
#define FMHAI_Q16K_SM90A(fam, dt, ...) FMHAI_Q16K90_##dt(fam, dt, __VA_ARGS__)
#define FMHAI_Q16K90_FP16(...)
#define FMHAI_Q16K90_BF16(...)
#define FMHAI_Q16K90_FP8(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st)   \
    FMHA_STATIC_ASSERT((pg) == 0 || FMHAI_FWD90_SMEM_Q16(FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, st, pg) <= 227 * 1024, \
                       "fmha_tile: the bf16-query kernel of an e4m3 row must fit in 227 KB");           \
    static __global__ void FMHAI_LAUNCH_BOUNDS((w) * 32, 1)                                              \
    FMHAI_CAT(FMHAI_KID(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st), _q16)( \
        const FMHAI_GRID_CONSTANT fmhai_fwd_params p)                                                     \
    {                                                                                                     \
        extern __shared__ __align__(128) char fmhai_smem[];                                               \
        if (FMHAI_ROW_ENABLED(arch, upg, pg, ubm, ubn, uw, ust, bm, bn, w, st) && FMHAI_PAGING(pg, bn))   \
            fmhai_fwd_sm90_q16(&p, fmhai_smem, FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, w, st, FMHAI_ON_##mask, \
                               FMHAI_ON_##sc, FMHAI_ALIBI_ON(fam, al), FMHAI_PAGING(pg, bn), FMHAI_VEC_##fam); \
    }
#define FMHAI_Q16FN_SM80(dt, pg, kid) 0
#define FMHAI_Q16FN_GFX9(dt, pg, kid) 0
#define FMHAI_Q16FN_SM90A(dt, pg, kid) FMHAI_Q16FN90_##dt(pg, kid)
#define FMHAI_Q16FN90_FP16(pg, kid) 0
#define FMHAI_Q16FN90_BF16(pg, kid) 0
#define FMHAI_Q16FN90_FP8(pg, kid) ((pg) > 0 ? FMHAI_KFN(FMHAI_CAT(kid, _q16)) : 0)

/* ---- pass 2: table entries -------------------------------------------------- */
#define FMHAI_ENTRY_ROW(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st) \
    { { FMHAI_KNAME_##fam(dt, hd, mask, sc, al, pg, bm, bn, w, st, arch), FMHAI_FAM_##fam,       \
        FMHAI_DT_##dt, FMHAI_HDQ(hd), FMHAI_ON_##mask, FMHAI_ON_##sc, FMHAI_ALIBI_ON(fam, al) & 1,   \
        bm, bn, w, st, FMHAI_CAT(FMHAI_FWD_PIPE_, arch), FMHAI_CAT(FMHA_ARCH_, arch), pg,            \
        FMHAI_LAYOUT_##fam, FMHAI_ON_##al == FMHAI_ON_BIAS, FMHAI_HDV(hd),                          \
        FMHAI_ON_##al == FMHAI_ON_DROPOUT,                                                        \
        FMHAI_CAT(FMHA_ARCH_, arch) == FMHA_ARCH_SM90A && !FMHAI_DEC_##fam &&                      \
            FMHAI_FWD90_QSUM_ROW(FMHAI_HDQ(hd), st, pg, FMHAI_KV8(dt), FMHAI_ON_##sc) },             \
      FMHAI_ROW_ENABLED(arch, upg, pg, ubm, ubn, uw, ust, bm, bn, w, st),                               \
      FMHAI_CAT(FMHAI_FWD_XSMEM_, arch)(FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, st, pg, FMHAI_VEC_##fam, \
                                        FMHAI_KV8(dt), FMHAI_ON_##al == FMHAI_ON_BIAS),                \
      FMHAI_KFN(FMHAI_KID(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st)),    \
      FMHAI_CAT(FMHAI_Q16FN_, arch)(dt, pg,                                                          \
                                    FMHAI_KID(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st)), \
      FMHAI_CAT(FMHA_ARCH_, arch) == FMHA_ARCH_SM90A && FMHAI_KV8(dt) && (pg) > 0                    \
          ? FMHAI_FWD90_SMEM_Q16(FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, st, pg) : 0 },

/* Counts the concrete rows a row expands to (a wildcard row needs >= 1). */
#define FMHAI_COUNT_ROW(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st) \
    +FMHAI_ROW_ENABLED(arch, upg, pg, ubm, ubn, uw, ust, bm, bn, w, st)

/* ---- row expansion: family -> pages -> tiles ---------------------------------- */
#define FMHAI_TILEROWS_0(R, fam, dt, hd, mask, sc, al, upg, pg, bm, bn, w, st) \
    R(fam, dt, hd, mask, sc, al, upg, pg, bm, bn, w, st, FMHAI_EXPLICIT_ARCH, bm, bn, w, st)
/* BIAS rows take their own tables (suffix B: the Hopper bias tiles take
 * shared memory, policy/fwd_tiles.h) */
#define FMHAI_TTB_NOALIBI
#define FMHAI_TTB_ALIBI
#define FMHAI_TTB_BIAS B
#define FMHAI_TTB_DROPOUT D
#define FMHAI_TILEROWS_1(R, fam, dt, hd, mask, sc, al, upg, pg, bm, bn, w, st)                         \
    FMHAI_CAT(FMHAI_TILES_, FMHAI_CAT(FMHAI_CAT(FMHAI_TTAB_##fam##_##dt, FMHAI_TTB_##al), _##hd))(      \
        R, fam, dt, hd, mask, sc, al, upg, pg, bm, bn, w, st)
#define FMHAI_TILEROWS(R, fam, dt, hd, mask, sc, al, upg, pg, bm, bn, w, st)                     \
    FMHAI_CAT(FMHAI_TILEROWS_, FMHAI_ANY4(bm, bn, w, st))(R, fam, dt, hd, mask, sc, al, upg, pg, \
                                                          bm, bn, w, st)

#define FMHAI_ROWS_FWD(R, fam, dt, hd, mask, sc, al, bm, bn, w, st) \
    FMHAI_TILEROWS(R, fam, dt, hd, mask, sc, al, 0, 0, bm, bn, w, st)
#define FMHAI_PAGES_0(R, fam, dt, hd, mask, sc, pg, bm, bn, w, st) \
    FMHAI_TILEROWS(R, fam, dt, hd, mask, sc, NOALIBI, pg, pg, bm, bn, w, st)
#define FMHAI_PAGE_ROWS(R, fam, dt, hd, mask, sc, upg, bm, bn, w, st, pg) \
    FMHAI_TILEROWS(R, fam, dt, hd, mask, sc, NOALIBI, upg, pg, bm, bn, w, st)
#define FMHAI_PAGES_1(R, fam, dt, hd, mask, sc, pg, bm, bn, w, st) \
    FMHAI_CAT(FMHAI_TUNED_PAGES_, fam)(FMHAI_PAGE_ROWS, R, fam, dt, hd, mask, sc, pg, bm, bn, w, st)
#define FMHAI_ROWS_PREFILL(R, fam, dt, hd, mask, sc, pg, bm, bn, w, st) \
    FMHAI_CAT(FMHAI_PAGES_, FMHAI_IS_ANY(pg))(R, fam, dt, hd, mask, sc, pg, bm, bn, w, st)
#define FMHAI_ROWS_PREFILL_VEC FMHAI_ROWS_PREFILL
#define FMHAI_ROWS_DECODE FMHAI_ROWS_PREFILL
#define FMHAI_ROWS_DECODE_VEC FMHAI_ROWS_PREFILL

#define FMHAI_XDEF(fam, dt, hd, mask, sc, c6, bm, bn, w, st)                                     \
    FMHA_STATIC_ASSERT(FMHAI_HDQ(hd) == FMHAI_HDV(hd) || ((FMHAI_FAM_##fam == FMHA_FAMILY_FWD ||   \
                                                           (FMHAI_FAM_##fam >= FMHA_FAMILY_BWD &&  \
                                                            FMHAI_FAM_##fam <= FMHA_FAMILY_BWD_DET)) && \
                                                          FMHAI_DT_##dt != FMHA_DTYPE_FP8),       \
                       "fmha_tile: unequal head dims (e.g. 192_128) are for 16-bit FWD and backward rows"); \
    FMHA_STATIC_ASSERT(FMHAI_HDQ(hd) % 64 == 0 || (FMHAI_FAM_##fam != FMHA_FAMILY_BATCH_PREFILL &&  \
                                                   FMHAI_FAM_##fam != FMHA_FAMILY_DECODE &&         \
                                                   FMHAI_DT_##dt != FMHA_DTYPE_FP8),              \
                       "fmha_tile: head dims 32 and 96 are for 16-bit FWD and backward rows");   \
    FMHA_STATIC_ASSERT((0 FMHAI_CAT(FMHAI_ROWS_, fam)(FMHAI_COUNT_ROW, fam, dt, hd, mask, sc, c6, \
                                                      bm, bn, w, st)) > 0,                       \
                       "fmha_tile: no tuned row matches this wildcard row's columns");           \
    FMHAI_CAT(FMHAI_ROWS_, fam)(FMHAI_KERNEL_ROW, fam, dt, hd, mask, sc, c6, bm, bn, w, st)
#define FMHAI_XENT(fam, dt, hd, mask, sc, c6, bm, bn, w, st) \
    FMHAI_CAT(FMHAI_ROWS_, fam)(FMHAI_ENTRY_ROW, fam, dt, hd, mask, sc, c6, bm, bn, w, st)

/* ---- the set ------------------------------------------------------------------ */
#define DECL_FMHA_KERNEL_SET(name, LIST)                                                 \
    LIST(FMHAI_XDEF)                                                                     \
    static const fmhai_entry FMHAI_CAT(name, _fmhai_entries)[] = { LIST(FMHAI_XENT) };  \
    static int FMHAI_UNUSED FMHAI_CAT(name, _fmhai_probe)[sizeof(FMHAI_CAT(name, _fmhai_entries)) /   \
                                             sizeof(fmhai_entry)];                       \
    static const fmha_kernel_set FMHAI_UNUSED name = {                                              \
        #name, FMHAI_CAT(name, _fmhai_entries),                                          \
        (int)(sizeof(FMHAI_CAT(name, _fmhai_entries)) / sizeof(fmhai_entry)),            \
        FMHAI_CAT(name, _fmhai_probe) };

/* ---- the library's default forward set: every feature, tuned tiles ---------- */
#define FMHAI_DEFAULT_FWD_HD(X, dt, hd)                                                   \
    X(FWD, dt, hd, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, NOMASK, SOFTCAP,   NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, MASK,   SOFTCAP,   NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, NOMASK, NOSOFTCAP, ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, MASK,   NOSOFTCAP, ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, NOMASK, SOFTCAP,   ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, MASK,   SOFTCAP,   ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
/* LINEAR pages with every mask/soft-cap variant; VECTORIZED pages (vLLM v0 /
 * CK layout) for masked prefill, with and without soft cap. */
#define FMHAI_DEFAULT_PREFILL_HD(X, dt, hd)                                                    \
    X(PREFILL,     dt, hd, NOMASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL,     dt, hd, MASK,   NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL,     dt, hd, NOMASK, SOFTCAP,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL,     dt, hd, MASK,   SOFTCAP,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL_VEC, dt, hd, MASK,   NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL_VEC, dt, hd, MASK,   SOFTCAP,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
/* e4m3 KV (bf16 or e4m3 queries): LINEAR pages, every mask/soft-cap variant. */
#define FMHAI_DEFAULT_PREFILL_FP8_HD(X, hd)                                                      \
    X(PREFILL, FP8, hd, NOMASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)      \
    X(PREFILL, FP8, hd, MASK,   NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)      \
    X(PREFILL, FP8, hd, NOMASK, SOFTCAP,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)      \
    X(PREFILL, FP8, hd, MASK,   SOFTCAP,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
/* Head dim 256 on AMD CDNA leaves out VECTORIZED pages: their tiles need 64
 * keys, 96 KB of LDS at hdim 256, more than gfx90a/gfx942 have (a problem
 * there fails with "no kernel"; gfx950's 160 KB would take them). */
#if defined(FMHA_PLATFORM_AMD)
#  define FMHAI_DEFAULT_PREFILL_HD256(X, dt)                                                       \
    X(PREFILL,     dt, 256, NOMASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL,     dt, 256, MASK,   NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL,     dt, 256, NOMASK, SOFTCAP,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL,     dt, 256, MASK,   SOFTCAP,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#  define FMHAI_DEFAULT_DECODE_HD256(X, dt)                                                      \
    X(DECODE,     dt, 256, MASK, SOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#else
#  define FMHAI_DEFAULT_PREFILL_HD256(X, dt) FMHAI_DEFAULT_PREFILL_HD(X, dt, 256)
#  define FMHAI_DEFAULT_DECODE_HD256(X, dt) FMHAI_DEFAULT_DECODE_HD(X, dt, 256)
#endif
/* Each default set is the concatenation of its per-dtype parts (the shared
 * library builds each part in its own translation unit, src/lib_parts.h). */
#define FMHAI_DEFAULT_PREFILL_FP8(X)           \
    FMHAI_DEFAULT_PREFILL_FP8_HD(X, 64)        \
    FMHAI_DEFAULT_PREFILL_FP8_HD(X, 128)       \
    FMHAI_DEFAULT_PREFILL_FP8_HD(X, 256)
#define FMHAI_DEFAULT_PREFILL_DT(X, dt)        \
    FMHAI_DEFAULT_PREFILL_HD(X, dt, 64)        \
    FMHAI_DEFAULT_PREFILL_HD(X, dt, 128)       \
    FMHAI_DEFAULT_PREFILL_HD256(X, dt)
#define FMHA_DEFAULT_PREFILL_SET(X)            \
    FMHAI_DEFAULT_PREFILL_FP8(X)               \
    FMHAI_DEFAULT_PREFILL_DT(X, FP16)          \
    FMHAI_DEFAULT_PREFILL_DT(X, BF16)
/* Decode: MASK + SOFTCAP rows serve every mask and soft cap (and ALiBi) at
 * run time; contiguous caches and LINEAR pages for every dtype (e4m3 KV
 * with bf16 or e4m3 queries), VECTORIZED pages for fp16/bf16. */
#define FMHAI_DEFAULT_DECODE_HD(X, dt, hd)                                                   \
    X(DECODE,     dt, hd, MASK, SOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)   \
    X(DECODE_VEC, dt, hd, MASK, SOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#define FMHA_DEFAULT_DECODE_SET(X)                                                          \
    X(DECODE, FP8, 64,  MASK, SOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(DECODE, FP8, 128, MASK, SOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(DECODE, FP8, 256, MASK, SOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    FMHAI_DEFAULT_DECODE_HD(X, FP16, 64)                                                     \
    FMHAI_DEFAULT_DECODE_HD(X, FP16, 128)                                                    \
    FMHAI_DEFAULT_DECODE_HD256(X, FP16)                                                      \
    FMHAI_DEFAULT_DECODE_HD(X, BF16, 64)                                                     \
    FMHAI_DEFAULT_DECODE_HD(X, BF16, 128)                                                    \
    FMHAI_DEFAULT_DECODE_HD256(X, BF16)
/* The e4m3 forward (Hopper rows only: declare it for an sm_90a build). */
#define FMHA_DEFAULT_FWD_FP8_SET(X)        \
    FMHAI_DEFAULT_FWD_HD(X, FP8, 128)      \
    FMHAI_DEFAULT_FWD_HD(X, FP8, 256)
/* Elementwise bias (BIAS rows): masked or not through one MASK kernel,
 * no soft cap, head dims up to 128 (each row is a wgmma and a portable
 * kernel on an sm_90a build; a set that needs more declares its own). */
#define FMHAI_DEFAULT_FWD_BIAS_HD(X, dt, hd)                                              \
    X(FWD, dt, hd, MASK,   NOSOFTCAP, BIAS,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
/* The NVIDIA-only forward rows (the MFMA pipeline has none of them):
 * masked or not, no soft cap, with the given bias column.
 *   192_128  DeepSeek MLA prefill's head dims (hdim_q 192, hdim_v 128),
 *            portable and wgmma rows; equal dims of 129..192 keep running
 *            on the 256 kernels (on Hopper the wgmma one, padded, beats a
 *            portable 192): a set that wants 192 rows declares them.
 *   DROPOUT  the wgmma hdim-64 kernel's dropout twin (every other kernel
 *            decides dropout at run time).
 *   32, 96   native head dims: d <= 32 and 65..96 run there where the
 *            head-dim rule (dispatch/registry.h) prefers them; the other
 *            variants on the 64 and 128 kernels, zero-padded. */
#if defined(FMHA_PLATFORM_AMD)
#  define FMHAI_DEFAULT_FWD_NV(X, dt, hd, al)
#else
#  define FMHAI_DEFAULT_FWD_NV(X, dt, hd, al)                                              \
    X(FWD, dt, hd, NOMASK, NOSOFTCAP, al, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)         \
    X(FWD, dt, hd, MASK,   NOSOFTCAP, al, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#endif
#define FMHAI_DEFAULT_FWD_DT(X, dt)        \
    FMHAI_DEFAULT_FWD_NV(X, dt, 32, NOALIBI) \
    FMHAI_DEFAULT_FWD_HD(X, dt, 64)        \
    FMHAI_DEFAULT_FWD_NV(X, dt, 96, NOALIBI) \
    FMHAI_DEFAULT_FWD_NV(X, dt, 64, DROPOUT) \
    FMHAI_DEFAULT_FWD_HD(X, dt, 128)       \
    FMHAI_DEFAULT_FWD_HD(X, dt, 256)       \
    FMHAI_DEFAULT_FWD_NV(X, dt, 192_128, NOALIBI) \
    FMHAI_DEFAULT_FWD_BIAS_HD(X, dt, 64)   \
    FMHAI_DEFAULT_FWD_BIAS_HD(X, dt, 128)
#define FMHA_DEFAULT_FWD_SET(X)            \
    FMHAI_DEFAULT_FWD_DT(X, FP16)          \
    FMHAI_DEFAULT_FWD_DT(X, BF16)

#endif /* FMHA_TILE_KERNEL_SET_H */
