/*
 * Backward rows of DECL_FMHA_KERNEL_SET: the families BWD (dq_dk_dv),
 * BWD_DET (dq_dk_dv of deterministic plans), BWD_DOT_DO_O and
 * BWD_CONVERT_DQ, and FMHA_DEFAULT_BWD_SET.
 *
 * Rows have the forward's ten columns:
 *   X(BWD,            dtype, hdim, mask, softcap, alibi, tile_m, tile_n, warps, stages)
 *   X(BWD_DET,        dtype, hdim, mask, softcap, alibi, tile_m, tile_n, warps, stages)
 *   X(BWD_DOT_DO_O,   dtype, hdim, NOMASK, NOSOFTCAP, NOALIBI, tile_m, tile_n, warps, stages)
 *   X(BWD_CONVERT_DQ, dtype, hdim, NOMASK, NOSOFTCAP, NOALIBI, tile_m, tile_n, warps, stages)
 * The hdim column may name a pair, 192_128 (hdim_q 192, hdim_v 128: MLA;
 * portable rows, NVIDIA), which the three stages serve with the V side 128
 * wide. A backward plan needs one kernel of each of the three stages for the
 * problem's dtype and head dims, its dq_dk_dv from BWD or, deterministic,
 * from BWD_DET (fmha_bwd_plan_make says which one is missing). FMHA_ANY in the tile/warp columns expands into the tuned rows of
 * policy/bwd_tiles.h; explicit rows are checked against FMHAI_BWD_CONSTRAINTS
 * (or FMHAI_BWD_AUX_CONSTRAINTS) at compile time. Column 6: ALIBI compiles
 * the ALiBi bias into a dq_dk_dv row (a plan with ALiBi needs one; a row
 * with it serves only ALiBi problems), BIAS the elementwise bias and its
 * gradient dbias (traits.has_bias; as the forward's BIAS, it serves only
 * plans with a bias, and the rows without it carry none of its code); the
 * two streaming stages take no mask, soft cap or ALiBi (NOMASK, NOSOFTCAP,
 * NOALIBI).
 *
 * kernel_set.h's row expansion calls FMHAI_ROWS_<family>(R, ...) with R one
 * of its row macros (kernels, table entries, counting); the backward
 * families forward to R##_BWD, defined here, so the forward's macros are
 * untouched.
 */
#ifndef FMHA_TILE_DISPATCH_BWD_SET_H
#define FMHA_TILE_DISPATCH_BWD_SET_H

#include "../policy/bwd_tiles.h"
#include "kernel_set.h"

/* ---- column tokens ---------------------------------------------------------- */
#define FMHAI_FAM_BWD FMHA_FAMILY_BWD
#define FMHAI_FAM_BWD_DET FMHA_FAMILY_BWD_DET
#define FMHAI_FAM_BWD_DOT_DO_O FMHA_FAMILY_BWD_DOT_DO_O
#define FMHAI_FAM_BWD_CONVERT_DQ FMHA_FAMILY_BWD_CONVERT_DQ
#define FMHAI_AUX_BWD 0
#define FMHAI_AUX_BWD_DET 0
#define FMHAI_AUX_BWD_DOT_DO_O 1
#define FMHAI_AUX_BWD_CONVERT_DQ 1

/* dq_dk_dv's pipeline per arch: its name, body and shared memory (the
 * Hopper rows of policy/bwd_tiles.h run pipeline/bwd_sm90.h; the GFX9 rows
 * pipeline/bwd_mfma.h where it serves the row, else the portable one, chosen
 * on the row's constants, as the forward's; the name stays the portable
 * one's, as the forward's GFX9 rows keep theirs). */
#define FMHAI_BWD_PIPE_SM80 "portable_mma"
#define FMHAI_BWD_PIPE_GFX9 "portable_mma"
#define FMHAI_BWD_PIPE_SM90A "wgmma"
#define FMHAI_BWD_FN_SM80 fmhai_bwd_dq_dk_dv
#define FMHAI_BWD_FN_GFX9 fmhai_bwd_dq_dk_dv_gfx9
#define FMHAI_BWD_FN_SM90A fmhai_bwd_dq_dk_dv_sm90_any
/* (bias: a BIAS row, whose Hopper kernel keeps the step's bias tile in
 * shared memory) */
#define FMHAI_BWD_SMEM_SM80(hd, hdv, bm, bn, st, bias) FMHAI_BWD_SMEM_BYTES(hd, bm, bn, st)
#define FMHAI_BWD_SMEM_GFX9(hd, hdv, bm, bn, st, bias) FMHAI_BWD_SMEM_BYTES(hd, bm, bn, st)
#define FMHAI_BWD_SMEM_SM90A(hd, hdv, bm, bn, st, bias) FMHAI_BWD90_SMEM_BYTES(hd, bm, bn, st, bias)
/* the call of dq_dk_dv's body: the portable one takes the V/O head dim
 * (rows such as 192_128); the others have equal dims (FMHAI_BWD_HV_OK) */
#define FMHAI_BWD_CALL_SM80(p, smem, bf, hd, hdv, ...) fmhai_bwd_dq_dk_dv_hv(p, smem, bf, hd, hdv, __VA_ARGS__)
#define FMHAI_BWD_CALL_GFX9(p, smem, bf, hd, hdv, ...) FMHAI_BWD_FN_GFX9(p, smem, bf, hd, __VA_ARGS__)
#define FMHAI_BWD_CALL_SM90A(p, smem, bf, hd, hdv, ...) FMHAI_BWD_FN_SM90A(p, smem, bf, hd, __VA_ARGS__)
#define FMHAI_BWD_HV_OK_SM80 1
#define FMHAI_BWD_HV_OK_GFX9 0
#define FMHAI_BWD_HV_OK_SM90A 0
#define FMHAI_BWD_IS90_SM80 0
#define FMHAI_BWD_IS90_GFX9 0
#define FMHAI_BWD_IS90_SM90A 1
/* the kernel parameter by (Hopper pipeline, streaming stage): the Hopper
 * dq_dk_dv's carries TMA tensor maps (fmhai_bwd90_params, p first) */
#define FMHAI_BWD_PT_00 fmhai_bwd_params
#define FMHAI_BWD_PT_01 fmhai_bwd_params
#define FMHAI_BWD_PT_10 fmhai_bwd90_params
#define FMHAI_BWD_PT_11 fmhai_bwd_params

/* ALiBi rows add "_alibi" to the name (the others keep theirs) */
#define FMHAI_BWD_ALS_NOALIBI ""
#define FMHAI_BWD_ALS_ALIBI "_alibi"
#define FMHAI_BWD_ALS_BIAS "_bias"
#define FMHAI_KNAME_BWD(dt, hd, mask, sc, al, bm, bn, w, st, arch)                        \
    "fmha_bwd_dq_dk_dv_d" #hd "_" FMHAI_DTS_##dt FMHAI_ONS_##mask FMHAI_ONS_##sc          \
    FMHAI_BWD_ALS_##al "_b" #bm "x" #bn "_w" #w "_s" #st "_" FMHAI_BWD_PIPE_##arch "_" FMHAI_ARCHS_##arch
#define FMHAI_KNAME_BWD_DET(dt, hd, mask, sc, al, bm, bn, w, st, arch)                    \
    "fmha_bwd_dq_dk_dv_det_d" #hd "_" FMHAI_DTS_##dt FMHAI_ONS_##mask FMHAI_ONS_##sc      \
    FMHAI_BWD_ALS_##al "_b" #bm "x" #bn "_w" #w "_s" #st "_" FMHAI_BWD_PIPE_##arch "_" FMHAI_ARCHS_##arch
#define FMHAI_KNAME_BWD_DOT_DO_O(dt, hd, mask, sc, al, bm, bn, w, st, arch) \
    "fmha_bwd_dot_do_o_d" #hd "_" FMHAI_DTS_##dt "_b" #bm "_w" #w "_" FMHAI_ARCHS_##arch
#define FMHAI_KNAME_BWD_CONVERT_DQ(dt, hd, mask, sc, al, bm, bn, w, st, arch) \
    "fmha_bwd_convert_dq_d" #hd "_" FMHAI_DTS_##dt "_b" #bm "_w" #w "_" FMHAI_ARCHS_##arch

/* Dynamic shared memory of a row (hd: the row's head-dim token, 192_128 a
 * pair, kernel_set.h's FMHAI_HDQ / FMHAI_HDV; al: its bias column). */
#define FMHAI_SMEM_BWD(hd, bm, bn, st, arch, al) \
    FMHAI_BWD_SMEM_##arch(FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, st, FMHAI_ON_##al == FMHAI_ON_BIAS)
#define FMHAI_SMEM_BWD_DET(hd, bm, bn, st, arch, al) \
    FMHAI_BWD_SMEM_##arch(FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, st, FMHAI_ON_##al == FMHAI_ON_BIAS)
#define FMHAI_SMEM_BWD_DOT_DO_O(hd, bm, bn, st, arch, al) 0
#define FMHAI_SMEM_BWD_CONVERT_DQ(hd, bm, bn, st, arch, al) 0

/* The body each family's kernel calls (dot_do_o runs over the V/O columns,
 * convert_dq over the Q ones). */
#define FMHAI_BODY_BWD(p, smem, dt, hd, mask, sc, al, bm, bn, w, st, arch)                   \
    FMHAI_BWD_CALL_##arch(p, smem, FMHAI_DT_##dt == FMHA_DTYPE_BF16, FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, \
                          w, st, FMHAI_ON_##mask, FMHAI_ON_##sc, FMHAI_ON_##al, 0)
#define FMHAI_BODY_BWD_DET(p, smem, dt, hd, mask, sc, al, bm, bn, w, st, arch)               \
    FMHAI_BWD_CALL_##arch(p, smem, FMHAI_DT_##dt == FMHA_DTYPE_BF16, FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, \
                          w, st, FMHAI_ON_##mask, FMHAI_ON_##sc, FMHAI_ON_##al, 1)
#define FMHAI_BODY_BWD_DOT_DO_O(p, smem, dt, hd, mask, sc, al, bm, bn, w, st, arch) \
    fmhai_bwd_dot_do_o(p, FMHAI_DT_##dt == FMHA_DTYPE_BF16, FMHAI_HDV(hd), bm, w)
#define FMHAI_BODY_BWD_CONVERT_DQ(p, smem, dt, hd, mask, sc, al, bm, bn, w, st, arch) \
    fmhai_bwd_convert_dq(p, FMHAI_DT_##dt == FMHA_DTYPE_BF16, FMHAI_HDQ(hd), bm, w)

/* Compile-time checks of a row: its family's (and pipeline's) constraints,
 * and no mask, soft cap or ALiBi on the streaming stages. */
#define FMHAI_BWD_ROW_ASSERTS(fam, hd, mask, sc, al, bm, bn, w, st, arch)                           \
    FMHA_STATIC_ASSERT(!FMHAI_AUX_##fam || (!FMHAI_ON_##mask && !FMHAI_ON_##sc && !FMHAI_ON_##al),   \
                       "fmha_tile constraint bwd_aux_no_features violated: dot_do_o and convert_dq " \
                       "rows take NOMASK, NOSOFTCAP and NOALIBI");                                  \
    FMHA_STATIC_ASSERT(FMHAI_FAM_##fam != FMHA_FAMILY_BWD_DET || (w) % 2 == 0,                       \
                       "fmha_tile constraint bwd_det_even_warps violated: a BWD_DET row needs an even " \
                       "warp count (its dQ adds read through the step's Q and dO buffers)");          \
    FMHA_STATIC_ASSERT(FMHAI_HDQ(hd) == FMHAI_HDV(hd) || FMHAI_AUX_##fam || FMHAI_BWD_HV_OK_##arch,     \
                       "fmha_tile constraint bwd_hdim_v_portable violated: rows of unequal head dims "  \
                       "(e.g. 192_128) run the portable mma.sync pipeline (NVIDIA rows)");             \
    FMHAI_BWD_HV_CONSTRAINTS(FMHAI_CONSTRAINT_ASSERT, FMHAI_HDQ(hd), FMHAI_HDV(hd), bm, bn, w, st)     \
    FMHAI_CAT(FMHAI_BWD_CHECKS_, FMHAI_CAT(FMHAI_BWD_IS90_##arch, FMHAI_AUX_##fam))(FMHAI_CONSTRAINT_ASSERT, \
                                                                            FMHAI_HDQ(hd), bm, bn, w, st)
/* checks by (Hopper pipeline, streaming stage) */
#define FMHAI_BWD_CHECKS_00 FMHAI_BWD_CONSTRAINTS
#define FMHAI_BWD_CHECKS_01 FMHAI_BWD_AUX_CONSTRAINTS
#define FMHAI_BWD_CHECKS_10 FMHAI_BWD90_CONSTRAINTS
#define FMHAI_BWD_CHECKS_11 FMHAI_BWD_AUX_CONSTRAINTS

/* ---- pass 1: kernels ------------------------------------------------------------ */
#if defined(FMHA_PLATFORM_HOST_ONLY)
#  define FMHAI_KERNEL_ROW_BWD(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st) \
    FMHAI_BWD_ROW_ASSERTS(fam, hd, mask, sc, al, bm, bn, w, st, arch)
#else
#  define FMHAI_KERNEL_ROW_BWD(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st) \
    FMHAI_BWD_ROW_ASSERTS(fam, hd, mask, sc, al, bm, bn, w, st, arch)                              \
    static __global__ void FMHAI_LAUNCH_BOUNDS((w) * 32, FMHAI_BWD_MIN_BLOCKS(w))                  \
    FMHAI_KID(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st)(        \
        const FMHAI_GRID_CONSTANT FMHAI_CAT(FMHAI_BWD_PT_, FMHAI_CAT(FMHAI_BWD_IS90_##arch, FMHAI_AUX_##fam)) p) \
    {                                                                                             \
        extern __shared__ __align__(128) char fmhai_smem[];                                       \
        if (FMHAI_ROW_ENABLED(arch, upg, pg, ubm, ubn, uw, ust, bm, bn, w, st))                         \
            FMHAI_BODY_##fam((const fmhai_bwd_params *)&p, fmhai_smem, dt, hd, mask, sc, al, bm, bn, w, \
                             st, arch);                                                           \
    }
#endif

/* ---- pass 2: table entries -------------------------------------------------------- */
#define FMHAI_ENTRY_ROW_BWD(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st) \
    { { FMHAI_KNAME_##fam(dt, hd, mask, sc, al, bm, bn, w, st, arch), FMHAI_FAM_##fam,             \
        FMHAI_DT_##dt, FMHAI_HDQ(hd), FMHAI_ON_##mask, FMHAI_ON_##sc, FMHAI_ON_##al & 1, bm, bn, w, st, \
        FMHAI_CAT(FMHAI_BWD_PIPE_, arch),                                                          \
        FMHAI_CAT(FMHA_ARCH_, arch), 0, FMHA_KV_LAYOUT_LINEAR, FMHAI_ON_##al == FMHAI_ON_BIAS,      \
        FMHAI_HDV(hd), 0, 0 },                                                                      \
      FMHAI_ROW_ENABLED(arch, upg, pg, ubm, ubn, uw, ust, bm, bn, w, st),                                \
      FMHAI_SMEM_##fam(hd, bm, bn, st, arch, al),                                                    \
      FMHAI_KFN(FMHAI_KID(fam, dt, hd, mask, sc, al, upg, pg, ubm, ubn, uw, ust, arch, bm, bn, w, st)), 0, 0 },

#define FMHAI_COUNT_ROW_BWD FMHAI_COUNT_ROW

/* ---- row expansion: explicit row, or the tuned rows --------------------------------- */
#define FMHAI_BWD_TILES_BWD(hd) FMHAI_TILES_BWD_##hd
#define FMHAI_BWD_TILES_BWD_DET(hd) FMHAI_TILES_BWD_##hd
#define FMHAI_BWD_TILES_BWD_DOT_DO_O(hd) FMHAI_TILES_BWD_AUX
#define FMHAI_BWD_TILES_BWD_CONVERT_DQ(hd) FMHAI_TILES_BWD_AUX
/* an explicit row: the arch token expanded (SM80 / GFX9) before the row
 * macros paste it (FMHAI_BWD_IS90_##arch) */
#define FMHAI_BWD_APPLY(R, args) R args
#define FMHAI_BWD_TILEROWS_0(R, fam, dt, hd, mask, sc, al, bm, bn, w, st) \
    FMHAI_BWD_APPLY(R, (fam, dt, hd, mask, sc, al, 0, 0, bm, bn, w, st, FMHAI_EXPLICIT_ARCH, bm, bn, w, st))
#define FMHAI_BWD_TILEROWS_1(R, fam, dt, hd, mask, sc, al, bm, bn, w, st) \
    FMHAI_BWD_TILES_##fam(hd)(R, fam, dt, hd, mask, sc, al, 0, 0, bm, bn, w, st)
#define FMHAI_BWD_ROWS(R, fam, dt, hd, mask, sc, al, bm, bn, w, st)                            \
    FMHAI_CAT(FMHAI_BWD_TILEROWS_, FMHAI_ANY4(bm, bn, w, st))(FMHAI_CAT(R, _BWD), fam, dt, hd, \
                                                              mask, sc, al, bm, bn, w, st)
#define FMHAI_ROWS_BWD FMHAI_BWD_ROWS
#define FMHAI_ROWS_BWD_DET FMHAI_BWD_ROWS
#define FMHAI_ROWS_BWD_DOT_DO_O FMHAI_BWD_ROWS
#define FMHAI_ROWS_BWD_CONVERT_DQ FMHAI_BWD_ROWS

/* ---- the library's default backward set ------------------------------------------------ */
#define FMHAI_DEFAULT_BWD_HD(X, dt, hd)                                                          \
    X(BWD,            dt, hd, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, hd, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, hd, NOMASK, SOFTCAP,   NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, hd, MASK,   SOFTCAP,   NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, NOMASK, SOFTCAP,   NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, MASK,   SOFTCAP,   NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            dt, hd, MASK,   NOSOFTCAP, ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, MASK,   NOSOFTCAP, ALIBI,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   dt, hd, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, dt, hd, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
/* Elementwise bias (BIAS rows, with dbias): masked or not through one MASK
 * kernel, no soft cap, head dims up to 128, as the forward's default BIAS
 * rows (a set that needs more declares its own). */
#define FMHAI_DEFAULT_BWD_BIAS_HD(X, dt, hd)                                                     \
    X(BWD,            dt, hd, MASK,   NOSOFTCAP, BIAS,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, hd, MASK,   NOSOFTCAP, BIAS,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
/* DeepSeek MLA training's head dims (hdim_q 192, hdim_v 128): one MASK
 * kernel a determinism mode (it serves unmasked problems too), no soft cap
 * or ALiBi, as the forward's MLA rows. NVIDIA only (policy/bwd_tiles.h:
 * no AMD row; there the 256 rows serve the problem with V padded). */
#if defined(FMHA_PLATFORM_AMD)
#  define FMHAI_DEFAULT_BWD_MLA(X, dt)
#else
#  define FMHAI_DEFAULT_BWD_MLA(X, dt)                                                         \
    X(BWD,            dt, 192_128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        dt, 192_128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   dt, 192_128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, dt, 192_128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#endif
/* Head dims 32 and 96 (portable rows, NVIDIA only): every mask and soft
 * cap variant and ALiBi as the other head dims (no BIAS rows). */
#if defined(FMHA_PLATFORM_AMD)
#  define FMHAI_DEFAULT_BWD_HD32(X, dt, hd)
#else
#  define FMHAI_DEFAULT_BWD_HD32(X, dt, hd) FMHAI_DEFAULT_BWD_HD(X, dt, hd)
#endif
#define FMHAI_DEFAULT_BWD_DT(X, dt)        \
    FMHAI_DEFAULT_BWD_HD32(X, dt, 32)      \
    FMHAI_DEFAULT_BWD_HD(X, dt, 64)        \
    FMHAI_DEFAULT_BWD_HD32(X, dt, 96)      \
    FMHAI_DEFAULT_BWD_HD(X, dt, 128)       \
    FMHAI_DEFAULT_BWD_HD(X, dt, 256)       \
    FMHAI_DEFAULT_BWD_MLA(X, dt)           \
    FMHAI_DEFAULT_BWD_BIAS_HD(X, dt, 64)   \
    FMHAI_DEFAULT_BWD_BIAS_HD(X, dt, 128)
#define FMHA_DEFAULT_BWD_SET(X)            \
    FMHAI_DEFAULT_BWD_DT(X, FP16)          \
    FMHAI_DEFAULT_BWD_DT(X, BF16)

#endif /* FMHA_TILE_DISPATCH_BWD_SET_H */
