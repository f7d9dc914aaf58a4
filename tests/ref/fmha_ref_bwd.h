/*
 * fmha_ref_bwd.h - CPU reference for the backward pass of fmha_tile's attention.
 *
 * Given a forward problem (an fmha_ref_fwd: lengths, q/k/v, scale, soft cap,
 * ALiBi, mask, GQA, batch or group mode) and the gradient dO of a loss with
 * respect to O, this computes dQ, dK and dV of that loss, where O is exactly
 * the O that fmha_ref.h's forward reference defines. Per query row i of a head:
 *
 *   s_j   = fmha_ref_score(q_i, k_j)       the forward's own score function
 *   P_j   = softmax over the visible keys  two-pass: max, then sum
 *   dP_j  = dO_i . v_j
 *   D     = sum_j P_j dP_j                 (equals dO_i . O_i)
 *   dS_j  = P_j (dP_j - D)                 gradient w.r.t. the final score
 *   dT_j  = dS_j * scale * (1 - tanh^2(scale q_i.k_j / c))   under soft cap c,
 *           dS_j * scale without it        gradient w.r.t. q_i.k_j; ALiBi is a
 *                                          constant shift, it has no gradient
 *   dq_i  = sum_j dT_j k_j,   dk_j += dT_j q_i,   dv_j += P_j dO_i
 *
 * dK and dV of a KV head are summed over every row of every query head that
 * reads it (GQA / MQA). Rows that see no key contribute nothing and get dq = 0.
 * Attention sinks (fwd.sinks): the sink joins the softmax as a key with no
 * value (dP_sink = 0), so dsink_h = sum over the head's rows of
 * P_sink (0 - D) (dsinks, [nhead_q]).
 * Elementwise bias (fwd.bias): the score gains bias(b, h, i, j), a -inf
 * element hides the key (a row all of whose keys it hides contributes
 * nothing); dbias(b, h, i, j) = dS_j, added at the bias's own offsets
 * (fmha_ref_off_bias), so a broadcast dim (stride 0) sums its terms.
 * Dropout (fwd.dropout_p > 0): O uses P_j z_j, z_j = keep_j * 256 / (256 - thr) from
 * the forward's element rule, so dP_j = z_j (dO_i . v_j), dv_j += P_j z_j dO_i,
 * and D = sum_j P_j dP_j is still dO_i . O_i.
 *
 * Like the forward reference, this is what GPU results are judged against, so
 * it is written to be obviously right rather than fast: the math above, one
 * query row at a time, scores recomputed through the forward's helpers (mask
 * range, score, offsets) so the two passes cannot disagree on semantics, all
 * arithmetic in double with dK/dV accumulated in double and rounded to float
 * once. It does not read the forward's O or LSE: recomputing P from q and k
 * keeps the reference independent of anything a kernel might have saved.
 * Everything is `static inline` and compiles as C11 and as C++.
 */
#ifndef FMHA_REF_BWD_H
#define FMHA_REF_BWD_H

#include "fmha_ref.h"

typedef struct fmha_ref_bwd {
    fmha_ref_fwd fwd;        /* the problem and q/k/v at their strides (fwd.o, fwd.lse unused, may be NULL) */
    const float *dout;       /* dO, at O's strides (fwd.stride_o / nhead_stride_o / batch_stride_o) */
    float *dq, *dk, *dv;     /* written at Q's, K's, V's strides */
    double *dsinks;          /* with fwd.sinks: [nhead_q], written */
    double *dbias;           /* with fwd.bias (optional): at the bias's offsets, added
                                into (the caller zeroes it: hidden elements stay 0) */
} fmha_ref_bwd;

/* q.k over hdim_q in double: the same sum fmha_ref_score forms. */
static inline double fmha_ref_bwd_dot(const fmha_ref_fwd *p, const float *qrow, const float *krow)
{
    double dot = 0.0;
    int c;
    for (c = 0; c < p->hdim_q; c++) dot += (double)qrow[c] * (double)krow[c];
    return dot;
}

/* d score / d (q.k). The score is scale*dot, or c*tanh(scale*dot/c) under a
 * soft cap c, plus an ALiBi term that does not depend on q or k. */
static inline double fmha_ref_bwd_dscore_ddot(const fmha_ref_fwd *p, double dot)
{
    double d = (double)p->scale;
    if (p->logits_soft_cap > 0.0f) {
        double t = tanh((double)p->scale * dot / (double)p->logits_soft_cap);
        d *= 1.0 - t * t;
    }
    return d;
}

/* Query row i of batch b, query head h: writes dq_row[hdim_q] and adds this
 * row's share into dk_acc[s_k][hdim_q] and dv_acc[s_k][hdim_v] (the KV head's
 * accumulators, indexed by key row). `scratch` holds at least 2*s_k doubles.
 * Returns the number of visible keys (0: dq_row = 0 and nothing is added). */
static inline int fmha_ref_bwd_row(const fmha_ref_bwd *g, int b, int h, int i, double *scratch,
                                   double *dq_row, double *dk_acc, double *dv_acc, double *dsink)
{
    const fmha_ref_fwd *p = &g->fwd;
    int s_q, s_k, lo, hi, n, j, c;
    int hk = h / (p->nhead_q / p->nhead_k);
    double slope = 0.0, m, l, D;
    double *P, *dP;
    const float *qrow, *dorow;

    fmha_ref_lengths(p, b, &s_q, &s_k);
    for (c = 0; c < p->hdim_q; c++) dq_row[c] = 0.0;
    n = fmha_ref_visible_range(p, s_q, s_k, i, &lo, &hi);
    if (n == 0) return 0;
    P = scratch;                 /* P[j - lo]  */
    dP = scratch + n;            /* dP[j - lo] */
    if (p->alibi_slopes) slope = p->alibi_slopes[b * p->alibi_batch_stride + h];
    qrow = p->q + fmha_ref_off_q(p, b, h, i);
    dorow = g->dout + fmha_ref_off_o(p, b, h, i);

    /* P: scores, their max, exponentials, their sum, normalise (the sink
     * takes part in the max and the sum) */
    m = p->sinks ? (double)p->sinks[h] : -INFINITY;
    for (j = lo; j <= hi; j++) {
        P[j - lo] = fmha_ref_score(p, qrow, p->k + fmha_ref_off_k(p, b, hk, j), slope, s_q, s_k, i, j);
        if (p->bias) P[j - lo] += (double)p->bias[fmha_ref_off_bias(p, b, h, i, j)];
        if (P[j - lo] > m) m = P[j - lo];
    }
    if (m == -INFINITY) return 0;   /* every visible key hidden by a -inf bias: O = 0, no gradient */
    l = p->sinks ? exp((double)p->sinks[h] - m) : 0.0;
    for (j = lo; j <= hi; j++) {
        P[j - lo] = exp(P[j - lo] - m);
        l += P[j - lo];
    }
    for (j = lo; j <= hi; j++) P[j - lo] /= l;

    /* z_j the dropout factor (1 without dropout), drawn once per key:
     * dv_j += P_j z_j dO_i; dP_j = z_j dO_i . v_j; D = sum_j P_j dP_j, the
     * softmax Jacobian's shared term. */
    D = 0.0;
    for (j = lo; j <= hi; j++) {
        const float *vrow = p->v + fmha_ref_off_v(p, b, hk, j);
        double *dv_row = dv_acc + (size_t)j * (size_t)p->hdim_v;
        const double z = fmha_ref_dropout_z(p, b, h, i, j);
        double acc = 0.0;
        for (c = 0; c < p->hdim_v; c++) {
            acc += (double)dorow[c] * (double)vrow[c];
            dv_row[c] += P[j - lo] * z * (double)dorow[c];
        }
        dP[j - lo] = acc * z;
        D += P[j - lo] * dP[j - lo];
    }
    if (p->sinks) *dsink -= exp((double)p->sinks[h] - m) / l * D;

    for (j = lo; j <= hi; j++) {
        const float *krow = p->k + fmha_ref_off_k(p, b, hk, j);
        double ds = P[j - lo] * (dP[j - lo] - D);
        double dt = ds * fmha_ref_bwd_dscore_ddot(p, fmha_ref_bwd_dot(p, qrow, krow));
        double *dk_row = dk_acc + (size_t)j * (size_t)p->hdim_q;
        if (p->bias && g->dbias) g->dbias[fmha_ref_off_bias(p, b, h, i, j)] += ds;
        for (c = 0; c < p->hdim_q; c++) {
            dq_row[c] += dt * (double)krow[c];
            dk_row[c] += dt * (double)qrow[c];
        }
    }
    return n;
}

/* Returns 0 on success, -1 on out-of-memory. Writes every dq element of every valid query row (d < hdim_q)
   and every dk/dv element of every valid key row (zeroing first); dk/dv of a KV head are summed over the
   query heads of its group (GQA/MQA). Rows that see no key contribute nothing (their dq is 0). */
static inline int fmha_ref_bwd_run(const fmha_ref_bwd *p)
{
    const fmha_ref_fwd *f = &p->fwd;
    int group = f->nhead_q / f->nhead_k;
    int b, hk, h, i, j, c, max_sk = 1;
    size_t n_acc;
    double *scratch, *dq_row, *dk_acc, *dv_acc;

    for (b = 0; b < f->batch; b++) {
        int s_q, s_k;
        fmha_ref_lengths(f, b, &s_q, &s_k);
        if (s_k > max_sk) max_sk = s_k;
    }
    n_acc = (size_t)max_sk * ((size_t)f->hdim_q + (size_t)f->hdim_v);
    scratch = (double *)malloc(sizeof(double) * (2 * (size_t)max_sk + (size_t)f->hdim_q + n_acc));
    if (!scratch) return -1;
    dq_row = scratch + 2 * (size_t)max_sk;
    dk_acc = dq_row + f->hdim_q;
    dv_acc = dk_acc + (size_t)max_sk * (size_t)f->hdim_q;
    if (f->sinks)
        for (h = 0; h < f->nhead_q; h++) p->dsinks[h] = 0.0;

    for (b = 0; b < f->batch; b++) {
        int s_q, s_k;
        fmha_ref_lengths(f, b, &s_q, &s_k);
        for (hk = 0; hk < f->nhead_k; hk++) {
            /* One KV head at a time: its query heads are hk*group .. hk*group+group-1
             * (the forward's h / group), and their sum goes into one accumulator. */
            memset(dk_acc, 0, sizeof(double) * (size_t)max_sk * (size_t)f->hdim_q);
            memset(dv_acc, 0, sizeof(double) * (size_t)max_sk * (size_t)f->hdim_v);
            for (h = hk * group; h < (hk + 1) * group; h++)
                for (i = 0; i < s_q; i++) {
                    float *dq = p->dq + fmha_ref_off_q(f, b, h, i);
                    fmha_ref_bwd_row(p, b, h, i, scratch, dq_row, dk_acc, dv_acc, f->sinks ? p->dsinks + h : NULL);
                    for (c = 0; c < f->hdim_q; c++) dq[c] = (float)dq_row[c];
                }
            for (j = 0; j < s_k; j++) {
                float *dk = p->dk + fmha_ref_off_k(f, b, hk, j);
                float *dv = p->dv + fmha_ref_off_v(f, b, hk, j);
                for (c = 0; c < f->hdim_q; c++) dk[c] = (float)dk_acc[(size_t)j * (size_t)f->hdim_q + c];
                for (c = 0; c < f->hdim_v; c++) dv[c] = (float)dv_acc[(size_t)j * (size_t)f->hdim_v + c];
            }
        }
    }
    free(scratch);
    return 0;
}

#endif /* FMHA_REF_BWD_H */
