/*
 * The backward workspace's tables, built on the device: what
 * fmha_bwd_prepare_workspace_device launches.
 *
 * In group mode the per-entry dq_acc slices and the prefix of their dq_acc
 * elements depend on the sequence lengths, which live on the device. One
 * block reads the seqstarts, applies the host packing's rule to each entry
 * (fmhai_bwd_entry_splits, kernel/bwd.h) and writes nsplits[b] and
 * offsets[0..batch] with a block-wide prefix sum, a chunk of entries at a
 * time with the running total carried between chunks. Integer sums: the
 * tables equal the host packing's bit for bit. Nothing is read on the host,
 * so the call can be captured in a CUDA/HIP graph and each replay packs the
 * seqstarts it finds. In batch mode it writes nsplits[0] (no seqstarts).
 */
#ifndef FMHA_TILE_KERNEL_BWD_TABLES_H
#define FMHA_TILE_KERNEL_BWD_TABLES_H

#include "../api.h"
#include "../platform/platform.h"
#include "bwd.h"

#define FMHAI_BWD_TABLES_THREADS 256

typedef struct fmhai_bwd_tables_params {
    const int32_t *sq, *sk;      /* seqstarts (group mode), batch + 1 each    */
    int32_t *nsplits;            /* workspace: [batch] (group) or [1]         */
    int64_t *offsets;            /* workspace: [batch + 1] (group mode)       */
    int64_t total_q;             /* the plan's bound on the query rows        */
    int batch, nhead_q, d, tile_n, ns_plan, deterministic, is_group_mode;
} fmhai_bwd_tables_params;

#if defined(FMHAI_AUX_KERNELS)
static __global__ void FMHAI_LAUNCH_BOUNDS(FMHAI_BWD_TABLES_THREADS, 1)
fmhai_bwd_tables_kernel(const fmhai_bwd_tables_params t)
{
    const int T = FMHAI_BWD_TABLES_THREADS, tid = (int)threadIdx.x;
    __shared__ int64_t scan[FMHAI_BWD_TABLES_THREADS];
    int64_t carry = 0;
    if (!t.is_group_mode) {
        if (tid == 0) t.nsplits[0] = t.ns_plan;
        return;
    }
    for (int b0 = 0; b0 < t.batch; b0 += T) {
        const int b = b0 + tid;
        int64_t elems = 0;
        int ns = 0;
        if (b < t.batch)
            ns = fmhai_bwd_entry_splits(t.sq[b], t.sq[b + 1], t.sk[b], t.sk[b + 1], t.total_q, t.nhead_q, t.d,
                                        t.tile_n, t.ns_plan, t.deterministic, &elems);
        scan[tid] = elems;
        __syncthreads();
        for (int w = 1; w < T; w *= 2) {   /* inclusive scan (Hillis-Steele) */
            const int64_t x = tid >= w ? scan[tid - w] : 0;
            __syncthreads();
            scan[tid] += x;
            __syncthreads();
        }
        if (b < t.batch) {
            t.nsplits[b] = ns;
            t.offsets[b] = carry + scan[tid] - elems;
        }
        carry += scan[T - 1];
        __syncthreads();   /* every thread has read scan[T - 1] before the next chunk */
    }
    if (tid == 0) t.offsets[t.batch] = carry;
}
#endif

#endif /* FMHA_TILE_KERNEL_BWD_TABLES_H */
