/*
 * test_fwd_fp8.cu - GPU tests of the FP8 (e4m3) forward on the Hopper wgmma
 * pipeline against a CPU reference on the same quantised inputs.
 *
 * Q, K and V are random e4m3 codes (never zero, magnitudes 2^-3..7.5, random
 * signs), their row padding the e4m3 NaN 0x7F; per-tensor descales 0.5 / 0.37
 * / 1.9, none (NULL: 1), or one per (batch entry, KV head) in [0.3, 2)
 * (descale_batch_stride nhead_k + 1, descale_head_stride 1: a padded
 * [batch, nhead_k] table, so a stride mix-up reads the wrong value). O is
 * bf16, poisoned before the run (with padded rows whose padding must stay
 * poisoned); the LSE buffer too.
 *
 * The reference. The kernel computes S = Q K^T exactly in e4m3 products, the
 * online softmax in fp32, and quantises each key tile's P (values in [0, 1],
 * relative to the running row maximum at that tile) to e4m3 for P V; the row
 * sum uses the unquantised P. The reference (double precision on the
 * dequantised inputs, stored * descale) does the same arithmetic in the same
 * order: the kernel's key tiles (tile_n keys) from the last visible one down,
 * the running maximum (exact; p8_lazy would model a lazy one),
 * P rounded to e4m3 (round to nearest even, as cvt.rn), rescaled by
 * exp(m_tile - m_final). What is left between the two is fp32 rounding of the
 * scores and of exp2, the tensor cores' accumulation order and the bf16
 * output, and a rare P that lands on the other side of an e4m3 rounding
 * boundary. Stated bounds:
 *   O    rel-L2 <= 1e-2 (the bf16 tolerance of every forward test), and
 *        every element within 2^-4 * max|V| of the reference (one e4m3 step of
 *        the largest possible weight, 2^-4 of the row sum, on the largest V)
 *   LSE  within 2e-3 + 2^-11 * max_j scale * sum_c |q_c k_jc| (the fp32
 *        accumulation of the e4m3 products)
 * Without the P rounding in the reference the rel-L2 of a correct kernel is
 * about 3e-2 (P's 3-bit mantissa), so a kernel whose P and V^T keys disagree
 * (a wrong key order in the transposed V) fails the rel-L2 by two orders.
 * Fully masked rows: exactly O = 0 and LSE = -inf.
 * Peak problems (logits spread over ~100, nearly one-hot rows) also print
 * the rel-L2 against the unrounded softmax: with the exact max a row's top
 * key has P = 1, exact in e4m3; a lazy max (P up to 2^8) put its rounding
 * on the whole row and failed them (1.7e-2).
 *
 * Also: the plan names the wgmma pipeline and the smallest fitting fp8 kernel
 * (d <= 128: the 128 kernel, padded); FP8 bad input (head dim not a multiple
 * of 16, descales on a bf16 call, misaligned descale, an fp8 stride not a
 * multiple of 16, a negative descale stride, descale strides on a bf16
 * call) gives the documented status; a set without fp8 rows says
 * FMHA_ERR_NO_KERNEL.
 *
 * Run: build/tests/test_fwd_fp8 [--quick] [--filter SUBSTR] [--list]
 * (sm_90a only; on another device every problem reports FAIL "no kernel", so
 * the suite runs on Hopper; without a GPU: SKIP.)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmha_tile.h"
#include "test_util.h"
#include "../ref/fmha_ref.h"

DECL_FMHA_KERNEL_SET(fp8_set, FMHA_DEFAULT_FWD_FP8_SET)
#define BF16_ONLY(X) X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(bf16_only, BF16_ONLY)

#define MAXB 4

typedef struct cfg {
    char name[128];
    int group, batch, hq, hk, d;
    int sq, sk;                  /* batch mode */
    int lq[MAXB], lk[MAXB];      /* group mode */
    fmha_mask_type mask;
    int wl, wr;
    float cap;
    int alibi, lse, quick;
    int descale;                 /* 0 none, 1 per tensor, 2 per (batch entry, KV head) */
    int peak;                    /* logits spread over ~100: nearly one-hot rows */
    int vk;                      /* V given K-major (v_kmajor): 1 written by fmha_fp8_v_kmajor (dense),
                                    2 built here by fmha_fp8_v_kmajor_pos with padded strides */
} cfg;

#define MAXCFG 64
static cfg g_cfgs[MAXCFG];
static int g_n;

static void add(cfg c)
{
    int n = snprintf(c.name, sizeof(c.name), "fp8_%s_b%d_h%d_%d_d%d", c.group ? "group" : "batch", c.batch, c.hq,
                     c.hk, c.d);
    if (!c.group) n += snprintf(c.name + n, sizeof(c.name) - n, "_q%d_k%d", c.sq, c.sk);
    if (c.mask != FMHA_MASK_NONE)
        n += snprintf(c.name + n, sizeof(c.name) - n, "_%s%d_%d", c.mask == FMHA_MASK_TOP_LEFT ? "tl" : "br", c.wl,
                      c.wr);
    if (c.cap > 0) n += snprintf(c.name + n, sizeof(c.name) - n, "_cap");
    if (c.alibi) n += snprintf(c.name + n, sizeof(c.name) - n, "_alibi");
    if (c.lse) n += snprintf(c.name + n, sizeof(c.name) - n, "_lse");
    if (c.peak) n += snprintf(c.name + n, sizeof(c.name) - n, "_peak");
    if (c.vk) n += snprintf(c.name + n, sizeof(c.name) - n, c.vk == 1 ? "_vkmajor" : "_vkmajor_strided");
    snprintf(c.name + n, sizeof(c.name) - n, "%s",
             c.descale == 2 ? "_headdescale" : c.descale ? "_descale" : "_nodescale");
    if (g_n < MAXCFG) g_cfgs[g_n++] = c;
}

static cfg base(int b, int hq, int hk, int sq, int sk, int d)
{
    cfg c;
    memset(&c, 0, sizeof(c));
    c.batch = b; c.hq = hq; c.hk = hk; c.sq = sq; c.sk = sk; c.d = d;
    c.mask = FMHA_MASK_NONE; c.wl = c.wr = -1; c.lse = 1; c.descale = 1;
    return c;
}

static void build(void)
{
    cfg c;
    c = base(2, 4, 2, 300, 517, 128); c.quick = 1; add(c);
    c = base(1, 2, 2, 1024, 1024, 128); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.quick = 1; add(c);
    c = base(2, 4, 4, 257, 700, 256); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.quick = 1; add(c);
    c = base(1, 4, 1, 200, 333, 256); add(c);
    c = base(2, 2, 2, 190, 260, 64); c.quick = 1; add(c);                      /* padded to the 128 kernel */
    c = base(1, 2, 1, 129, 129, 80); c.mask = FMHA_MASK_TOP_LEFT; c.wr = 0; add(c);
    c = base(1, 2, 2, 300, 100, 128); c.mask = FMHA_MASK_TOP_LEFT; c.wr = 0; c.quick = 1; add(c); /* sq > sk */
    c = base(1, 2, 2, 400, 900, 128); c.mask = FMHA_MASK_TOP_LEFT; c.wl = 200; c.wr = 30; add(c); /* window */
    c = base(1, 2, 2, 500, 100, 128); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wl = 10; c.wr = 0; add(c); /* empty rows */
    c = base(2, 2, 2, 333, 2100, 128); c.cap = 30.f; c.quick = 1; add(c);
    c = base(1, 4, 2, 256, 640, 128); c.alibi = 1; c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; add(c);
    c = base(2, 2, 2, 160, 400, 256); c.cap = 20.f; c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; add(c);
    c = base(1, 2, 2, 1, 1, 128); add(c);
    c = base(1, 2, 2, 77, 0, 128); add(c);                                     /* no keys */
    c = base(1, 8, 2, 4096, 4096, 128); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.descale = 0; c.lse = 0; add(c);
    c = base(1, 2, 2, 700, 3000, 128); c.descale = 0; add(c);
    /* hdim 128's 192-key tiles: one partial tile (keys 128..190 in V^T's
     * 64-byte panel, partly zero rows), and whole tiles on a causal diagonal
     * that crosses 128-row query blocks mid-tile */
    c = base(1, 2, 2, 150, 191, 128); add(c);
    c = base(1, 4, 2, 1152, 1152, 128); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.quick = 1; add(c);
    /* hdim 256's two-stage ring of 128-key tiles (K and V^T handed over
     * apart): one partial and one whole tile (the ring's ends meet), and
     * two whole tiles under the causal mask */
    c = base(1, 2, 2, 100, 200, 256); add(c);
    c = base(1, 2, 1, 130, 256, 256); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; add(c);
    /* nearly one-hot rows (logits spread over ~100): the row's output is
     * its top key's V times that key's P rounded to e4m3, over its exact P */
    c = base(1, 4, 2, 200, 1500, 256); c.peak = 1; add(c);
    c = base(1, 4, 2, 200, 1500, 128); c.peak = 1; add(c);
    /* descales per (batch entry, KV head), GQA so query heads share them */
    c = base(3, 8, 2, 260, 700, 128); c.descale = 2; c.quick = 1; add(c);
    c = base(2, 4, 4, 200, 450, 256); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.descale = 2; add(c);
    /* V given K-major (hdim 256: V^T tiles by TMA into three stages, no
     * transpose): one partial and one whole tile, the stages' wrap over
     * 6 and 12 tiles, causal, a window, soft cap (the P V wait of the
     * rows without the overlap), per-head descales, nearly one-hot rows, no
     * keys; written by fmha_fp8_v_kmajor (1) or by hand with padded strides (2) */
    c = base(1, 2, 2, 100, 200, 256); c.vk = 1; c.quick = 1; add(c);
    c = base(2, 4, 4, 257, 700, 256); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.vk = 1; add(c);
    c = base(1, 4, 2, 200, 1500, 256); c.peak = 1; c.vk = 1; add(c);
    c = base(1, 2, 2, 77, 0, 256); c.vk = 1; add(c);
    c = base(2, 4, 2, 300, 517, 256); c.mask = FMHA_MASK_TOP_LEFT; c.wl = 150; c.wr = 40; c.descale = 2; c.vk = 2;
    add(c);
    c = base(1, 2, 2, 600, 1000, 256); c.cap = 20.f; c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.vk = 2; add(c);
    /* and without a mask: one partial key tile, three (the prologue's V^T
     * stages exactly), 8 tiles over 4 query tiles with padded strides,
     * soft cap with ALiBi */
    c = base(1, 2, 2, 256, 100, 256); c.vk = 1; c.quick = 1; add(c);
    c = base(1, 2, 1, 250, 384, 256); c.vk = 1; add(c);
    c = base(2, 4, 2, 512, 1000, 256); c.vk = 2; c.quick = 1; add(c);
    c = base(1, 4, 2, 256, 700, 256); c.cap = 20.f; c.alibi = 1; c.vk = 1; add(c);
    /* and hdim 128's 192-key tiles (keys 128..191 by a second map into the
     * 64-byte panel): one partial tile, 6 causal tiles over 128-row query
     * blocks, a window over 517 keys with per-head descales, nearly one-hot
     * rows, no keys, and causal query blocks above the keys (no key tile:
     * nothing copied, zeros out) */
    c = base(1, 2, 2, 150, 191, 128); c.vk = 2; c.quick = 1; add(c);
    c = base(1, 4, 2, 1152, 1152, 128); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.vk = 1; add(c);
    c = base(3, 8, 2, 260, 517, 128); c.mask = FMHA_MASK_TOP_LEFT; c.wl = 100; c.wr = 50; c.descale = 2; c.vk = 1;
    add(c);
    c = base(1, 4, 2, 200, 1500, 128); c.peak = 1; c.vk = 2; add(c);
    c = base(1, 2, 2, 77, 0, 128); c.vk = 1; add(c);
    c = base(2, 4, 2, 130, 292, 128); c.vk = 1; c.quick = 1; add(c);   /* a partial tile of 100 keys */
    c = base(1, 2, 2, 600, 200, 128); c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.vk = 2; add(c);
    c.d = 256; add(c);
    {   /* group mode: lengths 0 and 1, a prefix longer than the queries */
        static const int lq[4] = { 0, 1, 130, 257 }, lk[4] = { 5, 1, 600, 257 };
        c = base(4, 4, 2, 0, 0, 128); c.group = 1; memcpy(c.lq, lq, sizeof(lq)); memcpy(c.lk, lk, sizeof(lk));
        c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wr = 0; c.quick = 1; add(c);
        c.descale = 2; add(c);
        c.d = 256; c.mask = FMHA_MASK_NONE; c.wr = -1; c.descale = 1; add(c);
    }
}

static const char *cname(int i) { return g_cfgs[i].name; }
static int cquick(int i) { return g_cfgs[i].quick; }
static double cwork(int i)
{
    const cfg *c = &g_cfgs[i];
    double w = 0;
    int b;
    for (b = 0; b < c->batch; b++) w += (double)(c->group ? c->lq[b] : c->sq) * (c->group ? c->lk[b] : c->sk);
    return w * c->hq * c->d * 2;
}

/* e4m3 code of magnitude 2^-3..7.5 (exponent fields 4..9), never zero */
static uint8_t rand_code(fmha_ref_rng *r) { return fmha_ref_rng_e4m3(r, 4, 9); }

static float bf16f(uint16_t u) { return fmha_ref_bf16_to_f32(u); }

/* Reference row with the kernel's P rounding (see the header):
 * fmha_ref_fwd_row_p8 (per-tensor descales: no per-key V scale), as floats.
 * acc: hdim_v doubles of scratch. */
static void ref_row(const fmha_ref_fwd *p, int b, int h, int i, int TILE_N, double *sc, double *acc, float *o,
                    float *lse, double *sabs)
{
    double l;
    int c;
    fmha_ref_fwd_row_p8(p, b, h, i, TILE_N, sc, acc, &l, sabs);
    for (c = 0; c < p->hdim_v; c++) o[c] = (float)acc[c];
    *lse = (float)l;
}

static void run(const cfg *c, cudaStream_t st, uint64_t seed)
{
    fmha_ref_rng rng = fmha_ref_rng_make(seed);
    const int d = c->d, ld = d + 16, ldo = d + 8;   /* padded rows: 16 bytes of fp8, 16 of bf16 */
    int32_t ssq[MAXB + 1] = { 0 }, ssk[MAXB + 1] = { 0 };
    int b, h, i, e, tq = 0, tk = 0, maxq = 0, rows_q, rows_k;
    /* descales: per tensor ds[0..2]; per (b, hk): ds[e * DSE + b * DSB + hk] */
    const int DSB = c->hk + 1, DSE = MAXB * DSB;
    float ds[3 * MAXB * (16 + 1)], vamp = 0;
    ds[0] = 0.5f; ds[1] = 0.37f; ds[2] = 1.9f;
    if (c->descale == 2)
        for (e = 0; e < 3 * DSE; e++) ds[e] = fmha_ref_rng_uniform(&rng, 0.3f, 2.f);   /* hk <= 16 */
    for (b = 0; b < c->batch; b++) {
        const int lq = c->group ? c->lq[b] : c->sq, lk = c->group ? c->lk[b] : c->sk;
        ssq[b + 1] = ssq[b] + lq; ssk[b + 1] = ssk[b] + lk;
        if (lq > maxq) maxq = lq;
    }
    tq = ssq[c->batch]; tk = ssk[c->batch];
    rows_q = c->group ? tq : c->batch * c->sq;
    rows_k = c->group ? tk : c->batch * c->sk;
    /* layout [rows][heads][ld]: row stride heads * ld, head stride ld */
    const size_t nq = (size_t)rows_q * c->hq * ld, nk = (size_t)rows_k * c->hk * ld, no = (size_t)rows_q * c->hq * ldo;
    uint8_t *hq8 = (uint8_t *)tu_hmalloc(nq + 1), *hk8 = (uint8_t *)tu_hmalloc(nk + 1), *hv8 = (uint8_t *)tu_hmalloc(nk + 1);
    float *fq = (float *)tu_hmalloc(4 * (nq + 1)), *fk = (float *)tu_hmalloc(4 * (nk + 1)), *fv = (float *)tu_hmalloc(4 * (nk + 1));
    float *ro = (float *)tu_hmalloc(4 * (no + 1));
    uint16_t *go = (uint16_t *)tu_hmalloc(2 * (no + 1));
    float *gl = (float *)tu_hmalloc(4 * ((size_t)rows_q * c->hq + 1)), *slopes = (float *)tu_hmalloc(4 * c->hq);
    for (e = 0; e < 3; e++) {
        uint8_t *h8 = e == 0 ? hq8 : e == 1 ? hk8 : hv8;
        float *f = e == 0 ? fq : e == 1 ? fk : fv;
        const size_t n = e == 0 ? nq : nk;
        const int heads = e == 0 ? c->hq : c->hk;
        const int32_t *ss = e == 0 ? ssq : ssk;
        const float s1 = c->descale == 1 ? ds[e] : 1.f;
        size_t x;
        for (x = 0; x < n; x++) {
            float s = s1;
            if (c->descale == 2) {   /* this element's (batch entry, KV head) */
                const int row = (int)(x / ((size_t)heads * ld)), hh = (int)(x / ld) % heads;
                int bb = 0;
                if (c->group) while (bb + 1 < c->batch && row >= ss[bb + 1]) bb++;
                else bb = row / (e == 0 ? c->sq : c->sk);
                s = ds[e * DSE + bb * DSB + (e == 0 ? hh / (c->hq / c->hk) : hh)];
            }
            h8[x] = (int)(x % ld) < d ? rand_code(&rng) : 0x7F;
            f[x] = fmha_ref_e4m3_to_f32(h8[x]) * s;
            if (e == 2 && (int)(x % ld) < d && fabsf(f[x]) > vamp) vamp = fabsf(f[x]);
        }
    }
    for (h = 0; h < c->hq; h++) slopes[h] = 0.05f + 0.1f * h;

    fmha_ref_fwd rp;
    memset(&rp, 0, sizeof(rp));
    rp.is_group_mode = c->group; rp.batch = c->batch; rp.nhead_q = c->hq; rp.nhead_k = c->hk;
    rp.seqlen_q = c->sq; rp.seqlen_k = c->sk; rp.seqstart_q = ssq; rp.seqstart_k = ssk;
    rp.hdim_q = rp.hdim_v = d; rp.q = fq; rp.k = fk; rp.v = fv;
    rp.stride_q = (int64_t)c->hq * ld; rp.nhead_stride_q = ld; rp.batch_stride_q = (int64_t)c->sq * c->hq * ld;
    rp.stride_k = rp.stride_v = (int64_t)c->hk * ld; rp.nhead_stride_k = rp.nhead_stride_v = ld;
    rp.batch_stride_k = rp.batch_stride_v = (int64_t)c->sk * c->hk * ld;
    rp.stride_o = (int64_t)c->hq * ldo; rp.nhead_stride_o = ldo; rp.batch_stride_o = (int64_t)c->sq * c->hq * ldo;
    rp.nhead_stride_lse = c->group ? tq : c->sq; rp.batch_stride_lse = (int64_t)c->hq * c->sq;
    rp.scale = (c->peak ? 8.f : 0.25f) / sqrtf((float)d);   /* scores of order 1-10 (peak: ~100) */
    rp.logits_soft_cap = c->cap;
    rp.alibi_slopes = c->alibi ? slopes : 0;
    rp.mask_type = (int)c->mask; rp.window_left = c->wl; rp.window_right = c->wr;

    void *dq = tu_dmalloc(nq + 16), *dk = tu_dmalloc(nk + 16), *dv = tu_dmalloc(nk + 16);
    void *dout = tu_dmalloc(2 * no + 16), *dl = tu_dmalloc(4 * ((size_t)rows_q * c->hq) + 16);
    void *dss = tu_dmalloc(8 * (MAXB + 1)), *dds = tu_dmalloc(sizeof(ds)), *dsl = tu_dmalloc(4 * c->hq);
    int32_t *dssq = (int32_t *)dss, *dssk = dssq + MAXB + 1;
    tu_upload(dq, hq8, nq); tu_upload(dk, hk8, nk); tu_upload(dv, hv8, nk);
    tu_upload(dssq, ssq, 4 * (MAXB + 1)); tu_upload(dssk, ssk, 4 * (MAXB + 1));
    tu_upload(dds, ds, sizeof(ds)); tu_upload(dsl, slopes, 4 * c->hq);
    tu_poison16(dout, no, TU_POISON_OUT16);
    tu_poison32(dl, (size_t)rows_q * c->hq, TU_POISON_LSE);

    fmha_fwd_args a;
    memset(&a, 0, sizeof(a));
    a.dtype = FMHA_DTYPE_FP8; a.is_group_mode = c->group; a.batch = c->batch; a.nhead_q = c->hq; a.nhead_k = c->hk;
    a.seqlen_q = c->sq; a.seqlen_k = c->sk; a.max_seqlen_q = maxq; a.hdim_q = a.hdim_v = d;
    a.q = dq; a.k = dk; a.v = dv; a.o = dout; a.lse = c->lse ? (float *)dl : 0;
    a.seqstart_q = c->group ? dssq : 0; a.seqstart_k = c->group ? dssk : 0;
    a.stride_q = rp.stride_q; a.nhead_stride_q = rp.nhead_stride_q; a.batch_stride_q = rp.batch_stride_q;
    a.stride_k = rp.stride_k; a.nhead_stride_k = rp.nhead_stride_k; a.batch_stride_k = rp.batch_stride_k;
    a.stride_v = rp.stride_v; a.nhead_stride_v = rp.nhead_stride_v; a.batch_stride_v = rp.batch_stride_v;
    a.stride_o = rp.stride_o; a.nhead_stride_o = rp.nhead_stride_o; a.batch_stride_o = rp.batch_stride_o;
    a.nhead_stride_lse = rp.nhead_stride_lse; a.batch_stride_lse = rp.batch_stride_lse;
    a.scale = rp.scale; a.logits_soft_cap = c->cap;
    a.alibi_slopes = c->alibi ? (const float *)dsl : 0;
    a.mask_type = c->mask; a.window_left = c->wl; a.window_right = c->wr;
    if (c->descale == 1) { a.q_descale = (const float *)dds; a.k_descale = a.q_descale + 1; a.v_descale = a.q_descale + 2; }
    if (c->descale == 2) {
        a.q_descale = (const float *)dds; a.k_descale = a.q_descale + DSE; a.v_descale = a.q_descale + 2 * DSE;
        a.descale_batch_stride = DSB; a.descale_head_stride = 1;
    }

    /* V given K-major: [b][hk][d][keys + pad] */
    const int vkeys = fmha_fp8_v_kmajor_keys(c->sk), vrow = c->vk == 2 ? vkeys + 48 : vkeys;
    const int64_t vhead = (int64_t)d * vrow + (c->vk == 2 ? 32 : 0), vbatch = (int64_t)c->hk * vhead + (c->vk == 2 ? 16 : 0);
    const size_t nvt = c->vk ? (size_t)c->batch * vbatch + 16 : 0;
    void *dvt = c->vk ? tu_dmalloc(nvt) : 0;
    const char *tma_env = getenv("FMHA_TILE_TMA");
    const int no_tma = c->vk && tma_env && tma_env[0] == '0';
    tu_current = c->name;
    if (c->vk) {   /* padding NaN (0x7F): keys past seqlen_k must come out zero, stride padding never read */
        uint8_t *hvt = (uint8_t *)tu_hmalloc(nvt);
        memset(hvt, 0x7F, nvt);
        for (b = 0; b < c->batch; b++)
            for (h = 0; h < c->hk; h++)
                for (e = 0; e < d; e++)
                    for (i = 0; i < vkeys; i++)
                        hvt[b * vbatch + h * vhead + (int64_t)e * vrow + fmha_fp8_v_kmajor_pos(i)] =
                            i < c->sk ? hv8[((size_t)b * c->sk + i) * c->hk * ld + (size_t)h * ld + e] : 0;
        if (c->vk == 2) {
            tu_upload(dvt, hvt, nvt);
        } else {
            fmha_status sv;
            TU_CUDA(cudaMemset(dvt, 0x7F, nvt));   /* NaN: the kernel must write every byte of the layout */
            sv = fmha_fp8_v_kmajor(&a, dvt, st);
            if (sv != FMHA_OK) tu_fail(c->name, "fp8_v_kmajor: %d %s", (int)sv, fmha_last_error());
            else {   /* its bytes equal the layout's definition */
                uint8_t *got = (uint8_t *)tu_hmalloc(nvt);
                size_t x, bad = 0;
                TU_CUDA(cudaStreamSynchronize(st));
                tu_download(got, dvt, nvt);
                for (x = 0; x + 16 < nvt; x++) bad += got[x] != hvt[x];
                if (bad) tu_fail(c->name, "fp8_v_kmajor: %zu bytes differ from the layout", bad);
                free(got);
            }
        }
        free(hvt);
        a.v = dvt; a.v_kmajor = 1;
        a.stride_v = vrow; a.nhead_stride_v = vhead; a.batch_stride_v = vbatch;
    }
    fmha_fwd_plan plan;
    fmha_status s = fmha_fwd_check(&fp8_set, &a, &plan);
    if (no_tma) {   /* V^T needs tensor maps: refused, nothing launched */
        if (s == FMHA_ERR_UNSUPPORTED) tu_pass(c->name);
        else tu_fail(c->name, "v_kmajor without TMA: status %d, want FMHA_ERR_UNSUPPORTED", (int)s);
        s = FMHA_ERR_UNSUPPORTED;
    } else if (s != FMHA_OK) {
        tu_fail(c->name, "check: %d %s", (int)s, fmha_last_error());
    } else {
        const int want_hd = d <= 128 ? 128 : 256;
        if (plan.kernel->hdim != want_hd || strcmp(plan.kernel->pipeline, "wgmma") || !strstr(plan.kernel->name, "_fp8_") ||
            strncmp(plan.why, "fast pipeline", 13))
            tu_fail(c->name, "plan: %s (hdim %d, want %d) why: %s", plan.kernel->name, plan.kernel->hdim, want_hd,
                    plan.why);
        s = fmha_fwd(&fp8_set, &a, st);
        if (s != FMHA_OK) tu_fail(c->name, "fwd: %d %s", (int)s, fmha_last_error());
    }
    TU_CUDA(cudaStreamSynchronize(st));
    TU_CUDA(cudaGetLastError());
    if (s == FMHA_OK) {
        double *sc = (double *)tu_hmalloc(sizeof(double) * ((tk > 0 ? tk : 1) + d)), *acc = sc + (tk > 0 ? tk : 1);
        fmha_ref_err err, err_exact;   /* err_exact (peak rows): against the unrounded softmax, printed */
        double max_abs = 0, lse_err = 0, lse_tol_worst = 0;
        int bad_pad = 0, nonfinite = 0, bad_empty = 0, bad_lse = 0;
        char first[160] = "";
        fmha_ref_err_init(&err);
        fmha_ref_err_init(&err_exact);
        tu_download(go, dout, 2 * no);
        if (c->lse) tu_download(gl, dl, 4 * (size_t)rows_q * c->hq);
        for (b = 0; b < c->batch; b++) {
            const int lq = ssq[b + 1] - ssq[b];
            for (h = 0; h < c->hq; h++)
                for (i = 0; i < lq; i++) {
                    const int64_t oo = fmha_ref_off_o(&rp, b, h, i);
                    float lse, sabs_f;
                    double sabs;
                    int cc, empty;
                    /* the kernel's running max and row sum (its info's
                     * p8_qsum: the contiguous rows without a soft cap take
                     * the lazy max, O over the rounded P's sum); a
                     * build's FMHAI_FWD90_LAZY_ON may make other rows lazy */
                    fmha_ref_p8_qsum(&rp, plan.kernel->p8_qsum);
                    if (FMHAI_FWD90_LAZY_ON(plan.kernel->hdim, 1, 0)) rp.p8_lazy = 8.0 * 0.6931471805599453;
                    ref_row(&rp, b, h, i, plan.kernel->tile_n, sc, acc, ro + oo, &lse, &sabs);
                    sabs_f = (float)sabs;
                    empty = lse == -INFINITY;
                    if (c->peak) {
                        double lse_x;
                        fmha_ref_fwd_row(&rp, b, h, i, sc, acc, &lse_x);
                        for (cc = 0; cc < d; cc++) fmha_ref_err_add(&err_exact, bf16f(go[oo + cc]), (float)acc[cc]);
                    }
                    for (cc = 0; cc < ldo; cc++) {
                        const uint16_t u = go[oo + cc];
                        if (cc >= d) { bad_pad += u != TU_POISON_OUT16; continue; }
                        const float g = bf16f(u);
                        if (!isfinite(g)) { nonfinite++; continue; }
                        if (empty && u != 0 && u != 0x8000) bad_empty++;
                        fmha_ref_err_add(&err, g, ro[oo + cc]);
                        if (fabs(g - ro[oo + cc]) > max_abs) max_abs = fabs(g - ro[oo + cc]);
                    }
                    if (c->lse) {
                        const float gv = gl[fmha_ref_off_lse(&rp, b, h, i)];
                        const double tol = 2e-3 + ldexp(sabs_f, -11);
                        if (empty ? !(gv == -INFINITY) : !(fabs(gv - lse) <= tol)) {
                            if (!bad_lse++) snprintf(first, sizeof(first), "b%d h%d row %d: lse %g, ref %g (tol %g)", b, h, i, gv, lse, tol);
                        }
                        if (!empty && fabs(gv - lse) > lse_err) { lse_err = fabs(gv - lse); lse_tol_worst = tol; }
                    }
                }
        }
        const double rel = fmha_ref_err_rel_l2(&err), tol_abs = ldexp(vamp, -4);
        if (c->peak)
            printf("# %s: rel-L2 %.2e against the kernel's P rounding, %.2e against the unrounded softmax\n", c->name,
                   rel, fmha_ref_err_rel_l2(&err_exact));
        if (nonfinite || bad_pad || bad_empty || bad_lse || rel > 1e-2 || max_abs > tol_abs)
            tu_fail(c->name, "rel-L2 %.3g (tol 1e-2), max-abs %.3g (tol %.3g), non-finite %d, padding written %d, "
                    "masked rows not 0 %d, LSE bad %d %s", rel, max_abs, tol_abs, nonfinite, bad_pad, bad_empty,
                    bad_lse, first);
        else {
            printf("# %s: rel-L2 %.2e max-abs %.2e lse-err %.2e (tol %.2e)\n", c->name, rel, max_abs, lse_err,
                   lse_tol_worst);
            tu_pass(c->name);
        }
        free(sc);
    }
    if (dvt) tu_dfree(dvt);
    tu_dfree(dq); tu_dfree(dk); tu_dfree(dv); tu_dfree(dout); tu_dfree(dl); tu_dfree(dss); tu_dfree(dds); tu_dfree(dsl);
    free(hq8); free(hk8); free(hv8); free(fq); free(fk); free(fv); free(ro); free(go); free(gl); free(slopes);
}

/* FP8 API contract: statuses, and no launch. */
static void api_checks(void)
{
    static char buf[64] __attribute__((aligned(16)));
    fmha_fwd_args a;
    fmha_status s;
    memset(&a, 0, sizeof(a));
    a.dtype = FMHA_DTYPE_FP8; a.batch = 1; a.nhead_q = a.nhead_k = 1; a.seqlen_q = a.seqlen_k = 16;
    a.hdim_q = a.hdim_v = 128; a.q = a.k = a.v = a.o = buf;
    a.stride_q = a.stride_k = a.stride_v = 128; a.stride_o = 128; a.scale = 0.1f;
    a.mask_type = FMHA_MASK_NONE; a.window_left = a.window_right = -1;
#define EXPECT(name, want, set)                                                                          \
    if (tu_selected(name)) {                                                                            \
        fmha_fwd_plan pl;                                                                               \
        s = fmha_fwd_check(set, &a, &pl);                                                               \
        if (s == (want)) tu_pass(name);                                                                 \
        else tu_fail(name, "status %d, want %d (%s)", (int)s, (int)(want), s ? fmha_last_error() : "ok"); \
    }
    EXPECT("fp8_api_valid", FMHA_OK, &fp8_set)
    EXPECT("fp8_api_no_fp8_rows", FMHA_ERR_NO_KERNEL, &bf16_only)
    a.hdim_q = a.hdim_v = 72;
    EXPECT("fp8_api_hdim_72", FMHA_ERR_UNSUPPORTED, &fp8_set)
    a.hdim_q = a.hdim_v = 128;
    a.stride_q = 136;
    EXPECT("fp8_api_stride_not_16", FMHA_ERR_UNSUPPORTED, &fp8_set)
    a.stride_q = 128;
    a.q_descale = (const float *)(buf + 2);
    EXPECT("fp8_api_descale_misaligned", FMHA_ERR_INVALID_ARG, &fp8_set)
    a.q_descale = (const float *)buf;
    a.descale_head_stride = -1;
    EXPECT("fp8_api_descale_stride_negative", FMHA_ERR_INVALID_ARG, &fp8_set)
    a.descale_head_stride = 1;
    EXPECT("fp8_api_descale_strides_valid", FMHA_OK, &fp8_set)
    a.descale_head_stride = 0;
    /* V given K-major: the rows of head dims 128 and 256 read it (64 runs
     * the 128 kernel padded: refused) */
    a.v_kmajor = 1;
    a.hdim_q = a.hdim_v = 64;
    EXPECT("fp8_api_vkmajor_hdim64", FMHA_ERR_UNSUPPORTED, &fp8_set)
    a.hdim_q = a.hdim_v = 256; a.stride_q = a.stride_k = 256; a.stride_o = 256; a.stride_v = 16;
    if (!(getenv("FMHA_TILE_TMA") && getenv("FMHA_TILE_TMA")[0] == '0')) EXPECT("fp8_api_vkmajor_valid", FMHA_OK, &fp8_set)
    a.stride_v = 0;
    EXPECT("fp8_api_vkmajor_stride_below_keys", FMHA_ERR_INVALID_ARG, &fp8_set)
    a.stride_v = 16; a.v_kmajor = 2;
    EXPECT("fp8_api_vkmajor_2", FMHA_ERR_INVALID_ARG, &fp8_set)
    a.v_kmajor = 1; a.is_group_mode = 1; a.max_seqlen_q = 16; a.seqstart_q = a.seqstart_k = (const int32_t *)buf;
    EXPECT("fp8_api_vkmajor_group", FMHA_ERR_UNSUPPORTED, &fp8_set)
    if (tu_selected("fp8_api_vkmajor_prepass_refusals")) {
        fmha_status s1 = fmha_fp8_v_kmajor(&a, buf, 0), s2, s3;   /* group mode */
        a.is_group_mode = 0; a.v_kmajor = 0; a.stride_v = 256;
        s2 = fmha_fp8_v_kmajor(&a, buf + 8, 0);                   /* misaligned vt */
        a.dtype = FMHA_DTYPE_BF16; a.q_descale = 0;
        s3 = fmha_fp8_v_kmajor(&a, buf, 0);                       /* not fp8 */
        a.dtype = FMHA_DTYPE_FP8; a.q_descale = (const float *)buf;
        if (s1 == FMHA_ERR_UNSUPPORTED && s2 == FMHA_ERR_INVALID_ARG && s3 == FMHA_ERR_UNSUPPORTED)
            tu_pass("fp8_api_vkmajor_prepass_refusals");
        else tu_fail("fp8_api_vkmajor_prepass_refusals", "statuses %d %d %d", (int)s1, (int)s2, (int)s3);
    }
    a.is_group_mode = 0; a.v_kmajor = 0; a.seqstart_q = a.seqstart_k = 0;
    a.hdim_q = a.hdim_v = 128; a.stride_q = a.stride_k = a.stride_v = a.stride_o = 128;
    a.descale_head_stride = 1;
    a.dtype = FMHA_DTYPE_BF16;
    EXPECT("fp8_api_descale_on_bf16", FMHA_ERR_INVALID_ARG, &bf16_only)
    a.q_descale = 0;
    EXPECT("fp8_api_descale_strides_on_bf16", FMHA_ERR_INVALID_ARG, &bf16_only)
#undef EXPECT
}

int main(int argc, char **argv)
{
    tu_args ta;
    cudaStream_t st;
    clock_t t0 = clock();
    int i, rc;
    build();
    const tu_cfg_list L = { g_n, cname, cquick, cwork };
    rc = tu_begin(argc, argv, "test_fwd_fp8", "", &L, &ta, &st);
    if (rc >= 0) return rc;
    for (i = 0; i < g_n; i++)
        if (tu_cfg_wanted(&ta, &L, i)) run(&g_cfgs[i], st, ta.seed + (uint64_t)i);
    api_checks();
    tu_end(st, t0);
    return 0;
}
