/*
 * test_bwd_stage1.cu - test_bwd.cu with every portable backward row
 * single-buffered (stages 1), so the one-stage schedule (the next Q/dO tile
 * loaded during the dQ product; deterministic: after the dQ adds, which read
 * through the Q/dO buffers) runs on GPUs whose shared memory would pick
 * stages 2. Built from the default set's rows of the head dims the portable
 * pipeline serves on an sm_90 (32, 96, 256, 192_128; the wgmma rows take 64
 * and 128 there), with the problems those rows serve.
 */
#define FMHAI_TILES_SM80_BWD_64(Y, ...) Y(__VA_ARGS__, SM80, 128, 128, 8, 1)
#define FMHAI_TILES_SM80_BWD_128(Y, ...) Y(__VA_ARGS__, SM80, 64, 128, 8, 1)
#define FMHAI_TILES_SM80_BWD_256(Y, ...) Y(__VA_ARGS__, SM80, 64, 64, 4, 1)
#define FMHAI_TILES_SM80_BWD_192_128(Y, ...) Y(__VA_ARGS__, SM80, 64, 96, 6, 1)
#define FMHAI_TILES_SM80_BWD_32(Y, ...) Y(__VA_ARGS__, SM80, 128, 128, 8, 1)
#define FMHAI_TILES_SM80_BWD_96(Y, ...) Y(__VA_ARGS__, SM80, 64, 96, 6, 1)
#define STAGE1_HD_32(X, ...) X(__VA_ARGS__)
#define STAGE1_HD_64(X, ...)
#define STAGE1_HD_96(X, ...) X(__VA_ARGS__)
#define STAGE1_HD_128(X, ...)
#define STAGE1_HD_256(X, ...) X(__VA_ARGS__)
#define STAGE1_HD_192_128(X, ...) X(__VA_ARGS__)
#define TEST_BWD_VARIANT_ROW(X, fam, dt, hd, ...) STAGE1_HD_##hd(X, fam, dt, hd, __VA_ARGS__)
#define TEST_BWD_VARIANT_KEEP(c) (!(c)->set && cfg_pad_hd(c) != 64 && cfg_pad_hd(c) != 128)
#define TEST_BWD_VARIANT_PLAN(plan) ((plan)->dq_dk_dv->stages == 1)
#include "test_bwd.cu"
