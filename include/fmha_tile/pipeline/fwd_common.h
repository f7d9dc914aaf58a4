/*
 * What the forward pipelines share (portable mma.sync, fwd_portable.h, and
 * Hopper wgmma, fwd_sm90.h; contiguous forward and batch prefill alike):
 * which query rows and keys a block owns.
 *
 *   fmhai_fwd_block_of the query tile and (head, batch entry) of a block,
 *                      in launch order (longest first, L2-sized groups)
 *   fmhai_fwd_seq_of   a batch entry's query rows and key count: batch mode,
 *                      group mode (seqstart arrays), or a paged KV cache read
 *                      through its SGLang 1-D or vLLM 2-D page table
 *   fmhai_fwd_keys_of  the key tiles a query tile visits under its mask, and
 *                      which of them need no mask arithmetic
 *   fmhai_fwd_split_share  a split-KV split's share of those tiles (decode)
 *   fmhai_fwd_kv8_descales the per-tensor FP8 KV descales of a call
 *   fmhai_sink_fold    an attention sink joins a row's softmax in the epilogue
 *   fmhai_bias_rows / fmhai_bias_row / fmhai_bias_pair / fmhai_bias_elem
 *                      the elementwise bias (BIAS kernels): a block's rows,
 *                      a row, one thread's column pair (NVIDIA) or element
 *                      (AMD MFMA) of it, from global memory into registers
 */
#ifndef FMHA_TILE_PIPELINE_FWD_COMMON_H
#define FMHA_TILE_PIPELINE_FWD_COMMON_H

#include "../platform/platform.h"
#include "../kernel/fwd_params.h"

#define FMHAI_FWD_MAX_HD 256
#define FMHAI_FWD_MAX_BN 128

/* The query tile and (head, batch entry) of this block of the grid
 * (m_blocks, heads, batch), blocks taken in the order they start (their
 * linear index, x fastest). Without lpt_pairs, each (batch, head) pair's
 * query tiles from the last (under a causal mask the longest) down, pair
 * after pair. With lpt_pairs (causal-type masks, a large bias shared by
 * the heads: fmhai_fwd_lpt_pairs):
 * groups of lpt_pairs pairs, inside a group every pair's last tile, then
 * every pair's tile before it, and so on: the longest tiles start first
 * and the short ones fill the last wave (longest processing time first),
 * while a group's K/V stays within the L2 (fmhai_fwd_block_map). */
FMHAI_DEVICE void fmhai_fwd_block_of(const fmhai_fwd_params *p, int *m_block, int *h, int *b)
{
    const int M = p->m_blocks, H = (int)gridDim.y;
    fmhai_fwd_block_map((int)blockIdx.x + M * ((int)blockIdx.y + H * (int)blockIdx.z), M, H, H * (int)gridDim.z,
                        p->lpt_pairs, p->pairs_bfast, m_block, h, b);
}

/* Batch entry b: its query rows [q_start, q_start + s_q) and s_k keys; in
 * batch mode b_eff = b selects the batch stride, in group mode and for paged
 * KV the starts do (b_eff = 0); kv_b selects K/V's (decode: the cache entry
 * of cache_batch_idx). Paged KV: the entry's page indices and the index of
 * its last page (-1 when it has none). DEC (decode kernels): a contiguous
 * cache's key count comes from seqlen_k_ptr when given. */
typedef struct fmhai_fwd_seq {
    int s_q, s_k, q_start, k_start, b_eff, kv_b;
    const int32_t *pages;
    int last_page;
} fmhai_fwd_seq;

FMHAI_DEVICE void fmhai_fwd_seq_of(const fmhai_fwd_params *p, int b, int PAGED, int DEC, fmhai_fwd_seq *S)
{
    S->s_q = p->seqlen_q; S->s_k = p->seqlen_k;
    S->q_start = 0; S->k_start = 0; S->b_eff = b; S->kv_b = b;
    S->pages = 0; S->last_page = -1;
    if (DEC && !PAGED) {
        if (p->seqlen_k_ptr) S->s_k = p->seqlen_k_ptr[b];
        if (p->cache_batch_idx) S->kv_b = p->cache_batch_idx[b];
    }
    if (p->seqstart_q) {
        S->q_start = p->seqstart_q[b];
        S->s_q = p->seqstart_q[b + 1] - S->q_start;
        if (!PAGED) {
            S->k_start = p->seqstart_k[b];
            S->s_k = p->seqstart_k[b + 1] - S->k_start;
        }
        S->b_eff = 0;
        S->kv_b = 0;
    }
    if (PAGED) {
        int n_pages;
        if (p->page_table == FMHA_PAGE_TABLE_VLLM_2D) {
            S->pages = p->block_table + (int64_t)b * p->block_table_stride;
            S->s_k = p->seqlen_k_ptr[b];
            n_pages = (S->s_k + (1 << p->page_log2) - 1) >> p->page_log2;
        } else {
            const int first = p->kv_indptr[b];
            n_pages = p->kv_indptr[b + 1] - first;
            S->pages = p->kv_page_indices + first;
            S->s_k = n_pages > 0 ? ((n_pages - 1) << p->page_log2) + p->kv_last_page_lens[b] : 0;
        }
        S->last_page = n_pages - 1;
    }
}

/* The key tiles a query tile [m0, m_last] visits (mask window, bottom-right
 * offset): [n_lo, n_hi), n_iters of them, visited from n_hi - 1 down;
 * [f_lo, f_hi) need no mask. Query row i sees keys [i + c_lo, i + c_hi)
 * (unbounded sides far away). */
typedef struct fmhai_fwd_keys {
    int n_lo, n_hi, n_iters, f_lo, f_hi, c_lo, c_hi;
} fmhai_fwd_keys;

FMHAI_DEVICE void fmhai_fwd_keys_of(const fmhai_fwd_params *p, int HAS_MASK, int m0, int m_last, int s_q, int s_k,
                                    int BN, fmhai_fwd_keys *W)
{
    int left = -1, right = -1, off = 0;
    if (HAS_MASK && p->mask_kind != FMHA_MASK_NONE) {
        left = p->window_left;
        right = p->window_right;
        off = p->mask_kind == FMHA_MASK_BOTTOM_RIGHT ? s_k - s_q : 0;
    }
    /* visible keys of the tile: [k_lo, k_hi); mask-free tiles: [f_lo, f_hi) */
    int k_hi = s_k, k_lo = 0, f_hi_key = s_k, f_lo = 0;
    if (right >= 0) {
        k_hi = min(s_k, m_last + off + right + 1);
        f_hi_key = min(s_k, m0 + off + right + 1);
    }
    if (left >= 0) {
        k_lo = max(0, m0 + off - left);
        int lo_key = m_last + off - left;
        f_lo = lo_key > 0 ? (lo_key + BN - 1) / BN : 0;
    }
    int n_lo = k_lo / BN;
    int n_hi = k_hi > k_lo ? (k_hi + BN - 1) / BN : n_lo;
    int f_hi = f_hi_key > 0 ? f_hi_key / BN : 0;
    int n_iters = n_hi - n_lo;
    /* query row i sees keys [i + c_lo, i + c_hi) (unbounded sides far away) */
    int c_hi = right >= 0 ? off + right + 1 : (1 << 30);
    int c_lo = left >= 0 ? off - left : -(1 << 30);
    W->n_lo = n_lo;
    W->n_hi = n_hi;
    W->n_iters = n_iters;
    W->f_lo = f_lo;
    W->f_hi = f_hi;
    W->c_lo = c_lo;
    W->c_hi = c_hi;
}

/* FP8 KV per-tensor descales: q's (e4m3 queries only) times k's fold into
 * the logit scale (*qk), v's into the output normalisation (*v); 1 without
 * fp8 KV or a descale pointer. */
FMHAI_DEVICE void fmhai_fwd_kv8_descales(const fmhai_fwd_params *p, int KV8, int Q8, float *qk, float *v)
{
    *qk = 1.f;
    *v = 1.f;
    if (!KV8) return;
    if (Q8 && p->q_descale) *qk = *p->q_descale;
    if (p->k_descale) *qk *= *p->k_descale;
    if (p->v_descale) *v = *p->v_descale;
}

/* Split-KV (decode): split `split` of num_splits takes its share of the
 * visible key tiles, cut as fmhai_splitkv_range (dispatch/splitkv.h) cuts
 * them: *n_hi and *n_iters narrowed from W's. */
FMHAI_DEVICE void fmhai_fwd_split_share(const fmhai_fwd_keys *W, int split, int num_splits, int *n_hi,
                                        int *n_iters)
{
    const int per = (W->n_iters + num_splits - 1) / num_splits;
    const int t0 = min(split * per, W->n_iters), t1 = min(t0 + per, W->n_iters);
    *n_hi = W->n_lo + t1;
    *n_iters = t1 - t0;
}

/* Attention sink of a row (sink: natural-log logit) folded into its
 * softmax after the last key tile, as one more key with no value. *ms is the
 * row's final running max in base-2 logit units (the exp2 argument's
 * offset), *sum its quad-reduced sum relative to it (0: no key seen).
 * *sum is updated and *m_ln set so that the LSE is *m_ln + log(*sum); the
 * return is the factor the O accumulator (relative to *ms) takes on top of
 * 1 / *sum. The reference point moves to the sink when it is the larger (no
 * exp2 of a large positive argument) and is then the sink itself in natural
 * units, so a row that saw no key gets O = 0 and exactly LSE = sink. */
FMHAI_DEVICE float fmhai_sink_fold(float sink, float ms, float *sum, float *m_ln)
{
    const float s2 = sink * 1.4426950408889634f;
    if (*sum > 0.f && s2 <= ms) {
        *sum += fmhai_exp2(s2 - ms);
        *m_ln = ms * 0.6931471805599453f;
        return 1.f;
    }
    const float f = *sum > 0.f ? fmhai_exp2(ms - s2) : 0.f;
    *sum = *sum * f + 1.f;
    *m_ln = sink;
    return f;
}

/* The bias rows of a block: row 0 is query q_start + m0 of head h (BIAS
 * kernels; the elements of fmhai_fwd_params.bias_dt). */
FMHAI_DEVICE const char *fmhai_bias_rows(const fmhai_fwd_params *p, int b_eff, int h, int row0)
{
    const int64_t e = (int64_t)b_eff * p->bias_batch + (int64_t)h * p->bias_head + (int64_t)row0 * p->bias_row;
    return (const char *)p->bias + e * (p->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2);
}

/* Row i of the block's bias rows, or NULL past s_q (never stored). */
FMHAI_DEVICE const char *fmhai_bias_row(const fmhai_fwd_params *p, const char *rows, int i, int s_q)
{
    return i < s_q ? rows + (int64_t)i * p->bias_row * (p->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2) : 0;
}

/* Bias of a row (fmhai_bias_row), columns j and j + 1 (j even), times
 * log2(e) (the pipelines' logits are base 2). A NULL row and columns at or
 * past s_k read nothing and give 0: those scores are never stored or are
 * masked. A pair loads as one 4-byte (16-bit) or 8-byte (fp32) word where
 * the rows are aligned to two elements (bias_pair), else as two. */
FMHAI_DEVICE float2 fmhai_bias_pair(const fmhai_fwd_params *p, const char *row, int j, int s_k)
{
    const float L2E = 1.4426950408889634f;
    float2 r = make_float2(0.f, 0.f);
    if (!row || j >= s_k) return r;
    const int two = j + 1 < s_k;
    if (p->bias_dt == FMHA_DTYPE_FP32) {
        const float *f = (const float *)row + j;
        if (two && p->bias_pair) {
            r = *(const float2 *)f;
        } else {
            r.x = f[0];
            if (two) r.y = f[1];
        }
    } else {
        const unsigned short *u = (const unsigned short *)row + j;
        uint32_t w;
        if (two && p->bias_pair) w = *(const unsigned int *)u;
        else w = (uint32_t)u[0] | (two ? (uint32_t)u[1] << 16 : 0u);
        if (p->bias_dt == FMHA_DTYPE_BF16) {
            r.x = __uint_as_float(w << 16);
            r.y = __uint_as_float(w & 0xffff0000u);
        } else {
            r.x = __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
            r.y = __half2float(__ushort_as_half((unsigned short)(w >> 16)));
        }
    }
    r.x *= L2E;
    r.y *= L2E;
    return r;
}

/* One bias element of a row (fmhai_bias_row), column j, times log2(e); 0
 * for a NULL row or j at or past s_k (the AMD MFMA pipeline: a lane holds
 * one query and keys in runs of four). */
FMHAI_DEVICE float fmhai_bias_elem(const fmhai_fwd_params *p, const char *row, int j, int s_k)
{
    float x = 0.f;
    if (!row || j >= s_k) return x;
    if (p->bias_dt == FMHA_DTYPE_FP32) {
        x = ((const float *)row)[j];
    } else {
        const unsigned short u = ((const unsigned short *)row)[j];
        x = p->bias_dt == FMHA_DTYPE_BF16 ? __uint_as_float((uint32_t)u << 16) : __half2float(__ushort_as_half(u));
    }
    return x * 1.4426950408889634f;
}

#endif /* FMHA_TILE_PIPELINE_FWD_COMMON_H */
