/*
 * test_ref_bwd.c - host-only self-test of tests/ref/fmha_ref_bwd.h.
 *
 * The backward reference is checked against numbers that share none of its
 * calculus: central finite differences of the scalar loss L = sum(dO * O), where
 * O comes from the forward reference (fmha_ref_fwd_row, the per-row core of
 * fmha_ref_fwd_run, which hands O back in double; fmha_ref_fwd_run itself rounds
 * O to float, and that rounding would swamp the differences). dL/dq, dL/dk,
 * dL/dv are exactly what the reference claims to compute for that dO.
 *
 * Step and tolerance: inputs are floats, so x +- h is rounded to float and the
 * difference is divided by the step actually taken. With h = 1e-4 the
 * truncation error (~h^2) is ~1e-9 relative and the cancellation error in L
 * (~1e-16 |L| / h) smaller still, so the remaining error is the reference's
 * own float output (~6e-8). The bound, rel-L2 < 1e-6 per tensor, sits well
 * above that and far below what a real mistake does: a dropped soft-cap
 * derivative, a GQA group summed wrongly, a missing -D term or an off-by-one
 * window all give errors of 1e-2 or more.
 *
 * Also checked per case: every logical element of dq/dk/dv is written (outputs
 * start as a sentinel), padding between rows is not touched, padding of the
 * inputs is NaN (so reading it would show), dq of rows that see no key and
 * dk/dv of keys that no query sees are exactly 0.
 *     cc -std=c11 -Wall -Wextra -pedantic -Werror -Iinclude -Itests tests/host/test_ref_bwd.c -lm
 * Prints one PASS/FAIL line per case and ends with "N passed, M failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/fmha_ref_bwd.h"

#define MAXB 4
#define FD_STEP 1e-4
#define FD_TOL 1e-6
#define SENTINEL 1.0e30f

static int g_pass, g_fail;

static void report(int ok, const char *name, const char *detail)
{
    if (ok) { printf("PASS %s (%s)\n", name, detail); g_pass++; }
    else { printf("FAIL %s: %s\n", name, detail); g_fail++; }
}

typedef struct bwd_case {
    const char *name;
    int group;
    int batch, hq, hk, dq, dv;   /* dq/dv: hdim_q, hdim_v */
    int sq[MAXB], sk[MAXB];      /* per batch entry (batch mode: entry 0) */
    int mask, wl, wr;
    float scale, cap;
    int alibi;                   /* 0 off, 1 shared, 2 per batch */
    int bhsd;                    /* 0: [b][s][h][d] / [t][h][d]; 1: [b][h][s][d] / [h][t][d] */
    int want_masked;             /* the case exists to have rows that see no key */
    int sinks;                   /* 1: one sink logit per query head            */
    float dropout;               /* drop probability (0: off)                   */
    int bias;                    /* elementwise bias: 0 off, 1 [b,h], 2 [1,h], 3 [1,1], 4 [b,1] (+4: a few
                                    -inf elements, one row all -inf)             */
} bwd_case;

typedef struct bwd_prob {
    fmha_ref_bwd g;
    float *q, *k, *v, *dout, *dq, *dk, *dv, *slopes, *sinks;
    double *dsinks;
    float *bias, *dbias;         /* dbias: the reference's (double) as floats   */
    double *dbias_d;
    char *is_q, *is_k, *is_v, *is_b;   /* 1 where an element is logical (not padding; bias: finite) */
    size_t nq, nk, nv, no, nb;
    int32_t ssq[MAXB + 1], ssk[MAXB + 1];
} bwd_prob;

/* Strides for one tensor: rows of `rows` per batch entry (or total rows in
 * group mode), `heads` heads, rows padded to `r` elements. Returns its size. */
static size_t set_strides(int bhsd, int group, int batch, int rows, int heads, int r,
                          int64_t *stride, int64_t *nhead_stride, int64_t *batch_stride)
{
    if (!bhsd) {
        *stride = (int64_t)heads * r; *nhead_stride = r;
    } else {
        *stride = r; *nhead_stride = (int64_t)rows * r;
    }
    *batch_stride = group ? 0 : (int64_t)rows * heads * r;
    return (size_t)(group ? 1 : batch) * (size_t)rows * (size_t)heads * (size_t)r;
}

static float *alloc_fill(size_t n, float x)
{
    float *a = (float *)malloc(sizeof(float) * (n + 1));
    size_t i;
    if (!a) { fprintf(stderr, "out of memory\n"); exit(2); }
    for (i = 0; i < n; i++) a[i] = x;
    return a;
}

static char *alloc_flags(size_t n)
{
    char *a = (char *)calloc(n + 1, 1);
    if (!a) { fprintf(stderr, "out of memory\n"); exit(2); }
    return a;
}

static void setup(bwd_prob *bp, const bwd_case *c, uint64_t seed)
{
    fmha_ref_fwd *p = &bp->g.fwd;
    fmha_ref_rng r = fmha_ref_rng_make(seed);
    int b, h, i, x, tq = 0, tk = 0, sq, sk;
    /* rows always padded, so strides never equal the head dimension */
    int rq = c->dq + (c->bhsd ? 3 : 1), rv = c->dv + (c->bhsd ? 3 : 1);
    size_t t;

    memset(bp, 0, sizeof(*bp));
    for (b = 0; b < c->batch; b++) {
        bp->ssq[b] = tq; bp->ssk[b] = tk;
        tq += c->group ? c->sq[b] : c->sq[0];
        tk += c->group ? c->sk[b] : c->sk[0];
    }
    bp->ssq[c->batch] = tq; bp->ssk[c->batch] = tk;

    p->is_group_mode = c->group;
    p->batch = c->batch; p->nhead_q = c->hq; p->nhead_k = c->hk;
    p->seqlen_q = c->sq[0]; p->seqlen_k = c->sk[0];
    p->seqstart_q = bp->ssq; p->seqstart_k = bp->ssk;
    p->hdim_q = c->dq; p->hdim_v = c->dv;
    p->scale = c->scale; p->logits_soft_cap = c->cap;
    p->mask_type = c->mask; p->window_left = c->wl; p->window_right = c->wr;

    sq = c->group ? tq : c->sq[0];
    sk = c->group ? tk : c->sk[0];
    bp->nq = set_strides(c->bhsd, c->group, c->batch, sq, c->hq, rq, &p->stride_q, &p->nhead_stride_q, &p->batch_stride_q);
    bp->nk = set_strides(c->bhsd, c->group, c->batch, sk, c->hk, rq, &p->stride_k, &p->nhead_stride_k, &p->batch_stride_k);
    bp->nv = set_strides(c->bhsd, c->group, c->batch, sk, c->hk, rv, &p->stride_v, &p->nhead_stride_v, &p->batch_stride_v);
    bp->no = set_strides(c->bhsd, c->group, c->batch, sq, c->hq, rv, &p->stride_o, &p->nhead_stride_o, &p->batch_stride_o);

    /* NaN in input padding: any read of it would turn results into NaN. */
    bp->q = alloc_fill(bp->nq, NAN); bp->k = alloc_fill(bp->nk, NAN);
    bp->v = alloc_fill(bp->nv, NAN); bp->dout = alloc_fill(bp->no, NAN);
    bp->dq = alloc_fill(bp->nq, SENTINEL); bp->dk = alloc_fill(bp->nk, SENTINEL); bp->dv = alloc_fill(bp->nv, SENTINEL);
    bp->is_q = alloc_flags(bp->nq); bp->is_k = alloc_flags(bp->nk); bp->is_v = alloc_flags(bp->nv);
    bp->slopes = alloc_fill(MAXB * 16, 0.0f);

    for (b = 0; b < c->batch; b++) {
        fmha_ref_lengths(p, b, &sq, &sk);
        for (h = 0; h < c->hq; h++)
            for (i = 0; i < sq; i++) {
                for (x = 0; x < c->dq; x++) {
                    bp->q[fmha_ref_off_q(p, b, h, i) + x] = fmha_ref_rng_input(&r, 1.0f);
                    bp->is_q[fmha_ref_off_q(p, b, h, i) + x] = 1;
                }
                for (x = 0; x < c->dv; x++) bp->dout[fmha_ref_off_o(p, b, h, i) + x] = fmha_ref_rng_input(&r, 1.0f);
            }
        for (h = 0; h < c->hk; h++)
            for (i = 0; i < sk; i++) {
                for (x = 0; x < c->dq; x++) {
                    bp->k[fmha_ref_off_k(p, b, h, i) + x] = fmha_ref_rng_input(&r, 1.0f);
                    bp->is_k[fmha_ref_off_k(p, b, h, i) + x] = 1;
                }
                for (x = 0; x < c->dv; x++) {
                    bp->v[fmha_ref_off_v(p, b, h, i) + x] = fmha_ref_rng_input(&r, 1.0f);
                    bp->is_v[fmha_ref_off_v(p, b, h, i) + x] = 1;
                }
            }
    }
    for (t = 0; t < MAXB * 16; t++) bp->slopes[t] = fmha_ref_rng_uniform(&r, 0.05f, 0.5f);

    p->q = bp->q; p->k = bp->k; p->v = bp->v;
    p->o = NULL; p->lse = NULL;                  /* the backward must not need them */
    if (c->alibi) {
        p->alibi_slopes = bp->slopes;
        p->alibi_batch_stride = c->alibi == 2 ? c->hq : 0;
    }
    bp->g.dout = bp->dout;
    bp->g.dq = bp->dq; bp->g.dk = bp->dk; bp->g.dv = bp->dv;
    p->dropout_p = c->dropout;   /* a fixed draw: the loss stays a smooth function of q, k, v */
    p->dropout_seed = seed * 2654435761u;
    p->dropout_offset = 5;
    if (c->sinks) {
        /* logits around the scores' size, one above most of them */
        bp->sinks = alloc_fill((size_t)c->hq, 0.0f);
        bp->dsinks = (double *)malloc(sizeof(double) * (size_t)c->hq);
        if (!bp->dsinks) { fprintf(stderr, "out of memory\n"); exit(2); }
        for (h = 0; h < c->hq; h++) bp->sinks[h] = fmha_ref_rng_uniform(&r, -1.0f, 1.5f);
        p->sinks = bp->sinks;
        bp->g.dsinks = bp->dsinks;
    }
    if (c->bias) {
        /* [b or 1][h or 1][rows][max_sk + 2] (group mode: the packed rows, no batch) */
        const int kind = (c->bias - 1) % 4 + 1, hide = c->bias > 4;
        const int nbb = !c->group && (kind == 1 || kind == 4) ? c->batch : 1, nbh = kind <= 2 ? c->hq : 1;
        const int rows = c->group ? tq : c->sq[0];
        int mk = 0, j;
        for (b = 0; b < c->batch; b++) {
            fmha_ref_lengths(p, b, &sq, &sk);
            if (sk > mk) mk = sk;
        }
        p->stride_bias = mk + 2;
        p->nhead_stride_bias = nbh > 1 ? (int64_t)rows * p->stride_bias : 0;
        p->batch_stride_bias = nbb > 1 ? (int64_t)nbh * rows * p->stride_bias : 0;
        bp->nb = (size_t)nbb * (size_t)nbh * (size_t)rows * (size_t)p->stride_bias;
        bp->bias = alloc_fill(bp->nb, NAN);
        bp->is_b = alloc_flags(bp->nb);
        bp->dbias = alloc_fill(bp->nb, 0.0f);
        bp->dbias_d = (double *)calloc(bp->nb + 1, sizeof(double));
        if (!bp->dbias_d) { fprintf(stderr, "out of memory\n"); exit(2); }
        p->bias = bp->bias;   /* offsets below need it set */
        for (b = 0; b < nbb; b++) {
            fmha_ref_lengths(p, b, &sq, &sk);
            for (h = 0; h < nbh; h++)
                for (i = 0; i < rows; i++)
                    for (j = 0; j < mk; j++) {
                        const size_t o = (size_t)(b * p->batch_stride_bias + h * p->nhead_stride_bias +
                                                  (int64_t)i * p->stride_bias + j);
                        bp->bias[o] = fmha_ref_rng_uniform(&r, -1.5f, 1.5f);
                        bp->is_b[o] = 1;
                        /* hide: row 1 all -inf, and every fifth element of row 2 */
                        if (hide && (i == 1 || (i == 2 && j % 5 == 0))) {
                            bp->bias[o] = -INFINITY;
                            bp->is_b[o] = 0;
                        }
                    }
        }
        bp->g.dbias = bp->dbias_d;
    }
}

static void teardown(bwd_prob *bp)
{
    free(bp->q); free(bp->k); free(bp->v); free(bp->dout);
    free(bp->dq); free(bp->dk); free(bp->dv); free(bp->slopes); free(bp->sinks); free(bp->dsinks);
    free(bp->is_q); free(bp->is_k); free(bp->is_v);
    free(bp->bias); free(bp->dbias); free(bp->dbias_d); free(bp->is_b);
}

/* L = sum over every valid query row of dO . O, all in double. */
static double loss(const bwd_prob *bp, double *scores, double *o_row)
{
    const fmha_ref_fwd *p = &bp->g.fwd;
    double L = 0.0, lse;
    int b, h, i, x, sq, sk;
    for (b = 0; b < p->batch; b++) {
        fmha_ref_lengths(p, b, &sq, &sk);
        for (h = 0; h < p->nhead_q; h++)
            for (i = 0; i < sq; i++) {
                const float *d = bp->dout + fmha_ref_off_o(p, b, h, i);
                fmha_ref_fwd_row(p, b, h, i, scores, o_row, &lse);
                for (x = 0; x < p->hdim_v; x++) L += (double)d[x] * o_row[x];
            }
    }
    return L;
}

/* Central difference of L in every logical element of `in` (flags `is`),
 * compared with `grad` at the same offsets. Returns the rel-L2 error. */
static double fd_compare(bwd_prob *bp, float *in, const char *is, size_t n, const float *grad,
                         double *scores, double *o_row, double *max_abs)
{
    fmha_ref_err e;
    size_t t;
    fmha_ref_err_init(&e);
    for (t = 0; t < n; t++) {
        float x0;
        double xp, xm, lp, lm;
        if (!is[t]) continue;
        x0 = in[t];
        in[t] = (float)(x0 + FD_STEP); xp = in[t]; lp = loss(bp, scores, o_row);
        in[t] = (float)(x0 - FD_STEP); xm = in[t]; lm = loss(bp, scores, o_row);
        in[t] = x0;
        fmha_ref_err_add(&e, grad[t], (lp - lm) / (xp - xm));
    }
    *max_abs = e.max_abs;
    return fmha_ref_err_rel_l2(&e);
}

/* The same for the sinks (gradient in double). */
static double fd_sinks(bwd_prob *bp, int n, double *scores, double *o_row, double *max_abs)
{
    fmha_ref_err e;
    int t;
    fmha_ref_err_init(&e);
    for (t = 0; t < n; t++) {
        const float x0 = bp->sinks[t];
        double xp, xm, lp, lm;
        bp->sinks[t] = (float)(x0 + FD_STEP); xp = bp->sinks[t]; lp = loss(bp, scores, o_row);
        bp->sinks[t] = (float)(x0 - FD_STEP); xm = bp->sinks[t]; lm = loss(bp, scores, o_row);
        bp->sinks[t] = x0;
        fmha_ref_err_add(&e, bp->dsinks[t], (lp - lm) / (xp - xm));
    }
    *max_abs = e.max_abs;
    return fmha_ref_err_rel_l2(&e);
}

/* Every logical element written with a finite value, every padding element
 * still the sentinel. Returns the number of violations. */
static int check_writes(const float *a, const char *is, size_t n)
{
    size_t t;
    int bad = 0;
    for (t = 0; t < n; t++) {
        if (is[t]) bad += !(isfinite(a[t]) && a[t] != SENTINEL);
        else bad += a[t] != SENTINEL;
    }
    return bad;
}

/* Rows that see no key must have dq exactly 0; keys that no query row (of any
 * head) sees must have dk = dv exactly 0. Counts masked rows and unseen keys. */
static int check_exact_zeros(const bwd_prob *bp, int *n_masked_rows, int *n_unseen_keys)
{
    const fmha_ref_fwd *p = &bp->g.fwd;
    int b, h, i, j, x, sq, sk, lo, hi, bad = 0;
    *n_masked_rows = *n_unseen_keys = 0;
    for (b = 0; b < p->batch; b++) {
        fmha_ref_lengths(p, b, &sq, &sk);
        for (i = 0; i < sq; i++)
            if (fmha_ref_visible_range(p, sq, sk, i, &lo, &hi) == 0) {
                (*n_masked_rows)++;
                for (h = 0; h < p->nhead_q; h++)
                    for (x = 0; x < p->hdim_q; x++) bad += bp->dq[fmha_ref_off_q(p, b, h, i) + x] != 0.0f;
            }
        for (j = 0; j < sk; j++) {
            int seen = 0;
            for (i = 0; i < sq; i++)
                if (fmha_ref_visible_range(p, sq, sk, i, &lo, &hi) > 0 && lo <= j && j <= hi) seen = 1;
            if (seen) continue;
            (*n_unseen_keys)++;
            for (h = 0; h < p->nhead_k; h++) {
                for (x = 0; x < p->hdim_q; x++) bad += bp->dk[fmha_ref_off_k(p, b, h, j) + x] != 0.0f;
                for (x = 0; x < p->hdim_v; x++) bad += bp->dv[fmha_ref_off_v(p, b, h, j) + x] != 0.0f;
            }
        }
    }
    return bad;
}

static void run_case(const bwd_case *c, uint64_t seed)
{
    bwd_prob bp;
    double *scores, *o_row, eq, ek, ev, es = 0.0, mq, mk, mv, ms = 0.0, eb = 0.0, mb = 0.0;
    int max_sk = 1, b, sq, sk, bad_w, bad_z, n_masked, n_unseen, ok;
    char detail[400];

    setup(&bp, c, seed);
    for (b = 0; b < c->batch; b++) {
        fmha_ref_lengths(&bp.g.fwd, b, &sq, &sk);
        if (sk > max_sk) max_sk = sk;
    }
    scores = (double *)malloc(sizeof(double) * ((size_t)max_sk + (size_t)c->dv));
    if (!scores || fmha_ref_bwd_run(&bp.g) != 0) {
        report(0, c->name, "allocation failed");
        free(scores); teardown(&bp);
        return;
    }
    o_row = scores + max_sk;

    bad_w = check_writes(bp.dq, bp.is_q, bp.nq) + check_writes(bp.dk, bp.is_k, bp.nk) +
            check_writes(bp.dv, bp.is_v, bp.nv);
    bad_z = check_exact_zeros(&bp, &n_masked, &n_unseen);
    eq = fd_compare(&bp, bp.q, bp.is_q, bp.nq, bp.dq, scores, o_row, &mq);
    ek = fd_compare(&bp, bp.k, bp.is_k, bp.nk, bp.dk, scores, o_row, &mk);
    ev = fd_compare(&bp, bp.v, bp.is_v, bp.nv, bp.dv, scores, o_row, &mv);
    if (c->sinks) es = fd_sinks(&bp, c->hq, scores, o_row, &ms);
    if (c->bias) {   /* dbias against the loss's differences in every finite bias element */
        size_t t;
        for (t = 0; t < bp.nb; t++) bp.dbias[t] = (float)bp.dbias_d[t];
        eb = fd_compare(&bp, bp.bias, bp.is_b, bp.nb, bp.dbias, scores, o_row, &mb);
        for (t = 0; t < bp.nb; t++) bad_w += !bp.is_b[t] && bp.dbias_d[t] != 0.0;   /* hidden or padding: 0 */
    }

    /* written as e < tol so that a NaN error fails */
    ok = eq < FD_TOL && ek < FD_TOL && ev < FD_TOL && es < FD_TOL && eb < FD_TOL && bad_w == 0 && bad_z == 0 &&
         (!c->want_masked || n_masked > 0);
    snprintf(detail, sizeof(detail),
             "rel-L2 vs finite diff: dq %.2g dk %.2g dv %.2g dsinks %.2g dbias %.2g (max abs %.2g %.2g %.2g %.2g "
             "%.2g); bad writes %d, nonzero masked grads %d, masked rows %d, unseen keys %d",
             eq, ek, ev, es, eb, mq, mk, mv, ms, mb, bad_w, bad_z, n_masked, n_unseen);
    report(ok, c->name, detail);
    free(scores);
    teardown(&bp);
}

int main(void)
{
    /*  name                 grp  B  hq hk dq dv  sq            sk            mask wl  wr  scale  cap  alibi bhsd masked sinks dropout bias */
    static const bwd_case cases[] = {
        /* plain softmax, odd lengths, hdim_q != hdim_v */
        { "bwd_nomask",          0, 2, 2, 2, 16, 8, {5},          {7},          0, -1, -1, 0.35f, 0,    0, 0, 0, 0, 0, 0 },
        /* causal top-left, s_q < s_k: the last keys are seen by nobody */
        { "bwd_causal_tl",       0, 2, 2, 2, 8,  8, {5},          {7},          1, -1,  0, 0.35f, 0,    0, 0, 0, 0, 0, 0 },
        /* causal bottom-right, s_q > s_k: the first rows see nothing */
        { "bwd_causal_br",       0, 1, 2, 1, 8,  8, {7},          {5},          2, -1,  0, 0.35f, 0,    0, 1, 1, 0, 0, 0 },
        /* causal bottom-right, s_q < s_k */
        { "bwd_causal_br_sq_lt_sk", 0, 2, 2, 2, 16, 16, {5},      {7},          2, -1,  0, 0.25f, 0,    0, 0, 0, 0, 0, 0 },
        /* sliding windows on both sides, both origins */
        { "bwd_window_tl",       0, 1, 2, 2, 8,  8, {9},          {7},          1,  2,  1, 0.35f, 0,    0, 0, 0, 0, 0, 0 },
        { "bwd_window_br",       0, 2, 2, 1, 8,  8, {5},          {11},         2,  3,  0, 0.35f, 0,    0, 1, 0, 0, 0, 0 },
        /* soft cap with scale*q.k/c ~ 1, where 1 - tanh^2 is far from 1; scale != 1
         * so that a tanh argument missing the scale shows */
        { "bwd_softcap",         0, 2, 2, 2, 16, 8, {5},          {7},          0, -1, -1, 0.5f,  0.75f, 0, 0, 0, 0, 0, 0 },
        /* ALiBi: shared slopes, and per-batch slopes under a causal mask */
        { "bwd_alibi_shared",    0, 2, 2, 2, 8,  8, {5},          {7},          0, -1, -1, 0.35f, 0,    1, 0, 0, 0, 0, 0 },
        { "bwd_alibi_batch_br",  0, 2, 4, 2, 8,  8, {7},          {5},          2, -1,  0, 0.35f, 0,    2, 1, 1, 0, 0, 0 },
        /* GQA: MQA (4 query heads on 1 KV head) and groups of 2 */
        { "bwd_mqa_4_1",         0, 2, 4, 1, 8,  8, {5},          {7},          0, -1, -1, 0.35f, 0,    0, 0, 0, 0, 0, 0 },
        { "bwd_gqa_4_2",         0, 1, 4, 2, 16, 8, {5},          {7},          1, -1,  0, 0.35f, 0,    0, 1, 0, 0, 0, 0 },
        /* group mode: length-0 and length-1 entries on either side, an entry with
         * keys but no queries (dk = dv = 0) and one with queries but no keys */
        { "bwd_group",           1, 4, 4, 2, 8,  8, {3, 0, 1, 5}, {4, 2, 1, 0}, 0, -1, -1, 0.35f, 0,    2, 0, 1, 0, 0, 0 },
        { "bwd_group_causal_br", 1, 4, 2, 1, 8,  16, {1, 6, 0, 4}, {1, 3, 5, 7}, 2, -1, 0, 0.35f, 0,   1, 1, 1, 0, 0, 0 },
        /* a window that leaves rows with no key (top-left, s_q > s_k) */
        { "bwd_masked_rows",     0, 1, 2, 2, 8,  8, {7},          {3},          1,  1,  0, 0.35f, 0,    0, 0, 1, 0, 0, 0 },
        /* s_k = 0: every row masked, dq all zero, no dk/dv to write */
        { "bwd_sk0",             0, 2, 2, 1, 8,  8, {3},          {0},          0, -1, -1, 0.35f, 0,    0, 0, 1, 0, 0, 0 },
        /* everything at once: cap + ALiBi + window + GQA + group mode + bhsd */
        { "bwd_combined",        1, 3, 4, 2, 16, 8, {5, 1, 7},    {7, 1, 4},    2,  2,  1, 0.7f,  1.5f, 2, 1, 1, 0, 0, 0 },
        /* attention sinks: plain; rows that see no key (their sink still
         * takes the whole weight, O = 0); everything at once with GQA */
        { "bwd_sinks",           0, 2, 2, 2, 16, 8, {5},          {7},          0, -1, -1, 0.35f, 0,    0, 0, 0, 1, 0, 0 },
        { "bwd_sinks_masked_br", 0, 1, 4, 2, 8,  8, {7},          {5},          2, -1,  0, 0.35f, 0,    0, 1, 1, 1, 0, 0 },
        { "bwd_sinks_combined",  1, 3, 4, 2, 16, 8, {5, 1, 7},    {7, 1, 4},    2,  2,  1, 0.7f,  1.5f, 2, 1, 1, 1, 0, 0 },
        /* dropout (a fixed draw): GQA under a causal mask; everything at once
         * with a high rate and sinks */
        { "bwd_dropout",         0, 2, 4, 2, 16, 8, {9},          {12},         2, -1,  0, 0.35f, 0,    0, 0, 0, 0, 0.3f, 0 },
        { "bwd_dropout_combined", 1, 3, 4, 2, 16, 8, {5, 1, 7},   {7, 1, 4},    2,  2,  1, 0.7f,  1.5f, 2, 1, 1, 1, 0.6f, 0 },
        /* elementwise bias, each broadcast shape (dbias summed over the
         * broadcast dims by the shared offsets); -inf elements and a row
         * all hidden; GQA, masks, group mode, dropout */
        { "bwd_bias_bh",         0, 2, 2, 2, 16, 8, {5},          {7},          0, -1, -1, 0.35f, 0,    0, 0, 0, 0, 0, 1 },
        { "bwd_bias_1h_causal",  0, 2, 4, 2, 8,  8, {7},          {5},          2, -1,  0, 0.35f, 0,    0, 1, 1, 0, 0, 2 },
        { "bwd_bias_11_window",  0, 2, 2, 1, 8,  8, {9},          {7},          1,  2,  1, 0.35f, 0,    0, 0, 0, 0, 0, 3 },
        { "bwd_bias_b1_hidden",  0, 2, 4, 2, 8,  8, {5},          {7},          0, -1, -1, 0.35f, 0,    0, 1, 0, 0, 0, 8 },
        { "bwd_bias_group",      1, 3, 4, 2, 8,  8, {5, 1, 7},    {7, 1, 4},    2, -1,  0, 0.35f, 0,    0, 0, 1, 0, 0, 6 },
        { "bwd_bias_dropout",    0, 2, 4, 2, 16, 8, {9},          {12},         1, -1,  0, 0.35f, 0,    0, 0, 0, 0, 0.3f, 7 },
    };
    size_t t;
    for (t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) run_case(&cases[t], 4242 + t);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
