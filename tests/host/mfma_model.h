/*
 * Host model of the CDNA MFMA instructions the MFMA pipeline uses, for the
 * layout tests (tests/host/test_mfma_layout.c). Plain C11.
 *
 * A wave is 64 lanes of 32-bit VGPRs, as the hardware holds them: the model
 * reads each lane's A and B VGPRs (two each: f16/bf16 packed two to a VGPR,
 * low half first; fp8 four to a VGPR, lowest byte first), decodes the bits,
 * and writes each lane's fp32 D VGPRs from D = A * B + C.
 *
 * It is written from the instruction descriptions, per instruction, in the
 * "register and lane -> matrix entry" direction of AMD's documentation (the
 * CDNA3 ISA guide's matrix-instruction chapter and the Matrix Instruction
 * Calculator's formulas), with its own constants: it never calls
 * include/fmha_tile/tile/mfma_layout.h, whose functions the test uses only
 * to scatter the operands and gather the result. So a wrong layout function
 * shows up as a wrong product.
 *
 * Element formats: f16 (IEEE binary16), bf16 (the top half of binary32), fp8
 * e4m3fnuz (gfx942: bias 8, no infinities, 0x80 is NaN). Products are summed
 * in fp32 in k order; the tests use values whose sums are exact, so the
 * hardware's internal order does not matter. Not modelled: CBSZ/ABID/BLGP,
 * multi-block shapes, denormal flushing, the OCP fp8 of gfx950.
 */
#ifndef FMHA_TILE_TESTS_MFMA_MODEL_H
#define FMHA_TILE_TESTS_MFMA_MODEL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { MFMA_MODEL_F16, MFMA_MODEL_BF16, MFMA_MODEL_FP8 };

/* ---- element formats ----------------------------------------------------- */
/* a small float format: exponent bits, mantissa bits, bias; fnuz: no -0, the
 * code with only the sign bit set is NaN (and there is no infinity) */
typedef struct mfma_fmt { int ebits, mbits, bias, fnuz; } mfma_fmt;

static inline mfma_fmt mfma_fmt_of(int type)
{
    mfma_fmt f;
    switch (type) {
    case MFMA_MODEL_BF16: f.ebits = 8; f.mbits = 7;  f.bias = 127; f.fnuz = 0; break;
    case MFMA_MODEL_FP8:  f.ebits = 4; f.mbits = 3;  f.bias = 8;   f.fnuz = 1; break;
    default:              f.ebits = 5; f.mbits = 10; f.bias = 15;  f.fnuz = 0; break;
    }
    return f;
}

static inline float mfma_decode(int type, uint32_t code)
{
    mfma_fmt f = mfma_fmt_of(type);
    uint32_t sign = code >> (f.ebits + f.mbits) & 1u;
    uint32_t e = code >> f.mbits & ((1u << f.ebits) - 1u);
    uint32_t m = code & ((1u << f.mbits) - 1u);
    double v;
    if (f.fnuz && sign && e == 0 && m == 0) return NAN;
    if (!f.fnuz && e == (1u << f.ebits) - 1u) return m ? NAN : (sign ? -INFINITY : INFINITY);
    if (e == 0) v = ldexp((double)m, 1 - f.bias - f.mbits);
    else v = ldexp((double)(m | 1u << f.mbits), (int)e - f.bias - f.mbits);
    return (float)(sign ? -v : v);
}

/* exact encode of a value the format holds (the tests pick such values);
 * returns -1 when it is not representable */
static inline long mfma_encode(int type, double v)
{
    mfma_fmt f = mfma_fmt_of(type);
    uint32_t sign = v < 0, e, m;
    double a = fabs(v), q;
    int ex;
    if (a == 0) return f.fnuz ? 0 : (long)(sign << (f.ebits + f.mbits));
    frexp(a, &ex);
    ex -= 1;                                    /* a in [2^ex, 2^(ex+1)) */
    if (ex + f.bias >= 1) { e = (uint32_t)(ex + f.bias); q = ldexp(a, f.mbits - ex) - ldexp(1.0, f.mbits); }
    else { e = 0; q = ldexp(a, f.mbits + f.bias - 1); }
    if (q != floor(q) || e >= (1u << f.ebits) - (f.fnuz ? 0u : 1u)) return -1;
    m = (uint32_t)q;
    if (mfma_decode(type, sign << (f.ebits + f.mbits) | e << f.mbits | m) != (float)v) return -1;
    return (long)(sign << (f.ebits + f.mbits) | e << f.mbits | m);
}

/* ---- the wave's registers -------------------------------------------------- */
typedef struct mfma_wave_ab { uint32_t v[64][2]; } mfma_wave_ab;   /* A or B: 2 VGPRs */
typedef struct mfma_wave_d { float v[64][16]; } mfma_wave_d;      /* C/D: 16 (or 4) VGPRs */

/* element `e` of a lane's 64-bit A/B fragment: per the register layout, the
 * fragment is little-endian, element 0 in the lowest bits of the first VGPR */
static inline float mfma_frag_elem(const mfma_wave_ab *r, int type, int lane, int e)
{
    uint64_t bits = (uint64_t)r->v[lane][1] << 32 | r->v[lane][0];
    int w = type == MFMA_MODEL_FP8 ? 8 : 16;
    return mfma_decode(type, (uint32_t)(bits >> (e * w)) & ((1u << w) - 1u));
}

/* ---- the instructions ------------------------------------------------------- */
/* The register -> entry maps of the documentation, per instruction family:
 *
 * 32 x 32 outputs (32x32x8 f16/bf16_1k, 32x32x16 fp8):
 *   A: lane L, element e holds A[L mod 32][KL * floor(L / 32) + e]
 *   B: lane L, element e holds B[KL * floor(L / 32) + e][L mod 32]
 *   D: lane L, VGPR r holds D[8 * floor(r / 4) + 4 * floor(L / 32) + r mod 4][L mod 32]
 * 16 x 16 outputs (16x16x16 f16/bf16_1k, 16x16x32 fp8):
 *   A: lane L, element e holds A[L mod 16][KL * floor(L / 16) + e]
 *   B: lane L, element e holds B[KL * floor(L / 16) + e][L mod 16]
 *   D: lane L, VGPR r holds D[4 * floor(L / 16) + r][L mod 16]
 * with KL = 4 elements a lane for f16/bf16, 8 for fp8 (64 bits a lane).
 *
 * The model builds the two input matrices from the registers with those maps,
 * then computes every output VGPR from its own entry. */
static inline void mfma_model_run(int out32, int type, const mfma_wave_ab *ra, const mfma_wave_ab *rb,
                           const mfma_wave_d *rc, mfma_wave_d *rd)
{
    float a[32][32], b[32][32];              /* [m][k], [k][n]; K <= 32 */
    int kl = type == MFMA_MODEL_FP8 ? 8 : 4;
    int mn = out32 ? 32 : 16, K = kl * 64 / mn, nregs = out32 ? 16 : 4;
    int L, e, r, k;
    for (L = 0; L < 64; ++L)
        for (e = 0; e < kl; ++e) {
            a[L % mn][kl * (L / mn) + e] = mfma_frag_elem(ra, type, L, e);
            b[kl * (L / mn) + e][L % mn] = mfma_frag_elem(rb, type, L, e);
        }
    for (L = 0; L < 64; ++L)
        for (r = 0; r < nregs; ++r) {
            int i = out32 ? 8 * (r / 4) + 4 * (L / 32) + r % 4 : 4 * (L / 16) + r;
            int j = L % mn;
            float acc = rc->v[L][r];
            for (k = 0; k < K; ++k) acc += a[i][k] * b[k][j];
            rd->v[L][r] = acc;
        }
    for (L = 0; L < 64; ++L)
        for (r = nregs; r < 16; ++r) rd->v[L][r] = 0.0f;
}

static inline void v_mfma_f32_32x32x8f16(const mfma_wave_ab *a, const mfma_wave_ab *b, const mfma_wave_d *c, mfma_wave_d *d)
{ mfma_model_run(1, MFMA_MODEL_F16, a, b, c, d); }
static inline void v_mfma_f32_32x32x8bf16_1k(const mfma_wave_ab *a, const mfma_wave_ab *b, const mfma_wave_d *c, mfma_wave_d *d)
{ mfma_model_run(1, MFMA_MODEL_BF16, a, b, c, d); }
static inline void v_mfma_f32_16x16x16f16(const mfma_wave_ab *a, const mfma_wave_ab *b, const mfma_wave_d *c, mfma_wave_d *d)
{ mfma_model_run(0, MFMA_MODEL_F16, a, b, c, d); }
static inline void v_mfma_f32_16x16x16bf16_1k(const mfma_wave_ab *a, const mfma_wave_ab *b, const mfma_wave_d *c, mfma_wave_d *d)
{ mfma_model_run(0, MFMA_MODEL_BF16, a, b, c, d); }
static inline void v_mfma_f32_32x32x16_fp8_fp8(const mfma_wave_ab *a, const mfma_wave_ab *b, const mfma_wave_d *c, mfma_wave_d *d)
{ mfma_model_run(1, MFMA_MODEL_FP8, a, b, c, d); }
static inline void v_mfma_f32_16x16x32_fp8_fp8(const mfma_wave_ab *a, const mfma_wave_ab *b, const mfma_wave_d *c, mfma_wave_d *d)
{ mfma_model_run(0, MFMA_MODEL_FP8, a, b, c, d); }

/* ---- wave64 lane permutations (gfx9) ----------------------------------------- */
/* What a wave can exchange without LDS traffic, as used by a row reduction.
 * Each returns, for every lane, the value of the source lane it reads. */

/* DPP quad_perm: inside each group of 4 lanes, lane i reads lane sel[i] */
static inline void mfma_dpp_quad_perm(const float *src, float *dst, const int sel[4])
{
    int l;
    for (l = 0; l < 64; ++l) dst[l] = src[(l & ~3) | sel[l & 3]];
}
/* DPP row_ror:n: rotate right by n inside each row of 16 lanes (data moves
 * to higher lanes: lane i reads lane i - n of its row, wrapping) */
static inline void mfma_dpp_row_ror(const float *src, float *dst, int n)
{
    int l;
    for (l = 0; l < 64; ++l) dst[l] = src[(l & ~15) | ((l - n) & 15)];
}
/* ds_swizzle_b32 bit mode: inside each group of 32 lanes, lane i reads lane
 * ((i & and_mask) | or_mask) ^ xor_mask (masks of 5 bits) */
static inline void mfma_ds_swizzle(const float *src, float *dst, int and_mask, int or_mask, int xor_mask)
{
    int l;
    for (l = 0; l < 64; ++l) dst[l] = src[(l & 32) | ((((l & 31) & and_mask) | or_mask) ^ xor_mask)];
}
/* ds_bpermute_b32: lane i reads lane addr[i] / 4 (any lane of the wave) */
static inline void mfma_ds_bpermute(const float *src, float *dst, const int *byte_addr)
{
    int l;
    for (l = 0; l < 64; ++l) dst[l] = src[(byte_addr[l] / 4) & 63];
}

#endif /* FMHA_TILE_TESTS_MFMA_MODEL_H */
