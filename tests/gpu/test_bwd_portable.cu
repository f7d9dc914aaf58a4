/*
 * test_bwd_portable.cu - test_bwd.cu without the Hopper (wgmma) rows, so that
 * an sm_90 GPU runs the portable pipeline's tuned rows for every head dim
 * (the rows an sm_80 GPU runs; test_bwd.cu itself picks the wgmma pipeline
 * for hdim 64 and 128 there).
 */
#define FMHAI_TILES_SM90A_BWD_64(Y, ...)
#define FMHAI_TILES_SM90A_BWD_128(Y, ...)
#include "test_bwd.cu"
