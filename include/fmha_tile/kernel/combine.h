/*
 * Split-KV combine: merges the partial results of a decode's splits.
 *
 * Each split wrote, per query row (row = (b * nhead_q + h) * seqlen_q + i),
 * its O normalised by its own softmax sum (fp32) and its LSE (natural log,
 * -inf when it saw no key) into the workspace (dispatch/splitkv.h has the
 * layout and the rule). One block of four 32-lane groups per row, built
 * for latency (at batch 1 this kernel sits on the critical path of every
 * decode step): group w takes the splits w, w + 4, ...; every load of the
 * row (its LSEs, thread s holding split s's, and the first eight splits of
 * each group's O, 4 columns a lane, two column groups for a head dim above
 * 128) is issued before any result comes back, so up to 32 splits cost one
 * memory round trip. The block reduces the maximum m and the weights
 * w_s = exp(lse_s - m) (0 for -inf; such a split's O may be anything and
 * is never multiplied), each group sums w_s O_s over its splits in order,
 * and the groups' sums are added in group order, divided by the sum of the
 * weights and stored in fp16/bf16, with LSE = m + log(sum w_s) when asked.
 * A row no split saw gets O = 0 and LSE = -inf. Every sum runs in a fixed
 * order, so the result is the same bits for every run. The kernel is
 * generic in the head dim (<= 256) and the split count (<=
 * FMHA_SPLITKV_MAX_SPLITS); one instance serves every decode kernel of a
 * translation unit. On sm_90 it is launched as a programmatic dependent of
 * the split kernel (fmhai_launch_dependent): its blocks start while the
 * splits finish and wait for their partials (fmhai_pdl_wait).
 */
#ifndef FMHA_TILE_KERNEL_COMBINE_H
#define FMHA_TILE_KERNEL_COMBINE_H

#include "../api.h"
#include "../platform/platform.h"
#include "../dispatch/splitkv.h"
#if !defined(FMHA_PLATFORM_HOST_ONLY)
#  include "../tile/warp_mma.h"   /* fmhai_pack2 */
#endif

typedef struct fmhai_combine_params {
    const float *ws_lse, *ws_o;
    void *o;
    float *lse;                   /* NULL: not written */
    int64_t rows;
    int splits, d, nhead_q, seqlen_q, out_bf16;
    int64_t o_row, o_head, o_batch;
    int64_t lse_head, lse_batch;
} fmhai_combine_params;

#define FMHAI_COMBINE_GROUPS 4    /* 32-lane groups per block (one row) */
#define FMHAI_COMBINE_INFLIGHT 8  /* splits of a group's O loaded at once */

/* What the plan reports as its second stage. */
static const fmha_kernel_info fmhai_combine_info = {
    "fmha_splitkv_combine_fp32_w4", FMHA_FAMILY_SPLITKV_COMBINE, FMHA_DTYPE_FP16, 256, 0, 0, 0,
    1, 0, FMHAI_COMBINE_GROUPS, 1, "combine",
#if defined(FMHA_PLATFORM_AMD)
    FMHA_ARCH_GFX9,
#else
    FMHA_ARCH_SM80,
#endif
    0, FMHA_KV_LAYOUT_LINEAR, 0, 256, 0, 0 };

#if defined(FMHAI_AUX_KERNELS)
FMHA_STATIC_ASSERT(FMHA_SPLITKV_MAX_SPLITS <= FMHAI_COMBINE_GROUPS * 32, "one LSE per thread");

/* Split s's O at column c of the row (zeros past the head dim or the splits) */
FMHAI_DEVICE float4 fmhai_combine_load(const fmhai_combine_params *p, int64_t row, int s, int c)
{
    float4 v;
    v.x = v.y = v.z = v.w = 0.f;
    if (s < p->splits && c < p->d) v = *(const float4 *)(p->ws_o + ((int64_t)s * p->rows + row) * p->d + c);
    return v;
}

static __global__ void FMHAI_LAUNCH_BOUNDS(FMHAI_COMBINE_GROUPS * 32, 1)
fmhai_splitkv_combine_kernel(const FMHAI_GRID_CONSTANT fmhai_combine_params p)
{
    __shared__ float sW[FMHAI_COMBINE_GROUPS * 32];                  /* w_s */
    __shared__ float sRed[2][FMHAI_COMBINE_GROUPS];                  /* groups' max, weight sums */
    __shared__ float4 sAcc[FMHAI_COMBINE_GROUPS][2][32];             /* groups' sums, per column group */
    const float NEG_INF = -__int_as_float(0x7f800000);
    const int tid = (int)threadIdx.x, grp = tid / 32, lane = tid % 32;
    const int64_t row = (int64_t)blockIdx.x;
    float4 v[2][FMHAI_COMBINE_INFLIGHT], acc[2];
    float l, m, w, wsum;
    int cg, u, s0;
    fmhai_pdl_wait();   /* launched as a dependent of the split kernel: its partials first */
    /* ---- every load of the row in flight at once -------------------------- */
    l = tid < p.splits ? p.ws_lse[(int64_t)tid * p.rows + row] : NEG_INF;
#pragma unroll
    for (cg = 0; cg < 2; ++cg)
#pragma unroll
        for (u = 0; u < FMHAI_COMBINE_INFLIGHT; ++u)
            v[cg][u] = fmhai_combine_load(&p, row, grp + FMHAI_COMBINE_GROUPS * u, 4 * lane + 128 * cg);
    /* ---- m = max lse, w_s, sum of the weights (fixed order) ----------------- */
    m = l;
    for (u = 16; u > 0; u >>= 1) m = fmaxf(m, fmhai_shfl_xor(m, u));
    if (lane == 0) sRed[0][grp] = m;
    __syncthreads();
    m = sRed[0][0];
    for (u = 1; u < FMHAI_COMBINE_GROUPS; ++u) m = fmaxf(m, sRed[0][u]);
    w = l == NEG_INF ? 0.f : expf(l - m);   /* m = -inf: every weight 0, O = 0 */
    sW[tid] = w;
    wsum = w;
    for (u = 16; u > 0; u >>= 1) wsum += fmhai_shfl_xor(wsum, u);
    if (lane == 0) sRed[1][grp] = wsum;
    __syncthreads();
    /* ---- this group's sum over its splits, in order ------------------------- */
#pragma unroll
    for (cg = 0; cg < 2; ++cg) acc[cg].x = acc[cg].y = acc[cg].z = acc[cg].w = 0.f;
    for (s0 = 0; s0 < p.splits; s0 += FMHAI_COMBINE_GROUPS * FMHAI_COMBINE_INFLIGHT) {
        if (s0 > 0) {   /* more than 32 splits: the next eight of this group */
#pragma unroll
            for (cg = 0; cg < 2; ++cg)
#pragma unroll
                for (u = 0; u < FMHAI_COMBINE_INFLIGHT; ++u)
                    v[cg][u] = fmhai_combine_load(&p, row, s0 + grp + FMHAI_COMBINE_GROUPS * u, 4 * lane + 128 * cg);
        }
#pragma unroll
        for (u = 0; u < FMHAI_COMBINE_INFLIGHT; ++u) {
            const int s = s0 + grp + FMHAI_COMBINE_GROUPS * u;
            const float ws = s < p.splits ? sW[s] : 0.f;
            if (ws == 0.f) continue;   /* a split without keys adds nothing */
#pragma unroll
            for (cg = 0; cg < 2; ++cg) {
                acc[cg].x += ws * v[cg][u].x; acc[cg].y += ws * v[cg][u].y;
                acc[cg].z += ws * v[cg][u].z; acc[cg].w += ws * v[cg][u].w;
            }
        }
    }
#pragma unroll
    for (cg = 0; cg < 2; ++cg) sAcc[grp][cg][lane] = acc[cg];
    __syncthreads();
    /* ---- the groups' sums in group order; O and LSE ------------------------- */
    if (grp < 2) {   /* group cg stores column group cg */
        const int c = 4 * lane + 128 * grp;
        const int i = (int)(row % p.seqlen_q);
        const int64_t bh = row / p.seqlen_q;
        const int h = (int)(bh % p.nhead_q), b = (int)(bh / p.nhead_q);
        float4 o = sAcc[0][grp][lane];
        wsum = sRed[1][0];
        for (u = 1; u < FMHAI_COMBINE_GROUPS; ++u) {
            const float4 a = sAcc[u][grp][lane];
            o.x += a.x; o.y += a.y; o.z += a.z; o.w += a.w;
            wsum += sRed[1][u];
        }
        const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
        if (c < p.d) {
            char *out = (char *)p.o + 2 * ((int64_t)b * p.o_batch + (int64_t)i * p.o_row + (int64_t)h * p.o_head);
            uint2 r;
            r.x = fmhai_pack2(o.x * inv, o.y * inv, p.out_bf16);
            r.y = fmhai_pack2(o.z * inv, o.w * inv, p.out_bf16);
            *(uint2 *)(out + 2 * c) = r;
        }
        if (p.lse && tid == 0)
            p.lse[(int64_t)b * p.lse_batch + (int64_t)h * p.lse_head + i] = wsum > 0.f ? m + logf(wsum) : NEG_INF;
    }
}
#endif

#endif /* FMHA_TILE_KERNEL_COMBINE_H */
