/*
 * Backward kernel parameters: what the host hands each of the three backward
 * kernels (dot_do_o, dq_dk_dv, convert_dq).
 *
 * Built once per call by fmhai_bwd_make_params() from the validated
 * fmha_bwd_args and the plan. Strides stay 64-bit and every global offset is
 * formed in 64 bits. The workspace appears here already carved into its
 * regions (see kernel/bwd.h for the layout); the kernels never compute it.
 */
#ifndef FMHA_TILE_BWD_PARAMS_H
#define FMHA_TILE_BWD_PARAMS_H

#include "../api.h"

/* (also defined, the same, by fwd_params.h) */
#ifndef FMHAI_ALIGN64
#  if defined(__cplusplus)
#    define FMHAI_ALIGN64 alignas(64)
#  else
#    define FMHAI_ALIGN64 _Alignas(64)
#  endif
#endif

typedef struct fmhai_bwd_params {
    const void *q, *k, *v, *o, *dout;
    const float *lse;
    void *dq, *dk, *dv;
    const int32_t *seqstart_q, *seqstart_k;  /* NULL in batch mode                  */
    const int32_t *ws_nsplits;   /* group mode: dq_acc slices per entry (workspace) */
    const int64_t *ws_offsets;   /* group mode: first dq_acc element of each entry  */
    float *dq_acc;               /* fp32 [entry][nhead_q][nsplits][s_q][d]; NULL
                                    when dQ is written directly                     */
    float *dsum;                 /* D = rowsum(dO * O): [batch][nhead_q][s_q] in
                                    batch mode, [nhead_q][dsum_rows] in group mode  */
    int32_t *dq_sem;             /* deterministic: a counter per dq_acc row (its
                                    element offset / d); NULL otherwise            */
    int64_t q_row, q_head, q_batch;
    int64_t k_row, k_head, k_batch;
    int64_t v_row, v_head, v_batch;
    int64_t o_row, o_head, o_batch;
    int64_t do_row, do_head, do_batch;
    int64_t dq_row, dq_head, dq_batch;
    int64_t dk_row, dk_head, dk_batch;
    int64_t dv_row, dv_head, dv_batch;
    int64_t lse_head, lse_batch;
    int64_t dsum_rows;           /* group mode: D rows per head (the plan's total_q) */
    int seqlen_q, seqlen_k;      /* batch mode lengths                              */
    int nhead_q, head_ratio;     /* head_ratio = nhead_q / nhead_k                  */
    int d;                       /* problem head dim (<= kernel head dim)           */
    int hdv;                     /* of V, O, dO and dV (<= d): their copies are
                                    zero-filled past it, dV stores stop there   */
    int nsplits;                 /* batch mode: dq_acc slices per entry; group
                                    mode: the most any entry has                    */
    int deterministic;           /* key tile n adds into slice n % nsplits, after
                                    the slice's earlier key tiles (dq_sem)          */
    int dq_direct;               /* dq_dk_dv writes dQ (one key tile per sequence)  */
    int batch;
    int unit_rows;               /* 0: one (KV head, entry) unit per block (grid
                                    y = KV heads, z = entries); else grid y rows
                                    of blocks walk the units (deterministic)       */
    int det_rot;                 /* deterministic: every key tile of a unit can run
                                    at once, so sweeps without a mask may rotate
                                    (fmhai_bwd_tile_of)                           */
    int lpt_units;               /* one unit a block: units a launch-order group
                                    (fmhai_bwd_block_of); 0: unit after unit      */
    int units_bfast;             /* units numbered batch entry fastest (a bias per
                                    head shared by the entries); else KV head fastest */
    int mask_kind;               /* fmha_mask_type (NONE when the window is (-1,-1)) */
    int window_left, window_right;
    const float *alibi_slopes;   /* ALiBi rows: [nhead_q] or [batch][nhead_q]       */
    int64_t alibi_batch;         /* slopes' batch stride (0: shared)                */
    float scale;                 /* dQ and dK scale                                 */
    float scale_log2;            /* scale * log2(e)                                 */
    float softcap_pre;           /* scale / cap        (soft cap on)                */
    float softcap_post_log2;     /* cap * log2(e)      (soft cap on)                */
    /* dropout (dq_dk_dv, portable pipeline): element (i, j) kept when its
     * Philox byte >= dropout_thr (0: no dropout, the kernels skip it all);
     * dropout_scale = 256 / (256 - thr) (exactly 1 without dropout); seed
     * and offset from dropout_rng (device {seed, offset}) when it is set */
    uint32_t dropout_thr;
    float dropout_scale;
    uint64_t dropout_seed, dropout_offset;
    const uint64_t *dropout_rng;
    /* elementwise bias (BIAS rows): element (b_eff, h, q_start + i, j) at
     * bias + b_eff * bias_batch + h * bias_head + (q_start + i) * bias_row
     * + j elements of bias_dt. dbias (NULL: not wanted) the same way, of
     * dbias_dt: the caller's dbias, or the workspace's fp32 sum (kernel/
     * bwd.h), added into with atomics when dbias_atomic */
    const void *bias;
    int64_t bias_row, bias_head, bias_batch;
    void *dbias;
    int64_t dbias_row, dbias_head, dbias_batch;
    int bias_dt, dbias_dt, dbias_atomic;
} fmhai_bwd_params;

/* The Hopper dq_dk_dv's parameters (its rows' kernels take this, the others
 * fmhai_bwd_params): the common ones first, so the body gets a pointer to
 * them, then TMA tensor maps (CUtensorMap, dispatch/tma.h) of Q and dO
 * (dims (d, rows, nhead_q, batch), boxes of 128 bytes x tile_m rows) and of
 * K and V (nhead_k, tile_n rows), valid when tma is set; else, and for
 * tiles that end past their sequence, cp.async copies; and of a BIAS
 * row's bias (tma_bias). Kept out of
 * fmhai_bwd_params: its 64-byte alignment let the compiler merge the
 * portable kernels' parameter loads, and their hdim-256 spills grew 4x. */
typedef struct fmhai_bwd90_params {
    fmhai_bwd_params p;
    int tma;
    FMHAI_ALIGN64 uint64_t tma_q[16];
    FMHAI_ALIGN64 uint64_t tma_do[16];
    FMHAI_ALIGN64 uint64_t tma_k[16];
    FMHAI_ALIGN64 uint64_t tma_v[16];
    /* BIAS rows: the 16-bit bias as (s_k, rows, heads, batch), boxes of 64
     * keys x tile_m rows (dispatch/tma.h, fmhai_bwd_tma_bias); tma_bias 0:
     * the bias words are loaded one by one (fp32, strides TMA cannot take) */
    int tma_bias;
    FMHAI_ALIGN64 uint64_t tma_b[16];
} fmhai_bwd90_params;

#endif /* FMHA_TILE_BWD_PARAMS_H */
