/*
 * MFMA forward pipeline for AMD CDNA (gfx90a, gfx942; gfx950 ready): the
 * fp16/bf16 forward, batch prefill with 16-bit or FP8 (e4m3) KV, and decode,
 * on the wave64 matrix instructions of tile/wave_mma.h.
 *
 * The algorithm is the portable one (pipeline/fwd_portable.h: one block per
 * query tile, key tiles from the last visible one down, online softmax in
 * base 2, masks only on the tiles that need them) written for the MFMA
 * fragment layouts of tile/mfma_layout.h instead of mma.sync's. A block of
 * `warps` 32-lane warps is warps/2 waves; each wave owns 32 query rows and
 * computes, per key tile, with v_mfma_f32_32x32x8{f16,bf16_1k}:
 *     S^T = K Q^T     keys x queries: a lane's D slots are one query (its
 *                     column, lane % 32) and 16 keys of each 32-key block
 *     online softmax  a query's max and sum fold the lane's own slots, then
 *                     one exchange with the lane 32 away (ds_bpermute)
 *     O^T += V^T P^T  P leaves S^T's accumulators as the B operand of the
 *                     same lane (fmhai_mfma_chain_key: no LDS round trip, no
 *                     lane exchange); V^T's A fragment is read from the V tile
 * so no row reduction crosses more than one lane pair and P never moves
 * between lanes. O^T stays in 16 floats per 32 head-dim columns a lane; the
 * epilogue normalises it, writes LSE and stores O through the wave's own Q
 * rows in shared memory with 16-byte global stores.
 *
 * Shared pieces: which rows and keys a block owns and the sink fold come
 * from pipeline/fwd_common.h, the K/V tiles from pipeline/kv_source.h's
 * block loaders (contiguous, or a paged cache: LINEAR pages swizzled as the
 * portable pipeline lands them, VECTORIZED pages chunk-major; page class 3
 * is read as class 1, each row looking up its page, since it has no staged
 * run indices here). One K and one V slot, two barriers per tile. On AMD the
 * loaders' copies are synchronous loads and stores, so a deeper ring would
 * only hold more registers.
 *
 * FP8 KV computes in f16 (as the portable pipeline): the e4m3 tiles land
 * as the portable loader lands them and are decoded to f16 in LDS (two
 * barriers more a tile, see fmhai_mfma_load_kv8), the queries are converted
 * once (e4m3 exactly; bf16 with a power-of-two row scale), per-tensor
 * descales fold into the logit scale and the normalisation, per-page ones
 * multiply a key's scores and P column; O leaves as bf16. Decode (DEC) is
 * the same loop over packed (query, head) rows of a KV head's group, with
 * the split-KV share of the key tiles and the fp32 partial epilogue for
 * kernel/combine.h, as the portable decode.
 *
 * fmhai_fwd_gfx9 is what the GFX9 rows call (FMHAI_FWD_BODY_GFX9,
 * dispatch/kernel_set.h): this pipeline where it serves the row
 * (fmhai_fwd_mfma_serves: 32 rows a wave, 32-key and 32-column multiples;
 * every GFX9 row, policy/fwd_tiles.h checks it), the portable pipeline with
 * emulated mma.sync otherwise (a device pass without MFMA). The choice is
 * made on the row's constants, so a kernel holds one body. Nothing here
 * has run on an AMD GPU: it is compile-checked for gfx90a and gfx942
 * (tests/amd/check.sh) and its tile-level steps, the e4m3 decode included,
 * are replayed on the host against a model of the instructions
 * (tests/host/test_fwd_mfma_model.c).
 */
#ifndef FMHA_TILE_PIPELINE_FWD_MFMA_H
#define FMHA_TILE_PIPELINE_FWD_MFMA_H

#include "../tile/wave_mma.h"
#include "../tile/smem_layout.h"
#include "../tile/philox.h"
#include "../kernel/fwd_params.h"
#include "fwd_common.h"
#include "kv_source.h"
#include "fwd_portable.h"

#if defined(FMHA_PLATFORM_AMD)

/* Rows the MFMA pipeline serves (constants of a kernel row): 32 query rows
 * a wave (tile_m = 16 * warps, warps even), key tiles and the head dim in
 * 32s (one 32x32 block each); any KV type, forward, prefill or decode. */
#define fmhai_fwd_mfma_serves(hd, bm, bn, w, kv8, dec) \
    ((w) % 2 == 0 && (bm) == 16 * (w) && (bn) % 32 == 0 && (hd) % 32 == 0)

/* 64-bit fragments as four 16-bit codes (f16 or bf16 bits) */
typedef short fmhai_mf16x4 __attribute__((ext_vector_type(4)));

FMHAI_DEVICE void fmhai_mfma_32x32x8(fmhai_f32x16 *d, fmhai_mf16x4 a, fmhai_mf16x4 b, int is_bf16)
{
    if (is_bf16) fmhai_wave_mfma_32x32x8_bf16(d, a, b);
    else fmhai_wave_mfma_32x32x8_f16(d, __builtin_bit_cast(fmhai_f16x4, a), __builtin_bit_cast(fmhai_f16x4, b));
}

/* The lane 32 away in the wave (the other half of a query's keys). */
FMHAI_DEVICE float fmhai_wave_xor32(float x, int lane)
{
#if defined(__HIP_DEVICE_COMPILE__)
    return __int_as_float(__builtin_amdgcn_ds_bpermute((lane ^ 32) << 2, __float_as_int(x)));
#else
    (void)lane;
    return x;
#endif
}

/* Keeps the scheduler from moving instructions across the pipeline's
 * phases (S, softmax, PV): hoisting the next phase's LDS reads above the
 * softmax held their results in registers next to S's and spilled. */
FMHAI_DEVICE void fmhai_mfma_phase(void)
{
#if defined(__HIP_DEVICE_COMPILE__)
    __builtin_amdgcn_sched_barrier(0);
#endif
}

/* An LDS address the compiler cannot see through (re-derived where used). */
FMHAI_DEVICE fmhai_smem_t fmhai_mfma_opaque(fmhai_smem_t a)
{
    uint32_t x = (uint32_t)(uintptr_t)a;
#if defined(__HIP_DEVICE_COMPILE__)
    asm volatile("" : "+v"(x));
#endif
    return (fmhai_smem_t)(uintptr_t)x;
}

/* An integer the compiler cannot see through (offsets derived from it are
 * formed where used, not hoisted out of the key loop into registers). */
FMHAI_DEVICE int fmhai_mfma_opaque_i(int x)
{
#if defined(__HIP_DEVICE_COMPILE__)
    asm volatile("" : "+v"(x));
#endif
    return x;
}

FMHAI_DEVICE fmhai_mf16x4 fmhai_mfma_lds8(uint32_t lds)
{
    return *(const FMHAI_LDS fmhai_mf16x4 *)(uintptr_t)lds;
}

FMHAI_DEVICE short fmhai_mfma_cvt16(float x, int is_bf16)
{
    return is_bf16 ? (short)fmhai_f32_to_bf16_bits(x) : (short)__half_as_ushort(__float2half_rn(x));
}

/* ---- FP8 KV: the e4m3 tiles decoded to f16 in LDS ------------------------
 * The e4m3 K and V tiles of a key tile land together in the 16-bit V slot
 * (V's in its low half, K's in its high half; the portable loader's
 * fmhai_swz8 rows). K decodes into the K slot, V in place (each thread holds
 * its share in registers across one barrier), both in the swizzled 16-bit
 * layout: the rest of the pipeline is the 16-bit one, computing in f16.
 * K's columns take the order the queries were stored in (fmhai_load_q_f16,
 * fmhai_mfma_e4m3_chunk). The f16 multiply's scale is the device's e4m3
 * bias (FMHAI_DEVICE_E4M3_FNUZ, arch/arch.h). */
typedef _Float16 fmhai_mf16x2 __attribute__((ext_vector_type(2)));
#if defined(FMHAI_DEVICE_E4M3_FNUZ)
#  define FMHAI_MFMA_E4M3_SCALE 128.f
#else
#  define FMHAI_MFMA_E4M3_SCALE 256.f
#endif

FMHAI_DEVICE void fmhai_mfma_e4m3_store(fmhai_smem_t dst, int r, int c, int hd, fmhai_u32x4 w, int is_k)
{
    const uint32_t wi[4] = { w[0], w[1], w[2], w[3] };
    uint32_t lo[4], hi[4];
    fmhai_mfma_e4m3_chunk(wi, is_k, lo, hi);
    const fmhai_mf16x2 sc = { (_Float16)FMHAI_MFMA_E4M3_SCALE, (_Float16)FMHAI_MFMA_E4M3_SCALE };
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        lo[i] = __builtin_bit_cast(uint32_t, __builtin_bit_cast(fmhai_mf16x2, lo[i]) * sc);
        hi[i] = __builtin_bit_cast(uint32_t, __builtin_bit_cast(fmhai_mf16x2, hi[i]) * sc);
    }
    fmhai_lds_store16(dst + fmhai_swz(r, 2 * c, hd), lo);
    fmhai_lds_store16(dst + fmhai_swz(r, 2 * c + 1, hd), hi);
}

/* Key tile n of FP8 KV into the 16-bit K and V slots (between the loop's
 * first barrier and the one before the products; two barriers of its own). */
FMHAI_DEVICE void fmhai_mfma_load_kv8(fmhai_smem_t sK, fmhai_smem_t sV, const fmhai_kv_src *ksrc,
                                      const fmhai_kv_src *vsrc, int n, int s_k, int d, const int HD,
                                      const int BN, const int NT, int tid, const int PG, int page_log2,
                                      int off64)
{
    const int CH = HD / 16, PER = BN * CH / NT;   /* e4m3 chunks of the tile, a thread's share */
    const int ot = fmhai_mfma_opaque_i(tid);      /* chunk offsets formed per tile */
    const fmhai_smem_t sK8 = sV + BN * HD;
    fmhai_issue_kv(sK, sK8, ksrc, 0, n, s_k, d, HD, BN, NT, tid, PG, page_log2, off64, 0, 1);
    fmhai_issue_kv(sV, sV, vsrc, 1, n, s_k, d, HD, BN, NT, tid, PG, page_log2, off64, 0, 1);
    __syncthreads();
    fmhai_u32x4 vw[FMHAI_FWD_MAX_BN * FMHAI_FWD_MAX_HD / 16 / 128];
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int idx = ot + i * NT, r = idx / CH, c = idx % CH;
        vw[i] = *(const FMHAI_LDS fmhai_u32x4 *)(sV + fmhai_swz8(r, c, HD));
        fmhai_mfma_e4m3_store(sK, r, c, HD, *(const FMHAI_LDS fmhai_u32x4 *)(sK8 + fmhai_swz8(r, c, HD)), 1);
    }
    __syncthreads();   /* every thread holds its V chunks: V may be overwritten */
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int idx = ot + i * NT;
        fmhai_mfma_e4m3_store(sV, idx / CH, idx % CH, HD, vw[i], 0);
    }
}

FMHAI_DEVICE void fmhai_fwd_mfma(const fmhai_fwd_params *p, char *smem, const int is_bf16_row, const int HD,
                                 const int BM, const int BN, const int NW, const int HAS_MASK,
                                 const int SOFTCAP, const int AL, const int PAGING, const int KV_VEC,
                                 const int KV8, const int DEC)
{
    /* the row's ALiBi column: 1 ALiBi, 2 elementwise bias (contiguous
     * 16-bit K/V, not decode) */
    const int ALIBI = AL == 1, BIAS = AL == 2 && !PAGING && !KV8 && !DEC;
    /* FP8 KV computes in f16 and emits bf16 (as the portable pipeline) */
    const int is_bf16 = is_bf16_row && !KV8, OUT_BF16 = is_bf16_row || KV8;
    const fmhai_mfma_shape SH = is_bf16 ? FMHAI_MFMA_32X32X8_BF16 : FMHAI_MFMA_32X32X8_F16;
    const int NT = NW * 32;
    const int NKT = BN / 32, NMB = HD / 32;   /* 32-key blocks of S^T, 32-column blocks of O^T */
    /* hdim 256: re-read Q's B fragments from LDS, but with FP8 KV, whose
     * descales then take the Q tile's place during the loop */
    const int Q_IN_REGS = HD <= 128 || KV8;
    /* page class 3 has no staged run indices here: each row looks its page up */
    const int PG = PAGING == 3 ? 1 : PAGING;
    const float NEG_INF = -__int_as_float(0x7f800000);

    const int tid = (int)threadIdx.x, wave = tid / 64, lane = tid % 64;
    const int ql = lane % 32;   /* this lane's query (its D column) */

    /* ---- which rows, which keys (as the portable pipeline) -------------
     * Decode (DEC): blockIdx.y is a KV head and the tile's rows are the
     * (query, head) pairs of its group, PR rows a query (fmhai_q_row_off);
     * blockIdx.x also names the block's split-KV share. */
    const int PR = DEC ? p->head_ratio : 1;
    const int bx = (int)blockIdx.x;
    if (DEC) {   /* a programmatic dependent launch, as the portable decode */
        fmhai_pdl_wait();
        fmhai_pdl_trigger();
    }
    const int m_block = p->m_blocks - 1 - (DEC ? bx % p->m_blocks : bx);   /* long rows first */
    const int split = DEC ? bx / p->m_blocks : 0;
    const int h = DEC ? (int)blockIdx.y * PR : (int)blockIdx.y, b = (int)blockIdx.z;
    fmhai_fwd_seq S;
    fmhai_fwd_seq_of(p, b, PAGING != 0, DEC, &S);
    const int s_q = S.s_q, s_k = S.s_k, q_start = S.q_start, b_eff = S.b_eff;
    const int s_rows = s_q * PR;   /* tile rows of the sequence */
    const int m0 = m_block * BM;
    if (m0 >= s_rows) return;
    const int hk = h / p->head_ratio;
    fmhai_fwd_keys W;
    fmhai_fwd_keys_of(p, HAS_MASK, m0 / PR, (min(m0 + BM, s_rows) - 1) / PR, s_q, s_k, BN, &W);
    const int f_lo = W.f_lo, f_hi = W.f_hi, c_hi = W.c_hi, c_lo = W.c_lo;
    int n_hi = W.n_hi, n_iters = W.n_iters;
    if (DEC && p->num_splits > 1) fmhai_fwd_split_share(&W, split, p->num_splits, &n_hi, &n_iters);

    /* element sizes: e4m3 KV (and queries) take one byte */
    const int Q8 = KV8 && p->q_fp8;
    const int qb = Q8 ? 1 : 2;
    const char *q_ptr = (const char *)p->q + qb * ((int64_t)b_eff * p->q_batch +
                                                   (int64_t)(q_start + (DEC ? 0 : m0)) * p->q_row +
                                                   (int64_t)h * p->q_head);
    fmhai_kv_src ksrc, vsrc;
    fmhai_kv_srcs_of(p, &S, hk, KV8 ? 1 : 2, KV_VEC, &ksrc, &vsrc);

    fmhai_smem_t sQ = fmhai_smem_addr(smem);
    fmhai_smem_t sK = sQ + BM * HD * 2;
    fmhai_smem_t sV = sK + BN * HD * 2;
    /* FP8 KV keeps the LDS of the 16-bit kernels (Q and one K and one V
     * slot): the bf16 queries' row scales [BM] go to the K slot, which is
     * free until the loop (each lane keeps its row's in a register), and
     * the tile's per-page descales [K,V][BN] to the Q tile, free during the
     * loop since the queries are in registers then */
    const fmhai_smem_t sScale = sQ, sRowScale = sK;
    /* (one call per query type: a constant type lets its row loop unroll) */
    if (KV8 && Q8)
        fmhai_load_q_f16(sQ, (float *)(smem + BM * HD * 2), q_ptr, p->q_row, BM, s_rows - m0, p->d, HD, NT, tid, 1,
                         p->q_head, DEC ? PR : 0, m0);
    else if (KV8)
        fmhai_load_q_f16(sQ, (float *)(smem + BM * HD * 2), q_ptr, 2 * p->q_row, BM, s_rows - m0, p->d, HD, NT,
                         tid, 0, 2 * p->q_head, DEC ? PR : 0, m0);
    else if (DEC)
        fmhai_block_load_q_packed(sQ, q_ptr, 2 * p->q_row, 2 * p->q_head, PR, m0, BM, s_rows - m0, p->d, HD,
                                  NT, tid);
    else
        fmhai_block_load_tile(sQ, q_ptr, 2 * p->q_row, 16, BM, s_q - m0, p->d, HD, NT, tid, 0);
    /* FP8 descales: per tensor, q and k fold into the logit scale and v into
     * the normalisation; per page, score column j times key j's page descale
     * and P column j times value j's */
    float qk_ds, v_ds;
    const int PAGE_DS = KV8 && p->k_page_descale != 0;
    fmhai_fwd_kv8_descales(p, KV8, Q8, &qk_ds, &v_ds);

    /* ---- per-lane state: one query, O^T columns of it ------------------- */
    fmhai_f32x16 acc_o[FMHAI_FWD_MAX_HD / 32];
    fmhai_mf16x4 qf[FMHAI_FWD_MAX_HD / 8];
#pragma unroll
    for (int mb = 0; mb < NMB; ++mb)
#pragma unroll
        for (int e = 0; e < 16; ++e) acc_o[mb][e] = 0.f;
    float row_max = NEG_INF, row_sum = 0.f;   /* row_sum: this lane's half of the keys */
    const float scale_log2 = p->scale_log2 * qk_ds, softcap_pre = p->softcap_pre * qk_ds;
    const float sl2 = (SOFTCAP || ALIBI || BIAS) ? 1.f : scale_log2;
    /* decode kernels built with a soft cap serve problems without one */
    const int SC_ON = SOFTCAP && (!DEC || p->softcap_pre != 0.f);
    const int row = wave * 32 + ql;           /* this lane's tile row */
    const int R = m0 + row;                   /* its packed row (decode) */
    const int qi = R / PR;                    /* its query index */
    const int hh = h + (DEC ? R % PR : 0);    /* its query head */
    /* ALiBi: the row's head's slope (decode: run-time, may be absent) */
    const float slope = ALIBI && (!DEC || p->alibi_slopes)
                            ? p->alibi_slopes[(int64_t)b * p->alibi_batch + hh] * 1.4426950408889634f
                            : 0.f;
    /* its bias row (BIAS kernels; NULL past s_q) */
    const char *bias_row = BIAS ? fmhai_bias_row(p, fmhai_bias_rows(p, b_eff, h, q_start), qi, s_q) : 0;
    /* Fragment addresses: a base per lane, and per fragment one XOR on the
     * swizzle bits (4..6) plus a constant the ds_read offset field absorbs.
     * The bases are re-derived from an opaque tile address every tile, so
     * the compiler does not hoist one address per fragment out of the loop
     * and hold them all in registers. LINEAR tiles (fmhai_swz rows of
     * HD * 2 >= 128 bytes from a 128-byte aligned base):
     *   Q^T's B of k-block kb: row wave*32 + ql, columns kb*8 + 4*kh ..
     *   K's A of key block t, k-block kb: row t*32 + ql, the same columns
     *   V^T's A of d block mb, key block kb, slot e: row kb*8 + 4*kh + e,
     *     column mb*32 + ql, so row % 8 = 4*kh + e and the chunk is
     *     (4*mb + ql/8) ^ (4*kh + e)
     * VECTORIZED tiles are chunk-major: a plain base and constants. */
    const int kh = lane / 32;
    const int q_off = fmhai_mfma_lds_row(wave * 32 + ql, kh, HD);
    const int k_off = KV_VEC ? fmhai_mfma_lds_cmaj(ql, 4 * kh, BN) : fmhai_mfma_lds_row(ql, kh, HD);

    /* Q's B fragments stay in registers up to hdim 128 (one barrier more
     * than the loop's; read inside the loop, the first tile's copy of the
     * loop got peeled off and the compiler held both versions' registers) */
    /* FP8, bf16 queries: the row's power-of-two scale (fmhai_load_q_f16) */
    float q_rs = 1.f;
    if (Q_IN_REGS) {
        __syncthreads();
        if (KV8 && !Q8) q_rs = *(const FMHAI_LDS float *)(sRowScale + 4 * row);
        const uint32_t qb0 = fmhai_lds_u32(fmhai_mfma_opaque(sQ)) + q_off;
#pragma unroll
        for (int kb = 0; kb < HD / 8; ++kb)
            qf[kb] = fmhai_mfma_lds8(fmhai_mfma_lds_kb(qb0, kb));
    }

    for (int it = 0; it < n_iters; ++it) {
        const int n = n_hi - 1 - it;
        __syncthreads();   /* every wave is done with tile it-1's K and V */
        /* opaque tile addresses: the copies' LDS offsets are formed per tile */
        if (KV8) {
            if (PAGE_DS && tid < BN) {   /* the tile's per-page descales */
                const int pg = fmhai_page_of(&ksrc, n * BN + tid, p->page_log2);
                const int64_t at = (int64_t)pg * p->ds_page + hk * p->ds_head;
                *(FMHAI_LDS float *)(sScale + 4 * tid) = p->k_page_descale[at];
                *(FMHAI_LDS float *)(sScale + 4 * (BN + tid)) = p->v_page_descale[at];
            }
            fmhai_mfma_load_kv8(fmhai_mfma_opaque(sK), fmhai_mfma_opaque(sV), &ksrc, &vsrc, n, s_k, p->d, HD,
                                BN, NT, tid, PG, p->page_log2, p->kv_off64);
        } else {
            fmhai_block_load_kv(fmhai_mfma_opaque(sK), &ksrc, n, s_k, p->d, HD, BN, NT, tid, PG, p->page_log2,
                                p->kv_off64, KV_VEC, 0);
            fmhai_block_load_v(fmhai_mfma_opaque(sV), &vsrc, n, s_k, p->d, HD, BN, NT, tid, PG, p->page_log2,
                               p->kv_off64, KV_VEC);
        }
        __syncthreads();
        const uint32_t qb0 = fmhai_lds_u32(fmhai_mfma_opaque(sQ)) + q_off;
        const uint32_t kb0 = fmhai_lds_u32(fmhai_mfma_opaque(sK)) + k_off;
        const uint32_t vt0 = fmhai_lds_u32(fmhai_mfma_opaque(sV));

        /* ---- S^T = K Q^T ------------------------------------------------ */
        fmhai_f32x16 st[FMHAI_FWD_MAX_BN / 32];
#pragma unroll
        for (int t = 0; t < NKT; ++t)
#pragma unroll
            for (int e = 0; e < 16; ++e) st[t][e] = 0.f;
#pragma unroll
        for (int kb = 0; kb < HD / 8; ++kb) {
            const fmhai_mf16x4 qb = Q_IN_REGS ? qf[kb] : fmhai_mfma_lds8(fmhai_mfma_lds_kb(qb0, kb));
            const uint32_t ka0 = KV_VEC ? kb0 + kb * BN * 16 : fmhai_mfma_lds_kb(kb0, kb);
#pragma unroll
            for (int t = 0; t < NKT; ++t) {
                const fmhai_mf16x4 ka = fmhai_mfma_lds8(ka0 + t * 32 * (KV_VEC ? 16 : HD * 2));
                fmhai_mfma_32x32x8(&st[t], ka, qb, is_bf16);
            }
        }

        fmhai_mfma_phase();
        /* ---- logits: FP8 scales, soft cap, ALiBi, mask ------------------
         * slot e of key block t holds key n*BN + 4*kh + fmhai_mfma_key_c(t, e)
         * (its D row, fmhai_mfma_d_elem). FP8: the row's query scale and the
         * key's page descale (4 consecutive keys a run of slots). */
        if (KV8 && (PAGE_DS || !Q8)) {
            const fmhai_smem_t ks = sScale + 16 * kh;
#pragma unroll
            for (int t = 0; t < NKT; ++t)
#pragma unroll
                for (int e = 0; e < 16; ++e)
                    st[t][e] *= PAGE_DS ? q_rs * *(const FMHAI_LDS float *)(ks + 4 * fmhai_mfma_key_c(t, e)) : q_rs;
        }
        const int dist0 = qi + s_k - s_q - n * BN - 4 * kh;
        /* bias: the lane's first key of the tile as the base, so each slot
         * is a constant offset (one 64-bit address a tile, not 32) */
        const int bk0 = n * BN + 4 * kh;
        const char *bias_k0 = bias_row ? bias_row + (int64_t)bk0 * (p->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2) : 0;
        if (SOFTCAP || ALIBI || BIAS) {
#pragma unroll
            for (int t = 0; t < NKT; ++t)
#pragma unroll
                for (int e = 0; e < 16; ++e) {
                    float x = st[t][e];
                    if (SC_ON) x = tanhf(x * softcap_pre) * p->softcap_post_log2;
                    else x *= scale_log2;
                    if (ALIBI)   /* bottom-right aligned distance |i + s_k - s_q - j| */
                        x -= slope * fabsf((float)(dist0 - fmhai_mfma_key_c(t, e)));
                    if (BIAS)    /* elementwise bias of (qi, key) */
                        x += fmhai_bias_elem(p, bias_k0, fmhai_mfma_key_c(t, e), s_k - bk0);
                    st[t][e] = x;
                }
        }
        if (!(n >= f_lo && n < f_hi)) {
            /* this query sees keys [lo, hi) of the tile; relative to the
             * lane's first key (4*kh), slot e of block t is a constant */
            const int k0 = n * BN + 4 * kh;
            const int hi = min(s_k, qi + c_hi) - k0, lo = qi + c_lo - k0;
#pragma unroll
            for (int t = 0; t < NKT; ++t)
#pragma unroll
                for (int e = 0; e < 16; ++e) {
                    const int c = fmhai_mfma_key_c(t, e);
                    if (c < lo || c >= hi) st[t][e] = NEG_INF;
                }
        }

        fmhai_mfma_phase();
        /* ---- online softmax (base 2): the query's max over both halves --- */
        float mx = row_max;
#pragma unroll
        for (int t = 0; t < NKT; ++t)
#pragma unroll
            for (int e = 0; e < 16; ++e) mx = fmaxf(mx, st[t][e]);
        mx = fmaxf(mx, fmhai_wave_xor32(mx, lane));
        /* a query with no visible key yet keeps max -inf: 0 keeps exp2 off NaN */
        const float ms = mx == NEG_INF ? 0.f : mx * sl2;
        const float alpha = fmhai_exp2(row_max * sl2 - ms);
        row_max = mx;
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < NKT; ++t)
#pragma unroll
            for (int e = 0; e < 16; ++e) {
                const float pv = fmhai_exp2(st[t][e] * sl2 - ms);
                st[t][e] = pv;
                sum += pv;
            }
        row_sum = row_sum * alpha + sum;
        if (!PAGING && !KV8 && !DEC && p->dropout_thr) {
            /* dropout (the contiguous forward, as the portable pipeline): a
             * kept P element times its scale, the row sum left whole. The
             * lane's keys of block t are t*32 + 16*b4 + 8*b3 + 4*kh + 2*b1 +
             * b0 (slot 4*(2*b4 + b3) + 2*b1 + b0); one Philox call per (b1,
             * b4) gives the block of keys differing in bits 0 and 3 (b0, b3)
             * and rows i, i^1, i^8, i^9, of which this query's 4 bytes. */
            const uint32_t bh = (uint32_t)(b * p->nhead_q + h);
            const uint32_t ib = 8u * (((uint32_t)qi >> 3) & 1u) + 4u * ((uint32_t)qi & 1u);
#pragma unroll
            for (int t = 0; t < NKT; ++t)
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int b1 = q & 1, b4 = q >> 1;
                    uint32_t w[4];
                    fmhai_dropout_block(p->dropout_seed, p->dropout_offset, bh, (uint32_t)qi,
                                        (uint32_t)(n * BN + t * 32 + 16 * b4 + 4 * kh + 2 * b1), w);
                    /* the query's word (byte index ib / 4), selected, not indexed */
                    const uint32_t wq = ib == 0 ? w[0] : ib == 4 ? w[1] : ib == 8 ? w[2] : w[3];
#pragma unroll
                    for (int b3 = 0; b3 < 2; ++b3)
#pragma unroll
                        for (int b0 = 0; b0 < 2; ++b0) {
                            const uint32_t byte = (wq >> (8 * (2 * b3 + b0))) & 0xffu;
                            st[t][4 * (2 * b4 + b3) + 2 * b1 + b0] *= byte >= p->dropout_thr ? p->dropout_scale : 0.f;
                        }
                }
        }
#pragma unroll
        for (int mb = 0; mb < NMB; ++mb)
#pragma unroll
            for (int e = 0; e < 16; ++e) acc_o[mb][e] *= alpha;

        fmhai_mfma_phase();
        /* ---- O^T += V^T P^T ----------------------------------------------
         * P's B fragment of key block kb: flat slots kb*4 .. kb*4+3 of this
         * lane's S^T (keys kb*8 + 4*half + e, fmhai_mfma_chain_key); V^T's A
         * fragment: those keys at head-dim column mb*32 + ql (LINEAR V: four
         * 16-bit reads down a column; VECTORIZED V^T: one 8-byte read). */
        fmhai_mf16x4 pb[FMHAI_FWD_MAX_BN / 8];
        /* FP8 per-page descales: P column j times value j's (the row sum is unscaled) */
        const fmhai_smem_t vs = sScale + 4 * BN + 16 * kh;
#pragma unroll
        for (int kb = 0; kb < BN / 8; ++kb)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int f = kb * 4 + e;
                float pv = st[f / 16][f % 16];
                if (PAGE_DS) pv *= *(const FMHAI_LDS float *)(vs + 4 * fmhai_mfma_key_c(f / 16, f % 16));
                pb[kb][e] = fmhai_mfma_cvt16(pv, is_bf16);
            }
#pragma unroll
        for (int mb = 0; mb < NMB; ++mb) {
#pragma unroll
            for (int kb = 0; kb < BN / 8; ++kb) {
                fmhai_mf16x4 va;
                if (KV_VEC) {
                    va = fmhai_mfma_lds8(vt0 + fmhai_mfma_lds_cmaj(mb * 32 + ql, kb * 8 + 4 * kh, HD));
                } else {
                    /* as f16 lanes of a vector: ds_read_u16_d16(_hi) fill
                     * the halves of two VGPRs, no extra register a key */
                    fmhai_f16x4 vh;
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const uint32_t ve = vt0 + fmhai_mfma_lds_vt(ql, kh, e, HD);
                        vh[e] = *(const FMHAI_LDS _Float16 *)(uintptr_t)fmhai_mfma_lds_vt_at(ve, mb, kb, HD);
                    }
                    va = __builtin_bit_cast(fmhai_mf16x4, vh);
                }
                fmhai_mfma_32x32x8(&acc_o[mb], va, pb[kb], is_bf16);
            }
        }
    }

    /* ---- epilogue ------------------------------------------------------ */
    /* every wave is done with the tiles, and every thread's Q copies have
     * landed (no key tile may have been visited), before O reuses Q's rows */
    __syncthreads();
    const float LN2 = 0.6931471805599453f;
    float sum = row_sum + fmhai_wave_xor32(row_sum, lane);
    const float ms = row_max * sl2;
    float m_ln = ms * LN2, f = 1.f;   /* the LSE's offset, natural log */
    /* a sink (decode: the first split's rows only, each of its head) */
    if (p->sinks && (!DEC || split == 0)) f = fmhai_sink_fold(p->sinks[hh], ms, &sum, &m_ln);
    const float inv = sum > 0.f ? f * v_ds / sum : 0.f;
    if (DEC && lane < 32 && R < s_rows && (p->lse || p->num_splits > 1)) {
        /* decode: a split's LSE goes to the workspace whether or not the
         * caller wants LSE */
        const float lse = sum > 0.f ? m_ln + logf(sum) : NEG_INF;
        if (p->num_splits > 1)
            p->ws_lse[(int64_t)split * p->ws_rows + ((int64_t)b * p->nhead_q + hh) * s_q + qi] = lse;
        else
            p->lse[(int64_t)b * p->lse_batch + (int64_t)hh * p->lse_head + qi] = lse;
    }
    if (!DEC && p->lse && lane < 32 && qi < s_q) {
        const int64_t li = p->seqstart_q ? (int64_t)h * p->lse_head + q_start + qi
                                         : (int64_t)b * p->lse_batch + (int64_t)h * p->lse_head + qi;
        p->lse[li] = sum > 0.f ? m_ln + logf(sum) : NEG_INF;
    }
    if (DEC && p->num_splits > 1) {
        /* split-KV partial O (normalised by this split's own sum, fp32)
         * straight from the accumulators: 4 consecutive columns a store */
        if (R < s_rows) {
            float *dst = p->ws_o + ((int64_t)split * p->ws_rows + ((int64_t)b * p->nhead_q + hh) * s_q + qi) * p->d;
#pragma unroll
            for (int mb = 0; mb < NMB; ++mb)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int c = mb * 32 + fmhai_mfma_d_elem(SH, lane, 4 * r).row;
                    if (c < p->d)
                        *(fmhai_f32x4 *)(dst + c) = (fmhai_f32x4){ acc_o[mb][4 * r] * inv, acc_o[mb][4 * r + 1] * inv,
                                                                   acc_o[mb][4 * r + 2] * inv, acc_o[mb][4 * r + 3] * inv };
                }
        }
        return;
    }
    /* O^T slots 4r .. 4r+3 of block mb are 4 consecutive head-dim columns of
     * this lane's query (fmhai_mfma_d_elem): one 8-byte store into its row */
#pragma unroll
    for (int mb = 0; mb < NMB; ++mb)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int c = mb * 32 + fmhai_mfma_d_elem(SH, lane, 4 * r).row;
            fmhai_lds_store8(sQ + fmhai_mfma_lds_swz(row, c, HD),
                             fmhai_pack2(acc_o[mb][4 * r] * inv, acc_o[mb][4 * r + 1] * inv, OUT_BF16),
                             fmhai_pack2(acc_o[mb][4 * r + 2] * inv, acc_o[mb][4 * r + 3] * inv, OUT_BF16));
        }
    fmhai_sync_warp();   /* a wave reads back only its own rows */
    char *o_ptr = (char *)p->o + 2 * ((int64_t)b_eff * p->o_batch + (int64_t)(q_start + (DEC ? 0 : m0)) * p->o_row +
                                      (int64_t)h * p->o_head);
    const int chunks = HD / 8;
#pragma unroll
    for (int i = 0; i < 32 * chunks / 64; ++i) {
        const int idx = lane + 64 * i;
        const int r = wave * 32 + idx / chunks, c = idx % chunks;
        if (m0 + r < s_rows && c * 8 < p->d) {
            *(fmhai_u32x4 *)(o_ptr + fmhai_q_row_off(r, 2 * p->o_row, 2 * p->o_head, DEC ? PR : 0, m0) + c * 16) =
                *(const FMHAI_LDS fmhai_u32x4 *)(sQ + fmhai_swz(r, c, HD));
        }
    }
}

/* The GFX9 rows' body: MFMA where it serves the row, else the portable
 * pipeline (emulated mma.sync). A device pass for a target without MFMA
 * (the rows never run there) keeps the portable body. ALIBI is the row's
 * column value (2: the elementwise bias, which both pipelines carry). */
FMHAI_DEVICE void fmhai_fwd_gfx9(const fmhai_fwd_params *p, char *smem, const int is_bf16, const int HD,
                                 const int HDV, const int BM, const int BN, const int NW, const int ST, const int HAS_MASK,
                                 const int SOFTCAP, const int ALIBI, const int PAGING, const int KV_VEC,
                                 const int KV8, const int DEC)
{
#if defined(__HIP_DEVICE_COMPILE__) && !defined(FMHAI_DEVICE_HAS_MFMA)
    const int MFMA = 0;
#else
    /* the MFMA pipeline has one head dim: rows of unequal dims run portable */
    const int MFMA = HDV == HD && fmhai_fwd_mfma_serves(HD, BM, BN, NW, KV8, DEC);
#endif
    if (MFMA)
        fmhai_fwd_mfma(p, smem, is_bf16, HD, BM, BN, NW, HAS_MASK, SOFTCAP, ALIBI, PAGING, KV_VEC, KV8, DEC);
    else
        fmhai_fwd_portable(p, smem, is_bf16, HD, HDV, BM, BN, NW, ST, HAS_MASK, SOFTCAP, ALIBI, PAGING, KV_VEC,
                           KV8, DEC);
}

#endif /* FMHA_PLATFORM_AMD */
#endif /* FMHA_TILE_PIPELINE_FWD_MFMA_H */
