/*
 * test_philox.c - the dropout random numbers (tile/philox.h) on the host:
 * Philox4x32-10 against Random123's published known-answer vectors, the
 * dropout rule's 7 rounds (FMHAI_DROPOUT_ROUNDS), the
 * element -> byte rule (one call serves a thread's elements of a 16 x 8
 * accumulator tile in the forward's layout and in the backward's transposed
 * one), the keep rate, and independence across heads, offsets and seeds.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "fmha_tile/tile/philox.h"

static int g_pass, g_fail;
#define CHECK(cond, name)                                                     \
    do {                                                                      \
        if (cond) { ++g_pass; printf("PASS %s\n", name); }                    \
        else { ++g_fail; printf("FAIL %s (%s:%d)\n", name, __FILE__, __LINE__); } \
    } while (0)

static int kat(const uint32_t c[4], const uint32_t k[2], const uint32_t want[4])
{
    uint32_t out[4];
    fmhai_philox4x32(c, k, 10, out);
    return memcmp(out, want, sizeof(out)) == 0;
}

int main(void)
{
    {   /* Random123 kat_vectors: philox4x32 10 */
        const uint32_t c0[4] = { 0, 0, 0, 0 }, k0[2] = { 0, 0 };
        const uint32_t w0[4] = { 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u };
        const uint32_t c1[4] = { 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu };
        const uint32_t k1[2] = { 0xffffffffu, 0xffffffffu };
        const uint32_t w1[4] = { 0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu };
        const uint32_t c2[4] = { 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u };
        const uint32_t k2[2] = { 0xa4093822u, 0x299f31d0u };
        const uint32_t w2[4] = { 0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u };
        CHECK(kat(c0, k0, w0), "philox4x32-10: zero counter and key");
        CHECK(kat(c1, k1, w1), "philox4x32-10: all-ones counter and key");
        CHECK(kat(c2, k2, w2), "philox4x32-10: pi-digits counter and key");
    }
    {   /* the dropout rule draws FMHAI_DROPOUT_ROUNDS (7) rounds: its block is
         * the round function's 7-round output, which differs from 10 rounds'
         * (a kernel, reference or Python rule left at 10 would disagree) */
        const uint32_t ctr[4] = { 16u, 16u, 3u, 77u }, key[2] = { 0x9abcdefu, 0x1234567u };
        uint32_t blk[4], r7[4], r10[4];
        fmhai_dropout_block(0x0123456709abcdefull, 77, 3, 17u, 24u, blk);
        fmhai_philox4x32(ctr, key, 7, r7);
        fmhai_philox4x32(ctr, key, 10, r10);
        CHECK(FMHAI_DROPOUT_ROUNDS == 7, "dropout draws Philox4x32-7");
        CHECK(memcmp(blk, r7, sizeof(blk)) == 0, "a dropout block is Philox4x32-7 of (j & ~9, i & ~9, bh, offset)");
        CHECK(memcmp(r7, r10, sizeof(r7)) != 0, "7 and 10 rounds differ");
    }
    {   /* the block rule: the 16 elements differing from (i & ~9, j & ~9) in
         * bits 0 and 3 of i and j share one call, byte 8 i3 + 4 i0 + 2 j3 + j0
         * each; so a forward thread's 2 x 2 (rows r, r ^ 8; columns c, c ^ 1)
         * and a backward thread's transposed 2 x 2 (queries q, q ^ 1; keys k,
         * k ^ 8) both come from one call */
        const uint64_t seed = 0x123456789abcdefull, off = 77;
        int ok = 1, distinct = 1;
        uint32_t i, j;
        for (i = 0; i < 64 && ok; ++i)
            for (j = 0; j < 64 && ok; ++j) {
                uint32_t b[4], b2[4], b3[4];
                const uint32_t k = fmhai_dropout_byte_index(i, j);
                fmhai_dropout_block(seed, off, 5, i, j, b);
                fmhai_dropout_block(seed, off, 5, i ^ 8u, j ^ 1u, b2);
                fmhai_dropout_block(seed, off, 5, i ^ 1u, j ^ 8u, b3);
                ok = memcmp(b, b2, sizeof(b)) == 0 && memcmp(b, b3, sizeof(b)) == 0 &&
                     fmhai_dropout_byte(seed, off, 5, i, j) == ((b[k >> 2] >> (8u * (k & 3u))) & 0xffu) &&
                     fmhai_dropout_byte_index(i ^ 9u, j ^ 9u) == (15u - k);
                if (fmhai_dropout_byte(seed, off, 5, i, j) == fmhai_dropout_byte(seed, off, 5, i, j ^ 2u) &&
                    fmhai_dropout_byte(seed, off, 5, i, j) == fmhai_dropout_byte(seed, off, 5, i ^ 2u, j))
                    distinct = 0;
            }
        CHECK(ok, "a forward thread's 2 x 2 and a backward thread's transposed 2 x 2 come from one call");
        CHECK(distinct, "neighbouring blocks draw different bytes");
    }
    {   /* keep rate: p = 0.1 and 0.5 over 4 heads x 256 x 256 elements (the
         * expected rate is 1 - threshold / 256) */
        const float ps[2] = { 0.1f, 0.5f };
        int q;
        for (q = 0; q < 2; ++q) {
            const uint32_t thr = fmhai_dropout_threshold(ps[q]);
            long kept = 0, n = 0;
            uint32_t bh, i, j;
            char name[96];
            for (bh = 0; bh < 4; ++bh)
                for (i = 0; i < 256; ++i)
                    for (j = 0; j < 256; ++j, ++n)
                        kept += fmhai_dropout_byte(42, 0, bh, i, j) >= thr;
            snprintf(name, sizeof(name), "keep rate at p = %.1f: %.4f (1 - %u/256 within 0.005)", ps[q],
                     (double)kept / (double)n, thr);
            CHECK(fabs((double)kept / (double)n - (1.0 - thr / 256.0)) < 0.005, name);
        }
        CHECK(fmhai_dropout_threshold(0.f) == 0u && fmhai_dropout_threshold(0.1f) == 26u &&
                  fmhai_dropout_threshold(0.5f) == 128u && fmhai_dropout_threshold(0.999f) == 255u,
              "thresholds: p in 256ths, p = 0 keeps everything, never all dropped");
        CHECK(fmhai_dropout_scale(128u) == 2.0f, "kept values scaled by 256 / (256 - threshold)");
    }
    {   /* heads, offsets (low and high words) and seeds change the draws */
        int same_bh = 0, same_off = 0, same_hi = 0, same_seed = 0;
        uint32_t i;
        for (i = 0; i < 4096; ++i) {
            const uint32_t w = fmhai_dropout_byte(7, 3, 1, i, i * 3u);
            same_bh += w == fmhai_dropout_byte(7, 3, 2, i, i * 3u);
            same_off += w == fmhai_dropout_byte(7, 4, 1, i, i * 3u);
            same_hi += w == fmhai_dropout_byte(7, 3 + (1ull << 32), 1, i, i * 3u);
            same_seed += w == fmhai_dropout_byte(8, 3, 1, i, i * 3u);
        }
        /* bytes agree by chance 1 time in 256: about 16 of 4096 */
        CHECK(same_bh < 48 && same_off < 48 && same_hi < 48 && same_seed < 48,
              "another head, offset (either word) or seed draws other bytes");
    }
    {   /* the byte-parallel keep decisions (fmhai_keep_flags, and the
         * backward's gather fmhai_dropout_keep_z / _keep8) against the plain
         * byte compare, every threshold, words from Philox plus edge bytes */
        int ok_flags = 1, ok_keep = 1;
        uint32_t thr, n;
        for (thr = 1; thr < 256; ++thr) {
            const uint32_t T = thr * 0x01010101u, Tlo = (thr & 0x7fu) * 0x01010101u;
            for (n = 0; n < 64; ++n) {
                uint32_t w[4], gsel, q;
                fmhai_dropout_block(0x9e3779b97f4a7c15ull, n, thr, n, 3 * n, w);
                if (n == 0) { w[0] = 0u; w[1] = 0xffffffffu; w[2] = thr * 0x01010101u; w[3] = (thr - 1u) * 0x01010101u; }
                if (n == 1) { w[0] = 0x807f8180u; w[1] = 0x7f80007fu; w[2] = (thr ^ 0x80u) * 0x01000001u; w[3] = 0x01fe02fdu; }
                for (q = 0; q < 4; ++q) {
                    const uint32_t f = fmhai_keep_flags(w[q], T, Tlo);
                    int k;
                    for (k = 0; k < 4; ++k)
                        if (((f >> (8 * k + 7)) & 1u) != (((w[q] >> (8 * k)) & 0xffu) >= thr)) ok_flags = 0;
                }
                for (gsel = 0; gsel < 2; ++gsel) {
                    uint32_t want = 0, par, e, hf;
                    for (par = 0; par < 2; ++par)
                        for (e = 0; e < 2; ++e)
                            for (hf = 0; hf < 2; ++hf)
                                want |= (uint32_t)(((w[2 * par + e] >> (8 * (2 * hf + gsel))) & 0xffu) >= thr)
                                        << (4 * par + 2 * hf + e);
                    if (fmhai_dropout_keep8(fmhai_dropout_keep_z(w, T, Tlo), gsel) != want) ok_keep = 0;
                }
            }
        }
        CHECK(ok_flags, "keep flags of four bytes at once equal the byte compare (every threshold)");
        CHECK(ok_keep, "the backward's byte-parallel keep bits equal the per-element rule (both key parities)");
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
