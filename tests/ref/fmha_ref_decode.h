/*
 * CPU reference pieces for decode (split-KV, append-KV with rotary
 * embedding), in double, on top of fmha_ref.h.
 *
 *   fmha_ref_fwd_row_keys   one query row over the keys [k0, k1) only: a
 *                           split's partial O (normalised by its own sum)
 *                           and LSE (-inf when none of those keys is
 *                           visible)
 *   fmha_ref_lse_combine    merge partial (O, LSE) pairs by the LSE rule,
 *                           in order (include/fmha_tile/dispatch/splitkv.h)
 *   fmha_ref_rotary         rotary embedding of one row's first rotary_dim
 *                           elements, interleaved (pairs 2i, 2i + 1) or
 *                           half-split (pairs i, i + rotary_dim / 2)
 *
 * Written from the definitions, not from the kernels' formulas: the split
 * boundaries are recomputed here from the convention's words.
 */
#ifndef FMHA_REF_DECODE_H
#define FMHA_REF_DECODE_H

#include "fmha_ref.h"

/* Row i of batch b, query head h, over the keys [k0, k1) intersected with
 * the row's visible range. Returns the number of keys used (0: o_row = 0,
 * *lse = -inf). scores: caller scratch of at least s_k doubles. */
static inline int fmha_ref_fwd_row_keys(const fmha_ref_fwd *p, int b, int h, int i, int k0, int k1,
                                        double *scores, double *o_row, double *lse)
{
    int s_q, s_k, lo, hi, j, c;
    int hk = h / (p->nhead_q / p->nhead_k);
    double slope = 0.0, m = -INFINITY, l = 0.0;
    const float *qrow;

    fmha_ref_lengths(p, b, &s_q, &s_k);
    for (c = 0; c < p->hdim_v; c++) o_row[c] = 0.0;
    *lse = -INFINITY;
    if (fmha_ref_visible_range(p, s_q, s_k, i, &lo, &hi) == 0) return 0;
    if (lo < k0) lo = k0;
    if (hi > k1 - 1) hi = k1 - 1;
    if (hi < lo) return 0;
    if (p->alibi_slopes) slope = p->alibi_slopes[b * p->alibi_batch_stride + h];
    qrow = p->q + fmha_ref_off_q(p, b, h, i);
    for (j = lo; j <= hi; j++) {
        scores[j - lo] = fmha_ref_score(p, qrow, p->k + fmha_ref_off_k(p, b, hk, j), slope, s_q, s_k, i, j);
        if (scores[j - lo] > m) m = scores[j - lo];
    }
    for (j = lo; j <= hi; j++) {
        const float *vrow = p->v + fmha_ref_off_v(p, b, hk, j);
        const double e = exp(scores[j - lo] - m);
        l += e;
        for (c = 0; c < p->hdim_v; c++) o_row[c] += e * (double)vrow[c];
    }
    for (c = 0; c < p->hdim_v; c++) o_row[c] /= l;
    *lse = m + log(l);
    return hi - lo + 1;
}

/* n partial results (lse[s], O row o + s * o_stride of d elements) ->
 * out_o[d], *out_lse. Partials with lse -inf carry no weight; none left:
 * zeros and -inf. */
static inline void fmha_ref_lse_combine(int n, const double *lse, const double *o, int64_t o_stride, int d,
                                        double *out_o, double *out_lse)
{
    double m = -INFINITY, w = 0.0;
    int s, c;
    for (c = 0; c < d; c++) out_o[c] = 0.0;
    for (s = 0; s < n; s++)
        if (lse[s] > m) m = lse[s];
    if (m == -INFINITY) {
        *out_lse = -INFINITY;
        return;
    }
    for (s = 0; s < n; s++) {
        const double ws = lse[s] == -INFINITY ? 0.0 : exp(lse[s] - m);
        w += ws;
        for (c = 0; c < d; c++) out_o[c] += ws * o[s * o_stride + c];
    }
    for (c = 0; c < d; c++) out_o[c] /= w;
    *out_lse = m + log(w);
}

/* In place: x[0 .. rotary_dim) rotated by the angles of one position, whose
 * cosines and sines are cos_row[0 .. rotary_dim / 2) and sin_row[...].
 * Pair k is (x[2k], x[2k + 1]) interleaved, (x[k], x[k + rotary_dim / 2])
 * half-split; it turns by angle k: (a, b) -> (a cos - b sin, a sin + b cos).
 * Elements from rotary_dim on are left alone. */
static inline void fmha_ref_rotary(float *x, int rotary_dim, const float *cos_row, const float *sin_row,
                                   int interleaved)
{
    const int half = rotary_dim / 2;
    int k;
    for (k = 0; k < half; k++) {
        const int ia = interleaved ? 2 * k : k, ib = interleaved ? 2 * k + 1 : k + half;
        const double a = x[ia], b = x[ib], c = cos_row[k], s = sin_row[k];
        x[ia] = (float)(a * c - b * s);
        x[ib] = (float)(a * s + b * c);
    }
}

#endif /* FMHA_REF_DECODE_H */
