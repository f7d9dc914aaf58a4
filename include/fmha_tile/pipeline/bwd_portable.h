/*
 * Portable backward pipeline (FlashAttention-2 style): the three kernels of
 * the backward pass, written with the warp tile primitives of the forward.
 *
 * dot_do_o. D_i = sum_c dO[i][c] * O[i][c] in fp32 for every query row, into
 * the workspace, and the row's dq_acc slices zeroed (every slice of the row:
 * a split whose key tiles never reach a row still sums as 0).
 *
 * dq_dk_dv. A block owns BN = 16 * warps keys of one KV head; warp w owns keys
 * 16w .. 16w+15. It loads its K and V tile once and sweeps the query tiles
 * (BM rows) that can see it, for every query head of the KV head's group, so
 * dK and dV of a GQA group are summed in registers. Per query tile
 * (key-major: a warp's 16 keys are the M dimension; the first six lines run
 * per 32-column slice of the query tile, so that one slice's fp32 S^T and
 * dP^T are live at a time next to the dK and dV accumulators):
 *     S^T = K Q^T                     A = K from shared, B = Q (ldmatrix)
 *     P^T = exp2(S^T * scale*log2e - LSE*log2e)   (soft cap: tanh first);
 *                                     masked entries are 0 (never exp of -inf)
 *     dV += P^T dO                    P^T from registers, B = dO (ldmatrix.trans)
 *     dP^T = V dO^T                   A = V from shared, B = dO
 *     dS^T = P^T (dP^T - D)           (soft cap: times 1 - tanh^2)
 *     dK += dS^T Q                    dS^T from registers, B = Q (ldmatrix.trans)
 *     dS^T -> shared; barrier
 *     dQ_tile = dS K                  warps split (rows x columns) anew;
 *                                     A = dS^T (ldmatrix.trans), B = K (.trans)
 *     dQ_tile -> dq_acc               fp32 atomics (non-deterministic), or a
 *                                     plain read-add-write of this split's own
 *                                     slice (deterministic), or, with one key
 *                                     tile per sequence, scaled and written
 *                                     straight to dQ (no workspace)
 * Dropout (p->dropout_thr > 0; uniform branches, so the kernels without it
 * run none of its code): the forward's O = (P o Z) V with Z = keep * scale
 * from the Philox rule of tile/philox.h, drawn here for the transposed
 * scores (fmhai_bwd_dropout_keep: one call per 16 x 16 block, 8 of its
 * bytes for each of two lanes, at the start of each step). dV +=
 * (P o keep)^T dO, times the scale at the store; a dropped P^T entry is
 * marked by its sign (P^T >= 0) for dS^T = P^T (dP^T o Z - D), so no keep
 * bits stay live across the products; D = rowsum(dO o O) already holds Z.
 * The next Q/dO tile is loaded during the whole step (stages 2) or during
 * the dQ product (stages 1). Head dims above 128 sweep twice (dV, then dK
 * and dQ) so that one 16 x hd accumulator is live at a time. dK (times
 * scale) and dV go out from registers at the end of the key tile.
 * Block x walks the key tiles x, x + gridDim.x, ... (every key tile of the
 * entry is covered whatever the grid). Deterministic mode keeps that
 * parallelism: key tile n adds its dQ into slice n % nsplits with a plain
 * read-add-write, after the slice's earlier key tiles that see the same
 * query tile have added theirs (a per-query-tile counter in the workspace:
 * thread 0 waits with an acquire load before the dQ product; each warp reads
 * its block of the slice by cp.async into the step's spent Q/dO buffers
 * during the product; thread 0 publishes the block's adds with a release
 * add after the next barrier). The order of the adds is fixed, so dQ is
 * bitwise reproducible. A tile waits only on smaller tile numbers, which are
 * launched first (or walked first by the same block), so the waits cannot
 * deadlock; slices shorten the chains.
 *
 * convert_dq. dQ = scale * sum over the slices (in slice order) of dq_acc,
 * converted to the dtype.
 *
 * Out-of-range rows and columns are zero-filled by the copies: Q and dO rows
 * past s_q give P = 1 with dO = 0 and D = 0, so they add nothing; keys past
 * s_k are always masked (a zero key would still give exp(-LSE)).
 *
 * Shared memory of dq_dk_dv (16-bit tiles swizzled like the forward's):
 * K [BN][hd], V [BN][hd], Q [stages][BM][hd], dO [stages][BM][hd],
 * dS^T [BN][BM], then LSE and D [2][BM] fp32.
 *
 * Unequal head dims (HDV < HD, rows such as 192_128, fmhai_bwd_dq_dk_dv_hv):
 * V and dO keep HD-wide rows, zero past HDV (the copies zero-fill past
 * hdim_v, as for a problem padded into a kernel of one head dim), so they
 * share the K and Q ldmatrix bases; dP^T = V dO^T, dV += P^T dO, dV's
 * accumulator and its store run over the first HDV columns only.
 */
#ifndef FMHA_TILE_PIPELINE_BWD_PORTABLE_H
#define FMHA_TILE_PIPELINE_BWD_PORTABLE_H

#include "../tile/warp_mma.h"
#include "../policy/bwd_tiles.h"
#include "../kernel/bwd_params.h"
#include "fwd_portable.h"

/* ---- small primitives (fmhai_st_shared_u32: tile/warp_mma.h) --------------- */
FMHAI_DEVICE float2 fmhai_ld_shared_f2(fmhai_smem_t src)
{
    float2 v;
#if defined(FMHA_PLATFORM_NVIDIA)
    asm volatile("ld.shared.v2.f32 {%0,%1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(src));
#else
    v.x = ((const FMHAI_LDS float *)src)[0];
    v.y = ((const FMHAI_LDS float *)src)[1];
#endif
    return v;
}

/* Two fp32 into a line other blocks read (L2, no L1 allocation). */
FMHAI_DEVICE void fmhai_st_cg_f2(float *p, float2 v)
{
#if defined(FMHA_PLATFORM_NVIDIA)
    __stcg((float2 *)p, v);
#else
    *(float2 *)p = v;
#endif
}

/* fp32 add with no return value into device memory (dq_acc, the dbias
 * sum): a reduction on NVIDIA; on CDNA the native global_atomic_add_f32,
 * exact there, where atomicAdd may become a compare-and-swap loop unless
 * the build allows unsafe fp atomics. */
FMHAI_DEVICE void fmhai_atomic_add_f32(float *p, float v)
{
#if defined(FMHA_PLATFORM_AMD) && (defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__))
    __builtin_amdgcn_global_atomic_fadd_f32((__attribute__((address_space(1))) float *)p, v);
#else
    atomicAdd(p, v);
#endif
}

/* fp32 accumulation of two adjacent dq_acc elements. */
FMHAI_DEVICE void fmhai_atomic_add2(float *dst, float x, float y)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const float2 v = { x, y };
    atomicAdd((float2 *)dst, v);
#else
    atomicAdd(dst, x);
    atomicAdd(dst + 1, y);
#endif
}

/* Counter handshake of the deterministic dQ (device scope). fmhai_ld_acquire:
 * a load that later loads cannot pass; fmhai_ld_relaxed: the counter polled
 * without ordering (no L1 invalidation per poll), one fmhai_ld_acquire
 * after it orders what follows; fmhai_add_release: an add that earlier
 * stores cannot pass. */
FMHAI_DEVICE int fmhai_ld_counter(const int32_t *p, int acquire)
{
#if defined(FMHA_PLATFORM_NVIDIA)
    int v = 0;
#  if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    if (acquire) asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    else asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
#  endif
    return v;
#else
    return acquire ? __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT)
                   : __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#endif
}
FMHAI_DEVICE int fmhai_ld_acquire(const int32_t *p) { return fmhai_ld_counter(p, 1); }
FMHAI_DEVICE int fmhai_ld_relaxed(const int32_t *p) { return fmhai_ld_counter(p, 0); }
FMHAI_DEVICE void fmhai_add_release(int32_t *p, int v)
{
#if defined(FMHA_PLATFORM_NVIDIA)
#  if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" :: "l"(p), "r"(v) : "memory");
#  endif
#else
    __hip_atomic_fetch_add(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

/* Two packed 16-bit values -> floats. */
FMHAI_DEVICE float fmhai_lo16_f32(uint32_t x, int is_bf16)
{
    return is_bf16 ? __uint_as_float(x << 16) : __half2float(__ushort_as_half((unsigned short)(x & 0xffffu)));
}
FMHAI_DEVICE float fmhai_hi16_f32(uint32_t x, int is_bf16)
{
    return is_bf16 ? __uint_as_float(x & 0xffff0000u) : __half2float(__ushort_as_half((unsigned short)(x >> 16)));
}

/* sum of the products of 8 packed 16-bit pairs (one 16-byte chunk each) */
FMHAI_DEVICE float fmhai_dot8(uint4 a, uint4 b, int is_bf16)
{
    float s = 0.f;
    s += fmhai_lo16_f32(a.x, is_bf16) * fmhai_lo16_f32(b.x, is_bf16);
    s += fmhai_hi16_f32(a.x, is_bf16) * fmhai_hi16_f32(b.x, is_bf16);
    s += fmhai_lo16_f32(a.y, is_bf16) * fmhai_lo16_f32(b.y, is_bf16);
    s += fmhai_hi16_f32(a.y, is_bf16) * fmhai_hi16_f32(b.y, is_bf16);
    s += fmhai_lo16_f32(a.z, is_bf16) * fmhai_lo16_f32(b.z, is_bf16);
    s += fmhai_hi16_f32(a.z, is_bf16) * fmhai_hi16_f32(b.z, is_bf16);
    s += fmhai_lo16_f32(a.w, is_bf16) * fmhai_lo16_f32(b.w, is_bf16);
    s += fmhai_hi16_f32(a.w, is_bf16) * fmhai_hi16_f32(b.w, is_bf16);
    return s;
}

/* ---- one batch entry ------------------------------------------------------- */
typedef struct fmhai_bwd_seq {
    int s_q, s_k, q_start, k_start, b_eff;
    int nsplits;           /* dq_acc slices of the entry (0: skip the entry) */
    int64_t acc_off;       /* first dq_acc element of the entry              */
    int64_t acc_row;       /* acc_off / d: its first row (and counter)       */
    int64_t dsum_off;      /* D of (entry, head 0, row 0)                    */
    int64_t dsum_head;     /* D's head stride                                */
} fmhai_bwd_seq;

FMHAI_DEVICE void fmhai_bwd_seq_of(const fmhai_bwd_params *p, int b, fmhai_bwd_seq *s)
{
    if (p->seqstart_q) {
        s->q_start = p->seqstart_q[b];
        s->s_q = p->seqstart_q[b + 1] - s->q_start;
        s->k_start = p->seqstart_k[b];
        s->s_k = p->seqstart_k[b + 1] - s->k_start;
        s->b_eff = 0;
        s->nsplits = p->ws_nsplits ? p->ws_nsplits[b] : 1;
        s->acc_off = p->ws_offsets ? p->ws_offsets[b] : 0;
        s->acc_row = s->acc_off / p->d;   /* once per entry, not per step */
        s->dsum_head = p->dsum_rows;
        s->dsum_off = s->q_start;
    } else {
        s->q_start = 0;
        s->k_start = 0;
        s->s_q = p->seqlen_q;
        s->s_k = p->seqlen_k;
        s->b_eff = b;
        s->nsplits = p->nsplits;
        s->acc_row = (int64_t)b * p->nhead_q * p->nsplits * p->seqlen_q;
        s->acc_off = s->acc_row * p->d;
        s->dsum_head = p->seqlen_q;
        s->dsum_off = (int64_t)b * p->nhead_q * p->seqlen_q;
    }
    if (s->s_q < 0 || s->s_k < 0) s->nsplits = 0;
}

/* Row i of query head h: element offsets in Q-like and O-like tensors. */
FMHAI_DEVICE int64_t fmhai_bwd_row_off(const fmhai_bwd_seq *s, int64_t row, int64_t head, int64_t batch,
                                       int h, int i)
{
    return (int64_t)s->b_eff * batch + (int64_t)(s->q_start + i) * row + (int64_t)h * head;
}

/* Query tiles [*lo, *hi) that can see a key of key tile n (key j is visible
 * to query i when c_lo <= j - i <= c_hi; BIG: no bound). */
FMHAI_DEVICE void fmhai_bwd_m_range(const fmhai_bwd_seq *s, int n, int BM, int BN, int masked, int c_lo,
                                    int c_hi, int BIG, int *lo, int *hi)
{
    *lo = 0;
    *hi = (s->s_q + BM - 1) / BM;
    if (masked) {
        const int j0 = n * BN, j_hi = min(s->s_k, j0 + BN) - 1;
        const int i_min = max(0, c_hi == BIG ? 0 : j0 - c_hi);
        const int i_max = min(s->s_q - 1, c_lo == -BIG ? s->s_q - 1 : j_hi - c_lo);
        if (i_max < i_min) { *lo = 0; *hi = 0; }
        else { *lo = i_min / BM; *hi = i_max / BM + 1; }
    }
}

/* D of BM rows (m0 ..) of head h into dst[BM] (rows past s_q: 0), from dO
 * and O in global memory. Groups of LPR lanes share a row; all threads of
 * the block run the same number of steps (the shuffles need whole warps). */
FMHAI_DEVICE void fmhai_bwd_rowdot(const fmhai_bwd_params *p, const fmhai_bwd_seq *s, int h, int m0,
                                   float *dst_smem, float *dst_global, int is_bf16, int HD, int BM,
                                   int NT, int tid)
{
    const int LPR = HD / 8 <= 8 ? 8 : (HD / 8 <= 16 ? 16 : 32);   /* lanes per row */
    const int RPP = NT / LPR;                                        /* rows per pass */
    const int lr = tid % LPR;
    const char *o = (const char *)p->o;
    const char *dout = (const char *)p->dout;
#pragma unroll 1
    for (int r0 = 0; r0 < BM; r0 += RPP) {
        const int r = r0 + tid / LPR, i = m0 + r;
        const int valid = r < BM && i < s->s_q;
        float acc = 0.f;
        if (valid) {
            const int64_t oo = fmhai_bwd_row_off(s, p->o_row, p->o_head, p->o_batch, h, i);
            const int64_t od = fmhai_bwd_row_off(s, p->do_row, p->do_head, p->do_batch, h, i);
#pragma unroll
            for (int c = lr; c < HD / 8; c += LPR)
                if (c * 8 < p->hdv)
                    acc += fmhai_dot8(*(const uint4 *)(dout + 2 * (od + c * 8)),
                                      *(const uint4 *)(o + 2 * (oo + c * 8)), is_bf16);
        }
#pragma unroll
        for (int x = LPR / 2; x >= 1; x /= 2) acc += fmhai_shfl_xor(acc, x);
        if (r < BM && lr == 0) {
            if (dst_smem) dst_smem[r] = acc;
            if (dst_global && valid) dst_global[i] = acc;
        }
    }
}

/* ============================================================================
 * dot_do_o: grid (row blocks, nhead_q, batch); BM rows per block step
 * ========================================================================== */
FMHAI_DEVICE void fmhai_bwd_dot_do_o(const fmhai_bwd_params *p, const int is_bf16, const int HD,
                                     const int BM, const int NW)
{
    const int NT = NW * 32, tid = (int)threadIdx.x;
    const int h = (int)blockIdx.y, b = (int)blockIdx.z;
    fmhai_bwd_seq s;
    fmhai_bwd_seq_of(p, b, &s);
    if (s.nsplits <= 0) return;
    float *dsum = p->dsum + s.dsum_off + (int64_t)h * s.dsum_head;
    const int d4 = p->d / 4;   /* 16-byte chunks of a dq_acc row */
    const float4 zero4 = { 0.f, 0.f, 0.f, 0.f };
    for (int m0 = (int)blockIdx.x * BM; m0 < s.s_q; m0 += (int)gridDim.x * BM) {
        fmhai_bwd_rowdot(p, &s, h, m0, 0, dsum, is_bf16, HD, BM, NT, tid);
        /* zero the rows' slices: [nsplits][rows m0 ..][d] of head h, and
         * (deterministic) the rows' counters */
        const int rows = min(BM, s.s_q - m0);
        for (int sp = 0; sp < s.nsplits; ++sp) {
            const int64_t row0 = ((int64_t)h * s.nsplits + sp) * s.s_q + m0;
            float *acc = p->dq_acc + s.acc_off + row0 * p->d;
            for (int idx = tid; idx < rows * d4; idx += NT)
                *(float4 *)(acc + (int64_t)idx * 4) = zero4;
            if (p->dq_sem)
                for (int r = tid; r < rows; r += NT) p->dq_sem[s.acc_row + row0 + r] = 0;
        }
    }
}

/* ============================================================================
 * convert_dq: grid (row blocks, nhead_q, batch)
 * ========================================================================== */
FMHAI_DEVICE void fmhai_bwd_convert_dq(const fmhai_bwd_params *p, const int is_bf16, const int HD,
                                       const int BM, const int NW)
{
    const int NT = NW * 32, tid = (int)threadIdx.x;
    const int h = (int)blockIdx.y, b = (int)blockIdx.z;
    const int chunks = HD / 8;
    fmhai_bwd_seq s;
    fmhai_bwd_seq_of(p, b, &s);
    if (s.nsplits <= 0) return;
    const int64_t slice = (int64_t)s.s_q * p->d;
    const float *acc0 = p->dq_acc + s.acc_off + (int64_t)h * s.nsplits * slice;
    char *dq = (char *)p->dq;
    for (int m0 = (int)blockIdx.x * BM; m0 < s.s_q; m0 += (int)gridDim.x * BM) {
        for (int idx = tid; idx < BM * chunks; idx += NT) {
            const int r = idx / chunks, c = idx % chunks, i = m0 + r;
            if (i >= s.s_q || c * 8 >= p->d) continue;
            const float *a = acc0 + (int64_t)i * p->d + c * 8;
            float x[8];
            float4 u = *(const float4 *)a, v = *(const float4 *)(a + 4);
            x[0] = u.x; x[1] = u.y; x[2] = u.z; x[3] = u.w;
            x[4] = v.x; x[5] = v.y; x[6] = v.z; x[7] = v.w;
            for (int sp = 1; sp < s.nsplits; ++sp) {   /* fixed order: reproducible */
                u = *(const float4 *)(a + sp * slice);
                v = *(const float4 *)(a + sp * slice + 4);
                x[0] += u.x; x[1] += u.y; x[2] += u.z; x[3] += u.w;
                x[4] += v.x; x[5] += v.y; x[6] += v.z; x[7] += v.w;
            }
            uint4 o;
            o.x = fmhai_pack2(x[0] * p->scale, x[1] * p->scale, is_bf16);
            o.y = fmhai_pack2(x[2] * p->scale, x[3] * p->scale, is_bf16);
            o.z = fmhai_pack2(x[4] * p->scale, x[5] * p->scale, is_bf16);
            o.w = fmhai_pack2(x[6] * p->scale, x[7] * p->scale, is_bf16);
            *(uint4 *)(dq + 2 * (fmhai_bwd_row_off(&s, p->dq_row, p->dq_head, p->dq_batch, h, i) + c * 8)) = o;
        }
    }
}

/* ============================================================================
 * dq_dk_dv: grid (key tiles or splits, nhead_k, batch)
 * ========================================================================== */

/* Sweep position of the step after (*mi, *hq): query tile mi of the tile's
 * range, query head hq of the group (the second sweep of two starts over).
 * Kept as counters: a division per step showed in the profile. */
FMHAI_DEVICE void fmhai_bwd_next_pos(int *mi, int *hq, int n_m, int head_ratio)
{
    if (++*mi == n_m) {
        *mi = 0;
        if (++*hq == head_ratio) *hq = 0;
    }
}

/* LSE and D of sweep step jt (query head h, rows m0..) into slot jt & 1 (D
 * computed here when dQ is direct). */
FMHAI_DEVICE void fmhai_bwd_load_rowstats(const fmhai_bwd_params *p, const fmhai_bwd_seq *s, int jt, int h, int m0,
                                          float *sLse, float *sD, int is_bf16, int HD, int BM, int NT, int tid)
{
    const int slot = (jt & 1) * BM;
    if (tid < BM) {
        const int i = m0 + tid, ok = i < s->s_q;
        const float *lse = p->lse + (int64_t)s->b_eff * p->lse_batch + (int64_t)h * p->lse_head + s->q_start +
                           (ok ? i : 0);
        fmhai_copy_async4(fmhai_smem_addr(sLse + slot + tid), lse, ok);
        if (!p->dq_direct)
            fmhai_copy_async4(fmhai_smem_addr(sD + slot + tid),
                              p->dsum + s->dsum_off + (int64_t)h * s->dsum_head + (ok ? i : 0), ok);
    }
    if (p->dq_direct) fmhai_bwd_rowdot(p, s, h, m0, sD + slot, 0, is_bf16, HD, BM, NT, tid);
}

/* Issues the copies of sweep step jt (query head h, rows m0..): the Q and
 * dO tiles into stage buffer `qbuf`, LSE and D into slot jt & 1. */
FMHAI_DEVICE void fmhai_bwd_load_step(const fmhai_bwd_params *p, const fmhai_bwd_seq *s, int jt, int h, int m0,
                                      fmhai_smem_t sQ, fmhai_smem_t sdO, float *sLse, float *sD, int is_bf16,
                                      int HD, int BM, int NT, int tid)
{
    const int64_t qo = fmhai_bwd_row_off(s, p->q_row, p->q_head, p->q_batch, h, m0);
    const int64_t doo = fmhai_bwd_row_off(s, p->do_row, p->do_head, p->do_batch, h, m0);
    fmhai_block_load_tile(sQ, (const char *)p->q + 2 * qo, 2 * p->q_row, 16, BM, s->s_q - m0, p->d, HD, NT,
                          tid, 0);
    fmhai_block_load_tile(sdO, (const char *)p->dout + 2 * doo, 2 * p->do_row, 16, BM, s->s_q - m0, p->hdv, HD,
                          NT, tid, 0);
    fmhai_bwd_load_rowstats(p, s, jt, h, m0, sLse, sD, is_bf16, HD, BM, NT, tid);
}

/* Key j is visible to query i when *c_lo <= j - i <= *c_hi (BIG: no bound). */
FMHAI_DEVICE void fmhai_bwd_window(const fmhai_bwd_params *p, const fmhai_bwd_seq *s, int HAS_MASK, int BIG,
                                   int *c_lo, int *c_hi)
{
    *c_lo = -BIG;
    *c_hi = BIG;
    if (HAS_MASK && p->mask_kind != FMHA_MASK_NONE) {
        const int off = p->mask_kind == FMHA_MASK_BOTTOM_RIGHT ? s->s_k - s->s_q : 0;
        if (p->window_left >= 0) *c_lo = off - p->window_left;
        if (p->window_right >= 0) *c_hi = off + p->window_right;
    }
}

/* ALiBi slope of query head h of batch entry b in base-2 units (0 off;
 * ALIBI is the row's ALiBi column: 1 ALiBi, 2 the elementwise bias) */
FMHAI_DEVICE float fmhai_bwd_slope2(const fmhai_bwd_params *p, int b, int h, int ALIBI)
{
    return ALIBI == 1 ? p->alibi_slopes[(int64_t)b * p->alibi_batch + h] * 1.4426950408889634f : 0.f;
}

/* Elementwise bias (BIAS rows, ALiBi column 2): the element offset of
 * (entry, head h, query 0, key 0) of the bias, or of dbias with its
 * strides; query i and key j add i * row + j. */
FMHAI_DEVICE int64_t fmhai_bwd_bias_base(const fmhai_bwd_seq *s, int64_t row, int64_t head, int64_t batch, int h)
{
    return (int64_t)s->b_eff * batch + (int64_t)h * head + (int64_t)s->q_start * row;
}

/* The bias of (query i, key j) times log2(e); 0 at or past s_q or s_k
 * (those rows and keys are never read). */
FMHAI_DEVICE float fmhai_bwd_bias_ld(const fmhai_bwd_params *p, int64_t base, int i, int j, int s_q, int s_k)
{
    float x = 0.f;
    if (i < s_q && j < s_k) {
        const int64_t e = base + (int64_t)i * p->bias_row + j;
        if (p->bias_dt == FMHA_DTYPE_FP32) {
            x = ((const float *)p->bias)[e];
        } else {
            const unsigned short u = ((const unsigned short *)p->bias)[e];
            x = p->bias_dt == FMHA_DTYPE_BF16 ? __uint_as_float((uint32_t)u << 16)
                                              : __half2float(__ushort_as_half(u));
        }
    }
    return x * 1.4426950408889634f;
}

/* dS of queries i and i + 1 at key j (dbias = dS, the biased logits'
 * gradient) into p->dbias: a plain store in its dtype, or an fp32 atomic
 * add into the workspace's sum (zero terms skipped); nothing past s_q or
 * s_k. */
FMHAI_DEVICE void fmhai_bwd_dbias_put2(const fmhai_bwd_params *p, int64_t base, int i, int j, int s_q, int s_k,
                                       float d0, float d1)
{
    if (j >= s_k) return;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const float v = e ? d1 : d0;
        const int64_t o = base + (int64_t)(i + e) * p->dbias_row + j;
        if (i + e >= s_q) break;
        if (p->dbias_atomic) {
            if (v != 0.f) fmhai_atomic_add_f32((float *)p->dbias + o, v);
        } else if (p->dbias_dt == FMHA_DTYPE_FP32) {
            ((float *)p->dbias)[o] = v;
        } else {
            ((unsigned short *)p->dbias)[o] =
                (unsigned short)(fmhai_pack2(v, 0.f, p->dbias_dt == FMHA_DTYPE_BF16) & 0xffffu);
        }
    }
}

/* A 16-bit bias element (bits u; bf: bf16, else fp16) times log2(e), as
 * fmhai_bwd_bias_ld gives it. */
FMHAI_DEVICE float fmhai_bwd_bias16(uint32_t u, int bf)
{
    const float x = bf ? __uint_as_float((u & 0xffffu) << 16) : __half2float(__ushort_as_half((unsigned short)u));
    return x * 1.4426950408889634f;
}

/* P^T of one 16 x 8 n-tile of S^T, in place: c[2 * hf + e] is key j + 8 * hf,
 * query i + e. c becomes P^T (soft cap: times 1 - tanh^2, dS's factor) and
 * pk[hf] the 16-bit P^T pair of row hf. Masked entries and keys past s_k are
 * 0 (never exp of -inf). ALiBi (ALIBI 1): the score loses slope2 *
 * |i + shift - j| (slope2 in base-2 units, shift = s_k - s_q: bottom-right
 * aligned), a constant of q and k, so dS needs no other change. The
 * elementwise bias (ALIBI 2): the score gains the bias element at
 * bias_base (fmhai_bwd_bias_base), after the soft cap as in the forward;
 * a -inf element gives P 0 (also where the LSE is -inf: a row all of
 * whose keys the bias hides). Here (_eb) the n-tile's bias elements are
 * given: ebv[2 * hf + e] is (query i + e, key j + 8 * hf) times log2(e), 0
 * past s_q or s_k (the Hopper pipeline reads them from a tile in shared
 * memory); fmhai_bwd_p_ntile loads them (bias_base) and calls it. ALIBI 3:
 * the bias is in c already (folded into the scores; no soft cap), where a
 * -inf score gives P 0. */
FMHAI_DEVICE void fmhai_bwd_p_ntile_eb(float *c, uint32_t *pk, float2 lse, const fmhai_bwd_params *p,
                                       int need_mask, int j, int i, int s_k, int c_lo, int c_hi, int SOFTCAP,
                                       int is_bf16, int ALIBI, float slope2, int shift, const float *ebv)
{
    const float LOG2E = 1.4426950408889634f;
    const float l2[2] = { lse.x * LOG2E, lse.y * LOG2E };
    /* ALiBi: one conversion a call, the four distances as float offsets of
     * it (the |.| folds into the multiply-add) */
    const float d0 = ALIBI == 1 ? (float)(i + shift - j) : 0.f;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        float pv[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float x = c[2 * hf + e];
            float dfac = 1.f;
            const float eb = ALIBI == 2 ? ebv[2 * hf + e] : 0.f;
            const float bias = ALIBI == 1 ? l2[e] + slope2 * fabsf(d0 + (float)(e - 8 * hf))
                                          : ALIBI == 2 ? l2[e] - eb : l2[e];
            if (SOFTCAP) {
                const float th = tanhf(x * p->softcap_pre);
                pv[e] = fmhai_exp2(th * p->softcap_post_log2 - bias);
                dfac = 1.f - th * th;
            } else {
                pv[e] = fmhai_exp2(x * p->scale_log2 - bias);
            }
            if ((ALIBI == 2 && eb == -INFINITY) || (ALIBI == 3 && x == -INFINITY)) pv[e] = 0.f;
            if (need_mask) {
                const int jj = j + 8 * hf, ii = i + e;
                if (jj >= s_k || jj - ii < c_lo || jj - ii > c_hi) pv[e] = 0.f;
            }
            c[2 * hf + e] = pv[e] * dfac;
        }
        pk[hf] = fmhai_pack2(pv[0], pv[1], is_bf16);
    }
}

FMHAI_DEVICE void fmhai_bwd_p_ntile(float *c, uint32_t *pk, float2 lse, const fmhai_bwd_params *p, int need_mask,
                                    int j, int i, int s_k, int c_lo, int c_hi, int SOFTCAP, int is_bf16,
                                    int ALIBI, float slope2, int shift, int64_t bias_base, int s_q)
{
    float ebv[4] = { 0.f, 0.f, 0.f, 0.f };
    if (ALIBI == 2) {
#pragma unroll
        for (int x = 0; x < 4; ++x) ebv[x] = fmhai_bwd_bias_ld(p, bias_base, i + (x & 1), j + 8 * (x >> 1), s_q, s_k);
    }
    fmhai_bwd_p_ntile_eb(c, pk, lse, p, need_mask, j, i, s_k, c_lo, c_hi, SOFTCAP, is_bf16, ALIBI, slope2, shift, ebv);
}

/* Dropout keep bits of this lane's elements of a QW-query slice of S^T
 * (rows keys, columns queries: the transposed forward scores): bit
 * 4 * nt + 2 * hf + e is key j + 8 * hf, query i + 8 * nt + e (j = the
 * lane's key g, i = the slice's query 2t). Elements (query i, key j) of a
 * 16 x 16 block share one Philox call (tile/philox.h): query bits 0 and 3
 * are e and nt & 1, key bits 0 and 3 are g & 1 and hf, so the lane's
 * element is byte 2 * hf + (g & 1) of word 2 * (nt & 1) + e. Lanes g and
 * g ^ 1 (lane ^ 4) need the same blocks, each 8 of the 16 bytes: each
 * computes one of a pair of blocks (the one of its own g & 1), takes its
 * own 8 decisions and hands the partner's 8 over in one shuffle, so a
 * warp makes one call per block (QW / 32 calls a lane). Whole warps only. */
FMHAI_DEVICE uint32_t fmhai_bwd_dropout_keep(const fmhai_bwd_params *p, uint32_t bh, int i, int j, int QW)
{
    uint64_t seed, offset;   /* dropout_rng's when given: read only where dropout runs */
    const uint32_t g1 = (uint32_t)j & 1u, thr = p->dropout_thr;
    const uint32_t T = thr * 0x01010101u, Tlo = (thr & 0x7fu) * 0x01010101u;
    uint32_t keep = 0;
    fmhai_dropout_seed_offset(p->dropout_rng, p->dropout_seed, p->dropout_offset, &seed, &offset);
#pragma unroll 1
    for (int np0 = 0; np0 < QW / 16; np0 += 2) {
        const int np = np0 + (int)g1;   /* the block this lane draws */
        uint32_t w[4];
        fmhai_dropout_block(seed, offset, bh, (uint32_t)(i + 16 * np), (uint32_t)j, w);
        /* the 16 decisions byte-parallel (tile/philox.h): ours and the partner's 8 */
        const uint32_t z = fmhai_dropout_keep_z(w, T, Tlo);
        const uint32_t mine = fmhai_dropout_keep8(z, g1), theirs = fmhai_dropout_keep8(z, g1 ^ 1u);
        /* the partner's draw of block np0 + 1 - g1, this lane's bytes (bits, not a float: moved exactly) */
        const uint32_t got = __float_as_uint(fmhai_shfl_xor(__uint_as_float(theirs), 4));
        keep |= (mine << (8 * np)) | (got << (8 * (np0 + 1 - (int)g1)));
    }
    return keep;
}

/* The first key tile column and the unit of a one-unit block (grid x key
 * tiles, y KV heads, z entries), in the order blocks start (linear index,
 * x fastest): unit after unit, or (lpt_units: causal-type masks, a shared
 * bias) in groups of lpt_units units, every unit's key tile 0 (under such
 * a mask the one with the most query tiles) first, then every unit's tile
 * 1, and so on (fmhai_fwd_block_map; the forward's longest-first order),
 * units KV head or (units_bfast) batch entry fastest. */
FMHAI_DEVICE void fmhai_bwd_block_of(const fmhai_bwd_params *p, int *x, int *u)
{
    const int nhk = p->nhead_q / p->head_ratio, GX = (int)gridDim.x, GY = (int)gridDim.y;
    int m, h, b;
    if (p->lpt_units <= 0) {
        *x = (int)blockIdx.x;
        *u = (int)blockIdx.y + nhk * (int)blockIdx.z;
        return;
    }
    fmhai_fwd_block_map((int)blockIdx.x + GX * ((int)blockIdx.y + GY * (int)blockIdx.z), GX, GY, GY * (int)gridDim.z,
                        p->lpt_units, p->units_bfast, &m, &h, &b);
    *x = GX - 1 - m;
    *u = h + nhk * b;
}

/* The first key tile column of this block's walk (fmhai_bwd_block_of). */
FMHAI_DEVICE int fmhai_bwd_x0(const fmhai_bwd_params *p)
{
    int x, u;
    if (p->unit_rows > 0) return (int)blockIdx.x;
    fmhai_bwd_block_of(p, &x, &u);
    return x;
}

/* The i-th (KV head, batch entry) unit a block walks, or -1 past its last;
 * unit u is KV head u % nhead_k of entry u / nhead_k. One unit per block
 * from grid y and z, or (unit_rows) grid y rows of blocks that keep their
 * key tile from unit to unit: row y takes units y, y + unit_rows, ... */
FMHAI_DEVICE int fmhai_bwd_unit_at(const fmhai_bwd_params *p, int i)
{
    const int nhk = p->nhead_q / p->head_ratio, units = nhk * p->batch;
    int u, x;
    if (p->unit_rows <= 0) {
        if (i != 0) return -1;
        fmhai_bwd_block_of(p, &x, &u);
        return u;
    }
    u = (int)blockIdx.y + i * p->unit_rows;
    return u < units ? u : -1;
}

/* One (KV head, batch entry) unit of the walk (fmhai_bwd_unit_at): the
 * entry, its key tiles (dQ direct: one; with no keys at all, one empty tile
 * still writes the zero dQ rows) and its mask window. */
typedef struct fmhai_bwd_unit {
    fmhai_bwd_seq s;
    int b;     /* the batch entry (ALiBi slopes per entry) */
    int hk, det, n_tiles, masked, c_lo, c_hi;
    int rev;   /* deterministic with a mask: chains in reverse tile order (fmhai_bwd_tile_of) */
} fmhai_bwd_unit;

/* 0 when the unit has nothing to do (an entry the packing rejected). */
FMHAI_DEVICE int fmhai_bwd_unit_of(const fmhai_bwd_params *p, int u, int HAS_MASK, int DET, int BN, int BIG,
                                   fmhai_bwd_unit *U)
{
    const int nhk = p->nhead_q / p->head_ratio;
    U->hk = u % nhk;
    U->b = u / nhk;
    fmhai_bwd_seq_of(p, U->b, &U->s);
    U->det = DET && !p->dq_direct;   /* compile-time 0 in the atomics kernels */
    U->n_tiles = p->dq_direct ? 1 : (U->s.s_k + BN - 1) / BN;
    U->masked = HAS_MASK && !p->dq_direct;
    U->rev = DET && HAS_MASK;   /* compile-time (and harmless with one tile when dQ is direct) */
    fmhai_bwd_window(p, &U->s, HAS_MASK, BIG, &U->c_lo, &U->c_hi);
    return U->s.nsplits > 0;
}

/* Sweep of the key tile n that grid column x takes: its query tiles
 * m_first, m_first + m_dir, ... (n_m of them, for each query head of the
 * group: n_steps steps; fmhai_bwd_m_at). Non-deterministic tiles go up from
 * their first visible query tile, so the atomics of causal tiles spread over
 * different query tiles. Deterministic tiles without a mask go down, every
 * tile over every query tile. Each would wait on its predecessor in the
 * chain at every query tile, so if all started at the last one the chain
 * would fill like a pipeline, tile n a hand-off behind tile n - 1 (64 tiles:
 * 64 hand-offs, 2-4% of a row's time). Where every key tile of a unit runs at
 * once (p->det_rot: as many key tiles as the device has multiprocessors, so
 * that no tile waits on one that cannot start) and a split's chain has no
 * more tiles than there are query tiles (rot), the sweeps are rotated
 * instead: the i-th tile of a split (i = n / nsplits) starts at query tile
 * i - 1 (tile 0 at the last) and wraps, so at query tile m its predecessor
 * in the chain (fmhai_bwd_det_need) is the tile that was there one step
 * earlier, and nothing fills. With a mask (rev) the chains run in reverse:
 * the column takes tile n_tiles - 1 - x, the tiles sweep up as the atomics
 * do, and at a query tile the later key tiles add first. The window moves
 * with the key, so a later tile's first visible query tile is never
 * earlier: it reached every query tile at least as early in its sweep as the
 * tiles after it in the chain, which the hardware launched first (lower x);
 * no tile waits. */
typedef struct fmhai_bwd_tile {
    int n;   /* the key tile */
    int j0, split, n_m, m_first, m_dir, n_steps;
    int m_lo;   /* the sweep wraps to m_lo + n_m - 1 below m_lo (rot) */
    int rot;    /* rotated (deterministic, no mask): the split's chain length */
    int ci;     /* rot: this tile's place in its split's chain (n / nsplits) */
} fmhai_bwd_tile;

FMHAI_DEVICE void fmhai_bwd_tile_of(const fmhai_bwd_params *p, const fmhai_bwd_seq *s, int x, int n_tiles, int rev,
                                    int BM, int BN, int det, int masked, int c_lo, int c_hi, int BIG,
                                    fmhai_bwd_tile *T)
{
    int m_lo, m_hi;
    const int ns = s->nsplits;
    T->n = rev ? n_tiles - 1 - x : x;
    fmhai_bwd_m_range(s, T->n, BM, BN, masked, c_lo, c_hi, BIG, &m_lo, &m_hi);
    T->j0 = T->n * BN;
    T->split = det ? T->n % ns : 0;
    T->n_m = m_hi - m_lo;
    T->m_lo = m_lo;
    T->m_dir = det && !rev ? -1 : 1;
    T->m_first = det && !rev ? m_hi - 1 : m_lo;
    T->rot = 0;
    T->ci = 0;
    if (det && !rev && p->det_rot && (n_tiles + ns - 1) / ns <= T->n_m) {
        T->rot = (n_tiles - T->split + ns - 1) / ns;
        T->ci = T->n / ns;
        T->m_first = m_lo + (T->ci == 0 ? T->n_m - 1 : T->ci - 1);
    }
    T->n_steps = T->n_m * p->head_ratio;
}

/* The query tile of sweep position mi (0 .. n_m - 1). */
FMHAI_DEVICE int fmhai_bwd_m_at(const fmhai_bwd_tile *T, int mi)
{
    const int m = T->m_first + T->m_dir * mi;
    return T->rot > 0 && m < T->m_lo ? m + T->n_m : m;   /* (rot: compile-time 0 in the atomics kernels) */
}

/* Deterministic dQ: how many of the key tiles before tile n in its split's
 * chain (split, split + nsplits, ... < n; rev: > n, down from the last;
 * rot > 0: the order the rotated sweeps of a chain of rot tiles reach the
 * query tile, this tile the ci-th, fmhai_bwd_tile_of) see query tile
 * m0. The window's bounds move with the key, so the key tiles that see a
 * query tile are one range [ka, kb] (fmhai_bwd_m_range inverted) and the
 * count is closed-form: no loop over the tiles, few registers where the
 * step's accumulators live. One split (always with a mask,
 * fmhai_bwd_nsplits) takes no division: the Hopper kernel's thread 0 works
 * this out every step while its warpgroup waits, and the general form's
 * three divisions by nsplits cost the deterministic kernel 4%
 * (bench/RESULTS.md, session 32). */
FMHAI_DEVICE int fmhai_bwd_det_need(int n, int n_tiles, int rev, int rot, int ci, int split, int ns, int m0,
                                    int s_q, int s_k, int BM, int BN, int masked, int c_lo, int c_hi, int BIG)
{
    int ka = rev ? n + 1 : 0, kb = rev ? n_tiles - 1 : n - 1, first;
    if (rot > 0) {   /* the chain's ci-th of rot tiles reaches query tile m at step (ci - m - 1) mod M, rot <= M */
        const int M = (s_q + BM - 1) / BM, m = m0 / BM, a = m + 1 == M ? 0 : m + 1;
        return ci >= a ? ci - a : ci + max(rot - a, 0);
    }
    if (masked) {
        if (c_lo != -BIG) {   /* a tile's last key must reach row m0's first visible key */
            const int x = m0 + c_lo;
            if (x > s_k - 1) return 0;
            if (x > 0) ka = max(ka, x / BN);
        }
        if (c_hi != BIG) {    /* a tile's first key must be visible to the tile's last row */
            const int y = min(m0 + BM, s_q) - 1 + c_hi;
            if (y < 0) return 0;
            kb = min(kb, y / BN);
        }
    }
    if (ns == 1) return kb >= ka ? kb - ka + 1 : 0;
    if (!masked && !rev) return (n - split) / ns;
    first = ka + ((split - ka) % ns + ns) % ns;
    return first > kb ? 0 : (kb - first) / ns + 1;
}

/* acc[QW/8][4] = A B^T over the head dim: A is this warp's 16 key rows
 * (ldmatrix base a, K or V), B the QW query rows of a slice (base b, Q or
 * dO; rows FMHAI_ROWB(HD) bytes apart), over the first KD columns (dP^T of
 * a 192_128 row: the 128 of V and dO). S^T = K Q^T and dP^T = V dO^T. The k-steps
 * unroll by 8 (all of hd 128): one at a time, each MMA waited on its
 * ldmatrix (the profile's top stall). Bases are hidden from the optimiser so
 * that the swizzled addresses are formed here, not held across the step. */
FMHAI_DEVICE void fmhai_bwd_gemm_abt(float (*acc)[4], fmhai_smem_t a, fmhai_smem_t b, int HD, int KD, int QW,
                                     int is_bf16)
{
    const fmhai_smem_t a_base = fmhai_opaque_smem(a), b_base = fmhai_opaque_smem(b);
#pragma unroll
    for (int nt = 0; nt < QW / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
#pragma unroll 8
    for (int kk = 0; kk < KD / 16; ++kk) {
        uint32_t fa[4];
        fmhai_warp_ldsm_x4(fa, fmhai_ldsm_at(a_base, kk));
#pragma unroll
        for (int np = 0; np < QW / 16; ++np) {
            uint32_t fb[4];
            fmhai_warp_ldsm_x4(fb, fmhai_ldsm_at(b_base, kk) + np * 16 * FMHAI_ROWB(HD));
            fmhai_warp_mma_16816(acc[2 * np], fa, fb, is_bf16);
            fmhai_warp_mma_16816(acc[2 * np + 1], fa, fb + 2, is_bf16);
        }
    }
}

/* 16 keys x hd accumulator of this warp -> dK or dV rows (16-bit, 4-byte
 * stores straight from the fragments). */
FMHAI_DEVICE void fmhai_bwd_store_kv(char *dst, int64_t row_stride, const float (*acc)[4], float mul, int key0,
                                     int s_k, int d, int is_bf16, int HD, int lane)
{
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int key = key0 + g + 8 * hf;
        if (key >= s_k) continue;
        char *row = dst + 2 * (int64_t)key * row_stride;
#pragma unroll
        for (int dt = 0; dt < HD / 8; ++dt) {
            const int col = dt * 8 + 2 * t;
            if (col < d)
                *(uint32_t *)(row + 2 * col) =
                    fmhai_pack2(acc[dt][2 * hf] * mul, acc[dt][2 * hf + 1] * mul, is_bf16);
        }
    }
}

/* The dQ warp split's WM (policy/bwd_tiles.h: FMHAI_BWD_DQ_WM, which
 * breaks a tie of costs to the smaller WM). A non-deterministic row of
 * unequal dims takes a tie's doubled WM where that split is valid: 192_128
 * as 2 x 3 warps of 32 x 64 dQ had no spill (253 registers), 1 x 6 of 64 x
 * 32 spilled 24 bytes; its deterministic kernel spilled more with 2 x 3. */
FMHAI_DEVICE int fmhai_bwd_dq_wm(int BM, int HD, int HDV, int NW, int DET)
{
    const int wm = FMHAI_BWD_DQ_WM(BM, HD, NW), w2 = 2 * wm;
    const int rw = BM / w2, ct = FMHAI_BWD_WM_OK(BM, HD, NW, w2) ? HD / (NW / w2) : 0;
    const int cw = ct * rw <= 1024 ? ct : 1024 / rw;
    const int alt = !DET && HDV != HD && ct > 0 &&
                    FMHAI_BWD_WM_COST(BM, HD, NW, w2) == FMHAI_BWD_WM_COST(BM, HD, NW, wm) && cw % 16 == 0 &&
                    ct % cw == 0 && rw % 16 == 0;
    return alt ? w2 : wm;
}

/* dq_dk_dv of one (KV head, batch entry) unit. */
FMHAI_DEVICE void fmhai_bwd_dq_dk_dv_unit(const fmhai_bwd_params *p, char *smem, const int is_bf16, const int HD,
                                          const int HDV, const int BM, const int BN, const int NW, const int ST,
                                          const int HAS_MASK, const int SOFTCAP, const int ALIBI, const int DET,
                                          const fmhai_bwd_unit *U)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80) || defined(FMHA_PLATFORM_AMD)
    const int NT = NW * 32;
    /* dV sweep, then dK + dQ sweep above hdim 128; a row of unequal dims
     * (192_128: dK 96 + dV 64 registers a lane) sweeps once unless
     * deterministic (a fifth fewer products, S^T computed once; 56 bytes of
     * spill): H200, 2k-8k, 1.22-1.25x the two sweeps, deterministic
     * 0.89-0.93x (bench/RESULTS.md) */
    const int TWO_SWEEPS = HDV != HD ? DET : HD > 128;
    const int QW = 32;                         /* query columns of a slice     */
    const int WM = fmhai_bwd_dq_wm(BM, HD, HDV, NW, DET); /* dQ warp split: WM x WN */
    const int RW = BM / WM;                     /* dQ rows of a warp          */
    const int CT = HD / (NW / WM);              /* dQ columns of a warp       */
    const int CW = CT * RW <= 1024 ? CT : 1024 / RW; /* ... in chunks of CW   */
    const int BIG = 1 << 30;

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const fmhai_bwd_seq s = U->s;
    const int hk = U->hk, det = U->det, n_tiles = U->n_tiles, masked = U->masked;
    const int c_lo = U->c_lo, c_hi = U->c_hi;   /* key j visible to query i: c_lo <= j - i <= c_hi */
    const int drop = p->dropout_thr != 0u;      /* dropout (a uniform branch; 0: none of its code runs) */

    /* ---- shared memory ---------------------------------------------------- */
    const int kv_bytes = BN * FMHAI_ROWB(HD), q_bytes = BM * FMHAI_ROWB(HD);
    const fmhai_smem_t sK = fmhai_smem_addr(smem);
    const fmhai_smem_t sV = sK + kv_bytes;
    const fmhai_smem_t sQ = sV + kv_bytes;
    const fmhai_smem_t sdO = sQ + ST * q_bytes;
    const fmhai_smem_t sdS = sdO + ST * q_bytes;
    float *sLse = (float *)(smem + 2 * kv_bytes + 2 * ST * q_bytes + BN * BM * 2);   /* [2][BM] */
    float *sD = sLse + 2 * BM;                                                         /* [2][BM] */
    const fmhai_smem_t sLse_a = fmhai_smem_addr(sLse), sD_a = fmhai_smem_addr(sD);

    /* ldmatrix bases (as the forward's): kA, this warp's 16 key rows as the
     * A operand (V at + VK); qB, rows as the non-transposed B operand (dO at
     * + OQ); qT, rows as the transposed B operand (dO at + OQ, K at - QK).
     * Tiles of one row width share a base, so one set of swizzled
     * addresses (fmhai_ldsm_at) serves them all. */
    const int key0 = warp * 16;
    const int b_row = ((lane / 8) / 2) * 8 + lane % 8, b_chunk = (lane / 8) % 2;
    const int t_row = ((lane / 8) % 2) * 8 + lane % 8, t_chunk = (lane / 8) / 2;
    const fmhai_smem_t kA = fmhai_ldsm_base(sK, (key0 + lane % 16) * FMHAI_ROWB(HD), lane / 16, lane % 8);
    const fmhai_smem_t qB = fmhai_ldsm_base(sQ, b_row * FMHAI_ROWB(HD), b_chunk, lane % 8);
    const fmhai_smem_t qT = fmhai_ldsm_base(sQ, t_row * FMHAI_ROWB(HD), t_chunk, lane % 8);
    const int VK = kv_bytes, OQ = ST * q_bytes, QK = 2 * kv_bytes;
    /* dQ product: dS (A, from dS^T [BN][BM] transposed: key rows, query
     * chunks) and K (B, transposed, from qT) */
    const int wm = warp % WM, wn = warp / WM;
    const fmhai_smem_t dsA = fmhai_ldsm_base(sdS, b_row * BM * 2, b_chunk, lane % 8);

    const char *k_seq = (const char *)p->k + 2 * ((int64_t)s.b_eff * p->k_batch + (int64_t)s.k_start * p->k_row +
                                                  (int64_t)hk * p->k_head);
    const char *v_seq = (const char *)p->v + 2 * ((int64_t)s.b_eff * p->v_batch + (int64_t)s.k_start * p->v_row +
                                                  (int64_t)hk * p->v_head);

    int32_t *pend = 0;   /* deterministic, thread 0: counter of the last dQ adds, not yet published */
    for (int x = fmhai_bwd_x0(p); x < n_tiles; x += (int)gridDim.x) {
        fmhai_bwd_tile T;   /* the query tiles that can see a key of this tile, in sweep order */
        fmhai_bwd_tile_of(p, &s, x, n_tiles, U->rev, BM, BN, det, masked, c_lo, c_hi, BIG, &T);
        const int n = T.n, j0 = T.j0, split = T.split, n_m = T.n_m, m_first = T.m_first;
        const int n_it = T.n_steps;
        const int n_steps = (TWO_SWEEPS ? 2 : 1) * n_it;

        /* every copy has landed and every warp is done with the previous
         * tile's shared memory */
        fmhai_copy_wait(0);
        __syncthreads();
        fmhai_block_load_tile(sK, k_seq + 2 * (int64_t)j0 * p->k_row, 2 * p->k_row, 16, BN, s.s_k - j0, p->d, HD,
                              NT, tid, 0);
        fmhai_block_load_tile(sV, v_seq + 2 * (int64_t)j0 * p->v_row, 2 * p->v_row, 16, BN, s.s_k - j0, p->hdv, HD,
                              NT, tid, 0);
        if (n_steps > 0)
            fmhai_bwd_load_step(p, &s, 0, hk * p->head_ratio, m_first * BM, sQ, sdO, sLse, sD, is_bf16, HD, BM, NT,
                                tid);
        fmhai_copy_commit();

        /* acc_a: dV (dV sweep of two); acc_b: dK (single sweep) */
        float acc_a[FMHAI_FWD_MAX_HD / 8][4], acc_b[FMHAI_FWD_MAX_HD / 8][4];
#pragma unroll
        for (int dt = 0; dt < HD / 8; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) { acc_a[dt][e] = 0.f; acc_b[dt][e] = 0.f; }

        int mi = 0, hq = 0;   /* this step's sweep position */
#pragma unroll 1
        for (int jt = 0; jt < n_steps; ++jt) {
            const int dv_step = !TWO_SWEEPS || jt < n_it;
            const int dk_step = !TWO_SWEEPS || jt >= n_it;
            const int buf = ST == 2 ? (jt & 1) : 0;
            const int slot = (jt & 1) * BM;
            const int m0 = fmhai_bwd_m_at(&T, mi) * BM;
            const int h = hk * p->head_ratio + hq;
            const float slope2 = fmhai_bwd_slope2(p, U->b, h, ALIBI);
            /* elementwise bias: (entry, head h) bases of the bias and dbias */
            const int64_t bias_b = ALIBI == 2 ? fmhai_bwd_bias_base(&s, p->bias_row, p->bias_head, p->bias_batch, h) : 0;
            const int64_t dbias_b =
                ALIBI == 2 ? fmhai_bwd_bias_base(&s, p->dbias_row, p->dbias_head, p->dbias_batch, h) : 0;
            int nmi = mi, nhq = hq;   /* the next step's */
            fmhai_bwd_next_pos(&nmi, &nhq, n_m, p->head_ratio);
            const int nm0 = fmhai_bwd_m_at(&T, nmi) * BM, nh = hk * p->head_ratio + nhq;

            if (TWO_SWEEPS && jt == n_it) {   /* dV sweep done: dV out, dK next */
                fmhai_bwd_store_kv((char *)p->dv + 2 * ((int64_t)s.b_eff * p->dv_batch +
                                                        (int64_t)(s.k_start + j0) * p->dv_row +
                                                        (int64_t)hk * p->dv_head),
                                   p->dv_row, acc_a, p->dropout_scale, key0, s.s_k - j0, p->hdv, is_bf16, HDV, lane);
#pragma unroll
                for (int dt = 0; dt < HD / 8; ++dt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc_a[dt][e] = 0.f;
            }

            fmhai_copy_wait(0);
            __syncthreads();
            /* deterministic: publish the previous step's dQ adds (every warp
             * stored them before the barrier), before thread 0 has new loads
             * in flight for its release fence to wait on */
            if (det && pend) {
                if (tid == 0) fmhai_add_release(pend, 1);
                pend = 0;
            }
            if (ST == 2 && jt + 1 < n_steps)
                fmhai_bwd_load_step(p, &s, jt + 1, nh, nm0, sQ + ((jt + 1) & 1) * q_bytes,
                                    sdO + ((jt + 1) & 1) * q_bytes, sLse, sD, is_bf16, HD, BM, NT, tid);
            if (ST == 2) fmhai_copy_commit();
            /* this step's stage buffer (a multiple of 128 bytes: the swizzle
             * XOR of fmhai_ldsm_at still applies to the shifted base) */
            const fmhai_smem_t qBi = qB + buf * q_bytes, qTi = qT + buf * q_bytes;

            const int need_mask = (j0 + BN > s.s_k) ||
                                  (HAS_MASK && (j0 - (m0 + BM - 1) < c_lo || j0 + BN - 1 - m0 > c_hi));
            /* The query tile in QW-column slices: S^T, P^T, dP^T and dS^T of
             * one slice are live at a time (32 keys x 16 rows of fp32 each),
             * which keeps dK and dV in registers. S^T and dP^T come from
             * fmhai_bwd_gemm_abt; the other phases' k-steps stay loops. */
            /* dropout: the keep bits of the step's BM queries (16 a slice),
             * drawn before the slices' accumulators are live (the kernels
             * sit at their register limit; with two sweeps each slice draws
             * its own, which spilled less there) */
            uint64_t keep_all = 0;
            if (drop && !TWO_SWEEPS)
#pragma unroll 1
                for (int q0 = 0; q0 < BM; q0 += QW)
                    keep_all |= (uint64_t)fmhai_bwd_dropout_keep(p, (uint32_t)(U->b * p->nhead_q + h),
                                                                 m0 + q0 + 2 * t, j0 + key0 + g, QW)
                                << (16 * (q0 / QW));
#pragma unroll 1
            for (int q0 = 0; q0 < BM; q0 += QW) {
                /* ---- S^T = K Q^T ---------------------------------------------- */
                float acc_s[QW / 8][4];
                fmhai_bwd_gemm_abt(acc_s, kA, qBi + q0 * FMHAI_ROWB(HD), HD, HD, QW, is_bf16);
                /* dropout: this slice's keep bits, used up by P^T below (they
                 * end there: dS^T reads the drops from P^T's sign) */
                const uint32_t keep =
                    !TWO_SWEEPS ? (uint32_t)(keep_all >> (16 * (q0 / QW)))
                    : drop ? fmhai_bwd_dropout_keep(p, (uint32_t)(U->b * p->nhead_q + h), m0 + q0 + 2 * t,
                                                    j0 + key0 + g, QW)
                           : 0u;

                /* ---- P^T (and, soft cap, P^T * (1 - tanh^2) for dS) -------------- */
                uint32_t pa[QW / 16][4];
#pragma unroll
                for (int nt = 0; nt < QW / 8; ++nt) {
                    const int col = q0 + nt * 8 + 2 * t;    /* first of this lane's two columns */
                    uint32_t pk[2];
                    fmhai_bwd_p_ntile(acc_s[nt], pk, fmhai_ld_shared_f2(sLse_a + 4 * (slot + col)), p, need_mask,
                                      j0 + key0 + g, m0 + col, s.s_k, c_lo, c_hi, SOFTCAP, is_bf16, ALIBI,
                                      slope2, s.s_k - s.s_q, bias_b, s.s_q);
                    if (drop) {
                        /* P o Z for dV: P with the dropped 16-bit halves +0
                         * (the common scale goes on dV at its store); for
                         * dS a dropped entry keeps its P^T (>= 0) negated,
                         * the mark that its dP is 0 */
#pragma unroll
                        for (int hf = 0; hf < 2; ++hf) {
                            const uint32_t k2 = keep >> (4 * nt + 2 * hf);
                            pk[hf] &= (k2 & 1u ? 0xffffu : 0u) | (k2 & 2u ? 0xffff0000u : 0u);
                            if (!(k2 & 1u)) acc_s[nt][2 * hf] = -acc_s[nt][2 * hf];
                            if (!(k2 & 2u)) acc_s[nt][2 * hf + 1] = -acc_s[nt][2 * hf + 1];
                        }
                    }
                    if (dv_step) {
                        pa[nt / 2][(nt % 2) * 2] = pk[0];
                        pa[nt / 2][(nt % 2) * 2 + 1] = pk[1];
                    }
                }

                /* ---- dV += P^T dO ---------------------------------------------- */
                if (dv_step) {
                    const fmhai_smem_t b_base = fmhai_opaque_smem(qTi + OQ + q0 * FMHAI_ROWB(HD));
#pragma unroll
                    for (int dn = 0; dn < HDV / 16; ++dn)
#pragma unroll
                        for (int kp = 0; kp < QW / 16; ++kp) {
                            uint32_t vb[4];
                            fmhai_warp_ldsm_x4_t(vb, fmhai_ldsm_at(b_base, dn) + kp * 16 * FMHAI_ROWB(HD));
                            fmhai_warp_mma_16816(acc_a[2 * dn], pa[kp], vb, is_bf16);
                            fmhai_warp_mma_16816(acc_a[2 * dn + 1], pa[kp], vb + 2, is_bf16);
                        }
                }
                if (!dk_step) continue;

                /* ---- dP^T = V dO^T --------------------------------------------- */
                float acc_p[QW / 8][4];
                fmhai_bwd_gemm_abt(acc_p, kA + VK, qBi + OQ + q0 * FMHAI_ROWB(HD), HD, HDV, QW, is_bf16);
                /* ---- dS^T = P^T (dP^T - D) -------------------------------------- */
                /* dropout: dS^T = P^T (dP^T o Z - D): a kept entry's dP^T times
                 * the scale, a dropped one (P^T negated above) -P^T D; D =
                 * rowsum(dO o O) already holds Z */
                uint32_t dsa[QW / 16][4];
#pragma unroll
                for (int nt = 0; nt < QW / 8; ++nt) {
                    const float2 dd = fmhai_ld_shared_f2(sD_a + 4 * (slot + q0 + nt * 8 + 2 * t));
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const float c0 = acc_s[nt][2 * hf], c1 = acc_s[nt][2 * hf + 1];
                        float d0, d1;
                        if (drop) {
                            d0 = c0 < 0.f ? c0 * dd.x : c0 * (acc_p[nt][2 * hf] * p->dropout_scale - dd.x);
                            d1 = c1 < 0.f ? c1 * dd.y : c1 * (acc_p[nt][2 * hf + 1] * p->dropout_scale - dd.y);
                        } else {
                            d0 = c0 * (acc_p[nt][2 * hf] - dd.x);
                            d1 = c1 * (acc_p[nt][2 * hf + 1] - dd.y);
                        }
                        if (ALIBI == 2 && p->dbias)   /* dbias = dS (no soft cap: dbias plans have none) */
                            fmhai_bwd_dbias_put2(p, dbias_b, m0 + q0 + nt * 8 + 2 * t, j0 + key0 + g + 8 * hf, s.s_q,
                                                 s.s_k, d0, d1);
                        dsa[nt / 2][(nt % 2) * 2 + hf] = fmhai_pack2(d0, d1, is_bf16);
                    }
                }
                /* ---- dK += dS^T Q ----------------------------------------------- */
                {
                    const fmhai_smem_t b_base = fmhai_opaque_smem(qTi + q0 * FMHAI_ROWB(HD));
#pragma unroll
                    for (int dn = 0; dn < HD / 16; ++dn)
#pragma unroll
                        for (int kp = 0; kp < QW / 16; ++kp) {
                            uint32_t qb[4];
                            fmhai_warp_ldsm_x4_t(qb, fmhai_ldsm_at(b_base, dn) + kp * 16 * FMHAI_ROWB(HD));
                            if (TWO_SWEEPS) {
                                fmhai_warp_mma_16816(acc_a[2 * dn], dsa[kp], qb, is_bf16);
                                fmhai_warp_mma_16816(acc_a[2 * dn + 1], dsa[kp], qb + 2, is_bf16);
                            } else {
                                fmhai_warp_mma_16816(acc_b[2 * dn], dsa[kp], qb, is_bf16);
                                fmhai_warp_mma_16816(acc_b[2 * dn + 1], dsa[kp], qb + 2, is_bf16);
                            }
                        }
                }
                /* ---- dS^T -> shared ([BN][BM], this warp's 16 key rows) ---------- */
#pragma unroll
                for (int nt = 0; nt < QW / 8; ++nt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf)
                        fmhai_st_shared_u32(sdS + fmhai_swz(key0 + g + 8 * hf, q0 / 8 + nt, BM) + 4 * t,
                                            dsa[nt / 2][(nt % 2) * 2 + hf]);
            }

            if (dk_step) {
                /* deterministic: rows row0.. of the slices (slice n % nsplits
                 * of the query tile) get this tile's dQ after the slice's
                 * earlier key tiles that see the query tile: warp 0 counts
                 * them (a lane per tile) and thread 0 waits for their
                 * arrivals before the barrier. */
                const int64_t row0 = ((int64_t)h * s.nsplits + split) * s.s_q + m0;
                int32_t *sem = det ? p->dq_sem + s.acc_row + row0 : 0;
                if (det && warp == 0) {
                    const int need = fmhai_bwd_det_need(n, n_tiles, U->rev, T.rot, T.ci, split, s.nsplits, m0, s.s_q, s.s_k, BM, BN, masked,
                                                         c_lo, c_hi, BIG);
                    if (lane == 0)
                        while (fmhai_ld_acquire(sem) < need) { }
                }
                __syncthreads();
                /* deterministic: this warp's RW x CT fp32 block of the slice
                 * is copied (L2, never L1) into the step's Q and dO buffers,
                 * free from here on, during the dQ product */
                const fmhai_smem_t prev = (warp * RW * CT * 4 < q_bytes ? sQ + warp * RW * CT * 4
                                                                       : sdO + (warp * RW * CT * 4 - q_bytes)) +
                                          buf * q_bytes;
                if (det) {
#pragma unroll
                    for (int i = 0; i < RW * CT / 4 / 32; ++i) {
                        const int idx = lane + 32 * i, r = idx / (CT / 4), c = wn * CT + (idx % (CT / 4)) * 4;
                        const int ok = m0 + wm * RW + r < s.s_q && c < p->d;
                        const float *src = p->dq_acc + s.acc_off + (row0 + wm * RW + r) * p->d + c;
                        fmhai_copy_async16(prev + idx * 16, ok ? (const void *)src : (const void *)p->dq_acc, ok);
                    }
                    fmhai_copy_commit();
                }
                /* Q and dO of this step are no longer read: stages 1 loads the
                 * next (deterministic: after the dQ adds, which use them) */
                if (ST == 1 && !det) {
                    if (jt + 1 < n_steps)
                        fmhai_bwd_load_step(p, &s, jt + 1, nh, nm0, sQ, sdO, sLse, sD, is_bf16, HD, BM,
                                            NT, tid);
                    fmhai_copy_commit();
                }

                /* ---- dQ = dS K for rows wm*RW.., columns wn*CT.. ------------------ */
#pragma unroll
                for (int cc = 0; cc < CT / CW; ++cc) {
                    const int c0 = wn * CT + cc * CW;      /* first column of the chunk */
                    float acc_q[8][8][4];                   /* [RW/16][CW/8][4] */
#pragma unroll
                    for (int mt = 0; mt < RW / 16; ++mt)
#pragma unroll
                        for (int nt = 0; nt < CW / 8; ++nt)
#pragma unroll
                            for (int e = 0; e < 4; ++e) acc_q[mt][nt][e] = 0.f;
                    /* A: dS^T rows kk*16.. at query chunk pairs of this warp's
                     * rows; B: K rows kk*16.. at this chunk's column pairs */
                    fmhai_smem_t a_addr[8], b_addr[8];
#pragma unroll
                    for (int mt = 0; mt < RW / 16; ++mt)
                        a_addr[mt] = fmhai_ldsm_at(fmhai_opaque_smem(dsA), (wm * RW + mt * 16) / 16);
#pragma unroll
                    for (int np = 0; np < CW / 16; ++np)
                        b_addr[np] = fmhai_ldsm_at(fmhai_opaque_smem(qT - QK), (c0 + np * 16) / 16);
#pragma unroll 1
                    for (int kk = 0; kk < BN / 16; ++kk) {
                        uint32_t da[8][4];
#pragma unroll
                        for (int mt = 0; mt < RW / 16; ++mt)
                            fmhai_warp_ldsm_x4_t(da[mt], a_addr[mt] + kk * 16 * BM * 2);
#pragma unroll
                        for (int np = 0; np < CW / 16; ++np) {
                            uint32_t kb[4];
                            fmhai_warp_ldsm_x4_t(kb, b_addr[np] + kk * 16 * FMHAI_ROWB(HD));
#pragma unroll
                            for (int mt = 0; mt < RW / 16; ++mt) {
                                fmhai_warp_mma_16816(acc_q[mt][2 * np], da[mt], kb, is_bf16);
                                fmhai_warp_mma_16816(acc_q[mt][2 * np + 1], da[mt], kb + 2, is_bf16);
                            }
                        }
                    }
                    /* out: atomics, this split's slice, or dQ itself */
                    float *acc_row = p->dq_acc + s.acc_off + row0 * p->d;
                    if (det) {   /* the slice's sums so far, from the copy */
                        if (cc == 0) {
                            fmhai_copy_wait(0);
                            fmhai_sync_warp();
                        }
#pragma unroll
                        for (int mt = 0; mt < RW / 16; ++mt)
#pragma unroll
                            for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                                for (int nt = 0; nt < CW / 8; ++nt) {
                                    const int r = mt * 16 + g + 8 * hf, col = cc * CW + nt * 8 + 2 * t;
                                    const float2 v = fmhai_ld_shared_f2(prev + (r * CT + col) * 4);
                                    acc_q[mt][nt][2 * hf] += v.x;
                                    acc_q[mt][nt][2 * hf + 1] += v.y;
                                }
                    }
#pragma unroll
                    for (int mt = 0; mt < RW / 16; ++mt)
#pragma unroll
                        for (int hf = 0; hf < 2; ++hf) {
                            const int r = wm * RW + mt * 16 + g + 8 * hf;
                            if (m0 + r >= s.s_q) continue;
#pragma unroll
                            for (int nt = 0; nt < CW / 8; ++nt) {
                                const int col = c0 + nt * 8 + 2 * t;
                                if (col >= p->d) continue;
                                const float x = acc_q[mt][nt][2 * hf], y = acc_q[mt][nt][2 * hf + 1];
                                if (p->dq_direct) {
                                    char *dq = (char *)p->dq +
                                               2 * fmhai_bwd_row_off(&s, p->dq_row, p->dq_head, p->dq_batch, h, m0 + r);
                                    *(uint32_t *)(dq + 2 * col) = fmhai_pack2(x * p->scale, y * p->scale, is_bf16);
                                } else if (det) {   /* the slice's new sum */
                                    fmhai_st_cg_f2(acc_row + (int64_t)r * p->d + col, make_float2(x, y));
                                } else {
                                    float *acc = p->dq_acc + s.acc_off + ((int64_t)h * s.s_q + m0 + r) * p->d + col;
                                    fmhai_atomic_add2(acc, x, y);
                                }
                            }
                        }
                }
                if (det) {
                    pend = sem;   /* published by thread 0 after the next barrier */
                    if (ST == 1) {   /* the adds are done with the Q and dO buffers */
                        __syncthreads();
                        if (tid == 0) fmhai_add_release(pend, 1);
                        pend = 0;
                        if (jt + 1 < n_steps)
                            fmhai_bwd_load_step(p, &s, jt + 1, nh, nm0, sQ, sdO, sLse, sD,
                                                is_bf16, HD, BM, NT, tid);
                        fmhai_copy_commit();
                    }
                }
            } else if (ST == 1) {
                /* dV sweep of two: nothing reads Q and dO after a barrier */
                __syncthreads();
                if (jt + 1 < n_steps)
                    fmhai_bwd_load_step(p, &s, jt + 1, nh, nm0, sQ, sdO, sLse, sD, is_bf16, HD, BM, NT,
                                        tid);
                fmhai_copy_commit();
            }
            mi = nmi;
            hq = nhq;
        }

        if (det && pend) {   /* the tile's last dQ adds: every warp's stores first */
            __syncthreads();
            if (tid == 0) fmhai_add_release(pend, 1);
            pend = 0;
        }

        /* ---- dK (times scale) and dV of the tile ----------------------------- */
        char *dk = (char *)p->dk + 2 * ((int64_t)s.b_eff * p->dk_batch + (int64_t)(s.k_start + j0) * p->dk_row +
                                        (int64_t)hk * p->dk_head);
        char *dv = (char *)p->dv + 2 * ((int64_t)s.b_eff * p->dv_batch + (int64_t)(s.k_start + j0) * p->dv_row +
                                        (int64_t)hk * p->dv_head);
        if (TWO_SWEEPS) {
            if (n_it == 0)   /* no sweep ran: dV is 0 too */
                fmhai_bwd_store_kv(dv, p->dv_row, acc_a, 1.f, key0, s.s_k - j0, p->hdv, is_bf16, HDV, lane);
            fmhai_bwd_store_kv(dk, p->dk_row, acc_a, p->scale, key0, s.s_k - j0, p->d, is_bf16, HD, lane);
        } else {
            fmhai_bwd_store_kv(dv, p->dv_row, acc_a, p->dropout_scale, key0, s.s_k - j0, p->hdv, is_bf16, HDV, lane);
            fmhai_bwd_store_kv(dk, p->dk_row, acc_b, p->scale, key0, s.s_k - j0, p->d, is_bf16, HD, lane);
        }
    }
    fmhai_copy_wait(0);
#endif
}

/* dq_dk_dv of a row of unequal head dims (HDV < HD, rows such as 192_128):
 * the tiles keep HD-wide rows (V and dO zero past HDV), and the products
 * over V, dO and dV (dP^T, dV) and dV's accumulator and store run over the
 * first HDV columns only. */
FMHAI_DEVICE void fmhai_bwd_dq_dk_dv_hv(const fmhai_bwd_params *p, char *smem, const int is_bf16, const int HD,
                                        const int HDV, const int BM, const int BN, const int NW, const int ST,
                                        const int HAS_MASK, const int SOFTCAP, const int ALIBI, const int DET)
{
    for (int i = 0, u; (u = fmhai_bwd_unit_at(p, i)) >= 0; ++i) {
        fmhai_bwd_unit U;
        if (fmhai_bwd_unit_of(p, u, HAS_MASK, DET, BN, 1 << 30, &U))
            fmhai_bwd_dq_dk_dv_unit(p, smem, is_bf16, HD, HDV, BM, BN, NW, ST, HAS_MASK, SOFTCAP, ALIBI, DET, &U);
    }
}

FMHAI_DEVICE void fmhai_bwd_dq_dk_dv(const fmhai_bwd_params *p, char *smem, const int is_bf16, const int HD,
                                     const int BM, const int BN, const int NW, const int ST,
                                     const int HAS_MASK, const int SOFTCAP, const int ALIBI, const int DET)
{
    fmhai_bwd_dq_dk_dv_hv(p, smem, is_bf16, HD, HD, BM, BN, NW, ST, HAS_MASK, SOFTCAP, ALIBI, DET);
}

#endif /* FMHA_TILE_PIPELINE_BWD_PORTABLE_H */
