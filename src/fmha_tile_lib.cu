/*
 * fmha_tile_lib.cu: the main translation unit of the shared library
 * build/libfmha_tile.so (`make lib`; the decode set has its own unit,
 * fmha_tile_lib_decode.cu).
 *
 * It joins the library's default kernel set from its parts (src/lib_parts.h:
 * the forward, e4m3 forward, batch prefill and backward rows with the tuned
 * tiles of include/fmha_tile/policy, one unit per part and dtype), builds
 * the helper kernels (split-KV combine, append-KV) and exports the C API of
 * include/fmha_tile/api.h with C linkage. FMHA_TILE_BUILD_SHARED turns
 * FMHA_API into `extern "C" __attribute__((visibility("default")))`; the build
 * compiles with -fvisibility=hidden, so those entry points are the only
 * symbols the library exports (the Makefile checks this with nm -D).
 *
 * Users of the header-only library are not affected: this file is the only
 * place that defines FMHA_TILE_BUILD_SHARED. A C program links the library
 * with FMHA_TILE_LINK_SHARED defined (examples/c_api.c); the Python package
 * python/fmha_tile loads it with ctypes.
 *
 * Build (what `make -j lib` runs, per unit, side by side, then links them):
 *   nvcc -x cu -std=c++17 -O3 -Iinclude -Xcompiler -fPIC -Xcompiler -fvisibility=hidden \
 *        -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a \
 *        -c src/fmha_tile_lib.cu -o build/lib/fmha_tile_lib.o
 *   (the same with -DFMHA_LIB_PART=<part> -c src/fmha_tile_lib_part.cu per part)
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
/* Every family the library has, with the tuned tiles, built in parts
 * (src/lib_parts.h: one unit each, src/fmha_tile_lib_part.cu); this unit
 * joins the parts' tables, in the list's order, into one set the first time
 * it is asked for. The entries are copied (their kernels stay in the parts'
 * units); the set keeps its own probe cache. */
#include <pthread.h>
#include <stdlib.h>
#include "lib_parts.h"

#ifndef FMHA_LIB_SET_NAME   /* a set declared from Python names itself (lib_parts.h) */
#  define FMHA_LIB_SET_NAME "fmha_lib_default"
#endif

#define FMHAI_LIB_PART_FN(n, a) extern "C" const fmha_kernel_set *fmhai_lib_part_##n(void);
FMHA_LIB_PARTS(FMHAI_LIB_PART_FN, ~)
#define FMHAI_LIB_PART_PTR(n, a) fmhai_lib_part_##n(),

static fmha_kernel_set fmhai_lib_default;
static pthread_once_t fmhai_lib_default_once = PTHREAD_ONCE_INIT;

static void fmhai_lib_join_parts(void)
{
    const fmha_kernel_set *parts[] = { FMHA_LIB_PARTS(FMHAI_LIB_PART_PTR, ~) };
    const int np = (int)(sizeof(parts) / sizeof(parts[0]));
    int total = 0, n = 0;
    for (int k = 0; k < np; ++k) total += parts[k]->count;
    fmhai_entry *e = (fmhai_entry *)malloc(sizeof(fmhai_entry) * (size_t)total);
    int *probe = (int *)calloc((size_t)total, sizeof(int));
    if (!e || !probe) {
        free(e);
        free(probe);
        return;   /* count stays 0: fmha_default_kernel_set reports NULL */
    }
    for (int k = 0; k < np; ++k)
        for (int i = 0; i < parts[k]->count; ++i) e[n++] = parts[k]->entries[i];
    fmhai_lib_default.name = FMHA_LIB_SET_NAME;
    fmhai_lib_default.entries = e;
    fmhai_lib_default.probe = probe;
    fmhai_lib_default.count = n;
}

/* ---- shared-library entry points (api.h, FMHA_TILE_BUILD_SHARED) ------------ */
FMHA_API const fmha_kernel_set *fmha_default_kernel_set(void)
{
    if (pthread_once(&fmhai_lib_default_once, fmhai_lib_join_parts) != 0 || fmhai_lib_default.count == 0) {
        fmhai_fail(FMHA_ERR_INVALID_ARG, "fmha_default_kernel_set: cannot join the library's kernel tables");
        return NULL;
    }
    return &fmhai_lib_default;
}

FMHA_API const char *fmha_version(void)
{
    return FMHA_TILE_LIB_VERSION;
}
