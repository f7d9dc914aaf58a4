/*
 * features.h - what the feature examples (the .cu files beside it) share: the
 * boring parts, so that each example shows only the calls of its feature.
 *
 * Each example is one short program: it declares the one kernel-set row it
 * needs, builds a small problem from random inputs (never zero), poisons its
 * outputs (every byte 0xFF: NaN in fp16, bf16, e4m3 and fp32, so an element
 * the kernel forgot shows), checks every API return code, compares with the
 * CPU reference of tests/ref/fmha_ref.h and prints one line that ends in
 * `valid:y` or `valid:n` (exit status 1 when invalid). Without a GPU it
 * prints `SKIP <name>: no GPU` and exits 0. examples/features/run_all.sh runs
 * them all (`make examples-run`).
 *
 * Here:
 *   FX_OK(call)           an fmha_* call that must return FMHA_OK (else: the
 *                         status, the library's message, valid:n, exit 1)
 *   fx_device()           the GPU's compute capability (major * 10 + minor)
 *   fx_host, fx_to_device, fx_poisoned, fx_to_host   memory, every call checked
 *   fx_random16           random fp16/bf16 inputs and the values they hold
 *   fx_check_rows         O (and LSE) of a problem against the reference,
 *                         row by row; fx_report prints the verdict line
 *   fx_fwd_make / fx_fwd_check / fx_fwd_free   a batch-mode forward problem
 *                         [b, s, h, d] with random Q/K/V, for the forward
 *                         feature examples
 *   fx_pool_make          a paged K/V cache: shuffled pages, both page tables,
 *                         LINEAR or VECTORIZED layout, fp16/bf16 or e4m3 with
 *                         per-page descales, and K/V gathered for the reference
 *
 * The including file defines EX_PROG (its name) first, as for
 * examples/example_util.h, whose CHECK_CUDA this uses. Everything is static:
 * one translation unit per program.
 */
#ifndef FMHA_FEATURES_H
#define FMHA_FEATURES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"
#include "../example_util.h"
#include "../../tests/ref/fmha_ref.h"

#define FX_MAXB 8            /* batch entries a paged pool holds at most */

#define FX_OK(call)                                                                        \
    do {                                                                                   \
        fmha_status s_ = (call);                                                           \
        if (s_ != FMHA_OK) {                                                               \
            printf(EX_PROG ": %s: %s: %s valid:n\n", #call, fmha_status_str(s_), fmha_last_error()); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* ---------------------------------------------------------------------------
 * Device and memory
 * ------------------------------------------------------------------------- */

/* major * 10 + minor of device 0; without a GPU: a SKIP line, exit 0. */
static inline int fx_device(void)
{
    int n = 0;
    cudaDeviceProp prop;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP " EX_PROG ": no GPU\n");
        exit(0);
    }
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    return prop.major * 10 + prop.minor;
}

static inline void *fx_host(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf(EX_PROG ": out of host memory valid:n\n");
        exit(1);
    }
    return p;
}

/* A device copy of bytes of h (at least 256 bytes allocated, so no tensor is NULL). */
static inline void *fx_to_device(const void *h, size_t bytes)
{
    void *d = NULL;
    CHECK_CUDA(cudaMalloc(&d, bytes < 256 ? 256 : bytes));
    if (bytes) CHECK_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* A device buffer of bytes, every byte 0xFF (NaN in every element type). */
static inline void *fx_poisoned(size_t bytes)
{
    void *d = NULL;
    CHECK_CUDA(cudaMalloc(&d, bytes < 256 ? 256 : bytes));
    CHECK_CUDA(cudaMemset(d, 0xFF, bytes < 256 ? 256 : bytes));
    return d;
}

static inline void fx_to_host(void *h, const void *d, size_t bytes)
{
    if (bytes) CHECK_CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* n random fp16/bf16 inputs of magnitude amp/64..amp (never zero, random
 * signs): the bits into h, the values they hold into f. */
static inline void fx_random16(fmha_ref_rng *rng, size_t n, int is_bf16, float amp, uint16_t *h, float *f)
{
    size_t i;
    for (i = 0; i < n; i++) {
        h[i] = fmha_ref_f32_to_bits16(fmha_ref_rng_input(rng, amp), is_bf16);
        f[i] = fmha_ref_bits16_to_f32(h[i], is_bf16);
    }
}

/* ---------------------------------------------------------------------------
 * Checking against the reference
 * ------------------------------------------------------------------------- */
typedef struct fx_check {
    fmha_ref_err err;        /* O against the reference (rel-L2)                 */
    double lse_err;          /* largest |LSE - reference| of the rows that see keys */
    long bad;                /* elements unwritten or not finite, rows that see no
                                key not exactly O = 0 / LSE = -inf, LSE off       */
    long rows;
} fx_check;

static inline void fx_check_init(fx_check *c)
{
    fmha_ref_err_init(&c->err);
    c->lse_err = 0.0;
    c->bad = 0;
    c->rows = 0;
}

/* Every row of problem p: o holds the kernel's O as 16-bit bits at p's O
 * strides, lse (NULL: not checked) its LSE at p's LSE strides. The LSE may be
 * lse_tol off. p8_tile_n > 0: the reference rounds P to e4m3 per key tile of
 * that many keys, as the e4m3 (wgmma) kernels do, and the LSE may also be
 * 2^-11 of the row's score bound off (their fp8 products' accumulation). */
static inline void fx_check_rows(fx_check *c, const fmha_ref_fwd *p, const uint16_t *o, int o_bf16, const float *lse,
                          double lse_tol, int p8_tile_n)
{
    int b, h, i, x, s_q, s_k, max_sk = 1;
    double *sc, *orow, ref_lse, sabs = 0.0;
    for (b = 0; b < p->batch; b++) {
        fmha_ref_lengths(p, b, &s_q, &s_k);
        if (s_k > max_sk) max_sk = s_k;
    }
    sc = (double *)fx_host(sizeof(double) * ((size_t)max_sk + (size_t)p->hdim_v));
    orow = sc + max_sk;
    for (b = 0; b < p->batch; b++) {
        fmha_ref_lengths(p, b, &s_q, &s_k);
        for (h = 0; h < p->nhead_q; h++)
            for (i = 0; i < s_q; i++) {
                const uint16_t *got = o + fmha_ref_off_o(p, b, h, i);
                const int sees = p8_tile_n > 0 ? fmha_ref_fwd_row_p8(p, b, h, i, p8_tile_n, sc, orow, &ref_lse, &sabs)
                                               : fmha_ref_fwd_row(p, b, h, i, sc, orow, &ref_lse);
                c->rows++;
                for (x = 0; x < p->hdim_v; x++) {
                    const float g = fmha_ref_bits16_to_f32(got[x], o_bf16);
                    if (!isfinite(g) || (!sees && (got[x] & 0x7FFFu) != 0)) c->bad++;
                    else fmha_ref_err_add(&c->err, g, orow[x]);
                }
                if (lse) {
                    const float gl = lse[fmha_ref_off_lse(p, b, h, i)];
                    if (isinf(ref_lse)) {
                        if (!(isinf(gl) && gl < 0)) c->bad++;
                    } else {
                        const double e = fabs((double)gl - ref_lse);
                        if (!(e <= lse_tol + (p8_tile_n > 0 ? ldexp(sabs, -11) : 0.0))) c->bad++;
                        if (e > c->lse_err || e != e) c->lse_err = e;
                    }
                }
            }
    }
    free(sc);
}

/* Prints "EX_PROG: what [kernel]: rows, rel-L2 ... valid:y|n" (kernel may be
 * NULL) and returns the exit status (0 valid, 1 not): valid when nothing was
 * bad and rel-L2 <= tol. */
static inline int fx_report(const fx_check *c, double tol, const char *what, const char *kernel)
{
    const double rel = fmha_ref_err_rel_l2(&c->err);
    const int ok = c->bad == 0 && rel <= tol && c->rows > 0;
    printf(EX_PROG ": %s%s%s%s: %ld rows, O rel-L2 %.2e (tol %.0e), LSE err %.1e, %ld bad valid:%s\n", what,
           kernel ? " [" : "", kernel ? kernel : "", kernel ? "]" : "", c->rows, rel, tol, c->lse_err, c->bad,
           ok ? "y" : "n");
    return ok ? 0 : 1;
}

/* rel-L2 tolerance of a 16-bit output (the project's test tolerances) */
static inline double fx_tol(int is_bf16) { return is_bf16 ? 1e-2 : 2e-3; }

/* rel-L2 of a downloaded bf16 tensor (e.g. a gradient) against the
 * reference; -1 when an element is not finite (unwritten: still the NaN
 * poison) */
static inline double fx_err_bf16(const uint16_t *got, const float *ref, size_t n)
{
    fmha_ref_err e;
    size_t i;
    fmha_ref_err_init(&e);
    for (i = 0; i < n; i++) {
        const float g = fmha_ref_bf16_to_f32(got[i]);
        if (!isfinite(g)) return -1.0;
        fmha_ref_err_add(&e, g, ref[i]);
    }
    return fmha_ref_err_rel_l2(&e);
}

/* ---------------------------------------------------------------------------
 * A batch-mode forward problem: Q [b, s_q, h, d], K/V [b, s_k, h_k, d], O
 * like Q ("bshd", strides in elements), LSE [b, h, s_q]
 * ------------------------------------------------------------------------- */
typedef struct fx_fwd {
    fmha_fwd_args a;         /* shape, pointers and strides; scale 1/sqrt(d);
                                no mask, soft cap, ALiBi or LSE (a.lse NULL)   */
    float *lse_buf;          /* a poisoned device LSE buffer [b, h, s_q] for a.lse */
    float *qf, *kf, *vf;     /* host: the values Q, K and V hold              */
    uint16_t *oh;            /* host: O after fx_fwd_check                     */
    float *lseh;             /* host: LSE after fx_fwd_check (when a.lse)      */
    size_t nq, nk;           /* elements of Q (and O), of K (and V)            */
} fx_fwd;

/* Shape and "bshd" strides of a batch-mode forward (pointers untouched);
 * scale 1/sqrt(d), no mask. */
static inline void fx_fwd_shape(fmha_fwd_args *a, fmha_dtype dt, int b, int h, int hk, int sq, int sk, int d)
{
    a->dtype = dt;
    a->batch = b; a->nhead_q = h; a->nhead_k = hk;
    a->seqlen_q = sq; a->seqlen_k = sk; a->hdim_q = a->hdim_v = d;
    a->stride_q = (int64_t)h * d;  a->nhead_stride_q = d; a->batch_stride_q = (int64_t)sq * h * d;
    a->stride_k = (int64_t)hk * d; a->nhead_stride_k = d; a->batch_stride_k = (int64_t)sk * hk * d;
    a->stride_v = a->stride_k;     a->nhead_stride_v = d; a->batch_stride_v = a->batch_stride_k;
    a->stride_o = a->stride_q;     a->nhead_stride_o = d; a->batch_stride_o = a->batch_stride_q;
    a->nhead_stride_lse = sq; a->batch_stride_lse = (int64_t)h * sq;
    a->scale = 1.0f / sqrtf((float)d);
    a->mask_type = FMHA_MASK_NONE; a->window_left = a->window_right = -1;
}

static inline void fx_fwd_make(fx_fwd *f, fmha_dtype dt, int b, int h, int hk, int sq, int sk, int d, uint64_t seed)
{
    const int bf = dt == FMHA_DTYPE_BF16;
    fmha_ref_rng rng = fmha_ref_rng_make(seed);
    uint16_t *bits;
    memset(f, 0, sizeof(*f));
    f->nq = (size_t)b * sq * h * d;
    f->nk = (size_t)b * sk * hk * d;
    f->qf = (float *)fx_host(f->nq * 4); f->kf = (float *)fx_host(f->nk * 4); f->vf = (float *)fx_host(f->nk * 4);
    f->oh = (uint16_t *)fx_host(f->nq * 2); f->lseh = (float *)fx_host((size_t)b * h * sq * 4);
    bits = (uint16_t *)fx_host((f->nq > f->nk ? f->nq : f->nk) * 2);
    fx_random16(&rng, f->nq, bf, 1.0f, bits, f->qf); f->a.q = fx_to_device(bits, f->nq * 2);
    fx_random16(&rng, f->nk, bf, 1.0f, bits, f->kf); f->a.k = fx_to_device(bits, f->nk * 2);
    fx_random16(&rng, f->nk, bf, 1.0f, bits, f->vf); f->a.v = fx_to_device(bits, f->nk * 2);
    free(bits);
    f->a.o = fx_poisoned(f->nq * 2);
    f->lse_buf = (float *)fx_poisoned((size_t)b * h * sq * 4);
    fx_fwd_shape(&f->a, dt, b, h, hk, sq, sk, d);
}

/* The backward's traits and arguments for forward problem f (its shape,
 * mask and scale; Q, K, V, and O and LSE as the forward wrote them; dQ, dK,
 * dV and dO [b, s, h, d] like Q and K). The caller adds dO, the gradients,
 * the workspace and what its feature needs. */
static inline void fx_bwd_of(const fx_fwd *f, fmha_bwd_traits *t, fmha_bwd_args *a)
{
    const fmha_fwd_args *q = &f->a;
    memset(t, 0, sizeof(*t));
    t->dtype = q->dtype;
    t->batch = q->batch; t->nhead_q = q->nhead_q; t->nhead_k = q->nhead_k;
    t->seqlen_q = q->seqlen_q; t->seqlen_k = q->seqlen_k; t->hdim_q = q->hdim_q; t->hdim_v = q->hdim_v;
    t->mask_type = q->mask_type; t->window_left = q->window_left; t->window_right = q->window_right;
    memset(a, 0, sizeof(*a));
    a->dtype = q->dtype; a->batch = q->batch; a->nhead_q = q->nhead_q; a->nhead_k = q->nhead_k;
    a->seqlen_q = q->seqlen_q; a->seqlen_k = q->seqlen_k; a->hdim_q = q->hdim_q; a->hdim_v = q->hdim_v;
    a->q = q->q; a->k = q->k; a->v = q->v; a->o = q->o; a->lse = q->lse;
    a->stride_q = a->stride_o = a->stride_do = a->stride_dq = q->stride_q;
    a->nhead_stride_q = a->nhead_stride_o = a->nhead_stride_do = a->nhead_stride_dq = q->nhead_stride_q;
    a->batch_stride_q = a->batch_stride_o = a->batch_stride_do = a->batch_stride_dq = q->batch_stride_q;
    a->stride_k = a->stride_v = a->stride_dk = a->stride_dv = q->stride_k;
    a->nhead_stride_k = a->nhead_stride_v = a->nhead_stride_dk = a->nhead_stride_dv = q->nhead_stride_k;
    a->batch_stride_k = a->batch_stride_v = a->batch_stride_dk = a->batch_stride_dv = q->batch_stride_k;
    a->nhead_stride_lse = q->nhead_stride_lse; a->batch_stride_lse = q->batch_stride_lse;
    a->scale = q->scale;
    a->mask_type = q->mask_type; a->window_left = q->window_left; a->window_right = q->window_right;
}

/* The reference problem of arguments a (shape, strides, mask, soft cap,
 * ALiBi with the host copy of the slopes) over the host values qf, kf, vf. */
static inline fmha_ref_fwd fx_ref_of(const fmha_fwd_args *a, const float *qf, const float *kf, const float *vf,
                                     const float *slopes_host)
{
    fmha_ref_fwd p;
    memset(&p, 0, sizeof(p));
    p.batch = a->batch; p.nhead_q = a->nhead_q; p.nhead_k = a->nhead_k;
    p.seqlen_q = a->seqlen_q; p.seqlen_k = a->seqlen_k; p.hdim_q = a->hdim_q; p.hdim_v = a->hdim_v;
    p.q = qf; p.k = kf; p.v = vf;
    p.stride_q = a->stride_q; p.nhead_stride_q = a->nhead_stride_q; p.batch_stride_q = a->batch_stride_q;
    p.stride_k = a->stride_k; p.nhead_stride_k = a->nhead_stride_k; p.batch_stride_k = a->batch_stride_k;
    p.stride_v = a->stride_v; p.nhead_stride_v = a->nhead_stride_v; p.batch_stride_v = a->batch_stride_v;
    p.stride_o = a->stride_o; p.nhead_stride_o = a->nhead_stride_o; p.batch_stride_o = a->batch_stride_o;
    p.nhead_stride_lse = a->nhead_stride_lse; p.batch_stride_lse = a->batch_stride_lse;
    p.scale = a->scale; p.logits_soft_cap = a->logits_soft_cap;
    p.alibi_slopes = slopes_host; p.alibi_batch_stride = a->alibi_batch_stride;
    p.mask_type = (int)a->mask_type; p.window_left = a->window_left; p.window_right = a->window_right;
    return p;
}

/* The reference problem of f's current arguments. */
static inline fmha_ref_fwd fx_fwd_ref(const fx_fwd *f, const float *slopes_host)
{
    return fx_ref_of(&f->a, f->qf, f->kf, f->vf, slopes_host);
}

static inline void fx_fwd_free(fx_fwd *f)
{
    CHECK_CUDA(cudaFree((void *)f->a.q)); CHECK_CUDA(cudaFree((void *)f->a.k)); CHECK_CUDA(cudaFree((void *)f->a.v));
    CHECK_CUDA(cudaFree(f->a.o)); CHECK_CUDA(cudaFree(f->lse_buf));
    free(f->qf); free(f->kf); free(f->vf); free(f->oh); free(f->lseh);
}

/* After fmha_fwd on f->a: downloads O (and the LSE when a.lse is set) and
 * adds the comparison with the reference to c. */
static inline void fx_fwd_check(fx_fwd *f, const float *slopes_host, fx_check *c)
{
    const fmha_ref_fwd p = fx_fwd_ref(f, slopes_host);
    const double lse_tol = f->a.logits_soft_cap > 0 ? 5e-3 : 2e-3;
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(f->oh, f->a.o, f->nq * 2);
    if (f->a.lse) fx_to_host(f->lseh, f->a.lse, (size_t)f->a.batch * f->a.nhead_q * f->a.seqlen_q * 4);
    fx_check_rows(c, &p, f->oh, f->a.dtype == FMHA_DTYPE_BF16, f->a.lse ? f->lseh : NULL, lse_tol, 0);
}

/* ---------------------------------------------------------------------------
 * A paged K/V cache (batch prefill, decode)
 *
 * Sequence b has lk[b] keys in ceil(lk[b] / page) pages; the pages are
 * numbers of a shuffled pool with three spare pages nobody references. Slots
 * nobody may read (spare pages, the tail of a last page) hold NaN. Layouts:
 *   LINEAR      [pages, page, h_k, d]: token stride h_k*d, head stride d
 *   VECTORIZED  K [pages, h_k, d/8, page, 8], V [pages, h_k, page/8, d, 8]
 *               (16-bit elements: 8 make 16 bytes), head stride page*d
 * e4m3 pools (LINEAR) store e4m3(x / descale) with a descale per page and KV
 * head (K and V their own, at random in [1, 4] / 448, as a cache writer
 * would pick from the page's range): [pool page][h_k] floats.
 * ------------------------------------------------------------------------- */
typedef struct fx_pool {
    int batch, page, hk, d, vec, es;     /* es: bytes an element (1: e4m3)         */
    int n_pages;                         /* pages in the pool                      */
    int64_t ps, ts, hs;                  /* page, token, head strides (K and V)    */
    int32_t indptr[FX_MAXB + 1], last[FX_MAXB], *indices;   /* SGLang 1-D table    */
    int32_t *bt, seqk[FX_MAXB];          /* vLLM 2-D table: rows of bt_stride, -1 past the pages */
    int64_t bt_stride;
    unsigned char *k, *v;                /* the pool images (host)                 */
    float *kds, *vds;                    /* e4m3: descales [n_pages][hk]           */
    int32_t kstart[FX_MAXB + 1];         /* first gathered key of each sequence    */
    float *kf, *vf;                      /* gathered, dequantised [keys][hk][d]    */
    float *vsk;                          /* each gathered key's V descale [keys][hk] */
} fx_pool;

/* Element offset of (token t, KV head h, dim x) in a page of K (which 0) or V (1). */
static inline int64_t fx_pool_off(const fx_pool *P, int which, int t, int h, int x)
{
    if (!P->vec) return (int64_t)t * P->ts + (int64_t)h * P->hs + x;
    if (!which) return (int64_t)h * P->hs + (int64_t)(x / 8) * P->page * 8 + (int64_t)t * 8 + x % 8;
    return (int64_t)h * P->hs + (int64_t)(t / 8) * P->d * 8 + (int64_t)x * 8 + t % 8;
}

static inline void fx_pool_make(fx_pool *P, fmha_ref_rng *rng, fmha_dtype kv_dt, int batch, const int *lk, int hk, int d,
                         int page, int vec)
{
    const int kv8 = kv_dt == FMHA_DTYPE_FP8, bf = kv_dt == FMHA_DTYPE_BF16;
    int b, i, t, h, x, n_used = 0, maxnp = 0, np[FX_MAXB], which;
    int32_t *perm;
    size_t bytes;
    memset(P, 0, sizeof(*P));
    P->batch = batch; P->page = page; P->hk = hk; P->d = d; P->vec = vec; P->es = kv8 ? 1 : 2;
    P->ps = (int64_t)page * hk * d;
    P->ts = vec ? 8 : (int64_t)hk * d;                 /* VECTORIZED: unused, 8 by convention */
    P->hs = vec ? (int64_t)page * d : d;
    for (b = 0; b < batch; b++) {
        np[b] = (lk[b] + page - 1) / page;
        P->indptr[b] = n_used;
        P->last[b] = np[b] ? lk[b] - (np[b] - 1) * page : 1;
        P->seqk[b] = lk[b];
        P->kstart[b] = b ? P->kstart[b - 1] + lk[b - 1] : 0;
        n_used += np[b];
        if (np[b] > maxnp) maxnp = np[b];
    }
    P->indptr[batch] = n_used;
    P->kstart[batch] = P->kstart[batch - 1] + lk[batch - 1];
    P->n_pages = n_used + 3;
    perm = (int32_t *)fx_host(sizeof(int32_t) * (size_t)P->n_pages);      /* shuffled page numbers */
    for (i = 0; i < P->n_pages; i++) perm[i] = i;
    for (i = P->n_pages - 1; i > 0; i--) {
        const int j = fmha_ref_rng_int(rng, 0, i);
        const int32_t s = perm[i];
        perm[i] = perm[j]; perm[j] = s;
    }
    P->indices = perm;                                /* the first n_used are referenced */
    P->bt_stride = maxnp + 1;
    P->bt = (int32_t *)fx_host(sizeof(int32_t) * (size_t)batch * P->bt_stride);
    for (b = 0; b < batch; b++)
        for (i = 0; i < P->bt_stride; i++) P->bt[b * P->bt_stride + i] = i < np[b] ? perm[P->indptr[b] + i] : -1;
    bytes = (size_t)P->n_pages * P->ps * P->es;
    P->k = (unsigned char *)fx_host(bytes); P->v = (unsigned char *)fx_host(bytes);
    memset(P->k, 0xFF, bytes); memset(P->v, 0xFF, bytes);
    P->kds = (float *)fx_host(sizeof(float) * (size_t)P->n_pages * hk);
    P->vds = (float *)fx_host(sizeof(float) * (size_t)P->n_pages * hk);
    for (i = 0; i < P->n_pages * hk; i++) {
        P->kds[i] = fmha_ref_rng_uniform(rng, 1.0f, 4.0f) / 448.0f;
        P->vds[i] = fmha_ref_rng_uniform(rng, 1.0f, 4.0f) / 448.0f;
    }
    P->kf = (float *)fx_host(sizeof(float) * ((size_t)P->kstart[batch] * hk * d + 1));
    P->vf = (float *)fx_host(sizeof(float) * ((size_t)P->kstart[batch] * hk * d + 1));
    P->vsk = (float *)fx_host(sizeof(float) * ((size_t)P->kstart[batch] * hk + 1));
    for (b = 0; b < batch; b++)
        for (t = 0; t < lk[b]; t++)
            for (h = 0; h < hk; h++)
                for (which = 0; which < 2; which++) {
                    const int pg = perm[P->indptr[b] + t / page];
                    const float ds = kv8 ? (which ? P->vds : P->kds)[pg * hk + h] : 1.0f;
                    unsigned char *img = (which ? P->v : P->k) + (size_t)pg * P->ps * P->es;
                    float *g = (which ? P->vf : P->kf) + ((size_t)(P->kstart[b] + t) * hk + h) * d;
                    if (which) P->vsk[(size_t)(P->kstart[b] + t) * hk + h] = ds;
                    for (x = 0; x < d; x++) {
                        const float real = fmha_ref_rng_input(rng, 1.0f);
                        const int64_t at = fx_pool_off(P, which, t % page, h, x);
                        if (kv8) {
                            img[at] = fmha_ref_f32_to_e4m3(real / ds);
                            g[x] = fmha_ref_e4m3_to_f32(img[at]) * ds;
                        } else {
                            const uint16_t u = fmha_ref_f32_to_bits16(real, bf);
                            memcpy(img + 2 * at, &u, 2);
                            g[x] = fmha_ref_bits16_to_f32(u, bf);
                        }
                    }
                }
}

#endif /* FMHA_FEATURES_H */
