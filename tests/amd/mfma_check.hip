/*
 * AMD compile check of the MFMA primitives (tile/wave_mma.h) and of the
 * layout functions (tile/mfma_layout.h) called from device code; compiled by
 * tests/amd/check_mfma.sh for gfx90a and gfx942, never run (no AMD GPU here).
 *
 * One kernel per shape computes, per wave, the score tile of attention's first
 * GEMM, S[32 x 64] = Q[32 x 128] * K^T (a head dimension of 128 as the K loop,
 * two or four N blocks), reads its fragments from global memory at the places
 * mfma_layout.h gives, then takes the softmax's row max and row sum of S and
 * stores S, max and sum back; two more kernels chain S^T = K Q^T, the
 * softmax's max and exp2, and O^T = V^T P^T with P kept in registers (f16,
 * bf16). The script checks the MFMA instructions are
 * emitted and reports VGPR/AGPR use and spills.
 */
#include "fmha_tile/tile/wave_mma.h"

#define MFMA_CHECK_D 128                  /* head dimension: the K loop */
#define MFMA_CHECK_TN 64                  /* key columns of the tile */

typedef short mfma_check_s16x4 __attribute__((ext_vector_type(4)));   /* 4 f16/bf16 as bits */

/* Q is [32][D] row-major, K is [64][D] row-major (so B = K^T: element (k, n)
 * at K[n][k]); 16-bit elements as their bits. A fragment gathers its 4
 * elements one by one at the places mfma_layout.h gives (a real loader reads
 * them with one 8-byte load: they are consecutive in k). */
FMHAI_DEVICE mfma_check_s16x4 mfma_check_frag16(const unsigned short *m, int is_b, fmhai_mfma_shape sh,
                                               int lane, int row0, int k0)
{
    mfma_check_s16x4 f;
    int e;
    for (e = 0; e < 4; ++e) {
        fmhai_mfma_rc p = is_b ? fmhai_mfma_b_elem(sh, lane, e) : fmhai_mfma_a_elem(sh, lane, e);
        int r = is_b ? p.col : p.row, k = is_b ? p.row : p.col;
        f[e] = (short)m[(row0 + r) * MFMA_CHECK_D + k0 + k];
    }
    return f;
}

/* 32x32 shapes: two N blocks of 32 keys, D = 16 floats a lane each */
FMHAI_DEVICE void mfma_check_body32(const unsigned short *q, const unsigned short *kmat, float *s,
                                    float *rowstat, int is_bf16)
{
    const fmhai_mfma_shape sh = is_bf16 ? FMHAI_MFMA_32X32X8_BF16 : FMHAI_MFMA_32X32X8_F16;
    const int lane = threadIdx.x;
    fmhai_f32x16 acc[2];
    int nb, kb, e;
    for (nb = 0; nb < 2; ++nb)
        for (e = 0; e < 16; ++e) acc[nb][e] = 0.0f;
    for (kb = 0; kb < MFMA_CHECK_D / 8; ++kb) {
        mfma_check_s16x4 a = mfma_check_frag16(q, 0, sh, lane, 0, kb * 8);
        for (nb = 0; nb < 2; ++nb) {
            mfma_check_s16x4 b = mfma_check_frag16(kmat, 1, sh, lane, nb * 32, kb * 8);
            if (is_bf16) fmhai_wave_mfma_32x32x8_bf16(&acc[nb], a, b);
            else fmhai_wave_mfma_32x32x8_f16(&acc[nb], __builtin_bit_cast(fmhai_f16x4, a),
                                             __builtin_bit_cast(fmhai_f16x4, b));
        }
    }
    for (e = 0; e < 16; ++e) {
        fmhai_mfma_rc p = fmhai_mfma_d_elem(sh, lane, e);
        float mx = fmhai_wave_row_max(fmaxf(acc[0][e], acc[1][e]), fmhai_mfma_d_row_lanes(sh)), sm;
        s[p.row * MFMA_CHECK_TN + p.col] = acc[0][e] - mx;
        s[p.row * MFMA_CHECK_TN + 32 + p.col] = acc[1][e] - mx;
        sm = fmhai_wave_row_sum(acc[0][e] + acc[1][e] - 2.0f * mx, fmhai_mfma_d_row_lanes(sh));
        if (p.col == 0) { rowstat[2 * p.row] = mx; rowstat[2 * p.row + 1] = sm; }
    }
}

/* 16x16 shapes: two M blocks, four N blocks, D = 4 floats a lane each */
FMHAI_DEVICE void mfma_check_body16(const unsigned short *q, const unsigned short *kmat, float *s,
                                    float *rowstat, int is_bf16)
{
    const fmhai_mfma_shape sh = is_bf16 ? FMHAI_MFMA_16X16X16_BF16 : FMHAI_MFMA_16X16X16_F16;
    const int lane = threadIdx.x;
    fmhai_f32x4 acc[4][2];
    int mb, nb, kb, e;
    for (mb = 0; mb < 2; ++mb)
        for (nb = 0; nb < 4; ++nb)
            for (e = 0; e < 4; ++e) acc[nb][mb][e] = 0.0f;
    for (kb = 0; kb < MFMA_CHECK_D / 16; ++kb)
        for (mb = 0; mb < 2; ++mb) {
            mfma_check_s16x4 a = mfma_check_frag16(q, 0, sh, lane, mb * 16, kb * 16);
            for (nb = 0; nb < 4; ++nb) {
                mfma_check_s16x4 b = mfma_check_frag16(kmat, 1, sh, lane, nb * 16, kb * 16);
                if (is_bf16) fmhai_wave_mfma_16x16x16_bf16(&acc[nb][mb], a, b);
                else fmhai_wave_mfma_16x16x16_f16(&acc[nb][mb], __builtin_bit_cast(fmhai_f16x4, a),
                                                  __builtin_bit_cast(fmhai_f16x4, b));
            }
        }
    for (mb = 0; mb < 2; ++mb)
        for (e = 0; e < 4; ++e) {
            fmhai_mfma_rc p = fmhai_mfma_d_elem(sh, lane, e);
            float mx = acc[0][mb][e], sm = 0.0f;
            for (nb = 1; nb < 4; ++nb) mx = fmaxf(mx, acc[nb][mb][e]);
            mx = fmhai_wave_row_max(mx, fmhai_mfma_d_row_lanes(sh));
            for (nb = 0; nb < 4; ++nb) {
                s[(mb * 16 + p.row) * MFMA_CHECK_TN + nb * 16 + p.col] = acc[nb][mb][e] - mx;
                sm += acc[nb][mb][e] - mx;
            }
            sm = fmhai_wave_row_sum(sm, fmhai_mfma_d_row_lanes(sh));
            if (p.col == 0) { rowstat[2 * (mb * 16 + p.row)] = mx; rowstat[2 * (mb * 16 + p.row) + 1] = sm; }
        }
}

__global__ __launch_bounds__(64) void mfma_check_32x32x8_f16(const unsigned short *q, const unsigned short *k, float *s, float *st)
{ mfma_check_body32(q, k, s, st, 0); }
__global__ __launch_bounds__(64) void mfma_check_32x32x8_bf16(const unsigned short *q, const unsigned short *k, float *s, float *st)
{ mfma_check_body32(q, k, s, st, 1); }
__global__ __launch_bounds__(64) void mfma_check_16x16x16_f16(const unsigned short *q, const unsigned short *k, float *s, float *st)
{ mfma_check_body16(q, k, s, st, 0); }
__global__ __launch_bounds__(64) void mfma_check_16x16x16_bf16(const unsigned short *q, const unsigned short *k, float *s, float *st)
{ mfma_check_body16(q, k, s, st, 1); }

/* Attention's two products for one wave, P kept in registers (the step the
 * MFMA pipeline repeats per key tile): S^T = K Q^T (64 keys x 32 queries,
 * hdim 128), the per-query max and exp2 (a query is one lane's column: fold
 * the slots, one exchange across the lane halves), then O^T = V^T P^T with P's
 * B fragments taken from the same lane's accumulators (mfma_layout.h's
 * fmhai_mfma_chain_key picks V's keys). 32x32x8, f16 or bf16. */
FMHAI_DEVICE void mfma_check_chain_body(const unsigned short *q, const unsigned short *kmat,
                                        const unsigned short *v, float *o, int is_bf16)
{
    const fmhai_mfma_shape sh = is_bf16 ? FMHAI_MFMA_32X32X8_BF16 : FMHAI_MFMA_32X32X8_F16;
    const int lane = threadIdx.x;
    fmhai_f32x16 st[2], acc[MFMA_CHECK_D / 32];
    mfma_check_s16x4 pb[8];
    float mx;
    int t, kb, mb, e;
    for (t = 0; t < 2; ++t)
        for (e = 0; e < 16; ++e) st[t][e] = 0.0f;
    for (kb = 0; kb < MFMA_CHECK_D / 8; ++kb)
        for (t = 0; t < 2; ++t) {
            mfma_check_s16x4 a = mfma_check_frag16(kmat, 0, sh, lane, t * 32, kb * 8);
            mfma_check_s16x4 b = mfma_check_frag16(q, 1, sh, lane, 0, kb * 8);
            if (is_bf16) fmhai_wave_mfma_32x32x8_bf16(&st[t], a, b);
            else fmhai_wave_mfma_32x32x8_f16(&st[t], __builtin_bit_cast(fmhai_f16x4, a),
                                             __builtin_bit_cast(fmhai_f16x4, b));
        }
    mx = st[0][0];
    for (t = 0; t < 2; ++t)
        for (e = 0; e < 16; ++e) mx = fmaxf(mx, st[t][e]);
    mx = fmaxf(mx, __shfl_xor(mx, 32));
    for (kb = 0; kb < 8; ++kb)               /* 8 key blocks of 8: flat slot kb*4+e */
        for (e = 0; e < 4; ++e) {
            float p = exp2f(st[(kb * 4 + e) / 16][(kb * 4 + e) % 16] - mx);
            pb[kb][e] = is_bf16 ? (short)(__float_as_uint(p) >> 16)     /* bf16 truncated: a compile check */
                                : (short)__half_as_ushort(__float2half_rn(p));
        }
    for (mb = 0; mb < MFMA_CHECK_D / 32; ++mb) {
        for (e = 0; e < 16; ++e) acc[mb][e] = 0.0f;
        for (kb = 0; kb < 8; ++kb) {
            mfma_check_s16x4 a;
            for (e = 0; e < 4; ++e) {
                fmhai_mfma_rc ae = fmhai_mfma_a_elem(sh, lane, e);
                a[e] = (short)v[fmhai_mfma_chain_key(sh, sh, kb, lane, e) * MFMA_CHECK_D + mb * 32 + ae.row];
            }
            if (is_bf16) fmhai_wave_mfma_32x32x8_bf16(&acc[mb], a, pb[kb]);
            else fmhai_wave_mfma_32x32x8_f16(&acc[mb], __builtin_bit_cast(fmhai_f16x4, a),
                                             __builtin_bit_cast(fmhai_f16x4, pb[kb]));
        }
    }
    for (mb = 0; mb < MFMA_CHECK_D / 32; ++mb)
        for (e = 0; e < 16; ++e) {
            fmhai_mfma_rc p = fmhai_mfma_d_elem(sh, lane, e);
            o[p.col * MFMA_CHECK_D + mb * 32 + p.row] = acc[mb][e];
        }
}

__global__ __launch_bounds__(64) void mfma_check_chain_32x32x8_f16(const unsigned short *q, const unsigned short *k,
                                                                   const unsigned short *v, float *o)
{ mfma_check_chain_body(q, k, v, o, 0); }
__global__ __launch_bounds__(64) void mfma_check_chain_32x32x8_bf16(const unsigned short *q, const unsigned short *k,
                                                                    const unsigned short *v, float *o)
{ mfma_check_chain_body(q, k, v, o, 1); }

#if defined(FMHAI_DEVICE_HAS_MFMA_FP8) || !defined(__HIP_DEVICE_COMPILE__)
/* fp8 (gfx942): a lane's 8 elements along k are 8 consecutive bytes of a row
 * of Q (or of K), so a fragment is one 64-bit load */
__global__ __launch_bounds__(64) void mfma_check_32x32x16_fp8(const long *q, const long *kmat, float *s, float *rowstat)
{
    const int lane = threadIdx.x;
    const fmhai_mfma_shape sh = FMHAI_MFMA_32X32X16_FP8;
    fmhai_f32x16 acc[2];
    int nb, kb, e;
    for (nb = 0; nb < 2; ++nb)
        for (e = 0; e < 16; ++e) acc[nb][e] = 0.0f;
    for (kb = 0; kb < MFMA_CHECK_D / 16; ++kb) {
        fmhai_mfma_rc pa = fmhai_mfma_a_elem(sh, lane, 0);
        long a = q[(pa.row * MFMA_CHECK_D + kb * 16 + pa.col) / 8];
        for (nb = 0; nb < 2; ++nb) {
            fmhai_mfma_rc pb = fmhai_mfma_b_elem(sh, lane, 0);
            long b = kmat[((nb * 32 + pb.col) * MFMA_CHECK_D + kb * 16 + pb.row) / 8];
            fmhai_wave_mfma_32x32x16_fp8(&acc[nb], a, b);
        }
    }
    for (e = 0; e < 16; ++e) {
        fmhai_mfma_rc p = fmhai_mfma_d_elem(sh, lane, e);
        float mx = fmhai_wave_row_max(fmaxf(acc[0][e], acc[1][e]), 32), sm;
        s[p.row * MFMA_CHECK_TN + p.col] = acc[0][e] - mx;
        s[p.row * MFMA_CHECK_TN + 32 + p.col] = acc[1][e] - mx;
        sm = fmhai_wave_row_sum(acc[0][e] + acc[1][e] - 2.0f * mx, 32);
        if (p.col == 0) { rowstat[2 * p.row] = mx; rowstat[2 * p.row + 1] = sm; }
    }
}
__global__ __launch_bounds__(64) void mfma_check_16x16x32_fp8(const long *q, const long *kmat, float *s, float *rowstat)
{
    const int lane = threadIdx.x;
    const fmhai_mfma_shape sh = FMHAI_MFMA_16X16X32_FP8;
    fmhai_f32x4 acc[4][2];
    int mb, nb, kb, e;
    for (mb = 0; mb < 2; ++mb)
        for (nb = 0; nb < 4; ++nb)
            for (e = 0; e < 4; ++e) acc[nb][mb][e] = 0.0f;
    for (kb = 0; kb < MFMA_CHECK_D / 32; ++kb)
        for (mb = 0; mb < 2; ++mb) {
            fmhai_mfma_rc pa = fmhai_mfma_a_elem(sh, lane, 0);
            long a = q[((mb * 16 + pa.row) * MFMA_CHECK_D + kb * 32 + pa.col) / 8];
            for (nb = 0; nb < 4; ++nb) {
                fmhai_mfma_rc pb = fmhai_mfma_b_elem(sh, lane, 0);
                long b = kmat[((nb * 16 + pb.col) * MFMA_CHECK_D + kb * 32 + pb.row) / 8];
                fmhai_wave_mfma_16x16x32_fp8(&acc[nb][mb], a, b);
            }
        }
    for (mb = 0; mb < 2; ++mb)
        for (e = 0; e < 4; ++e) {
            fmhai_mfma_rc p = fmhai_mfma_d_elem(sh, lane, e);
            float mx = acc[0][mb][e], sm = 0.0f;
            for (nb = 1; nb < 4; ++nb) mx = fmaxf(mx, acc[nb][mb][e]);
            mx = fmhai_wave_row_max(mx, 16);
            for (nb = 0; nb < 4; ++nb) {
                s[(mb * 16 + p.row) * MFMA_CHECK_TN + nb * 16 + p.col] = acc[nb][mb][e] - mx;
                sm += acc[nb][mb][e] - mx;
            }
            sm = fmhai_wave_row_sum(sm, 16);
            if (p.col == 0) { rowstat[2 * (mb * 16 + p.row)] = mx; rowstat[2 * (mb * 16 + p.row) + 1] = sm; }
        }
}
#endif
