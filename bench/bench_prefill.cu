/*
 * bench_prefill: paged batch prefill throughput against the same library's
 * contiguous varlen forward.
 *
 * One problem, the prefill-with-prefix case: bf16, hdim 128, 32 query heads on 8 KV
 * heads, causal bottom-right, batch 8, 1024 new tokens per sequence on top of a
 * prefix, total KV lengths 2048..3840 (23552 KV tokens in all). The same Q, K and V
 * run twice:
 *   contiguous  fmha_fwd in group mode, K/V [total_k, h_k, d] (bshd), seqstart_k
 *   paged       fmha_batch_prefill, K/V copied into a LINEAR [pages, page, h_k, d]
 *               pool (or VECTORIZED with --layouts), pages shuffled over the pool,
 *               SGLang 1-D or vLLM 2-D tables
 * at page sizes 1, 16, 64, 1024. Both use the default tuned tiles of their family.
 * FLOPs: 4 * h * d * (query, key) pairs under the mask, counted exactly. The paged
 * output is checked against the contiguous one (same math, same tiles: the
 * difference should be at rounding level), and the pool's unreferenced slots hold
 * NaN, so a stray read shows.
 *
 * Timing: each launch is bracketed by its own pair of device events after warm-up
 * launches; the time is the median of at least 20 launches (more for short ones, about
 * 0.3 s per point). Launches alternate between two copies of every input (each copy
 * of Q + K + V + O is several times the L2), so a launch never starts on data the
 * previous one left in L2. The contiguous time is measured right before each paged
 * row, so the ratio compares neighbours in time.
 *
 *   bench_prefill [--pages 1,16,64,1024] [--tables sglang,vllm] [--layouts linear]
 *                 [--batch 8] [--h 32] [--h_k 8] [--sq 1024] [--sk 2048:3840]
 *                 [--json out.json] [--strict] [--quick]
 *
 * --sk takes a comma list (one per sequence, or one for all) or min:max (spread
 * evenly over the batch). --quick: pages 1, 16, 1024, SGLang table only. --strict:
 * exit 1 when a ratio misses its target (>= 0.95 from page 16 up, >= 0.85 below).
 * Output: one line per measurement while running, then a markdown table
 *   | page | table | layout | paged TFLOPS | contiguous TFLOPS | ratio | target | kernel |
 * Exit status: 0 when every point ran and checked out, 1 on any error (CUDA error,
 * launch failure, a paged output that differs from the contiguous one), 2 on bad
 * options. Without a GPU: "SKIP bench_prefill: no GPU", exit 0.
 *
 * Build:
 *   nvcc -x cu -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a \
 *        -gencode=arch=compute_80,code=sm_80 -Iinclude bench/bench_prefill.cu \
 *        -o build/bench/bench_prefill
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"
#define EX_PROG "bench_prefill"
#define EX_BENCH
#include "../examples/example_util.h"

/* What the benchmark runs: bf16 d128 masked, forward and both prefill layouts. */
#define BENCH_ROWS(X)                                                                            \
    X(FWD,         BF16, 128, MASK, NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(PREFILL,     BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(PREFILL_VEC, BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(bench_set, BENCH_ROWS)

#define BENCH_D 128
#define BENCH_MAXB 256
#define BENCH_MAX_LIST 16
#define BENCH_MIN_RUNS 20
#define BENCH_MAX_RUNS 2000
#define BENCH_TARGET_S 0.3
#define BENCH_WARMUP_S 0.05
#define BENCH_MIN_WARMUP 3
#define BENCH_SETS 2

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "bench_prefill: out of host memory\n"); exit(1); }
    return p;
}

/* ------------------------------------------------------------------------------------
 * Device helpers: copy into pages (random fill: example_util.h)
 * --------------------------------------------------------------------------------- */
/* Token t of the contiguous [tk, h_k, d] tensor to slot tok_slot[t] of page
 * tok_page[t]: LINEAR (ts, hs strides) or VECTORIZED (K: [h][d/8][P][8],
 * V: [h][P/8][d][8]). One thread per element. */
static __global__ void bench_to_pages_kernel(const uint16_t *src, uint16_t *pool, const int32_t *tok_page,
                                             const int32_t *tok_slot, int tk, int hk, int d, int P, int64_t ps,
                                             int64_t ts, int64_t hs, int vec, int is_v)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    const size_t n = (size_t)tk * hk * d;
    for (; i < n; i += step) {
        const int x = (int)(i % d), h = (int)((i / d) % hk), t = (int)(i / ((size_t)d * hk));
        const int s = tok_slot[t];
        int64_t off;
        if (!vec) off = (int64_t)s * ts + (int64_t)h * hs + x;
        else if (!is_v) off = (int64_t)h * hs + (int64_t)(x >> 3) * P * 8 + (int64_t)s * 8 + (x & 7);
        else off = (int64_t)h * hs + (int64_t)(s >> 3) * d * 8 + (int64_t)x * 8 + (s & 7);
        pool[(int64_t)tok_page[t] * ps + off] = src[i];
    }
}

static void bench_grid(size_t n, int *grid)
{
    size_t g = (n + 255) / 256;
    *grid = (int)(g < 8192 ? (g > 0 ? g : 1) : 8192);
}

/* ------------------------------------------------------------------------------------
 * Options
 * --------------------------------------------------------------------------------- */
typedef struct bench_opts {
    int pages[BENCH_MAX_LIST], n_pages;
    int tables[2], n_tables;           /* 0 sglang, 1 vllm */
    int layouts[2], n_layouts;         /* 0 linear, 1 vectorized */
    int batch, h, h_k, sq;
    int sk[BENCH_MAXB];
    const char *json_path;
    int strict;
} bench_opts;

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: bench_prefill [--pages 1,16,64,1024] [--tables sglang,vllm] [--layouts linear,vectorized]\n"
            "                     [--batch 8] [--h 32] [--h_k 8] [--sq 1024] [--sk 2048:3840|list]\n"
            "                     [--json out.json] [--strict] [--quick]\n"
            "  bf16, hdim 128, causal bottom-right; paged fmha_batch_prefill vs contiguous group-mode fmha_fwd.\n");
}

static int parse_int_list(const char *s, int *out, int cap)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > (1L << 30) || n >= cap) return -1;
        out[n++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        p = end;
    }
    return n > 0 ? n : -1;
}

static int parse_names(const char *s, const char *a, const char *b, int *out)
{
    int n = 0;
    const char *p = s;
    while (*p && n < 2) {
        size_t len = strcspn(p, ",");
        if (len == strlen(a) && !strncmp(p, a, len)) out[n++] = 0;
        else if (len == strlen(b) && !strncmp(p, b, len)) out[n++] = 1;
        else return -1;
        p += len;
        if (*p == ',') p++;
    }
    return n > 0 && !*p ? n : -1;
}

static int bench_parse_opts(int argc, char **argv, bench_opts *o)
{
    static const int def_pages[4] = { 1, 16, 64, 1024 };
    const char *sk_str = "2048:3840";
    int i, quick = 0, set_pages = 0, set_tables = 0;
    memset(o, 0, sizeof(*o));
    o->batch = 8; o->h = 32; o->h_k = 8; o->sq = 1024;
    o->layouts[0] = 0; o->n_layouts = 1;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) { quick = 1; continue; }
        if (!strcmp(a, "--strict")) { o->strict = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { bench_usage(stdout); exit(0); }
        if (!val) { fprintf(stderr, "bench_prefill: %s needs a value\n", a); return -1; }
        if (!strcmp(a, "--pages")) { o->n_pages = parse_int_list(val, o->pages, BENCH_MAX_LIST); set_pages = 1; if (o->n_pages < 0) return -1; }
        else if (!strcmp(a, "--tables")) { o->n_tables = parse_names(val, "sglang", "vllm", o->tables); set_tables = 1; if (o->n_tables < 0) return -1; }
        else if (!strcmp(a, "--layouts")) { o->n_layouts = parse_names(val, "linear", "vectorized", o->layouts); if (o->n_layouts < 0) return -1; }
        else if (!strcmp(a, "--batch")) o->batch = atoi(val);
        else if (!strcmp(a, "--h")) o->h = atoi(val);
        else if (!strcmp(a, "--h_k")) o->h_k = atoi(val);
        else if (!strcmp(a, "--sq")) o->sq = atoi(val);
        else if (!strcmp(a, "--sk")) sk_str = val;
        else if (!strcmp(a, "--json")) o->json_path = val;
        else { fprintf(stderr, "bench_prefill: unknown option %s\n", a); return -1; }
        i++;
    }
    if (o->batch < 1 || o->batch > BENCH_MAXB || o->h < 1 || o->h_k < 1 || o->h % o->h_k || o->sq < 0) {
        fprintf(stderr, "bench_prefill: bad --batch/--h/--h_k/--sq\n");
        return -1;
    }
    if (!set_pages) {
        if (quick) { o->pages[0] = 1; o->pages[1] = 16; o->pages[2] = 1024; o->n_pages = 3; }
        else { memcpy(o->pages, def_pages, sizeof(def_pages)); o->n_pages = 4; }
    }
    if (!set_tables) {
        o->tables[0] = 0; o->tables[1] = 1; o->n_tables = quick ? 1 : 2;
    }
    for (i = 0; i < o->n_pages; i++)
        if (o->pages[i] < 1 || o->pages[i] > 2048 || (o->pages[i] & (o->pages[i] - 1))) {
            fprintf(stderr, "bench_prefill: page %d is not a power of two in 1..2048\n", o->pages[i]);
            return -1;
        }
    {   /* --sk: min:max spread evenly, or a list */
        int lo, hi, n;
        if (sscanf(sk_str, "%d:%d", &lo, &hi) == 2) {
            if (lo < 0 || hi < lo) return -1;
            for (i = 0; i < o->batch; i++)
                o->sk[i] = o->batch > 1 ? lo + (int)((long long)(hi - lo) * i / (o->batch - 1)) : lo;
        } else {
            n = parse_int_list(sk_str, o->sk, BENCH_MAXB);
            if (n == 1) for (i = 1; i < o->batch; i++) o->sk[i] = o->sk[0];
            else if (n != o->batch) { fprintf(stderr, "bench_prefill: --sk needs 1 or %d values\n", o->batch); return -1; }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------
 * Problem buffers
 * --------------------------------------------------------------------------------- */
typedef struct bench_copy {
    uint16_t *q, *k, *v, *o_contig, *o_paged;   /* q/o [tq, h, d], k/v [tk, h_k, d] */
    uint16_t *kpool, *vpool;                    /* for the page size being measured */
} bench_copy;

typedef struct bench_problem {
    int batch, h, h_k, sq[BENCH_MAXB], sk[BENCH_MAXB];
    int32_t ssq[BENCH_MAXB + 1], ssk[BENCH_MAXB + 1];
    int tq, tk, maxq;
    double flops;
    int32_t *dssq, *dssk;
    bench_copy set[BENCH_SETS];
    /* current pool */
    int page, table, layout, n_total;
    int64_t ps, ts, hs, bt_stride;
    int32_t *d_indptr, *d_indices, *d_last, *d_bt, *d_seqk, *d_tok_page, *d_tok_slot;
} bench_problem;

static void make_fwd_args(const bench_problem *pb, const bench_copy *c, fmha_fwd_args *a)
{
    memset(a, 0, sizeof(*a));
    a->dtype = FMHA_DTYPE_BF16;
    a->is_group_mode = 1;
    a->batch = pb->batch; a->nhead_q = pb->h; a->nhead_k = pb->h_k;
    a->max_seqlen_q = pb->maxq;
    a->hdim_q = a->hdim_v = BENCH_D;
    a->q = c->q; a->k = c->k; a->v = c->v; a->o = c->o_contig;
    a->seqstart_q = pb->dssq; a->seqstart_k = pb->dssk;
    a->stride_q = a->stride_o = (int64_t)pb->h * BENCH_D; a->nhead_stride_q = a->nhead_stride_o = BENCH_D;
    a->stride_k = a->stride_v = (int64_t)pb->h_k * BENCH_D; a->nhead_stride_k = a->nhead_stride_v = BENCH_D;
    a->scale = 1.0f / sqrtf((float)BENCH_D);
    a->mask_type = FMHA_MASK_BOTTOM_RIGHT; a->window_left = -1; a->window_right = 0;
}

static void make_prefill_args(const bench_problem *pb, const bench_copy *c, fmha_batch_prefill_args *a)
{
    memset(a, 0, sizeof(*a));
    a->q_dtype = a->kv_dtype = FMHA_DTYPE_BF16;
    a->batch = pb->batch; a->nhead_q = pb->h; a->nhead_k = pb->h_k;
    a->max_seqlen_q = pb->maxq;
    a->hdim_q = a->hdim_v = BENCH_D;
    a->q = c->q; a->o = c->o_paged; a->seqstart_q = pb->dssq;
    a->stride_q = a->stride_o = (int64_t)pb->h * BENCH_D; a->nhead_stride_q = a->nhead_stride_o = BENCH_D;
    a->k_pool = c->kpool; a->v_pool = c->vpool;
    a->num_total_pages = pb->n_total;
    a->page_size = pb->page;
    a->kv_layout = pb->layout ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
    a->page_stride_k = a->page_stride_v = pb->ps;
    a->token_stride_k = a->token_stride_v = pb->ts;
    a->nhead_stride_k = a->nhead_stride_v = pb->hs;
    if (pb->table) {
        a->page_table = FMHA_PAGE_TABLE_VLLM_2D;
        a->block_table = pb->d_bt; a->seqlen_k = pb->d_seqk; a->block_table_stride = pb->bt_stride;
    } else {
        a->page_table = FMHA_PAGE_TABLE_SGLANG_1D;
        a->kv_indptr = pb->d_indptr; a->kv_page_indices = pb->d_indices; a->kv_last_page_lens = pb->d_last;
    }
    a->kv_scale = FMHA_KV_SCALE_NONE;
    a->scale = 1.0f / sqrtf((float)BENCH_D);
    a->mask_type = FMHA_MASK_BOTTOM_RIGHT; a->window_left = -1; a->window_right = 0;
}

static void free_pool(bench_problem *pb)
{
    int s;
    for (s = 0; s < BENCH_SETS; s++) {
        if (pb->set[s].kpool) CUDA_CHECK(cudaFree(pb->set[s].kpool));
        if (pb->set[s].vpool) CUDA_CHECK(cudaFree(pb->set[s].vpool));
        pb->set[s].kpool = pb->set[s].vpool = NULL;
    }
    if (pb->d_indptr) CUDA_CHECK(cudaFree(pb->d_indptr));
    if (pb->d_indices) CUDA_CHECK(cudaFree(pb->d_indices));
    if (pb->d_last) CUDA_CHECK(cudaFree(pb->d_last));
    if (pb->d_bt) CUDA_CHECK(cudaFree(pb->d_bt));
    if (pb->d_seqk) CUDA_CHECK(cudaFree(pb->d_seqk));
    if (pb->d_tok_page) CUDA_CHECK(cudaFree(pb->d_tok_page));
    if (pb->d_tok_slot) CUDA_CHECK(cudaFree(pb->d_tok_slot));
    pb->d_indptr = pb->d_indices = pb->d_last = pb->d_bt = pb->d_seqk = pb->d_tok_page = pb->d_tok_slot = NULL;
}

/* Builds the pools of both copies for page size P: pages shuffled over a pool
 * with a few spare pages, NaN wherever no sequence has a key. */
static void build_pool(bench_problem *pb, int P, int table, int layout, cudaStream_t st)
{
    const int B = pb->batch, hk = pb->h_k;
    int b, i, n_used = 0, maxnp = 0, *np = (int *)xmalloc(sizeof(int) * (size_t)B);
    int32_t *indptr = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)(B + 1));
    int32_t *last = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)B);
    int32_t *tok_page = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)(pb->tk + 1));
    int32_t *tok_slot = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)(pb->tk + 1));
    int32_t *perm, *indices, *bt;
    uint64_t rs = 0x9e3779b97f4a7c15ULL * (uint64_t)(P + 7);
    size_t pool_elems;
    int grid, s;

    free_pool(pb);
    pb->page = P; pb->table = table; pb->layout = layout;
    indptr[0] = 0;
    for (b = 0; b < B; b++) {
        np[b] = (pb->sk[b] + P - 1) / P;
        if (np[b] > maxnp) maxnp = np[b];
        last[b] = np[b] > 0 ? pb->sk[b] - (np[b] - 1) * P : 0;
        indptr[b + 1] = indptr[b] + np[b];
    }
    n_used = indptr[B];
    pb->n_total = n_used + n_used / 16 + 3;                  /* some unreferenced pages */
    perm = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)pb->n_total);
    for (i = 0; i < pb->n_total; i++) perm[i] = i;
    for (i = pb->n_total - 1; i > 0; i--) {                  /* shuffle: xorshift64 */
        int j, t;
        rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
        j = (int)(rs % (uint64_t)(i + 1));
        t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    indices = perm;                                          /* first n_used entries */
    pb->bt_stride = maxnp + 1;
    bt = (int32_t *)xmalloc(sizeof(int32_t) * (size_t)B * (size_t)pb->bt_stride);
    for (b = 0; b < B; b++)
        for (i = 0; i < pb->bt_stride; i++)
            bt[(size_t)b * pb->bt_stride + i] = i < np[b] ? indices[indptr[b] + i] : -1;
    for (b = 0; b < B; b++)
        for (i = 0; i < pb->sk[b]; i++) {
            tok_page[pb->ssk[b] + i] = indices[indptr[b] + i / P];
            tok_slot[pb->ssk[b] + i] = i % P;
        }
    if (layout) { pb->hs = (int64_t)P * BENCH_D; pb->ts = 8; }
    else { pb->ts = (int64_t)hk * BENCH_D; pb->hs = BENCH_D; }
    pb->ps = (int64_t)P * hk * BENCH_D;
    pool_elems = (size_t)pb->n_total * (size_t)pb->ps;

    CUDA_CHECK(cudaMalloc((void **)&pb->d_indptr, sizeof(int32_t) * (size_t)(B + 1)));
    CUDA_CHECK(cudaMalloc((void **)&pb->d_indices, sizeof(int32_t) * (size_t)(n_used + 1)));
    CUDA_CHECK(cudaMalloc((void **)&pb->d_last, sizeof(int32_t) * (size_t)B));
    CUDA_CHECK(cudaMalloc((void **)&pb->d_bt, sizeof(int32_t) * (size_t)B * (size_t)pb->bt_stride));
    CUDA_CHECK(cudaMalloc((void **)&pb->d_seqk, sizeof(int32_t) * (size_t)B));
    CUDA_CHECK(cudaMalloc((void **)&pb->d_tok_page, sizeof(int32_t) * (size_t)(pb->tk + 1)));
    CUDA_CHECK(cudaMalloc((void **)&pb->d_tok_slot, sizeof(int32_t) * (size_t)(pb->tk + 1)));
    CUDA_CHECK(cudaMemcpy(pb->d_indptr, indptr, sizeof(int32_t) * (size_t)(B + 1), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(pb->d_indices, indices, sizeof(int32_t) * (size_t)n_used, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(pb->d_last, last, sizeof(int32_t) * (size_t)B, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(pb->d_bt, bt, sizeof(int32_t) * (size_t)B * (size_t)pb->bt_stride, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(pb->d_seqk, pb->sk, sizeof(int32_t) * (size_t)B, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(pb->d_tok_page, tok_page, sizeof(int32_t) * (size_t)pb->tk, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(pb->d_tok_slot, tok_slot, sizeof(int32_t) * (size_t)pb->tk, cudaMemcpyHostToDevice));
    bench_grid((size_t)pb->tk * hk * BENCH_D, &grid);
    for (s = 0; s < BENCH_SETS; s++) {
        bench_copy *c = &pb->set[s];
        CUDA_CHECK(cudaMalloc((void **)&c->kpool, pool_elems * 2));
        CUDA_CHECK(cudaMalloc((void **)&c->vpool, pool_elems * 2));
        CUDA_CHECK(cudaMemsetAsync(c->kpool, 0xFF, pool_elems * 2, st));   /* NaN */
        CUDA_CHECK(cudaMemsetAsync(c->vpool, 0xFF, pool_elems * 2, st));
        bench_to_pages_kernel<<<grid, 256, 0, st>>>(c->k, c->kpool, pb->d_tok_page, pb->d_tok_slot, pb->tk, hk,
                                                    BENCH_D, P, pb->ps, pb->ts, pb->hs, layout, 0);
        CUDA_CHECK(cudaGetLastError());
        bench_to_pages_kernel<<<grid, 256, 0, st>>>(c->v, c->vpool, pb->d_tok_page, pb->d_tok_slot, pb->tk, hk,
                                                    BENCH_D, P, pb->ps, pb->ts, pb->hs, layout, 1);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    free(np); free(indptr); free(last); free(tok_page); free(tok_slot); free(perm); free(bt);
}

/* ------------------------------------------------------------------------------------
 * Timing
 * --------------------------------------------------------------------------------- */
static void launch(const bench_problem *pb, int paged, int si, cudaStream_t st)
{
    if (paged) {
        fmha_batch_prefill_args a;
        make_prefill_args(pb, &pb->set[si], &a);
        FMHA_CHECK(fmha_batch_prefill(&bench_set, &a, (void *)st));
    } else {
        fmha_fwd_args a;
        make_fwd_args(pb, &pb->set[si], &a);
        FMHA_CHECK(fmha_fwd(&bench_set, &a, (void *)st));
    }
}

/* Median ms of one variant (warm-up sized to ~BENCH_WARMUP_S, runs to ~BENCH_TARGET_S). */
static double time_variant(const bench_problem *pb, int paged, cudaStream_t st, cudaEvent_t *e0, cudaEvent_t *e1,
                           float *times, int *runs_out)
{
    float est = 0.f;
    double per;
    int i, nwarm, runs, si = 0;
    CUDA_CHECK(cudaEventRecord(e0[0], st));
    for (i = 0; i < 3; i++) { launch(pb, paged, si, st); si ^= 1; }
    CUDA_CHECK(cudaEventRecord(e1[0], st));
    CUDA_CHECK(cudaEventSynchronize(e1[0]));
    CUDA_CHECK(cudaEventElapsedTime(&est, e0[0], e1[0]));
    per = est / 3.0 > 1e-3 ? est / 3.0 : 1e-3;
    nwarm = (int)(BENCH_WARMUP_S * 1e3 / per);
    if (nwarm < BENCH_MIN_WARMUP) nwarm = BENCH_MIN_WARMUP;
    if (nwarm > 500) nwarm = 500;
    runs = (int)(BENCH_TARGET_S * 1e3 / per);
    if (runs < BENCH_MIN_RUNS) runs = BENCH_MIN_RUNS;
    if (runs > BENCH_MAX_RUNS) runs = BENCH_MAX_RUNS;
    for (i = 0; i < nwarm; i++) { launch(pb, paged, si, st); si ^= 1; }
    for (i = 0; i < runs; i++) {
        CUDA_CHECK(cudaEventRecord(e0[i], st));
        launch(pb, paged, si, st);
        CUDA_CHECK(cudaEventRecord(e1[i], st));
        si ^= 1;
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
    for (i = 0; i < runs; i++) CUDA_CHECK(cudaEventElapsedTime(&times[i], e0[i], e1[i]));
    qsort(times, (size_t)runs, sizeof(float), ex_cmp_float);
    *runs_out = runs;
    return (runs & 1) ? times[runs / 2] : 0.5 * ((double)times[runs / 2 - 1] + times[runs / 2]);
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Paged output of copy 0 against the contiguous one: rel-L2 and max |diff|; -1 on
 * a non-finite element. */
static double compare_outputs(const bench_problem *pb, cudaStream_t st, double *max_abs)
{
    const size_t n = (size_t)pb->tq * pb->h * BENCH_D;
    uint16_t *a = (uint16_t *)xmalloc(n * 2), *b = (uint16_t *)xmalloc(n * 2);
    double num = 0.0, den = 0.0;
    size_t i;
    int bad = 0;
    CUDA_CHECK(cudaMemsetAsync(pb->set[0].o_paged, 0xFF, n * 2, st));
    CUDA_CHECK(cudaMemsetAsync(pb->set[0].o_contig, 0xFF, n * 2, st));
    launch(pb, 0, 0, st);
    launch(pb, 1, 0, st);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(a, pb->set[0].o_contig, n * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(b, pb->set[0].o_paged, n * 2, cudaMemcpyDeviceToHost));
    *max_abs = 0.0;
    for (i = 0; i < n; i++) {
        double x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]), dd = y - x;
        if (!isfinite(x) || !isfinite(y)) { bad = 1; break; }
        num += dd * dd;
        den += x * x;
        if (fabs(dd) > *max_abs) *max_abs = fabs(dd);
    }
    free(a);
    free(b);
    if (bad) return -1.0;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ------------------------------------------------------------------------------------
 * main
 * --------------------------------------------------------------------------------- */
typedef struct bench_row {
    int page, table, layout, runs_paged, runs_contig, below;
    double ms_paged, ms_contig, tf_paged, tf_contig, ratio, target, rel, max_abs;
    char kernel[192];
} bench_row;

int main(int argc, char **argv)
{
    bench_opts opt;
    bench_problem pb;
    bench_row rows[2 * 2 * BENCH_MAX_LIST];
    int nrows = 0, i, b, ti, li, ndev = 0, dev = 0, nerr = 0, nbelow = 0, grid, s;
    cudaStream_t st;
    static cudaEvent_t e0[BENCH_MAX_RUNS], e1[BENCH_MAX_RUNS];
    float *times;
    struct cudaDeviceProp prop;
    cudaError_t e;
    fmha_fwd_plan plan;
    char fwd_kernel[192];
    double pairs = 0.0;
    size_t nq, nk;

    if (bench_parse_opts(argc, argv, &opt) != 0) { bench_usage(stderr); return 2; }
    e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP bench_prefill: no GPU\n");
        return 0;
    }
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));

    /* ---- the problem -------------------------------------------------------------- */
    memset(&pb, 0, sizeof(pb));
    pb.batch = opt.batch; pb.h = opt.h; pb.h_k = opt.h_k;
    for (b = 0; b < pb.batch; b++) {
        pb.sq[b] = opt.sq; pb.sk[b] = opt.sk[b];
        pb.ssq[b] = pb.tq; pb.ssk[b] = pb.tk;
        pb.tq += pb.sq[b]; pb.tk += pb.sk[b];
        if (pb.sq[b] > pb.maxq) pb.maxq = pb.sq[b];
        /* causal bottom-right: row i sees keys j <= i + s_k - s_q */
        for (i = 0; i < pb.sq[b]; i++) {
            long long vis = (long long)pb.sk[b] - pb.sq[b] + i + 1;
            pairs += (double)(vis < 0 ? 0 : vis > pb.sk[b] ? pb.sk[b] : vis);
        }
    }
    pb.ssq[pb.batch] = pb.tq; pb.ssk[pb.batch] = pb.tk;
    pb.flops = 4.0 * pb.h * BENCH_D * pairs;
    nq = (size_t)(pb.tq > 0 ? pb.tq : 1) * pb.h * BENCH_D;
    nk = (size_t)(pb.tk > 0 ? pb.tk : 1) * pb.h_k * BENCH_D;

    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (i = 0; i < BENCH_MAX_RUNS; i++) { CUDA_CHECK(cudaEventCreate(&e0[i])); CUDA_CHECK(cudaEventCreate(&e1[i])); }
    times = (float *)xmalloc(sizeof(float) * BENCH_MAX_RUNS);
    CUDA_CHECK(cudaMalloc((void **)&pb.dssq, sizeof(int32_t) * (size_t)(pb.batch + 1)));
    CUDA_CHECK(cudaMalloc((void **)&pb.dssk, sizeof(int32_t) * (size_t)(pb.batch + 1)));
    CUDA_CHECK(cudaMemcpy(pb.dssq, pb.ssq, sizeof(int32_t) * (size_t)(pb.batch + 1), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(pb.dssk, pb.ssk, sizeof(int32_t) * (size_t)(pb.batch + 1), cudaMemcpyHostToDevice));
    for (s = 0; s < BENCH_SETS; s++) {
        bench_copy *c = &pb.set[s];
        CUDA_CHECK(cudaMalloc((void **)&c->q, nq * 2));
        CUDA_CHECK(cudaMalloc((void **)&c->o_contig, nq * 2));
        CUDA_CHECK(cudaMalloc((void **)&c->o_paged, nq * 2));
        CUDA_CHECK(cudaMalloc((void **)&c->k, nk * 2));
        CUDA_CHECK(cudaMalloc((void **)&c->v, nk * 2));
        bench_grid(nq, &grid);
        bench_fill_kernel<<<grid, 256, 0, st>>>(c->q, nq, 0x100u + 16u * (uint32_t)s);
        bench_grid(nk, &grid);
        bench_fill_kernel<<<grid, 256, 0, st>>>(c->k, nk, 0x101u + 16u * (uint32_t)s);
        bench_fill_kernel<<<grid, 256, 0, st>>>(c->v, nk, 0x102u + 16u * (uint32_t)s);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaStreamSynchronize(st));

    {
        fmha_fwd_args fa;
        make_fwd_args(&pb, &pb.set[0], &fa);
        FMHA_CHECK(fmha_fwd_check(&bench_set, &fa, &plan));
        snprintf(fwd_kernel, sizeof(fwd_kernel), "%s", plan.kernel->name);
    }
    printf("bench_prefill: %s (sm_%d%d, %d SMs); bf16 d%d, h %d/%d, batch %d, s_q %d, s_k %d..%d (%d KV tokens), "
           "causal bottom-right, %.3g TFLOP per call\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, BENCH_D, pb.h, pb.h_k, pb.batch, opt.sq,
           pb.sk[0], pb.sk[pb.batch - 1], pb.tk, pb.flops * 1e-12);
    printf("bench_prefill: contiguous kernel %s\n", fwd_kernel);
    fflush(stdout);

    for (li = 0; li < opt.n_layouts; li++)
        for (i = 0; i < opt.n_pages; i++) {
            const int P = opt.pages[i], layout = opt.layouts[li];
            if (layout && P % 8) {
                printf("bench_prefill: page %d skipped for VECTORIZED (needs a multiple of 8)\n", P);
                continue;
            }
            for (ti = 0; ti < opt.n_tables; ti++) {
                bench_row *r = &rows[nrows];
                fmha_batch_prefill_args pa;
                fmha_status sst;
                memset(r, 0, sizeof(*r));
                r->page = P; r->table = opt.tables[ti]; r->layout = layout;
                r->target = P >= 16 ? 0.95 : 0.85;
                build_pool(&pb, P, r->table, layout, st);
                make_prefill_args(&pb, &pb.set[0], &pa);
                sst = fmha_batch_prefill_check(&bench_set, &pa, &plan);
                if (sst != FMHA_OK) {
                    printf("bench_prefill: page %d %s: %s: %s\n", P, r->table ? "vllm" : "sglang", fmha_status_str(sst),
                           fmha_last_error());
                    nerr++;
                    continue;
                }
                snprintf(r->kernel, sizeof(r->kernel), "%s", plan.kernel->name);
                r->rel = compare_outputs(&pb, st, &r->max_abs);
                if (r->rel < 0 || r->rel > 1e-2) {
                    fprintf(stderr, "bench_prefill: page %d %s: paged output differs from contiguous (rel-L2 %g%s)\n", P,
                            r->table ? "vllm" : "sglang", r->rel, r->rel < 0 ? ", non-finite" : "");
                    nerr++;
                }
                r->ms_contig = time_variant(&pb, 0, st, e0, e1, times, &r->runs_contig);
                r->ms_paged = time_variant(&pb, 1, st, e0, e1, times, &r->runs_paged);
                r->tf_contig = pb.flops / (r->ms_contig * 1e-3) / 1e12;
                r->tf_paged = pb.flops / (r->ms_paged * 1e-3) / 1e12;
                r->ratio = r->tf_paged / r->tf_contig;
                r->below = r->ratio < r->target;
                nbelow += r->below;
                printf("page %-5d %-6s %-10s paged %8.4f ms %7.1f TFLOPS | contiguous %8.4f ms %7.1f TFLOPS | "
                       "ratio %.3f (target %.2f%s) | rel-L2 vs contiguous %.2g | %s\n",
                       P, r->table ? "vllm" : "sglang", layout ? "vectorized" : "linear", r->ms_paged, r->tf_paged,
                       r->ms_contig, r->tf_contig, r->ratio, r->target, r->below ? ", BELOW" : "", r->rel, r->kernel);
                fflush(stdout);
                nrows++;
            }
        }
    free_pool(&pb);

    printf("\n| page | table | layout | paged TFLOPS | contiguous TFLOPS | ratio | target | kernel |\n");
    printf("|---:|---|---|---:|---:|---:|---|---|\n");
    for (i = 0; i < nrows; i++)
        printf("| %d | %s | %s | %.1f | %.1f | %.3f | >= %.2f %s | `%s` |\n", rows[i].page,
               rows[i].table ? "vLLM 2-D" : "SGLang 1-D", rows[i].layout ? "vectorized" : "linear", rows[i].tf_paged,
               rows[i].tf_contig, rows[i].ratio, rows[i].target, rows[i].below ? "(below)" : "(met)", rows[i].kernel);
    printf("\n%d of %d targets met; contiguous = fmha_fwd group mode on the same K/V (`%s`)\n", nrows - nbelow, nrows,
           fwd_kernel);

    if (opt.json_path) {
        FILE *f = fopen(opt.json_path, "w");
        if (!f) { perror(opt.json_path); nerr++; }
        else {
            fprintf(f, "{\"device\": \"%s\", \"batch\": %d, \"h\": %d, \"h_k\": %d, \"d\": %d, \"s_q\": %d, "
                       "\"total_kv\": %d, \"flops\": %.6g, \"rows\": [\n",
                    prop.name, pb.batch, pb.h, pb.h_k, BENCH_D, opt.sq, pb.tk, pb.flops);
            for (i = 0; i < nrows; i++)
                fprintf(f, " {\"page\": %d, \"table\": \"%s\", \"layout\": \"%s\", \"paged_ms\": %.6f, "
                           "\"paged_tflops\": %.2f, \"contig_ms\": %.6f, \"contig_tflops\": %.2f, \"ratio\": %.4f, "
                           "\"target\": %.2f, \"rel_l2_vs_contig\": %.3g, \"kernel\": \"%s\"}%s\n",
                        rows[i].page, rows[i].table ? "vllm" : "sglang", rows[i].layout ? "vectorized" : "linear",
                        rows[i].ms_paged, rows[i].tf_paged, rows[i].ms_contig, rows[i].tf_contig, rows[i].ratio,
                        rows[i].target, rows[i].rel, rows[i].kernel, i + 1 < nrows ? "," : "");
            fprintf(f, "]}\n");
            if (fclose(f) != 0) nerr++;
            else printf("bench_prefill: wrote %s\n", opt.json_path);
        }
    }

    for (s = 0; s < BENCH_SETS; s++) {
        bench_copy *c = &pb.set[s];
        CUDA_CHECK(cudaFree(c->q)); CUDA_CHECK(cudaFree(c->o_contig)); CUDA_CHECK(cudaFree(c->o_paged));
        CUDA_CHECK(cudaFree(c->k)); CUDA_CHECK(cudaFree(c->v));
    }
    CUDA_CHECK(cudaFree(pb.dssq)); CUDA_CHECK(cudaFree(pb.dssk));
    for (i = 0; i < BENCH_MAX_RUNS; i++) { CUDA_CHECK(cudaEventDestroy(e0[i])); CUDA_CHECK(cudaEventDestroy(e1[i])); }
    CUDA_CHECK(cudaStreamDestroy(st));
    free(times);
    if (nerr) { fprintf(stderr, "bench_prefill: %d error(s)\n", nerr); return 1; }
    if (opt.strict && nbelow) { fprintf(stderr, "bench_prefill: %d ratio(s) below target\n", nbelow); return 1; }
    return 0;
}
