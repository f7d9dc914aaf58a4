/*
 * wgmma_rate: the throughput of the Hopper forward's two products on their
 * own, at the shapes the hdim-256 and e4m3 hdim-128 kernels issue, to tell a product bound by
 * the tensor cores from one bound by shared-memory reads.
 *
 * One block per SM (208 KB of shared memory), two warpgroups, each looping
 * over one shape with the pipeline's own wrappers (tile/warpgroup_mma.h):
 *   S  n80 / n128 / n256:  S = Q K^T, both from shared memory (SS), Q 64 x
 *                          256 a warpgroup, K N x 256 shared by both
 *   PV k80 / k128:         O += P V, P from registers (RS), V K x 256
 *                          read MN-major
 *   S+PV n80:              one of each, then a wait for both (the kernel's turn)
 *   e4m3 hdim 128:         S n192 over k 128 (SS), P V k192 (RS, V^T as
 *                          tile/vt8_layout.h lays it), and one of each
 *   bf16 hdim 128:         S n128 + P V k128, one of each
 * The operands are whatever shared memory holds (the tensor cores' speed
 * does not depend on the values); the accumulators are summed to global
 * memory so nothing is dropped. TFLOPS = 2 x m x n x k x products / time.
 *
 *   make build/bench/wgmma_rate   (or: nvcc -x cu -std=c++17 -O3 \
 *        -gencode=arch=compute_90a,code=sm_90a -Iinclude bench/wgmma_rate.cu)
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "fmha_tile.h"

#define RATE_ITERS 2048
#define RATE_SMEM (208 * 1024)

/* mode: 0 S (n = N), 1 PV (k = N), 2 S n80 + PV k80; both compile-time
 * constants of each kernel below (wgmma under a run-time branch is
 * serialised by ptxas) */
static __device__ __forceinline__ void rate_body(const int mode, const int N, float *out)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    extern __shared__ __align__(1024) char smem[];
    const fmhai_smem_t base = (fmhai_smem_addr(smem) + 1023u) & ~1023u;
    const int wg = (int)threadIdx.x / 128;
    const fmhai_smem_t sQ = base, sK = base + 64 * 1024, sV = base + 128 * 1024;
    float acc_s[128], acc_o[128];
    uint32_t pa[8][4];
    for (int i = 0; i < 128; ++i) acc_s[i] = acc_o[i] = 0.f;
    for (int k = 0; k < 8; ++k)
        for (int r = 0; r < 4; ++r) pa[k][r] = 0x3c003c00u ^ (uint32_t)(threadIdx.x * 7 + k * 4 + r);
    fmhai_wg_fence_acc(acc_s, 128);
    fmhai_wg_fence_acc(acc_o, 128);
    for (int it = 0; it < RATE_ITERS; ++it) {
        for (int k = 0; k < 8; ++k)   /* P's registers as the softmax would leave them */
            for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(pa[k][r]));
        fmhai_wg_fence();
        if (mode == 0) {
            if (N == 80) fmhai_wg_gemm_abt_c(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), 128, sK, 80, 256, 1, 0, 1);
            else if (N == 128) fmhai_wg_gemm_abt_c(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), 128, sK, 128, 256, 1, 0, 1);
            else fmhai_wg_gemm_abt_c(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), 128, sK, 64, 256, 1, 0, 1);
        } else if (mode == 1) {
            if (N == 128) fmhai_wg_gemm_rs(acc_o, pa, fmhai_opaque_smem(sV), 256, 128, 1, 0);
            else fmhai_wg_gemm_rs(acc_o, pa, fmhai_opaque_smem(sV), 256, 80, 1, 0);
        } else if (mode == 2) {
            fmhai_wg_gemm_rs(acc_o, pa, fmhai_opaque_smem(sV), 256, 80, 1, 0);
            fmhai_wg_gemm_abt_c(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), 128, sK, 80, 256, 1, 0, 1);
        } else if (mode == 3) {   /* e4m3 hdim 128, 192-key tile: S (k 128 = 64 16-bit columns) */
            fmhai_wg_gemm_abt_c(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), 128, sK, 192, 64, 2, 0, 1);
        } else if (mode == 4) {   /* e4m3 P V, V^T as the kernel lays it (tile/vt8_layout.h) */
            fmhai_wg_gemm_rs8(acc_o, pa, fmhai_opaque_smem(sV), 128, 192);
        } else if (mode == 5) {
            fmhai_wg_gemm_rs8(acc_o, pa, fmhai_opaque_smem(sV), 128, 192);
            fmhai_wg_gemm_abt_c(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), 128, sK, 192, 64, 2, 0, 1);
        } else {                  /* bf16 hdim 128, 128-key tile: S and P V */
            fmhai_wg_gemm_rs(acc_o, pa, fmhai_opaque_smem(sV), 128, 128, 1, 0);
            fmhai_wg_gemm_abt_c(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), 128, sK, 128, 128, 1, 0, 1);
        }
        fmhai_wg_wait(0);
        fmhai_wg_fence_acc(acc_s, 128);
        fmhai_wg_fence_acc(acc_o, 128);
    }
    float t = 0.f;
    for (int i = 0; i < 128; ++i) t += acc_s[i] + acc_o[i];
    out[blockIdx.x * 256 + threadIdx.x] = t;
#else
    (void)mode; (void)N; (void)out;
#endif
}

#define RATE_KERNEL(name, mode, N) \
    static __global__ void __launch_bounds__(256, 1) name(float *out) { rate_body(mode, N, out); }
RATE_KERNEL(rate_s64, 0, 64)
RATE_KERNEL(rate_s80, 0, 80)
RATE_KERNEL(rate_s128, 0, 128)
RATE_KERNEL(rate_pv80, 1, 80)
RATE_KERNEL(rate_pv128, 1, 128)
RATE_KERNEL(rate_spv80, 2, 80)
RATE_KERNEL(rate_s8, 3, 192)
RATE_KERNEL(rate_pv8, 4, 192)
RATE_KERNEL(rate_spv8, 5, 192)
RATE_KERNEL(rate_spv128, 6, 128)

int main(void)
{
    int sms = 0;
    float *out = 0;
    cudaEvent_t e0, e1;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
        printf("SKIP wgmma_rate: no GPU\n");
        return 0;
    }
    if (cudaMalloc(&out, (size_t)sms * 256 * sizeof(float)) != cudaSuccess || cudaEventCreate(&e0) != cudaSuccess ||
        cudaEventCreate(&e1) != cudaSuccess) {
        printf("wgmma_rate: setup failed\n");
        return 1;
    }
    static const struct { const char *name; void (*fn)(float *); double flops; } cases[] = {
        { "S n64 (SS, k 256)", rate_s64, 2.0 * 64 * 64 * 256 },
        { "S n80 (SS, k 256)", rate_s80, 2.0 * 64 * 80 * 256 },
        { "S n128 (SS, k 256)", rate_s128, 2.0 * 64 * 128 * 256 },
        { "PV k80 (RS, n 256)", rate_pv80, 2.0 * 64 * 256 * 80 },
        { "PV k128 (RS, n 256)", rate_pv128, 2.0 * 64 * 256 * 128 },
        { "S n80 + PV k80", rate_spv80, 2.0 * 64 * 80 * 256 * 2 },
        { "e4m3 S n192 (k 128)", rate_s8, 2.0 * 64 * 192 * 128 },
        { "e4m3 PV k192 (n 128)", rate_pv8, 2.0 * 64 * 128 * 192 },
        { "e4m3 S n192 + PV k192", rate_spv8, 2.0 * 64 * 192 * 128 * 2 },
        { "bf16 S n128 + PV k128", rate_spv128, 2.0 * 64 * 128 * 128 * 2 },
    };
    for (int c = 0; c < (int)(sizeof(cases) / sizeof(cases[0])); ++c) {
        float ms = 0.f, best = 1e30f;
        if (cudaFuncSetAttribute(cases[c].fn, cudaFuncAttributeMaxDynamicSharedMemorySize, RATE_SMEM) != cudaSuccess) {
            printf("wgmma_rate: setup failed\n");
            return 1;
        }
        for (int rep = 0; rep < 4; ++rep) {
            cudaEventRecord(e0);
            cases[c].fn<<<sms, 256, RATE_SMEM>>>(out);
            cudaEventRecord(e1);
            if (cudaEventSynchronize(e1) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
                printf("wgmma_rate: %s failed\n", cases[c].name);
                return 1;
            }
            cudaEventElapsedTime(&ms, e0, e1);
            if (rep > 0 && ms < best) best = ms;
        }
        const double flops = cases[c].flops * 2 /* warpgroups */ * sms * RATE_ITERS;
        printf("%-22s %8.3f ms %8.1f TFLOPS\n", cases[c].name, best, flops / (best * 1e-3) / 1e12);
    }
    cudaFree(out);
    return 0;
}
