/*
 * MFMA backward dq_dk_dv for AMD CDNA (gfx90a, gfx942): the portable
 * backward's algorithm (pipeline/bwd_portable.h) on the wave64 matrix
 * instruction v_mfma_f32_32x32x8{f16,bf16_1k} of tile/wave_mma.h.
 *
 * A block owns tile_n = 16 * warps keys of one KV head, as the portable
 * rows: a wave (two 32-lane warps) owns 32 of them and sweeps the query
 * tiles that can see them, for every query head of the GQA group, in
 * 32-query slices. Per slice a wave computes, key-major:
 *     S^T     Q K^T with the query tile as A and the key tile as B, so a
 *             lane's accumulators hold one key (its column) and 16 queries:
 *             the lane's row of S^T. P^T = exp2(S^T scale log2e - LSE log2e)
 *             there (soft cap, ALiBi, the elementwise bias, masks, dropout
 *             as the portable one; a lane reads its 16 queries' LSE and D
 *             as four float4, and, BIAS rows, its 16 bias elements one by
 *             one with fmhai_bwd_bias_ld, added after the soft cap)
 *     dV^T += dO^T P   P^T leaves the accumulators as the B operand of the
 *             same lane (fmhai_mfma_chain_key: no LDS trip, no lane
 *             exchange); dO^T's A fragment is read down a column of dO
 *     dP^T    dO V^T, laid out as S^T
 *     dS^T    P^T (dP^T - D) (soft cap: times 1 - tanh^2); BIAS rows
 *             hand it on in fp32 as dbias, two queries of the lane's key a
 *             call (fmhai_bwd_dbias_put2: plain stores, or the workspace
 *             sum's atomics or deterministic slices, as the portable one)
 *     dK^T += Q^T dS   dS^T chained as P^T was, Q^T read down a column
 *     dS^T -> LDS      a [tile_m][tile_n] tile, queries as rows
 * and, after a barrier, dQ_tile = dS K with the waves taking blocks of up
 * to 64 query rows by 32 head-dim columns in turn: dS's A fragment is 8
 * bytes of a query row, K's B fragment a column of the K tile. dQ goes out
 * as fp32 atomics (global_atomic_add_f32), as the plain read-add-write of
 * this split's slice after the slice's earlier key tiles (deterministic:
 * the portable counters, fmhai_bwd_det_need, an agent-scope fence on each
 * side), or scaled straight to dQ with one key tile per sequence. Head dims above 128
 * sweep twice (dV, then dK and dQ) so that one 32 x hd accumulator lives at
 * a time; dK (times scale) and dV (times the dropout scale) go out from the
 * accumulators, 4 consecutive head-dim columns of the lane's key per store.
 * Rows past s_q (zero Q/dO, LSE and D 0) add nothing; keys past s_k are
 * masked. The units, key tiles, sweep order, windows and deterministic
 * chains are the portable helpers' (fmhai_bwd_unit_of, fmhai_bwd_tile_of).
 *
 * On AMD the tile copies are synchronous loads and stores, so Q/dO load
 * between two barriers at the start of each step and one buffer serves any
 * stages value. Shared memory (within FMHAI_BWD_SMEM_BYTES): K, V [BN][hd]
 * and Q, dO [BM][hd] swizzled as the loaders land them, dS [BM][BN]
 * (fmhai_mfma_lds_ds), LSE and D [2][BM] fp32.
 *
 * fmhai_bwd_dq_dk_dv_gfx9 is what the GFX9 dq_dk_dv rows call
 * (FMHAI_BWD_FN_GFX9, dispatch/bwd_set.h): this pipeline where it serves
 * the row (fmhai_bwd_mfma_serves: 32-key waves, tile_n 32, 64 or 128, head
 * dims in 32s; any mask, soft cap, ALiBi or BIAS column), the portable
 * pipeline with emulated mma.sync otherwise (a row of another tile shape,
 * or a device pass without MFMA).
 * Nothing here has run on an AMD GPU: it is compile-checked for gfx90a and
 * gfx942 (tests/amd/check.sh) and its tile step is replayed on the host
 * against a model of the instructions (tests/host/test_bwd_mfma_model.c).
 */
#ifndef FMHA_TILE_PIPELINE_BWD_MFMA_H
#define FMHA_TILE_PIPELINE_BWD_MFMA_H

#include "../tile/wave_mma.h"
#include "fwd_mfma.h"
#include "bwd_portable.h"

#if defined(FMHA_PLATFORM_AMD)

/* Rows the MFMA backward serves (constants of a kernel row): whole waves of
 * 32 keys (tile_n = 16 * warps, warps even) with tile_n a power of two (the
 * dS tile's swizzle), 32-query slices, head dims in 32-column blocks. */
#define fmhai_bwd_mfma_serves(hd, bm, bn, w)                                               \
    ((w) % 2 == 0 && (bn) == 16 * (w) && ((bn) == 32 || (bn) == 64 || (bn) == 128) &&      \
     (bm) % 32 == 0 && (bm) <= 128 && (hd) % 32 == 0 && (hd) >= 64)

typedef uint32_t fmhai_u32x2 __attribute__((ext_vector_type(2)));

/* Agent-scope fences around the deterministic dQ hand-off: each thread's
 * slice stores are out before thread 0's release, and its slice loads see
 * what thread 0's acquire admitted (also with the L1 split across CUs). */
FMHAI_DEVICE void fmhai_mfma_fence_agent(int acquire)
{
#if defined(__HIP_DEVICE_COMPILE__)
    if (acquire) __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
    else __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
#else
    (void)acquire;
#endif
}

/* A 32-bit LDS address the compiler cannot see through: fragment
 * addresses are formed at each read from a per-lane base, not hoisted as
 * one register per (XOR, block) out of the sweep and held there. */
FMHAI_DEVICE uint32_t fmhai_mfma_opaque_u32(uint32_t x)
{
#if defined(__HIP_DEVICE_COMPILE__)
    asm volatile("" : "+v"(x));
#endif
    return x;
}

/* A fragment read down a column of a swizzled [rows][hd] tile (128-byte
 * aligned at `tile`): rows kb*8 + 4*kh + e, column mb*32 + ql. The A of dV^T
 * and dK^T (dO^T, Q^T) and dQ's B (K). ds_read_u16_d16(_hi) fill the halves. */
FMHAI_DEVICE fmhai_mf16x4 fmhai_mfma_col_frag(uint32_t tile, int ql, int kh, int mb, int kb, int HD)
{
    fmhai_f16x4 h;
#pragma unroll
    for (int e = 0; e < 4; ++e)
        h[e] = *(const FMHAI_LDS _Float16 *)(uintptr_t)fmhai_mfma_lds_vt_at(
            fmhai_mfma_opaque_u32(tile + fmhai_mfma_lds_vt(ql, kh, e, HD)), mb, kb, HD);
    return __builtin_bit_cast(fmhai_mf16x4, h);
}

/* acc = A B^T over the head dim, A's rows from one tile row per lane (Q or
 * dO, base `a`), B's from another (K or V, base `b`): S^T and dP^T. */
FMHAI_DEVICE void fmhai_bwd_mfma_abt(fmhai_f32x16 *acc, uint32_t a, uint32_t b, int HD, int is_bf16)
{
#pragma unroll
    for (int e = 0; e < 16; ++e) (*acc)[e] = 0.f;
#pragma unroll
    for (int kb = 0; kb < HD / 8; ++kb)
        fmhai_mfma_32x32x8(acc, fmhai_mfma_lds8(fmhai_mfma_lds_kb(fmhai_mfma_opaque_u32(a), kb)),
                           fmhai_mfma_lds8(fmhai_mfma_lds_kb(fmhai_mfma_opaque_u32(b), kb)), is_bf16);
}

/* acc[mb] += X^T F over a 32-query slice: X^T's A fragments down the
 * columns of the slice's tile rows (base `tile`), F the chained 16-bit
 * fragments (P^T or dS^T). dV^T += dO^T P and dK^T += Q^T dS. */
FMHAI_DEVICE void fmhai_bwd_mfma_atb(fmhai_f32x16 *acc, uint32_t tile, const fmhai_mf16x4 *f, int ql, int kh, int HD,
                                     int is_bf16)
{
#pragma unroll
    for (int mb = 0; mb < HD / 32; ++mb)
#pragma unroll
        for (int kb = 0; kb < 4; ++kb)
            fmhai_mfma_32x32x8(&acc[mb], fmhai_mfma_col_frag(tile, ql, kh, mb, kb, HD), f[kb], is_bf16);
}

/* The lane's key's row of dK or dV: block mb's slots 4*g4 .. 4*g4+3 are
 * head-dim columns mb*32 + 8*g4 + 4*kh .. + 3 (one 8-byte store). */
FMHAI_DEVICE void fmhai_bwd_mfma_store_kv(char *dst, int64_t row_stride, const fmhai_f32x16 *acc, float mul, int key,
                                          int s_k, int d, int is_bf16, int HD, int kh)
{
    if (key >= s_k) return;
    char *row = dst + 2 * (int64_t)key * row_stride;
#pragma unroll
    for (int mb = 0; mb < HD / 32; ++mb)
#pragma unroll
        for (int g4 = 0; g4 < 4; ++g4) {
            const int col = mb * 32 + 8 * g4 + 4 * kh;
            if (col < d) {
                const fmhai_u32x2 v = { fmhai_pack2(acc[mb][4 * g4] * mul, acc[mb][4 * g4 + 1] * mul, is_bf16),
                                        fmhai_pack2(acc[mb][4 * g4 + 2] * mul, acc[mb][4 * g4 + 3] * mul, is_bf16) };
                *(fmhai_u32x2 *)(row + 2 * col) = v;
            }
        }
}

/* A rows x hd 16-bit tile into its swizzled LDS tile (fmhai_block_load_tile)
 * in runs of about 8 copies a thread with a scheduling barrier between runs:
 * the copies are a load and a store on AMD, and with nothing between them
 * the compiler issues every load of the tile first (hdim 256: 128 VGPRs of
 * data a tile in flight). Runs start at multiples of 8 rows, so the swizzle
 * of a run is the tile's. */
FMHAI_DEVICE void fmhai_bwd_mfma_load_rows(fmhai_smem_t dst, const char *src, int64_t row_bytes, int rows,
                                           int rows_valid, int d, int HD, int NT, int tid)
{
    const int rstep = NT / (HD / 8);                          /* rows a pass of the block copies */
    const int run = 8 * rstep < rows ? 8 * rstep : rows;   /* rows of a run */
#pragma unroll
    for (int r0 = 0; r0 < rows; r0 += run) {
        fmhai_block_load_tile(dst + r0 * HD * 2, src + r0 * row_bytes, row_bytes, 16, run, rows_valid - r0, d, HD, NT,
                              tid, 0);
        fmhai_mfma_phase();
    }
}

/* dq_dk_dv of one (KV head, batch entry) unit on MFMA. */
FMHAI_DEVICE void fmhai_bwd_mfma_unit(const fmhai_bwd_params *p, char *smem, const int is_bf16, const int HD,
                                      const int BM, const int BN, const int NW, const int HAS_MASK,
                                      const int SOFTCAP, const int ALIBI, const fmhai_bwd_unit *U)
{
    const int NT = NW * 32, NWV = NW / 2;      /* threads, waves */
    const int TWO_SWEEPS = HD > 128;           /* dV sweep, then dK + dQ sweep */
    const int NMB = HD / 32;                   /* 32-column blocks of dK^T, dV^T, dQ */
    const int RB = BM / 32 < 2 ? BM / 32 : 2;             /* 32-row blocks of a wave's dQ block */
    const int BIG = 1 << 30;
    const float LOG2E = 1.4426950408889634f;

    const int tid = (int)threadIdx.x, lane = tid % 64, ql = lane % 32, kh = lane / 32;
#if defined(__HIP_DEVICE_COMPILE__)
    const int wave = __builtin_amdgcn_readfirstlane(tid / 64);   /* uniform: an SGPR */
#else
    const int wave = tid / 64;
#endif
    const fmhai_bwd_seq s = U->s;
    const int hk = U->hk, det = U->det, n_tiles = U->n_tiles, masked = U->masked;
    const int c_lo = U->c_lo, c_hi = U->c_hi;   /* key j visible to query i: c_lo <= j - i <= c_hi */
    const int drop = p->dropout_thr != 0u;      /* a uniform branch: none of dropout's code runs without it */
    uint64_t seed = 0, offset = 0;
    if (drop) fmhai_dropout_seed_offset(p->dropout_rng, p->dropout_seed, p->dropout_offset, &seed, &offset);

    /* ---- shared memory ---------------------------------------------------- */
    const int kv_bytes = BN * HD * 2, q_bytes = BM * HD * 2;
    const fmhai_smem_t sK = fmhai_smem_addr(smem);
    const fmhai_smem_t sV = sK + kv_bytes;
    const fmhai_smem_t sQ = sV + kv_bytes;
    const fmhai_smem_t sdO = sQ + q_bytes;
    const fmhai_smem_t sdS = sdO + q_bytes;
    float *sLse = (float *)(smem + 2 * kv_bytes + 2 * q_bytes + BM * BN * 2);   /* [2][BM] */
    float *sD = sLse + 2 * BM;                                                   /* [2][BM] */

    const int key0 = wave * 32;   /* this wave's keys in the tile; the lane's is key0 + ql */
    const char *k_seq = (const char *)p->k + 2 * ((int64_t)s.b_eff * p->k_batch + (int64_t)s.k_start * p->k_row +
                                                  (int64_t)hk * p->k_head);
    const char *v_seq = (const char *)p->v + 2 * ((int64_t)s.b_eff * p->v_batch + (int64_t)s.k_start * p->v_row +
                                                  (int64_t)hk * p->v_head);

    int32_t *pend = 0;   /* deterministic, thread 0: counter of the last dQ adds, not yet published */
    for (int x = fmhai_bwd_x0(p); x < n_tiles; x += (int)gridDim.x) {
        fmhai_bwd_tile T;   /* the query tiles that can see a key of this tile, in sweep order */
        fmhai_bwd_tile_of(p, &s, x, n_tiles, U->rev, BM, BN, det, masked, c_lo, c_hi, BIG, &T);
        const int n = T.n, j0 = T.j0, split = T.split, n_m = T.n_m, m_first = T.m_first;
        const int n_it = T.n_steps;
        const int n_steps = (TWO_SWEEPS ? 2 : 1) * n_it;
        char *dk = (char *)p->dk + 2 * ((int64_t)s.b_eff * p->dk_batch + (int64_t)(s.k_start + j0) * p->dk_row +
                                        (int64_t)hk * p->dk_head);
        char *dv = (char *)p->dv + 2 * ((int64_t)s.b_eff * p->dv_batch + (int64_t)(s.k_start + j0) * p->dv_row +
                                        (int64_t)hk * p->dv_head);

        __syncthreads();   /* every wave is done with the previous tile's LDS */
        fmhai_bwd_mfma_load_rows(fmhai_mfma_opaque(sK), k_seq + 2 * (int64_t)j0 * p->k_row, 2 * p->k_row, BN,
                                 s.s_k - j0, p->d, HD, NT, tid);
        fmhai_bwd_mfma_load_rows(fmhai_mfma_opaque(sV), v_seq + 2 * (int64_t)j0 * p->v_row, 2 * p->v_row, BN,
                                 s.s_k - j0, p->hdv, HD, NT, tid);

        /* acc_a: dV (single sweep), dV then dK (two sweeps); acc_b: dK */
        fmhai_f32x16 acc_a[FMHAI_FWD_MAX_HD / 32], acc_b[FMHAI_FWD_MAX_HD / 32];
#pragma unroll
        for (int mb = 0; mb < NMB; ++mb)
#pragma unroll
            for (int e = 0; e < 16; ++e) { acc_a[mb][e] = 0.f; acc_b[mb][e] = 0.f; }

        int mi = 0, hq = 0;   /* this step's sweep position */
#pragma unroll 1
        for (int jt = 0; jt < n_steps; ++jt) {
            const int dv_step = !TWO_SWEEPS || jt < n_it;
            const int dk_step = !TWO_SWEEPS || jt >= n_it;
            const int slot = (jt & 1) * BM;
            const int m0 = fmhai_bwd_m_at(&T, mi) * BM;
            const int h = hk * p->head_ratio + hq;
            const float slope2 = fmhai_bwd_slope2(p, U->b, h, ALIBI);
            /* elementwise bias: (entry, head h) bases of the bias and dbias */
            const int64_t bias_b = ALIBI == 2 ? fmhai_bwd_bias_base(&s, p->bias_row, p->bias_head, p->bias_batch, h) : 0;
            const int64_t dbias_b =
                ALIBI == 2 ? fmhai_bwd_bias_base(&s, p->dbias_row, p->dbias_head, p->dbias_batch, h) : 0;
            fmhai_bwd_next_pos(&mi, &hq, n_m, p->head_ratio);

            if (TWO_SWEEPS && jt == n_it) {   /* dV sweep done: dV out, dK next */
                fmhai_bwd_mfma_store_kv(dv, p->dv_row, acc_a, p->dropout_scale, key0 + ql, s.s_k - j0, p->hdv,
                                        is_bf16, HD, kh);
#pragma unroll
                for (int mb = 0; mb < NMB; ++mb)
#pragma unroll
                    for (int e = 0; e < 16; ++e) acc_a[mb][e] = 0.f;
            }

            __syncthreads();   /* every wave is done with the last step's Q, dO, dS */
            if (det && pend) {   /* the last step's dQ adds (fenced before the barrier) */
                if (tid == 0) fmhai_add_release(pend, 1);
                pend = 0;
            }
            /* Q and dO rows m0.. of head h; LSE and D into slot jt & 1 */
            fmhai_bwd_mfma_load_rows(fmhai_mfma_opaque(sQ),
                                     (const char *)p->q + 2 * fmhai_bwd_row_off(&s, p->q_row, p->q_head, p->q_batch, h, m0),
                                     2 * p->q_row, BM, s.s_q - m0, p->d, HD, NT, tid);
            fmhai_bwd_mfma_load_rows(fmhai_mfma_opaque(sdO),
                                     (const char *)p->dout + 2 * fmhai_bwd_row_off(&s, p->do_row, p->do_head, p->do_batch, h, m0),
                                     2 * p->do_row, BM, s.s_q - m0, p->hdv, HD, NT, tid);
            fmhai_bwd_load_rowstats(p, &s, jt, h, m0, sLse, sD, is_bf16, HD, BM, NT, tid);
            __syncthreads();

            const int need_mask = (j0 + BN > s.s_k) ||
                                  (HAS_MASK && (j0 - (m0 + BM - 1) < c_lo || j0 + BN - 1 - m0 > c_hi));
            /* tile bases re-derived per step (not one address per fragment held across the loop) */
            const uint32_t tQ = fmhai_lds_u32(fmhai_mfma_opaque(sQ)), tO = fmhai_lds_u32(fmhai_mfma_opaque(sdO));
            const uint32_t tK = fmhai_lds_u32(fmhai_mfma_opaque(sK)), tV = fmhai_lds_u32(fmhai_mfma_opaque(sV));
            const uint32_t tS = fmhai_lds_u32(fmhai_mfma_opaque(sdS));

#pragma unroll 1
            for (int q0 = 0; q0 < BM; q0 += 32) {
                /* the lane's place re-derived per slice: what depends on it
                 * alone (fragment address parts) is not hoisted out of every
                 * loop and held in registers for the whole kernel */
                const int ln = (int)fmhai_mfma_opaque_u32((uint32_t)lane), ql = ln % 32, kh = ln / 32, jkey = j0 + key0 + ql;
                const int row_k = fmhai_mfma_lds_row(key0 + ql, kh, HD), row_q = fmhai_mfma_lds_row(ql, kh, HD);
                const int i0 = m0 + q0 + 4 * kh;   /* query of slot 0; slot e: i0 + fmhai_mfma_slot_row(e) */
                /* ---- S^T = K Q^T (Q as A: a lane's key column, 16 queries) ---- */
                fmhai_f32x16 st;
                fmhai_bwd_mfma_abt(&st, tQ + q0 * HD * 2 + row_q, tK + row_k, HD, is_bf16);
                fmhai_mfma_phase();

                /* ---- P^T (soft cap: st keeps P^T (1 - tanh^2) for dS) --------- */
                const uint32_t keep = drop ? fmhai_mfma_bwd_keep(seed, offset, (uint32_t)(U->b * p->nhead_q + h), i0,
                                                                 jkey, p->dropout_thr)
                                           : 0xffffu;
                fmhai_mf16x4 pb[4];
#pragma unroll
                for (int g4 = 0; g4 < 4; ++g4) {
                    const fmhai_f32x4 l4 = *(const fmhai_f32x4 *)(sLse + slot + q0 + 8 * g4 + 4 * kh);
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int e = 4 * g4 + r, i = i0 + fmhai_mfma_slot_row(e);
                        const float x = st[e];
                        const float l2 = l4[r] * LOG2E;
                        /* elementwise bias of (i, jkey), after the soft cap */
                        const float eb = ALIBI == 2 ? fmhai_bwd_bias_ld(p, bias_b, i, jkey, s.s_q, s.s_k) : 0.f;
                        const float bias = ALIBI == 1 ? l2 + slope2 * fabsf((float)(i + s.s_k - s.s_q - jkey))
                                                      : ALIBI == 2 ? l2 - eb : l2;
                        float pv, dfac = 1.f;
                        if (SOFTCAP) {
                            const float th = tanhf(x * p->softcap_pre);
                            pv = fmhai_exp2(th * p->softcap_post_log2 - bias);
                            dfac = 1.f - th * th;
                        } else {
                            pv = fmhai_exp2(x * p->scale_log2 - bias);
                        }
                        if (ALIBI == 2 && eb == -INFINITY) pv = 0.f;   /* also where the LSE is -inf */
                        if (need_mask && (jkey >= s.s_k || jkey - i < c_lo || jkey - i > c_hi)) pv = 0.f;
                        /* dropout: P o keep for dV (the scale goes on dV at its
                         * store); a dropped entry keeps -P^T dfac for dS (its
                         * dP^T o Z is 0) */
                        const int kept = (keep >> e) & 1u;
                        st[e] = kept ? pv * dfac : -(pv * dfac);
                        pb[g4][r] = fmhai_mfma_cvt16(kept ? pv : 0.f, is_bf16);
                    }
                }

                /* ---- dV^T += dO^T P ------------------------------------------- */
                if (dv_step) fmhai_bwd_mfma_atb(acc_a, tO + q0 * HD * 2, pb, ql, kh, HD, is_bf16);
                if (!dk_step) continue;
                fmhai_mfma_phase();

                /* ---- dP^T = V dO^T (dO as A, laid out as S^T) ------------------- */
                fmhai_f32x16 dp;
                fmhai_bwd_mfma_abt(&dp, tO + q0 * HD * 2 + row_q, tV + row_k, HD, is_bf16);
                fmhai_mfma_phase();

                /* ---- dS^T = P^T (dP^T o Z - D) ---------------------------------- */
                fmhai_mf16x4 dsb[4];
                float dsf[16];   /* dS^T in fp32 (dbias) */
#pragma unroll
                for (int g4 = 0; g4 < 4; ++g4) {
                    const fmhai_f32x4 d4 = *(const fmhai_f32x4 *)(sD + slot + q0 + 8 * g4 + 4 * kh);
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int e = 4 * g4 + r;
                        const float c = st[e];
                        const float v = drop ? (c < 0.f ? c * d4[r] : c * (dp[e] * p->dropout_scale - d4[r]))
                                             : c * (dp[e] - d4[r]);
                        dsb[g4][r] = fmhai_mfma_cvt16(v, is_bf16);
                        dsf[e] = v;
                    }
                }
                /* dbias = dS in fp32 (no soft cap: dbias plans have none);
                 * slots e, e + 1 (e even) are queries i, i + 1 of key jkey */
                if (ALIBI == 2 && p->dbias) {
                    /* the lane's place opaque: the 64-bit addresses are formed
                     * here, not hoisted and held (13-26 fewer VGPRs) */
                    const int ib = (int)fmhai_mfma_opaque_u32((uint32_t)i0);
                    const int jb = (int)fmhai_mfma_opaque_u32((uint32_t)jkey);
#pragma unroll
                    for (int e = 0; e < 16; e += 2)
                        fmhai_bwd_dbias_put2(p, dbias_b, ib + fmhai_mfma_slot_row(e), jb, s.s_q, s.s_k, dsf[e],
                                             dsf[e + 1]);
                }

                /* ---- dK^T += Q^T dS ------------------------------------------- */
                fmhai_bwd_mfma_atb(TWO_SWEEPS ? acc_a : acc_b, tQ + q0 * HD * 2, dsb, ql, kh, HD, is_bf16);

                /* ---- dS^T -> LDS ([BM][BN], slot e: query q0 + 4*kh +
                 * fmhai_mfma_slot_row(e), key key0 + ql) --------------------- */
#pragma unroll
                for (int e = 0; e < 16; ++e)
                    *(FMHAI_LDS short *)(uintptr_t)(tS + fmhai_mfma_lds_ds(q0 + 4 * kh + fmhai_mfma_slot_row(e),
                                                                            key0 + ql, BN)) = dsb[e / 4][e % 4];
                fmhai_mfma_phase();
            }
            if (!dk_step) continue;

            /* deterministic: rows row0.. of slice n % nsplits get this tile's
             * dQ after the slice's earlier key tiles that see the query tile */
            const int64_t row0 = ((int64_t)h * s.nsplits + split) * s.s_q + m0;
            int32_t *sem = det ? p->dq_sem + s.acc_row + row0 : 0;
            if (det && tid == 0) {
                const int need = fmhai_bwd_det_need(n, n_tiles, U->rev, T.rot, T.ci, split, s.nsplits, m0, s.s_q, s.s_k, BM, BN,
                                                    masked, c_lo, c_hi, BIG);
                while (fmhai_ld_acquire(sem) < need) { }
            }
            __syncthreads();
            if (det) fmhai_mfma_fence_agent(1);

            /* ---- dQ = dS K: the waves take (RB x 32)-row, 32-column blocks -- */
            const uint32_t tS2 = fmhai_lds_u32(fmhai_mfma_opaque(sdS)), tK2 = fmhai_lds_u32(fmhai_mfma_opaque(sK));
#pragma unroll 1
            for (int u = wave; u < NMB * (BM / 32 / RB); u += NWV) {
                const int cb = u / (BM / 32 / RB), rb0 = (u % (BM / 32 / RB)) * RB;
                const int ln = (int)fmhai_mfma_opaque_u32((uint32_t)lane), ql = ln % 32, kh = ln / 32;
                const int row_s = fmhai_mfma_lds_ds_row(ql, kh, BN);
                fmhai_f32x16 aq[4];   /* [RB] */
#pragma unroll
                for (int rb = 0; rb < RB; ++rb)
#pragma unroll
                    for (int e = 0; e < 16; ++e) aq[rb][e] = 0.f;
#pragma unroll
                for (int kb = 0; kb < BN / 8; ++kb) {
                    const fmhai_mf16x4 kf = fmhai_mfma_col_frag(tK2, ql, kh, cb, kb, HD);
#pragma unroll
                    for (int rb = 0; rb < RB; ++rb)
                        fmhai_mfma_32x32x8(&aq[rb],
                                           fmhai_mfma_lds8(tS2 + (rb0 + rb) * 32 * BN * 2 + fmhai_mfma_lds_ds_kb(row_s, kb)),
                                           kf, is_bf16);
                }
                /* out: slot 4*g4 + r of row block rb is query row rb*32 +
                 * 8*g4 + 4*kh + r (fmhai_mfma_slot_row), head-dim column
                 * cb*32 + ql; a running address per 4 rows (opaque: not one
                 * 64-bit address per slot held at once). dq_acc rows of the
                 * atomics are the deterministic formula's with one slice. */
                const int col = cb * 32 + ql, rows = s.s_q - m0;
                char *o_base = p->dq_direct
                                   ? (char *)p->dq + 2 * (fmhai_bwd_row_off(&s, p->dq_row, p->dq_head, p->dq_batch, h, m0) + col)
                                   : (char *)(p->dq_acc + s.acc_off + row0 * p->d + col);
                const int64_t o_step = p->dq_direct ? 2 * p->dq_row : 4 * (int64_t)p->d;
                if (col < p->d) {
#pragma unroll
                    for (int rb = 0; rb < RB; ++rb)
#pragma unroll
                        for (int g4 = 0; g4 < 4; ++g4) {
                            const int r0 = (rb0 + rb) * 32 + 8 * g4 + 4 * kh;
                            char *o = (char *)fmhai_opaque_ptr(o_base + r0 * o_step);
#pragma unroll
                            for (int r = 0; r < 4; ++r, o += o_step) {
                                if (r0 + r >= rows) break;
                                const float v = aq[rb][4 * g4 + r];
                                if (p->dq_direct) *(short *)o = fmhai_mfma_cvt16(v * p->scale, is_bf16);
                                else if (det) *(float *)o = *(const float *)o + v;   /* the slice's new sum */
                                else fmhai_atomic_add_f32((float *)o, v);
                            }
                        }
                }
            }
            if (det) {   /* published by thread 0 after the next barrier */
                fmhai_mfma_fence_agent(0);
                pend = sem;
            }
        }

        if (det && pend) {   /* the tile's last dQ adds: every wave's stores first */
            __syncthreads();
            if (tid == 0) fmhai_add_release(pend, 1);
            pend = 0;
        }

        /* ---- dK (times scale) and dV of the tile ----------------------------- */
        if (TWO_SWEEPS) {
            if (n_it == 0)   /* no sweep ran: dV is 0 too */
                fmhai_bwd_mfma_store_kv(dv, p->dv_row, acc_a, 1.f, key0 + ql, s.s_k - j0, p->hdv, is_bf16, HD, kh);
            fmhai_bwd_mfma_store_kv(dk, p->dk_row, acc_a, p->scale, key0 + ql, s.s_k - j0, p->d, is_bf16, HD, kh);
        } else {
            fmhai_bwd_mfma_store_kv(dv, p->dv_row, acc_a, p->dropout_scale, key0 + ql, s.s_k - j0, p->hdv, is_bf16,
                                    HD, kh);
            fmhai_bwd_mfma_store_kv(dk, p->dk_row, acc_b, p->scale, key0 + ql, s.s_k - j0, p->d, is_bf16, HD, kh);
        }
    }
}

/* The GFX9 dq_dk_dv rows' body: MFMA where it serves the row's tile shape
 * (every ALiBi column, the elementwise bias included), else the portable
 * pipeline (emulated mma.sync). A device pass for a target without MFMA
 * (the rows never run there) keeps the portable body. */
FMHAI_DEVICE void fmhai_bwd_dq_dk_dv_gfx9(const fmhai_bwd_params *p, char *smem, const int is_bf16, const int HD,
                                          const int BM, const int BN, const int NW, const int ST,
                                          const int HAS_MASK, const int SOFTCAP, const int ALIBI, const int DET)
{
#if defined(__HIP_DEVICE_COMPILE__) && !defined(FMHAI_DEVICE_HAS_MFMA)
    const int MFMA = 0;
#else
    const int MFMA = fmhai_bwd_mfma_serves(HD, BM, BN, NW);
#endif
    if (MFMA) {
        for (int i = 0, u; (u = fmhai_bwd_unit_at(p, i)) >= 0; ++i) {
            fmhai_bwd_unit U;
            if (fmhai_bwd_unit_of(p, u, HAS_MASK, DET, BN, 1 << 30, &U))
                fmhai_bwd_mfma_unit(p, smem, is_bf16, HD, BM, BN, NW, HAS_MASK, SOFTCAP, ALIBI, &U);
        }
    } else {
        fmhai_bwd_dq_dk_dv(p, smem, is_bf16, HD, BM, BN, NW, ST, HAS_MASK, SOFTCAP, ALIBI, DET);
    }
}

#endif /* FMHA_PLATFORM_AMD */
#endif /* FMHA_TILE_PIPELINE_BWD_MFMA_H */
