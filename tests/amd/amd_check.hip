/*
 * AMD device-code compile check: the library's default forward set (fp16 and
 * bf16, head dims 64/128/256, every mask/softcap/ALiBi combination, the GFX9
 * tuned tiles), compiled device-only for CDNA by tests/amd/check.sh.
 * FMHA_AMD_CHECK_SUBSET selects a smaller representative set.
 */
#include "fmha_tile.h"

#if defined(FMHA_AMD_CHECK_SUBSET)
#  define AMD_CHECK_SET(X)                                                               \
    X(FWD, BF16, 64,  NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD, BF16, 128, MASK,   SOFTCAP,   ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD, FP16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD, FP16, 256, MASK,   SOFTCAP,   ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD, BF16, 256, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(amd_set, AMD_CHECK_SET)
#else
DECL_FMHA_KERNEL_SET(amd_set, FMHA_DEFAULT_FWD_SET)
#endif

/* Keeps the set (and through its table, every kernel) referenced. */
const fmha_kernel_set *fmha_amd_check_set(void) { return &amd_set; }
