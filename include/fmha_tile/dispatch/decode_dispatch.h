/*
 * Decode plans: the two-stage split-KV forward (attention kernel, then the
 * combine) as one plan.
 *
 * fmha_decode_plan_make validates a call, selects the attention kernel with
 * the registry's rules (family DECODE; a problem's rows are its query rows
 * times the query heads per KV head), picks the split count and reports the
 * workspace size. The split count is the caller's (num_splits > 0) or
 * fmhai_splitkv_heuristic's over the block slots of the device (SMs x the
 * kernel's blocks per SM), the blocks of the call (batch x KV heads x
 * query tiles) and the key tiles of max_seqlen_k. fmha_decode_run checks
 * that the call has the plan's shape and the workspace is big enough, then
 * launches the attention kernel (grid: query tiles x splits, KV heads,
 * batch) and, with more than one split, the combine (kernel/combine.h).
 * Nothing is allocated and nothing waits for the device, so a run can be
 * captured in a graph; a plan serves every call of its shape (every layer
 * of a model step).
 */
#ifndef FMHA_TILE_DECODE_DISPATCH_H
#define FMHA_TILE_DECODE_DISPATCH_H

#include "../kernel/decode.h"
#include "../kernel/combine.h"
#include "../kernel/appendkv.h"
#include "registry.h"

static inline void fmhai_decode_problem(const fmha_decode_args *a, fmhai_problem *pb)
{
    memset(pb, 0, sizeof(*pb));
    pb->family = FMHA_FAMILY_DECODE;
    pb->dtype = a->kv_dtype == FMHA_DTYPE_FP8 ? FMHA_DTYPE_FP8 : a->q_dtype;
    pb->q8 = a->q_dtype == FMHA_DTYPE_FP8;
    pb->hdim = a->hdim_q;
    pb->masked = a->mask_type != FMHA_MASK_NONE &&
                 (fmhai_norm_window(a->window_left) >= 0 || fmhai_norm_window(a->window_right) >= 0);
    pb->mask_type = a->mask_type;
    pb->softcap = a->logits_soft_cap > 0.f;
    pb->alibi = a->alibi_slopes != 0;
    pb->page_size = a->is_paged ? a->page_size : 0;
    pb->kv_layout = a->is_paged ? (int)a->kv_layout : (int)FMHA_KV_LAYOUT_LINEAR;
    pb->max_seqlen_q = a->seqlen_q * (a->nhead_q / a->nhead_k);
}

/* Blocks of a kernel one SM holds (shared memory, threads, 32 blocks). */
static inline int fmhai_blocks_per_sm(const fmhai_entry *e, const fmhai_device *d)
{
    const int smem_sm = d->smem_optin + 1024;   /* per-SM capacity: the opt-in limit plus the reserve */
    int by_smem = smem_sm / (e->smem_bytes + 1024), by_threads = 2048 / (e->info.warps * 32), n;
    n = by_smem < by_threads ? by_smem : by_threads;
    if (n > 32) n = 32;
    return n < 1 ? 1 : n;
}

/* Plan with a split count request (0: the heuristic). */
static inline fmha_status fmhai_decode_plan(const fmha_kernel_set *set, const fmha_decode_args *a, int splits,
                                            fmha_decode_plan *plan)
{
    fmhai_problem pb;
    fmhai_device dev = { 0, 0, 0, 0 };
    int i = -1, ordinal = 0, m_blocks, ratio;
    const fmhai_entry *e;
    fmha_status st;
    if (!set) return fmhai_fail(FMHA_ERR_INVALID_ARG, "decode: kernel set is NULL");
    if (!plan) return fmhai_fail(FMHA_ERR_INVALID_ARG, "decode: plan is NULL");
    st = fmhai_decode_validate(a, 1);
    if (st != FMHA_OK) return st;
    fmhai_decode_problem(a, &pb);
    st = fmhai_select(set, &pb, &i);
    if (st != FMHA_OK) return st;
    st = fmhai_current_device(&dev, &ordinal);
    if (st != FMHA_OK) return st;
    e = &set->entries[i];
    ratio = a->nhead_q / a->nhead_k;
    m_blocks = (a->seqlen_q * ratio + e->info.tile_m - 1) / e->info.tile_m;
    if (splits <= 0) {
        const int n_tiles = (a->max_seqlen_k + e->info.tile_n - 1) / e->info.tile_n;
        /* 16-bit KV: two blocks per SM keep enough copies in flight and more
         * splits only add start-up and combine work; e4m3 KV decodes every
         * byte in registers and wants every block slot (bench/RESULTS.md) */
        const int slots = fmhai_blocks_per_sm(e, &dev);
        const int per_sm = a->kv_dtype == FMHA_DTYPE_FP8 || slots < 2 ? slots : 2;
        const int blocks = a->batch * a->nhead_k * m_blocks;
        splits = fmhai_splitkv_heuristic(dev.sms * per_sm, blocks, n_tiles, FMHA_SPLITKV_MAX_SPLITS);
        splits = fmhai_splitkv_fill_waves(dev.sms * slots, blocks, n_tiles, splits, FMHA_SPLITKV_MAX_SPLITS);
    }
    memset(plan, 0, sizeof(*plan));
    plan->kernel = &e->info;
    plan->combine = splits > 1 ? &fmhai_combine_info : 0;
    plan->num_splits = splits;
    plan->workspace_size = fmhai_splitkv_workspace_bytes(fmhai_decode_rows(a), a->hdim_v, splits);
    plan->grid_x = m_blocks * splits;
    plan->grid_y = a->nhead_k;
    plan->grid_z = a->batch;
    plan->block = e->info.warps * 32;
    plan->why = "portable pipeline (mma.sync): decode reads K/V once per KV head and is bound by memory";
    plan->batch_ = a->batch;
    plan->nhead_q_ = a->nhead_q;
    plan->nhead_k_ = a->nhead_k;
    plan->seqlen_q_ = a->seqlen_q;
    plan->hdim_ = a->hdim_q;
    plan->dtypes_ = (int)a->q_dtype * 16 + (int)a->kv_dtype;
    plan->paged_ = a->is_paged ? 1 + (int)a->kv_layout : 0;
    plan->set_ = set;
    plan->entry_ = i;
    return FMHA_OK;
}

FMHA_API fmha_status fmha_decode_plan_make(const fmha_kernel_set *set, const fmha_decode_args *args,
                                           fmha_decode_plan *plan)
{
    if (!args) return fmhai_fail(FMHA_ERR_INVALID_ARG, "decode: args is NULL");
    return fmhai_decode_plan(set, args, args->num_splits, plan);
}

#if defined(FMHAI_AUX_KERNELS)
/* Whether the combine may start as a programmatic dependent of the split
 * kernel: only where its loaded binary was compiled for sm_90+ and so waits
 * for the splits (fmhai_pdl_wait); a binary JIT-compiled from older PTX has
 * no wait and runs as a plain launch. Asked once per translation unit. */
static inline int fmhai_combine_dependent(void)
{
#  if defined(FMHA_PLATFORM_NVIDIA)
    static volatile int known = -1;   /* -1: not asked yet (a race only repeats the question) */
    if (known < 0) {
        cudaFuncAttributes fa;
        known = cudaFuncGetAttributes(&fa, (const void *)fmhai_splitkv_combine_kernel) == cudaSuccess &&
                fa.ptxVersion >= 90;
    }
    return known;
#  else
    return 0;
#  endif
}
#endif

/* Launch a validated call on its plan: append-KV and rotary (when asked),
 * the attention kernel, then (splits) the combine, which on sm_90 starts
 * while the attention kernel finishes (fmhai_launch_dependent). */
static inline fmha_status fmhai_decode_launch(const fmha_decode_plan *plan, const fmha_decode_args *a, void *stream)
{
    const fmha_kernel_set *set = plan->set_;
    const fmhai_entry *e = &set->entries[plan->entry_];
    fmhai_fwd_params p;
    fmha_status st = fmhai_splitkv_check(plan->num_splits, a->workspace, a->workspace_size, fmhai_decode_rows(a),
                                         a->hdim_v);
    if (st != FMHA_OK) return st;
    if (a->batch == 0) return FMHA_OK;
    fmhai_decode_make_params(a, e->info.tile_m, plan->num_splits, &p);
    /* VECTORIZED 16-bit pages: V^T by bulk copies where the TMA unit may be
     * used (the kernel's sm_90 code; FMHA_TILE_TMA=0: cp.async) */
    p.tma_kv = a->is_paged && a->kv_layout == FMHA_KV_LAYOUT_VECTORIZED && a->kv_dtype != FMHA_DTYPE_FP8 &&
               fmhai_tma_unit_ok();
    st = fmhai_appendkv_launch(a, &p, stream);   /* new rows and rotary first */
    if (st != FMHA_OK) return st;
    if (p.q_rope) p.q = p.q_rope;               /* the attention reads the rotated queries */
    /* as a programmatic dependent of the stream's previous kernel (the
     * append, or whatever ran before): the decode kernel waits for it before
     * its first read (fmhai_pdl_wait), its launch overlaps that kernel's tail */
    st = fmhai_launch_grid(set, plan->entry_, &p, p.m_blocks * plan->num_splits, a->nhead_k, a->batch, stream, 1);
    if (st != FMHA_OK || plan->num_splits == 1) return st;
#if !defined(FMHAI_AUX_KERNELS)
    return fmhai_fail(FMHA_ERR_LAUNCH, "built without the helper kernels (no device compiler, or FMHA_TILE_SETS_ONLY)");
#else
    {
        fmhai_combine_params c;
        void *kargs[1];
        hipError_t err;
        c.ws_lse = p.ws_lse;
        c.ws_o = p.ws_o;
        c.o = a->o;
        c.lse = a->lse;
        c.rows = p.ws_rows;
        c.splits = plan->num_splits;
        c.d = a->hdim_v;
        c.nhead_q = a->nhead_q;
        c.seqlen_q = a->seqlen_q;
        c.out_bf16 = a->q_dtype == FMHA_DTYPE_BF16 || a->kv_dtype == FMHA_DTYPE_FP8;
        c.o_row = a->stride_o; c.o_head = a->nhead_stride_o; c.o_batch = a->batch_stride_o;
        c.lse_head = a->nhead_stride_lse; c.lse_batch = a->batch_stride_lse;
        kargs[0] = &c;
        err = fmhai_launch_dependent((const void *)fmhai_splitkv_combine_kernel,
                                     dim3((unsigned)c.rows), dim3(FMHAI_COMBINE_GROUPS * 32), kargs, 0,
                                     (hipStream_t)stream,
                                     fmhai_combine_dependent());
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_LAUNCH, "%s: launch failed: %s", fmhai_combine_info.name,
                              hipGetErrorString(err));
        return FMHA_OK;
    }
#endif
}

FMHA_API fmha_status fmha_decode_run(const fmha_decode_plan *plan, const fmha_decode_args *a, void *stream)
{
    const fmhai_entry *e;
    fmhai_problem pb;
    fmha_status st;
    int nmiss = 0, ordinal = 0;
    fmhai_device dev = { 0, 0, 0, 0 };
    const char *field;
    if (!plan || !plan->set_ || plan->entry_ < 0 || plan->entry_ >= plan->set_->count)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "decode: plan is NULL or not made by fmha_decode_plan_make");
    st = fmhai_decode_validate(a, 1);
    if (st != FMHA_OK) return st;
    if (a->batch != plan->batch_ || a->nhead_q != plan->nhead_q_ || a->nhead_k != plan->nhead_k_ ||
        a->seqlen_q != plan->seqlen_q_ || a->hdim_q != plan->hdim_ ||
        (int)a->q_dtype * 16 + (int)a->kv_dtype != plan->dtypes_ ||
        (a->is_paged ? 1 + (int)a->kv_layout : 0) != plan->paged_)
        return fmhai_fail(FMHA_ERR_INVALID_ARG,
                          "decode: the call's shape (batch, heads, seqlen_q, head dim, dtypes, cache kind) "
                          "differs from the plan's");
    /* the plan's kernel must still serve this call's features (mask, soft cap,
     * page size may differ between calls of one shape) */
    e = &plan->set_->entries[plan->entry_];
    fmhai_decode_problem(a, &pb);
    st = fmhai_current_device(&dev, &ordinal);
    if (st != FMHA_OK) return st;
    field = fmhai_mismatch(e, &pb, &dev, &nmiss);
    if (field)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "decode: the plan's kernel %s does not serve this call (%s)",
                          e->info.name, field);
    return fmhai_decode_launch(plan, a, stream);
}

FMHA_API fmha_status fmha_decode(const fmha_kernel_set *set, const fmha_decode_args *args, void *stream)
{
    fmha_decode_plan plan;
    fmha_status st;
    if (!args) return fmhai_fail(FMHA_ERR_INVALID_ARG, "decode: args is NULL");
    st = fmhai_decode_plan(set, args, args->num_splits, &plan);
    if (st != FMHA_OK) return st;
    /* the heuristic's splits need a workspace: without one that holds them,
     * run unsplit */
    if (args->num_splits == 0 && plan.num_splits > 1 &&
        (!args->workspace || ((uintptr_t)args->workspace & 15u) || args->workspace_size < plan.workspace_size)) {
        st = fmhai_decode_plan(set, args, 1, &plan);
        if (st != FMHA_OK) return st;
    }
    return fmhai_decode_launch(&plan, args, stream);   /* the plan validated args */
}

FMHA_API fmha_status fmha_appendkv(const fmha_decode_args *args, void *stream)
{
    fmhai_fwd_params p;
    const fmha_status st = fmhai_decode_validate(args, 0);
    if (st != FMHA_OK) return st;
    if (args->batch == 0) return FMHA_OK;
    fmhai_decode_make_params(args, 16, 1, &p);
    return fmhai_appendkv_launch(args, &p, stream);
}

#endif /* FMHA_TILE_DECODE_DISPATCH_H */
