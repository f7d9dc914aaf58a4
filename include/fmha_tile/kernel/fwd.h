/*
 * Forward family, host side: argument validation and kernel parameters.
 *
 * fmhai_fwd_validate() is the one place that decides whether a forward call is
 * well formed; every entry point runs it before selection, and nothing is
 * launched when it fails. fmhai_fwd_make_params() then turns the caller's
 * arguments into the kernel parameter block (pre-folded scales, normalised
 * window). Pure C: it compiles without a device compiler, so the host unit
 * tests exercise it directly.
 */
#ifndef FMHA_TILE_KERNEL_FWD_H
#define FMHA_TILE_KERNEL_FWD_H

#include <math.h>
#include <string.h>
#include "../api.h"
#include "fwd_params.h"
#include "../dispatch/error.h"

/* Grid y and z carry heads and batch entries. */
#define FMHAI_GRID_YZ_MAX 65535

static inline int fmhai_misaligned(const void *ptr) { return ((uintptr_t)ptr & 15u) != 0; }

/* Checks every family shares: heads, head dims, scale, soft cap, mask.
 * Head dims: hdim_v may be below hdim_q (MLA prefill: 192 and 128) in the
 * families that pass unequal_ok (the 16-bit forward); never above it: every
 * kernel pads V to at most its Q width, and no model asks for more. */
static inline fmha_status fmhai_validate_dims(const char *fam, int batch, int nhead_q,
                                              int nhead_k, int hdim_q, int hdim_v, float scale,
                                              float softcap, fmha_mask_type mask, int wl, int wr,
                                              int unequal_ok)
{
    if (batch < 0 || nhead_q <= 0 || nhead_k <= 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: batch must be >= 0 and nhead_q, nhead_k > 0 (got %d, %d, %d)",
                          fam, batch, nhead_q, nhead_k);
    if (nhead_q % nhead_k != 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: nhead_q (%d) must be a multiple of nhead_k (%d)",
                          fam, nhead_q, nhead_k);
    if (hdim_q <= 0 || hdim_v <= 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: head dims must be > 0 (got %d, %d)", fam, hdim_q, hdim_v);
    if (hdim_q > 256 || hdim_q % 8 != 0)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: head dim %d not supported (a multiple of 8, at most 256)",
                          fam, hdim_q);
    if (hdim_v != hdim_q && !unequal_ok)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: hdim_v (%d) must equal hdim_q (%d)", fam, hdim_v, hdim_q);
    if (hdim_v > hdim_q || hdim_v % 8 != 0)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED,
                          "%s: hdim_v %d not supported with hdim_q %d (a multiple of 8, at most hdim_q)",
                          fam, hdim_v, hdim_q);
    if (!(scale > 0.f) || isinf(scale))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: scale must be finite and > 0", fam);
    if (!(softcap >= 0.f) || isinf(softcap))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: logits_soft_cap must be finite and >= 0", fam);
    if (mask != FMHA_MASK_NONE && mask != FMHA_MASK_TOP_LEFT && mask != FMHA_MASK_BOTTOM_RIGHT)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: unknown mask_type %d", fam, (int)mask);
    if (mask != FMHA_MASK_NONE && (wl < -1 || wr < -1))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: window sizes must be >= -1 (got %d, %d)", fam, wl, wr);
    if (nhead_q > FMHAI_GRID_YZ_MAX || batch > FMHAI_GRID_YZ_MAX)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: at most %d heads and batch entries", fam, FMHAI_GRID_YZ_MAX);
    return FMHA_OK;
}

/* The families with one head dim (hdim_v == hdim_q). */
static inline fmha_status fmhai_validate_common(const char *fam, int batch, int nhead_q,
                                                int nhead_k, int hdim_q, int hdim_v, float scale,
                                                float softcap, fmha_mask_type mask, int wl, int wr)
{
    return fmhai_validate_dims(fam, batch, nhead_q, nhead_k, hdim_q, hdim_v, scale, softcap, mask, wl, wr, 0);
}

/* Strides (elements) must keep every 16-byte copy aligned: multiples of
 * `per16` elements (8 for 16-bit types, 16 for fp8). */
static inline fmha_status fmhai_validate_strides(const char *fam, const int64_t *s, int n, int per16)
{
    int i;
    for (i = 0; i < n; ++i)
        if (s[i] % per16 != 0)
            return fmhai_fail(FMHA_ERR_UNSUPPORTED,
                              "%s: strides must be multiples of %d elements (16 bytes); stride #%d is %lld",
                              fam, per16, i, (long long)s[i]);
    return FMHA_OK;
}

/* Bytes of one bias element (fp16/bf16: 2, fp32: 4). */
static inline int fmhai_bias_esize(fmha_dtype dt) { return dt == FMHA_DTYPE_FP32 ? 4 : 2; }


static inline fmha_status fmhai_fwd_validate(const fmha_fwd_args *a)
{
    fmha_status st;
    if (!a) return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: args is NULL");
    const int fp8 = a->dtype == FMHA_DTYPE_FP8;
    if (a->dtype != FMHA_DTYPE_FP16 && a->dtype != FMHA_DTYPE_BF16 && !fp8)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fwd: dtype %d not supported (fp16, bf16 or fp8)", (int)a->dtype);
    if (!fp8 && (a->q_descale || a->k_descale || a->v_descale))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: q/k/v descales need dtype fp8");
    if (((uintptr_t)a->q_descale | (uintptr_t)a->k_descale | (uintptr_t)a->v_descale) & 3u)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: descale pointers must be 4-byte aligned");
    if (a->descale_batch_stride < 0 || a->descale_head_stride < 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: descale strides must be >= 0 (got %lld, %lld)",
                          (long long)a->descale_batch_stride, (long long)a->descale_head_stride);
    if (!fp8 && (a->descale_batch_stride || a->descale_head_stride))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: descale strides need dtype fp8");
    /* hdim_v < hdim_q: 16-bit only (the e4m3 forward has Hopper rows of one
     * head dim) */
    st = fmhai_validate_dims("fwd", a->batch, a->nhead_q, a->nhead_k, a->hdim_q, a->hdim_v, a->scale,
                             a->logits_soft_cap, a->mask_type, a->window_left, a->window_right, !fp8);
    if (st != FMHA_OK) return st;
    if (fp8 && a->hdim_q % 16 != 0)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fwd: fp8 needs a head dim divisible by 16 (got %d)", a->hdim_q);
    if (a->is_group_mode) {
        if (a->max_seqlen_q < 0)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: max_seqlen_q must be >= 0 (got %d)", a->max_seqlen_q);
        if (a->batch > 0 && (!a->seqstart_q || !a->seqstart_k))
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: group mode needs seqstart_q and seqstart_k");
    } else if (a->seqlen_q < 0 || a->seqlen_k < 0) {
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: sequence lengths must be >= 0 (got %d, %d)",
                          a->seqlen_q, a->seqlen_k);
    }
    if (!a->q || !a->k || !a->v || !a->o)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: q, k, v and o must not be NULL");
    if (fmhai_misaligned(a->q) || fmhai_misaligned(a->k) || fmhai_misaligned(a->v) || fmhai_misaligned(a->o))
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fwd: q, k, v, o must be 16-byte aligned");
    {
        const int64_t s[12] = { a->stride_q, a->nhead_stride_q, a->batch_stride_q,
                                a->stride_k, a->nhead_stride_k, a->batch_stride_k,
                                a->stride_v, a->nhead_stride_v, a->batch_stride_v,
                                a->stride_o, a->nhead_stride_o, a->batch_stride_o };
        /* 16-byte rows: 8 elements of 16 bits, 16 of fp8 (O is bf16) */
        st = fmhai_validate_strides("fwd", s, 9, fp8 ? 16 : 8);
        if (st == FMHA_OK) st = fmhai_validate_strides("fwd", s + 9, 3, 8);
        if (st != FMHA_OK) return st;
    }
    if (a->alibi_slopes && ((uintptr_t)a->alibi_slopes & 3u))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: alibi_slopes must be 4-byte aligned");
    if (a->sinks && ((uintptr_t)a->sinks & 3u))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: sinks must be 4-byte aligned");
    if (!(a->dropout_p >= 0.f && a->dropout_p < 1.f))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: dropout_p must be in [0, 1) (got %g)", (double)a->dropout_p);
    if (fp8 && a->dropout_p > 0.f)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fwd: dropout with fp8 is not supported");
    if ((uintptr_t)a->dropout_rng & 7u)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: dropout_rng (device {seed, offset}) must be 8-byte aligned");
    if (a->bias) {
        const int bdt = (int)a->bias_dtype;
        if (bdt != FMHA_DTYPE_FP16 && bdt != FMHA_DTYPE_BF16 && bdt != FMHA_DTYPE_FP32)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: bias_dtype %d not supported (fp16, bf16 or fp32)", bdt);
        if ((uintptr_t)a->bias % (uintptr_t)fmhai_bias_esize(a->bias_dtype))
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: bias must be aligned to its element size (%d bytes)",
                              fmhai_bias_esize(a->bias_dtype));
        if (a->stride_bias < 0 || a->nhead_stride_bias < 0 || a->batch_stride_bias < 0)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: bias strides must be >= 0");
        if (fp8)
            return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fwd: an elementwise bias with fp8 is not supported");
        if (a->alibi_slopes)
            return fmhai_fail(FMHA_ERR_UNSUPPORTED,
                              "fwd: bias and alibi_slopes together are not supported (one bias column: "
                              "NOALIBI, ALIBI or BIAS)");
    }
    return FMHA_OK;
}

/* Nothing to compute: validation passed but no query row exists. */
static inline int fmhai_fwd_is_empty(const fmha_fwd_args *a)
{
    if (a->batch == 0) return 1;
    return a->is_group_mode ? a->max_seqlen_q == 0 : a->seqlen_q == 0;
}

static inline int fmhai_fwd_max_seqlen_q(const fmha_fwd_args *a)
{
    return a->is_group_mode ? a->max_seqlen_q : a->seqlen_q;
}

/* A window bound so large it cannot matter is "unbounded" (keeps the kernels'
 * 32-bit index sums from overflowing). */
static inline int fmhai_norm_window(int w) { return w > (1 << 29) ? -1 : w; }

/* The mask and the pre-folded softmax scales of a call (every forward
 * family's parameter block): (-1, -1) with a mask type is no mask. */
static inline void fmhai_params_mask_scale(fmhai_fwd_params *p, fmha_mask_type mask, int wl, int wr, float scale,
                                           float softcap)
{
    const float log2e = 1.4426950408889634f;
    p->mask_kind = (int)mask;
    p->window_left = fmhai_norm_window(wl);
    p->window_right = fmhai_norm_window(wr);
    if (mask != FMHA_MASK_NONE && p->window_left < 0 && p->window_right < 0)
        p->mask_kind = FMHA_MASK_NONE;   /* (-1, -1) sees everything */
    p->scale_log2 = scale * log2e;
    if (softcap > 0.f) {
        p->softcap_pre = scale / softcap;
        p->softcap_post_log2 = softcap * log2e;
    }
}

/* K/V bytes a launch-order group may keep in the L2 (fmhai_fwd_lpt_pairs):
 * about two thirds of the H100's and H200's 50 MB, the rest for Q, O and
 * what the next group starts reading */
#ifndef FMHAI_FWD_LPT_L2
#define FMHAI_FWD_LPT_L2 (32 << 20)
#endif

/* Launch-order groups (fmhai_fwd_block_map), forward and backward: a mask
 * of causal type (keys up to a right bound, none on the left) gives the
 * first or last tile of each pair or unit the most work ... */
static inline int fmhai_lpt_causal(int mask_kind, int window_left, int window_right)
{
    return mask_kind != FMHA_MASK_NONE && window_left < 0 && window_right >= 0;
}

/* ... and a group holds as many of the units as keep unit_bytes each
 * within FMHAI_FWD_LPT_L2 (at least one, at most all of them). */
static inline int fmhai_lpt_group(int64_t unit_bytes, int64_t units)
{
    const int64_t g = (int64_t)FMHAI_FWD_LPT_L2 / (unit_bytes > 1 ? unit_bytes : 1);
    return (int)(g < 1 ? 1 : g > units ? units : g);
}

/* Launch-order groups for an elementwise bias (batch mode; forward and
 * backward) that several blocks' (head, entry) units read and the L2 budget
 * cannot hold: 1 shared by the `heads` units of an entry (head stride 0),
 * units head fastest; 2 a bias per head shared by the batch entries (batch
 * stride 0; the heads' bias bytes past the budget), units entry fastest, so
 * that the entries of a head read each bias tile at about the same time;
 * 0 otherwise. */
static inline int fmhai_bias_sharing(const void *bias, fmha_dtype dt, int s_q, int s_k, int64_t head_stride,
                                     int64_t batch_stride, int heads, int nhead_q, int batch)
{
    const int64_t bytes = (int64_t)s_q * s_k * fmhai_bias_esize(dt);
    if (!bias) return 0;
    if (head_stride == 0 && heads > 1 && bytes > (int64_t)FMHAI_FWD_LPT_L2) return 1;
    if (batch_stride == 0 && batch > 1 && bytes * (head_stride ? nhead_q : 1) > (int64_t)FMHAI_FWD_LPT_L2) return 2;
    return 0;
}

/* The Hopper forward's groups (fmhai_fwd_block_of; batch mode): (batch,
 * head) pairs, each with its share of a KV head's K/V (s_k keys, esize
 * bytes an element, shared by head_ratio query heads), under a
 * causal-type mask, or with bias_shared (an elementwise bias that several
 * pairs read, larger than the budget: the pairs of a group that share it
 * then read each bias tile at about the same time, once from DRAM). 0
 * (pair after pair) otherwise. */
static inline int fmhai_fwd_lpt_pairs(const fmhai_fwd_params *p, int pairs, int s_k, int esize, int bias_shared)
{
    if ((!fmhai_lpt_causal(p->mask_kind, p->window_left, p->window_right) && !bias_shared) || pairs <= 1) return 0;
    return fmhai_lpt_group((int64_t)(s_k > 1 ? s_k : 1) * (p->d + p->dv) * esize / p->head_ratio, pairs);
}

static inline void fmhai_fwd_make_params(const fmha_fwd_args *a, int tile_m, fmhai_fwd_params *p)
{
    memset(p, 0, sizeof(*p));
    p->q = a->q; p->k = a->k; p->v = a->v; p->o = a->o; p->lse = a->lse;
    p->seqstart_q = a->is_group_mode ? a->seqstart_q : 0;
    p->seqstart_k = a->is_group_mode ? a->seqstart_k : 0;
    p->alibi_slopes = a->alibi_slopes;
    p->sinks = a->sinks;
    p->dropout_thr = fmhai_dropout_threshold(a->dropout_p);
    p->dropout_scale = fmhai_dropout_scale(p->dropout_thr);
    p->dropout_seed = a->dropout_seed;
    p->dropout_offset = a->dropout_offset;
    p->dropout_rng = a->dropout_rng;
    p->q_row = a->stride_q; p->q_head = a->nhead_stride_q; p->q_batch = a->batch_stride_q;
    p->k_row = a->stride_k; p->k_head = a->nhead_stride_k; p->k_batch = a->batch_stride_k;
    p->v_row = a->stride_v; p->v_head = a->nhead_stride_v; p->v_batch = a->batch_stride_v;
    p->v_kmajor = a->v_kmajor != 0;
    p->o_row = a->stride_o; p->o_head = a->nhead_stride_o; p->o_batch = a->batch_stride_o;
    p->lse_head = a->nhead_stride_lse; p->lse_batch = a->batch_stride_lse;
    p->alibi_batch = a->alibi_batch_stride;
    if (a->bias) {
        p->bias = a->bias;
        p->bias_dt = (int)a->bias_dtype;
        p->bias_row = a->stride_bias; p->bias_head = a->nhead_stride_bias;
        p->bias_batch = a->is_group_mode ? 0 : a->batch_stride_bias;
        /* column pairs (j even) load as one 4- or 8-byte word when every row
         * start is aligned to two elements */
        p->bias_pair = (uintptr_t)a->bias % (2u * (uintptr_t)fmhai_bias_esize(a->bias_dtype)) == 0 &&
                       p->bias_row % 2 == 0 && p->bias_head % 2 == 0 && p->bias_batch % 2 == 0;
    }
    p->seqlen_q = a->seqlen_q; p->seqlen_k = a->seqlen_k;
    p->nhead_q = a->nhead_q; p->head_ratio = a->nhead_q / a->nhead_k;
    p->d = a->hdim_q;
    p->dv = a->hdim_v;
    p->m_blocks = (fmhai_fwd_max_seqlen_q(a) + tile_m - 1) / tile_m;
    p->q_fp8 = a->dtype == FMHA_DTYPE_FP8;
    p->q_descale = a->q_descale; p->k_descale = a->k_descale; p->v_descale = a->v_descale;
    p->desc_batch = a->descale_batch_stride; p->desc_head = a->descale_head_stride;
    fmhai_params_mask_scale(p, a->mask_type, a->window_left, a->window_right, a->scale, a->logits_soft_cap);
    /* batch mode only: in group mode the key counts are on the device, and
     * a group sized without them measured 3% slower (hdim 128 causal prefill
     * shape: more pairs at once than the L2 holds) */
    if (!a->is_group_mode) {
        const int shared = fmhai_bias_sharing(a->bias, a->bias_dtype, a->seqlen_q, a->seqlen_k, a->nhead_stride_bias,
                                              a->batch_stride_bias, a->nhead_q, a->nhead_q, a->batch);
        p->lpt_pairs = fmhai_fwd_lpt_pairs(p, a->batch * a->nhead_q, a->seqlen_k, a->dtype == FMHA_DTYPE_FP8 ? 1 : 2,
                                           shared != 0);
        p->pairs_bfast = shared == 2 && p->lpt_pairs > 1;
    }
}

#endif /* FMHA_TILE_KERNEL_FWD_H */
