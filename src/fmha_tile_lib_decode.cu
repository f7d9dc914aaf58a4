/*
 * fmha_tile_lib_decode.cu: the decode family's translation unit of the shared
 * library build/libfmha_tile.so (`make lib`), compiled beside
 * src/fmha_tile_lib.cu so that the library's build does not grow one unit
 * per family.
 *
 * It declares the library's decode kernel set (FMHA_DEFAULT_DECODE_SET) and
 * exports one function, fmha_default_decode_kernel_set(), the set to pass to
 * fmha_decode_plan_make / fmha_decode. The C API itself (fmha_decode_run,
 * the combine and append-KV kernels included) lives in fmha_tile_lib.cu;
 * this unit includes the header without FMHA_TILE_BUILD_SHARED, so its own
 * copies of the API functions stay static and unused, and only the function
 * below is exported; FMHA_TILE_SETS_ONLY leaves the helper kernels to that
 * unit, so each is built once. A set declared from Python
 * (FMHA_LIB_ROWS_HEADER, python/fmha_tile/jit.py) returns its joined set.
 */
#define FMHA_TILE_SETS_ONLY 1
#include "fmha_tile.h"

#if defined(FMHA_LIB_ROWS_HEADER)
/* A kernel set declared from Python (src/lib_parts.h): its decode rows are a
 * part of the joined set like every other family's, and selection filters by
 * family, so the decode set is the whole set. */
extern "C" const fmha_kernel_set *fmha_default_kernel_set(void);

extern "C" __attribute__((visibility("default"))) const fmha_kernel_set *fmha_default_decode_kernel_set(void)
{
    return fmha_default_kernel_set();
}
#else
DECL_FMHA_KERNEL_SET(fmha_lib_decode, FMHA_DEFAULT_DECODE_SET)

extern "C" __attribute__((visibility("default"))) const fmha_kernel_set *fmha_default_decode_kernel_set(void)
{
    return &fmha_lib_decode;
}
#endif
