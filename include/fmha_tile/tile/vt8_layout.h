/*
 * The e4m3 V^T stage of the Hopper forward, as small pure functions (host
 * and device): where each key of each d row sits, where each k-step of the
 * P V product starts reading, and the addresses the load warpgroup's
 * transpose (pipeline/kv_source.h, fmhai_wg_vt8_transpose) forms.
 *
 * wgmma reads an 8-bit B operand K-major only, so the FP8 P V product reads
 * V as V^T [hd][keys]. Its keys are stored in the order P's fragments hold
 * them, not in key order: byte k of a k-step (32 keys) of a d row holds key
 * 16 (k / 16) + 2 ((k % 16) / 4) + {0, 1, 8, 9}[k % 4] of the k-step, the
 * score columns 2t, 2t + 1, 8 + 2t, 9 + 2t that thread t of an MMA warp
 * packs into bytes 4t..4t+3 of its e4m3 A fragment (fmhai_fwd90_rescale_pack).
 * The product's sum over keys does not care about their order, only that P
 * and V^T agree.
 *
 * Panels. Keys 0..127 of a tile sit in a panel of 128-byte rows (d row dd at
 * dd * 128) with the 128-byte swizzle: 16-byte chunk c of row r at chunk
 * c ^ (r % 8), eight rows (1024 bytes) an atom, read through a 128-byte
 * swizzle descriptor whose start moves 32 bytes a k-step (a key tile of 64
 * fills half of each row). Keys 128..191 of a 192-key tile sit in a second
 * panel vr * 128 bytes on (vr: the stage's d rows, hd, or hd + 8 where 8
 * rows of e4m3 ones follow V^T's in each panel: FMHAI_FWD90_VFOLD in
 * policy/fwd_tiles.h), of 64-byte rows (d row dd at dd * 64) with the
 * 64-byte swizzle: chunk c of row r at chunk c ^ ((r / 2) % 4), i.e. byte
 * offset bits 4-5 XOR bits 7-8, eight rows (512 bytes) an atom; k-steps 4
 * and 5 read it through a 64-byte swizzle descriptor (SBO 512), the second
 * 32 bytes into the row. A stage at hdim 128 is then 16 + 8 = 24 KB, where
 * two 128-byte panels (the second half empty) took 32 KB and left room for
 * two stages only.
 *
 *   FMHAI_VT8_ROWB(bn)            bytes of V^T a d row: 128, or 192 (bn > 128)
 *   fmhai_vt8_keys(s_k)           keys of a d row of V^T given in global memory
 *   fmhai_vt8_kpos(key)           byte of key's slot in its row's logical order
 *   fmhai_vt8_off(dd, key, vr)    byte offset of (d row dd, tile key) in a stage
 *   FMHAI_P8_BIG_ADD / _BITS     the test of packed P for P >= 2^8
 *   fmhai_vt8_kstep_start(kq, vr) where k-step kq's descriptor starts (bytes
 *                                 from the stage) and _width(kq) its swizzle
 *   the transpose's lane mapping and its load and store addresses
 *                                 (fmhai_vt8_lane128 / _lane64, _srow, _ld,
 *                                 _st128, _st64): checked on the host against the
 *                                 descriptor's reads (tests/host/test_vt8_layout.c)
 */
#ifndef FMHA_TILE_VT8_LAYOUT_H
#define FMHA_TILE_VT8_LAYOUT_H

#include <stdint.h>

#if defined(__HIP__) || defined(__CUDACC__)
#  define FMHAI_VT8_FN static inline __host__ __device__
#else
#  define FMHAI_VT8_FN static inline
#endif

/* bytes of V^T a d row: one 128-byte panel up to 128 keys, + a 64-byte one */
#define FMHAI_VT8_ROWB(bn) ((bn) > 128 ? 192 : 128)

/* keys a d row of a V^T given in global memory holds (fmha_fwd_args.
 * v_kmajor): seqlen_k rounded up to a whole group of 16 */
FMHAI_VT8_FN int fmhai_vt8_keys(int s_k) { return (s_k + 15) / 16 * 16; }

/* logical byte of tile key `key` in its V^T row (P's fragment order) */
FMHAI_VT8_FN int fmhai_vt8_kpos(int key)
{
    const int q = key % 16;   /* key 16c + 2t + {0, 1, 8, 9}[e] sits at byte 16c + 4t + e */
    return key - q + 4 * ((q % 8) / 2) + (q & 1) + 2 * (q / 8);
}

/* byte offset of (d row dd, tile key) in a V^T stage of vr d rows */
FMHAI_VT8_FN int fmhai_vt8_off(int dd, int key, int vr)
{
    const int b = fmhai_vt8_kpos(key);
    if (b < 128) return dd * 128 + ((((b >> 4) ^ dd) & 7) << 4) + (b & 15);
    return vr * 128 + dd * 64 + (((((b - 128) >> 4) ^ (dd >> 1)) & 3) << 4) + (b & 15);
}

/* k-step kq (32 keys) of the P V product: its descriptor's start in bytes
 * from the stage (the swizzle applies to the address, so a start 32 bytes
 * into a 1024- or 512-aligned atom reads the row's second 32 bytes) */
FMHAI_VT8_FN int fmhai_vt8_kstep_start(int kq, int vr) { return kq < 4 ? 32 * kq : vr * 128 + 32 * (kq - 4); }
FMHAI_VT8_FN int fmhai_vt8_kstep_width(int kq) { return kq < 4 ? 128 : 64; }

/* The lazy max's test on P's packed e4m3 fragments (pipeline/fwd_sm90.h,
 * fmhai_fwd90_softmax8e): a word of four codes plus FMHAI_P8_BIG_ADD has
 * bit 7 of a byte set where that code is 0x78 or more, P >= 2^8 after
 * rounding (0x7f, NaN, too). P >= 0 and codes up to 0x7f, so no byte
 * carries into the next; the words of a row are ORed, then masked with
 * FMHAI_P8_BIG_BITS (tests/host/test_vt8_layout.c checks every code). */
#define FMHAI_P8_BIG_ADD 0x08080808u
#define FMHAI_P8_BIG_BITS 0x80808080u

/* ---- the transpose (fmhai_wg_vt8_transpose) ---------------------------------
 * The staging tile holds V rows, [srows][hd] bytes in column blocks of
 * [srows][128] with the 128-byte swizzle (TMA / cp.async tiles). A lane takes
 * four keys key0 + {0, 1, 8, 9} (key0 = 16c + 2t) of one 16-byte column `col`
 * (16 d rows) at a time: four 16-byte loads, a 4 x 4 byte transpose, sixteen
 * 4-byte stores (d row col * 16 + 4m + b gets the keys' bytes b of word m). */

/* 128-byte panel over `keys` keys (64 or 128): lane (c, t) of a group of
 * keys / 4 lanes; the groups share out the columns, `cols` each from col0 */
FMHAI_VT8_FN void fmhai_vt8_lane128(int tid, int keys, int hd, int *c, int *t, int *col0, int *cols)
{
    const int per = keys / 4, groups = 4 * (32 / per), l = tid % 32 % per;
    *c = l / 4;
    *t = l % 4;
    *cols = hd / 16 / groups;
    *col0 = ((tid / 32) * (32 / per) + (tid % 32) / per) * *cols;
}

/* 64-byte panel (64 keys): lane l of warp w takes c = l / 8, t = l % 4 and
 * column 2w + h (h = bit 2 of l), + 8 a pass (hd / 128 passes). A load
 * phase (8 lanes: one c, t 0..3, h 0..1) reads chunks (2w + h) ^ (2t + 0/1):
 * 8 different 16-byte bank groups. */
FMHAI_VT8_FN void fmhai_vt8_lane64(int tid, int hd, int *c, int *t, int *h, int *col0, int *cols)
{
    const int l = tid % 32;
    *c = l / 8;
    *t = l % 4;
    *h = (l >> 2) & 1;
    *col0 = 2 * (tid / 32) + *h;
    *cols = hd / 128;
}

/* The load of key offset e (0, 1, 8, 9 for e = 0..3) of column col: srow =
 * fmhai_vt8_srow(stage, c, t), key0's row (stage 1024-aligned: its rows
 * key0 + 1 key 128 bytes on, + 8 keys 1024 on) with the column block of
 * col, and its swizzle chunk (col % 8) ^ (key0 % 8), key0 % 8 = 2t, XORed
 * in, then row offsets added (+ 1 key: the chunk's bit 0 flipped too), so
 * the device code forms them as a base and immediates. */
FMHAI_VT8_FN uint32_t fmhai_vt8_srow(uint32_t stage, int c, int t) { return stage + (16 * c + 2 * t) * 128; }
FMHAI_VT8_FN uint32_t fmhai_vt8_ld(uint32_t srow, int srows, int col, int t, int e)
{
    const uint32_t l0 = (srow + (col >> 3) * srows * 128 + ((col & 7) << 4)) ^ (t << 5);
    return ((e & 1) ? (l0 ^ 16u) + 128u : l0) + (uint32_t)(e >> 1) * 1024u;
}

/* 128-byte panel: the store of word m, byte b (d row col * 16 + 4m + b):
 * s0 = dst + 4t + 16c + col * 2048 (chunk c, word t of row col * 16), the
 * row's swizzle (chunk c ^ (d % 8)) XORed in, the row offset added */
FMHAI_VT8_FN uint32_t fmhai_vt8_s0_128(uint32_t dst, int col, int c, int t)
{
    return dst + (uint32_t)(4 * t + (c << 4) + col * 2048);
}
FMHAI_VT8_FN uint32_t fmhai_vt8_st128(uint32_t s0, int m, int b)
{
    return (s0 ^ (uint32_t)((4 * (m & 1) + b) << 4)) + (uint32_t)((4 * m + b) * 128);
}

/* 64-byte panel: s1 = dst1 + 4t + 16c + col * 1024. Lanes of h = 1 store
 * byte b ^ 1 where lanes of h = 0 store byte b, so that one store
 * instruction writes rows of both parities (columns 2w and 2w + 1 are 1024
 * bytes apart, the same banks; rows of another parity are 64 bytes on, the
 * other 16 banks): 32 banks, no conflict. Its row 4m + (b ^ h) has the
 * swizzle chunk c ^ (2 (m % 2) + b / 2) (h does not change it) and the
 * offset (4m + b) * 64 +- 64h, folded into the base (+ for even b, - for
 * odd). */
FMHAI_VT8_FN uint32_t fmhai_vt8_s1_64(uint32_t dst1, int col, int c, int t)
{
    return dst1 + (uint32_t)(4 * t + (c << 4) + col * 1024);
}
FMHAI_VT8_FN uint32_t fmhai_vt8_st64(uint32_t s1, int h, int m, int b)
{
    const uint32_t base = (b & 1) ? s1 - (uint32_t)(64 * h) : s1 + (uint32_t)(64 * h);
    return (base ^ (uint32_t)(((2 * (m & 1) + (b >> 1)) & 3) << 4)) + (uint32_t)((4 * m + b) * 64);
}

#endif /* FMHA_TILE_VT8_LAYOUT_H */
