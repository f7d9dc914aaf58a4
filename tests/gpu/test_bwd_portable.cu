/*
 * test_bwd_portable.cu - test_bwd.cu without the Hopper (wgmma) rows, so that
 * an sm_90 GPU runs the portable pipeline's tuned rows at head dims 64 and
 * 128 (the rows an sm_80 GPU runs; test_bwd.cu itself picks the wgmma
 * pipeline for them there and runs the portable rows of the other head
 * dims). Built from the default set's rows of those two head dims, with the
 * problems they serve.
 */
#define FMHAI_TILES_SM90A_BWD_64(Y, ...)
#define FMHAI_TILES_SM90A_BWD_128(Y, ...)
#define PORT_HD_32(X, ...)
#define PORT_HD_64(X, ...) X(__VA_ARGS__)
#define PORT_HD_96(X, ...)
#define PORT_HD_128(X, ...) X(__VA_ARGS__)
#define PORT_HD_256(X, ...)
#define PORT_HD_192_128(X, ...)
#define TEST_BWD_VARIANT_ROW(X, fam, dt, hd, ...) PORT_HD_##hd(X, fam, dt, hd, __VA_ARGS__)
#define TEST_BWD_VARIANT_KEEP(c) (!(c)->set && (cfg_pad_hd(c) == 64 || cfg_pad_hd(c) == 128))
#define TEST_BWD_VARIANT_PLAN(plan) ((plan)->dq_dk_dv->arch == FMHA_ARCH_SM80)
#include "test_bwd.cu"
