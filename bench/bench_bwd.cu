/*
 * bench_bwd: backward attention throughput of fmha_tile on the FlashAttention-3 grid.
 *
 * Grid (design brief section 7): total tokens 16384 (batch = 16384 / seqlen), hidden
 * 2048 (hdim 64 / 128 with 32 / 16 heads), seqlen 1k .. 16k, causal (bottom-right) and
 * not, bf16 (fp16 with --dtype), non-deterministic and deterministic mode. Q, K, V, O,
 * dO and the gradients are contiguous [b, s, h, d]; nhead_k = nhead_q. FLOPs are 2.5x
 * the forward's 4 * b * h * s * s * d (halved for causal): the backward's five GEMMs
 * against the forward's two.
 *
 * Per point: a plan (fmha_bwd_plan_make), a workspace of plan.workspace_size bytes,
 * fmha_bwd_prepare_workspace once; O and LSE come from the library's forward on the
 * same inputs, so P is a real softmax. Each timed call is one fmha_bwd (dot_do_o,
 * dq_dk_dv, convert_dq) bracketed by its own event pair, after warm-up; the reported
 * time is the median of at least 20 calls (about 0.3 s of them). Calls rotate among
 * input sets whose total exceeds twice the L2. The first call of each point is checked:
 * every element of dQ, dK and dV written (they are poisoned with NaN first) and finite.
 *
 *   bench_bwd [--hdim 64,128] [--seqlen 1k,2k,4k,8k,16k] [--causal 0,1] [--det 0,1]
 *             [--dtype bf16|fp16] [--sinks 0|1] [--alibi 0|1] [--dropout P] [--bias 0|1|2|3]
 *             [--hdim_v N] [--padded 0|1] [--kernel A,B,..] [--json out.json] [--quick]
 * --hdim_v N: V, O, dO and dV of N columns (hdim_v < hdim_q; DeepSeek MLA
 * training: --hdim 192 --hdim_v 128, the 192_128 kernels), nhead = hidden /
 * N. FLOPs of unequal dims: the forward's 2 * s_q * s_k * (hdim + hdim_v)
 * per head, the backward's five GEMMs 2 * s_q * s_k * (3 * hdim + 2 *
 * hdim_v) (S, dK, dQ over hdim; dP, dV over hdim_v), 2.5x the forward at
 * equal dims; halved for causal. --padded 1: the backward on the hdim 256
 * kernels with V zero-padded (what MLA ran on before its own rows), for the
 * ratio.
 * --hdim: 32, 64, 96 or 128 (nhead = hidden / hdim, rounded down: 21 at 96).
 * --kernel A,B,..: only dq_dk_dv kernels whose names hold every piece
 * (bench_force.h), e.g. --hdim 96 --kernel d96_ against --kernel d128_,wgmma.
 * --dropout P: the forward (which makes O and the LSE) and the backward with
 * drop probability P, the same seed and offset.
 *
 * --alibi 1: ALiBi slopes (one per head), the forward and the backward's
 * ALIBI rows.
 * --bias 1: an elementwise bf16 bias [1, 1, s, s] (strides 0 over the batch
 * and heads) in the forward and the backward, dbias wanted (summed over the
 * batch entries and heads: the workspace's fp32 sum, atomics or, --det 1,
 * one slice per entry and head); --bias 2: [1, h, s, s], dbias summed over
 * the batch; --bias 3: [b, h, s, s], nothing shared, dbias stored in bf16
 * as it is computed (no workspace). The BIAS rows; points whose bias would pass 4 GB, or whose
 * workspace does not fit in the free memory, are reported unsupported.
 * --sinks 1: one attention-sink logit per head, the forward's LSE made with
 * it and dsinks computed (fmha_bwd_args.sinks / dsinks).
 * --check 0: skip the first call's check of dQ, dK and dV (a timing probe
 * built to compute a wrong answer; never for a reported number).
 * --quick: hdim 128, seqlen 2k and 8k. Output: one line per point (TFLOPS, and for
 * deterministic points the ratio to the non-deterministic one) and, with --json, a list
 * of {"d","s","causal","det","dtype","b","h","kernel","nsplits","workspace_mb","ms",
 * "tflops","ms_min","runs"}. Exit status 0 when every point ran or was reported
 * unsupported, 1 on an error, 2 on bad options; "SKIP bench_bwd: no GPU" without one.
 * bench/run_bwd.sh runs it next to PyTorch SDPA's flash and cuDNN backward.
 *
 * Build: make bench-bwd   (nvcc -x cu -std=c++17 -O3 -Iinclude -gencode=arch=compute_90a,
 *        code=sm_90a -gencode=arch=compute_80,code=sm_80 bench/bench_bwd.cu)
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"
#define EX_PROG "bench_bwd"
#define EX_BENCH
#include "../examples/example_util.h"

/* the forward (for O and LSE) and the backward of the benchmarked head dims
 * (ALiBi rows for --alibi 1, BIAS rows for --bias 1|2|3; head dims 32 and
 * 96 have no BIAS rows, as the default set) */
#define BENCH_BWD_PLAIN(X, dt, hd)                                                               \
    X(FWD,            dt, hd, NOMASK, NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD,            dt, hd, MASK,   NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, hd, NOMASK, NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, hd, MASK,   NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, NOMASK, NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, MASK,   NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   dt, hd, NOMASK, NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, dt, hd, NOMASK, NOSOFTCAP, NOALIBI,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#define BENCH_BWD_HD(X, dt, hd)                                                                  \
    BENCH_BWD_PLAIN(X, dt, hd)                                                                   \
    X(FWD,            dt, hd, MASK,   NOSOFTCAP, ALIBI,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, hd, MASK,   NOSOFTCAP, ALIBI,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, MASK,   NOSOFTCAP, ALIBI,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD,            dt, hd, MASK,   NOSOFTCAP, BIAS,     FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, hd, MASK,   NOSOFTCAP, BIAS,     FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, MASK,   NOSOFTCAP, BIAS,     FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
/* MLA (--hdim 192 --hdim_v 128): the forward and the backward's 192_128
 * rows (MASK rows serve unmasked problems too) */
#define BENCH_BWD_MLA(X, dt)                                                                     \
    X(FWD,            dt, 192_128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD,            dt, 192_128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, 192_128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, 192_128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   dt, 192_128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, dt, 192_128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
/* a build may predefine the set (a profiling build of a few rows) */
#ifndef BENCH_BWD_SET
#define BENCH_BWD_SET(X)                                                   \
    BENCH_BWD_HD(X, BF16, 64) BENCH_BWD_HD(X, BF16, 128)                    \
    BENCH_BWD_HD(X, FP16, 64) BENCH_BWD_HD(X, FP16, 128)                    \
    BENCH_BWD_PLAIN(X, BF16, 32) BENCH_BWD_PLAIN(X, BF16, 96)               \
    BENCH_BWD_PLAIN(X, FP16, 32) BENCH_BWD_PLAIN(X, FP16, 96)               \
    BENCH_BWD_MLA(X, BF16) BENCH_BWD_MLA(X, FP16)
#endif
DECL_FMHA_KERNEL_SET(bench_set, BENCH_BWD_SET)
/* --padded 1: the backward of MLA on the hdim 256 kernels (V padded) */
#define BENCH_PAD_HD(X, dt)                                                                      \
    X(BWD,            dt, 256, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, 256, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   dt, 256, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, dt, 256, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#define BENCH_PAD_SET(X) BENCH_PAD_HD(X, BF16) BENCH_PAD_HD(X, FP16)
DECL_FMHA_KERNEL_SET(bench_pad_set, BENCH_PAD_SET)

#include "bench_force.h"
/* the set the bench plans from: bench_set, or its --kernel copy */
static const fmha_kernel_set *g_set = &bench_set;

#define BENCH_TOKENS 16384
#define BENCH_HIDDEN 2048
#define BENCH_MAX_LIST 32
#define BENCH_MIN_RUNS 20
#define BENCH_MAX_RUNS 1000
#define BENCH_TARGET_S 0.3
#define BENCH_WARMUP_S 0.05
#define BENCH_MAX_SETS 8

static __global__ void bench_poison_kernel(uint16_t *p, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += step) p[i] = 0x7fffu;   /* NaN in fp16 and bf16 */
}

/* counts[0]: NaN/Inf (or never written); counts[1]: exact zeros */
static __global__ void bench_check_kernel(const uint16_t *p, size_t n, int is_bf16, unsigned long long *counts)
{
    unsigned long long bad = 0, zero = 0;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    const uint16_t expo = is_bf16 ? 0x7f80u : 0x7c00u;
    for (; i < n; i += step) {
        uint16_t b = p[i];
        if ((b & expo) == expo) bad++;
        if ((b & 0x7fffu) == 0) zero++;
    }
    if (bad) atomicAdd(&counts[0], bad);
    if (zero) atomicAdd(&counts[1], zero);
}

typedef struct bench_opts {
    int hdim[BENCH_MAX_LIST], n_hdim;
    int seqlen[BENCH_MAX_LIST], n_seqlen;
    int causal[BENCH_MAX_LIST], n_causal;
    int det[BENCH_MAX_LIST], n_det;
    fmha_dtype dtype;
    int sinks;                       /* --sinks 1: attention sinks, dsinks computed */
    int alibi;                       /* --alibi 1: ALiBi slopes (the ALIBI rows)    */
    float dropout;                   /* --dropout P                                 */
    int bias;                        /* --bias 1: [1, 1, s, s]; 2: [1, h, s, s]; 3: [b, h, s, s] */
    int hdim_v;                      /* --hdim_v N: V/O/dO/dV columns (0: hdim)     */
    int padded;                      /* --padded 1: the backward on the 256 kernels */
    const char *json_path;
    const char *kernel;              /* --kernel A,B,..: force dq_dk_dv kernels     */
    int no_check;                    /* --check 0: no output check (timing probes)  */
} bench_opts;

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: bench_bwd [--hdim 64,128] [--seqlen 1k,2k,4k,8k,16k] [--causal 0,1] [--det 0,1]\n"
               "                 [--dtype bf16|fp16] [--sinks 0|1] [--alibi 0|1] [--dropout P] [--bias 0|1|2|3]\n"
               "                 [--hdim_v N] [--padded 0|1] [--kernel A,B,..] [--json out.json] [--check 0|1]\n"
               "                 [--quick]\n"
               "  --hdim: 32, 64, 96, 128 (any multiple of 8 up to 128). --kernel A,B,..: only dq_dk_dv\n"
               "  kernels whose names hold every piece (e.g. d96_ or d128_,wgmma).\n"
               "  total tokens %d (batch = %d / seqlen), hidden %d (nhead = %d / hdim_v), bshd.\n"
               "  --hdim_v N: V, O, dO, dV of N columns (MLA: --hdim 192 --hdim_v 128); --padded 1: the\n"
               "  backward on the hdim 256 kernels, V zero-padded (MLA only).\n",
            BENCH_TOKENS, BENCH_TOKENS, BENCH_HIDDEN, BENCH_HIDDEN);
}

static int bench_parse_list(const char *s, int *out, int cap)
{
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

static int bench_parse_opts(int argc, char **argv, bench_opts *o)
{
    int quick = 0, i;
    memset(o, 0, sizeof(*o));
    o->dtype = FMHA_DTYPE_BF16;
    o->n_hdim = o->n_seqlen = o->n_causal = o->n_det = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int *list = NULL, *n = NULL;
        if (!strcmp(a, "--quick")) { quick = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { bench_usage(stdout); exit(0); }
        if (!val) { fprintf(stderr, "bench_bwd: %s needs a value\n", a); return -1; }
        if (!strcmp(a, "--hdim")) { list = o->hdim; n = &o->n_hdim; }
        else if (!strcmp(a, "--seqlen")) { list = o->seqlen; n = &o->n_seqlen; }
        else if (!strcmp(a, "--causal")) { list = o->causal; n = &o->n_causal; }
        else if (!strcmp(a, "--det")) { list = o->det; n = &o->n_det; }
        else if (!strcmp(a, "--json")) o->json_path = val;
        else if (!strcmp(a, "--kernel")) o->kernel = val;
        else if (!strcmp(a, "--sinks")) o->sinks = atoi(val) != 0;
        else if (!strcmp(a, "--alibi")) o->alibi = atoi(val) != 0;
        else if (!strcmp(a, "--dropout")) o->dropout = (float)atof(val);
        else if (!strcmp(a, "--hdim_v")) o->hdim_v = atoi(val);
        else if (!strcmp(a, "--padded")) o->padded = atoi(val) != 0;
        else if (!strcmp(a, "--check")) o->no_check = atoi(val) == 0;
        else if (!strcmp(a, "--bias")) {
            o->bias = atoi(val);
            if (o->bias < 0 || o->bias > 3) { fprintf(stderr, "bench_bwd: --bias takes 0, 1, 2 or 3\n"); return -1; }
        }
        else if (!strcmp(a, "--dtype")) {
            if (!strcmp(val, "bf16")) o->dtype = FMHA_DTYPE_BF16;
            else if (!strcmp(val, "fp16")) o->dtype = FMHA_DTYPE_FP16;
            else { fprintf(stderr, "bench_bwd: --dtype bf16 or fp16\n"); return -1; }
        } else { fprintf(stderr, "bench_bwd: unknown option %s\n", a); return -1; }
        if (list && (*n = bench_parse_list(val, list, BENCH_MAX_LIST)) < 0) {
            fprintf(stderr, "bench_bwd: bad list for %s: %s\n", a, val);
            return -1;
        }
        i++;
    }
    if (!o->n_hdim) {
        if (quick) { o->hdim[0] = 128; o->n_hdim = 1; }
        else { o->hdim[0] = 64; o->hdim[1] = 128; o->n_hdim = 2; }
    }
    if (!o->n_seqlen) {
        static const int def[5] = { 1024, 2048, 4096, 8192, 16384 };
        if (quick) { o->seqlen[0] = 2048; o->seqlen[1] = 8192; o->n_seqlen = 2; }
        else { memcpy(o->seqlen, def, sizeof(def)); o->n_seqlen = 5; }
    }
    if (!o->n_causal) { o->causal[0] = 0; o->causal[1] = 1; o->n_causal = 2; }
    if (!o->n_det) { o->det[0] = 0; o->det[1] = 1; o->n_det = 2; }
    if (o->hdim_v && (o->hdim_v != 128 || o->n_hdim != 1 || o->hdim[0] <= 128 || o->hdim[0] > 192 ||
                      o->hdim[0] % 8)) {
        fprintf(stderr, "bench_bwd: --hdim_v 128 goes with one --hdim of 136..192, a multiple of 8 (the 192_128 "
                        "kernels built here)\n");
        return -1;
    }
    if (o->padded && !o->hdim_v) { fprintf(stderr, "bench_bwd: --padded 1 needs --hdim_v\n"); return -1; }
    if (o->hdim_v && (o->sinks || o->alibi || o->bias)) {
        fprintf(stderr, "bench_bwd: --hdim_v: no sinks, ALiBi or bias rows built here\n");
        return -1;
    }
    for (i = 0; i < o->n_hdim && !o->hdim_v; i++)
        if (o->hdim[i] <= 0 || o->hdim[i] % 8 || o->hdim[i] > 128) {
            fprintf(stderr, "bench_bwd: hdim %d: a multiple of 8 up to 128 (the set built here; hidden %d)\n",
                    o->hdim[i], BENCH_HIDDEN);
            return -1;
        }
    for (i = 0; i < o->n_seqlen; i++)
        if (o->seqlen[i] <= 0 || o->seqlen[i] > BENCH_TOKENS) {
            fprintf(stderr, "bench_bwd: seqlen %d out of range 1..%d\n", o->seqlen[i], BENCH_TOKENS);
            return -1;
        }
    for (i = 0; i < o->n_causal; i++)
        if (o->causal[i] != 0 && o->causal[i] != 1) { fprintf(stderr, "bench_bwd: --causal takes 0/1\n"); return -1; }
    for (i = 0; i < o->n_det; i++)
        if (o->det[i] != 0 && o->det[i] != 1) { fprintf(stderr, "bench_bwd: --det takes 0/1\n"); return -1; }
    return 0;
}

/* ---- buffers: nsets of inputs (Q, K, V, O, dO, LSE), one set of gradients -------- */
typedef struct bench_set_bufs {
    uint16_t *q, *k, *v, *o, *dout;
    float *lse;
} bench_set_bufs;

typedef struct bench_bufs {
    bench_set_bufs set[BENCH_MAX_SETS];
    int nsets;
    size_t elems;
    uint16_t *dq, *dk, *dv;
    unsigned long long *counts;
} bench_bufs;

static void bench_dims(size_t n, int *grid)
{
    size_t g = (n + 255) / 256;
    *grid = (int)(g < 4096 ? (g > 0 ? g : 1) : 4096);
}

static void bench_alloc(bench_bufs *b, size_t elems, size_t rows_heads, size_t l2, cudaStream_t st)
{
    const size_t set_bytes = 5 * elems * 2 + rows_heads * 4;
    size_t free_b = 0, total_b = 0;
    int n, i, grid;
    n = (int)((2 * l2 + set_bytes - 1) / set_bytes) + 1;
    if (n < 2) n = 2;
    if (n > BENCH_MAX_SETS) n = BENCH_MAX_SETS;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    /* keep room for the gradients and a deterministic workspace */
    while (n > 1 && (size_t)n * set_bytes + 3 * elems * 2 + 16 * elems * 4 > free_b) n--;
    memset(b, 0, sizeof(*b));
    b->nsets = n;
    b->elems = elems;
    bench_dims(elems, &grid);
    for (i = 0; i < n; i++) {
        bench_set_bufs *s = &b->set[i];
        CUDA_CHECK(cudaMalloc((void **)&s->q, elems * 2));
        CUDA_CHECK(cudaMalloc((void **)&s->k, elems * 2));
        CUDA_CHECK(cudaMalloc((void **)&s->v, elems * 2));
        CUDA_CHECK(cudaMalloc((void **)&s->o, elems * 2));
        CUDA_CHECK(cudaMalloc((void **)&s->dout, elems * 2));
        CUDA_CHECK(cudaMalloc((void **)&s->lse, rows_heads * 4));
        bench_fill_kernel<<<grid, 256, 0, st>>>(s->q, elems, 0x2000u + 16u * (uint32_t)i);
        bench_fill_kernel<<<grid, 256, 0, st>>>(s->k, elems, 0x2001u + 16u * (uint32_t)i);
        bench_fill_kernel<<<grid, 256, 0, st>>>(s->v, elems, 0x2002u + 16u * (uint32_t)i);
        bench_fill_kernel<<<grid, 256, 0, st>>>(s->dout, elems, 0x2003u + 16u * (uint32_t)i);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaMalloc((void **)&b->dq, elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&b->dk, elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&b->dv, elems * 2));
    CUDA_CHECK(cudaMalloc((void **)&b->counts, 2 * sizeof(unsigned long long)));
    CUDA_CHECK(cudaStreamSynchronize(st));
}

static void bench_free(bench_bufs *b)
{
    int i;
    for (i = 0; i < b->nsets; i++) {
        CUDA_CHECK(cudaFree(b->set[i].q)); CUDA_CHECK(cudaFree(b->set[i].k)); CUDA_CHECK(cudaFree(b->set[i].v));
        CUDA_CHECK(cudaFree(b->set[i].o)); CUDA_CHECK(cudaFree(b->set[i].dout)); CUDA_CHECK(cudaFree(b->set[i].lse));
    }
    CUDA_CHECK(cudaFree(b->dq)); CUDA_CHECK(cudaFree(b->dk)); CUDA_CHECK(cudaFree(b->dv));
    CUDA_CHECK(cudaFree(b->counts));
}

/* ---- one point ------------------------------------------------------------------------ */
typedef struct bench_point {
    int d, dv, s, causal, det, b, h;   /* dv: V, O, dO, dV columns */
    fmha_dtype dtype;
    double flops;
    int supported;
    fmha_status status;
    char kernel[256];
    int nsplits;
    double ws_mb, ms_median, ms_min, tflops;
    int runs;
} bench_point;

/* --sinks 1: a logit per head and the dsinks output (NULL: no sinks);
 * --alibi 1: one slope per head (NULL: none) */
static float *g_sinks, *g_dsinks, *g_slopes;
static float g_dropout;   /* --dropout P (0: off) */
static int g_no_check;    /* --check 0 */
/* --bias 1|2|3: the point's bias (random bf16) and dbias, grown as the points need */
static int g_bias;
static int g_padded;   /* --padded 1: plan on bench_pad_set */
static uint16_t *g_bias_buf, *g_dbias_buf;
static size_t g_bias_cap;

static void bench_traits(const bench_point *p, fmha_bwd_traits *t)
{
    memset(t, 0, sizeof(*t));
    t->dtype = p->dtype;
    t->batch = p->b; t->nhead_q = t->nhead_k = p->h;
    t->seqlen_q = t->seqlen_k = p->s;
    t->hdim_q = p->d; t->hdim_v = p->dv;
    t->mask_type = p->causal ? FMHA_MASK_BOTTOM_RIGHT : FMHA_MASK_NONE;
    t->window_left = -1; t->window_right = p->causal ? 0 : -1;
    t->is_deterministic = p->det;
    t->has_alibi = g_slopes != NULL;
    t->has_bias = t->has_dbias = g_bias != 0;
    t->dbias_bcast = g_bias == 1 ? FMHA_BIAS_BCAST_BATCH | FMHA_BIAS_BCAST_HEAD : g_bias == 2 ? FMHA_BIAS_BCAST_BATCH : 0;
}

static void bench_fwd_args(const bench_point *p, const bench_set_bufs *s, fmha_fwd_args *a)
{
    const int64_t row = (int64_t)p->h * p->d, batch = (int64_t)p->s * row;
    const int64_t row_v = (int64_t)p->h * p->dv, batch_v = (int64_t)p->s * row_v;   /* V and O */
    memset(a, 0, sizeof(*a));
    a->dtype = p->dtype;
    a->batch = p->b; a->nhead_q = a->nhead_k = p->h;
    a->seqlen_q = a->seqlen_k = a->max_seqlen_q = p->s;
    a->hdim_q = p->d; a->hdim_v = p->dv;
    a->q = s->q; a->k = s->k; a->v = s->v; a->o = s->o; a->lse = s->lse;
    a->stride_q = a->stride_k = row;
    a->nhead_stride_q = a->nhead_stride_k = p->d;
    a->batch_stride_q = a->batch_stride_k = batch;
    a->stride_v = a->stride_o = row_v;
    a->nhead_stride_v = a->nhead_stride_o = p->dv;
    a->batch_stride_v = a->batch_stride_o = batch_v;
    a->nhead_stride_lse = p->s; a->batch_stride_lse = (int64_t)p->h * p->s;
    a->scale = 1.0f / sqrtf((float)p->d);
    a->mask_type = p->causal ? FMHA_MASK_BOTTOM_RIGHT : FMHA_MASK_NONE;
    a->window_left = -1; a->window_right = p->causal ? 0 : -1;
    a->sinks = g_sinks;
    a->alibi_slopes = g_slopes;
    a->dropout_p = g_dropout;
    a->dropout_seed = 0x5eedull;
    if (g_bias) {
        a->bias = g_bias_buf;
        a->bias_dtype = FMHA_DTYPE_BF16;
        a->stride_bias = p->s;
        a->nhead_stride_bias = g_bias >= 2 ? (int64_t)p->s * p->s : 0;
        a->batch_stride_bias = g_bias == 3 ? (int64_t)p->h * p->s * p->s : 0;
    }
}

static void bench_bwd_args(const bench_point *p, const fmha_bwd_plan *plan, const bench_set_bufs *s,
                           const bench_bufs *b, void *ws, fmha_bwd_args *a)
{
    const int64_t row = (int64_t)p->h * p->d, batch = (int64_t)p->s * row;
    const int64_t row_v = (int64_t)p->h * p->dv, batch_v = (int64_t)p->s * row_v;   /* V, O, dO, dV */
    memset(a, 0, sizeof(*a));
    a->dtype = p->dtype;
    a->batch = p->b; a->nhead_q = a->nhead_k = p->h;
    a->seqlen_q = a->seqlen_k = p->s;
    a->hdim_q = p->d; a->hdim_v = p->dv;
    a->q = s->q; a->k = s->k; a->v = s->v; a->o = s->o; a->dout = s->dout; a->lse = s->lse;
    a->dq = b->dq; a->dk = b->dk; a->dv = b->dv;
    a->stride_q = a->stride_k = a->stride_dq = a->stride_dk = row;
    a->stride_v = a->stride_o = a->stride_do = a->stride_dv = row_v;
    a->nhead_stride_q = a->nhead_stride_k = a->nhead_stride_dq = a->nhead_stride_dk = p->d;
    a->nhead_stride_v = a->nhead_stride_o = a->nhead_stride_do = a->nhead_stride_dv = p->dv;
    a->batch_stride_q = a->batch_stride_k = a->batch_stride_dq = a->batch_stride_dk = batch;
    a->batch_stride_v = a->batch_stride_o = a->batch_stride_do = a->batch_stride_dv = batch_v;
    a->nhead_stride_lse = p->s; a->batch_stride_lse = (int64_t)p->h * p->s;
    a->scale = 1.0f / sqrtf((float)p->d);
    a->mask_type = p->causal ? FMHA_MASK_BOTTOM_RIGHT : FMHA_MASK_NONE;
    a->window_left = -1; a->window_right = p->causal ? 0 : -1;
    a->is_deterministic = p->det;
    a->workspace = ws;
    a->workspace_size = plan->workspace_size;
    a->sinks = g_sinks;
    a->dsinks = g_dsinks;
    a->alibi_slopes = g_slopes;
    a->dropout_p = g_dropout;
    a->dropout_seed = 0x5eedull;
    if (g_bias) {   /* dbias: the bias's shape and strides */
        a->bias = g_bias_buf; a->dbias = g_dbias_buf;
        a->bias_dtype = FMHA_DTYPE_BF16;
        a->stride_bias = a->stride_dbias = p->s;
        a->nhead_stride_bias = a->nhead_stride_dbias = g_bias >= 2 ? (int64_t)p->s * p->s : 0;
        a->batch_stride_bias = a->batch_stride_dbias = g_bias == 3 ? (int64_t)p->h * p->s * p->s : 0;
    }
}

static int bench_check(const bench_point *p, const bench_bufs *b, cudaStream_t st)
{
    const uint16_t *g[3] = { b->dq, b->dk, b->dv };
    int w, grid;
    for (w = 0; w < 3; w++) {
        const size_t n = (size_t)p->b * p->s * p->h * (w == 2 ? p->dv : p->d);
        unsigned long long c[2] = { 0, 0 };
        bench_dims(n, &grid);
        CUDA_CHECK(cudaMemsetAsync(b->counts, 0, sizeof(c), st));
        bench_check_kernel<<<grid, 256, 0, st>>>(g[w], n, p->dtype == FMHA_DTYPE_BF16, b->counts);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(c, b->counts, sizeof(c), cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        if (c[0] || c[1] == n) {
            fprintf(stderr, "bench_bwd: d=%d s=%d causal=%d det=%d: d%c has %llu NaN/unwritten elements%s\n", p->d,
                    p->s, p->causal, p->det, "QKV"[w], c[0], c[1] == n ? " and is all zeros" : "");
            return -1;
        }
    }
    return 0;
}

static int bench_run_point(bench_point *p, bench_bufs *b, cudaStream_t st, cudaEvent_t *e0, cudaEvent_t *e1,
                           float *times)
{
    fmha_bwd_traits t;
    fmha_bwd_plan plan;
    fmha_bwd_args a;
    void *ws = NULL;
    float est = 0.f;
    double per_ms;
    int i, set = 0, nwarm, runs, grid;
    const size_t n = (size_t)p->b * p->s * p->h * p->d;
    bench_traits(p, &t);
    p->status = fmha_bwd_plan_make(g_padded ? &bench_pad_set : g_set, &t, &plan);
    if (p->status == FMHA_OK) {   /* a workspace (or a bias) that cannot fit: unsupported here */
        size_t free_b = 0, total_b = 0;
        const size_t nb = g_bias ? (size_t)(g_bias == 3 ? p->b * p->h : g_bias == 2 ? p->h : 1) * p->s * p->s : 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        if (nb * 2 > ((size_t)4 << 30) ||
            plan.workspace_size + (nb > g_bias_cap ? 4 * nb : 0) + ((size_t)256 << 20) > free_b)
            p->status = fmhai_fail(FMHA_ERR_UNSUPPORTED, "bench_bwd: the bias (%zu MB) or the workspace (%zu MB) "
                                  "does not fit", nb >> 19, plan.workspace_size >> 20);
        else if (nb > g_bias_cap) {
            if (g_bias_buf) { CUDA_CHECK(cudaFree(g_bias_buf)); CUDA_CHECK(cudaFree(g_dbias_buf)); }
            CUDA_CHECK(cudaMalloc((void **)&g_bias_buf, nb * 2));
            CUDA_CHECK(cudaMalloc((void **)&g_dbias_buf, nb * 2));
            g_bias_cap = nb;
        }
        if (nb && p->status == FMHA_OK) {
            int grid;
            bench_dims(nb, &grid);
            bench_fill_kernel<<<grid, 256, 0, st>>>(g_bias_buf, nb, 0xb1a5u);
            CUDA_CHECK(cudaGetLastError());
        }
    }
    if (p->status != FMHA_OK) {
        p->supported = 0;
        printf("%-5d %-6d %-6d %-4d %-4d %-4d %10s %9s  (%s: %s)\n", p->d, p->s, p->causal, p->det, p->b, p->h, "-",
               "-", fmha_status_str(p->status), fmha_last_error());
        return p->status == FMHA_ERR_NO_KERNEL || p->status == FMHA_ERR_UNSUPPORTED ? 0 : -1;
    }
    p->supported = 1;
    snprintf(p->kernel, sizeof(p->kernel), "%s", plan.dq_dk_dv->name);
    p->nsplits = plan.nsplits;
    p->ws_mb = plan.workspace_size / 1048576.0;
    if (plan.workspace_size) CUDA_CHECK(cudaMalloc(&ws, plan.workspace_size));
    FMHA_CHECK(fmha_bwd_prepare_workspace(&plan, ws, plan.workspace_size, NULL, NULL, (void *)st));
    /* O and LSE of every input set from the forward */
    for (i = 0; i < b->nsets; i++) {
        fmha_fwd_args fa;
        bench_fwd_args(p, &b->set[i], &fa);
        FMHA_CHECK(fmha_fwd(g_set, &fa, (void *)st));
    }
    /* first call: every gradient element written and finite */
    bench_dims(n, &grid);
    bench_poison_kernel<<<grid, 256, 0, st>>>(b->dq, n);
    bench_poison_kernel<<<grid, 256, 0, st>>>(b->dk, n);
    bench_poison_kernel<<<grid, 256, 0, st>>>(b->dv, n);
    bench_bwd_args(p, &plan, &b->set[0], b, ws, &a);
    FMHA_CHECK(fmha_bwd(&plan, &a, (void *)st));
    CUDA_CHECK(cudaGetLastError());
    if (!g_no_check && bench_check(p, b, st) != 0) { if (ws) cudaFree(ws); return -1; }

    CUDA_CHECK(cudaEventRecord(e0[0], st));
    for (i = 0; i < 3; i++) {
        bench_bwd_args(p, &plan, &b->set[set], b, ws, &a);
        FMHA_CHECK(fmha_bwd(&plan, &a, (void *)st));
        set = (set + 1) % b->nsets;
    }
    CUDA_CHECK(cudaEventRecord(e1[0], st));
    CUDA_CHECK(cudaEventSynchronize(e1[0]));
    CUDA_CHECK(cudaEventElapsedTime(&est, e0[0], e1[0]));
    per_ms = est / 3.0 > 1e-3 ? est / 3.0 : 1e-3;
    nwarm = (int)(BENCH_WARMUP_S * 1e3 / per_ms);
    nwarm = nwarm < 3 ? 3 : (nwarm > 200 ? 200 : nwarm);
    runs = (int)(BENCH_TARGET_S * 1e3 / per_ms);
    runs = runs < BENCH_MIN_RUNS ? BENCH_MIN_RUNS : (runs > BENCH_MAX_RUNS ? BENCH_MAX_RUNS : runs);
    for (i = 0; i < nwarm; i++) {
        bench_bwd_args(p, &plan, &b->set[set], b, ws, &a);
        FMHA_CHECK(fmha_bwd(&plan, &a, (void *)st));
        set = (set + 1) % b->nsets;
    }
    for (i = 0; i < runs; i++) {
        bench_bwd_args(p, &plan, &b->set[set], b, ws, &a);
        CUDA_CHECK(cudaEventRecord(e0[i], st));
        FMHA_CHECK(fmha_bwd(&plan, &a, (void *)st));
        CUDA_CHECK(cudaEventRecord(e1[i], st));
        set = (set + 1) % b->nsets;
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaGetLastError());
    for (i = 0; i < runs; i++) CUDA_CHECK(cudaEventElapsedTime(&times[i], e0[i], e1[i]));
    qsort(times, (size_t)runs, sizeof(float), ex_cmp_float);
    p->runs = runs;
    p->ms_min = times[0];
    p->ms_median = (runs & 1) ? times[runs / 2] : 0.5 * ((double)times[runs / 2 - 1] + times[runs / 2]);
    p->tflops = p->flops / (p->ms_median * 1e-3) / 1e12;
    if (ws) CUDA_CHECK(cudaFree(ws));
    return 0;
}

static int bench_write_json(const char *path, const bench_point *pts, int n)
{
    FILE *f = fopen(path, "w");
    int i;
    if (!f) { perror(path); return -1; }
    fprintf(f, "[\n");
    for (i = 0; i < n; i++) {
        const bench_point *p = &pts[i];
        fprintf(f, " {\"d\": %d, \"dv\": %d, \"s\": %d, \"causal\": %s, \"det\": %s, \"dtype\": \"%s\", \"b\": %d, "
                "\"h\": %d, ",
                p->d, p->dv, p->s, p->causal ? "true" : "false", p->det ? "true" : "false",
                p->dtype == FMHA_DTYPE_BF16 ? "bf16" : "fp16", p->b, p->h);
        if (p->supported)
            fprintf(f, "\"kernel\": \"%s\", \"nsplits\": %d, \"workspace_mb\": %.1f, \"ms\": %.6f, \"tflops\": %.2f, "
                       "\"ms_min\": %.6f, \"runs\": %d}",
                    p->kernel, p->nsplits, p->ws_mb, p->ms_median, p->tflops, p->ms_min, p->runs);
        else
            fprintf(f, "\"kernel\": null, \"ms\": null, \"tflops\": null, \"status\": \"%s\"}",
                    fmha_status_str(p->status));
        fprintf(f, "%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]\n");
    return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    bench_opts o;
    bench_point *pts;
    bench_bufs bufs;
    cudaStream_t st;
    cudaEvent_t *e0, *e1;
    float *times;
    struct cudaDeviceProp prop;
    int ndev = 0, dev = 0, l2 = 0, npts = 0, i, j, k, m, nerr = 0;
    size_t max_elems = 0, max_rh = 0;

    if (bench_parse_opts(argc, argv, &o) != 0) { bench_usage(stderr); return 2; }
    if (o.kernel) {
        static fmha_kernel_set forced;
        forced = bench_force_set(&bench_set, o.kernel, FMHA_FAMILY_BWD, FMHA_FAMILY_BWD_DET, "bench_bwd");
        g_set = &forced;
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP bench_bwd: no GPU\n");
        return 0;
    }
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    printf("bench_bwd: %s (sm_%d%d, %d SMs, L2 %d MB), %s, FLOPs = 2 s_q s_k (3 hdim + 2 hdim_v) a head "
           "(2.5 x forward at equal dims)\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, l2 >> 20, o.dtype == FMHA_DTYPE_BF16 ? "bf16" : "fp16");

    pts = (bench_point *)calloc((size_t)o.n_hdim * o.n_seqlen * o.n_causal * o.n_det, sizeof(bench_point));
    times = (float *)malloc(BENCH_MAX_RUNS * sizeof(float));
    e0 = (cudaEvent_t *)malloc(BENCH_MAX_RUNS * sizeof(cudaEvent_t));
    e1 = (cudaEvent_t *)malloc(BENCH_MAX_RUNS * sizeof(cudaEvent_t));
    if (!pts || !times || !e0 || !e1) { fprintf(stderr, "bench_bwd: out of host memory\n"); return 1; }
    for (i = 0; i < o.n_hdim; i++)
        for (j = 0; j < o.n_seqlen; j++)
            for (k = 0; k < o.n_causal; k++)
                for (m = 0; m < o.n_det; m++) {
                    bench_point *p = &pts[npts++];
                    p->d = o.hdim[i]; p->s = o.seqlen[j]; p->causal = o.causal[k]; p->det = o.det[m];
                    p->dv = o.hdim_v ? o.hdim_v : p->d;
                    p->dtype = o.dtype;
                    p->b = BENCH_TOKENS / p->s;
                    p->h = BENCH_HIDDEN / p->dv;
                    /* the five GEMMs: S, dK, dQ over d; dP, dV over dv */
                    p->flops = 2.0 * p->b * p->h * (double)p->s * p->s * (3.0 * p->d + 2.0 * p->dv) *
                               (p->causal ? 0.5 : 1.0);
                    if ((size_t)p->b * p->s * p->h * p->d > max_elems) max_elems = (size_t)p->b * p->s * p->h * p->d;
                    if ((size_t)p->b * p->s * p->h > max_rh) max_rh = (size_t)p->b * p->s * p->h;
                }
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (i = 0; i < BENCH_MAX_RUNS; i++) { CUDA_CHECK(cudaEventCreate(&e0[i])); CUDA_CHECK(cudaEventCreate(&e1[i])); }
    if (o.sinks) {
        float h_sinks[BENCH_HIDDEN / 8];   /* nhead <= hidden / 8 */
        for (i = 0; i < BENCH_HIDDEN / 8; i++) h_sinks[i] = 0.25f * (float)(i % 8) - 1.0f;
        CUDA_CHECK(cudaMalloc((void **)&g_sinks, sizeof(h_sinks)));
        CUDA_CHECK(cudaMalloc((void **)&g_dsinks, sizeof(h_sinks)));
        CUDA_CHECK(cudaMemcpy(g_sinks, h_sinks, sizeof(h_sinks), cudaMemcpyHostToDevice));
    }
    g_dropout = o.dropout;
    g_no_check = o.no_check;
    if (g_no_check) fprintf(stderr, "bench_bwd: --check 0: outputs not checked (a timing probe)\n");
    g_bias = o.bias;
    g_padded = o.padded;
    if (o.alibi) {
        float h_slopes[BENCH_HIDDEN / 8];
        for (i = 0; i < BENCH_HIDDEN / 8; i++) h_slopes[i] = (float)pow(2.0, -8.0 * (i + 1) / (BENCH_HIDDEN / 64));
        CUDA_CHECK(cudaMalloc((void **)&g_slopes, sizeof(h_slopes)));
        CUDA_CHECK(cudaMemcpy(g_slopes, h_slopes, sizeof(h_slopes), cudaMemcpyHostToDevice));
    }
    bench_alloc(&bufs, max_elems, max_rh, (size_t)l2, st);
    printf("bench_bwd: %d input sets of %zu MB, rotated per call\n", bufs.nsets, (5 * max_elems * 2) >> 20);
    if (o.hdim_v) printf("bench_bwd: hdim_v %d (V, O, dO, dV)%s\n", o.hdim_v, o.padded ? ", padded: the hdim 256 kernels" : "");
    printf("%-5s %-6s %-6s %-4s %-4s %-4s %10s %9s %8s %7s  %s\n", "hdim", "seqlen", "causal", "det", "b", "h",
           "ms(med)", "TFLOPS", "det/nd", "splits", "kernel");
    fflush(stdout);
    for (i = 0; i < npts; i++) {
        bench_point *p = &pts[i];
        if (bench_run_point(p, &bufs, st, e0, e1, times) != 0) { nerr++; p->supported = 0; continue; }
        if (!p->supported) continue;
        {
            char ratio[16] = "-";
            if (p->det && i > 0 && !pts[i - 1].det && pts[i - 1].supported && pts[i - 1].s == p->s &&
                pts[i - 1].d == p->d && pts[i - 1].causal == p->causal)
                snprintf(ratio, sizeof(ratio), "%.2f", p->tflops / pts[i - 1].tflops);
            printf("%-5d %-6d %-6d %-4d %-4d %-4d %10.4f %9.1f %8s %7d  %s\n", p->d, p->s, p->causal, p->det, p->b,
                   p->h, p->ms_median, p->tflops, ratio, p->nsplits, p->kernel);
        }
        fflush(stdout);
        if (o.json_path) bench_write_json(o.json_path, pts, i + 1);
    }
    if (o.json_path) {
        if (bench_write_json(o.json_path, pts, npts) != 0) nerr++;
        else printf("bench_bwd: wrote %s\n", o.json_path);
    }
    bench_free(&bufs);
    for (i = 0; i < BENCH_MAX_RUNS; i++) { CUDA_CHECK(cudaEventDestroy(e0[i])); CUDA_CHECK(cudaEventDestroy(e1[i])); }
    CUDA_CHECK(cudaStreamDestroy(st));
    free(pts); free(times); free(e0); free(e1);
    if (nerr) { fprintf(stderr, "bench_bwd: %d error(s)\n", nerr); return 1; }
    return 0;
}
