/*
 * Hopper backward pipeline (sm_90a): dq_dk_dv with wgmma.
 *
 * The same algorithm and block shape as the portable pipeline (bwd_portable.h:
 * a block owns BN = 128 keys of one KV head, 8 warps, warp w owns keys
 * 16w..16w+15, the query tiles of every query head of the group are swept,
 * dK and dV accumulate in registers), with the five products on warpgroup
 * MMAs. Warpgroup g (warps 4g..4g+3) owns keys 64g..64g+63, so its 64-row
 * wgmma accumulators hold exactly the rows the portable warps hold, in the
 * same fragment layout; the element-wise work (P^T, dS^T, masks, soft cap)
 * is shared with the portable pipeline, dropout included (the keep bits of
 * the step drawn before the products, fmhai_bwd_dropout_keep; dropped P^T
 * entries marked by their sign for dS^T; dV times the scale at its store).
 * Per query tile (BM rows):
 *     S^T  = K Q^T        SS, K-major A (K rows) and B (Q rows)     async
 *     dP^T = V dO^T       SS, same operand roles                    async
 *                         (hdim 64: RS, the K and V rows held as A
 *                         fragments over the key tile, KVR)
 *     P^T from S^T (wait for S^T only; dP^T still runs)
 *     dV  += P^T dO       RS: P^T from registers, dO MN-major        async
 *     dS^T = P^T (dP^T - D) (wait for dP^T and dV); dS^T -> shared
 *     dK  += dS^T Q       RS: dS^T from registers, Q MN-major        async
 * and then dQ = dS K (SS, both MN-major: dS^T [keys][rows] as A, K as B,
 * over all 128 keys) by one of two hands (FMHAI_BWD90_DQW, policy/
 * bwd_tiles.h):
 *   - hdim 64 without bias: the third warpgroup (warps 8..11) computes it
 *     from dS^T buffer tau & 1 once both MMA warpgroups have handed theirs
 *     over, and adds it to dq_acc from its registers (fmhai_bwd90_dq_wg), so
 *     the product runs beside the MMA warpgroups' next step, and they wait
 *     for dK only at the next step's top, under the wait for its tiles
 *     (+2-9% together);
 *   - else: after a barrier on every warp's dS^T, warpgroup g computes
 *     head-dim columns g*hd/2 .. (g+1)*hd/2 - 1 and stores them, fp32, into
 *     the buffer tau & 1 of the third warpgroup, which adds them
 *     (fmhai_bwd90_dq_writer).
 * dq_acc takes fp32 atomics, the deterministic ordered adds of the
 * portable pipeline, or dQ itself when direct.
 * Tiles land in the 128-byte-swizzled layout of tile/warpgroup_mma.h (the
 * K and Q tiles are read K-major by S^T and MN-major by dQ and dK without a
 * second copy). Q and dO are double-buffered: the next step's tiles load
 * during the whole step, into buffer tau & 1 for the block's step tau (its
 * steps counted over all its key tiles). With tensor maps in the
 * parameters (fmhai_bwd90_params, the Hopper rows' kernel parameter: tma
 * set by dispatch/tma.h) thread 0 copies them by TMA, a box a
 * 128-byte column block, and K and V with the key tile's first step; each
 * step's copies are counted on its buffer's mbarrier, armed once per step
 * (a plain arrival when nothing of the step goes by TMA), so step tau waits
 * for phase (tau >> 1) & 1 of mbarrier tau & 1. A tile that ends past its
 * sequence (Q/dO rows past s_q, keys past s_k) is copied with cp.async
 * instead: the algorithm needs those rows zero (bwd_portable.h), which
 * cp.async gives and the group-mode map, running on into the next
 * sequence, does not. LSE and D (a row a thread) stay on cp.async, so the
 * step still starts with cp.async.wait_group and the MMA warpgroups'
 * barrier, which also frees the other buffer (and the single dS^T tile). Without
 * tensor maps (no encoder, or FMHA_TILE_TMA=0) every copy is cp.async and
 * no mbarrier is used.
 *
 * Elementwise bias (BIAS rows, ALiBi column 2). Without a soft cap the
 * bias is folded into S^T: each lane sets its S^T accumulators to bias /
 * scale before the product, which then adds K Q^T (the exponent is then
 * scale_log2 * S^T as without a bias). A 16-bit bias with 16-byte strides
 * comes as a [BM][BN] tile by TMA (its own map and mbarrier, one buffer:
 * step tau + 1's copy is issued right after step tau's first barrier, by
 * which every warp has read step tau's tile with ldmatrix.trans, so it has
 * the whole step to land); anything else (fp32, odd strides, group-mode
 * tiles that end past their sequence) is read word by word into the same
 * accumulators. With a soft cap (the bias after it) the words are read in
 * P^T as the portable pipeline does. dbias = dS^T leaves by the writer
 * warpgroup: at hdim 64 (FMHAI_BWD90_DBS) the lanes of a quad transpose
 * their 4 x 4 blocks of the fp32 dS^T (4 keys of a query in a lane) into a
 * staging tile in shared memory that the writer takes out a row at a time
 * (fmhai_bwd90_dbias_out); at hdim 128 (no room for that tile) the writer
 * reads the dS^T tile itself, dS in the inputs' dtype (fmhai_bwd90_dbias_
 * from_ds), which the MMA warpgroups overwrite only after its hand-back
 * (DSFREE). Either way one vector a lane: 16-bit stores into the caller's
 * dbias, fp32 stores into the deterministic per-(entry, head) slices, or
 * red.global.add.v4.f32 into the summed workspace (element by element
 * where dbias or its strides are not 4-element aligned).
 *
 * Rows: hdim 64 and 128, BM 64, BN 128, 8 warps, 2 stages (policy/
 * bwd_tiles.h); other head dims use the portable pipeline.
 *
 * Shared memory (1024-byte aligned from the dynamic base): K [BN][hd], V
 * [BN][hd], Q [2][BM][hd], dO [2][BM][hd], dS^T [BN][BM] ([2] with the dQ
 * warpgroup), BIAS rows the bias tile [BN / 64][BM][64] (16-bit, 128-byte
 * swizzle), LSE and D [2][BM], else the writer's dQ tiles [2][BM][QS]
 * (fp32; QS = hd + 8, or hd with swizzled rows on BIAS rows at hdim 128:
 * fmhai_bwd90_dq_swz), the records [4], the TMA mbarriers [3] (after
 * everything, so the tiles keep their alignment), then (FMHAI_BWD90_DBS)
 * the dbias staging tiles [2][BM][BN] fp32.
 */
#ifndef FMHA_TILE_PIPELINE_BWD_SM90_H
#define FMHA_TILE_PIPELINE_BWD_SM90_H

#include "../tile/warpgroup_mma.h"
#include "../tile/tma.h"
#include "bwd_portable.h"

#if defined(FMHA_PLATFORM_NVIDIA)

/* TMA: a [rows][HD] 16-bit tile from rows c1.. of (head c2, entry c3) of
 * a tensor map, one box of 128 bytes x rows per column block of the wgmma
 * layout, counted on mbarrier bar (issued by one thread). */
FMHAI_DEVICE void fmhai_bwd90_tma_tile(fmhai_smem_t dst, const uint64_t *map, int rows, int HD, int c1, int c2,
                                       int c3, fmhai_smem_t bar)
{
#pragma unroll
    for (int c = 0; c < HD / 64; ++c) fmhai_tma_load4(dst + c * rows * 128, map, c * 64, c1, c2, c3, bar);
}

/* The copies of the block's step tau (query head h, rows m0..): Q and dO
 * into a stage buffer (wgmma layout), LSE and D into slot tau & 1. With
 * tensor maps thread 0 arms the buffer's mbarrier bar (once per step) for
 * the TMA bytes of the step, tx_kv (the key tile's K and V, copied by the
 * caller after this) and Q and dO when their tile ends inside the sequence,
 * and issues Q and dO; a tile that ends past s_q goes by cp.async, which
 * zero-fills its rows past s_q. */
FMHAI_DEVICE void fmhai_bwd90_load_step(const fmhai_bwd90_params *P, const fmhai_bwd_seq *s, int tau, int h,
                                        int m0, fmhai_smem_t sQ, fmhai_smem_t sdO, float *sLse, float *sD,
                                        fmhai_smem_t bar, int tx_kv, int is_bf16, int HD, int BM, int NT, int tid)
{
    const fmhai_bwd_params *p = &P->p;
    if (P->tma && m0 + BM <= s->s_q) {
        if (tid == 0) {
            fmhai_mbar_expect_tx(bar, tx_kv + 2 * BM * HD * 2);
            fmhai_bwd90_tma_tile(sQ, P->tma_q, BM, HD, s->q_start + m0, h, s->b_eff, bar);
            fmhai_bwd90_tma_tile(sdO, P->tma_do, BM, HD, s->q_start + m0, h, s->b_eff, bar);
        }
    } else {
        const int64_t qo = fmhai_bwd_row_off(s, p->q_row, p->q_head, p->q_batch, h, m0);
        const int64_t doo = fmhai_bwd_row_off(s, p->do_row, p->do_head, p->do_batch, h, m0);
        fmhai_wg_load_tile(sQ, (const char *)p->q + 2 * qo, 2 * p->q_row, BM, s->s_q - m0, p->d, HD, NT, tid);
        fmhai_wg_load_tile(sdO, (const char *)p->dout + 2 * doo, 2 * p->do_row, BM, s->s_q - m0, p->hdv, HD, NT,
                           tid);
        if (P->tma && tid == 0) {   /* the step's one arrival */
            if (tx_kv) fmhai_mbar_expect_tx(bar, tx_kv);
            else fmhai_mbar_arrive(bar);
        }
    }
    fmhai_bwd_load_rowstats(p, s, tau, h, m0, sLse, sD, is_bf16, HD, BM, NT, tid);
}

/* Named barriers of the pipeline (0 is __syncthreads, unused here). The
 * third warpgroup's buffers (dS^T tiles for the dQ warpgroup, fp32 dQ
 * tiles for the writer) are handed between it and the MMA warpgroups (all
 * 384 threads meet at FULL, EMPTY and KFREE). */
#define FMHAI_BWD90_BAR_MMA 1        /* the two MMA warpgroups (256 threads)    */
#define FMHAI_BWD90_BAR_FULL 3       /* + buffer: dS^T tile and record written  */
#define FMHAI_BWD90_BAR_EMPTY 5      /* + buffer: dS^T or dQ tile read          */
#define FMHAI_BWD90_BAR_DQWG 7       /* the third warpgroup (128)               */
#define FMHAI_BWD90_BAR_KFREE 8      /* a key tile's last dQ product done: K free */
#define FMHAI_BWD90_BAR_DSFREE 9     /* the writer has read the dS^T tile's dbias */

/* dst[0..3] += v with one fp32 vector reduction (no return value). */
FMHAI_DEVICE void fmhai_red_add_f4(float *dst, float4 v)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "f"(v.x), "f"(v.y), "f"(v.z),
                 "f"(v.w)
                 : "memory");
#else
    (void)dst; (void)v;
#endif
}

/* dst[0..1] += (x, y) with one fp32 vector reduction (no return value). */
FMHAI_DEVICE void fmhai_red_add_f2(float *dst, float x, float y)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(dst), "f"(x), "f"(y) : "memory");
#else
    (void)dst; (void)x; (void)y;
#endif
}

/* ---- elementwise bias (BIAS rows) ---------------------------------------
 * The step's [BM queries][BN keys] 16-bit bias tile comes by TMA (tensor
 * map tma_b, dispatch/tma.h) into its own shared buffer, as BN / 64 boxes
 * of [BM rows][128 bytes] with the 128-byte swizzle, counted on the third
 * mbarrier (one arming a step, so step tau waits for parity tau & 1). The
 * buffer is single: step tau + 1's copy is issued after the barrier that
 * publishes step tau's dS^T (every warp has read its bias by then), so it
 * has the dQ product and the next step's S^T and dP^T to land. A lane
 * reads its S^T elements (keys key0 + g (+8), queries 2t, 2t + 1) with
 * ldmatrix.trans: 8 x 8 blocks of 8 query rows of 8 keys, transposed
 * (conflict-free: the swizzle spreads the 8 rows of a block over the
 * banks). Group-mode tiles that end past their sequence, fp32 biases and
 * strides TMA cannot take keep the one-by-one loads of fmhai_bwd_bias_ld. */
FMHAI_DEVICE int fmhai_bwd90_bias_by_tma(const fmhai_bwd90_params *P, const fmhai_bwd_seq *s, int m0, int j0, int BM,
                                        int BN)
{
    /* batch mode: exact extents, the copy zero-fills past s_q and s_k */
    return P->tma_bias && (!P->p.seqstart_q || (m0 + BM <= s->s_q && j0 + BN <= s->s_k));
}

/* Thread 0: arms the bias mbarrier for the step at (query head h, rows
 * m0.., keys j0..) and issues its boxes, or arrives plainly when the step
 * loads its bias words itself. */
FMHAI_DEVICE void fmhai_bwd90_bias_issue(const fmhai_bwd90_params *P, const fmhai_bwd_seq *s, int h, int m0, int j0,
                                         fmhai_smem_t sB, fmhai_smem_t bar, int BM, int BN)
{
    if (fmhai_bwd90_bias_by_tma(P, s, m0, j0, BM, BN)) {
        const int hb = P->p.bias_head ? h : 0, bb = P->p.bias_batch ? s->b_eff : 0;
        fmhai_mbar_expect_tx(bar, BM * BN * 2);
#pragma unroll
        for (int c = 0; c < BN / 64; ++c)
            fmhai_tma_load4(sB + c * BM * 128, P->tma_b, j0 + 64 * c, s->q_start + m0, hb, bb, bar);
    } else {
        fmhai_mbar_arrive(bar);
    }
}

/* S^T's start value under a folded bias (BIAS rows without soft cap):
 * acc (this lane's S^T fragments, acc[4 nt + 2 hf + e] = key j + 8 hf,
 * query i + 8 nt + e) = bias * log2(e) / scale_log2, so that the product
 * adds the scores and the exponent scale_log2 * acc is the biased logit
 * in base-2 units, as without a bias (a -inf element stays -inf). bsm:
 * from the step's tile in shared memory (this lane's ldmatrix row b_lane;
 * an x4 a pair of n-tiles: (nt, keys + 0), (nt, + 8), (nt + 1, + 0),
 * (nt + 1, + 8)); else its words one by one (fmhai_bwd_bias_ld at
 * bias_b: 0 past s_q and s_k). */
FMHAI_DEVICE void fmhai_bwd90_bias_fold(float *acc, const fmhai_bwd_params *p, int bsm, fmhai_smem_t b_lane,
                                        int64_t bias_b, int i, int j, int s_q, int s_k, int BM)
{
    const float f = 1.f / p->scale_log2;
    if (bsm) {
        const int bf = p->bias_dt == FMHA_DTYPE_BF16;
#pragma unroll
        for (int pr = 0; pr < BM / 16; ++pr) {
            uint32_t w[4];
            fmhai_warp_ldsm_x4_t(w, b_lane + pr * 2048);
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                float *c = acc + 4 * (2 * pr + (m >> 1)) + 2 * (m & 1);
                c[0] = fmhai_bwd_bias16(w[m], bf) * f;
                c[1] = fmhai_bwd_bias16(w[m] >> 16, bf) * f;
            }
        }
    } else {
#pragma unroll
        for (int x = 0; x < BM / 2; ++x)
            acc[x] = fmhai_bwd_bias_ld(p, bias_b, i + 8 * (x >> 2) + (x & 1), j + 8 * ((x >> 1) & 1), s_q, s_k) * f;
    }
}

/* dbias: the lanes of a quad (lanes g = 4a .. 4a + 3 of one t: lane bits
 * 2 and 3) transpose their 4 x 4 block of dS^T values in place: before,
 * x[c] of lane b is (key 4a + b, query column c); after, x[k] of lane b
 * is (key 4a + k, query column b), 4 keys in a row for a vector store. */
FMHAI_DEVICE void fmhai_bwd90_quad_t(float *x, int lane)
{
    const int b0 = (lane >> 2) & 1, b1 = (lane >> 3) & 1;
    /* columns with bit 1 = b1 stay, the others go to lane b ^ 2 */
    const float r0 = fmhai_shfl_xor(b1 ? x[0] : x[2], 8), r1 = fmhai_shfl_xor(b1 ? x[1] : x[3], 8);
    const float z0 = b1 ? r0 : x[0], z1 = b1 ? r1 : x[1], z2 = b1 ? x[2] : r0, z3 = b1 ? x[3] : r1;
    /* z[2 k1 + j] is (key 2 k1 + b0, column 2 b1 + j): column b stays */
    const float v0 = fmhai_shfl_xor(b0 ? z0 : z1, 4), v1 = fmhai_shfl_xor(b0 ? z2 : z3, 4);
    x[0] = b0 ? v0 : z0; x[1] = b0 ? z1 : v0;
    x[2] = b0 ? v1 : z2; x[3] = b0 ? z3 : v1;
}

/* dS of query i at keys j .. j + 3 (y) into p->dbias as
 * fmhai_bwd_dbias_put2 stores them (same rounding), one vector a lane when
 * vec (p->dbias and its strides 4-element aligned: fmhai_bwd90_dbias_vec):
 * red.global.add.v4.f32 into the fp32 sum (zero terms skipped), or a
 * 16-byte fp32 / 8-byte 16-bit store; else, and for keys past s_k, one by
 * one; nothing at or past s_q. */
FMHAI_DEVICE void fmhai_bwd90_dbias_put4(const fmhai_bwd_params *p, int64_t base, int i, int j, int s_q, int s_k,
                                         const float *y, int vec)
{
    if (i >= s_q || j >= s_k) return;
    const int64_t o = base + (int64_t)i * p->dbias_row + j;
    if (vec && j + 3 < s_k) {
        if (p->dbias_atomic) {
            if (y[0] != 0.f || y[1] != 0.f || y[2] != 0.f || y[3] != 0.f)
                fmhai_red_add_f4((float *)p->dbias + o, make_float4(y[0], y[1], y[2], y[3]));
        } else if (p->dbias_dt == FMHA_DTYPE_FP32) {
            *(float4 *)((float *)p->dbias + o) = make_float4(y[0], y[1], y[2], y[3]);
        } else {
            const int bf = p->dbias_dt == FMHA_DTYPE_BF16;
            uint2 w;
            w.x = fmhai_pack2(y[0], y[1], bf);
            w.y = fmhai_pack2(y[2], y[3], bf);
            *(uint2 *)((unsigned short *)p->dbias + o) = w;
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {   /* unaligned, or the last keys of the sequence */
        if (j + k >= s_k) break;
        if (p->dbias_atomic) {
            if (y[k] != 0.f) atomicAdd((float *)p->dbias + o + k, y[k]);
        } else if (p->dbias_dt == FMHA_DTYPE_FP32) {
            ((float *)p->dbias)[o + k] = y[k];
        } else {
            ((unsigned short *)p->dbias)[o + k] =
                (unsigned short)(fmhai_pack2(y[k], 0.f, p->dbias_dt == FMHA_DTYPE_BF16) & 0xffffu);
        }
    }
}

/* dbias can take fmhai_bwd90_dbias_put4's vectors: its base and strides
 * 4-element aligned. */
FMHAI_DEVICE int fmhai_bwd90_dbias_vec(const fmhai_bwd_params *p)
{
    const int es = p->dbias_dt == FMHA_DTYPE_FP32 ? 4 : 2;
    return p->dbias && ((p->dbias_row | p->dbias_head | p->dbias_batch) & 3) == 0 &&
           ((uintptr_t)p->dbias & (uintptr_t)(4 * es - 1)) == 0;
}

/* A 16-bit dbias can take 8-element (16-byte) vectors: base and strides. */
FMHAI_DEVICE int fmhai_bwd90_dbias_vec8(const fmhai_bwd_params *p)
{
    return ((p->dbias_row | p->dbias_head | p->dbias_batch) & 7) == 0 && ((uintptr_t)p->dbias & 15u) == 0;
}

/* Four floats from shared memory (a 16-byte chunk). */
FMHAI_DEVICE float4 fmhai_bwd90_lds_f4(fmhai_smem_t src)
{
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0,%1,%2,%3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(src));
    return v;
}

/* What the dQ warpgroup needs of a step, written by the MMA warpgroups
 * with the step's dS^T tile (rows < 0: the walk is over). Four slots: slot
 * tau & 3 was last read two hand-backs of its buffer ago. */
typedef struct fmhai_bwd90_rec {
    float *acc;      /* dq_acc row m0 of the step's slice                     */
    int32_t *sem;    /* deterministic: the query tile's counter               */
    char *dq;        /* dq_direct: dQ row m0                                  */
    int rows;        /* valid rows (<= BM)                                    */
    int need;        /* deterministic: arrivals to wait for                   */
    int last;        /* the key tile's last step: K is handed back after it   */
    int db_on;       /* dbias to go out at dbias_b + (m0 + r, j0 + c): 1 from */
    int db_m0, db_j0, db_sq, db_sk;   /* the staging tile (DBS), 2 from dS^T  */
    int64_t db_b;
} fmhai_bwd90_rec;

/* The dQ buffers' rows: QS = FMHAI_BWD90_QS floats apart. Padded (QS =
 * HD + 8) they are conflict-free as they are; unpadded (a BIAS row at
 * hdim 128: room for the bias tile) 16-byte piece c of row r sits at
 * c ^ (2 (r & 7)), which keeps the MMA warps' 8-byte fragment stores (rows
 * g of a half-warp) and the writer's row reads conflict-free. */
FMHAI_DEVICE int fmhai_bwd90_dq_swz(int r, int QS, int HD) { return QS == HD ? (r & 7) << 1 : 0; }


/* Timeline hooks: a build may define FMHAI_BWD90_MARK(ev, k) to record
 * when each warp reaches event ev of step k (bench/bwd_trace.cu: the SM
 * clock, one block, lane 0; it sees the kernel's warp and lane). MMA
 * warpgroups: 0 step top, 1 the step's tiles landed, 2 step-start barrier
 * passed, 3 S^T and dP^T issued, 4 S^T done, 5 P^T formed (dV issued), 6
 * dP^T and dV done, 7 dS^T formed (its buffer free, dK issued), 8 dS^T
 * handed over, 9 dK done. The dQ warpgroup: 0 loop top, 1 its dS^T
 * handed over, 2 dQ computed and added. Empty unless defined. */
#ifndef FMHAI_BWD90_MARK
#define FMHAI_BWD90_MARK(ev, k) ((void)0)
#endif

/* The third warpgroup's side of a step's hand-off (writer and dQ
 * warpgroup alike). fmhai_bwd90_take: waits for step k's buffer and record
 * (FULL) and returns its valid rows (< 0: the walk is over).
 * fmhai_bwd90_det_turn (deterministic): waits until the slice's earlier
 * key tiles that see the query tile have added theirs (the counter), so
 * the order of the additions is fixed; fmhai_bwd90_det_done: each of the 4
 * warps publishes its adds with a release add (4 arrivals a tile). */
FMHAI_DEVICE int fmhai_bwd90_take(const volatile fmhai_bwd90_rec *rk, int k)
{
    FMHAI_BWD90_MARK(0, k);
    fmhai_bar_sync(FMHAI_BWD90_BAR_FULL + (k & 1), 384);
    return rk->rows;
}
FMHAI_DEVICE void fmhai_bwd90_det_turn(const volatile fmhai_bwd90_rec *rk, int wtid)
{
    if (wtid == 0) {
        int32_t *sem = rk->sem;
        const int need = 4 * rk->need;   /* each warp arrives */
        while (fmhai_ld_relaxed(sem) < need) { }
        (void)fmhai_ld_acquire(sem);
    }
    fmhai_bar_sync(FMHAI_BWD90_BAR_DQWG, 128);
}
FMHAI_DEVICE void fmhai_bwd90_det_done(int32_t *sem, int lane)
{
    fmhai_sync_warp();
    if (lane == 0) fmhai_add_release(sem, 1);
}

/* FMHAI_BWD90_DBS rows: the writer takes the step's dbias out of its
 * staging tile (fp32 [BM][BN], 16-byte chunk c of row r at c ^ (r & 7)),
 * a warp a row of 32 chunks: fmhai_bwd90_dbias_put4's stores or adds (a
 * 16-bit dbias: a half-warp a row, two chunks a lane for one 16-byte
 * store, +2-5% over 8-byte ones, bench/RESULTS.md session 30),
 * whole 512-byte rows instead of the MMA warps' 16 rows x 32 bytes an
 * instruction (those stores took 40% of the hdim-128 BIAS step: the
 * timeline with and without them, bench/RESULTS.md session 29). */
FMHAI_DEVICE void fmhai_bwd90_dbias_out(const fmhai_bwd_params *p, const volatile fmhai_bwd90_rec *rk,
                                        fmhai_smem_t src, int BM, int BN, int wtid)
{
    const int lane = wtid % 32, rows = min(BM, rk->db_sq - rk->db_m0), m0 = rk->db_m0, j0 = rk->db_j0;
    const int sq = rk->db_sq, sk = rk->db_sk, vec = fmhai_bwd90_dbias_vec(p);
    const int64_t base = rk->db_b;
    const int atom = p->dbias_atomic, f32 = p->dbias_dt == FMHA_DTYPE_FP32, bf = p->dbias_dt == FMHA_DTYPE_BF16;
    if (!atom && !f32 && j0 + BN <= sk && fmhai_bwd90_dbias_vec8(p)) {   /* 16-bit: a half-warp a row, 16-byte stores */
        const int hl = lane & 15, r0 = 2 * (wtid / 32) + (lane >> 4);
        char *dst = (char *)p->dbias + 2 * (base + (int64_t)(m0 + r0) * p->dbias_row + j0 + 8 * hl);
        const int64_t rstep = 16 * p->dbias_row;   /* 8 rows */
#pragma unroll 2
        for (int r = r0; r < rows; r += 8, dst += rstep) {
            const float4 u = fmhai_bwd90_lds_f4(src + r * BN * 4 + (((2 * hl) ^ (r & 7)) << 4));
            const float4 v = fmhai_bwd90_lds_f4(src + r * BN * 4 + (((2 * hl + 1) ^ (r & 7)) << 4));
            uint4 w;
            w.x = fmhai_pack2(u.x, u.y, bf); w.y = fmhai_pack2(u.z, u.w, bf);
            w.z = fmhai_pack2(v.x, v.y, bf); w.w = fmhai_pack2(v.z, v.w, bf);
            *(uint4 *)dst = w;
        }
        return;
    }
    if (vec && j0 + BN <= sk) {   /* every lane's 4 keys inside: vectors, the address stepped */
        const int es = f32 || atom ? 4 : 2;
        const int64_t rstep = 4 * p->dbias_row * es;
        char *dst = (char *)p->dbias + (base + (int64_t)(m0 + wtid / 32) * p->dbias_row + j0 + 4 * lane) * es;
#pragma unroll 4
        for (int r = wtid / 32; r < rows; r += 4, dst += rstep) {
            const float4 v = fmhai_bwd90_lds_f4(src + r * BN * 4 + ((lane ^ (r & 7)) << 4));
            if (atom) {
                if (v.x != 0.f || v.y != 0.f || v.z != 0.f || v.w != 0.f) fmhai_red_add_f4((float *)dst, v);
            } else if (f32) {
                *(float4 *)dst = v;
            } else {
                uint2 w;
                w.x = fmhai_pack2(v.x, v.y, bf);
                w.y = fmhai_pack2(v.z, v.w, bf);
                *(uint2 *)dst = w;
            }
        }
        return;
    }
#pragma unroll 1
    for (int r = wtid / 32; r < rows; r += 4) {
        const float4 v = fmhai_bwd90_lds_f4(src + r * BN * 4 + ((lane ^ (r & 7)) << 4));
        const float y[4] = { v.x, v.y, v.z, v.w };
        fmhai_bwd90_dbias_put4(p, base, m0 + r, j0 + 4 * lane, sq, sk, y, vec);
    }
}

/* hdim 128 with dbias (FMHAI_BWD90_BAR_DSFREE): the writer takes the
 * step's dbias out of the dS^T tile itself, i.e. dS rounded to the inputs'
 * dtype, the precision dQ and dK are computed with (so a dbias in that
 * dtype is the same bits as rounding the fp32 dS; a summed one adds the
 * rounded terms in fp32, as PyTorch sums its per-head gradients; another
 * dtype takes the rounded value). Warp w takes keys 32w.. of the 64
 * queries, an ldmatrix.trans x4 per 8 queries (matrix i: keys 32w + 8i ..;
 * lane: query g, keys 2t, 2t + 1 of each), then either a quad transpose
 * (lane t: keys 8t .. 8t + 7 of its query, one 16-byte store: 8 rows x 64
 * bytes a warp instruction) for a dbias in the inputs' dtype, or one
 * exchange with lane t ^ 1 (lane t: keys 8 (t & 1) + 4 (t >> 1) .. + 3 and
 * the same + 16) for fmhai_bwd90_dbias_put4's adds or stores (8 rows x 64
 * bytes of fp32), instead of the MMA warps' 16 rows x 16-32 bytes an
 * instruction, which took 45% of the step (bench/RESULTS.md, session 29). */
FMHAI_DEVICE void fmhai_bwd90_dbias_from_ds(const fmhai_bwd_params *p, const volatile fmhai_bwd90_rec *rk,
                                            fmhai_smem_t sdS, int is_bf16, int BM, int BN, int wtid)
{
    const int lane = wtid % 32, g = lane / 4, t = lane % 4, odd = t & 1, k0 = 32 * (wtid / 32);
    const int rows = min(BM, rk->db_sq - rk->db_m0), j0 = rk->db_j0, whole = j0 + BN <= rk->db_sk;
    /* this lane's ldmatrix row: key k0 + lane, 16-byte chunk qc ^ (lane & 7) */
    const fmhai_smem_t a0 = sdS + (k0 + lane) * 128;
    const int same = p->dbias_dt == (is_bf16 ? (int)FMHA_DTYPE_BF16 : (int)FMHA_DTYPE_FP16);   /* the tile's bits */
    if (whole && same && fmhai_bwd90_dbias_vec8(p)) {
        /* 16-bit dbias: a 4 x 4 transpose in the quad, x[k] becomes keys 8t + 2k, + 1 of query g */
        char *dst = (char *)p->dbias + 2 * (rk->db_b + (int64_t)(rk->db_m0 + g) * p->dbias_row + j0 + k0 + 8 * t);
        const int64_t step = 16 * p->dbias_row;   /* 8 rows */
        const int b0 = t & 1, b1 = t >> 1;
#pragma unroll 1
        for (int qc = 0; qc * 8 < rows; ++qc, dst += step) {
            uint32_t x[4];
            fmhai_warp_ldsm_x4_t(x, a0 + (((qc ^ lane) & 7) << 4));
            const uint32_t r0 = __shfl_xor_sync(0xffffffffu, b1 ? x[0] : x[2], 2);
            const uint32_t r1 = __shfl_xor_sync(0xffffffffu, b1 ? x[1] : x[3], 2);
            const uint32_t z0 = b1 ? r0 : x[0], z1 = b1 ? r1 : x[1], z2 = b1 ? x[2] : r0, z3 = b1 ? x[3] : r1;
            const uint32_t v0 = __shfl_xor_sync(0xffffffffu, b0 ? z0 : z1, 1);
            const uint32_t v1 = __shfl_xor_sync(0xffffffffu, b0 ? z2 : z3, 1);
            uint4 o;
            o.x = b0 ? v0 : z0; o.y = b0 ? z1 : v0; o.z = b0 ? v1 : z2; o.w = b0 ? z3 : v1;
            if (qc * 8 + g < rows) *(uint4 *)dst = o;
        }
        return;
    }
    /* fp32 (the sum's adds or slices), or the general case: one exchange
     * with lane t ^ 1, then keys 8 (t & 1) + 4 (t >> 1) + 16 h .. + 3 of
     * query g (8 rows x 64 bytes a warp instruction; 4 rows x 128 bytes,
     * after a second exchange, measured level: bench/RESULTS.md session 30) */
    const int vec = fmhai_bwd90_dbias_vec(p);
#pragma unroll 1
    for (int qc = 0; qc * 8 < rows; ++qc) {
        uint32_t x[4];
        fmhai_warp_ldsm_x4_t(x, a0 + (((qc ^ lane) & 7) << 4));
        const uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? x[0] : x[1], 1);
        const uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? x[2] : x[3], 1);
        if (qc * 8 + g >= rows) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint32_t lo = odd ? (h ? r1 : r0) : x[2 * h], hi = odd ? x[2 * h + 1] : (h ? r1 : r0);
            const float y[4] = { fmhai_lo16_f32(lo, is_bf16), fmhai_hi16_f32(lo, is_bf16),
                                 fmhai_lo16_f32(hi, is_bf16), fmhai_hi16_f32(hi, is_bf16) };
            fmhai_bwd90_dbias_put4(p, rk->db_b, rk->db_m0 + qc * 8 + g, j0 + k0 + 8 * odd + 4 * (t >> 1) + 16 * h,
                                   rk->db_sq, rk->db_sk, y, vec);
        }
    }
}

/* The dQ writer warpgroup: takes step tau's fp32 dQ tile from shared
 * buffer tau & 1 with its record and adds it to dq_acc with fp32 vector
 * atomics, or writes dQ itself (dq_direct). Deterministic, it first waits
 * until the slice's earlier key tiles that see the query tile have added
 * theirs (the counter): the adders take turns, so the order of the
 * additions is fixed and the sums are reproducible; each of its 4 warps
 * then publishes its adds with a release add (4 arrivals a tile). The MMA
 * warpgroups only wait for the writer when both buffers are full. It keeps
 * no walk state (24 registers, setmaxnreg). Its atomics cost the kernel
 * 5-9% at hdim 128, in the L2: the rows as bulk reductions, or the query
 * sweeps rotated so that the key tiles of a head add to different rows,
 * measured level (bench/RESULTS.md, session 24). */
FMHAI_DEVICE void fmhai_bwd90_dq_writer(const fmhai_bwd_params *p, const float *sdQ,
                                        const volatile fmhai_bwd90_rec *rec, int is_bf16, int HD, int BM, int QS,
                                        int det, fmhai_smem_t sDB, fmhai_smem_t sdS, int dsx, int wtid)
{
    const int lane = wtid % 32;
    const int pieces = HD / 4;                        /* 16-byte pieces of a row */
    fmhai_bar_arrive(FMHAI_BWD90_BAR_EMPTY + 0, 384);
    fmhai_bar_arrive(FMHAI_BWD90_BAR_EMPTY + 1, 384);
    if (dsx) fmhai_bar_arrive(FMHAI_BWD90_BAR_DSFREE, 384);   /* the tile is free for step 0 */
    for (int k = 0;; ++k) {   /* step k: buffer k & 1, record k & 3 */
        const int b = k & 1;
        const volatile fmhai_bwd90_rec *rk = rec + (k & 3);
        const int rows = fmhai_bwd90_take(rk, k);
        if (rows < 0) break;
        FMHAI_BWD90_MARK(1, k);
        if (sDB && rk->db_on) fmhai_bwd90_dbias_out(p, rk, sDB + b * BM * 128 * 4, BM, 128, wtid);
        if (dsx) {   /* every step's dbias from its dS^T tile, which then goes back */
            fmhai_bwd90_dbias_from_ds(p, rk, sdS, is_bf16, BM, 128, wtid);
            fmhai_bar_arrive(FMHAI_BWD90_BAR_DSFREE, 384);
        }
        /* the record's pointers are read where they are used, not held
         * across the adds (the slot stays until the hand-back below) */
        if (det) fmhai_bwd90_det_turn(rk, wtid);
        /* a thread keeps one 16-byte column piece and walks the rows: a
         * warp covers 32 consecutive pieces (whole 512-byte rows at hdim
         * 128); piece c of row r sits at c ^ fmhai_bwd90_dq_swz(r) */
        const int rstep = 128 / pieces, r0 = wtid / pieces, pc = wtid % pieces, c = pc * 4;
        const float *sb = sdQ + b * BM * QS + r0 * QS;
        if (c < p->d) {
            if (p->dq_direct) {
                char *dst = rk->dq + 2 * ((int64_t)r0 * p->dq_row + c);
#pragma unroll 2
                for (int r = r0; r < rows; r += rstep, sb += rstep * QS, dst += 2 * rstep * p->dq_row) {
                    const float4 v = *(const float4 *)(sb + 4 * (pc ^ fmhai_bwd90_dq_swz(r, QS, HD)));
                    uint2 w;
                    w.x = fmhai_pack2(v.x * p->scale, v.y * p->scale, is_bf16);
                    w.y = fmhai_pack2(v.z * p->scale, v.w * p->scale, is_bf16);
                    *(uint2 *)dst = w;
                }
            } else {
                float *dst = rk->acc + (int64_t)r0 * p->d + c;
                const int64_t dstep = (int64_t)rstep * p->d;
                /* 2 rows in flight (4 spilled in 24 registers; giving the
                 * hdim-64 writer 40 and 4 rows measured the same); 1 on
                 * swizzled rows, whose addresses left 2 spilling */
                if (QS != HD) {
#pragma unroll 2
                    for (int r = r0; r < rows; r += rstep, sb += rstep * QS, dst += dstep)
                        fmhai_red_add_f4(dst, *(const float4 *)(sb + 4 * (pc ^ fmhai_bwd90_dq_swz(r, QS, HD))));
                } else {   /* swizzled rows: 1 */
#pragma unroll 1
                    for (int r = r0; r < rows; r += rstep, sb += rstep * QS, dst += dstep)
                        fmhai_red_add_f4(dst, *(const float4 *)(sb + 4 * (pc ^ fmhai_bwd90_dq_swz(r, QS, HD))));
                }
            }
        }
        int32_t *sem = det ? rk->sem : 0;
        /* the buffer and record are read (the adds took their values at issue) */
        FMHAI_BWD90_MARK(2, k);
        fmhai_bar_arrive(FMHAI_BWD90_BAR_EMPTY + b, 384);
        if (det) fmhai_bwd90_det_done(sem, lane);
    }
}

/* The dQ warpgroup (warps 8..11, FMHAI_BWD90_DQW rows): step tau's dQ =
 * dS K, from dS^T buffer tau & 1 (both MMA warpgroups' rows, handed over
 * on FULL + buffer) and the key tile's K, both in shared memory (SS,
 * MN-major), in panels of 64 head-dim columns over all 128 keys (32
 * accumulators a thread: 58 registers, so the MMA warpgroups keep 216),
 * each added to dq_acc from the registers with fp32 vector atomics (8
 * bytes a lane: a warp instruction covers 8 rows x 32 bytes), or written
 * as dQ itself (dq_direct). Once its last panel's product is done it
 * hands the buffer back (EMPTY + buffer) and, at a key tile's last step,
 * K (KFREE). Deterministic, it first waits until the slice's earlier key
 * tiles that see the query tile have added theirs (the counter), as the
 * writer does, and publishes its own adds a step late, after its next
 * product (the release waits for the adds to land in the L2, by then
 * done: +3-4% deterministic without a mask; the writer at hdim 128
 * measured level to -1% so, bench/RESULTS.md session 31). The MMA
 * warpgroups only wait for it when both dS^T buffers are full. Instead
 * of the writer's flow (each MMA warpgroup issuing and
 * waiting for half of dQ a step, then staging the fp32 tile: 700-1,200
 * cycles of a step with both warpgroups' tensor work idle, session 22) it
 * measured +1-6% at hdim 64, +4-9% with dK waited for a step later;
 * panels of 16 or 32 columns fit fewer registers but read dS^T from shared
 * memory once a panel and ran 1-3% slower (bench/RESULTS.md, session 27). */
FMHAI_DEVICE void fmhai_bwd90_dq_wg(const fmhai_bwd_params *p, fmhai_smem_t sK, fmhai_smem_t sdS,
                                    const volatile fmhai_bwd90_rec *rec, int is_bf16, int HD, int BM, int BN,
                                    int det, int wtid)
{
    const int lane = wtid % 32, g = lane / 4, t = lane % 4;
    const int r0 = 16 * (wtid / 32) + g;   /* this thread's rows r0 and r0 + 8 of the tile */
    const int DQP = 64;   /* a panel's columns */
    int pend = 0, k;   /* deterministic: step k - 1's adds not yet published */
    fmhai_bar_arrive(FMHAI_BWD90_BAR_EMPTY + 0, 384);
    fmhai_bar_arrive(FMHAI_BWD90_BAR_EMPTY + 1, 384);
    for (k = 0;; ++k) {   /* step k: dS^T buffer k & 1, record k & 3 */
        const int b = k & 1;
        const volatile fmhai_bwd90_rec *rk = rec + (k & 3);
        const int rows = fmhai_bwd90_take(rk, k);
        if (rows < 0) break;
        FMHAI_BWD90_MARK(1, k);
        const uint64_t da = fmhai_wg_desc(sdS + (uint32_t)(b * BN * BM * 2), BN * 128, 1024);
#pragma unroll 1
        for (int c0 = 0; c0 < HD; c0 += DQP) {
            float acc[DQP / 2];
            const uint64_t db = fmhai_wg_desc(sK + (uint32_t)((c0 / 64) * BN * 128), BN * 128, 1024);
            fmhai_wg_fence();
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk)
                fmhai_wg_mma_ss_tt_n64(acc, fmhai_wg_desc_add(da, kk * 2048), fmhai_wg_desc_add(db, kk * 2048),
                                       kk > 0, is_bf16);
            fmhai_wg_commit();
            fmhai_wg_wait(0);
            fmhai_wg_fence_acc(acc, DQP / 2);
            if (c0 + DQP >= HD) {   /* the buffer (and at a tile's last step K) read: handed back */
                fmhai_bar_arrive(FMHAI_BWD90_BAR_EMPTY + b, 384);
                if (rk->last) fmhai_bar_arrive(FMHAI_BWD90_BAR_KFREE, 384);
            }
            if (det && c0 == 0) {
                if (pend) fmhai_bwd90_det_done(rec[(k - 1) & 3].sem, lane);   /* step k - 1's, a step late */
                fmhai_bwd90_det_turn(rk, wtid);
            }
            /* the record's pointers are read here, not held across the
             * products (the slot stays until two hand-backs later); this
             * thread's column pairs are c + 8 nt, and the panel's first nv
             * column groups lie inside the head dim (a multiple of 8) */
            const int c = c0 + 2 * t, nv = min(DQP / 8, (p->d - c0) >> 3);
            if (p->dq_direct) {
                char *dst = rk->dq;
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int r = r0 + 8 * hf;
                    if (r >= rows) continue;
                    char *drow = dst + 2 * ((int64_t)r * p->dq_row + c);
#pragma unroll
                    for (int nt = 0; nt < DQP / 8; ++nt)
                        if (nt < nv)
                            *(uint32_t *)(drow + 16 * nt) = fmhai_pack2(acc[4 * nt + 2 * hf] * p->scale,
                                                                        acc[4 * nt + 2 * hf + 1] * p->scale, is_bf16);
                }
            } else {
                float *dst = rk->acc;
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int r = r0 + 8 * hf;
                    if (r >= rows) continue;
                    float *drow = dst + (int64_t)r * p->d + c;
#pragma unroll
                    for (int nt = 0; nt < DQP / 8; ++nt)
                        if (nt < nv) fmhai_red_add_f2(drow + 8 * nt, acc[4 * nt + 2 * hf], acc[4 * nt + 2 * hf + 1]);
                }
            }
        }
        FMHAI_BWD90_MARK(2, k);
        pend = det;
    }
    if (pend) fmhai_bwd90_det_done(rec[(k - 1) & 3].sem, lane);
}

FMHAI_DEVICE void fmhai_bwd_dq_dk_dv_sm90(const fmhai_bwd_params *p, char *smem_raw, const int is_bf16,
                                          const int HD, const int BM, const int BN, const int NW, const int ST,
                                          const int HAS_MASK, const int SOFTCAP, const int ALIBI, const int DET,
                                          const int drop)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    const int NT = 256;       /* threads of the two MMA warpgroups */
    const int BIG = 1 << 30;
    const int BIAS = ALIBI == 2;
    const int FOLD = BIAS && !SOFTCAP;   /* the bias as S^T's start value (fmhai_bwd90_bias_fold) */
    /* KVR (hdim 64): each warp keeps its 16 K and V rows as wgmma A
     * fragments (32 registers) and S^T and dP^T read only Q and dO from
     * shared memory: +1-4% without a mask (bench/RESULTS.md, session 23);
     * at hdim 128 the 64 registers are not there */
    const int KVR = HD == 64;
    /* DQW (FMHAI_BWD90_DQW, policy/bwd_tiles.h): the third warpgroup
     * computes dQ (fmhai_bwd90_dq_wg) from a double-buffered dS^T; else each
     * MMA warpgroup computes half of it and the third only adds the tiles
     * (fmhai_bwd90_dq_writer) */
    const int DQW = FMHAI_BWD90_DQW(HD, BIAS);
    const int DQN = HD / 2;   /* !DQW: the dQ columns of an MMA warpgroup */
    const int QS = FMHAI_BWD90_QS(HD, BIAS);   /* !DQW: fp32 row stride of a dQ buffer (fmhai_bwd90_dq_swz) */
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4, wg = warp / 4;
    (void)ST; (void)NW;

    /* ---- shared memory (1024-aligned for the swizzle atoms) ---------------- */
    const fmhai_smem_t raw = fmhai_smem_addr(smem_raw);
    const fmhai_smem_t sK = (raw + 1023u) & ~1023u;
    const int kv_bytes = BN * HD * 2, q_bytes = BM * HD * 2;
    const fmhai_smem_t sV = sK + kv_bytes, sQ = sV + kv_bytes, sdO = sQ + 2 * q_bytes, sdS = sdO + 2 * q_bytes;
    const fmhai_smem_t sB = sdS + (DQW ? 2 : 1) * BN * BM * 2;   /* BIAS: the step's bias tile [BN / 64][BM][64] */
    float *sLse = (float *)(smem_raw + (sB - raw) + (BIAS ? BM * BN * 2 : 0));   /* [2][BM] */
    float *sD = sLse + 2 * BM;                                        /* [2][BM] */
    float *sdQ = sD + 2 * BM;                                         /* !DQW: [2][BM][QS] */
    volatile fmhai_bwd90_rec *rec = (volatile fmhai_bwd90_rec *)(sdQ + (DQW ? 0 : 2 * BM * QS));   /* [4] */
    const fmhai_smem_t sLse_a = fmhai_smem_addr(sLse), sD_a = fmhai_smem_addr(sD), sdQ_a = fmhai_smem_addr(sdQ);
    /* TMA mbarriers (8-aligned): Q/dO (and K/V) of buffer 0 and 1, the bias */
    const fmhai_smem_t sBar = fmhai_smem_addr((const void *)(rec + 4)), sBarB = sBar + 16;
    /* FMHAI_BWD90_DBS: dbias staged [2][BM][BN] fp32 (buffer tau & 1, handed
     * to the writer with the step's record and back on EMPTY) */
    const int DBS = FMHAI_BWD90_DBS(HD, BIAS);
    const fmhai_smem_t sDB = DBS ? (sBar + 32u + 15u) & ~15u : 0u;
    /* DSX (hdim 128 with dbias: uniform): the writer takes dbias out of the
     * single dS^T tile (fmhai_bwd90_dbias_from_ds), handed back on DSFREE
     * before the next step writes it */
    const int DSX = BIAS && !DBS && p->dbias;

    if (drop < 0) {   /* the third warpgroup (its registers set by the caller) */
        if (DQW) fmhai_bwd90_dq_wg(p, sK, sdS, rec, is_bf16, HD, BM, BN, DET && !p->dq_direct, tid - NT);
        else fmhai_bwd90_dq_writer(p, sdQ, rec, is_bf16, HD, BM, QS, DET && !p->dq_direct, sDB, sdS, DSX, tid - NT);
        return;
    }

    const int key0 = warp * 16;   /* this warp's first key in the tile */
    /* the Hopper rows' kernel parameter is fmhai_bwd90_params, p its first member */
    const fmhai_bwd90_params *P = (const fmhai_bwd90_params *)p;
    const int TMA = P->tma;       /* tensor maps: uniform */
    const int TB = FOLD && P->tma_bias;   /* the bias tile by TMA (fmhai_bwd90_bias_by_tma) */
    if ((TMA || TB) && tid == 0) {   /* published by the first tile's barrier */
        fmhai_mbar_init(sBar, 1);
        fmhai_mbar_init(sBar + 8, 1);
        fmhai_mbar_init(sBarB, 1);
    }
    /* BIAS: this lane's ldmatrix row in the bias tile (matrix lane / 8: n-tile
     * lane / 16 of a pair, keys key0 + 8 ((lane / 8) & 1); row lane & 7) */
    const int bkc = 2 * warp + ((lane >> 3) & 1), blr = lane & 7;
    const fmhai_smem_t b_lane = sB + (bkc >> 3) * BM * 128 + ((lane >> 4) * 8 + blr) * 128 + (((bkc & 7) ^ blr) << 4);
    int tau = 0;   /* steps so far over the block's key tiles: the Q/dO and dQ buffers are tau & 1 */
    for (int i = 0, u; (u = fmhai_bwd_unit_at(p, i)) >= 0; ++i) {
    fmhai_bwd_unit U;
    if (!fmhai_bwd_unit_of(p, u, HAS_MASK, DET, BN, BIG, &U)) continue;
    const fmhai_bwd_seq s = U.s;
    const int hk = U.hk, det = U.det, n_tiles = U.n_tiles, masked = U.masked, c_lo = U.c_lo, c_hi = U.c_hi;
    const char *k_seq = (const char *)p->k + 2 * ((int64_t)s.b_eff * p->k_batch + (int64_t)s.k_start * p->k_row +
                                                  (int64_t)hk * p->k_head);
    const char *v_seq = (const char *)p->v + 2 * ((int64_t)s.b_eff * p->v_batch + (int64_t)s.k_start * p->v_row +
                                                  (int64_t)hk * p->v_head);
    for (int x = fmhai_bwd_x0(p); x < n_tiles; x += (int)gridDim.x) {
        fmhai_bwd_tile T;
        fmhai_bwd_tile_of(p, &s, x, n_tiles, U.rev, BM, BN, DET, masked, c_lo, c_hi, BIG, &T);
        const int n = T.n, j0 = T.j0;

        /* every warp is done with the previous tile's K and V; a tile with
         * no step needs neither */
        fmhai_copy_wait(0);
        fmhai_bar_sync(FMHAI_BWD90_BAR_MMA, NT);
        if (T.n_steps > 0) {
            /* K and V by TMA when the key tile ends inside the sequence (keys
             * past s_k must read as zero, not as the next sequence's), on the
             * first step's mbarrier */
            const int kv_tma = TMA && j0 + BN <= s.s_k;
            const fmhai_smem_t bar0 = sBar + 8 * (tau & 1);
            if (!kv_tma) {
                fmhai_wg_load_tile(sK, k_seq + 2 * (int64_t)j0 * p->k_row, 2 * p->k_row, BN, s.s_k - j0, p->d, HD,
                                   NT, tid);
                fmhai_wg_load_tile(sV, v_seq + 2 * (int64_t)j0 * p->v_row, 2 * p->v_row, BN, s.s_k - j0, p->hdv, HD,
                                   NT, tid);
            }
            fmhai_bwd90_load_step(P, &s, tau, hk * p->head_ratio, T.m_first * BM, sQ + (tau & 1) * q_bytes,
                                  sdO + (tau & 1) * q_bytes, sLse, sD, bar0, kv_tma ? 2 * BN * HD * 2 : 0, is_bf16,
                                  HD, BM, NT, tid);
            if (kv_tma && tid == 0) {   /* after the arm above */
                fmhai_bwd90_tma_tile(sK, P->tma_k, BN, HD, s.k_start + j0, hk, s.b_eff, bar0);
                fmhai_bwd90_tma_tile(sV, P->tma_v, BN, HD, s.k_start + j0, hk, s.b_eff, bar0);
            }
            if (TB && tid == 0)   /* the first step's bias (the buffer is free: every warp passed the barrier) */
                fmhai_bwd90_bias_issue(P, &s, hk * p->head_ratio, T.m_first * BM, j0, sB, sBarB, BM, BN);
        }
        fmhai_copy_commit();

        float acc_dv[FMHAI_FWD_MAX_HD / 2], acc_dk[FMHAI_FWD_MAX_HD / 2];
#pragma unroll
        for (int i = 0; i < HD / 2; ++i) { acc_dv[i] = 0.f; acc_dk[i] = 0.f; }

        uint32_t ka[4][4], va[4][4];   /* KVR: this warp's K and V rows (four k-steps) */
        int mi = 0, hq = 0;
#pragma unroll 1
        for (int jt = 0; jt < T.n_steps; ++jt, ++tau) {
            FMHAI_BWD90_MARK(0, tau);
            const int buf = tau & 1, slot = buf * BM;
            const int m0 = fmhai_bwd_m_at(&T, mi) * BM, h = hk * p->head_ratio + hq;
            fmhai_bwd_next_pos(&mi, &hq, T.n_m, p->head_ratio);

            /* this step's tiles have landed (TMA: the buffer's mbarrier; and
             * visible to wgmma); every warp is done with the previous step's
             * buffers and its dS^T tile */
            fmhai_copy_wait(0);
            if (TMA) fmhai_mbar_wait(sBar + 8 * buf, (tau >> 1) & 1);
            if (DQW) {   /* the previous step's dK ran under these waits; its Q buffer is refilled below */
                fmhai_wg_wait(0);
                fmhai_wg_fence_acc(acc_dv, HD / 2);
                fmhai_wg_fence_acc(acc_dk, HD / 2);
            }
            FMHAI_BWD90_MARK(1, tau);
            /* BIAS (folded): S^T starts from the step's bias over the scale
             * (fmhai_bwd90_bias_fold), read before the barrier, which then
             * frees the bias tile for the next step's copy */
            float acc_s[FMHAI_BWD90_MAX_BM / 2];
            uint32_t keep = 0u;
            if (drop && FOLD)
                keep = fmhai_bwd_dropout_keep(p, (uint32_t)(U.b * p->nhead_q + h), m0 + 2 * t, j0 + key0 + g, BM);
            if (FOLD) {
                if (TB) fmhai_mbar_wait(sBarB, tau & 1);
                fmhai_bwd90_bias_fold(acc_s, p, TB && fmhai_bwd90_bias_by_tma(P, &s, m0, j0, BM, BN), b_lane,
                                      fmhai_bwd_bias_base(&s, p->bias_row, p->bias_head, p->bias_batch, h), m0 + 2 * t,
                                      j0 + key0 + g, s.s_q, s.s_k, BM);
            }
            fmhai_wg_fence_smem();
            fmhai_bar_sync(FMHAI_BWD90_BAR_MMA, NT);
            FMHAI_BWD90_MARK(2, tau);
            if (jt + 1 < T.n_steps) {
                const int h1 = hk * p->head_ratio + hq, m1 = fmhai_bwd_m_at(&T, mi) * BM;
                fmhai_bwd90_load_step(P, &s, tau + 1, h1, m1, sQ + (buf ^ 1) * q_bytes, sdO + (buf ^ 1) * q_bytes, sLse,
                                      sD, sBar + 8 * (buf ^ 1), 0, is_bf16, HD, BM, NT, tid);
                if (TB && tid == 0) fmhai_bwd90_bias_issue(P, &s, h1, m1, j0, sB, sBarB, BM, BN);
            }
            fmhai_copy_commit();
            const fmhai_smem_t q_s = sQ + buf * q_bytes, do_s = sdO + buf * q_bytes;
            /* dropout: the keep bits of the step's BM queries (bwd_portable.h,
             * fmhai_bwd_dropout_keep: the same accumulator layout), drawn
             * before the products' accumulators are live (a folded bias:
             * before its start values, above) */
            if (drop && !FOLD)
                keep = fmhai_bwd_dropout_keep(p, (uint32_t)(U.b * p->nhead_q + h), m0 + 2 * t, j0 + key0 + g, BM);

            /* ---- S^T and dP^T, both in flight -------------------------------- */
            float acc_p[FMHAI_BWD90_MAX_BM / 2];
            if (FOLD) fmhai_wg_fence_acc(acc_s, BM / 2);   /* the start values written before the fence */
            if (KVR) {   /* K and V from registers (read at the tile's first step), Q and dO from shared memory */
                if (jt == 0) {
                    fmhai_wg_load_afrags(ka, sK, BN, key0, lane, HD / 16);
                    fmhai_wg_load_afrags(va, sV, BN, key0, lane, HD / 16);
                }
                fmhai_wg_fence();   /* (BM = 64: the Q and dO tiles are the 64 rows rbt reads) */
                fmhai_wg_gemm_rbt(acc_s, ka, fmhai_opaque_smem(q_s), 2 * HD, is_bf16, FOLD);
                fmhai_wg_gemm_rbt(acc_p, va, fmhai_opaque_smem(do_s), 2 * HD, is_bf16, 0);
            } else {
                fmhai_wg_fence();
                fmhai_wg_gemm_abt_c(acc_s, fmhai_opaque_smem(sK + wg * 64 * 128), BN, fmhai_opaque_smem(q_s), BM, HD,
                                    is_bf16, 0, FOLD);
                fmhai_wg_gemm_abt(acc_p, fmhai_opaque_smem(sV + wg * 64 * 128), BN, fmhai_opaque_smem(do_s), BM, HD,
                                  is_bf16, 0);
            }
            FMHAI_BWD90_MARK(3, tau);
            fmhai_wg_wait(1);
            FMHAI_BWD90_MARK(4, tau);
            fmhai_wg_fence_acc(acc_s, BM / 2);

            /* ---- P^T; dV += P^T dO ------------------------------------------ */
            const float slope2 = fmhai_bwd_slope2(p, U.b, h, ALIBI);   /* read here: not live across the products */
            const int need_mask = (j0 + BN > s.s_k) ||
                                  (HAS_MASK && (j0 - (m0 + BM - 1) < c_lo || j0 + BN - 1 - m0 > c_hi));
            uint32_t pa[FMHAI_BWD90_MAX_BM / 16][4];
#pragma unroll
            for (int nt = 0; nt < BM / 8; ++nt) {
                const int col = nt * 8 + 2 * t;
                uint32_t pk[2];
                if (FOLD) {   /* the bias is in S^T already (ALiBi column 3: a -inf score gives P 0) */
                    const float none[4] = { 0.f, 0.f, 0.f, 0.f };
                    fmhai_bwd_p_ntile_eb(acc_s + 4 * nt, pk, fmhai_ld_shared_f2(sLse_a + 4 * (slot + col)), p,
                                         need_mask, j0 + key0 + g, m0 + col, s.s_k, c_lo, c_hi, SOFTCAP, is_bf16, 3,
                                         slope2, s.s_k - s.s_q, none);
                } else {
                    const int64_t bias_b =
                        BIAS ? fmhai_bwd_bias_base(&s, p->bias_row, p->bias_head, p->bias_batch, h) : 0;
                    fmhai_bwd_p_ntile(acc_s + 4 * nt, pk, fmhai_ld_shared_f2(sLse_a + 4 * (slot + col)), p, need_mask,
                                      j0 + key0 + g, m0 + col, s.s_k, c_lo, c_hi, SOFTCAP, is_bf16, ALIBI, slope2,
                                      s.s_k - s.s_q, bias_b, s.s_q);
                }
                if (drop) {   /* as the portable pipeline: P o keep for dV, drops marked by P^T's sign */
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const uint32_t k2 = keep >> (4 * nt + 2 * hf);
                        pk[hf] &= (k2 & 1u ? 0xffffu : 0u) | (k2 & 2u ? 0xffff0000u : 0u);
                        if (!(k2 & 1u)) acc_s[4 * nt + 2 * hf] = -acc_s[4 * nt + 2 * hf];
                        if (!(k2 & 2u)) acc_s[4 * nt + 2 * hf + 1] = -acc_s[4 * nt + 2 * hf + 1];
                    }
                }
                pa[nt / 2][(nt % 2) * 2] = pk[0];
                pa[nt / 2][(nt % 2) * 2 + 1] = pk[1];
            }
            if (BIAS)   /* P^T formed before the fence (else ptxas injects one: C7519, BIAS with dropout) */
#pragma unroll
                for (int x = 0; x < BM / 4; ++x) asm volatile("" : "+r"(pa[x / 4][x % 4])::"memory");
            fmhai_wg_fence();
            fmhai_wg_gemm_rs(acc_dv, pa, do_s, HD, BM, is_bf16, 0);
            FMHAI_BWD90_MARK(5, tau);
            fmhai_wg_wait(0);   /* dP^T and dV done: P^T's registers are free */
            FMHAI_BWD90_MARK(6, tau);
            fmhai_wg_fence_acc(acc_p, BM / 2);

            /* ---- dS^T = P^T (dP^T - D): registers and shared; dK += dS^T Q ---- */
            uint32_t dsa[FMHAI_BWD90_MAX_BM / 16][4];
            /* this thread's dS^T row in buffer tau & 1 (fmhai_wg_tile_off: row
             * key0 + g (+ 8), chunk nt at (nt ^ g) * 16), formed here: held
             * across the step, its 16 store addresses were spilled; the dQ
             * warpgroup has read the buffer's step two back (DQW) */
            if (DQW || DBS) fmhai_bar_sync(FMHAI_BWD90_BAR_EMPTY + buf, 384);   /* DBS: the dbias tile too */
            if (DSX) fmhai_bar_sync(FMHAI_BWD90_BAR_DSFREE, 384);   /* the writer has read the last dS^T */
            const fmhai_smem_t ds_row = fmhai_opaque_smem(sdS + (DQW ? buf : 0) * BN * BM * 2 + (key0 + g) * 128 + 4 * t);
            const int64_t dbias_b =   /* elementwise bias: dbias of (entry, head h) */
                BIAS && p->dbias ? fmhai_bwd_bias_base(&s, p->dbias_row, p->dbias_head, p->dbias_batch, h) : 0;
            float dx[2][4];   /* dbias: the n-tile pair's dS^T, [hf][2 (nt & 1) + e] */
#pragma unroll
            for (int nt = 0; nt < BM / 8; ++nt) {
                const float2 dd = fmhai_ld_shared_f2(sD_a + 4 * (slot + nt * 8 + 2 * t));
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const float c0 = acc_s[4 * nt + 2 * hf], c1 = acc_s[4 * nt + 2 * hf + 1];
                    float d0, d1;
                    if (drop) {   /* dS^T = P^T (dP^T o Z - D); a dropped entry -P^T D */
                        d0 = c0 < 0.f ? c0 * dd.x : c0 * (acc_p[4 * nt + 2 * hf] * p->dropout_scale - dd.x);
                        d1 = c1 < 0.f ? c1 * dd.y : c1 * (acc_p[4 * nt + 2 * hf + 1] * p->dropout_scale - dd.y);
                    } else {
                        d0 = c0 * (acc_p[4 * nt + 2 * hf] - dd.x);
                        d1 = c1 * (acc_p[4 * nt + 2 * hf + 1] - dd.y);
                    }
                    dx[hf][2 * (nt & 1)] = d0;
                    dx[hf][2 * (nt & 1) + 1] = d1;
                    const uint32_t v = fmhai_pack2(d0, d1, is_bf16);
                    dsa[nt / 2][(nt % 2) * 2 + hf] = v;
                    fmhai_st_shared_u32(ds_row + (nt >> 3) * BN * 128 + hf * 8 * 128 + (((nt & 7) ^ g) << 4), v);
                }
                /* dbias = dS (dbias plans have no soft cap), a pair of n-tiles
                 * at a time: transposed in quads, a lane then holds 4 keys of
                 * one query (fmhai_bwd90_quad_t), stored or added as a vector */
                if (DBS && (nt & 1) && p->dbias) {
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const int r = (nt >> 1) * 16 + ((g >> 1) & 1) * 8 + 2 * t + (g & 1), c = key0 + 8 * hf + 4 * (g >> 2);
                        fmhai_bwd90_quad_t(dx[hf], lane);
                        /* staged: chunk c / 4 of row r at (c / 4) ^ (r & 7) */
                        asm volatile("st.shared.v4.f32 [%0], {%1,%2,%3,%4};\n" ::"r"(
                                         sDB + buf * BM * BN * 4 + r * BN * 4 + (((c >> 2) ^ (r & 7)) << 4)),
                                     "f"(dx[hf][0]), "f"(dx[hf][1]), "f"(dx[hf][2]), "f"(dx[hf][3]));
                    }
                }
            }

            if (!DQW) {
                fmhai_wg_fence();
                fmhai_wg_gemm_rs(acc_dk, dsa, q_s, HD, BM, is_bf16, 0);
                FMHAI_BWD90_MARK(7, tau);
                fmhai_wg_fence_smem();
                fmhai_bar_sync(FMHAI_BWD90_BAR_MMA, NT);   /* dS^T of every warp in shared memory */
                FMHAI_BWD90_MARK(8, tau);

                /* ---- dQ = dS K: this warpgroup's DQN columns ------------------ */
                float acc_q[FMHAI_FWD_MAX_HD / 4];
                {
                    const int c0 = wg * DQN;
                    const uint64_t da = fmhai_wg_desc(fmhai_opaque_smem(sdS), BN * 128, 1024);
                    const uint64_t db =
                        fmhai_wg_desc(fmhai_opaque_smem(sK + (c0 / 64) * BN * 128 + (c0 % 64) * 2), BN * 128, 1024);
                    fmhai_wg_fence();
#pragma unroll
                    for (int kk = 0; kk < BN / 16; ++kk) {
                        const uint64_t step = (uint64_t)(kk * 2048 >> 4);
                        if (DQN == 64) fmhai_wg_mma_ss_tt_n64(acc_q, da + step, db + step, kk > 0, is_bf16);
                        else fmhai_wg_mma_ss_tt_n32(acc_q, da + step, db + step, kk > 0, is_bf16);
                    }
                    fmhai_wg_commit();
                }
                fmhai_wg_wait(0);
                FMHAI_BWD90_MARK(9, tau);
                fmhai_wg_fence_acc(acc_q, DQN / 2);
                fmhai_wg_fence_acc(acc_dv, HD / 2);
                fmhai_wg_fence_acc(acc_dk, HD / 2);

                /* ---- dQ tile -> the writer's buffer -------------------------- */
                if (!DBS) fmhai_bar_sync(FMHAI_BWD90_BAR_EMPTY + buf, 384);
                FMHAI_BWD90_MARK(10, tau);
                const fmhai_smem_t qb = sdQ_a + buf * BM * QS * 4;
#pragma unroll
                for (int nt = 0; nt < DQN / 8; ++nt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {   /* piece col / 4 of row r at its swizzled place */
                        const int r = 16 * (warp % 4) + g + 8 * hf, col = wg * DQN + nt * 8 + 2 * t;
                        fmhai_lds_store8(qb + r * QS * 4 + (((col >> 2) ^ fmhai_bwd90_dq_swz(r, QS, HD)) << 4) +
                                             (col & 3) * 4,
                                         __float_as_uint(acc_q[4 * nt + 2 * hf]),
                                         __float_as_uint(acc_q[4 * nt + 2 * hf + 1]));
                    }
            } else {
                fmhai_wg_fence_smem();   /* dS^T -> the dQ warpgroup's products */
            }
            /* ---- the step's record; its dS^T or dQ tile handed over --------- */
            if (tid == 0) {
                volatile fmhai_bwd90_rec *r = rec + (tau & 3);
                if (p->dq_direct) {
                    r->dq = (char *)p->dq + 2 * fmhai_bwd_row_off(&s, p->dq_row, p->dq_head, p->dq_batch, h, m0);
                } else if (det) {
                    const int64_t row = ((int64_t)h * s.nsplits + T.split) * s.s_q + m0;
                    r->acc = p->dq_acc + s.acc_off + row * p->d;
                    r->sem = p->dq_sem + s.acc_row + row;
                    r->need = fmhai_bwd_det_need(n, n_tiles, U.rev, T.rot, T.ci, T.split, s.nsplits, m0, s.s_q, s.s_k, BM, BN,
                                                 masked, c_lo, c_hi, BIG);
                } else {
                    r->acc = p->dq_acc + s.acc_off + ((int64_t)h * s.nsplits * s.s_q + m0) * p->d;
                }
                r->rows = min(BM, s.s_q - m0);
                r->last = jt + 1 == T.n_steps;
                r->db_on = DBS && p->dbias ? 1 : DSX ? 2 : 0;
                if (DBS || DSX) {
                    r->db_b = dbias_b;
                    r->db_m0 = m0; r->db_j0 = j0; r->db_sq = s.s_q; r->db_sk = s.s_k;
                }
            }
            fmhai_bar_arrive(FMHAI_BWD90_BAR_FULL + buf, 384);
            if (DQW) {   /* dK += dS^T Q beside the dQ warpgroup's product */
                FMHAI_BWD90_MARK(7, tau);
                fmhai_wg_fence();
                fmhai_wg_gemm_rs(acc_dk, dsa, q_s, HD, BM, is_bf16, 0);
                FMHAI_BWD90_MARK(8, tau);
                FMHAI_BWD90_MARK(9, tau);   /* (dK is waited for at the next step's top) */
            } else {
                FMHAI_BWD90_MARK(11, tau);
            }
        }

        if (DQW) {   /* the last step's dK */
            fmhai_wg_wait(0);
            fmhai_wg_fence_acc(acc_dv, HD / 2);
            fmhai_wg_fence_acc(acc_dk, HD / 2);
        }
        /* ---- dK (times scale) and dV of the tile ----------------------------- */
        char *dk = (char *)p->dk + 2 * ((int64_t)s.b_eff * p->dk_batch + (int64_t)(s.k_start + j0) * p->dk_row +
                                        (int64_t)hk * p->dk_head);
        char *dv = (char *)p->dv + 2 * ((int64_t)s.b_eff * p->dv_batch + (int64_t)(s.k_start + j0) * p->dv_row +
                                        (int64_t)hk * p->dv_head);
        fmhai_bwd_store_kv(dv, p->dv_row, (const float (*)[4])acc_dv, p->dropout_scale, key0, s.s_k - j0, p->hdv, is_bf16,
                           HD, lane);
        fmhai_bwd_store_kv(dk, p->dk_row, (const float (*)[4])acc_dk, p->scale, key0, s.s_k - j0, p->d, is_bf16, HD,
                           lane);
        /* the dQ warpgroup's last product of the tile has read K */
        if (DQW && T.n_steps > 0) fmhai_bar_sync(FMHAI_BWD90_BAR_KFREE, 384);
    }
    }
    /* end of the walk: an end record in the next buffer; the other
     * buffer's last hand-back is taken too, so that every arrival is
     * matched */
    fmhai_bar_sync(FMHAI_BWD90_BAR_EMPTY + (tau & 1), 384);
    if (tid == 0) rec[tau & 3].rows = -1;
    fmhai_bar_arrive(FMHAI_BWD90_BAR_FULL + (tau & 1), 384);
    fmhai_bar_sync(FMHAI_BWD90_BAR_EMPTY + ((tau + 1) & 1), 384);
    if (DSX) fmhai_bar_sync(FMHAI_BWD90_BAR_DSFREE, 384);   /* the writer's last arrival */
    fmhai_copy_wait(0);
#else
    (void)p; (void)smem_raw; (void)is_bf16; (void)HD; (void)BM; (void)BN; (void)NW; (void)ST; (void)HAS_MASK;
    (void)SOFTCAP; (void)ALIBI; (void)DET; (void)drop;
#endif
}

/* The kernel body specialised with and without dropout (drop is a
 * compile-time constant in each copy): the copy without dropout carries
 * none of its code. With one body and uniform branches on the threshold,
 * the backward without dropout ran 4-9% slower; specialised, it is 2-6%
 * faster than before dropout existed (bench/RESULTS.md). The warpgroups
 * split and set their registers here, before the copies (drop -1: the
 * third warpgroup's one): with setmaxnreg and the writer inside each copy, ptxas
 * spilled the two hdim-128 BIAS copies together 432-540 bytes, here 256-360
 * (each alone: 60-184). */
FMHAI_DEVICE void fmhai_bwd_dq_dk_dv_sm90_any(const fmhai_bwd_params *p, char *smem_raw, const int is_bf16,
                                              const int HD, const int BM, const int BN, const int NW, const int ST,
                                              const int HAS_MASK, const int SOFTCAP, const int ALIBI, const int DET)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (threadIdx.x >= 256) {   /* warps 8..11 */
        fmhai_wg_setmaxnreg_dec(FMHAI_BWD90_WREGS(HD, ALIBI == 2));
        fmhai_bwd_dq_dk_dv_sm90(p, smem_raw, is_bf16, HD, BM, BN, NW, ST, HAS_MASK, SOFTCAP, ALIBI, DET, -1);
        return;
    }
    fmhai_wg_setmaxnreg_inc((504 - FMHAI_BWD90_WREGS(HD, ALIBI == 2)) / 2);
#endif
    if (p->dropout_thr)
        fmhai_bwd_dq_dk_dv_sm90(p, smem_raw, is_bf16, HD, BM, BN, NW, ST, HAS_MASK, SOFTCAP, ALIBI, DET, 1);
    else
        fmhai_bwd_dq_dk_dv_sm90(p, smem_raw, is_bf16, HD, BM, BN, NW, ST, HAS_MASK, SOFTCAP, ALIBI, DET, 0);
}

#endif /* FMHA_PLATFORM_NVIDIA */
#endif /* FMHA_TILE_PIPELINE_BWD_SM90_H */
