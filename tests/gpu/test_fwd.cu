/*
 * test_fwd.cu - GPU tests of the forward family against the CPU reference.
 *
 * Declares the library's default forward kernel set (every dtype, head dim, mask,
 * soft cap and ALiBi variant, and MLA's 192_128 rows), a head-dim 192 set, a
 * set of the portable head-dim 32 and 96 kernels, plus a
 * one-row set for the "no kernel" checks, then
 * runs a table of forward problems built below in build_configs(): odd and zero
 * lengths, s_q > s_k under causal masks, windows that mask whole rows, GQA ratios
 * up to 16, soft cap, ALiBi, padded head dims, bshd/bhsd layouts with padded
 * strides, batch and group mode, hdim_v < hdim_q (MLA's 192 / 128, and V padded
 * inside kernels of one head dim). Each problem gets random inputs (never zero; input
 * padding holds NaN), a poisoned O and LSE with poisoned guard zones before and
 * after them, one fmha_fwd() on a non-default stream, and a comparison with
 * tests/ref/fmha_ref.h: every logical element written, padding and guards
 * untouched, inputs unchanged, fully masked rows exactly O = 0 / LSE = -inf, the
 * kernel of the smallest fitting head dim of its pipeline selected, rel-L2 within fp16 2e-3 /
 * bf16 1e-2 (plus a loose max-abs bound), LSE within 2e-3 absolute (5e-3 with a
 * soft cap), no NaN. Then the API contract: bad arguments give the documented
 * status and a message and launch nothing; a set without a fitting kernel says
 * FMHA_ERR_NO_KERNEL and names the closest kernel; the registry and JSON describe
 * the set; a call is safe under CUDA graph capture.
 *
 * Build:  nvcc -x cu -std=c++17 -O2 -gencode=arch=compute_80,code=sm_80 \
 *              -gencode=arch=compute_90a,code=sm_90a -Iinclude -Itests \
 *              tests/gpu/test_fwd.cu -o build/tests/test_fwd
 * Run:    build/tests/test_fwd [--quick] [--filter SUBSTR] [--list]
 * Output: one `PASS name` / `FAIL name: why` line per check, last line
 *         `N passed, M failed`; exit status 1 on any failure. Without a GPU:
 *         `SKIP test_fwd: no GPU`, `0 passed, 0 failed`, exit 0.
 *
 * Statuses the bad-argument checks expect (api.h: INVALID_ARG = malformed call,
 * UNSUPPORTED = a well-formed problem the library does not handle):
 *   NULL set/args/q/k/v/o, negative batch or length, nhead_k <= 0,
 *   nhead_q % nhead_k != 0, group mode without seqstart, scale <= 0,
 *   unknown mask type                                      -> FMHA_ERR_INVALID_ARG
 *   hdim 260, hdim 60, hdim_v > hdim_q, hdim_v 60, unknown dtype, stride or base
 *   pointer not a multiple of 8 elements / 16 bytes        -> FMHA_ERR_UNSUPPORTED
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Small launch-order groups (fmhai_fwd_lpt_pairs, fmhai_bwd_lpt_units): the
 * causal batch-mode problems here walk several groups, the last one partial
 * (the default 32 MB would put these small problems in one group). */
#define FMHAI_FWD_LPT_L2 (256 << 10)
#include "fmha_tile.h"
#include "test_util.h"
#include "../ref/fmha_ref.h"

/* Everything the library offers for the forward family. */
DECL_FMHA_KERNEL_SET(fmha_default, FMHA_DEFAULT_FWD_SET)

/* One bf16 d128 masked kernel: the set for the "no kernel" checks. */
#define TINY_FWD_SET(X) \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(tiny_set, TINY_FWD_SET)

/* Explicit rows: the portable pipeline on every arch (the default set runs
 * the wgmma pipeline on Hopper), for the features both pipelines carry. */
#define PORTABLE_FWD_SET(X) \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 128, 64, 4, 1) \
    X(FWD, FP16, 64, MASK, SOFTCAP, ALIBI, 128, 64, 4, 2) \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, BIAS, 128, 64, 4, 1) \
    X(FWD, FP16, 64, MASK, NOSOFTCAP, BIAS, 128, 64, 4, 2)
DECL_FMHA_KERNEL_SET(portable_set, PORTABLE_FWD_SET)

/* Elementwise bias beyond the default set's rows (hdim 64/128, no soft
 * cap): hdim 256 (a wgmma row and a portable one; the wgmma kernel has no
 * bias, so the portable one serves it) and soft cap + bias at hdim 128. */
#define BIAS_FWD_SET(X) \
    X(FWD, BF16, 256, MASK, NOSOFTCAP, BIAS, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD, FP16, 256, MASK, NOSOFTCAP, BIAS, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD, BF16, 128, MASK, SOFTCAP, BIAS, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(bias_set, BIAS_FWD_SET)

/* Head dim 192 (not in the default set, whose 129..192 problems run on the
 * 256 kernels) and a (192, 128) row with soft cap and ALiBi (the default
 * set's 192_128 rows have neither). */
#define HD_FWD_SET(X) \
    X(FWD, BF16, 192, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD, FP16, 192, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(FWD, BF16, 192_128, MASK, SOFTCAP, ALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(hd_set, HD_FWD_SET)

/* Head dims 32 and 96: explicit rows, so the portable kernels run on every
 * arch (on Hopper the head-dim rule sends d 65..96 of the default set to
 * the wgmma 128 kernel), with the features their rows carry. */
#define HD32_FWD_SET(X) \
    X(FWD, BF16, 32, MASK, NOSOFTCAP, NOALIBI, 128, 64, 4, 2) \
    X(FWD, FP16, 32, NOMASK, NOSOFTCAP, NOALIBI, 128, 64, 4, 2) \
    X(FWD, FP16, 32, MASK, SOFTCAP, ALIBI, 128, 64, 4, 2) \
    X(FWD, BF16, 96, MASK, NOSOFTCAP, NOALIBI, 96, 64, 6, 2) \
    X(FWD, FP16, 96, NOMASK, NOSOFTCAP, NOALIBI, 96, 64, 6, 2) \
    X(FWD, BF16, 96, MASK, SOFTCAP, ALIBI, 96, 64, 6, 2) \
    X(FWD, BF16, 96, MASK, NOSOFTCAP, BIAS, 96, 64, 6, 2)
DECL_FMHA_KERNEL_SET(hd32_set, HD32_FWD_SET)

/* ============================================================================
 * Problem descriptions
 * ========================================================================== */
#define MAXB 8

typedef struct fwd_cfg {
    char name[192];
    const fmha_kernel_set *set;  /* NULL: the default set                       */
    fmha_dtype dtype;
    int group;                   /* 0: batch mode, 1: group mode                */
    int batch, hq, hk, d;
    int dv;                      /* V/O head dim (0: d)                         */
    int sq, sk;                  /* batch mode lengths                          */
    int lq[MAXB], lk[MAXB];      /* group mode lengths                          */
    int maxq_slack;              /* group mode: max_seqlen_q = max + slack      */
    fmha_mask_type mask;
    int wl, wr;
    float cap;                   /* logits soft cap, 0: off                     */
    int alibi;                   /* 0: off, 1: shared slopes, 2: per batch      */
    int lse;                     /* write LSE                                   */
    int iperm, operm;            /* 0: bshd, 1: bhsd (CK's -iperm/-operm)       */
    int pad;                     /* extra elements per row, multiple of 8       */
    int lse_pad;                 /* extra elements per LSE head/batch row       */
    float scale;                 /* 0: 1/sqrt(d)                                */
    float amp;                   /* inputs in [-amp, amp]                       */
    int graph;                   /* launch through a captured CUDA graph        */
    int sinks;                   /* one attention-sink logit per query head     */
    float dropout;               /* drop probability (0: off)                   */
    int drop_rng;                /* seed and offset through dropout_rng (device) */
    int bias;                    /* elementwise bias: 0 off, 1 [b][h][s_q][s_k],
                                    2 shared by batch entries, 3 by heads, 4 both
                                    (strides 0); group mode: packed rows     */
    fmha_dtype bias_dt;          /* FP16, BF16 or FP32                          */
    int bias_kind;               /* 0 values in [-3, 3]; 1 plus -1e4 on a
                                    quarter of the keys (a padding mask); 2 plus
                                    -inf there and on whole rows              */
    int bias_pad;                /* extra elements per bias row (odd: rows not
                                    aligned to pairs)                         */
    int quick;                   /* part of --quick                             */
} fwd_cfg;

#define MAXCFG 400
/* Poisoned elements before and after the O and LSE buffers (512 bytes of fp16:
 * keeps O 16-byte aligned) to catch writes just outside them. */
#define GUARD 256
static fwd_cfg g_cfgs[MAXCFG];
static int g_ncfg;

static int cfg_dv(const fwd_cfg *c) { return c->dv ? c->dv : c->d; }

static const char *dtype_str(fmha_dtype t) { return t == FMHA_DTYPE_BF16 ? "bf16" : t == FMHA_DTYPE_FP16 ? "fp16" : "fp8"; }

static fwd_cfg cfg_batch(fmha_dtype dt, int b, int hq, int hk, int sq, int sk, int d)
{
    fwd_cfg c;
    memset(&c, 0, sizeof(c));
    c.dtype = dt; c.batch = b; c.hq = hq; c.hk = hk; c.sq = sq; c.sk = sk; c.d = d;
    c.mask = FMHA_MASK_NONE; c.wl = c.wr = -1;
    c.lse = 1; c.amp = 1.0f;
    return c;
}

/* Group mode; lq/lk hold b entries. */
static fwd_cfg cfg_group(fmha_dtype dt, int b, const int *lq, const int *lk, int hq, int hk, int d)
{
    fwd_cfg c = cfg_batch(dt, b, hq, hk, 0, 0, d);
    int i;
    c.group = 1;
    for (i = 0; i < b; i++) { c.lq[i] = lq[i]; c.lk[i] = lk[i]; }
    return c;
}

static void cfg_mask(fwd_cfg *c, fmha_mask_type m, int wl, int wr) { c->mask = m; c->wl = wl; c->wr = wr; }

/* Name = every non-default feature, so --filter can pick by feature. */
static void cfg_name(fwd_cfg *c)
{
    char *s = c->name;
    size_t cap = sizeof(c->name), n;
    int i;
    n = (size_t)snprintf(s, cap, "fwd_%s_%s_b%d_h%d:%d_", dtype_str(c->dtype), c->group ? "group" : "batch",
                         c->batch, c->hq, c->hk);
    if (!c->group) {
        n += (size_t)snprintf(s + n, cap - n, "s%d:%d", c->sq, c->sk);
    } else {
        n += (size_t)snprintf(s + n, cap - n, "q");
        for (i = 0; i < c->batch; i++) n += (size_t)snprintf(s + n, cap - n, "%s%d", i ? "," : "", c->lq[i]);
        n += (size_t)snprintf(s + n, cap - n, "_k");
        for (i = 0; i < c->batch; i++) n += (size_t)snprintf(s + n, cap - n, "%s%d", i ? "," : "", c->lk[i]);
    }
    n += (size_t)snprintf(s + n, cap - n, "_d%d", c->d);
    if (c->dv) n += (size_t)snprintf(s + n, cap - n, "_dv%d", c->dv);
    if (c->mask == FMHA_MASK_NONE) n += (size_t)snprintf(s + n, cap - n, "_nomask");
    else n += (size_t)snprintf(s + n, cap - n, "_%s(%d,%d)", c->mask == FMHA_MASK_TOP_LEFT ? "t" : "b", c->wl, c->wr);
    if (c->cap > 0) n += (size_t)snprintf(s + n, cap - n, "_cap%g", c->cap);
    if (c->alibi) n += (size_t)snprintf(s + n, cap - n, "_alibi%s", c->alibi == 2 ? "batch" : "shared");
    if (!c->lse) n += (size_t)snprintf(s + n, cap - n, "_nolse");
    if (c->iperm || c->operm) n += (size_t)snprintf(s + n, cap - n, "_perm%d%d", c->iperm, c->operm);
    if (c->pad) n += (size_t)snprintf(s + n, cap - n, "_pad%d", c->pad);
    if (c->lse_pad) n += (size_t)snprintf(s + n, cap - n, "_lsepad%d", c->lse_pad);
    if (c->scale > 0) n += (size_t)snprintf(s + n, cap - n, "_scale%g", c->scale);
    if (c->amp != 1.0f) n += (size_t)snprintf(s + n, cap - n, "_amp%g", c->amp);
    if (c->maxq_slack) n += (size_t)snprintf(s + n, cap - n, "_maxqslack%d", c->maxq_slack);
    if (c->set == &tiny_set) n += (size_t)snprintf(s + n, cap - n, "_tinyset");
    if (c->set == &portable_set) n += (size_t)snprintf(s + n, cap - n, "_portable");
    if (c->sinks) n += (size_t)snprintf(s + n, cap - n, "_sinks");
    if (c->dropout > 0) n += (size_t)snprintf(s + n, cap - n, "_dropout%g", c->dropout);
    if (c->drop_rng) n += (size_t)snprintf(s + n, cap - n, "_rng");
    if (c->graph) n += (size_t)snprintf(s + n, cap - n, "_graph");
    if (c->set == &bias_set) n += (size_t)snprintf(s + n, cap - n, "_biasset");
    if (c->set == &hd_set) n += (size_t)snprintf(s + n, cap - n, "_hdset");
    if (c->set == &hd32_set) n += (size_t)snprintf(s + n, cap - n, "_hd32set");
    if (c->bias) {
        static const char *lay[5] = { "", "perhead", "bcastbatch", "bcasthead", "bcastboth" };
        static const char *kind[3] = { "", "_neg1e4", "_neginf" };
        n += (size_t)snprintf(s + n, cap - n, "_bias_%s_%s%s", lay[c->bias],
                              c->bias_dt == FMHA_DTYPE_FP32 ? "fp32" : dtype_str(c->bias_dt), kind[c->bias_kind]);
        if (c->bias_pad) n += (size_t)snprintf(s + n, cap - n, "_bpad%d", c->bias_pad);
    }
}

/* q.k products of the problem ignoring the mask (the reference's cost, /2). */
static double cfg_work(const fwd_cfg *c)
{
    double w = 0.0;
    int b;
    for (b = 0; b < c->batch; b++)
        w += (double)(c->group ? c->lq[b] : c->sq) * (c->group ? c->lk[b] : c->sk);
    return w * c->hq * c->d;
}

static void add(fwd_cfg c, int quick)
{
    if (g_ncfg >= MAXCFG) { fprintf(stderr, "test_fwd: MAXCFG too small\n"); exit(2); }
    c.quick = quick;
    cfg_name(&c);
    g_cfgs[g_ncfg++] = c;
}

/* The table. Comments say what each group is after; `quick` marks the ~30
 * problems of --quick (one or two per group, the nastiest first). */
static void build_configs(void)
{
    const fmha_dtype F = FMHA_DTYPE_FP16, B = FMHA_DTYPE_BF16;
    const fmha_mask_type NO = FMHA_MASK_NONE, TL = FMHA_MASK_TOP_LEFT, BR = FMHA_MASK_BOTTOM_RIGHT;
    int i, j, k;

    /* 1. dtype x kernel head dim x {none, causal top-left, causal bottom-right}. */
    {
        static const int hd[3] = { 64, 128, 256 };
        static const int shp[3][4] = { { 2, 255, 255, 4 }, { 1, 128, 1000, 2 }, { 3, 97, 64, 2 } };
        for (i = 0; i < 2; i++)
            for (j = 0; j < 3; j++)
                for (k = 0; k < 3; k++) {
                    const int *s = shp[(j + k) % 3];
                    fwd_cfg c = cfg_batch(i ? B : F, s[0], s[3] * 2, s[3], s[1], s[2], hd[j]);
                    if (k) cfg_mask(&c, k == 1 ? TL : BR, -1, 0);
                    c.lse = (j + k + i) % 4 != 3;
                    add(c, (i + j + k) % 6 == 0 || (i == 1 && j == 2 && k == 2));
                }
    }

    /* 2. head dims below a kernel's: padded loads, partial k-steps, masked stores. */
    {
        static const int pd[5] = { 8, 40, 72, 96, 200 };
        for (j = 0; j < 5; j++)
            for (i = 0; i < 2; i++)
                for (k = 0; k < 2; k++) {
                    fwd_cfg c = cfg_batch(i ? B : F, 2, 3, 1, k ? 100 : 17, k ? 100 : 255, pd[j]);
                    if (k) cfg_mask(&c, BR, -1, 0);
                    c.pad = (j % 2) * 8;
                    add(c, (j == 2 && i == 0 && k == 1) || (j == 4 && i == 1 && k == 0));
                }
    }

    /* 3. lengths: 1, odd, not a tile multiple, s_k = 0, s_q > s_k, s_q = 0. */
    {
        static const int len[14][2] = { { 1, 1 }, { 1, 17 }, { 17, 1 }, { 17, 17 }, { 1, 1000 }, { 255, 255 },
                                        { 255, 17 }, { 1000, 255 }, { 1000, 1000 }, { 17, 0 }, { 1, 0 },
                                        { 255, 0 }, { 65, 129 }, { 300, 100 } };
        for (j = 0; j < 14; j++)
            for (k = 0; k < 3; k++) {
                fwd_cfg c = cfg_batch((j + k) % 2 ? B : F, 2, 2, 1, len[j][0], len[j][1], (j + k) % 3 == 2 ? 128 : 64);
                if (k) cfg_mask(&c, k == 1 ? TL : BR, -1, 0);
                add(c, (j == 9 && k == 0) || (j == 13 && k == 2) || (j == 0 && k == 1) || (j == 7 && k == 1));
            }
        /* batch mode s_q = 0: valid, nothing to write */
        add(cfg_batch(F, 2, 2, 2, 0, 17, 64), 1);
        add(cfg_batch(B, 1, 2, 1, 0, 0, 128), 0);
    }

    /* 4. GQA/MQA ratios 1, 2, 4, 8, 16 (and 3 in group 2). */
    {
        static const int ratio[5] = { 1, 2, 4, 8, 16 };
        for (j = 0; j < 5; j++)
            for (k = 0; k < 2; k++)
                for (i = 0; i < 2; i++) {
                    int hk = k ? 2 : 1;
                    fwd_cfg c = cfg_batch(i ? B : F, 2, hk * ratio[j], hk, 67, 300, (j + i) % 2 ? 128 : 64);
                    if (i) cfg_mask(&c, BR, -1, 0);
                    add(c, (j == 4 && k == 0 && i == 1) || (j == 2 && k == 1 && i == 0));
                }
    }

    /* 5. windows, both alignments, including windows that mask whole rows. */
    {
        static const struct { fmha_mask_type m; int wl, wr, sq, sk; } w[] = {
            { TL, 0, 0, 255, 255 },    { BR, 0, 0, 255, 255 },    { TL, 16, 0, 255, 255 },
            { BR, 10, 0, 255, 255 },   { TL, 5, 5, 100, 300 },    { BR, 5, 5, 100, 300 },
            { TL, 0, 16, 300, 100 },   { BR, 128, -1, 300, 100 }, { TL, -1, 32, 200, 200 },
            { BR, -1, 32, 200, 200 },  { TL, -1, -1, 77, 133 },   { BR, -1, -1, 77, 133 },
            { TL, 5000, 5000, 64, 64 },{ BR, 2, 2, 1, 1000 },     { TL, 3, 1, 1, 1000 },
            /* fully masked rows: */
            { TL, 5, 0, 300, 100 },    /* rows >= 105 see nothing            */
            { BR, 0, 0, 300, 100 },    /* rows < 200 see nothing             */
            { TL, 2, -1, 1000, 17 },   /* rows >= 19 see nothing             */
            { BR, -1, 0, 255, 17 },    /* causal, s_q > s_k: top 238 rows    */
            { TL, 0, 0, 130, 64 },     /* diagonal runs out of keys at 64    */
            { BR, 3, 7, 64, 130 },
        };
        for (j = 0; j < (int)(sizeof(w) / sizeof(w[0])); j++) {
            fwd_cfg c = cfg_batch(j % 2 ? B : F, 2, 4, 2, w[j].sq, w[j].sk, j % 3 == 1 ? 128 : 64);
            cfg_mask(&c, w[j].m, w[j].wl, w[j].wr);
            add(c, j == 15 || j == 16 || j == 3 || j == 18);
            if (j >= 15) {                 /* the row-masking ones in the other dtype, d 256 */
                c.dtype = j % 2 ? F : B;
                c.d = 256;
                c.hq = 2; c.hk = 1;
                add(c, 0);
            }
        }
    }

    /* 6. logits soft cap: small caps really bend the scores. */
    {
        static const float caps[3] = { 0.5f, 2.0f, 10.0f };
        for (j = 0; j < 3; j++)
            for (i = 0; i < 2; i++)
                for (k = 0; k < 3; k++) {
                    fwd_cfg c = cfg_batch(i ? B : F, 2, 4, 2, 129, 257, j == 2 ? 256 : (k == 1 ? 128 : 64));
                    c.cap = caps[j];
                    if (k) cfg_mask(&c, k == 1 ? TL : BR, -1, 0);
                    add(c, (j == 1 && i == 0 && k == 2) || (j == 2 && i == 1 && k == 1));
                }
        for (i = 0; i < 2; i++) {          /* scale 1: scores of several units, cap saturates */
            fwd_cfg c = cfg_batch(i ? B : F, 1, 2, 2, 100, 100, 64);
            c.cap = 5.0f; c.scale = 1.0f;
            add(c, 0);
        }
    }

    /* 7. ALiBi, shared and per-batch slopes, with masks and with soft cap. */
    {
        for (j = 0; j < 2; j++)
            for (i = 0; i < 2; i++)
                for (k = 0; k < 4; k++) {
                    fwd_cfg c = cfg_batch(i ? B : F, 3, 4, 1, k == 3 ? 300 : 111, 200, (j + k) % 2 ? 128 : 64);
                    c.alibi = j + 1;
                    if (k == 1) cfg_mask(&c, TL, -1, 0);
                    if (k == 2) cfg_mask(&c, BR, -1, 0);
                    if (k == 3) cfg_mask(&c, BR, 64, 0);
                    add(c, (j == 1 && i == 1 && k == 2) || (j == 0 && i == 0 && k == 0));
                }
        for (i = 0; i < 4; i++) {
            fwd_cfg c = cfg_batch(i % 2 ? B : F, 2, 4, 2, 90, 90, i < 2 ? 64 : 256);
            c.alibi = 1 + i % 2;
            c.cap = 2.0f;
            if (i >= 2) cfg_mask(&c, i == 2 ? TL : BR, -1, 0);
            add(c, i == 3);
        }
    }

    /* 8. layouts: bshd/bhsd for inputs and output, padded rows, LSE strides. */
    {
        static const int pads[3] = { 0, 8, 24 };
        for (j = 0; j < 4; j++)
            for (k = 0; k < 3; k++) {
                fwd_cfg c = cfg_batch((j + k) % 2 ? B : F, 2, 4, 2, 77, 150, k == 2 ? 96 : 64);
                c.iperm = j & 1; c.operm = j >> 1;
                c.pad = pads[k];
                c.lse_pad = k * 3;
                c.lse = k != 1;
                if (j == 3) cfg_mask(&c, BR, -1, 0);
                add(c, j == 1 && k == 2);
            }
    }

    /* 9. group (varlen) mode: zero lengths, decode-like varlen, tile edges. */
    {
        static const struct { int b; int q[MAXB]; int k[MAXB]; } g[] = {
            { 3, { 17, 255, 1 }, { 17, 255, 1000 } },
            { 4, { 0, 17, 0, 5 }, { 0, 300, 7, 5 } },
            { 3, { 5, 0, 33 }, { 0, 0, 100 } },                       /* s_k = 0 with s_q > 0 */
            { 8, { 1, 1, 1, 1, 1, 1, 1, 1 }, { 1000, 1, 17, 255, 0, 64, 128, 3 } },
            { 2, { 255, 100 }, { 100, 255 } },
            { 1, { 1000 }, { 1000 } },
            { 2, { 0, 0 }, { 0, 0 } },                                /* nothing at all       */
            { 3, { 64, 65, 63 }, { 64, 65, 63 } },
        };
        for (j = 0; j < 8; j++)
            for (k = 0; k < 4; k++) {
                fwd_cfg c = cfg_group((j + k) % 2 ? B : F, g[j].b, g[j].q, g[j].k, 4, j % 3 ? 2 : 1,
                                      (j + k) % 3 == 0 ? 128 : 64);
                if (k == 1) cfg_mask(&c, TL, -1, 0);
                if (k == 2) cfg_mask(&c, BR, -1, 0);
                if (k == 3) cfg_mask(&c, j % 2 ? TL : BR, j % 2 ? 8 : 32, j % 2 ? 8 : 0);
                c.iperm = (j + k) % 2; c.operm = j % 2;
                c.pad = k == 3 ? 8 : 0;
                c.lse_pad = j % 2 ? 5 : 0;
                c.maxq_slack = (j + k) % 4 == 1 ? 7 : 0;
                add(c, (j == 1 && k == 2) || (j == 2 && k == 0) || (j == 3 && k == 3) || (j == 6 && k == 1));
            }
        /* group mode with the optional features */
        for (i = 0; i < 4; i++) {
            fwd_cfg c = cfg_group(i % 2 ? B : F, 4, g[1].q, g[1].k, 8, 1, i < 2 ? 72 : 200);
            c.cap = i & 1 ? 2.0f : 0.0f;
            c.alibi = i & 2 ? 2 : 1;
            cfg_mask(&c, BR, -1, 0);
            c.iperm = 1; c.pad = 8;
            add(c, i == 2);
        }
        {
            static const int gq[5] = { 300, 0, 1, 17, 250 }, gk[5] = { 300, 5, 0, 400, 17 };
            fwd_cfg c = cfg_group(B, 5, gq, gk, 16, 1, 128);
            cfg_mask(&c, BR, -1, 0);
            add(c, 0);
            c.dtype = F;
            cfg_mask(&c, TL, 20, 3);
            add(c, 0);
        }
    }

    /* 10. scale and input range, large batch x heads, one big causal square. */
    {
        fwd_cfg c = cfg_batch(F, 1, 2, 2, 200, 200, 128);
        c.scale = 1.0f;                       /* peaky softmax: max subtraction matters */
        add(c, 1);
        c.dtype = B;
        add(c, 0);
        c = cfg_batch(F, 1, 2, 2, 200, 200, 64);
        c.scale = 0.01f;                      /* nearly uniform softmax */
        add(c, 0);
        c = cfg_batch(F, 2, 2, 1, 130, 130, 64);
        c.amp = 4.0f;
        cfg_mask(&c, TL, -1, 0);
        add(c, 1);
        c.dtype = B;
        add(c, 0);
        c = cfg_batch(B, 8, 16, 2, 33, 97, 64);
        add(c, 0);
        c = cfg_batch(F, 8, 16, 16, 33, 97, 128);
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 8, 2, 1024, 1024, 128);
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 1, 4, 4, 512, 512, 256);
        cfg_mask(&c, TL, -1, 0);
        c.iperm = c.operm = 1;
        add(c, 0);
    }

    /* 11. the one-row set still computes what it can serve (d 72 runs on d128). */
    {
        fwd_cfg c = cfg_batch(B, 2, 4, 2, 100, 200, 128);
        c.set = &tiny_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.d = 72;
        cfg_mask(&c, NO, -1, -1);
        add(c, 0);
    }

    /* 12. graph capture: fmha_fwd inside stream capture, then replay. */
    {
        fwd_cfg c = cfg_batch(F, 2, 4, 2, 100, 300, 64);
        c.graph = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        static const int gq[4] = { 0, 17, 0, 5 }, gk[4] = { 0, 300, 7, 5 };
        c = cfg_group(B, 4, gq, gk, 4, 2, 128);
        c.graph = 1;
        add(c, 0);
    }

    /* 13. attention sinks: a logit per head in every row's softmax with no
     * value; rows that see no key get O = 0 and LSE = sink. Both pipelines
     * (the portable set's explicit rows), masks with fully masked rows (top-
     * left, s_q > s_k), GQA, group mode with empty entries, soft cap, ALiBi,
     * hdim 64/128/256. */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        fwd_cfg c = cfg_batch(B, 2, 8, 2, 300, 500, 128);
        c.sinks = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(F, 1, 4, 4, 200, 100, 64);
        c.sinks = 1;
        cfg_mask(&c, TL, 20, 0);       /* top-left window: rows from 120 on see nothing */
        add(c, 1);
        c = cfg_group(B, 4, gq, gk, 4, 1, 256);
        c.sinks = 1;
        c.cap = 30.f;
        cfg_mask(&c, BR, 64, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 257, 257, 128);
        c.sinks = 1;
        c.alibi = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 300, 500, 128);
        c.sinks = 1;
        c.set = &portable_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(F, 1, 4, 2, 200, 100, 64);
        c.sinks = 1;
        c.set = &portable_set;
        c.cap = 20.f;
        c.alibi = 2;
        cfg_mask(&c, TL, 20, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 4, 2, 70, 90, 40);   /* padded head dim, portable */
        c.sinks = 1;
        c.set = &portable_set;
        add(c, 0);
    }

    /* 14. dropout: P's kept elements scaled, the LSE whole; the default set
     * runs these on the wgmma pipeline on Hopper (hdim 256 on its 80-key
     * tiles: a lone 16-key Philox group), portable_set on the portable one:
     * causal GQA, group mode with empty entries, window + sinks + ALiBi,
     * soft cap, hdim 64/128/256, a padded head dim, rates 0.1 to 0.6 */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        fwd_cfg c = cfg_batch(B, 2, 8, 2, 300, 500, 128);
        c.dropout = 0.2f;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_group(F, 4, gq, gk, 4, 1, 64);
        c.dropout = 0.5f;
        c.sinks = 1;
        c.alibi = 2;
        cfg_mask(&c, BR, 64, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 4, 4, 200, 260, 256);
        c.dropout = 0.1f;
        c.cap = 30.f;
        add(c, 1);
        c = cfg_batch(B, 2, 4, 2, 129, 129, 40);   /* the portable set has bf16 rows here */
        c.dropout = 0.6f;
        c.set = &portable_set;
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 300, 500, 128);   /* the first problem on both pipelines */
        c.dropout = 0.2f;
        cfg_mask(&c, BR, -1, 0);
        c.set = &portable_set;
        add(c, 0);
        c = cfg_batch(F, 2, 6, 3, 257, 384, 64);
        c.dropout = 0.3f;
        cfg_mask(&c, BR, 100, 20);
        add(c, 0);
        c = cfg_group(B, 4, gq, gk, 4, 2, 256);
        c.dropout = 0.15f;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 190, 333, 128);   /* seed and offset from device memory */
        c.dropout = 0.25f;
        c.drop_rng = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.set = &portable_set;
        add(c, 0);
        /* hdim 64 on the wgmma DROPOUT rows: no mask, causal with GQA, a
         * padded head dim, device seed and offset; a set without DROPOUT
         * rows (portable_set) agrees */
        c = cfg_batch(B, 2, 8, 2, 333, 520, 64);
        c.dropout = 0.2f;
        add(c, 1);
        c.set = &portable_set;
        add(c, 0);
        c = cfg_batch(F, 2, 8, 1, 300, 300, 64);
        c.dropout = 0.4f;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 3, 4, 2, 129, 200, 40);
        c.dropout = 0.1f;
        c.drop_rng = 1;
        cfg_mask(&c, TL, 30, 10);
        add(c, 0);
        /* 17 key tiles of draws (hdim 128), a masked hdim-64 DROPOUT row
         * over 6, and dropout with an elementwise bias (the hdim-128 BIAS
         * row carries dropout too) */
        c = cfg_batch(B, 1, 4, 2, 200, 2100, 128);
        c.dropout = 0.3f;
        add(c, 1);
        c = cfg_batch(F, 2, 4, 2, 150, 700, 64);
        c.dropout = 0.2f;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 260, 600, 128);
        c.dropout = 0.2f;
        c.bias = 1; c.bias_dt = B;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        /* hdim 128 in group mode with an empty entry, fp16, a window */
        {
            static const int lq[3] = { 300, 0, 129 }, lk[3] = { 700, 5, 129 };
            c = cfg_group(F, 3, lq, lk, 4, 2, 128);
            c.dropout = 0.35f;
            cfg_mask(&c, BR, 200, 0);
            add(c, 1);
        }
    }

    /* 15. elementwise bias (BIAS rows): fp16/bf16/fp32 bias, per head or
     * shared over batch entries and/or heads (strides 0), group mode with
     * packed rows (seqstart_q[b] + i), causal and window masks with fully
     * masked rows, soft cap + bias, GQA, sinks, LSE off, odd sizes and
     * head dims, odd bias rows (element loads), -1e4 entries (a padding
     * mask) and -inf entries (rows of all -inf: O = 0, LSE = -inf); the
     * default set (the wgmma pipeline on Hopper for hdim <= 128), the
     * portable set, and hdim 256 (the portable pipeline serves it). */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        static const int hq[3] = { 33, 64, 7 }, hk[3] = { 40, 1, 129 };
        fwd_cfg c = cfg_batch(B, 2, 8, 2, 300, 500, 128);
        c.bias = 1; c.bias_dt = B;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.set = &portable_set;                        /* the same problem, portable */
        add(c, 0);
        c = cfg_batch(F, 2, 4, 4, 257, 129, 64);
        c.bias = 2; c.bias_dt = F;
        add(c, 0);
        c = cfg_batch(B, 3, 6, 2, 190, 333, 128);
        c.bias = 3; c.bias_dt = FMHA_DTYPE_FP32; c.bias_kind = 1;
        cfg_mask(&c, TL, 50, 20);
        add(c, 1);
        c = cfg_batch(F, 2, 4, 1, 65, 1000, 96);
        c.bias = 4; c.bias_dt = FMHA_DTYPE_FP32;
        add(c, 0);
        c = cfg_group(B, 4, gq, gk, 4, 2, 128);
        c.bias = 1; c.bias_dt = B; c.bias_kind = 2;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_group(F, 3, hq, hk, 4, 4, 64);
        c.bias = 3; c.bias_dt = F; c.bias_kind = 1; c.bias_pad = 1;
        add(c, 0);
        c = cfg_group(B, 4, gq, gk, 4, 1, 256);
        c.bias = 2; c.bias_dt = FMHA_DTYPE_FP32;
        c.set = &bias_set;
        cfg_mask(&c, BR, 64, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 200, 260, 256);
        c.bias = 1; c.bias_dt = B;
        c.set = &bias_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(F, 1, 4, 4, 129, 77, 256);
        c.bias = 1; c.bias_dt = FMHA_DTYPE_FP32; c.bias_kind = 2; c.bias_pad = 3;
        c.set = &bias_set;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 300, 300, 128);     /* soft cap + bias */
        c.cap = 30.f;
        c.bias = 1; c.bias_dt = B;
        c.set = &bias_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(F, 2, 4, 2, 200, 100, 64);      /* top-left window: rows from 120 on see nothing */
        c.bias = 1; c.bias_dt = F; c.bias_kind = 2; c.bias_pad = 1;
        c.set = &portable_set;
        cfg_mask(&c, TL, 20, 0);
        add(c, 1);
        c = cfg_batch(F, 2, 4, 1, 200, 100, 64);      /* the same on the default set */
        c.bias = 1; c.bias_dt = F; c.bias_kind = 2; c.bias_pad = 1;
        cfg_mask(&c, TL, 20, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 16, 1, 1000, 1000, 64);   /* GQA 16, causal, a padding mask */
        c.bias = 3; c.bias_dt = B; c.bias_kind = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 3, 1, 33, 45, 8);         /* hdim 8, odd lengths */
        c.bias = 1; c.bias_dt = B;
        add(c, 0);
        c = cfg_batch(B, 3, 2, 2, 1, 1, 128);         /* one query, one key */
        c.bias = 1; c.bias_dt = FMHA_DTYPE_FP32; c.bias_pad = 1;
        c.lse = 0;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 17, 3, 40);         /* s_q > s_k causal: masked rows */
        c.bias = 2; c.bias_dt = F;
        cfg_mask(&c, BR, -1, 0);
        c.iperm = c.operm = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 512, 2400, 64);     /* [1, h, s, s] past the L2 (39 MB): launch-order */
        c.bias = 2; c.bias_dt = FMHA_DTYPE_FP32;      /* groups, pairs batch entry fastest */
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 257, 257, 128);     /* sinks + bias */
        c.sinks = 1;
        c.bias = 1; c.bias_dt = B;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 190, 333, 128);     /* through a captured graph */
        c.bias = 4; c.bias_dt = B; c.bias_kind = 1;
        c.graph = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        /* 16-bit bias rows of a multiple of 8 elements (16-byte strides) in
         * batch mode: the wgmma pipeline copies the bias tiles by TMA
         * (partial query and key tiles land as zeros; every layout, -1e4 and
         * -inf entries, masks, GQA, a captured graph) */
        c = cfg_batch(B, 2, 8, 2, 333, 520, 128);
        c.bias = 1; c.bias_dt = B;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(F, 3, 4, 4, 130, 264, 128);
        c.bias = 2; c.bias_dt = F; c.bias_kind = 2;
        cfg_mask(&c, TL, 50, 20);
        add(c, 1);
        c = cfg_batch(B, 2, 4, 2, 200, 136, 64);
        c.bias = 3; c.bias_dt = B; c.bias_kind = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 6, 3, 129, 1032, 128);
        c.bias = 4; c.bias_dt = F;
        add(c, 1);
        c = cfg_batch(B, 1, 4, 2, 513, 512, 64);
        c.bias = 2; c.bias_dt = B; c.bias_kind = 2;
        cfg_mask(&c, BR, -1, 0);
        c.sinks = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 1, 64, 8, 112);
        c.bias = 1; c.bias_dt = F;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 256, 384, 128);
        c.bias = 1; c.bias_dt = B; c.bias_kind = 1;
        c.graph = 1;
        add(c, 0);
    }

    /* 16. head dims: hdim_v < hdim_q (DeepSeek MLA prefill's 192 / 128: the
     * default set's 192_128 rows; V rows narrower than Q's, O as wide as V)
     * and the 192 kernel (hd_set). Masks with fully masked rows, GQA, group
     * mode with empty entries, odd lengths, padded strides and both layouts,
     * sinks, dropout, LSE on and off, graph capture; problems below the
     * kernel's dims (176 / 96 on 192_128), and V padded inside kernels of one
     * head dim (128 / 64 on the 128 kernel, 256 / 128 on the 256 kernel; on
     * Hopper both pipelines: the wgmma rows from the default set, the
     * portable ones from portable_set). */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        static const int vq[5] = { 300, 1, 64, 97, 0 }, vk[5] = { 700, 65, 64, 1, 33 };
        fwd_cfg c = cfg_batch(B, 2, 8, 2, 255, 300, 192);
        c.dv = 128;
        add(c, 1);
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(F, 2, 4, 4, 300, 100, 192);     /* s_q > s_k causal: top-left masks rows */
        c.dv = 128;
        cfg_mask(&c, TL, -1, 0);
        add(c, 1);
        c.dtype = B;
        cfg_mask(&c, BR, -1, 0);                       /* bottom-right: the first 200 rows see nothing */
        add(c, 0);
        c = cfg_group(F, 4, gq, gk, 4, 1, 192);       /* varlen, empty entries, GQA 4 */
        c.dv = 128;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_group(B, 5, vq, vk, 16, 1, 192);      /* GQA 16, decode-like and empty rows */
        c.dv = 128;
        c.maxq_slack = 40;
        add(c, 0);
        c = cfg_batch(B, 1, 2, 2, 1000, 1000, 192);   /* window and sinks */
        c.dv = 128;
        cfg_mask(&c, TL, 16, 0);
        c.sinks = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 257, 257, 192);     /* dropout */
        c.dv = 128;
        c.dropout = 0.2f;
        add(c, 1);
        c = cfg_batch(B, 2, 6, 3, 129, 77, 192);      /* bhsd in, bshd out, padded rows, no LSE */
        c.dv = 128;
        c.iperm = 1; c.pad = 8; c.lse = 0;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 3, 2, 1, 1, 1, 192);         /* one query, one key; no key */
        c.dv = 128;
        add(c, 0);
        c.sk = 0;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 17, 33, 176);       /* below the kernel's dims */
        c.dv = 96;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(F, 2, 4, 2, 100, 300, 192);     /* through a captured graph */
        c.dv = 128;
        c.graph = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 16, 1, 67, 300, 128);     /* V padded in the 128 kernel */
        c.dv = 64;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(B, 2, 4, 2, 130, 129, 256);     /* V padded in the 256 kernel */
        c.dv = 128;
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 300, 257, 128);     /* ... in the portable 128 kernel */
        c.dv = 64;
        c.set = &portable_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 190, 333, 128);     /* (128, 64) with an elementwise bias */
        c.dv = 64;
        c.bias = 1; c.bias_dt = B;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 333, 517, 192);     /* hd_set: 192 kernel, odd lengths */
        c.set = &hd_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.dtype = F;
        cfg_mask(&c, NO, -1, -1);
        add(c, 0);
        c = cfg_group(F, 4, gq, gk, 4, 2, 192);
        c.set = &hd_set;
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 100, 100, 160);      /* 160 on the 192 kernel */
        c.set = &hd_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 200, 300, 192);      /* (192, 128) on a 192 kernel: V padded */
        c.set = &hd_set;
        c.dv = 128;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 200, 300, 192);      /* 192_128 with soft cap and ALiBi */
        c.set = &hd_set;
        c.dv = 128;
        c.cap = 30.f; c.alibi = 2;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
    }

    /* 17. head dims 32 and 96 (tile rows padded to 64 / 128 columns of
     * shared memory, the wgmma kernels' last 64-column panel half used) and
     * the odd dims that land on them: the default set (on Hopper the wgmma
     * 32 / 96 kernels, dropout on the portable 32 and wgmma 64 / 128 ones;
     * elsewhere the portable 32 / 64 / 96 kernels) and hd32_set (the
     * portable 32 and 96 kernels on every arch). Masks, GQA, varlen with
     * empty entries, odd lengths, soft cap, ALiBi, bias, dropout, sinks,
     * layouts, LSE off, graph capture, no key. */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        static const int vq[5] = { 300, 1, 64, 97, 0 }, vk[5] = { 700, 65, 64, 1, 33 };
        fwd_cfg c = cfg_batch(B, 2, 8, 2, 255, 300, 32);   /* default set */
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_group(F, 4, gq, gk, 4, 1, 24);
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 333, 517, 96);
        add(c, 1);
        c = cfg_batch(F, 1, 2, 2, 1000, 1000, 72);
        cfg_mask(&c, TL, 16, 0);
        c.sinks = 1;
        add(c, 0);
        c = cfg_group(B, 5, vq, vk, 16, 1, 88);
        c.maxq_slack = 40;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 257, 257, 40);
        c.dropout = 0.2f;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 257, 257, 96);            /* dropout at 96: the 128 kernels */
        c.dropout = 0.2f;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 4, 4, 300, 100, 96);            /* s_q > s_k causal, top-left */
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 8, 1, 1000, 1000, 96);          /* many key tiles, MQA */
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 6, 3, 129, 77, 80);             /* bhsd in, padded rows, no LSE */
        c.iperm = 1; c.pad = 8; c.lse = 0;
        add(c, 0);
        c = cfg_batch(F, 3, 2, 1, 1, 1, 32);                /* one query, one key; no key */
        add(c, 0);
        c.sk = 0;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 100, 300, 16);            /* through a captured graph */
        c.graph = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 4, 1, 1000, 1000, 32);          /* many key tiles, window */
        cfg_mask(&c, BR, 100, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 255, 300, 96);            /* hd32_set: portable 96 */
        c.set = &hd32_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(B, 2, 4, 4, 300, 100, 96);            /* s_q > s_k causal, top-left */
        c.set = &hd32_set;
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
        c = cfg_group(F, 4, gq, gk, 4, 1, 96);              /* varlen, empty entries, GQA 4 */
        c.set = &hd32_set;
        add(c, 0);
        c = cfg_group(B, 5, vq, vk, 16, 1, 88);             /* GQA 16, decode-like rows */
        c.set = &hd32_set;
        c.maxq_slack = 40;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 2, 2, 1000, 1000, 88);          /* window and sinks */
        c.set = &hd32_set;
        cfg_mask(&c, TL, 16, 0);
        c.sinks = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 200, 300, 72);            /* soft cap and ALiBi */
        c.set = &hd32_set;
        c.cap = 30.f; c.alibi = 2;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(B, 2, 4, 2, 190, 333, 96);            /* elementwise bias */
        c.set = &hd32_set;
        c.bias = 1; c.bias_dt = B;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 257, 257, 96);            /* dropout */
        c.set = &hd32_set;
        c.dropout = 0.2f;
        add(c, 0);
        c = cfg_batch(B, 2, 6, 3, 129, 77, 40);             /* bhsd in, padded rows, no LSE */
        c.set = &hd32_set;
        c.iperm = 1; c.pad = 8; c.lse = 0;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 3, 2, 1, 1, 1, 96);                /* one query, one key; no key */
        c.set = &hd32_set;
        add(c, 0);
        c.sk = 0;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 100, 300, 96);            /* through a captured graph */
        c.set = &hd32_set;
        c.graph = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 517, 333, 32);            /* portable 32 */
        c.set = &hd32_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_group(F, 4, gq, gk, 4, 2, 24);
        c.set = &hd32_set;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 200, 300, 32);            /* soft cap and ALiBi */
        c.set = &hd32_set;
        c.cap = 30.f; c.alibi = 2;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 1, 1, 1000, 8);              /* one query row, d 8 */
        c.set = &hd32_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 257, 257, 32);            /* dropout */
        c.set = &hd32_set;
        c.dropout = 0.2f;
        add(c, 0);
        c = cfg_batch(B, 1, 4, 1, 1000, 1000, 32);          /* many key tiles, window */
        c.set = &hd32_set;
        cfg_mask(&c, BR, 100, 0);
        add(c, 0);
    }
}

/* ============================================================================
 * Tensor layouts
 * ========================================================================== */

typedef struct tlayout {
    int64_t row, head, batch;   /* strides in elements               */
    size_t n;                   /* elements in the buffer            */
} tlayout;

/* Q/K/V/O buffer for `rows` rows (per batch entry, or total in group mode),
 * h heads of d values: perm 0 = [b][s][h][d], perm 1 = [b][h][s][d]. A padded
 * layout also leaves a gap of 16 elements between heads (bhsd) or batch entries,
 * so no stride is derivable from another. */
static tlayout layout_make(int group, int batch, int rows, int h, int d, int perm, int pad)
{
    tlayout L;
    int64_t dp = d + pad, gap = pad ? 16 : 0, r = rows > 0 ? rows : 1;
    if (!perm) {
        L.row = h * dp;
        L.head = dp;
        L.batch = r * h * dp + gap;
    } else {
        L.row = dp;
        L.head = r * dp + gap;
        L.batch = h * L.head + gap;
    }
    if (group) {
        L.n = (size_t)(perm ? h * L.head : r * h * dp);
        L.batch = 0;            /* ignored in group mode */
    } else {
        L.n = (size_t)(batch * L.batch);
    }
    return L;
}

/* ============================================================================
 * One forward problem
 * ========================================================================== */

typedef struct fwd_run {
    int sq[MAXB], sk[MAXB];
    int32_t ssq[MAXB + 1], ssk[MAXB + 1];
    int tq, tk, maxq, maxk;
    tlayout lq, lk, lv, lo;
    int64_t lse_head, lse_batch;
    size_t n_lse, n_slopes;
    /* host */
    float *qf, *kf, *vf, *ref_o, *ref_lse, *slopes, *sinks;
    uint16_t *qh, *kh, *vh, *oh, *oh_all;
    uint32_t *lseh, *lseh_all;
    unsigned char *o_logical, *lse_logical, *o_logical_all, *lse_logical_all;
    /* device; O and LSE sit GUARD elements inside their allocations */
    void *dq, *dk, *dv, *dout, *dout_all;
    float *dlse, *dlse_all, *dslopes, *dsinks;
    int32_t *dssq, *dssk;
    uint64_t *drng;   /* {seed, offset} for dropout_rng */
    /* elementwise bias: float values for the reference, the stored bytes */
    int64_t b_row, b_head, b_batch;
    size_t n_bias;
    float *biasf;
    unsigned char *biasraw;
    void *dbias;
} fwd_run;

static void run_free(fwd_run *r)
{
    free(r->qf); free(r->kf); free(r->vf); free(r->ref_o); free(r->ref_lse); free(r->slopes); free(r->sinks);
    free(r->qh); free(r->kh); free(r->vh); free(r->oh_all); free(r->lseh_all);
    free(r->o_logical_all); free(r->lse_logical_all);
    tu_dfree(r->dq); tu_dfree(r->dk); tu_dfree(r->dv); tu_dfree(r->dout_all);
    tu_dfree(r->dlse_all); tu_dfree(r->dslopes); tu_dfree(r->dsinks); tu_dfree(r->dssq); tu_dfree(r->dssk);
    tu_dfree(r->drng);
    free(r->biasf); free(r->biasraw); tu_dfree(r->dbias);
}

/* Fills reference-problem fields that mirror the GPU arguments. */
static void make_ref(const fwd_cfg *c, fwd_run *r, fmha_ref_fwd *p)
{
    memset(p, 0, sizeof(*p));
    p->is_group_mode = c->group;
    p->batch = c->batch; p->nhead_q = c->hq; p->nhead_k = c->hk;
    p->seqlen_q = c->sq; p->seqlen_k = c->sk;
    p->seqstart_q = r->ssq; p->seqstart_k = r->ssk;
    p->hdim_q = c->d;
    p->hdim_v = cfg_dv(c);
    p->q = r->qf; p->k = r->kf; p->v = r->vf; p->o = r->ref_o; p->lse = r->ref_lse;
    p->stride_q = r->lq.row; p->nhead_stride_q = r->lq.head; p->batch_stride_q = r->lq.batch;
    p->stride_k = r->lk.row; p->nhead_stride_k = r->lk.head; p->batch_stride_k = r->lk.batch;
    p->stride_v = r->lv.row; p->nhead_stride_v = r->lv.head; p->batch_stride_v = r->lv.batch;
    p->stride_o = r->lo.row; p->nhead_stride_o = r->lo.head; p->batch_stride_o = r->lo.batch;
    p->nhead_stride_lse = r->lse_head; p->batch_stride_lse = r->lse_batch;
    p->scale = c->scale > 0 ? c->scale : 1.0f / sqrtf((float)c->d);
    p->logits_soft_cap = c->cap;
    p->alibi_slopes = c->alibi ? r->slopes : NULL;
    p->alibi_batch_stride = c->alibi == 2 ? c->hq + 3 : 0;   /* padded per-batch rows */
    p->mask_type = (int)c->mask;
    p->window_left = c->wl; p->window_right = c->wr;
    p->sinks = c->sinks ? r->sinks : NULL;
    p->dropout_p = c->dropout;
    p->dropout_seed = 0x9e3779b97f4a7c15ull;
    p->dropout_offset = (uint64_t)c->batch * 1000 + (uint64_t)c->hq;   /* some offset; high word 0 */
}

/* Random logical values into the float and 16-bit copies of one tensor; the
 * rest of the buffer is input poison (NaN). */
static void fill_tensor(fmha_ref_rng *rng, const fmha_ref_fwd *p, int which, float amp, int is_bf16,
                        float *f, uint16_t *h, size_t n, int nheads, const int *lens)
{
    size_t i;
    int b, hh, row, x;
    for (i = 0; i < n; i++) { h[i] = TU_POISON_IN16; f[i] = NAN; }
    for (b = 0; b < p->batch; b++)
        for (hh = 0; hh < nheads; hh++)
            for (row = 0; row < lens[b]; row++) {
                int64_t off = which == 0 ? fmha_ref_off_q(p, b, hh, row)
                            : which == 1 ? fmha_ref_off_k(p, b, hh, row) : fmha_ref_off_v(p, b, hh, row);
                for (x = 0; x < (which == 2 ? p->hdim_v : p->hdim_q); x++) {
                    uint16_t u = fmha_ref_f32_to_bits16(fmha_ref_rng_input(rng, amp), is_bf16);
                    h[off + x] = u;
                    f[off + x] = fmha_ref_bits16_to_f32(u, is_bf16);
                }
            }
}

static void make_args(const fwd_cfg *c, const fwd_run *r, const fmha_ref_fwd *p, fmha_fwd_args *a)
{
    memset(a, 0, sizeof(*a));
    a->dtype = c->dtype;
    a->is_group_mode = c->group;
    a->batch = c->batch; a->nhead_q = c->hq; a->nhead_k = c->hk;
    a->seqlen_q = c->group ? r->maxq : c->sq;
    a->seqlen_k = c->group ? r->maxk : c->sk;
    a->max_seqlen_q = (c->group ? r->maxq : c->sq) + c->maxq_slack;
    a->hdim_q = c->d;
    a->hdim_v = cfg_dv(c);
    a->q = r->dq; a->k = r->dk; a->v = r->dv; a->o = r->dout;
    a->lse = c->lse ? r->dlse : NULL;
    a->seqstart_q = c->group ? r->dssq : NULL;
    a->seqstart_k = c->group ? r->dssk : NULL;
    a->stride_q = r->lq.row; a->nhead_stride_q = r->lq.head; a->batch_stride_q = r->lq.batch;
    a->stride_k = r->lk.row; a->nhead_stride_k = r->lk.head; a->batch_stride_k = r->lk.batch;
    a->stride_v = r->lv.row; a->nhead_stride_v = r->lv.head; a->batch_stride_v = r->lv.batch;
    a->stride_o = r->lo.row; a->nhead_stride_o = r->lo.head; a->batch_stride_o = r->lo.batch;
    a->nhead_stride_lse = r->lse_head; a->batch_stride_lse = r->lse_batch;
    a->scale = p->scale;
    a->logits_soft_cap = c->cap;
    a->alibi_slopes = c->alibi ? r->dslopes : NULL;
    a->alibi_batch_stride = p->alibi_batch_stride;
    a->mask_type = c->mask;
    a->window_left = c->wl;
    a->window_right = c->wr;
    a->sinks = c->sinks ? r->dsinks : NULL;
    a->dropout_p = p->dropout_p;
    a->dropout_seed = p->dropout_seed;
    a->dropout_offset = p->dropout_offset;
    if (c->bias) {
        a->bias = r->dbias;
        a->bias_dtype = c->bias_dt;
        a->stride_bias = r->b_row; a->nhead_stride_bias = r->b_head;
        /* group mode ignores the batch stride: pass a wrong one */
        a->batch_stride_bias = c->group ? 12345 : r->b_batch;
    }
    if (c->drop_rng) {   /* the values only in device memory; the fields wrong on purpose */
        a->dropout_rng = r->drng;
        a->dropout_seed = ~p->dropout_seed;
        a->dropout_offset = p->dropout_offset + 12345;
    }
}

/* The bias of a problem: rows of max_k + bias_pad elements; a gap of 8
 * between heads and batch entries (no stride derivable from another);
 * group mode packs the sequences' rows (row seqstart_q[b] + i). Elements
 * no (b, h, i, j < s_k) names hold NaN (fp32) or 16-bit input poison: the
 * kernels must not read them. Shared layouts write each stored element
 * once (batch entry 0 / head 0). */
static void make_bias(const fwd_cfg *c, fwd_run *r, fmha_ref_fwd *p, fmha_ref_rng *rng)
{
    const int f32 = c->bias_dt == FMHA_DTYPE_FP32, bf = c->bias_dt == FMHA_DTYPE_BF16;
    const int rows = c->group ? (r->tq > 0 ? r->tq : 1) : (c->sq > 0 ? c->sq : 1);
    const int share_b = c->bias == 2 || c->bias == 4, share_h = c->bias == 3 || c->bias == 4;
    const int nh = share_h ? 1 : c->hq, nbat = (c->group || share_b) ? 1 : c->batch;
    const int64_t hb = (int64_t)rows * (r->maxk + c->bias_pad) + 8;
    size_t i;
    int b, h, row, j;
    r->b_row = r->maxk + c->bias_pad;
    r->b_head = share_h ? 0 : hb;
    r->b_batch = (c->group || share_b) ? 0 : nh * hb + 8;
    r->n_bias = (size_t)(nbat * (nh * hb + 8));
    r->biasf = (float *)tu_hmalloc(r->n_bias * 4);
    r->biasraw = (unsigned char *)tu_hmalloc(r->n_bias * 4);
    for (i = 0; i < r->n_bias; i++) {
        r->biasf[i] = NAN;
        if (f32) { const float nan = NAN; memcpy(r->biasraw + 4 * i, &nan, 4); }
        else { const uint16_t u = TU_POISON_IN16; memcpy(r->biasraw + 2 * i, &u, 2); }
    }
    p->bias = r->biasf;
    p->stride_bias = r->b_row; p->nhead_stride_bias = r->b_head; p->batch_stride_bias = r->b_batch;
    for (b = 0; b < (share_b && !c->group ? 1 : c->batch); b++)
        for (h = 0; h < nh; h++)
            for (row = 0; row < r->sq[b]; row++) {
                /* kind 2: every third row of head 0 (of a batch entry) is all -inf */
                const int row_inf = c->bias_kind == 2 && h == 0 && row % 3 == 1;
                for (j = 0; j < r->sk[b]; j++) {
                    const int64_t off = fmha_ref_off_bias(p, b, h, row, j);
                    /* key 0 is never hidden by -1e4: a row's LSE stays near
                     * its scores (at -1e4 fp32 keeps 3 decimals) */
                    const int hide = c->bias_kind && fmha_ref_rng_unit(rng) < 0.25 && (c->bias_kind == 2 || j > 0);
                    float v = fmha_ref_rng_uniform(rng, -3.0f, 3.0f);
                    if (hide || row_inf) v = c->bias_kind == 1 ? -1e4f : -INFINITY;
                    if (c->bias_kind == 1 && hide) v += fmha_ref_rng_uniform(rng, -1.0f, 1.0f);
                    if (f32) {
                        memcpy(r->biasraw + 4 * off, &v, 4);
                    } else {
                        const uint16_t u = fmha_ref_f32_to_bits16(v, bf);
                        memcpy(r->biasraw + 2 * off, &u, 2);
                        v = fmha_ref_bits16_to_f32(u, bf);
                    }
                    r->biasf[off] = v;
                }
            }
}

/* Kernel head dims selection must pick: among the set's kernels of the
 * problem's dtype and soft cap / ALiBi / bias columns whose hdim >= d and
 * hdim_v >= dv, the least padding (hdim - d) + (hdim_v - dv). *hd = 0: none. */
/* The least-padding kernel of the chosen kernel's arch (pipeline): across
 * pipelines the head-dim rule decides (host test_dispatch checks it). */
static void expected_kernel_dims(const fmha_kernel_set *set, const fwd_cfg *c, fmha_arch arch, int *hd, int *hdv)
{
    int i, best = -1, n = fmha_set_size(set);
    const int d = c->d, dv = cfg_dv(c);
    *hd = *hdv = 0;
    for (i = 0; i < n; i++) {
        const fmha_kernel_info *k = fmha_set_kernel(set, i);
        const int khv = k && k->hdim_v ? k->hdim_v : k ? k->hdim : 0;
        /* the wgmma pipeline carries dropout in its hdim-128 kernel and DROPOUT rows only */
        if (k && c->dropout > 0 && k->arch == FMHA_ARCH_SM90A && !k->has_dropout && !(k->hdim == 128 && khv == 128))
            continue;
        if (!k || k->family != FMHA_FAMILY_FWD || k->arch != arch || k->dtype != c->dtype || k->hdim < d || khv < dv ||
            k->has_softcap != (c->cap > 0) || k->has_alibi != (c->alibi != 0) || k->has_bias != (c->bias != 0))
            continue;
        if (best < 0 || (k->hdim - d) + (khv - dv) < best) {
            best = (k->hdim - d) + (khv - dv);
            *hd = k->hdim; *hdv = khv;
        }
    }
}

/* A mask type with window (-1, -1) hides nothing: any kernel may serve it. */
static int cfg_masked(const fwd_cfg *c) { return c->mask != FMHA_MASK_NONE && (c->wl >= 0 || c->wr >= 0); }

/* " [kernel=... grid=...]" for FAIL lines. */
static const char *plan_str(const fmha_kernel_set *set, const fmha_fwd_args *a)
{
    static char buf[768];
    fmha_fwd_plan plan;
    fmha_status st;
    memset(&plan, 0, sizeof(plan));
    st = fmha_fwd_check(set, a, &plan);
    if (st != FMHA_OK || !plan.kernel)
        snprintf(buf, sizeof(buf), " [no plan: %s: %s]", fmha_status_str(st), fmha_last_error());
    else
        snprintf(buf, sizeof(buf), " [kernel=%s grid=%d,%d,%d block=%d]", plan.kernel->name, plan.grid_x,
                 plan.grid_y, plan.grid_z, plan.block);
    return buf;
}

/* Tolerances (design brief: rel-L2 fp16 2e-3, bf16 1e-2). The max-abs bound
 * only catches a few badly wrong elements that rel-L2 would average away. */
/* LSE is fp32 from fp32 scores; soft cap adds tanh approximation error. */
static double tol_lse(const fwd_cfg *c) { return c->cap > 0 ? 5e-3 : 2e-3; }

typedef struct fwd_launch {
    const fmha_kernel_set *set;
    const fmha_fwd_args *a;
} fwd_launch;

/* Enqueues fmha_fwd for tu_launch_graph: 0 on success, else fills why. */
static int enqueue_test_fwd(const void *ctx, cudaStream_t st, char *why, size_t cap)
{
    const fwd_launch *l = (const fwd_launch *)ctx;
    fmha_status s = fmha_fwd(l->set, l->a, (void *)st);
    if (s == FMHA_OK) return 0;
    snprintf(why, cap, "fmha_fwd under capture: %s: %s", fmha_status_str(s), fmha_last_error());
    return -1;
}

/* Launches through a captured graph. Returns 0 on success, else fills why. */
static int launch_graph(const fmha_kernel_set *set, const fmha_fwd_args *a, cudaStream_t st, char *why, size_t cap)
{
    fwd_launch l;
    l.set = set;
    l.a = a;
    return tu_launch_graph(enqueue_test_fwd, &l, st, why, cap);
}

static void run_config(const fwd_cfg *c, cudaStream_t stream, uint64_t seed)
{
    const fmha_kernel_set *set = c->set ? c->set : &fmha_default;
    const int is_bf16 = c->dtype == FMHA_DTYPE_BF16;
    fwd_run r;
    fmha_ref_fwd p;
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmha_ref_rng rng = fmha_ref_rng_make(seed);
    fmha_ref_err err;
    fmha_status st;
    char why[1024] = "";
    size_t i, n_unwritten = 0, n_nan = 0, n_masked_bad = 0, n_pad = 0, n_lse_bad = 0, n_lse_pad = 0;
    double rel;
    int b, h, row, x, want_hd, want_hdv;

    tu_current = c->name;
    memset(&r, 0, sizeof(r));

    /* lengths and prefix sums */
    for (b = 0; b < c->batch; b++) {
        r.sq[b] = c->group ? c->lq[b] : c->sq;
        r.sk[b] = c->group ? c->lk[b] : c->sk;
        r.ssq[b] = r.tq; r.ssk[b] = r.tk;
        r.tq += r.sq[b]; r.tk += r.sk[b];
        if (r.sq[b] > r.maxq) r.maxq = r.sq[b];
        if (r.sk[b] > r.maxk) r.maxk = r.sk[b];
    }
    r.ssq[c->batch] = r.tq; r.ssk[c->batch] = r.tk;

    /* layouts: K and V get different padding from Q and O */
    r.lq = layout_make(c->group, c->batch, c->group ? r.tq : c->sq, c->hq, c->d, c->iperm, c->pad);
    r.lk = layout_make(c->group, c->batch, c->group ? r.tk : c->sk, c->hk, c->d, c->iperm, c->pad);
    r.lv = layout_make(c->group, c->batch, c->group ? r.tk : c->sk, c->hk, cfg_dv(c), c->iperm, c->pad ? c->pad + 8 : 0);
    r.lo = layout_make(c->group, c->batch, c->group ? r.tq : c->sq, c->hq, cfg_dv(c), c->operm, c->pad);
    if (c->group) {
        r.lse_head = (r.tq > 0 ? r.tq : 1) + c->lse_pad;
        r.lse_batch = 0;
        r.n_lse = (size_t)(c->hq * r.lse_head);
    } else {
        r.lse_head = (c->sq > 0 ? c->sq : 1) + c->lse_pad;
        r.lse_batch = c->hq * r.lse_head + c->lse_pad;
        r.n_lse = (size_t)(c->batch * r.lse_batch);
    }

    /* host buffers */
    r.qf = (float *)tu_hmalloc(r.lq.n * 4); r.qh = (uint16_t *)tu_hmalloc(r.lq.n * 2);
    r.kf = (float *)tu_hmalloc(r.lk.n * 4); r.kh = (uint16_t *)tu_hmalloc(r.lk.n * 2);
    r.vf = (float *)tu_hmalloc(r.lv.n * 4); r.vh = (uint16_t *)tu_hmalloc(r.lv.n * 2);
    r.ref_o = (float *)tu_hmalloc(r.lo.n * 4); r.ref_lse = (float *)tu_hmalloc(r.n_lse * 4);
    r.oh_all = (uint16_t *)tu_hmalloc((r.lo.n + 2 * GUARD) * 2);
    r.lseh_all = (uint32_t *)tu_hmalloc((r.n_lse + 2 * GUARD) * 4);
    r.o_logical_all = (unsigned char *)calloc(r.lo.n + 2 * GUARD, 1);
    r.lse_logical_all = (unsigned char *)calloc(r.n_lse + 2 * GUARD, 1);
    r.oh = r.oh_all + GUARD; r.lseh = r.lseh_all + GUARD;
    r.o_logical = r.o_logical_all + GUARD; r.lse_logical = r.lse_logical_all + GUARD;
    r.n_slopes = (size_t)(c->batch * (c->hq + 3));
    r.slopes = (float *)tu_hmalloc(r.n_slopes * 4);
    r.sinks = (float *)tu_hmalloc((size_t)c->hq * 4);
    if (!r.o_logical_all || !r.lse_logical_all) { tu_fail(c->name, "out of host memory"); tu_finish(); }

    make_ref(c, &r, &p);
    /* sinks from below to above the scores' range, so some rows are ruled
     * by their sink and some barely feel it */
    for (h = 0; h < c->hq && c->sinks; h++) r.sinks[h] = fmha_ref_rng_uniform(&rng, -2.0f, 3.0f);
    fill_tensor(&rng, &p, 0, c->amp, is_bf16, r.qf, r.qh, r.lq.n, c->hq, r.sq);
    fill_tensor(&rng, &p, 1, c->amp, is_bf16, r.kf, r.kh, r.lk.n, c->hk, r.sk);
    fill_tensor(&rng, &p, 2, c->amp, is_bf16, r.vf, r.vh, r.lv.n, c->hk, r.sk);
    for (i = 0; i < r.lo.n; i++) r.ref_o[i] = NAN;
    for (i = 0; i < r.n_lse; i++) r.ref_lse[i] = NAN;
    /* ALiBi slopes: the usual geometric ones, varied per batch entry; the
     * padding of per-batch rows is NaN */
    for (b = 0; b < c->batch; b++)
        for (h = 0; h < c->hq + 3; h++)
            r.slopes[b * (c->hq + 3) + h] =
                h < c->hq ? (float)(pow(2.0, -8.0 * (h + 1) / c->hq) * (1.0 + 0.25 * b)) : NAN;
    if (c->bias) make_bias(c, &r, &p, &rng);

    /* device buffers */
    r.dq = tu_dmalloc(r.lq.n * 2); r.dk = tu_dmalloc(r.lk.n * 2); r.dv = tu_dmalloc(r.lv.n * 2);
    r.dout_all = tu_dmalloc((r.lo.n + 2 * GUARD) * 2);
    r.dlse_all = (float *)tu_dmalloc((r.n_lse + 2 * GUARD) * 4);
    r.dout = (uint16_t *)r.dout_all + GUARD;
    r.dlse = r.dlse_all + GUARD;
    r.dslopes = (float *)tu_dmalloc(r.n_slopes * 4);
    r.dsinks = (float *)tu_dmalloc((size_t)c->hq * 4);
    r.dssq = (int32_t *)tu_dmalloc(sizeof(r.ssq));
    r.dssk = (int32_t *)tu_dmalloc(sizeof(r.ssk));
    r.drng = (uint64_t *)tu_dmalloc(2 * sizeof(uint64_t));
    {
        const uint64_t rng[2] = { p.dropout_seed, p.dropout_offset };
        tu_upload(r.drng, rng, sizeof(rng));
    }
    tu_upload(r.dq, r.qh, r.lq.n * 2);
    tu_upload(r.dk, r.kh, r.lk.n * 2);
    tu_upload(r.dv, r.vh, r.lv.n * 2);
    tu_upload(r.dslopes, r.slopes, r.n_slopes * 4);
    tu_upload(r.dsinks, r.sinks, (size_t)c->hq * 4);
    if (c->bias) {
        r.dbias = tu_dmalloc(r.n_bias * (c->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2));
        tu_upload(r.dbias, r.biasraw, r.n_bias * (c->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2));
    }
    tu_upload(r.dssq, r.ssq, sizeof(int32_t) * (c->batch + 1));
    tu_upload(r.dssk, r.ssk, sizeof(int32_t) * (c->batch + 1));
    tu_poison16(r.dout_all, r.lo.n + 2 * GUARD, TU_POISON_OUT16);
    tu_poison32(r.dlse_all, r.n_lse + 2 * GUARD, TU_POISON_LSE);

    make_args(c, &r, &p, &a);

    /* selection: OK, right dtype, smallest fitting hdim, features compiled in */
    memset(&plan, 0, sizeof(plan));
    st = fmha_fwd_check(set, &a, &plan);
    if (st != FMHA_OK || !plan.kernel) {
        tu_fail(c->name, "fmha_fwd_check: %s: %s", fmha_status_str(st), fmha_last_error());
        goto done;
    }
    expected_kernel_dims(set, c, plan.kernel->arch, &want_hd, &want_hdv);
    if (plan.kernel->dtype != c->dtype || plan.kernel->hdim != want_hd || plan.kernel->hdim_v != want_hdv ||
        plan.kernel->has_softcap != (c->cap > 0) || plan.kernel->has_alibi != (c->alibi != 0) ||
        plan.kernel->has_bias != (c->bias != 0) || (cfg_masked(c) && !plan.kernel->has_mask)) {
        tu_fail(c->name, "selected %s, want dtype %s hdim %d hdim_v %d softcap %d alibi %d mask %d", plan.kernel->name,
                dtype_str(c->dtype), want_hd, want_hdv, c->cap > 0, c->alibi != 0, cfg_masked(c));
        goto done;
    }

    /* cudaMemcpy from pageable memory may return before the DMA lands; the
     * kernel runs on a non-blocking stream, so wait for the uploads. */
    TU_CUDA(cudaDeviceSynchronize());
    if (c->graph) {
        /* eager warm-up (the usual pattern before capture), re-poison, capture */
        st = fmha_fwd(set, &a, (void *)stream);
        if (st != FMHA_OK) {
            tu_fail(c->name, "fmha_fwd: %s: %s%s", fmha_status_str(st), fmha_last_error(), plan_str(set, &a));
            goto done;
        }
        TU_CUDA(cudaStreamSynchronize(stream));
        tu_poison16(r.dout_all, r.lo.n + 2 * GUARD, TU_POISON_OUT16);
        tu_poison32(r.dlse_all, r.n_lse + 2 * GUARD, TU_POISON_LSE);
        TU_CUDA(cudaDeviceSynchronize());
        if (launch_graph(set, &a, stream, why, sizeof(why)) != 0) {
            tu_fail(c->name, "%s%s", why, plan_str(set, &a));
            goto done;
        }
    } else {
        st = fmha_fwd(set, &a, (void *)stream);
        if (st != FMHA_OK) {
            tu_fail(c->name, "fmha_fwd: %s: %s%s", fmha_status_str(st), fmha_last_error(), plan_str(set, &a));
            goto done;
        }
        TU_CUDA(cudaGetLastError());
        TU_CUDA(cudaStreamSynchronize(stream));
    }
    tu_download(r.oh_all, r.dout_all, (r.lo.n + 2 * GUARD) * 2);
    tu_download(r.lseh_all, r.dlse_all, (r.n_lse + 2 * GUARD) * 4);

    /* reference (always with LSE: it says which rows are fully masked) */
    if (fmha_ref_fwd_run(&p) != 0) { tu_fail(c->name, "reference: out of memory"); tu_finish(); }

    /* compare every logical element */
    fmha_ref_err_init(&err);
    for (b = 0; b < c->batch; b++)
        for (h = 0; h < c->hq; h++)
            for (row = 0; row < r.sq[b]; row++) {
                int64_t oo = fmha_ref_off_o(&p, b, h, row), lo = fmha_ref_off_lse(&p, b, h, row);
                float rl = r.ref_lse[lo];
                int masked = isinf(rl) && rl < 0;
                for (x = 0; x < cfg_dv(c); x++) {
                    uint16_t u = r.oh[oo + x];
                    float g = fmha_ref_bits16_to_f32(u, is_bf16);
                    r.o_logical[oo + x] = 1;
                    if (u == TU_POISON_OUT16) {
                        if (!n_unwritten++ && !why[0])
                            snprintf(why, sizeof(why), "O not written at b%d h%d row %d col %d", b, h, row, x);
                    } else if (!isfinite(g)) {
                        if (!n_nan++ && !why[0])
                            snprintf(why, sizeof(why), "O = %g (0x%04x) at b%d h%d row %d col %d", g, u, b, h, row, x);
                    } else if (masked && (u & 0x7fffu) != 0) {
                        if (!n_masked_bad++ && !why[0])
                            snprintf(why, sizeof(why), "fully masked row b%d h%d row %d: O[%d] = %g, want 0", b, h, row, x, g);
                    } else {
                        fmha_ref_err_add(&err, g, r.ref_o[oo + x]);
                    }
                }
                if (c->lse) {
                    uint32_t u = r.lseh[lo];
                    float g = fmha_ref_bits_f32(u);
                    r.lse_logical[lo] = 1;
                    if (u == TU_POISON_LSE) {
                        if (!n_lse_bad++ && !why[0])
                            snprintf(why, sizeof(why), "LSE not written at b%d h%d row %d", b, h, row);
                    } else if (masked) {
                        if (!(isinf(g) && g < 0) && !n_lse_bad++ && !why[0])
                            snprintf(why, sizeof(why), "fully masked row b%d h%d row %d: LSE = %g, want -inf", b, h, row, g);
                    } else if (!isfinite(g) || fabs((double)g - rl) > tol_lse(c)) {
                        if (!n_lse_bad++ && !why[0])
                            snprintf(why, sizeof(why), "LSE at b%d h%d row %d = %.7g, want %.7g", b, h, row, g, rl);
                    }
                }
            }
    /* nothing outside the logical tensors may change: padding, and the guard
     * zones before and after each buffer */
    for (i = 0; i < r.lo.n + 2 * GUARD; i++)
        if (!r.o_logical_all[i] && r.oh_all[i] != TU_POISON_OUT16 && !n_pad++ && !why[0])
            snprintf(why, sizeof(why), "O element %lld (outside the logical tensor) overwritten (0x%04x)",
                     (long long)i - GUARD, r.oh_all[i]);
    for (i = 0; i < r.n_lse + 2 * GUARD; i++)
        if (!r.lse_logical_all[i] && r.lseh_all[i] != TU_POISON_LSE && !n_lse_pad++ && !why[0])
            snprintf(why, sizeof(why), "LSE element %lld (outside the logical rows) overwritten (%g)",
                     (long long)i - GUARD, fmha_ref_bits_f32(r.lseh_all[i]));
    /* inputs are read-only */
    if (!why[0] && (!tu_same_on_device(r.dq, r.qh, r.lq.n) || !tu_same_on_device(r.dk, r.kh, r.lk.n) ||
                    !tu_same_on_device(r.dv, r.vh, r.lv.n)))
        snprintf(why, sizeof(why), "an input tensor (Q, K or V) changed");

    rel = fmha_ref_err_rel_l2(&err);
    if (!why[0] && !(rel <= tu_tol_rel_l2(c->dtype == FMHA_DTYPE_BF16)))
        snprintf(why, sizeof(why), "rel-L2 %.3g > %.0e (max abs %.3g)", rel, tu_tol_rel_l2(c->dtype == FMHA_DTYPE_BF16), err.max_abs);
    if (!why[0] && !(err.max_abs <= tu_tol_max_abs(c->dtype == FMHA_DTYPE_BF16, c->amp)))
        snprintf(why, sizeof(why), "max abs error %.3g > %.3g (rel-L2 %.3g)", err.max_abs,
                 tu_tol_max_abs(c->dtype == FMHA_DTYPE_BF16, c->amp), rel);
    if (why[0]) {
        tu_fail(c->name, "%s; counts: unwritten %zu nan %zu masked %zu pad %zu lse %zu lsepad %zu%s", why,
                n_unwritten, n_nan, n_masked_bad, n_pad, n_lse_bad, n_lse_pad, plan_str(set, &a));
    } else {
        tu_pass(c->name);
    }
done:
    run_free(&r);
    tu_current = "";
}

/* ============================================================================
 * API contract checks
 * ========================================================================== */

/* A valid small problem whose buffers are big enough for every mutation below
 * (rows padded to 272 so that hdim 260 would not read out of bounds even if the
 * library wrongly launched). */
typedef struct bad_env {
    fmha_fwd_args base;
    void *dq, *dk, *dv, *dout;
    float *dlse;
    int32_t *dss;
    size_t n_elems, n_lse;
} bad_env;

static void bad_env_make(bad_env *e)
{
    const int b = 2, h = 2, s = 17, dp = 272;
    uint16_t *host;
    size_t i;
    fmha_ref_rng rng = fmha_ref_rng_make(99);
    int32_t ss[3] = { 0, s, 2 * s };
    memset(e, 0, sizeof(*e));
    e->n_elems = (size_t)b * s * h * dp + 64;
    e->n_lse = (size_t)b * h * s;
    e->dq = tu_dmalloc(e->n_elems * 2); e->dk = tu_dmalloc(e->n_elems * 2);
    e->dv = tu_dmalloc(e->n_elems * 2); e->dout = tu_dmalloc(e->n_elems * 2);
    e->dlse = (float *)tu_dmalloc(e->n_lse * 4);
    e->dss = (int32_t *)tu_dmalloc(sizeof(ss));
    host = (uint16_t *)tu_hmalloc(e->n_elems * 2);
    for (i = 0; i < e->n_elems; i++) host[i] = fmha_ref_f32_to_f16(fmha_ref_rng_input(&rng, 1.0f));
    tu_upload(e->dq, host, e->n_elems * 2);
    tu_upload(e->dk, host, e->n_elems * 2);
    tu_upload(e->dv, host, e->n_elems * 2);
    tu_upload(e->dss, ss, sizeof(ss));
    free(host);

    e->base.dtype = FMHA_DTYPE_FP16;
    e->base.batch = b; e->base.nhead_q = h; e->base.nhead_k = h;
    e->base.seqlen_q = s; e->base.seqlen_k = s; e->base.max_seqlen_q = s;
    e->base.hdim_q = e->base.hdim_v = 64;
    e->base.q = e->dq; e->base.k = e->dk; e->base.v = e->dv; e->base.o = e->dout; e->base.lse = e->dlse;
    e->base.stride_q = e->base.stride_k = e->base.stride_v = e->base.stride_o = (int64_t)h * dp;
    e->base.nhead_stride_q = e->base.nhead_stride_k = e->base.nhead_stride_v = e->base.nhead_stride_o = dp;
    e->base.batch_stride_q = e->base.batch_stride_k = e->base.batch_stride_v = e->base.batch_stride_o =
        (int64_t)s * h * dp;
    e->base.nhead_stride_lse = s; e->base.batch_stride_lse = (int64_t)h * s;
    e->base.scale = 0.125f;
    e->base.mask_type = FMHA_MASK_NONE;
    e->base.window_left = e->base.window_right = -1;
}

static void bad_env_free(bad_env *e)
{
    tu_dfree(e->dq); tu_dfree(e->dk); tu_dfree(e->dv); tu_dfree(e->dout); tu_dfree(e->dlse); tu_dfree(e->dss);
}

/* Expects `want` from both fmha_fwd_check and fmha_fwd, a message, and an
 * untouched (poisoned) O and LSE after the stream drains. */
static void expect_status(const char *name, const fmha_kernel_set *set, const fmha_fwd_args *a, bad_env *e,
                          fmha_status want, const char *msg_must_contain, cudaStream_t stream)
{
    fmha_fwd_plan plan;
    fmha_status s1, s2;
    const char *msg;
    char msg_copy[512];
    uint16_t *o;
    uint32_t *l;
    size_t bad_o, bad_l = 0, i;

    if (!tu_selected(name)) return;
    tu_current = name;
    tu_poison16(e->dout, e->n_elems, TU_POISON_OUT16);
    tu_poison32(e->dlse, e->n_lse, TU_POISON_LSE);
    TU_CUDA(cudaDeviceSynchronize());

    memset(&plan, 0, sizeof(plan));
    s1 = fmha_fwd_check(set, a, &plan);
    s2 = fmha_fwd(set, a, (void *)stream);
    msg = fmha_last_error();
    snprintf(msg_copy, sizeof(msg_copy), "%s", msg ? msg : "");
    TU_CUDA(cudaGetLastError());
    TU_CUDA(cudaStreamSynchronize(stream));

    o = (uint16_t *)tu_hmalloc(e->n_elems * 2);
    l = (uint32_t *)tu_hmalloc(e->n_lse * 4);
    tu_download(o, e->dout, e->n_elems * 2);
    tu_download(l, e->dlse, e->n_lse * 4);
    bad_o = tu_count_not16(o, e->n_elems, TU_POISON_OUT16);
    for (i = 0; i < e->n_lse; i++) bad_l += l[i] != TU_POISON_LSE;
    free(o);
    free(l);

    if (s1 != want || s2 != want)
        tu_fail(name, "fmha_fwd_check -> %s, fmha_fwd -> %s, want %s (message: \"%s\")", fmha_status_str(s1),
                fmha_status_str(s2), fmha_status_str(want), msg_copy);
    else if (want != FMHA_OK && !msg_copy[0])
        tu_fail(name, "%s without a message in fmha_last_error()", fmha_status_str(want));
    else if (want != FMHA_OK && (bad_o || bad_l))
        tu_fail(name, "returned %s but wrote %zu O and %zu LSE elements", fmha_status_str(want), bad_o, bad_l);
    else if (msg_must_contain && !strstr(msg_copy, msg_must_contain))
        tu_fail(name, "message \"%s\" does not mention \"%s\"", msg_copy, msg_must_contain);
    else
        tu_pass(name);
    tu_current = "";
}

static void test_bad_inputs(cudaStream_t stream)
{
    bad_env e;
    fmha_fwd_args a;
    bad_env_make(&e);

    a = e.base; expect_status("bad_base_is_valid", &fmha_default, &a, &e, FMHA_OK, NULL, stream);
    a = e.base; expect_status("bad_null_set", NULL, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    if (tu_selected("bad_null_args")) {
        fmha_status s1 = fmha_fwd_check(&fmha_default, NULL, NULL), s2 = fmha_fwd(&fmha_default, NULL, (void *)stream);
        if (s1 == FMHA_ERR_INVALID_ARG && s2 == FMHA_ERR_INVALID_ARG && fmha_last_error()[0]) tu_pass("bad_null_args");
        else tu_fail("bad_null_args", "check -> %s, fwd -> %s", fmha_status_str(s1), fmha_status_str(s2));
    }
    a = e.base; a.q = NULL; expect_status("bad_null_q", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.k = NULL; expect_status("bad_null_k", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.v = NULL; expect_status("bad_null_v", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.o = NULL; expect_status("bad_null_o", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.batch = -1; expect_status("bad_negative_batch", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.seqlen_q = -5; expect_status("bad_negative_seqlen_q", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.seqlen_k = -1; expect_status("bad_negative_seqlen_k", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.nhead_k = 0; expect_status("bad_nhead_k_zero", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.nhead_q = 3; a.nhead_k = 2;
    expect_status("bad_nhead_q_not_multiple_of_nhead_k", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.is_group_mode = 1; a.batch = 2; a.seqstart_q = NULL; a.seqstart_k = e.dss;
    expect_status("bad_group_null_seqstart_q", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.is_group_mode = 1; a.batch = 2; a.seqstart_q = e.dss; a.seqstart_k = NULL;
    expect_status("bad_group_null_seqstart_k", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.scale = 0.0f; expect_status("bad_scale_zero", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.mask_type = (fmha_mask_type)7;
    expect_status("bad_mask_type", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    a = e.base; a.hdim_q = a.hdim_v = 260;
    expect_status("bad_hdim_260", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    a = e.base; a.hdim_q = a.hdim_v = 264;
    expect_status("bad_hdim_264", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    a = e.base; a.hdim_q = a.hdim_v = 60;
    expect_status("bad_hdim_60_not_multiple_of_8", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    a = e.base; a.hdim_v = 128;
    expect_status("bad_hdim_v_gt_hdim_q", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    a = e.base; a.hdim_v = 60;
    expect_status("bad_hdim_v_60", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    /* the FP8 forward has its own rows (FMHA_DEFAULT_FWD_FP8_SET): a 16-bit
     * set has no kernel for it; an unknown dtype is unsupported */
    a = e.base; a.dtype = FMHA_DTYPE_FP8;
    expect_status("fp8_fwd_not_in_16_bit_set", &fmha_default, &a, &e, FMHA_ERR_NO_KERNEL, "differs in dtype", stream);
    a = e.base; a.dtype = (fmha_dtype)7;
    expect_status("bad_dtype_unknown_fwd", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    a = e.base; a.stride_q += 4;
    expect_status("bad_stride_q_not_multiple_of_8", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    a = e.base; a.nhead_stride_v += 2;
    expect_status("bad_nhead_stride_v_not_multiple_of_8", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    a = e.base; a.batch_stride_o += 1;
    expect_status("bad_batch_stride_o_not_multiple_of_8", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);
    a = e.base; a.k = (const uint16_t *)e.dk + 4;   /* 8 bytes: not 16-byte aligned */
    expect_status("bad_k_pointer_misaligned", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, stream);

    /* elementwise bias: bad dtype, misaligned, with fp8, with ALiBi, a set
     * without BIAS rows (e.dk serves as a device buffer to point at) */
    a = e.base; a.bias = e.dk; a.bias_dtype = FMHA_DTYPE_BF16; a.stride_bias = 64;
    expect_status("bias_base_is_valid", &fmha_default, &a, &e, FMHA_OK, NULL, stream);
    a.bias_dtype = FMHA_DTYPE_FP8;
    expect_status("bad_bias_dtype_fp8", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, "bias_dtype", stream);
    a.bias_dtype = FMHA_DTYPE_FP32; a.bias = (const uint16_t *)e.dk + 1;
    expect_status("bad_bias_fp32_misaligned", &fmha_default, &a, &e, FMHA_ERR_INVALID_ARG, "aligned", stream);
    a.bias = e.dk; a.alibi_slopes = (const float *)e.dk;
    expect_status("bad_bias_with_alibi", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, "alibi", stream);
    a = e.base; a.bias = e.dk; a.bias_dtype = FMHA_DTYPE_BF16; a.dtype = FMHA_DTYPE_FP8;
    expect_status("bad_bias_with_fp8", &fmha_default, &a, &e, FMHA_ERR_UNSUPPORTED, "fp8", stream);
    a = e.base; a.dtype = FMHA_DTYPE_BF16; a.hdim_q = a.hdim_v = 128; a.bias = e.dk; a.bias_dtype = FMHA_DTYPE_BF16;
    expect_status("no_kernel_bias_in_set_without_bias_rows", &tiny_set, &a, &e, FMHA_ERR_NO_KERNEL, "differs in bias",
                  stream);

    /* the one-row set: closest kernel named in the message */
    {
        const fmha_kernel_info *k0 = fmha_set_kernel(&tiny_set, 0);
        const char *kname = k0 ? k0->name : "(tiny_set is empty)";
        a = e.base; a.hdim_q = a.hdim_v = 128;          /* fp16 d128: only bf16 exists */
        expect_status("no_kernel_fp16_in_bf16_set", &tiny_set, &a, &e, FMHA_ERR_NO_KERNEL, kname, stream);
        a.dtype = FMHA_DTYPE_BF16; a.logits_soft_cap = 5.0f;  /* no soft cap kernel */
        expect_status("no_kernel_softcap_in_nosoftcap_set", &tiny_set, &a, &e, FMHA_ERR_NO_KERNEL, kname, stream);
        a = e.base; a.dtype = FMHA_DTYPE_BF16; a.hdim_q = a.hdim_v = 256;   /* only d128 */
        expect_status("no_kernel_hdim256_in_d128_set", &tiny_set, &a, &e, FMHA_ERR_NO_KERNEL, kname, stream);
        a = e.base; a.dtype = FMHA_DTYPE_BF16; a.hdim_q = a.hdim_v = 128; a.mask_type = FMHA_MASK_BOTTOM_RIGHT;
        a.window_left = -1; a.window_right = 0;
        expect_status("tiny_set_serves_bf16_d128_causal", &tiny_set, &a, &e, FMHA_OK, NULL, stream);
    }
    bad_env_free(&e);
}

/* Registry, JSON, status strings, enum values the reference relies on. */
static void test_registry(void)
{
    int n = fmha_set_size(&fmha_default), i, dt, hd, m, sc, al, missing = 0;
    static const int hds[3] = { 64, 128, 256 };
    char miss[128] = "";

    if (tu_selected("api_mask_enum_matches_reference")) {
        if ((int)FMHA_MASK_NONE == FMHA_REF_MASK_NONE && (int)FMHA_MASK_TOP_LEFT == FMHA_REF_MASK_TOP_LEFT &&
            (int)FMHA_MASK_BOTTOM_RIGHT == FMHA_REF_MASK_BOTTOM_RIGHT)
            tu_pass("api_mask_enum_matches_reference");
        else
            tu_fail("api_mask_enum_matches_reference", "fmha_mask_type values changed");
    }
    if (tu_selected("api_status_strings")) {
        int ok = 1;
        for (i = FMHA_OK; i <= FMHA_ERR_LAUNCH; i++) {
            const char *s = fmha_status_str((fmha_status)i);
            if (!s || !s[0]) ok = 0;
        }
        if (ok) tu_pass("api_status_strings");
        else tu_fail("api_status_strings", "empty fmha_status_str");
    }
    if (tu_selected("registry_default_set_covers_all_features")) {
        /* every (dtype, hdim, mask, softcap, alibi) of FMHA_DEFAULT_FWD_SET */
        for (dt = 0; dt < 2; dt++)
            for (hd = 0; hd < 3; hd++)
                for (m = 0; m < 2; m++)
                    for (sc = 0; sc < 2; sc++)
                        for (al = 0; al < 2; al++) {
                            int found = 0;
                            for (i = 0; i < n; i++) {
                                const fmha_kernel_info *k = fmha_set_kernel(&fmha_default, i);
                                if (k && (int)k->dtype == dt && k->hdim == hds[hd] && k->has_mask == m &&
                                    k->has_softcap == sc && k->has_alibi == al)
                                    found = 1;
                            }
                            if (!found && !missing++)
                                snprintf(miss, sizeof(miss), "%s d%d mask%d softcap%d alibi%d", dt ? "bf16" : "fp16",
                                         hds[hd], m, sc, al);
                        }
        if (n >= 48 && !missing) tu_pass("registry_default_set_covers_all_features");
        else tu_fail("registry_default_set_covers_all_features", "%d kernels, %d combinations missing (first: %s)",
                     n, missing, miss);
    }
    if (tu_selected("registry_kernel_info_sane")) {
        int bad = -1;
        for (i = 0; i < n && bad < 0; i++) {
            const fmha_kernel_info *k = fmha_set_kernel(&fmha_default, i);
            if (!k || !k->name || !k->name[0] || !k->pipeline || k->family != FMHA_FAMILY_FWD || k->tile_m <= 0 ||
                k->tile_n <= 0 || k->warps <= 0 || k->stages <= 0)
                bad = i;
        }
        if (bad < 0 && fmha_set_kernel(&fmha_default, n) == NULL && fmha_set_kernel(&fmha_default, -1) == NULL)
            tu_pass("registry_kernel_info_sane");
        else tu_fail("registry_kernel_info_sane", "kernel %d has empty fields, or out-of-range index not NULL", bad);
    }
    if (tu_selected("registry_json")) {
        size_t len = fmha_set_json(&fmha_default, NULL, 0), len2, len3;
        char *buf = (char *)tu_hmalloc(len + 1), small[16];
        const char *why = NULL;
        memset(small, 'x', sizeof(small));
        len2 = fmha_set_json(&fmha_default, buf, len + 1);
        len3 = fmha_set_json(&fmha_default, small, 10);
        if (len == 0) why = "empty JSON";
        else if (len2 != len || buf[len] != 0 || strlen(buf) != len) why = "length or NUL terminator wrong";
        else if (len3 != len || small[9] != 0 || small[10] != 'x') why = "truncation with cap 10 wrong";
        else if (buf[0] != '{' && buf[0] != '[') why = "does not start with { or [";
        else
            for (i = 0; i < n && !why; i++)
                if (!strstr(buf, fmha_set_kernel(&fmha_default, i)->name)) why = "a kernel name is missing";
        if (why) tu_fail("registry_json", "%s", why);
        else tu_pass("registry_json");
        free(buf);
    }
    if (tu_selected("registry_tiny_set")) {
        int tn = fmha_set_size(&tiny_set), ok = tn >= 1;
        for (i = 0; i < tn; i++) {
            const fmha_kernel_info *k = fmha_set_kernel(&tiny_set, i);
            if (!k || k->dtype != FMHA_DTYPE_BF16 || k->hdim != 128 || !k->has_mask || k->has_softcap || k->has_alibi)
                ok = 0;
        }
        if (ok) tu_pass("registry_tiny_set");
        else tu_fail("registry_tiny_set", "%d kernels, or one that the row did not ask for", tn);
    }
}

/* ============================================================================
 * main
 * ========================================================================== */

static const char usage_extra[] =
    "  --quick   ~30 problems plus the API checks (for compute-sanitizer)\n"
    "  --filter  run only checks whose name contains SUBSTR\n"
    "  --list    print the problem names and exit\n";

static const char *cfg_name_at(int i) { return g_cfgs[i].name; }
static int cfg_quick_at(int i) { return g_cfgs[i].quick; }
static double cfg_work_at(int i) { return cfg_work(&g_cfgs[i]); }

static void checks(cudaStream_t stream, uint64_t seed)
{
    (void)seed;
    test_registry();
    test_bad_inputs(stream);
}

static void run_at(int i, cudaStream_t stream, uint64_t seed) { run_config(&g_cfgs[i], stream, seed); }

int main(int argc, char **argv)
{
    tu_suite s = { "test_fwd", usage_extra, { 0, cfg_name_at, cfg_quick_at, cfg_work_at }, checks, run_at, NULL };
    build_configs();
    s.cfgs.n = g_ncfg;
    return tu_main(argc, argv, &s);
}
