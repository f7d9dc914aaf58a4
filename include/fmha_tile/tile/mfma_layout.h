/*
 * MFMA fragment layouts of AMD CDNA (wave64), as small pure functions.
 *
 * An MFMA instruction computes D[M x N] = A[M x K] * B[K x N] + C[M x N] with
 * the operands spread over the 64 lanes of a wave: each lane holds a few
 * elements ("slots") of A, of B and of C/D in consecutive VGPRs. These
 * functions say, for each operand, which lane and which slot holds element
 * (row, col), and the inverse. They are plain static inline C with no device
 * construct, so the host tests (tests/host/test_mfma_layout.c) and device code
 * (the MFMA pipeline's loaders and softmax) use the very same definitions.
 *
 * Shapes (FMHAI_MFMA_SHAPES, one row each; all single-block, no CBSZ/ABID/BLGP):
 *   v_mfma_f32_32x32x8f16, v_mfma_f32_32x32x8bf16_1k     gfx90a, gfx942
 *   v_mfma_f32_16x16x16f16, v_mfma_f32_16x16x16bf16_1k   gfx90a, gfx942
 *   v_mfma_f32_32x32x16_fp8_fp8, v_mfma_f32_16x16x32_fp8_fp8   gfx942 (e4m3fnuz)
 *
 * Where the layouts come from: the "Matrix Arithmetic Instructions" chapter of
 * AMD's "AMD Instinct MI300 Instruction Set Architecture" reference guide
 * (CDNA3; the MI200/CDNA2 guide for gfx90a), and the element<->register
 * formulas that AMD's Matrix Instruction Calculator (ROCm's
 * amd_matrix_instruction_calculator, --detail-instruction / --register-layout
 * for cdna2 and cdna3) prints for each of these instructions. In words:
 *   A (M x K): lane = row + M * (k / KL), slot = k % KL, where KL = M*K/64 is
 *              the elements a lane holds (4 for f16/bf16, 8 for fp8): lanes
 *              come in G = 64/M groups, group g holding k in [g*KL, g*KL+KL).
 *   B (K x N): the same with col for row (B is laid out as A transposed).
 *   C/D (M x N, fp32): lane = col + N * ((row / 4) % G), slot = row % 4 +
 *              4 * (row / (4 * G)): a lane holds one column, in runs of 4
 *              consecutive rows; lane group g holds the runs g, g+G, ...
 * Slot s of an operand with e-byte elements sits in VGPR s*e/4 at bits
 * [(s*e*8) % 32, +e*8): f16/bf16 pack two to a VGPR (low half first), fp8
 * four (lowest byte first); C/D is one fp32 slot per VGPR.
 *
 * Row reductions over D (the softmax's max and sum): row i of a tile lives in
 * one slot of N consecutive lanes (lanes N*g .. N*g + N-1 for the g above),
 * one column each, so a row reduces with lane exchanges inside aligned groups
 * of N lanes: xor masks 1..N/2 (fmhai_mfma_d_row_lanes). For N = 16 that stays
 * inside a DPP row; N = 32 needs one exchange across DPP rows (ds_swizzle's
 * xor mode or ds_bpermute).
 */
#ifndef FMHA_TILE_MFMA_LAYOUT_H
#define FMHA_TILE_MFMA_LAYOUT_H

#include "philox.h"   /* the dropout rule's blocks (fmhai_mfma_bwd_keep) */

/* Host and device: a HIP/CUDA pass needs the attributes to call these from a
 * kernel; a C compiler sees plain static inline functions. */
#if defined(__HIP__) || defined(__CUDACC__)
#  define FMHAI_MFMA_FN static inline __host__ __device__
#else
#  define FMHAI_MFMA_FN static inline
#endif

/* id        M   N   K  elem bytes  instruction (for messages and JSON) */
#define FMHAI_MFMA_SHAPES(X)                                                 \
    X(32X32X8_F16,   32, 32,  8, 2, "v_mfma_f32_32x32x8f16")                 \
    X(32X32X8_BF16,  32, 32,  8, 2, "v_mfma_f32_32x32x8bf16_1k")             \
    X(16X16X16_F16,  16, 16, 16, 2, "v_mfma_f32_16x16x16f16")                \
    X(16X16X16_BF16, 16, 16, 16, 2, "v_mfma_f32_16x16x16bf16_1k")            \
    X(32X32X16_FP8,  32, 32, 16, 1, "v_mfma_f32_32x32x16_fp8_fp8")           \
    X(16X16X32_FP8,  16, 16, 32, 1, "v_mfma_f32_16x16x32_fp8_fp8")

typedef enum fmhai_mfma_shape {
#define FMHAI_MFMA_ENUM_(id, m, n, k, eb, name) FMHAI_MFMA_##id,
    FMHAI_MFMA_SHAPES(FMHAI_MFMA_ENUM_)
#undef FMHAI_MFMA_ENUM_
    FMHAI_MFMA_NUM_SHAPES
} fmhai_mfma_shape;

typedef struct fmhai_mfma_dims {
    int m, n, k;      /* D is m x n, the reduction is over k */
    int elem_bytes;   /* bytes of one A/B element (C/D are fp32) */
} fmhai_mfma_dims;

/* Where an element sits: lane 0..63 and slot within that lane's fragment. */
typedef struct fmhai_mfma_loc {
    int lane, slot;
} fmhai_mfma_loc;

/* An element of an operand: (row, col) of A (m, k), B (k, n) or D (m, n). */
typedef struct fmhai_mfma_rc {
    int row, col;
} fmhai_mfma_rc;

FMHAI_MFMA_FN fmhai_mfma_dims fmhai_mfma_dims_of(fmhai_mfma_shape s)
{
    fmhai_mfma_dims d = {0, 0, 0, 0};
    switch (s) {
#define FMHAI_MFMA_DIMS_(id, m_, n_, k_, eb, name) \
    case FMHAI_MFMA_##id: d.m = m_; d.n = n_; d.k = k_; d.elem_bytes = eb; break;
    FMHAI_MFMA_SHAPES(FMHAI_MFMA_DIMS_)
#undef FMHAI_MFMA_DIMS_
    default: break;
    }
    return d;
}

FMHAI_MFMA_FN const char *fmhai_mfma_name(fmhai_mfma_shape s)
{
    switch (s) {
#define FMHAI_MFMA_NAME_(id, m, n, k, eb, name) case FMHAI_MFMA_##id: return name;
    FMHAI_MFMA_SHAPES(FMHAI_MFMA_NAME_)
#undef FMHAI_MFMA_NAME_
    default: break;
    }
    return "?";
}

/* ---- sizes ------------------------------------------------------------------ */
/* A/B elements a lane holds (KL above): 4 for f16/bf16, 8 for fp8 */
FMHAI_MFMA_FN int fmhai_mfma_ab_slots(fmhai_mfma_shape s)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    return d.m * d.k / 64;
}
/* fp32 D elements a lane holds: 16 for 32x32, 4 for 16x16 */
FMHAI_MFMA_FN int fmhai_mfma_d_slots(fmhai_mfma_shape s)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    return d.m * d.n / 64;
}
/* VGPRs of an A or B fragment (2 for every shape here: 64 bits a lane) */
FMHAI_MFMA_FN int fmhai_mfma_ab_vgprs(fmhai_mfma_shape s)
{
    return fmhai_mfma_ab_slots(s) * fmhai_mfma_dims_of(s).elem_bytes / 4;
}
/* VGPR of A/B slot `slot`, and the lowest bit of the element inside it */
FMHAI_MFMA_FN int fmhai_mfma_ab_vgpr(fmhai_mfma_shape s, int slot)
{
    return slot * fmhai_mfma_dims_of(s).elem_bytes / 4;
}
FMHAI_MFMA_FN int fmhai_mfma_ab_bit(fmhai_mfma_shape s, int slot)
{
    return (slot * fmhai_mfma_dims_of(s).elem_bytes * 8) % 32;
}

/* ---- A (m x k) and B (k x n) ------------------------------------------------ */
/* A and B share one scheme: the lane index inside a group is A's row (B's
 * column), the group and slot give k. */
FMHAI_MFMA_FN fmhai_mfma_loc fmhai_mfma_a_loc(fmhai_mfma_shape s, int row, int k)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    int kl = d.m * d.k / 64;
    fmhai_mfma_loc l;
    l.lane = row + d.m * (k / kl);
    l.slot = k % kl;
    return l;
}
FMHAI_MFMA_FN fmhai_mfma_rc fmhai_mfma_a_elem(fmhai_mfma_shape s, int lane, int slot)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    fmhai_mfma_rc e;
    e.row = lane % d.m;
    e.col = (lane / d.m) * (d.m * d.k / 64) + slot;
    return e;
}
FMHAI_MFMA_FN fmhai_mfma_loc fmhai_mfma_b_loc(fmhai_mfma_shape s, int k, int col)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    int kl = d.n * d.k / 64;
    fmhai_mfma_loc l;
    l.lane = col + d.n * (k / kl);
    l.slot = k % kl;
    return l;
}
FMHAI_MFMA_FN fmhai_mfma_rc fmhai_mfma_b_elem(fmhai_mfma_shape s, int lane, int slot)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    fmhai_mfma_rc e;
    e.row = (lane / d.n) * (d.n * d.k / 64) + slot;
    e.col = lane % d.n;
    return e;
}

/* ---- C / D (m x n, fp32) ----------------------------------------------------- */
FMHAI_MFMA_FN fmhai_mfma_loc fmhai_mfma_d_loc(fmhai_mfma_shape s, int row, int col)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    int g = 64 / d.n;                     /* lane groups: 2 (32x32) or 4 (16x16) */
    fmhai_mfma_loc l;
    l.lane = col + d.n * ((row / 4) % g);
    l.slot = row % 4 + 4 * (row / (4 * g));
    return l;
}
FMHAI_MFMA_FN fmhai_mfma_rc fmhai_mfma_d_elem(fmhai_mfma_shape s, int lane, int slot)
{
    fmhai_mfma_dims d = fmhai_mfma_dims_of(s);
    int g = 64 / d.n;
    fmhai_mfma_rc e;
    e.row = (slot / 4) * 4 * g + (lane / d.n) * 4 + slot % 4;
    e.col = lane % d.n;
    return e;
}

/* Lanes that share a row of D: aligned groups of this many lanes (xor masks
 * 1 .. n/2 reach exactly the lanes of one group). */
FMHAI_MFMA_FN int fmhai_mfma_d_row_lanes(fmhai_mfma_shape s)
{
    return fmhai_mfma_dims_of(s).n;
}

/* ---- P in registers: one MFMA's D as the next one's B ----------------------- */
/* Attention's second product can take P straight from the first one's
 * accumulators, with no LDS round trip and no lane exchange, when the first
 * computes S^T = K * Q^T (keys x queries): each lane of its D holds one query
 * column, which is what the B operand of O^T = V^T * P^T wants of a lane too.
 * Read a lane's D slots over consecutive QK tiles (tile t holds keys from
 * t * qk.m on) as one flat list; B slot e of PV k-block kb is flat slot
 * kb * fmhai_mfma_ab_slots(pv) + e, converted to the 16- or 8-bit type. The key
 * it carries depends on the lane only through its lane group, so V^T's A
 * fragment loads key fmhai_mfma_chain_key(...) at slot e of the same lane.
 * f16/bf16: the natural order (key kb*K + g*KL + e); fp8: a fixed permutation
 * of each k-block's keys. Needs qk and pv of equal n (a column per lane alike).
 * The softmax's max and sum over a query's keys then fold the lane's own slots
 * and exchange only across lane groups (xor n, 2n, ... < 64). */
FMHAI_MFMA_FN int fmhai_mfma_chain_key(fmhai_mfma_shape qk, fmhai_mfma_shape pv, int kb, int lane, int slot)
{
    int f = kb * fmhai_mfma_ab_slots(pv) + slot, ds = fmhai_mfma_d_slots(qk);
    return (f / ds) * fmhai_mfma_dims_of(qk).m + fmhai_mfma_d_elem(qk, lane, f % ds).row;
}

/* ---- attention tiles in LDS (pipeline/fwd_mfma.h) --------------------------
 * Where the MFMA forward reads its fragments from the 16-bit tiles the
 * loaders of pipeline/kv_source.h land, as pure integer functions of byte
 * offsets (the device applies them to 32-bit LDS addresses of tiles aligned
 * to 128 bytes: the XORs touch bits 4..6 only). 32x32x8 shapes; kh = lane /
 * 32 is the lane's k half (and key half), ql = lane % 32 its row/query.
 *   fmhai_mfma_lds_swz(r, c, hd)   element (r, c) of a swizzled [rows][hd]
 *                                  tile (16-byte chunk c/8 at (c/8) ^ (r%8))
 *   fmhai_mfma_lds_cmaj(r, c, rows) element (r, c) of a chunk-major tile
 *                                  (VECTORIZED K, and V^T with rows = hd)
 *   fmhai_mfma_lds_row(row, kh, hd), fmhai_mfma_lds_kb(base, kb)
 *                                  the 4 consecutive columns kb*8 + 4*kh ..
 *                                  of row `row` (Q^T's B, K's A fragments):
 *                                  a base per lane, one XOR and a constant
 *                                  per k-block
 *   fmhai_mfma_lds_vt(ql, kh, e, hd), fmhai_mfma_lds_vt_at(base, mb, kb, hd)
 *                                  slot e of V^T's A fragment of head-dim
 *                                  block mb, key block kb: key kb*8 + 4*kh + e
 *                                  (fmhai_mfma_chain_key), column mb*32 + ql
 *   fmhai_mfma_key_c(t, e)         the key of S^T slot e in 32-key block t,
 *                                  less the lane's own 4*kh (a constant)
 * The host test tests/host/test_fwd_mfma_model.c checks each against the
 * layouts and replays the pipeline's tile step on the instruction model. */
FMHAI_MFMA_FN int fmhai_mfma_lds_swz(int r, int c, int hd)
{
    return r * hd * 2 + (((c >> 3) ^ (r & 7)) << 4) + ((c & 7) << 1);
}
FMHAI_MFMA_FN int fmhai_mfma_lds_cmaj(int r, int c, int rows)
{
    return ((c >> 3) * rows + r) * 16 + ((c & 7) << 1);
}
FMHAI_MFMA_FN int fmhai_mfma_lds_row(int row, int kh, int hd)
{
    return row * hd * 2 + 8 * kh + ((row & 7) << 4);
}
FMHAI_MFMA_FN int fmhai_mfma_lds_kb(int base, int kb)
{
    return (base ^ ((kb & 7) << 4)) + (kb >> 3) * 128;
}
/* row kb*8 + 4*kh + e has row % 8 = 4*kh + e; column mb*32 + ql has chunk
 * 4*mb + ql/8: the XOR splits into a per-lane part and (mb % 2) << 6 */
FMHAI_MFMA_FN int fmhai_mfma_lds_vt(int ql, int kh, int e, int hd)
{
    return (4 * kh + e) * hd * 2 + (ql & 7) * 2 + (((ql >> 3) ^ (4 * kh + e)) << 4);
}
FMHAI_MFMA_FN int fmhai_mfma_lds_vt_at(int base, int mb, int kb, int hd)
{
    return (base ^ ((mb & 1) << 6)) + (mb >> 1) * 128 + kb * 8 * hd * 2;
}
FMHAI_MFMA_FN int fmhai_mfma_key_c(int t, int e)
{
    return t * 32 + (e / 4) * 8 + e % 4;
}

/* ---- FP8 KV: e4m3 tiles decoded to f16 (pipeline/fwd_mfma.h) ---------------
 * The FP8 kernels land each e4m3 K/V tile (fmhai_swz8 rows, as the portable
 * pipeline does) and decode it into the 16-bit tile layout above, so the f16
 * products and fragment reads serve them unchanged.
 *   fmhai_mfma_e4m3x2_f16bits(a)   two codes in bits 0..7 and 16..23 -> their
 *                                  f16 bit patterns (sign to bit 15, exponent
 *                                  and mantissa to bits 7..13): the value times
 *                                  2^-8 for OCP e4m3fn, 2^-7 for e4m3fnuz,
 *                                  subnormal codes too; one packed f16
 *                                  multiply restores it exactly
 *   fmhai_mfma_e4m3_chunk(w, is_k, lo, hi)
 *                                  one 16-byte e4m3 chunk (16 columns) -> the
 *                                  two 16-byte f16 chunks it decodes to (before
 *                                  that multiply): V in column order; K in the
 *                                  order FP8 kernels store their queries
 *                                  (fmhai_load_q_f16), which the product over
 *                                  the head dim does not see
 *   fmhai_mfma_k8_slot(j)          the slot of column j of a 16-column chunk
 *                                  in that K/Q order: columns 4i, 4i+1 go to
 *                                  slots 2i, 2i+1, columns 4i+2, 4i+3 to slots
 *                                  8 + 2i, 8 + 2i + 1
 * (0x80 is NaN in fnuz and decodes as -0 here: a cache holds no NaN.) */
FMHAI_MFMA_FN uint32_t fmhai_mfma_e4m3x2_f16bits(uint32_t a)
{
    return ((a & 0x00800080u) << 8) | ((a & 0x007f007fu) << 7);
}
FMHAI_MFMA_FN void fmhai_mfma_e4m3_chunk(const uint32_t *w, int is_k, uint32_t *lo, uint32_t *hi)
{
    int i;
    for (i = 0; i < 4; ++i) {
        /* columns 4i, 4i+1 and 4i+2, 4i+3 of the chunk, one f16 pair each */
        const uint32_t a = fmhai_mfma_e4m3x2_f16bits((w[i] & 0xffu) | ((w[i] & 0xff00u) << 8));
        const uint32_t b = fmhai_mfma_e4m3x2_f16bits(((w[i] >> 16) & 0xffu) | ((w[i] >> 8) & 0xff0000u));
        if (is_k) {
            lo[i] = a;
            hi[i] = b;
        } else if (i < 2) {
            lo[2 * i] = a;
            lo[2 * i + 1] = b;
        } else {
            hi[2 * i - 4] = a;
            hi[2 * i - 3] = b;
        }
    }
}
FMHAI_MFMA_FN int fmhai_mfma_k8_slot(int j)
{
    return ((j & 2) ? 8 : 0) + 2 * (j >> 2) + (j & 1);
}

/* ---- backward tiles in LDS (pipeline/bwd_mfma.h) ---------------------------
 * The MFMA backward computes S = Q K^T and dP = dO V^T with the query in A
 * (rows of the Q / dO tile, fmhai_mfma_lds_row as above) and the key in B
 * (rows of the K / V tile, the same function): a lane's D slots are then one
 * key (its column, ql) and 16 queries, the slot's query less the lane's
 * 4*kh being fmhai_mfma_slot_row(e). Those slots chain as the B operand of
 * dV^T += dO^T P and dK^T += Q^T dS (fmhai_mfma_chain_key: query kb*8 + 4*kh
 * + e), whose A fragments are columns of the dO and Q tiles read down the
 * rows (fmhai_mfma_lds_vt / fmhai_mfma_lds_vt_at, the forward's V^T read).
 * dS goes to LDS as a [tile_m][tile_n] 16-bit tile, rows = queries:
 *   fmhai_mfma_lds_ds(r, c, bn)    element (query r, key c): 8-byte granule
 *                                  c/4 of the row at (c/4) ^ (r % (bn/4))
 *   fmhai_mfma_lds_ds_row(r, kh, bn), fmhai_mfma_lds_ds_kb(base, kb)
 *                                  dS's A fragment of dQ = dS K for query
 *                                  row r: keys kb*8 + 4*kh .. + 3 (8 bytes)
 * and dQ's B fragment is K read down a column (fmhai_mfma_lds_vt_at again:
 * keys kb*8 + 4*kh + e, head-dim column cb*32 + ql). bn is 32, 64 or 128
 * (a power of two: the XOR stays inside the row) and the tile base is
 * aligned to bn * 2 bytes. Checked, with the products, by
 * tests/host/test_bwd_mfma_model.c. */
FMHAI_MFMA_FN int fmhai_mfma_slot_row(int e)
{
    return (e / 4) * 8 + e % 4;
}
FMHAI_MFMA_FN int fmhai_mfma_lds_ds(int r, int c, int bn)
{
    return r * bn * 2 + ((((c >> 2) ^ (r & (bn / 4 - 1)))) << 3) + ((c & 3) << 1);
}
/* granule 2*kb + kh of row r: (2*kb) ^ (kh ^ (r % (bn/4))), so the lane's
 * part is fixed and kb enters as one XOR of kb << 4 */
FMHAI_MFMA_FN int fmhai_mfma_lds_ds_row(int r, int kh, int bn)
{
    return r * bn * 2 + ((kh ^ (r & (bn / 4 - 1))) << 3);
}
FMHAI_MFMA_FN int fmhai_mfma_lds_ds_kb(int base, int kb)
{
    return base ^ (kb << 4);
}

/* Dropout keep bits of a backward lane's 16 S^T slots (bit e: query i0 +
 * fmhai_mfma_slot_row(e), key j; i0 = the slice's first query + 4*kh, with
 * bits 0, 1, 3, 4 clear). Slot e = 4*(2*b4 + b3) + 2*b1 + b0 is query bits
 * 4, 3, 1, 0; a Philox block of tile/philox.h holds the queries differing in
 * bits 0 and 3, so the lane draws the 4 blocks (b1, b4) and takes 4 bytes of
 * each: word 2*b3 + b0, byte 2*j3 + j0. Kept: byte >= thr. */
FMHAI_MFMA_FN uint32_t fmhai_mfma_bwd_keep(uint64_t seed, uint64_t offset, uint32_t bh, int i0, int j, uint32_t thr)
{
    const uint32_t sh = 8u * (2u * (((uint32_t)j >> 3) & 1u) + ((uint32_t)j & 1u));
    uint32_t keep = 0;
    int q, b3, b0;
    for (q = 0; q < 4; ++q) {
        const int b1 = q & 1, b4 = q >> 1;
        uint32_t w[4];
        fmhai_dropout_block(seed, offset, bh, (uint32_t)(i0 + 16 * b4 + 2 * b1), (uint32_t)j, w);
        for (b3 = 0; b3 < 2; ++b3)
            for (b0 = 0; b0 < 2; ++b0)
                keep |= (uint32_t)(((w[2 * b3 + b0] >> sh) & 0xffu) >= thr) << (4 * (2 * b4 + b3) + 2 * b1 + b0);
    }
    return keep;
}

#endif /* FMHA_TILE_MFMA_LAYOUT_H */
