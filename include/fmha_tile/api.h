/*
 * fmha_tile host API (C11).
 *
 * Everything a caller needs to describe an attention problem and launch it: the
 * status codes, the enums for data types, masks and families, the forward
 * arguments struct (pointers plus 64-bit strides, CK Tile's naming), the kernel
 * description that the registry exports, and the entry points. This header is
 * plain C11 (checked with gcc -std=c11 -pedantic) so C programs and FFI layers can
 * read it; the kernels themselves come from DECL_FMHA_KERNEL_SET in a HIP/CUDA
 * translation unit (see fmha_tile.h).
 *
 * Conventions shared by every family (the project's design brief):
 *   - Q/K/V/O: pointer + strides in elements (batch, head, row); head-dim stride 1.
 *   - Group (varlen) mode: device int32 seqstart_q/seqstart_k of length batch+1;
 *     rows of sequence b live at seqstart[b] .. seqstart[b+1]-1; lengths may be 0.
 *   - GQA/MQA: query head h reads KV head h / (nhead_q / nhead_k).
 *   - Mask: window (left, right), -1 unbounded; causal is (-1, 0). Top-left: query
 *     i sees key j when i - left <= j <= i + right. Bottom-right shifts the
 *     diagonal by s_k - s_q. A row that sees no key gives O = 0 and LSE = -inf.
 *   - Scores: s = scale * q.k; soft cap c > 0: s = c * tanh(s / c); ALiBi adds
 *     -slope_h * |i + s_k - s_q - j| (bottom-right aligned).
 *   - LSE: natural log, fp32. Batch mode [batch, nhead_q, s_q]; group mode
 *     [nhead_q, total_q]; strides given by the caller.
 */
#ifndef FMHA_TILE_API_H
#define FMHA_TILE_API_H

#include <stddef.h>
#include <stdint.h>
#include "tile/vt8_layout.h"   /* fmhai_vt8_kpos: the key order of fmha_fwd_args.v_kmajor */

#ifdef __cplusplus
extern "C" {
#endif

/* FMHA_API: linkage of the entry points. Included on its own (a C program that
 * links the shared library, an FFI reader) the entry points are plain extern
 * declarations; fmha_tile.h defines FMHA_API as `static inline` first so that a
 * header-only user gets the definitions in their own translation unit. */
#ifndef FMHA_API
#  define FMHA_API extern
#endif

/* ----------------------------------------------------------------------------
 * Status codes. Every entry point validates before launching; a bad call
 * returns one of these and launches nothing. fmha_last_error() holds the
 * message of the last failing call on this thread (a successful call leaves
 * it unchanged: read it only after a status other than FMHA_OK).
 * ------------------------------------------------------------------------- */
typedef enum fmha_status {
    FMHA_OK = 0,
    FMHA_ERR_INVALID_ARG = 1,  /* null pointer, negative size, bad stride ...   */
    FMHA_ERR_UNSUPPORTED = 2,  /* valid problem the library does not handle     */
    FMHA_ERR_NO_KERNEL = 3,    /* the kernel set has no kernel for this problem */
    FMHA_ERR_DEVICE = 4,       /* runtime error querying the device             */
    FMHA_ERR_LAUNCH = 5        /* kernel launch failed                           */
} fmha_status;

typedef enum fmha_dtype {
    FMHA_DTYPE_FP16 = 0,
    FMHA_DTYPE_BF16 = 1,
    FMHA_DTYPE_FP8 = 2,     /* e4m3 (OCP on NVIDIA/gfx950, fnuz on gfx942) */
    FMHA_DTYPE_FP32 = 3     /* the elementwise bias (and dbias) only         */
} fmha_dtype;

typedef enum fmha_mask_type {
    FMHA_MASK_NONE = 0,
    FMHA_MASK_TOP_LEFT = 1,     /* window (left, right) aligned at (0, 0)          */
    FMHA_MASK_BOTTOM_RIGHT = 2  /* window aligned at (s_q - 1, s_k - 1)            */
} fmha_mask_type;

typedef enum fmha_family {
    FMHA_FAMILY_FWD = 0,
    FMHA_FAMILY_BATCH_PREFILL = 1,
    /* backward: three stages, each its own kernel-set rows (see fmha_bwd) */
    FMHA_FAMILY_BWD = 2,             /* dq_dk_dv: the main backward kernel    */
    FMHA_FAMILY_BWD_DOT_DO_O = 3,    /* D = rowsum(dO * O), zeroes dq_acc     */
    FMHA_FAMILY_BWD_CONVERT_DQ = 4,  /* dq_acc (fp32, summed over splits) -> dQ */
    FMHA_FAMILY_BWD_DET = 5,         /* dq_dk_dv of deterministic plans        */
    FMHA_FAMILY_DECODE = 6,          /* decode over a KV cache (split-KV)      */
    FMHA_FAMILY_SPLITKV_COMBINE = 7  /* merges split-KV partials (LSE rule)    */
    /* appendkv: later families join here */
} fmha_family;

/* Architecture a kernel was written for. A kernel runs on a device only when
 * the device matches and the binary holds code for it (checked at run time). */
typedef enum fmha_arch {
    FMHA_ARCH_SM80 = 0,   /* NVIDIA mma.sync path: sm_80 and newer            */
    FMHA_ARCH_SM90A = 1,  /* NVIDIA Hopper wgmma/TMA path: sm_90a exactly    */
    FMHA_ARCH_GFX9 = 2    /* AMD CDNA (gfx90a, gfx942, gfx950)               */
} fmha_arch;

/* ----------------------------------------------------------------------------
 * Forward arguments. Strides are in elements. In group mode the batch strides
 * are ignored (rows are addressed through seqstart_*).
 * FP8 (dtype FP8): Q, K and V in e4m3, O in BF16; the head dim a multiple
 * of 16 and at most 256; Q/K/V strides multiples of 16 elements (16 bytes).
 * Descales q_descale, k_descale, v_descale: device floats, each optional
 * (NULL: 1), real = stored * descale; one per tensor, or one per (batch
 * entry, KV head) with descale_batch_stride / descale_head_stride (the
 * last fields). Computed on the Hopper
 * wgmma pipeline (sm_90a: both products in e4m3, P quantised to e4m3 in
 * [0, 1]); other devices have no FP8 forward (FMHA_ERR_NO_KERNEL).
 * ------------------------------------------------------------------------- */
typedef struct fmha_fwd_args {
    fmha_dtype dtype;        /* FP16 or BF16: Q, K, V and O share it; FP8:
                                e4m3 Q, K, V and a BF16 O                      */
    int is_group_mode;       /* 0: batch mode, 1: group (varlen) mode          */

    int batch;
    int nhead_q;
    int nhead_k;             /* nhead_q % nhead_k == 0                         */
    int seqlen_q;            /* batch mode: query length of every batch entry
                                (ignored in group mode)                        */
    int seqlen_k;            /* batch mode: key length (ignored in group mode) */
    int max_seqlen_q;        /* group mode: upper bound of the query lengths   */
    int hdim_q;              /* Q and K columns: multiple of 8, <= 256         */
    int hdim_v;              /* V and O columns: multiple of 8, <= hdim_q
                                (e.g. MLA prefill: 192 and 128); 16-bit only  */

    const void *q;
    const void *k;
    const void *v;
    void *o;
    float *lse;              /* optional (NULL: not written)                   */

    const int32_t *seqstart_q;  /* group mode: device, batch + 1 entries       */
    const int32_t *seqstart_k;  /* group mode: device, batch + 1 entries       */

    int64_t stride_q, nhead_stride_q, batch_stride_q;
    int64_t stride_k, nhead_stride_k, batch_stride_k;
    int64_t stride_v, nhead_stride_v, batch_stride_v;
    int64_t stride_o, nhead_stride_o, batch_stride_o;
    int64_t nhead_stride_lse, batch_stride_lse;   /* LSE row stride is 1       */

    float scale;             /* softmax scale, > 0 (usually 1/sqrt(hdim_q))    */
    float logits_soft_cap;   /* 0: off                                         */
    const float *alibi_slopes;      /* optional, device, 4-byte aligned;
                                       [nhead_q] or [batch, nhead_q]          */
    int64_t alibi_batch_stride;     /* 0: one slope per head for all batches   */

    fmha_mask_type mask_type;
    int window_left;         /* -1: unbounded                                  */
    int window_right;        /* -1: unbounded; causal = (-1, 0)                */

    /* FP8 only (NULL: 1; any other dtype: must be NULL) */
    const float *q_descale, *k_descale, *v_descale;

    /* Attention sinks (optional, device fp32 [nhead_q], 4-byte aligned): one
     * logit per query head that joins every row's softmax as a key with no
     * value (gpt-oss): O = sum_j e^(s_j) v_j / (e^sink + sum_j e^(s_j)), with
     * s_j the scaled (soft-capped, ALiBi-biased) scores; the LSE includes it.
     * A row that sees no key gets O = 0 and LSE = sink. NULL: none. */
    const float *sinks;

    /* Dropout on P (training), in [0, 1): element (i, j) of head h and batch
     * entry (group mode: sequence) b, i and j counted within it, is kept
     * when its Philox byte (tile/philox.h: seed, offset, b * nhead_q + h) is
     * at least round(dropout_p * 256), then scaled by 256 / (256 - that);
     * the LSE is the one without dropout (as FlashAttention's). 0: off.
     * Runs on the portable pipeline (the Hopper one has no dropout); not
     * with FP8. The backward draws the same decisions from the same seed and
     * offset (fmha_bwd_args: pass it the same p and seed/offset or rng). */
    float dropout_p;
    uint64_t dropout_seed;
    uint64_t dropout_offset;
    /* Optional (NULL: dropout_seed and dropout_offset are used): a device
     * pointer to two uint64 {seed, offset}, 8-byte aligned, read by the
     * kernel when it runs instead of the two fields, so a captured CUDA/HIP
     * graph or a framework's generator can advance them between replays
     * without recording the launch again. */
    const uint64_t *dropout_rng;
    /* Elementwise attention bias (optional, device; NULL: none), CK's
     * elementwise_bias: element (b, h, i, j) (query row i, key j, both
     * counted within the sequence) at bias + b * batch_stride_bias +
     * h * nhead_stride_bias + i * stride_bias + j elements; group mode: row
     * seqstart_q[b] + i and no batch stride (a packed [total_q, max_k] bias
     * per head). Strides 0 broadcast over batch entries or heads. dtype
     * FP16, BF16 or FP32, pointer aligned to its element size. The logit
     * is scale * q.k (soft-capped) + bias, then the mask; the LSE includes
     * it. A -inf entry hides its key (a row that sees none: O = 0, LSE =
     * -inf); +inf and NaN are not allowed. Needs a kernel-set row built
     * with BIAS (in the ALiBi column, so not with ALiBi); not with FP8. */
    const void *bias;
    fmha_dtype bias_dtype;
    int64_t stride_bias, nhead_stride_bias, batch_stride_bias;
    /* FP8 descales per (batch entry, KV head), as FlashAttention-3's
     * [batch, nhead_k] descale tensors: with either stride non-zero, each
     * of q_descale, k_descale and v_descale that is given holds the value of
     * (b, hk) at b * descale_batch_stride + hk * descale_head_stride
     * elements (group mode: b the sequence), and query head h takes its KV
     * head's (hk = h / (nhead_q / nhead_k)). 0 and 0: one value per tensor.
     * Strides >= 0; non-zero only with dtype FP8. */
    int64_t descale_batch_stride, descale_head_stride;
    /* e4m3 V given K-major (FP8, batch mode; 0: V rows as q and k): v holds
     * V^T as fmha_fp8_v_kmajor writes it, element (b, hk, dd, key) at
     * v + b * batch_stride_v + hk * nhead_stride_v + dd * stride_v +
     * fmha_fp8_v_kmajor_pos(key), keys seqlen_k .. fmha_fp8_v_kmajor_keys()
     * - 1 zero. The Hopper e4m3 rows of head dims 128 and 256 then copy V^T
     * tiles by TMA where they transpose V in shared memory (8k-16k on an
     * H100: hdim 256 10-14%, hdim 128 5-8% faster; bench/RESULTS.md); other
     * head dims (a head dim below 128 runs the 128 rows padded), group mode
     * and a device or build without tensor maps refuse it
     * (FMHA_ERR_UNSUPPORTED). */
    int v_kmajor;
} fmha_fwd_args;

/* e4m3 V^T for fmha_fwd_args.v_kmajor: the keys a d row holds (seqlen_k
 * rounded up to 16), the byte of key `key` in its d row (the keys of each
 * group of 16 in the order the e4m3 P fragments hold them: key 16c + 2t +
 * {0, 1, 8, 9}[e] at byte 16c + 4t + e), and the bytes of a dense V^T
 * [batch][nhead_k][hdim_v][keys] of a problem (0 for a call it cannot take:
 * not FP8 or group mode). */
static inline int fmha_fp8_v_kmajor_keys(int seqlen_k) { return fmhai_vt8_keys(seqlen_k); }
static inline int fmha_fp8_v_kmajor_pos(int key) { return fmhai_vt8_kpos(key); }
static inline size_t fmha_fp8_v_kmajor_bytes(const fmha_fwd_args *a)
{
    if (!a || a->dtype != FMHA_DTYPE_FP8 || a->is_group_mode || a->batch < 0 || a->nhead_k < 0 || a->hdim_v < 0)
        return 0;
    return (size_t)a->batch * (size_t)a->nhead_k * (size_t)a->hdim_v * (size_t)fmha_fp8_v_kmajor_keys(a->seqlen_k);
}
/* Points args at a dense V^T (as fmha_fp8_v_kmajor writes it): v = vt,
 * v_kmajor = 1 and the V strides of [batch][nhead_k][hdim_v][keys]. */
static inline void fmha_fp8_v_kmajor_use(fmha_fwd_args *a, const void *vt)
{
    a->v = vt;
    a->v_kmajor = 1;
    a->stride_v = fmha_fp8_v_kmajor_keys(a->seqlen_k);
    a->nhead_stride_v = (int64_t)a->hdim_v * a->stride_v;
    a->batch_stride_v = (int64_t)a->nhead_k * a->nhead_stride_v;
}

/* ----------------------------------------------------------------------------
 * Batch prefill over a paged KV cache (group mode queries, K/V from pages).
 *
 * Page tables, chosen per call:
 *   SGLANG_1D  kv_indptr[batch+1] (prefix sum of page counts), kv_page_indices[],
 *              kv_last_page_lens[batch] (1..page_size): sequence b owns pages
 *              kv_page_indices[kv_indptr[b] .. kv_indptr[b+1]-1] and has
 *              (count-1)*page_size + last_page_len keys (0 pages: 0 keys).
 *   VLLM_2D    block_table[batch][*] (row stride block_table_stride) and
 *              seqlen_k[batch]: sequence b has seqlen_k[b] keys in pages
 *              block_table[b][0 .. ceil(seqlen_k[b]/page_size)-1].
 * KV layouts:
 *   LINEAR      element (page, token t, head h, dim c) at
 *               page*page_stride + t*token_stride + h*nhead_stride + c
 *               (covers [pages, page_size, h, d] and [pages, h, page_size, d])
 *   VECTORIZED  vLLM v0 / CK: K [pages, h, d/x, page_size, x],
 *               V [pages, h, page_size/x, d, x], x = 16 bytes / element size;
 *               page_stride and nhead_stride given, token_stride unused.
 * Page size: a power of two, 1..2048. Page indices are clamped to each
 * sequence's last valid page in the kernel; fmha_batch_prefill_check_pages()
 * optionally validates the indices against num_total_pages (it reads the
 * tables, so it synchronises). num_total_pages is the pool's page count: it
 * sizes the 32-bit vs 64-bit page-offset choice (0: always 64-bit), so every
 * index must be below it. kv_last_page_lens of a sequence with no pages is
 * ignored. VECTORIZED pools are unpadded: their V group stride is hdim * x.
 * FP8 (e4m3): kv_dtype FP8 (LINEAR layout, head dim a multiple of 16) with
 * q_dtype BF16 or FP8; the output is BF16 whenever KV is FP8. Descales:
 * kv_scale NONE (1), PER_TENSOR (k_descale, v_descale: device floats) or
 * PER_PAGE (k_page_descale, v_page_descale: [num_total_pages, nhead_k]
 * floats indexed by pool page, with the given strides); FP8 queries take an
 * optional q_descale (NULL: 1). real = stored * descale. Descale pointers the
 * chosen mode does not use are an error.
 * ------------------------------------------------------------------------- */
typedef enum fmha_page_table {
    FMHA_PAGE_TABLE_SGLANG_1D = 0,
    FMHA_PAGE_TABLE_VLLM_2D = 1
} fmha_page_table;

typedef enum fmha_kv_layout {
    FMHA_KV_LAYOUT_LINEAR = 0,
    FMHA_KV_LAYOUT_VECTORIZED = 1
} fmha_kv_layout;

typedef enum fmha_kv_scale {
    FMHA_KV_SCALE_NONE = 0,        /* fp16/bf16 KV, or fp8 with descale 1   */
    FMHA_KV_SCALE_PER_TENSOR = 1,  /* k_descale, v_descale                  */
    FMHA_KV_SCALE_PER_PAGE = 2     /* k_page_descale, v_page_descale        */
} fmha_kv_scale;

typedef struct fmha_batch_prefill_args {
    fmha_dtype q_dtype;      /* FP16, BF16 or FP8                              */
    fmha_dtype kv_dtype;     /* FP16, BF16 or FP8                              */
    int batch, nhead_q, nhead_k;
    int max_seqlen_q;        /* upper bound of the query lengths (grid size)   */
    int hdim_q, hdim_v;      /* equal, multiple of 8, <= 256                   */

    const void *q;           /* group mode: rows seqstart_q[b] ..              */
    void *o;                 /* same dtype as q (BF16 when KV is FP8)          */
    float *lse;              /* optional, [nhead_q, total_q]                   */
    const int32_t *seqstart_q;                    /* device, batch + 1         */
    int64_t stride_q, nhead_stride_q;
    int64_t stride_o, nhead_stride_o;
    int64_t nhead_stride_lse;                     /* LSE row stride is 1       */

    /* the paged cache */
    const void *k_pool, *v_pool;
    int num_total_pages;
    int page_size;
    fmha_kv_layout kv_layout;
    int64_t page_stride_k, token_stride_k, nhead_stride_k;   /* elements */
    int64_t page_stride_v, token_stride_v, nhead_stride_v;
    fmha_page_table page_table;
    const int32_t *kv_indptr, *kv_page_indices, *kv_last_page_lens;   /* SGLANG_1D */
    const int32_t *block_table, *seqlen_k;                            /* VLLM_2D   */
    int64_t block_table_stride;

    /* FP8 */
    fmha_kv_scale kv_scale;
    const float *q_descale, *k_descale, *v_descale;          /* per tensor    */
    const float *k_page_descale, *v_page_descale;            /* per page/head */
    int64_t descale_page_stride, descale_nhead_stride;

    float scale;
    float logits_soft_cap;
    fmha_mask_type mask_type;  /* causal prefill: BOTTOM_RIGHT with (-1, 0)    */
    int window_left, window_right;
    const float *sinks;        /* optional [nhead_q], as in fmha_fwd_args     */
} fmha_batch_prefill_args;

/* ----------------------------------------------------------------------------
 * Decode: a few query rows per sequence (seqlen_q, e.g. 1, or up to 8 for
 * speculative decoding) against a KV cache, bound by reading K/V.
 *
 * Queries, O and LSE in batch mode: [batch, seqlen_q, nhead_q, d] by strides
 * (LSE [batch, nhead_q, seqlen_q], row stride 1). The query heads that share
 * a KV head are packed into one block tile (seqlen_q x nhead_q/nhead_k rows),
 * so each K/V byte is read once per KV head.
 * The cache is contiguous or paged:
 *   contiguous  K element (entry e, token t, head h, dim c) at
 *               e*batch_stride_k + t*stride_k + h*nhead_stride_k + c;
 *               sequence b reads entry cache_batch_idx[b] (NULL: b) and has
 *               seqlen_k[b] keys (device int32 [batch]).
 *   paged       the page tables and layouts of batch prefill (both tables,
 *               LINEAR and VECTORIZED, page sizes 1..2048): stride_k and
 *               nhead_stride_k are the token and head strides inside a page,
 *               page_stride_k the page stride (V alike; VECTORIZED pages
 *               leave stride_k unused: pass 8); seqlen_k is the VLLM_2D
 *               table's key counts.
 * FP8 KV (e4m3, LINEAR or contiguous, head dim a multiple of 16) with bf16
 * or e4m3 queries and a bf16 O; descales as in batch prefill.
 * Masks, soft cap and ALiBi ([nhead_q] or [batch, nhead_q] slopes) as in the
 * forward; the bottom-right mask aligns the last query row with the last key.
 *
 * Split-KV: each (sequence, KV head, query tile) is cut into num_splits
 * blocks over its key tiles; each writes a partial O and LSE (fp32) to the
 * workspace and a combine kernel merges them in split order (deterministic).
 * One split writes O directly and needs no workspace. fmha_decode_plan_make
 * picks the kernel and the split count (num_splits 0: a heuristic from the
 * device's SM count, batch x heads and max_seqlen_k) and reports the
 * workspace size; fmha_decode_run launches (no allocation, no host
 * synchronisation: graph-capture safe) and a plan serves every call of the
 * same shape (e.g. every layer of a model step); run refuses a call whose
 * shape differs or whose mask, soft cap or page size the plan's kernel does
 * not serve (FMHA_ERR_INVALID_ARG). batch 0 launches nothing. Per-page
 * descales need a paged cache.
 * ------------------------------------------------------------------------- */
typedef struct fmha_decode_args {
    fmha_dtype q_dtype;      /* FP16, BF16, or FP8 with FP8 KV                 */
    fmha_dtype kv_dtype;     /* FP16, BF16 (= q_dtype) or FP8                  */
    int batch, nhead_q, nhead_k;
    int seqlen_q;            /* query rows of every sequence, >= 1             */
    int max_seqlen_k;        /* host bound of the key counts (split heuristic) */
    int hdim_q, hdim_v;      /* equal, multiple of 8, <= 256                   */
    const void *q;
    void *o;                 /* q's dtype (BF16 when KV is FP8)                */
    float *lse;              /* optional                                       */
    int64_t stride_q, nhead_stride_q, batch_stride_q;
    int64_t stride_o, nhead_stride_o, batch_stride_o;
    int64_t nhead_stride_lse, batch_stride_lse;
    /* the cache */
    int is_paged;
    const void *k_cache, *v_cache;
    int64_t stride_k, nhead_stride_k, batch_stride_k;   /* paged: batch unused */
    int64_t stride_v, nhead_stride_v, batch_stride_v;
    const int32_t *seqlen_k;         /* contiguous and VLLM_2D: [batch]        */
    const int32_t *cache_batch_idx;  /* contiguous, optional                   */
    int num_total_pages, page_size;  /* paged, as in batch prefill             */
    fmha_kv_layout kv_layout;
    int64_t page_stride_k, page_stride_v;
    fmha_page_table page_table;
    const int32_t *kv_indptr, *kv_page_indices, *kv_last_page_lens;   /* SGLANG_1D */
    const int32_t *block_table;                                       /* VLLM_2D   */
    int64_t block_table_stride;
    /* FP8 */
    fmha_kv_scale kv_scale;
    const float *q_descale, *k_descale, *v_descale;
    const float *k_page_descale, *v_page_descale;
    int64_t descale_page_stride, descale_nhead_stride;
    float scale;
    float logits_soft_cap;
    const float *alibi_slopes;
    int64_t alibi_batch_stride;
    fmha_mask_type mask_type;
    int window_left, window_right;
    /* append-KV (optional, fp16/bf16 caches): seqlen_knew rows of k_new and
     * v_new ([batch, seqlen_knew, nhead_k, d] by strides) are written to the
     * last seqlen_knew positions of each sequence before the attention:
     * seqlen_k and the page tables count the keys after the append (the
     * pages of the new rows are allocated by the caller, as serving engines
     * do). fmha_appendkv runs this step alone. */
    const void *k_new, *v_new;
    int seqlen_knew;
    int64_t stride_knew, nhead_stride_knew, batch_stride_knew;
    int64_t stride_vnew, nhead_stride_vnew, batch_stride_vnew;
    int cache_seqlen_max;    /* contiguous: tokens a cache entry holds (0:
                                unchecked); max_seqlen_k must not exceed it */
    /* rotary embedding of the new keys and the queries (rotary_dim 0: none):
     * the first rotary_dim elements of a row at position t turn by the
     * angles of row t of rotary_cos / rotary_sin (fp32 [rotary_seqlen]
     * [rotary_dim / 2]); pairs (2k, 2k + 1) when rotary_interleaved, else
     * (k, k + rotary_dim / 2). A new key's position is its cache position;
     * query i's is seqlen_k - seqlen_q + i. Rotated queries are written to
     * q_rope (q's strides; it may be q itself) and the attention reads them
     * from there; q_rope NULL leaves the queries alone. */
    int rotary_dim, rotary_interleaved, rotary_seqlen;
    const float *rotary_cos, *rotary_sin;
    void *q_rope;
    /* split-KV */
    int num_splits;          /* 0: the heuristic; 1..FMHA_SPLITKV_MAX_SPLITS   */
    void *workspace;         /* device, 16-byte aligned (num_splits > 1)       */
    size_t workspace_size;
    const float *sinks;      /* optional [nhead_q], as in fmha_fwd_args       */
} fmha_decode_args;

/* A kernel of a kernel set, as the registry describes it. */
typedef struct fmha_kernel_info {
    const char *name;        /* self-describing, e.g. fmha_fwd_bf16_d128_... */
    fmha_family family;
    fmha_dtype dtype;
    int hdim;                /* serves problems with hdim_q <= hdim          */
    int has_mask;            /* 0: no mask only; 1: any mask at run time     */
    int has_softcap;         /* logits soft cap compiled in                  */
    int has_alibi;           /* ALiBi compiled in (decode: always, run time) */
    int tile_m, tile_n;      /* query rows and key columns of one block tile */
    int warps;               /* warps per block                              */
    int stages;              /* K/V staging depth                            */
    const char *pipeline;    /* "portable_mma", ...                          */
    fmha_arch arch;
    int page_size;           /* batch prefill, decode: smallest page size
                                served (every power of two >= it); 0
                                otherwise (decode: a contiguous cache)       */
    fmha_kv_layout kv_layout; /* batch prefill: LINEAR or VECTORIZED         */
    int has_bias;            /* elementwise bias compiled in (BIAS rows)    */
    int hdim_v;              /* V/O columns of the kernel (<= hdim; equal
                                but for the forward's unequal rows, e.g.
                                192_128): serves hdim_v <= it               */
    int has_dropout;         /* dropout compiled in (DROPOUT rows: the
                                wgmma pipeline's hdim-64 kernel; elsewhere
                                dropout is decided at run time)             */
    int p8_qsum;             /* e4m3 rows: 1 where the kernel's running max
                                is lazy (it moves only by more than 2^8) and
                                O is divided by the sum of the rounded P
                                (the LSE keeps the unrounded sum); 0: the
                                exact max and the unrounded sum (README,
                                "FP8 forward")                              */
} fmha_kernel_info;

/* What selection picked for a problem (fmha_fwd_check). */
typedef struct fmha_fwd_plan {
    const fmha_kernel_info *kernel;
    size_t workspace_size;   /* bytes of caller workspace (0 for forward)    */
    int grid_x, grid_y, grid_z, block;
    const char *why;         /* the pipeline picked and why: "fast pipeline
                                (wgmma): ..." or "portable pipeline: <the
                                reason the fast one does not serve it>"     */
} fmha_fwd_plan;

/* What fmha_decode_plan_make picked: the attention kernel, the combine
 * kernel (NULL with one split), the split count and the workspace. */
typedef struct fmha_decode_plan {
    const fmha_kernel_info *kernel;
    const fmha_kernel_info *combine;
    int num_splits;
    size_t workspace_size;   /* bytes (0 with one split)                      */
    int grid_x, grid_y, grid_z, block;   /* the attention kernel's launch     */
    const char *why;
    /* private: the problem shape the plan is for, and the set's entry */
    int batch_, nhead_q_, nhead_k_, seqlen_q_, hdim_, dtypes_, paged_;
    const struct fmha_kernel_set *set_;
    int entry_;
} fmha_decode_plan;

/* Opaque: defined by DECL_FMHA_KERNEL_SET in the user's translation unit. */
typedef struct fmha_kernel_set fmha_kernel_set;

/* ----------------------------------------------------------------------------
 * Backward (dQ, dK, dV), three stages run as one plan:
 *   dot_do_o    D = rowsum(dO * O) in fp32 into the workspace; zeroes dq_acc
 *   dq_dk_dv    one block per (key tile, KV head, batch entry): recomputes
 *               P from Q, K and the forward's LSE, accumulates dK and dV of
 *               the key tile over every query row of every query head of
 *               the KV head's group (GQA sums in registers), and adds dQ
 *               into dq_acc (fp32)
 *   convert_dq  sums dq_acc's splits in a fixed order, scales, converts to
 *               the dtype and writes dQ
 * and, with an elementwise bias whose gradient is wanted, a dbias pass
 * (fmha_bwd_args.dbias: sums, converts, writes the masked elements' 0)
 * Workspace: one caller-owned device buffer whose layout the caller never
 * sees. fmha_bwd_plan_make() reports its size from the problem's traits, before
 * anything is allocated; fmha_bwd_prepare_workspace_device() fills its
 * tables (group mode: per-batch splits and dq_acc offsets from
 * seqstart_q/seqstart_k) with a kernel, or the host-packing forms
 * fmha_bwd_prepare_workspace[_async](); fmha_bwd() runs the three stages. When
 * every key sequence fits one key tile the plan has dq_direct = 1: dq_dk_dv
 * writes dQ itself and the workspace size is 0 (but for a summed dbias's
 * fp32 buffer; preparing it then has nothing to do).
 * Determinism: is_deterministic = 0 adds into dq_acc with fp32 atomics (run
 * to run, dQ may differ in the last bits); 1 gives every split of a batch
 * entry its own dq_acc slice, written by one block with plain loads and
 * stores, and convert_dq sums the slices in order: no float atomics, and two
 * runs give bitwise-identical dQ, dK and dV.
 * ------------------------------------------------------------------------- */

/* What the plan (kernels, splits, workspace size) depends on. */
typedef struct fmha_bwd_traits {
    fmha_dtype dtype;        /* FP16 or BF16                                  */
    int is_group_mode;
    int batch, nhead_q, nhead_k;
    int seqlen_q;            /* batch mode: query length of every entry;
                                group mode: total query rows (seqstart_q[batch]),
                                or an upper bound of it: sizes the workspace  */
    int seqlen_k;            /* batch mode: key length; group mode: total keys
                                (or an upper bound)                           */
    int max_seqlen_q;        /* group mode: longest query sequence (bound)    */
    int max_seqlen_k;        /* group mode: longest key sequence (bound)      */
    int hdim_q, hdim_v;      /* equal, multiple of 8, <= 256                  */
    fmha_mask_type mask_type;
    int window_left, window_right;
    int has_logits_soft_cap; /* 1: logits_soft_cap > 0 in the args            */
    int has_alibi;           /* 1: alibi_slopes given in the args (the plan
                                takes a dq_dk_dv row built with ALIBI)        */
    int is_deterministic;    /* 1: no float atomics, bitwise reproducible     */
    /* Elementwise bias (fmha_bwd_args.bias; appended, 0 in older callers) */
    int has_bias;            /* 1: bias given (the plan takes a dq_dk_dv row
                                built with BIAS)                              */
    int has_dbias;           /* 1: dbias wanted (fmha_bwd_args.dbias)         */
    int dbias_bcast;         /* dims dbias is summed over: FMHA_BIAS_BCAST_*
                                bits (its shape [1 or b, 1 or h, s_q, s_k]);
                                a sum needs workspace (fmha_bwd_args.dbias) */
} fmha_bwd_traits;

/* fmha_bwd_traits.dbias_bcast bits: the bias is shared by (its gradient is
 * summed over) every batch entry (batch mode only) / every query head. */
enum { FMHA_BIAS_BCAST_BATCH = 1, FMHA_BIAS_BCAST_HEAD = 2 };

/* Made by fmha_bwd_plan_make; pass it to every other backward call. */
typedef struct fmha_bwd_plan {
    fmha_bwd_traits traits;              /* the problem the plan is for       */
    const fmha_kernel_info *dot_do_o;    /* the kernels of the three stages   */
    const fmha_kernel_info *dq_dk_dv;
    const fmha_kernel_info *convert_dq;
    size_t workspace_size;   /* bytes of device workspace (0: none needed)    */
    size_t staging_size;     /* bytes of pinned host memory that
                                fmha_bwd_prepare_workspace_async needs        */
    int nsplits;             /* dq_acc slices per batch entry: deterministic
                                mode's splits (group mode: the most any entry
                                gets), 1 otherwise                            */
    int dq_direct;           /* 1: dq_dk_dv writes dQ, dot_do_o and
                                convert_dq do not run, workspace 0           */
    /* private: read by the other backward calls */
    const fmha_kernel_set *set_;
    int entry_[3];           /* entries of dot_do_o, dq_dk_dv, convert_dq     */
} fmha_bwd_plan;

/* Backward arguments. Strides are in elements (CK naming); in group mode the
 * batch strides are ignored. dO ("dout") and O share O's shape, dQ Q's, dK
 * and dV K's and V's (nhead_k heads: dK/dV are summed over a group's query
 * heads). lse is the forward's (natural log, fp32, -inf for rows that see no
 * key), with the forward's layout. */
typedef struct fmha_bwd_args {
    fmha_dtype dtype;
    int is_group_mode;
    int batch, nhead_q, nhead_k;
    int seqlen_q, seqlen_k;          /* as in fmha_bwd_traits                 */
    int max_seqlen_q, max_seqlen_k;  /* group mode (bounds)                   */
    int hdim_q, hdim_v;

    const void *q, *k, *v, *o, *dout;
    const float *lse;
    void *dq, *dk, *dv;
    const int32_t *seqstart_q, *seqstart_k;   /* group mode: device, batch+1  */

    int64_t stride_q, nhead_stride_q, batch_stride_q;
    int64_t stride_k, nhead_stride_k, batch_stride_k;
    int64_t stride_v, nhead_stride_v, batch_stride_v;
    int64_t stride_o, nhead_stride_o, batch_stride_o;
    int64_t stride_do, nhead_stride_do, batch_stride_do;
    int64_t stride_dq, nhead_stride_dq, batch_stride_dq;
    int64_t stride_dk, nhead_stride_dk, batch_stride_dk;
    int64_t stride_dv, nhead_stride_dv, batch_stride_dv;
    int64_t nhead_stride_lse, batch_stride_lse;   /* LSE row stride is 1       */

    float scale;
    float logits_soft_cap;           /* 0: off                                */
    const float *alibi_slopes;       /* the forward's ([nhead_q] or [batch,
                                        nhead_q], alibi_batch_stride below);
                                        NULL unless the plan has_alibi        */
    fmha_mask_type mask_type;
    int window_left, window_right;
    int is_deterministic;

    void *workspace;                 /* device, 256-byte aligned              */
    size_t workspace_size;           /* bytes; >= plan.workspace_size         */

    /* Attention sinks (optional, device fp32 [nhead_q], the forward's): the
     * forward's LSE already holds them, so dQ/dK/dV need nothing more;
     * dsinks (fp32 [nhead_q], required with sinks, overwritten; batch 0
     * launches nothing and leaves it as it is) receives
     * d loss / d sink_h = -sum over the head's rows of e^(sink_h - lse) *
     * rowsum(dO * O). */
    const float *sinks;
    float *dsinks;
    int64_t alibi_batch_stride;      /* slopes' batch stride, 0: shared       */

    /* Dropout (training): the forward's dropout_p, dropout_seed and
     * dropout_offset (or dropout_rng), so that the backward draws the same
     * keep/drop decisions (the mask is never stored: it is regenerated from
     * Philox, tile/philox.h). With Z = keep * 256 / (256 - thr) the forward
     * was O = (P o Z) V, and dV = (P o Z)^T dO, dP = (dO V^T) o Z,
     * dS = P o (dP - D). dropout_p in [0, 1), 0: off. The portable and
     * the Hopper dq_dk_dv pipelines have it (fmha_bwd would take the set's
     * portable row with the plan's tile in place of a pipeline without
     * it). dropout_rng: as in fmha_fwd_args
     * (device {seed, offset}, 8-byte aligned, NULL: the two fields). */
    float dropout_p;
    uint64_t dropout_seed;
    uint64_t dropout_offset;
    const uint64_t *dropout_rng;

    /* Elementwise bias (optional, device; NULL: none): the forward's bias,
     * dtype and strides (fmha_fwd_args.bias: element (b, h, i, j) at b *
     * batch_stride + h * nhead_stride + i * stride + j; group mode row
     * seqstart_q[b] + i, no batch stride; strides 0 broadcast). Needs
     * traits.has_bias and a dq_dk_dv row built with BIAS; P is recomputed
     * from scale * q.k (soft-capped) + bias, as the forward's.
     * dbias (optional, NULL: not wanted; needs traits.has_dbias): d loss /
     * d bias = dS, the gradient of the biased logits, in the bias's dtype,
     * shaped [b or 1][h or 1][s_q][s_k] by traits.dbias_bcast (group mode:
     * [h or 1][total_q][max_seqlen_k], rows as the bias's) at dbias +
     * b * batch_stride_dbias + h * nhead_stride_dbias + i * stride_dbias +
     * j (strides of summed dims ignored). Every element is written: masked
     * (i, j) and, group mode, keys past the entry's length get 0. Without
     * bcast each element is one block's plain store; with it the terms go
     * to an fp32 sum in the workspace (fp32 atomics, or deterministic: one
     * slice per batch entry and head, plain stores, summed in a fixed order
     * by a last pass: bitwise reproducible), then converted. Not with a
     * soft cap (FMHA_ERR_UNSUPPORTED: dS there carries the cap's factor). */
    const void *bias;
    fmha_dtype bias_dtype;
    int64_t stride_bias, nhead_stride_bias, batch_stride_bias;
    void *dbias;
    int64_t stride_dbias, nhead_stride_dbias, batch_stride_dbias;
} fmha_bwd_args;

/* ----------------------------------------------------------------------------
 * Entry points. `stream` is a hipStream_t (cudaStream_t on NVIDIA); NULL is the
 * default stream. None of them allocates or synchronises with the host.
 * ------------------------------------------------------------------------- */
FMHA_API const char *fmha_status_str(fmha_status s);
FMHA_API const char *fmha_last_error(void);

/* "Supported?": validates and selects a kernel without launching. */
FMHA_API fmha_status fmha_fwd_check(const fmha_kernel_set *set,
                                    const fmha_fwd_args *args,
                                    fmha_fwd_plan *plan /* may be NULL */);
/* Validates, selects and launches. */
FMHA_API fmha_status fmha_fwd(const fmha_kernel_set *set,
                              const fmha_fwd_args *args, void *stream);
/* Writes e4m3 V (args->v with its strides, as for v_kmajor 0; of args only
 * batch, nhead_k, seqlen_k, hdim_v and V are read) as the dense V^T of
 * fmha_fwd_args.v_kmajor into vt (fmha_fp8_v_kmajor_bytes(args) bytes,
 * 16-byte aligned) on stream; fmha_fp8_v_kmajor_use(args, vt) then points
 * args at it. Batch mode, FP8, NVIDIA. */
FMHA_API fmha_status fmha_fp8_v_kmajor(const fmha_fwd_args *args, void *vt, void *stream);

/* Batch prefill over a paged KV cache: "supported?" and launch. */
FMHA_API fmha_status fmha_batch_prefill_check(const fmha_kernel_set *set,
                                              const fmha_batch_prefill_args *args,
                                              fmha_fwd_plan *plan /* may be NULL */);
FMHA_API fmha_status fmha_batch_prefill(const fmha_kernel_set *set,
                                        const fmha_batch_prefill_args *args, void *stream);
/* Optional validation of the page tables against num_total_pages and the
 * last-page lengths against 1..page_size. Copies the tables to the host on
 * `stream` and synchronises it: a debugging aid, not for the hot path. */
FMHA_API fmha_status fmha_batch_prefill_check_pages(const fmha_batch_prefill_args *args,
                                                    void *stream);

/* Decode: plan (validate, pick the kernel and the split count, size the
 * workspace; touches no device memory), run (validate the args against the
 * plan, launch the attention kernel and, with splits, the combine), and
 * both in one call (num_splits 0 there: the heuristic, limited to one split
 * when the given workspace is missing, misaligned or too small for it). */
FMHA_API fmha_status fmha_decode_plan_make(const fmha_kernel_set *set, const fmha_decode_args *args,
                                           fmha_decode_plan *plan);
FMHA_API fmha_status fmha_decode_run(const fmha_decode_plan *plan, const fmha_decode_args *args,
                                     void *stream);
FMHA_API fmha_status fmha_decode(const fmha_kernel_set *set, const fmha_decode_args *args, void *stream);
/* Append-KV alone: the new K/V rows into the cache and the rotary
 * embedding of the new keys and (q_rope) the queries; no attention. */
FMHA_API fmha_status fmha_appendkv(const fmha_decode_args *args, void *stream);
/* Backward. plan_make validates the traits and picks the kernels of the three
 * stages (a missing stage is FMHA_ERR_NO_KERNEL here, never a crash later);
 * no device memory is touched. */
FMHA_API fmha_status fmha_bwd_plan_make(const fmha_kernel_set *set, const fmha_bwd_traits *traits,
                                        fmha_bwd_plan *plan);
/* Fills the workspace's tables; call it once after allocating the workspace
 * and again whenever the seqstarts change (group mode). The synchronous form
 * copies the seqstarts to the host, checks them against the plan's bounds
 * (FMHA_ERR_INVALID_ARG when they break one) and synchronises `stream`. */
FMHA_API fmha_status fmha_bwd_prepare_workspace(const fmha_bwd_plan *plan, void *workspace,
                                                size_t workspace_size, const int32_t *seqstart_q,
                                                const int32_t *seqstart_k, void *stream);
/* Stream-ordered form: memset, seqstarts copied to the caller's pinned
 * `staging` (plan.staging_size bytes, from hipHostMalloc/cudaHostAlloc), the
 * tables packed on the host in a stream callback, copied back. No host-side
 * blocking; safe under graph capture (replays read the seqstarts of the
 * replay). The staging memory must outlive the stream work (and the graph),
 * and one staging buffer serves one prepare in flight at a time. Seqstarts
 * that break the plan's bounds cannot be reported from the stream: those
 * batch entries get no splits and the backward leaves their gradients
 * unwritten. */
FMHA_API fmha_status fmha_bwd_prepare_workspace_async(const fmha_bwd_plan *plan, void *workspace,
                                                      size_t workspace_size,
                                                      const int32_t *seqstart_q,
                                                      const int32_t *seqstart_k, void *staging,
                                                      void *stream);
/* Device form: one kernel on `stream` builds the tables from the seqstarts
 * in device memory (the same tables as the host packing). No host memory, no
 * host read or synchronisation: safe under graph capture (replays read the
 * seqstarts of the replay); the form frameworks use. Seqstarts that break the
 * plan's bounds are handled as in the stream-ordered form. */
FMHA_API fmha_status fmha_bwd_prepare_workspace_device(const fmha_bwd_plan *plan, void *workspace,
                                                       size_t workspace_size,
                                                       const int32_t *seqstart_q,
                                                       const int32_t *seqstart_k, void *stream);
/* Validates the args against the plan and runs dot_do_o, dq_dk_dv and
 * convert_dq on `stream` (no allocation, no host synchronisation). */
FMHA_API fmha_status fmha_bwd(const fmha_bwd_plan *plan, const fmha_bwd_args *args, void *stream);

/* Registry: kernels of a set, and a JSON description of them. */
FMHA_API int fmha_set_size(const fmha_kernel_set *set);
FMHA_API const fmha_kernel_info *fmha_set_kernel(const fmha_kernel_set *set, int i);
/* Writes at most `cap` bytes (NUL-terminated when cap > 0); returns the length
 * the full text needs, excluding the NUL. */
FMHA_API size_t fmha_set_json(const fmha_kernel_set *set, char *buf, size_t cap);

/* ----------------------------------------------------------------------------
 * Shared library (make lib: build/libfmha_tile.so). It is built from one
 * translation unit that declares the library's default kernel set; C programs
 * define FMHA_TILE_LINK_SHARED, include this header and link it.
 * ------------------------------------------------------------------------- */
#if defined(FMHA_TILE_LINK_SHARED) || defined(FMHA_TILE_BUILD_SHARED)
FMHA_API const fmha_kernel_set *fmha_default_kernel_set(void);
/* The decode set (FMHA_DEFAULT_DECODE_SET), for fmha_decode_plan_make and
 * fmha_decode. */
FMHA_API const fmha_kernel_set *fmha_default_decode_kernel_set(void);
FMHA_API const char *fmha_version(void);
#endif

#ifdef __cplusplus
}
#endif
#endif /* FMHA_TILE_API_H */
