/*
 * test_util.h - small helpers shared by the GPU test programs.
 *
 * PASS/FAIL bookkeeping (one line per check, "N passed, M failed" last), a
 * CUDA-call checker that turns any runtime error into a FAIL line plus the summary
 * and a non-zero exit (a failed call usually leaves the context unusable, so going
 * on would only print noise), device allocation and copy wrappers that check
 * every return code, and the poison patterns. The tests are written with CUDA
 * runtime names; under hipcc a short list of #defines maps them to HIP, which is
 * all the tests use. Single translation unit per test program: the state here is
 * `static`.
 *
 * Poison patterns, chosen to be NaN in both fp16 and bf16 and distinct:
 *   TU_POISON_OUT16 (0x7FFF) fills outputs before a run: a logical element still
 *       holding it was never written, a padding element no longer holding it was
 *       written when it must not be.
 *   TU_POISON_IN16 (0xFFFF) fills the padding of inputs: a kernel that lets
 *       padding leak into the math (reading past hdim, multiplying a masked V row
 *       by 0) turns the output into NaN.
 *   TU_POISON_LSE (0x7FC0DEAD) fills the fp32 LSE buffer.
 */
#ifndef FMHA_TEST_UTIL_H
#define FMHA_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Tolerances of the project's tests (rel-L2 of O, and a loose max-abs bound
 * scaled by the input amplitude), shared by every family's GPU tests. */
static double tu_tol_rel_l2(int is_bf16) { return is_bf16 ? 1e-2 : 2e-3; }
static double tu_tol_max_abs(int is_bf16, float amp) { return (is_bf16 ? 4e-2 : 1e-2) * amp; }

#if defined(__HIPCC__)
#  include <hip/hip_runtime.h>
#  define cudaError_t hipError_t
#  define cudaSuccess hipSuccess
#  define cudaStream_t hipStream_t
#  define cudaGraph_t hipGraph_t
#  define cudaGraphExec_t hipGraphExec_t
#  define cudaEvent_t hipEvent_t
#  define cudaDeviceProp hipDeviceProp_t
#  define cudaGetDeviceCount hipGetDeviceCount
#  define cudaGetDevice hipGetDevice
#  define cudaGetDeviceProperties hipGetDeviceProperties
#  define cudaGetErrorString hipGetErrorString
#  define cudaGetLastError hipGetLastError
#  define cudaMalloc hipMalloc
#  define cudaFree hipFree
#  define cudaMemcpy hipMemcpy
#  define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#  define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#  define cudaDeviceSynchronize hipDeviceSynchronize
#  define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#  define cudaStreamNonBlocking hipStreamNonBlocking
#  define cudaStreamDestroy hipStreamDestroy
#  define cudaStreamSynchronize hipStreamSynchronize
#  define cudaStreamBeginCapture hipStreamBeginCapture
#  define cudaStreamEndCapture hipStreamEndCapture
#  define cudaStreamCaptureModeGlobal hipStreamCaptureModeGlobal
#  define cudaGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#  define cudaGraphLaunch hipGraphLaunch
#  define cudaGraphExecDestroy hipGraphExecDestroy
#  define cudaGraphDestroy hipGraphDestroy
#  define cudaEventCreate hipEventCreate
#  define cudaEventDestroy hipEventDestroy
#  define cudaEventRecord hipEventRecord
#  define cudaEventSynchronize hipEventSynchronize
#  define cudaEventElapsedTime hipEventElapsedTime
#else
#  include <cuda_runtime.h>
#endif

#define TU_POISON_OUT16 ((uint16_t)0x7FFFu)
#define TU_POISON_IN16  ((uint16_t)0xFFFFu)
#define TU_POISON_LSE   (0x7FC0DEADu)

/* ---------------------------------------------------------------------------
 * PASS / FAIL bookkeeping
 * ------------------------------------------------------------------------- */
static int tu_passed, tu_failed;
static const char *tu_filter;          /* --filter substring, NULL: all      */
static const char *tu_current = "";    /* check in progress, for fatal errors */

static inline int tu_selected(const char *name)
{
    return !tu_filter || strstr(name, tu_filter) != NULL;
}

static inline void tu_pass(const char *name)
{
    printf("PASS %s\n", name);
    fflush(stdout);
    tu_passed++;
}

static inline void tu_fail(const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("FAIL %s: ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    tu_failed++;
}

/* Prints the summary line and exits: 0 only when nothing failed. */
static inline void tu_finish(void)
{
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    fflush(stdout);
    exit(tu_failed ? 1 : 0);
}

/* A CUDA runtime call failed: report it against the current check and stop. */
static inline void tu_cuda_fatal(const char *call, cudaError_t e, const char *file, int line)
{
    tu_fail(tu_current[0] ? tu_current : "cuda", "%s -> %s (%s:%d)", call, cudaGetErrorString(e), file, line);
    tu_finish();
}

#define TU_CUDA(call)                                                         \
    do {                                                                      \
        cudaError_t tu_e_ = (call);                                           \
        if (tu_e_ != cudaSuccess) tu_cuda_fatal(#call, tu_e_, __FILE__, __LINE__); \
    } while (0)

/* ---------------------------------------------------------------------------
 * Device presence, memory
 * ------------------------------------------------------------------------- */

/* 1 when a usable device exists. A missing driver makes cudaGetDeviceCount
 * fail; that is "no GPU", not a test failure. */
static inline int tu_gpu_available(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

/* Allocation rounded up so that zero-sized tensors still get a real, aligned
 * pointer (the library rejects NULL tensors). cudaMalloc aligns to 256 bytes. */
static inline void *tu_dmalloc(size_t bytes)
{
    void *p = NULL;
    if (bytes < 256) bytes = 256;
    TU_CUDA(cudaMalloc(&p, bytes));
    return p;
}

static inline void tu_dfree(void *p)
{
    if (p) TU_CUDA(cudaFree(p));
}

static inline void tu_upload(void *dst, const void *src, size_t bytes)
{
    if (bytes) TU_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

static inline void tu_download(void *dst, const void *src, size_t bytes)
{
    if (bytes) TU_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

/* Host allocation that cannot return NULL silently. */
static inline void *tu_hmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        tu_fail(tu_current[0] ? tu_current : "host", "out of host memory (%zu bytes)", bytes);
        tu_finish();
    }
    return p;
}

static inline void tu_fill16(uint16_t *h, size_t n, uint16_t v)
{
    size_t i;
    for (i = 0; i < n; i++) h[i] = v;
}

static inline void tu_fill32(uint32_t *h, size_t n, uint32_t v)
{
    size_t i;
    for (i = 0; i < n; i++) h[i] = v;
}

/* Poisons a device buffer of n 16-bit / 32-bit elements from the host. */
static inline void tu_poison16(void *dev, size_t n, uint16_t v)
{
    uint16_t *h = (uint16_t *)tu_hmalloc(n * 2);
    tu_fill16(h, n, v);
    tu_upload(dev, h, n * 2);
    free(h);
}

static inline void tu_poison32(void *dev, size_t n, uint32_t v)
{
    uint32_t *h = (uint32_t *)tu_hmalloc(n * 4);
    tu_fill32(h, n, v);
    tu_upload(dev, h, n * 4);
    free(h);
}

/* Counts elements of a downloaded 16-bit buffer that differ from v. */
static inline size_t tu_count_not16(const uint16_t *h, size_t n, uint16_t v)
{
    size_t i, c = 0;
    for (i = 0; i < n; i++) c += h[i] != v;
    return c;
}

/* 1 when the device buffer still holds the n 16-bit values of h. */
static inline int tu_same_on_device(const void *dev, const uint16_t *h, size_t n)
{
    uint16_t *tmp = (uint16_t *)tu_hmalloc(n * 2 + 2);
    int same;
    tu_download(tmp, dev, n * 2);
    same = memcmp(tmp, h, n * 2) == 0;
    free(tmp);
    return same;
}

/* ---------------------------------------------------------------------------
 * Graph capture
 * ------------------------------------------------------------------------- */

/* Enqueues the work to capture on st: 0 on success, else fills why. */
typedef int (*tu_enqueue_fn)(const void *ctx, cudaStream_t st, char *why, size_t cap);

/* Captures enqueue(ctx) into a graph, launches it and waits. Capture is always
 * ended, even when the enqueue fails. Returns 0 on success, else fills why. */
static inline int tu_launch_graph(tu_enqueue_fn enqueue, const void *ctx, cudaStream_t st, char *why, size_t cap)
{
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int r;
    cudaError_t e;
    TU_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    r = enqueue(ctx, st, why, cap);
    e = cudaStreamEndCapture(st, &graph);
    if (r != 0) {
        if (graph) cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        return -1;
    }
    if (e != cudaSuccess) {
        snprintf(why, cap, "stream capture broken by the library: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return -1;
    }
    TU_CUDA(cudaGraphInstantiateWithFlags(&exec, graph, 0));
    TU_CUDA(cudaGraphLaunch(exec, st));
    TU_CUDA(cudaStreamSynchronize(st));
    TU_CUDA(cudaGraphExecDestroy(exec));
    TU_CUDA(cudaGraphDestroy(graph));
    return 0;
}

/* ---------------------------------------------------------------------------
 * Test program driver: options, --list, device set-up, the problem loop
 * ------------------------------------------------------------------------- */
typedef struct tu_args {
    int quick;          /* --quick: only the problems marked quick       */
    int list;           /* --list: print the problem names and exit      */
    uint64_t seed;      /* --seed N                                      */
} tu_args;

/* The problem list of a test program, seen through accessors by index. */
typedef struct tu_cfg_list {
    int n;
    const char *(*name)(int i);
    int (*quick)(int i);
    double (*work)(int i);       /* reference multiply-adds / 2 */
} tu_cfg_list;

/* Parses --quick --filter SUBSTR --list --seed N --help/-h (the filter goes to
 * tu_filter). usage_extra is printed after the first usage line. Returns -1 to
 * go on, else the exit status (0 after --help, 2 on an unknown argument). */
static inline int tu_parse_args(int argc, char **argv, const char *prog, const char *usage_extra, tu_args *a)
{
    int i, help = 0, bad = 0;
    a->quick = 0;
    a->list = 0;
    a->seed = 20261122;
    for (i = 1; i < argc && !help && !bad; i++) {
        if (!strcmp(argv[i], "--quick")) a->quick = 1;
        else if (!strcmp(argv[i], "--list")) a->list = 1;
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) tu_filter = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) a->seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) help = 1;
        else { fprintf(stderr, "%s: unknown argument %s\n", prog, argv[i]); bad = 1; }
    }
    if (!help && !bad) return -1;
    printf("usage: %s [--quick] [--filter SUBSTR] [--list] [--seed N]\n%s", prog, usage_extra);
    return help ? 0 : 2;
}

/* 1 when problem i runs under these options (--quick, --filter). */
static inline int tu_cfg_wanted(const tu_args *a, const tu_cfg_list *l, int i)
{
    return (!a->quick || l->quick(i)) && tu_selected(l->name(i));
}

/* --list: the selected problem names, then a summary line. */
static inline void tu_list_cfgs(const tu_args *a, const tu_cfg_list *l)
{
    int i, nq = 0, nsel = 0;
    double work = 0.0;
    for (i = 0; i < l->n; i++) {
        if (!tu_cfg_wanted(a, l, i)) continue;
        printf("%s%s\n", l->name(i), l->quick(i) ? "  [quick]" : "");
        work += l->work(i);
        nsel++;
        nq += l->quick(i) != 0;
    }
    printf("# %d of %d problems listed, %d of them in --quick; reference work %.2f G multiply-adds\n", nsel, l->n,
           nq, work * 2e-9);
}

/* A suite built as a compile check (FMHA_TILE_TEST_COMPILE_ONLY=1 in the
 * Makefile: PTX alone at NVVM -O1, for a machine without a GPU) prints its
 * SKIP line and an empty summary instead of running: its code was not
 * built to be run. Returns 1 then. */
static inline int tu_compile_check_only(const char *prog)
{
#if defined(FMHA_TILE_TEST_COMPILE_CHECK)
    printf("SKIP %s: built as a compile check (FMHA_TILE_TEST_COMPILE_ONLY)\n0 passed, 0 failed\n", prog);
    return 1;
#else
    (void)prog;
    return 0;
#endif
}

/* No GPU or a compile-check build: prints the SKIP line and an empty
 * summary, returns 0. Otherwise
 * prints the device line, creates the test stream and returns 1. */
static inline int tu_start_device(const char *prog, const tu_args *a, int ncfg, cudaStream_t *stream)
{
    cudaDeviceProp prop;
    int dev = 0;
    if (tu_compile_check_only(prog)) return 0;
    if (!tu_gpu_available()) {
        printf("SKIP %s: no GPU\n", prog);
        printf("0 passed, 0 failed\n");
        return 0;
    }
    TU_CUDA(cudaGetDevice(&dev));
    TU_CUDA(cudaGetDeviceProperties(&prop, dev));
    printf("# device %d: %s (sm_%d%d), %d problems%s\n", dev, prop.name, prop.major, prop.minor, ncfg,
           a->quick ? " (--quick subset)" : "");
    fflush(stdout);
    TU_CUDA(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
    return 1;
}

/* The common start of a test program: options, --list, the device. Returns
 * -1 to go on (the stream is created), else the exit status. */
static inline int tu_begin(int argc, char **argv, const char *prog, const char *usage_extra,
                           const tu_cfg_list *cfgs, tu_args *a, cudaStream_t *stream)
{
    const int rc = tu_parse_args(argc, argv, prog, usage_extra, a);
    if (rc >= 0) return rc;
    if (a->list) {
        tu_list_cfgs(a, cfgs);
        return 0;
    }
    return tu_start_device(prog, a, cfgs->n, stream) ? -1 : 0;
}

/* Destroys the test stream, prints the CPU time since t0 and the summary, exits. */
static inline void tu_end(cudaStream_t stream, clock_t t0)
{
    TU_CUDA(cudaStreamDestroy(stream));
    printf("# %.1f s CPU time\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    tu_finish();
}

/* A test program: its problem list and the steps main runs. */
typedef struct tu_suite {
    const char *prog, *usage_extra;
    tu_cfg_list cfgs;
    void (*checks)(cudaStream_t stream, uint64_t seed);   /* API checks before the problems (NULL: none) */
    void (*run)(int i, cudaStream_t stream, uint64_t seed); /* problem i                              */
    void (*cleanup)(void);                                 /* after the problems (NULL: none)        */
} tu_suite;

/* main of a test program: options, --list, the device, the checks, every
 * selected problem (seed + 7919 i), the summary. Returns the exit status. */
static inline int tu_main(int argc, char **argv, const tu_suite *s)
{
    tu_args args;
    cudaStream_t stream;
    clock_t t0 = clock();
    int i;
    const int rc = tu_begin(argc, argv, s->prog, s->usage_extra, &s->cfgs, &args, &stream);
    if (rc >= 0) return rc;
    if (s->checks) s->checks(stream, args.seed);
    for (i = 0; i < s->cfgs.n; i++)
        if (tu_cfg_wanted(&args, &s->cfgs, i)) s->run(i, stream, args.seed + (uint64_t)i * 7919u);
    if (s->cleanup) s->cleanup();
    tu_end(stream, t0);
    return 0;
}

#endif /* FMHA_TEST_UTIL_H */
