/*
 * Host unit tests of the dispatch layer, in plain C (no device compiler).
 *
 * Built with a C compiler the library is in host-only mode: kernel sets hold
 * their table rows but no kernels, and selection runs against the device
 * described by fmhai_test_device. Covers wildcard expansion, explicit rows,
 * the constraint list, validation errors, selection scoring and its
 * independence from row order, the "closest kernel" message, JSON export,
 * the batch prefill page classes of the default set, the FP8 (e4m3)
 * forward's rows, selection and validation, and the backward's dq_dk_dv
 * choice for dropout (the portable pipeline in place of the wgmma one),
 * and the Hopper forward's launch order (every block once; under a causal
 * mask longest first within L2-sized groups).
 * Last line: "N passed, M failed".
 */
#include <stdio.h>
#include <string.h>
#include "fmha_tile.h"
#include "host_check.h"

/* Wildcard rows, a partially given wildcard row, and an explicit row. */
#define SET_A(X)                                                                          \
    X(FWD, BF16, 128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, BF16, 256, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, FP16, 64,  MASK,   SOFTCAP,   ALIBI,   128,      FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, BF16, 64,  MASK,   NOSOFTCAP, NOALIBI, 64,       32,       4,        2)
DECL_FMHA_KERNEL_SET(set_a, SET_A)

/* The same rows in reverse order: selection must not change. */
#define SET_A_REV(X)                                                                      \
    X(FWD, BF16, 64,  MASK,   NOSOFTCAP, NOALIBI, 64,       32,       4,        2)         \
    X(FWD, FP16, 64,  MASK,   SOFTCAP,   ALIBI,   128,      FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, BF16, 256, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, BF16, 128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(set_a_rev, SET_A_REV)

DECL_FMHA_KERNEL_SET(set_default, FMHA_DEFAULT_FWD_SET)
DECL_FMHA_KERNEL_SET(set_prefill, FMHA_DEFAULT_PREFILL_SET)
DECL_FMHA_KERNEL_SET(set_fp8, FMHA_DEFAULT_FWD_FP8_SET)
/* the shared library's forward rows: 16-bit and e4m3 side by side */
#define SET_FWD_ALL(X) FMHA_DEFAULT_FWD_SET(X) FMHA_DEFAULT_FWD_FP8_SET(X)
DECL_FMHA_KERNEL_SET(set_fwd_all, SET_FWD_ALL)

/* The default backward set (dropout's dq_dk_dv dispatch). */
DECL_FMHA_KERNEL_SET(set_bwd, FMHA_DEFAULT_BWD_SET)

/* One explicit portable prefill row (page 16, serves 16..2048). */
#define SET_PREFILL_PORTABLE(X) X(PREFILL, BF16, 128, MASK, NOSOFTCAP, 16, 128, 64, 4, 1)
DECL_FMHA_KERNEL_SET(set_prefill_portable, SET_PREFILL_PORTABLE)

/* A wildcard row whose explicit column matches no tuned row would not build:
 *   X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 48, FMHA_ANY, FMHA_ANY, FMHA_ANY)
 * and neither would an explicit row that breaks a constraint:
 *   X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 100, 64, 4, 1)
 * (tests/host/compile_fail.sh checks both). */

static fmha_fwd_args good_args(void)
{
    fmha_fwd_args a;
    memset(&a, 0, sizeof(a));
    a.dtype = FMHA_DTYPE_BF16;
    a.batch = 2; a.nhead_q = 8; a.nhead_k = 2;
    a.seqlen_q = 1000; a.seqlen_k = 1000; a.hdim_q = 128; a.hdim_v = 128;
    a.q = (const void *)0x10000; a.k = (const void *)0x20000;
    a.v = (const void *)0x30000; a.o = (void *)0x40000;
    a.stride_q = a.stride_k = a.stride_v = a.stride_o = 8 * 128;
    a.nhead_stride_q = a.nhead_stride_k = a.nhead_stride_v = a.nhead_stride_o = 128;
    a.batch_stride_q = a.batch_stride_k = a.batch_stride_v = a.batch_stride_o = 1000 * 8 * 128;
    a.scale = 0.088f;
    a.mask_type = FMHA_MASK_NONE; a.window_left = -1; a.window_right = -1;
    return a;
}

static const char *chosen(const fmha_kernel_set *s, const fmha_fwd_args *a)
{
    fmha_fwd_plan plan;
    if (fmha_fwd_check(s, a, &plan) != FMHA_OK) return "";
    return plan.kernel->name;
}

static void test_expansion(void)
{
    int i, n = fmha_set_size(&set_a), found_explicit = 0, all_valid = 1, filtered_ok = 1;
    /* wildcard rows: a Hopper (wgmma) and a portable row each; the
     * explicit row: one */
    CHECK(n == 9, "wildcard rows expand to one tuned row per arch table (9 enabled kernels)");
    for (i = 0; i < n; ++i) {
        const fmha_kernel_info *k = fmha_set_kernel(&set_a, i);
        if ((k->arch == FMHA_ARCH_SM90A ? fmhai_fwd90_row_violation : fmhai_fwd_row_violation)(
                k->hdim, k->tile_m, k->tile_n, k->warps, k->stages, k->page_size, k->kv_layout,
                k->dtype == FMHA_DTYPE_FP8))
            all_valid = 0;
        if (k->hdim == 64 && k->dtype == FMHA_DTYPE_BF16 && k->tile_m == 64 && k->tile_n == 32 &&
            k->warps == 4 && k->stages == 2)
            found_explicit = 1;
        if (k->dtype == FMHA_DTYPE_FP16 && k->tile_m != 128) filtered_ok = 0;
    }
    CHECK(all_valid, "every expanded row meets the constraints");
    CHECK(found_explicit, "explicit row is built as written");
    CHECK(filtered_ok, "partial wildcard keeps only tuned rows with the given tile_m");
    CHECK(fmha_set_size(&set_default) == 96 + 8 + 8 + 4 + 16,
          "default set: 2 dtypes x 3 hdims x 8 feature rows x 2 arch rows, + BIAS (hdim 64/128) x 2 dtypes x 2 arch "
          "rows, + 192_128 (MASK, NOMASK) x 2 dtypes x 2 arch rows, + DROPOUT (hdim 64, MASK, NOMASK) x 2 dtypes, "
          "wgmma only, + hdim 32 and 96 (MASK, NOMASK) x 2 dtypes x 2 arch rows");
    CHECK(fmha_set_kernel(&set_a, n) == NULL && fmha_set_kernel(&set_a, -1) == NULL,
          "fmha_set_kernel out of range gives NULL");
    {
        const fmha_kernel_info *k = fmha_set_kernel(&set_a, 0), *k1 = fmha_set_kernel(&set_a, 1);
        CHECK(strstr(k->name, "fmha_fwd_d128_bf16_mask") == k->name && strstr(k->name, "_b128x128_w12_s3_wgmma_sm90a") &&
                  strstr(k1->name, "fmha_fwd_d128_bf16_mask") == k1->name && strstr(k1->name, "_portable_mma_sm80"),
              "kernel names are self-describing (pipeline and arch included)");
    }
}

static void test_constraints(void)
{
    const char *v;
    CHECK(fmhai_fwd_row_violation(128, 128, 64, 4, 1, 0, 0, 0) == NULL, "tuned hd128 row is valid");
    v = fmhai_fwd_row_violation(192, 64, 64, 4, 1, 0, 0, 0);
    CHECK(v && strstr(v, "threads_cover_row_chunks"),
          "hd192 with 4 warps rejected (128 threads do not split a 24-chunk row: rows would be skipped)");
    CHECK(fmhai_fwd_row_violation(192, 48, 64, 3, 1, 0, 0, 0) == NULL, "hd192 with 3 warps is valid");
    v = fmhai_fwd_row_violation(80, 128, 64, 4, 1, 0, 0, 0);
    CHECK(v && strstr(v, "hdim_32_64_96_128_192_256"), "hdim 80 kernel rejected by name");
    v = fmhai_fwd_row_violation(96, 128, 64, 4, 1, 0, 0, 0);
    CHECK(v && strstr(v, "threads_cover_row_chunks"),
          "hd96 with 4 warps rejected (128 threads do not split a 12-chunk row)");
    CHECK(fmhai_fwd_row_violation(96, 96, 64, 6, 2, 0, 0, 0) == NULL &&
              fmhai_fwd_row_violation(32, 128, 64, 4, 2, 0, 0, 0) == NULL,
          "tuned hd96 (6 warps) and hd32 rows are valid");
    v = fmhai_fwd_row_violation(96, 96, 64, 6, 2, 16, 0, 0);
    CHECK(v && strstr(v, "hdim_32_96_contiguous_16bit"), "hd96 paged row rejected (contiguous 16-bit only)");
    v = fmhai_fwd_row_violation(32, 128, 64, 4, 2, 0, 0, 1);
    CHECK(v && strstr(v, "hdim_32_96_contiguous_16bit"), "hd32 fp8 KV row rejected");
    CHECK(FMHAI_ROWB(32) == 128 && FMHAI_ROWB(64) == 128 && FMHAI_ROWB(96) == 256 && FMHAI_ROWB(192) == 384,
          "shared tile rows take whole 128-byte lines (32 and 96 pad to 64 and 128 columns)");
    CHECK(FMHAI_FWD_SMEM_BYTES(96, 96, 96, 64, 2) == FMHAI_FWD_SMEM_BYTES(128, 128, 96, 64, 2) &&
              FMHAI_BWD_SMEM_BYTES(32, 128, 128, 2) == FMHAI_BWD_SMEM_BYTES(64, 128, 128, 2),
          "hd96 / hd32 tiles take the shared memory of hd128 / hd64");
    v = fmhai_bwd_row_violation(0, 96, 64, 128, 8, 2);
    CHECK(v && strstr(v, "bwd_threads_cover_row_chunks"), "bwd hd96 with 8 warps rejected (12-chunk rows)");
    CHECK(fmhai_bwd_row_violation(0, 96, 64, 96, 6, 2) == NULL && fmhai_bwd_row_violation(0, 32, 128, 128, 8, 2) == NULL &&
              fmhai_bwd_row_violation(1, 96, 64, 0, 4, 1) == NULL && fmhai_bwd_row_violation(1, 32, 64, 0, 4, 1) == NULL,
          "tuned bwd hd96 / hd32 rows and their streaming stages are valid");
    v = fmhai_bwd_row_violation(0, 80, 64, 128, 8, 2);
    CHECK(v && strstr(v, "bwd_hdim_32_64_96_128_192_256"), "bwd hdim 80 rejected by name");
    v = fmhai_fwd_row_violation(128, 100, 64, 4, 1, 0, 0, 0);
    CHECK(v && strstr(v, "tile_m_16_or_32_rows_per_warp"), "tile_m 100 rejected by name");
    v = fmhai_fwd_row_violation(128, 128, 40, 4, 1, 0, 0, 0);
    CHECK(v && strstr(v, "tile_n_multiple_of_16"), "tile_n 40 rejected by name");
    v = fmhai_fwd_row_violation(128, 128, 64, 4, 4, 0, 0, 0);
    CHECK(v && strstr(v, "stages_1_to_3"), "stages 4 rejected by name");
    v = fmhai_fwd_row_violation(256, 128, 128, 4, 3, 0, 0, 0);
    CHECK(v && (strstr(v, "registers") || strstr(v, "shared_memory")), "oversized tile rejected");
}

static void test_validation(void)
{
    fmha_fwd_args a;
    fmha_status st;
    a = good_args();
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_OK, "good args are supported");

    a = good_args(); a.q = NULL;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "NULL"), "null q rejected");
    a = good_args(); a.hdim_q = a.hdim_v = 264;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_UNSUPPORTED, "hdim 264 unsupported");
    a = good_args(); a.hdim_q = a.hdim_v = 60;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_UNSUPPORTED, "hdim 60 (not a multiple of 8) unsupported");
    a = good_args(); a.hdim_v = 136;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "hdim_v 136"),
          "hdim_v > hdim_q unsupported");
    a = good_args(); a.hdim_v = 60;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_UNSUPPORTED, "hdim_v 60 (not a multiple of 8) unsupported");
    a = good_args(); a.hdim_v = 0;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "hdim_v 0 rejected");
    a = good_args(); a.nhead_k = 3;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "multiple"), "nhead_q % nhead_k rejected");
    a = good_args(); a.batch = -1;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "negative batch rejected");
    a = good_args(); a.seqlen_k = -5;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "negative seqlen rejected");
    a = good_args(); a.dtype = FMHA_DTYPE_FP8;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "for fp8 hdim 128") &&
              strstr(fmha_last_error(), "differs in dtype"),
          "fp8 forward on a set without fp8 rows: no kernel, the message says dtype");
    a = good_args(); a.dtype = (fmha_dtype)3;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_UNSUPPORTED, "unknown dtype unsupported");
    a = good_args(); a.scale = 0.f;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "zero scale rejected");
    a = good_args(); a.logits_soft_cap = -1.f;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "negative soft cap rejected");
    a = good_args(); a.mask_type = (fmha_mask_type)7;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "unknown mask type rejected");
    a = good_args(); a.mask_type = FMHA_MASK_TOP_LEFT; a.window_left = -3;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "window < -1 rejected");
    a = good_args(); a.stride_k = 8 * 128 + 4;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "stride"), "stride not a multiple of 8 unsupported");
    a = good_args(); a.sinks = (const float *)0x50002;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "sinks"), "sinks not 4-byte aligned rejected");
    a = good_args(); a.sinks = (const float *)0x50000;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_OK, "aligned sinks accepted");
    a = good_args(); a.dropout_p = 1.0f;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "dropout"), "dropout_p 1 rejected");
    a = good_args(); a.dropout_p = -0.1f;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "negative dropout_p rejected");
    a = good_args(); a.dropout_p = 0.25f;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_OK, "dropout_p 0.25 accepted");
    a = good_args(); a.dropout_p = 0.25f; a.dropout_rng = (const uint64_t *)0x60004;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "dropout_rng") &&
              strstr(fmha_last_error(), "8-byte"),
          "dropout_rng not 8-byte aligned rejected, naming it");
    a = good_args(); a.dropout_p = 0.25f; a.dropout_rng = (const uint64_t *)0x60008;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_OK, "aligned dropout_rng accepted");
    a = good_args(); a.v = (const void *)0x30008;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_UNSUPPORTED, "misaligned pointer unsupported");
    a = good_args(); a.is_group_mode = 1; a.max_seqlen_q = 100;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_INVALID_ARG, "group mode without seqstart rejected");
    a = good_args(); a.nhead_q = 70000; a.nhead_k = 70000;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_ERR_UNSUPPORTED, "too many heads for the grid unsupported");
    a = good_args();
    CHECK(fmha_fwd_check(NULL, &a, NULL) == FMHA_ERR_INVALID_ARG, "null set rejected");
    CHECK(fmha_fwd_check(&set_a, NULL, NULL) == FMHA_ERR_INVALID_ARG, "null args rejected");
    a = good_args(); a.batch = 0;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_OK, "batch 0 is valid (nothing to do)");
    CHECK(strcmp(fmha_status_str(FMHA_ERR_NO_KERNEL), "no kernel") == 0, "status strings");
}

static void test_selection(void)
{
    fmha_fwd_args a = good_args();
    fmha_fwd_plan plan;
    fmha_status st;
    /* unmasked problem: the NOMASK kernel wins over the MASK one */
    CHECK(strstr(chosen(&set_a, &a), "_nmask_") != NULL, "unmasked problem picks the NOMASK kernel");
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;
    CHECK(strstr(chosen(&set_a, &a), "_d128_bf16_mask_") != NULL, "causal problem picks a MASK kernel");
    /* (-1, -1) window with a mask type sees everything: lean kernel */
    a.window_right = -1;
    CHECK(strstr(chosen(&set_a, &a), "_nmask_") != NULL, "(-1,-1) window counts as no mask");
    /* padding: hdim 72 runs on the 128 kernel, 136 on the 256 kernel */
    a = good_args(); a.hdim_q = a.hdim_v = 72;
    CHECK(strstr(chosen(&set_a, &a), "_d128_") != NULL, "hdim 72 runs on the smallest kernel >= 72 (set has no bf16 d64 nomask)");
    a.mask_type = FMHA_MASK_TOP_LEFT; a.window_right = 0;
    CHECK(strstr(chosen(&set_a, &a), "_d128_") != NULL, "masked hdim 72 also on d128");
    a = good_args(); a.hdim_q = a.hdim_v = 40; a.mask_type = FMHA_MASK_TOP_LEFT; a.window_right = 0;
    CHECK(strstr(chosen(&set_a, &a), "_d64_bf16_") != NULL, "hdim 40 masked picks the d64 kernel");
    a = good_args(); a.hdim_q = a.hdim_v = 136; a.mask_type = FMHA_MASK_TOP_LEFT; a.window_right = 0;
    CHECK(strstr(chosen(&set_a, &a), "_d256_") != NULL, "hdim 136 picks the d256 kernel");
    /* row order does not matter */
    {
        int same = 1, dt, hd, m;
        for (dt = 0; dt < 2; ++dt)
            for (hd = 8; hd <= 256; hd += 8)
                for (m = 0; m < 3; ++m) {
                    fmha_fwd_args b = good_args();
                    fmha_fwd_plan p1, p2;
                    fmha_status s1, s2;
                    b.dtype = dt ? FMHA_DTYPE_BF16 : FMHA_DTYPE_FP16;
                    b.hdim_q = b.hdim_v = hd;
                    b.mask_type = (fmha_mask_type)m; b.window_right = m ? 0 : -1;
                    s1 = fmha_fwd_check(&set_a, &b, &p1);
                    s2 = fmha_fwd_check(&set_a_rev, &b, &p2);
                    if (s1 != s2 || (s1 == FMHA_OK && strcmp(p1.kernel->name, p2.kernel->name) != 0)) same = 0;
                }
        CHECK(same, "selection does not depend on row order");
    }
    /* no kernel: message names the closest kernel and the differing field */
    a = good_args(); a.dtype = FMHA_DTYPE_FP16;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "closest: fmha_fwd_d128_bf16") &&
          strstr(fmha_last_error(), "differs in dtype"), "no kernel names closest kernel and field");
    a = good_args(); a.logits_soft_cap = 30.f;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "softcap"), "soft cap problem needs a SOFTCAP kernel");
    /* soft cap + alibi fp16 d64 row exists */
    a = good_args(); a.dtype = FMHA_DTYPE_FP16; a.hdim_q = a.hdim_v = 64; a.logits_soft_cap = 30.f;
    a.alibi_slopes = (const float *)0x50000; a.mask_type = FMHA_MASK_TOP_LEFT; a.window_right = 0;
    CHECK(strstr(chosen(&set_a, &a), "_d64_fp16_mask_softcap_alibi_") != NULL, "soft cap + ALiBi kernel selected");
    /* plan reports grid and zero workspace */
    a = good_args();
    st = fmha_fwd_check(&set_a, &a, &plan);
    CHECK(st == FMHA_OK && plan.workspace_size == 0 && plan.grid_y == 8 && plan.grid_z == 2 &&
          plan.grid_x == (1000 + plan.kernel->tile_m - 1) / plan.kernel->tile_m && plan.block == plan.kernel->warps * 32,
          "plan: grid, block and workspace");
    /* arch filter: an sm_75 device or an AMD device has no kernel here */
    fmhai_test_device.cc = 75;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "arch") && strstr(fmha_last_error(), "sm_75"),
          "sm_75 device: no kernel, field arch");
    fmhai_test_device.cc = 80; fmhai_test_device.smem_optin = 163 * 1024;
    CHECK(fmha_fwd_check(&set_a, &a, NULL) == FMHA_OK, "sm_80 device runs the portable kernels");
    fmhai_test_device.smem_optin = 40 * 1024;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "shared memory"), "too little shared memory: no kernel");
    fmhai_test_device.is_amd = 1; fmhai_test_device.cc = 0x942; fmhai_test_device.smem_optin = 64 * 1024;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "gfx942"), "NVIDIA kernels never run on gfx942");
    fmhai_test_device.is_amd = 0; fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
}

/* Batch prefill over the default set. On sm_90 the fast wgmma pipeline
 * serves every 16-bit problem with one kernel per variant (page column 1,
 * every page size, both layouts); on sm_80 and for fp8 KV (the fallback rule)
 * the portable page classes apply: 1 below 16, 16 below the 64-key tile, 64
 * from there. Every plan says why it picked its pipeline. Plans only (host
 * mode: nothing runs). */
static fmha_batch_prefill_args prefill_args(int page, int vec)
{
    fmha_batch_prefill_args a;
    memset(&a, 0, sizeof(a));
    a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16;
    a.batch = 2; a.nhead_q = 8; a.nhead_k = 2; a.max_seqlen_q = 300;
    a.hdim_q = a.hdim_v = 128;
    a.q = (const void *)0x10000; a.o = (void *)0x40000; a.seqstart_q = (const int32_t *)0x60000;
    a.stride_q = a.stride_o = 8 * 128; a.nhead_stride_q = a.nhead_stride_o = 128;
    a.k_pool = (const void *)0x20000; a.v_pool = (const void *)0x30000;
    a.num_total_pages = 4096; a.page_size = page;
    a.kv_layout = vec ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
    a.page_stride_k = a.page_stride_v = (int64_t)page * 2 * 128;
    a.token_stride_k = a.token_stride_v = vec ? 0 : 2 * 128;
    a.nhead_stride_k = a.nhead_stride_v = vec ? (int64_t)page * 128 : 128;
    a.page_table = FMHA_PAGE_TABLE_SGLANG_1D;
    a.kv_indptr = (const int32_t *)0x70000; a.kv_page_indices = (const int32_t *)0x80000;
    a.kv_last_page_lens = (const int32_t *)0x90000;
    a.kv_scale = FMHA_KV_SCALE_NONE;
    a.scale = 0.088f;
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;
    return a;
}

static int starts_with(const char *s, const char *p) { return s && strncmp(s, p, strlen(p)) == 0; }

static void test_prefill_classes(void)
{
    static const int pages[11] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 2048 };
    int i, lay, cc, ok = 1, ok8 = 1, okq8 = 1;
    char why[240] = "";
    for (cc = 80; cc <= 90; cc += 10) {
        fmhai_test_device.cc = cc;
        for (lay = 0; lay < 2; ++lay)
            for (i = 0; i < 11; ++i) {
                const int P = pages[i], fast = cc == 90;
                const int want = fast ? 1 : P >= 64 ? 64 : P >= 16 ? 16 : 1;
                fmha_batch_prefill_args a;
                fmha_fwd_plan plan;
                fmha_status st;
                if (lay && P < 8) continue;   /* VECTORIZED pages hold whole 8-token groups */
                a = prefill_args(P, lay);
                st = fmha_batch_prefill_check(&set_prefill, &a, &plan);
                if (st != FMHA_OK || plan.kernel->page_size != want ||
                    plan.kernel->arch != (fast ? FMHA_ARCH_SM90A : FMHA_ARCH_SM80) ||
                    plan.kernel->kv_layout != (lay ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR) ||
                    !starts_with(plan.why, fast ? "fast pipeline (wgmma)" : "portable pipeline: the device is not sm_90")) {
                    if (ok) snprintf(why, sizeof(why), "sm_%d %s page %d: %s %s (%s)", cc, lay ? "vectorized" : "linear",
                                     P, fmha_status_str(st), st == FMHA_OK ? plan.kernel->name : fmha_last_error(),
                                     st == FMHA_OK ? plan.why : "");
                    ok = 0;
                }
                if (!lay) {   /* fp8 KV, bf16 queries: on sm_90 the wgmma e4m3 kernel (page 1), which widens
                               * the pages to f16, without descales or per tensor; the portable classes
                               * with per-page descales and on sm_80 */
                    static float ds[4];
                    const int want8 = P >= 64 ? 64 : P >= 16 ? 16 : 1;
                    int sc;
                    a.kv_dtype = FMHA_DTYPE_FP8;
                    a.page_stride_k = a.page_stride_v = (int64_t)P * 2 * 128;
                    for (sc = 0; sc < 3; ++sc) {
                        const int fast8 = fast && sc < 2;
                        a.kv_scale = (fmha_kv_scale)sc;
                        a.k_descale = a.v_descale = sc == 1 ? ds : 0;
                        a.k_page_descale = a.v_page_descale = sc == 2 ? ds : 0;
                        a.descale_page_stride = sc == 2 ? 2 : 0;
                        a.descale_nhead_stride = sc == 2 ? 1 : 0;
                        st = fmha_batch_prefill_check(&set_prefill, &a, &plan);
                        if (st != FMHA_OK || plan.kernel->page_size != (fast8 ? 1 : want8) ||
                            plan.kernel->dtype != FMHA_DTYPE_FP8 ||
                            plan.kernel->arch != (fast8 ? FMHA_ARCH_SM90A : FMHA_ARCH_SM80) ||
                            !starts_with(plan.why, fast8 ? "fast pipeline (wgmma)"
                                                   : fast ? "portable pipeline: fp8 KV with bf16 queries and per-page"
                                                          : "portable pipeline: the device"))
                            ok8 = 0;
                    }
                    a.kv_scale = FMHA_KV_SCALE_NONE;
                    a.k_page_descale = a.v_page_descale = 0;
                    a.descale_page_stride = a.descale_nhead_stride = 0;
                    /* e4m3 queries: the wgmma e4m3 kernel (page 1) on sm_90; d 64 the
                     * portable 64 kernel (least padding) */
                    a.q_dtype = FMHA_DTYPE_FP8;
                    st = fmha_batch_prefill_check(&set_prefill, &a, &plan);
                    if (st != FMHA_OK || plan.kernel->page_size != (fast ? 1 : want8) ||
                        plan.kernel->dtype != FMHA_DTYPE_FP8 || plan.kernel->hdim != 128 ||
                        plan.kernel->arch != (fast ? FMHA_ARCH_SM90A : FMHA_ARCH_SM80) ||
                        (fast && plan.kernel->tile_n != 128) ||   /* page classes: power-of-two tiles */
                        !starts_with(plan.why, fast ? "fast pipeline (wgmma)" : "portable pipeline: the device"))
                        okq8 = 0;
                    a.hdim_q = a.hdim_v = 64;
                    st = fmha_batch_prefill_check(&set_prefill, &a, &plan);
                    if (st != FMHA_OK || plan.kernel->hdim != 64 || plan.kernel->arch != FMHA_ARCH_SM80)
                        okq8 = 0;
                }
            }
    }
    fmhai_test_device.cc = 90;
    if (!ok) printf("  %s\n", why);
    CHECK(ok, "prefill default set: sm_90 runs every page size on the wgmma kernel, sm_80 page classes 1 / 16 / 64, "
              "LINEAR and VECTORIZED, each plan says why");
    CHECK(ok8, "prefill default set: fp8 KV with bf16 queries runs the wgmma e4m3 kernel on sm_90 without "
               "descales or per tensor, and falls back to the portable page classes with per-page descales (the "
               "fallback rule says so)");
    CHECK(okq8, "prefill default set: fp8 KV with e4m3 queries runs the wgmma e4m3 kernel on sm_90 (d 128), the "
                "portable classes elsewhere and for d 64");
    {
        fmha_batch_prefill_args a = prefill_args(16, 1);
        a.kv_dtype = FMHA_DTYPE_FP8;
        CHECK(fmha_batch_prefill_check(&set_prefill, &a, NULL) == FMHA_ERR_UNSUPPORTED,
              "prefill: VECTORIZED fp8 KV is unsupported");
    }
    {   /* a set whose only row is portable: sm_90 falls back and says the set has no Hopper row */
        fmha_batch_prefill_args a = prefill_args(64, 0);
        fmha_fwd_plan plan;
        fmha_status st = fmha_batch_prefill_check(&set_prefill_portable, &a, &plan);
        CHECK(st == FMHA_OK && plan.kernel->arch == FMHA_ARCH_SM80 &&
                  starts_with(plan.why, "portable pipeline: the kernel set has no sm_90a row"),
              "prefill: a set without wgmma rows falls back to the portable row, and the plan says so");
    }
    {   /* the forward: Hopper rows first on sm_90 */
        fmha_fwd_plan plan;
        fmha_fwd_args a = good_args();
        fmha_status st = fmha_fwd_check(&set_default, &a, &plan);
        CHECK(st == FMHA_OK && plan.kernel->arch == FMHA_ARCH_SM90A && starts_with(plan.why, "fast pipeline"),
              "fwd default set on sm_90: the wgmma kernel, and the plan says why");
    }
    {   /* dropout: d 64 on the wgmma DROPOUT row, d 128 on the plain
         * hdim-128 kernel, d 64 without dropout never on a DROPOUT row, and
         * the portable set (no DROPOUT rows) on the portable pipeline */
        fmha_fwd_plan plan;
        fmha_fwd_args a = good_args();
        fmha_status st;
        int d, ok = 1;
        for (d = 32; d <= 128; d += 32) {
            a = good_args();
            a.hdim_q = a.hdim_v = d;
            a.dropout_p = 0.1f;
            st = fmha_fwd_check(&set_default, &a, &plan);
            if (d <= 32) {   /* the portable 32 kernel (head-dim rule), dropout at run time */
                if (st != FMHA_OK || plan.kernel->arch != FMHA_ARCH_SM80 || plan.kernel->hdim != 32) ok = 0;
            } else if (st != FMHA_OK || plan.kernel->arch != FMHA_ARCH_SM90A ||
                       plan.kernel->has_dropout != (d <= 64) || plan.kernel->hdim != (d <= 64 ? 64 : 128))
                ok = 0;
            a.dropout_p = 0.f;
            st = fmha_fwd_check(&set_default, &a, &plan);
            if (st != FMHA_OK || plan.kernel->has_dropout) ok = 0;
        }
        CHECK(ok, "fwd dropout on sm_90: d 32 on the portable 32 kernel, 33..64 on the wgmma DROPOUT row, 65..128 on "
                  "the hdim-128 kernel; "
                  "without dropout never a DROPOUT row");
        a = good_args(); a.hdim_q = a.hdim_v = 64; a.dropout_p = 0.1f;
        st = fmha_fwd_check(&set_a, &a, &plan);
        CHECK(st == FMHA_OK && plan.kernel->arch != FMHA_ARCH_SM90A, "fwd dropout d 64 in a set without DROPOUT rows: the portable hdim-64 row (less padding)");
    }
}

/* The FP8 (e4m3) forward: Hopper rows only (hdim 128 and 256), e4m3 Q/K/V
 * strides in 16-element units, descales only with dtype FP8. Plans only. */
static fmha_fwd_args fp8_args(int d)
{
    fmha_fwd_args a = good_args();
    a.dtype = FMHA_DTYPE_FP8;
    a.hdim_q = a.hdim_v = d;
    a.stride_q = a.stride_k = a.stride_v = a.stride_o = 8 * (int64_t)d;
    a.nhead_stride_q = a.nhead_stride_k = a.nhead_stride_v = a.nhead_stride_o = d;
    a.batch_stride_q = a.batch_stride_k = a.batch_stride_v = a.batch_stride_o = 1000 * 8 * (int64_t)d;
    a.q_descale = (const float *)0x50000; a.k_descale = (const float *)0x50004;
    a.v_descale = (const float *)0x50008;
    return a;
}

/* 1 when set s plans a on the sm_90a wgmma pipeline with an fp8 kernel of
 * kernel head dim want_hd, and the plan says "fast pipeline". */
static int fp8_plan_ok(const fmha_kernel_set *s, const fmha_fwd_args *a, int want_hd, char *why, size_t cap)
{
    fmha_fwd_plan plan;
    fmha_status st = fmha_fwd_check(s, a, &plan);
    if (st != FMHA_OK) {
        snprintf(why, cap, "hdim %d: %s: %s", a->hdim_q, fmha_status_str(st), fmha_last_error());
        return 0;
    }
    if (plan.kernel->dtype != FMHA_DTYPE_FP8 || plan.kernel->arch != FMHA_ARCH_SM90A ||
        strcmp(plan.kernel->pipeline, "wgmma") != 0 || !strstr(plan.kernel->name, "_fp8_") ||
        plan.kernel->hdim != want_hd || !starts_with(plan.why, "fast pipeline")) {
        snprintf(why, cap, "hdim %d: %s (want hdim %d), why: %s", a->hdim_q, plan.kernel->name, want_hd, plan.why);
        return 0;
    }
    return 1;
}

/* 1 when the JSON object [obj, end) holds text */
static int in_object(const char *obj, const char *end, const char *text)
{
    const char *t = obj && end ? strstr(obj, text) : NULL;
    return t && t < end;
}

static void test_fp8_fwd(void)
{
    static const int hds[6] = { 64, 80, 128, 144, 192, 256 };
    char why[320] = "";
    int i, n = fmha_set_size(&set_fp8), rows_ok = 1, ok = 1, ok_all = 1;
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmha_status st;
    /* the rows: one Hopper kernel per (hdim 128/256, mask, softcap, alibi) */
    for (i = 0; i < n; ++i) {
        const fmha_kernel_info *k = fmha_set_kernel(&set_fp8, i);
        if (k->family != FMHA_FAMILY_FWD || k->dtype != FMHA_DTYPE_FP8 || k->arch != FMHA_ARCH_SM90A ||
            (k->hdim != 128 && k->hdim != 256) || !strstr(k->name, "_fp8_") ||
            fmhai_fwd90_row_violation(k->hdim, k->tile_m, k->tile_n, k->warps, k->stages, k->page_size,
                                      k->kv_layout, 1))
            rows_ok = 0;
    }
    CHECK(n == 16 && rows_ok, "fp8 fwd set: 16 sm_90a wgmma rows (hdim 128 and 256 x 8 variants), names say fp8");
    CHECK(fmha_set_size(&set_fwd_all) == 132 + 16, "16-bit and fp8 forward rows in one set: 132 + 16 kernels");

    /* selection on sm_90: the smallest fp8 kernel >= d, in the fp8 set and next to the 16-bit rows */
    fmhai_test_device.cc = 90;
    for (i = 0; i < 6; ++i) {
        const int want = hds[i] <= 128 ? 128 : 256;
        a = fp8_args(hds[i]);
        if (ok && !fp8_plan_ok(&set_fp8, &a, want, why, sizeof(why))) ok = 0;
        a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_right = 0; a.logits_soft_cap = 30.f;
        a.alibi_slopes = (const float *)0x60000;
        if (ok && !fp8_plan_ok(&set_fp8, &a, want, why, sizeof(why))) ok = 0;
        if (ok && !strstr(chosen(&set_fp8, &a), "_fp8_mask_softcap_alibi_")) {
            snprintf(why, sizeof(why), "hdim %d masked softcap alibi: %s", hds[i], chosen(&set_fp8, &a));
            ok = 0;
        }
        a = fp8_args(hds[i]);
        if (ok_all && !fp8_plan_ok(&set_fwd_all, &a, want, why, sizeof(why))) ok_all = 0;
    }
    if (!ok || !ok_all) printf("  %s\n", why);
    CHECK(ok, "fp8 fwd on sm_90: an sm_90a wgmma _fp8_ kernel, hdim 64/80/128 on the 128 kernel, 144/192/256 "
              "on the 256 kernel, every variant, plan.why says fast pipeline");
    CHECK(ok_all, "fp8 fwd next to the 16-bit rows: still the fp8 wgmma kernel");
    a = fp8_args(64);
    CHECK(starts_with(chosen(&set_fp8, &a), "fmha_fwd_d128_fp8_nmask_nsoftcap_nalibi_"),
          "fp8 hdim 64 unmasked: fmha_fwd_d128_fp8_nmask_nsoftcap_nalibi_... (the leanest kernel)");
    {   /* the contiguous e4m3 forward's tiles: 192 keys in 3 stages up to hdim 128, 128 in 2 at 256 */
        int tiles_ok = 1;
        const int tds[3] = { 64, 128, 256 };
        for (int i = 0; i < 3; ++i) {
            a = fp8_args(tds[i]);
            a.mask_type = i == 1 ? FMHA_MASK_BOTTOM_RIGHT : FMHA_MASK_NONE;
            a.window_right = i == 1 ? 0 : -1;
            st = fmha_fwd_check(&set_fp8, &a, &plan);
            if (st != FMHA_OK || plan.kernel->tile_m != 128 || plan.kernel->tile_n != (tds[i] <= 128 ? 192 : 128) ||
                plan.kernel->warps != 12 || plan.kernel->stages != (tds[i] <= 128 ? 3 : 2)) {
                printf("  hdim %d: %s\n", tds[i], st == FMHA_OK ? plan.kernel->name : fmha_last_error());
                tiles_ok = 0;
            }
        }
        CHECK(tiles_ok, "fp8 fwd tiles: 128 x 192, 12 warps, 3 stages up to hdim 128 (causal too); 128 x 128, 2 stages at 256");
    }
    {   /* the e4m3 softmax each row runs (p8_qsum): the lazy max and the rounded P's sum on the
         * hdim-128 and hdim-256 rows without a soft cap only; every 16-bit row 0 */
        int qsum_ok = 1, n_qsum = 0;
        for (i = 0; i < fmha_set_size(&set_fwd_all); ++i) {
            const fmha_kernel_info *k = fmha_set_kernel(&set_fwd_all, i);
            const int want = FMHAI_FWD90_QSUM_ON && k->dtype == FMHA_DTYPE_FP8 && (k->hdim == 256 || k->hdim == 128) &&
                             !k->has_softcap;
            n_qsum += k->p8_qsum != 0;
            if ((k->p8_qsum != 0) != want) {
                printf("  %s: p8_qsum %d\n", k->name, k->p8_qsum);
                qsum_ok = 0;
            }
        }
        CHECK(qsum_ok && n_qsum == (FMHAI_FWD90_QSUM_ON ? 8 : 0),
              "p8_qsum: the 8 fp8 hdim-128 and hdim-256 rows without a soft cap, no other row");
        {
            static char js[65536];
            const char *k;
            fmha_set_json(&set_fwd_all, js, sizeof(js));
            k = strstr(js, "\"name\": \"fmha_fwd_d256_fp8_nmask_nsoftcap_");
            CHECK(k && in_object(k, strchr(k, '}'), FMHAI_FWD90_QSUM_ON ? "\"p8_qsum\": true" : "\"p8_qsum\": false"),
                  "json: the fp8 hdim-256 row's p8_qsum");
        }
    }
    a = good_args();
    st = fmha_fwd_check(&set_fwd_all, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->dtype == FMHA_DTYPE_BF16 && !strstr(plan.kernel->name, "_fp8_"),
          "bf16 fwd next to the fp8 rows: a bf16 kernel");
    a = fp8_args(128); a.q_descale = a.k_descale = a.v_descale = NULL;
    CHECK(fmha_fwd_check(&set_fp8, &a, NULL) == FMHA_OK, "fp8 descales are optional (NULL: 1)");
    a = fp8_args(128); a.stride_o = 8 * 128 + 8;   /* O is bf16: 8-element strides */
    CHECK(fmha_fwd_check(&set_fp8, &a, NULL) == FMHA_OK, "fp8 fwd: the bf16 O takes strides in 8-element units");

    /* other devices: no fp8 forward */
    fmhai_test_device.cc = 80; fmhai_test_device.smem_optin = 163 * 1024;
    a = fp8_args(128);
    st = fmha_fwd_check(&set_fp8, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "fp8") && strstr(fmha_last_error(), "sm_80"),
          "fp8 fwd on sm_80: no kernel");
    st = fmha_fwd_check(&set_fwd_all, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL, "fp8 fwd on sm_80 next to the 16-bit rows: no kernel (never a bf16 one)");
    a = good_args();
    st = fmha_fwd_check(&set_fwd_all, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->arch == FMHA_ARCH_SM80 && plan.kernel->dtype == FMHA_DTYPE_BF16,
          "bf16 fwd on sm_80 next to the fp8 rows: the portable bf16 kernel");
    fmhai_test_device.is_amd = 1; fmhai_test_device.cc = 0x942; fmhai_test_device.smem_optin = 64 * 1024;
    a = fp8_args(128);
    CHECK(fmha_fwd_check(&set_fp8, &a, NULL) == FMHA_ERR_NO_KERNEL, "fp8 fwd on gfx942: no kernel");
    fmhai_test_device.is_amd = 0; fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;

    /* bad input: the documented statuses, before any selection */
    a = fp8_args(128); a.dropout_p = 0.1f;
    st = fmha_fwd_check(&set_fp8, &a, NULL);
    CHECK(st == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "dropout") && strstr(fmha_last_error(), "fp8"),
          "fp8 with dropout unsupported, saying so");
    a = fp8_args(72);
    st = fmha_fwd_check(&set_fp8, &a, NULL);
    CHECK(st == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "16"),
          "fp8 hdim 72 (a multiple of 8, not of 16) unsupported");
    a = good_args(); a.q_descale = (const float *)0x50000;
    st = fmha_fwd_check(&set_fwd_all, &a, NULL);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "descale"), "q_descale with bf16: invalid argument");
    a = good_args(); a.dtype = FMHA_DTYPE_FP16; a.v_descale = (const float *)0x50000;
    CHECK(fmha_fwd_check(&set_fwd_all, &a, NULL) == FMHA_ERR_INVALID_ARG, "v_descale with fp16: invalid argument");
    a = fp8_args(128); a.k_descale = (const float *)0x50002;
    st = fmha_fwd_check(&set_fp8, &a, NULL);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "aligned"),
          "fp8 descale pointer not 4-byte aligned: invalid argument");
    a = fp8_args(128); a.stride_k = 8 * 128 + 8;
    st = fmha_fwd_check(&set_fp8, &a, NULL);
    CHECK(st == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "stride"),
          "fp8 K stride a multiple of 8, not of 16: unsupported");
    a = fp8_args(128); a.nhead_stride_q = 136;
    CHECK(fmha_fwd_check(&set_fp8, &a, NULL) == FMHA_ERR_UNSUPPORTED, "fp8 Q head stride not a multiple of 16: unsupported");
    a = fp8_args(128); a.q = (const void *)0x10008;
    CHECK(fmha_fwd_check(&set_fp8, &a, NULL) == FMHA_ERR_UNSUPPORTED, "fp8 Q pointer not 16-byte aligned: unsupported");

    /* JSON: the fp8 rows say dtype fp8 */
    {
        static char js[65536];
        const size_t need = fmha_set_json(&set_fwd_all, js, sizeof(js));
        const char *k = strstr(js, "\"name\": \"fmha_fwd_d128_fp8_");
        const char *end = k ? strchr(k, '}') : NULL;
        CHECK(need < sizeof(js) && in_object(k, end, "\"dtype\": \"fp8\"") &&
                  in_object(k, end, "\"family\": \"fwd\"") && in_object(k, end, "\"pipeline\": \"wgmma\"") &&
                  in_object(k, end, "\"arch\": \"sm90a\""),
              "json lists the fp8 fwd kernels with \"dtype\": \"fp8\", family fwd, wgmma, sm90a");
    }
}

/* The backward with dropout: the plan is made from traits, which carry no
 * dropout; the wgmma and portable dq_dk_dv both have it, so the plan's own
 * kernel runs with or without dropout (fmhai_bwd_run_entry keeps it and
 * gives no reason); a pipeline without dropout (any other name) is passed
 * over, saying why. */
static void test_bwd_dropout_dispatch(void)
{
    static const int hds[3] = { 64, 128, 256 };
    int i, det, var, ok_fallback = 1, ok_plain = 1, n_fallback = 0;
    fmhai_test_device.is_amd = 0; fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
    for (i = 0; i < 3; ++i)
        for (det = 0; det < 2; ++det)
            for (var = 0; var < 3; ++var) {
                fmha_bwd_traits t;
                fmha_bwd_plan plan;
                const fmha_kernel_info *pk, *k;
                const char *why = NULL;
                int e = -1;
                memset(&t, 0, sizeof(t));
                t.dtype = var == 1 ? FMHA_DTYPE_FP16 : FMHA_DTYPE_BF16;
                t.batch = 2; t.nhead_q = 8; t.nhead_k = 2; t.seqlen_q = 1000; t.seqlen_k = 1000;
                t.hdim_q = t.hdim_v = hds[i];
                t.mask_type = var ? FMHA_MASK_BOTTOM_RIGHT : FMHA_MASK_NONE;
                t.window_left = -1; t.window_right = var ? 0 : -1;
                t.has_logits_soft_cap = var == 2;
                t.is_deterministic = det;
                if (fmha_bwd_plan_make(&set_bwd, &t, &plan) != FMHA_OK) { ok_fallback = ok_plain = 0; continue; }
                pk = plan.dq_dk_dv;
                /* without dropout: the plan's kernel */
                if (fmhai_bwd_run_entry(&plan, 0, &e, &why) != FMHA_OK || e != plan.entry_[1] || why) ok_plain = 0;
                if (fmhai_bwd_run_entry(&plan, 1, &e, &why) != FMHA_OK) { ok_fallback = 0; continue; }
                k = &set_bwd.entries[e].info;
                n_fallback += pk->arch == FMHA_ARCH_SM90A;   /* here: the wgmma rows that keep dropout */
                if (why || e != plan.entry_[1] || k != pk) ok_fallback = 0;
            }
    CHECK(ok_plain, "bwd without dropout: the plan's own dq_dk_dv runs");
    CHECK(ok_fallback && n_fallback == 2 * 2 * 3,
          "bwd with dropout on sm_90: the plan's dq_dk_dv runs (wgmma for hdim 64/128, which has dropout; "
          "portable for hdim 256)");
    {   /* a pipeline without dropout is passed over, saying why */
        fmha_kernel_info k;
        memset(&k, 0, sizeof(k));
        k.arch = FMHA_ARCH_GFX9; k.pipeline = "no_dropout_pipe";
        CHECK(fmhai_bwd_pipe_why_not(&k, 1) && starts_with(fmhai_bwd_pipe_why_not(&k, 1), "portable pipeline: dropout") &&
                  !fmhai_bwd_pipe_why_not(&k, 0),
              "bwd: a dq_dk_dv pipeline other than the portable and wgmma ones is taken to have no dropout");
        k.arch = FMHA_ARCH_SM90A; k.pipeline = "wgmma";
        CHECK(!fmhai_bwd_pipe_why_not(&k, 1), "bwd: the wgmma dq_dk_dv serves dropout");
    }
    fmhai_test_device.cc = 80; fmhai_test_device.smem_optin = 163 * 1024;
    {
        fmha_bwd_traits t;
        fmha_bwd_plan plan;
        const char *why = NULL;
        int e = -1;
        memset(&t, 0, sizeof(t));
        t.dtype = FMHA_DTYPE_BF16; t.batch = 1; t.nhead_q = t.nhead_k = 4; t.seqlen_q = t.seqlen_k = 500;
        t.hdim_q = t.hdim_v = 128; t.mask_type = FMHA_MASK_NONE; t.window_left = t.window_right = -1;
        CHECK(fmha_bwd_plan_make(&set_bwd, &t, &plan) == FMHA_OK && plan.dq_dk_dv->arch == FMHA_ARCH_SM80 &&
                  fmhai_bwd_run_entry(&plan, 1, &e, &why) == FMHA_OK && e == plan.entry_[1] && !why,
              "bwd with dropout on sm_80: the plan's portable dq_dk_dv runs as planned");
    }
    fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
#if !defined(FMHA_PLATFORM_AMD)
    {   /* MLA (192, 128) and a smaller pair (160, 96): the 192_128 row, which
         * keeps dropout (portable); hdim_v is part of the backward's problem */
        static const int pq[2] = { 192, 160 }, pv[2] = { 128, 96 };
        int pi, ok = 1;
        for (pi = 0; pi < 2; ++pi) {
            fmha_bwd_traits t;
            fmha_bwd_plan plan;
            const char *why = NULL;
            int e = -1;
            memset(&t, 0, sizeof(t));
            t.dtype = FMHA_DTYPE_BF16; t.batch = 2; t.nhead_q = 16; t.nhead_k = 16;
            t.seqlen_q = t.seqlen_k = 2048; t.hdim_q = pq[pi]; t.hdim_v = pv[pi];
            t.mask_type = FMHA_MASK_BOTTOM_RIGHT; t.window_left = -1; t.window_right = 0;
            if (fmha_bwd_plan_make(&set_bwd, &t, &plan) != FMHA_OK || plan.dq_dk_dv->hdim != 192 ||
                plan.dq_dk_dv->hdim_v != 128 || strcmp(plan.dq_dk_dv->pipeline, "portable_mma") != 0 ||
                fmhai_bwd_run_entry(&plan, 1, &e, &why) != FMHA_OK || e != plan.entry_[1] || why)
                ok = 0;
        }
        CHECK(ok, "bwd (192, 128) and (160, 96) on sm_90: the 192_128 dq_dk_dv, kept with dropout");
    }
#endif
}

/* Elementwise bias (BIAS rows): validation, selection (a problem with a
 * bias only on BIAS rows, one without never on them), the fallback of
 * hdim 256 to the portable pipeline with its reason, and the pair-load
 * rule of the parameters. */
#define SET_BIAS(X)                                                                       \
    X(FWD, FP16, 128, MASK,   NOSOFTCAP, BIAS,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, FP16, 256, MASK,   NOSOFTCAP, BIAS,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, FP16, 128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(set_bias, SET_BIAS)

static void test_bias(void)
{
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmhai_fwd_params prm;
    fmha_status st;
    char js[16384];
    int i, nb = 0, rows_ok = 1;
    for (i = 0; i < fmha_set_size(&set_default); ++i) {
        const fmha_kernel_info *k = fmha_set_kernel(&set_default, i);
        if (!k->has_bias) continue;
        ++nb;
        if (k->has_alibi || k->has_softcap || !k->has_mask || k->hdim > 128 || !strstr(k->name, "_bias_"))
            rows_ok = 0;
    }
    CHECK(nb == 8 && rows_ok, "default set: 8 BIAS kernels (fp16/bf16, hdim 64/128, MASK, no soft cap; wgmma + portable), "
                              "named _bias_");
    fmhai_test_device.cc = 90;
    a = good_args(); a.bias = (const void *)0x70000; a.bias_dtype = FMHA_DTYPE_BF16;
    a.stride_bias = 1000; a.nhead_stride_bias = 1000 * 1000; a.batch_stride_bias = 0;
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->has_bias && plan.kernel->arch == FMHA_ARCH_SM90A &&
              strstr(plan.why, "fast pipeline"),
          "bf16 hdim 128 causal with a bias on sm_90: the wgmma BIAS kernel");
    a.mask_type = FMHA_MASK_NONE; a.hdim_q = a.hdim_v = 40;
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->has_bias && plan.kernel->hdim == 64 && plan.kernel->has_mask,
          "unmasked hdim 40 with a bias: the MASK BIAS kernel of hdim 64 serves it");
    a = good_args();
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_OK && !plan.kernel->has_bias && !strstr(plan.kernel->name, "_bias"),
          "a problem without a bias never runs a BIAS kernel");
    a = good_args(); a.dtype = FMHA_DTYPE_FP16; a.hdim_q = a.hdim_v = 256;
    a.bias = (const void *)0x70000; a.bias_dtype = FMHA_DTYPE_FP32;
    st = fmha_fwd_check(&set_bias, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->has_bias && plan.kernel->arch == FMHA_ARCH_SM80 && plan.kernel->hdim == 256 &&
              strstr(plan.why, "portable pipeline: elementwise bias"),
          "hdim 256 with a bias on sm_90: the portable BIAS kernel, the plan says why");
    a.hdim_q = a.hdim_v = 136;
    st = fmha_fwd_check(&set_bias, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->arch == FMHA_ARCH_SM80 && plan.kernel->hdim == 256,
          "hdim 136 with a bias: the portable 256 kernel (the wgmma 256 kernel has no bias)");
    a = good_args(); a.dtype = FMHA_DTYPE_FP16; a.bias = (const void *)0x70000; a.bias_dtype = FMHA_DTYPE_FP16;
    fmhai_test_device.cc = 80;
    st = fmha_fwd_check(&set_bias, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->has_bias && plan.kernel->arch == FMHA_ARCH_SM80 && plan.kernel->hdim == 128,
          "bias on sm_80: the portable BIAS kernel");
    fmhai_test_device.cc = 90;
    /* bad inputs: nothing selected, a clear status and message */
    a = good_args(); a.bias = (const void *)0x70000; a.bias_dtype = FMHA_DTYPE_BF16;
    st = fmha_fwd_check(&set_a, &a, &plan);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "bias=1") && strstr(fmha_last_error(), "set_a") &&
              strstr(fmha_last_error(), "differs in bias"),
          "bias with a set without BIAS rows: no kernel, the message names the set and the bias");
    a.bias_dtype = FMHA_DTYPE_FP8;
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "bias_dtype"), "bias dtype fp8 rejected");
    a.bias_dtype = (fmha_dtype)9;
    CHECK(fmha_fwd_check(&set_default, &a, &plan) == FMHA_ERR_INVALID_ARG, "unknown bias dtype rejected");
    a.bias_dtype = FMHA_DTYPE_FP16; a.bias = (const void *)0x70001;
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "aligned"), "fp16 bias at an odd address rejected");
    a.bias_dtype = FMHA_DTYPE_FP32; a.bias = (const void *)0x70002;
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "4 bytes"), "fp32 bias not 4-byte aligned rejected");
    a.bias = (const void *)0x70000; a.stride_bias = -1;
    CHECK(fmha_fwd_check(&set_default, &a, &plan) == FMHA_ERR_INVALID_ARG, "negative bias stride rejected");
    a.stride_bias = 0; a.alibi_slopes = (const float *)0x80000;
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "alibi"), "bias with ALiBi unsupported");
    a.alibi_slopes = 0; a.dtype = FMHA_DTYPE_FP8;
    a.stride_q = a.stride_k = a.stride_v = 16 * 128; a.nhead_stride_q = a.nhead_stride_k = a.nhead_stride_v = 128;
    st = fmha_fwd_check(&set_fwd_all, &a, &plan);
    CHECK(st == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "fp8"), "bias with an fp8 forward unsupported");
    /* parameters: column pairs load as one word only with rows aligned to
     * two elements; group mode has no batch stride */
    a = good_args(); a.bias = (const void *)0x70000; a.bias_dtype = FMHA_DTYPE_FP16;
    a.stride_bias = 1000; a.nhead_stride_bias = 0; a.batch_stride_bias = 8000;
    fmhai_fwd_make_params(&a, 128, &prm);
    CHECK(prm.bias == a.bias && prm.bias_pair == 1 && prm.bias_row == 1000 && prm.bias_batch == 8000 &&
              prm.bias_dt == FMHA_DTYPE_FP16, "bias parameters, pairs aligned");
    a.stride_bias = 999;
    fmhai_fwd_make_params(&a, 128, &prm);
    CHECK(prm.bias_pair == 0, "odd bias row stride: element loads");
    a.stride_bias = 1000; a.bias = (const void *)0x70002;
    fmhai_fwd_make_params(&a, 128, &prm);
    CHECK(prm.bias_pair == 0, "16-bit bias not 4-byte aligned: element loads");
    a.bias = (const void *)0x70000; a.is_group_mode = 1; a.max_seqlen_q = 100;
    fmhai_fwd_make_params(&a, 128, &prm);
    CHECK(prm.bias_batch == 0, "group mode: no bias batch stride");
    fmha_set_json(&set_bias, js, sizeof(js));
    CHECK(strstr(js, "\"bias\": true") && strstr(js, "\"bias\": false"), "json: the bias column");
}

/* Unequal head dims (hdim_v < hdim_q; DeepSeek MLA prefill's 192 / 128). */
#define SET_HD(X)                                                                          \
    X(FWD, BF16, 192_128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)  \
    X(FWD, BF16, 192_128, MASK, NOSOFTCAP, NOALIBI, 96, 64, 6, 1)                          \
    X(FWD, FP16, 192, NOMASK, NOSOFTCAP, NOALIBI, 96, 64, 6, 1)
DECL_FMHA_KERNEL_SET(set_hd, SET_HD)

static void test_head_dims(void)
{
    fmha_fwd_args a = good_args();
    fmha_fwd_plan plan;
    fmha_status st;
    char json[8192];
    const fmha_kernel_info *k0 = fmha_set_kernel(&set_hd, 0), *k1 = fmha_set_kernel(&set_hd, 1);
    const fmha_kernel_info *k3 = fmha_set_kernel(&set_hd, 3);
    fmhai_test_device.is_amd = 0; fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
    /* the token: two numbers, one name */
    CHECK(fmha_set_size(&set_hd) == 4 && k0->hdim == 192 && k0->hdim_v == 128 && k3->hdim == 192 &&
              k3->hdim_v == 192 && strstr(k0->name, "fmha_fwd_d192_128_bf16_mask") == k0->name &&
              strstr(k0->name, "_b128x80_w12_s3_wgmma_sm90a") && strstr(k1->name, "_b96x64_w6_s1_portable_mma_sm80") &&
              strstr(k3->name, "fmha_fwd_d192_fp16_nmask") == k3->name,
          "192_128 rows: hdim 192, hdim_v 128, named d192_128 (a wgmma and a portable tuned row); plain 192 is both");
    CHECK(fmhai_fwd_row_violation2(192, 128, 96, 64, 6, 1, 0, 0, 0) == NULL &&
              fmhai_fwd_row_violation2(192, 192, 96, 64, 6, 1, 0, 0, 0) == NULL,
          "tuned 192 and 192_128 rows are valid");
    CHECK(fmhai_fwd_row_violation2(128, 192, 128, 64, 4, 1, 0, 0, 0) &&
              strstr(fmhai_fwd_row_violation2(128, 192, 128, 64, 4, 1, 0, 0, 0), "hdim_v_to_hdim"),
          "hdim_v above hdim: constraint hdim_v_to_hdim");
    CHECK(fmhai_fwd_row_violation2(192, 128, 96, 64, 6, 1, 16, 0, 0) &&
              strstr(fmhai_fwd_row_violation2(192, 128, 96, 64, 6, 1, 16, 0, 0), "contiguous_16bit"),
          "unequal dims with paged K/V: constraint hdim_v_below_hdim_contiguous_16bit");
    CHECK(fmhai_fwd90_row_violation2(192, 128, 128, 80, 12, 3, 0, 0, 0) == NULL &&
              fmhai_fwd90_row_violation2(192, 128, 128, 128, 12, 2, 0, 0, 0) == NULL &&
              fmhai_fwd90_row_violation2(192, 192, 128, 80, 12, 2, 0, 0, 0) == NULL,
          "the tuned wgmma 192_128 and 192 rows are valid");
    CHECK(fmhai_fwd90_row_violation2(192, 128, 128, 128, 12, 2, 16, 0, 0) != NULL &&
              fmhai_fwd90_row_violation2(128, 64, 128, 128, 12, 3, 0, 0, 0) != NULL,
          "wgmma rows of unequal dims: 192_128 only, contiguous");
    /* JSON reports both dims */
    fmha_set_json(&set_hd, json, sizeof(json));
    CHECK(strstr(json, "\"hdim_q\": 192, \"hdim_v\": 128") && strstr(json, "\"hdim_q\": 192, \"hdim_v\": 192"),
          "json: hdim_q and hdim_v of each kernel");

    /* selection: (192, 128) takes the 192_128 kernel in the default set */
    a.hdim_q = 192; a.hdim_v = 128;
    a.stride_q = a.stride_k = 8 * 192; a.nhead_stride_q = a.nhead_stride_k = 192;
    a.batch_stride_q = a.batch_stride_k = 1000 * 8 * 192;
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->hdim == 192 && plan.kernel->hdim_v == 128 && !plan.kernel->has_mask &&
              plan.kernel->arch == FMHA_ARCH_SM90A && plan.block == 12 * 32 && plan.grid_x == (1000 + 127) / 128,
          "sm_90, (192, 128) no mask: the wgmma 192_128 kernel (12 warps, 128 rows)");
    fmhai_test_device.cc = 80; fmhai_test_device.smem_optin = 163 * 1024;
    st = fmha_fwd_check(&set_default, &a, &plan);
    CHECK(st == FMHA_OK && plan.kernel->hdim_v == 128 && plan.kernel->arch == FMHA_ARCH_SM80 &&
              plan.block == 6 * 32 && plan.grid_x == (1000 + 95) / 96,
          "sm_80, (192, 128): the portable 192_128 kernel (6 warps, 96 rows)");
    fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_right = 0;
    CHECK(fmha_fwd_check(&set_default, &a, &plan) == FMHA_OK && plan.kernel->hdim_v == 128 && plan.kernel->has_mask,
          "(192, 128) causal: the masked 192_128 kernel");
    a.hdim_v = 64;   /* narrower V: the 192_128 kernel pads less than the 192 one */
    a.stride_v = a.stride_o = 8 * 64; a.nhead_stride_v = a.nhead_stride_o = 64;
    CHECK(fmha_fwd_check(&set_default, &a, &plan) == FMHA_OK && plan.kernel->hdim == 192 && plan.kernel->hdim_v == 128,
          "(192, 64): the 192_128 kernel (least padding)");
    a.hdim_q = 176; a.hdim_v = 128;
    CHECK(fmha_fwd_check(&set_default, &a, &plan) == FMHA_OK && plan.kernel->hdim == 192 && plan.kernel->hdim_v == 128,
          "(176, 128): the 192_128 kernel");
    a.hdim_q = a.hdim_v = 192;
    CHECK(fmha_fwd_check(&set_default, &a, &plan) == FMHA_OK && plan.kernel->hdim == 256 &&
              plan.kernel->arch == FMHA_ARCH_SM90A,
          "(192, 192) causal in the default set: still the 256 wgmma kernel");
    CHECK(fmha_fwd_check(&set_hd, &a, &plan) == FMHA_ERR_NO_KERNEL, "(192, 192) causal: set_hd's 192 row is NOMASK");
    a.mask_type = FMHA_MASK_NONE; a.window_right = -1; a.dtype = FMHA_DTYPE_FP16;
    CHECK(fmha_fwd_check(&set_hd, &a, &plan) == FMHA_OK && plan.kernel->hdim == 192 && plan.kernel->hdim_v == 192,
          "(192, 192) fp16 no mask in set_hd: the 192 kernel");
    a.dtype = FMHA_DTYPE_BF16;
    a.hdim_q = 256; a.hdim_v = 128; a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_right = 0;
    CHECK(fmha_fwd_check(&set_default, &a, &plan) == FMHA_OK && plan.kernel->hdim == 256 &&
              plan.kernel->arch == FMHA_ARCH_SM90A,
          "(256, 128): the wgmma 256 kernel, V zero-filled past 128");
    a.mask_type = FMHA_MASK_NONE; a.window_right = -1;
    a.hdim_q = 128; a.hdim_v = 64;
    CHECK(fmha_fwd_check(&set_a, &a, &plan) == FMHA_OK && plan.kernel->hdim == 128 &&
              plan.kernel->arch == FMHA_ARCH_SM90A,
          "(128, 64) in a set without unequal rows: the wgmma 128 kernel, V zero-filled past 64");
    /* families and dtypes without unequal dims say so; nothing is picked */
    a.dtype = FMHA_DTYPE_FP8; a.hdim_q = 128; a.hdim_v = 64;
    CHECK(fmha_fwd_check(&set_fwd_all, &a, NULL) == FMHA_ERR_UNSUPPORTED && strstr(fmha_last_error(), "must equal"),
          "fp8 forward with hdim_v != hdim_q: unsupported");
    /* on AMD the MFMA rows need a row of unequal dims */
    fmhai_test_device.is_amd = 1; fmhai_test_device.cc = 0x942; fmhai_test_device.smem_optin = 64 * 1024;
    a = good_args(); a.hdim_v = 64;
    st = fmha_fwd_check(&set_a, &a, NULL);
    CHECK(st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "hdim_v 64"), "gfx942: no NVIDIA kernel, message names hdim_v");
    fmhai_test_device.is_amd = 0; fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
}

/* The head-dim rule (fmhai_hdim_cost, dispatch/registry.h): least padding
 * within a pipeline; on sm_90 the forward's wgmma 32 and 96 kernels; the
 * backward (no wgmma 32 / 96 rows; the portable backward measured at 0.46-0.49
 * of the wgmma one per column): a wgmma kernel of 4/3 the columns (128 for d
 * 65..96) beats a native portable 96, and one of twice the columns (64 for
 * d <= 32) a portable 32; other devices take the portable 32 / 96 kernels
 * for d <= 32 / 65..96. */
static void test_hdim_rule(void)
{
    static const int ds[8] = { 8, 24, 32, 40, 64, 72, 88, 96 };
    /* sm_90: the head dim of the chosen kernel, its arch (1: wgmma) */
    static const int fwd90[8] = { 32, 32, 32, 64, 64, 96, 96, 96 };
    static const int want90[8] = { 32, 32, 32, 64, 64, 128, 128, 128 }, arch90[8] = { 0, 0, 0, 1, 1, 1, 1, 1 };
    static const int want80[8] = { 32, 32, 32, 64, 64, 96, 96, 96 };
    static const int wantb90[8] = { 64, 64, 64, 64, 64, 128, 128, 128 };   /* backward, sm_90: all wgmma */
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    int i, masked, ok90 = 1, ok80 = 1, okb90 = 1, okb80 = 1;
    for (masked = 0; masked < 2; ++masked)
        for (i = 0; i < 8; ++i) {
            a = good_args();
            a.hdim_q = a.hdim_v = ds[i];
            if (masked) { a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_right = 0; }
            fmhai_test_device.is_amd = 0; fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
            if (fmha_fwd_check(&set_default, &a, &plan) != FMHA_OK || plan.kernel->hdim != fwd90[i] ||
                plan.kernel->arch != FMHA_ARCH_SM90A || plan.kernel->has_mask != masked)
                ok90 = 0;
            if (fwd90[i] != 64) {   /* with dropout (wgmma: the hdim-128 kernel and DROPOUT rows only) */
                a.dropout_p = 0.1f;
                if (fmha_fwd_check(&set_default, &a, &plan) != FMHA_OK || plan.kernel->hdim != want90[i] ||
                    (plan.kernel->arch == FMHA_ARCH_SM90A) != arch90[i])
                    ok90 = 0;
                a.dropout_p = 0.f;
            }
            fmhai_test_device.cc = 80; fmhai_test_device.smem_optin = 163 * 1024;
            if (fmha_fwd_check(&set_default, &a, &plan) != FMHA_OK || plan.kernel->hdim != want80[i] ||
                plan.kernel->arch != FMHA_ARCH_SM80 || plan.kernel->has_mask != masked)
                ok80 = 0;
            if (want80[i] == 96 && (plan.block != 6 * 32 || plan.grid_x != (1000 + 95) / 96)) ok80 = 0;
        }
    CHECK(ok90, "head-dim rule, sm_90: d <= 32 the wgmma 32 kernel, 33..64 wgmma 64, 65..96 wgmma 96; with dropout "
                "d <= 32 the portable 32, 65..96 the wgmma 128 (head-dim cost)");
    CHECK(ok80, "head-dim rule, sm_80: d <= 32 the 32 kernel, 65..96 the 96 kernel (6 warps, 96 rows)");
    CHECK(fmhai_fwd90_row_violation(96, 128, 128, 12, 3, 0, 0, 0) == NULL &&
              fmhai_fwd90_row_violation(32, 128, 128, 12, 3, 0, 0, 0) == NULL &&
              fmhai_fwd90_row_violation(96, 128, 128, 12, 3, 16, 0, 0) != NULL &&
              fmhai_fwd90_row_violation(32, 128, 128, 12, 3, 0, 0, 1) != NULL &&
              fmhai_fwd90_row_violation(96, 128, 64, 12, 3, 0, 0, 0) != NULL,
          "wgmma 32 / 96 rows: 128 x 128 blocks, contiguous 16-bit only");
    /* the rule's cost: columns over the pipeline's relative speed */
    {
        fmha_kernel_info w128, p96, p32, w64;
        memset(&w128, 0, sizeof(w128));
        w128.family = FMHA_FAMILY_FWD; w128.hdim = w128.hdim_v = 128; w128.arch = FMHA_ARCH_SM90A;
        p96 = w128; p96.hdim = p96.hdim_v = 96; p96.arch = FMHA_ARCH_SM80;
        w64 = w128; w64.hdim = w64.hdim_v = 64;
        p32 = p96; p32.hdim = p32.hdim_v = 32;
        CHECK(fmhai_hdim_cost(&w128) < fmhai_hdim_cost(&p96) && fmhai_hdim_cost(&p32) < fmhai_hdim_cost(&w64),
              "head-dim cost: wgmma 128 < portable 96, portable 32 < wgmma 64");
        w64.family = p32.family = FMHA_FAMILY_BWD;
        CHECK(fmhai_hdim_cost(&w64) < fmhai_hdim_cost(&p32), "backward head-dim cost: wgmma 64 < portable 32");
    }
    /* the backward: every stage at the rule's head dim */
    for (masked = 0; masked < 2; ++masked)
        for (i = 0; i < 8; ++i) {
            fmha_bwd_traits t;
            fmha_bwd_plan plan_b;
            memset(&t, 0, sizeof(t));
            t.dtype = FMHA_DTYPE_BF16;
            t.batch = 2; t.nhead_q = 8; t.nhead_k = 2; t.seqlen_q = 1000; t.seqlen_k = 1000;
            t.hdim_q = t.hdim_v = ds[i];
            t.mask_type = masked ? FMHA_MASK_BOTTOM_RIGHT : FMHA_MASK_NONE;
            t.window_left = -1; t.window_right = masked ? 0 : -1;
            t.is_deterministic = masked;
            fmhai_test_device.is_amd = 0; fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
            if (fmha_bwd_plan_make(&set_bwd, &t, &plan_b) != FMHA_OK || plan_b.dq_dk_dv->hdim != wantb90[i] ||
                plan_b.dq_dk_dv->arch != FMHA_ARCH_SM90A ||
                plan_b.dot_do_o->hdim < ds[i] || plan_b.convert_dq->hdim < ds[i])
                okb90 = 0;
            fmhai_test_device.cc = 80; fmhai_test_device.smem_optin = 163 * 1024;
            if (fmha_bwd_plan_make(&set_bwd, &t, &plan_b) != FMHA_OK || plan_b.dq_dk_dv->hdim != want80[i] ||
                plan_b.dot_do_o->hdim != want80[i] || plan_b.convert_dq->hdim != want80[i] ||
                (want80[i] == 96 && plan_b.dq_dk_dv->tile_n != 96))
                okb80 = 0;
        }
    CHECK(okb90, "bwd head-dim rule, sm_90: dq_dk_dv d <= 64 wgmma 64, 65..96 wgmma 128");
    CHECK(okb80, "bwd head-dim rule, sm_80: d <= 32 the 32 rows, 65..96 the 96 rows (96-key tiles)");
    fmhai_test_device.is_amd = 0; fmhai_test_device.cc = 90; fmhai_test_device.smem_optin = 227 * 1024;
}

static void test_json(void)
{
    char big[65536], small[16];
    size_t need = fmha_set_json(&set_a, big, sizeof(big));
    size_t need2 = fmha_set_json(&set_a, small, sizeof(small));
    int names = 0;
    const char *p = big;
    while ((p = strstr(p, "\"name\"")) != NULL) { ++names; ++p; }
    CHECK(need == strlen(big) && need > 100, "json length returned");
    CHECK(need2 == need && strlen(small) == sizeof(small) - 1, "json truncates safely and reports full length");
    CHECK(names == fmha_set_size(&set_a), "json lists every enabled kernel");
    CHECK(strstr(big, "\"tile\": [128, 64]") && strstr(big, "\"pipeline\": \"portable_mma\"") &&
          strstr(big, "\"arch\": \"sm80\"") && big[0] == '{' && strstr(big, "]}"),
          "json fields: tile, pipeline, arch");
}

/* The Hopper forward's launch order (fmhai_fwd_block_map): every (tile,
 * head, entry) exactly once for any grid and group size, pairs numbered
 * head or batch entry fastest; with groups, the pairs of a group are
 * consecutive and its tiles start from the last down;
 * and the group size a call gets (fmhai_fwd_lpt_pairs). */
static void test_launch_order(void)
{
    static const int Ms[] = { 1, 2, 5, 16 }, Hs[] = { 1, 3, 16 }, Bs[] = { 1, 2, 7 };
    int bad = 0, cases = 0;
    for (int mi = 0; mi < 4; ++mi)
        for (int hi = 0; hi < 3; ++hi)
            for (int bi = 0; bi < 3; ++bi) {
                const int M = Ms[mi], H = Hs[hi], B = Bs[bi], P = H * B;
                const int Gs[] = { 0, 1, 2, 5, P, P + 3 };
                for (int gb = 0; gb < 12; ++gb) {
                    static unsigned char seen[16 * 16 * 7];
                    const int G = Gs[gb % 6], bf = gb / 6;   /* bf: pairs numbered batch entry fastest */
                    int prev_m = M, prev_group = -1;
                    memset(seen, 0, sizeof(seen));
                    for (int lin = 0; lin < M * P; ++lin) {
                        int m, h, b;
                        fmhai_fwd_block_map(lin, M, H, P, G, bf, &m, &h, &b);
                        if (m < 0 || m >= M || h < 0 || h >= H || b < 0 || b >= B || seen[(b * H + h) * M + m]++) {
                            bad = 1;
                            continue;
                        }
                        if (G > 0) {   /* tiles never grow inside a group; pairs stay in their group */
                            const int group = (bf ? h * B + b : b * H + h) / G;
                            if (group == prev_group && m > prev_m) bad = 1;
                            if (group < prev_group) bad = 1;
                            prev_group = group;
                            prev_m = m;
                        }
                    }
                    ++cases;
                }
            }
    printf("# launch order: %d grids\n", cases);
    CHECK(!bad, "launch order: every grid covers each block once, longest first in its group");

    {
        fmhai_fwd_params p;
        fmha_fwd_args a = good_args();
        fmhai_fwd_make_params(&a, 128, &p);
        CHECK(p.lpt_pairs == 0, "launch order: no mask keeps pair after pair");
        a.mask_type = FMHA_MASK_TOP_LEFT; a.window_left = -1; a.window_right = 0;
        fmhai_fwd_make_params(&a, 128, &p);
        printf("# causal 1000 keys: groups of %d pairs\n", p.lpt_pairs);
        CHECK(p.lpt_pairs == 16, "launch order: causal, K/V within the L2: one group of all 16 pairs");
        a.seqlen_q = a.seqlen_k = 64 * 1024;
        fmhai_fwd_make_params(&a, 128, &p);
        /* 64k keys x 256 columns x 2 bytes = 32 MB a KV head, shared by 4 query heads */
        printf("# causal 64k keys: groups of %d pairs\n", p.lpt_pairs);
        CHECK(p.lpt_pairs == 4, "launch order: causal 64k keys: groups of the 4 query heads of a KV head");
        a.window_left = 128;
        fmhai_fwd_make_params(&a, 128, &p);
        CHECK(p.lpt_pairs == 0, "launch order: a sliding window keeps pair after pair");
        a.window_left = -1;
        a.is_group_mode = 1; a.max_seqlen_q = 1000;
        fmhai_fwd_make_params(&a, 128, &p);
        CHECK(p.lpt_pairs == 0, "launch order: group mode keeps pair after pair");
        a = good_args();   /* non-causal with a bias broadcast over the heads */
        a.bias = (const void *)0x50000; a.bias_dtype = FMHA_DTYPE_BF16;
        a.stride_bias = 1000; a.nhead_stride_bias = 0; a.batch_stride_bias = 0;
        fmhai_fwd_make_params(&a, 128, &p);
        CHECK(p.lpt_pairs == 0, "launch order: a shared bias within the L2 keeps pair after pair");
        a.seqlen_q = a.seqlen_k = a.stride_bias = 8192;
        fmhai_fwd_make_params(&a, 128, &p);
        CHECK(p.lpt_pairs > 1, "launch order: a shared bias past the L2 takes groups");
        CHECK(!p.pairs_bfast, "launch order: a bias shared by the heads numbers pairs head fastest");
        a.nhead_stride_bias = (int64_t)8192 * 8192;   /* [1, h, s, s] */
        fmhai_fwd_make_params(&a, 128, &p);
        CHECK(p.lpt_pairs > 1 && p.pairs_bfast, "launch order: a bias per head shared by the entries takes groups, "
                                                "entries fastest");
        a.batch_stride_bias = (int64_t)8 * 8192 * 8192;   /* [b, h, s, s]: nothing shared */
        fmhai_fwd_make_params(&a, 128, &p);
        CHECK(p.lpt_pairs == 0 && !p.pairs_bfast, "launch order: a bias per head and entry keeps pair after pair");
        a.seqlen_q = a.seqlen_k = a.stride_bias = 256;   /* [1, h, 256, 256]: 1 MB in all, in the L2 */
        a.nhead_stride_bias = 256 * 256; a.batch_stride_bias = 0;
        fmhai_fwd_make_params(&a, 128, &p);
        CHECK(p.lpt_pairs == 0 && !p.pairs_bfast, "launch order: a per-head bias within the L2 keeps pair after pair");
    }
    {   /* the backward's units a group (fmhai_bwd_lpt_units) */
        fmhai_bwd_params q;
        memset(&q, 0, sizeof(q));
        q.seqlen_q = 2048; q.head_ratio = 1; q.d = q.hdv = 128;
        q.mask_kind = FMHA_MASK_TOP_LEFT; q.window_left = -1; q.window_right = 0;
        /* 2048 rows x (2 x 128 x 2 + 128 x 4) bytes = 2 MB a unit: 16 in 32 MB */
        CHECK(fmhai_bwd_lpt_units(&q, 128, 0) == 16, "launch order: backward causal, groups of 16 units");
        CHECK(fmhai_bwd_lpt_units(&q, 8, 0) == 8, "launch order: backward, at most every unit");
        CHECK(fmhai_bwd_lpt_units(&q, 128, 1) == 0, "launch order: backward group mode keeps unit after unit");
        q.deterministic = 1;
        CHECK(fmhai_bwd_lpt_units(&q, 128, 0) == 0, "launch order: deterministic backward keeps unit after unit");
        q.deterministic = 0; q.mask_kind = FMHA_MASK_NONE;
        CHECK(fmhai_bwd_lpt_units(&q, 128, 0) == 0, "launch order: backward without a mask keeps unit after unit");
        /* a bias [1, h, 2048, 2048] of bf16 (8 MB a head) over 16 heads and 8 entries */
        q.nhead_q = 16; q.batch = 8; q.seqlen_k = 2048;
        q.bias = (const void *)0x50000; q.bias_dt = FMHA_DTYPE_BF16;
        q.bias_row = 2048; q.bias_head = (int64_t)2048 * 2048; q.bias_batch = 0;
        CHECK(fmhai_bwd_bias_shared(&q) == 2 && fmhai_bwd_lpt_units(&q, 128, 0) == 16,
              "launch order: backward, a per-head bias shared by the entries past the L2: groups, entries fastest");
        q.bias_head = 0;   /* [1, 1, s, s]: 8 MB, within the L2 */
        CHECK(fmhai_bwd_bias_shared(&q) == 0 && fmhai_bwd_lpt_units(&q, 128, 0) == 0,
              "launch order: backward, a bias shared by all within the L2: unit after unit");
        q.seqlen_q = q.seqlen_k = 8192;   /* 128 MB */
        CHECK(fmhai_bwd_bias_shared(&q) == 1 && fmhai_bwd_lpt_units(&q, 128, 0) > 0,
              "launch order: backward, a bias shared by the heads past the L2: groups, KV heads fastest");
        q.bias_head = (int64_t)8192 * 8192; q.bias_batch = 16 * q.bias_head;   /* nothing shared */
        CHECK(fmhai_bwd_bias_shared(&q) == 0 && fmhai_bwd_lpt_units(&q, 128, 0) == 0,
              "launch order: backward, a bias per head and entry: unit after unit");
    }
}

int main(void)
{
    test_expansion();
    test_constraints();
    test_prefill_classes();
    test_validation();
    test_selection();
    test_fp8_fwd();
    test_bwd_dropout_dispatch();
    test_bias();
    test_head_dims();
    test_hdim_rule();
    test_json();
    test_launch_order();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
