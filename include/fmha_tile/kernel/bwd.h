/*
 * Backward family, host side: validation, splits, the workspace layout, the
 * packing of the group-mode tables, and the kernel parameters.
 *
 * The workspace is one caller-owned device buffer. Its layout is private (the
 * caller only ever sees plan.workspace_size) and every region starts at a
 * multiple of FMHAI_BWD_WS_ALIGN (256) bytes:
 *
 *   nsplits  int32 [batch] (group mode) or [1] (batch mode)
 *   offsets  int64 [batch + 1]   group mode only: first dq_acc element of each
 *                                entry, a prefix sum (offsets[batch] = total)
 *   dq_acc   fp32  batch mode [batch][nhead_q][nsplits][s_q][d];
 *                  group mode entry b at offsets[b]: [nhead_q][nsplits_b][s_q_b][d]
 *                  (compact: sized by the total query rows, never by
 *                  batch * max_seqlen_q)
 *   dsum     fp32  D = rowsum(dO * O): [batch][nhead_q][s_q] in batch mode,
 *                  [nhead_q][total_q] in group mode
 *   dq_sem   int32 deterministic mode only: one counter per dq_acc row, laid
 *                  out as dq_acc without its d (row r of dq_acc element
 *                  offset e has counter e / d); the first row of a query tile
 *                  counts the key tiles that have added into it, so they add
 *                  in a fixed order
 *   dbias    fp32  only for a dbias summed over broadcast dims (traits
 *                  dbias_bcast): [nb][nh][rows][cols], rows the query rows
 *                  of an entry (group mode: all of them), cols s_k (group
 *                  mode: max_seqlen_k); a summed dim has extent 1 (terms
 *                  added with fp32 atomics) or, deterministic, its full
 *                  extent (each term one plain store; in the bias dtype
 *                  when that is the inputs', as a plain dbias is stored:
 *                  half the bytes, the region sized for fp32 all the same),
 *                  summed in order by the dbias pass (kernel/bwd_dbias.h),
 *                  which also converts;
 *                  zeroed by fmha_bwd before dq_dk_dv. Present with
 *                  dq_direct too (then the only region)
 *
 * A plan with dq_direct (every key sequence fits one key tile) has no
 * workspace but the dbias sum. In group mode the per-entry splits depend on
 * the key lengths, known only on the device: fmha_bwd_prepare_workspace_device
 * fills nsplits and offsets there with one kernel (kernel/bwd_tables.h: a
 * block-wide prefix sum, nothing read on the host, graph-capturable);
 * fmha_bwd_prepare_workspace[_async] copy the seqstarts to the host,
 * fmhai_bwd_pack_tables() fills the tables and they go back to the
 * workspace (both forms apply fmhai_bwd_entry_splits, so the tables agree). The plan sizes dq_acc for
 * the worst case the traits allow (every entry with the plan's nsplits, total
 * rows = traits.seqlen_q), so packing can never overflow it; seqstarts that
 * break the bounds are refused (synchronous) or their entries get no splits
 * (stream-ordered, device) and the kernels skip them.
 *
 * Pure C: compiles without a device compiler, so the host tests check the
 * layout, the splits and the packing directly.
 */
#ifndef FMHA_TILE_KERNEL_BWD_H
#define FMHA_TILE_KERNEL_BWD_H

#include <math.h>
#include <string.h>
#include "../api.h"
#include "../policy/bwd_tiles.h"
#include "bwd_params.h"
#include "fwd.h"

/* ---- traits ---------------------------------------------------------------- */
static inline int fmhai_bwd_masked(fmha_mask_type m, int wl, int wr)
{
    return m != FMHA_MASK_NONE && (fmhai_norm_window(wl) >= 0 || fmhai_norm_window(wr) >= 0);
}

static inline int fmhai_bwd_max_sq(const fmha_bwd_traits *t)
{
    return t->is_group_mode ? t->max_seqlen_q : t->seqlen_q;
}
static inline int fmhai_bwd_max_sk(const fmha_bwd_traits *t)
{
    return t->is_group_mode ? t->max_seqlen_k : t->seqlen_k;
}

static inline fmha_status fmhai_bwd_validate_traits(const fmha_bwd_traits *t)
{
    const char *fam = "bwd";
    fmha_status st;
    if (!t) return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: traits is NULL", fam);
    if (t->dtype != FMHA_DTYPE_FP16 && t->dtype != FMHA_DTYPE_BF16)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: dtype %d not supported (fp16 or bf16)", fam, (int)t->dtype);
    /* scale and soft cap are checked with the args; here only their presence */
    /* hdim_v < hdim_q (MLA): V, O, dO and dV run padded to the kernel's head
     * dim (zero columns add nothing to dP, D or dV) */
    st = fmhai_validate_dims(fam, t->batch, t->nhead_q, t->nhead_k, t->hdim_q, t->hdim_v, 1.0f, 0.0f,
                             t->mask_type, t->window_left, t->window_right, 1);
    if (st != FMHA_OK) return st;
    if (t->has_alibi != 0 && t->has_alibi != 1)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: has_alibi must be 0 or 1", fam);
    if (t->is_group_mode != 0 && t->is_group_mode != 1)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: is_group_mode must be 0 or 1", fam);
    if ((t->has_bias != 0 && t->has_bias != 1) || (t->has_dbias != 0 && t->has_dbias != 1) ||
        (t->dbias_bcast & ~(FMHA_BIAS_BCAST_BATCH | FMHA_BIAS_BCAST_HEAD)))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: has_bias and has_dbias must be 0 or 1, dbias_bcast "
                                                "FMHA_BIAS_BCAST_* bits", fam);
    if (t->has_dbias && !t->has_bias)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: has_dbias needs has_bias", fam);
    if (t->is_group_mode && (t->dbias_bcast & FMHA_BIAS_BCAST_BATCH))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: group mode: the bias has no batch dim (rows seqstart_q[b] + "
                                                "i), so dbias_bcast cannot have FMHA_BIAS_BCAST_BATCH", fam);
    if (t->has_bias && t->has_alibi)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: bias and ALiBi together are not supported (one bias column: "
                                                "ALIBI or BIAS)", fam);
    if (t->has_dbias && t->has_logits_soft_cap)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: dbias with a soft cap is not supported", fam);
    if (t->seqlen_q < 0 || t->seqlen_k < 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: seqlen_q and seqlen_k must be >= 0 (got %d, %d)", fam,
                          t->seqlen_q, t->seqlen_k);
    if (t->is_group_mode && (t->max_seqlen_q < 0 || t->max_seqlen_k < 0))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: max_seqlen_q and max_seqlen_k must be >= 0 (got %d, %d)",
                          fam, t->max_seqlen_q, t->max_seqlen_k);
    return FMHA_OK;
}

/* ---- splits and the workspace layout ----------------------------------------- */
/* dq_acc slices per batch entry (the most any entry gets in group mode). */
static inline int fmhai_bwd_nsplits(const fmha_bwd_traits *t, int tile_n)
{
    int64_t units = (int64_t)t->batch * t->nhead_k;
    int tiles = (fmhai_bwd_max_sk(t) + tile_n - 1) / tile_n, ns;
    if (!t->is_deterministic) return 1;
    /* masked: the chains run in reverse (fmhai_bwd_unit_of) and nothing
     * waits, so more slices would only spread the adds over more memory */
    if (fmhai_bwd_masked(t->mask_type, t->window_left, t->window_right)) return 1;
    if (units < 1) units = 1;
    ns = (int)((FMHAI_BWD_DET_BLOCKS + units - 1) / units);
    if (ns > FMHAI_BWD_MAX_SPLITS) ns = FMHAI_BWD_MAX_SPLITS;
    if (ns > tiles) ns = tiles;
    return ns < 1 ? 1 : ns;
}

/* Deterministic schedule. The key tiles of a split add their dQ into a
 * query tile one after the other in chain order (the counters), so the
 * order of the additions is fixed whatever the schedule, which only decides
 * the waiting. The tiles of a chain run side by side (grid x = key tiles).
 * Without a mask each waits on its predecessor at every query tile: the
 * chain fills like a pipeline, one handshake per tile, paid once per unit
 * with one block per (KV head, entry) unit, so `rows` rows of blocks keep
 * their key tile from unit to unit instead (grid y = rows) and a row fills
 * once. rows: enough rows of gx blocks to fill the multiprocessors once,
 * dealt so that the rows get equal numbers of units. With a mask the
 * chains run in reverse and nothing waits (pipeline/bwd_portable.h,
 * fmhai_bwd_tile_of): 0, one block per unit, where a block column would
 * keep the same, long or short, causal tile in every unit while the
 * one-per-unit grid lets the hardware balance them. */
static inline int fmhai_bwd_det_rows(int64_t units, int gx, int sms, int masked)
{
    int64_t per = gx > 0 ? sms / gx : 1, rounds;
    if (masked) return 0;
    if (per < 1) per = 1;
    if (units <= per) return units < 1 ? 1 : (int)units;
    rounds = (units + per - 1) / per;
    return (int)((units + rounds - 1) / rounds);
}

/* fmhai_bias_sharing over the backward's (KV head, entry) units: a bias
 * shared by the heads is shared by the KV heads' units; the groups' dbias
 * sums then also meet in the L2. */
static inline int fmhai_bwd_bias_shared(const fmhai_bwd_params *p)
{
    return fmhai_bias_sharing(p->bias, (fmha_dtype)p->bias_dt, p->seqlen_q, p->seqlen_k, p->bias_head, p->bias_batch,
                              p->nhead_q / p->head_ratio, p->nhead_q, p->batch);
}

/* Non-deterministic dq_dk_dv in batch mode under a causal-type mask (keys
 * up to a right bound, none on the left: key tile 0 sees the most query
 * tiles) or with a shared bias (fmhai_bwd_bias_shared): units (KV head,
 * entry) a launch-order group (fmhai_bwd_block_of), as many as keep their
 * Q, dO and dQ sums (s_q rows of each of head_ratio query heads) within the
 * L2 budget (fmhai_lpt_group); 0 (unit after unit) otherwise. */
static inline int fmhai_bwd_lpt_units(const fmhai_bwd_params *p, int64_t units, int group_mode)
{
    if (p->deterministic || group_mode || p->dq_direct || units <= 1) return 0;
    if (!fmhai_lpt_causal(p->mask_kind, p->window_left, p->window_right) && !fmhai_bwd_bias_shared(p)) return 0;
    return fmhai_lpt_group((int64_t)(p->seqlen_q > 1 ? p->seqlen_q : 1) * p->head_ratio *
                               ((int64_t)(p->d + p->hdv) * 2 + p->d * 4),
                           units);
}

/* One key tile per sequence: dq_dk_dv writes dQ itself, no workspace. */
static inline int fmhai_bwd_dq_direct(const fmha_bwd_traits *t, int tile_n)
{
    return fmhai_bwd_max_sk(t) <= tile_n;
}

/* Byte offsets and sizes of the workspace regions (all 0 for dq_direct). */
typedef struct fmhai_bwd_layout {
    size_t nsplits_off, nsplits_bytes;
    size_t offsets_off, offsets_bytes;   /* group mode only                       */
    size_t tables_bytes;                 /* prefix that prepare_workspace writes  */
    size_t dq_acc_off, dq_acc_bytes;
    size_t dsum_off, dsum_bytes;
    size_t sem_off, sem_bytes;           /* deterministic mode only               */
    size_t dbias_off, dbias_bytes;       /* a summed dbias only                   */
    size_t total;
} fmhai_bwd_layout;

/* dbias goes through the workspace's fp32 sum (else: plain stores into it) */
static inline int fmhai_bwd_dbias_sum(const fmha_bwd_traits *t)
{
    return t->has_dbias && t->dbias_bcast != 0;
}

/* Extents of the workspace's dbias sum [nb][nh][rows][cols] (see the
 * layout above): a summed dim keeps its full extent when deterministic. */
static inline void fmhai_bwd_dbias_dims(const fmha_bwd_traits *t, int64_t *nb, int64_t *nh, int64_t *rows,
                                        int64_t *cols)
{
    const int det = t->is_deterministic != 0;
    *nb = t->is_group_mode || (!det && (t->dbias_bcast & FMHA_BIAS_BCAST_BATCH)) ? 1 : t->batch;
    *nh = !det && (t->dbias_bcast & FMHA_BIAS_BCAST_HEAD) ? 1 : t->nhead_q;
    *rows = t->seqlen_q;
    *cols = t->is_group_mode ? t->max_seqlen_k : t->seqlen_k;
}

static inline size_t fmhai_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static inline void fmhai_bwd_layout_make(const fmha_bwd_traits *t, int nsplits, int direct,
                                         fmhai_bwd_layout *L)
{
    const size_t A = FMHAI_BWD_WS_ALIGN;
    /* query rows over all entries: batch * s_q, or the group-mode total */
    const size_t rows = t->is_group_mode ? (size_t)t->seqlen_q : (size_t)t->batch * (size_t)t->seqlen_q;
    memset(L, 0, sizeof(*L));
    if (!direct) {
        L->nsplits_off = 0;
        L->nsplits_bytes = 4u * (size_t)(t->is_group_mode ? t->batch : 1);
        L->offsets_off = fmhai_align_up(L->nsplits_off + L->nsplits_bytes, A);
        L->offsets_bytes = t->is_group_mode ? 8u * ((size_t)t->batch + 1u) : 0u;
        L->tables_bytes = t->is_group_mode ? L->offsets_off + L->offsets_bytes : L->nsplits_bytes;
        L->dq_acc_off = fmhai_align_up(L->tables_bytes, A);
        L->dq_acc_bytes = 4u * rows * (size_t)t->nhead_q * (size_t)nsplits * (size_t)t->hdim_q;
        L->dsum_off = fmhai_align_up(L->dq_acc_off + L->dq_acc_bytes, A);
        L->dsum_bytes = 4u * rows * (size_t)t->nhead_q;
        L->sem_off = fmhai_align_up(L->dsum_off + L->dsum_bytes, A);
        L->sem_bytes = t->is_deterministic ? L->dq_acc_bytes / (size_t)t->hdim_q : 0u;
        L->total = fmhai_align_up(L->sem_off + L->sem_bytes, A);
    }
    if (fmhai_bwd_dbias_sum(t)) {
        int64_t nb, nh, r, c;
        fmhai_bwd_dbias_dims(t, &nb, &nh, &r, &c);
        L->dbias_off = L->total;
        L->dbias_bytes = 4u * (size_t)nb * (size_t)nh * (size_t)r * (size_t)c;
        L->total = fmhai_align_up(L->dbias_off + L->dbias_bytes, A);
    }
}

/* ---- group-mode tables --------------------------------------------------------- */
#if defined(__HIP__) || defined(__CUDACC__)
#  define FMHAI_BWD_HD static inline __host__ __device__
#else
#  define FMHAI_BWD_HD static inline
#endif

/* One entry's dq_acc slices from its seqstarts (sq0..sq1 queries, sk0..sk1
 * keys), and in *elems its dq_acc elements. An entry whose lengths are
 * negative or whose query rows end past total_q gets 0 slices (the kernels
 * skip it) and no elements. The host packing and the device tables kernel
 * (kernel/bwd_tables.h) share this rule, so both give the same tables. */
FMHAI_BWD_HD int fmhai_bwd_entry_splits(int32_t sq0, int32_t sq1, int32_t sk0, int32_t sk1, int64_t total_q,
                                        int nhead_q, int d, int tile_n, int ns_plan, int deterministic,
                                        int64_t *elems)
{
    const int64_t lq = (int64_t)sq1 - sq0, lk = (int64_t)sk1 - sk0;
    int64_t tiles;
    int ns;
    *elems = 0;
    if (sq0 < 0 || sk0 < 0 || lq < 0 || lk < 0 || (int64_t)sq1 > total_q) return 0;
    tiles = (lk + tile_n - 1) / tile_n;
    ns = deterministic ? (int)(tiles < ns_plan ? tiles : ns_plan) : 1;
    if (ns < 1) ns = 1;
    *elems = (int64_t)nhead_q * ns * lq * d;
    return ns;
}

/* From host copies of the seqstarts (batch + 1 entries each): nsplits[b] and
 * offsets[0..batch]. Returns the number of entries that break the bounds
 * (nsplits 0, fmhai_bwd_entry_splits). */
static inline int fmhai_bwd_pack_tables(int batch, int nhead_q, int d, int tile_n, int ns_plan,
                                        int deterministic, int64_t total_q, const int32_t *sq,
                                        const int32_t *sk, int32_t *nsplits, int64_t *offsets)
{
    int64_t off = 0, elems;
    int b, rejected = 0;
    for (b = 0; b < batch; ++b) {
        const int ns = fmhai_bwd_entry_splits(sq[b], sq[b + 1], sk[b], sk[b + 1], total_q, nhead_q, d, tile_n,
                                              ns_plan, deterministic, &elems);
        rejected += ns == 0;
        nsplits[b] = ns;
        offsets[b] = off;
        off += elems;
    }
    offsets[batch] = off;
    return rejected;
}

/* The pinned staging memory of prepare_workspace_async: the pack job (the
 * closure of the stream callback, kept in the caller's memory so a graph
 * can replay it), the seqstarts copied from the device, and the image of
 * the workspace's table prefix. */
typedef struct fmhai_bwd_pack_job {
    uint32_t magic;
    int batch, nhead_q, d, tile_n, ns_plan, deterministic, is_group_mode;
    int64_t total_q;
    size_t sq_off, sk_off;            /* seqstart copies, from the job's address  */
    size_t image_off;                 /* table image (layout's tables_bytes)      */
    size_t offsets_off;               /* offsets inside the image                 */
    int rejected;                     /* written by the callback                  */
} fmhai_bwd_pack_job;

#define FMHAI_BWD_JOB_MAGIC 0xb3d7a11du

static inline size_t fmhai_bwd_staging_size(const fmha_bwd_traits *t, const fmhai_bwd_layout *L)
{
    const size_t seq = t->is_group_mode ? fmhai_align_up(4u * ((size_t)t->batch + 1u), 16) : 0;
    if (L->tables_bytes == 0) return 0;   /* dq_direct: nothing to pack */
    return fmhai_align_up(fmhai_align_up(sizeof(fmhai_bwd_pack_job), 64) + 2 * seq + L->tables_bytes, 64);
}

/* Writes the job at the start of `staging` (at least staging_size bytes). */
static inline void fmhai_bwd_job_make(const fmha_bwd_traits *t, const fmhai_bwd_layout *L, int tile_n,
                                      int ns_plan, void *staging)
{
    fmhai_bwd_pack_job *j = (fmhai_bwd_pack_job *)staging;
    const size_t seq = t->is_group_mode ? fmhai_align_up(4u * ((size_t)t->batch + 1u), 16) : 0;
    memset(j, 0, sizeof(*j));
    j->magic = FMHAI_BWD_JOB_MAGIC;
    j->batch = t->batch; j->nhead_q = t->nhead_q; j->d = t->hdim_q; j->tile_n = tile_n;
    j->ns_plan = ns_plan; j->deterministic = t->is_deterministic; j->is_group_mode = t->is_group_mode;
    j->total_q = t->seqlen_q;
    j->sq_off = fmhai_align_up(sizeof(fmhai_bwd_pack_job), 64);
    j->sk_off = j->sq_off + seq;
    j->image_off = j->sk_off + seq;
    j->offsets_off = L->offsets_off;
}

/* The callback's work (also run directly by the synchronous prepare): fills
 * the table image from the seqstart copies. */
static inline void fmhai_bwd_job_run(fmhai_bwd_pack_job *j)
{
    char *base = (char *)j;
    int32_t *nsplits = (int32_t *)(base + j->image_off);
    if (j->magic != FMHAI_BWD_JOB_MAGIC) return;
    if (!j->is_group_mode) {
        nsplits[0] = j->ns_plan;
        j->rejected = 0;
        return;
    }
    j->rejected = fmhai_bwd_pack_tables(j->batch, j->nhead_q, j->d, j->tile_n, j->ns_plan, j->deterministic,
                                        j->total_q, (const int32_t *)(base + j->sq_off),
                                        (const int32_t *)(base + j->sk_off), nsplits,
                                        (int64_t *)(base + j->image_off + j->offsets_off));
}

/* ---- arguments ------------------------------------------------------------------ */
#define FMHAI_BWD_SAME(field)                                                                 \
    if (a->field != t->field)                                                                 \
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "bwd: args." #field " (%d) differs from the plan's (%d)", \
                          (int)a->field, (int)t->field);

static inline fmha_status fmhai_bwd_validate_args(const fmha_bwd_plan *plan, const fmha_bwd_args *a)
{
    const char *fam = "bwd";
    const fmha_bwd_traits *t;
    fmha_status st;
    if (!plan || !plan->set_ || !plan->dq_dk_dv)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: plan is NULL or was not made by fmha_bwd_plan_make", fam);
    if (!a) return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: args is NULL", fam);
    t = &plan->traits;
    if (!a->alibi_slopes != !t->has_alibi)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: alibi_slopes %s but the plan was made %s ALiBi", fam,
                          a->alibi_slopes ? "given" : "NULL", t->has_alibi ? "with" : "without");
    if (((uintptr_t)a->alibi_slopes & 3u) || (a->alibi_slopes && a->alibi_batch_stride < 0))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: alibi_slopes must be 4-byte aligned, its batch stride >= 0",
                          fam);
    st = fmhai_validate_dims(fam, a->batch, a->nhead_q, a->nhead_k, a->hdim_q, a->hdim_v, a->scale,
                             a->logits_soft_cap, a->mask_type, a->window_left, a->window_right, 1);
    if (st != FMHA_OK) return st;
    FMHAI_BWD_SAME(dtype)
    FMHAI_BWD_SAME(is_group_mode)
    FMHAI_BWD_SAME(batch)
    FMHAI_BWD_SAME(nhead_q)
    FMHAI_BWD_SAME(nhead_k)
    FMHAI_BWD_SAME(seqlen_q)
    FMHAI_BWD_SAME(seqlen_k)
    FMHAI_BWD_SAME(hdim_q)
    FMHAI_BWD_SAME(hdim_v)
    FMHAI_BWD_SAME(mask_type)
    FMHAI_BWD_SAME(is_deterministic)
    if (a->is_group_mode) {
        FMHAI_BWD_SAME(max_seqlen_q)
        FMHAI_BWD_SAME(max_seqlen_k)
    }
    if (fmhai_bwd_masked(a->mask_type, a->window_left, a->window_right) &&
        (fmhai_norm_window(a->window_left) != fmhai_norm_window(t->window_left) ||
         fmhai_norm_window(a->window_right) != fmhai_norm_window(t->window_right)))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: window (%d, %d) differs from the plan's (%d, %d)", fam,
                          a->window_left, a->window_right, t->window_left, t->window_right);
    if ((a->logits_soft_cap > 0.f) != (t->has_logits_soft_cap != 0))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: logits_soft_cap %g but the plan was made %s a soft cap", fam,
                          (double)a->logits_soft_cap, t->has_logits_soft_cap ? "with" : "without");
    if (!a->q || !a->k || !a->v || !a->o || !a->dout || !a->lse || !a->dq || !a->dk || !a->dv)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: q, k, v, o, dout, lse, dq, dk and dv must not be NULL", fam);
    if (a->is_group_mode && a->batch > 0 && (!a->seqstart_q || !a->seqstart_k))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: group mode needs seqstart_q and seqstart_k", fam);
    if (fmhai_misaligned(a->q) || fmhai_misaligned(a->k) || fmhai_misaligned(a->v) || fmhai_misaligned(a->o) ||
        fmhai_misaligned(a->dout) || fmhai_misaligned(a->dq) || fmhai_misaligned(a->dk) ||
        fmhai_misaligned(a->dv))
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: q, k, v, o, dout, dq, dk, dv must be 16-byte aligned", fam);
    if ((uintptr_t)a->lse & 3u) return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: lse must be 4-byte aligned", fam);
    if (!a->sinks != !a->dsinks)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: sinks and dsinks go together (both or neither)", fam);
    if (((uintptr_t)a->sinks | (uintptr_t)a->dsinks) & 3u)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: sinks and dsinks must be 4-byte aligned", fam);
    /* dropout: the forward's p, seed and offset (the plan does not depend
     * on it; fmha_bwd picks a dq_dk_dv pipeline that has it) */
    if (!(a->dropout_p >= 0.f && a->dropout_p < 1.f))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: dropout_p must be in [0, 1) (got %g)", fam, (double)a->dropout_p);
    if (a->dtype == FMHA_DTYPE_FP8 && a->dropout_p > 0.f)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "%s: dropout with fp8 is not supported", fam);
    if ((uintptr_t)a->dropout_rng & 7u)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: dropout_rng (device {seed, offset}) must be 8-byte aligned", fam);
    if (!a->bias != !t->has_bias || !a->dbias != !t->has_dbias)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: bias %s, dbias %s, but the plan was made with has_bias %d, "
                          "has_dbias %d", fam, a->bias ? "given" : "NULL", a->dbias ? "given" : "NULL",
                          t->has_bias, t->has_dbias);
    if (a->bias) {
        const size_t es = (size_t)fmhai_bias_esize(a->bias_dtype);
        if (a->bias_dtype != FMHA_DTYPE_FP16 && a->bias_dtype != FMHA_DTYPE_BF16 && a->bias_dtype != FMHA_DTYPE_FP32)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: bias_dtype %d not supported (fp16, bf16 or fp32)", fam,
                              (int)a->bias_dtype);
        if ((uintptr_t)a->bias % es || (uintptr_t)a->dbias % es)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: bias and dbias must be aligned to their element size (%d "
                              "bytes)", fam, (int)es);
        if (a->stride_bias < 0 || a->nhead_stride_bias < 0 || a->batch_stride_bias < 0 ||
            (a->dbias && (a->stride_dbias < 0 || a->nhead_stride_dbias < 0 || a->batch_stride_dbias < 0)))
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: bias and dbias strides must be >= 0", fam);
    }
    {
        const int64_t s[24] = { a->stride_q,  a->nhead_stride_q,  a->batch_stride_q,
                                a->stride_k,  a->nhead_stride_k,  a->batch_stride_k,
                                a->stride_v,  a->nhead_stride_v,  a->batch_stride_v,
                                a->stride_o,  a->nhead_stride_o,  a->batch_stride_o,
                                a->stride_do, a->nhead_stride_do, a->batch_stride_do,
                                a->stride_dq, a->nhead_stride_dq, a->batch_stride_dq,
                                a->stride_dk, a->nhead_stride_dk, a->batch_stride_dk,
                                a->stride_dv, a->nhead_stride_dv, a->batch_stride_dv };
        st = fmhai_validate_strides(fam, s, 24, 8);
        if (st != FMHA_OK) return st;
    }
    if (plan->workspace_size > 0) {
        if (!a->workspace)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: the plan needs a workspace of %zu bytes (workspace is NULL)",
                              fam, plan->workspace_size);
        if ((uintptr_t)a->workspace % FMHAI_BWD_WS_ALIGN)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: workspace must be %d-byte aligned", fam,
                              FMHAI_BWD_WS_ALIGN);
        if (a->workspace_size < plan->workspace_size)
            return fmhai_fail(FMHA_ERR_INVALID_ARG, "%s: workspace of %zu bytes is smaller than the plan's %zu",
                              fam, a->workspace_size, plan->workspace_size);
    }
    return FMHA_OK;
}
#undef FMHAI_BWD_SAME

static inline void fmhai_bwd_make_params(const fmha_bwd_plan *plan, const fmha_bwd_args *a,
                                         const fmhai_bwd_layout *L, fmhai_bwd_params *p)
{
    const float log2e = 1.4426950408889634f;
    char *ws = (char *)a->workspace;
    memset(p, 0, sizeof(*p));
    p->q = a->q; p->k = a->k; p->v = a->v; p->o = a->o; p->dout = a->dout; p->lse = a->lse;
    p->dq = a->dq; p->dk = a->dk; p->dv = a->dv;
    p->seqstart_q = a->is_group_mode ? a->seqstart_q : 0;
    p->seqstart_k = a->is_group_mode ? a->seqstart_k : 0;
    if (!plan->dq_direct) {
        if (a->is_group_mode) {
            p->ws_nsplits = (const int32_t *)(ws + L->nsplits_off);
            p->ws_offsets = (const int64_t *)(ws + L->offsets_off);
        }
        p->dq_acc = (float *)(ws + L->dq_acc_off);
        p->dsum = (float *)(ws + L->dsum_off);
        if (a->is_deterministic) p->dq_sem = (int32_t *)(ws + L->sem_off);
    }
    p->q_row = a->stride_q;   p->q_head = a->nhead_stride_q;   p->q_batch = a->batch_stride_q;
    p->k_row = a->stride_k;   p->k_head = a->nhead_stride_k;   p->k_batch = a->batch_stride_k;
    p->v_row = a->stride_v;   p->v_head = a->nhead_stride_v;   p->v_batch = a->batch_stride_v;
    p->o_row = a->stride_o;   p->o_head = a->nhead_stride_o;   p->o_batch = a->batch_stride_o;
    p->do_row = a->stride_do; p->do_head = a->nhead_stride_do; p->do_batch = a->batch_stride_do;
    p->dq_row = a->stride_dq; p->dq_head = a->nhead_stride_dq; p->dq_batch = a->batch_stride_dq;
    p->dk_row = a->stride_dk; p->dk_head = a->nhead_stride_dk; p->dk_batch = a->batch_stride_dk;
    p->dv_row = a->stride_dv; p->dv_head = a->nhead_stride_dv; p->dv_batch = a->batch_stride_dv;
    p->lse_head = a->nhead_stride_lse; p->lse_batch = a->batch_stride_lse;
    p->alibi_slopes = a->alibi_slopes; p->alibi_batch = a->alibi_batch_stride;
    p->dsum_rows = a->is_group_mode ? a->seqlen_q : 0;
    p->seqlen_q = a->seqlen_q; p->seqlen_k = a->seqlen_k;
    p->nhead_q = a->nhead_q; p->head_ratio = a->nhead_q / a->nhead_k;
    p->batch = a->batch;
    p->d = a->hdim_q;
    p->hdv = a->hdim_v;
    p->nsplits = plan->nsplits;
    p->deterministic = a->is_deterministic != 0;
    p->dq_direct = plan->dq_direct;
    p->mask_kind = (int)a->mask_type;
    p->window_left = fmhai_norm_window(a->window_left);
    p->window_right = fmhai_norm_window(a->window_right);
    if (!fmhai_bwd_masked(a->mask_type, a->window_left, a->window_right)) p->mask_kind = FMHA_MASK_NONE;
    p->scale = a->scale;
    p->scale_log2 = a->scale * log2e;
    if (a->logits_soft_cap > 0.f) {
        p->softcap_pre = a->scale / a->logits_soft_cap;
        p->softcap_post_log2 = a->logits_soft_cap * log2e;
    }
    p->dropout_thr = fmhai_dropout_threshold(a->dropout_p);   /* p below 1/512 drops nothing */
    p->dropout_scale = fmhai_dropout_scale(p->dropout_thr);
    p->dropout_seed = a->dropout_seed;
    p->dropout_offset = a->dropout_offset;
    p->dropout_rng = a->dropout_rng;
    if (a->bias) {
        p->bias = a->bias;
        p->bias_dt = (int)a->bias_dtype;
        p->bias_row = a->stride_bias; p->bias_head = a->nhead_stride_bias;
        p->bias_batch = a->is_group_mode ? 0 : a->batch_stride_bias;
    }
    if (a->dbias && !fmhai_bwd_dbias_sum(&plan->traits)) {   /* plain stores into the caller's dbias */
        p->dbias = a->dbias;
        p->dbias_dt = (int)a->bias_dtype;
        p->dbias_row = a->stride_dbias; p->dbias_head = a->nhead_stride_dbias;
        p->dbias_batch = a->is_group_mode ? 0 : a->batch_stride_dbias;
    } else if (a->dbias) {   /* the workspace's fp32 sum: a summed dim's stride 0 (atomics) or its slices */
        int64_t nb, nh, r, c;
        fmhai_bwd_dbias_dims(&plan->traits, &nb, &nh, &r, &c);
        p->dbias = ws + L->dbias_off;
        /* deterministic slices of a bias in the inputs' dtype hold each term
         * as a plain dbias would (16-bit: half the bytes each way; the
         * region keeps its fp32 size, the plan not knowing the bias dtype) */
        p->dbias_dt = a->is_deterministic && a->bias_dtype == a->dtype ? (int)a->bias_dtype : (int)FMHA_DTYPE_FP32;
        p->dbias_row = c;
        p->dbias_head = nh > 1 || !(plan->traits.dbias_bcast & FMHA_BIAS_BCAST_HEAD) ? r * c : 0;
        p->dbias_batch = !a->is_group_mode && (nb > 1 || !(plan->traits.dbias_bcast & FMHA_BIAS_BCAST_BATCH))
                             ? nh * r * c : 0;
        p->dbias_atomic = !a->is_deterministic;
    }
}

/* ---- the dbias pass ----------------------------------------------------------------
 * After dq_dk_dv, one pass over the caller's dbias (kernel/bwd_dbias.h):
 * with the workspace sum, every element is the sum of its terms (in order:
 * entry, then head) converted to the bias dtype; without it, the elements
 * dq_dk_dv never stores (masked, or group mode keys past the entry's
 * length) get 0. Grid: x the rows of an entry (max_seqlen_q), y the heads,
 * z the entries; a block's threads walk a row's cols columns. */
typedef struct fmhai_bwd_dbias_job {
    void *out;                        /* the caller's dbias                     */
    int64_t row, head, batch;         /* its strides (summed dims: 0)           */
    const void *acc;                  /* the workspace sum, or NULL             */
    int acc16;                        /* its terms 16-bit (of dt), else fp32    */
    int64_t acc_row, acc_head, acc_batch;
    int nsum_b, nsum_h;               /* terms of a summed dim (deterministic) */
    int vec, ovec;                    /* acc rows / out rows take 16-byte vectors */
    int dt, cols;
    int grid_x, grid_y, grid_z;       /* 0: no pass needed                     */
} fmhai_bwd_dbias_job;

static inline void fmhai_bwd_dbias_job_make(const fmha_bwd_plan *plan, const fmha_bwd_args *a,
                                            const fmhai_bwd_params *p, fmhai_bwd_dbias_job *J)
{
    const fmha_bwd_traits *t = &plan->traits;
    const int bb = (t->dbias_bcast & FMHA_BIAS_BCAST_BATCH) != 0, bh = (t->dbias_bcast & FMHA_BIAS_BCAST_HEAD) != 0;
    const int masked = fmhai_bwd_masked(a->mask_type, a->window_left, a->window_right);
    memset(J, 0, sizeof(*J));
    if (!a->dbias || a->batch == 0) return;
    J->out = a->dbias;
    J->dt = (int)a->bias_dtype;
    J->row = a->stride_dbias;
    J->head = bh ? 0 : a->nhead_stride_dbias;
    J->batch = bb || a->is_group_mode ? 0 : a->batch_stride_dbias;
    J->cols = a->is_group_mode ? a->max_seqlen_k : a->seqlen_k;
    J->nsum_b = J->nsum_h = 1;
    if (fmhai_bwd_dbias_sum(t)) {
        J->acc = p->dbias;
        J->acc16 = p->dbias_dt != (int)FMHA_DTYPE_FP32;
        J->acc_row = p->dbias_row; J->acc_head = p->dbias_head; J->acc_batch = p->dbias_batch;
        if (a->is_deterministic) {
            J->nsum_b = bb ? a->batch : 1;
            J->nsum_h = bh ? a->nhead_q : 1;
        }
    } else if (!masked && !a->is_group_mode) {
        return;   /* dq_dk_dv stored every element */
    }
    J->vec = ((J->acc_row | J->acc_head | J->acc_batch) & (J->acc16 ? 7 : 3)) == 0;   /* 16-byte loads */
    {   /* 8 elements of the output a 16-byte store */
        const int64_t el = a->bias_dtype == FMHA_DTYPE_FP32 ? 4 : 8;
        J->ovec = (J->row % el | J->head % el | J->batch % el) == 0 && (uintptr_t)J->out % 16 == 0;
    }
    J->grid_x = a->is_group_mode ? a->max_seqlen_q : a->seqlen_q;
    J->grid_y = bh ? 1 : a->nhead_q;
    J->grid_z = bb ? 1 : a->batch;
    if (J->grid_x <= 0 || J->cols <= 0) J->grid_x = J->grid_y = J->grid_z = 0;
}

#endif /* FMHA_TILE_KERNEL_BWD_H */
