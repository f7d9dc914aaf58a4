/*
 * TMA tensor maps for the Hopper pipelines (host side): the contiguous
 * forward and batch prefill's K/V, the backward's Q, dO, K and V.
 *
 * The Hopper pipeline's load warpgroup copies whole K/V tiles with one
 * thread through TMA (tile/tma.h) when the kernel parameters carry a tensor
 * map for each (fmhai_fwd_params.tma_k / tma_v, tma_kv set). They are built
 * here at launch: K and V as 4-D tensors (d, rows, nhead_k, batch) with the
 * caller's strides, one box a 128-byte column block of tile_n rows, the
 * 128-byte swizzle of the GEMM tiles (and O for the epilogue's stores,
 * fmhai_fwd_tma_out). Columns past d read as zeros; rows
 * past the tensor are never asked for (the pipeline copies the partial last
 * key tile of a sequence with cp.async, which zero-fills, and only whole
 * tiles through TMA), so group mode (seqstart_k) uses one map over all
 * sequences. Batch prefill over LINEAR pages: 16-bit pages of 4 KB or
 * more as 5-D maps whose box is a whole page (or the tile's part of one) in
 * the grouped layout the 16-bit paged kernels read; e4m3 pages of 32 tokens
 * or more as (d, page_size, nhead_k, pages), a box a page and column block;
 * smaller pages and VECTORIZED ones are gathered with cp.async.
 * The backward's dq_dk_dv (pipeline/bwd_sm90.h): Q and dO as (d, rows,
 * nhead_q, batch) in boxes of tile_m rows, K and V as (d, rows, nhead_k,
 * batch) in boxes of tile_n rows; again only tiles that end inside their
 * sequence go by TMA (rows past s_q must read as zero, which cp.async
 * gives), so group mode has one map over all sequences; a BIAS row's
 * 16-bit bias in boxes of 64 keys x tile_m rows (fmhai_bwd_tma_bias).
 *
 * The encoder is the driver's cuTensorMapEncodeTiled, found through the
 * runtime (no link against the driver library). When it is missing or
 * refuses the tensor (a stride TMA cannot take), tma_kv stays 0 and the
 * kernel copies with cp.async: same results, a fallback, never an error.
 * FMHA_TILE_TMA=0 in the environment forces that path (for comparisons), as
 * do CUDA toolkits before 12.0 (no tensor maps) and AMD.
 */
#ifndef FMHA_TILE_DISPATCH_TMA_H
#define FMHA_TILE_DISPATCH_TMA_H

#include <stdlib.h>
#include "../platform/platform.h"
#include "../api.h"
#include "../kernel/fwd_params.h"
#include "../kernel/bwd_params.h"

/* tensor maps exist from CUDA 12.0 on; before it every copy is cp.async */
#if defined(FMHA_PLATFORM_NVIDIA) && CUDART_VERSION >= 12000
#include <cuda.h>

typedef CUresult (*fmhai_tma_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                        const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                        const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                        CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The encoder, looked up once (NULL: not available, or FMHA_TILE_TMA=0). */
static inline fmhai_tma_encode_fn fmhai_tma_encoder(void)
{
    static int state = 0;   /* 0 not looked up, 1 found, -1 unavailable */
    static fmhai_tma_encode_fn fn = 0;
    if (state == 0) {
        const char *env = getenv("FMHA_TILE_TMA");
        void *f = 0;
        cudaDriverEntryPointQueryResult q;
        if (!(env && env[0] == '0') &&
#if CUDART_VERSION >= 12050
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) ==
#else
            cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q) ==
#endif
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess && f)
            fn = (fmhai_tma_encode_fn)f;
        else
            (void)cudaGetLastError();
        state = fn ? 1 : -1;
    }
    return fn;
}

/* Whether kernels may use the TMA unit (bulk copies without a map too):
 * the encoder was found and FMHA_TILE_TMA is not 0. */
static inline int fmhai_tma_unit_ok(void) { return fmhai_tma_encoder() != 0; }

/* One operand, 4-D (d, rows, nhead_k, batch): base, strides in elements of
 * eb bytes, boxes of 128 bytes x tile_n rows. 0 when encoded. */
static inline int fmhai_tma_encode_kv(uint64_t *map, const void *base, int eb, int d, int64_t rows,
                                      int nhead_k, int64_t batch, int64_t s_row, int64_t s_head, int64_t s_batch,
                                      int tile_n)
{
    fmhai_tma_encode_fn enc = fmhai_tma_encoder();
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4], one[4] = { 1, 1, 1, 1 };
    if (!enc) return -1;
    dims[0] = (cuuint64_t)d; dims[1] = (cuuint64_t)rows; dims[2] = (cuuint64_t)nhead_k; dims[3] = (cuuint64_t)batch;
    strides[0] = (cuuint64_t)(s_row * eb);
    strides[1] = (cuuint64_t)((nhead_k > 1 ? s_head : s_row) * eb);
    strides[2] = (cuuint64_t)((batch > 1 ? s_batch : s_row) * eb);
    box[0] = (cuuint32_t)(128 / eb); box[1] = (cuuint32_t)tile_n; box[2] = 1; box[3] = 1;
    return enc((CUtensorMap *)map, eb == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16, 4,
               (void *)base, dims, strides, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS ? 0 : -1;
}

/* 16-bit LINEAR pages for the grouped layout (tile/warpgroup_mma.h): 5-D
 * (64 columns, 8 rows, hd / 64 column blocks 128 bytes apart, 8-row groups
 * of the pool, nhead_k), a box of min(page, tile_n) / 8 groups, so each
 * box lands [groups][blocks][8][128 bytes] (one 4 KB box for a 16-token
 * page at hdim 128). The group index runs over the pool's pages (G = page *
 * page_size / 8 + slot / 8), which needs pages laid out back to back
 * (s_page = page_size * s_row) and d = hd (no zero-filled columns); -1
 * otherwise, or when the driver refuses the map. */
static inline int fmhai_tma_encode_kv_grp(uint64_t *map, const void *base, int d, int hd, int page_size,
                                          int nhead_k, int64_t pages, int64_t s_row, int64_t s_head,
                                          int64_t s_page, int tile_n)
{
    fmhai_tma_encode_fn enc = fmhai_tma_encoder();
    cuuint64_t dims[5], strides[4];
    cuuint32_t box[5], one[5] = { 1, 1, 1, 1, 1 };
    const int box_rows = page_size < tile_n ? page_size : tile_n;
    /* the group index is an int32 coordinate; an unknown page count (pages
     * 2^31 - 1) caps there, past any pool that fits in memory */
    int64_t groups = pages * (page_size / 8);
    if (groups > ((int64_t)1 << 31) - 1) groups = ((int64_t)1 << 31) - 1;
    if (!enc || d != hd || hd % 64 || page_size < 8 || s_page != (int64_t)page_size * s_row || groups <= 0)
        return -1;
    dims[0] = 64; dims[1] = 8; dims[2] = (cuuint64_t)(hd / 64); dims[3] = (cuuint64_t)groups;
    dims[4] = (cuuint64_t)nhead_k;
    strides[0] = (cuuint64_t)(s_row * 2);
    strides[1] = 128;
    strides[2] = (cuuint64_t)(8 * s_row * 2);
    strides[3] = (cuuint64_t)((nhead_k > 1 ? s_head : s_row) * 2);
    box[0] = 64; box[1] = 8; box[2] = (cuuint32_t)(hd / 64); box[3] = (cuuint32_t)(box_rows / 8); box[4] = 1;
    return enc((CUtensorMap *)map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 5, (void *)base, dims, strides, box, one,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS ? 0 : -1;
}

/* e4m3 V given K-major (fmha_fwd_args.v_kmajor, batch mode): V^T as 4-D
 * (keys, d, nhead_k, batch), the keys' extent seqlen_k rounded up to 16
 * (fmha_fp8_v_kmajor_keys: the padding is part of the layout), a box of
 * tile_n keys x hd rows: 128 keys with the 128-byte swizzle, or 64 (keys
 * 128..191 of a 192-key tile) with the 64-byte one, the V^T stage's panels
 * (tile/vt8_layout.h: the keys already in its order). 0 when encoded. */
static inline int fmhai_tma_encode_vt(uint64_t *map, const fmha_fwd_args *a, int hd, int tile_n)
{
    fmhai_tma_encode_fn enc = fmhai_tma_encoder();
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4], one[4] = { 1, 1, 1, 1 };
    const int w64 = tile_n == 64;
    if (!enc || a->is_group_mode || hd > 256 || (tile_n != 128 && tile_n != 64)) return -1;
    dims[0] = (cuuint64_t)fmha_fp8_v_kmajor_keys(a->seqlen_k); dims[1] = (cuuint64_t)a->hdim_v;
    dims[2] = (cuuint64_t)a->nhead_k; dims[3] = (cuuint64_t)a->batch;
    strides[0] = (cuuint64_t)a->stride_v;
    strides[1] = (cuuint64_t)(a->nhead_k > 1 ? a->nhead_stride_v : a->stride_v);
    strides[2] = (cuuint64_t)(a->batch > 1 ? a->batch_stride_v : a->stride_v);
    box[0] = (cuuint32_t)tile_n; box[1] = (cuuint32_t)hd; box[2] = 1; box[3] = 1;
    return enc((CUtensorMap *)map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, (void *)a->v, dims, strides, box, one,
               CU_TENSOR_MAP_INTERLEAVE_NONE, w64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS ? 0 : -1;
}

/* The elementwise bias of a Hopper BIAS row (batch mode, 16-bit): 4-D
 * (s_k, s_q, heads, batch) with the caller's strides, a broadcast dimension
 * (stride 0) of extent 1, boxes of 128 bytes x tile_m rows with the
 * 128-byte swizzle. Exact extents, so a tile's rows past s_q and columns
 * past s_k land as zeros. Group mode (rows of every sequence in one
 * tensor, extents not known on the host), fp32 bias and strides TMA cannot
 * take leave tma_bias at 0: the softmax then loads its bias words. */
static inline void fmhai_fwd_tma_bias(const fmha_kernel_info *k, const fmha_fwd_args *a, fmhai_fwd_params *p)
{
    fmhai_tma_encode_fn enc = fmhai_tma_encoder();
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4] = { 64, 0, 1, 1 }, one[4] = { 1, 1, 1, 1 };
    p->tma_bias = 0;
    if (!enc || !k->has_bias || !a->bias || a->is_group_mode || a->bias_dtype == FMHA_DTYPE_FP32 ||
        (uintptr_t)a->bias % 16 || a->stride_bias % 8 || a->nhead_stride_bias % 8 || a->batch_stride_bias % 8 ||
        a->seqlen_q <= 0 || a->seqlen_k <= 0)
        return;
    dims[0] = (cuuint64_t)a->seqlen_k; dims[1] = (cuuint64_t)a->seqlen_q;
    dims[2] = a->nhead_stride_bias ? (cuuint64_t)a->nhead_q : 1;
    dims[3] = a->batch_stride_bias ? (cuuint64_t)a->batch : 1;
    strides[0] = (cuuint64_t)(a->stride_bias * 2);
    strides[1] = (cuuint64_t)((a->nhead_stride_bias ? a->nhead_stride_bias : a->stride_bias) * 2);
    strides[2] = (cuuint64_t)((a->batch_stride_bias ? a->batch_stride_bias : a->stride_bias) * 2);
    if (!strides[0]) return;   /* one row for every query: not a TMA tensor */
    box[1] = (cuuint32_t)k->tile_m;
    if (enc((CUtensorMap *)p->tma_b, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)a->bias, dims, strides, box, one,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS)
        p->tma_bias = 1;
}
/* 128-byte column blocks (TMA boxes) of a row of d elements of eb bytes. */
static inline int fmhai_tma_blocks(int d, int eb) { return (d * eb + 127) / 128; }
/* A kernel's V/O head dim (0 in tables without the field: its hdim). */
static inline int fmhai_kernel_hdv(const fmha_kernel_info *k) { return k->hdim_v ? k->hdim_v : k->hdim; }

/* O for the Hopper epilogue's TMA stores (16-bit O, pipeline/fwd_sm90.h):
 * 4-D (dv, rows, nhead_q, batch) with the caller's strides, a box a warp's
 * 16 rows x 128 bytes with the 128-byte swizzle of its staging. With
 * seqstart_q (group mode, batch prefill) one map over every sequence's
 * rows: the kernel stores by TMA only a warp whose 16 rows lie inside its
 * sequence (the rest, and strides TMA cannot take, with st.global).
 * Hopper rows only: the callers check the row and clear tma_out first. */
static inline void fmhai_fwd_tma_out(fmhai_fwd_params *p, int nhead_q, int batch, int seqlen_q)
{
    const int64_t rows = p->seqstart_q ? ((int64_t)1 << 31) - 1 : seqlen_q;
    const int nb = p->seqstart_q ? 1 : batch;
    if (rows <= 0 || nb <= 0 || nhead_q <= 0 || ((p->o_row | p->o_head | p->o_batch) & 7) || ((uintptr_t)p->o & 15))
        return;
    p->tma_out = fmhai_tma_encode_kv(p->tma_o, p->o, 2, p->dv, rows, nhead_q, nb, p->o_row, p->o_head, p->o_batch,
                                     16) == 0;
}

/* Sets p->tma_kv and the maps for a contiguous forward on a Hopper row. */
static inline void fmhai_fwd_tma_prepare(const fmha_kernel_info *k, const fmha_fwd_args *a, fmhai_fwd_params *p)
{
    const int eb = a->dtype == FMHA_DTYPE_FP8 ? 1 : 2;
    /* group mode: rows up to the last token of any sequence (whole tiles only) */
    const int64_t rows = a->seqstart_k ? ((int64_t)1 << 31) - 1 : a->seqlen_k;
    const int batch = a->seqstart_k ? 1 : a->batch;
    p->tma_kv = 0;
    p->tma_bias = 0;
    p->tma_out = 0;
    if (k->arch != FMHA_ARCH_SM90A || k->family != FMHA_FAMILY_FWD || rows <= 0 || batch <= 0) return;
    fmhai_fwd_tma_out(p, a->nhead_q, a->batch, a->seqlen_q);
    fmhai_fwd_tma_bias(k, a, p);
    /* V narrower than the kernel's by a whole 128-byte column block (hdim_v
     * below hdim_q in a kernel of one head dim): cp.async, whose copies
     * zero-fill those columns, in place of boxes wholly outside V */
    if (fmhai_tma_blocks(p->dv, eb) < fmhai_tma_blocks(fmhai_kernel_hdv(k), eb)) return;
    if (fmhai_tma_encode_kv(p->tma_k, p->k, eb, p->d, rows, a->nhead_k, batch, p->k_row, p->k_head, p->k_batch,
                            k->tile_n))
        return;
    if (p->v_kmajor ? fmhai_tma_encode_vt(p->tma_v, a, k->hdim, k->tile_n > 128 ? 128 : k->tile_n) ||
                          (k->tile_n > 128 && fmhai_tma_encode_vt(p->tma_v2, a, k->hdim, k->tile_n - 128))
                    : fmhai_tma_encode_kv(p->tma_v, p->v, eb, p->dv, rows, a->nhead_k, batch, p->v_row, p->v_head,
                                          p->v_batch, k->tile_n))
        return;
    p->tma_kv = 1;
}

/* Batch prefill on a Hopper row. e4m3 LINEAR pages of >= FMHAI_TMA_MIN_PAGE
 * tokens: K and V as (d, page_size, nhead_k, pages), boxes of
 * min(page_size, tile_n) rows a 128-byte column block. Smaller pages gather
 * faster with cp.async (H100, 16-bit hdim 128 on these maps: page 16 by TMA
 * 432 TFLOPS, 16 boxes of 2 KB a tile, against 459 gathered; page 32 480
 * against 462, page 64 492 against 464; e4m3 page 16, 2 KB boxes, 9%
 * slower than gathered on an H200). 16-bit LINEAR pages whose box (a page
 * of every column block) holds at least FMHAI_TMA_MIN_BOX16 bytes: the
 * grouped maps (fmhai_tma_encode_kv_grp, one box a page for all column
 * blocks); smaller pages and pools the maps cannot describe gather. */
#ifndef FMHAI_TMA_MIN_PAGE
#define FMHAI_TMA_MIN_PAGE 32
#endif
#ifndef FMHAI_TMA_MIN_BOX16
#define FMHAI_TMA_MIN_BOX16 4096   /* bytes of a 16-bit page box: page 16 at hdim 128, 32 at 64 */
#endif
static inline void fmhai_prefill_tma_prepare(const fmha_kernel_info *k, const fmha_batch_prefill_args *a,
                                             fmhai_fwd_params *p)
{
    const int eb = a->kv_dtype == FMHA_DTYPE_FP8 ? 1 : 2;
    const int box = a->page_size < k->tile_n ? a->page_size : k->tile_n;
    const int64_t pages = a->num_total_pages > 0 ? a->num_total_pages : ((int64_t)1 << 31) - 1;
    p->tma_kv = 0;
    p->tma_out = 0;
    if (k->arch != FMHA_ARCH_SM90A || k->family != FMHA_FAMILY_BATCH_PREFILL || a->batch <= 0) return;
    fmhai_fwd_tma_out(p, a->nhead_q, a->batch, 0);
    /* VECTORIZED pages: no map, V^T by bulk copies where the TMA unit may
     * be used (not with FMHA_TILE_TMA=0: every copy cp.async) */
    if (a->kv_layout == FMHA_KV_LAYOUT_VECTORIZED) {
        p->tma_kv = a->kv_dtype != FMHA_DTYPE_FP8 && fmhai_tma_unit_ok();
        return;
    }
    if (a->kv_layout != FMHA_KV_LAYOUT_LINEAR) return;
    if (eb == 2) {   /* the kernel reads the grouped layout (fwd_sm90.h, GRP) */
        if ((int64_t)a->page_size * k->hdim * 2 < FMHAI_TMA_MIN_BOX16 ||
            fmhai_tma_encode_kv_grp(p->tma_k, p->k, p->d, k->hdim, a->page_size, a->nhead_k, pages, p->k_row,
                                    p->k_head, p->k_page, k->tile_n) ||
            fmhai_tma_encode_kv_grp(p->tma_v, p->v, p->dv, k->hdim, a->page_size, a->nhead_k, pages, p->v_row,
                                    p->v_head, p->v_page, k->tile_n))
            return;
        p->tma_kv = 1;
        return;
    }
    if (a->page_size < FMHAI_TMA_MIN_PAGE) return;
    if (fmhai_tma_encode_kv(p->tma_k, p->k, eb, p->d, a->page_size, a->nhead_k, pages, p->k_row, p->k_head,
                            p->k_page, box) ||
        fmhai_tma_encode_kv(p->tma_v, p->v, eb, p->d, a->page_size, a->nhead_k, pages, p->v_row, p->v_head,
                            p->v_page, box))
        return;
    p->tma_kv = 1;
}

/* The bias of a Hopper dq_dk_dv BIAS row (16-bit, 16-byte aligned base
 * and strides): 4-D (keys, rows, heads, batch), a broadcast dimension
 * (stride 0) of extent 1, boxes of 64 keys (128 bytes) x tile_m rows with
 * the 128-byte swizzle. Batch mode: exact extents, so every tile goes by
 * TMA and rows past s_q and keys past s_k land as zeros (what the one-by-one
 * loads give). Group mode: rows of every sequence in one tensor, keys up to
 * the row stride; only tiles inside their sequence go by TMA (the kernel
 * checks). Anything else leaves tma_bias at 0. */
static inline void fmhai_bwd_tma_bias(const fmha_kernel_info *k, const fmha_bwd_args *a, fmhai_bwd90_params *P)
{
    fmhai_tma_encode_fn enc = fmhai_tma_encoder();
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4] = { 64, 0, 1, 1 }, one[4] = { 1, 1, 1, 1 };
    const int group = a->is_group_mode != 0;
    P->tma_bias = 0;
    if (!enc || !k->has_bias || !a->bias || a->bias_dtype == FMHA_DTYPE_FP32 || (uintptr_t)a->bias % 16 ||
        a->stride_bias <= 0 || a->stride_bias % 8 || a->nhead_stride_bias % 8 || a->batch_stride_bias % 8 ||
        (!group && (a->seqlen_q <= 0 || a->seqlen_k <= 0)))
        return;
    dims[0] = group ? (cuuint64_t)a->stride_bias : (cuuint64_t)a->seqlen_k;
    dims[1] = group ? (cuuint64_t)(((int64_t)1 << 31) - 1) : (cuuint64_t)a->seqlen_q;
    dims[2] = a->nhead_stride_bias ? (cuuint64_t)a->nhead_q : 1;
    dims[3] = !group && a->batch_stride_bias ? (cuuint64_t)a->batch : 1;
    strides[0] = (cuuint64_t)(a->stride_bias * 2);
    strides[1] = (cuuint64_t)((a->nhead_stride_bias ? a->nhead_stride_bias : a->stride_bias) * 2);
    strides[2] = (cuuint64_t)((!group && a->batch_stride_bias ? a->batch_stride_bias : a->stride_bias) * 2);
    box[1] = (cuuint32_t)k->tile_m;
    if (enc((CUtensorMap *)P->tma_b, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)a->bias, dims, strides, box, one,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS)
        P->tma_bias = 1;
}

/* Sets P->tma and the four maps for the Hopper dq_dk_dv kernel k (BWD or
 * BWD_DET, sm_90a), from its parameters P->p; any other kernel, or a map
 * the encoder refuses, leaves tma at 0 (cp.async). Group mode: rows up to
 * the last token of any sequence (whole tiles only), one batch entry. */
static inline void fmhai_bwd_tma_prepare(const fmha_kernel_info *k, const fmha_bwd_args *a, fmhai_bwd90_params *P)
{
    const fmhai_bwd_params *p = &P->p;
    const int64_t big = ((int64_t)1 << 31) - 1;
    const int64_t rq = a->is_group_mode ? big : a->seqlen_q, rk = a->is_group_mode ? big : a->seqlen_k;
    const int batch = a->is_group_mode ? 1 : a->batch;
    P->tma = 0;
    P->tma_bias = 0;
    if (k->arch != FMHA_ARCH_SM90A || (k->family != FMHA_FAMILY_BWD && k->family != FMHA_FAMILY_BWD_DET) ||
        a->dtype == FMHA_DTYPE_FP8 || rq <= 0 || rk <= 0 || batch <= 0)
        return;
    fmhai_bwd_tma_bias(k, a, P);   /* its own map: independent of the four below */
    /* hdim_v below hdim_q by a whole 128-byte column block: V and dO by
     * cp.async (zero-filled), as the forward */
    if (fmhai_tma_blocks(p->hdv, 2) < fmhai_tma_blocks(k->hdim, 2)) return;
    if (fmhai_tma_encode_kv(P->tma_q, p->q, 2, p->d, rq, a->nhead_q, batch, p->q_row, p->q_head, p->q_batch,
                            k->tile_m) ||
        fmhai_tma_encode_kv(P->tma_do, p->dout, 2, p->hdv, rq, a->nhead_q, batch, p->do_row, p->do_head,
                            p->do_batch, k->tile_m) ||
        fmhai_tma_encode_kv(P->tma_k, p->k, 2, p->d, rk, a->nhead_k, batch, p->k_row, p->k_head, p->k_batch,
                            k->tile_n) ||
        fmhai_tma_encode_kv(P->tma_v, p->v, 2, p->hdv, rk, a->nhead_k, batch, p->v_row, p->v_head, p->v_batch,
                            k->tile_n))
        return;
    P->tma = 1;
}

#else
static inline int fmhai_tma_unit_ok(void) { return 0; }
static inline void fmhai_bwd_tma_prepare(const fmha_kernel_info *k, const fmha_bwd_args *a, fmhai_bwd90_params *P)
{
    (void)k; (void)a;
    P->tma = 0;
    P->tma_bias = 0;
}
static inline void fmhai_prefill_tma_prepare(const fmha_kernel_info *k, const fmha_batch_prefill_args *a,
                                             fmhai_fwd_params *p)
{
    (void)k; (void)a;
    p->tma_kv = 0;
    p->tma_out = 0;
}
static inline void fmhai_fwd_tma_prepare(const fmha_kernel_info *k, const fmha_fwd_args *a, fmhai_fwd_params *p)
{
    (void)k; (void)a;
    p->tma_kv = 0;
    p->tma_bias = 0;
    p->tma_out = 0;
}
#endif /* FMHA_PLATFORM_NVIDIA */
#endif /* FMHA_TILE_DISPATCH_TMA_H */
