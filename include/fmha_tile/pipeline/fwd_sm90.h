/*
 * Hopper forward pipeline (sm_90a): the contiguous forward with wgmma.
 *
 * The portable pipeline's algorithm (fwd_portable.h: one block per query
 * tile, key tiles from the last visible one down so the masked tiles come
 * first, online softmax in base 2, P kept in registers) with both products
 * on warpgroup MMAs. Under a causal mask (batch mode) the blocks start
 * longest tile first across L2-sized groups of heads (fmhai_fwd_block_of).
 * A block owns BM query rows: MMA warpgroups of 64 rows
 * each (two, BM = 128; warp w of a warpgroup holds rows 16w..16w+15 in the
 * mma.sync accumulator layout, so the score and softmax code is the
 * portable one's) and a load warpgroup that fills a ring of K/V stages with
 * cp.async and hands each over with named barriers (FULL: landed, one per
 * MMA warpgroup; EMPTY: every MMA warpgroup is done with it). The MMA warpgroups take turns
 * issuing their products (a turn: the next tile's S and one tile's P V), so
 * one runs its softmax while another's products use the tensor cores
 * (FlashAttention-3's ping-pong), and each starts the softmax of the next
 * tile as soon as its S has landed, under its own P V (intra-warpgroup
 * overlap; O is rescaled and P packed once P V is done). Under a causal
 * mask a warpgroup whose 64 rows see none of the block's first key tile
 * takes that tile's turn without products. Per key tile:
 *     S  = Q K^T      SS: Q (this warpgroup's 64 rows) and K, K-major
 *     soft cap / ALiBi / mask (mask only on tiles that need it)
 *     online softmax; P -> 16-bit A fragments (dropout: dropped elements
 *     zeroed in the fragments, fmhai_fwd90_dropout; hdim-128 kernel)
 *     O += P V        RS: P from registers, V read MN-major
 * Paged K/V (batch prefill): the load warpgroup gathers each tile row by row
 * through the sequence's page table (pipeline/kv_source.h), the page index of
 * every row staged in shared memory a tile ahead. VECTORIZED pages land
 * chunk-major, the order they are stored in (K, and V as V^T, both read
 * K-major with no-swizzle descriptors).
 * Tiles land in the 128-byte-swizzled layout of tile/warpgroup_mma.h.
 * With tensor maps in the parameters (dispatch/tma.h: contiguous K/V, and
 * LINEAR pages of 4 KB or more, e4m3 ones of 32 tokens) one thread copies each
 * whole key tile by TMA (a box a 128-byte column block; paged, a box a page:
 * 16-bit pages then land in the grouped layout of tile/warpgroup_mma.h,
 * every column block of an 8-row group together, so one box takes a
 * whole page) and waits on
 * the tile's mbarrier before the hand-off; Q, a partial first tile (the
 * sequence's last) and every tile without tensor maps (small or VECTORIZED
 * pages, no encoder) load with cp.async. The epilogue folds in the head's
 * attention sink if any (fmhai_sink_fold), normalises O, writes LSE (-inf
 * for rows that saw no key and have no sink) and stores O through shared
 * memory in whole rows of 16-byte vectors (16-bit rows: each warp's own
 * rows of the Q tile; e4m3 rows: the V staging tiles).
 *
 * FP8 (e4m3 Q, K, V; bf16 O): both products are e4m3 wgmma (k32, operands
 * K-major only); the q and k descales fold into the logit scale, v's into
 * the output. P leaves the softmax as e4m3 fragments, and V, which wgmma
 * cannot read MN-major in 8 bits, is landed in a staging tile and written
 * as V^T by the load warpgroup with its keys in the order P's fragments hold
 * them (kv_source.h, fmhai_wg_vt8_transpose; tile/vt8_layout.h).
 * Rows (policy/fwd_tiles.h): hdim 64 and 128, BM 128, BN 128, 3 stages;
 * hdim 256, BN 64, 2 stages (fp8: 3); 12 warps (a tuning build may run hdim
 * 64 on 192 rows, three MMA warpgroups, 16 warps). The contiguous e4m3
 * forward at hdim 128 takes BN 192 in 3 stages (S as m64n192k32; V^T's
 * keys 128..191 in a 64-byte-swizzled panel, 24 KB a stage). The
 * contiguous e4m3 forward at hdim 256 takes BN 128 in 2 stages (FS2: the
 * MMA warpgroups at 240 registers, the load warpgroup at 24; K handed over
 * as it lands and V^T once transposed, on barriers of their own). An e4m3
 * row of 64 keys at hdim 256 (QREG) keeps each warp's Q rows in registers
 * (fmhai_wg_load_afrags) and reads only K for S (fmhai_wg_gemm_rbt): S as
 * m64n64k32 with both operands in shared memory needs 128 bytes a clock,
 * all the SM has. The same rows serve batch
 * prefill over 16-bit K/V, and the fp8 rows batch prefill over e4m3 LINEAR
 * pages with e4m3 queries (per-page descales: each score column times its
 * key's K descale, each P column times its key's V descale over the tile's
 * largest before P is rounded; O kept in units of that reference,
 * fmhai_fwd90_vref). e4m3 LINEAR pages with bf16 queries (per-tensor
 * descales) take the row's second kernel (fmhai_fwd_sm90_q16, MIX): the
 * 16-bit pipeline computing in f16, each e4m3 tile widened in place in its
 * 16-bit stage by the load warpgroup (kv_source.h, fmhai_wg_widen_e4m3),
 * the queries turned f16 under a power-of-two scale (fmhai_fwd90_q_to_f16).
 *
 * Elementwise bias (BIAS rows, 16-bit contiguous forward up to hdim 128):
 * with a bias tensor map (dispatch/tma.h: batch mode, 16-bit, 16-byte
 * strides) the load warpgroup copies each key tile's [BM][BN] bias tile by
 * TMA into a slot beside its K/V stage and hands both over together; the
 * softmax reads its fragments with ldmatrix and, with no soft cap or
 * ALiBi, adds them to the raw scores in units of the scale (one FFMA an
 * element). Otherwise (group mode, fp32 bias, odd strides) the softmax
 * loads its bias words from global memory.
 *
 * Shared memory (1024-byte aligned from the dynamic base): Q [BM][hd],
 * K [stages][BN][hd], V [stages][BN][hd] (VECTORIZED: V^T [hd][BN]), paged:
 * the row page indices of two tiles [2][BN] int32; fp8 (bytes): V^T
 * [stages][hd][128] (BN 192: [hd][128] + [hd][64] a stage) and two staging
 * tiles of V rows [2][BN][hd], paged: the
 * row page indices of three tiles [3][BN] int32, their descales [3][K,V][BN]
 * and V references [3][4] fp32; BIAS with a tensor map: the bias slots
 * [stages][BN / 64][BM][128 bytes] there instead.
 */
#ifndef FMHA_TILE_PIPELINE_FWD_SM90_H
#define FMHA_TILE_PIPELINE_FWD_SM90_H

#include "../tile/warpgroup_mma.h"
#include "../tile/tma.h"
#include "fwd_common.h"
#include "kv_source.h"

#if defined(FMHA_PLATFORM_NVIDIA)

/* The widest key tile of this pipeline (the e4m3 hdim-128 forward's 192;
 * the portable pipelines keep FMHAI_FWD_MAX_BN) */
#define FMHAI_FWD90_MAX_BN 192

/* Named barriers of the ring (0 is __syncthreads, unused): stage s landed
 * (FULL + s) and stage s free (EMPTY + s), every thread of the block (the
 * load warpgroup's 128 and the MMA warpgroups'); a warpgroup's turn (TURN +
 * warpgroup, its 128 threads and the previous one's). */
#define FMHAI_FWD90_BAR_FULL 1    /* .. 1 + stages - 1 */
#define FMHAI_FWD90_BAR_EMPTY 4   /* .. 4 + stages - 1 (stages <= 3) */
#define FMHAI_FWD90_BAR_TURN 7    /* + warpgroup (<= 3): its turn to issue products */
#define FMHAI_FWD90_BAR_PAGES 11  /* the load warpgroup's 128: a tile's page indices staged */
#define FMHAI_FWD90_BAR_FULL1 12  /* .. 12 + stages - 1: stage landed, for MMA warpgroup 1 */

/* The lazy running max (fmhai_fwd90_softmax): it moves only by more than
 * FMHAI_FWD90_LAZY (log2 units; P < 2^8 = 256, exact in fp32 and within the
 * 16-bit types), on the 16-bit kernels where skipping O's rescale measured
 * faster (H200, same call): hdim 256 (+1-3%) and hdim 128 (contiguous
 * +-1%, paged prefill +2%); hdim 64 measured -2% at 2k causal. Not on e4m3
 * P: a row's top key then has P = 2^x with x in (0, 8] instead of exactly
 * 1, and its rounding to e4m3 (up to 2^-4) falls on the whole output of a
 * nearly one-hot row: test_fwd_fp8's peak problem at hdim 256 came out
 * 1.64e-2 rel-L2 from the unrounded softmax with the lazy max against
 * 5.7e-3 with the exact one (bench/RESULTS.md, session 11), though it was
 * 4-7% faster; the e4m3 rows that divide O by the rounded P's own sum
 * (QSUM) take it (the hdim-128 ones as the rounded P reads it,
 * fmhai_fwd90_softmax8e, always 2^8). A build may predefine the macro (the
 * FP8 tests' reference follows it: p8_lazy). */
#ifndef FMHAI_FWD90_LAZY
#define FMHAI_FWD90_LAZY 8.f
#endif
#ifndef FMHAI_FWD90_LAZY_ON
#define FMHAI_FWD90_LAZY_ON(HDV, FP8, PDS) (!(FP8) && ((HDV) == 256 || (HDV) == 128))
#endif

/* FP8: stage s's K tile free (the MMA warpgroups are past S and the softmax
 * of the tile that used it; EMPTY + s then frees its V^T). The ids left over
 * (FP8 rows have two MMA warpgroups: TURN + 2 is free). */
FMHAI_DEVICE int fmhai_fwd90_bar_kempty(int s) { return s == 0 ? 9 : s == 1 ? 10 : 15; }

/* Stage s landed (the fill of tile `tile`). With two MMA warpgroups each
 * waits on its own barrier (FULL + s or FULL1 + s: the load warpgroup's
 * 128 threads and its own 128), so that neither waits for the other to
 * reach the tile: one barrier of all 384 threads held each warpgroup's
 * products back until the other had finished its softmax, which undid the
 * ping-pong. Three MMA warpgroups wait on an mbarrier a stage instead
 * (full3 + 8 s, the load warpgroup's 128 arrivals; barrier ids run out,
 * and one shared barrier held each at the slowest). */
FMHAI_DEVICE void fmhai_fwd90_full_sync(fmhai_smem_t full3, int s, int tile, int ST, int wg, int NWG)
{
    if (NWG == 3) fmhai_mbar_wait(full3 + 8 * s, (tile / ST) & 1);
    else fmhai_bar_sync((wg ? FMHAI_FWD90_BAR_FULL1 : FMHAI_FWD90_BAR_FULL) + s, 256);
}
FMHAI_DEVICE void fmhai_fwd90_full_arrive(fmhai_smem_t full3, int s, int NWG)
{
    if (NWG == 3) {
        fmhai_mbar_arrive(full3 + 8 * s);
    } else {
        fmhai_bar_arrive(FMHAI_FWD90_BAR_FULL + s, 256);
        fmhai_bar_arrive(FMHAI_FWD90_BAR_FULL1 + s, 256);
    }
}
/* Split K/V hand-overs at two stages (FMHAI_FWD90_SPLIT_ON: 16-bit hdim
 * 256, each stream one load warp, n = 160; the e4m3 hdim-256 row of 128
 * keys, FS2: K as it lands and V^T once transposed, the whole load
 * warpgroup, n = 256): K and V of a tile have their own hand-over and
 * refill barriers. K of stage s landed: FULL / FULL1 + s; V landed:
 * fmhai_fwd90_bar_vfull (ids free at two stages); K slot free: KEMPTY (as
 * FP8's); V slot free: EMPTY + s. */
FMHAI_DEVICE int fmhai_fwd90_bar_vfull(int s, int wg) { return wg ? (s ? 15 : 14) : (s ? 6 : 3); }
FMHAI_DEVICE void fmhai_fwd90_split_sync(int s, int wg, int v, int n)
{
    fmhai_bar_sync(v ? fmhai_fwd90_bar_vfull(s, wg) : (wg ? FMHAI_FWD90_BAR_FULL1 : FMHAI_FWD90_BAR_FULL) + s, n);
}
FMHAI_DEVICE void fmhai_fwd90_split_arrive(int s, int v, int n)
{
    fmhai_bar_arrive(v ? fmhai_fwd90_bar_vfull(s, 0) : FMHAI_FWD90_BAR_FULL + s, n);
    fmhai_bar_arrive(v ? fmhai_fwd90_bar_vfull(s, 1) : FMHAI_FWD90_BAR_FULL1 + s, n);
}

/* e4m3 of four floats, byte i from x_i (saturating; P <= 1: the e4m3 kernels keep the exact max) */
FMHAI_DEVICE uint32_t fmhai_pack_e4m3x4(float x0, float x1, float x2, float x3)
{
    uint32_t r;
    asm("{\n.reg .b16 lo, hi;\n"
        "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"   /* the first source lands in the high byte */
        "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
        "mov.b32 %0, {lo, hi};\n}\n"
        : "=r"(r) : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
    return r;
}

/* The 16-bit pair of P packed from bytes k and k + 1's elements kept
 * where their flags' top bits are set: prmt replicates byte k's top bit
 * over the low half of a mask and byte k + 1's over the high half. */
FMHAI_DEVICE uint32_t fmhai_keep2(uint32_t pair, uint32_t flags, int k)
{
    const uint32_t m = fmhai_prmt(flags, 0u, 0x9988u + 0x1111u * (uint32_t)k);
    return pair & m;
}

/* Dropout, step 1: the keep flags of this thread's elements of key tile n
 * (fl[q2][hf]: the top bit of byte 2 par + e for keys 16 q2 + 8 par + 2t +
 * e of row g + 8 hf). One Philox call gives the bytes of
 * rows i, i ^ 1, i ^ 8, i ^ 9 and keys j, j ^ 1, j ^ 8, j ^ 9: this
 * thread's rows (g and g + 8) take the half of parity g & 1 and the thread
 * of row g ^ 1 (lane ^ 4) the other half, so the two compute every other
 * call and swap halves by shuffle: one call per 32 keys a thread (a lone
 * last 16 keys: each its own call). The decision is the portable
 * pipeline's and the reference's, element for element. Seed and offset are
 * read here (from dropout_rng: an L1 hit), not held across the loop. */
FMHAI_DEVICE void fmhai_fwd90_drop_flags(uint32_t (*fl)[2], const fmhai_fwd_params *p, uint32_t bh, int row, int n,
                                         int BN, int g, int t)
{
    uint64_t seed, offset;
    fmhai_dropout_seed_offset(p->dropout_rng, p->dropout_seed, p->dropout_offset, &seed, &offset);
    const uint32_t thr = p->dropout_thr;
    /* the key made opaque here: else its ten round keys, the same every
     * tile, are hoisted out of the key loop and held in registers */
    uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) + (uint32_t)(offset >> 32) };
    asm volatile("" : "+r"(key[0]), "+r"(key[1]));
    const uint32_t odd = (uint32_t)g & 1u;
    const uint32_t T = thr * 0x01010101u, Tlo = (thr & 0x7fu) * 0x01010101u;
    const uint32_t j0 = (uint32_t)(n * BN + 2 * t), i0 = (uint32_t)row & ~9u;
#pragma unroll
    for (int k = 0; k < BN / 32; ++k) {
        uint32_t w[4];
        const uint32_t ctr[4] = { j0 + (uint32_t)(32 * k) + 16u * odd, i0, bh, (uint32_t)offset };
        fmhai_philox4x32(ctr, key, FMHAI_DROPOUT_ROUNDS, w);
        const uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? w[0] : w[1], 4);
        const uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? w[2] : w[3], 4);
        const uint32_t own0 = odd ? w[1] : w[0], own1 = odd ? w[3] : w[2];
        /* keys 32k + 16q ..: our call's (q == odd) or the partner's */
        fl[2 * k][0] = fmhai_keep_flags(odd ? r0 : own0, T, Tlo);
        fl[2 * k][1] = fmhai_keep_flags(odd ? r1 : own1, T, Tlo);
        fl[2 * k + 1][0] = fmhai_keep_flags(odd ? own0 : r0, T, Tlo);
        fl[2 * k + 1][1] = fmhai_keep_flags(odd ? own1 : r1, T, Tlo);
    }
    if (BN % 32) {   /* the last 16 keys (80-key tiles) */
        const int q2 = BN / 16 - 1;
        uint32_t w[4];
        const uint32_t ctr[4] = { j0 + (uint32_t)(16 * q2), i0, bh, (uint32_t)offset };
        fmhai_philox4x32(ctr, key, FMHAI_DROPOUT_ROUNDS, w);
        fl[q2][0] = fmhai_keep_flags(odd ? w[1] : w[0], T, Tlo);
        fl[q2][1] = fmhai_keep_flags(odd ? w[3] : w[2], T, Tlo);
    }
}

/* Dropout, step 2: the packed 16-bit P (pa[q2][2 par + hf] holds keys
 * 16 q2 + 8 par + 2t, + 1 of row g + 8 hf) with its dropped elements
 * zeroed. The kept ones keep their value (the 256 / (256 - thr) is applied
 * once to O in the epilogue) and the row sum, so the LSE, is the one
 * without dropout. Applied to the fragments, outside the softmax, so that
 * the kernel without dropout keeps the softmax's straight-line code. */
FMHAI_DEVICE void fmhai_fwd90_drop_apply(uint32_t (*pa)[4], const uint32_t (*fl)[2], int BN)
{
#pragma unroll
    for (int q2 = 0; q2 < BN / 16; ++q2)
#pragma unroll
        for (int par = 0; par < 2; ++par)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
                pa[q2][2 * par + hf] = fmhai_keep2(pa[q2][2 * par + hf], fl[q2][hf], 2 * par);
}

/* Dropout on tile n's packed P, after the softmax. (Drawing the flags
 * earlier, while the warpgroup waited for the tile's S, measured 2-5%
 * slower: the rounds compete for the schedulers with the other warpgroup's
 * softmax either way, and the 16 flag words stayed live across the wait.) */
FMHAI_DEVICE void fmhai_fwd90_dropout(uint32_t (*pa)[4], const fmhai_fwd_params *p, uint32_t bh, int row, int n,
                                      int BN, int g, int t)
{
    uint32_t fl[FMHAI_FWD90_MAX_BN / 16][2];
    fmhai_fwd90_drop_flags(fl, p, bh, row, n, BN, g, t);
    fmhai_fwd90_drop_apply(pa, fl, BN);
}

/* QSUM: a tile's sums of the rounded P (tsum, landed with its P V: [0] row
 * g, [2] row g + 8, whole rows) into the running row sums, times a0 / a1
 * (the next tile's alpha when it has rescaled them already); lane t == 0 of
 * the quad only, as the epilogue adds the quad's partial sums. */
FMHAI_DEVICE void fmhai_fwd90_qsum_add(float *row_sum, float *tsum, float a0, float a1, int t)
{
    fmhai_wg_fence_acc(tsum, 4);
    row_sum[0] += t == 0 ? tsum[0] * a0 : 0.f;
    row_sum[1] += t == 0 ? tsum[2] * a1 : 0.f;
}

/* Scores of key tile n (acc_s, this thread's rows row0 and row0 + 8 of
 * the block at m0) -> P as A fragments (pa): soft cap, ALiBi, mask (only on
 * tiles outside the mask-free range), online softmax in base 2 (running max
 * and sum, O rescaled). scale_log2 and softcap_pre carry the FP8 descales of
 * q and k. P leaves as 16-bit fragments, or FP8 as e4m3 fragments of 32
 * keys: bytes 4t..4t+3 of row g hold the columns 2t, 2t+1, 8 + 2t, 9 + 2t
 * of the k-step's first 16 keys (the next register the next 16), the order
 * fmhai_wg_vt8_transpose stores V^T's keys in. */
/* Elementwise bias, 16-bit (BIAS kernels): this thread's column pairs of
 * key tile n (columns nt * 8 + 2t, +1) for its rows row0 and row0 + 8, as
 * packed words (0 outside s_q x s_k), issued a tile ahead so the loads fly
 * under the products (fmhai_fwd90_softmax unpacks them). */
FMHAI_DEVICE void fmhai_fwd90_bias_fetch(uint32_t (*bw)[FMHAI_FWD90_MAX_BN / 8], const fmhai_fwd_params *p,
                                         const char *bias_rows, int i0, int n, int BN, int t, int s_q, int s_k)
{
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int k0 = n * BN + 2 * t;   /* the thread's first key: pairs at constant offsets */
        const int lim = s_k - k0;
        const unsigned short *row = (const unsigned short *)fmhai_bias_row(p, bias_rows, i0 + 8 * hf, s_q);
        if (row) row += k0;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
            const int j = nt * 8;
            uint32_t w = 0u;
            if (row && j < lim) {
                if (j + 1 < lim && p->bias_pair) w = *(const unsigned int *)(row + j);
                else w = (uint32_t)row[j] | (j + 1 < lim ? (uint32_t)row[j + 1] << 16 : 0u);
            }
            bw[hf][nt] = w;
        }
    }
}

/* Elementwise bias from a tile in shared memory (TMA, 16-bit): sbias is
 * this lane's row address (fmhai_fwd90_bias_lane) in the tile's slot of
 * [BN / 64] column blocks of [BM][128 bytes], 128-byte swizzled. One
 * ldmatrix.x4 gives the accumulator layout of two 8-key column groups for
 * rows g and g + 8 (matrices: rows g / g + 8 of group nt, then of nt + 1),
 * added times f (log2(e), or 1 / scale when folded into raw scores). */
FMHAI_DEVICE void fmhai_fwd90_bias_smem(float *acc_s, fmhai_smem_t sbias, int bf, int BM, int BN, float f)
{
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt += 2) {
        uint32_t w[4];
        fmhai_warp_ldsm_x4(w, (sbias + (uint32_t)((nt >> 3) * BM * 128)) ^ (uint32_t)((nt & 7) << 4));
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const int c = 4 * (nt + (m >> 1)) + 2 * (m & 1);
            float2 v;
            if (bf) {
                v.x = __uint_as_float(w[m] << 16);
                v.y = __uint_as_float(w[m] & 0xffff0000u);
            } else {
                v = __half22float2(*(const __half2 *)&w[m]);
            }
            acc_s[c] = fmaf(v.x, f, acc_s[c]);
            acc_s[c + 1] = fmaf(v.y, f, acc_s[c + 1]);
        }
    }
}

/* The factor of the softmax's exponent (and the LSE's): scale * log2(e)
 * on raw scores; 1 where the logits were scaled in place (soft cap, ALiBi,
 * a bias loaded from global memory). */
FMHAI_DEVICE float fmhai_fwd90_sl2(int SOFTCAP, int ALIBI, int BIAS, int bias_smem, float scale_log2)
{
    return (SOFTCAP || ALIBI || (BIAS && !bias_smem)) ? 1.f : scale_log2;
}

/* This lane's ldmatrix row address in a bias slot (fmhai_fwd90_bias_smem):
 * matrix lane / 8 (rows g / g + 8 of a key group, then of the next), row
 * lane % 8 of the warp's 16 rows, with the 128-byte swizzle's chunk XOR of
 * the row (the key group's chunk is XORed in per load). */
FMHAI_DEVICE fmhai_smem_t fmhai_fwd90_bias_lane(fmhai_smem_t slot, int wrow0, int lane)
{
    const int mat = lane >> 3, r = wrow0 + 8 * (mat & 1) + (lane & 7);
    return slot + (uint32_t)(r * 128) + (uint32_t)((mat >> 1) << 4 ^ ((r & 7) << 4));
}

/* The softmax of a key tile in two parts, so that the first can run while
 * the warpgroup's P V of the previous tile is still in flight (it touches
 * neither O nor P's fragments): fmhai_fwd90_softmax turns the scores in
 * acc_s into unnormalised probabilities (logit transforms, mask, running
 * max and sum) and returns O's factor per row in oa; after the P V product
 * has completed, fmhai_fwd90_rescale_pack rescales O and packs P into the
 * A fragments of the next P V. */
/* The max of row half hf (row g or g + 8) of a score tile and m, over the
 * row's four lanes (every lane of the warp takes part) */
FMHAI_DEVICE float fmhai_fwd90_row_max(const float *acc_s, int hf, float m, int BN)
{
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) m = fmaxf(m, fmaxf(acc_s[4 * nt + 2 * hf], acc_s[4 * nt + 2 * hf + 1]));
    m = fmaxf(m, fmhai_shfl_xor(m, 1));
    return fmaxf(m, fmhai_shfl_xor(m, 2));
}

/* (the logits of the scores: descales, soft cap, ALiBi or bias, mask) */
FMHAI_DEVICE void fmhai_fwd90_logits(float *acc_s, const fmhai_fwd_params *p, const fmhai_fwd_keys *W, int n,
                                     int m0, int row0, int s_q, int s_k, float slope, int t, int BN, int SOFTCAP,
                                     int ALIBI, int BIAS, const char *bias_rows, int BIAS_PRE,
                                     const uint32_t (*bw)[FMHAI_FWD90_MAX_BN / 8], fmhai_smem_t sbias, int BM,
                                     float scale_log2, float softcap_pre, const float *kds)
{
    const float NEG_INF = -__int_as_float(0x7f800000);
    /* a bias alone from shared memory folds into the raw scores (in units
     * of the softmax scale: one FFMA an element), the scale staying in the
     * exponent as without a bias (fmhai_fwd90_sl2) */
    const int FOLD = BIAS && !SOFTCAP && !ALIBI && sbias;
    /* ---- per-key K descales (paged FP8): score column c times kds[c] ------ */
    if (kds) {
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
            const float2 k2 = *(const float2 *)(kds + nt * 8 + 2 * t);
            acc_s[4 * nt + 0] *= k2.x;
            acc_s[4 * nt + 1] *= k2.y;
            acc_s[4 * nt + 2] *= k2.x;
            acc_s[4 * nt + 3] *= k2.y;
        }
    }
    /* ---- logits: soft cap, ALiBi or elementwise bias, mask -------------- */
    if ((SOFTCAP || ALIBI || BIAS) && !FOLD) {
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float x = acc_s[4 * nt + e];
                if (SOFTCAP) x = tanhf(x * softcap_pre) * p->softcap_post_log2;
                else x *= scale_log2;
                if (ALIBI) {   /* bottom-right aligned distance |i + s_k - s_q - j| */
                    const int i = m0 + row0 + 8 * (e / 2), j = n * BN + nt * 8 + 2 * t + (e % 2);
                    x -= slope * fabsf((float)(i + s_k - s_q - j));
                }
                acc_s[4 * nt + e] = x;
            }
    }
    if (BIAS) {
        /* elementwise bias: rows row0, row0 + 8, columns nt * 8 + 2t, +1;
         * 16-bit with BIAS_PRE: the words fetched a tile ahead, else loaded
         * here */
        const float L2E = 1.4426950408889634f;
        const int bf = p->bias_dt == FMHA_DTYPE_BF16, here = !BIAS_PRE || p->bias_dt == FMHA_DTYPE_FP32;
        if (sbias) {   /* the tile's bias in shared memory (TMA) */
            fmhai_fwd90_bias_smem(acc_s, sbias, bf, BM, BN, FOLD ? L2E / scale_log2 : L2E);
        } else
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            const char *brow = here ? fmhai_bias_row(p, bias_rows, m0 + row0 + 8 * hf, s_q) : 0;
            const int bk0 = n * BN + 2 * t;   /* the thread's first key: pairs at constant offsets */
            if (brow) brow += (int64_t)bk0 * (p->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2);
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt) {
                float2 bv;
                if (here) {
                    bv = fmhai_bias_pair(p, brow, nt * 8, s_k - bk0);
                } else {
                    const uint32_t w = bw[hf][nt];
                    const unsigned short lo = (unsigned short)(w & 0xffffu), hi = (unsigned short)(w >> 16);
                    bv.x = L2E * (bf ? __uint_as_float(w << 16) : __half2float(__ushort_as_half(lo)));
                    bv.y = L2E * (bf ? __uint_as_float(w & 0xffff0000u) : __half2float(__ushort_as_half(hi)));
                }
                acc_s[4 * nt + 2 * hf] += bv.x;
                acc_s[4 * nt + 2 * hf + 1] += bv.y;
            }
        }
    }
    if (!(n >= W->f_lo && n < W->f_hi)) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            const int i = m0 + row0 + 8 * hf, base = n * BN + 2 * t;
            const int hi = min(s_k, i + W->c_hi) - base, lo = i + W->c_lo - base;
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int col = nt * 8 + e;
                    if (col < lo || col >= hi) acc_s[4 * nt + 2 * hf + e] = NEG_INF;
                }
        }
    }
}

FMHAI_DEVICE void fmhai_fwd90_softmax(float *acc_s, float *oa, float *row_max, float *row_sum,
                                      const fmhai_fwd_params *p, const fmhai_fwd_keys *W, int n, int m0, int row0,
                                      int s_q, int s_k, float slope, int t, int BN, int LAZY,
                                      int SOFTCAP, int ALIBI, int BIAS, const char *bias_rows, int BIAS_PRE,
                                      const uint32_t (*bw)[FMHAI_FWD90_MAX_BN / 8], fmhai_smem_t sbias, int BM,
                                      float scale_log2, float softcap_pre, const float *kds, float vratio,
                                      float *lse_sum)
{
    const float NEG_INF = -__int_as_float(0x7f800000);
    const float sl2 = fmhai_fwd90_sl2(SOFTCAP, ALIBI, BIAS, sbias != 0u, scale_log2);
    fmhai_fwd90_logits(acc_s, p, W, n, m0, row0, s_q, s_k, slope, t, BN, SOFTCAP, ALIBI, BIAS, bias_rows, BIAS_PRE,
                       bw, sbias, BM, scale_log2, softcap_pre, kds);

    /* ---- online softmax (base 2) ----------------------------------------- */
    /* oa: O's factor per row, alpha (times the V reference ratio). LAZY
     * (FMHAI_FWD90_LAZY_ON): the running max moves only when the tile's
     * exceeds it by more than FMHAI_FWD90_LAZY in the exponent (a first
     * finite max always does); otherwise P is taken against the old one (P <
     * 2^LAZY: exact in fp32, within the 16-bit types' range) and
     * alpha is 1, so once the max has settled O is not rescaled
     * (fmhai_fwd90_rescale_pack skips the multiplies when no row of the warp
     * moved). */
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const float mx = fmhai_fwd90_row_max(acc_s, hf, row_max[hf], BN);
        const float m_old = row_max[hf];
        const int grow = !LAZY || (mx - m_old) * sl2 > FMHAI_FWD90_LAZY;   /* false while both are -inf (NaN) */
        const float m = grow ? mx : m_old;
        /* a row with no visible key yet keeps max -inf: 0 instead, so that
         * exp2(-inf - 0) = 0, not NaN */
        const float ms = (m == NEG_INF) ? 0.f : m * sl2;
        const float alpha = grow ? fmhai_exp2(m_old * sl2 - ms) : 1.f;
        row_max[hf] = m;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float pv = fmhai_exp2(acc_s[4 * nt + 2 * hf + e] * sl2 - ms);
                acc_s[4 * nt + 2 * hf + e] = pv;
                sum += pv;
            }
        if (lse_sum) {   /* QSUM: the exact sum for the LSE; O's sum of the rounded P comes from the tensor cores */
            lse_sum[hf] = lse_sum[hf] * alpha + sum;
            row_sum[hf] *= alpha;
        } else {
            row_sum[hf] = row_sum[hf] * alpha + sum;
        }
        oa[hf] = alpha * vratio;   /* O in units of this tile's V reference */
    }
}

FMHAI_DEVICE void fmhai_fwd90_rescale_pack(float *acc_s, float *acc_o, uint32_t (*pa)[4], const float *oa, int t,
                                           int is_bf16, int HD, int BN, int FP8, int LAZY, const float *vds,
                                           float vinv)
{
    /* hdim 256 and the lazy max: O rescaled only where a row of the warp
     * moved its max (or its V reference); exact, a factor of 1 is all the
     * skipped multiplies would apply. With the lazy max (fmhai_fwd90_softmax)
     * nearly every tile after the first few skips them. At hdim 128 with the
     * exact max the vote cost more than the 64 multiplies (fp8 -1 to -4%). */
    if ((HD < 256 && !LAZY) || fmhai_count_lanes(oa[0] != 1.f || oa[1] != 1.f)) {
#pragma unroll
        for (int dt = 0; dt < HD / 8; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[4 * dt + e] *= oa[e / 2];
    }
    if (FP8) {
        /* per-key V descales (paged FP8): P column c times vds[c] / vref */
        if (vds) {
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt) {
                const float2 v2 = *(const float2 *)(vds + nt * 8 + 2 * t);
                const float v0 = v2.x * vinv, v1 = v2.y * vinv;
                acc_s[4 * nt + 0] *= v0;
                acc_s[4 * nt + 1] *= v1;
                acc_s[4 * nt + 2] *= v0;
                acc_s[4 * nt + 3] *= v1;
            }
        }
#pragma unroll
        for (int kq = 0; kq < BN / 32; ++kq)
#pragma unroll
            for (int r = 0; r < 4; ++r) {   /* r: row g / g + 8 (r % 2), keys 0-15 / 16-31 (r / 2) */
                const float *x = acc_s + 4 * (4 * kq + 2 * (r / 2)) + 2 * (r % 2);
                pa[kq][r] = fmhai_pack_e4m3x4(x[0], x[1], x[4], x[5]);
            }
        return;
    }
#pragma unroll
    for (int kp = 0; kp < BN / 16; ++kp) {
        pa[kp][0] = fmhai_pack2(acc_s[8 * kp + 0], acc_s[8 * kp + 1], is_bf16);
        pa[kp][1] = fmhai_pack2(acc_s[8 * kp + 2], acc_s[8 * kp + 3], is_bf16);
        pa[kp][2] = fmhai_pack2(acc_s[8 * kp + 4], acc_s[8 * kp + 5], is_bf16);
        pa[kp][3] = fmhai_pack2(acc_s[8 * kp + 6], acc_s[8 * kp + 7], is_bf16);
    }
}

/* QF: a tile's sums of the rounded P from O's column 128 + 2t (rows g and
 * g + 8: acc_o[64], [66]), added to the rows' in fp32, and those columns
 * cleared for the next tile: the tensor cores accumulate e4m3 products in
 * fewer bits than fp32 (the lower bits of each k-step's addition are
 * dropped), and a sum carried in them over 4k keys moved O by 1-3% (O's
 * own columns carry the same error, but it is not shared). */
FMHAI_DEVICE void fmhai_fwd90_qfold_take(float *sums, float *row_sum)
{
    row_sum[0] += sums[0];
    row_sum[1] += sums[2];
    sums[0] = sums[1] = sums[2] = sums[3] = 0.f;
}

/* One row half (hf: row g or g + 8) of an e4m3 tile's P against ms (the
 * max in units of the exponent), packed into the A fragments as
 * fmhai_fwd90_rescale_pack packs them (pa[kq][r]: r % 2 = hf, keys 0-15 /
 * 16-31 of k-step kq by r / 2); the unrounded sum where LSE, and in *big
 * the OR of every packed word + FMHAI_P8_BIG_ADD (tile/vt8_layout.h: bit 7
 * of a byte set where a code reached 0x78, P >= 2^8 after rounding). */
FMHAI_DEVICE float fmhai_fwd90_p8_row(const float *acc_s, uint32_t (*pa)[4], int hf, float ms, float sl2, int BN,
                                      int LSE, uint32_t *big)
{
    float sum = 0.f;
    uint32_t b = 0u;
#pragma unroll
    for (int kq = 0; kq < BN / 32; ++kq)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            const float *x = acc_s + 4 * (4 * kq + 2 * rr) + 2 * hf;
            /* (an explicit FFMA: else the compiler shares x * sl2 between
             * this and the retake, an FMUL and an FADD where one FFMA was) */
            const float e0 = fmhai_exp2(__fmaf_rn(x[0], sl2, -ms)), e1 = fmhai_exp2(__fmaf_rn(x[1], sl2, -ms));
            const float e4 = fmhai_exp2(__fmaf_rn(x[4], sl2, -ms)), e5 = fmhai_exp2(__fmaf_rn(x[5], sl2, -ms));
            if (LSE) sum += (e0 + e1) + (e4 + e5);
            const uint32_t w = fmhai_pack_e4m3x4(e0, e1, e4, e5);
            pa[kq][2 * rr + hf] = w;
            b |= w + FMHAI_P8_BIG_ADD;
        }
    *big = b;
    return sum;
}

/* The e4m3 softmax of the VF rows (QSUM with P's row sums in O's last 8
 * columns: fmhai_wg_gemm_rs8, fmhai_fwd90_qfold_take), called once P V of
 * the tile before has completed: P taken against the running max as it
 * stands and packed straight into the A fragments, with no row max ahead
 * of the exponentials. The lazy rule then reads the packed P: the max
 * stays unless a P reached 2^8 (FMHAI_FWD90_LAZY: P <= 2^8 is in e4m3's
 * range, and the rounded P's own sum divides O, so how P rounds does not
 * matter) or the row has seen no key yet; then (a row's first visible
 * tile, later rarely) the row's max is reduced, its P taken again from
 * its scores against it, and O and the sums rescaled (only where a row of
 * the warp moved). The max's reduction, ahead of the exponentials, cost
 * the kernel 9% (bench/RESULTS.md, session 34); beside them (the max of
 * every tile, the rule as FMHAI_FWD90_LAZY reads it) 100 FMNMX a tile
 * still took their issue slots. LSE: the unrounded sum (lse_sum, the
 * LSE's) only where the LSE is asked for: 96 FADD a tile. */
FMHAI_DEVICE void fmhai_fwd90_softmax8e(const float *acc_s, float *acc_o, uint32_t (*pa)[4], float *row_max,
                                        float *row_sum, float *lse_sum, int LSE, int HD, int BN, float sl2)
{
    const float NEG_INF = -__int_as_float(0x7f800000);
    float alpha[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const float m_old = row_max[hf], ms0 = m_old == NEG_INF ? 0.f : m_old * sl2;
        uint32_t big;
        float sum = fmhai_fwd90_p8_row(acc_s, pa, hf, ms0, sl2, BN, LSE, &big);
        uint32_t grow = (big & FMHAI_P8_BIG_BITS) | (m_old == NEG_INF);
        grow |= __shfl_xor_sync(0xffffffffu, grow, 1);   /* the row's four lanes decide together */
        grow |= __shfl_xor_sync(0xffffffffu, grow, 2);
        float a = 1.f;
        if (__any_sync(0xffffffffu, grow)) {   /* (the whole warp: the max's shuffles) */
            const float mx = fmhai_fwd90_row_max(acc_s, hf, m_old, BN);
            if (grow && mx != NEG_INF) {
                const float ms = mx * sl2;
                a = m_old == NEG_INF ? 0.f : fmhai_exp2(ms0 - ms);
                sum = fmhai_fwd90_p8_row(acc_s, pa, hf, ms, sl2, BN, LSE, &big);
                row_max[hf] = mx;
            }
        }
        if (LSE) lse_sum[hf] = lse_sum[hf] * a + sum;
        row_sum[hf] *= a;
        alpha[hf] = a;
    }
    if (fmhai_count_lanes(alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
        for (int dt = 0; dt < HD / 8; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[4 * dt + e] *= alpha[e / 2];
    }
}

/* FP8: K rows of key tile [tok0, tok0 + BN) into its stage and V rows into
 * a staging tile (hd counts 16-bit columns: the e4m3 bytes / 2), one copy
 * group; contiguous, or paged through the tile's row pages `rows`. */
FMHAI_DEVICE void fmhai_fwd90_load_kv8(fmhai_smem_t dk, fmhai_smem_t dv, const fmhai_kv_src *ks,
                                       const fmhai_kv_src *vs, const int32_t *rows, int tok0, int s_k, int d,
                                       int hd, int BN, int tid, const fmhai_fwd_params *p, int PAGED)
{
    if (PAGED) {
        fmhai_wg_load_kv_rows(dk, dv, ks, vs, rows, tok0, s_k, d, hd, BN, 128, tid, p->page_log2, p->kv_off64);
    } else {
        fmhai_wg_load_kv(dk, ks, 0, tok0, s_k, d, hd, BN, 128, tid, 0, 0, FMHAI_WG_KV_CONTIG);
        fmhai_wg_load_kv(dv, vs, 0, tok0, s_k, d, hd, BN, 128, tid, 0, 0, FMHAI_WG_KV_CONTIG);
    }
    fmhai_copy_commit();
}

/* Paged FP8: the K and V descales of a page for KV head hk (1 without
 * per-page scaling: per-tensor descales fold into the logit scale). */
FMHAI_DEVICE float2 fmhai_fwd90_page_ds(const fmhai_fwd_params *p, int page, int hk)
{
    if (!p->k_page_descale) return make_float2(1.f, 1.f);
    const int64_t at = (int64_t)page * p->ds_page + (int64_t)hk * p->ds_head;
    return make_float2(p->k_page_descale[at], p->v_page_descale[at]);
}

/* Paged FP8: one row's descales into tile slot `slot` of sDs [3][K, V][BN],
 * and each warp's largest |V descale| into sVref [3][4] (the MMA warpgroups
 * take the tile's reference from those). Threads below BN: whole warps. */
FMHAI_DEVICE void fmhai_fwd90_put_ds(float *sDs, float *sVref, int slot, float2 ds, int BN, int ltid)
{
    if (ltid < BN) {
        sDs[slot * 2 * BN + ltid] = ds.x;
        sDs[slot * 2 * BN + BN + ltid] = ds.y;
        float m = fabsf(ds.y);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, fmhai_shfl_xor(m, o));
        if (ltid % 32 == 0) sVref[slot * 4 + ltid / 32] = m;
    }
}

/* Paged FP8, the MMA warpgroups: tile slot's V reference (the largest
 * |V descale| of its rows; 1 if none is positive). P is quantised as
 * P * vds / vref, so it stays <= 1 whatever the pages' scales, and O is kept
 * in units of the current tile's reference: *vratio (old / new reference)
 * rescales it with the softmax's alpha. */
FMHAI_DEVICE float fmhai_fwd90_vref(const float *sVref, int slot, int BN, float *vref, float *vratio)
{
    float m = sVref[slot * 4];
#pragma unroll
    for (int w = 1; w < BN / 32; ++w) m = fmaxf(m, sVref[slot * 4 + w]);
    m = m > 0.f ? m : 1.f;
    *vratio = *vref / m;   /* the first tile: 0 (O is still 0) */
    *vref = m;
    return 1.f / m;
}

/* MIX (bf16 queries on e4m3 pages), an MMA warpgroup once Q has landed:
 * its 64 bf16 rows of the Q tile (HD / 64 panels of [BM][128 bytes] from
 * sQ, rows wg * 64 ..) turned f16 in place, times 2^sh where sh puts the
 * largest |q| just under 2^15 (f16 holds bf16's 8 bits exactly from there
 * down to 2^-14 of it; clamped at 2^100 for queries near zero), with one
 * warpgroup barrier (bar) for the largest and one for the stores (fenced
 * for the products' proxy). The warps' maxima meet in scratch[4]. Returns
 * 2^-sh, the logits' factor. */
FMHAI_DEVICE float fmhai_fwd90_q_to_f16(fmhai_smem_t sQ, uint32_t *scratch, int HD, int BM, int wg, int wtid,
                                        int bar)
{
    const fmhai_smem_t base = sQ + (uint32_t)(wg * 64 * 128 + 16 * wtid);
    uint32_t m = 0u;
#pragma unroll 4
    for (int i = 0; i < HD / 16; ++i) {   /* 8 KB of a panel: 4 chunks a thread */
        uint32_t x[4];
        fmhai_lds_load16(x, base + (uint32_t)((i >> 2) * BM * 128 + (i & 3) * 2048));
#pragma unroll
        for (int e = 0; e < 4; ++e) m = max(m, max(x[e] & 0x7fffu, (x[e] >> 16) & 0x7fffu));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, (uint32_t)__shfl_xor_sync(0xffffffffu, (int)m, o));
    if (wtid % 32 == 0) scratch[wtid / 32] = m;
    fmhai_bar_sync(bar, 128);
    m = max(max(scratch[0], scratch[1]), max(scratch[2], scratch[3]));
    const int sh = m == 0u ? 0 : min(141 - (int)(m >> 7), 100);   /* |q| < 2^(e - 126) */
    const float f = __int_as_float((127 + sh) << 23);
#pragma unroll 4
    for (int i = 0; i < HD / 16; ++i) {
        const fmhai_smem_t a = base + (uint32_t)((i >> 2) * BM * 128 + (i & 3) * 2048);
        uint32_t x[4], y[4];
        fmhai_lds_load16(x, a);
#pragma unroll
        for (int e = 0; e < 4; ++e)
            y[e] = fmhai_pack2(__uint_as_float(x[e] << 16) * f, __uint_as_float(x[e] & 0xffff0000u) * f, 0);
        fmhai_lds_store16(a, y);
    }
    fmhai_wg_fence_smem();
    fmhai_bar_sync(bar, 128);
    return __int_as_float((127 - sh) << 23);
}

/* MIX, the load warpgroup: a landed e4m3 key tile widened to f16 in its
 * stage (fmhai_wg_widen_e4m3; the warpgroup's barrier first: each thread
 * waited for its own copies) and fenced for the products' proxy. */
FMHAI_DEVICE void fmhai_fwd90_widen_tile(fmhai_smem_t dk, fmhai_smem_t dv, int src, int HD, int BN, int ltid)
{
    fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
    fmhai_wg_widen_e4m3(dk, dv, src, HD, BN, ltid);
    fmhai_wg_fence_smem();
}

/* TMA: thread 0 of the load warpgroup sets up n mbarriers (one arrival
 * each: the issuing thread's expect_tx) and, with tile0_done, completes
 * barrier 0's first phase (K/V tile 0 is copied with cp.async; the bias
 * tiles all go by TMA); the warpgroup's barrier publishes them. */
FMHAI_DEVICE void fmhai_fwd90_tma_init(fmhai_smem_t bars, int n, int tile0_done, int ltid)
{
    if (ltid == 0) {
        for (int i = 0; i < n; ++i) fmhai_mbar_init(bars + 8 * i, 1);
        if (tile0_done) fmhai_mbar_arrive(bars);
    }
    fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
}

/* TMA: key tile [tok, tok + BN) of KV head hk into dk and dv, `blocks`
 * (K) and `vblocks` (V; either may be 0: the split streams load one each)
 * 128-byte column blocks of BN x 128 bytes (eb bytes an element), counted
 * on mbarrier bar. Contiguous (pages NULL): rows tok.. of batch entry kb,
 * one box a block. Paged LINEAR (the tile's row pages staged in `pages`):
 * one box a page, or the tile's part of one (boxes of min(page, BN) rows),
 * lane i of the load warpgroup's first warp issuing box i. e4m3 pages
 * (grp 0; maps of fmhai_tma_encode_kv): a box a block, its rows landing 128
 * bytes each from row i * box of the block. 16-bit pages (grp; maps of
 * fmhai_tma_encode_kv_grp): one box for every block, the tile in the
 * grouped layout (8-row groups of all the blocks' atoms, group g of the
 * page's pool row G = page * page / 8 + slot / 8), so a 16-token page is
 * one 4 KB box where it was two of 2 KB. */
FMHAI_DEVICE void fmhai_fwd90_tma_kv(const fmhai_fwd_params *p, fmhai_smem_t dk, fmhai_smem_t dv, fmhai_smem_t bar,
                                     int tok, int hk, int kb, int blocks, int vblocks, int BN, int eb,
                                     const int32_t *pages, int ltid, int grp)
{
    int r = 0, c1 = tok, c3 = kb;
    if (!pages) {   /* one thread, a box a block */
        if (ltid != 0) return;
        fmhai_mbar_expect_tx(bar, (blocks + vblocks) * BN * 128);
    } else {
        if (ltid >= 32) return;
        const int box = min(BN, 1 << p->page_log2);
        if (ltid == 0) fmhai_mbar_expect_tx(bar, (blocks + vblocks) * BN * 128);
        __syncwarp();
        if (ltid * box >= BN) return;
        r = ltid * box;
        c1 = (tok + r) & ((1 << p->page_log2) - 1);
        c3 = pages[r];
        if (grp) {
            const int G = (c3 << (p->page_log2 - 3)) + (c1 >> 3);
            if (blocks) fmhai_tma_load5(dk + r * blocks * 128, p->tma_k, 0, 0, 0, G, hk, bar);
            if (vblocks) fmhai_tma_load5(dv + r * vblocks * 128, p->tma_v, 0, 0, 0, G, hk, bar);
            return;
        }
    }
    for (int c = 0; c < max(blocks, vblocks); ++c) {
        if (c < blocks) fmhai_tma_load4(dk + c * BN * 128 + r * 128, p->tma_k, c * 128 / eb, c1, hk, c3, bar);
        if (c < vblocks) fmhai_tma_load4(dv + c * BN * 128 + r * 128, p->tma_v, c * 128 / eb, c1, hk, c3, bar);
    }
}

/* TMA (one thread, v_kmajor): K of key tile [key0, key0 + BN) (kblocks
 * boxes as fmhai_fwd90_tma_kv; 0: none) and its V^T (the map: keys, d,
 * nhead_k, batch; the 128-byte swizzle of the V^T stage), keys 0..127 by
 * tma_v into the 128-byte panel and, for 192-key tiles, 128..191 by tma_v2
 * into the 64-byte one vr d rows on (tile/vt8_layout.h), all counted on
 * bar. kext: V^T's keys (fmhai_vt8_keys). */
FMHAI_DEVICE void fmhai_fwd90_tma_kvt(const fmhai_fwd_params *p, fmhai_smem_t dk, fmhai_smem_t dvt, fmhai_smem_t bar,
                                      int tok, int key0, int kext, int hk, int b, int kblocks, int hd, int vr, int BN)
{
    fmhai_mbar_expect_tx(bar, kblocks * BN * 128 + hd * BN);
    for (int c = 0; c < kblocks; ++c) fmhai_tma_load4(dk + c * BN * 128, p->tma_k, c * 128, tok, hk, b, bar);
    fmhai_tma_load4(dvt, p->tma_v, key0, 0, hk, b, bar);
    /* a box wholly past the keys (a partial tile of at most 128 keys):
     * V^T's last 64 keys in its place, finite, under P = 0 */
    if (BN > 128)
        fmhai_tma_load4(dvt + vr * 128, p->tma_v2, key0 + 128 < kext ? key0 + 128 : max(kext - 64, 0), 0, hk, b, bar);
}

/* TMA (one thread): the bias tile of query rows [m0, m0 + BM) and keys
 * [k0, k0 + BN) into a slot of BN / 64 column blocks, counted on bar;
 * rows past s_q and keys past s_k land as zeros (the map's extents). */
FMHAI_DEVICE void fmhai_fwd90_tma_bias(const fmhai_fwd_params *p, fmhai_smem_t slot, fmhai_smem_t bar, int k0,
                                       int m0, int h, int b, int BM, int BN)
{
    const int hb = p->bias_head ? h : 0, bb = p->bias_batch ? b : 0;
    fmhai_mbar_expect_tx(bar, BM * BN * 2);
    for (int c = 0; c < BN / 64; ++c) fmhai_tma_load4(slot + c * BM * 128, p->tma_b, k0 + 64 * c, m0, hb, bb, bar);
}

/* Timeline hooks: a build may define FMHAI_FWD90_MARK(ev, it) to record
 * when each warp reaches event ev of key tile it (bench/fwd_trace.cu: the
 * SM clock, one block, lane 0; it sees the kernel's warp and lane). MMA
 * warpgroups: 0 loop top, 1 tile landed (FULL), 2 turn (TURN), 3 products
 * issued, 4 S done, 5 softmax done, 6 P V done (with the overlap; else the
 * same as 5), 7 P packed. Load warpgroup
 * (FP8): 0 tile landed, 1 its V^T stage free (EMPTY), 2 handed over, 3 the
 * K stage two tiles ahead free (KEMPTY); 16-bit: 0 tile j handed over, 1
 * stage wait begins, 2 stage free. Empty unless defined. */
#ifndef FMHAI_FWD90_MARK
#define FMHAI_FWD90_MARK(ev, it) ((void)0)
#endif
/* Block hooks: FMHAI_FWD90_BLOCK_MARK(ev) at events of the whole block
 * (bench/fwd_blocks.cu: thread 0's SM clock, every block): 0 the body
 * starts, 1 tile 0 and Q landed, 2 the first S done, 3 the last P V done
 * (the epilogue starts), 4 O stored. Empty unless defined. */
#ifndef FMHAI_FWD90_BLOCK_MARK
#define FMHAI_FWD90_BLOCK_MARK(ev) ((void)0)
#endif

FMHAI_DEVICE void fmhai_fwd_sm90_body(const fmhai_fwd_params *p, char *smem_raw, const int is_bf16, const int HD,
                                      const int HDV, const int BM, const int BN, const int NW, const int ST,
                                      const int HAS_MASK, const int SOFTCAP, const int AL, const int PAGING,
                                      const int KV_VEC, const int FP8, const int PDS, const int MIX)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    /* the row's ALiBi column: 1 ALiBi, 2 elementwise bias (the contiguous
     * 16-bit forward up to hdim 128; at 256 the registers are full and the
     * portable pipeline serves it: FMHAI_FWD90_SERVES) */
    const int ALIBI = AL == 1, BIAS = AL == 2 && !FP8 && PAGING == 0 && HD <= 128;
    const int NWG = NW / 4 - 1;      /* MMA warpgroups (2, or 3 at hdim 64) */
    const int NT = NWG * 128;        /* their threads */
    const int ALL = NT + 128;        /* + the load warpgroup's */
    const float NEG_INF = -__int_as_float(0x7f800000);
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    /* 16-bit hdim 256: the warpgroup from lane 0, which the compiler then
     * keeps, and the Q tile's wgmma descriptors made from it, in uniform
     * registers (from the thread index it moved each k-step's descriptor
     * into them with R2UR): +1-2% (bench/RESULTS.md, session 26); at hdim
     * 64 -2%, at 128 and e4m3 256 level (the latter's load warpgroup spilled
     * 16 bytes more) */
    const int wg = HD == 256 && !FP8 ? __shfl_sync(0xffffffffu, warp / 4, 0) : warp / 4;
    const int PAGED = PAGING != 0;
    /* FP8: e4m3 Q, K, V (bytes per element EB); a row of hd e4m3 bytes is
     * laid out as a 16-bit row of hd / 2 (HDC columns) */
    const int EB = FP8 ? 1 : 2, HDC = FP8 ? HD / 2 : HD, TY = FP8 ? 2 : is_bf16;
    /* MIX: bf16 queries on e4m3 pages (batch prefill, LINEAR, per-tensor
     * descales): the 16-bit pipeline computing in f16. The load warpgroup
     * lands each e4m3 tile in the upper half of its 16-bit stage and widens
     * it there (fmhai_wg_widen_e4m3, exact); each MMA warpgroup turns its Q
     * rows f16 under a power-of-two scale (fmhai_fwd90_q_to_f16) that
     * joins the logit scale; O leaves as bf16. KVB: K/V bytes an element. */
    const int KVB = FP8 || MIX ? 1 : 2;
    /* 16-bit LINEAR pages with tensor maps (dispatch/tma.h: pages of 4 KB
     * or more) land in the grouped layout (tile/warpgroup_mma.h: a
     * 16-token page one TMA box), read through its descriptors (KLAY, a
     * uniform run-time value); gathered pages keep the plain layout, whose
     * per-row copies form their addresses in fewer instructions (page 1
     * measured -3% grouped) */
    const int GRP = PAGED && !KV_VEC && !FP8 && !MIX && p->tma_kv;
    const int KLAY = KV_VEC ? FMHAI_WG_LAY_CMAJ : GRP ? FMHAI_WG_LAY_GRP : FMHAI_WG_LAY_SWZ;
    (void)NW;
    /* K and V as two streams (fmhai_fwd90_split_sync): at hdim 256 the ring
     * has two stages, and one barrier for a tile's K and V made each S
     * product wait for that tile's V too, whose slot frees only when the
     * slower warpgroup's P V two tiles back completes (bench/RESULTS.md,
     * session 13: the MMA warpgroups waited on FULL a third of each tile). */
#ifndef FMHAI_FWD90_SPLIT_ON
#define FMHAI_FWD90_SPLIT_ON(FP8, PAGING, HD, HDV, ST, NWG) \
    (!(FP8) && (PAGING) == 0 && (HD) == 256 && (HDV) == 256 && (ST) == 2 && (NWG) == 2)
#endif
    const int SPLIT = FMHAI_FWD90_SPLIT_ON(FP8, PAGING, HD, HDV, ST, NWG);
    /* the e4m3 row of two stages (contiguous hdim 256, 128 keys): K and V^T
     * handed over apart, 240 registers an MMA thread, 24 a load thread */
    const int FS2 = FP8 && ST == 2;
    const int SPN = FS2 ? 256 : 160;   /* a split hand-over's threads */
    /* FS2 with V given K-major (fmhai_fwd_params.v_kmajor: V^T in global
     * memory in the V^T stages' own key order, kernel/fp8_vt.h): V^T tiles
     * land by TMA straight into three V^T stages (the second staging tile's
     * room is the third), each on an mbarrier of its own that the MMA
     * warpgroups wait on (sBar + 32 + 8 s); no transpose. Stage s is free
     * again after P V of the tile that read it (EMPTY + s, 4..6: id 6 is a
     * V^T hand-over barrier only without VT). The host gives it only with
     * tensor maps (dispatch/tma.h). */
    const int VTK = FP8 && !PAGED && p->v_kmajor;   /* V^T given: FS2 or the hdim-128 rows */
    const int VT = FS2 && VTK;
    FMHAI_FWD90_BLOCK_MARK(0);

    /* ---- which rows, which keys (as the portable pipeline) --------------- */
    int m_block, h, b;
    fmhai_fwd_block_of(p, &m_block, &h, &b);   /* long rows first */
    fmhai_fwd_seq S;
    fmhai_fwd_seq_of(p, b, PAGED, 0, &S);
    const int s_q = S.s_q, s_k = S.s_k, q_start = S.q_start, b_eff = S.b_eff;
    const int m0 = m_block * BM;
    if (m0 >= s_q) return;
    const int hk = h / p->head_ratio;
    fmhai_fwd_keys W;
    fmhai_fwd_keys_of(p, HAS_MASK, m0, min(m0 + BM, s_q) - 1, s_q, s_k, BN, &W);

    const char *q_ptr = (const char *)p->q + EB * ((int64_t)b_eff * p->q_batch +
                        (int64_t)(q_start + m0) * p->q_row + (int64_t)h * p->q_head);

    /* ---- shared memory (1024-aligned for the swizzle atoms) ---------------- */
    const fmhai_smem_t raw = fmhai_smem_addr(smem_raw);
    /* 128 bytes of mbarriers first: the TMA ones [3] (one a stage; fp8: one
     * a staging tile; split streams: K [2], V [2]), the bias tiles' [3] at
     * 32, three MMA warpgroups' FULL [3] at 64 */
    const fmhai_smem_t sBar = raw, sFull3 = raw + 64u;
    const fmhai_smem_t sQ = (raw + 128u + 1023u) & ~1023u;
    /* K rows are HD wide, V rows HDV (MLA: 192 and 128; FP8: equal), in
     * 64-column panels of 128-byte rows: HDB / HVB bytes a row, 128 per panel
     * (head dims 32 and 96 leave their last panel half empty; its TMA box
     * zero-fills the columns past d) */
    const int HDB = (HD * EB + 127) / 128 * 128, HVB = (HDV * EB + 127) / 128 * 128;
    const int kv_bytes = BN * HDB;
    /* FP8: V^T [HD][BN], a 128-byte panel (+ a 64-byte one for keys 128..191
     * of a 192-key tile: tile/vt8_layout.h); VF (FMHAI_FWD90_VFOLD): 8 rows
     * of e4m3 ones after V^T's in each panel (VR d rows), which the load
     * warpgroup writes once */
    const int VF = FP8 && FMHAI_FWD90_VFOLD(HD, ST, PAGING, FP8), VR = HD + (VF ? 8 : 0);
    const int v_bytes = FP8 ? FMHAI_FWD90_VT8_STAGE(HD, BN, VF) : BN * HVB;
    const fmhai_smem_t sK = sQ + BM * HDB, sV = sK + ST * kv_bytes;
    /* paged: the page index of each row of the next two tiles [2][BN];
     * FP8: two staging tiles of V rows [2][BN][HD] instead */
    int32_t *sPage = (int32_t *)(smem_raw + (sV + ST * v_bytes - raw));
    const fmhai_smem_t sStage = sV + ST * v_bytes;
    /* paged FP8: per-key descales (fmhai_fwd90_put_ds), after the staging
     * tiles and the row pages [3][BN]; PDS: this copy of the body applies
     * them (per-page descales given), PDS_ROWS: the row has them (its
     * registers and shared memory are sized for them) */
    const int PDS_ROWS = FP8 && PAGED;
    const float *sDs8 = (const float *)(smem_raw + (sStage + 2 * kv_bytes - raw)) + 3 * BN;
    /* BIAS with a bias tensor map (TB): a [BM][BN] 16-bit bias slot a stage
     * (BN / 64 column blocks of [BM][128 bytes]) where paged and fp8 rows
     * keep their pages and staging tiles, and a TMA mbarrier a slot after
     * the K/V ones */
    const int TB = BIAS && p->tma_bias;
    const int b_bytes = BM * BN * 2;
    const fmhai_smem_t sB = sStage, sBBar = sBar + 32;

    /* Three MMA warpgroups: a stage's FULL is an mbarrier (the load
     * warpgroup's 128 arrivals), which each warpgroup waits on by itself; a
     * named barrier over all four warpgroups held every warpgroup at each
     * tile until the slowest arrived (bench/fwd_trace.cu: the first one
     * waited 800 cycles a tile), and there are too few for one a
     * warpgroup and stage. */
    if (NWG == 3) {
        if (tid == 0)
            for (int s = 0; s < ST; ++s) fmhai_mbar_init(sFull3 + 8 * s, 128);
        __syncthreads();
    }

    /* ---- the load warpgroup: Q with tile 0, then the ring ------------------ */
    if (warp >= 4 * NWG) {
        const int ltid = tid - NT;
        /* (the splits add up to the pool, 168 x 384: MIX's widening of four
         * chunks at a time spilled at 40, so it takes the paged e4m3 rows'
         * 224 + 56) */
        fmhai_wg_setmaxnreg_dec(NWG == 3 ? 32 : FS2 ? 24 : PDS_ROWS || MIX ? 56 : 40);
        /* a block without key tiles loads nothing, not even Q (its MMA
         * warpgroups only store zeros); a copy issued and left in flight
         * would land after the block has exited */
        if (W.n_iters == 0) return;
        fmhai_kv_src ks, vs;   /* where K and V come from */
        fmhai_kv_srcs_of(p, &S, hk, KVB, KV_VEC, &ks, &vs);
        if (FP8) {
            /* e4m3: K and V rows by cp.async (V into one of two staging
             * tiles) two tiles ahead; tile j is turned into V^T
             * (fmhai_wg_vt8_transpose) and handed over as soon as its copies
             * have landed (its V^T stage freed by P V of tile j - 3: EMPTY),
             * and only then does the warpgroup wait for tile j + 2's K stage
             * (KEMPTY: the MMA warpgroups are past the softmax of tile
             * j - 1). Waiting there for P V of tile j - 1 (one EMPTY for K
             * and V) held every hand-off behind the slower warpgroup's P V:
             * the MMA warpgroups stalled on FULL for a third of their time
             * (ncu). Waiting for tile j + 1's stage first put the transpose
             * between P V of tile j - 2 and S of tile j.
             * The warpgroup's own barrier (PAGES) publishes the copies before
             * the transpose reads them, the reads before a staging tile is
             * refilled, and (paged) the staged pages and descales.
             * Paged: tile i's row pages sit in sPg[i % 3] (read from the
             * table at iteration i - 3, staged at i - 2 before the copies),
             * its descales in sDs[i % 3] (read at i - 2 before the stage's
             * EMPTY wait, stored after it: tile i - 3 is done with the slot
             * then). Held across the transpose instead, they spilled. */
            if (VF) {   /* each V^T stage's ones rows (e4m3 1.0), published with tile 0 */
                const int p0 = 8 * 128 / 16, p1 = BN > 128 ? 8 * 64 / 16 : 0;   /* 16-byte words a panel */
                for (int i = ltid; i < ST * (p0 + p1); i += 128) {
                    const int st = i / (p0 + p1), w = i % (p0 + p1);
                    const fmhai_smem_t at =
                        sV + st * v_bytes + (w < p0 ? HD * 128 + 16 * w : VR * 128 + HD * 64 + 16 * (w - p0));
                    asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(at), "r"(0x38383838u));
                }
            }
            int32_t *sPg = (int32_t *)(smem_raw + (sStage + 2 * kv_bytes - raw));   /* [3][BN] */
            float *sDs = (float *)(sPg + 3 * BN), *sVref = sDs + 6 * BN;
            int pg_next = 0;
            const int tn = W.n_hi - 1;   /* tile i holds keys from (tn - i) * BN */
            if (PAGED) {
                for (int i = 0; i < 2 && i < W.n_iters; ++i) {
                    const int pg = ltid < BN ? fmhai_page_of(&ks, (tn - i) * BN + ltid, p->page_log2) : 0;
                    if (ltid < BN) sPg[i * BN + ltid] = pg;
                    if (PDS) fmhai_fwd90_put_ds(sDs, sVref, i, fmhai_fwd90_page_ds(p, pg, hk), BN, ltid);
                }
                if (ltid < BN && 2 < W.n_iters) pg_next = fmhai_page_of(&ks, (tn - 2) * BN + ltid, p->page_log2);
                fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
            }
            /* TMA (tensor maps: contiguous K/V, LINEAR pages >= 32): tiles after the first
             * (which may be partial: cp.async zero-fills its rows past s_k)
             * land on mbarrier j % 2, phase (j / 2) % 2; barrier 0's phase 0
             * is completed at once for tile 0 */
            const int TMA = p->tma_kv;
            if (VT && ltid == 0)
                for (int s3 = 0; s3 < 3; ++s3) fmhai_mbar_init(sBar + 32 + 8 * s3, 1);
            /* (V^T at hdim 128: tile 0's V^T lands by TMA on barrier 0) */
            if (TMA) fmhai_fwd90_tma_init(sBar, 2, !(VTK && !FS2), ltid);
            for (int i = 0; i < 2 && i < W.n_iters; ++i) {
                if (i == 0) fmhai_wg_load_tile(sQ, q_ptr, p->q_row, BM, s_q - m0, p->d / 2, HDC, 128, ltid);
                if (TMA && i > 0 && VTK && !FS2) {   /* tile 1: below */
                } else if (TMA && i > 0)
                    fmhai_fwd90_tma_kv(p, sK + i * kv_bytes, sStage + i * kv_bytes, sBar + 8 * i,
                                       (PAGED ? 0 : S.k_start) + (tn - i) * BN, hk, S.kv_b, HDB / 128,
                                       VT ? 0 : HDB / 128, BN, EB, PAGED ? sPg + i * BN : 0, ltid, 0);
                else if (VTK) {   /* K rows of tile 0 (V^T comes by TMA) */
                    fmhai_wg_load_kv(sK, &ks, 0, tn * BN, s_k, p->d / 2, HDC, BN, 128, ltid, 0, 0,
                                     FMHAI_WG_KV_CONTIG);
                    fmhai_copy_commit();
                } else
                    fmhai_fwd90_load_kv8(sK + i * kv_bytes, sStage + i * kv_bytes, &ks, &vs, sPg + i * BN,
                                         (tn - i) * BN, s_k, p->d / 2, HDC, BN, ltid, p, PAGED);
            }
            if (VT && ltid == 0)   /* V^T of tiles 0..2: every stage is free */
                for (int i = 0; i < 3 && i < W.n_iters; ++i)
                    fmhai_fwd90_tma_kvt(p, 0u, sV + i * v_bytes, sBar + 32 + 8 * i, 0, (tn - i) * BN, 0, hk, S.kv_b, 0,
                                        HD, VR, BN);
            if (VT) {
                /* V given K-major (TMA only): iteration j, tile j + 2's K
                 * once both MMA warpgroups' S has read tile j's (KEMPTY),
                 * then V^T of tile j + 3 once P V of tile j is done with its
                 * stage (EMPTY); tile 0's K (cp.async) handed over first. A
                 * loop of its own: as a branch of the transposing loop, the
                 * kernels without V^T hung on problems of three tiles or
                 * more (H100), a fault not found. */
                fmhai_copy_wait(0);
                fmhai_wg_fence_smem();
                fmhai_fwd90_split_arrive(0, 0, 256);
                for (int j = 0; j + 2 < W.n_iters; ++j) {
                    fmhai_bar_sync(fmhai_fwd90_bar_kempty(j & 1), ALL);   /* tile j's K read */
                    fmhai_fwd90_tma_kv(p, sK + (j & 1) * kv_bytes, sStage, sBar + 8 * (j & 1),
                                       S.k_start + (tn - 2 - j) * BN, hk, S.kv_b, HDB / 128, 0, BN, EB, 0, ltid, 0);
                    if (j + 3 < W.n_iters) {
                        fmhai_bar_sync(FMHAI_FWD90_BAR_EMPTY + j % 3, ALL);   /* P V of tile j */
                        if (ltid == 0)
                            fmhai_fwd90_tma_kvt(p, 0u, sV + (j % 3) * v_bytes, sBar + 32 + 8 * (j % 3), 0,
                                                (tn - 3 - j) * BN, 0, hk, S.kv_b, 0, HD, VR, BN);
                    }
                }
                return;
            }
            if (FS2) {
                /* Two stages (contiguous hdim 256, 128 keys): tile t's K is
                 * handed over as it lands, its V^T once transposed (VFULL).
                 * With tensor maps the MMA warpgroups wait for K of tiles
                 * 1.. on its TMA mbarrier themselves (a hand-over by this
                 * warpgroup waited for its previous transpose: 2-4% slower);
                 * else (and tile 0) FULL. Iteration j: tile j + 2's copies,
                 * once both MMA warpgroups' S has read tile j's K (KEMPTY;
                 * its staging tile was transposed an iteration before);
                 * then tile j + 1's transpose, once P V of tile j - 1 is
                 * done with its V^T stage (EMPTY) and its copies landed.
                 * With one hand-off a tile, S of tile j + 1 waited for V^T
                 * of tile j + 1, so for the other warpgroup's P V of tile
                 * j - 1 (20% slower). */
                for (int j = -1; j < W.n_iters; ++j) {
                    const int t = j + 1;
                    if (t < W.n_iters && (!TMA || t == 0)) {   /* TMA: the MMA warpgroups wait on its mbarrier */
                        if (!TMA && t == 0 && W.n_iters > 1) fmhai_copy_wait(1);
                        else fmhai_copy_wait(0);
                        fmhai_wg_fence_smem();   /* cp.async'd K (and Q) to the products' proxy */
                        fmhai_fwd90_split_arrive(t & 1, 0, 256);
                        FMHAI_FWD90_MARK(0, t);
                    }
                    if (j >= 0 && j + 2 < W.n_iters) {
                        fmhai_bar_sync(fmhai_fwd90_bar_kempty(j & 1), ALL);   /* tile j's K read */
                        FMHAI_FWD90_MARK(3, j);
                        if (TMA)
                            fmhai_fwd90_tma_kv(p, sK + (j & 1) * kv_bytes, sStage + (j & 1) * kv_bytes,
                                               sBar + 8 * (j & 1), S.k_start + (tn - 2 - j) * BN, hk, S.kv_b,
                                               HDB / 128, HDB / 128, BN, EB, 0, ltid, 0);
                        else
                            fmhai_fwd90_load_kv8(sK + (j & 1) * kv_bytes, sStage + (j & 1) * kv_bytes, &ks, &vs,
                                                 sPg, (tn - 2 - j) * BN, s_k, p->d / 2, HDC, BN, ltid, p, 0);
                    }
                    if (t < W.n_iters) {
                        if (t >= 2) fmhai_bar_sync(FMHAI_FWD90_BAR_EMPTY + (t & 1), ALL);   /* P V of tile t - 2 */
                        FMHAI_FWD90_MARK(1, t);
                        if (TMA && t > 0) fmhai_mbar_wait(sBar + 8 * (t & 1), (t >> 1) & 1);
                        fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);   /* every thread's copies landed */
                        fmhai_wg_vt8_transpose(sV + (t & 1) * v_bytes, sStage + (t & 1) * kv_bytes, HD, VR, BN, ltid);
                        fmhai_wg_fence_smem();
                        fmhai_fwd90_split_arrive(t & 1, 1, 256);
                        FMHAI_FWD90_MARK(2, t);
                    }
                }
                return;
            }
            if (VTK) {
                /* V given K-major, 192-key tiles (TMA only): tile j's K and
                 * V^T on barrier j % 2 (tile 0's K by cp.async), handed over
                 * together once landed (FULL); tile j + 2's copies once both
                 * MMA warpgroups are past S of tile j - 1 (KEMPTY) and P V
                 * of tile j - 1 (EMPTY), whose stage they refill. */
                const int kext = fmhai_vt8_keys(s_k);
                if (ltid == 0) {
                    fmhai_fwd90_tma_kvt(p, sK, sV, sBar, 0, tn * BN, kext, hk, S.kv_b, 0, HD, VR, BN);
                    if (W.n_iters > 1)
                        fmhai_fwd90_tma_kvt(p, sK + kv_bytes, sV + v_bytes, sBar + 8, S.k_start + (tn - 1) * BN,
                                            (tn - 1) * BN, kext, hk, S.kv_b, HDB / 128, HD, VR, BN);
                }
                for (int j = 0; j < W.n_iters; ++j) {
                    if (j == 0) fmhai_copy_wait(0);
                    fmhai_mbar_wait(sBar + 8 * (j & 1), (j >> 1) & 1);
                    if (j == 0) fmhai_wg_fence_smem();   /* cp.async'd K and Q to the products' proxy */
                    fmhai_fwd90_full_arrive(sFull3, j % ST, NWG);
                    if (j + 2 < W.n_iters) {
                        const int st = (j + 2) % ST;
                        if (j + 2 >= ST) {
                            fmhai_bar_sync(fmhai_fwd90_bar_kempty(st), ALL);   /* tile j - 1's K read */
                            fmhai_bar_sync(FMHAI_FWD90_BAR_EMPTY + st, ALL);   /* P V of tile j - 1 */
                        } else {
                            /* every load thread past its wait for tile j before the
                             * barrier is armed for tile j + 2: else a thread still
                             * polling phase parity 0 could see the barrier two
                             * phases on and wait for good */
                            fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
                        }
                        if (ltid == 0)
                            fmhai_fwd90_tma_kvt(p, sK + st * kv_bytes, sV + st * v_bytes, sBar + 8 * (j & 1),
                                                S.k_start + (tn - 2 - j) * BN, (tn - 2 - j) * BN, kext, hk,
                                                S.kv_b, HDB / 128, HD, VR, BN);
                    }
                }
                return;
            }
            for (int j = 0; j < W.n_iters; ++j) {
                if (TMA) {
                    if (j == 0) fmhai_copy_wait(0);
                    else fmhai_mbar_wait(sBar + 8 * (j & 1), (j >> 1) & 1);
                } else if (j + 1 < W.n_iters) {
                    fmhai_copy_wait(1);
                } else {
                    fmhai_copy_wait(0);
                }
                FMHAI_FWD90_MARK(0, j);
                if (PAGED && ltid < BN && j + 2 < W.n_iters) sPg[((j + 2) % 3) * BN + ltid] = pg_next;
                if (j >= ST) fmhai_bar_sync(FMHAI_FWD90_BAR_EMPTY + j % ST, ALL);   /* P V of tile j - 3 done */
                FMHAI_FWD90_MARK(1, j);
                fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
                fmhai_wg_vt8_transpose(sV + (j % ST) * v_bytes, sStage + (j & 1) * kv_bytes, HD, VR, BN, ltid);
                fmhai_wg_fence_smem();
                fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
                fmhai_fwd90_full_arrive(sFull3, j % ST, NWG);
                FMHAI_FWD90_MARK(2, j);
                if (j + 2 < W.n_iters) {
                    const int st = (j + 2) % ST;
                    float2 ds = make_float2(1.f, 1.f);
                    if (PDS && ltid < BN) ds = fmhai_fwd90_page_ds(p, pg_next, hk);   /* tile j + 2's */
                    if (j + 2 >= ST) fmhai_bar_sync(fmhai_fwd90_bar_kempty(st), ALL);   /* tile j - 1's K */
                    FMHAI_FWD90_MARK(3, j);
                    if (TMA)
                        fmhai_fwd90_tma_kv(p, sK + st * kv_bytes, sStage + (j & 1) * kv_bytes, sBar + 8 * (j & 1),
                                           (PAGED ? 0 : S.k_start) + (tn - 2 - j) * BN, hk, S.kv_b, HDB / 128,
                                           HDB / 128, BN, EB, PAGED ? sPg + ((j + 2) % 3) * BN : 0, ltid, 0);
                    else
                        fmhai_fwd90_load_kv8(sK + st * kv_bytes, sStage + (j & 1) * kv_bytes, &ks, &vs,
                                             sPg + ((j + 2) % 3) * BN, (tn - 2 - j) * BN, s_k, p->d / 2, HDC, BN,
                                             ltid, p, PAGED);
                    if (PAGED) {
                        if (PDS) fmhai_fwd90_put_ds(sDs, sVref, st, ds, BN, ltid);
                        if (ltid < BN && j + 3 < W.n_iters)
                            pg_next = fmhai_page_of(&ks, (tn - 3 - j) * BN + ltid, p->page_log2);
                    }
                }
            }
            return;
        }
        if (SPLIT) {
            /* Q and tile 0 (which may be partial: cp.async zero-fills) by the
             * warpgroup; then warp 0 streams K and warp 1 V: tile t goes
             * into slot t % 2 once the slot is free (K: both MMA
             * warpgroups past the S product of tile t - 2, KEMPTY; V: past
             * its P V, EMPTY), right after tile t - 1 is handed over (once
             * landed: one tile in flight a stream).
             * TMA (tensor maps): tile t on mbarrier (K 0 / V 2) + t % 2,
             * phase (t / 2) % 2, phase 0 of slot 0 completed at once. */
            const int lw = ltid / 32, ll = ltid % 32, TMA = p->tma_kv;
            if (TMA) {
                fmhai_fwd90_tma_init(sBar, 2, 1, ltid);
                fmhai_fwd90_tma_init(sBar + 16, 2, 1, ltid);
            }
            const int jk0 = (W.n_hi - 1) * BN;
            fmhai_wg_load_tile(sQ, q_ptr, 2 * p->q_row, BM, s_q - m0, p->d, HD, 128, ltid);
            fmhai_wg_load_kv(sK, &ks, sPage, jk0, s_k, p->d, HD, BN, 128, ltid, 0, 0, FMHAI_WG_KV_CONTIG);
            fmhai_wg_load_kv(sV, &vs, sPage, jk0, s_k, p->dv, HDV, BN, 128, ltid, 0, 0, FMHAI_WG_KV_CONTIG);
            fmhai_copy_commit();
            fmhai_copy_wait(0);
            fmhai_wg_fence_smem();
            fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
            if (lw >= 2) return;
            const fmhai_smem_t dst = lw ? sV : sK, bar = sBar + 16 * lw;
            const int bytes = lw ? v_bytes : kv_bytes;
            for (int t = 1; t <= W.n_iters; ++t) {
                /* tile t - 1 landed: hand it over (before the refill, whose
                 * wait for the slower warpgroup would hold it back) */
                const int pt = t - 1;
                if (TMA) {
                    fmhai_mbar_wait(bar + 8 * (pt % 2), (pt / 2) & 1);
                } else {
                    if (t > 1) fmhai_copy_wait(0);
                    fmhai_wg_fence_smem();
                    __syncwarp();
                }
                fmhai_fwd90_split_arrive(pt % 2, lw, 160);
                if (t < W.n_iters) {
                    const int sl = t % 2, jk = (W.n_hi - 1 - t) * BN;
                    if (t >= 2) fmhai_bar_sync(lw ? FMHAI_FWD90_BAR_EMPTY + sl : fmhai_fwd90_bar_kempty(sl), NT + 32);
                    if (TMA) {   /* one stream's blocks: K (warp 0) or V (warp 1) */
                        fmhai_fwd90_tma_kv(p, dst + sl * bytes, dst + sl * bytes, bar + 8 * sl, S.k_start + jk, hk,
                                           S.kv_b, lw ? 0 : HDB / 128, lw ? HVB / 128 : 0, BN, EB, 0, ll, 0);
                    } else {
                        fmhai_wg_load_kv(dst + sl * bytes, lw ? &vs : &ks, sPage, jk, s_k, lw ? p->dv : p->d,
                                         lw ? HDV : HD, BN, 32, ll, 0, 0, FMHAI_WG_KV_CONTIG);
                        fmhai_copy_commit();
                    }
                }
            }
            return;
        }
        const int K_KIND = !PAGED ? FMHAI_WG_KV_CONTIG : KV_VEC ? FMHAI_WG_KV_VEC_K : FMHAI_WG_KV_PAGED;
        const int V_KIND = !PAGED ? FMHAI_WG_KV_CONTIG : KV_VEC ? FMHAI_WG_KV_VEC_VT : FMHAI_WG_KV_PAGED;
        /* paged: tile j's row pages sit in sPage[j % 2], staged while tile
         * j - 1 was issued (the table read in flight across that tile's
         * waits) and published by the warpgroup's own barrier */
        if (PAGED) {
            if (ltid < BN) sPage[ltid] = fmhai_page_of(&ks, (W.n_hi - 1) * BN + ltid, p->page_log2);
            fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
        }
        /* each tile is handed over (FULL) as soon as it has landed; tile j
         * goes into stage j % ST once every MMA warpgroup is done with tile
         * j - ST (EMPTY). (Handing tile j - 1 over only after issuing tile j,
         * two tiles in flight, put the EMPTY wait and the issue before every
         * hand-off: 0.70 of the contiguous forward paged, and a deadlock with
         * 2 stages; measured, not kept.)
         * MIX (e4m3 pages, bf16 queries): a tile's e4m3 K and V rows land in
         * the upper half of its 16-bit stage (src bytes in) and are widened
         * there to f16 before the hand-over (fmhai_fwd90_widen_tile). Issuing
         * tiles further ahead or handing K over before V was widened
         * measured slower there too (bench/RESULTS.md, session 28). */
        const int src = MIX ? (HDB / 256) * BN * 128 : 0;   /* MIX: e4m3 rows in the upper panels */
        const int KBL = MIX ? HD / 128 : HDB / 128, VBL = MIX ? HD / 128 : HVB / 128;   /* 128-byte blocks */
        /* TMA (tensor maps: contiguous K/V, LINEAR pages >= 32): every tile
         * but a partial first one (cp.async zero-fills its rows past s_k)
         * lands on mbarrier j % ST, phase (j / ST) % 2; for a partial first
         * tile barrier 0's phase 0 is completed at once. (Q stays on
         * cp.async.) */
        const int TMA = !KV_VEC && p->tma_kv;
        const int T0 = TMA && W.n_hi * BN <= s_k;   /* tile 0 whole: by TMA */
        /* VECTORIZED V^T by bulk copies (fmhai_wg_load_vt_bulk; tma_kv: the
         * TMA unit may be used) on mbarrier j % ST, phase (j / ST) % 2, for
         * every tile but a partial one (cp.async, thread 0's plain arrival
         * completing the phase) */
        const int VB = V_KIND == FMHAI_WG_KV_VEC_VT && p->tma_kv && p->dv == HDV;
        if (TMA) fmhai_fwd90_tma_init(sBar, ST, !T0, ltid);
        if (VB) fmhai_fwd90_tma_init(sBar, ST, 0, ltid);
        if (TB) fmhai_fwd90_tma_init(sBBar, ST, 0, ltid);
        for (int j = 0; j < W.n_iters; ++j) {
            const int jk = (W.n_hi - 1 - j) * BN, st = j % ST;
            int next_page = 0;
            if (PAGED && ltid < BN && j + 1 < W.n_iters) next_page = fmhai_page_of(&ks, jk - BN + ltid, p->page_log2);
            if (j >= 1) {
                if (TMA && (j >= 2 || T0)) {
                    if (j == 1) {   /* Q */
                        fmhai_copy_wait(0);
                        fmhai_wg_fence_smem();
                    }
                    fmhai_mbar_wait(sBar + 8 * ((j - 1) % ST), ((j - 1) / ST) & 1);
                } else {
                    fmhai_copy_wait(0);
                    fmhai_wg_fence_smem();
                }
                if (TB) fmhai_mbar_wait(sBBar + 8 * ((j - 1) % ST), ((j - 1) / ST) & 1);
                if (VB) fmhai_mbar_wait(sBar + 8 * ((j - 1) % ST), ((j - 1) / ST) & 1);
                if (MIX) fmhai_fwd90_widen_tile(sK + ((j - 1) % ST) * kv_bytes, sV + ((j - 1) % ST) * v_bytes, src, HD, BN,
                                                ltid);
                fmhai_fwd90_full_arrive(sFull3, (j - 1) % ST, NWG);
                FMHAI_FWD90_MARK(0, j - 1);
            }
            FMHAI_FWD90_MARK(1, j);
            if (j >= ST) fmhai_bar_sync(FMHAI_FWD90_BAR_EMPTY + st, ALL);
            FMHAI_FWD90_MARK(2, j);
            if (j == 0) fmhai_wg_load_tile(sQ, q_ptr, 2 * p->q_row, BM, s_q - m0, p->d, HD, 128, ltid);
            if (TB && ltid == 0) fmhai_fwd90_tma_bias(p, sB + st * b_bytes, sBBar + 8 * st, jk, m0, h, b_eff, BM, BN);
            const int32_t *rows = sPage + (j & 1) * BN;
            if (TMA && (j > 0 || T0)) {
                fmhai_fwd90_tma_kv(p, sK + st * kv_bytes + src, sV + st * v_bytes + src, sBar + 8 * st,
                                   (PAGED ? 0 : S.k_start) + jk, hk, S.kv_b, KBL, VBL, BN, KVB,
                                   PAGED ? rows : 0, ltid, GRP);
            } else if (K_KIND == FMHAI_WG_KV_PAGED) {   /* K and V rows share their page lookups (HDV == HD) */
                if (GRP)   /* a partial first tile */
                    fmhai_wg_load_kv_rows_grp(sK + st * kv_bytes, sV + st * v_bytes, &ks, &vs, rows, jk, s_k, p->d,
                                              HD, BN, 128, ltid, p->page_log2);
                else
                    fmhai_wg_load_kv_rows(sK + st * kv_bytes + src, sV + st * v_bytes + src, &ks, &vs, rows, jk,
                                          s_k, p->d * KVB / 2, HD * KVB / 2, BN, 128, ltid, p->page_log2,
                                          p->kv_off64);
            } else {
                fmhai_wg_load_kv(sK + st * kv_bytes, &ks, rows, jk, s_k, p->d, HD, BN, 128, ltid, p->page_log2,
                                 p->kv_off64, K_KIND);
                if (VB && jk + BN <= s_k) {
                    fmhai_wg_load_vt_bulk(sV + st * v_bytes, &vs, rows, jk, HDV, BN, ltid, p->page_log2, p->kv_off64,
                                          sBar + 8 * st);
                } else {
                    fmhai_wg_load_kv(sV + st * v_bytes, &vs, rows, jk, s_k, p->dv, HDV, BN, 128, ltid, p->page_log2,
                                     p->kv_off64, V_KIND);
                    if (VB && ltid == 0) fmhai_mbar_arrive(sBar + 8 * st);
                }
            }
            fmhai_copy_commit();
            if (PAGED && j + 1 < W.n_iters) {
                /* every thread of the warpgroup has read slot (j + 1) % 2 for
                 * tile j - 1 before the previous barrier */
                if (ltid < BN) sPage[((j + 1) & 1) * BN + ltid] = next_page;
                fmhai_bar_sync(FMHAI_FWD90_BAR_PAGES, 128);
            }
        }
        {   /* the last tile: landed, handed over */
            const int j = W.n_iters - 1;
            if (TMA && (j >= 1 || T0)) {
                if (j == 0) {   /* Q */
                    fmhai_copy_wait(0);
                    fmhai_wg_fence_smem();
                }
                fmhai_mbar_wait(sBar + 8 * (j % ST), (j / ST) & 1);
            } else {
                fmhai_copy_wait(0);
                fmhai_wg_fence_smem();
            }
            if (TB) fmhai_mbar_wait(sBBar + 8 * (j % ST), (j / ST) & 1);
            if (VB) fmhai_mbar_wait(sBar + 8 * (j % ST), (j / ST) & 1);
            if (MIX) fmhai_fwd90_widen_tile(sK + (j % ST) * kv_bytes, sV + (j % ST) * v_bytes, src, HD, BN, ltid);
            fmhai_fwd90_full_arrive(sFull3, j % ST, NWG);
        }
        return;
    }
    fmhai_wg_setmaxnreg_inc(NWG == 3 ? 160 : FS2 ? 240 : PDS_ROWS || MIX ? 224 : 232);

    float acc_o[FMHAI_FWD_MAX_HD / 2];   /* HDV columns (QF: and 8 of P's row sums) */
    float row_max[2], row_sum[2];
#pragma unroll
    for (int i = 0; i < HDV / 2 + (VF ? 4 : 0); ++i) acc_o[i] = 0.f;
    row_max[0] = row_max[1] = NEG_INF;
    row_sum[0] = row_sum[1] = 0.f;
    fmhai_wg_fence_acc(acc_o, HDV / 2 + (VF ? 4 : 0));   /* the zeros in place before any product is in flight */
    /* FP8: the q and k descales scale the logits, v's the output (per
     * tensor, or this block's (b, hk): batch prefill leaves the strides 0) */
    float scale_log2 = p->scale_log2, softcap_pre = p->softcap_pre, o_scale = 1.f;
    if (FP8 || MIX) {
        const int64_t di = (int64_t)b * p->desc_batch + (int64_t)hk * p->desc_head;
        const float qk = (FP8 && p->q_descale ? p->q_descale[di] : 1.f) * (p->k_descale ? p->k_descale[di] : 1.f);
        scale_log2 *= qk;
        softcap_pre *= qk;
        o_scale = p->v_descale ? p->v_descale[di] : 1.f;
    }
    float vref = 0.f, vratio = 1.f, vinv = 1.f;   /* paged FP8: fmhai_fwd90_vref */
    float sl2 = fmhai_fwd90_sl2(SOFTCAP, ALIBI, BIAS, TB, scale_log2);   /* the LSE's scale (MIX: below) */
    float slope = 0.f;
    if (ALIBI) slope = p->alibi_slopes[(int64_t)b * p->alibi_batch + h] * 1.4426950408889634f;
    const char *bias_rows = BIAS ? fmhai_bias_rows(p, b_eff, h, q_start) : 0;
    /* TB: this lane's ldmatrix row address in bias slot 0 */
    const fmhai_smem_t sBl = TB ? fmhai_fwd90_bias_lane(sB, wg * 64 + (warp % 4) * 16, lane) : 0u;
    /* 16-bit bias words of the next tile's logits, fetched under its S
     * product (hdim 64; at 128 the 32 words spilled 36 bytes, so the
     * softmax loads them there) */
    const int BIAS_PRE = BIAS && HD <= 64, BIAS16 = BIAS_PRE && !TB && p->bias_dt != FMHA_DTYPE_FP32;
    uint32_t bw[2][FMHAI_FWD90_MAX_BN / 8];
    const int row0 = wg * 64 + (warp % 4) * 16 + g;   /* this thread's first row in the tile */
    /* dropout: 16-bit, contiguous K/V, the hdim-128 kernel, and the hdim-64
     * kernel of DROPOUT rows (AL 4; the registry sends every other problem
     * with dropout to one of those or to the portable pipeline,
     * FMHAI_FWD90_SERVES): at 256 O's 128 registers leave too few for the
     * Philox rounds (12 bytes spilled), and at 64 the code alone, never
     * run, cost the kernel without dropout 3% (at 128: within 1%), so only
     * the DROPOUT row carries it there */
    const int DROP = !FP8 && !PAGED && ((HD == 128 && HDV == 128) || (AL == 4 && HD == HDV && HD <= 128)) &&
                     p->dropout_thr != 0u;

    /* The MMA warpgroups take turns issuing their products (TURN + wg, in
     * warpgroup order): a turn issues the next tile's S and this tile's P V,
     * so one warpgroup's softmax runs while another's products hold the
     * tensor cores (ping-pong), and (OVL) a warpgroup's own softmax of the
     * next tile starts as soon as its S has landed, under its P V (intra-
     * warpgroup overlap: the first part of the softmax touches neither O nor
     * P's fragments; O is rescaled and P packed once P V has completed).
     * Warpgroup 0 goes first. */
    float acc_s[FMHAI_FWD90_MAX_BN / 2];
    uint32_t pa[FMHAI_FWD90_MAX_BN / 16][4];
    /* FP8 hdim 256, 64-key tiles (QREG): with Q and K both read from shared
     * memory, S (m64n64k32: 2 KB of each a k-step) asks 128 bytes a clock,
     * the SM's whole shared-memory bandwidth, against the copies and P V.
     * So each warp holds its 16 Q rows as e4m3 A fragments (32 registers,
     * read once Q has landed) and S reads only K: +1-4% (bench/RESULTS.md,
     * session 16). Not with a soft cap (12-24 bytes spilled) nor paged (224
     * registers with per-page descales). The default contiguous row now takes
     * 128-key tiles (FS2, 4-9% faster again); a build that predefines
     * FMHAI_TILES_SM90A_FP8FWDC_256 as the 64-key row gets this. */
    const int QREG = FP8 && HD == 256 && BN == 64 && !SOFTCAP && !PAGED;
    uint32_t qf[8][4];
    float oa[2];
    /* The intra-warpgroup overlap (OVL) keeps P's fragments live across
     * the softmax. Measured on an H200 (bench/RESULTS.md, session 10: after
     * the 192-key FP8 tiles and the lazy max) it gains the FP8 kernels
     * (hdim 256 +1-4%, hdim 128 +1.5-2%) and bf16 hdim 64 (+1-3%), and
     * costs bf16 hdim 128 (0 to -2%) and 256 (-12%); the BIAS rows spilled
     * 40-48 bytes with it, the FP8 hdim-128 SOFTCAP rows 24. ptxas puts
     * the wait for P V at the softmax's top all the same, so the gain is
     * the products' order; the wait held below the softmax (an anchor
     * product after it) measured 4-14% slower at e4m3 hdim 128, and a
     * second P buffer cannot be had (ptxas gives both the same registers:
     * bench/RESULTS.md, session 24). */
#ifndef FMHAI_FWD90_OVL
#define FMHAI_FWD90_OVL(FP8, HD, BIAS, SOFTCAP) \
    (((FP8) && ((HD) == 256 || !(SOFTCAP))) || (!(FP8) && (HD) == 64 && !(BIAS)))
#endif
    /* (FS2 with a soft cap: without the overlap it spilled 20 bytes less
     * and ran 4-5% faster, H100) */
    const int OVL = FMHAI_FWD90_OVL(FP8, HD, BIAS, SOFTCAP) && !SPLIT && !(FS2 && SOFTCAP);
    /* QSUM (the rows: FMHAI_FWD90_QSUM_ROW, policy/fwd_tiles.h): the
     * contiguous e4m3 rows without a soft cap on the lazy max, with O's row
     * sum that of the rounded P, from the tensor cores, so that O's
     * numerator and sum agree however P rounds (with the exact sum a nearly
     * one-hot row's O took the top P's rounding, up to 2^-4, at P up to
     * 2^8: why the other e4m3 rows keep the exact max); the LSE keeps the
     * exact sum (lse_sum). hdim 256 measured +1.5-5% with V^T given, level
     * with V rows (bench/RESULTS.md, session 21); hdim 128, with its own
     * softmax (QF below), +5-8% (session 35). The kernel info says so
     * (p8_qsum) and every e4m3 reference follows it (fmha_ref_fwd.p8_qsum;
     * the Python plan's "p8_qsum"). The rows always have the overlap
     * (FMHAI_FWD90_OVL). */
    const int QSUM = FMHAI_FWD90_QSUM_ROW(HD, ST, PAGING, FP8, SOFTCAP) && OVL;
    const int LAZY = FMHAI_FWD90_LAZY_ON(HDV, FP8, PDS_ROWS) || QSUM;
    /* QF: the hdim-128 rows' QSUM, P's row sums in P V itself (O's columns
     * 128..135: the V^T stages' ones rows, VF; taken out each tile,
     * fmhai_fwd90_qfold_take) and the softmax that packs P as it goes
     * (fmhai_fwd90_softmax8e), so P V completes before the softmax (ptxas
     * waited for it there all the same). As an m64n8 product of ones
     * beside each k-step (QN: the hdim-256 row's, 256 bytes of ones after
     * the staging tiles, tsum) it cost hdim 128 3-14% (session 34): six
     * more products a tile, against P V's 136 columns for 128. HOA: O's
     * accumulator columns, N of P V. */
    const int QF = QSUM && VF, QN = QSUM && !VF, HOA = HDV + (QF ? 8 : 0);
    const fmhai_smem_t sOnes = sStage + 2 * kv_bytes;
    const uint64_t ones = QN ? fmhai_wg_desc_ones(sOnes) : 0;
    float tsum[4] = { 0.f, 0.f, 0.f, 0.f }, lse_sum[2] = { 0.f, 0.f };
    if (QN) {
        if (tid < 64) fmhai_st_shared_u32(sOnes + 4 * tid, 0x38383838u);   /* e4m3 1.0 */
        fmhai_wg_fence_smem();
    }
    /* Causal-type masks: the block's first key tile (its last keys) may see
     * none of this warpgroup's 64 rows (192-row blocks, or 80-key tiles: a
     * warpgroup's rows end up to a tile before the block's). The warpgroup
     * then takes that tile's turn without products (k0 = 1): processing it
     * would leave its rows' max, sum and O as they are. 16-bit rows without
     * a split ring or bias tiles, whose stages are handed over apart. k0
     * comes from lane 0, so that the key loop that starts at it stays
     * uniform (stage addresses and wgmma descriptors in uniform registers;
     * from the warpgroup index it cost the loop 32 R2UR and 3-6%). */
    const int SKIP0 = HAS_MASK && !FP8 && !SPLIT && !FS2;
    int k0 = 0;
    if (SKIP0) {
        if (!TB && W.n_iters > 1 && m0 + wg * 64 < s_q) {
            fmhai_fwd_keys Ww;
            fmhai_fwd_keys_of(p, HAS_MASK, m0 + wg * 64, min(m0 + wg * 64 + 64, s_q) - 1, s_q, s_k, BN, &Ww);
            k0 = Ww.n_iters > 0 && Ww.n_hi < W.n_hi;
        }
        k0 = __shfl_sync(0xffffffffu, k0, 0);
    }
    /* One branch holds every product (first S, the loop, the peeled last
     * tile) and ends with wait(0): ptxas then sees no path into the epilogue
     * with a product in flight. Split over separate branches it either
     * injected a wait (C7517) or, with the wait after them, serialised every
     * wgmma (C7515, 25% slower). */
    if (W.n_iters > 0) {
        if (wg == NWG - 1) fmhai_bar_arrive(FMHAI_FWD90_BAR_TURN + 0, 256);
        if (k0) {   /* tile 0: its turn and its stage, no products */
            fmhai_fwd90_full_sync(sFull3, 0, 0, ST, wg, NWG);
            fmhai_bar_sync(FMHAI_FWD90_BAR_TURN + wg, 256);
            fmhai_bar_arrive(FMHAI_FWD90_BAR_TURN + (wg + 1) % NWG, 256);
            if (ST < W.n_iters) fmhai_bar_arrive(FMHAI_FWD90_BAR_EMPTY + 0, ALL);
        }
        if (SPLIT || FS2) fmhai_fwd90_split_sync(0, wg, 0, SPN);   /* K of tile 0 and Q landed */
        else fmhai_fwd90_full_sync(sFull3, k0, k0, ST, wg, NWG);   /* tile k0 and Q landed */
        if (MIX) {   /* Q to f16 (barriers TURN + 2 + wg: free with two MMA warpgroups) */
            const float qf16 = fmhai_fwd90_q_to_f16(sQ, (uint32_t *)(smem_raw + 64) + 4 * wg, HD, BM, wg, tid % 128,
                                                    FMHAI_FWD90_BAR_TURN + 2 + wg);
            scale_log2 *= qf16;
            softcap_pre *= qf16;
            sl2 = fmhai_fwd90_sl2(SOFTCAP, ALIBI, BIAS, TB, scale_log2);
        }
        FMHAI_FWD90_BLOCK_MARK(1);
        if (QREG) fmhai_wg_load_afrags(qf, sQ, BM, row0 - g, lane, HD / 32);
        fmhai_bar_sync(FMHAI_FWD90_BAR_TURN + wg, 256);
        fmhai_wg_fence();
        if (QREG)
            fmhai_wg_gemm_rbt(acc_s, qf, fmhai_opaque_smem(sK), HD, 2, 0);
        else
            fmhai_wg_gemm_abt(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), BM,
                              fmhai_opaque_smem(sK + k0 * kv_bytes), BN, HDC, TY, KLAY);
        fmhai_bar_arrive(FMHAI_FWD90_BAR_TURN + (wg + 1) % NWG, 256);
        if (BIAS16) fmhai_fwd90_bias_fetch(bw, p, bias_rows, m0 + row0, W.n_hi - 1 - k0, BN, t, s_q, s_k);
        fmhai_wg_wait(0);   /* S of tile k0 done */
        fmhai_wg_fence_acc(acc_s, BN / 2);
        /* FS2: a K slot is free once S has read it (at two stages the load
         * warpgroup refills it for the tile after next) */
        if (FS2 && ST < W.n_iters) fmhai_bar_arrive(fmhai_fwd90_bar_kempty(0), ALL);
        FMHAI_FWD90_BLOCK_MARK(2);
        if (PDS) vinv = fmhai_fwd90_vref(sDs8 + 6 * BN, 0, BN, &vref, &vratio);
        if (QF) {
            fmhai_fwd90_logits(acc_s, p, &W, W.n_hi - 1 - k0, m0, row0, s_q, s_k, slope, t, BN, SOFTCAP, ALIBI, BIAS,
                               bias_rows, BIAS_PRE, bw, TB ? sBl : 0u, BM, scale_log2, softcap_pre, 0);
            if (p->lse) fmhai_fwd90_softmax8e(acc_s, acc_o, pa, row_max, row_sum, lse_sum, 1, HDV, BN, sl2);
            else fmhai_fwd90_softmax8e(acc_s, acc_o, pa, row_max, row_sum, lse_sum, 0, HDV, BN, sl2);
        } else {
            fmhai_fwd90_softmax(acc_s, oa, row_max, row_sum, p, &W, W.n_hi - 1 - k0, m0, row0, s_q, s_k, slope, t, BN,
                                LAZY, SOFTCAP, ALIBI, BIAS, bias_rows, BIAS_PRE, bw, TB ? sBl : 0u, BM, scale_log2,
                                softcap_pre, PDS ? sDs8 : 0, vratio, QSUM ? lse_sum : 0);
            fmhai_fwd90_rescale_pack(acc_s, acc_o, pa, oa, t, is_bf16, HDV, BN, FP8, LAZY, PDS ? sDs8 + BN : 0, vinv);
        }
        if (DROP) fmhai_fwd90_dropout(pa, p, (uint32_t)(b * p->nhead_q + h), m0 + row0, W.n_hi - 1 - k0, BN, g, t);
        if (FP8 && !FS2 && ST < W.n_iters) fmhai_bar_arrive(fmhai_fwd90_bar_kempty(0), ALL);
        if (SPLIT && ST < W.n_iters) fmhai_bar_arrive(fmhai_fwd90_bar_kempty(0), NT + 32);   /* K slot 0 read */
        /* tiles 0 .. n_iters - 2 issue the next tile's S and their P V in
         * their turn; the last tile (peeled: wgmma issued under a branch
         * serialises the pipeline) only its P V */
#pragma unroll 1
        for (int it = k0; it + 1 < W.n_iters; ++it) {
            const int buf = it % ST, nbuf = (it + 1) % ST, vbuf = VT ? it % 3 : buf;   /* vbuf: V^T stage */
            FMHAI_FWD90_MARK(0, it);
            /* ---- this warpgroup's turn: S of tile it + 1 and O += P V -------- */
            /* tile it + 1 landed. (ptxas moves this barrier and the turn's
             * into the FP8 softmax, ahead of the last exps and packs; a
             * data dependency that kept them after P's packing removed
             * those stalls but measured 3% slower at FP8 hdim 128 and 6-8%
             * at bf16 hdim 64: bench/RESULTS.md) */
            if (SPLIT || FS2) {   /* K of tile it + 1 and V of tile it landed */
                if (FS2 && p->tma_kv)   /* tile it + 1 by TMA: its mbarrier */
                    fmhai_mbar_wait(sBar + 8 * nbuf, ((it + 1) >> 1) & 1);
                else fmhai_fwd90_split_sync(nbuf, wg, 0, SPN);
                if (VT) fmhai_mbar_wait(sBar + 32 + 8 * vbuf, (it / 3) & 1);
                else fmhai_fwd90_split_sync(buf, wg, 1, SPN);
            } else {
                fmhai_fwd90_full_sync(sFull3, nbuf, it + 1, ST, wg, NWG);
            }
            FMHAI_FWD90_MARK(1, it);
            fmhai_bar_sync(FMHAI_FWD90_BAR_TURN + wg, 256);
            FMHAI_FWD90_MARK(2, it);
            fmhai_wg_fence_acc(acc_o, HOA / 2);
            if (QN) fmhai_wg_fence_acc(tsum, 4);
            fmhai_wg_fence();
            if (!OVL) {
                if (FP8) fmhai_wg_gemm_rs8(acc_o, pa, sV + vbuf * v_bytes, HD, VR, BN);
                else fmhai_wg_gemm_rs(acc_o, pa, sV + buf * v_bytes, HDV, BN, is_bf16, KLAY);
            }
            if (QREG)
                fmhai_wg_gemm_rbt(acc_s, qf, fmhai_opaque_smem(sK + nbuf * kv_bytes), HD, 2, 0);
            else
                fmhai_wg_gemm_abt(acc_s, fmhai_opaque_smem(sQ + wg * 64 * 128), BM,
                                  fmhai_opaque_smem(sK + nbuf * kv_bytes), BN, HDC, TY, KLAY);
            if (OVL) {
                if (FP8) fmhai_wg_gemm_rs8_sum(acc_o, QN ? tsum : 0, pa, sV + vbuf * v_bytes, HOA, VR, BN, ones);
                else fmhai_wg_gemm_rs(acc_o, pa, sV + buf * v_bytes, HDV, BN, is_bf16, KLAY);
            }
            fmhai_bar_arrive(FMHAI_FWD90_BAR_TURN + (wg + 1) % NWG, 256);
            FMHAI_FWD90_MARK(3, it);
            /* the next tile's bias words, under its S product */
            if (BIAS16) fmhai_fwd90_bias_fetch(bw, p, bias_rows, m0 + row0, W.n_hi - 2 - it, BN, t, s_q, s_k);
            if (!OVL) {   /* P V of tile it done, then S of tile it + 1 */
                fmhai_wg_wait(1);
                fmhai_wg_fence_acc(acc_o, HDV / 2);
                if (it + (VT ? 3 : ST) < W.n_iters)
                    fmhai_bar_arrive(FMHAI_FWD90_BAR_EMPTY + vbuf, SPLIT ? NT + 32 : ALL);
                fmhai_wg_wait(0);
                /* split streams: tile it + 1's K slot is read */
                if (SPLIT && it + 1 + ST < W.n_iters) fmhai_bar_arrive(fmhai_fwd90_bar_kempty(nbuf), NT + 32);
            } else if (QF) {   /* S of tile it + 1 and P V of tile it done */
                fmhai_wg_wait(0);
                fmhai_wg_fence_acc(acc_o, HOA / 2);
                fmhai_fwd90_qfold_take(acc_o + HDV / 2, row_sum);
                if (it + ST < W.n_iters) fmhai_bar_arrive(FMHAI_FWD90_BAR_EMPTY + vbuf, ALL);
            } else {      /* S of tile it + 1 done; P V of tile it may still run */
                fmhai_wg_wait(1);
            }
            fmhai_wg_fence_acc(acc_s, BN / 2);
            if (FS2 && it + 1 + ST < W.n_iters) fmhai_bar_arrive(fmhai_fwd90_bar_kempty(nbuf), ALL);
            FMHAI_FWD90_MARK(4, it);
            if (PDS) vinv = fmhai_fwd90_vref(sDs8 + 6 * BN, nbuf, BN, &vref, &vratio);
            if (QF) {
                fmhai_fwd90_logits(acc_s, p, &W, W.n_hi - 2 - it, m0, row0, s_q, s_k, slope, t, BN, SOFTCAP, ALIBI,
                                   BIAS, bias_rows, BIAS_PRE, bw, TB ? sBl + nbuf * b_bytes : 0u, BM, scale_log2,
                                   softcap_pre, 0);
                if (p->lse) fmhai_fwd90_softmax8e(acc_s, acc_o, pa, row_max, row_sum, lse_sum, 1, HDV, BN, sl2);
                else fmhai_fwd90_softmax8e(acc_s, acc_o, pa, row_max, row_sum, lse_sum, 0, HDV, BN, sl2);
            } else {
                fmhai_fwd90_softmax(acc_s, oa, row_max, row_sum, p, &W, W.n_hi - 2 - it, m0, row0, s_q, s_k, slope, t,
                                    BN, LAZY, SOFTCAP, ALIBI, BIAS, bias_rows, BIAS_PRE, bw,
                                    TB ? sBl + nbuf * b_bytes : 0u, BM, scale_log2, softcap_pre,
                                    PDS ? sDs8 + nbuf * 2 * BN : 0, vratio, QSUM ? lse_sum : 0);
            }
            FMHAI_FWD90_MARK(5, it);
            if (OVL && !QF) {    /* P V of tile it done: O and P's registers are free */
                fmhai_wg_wait(0);
                fmhai_wg_fence_acc(acc_o, HDV / 2);
                /* QSUM: tile it's sum of the rounded P, in units of tile it +
                 * 1's max as O after its rescale (oa: alpha, vratio 1); one
                 * lane of the quad adds the row's whole sum */
                if (QN) fmhai_fwd90_qsum_add(row_sum, tsum, oa[0], oa[1], t);
                /* tile it's stage is free for tile it + ST (the load
                 * warpgroup waits only for the stages it refills) */
                if (it + (VT ? 3 : ST) < W.n_iters) fmhai_bar_arrive(FMHAI_FWD90_BAR_EMPTY + vbuf, ALL);
            }
            FMHAI_FWD90_MARK(6, it);
            if (!QF)
                fmhai_fwd90_rescale_pack(acc_s, acc_o, pa, oa, t, is_bf16, HDV, BN, FP8, LAZY,
                                         PDS ? sDs8 + nbuf * 2 * BN + BN : 0, vinv);
            FMHAI_FWD90_MARK(7, it);
            if (DROP) fmhai_fwd90_dropout(pa, p, (uint32_t)(b * p->nhead_q + h), m0 + row0, W.n_hi - 2 - it, BN, g, t);
            /* FP8: tile it + 1's K stage and (paged) descales are free for
             * tile it + 1 + ST */
            if (FP8 && !FS2 && it + 1 + ST < W.n_iters) fmhai_bar_arrive(fmhai_fwd90_bar_kempty(nbuf), ALL);
        }
        const int it = W.n_iters - 1;
        if (VT) fmhai_mbar_wait(sBar + 32 + 8 * (it % 3), (it / 3) & 1);   /* V^T of the last tile landed */
        else if (SPLIT || FS2) fmhai_fwd90_split_sync(it % ST, wg, 1, SPN);
        fmhai_bar_sync(FMHAI_FWD90_BAR_TURN + wg, 256);
        fmhai_wg_fence_acc(acc_o, HOA / 2);
        if (QN) fmhai_wg_fence_acc(tsum, 4);
        fmhai_wg_fence();
        if (FP8)
            fmhai_wg_gemm_rs8_sum(acc_o, QN ? tsum : 0, pa, sV + (VT ? it % 3 : it % ST) * v_bytes, HOA, VR, BN,
                                  ones);
        else fmhai_wg_gemm_rs(acc_o, pa, sV + (it % ST) * v_bytes, HDV, BN, is_bf16, KLAY);
        fmhai_bar_arrive(FMHAI_FWD90_BAR_TURN + (wg + 1) % NWG, 256);
        fmhai_wg_wait(0);
        fmhai_wg_fence_acc(acc_o, HOA / 2);
        if (QN) fmhai_fwd90_qsum_add(row_sum, tsum, 1.f, 1.f, t);   /* the last tile's */
        if (QF) fmhai_fwd90_qfold_take(acc_o + HDV / 2, row_sum);
    }
    if (PDS) o_scale *= vref;
    if (DROP) o_scale *= p->dropout_scale;   /* the kept elements' 256 / (256 - thr) */
    /* every turn arrival is matched: warpgroup 0 takes the last one's last */
    if (W.n_iters > 0 && wg == 0) fmhai_bar_sync(FMHAI_FWD90_BAR_TURN + 0, 256);

    /* ---- epilogue ------------------------------------------------------------ */
    FMHAI_FWD90_BLOCK_MARK(3);
    const float LN2 = 0.6931471805599453f;
    char *o_ptr = (char *)p->o + 2 * ((int64_t)b_eff * p->o_batch + (int64_t)(q_start + m0) * p->o_row +
                                      (int64_t)h * p->o_head);
    float inv[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        float sum = row_sum[hf];
        if (!QF) {   /* the quad's partial sums (QF: every lane holds the row's whole sum) */
            sum += fmhai_shfl_xor(sum, 1);
            sum += fmhai_shfl_xor(sum, 2);
        }
        /* QSUM: O's sum is the rounded P's, the LSE's the exact one (lsum) */
        float lsum = QSUM ? lse_sum[hf] : 0.f;
        if (QSUM) {
            lsum += fmhai_shfl_xor(lsum, 1);
            lsum += fmhai_shfl_xor(lsum, 2);
        }
        float m_ln = row_max[hf] * sl2 * LN2, f = 1.f;   /* the LSE's offset, natural log */
        if (p->sinks) {
            float m_same;   /* the sink joins both sums alike (both > 0 or both 0) */
            if (QSUM) (void)fmhai_sink_fold(p->sinks[h], row_max[hf] * sl2, &lsum, &m_same);
            f = fmhai_sink_fold(p->sinks[h], row_max[hf] * sl2, &sum, &m_ln);
        }
        if (!QSUM) lsum = sum;
        inv[hf] = sum > 0.f ? f * o_scale / sum : 0.f;
        const int row = row0 + 8 * hf;
        if (p->lse && t == 0 && m0 + row < s_q) {
            const float lse = lsum > 0.f ? m_ln + logf(lsum) : NEG_INF;
            const int64_t li = p->seqstart_q ? (int64_t)h * p->lse_head + q_start + m0 + row
                                             : (int64_t)b * p->lse_batch + (int64_t)h * p->lse_head + m0 + row;
            p->lse[li] = lse;
        }
    }
    /* O rows 16-byte aligned: each warp stages its 16 rows of O in shared
     * memory in 128-byte column blocks of 16 rows with the 128-byte swizzle
     * (the fragment stores and the row reads conflict-free; a TMA box),
     * then one lane stores them by TMA (tma_out, the warp's rows inside the
     * sequence) or the warp stores whole rows with 16-byte vectors. 16-bit
     * rows stage in the warp's own rows of the Q tile (its warpgroup's S
     * products are done, and nothing refills Q; block stride BM x 128
     * bytes); e4m3 rows, whose Q rows are narrower than O's, in the V
     * staging tiles (the last transpose is done; block stride 16 x 128), in
     * NP passes of PC columns where those hold less than the block's O.
     * Stored from the fragments (4 bytes a thread, 16 of a row a warp
     * instruction), the epilogue took 4,200 cycles of a 2k block's 52,000
     * (bench/RESULTS.md, session 15); the vector stores were a warp's
     * slowest part, ~150 cycles each (session 22: TMA). */
    const int NP = FP8 ? (NT / 32 * 16 * HDV * 2 + 2 * kv_bytes - 1) / (2 * kv_bytes) : 1, PC = HDV / NP;
    const int OSM = (!FP8 || PC % 64 == 0) && ((p->o_row | p->o_head | p->o_batch) & 7) == 0 &&
                    ((uintptr_t)p->o & 15) == 0;
    if (OSM) {
        const int wrow = row0 - g;   /* the warp's first row */
        const fmhai_smem_t ob = FP8 ? sStage + (uint32_t)(wrow * PC * 2) : sQ + (uint32_t)(wrow * 128);
        const int RS = 128, BS = FP8 ? 16 * 128 : BM * 128;   /* row and 64-column block strides */
        const int CH = PC / 8;   /* 16-byte chunks of a row a pass */
        const int TMO = p->tma_out && m0 + wrow + 16 <= s_q;   /* the warp's rows by TMA */
#pragma unroll
        for (int ps = 0; ps < NP; ++ps) {
            if (ps > 0) __syncwarp();   /* the previous pass's reads are done */
#pragma unroll
            for (int dq = 0; dq < CH; ++dq)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int r = g + 8 * hf, dt = ps * CH + dq;
                    const uint32_t at = (uint32_t)((dq >> 3) * BS + r * RS + (((dq & 7) ^ (r & 7)) << 4) + 4 * t);
                    fmhai_st_shared_u32(ob + at, fmhai_pack2(acc_o[4 * dt + 2 * hf] * inv[hf],
                                                             acc_o[4 * dt + 2 * hf + 1] * inv[hf], is_bf16 || FP8 || MIX));
                }
            if (TMO) {
                fmhai_wg_fence_smem();   /* the lanes' stores, seen by the TMA unit */
                __syncwarp();
                if (lane == 0) {
#pragma unroll
                    for (int c = 0; c < (PC + 63) / 64; ++c)
                        if (ps * PC + 64 * c < p->dv)
                            fmhai_tma_store4(p->tma_o, ob + (uint32_t)(c * BS), ps * PC + 64 * c, q_start + m0 + wrow, h,
                                             b_eff);
                    fmhai_tma_store_wait_read();   /* the staging is free again (and may be left) */
                }
                __syncwarp();
                continue;
            }
            __syncwarp();
            /* every load of the pass first, then the stores, and constant
             * indices only: with the chunk's last-column case indexing v at
             * run time, v went through the stack and each chunk waited for
             * its load before the next was issued (the e4m3 hdim-256
             * epilogue took 6,400 cycles; bench/RESULTS.md, session 22) */
            uint32_t v[16 * FMHAI_FWD_MAX_HD / 8 / 32][4];
#pragma unroll
            for (int i = 0; i < 16 * CH / 32; ++i) {
                const int k = i * 32 + lane, r = k / CH, c = k % CH;
                fmhai_lds_load16(v[i], ob + (uint32_t)((c >> 3) * BS + r * RS + (((c & 7) ^ (r & 7)) << 4)));
            }
#pragma unroll
            for (int i = 0; i < 16 * CH / 32; ++i) {
                const int k = i * 32 + lane, r = k / CH, c = k % CH, row = wrow + r, cg = ps * CH + c;
                if (m0 + row >= s_q || 8 * cg >= p->dv) continue;
                char *dst = o_ptr + 2 * ((int64_t)row * p->o_row + 8 * cg);
                if (8 * cg + 8 <= p->dv) {
                    *(uint4 *)dst = make_uint4(v[i][0], v[i][1], v[i][2], v[i][3]);
                } else {   /* the last chunk of a head dim that is not a multiple of 8 */
#pragma unroll
                    for (int e = 0; e < 8; ++e)
                        if (8 * cg + e < p->dv)
                            *(unsigned short *)(dst + 2 * e) = (unsigned short)(v[i][e / 2] >> (16 * (e & 1)));
                }
            }
        }
    } else {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            const int row = row0 + 8 * hf;
            if (m0 + row >= s_q) continue;
            char *orow = o_ptr + 2 * (int64_t)row * p->o_row;
#pragma unroll
            for (int dt = 0; dt < HDV / 8; ++dt) {
                const int col = dt * 8 + 2 * t;
                if (col < p->dv)
                    *(uint32_t *)(orow + 2 * col) = fmhai_pack2(acc_o[4 * dt + 2 * hf] * inv[hf],
                                                                acc_o[4 * dt + 2 * hf + 1] * inv[hf], is_bf16 || FP8 || MIX);
            }
        }
    }
    FMHAI_FWD90_BLOCK_MARK(4);
#else
    (void)p; (void)smem_raw; (void)is_bf16; (void)HD; (void)HDV; (void)BM; (void)BN; (void)NW; (void)HAS_MASK;
    (void)SOFTCAP; (void)AL; (void)PAGING; (void)KV_VEC; (void)FP8; (void)PDS; (void)MIX;
#endif
}

/* The kernel body; paged FP8 has two copies of it (a uniform branch on
 * the arguments): the per-key descale code (fmhai_fwd90_put_ds / _vref,
 * the score and P multiplies) runs only where per-page descales are given.
 * With per-tensor descales, which fold into the scales as in the
 * contiguous forward, that code had cost the e4m3 prefill 18-28%
 * (bench/RESULTS.md, session 14). */
FMHAI_DEVICE void fmhai_fwd_sm90(const fmhai_fwd_params *p, char *smem_raw, const int is_bf16, const int HD,
                                 const int HDV, const int BM, const int BN, const int NW, const int ST, const int HAS_MASK,
                                 const int SOFTCAP, const int AL, const int PAGING, const int KV_VEC,
                                 const int FP8)
{
    if (FP8 && PAGING && p->k_page_descale)
        fmhai_fwd_sm90_body(p, smem_raw, is_bf16, HD, HDV, BM, BN, NW, ST, HAS_MASK, SOFTCAP, AL, PAGING, KV_VEC, FP8, 1,
                            0);
    else
        fmhai_fwd_sm90_body(p, smem_raw, is_bf16, HD, HDV, BM, BN, NW, ST, HAS_MASK, SOFTCAP, AL, PAGING, KV_VEC, FP8, 0,
                            0);
}

/* The kernel body of an e4m3 paged row's kernel for bf16 queries (MIX: the
 * 16-bit pipeline in f16 on pages widened in shared memory, in
 * FMHAI_FWD90_MIX_ST stages; dispatch/kernel_set.h, FMHAI_Q16K90_FP8). */
FMHAI_DEVICE void fmhai_fwd_sm90_q16(const fmhai_fwd_params *p, char *smem_raw, const int HD, const int HDV,
                                     const int BM, const int BN, const int NW, const int ST, const int HAS_MASK,
                                     const int SOFTCAP, const int AL, const int PAGING, const int KV_VEC)
{
    fmhai_fwd_sm90_body(p, smem_raw, 0, HD, HDV, BM, BN, NW, FMHAI_FWD90_MIX_ST(HD, ST), HAS_MASK, SOFTCAP, AL, PAGING,
                        KV_VEC, 0, 0, 1);
}

#endif /* FMHA_PLATFORM_NVIDIA */
#endif /* FMHA_TILE_PIPELINE_FWD_SM90_H */
