/*
 * lib_parts.h: how the shared library's default kernel set is cut into
 * translation units, one per part, so that `make -j` builds them side by
 * side and no unit grows with every family.
 *
 * FMHA_LIB_PARTS(P, a) lists the parts in the default set's order; part n
 * holds the rows FMHAI_LIB_ROWS_<n>(X), each a per-dtype piece of a default
 * set macro of the headers (FMHA_DEFAULT_FWD_SET is FMHAI_DEFAULT_FWD_DT of
 * FP16 then BF16, and so on), so the headers' X-macro tables stay the one
 * source of the rows. The Makefile reads the part names from this list
 * (one object src/fmha_tile_lib_part.cu -DFMHA_LIB_PART=<n> each), the main
 * unit src/fmha_tile_lib.cu joins the parts' tables into the set that
 * fmha_default_kernel_set() returns, and FMHA_LIB_DEFAULT_SET is the same
 * rows as one list (a single unit declaring it builds the same kernels:
 * tests/host/test_lib_registry.c compares the names).
 *
 * The decode set is not a part: it has its own unit and entry point
 * (src/fmha_tile_lib_decode.cu, fmha_default_decode_kernel_set). The e4m3
 * forward has Hopper rows only; the library is an NVIDIA build.
 */
#ifndef FMHA_TILE_LIB_PARTS_H
#define FMHA_TILE_LIB_PARTS_H

#if defined(FMHA_LIB_ROWS_HEADER)
/* A kernel set declared from Python (python/fmha_tile/jit.py): the generated
 * header defines FMHA_LIB_PARTS and FMHAI_LIB_ROWS_<part> as below (one part
 * per family of its rows, decode included) and FMHA_LIB_SET_NAME, and the
 * same units build a library of those rows instead of the default set. */
#  include FMHA_LIB_ROWS_HEADER
#else

#define FMHA_LIB_PARTS(P, a) \
    P(fwd_fp16, a)           \
    P(fwd_bf16, a)           \
    P(fwd_fp8, a)            \
    P(prefill_fp8, a)        \
    P(prefill_fp16, a)       \
    P(prefill_bf16, a)       \
    P(bwd_fp16, a)           \
    P(bwd_bf16, a)

#define FMHAI_LIB_ROWS_fwd_fp16(X) FMHAI_DEFAULT_FWD_DT(X, FP16)
#define FMHAI_LIB_ROWS_fwd_bf16(X) FMHAI_DEFAULT_FWD_DT(X, BF16)
#define FMHAI_LIB_ROWS_fwd_fp8(X) FMHA_DEFAULT_FWD_FP8_SET(X)
#define FMHAI_LIB_ROWS_prefill_fp8(X) FMHAI_DEFAULT_PREFILL_FP8(X)
#define FMHAI_LIB_ROWS_prefill_fp16(X) FMHAI_DEFAULT_PREFILL_DT(X, FP16)
#define FMHAI_LIB_ROWS_prefill_bf16(X) FMHAI_DEFAULT_PREFILL_DT(X, BF16)
#define FMHAI_LIB_ROWS_bwd_fp16(X) FMHAI_DEFAULT_BWD_DT(X, FP16)
#define FMHAI_LIB_ROWS_bwd_bf16(X) FMHAI_DEFAULT_BWD_DT(X, BF16)
#endif /* FMHA_LIB_ROWS_HEADER */

/* Every part's rows, in order: the default set as one list. */
#define FMHAI_LIB_ROWS_OF(n, X) FMHAI_LIB_ROWS_##n(X)
#define FMHA_LIB_DEFAULT_SET(X) FMHA_LIB_PARTS(FMHAI_LIB_ROWS_OF, X)

#endif /* FMHA_TILE_LIB_PARTS_H */
