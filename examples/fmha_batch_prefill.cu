/*
 * fmha_batch_prefill.cu - command-line example of batch prefill over a paged KV
 * cache, in the style of examples/fmha_fwd.cu: describe one problem with -key=value
 * options, build a paged K/V pool and its page table, run it with the library's
 * default prefill kernel set, print the kernel chosen, the median time, TFLOPS and
 * the GB/s of KV read, and check the result against the CPU reference of
 * tests/ref/fmha_ref.h fed with K/V gathered from the pages.
 *
 *   fmha_batch_prefill -b=4 -h=32 -h_k=8 -s=512 -s_k=4096 -d=128 -prec=bf16 -page=16
 *   fmha_batch_prefill -b=3 -s=17,300,0 -s_k=1000,300,5 -page=1 -table=vllm -mask=b:128,0
 *   fmha_batch_prefill -b=1 -s=256 -s_k=8192 -page=1024 -pool_gb=4.5    (pages past 4.5 GiB)
 *   fmha_batch_prefill -b=4 -s=512 -s_k=4096 -kv_prec=fp8 -kv_scale=page -q_prec=fp8
 *   fmha_batch_prefill --list-kernels
 *
 * Options (defaults in brackets):
 *   -b [2] batch     -h [8] query heads     -h_k [=h] KV heads (GQA/MQA)
 *   -s [512] new tokens (queries) per sequence: a comma list, one entry per batch
 *      entry, or one value for all      -s_k [1024] total KV length per sequence
 *      (prefix + new tokens; >= s for causal prefill), same form
 *   -d [128] head dim (multiple of 8, <= 256; fp8 KV: of 16)
 *   -kv_prec [bf16] K/V cache precision: fp16 | bf16 | fp8 (e4m3; LINEAR pages;
 *      the output is bf16)     -prec: the same for fp16 | bf16 (older spelling)
 *   -q_prec [= kv_prec, bf16 for fp8 KV] bf16 | fp8 (fp8 queries need fp8 KV; they
 *      are quantised with q_descale = 1/448)
 *   -kv_scale [none] fp8 KV descales: none (stored values are the real ones) |
 *      tensor (k_descale = v_descale = 1/448) | page (one K and one V descale per
 *      page and KV head, amax/448 of that page's values)
 *   -page [16] page size, a power of two 1..2048 (VECTORIZED: a multiple of 8)
 *   -table [sglang] sglang (kv_indptr / kv_page_indices / kv_last_page_lens) |
 *      vllm (block_table rows padded with -1 past each sequence's pages, seqlen_k)
 *   -layout [linear] linear | vectorized (vLLM v0 / CK: K [pages, h_k, d/8, page, 8],
 *      V [pages, h_k, page/8, d, 8])
 *   -kv_order [nhd] LINEAR pool order: nhd [pages, page, h_k, d] | hnd [pages, h_k, page, d]
 *   -mask [b] 0 none; t causal top-left; b causal bottom-right (prefill with prefix);
 *      t:l,r / b:l,r sliding window (left, right), -1 unbounded
 *   -lse [0] also write the log-sum-exp [h, total_q]     -logits_soft_cap [0] cap c > 0
 *   -scale [1/sqrt(d)] softmax scale
 *   -pool_gb [0] put the pages past this offset (GiB) in a pool at least this big,
 *      e.g. 4.5: every page starts past 4.5 GiB (64-bit page offsets); the rest of
 *      the pool holds NaN
 *   -shuffle [1] page numbers permuted (0: in order)
 *   -v [1] validate against the CPU reference     -warmup [5] -repeat [20]
 *   -seed [11939] input seed     -json [0] print one JSON object instead of text
 *   --list-kernels  print the kernel set as JSON (fmha_set_json) and exit
 *
 * Inputs are uniform in [-1, 1]. For fp8 they are quantised the way a cache writer
 * would: stored = e4m3(real / descale), with the descale of -kv_scale; the reference
 * gets the dequantised values (stored * descale), so validation measures the kernel,
 * not the quantisation.
 *
 * Time is the median of `repeat` launches, each bracketed by its own pair of device
 * events. FLOPs: 4 * h * d * (query, key) pairs the mask lets through, counted
 * exactly per sequence. GB/s: bytes of K and V the sequences reference (s_k * h_k *
 * d * 2 bytes each, 1 for fp8, once per sequence) per second. Unreferenced pool slots
 * (the tail of each last page, pool space below -pool_gb) hold NaN (0xFF: NaN in
 * fp16, bf16 and e4m3), and so do the per-page descales of unreferenced pages, so a
 * read of them shows.
 * Validation checks every output element for NaN and compares rows with the
 * reference (rel-L2 fp16 2e-3 / bf16 1e-2 (fp8 KV: bf16 output), LSE 2e-3 absolute,
 * 5e-3 with a soft cap);
 * large problems compare an evenly spaced subset of rows, which the output says.
 * Exit status: 0 when valid (or -v=0), 1 when invalid, 2 on bad options, an
 * unsupported problem or no GPU.
 *
 * Build: nvcc -x cu -std=c++17 -O3 -gencode=arch=compute_80,code=sm_80 \
 *             -gencode=arch=compute_90a,code=sm_90a -Iinclude examples/fmha_batch_prefill.cu \
 *             -o build/examples/fmha_batch_prefill
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"
#define EX_PROG "fmha_batch_prefill"
#include "example_util.h"
#include "../tests/ref/fmha_ref.h"

/* The library's prefill rows; FMHA_EXAMPLE_ONE_ROW (the test build's compile
 * check): one row, bf16 hdim 128 with a mask, every page size. */
#if defined(FMHA_EXAMPLE_ONE_ROW)
#  define FMHA_PREFILL_CLI_SET(X) \
    X(PREFILL, BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#else
#  define FMHA_PREFILL_CLI_SET(X) FMHA_DEFAULT_PREFILL_SET(X)
#endif
DECL_FMHA_KERNEL_SET(fmha_prefill, FMHA_PREFILL_CLI_SET)

#define MAX_BATCH 4096
/* Rows x keys x d the reference may spend per validation before sampling rows. */
#define REF_BUDGET 4e8
#define FP8_MAX 448.0f                  /* largest e4m3 (OCP e4m3fn) value */

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "fmha_batch_prefill: out of host memory (%zu bytes)\n", n); exit(2); }
    return p;
}

/* ============================================================================
 * Options
 * ========================================================================== */
typedef struct options {
    int b, h, h_k, d, page, lse, v, warmup, repeat, json, shuffle, vllm, vec, hnd;
    unsigned long long seed;
    fmha_dtype kv_dtype, q_dtype;
    int q_set;                   /* -q_prec given */
    fmha_kv_scale kv_scale;
    float scale, cap;
    double pool_gb;
    fmha_mask_type mask;
    int wl, wr;
    const char *mask_str, *s_str, *s_k_str;
    int list_kernels;
} options;

static void usage(void)
{
    fprintf(stderr,
            "usage: fmha_batch_prefill [-b=2] [-h=8] [-h_k=H] [-s=512|list] [-s_k=1024|list] [-d=128]\n"
            "                          [-kv_prec=bf16|fp16|fp8] [-q_prec=bf16|fp8] [-kv_scale=none|tensor|page]\n"
            "                          [-page=16] [-table=sglang|vllm]\n"
            "                          [-layout=linear|vectorized] [-kv_order=nhd|hnd]\n"
            "                          [-mask=0|t|b|t:l,r|b:l,r] [-lse=0|1] [-logits_soft_cap=F] [-scale=F]\n"
            "                          [-pool_gb=F] [-shuffle=0|1] [-v=0|1] [-warmup=5] [-repeat=20]\n"
            "                          [-seed=N] [-json=0|1] [--list-kernels]\n"
            "(the comment at the top of examples/fmha_batch_prefill.cu describes each option)\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    int i;
    ex_int_opt ints[12];
    memset(o, 0, sizeof(*o));
    ints[0].name = "b";        ints[0].field = &o->b;
    ints[1].name = "h";        ints[1].field = &o->h;
    ints[2].name = "h_k";      ints[2].field = &o->h_k;
    ints[3].name = "d";        ints[3].field = &o->d;
    ints[4].name = "page";     ints[4].field = &o->page;
    ints[5].name = "lse";      ints[5].field = &o->lse;
    ints[6].name = "v";        ints[6].field = &o->v;
    ints[7].name = "warmup";   ints[7].field = &o->warmup;
    ints[8].name = "repeat";   ints[8].field = &o->repeat;
    ints[9].name = "json";     ints[9].field = &o->json;
    ints[10].name = "shuffle"; ints[10].field = &o->shuffle;
    ints[11].name = "page_size"; ints[11].field = &o->page;
    o->b = 2; o->h = 8; o->h_k = -1; o->d = 128; o->page = 16; o->v = 1; o->shuffle = 1;
    o->warmup = 5; o->repeat = 20; o->seed = 11939;
    o->kv_dtype = o->q_dtype = FMHA_DTYPE_BF16; o->kv_scale = FMHA_KV_SCALE_NONE;
    o->mask = FMHA_MASK_BOTTOM_RIGHT; o->wl = -1; o->wr = 0; o->mask_str = "b";
    o->s_str = "512"; o->s_k_str = "1024";
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *eq;
        char key[64];
        if (!strcmp(a, "--list-kernels") || !strcmp(a, "-list-kernels")) { o->list_kernels = 1; continue; }
        if (!strcmp(a, "-help") || !strcmp(a, "--help") || !strcmp(a, "-?")) { usage(); exit(0); }
        eq = ex_split_opt(a, key, sizeof(key));
        if (!eq) { fprintf(stderr, "fmha_batch_prefill: expected -key=value, got %s\n", argv[i]); return -1; }
        if (ex_set_int_opt(ints, (int)(sizeof(ints) / sizeof(ints[0])), key, eq)) continue;
        if (!strcmp(key, "seed")) o->seed = strtoull(eq, NULL, 10);
        else if (!strcmp(key, "s")) o->s_str = eq;
        else if (!strcmp(key, "s_k")) o->s_k_str = eq;
        else if (!strcmp(key, "scale")) o->scale = (float)atof(eq);
        else if (!strcmp(key, "logits_soft_cap")) o->cap = (float)atof(eq);
        else if (!strcmp(key, "pool_gb")) o->pool_gb = atof(eq);
        else if (!strcmp(key, "mask")) {
            o->mask_str = eq;
            if (ex_parse_mask(eq, &o->mask, &o->wl, &o->wr) != 0) { fprintf(stderr, "fmha_batch_prefill: bad -mask=%s\n", eq); return -1; }
        } else if (!strcmp(key, "prec") || !strcmp(key, "kv_prec")) {
            if (!strcmp(eq, "fp16")) o->kv_dtype = FMHA_DTYPE_FP16;
            else if (!strcmp(eq, "bf16")) o->kv_dtype = FMHA_DTYPE_BF16;
            else if (!strcmp(eq, "fp8") && !strcmp(key, "kv_prec")) o->kv_dtype = FMHA_DTYPE_FP8;
            else { fprintf(stderr, "fmha_batch_prefill: -%s must be fp16 or bf16%s\n", key, key[0] == 'k' ? " or fp8" : ""); return -1; }
        } else if (!strcmp(key, "q_prec")) {
            o->q_set = 1;
            if (!strcmp(eq, "bf16")) o->q_dtype = FMHA_DTYPE_BF16;
            else if (!strcmp(eq, "fp8")) o->q_dtype = FMHA_DTYPE_FP8;
            else { fprintf(stderr, "fmha_batch_prefill: -q_prec must be bf16 or fp8\n"); return -1; }
        } else if (!strcmp(key, "kv_scale")) {
            if (!strcmp(eq, "none")) o->kv_scale = FMHA_KV_SCALE_NONE;
            else if (!strcmp(eq, "tensor")) o->kv_scale = FMHA_KV_SCALE_PER_TENSOR;
            else if (!strcmp(eq, "page")) o->kv_scale = FMHA_KV_SCALE_PER_PAGE;
            else { fprintf(stderr, "fmha_batch_prefill: -kv_scale must be none, tensor or page\n"); return -1; }
        } else if (!strcmp(key, "table")) {
            if (!strcmp(eq, "sglang")) o->vllm = 0;
            else if (!strcmp(eq, "vllm")) o->vllm = 1;
            else { fprintf(stderr, "fmha_batch_prefill: -table must be sglang or vllm\n"); return -1; }
        } else if (!strcmp(key, "layout")) {
            if (!strcmp(eq, "linear")) o->vec = 0;
            else if (!strcmp(eq, "vectorized")) o->vec = 1;
            else { fprintf(stderr, "fmha_batch_prefill: -layout must be linear or vectorized\n"); return -1; }
        } else if (!strcmp(key, "kv_order")) {
            if (!strcmp(eq, "nhd")) o->hnd = 0;
            else if (!strcmp(eq, "hnd")) o->hnd = 1;
            else { fprintf(stderr, "fmha_batch_prefill: -kv_order must be nhd or hnd\n"); return -1; }
        } else {
            fprintf(stderr, "fmha_batch_prefill: unknown option -%s\n", key);
            return -1;
        }
    }
    if (o->h_k <= 0) o->h_k = o->h;
    if (o->scale <= 0.0f) o->scale = 1.0f / sqrtf((float)(o->d > 0 ? o->d : 1));
    if (o->repeat < 1) o->repeat = 1;
    if (o->warmup < 0) o->warmup = 0;
    if (o->b < 1 || o->b > MAX_BATCH) { fprintf(stderr, "fmha_batch_prefill: -b must be in 1..%d\n", MAX_BATCH); return -1; }
    if (o->h < 1 || o->h_k < 1 || o->d < 8 || o->d > 256) { fprintf(stderr, "fmha_batch_prefill: bad -h/-h_k/-d\n"); return -1; }
    if (o->page < 1 || o->page > 2048 || (o->page & (o->page - 1))) {
        fprintf(stderr, "fmha_batch_prefill: -page must be a power of two in 1..2048\n");
        return -1;
    }
    if (o->pool_gb < 0 || o->pool_gb > 1024) { fprintf(stderr, "fmha_batch_prefill: bad -pool_gb\n"); return -1; }
    /* queries: the KV type for fp16/bf16 KV; bf16 (default) or fp8 for fp8 KV */
    if (!o->q_set) o->q_dtype = o->kv_dtype == FMHA_DTYPE_FP8 ? FMHA_DTYPE_BF16 : o->kv_dtype;
    if (o->kv_dtype != FMHA_DTYPE_FP8 && o->q_dtype != o->kv_dtype) {
        fprintf(stderr, "fmha_batch_prefill: -q_prec=%s needs -kv_prec=%s (fp8 queries need fp8 KV)\n",
                o->q_dtype == FMHA_DTYPE_FP8 ? "fp8" : "bf16", o->q_dtype == FMHA_DTYPE_FP8 ? "fp8" : "bf16");
        return -1;
    }
    if (o->kv_dtype != FMHA_DTYPE_FP8 && o->kv_scale != FMHA_KV_SCALE_NONE) {
        fprintf(stderr, "fmha_batch_prefill: -kv_scale=tensor|page needs -kv_prec=fp8\n");
        return -1;
    }
    if (o->kv_dtype == FMHA_DTYPE_FP8 && o->vec) {
        fprintf(stderr, "fmha_batch_prefill: fp8 KV pages are LINEAR (-layout=linear)\n");
        return -1;
    }
    return 0;
}

static const char *prec_str(fmha_dtype t)
{
    return t == FMHA_DTYPE_FP8 ? "fp8" : t == FMHA_DTYPE_BF16 ? "bf16" : "fp16";
}

static const char *const kv_scale_str[3] = { "none", "tensor", "page" };

/* ============================================================================
 * Elements: 16-bit (es 2) or e4m3 codes (es 1) in byte buffers
 * ========================================================================== */
static void put_elem(unsigned char *buf, int es, size_t i, unsigned v)
{
    if (es == 1) buf[i] = (unsigned char)v;
    else ((uint16_t *)buf)[i] = (uint16_t)v;
}

/* The value the kernel must see: 16-bit bits decoded, or an e4m3 code times its
 * descale. */
static float elem_value(const unsigned char *buf, fmha_dtype dt, size_t i, float descale)
{
    if (dt == FMHA_DTYPE_FP8) return fmha_ref_e4m3_to_f32(buf[i]) * descale;
    return fmha_ref_bits16_to_f32(((const uint16_t *)buf)[i], dt == FMHA_DTYPE_BF16);
}

/* Stored form of a real value: 16-bit bits, or e4m3(real / descale). */
static unsigned quantise(float real, fmha_dtype dt, float descale)
{
    if (dt == FMHA_DTYPE_FP8) return fmha_ref_f32_to_e4m3(real / descale);
    return fmha_ref_f32_to_bits16(real, dt == FMHA_DTYPE_BF16);
}

/* ============================================================================
 * The paged pool
 * ========================================================================== */
typedef struct pool_layout {
    int vec, page, hk, d;
    int64_t ps, ts, hs;          /* page, token (LINEAR; VECTORIZED passes 8), head strides */
} pool_layout;

/* Element offset of (token t, KV head h, dim x) inside a page of K (which 0) or V (1). */
static int64_t kv_off(const pool_layout *L, int which, int t, int h, int x)
{
    if (L->vec) {
        if (!which) return (int64_t)h * L->hs + (int64_t)(x >> 3) * L->page * 8 + (int64_t)t * 8 + (x & 7);
        return (int64_t)h * L->hs + (int64_t)(t >> 3) * L->d * 8 + (int64_t)x * 8 + (t & 7);
    }
    return (int64_t)t * L->ts + (int64_t)h * L->hs + x;
}

/* ============================================================================
 * Main
 * ========================================================================== */
int main(int argc, char **argv)
{
    options o;
    static int sq[MAX_BATCH], sk[MAX_BATCH], np[MAX_BATCH];
    static int32_t ssq[MAX_BATCH + 1], ssk[MAX_BATCH + 1], pstart[MAX_BATCH + 1], last[MAX_BATCH];
    int ndev = 0, bi, i, hh, x, maxq = 0, maxnp = 0, is_bf16, n_used, offset_pages, n_total, es, esq;
    int64_t tq = 0, tk = 0, bt_stride;
    size_t nq, nlse, region_elems, idx;
    float q_descale = 1.0f, kv_descale = 1.0f, *hkds = NULL, *hvds = NULL, *tmp;
    float *dds = NULL;           /* fp8: [0] q_descale, [1] k, [2] v; or the per-page arrays */
    float *dkds = NULL, *dvds = NULL;
    pool_layout L;
    fmha_batch_prefill_args a;
    fmha_fwd_plan plan;
    fmha_ref_fwd p;
    fmha_status st;
    fmha_ref_rng rng;
    int32_t *perm, *indices, *bt;
    uint16_t *ho;
    unsigned char *hq, *kreg, *vreg;   /* as stored: 16-bit elements or e4m3 codes */
    float *fq, *fk = NULL, *fv = NULL, *hlse;
    void *dq, *dout, *dkpool, *dvpool;
    float *dlse;
    int32_t *dssq, *dindptr, *dindices, *dlast, *dbt, *dseqk;
    float *times, ms;
    double pairs, flops, kv_bytes, tflops, gbs, rel = 0.0, lse_err = 0.0, pool_bytes;
    long long rows_total = 0, rows_checked = 0, bad_elems = 0, bad_rows = 0;
    int valid = 1;
    const char *vstr = "n/a";
    char layout_str[32];
    cudaStream_t stream;
    cudaEvent_t *ev;

    if (parse_args(argc, argv, &o) != 0) { usage(); return 2; }
    if (o.list_kernels) {
        size_t len = fmha_set_json(&fmha_prefill, NULL, 0);
        char *buf = (char *)xmalloc(len + 1);
        fmha_set_json(&fmha_prefill, buf, len + 1);
        fputs(buf, stdout);
        free(buf);
        return 0;
    }
    if (ex_parse_lengths(o.s_str, o.b, sq, 1) != 0 || ex_parse_lengths(o.s_k_str, o.b, sk, 1) != 0) {
        fprintf(stderr, "fmha_batch_prefill: bad -s/-s_k (%s, %s): one length or %d\n", o.s_str, o.s_k_str, o.b);
        return 2;
    }
    if (o.vec && (o.page % 8 != 0 || o.d % 8 != 0)) {
        fprintf(stderr, "fmha_batch_prefill: -layout=vectorized needs -page and -d multiples of 8\n");
        return 2;
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "fmha_batch_prefill: no GPU\n");
        return 2;
    }
    is_bf16 = o.q_dtype != FMHA_DTYPE_FP16;      /* the output: bf16 for fp8 KV */
    es = o.kv_dtype == FMHA_DTYPE_FP8 ? 1 : 2;
    esq = o.q_dtype == FMHA_DTYPE_FP8 ? 1 : 2;
    /* per-tensor descales map inputs in [-1, 1] onto the whole e4m3 range */
    if (o.q_dtype == FMHA_DTYPE_FP8) q_descale = 1.0f / FP8_MAX;
    if (o.kv_scale == FMHA_KV_SCALE_PER_TENSOR) kv_descale = 1.0f / FP8_MAX;
    snprintf(layout_str, sizeof(layout_str), "%s", o.vec ? "vectorized" : o.hnd ? "linear/hnd" : "linear/nhd");

    /* ---- lengths, pages ---------------------------------------------------------- */
    pstart[0] = 0;
    for (bi = 0; bi < o.b; bi++) {
        ssq[bi] = (int32_t)tq; ssk[bi] = (int32_t)tk;
        tq += sq[bi]; tk += sk[bi];
        if (sq[bi] > maxq) maxq = sq[bi];
        np[bi] = (sk[bi] + o.page - 1) / o.page;
        if (np[bi] > maxnp) maxnp = np[bi];
        last[bi] = np[bi] > 0 ? sk[bi] - (np[bi] - 1) * o.page : 0;
        pstart[bi + 1] = pstart[bi] + np[bi];
    }
    ssq[o.b] = (int32_t)tq; ssk[o.b] = (int32_t)tk;
    if (tq > INT32_MAX || tk > INT32_MAX || (int64_t)pstart[o.b] > INT32_MAX) {
        fprintf(stderr, "fmha_batch_prefill: total length exceeds int32\n");
        return 2;
    }
    n_used = pstart[o.b];

    L.vec = o.vec; L.page = o.page; L.hk = o.h_k; L.d = o.d;
    if (o.vec) { L.hs = (int64_t)o.page * o.d; L.ts = 8; }
    else if (o.hnd) { L.hs = (int64_t)o.page * o.d; L.ts = o.d; }
    else { L.ts = (int64_t)o.h_k * o.d; L.hs = o.d; }
    L.ps = (int64_t)o.page * o.h_k * o.d;
    /* used pages occupy [offset_pages, offset_pages + n_used): past -pool_gb */
    offset_pages = (int)ceil(o.pool_gb * 1073741824.0 / ((double)L.ps * es));
    if ((double)offset_pages + n_used > (double)INT32_MAX) { fprintf(stderr, "fmha_batch_prefill: pool too large\n"); return 2; }
    n_total = offset_pages + n_used;
    pool_bytes = (double)n_total * L.ps * es;
    region_elems = (size_t)n_used * (size_t)L.ps;

    /* page numbers: in order or shuffled within the used region */
    perm = (int32_t *)xmalloc(sizeof(int32_t) * ((size_t)n_used + 1));
    rng = fmha_ref_rng_make(o.seed);
    for (i = 0; i < n_used; i++) perm[i] = i;
    if (o.shuffle)
        for (i = n_used - 1; i > 0; i--) {
            int j = (int)(fmha_ref_rng_next(&rng) % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[j]; perm[j] = t;
        }
    indices = (int32_t *)xmalloc(sizeof(int32_t) * ((size_t)n_used + 1));
    for (i = 0; i < n_used; i++) indices[i] = offset_pages + perm[i];
    bt_stride = maxnp + 1;
    bt = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)o.b * (size_t)bt_stride);
    for (bi = 0; bi < o.b; bi++)
        for (i = 0; i < bt_stride; i++)
            bt[(size_t)bi * bt_stride + i] = i < np[bi] ? indices[pstart[bi] + i] : -1;

    /* ---- inputs: Q [tq, h, d]; K/V page contents, NaN in unused slots ----------- */
    nq = (size_t)(tq > 0 ? tq : 1) * o.h * o.d;
    nlse = (size_t)o.h * (size_t)(tq > 0 ? tq : 1);
    hq = (unsigned char *)xmalloc(nq * esq); ho = (uint16_t *)xmalloc(nq * 2);
    fq = (float *)xmalloc(nq * 4); hlse = (float *)xmalloc(nlse * 4);
    kreg = (unsigned char *)xmalloc(region_elems * es + 2); vreg = (unsigned char *)xmalloc(region_elems * es + 2);
    for (idx = 0; idx < nq; idx++) {
        put_elem(hq, esq, idx, quantise(fmha_ref_rng_input(&rng, 1.0f), o.q_dtype, q_descale));
        fq[idx] = elem_value(hq, o.q_dtype, idx, q_descale);
    }
    memset(kreg, 0xFF, region_elems * es);     /* NaN in fp16, bf16 and e4m3 */
    memset(vreg, 0xFF, region_elems * es);
    if (o.kv_scale == FMHA_KV_SCALE_PER_PAGE) {   /* [region pages][h_k] */
        hkds = (float *)xmalloc(sizeof(float) * (size_t)n_used * o.h_k + 4);
        hvds = (float *)xmalloc(sizeof(float) * (size_t)n_used * o.h_k + 4);
    }
    /* page by page and head by head, so that a per-page descale is the amax of
     * exactly the values it scales */
    tmp = (float *)xmalloc(sizeof(float) * (size_t)o.page * o.d);
    for (bi = 0; bi < o.b; bi++)
        for (i = 0; i < np[bi]; i++) {
            const int slot = perm[pstart[bi] + i], ntok = i == np[bi] - 1 ? last[bi] : o.page;
            for (hh = 0; hh < o.h_k; hh++) {
                int which, t;
                for (which = 0; which < 2; which++) {
                    unsigned char *reg = which ? vreg : kreg;
                    float amax = 0.0f, ds = kv_descale;
                    for (idx = 0; idx < (size_t)ntok * o.d; idx++) {
                        tmp[idx] = fmha_ref_rng_input(&rng, 1.0f);
                        if (fabsf(tmp[idx]) > amax) amax = fabsf(tmp[idx]);
                    }
                    if (o.kv_scale == FMHA_KV_SCALE_PER_PAGE) {
                        ds = amax > 0.0f ? amax / FP8_MAX : 1.0f;
                        (which ? hvds : hkds)[(size_t)slot * o.h_k + hh] = ds;
                    }
                    for (t = 0; t < ntok; t++)
                        for (x = 0; x < o.d; x++)
                            put_elem(reg, es, (size_t)slot * L.ps + kv_off(&L, which, t, hh, x),
                                     quantise(tmp[(size_t)t * o.d + x], o.kv_dtype, ds));
                }
            }
        }
    free(tmp);

    CHECK_CUDA(cudaMalloc(&dq, nq * esq));
    CHECK_CUDA(cudaMalloc(&dout, nq * 2));
    CHECK_CUDA(cudaMalloc((void **)&dlse, nlse * 4));
    {
        const size_t pool_alloc = (size_t)n_total * (size_t)L.ps * es + 256;
        cudaError_t e1 = cudaMalloc(&dkpool, pool_alloc), e2 = e1 == cudaSuccess ? cudaMalloc(&dvpool, pool_alloc) : e1;
        if (e1 != cudaSuccess || e2 != cudaSuccess) {
            fprintf(stderr, "fmha_batch_prefill: cannot allocate two pools of %.2f GiB: %s\n",
                    pool_alloc / 1073741824.0, cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
            return 2;
        }
        CHECK_CUDA(cudaMemset(dkpool, 0xFF, pool_alloc));   /* NaN: a stray read shows */
        CHECK_CUDA(cudaMemset(dvpool, 0xFF, pool_alloc));
    }
    CHECK_CUDA(cudaMemcpy((unsigned char *)dkpool + (size_t)offset_pages * L.ps * es, kreg, region_elems * es,
                          cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy((unsigned char *)dvpool + (size_t)offset_pages * L.ps * es, vreg, region_elems * es,
                          cudaMemcpyHostToDevice));
    if (o.kv_scale == FMHA_KV_SCALE_PER_PAGE) {
        /* [num_total_pages][h_k], NaN for the pages no sequence uses */
        const size_t n_ds = (size_t)n_total * o.h_k;
        CHECK_CUDA(cudaMalloc((void **)&dkds, n_ds * 4));
        CHECK_CUDA(cudaMalloc((void **)&dvds, n_ds * 4));
        CHECK_CUDA(cudaMemset(dkds, 0xFF, n_ds * 4));
        CHECK_CUDA(cudaMemset(dvds, 0xFF, n_ds * 4));
        CHECK_CUDA(cudaMemcpy(dkds + (size_t)offset_pages * o.h_k, hkds, (size_t)n_used * o.h_k * 4, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(dvds + (size_t)offset_pages * o.h_k, hvds, (size_t)n_used * o.h_k * 4, cudaMemcpyHostToDevice));
    }
    {
        const float ds[3] = { q_descale, kv_descale, kv_descale };
        CHECK_CUDA(cudaMalloc((void **)&dds, sizeof(ds)));
        CHECK_CUDA(cudaMemcpy(dds, ds, sizeof(ds), cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaMalloc((void **)&dssq, sizeof(int32_t) * (size_t)(o.b + 1)));
    CHECK_CUDA(cudaMalloc((void **)&dindptr, sizeof(int32_t) * (size_t)(o.b + 1)));
    CHECK_CUDA(cudaMalloc((void **)&dindices, sizeof(int32_t) * ((size_t)n_used + 1)));
    CHECK_CUDA(cudaMalloc((void **)&dlast, sizeof(int32_t) * (size_t)o.b));
    CHECK_CUDA(cudaMalloc((void **)&dbt, sizeof(int32_t) * (size_t)o.b * (size_t)bt_stride));
    CHECK_CUDA(cudaMalloc((void **)&dseqk, sizeof(int32_t) * (size_t)o.b));
    CHECK_CUDA(cudaMemcpy(dq, hq, nq * esq, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dssq, ssq, sizeof(int32_t) * (size_t)(o.b + 1), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dindptr, pstart, sizeof(int32_t) * (size_t)(o.b + 1), cudaMemcpyHostToDevice));
    if (n_used) CHECK_CUDA(cudaMemcpy(dindices, indices, sizeof(int32_t) * (size_t)n_used, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dlast, last, sizeof(int32_t) * (size_t)o.b, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dbt, bt, sizeof(int32_t) * (size_t)o.b * (size_t)bt_stride, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dseqk, sk, sizeof(int32_t) * (size_t)o.b, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dout, 0xff, nq * 2));        /* NaN: unwritten output shows */
    CHECK_CUDA(cudaMemset(dlse, 0xff, nlse * 4));
    CHECK_CUDA(cudaDeviceSynchronize());

    /* ---- arguments ------------------------------------------------------------- */
    memset(&a, 0, sizeof(a));
    a.q_dtype = o.q_dtype;
    a.kv_dtype = o.kv_dtype;
    a.batch = o.b; a.nhead_q = o.h; a.nhead_k = o.h_k; a.max_seqlen_q = maxq;
    a.hdim_q = a.hdim_v = o.d;
    a.q = dq; a.o = dout; a.lse = o.lse ? dlse : NULL; a.seqstart_q = dssq;
    a.stride_q = a.stride_o = (int64_t)o.h * o.d;
    a.nhead_stride_q = a.nhead_stride_o = o.d;
    a.nhead_stride_lse = tq > 0 ? tq : 1;
    a.k_pool = dkpool; a.v_pool = dvpool;
    a.num_total_pages = n_total;
    a.page_size = o.page;
    a.kv_layout = o.vec ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
    a.page_stride_k = a.page_stride_v = L.ps;
    a.token_stride_k = a.token_stride_v = L.ts;
    a.nhead_stride_k = a.nhead_stride_v = L.hs;
    if (o.vllm) {
        a.page_table = FMHA_PAGE_TABLE_VLLM_2D;
        a.block_table = dbt; a.seqlen_k = dseqk; a.block_table_stride = bt_stride;
    } else {
        a.page_table = FMHA_PAGE_TABLE_SGLANG_1D;
        a.kv_indptr = dindptr; a.kv_page_indices = dindices; a.kv_last_page_lens = dlast;
    }
    a.kv_scale = o.kv_scale;
    if (o.kv_scale == FMHA_KV_SCALE_PER_TENSOR) {
        a.k_descale = dds + 1; a.v_descale = dds + 2;
    } else if (o.kv_scale == FMHA_KV_SCALE_PER_PAGE) {
        a.k_page_descale = dkds; a.v_page_descale = dvds;
        a.descale_page_stride = o.h_k; a.descale_nhead_stride = 1;
    }
    if (o.q_dtype == FMHA_DTYPE_FP8) a.q_descale = dds;
    a.scale = o.scale;
    a.logits_soft_cap = o.cap;
    a.mask_type = o.mask; a.window_left = o.wl; a.window_right = o.wr;

    /* ---- "supported?", one checked launch, warm-up, timed launches -------------- */
    st = fmha_batch_prefill_check(&fmha_prefill, &a, &plan);
    if (st != FMHA_OK) {
        fprintf(stderr, "fmha_batch_prefill: not supported: %s: %s\n", fmha_status_str(st), fmha_last_error());
        return 2;
    }
    CHECK_CUDA(cudaStreamCreate(&stream));
    if (o.v) {
        st = fmha_batch_prefill_check_pages(&a, (void *)stream);
        if (st != FMHA_OK) {
            fprintf(stderr, "fmha_batch_prefill: page tables rejected: %s: %s\n", fmha_status_str(st), fmha_last_error());
            return 1;
        }
    }
    st = fmha_batch_prefill(&fmha_prefill, &a, (void *)stream);
    if (st != FMHA_OK) {
        fprintf(stderr, "fmha_batch_prefill: %s: %s\n", fmha_status_str(st), fmha_last_error());
        return 2;
    }
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(ho, dout, nq * 2, cudaMemcpyDeviceToHost));
    if (o.lse) CHECK_CUDA(cudaMemcpy(hlse, dlse, nlse * 4, cudaMemcpyDeviceToHost));

    for (i = 0; i < o.warmup; i++)
        if (fmha_batch_prefill(&fmha_prefill, &a, (void *)stream) != FMHA_OK) return 2;
    times = (float *)xmalloc(sizeof(float) * (size_t)o.repeat);
    ev = (cudaEvent_t *)xmalloc(sizeof(cudaEvent_t) * 2 * (size_t)o.repeat);
    for (i = 0; i < 2 * o.repeat; i++) CHECK_CUDA(cudaEventCreate(&ev[i]));
    for (i = 0; i < o.repeat; i++) {
        CHECK_CUDA(cudaEventRecord(ev[2 * i], stream));
        if (fmha_batch_prefill(&fmha_prefill, &a, (void *)stream) != FMHA_OK) return 2;
        CHECK_CUDA(cudaEventRecord(ev[2 * i + 1], stream));
    }
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (i = 0; i < o.repeat; i++) CHECK_CUDA(cudaEventElapsedTime(&times[i], ev[2 * i], ev[2 * i + 1]));
    qsort(times, (size_t)o.repeat, sizeof(float), ex_cmp_float);
    ms = times[o.repeat / 2];

    /* ---- reference problem: K/V gathered from the pages into [tk, h_k, d] ------ */
    memset(&p, 0, sizeof(p));
    p.is_group_mode = 1; p.batch = o.b; p.nhead_q = o.h; p.nhead_k = o.h_k;
    p.seqstart_q = ssq; p.seqstart_k = ssk;
    p.hdim_q = p.hdim_v = o.d;
    p.stride_q = p.stride_o = (int64_t)o.h * o.d; p.nhead_stride_q = p.nhead_stride_o = o.d;
    p.stride_k = p.stride_v = (int64_t)o.h_k * o.d; p.nhead_stride_k = p.nhead_stride_v = o.d;
    p.nhead_stride_lse = a.nhead_stride_lse;
    p.scale = o.scale; p.logits_soft_cap = o.cap;
    p.mask_type = (int)o.mask; p.window_left = o.wl; p.window_right = o.wr;

    /* ---- FLOPs and bytes ----------------------------------------------------- */
    pairs = fmha_ref_visible_pairs(&p);
    flops = 4.0 * o.h * o.d * pairs;
    kv_bytes = 2.0 * es * (double)tk * o.h_k * o.d;
    tflops = ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0;
    gbs = ms > 0 ? kv_bytes / (ms * 1e-3) / 1e9 : 0.0;

    /* ---- validation ----------------------------------------------------------- */
    if (o.v) {
        fmha_ref_err err;
        double work = 0.0, stride_rows = 1.0;
        int maxk = 1;
        double *scores, *orow;
        size_t nk = (size_t)(tk > 0 ? tk : 1) * o.h_k * o.d;
        fk = (float *)xmalloc(nk * 4);
        fv = (float *)xmalloc(nk * 4);
        for (bi = 0; bi < o.b; bi++) {
            if (sk[bi] > maxk) maxk = sk[bi];
            for (i = 0; i < sk[bi]; i++) {
                const int pslot = perm[pstart[bi] + i / o.page];
                const size_t slot = (size_t)pslot * (size_t)L.ps;
                for (hh = 0; hh < o.h_k; hh++) {
                    const float kd = hkds ? hkds[(size_t)pslot * o.h_k + hh] : kv_descale;
                    const float vd = hvds ? hvds[(size_t)pslot * o.h_k + hh] : kv_descale;
                    for (x = 0; x < o.d; x++) {
                        const size_t dst = ((size_t)(ssk[bi] + i) * o.h_k + hh) * o.d + x;
                        fk[dst] = elem_value(kreg, o.kv_dtype, slot + kv_off(&L, 0, i % o.page, hh, x), kd);
                        fv[dst] = elem_value(vreg, o.kv_dtype, slot + kv_off(&L, 1, i % o.page, hh, x), vd);
                    }
                }
            }
        }
        p.q = fq; p.k = fk; p.v = fv;
        scores = (double *)xmalloc(sizeof(double) * ((size_t)maxk + 1));
        orow = (double *)xmalloc(sizeof(double) * (size_t)o.d);
        fmha_ref_err_init(&err);
        for (bi = 0; bi < o.b; bi++) { work += (double)sq[bi] * sk[bi] * o.d * o.h; rows_total += (long long)sq[bi] * o.h; }
        if (work > REF_BUDGET) stride_rows = ceil(work / REF_BUDGET);
        for (bi = 0; bi < o.b; bi++)
            for (hh = 0; hh < o.h; hh++)
                for (i = 0; i < sq[bi]; i++) {
                    int64_t oo = fmha_ref_off_o(&p, bi, hh, i), lo = fmha_ref_off_lse(&p, bi, hh, i);
                    double lse_ref;
                    int row_bad = 0, check;
                    for (x = 0; x < o.d; x++)
                        if (!isfinite(fmha_ref_bits16_to_f32(ho[oo + x], is_bf16))) { bad_elems++; row_bad = 1; }
                    if (o.lse && !(isfinite(hlse[lo]) || hlse[lo] == -INFINITY)) { bad_elems++; row_bad = 1; }
                    check = stride_rows <= 1.0 || i == 0 || i == sq[bi] - 1 ||
                            fmod((double)i + hh * 7.0 + bi * 13.0, stride_rows) < 1.0;
                    if (!check) { bad_rows += row_bad; continue; }
                    rows_checked++;
                    fmha_ref_fwd_row(&p, bi, hh, i, scores, orow, &lse_ref);
                    for (x = 0; x < o.d; x++) {
                        float g = fmha_ref_bits16_to_f32(ho[oo + x], is_bf16);
                        if (isinf(lse_ref) && g != 0.0f) row_bad = 1;
                        if (isfinite(g)) fmha_ref_err_add(&err, g, orow[x]);
                    }
                    if (o.lse) {
                        if (isinf(lse_ref)) { if (hlse[lo] != -INFINITY) row_bad = 1; }
                        else {
                            double e = fabs((double)hlse[lo] - lse_ref);
                            if (!(e <= (o.cap > 0 ? 5e-3 : 2e-3))) row_bad = 1;
                            if (e > lse_err || e != e) lse_err = e;
                        }
                    }
                    bad_rows += row_bad;
                }
        rel = fmha_ref_err_rel_l2(&err);
        valid = bad_rows == 0 && rel <= (is_bf16 ? 1e-2 : 2e-3);
        vstr = valid ? "y" : "n";
        free(scores);
        free(orow);
    }

    /* ---- report ------------------------------------------------------------- */
    if (o.json) {
        printf("{\"prec\": \"%s\", \"kv_prec\": \"%s\", \"q_prec\": \"%s\", \"kv_scale\": \"%s\", "
               "\"table\": \"%s\", \"layout\": \"%s\", \"page\": %d, \"b\": %d, \"h\": %d, "
               "\"h_k\": %d, \"s\": \"%s\", \"s_k\": \"%s\", \"d\": %d, \"scale\": %g, \"logits_soft_cap\": %g, "
               "\"lse\": %d, \"mask\": \"%s\", \"pages_used\": %d, \"num_total_pages\": %d, \"pool_gib\": %.3f, "
               "\"shuffle\": %d, \"kernel\": \"%s\", \"why\": \"%s\", \"ms\": %.5f, \"tflops\": %.3f, \"kv_gbps\": %.2f, "
               "\"flops\": %.6g, \"valid\": \"%s\", \"rel_l2\": %.3g, \"rows_checked\": %lld, \"rows\": %lld}\n",
               is_bf16 ? "bf16" : "fp16", prec_str(o.kv_dtype), prec_str(o.q_dtype), kv_scale_str[o.kv_scale],
               o.vllm ? "vllm" : "sglang", layout_str, o.page, o.b, o.h, o.h_k, o.s_str,
               o.s_k_str, o.d, o.scale, o.cap, o.lse, o.mask_str, n_used, n_total, pool_bytes / 1073741824.0, o.shuffle,
               plan.kernel->name, plan.why, ms, tflops, gbs, flops, vstr, rel, rows_checked, rows_total);
    } else {
        printf("pipeline: %s\n", plan.why);
        char prec[48];
        if (o.kv_dtype == FMHA_DTYPE_FP8)
            snprintf(prec, sizeof(prec), "kv fp8/%s q %s", kv_scale_str[o.kv_scale], prec_str(o.q_dtype));
        else
            snprintf(prec, sizeof(prec), "%s", prec_str(o.kv_dtype));
        printf("[%s|%s|%s|page %d] b:%d, h:%d/%d, s:%s/%s, d:%d, scale_s:%g, logits_soft_cap:%g, lse:%d, mask:%s, "
               "pages:%d of %d (%.2f GiB pool), %s, %.4f ms, %.2f TFlops, %.2f GB/s, valid:%s",
               prec, o.vllm ? "vllm" : "sglang", layout_str, o.page, o.b, o.h, o.h_k, o.s_str,
               o.s_k_str, o.d, o.scale, o.cap, o.lse, o.mask_str, n_used, n_total, pool_bytes / 1073741824.0,
               plan.kernel->name, ms, tflops, gbs, vstr);
        if (o.v && rows_checked < rows_total) printf(" (checked %lld of %lld rows)", rows_checked, rows_total);
        if (o.v && !valid) printf(" (rel-L2 %.3g, %lld bad rows, %lld non-finite, lse err %.3g)", rel, bad_rows, bad_elems, lse_err);
        printf("\n");
    }

    for (i = 0; i < 2 * o.repeat; i++) CHECK_CUDA(cudaEventDestroy(ev[i]));
    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_CUDA(cudaFree(dq)); CHECK_CUDA(cudaFree(dout)); CHECK_CUDA(cudaFree(dlse));
    CHECK_CUDA(cudaFree(dkpool)); CHECK_CUDA(cudaFree(dvpool));
    CHECK_CUDA(cudaFree(dssq)); CHECK_CUDA(cudaFree(dindptr)); CHECK_CUDA(cudaFree(dindices));
    CHECK_CUDA(cudaFree(dlast)); CHECK_CUDA(cudaFree(dbt)); CHECK_CUDA(cudaFree(dseqk));
    CHECK_CUDA(cudaFree(dds)); CHECK_CUDA(cudaFree(dkds)); CHECK_CUDA(cudaFree(dvds));
    free(hkds); free(hvds);
    free(perm); free(indices); free(bt); free(hq); free(ho); free(fq); free(hlse); free(kreg); free(vreg);
    free(fk); free(fv); free(times); free(ev);
    return valid ? 0 : 1;
}
