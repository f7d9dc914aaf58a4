/*
 * The backward's dbias pass: d loss / d bias after dq_dk_dv.
 *
 * dq_dk_dv recomputes every visible score's dS = P (dP - D), the gradient
 * of the biased logit, and hands it to dbias as it goes: a plain store into
 * the caller's dbias when no dim is summed (each (b, h, i, j) belongs to one
 * block), else into the workspace's fp32 sum (kernel/bwd.h's layout:
 * atomics on a summed dim of extent 1, or, deterministic, one slice per
 * entry and head written by plain stores). This pass then touches every
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
    const float *acc = J.acc ? J.acc + bo * J.acc_batch + (int64_t)hy * J.acc_head + row * J.acc_row : 0;
    for (int j = (int)threadIdx.x; j < J.cols; j += FMHAI_DBIAS_BWD_THREADS) {
        const int seen = j < s.s_k && j - i >= c_lo && j - i <= c_hi;
        float v = 0.f;
        if (!acc && seen) continue;   /* dq_dk_dv stored it */
        if (acc && seen) {
            for (int b2 = 0; b2 < J.nsum_b; ++b2)
                for (int h2 = 0; h2 < J.nsum_h; ++h2)
                    v += acc[(int64_t)b2 * J.acc_batch + (int64_t)h2 * J.acc_head + j];
        }
        if (J.dt == FMHA_DTYPE_FP32) ((float *)out)[j] = v;
        else ((unsigned short *)out)[j] = (unsigned short)(fmhai_pack2(v, 0.f, J.dt == FMHA_DTYPE_BF16) & 0xffffu);
    }
}
#endif /* FMHAI_AUX_KERNELS */

#endif /* FMHA_TILE_KERNEL_BWD_DBIAS_H */
