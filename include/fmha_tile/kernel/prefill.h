/*
 * Batch prefill over a paged KV cache, host side: validation, kernel
 * parameters and the optional page-table check.
 *
 * The kernels are the forward pipeline with a paged K/V source (see
 * pipeline/fwd_portable.h, fmhai_block_load_kv): queries in group mode, each
 * sequence's keys gathered page by page through its page table. This file
 * decides whether a call is well formed, and whether the pool needs 64-bit
 * page offsets (more than 4 GB of addressable pool).
 */
#ifndef FMHA_TILE_KERNEL_PREFILL_H
#define FMHA_TILE_KERNEL_PREFILL_H

#include <stdlib.h>
#include "fwd.h"

static inline int fmhai_log2_exact(int v)
{
    int l = 0;
    if (v <= 0 || (v & (v - 1)) != 0) return -1;
    while ((1 << l) < v) ++l;
    return l;
}

/* Largest byte offset + 1 the kernels can form in a pool. */
static inline uint64_t fmhai_pool_bytes(int pages, int page_size, int nhead_k, int d,
                                        int64_t page_stride, int64_t token_stride, int64_t head_stride,
                                        int esize)
{
    uint64_t last = (uint64_t)(pages > 0 ? pages - 1 : 0) * (uint64_t)page_stride +
                    (uint64_t)(page_size - 1) * (uint64_t)token_stride +
                    (uint64_t)(nhead_k - 1) * (uint64_t)head_stride + (uint64_t)d;
    return last * (uint64_t)esize;
}

/* The dtypes of a paged-cache family's call (batch prefill, decode). */
typedef struct fmhai_kv_dtypes {
    fmha_dtype q_dtype, kv_dtype;
    fmha_kv_layout kv_layout;
    int hdim;
    fmha_kv_scale kv_scale;
    const float *q_descale, *k_descale, *v_descale, *k_page_descale, *v_page_descale;
    int64_t descale_page_stride, descale_nhead_stride;
} fmhai_kv_dtypes;

/* The dtype combinations served: fp16/bf16 with Q and KV alike, or e4m3 KV
 * with bf16 or e4m3 queries (bf16 output), and their descales. */
static inline fmha_status fmhai_validate_kv_dtypes(const char *fam, const fmhai_kv_dtypes *a)
{
    const int kv8 = a->kv_dtype == FMHA_DTYPE_FP8, q8 = a->q_dtype == FMHA_DTYPE_FP8;
    if (a->q_dtype != FMHA_DTYPE_FP16 && a->q_dtype != FMHA_DTYPE_BF16 && !q8)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: q dtype %d not supported", fam, (int)a->q_dtype);
    if (a->kv_dtype != FMHA_DTYPE_FP16 && a->kv_dtype != FMHA_DTYPE_BF16 && !kv8)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: KV dtype %d not supported", fam, (int)a->kv_dtype);
    if (!kv8 && a->kv_dtype != a->q_dtype)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED,
                          "%s: fp16/bf16 KV needs queries of the same dtype (fp8 queries need fp8 KV)", fam);
    if (kv8 && a->q_dtype == FMHA_DTYPE_FP16)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: fp8 KV takes bf16 or fp8 queries (got fp16)", fam);
    if (!q8 && a->q_descale)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: q_descale needs fp8 queries", fam);
    if (!kv8)
        return a->kv_scale != FMHA_KV_SCALE_NONE || a->k_descale || a->v_descale || a->k_page_descale ||
                       a->v_page_descale
                   ? fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: KV descales need fp8 KV", fam)
                   : FMHA_OK;
    if (a->kv_layout == FMHA_KV_LAYOUT_VECTORIZED)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: fp8 KV is served for the LINEAR layout only", fam);
    if (a->hdim % 16 != 0)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: fp8 KV needs a head dim divisible by 16 (got %d)", fam,
                          a->hdim);
    if (a->kv_scale == FMHA_KV_SCALE_PER_TENSOR) {
        if (!a->k_descale || !a->v_descale)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: per-tensor scaling needs k_descale and v_descale", fam);
    } else if (a->kv_scale == FMHA_KV_SCALE_PER_PAGE) {
        if (!a->k_page_descale || !a->v_page_descale)
            return fmhai_fail(FMHA_ERR_INVALID_ARG,
                              "%s: per-page scaling needs k_page_descale and v_page_descale", fam);
        if (a->descale_page_stride < 0 || a->descale_nhead_stride < 0)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: descale strides must be >= 0", fam);
    } else if (a->kv_scale != FMHA_KV_SCALE_NONE) {
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: unknown kv_scale %d", fam, (int)a->kv_scale);
    }
    if ((a->kv_scale != FMHA_KV_SCALE_PER_TENSOR && (a->k_descale || a->v_descale)) ||
        (a->kv_scale != FMHA_KV_SCALE_PER_PAGE && (a->k_page_descale || a->v_page_descale)))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: descale pointers given that kv_scale %d does not use",
                          fam, (int)a->kv_scale);
    return FMHA_OK;
}

/* The paged cache's page size, layout and table (both paged families). */
static inline fmha_status fmhai_validate_pages(const char *fam, int page_size, int num_total_pages,
                                               fmha_kv_layout layout, int hdim, fmha_page_table table,
                                               const int32_t *kv_indptr, const int32_t *kv_page_indices,
                                               const int32_t *kv_last_page_lens, const int32_t *block_table,
                                               const int32_t *seqlen_k, int64_t block_table_stride, int check_table)
{
    if (fmhai_log2_exact(page_size) < 0 || page_size > 2048)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: page size %d is not a power of two in 1..2048",
                          fam, page_size);
    if (num_total_pages < 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: num_total_pages must be >= 0", fam);
    if (layout == FMHA_KV_LAYOUT_VECTORIZED && (hdim % 8 != 0 || page_size % 8 != 0))
        return fmhai_fail(FMHA_ERR_INVALID_ARG,
                          "%s: VECTORIZED layout needs head dim and page size divisible by x = 8 "
                          "(got %d, %d)", fam, hdim, page_size);
    if (layout != FMHA_KV_LAYOUT_LINEAR && layout != FMHA_KV_LAYOUT_VECTORIZED)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: unknown kv_layout %d", fam, (int)layout);
    if (!check_table) return FMHA_OK;
    if (table == FMHA_PAGE_TABLE_SGLANG_1D) {
        if (!kv_indptr || !kv_page_indices || !kv_last_page_lens)
            return fmhai_fail(FMHA_ERR_INVALID_ARG,
                              "%s: SGLANG_1D needs kv_indptr, kv_page_indices and kv_last_page_lens", fam);
    } else if (table == FMHA_PAGE_TABLE_VLLM_2D) {
        if (!block_table || !seqlen_k || block_table_stride < 0)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: VLLM_2D needs block_table, its row stride and seqlen_k",
                              fam);
    } else {
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: unknown page_table %d", fam, (int)table);
    }
    return FMHA_OK;
}

static inline fmha_status fmhai_prefill_validate_dtypes(const fmha_batch_prefill_args *a)
{
    fmhai_kv_dtypes t;
    t.q_dtype = a->q_dtype; t.kv_dtype = a->kv_dtype; t.kv_layout = a->kv_layout; t.hdim = a->hdim_q;
    t.kv_scale = a->kv_scale; t.q_descale = a->q_descale; t.k_descale = a->k_descale;
    t.v_descale = a->v_descale; t.k_page_descale = a->k_page_descale; t.v_page_descale = a->v_page_descale;
    t.descale_page_stride = a->descale_page_stride; t.descale_nhead_stride = a->descale_nhead_stride;
    return fmhai_validate_kv_dtypes("batch_prefill", &t);
}

static inline fmha_status fmhai_prefill_validate(const fmha_batch_prefill_args *a)
{
    const char *fam = "batch_prefill";
    fmha_status st;
    if (!a) return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: args is NULL", fam);
    st = fmhai_validate_common(fam, a->batch, a->nhead_q, a->nhead_k, a->hdim_q, a->hdim_v, a->scale,
                               a->logits_soft_cap, a->mask_type, a->window_left, a->window_right);
    if (st != FMHA_OK) return st;
    if (a->max_seqlen_q < 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: max_seqlen_q must be >= 0 (got %d)", fam, a->max_seqlen_q);
    st = fmhai_prefill_validate_dtypes(a);
    if (st != FMHA_OK) return st;
    st = fmhai_validate_pages(fam, a->page_size, a->num_total_pages, a->kv_layout, a->hdim_q, a->page_table,
                              a->kv_indptr, a->kv_page_indices, a->kv_last_page_lens, a->block_table,
                              a->seqlen_k, a->block_table_stride, 0);
    if (st != FMHA_OK) return st;
    if (a->batch == 0) return FMHA_OK;
    if (!a->q || !a->o || !a->k_pool || !a->v_pool || !a->seqstart_q)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: q, o, k_pool, v_pool and seqstart_q must not be NULL", fam);
    st = fmhai_validate_pages(fam, a->page_size, a->num_total_pages, a->kv_layout, a->hdim_q, a->page_table,
                              a->kv_indptr, a->kv_page_indices, a->kv_last_page_lens, a->block_table,
                              a->seqlen_k, a->block_table_stride, 1);
    if (st != FMHA_OK) return st;
    if (fmhai_misaligned(a->q) || fmhai_misaligned(a->o) || fmhai_misaligned(a->k_pool) ||
        fmhai_misaligned(a->v_pool))
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: q, o, k_pool, v_pool must be 16-byte aligned", fam);
    {
        const int64_t s[10] = { a->stride_q, a->nhead_stride_q, a->stride_o, a->nhead_stride_o,
                                a->page_stride_k, a->token_stride_k, a->nhead_stride_k,
                                a->page_stride_v, a->token_stride_v, a->nhead_stride_v };
        /* 16-byte rows: 8 elements of 16 bits, 16 of fp8 */
        const int q8 = a->q_dtype == FMHA_DTYPE_FP8, kv8 = a->kv_dtype == FMHA_DTYPE_FP8;
        st = fmhai_validate_strides(fam, s, 2, q8 ? 16 : 8);
        if (st == FMHA_OK) st = fmhai_validate_strides(fam, s + 2, 2, 8);
        if (st == FMHA_OK) st = fmhai_validate_strides(fam, s + 4, 6, kv8 ? 16 : 8);
        if (st != FMHA_OK) return st;
    }
    if (a->page_stride_k < 0 || a->token_stride_k < 0 || a->nhead_stride_k < 0 ||
        a->page_stride_v < 0 || a->token_stride_v < 0 || a->nhead_stride_v < 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: KV strides must be >= 0", fam);
    if (a->sinks && ((uintptr_t)a->sinks & 3u))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: sinks must be 4-byte aligned", fam);
    return FMHA_OK;
}

/* Does a paged pool need 64-bit page offsets? The 32-bit offset is safe
 * while every page of both pools (the params' page, token and head strides)
 * starts below 4 GB; num_total_pages unknown (0): stay on the 64-bit path. */
static inline int fmhai_pool_off64(const fmhai_fwd_params *p, int num_total_pages, int page_size, int nhead_k,
                                   int esize)
{
    const uint64_t four_gb = (uint64_t)1 << 32;
    return num_total_pages == 0 ||
           fmhai_pool_bytes(num_total_pages, page_size, nhead_k, p->d, p->k_page, p->k_row, p->k_head, esize) >=
               four_gb ||
           fmhai_pool_bytes(num_total_pages, page_size, nhead_k, p->d, p->v_page, p->v_row, p->v_head, esize) >=
               four_gb;
}

static inline void fmhai_prefill_make_params(const fmha_batch_prefill_args *a, int tile_m,
                                             fmhai_fwd_params *p)
{
    const int esize = a->kv_dtype == FMHA_DTYPE_FP8 ? 1 : 2;
    memset(p, 0, sizeof(*p));
    p->q = a->q; p->k = a->k_pool; p->v = a->v_pool; p->o = a->o; p->lse = a->lse;
    p->d = a->hdim_q;
    p->dv = a->hdim_v;
    p->sinks = a->sinks;
    p->seqstart_q = a->seqstart_q;
    p->q_row = a->stride_q; p->q_head = a->nhead_stride_q;
    p->k_row = a->token_stride_k; p->k_head = a->nhead_stride_k; p->k_page = a->page_stride_k;
    p->v_row = a->token_stride_v; p->v_head = a->nhead_stride_v; p->v_page = a->page_stride_v;
    p->o_row = a->stride_o; p->o_head = a->nhead_stride_o;
    p->lse_head = a->nhead_stride_lse;
    p->kv_indptr = a->kv_indptr; p->kv_page_indices = a->kv_page_indices;
    p->kv_last_page_lens = a->kv_last_page_lens;
    p->block_table = a->block_table; p->seqlen_k_ptr = a->seqlen_k;
    p->block_table_stride = a->block_table_stride;
    p->page_table = (int)a->page_table;
    p->page_log2 = fmhai_log2_exact(a->page_size);
    p->kv_off64 = fmhai_pool_off64(p, a->num_total_pages, a->page_size, a->nhead_k, esize);
    p->q_fp8 = a->q_dtype == FMHA_DTYPE_FP8;
    p->q_descale = a->q_descale;
    p->k_descale = a->k_descale;
    p->v_descale = a->v_descale;
    p->k_page_descale = a->k_page_descale;
    p->v_page_descale = a->v_page_descale;
    p->ds_page = a->descale_page_stride;
    p->ds_head = a->descale_nhead_stride;
    p->nhead_q = a->nhead_q; p->head_ratio = a->nhead_q / a->nhead_k;
    p->m_blocks = (a->max_seqlen_q + tile_m - 1) / tile_m;
    fmhai_params_mask_scale(p, a->mask_type, a->window_left, a->window_right, a->scale, a->logits_soft_cap);
}

/* ---- optional page-table validation (copies the tables, synchronises) ---- */
#if !defined(FMHA_PLATFORM_HOST_ONLY)
static inline int fmhai_copy_i32(int32_t *dst, const int32_t *src, size_t n, void *stream)
{
    if (n == 0) return 1;
    return hipMemcpyAsync(dst, src, n * sizeof(int32_t), hipMemcpyDeviceToHost, (hipStream_t)stream) == hipSuccess;
}
#endif

FMHA_API fmha_status fmha_batch_prefill_check_pages(const fmha_batch_prefill_args *a, void *stream)
{
    const char *fam = "batch_prefill_check_pages";
    fmha_status st = fmhai_prefill_validate(a);
    if (st != FMHA_OK || a->batch == 0) return st;
#if defined(FMHA_PLATFORM_HOST_ONLY)
    (void)stream; (void)fam;
    return fmhai_fail(FMHA_ERR_UNSUPPORTED, "page checks need a device runtime");
#else
    {
        const int B = a->batch, ps = a->page_size;
        const int sglang = a->page_table == FMHA_PAGE_TABLE_SGLANG_1D;
        int32_t *meta = (int32_t *)malloc(sizeof(int32_t) * (size_t)(2 * B + 1));
        int32_t *idx = 0;
        size_t nidx = 0;
        int b, bad = -1;
        long long bad_val = 0;
        const char *what = "";
        if (!meta) return fmhai_fail(FMHA_ERR_DEVICE, "%s: out of host memory", fam);
        /* 1. lengths: kv_indptr + last-page lengths, or seqlen_k */
        if (!(sglang ? fmhai_copy_i32(meta, a->kv_indptr, (size_t)B + 1, stream) &&
                           fmhai_copy_i32(meta + B + 1, a->kv_last_page_lens, (size_t)B, stream)
                     : fmhai_copy_i32(meta, a->seqlen_k, (size_t)B, stream)) ||
            hipStreamSynchronize((hipStream_t)stream) != hipSuccess) {
            free(meta);
            return fmhai_fail(FMHA_ERR_DEVICE, "%s: cannot read the page table", fam);
        }
        /* 2. every sequence's range of table entries lies inside the table */
        for (b = 0; b < B && bad < 0; ++b) {
            if (sglang) {
                const int count = meta[b + 1] - meta[b];
                if (meta[b] < 0) { bad = b; bad_val = meta[b]; what = "kv_indptr < 0"; }
                else if (count < 0) { bad = b; bad_val = count; what = "kv_indptr decreases"; }
                else if (count > 0 && (meta[B + 1 + b] < 1 || meta[B + 1 + b] > ps)) {
                    bad = b; bad_val = meta[B + 1 + b]; what = "kv_last_page_lens outside 1..page_size";
                }
            } else {
                const int count = meta[b] < 0 ? 0 : (int)(((int64_t)meta[b] + ps - 1) / ps);
                if (meta[b] < 0) { bad = b; bad_val = meta[b]; what = "seqlen_k < 0"; }
                else if (count > a->block_table_stride) {
                    bad = b; bad_val = count; what = "more pages than a block_table row holds";
                }
            }
        }
        if (bad < 0) {
            nidx = sglang ? (size_t)meta[B] : (size_t)B * (size_t)a->block_table_stride;
            if (nidx > 0) {
                idx = (int32_t *)malloc(sizeof(int32_t) * nidx);
                if (!idx || !fmhai_copy_i32(idx, sglang ? a->kv_page_indices : a->block_table, nidx, stream) ||
                    hipStreamSynchronize((hipStream_t)stream) != hipSuccess) {
                    free(meta); free(idx);
                    return fmhai_fail(FMHA_ERR_DEVICE, "%s: cannot read the page indices", fam);
                }
            }
        }
        /* 3. every page a sequence uses exists */
        for (b = 0; b < B && bad < 0; ++b) {
            const int64_t first = sglang ? meta[b] : (int64_t)b * a->block_table_stride;
            const int count = sglang ? meta[b + 1] - meta[b] : (int)(((int64_t)meta[b] + ps - 1) / ps);
            int j;
            for (j = 0; j < count; ++j) {
                const int32_t pg = idx[first + j];
                if (pg < 0 || pg >= a->num_total_pages) {
                    bad = b; bad_val = pg; what = "page index outside 0..num_total_pages-1"; break;
                }
            }
        }
        free(meta);
        free(idx);
        if (bad >= 0)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: sequence %d: %s (%lld)", fam, bad, what, bad_val);
        return FMHA_OK;
    }
#endif
}

#endif /* FMHA_TILE_KERNEL_PREFILL_H */
