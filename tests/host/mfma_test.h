/*
 * The MFMA host-model tests' harness (tests/host/test_fwd_mfma_model.c,
 * test_bwd_mfma_model.c): PASS/FAIL lines counted into g_pass / g_fail, a
 * xorshift generator (each test seeds g_rng first thing in main), exact
 * small values, and the 16-bit rounding, codes and fragments the pipeline's
 * conversions give, run on the instruction model (mfma_model.h).
 */
#ifndef FMHA_TILE_TESTS_MFMA_TEST_H
#define FMHA_TILE_TESTS_MFMA_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include "host/mfma_model.h"

static int g_pass, g_fail;
static inline void check(int ok, const char *what, const char *shape)
{
    if (ok) ++g_pass;
    else ++g_fail;
    printf("%s %s %s\n", ok ? "PASS" : "FAIL", what, shape);
}

static uint64_t g_rng;
static inline uint32_t rnd(void)
{
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
/* small values every 16-bit format holds exactly; their products and sums
 * (head dim <= 256) stay exact in fp32 */
static inline double rnd_val(void)
{
    static const double vals[] = { -1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, -0.125, 0.125 };
    return vals[rnd() % (sizeof vals / sizeof vals[0])];
}

/* round to the 16-bit type, as the pipeline's conversion does (nearest even) */
static inline double round16(double x, int type)
{
    float f = (float)x;
    if (type == MFMA_MODEL_BF16) {
        uint32_t u;
        memcpy(&u, &f, 4);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&f, &u, 4);
        return f;
    } else {
        int e;
        if (x == 0) return 0;
        frexp(x, &e);                         /* x = m 2^e, |m| in [0.5, 1) */
        if (e < -13) e = -13;                 /* f16 subnormals: fixed 2^-24 step */
        return ldexp(nearbyint(ldexp(x, 11 - e)), e - 11);
    }
}
static inline uint16_t code16(double x, int type)
{
    long c = mfma_encode(type, x);
    if (c < 0) { fprintf(stderr, "value %g not representable\n", x); exit(2); }
    return (uint16_t)c;
}

/* a lane's 64-bit fragment from 4 16-bit codes (slot 0 lowest) */
static inline void frag_set(mfma_wave_ab *r, int lane, const uint16_t c[4])
{
    r->v[lane][0] = (uint32_t)c[0] | (uint32_t)c[1] << 16;
    r->v[lane][1] = (uint32_t)c[2] | (uint32_t)c[3] << 16;
}
/* d = a b + d on v_mfma_f32_32x32x8 of the type */
static inline void run_model(int type, const mfma_wave_ab *a, const mfma_wave_ab *b, mfma_wave_d *d)
{
    mfma_wave_d t;
    if (type == MFMA_MODEL_BF16) v_mfma_f32_32x32x8bf16_1k(a, b, d, &t);
    else v_mfma_f32_32x32x8f16(a, b, d, &t);
    *d = t;
}

#endif /* FMHA_TILE_TESTS_MFMA_TEST_H */
