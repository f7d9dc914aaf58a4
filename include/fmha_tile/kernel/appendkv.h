/*
 * Append-KV with rotary embedding: the new K/V rows of a decode step into
 * the cache, the new keys and the queries turned by their positions.
 *
 * One call writes, for every sequence b, the seqlen_knew rows of k_new and
 * v_new to cache positions s_k - seqlen_knew .. s_k - 1, where s_k counts
 * the keys after the append (seqlen_k[b], or the page table's length: the
 * caller has allocated the new rows' pages, as serving engines do), through
 * the same cache description the decode kernels read (contiguous with
 * cache_batch_idx, or LINEAR / VECTORIZED pages of either table). With a
 * rotary_dim, each new key's first rotary_dim elements turn by the angles of
 * its cache position, and (q_rope given) each query row i's by those of
 * position s_k - seqlen_q + i, written to q_rope. One 32-lane group per row
 * (a K row with its V row, or a query row), 8 elements per lane: the lanes
 * load the row (and, half-split, the partner half), then store, so q_rope
 * may be q itself. New rows whose position falls before the cache's start
 * are not written, and a query whose position falls outside the rotary
 * table is copied unturned (the host checks the bounds it knows). The
 * kernel is generic in the head dim and the dtype (fp16 / bf16); one
 * instance serves a translation unit, like the split-KV combine.
 */
#ifndef FMHA_TILE_KERNEL_APPENDKV_H
#define FMHA_TILE_KERNEL_APPENDKV_H

#include "decode.h"
#if !defined(FMHA_PLATFORM_HOST_ONLY)
#  include "../tile/warp_mma.h"           /* fmhai_pack2, fmhai_sync_warp */
#  include "../pipeline/fwd_common.h"     /* fmhai_fwd_seq_of */
#endif

#define FMHAI_APPENDKV_ROWS 4   /* rows (32-lane groups) per block */

#if defined(FMHAI_AUX_KERNELS)
FMHAI_DEVICE float fmhai_u16_to_f32(uint32_t u, int bf16)
{
    return bf16 ? __uint_as_float(u << 16) : __half2float(__ushort_as_half((unsigned short)u));
}

/* 8 elements (16 bytes) at p. */
FMHAI_DEVICE void fmhai_load8(float *x, const char *p, int bf16)
{
    const uint4 v = *(const uint4 *)p;
    const uint32_t w[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        x[2 * e] = fmhai_u16_to_f32(w[e] & 0xffffu, bf16);
        x[2 * e + 1] = fmhai_u16_to_f32(w[e] >> 16, bf16);
    }
}

FMHAI_DEVICE void fmhai_store8(char *p, const float *x, int bf16)
{
    uint4 v;
    v.x = fmhai_pack2(x[0], x[1], bf16);
    v.y = fmhai_pack2(x[2], x[3], bf16);
    v.z = fmhai_pack2(x[4], x[5], bf16);
    v.w = fmhai_pack2(x[6], x[7], bf16);
    *(uint4 *)p = v;
}

/* 8 elements of a K row and of a V row into an e4m3 cache: stored =
 * e4m3(x / descale), the dequantisation the decode kernels apply undone. */
FMHAI_DEVICE void fmhai_store8_e4m3(char *kd, char *vd, const float *k, const float *v, float kds, float vds)
{
    const float ki = kds != 0.f ? 1.f / kds : 0.f, vi = vds != 0.f ? 1.f / vds : 0.f;
    uint32_t kw[2] = { 0u, 0u }, vw[2] = { 0u, 0u };
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        kw[e / 4] |= fmhai_f32_to_e4m3(k[e] * ki) << (8 * (e % 4));
        vw[e / 4] |= fmhai_f32_to_e4m3(v[e] * vi) << (8 * (e % 4));
    }
    *(uint2 *)kd = make_uint2(kw[0], kw[1]);
    *(uint2 *)vd = make_uint2(vw[0], vw[1]);
}

static __global__ void FMHAI_LAUNCH_BOUNDS(FMHAI_APPENDKV_ROWS * 32, 1)
fmhai_appendkv_kernel(const FMHAI_GRID_CONSTANT fmhai_fwd_params p)
{
    const int lane = (int)threadIdx.x % 32, b = (int)blockIdx.y, bf = p.kv_bf16;
    const int64_t r = (int64_t)blockIdx.x * FMHAI_APPENDKV_ROWS + (int)threadIdx.x / 32;
    const int nhk = p.nhead_q / p.head_ratio;
    const int64_t nk = (int64_t)p.seqlen_knew * nhk;
    const int64_t nq = p.q_rope ? (int64_t)p.seqlen_q * p.nhead_q : 0;
    if (r >= nk + nq) return;   /* whole groups leave together */
    fmhai_fwd_seq S;
    if (p.kv_paged) fmhai_fwd_seq_of(&p, b, 1, 1, &S);
    else fmhai_fwd_seq_of(&p, b, 0, 1, &S);
    const int is_k = r < nk;
    const int64_t rr = is_k ? r : r - nk;
    const int nh = is_k ? nhk : p.nhead_q;
    const int i = (int)(rr / nh), h = (int)(rr % nh);
    const int pos = is_k ? S.s_k - p.seqlen_knew + i : S.s_k - p.seqlen_q + i;
    if (is_k && pos < 0) return;   /* a sequence shorter than its new rows: nothing of it is written */
    const int c0 = 8 * lane, on = c0 < p.d;
    const char *src = is_k ? (const char *)p.k_new + 2 * ((int64_t)b * p.kn_batch + (int64_t)i * p.kn_row +
                                                          (int64_t)h * p.kn_head)
                           : (const char *)p.q + 2 * ((int64_t)b * p.q_batch + (int64_t)i * p.q_row +
                                                      (int64_t)h * p.q_head);
    float x[8], y[8];
    const int rd = p.rotary_dim, half = rd / 2;
    const int rot = on && c0 < rd && pos >= 0 && pos < p.rotary_seqlen;   /* else copied as it is */
    if (on) fmhai_load8(x, src + 2 * c0, bf);
    if (rot && !p.rotary_interleaved) fmhai_load8(y, src + 2 * (c0 < half ? c0 + half : c0 - half), bf);
    fmhai_sync_warp();   /* every lane has read the row before q_rope (maybe q) is written */
    if (rot) {
        const float *cs = p.rotary_cos + (int64_t)pos * half, *sn = p.rotary_sin + (int64_t)pos * half;
        float o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int c = c0 + e;
            const int first = p.rotary_interleaved ? (c & 1) == 0 : c < half;
            const int k = p.rotary_interleaved ? c / 2 : (first ? c : c - half);
            const float xp = p.rotary_interleaved ? x[e ^ 1] : y[e];
            o[e] = first ? x[e] * cs[k] - xp * sn[k] : xp * sn[k] + x[e] * cs[k];
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] = o[e];
    }
    if (!on) return;
    if (!is_k) {
        fmhai_store8((char *)p.q_rope + 2 * ((int64_t)b * p.q_batch + (int64_t)i * p.q_row + (int64_t)h * p.q_head +
                                             c0), x, bf);
        return;
    }
    float v[8];
    fmhai_load8(v, (const char *)p.v_new + 2 * ((int64_t)b * p.vn_batch + (int64_t)i * p.vn_row +
                                                (int64_t)h * p.vn_head + c0), bf);
    char *kd, *vd;
    const int eb = p.kv_fp8 ? 1 : 2;   /* cache element bytes */
    if (!p.kv_paged) {
        kd = (char *)p.k + eb * ((int64_t)S.kv_b * p.k_batch + (int64_t)pos * p.k_row + (int64_t)h * p.k_head + c0);
        vd = (char *)p.v + eb * ((int64_t)S.kv_b * p.v_batch + (int64_t)pos * p.v_row + (int64_t)h * p.v_head + c0);
        if (p.kv_fp8)
            fmhai_store8_e4m3(kd, vd, x, v, p.k_descale ? *p.k_descale : 1.f, p.v_descale ? *p.v_descale : 1.f);
    } else {
        /* pos < s_k: its page is one of the sequence's own */
        const int64_t page = S.pages[pos >> p.page_log2];
        const int in = pos & ((1 << p.page_log2) - 1);
        kd = (char *)p.k + eb * (page * p.k_page + (int64_t)h * p.k_head);
        vd = (char *)p.v + eb * (page * p.v_page + (int64_t)h * p.v_head);
        if (p.kv_fp8) {   /* LINEAR pages (e4m3 caches have no VECTORIZED kernels) */
            const int64_t at = page * p.ds_page + (int64_t)h * p.ds_head;
            const float kds = p.k_page_descale ? p.k_page_descale[at] : p.k_descale ? *p.k_descale : 1.f;
            const float vds = p.v_page_descale ? p.v_page_descale[at] : p.v_descale ? *p.v_descale : 1.f;
            fmhai_store8_e4m3(kd + (int64_t)in * p.k_row + c0, vd + (int64_t)in * p.v_row + c0, x, v, kds, vds);
            return;
        }
        if (p.kv_vec) {
            /* K [d/8][page][8]: the token's chunk c0/8; V [page/8][d][8]:
             * element c of the token at group in/8, row c, slot in%8 */
            kd += 2 * ((int64_t)(c0 / 8) * (8 << p.page_log2) + 8 * in);
            vd += 2 * ((int64_t)(in / 8) * 8 * p.d + in % 8);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const uint32_t u = fmhai_pack2(v[e], 0.f, bf);
                *(uint16_t *)(vd + 2 * 8 * (c0 + e)) = (uint16_t)(u & 0xffffu);
            }
            fmhai_store8(kd, x, bf);
            return;
        }
        kd += 2 * ((int64_t)in * p.k_row + c0);
        vd += 2 * ((int64_t)in * p.v_row + c0);
    }
    if (p.kv_fp8) return;
    fmhai_store8(kd, x, bf);
    fmhai_store8(vd, v, bf);
}
#endif

/* Launch the append / rotary step of a validated call (nothing to do:
 * FMHA_OK, nothing launched). */
static inline fmha_status fmhai_appendkv_launch(const fmha_decode_args *a, const fmhai_fwd_params *p, void *stream)
{
    const int64_t rows = (int64_t)a->seqlen_knew * a->nhead_k + (p->q_rope ? (int64_t)a->seqlen_q * a->nhead_q : 0);
    if (!fmhai_appendkv_needed(a) || rows == 0) return FMHA_OK;
#if !defined(FMHAI_AUX_KERNELS)
    (void)stream;
    return fmhai_fail(FMHA_ERR_LAUNCH, "built without the helper kernels (no device compiler, or FMHA_TILE_SETS_ONLY)");
#else
    {
        void *kargs[1];
        hipError_t err;
        kargs[0] = (void *)p;
        err = hipLaunchKernel((const void *)fmhai_appendkv_kernel,
                              dim3((unsigned)((rows + FMHAI_APPENDKV_ROWS - 1) / FMHAI_APPENDKV_ROWS), (unsigned)a->batch),
                              dim3(FMHAI_APPENDKV_ROWS * 32), kargs, 0, (hipStream_t)stream);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_LAUNCH, "fmha_appendkv: launch failed: %s", hipGetErrorString(err));
        return FMHA_OK;
    }
#endif
}

#endif /* FMHA_TILE_KERNEL_APPENDKV_H */
