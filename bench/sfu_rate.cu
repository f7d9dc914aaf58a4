/*
 * sfu_rate: the issue rates of the e4m3 softmax's special instructions, and
 * how long one warp a scheduler takes for a softmax tile's exponentials.
 *
 * Part 1, throughput (every SM full of warps, eight independent chains a
 * thread): ex2.approx on f32, on f16x2 and bf16x2 pairs, on one f16; the
 * conversions the e4m3 softmax packs P with (two f32 to e4m3x2, an f16x2
 * pair to e4m3x2) and two f32 to f16x2; FFMA as the yardstick (128 a clock
 * an SM on sm_90). Reported as instructions (per thread) a clock an SM and
 * as elements a clock an SM, in SM clocks (each SM's clock64 span from its
 * first block's start to its last block's end; the slowest SM's), so a
 * throttled card reads the same. (Block 0's span alone read 8x short: the
 * blocks of an SM do not all run at once.)
 *
 * Part 2, latency (one block an SM of 1, 2 or 3 warps a scheduler, as the
 * Hopper forward's MMA warpgroups run): cycles for one e4m3 hdim-128 tile's
 * softmax work a thread, 96 scores in two rows: (a) 96 exponentials alone,
 * (b) with the scale-and-subtract FFMA and each row's sum, (c) with each
 * row's max and its two shuffles first. The special-function unit gives a
 * warp 8 cycles an exponential (16 a clock an SM), so (a) cannot go below
 * 768 cycles a warp.
 *
 * What it is for: which special-function work the e4m3 softmax can shed
 * (bench/RESULTS.md, session 34: f16x2 pairs halve the instructions but not
 * the exponentials' time).
 *
 *   make build/bench/sfu_rate   (sm_90a; any sm_80+ build runs part 1)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "sfu_rate: %s (%s:%d)\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

enum { OP_EX2_F32, OP_EX2_F16X2, OP_EX2_BF16X2, OP_EX2_F16, OP_CVT_E4M3_F32, OP_CVT_E4M3_F16X2, OP_CVT_F16X2_F32,
       OP_FFMA, OP_N };
static const char *const op_name[OP_N] = { "ex2.approx.ftz.f32", "ex2.approx.f16x2", "ex2.approx.ftz.bf16x2",
                                           "ex2.approx.f16", "cvt e4m3x2 <- 2 x f32", "cvt e4m3x2 <- f16x2",
                                           "cvt f16x2 <- 2 x f32", "fma.rn.f32 (yardstick)" };
static const int op_elems[OP_N] = { 1, 2, 2, 1, 2, 2, 2, 1 };

/* eight independent chains a thread; each step feeds its result back */
template <int OP> __global__ void rate_kernel(float *out, long long *cyc, int iters, float seed)
{
    const long long t0 = clock64();
    float a[8];
    uint32_t h[8];
    for (int i = 0; i < 8; ++i) {
        a[i] = -(threadIdx.x * 1e-3f + i * 1e-2f + seed);
        h[i] = 0x3c00bc00u ^ (uint32_t)(i << 3);
    }
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            uint32_t r;
            float f;
            if (OP == OP_EX2_F32) {
                asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(f) : "f"(a[i]));
                a[i] = f - 1.f;
            } else if (OP == OP_EX2_F16X2) {
                asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(r) : "r"(h[i]));
                h[i] = r ^ 0x80008000u;
            } else if (OP == OP_EX2_BF16X2) {
                asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(r) : "r"(h[i]));
                h[i] = r ^ 0x80008000u;
            } else if (OP == OP_EX2_F16) {
                unsigned short x = (unsigned short)h[i], y;
                asm volatile("ex2.approx.f16 %0, %1;" : "=h"(y) : "h"(x));
                h[i] = (uint32_t)(y ^ 0x8000u);
            } else if (OP == OP_CVT_E4M3_F32) {
                asm volatile("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %1, %2; cvt.u32.u16 %0, t; }"
                             : "=r"(r) : "f"(a[i]), "f"(a[i] + 1.f));
                a[i] = __uint_as_float(r | 0x3f000000u);
            } else if (OP == OP_CVT_E4M3_F16X2) {
                asm volatile("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f16x2 t, %1; cvt.u32.u16 %0, t; }"
                             : "=r"(r) : "r"(h[i]));
                h[i] = r | 0x3c000000u;
            } else if (OP == OP_CVT_F16X2_F32) {
                asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(a[i]), "f"(a[i] * 0.5f));
                a[i] = __uint_as_float(r & 0x3fffffffu);
            } else {
                asm volatile("fma.rn.ftz.f32 %0, %1, %1, %1;" : "=f"(f) : "f"(a[i]));
                a[i] = f;
            }
        }
    }
    float s = 0.f;
    for (int i = 0; i < 8; ++i) s += a[i] + __uint_as_float(h[i]);
    if (s == 12345.f) out[0] = s;   /* never true: keeps the chains */
    __syncthreads();
    if (threadIdx.x == 0) {   /* this block's start, end and SM */
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        cyc[3 * blockIdx.x] = t0;
        cyc[3 * blockIdx.x + 1] = clock64();
        cyc[3 * blockIdx.x + 2] = sm;
    }
}

/* One tile's softmax work a thread (96 scores, rows 0 / 1 alternating),
 * `iters` times; lane 0 of block 0 stores the cycles. mode 0: the
 * exponentials; 1: + the FFMA and the row sums; 2: + each row's max over
 * its 48 scores and the quad's two shuffles before the exponentials. */
template <int MODE> __global__ void chain_kernel(float *out, long long *cyc, int iters, float seed)
{
    float a[96];
    for (int i = 0; i < 96; ++i) a[i] = -(threadIdx.x * 1e-3f + i * 1e-2f + seed);
    float s0 = 0.f, s1 = 0.f, m0 = 0.f, m1 = 0.f;
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
        if (MODE == 2) {
            float x0 = a[0], x1 = a[1];
#pragma unroll
            for (int i = 0; i < 48; ++i) {
                x0 = fmaxf(x0, a[2 * i]);
                x1 = fmaxf(x1, a[2 * i + 1]);
            }
            x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
            x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
            x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
            x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
            m0 = x0 * 1.4427f;
            m1 = x1 * 1.4427f;
        }
        float r0 = 0.f, r1 = 0.f;
#pragma unroll
        for (int i = 0; i < 48; ++i) {
            float e0, e1, x0 = a[2 * i], x1 = a[2 * i + 1];
            if (MODE > 0) {
                x0 = fmaf(x0, 1.4427f, -m0);
                x1 = fmaf(x1, 1.4427f, -m1);
            }
            asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(e0) : "f"(x0));
            asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(e1) : "f"(x1));
            r0 += e0;
            r1 += e1;
            a[2 * i] = e0 - 1.5f;   /* the next iteration's scores: never the same values */
            a[2 * i + 1] = e1 - 1.5f;
        }
        s0 = s0 * 0.5f + r0;
        s1 = s1 * 0.5f + r1;
    }
    const long long t1 = clock64();
    if (threadIdx.x == 0 && blockIdx.x == 0) cyc[0] = t1 - t0;
    float s = s0 + s1;
    for (int i = 0; i < 96; ++i) s += a[i];
    if (s == 12345.f) out[0] = s;
}

typedef void (*rate_fn)(float *, long long *, int, float);
typedef void (*chain_fn)(float *, long long *, int, float);

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP sfu_rate: no GPU\n");
        return 0;
    }
    int sms = 0, cc = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, 0));
    float *d_out;
    long long *d_cyc, *h_cyc, *sm_lo, *sm_hi;
    const int blocks = sms * 8;
    CK(cudaMalloc(&d_out, sizeof(float)));
    CK(cudaMalloc(&d_cyc, 3 * sizeof(long long) * blocks));
    h_cyc = (long long *)malloc(3 * sizeof(long long) * blocks);
    sm_lo = (long long *)malloc(2 * sizeof(long long) * 1024);
    if (!h_cyc || !sm_lo) return 1;
    sm_hi = sm_lo + 1024;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    /* ---- part 1: throughput ---------------------------------------------- */
    const rate_fn fns[OP_N] = { rate_kernel<OP_EX2_F32>,       rate_kernel<OP_EX2_F16X2>,
                                rate_kernel<OP_EX2_BF16X2>,    rate_kernel<OP_EX2_F16>,
                                rate_kernel<OP_CVT_E4M3_F32>,  rate_kernel<OP_CVT_E4M3_F16X2>,
                                rate_kernel<OP_CVT_F16X2_F32>, rate_kernel<OP_FFMA> };
    const int iters = 4096, threads = 256;
    const double ops = (double)blocks * threads * iters * 8;   /* instructions (a thread's) a launch */
    printf("sfu_rate: %d SMs, %d blocks of %d threads (one wave)\n", sms, blocks, threads);
    printf("%-26s %10s %8s %14s %14s\n", "instruction", "ms", "MHz", "instr/clk/SM", "elem/clk/SM");
    for (int op = 0; op < OP_N; ++op) {
        float best = 1e30f;
        long long cb = 0;
        for (int r = 0; r < 3; ++r) {
            CK(cudaEventRecord(e0));
            fns[op]<<<blocks, threads>>>(d_out, d_cyc, iters, 1.f);
            CK(cudaGetLastError());
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float t = 0.f;
            CK(cudaEventElapsedTime(&t, e0, e1));
            if (t < best) {   /* the slowest SM's span, first start to last end */
                best = t;
                CK(cudaMemcpy(h_cyc, d_cyc, 3 * sizeof(long long) * blocks, cudaMemcpyDeviceToHost));
                for (int i = 0; i < 1024; ++i) sm_lo[i] = -1, sm_hi[i] = 0;
                for (int bi = 0; bi < blocks; ++bi) {
                    const int sm = (int)(h_cyc[3 * bi + 2] & 1023);
                    if (sm_lo[sm] < 0 || h_cyc[3 * bi] < sm_lo[sm]) sm_lo[sm] = h_cyc[3 * bi];
                    if (h_cyc[3 * bi + 1] > sm_hi[sm]) sm_hi[sm] = h_cyc[3 * bi + 1];
                }
                cb = 0;
                for (int i = 0; i < 1024; ++i)
                    if (sm_lo[i] >= 0 && sm_hi[i] - sm_lo[i] > cb) cb = sm_hi[i] - sm_lo[i];
            }
        }
        const double ipc = ops / ((double)cb * sms);
        printf("%-26s %10.3f %8.0f %14.2f %14.2f\n", op_name[op], best, (double)cb / (best * 1e3), ipc,
               ipc * op_elems[op]);
    }

    /* ---- part 2: one tile's exponentials at 1..3 warps a scheduler -------- */
    const chain_fn chains[3] = { chain_kernel<0>, chain_kernel<1>, chain_kernel<2> };
    const char *const chain_name[3] = { "96 exps", "+ FFMA, row sums", "+ row max, shuffles" };
    const int citers = 2000, smem = 200 * 1024;   /* one block an SM */
    printf("\ncycles a tile (96 scores a thread), one block an SM\n%-22s %10s %10s %10s\n", "work", "1 warp",
           "2 warps", "3 warps");
    for (int m = 0; m < 3; ++m) {
        CK(cudaFuncSetAttribute(chains[m], cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        printf("%-22s", chain_name[m]);
        for (int w = 1; w <= 3; ++w) {
            chains[m]<<<sms, 128 * w, smem>>>(d_out, d_cyc, citers, 1.f);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            long long c = 0;
            CK(cudaMemcpy(&c, d_cyc, sizeof(c), cudaMemcpyDeviceToHost));
            printf(" %10.0f", (double)c / citers);
        }
        printf("\n");
    }
    if (cc < 9) printf("(not an sm_90 device: part 2's one block an SM may differ)\n");
    CK(cudaFree(d_out));
    CK(cudaFree(d_cyc));
    free(h_cyc);
    free(sm_lo);
    return 0;
}
