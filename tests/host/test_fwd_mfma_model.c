/*
 * Host replay of the MFMA forward's tile step (include/fmha_tile/pipeline/
 * fwd_mfma.h) on the instruction model (tests/host/mfma_model.h), in plain
 * C: no AMD GPU is needed, and none was available when this was written.
 *
 * For every tile shape the GFX9 rows give the pipeline (head dim 64, 128 and
 * 256 with key tiles of 64, 64 and 32; fp16 and bf16; one wave's 32 query
 * rows) it builds the shared-memory tiles the loaders land (swizzled 16-bit
 * rows, or chunk-major VECTORIZED K and V^T), then does what the pipeline
 * does, with the pipeline's own address and layout functions
 * (tile/mfma_layout.h):
 *   - the fragment addresses: Q^T's B and K's A read 4 consecutive columns
 *     of the right row, V^T's A the chained keys (fmhai_mfma_chain_key) of
 *     the right column, for every lane, slot and block;
 *   - the key of each S^T slot (fmhai_mfma_key_c, used by the masks, ALiBi
 *     and dropout) and the dropout slot formula;
 *   - the S product: S^T = K Q^T from v_mfma_f32_32x32x8 on fragments
 *     gathered from the tiles = the plain Q K^T (exact values, exact sums);
 *   - the softmax row reductions over two key tiles: each lane folds its
 *     slots, one ds_bpermute exchange with the lane 32 away gives the
 *     query's max (equal to the plain row max) and sum (within 1e-5);
 *   - P's conversion into the B operand of O^T = V^T P^T (the lane's flat
 *     slots, rounded to 16 bits), the PV product with the online rescale,
 *     and the O store mapping (4 consecutive head-dim columns per 4 slots,
 *     written into the swizzled O rows, read back row by row) = the plain
 *     softmax(Q K^T) V computed in double from the same rounded P
 *     (rel. error <= 1e-5) with every O element written once.
 * FP8 KV (the e4m3 tiles decoded to f16 in LDS, fmhai_mfma_e4m3_chunk;
 * its LDS pieces placed within the 16-bit kernels' 64 KB):
 *   - every e4m3 code's f16 bits times 2^8 (OCP e4m3fn) or 2^7 (e4m3fnuz)
 *     equal the code's value from the format's definition;
 *   - a chunk's decoded slots: V in column order, K in the queries' order
 *     (fmhai_mfma_k8_slot, a permutation, equal to where fmhai_load_q_f16
 *     puts e4m3 and bf16 query columns);
 *   - the tile step above with Q, K and V given as e4m3 codes and the Q, K
 *     and V tiles built by that decode (Q and K permuted alike): S^T equals
 *     the plain product of the decoded values, O the plain softmax(Q K^T) V.
 * Last line: "N passed, M failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "fmha_tile/tile/mfma_layout.h"
#include "host/mfma_test.h"

enum { MAXHD = 256, MAXBN = 64, ROWS = 32 };

/* ---- FP8 KV: the e4m3 decode ----------------------------------------------- */
/* e4m3 code c from the format's definition: OCP e4m3fn (bias 7, 0x7f/0xff
 * NaN) or e4m3fnuz (bias 8, 0x80 NaN); NaN codes give NAN */
static double e4m3_ref(int c, int fnuz)
{
    const int sgn = c >> 7, e = (c >> 3) & 15, m = c & 7, bias = fnuz ? 8 : 7;
    double v;
    if (fnuz ? c == 0x80 : (c & 0x7f) == 0x7f) return NAN;
    v = e ? ldexp(8 + m, e - bias - 3) : ldexp(m, 1 - bias - 3);
    return sgn ? -v : v;
}
/* the f16 value of a decoded slot (fmhai_mfma_e4m3_chunk's bits, then the
 * pipeline's packed multiply by 2^8: exact, every e4m3fn value is an f16) */
static double f16_slot(const uint32_t *w, int s)
{
    return mfma_decode(MFMA_MODEL_F16, (w[s / 2] >> (16 * (s % 2))) & 0xffffu) * 256.0;
}
static int e4m3_code(double x)
{
    int c;
    for (c = 0; c < 256; ++c)
        if (e4m3_ref(c, 0) == x) return c;
    fprintf(stderr, "value %g not an e4m3 value\n", x);
    exit(2);
}
/* a [rows][hd] tile of e4m3 values decoded into the swizzled f16 tile as
 * fmhai_mfma_load_kv8 does it (16-byte chunk c of row r to 16-bit chunks
 * 2c, 2c + 1); is_k: K's (and the queries') column order */
static void fp8_tile(uint16_t *dst, const double (*x)[MAXHD], int rows, int hd, int is_k)
{
    int r, c, i, s;
    for (r = 0; r < rows; ++r)
        for (c = 0; c < hd / 16; ++c) {
            uint32_t w[4], lo[4], hi[4];
            for (i = 0; i < 4; ++i)
                w[i] = (uint32_t)e4m3_code(x[r][16 * c + 4 * i]) | (uint32_t)e4m3_code(x[r][16 * c + 4 * i + 1]) << 8 |
                       (uint32_t)e4m3_code(x[r][16 * c + 4 * i + 2]) << 16 |
                       (uint32_t)e4m3_code(x[r][16 * c + 4 * i + 3]) << 24;
            fmhai_mfma_e4m3_chunk(w, is_k, lo, hi);
            for (s = 0; s < 8; ++s) {
                dst[fmhai_mfma_lds_swz(r, 16 * c + s, hd) / 2] = code16(f16_slot(lo, s), MFMA_MODEL_F16);
                dst[fmhai_mfma_lds_swz(r, 16 * c + 8 + s, hd) / 2] = code16(f16_slot(hi, s), MFMA_MODEL_F16);
            }
        }
}
static void test_e4m3_decode(void)
{
    int fnuz, c, j, i, ok;
    for (fnuz = 0; fnuz < 2; ++fnuz) {
        ok = 1;
        for (c = 0; c < 256; ++c) {
            const double want = e4m3_ref(c, fnuz);
            const uint32_t bits = fmhai_mfma_e4m3x2_f16bits((uint32_t)c | (uint32_t)(c ^ 0x80) << 16);
            const double lo = mfma_decode(MFMA_MODEL_F16, bits & 0xffffu) * (fnuz ? 128.0 : 256.0);
            const double hi = mfma_decode(MFMA_MODEL_F16, bits >> 16) * (fnuz ? 128.0 : 256.0);
            if (want != want) continue;   /* NaN codes: a cache holds none */
            if (lo != want || (e4m3_ref(c ^ 0x80, fnuz) == e4m3_ref(c ^ 0x80, fnuz) && hi != e4m3_ref(c ^ 0x80, fnuz)))
                ok = 0;
        }
        check(ok, "mfma_fp8_e4m3_f16_bits_times_scale_eq_value", fnuz ? "e4m3fnuz" : "e4m3fn");
    }
    /* a chunk of 16 distinct codes: where each column lands */
    {
        uint32_t w[4], lo[4], hi[4];
        int seen[16] = { 0 };
        for (i = 0; i < 4; ++i)
            w[i] = (uint32_t)(0x30 + 4 * i) | (uint32_t)(0x31 + 4 * i) << 8 | (uint32_t)(0x32 + 4 * i) << 16 |
                   (uint32_t)(0x33 + 4 * i) << 24;
        ok = 1;
        fmhai_mfma_e4m3_chunk(w, 0, lo, hi);
        for (j = 0; j < 16; ++j)
            if (f16_slot(j < 8 ? lo : hi, j % 8) != e4m3_ref(0x30 + j, 0)) ok = 0;
        check(ok, "mfma_fp8_v_chunk_column_order", "16 columns");
        ok = 1;
        fmhai_mfma_e4m3_chunk(w, 1, lo, hi);
        for (j = 0; j < 16; ++j) {
            const int s = fmhai_mfma_k8_slot(j);
            if (s < 0 || s > 15 || seen[s]++) ok = 0;
            else if (f16_slot(s < 8 ? lo : hi, s % 8) != e4m3_ref(0x30 + j, 0)) ok = 0;
        }
        /* fmhai_load_q_f16: e4m3 queries, word i's columns 4i, 4i+1 to the
         * low chunk's word i and 4i+2, 4i+3 to the high one's; bf16 queries,
         * pair e of 8-column half c8 to word 2*c8 + e/2 of the low (e even)
         * or high (e odd) chunk */
        for (j = 0; j < 16; ++j) {
            const int i4 = j / 4, c8 = j / 8, e = (j % 8) / 2;
            if (fmhai_mfma_k8_slot(j) != ((j % 4) >= 2 ? 8 : 0) + 2 * i4 + j % 2) ok = 0;
            if (fmhai_mfma_k8_slot(j) != (e & 1 ? 8 : 0) + 2 * (2 * c8 + e / 2) + j % 2) ok = 0;
        }
        check(ok, "mfma_fp8_k_chunk_in_query_order", "16 columns");
    }
}

/* one (head dim, key tile, type, VECTORIZED or not) case */
static void test_case(int HD, int BN, int type, int vec, int fp8)
{
    const fmhai_mfma_shape SH = type == MFMA_MODEL_BF16 ? FMHAI_MFMA_32X32X8_BF16 : FMHAI_MFMA_32X32X8_F16;
    enum { TILES = 2 };
    const int NKT = BN / 32, NMB = HD / 32, NK = TILES * BN;
    static double q[ROWS][MAXHD], k[2 * MAXBN][MAXHD], v[2 * MAXBN][MAXHD];
    static uint16_t sQ[ROWS * MAXHD], sK[MAXBN * MAXHD], sV[MAXBN * MAXHD], sO[ROWS * MAXHD];
    static mfma_wave_d st[MAXBN / 32], acc[MAXHD / 32];
    static double pr[ROWS][2 * MAXBN];        /* the rounded P the pipeline multiplies */
    static double scale_of[ROWS][TILES];      /* the rescale P of tile j gets by the end */
    static float row_max[64], row_sum[64];
    char shape[96];
    int i, j, c, t, e, l, kb, mb, it;
    int addr_ok = 1, s_ok = 1, max_ok = 1, o_once = 1;
    double sum_err = 0, o_err = 0, o_ref = 0;
    const double sl2 = 0.125 * 1.4426950408889634;   /* scale * log2(e) */

    snprintf(shape, sizeof shape, "hd%d_bn%d_%s%s", HD, BN,
             fp8 ? "e4m3_kv_as_f16" : type == MFMA_MODEL_BF16 ? "bf16" : "f16", vec ? "_vectorized" : "");
    for (i = 0; i < ROWS; ++i)
        for (c = 0; c < HD; ++c) q[i][c] = rnd_val();
    for (j = 0; j < NK; ++j)
        for (c = 0; c < HD; ++c) { k[j][c] = rnd_val(); v[j][c] = rnd_val(); }
    /* Q tile: swizzled rows (the wave's 32 rows) */
    for (i = 0; i < ROWS; ++i)
        for (c = 0; c < HD; ++c) sQ[fmhai_mfma_lds_swz(i, c, HD) / 2] = code16(q[i][c], type);
    if (fp8) fp8_tile(sQ, (const double (*)[MAXHD])q, ROWS, HD, 1);   /* e4m3 queries, K's order */

    /* ---- addresses: each fragment slot reads the element its layout names */
    for (l = 0; l < 64; ++l) {
        const int ql = l % 32, kh = l / 32, qb = fmhai_mfma_lds_row(ql, kh, HD);
        const int kbase = vec ? fmhai_mfma_lds_cmaj(ql, 4 * kh, BN) : fmhai_mfma_lds_row(ql, kh, HD);
        for (kb = 0; kb < HD / 8; ++kb)
            for (e = 0; e < 4; ++e) {
                fmhai_mfma_rc be = fmhai_mfma_b_elem(SH, l, e), ae = fmhai_mfma_a_elem(SH, l, e);
                if (fmhai_mfma_lds_kb(qb, kb) + 2 * e != fmhai_mfma_lds_swz(be.col, kb * 8 + be.row, HD)) addr_ok = 0;
                for (t = 0; t < NKT; ++t) {
                    int got = (vec ? kbase + kb * BN * 16 : fmhai_mfma_lds_kb(kbase, kb)) + t * 32 * (vec ? 16 : HD * 2);
                    int want = vec ? fmhai_mfma_lds_cmaj(t * 32 + ae.row, kb * 8 + ae.col, BN)
                                   : fmhai_mfma_lds_swz(t * 32 + ae.row, kb * 8 + ae.col, HD);
                    if (got + 2 * e != want) addr_ok = 0;
                }
            }
        for (mb = 0; mb < NMB; ++mb)
            for (kb = 0; kb < BN / 8; ++kb)
                for (e = 0; e < 4; ++e) {
                    const int key = fmhai_mfma_chain_key(SH, SH, kb, l, e), col = mb * 32 + fmhai_mfma_a_elem(SH, l, e).row;
                    int got = vec ? fmhai_mfma_lds_cmaj(mb * 32 + ql, kb * 8 + 4 * kh, HD) + 2 * e
                                  : fmhai_mfma_lds_vt_at(fmhai_mfma_lds_vt(ql, kh, e, HD), mb, kb, HD);
                    int want = vec ? fmhai_mfma_lds_cmaj(col, key, HD) : fmhai_mfma_lds_swz(key, col, HD);
                    if (got != want) addr_ok = 0;
                }
        for (t = 0; t < NKT; ++t)
            for (e = 0; e < 16; ++e)
                if (4 * kh + fmhai_mfma_key_c(t, e) != t * 32 + fmhai_mfma_d_elem(SH, l, e).row) addr_ok = 0;
    }
    /* dropout's slot formula: key t*32 + 16*b4 + 8*b3 + 4*kh + 2*b1 + b0 */
    for (t = 0; t < NKT; ++t)
        for (i = 0; i < 16; ++i) {
            const int b0 = i & 1, b1 = (i >> 1) & 1, b3 = (i >> 2) & 1, b4 = i >> 3;
            if (fmhai_mfma_key_c(t, 4 * (2 * b4 + b3) + 2 * b1 + b0) != t * 32 + 16 * b4 + 8 * b3 + 2 * b1 + b0) addr_ok = 0;
        }
    check(addr_ok, "mfma_fwd_fragment_addresses_and_slot_keys", shape);

    for (l = 0; l < 64; ++l) { row_max[l] = -INFINITY; row_sum[l] = 0; }
    memset(acc, 0, sizeof acc);
    for (it = 0; it < TILES; ++it) {
        const int n0 = it * BN;
        mfma_wave_ab ra, rb;
        /* the tiles as the loaders land them */
        for (j = 0; j < BN; ++j)
            for (c = 0; c < HD; ++c) {
                sK[(vec ? fmhai_mfma_lds_cmaj(j, c, BN) : fmhai_mfma_lds_swz(j, c, HD)) / 2] = code16(k[n0 + j][c], type);
                sV[(vec ? fmhai_mfma_lds_cmaj(c, j, HD) : fmhai_mfma_lds_swz(j, c, HD)) / 2] = code16(v[n0 + j][c], type);
            }
        if (fp8) {   /* the e4m3 tiles as fmhai_mfma_load_kv8 decodes them */
            fp8_tile(sK, (const double (*)[MAXHD])k[n0], BN, HD, 1);
            fp8_tile(sV, (const double (*)[MAXHD])v[n0], BN, HD, 0);
        }
        /* ---- S^T = K Q^T ---- */
        memset(st, 0, sizeof st);
        for (kb = 0; kb < HD / 8; ++kb)
            for (t = 0; t < NKT; ++t) {
                for (l = 0; l < 64; ++l) {
                    const int ql = l % 32, kh = l / 32;
                    const int qa = fmhai_mfma_lds_kb(fmhai_mfma_lds_row(ql, kh, HD), kb);
                    const int kbase = vec ? fmhai_mfma_lds_cmaj(ql, 4 * kh, BN) : fmhai_mfma_lds_row(ql, kh, HD);
                    const int ka = (vec ? kbase + kb * BN * 16 : fmhai_mfma_lds_kb(kbase, kb)) + t * 32 * (vec ? 16 : HD * 2);
                    frag_set(&rb, l, &sQ[qa / 2]);
                    frag_set(&ra, l, &sK[ka / 2]);
                }
                run_model(type, &ra, &rb, &st[t]);
            }
        for (l = 0; l < 64; ++l)
            for (t = 0; t < NKT; ++t)
                for (e = 0; e < 16; ++e) {
                    const int qi = l % 32, key = n0 + 4 * (l / 32) + fmhai_mfma_key_c(t, e);
                    double want = 0;
                    for (c = 0; c < HD; ++c) want += q[qi][c] * k[key][c];
                    if ((double)st[t].v[l][e] != want) s_ok = 0;
                }
        /* ---- online softmax: fold the lane's slots, one exchange across halves */
        {
            float mx[64], other[64];
            int addr[64];
            for (l = 0; l < 64; ++l) {
                mx[l] = row_max[l];
                for (t = 0; t < NKT; ++t)
                    for (e = 0; e < 16; ++e) mx[l] = fmaxf(mx[l], st[t].v[l][e]);
                addr[l] = 4 * (l ^ 32);
            }
            mfma_ds_bpermute(mx, other, addr);
            for (l = 0; l < 64; ++l) {
                const float m = fmaxf(mx[l], other[l]);
                const float alpha = exp2f((float)(row_max[l] * sl2) - (float)(m * sl2));
                float s = 0;
                for (t = 0; t < NKT; ++t)
                    for (e = 0; e < 16; ++e) {
                        const float p = exp2f((float)(st[t].v[l][e] * sl2) - (float)(m * sl2));
                        st[t].v[l][e] = p;
                        s += p;
                    }
                row_sum[l] = row_sum[l] * alpha + s;
                row_max[l] = m;
                for (mb = 0; mb < NMB; ++mb)
                    for (e = 0; e < 16; ++e) acc[mb].v[l][e] *= alpha;
                /* the reference's view: this tile's P and every earlier P's rescale */
                if (l < 32) {
                    for (j = 0; j < it; ++j) scale_of[l][j] *= alpha;
                    scale_of[l][it] = 1;
                }
            }
            for (l = 0; l < 32; ++l) {   /* the plain row max over the keys so far */
                double want = -INFINITY;
                for (j = 0; j < n0 + BN; ++j) {
                    double sc = 0;
                    for (c = 0; c < HD; ++c) sc += q[l][c] * k[j][c];
                    if (sc > want) want = sc;
                }
                if ((double)row_max[l] != want || row_max[l + 32] != row_max[l]) max_ok = 0;
            }
        }
        /* ---- P -> B fragments (flat slots), V^T's A, O^T += V^T P^T ---- */
        for (mb = 0; mb < NMB; ++mb)
            for (kb = 0; kb < BN / 8; ++kb) {
                for (l = 0; l < 64; ++l) {
                    const int ql = l % 32, kh = l / 32;
                    uint16_t pc[4], vc[4];
                    for (e = 0; e < 4; ++e) {
                        const int f = kb * 4 + e;
                        const double p16 = round16(st[f / 16].v[l][f % 16], type);
                        const int key = fmhai_mfma_chain_key(SH, SH, kb, l, e);
                        pc[e] = code16(p16, type);
                        pr[ql][n0 + key] = p16;     /* both halves of the wave write their own keys */
                        vc[e] = sV[(vec ? fmhai_mfma_lds_cmaj(mb * 32 + ql, kb * 8 + 4 * kh, HD) + 2 * e
                                        : fmhai_mfma_lds_vt_at(fmhai_mfma_lds_vt(ql, kh, e, HD), mb, kb, HD)) / 2];
                    }
                    frag_set(&rb, l, pc);
                    frag_set(&ra, l, vc);
                }
                run_model(type, &ra, &rb, &acc[mb]);
            }
    }
    check(s_ok, "mfma_fwd_S_product_eq_QKt", shape);
    check(max_ok, "mfma_fwd_row_max_fold_then_xor32", shape);

    /* ---- epilogue: the query's sum over both halves, O store mapping ---- */
    {
        float other[64];
        int addr[64];
        static int written[ROWS * MAXHD];
        for (l = 0; l < 64; ++l) addr[l] = 4 * (l ^ 32);
        mfma_ds_bpermute(row_sum, other, addr);
        memset(written, 0, sizeof written);
        for (l = 0; l < 32; ++l) {
            double want = 0;
            for (j = 0; j < NK; ++j) {
                double sc = 0;
                for (c = 0; c < HD; ++c) sc += q[l][c] * k[j][c];
                want += exp2((sc - row_max[l]) * sl2);
            }
            sum_err = fmax(sum_err, fabs((row_sum[l] + other[l]) - want) / want);
        }
        for (l = 0; l < 64; ++l) {
            const float inv = 1.0f / (row_sum[l] + other[l]);
            for (mb = 0; mb < NMB; ++mb)
                for (i = 0; i < 4; ++i) {
                    const int col = mb * 32 + fmhai_mfma_d_elem(SH, l, 4 * i).row, row = l % 32;
                    for (e = 0; e < 4; ++e) {   /* the 8-byte store: 4 consecutive columns */
                        const int at = fmhai_mfma_lds_swz(row, col, HD) / 2 + e;
                        if (fmhai_mfma_d_elem(SH, l, 4 * i + e).row != col - mb * 32 + e) o_once = 0;
                        sO[at] = code16(round16(acc[mb].v[l][4 * i + e] * inv, type), type);
                        written[at]++;
                    }
                }
        }
        for (i = 0; i < ROWS * HD; ++i)
            if (written[i] != 1) o_once = 0;
        /* the 16-byte row chunks the store reads back, against the plain math */
        for (i = 0; i < ROWS; ++i)
            for (c = 0; c < HD; ++c) {
                double want = 0;
                const double got = mfma_decode(type, sO[fmhai_mfma_lds_swz(i, c, HD) / 2]);
                for (j = 0; j < NK; ++j) want += pr[i][j] * scale_of[i][j / BN] * v[j][c];
                want /= (row_sum[i] + row_sum[i + 32]);
                o_err += (got - want) * (got - want);
                o_ref += want * want;
            }
    }
    check(sum_err <= 1e-5, "mfma_fwd_row_sum_fold_then_xor32", shape);
    check(o_once, "mfma_fwd_O_store_each_element_once_in_runs_of_4", shape);
    {
        const double rel = sqrt(o_err / (o_ref > 0 ? o_ref : 1));
        const double tol = type == MFMA_MODEL_BF16 ? 4e-3 : 5e-4;   /* O's own 16-bit rounding */
        check(rel <= tol, "mfma_fwd_O_eq_softmax_QKt_V", shape);
        if (rel > tol) printf("    rel. L2 error %.3g (tolerance %.1g)\n", rel, tol);
    }
}

int main(void)
{
    /* the GFX9 rows' shapes (policy/fwd_tiles.h): head dim 64/128 with key
     * tiles of 64, 256 with 32; VECTORIZED pages at the 64-key tiles */
    static const int shapes[][2] = { { 64, 64 }, { 128, 64 }, { 256, 32 } };
    int s, type;
    g_rng = 0x2545f4914f6cdd1dull;
    for (s = 0; s < 3; ++s)
        for (type = 0; type < 2; ++type) {
            const int mt = type ? MFMA_MODEL_BF16 : MFMA_MODEL_F16;
            test_case(shapes[s][0], shapes[s][1], mt, 0, 0);
            if (shapes[s][1] == 64) test_case(shapes[s][0], shapes[s][1], mt, 1, 0);
        }
    /* FP8 KV: the decode, then the tile step on the decoded tiles (f16) */
    test_e4m3_decode();
    for (s = 0; s < 3; ++s) {
        /* where fmhai_fwd_mfma puts the FP8 pieces of a 64-row block: both
         * e4m3 tiles in the 16-bit V slot, the descales [K,V][BN] in the Q
         * tile, the row scales [BM] in the K slot; all within 64 KB */
        const int HD = shapes[s][0], BN = shapes[s][1], BM = 64;
        char shape[32];
        snprintf(shape, sizeof shape, "hd%d_bn%d", HD, BN);
        check(2 * BN * HD <= BN * HD * 2 && 2 * BN * 4 <= BM * HD * 2 && BM * 4 <= BN * HD * 2 &&
                  (BM + 2 * BN) * HD * 2 <= 65536,
              "mfma_fwd_fp8_lds_placement_within_64k", shape);
    }
    for (s = 0; s < 3; ++s) test_case(shapes[s][0], shapes[s][1], MFMA_MODEL_F16, 0, 1);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
