/*
 * Decode family, host side: argument validation and kernel parameters.
 *
 * The kernels are the portable forward pipeline built for decode (DEC,
 * pipeline/fwd_portable.h): a block owns one KV head of one sequence, its
 * tile rows are the (query, query head) pairs of that KV head's group, and
 * with split-KV a block takes one share of the key tiles and writes a
 * partial O and LSE (fp32) to the caller's workspace; the combine kernel
 * (kernel/combine.h) merges the shares. K/V come from a contiguous cache
 * (per-sequence key counts, optional cache_batch_idx) or from the pages of
 * batch prefill's caches (kernel/prefill.h validates their tables); the
 * optional append-KV / rotary step (kernel/appendkv.h) runs first. This
 * file decides whether a call is well formed and fills the parameter
 * block; dispatch/decode_dispatch.h plans and launches. Pure C.
 */
#ifndef FMHA_TILE_KERNEL_DECODE_H
#define FMHA_TILE_KERNEL_DECODE_H

#include "prefill.h"
#include "../dispatch/splitkv.h"

/* The append-KV half of the checks fmhai_decode_validate runs. */
static inline fmha_status fmhai_appendkv_validate(const fmha_decode_args *a)
{
    const char *fam = "decode";
    if (a->seqlen_knew < 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: seqlen_knew must be >= 0 (got %d)", fam, a->seqlen_knew);
    if (!a->is_paged && a->cache_seqlen_max > 0 && a->max_seqlen_k > a->cache_seqlen_max)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: max_seqlen_k %d exceeds the cache's %d tokens per entry", fam,
                          a->max_seqlen_k, a->cache_seqlen_max);
    if (a->rotary_dim < 0 || a->rotary_dim % 16 != 0 || a->rotary_dim > a->hdim_q)
        return fmhai_fail(FMHA_ERR_INVALID_ARG,
                          "%s: rotary_dim %d must be a multiple of 16 in 0..hdim (%d)", fam, a->rotary_dim,
                          a->hdim_q);
    if ((a->seqlen_knew > 0 || a->rotary_dim > 0) && a->q_dtype == FMHA_DTYPE_FP8)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED,
                          "%s: append-KV and rotary take fp16/bf16 queries (the new rows come in their dtype)", fam);
    if (a->seqlen_knew > 0) {
        if (a->seqlen_knew > a->max_seqlen_k)
            return fmhai_fail(FMHA_ERR_INVALID_ARG,
                              "%s: the cache is too small for the append: seqlen_knew %d > max_seqlen_k %d (the "
                              "key count after the append)", fam, a->seqlen_knew, a->max_seqlen_k);
        if (a->batch > 0 && (!a->k_new || !a->v_new))
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: seqlen_knew > 0 needs k_new and v_new", fam);
        if (fmhai_misaligned(a->k_new) || fmhai_misaligned(a->v_new))
            return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: k_new and v_new must be 16-byte aligned", fam);
        {
            const int64_t s[6] = { a->stride_knew, a->nhead_stride_knew, a->batch_stride_knew,
                                   a->stride_vnew, a->nhead_stride_vnew, a->batch_stride_vnew };
            const fmha_status st = fmhai_validate_strides(fam, s, 6, 8);
            if (st != FMHA_OK) return st;
        }
    }
    if (a->rotary_dim > 0) {
        if (!a->rotary_cos || !a->rotary_sin || (((uintptr_t)a->rotary_cos | (uintptr_t)a->rotary_sin) & 3u))
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: rotary needs 4-byte aligned rotary_cos and rotary_sin", fam);
        if (a->rotary_seqlen < a->max_seqlen_k)
            return fmhai_fail(FMHA_ERR_INVALID_ARG,
                              "%s: the rotary tables have %d positions, max_seqlen_k needs %d", fam,
                              a->rotary_seqlen, a->max_seqlen_k);
        if (fmhai_misaligned(a->q_rope))
            return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: q_rope must be 16-byte aligned", fam);
    }
    return FMHA_OK;
}

/* The append-KV part of a call's parameter block. */
static inline void fmhai_appendkv_make_params(const fmha_decode_args *a, fmhai_fwd_params *p)
{
    p->k_new = a->k_new; p->v_new = a->v_new;
    p->kn_row = a->stride_knew; p->kn_head = a->nhead_stride_knew; p->kn_batch = a->batch_stride_knew;
    p->vn_row = a->stride_vnew; p->vn_head = a->nhead_stride_vnew; p->vn_batch = a->batch_stride_vnew;
    p->seqlen_knew = a->seqlen_knew;
    p->kv_paged = a->is_paged;
    p->kv_vec = a->is_paged && a->kv_layout == FMHA_KV_LAYOUT_VECTORIZED;
    /* the new rows come in the queries' dtype when the cache is e4m3 */
    p->kv_bf16 = (a->kv_dtype == FMHA_DTYPE_FP8 ? a->q_dtype : a->kv_dtype) == FMHA_DTYPE_BF16;
    p->kv_fp8 = a->kv_dtype == FMHA_DTYPE_FP8;
    p->rotary_dim = a->rotary_dim;
    p->rotary_interleaved = a->rotary_interleaved;
    p->rotary_seqlen = a->rotary_seqlen;
    p->rotary_cos = a->rotary_cos; p->rotary_sin = a->rotary_sin;
    p->q_rope = a->rotary_dim > 0 ? a->q_rope : 0;
}

/* Does the call append or rotate anything? */
static inline int fmhai_appendkv_needed(const fmha_decode_args *a)
{
    return a->batch > 0 && ((a->seqlen_knew > 0) || (a->rotary_dim > 0 && a->q_rope));
}

static inline fmha_status fmhai_decode_validate(const fmha_decode_args *a, int attention)
{
    const char *fam = "decode";
    fmha_status st;
    fmhai_kv_dtypes t;
    if (!a) return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: args is NULL", fam);
    st = fmhai_validate_common(fam, a->batch, a->nhead_q, a->nhead_k, a->hdim_q, a->hdim_v, a->scale,
                               a->logits_soft_cap, a->mask_type, a->window_left, a->window_right);
    if (st != FMHA_OK) return st;
    if (a->seqlen_q < 1)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: seqlen_q must be >= 1 (got %d)", fam, a->seqlen_q);
    if (a->max_seqlen_k < 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: max_seqlen_k must be >= 0 (got %d)", fam, a->max_seqlen_k);
    if (a->num_splits < 0 || a->num_splits > FMHA_SPLITKV_MAX_SPLITS)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: num_splits %d outside 0..%d (0: the heuristic)", fam,
                          a->num_splits, FMHA_SPLITKV_MAX_SPLITS);
    t.q_dtype = a->q_dtype; t.kv_dtype = a->kv_dtype; t.hdim = a->hdim_q;
    t.kv_layout = a->is_paged ? a->kv_layout : FMHA_KV_LAYOUT_LINEAR;
    t.kv_scale = a->kv_scale; t.q_descale = a->q_descale; t.k_descale = a->k_descale;
    t.v_descale = a->v_descale; t.k_page_descale = a->k_page_descale; t.v_page_descale = a->v_page_descale;
    t.descale_page_stride = a->descale_page_stride; t.descale_nhead_stride = a->descale_nhead_stride;
    st = fmhai_validate_kv_dtypes(fam, &t);
    if (st != FMHA_OK) return st;
    st = fmhai_appendkv_validate(a);
    if (st != FMHA_OK) return st;
    if (!a->is_paged && a->kv_scale == FMHA_KV_SCALE_PER_PAGE)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: per-page descales need a paged cache", fam);
    if (a->is_paged) {
        st = fmhai_validate_pages(fam, a->page_size, a->num_total_pages, a->kv_layout, a->hdim_q, a->page_table,
                                  a->kv_indptr, a->kv_page_indices, a->kv_last_page_lens, a->block_table,
                                  a->seqlen_k, a->block_table_stride, a->batch > 0);
        if (st != FMHA_OK) return st;
    }
    if (a->batch == 0) return FMHA_OK;
    if (!a->q || (attention && !a->o) || !a->k_cache || !a->v_cache)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: q, o, k_cache and v_cache must not be NULL", fam);
    if (!a->is_paged && !a->seqlen_k)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: a contiguous cache needs seqlen_k (keys per sequence)", fam);
    if (fmhai_misaligned(a->q) || (attention && fmhai_misaligned(a->o)) || fmhai_misaligned(a->k_cache) ||
        fmhai_misaligned(a->v_cache))
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: q, o, k_cache and v_cache must be 16-byte aligned", fam);
    {
        const int q8 = a->q_dtype == FMHA_DTYPE_FP8, kv8 = a->kv_dtype == FMHA_DTYPE_FP8;
        const int64_t s[14] = { a->stride_q, a->nhead_stride_q, a->batch_stride_q,
                                a->stride_o, a->nhead_stride_o, a->batch_stride_o,
                                a->stride_k, a->nhead_stride_k, a->is_paged ? a->page_stride_k : a->batch_stride_k,
                                a->stride_v, a->nhead_stride_v, a->is_paged ? a->page_stride_v : a->batch_stride_v,
                                0, 0 };
        /* 16-byte rows: 8 elements of 16 bits, 16 of fp8 (O is 16-bit) */
        st = fmhai_validate_strides(fam, s, 3, q8 ? 16 : 8);
        if (st == FMHA_OK) st = fmhai_validate_strides(fam, s + 3, 3, 8);
        if (st == FMHA_OK) st = fmhai_validate_strides(fam, s + 6, 6, kv8 ? 16 : 8);
        if (st != FMHA_OK) return st;
        if (s[6] < 0 || s[7] < 0 || s[8] < 0 || s[9] < 0 || s[10] < 0 || s[11] < 0)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: KV strides must be >= 0", fam);
    }
    if (a->alibi_slopes && ((uintptr_t)a->alibi_slopes & 3u))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: alibi_slopes must be 4-byte aligned", fam);
    if (a->sinks && ((uintptr_t)a->sinks & 3u))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: sinks must be 4-byte aligned", fam);
    return FMHA_OK;
}

/* Query rows x query heads of the call: the rows of the split workspace. */
static inline int64_t fmhai_decode_rows(const fmha_decode_args *a)
{
    return (int64_t)a->batch * a->nhead_q * a->seqlen_q;
}

/* The parameter block of a validated call for a kernel of tile_m rows, with
 * `splits` splits (> 1: the workspace holds the partials). */
static inline void fmhai_decode_make_params(const fmha_decode_args *a, int tile_m, int splits, fmhai_fwd_params *p)
{
    const int esize = a->kv_dtype == FMHA_DTYPE_FP8 ? 1 : 2;
    const int ratio = a->nhead_q / a->nhead_k;
    memset(p, 0, sizeof(*p));
    p->q = a->q; p->k = a->k_cache; p->v = a->v_cache; p->o = a->o; p->lse = a->lse;
    p->d = a->hdim_q;
    p->dv = a->hdim_v;
    p->alibi_slopes = a->alibi_slopes; p->alibi_batch = a->alibi_batch_stride;
    p->sinks = a->sinks;
    p->q_row = a->stride_q; p->q_head = a->nhead_stride_q; p->q_batch = a->batch_stride_q;
    p->o_row = a->stride_o; p->o_head = a->nhead_stride_o; p->o_batch = a->batch_stride_o;
    p->lse_head = a->nhead_stride_lse; p->lse_batch = a->batch_stride_lse;
    p->k_row = a->stride_k; p->k_head = a->nhead_stride_k;
    p->v_row = a->stride_v; p->v_head = a->nhead_stride_v;
    p->seqlen_q = a->seqlen_q;
    p->seqlen_k_ptr = a->seqlen_k;
    if (a->is_paged) {
        p->k_page = a->page_stride_k; p->v_page = a->page_stride_v;
        p->kv_indptr = a->kv_indptr; p->kv_page_indices = a->kv_page_indices;
        p->kv_last_page_lens = a->kv_last_page_lens;
        p->block_table = a->block_table; p->block_table_stride = a->block_table_stride;
        p->page_table = (int)a->page_table;
        p->page_log2 = fmhai_log2_exact(a->page_size);
        p->kv_off64 = fmhai_pool_off64(p, a->num_total_pages, a->page_size, a->nhead_k, esize);
    } else {
        p->k_batch = a->batch_stride_k; p->v_batch = a->batch_stride_v;
        p->cache_batch_idx = a->cache_batch_idx;
    }
    p->q_fp8 = a->q_dtype == FMHA_DTYPE_FP8;
    p->q_descale = a->q_descale; p->k_descale = a->k_descale; p->v_descale = a->v_descale;
    p->k_page_descale = a->k_page_descale; p->v_page_descale = a->v_page_descale;
    p->ds_page = a->descale_page_stride; p->ds_head = a->descale_nhead_stride;
    p->nhead_q = a->nhead_q; p->head_ratio = ratio;
    p->m_blocks = (a->seqlen_q * ratio + tile_m - 1) / tile_m;
    fmhai_params_mask_scale(p, a->mask_type, a->window_left, a->window_right, a->scale, a->logits_soft_cap);
    fmhai_appendkv_make_params(a, p);
    p->num_splits = splits;
    if (splits > 1) {
        const int64_t rows = fmhai_decode_rows(a);
        p->ws_rows = rows;
        p->ws_lse = (float *)a->workspace;
        p->ws_o = (float *)((char *)a->workspace + fmhai_align16((size_t)splits * (size_t)rows * 4));
    }
}

#endif /* FMHA_TILE_KERNEL_DECODE_H */
