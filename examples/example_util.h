/*
 * example_util.h - small helpers shared by the CUDA example programs
 * (examples/fmha_fwd.cu, examples/fmha_batch_prefill.cu) and the benchmark
 * drivers (bench/bench_fwd.cu, bench/bench_prefill.cu).
 *
 * The including file defines EX_PROG, its program name as a string literal, before
 * including this header; error messages start with it. Single translation unit per
 * program: everything here is `static` or a macro.
 *
 * The examples and the benchmarks keep their own exit-status conventions, so each
 * has its own error-check macros:
 *   examples: CHECK_CUDA(call) prints "EX_PROG: call failed: ..." and exits 2.
 *   benches (#define EX_BENCH too):  CUDA_CHECK(call) / FMHA_CHECK(call) print "EX_PROG: file:line: ..."
 *             and exit 1.
 */
#ifndef FMHA_EXAMPLE_UTIL_H
#define FMHA_EXAMPLE_UTIL_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"

#ifndef EX_PROG
#  error "define EX_PROG (the program name) before including example_util.h"
#endif

/* ---------------------------------------------------------------------------
 * Examples: error check, option parsing, median time
 * ------------------------------------------------------------------------- */
#define CHECK_CUDA(call)                                                                   \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, EX_PROG ": %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), \
                    __FILE__, __LINE__);                                                   \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)

/* Integer options by name: the examples fill a table of these. */
typedef struct ex_int_opt {
    const char *name;
    int *field;
} ex_int_opt;

/* "-key=value" (any number of leading dashes): the key into key[cap] and a
 * pointer to the value, or NULL when the argument is not of that form. */
static inline const char *ex_split_opt(const char *arg, char *key, size_t cap)
{
    const char *a = arg, *eq;
    size_t n;
    while (*a == '-') a++;
    eq = strchr(a, '=');
    if (!eq || a == arg) return NULL;
    n = (size_t)(eq - a);
    if (n >= cap) n = cap - 1;
    memcpy(key, a, n);
    key[n] = 0;
    return eq + 1;
}

/* Sets the integer option `key` from val: 1 when the table has it. */
static inline int ex_set_int_opt(const ex_int_opt *opts, int n, const char *key, const char *val)
{
    int k;
    for (k = 0; k < n; k++)
        if (!strcmp(key, opts[k].name)) {
            *opts[k].field = atoi(val);
            return 1;
        }
    return 0;
}

/* "t", "b", "0".."2", "t:l,r", "b:l,r" -> mask type and window. 0, or -1 when
 * the string is malformed. */
static inline int ex_parse_mask(const char *s, fmha_mask_type *mask, int *wl, int *wr)
{
    int l = -1, r = 0;
    if (!strcmp(s, "0") || !strcmp(s, "n")) { *mask = FMHA_MASK_NONE; *wl = *wr = -1; return 0; }
    if (s[0] == 't' || s[0] == '1') *mask = FMHA_MASK_TOP_LEFT;
    else if (s[0] == 'b' || s[0] == '2') *mask = FMHA_MASK_BOTTOM_RIGHT;
    else return -1;
    if (s[1] == ':') {
        if (sscanf(s + 2, "%d,%d", &l, &r) != 2 || l < -1 || r < -1) return -1;
    } else if (s[1] != 0) {
        return -1;
    }
    *wl = l;
    *wr = r;
    return 0;
}

/* "17,300,5" -> b lengths; one value means all equal. A list of b values is
 * accepted only when per_entry is set (group mode / paged sequences). */
static inline int ex_parse_lengths(const char *s, int b, int *out, int per_entry)
{
    int n = 0, i;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > (1L << 30)) return -1;
        if (n < b) out[n] = (int)v;
        n++;
        p = end;
        if (*p == ',') p++;
        else if (*p) return -1;
    }
    if (n == 1) { for (i = 1; i < b; i++) out[i] = out[0]; return 0; }
    if (!per_entry) return -1;    /* batch mode: one length for all */
    return n == b ? 0 : -1;
}

static inline int ex_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------------------
 * Benchmarks (the including file also defines EX_BENCH): error checks, random fill
 * ------------------------------------------------------------------------- */
#ifdef EX_BENCH
#define CUDA_CHECK(call)                                                              \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, EX_PROG ": %s:%d: %s failed: %s (%s)\n", __FILE__,        \
                    __LINE__, #call, cudaGetErrorString(e_), cudaGetErrorName(e_));   \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define FMHA_CHECK(call)                                                              \
    do {                                                                              \
        fmha_status s_ = (call);                                                      \
        if (s_ != FMHA_OK) {                                                          \
            fprintf(stderr, EX_PROG ": %s:%d: %s failed: %s: %s\n", __FILE__,         \
                    __LINE__, #call, fmha_status_str(s_), fmha_last_error());         \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static __device__ __forceinline__ uint32_t bench_hash(uint32_t x)
{
    /* lowbias32 (Chris Wellons) */
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* float -> bf16 bits, round to nearest even (inputs are finite) */
static __device__ __forceinline__ uint16_t bench_f32_to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    u += 0x7fffU + ((u >> 16) & 1U);
    return (uint16_t)(u >> 16);
}

/* Uniform bf16 in (-1, 1), never exactly 0: (k + 0.5) / 2^23 - 1 with k in [0, 2^24). */
static __global__ void bench_fill_kernel(uint16_t *p, size_t n, uint32_t seed)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += step) {
        uint32_t h = bench_hash((uint32_t)i ^ bench_hash(seed ^ (uint32_t)(i >> 32)));
        float f = ((float)(h >> 8) + 0.5f) * (1.0f / 8388608.0f) - 1.0f;
        p[i] = bench_f32_to_bf16(f);
    }
}

#endif /* EX_BENCH */

#endif /* FMHA_EXAMPLE_UTIL_H */
