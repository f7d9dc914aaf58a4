/*
 * fmha_tile_lib_part.cu: one part of the shared library's default kernel set
 * (src/lib_parts.h), compiled once per part with -DFMHA_LIB_PART=<name>.
 *
 * It declares the part's rows as a kernel set and hands its table to the
 * main unit (src/fmha_tile_lib.cu) through fmhai_lib_part_<name>(), a
 * hidden symbol: the library still exports only the C API. The unit
 * defines FMHA_TILE_SETS_ONLY, so the helper kernels (split-KV combine,
 * append-KV) are built once, in the main unit.
 */
#define FMHA_TILE_SETS_ONLY 1
#include "fmha_tile.h"
#include "lib_parts.h"

#ifndef FMHA_LIB_PART
#  error "compile with -DFMHA_LIB_PART=<a part of src/lib_parts.h>"
#endif

#define FMHAI_LIB_DECL_PART(n)                                                   \
    DECL_FMHA_KERNEL_SET(fmhai_lib_set_##n, FMHAI_LIB_ROWS_##n)                  \
    extern "C" const fmha_kernel_set *fmhai_lib_part_##n(void) { return &fmhai_lib_set_##n; }
#define FMHAI_LIB_DECL_PART_(n) FMHAI_LIB_DECL_PART(n)

FMHAI_LIB_DECL_PART_(FMHA_LIB_PART)
