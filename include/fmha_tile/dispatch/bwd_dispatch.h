/*
 * Backward entry points: the plan (three stages selected from a kernel set,
 * the splits and the workspace size), the workspace preparation (synchronous
 * and stream-ordered), and the run.
 *
 * fmha_bwd_plan_make() selects each stage with the registry's one decision
 * function (fmhai_select: the same filtering and order-free score as the
 * forward), so a set that lacks a stage fails here, at plan time, with the
 * stage named. fmha_bwd() validates the args against the plan, then
 * launches dot_do_o, dq_dk_dv and convert_dq on the caller's stream (only
 * dq_dk_dv when the plan writes dQ directly); a call with dropout whose
 * plan picked a dq_dk_dv without it runs the set's portable row of the
 * same tile_n instead (fmhai_bwd_run_entry; the portable and Hopper
 * pipelines both have dropout).
 *
 * prepare_workspace_device launches one small kernel that builds the tables
 * from the seqstarts on the device (kernel/bwd_tables.h): no host memory,
 * no host read, capturable; the form to use under graph capture.
 * prepare_workspace_async enqueues: a memset of the workspace's tables, the
 * seqstarts copied into the caller's pinned staging memory, a host callback
 * that packs the tables there (its closure, fmhai_bwd_pack_job, lives in
 * that same caller-owned memory: nothing is allocated or freed by the
 * callback, so a captured graph can replay it any number of times), and the
 * copy of the packed tables back into the workspace.
 */
#ifndef FMHA_TILE_DISPATCH_BWD_DISPATCH_H
#define FMHA_TILE_DISPATCH_BWD_DISPATCH_H

#include <stdlib.h>
#include "../kernel/bwd.h"
#include "../kernel/bwd_sinks.h"
#include "../kernel/bwd_tables.h"
#include "../kernel/bwd_dbias.h"
#include "registry.h"

/* ---- plan --------------------------------------------------------------------- */
static inline void fmhai_bwd_problem(const fmha_bwd_traits *t, fmha_family fam, fmhai_problem *pb)
{
    memset(pb, 0, sizeof(*pb));
    pb->family = fam;
    pb->dtype = t->dtype;
    pb->hdim = t->hdim_q;
    pb->hdim_v = t->hdim_v;   /* a 192_128 row serves hdim_q <= 192 with hdim_v <= 128 */
    if (fam == FMHA_FAMILY_BWD || fam == FMHA_FAMILY_BWD_DET) {
        pb->masked = fmhai_bwd_masked(t->mask_type, t->window_left, t->window_right);
        pb->mask_type = t->mask_type;
        pb->softcap = t->has_logits_soft_cap != 0;
        pb->alibi = t->has_alibi != 0;
        pb->bias = t->has_bias != 0;
    }
    pb->max_seqlen_q = fmhai_bwd_max_sq(t);
}

static inline fmha_status fmhai_bwd_select_stage(const fmha_kernel_set *set, const fmha_bwd_traits *t,
                                                 fmha_family fam, int *chosen)
{
    fmhai_problem pb;
    fmha_status st;
    fmhai_bwd_problem(t, fam, &pb);
    st = fmhai_select(set, &pb, chosen);
    if (st != FMHA_OK) {
        char why[sizeof(fmhai_errbuf)];
        snprintf(why, sizeof(why), "%s", fmhai_errbuf);
        return fmhai_fail(st, "bwd: a plan needs all three stages (dot_do_o, dq_dk_dv, convert_dq); %s", why);
    }
    return FMHA_OK;
}

static inline int fmhai_bwd_plan_tile_n(const fmha_bwd_plan *plan)
{
    return plan->set_->entries[plan->entry_[1]].info.tile_n;
}

static inline void fmhai_bwd_plan_layout(const fmha_bwd_plan *plan, fmhai_bwd_layout *L)
{
    fmhai_bwd_layout_make(&plan->traits, plan->nsplits, plan->dq_direct, L);
}

FMHA_API fmha_status fmha_bwd_plan_make(const fmha_kernel_set *set, const fmha_bwd_traits *traits,
                                        fmha_bwd_plan *plan)
{
    int e[3] = { -1, -1, -1 };
    fmhai_bwd_layout L;
    fmha_status st;
    if (!plan) return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: plan is NULL");
    memset(plan, 0, sizeof(*plan));
    if (!set) return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: kernel set is NULL");
    st = fmhai_bwd_validate_traits(traits);
    if (st != FMHA_OK) return st;
    st = fmhai_bwd_select_stage(set, traits, FMHA_FAMILY_BWD_DOT_DO_O, &e[0]);
    /* deterministic plans take the ordered-dQ kernel (its own rows) */
    if (st == FMHA_OK)
        st = fmhai_bwd_select_stage(set, traits, traits->is_deterministic ? FMHA_FAMILY_BWD_DET : FMHA_FAMILY_BWD,
                                    &e[1]);
    if (st == FMHA_OK) st = fmhai_bwd_select_stage(set, traits, FMHA_FAMILY_BWD_CONVERT_DQ, &e[2]);
    if (st != FMHA_OK) return st;
    plan->traits = *traits;
    plan->set_ = set;
    plan->entry_[0] = e[0]; plan->entry_[1] = e[1]; plan->entry_[2] = e[2];
    plan->dot_do_o = &set->entries[e[0]].info;
    plan->dq_dk_dv = &set->entries[e[1]].info;
    plan->convert_dq = &set->entries[e[2]].info;
    plan->nsplits = fmhai_bwd_nsplits(traits, plan->dq_dk_dv->tile_n);
    plan->dq_direct = fmhai_bwd_dq_direct(traits, plan->dq_dk_dv->tile_n);
    fmhai_bwd_plan_layout(plan, &L);
    plan->workspace_size = L.total;
    plan->staging_size = fmhai_bwd_staging_size(traits, &L);
    return FMHA_OK;
}

/* ---- the dq_dk_dv kernel of a run ---------------------------------------------
 * The plan depends on the traits only; dropout comes with the args (the
 * forward's p and seed), so fmha_bwd checks that the plan's dq_dk_dv
 * pipeline has it and otherwise runs the set's best row of the same family
 * whose pipeline does (the portable one), with the plan's tile_n: the
 * splits, dQ-direct choice and workspace layout depend on tile_n alone, so
 * the plan's workspace serves it unchanged. A set without such a row fails
 * with FMHA_ERR_NO_KERNEL: never a kernel that would ignore the dropout. */

/* NULL when kernel k's pipeline serves a run with (drop) or without
 * dropout, else why not (FMHAI_BWD90_SERVES). */
static inline const char *fmhai_bwd_pipe_why_not(const fmha_kernel_info *k, int drop)
{
    if (k->arch == FMHA_ARCH_SM90A) {
#define FMHAI_SERVES_CHECK(name, cond, msg) if (!(cond)) return msg;
        FMHAI_BWD90_SERVES(FMHAI_SERVES_CHECK, drop)
#undef FMHAI_SERVES_CHECK
        return 0;   /* (drop: served) */
    }
    if (drop && strcmp(k->pipeline, "portable_mma") != 0)   /* a pipeline without dropout */
        return "portable pipeline: dropout (only the portable backward has it)";
    return 0;
}

/* The entry of the set that runs dq_dk_dv for the plan (drop: with
 * dropout); *why: NULL for the plan's own kernel, else the reason it was
 * passed over. */
static inline fmha_status fmhai_bwd_run_entry(const fmha_bwd_plan *plan, int drop, int *entry, const char **why)
{
    const fmha_kernel_set *set = plan->set_;
    const fmhai_entry *pe = &set->entries[plan->entry_[1]];
    fmhai_problem pb;
    fmhai_device dev = { 0, 0, 0, 0 };
    int ordinal = 0, best = -1, i;
    fmha_status st;
    *entry = plan->entry_[1];
    *why = fmhai_bwd_pipe_why_not(&pe->info, drop);
    if (!*why) return FMHA_OK;
    st = fmhai_current_device(&dev, &ordinal);
    if (st != FMHA_OK) return st;
    fmhai_bwd_problem(&plan->traits, pe->info.family, &pb);
    pb.dropout = drop;
    for (i = 0; i < set->count; ++i) {
        const fmhai_entry *e = &set->entries[i];
        int nmiss;
        if (!e->enabled || e->info.tile_n != pe->info.tile_n || fmhai_bwd_pipe_why_not(&e->info, drop) ||
            fmhai_mismatch(e, &pb, &dev, &nmiss) || !fmhai_entry_has_code(set, i, ordinal, &dev))
            continue;
        if (best < 0 || fmhai_cmp(e, &set->entries[best], &pb) < 0) best = i;
    }
    if (best < 0)
        return fmhai_fail(FMHA_ERR_NO_KERNEL,
                          "bwd: %s, and kernel set '%s' has no dq_dk_dv row that has it for this problem with the "
                          "plan's tile_n %d (the plan picked %s)",
                          *why, set->name, pe->info.tile_n, pe->info.name);
    *entry = best;
    return FMHA_OK;
}

/* ---- workspace preparation ---------------------------------------------------- */
static inline fmha_status fmhai_bwd_check_prepare(const fmha_bwd_plan *plan, const void *ws, size_t ws_size,
                                                  const int32_t *sq, const int32_t *sk)
{
    if (!plan || !plan->set_ || !plan->dq_dk_dv)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: plan is NULL or was not made by fmha_bwd_plan_make");
    if (plan->staging_size == 0) return FMHA_OK;   /* no tables (dq_direct) */
    if (!ws) return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: workspace is NULL (the plan needs %zu bytes)",
                               plan->workspace_size);
    if ((uintptr_t)ws % FMHAI_BWD_WS_ALIGN)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: workspace must be %d-byte aligned", FMHAI_BWD_WS_ALIGN);
    if (ws_size < plan->workspace_size)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: workspace of %zu bytes is smaller than the plan's %zu",
                          ws_size, plan->workspace_size);
    if (plan->traits.is_group_mode && plan->traits.batch > 0 && (!sq || !sk))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: group mode needs seqstart_q and seqstart_k to prepare "
                                                "the workspace");
    return FMHA_OK;
}

#if !defined(FMHA_PLATFORM_HOST_ONLY)
/* The stream callback: its closure is the job at the start of the staging. */
static void fmhai_bwd_pack_cb(void *staging) { fmhai_bwd_job_run((fmhai_bwd_pack_job *)staging); }

/* Enqueues the seqstart copies into the staging (group mode). */
static inline fmha_status fmhai_bwd_copy_seqstarts(const fmha_bwd_plan *plan, char *staging,
                                                   const int32_t *sq, const int32_t *sk, hipStream_t stream)
{
    const fmhai_bwd_pack_job *j = (const fmhai_bwd_pack_job *)staging;
    const size_t bytes = 4u * ((size_t)plan->traits.batch + 1u);
    hipError_t err;
    if (!plan->traits.is_group_mode) return FMHA_OK;
    err = hipMemcpyAsync(staging + j->sq_off, sq, bytes, hipMemcpyDeviceToHost, stream);
    if (err == hipSuccess) err = hipMemcpyAsync(staging + j->sk_off, sk, bytes, hipMemcpyDeviceToHost, stream);
    if (err != hipSuccess)
        return fmhai_fail(FMHA_ERR_DEVICE, "bwd: copying the seqstarts failed: %s", hipGetErrorString(err));
    return FMHA_OK;
}
#endif

FMHA_API fmha_status fmha_bwd_prepare_workspace(const fmha_bwd_plan *plan, void *workspace,
                                                size_t workspace_size, const int32_t *seqstart_q,
                                                const int32_t *seqstart_k, void *stream)
{
    fmha_status st = fmhai_bwd_check_prepare(plan, workspace, workspace_size, seqstart_q, seqstart_k);
    if (st != FMHA_OK || plan->staging_size == 0) return st;   /* no tables (dq_direct) */
#if defined(FMHA_PLATFORM_HOST_ONLY)
    (void)stream;
    return fmhai_fail(FMHA_ERR_LAUNCH, "bwd: built without a device compiler");
#else
    {
        fmhai_bwd_layout L;
        char *buf;
        fmhai_bwd_pack_job *j;
        hipError_t err;
        fmhai_bwd_plan_layout(plan, &L);
        buf = (char *)malloc(plan->staging_size);
        if (!buf) return fmhai_fail(FMHA_ERR_DEVICE, "bwd: out of host memory (%zu bytes)", plan->staging_size);
        fmhai_bwd_job_make(&plan->traits, &L, fmhai_bwd_plan_tile_n(plan), plan->nsplits, buf);
        j = (fmhai_bwd_pack_job *)buf;
        st = fmhai_bwd_copy_seqstarts(plan, buf, seqstart_q, seqstart_k, (hipStream_t)stream);
        if (st == FMHA_OK && hipStreamSynchronize((hipStream_t)stream) != hipSuccess)
            st = fmhai_fail(FMHA_ERR_DEVICE, "bwd: stream synchronisation failed: %s",
                            hipGetErrorString(hipGetLastError()));
        if (st == FMHA_OK) {
            fmhai_bwd_job_run(j);
            if (j->rejected)
                st = fmhai_fail(FMHA_ERR_INVALID_ARG,
                                "bwd: seqstarts break the plan's bounds in %d batch entries (a negative length, "
                                "or query rows past seqlen_q = %d)", j->rejected, plan->traits.seqlen_q);
        }
        if (st == FMHA_OK) {
            err = hipMemcpyAsync(workspace, buf + j->image_off, L.tables_bytes, hipMemcpyHostToDevice,
                                 (hipStream_t)stream);
            if (err == hipSuccess) err = hipStreamSynchronize((hipStream_t)stream);
            if (err != hipSuccess)
                st = fmhai_fail(FMHA_ERR_DEVICE, "bwd: writing the workspace tables failed: %s",
                                hipGetErrorString(err));
        }
        free(buf);
        return st;
    }
#endif
}

FMHA_API fmha_status fmha_bwd_prepare_workspace_async(const fmha_bwd_plan *plan, void *workspace,
                                                      size_t workspace_size, const int32_t *seqstart_q,
                                                      const int32_t *seqstart_k, void *staging,
                                                      void *stream)
{
    fmha_status st = fmhai_bwd_check_prepare(plan, workspace, workspace_size, seqstart_q, seqstart_k);
    if (st != FMHA_OK || plan->staging_size == 0) return st;   /* no tables (dq_direct) */
    if (!staging)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: prepare_workspace_async needs %zu bytes of pinned "
                                                "staging memory (staging is NULL)", plan->staging_size);
    if ((uintptr_t)staging & 15u)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: staging must be 16-byte aligned");
#if defined(FMHA_PLATFORM_HOST_ONLY)
    (void)stream;
    return fmhai_fail(FMHA_ERR_LAUNCH, "bwd: built without a device compiler");
#else
    {
        fmhai_bwd_layout L;
        const fmhai_bwd_pack_job *j = (const fmhai_bwd_pack_job *)staging;
        hipStream_t s = (hipStream_t)stream;
        hipError_t err;
        fmhai_bwd_plan_layout(plan, &L);
        fmhai_bwd_job_make(&plan->traits, &L, fmhai_bwd_plan_tile_n(plan), plan->nsplits, staging);
        err = hipMemsetAsync(workspace, 0, L.tables_bytes, s);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_DEVICE, "bwd: workspace memset failed: %s", hipGetErrorString(err));
        st = fmhai_bwd_copy_seqstarts(plan, (char *)staging, seqstart_q, seqstart_k, s);
        if (st != FMHA_OK) return st;
        err = hipLaunchHostFunc(s, fmhai_bwd_pack_cb, staging);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_DEVICE, "bwd: enqueueing the packing callback failed: %s",
                              hipGetErrorString(err));
        err = hipMemcpyAsync(workspace, (const char *)staging + j->image_off, L.tables_bytes,
                             hipMemcpyHostToDevice, s);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_DEVICE, "bwd: copying the workspace tables failed: %s",
                              hipGetErrorString(err));
        return FMHA_OK;
    }
#endif
}

FMHA_API fmha_status fmha_bwd_prepare_workspace_device(const fmha_bwd_plan *plan, void *workspace,
                                                       size_t workspace_size, const int32_t *seqstart_q,
                                                       const int32_t *seqstart_k, void *stream)
{
    fmha_status st = fmhai_bwd_check_prepare(plan, workspace, workspace_size, seqstart_q, seqstart_k);
    if (st != FMHA_OK || plan->workspace_size == 0) return st;
#if !defined(FMHAI_AUX_KERNELS)
    (void)stream;
    return fmhai_fail(FMHA_ERR_LAUNCH, "bwd: built without the helper kernels (no device compiler, or "
                                       "FMHA_TILE_SETS_ONLY)");
#else
    {
        fmhai_bwd_layout L;
        fmhai_bwd_tables_params t;
        void *kargs[1];
        hipError_t err;
        fmhai_bwd_plan_layout(plan, &L);
        memset(&t, 0, sizeof(t));
        t.is_group_mode = plan->traits.is_group_mode;
        t.sq = t.is_group_mode ? seqstart_q : 0;
        t.sk = t.is_group_mode ? seqstart_k : 0;
        t.nsplits = (int32_t *)((char *)workspace + L.nsplits_off);
        t.offsets = t.is_group_mode ? (int64_t *)((char *)workspace + L.offsets_off) : 0;
        t.total_q = plan->traits.seqlen_q;
        t.batch = plan->traits.batch;
        t.nhead_q = plan->traits.nhead_q;
        t.d = plan->traits.hdim_q;
        t.tile_n = fmhai_bwd_plan_tile_n(plan);
        t.ns_plan = plan->nsplits;
        t.deterministic = plan->traits.is_deterministic;
        kargs[0] = &t;
        err = hipLaunchKernel((const void *)fmhai_bwd_tables_kernel, dim3(1), dim3(FMHAI_BWD_TABLES_THREADS), kargs,
                              0, (hipStream_t)stream);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_LAUNCH, "bwd: launching the workspace tables kernel failed: %s",
                              hipGetErrorString(err));
        return FMHA_OK;
    }
#endif
}

/* ---- run ---------------------------------------------------------------------------- */
/* Launches entry i of the plan's set with grid (gx, gy, gz); p starts the
 * kernel's parameter (a Hopper dq_dk_dv's: the fmhai_bwd90_params it heads). */
static inline fmha_status fmhai_bwd_launch(const fmha_bwd_plan *plan, int i, fmhai_bwd_params *p, int gx,
                                           int gy, int gz, void *stream)
{
#if defined(FMHA_PLATFORM_HOST_ONLY)
    (void)plan; (void)i; (void)p; (void)gx; (void)gy; (void)gz; (void)stream;
    return fmhai_fail(FMHA_ERR_LAUNCH, "built without a device compiler");
#else
    const fmha_kernel_set *set = plan->set_;
    const fmhai_entry *e = &set->entries[i];
    fmhai_device dev;
    int ordinal = 0;
    void *kargs[1];
    hipError_t err;
    fmha_status st;
    kargs[0] = p;
    if (gx <= 0 || gy <= 0 || gz <= 0) return FMHA_OK;
    /* the plan may come from another device or thread: make sure the kernel
     * has code here and, once per device, raise its shared-memory limit */
    st = fmhai_current_device(&dev, &ordinal);
    if (st != FMHA_OK) return st;
    if (!fmhai_entry_has_code(set, i, ordinal, &dev))
        return fmhai_fail(FMHA_ERR_NO_KERNEL, "%s: the binary has no code of this kernel for the device",
                          e->info.name);
    if (e->smem_bytes > 48 * 1024 && !FMHAI_PROBE_SMEM_SET(set->probe[i])) {
        err = hipFuncSetAttribute(e->fn, hipFuncAttributeMaxDynamicSharedMemorySize, e->smem_bytes);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_LAUNCH, "%s: cannot set shared memory to %d bytes: %s", e->info.name,
                              e->smem_bytes, hipGetErrorString(err));
        set->probe[i] |= 1 << 11;
    }
    err = hipLaunchKernel(e->fn, dim3((unsigned)gx, (unsigned)gy, (unsigned)gz), dim3((unsigned)(e->info.warps * 32)),
                          kargs, (size_t)e->smem_bytes, (hipStream_t)stream);
    if (err != hipSuccess)
        return fmhai_fail(FMHA_ERR_LAUNCH, "%s: launch failed: %s", e->info.name, hipGetErrorString(err));
    return FMHA_OK;
#endif
}

/* d loss / d sinks (kernel/bwd_sinks.h), after the stages: it reads the D
 * that dot_do_o left in the workspace. */
static inline fmha_status fmhai_bwd_sinks_launch(const fmhai_bwd_params *p, const fmha_bwd_args *a, void *stream)
{
#if !defined(FMHAI_AUX_KERNELS)
    (void)p; (void)a; (void)stream;
    return fmhai_fail(FMHA_ERR_LAUNCH, "built without the helper kernels (no device compiler, or FMHA_TILE_SETS_ONLY)");
#else
    const float *sinks = a->sinks;
    float *dsinks = a->dsinks;
    int is_bf16 = a->dtype == FMHA_DTYPE_BF16;
    void *kargs[4];
    hipError_t err;
    kargs[0] = (void *)p; kargs[1] = &sinks; kargs[2] = &dsinks; kargs[3] = &is_bf16;
    err = hipLaunchKernel((const void *)fmhai_bwd_sinks_kernel, dim3((unsigned)a->nhead_q),
                          dim3(FMHAI_SINKS_BWD_THREADS), kargs, 0, (hipStream_t)stream);
    if (err != hipSuccess)
        return fmhai_fail(FMHA_ERR_LAUNCH, "bwd sinks: launch failed: %s", hipGetErrorString(err));
    return FMHA_OK;
#endif
}

/* The dbias pass (kernel/bwd_dbias.h), after dq_dk_dv. */
static inline fmha_status fmhai_bwd_dbias_launch(const fmhai_bwd_params *p, const fmhai_bwd_dbias_job *J,
                                                 void *stream)
{
#if !defined(FMHAI_AUX_KERNELS)
    (void)p; (void)J; (void)stream;
    return fmhai_fail(FMHA_ERR_LAUNCH, "built without the helper kernels (no device compiler, or FMHA_TILE_SETS_ONLY)");
#else
    void *kargs[2];
    hipError_t err;
    if (J->grid_x <= 0) return FMHA_OK;
    kargs[0] = (void *)p; kargs[1] = (void *)J;
    err = hipLaunchKernel((const void *)fmhai_bwd_dbias_kernel, dim3((unsigned)J->grid_x, (unsigned)J->grid_y,
                          (unsigned)J->grid_z), dim3(FMHAI_DBIAS_BWD_THREADS), kargs, 0, (hipStream_t)stream);
    if (err != hipSuccess)
        return fmhai_fail(FMHA_ERR_LAUNCH, "bwd dbias: launch failed: %s", hipGetErrorString(err));
    return FMHA_OK;
#endif
}

/* Tests only: -1 lets fmha_bwd choose the deterministic schedule's rows
 * (kernel/bwd.h, fmhai_bwd_det_rows), 0 forces one block per unit, k > 0 k
 * rows; the results are the same bits either way. */
static int fmhai_bwd_det_rows_force = -1;
/* Tests only: -1 rotates the deterministic sweeps where a unit's key tiles
 * fit on the device (fmhai_bwd_tile_of), 0 never (the order past that). */
static int fmhai_bwd_det_rot_force = -1;

FMHA_API fmha_status fmha_bwd(const fmha_bwd_plan *plan, const fmha_bwd_args *args, void *stream)
{
    fmhai_bwd_layout L;
    fmhai_bwd_params p;
    fmhai_bwd90_params p90;   /* a Hopper dq_dk_dv's: p and TMA tensor maps */
    int max_sq, max_sk, tm0, tn, tm2, gx, e1 = -1;
    const char *why = 0;
    fmha_status st = fmhai_bwd_validate_args(plan, args);
    if (st != FMHA_OK) return st;
    /* dropout: a dq_dk_dv pipeline that has it (the plan's, or the portable one) */
    st = fmhai_bwd_run_entry(plan, fmhai_dropout_threshold(args->dropout_p) > 0u, &e1, &why);
    if (st != FMHA_OK) return st;
    if (args->batch == 0) return FMHA_OK;
    fmhai_bwd_plan_layout(plan, &L);
    fmhai_bwd_make_params(plan, args, &L, &p);
#if !defined(FMHA_PLATFORM_HOST_ONLY)
    if (L.dbias_bytes > 0) {   /* the dbias sum starts at zero every run */
        const hipError_t err = hipMemsetAsync((char *)args->workspace + L.dbias_off, 0, L.dbias_bytes,
                                              (hipStream_t)stream);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_DEVICE, "bwd: zeroing the dbias sum failed: %s", hipGetErrorString(err));
    }
#endif
    /* grid x only sets the parallelism: every kernel walks its rows or key
     * tiles with a grid stride, so group-mode bounds never drop work */
    max_sq = args->is_group_mode ? (args->max_seqlen_q > 0 ? args->max_seqlen_q : 1) : args->seqlen_q;
    max_sk = args->is_group_mode ? (args->max_seqlen_k > 0 ? args->max_seqlen_k : 1) : args->seqlen_k;
    tm0 = plan->dot_do_o->tile_m;
    tn = plan->dq_dk_dv->tile_n;
    tm2 = plan->convert_dq->tile_m;
    if (!plan->dq_direct) {
        st = fmhai_bwd_launch(plan, plan->entry_[0], &p, (max_sq + tm0 - 1) / tm0, args->nhead_q, args->batch,
                              stream);
        if (st != FMHA_OK) return st;
    }
    gx = plan->dq_direct ? 1 : (max_sk + tn - 1) / tn;
    if (args->is_deterministic && !plan->dq_direct) {
        fmhai_device dev;
        int ordinal = 0;
        st = fmhai_current_device(&dev, &ordinal);
        if (st != FMHA_OK) return st;
        p.unit_rows = fmhai_bwd_det_rows_force >= 0
                          ? fmhai_bwd_det_rows_force
                          : fmhai_bwd_det_rows((int64_t)args->nhead_k * args->batch, gx, dev.sms,
                                               p.mask_kind != FMHA_MASK_NONE);
        /* rotated sweeps wait on later key tiles too: only where all of a
         * unit's fit on the device at once (one block an SM), whatever the
         * rows, so that the order, and the bits, do not depend on them */
        p.det_rot = fmhai_bwd_det_rot_force >= 0 ? fmhai_bwd_det_rot_force : gx <= dev.sms;
    }
    p.lpt_units = fmhai_bwd_lpt_units(&p, (int64_t)args->nhead_k * args->batch, args->is_group_mode);
    p.units_bfast = p.lpt_units > 1 && fmhai_bwd_bias_shared(&p) == 2;
    if (plan->set_->entries[e1].info.arch == FMHA_ARCH_SM90A) {   /* its kernel takes p90 (p first) */
        memset(&p90, 0, sizeof(p90));
        p90.p = p;
        fmhai_bwd_tma_prepare(&plan->set_->entries[e1].info, args, &p90);   /* dispatch/tma.h */
    }
    st = fmhai_bwd_launch(plan, e1, plan->set_->entries[e1].info.arch == FMHA_ARCH_SM90A ? &p90.p : &p, gx,
                          p.unit_rows > 0 ? p.unit_rows : args->nhead_k, p.unit_rows > 0 ? 1 : args->batch, stream);
    if (st == FMHA_OK && !plan->dq_direct)
        st = fmhai_bwd_launch(plan, plan->entry_[2], &p, (max_sq + tm2 - 1) / tm2, args->nhead_q, args->batch,
                              stream);
    if (st == FMHA_OK && args->dbias) {
        fmhai_bwd_dbias_job J;
        fmhai_bwd_dbias_job_make(plan, args, &p, &J);
        st = fmhai_bwd_dbias_launch(&p, &J, stream);
    }
    if (st != FMHA_OK || !args->sinks) return st;
    return fmhai_bwd_sinks_launch(&p, args, stream);
}

#endif /* FMHA_TILE_DISPATCH_BWD_DISPATCH_H */
