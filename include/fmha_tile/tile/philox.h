/*
 * Counter-based random numbers for attention dropout: Philox4x32 and the
 * rule that maps a score element to its random word.
 *
 * Dropout must draw the same keep/drop decision for element (b, h, i, j) in
 * the forward, in the backward (which walks the scores transposed, keys as
 * rows) and in the CPU reference. So the decision is a pure function of the
 * element, never of who computes it: one Philox call (counter (j & ~9,
 * i & ~9, b * nhead + h, offset), key the 64-bit seed with the offset's
 * high word added) gives 16 random bytes to the 16 elements whose i and j
 * differ from (i & ~9, j & ~9) in bits 0 and 3; element (i, j) takes byte
 * 8 * i3 + 4 * i0 + 2 * j3 + j0 (i3 = bit 3 of i, ...). A thread of a
 * 16 x 8 accumulator tile (mma.sync / wgmma layouts) holds rows g and g + 8
 * and columns 2t and 2t + 1; with the next n-tile's columns (bit 3) that is
 * 8 of one call's 16 bytes, whether the rows are queries (the forward) or
 * keys (the backward's transposed scores). An element is kept when its byte
 * is at least the threshold round(p * 256) (the drop probability is taken
 * in 256ths, as FlashAttention does) and kept values are scaled by
 * 256 / (256 - threshold).
 *
 * Dropout draws Philox4x32-7 (FMHAI_DROPOUT_ROUNDS), the round count
 * FlashAttention-2 and CK Tile draw dropout with: Random123's authors
 * found 7 rounds of Philox4x32 to pass TestU01's BigCrush and made 10 the
 * default for a safety margin. The rounds are much of dropout's cost in
 * the kernels; 7 instead of 10 gained the forward with dropout 4-7% and
 * the backward 1-3% (bench/RESULTS.md, session 14).
 *
 * Host and device (plain static inline for a C compiler). The round
 * function is checked against Random123's published known-answer vectors
 * (10 rounds) in tests/host/test_philox.c.
 */
#ifndef FMHA_TILE_PHILOX_H
#define FMHA_TILE_PHILOX_H

#include <stdint.h>

#if defined(__HIP__) || defined(__CUDACC__)
#  define FMHAI_RNG_FN static inline __host__ __device__
#else
#  define FMHAI_RNG_FN static inline
#endif

/* hi:lo = a * b */
FMHAI_RNG_FN uint32_t fmhai_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi)
{
#if defined(__CUDA_ARCH__)
    *hi = __umulhi(a, b);
    return a * b;
#else
    const uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
#endif
}

/* The rounds of dropout's Philox (a fixed part of the dropout rule: the
 * kernels, the CPU reference and python/fmha_tile/philox.py agree on it) */
#define FMHAI_DROPOUT_ROUNDS 7

/* Philox4x32 with `rounds` rounds: out = philox(ctr, key) */
FMHAI_RNG_FN void fmhai_philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    int r;
#if defined(__HIP__)
#pragma unroll 1   /* AMD: unrolled, the 7 rounds cost the gfx90a backward 4 spilled dwords */
#elif defined(__CUDACC__)
#pragma unroll
#endif
    for (r = 0; r < rounds; ++r) {
        uint32_t hi0, hi1;
        const uint32_t lo0 = fmhai_mulhilo32(0xD2511F53u, c0, &hi0);
        const uint32_t lo1 = fmhai_mulhilo32(0xCD9E8D57u, c2, &hi1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* The 16 bytes (four words, little-endian) of the block holding element
 * (i, j) of head bh = b * nhead + h. */
FMHAI_RNG_FN void fmhai_dropout_block(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t i, uint32_t j,
                                      uint32_t out[4])
{
    const uint32_t ctr[4] = { j & ~9u, i & ~9u, bh, (uint32_t)offset };
    const uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) + (uint32_t)(offset >> 32) };
    fmhai_philox4x32(ctr, key, FMHAI_DROPOUT_ROUNDS, out);
}

/* Element (i, j)'s byte index in its block. */
FMHAI_RNG_FN uint32_t fmhai_dropout_byte_index(uint32_t i, uint32_t j)
{
    return ((i >> 3) & 1u) * 8u + (i & 1u) * 4u + ((j >> 3) & 1u) * 2u + (j & 1u);
}

/* Element (i, j)'s random byte (the reference's per-element form). */
FMHAI_RNG_FN uint32_t fmhai_dropout_byte(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t i, uint32_t j)
{
    uint32_t w[4];
    const uint32_t k = fmhai_dropout_byte_index(i, j);
    fmhai_dropout_block(seed, offset, bh, i, j, w);
    return (w[k >> 2] >> (8u * (k & 3u))) & 0xffu;
}

/* The {seed, offset} a kernel draws from: the two uint64 at rng (a device
 * pointer, read when the kernel runs, so a captured graph can be replayed
 * with new values) when it is given, else the ones passed by value. */
FMHAI_RNG_FN void fmhai_dropout_seed_offset(const uint64_t *rng, uint64_t seed, uint64_t offset, uint64_t *seed_out,
                                            uint64_t *offset_out)
{
    if (rng) {
        seed = rng[0];
        offset = rng[1];
    }
    *seed_out = seed;
    *offset_out = offset;
}

/* Keep flags of four random bytes at once: the top bit of byte k is set
 * when byte k of a >= thr (T: thr in every byte, Tlo: its low 7 bits in
 * every byte). z's top bits compare the low 7 bits (a | 0x80 minus at most
 * 0x7f borrows from no other byte); the top bits of a and thr decide the
 * rest. */
FMHAI_RNG_FN uint32_t fmhai_keep_flags(uint32_t a, uint32_t T, uint32_t Tlo)
{
    const uint32_t z = (a | 0x80808080u) - Tlo;
    return (a & ~T) | (~(a ^ T) & z);
}

/* The backward's keep bits of one call (bwd_portable.h,
 * fmhai_bwd_dropout_keep), byte-parallel. fmhai_dropout_keep_z gathers the
 * four words' flags into one word, byte k holding word w's decision for
 * byte k at bit (w & 1) + 4 (w >> 1); fmhai_dropout_keep8 then takes the 8
 * elements of key parity gsel (bytes gsel and 2 + gsel): bit 4 par + 2 hf +
 * e = byte 2 hf + gsel of word 2 par + e kept. */
FMHAI_RNG_FN uint32_t fmhai_dropout_keep_z(const uint32_t w[4], uint32_t T, uint32_t Tlo)
{
    return ((fmhai_keep_flags(w[0], T, Tlo) >> 7) & 0x01010101u) | ((fmhai_keep_flags(w[1], T, Tlo) >> 6) & 0x02020202u) |
           ((fmhai_keep_flags(w[2], T, Tlo) >> 3) & 0x10101010u) | ((fmhai_keep_flags(w[3], T, Tlo) >> 2) & 0x20202020u);
}
FMHAI_RNG_FN uint32_t fmhai_dropout_keep8(uint32_t z, uint32_t gsel)
{
    const uint32_t y = z >> (8u * gsel);
    return (y & 0x33u) | ((y >> 14) & 0xccu);
}

/* The keep threshold of drop probability p in [0, 1): a byte >= it is kept
 * (p is taken as threshold / 256). */
FMHAI_RNG_FN uint32_t fmhai_dropout_threshold(float p)
{
    const float t = p * 256.0f + 0.5f;
    return t >= 255.0f ? 255u : t <= 0.0f ? 0u : (uint32_t)t;
}

/* What a kept value is multiplied by: 256 / (256 - threshold). */
FMHAI_RNG_FN float fmhai_dropout_scale(uint32_t threshold)
{
    return 256.0f / (float)(256u - threshold);
}

#endif /* FMHA_TILE_PHILOX_H */
