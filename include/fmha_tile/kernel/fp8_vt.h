/*
 * e4m3 V as V^T for the forward's v_kmajor (fmha_fp8_v_kmajor).
 *
 * wgmma reads an 8-bit B operand K-major only, so the Hopper e4m3 forward
 * turns each V tile into V^T in shared memory (pipeline/kv_source.h,
 * fmhai_wg_vt8_transpose); at hdim 256 that transpose is the pipeline's
 * slowest stage. Given V^T in global memory instead, in the V^T stage's own
 * key order (tile/vt8_layout.h: fmhai_vt8_kpos), the load warpgroup copies
 * whole V^T tiles by TMA (dispatch/tma.h, fmhai_tma_encode_vt). This kernel
 * writes that layout from V rows once, for callers that keep V as rows:
 * dense [batch][nhead_k][hdim_v][keys], keys = seqlen_k rounded up to 16,
 * the padding zero. A block takes 64 keys x 64 d of one (batch entry, KV
 * head): 16-byte loads of the V rows into shared memory, then each thread
 * gathers 16 bytes of one V^T row (a group of 16 keys in P's order) and
 * stores them at once. A copy at memory speed, not tuned further.
 */
#ifndef FMHA_TILE_KERNEL_FP8_VT_H
#define FMHA_TILE_KERNEL_FP8_VT_H

#include "fwd.h"

#if defined(FMHAI_AUX_KERNELS)
static __global__ void FMHAI_LAUNCH_BOUNDS(256, 1)
fmhai_fp8_vt_kernel(const uint8_t *v, uint8_t *vt, int s_k, int keys, int d, int nhead_k, int64_t v_row,
                    int64_t v_head, int64_t v_batch)
{
    __shared__ uint32_t t[64][17];   /* [key][d word], one word of padding a row */
    const int tid = (int)threadIdx.x, k0 = (int)blockIdx.x * 64, d0 = (int)blockIdx.y * 64;
    const int bh = (int)blockIdx.z, b = bh / nhead_k, hk = bh % nhead_k;
    {
        const int key = k0 + tid / 4, c = tid % 4;   /* 16 bytes of d a thread */
        uint4 x;
        x.x = x.y = x.z = x.w = 0u;
        if (key < s_k && d0 + 16 * c < d)
            x = *(const uint4 *)(v + (int64_t)b * v_batch + (int64_t)key * v_row + (int64_t)hk * v_head + d0 +
                                 16 * c);
        t[tid / 4][4 * c + 0] = x.x;
        t[tid / 4][4 * c + 1] = x.y;
        t[tid / 4][4 * c + 2] = x.z;
        t[tid / 4][4 * c + 3] = x.w;
    }
    __syncthreads();
    const int dd = tid / 4, p0 = 16 * (tid % 4);   /* V^T row d0 + dd, positions p0 .. p0 + 15 */
    if (d0 + dd >= d || k0 + p0 >= keys) return;
    uint32_t w[4] = { 0u, 0u, 0u, 0u };
#pragma unroll
    for (int q = 0; q < 16; ++q) {
        /* position q of a group holds key 2 (q / 4) + {0, 1, 8, 9}[q % 4] */
        const int key = p0 + 2 * (q / 4) + (q & 1) + 8 * ((q >> 1) & 1);
        const uint32_t byte = (t[key][dd / 4] >> (8 * (dd % 4))) & 0xffu;
        w[q / 4] |= byte << (8 * (q % 4));
    }
    uint4 o;
    o.x = w[0]; o.y = w[1]; o.z = w[2]; o.w = w[3];
    *(uint4 *)(vt + ((int64_t)bh * d + d0 + dd) * keys + k0 + p0) = o;
}
#endif /* FMHAI_AUX_KERNELS */

FMHA_API fmha_status fmha_fp8_v_kmajor(const fmha_fwd_args *a, void *vt, void *stream)
{
    /* only V's fields are read: batch, nhead_k, seqlen_k, hdim_v, v and its strides */
    if (!a) return fmhai_fail(FMHA_ERR_INVALID_ARG, "fp8_v_kmajor: args is NULL");
    if (a->dtype != FMHA_DTYPE_FP8 || a->is_group_mode || a->v_kmajor)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fp8_v_kmajor: needs dtype fp8, batch mode and V as rows "
                                                "(v_kmajor 0)");
    if (a->batch < 0 || a->nhead_k < 1 || a->seqlen_k < 0 || a->hdim_v < 16 || a->hdim_v > 256 || a->hdim_v % 16)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fp8_v_kmajor: batch %d, nhead_k %d, seqlen_k %d, hdim_v %d "
                                                "(hdim_v a multiple of 16 up to 256)",
                          a->batch, a->nhead_k, a->seqlen_k, a->hdim_v);
    if (!a->v || ((uintptr_t)a->v & 15u) || !vt || ((uintptr_t)vt & 15u))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fp8_v_kmajor: v and vt must be 16-byte aligned device pointers");
    if (a->stride_v % 16 || a->nhead_stride_v % 16 || a->batch_stride_v % 16 || a->stride_v < 0 ||
        a->nhead_stride_v < 0 || a->batch_stride_v < 0)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fp8_v_kmajor: V strides must be non-negative multiples of 16");
    if ((int64_t)a->batch * a->nhead_k > 65535)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fp8_v_kmajor: at most 65535 (batch entry, KV head) pairs");
    if (a->batch == 0 || a->seqlen_k == 0) return FMHA_OK;
#if !defined(FMHAI_AUX_KERNELS)
    (void)stream;
    return fmhai_fail(FMHA_ERR_LAUNCH, "built without the helper kernels (no device compiler, or FMHA_TILE_SETS_ONLY)");
#else
    {
        int keys = fmha_fp8_v_kmajor_keys(a->seqlen_k);
        const uint8_t *v = (const uint8_t *)a->v;
        uint8_t *out = (uint8_t *)vt;
        int s_k = a->seqlen_k, d = a->hdim_v, nhk = a->nhead_k;
        int64_t vr = a->stride_v, vh = a->nhead_stride_v, vb = a->batch_stride_v;
        void *kargs[9] = { (void *)&v, (void *)&out, (void *)&s_k, (void *)&keys, (void *)&d, (void *)&nhk,
                           (void *)&vr, (void *)&vh, (void *)&vb };
        hipError_t err = hipLaunchKernel((const void *)fmhai_fp8_vt_kernel,
                                         dim3((unsigned)((keys + 63) / 64), (unsigned)((d + 63) / 64),
                                              (unsigned)(a->batch * a->nhead_k)),
                                         dim3(256), kargs, 0, (hipStream_t)stream);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_LAUNCH, "fp8_v_kmajor: launch failed: %s", hipGetErrorString(err));
        return FMHA_OK;
    }
#endif
}

#endif /* FMHA_TILE_KERNEL_FP8_VT_H */
