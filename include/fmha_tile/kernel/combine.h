/*
 * Split-KV combine: merges the partial results of a decode's splits.
 *
 * Each split wrote, per query row (row = (b * nhead_q + h) * seqlen_q + i),
 * its O normalised by its own softmax sum (fp32) and its LSE (natural log,
 * -inf when it saw no key) into the workspace (dispatch/splitkv.h has the
 * layout and the rule). One 32-lane group per row: the lanes read the
 * row's LSEs (split s at lane s % 32), reduce the maximum m, turn them into
 * weights w_s = exp(lse_s - m) (0 for -inf) that go through shared memory,
 * then each lane sums w_s O_s over its columns (4 at a time) in split
 * order, divides by the sum of the weights and stores O in fp16/bf16 and,
 * when asked, LSE = m + log(sum w_s). A row no split saw gets O = 0 and
 * LSE = -inf. Every sum runs in a fixed order, so the result is the same
 * bits for every run. The kernel is generic in the head dim and the split
 * count (<= FMHA_SPLITKV_MAX_SPLITS); one instance serves every decode
 * kernel of a translation unit.
 */
#ifndef FMHA_TILE_KERNEL_COMBINE_H
#define FMHA_TILE_KERNEL_COMBINE_H

#include "../api.h"
#include "../platform/platform.h"
#include "../dispatch/splitkv.h"
#if !defined(FMHA_PLATFORM_HOST_ONLY)
#  include "../tile/warp_mma.h"   /* fmhai_pack2, fmhai_sync_warp */
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

#define FMHAI_COMBINE_ROWS 4      /* rows (32-lane groups) per block */

/* What the plan reports as its second stage. */
static const fmha_kernel_info fmhai_combine_info = {
    "fmha_splitkv_combine_fp32_w4", FMHA_FAMILY_SPLITKV_COMBINE, FMHA_DTYPE_FP16, 256, 0, 0, 0,
    FMHAI_COMBINE_ROWS, 0, FMHAI_COMBINE_ROWS, 1, "combine",
#if defined(FMHA_PLATFORM_AMD)
    FMHA_ARCH_GFX9,
#else
    FMHA_ARCH_SM80,
#endif
    0, FMHA_KV_LAYOUT_LINEAR };

#if !defined(FMHA_PLATFORM_HOST_ONLY)
static __global__ void FMHAI_LAUNCH_BOUNDS(FMHAI_COMBINE_ROWS * 32, 1)
fmhai_splitkv_combine_kernel(const FMHAI_GRID_CONSTANT fmhai_combine_params p)
{
    __shared__ float sW[FMHAI_COMBINE_ROWS][FMHA_SPLITKV_MAX_SPLITS];
    const float NEG_INF = -__int_as_float(0x7f800000);
    const int grp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * FMHAI_COMBINE_ROWS + grp;
    if (row >= p.rows) return;   /* whole groups leave together */
    float l[FMHA_SPLITKV_MAX_SPLITS / 32], m = NEG_INF, wsum = 0.f;
#pragma unroll
    for (int k = 0; k < FMHA_SPLITKV_MAX_SPLITS / 32; ++k) {
        const int s = lane + 32 * k;
        l[k] = s < p.splits ? p.ws_lse[(int64_t)s * p.rows + row] : NEG_INF;
        m = fmaxf(m, l[k]);
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, fmhai_shfl_xor(m, o));
#pragma unroll
    for (int k = 0; k < FMHA_SPLITKV_MAX_SPLITS / 32; ++k) {
        const float w = l[k] == NEG_INF ? 0.f : expf(l[k] - m);
        sW[grp][lane + 32 * k] = w;
        wsum += w;
    }
    for (int o = 16; o > 0; o >>= 1) wsum += fmhai_shfl_xor(wsum, o);
    fmhai_sync_warp();
    const int i = (int)(row % p.seqlen_q);
    const int64_t bh = row / p.seqlen_q;
    const int h = (int)(bh % p.nhead_q), b = (int)(bh / p.nhead_q);
    char *out = (char *)p.o + 2 * ((int64_t)b * p.o_batch + (int64_t)i * p.o_row + (int64_t)h * p.o_head);
    const float inv = wsum > 0.f ? 1.f / wsum : 0.f;   /* m = -inf: every weight 0, O = 0 */
    for (int c = 4 * lane; c < p.d; c += 128) {
        float4 acc;
        acc.x = acc.y = acc.z = acc.w = 0.f;
        /* eight splits' loads in flight, then their sums in split order (a
         * loop of dependent load-add steps waited a memory latency per split) */
        for (int s0 = 0; s0 < p.splits; s0 += 8) {
            float4 v[8];
            float w[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int s = s0 + u;
                w[u] = s < p.splits ? sW[grp][s] : 0.f;
                v[u].x = v[u].y = v[u].z = v[u].w = 0.f;
                /* a split without keys adds nothing (its O may be anything) */
                if (w[u] != 0.f) v[u] = *(const float4 *)(p.ws_o + ((int64_t)s * p.rows + row) * p.d + c);
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                acc.x += w[u] * v[u].x; acc.y += w[u] * v[u].y;
                acc.z += w[u] * v[u].z; acc.w += w[u] * v[u].w;
            }
        }
        uint2 r;
        r.x = fmhai_pack2(acc.x * inv, acc.y * inv, p.out_bf16);
        r.y = fmhai_pack2(acc.z * inv, acc.w * inv, p.out_bf16);
        *(uint2 *)(out + 2 * c) = r;
    }
    if (p.lse && lane == 0)
        p.lse[(int64_t)b * p.lse_batch + (int64_t)h * p.lse_head + i] = wsum > 0.f ? m + logf(wsum) : NEG_INF;
}
#endif

#endif /* FMHA_TILE_KERNEL_COMBINE_H */
