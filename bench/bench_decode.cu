/*
 * bench_decode: split-KV decode bandwidth (fmha_decode_plan_make + fmha_decode_run)
 * over contiguous and paged KV caches, bf16 and e4m3 KV, against a device copy.
 *
 * Decode reads the whole KV cache once per call and does little arithmetic, so the
 * figure of merit is bytes of K and V read per second:
 *     bytes = batch * seqlen_k * nhead_k * hdim * 2 (K and V) * element size
 * (1 for e4m3, 2 for bf16; queries, outputs, page tables and the split workspace are
 * not counted), reported as TB/s next to the same run's cudaMemcpyAsync of 1 GiB
 * device to device (read + write bytes over time: the ceiling, about 3.0 TB/s on an
 * H100 SXM, design brief section 7). Also the time per call, tokens (batch x
 * seqlen_k) per second, the plan's split count and the kernels it picked.
 *
 * Grid (the decode anchors of the design brief): bf16 queries, nhead_q 32 / nhead_k 8,
 * hdim 128, seqlen_q 1, batch 1, 8, 64 x seqlen_k 8k, 32k; a shape whose bf16 K+V
 * exceeds --max_gb (16 GB) is skipped. Per shape, every cache variant asked for:
 *   contig      k/v_cache [batch, seqlen_k, nhead_k, d], seqlen_k[] on the device
 *   linear      LINEAR pages [pages, page, nhead_k, d] (page 16 unless --pages),
 *               pages shuffled over the pool, SGLang 1-D and/or vLLM 2-D tables
 *   vectorized  VECTORIZED pages (vLLM v0 / CK); pages that are multiples of 8
 * each with bf16 KV and, for contig and linear, e4m3 KV with per-tensor descales
 * (and per-page descales, paged only); at the end the fp8/bf16 tokens/s ratio of
 * every pair. seqlen_q > 1 (speculative decode) uses the causal bottom-right mask;
 * seqlen_q 1 no mask. --splits sweeps the split count (0: the plan's heuristic).
 *
 * Values: K and V hold random bf16 values that e4m3 represents exactly after any
 * of the power-of-two descales used (+-(1 + m/8) * 2^e, e in -6..-1; descales
 * 2^-8 per tensor, 2^-6..2^-8 per page and KV head), so every variant holds the same
 * real K and V. Each variant's output is checked against the contiguous bf16 cache
 * (rel-L2 at most 1e-2; 6e-2 for e4m3 KV, whose kernels may round P to e4m3). Pool
 * slots no sequence owns hold NaN, so a stray read shows.
 *
 * Timing: each call is bracketed by its own pair of device events after warm-up
 * calls; the time is the median of at least 20 calls (up to 2000, about 0.3 s per
 * point; 0.1 s with --quick). Caches smaller than 16x the L2 are allocated in N
 * copies (N >= 2, N x copy >= 4x the L2: 200 MB on an H100) with the calls rotating
 * among them, so a call never starts on K/V the previous calls left in the L2.
 * Each point also times the same calls back to back under one event pair ("back
 * to back", us a call): as a model's layers run, each call's kernels starting as
 * programmatic dependents of the previous call's (an event between two calls, as
 * in the per-call timing, holds that start back and adds its own gap).
 *
 * --graph_layers L: one model step, L layers' fmha_decode_run calls on L different
 * caches (one plan, one workspace), captured in a CUDA graph; reports us per step
 * and per layer for the graph and for L plain launches (the difference is the launch
 * cost), on every shape whose L caches fit --max_gb, bf16 KV, each layout asked for
 * (first table, first page).
 * --append 1: every call also appends seqlen_q new rows per sequence and turns
 * them and the queries by rotary embedding (the rows the cache holds, an
 * identity rotation: the output still matches the reference), as a serving
 * step does.
 *
 *   bench_decode [--batch 1,8,64] [--kv 8k,32k] [--hq 32] [--hk 8] [--hdim 128]
 *                [--seqlen_q 1] [--layouts contig,linear,vectorized] [--tables sglang,vllm]
 *                [--pages 16] [--kv_dtype bf16,fp8] [--kv_scale tensor,page]
 *                [--splits 0] [--graph_layers 0] [--max_gb 16] [--target_s 0.3]
 *                [--json out.json] [--quick]
 *
 * Lists are comma-separated; numbers take a k suffix (x1024). --kv_scale also takes
 * none (e4m3 KV, descale 1). --target_s: seconds of timed calls per point. --quick:
 * SGLang table only, 0.1 s per point. Output: a line per point while running, then a
 * markdown table, the fp8/bf16 ratios and the graph lines; --json writes
 * {device, copy_tbps, rows[], graph[], fp8_ratios[]} (bench/run_decode.sh reads it).
 * Exit status: 0 when every point ran and checked out, 1 on any error (an API status
 * other than OK, a CUDA error, an output off the reference), 2 on bad options.
 * Without a GPU: "SKIP bench_decode: no GPU", exit 0.
 *
 * Build (sm_90a only, as bench_prefill; -DBENCH_D128_ONLY leaves out the hdim 64/256
 * rows):
 *   nvcc -x cu -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude \
 *        bench/bench_decode.cu -o build/bench/bench_decode
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_fp8.h>

#include "fmha_tile.h"
#define EX_PROG "bench_decode"
#define EX_BENCH
#include "../examples/example_util.h"

/* Only the rows the benchmark runs (compile time): hdim 128 bf16 contiguous/LINEAR,
 * VECTORIZED and e4m3 KV; bf16 hdim 64 and 256 for --hdim. */
#ifdef BENCH_D128_ONLY
#define BENCH_ROWS_HD(X)
#define BENCH_HD_OTHER 0
#else
#define BENCH_ROWS_HD(X)                                                                         \
    X(DECODE,     BF16,  64, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(DECODE,     BF16, 256, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#define BENCH_HD_OTHER 1
#endif
/* a build may predefine the rows (a tuning build) */
#ifndef BENCH_ROWS
#define BENCH_ROWS(X)                                                                            \
    X(DECODE,     BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(DECODE_VEC, BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(DECODE,     FP8,  128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    BENCH_ROWS_HD(X)
#endif
DECL_FMHA_KERNEL_SET(bench_set, BENCH_ROWS)

#define BENCH_MAX_LIST 16
#define BENCH_MIN_RUNS 20
#define BENCH_MAX_RUNS 2000
#define BENCH_MIN_WARMUP 3
#define BENCH_WARMUP_S 0.05
#define BENCH_MAX_COPIES 512
#define BENCH_COPY_BYTES ((size_t)1 << 30)
#define BENCH_TOL16 1e-2
#define BENCH_TOL8 6e-2

enum { L_CONTIG = 0, L_LINEAR = 1, L_VEC = 2 };
static const char *const layout_names[3] = { "contig", "linear", "vectorized" };
static const char *const table_names[2] = { "sglang", "vllm" };
static const char *const dtype_names[2] = { "bf16", "fp8" };
static const char *const scale_names[3] = { "none", "tensor", "page" };   /* fmha_kv_scale order */

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "bench_decode: out of host memory\n"); exit(1); }
    return p;
}

/* cudaMalloc that reports running out of device memory (NULL) instead of exiting:
 * the point is skipped with a note, anything else is fatal. */
static void *dmalloc_try(size_t n)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n ? n : 16);
    if (e == cudaErrorMemoryAllocation) { (void)cudaGetLastError(); return NULL; }
    CUDA_CHECK(e);
    return p;
}

static void dfree(void *p)
{
    if (p) CUDA_CHECK(cudaFree(p));
}

static void bench_grid(size_t n, int *grid)
{
    size_t g = (n + 255) / 256;
    *grid = (int)(g < 8192 ? (g > 0 ? g : 1) : 8192);
}

/* ------------------------------------------------------------------------------------
 * Device helpers
 * --------------------------------------------------------------------------------- */
/* K/V values that e4m3 holds exactly after a power-of-two descale in 2^-8..1:
 * +-(1 + m/8) * 2^e, m in 0..7, e in -6..-1 (|v / ds| in [2^-6, 240]). */
static __global__ void bench_fill_e4m3_exact_kernel(uint16_t *p, size_t n, uint32_t seed)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += step) {
        const uint32_t h = bench_hash((uint32_t)i ^ bench_hash(seed ^ (uint32_t)(i >> 32)));
        const uint32_t e = 127u - 1u - (h >> 8) % 6u, m = h & 7u, s = (h >> 3) & 1u;
        p[i] = (uint16_t)((s << 15) | (e << 7) | (m << 4));
    }
}

static __device__ __forceinline__ float bench_bf16_to_f32(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

static __device__ __forceinline__ uint8_t bench_to_e4m3(uint16_t b, float ds)
{
    return (uint8_t)__nv_cvt_float_to_fp8(bench_bf16_to_f32(b) / ds, __NV_SATFINITE, __NV_E4M3);
}

/* The contiguous e4m3 cache of one copy: dst = e4m3(src / ds). */
static __global__ void bench_quant_kernel(const uint16_t *src, uint8_t *dst, size_t n, const float *ds)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    const float d = *ds;
    for (; i < n; i += step) dst[i] = bench_to_e4m3(src[i], d);
}

/* The contiguous [batch, kv, hk, d] cache into one copy's pages: token t of sequence
 * b goes to slot t % P of page idx[b * np + t / P]. LINEAR (ts, hs strides) or
 * VECTORIZED (K: [h][d/8][P][8], V: [h][P/8][d][8]); bf16 as is, or e4m3 of the value
 * over its descale (page_ds [pages][hk], or the per-tensor one). */
static __global__ void bench_to_pages_kernel(const uint16_t *src, void *pool, int fp8, const int32_t *idx, int np,
                                             int P, int kv, int hk, int d, int64_t ps, int64_t ts, int64_t hs,
                                             int vec, int is_v, const float *page_ds, const float *tensor_ds)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    const int b = blockIdx.y;   /* one grid row per sequence */
    const size_t per = (size_t)kv * hk * d;
    for (; i < per; i += step) {
        const int x = (int)(i % d), h = (int)((i / d) % hk), t = (int)(i / ((size_t)d * hk));
        const int s = t % P;
        const int64_t page = idx[(int64_t)b * np + t / P];
        int64_t off;
        if (!vec) off = (int64_t)s * ts + (int64_t)h * hs + x;
        else if (!is_v) off = (int64_t)h * hs + (int64_t)(x >> 3) * P * 8 + (int64_t)s * 8 + (x & 7);
        else off = (int64_t)h * hs + (int64_t)(s >> 3) * d * 8 + (int64_t)x * 8 + (s & 7);
        off += page * ps;
        if (fp8) {
            const float ds = page_ds ? page_ds[page * hk + h] : *tensor_ds;
            ((uint8_t *)pool)[off] = bench_to_e4m3(src[(size_t)b * per + i], ds);
        } else {
            ((uint16_t *)pool)[off] = src[(size_t)b * per + i];
        }
    }
}

/* ------------------------------------------------------------------------------------
 * Options
 * --------------------------------------------------------------------------------- */
typedef struct bench_opts {
    int batch[BENCH_MAX_LIST], nbatch;
    int kv[BENCH_MAX_LIST], nkv;
    int hq[BENCH_MAX_LIST], nhq;
    int hk[BENCH_MAX_LIST], nhk;
    int hdim[BENCH_MAX_LIST], nhdim;
    int sq[BENCH_MAX_LIST], nsq;
    int layouts[3], nlayouts;
    int tables[2], ntables;
    int pages[BENCH_MAX_LIST], npages;
    int kvdt[2], nkvdt;            /* 0 bf16, 1 fp8           */
    int scales[3], nscales;        /* fmha_kv_scale values    */
    int splits[BENCH_MAX_LIST], nsplits;
    int graph_layers;
    double max_gb, target_s;
    const char *json_path;
    int quick;
} bench_opts;

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: bench_decode [--batch 1,8,64] [--kv 8k,32k] [--hq 32] [--hk 8] [--hdim 128] [--seqlen_q 1]\n"
            "                    [--layouts contig,linear,vectorized] [--tables sglang,vllm] [--pages 16]\n"
            "                    [--kv_dtype bf16,fp8] [--kv_scale tensor,page|none] [--splits 0[,1,2,..]]\n"
            "                    [--graph_layers 0] [--append 0|1] [--max_gb 16] [--target_s 0.3] [--json out.json]\n"
            "                    [--quick]\n"
            "  split-KV decode, bf16 queries; K+V bytes read per second vs a 1 GiB device copy.\n"
            "  Lists are comma-separated, numbers take a k suffix; --splits 0 is the plan's heuristic.\n"
            "  --append 1: each call also appends seqlen_q rows per sequence with rotary embedding.\n");
}

/* "1,8k,32k" -> ints (k = x1024); count, or -1. */
static int g_append;   /* --append (see append_bufs) */

static int parse_ints(const char *s, int *out, int cap)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || n >= cap) return -1;
        if (*end == 'k' || *end == 'K') { v *= 1024; end++; }
        if (v > (1L << 30)) return -1;
        out[n++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        p = end;
    }
    return n > 0 ? n : -1;
}

/* "a,b" against a name table -> indices; count, or -1. */
static int parse_names(const char *s, const char *const *names, int nnames, int *out, int cap)
{
    int n = 0, k;
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        for (k = 0; k < nnames; k++)
            if (len == strlen(names[k]) && !strncmp(p, names[k], len)) break;
        if (k == nnames || n >= cap) return -1;
        out[n++] = k;
        p += len;
        if (*p == ',') p++;
    }
    return n > 0 ? n : -1;
}

static int bench_parse_opts(int argc, char **argv, bench_opts *o)
{
    int i, set_tables = 0, set_target = 0;
    memset(o, 0, sizeof(*o));
    o->batch[0] = 1; o->batch[1] = 8; o->batch[2] = 64; o->nbatch = 3;
    o->kv[0] = 8192; o->kv[1] = 32768; o->nkv = 2;
    o->hq[0] = 32; o->nhq = 1;
    o->hk[0] = 8; o->nhk = 1;
    o->hdim[0] = 128; o->nhdim = 1;
    o->sq[0] = 1; o->nsq = 1;
    o->layouts[0] = L_CONTIG; o->layouts[1] = L_LINEAR; o->layouts[2] = L_VEC; o->nlayouts = 3;
    o->pages[0] = 16; o->npages = 1;
    o->kvdt[0] = 0; o->kvdt[1] = 1; o->nkvdt = 2;
    o->scales[0] = FMHA_KV_SCALE_PER_TENSOR; o->scales[1] = FMHA_KV_SCALE_PER_PAGE; o->nscales = 2;
    o->splits[0] = 0; o->nsplits = 1;
    o->max_gb = 16.0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--quick")) { o->quick = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { bench_usage(stdout); exit(0); }
        if (strncmp(a, "--", 2) || !strstr(" --batch --kv --hq --hk --hdim --seqlen_q --pages --splits --layouts "
                                           "--tables --kv_dtype --kv_scale --graph_layers --append --max_gb --target_s --json ",
                                           a)) {
            fprintf(stderr, "bench_decode: unknown option %s\n", a);
            return -1;
        }
        if (!val) { fprintf(stderr, "bench_decode: %s needs a value\n", a); return -1; }
        if (!strcmp(a, "--batch")) bad = (o->nbatch = parse_ints(val, o->batch, BENCH_MAX_LIST)) < 0;
        else if (!strcmp(a, "--kv")) bad = (o->nkv = parse_ints(val, o->kv, BENCH_MAX_LIST)) < 0;
        else if (!strcmp(a, "--hq")) bad = (o->nhq = parse_ints(val, o->hq, BENCH_MAX_LIST)) < 0;
        else if (!strcmp(a, "--hk")) bad = (o->nhk = parse_ints(val, o->hk, BENCH_MAX_LIST)) < 0;
        else if (!strcmp(a, "--hdim")) bad = (o->nhdim = parse_ints(val, o->hdim, BENCH_MAX_LIST)) < 0;
        else if (!strcmp(a, "--seqlen_q")) bad = (o->nsq = parse_ints(val, o->sq, BENCH_MAX_LIST)) < 0;
        else if (!strcmp(a, "--pages")) bad = (o->npages = parse_ints(val, o->pages, BENCH_MAX_LIST)) < 0;
        else if (!strcmp(a, "--splits")) bad = (o->nsplits = parse_ints(val, o->splits, BENCH_MAX_LIST)) < 0;
        else if (!strcmp(a, "--layouts")) bad = (o->nlayouts = parse_names(val, layout_names, 3, o->layouts, 3)) < 0;
        else if (!strcmp(a, "--tables")) {
            bad = (o->ntables = parse_names(val, table_names, 2, o->tables, 2)) < 0;
            set_tables = 1;
        }
        else if (!strcmp(a, "--kv_dtype")) bad = (o->nkvdt = parse_names(val, dtype_names, 2, o->kvdt, 2)) < 0;
        else if (!strcmp(a, "--kv_scale")) bad = (o->nscales = parse_names(val, scale_names, 3, o->scales, 3)) < 0;
        else if (!strcmp(a, "--graph_layers")) o->graph_layers = atoi(val);
        else if (!strcmp(a, "--append")) g_append = atoi(val) != 0;
        else if (!strcmp(a, "--max_gb")) o->max_gb = atof(val);
        else if (!strcmp(a, "--target_s")) { o->target_s = atof(val); set_target = 1; }
        else if (!strcmp(a, "--json")) o->json_path = val;
        else { fprintf(stderr, "bench_decode: unknown option %s\n", a); return -1; }
        if (bad) { fprintf(stderr, "bench_decode: bad value for %s: %s\n", a, val); return -1; }
        i++;
    }
    if (!set_tables) { o->tables[0] = 0; o->tables[1] = 1; o->ntables = o->quick ? 1 : 2; }
    if (!set_target) o->target_s = o->quick ? 0.1 : 0.3;
    for (i = 0; i < o->nbatch; i++) if (o->batch[i] < 1) { fprintf(stderr, "bench_decode: --batch >= 1\n"); return -1; }
    for (i = 0; i < o->nkv; i++) if (o->kv[i] < 1) { fprintf(stderr, "bench_decode: --kv >= 1\n"); return -1; }
    for (i = 0; i < o->nhq; i++) if (o->hq[i] < 1) { fprintf(stderr, "bench_decode: --hq >= 1\n"); return -1; }
    for (i = 0; i < o->nhk; i++) if (o->hk[i] < 1) { fprintf(stderr, "bench_decode: --hk >= 1\n"); return -1; }
    for (i = 0; i < o->nsq; i++) if (o->sq[i] < 1) { fprintf(stderr, "bench_decode: --seqlen_q >= 1\n"); return -1; }
    for (i = 0; i < o->nhdim; i++)
        if (o->hdim[i] < 8 || o->hdim[i] > 256 || o->hdim[i] % 8) {
            fprintf(stderr, "bench_decode: --hdim must be multiples of 8 in 8..256\n");
            return -1;
        }
    for (i = 0; i < o->npages; i++)
        if (o->pages[i] < 1 || o->pages[i] > 2048 || (o->pages[i] & (o->pages[i] - 1))) {
            fprintf(stderr, "bench_decode: page %d is not a power of two in 1..2048\n", o->pages[i]);
            return -1;
        }
    for (i = 0; i < o->nsplits; i++)
        if (o->splits[i] > FMHA_SPLITKV_MAX_SPLITS) {
            fprintf(stderr, "bench_decode: --splits values in 0..%d\n", FMHA_SPLITKV_MAX_SPLITS);
            return -1;
        }
    if (o->graph_layers < 0 || o->graph_layers > BENCH_MAX_COPIES || o->max_gb <= 0 || o->target_s <= 0) {
        fprintf(stderr, "bench_decode: bad --graph_layers/--max_gb/--target_s\n");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------
 * Shapes, cache variants and their buffers
 * --------------------------------------------------------------------------------- */
typedef struct bench_shape {
    int batch, kv, hq, hk, d, sq;
    size_t nq;                   /* elements of Q (and O): batch * sq * hq * d    */
    size_t nkv;                  /* elements of K (and V): batch * kv * hk * d    */
    uint16_t *k, *v;             /* the contiguous bf16 cache (reference)         */
    uint16_t *q, *o_ref;         /* queries and the reference output              */
    uint16_t *h_ref;             /* o_ref on the host                             */
    int32_t *d_seqk;             /* [batch] = kv                                  */
    float *d_tds;                /* descales: [0] K, [1] V per tensor; [2], [3] 1 */
} bench_shape;

typedef struct bench_var {
    int layout, table, page, kv8;
    fmha_kv_scale scale;
} bench_var;

/* A variant's caches in `copies` copies (rotation, or one per layer), the queries
 * and outputs of every copy, and the args of every copy. */
typedef struct bench_cache {
    bench_var v;
    int copies, esz;
    char *k, *vv;                /* contiguous [copies * batch, kv, hk, d], or pools  */
    int np, n_used, n_total;
    int64_t bt_stride, ts, hs, ps;
    int32_t *d_indptr, *d_indices, *d_last, *d_bt;
    float *d_pds_k, *d_pds_v;    /* per-page descales [n_total][hk]                   */
    uint16_t *q, *o;             /* [copies][nq]                                       */
    fmha_decode_args *args;      /* [copies]                                           */
} bench_cache;

static double kv_bytes(const bench_shape *s, int kv8) { return (double)s->nkv * 2.0 * (kv8 ? 1.0 : 2.0); }

static void shape_name(const bench_shape *s, char *buf, size_t cap)
{
    char kvs[32];
    if (s->kv % 1024 == 0) snprintf(kvs, sizeof(kvs), "%dk", s->kv / 1024);
    else snprintf(kvs, sizeof(kvs), "%d", s->kv);
    snprintf(buf, cap, "b%d kv%s h%d/%d d%d q%d", s->batch, kvs, s->hq, s->hk, s->d, s->sq);
}

static void var_name(const bench_var *v, char *buf, size_t cap)
{
    if (v->layout == L_CONTIG) snprintf(buf, cap, "contig");
    else snprintf(buf, cap, "%s p%d %s", layout_names[v->layout], v->page, table_names[v->table]);
}

static void var_dtype_name(const bench_var *v, char *buf, size_t cap)
{
    if (!v->kv8) snprintf(buf, cap, "bf16");
    else snprintf(buf, cap, "fp8/%s", scale_names[v->scale]);
}

/* Copies so that no call starts on K/V still in the L2: one copy from 16x the L2 up,
 * else at least 2 and at least 4x the L2 in all. */
static int rotation_copies(double copy_bytes, double l2)
{
    double c;
    if (copy_bytes >= 16.0 * l2) return 1;
    c = ceil(4.0 * l2 / copy_bytes);
    if (c < 2) c = 2;
    if (c > BENCH_MAX_COPIES) c = BENCH_MAX_COPIES;
    return (int)c;
}

/* --append 1: every call also appends the sequences' last seqlen_q rows and
 * turns the new keys and the queries by rotary embedding (as a serving step
 * does), with the rows the cache already holds and an identity rotation
 * (cos 1, sin 0) so that the output still matches the reference. */
static float *g_rot;          /* cos [kv][d / 2] (all 1), then sin [kv][d / 2] (all 0) */
static uint16_t *g_qrope;
static size_t g_rot_n, g_qrope_n;

static void append_bufs(const bench_shape *s)
{
    const size_t nrot = (size_t)s->kv * s->d;
    if (nrot > g_rot_n) {
        float *h = (float *)malloc(nrot * sizeof(float));
        size_t i;
        for (i = 0; i < nrot; i++) h[i] = i < nrot / 2 ? 1.0f : 0.0f;
        dfree(g_rot);
        g_rot = (float *)dmalloc_try(nrot * sizeof(float));
        if (!g_rot) { fprintf(stderr, "bench_decode: out of device memory (rotary tables)\n"); exit(1); }
        CUDA_CHECK(cudaMemcpy(g_rot, h, nrot * sizeof(float), cudaMemcpyHostToDevice));
        free(h);
        g_rot_n = nrot;
    }
    if (s->nq > g_qrope_n) {
        dfree(g_qrope);
        g_qrope = (uint16_t *)dmalloc_try(s->nq * 2);
        if (!g_qrope) { fprintf(stderr, "bench_decode: out of device memory (q_rope)\n"); exit(1); }
        g_qrope_n = s->nq;
    }
}

static void make_args(const bench_shape *s, const bench_cache *c, int ci, int splits, fmha_decode_args *a)
{
    const bench_var *v = &c->v;
    memset(a, 0, sizeof(*a));
    a->q_dtype = FMHA_DTYPE_BF16;
    a->kv_dtype = v->kv8 ? FMHA_DTYPE_FP8 : FMHA_DTYPE_BF16;
    a->batch = s->batch; a->nhead_q = s->hq; a->nhead_k = s->hk;
    a->seqlen_q = s->sq; a->max_seqlen_k = s->kv;
    a->hdim_q = a->hdim_v = s->d;
    a->q = c->q + (size_t)ci * s->nq;
    a->o = c->o + (size_t)ci * s->nq;
    a->stride_q = a->stride_o = (int64_t)s->hq * s->d;
    a->nhead_stride_q = a->nhead_stride_o = s->d;
    a->batch_stride_q = a->batch_stride_o = (int64_t)s->sq * s->hq * s->d;
    if (v->layout == L_CONTIG) {
        const size_t off = (size_t)ci * s->nkv * (size_t)c->esz;
        a->is_paged = 0;
        a->k_cache = c->k + off; a->v_cache = c->vv + off;
        a->stride_k = a->stride_v = (int64_t)s->hk * s->d;
        a->nhead_stride_k = a->nhead_stride_v = s->d;
        a->batch_stride_k = a->batch_stride_v = (int64_t)s->kv * s->hk * s->d;
        a->seqlen_k = s->d_seqk;
    } else {
        a->is_paged = 1;
        a->k_cache = c->k; a->v_cache = c->vv;
        a->num_total_pages = c->n_total; a->page_size = v->page;
        a->kv_layout = v->layout == L_VEC ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
        a->stride_k = a->stride_v = c->ts;
        a->nhead_stride_k = a->nhead_stride_v = c->hs;
        a->page_stride_k = a->page_stride_v = c->ps;
        if (v->table) {
            a->page_table = FMHA_PAGE_TABLE_VLLM_2D;
            a->block_table = c->d_bt + (size_t)ci * s->batch * c->bt_stride;
            a->block_table_stride = c->bt_stride;
            a->seqlen_k = s->d_seqk;
        } else {
            a->page_table = FMHA_PAGE_TABLE_SGLANG_1D;
            a->kv_indptr = c->d_indptr + (size_t)ci * (s->batch + 1);
            a->kv_page_indices = c->d_indices;
            a->kv_last_page_lens = c->d_last;
        }
    }
    a->kv_scale = FMHA_KV_SCALE_NONE;
    if (v->kv8) {
        a->kv_scale = v->scale;
        if (v->scale == FMHA_KV_SCALE_PER_TENSOR) {
            a->k_descale = s->d_tds; a->v_descale = s->d_tds + 1;
        } else if (v->scale == FMHA_KV_SCALE_PER_PAGE) {
            a->k_page_descale = c->d_pds_k; a->v_page_descale = c->d_pds_v;
            a->descale_page_stride = s->hk; a->descale_nhead_stride = 1;
        }
    }
    a->scale = 1.0f / sqrtf((float)s->d);
    if (s->sq > 1) { a->mask_type = FMHA_MASK_BOTTOM_RIGHT; a->window_left = -1; a->window_right = 0; }
    else { a->mask_type = FMHA_MASK_NONE; a->window_left = -1; a->window_right = -1; }
    a->num_splits = splits;
    if (g_append) {
        const size_t last = (size_t)(s->kv - s->sq) * s->hk * s->d;
        append_bufs(s);
        a->k_new = s->k + last; a->v_new = s->v + last; a->seqlen_knew = s->sq;
        a->stride_knew = a->stride_vnew = (int64_t)s->hk * s->d;
        a->nhead_stride_knew = a->nhead_stride_vnew = s->d;
        a->batch_stride_knew = a->batch_stride_vnew = (int64_t)s->kv * s->hk * s->d;
        a->rotary_dim = s->d; a->rotary_interleaved = 0; a->rotary_seqlen = s->kv;
        a->rotary_cos = g_rot; a->rotary_sin = g_rot + (size_t)s->kv * s->d / 2;
        a->q_rope = g_qrope;
    }
}

static void free_cache(bench_cache *c)
{
    dfree(c->k); dfree(c->vv);
    dfree(c->d_indptr); dfree(c->d_indices); dfree(c->d_last); dfree(c->d_bt);
    dfree(c->d_pds_k); dfree(c->d_pds_v);
    dfree(c->q); dfree(c->o);
    free(c->args);
    memset(c, 0, sizeof(*c));
}

/* Builds a variant's caches in `copies` copies from the shape's contiguous bf16
 * cache. 0, or -1 when the device memory runs out (nothing left allocated). */
static int build_cache(const bench_shape *s, const bench_var *v, int copies, bench_cache *c, cudaStream_t st)
{
    const int B = s->batch, hk = s->hk, d = s->d;
    /* e4m3 without descales (NONE) is quantised with descale 1 */
    const float *ds_k = s->d_tds + (v->scale == FMHA_KV_SCALE_NONE ? 2 : 0), *ds_v = ds_k + 1;
    int grid, ci, i;
    size_t bytes;
    memset(c, 0, sizeof(*c));
    c->v = *v; c->copies = copies; c->esz = v->kv8 ? 1 : 2;
    c->q = (uint16_t *)dmalloc_try(s->nq * 2 * (size_t)copies);
    c->o = (uint16_t *)dmalloc_try(s->nq * 2 * (size_t)copies);
    if (!c->q || !c->o) { free_cache(c); return -1; }
    for (ci = 0; ci < copies; ci++)   /* every copy holds the reference queries */
        CUDA_CHECK(cudaMemcpyAsync(c->q + (size_t)ci * s->nq, s->q, s->nq * 2, cudaMemcpyDeviceToDevice, st));
    CUDA_CHECK(cudaMemsetAsync(c->o, 0, s->nq * 2 * (size_t)copies, st));

    if (v->layout == L_CONTIG) {
        bytes = s->nkv * (size_t)c->esz;
        c->k = (char *)dmalloc_try(bytes * (size_t)copies);
        c->vv = (char *)dmalloc_try(bytes * (size_t)copies);
        if (!c->k || !c->vv) { free_cache(c); return -1; }
        bench_grid(s->nkv, &grid);
        for (ci = 0; ci < copies; ci++) {
            if (v->kv8) {
                bench_quant_kernel<<<grid, 256, 0, st>>>(s->k, (uint8_t *)c->k + (size_t)ci * bytes, s->nkv, ds_k);
                bench_quant_kernel<<<grid, 256, 0, st>>>(s->v, (uint8_t *)c->vv + (size_t)ci * bytes, s->nkv, ds_v);
                CUDA_CHECK(cudaGetLastError());
            } else {
                CUDA_CHECK(cudaMemcpyAsync(c->k + (size_t)ci * bytes, s->k, bytes, cudaMemcpyDeviceToDevice, st));
                CUDA_CHECK(cudaMemcpyAsync(c->vv + (size_t)ci * bytes, s->v, bytes, cudaMemcpyDeviceToDevice, st));
            }
        }
    } else {
        const int P = v->page;
        int32_t *perm, *indptr, *last, *bt;
        uint64_t rs = 0x9e3779b97f4a7c15ULL * (uint64_t)(P + 7);
        size_t pool_elems;
        c->np = (s->kv + P - 1) / P;
        c->n_used = B * c->np;
        c->n_total = copies * c->n_used + c->n_used / 16 + 3;   /* some pages nobody owns */
        c->bt_stride = c->np + 1;
        if (v->layout == L_VEC) { c->hs = (int64_t)P * d; c->ts = 8; }
        else { c->ts = (int64_t)hk * d; c->hs = d; }
        c->ps = (int64_t)P * hk * d;
        pool_elems = (size_t)c->n_total * (size_t)c->ps;
        c->k = (char *)dmalloc_try(pool_elems * (size_t)c->esz);
        c->vv = (char *)dmalloc_try(pool_elems * (size_t)c->esz);
        if (!c->k || !c->vv) { free_cache(c); return -1; }
        /* NaN where no sequence has a key (bf16 0xFFFF and e4m3 0xFF are NaN) */
        CUDA_CHECK(cudaMemsetAsync(c->k, 0xFF, pool_elems * (size_t)c->esz, st));
        CUDA_CHECK(cudaMemsetAsync(c->vv, 0xFF, pool_elems * (size_t)c->esz, st));

        /* pages shuffled over the whole pool (xorshift64); copy ci owns
         * perm[ci * n_used ..], sequence b its np pages from b * np on */
        perm = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)c->n_total);
        for (i = 0; i < c->n_total; i++) perm[i] = i;
        for (i = c->n_total - 1; i > 0; i--) {
            int j, t;
            rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
            j = (int)(rs % (uint64_t)(i + 1));
            t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
        indptr = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)copies * (B + 1));
        last = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)B);
        bt = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)copies * B * (size_t)c->bt_stride);
        for (ci = 0; ci < copies; ci++) {
            int b, j;
            for (b = 0; b <= B; b++) indptr[(size_t)ci * (B + 1) + b] = ci * c->n_used + b * c->np;
            for (b = 0; b < B; b++)
                for (j = 0; j < c->bt_stride; j++)
                    bt[((size_t)ci * B + b) * c->bt_stride + j] =
                        j < c->np ? perm[(size_t)ci * c->n_used + (size_t)b * c->np + j] : -1;
        }
        for (i = 0; i < B; i++) last[i] = s->kv - (c->np - 1) * P;
        c->d_indptr = (int32_t *)dmalloc_try(sizeof(int32_t) * (size_t)copies * (B + 1));
        c->d_indices = (int32_t *)dmalloc_try(sizeof(int32_t) * (size_t)copies * c->n_used);
        c->d_last = (int32_t *)dmalloc_try(sizeof(int32_t) * (size_t)B);
        c->d_bt = (int32_t *)dmalloc_try(sizeof(int32_t) * (size_t)copies * B * (size_t)c->bt_stride);
        if (!c->d_indptr || !c->d_indices || !c->d_last || !c->d_bt) {
            free(perm); free(indptr); free(last); free(bt); free_cache(c);
            return -1;
        }
        CUDA_CHECK(cudaMemcpy(c->d_indptr, indptr, sizeof(int32_t) * (size_t)copies * (B + 1), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(c->d_indices, perm, sizeof(int32_t) * (size_t)copies * c->n_used,
                              cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(c->d_last, last, sizeof(int32_t) * (size_t)B, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(c->d_bt, bt, sizeof(int32_t) * (size_t)copies * B * (size_t)c->bt_stride,
                              cudaMemcpyHostToDevice));
        if (v->kv8 && v->scale == FMHA_KV_SCALE_PER_PAGE) {
            /* powers of two 2^-6..2^-8, varying with page and head */
            const size_t n = (size_t)c->n_total * hk;
            float *ds = (float *)xmalloc(sizeof(float) * n * 2);
            for (i = 0; i < (int)(2 * n); i++) ds[i] = ldexpf(1.0f, -6 - (int)(((uint32_t)i * 2654435761u >> 16) % 3u));
            c->d_pds_k = (float *)dmalloc_try(n * 4);
            c->d_pds_v = (float *)dmalloc_try(n * 4);
            if (!c->d_pds_k || !c->d_pds_v) {
                free(ds); free(perm); free(indptr); free(last); free(bt); free_cache(c);
                return -1;
            }
            CUDA_CHECK(cudaMemcpy(c->d_pds_k, ds, n * 4, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(c->d_pds_v, ds + n, n * 4, cudaMemcpyHostToDevice));
            free(ds);
        }
        bench_grid((size_t)s->kv * hk * d, &grid);
        for (ci = 0; ci < copies; ci++) {
            const dim3 g((unsigned)grid, (unsigned)B);
            const int32_t *idx = c->d_indices + (size_t)ci * c->n_used;
            bench_to_pages_kernel<<<g, 256, 0, st>>>(s->k, c->k, v->kv8, idx, c->np, P, s->kv, hk, d, c->ps, c->ts,
                                                     c->hs, v->layout == L_VEC, 0, c->d_pds_k, ds_k);
            bench_to_pages_kernel<<<g, 256, 0, st>>>(s->v, c->vv, v->kv8, idx, c->np, P, s->kv, hk, d, c->ps, c->ts,
                                                     c->hs, v->layout == L_VEC, 1, c->d_pds_v, ds_v);
            CUDA_CHECK(cudaGetLastError());
        }
        free(perm); free(indptr); free(last); free(bt);
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    c->args = (fmha_decode_args *)xmalloc(sizeof(fmha_decode_args) * (size_t)copies);
    return 0;
}

/* ------------------------------------------------------------------------------------
 * Workspace (grown as plans ask) and timing
 * --------------------------------------------------------------------------------- */
static void *g_ws;
static size_t g_ws_size;

/* Makes room for plan->workspace_size bytes: 0, or -1 when the device is full. */
static int ensure_workspace(size_t need)
{
    if (need <= g_ws_size) return 0;
    dfree(g_ws);
    g_ws = dmalloc_try(need);   /* cudaMalloc: 256-byte aligned */
    g_ws_size = g_ws ? need : 0;
    return g_ws ? 0 : -1;
}

typedef struct bench_timer {
    cudaStream_t st;
    cudaEvent_t e0[BENCH_MAX_RUNS], e1[BENCH_MAX_RUNS];
    float times[BENCH_MAX_RUNS];
    double target_s;
    double b2b_ms;   /* the last run's calls back to back: ms a call */
} bench_timer;

/* One timed unit of work, i-th of a run (the callee rotates its inputs on i). */
typedef void (*bench_launch_fn)(void *ctx, int i, cudaStream_t st);

/* Median ms of launch(ctx, i) (warm-up sized to ~BENCH_WARMUP_S, runs to ~target_s). */
static double time_median(bench_timer *tm, bench_launch_fn launch, void *ctx, int *runs_out)
{
    float est = 0.f;
    double per;
    int i, k = 0, nwarm, runs;
    launch(ctx, k++, tm->st);   /* first call: lazy setup out of the estimate */
    CUDA_CHECK(cudaEventRecord(tm->e0[0], tm->st));
    for (i = 0; i < 3; i++) launch(ctx, k++, tm->st);
    CUDA_CHECK(cudaEventRecord(tm->e1[0], tm->st));
    CUDA_CHECK(cudaEventSynchronize(tm->e1[0]));
    CUDA_CHECK(cudaEventElapsedTime(&est, tm->e0[0], tm->e1[0]));
    per = est / 3.0 > 1e-3 ? est / 3.0 : 1e-3;
    nwarm = (int)(BENCH_WARMUP_S * 1e3 / per);
    if (nwarm < BENCH_MIN_WARMUP) nwarm = BENCH_MIN_WARMUP;
    if (nwarm > 500) nwarm = 500;
    runs = (int)(tm->target_s * 1e3 / per);
    if (runs < BENCH_MIN_RUNS) runs = BENCH_MIN_RUNS;
    if (runs > BENCH_MAX_RUNS) runs = BENCH_MAX_RUNS;
    for (i = 0; i < nwarm; i++) launch(ctx, k++, tm->st);
    for (i = 0; i < runs; i++) {
        CUDA_CHECK(cudaEventRecord(tm->e0[i], tm->st));
        launch(ctx, k++, tm->st);
        CUDA_CHECK(cudaEventRecord(tm->e1[i], tm->st));
    }
    CUDA_CHECK(cudaStreamSynchronize(tm->st));
    CUDA_CHECK(cudaGetLastError());
    for (i = 0; i < runs; i++) CUDA_CHECK(cudaEventElapsedTime(&tm->times[i], tm->e0[i], tm->e1[i]));
    /* the same calls back to back, one event pair around them all: as a
     * model's layers run (no event between two calls, so a call's first
     * kernel starts as a programmatic dependent of the previous call's last) */
    {
        float all = 0.f;
        CUDA_CHECK(cudaEventRecord(tm->e0[0], tm->st));
        for (i = 0; i < runs; i++) launch(ctx, k++, tm->st);
        CUDA_CHECK(cudaEventRecord(tm->e1[0], tm->st));
        CUDA_CHECK(cudaEventSynchronize(tm->e1[0]));
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaEventElapsedTime(&all, tm->e0[0], tm->e1[0]));
        tm->b2b_ms = all / runs;
    }
    qsort(tm->times, (size_t)runs, sizeof(float), ex_cmp_float);
    if (runs_out) *runs_out = runs;
    return (runs & 1) ? tm->times[runs / 2] : 0.5 * ((double)tm->times[runs / 2 - 1] + tm->times[runs / 2]);
}

/* One decode call, rotating over the copies. */
typedef struct decode_ctx {
    const fmha_decode_plan *plan;
    const fmha_decode_args *args;
    int copies;
} decode_ctx;

static void launch_decode(void *ctx, int i, cudaStream_t st)
{
    const decode_ctx *c = (const decode_ctx *)ctx;
    FMHA_CHECK(fmha_decode_run(c->plan, &c->args[i % c->copies], (void *)st));
}

/* One model step: every layer's call in order (layer l on copy l). */
static void launch_step(void *ctx, int i, cudaStream_t st)
{
    const decode_ctx *c = (const decode_ctx *)ctx;
    int l;
    (void)i;
    for (l = 0; l < c->copies; l++) FMHA_CHECK(fmha_decode_run(c->plan, &c->args[l], (void *)st));
}

static void launch_graph(void *ctx, int i, cudaStream_t st)
{
    (void)i;
    CUDA_CHECK(cudaGraphLaunch(*(cudaGraphExec_t *)ctx, st));
}

typedef struct copy_ctx {
    void *dst;
    const void *src;
    size_t bytes;
} copy_ctx;

static void launch_copy(void *ctx, int i, cudaStream_t st)
{
    const copy_ctx *c = (const copy_ctx *)ctx;
    (void)i;
    CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, st));
}

/* ------------------------------------------------------------------------------------
 * Output check
 * --------------------------------------------------------------------------------- */
static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* rel-L2 of a device output [nq] bf16 against the host reference; -1 on a
 * non-finite element. */
static double rel_l2(const uint16_t *d_out, const uint16_t *h_ref, size_t n)
{
    uint16_t *h = (uint16_t *)xmalloc(n * 2);
    double num = 0.0, den = 0.0;
    size_t i;
    CUDA_CHECK(cudaMemcpy(h, d_out, n * 2, cudaMemcpyDeviceToHost));
    for (i = 0; i < n; i++) {
        const double x = bf16_to_f32(h_ref[i]), y = bf16_to_f32(h[i]), dd = y - x;
        if (!isfinite(x) || !isfinite(y)) { free(h); return -1.0; }
        num += dd * dd;
        den += x * x;
    }
    free(h);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ------------------------------------------------------------------------------------
 * Results
 * --------------------------------------------------------------------------------- */
typedef struct bench_row {
    bench_shape s;               /* shape fields only (no pointers used)        */
    bench_var v;
    int splits_req, splits, copies, runs;
    double us, tbps, tok_s, rel;
    double b2b_us, b2b_tbps;     /* the calls back to back (time_median)        */
    char kernel[192], combine[192], why[256];
} bench_row;

typedef struct graph_row {
    bench_shape s;
    bench_var v;
    int layers, splits;
    double plain_us, graph_us, tbps_graph, rel;
    char kernel[192];
} graph_row;

static bench_row *g_rows;
static int g_nrows, g_caprows;
static graph_row *g_grows;
static int g_ngrows, g_capgrows;

/* Room for one more element in a growing array (*cap doubles), zeroed. */
static void *grow_one(void *arr, int n, int *cap, size_t elem)
{
    if (n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        arr = realloc(arr, elem * (size_t)*cap);
        if (!arr) { fprintf(stderr, "bench_decode: out of host memory\n"); exit(1); }
    }
    memset((char *)arr + elem * (size_t)n, 0, elem);
    return arr;
}

static bench_row *new_row(void)
{
    g_rows = (bench_row *)grow_one(g_rows, g_nrows, &g_caprows, sizeof(bench_row));
    return &g_rows[g_nrows++];
}

static graph_row *new_grow(void)
{
    g_grows = (graph_row *)grow_one(g_grows, g_ngrows, &g_capgrows, sizeof(graph_row));
    return &g_grows[g_ngrows++];
}

/* Does this bench's kernel set declare rows for the variant at head dim d? A plan
 * without a kernel there is a skip, not an error. */
static int bench_declared(const bench_var *v, int d)
{
    if (v->kv8) return d <= 128 && d % 16 == 0 && v->layout != L_VEC;
    if (v->layout == L_VEC) return d <= 128;
    return d <= 128 || BENCH_HD_OTHER;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

/* ------------------------------------------------------------------------------------
 * One variant: plan, check, time (every split count asked for)
 * --------------------------------------------------------------------------------- */
static void run_variant(const bench_opts *opt, const bench_shape *s, const bench_var *v, double l2,
                        double copy_tbps, bench_timer *tm, int *nerr)
{
    bench_cache c;
    char sn[64], vn[64], dn[32];
    const double bytes = kv_bytes(s, v->kv8);
    const int copies = rotation_copies(bytes, l2);
    int si;

    shape_name(s, sn, sizeof(sn));
    var_name(v, vn, sizeof(vn));
    var_dtype_name(v, dn, sizeof(dn));
    if (build_cache(s, v, copies, &c, tm->st) != 0) {
        printf("%-26s | %-22s | %-11s | skipped: out of device memory (%d copies of %.2f GB)\n", sn, vn, dn, copies,
               bytes * 1e-9);
        fflush(stdout);
        return;
    }
    for (si = 0; si < opt->nsplits; si++) {
        fmha_decode_plan plan;
        fmha_status st;
        decode_ctx ctx;
        bench_row *r;
        int ci;
        make_args(s, &c, 0, opt->splits[si], &c.args[0]);
        st = fmha_decode_plan_make(&bench_set, &c.args[0], &plan);
        if (st != FMHA_OK) {
            const int skip = st == FMHA_ERR_NO_KERNEL && !bench_declared(v, s->d);
            printf("%-26s | %-22s | %-11s | splits %d: %s: %s%s\n", sn, vn, dn, opt->splits[si], fmha_status_str(st),
                   fmha_last_error(), skip ? " (not in this bench's kernel set: skipped)" : "");
            if (!skip) (*nerr)++;
            fflush(stdout);
            continue;
        }
        if (ensure_workspace(plan.workspace_size) != 0) {
            printf("%-26s | %-22s | %-11s | skipped: no room for a %zu-byte workspace\n", sn, vn, dn,
                   plan.workspace_size);
            continue;
        }
        for (ci = 0; ci < copies; ci++) {
            make_args(s, &c, ci, opt->splits[si], &c.args[ci]);
            c.args[ci].workspace = g_ws;
            c.args[ci].workspace_size = g_ws_size;
        }
        r = new_row();
        r->s = *s;
        r->v = *v;
        r->splits_req = opt->splits[si];
        r->splits = plan.num_splits;
        r->copies = copies;
        snprintf(r->kernel, sizeof(r->kernel), "%s", plan.kernel ? plan.kernel->name : "?");
        snprintf(r->combine, sizeof(r->combine), "%s", plan.combine ? plan.combine->name : "-");
        snprintf(r->why, sizeof(r->why), "%s", plan.why ? plan.why : "");

        /* check copy 0 (the reference's K, V and Q) before timing */
        CUDA_CHECK(cudaMemsetAsync(c.o, 0xFF, s->nq * 2, tm->st));
        FMHA_CHECK(fmha_decode_run(&plan, &c.args[0], (void *)tm->st));
        CUDA_CHECK(cudaStreamSynchronize(tm->st));
        CUDA_CHECK(cudaGetLastError());
        r->rel = rel_l2(c.o, s->h_ref, s->nq);
        if (r->rel < 0 || r->rel > (v->kv8 ? BENCH_TOL8 : BENCH_TOL16)) {
            fprintf(stderr, "bench_decode: %s | %s | %s | splits %d: output differs from the contiguous bf16 "
                            "reference (rel-L2 %g%s)\n", sn, vn, dn, plan.num_splits, r->rel,
                    r->rel < 0 ? ", non-finite" : "");
            (*nerr)++;
        }

        ctx.plan = &plan; ctx.args = c.args; ctx.copies = copies;
        r->us = 1e3 * time_median(tm, launch_decode, &ctx, &r->runs);
        r->tbps = bytes / (r->us * 1e-6) / 1e12;
        r->tok_s = (double)s->batch * s->kv / (r->us * 1e-6);
        r->b2b_us = 1e3 * tm->b2b_ms;
        r->b2b_tbps = bytes / (r->b2b_us * 1e-6) / 1e12;
        printf("%-26s | %-22s | %-11s | splits %3d%s | %9.2f us | %6.3f TB/s", sn, vn, dn, r->splits,
               r->splits_req ? "      " : " (heu)", r->us, r->tbps);
        if (copy_tbps > 0) printf(" | %5.1f%% copy", 100.0 * r->tbps / copy_tbps);
        printf(" | b2b %8.2f us %6.3f TB/s", r->b2b_us, r->b2b_tbps);
        printf(" | %.3g tok/s | rel %.1e | x%d | %s%s%s\n", r->tok_s, r->rel, copies, r->kernel,
               plan.combine ? " + " : "", plan.combine ? r->combine : "");
        fflush(stdout);
    }
    free_cache(&c);
}

/* --graph_layers: one step of `layers` calls on `layers` caches, graph vs plain. */
static void run_graph(const bench_opts *opt, const bench_shape *s, const bench_var *v, bench_timer *tm, int *nerr)
{
    const int L = opt->graph_layers;
    const double bytes = kv_bytes(s, v->kv8);
    bench_cache c;
    fmha_decode_plan plan;
    fmha_status st;
    decode_ctx ctx;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t ce;
    graph_row *g;
    char sn[64], vn[64];
    int l, runs;

    shape_name(s, sn, sizeof(sn));
    var_name(v, vn, sizeof(vn));
    if (bytes * L > opt->max_gb * 1e9) {
        printf("graph %-26s | %-22s | skipped: %d layers need %.1f GB > --max_gb %g\n", sn, vn, L, bytes * L * 1e-9,
               opt->max_gb);
        return;
    }
    if (build_cache(s, v, L, &c, tm->st) != 0) {
        printf("graph %-26s | %-22s | skipped: out of device memory\n", sn, vn);
        return;
    }
    make_args(s, &c, 0, 0, &c.args[0]);
    st = fmha_decode_plan_make(&bench_set, &c.args[0], &plan);
    if (st != FMHA_OK) {
        printf("graph %-26s | %-22s | %s: %s\n", sn, vn, fmha_status_str(st), fmha_last_error());
        (*nerr)++;
        free_cache(&c);
        return;
    }
    if (ensure_workspace(plan.workspace_size) != 0) {
        printf("graph %-26s | %-22s | skipped: no room for the workspace\n", sn, vn);
        free_cache(&c);
        return;
    }
    for (l = 0; l < L; l++) {   /* one workspace: the layers run one after another */
        make_args(s, &c, l, 0, &c.args[l]);
        c.args[l].workspace = g_ws;
        c.args[l].workspace_size = g_ws_size;
    }
    g = new_grow();
    g->s = *s; g->v = *v; g->layers = L; g->splits = plan.num_splits;
    snprintf(g->kernel, sizeof(g->kernel), "%s", plan.kernel ? plan.kernel->name : "?");
    ctx.plan = &plan; ctx.args = c.args; ctx.copies = L;

    /* plain launches first: they also do any first-launch setup outside the capture */
    g->plain_us = 1e3 * time_median(tm, launch_step, &ctx, &runs);

    CUDA_CHECK(cudaStreamBeginCapture(tm->st, cudaStreamCaptureModeThreadLocal));
    for (l = 0; l < L; l++) {
        st = fmha_decode_run(&plan, &c.args[l], (void *)tm->st);
        if (st != FMHA_OK) break;
    }
    ce = cudaStreamEndCapture(tm->st, &graph);
    if (st != FMHA_OK || ce != cudaSuccess) {
        printf("graph %-26s | %-22s | capture failed: %s\n", sn, vn,
               st != FMHA_OK ? fmha_last_error() : cudaGetErrorString(ce));
        (void)cudaGetLastError();
        if (graph) cudaGraphDestroy(graph);
        g_ngrows--;
        (*nerr)++;
        free_cache(&c);
        return;
    }
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    g->graph_us = 1e3 * time_median(tm, launch_graph, &exec, &runs);
    g->tbps_graph = bytes * L / (g->graph_us * 1e-6) / 1e12;

    /* the replay's layer 0 ran on the reference's K, V and Q */
    CUDA_CHECK(cudaMemsetAsync(c.o, 0xFF, s->nq * 2, tm->st));
    CUDA_CHECK(cudaGraphLaunch(exec, tm->st));
    CUDA_CHECK(cudaStreamSynchronize(tm->st));
    g->rel = rel_l2(c.o, s->h_ref, s->nq);
    if (g->rel < 0 || g->rel > (v->kv8 ? BENCH_TOL8 : BENCH_TOL16)) {
        fprintf(stderr, "bench_decode: graph %s | %s: layer 0 differs from the reference (rel-L2 %g)\n", sn, vn,
                g->rel);
        (*nerr)++;
    }
    printf("graph %-26s | %-22s | %d layers, splits %d | graph %8.1f us/step %7.2f us/layer (%.3f TB/s) | "
           "plain %8.1f us/step %7.2f us/layer | launch cost %.2f us/layer\n",
           sn, vn, L, g->splits, g->graph_us, g->graph_us / L, g->tbps_graph, g->plain_us, g->plain_us / L,
           (g->plain_us - g->graph_us) / L);
    fflush(stdout);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    free_cache(&c);
}

/* ------------------------------------------------------------------------------------
 * main
 * --------------------------------------------------------------------------------- */
static int same_point(const bench_row *a, const bench_row *b)
{
    return a->s.batch == b->s.batch && a->s.kv == b->s.kv && a->s.hq == b->s.hq && a->s.hk == b->s.hk &&
           a->s.d == b->s.d && a->s.sq == b->s.sq && a->v.layout == b->v.layout && a->splits_req == b->splits_req &&
           (a->v.layout == L_CONTIG || (a->v.table == b->v.table && a->v.page == b->v.page));
}

static void free_shape(bench_shape *s)
{
    dfree(s->k); dfree(s->v); dfree(s->q); dfree(s->o_ref); dfree(s->d_seqk); dfree(s->d_tds);
    free(s->h_ref);
    s->k = s->v = s->q = s->o_ref = s->h_ref = NULL;
    s->d_seqk = NULL;
    s->d_tds = NULL;
}

/* The reference output o_ref: the contiguous bf16 cache (one copy), the plan's
 * heuristic split count. 0, or -1 (printed; an error unless this bench's set has
 * no kernel for the head dim). */
static int run_reference(bench_shape *s, cudaStream_t stream, const char *sn, int *nerr)
{
    bench_cache rc;
    fmha_decode_plan plan;
    fmha_decode_args a;
    fmha_status st;
    memset(&rc, 0, sizeof(rc));
    rc.q = s->q; rc.o = s->o_ref; rc.k = (char *)s->k; rc.vv = (char *)s->v; rc.esz = 2;
    rc.v.layout = L_CONTIG;
    rc.copies = 1;
    make_args(s, &rc, 0, 0, &a);
    st = fmha_decode_plan_make(&bench_set, &a, &plan);
    if (st != FMHA_OK) {
        bench_var bv;
        memset(&bv, 0, sizeof(bv));
        bv.layout = L_CONTIG;
        if (st == FMHA_ERR_NO_KERNEL && !bench_declared(&bv, s->d)) {
            printf("%-26s | skipped: no kernel in this bench's set (%s)\n", sn, fmha_last_error());
            return -1;
        }
        printf("%-26s | reference (contig bf16): %s: %s\n", sn, fmha_status_str(st), fmha_last_error());
        (*nerr)++;
        return -1;
    }
    if (ensure_workspace(plan.workspace_size) != 0) {
        printf("%-26s | skipped: no room for a %zu-byte workspace\n", sn, plan.workspace_size);
        return -1;
    }
    a.workspace = g_ws;
    a.workspace_size = g_ws_size;
    st = fmha_decode_run(&plan, &a, (void *)stream);
    if (st != FMHA_OK) {
        printf("%-26s | reference (contig bf16): %s: %s\n", sn, fmha_status_str(st), fmha_last_error());
        (*nerr)++;
        return -1;
    }
    return 0;
}

/* One shape: the reference (contiguous bf16 cache, one copy), every cache variant
 * asked for, then the graph step of each layout. */
static void run_shape(const bench_opts *opt, int batch, int kv, int hq, int hk, int d, int sq, double l2,
                      double copy_tbps, bench_timer *tm, int *nerr)
{
    bench_shape s;
    char sn[64];
    int grid, i, il, it, ip, idt, isc;
    size_t n;
    const float tds[4] = { 1.0f / 256.0f, 1.0f / 256.0f, 1.0f, 1.0f };   /* e4m3 exact: see the fill */
    memset(&s, 0, sizeof(s));
    s.batch = batch; s.kv = kv; s.hq = hq; s.hk = hk; s.d = d; s.sq = sq;
    s.nq = (size_t)s.batch * s.sq * s.hq * s.d;
    s.nkv = (size_t)s.batch * s.kv * s.hk * s.d;
    shape_name(&s, sn, sizeof(sn));
    if (s.hq % s.hk) {
        printf("%-26s | skipped: nhead_q %% nhead_k != 0\n", sn);
        return;
    }
    if (kv_bytes(&s, 0) > opt->max_gb * 1e9) {
        printf("%-26s | skipped: bf16 K+V %.1f GB > --max_gb %g\n", sn, kv_bytes(&s, 0) * 1e-9, opt->max_gb);
        return;
    }
    /* the reference: the contiguous bf16 cache, one copy */
    s.k = (uint16_t *)dmalloc_try(s.nkv * 2);
    s.v = (uint16_t *)dmalloc_try(s.nkv * 2);
    s.q = (uint16_t *)dmalloc_try(s.nq * 2);
    s.o_ref = (uint16_t *)dmalloc_try(s.nq * 2);
    s.d_seqk = (int32_t *)dmalloc_try(sizeof(int32_t) * (size_t)s.batch);
    s.d_tds = (float *)dmalloc_try(sizeof(tds));
    if (!s.k || !s.v || !s.q || !s.o_ref || !s.d_seqk || !s.d_tds) {
        printf("%-26s | skipped: out of device memory\n", sn);
        free_shape(&s);
        return;
    }
    {
        int32_t *hs = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)s.batch);
        for (i = 0; i < s.batch; i++) hs[i] = s.kv;
        CUDA_CHECK(cudaMemcpy(s.d_seqk, hs, sizeof(int32_t) * (size_t)s.batch, cudaMemcpyHostToDevice));
        free(hs);
    }
    CUDA_CHECK(cudaMemcpy(s.d_tds, tds, sizeof(tds), cudaMemcpyHostToDevice));
    bench_grid(s.nkv, &grid);
    bench_fill_e4m3_exact_kernel<<<grid, 256, 0, tm->st>>>(s.k, s.nkv, 0x201u + (uint32_t)s.kv);
    bench_fill_e4m3_exact_kernel<<<grid, 256, 0, tm->st>>>(s.v, s.nkv, 0x302u + (uint32_t)s.kv);
    bench_grid(s.nq, &grid);
    bench_fill_kernel<<<grid, 256, 0, tm->st>>>(s.q, s.nq, 0x103u + (uint32_t)s.batch);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemsetAsync(s.o_ref, 0xFF, s.nq * 2, tm->st));
    if (run_reference(&s, tm->st, sn, nerr) != 0) {
        free_shape(&s);
        return;
    }
    CUDA_CHECK(cudaStreamSynchronize(tm->st));
    CUDA_CHECK(cudaGetLastError());
    s.h_ref = (uint16_t *)xmalloc(s.nq * 2);
    CUDA_CHECK(cudaMemcpy(s.h_ref, s.o_ref, s.nq * 2, cudaMemcpyDeviceToHost));
    for (n = 0; n < s.nq; n++)
        if (!isfinite(bf16_to_f32(s.h_ref[n]))) {
            fprintf(stderr, "bench_decode: %s: the contiguous bf16 reference has a non-finite output\n", sn);
            (*nerr)++;
            break;
        }

    /* every variant: layouts x (tables x pages) x dtypes (x scales) */
    for (il = 0; il < opt->nlayouts; il++) {
        const int layout = opt->layouts[il];
        const int nt = layout == L_CONTIG ? 1 : opt->ntables;
        const int np = layout == L_CONTIG ? 1 : opt->npages;
        for (ip = 0; ip < np; ip++)
            for (it = 0; it < nt; it++)
                for (idt = 0; idt < opt->nkvdt; idt++)
                    for (isc = 0; isc < (opt->kvdt[idt] ? opt->nscales : 1); isc++) {
                        bench_var v;
                        memset(&v, 0, sizeof(v));
                        v.layout = layout;
                        v.page = layout == L_CONTIG ? 0 : opt->pages[ip];
                        v.table = layout == L_CONTIG ? 0 : opt->tables[it];
                        v.kv8 = opt->kvdt[idt];
                        v.scale = v.kv8 ? (fmha_kv_scale)opt->scales[isc] : FMHA_KV_SCALE_NONE;
                        /* e4m3 KV: LINEAR or contiguous; per-page descales need pages */
                        if (v.kv8 && (layout == L_VEC ||
                                      (layout == L_CONTIG && v.scale == FMHA_KV_SCALE_PER_PAGE)))
                            continue;
                        if (layout == L_VEC && v.page % 8) {
                            if (idt == 0 && it == 0)
                                printf("%-26s | vectorized p%d skipped (a multiple of 8 needed)\n", sn, v.page);
                            continue;
                        }
                        run_variant(opt, &s, &v, l2, copy_tbps, tm, nerr);
                    }
    }
    if (opt->graph_layers > 0)
        for (il = 0; il < opt->nlayouts; il++) {
            bench_var v;
            memset(&v, 0, sizeof(v));
            v.layout = opt->layouts[il];
            if (v.layout != L_CONTIG) {
                v.page = opt->pages[0];
                v.table = opt->tables[0];
                if (v.layout == L_VEC && v.page % 8) continue;
            }
            run_graph(opt, &s, &v, tm, nerr);
        }
    free_shape(&s);
}

/* The markdown table, the fp8/bf16 ratios and the graph lines. */
static void print_summary(double copy_tbps)
{
    int i;
    printf("\n| shape | cache | KV dtype | splits | us/call | TB/s | %% copy | back to back us | TB/s | %% copy "
           "| tokens/s | kernel |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (i = 0; i < g_nrows; i++) {
        const bench_row *r = &g_rows[i];
        char sn[64], vn[64], dn[32];
        shape_name(&r->s, sn, sizeof(sn));
        var_name(&r->v, vn, sizeof(vn));
        var_dtype_name(&r->v, dn, sizeof(dn));
        printf("| %s | %s | %s | %d%s | %.2f | %.3f | ", sn, vn, dn, r->splits, r->splits_req ? "" : " (heu)", r->us,
               r->tbps);
        if (copy_tbps > 0) printf("%.1f", 100.0 * r->tbps / copy_tbps);
        else printf("-");
        printf(" | %.2f | %.3f | ", r->b2b_us, r->b2b_tbps);
        if (copy_tbps > 0) printf("%.1f", 100.0 * r->b2b_tbps / copy_tbps);
        else printf("-");
        printf(" | %.3g | `%s` |\n", r->tok_s, r->kernel);
    }
    if (copy_tbps > 0) printf("\ncopy 1 GiB device to device: %.3f TB/s (read + write)\n", copy_tbps);

    /* fp8/bf16 tokens/s of every e4m3 row with its bf16 twin */
    {
        int header = 0;
        for (i = 0; i < g_nrows; i++) {
            const bench_row *r8 = &g_rows[i];
            int j;
            if (!r8->v.kv8) continue;
            for (j = 0; j < g_nrows; j++) {
                const bench_row *r16 = &g_rows[j];
                char sn[64], vn[64];
                if (r16->v.kv8 || !same_point(r8, r16)) continue;
                if (!header) printf("\nfp8 KV vs bf16 KV, tokens/s ratio (same shape, cache and split request):\n");
                header = 1;
                shape_name(&r8->s, sn, sizeof(sn));
                var_name(&r8->v, vn, sizeof(vn));
                printf("fp8/bf16 %-26s | %-22s | descales %-6s | %.3fx (%.2f vs %.2f us; splits %d vs %d) | back to "
                       "back %.3fx\n", sn, vn, scale_names[r8->v.scale], r16->us / r8->us, r8->us, r16->us, r8->splits,
                       r16->splits, r16->b2b_us / r8->b2b_us);
                break;
            }
        }
    }
    if (g_ngrows) {
        printf("\nCUDA graph, one model step (layer l on cache l, one plan):\n");
        for (i = 0; i < g_ngrows; i++) {
            const graph_row *g = &g_grows[i];
            char sn[64], vn[64];
            shape_name(&g->s, sn, sizeof(sn));
            var_name(&g->v, vn, sizeof(vn));
            printf("graph %-26s | %-22s | %d layers | graph %.1f us/step (%.2f us/layer, %.3f TB/s) | plain %.1f "
                   "us/step (%.2f us/layer) | launch cost %.2f us/layer\n",
                   sn, vn, g->layers, g->graph_us, g->graph_us / g->layers, g->tbps_graph, g->plain_us,
                   g->plain_us / g->layers, (g->plain_us - g->graph_us) / g->layers);
        }
    }
}

/* The JSON of every point (bench/run_decode.sh reads it): 0, or 1 on a write error. */
static int write_json(const char *path, const char *device, int sms, double l2, double copy_tbps, int quick)
{
    FILE *f = fopen(path, "w");
    int i, j, first = 1;
    if (!f) { perror(path); return 1; }
    fprintf(f, "{\"device\": ");
    json_str(f, device);
    fprintf(f, ", \"sms\": %d, \"l2_mb\": %.1f, \"copy_tbps\": %.4f, \"quick\": %s, \"rows\": [\n",
            sms, l2 / (1 << 20), copy_tbps, quick ? "true" : "false");
    for (i = 0; i < g_nrows; i++) {
        const bench_row *r = &g_rows[i];
        fprintf(f, " {\"batch\": %d, \"kv\": %d, \"hq\": %d, \"hk\": %d, \"hdim\": %d, \"seqlen_q\": %d, "
                   "\"layout\": \"%s\", \"table\": \"%s\", \"page\": %d, \"kv_dtype\": \"%s\", "
                   "\"kv_scale\": \"%s\", \"splits_req\": %d, \"splits\": %d, \"copies\": %d, \"runs\": %d, "
                   "\"us\": %.4f, \"tbps\": %.4f, \"b2b_us\": %.4f, \"b2b_tbps\": %.4f, \"tokens_per_s\": %.6g, "
                   "\"rel_l2\": %.3g, \"kernel\": ",
                r->s.batch, r->s.kv, r->s.hq, r->s.hk, r->s.d, r->s.sq, layout_names[r->v.layout],
                r->v.layout == L_CONTIG ? "-" : table_names[r->v.table], r->v.page, dtype_names[r->v.kv8],
                scale_names[r->v.scale], r->splits_req, r->splits, r->copies, r->runs, r->us, r->tbps,
                r->b2b_us, r->b2b_tbps, r->tok_s, r->rel);
        json_str(f, r->kernel);
        fprintf(f, ", \"combine\": ");
        json_str(f, r->combine);
        fprintf(f, ", \"why\": ");
        json_str(f, r->why);
        fprintf(f, "}%s\n", i + 1 < g_nrows ? "," : "");
    }
    fprintf(f, "], \"graph\": [\n");
    for (i = 0; i < g_ngrows; i++) {
        const graph_row *g = &g_grows[i];
        fprintf(f, " {\"batch\": %d, \"kv\": %d, \"hq\": %d, \"hk\": %d, \"hdim\": %d, \"seqlen_q\": %d, "
                   "\"layout\": \"%s\", \"table\": \"%s\", \"page\": %d, \"layers\": %d, \"splits\": %d, "
                   "\"graph_us_step\": %.3f, \"plain_us_step\": %.3f, \"graph_us_layer\": %.4f, "
                   "\"plain_us_layer\": %.4f, \"graph_tbps\": %.4f, \"rel_l2\": %.3g, \"kernel\": ",
                g->s.batch, g->s.kv, g->s.hq, g->s.hk, g->s.d, g->s.sq, layout_names[g->v.layout],
                g->v.layout == L_CONTIG ? "-" : table_names[g->v.table], g->v.page, g->layers, g->splits,
                g->graph_us, g->plain_us, g->graph_us / g->layers, g->plain_us / g->layers, g->tbps_graph,
                g->rel);
        json_str(f, g->kernel);
        fprintf(f, "}%s\n", i + 1 < g_ngrows ? "," : "");
    }
    fprintf(f, "], \"fp8_ratios\": [\n");
    for (i = 0; i < g_nrows; i++) {
        const bench_row *r8 = &g_rows[i];
        if (!r8->v.kv8) continue;
        for (j = 0; j < g_nrows; j++) {
            const bench_row *r16 = &g_rows[j];
            if (r16->v.kv8 || !same_point(r8, r16)) continue;
            fprintf(f, "%s {\"batch\": %d, \"kv\": %d, \"hq\": %d, \"hk\": %d, \"hdim\": %d, \"seqlen_q\": %d, "
                       "\"layout\": \"%s\", \"table\": \"%s\", \"page\": %d, \"kv_scale\": \"%s\", "
                       "\"splits_req\": %d, \"bf16_us\": %.4f, \"fp8_us\": %.4f, \"tokens_ratio\": %.4f}",
                    first ? "" : ",\n", r8->s.batch, r8->s.kv, r8->s.hq, r8->s.hk, r8->s.d, r8->s.sq,
                    layout_names[r8->v.layout], r8->v.layout == L_CONTIG ? "-" : table_names[r8->v.table],
                    r8->v.page, scale_names[r8->v.scale], r8->splits_req, r16->us, r8->us, r16->us / r8->us);
            first = 0;
            break;
        }
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) { perror(path); return 1; }
    printf("bench_decode: wrote %s\n", path);
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts opt;
    bench_timer *tm;
    struct cudaDeviceProp prop;
    int ndev = 0, dev = 0, nerr = 0, i, ib, ik, iq, ih, id, is;
    double l2, copy_tbps = 0.0;
    cudaError_t e;

    if (bench_parse_opts(argc, argv, &opt) != 0) { bench_usage(stderr); return 2; }
    e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP bench_decode: no GPU\n");
        return 0;
    }
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    l2 = prop.l2CacheSize > 0 ? (double)prop.l2CacheSize : 50e6;
    tm = (bench_timer *)xmalloc(sizeof(bench_timer));
    tm->target_s = opt.target_s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&tm->st, cudaStreamNonBlocking));
    for (i = 0; i < BENCH_MAX_RUNS; i++) {
        CUDA_CHECK(cudaEventCreate(&tm->e0[i]));
        CUDA_CHECK(cudaEventCreate(&tm->e1[i]));
    }
    printf("bench_decode: %s (sm_%d%d, %d SMs, L2 %.0f MB); bf16 queries, K+V bytes read / time\n", prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, l2 / (1 << 20));

    /* ---- the ceiling: a 1 GiB device-to-device copy (read + write bytes) ------------ */
    {
        copy_ctx cc;
        int runs;
        cc.bytes = BENCH_COPY_BYTES;
        cc.src = dmalloc_try(cc.bytes);
        cc.dst = dmalloc_try(cc.bytes);
        if (cc.src && cc.dst) {
            double ms;
            CUDA_CHECK(cudaMemset((void *)cc.src, 0x3c, cc.bytes));
            ms = time_median(tm, launch_copy, &cc, &runs);
            copy_tbps = 2.0 * (double)cc.bytes / (ms * 1e-3) / 1e12;
            printf("bench_decode: copy 1 GiB device to device: %.1f us, %.3f TB/s (read + write)\n", ms * 1e3,
                   copy_tbps);
        } else {
            printf("bench_decode: copy bandwidth skipped (no room for 2 GiB)\n");
        }
        dfree((void *)cc.src);
        dfree(cc.dst);
    }
    fflush(stdout);

    for (id = 0; id < opt.nhdim; id++)
        for (ih = 0; ih < opt.nhq; ih++)
            for (ik = 0; ik < opt.nhk; ik++)
                for (iq = 0; iq < opt.nsq; iq++)
                    for (ib = 0; ib < opt.nbatch; ib++)
                        for (is = 0; is < opt.nkv; is++)
                            run_shape(&opt, opt.batch[ib], opt.kv[is], opt.hq[ih], opt.hk[ik], opt.hdim[id],
                                      opt.sq[iq], l2, copy_tbps, tm, &nerr);

    print_summary(copy_tbps);
    if (opt.json_path) nerr += write_json(opt.json_path, prop.name, prop.multiProcessorCount, l2, copy_tbps, opt.quick);

    dfree(g_ws);
    for (i = 0; i < BENCH_MAX_RUNS; i++) {
        CUDA_CHECK(cudaEventDestroy(tm->e0[i]));
        CUDA_CHECK(cudaEventDestroy(tm->e1[i]));
    }
    CUDA_CHECK(cudaStreamDestroy(tm->st));
    free(tm);
    free(g_rows);
    free(g_grows);
    if (nerr) { fprintf(stderr, "bench_decode: %d error(s)\n", nerr); return 1; }
    return 0;
}
