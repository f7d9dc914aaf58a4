/*
 * Host replay of the MFMA backward's tile step (include/fmha_tile/pipeline/
 * bwd_mfma.h) on the instruction model (tests/host/mfma_model.h), in plain
 * C: no AMD GPU is needed, and none was available when this was written.
 *
 * For every tile shape the GFX9 backward rows give the pipeline
 * (policy/bwd_tiles.h: head dim 64 with 64 x 64 tiles and two waves, 128 and
 * 256 with 64 x 32 tiles and one wave; fp16 and bf16) it builds the LDS
 * tiles the loaders land (swizzled 16-bit Q, dO, K, V rows), then does what
 * every wave of the block does for one query tile, with the pipeline's own
 * address and layout functions (tile/mfma_layout.h):
 *   - the fragment addresses: S^T's and dP^T's A (4 consecutive columns of
 *     the slice's query row) and B (of the wave's key row); dV^T's and
 *     dK^T's A read down a column of dO / Q at the chained queries
 *     (fmhai_mfma_chain_key); dQ's A (8 bytes of a dS row) and B (K down a
 *     column); the slot -> query map (fmhai_mfma_slot_row) and the dK/dV
 *     store map (4 consecutive head-dim columns per 4 slots);
 *   - the dS tile: fmhai_mfma_lds_ds is one-to-one onto the tile's bytes and
 *     every element is written once by the waves' slot stores;
 *   - the products on v_mfma_f32_32x32x8 (model) against plain matrix math:
 *     S^T = K Q^T and dP^T = V dO^T (exact values, exact sums), P^T from the
 *     LSE, dV = P^T dO, dS^T = P^T (dP^T - D), dK = dS^T Q, and dQ = dS K
 *     over the waves' split of 32 x 32 blocks (every element once), each
 *     against double sums of the same 16-bit P^T and dS^T (rel. error 1e-5);
 *   - P^T from the LSE against plain math (exp(s scale + bias - LSE)) at the
 *     element the instruction put in each slot, and, with an elementwise
 *     bias (BIAS rows; every shape again), the bias element of the slot's
 *     (query, key) in it (about one in 16 -inf, and one query row all -inf
 *     with an LSE of -inf: P 0, not NaN), and dbias = dS in fp32 put by
 *     slot pairs (queries i, i + 1 of the lane's key, as
 *     fmhai_bwd_dbias_put2 takes them): every (query, key) once, against
 *     plain P (dP - D) (rel. error 1e-5);
 *   - the dropout keep bits of a lane's slots (fmhai_mfma_bwd_keep) against
 *     the element rule of tile/philox.h (fmhai_dropout_byte) for every lane
 *     and slot of a slice.
 * Last line: "N passed, M failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "fmha_tile/tile/mfma_layout.h"
#include "host/mfma_test.h"

enum { MAXHD = 256, MAXBN = 64, MAXBM = 64 };

/* P^T of one element, in float as the pipeline computes it: eb2 is the
 * elementwise bias times log2(e) (fmhai_bwd_bias_ld; 0 without a bias), a
 * -inf element giving P 0 */
static float p_of(float s, float lse, float sl2, float eb2)
{
    if (eb2 == -INFINITY) return 0.f;
    return exp2f(s * sl2 - (lse * 1.4426950408889634f - eb2));
}

static void rel_check(double err, double ref, double tol, const char *what, const char *shape)
{
    const double rel = sqrt(err / (ref > 0 ? ref : 1));
    check(rel <= tol, what, shape);
    if (rel > tol) printf("    rel. L2 error %.3g (tolerance %.1g)\n", rel, tol);
}

/* one (head dim, tile_m, tile_n, type) case: every wave of a block, one
 * query tile of BM rows in 32-query slices; BIAS: with an elementwise bias
 * (BIAS rows), P^T and dbias checked against plain math */
static void test_case(int HD, int BM, int BN, int type, int BIAS)
{
    const fmhai_mfma_shape SH = type == MFMA_MODEL_BF16 ? FMHAI_MFMA_32X32X8_BF16 : FMHAI_MFMA_32X32X8_F16;
    const int NWV = BN / 32, NMB = HD / 32, RB = BM / 32 < 2 ? BM / 32 : 2;
    const float sl2 = 0.125f * 1.4426950408889634f;
    static double q[MAXBM][MAXHD], dO[MAXBM][MAXHD], k[MAXBN][MAXHD], v[MAXBN][MAXHD];
    static double pr[MAXBM][MAXBN], dsr[MAXBM][MAXBN];   /* the 16-bit P^T, dS^T the products take */
    static float lse[MAXBM], dsum[MAXBM];
    static uint16_t sQ[MAXBM * MAXHD], sO[MAXBM * MAXHD], sK[MAXBN * MAXHD], sV[MAXBN * MAXHD];
    static uint16_t sS[MAXBM * MAXBN];
    static int ds_written[MAXBM * MAXBN], dq_written[MAXBM][MAXHD];
    static mfma_wave_d acc_v[MAXHD / 32], acc_k[MAXHD / 32];
    char shape[96];
    int i, j, c, l, e, kb, mb, w, q0;
    int addr_ok = 1, map_ok = 1, s_ok = 1, dp_ok = 1, ds_once = 1, dq_once = 1, kv_once = 1;
    double dv_err = 0, dv_ref = 0, dk_err = 0, dk_ref = 0, dq_err = 0, dq_ref = 0;
    static int kv_written[MAXBN][MAXHD];
    /* elementwise bias (some -inf), the plain P and dS, and the dbias the
     * slot pairs give, with a write count per element */
    static double bias[MAXBM][MAXBN], p_plain[MAXBM][MAXBN], ds_plain[MAXBM][MAXBN];
    static float dbias[MAXBM][MAXBN];
    static int db_written[MAXBM][MAXBN];
    double p_err = 0, p_ref = 0, db_err = 0, db_ref = 0;
    int db_once = 1;

    snprintf(shape, sizeof shape, "hd%d_bm%d_bn%d_%s%s", HD, BM, BN, type == MFMA_MODEL_BF16 ? "bf16" : "f16",
             BIAS ? "_bias" : "");
    for (i = 0; i < BM; ++i) {
        for (c = 0; c < HD; ++c) { q[i][c] = rnd_val(); dO[i][c] = rnd_val(); }
        lse[i] = (float)(rnd() % 9) * 0.25f;
        dsum[i] = (float)((int)(rnd() % 9) - 4) * 0.125f;
    }
    for (j = 0; j < BN; ++j)
        for (c = 0; c < HD; ++c) { k[j][c] = rnd_val(); v[j][c] = rnd_val(); }
    /* the bias: -inf about one element in 16, and all of query row 5,
     * whose LSE is then -inf (the pipeline's P must be 0 there, not NaN) */
    for (i = 0; i < BM; ++i)
        for (j = 0; j < BN; ++j)
            bias[i][j] = !BIAS ? 0 : rnd() % 16 == 0 || i == 5 ? -INFINITY : (double)((int)(rnd() % 33) - 16) * 0.0625;
    if (BIAS) lse[5] = -INFINITY;
    /* plain math: P = exp(s scale + bias - lse) (0 where the bias is -inf),
     * dS = P (dP - D) */
    for (i = 0; i < BM; ++i)
        for (j = 0; j < BN; ++j) {
            double sv = 0, dpv = 0;
            for (c = 0; c < HD; ++c) { sv += q[i][c] * k[j][c]; dpv += dO[i][c] * v[j][c]; }
            p_plain[i][j] = bias[i][j] == -INFINITY ? 0 : exp(sv * 0.125 + bias[i][j] - lse[i]);
            ds_plain[i][j] = p_plain[i][j] * (dpv - dsum[i]);
        }
    for (i = 0; i < BM; ++i)
        for (c = 0; c < HD; ++c) {
            sQ[fmhai_mfma_lds_swz(i, c, HD) / 2] = code16(q[i][c], type);
            sO[fmhai_mfma_lds_swz(i, c, HD) / 2] = code16(dO[i][c], type);
        }
    for (j = 0; j < BN; ++j)
        for (c = 0; c < HD; ++c) {
            sK[fmhai_mfma_lds_swz(j, c, HD) / 2] = code16(k[j][c], type);
            sV[fmhai_mfma_lds_swz(j, c, HD) / 2] = code16(v[j][c], type);
        }

    /* ---- addresses and maps, per lane -------------------------------------- */
    for (w = 0; w < NWV; ++w)
        for (l = 0; l < 64; ++l) {
            const int ql = l % 32, kh = l / 32, key0 = 32 * w;
            for (q0 = 0; q0 < BM; q0 += 32)
                for (kb = 0; kb < HD / 8; ++kb)
                    for (e = 0; e < 4; ++e) {
                        const fmhai_mfma_rc ae = fmhai_mfma_a_elem(SH, l, e), be = fmhai_mfma_b_elem(SH, l, e);
                        /* S^T / dP^T: A = query row q0 + ae.row, B = key row key0 + be.col */
                        if (fmhai_mfma_lds_kb(q0 * HD * 2 + fmhai_mfma_lds_row(ql, kh, HD), kb) + 2 * e !=
                            fmhai_mfma_lds_swz(q0 + ae.row, kb * 8 + ae.col, HD))
                            addr_ok = 0;
                        if (fmhai_mfma_lds_kb(fmhai_mfma_lds_row(key0 + ql, kh, HD), kb) + 2 * e !=
                            fmhai_mfma_lds_swz(key0 + be.col, kb * 8 + be.row, HD))
                            addr_ok = 0;
                    }
            for (mb = 0; mb < NMB; ++mb)
                for (kb = 0; kb < 4; ++kb)
                    for (e = 0; e < 4; ++e) {
                        /* dV^T / dK^T: A (head-dim row mb*32 + ae.row, query k) must
                         * read the query the chained B slot carries */
                        const fmhai_mfma_rc ae = fmhai_mfma_a_elem(SH, l, e);
                        const int qk = fmhai_mfma_chain_key(SH, SH, kb, l, e);
                        if (kb * 8 + ae.col != qk) addr_ok = 0;
                        if (fmhai_mfma_lds_vt_at(32 * HD * 2 + fmhai_mfma_lds_vt(ql, kh, e, HD), mb, kb, HD) !=
                            fmhai_mfma_lds_swz(32 + qk, mb * 32 + ae.row, HD))
                            addr_ok = 0;
                    }
            for (mb = 0; mb < NMB; ++mb)
                for (kb = 0; kb < BN / 8; ++kb)
                    for (e = 0; e < 4; ++e) {
                        /* dQ: B = K (key k, head-dim column), A = dS (query row, key k) */
                        const fmhai_mfma_rc be = fmhai_mfma_b_elem(SH, l, e), ae = fmhai_mfma_a_elem(SH, l, e);
                        int rb;
                        if (fmhai_mfma_lds_vt_at(fmhai_mfma_lds_vt(ql, kh, e, HD), mb, kb, HD) !=
                            fmhai_mfma_lds_swz(kb * 8 + be.row, mb * 32 + be.col, HD))
                            addr_ok = 0;
                        for (rb = 0; rb < BM / 32; ++rb)
                            if (rb * 32 * BN * 2 + fmhai_mfma_lds_ds_kb(fmhai_mfma_lds_ds_row(ql, kh, BN), kb) + 2 * e !=
                                fmhai_mfma_lds_ds(rb * 32 + ae.row, kb * 8 + ae.col, BN))
                                addr_ok = 0;
                    }
            for (e = 0; e < 16; ++e) {
                const fmhai_mfma_rc de = fmhai_mfma_d_elem(SH, l, e);
                /* S^T's slot e: query 4*kh + slot_row(e) of the slice, key ql */
                if (de.row != 4 * kh + fmhai_mfma_slot_row(e) || de.col != ql) map_ok = 0;
                /* dK^T / dV^T block: slots 4*g4 + r are columns 8*g4 + 4*kh + r */
                if (de.row != 8 * (e / 4) + 4 * kh + e % 4) map_ok = 0;
            }
        }
    check(addr_ok, "mfma_bwd_fragment_addresses", shape);
    check(map_ok, "mfma_bwd_slot_query_and_store_maps", shape);
    {   /* the dS tile: one-to-one onto BM * BN 16-bit elements */
        static int hit[MAXBM * MAXBN];
        int ok = 1;
        memset(hit, 0, sizeof hit);
        for (i = 0; i < BM; ++i)
            for (j = 0; j < BN; ++j) {
                const int a = fmhai_mfma_lds_ds(i, j, BN);
                if (a < 0 || a >= BM * BN * 2 || a % 2) ok = 0;
                else hit[a / 2]++;
            }
        for (i = 0; i < BM * BN; ++i)
            if (hit[i] != 1) ok = 0;
        check(ok, "mfma_bwd_dS_tile_one_to_one", shape);
    }

    /* ---- the step: every wave, every slice ---------------------------------- */
    memset(ds_written, 0, sizeof ds_written);
    memset(acc_v, 0, sizeof acc_v);
    memset(acc_k, 0, sizeof acc_k);
    memset(kv_written, 0, sizeof kv_written);
    memset(db_written, 0, sizeof db_written);
    for (w = 0; w < NWV; ++w) {
        const int key0 = 32 * w;
        memset(acc_v, 0, sizeof acc_v);
        memset(acc_k, 0, sizeof acc_k);
        for (q0 = 0; q0 < BM; q0 += 32) {
            mfma_wave_ab ra, rb;
            mfma_wave_d st, dp;
            uint16_t pc[64][16], dc[64][16];
            /* S^T = K Q^T and dP^T = V dO^T: Q / dO as A, K / V as B */
            memset(&st, 0, sizeof st);
            memset(&dp, 0, sizeof dp);
            for (kb = 0; kb < HD / 8; ++kb) {
                for (l = 0; l < 64; ++l) {
                    const int ql = l % 32, kh = l / 32;
                    const int qa = fmhai_mfma_lds_kb(q0 * HD * 2 + fmhai_mfma_lds_row(ql, kh, HD), kb);
                    const int kba = fmhai_mfma_lds_kb(fmhai_mfma_lds_row(key0 + ql, kh, HD), kb);
                    frag_set(&ra, l, &sQ[qa / 2]);
                    frag_set(&rb, l, &sK[kba / 2]);
                }
                run_model(type, &ra, &rb, &st);
                for (l = 0; l < 64; ++l) {
                    const int ql = l % 32, kh = l / 32;
                    const int qa = fmhai_mfma_lds_kb(q0 * HD * 2 + fmhai_mfma_lds_row(ql, kh, HD), kb);
                    const int kba = fmhai_mfma_lds_kb(fmhai_mfma_lds_row(key0 + ql, kh, HD), kb);
                    frag_set(&ra, l, &sO[qa / 2]);
                    frag_set(&rb, l, &sV[kba / 2]);
                }
                run_model(type, &ra, &rb, &dp);
            }
            /* slot e of lane l: query q0 + 4*kh + slot_row(e), key key0 + ql */
            for (l = 0; l < 64; ++l) {
                float dsf[16];   /* the lane's dS^T in fp32, as dbias takes it */
                const int i0 = q0 + 4 * (l / 32), jk = key0 + l % 32;
                for (e = 0; e < 16; ++e) {
                    const int qi = i0 + fmhai_mfma_slot_row(e), kj = jk;
                    /* where the instruction put the slot (D layout) */
                    const fmhai_mfma_rc de = fmhai_mfma_d_elem(SH, l, e);
                    const int di = q0 + de.row, dj = key0 + de.col;
                    double s_want = 0, dp_want = 0;
                    float pv, dsv;
                    for (c = 0; c < HD; ++c) { s_want += q[qi][c] * k[kj][c]; dp_want += dO[qi][c] * v[kj][c]; }
                    if ((double)st.v[l][e] != s_want) s_ok = 0;
                    if ((double)dp.v[l][e] != dp_want) dp_ok = 0;
                    /* P^T and dS^T as the pipeline forms them, from the lane's
                     * LSE and D (float4 g4 of the slice, element r) and the
                     * bias element of the slot's (query, key) */
                    pv = p_of(st.v[l][e], lse[q0 + 8 * (e / 4) + 4 * (l / 32) + e % 4], sl2,
                              (float)bias[qi][kj] * 1.4426950408889634f);
                    dsv = pv * (dp.v[l][e] - dsum[q0 + 8 * (e / 4) + 4 * (l / 32) + e % 4]);
                    /* against plain math at the element the slot holds */
                    p_err += (pv - p_plain[di][dj]) * (pv - p_plain[di][dj]);
                    p_ref += p_plain[di][dj] * p_plain[di][dj];
                    pr[qi][kj] = round16(pv, type);
                    dsr[qi][kj] = round16(dsv, type);
                    pc[l][e] = code16(pr[qi][kj], type);
                    dc[l][e] = code16(dsr[qi][kj], type);
                    dsf[e] = dsv;
                }
                /* dbias as the pipeline puts it (fmhai_bwd_dbias_put2): slots
                 * e, e + 1 (e even) to queries i0 + slot_row(e) and the next */
                for (e = 0; BIAS && e < 16; e += 2) {
                    int t;
                    for (t = 0; t < 2; ++t) {
                        const int qi = i0 + fmhai_mfma_slot_row(e) + t;
                        dbias[qi][jk] = dsf[e + t];
                        db_written[qi][jk]++;
                    }
                }
            }
            /* dV^T += dO^T P, dK^T += Q^T dS: A down the columns, B chained */
            for (mb = 0; mb < NMB; ++mb)
                for (kb = 0; kb < 4; ++kb) {
                    for (l = 0; l < 64; ++l) {
                        const int ql = l % 32, kh = l / 32;
                        uint16_t ao[4];
                        for (e = 0; e < 4; ++e)
                            ao[e] = sO[fmhai_mfma_lds_vt_at(q0 * HD * 2 + fmhai_mfma_lds_vt(ql, kh, e, HD), mb, kb, HD) / 2];
                        frag_set(&ra, l, ao);
                        frag_set(&rb, l, &pc[l][4 * kb]);
                    }
                    run_model(type, &ra, &rb, &acc_v[mb]);
                    for (l = 0; l < 64; ++l) {
                        const int ql = l % 32, kh = l / 32;
                        uint16_t aq[4];
                        for (e = 0; e < 4; ++e)
                            aq[e] = sQ[fmhai_mfma_lds_vt_at(q0 * HD * 2 + fmhai_mfma_lds_vt(ql, kh, e, HD), mb, kb, HD) / 2];
                        frag_set(&ra, l, aq);
                        frag_set(&rb, l, &dc[l][4 * kb]);
                    }
                    run_model(type, &ra, &rb, &acc_k[mb]);
                }
            /* dS^T -> LDS: slot e to (query, key) through fmhai_mfma_lds_ds */
            for (l = 0; l < 64; ++l)
                for (e = 0; e < 16; ++e) {
                    const int a = fmhai_mfma_lds_ds(q0 + 4 * (l / 32) + fmhai_mfma_slot_row(e), key0 + l % 32, BN) / 2;
                    sS[a] = dc[l][e];
                    ds_written[a]++;
                }
        }
        /* the wave's dK and dV rows: lane's key, 4 columns per 4 slots */
        for (l = 0; l < 64; ++l)
            for (mb = 0; mb < NMB; ++mb)
                for (e = 0; e < 16; ++e) {
                    const int kj = key0 + l % 32, col = mb * 32 + 8 * (e / 4) + 4 * (l / 32) + e % 4;
                    double dv_want = 0, dk_want = 0;
                    for (i = 0; i < BM; ++i) { dv_want += pr[i][kj] * dO[i][col]; dk_want += dsr[i][kj] * q[i][col]; }
                    dv_err += (acc_v[mb].v[l][e] - dv_want) * (acc_v[mb].v[l][e] - dv_want);
                    dv_ref += dv_want * dv_want;
                    dk_err += (acc_k[mb].v[l][e] - dk_want) * (acc_k[mb].v[l][e] - dk_want);
                    dk_ref += dk_want * dk_want;
                    kv_written[kj][col]++;
                }
    }
    for (j = 0; j < BN; ++j)
        for (c = 0; c < HD; ++c)
            if (kv_written[j][c] != 1) kv_once = 0;
    for (i = 0; i < BM * BN; ++i)
        if (ds_written[i] != 1) ds_once = 0;
    check(s_ok, "mfma_bwd_S_eq_QKt", shape);
    check(dp_ok, "mfma_bwd_dP_eq_dO_Vt", shape);
    rel_check(dv_err, dv_ref, 1e-5, "mfma_bwd_dV_eq_Pt_dO", shape);
    rel_check(dk_err, dk_ref, 1e-5, "mfma_bwd_dK_eq_dSt_Q", shape);
    check(kv_once && ds_once, "mfma_bwd_dK_dV_rows_and_dS_tile_each_element_once", shape);
    rel_check(p_err, p_ref, 1e-5, "mfma_bwd_P_eq_exp_S_plus_bias_minus_lse", shape);
    if (BIAS) {   /* dbias = dS: every (query, key) once, against plain math */
        for (i = 0; i < BM; ++i)
            for (j = 0; j < BN; ++j) {
                if (db_written[i][j] != 1) db_once = 0;
                db_err += (dbias[i][j] - ds_plain[i][j]) * (dbias[i][j] - ds_plain[i][j]);
                db_ref += ds_plain[i][j] * ds_plain[i][j];
            }
        check(db_once, "mfma_bwd_dbias_each_element_once", shape);
        rel_check(db_err, db_ref, 1e-5, "mfma_bwd_dbias_eq_dS", shape);
    }

    /* ---- dQ = dS K: the waves' (RB x 32)-row, 32-column blocks --------------- */
    memset(dq_written, 0, sizeof dq_written);
    for (w = 0; w < NWV; ++w) {
        int u;
        for (u = w; u < NMB * (BM / 32 / RB); u += NWV) {
            const int cb = u / (BM / 32 / RB), rb0 = (u % (BM / 32 / RB)) * RB;
            int rbi;
            for (rbi = 0; rbi < RB; ++rbi) {
                mfma_wave_d aq;
                mfma_wave_ab ra, rb;
                memset(&aq, 0, sizeof aq);
                for (kb = 0; kb < BN / 8; ++kb) {
                    for (l = 0; l < 64; ++l) {
                        const int ql = l % 32, kh = l / 32;
                        uint16_t kf[4];
                        const int sa = (rb0 + rbi) * 32 * BN * 2 + fmhai_mfma_lds_ds_kb(fmhai_mfma_lds_ds_row(ql, kh, BN), kb);
                        for (e = 0; e < 4; ++e)
                            kf[e] = sK[fmhai_mfma_lds_vt_at(fmhai_mfma_lds_vt(ql, kh, e, HD), cb, kb, HD) / 2];
                        frag_set(&ra, l, &sS[sa / 2]);
                        frag_set(&rb, l, kf);
                    }
                    run_model(type, &ra, &rb, &aq);
                }
                for (l = 0; l < 64; ++l)
                    for (e = 0; e < 16; ++e) {
                        const int row = (rb0 + rbi) * 32 + 8 * (e / 4) + 4 * (l / 32) + e % 4, col = cb * 32 + l % 32;
                        double want = 0;
                        for (j = 0; j < BN; ++j) want += dsr[row][j] * k[j][col];
                        dq_err += (aq.v[l][e] - want) * (aq.v[l][e] - want);
                        dq_ref += want * want;
                        dq_written[row][col]++;
                    }
            }
        }
    }
    for (i = 0; i < BM; ++i)
        for (c = 0; c < HD; ++c)
            if (dq_written[i][c] != 1) dq_once = 0;
    check(dq_once, "mfma_bwd_dQ_blocks_each_element_once", shape);
    rel_check(dq_err, dq_ref, 1e-5, "mfma_bwd_dQ_eq_dS_K", shape);
}

/* dropout: a lane's keep bits against the element rule, every lane and slot */
static void test_keep(void)
{
    const uint64_t seed = 0x0123456789abcdefull, offset = 0x8000000100000020ull;
    const uint32_t thr = 77, bh = 5;
    int ok = 1, kept = 0, m0, q0, l, e;
    for (m0 = 0; m0 < 128; m0 += 64)
        for (q0 = 0; q0 < 64; q0 += 32)
            for (l = 0; l < 64; ++l) {
                const int i0 = m0 + q0 + 4 * (l / 32), j = 96 + l % 32;
                const uint32_t keep = fmhai_mfma_bwd_keep(seed, offset, bh, i0, j, thr);
                for (e = 0; e < 16; ++e) {
                    const int i = i0 + fmhai_mfma_slot_row(e);
                    const uint32_t want = fmhai_dropout_byte(seed, offset, bh, (uint32_t)i, (uint32_t)j) >= thr;
                    if (((keep >> e) & 1u) != want) ok = 0;
                    kept += (int)want;
                }
            }
    /* both outcomes occur (77/256 dropped) */
    check(ok && kept > 0 && kept < 4 * 64 * 16, "mfma_bwd_dropout_keep_bits_eq_element_rule", "slices");
}

int main(void)
{
    /* the GFX9 backward rows (policy/bwd_tiles.h): hdim 64 64 x 64 (two
     * waves), 128 and 256 64 x 32 (one wave) */
    static const int shapes[][3] = { { 64, 64, 64 }, { 128, 64, 32 }, { 256, 64, 32 } };
    int s, type, bias;
    g_rng = 0x9e3779b97f4a7c15ull;
    for (bias = 0; bias < 2; ++bias)
        for (s = 0; s < 3; ++s)
            for (type = 0; type < 2; ++type)
                test_case(shapes[s][0], shapes[s][1], shapes[s][2], type ? MFMA_MODEL_BF16 : MFMA_MODEL_F16, bias);
    test_keep();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
