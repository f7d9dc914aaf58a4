/*
 * test_vt8_layout.c - the e4m3 V^T stage of the Hopper forward
 * (tile/vt8_layout.h) on the host: the load warpgroup's transpose replayed
 * with the header's lane mapping and addresses (the device function's
 * loops, its loads and stores on byte arrays), then read back the way the
 * P V product's descriptors read it (a model of the wgmma K-major operand:
 * 8-row groups SBO apart, rows of the swizzle's width, the 128- or 64-byte
 * swizzle applied to the address) with P's keys in the order the softmax
 * packs them (fmhai_fwd90_rescale_pack, wgmma's e4m3 A fragment layout).
 * Key tiles of 64, 128 and 192 at hdim 128, and 64 at hdim 256 (the rows
 * the pipeline has). Also: every byte of the stage written once, nothing
 * outside it, fmhai_vt8_off agreeing with both, and the 64-byte panel's
 * shared-memory accesses free of bank conflicts (a 16-byte load phase of 8
 * lanes on 8 bank groups, a 4-byte store of 32 lanes on 32 banks). And
 * the lazy max's test of packed e4m3 P (FMHAI_P8_BIG_ADD) on every code.
 */
#include <stdio.h>
#include <string.h>
#include "fmha_tile/tile/vt8_layout.h"

static int g_pass, g_fail;
#define CHECK(cond, name)                                                     \
    do {                                                                      \
        if (cond) { ++g_pass; printf("PASS %s\n", name); }                    \
        else { ++g_fail; printf("FAIL %s (%s:%d)\n", name, __FILE__, __LINE__); } \
    } while (0)

#define MAXB (256 * 192)
static unsigned char g_stage[2 * MAXB], g_vt[2 * MAXB];
static int g_writes[2 * MAXB];

/* the value of V row (key) k, column dd: distinct for every (k, dd) of a tile */
static unsigned char vval(int k, int dd) { return (unsigned char)(k * 7 + dd * 13 + (k >> 5) * 3 + (dd >> 6)); }

/* the staging tile (TMA / cp.async): [srows][hd] bytes in column blocks of
 * [srows][128], 16-byte chunk c of row r at c ^ (r % 8) */
static int stage_off(int r, int dd, int srows)
{
    const int c = dd / 16;
    return (c >> 3) * srows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4) + dd % 16;
}

/* prmt.b32 d, a, b, sel (default mode): byte i of d is byte sel[4i+3:4i]
 * of the 8 bytes {b, a} (a bytes 0-3, b bytes 4-7) */
static uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    const uint64_t x = ((uint64_t)b << 32) | a;
    uint32_t d = 0;
    for (int i = 0; i < 4; ++i) d |= (uint32_t)((x >> (8 * ((sel >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return d;
}

static uint32_t rd32(const unsigned char *m, uint32_t a)
{
    return (uint32_t)m[a] | (uint32_t)m[a + 1] << 8 | (uint32_t)m[a + 2] << 16 | (uint32_t)m[a + 3] << 24;
}
static void st32(uint32_t a, uint32_t v, int lim, int *outside)
{
    if ((int)a + 4 > lim) { ++*outside; return; }
    for (int i = 0; i < 4; ++i) {
        g_vt[a + i] = (unsigned char)(v >> (8 * i));
        ++g_writes[a + i];
    }
}

/* fmhai_vt8_load4 + fmhai_vt8_word: o[b] of word m (sel_a / sel_b as given) */
static void load_word(uint32_t (*w)[4], uint32_t stage, int srows, int col, int c, int t)
{
    for (int e = 0; e < 4; ++e) {
        const uint32_t a = fmhai_vt8_ld(fmhai_vt8_srow(stage, c, t), srows, col, t, e);
        for (int m = 0; m < 4; ++m) w[e][m] = rd32(g_stage, a + 4 * m);
    }
}
static void word(uint32_t *o, uint32_t (*w)[4], int m, uint32_t sel_a, uint32_t sel_b)
{
    const uint32_t lo01 = prmt(w[0][m], w[1][m], 0x5140), hi01 = prmt(w[0][m], w[1][m], 0x7362);
    const uint32_t lo23 = prmt(w[2][m], w[3][m], 0x5140), hi23 = prmt(w[2][m], w[3][m], 0x7362);
    o[0] = prmt(lo01, lo23, sel_a);
    o[1] = prmt(lo01, lo23, sel_b);
    o[2] = prmt(hi01, hi23, sel_a);
    o[3] = prmt(hi01, hi23, sel_b);
}

/* fmhai_wg_vt8_transpose, all 128 threads, stage at 0 and V^T at 0 (a
 * stage of vr d rows) */
static void transpose(int hd, int vr, int bn, int lim, int *outside)
{
    const int keys = bn > 128 ? 128 : bn;
    for (int tid = 0; tid < 128; ++tid) {
        int c, t, col0, cols;
        fmhai_vt8_lane128(tid, keys, hd, &c, &t, &col0, &cols);
        for (int ci = 0; ci < cols; ++ci) {
            const int col = col0 + (ci + c) % cols;
            uint32_t w[4][4];
            load_word(w, 0u, bn, col, c, t);
            const uint32_t s0 = fmhai_vt8_s0_128(0u, col, c, t);
            for (int m = 0; m < 4; ++m) {
                uint32_t o[4];
                word(o, w, m, 0x5410u, 0x7632u);
                for (int b = 0; b < 4; ++b) st32(fmhai_vt8_st128(s0, m, b), o[b], lim, outside);
            }
        }
    }
    if (bn <= 128) return;
    for (int tid = 0; tid < 128; ++tid) {
        int c, t, h, col0, cols;
        fmhai_vt8_lane64(tid, hd, &c, &t, &h, &col0, &cols);
        const uint32_t sel_a = h ? 0x7632u : 0x5410u, sel_b = h ? 0x5410u : 0x7632u;
        for (int ci = 0; ci < cols; ++ci) {
            const int col = col0 + 8 * ci;
            uint32_t w[4][4];
            load_word(w, 128u * 128u, bn, col, c, t);
            const uint32_t s1 = fmhai_vt8_s1_64((uint32_t)(vr * 128), col, c, t);
            for (int m = 0; m < 4; ++m) {
                uint32_t o[4];
                word(o, w, m, sel_a, sel_b);
                for (int b = 0; b < 4; ++b) st32(fmhai_vt8_st64(s1, h, m, b), o[b], lim, outside);
            }
        }
    }
}

/* the wgmma K-major operand read: element (row n, byte kb of the k-step)
 * of a descriptor starting at `start` with the given swizzle width */
static int desc_read(int start, int width, int n, int kb)
{
    const int a = start + (n / 8) * (8 * width) + (n % 8) * width + kb;
    return width == 128 ? a ^ (((a >> 7) & 7) << 4) : a ^ (((a >> 7) & 3) << 4);
}

/* the key P's fragment holds at byte k of k-step kq: thread t's register r
 * (wgmma e4m3 A: k = 16 (r / 2) + 4t + e) packs acc_s elements x[0], x[1],
 * x[4], x[5] from x = acc_s + 4 (4 kq + 2 (r / 2)) + 2 (r % 2), element
 * 4 nt + 2 hf + e being column 8 nt + 2t + e */
static int p_key(int kq, int k)
{
    const int r2 = k / 16, t = (k % 16) / 4, e = k % 4;
    const int idx = 4 * (4 * kq + 2 * r2) + (e & 1) + 4 * (e >> 1);
    return 8 * (idx / 4) + 2 * t + idx % 2;
}

/* vr > hd: the stage's ones rows (the hdim-128 rows' P sums,
 * FMHAI_FWD90_VFOLD) after V^T's in each panel, which the descriptors of
 * an m64n{vr} product read as rows hd..vr - 1 */
static void run(int hd, int vr, int bn)
{
    char name[160];
    const int lim = vr * FMHAI_VT8_ROWB(bn);
    int outside = 0;
    memset(g_stage, 0, sizeof(g_stage));
    for (int k = 0; k < bn; ++k)
        for (int dd = 0; dd < hd; ++dd) g_stage[stage_off(k, dd, bn)] = vval(k, dd);
    memset(g_vt, 0, sizeof(g_vt));
    memset(g_writes, 0, sizeof(g_writes));
    transpose(hd, vr, bn, lim, &outside);

    /* the bytes of the tile's (d row, key) pairs (a 64-key tile fills half
     * of each 128-byte row, its chunks swizzled over the whole row) */
    static unsigned char used[2 * MAXB];
    int once = 1, empty_ok = 1, n_used = 0;
    memset(used, 0, sizeof(used));
    for (int key = 0; key < bn; ++key)
        for (int dd = 0; dd < hd; ++dd) used[fmhai_vt8_off(dd, key, vr)] = 1;
    for (int a = 0; a < lim; ++a) {
        n_used += used[a];
        if (used[a] && g_writes[a] != 1) once = 0;
        if (!used[a] && g_writes[a] != 0) empty_ok = 0;
    }
    if (n_used != hd * bn) once = 0;
    snprintf(name, sizeof(name), "hd %d vr %d bn %d: every V^T byte written once, nothing outside", hd, vr, bn);
    CHECK(once && empty_ok && outside == 0, name);
    /* the ones rows (e4m3 1.0), as the load warpgroup writes them */
    for (int r = hd; r < vr; ++r) {
        memset(g_vt + r * 128, 0x38, 128);
        if (bn > 128) memset(g_vt + vr * 128 + r * 64, 0x38, 64);
    }

    int off_ok = 1, rd_ok = 1, perm_ok = 1;
    for (int key = 0; key < bn; ++key)
        for (int dd = 0; dd < hd; ++dd)
            if (g_vt[fmhai_vt8_off(dd, key, vr)] != vval(key, dd)) off_ok = 0;
    snprintf(name, sizeof(name), "hd %d vr %d bn %d: fmhai_vt8_off finds what the transpose wrote", hd, vr, bn);
    CHECK(off_ok, name);

    int seen[192];
    memset(seen, 0, sizeof(seen));
    for (int kq = 0; kq < bn / 32; ++kq)
        for (int k = 0; k < 32; ++k) {
            const int key = p_key(kq, k);
            if (key < 32 * kq || key >= 32 * kq + 32) perm_ok = 0;
            else ++seen[key];
            if (fmhai_vt8_kpos(key) != 32 * kq + k) perm_ok = 0;
            const int start = fmhai_vt8_kstep_start(kq, vr), width = fmhai_vt8_kstep_width(kq);
            for (int n = 0; n < vr; ++n)
                if (g_vt[desc_read(start, width, n, k)] != (n < hd ? vval(key, n) : 0x38)) rd_ok = 0;
        }
    for (int key = 0; key < bn; ++key)
        if (seen[key] != 1) perm_ok = 0;
    snprintf(name, sizeof(name), "hd %d vr %d bn %d: P's key order is a permutation of each k-step, kpos its inverse",
             hd, vr, bn);
    CHECK(perm_ok, name);
    snprintf(name, sizeof(name), "hd %d vr %d bn %d: the P V descriptors read V[key][d] for P's key of every byte "
             "(and 1.0 in the ones rows)", hd, vr, bn);
    CHECK(rd_ok, name);
}

/* the 64-byte panel's accesses of one warp: the loads in phases of 8
 * lanes on 8 distinct 16-byte bank groups, each store on 32 banks */
static void banks(int hd)
{
    char name[160];
    int ld_ok = 1, st_ok = 1;
    for (int w = 0; w < 4; ++w) {
        int c[32], t[32], h[32], col0[32], cols = 0;
        for (int l = 0; l < 32; ++l) fmhai_vt8_lane64(32 * w + l, hd, &c[l], &t[l], &h[l], &col0[l], &cols);
        for (int ci = 0; ci < cols; ++ci) {
            for (int e = 0; e < 4; ++e)
                for (int ph = 0; ph < 4; ++ph) {
                    int used = 0;
                    for (int l = 8 * ph; l < 8 * ph + 8; ++l) {
                        const uint32_t a = fmhai_vt8_ld(fmhai_vt8_srow(128u * 128u, c[l], t[l]), 192, col0[l] + 8 * ci, t[l], e);
                        const int g = (int)((a >> 4) & 7);
                        if (used & (1 << g)) ld_ok = 0;
                        used |= 1 << g;
                    }
                }
            for (int m = 0; m < 4; ++m)
                for (int b = 0; b < 4; ++b) {
                    uint32_t used = 0;
                    for (int l = 0; l < 32; ++l) {
                        const uint32_t s1 = fmhai_vt8_s1_64((uint32_t)(hd * 128), col0[l] + 8 * ci, c[l], t[l]);
                        const int bank = (int)((fmhai_vt8_st64(s1, h[l], m, b) >> 2) & 31);
                        if (used & (1u << bank)) st_ok = 0;
                        used |= 1u << bank;
                    }
                }
        }
    }
    snprintf(name, sizeof(name), "hd %d: 64-byte panel loads, 8 bank groups a phase", hd);
    CHECK(ld_ok, name);
    snprintf(name, sizeof(name), "hd %d: 64-byte panel stores, 32 banks an instruction", hd);
    CHECK(st_ok, name);
}

/* the same for the 128-byte panel of a 128-key tile (or a 192-key one's
 * first 128 keys: the staging tile's rows 192 apart per column block) */
static void banks128(int hd, int srows)
{
    char name[160];
    int ld_ok = 1, st_ok = 1;
    for (int w = 0; w < 4; ++w) {
        int c[32], t[32], col0[32], cols = 0;
        for (int l = 0; l < 32; ++l) fmhai_vt8_lane128(32 * w + l, 128, hd, &c[l], &t[l], &col0[l], &cols);
        for (int ci = 0; ci < cols; ++ci) {
            int col[32];
            for (int l = 0; l < 32; ++l) col[l] = col0[l] + (ci + c[l]) % cols;
            for (int e = 0; e < 4; ++e)
                for (int ph = 0; ph < 4; ++ph) {
                    int used = 0;
                    for (int l = 8 * ph; l < 8 * ph + 8; ++l) {
                        const int g = (int)((fmhai_vt8_ld(fmhai_vt8_srow(0u, c[l], t[l]), srows, col[l], t[l], e) >> 4) & 7);
                        if (used & (1 << g)) ld_ok = 0;
                        used |= 1 << g;
                    }
                }
            for (int m = 0; m < 4; ++m)
                for (int b = 0; b < 4; ++b) {
                    uint32_t used = 0;
                    for (int l = 0; l < 32; ++l) {
                        const uint32_t a = fmhai_vt8_st128(fmhai_vt8_s0_128(0u, col[l], c[l], t[l]), m, b);
                        const int bank = (int)((a >> 2) & 31);
                        if (used & (1u << bank)) st_ok = 0;
                        used |= 1u << bank;
                    }
                }
        }
    }
    snprintf(name, sizeof(name), "hd %d, %d staging rows: 128-byte panel loads, 8 bank groups a phase", hd, srows);
    CHECK(ld_ok, name);
    snprintf(name, sizeof(name), "hd %d, %d staging rows: 128-byte panel stores, 32 banks an instruction", hd, srows);
    CHECK(st_ok, name);
}

/* e4m3 (OCP e4m3fn) code c >= 0 as a value; 0x7f is NaN (-1 here) */
static double e4m3_value(int c)
{
    const int e = (c >> 3) & 15, m = c & 7;
    if (c == 0x7f) return -1.0;
    return e ? (1.0 + m / 8.0) * (double)(1u << e) / 128.0 : m / 8.0 / 64.0;
}

/* FMHAI_P8_BIG_ADD / _BITS: a code's bit in (word + ADD) & BITS is set
 * exactly where it stands for 2^8 or more (or NaN), for each of the four
 * bytes of a word whatever the other three hold (no carry between them) */
static void p8_big(void)
{
    int ok = 1, carry_ok = 1;
    for (int c = 0; c < 128; ++c) {
        const double v = e4m3_value(c);
        const int want = v < 0.0 || v >= 256.0;
        for (int byte = 0; byte < 4; ++byte) {
            for (int other = 0; other < 128; other += 9) {   /* the other bytes: a spread of codes */
                uint32_t w = 0u;
                for (int k = 0; k < 4; ++k) w |= (uint32_t)(k == byte ? c : (other + 37 * k) % 128) << (8 * k);
                const uint32_t got = (w + FMHAI_P8_BIG_ADD) & FMHAI_P8_BIG_BITS;
                if (((got >> (8 * byte + 7)) & 1u) != (uint32_t)want) ok = 0;
                for (int k = 0; k < 4; ++k) {   /* every byte's bit is its own code's */
                    const int ck = (int)((w >> (8 * k)) & 0x7fu);
                    const double vk = e4m3_value(ck);
                    if (((got >> (8 * k + 7)) & 1u) != (uint32_t)(vk < 0.0 || vk >= 256.0)) carry_ok = 0;
                }
            }
        }
    }
    CHECK(ok && e4m3_value(0x78) == 256.0 && e4m3_value(0x77) == 240.0 && e4m3_value(0x7e) == 448.0,
          "packed P: (word + FMHAI_P8_BIG_ADD) & FMHAI_P8_BIG_BITS marks the codes of 2^8 and more");
    CHECK(carry_ok, "packed P: no byte's test reaches into the next byte");
}

int main(void)
{
    CHECK(FMHAI_VT8_ROWB(64) == 128 && FMHAI_VT8_ROWB(128) == 128 && FMHAI_VT8_ROWB(192) == 192,
          "V^T bytes a d row: 128 up to 128 keys, 192 at 192");
    run(128, 128, 64);
    run(128, 128, 128);
    run(128, 128, 192);
    run(256, 256, 64);
    run(128, 136, 128);   /* FMHAI_FWD90_VFOLD */
    run(128, 136, 192);
    banks(128);
    banks128(128, 128);
    banks128(128, 192);
    p8_big();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
