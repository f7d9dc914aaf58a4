/*
 * paged_pool.h - host-side paged K/V pools for the GPU tests of batch prefill
 * (test_prefill.cu) and decode (test_decode.cu).
 *
 * From a pool spec (KV dtype, sequence lengths, page size, layout, sharing,
 * table garbage, FP8 descale mode) pp_layout() sets the strides and
 * pp_build() makes, in this order and from one random stream (so a test's
 * inputs depend only on its seed):
 *   - the pages of each sequence (ceil(lk / page)), shared between sequences
 *     (share 1: odd sequences reuse 3/4 of the previous one's pages; 2: every
 *     sequence reuses sequence 0's), placed in order or shuffled over a pool
 *     with `spare` pages nobody references (or, for a large pool, all past
 *     `large_first` bytes, the pool's top page among them);
 *   - the SGLang 1-D table (kv_indptr starting at indptr_base, garbage in the
 *     indices before and after the used range) and the vLLM 2-D one (rows of
 *     maxnp + bt_extra entries, garbage past each sequence's last page:
 *     -1, INT32_MAX, INT32_MIN, num_total_pages + 7);
 *   - the page images: random keys (fp16/bf16 bits of amplitude amp, or e4m3
 *     codes of range r8k / r8v) where a sequence reads, input poison (NaN:
 *     0xFFFF, e4m3 0x7F) everywhere else: page tails, padding;
 *   - FP8 PER_PAGE descales [pages][h_k + ds_pad] (or head-major for ds_pad
 *     -1), log-uniform in [0.25, 4] where read, NaN elsewhere;
 *   - K and V gathered into contiguous, dequantised (stored * descale) float
 *     arrays [total keys][h_k][d], sequence b from key kstart[b] on (the
 *     group-mode layout of tests/ref/fmha_ref.h), with each key's V descale.
 * Layouts: LINEAR token-major [pages, page, h_k, d] ("nhd") or head-major
 * [pages, h_k, page, d] ("hnd"), rows padded by `pad` (V by pad + one 16-byte
 * unit) and pages by `page_pad` (V by page_pad + one unit); VECTORIZED (vLLM
 * v0 / CK, 16-bit KV: K [pages, h_k, d/8, page, 8], V [pages, h_k, page/8, d,
 * 8], heads padded by 8*pad). Everything `static`, one translation unit.
 */
#ifndef FMHA_TEST_PAGED_POOL_H
#define FMHA_TEST_PAGED_POOL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"
#include "test_util.h"
#include "../ref/fmha_ref.h"

#define PP_MAXB 8
/* e4m3 NaN: fills every fp8 slot nobody may read (the 16-bit types use TU_POISON_IN16). */
#define FP8_POISON 0x7Fu

/* e4m3 code ranges, as exponent fields: full (subnormals .. 448), mid (0.25 ..
 * 7.5), low (subnormals and the smallest normals, |x| < 2^-3). */
enum { R8_FULL = 0, R8_MID = 1, R8_LOW = 2 };
static const int r8_emin[3] = { 0, 5, 0 }, r8_emax[3] = { 15, 9, 3 };
static const char *const r8_str[3] = { "full", "mid", "low" };

/* Host images hold 16-bit elements (es 2) or e4m3 codes (es 1). */
static void img_put(unsigned char *img, int es, int64_t i, unsigned v)
{
    if (es == 1) img[i] = (unsigned char)v;
    else ((uint16_t *)img)[i] = (uint16_t)v;
}

static unsigned img_get(const unsigned char *img, int es, int64_t i)
{
    return es == 1 ? img[i] : ((const uint16_t *)img)[i];
}

/* n elements of input poison: NaN in fp16/bf16 (0xFFFF) and in e4m3 (0x7F). */
static void img_poison(unsigned char *img, int es, size_t n)
{
    if (es == 1) memset(img, FP8_POISON, n);
    else tu_fill16((uint16_t *)img, n, TU_POISON_IN16);
}

/* A random input element of type dt: fp16/bf16 bits of amplitude amp, or an e4m3
 * code of range r8 (R8_*). */
static unsigned rand_elem(fmha_ref_rng *rng, fmha_dtype dt, float amp, int r8)
{
    if (dt == FMHA_DTYPE_FP8) return fmha_ref_rng_e4m3(rng, r8_emin[r8], r8_emax[r8]);
    return fmha_ref_f32_to_bits16(fmha_ref_rng_input(rng, amp), dt == FMHA_DTYPE_BF16);
}

static float elem_f32(unsigned u, fmha_dtype dt)
{
    if (dt == FMHA_DTYPE_FP8) return fmha_ref_e4m3_to_f32((uint8_t)u);
    return fmha_ref_bits16_to_f32((uint16_t)u, dt == FMHA_DTYPE_BF16);
}

/* 1 when the device buffer still holds the n bytes of h. */
static int same_bytes_on_device(const void *dev, const void *h, size_t n)
{
    unsigned char *tmp = (unsigned char *)tu_hmalloc(n + 1);
    int same;
    tu_download(tmp, dev, n);
    same = memcmp(tmp, h, n) == 0;
    free(tmp);
    return same;
}

/* What the pool holds and how it is laid out. */
typedef struct pp_spec {
    const char *name;            /* the check, for failure messages                  */
    fmha_dtype dtype;            /* KV: FP16, BF16 or FP8 (e4m3 codes)               */
    int batch, hk, d;
    const int *lk;               /* keys of each sequence                            */
    int page;
    int hnd;                     /* LINEAR: 0 [pages, page, h_k, d]; 1 [pages, h_k, page, d] */
    int vec;                     /* VECTORIZED: K [pages, h_k, d/8, page, 8],
                                    V [pages, h_k, page/8, d, 8]                     */
    int vec_ts;                  /* VECTORIZED: token strides passed (documented as
                                    unused); 0 means pass 8, -1 pass 0               */
    int pad;                     /* extra elements per K row (V gets pad + one
                                    16-byte unit); VECTORIZED: 8*pad per KV head     */
    int page_pad;                /* extra elements per page (V gets page_pad + a unit) */
    int shuffle;                 /* page numbers permuted over the pool              */
    int share;                   /* 0: none; 1: odd sequences share a page prefix with
                                    the previous one; 2: all share sequence 0's pages */
    int spare;                   /* unreferenced (NaN) pages in the pool             */
    int indptr_base;             /* SGLang: garbage entries before the used indices  */
    int bt_extra;                /* vLLM: garbage entries past each row's last page  */
    size_t large_bytes;          /* 0, or a pool of this many bytes whose used pages */
    size_t large_first;          /* all start at or past this byte                   */
    float amp;                   /* 16-bit inputs: amplitude                         */
    int r8k, r8v;                /* FP8: e4m3 code ranges of K and V (R8_*)          */
    fmha_kv_scale kvs;           /* FP8: NONE, PER_TENSOR or PER_PAGE                */
    float kds, vds;              /* PER_TENSOR descales                              */
    int ds_pad;                  /* PER_PAGE: descale page stride h_k + ds_pad;
                                    -1: head-major [h_k][pages + 3]                  */
} pp_spec;

/* The pool: geometry, tables and images (host), the gathered reference K/V. */
typedef struct pp_pool {
    int es;                      /* bytes per K/V element (1: e4m3)                   */
    int dpk, dpv;                /* padded row lengths of K and V (LINEAR)            */
    int64_t ps_k, ts_k, hs_k, ps_v, ts_v, hs_v;   /* page, token, head strides       */
    int np[PP_MAXB];             /* pages of sequence b                               */
    int pstart[PP_MAXB + 1];     /* prefix sums of np: logical page of (b, i) is lpage[pstart[b] + i] */
    int *lpage;
    int n_logical, n_total;      /* distinct pages used; pages in the pool            */
    int *phys;                   /* pool index of each logical page                   */
    int *fill;                   /* keys any sequence reads from each logical page    */
    int maxnp;
    size_t n_kpool, n_vpool;     /* pool elements                                     */
    /* tables (host) */
    int32_t *h_indptr, *h_indices, *h_last, *h_bt, *h_seqk;
    size_t n_indices, n_bt;
    int64_t bt_stride;
    /* images of the logical pages (page stride each) */
    unsigned char *kimg, *vimg;
    /* FP8 descales: PER_PAGE host arrays (NaN where nobody may read) and strides */
    float *h_kds, *h_vds;
    size_t n_ds;
    int64_t ds_page, ds_head;
    /* gathered K/V: [tk][h_k][d] floats, sequence b from key kstart[b] */
    int32_t kstart[PP_MAXB + 1];
    int tk;
    float *kf, *vf;
    float *vsk;                  /* each key's V descale [tk][h_k]                    */
    float vamp;                  /* largest |V| the reference sees                    */
} pp_pool;

static void pp_free(pp_pool *r)
{
    free(r->lpage); free(r->phys); free(r->fill);
    free(r->h_indptr); free(r->h_indices); free(r->h_last); free(r->h_bt); free(r->h_seqk);
    free(r->kimg); free(r->vimg); free(r->kf); free(r->vf); free(r->vsk);
    free(r->h_kds); free(r->h_vds);
    memset(r, 0, sizeof(*r));
}

/* Strides of the pool's pages. */
static void pp_layout(const pp_spec *c, pp_pool *r)
{
    const int P = c->page, kv8 = c->dtype == FMHA_DTYPE_FP8;
    const int vx = kv8 ? 16 : 8;          /* extra V row/page padding: one 16-byte unit */
    r->es = kv8 ? 1 : 2;
    r->dpk = c->d + c->pad;
    r->dpv = c->d + (c->pad ? c->pad + vx : 0);
    if (c->vec) {              /* head blocks [d/8][page][8] and [page/8][d][8], padded */
        r->hs_k = (int64_t)P * c->d + 8 * c->pad;
        r->hs_v = (int64_t)P * c->d + (c->pad ? 8 * c->pad + 8 : 0);
        r->ts_k = r->ts_v = c->vec_ts == 0 ? 8 : c->vec_ts < 0 ? 0 : c->vec_ts;
        r->dpk = r->dpv = c->d;
    } else if (!c->hnd) {
        r->ts_k = (int64_t)c->hk * r->dpk; r->hs_k = r->dpk;
        r->ts_v = (int64_t)c->hk * r->dpv; r->hs_v = r->dpv;
    } else {
        r->hs_k = (int64_t)P * r->dpk; r->ts_k = r->dpk;
        r->hs_v = (int64_t)P * r->dpv; r->ts_v = r->dpv;
    }
    r->ps_k = (c->vec ? c->hk * r->hs_k : (int64_t)P * c->hk * r->dpk) + c->page_pad;
    r->ps_v = (c->vec ? c->hk * r->hs_v : (int64_t)P * c->hk * r->dpv) + (c->page_pad ? c->page_pad + vx : 0);
}

/* Pages of each sequence, sharing, and where each distinct page sits in the pool. */
static void pp_plan_pages(const pp_spec *c, pp_pool *r, fmha_ref_rng *rng)
{
    const int P = c->page;
    int b, i, n = 0;
    r->pstart[0] = 0;
    for (b = 0; b < c->batch; b++) {
        r->np[b] = (c->lk[b] + P - 1) / P;
        r->pstart[b + 1] = r->pstart[b] + r->np[b];
        if (r->np[b] > r->maxnp) r->maxnp = r->np[b];
    }
    r->lpage = (int *)tu_hmalloc(sizeof(int) * (size_t)(r->pstart[c->batch] + 1));
    for (b = 0; b < c->batch; b++) {
        int shared = 0, src = 0;
        if (c->share == 1 && b % 2 == 1) {
            int m = r->np[b] < r->np[b - 1] ? r->np[b] : r->np[b - 1];
            shared = m > 0 ? (3 * m + 3) / 4 : 0;     /* at least one page when both have one */
            src = b - 1;
        } else if (c->share == 2 && b > 0) {
            shared = r->np[b] < r->np[0] ? r->np[b] : r->np[0];
            src = 0;
        }
        for (i = 0; i < r->np[b]; i++)
            r->lpage[r->pstart[b] + i] = i < shared ? r->lpage[r->pstart[src] + i] : n++;
    }
    r->n_logical = n;
    r->fill = (int *)calloc((size_t)n + 1, sizeof(int));
    r->phys = (int *)tu_hmalloc(sizeof(int) * ((size_t)n + 1));
    if (!r->fill) { tu_fail(c->name, "out of host memory"); tu_finish(); }
    for (b = 0; b < c->batch; b++)
        for (i = 0; i < r->np[b]; i++) {
            int l = r->lpage[r->pstart[b] + i], used = c->lk[b] - i * P;
            if (used > P) used = P;
            if (used > r->fill[l]) r->fill[l] = used;
        }

    if (c->large_bytes) {
        /* all of them in [first, n_total), the pool's last page among them */
        const size_t page_bytes = (size_t)r->ps_k * (size_t)r->es;
        const int first = (int)((c->large_first + page_bytes - 1) / page_bytes);
        int range, *cand;
        r->n_total = (int)(c->large_bytes / page_bytes);
        range = r->n_total - first;
        if (range < n) { tu_fail(c->name, "large pool holds too few pages past 4 GiB"); tu_finish(); }
        cand = (int *)tu_hmalloc(sizeof(int) * (size_t)range);
        for (i = 0; i < range; i++) cand[i] = first + i;
        { int t = cand[0]; cand[0] = cand[range - 1]; cand[range - 1] = t; }   /* top page first */
        for (i = 1; i < n; i++) {                      /* partial Fisher-Yates */
            int jj = i + (int)(fmha_ref_rng_next(rng) % (uint64_t)(range - i));
            int t = cand[i]; cand[i] = cand[jj]; cand[jj] = t;
        }
        if (!c->shuffle)
            for (i = 0; i < n; i++) cand[i] = first + i;
        for (i = 0; i < n; i++) r->phys[i] = cand[i];
        free(cand);
        return;
    }
    r->n_total = n + c->spare;
    if (c->shuffle) {
        int *perm = (int *)tu_hmalloc(sizeof(int) * ((size_t)r->n_total + 1));
        for (i = 0; i < r->n_total; i++) perm[i] = i;
        for (i = r->n_total - 1; i > 0; i--) {
            int jj = (int)(fmha_ref_rng_next(rng) % (uint64_t)(i + 1));
            int t = perm[i]; perm[i] = perm[jj]; perm[jj] = t;
        }
        for (i = 0; i < n; i++) r->phys[i] = perm[i];
        free(perm);
    } else {
        for (i = 0; i < n; i++) r->phys[i] = c->spare / 2 + i;   /* spare pages before and after */
    }
}

/* Page tables on the host. Garbage is anything no valid read may touch. */
static void pp_build_tables(const pp_spec *c, pp_pool *r)
{
    const int B = c->batch;
    const int32_t garbage[4] = { -1, INT32_MAX, r->n_total + 7, INT32_MIN };
    int b, i;
    size_t g = 0;
    r->h_indptr = (int32_t *)tu_hmalloc(sizeof(int32_t) * (size_t)(B + 1));
    r->h_last = (int32_t *)tu_hmalloc(sizeof(int32_t) * (size_t)(B + 1));
    r->h_seqk = (int32_t *)tu_hmalloc(sizeof(int32_t) * (size_t)(B + 1));
    r->n_indices = (size_t)c->indptr_base + (size_t)r->pstart[B] + 4;
    r->h_indices = (int32_t *)tu_hmalloc(sizeof(int32_t) * r->n_indices);
    for (i = 0; i < (int)r->n_indices; i++) r->h_indices[i] = garbage[g++ % 4];
    for (b = 0; b <= B; b++) r->h_indptr[b] = c->indptr_base + r->pstart[b];
    for (b = 0; b < B; b++) {
        for (i = 0; i < r->np[b]; i++)
            r->h_indices[c->indptr_base + r->pstart[b] + i] = r->phys[r->lpage[r->pstart[b] + i]];
        r->h_last[b] = r->np[b] > 0 ? c->lk[b] - (r->np[b] - 1) * c->page : 0;
        r->h_seqk[b] = c->lk[b];
    }
    r->bt_stride = r->maxnp + c->bt_extra;
    if (r->bt_stride < 1) r->bt_stride = 1;
    r->n_bt = (size_t)B * (size_t)r->bt_stride;
    r->h_bt = (int32_t *)tu_hmalloc(sizeof(int32_t) * (r->n_bt + 1));
    for (b = 0; b < B; b++)
        for (i = 0; i < (int)r->bt_stride; i++)
            r->h_bt[(size_t)b * r->bt_stride + i] = i < r->np[b] ? r->phys[r->lpage[r->pstart[b] + i]] : garbage[g++ % 4];
}

/* Element offset of (token t, KV head h, dim x) inside a page of K (which 0) or V
 * (which 1): LINEAR t*token_stride + h*head_stride + x; VECTORIZED (x = 8 elements
 * per 16 bytes) K [h][d/8][page][8], V [h][page/8][d][8]. */
static int64_t pp_kv_off(const pp_spec *c, const pp_pool *r, int which, int t, int h, int x)
{
    if (c->vec) {
        if (!which) return (int64_t)h * r->hs_k + (int64_t)(x >> 3) * c->page * 8 + (int64_t)t * 8 + (x & 7);
        return (int64_t)h * r->hs_v + (int64_t)(t >> 3) * c->d * 8 + (int64_t)x * 8 + (t & 7);
    }
    return which ? (int64_t)t * r->ts_v + (int64_t)h * r->hs_v + x : (int64_t)t * r->ts_k + (int64_t)h * r->hs_k + x;
}

/* Fills the logical page images: random keys for the filled slots, NaN elsewhere. */
static void pp_fill_pages(const pp_spec *c, pp_pool *r, fmha_ref_rng *rng)
{
    size_t nk = (size_t)r->n_logical * (size_t)r->ps_k, nv = (size_t)r->n_logical * (size_t)r->ps_v;
    int l, t, h, x, which;
    r->kimg = (unsigned char *)tu_hmalloc((nk + 1) * (size_t)r->es);
    r->vimg = (unsigned char *)tu_hmalloc((nv + 1) * (size_t)r->es);
    img_poison(r->kimg, r->es, nk);
    img_poison(r->vimg, r->es, nv);
    for (which = 0; which < 2; which++) {
        unsigned char *img = which ? r->vimg : r->kimg;
        int64_t ps = which ? r->ps_v : r->ps_k;
        const int r8 = which ? c->r8v : c->r8k;
        for (l = 0; l < r->n_logical; l++)
            for (t = 0; t < r->fill[l]; t++)
                for (h = 0; h < c->hk; h++)
                    for (x = 0; x < c->d; x++)
                        img_put(img, r->es, (int64_t)l * ps + pp_kv_off(c, r, which, t, h, x),
                                rand_elem(rng, c->dtype, c->amp, r8));
    }
}

/* FP8 PER_PAGE descales, indexed by pool page: a log-uniform value in [0.25, 4]
 * for every (used page, KV head), NaN everywhere else (unreferenced pages, row
 * padding), in [pages][h_k + ds_pad] or, for ds_pad -1, [h_k][pages + 3]. */
static void pp_make_descales(const pp_spec *c, pp_pool *r, fmha_ref_rng *rng)
{
    size_t i;
    int l, h, which;
    if (c->dtype != FMHA_DTYPE_FP8 || c->kvs != FMHA_KV_SCALE_PER_PAGE) return;
    if (c->ds_pad < 0) {
        r->ds_page = 1;
        r->ds_head = (int64_t)r->n_total + 3;
        r->n_ds = (size_t)c->hk * (size_t)r->ds_head;
    } else {
        r->ds_page = (int64_t)c->hk + c->ds_pad;
        r->ds_head = 1;
        r->n_ds = (size_t)r->n_total * (size_t)r->ds_page;
    }
    r->h_kds = (float *)tu_hmalloc((r->n_ds + 1) * 4);
    r->h_vds = (float *)tu_hmalloc((r->n_ds + 1) * 4);
    for (i = 0; i < r->n_ds; i++) r->h_kds[i] = r->h_vds[i] = NAN;
    for (which = 0; which < 2; which++)
        for (l = 0; l < r->n_logical; l++)
            for (h = 0; h < c->hk; h++)
                (which ? r->h_vds : r->h_kds)[(int64_t)r->phys[l] * r->ds_page + (int64_t)h * r->ds_head] =
                    (float)exp2((double)fmha_ref_rng_uniform(rng, -2.0f, 2.0f));
}

/* Descale of K (which 0) or V (1) on logical page l, KV head h (1 unless fp8). */
static float pp_kv_descale(const pp_spec *c, const pp_pool *r, int which, int l, int h)
{
    if (c->dtype != FMHA_DTYPE_FP8 || c->kvs == FMHA_KV_SCALE_NONE) return 1.0f;
    if (c->kvs == FMHA_KV_SCALE_PER_TENSOR) return which ? c->vds : c->kds;
    return (which ? r->h_vds : r->h_kds)[(int64_t)r->phys[l] * r->ds_page + (int64_t)h * r->ds_head];
}

/* K/V of every sequence gathered from the pages, dequantised (stored * descale):
 * [tk, h_k, d] floats. */
static void pp_gather_kv(const pp_spec *c, pp_pool *r)
{
    const int P = c->page;
    size_t n = (size_t)(r->tk > 0 ? r->tk : 1) * c->hk * c->d;
    int b, j, h, x;
    r->kf = (float *)tu_hmalloc(n * 4);
    r->vf = (float *)tu_hmalloc(n * 4);
    r->vsk = (float *)tu_hmalloc((n / c->d) * 4);
    r->vamp = 0.0f;
    for (b = 0; b < c->batch; b++)
        for (j = 0; j < c->lk[b]; j++) {
            int l = r->lpage[r->pstart[b] + j / P];
            for (h = 0; h < c->hk; h++) {
                const unsigned char *kp = r->kimg + (int64_t)l * r->ps_k * r->es;
                const unsigned char *vp = r->vimg + (int64_t)l * r->ps_v * r->es;
                const float kds = pp_kv_descale(c, r, 0, l, h), vds = pp_kv_descale(c, r, 1, l, h);
                r->vsk[(size_t)(r->kstart[b] + j) * c->hk + h] = vds;
                float *kd = r->kf + ((size_t)(r->kstart[b] + j) * c->hk + h) * c->d;
                float *vd = r->vf + ((size_t)(r->kstart[b] + j) * c->hk + h) * c->d;
                for (x = 0; x < c->d; x++) {
                    kd[x] = elem_f32(img_get(kp, r->es, pp_kv_off(c, r, 0, j % P, h, x)), c->dtype) * kds;
                    vd[x] = elem_f32(img_get(vp, r->es, pp_kv_off(c, r, 1, j % P, h, x)), c->dtype) * vds;
                    if (fabsf(vd[x]) > r->vamp) r->vamp = fabsf(vd[x]);
                }
            }
        }
}

/* Everything after pp_layout: pages, tables, images, descales, the gathered
 * K/V (in this order, from rng), and the pool sizes. */
static void pp_build(const pp_spec *c, pp_pool *r, fmha_ref_rng *rng)
{
    int b;
    r->tk = 0;
    for (b = 0; b < c->batch; b++) {
        r->kstart[b] = r->tk;
        r->tk += c->lk[b];
    }
    r->kstart[c->batch] = r->tk;
    pp_plan_pages(c, r, rng);
    pp_build_tables(c, r);
    pp_fill_pages(c, r, rng);
    pp_make_descales(c, r, rng);
    pp_gather_kv(c, r);
    r->n_kpool = (size_t)r->n_total * (size_t)r->ps_k;
    r->n_vpool = (size_t)r->n_total * (size_t)r->ps_v;
}

/* The whole pool of K (which 0) or V (1) as uploaded: the logical pages at
 * their pool index, input poison everywhere else. Caller frees. */
static unsigned char *pp_pool_image(const pp_pool *r, int which)
{
    const size_t n = which ? r->n_vpool : r->n_kpool;
    const size_t pb = (size_t)(which ? r->ps_v : r->ps_k) * r->es;
    const unsigned char *img = which ? r->vimg : r->kimg;
    unsigned char *pool = (unsigned char *)tu_hmalloc(n * r->es + 2);
    size_t i;
    img_poison(pool, r->es, n);
    for (i = 0; i < (size_t)r->n_logical; i++) memcpy(pool + (size_t)r->phys[i] * pb, img + i * pb, pb);
    return pool;
}

#endif /* FMHA_TEST_PAGED_POOL_H */
