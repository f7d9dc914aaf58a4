/*
 * Registry and selection: the one decision function behind every entry point.
 *
 * A kernel set (DECL_FMHA_KERNEL_SET) is a table of fmhai_entry rows. For a
 * problem, fmhai_fwd_select() filters the rows that can serve it and keeps the
 * best by a score that does not depend on row order:
 *
 *   can serve  enabled; family; dtype; kernel hdim >= problem hdim and
 *              kernel hdim_v >= problem hdim_v (a problem with hdim_v <
 *              hdim_q: a kernel of unequal dims, or a portable one, whose
 *              V tile is zero-filled past hdim_v); mask
 *              (a MASK kernel serves any mask, a NOMASK one only none);
 *              soft cap and ALiBi exactly as compiled (decode: a SOFTCAP
 *              kernel serves any soft cap, ALiBi is always there); page
 *              size (0: contiguous K/V, only for contiguous problems) and layout;
 *              arch runs on the device; the binary holds code for the
 *              device; shared memory fits; a Hopper row only for a problem
 *              the fallback rule lets it serve (FMHAI_FWD90_SERVES,
 *              policy/fwd_tiles.h).
 *   score      (lexicographic, smaller wins)
 *              1. head-dim cost (fmhai_hdim_cost, the head-dim rule):
 *                 the kernel's columns (hdim + hdim_v) over its
 *                 pipeline's relative speed; among kernels of one pipeline
 *                 this is least padding, across pipelines (an sm_90 device)
 *                 a wgmma kernel that pads beats a portable one that pads
 *                 less unless the portable one computes under
 *                 FMHAI_PORTABLE_PCT_* percent of its columns
 *              2. MASK kernel on an unmasked problem, SOFTCAP decode
 *                 kernel without a soft cap     (prefer the lean one)
 *              3. pipeline rank: arch-specific before portable (the fast
 *                 pipeline first, the portable one is the fallback)
 *              4. larger kernel page size first    (fewer page lookups)
 *              5. tile fit: tile_m more than twice the longest query -> 1
 *              6. larger tile_m * tile_n first     (more reuse)
 *              7. more stages first (deeper staging; a row that needs
 *                 too much shared memory was filtered out above)
 *              8. kernel name                       (total order, ties impossible)
 *
 * A plan (fmha_fwd_check, fmha_batch_prefill_check) names the pipeline it
 * picked and why: the fast one serves the problem, or the reason it runs
 * portable (the device, the first line of the fallback rule the problem
 * fails, or a kernel set without a matching Hopper row).
 *
 * fmha_fwd_check() answers "supported?" and "workspace?" with the same choice
 * that fmha_fwd() launches. With no match the status is FMHA_ERR_NO_KERNEL and
 * the message names the closest kernel (fewest differing fields) and the
 * first field that differs. Nothing ever falls back silently.
 */
#ifndef FMHA_TILE_REGISTRY_H
#define FMHA_TILE_REGISTRY_H

#include <string.h>
#include "../api.h"
#include "../arch/arch.h"
#include "../kernel/fwd.h"
#include "../kernel/prefill.h"
#include "error.h"
#include "tma.h"

typedef struct fmhai_entry {
    fmha_kernel_info info;
    int enabled;           /* 0: a tuned row that the wildcard row filtered out */
    int smem_bytes;        /* dynamic shared memory per block */
    const void *fn;        /* the __global__ function; NULL in host-only builds */
    const void *fn_q16;    /* Hopper e4m3 prefill rows: the kernel for bf16
                              queries (kernel_set.h, FMHAI_Q16K90_FP8); NULL
                              elsewhere */
    int smem_q16;          /* its dynamic shared memory */
} fmhai_entry;

struct fmha_kernel_set {
    const char *name;
    const fmhai_entry *entries;
    int count;
    int *probe;            /* per entry: cached binary version (+1000 * device) */
};

/* ---- device --------------------------------------------------------------- */
#if defined(FMHA_PLATFORM_HOST_ONLY)
/* Host-only builds (unit tests) select for the device this hook describes. */
static fmhai_device fmhai_test_device = { 0, 90, 227 * 1024, 132 };
#endif

/* Device properties are read once per device ordinal and cached (the launch
 * path then costs one hipGetDevice). Concurrent first calls write the same
 * values. */
#define FMHAI_MAX_DEVICES 64
static inline fmha_status fmhai_current_device(fmhai_device *d, int *ordinal)
{
#if defined(FMHA_PLATFORM_HOST_ONLY)
    *d = fmhai_test_device;
    *ordinal = 0;
    return FMHA_OK;
#else
    static fmhai_device cache[FMHAI_MAX_DEVICES];
    static int cached[FMHAI_MAX_DEVICES];
    int dev = 0, major = 0, minor = 0, smem = 0, sms = 0;
    if (hipGetDevice(&dev) != hipSuccess) {
        (void)hipGetLastError();
        return fmhai_fail(FMHA_ERR_DEVICE, "cannot query the current device");
    }
    if (dev >= 0 && dev < FMHAI_MAX_DEVICES && cached[dev]) {
        *d = cache[dev];
        *ordinal = dev;
        return FMHA_OK;
    }
    if (hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, dev) != hipSuccess ||
        hipDeviceGetAttribute(&minor, hipDeviceAttributeComputeCapabilityMinor, dev) != hipSuccess ||
        hipDeviceGetAttribute(&smem, hipDeviceAttributeMaxSharedMemoryPerBlockOptin, dev) != hipSuccess ||
        hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess) {
        (void)hipGetLastError();
        return fmhai_fail(FMHA_ERR_DEVICE, "cannot query device %d", dev);
    }
#  if defined(FMHA_PLATFORM_AMD)
    d->is_amd = 1;
    d->cc = major * 256 + minor * 16;   /* gfx9.4.2 -> 0x942 (stepping not needed) */
    {   hipDeviceProp_t prop;
        if (hipGetDeviceProperties(&prop, dev) == hipSuccess) {
            int id = 0; sscanf(prop.gcnArchName, "gfx%x", (unsigned *)&id); if (id) d->cc = id;
        }
    }
#  else
    d->is_amd = 0;
    d->cc = major * 10 + minor;
#  endif
    d->smem_optin = smem;
    d->sms = sms;
    *ordinal = dev;
    if (dev >= 0 && dev < FMHAI_MAX_DEVICES) {
        cache[dev] = *d;
        cached[dev] = 1;
    }
    return FMHA_OK;
#endif
}

/* Does the binary hold code of this kernel for the current device? Cached per
 * entry: the device ordinal it was filled for, the binary version, whether
 * the kernel's shared-memory limit was raised on that device (bit 11; its
 * kernel for bf16 queries, fn_q16: bit 13), and whether
 * its code was compiled for sm_90+ (from PTX 9.0 on: a kernel that calls
 * fmhai_pdl_wait may then be launched as a programmatic dependent). */
#define FMHAI_PROBE_MAKE(ordinal, version, smem_set, pdl) \
    ((((ordinal) + 1) << 14) | ((pdl) << 12) | ((smem_set) << 11) | ((version) & 2047))
#define FMHAI_PROBE_DEVICE(c) (((c) >> 14) - 1)
#define FMHAI_PROBE_VERSION(c) ((c) & 2047)
#define FMHAI_PROBE_SMEM_SET(c) (((c) >> 11) & 1)
#define FMHAI_PROBE_PDL(c) (((c) >> 12) & 1)
static inline int fmhai_entry_has_code(const fmha_kernel_set *set, int i, int ordinal,
                                       const fmhai_device *d)
{
#if defined(FMHA_PLATFORM_HOST_ONLY)
    (void)set; (void)i; (void)ordinal; (void)d;
    return 1;
#else
    const fmhai_entry *e = &set->entries[i];
    int cached = set->probe[i];
    int version, pdl = 0;
    if (cached != 0 && FMHAI_PROBE_DEVICE(cached) == ordinal) {
        version = FMHAI_PROBE_VERSION(cached);
    } else {
        hipFuncAttributes fa;
        if (hipFuncGetAttributes(&fa, e->fn) != hipSuccess) {
            (void)hipGetLastError();
            version = 0;
        } else {
            version = fa.binaryVersion;
#  if defined(FMHA_PLATFORM_NVIDIA)
            pdl = fa.ptxVersion >= 90;
#  endif
        }
        set->probe[i] = FMHAI_PROBE_MAKE(ordinal, version, 0, pdl);
    }
    if (version <= 0) return 0;
#  if defined(FMHA_PLATFORM_AMD)
    (void)d;
    return 1;
#  else
    if (e->info.arch == FMHA_ARCH_SM90A) return version == 90;
    return version >= 80 && version <= d->cc;
#  endif
#endif
}

/* ---- selection -------------------------------------------------------------- */
/* What selection needs to know of a problem, whatever its family. */
typedef struct fmhai_problem {
    fmha_family family;
    fmha_dtype dtype;
    int q8;                  /* e4m3 queries (the fp8 forward; fp8 KV prefill) */
    int pds;                 /* fp8 KV prefill: per-page descales          */
    int hdim;
    int hdim_v;              /* V/O columns (0: as hdim)                   */
    int masked;              /* a mask that can hide keys                  */
    int mask_type;
    int softcap, alibi;
    int page_size;           /* paged KV: the page size; 0 otherwise       */
    int kv_layout;           /* paged KV: fmha_kv_layout                   */
    int max_seqlen_q;
    int dropout;             /* dropout on P (a drop threshold above 0)    */
    int bias;                /* elementwise bias (fmha_fwd_args.bias)      */
} fmhai_problem;

static inline const char *fmhai_family_name(fmha_family f)
{
    switch (f) {
    case FMHA_FAMILY_FWD:            return "fwd";
    case FMHA_FAMILY_BATCH_PREFILL:  return "batch_prefill";
    case FMHA_FAMILY_BWD:            return "bwd_dq_dk_dv";
    case FMHA_FAMILY_BWD_DOT_DO_O:   return "bwd_dot_do_o";
    case FMHA_FAMILY_BWD_CONVERT_DQ: return "bwd_convert_dq";
    case FMHA_FAMILY_BWD_DET:        return "bwd_dq_dk_dv_det";
    case FMHA_FAMILY_DECODE:         return "decode";
    case FMHA_FAMILY_SPLITKV_COMBINE: return "splitkv_combine";
    }
    return "?";
}

/* The problem's V/O head dim (families that leave it 0 have one). */
static inline int fmhai_pb_hdv(const fmhai_problem *pb) { return pb->hdim_v ? pb->hdim_v : pb->hdim; }
/* A kernel's (0 in tables built before the field: as hdim). */
static inline int fmhai_info_hdv(const fmha_kernel_info *k) { return k->hdim_v ? k->hdim_v : k->hdim; }

/* Why the wgmma pipeline cannot serve a forward or batch-prefill problem
 * (the first failing line of FMHAI_FWD90_SERVES), or NULL. */
static inline const char *fmhai_fwd90_why_not(const fmhai_problem *pb)
{
#define FMHAI_SERVES_CHECK(name, cond, msg) if (!(cond)) return msg;
    FMHAI_FWD90_SERVES(FMHAI_SERVES_CHECK, pb->dtype, pb->q8, pb->pds, pb->hdim, fmhai_pb_hdv(pb), pb->page_size,
                       pb->kv_layout, pb->dropout, pb->bias)
#undef FMHAI_SERVES_CHECK
    return 0;
}

static inline int fmhai_is_fwd_family(fmha_family f)
{
    return f == FMHA_FAMILY_FWD || f == FMHA_FAMILY_BATCH_PREFILL;
}

/* Fields a kernel can differ in; the first mismatching one names the miss. */
static inline const char *fmhai_mismatch(const fmhai_entry *e, const fmhai_problem *pb,
                                         const fmhai_device *d, int *nmiss)
{
    const char *first = 0;
    const int dec = pb->family == FMHA_FAMILY_DECODE;
    int n = 0;
#define FMHAI_MISS(cond, field) if (cond) { if (!first) first = field; ++n; }
    FMHAI_MISS(e->info.family != pb->family, "family")
    FMHAI_MISS(e->info.dtype != pb->dtype, "dtype")
    FMHAI_MISS(e->info.hdim < pb->hdim, "hdim")
    FMHAI_MISS(fmhai_info_hdv(&e->info) < fmhai_pb_hdv(pb), "hdim_v")
    /* a kernel of one head dim pads V past hdim_v only on the portable
     * mma.sync pipeline (its V copies and O stores stop at the problem's
     * hdim_v); the MFMA forward needs a row of unequal dims (the MFMA
     * backward pads V, as the portable one) */
    FMHAI_MISS(fmhai_pb_hdv(pb) != pb->hdim && fmhai_info_hdv(&e->info) == e->info.hdim &&
               e->info.arch == FMHA_ARCH_GFX9 && fmhai_is_fwd_family(pb->family), "hdim_v (the MFMA pipeline serves hdim_v < hdim_q through a "
                                               "row of unequal head dims, e.g. 192_128)")
    FMHAI_MISS(pb->masked && !e->info.has_mask, "mask")
    /* decode kernels: a SOFTCAP one serves any soft cap (as MASK any mask),
     * and every one takes ALiBi at run time */
    FMHAI_MISS(dec ? pb->softcap && !e->info.has_softcap : e->info.has_softcap != pb->softcap, "softcap")
    FMHAI_MISS(dec ? pb->alibi && !e->info.has_alibi : e->info.has_alibi != pb->alibi, "alibi")
    FMHAI_MISS(e->info.has_bias != pb->bias, "bias (a problem with an elementwise bias needs a BIAS row, "
                                             "one without it a row without)")
    FMHAI_MISS(e->info.page_size > pb->page_size || (e->info.page_size == 0) != (pb->page_size == 0),
               "page size")
    FMHAI_MISS((int)e->info.kv_layout != pb->kv_layout, "kv layout")
    FMHAI_MISS(!fmhai_arch_runs_on(e->info.arch, d), "arch")
    FMHAI_MISS(e->smem_bytes > d->smem_optin, "shared memory")
    FMHAI_MISS(e->info.arch == FMHA_ARCH_SM90A && fmhai_is_fwd_family(pb->family) && fmhai_fwd90_why_not(pb),
               "pipeline (the fallback rule sends this problem to the portable pipeline)")
    /* the rule reads the problem's head dim; of the wgmma kernels only the
     * hdim-128 one (run-time dropout) and DROPOUT rows have dropout code;
     * a DROPOUT row serves problems with dropout only (the plain row
     * without its dropout code is faster) */
    FMHAI_MISS(e->info.arch == FMHA_ARCH_SM90A && pb->dropout && !e->info.has_dropout &&
               !(e->info.hdim == 128 && fmhai_info_hdv(&e->info) == 128),
               "pipeline (the wgmma pipeline carries dropout in its hdim-128 kernel and DROPOUT rows only)")
    FMHAI_MISS(e->info.has_dropout && !pb->dropout, "dropout (a DROPOUT row serves problems with dropout only)")
    /* likewise a wider wgmma kernel has no bias code (compiled out at 256) */
    FMHAI_MISS(e->info.arch == FMHA_ARCH_SM90A && pb->bias && e->info.hdim > 128,
               "pipeline (the wgmma pipeline carries the elementwise bias in its hdim-64/128 kernels only)")
#undef FMHAI_MISS
    *nmiss = n;
    return first;
}

/* ---- the head-dim rule ----------------------------------------------------
 * A problem of head dim d may run on any kernel of head dim >= d (the copies
 * zero-fill the columns past d). Which one is a guess of the time each takes:
 * the columns it computes, hdim + hdim_v, over its pipeline's throughput
 * relative to the arch-specific pipeline's (percent, per family; equal
 * costs go to the arch-specific one). Among the kernels of one pipeline
 * this is least padding. Forward at 60%: on an sm_90 device a wgmma kernel
 * of 4/3 the columns wins over a portable one (d = 96 on a wgmma 128, 256,
 * before a portable 96, 320; the default set has wgmma 32 and 96 rows
 * anyway), one of twice the columns loses (d = 64 on a portable 64 before a
 * wgmma 128). Backward at 45%: the wgmma 64 kernel, 128 columns, before a
 * portable 32, 142 (d <= 32), and the wgmma 128 before a portable 96.
 * Measured on an H200 (bench/RESULTS.md, session 9): the portable forward
 * 96 at 0.51 of the wgmma 128's per-column speed; the portable backward 32
 * at 0.46-0.49 of the wgmma 64's. These two numbers are the whole rule: set
 * them from bench_fwd / bench_bwd --kernel runs (a build may predefine them). */
#ifndef FMHAI_PORTABLE_PCT_FWD
#define FMHAI_PORTABLE_PCT_FWD 60   /* forward, batch prefill, decode */
#endif
#ifndef FMHAI_PORTABLE_PCT_BWD
#define FMHAI_PORTABLE_PCT_BWD 45   /* the backward's dq_dk_dv */
#endif
static inline int fmhai_hdim_cost(const fmha_kernel_info *k)
{
    const int cols = k->hdim + fmhai_info_hdv(k);
    const int bwd = k->family == FMHA_FAMILY_BWD || k->family == FMHA_FAMILY_BWD_DET;
    if (k->arch != FMHA_ARCH_SM80) return cols * 100;   /* wgmma; GFX9 rows are all alike */
    return cols * 10000 / (bwd ? FMHAI_PORTABLE_PCT_BWD : FMHAI_PORTABLE_PCT_FWD);
}

/* Score as a tuple; returns <0 when a beats b. */
static inline int fmhai_cmp(const fmhai_entry *a, const fmhai_entry *b, const fmhai_problem *pb)
{
    const int sq = pb->max_seqlen_q;
    int ka[7], kb[7], i;
    ka[0] = fmhai_hdim_cost(&a->info);
    kb[0] = fmhai_hdim_cost(&b->info);
    ka[1] = (a->info.has_mask && !pb->masked) + (a->info.has_softcap && !pb->softcap);
    kb[1] = (b->info.has_mask && !pb->masked) + (b->info.has_softcap && !pb->softcap);
    ka[2] = a->info.arch == FMHA_ARCH_SM80 || a->info.arch == FMHA_ARCH_GFX9;
    kb[2] = b->info.arch == FMHA_ARCH_SM80 || b->info.arch == FMHA_ARCH_GFX9;
    ka[3] = -a->info.page_size;                   kb[3] = -b->info.page_size;
    ka[4] = a->info.tile_m > 2 * sq;              kb[4] = b->info.tile_m > 2 * sq;
    ka[5] = -a->info.tile_m * a->info.tile_n;     kb[5] = -b->info.tile_m * b->info.tile_n;
    ka[6] = -a->info.stages;                      kb[6] = -b->info.stages;
    for (i = 0; i < 7; ++i)
        if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
    return strcmp(a->info.name, b->info.name);
}

static inline const char *fmhai_mask_str(const fmhai_problem *pb)
{
    if (!pb->masked) return "none";
    return pb->mask_type == FMHA_MASK_TOP_LEFT ? "top_left" : "bottom_right";
}

/* Pick the entry index for a validated problem (or fail with a message). */
static inline fmha_status fmhai_select(const fmha_kernel_set *set, const fmhai_problem *pb,
                                       int *chosen)
{
    fmhai_device dev = { 0, 0, 0, 0 };
    int ordinal = 0, best = -1, closest = -1, closest_miss = 1 << 30, i;
    const char *closest_field = 0;
    fmha_status st = fmhai_current_device(&dev, &ordinal);
    if (st != FMHA_OK) return st;
    for (i = 0; i < set->count; ++i) {
        const fmhai_entry *e = &set->entries[i];
        int nmiss;
        const char *field;
        if (!e->enabled) continue;
        field = fmhai_mismatch(e, pb, &dev, &nmiss);
        if (!field && !fmhai_entry_has_code(set, i, ordinal, &dev)) {
            field = "arch (the binary has no code of this kernel for the device)";
            nmiss = 1;
        }
        if (field) {
            if (nmiss < closest_miss || (nmiss == closest_miss && closest >= 0 &&
                                         strcmp(e->info.name, set->entries[closest].info.name) < 0)) {
                closest = i; closest_miss = nmiss; closest_field = field;
            }
            continue;
        }
        if (best < 0 || fmhai_cmp(e, &set->entries[best], pb) < 0) best = i;
    }
    if (best < 0) {
        char dev_name[32], page[24] = "", hv[24] = "";
        snprintf(dev_name, sizeof(dev_name), dev.is_amd ? "gfx%x" : "sm_%d", dev.cc);
        if (pb->page_size) snprintf(page, sizeof(page), " page=%d", pb->page_size);
        if (fmhai_pb_hdv(pb) != pb->hdim) snprintf(hv, sizeof(hv), " hdim_v %d", fmhai_pb_hdv(pb));
        if (closest < 0)
            return fmhai_fail(FMHA_ERR_NO_KERNEL, "%s: kernel set '%s' has no kernels",
                              fmhai_family_name(pb->family), set->name);
        return fmhai_fail(FMHA_ERR_NO_KERNEL,
                          "%s: no kernel in set '%s' for %s hdim %d%s mask=%s softcap=%d alibi=%d%s%s on %s; "
                          "closest: %s (differs in %s)",
                          fmhai_family_name(pb->family), set->name,
                          pb->dtype == FMHA_DTYPE_BF16 ? "bf16"
                          : pb->dtype != FMHA_DTYPE_FP8 ? "fp16"
                          : pb->family == FMHA_FAMILY_FWD ? "fp8" : "fp8 KV",
                          pb->hdim, hv, fmhai_mask_str(pb),
                          pb->softcap, pb->alibi, pb->bias ? " bias=1" : "", page, dev_name,
                          set->entries[closest].info.name,
                          closest_field);
    }
    *chosen = best;
    return FMHA_OK;
}

static inline int fmhai_fwd_masked(const fmha_fwd_args *a)
{
    return a->mask_type != FMHA_MASK_NONE &&
           (fmhai_norm_window(a->window_left) >= 0 || fmhai_norm_window(a->window_right) >= 0);
}

/* V given K-major (fmha_fwd_args.v_kmajor): only the contiguous e4m3 rows
 * (pipeline/fwd_sm90.h: hdim 256 with 128 keys in two stages, FS2; hdim 128
 * with 192 keys in three) read it, through tensor maps; the V^T rows must
 * hold the padded keys. */
static inline fmha_status fmhai_fwd_vt_check(const fmha_kernel_info *k, const fmha_fwd_args *a)
{
    if (a->v_kmajor != 1)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: v_kmajor must be 0 or 1 (got %d)", a->v_kmajor);
    if (a->dtype != FMHA_DTYPE_FP8 || a->is_group_mode || a->hdim_v != a->hdim_q)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fwd: v_kmajor needs dtype fp8, batch mode and hdim_v == hdim_q");
    if (k->arch != FMHA_ARCH_SM90A || k->hdim != a->hdim_q ||
        !((k->hdim == 256 && k->tile_n == 128 && k->stages == 2) ||
          (k->hdim == 128 && k->tile_n == 192 && k->stages == 3)))
        return fmhai_fail(FMHA_ERR_UNSUPPORTED,
                          "fwd: v_kmajor: kernel %s does not read V^T (the contiguous e4m3 rows do: hdim 256 with "
                          "128 keys in 2 stages, hdim 128 with 192 keys in 3; head dims 128 and 256 only)", k->name);
    if (a->stride_v < fmha_fp8_v_kmajor_keys(a->seqlen_k))
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: v_kmajor: stride_v %lld is below the padded keys %d",
                          (long long)a->stride_v, fmha_fp8_v_kmajor_keys(a->seqlen_k));
    if (!fmhai_tma_unit_ok())
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fwd: v_kmajor needs tensor maps (TMA), which this build or "
                                                "FMHA_TILE_TMA=0 turns off");
    return FMHA_OK;
}

/* Validate a forward call, then select. */
static inline fmha_status fmhai_fwd_select(const fmha_kernel_set *set, const fmha_fwd_args *a,
                                           fmhai_problem *problem, int *chosen)
{
    fmhai_problem pb;
    fmha_status st;
    if (!set) return fmhai_fail(FMHA_ERR_INVALID_ARG, "fwd: kernel set is NULL");
    st = fmhai_fwd_validate(a);
    if (st != FMHA_OK) return st;
    memset(&pb, 0, sizeof(pb));
    pb.family = FMHA_FAMILY_FWD;
    pb.dtype = a->dtype;
    pb.q8 = a->dtype == FMHA_DTYPE_FP8;
    pb.hdim = a->hdim_q;
    pb.hdim_v = a->hdim_v;
    pb.masked = fmhai_fwd_masked(a);
    pb.mask_type = a->mask_type;
    pb.softcap = a->logits_soft_cap > 0.f;
    pb.alibi = a->alibi_slopes != 0;
    pb.max_seqlen_q = fmhai_fwd_max_seqlen_q(a);
    pb.dropout = fmhai_dropout_threshold(a->dropout_p) > 0u;   /* p below 1/512 drops nothing */
    pb.bias = a->bias != 0;
    *problem = pb;
    st = fmhai_select(set, &pb, chosen);
    if (st == FMHA_OK && a->v_kmajor) st = fmhai_fwd_vt_check(&set->entries[*chosen].info, a);
    return st;
}

/* Validate a batch prefill call, then select. */
static inline fmha_status fmhai_prefill_select(const fmha_kernel_set *set,
                                               const fmha_batch_prefill_args *a, fmhai_problem *problem,
                                               int *chosen)
{
    fmhai_problem pb;
    fmha_status st;
    if (!set) return fmhai_fail(FMHA_ERR_INVALID_ARG, "batch_prefill: kernel set is NULL");
    st = fmhai_prefill_validate(a);
    if (st != FMHA_OK) return st;
    memset(&pb, 0, sizeof(pb));
    pb.family = FMHA_FAMILY_BATCH_PREFILL;
    /* fp8 KV kernels serve bf16 and fp8 queries alike (a runtime choice) */
    pb.dtype = a->kv_dtype == FMHA_DTYPE_FP8 ? FMHA_DTYPE_FP8 : a->q_dtype;
    pb.q8 = a->q_dtype == FMHA_DTYPE_FP8;
    pb.pds = a->kv_dtype == FMHA_DTYPE_FP8 && a->kv_scale == FMHA_KV_SCALE_PER_PAGE;
    pb.hdim = a->hdim_q;
    pb.masked = a->mask_type != FMHA_MASK_NONE &&
                (fmhai_norm_window(a->window_left) >= 0 || fmhai_norm_window(a->window_right) >= 0);
    pb.mask_type = a->mask_type;
    pb.softcap = a->logits_soft_cap > 0.f;
    pb.page_size = a->page_size;
    pb.kv_layout = (int)a->kv_layout;
    pb.max_seqlen_q = a->max_seqlen_q;
    *problem = pb;
    return fmhai_select(set, &pb, chosen);
}

/* Launch entry i with grid (gx, heads, batch). */
/* ... of its kernel for bf16 queries instead where q16 (fn_q16). */
static inline fmha_status fmhai_launch_q16(const fmha_kernel_set *set, int i, fmhai_fwd_params *p, int gx,
                                           int heads, int batch, void *stream, int dependent, int q16)
{
#if defined(FMHA_PLATFORM_HOST_ONLY)
    (void)set; (void)i; (void)p; (void)gx; (void)heads; (void)batch; (void)stream; (void)dependent; (void)q16;
    return fmhai_fail(FMHA_ERR_LAUNCH, "built without a device compiler");
#else
    const fmhai_entry *e = &set->entries[i];
    const void *fn = q16 ? e->fn_q16 : e->fn;
    const int smem = q16 ? e->smem_q16 : e->smem_bytes, bit = q16 ? 13 : 11;
    void *kargs[1];
    hipError_t err;
    kargs[0] = p;
    if (!fn) return fmhai_fail(FMHA_ERR_LAUNCH, "%s: no kernel for bf16 queries", e->info.name);
    /* raise the kernel's shared-memory limit once per device (selection just
     * filled the probe cache for the current device) */
    if (smem > 48 * 1024 && !((set->probe[i] >> bit) & 1)) {
        err = hipFuncSetAttribute(fn, hipFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (err != hipSuccess)
            return fmhai_fail(FMHA_ERR_LAUNCH, "%s: cannot set shared memory to %d bytes: %s",
                              e->info.name, smem, hipGetErrorString(err));
        set->probe[i] |= 1 << bit;
    }
    /* dependent: the kernel waits for the stream's previous one itself
     * (fmhai_pdl_wait), where its code is sm_90+ */
    err = fmhai_launch_dependent(fn, dim3((unsigned)gx, (unsigned)heads, (unsigned)batch),
                                 dim3((unsigned)(e->info.warps * 32)), kargs, (size_t)smem,
                                 (hipStream_t)stream, dependent && FMHAI_PROBE_PDL(set->probe[i]));
    if (err != hipSuccess)
        return fmhai_fail(FMHA_ERR_LAUNCH, "%s: launch failed: %s", e->info.name, hipGetErrorString(err));
    return FMHA_OK;
#endif
}

static inline fmha_status fmhai_launch_grid(const fmha_kernel_set *set, int i, fmhai_fwd_params *p, int gx,
                                            int heads, int batch, void *stream, int dependent)
{
    return fmhai_launch_q16(set, i, p, gx, heads, batch, stream, dependent, 0);
}

/* Launch entry i with grid (m_blocks, heads, batch). */
static inline fmha_status fmhai_launch(const fmha_kernel_set *set, int i, fmhai_fwd_params *p,
                                       int heads, int batch, void *stream)
{
    return fmhai_launch_grid(set, i, p, p->m_blocks, heads, batch, stream, 0);
}

/* Why selection picked entry i's pipeline for a forward or batch-prefill
 * problem (a static string; see the header comment). */
static inline const char *fmhai_plan_why(const fmha_kernel_set *set, int i, const fmhai_problem *pb)
{
    const fmha_kernel_info *k = &set->entries[i].info;
    fmhai_device dev = { 0, 0, 0, 0 };
    int ordinal = 0;
    const char *why;
    if (k->arch == FMHA_ARCH_SM90A)
        return pb->dtype == FMHA_DTYPE_FP8 && !pb->q8 && pb->family == FMHA_FAMILY_BATCH_PREFILL
                   ? "fast pipeline (wgmma): it serves this problem (fp16 products: the e4m3 pages widened "
                     "in shared memory for the bf16 queries)"
                   : "fast pipeline (wgmma): it serves this problem";
    if (fmhai_current_device(&dev, &ordinal) != FMHA_OK || dev.is_amd || dev.cc != 90)
        return "portable pipeline: the device is not sm_90 (the fast wgmma pipeline needs Hopper)";
    why = fmhai_fwd90_why_not(pb);
    if (why) return why;
    return "portable pipeline: the kernel set has no sm_90a row that matches this problem "
           "(or the binary holds no sm_90a code of it)";
}

static inline void fmhai_fill_plan(const fmha_kernel_set *set, int i, const fmhai_problem *pb, int heads,
                                   int batch, fmha_fwd_plan *plan)
{
    const fmha_kernel_info *k = &set->entries[i].info;
    plan->kernel = k;
    plan->workspace_size = 0;
    plan->grid_x = (pb->max_seqlen_q + k->tile_m - 1) / k->tile_m;
    plan->grid_y = heads;
    plan->grid_z = batch;
    plan->block = k->warps * 32;
    plan->why = fmhai_plan_why(set, i, pb);
}

/* ---- entry points ------------------------------------------------------------ */
FMHA_API fmha_status fmha_fwd_check(const fmha_kernel_set *set, const fmha_fwd_args *args,
                                    fmha_fwd_plan *plan)
{
    int i = -1;
    fmhai_problem pb;
    fmha_status st = fmhai_fwd_select(set, args, &pb, &i);
    if (st == FMHA_OK && plan) fmhai_fill_plan(set, i, &pb, args->nhead_q, args->batch, plan);
    return st;
}

FMHA_API fmha_status fmha_fwd(const fmha_kernel_set *set, const fmha_fwd_args *args, void *stream)
{
    int i = -1;
    fmhai_fwd_params p;
    fmhai_problem pb;
    fmha_status st = fmhai_fwd_select(set, args, &pb, &i);
    if (st != FMHA_OK) return st;
    if (fmhai_fwd_is_empty(args)) return FMHA_OK;
    fmhai_fwd_make_params(args, set->entries[i].info.tile_m, &p);
    fmhai_fwd_tma_prepare(&set->entries[i].info, args, &p);
    if (p.v_kmajor && !p.tma_kv && args->seqlen_k == 0) p.v_kmajor = 0;   /* no keys: V is never read */
    if (p.v_kmajor && !p.tma_kv)
        return fmhai_fail(FMHA_ERR_UNSUPPORTED, "fwd: v_kmajor: the driver refused the K or V^T tensor map "
                                                "(base or strides TMA cannot take)");
    return fmhai_launch(set, i, &p, args->nhead_q, args->batch, stream);
}

FMHA_API fmha_status fmha_batch_prefill_check(const fmha_kernel_set *set,
                                              const fmha_batch_prefill_args *args,
                                              fmha_fwd_plan *plan)
{
    int i = -1;
    fmhai_problem pb;
    fmha_status st = fmhai_prefill_select(set, args, &pb, &i);
    if (st == FMHA_OK && plan) fmhai_fill_plan(set, i, &pb, args->nhead_q, args->batch, plan);
    return st;
}

FMHA_API fmha_status fmha_batch_prefill(const fmha_kernel_set *set,
                                        const fmha_batch_prefill_args *args, void *stream)
{
    int i = -1;
    fmhai_fwd_params p;
    fmhai_problem pb;
    fmha_status st = fmhai_prefill_select(set, args, &pb, &i);
    if (st != FMHA_OK) return st;
    if (args->batch == 0 || args->max_seqlen_q == 0) return FMHA_OK;
    fmhai_prefill_make_params(args, set->entries[i].info.tile_m, &p);
    fmhai_prefill_tma_prepare(&set->entries[i].info, args, &p);
    /* bf16 queries on a Hopper e4m3 row: its kernel for them */
    return fmhai_launch_q16(set, i, &p, p.m_blocks, args->nhead_q, args->batch, stream, 0,
                            set->entries[i].info.arch == FMHA_ARCH_SM90A && args->kv_dtype == FMHA_DTYPE_FP8 &&
                                !p.q_fp8);
}

FMHA_API int fmha_set_size(const fmha_kernel_set *set)
{
    int i, n = 0;
    if (!set) return 0;
    for (i = 0; i < set->count; ++i) n += set->entries[i].enabled;
    return n;
}

FMHA_API const fmha_kernel_info *fmha_set_kernel(const fmha_kernel_set *set, int k)
{
    int i;
    if (!set || k < 0) return 0;
    for (i = 0; i < set->count; ++i)
        if (set->entries[i].enabled && k-- == 0) return &set->entries[i].info;
    return 0;
}

/* Appends to buf without overflowing; tracks the length the whole text needs. */
static inline void fmhai_json_put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(*len < cap ? buf + *len : 0, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

FMHA_API size_t fmha_set_json(const fmha_kernel_set *set, char *buf, size_t cap)
{
    static const char *fams[] = { "fwd", "batch_prefill", "bwd_dq_dk_dv", "bwd_dot_do_o",
                                  "bwd_convert_dq", "bwd_dq_dk_dv_det", "decode", "splitkv_combine" };
    static const char *dts[] = { "fp16", "bf16", "fp8" };
    size_t len = 0;
    int i, first = 1;
    if (cap > 0) buf[0] = 0;
    if (!set) return 0;
    fmhai_json_put(buf, cap, &len, "{\"set\": \"%s\", \"kernels\": [", set->name);
    for (i = 0; i < set->count; ++i) {
        const fmha_kernel_info *k = &set->entries[i].info;
        if (!set->entries[i].enabled) continue;
        fmhai_json_put(buf, cap, &len,
                       "%s\n  {\"name\": \"%s\", \"family\": \"%s\", \"dtype\": \"%s\", \"hdim_q\": %d, "
                       "\"hdim_v\": %d, \"mask\": %s, \"softcap\": %s, \"alibi\": %s, \"bias\": %s, "
                       "\"dropout\": %s, \"p8_qsum\": %s, \"tile\": [%d, %d], "
                       "\"warps\": %d, \"stages\": %d, \"pipeline\": \"%s\", \"arch\": \"%s\", "
                       "\"page_size\": %d, \"kv_layout\": \"%s\", \"smem_bytes\": %d}",
                       first ? "" : ",", k->name, fams[k->family], dts[k->dtype], k->hdim, fmhai_info_hdv(k),
                       k->has_mask ? "true" : "false", k->has_softcap ? "true" : "false",
                       k->has_alibi ? "true" : "false", k->has_bias ? "true" : "false",
                       k->has_dropout ? "true" : "false", k->p8_qsum ? "true" : "false", k->tile_m, k->tile_n,
                       k->warps, k->stages,
                       k->pipeline, fmhai_arch_name(k->arch), k->page_size,
                       k->kv_layout == FMHA_KV_LAYOUT_VECTORIZED ? "vectorized" : "linear",
                       set->entries[i].smem_bytes);
        first = 0;
    }
    fmhai_json_put(buf, cap, &len, "\n]}\n");
    return len;
}

#endif /* FMHA_TILE_REGISTRY_H */
