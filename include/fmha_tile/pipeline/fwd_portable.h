/*
 * Portable forward pipeline (FlashAttention-2 style), one block = one query tile.
 *
 * A block of `warps` warps owns tile_m query rows of one (batch, head); each
 * warp owns rows_per_warp = 16 or 32 of them (one or two 16-row MMA tiles, MT).
 * Keys are visited tile_n at a time from the last visible tile down to the
 * first, so the masked tiles at the diagonal come first and the mask-free
 * tiles run without any mask arithmetic.
 *
 * Per key tile n (stages >= 2: a ring of K+V slots; stages == 1: one K and
 * one V slot, loads split around the two GEMMs as in FlashAttention-2):
 *     wait tile n; barrier; issue the tile stages-1 ahead (ring)  | V[n] (split)
 *     S = Q K[n]^T                 (mma.sync, Q from registers or shared)
 *     soft cap / ALiBi / mask      (mask only on tiles that need it)
 *                                    split, 16-row warps: wait V[n]; barrier; issue K[n-1]
 *     online softmax in base 2     (running max, rescale O and row sum)
 *                                    split, 32-row warps: the same, here
 *     O += P V[n]                  (P stays in registers as the A operand)
 *
 * K/V sources (batch prefill reuses this pipeline): contiguous rows, or a
 * paged cache read through a page table (fmhai_block_load_kv). Pages that
 * hold whole tiles cost one page-index read per tile; pages of 16+ tokens
 * (page class 3) have one page index per 16-row run copied into shared
 * memory a tile or more ahead; smaller pages have each row's byte offset
 * staged in shared memory one tile ahead. VECTORIZED pages land K and V^T
 * chunk-major, in the page's own order (fmhai_cmaj; V^T is read with
 * non-transposed ldmatrix).
 * The epilogue folds in the head's attention sink if any (fmhai_sink_fold;
 * decode: the first split only), normalises O, writes LSE (-inf for rows
 * that saw no key and have no sink) and stores O through shared memory with
 * 16-byte stores.
 *
 * Shared memory: Q [tile_m][hd], K [stages][tile_n][hd], V likewise, 16-bit
 * (FP8 KV: the K and V slots hold the e4m3 tiles instead),
 * then (page class 1) the staged row offsets [2][K, V][tile_n] int64 or
 * (page class 3) the staged run page indices [4][8] int32,
 * then (FP8 KV only) per-page descales and query row scales (see "FP8
 * (e4m3) KV" below); 16-bit tile
 * rows swizzled in 16-byte chunks (chunk ^ row%8) so ldmatrix and cp.async
 * are free of bank conflicts, each row whole 128-byte lines (FMHAI_ROWB:
 * head dims 32 and 96 take the rows of 64 and 128). Out-of-range rows and head-dim columns past d
 * are zero-filled by the copy, so padding never meets garbage (no 0 * NaN).
 *
 * Decode (DEC, kernel/decode.h): blockIdx.y is a KV head and the tile's
 * rows are the (query, query head) pairs of its group (the queries' heads
 * packed, so each K/V tile serves every head of the group); blockIdx.x
 * also names the block's split-KV share of the key tiles, and with more
 * than one split the epilogue writes fp32 O (normalised by the share's own
 * sum) and LSE to the workspace for kernel/combine.h. Decode kernels take
 * ALiBi (per row: its head's slope) and, when built with one, the soft cap
 * at run time.
 *
 * The body is one static __device__ __forceinline__ function whose shape
 * arguments are compile-time constants at the kernel's call site; register
 * arrays are declared at the largest shape and only indexed by unrolled
 * constants, so unused entries disappear.
 */
#ifndef FMHA_TILE_PIPELINE_FWD_PORTABLE_H
#define FMHA_TILE_PIPELINE_FWD_PORTABLE_H

#include "../tile/smem_layout.h"
#include "../kernel/fwd_params.h"
#include "fwd_common.h"
#include "../tile/philox.h"
#include "kv_source.h"

/* ---- FP8 (e4m3) KV ---------------------------------------------------------
 * FP8 kernels compute in fp16: every e4m3 value is an fp16 normal and the
 * conversion is one instruction per pair on sm_89+ (P in [0, 1] keeps more
 * bits in fp16 than in bf16; O leaves as bf16). e4m3 tiles land by cp.async
 * ([bn][hd] bytes, swizzled by fmhai_swz8) and the GEMMs read them directly,
 * decoding in registers: an ldmatrix of e4m3 K rows gives each lane four
 * bytes that decode to its B fragment in a permuted head-dim order, and the
 * queries are stored in that order (fmhai_warp_ldsm_x4_e4m3,
 * fmhai_load_q_f16); a transposed ldmatrix of e4m3 V rows gives each lane a
 * 2 keys x 2 d block that decodes to the B fragments of two MMAs, one for
 * the even and one for the odd d of the chunk (fmhai_warp_ldsm_x4_t_e4m3),
 * so O's accumulators hold d in that order until the epilogue. NaN codes
 * decode to NaN on sm_89+ (a cache stores none; rows past s_k are
 * zero-filled, never read). */

/* Byte offset of tile row r's query from the tile's base: plain rows
 * (pr == 0), or decode's packed rows (pr = queries' head ratio; tile row r
 * is packed row m0 + r: query (m0 + r) / pr of head (m0 + r) % pr of the
 * group, whose base is query 0 of the group's first head). */
FMHAI_DEVICE int64_t fmhai_q_row_off(int r, int64_t row_bytes, int64_t head_bytes, int pr, int m0)
{
    return pr ? (int64_t)((m0 + r) / pr) * row_bytes + (int64_t)((m0 + r) % pr) * head_bytes
              : (int64_t)r * row_bytes;
}

/* Decode's 16-bit queries: the packed rows of the tile into the swizzled Q
 * tile (cp.async, rows past rows_valid and columns past d zero-filled). */
FMHAI_DEVICE void fmhai_block_load_q_packed(fmhai_smem_t dst, const char *src, int64_t row_bytes,
                                            int64_t head_bytes, int pr, int m0, int rows, int rows_valid,
                                            int d, int hd, int nthreads, int tid)
{
    const int chunks = hd / 8, rstep = nthreads / chunks;
    const int r0 = tid / chunks, c = tid % chunks;
#pragma unroll
    for (int i = 0; i < rows / rstep; ++i) {
        const int r = r0 + i * rstep;
        const int ok = c * 8 < d && r < rows_valid;
        fmhai_copy_async16(dst + fmhai_swz(r, c, hd),
                           ok ? src + fmhai_q_row_off(r, row_bytes, head_bytes, pr, m0) + c * 16 : src, ok);
    }
}

/* Queries of an FP8 kernel, read once per block with plain loads into the
 * swizzled fp16 Q tile (the first loop barrier publishes it), each 16-column
 * chunk in the head-dim order of the e4m3 K fragments (fmhai_warp_ldsm_x4_e4m3
 * in tile/warp_mma.h: columns 4i, 4i+1 to slots 2i, 2i+1 of the chunk's low
 * half, columns 4i+2, 4i+3 to the same slots of its high half). e4m3 queries
 * convert exactly. bf16 queries can exceed fp16's range, so each row is
 * scaled by a power of two 2^-e that brings its largest |q| below 2^15
 * (exact but for values under 2^-24 of the row's largest); 2^e goes to
 * sRowScale[row] and multiplies the row's scores (folded into its exp2 scale
 * on the plain path). */
FMHAI_DEVICE void fmhai_load_q_f16(fmhai_smem_t dst, float *sRowScale, const char *src,
                                   int64_t row_bytes, int rows, int rows_valid, int d, int hd,
                                   int nthreads, int tid, int q8, int64_t head_bytes, int pr, int m0)
{
    const int chunk_elems = q8 ? 16 : 8;    /* elements per 16-byte global chunk */
    const int chunks = hd / chunk_elems, rstep = nthreads / chunks;
    const int r0 = tid / chunks, c = tid % chunks;
#pragma unroll
    for (int i = 0; i < rows / rstep; ++i) {
        const int r = r0 + i * rstep;
        uint32_t x[4] = { 0u, 0u, 0u, 0u };
        if (r < rows_valid && c * chunk_elems < d) {
            const uint4 v = *(const uint4 *)(src + fmhai_q_row_off(r, row_bytes, head_bytes, pr, m0) + c * 16);
            x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
        }
        if (q8) {   /* one 16-column chunk: word i holds columns 4i .. 4i+3 */
            uint32_t lo[4], hi[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint32_t y[2];
                fmhai_e4m3x4_to_f16(x[i], y);
                lo[i] = y[0];
                hi[i] = y[1];
            }
            fmhai_lds_store16(dst + fmhai_swz(r, 2 * c, hd), lo);
            fmhai_lds_store16(dst + fmhai_swz(r, 2 * c + 1, hd), hi);
        } else {
            /* row max |q| over the row's chunk threads (consecutive lanes) */
            uint32_t mx = 0u;
#pragma unroll
            for (int e = 0; e < 4; ++e) mx = max(mx, max(x[e] & 0x7fff7fffu & 0xffffu, (x[e] >> 16) & 0x7fffu));
            for (int o = 1; o < chunks; o <<= 1) mx = max(mx, __float_as_uint(fmhai_shfl_xor(__uint_as_float(mx), o)));
            /* bf16 exponent field of the max: 2^(ex-127) <= max < 2^(ex-126) */
            const int ex = (int)(mx >> 7) & 0xff;
            const int sh = max(ex - 127 - 14, 0);    /* max * 2^-sh < 2^15 */
            const float down = __uint_as_float((uint32_t)(127 - sh) << 23);
            uint32_t y[4];
#pragma unroll
            for (int e = 0; e < 4; ++e)
                y[e] = fmhai_pack2(__uint_as_float(x[e] << 16) * down,
                                   __uint_as_float(x[e] & 0xffff0000u) * down, 0);
            /* half (c % 2) of a 16-column chunk: pairs 0 and 2 go to the low
             * 8 slots, pairs 1 and 3 to the high 8, at word 2 * (c % 2) */
            const int at = 8 * (c & 1);
            fmhai_lds_store8(dst + fmhai_swz(r, c & ~1, hd) + at, y[0], y[2]);
            fmhai_lds_store8(dst + fmhai_swz(r, c | 1, hd) + at, y[1], y[3]);
            if (c == 0) sRowScale[r] = __uint_as_float((uint32_t)(127 + sh) << 23);
        }
    }
}

/* Split schedule, once per tile: publish tile it+1's staged page offsets
 * (class 1; class 3's run indices came with V[it]), wait for V[it] (and for
 * every warp to be done with K[it]), then start K[it+1] into the K slot. */
FMHAI_DEVICE void fmhai_split_next_k(fmhai_smem_t sK, int64_t *sOff, const int32_t *sRun,
                                     fmhai_kv_src *ksrc,
                                     const fmhai_kv_src *vsrc, int n, int it, int n_iters, int s_k,
                                     const fmhai_fwd_params *p, int hd, int bn, int nthreads,
                                     int tid, int paging, int vec, int next_page)
{
    const int stage = (paging == 1);
    if (stage && tid < bn)
        fmhai_stage_row(sOff + ((it + 1) & 1) * 2 * bn, bn, tid, ksrc, vsrc, (n - 1) * bn + tid,
                        next_page, p->page_log2, vec);
    fmhai_copy_wait(0);
    __syncthreads();
    if (it + 1 < n_iters) {
        if (stage) ksrc->row_offs = sOff + ((it + 1) & 1) * 2 * bn;
        if (paging == 3) ksrc->run_pages = sRun + ((it + 1) & 3) * 8;
        fmhai_block_load_kv(sK, ksrc, n - 1, s_k, p->d, hd, bn, nthreads, tid, paging,
                            p->page_log2, p->kv_off64, vec, 0);
    }
    fmhai_copy_commit();
}

FMHAI_DEVICE void fmhai_fwd_portable(const fmhai_fwd_params *p, char *smem,
                                     const int is_bf16, const int HD, const int HDV, const int BM,
                                     const int BN, const int NW, const int ST,
                                     const int HAS_MASK, const int SOFTCAP, const int AL,
                                     const int PAGING, const int KV_VEC, const int KV8, const int DEC)
{
    /* the row's ALiBi column: 1 ALiBi, 2 elementwise bias (the contiguous
     * 16-bit forward only; compiled out elsewhere) */
    const int ALIBI = AL == 1, BIAS = AL == 2 && !DEC && !PAGING && !KV8;
#if defined(FMHAI_DEVICE_HAS_MMA_SM80) || defined(FMHA_PLATFORM_AMD)
    const int NT = NW * 32;
    const int MT = BM / (NW * 16);            /* 16-row MMA tiles per warp */
    const int Q_IN_REGS = (MT * HD <= 64);    /* else re-read Q from shared */
    const float NEG_INF = -__int_as_float(0x7f800000);

    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;

    /* ---- which rows, which keys ---------------------------------------- */
    /* Decode (DEC): blockIdx.y is a KV head and the tile's rows are the
     * (query, head) pairs of its group, PR = head_ratio rows per query
     * (fmhai_q_row_off); blockIdx.x also names the block's split. */
    const int PR = DEC ? p->head_ratio : 1;
    const int bx = (int)blockIdx.x;
    /* decode is launched as a programmatic dependent (dispatch/decode_dispatch.h):
     * no global memory access before the previous kernel (the append) is done;
     * the split-KV combine may be scheduled once every block has started (it
     * waits for this grid to complete before reading the partials) */
    if (DEC) {
        fmhai_pdl_wait();
        fmhai_pdl_trigger();
    }
    const int m_block = p->m_blocks - 1 - (DEC ? bx % p->m_blocks : bx);   /* long rows first */
    const int split = DEC ? bx / p->m_blocks : 0;
    const int h = DEC ? (int)blockIdx.y * PR : (int)blockIdx.y, b = (int)blockIdx.z;   /* DEC: the group's first head */
    fmhai_fwd_seq S;
    fmhai_fwd_seq_of(p, b, PAGING != 0, DEC, &S);
    const int s_q = S.s_q, s_k = S.s_k, q_start = S.q_start, b_eff = S.b_eff;
    const int s_rows = s_q * PR;   /* tile rows of the sequence */
    const int m0 = m_block * BM;
    if (m0 >= s_rows) return;
    const int hk = h / p->head_ratio;
    const int m_last = min(m0 + BM, s_rows) - 1;

    fmhai_fwd_keys W;
    fmhai_fwd_keys_of(p, HAS_MASK, m0 / PR, m_last / PR, s_q, s_k, BN, &W);
    const int f_lo = W.f_lo, f_hi = W.f_hi, c_hi = W.c_hi, c_lo = W.c_lo;
    int n_hi = W.n_hi, n_iters = W.n_iters;
    if (DEC && p->num_splits > 1) fmhai_fwd_split_share(&W, split, p->num_splits, &n_hi, &n_iters);

    /* element sizes: e4m3 KV (and queries) take one byte */
    const int Q8 = KV8 && p->q_fp8;
    const int qb = Q8 ? 1 : 2, kvb = KV8 ? 1 : 2;
    const char *q_ptr = (const char *)p->q + qb * ((int64_t)b_eff * p->q_batch +
                        (int64_t)(q_start + (DEC ? 0 : m0)) * p->q_row + (int64_t)h * p->q_head);
    fmhai_kv_src ksrc, vsrc;
    fmhai_kv_srcs_of(p, &S, hk, kvb, KV_VEC, &ksrc, &vsrc);

    /* Q and K rows are HD wide, V rows HDV (MLA: 192 and 128); the O tile
     * reuses Q's rows, HDV <= HD */
    /* 16-bit tile rows take HDB / HVB bytes: whole 128-byte lines
     * (FMHAI_ROWB: head dims 32 and 96 pad theirs) */
    const int HDB = FMHAI_ROWB(HD), HVB = FMHAI_ROWB(HDV);
    fmhai_smem_t sQ = fmhai_smem_addr(smem);
    fmhai_smem_t sK = sQ + BM * HDB;
    fmhai_smem_t sV = sK + ST * BN * HDB;
    const int kv_tile_bytes = BN * HDB, v_tile_bytes = BN * HVB;
    const int tiles_bytes = BM * HDB + ST * BN * (HDB + HVB);
    /* fp8: the e4m3 K and V tiles, read by the GEMMs, in the (otherwise
     * unused) 16-bit K and V slots: 2 * ST of each fit there. The per-page
     * descales of four tiles [4][K,V][BN] after the staged page offsets or
     * indices */
    const int extra0 = tiles_bytes + FMHAI_PAGE_SMEM_BYTES(PAGING, BN);
    fmhai_smem_t sK8 = sK;
    fmhai_smem_t sV8 = sV;
    const int kv8_tile_bytes = BN * HD;
    float *sScale = (float *)(smem + extra0);
    float *sRowScale = sScale + 8 * BN;     /* [BM]: bf16 queries' row scales */
    const int OUT_BF16 = is_bf16 || KV8;   /* FP8 kernels compute in fp16, emit bf16 */

    /* FP8 descales. Per tensor: q and k fold into the logit scale, v into the
     * output normalisation. Per page: score column j is scaled by its key's
     * page descale and P column j by its value's, from sScale. */
    float qk_ds, v_ds;
    const int PAGE_DS = KV8 && p->k_page_descale != 0;
    fmhai_fwd_kv8_descales(p, KV8, Q8, &qk_ds, &v_ds);

    /* ---- prologue ---------------------------------------------------------
     * stages == 1 (split): groups Q, K[0]; each tile then loads V[it] at the
     *   top and K[it+1] in the middle, two barriers per tile.
     * stages >= 2 (ring): groups Q, (K+V)[0] .. (K+V)[ST-2]; each tile loads
     *   (K+V)[it+ST-1] at the top into the slot tile it-1 freed, one barrier
     *   per tile, loads issued while no score registers are live. */
    /* fp8 KV with one stage: two e4m3 tiles fit in each 16-bit slot, so it
     * runs the ring with depth 2 (F8S): at the top, wait; barrier (every warp
     * is done with tile it-1); issue tile it+1 into the slots tile it-1 used
     * (tile j in slot j % 2). Nothing is copied mid-tile, where the score
     * registers are live. */
    const int F8S = KV8 && ST == 1;
    const int SPLIT = (ST == 1) && !KV8;
    const int STE = F8S ? 2 : ST;             /* ring depth for tile indices */
    /* Decode over VECTORIZED pages on sm_90 (tma_kv: the TMA unit may be
     * used): V^T by bulk copies (fmhai_issue_v), slot s counted on mbarrier
     * s after the page staging (sScale's place; fp8 KV is LINEAR only) and
     * waited with the loop top's copy wait */
#if defined(FMHAI_DEVICE_HAS_SM90A)
    const int VBK = DEC && KV_VEC && !KV8 && !SPLIT && p->tma_kv && p->dv == HDV;
#else
    const int VBK = 0;
#endif
    const fmhai_smem_t sVBar = fmhai_smem_addr(smem + extra0);
#if defined(FMHA_PLATFORM_NVIDIA)
    if (VBK) {
        if (tid == 0)
            for (int s = 0; s < ST; ++s) fmhai_mbar_init(sVBar + 8 * s, 1);
        __syncthreads();
    }
#endif
    /* split schedule: K[it+1] is issued before the softmax (more overlap) when
     * registers allow; with 32 rows per warp, after it (only P live then) */
    const int K_EARLY = (MT == 1);
    /* Small pages (kernels that may look pages up per row): every tile's page
     * indices are staged in shared memory ([2][BN], by tile parity) one tile
     * ahead. A register carries each thread's index across the previous
     * tile's GEMMs, so the table read never stalls a copy. */
    const int STAGE_PAGES = (PAGING == 1);
    int64_t *sOff = (int64_t *)(smem + tiles_bytes);   /* [2][K,V][BN] */
    /* Class 3 (pages of 16+ tokens below the tile): tile j's page index per
     * 16-row run sits in sRun[j % 4][0 .. BN/16), copied by cp.async in the
     * commit group of tile j - (STE - 1) (split: with V[j-1]), so the wait
     * and barrier before tile j's K/V copies have published it: the copies
     * only read shared memory, and no register is held across the GEMMs.
     * The prologue's tiles have theirs staged first, behind one wait and
     * barrier. A slot is rewritten 4 tiles later, after every thread's last
     * read of it (stages <= 3). */
    const int STAGE_RUNS = (PAGING == 3);
    const int32_t *sRun = (const int32_t *)(smem + tiles_bytes);   /* [4][8] */
    const fmhai_smem_t sRunA = fmhai_smem_addr(sRun);
    if (STAGE_PAGES && tid < BN) {
        const int j = SPLIT ? 0 : STE - 1;   /* first tile loaded at a loop top */
        if (j < n_iters) {
            const int tok = (n_hi - 1 - j) * BN + tid;
            fmhai_stage_row(sOff + (j & 1) * 2 * BN, BN, tid, &ksrc, &vsrc, tok,
                            fmhai_page_of(&ksrc, tok, p->page_log2), p->page_log2, KV_VEC);
        }
    }
    if (STAGE_RUNS) {
        for (int t = 0; t < (SPLIT ? 1 : STE - 1) && t < n_iters; ++t)
            fmhai_stage_runs(sRunA + t * 32, &ksrc, n_hi - 1 - t, BN, tid, p->page_log2);
        fmhai_copy_commit();
    }
    if (!KV8 && DEC)
        fmhai_block_load_q_packed(sQ, q_ptr, 2 * p->q_row, 2 * p->q_head, PR, m0, BM, s_rows - m0, p->d, HD, NT,
                                  tid);
    else if (!KV8)
        fmhai_block_load_tile(sQ, q_ptr, 2 * p->q_row, 16, BM, s_q - m0, p->d, HD, NT, tid, 0);
    fmhai_copy_commit();
    if (STAGE_RUNS) {   /* the runs group (Q may stay in flight) */
        fmhai_copy_wait(1);
        __syncthreads();
    }
    for (int s = 0; s < (SPLIT ? 1 : STE - 1); ++s) {
        if (s < n_iters) {
            const int n = n_hi - 1 - s;
            if (STAGE_RUNS) ksrc.run_pages = vsrc.run_pages = sRun + s * 8;
            fmhai_issue_kv(sK + s * kv_tile_bytes, sK8 + s * kv8_tile_bytes, &ksrc, 0, n, s_k, p->d,
                           HD, BN, NT, tid, PAGING, p->page_log2, p->kv_off64, KV_VEC, KV8);
            if (!SPLIT)
                fmhai_issue_v(sV + s * v_tile_bytes, sV8 + s * kv8_tile_bytes, &vsrc, n, s_k, p->dv, HDV, BN, NT,
                              tid, PAGING, p->page_log2, p->kv_off64, KV_VEC, KV8, VBK, sVBar + 8 * s);
        }
        if (STAGE_RUNS && !SPLIT && s + STE - 1 < n_iters)
            fmhai_stage_runs(sRunA + ((s + STE - 1) & 3) * 32, &ksrc, n_hi - s - STE, BN, tid,
                             p->page_log2);
        fmhai_copy_commit();
    }
    /* the descales of the tiles loaded before the loop (later tiles' are
     * read one iteration ahead, see below) */
    if (PAGE_DS && tid < BN) {
        for (int j = 0; j < (SPLIT ? 1 : STE) && j < n_iters; ++j) {
            const int pg = fmhai_page_of(&ksrc, (n_hi - 1 - j) * BN + tid, p->page_log2);
            const int64_t at = (int64_t)pg * p->ds_page + hk * p->ds_head;
            sScale[(j & 3) * 2 * BN + tid] = p->k_page_descale[at];
            sScale[(j & 3) * 2 * BN + BN + tid] = p->v_page_descale[at];
        }
    }
    if (KV8)
        fmhai_load_q_f16(sQ, sRowScale, q_ptr, qb * p->q_row, BM, s_rows - m0, p->d, HD, NT, tid, Q8,
                         qb * p->q_head, DEC ? PR : 0, m0);

    /* ---- per-thread state ---------------------------------------------- */
    float acc_o[2][FMHAI_FWD_MAX_HD / 8][4];
    float row_max[2][2], row_sum[2][2];
    uint32_t q_frag[2][FMHAI_FWD_MAX_HD / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int dt = 0; dt < HDV / 8; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_o[mt][dt][e] = 0.f;
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) { row_max[mt][hf] = NEG_INF; row_sum[mt][hf] = 0.f; }
    }
    /* scores are turned into base-2 logits: either by the exp2 argument
     * (plain path: one FFMA) or up front (soft cap / ALiBi path). */
    const float scale_log2 = p->scale_log2 * qk_ds, softcap_pre = p->softcap_pre * qk_ds;
    const float sl2 = (SOFTCAP || ALIBI || BIAS) ? 1.f : scale_log2;
    /* decode kernels built with a soft cap serve problems without one */
    const int SC_ON = SOFTCAP && (!DEC || p->softcap_pre != 0.f);
    /* bf16 queries' row scales (FP8): on the plain path they fold into the
     * row's exp2 scale (max and the mask commute with a positive factor;
     * measured 2-3% faster than multiplying the scores); soft cap / ALiBi
     * multiply the scores by them first */
    const int ROW_FOLD = KV8 && !Q8 && !SOFTCAP && !ALIBI;
    float slope = 0.f;
    if (ALIBI && !DEC) slope = p->alibi_slopes[(int64_t)b * p->alibi_batch + h] * 1.4426950408889634f;
    /* the bias row of this thread's first row (m0 + warp_row0 + g), and the
     * bytes from one row to the next */
    const int64_t bias_rstep = BIAS ? p->bias_row * (p->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2) : 0;
    const char *bias_rows = BIAS ? fmhai_bias_rows(p, b_eff, h, q_start + m0 + warp * MT * 16 + g) : 0;

    const int warp_row0 = warp * MT * 16;
    /* decode: each row's query index and ALiBi slope (its head's; decode
     * kernels take ALiBi at run time: no slopes, no bias) */
    int dec_qi[2][2];
    float dec_slope[2][2];
#pragma unroll
    for (int mt = 0; mt < MT && DEC; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            const int R = m0 + warp_row0 + mt * 16 + g + 8 * hf;
            dec_qi[mt][hf] = R / PR;
            dec_slope[mt][hf] = ALIBI && p->alibi_slopes
                                    ? p->alibi_slopes[(int64_t)b * p->alibi_batch + h + R % PR] * 1.4426950408889634f
                                    : 0.f;
        }
    /* ldmatrix bases. Q (A operand): lanes 0-15 rows, lanes 16-31 the upper
     * 8 columns. K (B, non-transposed): lane/8 picks (key half, column half).
     * V (B, transposed): lane/8 picks (key half, d half). */
    const fmhai_smem_t q_base = fmhai_ldsm_base(sQ, (warp_row0 + lane % 16) * HDB, lane / 16, lane % 8);
    const fmhai_smem_t k_base = fmhai_ldsm_base(sK, (((lane / 8) / 2) * 8 + lane % 8) * HDB,
                                                (lane / 8) % 2, lane % 8);
    /* e4m3 K (fmhai_swz8 rows of HD bytes): lane l addresses key l of a
     * 32-key group, so lane/8 picks the 8-key tile */
    const fmhai_smem_t k8_base = sK8 + lane * HD + (fmhai_swz8_key(lane, HD) << 4);
    const fmhai_smem_t v8_base = sV8 + lane * HD + (fmhai_swz8_key(lane, HD) << 4);
    const fmhai_smem_t v_base = fmhai_ldsm_base(sV, (((lane / 8) % 2) * 8 + lane % 8) * HVB,
                                                (lane / 8) / 2, lane % 8);
    /* VECTORIZED (chunk-major, fmhai_cmaj): K lane/8 picks (column half, key
     * half) of 16 keys x 16 columns; V^T lane/8 picks (key half, d half) */
    const fmhai_smem_t kc_base = sK + fmhai_cmaj(((lane / 8) / 2) * 8 + lane % 8, (lane / 8) % 2, BN);
    const fmhai_smem_t vt_base = sV + fmhai_cmaj(((lane / 8) / 2) * 8 + lane % 8, (lane / 8) % 2, HDV);

    for (int it = 0; it < n_iters; ++it) {
        const int n = n_hi - 1 - it;
        /* 16-bit V slot; e4m3 K and V slot */
        const int buf = it % ST, kbuf = it % STE;
        fmhai_copy_wait(SPLIT ? 0 : STE - 2);
        __syncthreads();
#if defined(FMHA_PLATFORM_NVIDIA)
        if (VBK) fmhai_mbar_wait(sVBar + 8 * buf, (it / ST) & 1);   /* V^T of tile it landed */
#endif
        if (it == 0 && Q_IN_REGS) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int kk = 0; kk < HD / 16; ++kk)
                    fmhai_warp_ldsm_x4(q_frag[mt][kk], fmhai_ldsm_at(q_base, kk) + mt * 16 * HDB);
        }
        /* page index of this thread's row of the tile staged next */
        int next_page = 0;
        const int jn = SPLIT ? it + 1 : it + STE;
        if (STAGE_PAGES && tid < BN && jn < n_iters)
            next_page = fmhai_page_of(&ksrc, (n_hi - 1 - jn) * BN + tid, p->page_log2);
        /* fp8 per-page descales of tile jn, read now, stored after the GEMMs */
        float ks_next = 0.f, vs_next = 0.f;
        if (PAGE_DS && tid < BN && jn < n_iters) {
            const int pg = STAGE_PAGES ? next_page
                                       : fmhai_page_of(&ksrc, (n_hi - 1 - jn) * BN + tid, p->page_log2);
            const int64_t at = (int64_t)pg * p->ds_page + hk * p->ds_head;
            ks_next = p->k_page_descale[at];
            vs_next = p->v_page_descale[at];
        }
        {   /* split: V[it]; ring: K and V of tile it + ST - 1 */
            const int j = SPLIT ? it : it + STE - 1;
            const int slot = j % ST, kslot = j % STE;
            if (j < n_iters) {
                const int nn = n_hi - 1 - j;
                if (STAGE_PAGES) {
                    ksrc.row_offs = sOff + (j & 1) * 2 * BN;
                    vsrc.row_offs = ksrc.row_offs + BN;
                }
                if (STAGE_RUNS) ksrc.run_pages = vsrc.run_pages = sRun + (j & 3) * 8;
                if (!SPLIT)
                    fmhai_issue_kv(sK + kslot * kv_tile_bytes, sK8 + kslot * kv8_tile_bytes,
                                   &ksrc, 0, nn, s_k, p->d, HD, BN, NT, tid, PAGING, p->page_log2,
                                   p->kv_off64, KV_VEC, KV8);
                fmhai_issue_v(sV + slot * v_tile_bytes, sV8 + kslot * kv8_tile_bytes, &vsrc, nn, s_k, p->dv,
                              HDV, BN, NT, tid, PAGING, p->page_log2, p->kv_off64, KV_VEC, KV8, VBK,
                              sVBar + 8 * slot);
            }
            /* class 3: the run indices of the tile issued STE - 1 tiles later
             * (split: K[it+1] in the middle of this tile, then V[it+1]) */
            const int jr = j + (SPLIT ? 1 : STE - 1);
            if (STAGE_RUNS && jr < n_iters)
                fmhai_stage_runs(sRunA + (jr & 3) * 32, &ksrc, n_hi - 1 - jr, BN, tid, p->page_log2);
            fmhai_copy_commit();
        }

        /* ---- S = Q K^T ---------------------------------------------------- */
        float acc_s[2][FMHAI_FWD_MAX_BN / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc_s[mt][nt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; ++kk) {
            uint32_t qa[2][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                if (Q_IN_REGS) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) qa[mt][e] = q_frag[mt][kk][e];
                } else {
                    fmhai_warp_ldsm_x4(qa[mt], fmhai_ldsm_at(q_base, kk) + mt * 16 * HDB);
                }
            }
            if (KV8) {   /* e4m3 K: 32 keys of column chunk kk per ldmatrix, all loaded first */
                uint32_t kf[FMHAI_FWD_MAX_BN / 32][4][2];
#pragma unroll
                for (int np = 0; np < BN / 32; ++np)
                    fmhai_warp_ldsm_x4_e4m3(kf[np], fmhai_ldsm8_at(k8_base, kk, HD) +
                                                        kbuf * kv8_tile_bytes + np * 32 * HD);
#pragma unroll
                for (int np = 0; np < BN / 32; ++np)
#pragma unroll
                    for (int m = 0; m < 4; ++m)
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt)
                            fmhai_warp_mma_16816(acc_s[mt][4 * np + m], qa[mt], kf[np][m], is_bf16);
            } else if (KV_VEC || PAGING != 0) {
                /* paged kernels: the chunk's K fragments first, then the MMAs (the
                 * compiler otherwise keeps one ldmatrix in flight there; the
                 * contiguous forward measured the same either way) */
                uint32_t kb[FMHAI_FWD_MAX_BN / 16][4];
#pragma unroll
                for (int np = 0; np < BN / 16; ++np)
                    if (KV_VEC)
                        fmhai_warp_ldsm_x4(kb[np], kc_base + buf * kv_tile_bytes + kk * 2 * BN * 16 + np * 256);
                    else
                        fmhai_warp_ldsm_x4(kb[np], fmhai_ldsm_at(k_base, kk) + buf * kv_tile_bytes +
                                                       np * 16 * HDB);
#pragma unroll
                for (int np = 0; np < BN / 16; ++np)
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        fmhai_warp_mma_16816(acc_s[mt][2 * np], qa[mt], kb[np], is_bf16);
                        fmhai_warp_mma_16816(acc_s[mt][2 * np + 1], qa[mt], kb[np] + 2, is_bf16);
                    }
            } else {
#pragma unroll
                for (int np = 0; np < BN / 16; ++np) {
                    uint32_t kb[4];
                    fmhai_warp_ldsm_x4(kb, fmhai_ldsm_at(k_base, kk) + buf * kv_tile_bytes + np * 16 * HDB);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        fmhai_warp_mma_16816(acc_s[mt][2 * np], qa[mt], kb, is_bf16);
                        fmhai_warp_mma_16816(acc_s[mt][2 * np + 1], qa[mt], kb + 2, is_bf16);
                    }
                }
            }
        }

        /* ---- logits: FP8 scales, soft cap, ALiBi, mask ------------------------ */
        if (KV8 && !Q8 && !ROW_FOLD) {   /* bf16 queries' per-row power-of-two scales */
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const float f = sRowScale[warp_row0 + mt * 16 + g + 8 * hf];
#pragma unroll
                    for (int nt = 0; nt < BN / 8; ++nt) {
                        acc_s[mt][nt][2 * hf] *= f;
                        acc_s[mt][nt][2 * hf + 1] *= f;
                    }
                }
        }
        if (PAGE_DS) {   /* column j times key j's page descale */
            const float *ks = sScale + (it & 3) * 2 * BN + 2 * t;
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt) {
                const float2 k2 = *(const float2 *)(ks + nt * 8);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    acc_s[mt][nt][0] *= k2.x; acc_s[mt][nt][1] *= k2.y;
                    acc_s[mt][nt][2] *= k2.x; acc_s[mt][nt][3] *= k2.y;
                }
            }
        }
        if (SOFTCAP || ALIBI || BIAS) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        float x = acc_s[mt][nt][e];
                        if (SC_ON) x = tanhf(x * softcap_pre) * p->softcap_post_log2;
                        else x *= scale_log2;
                        if (ALIBI) {   /* bottom-right aligned distance |i + s_k - s_q - j| */
                            int i = DEC ? dec_qi[mt][e / 2] : m0 + warp_row0 + mt * 16 + g + 8 * (e / 2);
                            int j = n * BN + nt * 8 + 2 * t + (e % 2);
                            x -= (DEC ? dec_slope[mt][e / 2] : slope) * fabsf((float)(i + s_k - s_q - j));
                        }
                        acc_s[mt][nt][e] = x;
                    }
            /* elementwise bias: this thread's column pair of its two rows;
             * the thread's first key of the tile (k0) as the base, so each
             * pair is a constant offset from its row */
            const int bk0 = n * BN + 2 * t;
            const char *bias_t = BIAS ? bias_rows + (int64_t)bk0 * (p->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2) : 0;
#pragma unroll
            for (int mt = 0; mt < MT && BIAS; ++mt)
#pragma unroll
                for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const int r = mt * 16 + 8 * hf;
                        const float2 bv = fmhai_bias_pair(
                            p, m0 + warp_row0 + g + r < s_q ? bias_t + r * bias_rstep : 0, nt * 8, s_k - bk0);
                        acc_s[mt][nt][2 * hf] += bv.x;
                        acc_s[mt][nt][2 * hf + 1] += bv.y;
                    }
        }
        const int need_mask = !(n >= f_lo && n < f_hi);
        if (need_mask) {
            /* per row: visible key columns of this tile, relative to this
             * thread's first column, are [lo, hi) */
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int i = DEC ? dec_qi[mt][hf] : m0 + warp_row0 + mt * 16 + g + 8 * hf;
                    const int base = n * BN + 2 * t;
                    const int hi = min(s_k, i + c_hi) - base, lo = i + c_lo - base;
#pragma unroll
                    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int col = nt * 8 + e;
                            if (col < lo || col >= hi) acc_s[mt][nt][2 * hf + e] = NEG_INF;
                        }
                }
        }

        if (SPLIT && K_EARLY)
            fmhai_split_next_k(sK, sOff, sRun, &ksrc, &vsrc, n, it, n_iters, s_k, p, HD, BN, NT, tid,
                               PAGING, KV_VEC, next_page);

        /* ---- online softmax (base 2) --------------------------------------- */
        uint32_t pa[2][FMHAI_FWD_MAX_BN / 16][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                float mx = row_max[mt][hf];
#pragma unroll
                for (int nt = 0; nt < BN / 8; ++nt)
                    mx = fmaxf(mx, fmaxf(acc_s[mt][nt][2 * hf], acc_s[mt][nt][2 * hf + 1]));
                mx = fmaxf(mx, fmhai_shfl_xor(mx, 1));
                mx = fmaxf(mx, fmhai_shfl_xor(mx, 2));
                /* a row with no visible key yet keeps max -inf: use 0 so that
                 * exp2(-inf - 0) = 0 instead of NaN */
                const float sl2r = ROW_FOLD ? sl2 * sRowScale[warp_row0 + mt * 16 + g + 8 * hf] : sl2;
                const float ms = (mx == NEG_INF) ? 0.f : mx * sl2r;
                const float alpha = fmhai_exp2(row_max[mt][hf] * sl2r - ms);
                row_max[mt][hf] = mx;
                float sum = 0.f;
#pragma unroll
                for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float pv = fmhai_exp2(acc_s[mt][nt][2 * hf + e] * sl2r - ms);
                        acc_s[mt][nt][2 * hf + e] = pv;
                        sum += pv;
                    }
                row_sum[mt][hf] = row_sum[mt][hf] * alpha + sum;
#pragma unroll
                for (int dt = 0; dt < HDV / 8; ++dt) {
                    acc_o[mt][dt][2 * hf] *= alpha;
                    acc_o[mt][dt][2 * hf + 1] *= alpha;
                }
            }
            if (PAGE_DS) {   /* P column j times value j's descale (the row sum is unscaled) */
                const float *vs = sScale + (it & 3) * 2 * BN + BN + 2 * t;
#pragma unroll
                for (int nt = 0; nt < BN / 8; ++nt) {
                    const float2 v2 = *(const float2 *)(vs + nt * 8);
                    acc_s[mt][nt][0] *= v2.x; acc_s[mt][nt][1] *= v2.y;
                    acc_s[mt][nt][2] *= v2.x; acc_s[mt][nt][3] *= v2.y;
                }
            }
            if (!PAGING && !DEC && !KV8 && p->dropout_thr) {
                /* dropout (the contiguous forward): a kept P element times
                 * its scale, the row sum left whole. One Philox call gives
                 * the 16 bytes of rows i, i ^ 1, i ^ 8, i ^ 9 and columns j,
                 * j ^ 1, j ^ 8, j ^ 9 (tile/philox.h): this thread's rows g,
                 * g + 8 and columns 2t, 2t + 1 of n-tiles 2q and 2q + 1, its
                 * word 2 * hf + (g & 1), byte 2 * (nt & 1) + e of it. */
                const uint32_t bh = (uint32_t)(b * p->nhead_q + h);
                const uint32_t i0 = (uint32_t)(m0 + warp_row0 + mt * 16 + g);
                uint64_t dseed, doff;   /* dropout_rng's when given (read here: only dropout pays) */
                fmhai_dropout_seed_offset(p->dropout_rng, p->dropout_seed, p->dropout_offset, &dseed, &doff);
#pragma unroll
                for (int q2 = 0; q2 < BN / 16; ++q2) {
                    uint32_t w[4];
                    fmhai_dropout_block(dseed, doff, bh, i0,
                                        (uint32_t)(n * BN + q2 * 16 + 2 * t), w);
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const uint32_t word = (g & 1) ? w[2 * hf + 1] : w[2 * hf];
#pragma unroll
                        for (int par = 0; par < 2; ++par)
#pragma unroll
                            for (int e = 0; e < 2; ++e) {
                                const uint32_t byte = (word >> (8 * (2 * par + e))) & 0xffu;
                                acc_s[mt][2 * q2 + par][2 * hf + e] *= byte >= p->dropout_thr ? p->dropout_scale : 0.f;
                            }
                    }
                }
            }
#pragma unroll
            for (int kp = 0; kp < BN / 16; ++kp) {
                pa[mt][kp][0] = fmhai_pack2(acc_s[mt][2 * kp][0], acc_s[mt][2 * kp][1], is_bf16);
                pa[mt][kp][1] = fmhai_pack2(acc_s[mt][2 * kp][2], acc_s[mt][2 * kp][3], is_bf16);
                pa[mt][kp][2] = fmhai_pack2(acc_s[mt][2 * kp + 1][0], acc_s[mt][2 * kp + 1][1], is_bf16);
                pa[mt][kp][3] = fmhai_pack2(acc_s[mt][2 * kp + 1][2], acc_s[mt][2 * kp + 1][3], is_bf16);
            }
        }

        if (SPLIT && !K_EARLY)
            fmhai_split_next_k(sK, sOff, sRun, &ksrc, &vsrc, n, it, n_iters, s_k, p, HD, BN, NT, tid,
                               PAGING, KV_VEC, next_page);

        /* ---- O += P V ------------------------------------------------------ */
        /* d outer, keys inner: one swizzled V address per d chunk pair. V is
         * [keys][d] (transposed ldmatrix) or, VECTORIZED, V^T [d][keys]. e4m3
         * V: 32 keys of d chunk dn per ldmatrix; acc_o[2 dn] takes the even d
         * of the chunk, acc_o[2 dn + 1] the odd ones. */
#pragma unroll
        for (int dn = 0; dn < HDV / 16 && KV8; ++dn) {
#pragma unroll
            for (int kq = 0; kq < BN / 32; ++kq) {
                uint32_t vf[4][2];
                fmhai_warp_ldsm_x4_t_e4m3(vf, fmhai_ldsm8_at(v8_base, dn, HD) + kbuf * kv8_tile_bytes +
                                                  kq * 32 * HD);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const uint32_t ve[2] = {vf[2 * h][0], vf[2 * h + 1][0]};
                    const uint32_t vo[2] = {vf[2 * h][1], vf[2 * h + 1][1]};
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        fmhai_warp_mma_16816(acc_o[mt][2 * dn], pa[mt][2 * kq + h], ve, is_bf16);
                        fmhai_warp_mma_16816(acc_o[mt][2 * dn + 1], pa[mt][2 * kq + h], vo, is_bf16);
                    }
                }
            }
        }
#pragma unroll
        for (int dn = 0; dn < HDV / 16 && !KV8; ++dn) {
#pragma unroll
            for (int kp = 0; kp < BN / 16; ++kp) {
                uint32_t vb[4];
                if (KV_VEC)
                    fmhai_warp_ldsm_x4(vb, vt_base + buf * v_tile_bytes + kp * 2 * HDV * 16 + dn * 256);
                else
                    fmhai_warp_ldsm_x4_t(vb, fmhai_ldsm_at(v_base, dn) + buf * v_tile_bytes +
                                                 kp * 16 * HVB);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    fmhai_warp_mma_16816(acc_o[mt][2 * dn], pa[mt][kp], vb, is_bf16);
                    fmhai_warp_mma_16816(acc_o[mt][2 * dn + 1], pa[mt][kp], vb + 2, is_bf16);
                }
            }
        }
        /* ring: the next loop-top barrier publishes tile it + ST's page indices */
        if (!SPLIT && STAGE_PAGES && tid < BN)
            fmhai_stage_row(sOff + ((it + STE) & 1) * 2 * BN, BN, tid, &ksrc, &vsrc,
                            (n_hi - 1 - (it + STE)) * BN + tid, next_page, p->page_log2, KV_VEC);
        /* tile jn's descales: slot jn % 4 is not read before the barrier of
         * tile jn, and at most tiles it .. it + ST are live (ST <= 3) */
        if (PAGE_DS && tid < BN && jn < n_iters) {
            sScale[(jn & 3) * 2 * BN + tid] = ks_next;
            sScale[(jn & 3) * 2 * BN + BN + tid] = vs_next;
        }
    }

    /* ---- epilogue ----------------------------------------------------------- */
    /* every copy has landed before the Q tile is reused for O (when no key tile
     * was visited, other threads' Q copies into this warp's rows may still be
     * in flight) */
    fmhai_copy_wait(0);
    __syncthreads();
    const float LN2 = 0.6931471805599453f;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float sum = row_sum[mt][hf];
            sum += fmhai_shfl_xor(sum, 1);
            sum += fmhai_shfl_xor(sum, 2);
            const int row = warp_row0 + mt * 16 + g + 8 * hf;
            const int R = m0 + row;
            /* the exp2 offset of the row; a sink (decode: the first split's
             * rows only, each of its head) folds into it and the sum */
            const float ms = row_max[mt][hf] * (ROW_FOLD ? sl2 * sRowScale[row] : sl2);
            float m_ln = ms * LN2, f = 1.f;   /* the LSE's offset, natural log */
            if (p->sinks && (!DEC || split == 0))
                f = fmhai_sink_fold(p->sinks[h + (DEC ? R % PR : 0)], ms, &sum, &m_ln);
            const float inv = sum > 0.f ? f * v_ds / sum : 0.f;
#pragma unroll
            for (int dt = 0; dt < HDV / 8; ++dt) {
                acc_o[mt][dt][2 * hf] *= inv;
                acc_o[mt][dt][2 * hf + 1] *= inv;
            }
            if (DEC && t == 0 && R < s_rows && (p->lse || p->num_splits > 1)) {
                /* decode: the row's query and head; a split's LSE goes to the
                 * workspace whether or not the caller wants LSE */
                const float lse = sum > 0.f ? m_ln + logf(sum) : NEG_INF;
                const int qi = dec_qi[mt][hf], hh = h + R % PR;
                if (p->num_splits > 1)
                    p->ws_lse[(int64_t)split * p->ws_rows + ((int64_t)b * p->nhead_q + hh) * s_q + qi] = lse;
                else
                    p->lse[(int64_t)b * p->lse_batch + (int64_t)hh * p->lse_head + qi] = lse;
            }
            if (!DEC && p->lse && t == 0 && m0 + row < s_q) {
                float lse = sum > 0.f ? m_ln + logf(sum) : NEG_INF;
                int64_t li = p->seqstart_q ? (int64_t)h * p->lse_head + q_start + m0 + row
                                           : (int64_t)b * p->lse_batch + (int64_t)h * p->lse_head + m0 + row;
                p->lse[li] = lse;
            }
        }
    }
    if (DEC && p->num_splits > 1) {
        /* split-KV partial O (normalised by this split's own sum, fp32)
         * straight from the accumulators: 16-bit V gives lane t columns 2t,
         * 2t + 1 of each 8-column tile; e4m3 V columns 4t .. 4t + 3 of each
         * 16-column chunk (even ones in acc_o[2 dn], odd in acc_o[2 dn + 1]) */
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const int R = m0 + warp_row0 + mt * 16 + g + 8 * hf;
                if (R >= s_rows) continue;
                float *dst = p->ws_o + ((int64_t)split * p->ws_rows +
                                        ((int64_t)b * p->nhead_q + h + R % PR) * s_q + dec_qi[mt][hf]) * p->dv;
#pragma unroll
                for (int dt = 0; dt < HDV / 8 && !KV8; ++dt)
                    if (dt * 8 < p->dv)
                        *(float2 *)(dst + dt * 8 + 2 * t) = make_float2(acc_o[mt][dt][2 * hf], acc_o[mt][dt][2 * hf + 1]);
#pragma unroll
                for (int dn = 0; dn < HDV / 16 && KV8; ++dn)
                    if (dn * 16 < p->dv) {
                        const float *e = acc_o[mt][2 * dn], *o = acc_o[mt][2 * dn + 1];
                        float4 v;
                        v.x = e[2 * hf]; v.y = o[2 * hf]; v.z = e[2 * hf + 1]; v.w = o[2 * hf + 1];
                        *(float4 *)(dst + dn * 16 + 4 * t) = v;
                    }
            }
        return;
    }
    /* O goes through this warp's own rows of the Q tile (only this warp reads
     * them; HDV columns of the HD-wide rows), then out with 16-byte
     * coalesced stores. */
    fmhai_sync_warp();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int dt = 0; dt < HDV / 8 && !KV8; ++dt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                int r = warp_row0 + mt * 16 + g + 8 * hf;
                uint32_t v2 = fmhai_pack2(acc_o[mt][dt][2 * hf], acc_o[mt][dt][2 * hf + 1], OUT_BF16);
#if defined(FMHA_PLATFORM_NVIDIA)
                asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(sQ + fmhai_swz(r, dt, HD) + 4 * t), "r"(v2));
#else
                *(uint32_t *)(sQ + fmhai_swz(r, dt, HD) + 4 * t) = v2;
#endif
            }
    /* e4m3 V: lane t holds d 4t .. 4t+3 of each 16-column chunk dn, the even
     * ones in acc_o[2 dn], the odd ones in acc_o[2 dn + 1] */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int dn = 0; dn < HDV / 16 && KV8; ++dn)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                int r = warp_row0 + mt * 16 + g + 8 * hf;
                const float *e = acc_o[mt][2 * dn], *o = acc_o[mt][2 * dn + 1];
                fmhai_lds_store8(sQ + fmhai_swz(r, 2 * dn + (t >> 1), HD) + 8 * (t & 1),
                                 fmhai_pack2(e[2 * hf], o[2 * hf], 1),
                                 fmhai_pack2(e[2 * hf + 1], o[2 * hf + 1], 1));
            }
    fmhai_sync_warp();
    char *o_ptr = (char *)p->o + 2 * ((int64_t)b_eff * p->o_batch +
                  (int64_t)(q_start + (DEC ? 0 : m0)) * p->o_row + (int64_t)h * p->o_head);
    const int chunks = HDV / 8;
#pragma unroll
    for (int i = 0; i < MT * 16 * chunks / 32; ++i) {
        int idx = lane + 32 * i;
        int r = warp_row0 + idx / chunks, c = idx % chunks;
        if (m0 + r < s_rows && c * 8 < p->dv) {
            uint4 v;
#if defined(FMHA_PLATFORM_NVIDIA)
            asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(sQ + fmhai_swz(r, c, HD)));
#else
            v = *(const uint4 *)(sQ + fmhai_swz(r, c, HD));
#endif
            *(uint4 *)(o_ptr + fmhai_q_row_off(r, 2 * p->o_row, 2 * p->o_head, DEC ? PR : 0, m0) + c * 16) = v;
        }
    }
#endif
}

#endif /* FMHA_TILE_PIPELINE_FWD_PORTABLE_H */
