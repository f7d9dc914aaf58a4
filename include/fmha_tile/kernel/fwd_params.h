/*
 * Forward kernel parameters: what the host hands every forward kernel.
 *
 * Built once per call from fmha_fwd_args by fmhai_fwd_make_params() after
 * validation. Strides stay 64-bit; the kernels form every global offset in
 * 64-bit arithmetic. Scales are pre-folded for the exp2 softmax.
 */
#ifndef FMHA_TILE_FWD_PARAMS_H
#define FMHA_TILE_FWD_PARAMS_H

#include "../api.h"
#include "../tile/philox.h"

#if defined(__cplusplus)
#  define FMHAI_ALIGN64 alignas(64)
#else
#  define FMHAI_ALIGN64 _Alignas(64)
#endif

typedef struct fmhai_fwd_params {
    const void *q, *k, *v;
    void *o;
    float *lse;
    const int32_t *seqstart_q, *seqstart_k;   /* NULL in batch mode */
    const float *alibi_slopes;
    int64_t q_row, q_head, q_batch;
    int64_t k_row, k_head, k_batch;
    int64_t v_row, v_head, v_batch;
    int64_t o_row, o_head, o_batch;
    int64_t lse_head, lse_batch;
    int64_t alibi_batch;
    int seqlen_q, seqlen_k;      /* batch mode lengths */
    int nhead_q, head_ratio;     /* head_ratio = nhead_q / nhead_k */
    int d;                       /* problem head dim of Q and K (<= kernel head dim) */
    int dv;                      /* of V and O (<= d; the kernel's V width) */
    int m_blocks;                /* grid.x */
    int lpt_pairs;               /* Hopper forward: (batch, head) pairs a launch-order
                                    group (fmhai_fwd_block_of); 0: pair after pair */
    int pairs_bfast;             /* pairs numbered batch entry fastest (a bias shared
                                    by the entries, per head); else head fastest */
    int mask_kind;               /* fmha_mask_type */
    int window_left, window_right;
    /* paged KV (batch prefill); k_row/v_row are then token strides within a
     * page and k_head/v_head head strides */
    const int32_t *kv_indptr, *kv_page_indices, *kv_last_page_lens;   /* SGLang 1-D */
    const int32_t *block_table, *seqlen_k_ptr;                        /* vLLM 2-D   */
    int64_t block_table_stride;
    int64_t k_page, v_page;      /* page strides (elements) */
    int page_table;              /* fmha_page_table */
    int kv_off64;                /* pool over 4 GB: 64-bit page offsets */
    int page_log2;               /* log2(page size) */
    /* FP8 (e4m3) batch prefill: strides above are then in bytes for the fp8
     * tensors. Per-tensor descales (NULL: 1) are folded into the logit scale
     * (q, k) and the output normalisation (v) in the kernel; per-page ones
     * scale the score columns and P's columns of each key tile. */
    int q_fp8;                   /* queries stored as e4m3 */
    const float *q_descale, *k_descale, *v_descale;
    const float *k_page_descale, *v_page_descale;   /* NULL: no per-page scale */
    int64_t ds_page, ds_head;    /* per-page descale strides (elements) */
    /* FP8 forward: q/k/v descale of (b, hk) at b * desc_batch + hk *
     * desc_head (0, 0: per tensor) */
    int64_t desc_batch, desc_head;
    /* decode (pipelines built with DEC): the query heads of a KV head are
     * packed into the tile's rows (row r = query r / head_ratio, head
     * hk * head_ratio + r % head_ratio); seqlen_k_ptr (non-NULL) gives a
     * contiguous cache's key counts, cache_batch_idx its entry per
     * sequence. Split-KV: grid.x is m_blocks x num_splits; with more than
     * one split each block writes its rows' partial O and LSE (fp32) to
     * ws_o [num_splits][ws_rows][d] and ws_lse [num_splits][ws_rows], row
     * (b * nhead_q + h) * seqlen_q + i. */
    const int32_t *cache_batch_idx;
    /* append-KV (kernel/appendkv.h): new rows, the cache kind, rotary */
    const void *k_new, *v_new;
    int64_t kn_row, kn_head, kn_batch, vn_row, vn_head, vn_batch;
    int seqlen_knew, kv_paged, kv_vec;
    int kv_bf16;                 /* the new rows (and queries) are bf16, else fp16 */
    int kv_fp8;                  /* the cache is e4m3: new rows stored as x / descale */
    int rotary_dim, rotary_interleaved, rotary_seqlen;
    const float *rotary_cos, *rotary_sin;
    void *q_rope;
    int num_splits;
    float *ws_lse, *ws_o;
    int64_t ws_rows;
    const float *sinks;          /* [nhead_q] sink logits (NULL: none) */
    float scale_log2;            /* scale * log2(e) */
    float softcap_pre;           /* scale / cap        (soft cap on) */
    float softcap_post_log2;     /* cap * log2(e)      (soft cap on) */
    /* Hopper contiguous forward: TMA tensor maps of K and V (CUtensorMap,
     * dims (d, rows, nhead_k, batch), boxes of 128 bytes x tile_n rows;
     * dispatch/tma.h), valid when tma_kv is set; else cp.async copies.
     * Batch prefill over VECTORIZED pages: no maps, tma_kv set when V^T
     * may take bulk copies */
    int tma_kv;
    /* e4m3 V given K-major (fmha_fwd_args.v_kmajor): tma_v maps V^T (keys,
     * d, nhead_k, batch) and the FS2 rows copy V^T tiles, no transpose */
    int v_kmajor;
    /* dropout (contiguous forward, portable pipeline): keep a P element
     * whose Philox byte >= dropout_thr (0: no dropout), scaled by
     * dropout_scale; seed and offset from dropout_rng (device {seed,
     * offset}) when it is set (fmhai_dropout_seed_offset) */
    uint32_t dropout_thr;
    float dropout_scale;
    uint64_t dropout_seed, dropout_offset;
    const uint64_t *dropout_rng;
    /* elementwise bias (BIAS kernels): element (b_eff, h, q_start + i, j) at
     * bias + b_eff * bias_batch + h * bias_head + (q_start + i) * bias_row
     * + j elements of bias_dt (FP16, BF16 or FP32); bias_pair: every row
     * start is aligned to two elements (column pairs load as one) */
    const void *bias;
    int64_t bias_row, bias_head, bias_batch;
    int bias_dt, bias_pair;
    /* Hopper BIAS kernels: the bias as a TMA tensor map (dims (s_k, s_q,
     * heads, batch), boxes of 128 bytes x tile_m rows; dispatch/tma.h),
     * valid when tma_bias is set; else the softmax loads its bias words */
    int tma_bias;
    FMHAI_ALIGN64 uint64_t tma_k[16];
    FMHAI_ALIGN64 uint64_t tma_v[16];
    FMHAI_ALIGN64 uint64_t tma_b[16];
    /* v_kmajor with 192-key tiles: V^T's keys 128..191 (the 64-byte panel) */
    FMHAI_ALIGN64 uint64_t tma_v2[16];
    /* Hopper forward and batch prefill: O as a TMA tensor map (dims (dv,
     * rows, nhead_q, batch), boxes of 128 bytes x 16 rows; dispatch/tma.h)
     * for the epilogue's stores, valid when tma_out is set */
    int tma_out;
    FMHAI_ALIGN64 uint64_t tma_o[16];
} fmhai_fwd_params;

/* The Hopper forward's launch order (fmhai_fwd_block_of): the block of
 * linear index lin (x fastest over the grid (M query tiles, H heads,
 * batch), P = H x batch pairs) takes query tile *m of head *h of entry *b.
 * G <= 0: pair after pair, each pair's tiles from the last down; G > 0:
 * groups of G pairs, each group tile index by tile index from the last, so
 * that every pair's longest tile starts before any pair's shorter one.
 * Pair k is head k % H of entry k / H, or with bfast entry k % (P / H) of
 * head k / (P / H) (the entries of a head consecutive, so a group's pairs
 * that read one bias tile read it at about the same time).
 * Host and device (host tests check it is a bijection). */
#if defined(__HIP__) || defined(__CUDACC__)
#  define FMHAI_FWD_HD static inline __host__ __device__
#else
#  define FMHAI_FWD_HD static inline
#endif
FMHAI_FWD_HD void fmhai_fwd_block_map(int lin, int M, int H, int P, int G, int bfast, int *m, int *h, int *b)
{
    int base, gs, r, pair;
    if (G <= 0) {
        *m = M - 1 - lin % M;
        pair = lin / M;
    } else {
        base = lin / (G * M) * G;
        gs = P - base < G ? P - base : G;
        r = lin - base * M;
        pair = base + r % gs;
        *m = M - 1 - r / gs;
    }
    if (bfast) {
        *h = pair / (P / H);
        *b = pair % (P / H);
    } else {
        *h = pair % H;
        *b = pair / H;
    }
}

#endif /* FMHA_TILE_FWD_PARAMS_H */
