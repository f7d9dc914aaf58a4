/*
 * Host unit tests of the backward plan and workspace, in plain C (no device
 * compiler, so kernel sets hold their table rows but no kernels and
 * selection runs against fmhai_test_device).
 *
 * Covers: the default backward set and its three stages; the plan (splits,
 * dQ written directly, workspace and staging sizes) for batch and group
 * mode; the workspace layout (offsets, sizes, 256-byte alignment, no
 * overlap, group mode sized by the total rows and not by batch x max
 * length); the packing of the group-mode tables (prefix offsets, entries of
 * length 0, per-entry splits, refusal of seqstarts that break the bounds,
 * never past dq_acc); the stream callback's job on a fake staging buffer;
 * selection by shared memory (a 163 KB device gets the single-buffered hdim
 * 256 row); a missing stage failing at plan time; and the validation of the
 * traits and the arguments (workspace too small, NULL or misaligned, args
 * that differ from the plan, ALiBi, dropout's p and rng pointer). Last line:
 * "N passed, M failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fmha_tile.h"
#include "host_check.h"

DECL_FMHA_KERNEL_SET(bwd_set, FMHA_DEFAULT_BWD_SET)

/* No dot_do_o: a plan must fail, naming the stage. */
#define NO_DOT_SET(X)                                                                          \
    X(BWD,            BF16, 128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(no_dot_set, NO_DOT_SET)

/* Head dim 192 rows (not in the default set). */
#define HD192_SET(X)                                                                           \
    X(BWD,            BF16, 192, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   BF16, 192, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, BF16, 192, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(hd192_set, HD192_SET)

/* An explicit row next to the tuned ones. */
#define EXPLICIT_SET(X)                                                                        \
    X(BWD,            FP16, 64, NOMASK, NOSOFTCAP, NOALIBI, 64, 64, 4, 1)                      \
    X(BWD_DOT_DO_O,   FP16, 64, NOMASK, NOSOFTCAP, NOALIBI, 32, 0, 2, 1)                       \
    X(BWD_CONVERT_DQ, FP16, 64, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(explicit_set, EXPLICIT_SET)

static fmha_bwd_traits batch_traits(fmha_dtype dt, int b, int hq, int hk, int sq, int sk, int d, int det)
{
    fmha_bwd_traits t;
    memset(&t, 0, sizeof(t));
    t.dtype = dt;
    t.batch = b; t.nhead_q = hq; t.nhead_k = hk;
    t.seqlen_q = sq; t.seqlen_k = sk;
    t.hdim_q = t.hdim_v = d;
    t.mask_type = FMHA_MASK_NONE; t.window_left = t.window_right = -1;
    t.is_deterministic = det;
    return t;
}

static fmha_bwd_traits group_traits(int b, int hq, int hk, int total_q, int total_k, int max_q, int max_k, int d,
                                    int det)
{
    fmha_bwd_traits t = batch_traits(FMHA_DTYPE_BF16, b, hq, hk, total_q, total_k, d, det);
    t.is_group_mode = 1;
    t.max_seqlen_q = max_q; t.max_seqlen_k = max_k;
    return t;
}

static size_t al(size_t x) { return (x + 255) / 256 * 256; }

/* Regions aligned, in order, not overlapping, inside the total. */
static int layout_sane(const fmhai_bwd_layout *L)
{
    if (L->total == 0) return 1;
    if (L->nsplits_off % 256 || L->offsets_off % 256 || L->dq_acc_off % 256 || L->dsum_off % 256 || L->total % 256)
        return 0;
    if (L->nsplits_off + L->nsplits_bytes > L->offsets_off && L->offsets_bytes) return 0;
    if (L->offsets_off + L->offsets_bytes > L->dq_acc_off) return 0;
    if (L->tables_bytes != (L->offsets_bytes ? L->offsets_off + L->offsets_bytes : L->nsplits_bytes)) return 0;
    if (L->dq_acc_off + L->dq_acc_bytes > L->dsum_off) return 0;
    if (L->sem_off % 256 || L->dsum_off + L->dsum_bytes > L->sem_off) return 0;
    return L->sem_off + L->sem_bytes <= L->total;
}

static void test_default_set(void)
{
    int i, n = fmha_set_size(&bwd_set), fam[6] = { 0, 0, 0, 0, 0, 0 }, bad = 0, n90 = 0, nal = 0, nbias = 0;
    int nmla = 0, nmla_aux = 0, bad_mla = 0;
    for (i = 0; i < n; ++i) {
        const fmha_kernel_info *k = fmha_set_kernel(&bwd_set, i);
        int aux = k->family != FMHA_FAMILY_BWD && k->family != FMHA_FAMILY_BWD_DET;
        if (!aux && k->arch == FMHA_ARCH_SM90A) aux = 2;
        fam[k->family]++;
        n90 += aux == 2;
        if (fmhai_bwd_row_violation_hv(aux, k->hdim, k->hdim_v, k->tile_m, k->tile_n, k->warps, k->stages)) bad++;
        if (k->hdim_v != k->hdim) {   /* MLA's 192_128 rows: portable, 6 warps, named d192_128 */
            nmla += !aux;
            nmla_aux += aux == 1;
            if (k->hdim != 192 || k->hdim_v != 128 || !strstr(k->name, "_d192_128_") ||
                (!aux && (k->arch != FMHA_ARCH_SM80 || k->warps != 6 || k->tile_n != 96 || !k->has_mask ||
                          k->has_softcap || k->has_alibi || k->has_bias)))
                bad_mla++;
        }
        if (k->has_alibi && (aux == 1 || !k->has_mask || k->has_softcap)) bad++;
        if (k->has_bias && (aux == 1 || !k->has_mask || k->has_softcap || k->has_alibi || k->hdim > 128 ||
                            !strstr(k->name, "_bias_")))
            bad++;
        nal += k->has_alibi;
        nbias += k->has_bias;
    }
#if defined(FMHA_PLATFORM_AMD)
    const int nhd = 3, n_aux = 6;
#else
    const int nhd = 5, n_aux = 12;   /* hdim 32 and 96 too; + 192_128 per dtype */
#endif
    CHECK(fam[FMHA_FAMILY_BWD] >= 10 * nhd && fam[FMHA_FAMILY_BWD_DET] >= 10 * nhd &&
              fam[FMHA_FAMILY_BWD_DOT_DO_O] == n_aux && fam[FMHA_FAMILY_BWD_CONVERT_DQ] == n_aux,
          "default backward set: dq_dk_dv and its deterministic twin for 2 dtypes x 3 hdims (NVIDIA: 5) x 5 variants "
          "(4 mask x soft cap, masked ALiBi), one dot_do_o and convert_dq each (and per dtype for 192_128)");
#if defined(FMHA_PLATFORM_AMD)
    CHECK(nmla == 0 && nmla_aux == 0, "default backward set on AMD: no 192_128 rows (the 256 rows serve MLA)");
#else
    CHECK(nmla == 8 && nmla_aux == 4 && bad_mla == 0,
          "default backward set: 192_128 (MLA) dq_dk_dv rows for 2 dtypes x BWD and BWD_DET x stages 2 and 1, "
          "MASK, portable 64 x 96 on 6 warps; dot_do_o and convert_dq per dtype");
#endif
    CHECK(bad == 0, "every backward row meets its constraints; ALiBi and BIAS only on masked dq_dk_dv rows without "
                    "soft cap (BIAS: hdim <= 128, named _bias_)");
#if !defined(FMHA_PLATFORM_AMD)
    CHECK(nbias == 16, "default backward set: BIAS dq_dk_dv rows for 2 dtypes x hdim 64/128 x BWD and BWD_DET, each "
                       "a portable and a wgmma kernel");
#endif
    {   /* an ALiBi dq_dk_dv row and its deterministic twin per dtype and hdim */
        int dt, hd, f, missing = 0;
        for (dt = 0; dt < 2; ++dt)
            for (hd = 64; hd <= 256; hd *= 2)
                for (f = 0; f < 2; ++f) {
                    int found = 0;
                    for (i = 0; i < n; ++i) {
                        const fmha_kernel_info *k = fmha_set_kernel(&bwd_set, i);
                        found |= k->has_alibi && k->hdim == hd &&
                                 k->dtype == (dt ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16) &&
                                 k->family == (f ? FMHA_FAMILY_BWD_DET : FMHA_FAMILY_BWD);
                    }
                    missing += !found;
                }
        CHECK(missing == 0 && nal >= 12, "default backward set: an ALiBi dq_dk_dv row and its deterministic twin "
                                         "per dtype and hdim");
    }
#if !defined(FMHA_PLATFORM_AMD)
    CHECK(n90 == 48, "default backward set: a wgmma dq_dk_dv row for every hdim 64 and 128 row (2 dtypes x 2 hdims "
                     "x 6 variants x BWD and BWD_DET)");
#endif
    CHECK(fmhai_bwd_row_violation(2, 256, 64, 128, 12, 2) != NULL && fmhai_bwd_row_violation(2, 128, 64, 64, 8, 2) &&
              fmhai_bwd_row_violation(2, 64, 64, 128, 12, 2) == NULL &&
              fmhai_bwd_row_violation(2, 128, 64, 128, 12, 2) == NULL,
          "wgmma rows: hdim 64/128 with the 64 x 128, 12-warp block only");
    {
        const fmha_kernel_info *k = NULL;
        for (i = 0; i < n && !k; ++i)
            if (fmha_set_kernel(&bwd_set, i)->hdim == 64) k = fmha_set_kernel(&bwd_set, i);
        CHECK(k && strstr(k->name, "fmha_bwd_dq_dk_dv_d64_fp16_nmask_nsoftcap_b") == k->name,
              "backward kernel names are self-describing");
    }
    {
        size_t len = fmha_set_json(&bwd_set, NULL, 0);
        char *buf = (char *)malloc(len + 1);
        fmha_set_json(&bwd_set, buf, len + 1);
        CHECK(strstr(buf, "\"family\": \"bwd_dq_dk_dv\"") && strstr(buf, "\"family\": \"bwd_dot_do_o\"") &&
                  strstr(buf, "\"family\": \"bwd_convert_dq\""),
              "JSON names the three backward families");
#if !defined(FMHA_PLATFORM_AMD)
        {   /* a 192_128 kernel exports both head dims */
            const char *m = strstr(buf, "\"name\": \"fmha_bwd_dq_dk_dv_d192_128_");
            const char *e = m ? strchr(m, '}') : NULL;
            const char *hq = m ? strstr(m, "\"hdim_q\": 192,") : NULL, *hv = m ? strstr(m, "\"hdim_v\": 128,") : NULL;
            CHECK(m && e && hq && hv && hq < e && hv < e, "JSON of a 192_128 backward kernel: hdim_q 192, hdim_v 128");
        }
#endif
        free(buf);
    }
    CHECK(fmhai_bwd_row_violation(0, 128, 64, 96, 8, 2) && strstr(fmhai_bwd_row_violation(0, 128, 64, 96, 8, 2),
                                                                  "bwd_tile_n_16_keys_per_warp"),
          "tile_n != 16 * warps rejected by name");
    CHECK(fmhai_bwd_row_violation(0, 128, 96, 128, 8, 2) != NULL, "tile_m 96 rejected");
    CHECK(fmhai_bwd_row_violation(0, 192, 64, 128, 8, 2) &&
              strstr(fmhai_bwd_row_violation(0, 192, 64, 128, 8, 2), "bwd_threads_cover_row_chunks"),
          "hd192 with 8 warps rejected (256 threads do not split a 24-chunk row)");
    CHECK(fmhai_bwd_row_violation(0, 128, 128, 128, 8, 2) != NULL, "hd 128 with tile_m 128 rejected (registers)");
    CHECK(fmhai_bwd_row_violation(1, 128, 64, 16, 4, 1) != NULL, "aux row with tile_n rejected");
    CHECK(fmhai_bwd_row_violation(0, 128, 64, 128, 8, 2) == NULL && fmhai_bwd_row_violation(1, 128, 64, 0, 4, 1) == NULL,
          "tuned rows valid");
    CHECK(fmhai_bwd_row_violation_hv(0, 192, 128, 64, 96, 6, 2) == NULL &&
              fmhai_bwd_row_violation_hv(0, 192, 128, 64, 96, 6, 1) == NULL &&
              fmhai_bwd_row_violation_hv(1, 192, 128, 64, 0, 4, 1) == NULL,
          "192_128 rows valid");
    CHECK(fmhai_bwd_row_violation_hv(0, 192, 96, 64, 96, 6, 2) &&
              strstr(fmhai_bwd_row_violation_hv(0, 192, 96, 64, 96, 6, 2), "bwd_hdim_v_64_to_hdim") &&
              fmhai_bwd_row_violation_hv(0, 128, 192, 64, 128, 8, 2) &&
              fmhai_bwd_row_violation_hv(2, 128, 64, 64, 128, 12, 2) &&
              strstr(fmhai_bwd_row_violation_hv(2, 128, 64, 64, 128, 12, 2), "bwd_hdim_v_portable") &&
              fmhai_bwd_row_violation_hv(0, 192, 128, 64, 128, 8, 2),
          "unequal-dims rows rejected: hdim_v not a multiple of 64 or above hdim, on the wgmma pipeline, and a "
          "192 row on 8 warps");
}

static void test_plan_batch(void)
{
    fmha_bwd_plan plan;
    fmhai_bwd_layout L;
    fmha_bwd_traits t = batch_traits(FMHA_DTYPE_BF16, 2, 8, 2, 1000, 1200, 128, 0);
    fmha_status st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dot_do_o && plan.dq_dk_dv && plan.convert_dq, "plan: three stages selected");
    CHECK(st == FMHA_OK && plan.dot_do_o->family == FMHA_FAMILY_BWD_DOT_DO_O &&
              plan.dq_dk_dv->family == FMHA_FAMILY_BWD && plan.convert_dq->family == FMHA_FAMILY_BWD_CONVERT_DQ &&
              plan.dq_dk_dv->hdim == 128 && plan.dq_dk_dv->dtype == FMHA_DTYPE_BF16 && !plan.dq_dk_dv->has_mask,
          "plan: stages of the right family, dtype, hdim; NOMASK kernel for an unmasked problem");
    CHECK(plan.nsplits == 1 && !plan.dq_direct, "non-deterministic: one dq_acc slice");
    fmhai_bwd_layout_make(&t, plan.nsplits, plan.dq_direct, &L);
    CHECK(layout_sane(&L), "batch layout: regions 256-aligned, ordered, disjoint");
    CHECK(L.nsplits_off == 0 && L.nsplits_bytes == 4 && L.offsets_bytes == 0 && L.dq_acc_off == 256 &&
              L.dq_acc_bytes == (size_t)4 * 2 * 8 * 1000 * 128 && L.dsum_off == al(256 + L.dq_acc_bytes) &&
              L.dsum_bytes == (size_t)4 * 2 * 8 * 1000 && L.sem_bytes == 0 &&
              L.total == al(L.dsum_off + L.dsum_bytes),
          "batch layout: nsplits[1] | dq_acc [b][h][1][s_q][d] fp32 | D [b][h][s_q] fp32 (no counters)");
    CHECK(plan.workspace_size == L.total, "plan.workspace_size is the layout's total");
    CHECK(plan.staging_size >= sizeof(fmhai_bwd_pack_job) + L.tables_bytes, "staging holds the job and the tables");

    t.is_deterministic = 1;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    /* 16 chains over 2 x 2 (batch x kv heads): 4 splits (of the 10 key tiles) */
    CHECK(st == FMHA_OK && plan.nsplits == 4, "deterministic: 16 chains over 4 (entry, kv head) pairs, 4 splits");
    CHECK(st == FMHA_OK && plan.dq_dk_dv->family == FMHA_FAMILY_BWD_DET &&
              strstr(plan.dq_dk_dv->name, "fmha_bwd_dq_dk_dv_det_d128_bf16") == plan.dq_dk_dv->name,
          "deterministic plan: the BWD_DET (ordered dQ) kernel");
    fmhai_bwd_layout_make(&t, plan.nsplits, plan.dq_direct, &L);
    CHECK(layout_sane(&L) && L.dq_acc_bytes == (size_t)4 * 2 * 8 * 4 * 1000 * 128,
          "deterministic layout: dq_acc has nsplits slices per entry");
    CHECK(L.sem_bytes == (size_t)4 * 2 * 8 * 4 * 1000 && L.sem_off == al(L.dsum_off + L.dsum_bytes) &&
              L.total == al(L.sem_off + L.sem_bytes) && plan.workspace_size == L.total,
          "deterministic layout: one int32 counter per dq_acc row, after D");
    t = batch_traits(FMHA_DTYPE_FP16, 16, 16, 16, 1024, 1024, 128, 1);
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.nsplits == 1, "deterministic with 256 (entry, kv head) pairs: one split");
    t = batch_traits(FMHA_DTYPE_FP16, 1, 16, 16, 16384, 16384, 128, 1);
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.nsplits == 1, "deterministic, 1 x 16 heads at 16k: one split");
    t = batch_traits(FMHA_DTYPE_FP16, 1, 2, 1, 1000, 1000, 128, 1);
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.nsplits == 8, "deterministic, one (entry, kv head) pair: splits capped by the 8 key tiles");
    t = batch_traits(FMHA_DTYPE_FP16, 1, 1, 1, 16384, 16384, 64, 1);
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.nsplits == FMHAI_BWD_MAX_SPLITS, "deterministic splits capped at FMHAI_BWD_MAX_SPLITS");
    t = batch_traits(FMHA_DTYPE_FP16, 1, 16, 16, 16384, 16384, 128, 1);
    t.mask_type = FMHA_MASK_TOP_LEFT; t.window_left = -1; t.window_right = 0;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.nsplits == 1, "deterministic with a mask (reversed chains, no waiting): one split");
    t.window_left = 256;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.nsplits == 1, "deterministic with a sliding window: one split");

    /* one key tile per sequence: dQ direct, no workspace */
    t = batch_traits(FMHA_DTYPE_BF16, 3, 4, 1, 500, 100, 64, 1);
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_direct && plan.workspace_size == 0 && plan.staging_size == 0,
          "s_k <= tile_n: dQ written directly, zero-size workspace");
    t.seqlen_k = 0;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_direct && plan.workspace_size == 0, "s_k = 0: direct, no workspace");
    t.seqlen_k = 129;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && !plan.dq_direct && plan.workspace_size > 0, "s_k = 129 (two key tiles): a workspace");
    t = batch_traits(FMHA_DTYPE_BF16, 2, 4, 4, 0, 300, 64, 0);
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, plan.dq_direct, &L);
    CHECK(st == FMHA_OK && layout_sane(&L) && L.dq_acc_bytes == 0 && L.dsum_bytes == 0,
          "s_q = 0: empty dq_acc and D regions, tables still aligned");
}

static void test_plan_group(void)
{
    fmha_bwd_plan plan;
    fmhai_bwd_layout L;
    /* 4 entries, q lengths {0, 300, 17, 1000} = 1317 rows, longest 1000 */
    fmha_bwd_traits t = group_traits(4, 8, 2, 1317, 2000, 1000, 1000, 64, 1);
    fmha_status st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.nsplits == 2, "group, deterministic: 16 chains over 4 x 2 pairs, 2 splits");
    fmhai_bwd_layout_make(&t, plan.nsplits, plan.dq_direct, &L);
    CHECK(layout_sane(&L), "group layout: regions 256-aligned, ordered, disjoint");
    CHECK(L.nsplits_bytes == 4 * 4 && L.offsets_off == 256 && L.offsets_bytes == 8 * 5 && L.dq_acc_off == 512,
          "group layout: nsplits[batch] | offsets[batch+1] int64 | dq_acc");
    CHECK(L.dq_acc_bytes == (size_t)4 * 1317 * 8 * 2 * 64 && L.dsum_bytes == (size_t)4 * 1317 * 8 &&
              L.sem_bytes == (size_t)4 * 1317 * 8 * 2,
          "group layout: dq_acc, D and the counters sized by the total rows (1317), not batch x max (4000)");
    CHECK(plan.workspace_size == L.total && plan.workspace_size < (size_t)4 * 4 * 1000 * 8 * 8 * 64,
          "group workspace is compact");
    CHECK(plan.staging_size >= sizeof(fmhai_bwd_pack_job) + 2 * 4 * 5 + L.tables_bytes,
          "group staging holds job, both seqstarts and the tables");
}

static void test_pack(void)
{
    int32_t sq[6] = { 0, 0, 300, 317, 1317, 1317 }, sk[6] = { 0, 5, 1005, 1005, 2005, 2300 };
    int32_t ns[5];
    int64_t off[6];
    int r = fmhai_bwd_pack_tables(5, 8, 64, 128, 8, 1, 1317, sq, sk, ns, off);
    CHECK(r == 0, "pack: valid seqstarts accepted");
    CHECK(ns[0] == 1 && ns[1] == 8 && ns[2] == 1 && ns[3] == 8 && ns[4] == 3,
          "pack: per-entry splits = min(plan, key tiles), at least 1 (s_k 0 and 5 -> 1, 1000 -> 8, 295 -> 3)");
    CHECK(off[0] == 0 && off[1] == 0 && off[2] == (int64_t)8 * 8 * 300 * 64 && off[3] == off[2] + (int64_t)8 * 17 * 64 &&
              off[4] == off[3] + (int64_t)8 * 8 * 1000 * 64 && off[5] == off[4],
          "pack: offsets are the prefix sum of nhead x splits x s_q x d (length 0 adds nothing)");
    CHECK(off[5] * 4 <= (int64_t)4 * 1317 * 8 * 8 * 64, "pack: the packed dq_acc fits the plan's bound");
    r = fmhai_bwd_pack_tables(5, 8, 64, 128, 8, 0, 1317, sq, sk, ns, off);
    CHECK(r == 0 && ns[1] == 1 && ns[3] == 1 && off[5] == (int64_t)8 * 1317 * 64,
          "pack, non-deterministic: one split each, offsets of the rows");
    {
        int32_t bad_q[3] = { 0, 50, 40 }, ok_k[3] = { 0, 10, 20 };
        r = fmhai_bwd_pack_tables(2, 2, 64, 128, 4, 1, 100, bad_q, ok_k, ns, off);
        CHECK(r == 1 && ns[0] == 1 && ns[1] == 0 && off[2] == off[1],
              "pack: a negative length gets no splits and no rows");
    }
    {
        int32_t q[3] = { 0, 50, 120 }, k[3] = { 0, 10, 20 };
        r = fmhai_bwd_pack_tables(2, 2, 64, 128, 4, 1, 100, q, k, ns, off);
        CHECK(r == 1 && ns[1] == 0, "pack: rows past the plan's total are refused");
    }
    {   /* random lengths within the bounds never pass the dq_acc bound */
        unsigned x = 12345u;
        int trial, fits = 1;
        for (trial = 0; trial < 200; ++trial) {
            int32_t q[9], k[9];
            int b, total = 0;
            q[0] = k[0] = 0;
            for (b = 0; b < 8; ++b) {
                x = x * 1103515245u + 12345u;
                q[b + 1] = q[b] + (int)((x >> 16) % 700);
                x = x * 1103515245u + 12345u;
                k[b + 1] = k[b] + (int)((x >> 16) % 3000);
            }
            total = q[8];
            r = fmhai_bwd_pack_tables(8, 4, 128, 128, 16, 1, total, q, k, ns, off);
            if (r != 0 || off[8] > (int64_t)total * 4 * 16 * 128) fits = 0;
        }
        CHECK(fits, "pack: 200 random varlen batches fit the workspace sized from the traits");
    }
}

static void test_job(void)
{
    fmha_bwd_plan plan;
    fmhai_bwd_layout L;
    /* one KV head: 16 chains over 3 pairs give 6 splits, capped per entry by its key tiles */
    fmha_bwd_traits t = group_traits(3, 4, 1, 400, 900, 300, 600, 128, 1);
    char *staging;
    fmhai_bwd_pack_job *j;
    int32_t *ns;
    int64_t *off;
    fmha_status st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, plan.dq_direct, &L);
    staging = (char *)calloc(1, plan.staging_size);
    fmhai_bwd_job_make(&t, &L, plan.dq_dk_dv->tile_n, plan.nsplits, staging);
    j = (fmhai_bwd_pack_job *)staging;
    CHECK(st == FMHA_OK && j->sq_off % 16 == 0 && j->sk_off >= j->sq_off + 16 && j->image_off + L.tables_bytes <= plan.staging_size,
          "job: seqstart copies and table image inside the staging");
    {   /* what the device copies would have put there */
        int32_t q[4] = { 0, 300, 300, 400 }, k[4] = { 0, 600, 700, 900 };
        memcpy(staging + j->sq_off, q, sizeof(q));
        memcpy(staging + j->sk_off, k, sizeof(k));
    }
    fmhai_bwd_job_run(j);
    ns = (int32_t *)(staging + j->image_off);
    off = (int64_t *)(staging + j->image_off + L.offsets_off);
    CHECK(j->rejected == 0 && ns[0] == 5 && ns[1] == 1 && ns[2] == 2 && off[0] == 0 &&
              off[1] == (int64_t)4 * 5 * 300 * 128 && off[2] == off[1] && off[3] == off[2] + (int64_t)4 * 2 * 100 * 128,
          "job: the callback's work fills nsplits and offsets in the table image");
    j->magic = 0;
    ns[0] = -7;
    fmhai_bwd_job_run(j);
    CHECK(ns[0] == -7, "job: a staging without the job's magic is left alone");
    free(staging);
    {
        fmha_bwd_traits tb = batch_traits(FMHA_DTYPE_FP16, 2, 2, 1, 700, 900, 64, 1);
        st = fmha_bwd_plan_make(&bwd_set, &tb, &plan);
        fmhai_bwd_layout_make(&tb, plan.nsplits, plan.dq_direct, &L);
        staging = (char *)calloc(1, plan.staging_size);
        fmhai_bwd_job_make(&tb, &L, plan.dq_dk_dv->tile_n, plan.nsplits, staging);
        j = (fmhai_bwd_pack_job *)staging;
        fmhai_bwd_job_run(j);
        CHECK(st == FMHA_OK && *(int32_t *)(staging + j->image_off) == plan.nsplits && L.tables_bytes == 4,
              "job, batch mode: the table is the plan's nsplits");
        free(staging);
    }
}

/* The deterministic schedule's rows of blocks: one wave of gx-block rows,
 * the units dealt evenly. */
static void test_det_rows(void)
{
    CHECK(fmhai_bwd_det_rows(128, 16, 132, 0) == 8 && fmhai_bwd_det_rows(32, 64, 132, 0) == 2 &&
              fmhai_bwd_det_rows(100, 16, 132, 0) == 8,
          "det schedule: 128 units of 16 tiles on 132 SMs in 8 rows, 32 of 64 in 2, 100 of 16 in 8 (12 or 13 each)");
    CHECK(fmhai_bwd_det_rows(3, 16, 132, 0) == 3 && fmhai_bwd_det_rows(8, 256, 132, 0) == 1 &&
              fmhai_bwd_det_rows(0, 16, 132, 0) == 1,
          "det schedule: fewer units than rows, more tiles than SMs, no units");
    CHECK(fmhai_bwd_det_rows(128, 16, 132, 1) == 0, "det schedule: a masked problem keeps one block per unit");
}

static void test_selection(void)
{
    fmha_bwd_plan plan;
    fmha_bwd_traits t = batch_traits(FMHA_DTYPE_BF16, 1, 4, 4, 1000, 1000, 256, 0);
    fmha_status st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_dk_dv->stages == 2, "hdim 256 on a 227 KB device: the double-buffered row");
    fmhai_test_device.smem_optin = 163 * 1024;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_dk_dv->stages == 1, "hdim 256 on a 163 KB device: the single-buffered row");
    fmhai_test_device.smem_optin = 227 * 1024;
    t.hdim_q = t.hdim_v = 72;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
#if defined(FMHA_PLATFORM_AMD)
    CHECK(st == FMHA_OK && plan.dq_dk_dv->hdim == 128 && plan.dot_do_o->hdim == 128 && plan.convert_dq->hdim == 128,
          "hdim 72 runs on the hdim 128 kernels (all three stages)");
#else
    CHECK(st == FMHA_OK && plan.dq_dk_dv->hdim == 128 && plan.dq_dk_dv->arch == FMHA_ARCH_SM90A &&
              plan.dot_do_o->hdim == 96 && plan.convert_dq->hdim == 96,
          "hdim 72 on sm_90: dq_dk_dv on the wgmma 128 kernel (head-dim rule), the streaming stages on the 96 ones");
    fmhai_test_device.cc = 80; fmhai_test_device.smem_optin = 163 * 1024;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_dk_dv->hdim == 96 && plan.dq_dk_dv->tile_n == 96 && plan.dot_do_o->hdim == 96,
          "hdim 72 on sm_80: the 96 kernels (96-key tiles)");
    fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
#endif
    /* hdim_v < hdim_q (MLA 192 / 128): the 192_128 kernels (exact dims)
     * before the padded ones; other pairs by least padding of both dims */
    t.hdim_q = 192; t.hdim_v = 128;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
#if defined(FMHA_PLATFORM_AMD)
    CHECK(st == FMHA_OK && plan.dq_dk_dv->hdim == 256 && plan.dot_do_o->hdim == 256,
          "hdim (192, 128) on AMD: the hdim 256 kernels, V padded");
#else
    CHECK(st == FMHA_OK && plan.dq_dk_dv->hdim == 192 && plan.dq_dk_dv->hdim_v == 128 &&
              plan.dq_dk_dv->stages == 2 && plan.dq_dk_dv->warps == 6 && plan.dot_do_o->hdim == 192 &&
              plan.dot_do_o->hdim_v == 128 && plan.convert_dq->hdim == 192 && plan.convert_dq->hdim_v == 128,
          "hdim (192, 128): the 192_128 kernels, all three stages (not the padded 256 ones)");
    {
        static const int pairs[6][3] = {   /* hdim_q, hdim_v, 1: a 192_128 kernel, 0: another */
            { 160, 96, 1 }, { 192, 64, 1 }, { 136, 128, 1 }, { 128, 64, 0 }, { 192, 192, 0 }, { 200, 128, 0 } };
        int pi, okp = 1;
        for (pi = 0; pi < 6; ++pi) {
            t.hdim_q = pairs[pi][0]; t.hdim_v = pairs[pi][1];
            st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
            if (st != FMHA_OK || (plan.dq_dk_dv->hdim_v == 128 && plan.dq_dk_dv->hdim == 192) != pairs[pi][2] ||
                plan.dq_dk_dv->hdim < t.hdim_q || plan.dq_dk_dv->hdim_v < t.hdim_v) {
                okp = 0;
                printf("  pair (%d, %d): %s\n", t.hdim_q, t.hdim_v, st == FMHA_OK ? plan.dq_dk_dv->name : "no plan");
            }
        }
        CHECK(okp, "MLA-like pairs (160, 96), (192, 64), (136, 128) take 192_128; (128, 64) the 128 kernels, "
                   "(192, 192) and (200, 128) the 256 ones");
        t.hdim_q = 192; t.hdim_v = 128;
        t.is_deterministic = 1;
        t.mask_type = FMHA_MASK_BOTTOM_RIGHT; t.window_left = -1; t.window_right = 0;
        st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
        CHECK(st == FMHA_OK && plan.dq_dk_dv->family == FMHA_FAMILY_BWD_DET && plan.dq_dk_dv->hdim_v == 128 &&
                  plan.dq_dk_dv->hdim == 192,
              "hdim (192, 128), deterministic and causal: the BWD_DET 192_128 kernel");
        t.is_deterministic = 0;
        t.mask_type = FMHA_MASK_NONE; t.window_left = t.window_right = -1;
        fmhai_test_device.smem_optin = 163 * 1024;
        st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
        CHECK(st == FMHA_OK && plan.dq_dk_dv->hdim_v == 128 && plan.dq_dk_dv->stages == 1,
              "hdim (192, 128) on a 163 KB device: the single-buffered 192_128 row");
        fmhai_test_device.smem_optin = 227 * 1024;
        t.has_logits_soft_cap = 1;
        st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
        CHECK(st == FMHA_OK && plan.dq_dk_dv->hdim == 256 && plan.dq_dk_dv->has_softcap,
              "hdim (192, 128) with a soft cap (no 192_128 SOFTCAP row in the default set): the 256 kernels");
        t.has_logits_soft_cap = 0;
    }
#endif
    t.hdim_q = 192; t.hdim_v = 128;
    st = fmha_bwd_plan_make(&hd192_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_dk_dv->hdim == 192 && plan.dq_dk_dv->tile_n == 96 && plan.dq_dk_dv->warps == 6 &&
              plan.dot_do_o->hdim == 192 && plan.convert_dq->hdim == 192,
          "hdim (192, 128) with the 192 rows: the 6-warp hdim 192 kernels");
    t.hdim_q = 128; t.hdim_v = 192;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "hdim_v 192"), "hdim_v > hdim_q unsupported");
    t.hdim_q = t.hdim_v = 64;
    t.mask_type = FMHA_MASK_BOTTOM_RIGHT; t.window_left = -1; t.window_right = 0;
    t.has_logits_soft_cap = 1;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_dk_dv->has_mask && plan.dq_dk_dv->has_softcap,
          "causal soft-capped problem: MASK + SOFTCAP kernel");
    st = fmha_bwd_plan_make(&explicit_set, &t, &plan);
    CHECK(st == FMHA_ERR_NO_KERNEL, "explicit NOMASK set cannot serve a masked problem");
    t = batch_traits(FMHA_DTYPE_FP16, 1, 4, 4, 1000, 1000, 64, 0);
    st = fmha_bwd_plan_make(&explicit_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_dk_dv->tile_m == 64 && plan.dq_dk_dv->tile_n == 64 && plan.dot_do_o->tile_m == 32,
          "explicit rows are built as written");
}

static void test_validation(void)
{
    fmha_bwd_plan plan;
    fmha_bwd_traits t = batch_traits(FMHA_DTYPE_BF16, 2, 8, 2, 1000, 1200, 128, 0);
    fmha_bwd_args a;
    fmha_status st;
    char *ws;

    st = fmha_bwd_plan_make(&no_dot_set, &t, &plan);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "bwd_dot_do_o") &&
              strstr(fmha_last_error(), "three stages"),
          "a set without dot_do_o fails at plan time, naming the stage");
    {
        fmha_bwd_traits td = batch_traits(FMHA_DTYPE_FP16, 2, 8, 2, 1000, 1200, 64, 1);
        st = fmha_bwd_plan_make(&explicit_set, &td, &plan);
        CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "bwd_dq_dk_dv_det"),
              "deterministic traits on a set without BWD_DET rows fail at plan time, naming the family");
    }
    st = fmha_bwd_plan_make(NULL, &t, &plan);
    CHECK(st == FMHA_ERR_INVALID_ARG, "NULL set");
    st = fmha_bwd_plan_make(&bwd_set, NULL, &plan);
    CHECK(st == FMHA_ERR_INVALID_ARG, "NULL traits");
    t.has_alibi = 1;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_dk_dv->has_alibi && strstr(plan.dq_dk_dv->name, "_alibi_"),
          "ALiBi traits: the plan takes an ALiBi dq_dk_dv row");
    t.has_logits_soft_cap = 1;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_ERR_NO_KERNEL && (strstr(fmha_last_error(), "alibi") || strstr(fmha_last_error(), "softcap")),
          "ALiBi with a soft cap: the default set has no such row, the error says which feature is missing");
    t.has_logits_soft_cap = 0;
    t.has_alibi = 2;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_INVALID_ARG, "has_alibi 2: invalid");
    t.has_alibi = 0;
    t.dtype = FMHA_DTYPE_FP8;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_UNSUPPORTED, "fp8 traits: unsupported");
    t.dtype = FMHA_DTYPE_BF16;
    t.nhead_k = 3;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_INVALID_ARG, "nhead_q % nhead_k != 0");
    t.nhead_k = 2;
    t.seqlen_q = -1;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_INVALID_ARG, "negative seqlen");
    t.seqlen_q = 1000;

    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    ws = (char *)0x100000;   /* never dereferenced: host-only validation */
    memset(&a, 0, sizeof(a));
    a.dtype = t.dtype; a.batch = 2; a.nhead_q = 8; a.nhead_k = 2; a.seqlen_q = 1000; a.seqlen_k = 1200;
    a.hdim_q = a.hdim_v = 128;
    a.q = a.k = a.v = a.o = a.dout = (const void *)0x200000;
    a.dq = a.dk = a.dv = (void *)0x300000;
    a.lse = (const float *)0x400000;
    a.stride_q = a.stride_k = a.stride_v = a.stride_o = a.stride_do = a.stride_dq = a.stride_dk = a.stride_dv = 1024;
    a.scale = 0.088f;
    a.mask_type = FMHA_MASK_NONE; a.window_left = a.window_right = -1;
    a.workspace = ws; a.workspace_size = plan.workspace_size;
    CHECK(st == FMHA_OK && fmha_bwd(&plan, &a, NULL) == FMHA_ERR_LAUNCH,
          "valid args pass validation (host-only build: launch unavailable)");
    a.workspace_size = plan.workspace_size - 1;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "smaller"),
          "workspace one byte too small: invalid argument");
    a.workspace_size = plan.workspace_size;
    a.workspace = NULL;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "NULL workspace");
    a.workspace = ws + 16;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "workspace not 256-byte aligned");
    a.workspace = ws;
    a.seqlen_k = 1100;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "seqlen_k"),
          "args that differ from the plan: invalid argument naming the field");
    a.seqlen_k = 1200;
    a.alibi_slopes = (const float *)0x500000;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "without ALiBi"),
          "ALiBi slopes on a plan made without ALiBi: invalid argument, says why");
    a.alibi_slopes = NULL;
    a.sinks = (const float *)0x500000;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "together"),
          "sinks without dsinks: invalid argument");
    a.dsinks = (float *)0x500102;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "aligned"),
          "dsinks not 4-byte aligned: invalid argument");
    a.dsinks = (float *)0x500100;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_LAUNCH, "sinks with dsinks pass validation");
    a.sinks = NULL;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "dsinks without sinks: invalid argument");
    a.dsinks = NULL;
    a.logits_soft_cap = 5.0f;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "soft cap the plan was not made for");
    a.logits_soft_cap = 0.0f;
    a.dout = NULL;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "NULL dout");
    a.dout = a.o;
    a.stride_dq = 1020;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_UNSUPPORTED, "dq stride not a multiple of 8");
    a.stride_dq = 1024;
    a.is_deterministic = 1;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "deterministic args on a non-deterministic plan");
    a.is_deterministic = 0;
    CHECK(fmha_bwd(NULL, &a, NULL) == FMHA_ERR_INVALID_ARG && fmha_bwd(&plan, NULL, NULL) == FMHA_ERR_INVALID_ARG,
          "NULL plan or args");
    /* dropout: the forward's p in [0, 1), seed and offset, or a device
     * {seed, offset} (8-byte aligned) */
    a.dropout_p = 1.0f;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "dropout_p"),
          "dropout_p 1: invalid argument naming it");
    a.dropout_p = -0.25f;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "dropout_p"),
          "negative dropout_p: invalid argument");
    a.dropout_p = NAN;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "NaN dropout_p: invalid argument");
    a.dropout_p = 0.2f;
    a.dropout_seed = 42; a.dropout_offset = 7;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_LAUNCH,
          "dropout 0.2 passes validation and finds a dq_dk_dv that has it (host-only build: launch unavailable)");
    a.dropout_rng = (const uint64_t *)0x600004;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "dropout_rng") &&
              strstr(fmha_last_error(), "8-byte"),
          "dropout_rng not 8-byte aligned: invalid argument naming it");
    a.dropout_rng = (const uint64_t *)0x600008;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_LAUNCH, "aligned dropout_rng passes validation");
    a.dropout_p = 0.0f; a.dropout_rng = NULL;

    CHECK(fmha_bwd_prepare_workspace(&plan, ws, plan.workspace_size - 256, NULL, NULL, NULL) == FMHA_ERR_INVALID_ARG,
          "prepare: workspace too small");
    CHECK(fmha_bwd_prepare_workspace_async(&plan, ws, plan.workspace_size, NULL, NULL, NULL, NULL) ==
              FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "staging"),
          "prepare_async: staging required");
    CHECK(fmha_bwd_prepare_workspace_device(&plan, ws, plan.workspace_size - 256, NULL, NULL, NULL) ==
              FMHA_ERR_INVALID_ARG,
          "prepare_device: workspace too small");
    CHECK(fmha_bwd_prepare_workspace_device(&plan, (char *)ws + 16, plan.workspace_size, NULL, NULL, NULL) ==
              FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "aligned"),
          "prepare_device: misaligned workspace");
    CHECK(fmha_bwd_prepare_workspace_device(&plan, ws, plan.workspace_size, NULL, NULL, NULL) == FMHA_ERR_LAUNCH,
          "prepare_device: valid batch-mode call (host-only build: launch unavailable)");
    {
        fmha_bwd_traits tg = group_traits(2, 2, 2, 100, 300, 60, 200, 64, 0);
        st = fmha_bwd_plan_make(&bwd_set, &tg, &plan);
        CHECK(st == FMHA_OK && fmha_bwd_prepare_workspace_device(&plan, ws, plan.workspace_size, NULL, NULL, NULL) ==
                                   FMHA_ERR_INVALID_ARG,
              "prepare_device, group mode: seqstarts required");
        CHECK(st == FMHA_OK && fmha_bwd_prepare_workspace(&plan, ws, plan.workspace_size, NULL, NULL, NULL) ==
                                   FMHA_ERR_INVALID_ARG,
              "prepare, group mode: seqstarts required");
        tg = group_traits(2, 2, 2, 100, 300, 60, 100, 64, 0);
        st = fmha_bwd_plan_make(&bwd_set, &tg, &plan);
        CHECK(st == FMHA_OK && plan.dq_direct && fmha_bwd_prepare_workspace(&plan, NULL, 0, NULL, NULL, NULL) == FMHA_OK,
              "prepare of a direct plan: nothing to do");
        CHECK(st == FMHA_OK && plan.dq_direct &&
                  fmha_bwd_prepare_workspace_device(&plan, NULL, 0, NULL, NULL, NULL) == FMHA_OK,
              "prepare_device of a direct plan: nothing to do");
    }
}

/* Elementwise bias: selection, the dbias sum's layout by broadcast and
 * determinism, the kernel parameters, the dbias pass, validation. */
static void test_bias(void)
{
    fmha_bwd_plan plan;
    fmhai_bwd_layout L, L0;
    fmhai_bwd_params p;
    fmhai_bwd_dbias_job J;
    fmha_bwd_args a;
    fmha_status st;
    char *ws = (char *)0x100000;   /* never dereferenced */
    fmha_bwd_traits t = batch_traits(FMHA_DTYPE_BF16, 2, 8, 2, 1000, 1200, 128, 0), t0;

    t.has_bias = 1;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK && plan.dq_dk_dv->has_bias && !plan.dq_dk_dv->has_alibi && plan.dq_dk_dv->has_mask &&
              strstr(plan.dq_dk_dv->name, "_bias_"),
          "bias traits: the plan takes a BIAS dq_dk_dv row (the MASK one serves the unmasked problem)");
    t0 = t; t0.has_bias = 0;
    fmhai_bwd_layout_make(&t0, 1, 0, &L0);
    fmhai_bwd_layout_make(&t, 1, 0, &L);
    CHECK(L.dbias_bytes == 0 && L.total == L0.total && plan.workspace_size == L0.total,
          "bias without dbias: the workspace of the plain backward");
    t.has_dbias = 1;
    fmhai_bwd_layout_make(&t, 1, 0, &L);
    CHECK(L.dbias_bytes == 0 && L.total == L0.total, "dbias of the bias's full shape: plain stores, no workspace");
    t.dbias_bcast = FMHA_BIAS_BCAST_BATCH | FMHA_BIAS_BCAST_HEAD;
    fmhai_bwd_layout_make(&t, 1, 0, &L);
    CHECK(layout_sane(&L) && L.dbias_off == L0.total && L.dbias_bytes == (size_t)4 * 1000 * 1200 &&
              L.total == al(L.dbias_off + L.dbias_bytes),
          "dbias [1, 1, s_q, s_k]: one fp32 [s_q][s_k] sum after the other regions");
    t.dbias_bcast = FMHA_BIAS_BCAST_HEAD;
    fmhai_bwd_layout_make(&t, 1, 0, &L);
    CHECK(L.dbias_bytes == (size_t)4 * 2 * 1000 * 1200, "dbias [b, 1, s_q, s_k]: an fp32 sum per entry");
    t.is_deterministic = 1;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, 0, &L);
    CHECK(st == FMHA_OK && layout_sane(&L) && L.dbias_bytes == (size_t)4 * 2 * 8 * 1000 * 1200 &&
              plan.workspace_size == L.total && plan.dq_dk_dv->family == FMHA_FAMILY_BWD_DET &&
              plan.dq_dk_dv->has_bias,
          "deterministic dbias [b, 1, s_q, s_k]: a slice per entry and head (no atomics), BWD_DET BIAS row");

    /* parameters and the dbias pass: deterministic, summed over heads */
    memset(&a, 0, sizeof(a));
    a.dtype = t.dtype; a.batch = 2; a.nhead_q = 8; a.nhead_k = 2; a.seqlen_q = 1000; a.seqlen_k = 1200;
    a.hdim_q = a.hdim_v = 128; a.is_deterministic = 1;
    a.q = a.k = a.v = a.o = a.dout = (const void *)0x200000;
    a.dq = a.dk = a.dv = (void *)0x300000;
    a.lse = (const float *)0x400000;
    a.stride_q = a.stride_k = a.stride_v = a.stride_o = a.stride_do = a.stride_dq = a.stride_dk = a.stride_dv = 1024;
    a.scale = 0.088f;
    a.mask_type = FMHA_MASK_NONE; a.window_left = a.window_right = -1;
    a.workspace = ws; a.workspace_size = plan.workspace_size;
    a.bias = (const void *)0x600000; a.bias_dtype = FMHA_DTYPE_FP32;
    a.stride_bias = 1200; a.nhead_stride_bias = 0; a.batch_stride_bias = 1200 * 1000;
    a.dbias = (void *)0x700000;
    a.stride_dbias = 1201; a.nhead_stride_dbias = 77; a.batch_stride_dbias = 1201 * 1000;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_LAUNCH, "bias and dbias args pass validation");
    fmhai_bwd_make_params(&plan, &a, &L, &p);
    CHECK(p.bias == a.bias && p.bias_dt == FMHA_DTYPE_FP32 && p.bias_row == 1200 && p.bias_head == 0 &&
              p.bias_batch == 1200 * 1000,
          "params: the bias and its strides as given");
    CHECK(p.dbias == ws + L.dbias_off && p.dbias_dt == FMHA_DTYPE_FP32 && !p.dbias_atomic && p.dbias_row == 1200 &&
              p.dbias_head == (int64_t)1000 * 1200 && p.dbias_batch == (int64_t)8 * 1000 * 1200,
          "params, deterministic sum: dq_dk_dv stores fp32 terms into its own (entry, head) slice");
    fmhai_bwd_dbias_job_make(&plan, &a, &p, &J);
    CHECK(J.out == a.dbias && J.head == 0 && J.batch == 1201 * 1000 && J.row == 1201 && J.acc == (float *)p.dbias &&
              J.nsum_b == 1 && J.nsum_h == 8 && J.grid_x == 1000 && J.grid_y == 1 && J.grid_z == 2 && J.cols == 1200,
          "dbias pass, deterministic: one block per (row, entry) sums the 8 heads' slices in order");
    CHECK(!J.acc16 && J.vec, "dbias pass, deterministic fp32 bias: fp32 terms, 16-byte loads");
    a.bias_dtype = t.dtype;   /* a bias in the inputs' dtype: 16-bit slices */
    fmhai_bwd_make_params(&plan, &a, &L, &p);
    fmhai_bwd_dbias_job_make(&plan, &a, &p, &J);
    CHECK(p.dbias == ws + L.dbias_off && p.dbias_dt == (int)t.dtype && !p.dbias_atomic && p.dbias_row == 1200 &&
              J.acc == p.dbias && J.acc16 && J.vec && J.dt == (int)t.dtype && J.nsum_h == 8,
          "deterministic sum of a bias in the inputs' dtype: 16-bit terms in the slices, the pass reads them as such");
    a.seqlen_k = 1204; t.seqlen_k = 1204;   /* rows of 1204 terms: no 8-term loads */
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, 0, &L);
    fmhai_bwd_make_params(&plan, &a, &L, &p);
    fmhai_bwd_dbias_job_make(&plan, &a, &p, &J);
    CHECK(st == FMHA_OK && J.acc16 && p.dbias_row == 1204 && !J.vec,
          "16-bit slices of rows not 8-aligned: the pass reads term by term");
    a.seqlen_k = 1200; t.seqlen_k = 1200;
    a.bias_dtype = FMHA_DTYPE_FP32;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, 0, &L);
    fmhai_bwd_make_params(&plan, &a, &L, &p);
    /* non-deterministic: atomics into [b][1] */
    t.is_deterministic = 0; a.is_deterministic = 0;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, 0, &L);
    a.workspace_size = plan.workspace_size;
    fmhai_bwd_make_params(&plan, &a, &L, &p);
    fmhai_bwd_dbias_job_make(&plan, &a, &p, &J);
    CHECK(st == FMHA_OK && p.dbias_atomic && p.dbias_head == 0 && p.dbias_batch == (int64_t)1000 * 1200 &&
              J.nsum_h == 1 && J.acc_head == 0,
          "params, atomic sum: every head adds into its entry's fp32 sum, the pass converts it");
    /* full-shape dbias: plain stores; the pass only where keys are hidden */
    t.dbias_bcast = 0;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, 0, &L);
    a.workspace_size = plan.workspace_size;
    fmhai_bwd_make_params(&plan, &a, &L, &p);
    fmhai_bwd_dbias_job_make(&plan, &a, &p, &J);
    CHECK(st == FMHA_OK && p.dbias == a.dbias && p.dbias_dt == FMHA_DTYPE_FP32 && !p.dbias_atomic &&
              p.dbias_row == 1201 && p.dbias_head == 77 && J.grid_x == 0,
          "full-shape dbias, no mask: dq_dk_dv stores every element, no pass");
    t.mask_type = a.mask_type = FMHA_MASK_TOP_LEFT; t.window_right = a.window_right = 0;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_dbias_job_make(&plan, &a, &p, &J);
    CHECK(st == FMHA_OK && J.acc == NULL && J.grid_x == 1000 && J.grid_y == 8 && J.grid_z == 2,
          "full-shape dbias, causal: the pass zeroes the hidden elements");
    t.mask_type = a.mask_type = FMHA_MASK_NONE; t.window_right = a.window_right = -1;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);

    /* argument checks */
    a.dbias = NULL;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "has_dbias"),
          "dbias NULL on a plan made with has_dbias: invalid argument");
    a.dbias = (void *)0x700000;
    a.bias_dtype = FMHA_DTYPE_FP8;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "bias dtype fp8: invalid argument");
    a.bias_dtype = FMHA_DTYPE_BF16;
    a.dbias = (void *)0x700001;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "aligned"),
          "dbias not aligned to its element: invalid argument");
    a.dbias = (void *)0x700000;
    a.stride_dbias = -1;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "negative dbias stride: invalid argument");
    a.stride_dbias = 1201;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_LAUNCH, "bf16 bias and dbias pass validation");

    /* traits checks */
    t.has_bias = 0;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_INVALID_ARG, "has_dbias without has_bias: invalid");
    t.has_bias = 1; t.has_alibi = 1;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_UNSUPPORTED, "bias with ALiBi: unsupported");
    t.has_alibi = 0; t.has_logits_soft_cap = 1;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_UNSUPPORTED, "dbias with a soft cap: unsupported");
    t.has_logits_soft_cap = 0; t.dbias_bcast = 4;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_INVALID_ARG, "dbias_bcast bit 4: invalid");
    t.has_dbias = 0; t.dbias_bcast = 0;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    CHECK(st == FMHA_OK, "bias without dbias: a plan");
    a.dbias = NULL;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_LAUNCH, "bias without dbias passes validation");
    a.bias = NULL;
    CHECK(fmha_bwd(&plan, &a, NULL) == FMHA_ERR_INVALID_ARG, "bias NULL on a plan made with has_bias: invalid");

    /* group mode: rows packed, no batch dim */
    t = group_traits(4, 8, 2, 1317, 2000, 1000, 900, 64, 1);
    t.has_bias = t.has_dbias = 1; t.dbias_bcast = FMHA_BIAS_BCAST_BATCH;
    CHECK(fmha_bwd_plan_make(&bwd_set, &t, &plan) == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "group"),
          "group mode with dbias summed over the batch: invalid (the bias has no batch dim)");
    t.dbias_bcast = FMHA_BIAS_BCAST_HEAD;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, plan.dq_direct, &L);
    CHECK(st == FMHA_OK && layout_sane(&L) && L.dbias_bytes == (size_t)4 * 8 * 1317 * 900,
          "group mode, deterministic, summed over heads: [h][total_q][max_seqlen_k] fp32 slices");
    /* one key tile: dQ direct, the dbias sum is the whole workspace, nothing to prepare */
    t = batch_traits(FMHA_DTYPE_FP16, 3, 4, 1, 500, 100, 64, 0);
    t.has_bias = t.has_dbias = 1; t.dbias_bcast = FMHA_BIAS_BCAST_BATCH;
    st = fmha_bwd_plan_make(&bwd_set, &t, &plan);
    fmhai_bwd_layout_make(&t, plan.nsplits, plan.dq_direct, &L);
    CHECK(st == FMHA_OK && plan.dq_direct && L.dbias_off == 0 && L.dbias_bytes == (size_t)4 * 4 * 500 * 100 &&
              plan.workspace_size == al(L.dbias_bytes) && plan.staging_size == 0 &&
              fmha_bwd_prepare_workspace(&plan, ws, plan.workspace_size, NULL, NULL, NULL) == FMHA_OK,
          "dQ direct with a summed dbias: the sum is the workspace, prepare has nothing to do");
}

int main(void)
{
    test_default_set();
    test_det_rows();
    test_plan_batch();
    test_plan_group();
    test_pack();
    test_job();
    test_selection();
    test_validation();
    test_bias();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
