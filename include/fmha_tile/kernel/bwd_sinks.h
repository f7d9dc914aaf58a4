/*
 * Attention sinks in the backward pass: d loss / d sink_h.
 *
 * A sink is one more key of every row of head h, with logit sink_h and no
 * value. Its probability is P_sink = exp(sink_h - lse) (the forward's LSE
 * includes the sink, so the other keys' P = exp(s - lse) and with them dQ,
 * dK and dV need nothing more), its dP is 0 (no value), so its dS is
 * P_sink (0 - D) with D = rowsum(dO * O), and
 *     dsink_h = -sum over the head's rows (every batch entry) of P_sink * D.
 * One block per query head sums its rows in a fixed order (a thread's rows
 * in turn, then a fixed tree over the block), so the result is the same bits
 * on every run. D comes from the workspace where dot_do_o wrote it (8 bytes
 * a row read), or, in a plan without that stage (dq_direct: every key
 * sequence fits one key tile), from O and dO themselves. Rows with LSE -inf
 * (not written by a forward with a sink) add nothing.
 */
#ifndef FMHA_TILE_KERNEL_BWD_SINKS_H
#define FMHA_TILE_KERNEL_BWD_SINKS_H

#include "../api.h"
#include "../platform/platform.h"
#include "bwd_params.h"

#define FMHAI_SINKS_BWD_THREADS 256

#if defined(FMHAI_AUX_KERNELS)
#include "../pipeline/bwd_portable.h"   /* fmhai_bwd_seq_of, fmhai_dot8 */

static __global__ void FMHAI_LAUNCH_BOUNDS(FMHAI_SINKS_BWD_THREADS, 1)
fmhai_bwd_sinks_kernel(const FMHAI_GRID_CONSTANT fmhai_bwd_params p, const float *sinks, float *dsinks,
                       int is_bf16)
{
    __shared__ float sRed[FMHAI_SINKS_BWD_THREADS];
    const int tid = (int)threadIdx.x, h = (int)blockIdx.x;
    const float sink = sinks[h];
    float acc = 0.f;
    for (int b = 0; b < p.batch; ++b) {
        fmhai_bwd_seq s;
        fmhai_bwd_seq_of(&p, b, &s);
        if (s.nsplits <= 0) continue;
        const float *lse = p.lse + (int64_t)s.b_eff * p.lse_batch + (int64_t)h * p.lse_head + s.q_start;
        for (int i = tid; i < s.s_q; i += FMHAI_SINKS_BWD_THREADS) {
            const float l = lse[i];
            if (!(l > -INFINITY)) continue;
            float dsum = 0.f;
            if (p.dsum) {
                dsum = p.dsum[s.dsum_off + (int64_t)h * s.dsum_head + i];
            } else {
                const int64_t oo = fmhai_bwd_row_off(&s, p.o_row, p.o_head, p.o_batch, h, i);
                const int64_t od = fmhai_bwd_row_off(&s, p.do_row, p.do_head, p.do_batch, h, i);
                for (int c = 0; c * 8 < p.d; ++c)
                    dsum += fmhai_dot8(*(const uint4 *)((const char *)p.dout + 2 * (od + c * 8)),
                                       *(const uint4 *)((const char *)p.o + 2 * (oo + c * 8)), is_bf16);
            }
            acc -= expf(sink - l) * dsum;
        }
    }
    sRed[tid] = acc;
    __syncthreads();
    for (int w = FMHAI_SINKS_BWD_THREADS / 2; w > 0; w /= 2) {
        if (tid < w) sRed[tid] += sRed[tid + w];
        __syncthreads();
    }
    if (tid == 0) dsinks[h] = sRed[0];
}
#endif

#endif /* FMHA_TILE_KERNEL_BWD_SINKS_H */
