/*
 * tune_fwd: tile tuning driver for the portable forward pipeline.
 *
 * Builds a set of explicit rows (candidate tiles), checks each against a
 * simple fp32 GPU reference on random inputs (causal and not, odd lengths),
 * then times each on the bf16 benchmark shapes (16k tokens, hidden 2048).
 * Used to choose the rows of policy/fwd_tiles.h; prints one line per
 * (tile, shape): max error, TFLOPS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "fmha_tile.h"

#define TUNE_ROWS(X)                                                              \
    X(FWD, BF16, 64,  MASK, NOSOFTCAP, NOALIBI, 128, 64,  4, 2)                    \
    X(FWD, BF16, 64,  MASK, NOSOFTCAP, NOALIBI, 128, 64,  4, 3)                    \
    X(FWD, BF16, 64,  MASK, NOSOFTCAP, NOALIBI, 128, 128, 4, 2)                    \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 128, 64,  4, 2)                    \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 128, 64,  4, 1)                    \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 128, 32,  4, 2)                    \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 128, 32,  4, 3)                    \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 128, 32,  8, 2)                    \
    X(FWD, BF16, 256, MASK, NOSOFTCAP, NOALIBI, 128, 64,  8, 1)                    \
    X(FWD, BF16, 256, MASK, NOSOFTCAP, NOALIBI, 128, 64,  8, 2)                    \
    X(FWD, BF16, 256, MASK, NOSOFTCAP, NOALIBI, 64,  32,  4, 2)
DECL_FMHA_KERNEL_SET(tune_set, TUNE_ROWS)

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)

static __global__ void fill_rand(__nv_bfloat16 *x, size_t n, unsigned seed)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        x[i] = __float2bfloat16(((h & 0xffff) / 65535.f) * 2.f - 1.f);
    }
}

/* fp32 reference: one thread per (b, h, query row); bshd layout, nhead_k = nhead_q */
static __global__ void ref_fwd(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v,
                               float *o, int B, int H, int S, int D, float scale, int causal)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int h = blockIdx.y, b = blockIdx.z;
    if (i >= S) return;
    const __nv_bfloat16 *qr = q + (((size_t)b * S + i) * H + h) * D;
    float m = -INFINITY, l = 0.f, acc[256];
    for (int d = 0; d < D; ++d) acc[d] = 0.f;
    int jmax = causal ? i + 1 : S;
    for (int j = 0; j < jmax; ++j) {
        const __nv_bfloat16 *kr = k + (((size_t)b * S + j) * H + h) * D;
        const __nv_bfloat16 *vr = v + (((size_t)b * S + j) * H + h) * D;
        float s = 0.f;
        for (int d = 0; d < D; ++d) s += __bfloat162float(qr[d]) * __bfloat162float(kr[d]);
        s *= scale;
        float mn = fmaxf(m, s), a = expf(m - mn), p = expf(s - mn);
        l = l * a + p;
        for (int d = 0; d < D; ++d) acc[d] = acc[d] * a + p * __bfloat162float(vr[d]);
        m = mn;
    }
    float *orow = o + (((size_t)b * S + i) * H + h) * D;
    for (int d = 0; d < D; ++d) orow[d] = acc[d] / l;
}

static __global__ void max_err(const __nv_bfloat16 *o, const float *ref, size_t n, float *out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float e = fabsf(__bfloat162float(o[i]) - ref[i]);
        if (!(e <= 1e30f)) e = 1e30f;   /* NaN */
        atomicMax((int *)out, __float_as_int(e));
    }
}

static void set_args(fmha_fwd_args *a, int B, int H, int S, int D, int causal,
                     void *q, void *k, void *v, void *o)
{
    memset(a, 0, sizeof(*a));
    a->dtype = FMHA_DTYPE_BF16;
    a->batch = B; a->nhead_q = H; a->nhead_k = H; a->seqlen_q = S; a->seqlen_k = S;
    a->hdim_q = D; a->hdim_v = D;
    a->q = q; a->k = k; a->v = v; a->o = o;
    a->stride_q = a->stride_k = a->stride_v = a->stride_o = (int64_t)H * D;
    a->nhead_stride_q = a->nhead_stride_k = a->nhead_stride_v = a->nhead_stride_o = D;
    a->batch_stride_q = a->batch_stride_k = a->batch_stride_v = a->batch_stride_o = (int64_t)S * H * D;
    a->scale = 1.f / sqrtf((float)D);
    a->mask_type = causal ? FMHA_MASK_TOP_LEFT : FMHA_MASK_NONE;
    a->window_left = -1; a->window_right = causal ? 0 : -1;
}

int main(int argc, char **argv)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("SKIP tune_fwd: no GPU\n"); return 0; }
    int only_hd = argc > 1 ? atoi(argv[1]) : 0;
    /* one single-kernel set per row so each can be forced */
    const fmhai_entry *ents = tune_set.entries;
    int nents = tune_set.count;
    size_t maxn = (size_t)16384 * 2048 * 3;
    __nv_bfloat16 *buf, *o; float *ref, *err;
    CK(cudaMalloc(&buf, maxn * 3 * sizeof(__nv_bfloat16)));
    CK(cudaMalloc(&o, maxn * sizeof(__nv_bfloat16)));
    CK(cudaMalloc(&ref, (size_t)4 * 1000 * 8 * 256 * sizeof(float)));
    CK(cudaMalloc(&err, sizeof(float)));
    fill_rand<<<1024, 256>>>(buf, maxn * 3, 1234u);
    CK(cudaGetLastError());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    int seqs[] = { 512, 1024, 2048, 4096, 8192, 16384 };
    for (int ei = 0; ei < nents; ++ei) {
        int D = ents[ei].info.hdim;
        if (only_hd && D != only_hd) continue;
        fmha_kernel_set one = { ents[ei].info.name, &ents[ei], 1, &tune_set.probe[ei] };
        /* correctness: B=2, H=3, S=1000 (odd tail), causal and not, d = D and D-24 */
        float worst = 0.f;
        for (int causal = 0; causal < 2; ++causal)
            for (int dd = 0; dd < 2; ++dd) {
                int B = 2, H = 3, S = 1000, d = dd ? D - 24 : D;
                fmha_fwd_args a;
                set_args(&a, B, H, S, d, causal, buf, buf + maxn, buf + 2 * maxn, o);
                a.stride_q = a.stride_k = a.stride_v = a.stride_o = (int64_t)H * d;
                a.nhead_stride_q = a.nhead_stride_k = a.nhead_stride_v = a.nhead_stride_o = d;
                a.batch_stride_q = a.batch_stride_k = a.batch_stride_v = a.batch_stride_o = (int64_t)S * H * d;
                CK(cudaMemset(o, 0xff, (size_t)B * S * H * d * 2));
                fmha_status st = fmha_fwd(&one, &a, 0);
                if (st != FMHA_OK) { printf("%s: %s\n", one.name, fmha_last_error()); break; }
                ref_fwd<<<dim3((S + 127) / 128, H, B), 128>>>(buf, buf + maxn, buf + 2 * maxn, ref, B, H, S, d, a.scale, causal);
                CK(cudaGetLastError());
                CK(cudaMemset(err, 0, 4));
                max_err<<<256, 256>>>(o, ref, (size_t)B * S * H * d, err);
                float he; CK(cudaMemcpy(&he, err, 4, cudaMemcpyDeviceToHost));
                if (he > worst) worst = he;
            }
        for (int causal = 0; causal < 2; ++causal)
            for (int si = 0; si < 6; ++si) {
                int S = seqs[si], B = 16384 / S, H = 2048 / D;
                fmha_fwd_args a;
                size_t n = (size_t)B * S * H * D;
                int nrot = 3;
                float ms_list[40];
                int reps = 0;
                for (int r = 0; r < 33; ++r) {
                    int rot = r % nrot;
                    set_args(&a, B, H, S, D, causal, buf + rot * n, buf + maxn + rot * n,
                             buf + 2 * maxn + rot * n, o);
                    CK(cudaEventRecord(e0));
                    fmha_status st = fmha_fwd(&one, &a, 0);
                    CK(cudaEventRecord(e1));
                    if (st != FMHA_OK) { printf("%s: %s\n", one.name, fmha_last_error()); exit(1); }
                    CK(cudaEventSynchronize(e1));
                    if (r >= 3) { float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); ms_list[reps++] = ms; }
                }
                for (int x = 0; x < reps; ++x) for (int y = x + 1; y < reps; ++y)
                    if (ms_list[y] < ms_list[x]) { float t = ms_list[x]; ms_list[x] = ms_list[y]; ms_list[y] = t; }
                double ms = ms_list[reps / 2];
                double fl = 4.0 * B * H * (double)S * S * D * (causal ? 0.5 : 1.0);
                printf("%-70s err %.2e causal %d s %5d  %7.1f TFLOPS\n", one.name, worst, causal, S, fl / ms / 1e9);
            }
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
