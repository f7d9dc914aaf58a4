/*
 * AMD device-code compile check (tests/amd/check.sh): kernels of the
 * portable forward pipeline compiled device-only for CDNA (gfx942, gfx90a).
 *
 * Default: a representative subset, fp16 and bf16 at head dims 64, 128 and
 * 256, each with every feature on (MASK + SOFTCAP + ALIBI) and every feature
 * off, on the GFX9 tuned tiles (12 kernels). With FMHA_AMD_CHECK_FULL: the
 * library's whole default forward set (48 kernels, about 4x the time).
 */
#include "fmha_tile.h"

#if !defined(FMHA_AMD_CHECK_FULL)
#  define AMD_CHECK_HD(X, dt, hd)                                                        \
    X(FWD, dt, hd, MASK,   SOFTCAP,   ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(FWD, dt, hd, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#  define AMD_CHECK_SET(X)                                                               \
    AMD_CHECK_HD(X, FP16, 64) AMD_CHECK_HD(X, FP16, 128) AMD_CHECK_HD(X, FP16, 256)      \
    AMD_CHECK_HD(X, BF16, 64) AMD_CHECK_HD(X, BF16, 128) AMD_CHECK_HD(X, BF16, 256)
DECL_FMHA_KERNEL_SET(amd_set, AMD_CHECK_SET)
#else
DECL_FMHA_KERNEL_SET(amd_set, FMHA_DEFAULT_FWD_SET)
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
