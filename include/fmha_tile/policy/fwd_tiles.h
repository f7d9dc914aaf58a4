/*
 * Forward tile policy: the tuned tile table of each arch, and the constraints
 * every forward row must meet.
 *
 * Tuned tables. One macro per (family, kernel head dim) lists the tuned rows
 * of every arch this platform compiles for, as aligned columns:
 *     Y(..., arch, tile_m, tile_n, warps, stages)
 * A kernel-set row whose tile/warp columns hold FMHA_ANY expands into these
 * rows (filtered by the columns it does give). To retune an arch, edit its
 * rows here; nothing else names tile sizes.
 *
 * Constraints. FMHAI_FWD_CONSTRAINTS is the single source: expanded once into
 * static asserts (an explicit row that breaks one stops the build with the
 * constraint's name) and once into fmhai_fwd_row_violation(), used at run time
 * by the registry and the JSON export.
 */
#ifndef FMHA_TILE_POLICY_FWD_TILES_H
#define FMHA_TILE_POLICY_FWD_TILES_H

#include "../tile/vt8_layout.h"   /* FMHAI_VT8_ROWB: the e4m3 V^T stage */

/* ---- NVIDIA, portable mma.sync pipeline (sm_80 and newer, Hopper included)
 * Chosen on an H100 SXM with bench/tune_fwd.cu (bf16, 16k tokens, hidden
 * 2048): 32 rows per warp (two MMA row tiles share each K/V fragment), two
 * blocks per SM; hdim 256 uses 16 rows per warp (its O accumulator alone
 * takes 128 registers). hdim 128 keeps the split K/V schedule (stages 1): it
 * beat the 2-stage ring by 5%. ptxas -v on sm_90a: no stack frame and no
 * spills, except 12 bytes in the hdim-128 NOMASK+ALIBI variants. */
/*                                                 arch  tile_m tile_n warps stages */
#define FMHAI_TILES_SM80_FWD_64(Y, ...)  Y(__VA_ARGS__, SM80,   128,    64,    4,     2)
#define FMHAI_TILES_SM80_FWD_128(Y, ...) Y(__VA_ARGS__, SM80,   128,    64,    4,     1)
#define FMHAI_TILES_SM80_FWD_256(Y, ...) Y(__VA_ARGS__, SM80,   128,    64,    8,     1)
/* hdim 192 and MLA's (192, 128): a Q row of 24 16-byte chunks needs a thread
 * count divisible by 24 (threads_cover_row_chunks), so 6 warps of 16 rows,
 * two blocks per SM (170 registers a thread). (192, 128): 64-key tiles on
 * the split schedule (76 KB); 192: its O accumulator takes 96 registers, so
 * 32-key tiles in a 2-stage ring (84 KB; 64-key tiles spilled 28 bytes).
 * ptxas -v on sm_90a: no spills, 163-168 registers. Not yet tuned on a GPU. */
#define FMHAI_TILES_SM80_FWD_192(Y, ...)     Y(__VA_ARGS__, SM80,    96,    32,    6,     2)
#define FMHAI_TILES_SM80_FWD_192_128(Y, ...) Y(__VA_ARGS__, SM80,    96,    64,    6,     1)
/* hdim 32 and 96 (the contiguous 16-bit forward; tile rows padded to 64
 * and 128 columns of shared memory, FMHAI_ROWB). 32: as hdim 64 (32 rows a
 * warp, Q kept in registers, 2 stages; 80 KB, two blocks per SM). 96: a row
 * of 12 chunks needs a thread count divisible by 12, so 6 warps as at 192;
 * 16 rows a warp (O 48 registers) so that two blocks fit an SM's registers
 * (32 rows a warp would hold 96 of O and one block of 6 warps), 64-key
 * tiles in a 2-stage ring (88 KB). ptxas -v, sm_90a: 32 at 210-254
 * registers, 96 at 157-168, no stack frame, no spills. Reasoned, not yet
 * tuned on a GPU. */
#ifndef FMHAI_TILES_SM80_FWD_32
/*                                                 arch  tile_m tile_n warps stages */
#define FMHAI_TILES_SM80_FWD_32(Y, ...)  Y(__VA_ARGS__, SM80,   128,    64,    4,     2)
#define FMHAI_TILES_SM80_FWD_96(Y, ...)  Y(__VA_ARGS__, SM80,    96,    64,    6,     2)
#endif

/* ---- NVIDIA Hopper, wgmma pipeline (pipeline/fwd_sm90.h; sm_90a only) ------
 * The contiguous forward (FWD rows) and 16-bit batch prefill (PREFILL and
 * PREFILL_VEC rows, both layouts, every page size: one kernel per variant,
 * each row's page looked up through a staged table); tried before the
 * portable rows on an sm_90 device (the registry ranks arch-specific
 * pipelines first). Block
 * shape fixed by the pipeline: 128 query rows on two MMA warpgroups of 64,
 * a load warpgroup (12 warps in all), key tiles of 128 in a 3-stage ring
 * (hdim 256: 64 in 2 stages, for registers and shared memory). The
 * contiguous forward at hdim 64 takes 192-row blocks of three MMA
 * warpgroups (16 warps, FMHAI_TILES_SM90A_FWDC3_64) below. */
#ifndef FMHAI_TILES_SM90A_FWD_64
/*                                                  arch   tile_m tile_n warps stages */
#define FMHAI_TILES_SM90A_FWD_64(Y, ...)  Y(__VA_ARGS__, SM90A,   128,   128,   12,     3)
#define FMHAI_TILES_SM90A_FWD_128(Y, ...) Y(__VA_ARGS__, SM90A,   128,   128,   12,     3)
#define FMHAI_TILES_SM90A_FWD_256(Y, ...) Y(__VA_ARGS__, SM90A,   128,    64,   12,     2)
#endif
/* The contiguous forward at hdim 256 takes key tiles of 80 (S as m64n80k16:
 * 2.5 KB of K a k-step against 2 KB of Q, where the S product of 64 keys
 * was bound by shared-memory reads; 2 stages fill 225 KB): +3-8% on the
 * H100 over 64 (bench/RESULTS.md), 36 bytes of spill at 232 registers.
 * Paged rows keep 64 (their page classes want a power-of-two tile). */
#ifndef FMHAI_TILES_SM90A_FWDC_256
#define FMHAI_TILES_SM90A_FWDC_256(Y, ...) Y(__VA_ARGS__, SM90A,  128,    80,   12,     2)
#endif
/* hdim 192 and DeepSeek MLA prefill's (192, 128), contiguous forward. (192,
 * 128): O is 128 wide, so registers are as at hdim 128; Q 48 KB, a stage
 * of 80 keys K 30 KB + V 20 KB: 3 stages (198 KB). Measured (H200, bf16,
 * bench_fwd --hdim 192 --hdim_v 128, 2k / 8k, non-causal and causal):
 * 128 x 80 in 3 stages 526-528 / 411 / 573-575 / 536 TFLOPS, 0.97-1.00 of
 * hdim 128 in the same run; 128 x 64 in 3 stages 520 / 418 / 562-572 /
 * 540; 128 x 128 in 2 stages (209 KB) 466 / 390 / 485-493 / 482. 192: O
 * takes 96 registers, so key tiles of 80 as at 256 (2 stages, 169 KB).
 * ptxas -v: no spills, no serialised or waited-for wgmma (C7512/C7517). */
#ifndef FMHAI_TILES_SM90A_FWDC_192
#define FMHAI_TILES_SM90A_FWDC_192(Y, ...)     Y(__VA_ARGS__, SM90A,  128,    80,   12,     2)
#define FMHAI_TILES_SM90A_FWDC_192_128(Y, ...) Y(__VA_ARGS__, SM90A,  128,    80,   12,     3)
#endif

/* Head dims 32 and 96 (the contiguous 16-bit forward): the hdim-128 block
 * (128 x 128, 3 stages). Their tiles keep 64-column panels of 128-byte
 * rows, the last one half empty (the padded kernels' shared memory: 208 and
 * 225 KB), so the loads are the padded kernels' (TMA boxes zero-fill past
 * d); the products shrink: S over 2 / 6 k-steps, P V as m64n32 / m64n96
 * (O 16 / 48 registers a thread). */
#ifndef FMHAI_TILES_SM90A_FWD_32
/*                                                  arch   tile_m tile_n warps stages */
#define FMHAI_TILES_SM90A_FWD_32(Y, ...)  Y(__VA_ARGS__, SM90A,   128,   128,   12,     3)
#define FMHAI_TILES_SM90A_FWD_96(Y, ...)  Y(__VA_ARGS__, SM90A,   128,   128,   12,     3)
#endif

/* Elementwise-bias forward rows (BIAS column) of the Hopper pipeline: the
 * load warpgroup copies each key tile's [BM][BN] 16-bit bias tile by TMA
 * into a slot beside its K/V stage (32 KB at BN 128), so hdim 128 keeps 2
 * stages (Q 32 + 2 x (K 32 + V 32 + bias 32) KB); hdim 64 keeps 3. hdim 256
 * has no Hopper bias row (FMHAI_FWD90_SERVES). */
#ifndef FMHAI_TILES_SM90A_FWDB_64
/*                                                   arch   tile_m tile_n warps stages */
#define FMHAI_TILES_SM90A_FWDB_64(Y, ...)  Y(__VA_ARGS__, SM90A,   128,   128,   12,     3)
#define FMHAI_TILES_SM90A_FWDB_128(Y, ...) Y(__VA_ARGS__, SM90A,   128,   128,   12,     2)
#endif

/* FP8 (e4m3) rows of the Hopper pipeline: Q, K and V in e4m3, both products
 * e4m3 wgmma (k32), O in bf16; V^T takes 128-byte rows up to 128 keys
 * (tile/vt8_layout.h). Key tiles as the 16-bit rows: hdim 256 at 128 keys
 * in 3 stages does not fit (288 KB), and paged its per-page descales leave
 * the MMA warpgroups 224 registers. A head dim up to 128 runs the 128
 * kernel (an e4m3 row of 64 bytes has no 128-byte swizzle). These are the
 * batch prefill rows (FP8X, e4m3 pages: their page classes want a
 * power-of-two tile); each also has a kernel for bf16 queries, the 16-bit
 * pipeline on the same tile in FMHAI_FWD90_MIX_ST stages (below). */
/* The contiguous 16-bit forward at hdim 64: 192 query rows on three MMA
 * warpgroups (16 warps, 160 registers each), whose softmax is long against
 * its products (64 columns), so a third warpgroup keeps the tensor cores
 * busy: +10-28% over 128 rows on an H200 once each warpgroup waits for its
 * stage by itself (an mbarrier; bench/RESULTS.md, session 13), and the
 * DROPOUT rows' twin +6-10% over 128 rows on an H100 (session 14). Not
 * with a soft cap (its tanh spills 28-36 bytes at 160 registers), nor
 * batch prefill, which keep 128 rows. */
#ifndef FMHAI_TILES_SM90A_FWDC3_64
/*                                                   arch   tile_m tile_n warps stages */
#define FMHAI_TILES_SM90A_FWDC3_64(Y, ...) Y(__VA_ARGS__, SM90A,   192,   128,   16,     3)
#endif

#ifndef FMHAI_TILES_SM90A_FP8FWD_128
/*                                                     arch   tile_m tile_n warps stages */
#define FMHAI_TILES_SM90A_FP8FWD_128(Y, ...) Y(__VA_ARGS__, SM90A,   128,   128,   12,     3)
#define FMHAI_TILES_SM90A_FP8FWD_256(Y, ...) Y(__VA_ARGS__, SM90A,   128,    64,   12,     3)
#endif
/* The contiguous e4m3 forward at hdim 128 (and the head dims below it, run
 * on the 128 kernel) takes key tiles of 192, as FlashAttention-3's FP8 rows
 * take 176-224 keys at hdim 128, to spread each tile's fixed costs (O
 * rescale, row-max shuffles, barriers, wgmma fences) over more keys: S as
 * m64n192k32 (96 registers), V^T's keys 128..191 in a 64-byte-swizzled
 * panel of 64-byte rows (24 KB a stage), so 3 stages fit (Q 16 + 3 x (K 24
 * + V^T 24) + 2 staging tiles x 24 = 208 KB). A 192-key row in 2 stages
 * (V^T in two 128-byte panels, 232 KB for 3) measured +3-6% over 128 keys in
 * 2 stages, the third stage being worth 25-30% (bench/RESULTS.md). In 3
 * stages against 128 keys in 3 (H200, same call): 8k / 16k +5-7% without a
 * mask, +2-6% causal; 2k +0.5%, causal -2% (the diagonal tile wastes more
 * keys). A build may predefine the macro (e.g. the 128-key row, to compare). */
#ifndef FMHAI_TILES_SM90A_FP8FWDC_128
/*                                                      arch   tile_m tile_n warps stages */
#define FMHAI_TILES_SM90A_FP8FWDC_128(Y, ...) Y(__VA_ARGS__, SM90A,   128,   192,   12,     3)
#endif
/* The contiguous e4m3 forward at hdim 256 takes key tiles of 128 in 2
 * stages (FlashAttention-3's FP8 shape: Q 32 + 2 x (K 32 + V^T 32) + 2
 * staging tiles x 32 = 224 KB), with the MMA warpgroups at 240 registers
 * (S 64 + O 128 + P 16 live across a turn; at 232 ptxas serialised the
 * products) and the load warpgroup at 24. K and V^T are handed over apart
 * (fmhai_fwd90_split_sync): with one hand-off a tile's S waited for the V
 * transpose, which waits for the other warpgroup's P V two tiles back. */
#ifndef FMHAI_TILES_SM90A_FP8FWDC_256
/*                                                      arch   tile_m tile_n warps stages */
#define FMHAI_TILES_SM90A_FP8FWDC_256(Y, ...) Y(__VA_ARGS__, SM90A,   128,   128,   12,     2)
#endif

/* FP8 (e4m3) KV batch prefill rows: the landing tiles and the decode add
 * registers and shared memory, so these have their own rows. Chosen on an
 * H100 with bench/bench_prefill.cu --fp8_vs_bf16 (a tuning build may
 * predefine them). */
#ifndef FMHAI_TILES_SM80_FP8_64
/*                                                 arch  tile_m tile_n warps stages */
#define FMHAI_TILES_SM80_FP8_64(Y, ...)  Y(__VA_ARGS__, SM80,   128,    64,    4,     2)
#define FMHAI_TILES_SM80_FP8_128(Y, ...) Y(__VA_ARGS__, SM80,   128,    64,    4,     1)
#define FMHAI_TILES_SM80_FP8_256(Y, ...) Y(__VA_ARGS__, SM80,   128,    64,    8,     1)
#endif

/* ---- decode rows (DECODE families): the portable pipeline with packed GQA
 * rows and the split-KV epilogue. One warp per block and 16 rows (the query
 * heads of a KV head, times the query rows): decode reads K/V once per KV
 * head and is bound by memory, so small blocks that fit several per SM keep
 * more copies in flight than wide ones. Key tiles of 32 (one staging
 * thread per row for small pages and fp8 descales) in a 3-stage ring;
 * VECTORIZED pages need 64-key tiles, so two warps (32 rows). A starting
 * point until the decode benchmark tunes it (bench/RESULTS.md). */
#ifndef FMHAI_TILES_SM80_DEC_64
/*                                                  arch  tile_m tile_n warps stages */
#define FMHAI_TILES_SM80_DEC_64(Y, ...)   Y(__VA_ARGS__, SM80,   16,     32,    1,     3)
#define FMHAI_TILES_SM80_DEC_128(Y, ...)  Y(__VA_ARGS__, SM80,   16,     32,    1,     3)
#define FMHAI_TILES_SM80_DEC_256(Y, ...)  Y(__VA_ARGS__, SM80,   16,     32,    1,     3)
#define FMHAI_TILES_SM80_DECV_64(Y, ...)  Y(__VA_ARGS__, SM80,   32,     64,    2,     2)
#define FMHAI_TILES_SM80_DECV_128(Y, ...) Y(__VA_ARGS__, SM80,   32,     64,    2,     2)
#define FMHAI_TILES_SM80_DECV_256(Y, ...) Y(__VA_ARGS__, SM80,   32,     64,    2,     2)
#endif

/* ---- AMD CDNA (gfx90a, gfx942; compile-checked, never run on an AMD GPU) --
 * The 16-bit forward and batch prefill rows run the MFMA pipeline
 * (pipeline/fwd_mfma.h): warps count 32-lane units, so 4 warps are two
 * wave64s of 32 query rows each (tile_m = 16 * warps), key tiles and head
 * dims in 32s. Block LDS stays within 64 KB (Q + one K and one V slot:
 * 24, 48 and 64 KB, for every page class and for FP8 KV too). FP8-KV
 * prefill and decode run the same pipeline (e4m3 tiles decoded to f16 in
 * LDS). tests/amd/check.sh (AMD_CHECK_FULL=1): the default forward,
 * prefill (16-bit and FP8 KV) and decode sets at 0 spills and 0 scratch on
 * both archs (hdim 128 at 230-256 VGPRs under the 2-waves-per-SIMD bound,
 * hdim 256 at 1 wave with 128-177 AGPRs) but the VECTORIZED hdim-256 rows:
 * prefill has none (64-key tiles there need 96 KB) and decode's (the 64-key
 * hdim-128 tile) need 96 KB, which only gfx950 has (160 KB). */
/*                                                 arch  tile_m tile_n warps stages */
#define FMHAI_TILES_GFX9_FWD_64(Y, ...)  Y(__VA_ARGS__, GFX9,   64,     64,    4,     1)
#define FMHAI_TILES_GFX9_FWD_128(Y, ...) Y(__VA_ARGS__, GFX9,   64,     64,    4,     1)
#define FMHAI_TILES_GFX9_FWD_256(Y, ...) Y(__VA_ARGS__, GFX9,   64,     32,    4,     1)

/* The rows a wildcard expands into on this platform (FWD: fp16/bf16 rows of
 * the prefill families; FWDX: the same, Hopper rows first; FWDC: the
 * contiguous forward's, Hopper rows first (hdim 256: key tiles of 80);
 * FP8: e4m3-KV prefill rows; FP8X: the same, the Hopper e4m3 rows first
 * (they serve e4m3 queries); FP8FWDC: the contiguous e4m3 forward, Hopper
 * only (hdim 128: key tiles of 192)), and the
 * arch an explicit row is built for. */
#if defined(FMHA_PLATFORM_AMD)
#  define FMHAI_TILES_FP8_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8_256(Y, ...) FMHAI_TILES_GFX9_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWD_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWD_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWD_256(Y, ...) FMHAI_TILES_GFX9_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDX_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDX_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDX_256(Y, ...) FMHAI_TILES_GFX9_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC_256(Y, ...) FMHAI_TILES_GFX9_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_256(Y, ...) FMHAI_TILES_GFX9_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_256(Y, ...) FMHAI_TILES_GFX9_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8FWDC_128(Y, ...)
#  define FMHAI_TILES_FP8FWDC_256(Y, ...)
#  define FMHAI_TILES_FP8X_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8X_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8X_256(Y, ...) FMHAI_TILES_GFX9_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_DEC_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_DEC_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_DEC_256(Y, ...) FMHAI_TILES_GFX9_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_DECV_64(Y, ...)  FMHAI_TILES_GFX9_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_DECV_128(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_DECV_256(Y, ...) FMHAI_TILES_GFX9_FWD_128(Y, __VA_ARGS__)
/* head dims 32 and 96: no AMD rows (a wildcard row says "no tuned row") */
#  define FMHAI_TILES_FWDC_32(Y, ...)
#  define FMHAI_TILES_FWDC_96(Y, ...)
#  define FMHAI_TILES_FWDCB_32(Y, ...)
#  define FMHAI_TILES_FWDCB_96(Y, ...)
#  define FMHAI_TILES_FWDCD_32(Y, ...)
#  define FMHAI_TILES_FWDCD_96(Y, ...)
#  define FMHAI_EXPLICIT_ARCH GFX9
#else
#  define FMHAI_TILES_FP8_64(Y, ...)  FMHAI_TILES_SM80_FP8_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8_128(Y, ...) FMHAI_TILES_SM80_FP8_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8_256(Y, ...) FMHAI_TILES_SM80_FP8_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWD_64(Y, ...)  FMHAI_TILES_SM80_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWD_128(Y, ...) FMHAI_TILES_SM80_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWD_256(Y, ...) FMHAI_TILES_SM80_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDX_64(Y, ...)  FMHAI_TILES_SM90A_FWD_64(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDX_128(Y, ...) FMHAI_TILES_SM90A_FWD_128(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDX_256(Y, ...) FMHAI_TILES_SM90A_FWD_256(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC_64(Y, fam, dt, hd, mask, sc, ...) \
    FMHAI_CAT(FMHAI_TILES_FWDC64_, sc)(Y, fam, dt, hd, mask, sc, __VA_ARGS__)
#  define FMHAI_TILES_FWDC64_NOSOFTCAP(Y, ...) FMHAI_TILES_SM90A_FWDC3_64(Y, __VA_ARGS__) \
                                              FMHAI_TILES_SM80_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC64_SOFTCAP(Y, ...) FMHAI_TILES_FWDX_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC_128(Y, ...) FMHAI_TILES_FWDX_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC_256(Y, ...) FMHAI_TILES_SM90A_FWDC_256(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_64(Y, ...)  FMHAI_TILES_SM90A_FWDB_64(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_128(Y, ...) FMHAI_TILES_SM90A_FWDB_128(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_256(Y, ...) FMHAI_TILES_SM80_FWD_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_192(Y, ...) FMHAI_TILES_SM80_FWD_192(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_192_128(Y, ...) FMHAI_TILES_SM80_FWD_192_128(Y, __VA_ARGS__)
/* head dims 192 and (192, 128): the contiguous forward only */
#  define FMHAI_TILES_FWDC_192(Y, ...) FMHAI_TILES_SM90A_FWDC_192(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_192(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC_192_128(Y, ...) FMHAI_TILES_SM90A_FWDC_192_128(Y, __VA_ARGS__) \
                                           FMHAI_TILES_SM80_FWD_192_128(Y, __VA_ARGS__)
/* head dims 32 and 96: the contiguous 16-bit forward, a wgmma and a
 * portable row; BIAS and DROPOUT rows portable only (bias and dropout are
 * run-time there) */
#  define FMHAI_TILES_FWDC_32(Y, ...)  FMHAI_TILES_SM90A_FWD_32(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_32(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDC_96(Y, ...)  FMHAI_TILES_SM90A_FWD_96(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FWD_96(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_32(Y, ...) FMHAI_TILES_SM80_FWD_32(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCB_96(Y, ...) FMHAI_TILES_SM80_FWD_96(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_32(Y, ...) FMHAI_TILES_SM80_FWD_32(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_96(Y, ...) FMHAI_TILES_SM80_FWD_96(Y, __VA_ARGS__)
/* DROPOUT rows: the wgmma kernel alone at hdim 64, on 192 rows as the
 * plain rows without a soft cap (the portable one takes dropout at run
 * time in its plain rows); as the plain rows elsewhere */
#  define FMHAI_TILES_FWDCD_64(Y, ...)  FMHAI_TILES_SM90A_FWDC3_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_128(Y, ...) FMHAI_TILES_FWDC_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_256(Y, ...) FMHAI_TILES_FWDC_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_192(Y, ...) FMHAI_TILES_FWDC_192(Y, __VA_ARGS__)
#  define FMHAI_TILES_FWDCD_192_128(Y, ...) FMHAI_TILES_FWDC_192_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8FWDC_128(Y, ...) FMHAI_TILES_SM90A_FP8FWDC_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8FWDC_256(Y, ...) FMHAI_TILES_SM90A_FP8FWDC_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8X_64(Y, ...)  FMHAI_TILES_SM80_FP8_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8X_128(Y, ...) FMHAI_TILES_SM90A_FP8FWD_128(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FP8_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_FP8X_256(Y, ...) FMHAI_TILES_SM90A_FP8FWD_256(Y, __VA_ARGS__) \
                                       FMHAI_TILES_SM80_FP8_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_DEC_64(Y, ...)  FMHAI_TILES_SM80_DEC_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_DEC_128(Y, ...) FMHAI_TILES_SM80_DEC_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_DEC_256(Y, ...) FMHAI_TILES_SM80_DEC_256(Y, __VA_ARGS__)
#  define FMHAI_TILES_DECV_64(Y, ...)  FMHAI_TILES_SM80_DECV_64(Y, __VA_ARGS__)
#  define FMHAI_TILES_DECV_128(Y, ...) FMHAI_TILES_SM80_DECV_128(Y, __VA_ARGS__)
#  define FMHAI_TILES_DECV_256(Y, ...) FMHAI_TILES_SM80_DECV_256(Y, __VA_ARGS__)
#  define FMHAI_EXPLICIT_ARCH SM80
#endif

/* FP8 forward rows with a BIAS or DROPOUT column take the e4m3 forward's
 * tables (an fp8 problem with a bias or dropout is refused at run time:
 * fmhai_fwd_check). */
#define FMHAI_TILES_FP8FWDCB_128(Y, ...) FMHAI_TILES_FP8FWDC_128(Y, __VA_ARGS__)
#define FMHAI_TILES_FP8FWDCB_256(Y, ...) FMHAI_TILES_FP8FWDC_256(Y, __VA_ARGS__)
#define FMHAI_TILES_FP8FWDCD_128(Y, ...) FMHAI_TILES_FP8FWDC_128(Y, __VA_ARGS__)
#define FMHAI_TILES_FP8FWDCD_256(Y, ...) FMHAI_TILES_FP8FWDC_256(Y, __VA_ARGS__)

/* Per-arch pieces of a forward row: the pipeline's name, its shared memory
 * and the blocks per SM it is built for, and the page classes a wildcard
 * page column builds. The Hopper pipeline aligns its tiles to 1024 bytes
 * (swizzle atoms), stages the page indices of two tiles and runs one block
 * per SM; it serves every page size with one kernel, so of a wildcard page
 * column's classes it builds the smallest (page 1; the others are left
 * disabled, empty). */
#define FMHAI_FWD_PIPE_SM80 "portable_mma"
#define FMHAI_FWD_PIPE_GFX9 "portable_mma"
#define FMHAI_FWD_PIPE_SM90A "wgmma"
#define FMHAI_FWD_SMEM_SM80(hd, hdv, bm, bn, st, pg, vec, kv8) FMHAI_KERNEL_SMEM_BYTES(hd, hdv, bm, bn, st, pg, vec, kv8)
/* GFX9 rows run the MFMA pipeline (pipeline/fwd_mfma.h; FMHAI_FWD_CHECKS_GFX9
 * admits no other shape; unequal head dims never reach it): Q and one K and
 * one V slot, whatever the pages (looked up per row) and the KV type (e4m3
 * tiles decode into the 16-bit slots; their descales sit in the Q tile
 * while Q is in registers). */
#define FMHAI_FWD_SMEM_GFX9(hd, hdv, bm, bn, st, pg, vec, kv8) (((bm) + 2 * (bn)) * (hd) * 2)
/* Hopper: the tiles (fp8: Q, K stages, V^T stages of FMHAI_VT8_ROWB(bn)
 * bytes a d row (128-byte rows, + 64-byte rows for keys 128..191:
 * tile/vt8_layout.h), two V staging tiles), 128 bytes of mbarriers and
 * 1024 of alignment, the e4m3 ones of FMHAI_FWD90_ONES_BYTES, paged: the
 * row pages (16-bit:
 * [2][bn] int32; fp8: [3][bn] int32, descales [3][K,V][bn] and V references
 * [3][4] fp32). */
#define FMHAI_FWD_SMEM_SM90A(hd, hdv, bm, bn, st, pg, vec, kv8)                             \
    (((kv8) ? ((bm) + (st) * (bn) + 2 * (bn)) * (hd) +                                        \
                  (st) * FMHAI_FWD90_VT8_STAGE(hd, bn, FMHAI_FWD90_VFOLD(hd, st, pg, kv8))        \
            : FMHAI_FWD_SMEM_BYTES(hd, hdv, bm, bn, st)) + 1152 +                            \
     ((pg) > 0 ? ((kv8) ? 4 * (9 * (bn) + 12) : 2 * 4 * (bn)) : 0) +                          \
     FMHAI_FWD90_ONES_BYTES(hd, st, pg, kv8))
/* An e4m3 paged row also serves bf16 queries with a kernel of its own (MIX,
 * pipeline/fwd_sm90.h; dispatch/kernel_set.h): the 16-bit pipeline's layout
 * in MIX_ST stages, the row's 3 at hdim 128 (226 KB; 2 ran 20% slower) and
 * 2 at 256 (three would take 256 KB). A build may predefine it. */
#ifndef FMHAI_FWD90_MIX_ST
#define FMHAI_FWD90_MIX_ST(hd, st) ((hd) > 128 ? 2 : (st))
#endif
#define FMHAI_FWD90_SMEM_Q16(hd, hdv, bm, bn, st, pg) \
    FMHAI_FWD_SMEM_SM90A(hd, hdv, bm, bn, FMHAI_FWD90_MIX_ST(hd, st), pg, 0, 0)
/* VFOLD: the contiguous e4m3 hdim-128 rows, whose V^T stages hold 8 rows
 * of e4m3 ones after V^T's 128 in each panel (tile/vt8_layout.h), so that
 * P V is one m64n136 product a k-step whose last 8 columns are P's row
 * sums (QSUM below, pipeline/fwd_sm90.h; three stages or more: the
 * two-stage rows' V^T given takes a third stage where the staging tiles
 * are); a stage rounded up to the 1024 bytes of a swizzle atom: 17 KB at
 * 128 keys, 26 at 192 (was 16 and 24). */
#define FMHAI_FWD90_VFOLD(hd, st, pg, kv8) ((kv8) && (pg) == 0 && (hd) == 128 && (st) >= 3)
#define FMHAI_FWD90_VT8_STAGE(hd, bn, fold) \
    ((fold) ? (((hd) + 8) * FMHAI_VT8_ROWB(bn) + 1023) / 1024 * 1024 : (hd) * FMHAI_VT8_ROWB(bn))
/* the contiguous e4m3 hdim-256 row of 2 stages: 256 bytes of e4m3 ones
 * after its staging tiles (P's row sums on the tensor cores where
 * FMHAI_FWD90_QSUM_ON, QSUM in pipeline/fwd_sm90.h) */
#define FMHAI_FWD90_ONES_BYTES(hd, st, pg, kv8) (((kv8) && (pg) == 0 && (hd) == 256 && (st) == 2) ? 256 : 0)
/* QSUM, the rule in one place (the pipeline's QSUM and the kernel info's
 * p8_qsum read it): those rows (the hdim-256 row of ONES_BYTES, the VFOLD
 * rows) without a soft cap take the lazy running max
 * and divides O by the sum of the rounded P (pipeline/fwd_sm90.h says why).
 * On by default; a build may define FMHAI_FWD90_QSUM_ON to 0. */
#ifndef FMHAI_FWD90_QSUM_ON
#define FMHAI_FWD90_QSUM_ON 1
#endif
#define FMHAI_FWD90_QSUM_ROW(hd, st, pg, kv8, sc) \
    (FMHAI_FWD90_QSUM_ON && (FMHAI_FWD90_ONES_BYTES(hd, st, pg, kv8) > 0 || FMHAI_FWD90_VFOLD(hd, st, pg, kv8)) && !(sc))
/* A row's shared memory with its bias column (bias 1: a BIAS row): the
 * Hopper pipeline adds a [BM][BN] 16-bit bias slot a stage where it
 * carries the bias (the 16-bit contiguous forward up to hdim 128). */
#define FMHAI_FWD90_HAS_BIAS_SMEM(hd, pg, kv8, bias) ((bias) && !(kv8) && (pg) == 0 && (hd) <= 128)
#define FMHAI_FWD_XSMEM_SM80(hd, hdv, bm, bn, st, pg, vec, kv8, bias) \
    FMHAI_FWD_SMEM_SM80(hd, hdv, bm, bn, st, pg, vec, kv8)
#define FMHAI_FWD_XSMEM_GFX9(hd, hdv, bm, bn, st, pg, vec, kv8, bias) \
    FMHAI_FWD_SMEM_GFX9(hd, hdv, bm, bn, st, pg, vec, kv8)
#define FMHAI_FWD_XSMEM_SM90A(hd, hdv, bm, bn, st, pg, vec, kv8, bias) \
    (FMHAI_FWD_SMEM_SM90A(hd, hdv, bm, bn, st, pg, vec, kv8) +         \
     (FMHAI_FWD90_HAS_BIAS_SMEM(hd, pg, kv8, bias) ? (st) * (bm) * (bn) * 2 : 0))
#define FMHAI_FWD_MINB_SM80(hd, bm, w) FMHAI_FWD_MIN_BLOCKS(hd, bm, w)
#define FMHAI_FWD_MINB_GFX9(hd, bm, w) FMHAI_FWD_MIN_BLOCKS(hd, bm, w)
#define FMHAI_FWD_MINB_SM90A(hd, bm, w) 1
#define FMHAI_PAGES_OK_SM80(upg, pg) 1
#define FMHAI_PAGES_OK_GFX9(upg, pg) 1
#define FMHAI_PAGES_OK_SM90A(upg, pg) ((upg) != FMHA_ANY || (pg) <= 1)

/* Blocks per SM the compiler must fit in registers (__launch_bounds__).
 * Rows-per-warp x head dim (hd: the O accumulator's, hdim_v) of 256 (e.g.
 * 32 x 128, 16 x 256) needs the whole 255-register budget; smaller ones aim
 * at 256 query rows per SM. */
#define FMHAI_FWD_MIN_BLOCKS(hd, bm, w) \
    (((bm) / (16 * (w))) * (hd) >= 256 || (w) < 4 ? 1 : ((bm) >= 256 ? 1 : 256 / (bm)))

/* How the pipeline reads K/V (fmhai_block_load_kv), from a row's page column
 * pg (smallest page size served, 0: not paged) and tile_n:
 *   0  contiguous rows (forward)
 *   1  pages of any size: each row's byte offset staged in shared memory one
 *      tile ahead
 *   2  pages that are multiples of the tile: one page index per tile
 *   3  pages of at least FMHAI_PAGE_RUN tokens, smaller than the tile: one
 *      page index per run of FMHAI_PAGE_RUN rows, copied into shared memory
 *      (cp.async) a tile or more ahead of the tile's K/V copies
 * LINEAR and VECTORIZED pages use the same classes. */
#define FMHAI_PAGE_RUN 16
#define FMHAI_PAGING(pg, bn) \
    ((pg) == 0 ? 0 : (pg) % (bn) == 0 ? 2 : (pg) < FMHAI_PAGE_RUN ? 1 : 3)

/* Bytes of one row of a 16-bit [rows][hd] tile in shared memory: whole
 * 128-byte lines (the mma.sync pipelines swizzle 16-byte chunks with row % 8
 * inside a line, the wgmma ones use 64-column blocks), so head dims 32 and
 * 96 take the rows of 64 and 128 (tile/smem_layout.h). */
#define FMHAI_ROWB(hd) ((((hd) + 63) / 64) * 128)

/* Shared memory of the portable forward pipeline: Q tile + stages of K and V
 * (16-bit; K rows hd wide, V rows hdv; rows of FMHAI_ROWB bytes). Paged kernels add: class 1, the staged row offsets [2][K,V][bn]
 * int64; class 3, the staged run page indices [4][8] int32 (4 tiles in
 * flight at most, 8 runs of a 128-key tile); fp8 KV (whose e4m3 K and V
 * tiles take the 16-bit slots), the per-page descales [4][K,V][bn] fp32 and
 * the query rows' scales [bm] fp32; VECTORIZED pages, the V^T stages'
 * mbarriers [4] (the decode's bulk copies). */
#define FMHAI_FWD_SMEM_BYTES(hd, hdv, bm, bn, st) \
    ((bm) * FMHAI_ROWB(hd) + (st) * (bn) * (FMHAI_ROWB(hd) + FMHAI_ROWB(hdv)))
#define FMHAI_PAGE_SMEM_BYTES(paging, bn) ((paging) == 1 ? 32 * (bn) : (paging) == 3 ? 4 * 8 * 4 : 0)
#define FMHAI_KERNEL_SMEM_BYTES(hd, hdv, bm, bn, st, pg, vec, kv8)                            \
    (FMHAI_FWD_SMEM_BYTES(hd, hdv, bm, bn, st) + FMHAI_PAGE_SMEM_BYTES(FMHAI_PAGING(pg, bn), bn) + \
     ((kv8) ? 32 * (bn) + 4 * (bm) : (vec) ? 32 : 0))

/* Batch prefill reuses the forward tile rows; a wildcard page column expands
 * into these page-size classes, per family. A kernel built for page size P
 * serves every power-of-two page size >= P and selection takes the largest P
 * that fits, so with 64-key tiles pages 1..8 run class 1 (VECTORIZED pages
 * start at 8), 16..32 class 3, 64 and up class 2.
 * (A tuning build may predefine them.) */
#ifndef FMHAI_TUNED_PAGES_PREFILL
#define FMHAI_TUNED_PAGES_PREFILL(Z, ...)     Z(__VA_ARGS__, 1) Z(__VA_ARGS__, 16) Z(__VA_ARGS__, 64)
#endif
#ifndef FMHAI_TUNED_PAGES_PREFILL_VEC
#define FMHAI_TUNED_PAGES_PREFILL_VEC(Z, ...) Z(__VA_ARGS__, 1) Z(__VA_ARGS__, 16) Z(__VA_ARGS__, 64)
#endif
/* Decode: page 0 is the contiguous cache; with 32-key tiles pages 1..8 run
 * class 1, 16 class 3, 32 and up class 2 (VECTORIZED, 64-key tiles: 8
 * class 1, 16..32 class 3, 64 and up class 2). */
#ifndef FMHAI_TUNED_PAGES_DECODE
#define FMHAI_TUNED_PAGES_DECODE(Z, ...) Z(__VA_ARGS__, 0) Z(__VA_ARGS__, 1) Z(__VA_ARGS__, 16) Z(__VA_ARGS__, 32)
#endif
#ifndef FMHAI_TUNED_PAGES_DECODE_VEC
#define FMHAI_TUNED_PAGES_DECODE_VEC(Z, ...) Z(__VA_ARGS__, 1) Z(__VA_ARGS__, 16) Z(__VA_ARGS__, 64)
#endif

/* Kernel head dims: multiples of 64 up to 256, and 32 and 96 (their tile
 * rows pad to 64 and 128 columns of shared memory, FMHAI_ROWB; NVIDIA
 * only: the MFMA pipelines have no such rows, FMHAI_FWD_CHECKS_GFX9). */
#define FMHAI_HDIM_OK(hd) \
    ((hd) == 32 || (hd) == 64 || (hd) == 96 || (hd) == 128 || (hd) == 192 || (hd) == 256)

/* C(name, condition, message) over a row's (hd, hdv, bm, bn, warps, stages,
 * page, vectorized, fp8 KV); hd is the Q/K head dim, hdv the V/O one (equal
 * but for rows such as 192_128), page is 0 for families without a paged KV
 * cache, vectorized 1 for VECTORIZED KV pages, kv8 1 for e4m3 KV. */
#define FMHAI_FWD_CONSTRAINTS(C, hd, hdv, bm, bn, w, st, pg, vec, kv8)                     \
    C(hdim_32_64_96_128_192_256, FMHAI_HDIM_OK(hd),                                        \
      "kernel head dim must be 32, 64, 96, 128, 192 or 256")                               \
    C(hdim_v_to_hdim, FMHAI_HDIM_OK(hdv) && (hdv) <= (hd),                                 \
      "kernel hdim_v must be 32, 64, 96, 128, 192 or 256 and at most the head dim")        \
    C(hdim_32_96_contiguous_16bit, ((hd) % 64 == 0 && (hdv) % 64 == 0) || ((pg) == 0 && !(vec) && !(kv8)), \
      "head dims 32 and 96 take contiguous 16-bit K/V (FWD rows)")                         \
    C(hdim_v_below_hdim_contiguous_16bit, (hdv) == (hd) || ((pg) == 0 && !(vec) && !(kv8)), \
      "a row of unequal head dims (e.g. 192_128) takes contiguous 16-bit K/V")             \
    C(warps_1_to_8, (w) >= 1 && (w) <= 8, "warps must be 1..8")                            \
    C(tile_m_16_or_32_rows_per_warp, (bm) == 16 * (w) || (bm) == 32 * (w),                 \
      "tile_m must be 16*warps or 32*warps")                                               \
    C(tile_n_multiple_of_16, (bn) % 16 == 0 && (bn) >= 16 && (bn) <= 128,                  \
      "tile_n must be a multiple of 16 in 16..128")                                        \
    C(stages_1_to_3, (st) >= 1 && (st) <= 3, "stages must be 1..3")                        \
    C(threads_cover_row_chunks, (w) >= 1 && ((w) * 32) % ((hd) / 8) == 0 && ((w) * 32) % ((hdv) / 8) == 0, \
      "warps*32 must be a multiple of hdim/8 and hdim_v/8: each copy pass gives every thread one " \
      "16-byte chunk of a row (hdim 192 needs 3 or 6 warps)")                              \
    C(tiles_split_over_threads,                                                            \
      (w) >= 1 && ((bn) * (hd) / 8) % ((w) * 32) == 0 && ((bm) * (hd) / 8) % ((w) * 32) == 0, \
      "tile_m*hd/8 and tile_n*hd/8 must be multiples of the thread count (a V tile of "   \
      "hdv < hd is contiguous: its copy may end in a partial pass)")                      \
    C(registers_rows_x_hdim, (w) >= 1 && ((bm) / (16 * (w))) * (hd) <= 256,                \
      "rows per warp x head dim must be <= 16 x 256 (accumulator registers)")              \
    C(shared_memory_227k, FMHAI_KERNEL_SMEM_BYTES(hd, hdv, bm, bn, st, pg, vec, kv8) <= 227 * 1024, \
      "shared memory of the tile must fit in 227 KB")                                      \
    C(page_size_power_of_two, (pg) == 0 || ((pg) >= 1 && (pg) <= 2048 && ((pg) & ((pg) - 1)) == 0), \
      "page size must be a power of two in 1..2048")                                      \
    C(vectorized_tile_n_64_128, !(vec) || ((bn) == 64 || (bn) == 128),                     \
      "VECTORIZED KV needs tile_n 64 or 128 (V^T rows of 8+ chunks)")                   \
    C(staging_threads_cover_tile, !((pg) > 0 && (FMHAI_PAGING(pg, bn) == 1 || (kv8))) || (w) * 32 >= (bn), \
      "small pages (below 16) and paged fp8 KV stage one row per thread: warps*32 must be >= tile_n") \
    C(fp8_kv_linear_pages, !(kv8) || !(vec),                                               \
      "FP8 KV rows take LINEAR pages or contiguous K/V")                                   \
    C(fp8_tiles_split_over_threads,                                                        \
      !(kv8) || ((w) >= 1 && ((bn) * (hd) / 16) % ((w) * 32) == 0 && ((w) * 32) % ((hd) / 16) == 0), \
      "FP8 KV: tile_n*hd/16 must be a multiple of the thread count")                     \
    C(fp8_tile_n_multiple_of_32, !(kv8) || (bn) % 32 == 0,                                 \
      "FP8 KV: tile_n must be a multiple of 32 (one e4m3 K ldmatrix covers 32 keys)")

/* C(...) over a row of the Hopper pipeline (on top of the above). */
#define FMHAI_FWD90_CONSTRAINTS(C, hd, hdv, bm, bn, w, st, pg, vec, kv8)                   \
    C(fwd90_hdim, (((hd) == 64 || (hd) == 128 || (hd) == 256) && (hdv) == (hd)) ||        \
      ((hd) == 192 && ((hdv) == 192 || (hdv) == 128) && !(pg) && !(kv8)) ||                \
      (((hd) == 32 || (hd) == 96) && (hdv) == (hd) && !(pg) && !(kv8)),                   \
      "the wgmma forward has head dims 64, 128, 256, and 32, 96, 192 or 192_128 (16-bit, " \
      "contiguous K/V)")                                                                    \
    C(fwd90_block_rows_warps, (((bm) == 128 && (w) == 12) || ((bm) == 192 && (w) == 16 && (hd) == 64)) && \
      (st) >= 2 && (st) <= 3,                                                               \
      "the wgmma forward's block is 128 rows and 12 warps (hdim 64: or 192 rows and 16 warps), " \
      "2 or 3 stages")                                                                      \
    C(fwd90_tile_n, (bn) == ((hd) == 256 ? 64 : 128) || ((hd) == 256 && (bn) == 80 && !(kv8) && !(pg)) || \
      ((hd) == 192 && ((bn) == 80 || (bn) == 64)) || ((kv8) && !(pg) && (bn) == ((hd) == 128 ? 192 : 128)), \
      "the wgmma forward's key tile is 128 (hdim 64/128, 192_128) or 64 (hdim 256: O takes 128 " \
      "registers; the contiguous forward's may be 80; hdim 192 and 192_128: 80 or 64; the "  \
      "contiguous e4m3 forward may take 192 at hdim 128, 128 at hdim 256)")               \
    C(fwd90_fp8_rows, !(kv8) || (((hd) == 128 || (hd) == 256) && !(vec) &&                \
                                 ((st) == 3 || ((st) == 2 && (hd) == 256 && (bn) == 128 && !(pg)))), \
      "the wgmma pipeline's fp8 rows have head dim 128 or 256, 3 stages (the load "         \
      "warpgroup issues tile j + 2 after handing tile j over; the contiguous hdim-256 row "  \
      "of 128 keys: 2, K and V^T handed over apart) and LINEAR pages if paged")           \
    C(fwd90_shared_memory_227k, FMHAI_FWD_SMEM_SM90A(hd, hdv, bm, bn, st, pg, vec, kv8) <= 227 * 1024, \
      "shared memory of the tile must fit in 227 KB")
/* The fallback rule (CK's "fast pipeline falls back to the portable one"),
 * written once: S(name, condition, why not) over a forward or batch-prefill
 * problem (dtype, e4m3 queries, head dim, page size: 0 for the forward,
 * layout), on top of
 * an sm_90 device. Selection never picks a Hopper row for a problem
 * that fails a line (the portable rows serve it), and a plan names the
 * first failing line as the reason it runs portable (fmhai_fwd90_why_not).
 * Served today: fp16/bf16, every head dim up to 256 (kernels 64/128/256, and
 * 192 and 192_128 where a set declares them), hdim_v below hdim_q on the
 * contiguous forward (MLA's 192 / 128: the 192_128 kernel; else V zero-
 * filled past hdim_v in a kernel of one head dim),
 * contiguous K/V and paged K/V of every page size in both layouts, every
 * mask, soft cap, ALiBi, LSE, GQA, batch and group mode, dropout (the
 * contiguous forward up to head dim 128: the hdim-128 kernel, and the
 * hdim-64 kernel of DROPOUT rows; a set without them pads d <= 64 into the
 * hdim-128 kernel), elementwise
 * bias (the contiguous 16-bit forward, head dims up to 128); e4m3 (kernels 128
 * and 256): the forward, and batch prefill over LINEAR e4m3 pages with e4m3
 * queries (per-tensor or per-page descales) or with bf16 queries (per-tensor
 * descales: the pages widened to f16, MIX in pipeline/fwd_sm90.h). pds: the
 * problem has per-page descales. */
#define FMHAI_FWD90_SERVES(S, dt, q8, pds, hd, hdv, pg, layout, drop, bias)                    \
    S(fwd90_fp8_queries, (dt) != FMHA_DTYPE_FP8 || (q8) || ((pg) > 0 && !(pds)),         \
      "portable pipeline: fp8 KV with bf16 queries and per-page descales (the wgmma "      \
      "pipeline widens e4m3 pages to f16 under per-tensor descales only: pass e4m3 "      \
      "queries to run on it)")                                                              \
    S(fwd90_hdim, (hd) <= 256, "portable pipeline: head dim above 256")                     \
    S(fwd90_hdim_v, (hdv) == (hd) || (pg) == 0, "portable pipeline: hdim_v below hdim_q over " \
      "paged K/V")                                                                           \
    S(fwd90_pages, (pg) >= 0 && (pg) <= 2048 &&                                            \
      ((layout) == FMHA_KV_LAYOUT_LINEAR || (layout) == FMHA_KV_LAYOUT_VECTORIZED),        \
      "portable pipeline: page size above 2048 or an unknown KV layout")                     \
    S(fwd90_dropout, !(drop) || ((pg) == 0 && (hd) <= 128 && (hdv) == (hd)),               \
      "portable pipeline: dropout above head dim 128 (at 256 the wgmma kernel's registers "  \
      "are full), with hdim_v below hdim_q, or over paged K/V")                              \
    S(fwd90_bias, !(bias) || ((pg) == 0 && (hd) <= 128 && (dt) != FMHA_DTYPE_FP8),         \
      "portable pipeline: elementwise bias outside the hdim-64/128 16-bit kernels (at 256 "  \
      "the wgmma kernel's registers are full)")

#define FMHAI_FWD_CHECKS_SM80(C, ...) FMHAI_FWD_CONSTRAINTS(C, __VA_ARGS__)
#define FMHAI_FWD_CHECKS_GFX9(C, hd, hdv, bm, bn, w, st, pg, vec, kv8)                      \
    FMHAI_FWD_CONSTRAINTS(C, hd, hdv, bm, bn, w, st, pg, vec, kv8)                         \
    C(gfx9_mfma_shape, (w) % 2 == 0 && (bm) == 16 * (w) && (bn) % 32 == 0 && (hd) % 32 == 0, \
      "GFX9 rows run the MFMA pipeline: tile_m = 16 * warps (warps even: 32 rows a wave64), " \
      "tile_n and the head dim multiples of 32")                                           \
    C(gfx9_hdim_64s, (hd) % 64 == 0 && (hdv) % 64 == 0,                                   \
      "GFX9 rows have head dims 64, 128, 192 and 256 (32 and 96: NVIDIA only)")
#define FMHAI_FWD_CHECKS_SM90A(C, ...) FMHAI_FWD90_CONSTRAINTS(C, __VA_ARGS__)

#define FMHAI_CONSTRAINT_ASSERT(name, cond, msg) \
    FMHA_STATIC_ASSERT(cond, "fmha_tile constraint " #name " violated: " msg);
#define FMHAI_CONSTRAINT_CHECK(name, cond, msg) if (!(cond)) return #name ": " msg;

/* NULL when the row is valid, else "constraint_name: message". */
static inline const char *fmhai_fwd_row_violation2(int hd, int hdv, int bm, int bn, int w, int st, int pg,
                                                   int vec, int kv8)
{
    FMHAI_FWD_CONSTRAINTS(FMHAI_CONSTRAINT_CHECK, hd, hdv, bm, bn, w, st, pg, vec, kv8)
    return 0;
}
static inline const char *fmhai_fwd_row_violation(int hd, int bm, int bn, int w, int st, int pg,
                                                  int vec, int kv8)
{
    return fmhai_fwd_row_violation2(hd, hd, bm, bn, w, st, pg, vec, kv8);
}

/* The same for a row of the Hopper pipeline (its own block shape). */
static inline const char *fmhai_fwd90_row_violation2(int hd, int hdv, int bm, int bn, int w, int st,
                                                     int pg, int vec, int kv8)
{
    (void)vec;   /* both layouts */
    FMHAI_FWD90_CONSTRAINTS(FMHAI_CONSTRAINT_CHECK, hd, hdv, bm, bn, w, st, pg, vec, kv8)
    return 0;
}
static inline const char *fmhai_fwd90_row_violation(int hd, int bm, int bn, int w, int st, int pg,
                                                    int vec, int kv8)
{
    return fmhai_fwd90_row_violation2(hd, hd, bm, bn, w, st, pg, vec, kv8);
}

#endif /* FMHA_TILE_POLICY_FWD_TILES_H */
