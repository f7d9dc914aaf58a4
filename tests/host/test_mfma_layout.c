/*
 * Host tests of the MFMA fragment layouts (include/fmha_tile/tile/mfma_layout.h)
 * against a model of the instructions (tests/host/mfma_model.h), in plain C:
 * no AMD GPU is needed, and none was available when this was written.
 *
 * Covers, for every shape of FMHAI_MFMA_SHAPES (32x32x8 and 16x16x16 in f16
 * and bf16, 32x32x16 and 16x16x32 in fp8 e4m3fnuz):
 *   - the element formats the model decodes (exact round trips);
 *   - A, B and D layouts are bijections between the matrix and (lane, slot),
 *     and the loc/elem functions are each other's inverse;
 *   - one MFMA: random A, B, C scattered into the wave's VGPRs with the
 *     layout functions, the model run, D gathered with the layout functions
 *     = A * B + C computed plainly (exact: the values' sums are exact);
 *   - a 32 x 64 x 32 tile product from several MFMAs (K loop, M and N blocks);
 *   - the softmax's row max and row sum over the tile's D registers: each
 *     lane folds its N blocks, then DPP/ds_swizzle (and, as a second route,
 *     ds_bpermute) exchanges inside the lanes that share a row; with
 *     inexact sums, every lane of a row still ends with the same bits (the
 *     device's fmhai_wave_row_sum in tile/wave_mma.h is this DPP sequence).
 *   - attention's two products chained with P kept in registers: S^T =
 *     K Q^T from MFMAs, P = f(S) lane by lane, then O^T = V^T P^T with B taken
 *     from the S^T accumulators of the same lane (fmhai_mfma_chain_key says
 *     which key each slot carries: natural order for 16-bit, permuted for fp8).
 * Last line: "N passed, M failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fmha_tile/tile/mfma_layout.h"
#include "host/mfma_model.h"

static int g_pass, g_fail;
static void check(int ok, const char *what, const char *shape)
{
    if (ok) ++g_pass;
    else ++g_fail;
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", what, *shape ? " " : "", shape);
}

/* ---- helpers -------------------------------------------------------------- */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
/* values every format holds exactly; products and short sums stay exact in fp32 */
static double rnd_val(void)
{
    static const double vals[] = { -3, -2, -1.5, -1, -0.5, -0.25, 0.25, 0.5, 1, 1.5, 2, 3, 0.75, -0.75 };
    return vals[rnd() % (sizeof vals / sizeof vals[0])];
}

typedef void (*mfma_fn)(const mfma_wave_ab *, const mfma_wave_ab *, const mfma_wave_d *, mfma_wave_d *);

static mfma_fn model_of(fmhai_mfma_shape s)
{
    switch (s) {
    case FMHAI_MFMA_32X32X8_F16:   return v_mfma_f32_32x32x8f16;
    case FMHAI_MFMA_32X32X8_BF16:  return v_mfma_f32_32x32x8bf16_1k;
    case FMHAI_MFMA_16X16X16_F16:  return v_mfma_f32_16x16x16f16;
    case FMHAI_MFMA_16X16X16_BF16: return v_mfma_f32_16x16x16bf16_1k;
    case FMHAI_MFMA_32X32X16_FP8:  return v_mfma_f32_32x32x16_fp8_fp8;
    case FMHAI_MFMA_16X16X32_FP8:  return v_mfma_f32_16x16x32_fp8_fp8;
    default: return NULL;
    }
}
static int type_of(fmhai_mfma_shape s)
{
    if (s == FMHAI_MFMA_32X32X8_BF16 || s == FMHAI_MFMA_16X16X16_BF16) return MFMA_MODEL_BF16;
    if (s == FMHAI_MFMA_32X32X16_FP8 || s == FMHAI_MFMA_16X16X32_FP8) return MFMA_MODEL_FP8;
    return MFMA_MODEL_F16;
}

/* write one element's code into its lane's VGPRs at the layout's slot */
static void put(mfma_wave_ab *r, fmhai_mfma_shape s, fmhai_mfma_loc l, double v)
{
    int w = fmhai_mfma_dims_of(s).elem_bytes * 8, vg = fmhai_mfma_ab_vgpr(s, l.slot), bit = fmhai_mfma_ab_bit(s, l.slot);
    uint32_t code = (uint32_t)mfma_encode(type_of(s), v), mask = (w == 32 ? 0xffffffffu : (1u << w) - 1u) << bit;
    r->v[l.lane][vg] = (r->v[l.lane][vg] & ~mask) | code << bit;
}

/* scatter A block (r0, k0) of a row-major [.][lda] matrix, and B block (k0, c0) */
static void scatter_a(mfma_wave_ab *r, fmhai_mfma_shape s, const double *a, int lda, int r0, int k0)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    int i, k;
    memset(r, 0, sizeof *r);
    for (i = 0; i < d.m; ++i)
        for (k = 0; k < d.k; ++k) put(r, s, fmhai_mfma_a_loc(s, i, k), a[(r0 + i) * lda + k0 + k]);
}
static void scatter_b(mfma_wave_ab *r, fmhai_mfma_shape s, const double *b, int ldb, int k0, int c0)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    int k, j;
    memset(r, 0, sizeof *r);
    for (k = 0; k < d.k; ++k)
        for (j = 0; j < d.n; ++j) put(r, s, fmhai_mfma_b_loc(s, k, j), b[(k0 + k) * ldb + c0 + j]);
}

/* ---- formats ---------------------------------------------------------------- */
static void test_formats(void)
{
    static const double v[] = { 0, 1, -1, 0.25, -0.75, 1.5, 3, -3, 0.125, 2, 240, 0.0009765625 };
    int t, i, ok = 1;
    for (t = MFMA_MODEL_F16; t <= MFMA_MODEL_FP8; ++t)
        for (i = 0; i < (int)(sizeof v / sizeof v[0]); ++i) {
            long c = mfma_encode(t, v[i]);
            if (c < 0 || mfma_decode(t, (uint32_t)c) != (float)v[i]) { ok = 0; printf("# format %d value %g\n", t, v[i]); }
        }
    /* spot codes from the format definitions */
    ok &= mfma_decode(MFMA_MODEL_F16, 0x3c00) == 1.0f && mfma_decode(MFMA_MODEL_F16, 0xc000) == -2.0f;
    ok &= mfma_decode(MFMA_MODEL_BF16, 0x3f80) == 1.0f && mfma_decode(MFMA_MODEL_BF16, 0x4040) == 3.0f;
    ok &= mfma_decode(MFMA_MODEL_FP8, 0x40) == 1.0f && mfma_decode(MFMA_MODEL_FP8, 0x7f) == 240.0f;
    ok &= mfma_decode(MFMA_MODEL_FP8, 0x01) == 0.0009765625f && mfma_decode(MFMA_MODEL_FP8, 0x80) != mfma_decode(MFMA_MODEL_FP8, 0x80);
    check(ok, "formats_f16_bf16_fp8fnuz_exact", "");
}

/* ---- bijections ---------------------------------------------------------------- */
static void test_bijection(fmhai_mfma_shape s)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    int hit[64][16], op, i, j, l, t;
    for (op = 0; op < 3; ++op) {            /* A, B, D */
        int rows = op == 1 ? d.k : d.m, cols = op == 0 ? d.k : d.n;
        int slots = op == 2 ? fmhai_mfma_d_slots(s) : fmhai_mfma_ab_slots(s), ok = 1;
        memset(hit, 0, sizeof hit);
        for (i = 0; i < rows; ++i)
            for (j = 0; j < cols; ++j) {
                fmhai_mfma_loc p = op == 0 ? fmhai_mfma_a_loc(s, i, j) : op == 1 ? fmhai_mfma_b_loc(s, i, j)
                                                                                  : fmhai_mfma_d_loc(s, i, j);
                fmhai_mfma_rc e;
                if (p.lane < 0 || p.lane >= 64 || p.slot < 0 || p.slot >= slots) { ok = 0; continue; }
                ++hit[p.lane][p.slot];
                e = op == 0 ? fmhai_mfma_a_elem(s, p.lane, p.slot) : op == 1 ? fmhai_mfma_b_elem(s, p.lane, p.slot)
                                                                               : fmhai_mfma_d_elem(s, p.lane, p.slot);
                if (e.row != i || e.col != j) ok = 0;
            }
        for (l = 0; l < 64; ++l)
            for (t = 0; t < slots; ++t) if (hit[l][t] != 1) ok = 0;
        if (rows * cols != 64 * slots) ok = 0;
        check(ok, op == 0 ? "bijection_A" : op == 1 ? "bijection_B" : "bijection_D", fmhai_mfma_name(s));
    }
    /* a 64-bit fragment a lane: 2 VGPRs for A and B */
    check(fmhai_mfma_ab_vgprs(s) == 2 && fmhai_mfma_ab_vgpr(s, fmhai_mfma_ab_slots(s) - 1) == 1,
          "fragment_is_two_vgprs", fmhai_mfma_name(s));
}

/* ---- one MFMA ------------------------------------------------------------------ */
static void test_single(fmhai_mfma_shape s)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    static double a[32 * 32], b[32 * 32], c[32 * 32];
    mfma_wave_ab ra, rb;
    mfma_wave_d rc, rd;
    int trial, i, j, k, bad = 0;
    for (trial = 0; trial < 8; ++trial) {
        for (i = 0; i < d.m * d.k; ++i) a[i] = rnd_val();
        for (i = 0; i < d.k * d.n; ++i) b[i] = rnd_val();
        for (i = 0; i < d.m * d.n; ++i) c[i] = (double)((int)(rnd() % 17) - 8);
        scatter_a(&ra, s, a, d.k, 0, 0);
        scatter_b(&rb, s, b, d.n, 0, 0);
        memset(&rc, 0, sizeof rc);
        for (i = 0; i < d.m; ++i)
            for (j = 0; j < d.n; ++j) {
                fmhai_mfma_loc p = fmhai_mfma_d_loc(s, i, j);
                rc.v[p.lane][p.slot] = (float)c[i * d.n + j];
            }
        model_of(s)(&ra, &rb, &rc, &rd);
        for (i = 0; i < d.m; ++i)
            for (j = 0; j < d.n; ++j) {
                fmhai_mfma_loc p = fmhai_mfma_d_loc(s, i, j);
                double want = c[i * d.n + j];
                for (k = 0; k < d.k; ++k) want += a[i * d.k + k] * b[k * d.n + j];
                if ((double)rd.v[p.lane][p.slot] != want) {
                    if (bad++ < 3) printf("# %s D[%d][%d] = %g, want %g\n", fmhai_mfma_name(s), i, j, rd.v[p.lane][p.slot], want);
                }
            }
    }
    check(!bad, "one_mfma_D_eq_AB_plus_C", fmhai_mfma_name(s));
}

/* ---- a 32 x 64 x 32 tile, and the softmax's row max / row sum ---------------- */
enum { TM = 32, TN = 64, TK = 32 };

/* reduce every lane's value over its aligned group of `width` lanes (16 or 32)
 * with gfx9 DPP and ds_swizzle: rotations inside a DPP row, quad swaps, then
 * one swizzle across the two rows of a 32-lane half */
static void wave_reduce_dpp(float *x, int width, int is_max)
{
    static const int swap2[4] = { 2, 3, 0, 1 }, swap1[4] = { 1, 0, 3, 2 };
    float y[64];
    int l, step;
    for (step = 0; step < 5; ++step) {
        if (step == 4 && width < 32) break;
        switch (step) {
        case 0: mfma_dpp_row_ror(x, y, 8); break;
        case 1: mfma_dpp_row_ror(x, y, 4); break;
        case 2: mfma_dpp_quad_perm(x, y, swap2); break;
        case 3: mfma_dpp_quad_perm(x, y, swap1); break;
        default: mfma_ds_swizzle(x, y, 0x1f, 0, 0x10); break;
        }
        for (l = 0; l < 64; ++l) x[l] = is_max ? (x[l] > y[l] ? x[l] : y[l]) : x[l] + y[l];
    }
}
/* the same with ds_bpermute xor butterflies (any lane permutation) */
static void wave_reduce_bpermute(float *x, int width, int is_max)
{
    float y[64];
    int addr[64], l, m;
    for (m = 1; m < width; m <<= 1) {
        for (l = 0; l < 64; ++l) addr[l] = 4 * (l ^ m);
        mfma_ds_bpermute(x, y, addr);
        for (l = 0; l < 64; ++l) x[l] = is_max ? (x[l] > y[l] ? x[l] : y[l]) : x[l] + y[l];
    }
}

static void test_tile(fmhai_mfma_shape s)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    const int mb_n = TM / d.m, nb_n = TN / d.n, kb_n = TK / d.k, slots = fmhai_mfma_d_slots(s);
    static double a[TM * TK], b[TK * TN], want[TM * TN];
    static mfma_wave_d acc[4][8];          /* [m block][n block] */
    mfma_wave_ab ra, rb;
    mfma_wave_d tmp;
    int i, j, k, mb, nb, kb, l, t, bad = 0, route;
    for (i = 0; i < TM * TK; ++i) a[i] = rnd_val();
    for (i = 0; i < TK * TN; ++i) b[i] = rnd_val();
    for (i = 0; i < TM; ++i)
        for (j = 0; j < TN; ++j) {
            want[i * TN + j] = 0;
            for (k = 0; k < TK; ++k) want[i * TN + j] += a[i * TK + k] * b[k * TN + j];
        }
    memset(acc, 0, sizeof acc);
    for (kb = 0; kb < kb_n; ++kb)                 /* the K loop outermost, as a pipeline runs it */
        for (mb = 0; mb < mb_n; ++mb)
            for (nb = 0; nb < nb_n; ++nb) {
                scatter_a(&ra, s, a, TK, mb * d.m, kb * d.k);
                scatter_b(&rb, s, b, TN, kb * d.k, nb * d.n);
                model_of(s)(&ra, &rb, &acc[mb][nb], &tmp);
                acc[mb][nb] = tmp;
            }
    for (i = 0; i < TM; ++i)
        for (j = 0; j < TN; ++j) {
            fmhai_mfma_loc p = fmhai_mfma_d_loc(s, i % d.m, j % d.n);
            if ((double)acc[i / d.m][j / d.n].v[p.lane][p.slot] != want[i * TN + j]) ++bad;
        }
    check(!bad, "tile_32x64x32_from_mfmas", fmhai_mfma_name(s));

    /* lanes l and l ^ m (m < row lanes) hold the same rows, slot for slot */
    bad = 0;
    for (l = 0; l < 64; ++l)
        for (t = 0; t < slots; ++t)
            for (k = 1; k < fmhai_mfma_d_row_lanes(s); k <<= 1)
                if (fmhai_mfma_d_elem(s, l, t).row != fmhai_mfma_d_elem(s, l ^ k, t).row) ++bad;
    check(!bad, "row_shared_by_xor_lane_group", fmhai_mfma_name(s));

    /* row max and row sum of the 32 x 64 tile: fold the n blocks in each lane,
     * then reduce across the lanes of a row; every lane then holds its rows' results */
    for (route = 0; route < 2; ++route) {
        int is_max;
        for (is_max = 0; is_max < 2; ++is_max) {
            bad = 0;
            for (mb = 0; mb < mb_n; ++mb)
                for (t = 0; t < slots; ++t) {
                    float x[64];
                    for (l = 0; l < 64; ++l) {
                        x[l] = acc[mb][0].v[l][t];
                        for (nb = 1; nb < nb_n; ++nb) {
                            float v = acc[mb][nb].v[l][t];
                            x[l] = is_max ? (x[l] > v ? x[l] : v) : x[l] + v;
                        }
                    }
                    if (route == 0) wave_reduce_dpp(x, fmhai_mfma_d_row_lanes(s), is_max);
                    else wave_reduce_bpermute(x, fmhai_mfma_d_row_lanes(s), is_max);
                    for (l = 0; l < 64; ++l) {
                        int row = mb * d.m + fmhai_mfma_d_elem(s, l, t).row;
                        double r = want[row * TN];
                        for (j = 1; j < TN; ++j)
                            r = is_max ? (r > want[row * TN + j] ? r : want[row * TN + j]) : r + want[row * TN + j];
                        if ((double)x[l] != r) ++bad;
                    }
                }
            check(!bad, route == 0 ? (is_max ? "row_max_dpp_swizzle" : "row_sum_dpp_swizzle")
                                   : (is_max ? "row_max_bpermute" : "row_sum_bpermute"),
                  fmhai_mfma_name(s));
        }
    }
}

/* ---- P kept in registers: S^T = K Q^T, then O^T = V^T P^T ------------------- */
/* an elementwise "softmax" whose results every format holds exactly */
static double p_of(double s)
{
    return 0.5 * (double)((((long)floor(s) % 5) + 5) % 5 - 2);
}

static void test_chain(fmhai_mfma_shape s)
{
    enum { NK = 32, HD = 32 };               /* keys, head dim */
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    const int nq = d.n, tiles = NK / d.m, ds = fmhai_mfma_d_slots(s), kl = fmhai_mfma_ab_slots(s);
    static double q[32 * HD], kmat[NK * HD], v[NK * HD], qt[HD * 32], vt[HD * NK];
    static mfma_wave_d st[4];                /* S^T tiles: keys t*m .. t*m+m-1 */
    static float pflat[64][32];              /* a lane's P values, flat over the tiles */
    mfma_wave_ab ra, rb;
    mfma_wave_d tmp, o;
    int i, j, k, t, kb, mb, l, e, bad = 0, natural = 1, groups_ok = 1;

    /* the keys a B slot carries: a function of (lane group, slot) covering
     * each k-block's keys once */
    for (kb = 0; kb < NK / d.k; ++kb) {
        int seen[32] = { 0 };
        for (l = 0; l < 64; ++l)
            for (e = 0; e < kl; ++e) {
                int key = fmhai_mfma_chain_key(s, s, kb, l, e);
                if (key != fmhai_mfma_chain_key(s, s, kb, (l / d.n) * d.n, e)) groups_ok = 0;
                if (key < kb * d.k || key >= (kb + 1) * d.k) groups_ok = 0;
                else if (l % d.n == 0) ++seen[key - kb * d.k];
                if (key != kb * d.k + (l / d.n) * kl + e) natural = 0;
            }
        for (k = 0; k < d.k; ++k) if (seen[k] != 1) groups_ok = 0;
    }
    check(groups_ok, "chain_keys_by_lane_group_cover_each_kblock", fmhai_mfma_name(s));
    if (d.elem_bytes == 2) check(natural, "chain_keys_natural_order_16bit", fmhai_mfma_name(s));

    for (i = 0; i < nq * HD; ++i) q[i] = rnd_val();
    for (i = 0; i < NK * HD; ++i) { kmat[i] = rnd_val(); v[i] = rnd_val(); }
    for (i = 0; i < HD; ++i) {
        for (j = 0; j < nq; ++j) qt[i * nq + j] = q[j * HD + i];
        for (k = 0; k < NK; ++k) vt[i * NK + k] = v[k * HD + i];
    }
    /* S^T = K Q^T, tile by tile of keys, K loop over the head dim */
    for (t = 0; t < tiles; ++t) {
        memset(&st[t], 0, sizeof st[t]);
        for (kb = 0; kb < HD / d.k; ++kb) {
            scatter_a(&ra, s, kmat, HD, t * d.m, kb * d.k);
            scatter_b(&rb, s, qt, nq, kb * d.k, 0);
            model_of(s)(&ra, &rb, &st[t], &tmp);
            st[t] = tmp;
        }
    }
    /* the softmax's max over keys of each query, on S^T: a query is one column,
     * so fold the lane's slots and tiles, then exchange across lane groups only */
    {
        float x[64], y[64];
        int addr[64], m2, badm = 0;
        for (l = 0; l < 64; ++l) {
            x[l] = st[0].v[l][0];
            for (t = 0; t < tiles; ++t)
                for (e = 0; e < ds; ++e) x[l] = x[l] > st[t].v[l][e] ? x[l] : st[t].v[l][e];
        }
        for (m2 = d.n; m2 < 64; m2 <<= 1) {
            for (l = 0; l < 64; ++l) addr[l] = 4 * (l ^ m2);
            mfma_ds_bpermute(x, y, addr);
            for (l = 0; l < 64; ++l) x[l] = x[l] > y[l] ? x[l] : y[l];
        }
        for (l = 0; l < 64; ++l) {
            double want = -1e30;
            for (k = 0; k < NK; ++k) {
                double sc = 0;
                for (t = 0; t < HD; ++t) sc += kmat[k * HD + t] * q[(l % d.n) * HD + t];
                want = want > sc ? want : sc;
            }
            if ((double)x[l] != want) ++badm;
        }
        check(!badm, "chain_query_max_in_lane_then_across_groups", fmhai_mfma_name(s));
    }
    /* P from the accumulators, lane by lane: no exchange between lanes */
    for (l = 0; l < 64; ++l)
        for (t = 0; t < tiles; ++t)
            for (e = 0; e < ds; ++e) pflat[l][t * ds + e] = (float)p_of(st[t].v[l][e]);
    /* O^T = V^T P^T: B from the flat P slots, A = V^T at the chained keys */
    for (mb = 0; mb < HD / d.m; ++mb) {
        memset(&o, 0, sizeof o);
        for (kb = 0; kb < NK / d.k; ++kb) {
            memset(&ra, 0, sizeof ra);
            memset(&rb, 0, sizeof rb);
            for (l = 0; l < 64; ++l)
                for (e = 0; e < kl; ++e) {
                    fmhai_mfma_loc at;
                    fmhai_mfma_rc ae = fmhai_mfma_a_elem(s, l, e);
                    at.lane = l; at.slot = e;
                    put(&rb, s, at, pflat[l][kb * kl + e]);
                    put(&ra, s, at, vt[(mb * d.m + ae.row) * NK + fmhai_mfma_chain_key(s, s, kb, l, e)]);
                }
            model_of(s)(&ra, &rb, &o, &tmp);
            o = tmp;
        }
        for (i = 0; i < d.m; ++i)
            for (j = 0; j < nq; ++j) {
                fmhai_mfma_loc p = fmhai_mfma_d_loc(s, i, j);
                double want = 0;
                for (k = 0; k < NK; ++k) {
                    double sc = 0;
                    for (t = 0; t < HD; ++t) sc += kmat[k * HD + t] * q[j * HD + t];
                    want += v[k * HD + mb * d.m + i] * p_of(sc);
                }
                if ((double)o.v[p.lane][p.slot] != want) ++bad;
            }
    }
    check(!bad, "chain_P_in_registers_O_eq_softmaxish_QK_V", fmhai_mfma_name(s));
}

/* with inexact sums (random fractions), the DPP route still leaves every lane
 * of a row with the bitwise same sum: rotations by 8 then 4 pair lanes the way
 * xor 8 and xor 4 do, and each step adds the same two values in either order */
static void test_sum_lanes_agree(void)
{
    int width, l, m, bad = 0, trial;
    for (width = 16; width <= 32; width *= 2)
        for (trial = 0; trial < 64; ++trial) {
            float x[64];
            for (l = 0; l < 64; ++l) x[l] = (float)(rnd() % 1000003) / 7919.0f - 60.0f;
            wave_reduce_dpp(x, width, 0);
            for (l = 0; l < 64; ++l)
                for (m = 1; m < width; ++m)
                    if (memcmp(&x[l], &x[(l & ~(width - 1)) | ((l + m) & (width - 1))], sizeof(float))) ++bad;
        }
    check(!bad, "row_sum_dpp_bitwise_same_in_every_lane", "16 and 32 lanes");
}

/* a wrong layout must fail: D gathered with a transposed map is not the product */
static void test_negative(void)
{
    const fmhai_mfma_shape s = FMHAI_MFMA_32X32X8_F16;
    static double a[32 * 8], b[8 * 32];
    mfma_wave_ab ra, rb;
    mfma_wave_d rc, rd;
    int i, j, k, bad = 0;
    for (i = 0; i < 32 * 8; ++i) { a[i] = rnd_val(); b[i] = rnd_val(); }
    scatter_a(&ra, s, a, 8, 0, 0);
    scatter_b(&rb, s, b, 32, 0, 0);
    memset(&rc, 0, sizeof rc);
    v_mfma_f32_32x32x8f16(&ra, &rb, &rc, &rd);
    for (i = 0; i < 32; ++i)
        for (j = 0; j < 32; ++j) {
            fmhai_mfma_loc p = fmhai_mfma_d_loc(s, j, i);      /* transposed on purpose */
            double want = 0;
            for (k = 0; k < 8; ++k) want += a[i * 8 + k] * b[k * 32 + j];
            if ((double)rd.v[p.lane][p.slot] != want) ++bad;
        }
    check(bad > 0, "transposed_D_map_is_caught", "v_mfma_f32_32x32x8f16");
}

int main(void)
{
    int s;
    test_formats();
    for (s = 0; s < FMHAI_MFMA_NUM_SHAPES; ++s) {
        test_bijection((fmhai_mfma_shape)s);
        test_single((fmhai_mfma_shape)s);
        test_tile((fmhai_mfma_shape)s);
        test_chain((fmhai_mfma_shape)s);
    }
    test_sum_lanes_agree();
    test_negative();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
