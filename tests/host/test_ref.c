/*
 * test_ref.c - host-only self-test of tests/ref/fmha_ref.h.
 *
 * The GPU tests are only as good as the reference, so the reference gets its own
 * check against formulas written a second, different way: a dense score matrix
 * with -inf for masked entries and a one-pass softmax (no max subtraction; the
 * inputs are small), the mask written as the per-element predicate instead of an
 * interval. It also checks the properties that must hold whatever the formula:
 * fully masked rows give O = 0 and LSE = -inf, probabilities sum to one (V = 1
 * gives O = 1), the result does not depend on the memory layout, and the fp16/bf16
 * and e4m3 conversions round to nearest even (e4m3 also: exact decode of all 256
 * codes, saturation at 448, subnormals). The FP8 forward's row (P rounded to
 * e4m3 per key tile, fmha_ref_fwd_row_p8) against a closed form of the same
 * rounding: each key's weight relative to the running maximum of its tile and
 * the tiles after it. Plain C11:
 *     gcc -std=c11 -O2 -Wall -Wextra -Itests tests/host/test_ref.c -lm -o build/tests/test_ref
 * Prints one PASS/FAIL line per check and ends with "N passed, M failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/fmha_ref.h"

static int g_pass, g_fail;

static void report(int ok, const char *name, const char *why)
{
    if (ok) { printf("PASS %s\n", name); g_pass++; }
    else { printf("FAIL %s: %s\n", name, why); g_fail++; }
}

/* ---------------------------------------------------------------------------
 * A small problem in [b][s][h][d] (batch mode) or [t][h][d] (group mode) layout.
 * ------------------------------------------------------------------------- */
#define MAXB 4

typedef struct small_case {
    const char *name;
    int group;
    int batch, hq, hk, d;
    int sq[MAXB], sk[MAXB];      /* per batch entry (batch mode: all equal) */
    int mask, wl, wr;
    float scale, cap;
    int alibi;                   /* 0 off, 1 shared, 2 per batch */
} small_case;

typedef struct small_prob {
    fmha_ref_fwd p;
    float *q, *k, *v, *o, *lse, *slopes;
    int32_t ssq[MAXB + 1], ssk[MAXB + 1];
} small_prob;

/* Fills a problem with random inputs; permuted != 0 uses [b][h][s][d] (or
 * [h][t][d]) with padded rows instead, for the layout-independence check. */
static void small_setup(small_prob *sp, const small_case *c, int permuted, uint64_t seed)
{
    fmha_ref_fwd *p = &sp->p;
    fmha_ref_rng r = fmha_ref_rng_make(seed);
    int b, n, dp = c->d + (permuted ? 3 : 0), tq = 0, tk = 0, maxq = 0, maxk = 0;
    size_t nq, nk, no, i;

    memset(sp, 0, sizeof(*sp));
    for (b = 0; b < c->batch; b++) {
        sp->ssq[b] = tq; sp->ssk[b] = tk;
        tq += c->sq[b]; tk += c->sk[b];
        if (c->sq[b] > maxq) maxq = c->sq[b];
        if (c->sk[b] > maxk) maxk = c->sk[b];
    }
    sp->ssq[c->batch] = tq; sp->ssk[c->batch] = tk;

    p->is_group_mode = c->group;
    p->batch = c->batch; p->nhead_q = c->hq; p->nhead_k = c->hk;
    p->seqlen_q = c->sq[0]; p->seqlen_k = c->sk[0];
    p->seqstart_q = sp->ssq; p->seqstart_k = sp->ssk;
    p->hdim_q = p->hdim_v = c->d;
    p->scale = c->scale; p->logits_soft_cap = c->cap;
    p->mask_type = c->mask; p->window_left = c->wl; p->window_right = c->wr;

    if (c->group) {
        nq = (size_t)tq * c->hq * dp; nk = (size_t)tk * c->hk * dp;
        if (!permuted) {
            p->stride_q = p->stride_o = (int64_t)c->hq * dp; p->nhead_stride_q = p->nhead_stride_o = dp;
            p->stride_k = p->stride_v = (int64_t)c->hk * dp; p->nhead_stride_k = p->nhead_stride_v = dp;
        } else {
            p->stride_q = p->stride_o = p->stride_k = p->stride_v = dp;
            p->nhead_stride_q = p->nhead_stride_o = (int64_t)tq * dp;
            p->nhead_stride_k = p->nhead_stride_v = (int64_t)tk * dp;
        }
        p->nhead_stride_lse = tq;
    } else {
        int sq = c->sq[0], sk = c->sk[0];
        nq = (size_t)c->batch * sq * c->hq * dp; nk = (size_t)c->batch * sk * c->hk * dp;
        if (!permuted) {
            p->stride_q = p->stride_o = (int64_t)c->hq * dp; p->nhead_stride_q = p->nhead_stride_o = dp;
            p->stride_k = p->stride_v = (int64_t)c->hk * dp; p->nhead_stride_k = p->nhead_stride_v = dp;
        } else {
            p->stride_q = p->stride_o = p->stride_k = p->stride_v = dp;
            p->nhead_stride_q = p->nhead_stride_o = (int64_t)sq * dp;
            p->nhead_stride_k = p->nhead_stride_v = (int64_t)sk * dp;
        }
        p->batch_stride_q = p->batch_stride_o = (int64_t)sq * c->hq * dp;
        p->batch_stride_k = p->batch_stride_v = (int64_t)sk * c->hk * dp;
        p->nhead_stride_lse = sq; p->batch_stride_lse = (int64_t)sq * c->hq;
    }
    no = nq;
    sp->q = (float *)malloc(sizeof(float) * (nq + 1));
    sp->k = (float *)malloc(sizeof(float) * (nk + 1));
    sp->v = (float *)malloc(sizeof(float) * (nk + 1));
    sp->o = (float *)malloc(sizeof(float) * (no + 1));
    n = c->batch * c->hq * (maxq + 1) + 1;
    sp->lse = (float *)malloc(sizeof(float) * (size_t)n);
    sp->slopes = (float *)malloc(sizeof(float) * MAXB * 16);
    /* Padding holds NaN: if the reference ever read it, results would be NaN. */
    for (i = 0; i < nq; i++) sp->q[i] = (permuted && (int)(i % dp) >= c->d) ? NAN : fmha_ref_rng_input(&r, 1.0f);
    for (i = 0; i < nk; i++) sp->k[i] = (permuted && (int)(i % dp) >= c->d) ? NAN : fmha_ref_rng_input(&r, 1.0f);
    for (i = 0; i < nk; i++) sp->v[i] = (permuted && (int)(i % dp) >= c->d) ? NAN : fmha_ref_rng_input(&r, 1.0f);
    for (i = 0; i < no; i++) sp->o[i] = NAN;
    for (i = 0; i < (size_t)n; i++) sp->lse[i] = NAN;
    for (i = 0; i < MAXB * 16; i++) sp->slopes[i] = fmha_ref_rng_uniform(&r, 0.05f, 0.5f);
    p->q = sp->q; p->k = sp->k; p->v = sp->v; p->o = sp->o; p->lse = sp->lse;
    if (c->alibi) {
        p->alibi_slopes = sp->slopes;
        p->alibi_batch_stride = c->alibi == 2 ? c->hq : 0;
    }
    (void)maxk;
}

/* Permuted layouts must use the same random values at the same logical place;
 * copy them over from the canonical problem. */
static void small_copy_values(small_prob *dst, const small_prob *src, const small_case *c)
{
    int b, h, i, x, sq, sk;
    for (b = 0; b < c->batch; b++) {
        fmha_ref_lengths(&src->p, b, &sq, &sk);
        for (h = 0; h < c->hq; h++)
            for (i = 0; i < sq; i++)
                for (x = 0; x < c->d; x++)
                    dst->q[fmha_ref_off_q(&dst->p, b, h, i) + x] = src->q[fmha_ref_off_q(&src->p, b, h, i) + x];
        for (h = 0; h < c->hk; h++)
            for (i = 0; i < sk; i++)
                for (x = 0; x < c->d; x++) {
                    dst->k[fmha_ref_off_k(&dst->p, b, h, i) + x] = src->k[fmha_ref_off_k(&src->p, b, h, i) + x];
                    dst->v[fmha_ref_off_v(&dst->p, b, h, i) + x] = src->v[fmha_ref_off_v(&src->p, b, h, i) + x];
                }
    }
}

static void small_free(small_prob *sp)
{
    free(sp->q); free(sp->k); free(sp->v); free(sp->o); free(sp->lse); free(sp->slopes);
}

/* The second formula: dense matrix, predicate mask, softmax without max. */
static int naive_visible(const small_case *c, int sq, int sk, int i, int j)
{
    int off;
    if (c->mask == FMHA_REF_MASK_NONE) return 1;
    off = c->mask == FMHA_REF_MASK_BOTTOM_RIGHT ? sk - sq : 0;
    if (c->wl >= 0 && j < i + off - c->wl) return 0;
    if (c->wr >= 0 && j > i + off + c->wr) return 0;
    return 1;
}

/* Compares the reference's output with the naive one; returns max abs error
 * over O and LSE, or a large number on a -inf/finite disagreement. */
static double naive_compare(const small_prob *sp, const small_case *c)
{
    const fmha_ref_fwd *p = &sp->p;
    double worst = 0.0;
    int b, h, i, j, x, sq, sk;
    for (b = 0; b < c->batch; b++) {
        fmha_ref_lengths(p, b, &sq, &sk);
        for (h = 0; h < c->hq; h++) {
            int hk = h / (c->hq / c->hk);
            double slope = c->alibi ? p->alibi_slopes[b * p->alibi_batch_stride + h] : 0.0;
            for (i = 0; i < sq; i++) {
                double w[64], sum = 0.0, lse_n, lse_r;
                const float *o = p->o + fmha_ref_off_o(p, b, h, i);
                for (j = 0; j < sk; j++) {
                    double s = 0.0;
                    for (x = 0; x < c->d; x++)
                        s += (double)p->q[fmha_ref_off_q(p, b, h, i) + x] * p->k[fmha_ref_off_k(p, b, hk, j) + x];
                    s *= c->scale;
                    if (c->cap > 0) s = c->cap * tanh(s / c->cap);
                    s += -slope * fabs((double)(i + sk - sq - j));
                    w[j] = naive_visible(c, sq, sk, i, j) ? exp(s) : 0.0;
                    sum += w[j];
                }
                lse_n = sum > 0 ? log(sum) : -INFINITY;
                lse_r = p->lse[fmha_ref_off_lse(p, b, h, i)];
                if (isinf(lse_n) || isinf(lse_r)) {
                    if (!(isinf(lse_n) && isinf(lse_r) && lse_r < 0)) return 1e30;
                } else if (fabs(lse_n - lse_r) > worst) {
                    worst = fabs(lse_n - lse_r);
                }
                for (x = 0; x < c->d; x++) {
                    double on = 0.0;
                    if (sum > 0)
                        for (j = 0; j < sk; j++) on += w[j] / sum * p->v[fmha_ref_off_v(p, b, hk, j) + x];
                    if (!(fabs(on - o[x]) <= worst)) worst = fabs(on - o[x]);  /* catches NaN */
                }
            }
        }
    }
    return worst;
}

static void test_against_naive(void)
{
    /* Lengths stay below 64 (naive scratch). Windows include ones that fully
     * mask rows, s_q > s_k, and zero-length group entries. */
    static const small_case cases[] = {
        { "naive_nomask",        0, 2, 4, 2, 8,  {5, 5}, {7, 7},     0, -1, -1, 0.35f, 0, 0 },
        { "naive_causal_tl",     0, 2, 2, 2, 16, {6, 6}, {9, 9},     1, -1,  0, 0.25f, 0, 0 },
        { "naive_causal_br",     0, 1, 4, 1, 8,  {9}, {5},           2, -1,  0, 0.35f, 0, 0 },
        { "naive_window_tl",     0, 1, 2, 1, 8,  {12}, {7},          1,  2,  1, 0.35f, 0, 0 },
        { "naive_window_br",     0, 1, 2, 2, 8,  {7}, {12},          2,  3,  0, 0.35f, 0, 0 },
        { "naive_window_left",   0, 1, 2, 2, 8,  {7}, {12},          2,  0, -1, 0.35f, 0, 0 },
        { "naive_softcap",       0, 2, 2, 1, 8,  {4, 4}, {6, 6},     0, -1, -1, 2.0f,  1.5f, 0 },
        { "naive_alibi_shared",  0, 2, 4, 4, 8,  {6, 6}, {10, 10},   0, -1, -1, 0.35f, 0, 1 },
        { "naive_alibi_batch",   0, 2, 4, 2, 8,  {10, 10}, {6, 6},   2, -1,  0, 0.35f, 0, 2 },
        { "naive_cap_alibi",     0, 1, 2, 1, 8,  {8}, {8},           1,  2,  2, 1.0f,  2.0f, 1 },
        { "naive_group",         1, 4, 4, 2, 8,  {3, 0, 7, 5}, {6, 4, 0, 9}, 2, -1, 0, 0.35f, 0, 2 },
        { "naive_group_window",  1, 3, 2, 1, 16, {1, 13, 4}, {1, 5, 20},     1, 1, 3, 0.25f, 0, 0 },
    };
    size_t t;
    for (t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        const small_case *c = &cases[t];
        small_prob sp;
        char why[128];
        double err;
        small_setup(&sp, c, 0, 1000 + t);
        if (fmha_ref_fwd_run(&sp.p) != 0) { report(0, c->name, "allocation failed"); small_free(&sp); continue; }
        err = naive_compare(&sp, c);
        snprintf(why, sizeof(why), "max abs diff %.3g vs naive formula", err);
        /* the reference stores float: allow float rounding of values <= ~5 */
        report(err < 1e-6, c->name, why);
        small_free(&sp);
    }
}

/* Rows that see nothing: exact zeros and -inf, and nothing else touched. */
static void test_fully_masked(void)
{
    /* causal bottom-right with s_q = 9 > s_k = 4: rows 0..4 see nothing */
    small_case c1 = { "masked_rows_br_sq_gt_sk", 0, 1, 2, 1, 8, {9}, {4}, 2, -1, 0, 0.35f, 0, 0 };
    /* s_k = 0: every row masked, even with no mask */
    small_case c2 = { "masked_rows_sk0", 0, 2, 2, 2, 8, {3, 3}, {0, 0}, 0, -1, -1, 0.35f, 0, 0 };
    /* a window beyond the keys: top-left, left=1, right=0, s_q=10, s_k=3: rows >= 4 */
    small_case c3 = { "masked_rows_window_tl", 0, 1, 1, 1, 8, {10}, {3}, 1, 1, 0, 0.35f, 0, 1 };
    small_case *cs[3];
    int t, b, h, i, x, sq, sk;
    cs[0] = &c1; cs[1] = &c2; cs[2] = &c3;
    for (t = 0; t < 3; t++) {
        small_case *c = cs[t];
        small_prob sp;
        int ok = 1, nmasked = 0;
        char why[160] = "";
        small_setup(&sp, c, 0, 77 + t);
        fmha_ref_fwd_run(&sp.p);
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&sp.p, b, &sq, &sk);
            for (h = 0; h < c->hq; h++)
                for (i = 0; i < sq; i++) {
                    int lo, hi, n = fmha_ref_visible_range(&sp.p, sq, sk, i, &lo, &hi);
                    float l = sp.p.lse[fmha_ref_off_lse(&sp.p, b, h, i)];
                    const float *o = sp.p.o + fmha_ref_off_o(&sp.p, b, h, i);
                    int expect_masked = 1;
                    for (x = 0; x < sk; x++) if (naive_visible(c, sq, sk, i, x)) expect_masked = 0;
                    if (expect_masked != (n == 0)) { ok = 0; snprintf(why, sizeof(why), "row %d: range says %d keys", i, n); }
                    if (n == 0) {
                        nmasked++;
                        if (!(isinf(l) && l < 0)) { ok = 0; snprintf(why, sizeof(why), "row %d: lse %g, want -inf", i, l); }
                        for (x = 0; x < c->d; x++)
                            if (o[x] != 0.0f) { ok = 0; snprintf(why, sizeof(why), "row %d: o[%d] = %g, want 0", i, x, o[x]); }
                    } else if (!isfinite(l)) {
                        ok = 0; snprintf(why, sizeof(why), "row %d: lse %g not finite", i, l);
                    }
                }
        }
        if (ok && nmasked == 0) { ok = 0; snprintf(why, sizeof(why), "case has no masked row"); }
        report(ok, c->name, why);
        small_free(&sp);
    }
}

/* V = 1 everywhere: every visible row must give O = 1 (probabilities sum to 1),
 * even with large scores where a missing max subtraction would overflow. */
static void test_rows_sum_to_one(void)
{
    small_case c = { "softmax_rows_sum_to_one", 0, 2, 4, 2, 32, {17, 17}, {40, 40}, 2, 5, 3, 40.0f, 0, 2 };
    small_prob sp;
    size_t n, i;
    int b, h, r, x, sq, sk, ok = 1;
    char why[128] = "";
    small_setup(&sp, &c, 0, 5);
    n = (size_t)c.batch * c.sk[0] * c.hk * c.d;
    for (i = 0; i < n; i++) sp.v[i] = 1.0f;
    fmha_ref_fwd_run(&sp.p);
    for (b = 0; b < c.batch; b++) {
        fmha_ref_lengths(&sp.p, b, &sq, &sk);
        for (h = 0; h < c.hq; h++)
            for (r = 0; r < sq; r++) {
                const float *o = sp.p.o + fmha_ref_off_o(&sp.p, b, h, r);
                for (x = 0; x < c.d; x++)
                    if (!(fabsf(o[x] - 1.0f) < 1e-6f)) { ok = 0; snprintf(why, sizeof(why), "row %d: o = %.9g", r, o[x]); }
            }
    }
    report(ok, c.name, why);
    small_free(&sp);
}

/* bshd vs bhsd with padded rows (NaN in the padding): identical results. */
static void test_layout_independent(void)
{
    static const small_case cases[] = {
        { "layout_batch_bshd_vs_bhsd", 0, 2, 4, 2, 8, {7, 7}, {11, 11}, 1, 3, 2, 0.35f, 1.0f, 2 },
        { "layout_group_bshd_vs_bhsd", 1, 3, 2, 1, 8, {7, 0, 5}, {11, 3, 2}, 2, -1, 0, 0.35f, 0, 1 },
    };
    size_t t;
    for (t = 0; t < 2; t++) {
        const small_case *c = &cases[t];
        small_prob a, p;
        int b, h, i, x, sq, sk, ok = 1;
        char why[128] = "";
        small_setup(&a, c, 0, 9);
        small_setup(&p, c, 1, 9);
        small_copy_values(&p, &a, c);
        fmha_ref_fwd_run(&a.p);
        fmha_ref_fwd_run(&p.p);
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&a.p, b, &sq, &sk);
            for (h = 0; h < c->hq; h++)
                for (i = 0; i < sq; i++) {
                    float la = a.lse[fmha_ref_off_lse(&a.p, b, h, i)], lp = p.lse[fmha_ref_off_lse(&p.p, b, h, i)];
                    if (memcmp(&la, &lp, 4) != 0) { ok = 0; snprintf(why, sizeof(why), "lse differs at b%d h%d i%d", b, h, i); }
                    for (x = 0; x < c->d; x++) {
                        float oa = a.o[fmha_ref_off_o(&a.p, b, h, i) + x], op = p.o[fmha_ref_off_o(&p.p, b, h, i) + x];
                        if (memcmp(&oa, &op, 4) != 0) { ok = 0; snprintf(why, sizeof(why), "o differs at b%d h%d i%d", b, h, i); }
                    }
                }
        }
        report(ok, c->name, why);
        small_free(&a);
        small_free(&p);
    }
}

/* Conversions: known encodings, ties to even, and exhaustive round trips. */
static void test_conversions(void)
{
    struct { float f; uint16_t h; } f16[] = {
        { 1.0f, 0x3c00 }, { -2.0f, 0xc000 }, { 65504.0f, 0x7bff }, { 65519.0f, 0x7bff },
        { 65520.0f, 0x7c00 }, { 1e10f, 0x7c00 }, { -0.0f, 0x8000 }, { 5.9604645e-8f, 0x0001 },
        { 2.9802322e-8f, 0x0000 },               /* 2^-25: tie between 0 and 2^-24 -> 0 */
        { 4.4703484e-8f, 0x0001 },               /* 1.5 * 2^-25 */
        { 8.9406967e-8f, 0x0002 },               /* 1.5 * 2^-24: tie -> even 2 */
        { 6.1035156e-5f, 0x0400 },               /* 2^-14, smallest normal */
        { 6.1031431e-5f, 0x0400 },               /* just below: rounds up to normal */
        { 1.00048828125f, 0x3c00 },              /* 1 + 2^-11: tie -> even */
        { 1.00146484375f, 0x3c02 },              /* 1 + 3*2^-11: tie -> even (up) */
        { 1.0009765625f, 0x3c01 },
    };
    struct { float f; uint16_t b; } bf[] = {
        { 1.0f, 0x3f80 }, { -1.0f, 0xbf80 }, { 1.00390625f, 0x3f80 },  /* 1 + 2^-8 tie */
        { 1.01171875f, 0x3f82 },                                    /* 1 + 3*2^-8 tie */
        { 3.3895314e38f, 0x7f7f }, { 3.4028235e38f, 0x7f80 }, { 0.0f, 0x0000 },
    };
    size_t t;
    unsigned u;
    int ok = 1;
    char why[128] = "";
    for (t = 0; t < sizeof(f16) / sizeof(f16[0]); t++) {
        uint16_t got = fmha_ref_f32_to_f16(f16[t].f);
        if (got != f16[t].h) { ok = 0; snprintf(why, sizeof(why), "f16(%.9g) = 0x%04x, want 0x%04x", f16[t].f, got, f16[t].h); }
    }
    if (!isnan(fmha_ref_f16_to_f32(fmha_ref_f32_to_f16(NAN)))) { ok = 0; snprintf(why, sizeof(why), "f16 NaN lost"); }
    for (u = 0; u < 65536u; u++) {
        uint16_t h = (uint16_t)u;
        float f = fmha_ref_f16_to_f32(h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) { if (!isnan(f)) ok = 0; continue; }
        if (fmha_ref_f32_to_f16(f) != h) { ok = 0; snprintf(why, sizeof(why), "f16 round trip 0x%04x", h); break; }
    }
    report(ok, "convert_fp16", why);

    ok = 1; why[0] = 0;
    for (t = 0; t < sizeof(bf) / sizeof(bf[0]); t++) {
        uint16_t got = fmha_ref_f32_to_bf16(bf[t].f);
        if (got != bf[t].b) { ok = 0; snprintf(why, sizeof(why), "bf16(%.9g) = 0x%04x, want 0x%04x", bf[t].f, got, bf[t].b); }
    }
    if (!isnan(fmha_ref_bf16_to_f32(fmha_ref_f32_to_bf16(NAN)))) { ok = 0; snprintf(why, sizeof(why), "bf16 NaN lost"); }
    for (u = 0; u < 65536u; u++) {
        uint16_t b = (uint16_t)u;
        float f = fmha_ref_bf16_to_f32(b);
        if (isnan(f)) continue;
        if (fmha_ref_f32_to_bf16(f) != b) { ok = 0; snprintf(why, sizeof(why), "bf16 round trip 0x%04x", b); break; }
    }
    report(ok, "convert_bf16", why);
}

/* e4m3 (OCP e4m3fn), checked against a second encoder: brute force over all
 * 254 finite codes (nearest value; a tie goes to the even code, whose mantissa
 * LSB is 0), saturating past 448. */
static uint8_t e4m3_brute(float f)
{
    const int neg = signbit(f) != 0;
    double a = fabs((double)f), best_d = INFINITY;
    int c, best = 0;
    if (isnan(f)) return 0x7F;
    if (a > 448.0) return (uint8_t)(neg ? 0xFE : 0x7E);
    for (c = 0; c <= 0x7E; c++) {
        double d = fabs(a - fmha_ref_e4m3_to_f32((uint8_t)c));
        if (d < best_d || (d == best_d && (c & 1) == 0)) { best_d = d; best = c; }
    }
    return (uint8_t)(best | (neg ? 0x80 : 0));
}

static void test_conversions_e4m3(void)
{
    struct { float f; uint8_t c; } known[] = {
        { 1.0f, 0x38 }, { -2.0f, 0xC0 }, { 448.0f, 0x7E }, { -448.0f, 0xFE }, { 0.0f, 0x00 }, { -0.0f, 0x80 },
        { 0.001953125f, 0x01 },                 /* 2^-9: smallest subnormal */
        { 0.013671875f, 0x07 },                 /* 7 * 2^-9: largest subnormal */
        { 0.015625f, 0x08 },                    /* 2^-6: smallest normal */
        { 240.0f, 0x77 }, { 256.0f, 0x78 }, { 0.375f, 0x2C }, { 3.25f, 0x45 },
        /* ties to even */
        { 1.0625f, 0x38 },                      /* 1 + 1/16: between 1 and 1.125 -> 1 */
        { 1.1875f, 0x3A },                      /* 1 + 3/16: between 1.125 and 1.25 -> 1.25 */
        { 1.9375f, 0x40 },                      /* between 1.875 and 2: carry into the exponent */
        { 0.0009765625f, 0x00 },                /* 2^-10: between 0 and 2^-9 -> 0 */
        { 0.0029296875f, 0x02 },                /* 1.5 * 2^-9 -> 2 units */
        { 0.0048828125f, 0x02 },                /* 2.5 * 2^-9 -> 2 units */
        { 0.0146484375f, 0x08 },                /* 7.5 * 2^-9: subnormal -> smallest normal */
        { 0.0009765626f, 0x01 },                /* just above the 2^-10 tie */
        /* saturation */
        { 447.0f, 0x7E }, { 449.0f, 0x7E }, { 464.0f, 0x7E }, { 480.0f, 0x7E }, { 1e6f, 0x7E },
        { -1e30f, 0xFE }, { INFINITY, 0x7E }, { -INFINITY, 0xFE },
        { 1e-30f, 0x00 }, { -1e-30f, 0x80 },
    };
    fmha_ref_rng r = fmha_ref_rng_make(8);
    size_t t;
    unsigned u;
    int ok = 1, i, nsub = 0, nbig = 0;
    char why[160] = "";
    float prev = -1.0f;

    /* decode: all 256 codes, exact formula, NaN only at 0x7F/0xFF, increasing */
    for (u = 0; u < 256u; u++) {
        float f = fmha_ref_e4m3_to_f32((uint8_t)u), want;
        int e = (int)(u >> 3) & 15, m = (int)u & 7;
        if ((u & 0x7Fu) == 0x7Fu) {
            if (!isnan(f)) { ok = 0; snprintf(why, sizeof(why), "decode 0x%02x = %g, want NaN", u, f); }
            continue;
        }
        want = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf((float)m, -9);
        if (u & 0x80u) want = -want;
        if (f != want || signbit(f) != signbit(want)) { ok = 0; snprintf(why, sizeof(why), "decode 0x%02x = %.9g, want %.9g", u, f, want); }
        if (u < 0x80u && u > 0 && !(f > prev)) { ok = 0; snprintf(why, sizeof(why), "decode not increasing at 0x%02x", u); }
        if (u < 0x80u) prev = f;
    }
    /* round trip of every code (NaN stays NaN) */
    for (u = 0; u < 256u; u++) {
        float f = fmha_ref_e4m3_to_f32((uint8_t)u);
        uint8_t c = fmha_ref_f32_to_e4m3(f);
        if (isnan(f) ? !isnan(fmha_ref_e4m3_to_f32(c)) : c != u) {
            ok = 0; snprintf(why, sizeof(why), "round trip 0x%02x -> %g -> 0x%02x", u, f, c);
        }
    }
    if (!isnan(fmha_ref_e4m3_to_f32(fmha_ref_f32_to_e4m3(NAN))) || !isnan(fmha_ref_e4m3_to_f32(fmha_ref_f32_to_e4m3(-NAN)))) {
        ok = 0; snprintf(why, sizeof(why), "e4m3 NaN lost");
    }
    for (t = 0; t < sizeof(known) / sizeof(known[0]); t++) {
        uint8_t got = fmha_ref_f32_to_e4m3(known[t].f);
        if (got != known[t].c) { ok = 0; snprintf(why, sizeof(why), "e4m3(%.10g) = 0x%02x, want 0x%02x", known[t].f, got, known[t].c); }
    }
    /* every midpoint between neighbouring codes (ties), and a hair either side */
    for (u = 0; u < 0x7Eu; u++) {
        float lo = fmha_ref_e4m3_to_f32((uint8_t)u), hi = fmha_ref_e4m3_to_f32((uint8_t)(u + 1));
        float mid = 0.5f * (lo + hi), xs[3];
        int k;
        xs[0] = mid; xs[1] = nextafterf(mid, 0.0f); xs[2] = nextafterf(mid, 1e9f);
        for (k = 0; k < 3; k++) {
            uint8_t got = fmha_ref_f32_to_e4m3(xs[k]), want = e4m3_brute(xs[k]);
            uint8_t gotn = fmha_ref_f32_to_e4m3(-xs[k]), wantn = e4m3_brute(-xs[k]);
            if (k == 0 && want != ((u & 1u) ? u + 1 : u)) { ok = 0; snprintf(why, sizeof(why), "brute force tie 0x%02x", u); }
            if (got != want || gotn != wantn) {
                ok = 0; snprintf(why, sizeof(why), "e4m3(%.10g) = 0x%02x, brute force 0x%02x", xs[k], got, want);
            }
        }
    }
    /* random floats over 2^-12 .. 2^10 against the brute force */
    for (i = 0; i < 200000; i++) {
        float x = (float)ldexp(fmha_ref_rng_unit(&r) + 0.5, fmha_ref_rng_int(&r, -12, 10));
        uint8_t got, want;
        if (fmha_ref_rng_next(&r) & 1u) x = -x;
        got = fmha_ref_f32_to_e4m3(x);
        want = e4m3_brute(x);
        if (got != want) { ok = 0; snprintf(why, sizeof(why), "e4m3(%.10g) = 0x%02x, brute force 0x%02x", x, got, want); break; }
    }
    /* the random code helper: finite, non-zero, covers subnormals and 256..448 */
    for (i = 0; i < 10000; i++) {
        uint8_t c = fmha_ref_rng_e4m3(&r, 0, 15);
        float f = fmha_ref_e4m3_to_f32(c);
        if (!isfinite(f) || f == 0.0f) { ok = 0; snprintf(why, sizeof(why), "rng_e4m3 gave 0x%02x", c); break; }
        nsub += fabsf(f) < 0.015625f;
        nbig += fabsf(f) >= 256.0f;
    }
    if (nsub == 0 || nbig == 0) { ok = 0; snprintf(why, sizeof(why), "rng_e4m3 range: %d subnormal, %d >= 256", nsub, nbig); }
    report(ok, "convert_e4m3", why);
}

static void test_rng_and_err(void)
{
    fmha_ref_rng a = fmha_ref_rng_make(42), b = fmha_ref_rng_make(42), c = fmha_ref_rng_make(43);
    int i, ok = 1, differs = 0;
    float got[4] = { 1.0f, 2.0f, 3.0f, 4.0f }, ref[4] = { 1.0f, 2.0f, 3.0f, 5.0f }, zero[4] = { 0, 0, 0, 0 };
    for (i = 0; i < 1000; i++) {
        float x = fmha_ref_rng_input(&a, 1.0f), y = fmha_ref_rng_input(&b, 1.0f);
        if (x != y || x == 0.0f || fabsf(x) > 1.0f) ok = 0;
        if (fmha_ref_rng_input(&c, 1.0f) != x) differs = 1;
    }
    report(ok && differs, "rng_deterministic_nonzero", "same seed must repeat, other seeds differ, values in [-1,1] \\ {0}");
    ok = fabs(fmha_ref_rel_l2(got, ref, 4) - 1.0 / sqrt(39.0)) < 1e-12 &&
         fmha_ref_rel_l2(zero, zero, 4) == 0.0 && fmha_ref_rel_l2(got, zero, 4) > 0.0;
    report(ok, "rel_l2", "rel-L2 formula or all-zero reference fallback wrong");
}

/* fmha_ref_fwd_row_p8 against its closed form: key j of tile t = j / tile_n
 * gets P_j = e4m3(exp(s_j - M_t)) * exp(M_t - m), M_t the maximum over the
 * visible keys of tiles >= t (the tiles run from the last down), m the row
 * maximum; l = sum exp(s_j - m) unrounded, so the LSE is the exact one. The
 * rounding must show (O differs from fmha_ref_fwd_row), rows without keys give
 * 0 and -inf, and *sabs is max_j scale * sum_c |q_c k_jc|. */
static void test_fwd_row_p8(void)
{
    static const small_case cases[] = {
        { "p8_nomask_tiles4",    0, 2, 4, 2, 8,  {5, 5}, {23, 23},   0, -1, -1, 1.5f, 0, 0 },
        { "p8_causal_br_tiles4", 0, 1, 2, 1, 16, {13}, {30},         2, -1,  0, 0.9f, 0, 0 },
        { "p8_window_cap_alibi", 0, 1, 2, 2, 8,  {20}, {17},         1,  6,  2, 1.5f, 3.0f, 1 },
        { "p8_group_masked",     1, 3, 2, 1, 8,  {4, 9, 3}, {0, 40, 9}, 2, -1, 0, 1.2f, 0, 2 },
    };
    static const int tiles[4] = { 4, 4, 3, 8 };
    size_t t;
    for (t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        const small_case *c = &cases[t];
        const int tn = tiles[t];
        small_prob sp;
        fmha_ref_err diff;
        double worst = 0.0, lse_worst = 0.0, sabs_worst = 0.0;
        int b, h, i, j, x, sq, sk, ok = 1, rows_empty = 0;
        char why[160] = "";
        small_setup(&sp, c, 0, 500 + t);
        fmha_ref_err_init(&diff);
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&sp.p, b, &sq, &sk);
            for (h = 0; h < c->hq; h++)
                for (i = 0; i < sq; i++) {
                    const int hk = h / (c->hq / c->hk);
                    const double slope = c->alibi ? sp.p.alibi_slopes[b * sp.p.alibi_batch_stride + h] : 0.0;
                    double scores[64], o8[16], oe[16], on[16], s[64], lse8, lsee, sabs, sabs_n = 0.0, m = -INFINITY,
                           l = 0.0;
                    int vis[64], n8, any = 0;
                    n8 = fmha_ref_fwd_row_p8(&sp.p, b, h, i, tn, scores, o8, &lse8, &sabs);
                    fmha_ref_fwd_row(&sp.p, b, h, i, scores, oe, &lsee);
                    for (j = 0; j < sk; j++) {
                        const float *q = sp.p.q + fmha_ref_off_q(&sp.p, b, h, i);
                        const float *k = sp.p.k + fmha_ref_off_k(&sp.p, b, hk, j);
                        double a = 0.0, d = 0.0;
                        for (x = 0; x < c->d; x++) { d += (double)q[x] * k[x]; a += fabs((double)q[x] * k[x]); }
                        s[j] = d * c->scale;
                        if (c->cap > 0) s[j] = c->cap * tanh(s[j] / c->cap);
                        s[j] += -slope * fabs((double)(i + sk - sq - j));
                        vis[j] = naive_visible(c, sq, sk, i, j);
                        if (vis[j]) {
                            any++;
                            if (s[j] > m) m = s[j];
                            if (a * c->scale > sabs_n) sabs_n = a * c->scale;
                        }
                    }
                    if (!any) {
                        rows_empty++;
                        if (n8 != 0 || !(isinf(lse8) && lse8 < 0)) { ok = 0; snprintf(why, sizeof(why), "empty row %d: lse %g", i, lse8); }
                        for (x = 0; x < c->d; x++)
                            if (o8[x] != 0.0) { ok = 0; snprintf(why, sizeof(why), "empty row %d: o %g", i, o8[x]); }
                        continue;
                    }
                    for (x = 0; x < c->d; x++) on[x] = 0.0;
                    for (j = 0; j < sk; j++) {
                        double mt = -INFINITY, w;
                        int jj;
                        if (!vis[j]) continue;
                        for (jj = 0; jj < sk; jj++)
                            if (vis[jj] && jj / tn >= j / tn && s[jj] > mt) mt = s[jj];
                        w = fmha_ref_e4m3_to_f32(fmha_ref_f32_to_e4m3((float)exp(s[j] - mt))) * exp(mt - m);
                        l += exp(s[j] - m);
                        for (x = 0; x < c->d; x++) on[x] += w * sp.p.v[fmha_ref_off_v(&sp.p, b, hk, j) + x];
                    }
                    for (x = 0; x < c->d; x++) {
                        on[x] /= l;
                        if (!(fabs(on[x] - o8[x]) <= worst)) worst = fabs(on[x] - o8[x]);
                        fmha_ref_err_add(&diff, o8[x], oe[x]);
                    }
                    if (!(fabs(lse8 - (m + log(l))) <= lse_worst)) lse_worst = fabs(lse8 - (m + log(l)));
                    if (!(fabs(lse8 - lsee) <= lse_worst)) lse_worst = fabs(lse8 - lsee);
                    if (!(fabs(sabs - sabs_n) <= sabs_worst)) sabs_worst = fabs(sabs - sabs_n);
                }
        }
        if (ok && (worst > 1e-12 || lse_worst > 1e-12 || sabs_worst > 1e-12)) {
            ok = 0;
            snprintf(why, sizeof(why), "vs closed form: O %.3g, LSE %.3g, sabs %.3g", worst, lse_worst, sabs_worst);
        }
        if (ok && !(fmha_ref_err_rel_l2(&diff) > 1e-3)) {
            ok = 0;
            snprintf(why, sizeof(why), "P rounding does not show: rel-L2 %.3g to the exact row", fmha_ref_err_rel_l2(&diff));
        }
        if (ok && c->group && rows_empty == 0) { ok = 0; snprintf(why, sizeof(why), "case has no row without keys"); }
        report(ok, c->name, why);
        small_free(&sp);
    }
}

/* Dropout in the reference: p = 0 changes nothing; the LSE stays the one
 * without dropout; dropped elements are exactly those the element rule
 * names (one row recomputed by hand); and over many seeds the mean output
 * tends to the output without dropout (unbiased: kept P scaled by
 * 256 / (256 - threshold)). */
static void test_dropout(void)
{
    static const small_case c = { "dropout", 0, 2, 2, 2, 16, {40, 40}, {56, 56}, 2, -1, 0, 0.35f, 0, 0 };
    small_prob base, dp;
    size_t no, x;
    int s, same = 1, lse_same = 1;
    double num = 0.0, den = 0.0, hand_err = 0.0;
    double *mean;
    small_setup(&base, &c, 0, 77);
    small_setup(&dp, &c, 0, 77);
    no = (size_t)c.batch * c.hq * c.sq[0] * c.d;
    mean = (double *)calloc(no, sizeof(double));
    fmha_ref_fwd_run(&base.p);
    dp.p.dropout_p = 0.0f; dp.p.dropout_seed = 5;
    fmha_ref_fwd_run(&dp.p);
    for (x = 0; x < no; x++) same &= dp.o[x] == base.o[x];
    report(same, "dropout_p0_identity", "p = 0 leaves O bitwise unchanged");
    dp.p.dropout_p = 0.3f;
    for (s = 0; s < 400; s++) {
        dp.p.dropout_seed = 1000 + (uint64_t)s;
        dp.p.dropout_offset = (uint64_t)s * 3;
        fmha_ref_fwd_run(&dp.p);
        for (x = 0; x < no; x++) mean[x] += dp.o[x] / 400.0;
        if (s == 0)
            for (x = 0; x < (size_t)c.batch * c.hq * c.sq[0]; x++) lse_same &= dp.lse[x] == base.lse[x];
    }
    report(lse_same, "dropout_lse", "the LSE is the one without dropout");
    for (x = 0; x < no; x++) {
        num += (mean[x] - base.o[x]) * (mean[x] - base.o[x]);
        den += (double)base.o[x] * base.o[x];
    }
    {
        char why[96];
        snprintf(why, sizeof(why), "mean of 400 seeds vs no dropout: rel-L2 %.3g (< 0.1)", sqrt(num / den));
        report(sqrt(num / den) < 0.1, "dropout_unbiased", why);
    }
    {   /* batch 1, head 1, row 20 by hand (bottom-right causal: keys 0..36) */
        const int b = 1, h = 1, i = 20, hi = i + c.sk[0] - c.sq[0];
        const float *q = dp.p.q + fmha_ref_off_q(&dp.p, b, h, i);
        double sc[64], m = -INFINITY, l = 0.0, o[16] = {0};
        int j, k;
        dp.p.dropout_seed = 99; dp.p.dropout_offset = 12;
        fmha_ref_fwd_run(&dp.p);
        for (j = 0; j <= hi; j++) {
            const float *kr = dp.p.k + fmha_ref_off_k(&dp.p, b, h / (c.hq / c.hk), j);
            double dot = 0.0;
            for (k = 0; k < c.d; k++) dot += (double)q[k] * kr[k];
            sc[j] = 0.35 * dot;
            if (sc[j] > m) m = sc[j];
        }
        for (j = 0; j <= hi; j++) {
            const double e = exp(sc[j] - m);
            const int keep = fmhai_dropout_byte(99, 12, (uint32_t)(b * c.hq + h), (uint32_t)i, (uint32_t)j) >=
                             77u;   /* round(0.3 * 256) */
            const float *vr = dp.p.v + fmha_ref_off_v(&dp.p, b, h / (c.hq / c.hk), j);
            l += e;
            for (k = 0; k < c.d; k++) o[k] += keep ? e * 256.0 / 179.0 * vr[k] : 0.0;
        }
        for (k = 0; k < c.d; k++) {
            const double d = fabs(o[k] / l - dp.o[fmha_ref_off_o(&dp.p, b, h, i) + k]);
            if (!(d <= hand_err)) hand_err = d;
        }
        report(hand_err < 1e-6, "dropout_row_by_hand", "one row recomputed from the element rule");
    }
    free(mean);
    small_free(&base);
    small_free(&dp);
}

/* The elementwise bias against identities that do not use it: a bias that
 * is constant along a row (c_i) leaves O unchanged and adds c_i to the LSE;
 * a -inf bias on the keys a causal mask hides gives the causal result; a
 * row whose bias is -inf everywhere gives O = 0 and LSE = -inf (no NaN).
 * Batch mode [b][h][s_q][s_k] and group mode with packed rows
 * [h][total_q][max_k] (row seqstart_q[b] + i). */
static void test_bias(void)
{
    small_case cb = { "bias_batch", 0, 2, 2, 1, 8, {7, 7}, {11, 11}, 0, -1, -1, 0.35f, 0, 0 };
    small_case cg = { "bias_group", 1, 3, 2, 2, 8, {5, 1, 6}, {9, 4, 6}, 0, -1, -1, 0.35f, 0, 0 };
    small_case *cs[2];
    int t;
    cs[0] = &cb; cs[1] = &cg;
    for (t = 0; t < 2; t++) {
        small_case *c = cs[t];
        small_prob a, m;
        int b, h, i, j, x, sq, sk, ok = 1, ok_mask = 1, ok_inf = 1, maxk = 0, tq = 0;
        char why[160] = "";
        float *bias, *o0, *l0;
        size_t nb, no, nl;
        for (b = 0; b < c->batch; b++) { if (c->sk[b] > maxk) maxk = c->sk[b]; tq += c->sq[b]; }
        small_setup(&a, c, 0, 300 + t);
        fmha_ref_fwd_run(&a.p);
        no = (size_t)(c->group ? tq : c->batch * c->sq[0]) * c->hq * c->d;
        nl = (size_t)c->batch * c->hq * (c->sq[0] + 8) + (size_t)tq * c->hq;
        o0 = (float *)malloc(sizeof(float) * no);
        l0 = (float *)malloc(sizeof(float) * nl);
        memcpy(o0, a.o, sizeof(float) * no);
        memcpy(l0, a.lse, sizeof(float) * (size_t)(c->group ? c->hq * tq : c->batch * c->hq * c->sq[0]));
        /* bias rows of maxk + 3 keys (a padded row stride) */
        a.p.stride_bias = maxk + 3;
        a.p.nhead_stride_bias = (int64_t)(c->group ? tq : c->sq[0]) * a.p.stride_bias;
        a.p.batch_stride_bias = c->group ? 0 : c->hq * a.p.nhead_stride_bias;
        nb = (size_t)(c->group ? 1 : c->batch) * c->hq * a.p.nhead_stride_bias;
        bias = (float *)malloc(sizeof(float) * nb);
        for (i = 0; i < (int)nb; i++) bias[i] = NAN;   /* padding never read */
        a.p.bias = bias;
        /* 1. constant along each row */
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&a.p, b, &sq, &sk);
            for (h = 0; h < c->hq; h++)
                for (i = 0; i < sq; i++)
                    for (j = 0; j < sk; j++) bias[fmha_ref_off_bias(&a.p, b, h, i, j)] = 0.25f * (float)(i + 3 * h + b) - 1.f;
        }
        fmha_ref_fwd_run(&a.p);
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&a.p, b, &sq, &sk);
            for (h = 0; h < c->hq; h++)
                for (i = 0; i < sq; i++) {
                    const int64_t lo = fmha_ref_off_lse(&a.p, b, h, i), oo = fmha_ref_off_o(&a.p, b, h, i);
                    const double want = (double)l0[lo] + 0.25 * (i + 3 * h + b) - 1.0;
                    if (sk > 0 && fabs(a.lse[lo] - want) > 1e-5) { ok = 0; snprintf(why, sizeof(why), "lse (%d,%d,%d)", b, h, i); }
                    for (x = 0; x < c->d; x++)
                        if (fabs(a.o[oo + x] - o0[oo + x]) > 1e-6) { ok = 0; snprintf(why, sizeof(why), "o (%d,%d,%d)", b, h, i); }
                }
        }
        report(ok, c->group ? "bias_row_constant_group" : "bias_row_constant_batch", why);
        /* 2. -inf where a top-left causal mask hides a key, 0 elsewhere */
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&a.p, b, &sq, &sk);
            for (h = 0; h < c->hq; h++)
                for (i = 0; i < sq; i++)
                    for (j = 0; j < sk; j++) bias[fmha_ref_off_bias(&a.p, b, h, i, j)] = j > i ? -INFINITY : 0.f;
        }
        fmha_ref_fwd_run(&a.p);
        small_setup(&m, c, 0, 300 + t);
        m.p.mask_type = FMHA_REF_MASK_TOP_LEFT; m.p.window_left = -1; m.p.window_right = 0;
        fmha_ref_fwd_run(&m.p);
        for (i = 0; i < (int)no; i++)
            if (!(a.o[i] == m.o[i])) { ok_mask = 0; snprintf(why, sizeof(why), "o[%d] %g vs masked %g", i, a.o[i], m.o[i]); }
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&a.p, b, &sq, &sk);
            for (h = 0; h < c->hq; h++)
                for (i = 0; i < sq; i++) {
                    const int64_t lo = fmha_ref_off_lse(&a.p, b, h, i);
                    if (!(a.lse[lo] == m.lse[lo])) { ok_mask = 0; snprintf(why, sizeof(why), "lse (%d,%d,%d)", b, h, i); }
                }
        }
        report(ok_mask, c->group ? "bias_neg_inf_is_causal_group" : "bias_neg_inf_is_causal_batch", why);
        /* 3. every key of head 1 hidden: O = 0, LSE = -inf */
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&a.p, b, &sq, &sk);
            for (i = 0; i < sq; i++)
                for (j = 0; j < sk; j++) bias[fmha_ref_off_bias(&a.p, b, 1, i, j)] = -INFINITY;
        }
        fmha_ref_fwd_run(&a.p);
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(&a.p, b, &sq, &sk);
            for (i = 0; i < sq; i++) {
                const float l = a.lse[fmha_ref_off_lse(&a.p, b, 1, i)];
                const float *o = a.o + fmha_ref_off_o(&a.p, b, 1, i);
                if (!(isinf(l) && l < 0)) { ok_inf = 0; snprintf(why, sizeof(why), "lse %g", l); }
                for (x = 0; x < c->d; x++) if (o[x] != 0.f) { ok_inf = 0; snprintf(why, sizeof(why), "o %g", o[x]); }
            }
        }
        report(ok_inf, c->group ? "bias_all_neg_inf_row_group" : "bias_all_neg_inf_row_batch", why);
        free(bias); free(o0); free(l0);
        small_free(&a); small_free(&m);
    }
}

int main(void)
{
    test_against_naive();
    test_fully_masked();
    test_rows_sum_to_one();
    test_layout_independent();
    test_conversions();
    test_conversions_e4m3();
    test_fwd_row_p8();
    test_rng_and_err();
    test_dropout();
    test_bias();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
