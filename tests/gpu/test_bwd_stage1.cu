/*
 * test_bwd_stage1.cu - test_bwd.cu with every backward row single-buffered
 * (stages 1), so the one-stage schedule (the next Q/dO tile loaded during
 * the dQ product; deterministic: after the dQ adds, which read through the
 * Q/dO buffers) runs on GPUs whose shared memory would pick stages 2.
 */
#define FMHAI_TILES_SM80_BWD_64(Y, ...) Y(__VA_ARGS__, SM80, 128, 128, 8, 1)
#define FMHAI_TILES_SM80_BWD_128(Y, ...) Y(__VA_ARGS__, SM80, 64, 128, 8, 1)
#define FMHAI_TILES_SM80_BWD_256(Y, ...) Y(__VA_ARGS__, SM80, 64, 64, 4, 1)
#define FMHAI_TILES_SM80_BWD_192_128(Y, ...) Y(__VA_ARGS__, SM80, 64, 96, 6, 1)
#define FMHAI_TILES_SM80_BWD_32(Y, ...) Y(__VA_ARGS__, SM80, 128, 128, 8, 1)
#define FMHAI_TILES_SM80_BWD_96(Y, ...) Y(__VA_ARGS__, SM80, 64, 96, 6, 1)
#include "test_bwd.cu"
