/*
 * Attention sinks in the backward pass: d loss / d sink_h.
 *
 * A sink is one more key of every row of head h, with logit sink_h and no
 * value. Its probability is P_sink = exp(sink_h - lse) (the forward's LSE
 * includes the sink, so the other keys' P = exp(s - lse) and with them dQ,
 * dK and dV need nothing more), its dP is 0 (no value), so its dS is
 * P_sink (0 - D) with D = rowsum(dO * O), and
 *     dsink_h = -sum over the head's rows (every batch entry) of P_sink * D.
 * One block of 1024 threads per query head sums its rows in a fixed order
 * (a thread's rows in turn, four in flight, then a fixed tree over the
 * block), so the result is the same bits on every run. D comes from the workspace where dot_do_o wrote it (8 bytes
 * a row read), or, in a plan without that stage (dq_direct: every key
 * sequence fits one key tile), from O and dO themselves. Rows with LSE -inf
 * (not written by a forward with a sink) add nothing.
 */
#ifndef FMHA_TILE_KERNEL_BWD_SINKS_H
#define FMHA_TILE_KERNEL_BWD_SINKS_H

#include "../api.h"
#include "../platform/platform.h"
#include "bwd_params.h"

#define FMHAI_SINKS_BWD_THREADS 1024
#define FMHAI_SINKS_BWD_UNROLL 4   /* rows a thread has in flight */

#if defined(FMHAI_AUX_KERNELS)
#include "../pipeline/bwd_portable.h"   /* fmhai_bwd_seq_of, fmhai_dot8 */

/* D of row i of head h: from the workspace, or from O and dO */
FMHAI_DEVICE float fmhai_bwd_sinks_d(const fmhai_bwd_params *p, const fmhai_bwd_seq *s, int h, int i, int is_bf16)
{
    if (p->dsum) return p->dsum[s->dsum_off + (int64_t)h * s->dsum_head + i];
    const int64_t oo = fmhai_bwd_row_off(s, p->o_row, p->o_head, p->o_batch, h, i);
    const int64_t od = fmhai_bwd_row_off(s, p->do_row, p->do_head, p->do_batch, h, i);
    float d = 0.f;
    for (int c = 0; c * 8 < p->hdv; ++c)
        d += fmhai_dot8(*(const uint4 *)((const char *)p->dout + 2 * (od + c * 8)),
                        *(const uint4 *)((const char *)p->o + 2 * (oo + c * 8)), is_bf16);
    return d;
}

static __global__ void FMHAI_LAUNCH_BOUNDS(FMHAI_SINKS_BWD_THREADS, 1)
fmhai_bwd_sinks_kernel(const FMHAI_GRID_CONSTANT fmhai_bwd_params p, const float *sinks, float *dsinks,
                       int is_bf16)
{
    const int T = FMHAI_SINKS_BWD_THREADS, U = FMHAI_SINKS_BWD_UNROLL;
    __shared__ float sRed[FMHAI_SINKS_BWD_THREADS];
    const int tid = (int)threadIdx.x, h = (int)blockIdx.x;
    const float sink = sinks[h];
    float acc = 0.f;
    for (int b = 0; b < p.batch; ++b) {
        fmhai_bwd_seq s;
        fmhai_bwd_seq_of(&p, b, &s);
        if (s.nsplits <= 0) continue;
        const float *lse = p.lse + (int64_t)s.b_eff * p.lse_batch + (int64_t)h * p.lse_head + s.q_start;
        /* U rows a thread at a time, all loads issued before any is used */
        for (int i0 = tid; i0 < s.s_q; i0 += U * T) {
            float l[FMHAI_SINKS_BWD_UNROLL], d[FMHAI_SINKS_BWD_UNROLL];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = i0 + u * T;
                l[u] = i < s.s_q ? lse[i] : -INFINITY;
                d[u] = i < s.s_q ? fmhai_bwd_sinks_d(&p, &s, h, i, is_bf16) : 0.f;
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (l[u] > -INFINITY) acc -= expf(sink - l[u]) * d[u];
        }
    }
    sRed[tid] = acc;
    __syncthreads();
    for (int w = T / 2; w > 0; w /= 2) {   /* a fixed tree: the same bits every run */
        if (tid < w) sRed[tid] += sRed[tid + w];
        __syncthreads();
    }
    if (tid == 0) dsinks[h] = sRed[0];
}
#endif

#endif /* FMHA_TILE_KERNEL_BWD_SINKS_H */
