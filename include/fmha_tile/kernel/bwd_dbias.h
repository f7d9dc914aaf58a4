/*
 * The backward's dbias pass: d loss / d bias after dq_dk_dv.
 *
 * dq_dk_dv recomputes every visible score's dS = P (dP - D), the gradient
 * of the biased logit, and hands it to dbias as it goes: a plain store into
 * the caller's dbias when no dim is summed (each (b, h, i, j) belongs to one
 * block), else into the workspace's sum (kernel/bwd.h's layout: fp32
 * atomics on a summed dim of extent 1, or, deterministic, one slice per
 * entry and head written by plain stores, 16-bit when the bias has the
 * inputs' dtype, else fp32). This pass then touches every
 * element of the caller's dbias once: with the sum, the element is its
 * terms added in a fixed order (entry, then head; one term per slice, so
 * the same bits every run in deterministic mode) and converted to the bias
 * dtype; without it, only the elements dq_dk_dv never stores (masked keys
 * of a query tile it skips, group-mode keys past the entry's length) are
 * set to 0, the gradient of a logit that no softmax saw.
 *
 * One block of FMHAI_DBIAS_BWD_THREADS threads per (row, head, entry) of the
 * output (fmhai_bwd_dbias_job: grid and strides), its threads over columns.
 */
#ifndef FMHA_TILE_KERNEL_BWD_DBIAS_H
#define FMHA_TILE_KERNEL_BWD_DBIAS_H

#include "../api.h"
#include "../platform/platform.h"
#include "bwd_params.h"
#include "bwd.h"

#define FMHAI_DBIAS_BWD_THREADS 256

#if defined(FMHAI_AUX_KERNELS)
#include "../pipeline/bwd_portable.h"   /* fmhai_bwd_seq_of, fmhai_bwd_window */

static __global__ void FMHAI_LAUNCH_BOUNDS(FMHAI_DBIAS_BWD_THREADS, 1)
fmhai_bwd_dbias_kernel(const FMHAI_GRID_CONSTANT fmhai_bwd_params p, const FMHAI_GRID_CONSTANT fmhai_bwd_dbias_job J)
{
    const int BIG = 1 << 30;
    const int i = (int)blockIdx.x, hy = (int)blockIdx.y, bz = (int)blockIdx.z;
    const int group = p.seqstart_q != 0;
    fmhai_bwd_seq s;
    int c_lo, c_hi;
    fmhai_bwd_seq_of(&p, bz, &s);
    if (i >= s.s_q) return;
    fmhai_bwd_window(&p, &s, 1, BIG, &c_lo, &c_hi);
    /* output row (group mode: the packed row, no batch dim) */
    const int64_t row = s.q_start + i, bo = group ? 0 : bz;
    char *out = (char *)J.out + (bo * J.batch + (int64_t)hy * J.head + row * J.row) * (J.dt == FMHA_DTYPE_FP32 ? 4 : 2);
    const int64_t ao = bo * J.acc_batch + (int64_t)hy * J.acc_head + row * J.acc_row;
    const char *acc = J.acc ? (const char *)J.acc + ao * (J.acc16 ? 2 : 4) : 0;
    const int bf = J.dt == FMHA_DTYPE_BF16;   /* 16-bit terms are of the bias dtype */
    /* 8 columns a thread: two 16-byte loads a term and one 16-byte (16-bit
     * dbias) or two (fp32) stores where the job allows vectors and the
     * chunk is whole (the pass is bound by how many bytes are in flight:
     * one 4-byte load a thread ran at a third of the bandwidth) */
    for (int j0 = (int)threadIdx.x * 8; j0 < J.cols; j0 += FMHAI_DBIAS_BWD_THREADS * 8) {
        const int whole = j0 + 8 <= J.cols;
        float v[8];
        int seen = 0;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int j = j0 + e;
            seen |= (j < s.s_k && j - i >= c_lo && j - i <= c_hi) << e;
            v[e] = 0.f;
        }
        if (!acc && seen == 0xff) continue;   /* dq_dk_dv stored them */
        if (acc && seen) {
            for (int b2 = 0; b2 < J.nsum_b; ++b2)
                for (int h2 = 0; h2 < J.nsum_h; ++h2) {
                    const int64_t o = (int64_t)b2 * J.acc_batch + (int64_t)h2 * J.acc_head + j0;
                    if (J.acc16) {   /* 16-bit terms: one 16-byte load */
                        const unsigned short *a = (const unsigned short *)acc + o;
                        if (J.vec && whole) {
                            const uint4 x = *(const uint4 *)a;
                            v[0] += fmhai_lo16_f32(x.x, bf); v[1] += fmhai_hi16_f32(x.x, bf);
                            v[2] += fmhai_lo16_f32(x.y, bf); v[3] += fmhai_hi16_f32(x.y, bf);
                            v[4] += fmhai_lo16_f32(x.z, bf); v[5] += fmhai_hi16_f32(x.z, bf);
                            v[6] += fmhai_lo16_f32(x.w, bf); v[7] += fmhai_hi16_f32(x.w, bf);
                        } else {
#pragma unroll
                            for (int e = 0; e < 8; ++e)
                                if (j0 + e < J.cols) v[e] += fmhai_lo16_f32(a[e], bf);
                        }
                        continue;
                    }
                    const float *a = (const float *)acc + o;
                    if (J.vec && whole) {
                        const float4 x = *(const float4 *)a, y = *(const float4 *)(a + 4);
                        v[0] += x.x; v[1] += x.y; v[2] += x.z; v[3] += x.w;
                        v[4] += y.x; v[5] += y.y; v[6] += y.z; v[7] += y.w;
                    } else {
#pragma unroll
                        for (int e = 0; e < 8; ++e)
                            if (j0 + e < J.cols) v[e] += a[e];
                    }
                }
#pragma unroll
            for (int e = 0; e < 8; ++e)
                if (!((seen >> e) & 1)) v[e] = 0.f;   /* a term never added there: 0 */
        }
        if (J.ovec && whole && (acc || !seen)) {
            if (J.dt == FMHA_DTYPE_FP32) {
                float4 q0, q1;
                q0.x = v[0]; q0.y = v[1]; q0.z = v[2]; q0.w = v[3];
                q1.x = v[4]; q1.y = v[5]; q1.z = v[6]; q1.w = v[7];
                ((float4 *)out)[j0 / 4] = q0;
                ((float4 *)out)[j0 / 4 + 1] = q1;
            } else {
                uint4 w;
                w.x = fmhai_pack2(v[0], v[1], bf); w.y = fmhai_pack2(v[2], v[3], bf);
                w.z = fmhai_pack2(v[4], v[5], bf); w.w = fmhai_pack2(v[6], v[7], bf);
                ((uint4 *)out)[j0 / 8] = w;
            }
            continue;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int j = j0 + e;
            if (j >= J.cols || (!acc && ((seen >> e) & 1))) continue;
            if (J.dt == FMHA_DTYPE_FP32) ((float *)out)[j] = v[e];
            else ((unsigned short *)out)[j] = (unsigned short)(fmhai_pack2(v[e], 0.f, bf) & 0xffffu);
        }
    }
}
#endif /* FMHAI_AUX_KERNELS */

#endif /* FMHA_TILE_KERNEL_BWD_DBIAS_H */
