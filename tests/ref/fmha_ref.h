/*
 * fmha_ref.h - CPU reference for fmha_tile's forward attention, plus host helpers.
 *
 * This header is what every GPU result is judged against, so it is written to be
 * obviously right rather than fast: one query row at a time, scores kept in a
 * scratch row, a two-pass softmax (max, then sum of exponentials), all arithmetic
 * in double. It knows nothing about the library (it does not include api.h), so a
 * misunderstanding in the library cannot leak into the reference; the enum values
 * below equal fmha_mask_type's and the tests assert that they do.
 *
 * Semantics implemented (the project's conventions, see include/fmha_tile/api.h):
 *   - Batch mode: row i of batch b, head h sits at b*batch_stride + i*stride +
 *     h*nhead_stride. Group mode: at (seqstart[b] + i)*stride + h*nhead_stride, with
 *     seqstart_q/seqstart_k given here as HOST arrays of batch+1 entries.
 *   - GQA: query head h reads KV head h / (nhead_q / nhead_k).
 *   - Score s = scale * q.k; soft cap c > 0: s = c * tanh(s / c); then ALiBi adds
 *     -slope * |i + s_k - s_q - j| with slope = alibi_slopes[b * batch_stride + h],
 *     or an elementwise bias adds bias[b*batch_stride + h*nhead_stride + i*stride + j]
 *     (group mode: row seqstart_q[b] + i, no batch stride). A -inf bias hides
 *     its key; a row whose visible keys are all hidden is a row that sees none.
 *   - Mask: NONE sees every key. TOP_LEFT / BOTTOM_RIGHT: query i sees key j when
 *     i + off - left <= j <= i + off + right (a -1 side is unbounded), off = 0 for
 *     top-left and s_k - s_q for bottom-right.
 *   - A row that sees no key (or s_k == 0): O = 0 and LSE = -inf.
 *   - LSE (natural log) at b*batch_stride_lse + h*nhead_stride_lse + i in batch mode,
 *     h*nhead_stride_lse + seqstart_q[b] + i in group mode.
 *
 * Also here, because both the GPU tests and the example need them: fp16/bf16 bit
 * conversions with round-to-nearest-even, OCP e4m3fn (FP8) conversions, a
 * splitmix64 random generator, and a rel-L2 error accumulator. Everything is `static inline` and compiles as C11 and as
 * C++ (nvcc), so no implicit void* conversions and no C-only syntax.
 */
#ifndef FMHA_REF_H
#define FMHA_REF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* the dropout rule is part of the semantics (which elements drop), so the
 * reference draws from the library's generator, itself checked against
 * published known answers (tests/host/test_philox.c) */
#include "fmha_tile/tile/philox.h"

/* Same values as fmha_mask_type in api.h (checked by the tests). */
enum {
    FMHA_REF_MASK_NONE = 0,
    FMHA_REF_MASK_TOP_LEFT = 1,
    FMHA_REF_MASK_BOTTOM_RIGHT = 2
};

/* ============================================================================
 * fp16 / bf16 <-> float
 * ========================================================================== */

static inline uint32_t fmha_ref_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fmha_ref_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* float -> IEEE binary16, round to nearest even, NaN stays NaN (quiet). */
static inline uint16_t fmha_ref_f32_to_f16(float f)
{
    uint32_t x = fmha_ref_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                       /* inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u)                       /* >= 65520 rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {                     /* normal half (>= 2^-14) */
        /* rebias 127 -> 15 and round on the 13 dropped bits; a carry out of the
         * mantissa correctly bumps the exponent */
        uint32_t odd = (ax >> 13) & 1u;
        return (uint16_t)(sign | ((ax - 0x38000000u + 0xfffu + odd) >> 13));
    }
    /* subnormal half: units of 2^-24; the scaling by 2^24 is exact and
     * nearbyint rounds to nearest even in the default rounding mode. 1024 units
     * is the smallest normal, whose encoding is also 0x400. */
    return (uint16_t)(sign | (uint32_t)nearbyint((double)fmha_ref_bits_f32(ax) * 16777216.0));
}

static inline float fmha_ref_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return fmha_ref_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {                                 /* zero or subnormal: m * 2^-24 */
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return fmha_ref_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* float -> bfloat16, round to nearest even, NaN stays NaN (quiet). */
static inline uint16_t fmha_ref_f32_to_bf16(float f)
{
    uint32_t x = fmha_ref_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);             /* overflow rounds to inf: correct */
    return (uint16_t)(x >> 16);
}

static inline float fmha_ref_bf16_to_f32(uint16_t b) { return fmha_ref_bits_f32((uint32_t)b << 16); }

/* dtype-generic forms; is_bf16 selects the format. */
static inline uint16_t fmha_ref_f32_to_bits16(float f, int is_bf16)
{
    return is_bf16 ? fmha_ref_f32_to_bf16(f) : fmha_ref_f32_to_f16(f);
}
static inline float fmha_ref_bits16_to_f32(uint16_t u, int is_bf16)
{
    return is_bf16 ? fmha_ref_bf16_to_f32(u) : fmha_ref_f16_to_f32(u);
}
/* Round a float to the 16-bit format and back (what the GPU will see). */
static inline float fmha_ref_round16(float f, int is_bf16)
{
    return fmha_ref_bits16_to_f32(fmha_ref_f32_to_bits16(f, is_bf16), is_bf16);
}

/* ============================================================================
 * FP8 e4m3 (OCP e4m3fn) <-> float
 *
 * 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; S.1111.111
 * (0x7F, 0xFF) is NaN, so the largest finite value is 1.75 * 2^8 = 448.
 * Exponent field 0 holds the subnormals m * 2^-9 (m = 1..7). Every e4m3 value
 * is exact in bf16 and fp32. (gfx942's e4m3fnuz is a different format; these
 * helpers are the OCP one, what NVIDIA and gfx950 use.)
 * ========================================================================== */

static inline float fmha_ref_e4m3_to_f32(uint8_t b)
{
    const int e = (b >> 3) & 15, m = b & 7;
    double v;
    if (e == 15 && m == 7) return NAN;
    v = e == 0 ? ldexp((double)m, -9) : ldexp(8.0 + m, e - 10);   /* (1 + m/8) 2^(e-7) */
    return (float)((b & 0x80u) ? -v : v);
}

/* float -> e4m3, round to nearest even; magnitudes past 448 (infinities
 * included) saturate to +-448; NaN stays NaN (0x7F, with the sign). */
static inline uint8_t fmha_ref_f32_to_e4m3(float f)
{
    const uint8_t sign = (uint8_t)((fmha_ref_f32_bits(f) >> 24) & 0x80u);
    double a = fabs((double)f), q;
    int e;
    if (f != f) return (uint8_t)(sign | 0x7Fu);
    if (a < 0.015625) {
        /* subnormal: units of 2^-9 (exact scaling, nearbyint rounds to even);
         * 8 units is the smallest normal, whose code is also 8 */
        return (uint8_t)(sign | (uint8_t)nearbyint(a * 512.0));
    }
    if (a >= 448.0) return (uint8_t)(sign | 0x7Eu);
    (void)frexp(a, &e);                  /* a = f * 2^e, f in [0.5, 1) */
    e -= 1;                              /* a in [2^e, 2^(e+1)), e in -6..8 */
    q = nearbyint(ldexp(a, 3 - e));      /* 8..16 eighths of 2^e */
    if (q == 16.0) { q = 8.0; e++; }     /* rounded up into the next binade */
    if (e > 8 || (e == 8 && q > 14.0)) return (uint8_t)(sign | 0x7Eu);   /* above 448 */
    return (uint8_t)(sign | (uint8_t)((e + 7) << 3) | (uint8_t)(q - 8.0));
}

/* ============================================================================
 * Deterministic random numbers (splitmix64)
 * ========================================================================== */

typedef struct fmha_ref_rng { uint64_t s; } fmha_ref_rng;

static inline fmha_ref_rng fmha_ref_rng_make(uint64_t seed)
{
    fmha_ref_rng r;
    r.s = seed * 0x2545f4914f6cdd1dULL + 1u;     /* nearby seeds start far apart */
    return r;
}

static inline uint64_t fmha_ref_rng_next(fmha_ref_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform double in [0, 1) from the top 53 bits. */
static inline double fmha_ref_rng_unit(fmha_ref_rng *r)
{
    return (double)(fmha_ref_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static inline float fmha_ref_rng_uniform(fmha_ref_rng *r, float lo, float hi)
{
    return (float)(lo + (hi - lo) * fmha_ref_rng_unit(r));
}

/* Uniform integer in [lo, hi]. */
static inline int fmha_ref_rng_int(fmha_ref_rng *r, int lo, int hi)
{
    return lo + (int)(fmha_ref_rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* A value in [-amp, amp] whose magnitude is at least amp/64, so that inputs are
 * never zero (a zero input hides indexing bugs: every wrong address reads the
 * same 0). */
static inline float fmha_ref_rng_input(fmha_ref_rng *r, float amp)
{
    double m = amp * (1.0 / 64.0 + (63.0 / 64.0) * fmha_ref_rng_unit(r));
    return (float)((fmha_ref_rng_next(r) & 1u) ? -m : m);
}

/* A random finite, non-zero e4m3 code with its exponent field uniform in
 * [emin, emax] (0: the subnormals, 15: 256..448), random mantissa and sign.
 * Log-uniform magnitudes, so a range like [0, 15] covers the whole format. */
static inline uint8_t fmha_ref_rng_e4m3(fmha_ref_rng *r, int emin, int emax)
{
    const int e = fmha_ref_rng_int(r, emin, emax);
    const int m = e == 0 ? fmha_ref_rng_int(r, 1, 7) : fmha_ref_rng_int(r, 0, e == 15 ? 6 : 7);
    return (uint8_t)(((fmha_ref_rng_next(r) & 1u) ? 0x80u : 0u) | (unsigned)(e << 3) | (unsigned)m);
}

/* ============================================================================
 * Error measures
 * ========================================================================== */

/* Accumulates sum (got-ref)^2, sum ref^2 and max |got-ref| over elements. */
typedef struct fmha_ref_err {
    double num, den, max_abs;
    size_t n;
} fmha_ref_err;

static inline void fmha_ref_err_init(fmha_ref_err *e) { e->num = e->den = e->max_abs = 0.0; e->n = 0; }

static inline void fmha_ref_err_add(fmha_ref_err *e, double got, double ref)
{
    double d = got - ref;
    e->num += d * d;
    e->den += ref * ref;
    if (fabs(d) > e->max_abs || d != d) e->max_abs = fabs(d);
    e->n++;
}

/* sqrt(sum (got-ref)^2 / sum ref^2). An all-zero reference falls back to the
 * absolute L2 norm, so "expected zeros" still demands zeros. NaN propagates. */
static inline double fmha_ref_err_rel_l2(const fmha_ref_err *e)
{
    if (e->den == 0.0) return sqrt(e->num);
    return sqrt(e->num / e->den);
}

static inline double fmha_ref_rel_l2(const float *got, const float *ref, size_t n)
{
    fmha_ref_err e;
    size_t i;
    fmha_ref_err_init(&e);
    for (i = 0; i < n; i++) fmha_ref_err_add(&e, got[i], ref[i]);
    return fmha_ref_err_rel_l2(&e);
}

/* ============================================================================
 * Forward reference
 * ========================================================================== */

/* Mirrors fmha_fwd_args, with host float tensors and host seqstarts. */
typedef struct fmha_ref_fwd {
    int is_group_mode;
    int batch;
    int nhead_q, nhead_k;
    int seqlen_q, seqlen_k;              /* batch mode                          */
    const int32_t *seqstart_q;           /* group mode: host, batch + 1 entries */
    const int32_t *seqstart_k;
    int hdim_q, hdim_v;

    const float *q, *k, *v;              /* host, values the GPU sees           */
    float *o;                            /* written at O's strides              */
    float *lse;                          /* optional                            */

    int64_t stride_q, nhead_stride_q, batch_stride_q;
    int64_t stride_k, nhead_stride_k, batch_stride_k;
    int64_t stride_v, nhead_stride_v, batch_stride_v;
    int64_t stride_o, nhead_stride_o, batch_stride_o;
    int64_t nhead_stride_lse, batch_stride_lse;

    float scale;
    float logits_soft_cap;               /* 0: off                              */
    const float *alibi_slopes;           /* optional, host                      */
    int64_t alibi_batch_stride;          /* 0: shared by all batch entries      */

    int mask_type;                       /* FMHA_REF_MASK_*                     */
    int window_left, window_right;       /* -1: unbounded                       */

    /* fmha_ref_fwd_row_p8 only (optional): the V descale of each key and KV
     * head, [key][nhead_k] (keys numbered as K's rows: group mode from
     * seqstart_k, batch mode b * seqlen_k + j); P is quantised as
     * P * vs / vref, vref the largest |vs| of the key tile, as the paged
     * FP8 kernels do with per-page descales. NULL: every vs is 1. */
    const float *p8_vscale;
    /* fmha_ref_fwd_row_p8 only: 0, the running max is each tile's; > 0
     * (natural-log units), it moves only when a tile's max exceeds it by
     * more than this, as the Hopper kernels' lazy max does
     * (FMHAI_FWD90_LAZY, 8 in log2 units: 8 ln 2; the hdim-128 kernels
     * read it off the rounded P, which reaches 2^8 from 2^7.95 on, a
     * sliver where kernel and reference may move the max apart, each
     * softmax as right as the other); P is then rounded relative to the
     * old max (P < e^p8_lazy). */
    double p8_lazy;
    /* fmha_ref_fwd_row_p8 only: 0, O is divided by the sum of the unrounded
     * P; 1, by the sum of the rounded P (the e4m3 kernels' QSUM, which
     * their kernel info's p8_qsum names: fmha_ref_p8_qsum sets both fields).
     * The LSE takes the unrounded sum either way. */
    int p8_qsum;

    /* attention sinks (optional, host [nhead_q]): one more logit in every
     * row's softmax, with no value; a row that sees no key then has O = 0
     * and LSE = sink */
    const float *sinks;

    /* dropout (fmha_ref_fwd_row only): P's element (i, j) of head h, batch
     * entry b (group mode: sequence b; i and j counted within it) is kept
     * when fmhai_dropout_byte(seed, offset, b * nhead_q + h, i, j) >=
     * fmhai_dropout_threshold(p) and then scaled by fmhai_dropout_scale of
     * that threshold (p in 256ths: tile/philox.h); the row sum
     * and the LSE are those without dropout. 0: off. */
    float dropout_p;
    uint64_t dropout_seed, dropout_offset;

    /* elementwise bias (fmha_ref_fwd_row only; optional, host floats, the
     * values the GPU sees): see fmha_ref_off_bias. NULL: none. */
    const float *bias;
    int64_t stride_bias, nhead_stride_bias, batch_stride_bias;
} fmha_ref_fwd;

/* Lengths of batch entry b. */
static inline void fmha_ref_lengths(const fmha_ref_fwd *p, int b, int *s_q, int *s_k)
{
    if (p->is_group_mode) {
        *s_q = p->seqstart_q[b + 1] - p->seqstart_q[b];
        *s_k = p->seqstart_k[b + 1] - p->seqstart_k[b];
    } else {
        *s_q = p->seqlen_q;
        *s_k = p->seqlen_k;
    }
}

/* Element offsets of row i (query) / j (key) of batch b, head h. */
static inline int64_t fmha_ref_off_q(const fmha_ref_fwd *p, int b, int h, int i)
{
    return p->is_group_mode ? ((int64_t)p->seqstart_q[b] + i) * p->stride_q + h * p->nhead_stride_q
                            : b * p->batch_stride_q + (int64_t)i * p->stride_q + h * p->nhead_stride_q;
}
static inline int64_t fmha_ref_off_k(const fmha_ref_fwd *p, int b, int hk, int j)
{
    return p->is_group_mode ? ((int64_t)p->seqstart_k[b] + j) * p->stride_k + hk * p->nhead_stride_k
                            : b * p->batch_stride_k + (int64_t)j * p->stride_k + hk * p->nhead_stride_k;
}
static inline int64_t fmha_ref_off_v(const fmha_ref_fwd *p, int b, int hk, int j)
{
    return p->is_group_mode ? ((int64_t)p->seqstart_k[b] + j) * p->stride_v + hk * p->nhead_stride_v
                            : b * p->batch_stride_v + (int64_t)j * p->stride_v + hk * p->nhead_stride_v;
}
static inline int64_t fmha_ref_off_o(const fmha_ref_fwd *p, int b, int h, int i)
{
    return p->is_group_mode ? ((int64_t)p->seqstart_q[b] + i) * p->stride_o + h * p->nhead_stride_o
                            : b * p->batch_stride_o + (int64_t)i * p->stride_o + h * p->nhead_stride_o;
}
static inline int64_t fmha_ref_off_lse(const fmha_ref_fwd *p, int b, int h, int i)
{
    return p->is_group_mode ? h * p->nhead_stride_lse + (int64_t)p->seqstart_q[b] + i
                            : b * p->batch_stride_lse + h * p->nhead_stride_lse + i;
}

/* Element offset of the bias of (b, h, i, j); group mode: row seqstart_q[b]
 * + i of the packed rows, the batch stride unused. */
static inline int64_t fmha_ref_off_bias(const fmha_ref_fwd *p, int b, int h, int i, int j)
{
    return p->is_group_mode ? ((int64_t)p->seqstart_q[b] + i) * p->stride_bias + h * p->nhead_stride_bias + j
                            : b * p->batch_stride_bias + h * p->nhead_stride_bias + (int64_t)i * p->stride_bias + j;
}

/* Keys visible to query row i form one interval [*lo, *hi] (clipped to
 * [0, s_k)); returns its size, 0 when the row sees nothing. Written as the
 * literal predicate of the convention, in 64-bit so extreme windows cannot wrap. */
static inline int fmha_ref_visible_range(const fmha_ref_fwd *p, int s_q, int s_k, int i, int *lo, int *hi)
{
    int64_t a = 0, z = (int64_t)s_k - 1;
    if (p->mask_type != FMHA_REF_MASK_NONE) {
        int64_t off = p->mask_type == FMHA_REF_MASK_BOTTOM_RIGHT ? (int64_t)s_k - s_q : 0;
        if (p->window_left >= 0 && (int64_t)i + off - p->window_left > a) a = (int64_t)i + off - p->window_left;
        if (p->window_right >= 0 && (int64_t)i + off + p->window_right < z) z = (int64_t)i + off + p->window_right;
    }
    *lo = (int)a;
    *hi = (int)z;
    return z >= a ? (int)(z - a + 1) : 0;
}

/* One score, exactly in the convention's order: scale, soft cap, ALiBi. */
static inline double fmha_ref_score(const fmha_ref_fwd *p, const float *qrow, const float *krow,
                                    double slope, int s_q, int s_k, int i, int j)
{
    double dot = 0.0, s;
    int c;
    for (c = 0; c < p->hdim_q; c++) dot += (double)qrow[c] * (double)krow[c];
    s = (double)p->scale * dot;
    if (p->logits_soft_cap > 0.0f) s = (double)p->logits_soft_cap * tanh(s / (double)p->logits_soft_cap);
    if (p->alibi_slopes) {
        int64_t dist = (int64_t)i + s_k - s_q - j;
        s -= slope * (double)(dist < 0 ? -dist : dist);
    }
    return s;
}

/* The dropout factor of element (i, j) of head h, batch entry b: 0 when it
 * drops, 256 / (256 - threshold) when kept, 1 without dropout. The forward
 * and backward references both take it from here. */
static inline double fmha_ref_dropout_z(const fmha_ref_fwd *p, int b, int h, int i, int j)
{
    uint32_t thr;
    if (!(p->dropout_p > 0.0f)) return 1.0;
    thr = fmhai_dropout_threshold(p->dropout_p);
    return fmhai_dropout_byte(p->dropout_seed, p->dropout_offset, (uint32_t)(b * p->nhead_q + h), (uint32_t)i,
                              (uint32_t)j) >= thr
               ? (double)fmhai_dropout_scale(thr)
               : 0.0;
}

/* Computes row i of batch b, query head h into o_row[hdim_v] and *lse (double).
 * `scores` is caller scratch of at least s_k doubles. Returns the number of
 * visible keys (0: o_row = 0, *lse = -inf). */
static inline int fmha_ref_fwd_row(const fmha_ref_fwd *p, int b, int h, int i,
                                   double *scores, double *o_row, double *lse)
{
    int s_q, s_k, lo, hi, n, j, c;
    int hk = h / (p->nhead_q / p->nhead_k);
    double slope = 0.0, m, l;
    const float *qrow;

    fmha_ref_lengths(p, b, &s_q, &s_k);
    for (c = 0; c < p->hdim_v; c++) o_row[c] = 0.0;
    n = fmha_ref_visible_range(p, s_q, s_k, i, &lo, &hi);
    if (n == 0) {
        *lse = p->sinks ? (double)p->sinks[h] : -INFINITY;
        return 0;
    }
    if (p->alibi_slopes) slope = p->alibi_slopes[b * p->alibi_batch_stride + h];
    qrow = p->q + fmha_ref_off_q(p, b, h, i);

    m = p->sinks ? (double)p->sinks[h] : -INFINITY;
    for (j = lo; j <= hi; j++) {
        scores[j - lo] = fmha_ref_score(p, qrow, p->k + fmha_ref_off_k(p, b, hk, j), slope, s_q, s_k, i, j);
        if (p->bias) scores[j - lo] += (double)p->bias[fmha_ref_off_bias(p, b, h, i, j)];
        if (scores[j - lo] > m) m = scores[j - lo];
    }
    if (m == -INFINITY) {   /* every visible key hidden by a -inf bias */
        *lse = -INFINITY;
        return 0;
    }
    l = p->sinks ? exp((double)p->sinks[h] - m) : 0.0;
    for (j = lo; j <= hi; j++) {
        const float *vrow = p->v + fmha_ref_off_v(p, b, hk, j);
        const double e = exp(scores[j - lo] - m), w = e * fmha_ref_dropout_z(p, b, h, i, j);
        l += e;
        for (c = 0; c < p->hdim_v; c++) o_row[c] += w * (double)vrow[c];
    }
    for (c = 0; c < p->hdim_v; c++) o_row[c] /= l;
    *lse = m + log(l);
    return n;
}

/* Row i as the FP8 (e4m3) forward computes it: the online softmax over key
 * tiles of tile_n keys (tile n holds keys n*tile_n .. n*tile_n + tile_n - 1),
 * the kernel's order from the last visible tile down, each tile's P =
 * exp(s - running max) rounded to e4m3 (nearest even) before P V and
 * rescaled by exp(m_tile - m_final) afterwards; the row sum uses the
 * unrounded P, so the LSE is the exact one. Without this rounding a correct
 * kernel's O is about 3e-2 rel-L2 off fmha_ref_fwd_row (P's 3-bit mantissa);
 * with it what is left is fp32 and bf16 rounding. A sink joins the sum
 * after the last tile. Per-key V descales
 * (p->p8_vscale) scale P before its rounding, as the paged kernels do.
 * *sabs (may be NULL): the
 * largest scale * sum_c |q_c k_c| over the visible keys, which bounds the
 * accumulation error of a score. Arguments otherwise as fmha_ref_fwd_row. */
/* The e4m3 softmax a kernel runs (its kernel info's p8_qsum): 1, the lazy
 * running max of 2^8 with O divided by the rounded P's sum; 0, the exact
 * running max with the unrounded sum. */
static inline void fmha_ref_p8_qsum(fmha_ref_fwd *p, int qsum)
{
    p->p8_qsum = qsum != 0;
    p->p8_lazy = qsum ? 8.0 * 0.6931471805599453 : 0.0;
}

static inline int fmha_ref_fwd_row_p8(const fmha_ref_fwd *p, int b, int h, int i, int tile_n,
                                      double *scores, double *o_row, double *lse, double *sabs)
{
    int s_q, s_k, lo, hi, n, t, j, c;
    int hk = h / (p->nhead_q / p->nhead_k);
    double slope = 0.0, m = -INFINITY, l = 0.0, lq = 0.0, amax = 0.0;
    const float *qrow, *vs = 0;

    fmha_ref_lengths(p, b, &s_q, &s_k);
    for (c = 0; c < p->hdim_v; c++) o_row[c] = 0.0;
    if (sabs) *sabs = 0.0;
    n = fmha_ref_visible_range(p, s_q, s_k, i, &lo, &hi);
    if (n == 0) {
        *lse = p->sinks ? (double)p->sinks[h] : -INFINITY;
        return 0;
    }
    if (p->alibi_slopes) slope = p->alibi_slopes[b * p->alibi_batch_stride + h];
    qrow = p->q + fmha_ref_off_q(p, b, h, i);
    for (j = lo; j <= hi; j++) {
        const float *krow = p->k + fmha_ref_off_k(p, b, hk, j);
        double a = 0.0;
        scores[j - lo] = fmha_ref_score(p, qrow, krow, slope, s_q, s_k, i, j);
        for (c = 0; c < p->hdim_q; c++) a += fabs((double)qrow[c] * (double)krow[c]);
        if (a * p->scale > amax) amax = a * p->scale;
    }
    if (sabs) *sabs = amax;
    if (p->p8_vscale) vs = p->p8_vscale + ((p->is_group_mode ? (int64_t)p->seqstart_k[b] : (int64_t)b * p->seqlen_k) *
                                           p->nhead_k + hk);
    for (t = hi / tile_n; t >= lo / tile_n; t--) {
        const int j0 = t * tile_n > lo ? t * tile_n : lo;
        const int j1 = t * tile_n + tile_n - 1 < hi ? t * tile_n + tile_n - 1 : hi;
        double mt = m, alpha, vref = 0.0;
        for (j = j0; j <= j1; j++) mt = scores[j - lo] > mt ? scores[j - lo] : mt;
        if (p->p8_lazy > 0.0 && m != -INFINITY && mt - m <= p->p8_lazy) mt = m;   /* the max stays */
        alpha = m == -INFINITY ? 0.0 : exp(m - mt);
        for (c = 0; c < p->hdim_v; c++) o_row[c] *= alpha;
        l *= alpha;
        lq *= alpha;
        /* the V reference: every key of the tile, visible or not */
        for (j = t * tile_n; vs && j < t * tile_n + tile_n && j < s_k; j++)
            vref = fabs((double)vs[(int64_t)j * p->nhead_k]) > vref ? fabs((double)vs[(int64_t)j * p->nhead_k]) : vref;
        vref = vref > 0.0 ? vref : 1.0;
        for (j = j0; j <= j1; j++) {
            const double e = exp(scores[j - lo] - mt);
            const double v = vs ? (double)vs[(int64_t)j * p->nhead_k] : 1.0;
            const double pq = v == 0.0 ? 0.0
                                       : fmha_ref_e4m3_to_f32(fmha_ref_f32_to_e4m3((float)(e * (v / vref)))) *
                                             (vref / v);
            const float *vrow = p->v + fmha_ref_off_v(p, b, hk, j);
            l += e;
            lq += pq;
            for (c = 0; c < p->hdim_v; c++) o_row[c] += pq * (double)vrow[c];
        }
        m = mt;
    }
    if (p->sinks) {   /* after the tiles, as the kernels fold it */
        l += exp((double)p->sinks[h] - m);
        lq += exp((double)p->sinks[h] - m);
    }
    for (c = 0; c < p->hdim_v; c++) o_row[c] /= p->p8_qsum ? lq : l;
    *lse = m + log(l);
    return n;
}

/* Whole problem: writes p->o (and p->lse when set) at every logical element and
 * nothing else. Returns 0, or -1 when scratch allocation fails. */
static inline int fmha_ref_fwd_run(const fmha_ref_fwd *p)
{
    int b, h, i, c, max_sk = 1;
    double *scores, *o_row, lse;

    for (b = 0; b < p->batch; b++) {
        int s_q, s_k;
        fmha_ref_lengths(p, b, &s_q, &s_k);
        if (s_k > max_sk) max_sk = s_k;
    }
    scores = (double *)malloc(sizeof(double) * ((size_t)max_sk + (size_t)p->hdim_v + 1));
    if (!scores) return -1;
    o_row = scores + max_sk;

    for (b = 0; b < p->batch; b++) {
        int s_q, s_k;
        fmha_ref_lengths(p, b, &s_q, &s_k);
        for (h = 0; h < p->nhead_q; h++)
            for (i = 0; i < s_q; i++) {
                float *o = p->o + fmha_ref_off_o(p, b, h, i);
                fmha_ref_fwd_row(p, b, h, i, scores, o_row, &lse);
                for (c = 0; c < p->hdim_v; c++) o[c] = (float)o_row[c];
                if (p->lse) p->lse[fmha_ref_off_lse(p, b, h, i)] = (float)lse;
            }
    }
    free(scores);
    return 0;
}

/* Number of (query, key) pairs the mask lets through over the whole problem,
 * per head: the honest FLOP count for windows. */
static inline double fmha_ref_visible_pairs(const fmha_ref_fwd *p)
{
    double total = 0.0;
    int b, i, lo, hi;
    for (b = 0; b < p->batch; b++) {
        int s_q, s_k;
        fmha_ref_lengths(p, b, &s_q, &s_k);
        for (i = 0; i < s_q; i++) total += fmha_ref_visible_range(p, s_q, s_k, i, &lo, &hi);
    }
    return total;
}

#endif /* FMHA_REF_H */
