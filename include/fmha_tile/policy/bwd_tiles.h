/*
 * Backward tile policy: the tuned tiles of the three backward stages per arch,
 * the workspace constants, and the constraints every backward row must meet.
 *
 * dq_dk_dv (family BWD). A block owns tile_n keys of one KV head; each of its
 * warps owns 16 of them (tile_n = 16 * warps) and computes S^T, dP^T and dS^T
 * for its keys against tile_m query rows at a time, so P^T and dS^T stay in
 * registers as the A operands of dV += P^T dO and dK += dS^T Q. dQ = dS K is
 * computed by a different warp split (FMHAI_BWD_DQ_WM below) from dS^T staged
 * in shared memory. stages: 2 double-buffers the Q and dO tiles (the next
 * tile loads during the whole step), 1 single-buffers them (the next tile
 * loads during the dQ product only). Head dims above 128 run two sweeps over
 * the query tiles (dV, then dK and dQ) so that one accumulator fits.
 *
 * dot_do_o and convert_dq (families BWD_DOT_DO_O, BWD_CONVERT_DQ) are
 * row-streaming kernels: tile_m rows per block, `warps` warps; their tile_n
 * and stages columns are unused and must be 0 and 1.
 *
 * Tuned tables, one macro per (stage, kernel head dim), rows as
 *     Y(..., arch, tile_m, tile_n, warps, stages)
 * A kernel-set row with FMHA_ANY expands into these (filtered by the columns
 * it gives). FMHAI_BWD_CONSTRAINTS / FMHAI_BWD_AUX_CONSTRAINTS are the single
 * source of the rules: static asserts for explicit rows, and
 * fmhai_bwd_row_violation() at run time.
 */
#ifndef FMHA_TILE_POLICY_BWD_TILES_H
#define FMHA_TILE_POLICY_BWD_TILES_H

#include "fwd_tiles.h"

/* ---- NVIDIA, portable mma.sync pipeline (sm_80 and newer) ------------------
 * Like FlashAttention-2's backward: 8 warps own 128 keys and sweep 64 query
 * rows (hdim 64: 128) at a time, one block per SM. Measured on an H100 with
 * bench/bench_bwd.cu (bf16, 2k-8k): hdim 64 128 x 128 beat 64 x 128 by
 * 12-16%; hdim 128 64 x 128 beat 64 x 64 (4 warps) by 25% and 128 x 128 by
 * 3-4%, and equals its single-buffered variant. hdim 256 uses 4 warps and two sweeps;
 * its single-buffered row fits an sm_80 (163 KB of shared memory), the
 * double-buffered one only sm_90 (201 KB). */
/* (a tuning or test build may predefine these rows) */
#ifndef FMHAI_TILES_SM80_BWD_64
/*                                                     arch  tile_m tile_n warps stages */
#define FMHAI_TILES_SM80_BWD_64(Y, ...)   Y(__VA_ARGS__, SM80,   128,   128,    8,     2)
#define FMHAI_TILES_SM80_BWD_128(Y, ...)  Y(__VA_ARGS__, SM80,    64,   128,    8,     2)
#endif
#ifndef FMHAI_TILES_SM80_BWD_256
#define FMHAI_TILES_SM80_BWD_256(Y, ...)  Y(__VA_ARGS__, SM80,    64,    64,    4,     2) \
                                          Y(__VA_ARGS__, SM80,    64,    64,    4,     1)
#endif
/* hdim 192 (MLA training: hdim_q 192, hdim_v 128 runs it with V padded): a
 * row of 24 16-byte chunks needs 6 warps (96 keys) and two sweeps. Not in
 * the default set; compile-checked only (ptxas, sm_90a: 16-32 bytes of
 * spill, BWD_DET 224, as the 256 rows' 100-500). */
#ifndef FMHAI_TILES_SM80_BWD_192
#define FMHAI_TILES_SM80_BWD_192(Y, ...)  Y(__VA_ARGS__, SM80,    64,    96,    6,     2)
#endif
/* hdim 192_128 (MLA training: hdim_q 192, hdim_v 128, its own kernels): K
 * and Q rows of 24 16-byte chunks need 6 warps (96 keys), as the 192 row.
 * Registers: dK is 16 x 192 (96 a lane) and dV 16 x 128 (64): both live
 * (160) plus a slice's S^T and dP^T (32) and the dQ chunk's fragments pass
 * 255, so it keeps the two sweeps of the 192 row (dV first, then dK and
 * dQ), each with one accumulator; dP^T = V dO^T and dV += P^T dO run over
 * 128 columns, not 192 (a third fewer MMAs in those two products). V and
 * dO keep 192-wide rows in shared memory (zero past 128): the V and dO
 * bases are then the K and Q ones, no registers of their own (separate
 * 128-wide tiles cost 3 base registers and spilled 40 bytes more). Shared
 * memory as the 192 row: 181 KB double-buffered (sm_90), 133 KB single-
 * buffered (the row an sm_80 runs, as the 256 rows). ptxas (sm_90a, bf16
 * MASK): stages 2 253 registers, no spill; BWD_DET 216 bytes of spill
 * (the 192 row's 224; the 256 rows', which MLA ran on before, 336-516);
 * stages 1 20 bytes (BWD_DET 92). */
#ifndef FMHAI_TILES_SM80_BWD_192_128
#define FMHAI_TILES_SM80_BWD_192_128(Y, ...) Y(__VA_ARGS__, SM80,  64,   96,    6,     2) \
                                             Y(__VA_ARGS__, SM80,  64,   96,    6,     1)
#endif
/* hdim 32 and 96 (tile rows padded to 64 and 128 columns of shared memory,
 * FMHAI_ROWB). 32: as hdim 64 (128 x 128, 8 warps; accumulators 32 + 128
 * registers; 130 KB). 96: a row of 12 chunks needs 6 warps as at 192, so
 * 96 keys; one sweep (dK and dV 96 registers each, S^T 64: 160 of the
 * 192), 64 x 96 in 2 stages (127 KB). ptxas -v, sm_90a: 32 at 194-221
 * registers, no spills; 96 at 255 with 4-16 bytes of spill (BWD_DET 40-132,
 * as the hdim-128 BWD_DET rows' 64-116; 1 stage spills as much). Reasoned,
 * not yet tuned on a GPU. */
#ifndef FMHAI_TILES_SM80_BWD_32
#define FMHAI_TILES_SM80_BWD_32(Y, ...)   Y(__VA_ARGS__, SM80,   128,   128,    8,     2)
#define FMHAI_TILES_SM80_BWD_96(Y, ...)   Y(__VA_ARGS__, SM80,    64,    96,    6,     2)
#endif
/* the streaming stages: tile_m rows per block (tile_n, stages unused) */
#define FMHAI_TILES_SM80_BWD_AUX(Y, ...)  Y(__VA_ARGS__, SM80,    64,     0,    4,     1)

/* ---- AMD CDNA (gfx90a, gfx942): dq_dk_dv on MFMA (pipeline/bwd_mfma.h) -----
 * A wave (two warps) owns 32 keys of tile_n = 16 * warps and sweeps 32-query
 * slices; its rows take whole waves and a power-of-two tile_n (32, 64, 128;
 * fmhai_bwd_mfma_serves), the portable pipeline serves any other row. The
 * copies are synchronous on AMD, so one Q/dO buffer serves stages 1 or 2.
 * LDS (FMHAI_BWD_SMEM_BYTES): hdim 64 64 x 64 (two waves) 41 KB; hdim 128
 * 64 x 32 (one wave) 53 KB, as 64 x 64 would take 72 KB of the 64 KB; hdim
 * 256 64 x 32 101 KB, which only gfx950's 160 KB launch. clang-19, the
 * default backward set (tests/amd/check.sh, AMD_CHECK_BWD=1): every
 * dq_dk_dv kernel (BIAS rows included) on MFMA, 0 VGPR spills and 0
 * scratch on gfx90a and gfx942; hdim 64
 * about 110-140 VGPRs + 112 AGPRs (2 waves a SIMD), hdim 128 about 120-155 +
 * 176 (1 wave), hdim 256 256 + about 180-215 (1 wave). Compile-checked and
 * replayed on the host (tests/host/test_bwd_mfma_model.c); never run on an
 * AMD GPU. dot_do_o and convert_dq are the portable ones (no products). */
/*                                                     arch  tile_m tile_n warps stages */
#define FMHAI_TILES_GFX9_BWD_64(Y, ...)   Y(__VA_ARGS__, GFX9,    64,    64,    4,     1)
#define FMHAI_TILES_GFX9_BWD_128(Y, ...)  Y(__VA_ARGS__, GFX9,    64,    32,    2,     1)
#define FMHAI_TILES_GFX9_BWD_256(Y, ...)  Y(__VA_ARGS__, GFX9,    64,    32,    2,     1)
#define FMHAI_TILES_GFX9_BWD_AUX(Y, ...)  Y(__VA_ARGS__, GFX9,    64,     0,    4,     1)

/* ---- NVIDIA Hopper, wgmma pipeline (pipeline/bwd_sm90.h; sm_90a only) ------
 * Tried before the portable rows on an sm_90 device (the registry ranks
 * arch-specific pipelines first); hdim 256 has no row and stays portable.
 * Block shape fixed by the pipeline: 64 x 128, 12 warps (two MMA warpgroups
 * of 64 keys each and the dQ writer warpgroup), Q and dO double-buffered. */
#ifndef FMHAI_TILES_SM90A_BWD_64
/*                                                     arch   tile_m tile_n warps stages */
#define FMHAI_TILES_SM90A_BWD_64(Y, ...)  Y(__VA_ARGS__, SM90A,    64,   128,   12,     2)
#define FMHAI_TILES_SM90A_BWD_128(Y, ...) Y(__VA_ARGS__, SM90A,    64,   128,   12,     2)
#endif
#define FMHAI_BWD90_MAX_BM 64

#if defined(FMHA_PLATFORM_AMD)
#  define FMHAI_TILES_BWD_64(Y, ...)  FMHAI_TILES_GFX9_BWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_128(Y, ...) FMHAI_TILES_GFX9_BWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_256(Y, ...) FMHAI_TILES_GFX9_BWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_AUX(Y, ...) FMHAI_TILES_GFX9_BWD_AUX(Y, __VA_ARGS__)
/* no 192_128 rows: 133-181 KB of LDS, and the MFMA pipeline has no unequal
 * dims (the 256 rows serve MLA problems with V padded) */
#  define FMHAI_TILES_BWD_192_128(Y, ...)
#  define FMHAI_HDIM32_ROWS 0   /* no dq_dk_dv rows of head dim 32 or 96 */
#  define FMHAI_TILES_BWD_32(Y, ...)
#  define FMHAI_TILES_BWD_96(Y, ...)
#else
#  define FMHAI_TILES_BWD_32(Y, ...)  FMHAI_TILES_SM80_BWD_32(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_96(Y, ...)  FMHAI_TILES_SM80_BWD_96(Y, __VA_ARGS__)
#  define FMHAI_HDIM32_ROWS 1
#  define FMHAI_TILES_BWD_64(Y, ...)  FMHAI_TILES_SM90A_BWD_64(Y, __VA_ARGS__) \
                                      FMHAI_TILES_SM80_BWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_128(Y, ...) FMHAI_TILES_SM90A_BWD_128(Y, __VA_ARGS__) \
                                      FMHAI_TILES_SM80_BWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_256(Y, ...) FMHAI_TILES_SM80_BWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_192(Y, ...) FMHAI_TILES_SM80_BWD_192(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_AUX(Y, ...) FMHAI_TILES_SM80_BWD_AUX(Y, __VA_ARGS__)
#  define FMHAI_TILES_BWD_192_128(Y, ...) FMHAI_TILES_SM80_BWD_192_128(Y, __VA_ARGS__)
#endif

/* ---- workspace and splits ----------------------------------------------------
 * Deterministic mode gives each batch entry nsplits dq_acc slices; key tile
 * n adds into slice n % nsplits in chain order (tile order, reversed with a
 * mask: see fmhai_bwd_tile_of), and convert_dq sums the slices in slice
 * order. Without a mask, more slices mean shorter chains of key tiles
 * waiting on one another and a larger workspace: nsplits is the smallest
 * count that gives FMHAI_BWD_DET_BLOCKS (key-tile chains) over all KV heads
 * and batch entries, at most the key tiles and at most
 * FMHAI_BWD_MAX_SPLITS. With a mask nothing waits and nsplits is 1
 * (fmhai_bwd_nsplits). It depends on the problem only (not on the device),
 * so a workspace size is known on any host and results are reproducible
 * across devices. 16 chains: the blocks of a chain keep their key tile
 * from one (entry, KV head) to the next (fmhai_bwd_det_rows), so a chain
 * fills once a row, and each slice costs its zeroing and its share of
 * convert_dq's sum. Measured on an H200 (bench/RESULTS.md, session 31,
 * 16 and 32 units at 8k and 16k): one split against main's 4 and 8, +1-2%
 * at 8k and +3-5% at 16k; 512 or 2048 chains (16 splits) 8-50% slower. */
#ifndef FMHAI_BWD_DET_BLOCKS
#define FMHAI_BWD_DET_BLOCKS 16
#endif
#ifndef FMHAI_BWD_MAX_SPLITS
#define FMHAI_BWD_MAX_SPLITS 16
#endif
#define FMHAI_BWD_WS_ALIGN 256    /* every workspace region starts 256-aligned */

/* ---- shapes derived from a row ----------------------------------------------------
 * dQ = dS K is split over warps as WM (query rows) x WN (head-dim columns);
 * WM is the choice among 1, 2, 4, 8 that divides the row tiles and leaves
 * WN dividing the 16-column chunks, with the fewest shared-memory bytes per
 * step (rows/WM + hd/WN), ties to the smaller WM. */
#define FMHAI_BWD_WM_OK(bm, hd, w, wm)                                                \
    ((w) % (wm) == 0 && ((bm) / 16) % (wm) == 0 &&                                    \
     ((hd) / 16) % ((w) / (wm) > 0 ? (w) / (wm) : 1) == 0 && (w) / (wm) > 0)
#define FMHAI_BWD_WM_COST(bm, hd, w, wm) \
    (FMHAI_BWD_WM_OK(bm, hd, w, wm) ? (bm) / (wm) + (hd) / ((w) / (wm)) : (1 << 20))
#define FMHAI_BWD_DQ_WM(bm, hd, w)                                                     \
    (FMHAI_BWD_WM_COST(bm, hd, w, 1) <= FMHAI_BWD_WM_COST(bm, hd, w, 2) &&             \
     FMHAI_BWD_WM_COST(bm, hd, w, 1) <= FMHAI_BWD_WM_COST(bm, hd, w, 4) &&             \
     FMHAI_BWD_WM_COST(bm, hd, w, 1) <= FMHAI_BWD_WM_COST(bm, hd, w, 8) ? 1 :          \
     FMHAI_BWD_WM_COST(bm, hd, w, 2) <= FMHAI_BWD_WM_COST(bm, hd, w, 4) &&             \
     FMHAI_BWD_WM_COST(bm, hd, w, 2) <= FMHAI_BWD_WM_COST(bm, hd, w, 8) ? 2 :          \
     FMHAI_BWD_WM_COST(bm, hd, w, 4) <= FMHAI_BWD_WM_COST(bm, hd, w, 8) ? 4 : 8)
/* A warp's dQ block, rows x columns, is computed in column chunks of at most
 * 1024 accumulators (32 registers a lane). */
#define FMHAI_BWD_DQ_RW(bm, hd, w) ((bm) / FMHAI_BWD_DQ_WM(bm, hd, w))
#define FMHAI_BWD_DQ_CT(bm, hd, w) ((hd) / ((w) / FMHAI_BWD_DQ_WM(bm, hd, w)))
#define FMHAI_BWD_DQ_CW(bm, hd, w)                                                      \
    (FMHAI_BWD_DQ_CT(bm, hd, w) * FMHAI_BWD_DQ_RW(bm, hd, w) <= 1024                    \
         ? FMHAI_BWD_DQ_CT(bm, hd, w) : 1024 / FMHAI_BWD_DQ_RW(bm, hd, w))

/* Shared memory of dq_dk_dv: K, V [tn][hd]; Q, dO [stages][tm][hd] (rows
 * of FMHAI_ROWB(hd) bytes); dS^T [tn][tm] (16-bit); LSE and D [2][tm]
 * (fp32). */
#define FMHAI_BWD_SMEM_BYTES(hd, bm, bn, st) \
    ((2 * (bn) + 2 * (st) * (bm)) * FMHAI_ROWB(hd) + (bn) * (bm) * 2 + 4 * (bm) * 4)

/* Blocks per SM the registers must allow: one 8-warp block, two 4-warp ones. */
#define FMHAI_BWD_MIN_BLOCKS(w) ((w) >= 8 ? 1 : 8 / (w) > 2 ? 2 : 8 / (w))

/* Accumulator registers per lane: dV and dK (16 keys x hd each; one of them
 * at a time in the two-sweep mode above 128), and S^T and dP^T (16 x tm). */
#define FMHAI_BWD_ACC_REGS(hd, bm) (((hd) > 128 ? (hd) / 2 : (hd)) + (bm))

/* C(name, condition, message) over a dq_dk_dv row (hd, bm, bn, warps, stages). */
#define FMHAI_BWD_CONSTRAINTS(C, hd, bm, bn, w, st)                                        \
    C(bwd_hdim_32_64_96_128_192_256, FMHAI_HDIM_OK(hd) && ((hd) % 64 == 0 || FMHAI_HDIM32_ROWS), \
      "kernel head dim must be 32, 64, 96, 128, 192 or 256 (32 and 96: NVIDIA only)")     \
    C(bwd_warps_2_to_8, (w) >= 2 && (w) <= 8, "warps must be 2..8")                        \
    C(bwd_tile_n_16_keys_per_warp, (bn) == 16 * (w),                                       \
      "tile_n must be 16 * warps (each warp owns 16 keys)")                                \
    C(bwd_tile_m_64_or_128, (bm) == 64 || (bm) == 128, "tile_m must be 64 or 128")         \
    C(bwd_stages_1_or_2, (st) == 1 || (st) == 2, "stages must be 1 or 2")                  \
    C(bwd_threads_cover_row_chunks, (w) >= 1 && ((w) * 32) % ((hd) / 8) == 0,              \
      "warps*32 must be a multiple of hdim/8: each copy pass gives every thread one "      \
      "16-byte chunk of a row (hdim 192 needs 3 or 6 warps)")                              \
    C(bwd_threads_cover_tile_m, (w) * 32 >= (bm),                                          \
      "warps * 32 must be >= tile_m (one thread loads each row's LSE and D)")              \
    C(bwd_tiles_split_over_threads,                                                        \
      (w) >= 1 && ((bn) * (hd) / 8) % ((w) * 32) == 0 && ((bm) * (hd) / 8) % ((w) * 32) == 0, \
      "tile_m*hd/8 and tile_n*hd/8 must be multiples of the thread count")                 \
    C(bwd_dq_warp_split, (w) >= 1 && FMHAI_BWD_WM_COST(bm, hd, w, FMHAI_BWD_DQ_WM(bm, hd, w)) < (1 << 20) && \
      FMHAI_BWD_DQ_CW(bm, hd, w) % 16 == 0 && FMHAI_BWD_DQ_CT(bm, hd, w) % FMHAI_BWD_DQ_CW(bm, hd, w) == 0, \
      "no split of dQ over the warps into 16-row, 16-column blocks")                      \
    C(bwd_registers, FMHAI_BWD_ACC_REGS(hd, bm) <= 192,                                    \
      "accumulators (hd, or hd/2 above 128, plus tile_m) must stay <= 192 registers")      \
    C(bwd_shared_memory_227k, FMHAI_BWD_SMEM_BYTES(hd, bm, bn, st) <= 227 * 1024,         \
      "shared memory of the tile must fit in 227 KB")

/* C(...) over the V side of a dq_dk_dv row, hdv its V/O head dim (the row's
 * head dim unless it names two, e.g. 192_128); on top of the above. dV,
 * dP^T and D run over hdv columns of hd-wide V and dO tiles. */
#define FMHAI_BWD_HV_CONSTRAINTS(C, hd, hdv, bm, bn, w, st)                                \
    C(bwd_hdim_v_64_to_hdim, (hdv) == (hd) || ((hdv) % 64 == 0 && (hdv) >= 64 && (hdv) < (hd)), \
      "kernel hdim_v must be the head dim, or 64, 128 or 192 below it")

/* Who computes dQ in a dq_dk_dv row of the Hopper pipeline (pipeline/
 * bwd_sm90.h): at hdim 64 the third warpgroup, from a second dS^T tile
 * (the MMA warpgroups give it registers: 2 x 216 + 72 a thread, 128
 * threads each); at hdim 128 the MMA warpgroups need 240 registers (at
 * 232 ptxas serialised the no-bias rows' products; the BIAS rows run at
 * 232, FMHAI_BWD90_WREGS), and the hdim-64 BIAS rows spill
 * 132 bytes at 216 (5-7% slower), so there each MMA warpgroup computes
 * half of dQ and the third warpgroup, at 24, only adds the tiles
 * (bench/RESULTS.md, session 27). */
#define FMHAI_BWD90_DQW(hd, bias) ((hd) == 64 && !(bias))
/* Shared memory of a dq_dk_dv row of the Hopper pipeline: the portable
 * layout, 1024 bytes to align the swizzle atoms, then with FMHAI_BWD90_DQW
 * a second [tn][tm] dS^T tile, else two fp32 dQ tiles of FMHAI_BWD90_QS
 * floats a row, then the third warpgroup's records (288 bytes) and the
 * TMA mbarriers (32 bytes: three used). BIAS rows (bias 1) add the step's
 * [tm][tn] 16-bit bias tile; at hdim 128 that fits only with the dQ rows
 * unpadded (16-byte pieces swizzled by row instead, pipeline/bwd_sm90.h:
 * 231,744 of the 232,448 bytes); the other rows keep 8 floats of padding
 * a row (the swizzle's addresses cost the no-bias hdim-128 kernel 100-200
 * bytes of spill); at hdim 64 they add the dbias tiles
 * (FMHAI_BWD90_DBS). */
#define FMHAI_BWD90_QS(hd, bias) ((bias) && (hd) > 64 ? (hd) : (hd) + 8)
/* BIAS rows at hdim 64 stage dbias in shared memory (two fp32 [tm][tn]
 * tiles, pipeline/bwd_sm90.h: fmhai_bwd90_dbias_out); hdim 128 has no
 * room for them */
#define FMHAI_BWD90_DBS(hd, bias) ((bias) && (hd) == 64)
/* The third warpgroup's registers a thread (setmaxnreg; each MMA
 * warpgroup gets (504 - it) / 2: the three share the 168 x 384 the block
 * launches with): 72 for the dQ warpgroup, 56 for the hdim-64 BIAS rows'
 * writer (staged dbias rows), 40 at hdim 128 with a bias (the writer reads
 * dbias out of the dS^T tile: at 24 it spilled 90 bytes and ran 6-11%
 * slower, bench/RESULTS.md session 30), else 24 (the dQ adds only). */
#define FMHAI_BWD90_WREGS(hd, bias) \
    (FMHAI_BWD90_DQW(hd, bias) ? 72 : (bias) && (hd) == 64 ? 56 : (bias) ? 40 : 24)
#define FMHAI_BWD90_SMEM_BYTES(hd, bm, bn, st, bias)                                          \
    (FMHAI_BWD_SMEM_BYTES(hd, bm, bn, 2) + 1024 +                                               \
     (FMHAI_BWD90_DQW(hd, bias) ? (bn) * (bm) * 2 : 2 * (bm) * FMHAI_BWD90_QS(hd, bias) * 4) + 320 + \
     ((bias) ? (bm) * (bn) * 2 : 0) + (FMHAI_BWD90_DBS(hd, bias) ? 2 * (bm) * (bn) * 4 : 0))

/* C(...) over a dq_dk_dv row of the Hopper pipeline (on top of the above). */
#define FMHAI_BWD90_CONSTRAINTS(C, hd, bm, bn, w, st)                                      \
    C(bwd90_hdim_64_128, (hd) == 64 || (hd) == 128, "the wgmma pipeline has head dims 64 and 128") \
    C(bwd90_block_64x128_w12_s2, (bm) == 64 && (bn) == 128 && (w) == 12 && (st) == 2,       \
      "the wgmma pipeline's block is tile_m 64, tile_n 128, 12 warps, 2 stages")            \
    C(bwd90_shared_memory_227k, FMHAI_BWD90_SMEM_BYTES(hd, bm, bn, st, 0) <= 227 * 1024 &&              \
      FMHAI_BWD90_SMEM_BYTES(hd, bm, bn, st, 1) <= 227 * 1024,                                         \
      "shared memory of the tile (and of a BIAS row with its bias tile) must fit in 227 KB")

/* What the Hopper dq_dk_dv serves of what a plan does not fix (the run's
 * args), as S(name, condition, message) over the run: a call it fails runs
 * on the set's portable dq_dk_dv row with the plan's tile_n instead
 * (dispatch/bwd_dispatch.h, fmhai_bwd_run_entry), and the message says why.
 * Empty: it has dropout (drop), as the portable pipeline; any other
 * pipeline is taken to have none. */
#define FMHAI_BWD90_SERVES(S, drop)

/* C(...) over a dot_do_o / convert_dq row. */
#define FMHAI_BWD_AUX_CONSTRAINTS(C, hd, bm, bn, w, st)                                    \
    C(bwd_aux_hdim_32_64_96_128_192_256, FMHAI_HDIM_OK(hd),                                \
      "kernel head dim must be 32, 64, 96, 128, 192 or 256")                               \
    C(bwd_aux_warps_1_to_8, (w) >= 1 && (w) <= 8, "warps must be 1..8")                    \
    C(bwd_aux_tile_m, (bm) >= 8 && (bm) <= 256 && (bm) % 8 == 0,                           \
      "tile_m (rows per block) must be a multiple of 8 in 8..256")                         \
    C(bwd_aux_unused_columns, (bn) == 0 && (st) == 1, "tile_n must be 0 and stages 1")

/* NULL when the row is valid, else "constraint_name: message". aux: 1 a
 * dot_do_o or convert_dq row, 2 a dq_dk_dv row of the Hopper pipeline. */
static inline const char *fmhai_bwd_row_violation(int aux, int hd, int bm, int bn, int w, int st)
{
    if (aux == 2) {   /* a Hopper dq_dk_dv row */
        FMHAI_BWD90_CONSTRAINTS(FMHAI_CONSTRAINT_CHECK, hd, bm, bn, w, st)
    } else if (aux) {
        FMHAI_BWD_AUX_CONSTRAINTS(FMHAI_CONSTRAINT_CHECK, hd, bm, bn, w, st)
    } else {
        FMHAI_BWD_CONSTRAINTS(FMHAI_CONSTRAINT_CHECK, hd, bm, bn, w, st)
    }
    return 0;
}

/* The same for a row of V/O head dim hdv (hdv == hd: as above). */
static inline const char *fmhai_bwd_row_violation_hv(int aux, int hd, int hdv, int bm, int bn, int w, int st)
{
    if (hdv != hd) {
        if (aux == 2) return "bwd_hdim_v_portable: the wgmma pipeline has equal head dims";
        FMHAI_BWD_HV_CONSTRAINTS(FMHAI_CONSTRAINT_CHECK, hd, hdv, bm, bn, w, st)
    }
    return fmhai_bwd_row_violation(aux, hd, bm, bn, w, st);
}

#endif /* FMHA_TILE_POLICY_BWD_TILES_H */
