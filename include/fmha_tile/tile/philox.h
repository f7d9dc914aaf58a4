/*
 * Counter-based random numbers for attention dropout: Philox4x32-10 and the
 * rule that maps a score element to its random word.
 *
 * Dropout must draw the same keep/drop decision for element (b, h, i, j) in
 * the forward, in the backward (which walks the scores transposed, in other
 * tiles and fragment layouts) and in the CPU reference. So the decision is a
 * pure function of the element, never of who computes it: one Philox call
 * (counter (j / 2, i with bit 3 cleared, b * nhead + h, offset), key the
 * 64-bit seed with the offset's high word added) gives the four elements
 * (i, j), (i, j ^ 1), (i ^ 8, j), (i ^ 8, j ^ 1) their 32-bit words, word
 * 2 * ((i >> 3) & 1) + (j & 1). That block is exactly what one thread holds
 * of a 16 x 8 tile in the mma.sync / wgmma accumulator layouts (rows g and
 * g + 8, columns 2t and 2t + 1), so a kernel pays one call per four of its
 * elements and never a shuffle. An element is kept when its word is at
 * least the threshold round(p * 2^32) (p the drop probability), and kept
 * values are scaled by 1 / (1 - p).
 *
 * Host and device (plain static inline for a C compiler). Checked against
 * Random123's published known-answer vectors in tests/host/test_philox.c.
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

/* Philox4x32 with 10 rounds: out = philox(ctr, key) */
FMHAI_RNG_FN void fmhai_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    int r;
    for (r = 0; r < 10; ++r) {
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

/* The four words of the block holding element (i, j) of head bh = b *
 * nhead + h; word 2 * ((i >> 3) & 1) + (j & 1) is element (i, j)'s. */
FMHAI_RNG_FN void fmhai_dropout_block(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t i, uint32_t j,
                                      uint32_t out[4])
{
    const uint32_t ctr[4] = { j >> 1, i & ~8u, bh, (uint32_t)offset };
    const uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) + (uint32_t)(offset >> 32) };
    fmhai_philox4x32_10(ctr, key, out);
}

/* Element (i, j)'s word (the reference's per-element form). */
FMHAI_RNG_FN uint32_t fmhai_dropout_word(uint64_t seed, uint64_t offset, uint32_t bh, uint32_t i, uint32_t j)
{
    uint32_t w[4];
    fmhai_dropout_block(seed, offset, bh, i, j, w);
    return w[2 * ((i >> 3) & 1u) + (j & 1u)];
}

/* The keep threshold of drop probability p in [0, 1): a word >= it is kept. */
FMHAI_RNG_FN uint32_t fmhai_dropout_threshold(float p)
{
    const double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 0xffffffffu : (uint32_t)(t + 0.5);
}

#endif /* FMHA_TILE_PHILOX_H */
