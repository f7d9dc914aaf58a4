/*
 * bench_fwd: forward attention throughput of fmha_tile on the FlashAttention-3 grid.
 *
 * The grid is the one of the design brief (section 7): bf16, total tokens 16384
 * (batch = 16384 / seqlen), hidden 2048 (hdim 64 / 128 / 256 with 32 / 16 / 8 heads),
 * seqlen 512 .. 16384, causal and not. Q, K, V and O are contiguous [b, s, h, d]
 * ("bshd") and nhead_k = nhead_q. FLOPs are 4 * b * h * s * s * d, halved for causal.
 *
 * Timing: each launch is bracketed by its own pair of cudaEvents on one stream, after
 * warm-up launches; the reported time is the median of at least 20 timed launches (the
 * count grows so that a point takes about 0.3 s). Launches rotate among several input
 * sets (Q, K, V, O each) whose total exceeds twice the L2, so a launch never starts on
 * data the previous one left in L2. Inputs are random bf16 in (-1, 1) filled on the
 * device by a hash kernel; the O buffers are poisoned with NaN first and the first
 * launch of each point is checked to have written every element with a finite value.
 *
 *   bench_fwd [--hdim 64,128,256] [--seqlen 512,1k,2k,4k,8k,16k] [--causal 0,1]
 *             [--prec bf16|fp8] [--sinks 0|1] [--dropout P] [--bias 0|1|2]
 *             [--softcap C] [--vkmajor 1|2] [--hdim_v N] [--kernel A,B,..] [--json out.json] [--quick]
 *
 * --hdim: any multiple of 8 up to 256 (32 and 96 have native kernels;
 * nhead = hidden / hdim, rounded down, e.g. 21 heads at 96).
 * --kernel A,B,..: only FWD kernels whose names hold every piece (bench_force.h),
 * e.g. --hdim 96 --kernel d96_,portable against --kernel d128_,wgmma.
 *
 * --hdim_v N: V and O of N columns (hdim_v < hdim_q; DeepSeek MLA prefill:
 * --hdim 192 --hdim_v 128), nhead = hidden / N; FLOPs 2 * b * h * s_q *
 * s_k * (hdim + hdim_v) (halved for causal). A hdim that does not divide the
 * hidden size (192) takes floor(hidden / hdim) heads.
 *
 * --dropout P: dropout on P with drop probability P (fmha_fwd_args.dropout_p),
 * to measure what dropout costs against the same points without it.
 * --bias 1: an elementwise bf16 bias (fmha_fwd_args.bias) of [1, 1, s, s],
 * shared by every batch entry and head (strides 0); --bias 2: [1, h, s, s],
 * one per head, shared by the batch (points whose bias would pass 4 GB are
 * reported unsupported). Random values in (-1, 1). The default set has
 * BIAS rows at hdim 64 and 128; hdim 256 reports no kernel. To measure what
 * the bias costs against the same points without it.
 * --sinks 1: one attention-sink logit per head (fmha_fwd_args.sinks), to
 * measure what the sink costs against the same points without it.
 * --softcap C: logits soft cap C (fmha_fwd_args.logits_soft_cap; the
 * SOFTCAP rows), e.g. 30, against the same points without it.
 * --prec fp8: Q, K and V in e4m3 (random codes of magnitude below 1, no NaN),
 * per-tensor descales of 1 passed as device pointers, O in bf16 (the Hopper
 * FP8 rows, FMHA_DEFAULT_FWD_FP8_SET; FLOPs counted as for bf16).
 * --vkmajor 1|2 (fp8): V given K-major (fmha_fwd_args.v_kmajor); 1: each
 * launch runs fmha_fp8_v_kmajor on its V first, timed with the forward (a
 * caller with V as rows), 2: V^T written once before timing (a caller that
 * keeps V^T, e.g. in its cache).
 *
 * --quick is hdim 128, seqlen 2k and 8k (both causal values unless --causal says).
 * Output: one line per point and, with --json, a list of
 *   {"d","dv","s","causal","b","h","kernel","ms","tflops", "ms_min","runs"}
 * (kernel/ms/tflops are null where the kernel set has no kernel for the point).
 * Exit status: 0 when every point ran or was reported unsupported, 1 on any error
 * (CUDA error, launch failure, invalid arguments, output check failure), 2 on bad
 * options. Without a GPU it prints "SKIP bench_fwd: no GPU" and exits 0.
 *
 * Build (see bench/run.sh):
 *   nvcc -x cu -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a \
 *        -gencode=arch=compute_80,code=sm_80 -Iinclude bench/bench_fwd.cu \
 *        -o build/bench/bench_fwd
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"
#define EX_PROG "bench_fwd"
#define EX_BENCH
#include "../examples/example_util.h"

#include "bench_force.h"

/* a build may predefine the set (a tuning or profiling build of a few rows) */
#ifndef BENCH_SET
#define BENCH_SET(X) FMHA_DEFAULT_FWD_SET(X) FMHA_DEFAULT_FWD_FP8_SET(X)
#endif
DECL_FMHA_KERNEL_SET(bench_set, BENCH_SET)
/* the set the bench selects from: bench_set, or its --kernel copy */
static const fmha_kernel_set *g_set = &bench_set;

/* e4m3 codes: random sign, exponent field 0..6 and mantissa (|x| < 1, never
 * the NaN code), two to a 16-bit element */
static __global__ void bench_fill8_kernel(uint16_t *p, size_t n, uint32_t seed)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += step) {
        uint32_t h = bench_hash((uint32_t)i ^ bench_hash(seed ^ (uint32_t)(i >> 32)));
        p[i] = (uint16_t)(h & 0xB7B7u);
    }
}

/* ------------------------------------------------------------------------------------
 * Constants and error checks
 * --------------------------------------------------------------------------------- */
#define BENCH_TOKENS 16384          /* batch * seqlen                              */
#define BENCH_HIDDEN 2048           /* nhead * hdim                                */
#define BENCH_MAX_LIST 32           /* entries of one comma list                   */
#define BENCH_MIN_RUNS 20           /* timed launches at least                     */
#define BENCH_MAX_RUNS 2000         /* timed launches at most                      */
#define BENCH_TARGET_S 0.3          /* timed seconds per point (about)             */
#define BENCH_WARMUP_S 0.05         /* warm-up seconds per point (about)           */
#define BENCH_MIN_WARMUP 3
#define BENCH_MAX_SETS 16

/* ------------------------------------------------------------------------------------
 * Device helpers: NaN poison, output check (random fill: example_util.h)
 * --------------------------------------------------------------------------------- */
static __global__ void bench_poison_kernel(uint16_t *p, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += step) p[i] = 0x7fc0U; /* bf16 quiet NaN */
}

/* counts[0]: elements that are NaN/Inf; counts[1]: elements that are exactly zero */
static __global__ void bench_check_kernel(const uint16_t *p, size_t n,
                                          unsigned long long *counts) {
    unsigned long long bad = 0, zero = 0;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += step) {
        uint16_t b = p[i];
        if ((b & 0x7f80U) == 0x7f80U) bad++;
        if ((b & 0x7fffU) == 0) zero++;
    }
    if (bad) atomicAdd(&counts[0], bad);
    if (zero) atomicAdd(&counts[1], zero);
}

/* ------------------------------------------------------------------------------------
 * Options
 * --------------------------------------------------------------------------------- */
typedef struct bench_opts {
    int hdim[BENCH_MAX_LIST];
    int n_hdim;
    int seqlen[BENCH_MAX_LIST];
    int n_seqlen;
    int causal[BENCH_MAX_LIST];
    int n_causal;
    const char *json_path;
    int quick;
    int fp8;                        /* --prec fp8 */
    int sinks;                      /* --sinks 1: an attention-sink logit per head */
    float softcap;                  /* --softcap C: logits soft cap (0: off) */
    int vkmajor;                    /* --vkmajor 1|2: V^T given (fp8) */
    float dropout;                  /* --dropout P: drop probability (0: off) */
    int bias;                       /* --bias 1: [1, 1, s, s]; 2: [1, h, s, s] */
    int hdim_v;                     /* --hdim_v N: V/O columns (0: hdim) */
    const char *kernel;             /* --kernel A,B,..: force kernels (bench_force.h) */
} bench_opts;

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: bench_fwd [--hdim 64,128,256] [--seqlen 512,1k,2k,4k,8k,16k]\n"
            "                 [--causal 0,1] [--prec bf16|fp8] [--sinks 0|1] [--dropout P] [--bias 0|1|2]\n"
            "                 [--softcap C] [--vkmajor 1|2]\n"
            "                 [--hdim_v N] [--kernel A,B,..] [--json out.json] [--quick]\n"
            "  bf16, total tokens %d (batch = %d / seqlen), hidden %d (nhead = %d / hdim),\n"
            "  bshd contiguous, nhead_k = nhead_q. --quick: hdim 128, seqlen 2k,8k.\n"
            "  --hdim_v N: V and O of N columns (MLA prefill: --hdim 192 --hdim_v 128),\n"
            "  nhead = hidden / N.\n",
            BENCH_TOKENS, BENCH_TOKENS, BENCH_HIDDEN, BENCH_HIDDEN);
}

/* "512,1k,2048" -> ints; a trailing k/K multiplies by 1024. Returns count or -1. */
static int bench_parse_list(const char *s, int *out, int cap) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p) return -1;
        if (*end == 'k' || *end == 'K') { v *= 1024; end++; }
        if (v < 0 || v > (1L << 30) || n >= cap) return -1;
        out[n++] = (int)v;
        if (*end == ',') end++;
        else if (*end != '\0') return -1;
        p = end;
    }
    return n > 0 ? n : -1;
}

static int bench_parse_opts(int argc, char **argv, bench_opts *o) {
    static const int def_hdim[] = {64, 128, 256};
    static const int def_seqlen[] = {512, 1024, 2048, 4096, 8192, 16384};
    int set_hdim = 0, set_seqlen = 0, set_causal = 0, i;
    memset(o, 0, sizeof(*o));
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) { o->quick = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { bench_usage(stdout); exit(0); }
        if (!val) { fprintf(stderr, "bench_fwd: %s needs a value\n", a); return -1; }
        if (!strcmp(a, "--hdim")) {
            o->n_hdim = bench_parse_list(val, o->hdim, BENCH_MAX_LIST); set_hdim = 1;
        } else if (!strcmp(a, "--seqlen")) {
            o->n_seqlen = bench_parse_list(val, o->seqlen, BENCH_MAX_LIST); set_seqlen = 1;
        } else if (!strcmp(a, "--causal")) {
            o->n_causal = bench_parse_list(val, o->causal, BENCH_MAX_LIST); set_causal = 1;
        } else if (!strcmp(a, "--json")) {
            o->json_path = val;
        } else if (!strcmp(a, "--prec")) {
            if (strcmp(val, "bf16") && strcmp(val, "fp8")) {
                fprintf(stderr, "bench_fwd: --prec takes bf16 or fp8\n");
                return -1;
            }
            o->fp8 = !strcmp(val, "fp8");
        } else if (!strcmp(a, "--kernel")) {
            o->kernel = val;
        } else if (!strcmp(a, "--hdim_v")) {
            o->hdim_v = atoi(val);
            if (o->hdim_v <= 0 || o->hdim_v % 8 != 0) {
                fprintf(stderr, "bench_fwd: --hdim_v takes a positive multiple of 8\n");
                return -1;
            }
        } else if (!strcmp(a, "--sinks")) {
            o->sinks = atoi(val) != 0;
        } else if (!strcmp(a, "--softcap")) {
            o->softcap = (float)atof(val);
        } else if (!strcmp(a, "--vkmajor")) {
            o->vkmajor = atoi(val);
            if (o->vkmajor < 0 || o->vkmajor > 2) {
                fprintf(stderr, "bench_fwd: --vkmajor takes 0, 1 or 2\n");
                return -1;
            }
        } else if (!strcmp(a, "--dropout")) {
            o->dropout = (float)atof(val);
        } else if (!strcmp(a, "--bias")) {
            o->bias = atoi(val);
            if (o->bias < 0 || o->bias > 2) {
                fprintf(stderr, "bench_fwd: --bias takes 0, 1 or 2\n");
                return -1;
            }
        } else {
            fprintf(stderr, "bench_fwd: unknown option %s\n", a);
            return -1;
        }
        i++;
        if ((set_hdim && o->n_hdim < 0) || (set_seqlen && o->n_seqlen < 0) ||
            (set_causal && o->n_causal < 0)) {
            fprintf(stderr, "bench_fwd: bad list for %s: %s\n", a, val);
            return -1;
        }
    }
    if (!set_hdim) {
        if (o->quick) { o->hdim[0] = 128; o->n_hdim = 1; }
        else { memcpy(o->hdim, def_hdim, sizeof(def_hdim)); o->n_hdim = 3; }
    }
    if (!set_seqlen) {
        if (o->quick) { o->seqlen[0] = 2048; o->seqlen[1] = 8192; o->n_seqlen = 2; }
        else { memcpy(o->seqlen, def_seqlen, sizeof(def_seqlen)); o->n_seqlen = 6; }
    }
    if (!set_causal) { o->causal[0] = 0; o->causal[1] = 1; o->n_causal = 2; }
    for (i = 0; i < o->n_hdim; i++) {
        int d = o->hdim[i];
        if (d <= 0 || d > 256 || d % 8 != 0) {
            fprintf(stderr, "bench_fwd: hdim %d: a multiple of 8 up to 256\n", d);
            return -1;
        }
        if (o->hdim_v > d) {
            fprintf(stderr, "bench_fwd: --hdim_v %d above hdim %d\n", o->hdim_v, d);
            return -1;
        }
    }
    for (i = 0; i < o->n_seqlen; i++) {
        int s = o->seqlen[i];
        if (s <= 0 || s > BENCH_TOKENS) {
            fprintf(stderr, "bench_fwd: seqlen %d out of range 1..%d\n", s, BENCH_TOKENS);
            return -1;
        }
    }
    for (i = 0; i < o->n_causal; i++) {
        if (o->causal[i] != 0 && o->causal[i] != 1) {
            fprintf(stderr, "bench_fwd: --causal takes 0 and/or 1\n");
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------
 * Buffers: nsets sets of Q, K, V, O, each of `elems` bf16 elements
 * --------------------------------------------------------------------------------- */
typedef struct bench_set_bufs {
    uint16_t *q, *k, *v, *o;
} bench_set_bufs;

typedef struct bench_bufs {
    bench_set_bufs set[BENCH_MAX_SETS];
    int nsets;
    size_t elems;                 /* per tensor */
    unsigned long long *counts;   /* device, 2 entries */
} bench_bufs;

static void bench_launch_dims(size_t n, int *grid, int *block) {
    size_t g = (n + 255) / 256;
    *block = 256;
    *grid = (int)(g < 4096 ? (g > 0 ? g : 1) : 4096);
}

static int g_fp8;   /* --prec fp8 */
static float *g_sinks;   /* --sinks 1: device logits (NULL: none) */
static float g_softcap;  /* --softcap C */
static int g_vk;         /* --vkmajor */
static void *g_vt[BENCH_MAX_SETS];   /* V^T of each input set (--vkmajor) */
static float g_dropout;  /* --dropout P */
static int g_bias;       /* --bias 1|2 */
static uint16_t *g_bias_buf;   /* the bias of the current point (bf16) */
static size_t g_bias_cap;      /* its elements */
static float *g_ones;   /* device descales of 1 (fp8) */

static void bench_fill(uint16_t *p, size_t n, uint32_t seed, cudaStream_t st) {
    int grid, block;
    bench_launch_dims(n, &grid, &block);
    if (g_fp8) bench_fill8_kernel<<<grid, block, 0, st>>>(p, n, seed);
    else bench_fill_kernel<<<grid, block, 0, st>>>(p, n, seed);
    CUDA_CHECK(cudaGetLastError());
}

static void bench_poison(uint16_t *p, size_t n, cudaStream_t st) {
    int grid, block;
    bench_launch_dims(n, &grid, &block);
    bench_poison_kernel<<<grid, block, 0, st>>>(p, n);
    CUDA_CHECK(cudaGetLastError());
}

static void bench_alloc(bench_bufs *b, size_t elems, size_t l2_bytes, cudaStream_t st) {
    size_t set_bytes = 4 * elems * sizeof(uint16_t);
    size_t free_b = 0, total_b = 0;
    int n, i;
    /* total of the sets > 2 * L2, at least 2 sets (so consecutive launches differ) */
    n = (int)((2 * l2_bytes + set_bytes - 1) / set_bytes) + 1;
    if (n < 2) n = 2;
    if (n > BENCH_MAX_SETS) n = BENCH_MAX_SETS;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    while (n > 1 && (size_t)n * set_bytes + (256u << 20) > free_b) n--;
    if ((size_t)n * set_bytes > free_b) {
        fprintf(stderr, "bench_fwd: not enough device memory (%zu MB free, %zu MB needed)\n",
                free_b >> 20, set_bytes >> 20);
        exit(1);
    }
    memset(b, 0, sizeof(*b));
    b->nsets = n;
    b->elems = elems;
    for (i = 0; i < n; i++) {
        bench_set_bufs *s = &b->set[i];
        CUDA_CHECK(cudaMalloc((void **)&s->q, elems * sizeof(uint16_t)));
        CUDA_CHECK(cudaMalloc((void **)&s->k, elems * sizeof(uint16_t)));
        CUDA_CHECK(cudaMalloc((void **)&s->v, elems * sizeof(uint16_t)));
        CUDA_CHECK(cudaMalloc((void **)&s->o, elems * sizeof(uint16_t)));
        bench_fill(s->q, elems, 0x1000u + 16u * (uint32_t)i + 0u, st);
        bench_fill(s->k, elems, 0x1000u + 16u * (uint32_t)i + 1u, st);
        bench_fill(s->v, elems, 0x1000u + 16u * (uint32_t)i + 2u, st);
        bench_poison(s->o, elems, st);
    }
    CUDA_CHECK(cudaMalloc((void **)&b->counts, 2 * sizeof(unsigned long long)));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

static void bench_free(bench_bufs *b) {
    int i;
    for (i = 0; i < b->nsets; i++) {
        CUDA_CHECK(cudaFree(b->set[i].q));
        CUDA_CHECK(cudaFree(b->set[i].k));
        CUDA_CHECK(cudaFree(b->set[i].v));
        CUDA_CHECK(cudaFree(b->set[i].o));
    }
    CUDA_CHECK(cudaFree(b->counts));
}

/* ------------------------------------------------------------------------------------
 * One grid point
 * --------------------------------------------------------------------------------- */
typedef struct bench_point {
    int d, dv, s, causal, b, h;   /* dv: V/O columns */
    double flops;
    int supported;          /* 0: the set has no kernel for it (status in `status`) */
    fmha_status status;
    char kernel[256];
    double ms_median, ms_min, tflops;
    int runs;
} bench_point;

/* bshd contiguous: row stride h*d, head stride d, batch stride s*h*d (V
 * and O: dv in place of d) */
static void bench_make_args(fmha_fwd_args *a, const bench_point *p, const bench_set_bufs *s) {
    int64_t row = (int64_t)p->h * p->d, row_v = (int64_t)p->h * p->dv;
    int64_t batch = (int64_t)p->s * row, batch_v = (int64_t)p->s * row_v;
    memset(a, 0, sizeof(*a));
    a->dtype = g_fp8 ? FMHA_DTYPE_FP8 : FMHA_DTYPE_BF16;
    if (g_fp8) { a->q_descale = g_ones; a->k_descale = g_ones + 1; a->v_descale = g_ones + 2; }
    a->is_group_mode = 0;
    a->batch = p->b;
    a->nhead_q = p->h;
    a->nhead_k = p->h;
    a->seqlen_q = p->s;
    a->seqlen_k = p->s;
    a->max_seqlen_q = p->s;
    a->hdim_q = p->d;
    a->hdim_v = p->dv;
    a->q = s->q;
    a->k = s->k;
    a->v = s->v;
    a->o = s->o;
    a->lse = NULL;
    a->seqstart_q = NULL;
    a->seqstart_k = NULL;
    a->stride_q = row; a->nhead_stride_q = p->d; a->batch_stride_q = batch;
    a->stride_k = row; a->nhead_stride_k = p->d; a->batch_stride_k = batch;
    a->stride_v = row_v; a->nhead_stride_v = p->dv; a->batch_stride_v = batch_v;
    a->stride_o = row_v; a->nhead_stride_o = p->dv; a->batch_stride_o = batch_v;
    a->nhead_stride_lse = 0;
    a->batch_stride_lse = 0;
    a->scale = 1.0f / sqrtf((float)p->d);
    a->logits_soft_cap = g_softcap;
    a->alibi_slopes = NULL;
    a->alibi_batch_stride = 0;
    a->sinks = g_sinks;
    a->dropout_p = g_dropout;
    a->dropout_seed = 0x5eedull;
    a->dropout_offset = 0;
    if (g_bias) {
        a->bias = g_bias_buf;
        a->bias_dtype = FMHA_DTYPE_BF16;
        a->stride_bias = p->s;
        a->nhead_stride_bias = g_bias == 2 ? (int64_t)p->s * p->s : 0;
        a->batch_stride_bias = 0;
    }
    if (p->causal) {
        a->mask_type = FMHA_MASK_BOTTOM_RIGHT;
        a->window_left = -1;
        a->window_right = 0;
    } else {
        a->mask_type = FMHA_MASK_NONE;
        a->window_left = -1;
        a->window_right = -1;
    }
}

/* --vkmajor 2: every set's V^T written once, before a point is timed */
static void bench_vt_prepare(const bench_point *p, const bench_bufs *bufs, cudaStream_t st) {
    fmha_fwd_args args;
    int si;
    for (si = 0; g_vk == 2 && si < bufs->nsets; si++) {
        bench_make_args(&args, p, &bufs->set[si]);
        FMHA_CHECK(fmha_fp8_v_kmajor(&args, g_vt[si], (void *)st));
    }
}

/* Launch on set `si` (fills `args` for it). */
static void bench_launch(const bench_point *p, const bench_bufs *bufs, int si,
                         cudaStream_t st) {
    fmha_fwd_args args;
    bench_make_args(&args, p, &bufs->set[si]);
    if (g_vk) {
        if (g_vk == 1) FMHA_CHECK(fmha_fp8_v_kmajor(&args, g_vt[si], (void *)st));
        fmha_fp8_v_kmajor_use(&args, g_vt[si]);
    }
    FMHA_CHECK(fmha_fwd(g_set, &args, (void *)st));
}

/* The first launch must write every element of O with a finite value. */
static int bench_check_output(const bench_point *p, const bench_bufs *bufs, cudaStream_t st) {
    unsigned long long h_counts[2] = {0, 0};
    size_t n = (size_t)p->b * p->s * p->h * p->dv;
    int grid, block;
    bench_poison(bufs->set[0].o, n, st);
    bench_launch(p, bufs, 0, st);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemsetAsync(bufs->counts, 0, 2 * sizeof(unsigned long long), st));
    bench_launch_dims(n, &grid, &block);
    bench_check_kernel<<<grid, block, 0, st>>>(bufs->set[0].o, n, bufs->counts);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(h_counts, bufs->counts, sizeof(h_counts),
                               cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    if (h_counts[0] != 0) {
        fprintf(stderr,
                "bench_fwd: d=%d s=%d causal=%d: %llu of %zu outputs are NaN/Inf or "
                "were not written\n",
                p->d, p->s, p->causal, h_counts[0], n);
        return -1;
    }
    if (h_counts[1] == n) {
        fprintf(stderr, "bench_fwd: d=%d s=%d causal=%d: output is all zeros\n", p->d, p->s,
                p->causal);
        return -1;
    }
    return 0;
}

/* Warm up, size the run count, time each launch with its own event pair. */
static int bench_time_point(bench_point *p, const bench_bufs *bufs, cudaStream_t st,
                            cudaEvent_t *ev_start, cudaEvent_t *ev_stop, float *times) {
    float est_ms = 0.0f;
    int i, nwarm, runs, set = 0;
    double per_ms;

    bench_vt_prepare(p, bufs, st);
    if (bench_check_output(p, bufs, st) != 0) return -1;

    /* estimate: 3 back-to-back launches under one event pair */
    CUDA_CHECK(cudaEventRecord(ev_start[0], st));
    for (i = 0; i < 3; i++) { bench_launch(p, bufs, set, st); set = (set + 1) % bufs->nsets; }
    CUDA_CHECK(cudaEventRecord(ev_stop[0], st));
    CUDA_CHECK(cudaEventSynchronize(ev_stop[0]));
    CUDA_CHECK(cudaEventElapsedTime(&est_ms, ev_start[0], ev_stop[0]));
    per_ms = est_ms / 3.0;
    if (per_ms < 1e-3) per_ms = 1e-3;

    nwarm = (int)(BENCH_WARMUP_S * 1e3 / per_ms);
    if (nwarm < BENCH_MIN_WARMUP) nwarm = BENCH_MIN_WARMUP;
    if (nwarm > 500) nwarm = 500;
    runs = (int)(BENCH_TARGET_S * 1e3 / per_ms);
    if (runs < BENCH_MIN_RUNS) runs = BENCH_MIN_RUNS;
    if (runs > BENCH_MAX_RUNS) runs = BENCH_MAX_RUNS;

    for (i = 0; i < nwarm; i++) { bench_launch(p, bufs, set, st); set = (set + 1) % bufs->nsets; }
    for (i = 0; i < runs; i++) {
        CUDA_CHECK(cudaEventRecord(ev_start[i], st));
        bench_launch(p, bufs, set, st);
        CUDA_CHECK(cudaEventRecord(ev_stop[i], st));
        set = (set + 1) % bufs->nsets;
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
    for (i = 0; i < runs; i++)
        CUDA_CHECK(cudaEventElapsedTime(&times[i], ev_start[i], ev_stop[i]));
    qsort(times, (size_t)runs, sizeof(float), ex_cmp_float);
    p->runs = runs;
    p->ms_min = times[0];
    p->ms_median = (runs & 1) ? times[runs / 2]
                              : 0.5 * ((double)times[runs / 2 - 1] + times[runs / 2]);
    p->tflops = p->flops / (p->ms_median * 1e-3) / 1e12;
    return 0;
}

/* ------------------------------------------------------------------------------------
 * JSON output
 * --------------------------------------------------------------------------------- */
static void bench_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static int bench_write_json(const char *path, const bench_point *pts, int n) {
    FILE *f = fopen(path, "w");
    int i;
    if (!f) { perror(path); return -1; }
    fprintf(f, "[\n");
    for (i = 0; i < n; i++) {
        const bench_point *p = &pts[i];
        fprintf(f, " {\"d\": %d, \"dv\": %d, \"s\": %d, \"causal\": %s, \"b\": %d, \"h\": %d, \"prec\": \"%s\", "
                "\"kernel\": ", p->d, p->dv, p->s, p->causal ? "true" : "false", p->b, p->h, g_fp8 ? "fp8" : "bf16");
        if (p->supported) {
            bench_json_string(f, p->kernel);
            fprintf(f, ", \"ms\": %.6f, \"tflops\": %.2f, \"ms_min\": %.6f, \"runs\": %d}",
                    p->ms_median, p->tflops, p->ms_min, p->runs);
        } else {
            fprintf(f, "null, \"ms\": null, \"tflops\": null, \"status\": ");
            bench_json_string(f, fmha_status_str(p->status));
            fprintf(f, "}");
        }
        fprintf(f, "%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]\n");
    if (fclose(f) != 0) { perror(path); return -1; }
    return 0;
}

/* ------------------------------------------------------------------------------------
 * main
 * --------------------------------------------------------------------------------- */
int main(int argc, char **argv) {
    bench_opts opt;
    bench_point *pts;
    bench_bufs bufs;
    cudaStream_t st;
    cudaEvent_t ev_start[BENCH_MAX_RUNS], ev_stop[BENCH_MAX_RUNS];
    float *times;
    struct cudaDeviceProp prop;
    int ndev = 0, dev = 0, l2 = 0, npts = 0, i, j, k, nerr = 0, nunsup = 0;
    size_t max_elems = 0;
    cudaError_t e;

    if (bench_parse_opts(argc, argv, &opt) != 0) { bench_usage(stderr); return 2; }
    if (opt.kernel) {
        static fmha_kernel_set forced;
        forced = bench_force_set(&bench_set, opt.kernel, FMHA_FAMILY_FWD, FMHA_FAMILY_FWD, "bench_fwd");
        g_set = &forced;
    }

    e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP bench_fwd: no GPU\n");
        if (e != cudaSuccess)
            fprintf(stderr, "bench_fwd: cudaGetDeviceCount: %s\n", cudaGetErrorString(e));
        return 0;
    }
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    printf("bench_fwd: %s (sm_%d%d, %d SMs, L2 %d MB), kernel set of %d kernels, %s\n", prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, l2 >> 20, fmha_set_size(g_set),
           opt.fp8 ? "fp8 (e4m3 Q/K/V, bf16 O)" : "bf16");

    /* grid points in (d, s, causal) order */
    pts = (bench_point *)calloc((size_t)opt.n_hdim * opt.n_seqlen * opt.n_causal,
                                sizeof(bench_point));
    times = (float *)malloc(BENCH_MAX_RUNS * sizeof(float));
    if (!pts || !times) { fprintf(stderr, "bench_fwd: out of host memory\n"); return 1; }
    for (i = 0; i < opt.n_hdim; i++)
        for (j = 0; j < opt.n_seqlen; j++)
            for (k = 0; k < opt.n_causal; k++) {
                bench_point *p = &pts[npts++];
                size_t elems;
                p->d = opt.hdim[i];
                p->dv = opt.hdim_v ? opt.hdim_v : p->d;
                p->s = opt.seqlen[j];
                p->causal = opt.causal[k];
                p->b = BENCH_TOKENS / p->s;
                p->h = BENCH_HIDDEN / p->dv;
                p->flops = 2.0 * p->b * p->h * (double)p->s * p->s * (p->d + p->dv);
                if (p->causal) p->flops *= 0.5;
                elems = (size_t)p->b * p->s * p->h * p->d;
                if (elems > max_elems) max_elems = elems;
            }

    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (i = 0; i < BENCH_MAX_RUNS; i++) {
        CUDA_CHECK(cudaEventCreate(&ev_start[i]));
        CUDA_CHECK(cudaEventCreate(&ev_stop[i]));
    }
    g_fp8 = opt.fp8;
    if (g_fp8) {
        const float ones[3] = { 1.f, 1.f, 1.f };
        CUDA_CHECK(cudaMalloc((void **)&g_ones, sizeof(ones)));
        CUDA_CHECK(cudaMemcpy(g_ones, ones, sizeof(ones), cudaMemcpyHostToDevice));
    }
    g_dropout = opt.dropout;
    g_softcap = opt.softcap;
    g_bias = opt.bias;
    if (opt.sinks) {
        float h_sinks[BENCH_HIDDEN / 8];   /* nhead <= hidden / 8 */
        for (i = 0; i < BENCH_HIDDEN / 8; i++) h_sinks[i] = 0.25f * (float)(i % 8) - 1.0f;
        CUDA_CHECK(cudaMalloc((void **)&g_sinks, sizeof(h_sinks)));
        CUDA_CHECK(cudaMemcpy(g_sinks, h_sinks, sizeof(h_sinks), cudaMemcpyHostToDevice));
    }
    bench_alloc(&bufs, max_elems, (size_t)l2, st);
    g_vk = opt.fp8 ? opt.vkmajor : 0;
    for (i = 0; g_vk && i < bufs.nsets; i++)   /* V^T: keys padded to 16, at most 15 more a d row */
        CUDA_CHECK(cudaMalloc(&g_vt[i], max_elems + (max_elems / 16) + (1 << 20)));
    printf("bench_fwd: %d input sets of %zu MB (Q, K, V, O), rotated per launch\n", bufs.nsets,
           (4 * max_elems * sizeof(uint16_t)) >> 20);
    printf("%-5s %-6s %-6s %-4s %-4s %10s %10s %9s  %s\n", "hdim", "seqlen", "causal", "b", "h",
           "ms(med)", "ms(min)", "TFLOPS", "kernel");
    fflush(stdout);

    for (i = 0; i < npts; i++) {
        bench_point *p = &pts[i];
        fmha_fwd_args args;
        fmha_fwd_plan plan;
        fmha_status s;
        memset(&plan, 0, sizeof(plan));
        if (g_bias) {   /* the point's bias (random bf16), grown as the points need */
            const size_t n = (size_t)(g_bias == 2 ? p->h : 1) * p->s * p->s;
            if (n * 2 > ((size_t)4 << 30)) {
                p->supported = 0;
                p->status = FMHA_ERR_UNSUPPORTED;
                nunsup++;
                printf("%-5d %-6d %-6d %-4d %-4d %10s %10s %9s  (the bias would pass 4 GB)\n", p->d, p->s,
                       p->causal, p->b, p->h, "-", "-", "-");
                continue;
            }
            if (n > g_bias_cap) {
                if (g_bias_buf) CUDA_CHECK(cudaFree(g_bias_buf));
                CUDA_CHECK(cudaMalloc((void **)&g_bias_buf, n * 2));
                g_bias_cap = n;
            }
            bench_fill(g_bias_buf, n, 0xb1a5u, st);
        }
        bench_make_args(&args, p, &bufs.set[0]);
        s = fmha_fwd_check(g_set, &args, &plan);
        p->status = s;
        if (s == FMHA_ERR_NO_KERNEL || s == FMHA_ERR_UNSUPPORTED) {
            p->supported = 0;
            nunsup++;
            printf("%-5d %-6d %-6d %-4d %-4d %10s %10s %9s  (%s: %s)\n", p->d, p->s, p->causal,
                   p->b, p->h, "-", "-", "-", fmha_status_str(s), fmha_last_error());
            fflush(stdout);
            continue;
        }
        FMHA_CHECK(s);
        p->supported = 1;
        snprintf(p->kernel, sizeof(p->kernel), "%s",
                 (plan.kernel && plan.kernel->name) ? plan.kernel->name : "?");
        if (bench_time_point(p, &bufs, st, ev_start, ev_stop, times) != 0) {
            nerr++;
            p->supported = 0;
            p->status = FMHA_ERR_LAUNCH;
            continue;
        }
        printf("%-5d %-6d %-6d %-4d %-4d %10.4f %10.4f %9.1f  %s\n", p->d, p->s, p->causal, p->b,
               p->h, p->ms_median, p->ms_min, p->tflops, p->kernel);
        fflush(stdout);
        /* rewrite the JSON after each point: a later fatal error keeps what was measured */
        if (opt.json_path && bench_write_json(opt.json_path, pts, i + 1) != 0) {
            nerr++;
            opt.json_path = NULL;
        }
    }

    if (opt.json_path) {
        if (bench_write_json(opt.json_path, pts, npts) != 0) nerr++;
        else printf("bench_fwd: wrote %s\n", opt.json_path);
    }
    if (nunsup) printf("bench_fwd: %d of %d points have no kernel in the set\n", nunsup, npts);

    bench_free(&bufs);
    for (i = 0; i < BENCH_MAX_RUNS; i++) {
        CUDA_CHECK(cudaEventDestroy(ev_start[i]));
        CUDA_CHECK(cudaEventDestroy(ev_stop[i]));
    }
    CUDA_CHECK(cudaStreamDestroy(st));
    free(pts);
    free(times);
    if (nerr) {
        fprintf(stderr, "bench_fwd: %d error(s)\n", nerr);
        return 1;
    }
    return 0;
}
