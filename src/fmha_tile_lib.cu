/*
 * fmha_tile_lib.cu: the main translation unit of the shared library
 * build/libfmha_tile.so (`make lib`; the decode set has its own unit,
 * fmha_tile_lib_decode.cu).
 *
 * It declares the library's default kernel set (FMHA_DEFAULT_FWD_SET, on NVIDIA
 * FMHA_DEFAULT_FWD_FP8_SET and, where the headers have them,
 * FMHA_DEFAULT_PREFILL_SET and FMHA_DEFAULT_BWD_SET: every family the library
 * has, with the tuned tiles of include/fmha_tile/policy/fwd_tiles.h) and exports the
 * C API of include/fmha_tile/api.h with C linkage. FMHA_TILE_BUILD_SHARED turns
 * FMHA_API into `extern "C" __attribute__((visibility("default")))`; the build
 * compiles with -fvisibility=hidden, so those entry points are the only
 * symbols the library exports (the Makefile checks this with nm -D).
 *
 * Users of the header-only library are not affected: this file is the only
 * place that defines FMHA_TILE_BUILD_SHARED. A C program links the library
 * with FMHA_TILE_LINK_SHARED defined (examples/c_api.c); the Python package
 * python/fmha_tile loads it with ctypes.
 *
 * Build (what `make lib` runs, per unit, then links them):
 *   nvcc -x cu -std=c++17 -O3 -Iinclude -Xcompiler -fPIC -Xcompiler -fvisibility=hidden \
 *        -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a \
 *        -c src/fmha_tile_lib.cu -o build/lib/fmha_tile_lib.o
 *   nvcc -shared -cudart shared ... build/lib/*.o -o build/libfmha_tile.so
 * `-cudart shared` makes the library use libcudart.so, the same CUDA runtime
 * that a C program (-lcudart) or PyTorch loads, so streams and the current
 * device are shared with the caller.
 */
#define FMHA_TILE_BUILD_SHARED 1
#include "fmha_tile.h"

/* Library version; the Makefile appends the git revision when it has one. */
#define FMHA_TILE_LIB_VERSION_BASE "0.1.0"
#ifdef FMHA_TILE_LIB_GIT
#  define FMHA_TILE_LIB_VERSION FMHA_TILE_LIB_VERSION_BASE "+g" FMHA_TILE_LIB_GIT
#else
#  define FMHA_TILE_LIB_VERSION FMHA_TILE_LIB_VERSION_BASE
#endif

/* ---- the default kernel set ------------------------------------------------ */
/* Every family the library has, with the tuned tiles: the forward rows, and the
 * batch-prefill (paged KV) rows where the headers define them. A family that
 * lands later adds its FMHA_DEFAULT_<FAMILY>_SET here. The e4m3 forward has
 * only Hopper rows: an AMD build has none to expand (a wildcard row without
 * tuned rows stops the build), and on an sm_80 device its problems report
 * FMHA_ERR_NO_KERNEL. */
#if defined(FMHA_PLATFORM_NVIDIA) && defined(FMHA_DEFAULT_FWD_FP8_SET)
#  define FMHA_LIB_FWD_ROWS(X) FMHA_DEFAULT_FWD_SET(X) FMHA_DEFAULT_FWD_FP8_SET(X)
#else
#  define FMHA_LIB_FWD_ROWS(X) FMHA_DEFAULT_FWD_SET(X)
#endif
#if defined(FMHA_DEFAULT_PREFILL_SET)
#  define FMHA_LIB_FWD_SETS(X) FMHA_LIB_FWD_ROWS(X) FMHA_DEFAULT_PREFILL_SET(X)
#else
#  define FMHA_LIB_FWD_SETS(X) FMHA_LIB_FWD_ROWS(X)
#endif
#if defined(FMHA_DEFAULT_BWD_SET)
#  define FMHA_LIB_DEFAULT_SET(X) FMHA_LIB_FWD_SETS(X) FMHA_DEFAULT_BWD_SET(X)
#else
#  define FMHA_LIB_DEFAULT_SET(X) FMHA_LIB_FWD_SETS(X)
#endif
DECL_FMHA_KERNEL_SET(fmha_lib_default, FMHA_LIB_DEFAULT_SET)

/* ---- shared-library entry points (api.h, FMHA_TILE_BUILD_SHARED) ------------ */
FMHA_API const fmha_kernel_set *fmha_default_kernel_set(void)
{
    return &fmha_lib_default;
}

FMHA_API const char *fmha_version(void)
{
    return FMHA_TILE_LIB_VERSION;
}
