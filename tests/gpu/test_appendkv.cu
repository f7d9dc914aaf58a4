/*
 * test_appendkv.cu - GPU tests of append-KV with rotary embedding, alone
 * (fmha_appendkv) and fused with decode (fmha_decode with k_new / v_new),
 * against the CPU rotary of tests/ref/fmha_ref_decode.h and the forward
 * reference of tests/ref/fmha_ref.h.
 *
 * Each problem builds a cache whose sequences already hold their old keys
 * (random) and have room for the new ones: contiguous (entries picked by a
 * permuted cache_batch_idx, more entries than sequences) or paged (shuffled
 * pages, SGLang 1-D or vLLM 2-D table, LINEAR or VECTORIZED layout). Every
 * slot no sequence owns holds the 16-bit NaN 0xFFFF, and so do the new rows'
 * slots before the call. seqlen_k counts the keys after the append; each
 * sequence has its own length (one of them exactly seqlen_knew, one shorter
 * than it: its rows before the cache's start are not written). Checked:
 *   - the new K rows hold k_new turned by the rotary angles of their cache
 *     positions (within one rounding of the 16-bit type of the reference
 *     rotary), the new V rows hold v_new bit for bit, every other slot of
 *     the cache is unchanged bit for bit;
 *   - q_rope holds q turned by query i's position s_k - seqlen_q + i (or, in
 *     place, q itself does); no q_rope: q untouched and nothing written;
 *   - fused decode: O and LSE match the reference computed on the cache and
 *     queries the GPU wrote (rel-L2 fp16 2e-3 / bf16 1e-2, LSE 2e-3), and
 *     the cache is the same as after fmha_appendkv alone;
 *   - e4m3 caches (bf16 queries and new rows; per-tensor descales, or
 *     per-page ones read through strides from one interleaved buffer): the
 *     new K rows dequantise to the turned keys within one e4m3 step, the new
 *     V rows hold exactly e4m3(v * (1 / descale)), everything else is
 *     unchanged; fused decode against the reference on the dequantised cache;
 *   - bad input (rotary_dim odd, not a multiple of 16 or above hdim, tables
 *     shorter than max_seqlen_k, no cos table, seqlen_knew above
 *     max_seqlen_k, a contiguous cache smaller than max_seqlen_k, e4m3
 *     queries with an append, no k_new): the status, and the cache untouched.
 * Rotary styles: interleaved (pairs 2k, 2k + 1) and half-split (k, k + r/2),
 * rotary_dim = hdim and below it, none.
 *
 * Run: build/tests/test_appendkv [--quick] [--filter SUBSTR] [--list]
 * Output: PASS/FAIL lines, last line `N passed, M failed`; without a GPU a
 * SKIP line and `0 passed, 0 failed`.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmha_tile.h"
#include "test_util.h"
#include "../ref/fmha_ref_decode.h"

#define AKV_SET(X)                                                                             \
    X(DECODE,     BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(DECODE,     FP16, 64,  MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(DECODE_VEC, BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(DECODE,     FP8,  128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(akv_set, AKV_SET)

#define MAXB 6
enum { CONTIG = 0, LINEAR = 1, VEC = 2 };

typedef struct akv_cfg {
    char name[96];
    int bf16, b, hq, hk, d, s_q, s_new, page, kind, vllm, rd, inter, qmode, fused, quick;
    int kv8;        /* e4m3 cache (bf16 queries and new rows): 1 per-tensor descales, 2 per-page */
    int lk[MAXB];   /* keys after the append */
} akv_cfg;

static akv_cfg g_cfgs[64];
static int g_ncfg;

/* qmode: 0 no q_rope, 1 separate q_rope, 2 in place */
static void add8(int kv8, int bf16, int b, int hq, int hk, int d, int s_q, int s_new, int page, int kind, int vllm,
                 int rd, int inter, int qmode, int fused, int quick, const int *lk)
{
    akv_cfg *c = &g_cfgs[g_ncfg++];
    static const char *kinds[3] = { "contig", "linear", "vec" };
    memset(c, 0, sizeof(*c));
    c->bf16 = bf16; c->b = b; c->hq = hq; c->hk = hk; c->d = d; c->s_q = s_q; c->s_new = s_new;
    c->page = page; c->kind = kind; c->vllm = vllm; c->rd = rd; c->inter = inter; c->qmode = qmode;
    c->fused = fused; c->quick = quick; c->kv8 = kv8;
    memcpy(c->lk, lk, sizeof(int) * b);
    snprintf(c->name, sizeof(c->name), "%s_%s_%s%s_p%d_b%d_h%d-%d_d%d_q%d_new%d_rd%d%s%s", fused ? "fused" : "append",
             kv8 == 2 ? "fp8pagescale" : kv8 ? "fp8" : bf16 ? "bf16" : "fp16", kinds[kind], kind && vllm ? "_vllm" : "", page, b, hq, hk, d, s_q, s_new, rd,
             rd ? (inter ? "_inter" : "_half") : "", qmode == 0 ? "_noq" : qmode == 2 ? "_qinplace" : "");
}

static void add(int bf16, int b, int hq, int hk, int d, int s_q, int s_new, int page, int kind, int vllm, int rd,
                int inter, int qmode, int fused, int quick, const int *lk)
{
    add8(0, bf16, b, hq, hk, d, s_q, s_new, page, kind, vllm, rd, inter, qmode, fused, quick, lk);
}

static void build_configs(void)
{
    const int l1[4] = { 300, 4, 77, 1030 }, l2[3] = { 1, 2048, 65 }, l3[2] = { 8, 513 };
    /* append alone: every cache kind, both rotary styles, none, partial */
    add(1, 4, 8, 2, 128, 1, 4, 0, CONTIG, 0, 128, 0, 1, 0, 1, l1);
    add(1, 4, 8, 2, 128, 1, 4, 0, CONTIG, 0, 64, 1, 2, 0, 1, l1);
    add(0, 3, 4, 4, 64, 2, 1, 0, CONTIG, 0, 0, 0, 0, 0, 1, l2);
    add(1, 4, 8, 2, 128, 1, 4, 16, LINEAR, 0, 128, 1, 1, 0, 1, l1);
    add(1, 4, 8, 2, 128, 3, 4, 1, LINEAR, 1, 32, 0, 1, 0, 0, l1);
    add(1, 3, 16, 1, 128, 1, 1, 1024, LINEAR, 1, 128, 0, 2, 0, 0, l2);
    add(1, 4, 8, 2, 128, 1, 4, 16, VEC, 0, 128, 0, 1, 0, 1, l1);
    add(1, 2, 8, 8, 128, 2, 8, 8, VEC, 1, 64, 1, 1, 0, 0, l3);
    add(0, 2, 8, 4, 64, 4, 8, 64, LINEAR, 0, 64, 0, 1, 0, 0, l3);
    /* fused with decode */
    add(1, 4, 8, 2, 128, 1, 4, 0, CONTIG, 0, 128, 0, 1, 1, 1, l1);
    add(1, 4, 32, 8, 128, 1, 1, 16, LINEAR, 0, 128, 1, 2, 1, 1, l1);
    add(0, 3, 8, 2, 64, 2, 2, 1, LINEAR, 1, 64, 0, 1, 1, 0, l2);
    add(1, 2, 8, 2, 128, 4, 4, 16, VEC, 1, 64, 1, 1, 1, 0, l3);
    add(1, 3, 8, 8, 128, 1, 1, 0, CONTIG, 0, 0, 0, 0, 1, 0, l2);
    /* e4m3 caches (LINEAR or contiguous): per-tensor and per-page descales */
    add8(1, 1, 4, 8, 2, 128, 1, 4, 0, CONTIG, 0, 128, 0, 1, 0, 1, l1);
    add8(2, 1, 4, 8, 2, 128, 1, 4, 16, LINEAR, 0, 64, 1, 1, 0, 1, l1);
    add8(1, 1, 3, 16, 1, 128, 1, 1, 1, LINEAR, 1, 128, 0, 2, 0, 0, l2);
    add8(1, 1, 4, 32, 8, 128, 1, 1, 16, LINEAR, 1, 128, 1, 2, 1, 1, l1);
    add8(2, 1, 2, 8, 2, 128, 4, 4, 16, LINEAR, 0, 64, 0, 1, 1, 0, l3);
    add8(1, 1, 3, 8, 8, 128, 1, 1, 0, CONTIG, 0, 0, 0, 0, 1, 0, l2);
}

/* ---- host cache model -------------------------------------------------- */
typedef struct akv_run {
    int n_entries, cap, n_pages, pool_pages, max_lk;
    int cbi[MAXB], first_page[MAXB + 1];
    int32_t *pages;              /* page of slot j of sequence b: pages[first_page[b] + j] */
    size_t kv_elems;
    uint16_t *k0, *v0;           /* the cache before the call */
} akv_run;

static int n_pages_of(const akv_cfg *c, int b) { return c->page ? (c->lk[b] + c->page - 1) / c->page : 0; }

/* Element offset of (sequence b, token t, KV head h, dim x) in K (v = 0) or V (v = 1). */
static int64_t kv_off(const akv_cfg *c, const akv_run *r, int v, int b, int t, int h, int x)
{
    const int d = c->d, hk = c->hk, P = c->page;
    if (c->kind == CONTIG) return (((int64_t)r->cbi[b] * r->cap + t) * hk + h) * d + x;
    {
        const int64_t page = r->pages[r->first_page[b] + t / P], in = t % P;
        if (c->kind == LINEAR) return ((page * P + in) * hk + h) * d + x;
        if (!v) return page * hk * P * d + (int64_t)h * P * d + (int64_t)(x / 8) * P * 8 + in * 8 + x % 8;
        return page * hk * P * d + (int64_t)h * P * d + (in / 8) * d * 8 + (int64_t)x * 8 + in % 8;
    }
}

static uint16_t rnd16(fmha_ref_rng *g, int bf16) { return fmha_ref_f32_to_bits16(fmha_ref_rng_uniform(g, -1.f, 1.f), bf16); }
static float f16(uint16_t u, int bf16) { return fmha_ref_bits16_to_f32(u, bf16); }

/* Fills a cache: old keys random, everything else NaN. */
static void make_cache(const akv_cfg *c, akv_run *r, fmha_ref_rng *g)
{
    int b, t, h, x, i;
    memset(r, 0, sizeof(*r));
    for (b = 0; b < c->b; ++b) r->max_lk = c->lk[b] > r->max_lk ? c->lk[b] : r->max_lk;
    r->cap = r->max_lk + 3;
    r->n_entries = c->b + 2;
    for (b = 0; b < c->b; ++b) r->cbi[b] = (3 * b + 1) % r->n_entries;   /* permuted, spare entries */
    for (b = 0; b < c->b; ++b) { r->first_page[b] = r->n_pages; r->n_pages += n_pages_of(c, b); }
    r->first_page[c->b] = r->n_pages;
    r->pool_pages = r->n_pages + 5;
    r->pages = (int32_t *)malloc(sizeof(int32_t) * (size_t)(r->pool_pages + 1));
    {   /* a permutation of the pool */
        int32_t *perm = (int32_t *)malloc(sizeof(int32_t) * (size_t)r->pool_pages);
        for (i = 0; i < r->pool_pages; ++i) perm[i] = i;
        for (i = r->pool_pages - 1; i > 0; --i) { int j = fmha_ref_rng_int(g, 0, i); int32_t s = perm[i]; perm[i] = perm[j]; perm[j] = s; }
        for (i = 0; i < r->n_pages; ++i) r->pages[i] = perm[i];
        free(perm);
    }
    r->kv_elems = c->kind == CONTIG ? (size_t)r->n_entries * r->cap * c->hk * c->d
                                    : (size_t)r->pool_pages * c->page * c->hk * c->d;
    r->k0 = (uint16_t *)malloc(r->kv_elems * 2);
    r->v0 = (uint16_t *)malloc(r->kv_elems * 2);
    /* unowned slots: NaN (16-bit 0xFFFF, e4m3 0x7F); e4m3 codes kept one per uint16 */
    for (size_t e = 0; e < r->kv_elems; ++e) r->k0[e] = r->v0[e] = c->kv8 ? 0x7Fu : 0xFFFFu;
    for (b = 0; b < c->b; ++b)
        for (t = 0; t < c->lk[b] - c->s_new; ++t)
            for (h = 0; h < c->hk; ++h)
                for (x = 0; x < c->d; ++x) {
                    r->k0[kv_off(c, r, 0, b, t, h, x)] = c->kv8 ? fmha_ref_rng_e4m3(g, 1, 8) : rnd16(g, c->bf16);
                    r->v0[kv_off(c, r, 1, b, t, h, x)] = c->kv8 ? fmha_ref_rng_e4m3(g, 1, 8) : rnd16(g, c->bf16);
                }
}

/* The cache on the device: 16-bit elements, or e4m3 bytes (host: one code per uint16). */
static void kv_upload(void *d, const uint16_t *h, size_t n, int kv8)
{
    if (!kv8) { tu_upload(d, h, n * 2); return; }
    uint8_t *b = (uint8_t *)malloc(n + 1);
    for (size_t e = 0; e < n; ++e) b[e] = (uint8_t)h[e];
    tu_upload(d, b, n);
    free(b);
}
static void kv_download(uint16_t *h, const void *d, size_t n, int kv8)
{
    if (!kv8) { tu_download(h, d, n * 2); return; }
    uint8_t *b = (uint8_t *)malloc(n + 1);
    tu_download(b, d, n);
    for (size_t e = 0; e < n; ++e) h[e] = b[e];
    free(b);
}

/* e4m3 caches: the descale of (sequence b, token t, KV head h) in K (v = 0) or V */
#define AKV_K_DESCALE 0.37f
#define AKV_V_DESCALE 1.9f
static float kv_descale(const akv_cfg *c, const akv_run *r, const float *page_ds, int v, int b, int t, int h)
{
    if (c->kv8 == 2) return page_ds[((int64_t)r->pages[r->first_page[b] + t / c->page] * c->hk + h) * 2 + v];
    return v ? AKV_V_DESCALE : AKV_K_DESCALE;
}

static int close16(float got, double ref, int bf16)
{
    return fabs(got - ref) <= (bf16 ? 1.0 / 128 : 1.0 / 1024) * fabs(ref) + 1e-6;
}

/* ---- one problem ------------------------------------------------------- */
static void run_config(const akv_cfg *c, cudaStream_t stream, uint64_t seed)
{
    fmha_ref_rng g = fmha_ref_rng_make(seed);
    akv_run r;
    const int B = c->b, d = c->d, hq = c->hq, hk = c->hk, bf = c->bf16;
    const size_t nq = (size_t)B * c->s_q * hq * d, nn = (size_t)B * c->s_new * hk * d;
    int b, t, h, x, i;
    int bad = 0;
    make_cache(c, &r, &g);
    const int kv8 = c->kv8, eb = kv8 ? 1 : 2;
    /* per-page descales [pool page][KV head][K, V] (kv8 == 2): one buffer, K at +0 and V at +1 */
    const size_t nds = (size_t)r.pool_pages * hk * 2;
    float *hds = (float *)malloc(sizeof(float) * (nds + 2));
    for (size_t e = 0; e < nds; ++e) hds[e] = fmha_ref_rng_uniform(&g, 0.25f, 2.f);
    hds[nds] = AKV_K_DESCALE; hds[nds + 1] = AKV_V_DESCALE;   /* the per-tensor pair */
    uint16_t *hq_ = (uint16_t *)malloc(nq * 2 + 2), *hkn = (uint16_t *)malloc(nn * 2 + 2), *hvn = (uint16_t *)malloc(nn * 2 + 2);
    for (size_t e = 0; e < nq; ++e) hq_[e] = rnd16(&g, bf);
    for (size_t e = 0; e < nn; ++e) { hkn[e] = rnd16(&g, bf); hvn[e] = rnd16(&g, bf); }
    const int half = c->rd / 2, rseq = r.max_lk + 2;
    float *hcos = (float *)malloc(sizeof(float) * (size_t)(rseq * half + 1)), *hsin = (float *)malloc(sizeof(float) * (size_t)(rseq * half + 1));
    for (int p = 0; p < rseq; ++p)
        for (int k = 0; k < half; ++k) {
            const double th = p * pow(10000.0, -2.0 * k / c->rd);
            hcos[p * half + k] = (float)cos(th);
            hsin[p * half + k] = (float)sin(th);
        }
    /* tables */
    int32_t hlk[MAXB], hindptr[MAXB + 1], hlast[MAXB], *hbt;
    const int bt_stride = r.n_pages + 3;
    hbt = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * bt_stride);
    for (b = 0; b < B; ++b) {
        hlk[b] = c->lk[b];
        hindptr[b] = r.first_page[b];
        hlast[b] = c->page ? c->lk[b] - (n_pages_of(c, b) - 1) * c->page : 1;
        for (i = 0; i < bt_stride; ++i) hbt[b * bt_stride + i] = i < n_pages_of(c, b) ? r.pages[r.first_page[b] + i] : -1;
    }
    hindptr[B] = r.n_pages;

    /* device */
    void *dq = tu_dmalloc(nq * 2 + 16), *dqr = tu_dmalloc(nq * 2 + 16), *dkn = tu_dmalloc(nn * 2 + 16), *dvn = tu_dmalloc(nn * 2 + 16);
    void *dk = tu_dmalloc(r.kv_elems * eb), *dv = tu_dmalloc(r.kv_elems * eb), *dout = tu_dmalloc(nq * 2 + 16);
    float *dds = (float *)tu_dmalloc(sizeof(float) * (nds + 2));
    float *dlse = (float *)tu_dmalloc(nq / d * 4 + 16), *dcos = (float *)tu_dmalloc(sizeof(float) * (size_t)(rseq * half + 1));
    float *dsin = (float *)tu_dmalloc(sizeof(float) * (size_t)(rseq * half + 1));
    int32_t *dlk = (int32_t *)tu_dmalloc(4 * MAXB), *dcbi = (int32_t *)tu_dmalloc(4 * MAXB);
    int32_t *dind = (int32_t *)tu_dmalloc(4 * (MAXB + 1)), *dlast = (int32_t *)tu_dmalloc(4 * MAXB);
    int32_t *didx = (int32_t *)tu_dmalloc(4 * (size_t)(r.n_pages + 1)), *dbt = (int32_t *)tu_dmalloc(4 * (size_t)B * bt_stride);
    tu_upload(dq, hq_, nq * 2); tu_upload(dkn, hkn, nn * 2); tu_upload(dvn, hvn, nn * 2);
    kv_upload(dk, r.k0, r.kv_elems, kv8); kv_upload(dv, r.v0, r.kv_elems, kv8);
    tu_upload(dds, hds, sizeof(float) * (nds + 2));
    tu_upload(dcos, hcos, sizeof(float) * (size_t)(rseq * half + 1)); tu_upload(dsin, hsin, sizeof(float) * (size_t)(rseq * half + 1));
    tu_upload(dlk, hlk, 4 * B); tu_upload(dcbi, r.cbi, 4 * B); tu_upload(dind, hindptr, 4 * (B + 1));
    tu_upload(dlast, hlast, 4 * B); tu_upload(didx, r.pages, 4 * (size_t)(r.n_pages + 1)); tu_upload(dbt, hbt, 4 * (size_t)B * bt_stride);
    tu_poison16(dqr, nq, TU_POISON_OUT16);
    tu_poison16(dout, nq, TU_POISON_OUT16);

    fmha_decode_args a;
    memset(&a, 0, sizeof(a));
    a.q_dtype = a.kv_dtype = bf ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
    if (kv8) {
        a.kv_dtype = FMHA_DTYPE_FP8;
        if (kv8 == 2) {
            a.kv_scale = FMHA_KV_SCALE_PER_PAGE;
            a.k_page_descale = dds; a.v_page_descale = dds + 1;
            a.descale_page_stride = 2 * hk; a.descale_nhead_stride = 2;
        } else {
            a.kv_scale = FMHA_KV_SCALE_PER_TENSOR;
            a.k_descale = dds + nds; a.v_descale = dds + nds + 1;
        }
    }
    a.batch = B; a.nhead_q = hq; a.nhead_k = hk; a.seqlen_q = c->s_q; a.max_seqlen_k = r.max_lk;
    a.hdim_q = a.hdim_v = d;
    a.q = dq; a.o = dout; a.lse = dlse;
    a.stride_q = a.stride_o = (int64_t)hq * d; a.nhead_stride_q = a.nhead_stride_o = d;
    a.batch_stride_q = a.batch_stride_o = (int64_t)c->s_q * hq * d;
    a.nhead_stride_lse = c->s_q; a.batch_stride_lse = (int64_t)hq * c->s_q;
    a.k_cache = dk; a.v_cache = dv;
    if (c->kind == CONTIG) {
        a.stride_k = a.stride_v = (int64_t)hk * d; a.nhead_stride_k = a.nhead_stride_v = d;
        a.batch_stride_k = a.batch_stride_v = (int64_t)r.cap * hk * d;
        a.seqlen_k = dlk; a.cache_batch_idx = dcbi; a.cache_seqlen_max = r.cap;
    } else {
        a.is_paged = 1; a.page_size = c->page; a.num_total_pages = r.pool_pages;
        a.kv_layout = c->kind == VEC ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
        if (c->kind == VEC) {
            a.stride_k = a.stride_v = 8; a.nhead_stride_k = a.nhead_stride_v = (int64_t)c->page * d;
        } else {
            a.stride_k = a.stride_v = (int64_t)hk * d; a.nhead_stride_k = a.nhead_stride_v = d;
        }
        a.page_stride_k = a.page_stride_v = (int64_t)c->page * hk * d;
        if (c->vllm) { a.page_table = FMHA_PAGE_TABLE_VLLM_2D; a.block_table = dbt; a.block_table_stride = bt_stride; a.seqlen_k = dlk; }
        else { a.page_table = FMHA_PAGE_TABLE_SGLANG_1D; a.kv_indptr = dind; a.kv_page_indices = didx; a.kv_last_page_lens = dlast; }
    }
    a.scale = 1.f / sqrtf((float)d);
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;
    a.k_new = dkn; a.v_new = dvn; a.seqlen_knew = c->s_new;
    a.stride_knew = a.stride_vnew = (int64_t)hk * d; a.nhead_stride_knew = a.nhead_stride_vnew = d;
    a.batch_stride_knew = a.batch_stride_vnew = (int64_t)c->s_new * hk * d;
    a.rotary_dim = c->rd; a.rotary_interleaved = c->inter; a.rotary_seqlen = rseq;
    a.rotary_cos = c->rd ? dcos : NULL; a.rotary_sin = c->rd ? dsin : NULL;
    a.q_rope = c->qmode == 1 ? dqr : c->qmode == 2 ? dq : NULL;

    fmha_status st;
    void *dws = NULL;
    if (c->fused) {
        fmha_decode_plan plan;
        a.num_splits = 3;
        st = fmha_decode_plan_make(&akv_set, &a, &plan);
        if (st == FMHA_OK) {
            dws = tu_dmalloc(plan.workspace_size + 16);
            a.workspace = dws; a.workspace_size = plan.workspace_size;
            st = fmha_decode_run(&plan, &a, stream);
        }
    } else {
        st = fmha_appendkv(&a, stream);
    }
    if (st != FMHA_OK) { tu_fail(c->name, "status %s: %s", fmha_status_str(st), fmha_last_error()); goto done; }
    TU_CUDA(cudaStreamSynchronize(stream));
    {
        uint16_t *gk = (uint16_t *)malloc(r.kv_elems * 2), *gv = (uint16_t *)malloc(r.kv_elems * 2);
        double k8_err = 0.0;   /* e4m3: the largest new-key error in units of the allowed one */
        uint16_t *gq = (uint16_t *)malloc(nq * 2 + 2), *gqr = (uint16_t *)malloc(nq * 2 + 2);
        uint16_t *ek = (uint16_t *)malloc(r.kv_elems * 2), *ev = (uint16_t *)malloc(r.kv_elems * 2);
        int nk_bad = 0, nv_bad = 0, nrest = 0, nq_bad = 0;
        float row[256];
        kv_download(gk, dk, r.kv_elems, kv8); kv_download(gv, dv, r.kv_elems, kv8);
        tu_download(gq, dq, nq * 2); tu_download(gqr, dqr, nq * 2);
        memcpy(ek, r.k0, r.kv_elems * 2); memcpy(ev, r.v0, r.kv_elems * 2);
        /* expected new rows; K checked within one rounding */
        for (b = 0; b < B; ++b)
            for (i = 0; i < c->s_new; ++i) {
                const int pos = c->lk[b] - c->s_new + i;
                if (pos < 0) continue;   /* a sequence shorter than its new rows: those rows are not written */
                for (h = 0; h < hk; ++h) {
                    const size_t src = (((size_t)b * c->s_new + i) * hk + h) * d;
                    for (x = 0; x < d; ++x) row[x] = f16(hkn[src + x], bf);
                    if (c->rd) fmha_ref_rotary(row, c->rd, hcos + (size_t)pos * half, hsin + (size_t)pos * half, c->inter);
                    for (x = 0; x < d; ++x) {
                        const int64_t o = kv_off(c, &r, 0, b, pos, h, x), ov = kv_off(c, &r, 1, b, pos, h, x);
                        if (kv8) {
                            /* K: e4m3 of the turned key / descale, within one e4m3 step (the
                             * GPU turns in fp32); V: exactly e4m3(v * (1 / descale)) */
                            const float kds = kv_descale(c, &r, hds, 0, b, pos, h);
                            const float vds = kv_descale(c, &r, hds, 1, b, pos, h);
                            const double got = fmha_ref_e4m3_to_f32((uint8_t)gk[o]) * (double)kds;
                            const double tol = fabs(row[x]) / 8 + kds / 512.0;
                            const double e = fabs(got - row[x]) / tol;
                            if (!(e <= 1.0)) nk_bad++;
                            if (e > k8_err) k8_err = e;
                            ev[ov] = fmha_ref_f32_to_e4m3(f16(hvn[src + x], bf) * (1.f / vds));
                        } else {
                            if (!close16(f16(gk[o], bf), row[x], bf)) nk_bad++;
                            ev[ov] = hvn[src + x];
                        }
                        ek[o] = gk[o];   /* accepted: compare the rest bitwise below */
                    }
                }
            }
        for (size_t e = 0; e < r.kv_elems; ++e) {
            if (gv[e] != ev[e]) nv_bad++;
            if (gk[e] != ek[e]) nrest++;
        }
        /* queries */
        for (b = 0; b < B; ++b)
            for (i = 0; i < c->s_q; ++i)
                for (h = 0; h < hq; ++h) {
                    const size_t at = (((size_t)b * c->s_q + i) * hq + h) * d;
                    const int pos = c->lk[b] - c->s_q + i;
                    for (x = 0; x < d; ++x) row[x] = f16(hq_[at + x], bf);
                    if (c->qmode && c->rd && pos >= 0)
                        fmha_ref_rotary(row, c->rd, hcos + (size_t)pos * half, hsin + (size_t)pos * half, c->inter);
                    for (x = 0; x < d; ++x) {
                        const uint16_t got = c->qmode == 2 ? gq[at + x] : c->qmode == 1 ? gqr[at + x] : gq[at + x];
                        if (c->qmode == 0 || !c->rd ? got != hq_[at + x] : !close16(f16(got, bf), row[x], bf)) nq_bad++;
                        if (c->qmode == 1 && gq[at + x] != hq_[at + x]) nq_bad++;       /* q itself untouched */
                        if (c->qmode != 1 && gqr[at + x] != TU_POISON_OUT16) nq_bad++;  /* nothing written */
                    }
                }
        if (nk_bad || nv_bad || nrest || nq_bad) {
            tu_fail(c->name, "new K rows off %d (e4m3: worst %.2f of the bound), V slots off %d, other K slots "
                    "changed %d, query elements off %d", nk_bad, k8_err, nv_bad, nrest, nq_bad);
            bad = 1;
        }
        if (!bad && c->fused) {
            /* reference attention on the cache and queries the GPU wrote */
            int32_t sq[MAXB + 1], sk[MAXB + 1];
            int total_k = 0;
            sq[0] = sk[0] = 0;
            for (b = 0; b < B; ++b) { sq[b + 1] = sq[b] + c->s_q; sk[b + 1] = sk[b] + c->lk[b]; total_k += c->lk[b]; }
            float *rk = (float *)malloc(sizeof(float) * ((size_t)total_k * hk * d + 1));
            float *rv = (float *)malloc(sizeof(float) * ((size_t)total_k * hk * d + 1));
            float *fq = (float *)malloc(sizeof(float) * (nq + 1));
            const uint16_t *qs = c->qmode == 1 && c->rd ? gqr : gq;
            for (size_t e = 0; e < nq; ++e) fq[e] = f16(qs[e], bf);
            for (b = 0; b < B; ++b)
                for (t = 0; t < c->lk[b]; ++t)
                    for (h = 0; h < hk; ++h)
                        for (x = 0; x < d; ++x) {
                            const size_t o = (((size_t)sk[b] + t) * hk + h) * d + x;
                            const int64_t ok = kv_off(c, &r, 0, b, t, h, x), ov = kv_off(c, &r, 1, b, t, h, x);
                            rk[o] = kv8 ? fmha_ref_e4m3_to_f32((uint8_t)gk[ok]) * kv_descale(c, &r, hds, 0, b, t, h)
                                        : f16(gk[ok], bf);
                            rv[o] = kv8 ? fmha_ref_e4m3_to_f32((uint8_t)gv[ov]) * kv_descale(c, &r, hds, 1, b, t, h)
                                        : f16(gv[ov], bf);
                        }
            fmha_ref_fwd p;
            memset(&p, 0, sizeof(p));
            p.is_group_mode = 1; p.batch = B; p.nhead_q = hq; p.nhead_k = hk; p.seqstart_q = sq; p.seqstart_k = sk;
            p.hdim_q = p.hdim_v = d; p.q = fq; p.k = rk; p.v = rv;
            p.stride_q = (int64_t)hq * d; p.nhead_stride_q = d; p.stride_k = p.stride_v = (int64_t)hk * d;
            p.nhead_stride_k = p.nhead_stride_v = d; p.scale = a.scale;
            p.mask_type = FMHA_REF_MASK_BOTTOM_RIGHT; p.window_left = -1; p.window_right = 0;
            uint16_t *go = (uint16_t *)malloc(nq * 2 + 2);
            float *glse = (float *)malloc(nq / d * 4 + 4);
            double *sc = (double *)malloc(sizeof(double) * (size_t)(r.max_lk + 1)), orow[256], lse, lse_err = 0.0;
            fmha_ref_err eo;
            int nonfinite = 0;
            tu_download(go, dout, nq * 2);
            tu_download(glse, dlse, nq / d * 4);
            fmha_ref_err_init(&eo);
            for (b = 0; b < B; ++b)
                for (h = 0; h < hq; ++h)
                    for (i = 0; i < c->s_q; ++i) {
                        fmha_ref_fwd_row(&p, b, h, i, sc, orow, &lse);
                        const size_t at = (((size_t)b * c->s_q + i) * hq + h) * d;
                        for (x = 0; x < d; ++x) {
                            const float gv2 = f16(go[at + x], bf);
                            if (!isfinite(gv2)) nonfinite++;
                            fmha_ref_err_add(&eo, gv2, orow[x]);
                        }
                        const float gl = glse[(size_t)b * hq * c->s_q + (size_t)h * c->s_q + i];
                        const double e = isinf(lse) ? (gl == (float)lse ? 0.0 : 1.0) : fabs(gl - lse);
                        if (!(e <= lse_err)) lse_err = e;
                    }
            const double rel = fmha_ref_err_rel_l2(&eo);
            if (nonfinite || rel > tu_tol_rel_l2(bf) || !(lse_err <= 2e-3)) {
                tu_fail(c->name, "fused decode: rel-L2 %.3g (tol %.0e), LSE error %.3g, %d non-finite", rel,
                        tu_tol_rel_l2(bf), lse_err, nonfinite);
                bad = 1;
            }
            free(rk); free(rv); free(fq); free(go); free(glse); free(sc);
        }
        if (!bad) tu_pass(c->name);
        free(gk); free(gv); free(gq); free(gqr); free(ek); free(ev);
    }
done:
    tu_dfree(dq); tu_dfree(dqr); tu_dfree(dkn); tu_dfree(dvn); tu_dfree(dk); tu_dfree(dv); tu_dfree(dout);
    tu_dfree(dlse); tu_dfree(dcos); tu_dfree(dsin); tu_dfree(dlk); tu_dfree(dcbi); tu_dfree(dind); tu_dfree(dlast);
    tu_dfree(didx); tu_dfree(dbt); tu_dfree(dds);
    if (dws) tu_dfree(dws);
    free(hds); free(hq_); free(hkn); free(hvn); free(hcos); free(hsin); free(hbt); free(r.pages); free(r.k0); free(r.v0);
}

/* ---- bad input: the status, and the cache untouched --------------------- */
static void test_bad_inputs(cudaStream_t stream)
{
    const int d = 128, hk = 2, cap = 64;
    const size_t kv = (size_t)2 * cap * hk * d;
    uint16_t *h0 = (uint16_t *)malloc(kv * 2), *g = (uint16_t *)malloc(kv * 2);
    fmha_ref_rng rng = fmha_ref_rng_make(5);
    for (size_t e = 0; e < kv; ++e) h0[e] = rnd16(&rng, 1);
    void *dk = tu_dmalloc(kv * 2), *dv = tu_dmalloc(kv * 2), *dq = tu_dmalloc(2 * 8 * d * 2), *dn = tu_dmalloc(2 * 4 * hk * d * 2);
    float *dcs = (float *)tu_dmalloc(4 * 128 * 64);
    int32_t *dlk = (int32_t *)tu_dmalloc(8);
    const int32_t lk[2] = { 40, 60 };
    tu_upload(dk, h0, kv * 2); tu_upload(dv, h0, kv * 2); tu_upload(dlk, lk, 8);
    tu_poison16(dq, 2 * 8 * d, 0x3c00u); tu_poison16(dn, 2 * 4 * hk * d, 0x3c00u);
    fmha_decode_args base;
    memset(&base, 0, sizeof(base));
    base.q_dtype = base.kv_dtype = FMHA_DTYPE_BF16; base.batch = 2; base.nhead_q = 8; base.nhead_k = hk; base.seqlen_q = 1;
    base.max_seqlen_k = 60; base.hdim_q = base.hdim_v = d; base.q = dq; base.o = dq;
    base.stride_q = base.stride_o = 8 * d; base.nhead_stride_q = base.nhead_stride_o = d;
    base.batch_stride_q = base.batch_stride_o = 8 * d;
    base.k_cache = dk; base.v_cache = dv; base.stride_k = base.stride_v = hk * d; base.nhead_stride_k = base.nhead_stride_v = d;
    base.batch_stride_k = base.batch_stride_v = (int64_t)cap * hk * d; base.seqlen_k = dlk; base.cache_seqlen_max = cap;
    base.scale = 0.1f;
    base.k_new = dn; base.v_new = dn; base.seqlen_knew = 4;
    base.stride_knew = base.stride_vnew = hk * d; base.nhead_stride_knew = base.nhead_stride_vnew = d;
    base.batch_stride_knew = base.batch_stride_vnew = 4 * hk * d;
    base.rotary_dim = 64; base.rotary_seqlen = 128; base.rotary_cos = dcs; base.rotary_sin = dcs;
    struct { const char *name; fmha_status want; int what; } cases[] = {
        { "appendkv_bad_rotary_dim_odd", FMHA_ERR_INVALID_ARG, 0 },
        { "appendkv_bad_rotary_dim_24", FMHA_ERR_INVALID_ARG, 1 },
        { "appendkv_bad_rotary_dim_above_hdim", FMHA_ERR_INVALID_ARG, 2 },
        { "appendkv_bad_rotary_table_too_short", FMHA_ERR_INVALID_ARG, 3 },
        { "appendkv_bad_rotary_no_cos", FMHA_ERR_INVALID_ARG, 4 },
        { "appendkv_bad_more_new_rows_than_keys", FMHA_ERR_INVALID_ARG, 5 },
        { "appendkv_bad_cache_too_small", FMHA_ERR_INVALID_ARG, 6 },
        { "appendkv_bad_fp8_queries", FMHA_ERR_UNSUPPORTED, 7 },
        { "appendkv_bad_no_k_new", FMHA_ERR_INVALID_ARG, 8 },
        { "appendkv_bad_negative_seqlen_knew", FMHA_ERR_INVALID_ARG, 9 },
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); ++k) {
        fmha_decode_args a = base;
        fmha_status st;
        if (!tu_selected(cases[k].name)) continue;
        switch (cases[k].what) {
        case 0: a.rotary_dim = 7; break;
        case 1: a.rotary_dim = 24; break;
        case 2: a.rotary_dim = 144; break;
        case 3: a.rotary_seqlen = 59; break;
        case 4: a.rotary_cos = NULL; break;
        case 5: a.seqlen_knew = 61; break;
        case 6: a.cache_seqlen_max = 59; break;
        case 7: a.kv_dtype = a.q_dtype = FMHA_DTYPE_FP8; a.rotary_dim = 0; break;
        case 8: a.k_new = NULL; break;
        case 9: a.seqlen_knew = -1; break;
        }
        st = fmha_appendkv(&a, stream);
        TU_CUDA(cudaStreamSynchronize(stream));
        tu_download(g, dk, kv * 2);
        if (st != cases[k].want) tu_fail(cases[k].name, "status %s (want %s): %s", fmha_status_str(st), fmha_status_str(cases[k].want), fmha_last_error());
        else if (memcmp(g, h0, kv * 2) != 0) tu_fail(cases[k].name, "the cache changed");
        else tu_pass(cases[k].name);
    }
    if (tu_selected("appendkv_valid_base_writes")) {   /* the base call itself is valid and writes */
        fmha_status st = fmha_appendkv(&base, stream);
        TU_CUDA(cudaStreamSynchronize(stream));
        tu_download(g, dk, kv * 2);
        if (st != FMHA_OK) tu_fail("appendkv_valid_base_writes", "status %s: %s", fmha_status_str(st), fmha_last_error());
        else if (memcmp(g, h0, kv * 2) == 0) tu_fail("appendkv_valid_base_writes", "nothing written");
        else tu_pass("appendkv_valid_base_writes");
    }
    tu_dfree(dk); tu_dfree(dv); tu_dfree(dq); tu_dfree(dn); tu_dfree(dcs); tu_dfree(dlk);
    free(h0); free(g);
}

/* ---- float -> e4m3 on the device vs the reference ------------------------
 * Every code's value and the midpoints between neighbours (ties to even)
 * with a float step either side, the subnormal range, past 448, infinities,
 * NaN and random floats of every magnitude, both signs. A build from sm_80
 * PTX runs the software conversion, an sm_89+ build the hardware one. */
static __global__ void akv_e4m3_kernel(const float *x, uint8_t *y, int n)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] = (uint8_t)fmhai_f32_to_e4m3(x[i]);
}

static void test_e4m3_convert(cudaStream_t stream)
{
    const char *name = "e4m3_convert_matches_reference";
    enum { N = 8192 };
    float *hx = (float *)malloc(sizeof(float) * N);
    uint8_t *hy = (uint8_t *)malloc(N);
    int n = 0, bad = 0, first = -1;
    fmha_ref_rng g = fmha_ref_rng_make(11);
    if (!tu_selected(name)) { free(hx); free(hy); return; }
    for (int c = 0; c < 126; ++c) {   /* codes 0..0x7D and the midpoints to the next */
        const float v = fmha_ref_e4m3_to_f32((uint8_t)c), w = fmha_ref_e4m3_to_f32((uint8_t)(c + 1));
        const float m = 0.5f * (v + w);
        const float set[5] = { v, m, nextafterf(m, 0.f), nextafterf(m, 1e9f), nextafterf(v, 1e9f) };
        for (int k = 0; k < 5; ++k) { hx[n++] = set[k]; hx[n++] = -set[k]; }
    }
    {
        const float sp[8] = { 448.f, 449.f, 464.f, 480.f, 1e30f, INFINITY, -INFINITY, NAN };
        for (int k = 0; k < 8; ++k) hx[n++] = sp[k];
    }
    while (n < N) {
        const float mag = ldexpf(fmha_ref_rng_uniform(&g, 1.f, 2.f), fmha_ref_rng_int(&g, -14, 10));
        hx[n++] = fmha_ref_rng_uniform(&g, -1.f, 1.f) < 0.f ? -mag : mag;
    }
    float *dx = (float *)tu_dmalloc(sizeof(float) * N);
    uint8_t *dy = (uint8_t *)tu_dmalloc(N);
    tu_upload(dx, hx, sizeof(float) * N);
    akv_e4m3_kernel<<<N / 256, 256, 0, stream>>>(dx, dy, N);
    TU_CUDA(cudaGetLastError());
    TU_CUDA(cudaStreamSynchronize(stream));
    tu_download(hy, dy, N);
    for (int i = 0; i < N; ++i) {
        const uint8_t want = fmha_ref_f32_to_e4m3(hx[i]);
        const int nan_ok = (want & 0x7f) == 0x7f && (hy[i] & 0x7f) == 0x7f;   /* NaN: either sign */
        if (hy[i] != want && !nan_ok) { if (first < 0) first = i; bad++; }
    }
    if (bad) tu_fail(name, "%d of %d differ, first %.9g -> 0x%02x (want 0x%02x)", bad, N, hx[first], hy[first],
                     fmha_ref_f32_to_e4m3(hx[first]));
    else tu_pass(name);
    tu_dfree(dx); tu_dfree(dy);
    free(hx); free(hy);
}

static const char usage_extra[] = "  --quick   the problems marked quick (for compute-sanitizer)\n";
static const char *cfg_name_at(int i) { return g_cfgs[i].name; }
static int cfg_quick_at(int i) { return g_cfgs[i].quick; }
static double cfg_work_at(int i) { return (double)g_cfgs[i].b * g_cfgs[i].hq * g_cfgs[i].d * 2048; }

static void checks(cudaStream_t stream, uint64_t seed)
{
    (void)seed;
    test_e4m3_convert(stream);
    test_bad_inputs(stream);
}

static void run_at(int i, cudaStream_t stream, uint64_t seed) { run_config(&g_cfgs[i], stream, seed); }

int main(int argc, char **argv)
{
    tu_suite s = { "test_appendkv", usage_extra, { 0, cfg_name_at, cfg_quick_at, cfg_work_at }, checks, run_at, NULL };
    build_configs();
    s.cfgs.n = g_ncfg;
    return tu_main(argc, argv, &s);
}
