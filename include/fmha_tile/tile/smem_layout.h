/*
 * Shared-memory tile layouts of the mma.sync pipelines (forward, batch
 * prefill, backward): where a 16-byte chunk of a row lands, and where
 * ldmatrix reads it back.
 *
 * 16-bit [rows][hd] tiles are swizzled in 16-byte chunks (chunk c of row r at
 * c ^ (r % 8)), so ldmatrix and cp.async touch 8 distinct bank groups per
 * phase; rows take whole 128-byte lines (FMHAI_ROWB). VECTORIZED K and
 * V^T tiles are chunk-major (fmhai_cmaj), the order
 * their pages store them in. e4m3 tiles use their own byte-row swizzle
 * (fmhai_swz8). The wgmma pipelines' 128-byte-swizzled layout lives with the
 * wgmma descriptors in tile/warpgroup_mma.h.
 */
#ifndef FMHA_TILE_TILE_SMEM_LAYOUT_H
#define FMHA_TILE_TILE_SMEM_LAYOUT_H

#include "warp_mma.h"
#include "../policy/fwd_tiles.h"   /* FMHAI_ROWB */

/* Rows of a swizzled 16-bit [rows][hd] tile are FMHAI_ROWB(hd) bytes
 * (policy/fwd_tiles.h): whole 128-byte lines, so chunk ^ row%8 stays inside
 * the row and ldmatrix keeps 8 distinct bank groups a phase. Head dims 32
 * and 96 pad their rows to 64 and 128 columns (the padding is never copied
 * nor read): their tiles cost the shared memory of the next multiple of 64,
 * their GEMMs only hd. */
/* Byte offset of 16-byte chunk `c` of row `r` in a swizzled [rows][hd] tile. */
FMHAI_DEVICE int fmhai_swz(int r, int c, int hd)
{
    return r * FMHAI_ROWB(hd) + ((c ^ (r & 7)) << 4);
}

/* VECTORIZED K and V^T tiles are chunk-major: 16-byte chunk c of row r at
 * (c * rows + r) * 16, the order the page stores them in (K: a chunk column
 * of consecutive tokens; V: a token group of consecutive d). A warp's copies
 * are then contiguous in global and in shared memory alike; with row-major
 * rows each lane wrote its own 16 bytes into a different shared row, which
 * splits every 32-byte sector in two and fetched each twice from L2. An
 * ldmatrix phase reads one chunk of 8 consecutive rows: 128 contiguous bytes,
 * conflict-free without a swizzle. */
FMHAI_DEVICE int fmhai_cmaj(int r, int c, int rows)
{
    return (c * rows + r) << 4;
}

/* e4m3 tiles of rb-byte rows read by ldmatrix (K): 16-byte chunk c of row r
 * sits at chunk c ^ key. An ldmatrix phase reads one chunk of 8 consecutive
 * rows, so their chunks must fall in 8 distinct 16-byte bank groups: rows of
 * a multiple of 128 bytes XOR with r % 8; rows of 64 (or 192) bytes, two rows
 * a 128-byte line, XOR with (r / 2) % 4 (stays inside 4-chunk groups). */
FMHAI_DEVICE int fmhai_swz8_key(int r, int rb)
{
    return rb % 128 == 0 ? (r & 7) : ((r >> 1) & 3);
}
FMHAI_DEVICE int fmhai_swz8(int r, int c, int rb)
{
    return r * rb + ((c ^ fmhai_swz8_key(r, rb)) << 4);
}

/* Shared address for ldmatrix of 16-byte chunk (2*kk + m) of a row whose
 * in-tile offset is `row_bytes_off` (a multiple of 128, row % 8 == r7):
 * base = tile + row_bytes_off + ((m ^ r7) << 4) is formed once; chunk 2*kk + m
 * is then base ^ ((kk % 4) << 5), plus (kk / 4) * 128. */
FMHAI_DEVICE fmhai_smem_t fmhai_ldsm_base(fmhai_smem_t tile, int row_bytes_off, int m, int r7)
{
    return tile + row_bytes_off + ((m ^ r7) << 4);
}
FMHAI_DEVICE fmhai_smem_t fmhai_ldsm_at(fmhai_smem_t base, int kk)
{
    return fmhai_smem_xor(base, (kk % 4) << 5) + (kk / 4) * 128;
}
/* The same for e4m3 tiles of rb-byte rows (fmhai_swz8): base = tile + row *
 * rb + (fmhai_swz8_key(row, rb) << 4), the row starting at a multiple of 128
 * bytes (64 when rb is not a multiple of 128); chunk kk is then one XOR (on
 * the bits the key covers) and a constant away. */
FMHAI_DEVICE fmhai_smem_t fmhai_ldsm8_at(fmhai_smem_t base, int kk, int rb)
{
    const int m = rb % 128 == 0 ? 7 : 3;
    return fmhai_smem_xor(base, (kk & m) << 4) + (kk & ~m) * 16;
}

#endif /* FMHA_TILE_TILE_SMEM_LAYOUT_H */
