/*
 * test_bwd.cu - GPU tests of the backward pass (dQ, dK, dV) against the CPU
 * double-precision reference (tests/ref/fmha_ref_bwd.h).
 *
 * Declares the library's default backward set (fp16/bf16, kernel head dims
 * 64/128/256, every mask and soft-cap variant, the three stages), plus a set
 * without dot_do_o for the "missing stage" check, then runs a table of
 * problems built in build_configs(): odd lengths, lengths 0 and 1, s_q > s_k
 * under causal masks, GQA ratios 1/4/8 (and MQA), every mask (causal in both
 * alignments, sliding windows, windows that mask whole rows), soft cap,
 * padded head dims, bshd/bhsd layouts with padded strides, batch and group
 * mode, both determinism modes, problems whose keys fit one key tile (dQ
 * written directly, no workspace), and dropout (p 0.1 and 0.6 with the
 * reference's own Philox draws, over masks, GQA, group mode, soft cap,
 * ALiBi, sinks and both determinism modes), the elementwise bias with
 * dbias (every broadcast shape, fp16/bf16/fp32, -inf elements, dbias with
 * its own padded strides and guards: every element written, hidden ones
 * exactly 0, the same bits in deterministic re-runs; group 12), and
 * hdim_v < hdim_q (DeepSeek MLA's 192 / 128 and 176 / 96 on the 256
 * kernels, 128 / 64: V, O, dO and dV hdim_v wide, dQ and dK hdim_q; group
 * 13). Per problem: random inputs (never zero;
 * input padding NaN), O and LSE from the forward reference (O rounded to the
 * dtype, as a forward kernel would store it), dO random; a plan, a workspace
 * of exactly plan.workspace_size bytes, prepared synchronously or stream-
 * ordered from pinned staging; dQ/dK/dV poisoned (with guard zones) and one
 * fmha_bwd on a non-default stream. Checked: every logical element written
 * and finite, padding and guards untouched, exact zeros where no key or
 * query is visible (rows that see no key, keys no row sees), rel-L2 of each
 * gradient within fp16 5e-3 / bf16 2e-2; deterministic problems are run three
 * times (as scheduled, then forced to one row of blocks walking all units
 * and to one block per unit and key tile) and must agree bit for bit. Dropout's
 * seed and offset: through dropout_rng (device {seed, offset}) bitwise equal
 * to the same values by field, another offset far from the reference, and a
 * captured fmha_bwd replayed after new values are written behind the
 * pointer. Problems prepare their workspace each of three ways (synchronous,
 * _async from pinned staging, _device: the tables kernel). Then:
 * prepare_workspace_async or _device and fmha_bwd captured in a CUDA graph
 * and replayed with new seqstarts (and new inputs), each replay checked
 * against the reference; the device-built tables equal to the host packing
 * bit for bit (batch 1 to 1000, entries that break the bounds); the deterministic
 * ordering count against a plain count on random windows; the API contract (a
 * missing stage fails at plan time, a too-small workspace or ALiBi is refused
 * and nothing is written, seqstarts beyond the plan's bounds are refused).
 *
 * Build:  make build/tests/test_bwd   (nvcc, sm_80 + sm_90a)
 * Run:    build/tests/test_bwd [--quick] [--filter SUBSTR] [--list] [--seed N]
 * Output: one `PASS name` / `FAIL name: why` line per check, last line
 *         `N passed, M failed`; without a GPU `SKIP test_bwd: no GPU`.
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
#include "../ref/fmha_ref_bwd.h"

/* A variant build (test_bwd_chain.cu, test_bwd_stage1.cu,
 * test_bwd_portable.cu) runs one schedule: its default set is the default
 * set's rows that schedule serves (TEST_BWD_VARIANT_ROW(X, fam, dt, hd, ...)
 * is X(fam, dt, hd, ...) or nothing); the named sets below are not built
 * (their problems and the API checks run in test_bwd itself); only the
 * problems TEST_BWD_VARIANT_KEEP accepts run, and each plan must pass
 * TEST_BWD_VARIANT_PLAN (the row the variant is about). */
#if defined(TEST_BWD_VARIANT_ROW)
#define TBV_FMHAI_XDEF(...) TEST_BWD_VARIANT_ROW(FMHAI_XDEF, __VA_ARGS__)
#define TBV_FMHAI_XENT(...) TEST_BWD_VARIANT_ROW(FMHAI_XENT, __VA_ARGS__)
#define TBV_SET(X) FMHA_DEFAULT_BWD_SET(TBV_##X)
DECL_FMHA_KERNEL_SET(bwd_default, TBV_SET)
#define no_dot_set bwd_default
#define hd192_set bwd_default
#define explicit_set bwd_default
#define MLA_S1 ((const fmha_kernel_set *)0x1)   /* never a kept problem's set */
#else
DECL_FMHA_KERNEL_SET(bwd_default, FMHA_DEFAULT_BWD_SET)

#define NO_DOT_SET(X)                                                                          \
    X(BWD,            BF16, 128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(no_dot_set, NO_DOT_SET)

/* Head dim 192 (not in the default set; MLA's 192 / 128 with V padded):
 * the 6-warp portable rows, every stage, both determinism modes. */
#define HD192_SET(X)                                                                           \
    X(BWD,            BF16, 192, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        BF16, 192, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            FP16, 192, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   BF16, 192, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, BF16, 192, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   FP16, 192, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, FP16, 192, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(hd192_set, HD192_SET)

/* MLA's 192_128 rows single-buffered alone (the row an sm_80 runs; on an
 * sm_90 the default set's double-buffered row wins): stages 1 with V and dO
 * 128 of 192 columns, both determinism modes. */
#if !defined(FMHA_PLATFORM_AMD)
#define MLA_S1_SET(X)                                                                          \
    X(BWD,            BF16, 192_128, MASK,   NOSOFTCAP, NOALIBI, 64, 96, 6, 1)                 \
    X(BWD_DET,        BF16, 192_128, MASK,   NOSOFTCAP, NOALIBI, 64, 96, 6, 1)                 \
    X(BWD_DOT_DO_O,   BF16, 192_128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, BF16, 192_128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(mla_s1_set, MLA_S1_SET)
#define MLA_S1 (&mla_s1_set)
#else
#define MLA_S1 ((const fmha_kernel_set *)0x1)   /* never a problem's set on AMD */
#endif

/* Explicit rows (no wildcard: built as written for the platform's portable
 * pipeline), every stage: their arch token must expand before the row
 * macros paste it (device builds failed on it once). */
#define EXPLICIT_SET(X)                                                                  \
    X(BWD,            BF16, 64, MASK,   NOSOFTCAP, NOALIBI, 64, 64, 4, 2)                 \
    X(BWD_DOT_DO_O,   BF16, 64, NOMASK, NOSOFTCAP, NOALIBI, 64, 0, 4, 1)                  \
    X(BWD_CONVERT_DQ, BF16, 64, NOMASK, NOSOFTCAP, NOALIBI, 64, 0, 4, 1)
DECL_FMHA_KERNEL_SET(explicit_set, EXPLICIT_SET)
#endif /* TEST_BWD_VARIANT_ROW */

/* Gradient tolerances of the backward (rel-L2 per tensor). */
static double tol_grad(int is_bf16) { return is_bf16 ? 2e-2 : 5e-3; }

/* ============================================================================
 * Problems
 * ========================================================================== */
#define MAXB 8
#define GUARD 256

/* How a problem's workspace tables are prepared. */
enum { PREP_SYNC = 0, PREP_ASYNC = 1, PREP_DEVICE = 2 };

typedef struct bwd_cfg {
    char name[200];
    fmha_dtype dtype;
    int group, batch, hq, hk, d;
    int dv;                       /* hdim_v of V, O, dO, dV (0: d) */
    const fmha_kernel_set *set;   /* NULL: the default set */
    int sq, sk;                   /* batch mode */
    int lq[MAXB], lk[MAXB];       /* group mode */
    fmha_mask_type mask;
    int wl, wr;
    float cap, scale, amp;
    int det;                      /* deterministic mode (checked over 3 runs) */
    int reruns;                   /* deterministic: more runs as scheduled, bitwise */
    int perm, pad;                /* 0: bshd, 1: bhsd; extra elements per row */
    int prep;                     /* PREP_SYNC, PREP_ASYNC (pinned staging) or
                                     PREP_DEVICE (the tables kernel) */
    int sinks;                    /* attention sinks: dsinks checked too */
    int alibi;                    /* 0 off, 1 one slope per head, 2 per batch entry */
    float drop;                   /* dropout p (0: off), with the seed and offset below */
    uint64_t dseed, doff;
    int bias;                     /* elementwise bias: 0 off, 1 [b,h], 2 [1,h], 3 [1,1], 4 [b,1] (group
                                     mode: no batch dim, so 1 = 2 and 3 = 4) */
    fmha_dtype bias_dt;           /* FP16, BF16 or FP32 */
    int nodbias;                  /* 1: bias without dbias */
    int hide;                     /* 1: -inf bias elements (every 7th of row 3, all of row 5) */
    int mla;                      /* 1: the plan must take the 192_128 kernels (every stage) */
    int balign;                   /* 1: bias and dbias rows and strides 16-byte aligned (the Hopper
                                     pipeline's TMA bias tiles and vector dbias stores; else odd) */
    int quick;
} bwd_cfg;

#define MAXCFG 320
static bwd_cfg g_cfgs[MAXCFG];
static int g_ncfg;

static int cfg_dv(const bwd_cfg *c) { return c->dv ? c->dv : c->d; }

/* the head dim of the portable rows that pad least for a problem of equal dims */
static int cfg_pad_hd(const bwd_cfg *c)
{
    const int need = c->d > cfg_dv(c) ? c->d : cfg_dv(c);
    return need <= 32 ? 32 : need <= 64 ? 64 : need <= 96 ? 96 : need <= 128 ? 128 : 256;
}

static bwd_cfg cfg_batch(fmha_dtype dt, int b, int hq, int hk, int sq, int sk, int d)
{
    bwd_cfg c;
    memset(&c, 0, sizeof(c));
    c.dtype = dt; c.batch = b; c.hq = hq; c.hk = hk; c.sq = sq; c.sk = sk; c.d = d;
    c.mask = FMHA_MASK_NONE; c.wl = c.wr = -1; c.amp = 1.0f;
    return c;
}

static bwd_cfg cfg_group(fmha_dtype dt, int b, const int *lq, const int *lk, int hq, int hk, int d)
{
    bwd_cfg c = cfg_batch(dt, b, hq, hk, 0, 0, d);
    int i;
    c.group = 1;
    for (i = 0; i < b; i++) { c.lq[i] = lq[i]; c.lk[i] = lk[i]; }
    return c;
}

static void cfg_mask(bwd_cfg *c, fmha_mask_type m, int wl, int wr) { c->mask = m; c->wl = wl; c->wr = wr; }

static void cfg_name(bwd_cfg *c)
{
    char *s = c->name;
    size_t cap = sizeof(c->name), n;
    int i;
    n = (size_t)snprintf(s, cap, "bwd_%s_%s_b%d_h%d:%d_", c->dtype == FMHA_DTYPE_BF16 ? "bf16" : "fp16",
                         c->group ? "group" : "batch", c->batch, c->hq, c->hk);
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
    if (c->set == &hd192_set) n += (size_t)snprintf(s + n, cap - n, "_hd192set");
    if (c->set == &explicit_set) n += (size_t)snprintf(s + n, cap - n, "_explicitset");
    if (c->set == MLA_S1) n += (size_t)snprintf(s + n, cap - n, "_mlas1set");
    if (c->mask == FMHA_MASK_NONE) n += (size_t)snprintf(s + n, cap - n, "_nomask");
    else n += (size_t)snprintf(s + n, cap - n, "_%s(%d,%d)", c->mask == FMHA_MASK_TOP_LEFT ? "t" : "b", c->wl, c->wr);
    if (c->cap > 0) n += (size_t)snprintf(s + n, cap - n, "_cap%g", c->cap);
    if (c->scale > 0) n += (size_t)snprintf(s + n, cap - n, "_scale%g", c->scale);
    if (c->amp != 1.0f) n += (size_t)snprintf(s + n, cap - n, "_amp%g", c->amp);
    if (c->perm || c->pad) n += (size_t)snprintf(s + n, cap - n, "_perm%d_pad%d", c->perm, c->pad);
    if (c->prep) n += (size_t)snprintf(s + n, cap - n, c->prep == PREP_ASYNC ? "_async" : "_devprep");
    if (c->sinks) n += (size_t)snprintf(s + n, cap - n, "_sinks");
    if (c->alibi) n += (size_t)snprintf(s + n, cap - n, "_alibi%s", c->alibi == 2 ? "batch" : "head");
    if (c->drop > 0) n += (size_t)snprintf(s + n, cap - n, "_drop%g", c->drop);
    if (c->bias)
        n += (size_t)snprintf(s + n, cap - n, "_bias%s_%s%s%s", c->bias == 1 ? "BH" : c->bias == 2 ? "1H" : c->bias == 3 ? "11" : "B1",
                              c->bias_dt == FMHA_DTYPE_FP32 ? "fp32" : c->bias_dt == FMHA_DTYPE_BF16 ? "bf16" : "fp16",
                              c->nodbias ? "_nodbias" : "", c->hide ? "_inf" : "");
    if (c->bias && c->balign) n += (size_t)snprintf(s + n, cap - n, "_al16");
    n += (size_t)snprintf(s + n, cap - n, c->det ? "_det" : "_nondet");
    if (c->reruns) n += (size_t)snprintf(s + n, cap - n, "_x%d", 3 + c->reruns);
}

static double cfg_work(const bwd_cfg *c)
{
    double w = 0.0;
    int b;
    for (b = 0; b < c->batch; b++)
        w += (double)(c->group ? c->lq[b] : c->sq) * (c->group ? c->lk[b] : c->sk);
    return w * c->hq * c->d * 3.0;   /* forward + backward reference */
}

static void add(bwd_cfg c, int quick)
{
    if (g_ncfg >= MAXCFG) { fprintf(stderr, "test_bwd: MAXCFG too small\n"); exit(2); }
    c.quick = quick;
    cfg_name(&c);
    g_cfgs[g_ncfg++] = c;
}

/* The table; `quick` marks the ~30 problems of --quick (compute-sanitizer). */
static void build_configs(void)
{
    const fmha_dtype F = FMHA_DTYPE_FP16, B = FMHA_DTYPE_BF16;
    const fmha_mask_type NO = FMHA_MASK_NONE, TL = FMHA_MASK_TOP_LEFT, BR = FMHA_MASK_BOTTOM_RIGHT;
    int i, j, k;

    /* 1. dtype x kernel head dim x {none, causal top-left, causal bottom-right}
     *    x determinism, odd lengths over several key tiles. */
    {
        static const int hd[3] = { 64, 128, 256 };
        static const int shp[3][4] = { { 2, 255, 255, 4 }, { 1, 100, 400, 2 }, { 2, 301, 190, 2 } };
        for (i = 0; i < 2; i++)
            for (j = 0; j < 3; j++)
                for (k = 0; k < 3; k++) {
                    const int *s = shp[(j + k) % 3];
                    bwd_cfg c = cfg_batch(i ? B : F, s[0], s[3] * 2, s[3], s[1], s[2], hd[j]);
                    if (k) cfg_mask(&c, k == 1 ? TL : BR, -1, 0);
                    c.det = (i + j + k) % 2;
                    add(c, (i + j + k) % 4 == 0);
                    if ((i + k) % 3 == 0) { c.det = !c.det; add(c, 0); }
                }
    }

    /* 1b. Deterministic, the same bits over 10 runs (3 schedules and 7 more
     *     as fmha_bwd schedules them): no mask, so the sweeps rotate, 9 key
     *     tiles a chain; hdim 64 (the dQ warpgroup) and 128 (the writer). */
    for (j = 0; j < 2; j++) {
        bwd_cfg c = cfg_batch(B, 2, 8, 2, 1000, 1100, j ? 128 : 64);
        c.det = 1;
        c.reruns = 7;
        add(c, 0);
    }

    /* 2. lengths 0 and 1, s_q > s_k, one key tile (dQ direct), tile edges. */
    {
        static const int len[13][2] = { { 1, 1 }, { 1, 300 }, { 300, 1 }, { 17, 0 }, { 0, 17 }, { 0, 300 },
                                        { 65, 129 }, { 128, 128 }, { 129, 257 }, { 300, 100 }, { 64, 64 },
                                        { 1, 129 }, { 333, 333 } };
        for (j = 0; j < 13; j++)
            for (k = 0; k < 2; k++) {
                bwd_cfg c = cfg_batch((j + k) % 2 ? B : F, 2, 4, 2, len[j][0], len[j][1], (j + k) % 3 == 2 ? 128 : 64);
                if (k) cfg_mask(&c, j % 2 ? TL : BR, -1, 0);
                c.det = (j % 3) == 1;
                add(c, (j == 3 && k == 0) || (j == 5 && k == 1) || (j == 9 && k == 1) || (j == 0 && k == 1) ||
                           (j == 11 && k == 0));
            }
    }

    /* 3. GQA / MQA: ratios 1, 4, 8 (dK/dV summed over the group's heads). */
    {
        static const int ratio[4] = { 1, 4, 8, 16 };
        for (j = 0; j < 4; j++)
            for (i = 0; i < 2; i++)
                for (k = 0; k < 2; k++) {
                    int hk = (j == 3) ? 1 : 2;
                    bwd_cfg c = cfg_batch(i ? B : F, 2, hk * ratio[j], hk, 97, 300, (j + i) % 2 ? 128 : 64);
                    if (k) cfg_mask(&c, BR, -1, 0);
                    c.det = k;
                    add(c, (j == 2 && i == 1 && k == 1) || (j == 3 && i == 0 && k == 0));
                }
    }

    /* 4. windows in both alignments, including windows that mask whole rows. */
    {
        static const struct { fmha_mask_type m; int wl, wr, sq, sk; } w[] = {
            { TL, 0, 0, 255, 255 },   { BR, 16, 0, 255, 255 },  { TL, 5, 5, 100, 300 },  { BR, 5, 5, 100, 300 },
            { TL, 0, 16, 300, 200 },  { BR, 128, -1, 300, 200 }, { TL, -1, 32, 200, 200 }, { BR, 2, 2, 1, 400 },
            { TL, 5, 0, 300, 150 },   /* rows >= 155 see nothing  */
            { BR, 0, 0, 300, 150 },   /* rows < 150 see nothing   */
            { BR, -1, 0, 400, 140 },  /* causal, s_q > s_k        */
            { TL, 3, 7, 200, 400 },   { TL, -1, -1, 77, 333 },
        };
        for (j = 0; j < (int)(sizeof(w) / sizeof(w[0])); j++) {
            bwd_cfg c = cfg_batch(j % 2 ? B : F, 2, 4, 2, w[j].sq, w[j].sk, j % 3 == 1 ? 128 : 64);
            cfg_mask(&c, w[j].m, w[j].wl, w[j].wr);
            c.det = j % 2;
            add(c, j == 8 || j == 9 || j == 10 || j == 3);
            if (j >= 8 && j <= 10) {     /* the row-masking ones at hdim 256, other dtype and mode */
                c.dtype = j % 2 ? F : B;
                c.d = 256; c.hq = 2; c.hk = 1;
                c.det = !c.det;
                add(c, 0);
            }
        }
    }

    /* 5. logits soft cap (the tanh derivative), with and without masks. */
    {
        static const float caps[3] = { 0.5f, 2.0f, 10.0f };
        for (j = 0; j < 3; j++)
            for (i = 0; i < 2; i++) {
                bwd_cfg c = cfg_batch(i ? B : F, 2, 4, 2, 129, 257, j == 2 ? 256 : (j == 1 ? 128 : 64));
                c.cap = caps[j];
                if (i) cfg_mask(&c, j % 2 ? TL : BR, -1, 0);
                c.det = (i + j) % 2;
                add(c, (j == 1 && i == 0) || (j == 0 && i == 1));
            }
        {
            bwd_cfg c = cfg_batch(F, 1, 2, 2, 200, 200, 64);
            c.cap = 5.0f; c.scale = 1.0f;    /* saturating cap */
            add(c, 0);
        }
    }

    /* 6. padded head dims, layouts and strides. */
    {
        static const int pd[4] = { 8, 40, 72, 200 };
        for (j = 0; j < 4; j++)
            for (k = 0; k < 2; k++) {
                bwd_cfg c = cfg_batch((j + k) % 2 ? B : F, 2, 4, 2, 77, 150, pd[j]);
                c.perm = k; c.pad = (j % 2) ? 8 : 24;
                if (k) cfg_mask(&c, BR, -1, 0);
                c.det = j % 2;
                add(c, j == 2 && k == 1);
            }
    }

    /* 7. group (varlen) mode: zero lengths, per-entry splits, both determinism
     *    modes, synchronous and stream-ordered preparation. */
    {
        static const struct { int b; int q[MAXB]; int k[MAXB]; } g[] = {
            { 3, { 17, 255, 1 }, { 17, 255, 600 } },
            { 4, { 0, 17, 0, 5 }, { 0, 300, 7, 5 } },
            { 3, { 5, 0, 33 }, { 0, 0, 100 } },                  /* s_k = 0 with s_q > 0 */
            { 5, { 300, 0, 1, 17, 250 }, { 300, 5, 0, 700, 17 } },
            { 2, { 0, 0 }, { 0, 0 } },                           /* nothing at all */
            { 3, { 130, 65, 63 }, { 64, 300, 63 } },
        };
        for (j = 0; j < 6; j++)
            for (k = 0; k < 3; k++) {
                bwd_cfg c = cfg_group((j + k) % 2 ? B : F, g[j].b, g[j].q, g[j].k, 4, j % 2 ? 1 : 2,
                                      (j + k) % 3 == 0 ? 128 : 64);
                if (k == 1) cfg_mask(&c, BR, -1, 0);
                if (k == 2) cfg_mask(&c, TL, 32, 8);
                c.perm = (j + k) % 2;
                c.det = (j + k) % 2 == 0;
                c.prep = k == 0 ? PREP_ASYNC : k == 2 ? PREP_DEVICE : PREP_SYNC;
                /* (j 0, k 0: deterministic, Q/dO and K/V tiles at odd row
                 * offsets in --quick, by TMA on the Hopper pipeline) */
                add(c, (j == 1 && k == 1) || (j == 3 && k == 0) || (j == 5 && k == 2) || (j == 2 && k == 0) ||
                           (j == 0 && k == 0));
            }
        {
            static const int gq[4] = { 200, 31, 0, 129 }, gk[4] = { 500, 40, 300, 129 };
            bwd_cfg c = cfg_group(B, 4, gq, gk, 8, 1, 256);
            cfg_mask(&c, BR, -1, 0);
            c.cap = 3.0f; c.det = 1; c.prep = PREP_DEVICE;
            add(c, 0);
        }
    }

    /* 8. scale and amplitude; a larger square. */
    {
        bwd_cfg c = cfg_batch(F, 1, 2, 2, 200, 200, 128);
        c.scale = 1.0f;
        add(c, 0);
        c = cfg_batch(B, 2, 2, 1, 130, 260, 64);
        c.amp = 3.0f; c.det = 1;
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 8, 2, 700, 700, 128);
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c.det = 1;
        add(c, 0);
    }

    /* 9. attention sinks: dsinks from the D of dot_do_o (dq_acc plans) or
     * from O and dO (one key tile per sequence: dQ direct), fully masked
     * rows (their sink takes all the weight, D = 0), group mode with empty
     * entries, GQA, soft cap, deterministic. */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        bwd_cfg c = cfg_batch(B, 2, 8, 2, 300, 500, 128);
        c.sinks = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(F, 1, 4, 4, 200, 100, 64);
        c.sinks = 1; c.det = 1;
        cfg_mask(&c, TL, 20, 0);      /* rows from 120 on see no key */
        add(c, 1);
        c = cfg_group(B, 4, gq, gk, 4, 1, 128);
        c.sinks = 1; c.cap = 3.0f; c.det = 1; c.prep = PREP_ASYNC;
        add(c, 0);
        c = cfg_batch(F, 3, 4, 2, 50, 40, 64);   /* every key sequence in one tile */
        c.sinks = 1;
        add(c, 0);
        c = cfg_batch(B, 1, 2, 2, 64, 256, 256);
        c.sinks = 1;
        add(c, 0);
    }

    /* 10. ALiBi (the ALIBI dq_dk_dv rows): slopes per head or per batch
     * entry, both mask alignments with rows that see no key, no mask (a
     * MASK row serves it), windows, GQA, group mode, deterministic, hdim
     * 64/128 (wgmma) and 256 (portable), with sinks. */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        bwd_cfg c = cfg_batch(B, 2, 8, 2, 300, 500, 128);
        c.alibi = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 4, 200, 100, 64);
        c.alibi = 2;
        cfg_mask(&c, TL, 20, 0);      /* rows from 120 on see no key */
        add(c, 1);
        c = cfg_batch(F, 2, 4, 1, 257, 130, 128);
        c.alibi = 2; c.det = 1;       /* no mask: a MASK row serves it */
        add(c, 0);
        c = cfg_group(B, 4, gq, gk, 4, 2, 64);
        c.alibi = 2; c.prep = PREP_ASYNC;
        cfg_mask(&c, BR, 64, 0);
        add(c, 0);
        c = cfg_batch(B, 1, 4, 2, 129, 200, 256);
        c.alibi = 1; c.sinks = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
    }

    /* 11. dropout: the forward's keep/drop decisions regenerated from its
     * seed and offset (p 0.1 and 0.6), against the reference's own draws;
     * causal and sliding masks, GQA, group mode, deterministic, soft cap,
     * ALiBi, sinks, dQ direct, hdim 64/128/256 (hdim 64 and 128 on the
     * wgmma pipeline on sm_90; test_bwd_portable runs them all on the
     * portable one), fp16 and bf16. Offsets with a high word (it keys
     * Philox) on some. */
    {
        static const int gq1[3] = { 17, 255, 1 }, gk1[3] = { 17, 255, 600 };
        static const int gq2[3] = { 130, 65, 63 }, gk2[3] = { 64, 300, 63 };
        bwd_cfg d[14];
        int n = 0;
        d[n] = cfg_batch(F, 2, 4, 2, 255, 255, 64);   cfg_mask(&d[n], TL, -1, 0); d[n].drop = 0.1f; n++;
        d[n] = cfg_batch(B, 2, 4, 2, 255, 255, 64);   cfg_mask(&d[n], BR, -1, 0); d[n].drop = 0.6f; d[n].det = 1; n++;
        d[n] = cfg_batch(B, 2, 8, 2, 300, 500, 128);  cfg_mask(&d[n], BR, -1, 0); d[n].drop = 0.1f; n++;
        d[n] = cfg_batch(F, 1, 4, 1, 129, 257, 128);  d[n].drop = 0.6f; d[n].det = 1; n++;
        d[n] = cfg_batch(B, 1, 2, 1, 200, 300, 256);  cfg_mask(&d[n], TL, 32, 8); d[n].drop = 0.1f; d[n].det = 1; n++;
        d[n] = cfg_batch(F, 2, 2, 2, 129, 257, 256);  d[n].cap = 2.0f; d[n].drop = 0.6f; n++;
        d[n] = cfg_group(B, 3, gq1, gk1, 4, 2, 128);  cfg_mask(&d[n], BR, -1, 0); d[n].drop = 0.1f; d[n].det = 1;
        d[n].prep = PREP_ASYNC; n++;
        d[n] = cfg_group(F, 3, gq2, gk2, 4, 1, 64);   cfg_mask(&d[n], TL, 32, 8); d[n].drop = 0.6f;
        d[n].prep = PREP_DEVICE; n++;
        d[n] = cfg_batch(B, 2, 4, 2, 100, 300, 64);   cfg_mask(&d[n], BR, -1, 0); d[n].cap = 0.5f; d[n].drop = 0.6f;
        d[n].det = 1; n++;
        d[n] = cfg_batch(F, 3, 4, 2, 50, 40, 64);     d[n].drop = 0.1f; n++;   /* one key tile: dQ direct */
        d[n] = cfg_batch(B, 2, 8, 2, 300, 500, 128);  cfg_mask(&d[n], BR, -1, 0); d[n].alibi = 1; d[n].drop = 0.1f; n++;
        d[n] = cfg_batch(F, 1, 4, 4, 200, 100, 64);   cfg_mask(&d[n], TL, 20, 0); d[n].sinks = 1; d[n].drop = 0.6f;
        d[n].det = 1; n++;
        d[n] = cfg_batch(F, 2, 4, 2, 255, 300, 128);  cfg_mask(&d[n], TL, 5, 5); d[n].drop = 0.1f; d[n].det = 1; n++;
        d[n] = cfg_batch(B, 2, 16, 1, 97, 300, 64);   d[n].drop = 0.6f; n++;   /* MQA, ratio 16 */
        for (j = 0; j < n; j++) {
            d[j].dseed = 0x9e3779b97f4a7c15ull * (uint64_t)(j + 1);
            d[j].doff = (j % 3 == 0 ? (uint64_t)(j + 1) << 32 : 0u) + 1000u * (uint64_t)j + 7u;
            add(d[j], j == 2 || j == 7 || j == 9);
        }
    }

    /* 12. elementwise bias (the BIAS dq_dk_dv rows) and dbias: every
     * broadcast shape ([b,h] plain stores; [1,h], [1,1], [b,1] summed, by
     * atomics or, deterministic, per-(entry, head) slices summed in order),
     * fp16/bf16/fp32 bias, dbias with its own padded strides (poisoned
     * padding and guards must stay), causal and sliding masks (hidden
     * elements must be exactly 0), -inf elements and a row all hidden, GQA
     * and MQA, group mode (rows packed, keys past an entry's length 0),
     * dQ direct, odd sizes, dropout, a bias without dbias. Hdim 64/128:
     * the wgmma pipeline on sm_90, the portable one in test_bwd_portable. */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        static const int gq2[3] = { 17, 255, 1 }, gk2[3] = { 17, 255, 600 };
        const fmha_dtype H16 = FMHA_DTYPE_FP16, B16 = FMHA_DTYPE_BF16, F32 = FMHA_DTYPE_FP32;
        bwd_cfg c = cfg_batch(F, 2, 4, 2, 200, 300, 64);
        c.bias = 1; c.bias_dt = H16;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 300, 500, 128);
        c.bias = 2; c.bias_dt = B16;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1;
        add(c, 1);
        c = cfg_batch(F, 2, 4, 4, 257, 130, 128);
        c.bias = 3; c.bias_dt = F32;   /* summed over entries and heads */
        add(c, 0);
        c.det = 1; c.perm = 1; c.pad = 8;
        add(c, 0);
        c = cfg_batch(B, 3, 4, 1, 130, 260, 64);
        c.bias = 4; c.bias_dt = F32; c.det = 1;
        cfg_mask(&c, TL, 32, 8);
        add(c, 0);
        c.det = 0; c.bias_dt = B16;
        add(c, 0);
        c = cfg_batch(F, 1, 2, 2, 200, 200, 128);
        c.bias = 1; c.bias_dt = H16; c.hide = 1;
        cfg_mask(&c, TL, -1, 0);
        add(c, 1);
        c = cfg_batch(B, 2, 4, 2, 300, 300, 64);
        c.bias = 3; c.bias_dt = B16; c.hide = 1; c.det = 1;
        add(c, 0);
        c = cfg_group(B, 4, gq, gk, 4, 2, 64);
        c.bias = 3; c.bias_dt = F32; c.prep = PREP_DEVICE;
        cfg_mask(&c, BR, 64, 0);
        add(c, 1);
        c = cfg_group(F, 3, gq2, gk2, 4, 2, 128);
        c.bias = 1; c.bias_dt = H16; c.det = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c.bias = 2; c.bias_dt = B16; c.hide = 1;
        add(c, 0);
        c = cfg_batch(F, 3, 4, 2, 50, 40, 64);   /* one key tile: dQ direct, the dbias sum is the workspace */
        c.bias = 3; c.bias_dt = B16;
        add(c, 0);
        c.bias = 1; c.det = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 512, 2400, 64);   /* [1, h, s, s] past the L2 (39 MB): launch-order */
        c.bias = 2; c.bias_dt = F32;                /* groups, units batch entry fastest */
        add(c, 0);
        c = cfg_batch(B, 2, 16, 1, 1, 77, 64);   /* one query row, MQA 16 */
        c.bias = 2; c.bias_dt = F32;
        add(c, 0);
        c = cfg_batch(F, 2, 2, 1, 77, 1, 128);   /* one key */
        c.bias = 1; c.bias_dt = F32; c.det = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 129, 200, 128);
        c.bias = 1; c.bias_dt = B16; c.nodbias = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 255, 255, 64);
        c.bias = 2; c.bias_dt = H16; c.drop = 0.3f; c.dseed = 0x1234567ull; c.doff = 99;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c.det = 1; c.bias = 1;
        add(c, 0);
    }

    /* 12b. the elementwise bias on the Hopper pipeline's fast paths: rows
     * and strides 16-byte aligned, so a 16-bit bias comes as TMA tiles
     * folded into S^T (batch mode: every tile, zero-filled past s_q and
     * s_k; group mode: tiles inside their sequence, the others word by
     * word) and dbias leaves as 4-key vectors (16-bit stores, fp32 stores
     * into the deterministic slices, red.v4 adds into the summed
     * workspace). Whole tiles and odd sizes, causal and sliding masks,
     * -inf elements, GQA and MQA, broadcast shapes, group mode with empty
     * and one-token entries, deterministic bitwise repeats, an fp32 bias
     * (TMA refused: word by word, vector dbias), a bias dtype other than
     * the data's, dropout, a bias without dbias. */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
        static const int gq2[3] = { 128, 255, 64 }, gk2[3] = { 256, 255, 600 };
        const fmha_dtype H16 = FMHA_DTYPE_FP16, B16 = FMHA_DTYPE_BF16, F32 = FMHA_DTYPE_FP32;
        bwd_cfg c = cfg_batch(B, 2, 4, 4, 256, 256, 128);   /* whole tiles, [b,h]: 16-bit vector stores */
        c.bias = 1; c.bias_dt = B16; c.balign = 1;
        add(c, 1);
        c.det = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 200, 300, 64);   /* edge tiles zero-filled, dbias key tails */
        c.bias = 1; c.bias_dt = H16; c.balign = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_batch(B, 2, 4, 2, 257, 130, 128);   /* [1,1]: red.v4 into the sum; det: fp32 slices */
        c.bias = 3; c.bias_dt = B16; c.balign = 1;
        add(c, 1);
        c.det = 1;
        add(c, 1);
        c = cfg_batch(F, 3, 8, 2, 130, 260, 64);   /* [1,h], -inf elements, a sliding window */
        c.bias = 2; c.bias_dt = H16; c.balign = 1; c.hide = 1;
        cfg_mask(&c, TL, 32, 8);
        add(c, 0);
        c.det = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 1, 192, 384, 64);   /* [b,1] summed over heads, GQA 4 */
        c.bias = 4; c.bias_dt = B16; c.balign = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_group(F, 4, gq, gk, 4, 2, 128);   /* group: empty and one-token entries */
        c.bias = 1; c.bias_dt = H16; c.balign = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1;
        add(c, 0);
        c = cfg_group(B, 3, gq2, gk2, 4, 2, 64);   /* group: whole tiles by TMA, the rest word by word */
        c.bias = 3; c.bias_dt = B16; c.balign = 1;
        add(c, 0);
        c.bias = 1; c.det = 1; c.hide = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 190, 256, 128);   /* fp32 bias: no TMA, fp32 vector dbias */
        c.bias = 1; c.bias_dt = F32; c.balign = 1;
        add(c, 0);
        c.bias = 3;
        add(c, 0);
        c = cfg_batch(B, 2, 16, 2, 1, 77, 64);   /* one query row, GQA 8 */
        c.bias = 3; c.bias_dt = B16; c.balign = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 128, 200, 128);   /* an fp16 problem with a bf16 bias */
        c.bias = 1; c.bias_dt = B16; c.balign = 1;
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 255, 255, 64);   /* dropout */
        c.bias = 2; c.bias_dt = B16; c.balign = 1; c.drop = 0.3f; c.dseed = 0x1234567ull; c.doff = 99;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 200, 256, 128);   /* dropout at hdim 128, [1,1] deterministic */
        c.bias = 3; c.bias_dt = H16; c.balign = 1; c.drop = 0.2f; c.dseed = 0x7654321ull; c.doff = 5; c.det = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 300, 256, 128);   /* no dbias */
        c.bias = 1; c.bias_dt = B16; c.balign = 1; c.nodbias = 1;
        add(c, 0);
    }

    /* 13. hdim_v < hdim_q (DeepSeek MLA: 192 / 128 on the default set's
     * 192_128 kernels, dP^T and dV over 128 columns; elsewhere the kernels of
     * hdim_q run V, O, dO and dV zero-padded): dQ and dK of hdim_q columns,
     * dV of hdim_v; masks with keys no query sees, GQA, group mode with empty
     * entries, odd lengths, padded bhsd layouts, deterministic mode, dQ
     * direct, soft cap (the 256 kernels: no 192_128 SOFTCAP row), sinks,
     * dropout. `mla` marks the problems that must run on a 192_128 row. */
    {
        static const int gq[4] = { 0, 130, 1, 77 }, gk[4] = { 5, 300, 0, 77 };
#if defined(FMHA_PLATFORM_AMD)
        const int MLA = 0;   /* no 192_128 rows on AMD: the 256 rows serve */
#else
        const int MLA = 1;
#endif
        bwd_cfg c = cfg_batch(B, 2, 8, 2, 255, 300, 192);
        c.dv = 128;
        c.mla = MLA;
        add(c, 1);
        cfg_mask(&c, BR, -1, 0);
        c.det = 1;
        add(c, 1);
        c = cfg_batch(F, 2, 4, 4, 300, 100, 192);     /* s_q > s_k, top-left: rows and keys unseen */
        c.dv = 128;
        c.mla = MLA;
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
        c.det = 1;
        add(c, 0);
        c = cfg_group(B, 4, gq, gk, 4, 1, 192);
        c.dv = 128;
        c.mla = MLA;
        cfg_mask(&c, BR, -1, 0);
        c.det = 1; c.prep = PREP_ASYNC;
        add(c, 1);
        c = cfg_group(F, 4, gq, gk, 8, 2, 192);
        c.dv = 128;
        c.mla = MLA;
        add(c, 0);
        c = cfg_batch(B, 2, 6, 3, 129, 77, 192);      /* bhsd, padded rows, soft cap */
        c.dv = 128;
        c.perm = 1; c.pad = 8; c.cap = 3.0f;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 3, 4, 2, 50, 40, 192);       /* one key tile: dQ direct */
        c.dv = 128;
        c.mla = MLA;
        add(c, 0);
        c = cfg_batch(B, 1, 4, 4, 200, 100, 192);     /* sinks, window */
        c.dv = 128;
        c.mla = MLA;
        c.sinks = 1;
        cfg_mask(&c, TL, 20, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 255, 300, 192);     /* dropout, deterministic */
        c.dv = 128;
        c.mla = MLA;
        c.drop = 0.1f; c.det = 1;
        c.dseed = 0x243f6a8885a308d3ull; c.doff = 77u;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c.det = 0; c.drop = 0.6f;                      /* dropout, atomics */
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 17, 33, 176);       /* below the kernel's dims */
        c.dv = 96;
        c.mla = MLA;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        /* smaller pairs on the 192_128 rows: (160, 96) causal GQA in group
         * mode, both determinism modes; (192, 64) unmasked (a MASK row),
         * MQA, several key tiles; (136, 128) with a sliding window */
        c = cfg_group(B, 4, gq, gk, 8, 2, 160);
        c.dv = 96;
        c.mla = MLA;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1; c.prep = PREP_DEVICE;
        add(c, 0);
        c = cfg_batch(F, 2, 8, 1, 333, 401, 192);
        c.dv = 64;
        c.mla = MLA;
        add(c, 0);
        c.det = 1;
        add(c, 1);
        c = cfg_batch(B, 1, 6, 2, 257, 513, 136);
        c.dv = 128;
        c.mla = MLA;
        cfg_mask(&c, TL, 100, 30);
        c.det = 1;
        add(c, 0);
        /* the MLA shape at a size with many key and query tiles: causal,
         * GQA 4, bf16, both modes (bitwise repeats in deterministic mode) */
        c = cfg_batch(B, 1, 8, 2, 1025, 1025, 192);
        c.dv = 128;
        c.mla = MLA;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c.det = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 4, 700, 600, 192);      /* non-causal, deterministic: split chains */
        c.dv = 128;
        c.mla = MLA;
        c.det = 1;
        add(c, 0);
#if !defined(FMHA_PLATFORM_AMD)
        /* the single-buffered 192_128 rows (mla_s1_set) */
        c = cfg_batch(B, 2, 8, 2, 255, 300, 192);
        c.set = MLA_S1;
        c.dv = 128;
        c.mla = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1;
        add(c, 0);
        c = cfg_group(B, 4, gq, gk, 4, 1, 160);
        c.set = MLA_S1;
        c.dv = 96;
        c.mla = 1;
        c.det = 1;
        add(c, 0);
        c.det = 0; c.drop = 0.2f; c.dseed = 0x9e3779b97f4a7c15ull; c.doff = 5u;
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
#endif
        c = cfg_batch(F, 2, 16, 1, 97, 300, 128);     /* (128, 64), MQA */
        c.dv = 64;
        c.det = 1;
        add(c, 0);
        /* the hdim 192 kernels (hd192_set): 6 warps, 96 keys a block */
        c = cfg_batch(B, 2, 8, 2, 255, 300, 192);
        c.set = &hd192_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1;
        add(c, 0);
        c.dv = 128;                                     /* MLA on the 192 kernels, V padded */
        add(c, 1);
        c.det = 0;
        cfg_mask(&c, TL, -1, 0);
        c.sq = 300; c.sk = 100;                         /* rows and keys unseen */
        add(c, 0);
        c = cfg_group(B, 4, gq, gk, 4, 1, 192);
        c.set = &hd192_set;
        c.dv = 128;
        cfg_mask(&c, BR, -1, 0);
        c.det = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 4, 129, 77, 192);        /* fp16, no mask, odd lengths */
        c.set = &hd192_set;
        add(c, 0);
        c = cfg_batch(F, 3, 4, 2, 50, 40, 192);         /* one key tile: dQ direct */
        c.set = &hd192_set;
        c.dv = 128;
        add(c, 0);
        /* explicit (non-wildcard) rows: the 64 x 64 portable row as written */
        c = cfg_batch(B, 2, 4, 2, 200, 333, 64);
        c.set = &explicit_set;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
    }

    /* 14. head dims 32 and 96 (tile rows padded to 64 / 128 columns of
     * shared memory) and the odd dims that land on them, default set: the
     * portable 32 kernels for d <= 32; d 65..96 the portable 96 kernels (6
     * warps, 96 keys a block) where no wgmma row is (test_bwd_portable, an
     * sm_80), on Hopper the wgmma 128 ones (head-dim rule). Masks, GQA,
     * varlen, determinism, soft cap, ALiBi, dropout, sinks, dQ direct,
     * layouts, hdim_v < hdim_q. */
    {
        static const int hq[4] = { 0, 130, 1, 77 }, hk[4] = { 5, 300, 0, 77 };
        bwd_cfg c = cfg_batch(B, 2, 8, 2, 255, 300, 96);
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1;
        add(c, 1);
        c = cfg_batch(F, 2, 4, 4, 300, 100, 96);        /* rows and keys unseen */
        cfg_mask(&c, TL, -1, 0);
        add(c, 0);
        c = cfg_group(B, 4, hq, hk, 4, 1, 88);          /* varlen, GQA 4, deterministic */
        cfg_mask(&c, BR, -1, 0);
        c.det = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 129, 77, 72);         /* bhsd, padded rows, no mask */
        c.perm = 1; c.pad = 8;
        add(c, 0);
        c = cfg_batch(F, 3, 4, 2, 50, 40, 96);          /* one key tile: dQ direct */
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 200, 300, 96);        /* soft cap */
        c.cap = 2.0f;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 300, 500, 96);        /* ALiBi */
        c.alibi = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 255, 255, 96);        /* dropout */
        c.drop = 0.1f; c.dseed = 1234; c.doff = 77;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 1, 4, 4, 200, 100, 96);        /* sinks, window */
        c.sinks = 1;
        cfg_mask(&c, TL, 20, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 4, 2, 200, 300, 96);        /* hdim_v 64: V padded */
        c.dv = 64;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(B, 2, 8, 2, 255, 300, 32);
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c.det = 1;
        add(c, 0);
        c = cfg_group(F, 4, hq, hk, 8, 2, 24);          /* varlen, deterministic */
        c.det = 1;
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 129, 257, 32);        /* soft cap, no mask */
        c.cap = 2.0f;
        add(c, 0);
        c = cfg_batch(B, 1, 8, 2, 300, 300, 32);        /* ALiBi */
        c.alibi = 2;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_batch(F, 2, 4, 2, 255, 255, 32);        /* dropout, deterministic */
        c.drop = 0.6f; c.dseed = 99; c.doff = 3; c.det = 1;
        add(c, 0);
        c = cfg_batch(B, 2, 4, 1, 77, 150, 40);         /* 40: the 64 kernels */
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
    }
    (void)NO;
}

/* ============================================================================
 * Layouts and one problem
 * ========================================================================== */
typedef struct tlayout {
    int64_t row, head, batch;
    size_t n;
} tlayout;

/* perm 0 = [b][s][h][d], 1 = [b][h][s][d]; a padded layout adds 16 elements
 * between heads (bhsd) or batch entries so no stride follows from another. */
static tlayout layout_make(int group, int batch, int rows, int h, int d, int perm, int pad)
{
    tlayout L;
    int64_t dp = d + pad, gap = pad ? 16 : 0, r = rows > 0 ? rows : 1;
    if (!perm) {
        L.row = h * dp; L.head = dp; L.batch = r * h * dp + gap;
    } else {
        L.row = dp; L.head = r * dp + gap; L.batch = h * L.head + gap;
    }
    if (group) {
        L.n = (size_t)(perm ? h * L.head : r * h * dp);
        L.batch = 0;
    } else {
        L.n = (size_t)(batch > 0 ? batch * L.batch : 1);
    }
    return L;
}

typedef struct bwd_run {
    int sq[MAXB], sk[MAXB];
    int32_t ssq[MAXB + 1], ssk[MAXB + 1];
    int tq, tk, maxq, maxk;
    tlayout lq, lk, lv, lo;
    int64_t lse_head, lse_batch;
    size_t n_lse;
    float *qf, *kf, *vf, *dof, *ref_o, *ref_lse, *ref_dq, *ref_dk, *ref_dv, *sinks, *slopes;
    double *ref_dsinks;
    /* elementwise bias: [nbb][nbh][rows][cols] at the bias strides (its
     * values as the device reads them), dbias at its own strides */
    int nbb, nbh, brows, bcols;
    int64_t b_row, b_head, b_batch, db_row, db_head, db_batch;
    size_t n_b, n_db;
    float *biasf;
    double *ref_dbias;                    /* at the bias's offsets */
    void *d_bias, *d_dbias;               /* d_dbias: GUARD elements each side */
    float *d_sinks, *d_dsinks, *d_slopes;
    uint16_t *qh, *kh, *vh, *oh, *doh;
    unsigned char *mq, *mk, *mv;          /* logical elements of Q-, K-, V-shaped buffers */
    void *dq_in, *dk_in, *dv_in, *d_o, *d_do;
    float *d_lse;
    int32_t *d_ssq, *d_ssk;
    uint16_t *g_dq, *g_dk, *g_dv;         /* gradient buffers, GUARD elements inside */
    void *ws;
    void *staging;                        /* pinned */
} bwd_run;

static void run_free(bwd_run *r)
{
    free(r->qf); free(r->kf); free(r->vf); free(r->dof); free(r->ref_o); free(r->ref_lse);
    free(r->ref_dq); free(r->ref_dk); free(r->ref_dv); free(r->sinks); free(r->ref_dsinks); free(r->slopes);
    free(r->qh); free(r->kh); free(r->vh); free(r->oh); free(r->doh);
    free(r->mq); free(r->mk); free(r->mv);
    tu_dfree(r->dq_in); tu_dfree(r->dk_in); tu_dfree(r->dv_in); tu_dfree(r->d_o); tu_dfree(r->d_do);
    tu_dfree(r->d_lse); tu_dfree(r->d_ssq); tu_dfree(r->d_ssk); tu_dfree(r->d_sinks); tu_dfree(r->d_dsinks);
    tu_dfree(r->d_slopes);
    free(r->biasf); free(r->ref_dbias); tu_dfree(r->d_bias); tu_dfree(r->d_dbias);
    tu_dfree(r->g_dq); tu_dfree(r->g_dk); tu_dfree(r->g_dv); tu_dfree(r->ws);
    if (r->staging) TU_CUDA(cudaFreeHost(r->staging));
    memset(r, 0, sizeof(*r));
}

static void make_ref(const bwd_cfg *c, bwd_run *r, fmha_ref_fwd *p)
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
    p->mask_type = (int)c->mask;
    p->window_left = c->wl; p->window_right = c->wr;
    p->sinks = c->sinks ? r->sinks : NULL;
    p->alibi_slopes = c->alibi ? r->slopes : NULL;
    p->alibi_batch_stride = c->alibi == 2 ? c->hq + 3 : 0;   /* padded per-batch rows */
    p->dropout_p = c->drop;
    p->dropout_seed = c->dseed; p->dropout_offset = c->doff;
    if (c->bias) {
        p->bias = r->biasf;
        p->stride_bias = r->b_row; p->nhead_stride_bias = r->b_head; p->batch_stride_bias = r->b_batch;
    }
}

static int bias_esize(const bwd_cfg *c) { return c->bias_dt == FMHA_DTYPE_FP32 ? 4 : 2; }

/* The bias's shape and both layouts (the bias and dbias rows padded
 * differently, so that mixing their strides shows). */
static void bias_layout(const bwd_cfg *c, bwd_run *r)
{
    const int k = c->bias;
    r->nbb = !c->group && (k == 1 || k == 4) ? c->batch : 1;
    r->nbh = k == 1 || k == 2 ? c->hq : 1;
    r->brows = c->group ? r->tq : c->sq;
    r->bcols = c->group ? r->maxk : c->sk;
    /* aligned: every stride a multiple of 8 elements (16 bytes at 16 bits),
     * rows still padded (and the bias and dbias paddings different) */
    const int64_t al = c->balign ? 8 : 1, bc = (r->bcols + al - 1) / al * al;
    r->b_row = c->balign ? bc + 8 : r->bcols + 3;
    r->b_head = r->nbh > 1 ? (int64_t)r->brows * r->b_row : 0;
    r->b_batch = r->nbb > 1 ? (int64_t)r->nbh * r->brows * r->b_row : 0;
    r->n_b = (size_t)r->nbb * r->nbh * r->brows * r->b_row + 1;
    r->db_row = c->balign ? bc + 16 : r->bcols + 5;
    r->db_head = (int64_t)r->brows * r->db_row + (c->balign ? 8 : 7);
    r->db_batch = (int64_t)r->nbh * r->db_head + (c->balign ? 16 : 9);
    r->n_db = (size_t)r->nbb * r->db_batch + 1;
}

/* The bias dims the plan sums dbias over */
static int bias_bcast(const bwd_cfg *c, const bwd_run *r)
{
    return (r->nbh == 1 ? FMHA_BIAS_BCAST_HEAD : 0) | (!c->group && r->nbb == 1 ? FMHA_BIAS_BCAST_BATCH : 0);
}

/* which: 0 Q-shaped, 1 K, 2 V, 3 O. Fills random values (rng != NULL) and/or
 * marks the logical elements in `mask`. */
static void fill_tensor(fmha_ref_rng *rng, const fmha_ref_fwd *p, int which, float amp, int is_bf16, float *f,
                        uint16_t *h, unsigned char *mask, size_t n, int nheads, const int *lens)
{
    size_t i;
    int b, hh, row, x;
    if (h) for (i = 0; i < n; i++) { h[i] = TU_POISON_IN16; f[i] = NAN; }
    if (mask) memset(mask, 0, n);
    for (b = 0; b < p->batch; b++)
        for (hh = 0; hh < nheads; hh++)
            for (row = 0; row < lens[b]; row++) {
                int64_t off = which == 0 ? fmha_ref_off_q(p, b, hh, row)
                            : which == 1 ? fmha_ref_off_k(p, b, hh, row)
                            : which == 2 ? fmha_ref_off_v(p, b, hh, row) : fmha_ref_off_o(p, b, hh, row);
                for (x = 0; x < (which >= 2 ? p->hdim_v : p->hdim_q); x++) {
                    if (mask) mask[off + x] = 1;
                    if (rng) {
                        uint16_t u = fmha_ref_f32_to_bits16(fmha_ref_rng_input(rng, amp), is_bf16);
                        h[off + x] = u;
                        f[off + x] = fmha_ref_bits16_to_f32(u, is_bf16);
                    }
                }
            }
}

/* Marks (mask value 2) the gradient rows that must be exactly zero: dQ of a
 * query row that sees no key, dK/dV of a key no query sees. Zeros that come
 * from cancellation (one visible key: dS = P (dP - D) = 0 in exact math) are
 * not marked; the GPU's fp32 D leaves a rounding residue there. */
static void mark_structural_zeros(const fmha_ref_fwd *p, bwd_run *r, const bwd_cfg *c)
{
    int b, hh, i, j, x;
    for (b = 0; b < p->batch; b++) {
        const int s_q = r->sq[b], s_k = r->sk[b];
        for (i = 0; i < s_q; i++) {
            int lo, hi;
            if (fmha_ref_visible_range(p, s_q, s_k, i, &lo, &hi) > 0) continue;
            for (hh = 0; hh < c->hq; hh++)
                for (x = 0; x < p->hdim_q; x++) r->mq[fmha_ref_off_q(p, b, hh, i) + x] = 2;
        }
        for (j = 0; j < s_k; j++) {
            int seen = 0;
            for (i = 0; i < s_q && !seen; i++) {
                int lo, hi;
                seen = fmha_ref_visible_range(p, s_q, s_k, i, &lo, &hi) > 0 && lo <= j && j <= hi;
            }
            if (seen) continue;
            for (hh = 0; hh < c->hk; hh++) {
                for (x = 0; x < p->hdim_q; x++) r->mk[fmha_ref_off_k(p, b, hh, j) + x] = 2;
                for (x = 0; x < p->hdim_v; x++) r->mv[fmha_ref_off_v(p, b, hh, j) + x] = 2;
            }
        }
    }
}

/* Sets lengths, layouts and the host/device inputs for the cfg's lengths,
 * and computes the reference (forward for O/LSE, then backward). */
static int setup_problem(const bwd_cfg *c, bwd_run *r, uint64_t seed, int alloc)
{
    const int is_bf16 = c->dtype == FMHA_DTYPE_BF16;
    fmha_ref_rng rng = fmha_ref_rng_make(seed);
    fmha_ref_fwd p;
    fmha_ref_bwd g;
    size_t i;
    int b;
    r->tq = r->tk = r->maxq = r->maxk = 0;
    r->ssq[0] = r->ssk[0] = 0;
    for (b = 0; b < c->batch; b++) {
        r->sq[b] = c->group ? c->lq[b] : c->sq;
        r->sk[b] = c->group ? c->lk[b] : c->sk;
        r->ssq[b + 1] = r->ssq[b] + r->sq[b];
        r->ssk[b + 1] = r->ssk[b] + r->sk[b];
        if (r->sq[b] > r->maxq) r->maxq = r->sq[b];
        if (r->sk[b] > r->maxk) r->maxk = r->sk[b];
    }
    r->tq = r->ssq[c->batch];
    r->tk = r->ssk[c->batch];
    if (alloc) {
        const int rq = c->group ? r->tq : c->sq, rk = c->group ? r->tk : c->sk;
        r->lq = layout_make(c->group, c->batch, rq, c->hq, c->d, c->perm, c->pad);
        r->lo = layout_make(c->group, c->batch, rq, c->hq, cfg_dv(c), !c->perm, c->pad + 8);
        r->lk = layout_make(c->group, c->batch, rk, c->hk, c->d, c->perm, c->pad);
        r->lv = layout_make(c->group, c->batch, rk, c->hk, cfg_dv(c), c->perm, c->pad ? c->pad + 8 : 0);
        if (c->group) { r->lse_head = r->tq + 3; r->lse_batch = 0; r->n_lse = (size_t)c->hq * (r->tq + 3) + 1; }
        else { r->lse_head = c->sq + 5; r->lse_batch = (int64_t)c->hq * (c->sq + 5) + 2;
               r->n_lse = (size_t)c->batch * r->lse_batch + 1; }
        r->qf = (float *)tu_hmalloc(r->lq.n * 4); r->qh = (uint16_t *)tu_hmalloc(r->lq.n * 2);
        r->kf = (float *)tu_hmalloc(r->lk.n * 4); r->kh = (uint16_t *)tu_hmalloc(r->lk.n * 2);
        r->vf = (float *)tu_hmalloc(r->lv.n * 4); r->vh = (uint16_t *)tu_hmalloc(r->lv.n * 2);
        r->dof = (float *)tu_hmalloc(r->lo.n * 4); r->doh = (uint16_t *)tu_hmalloc(r->lo.n * 2);
        r->oh = (uint16_t *)tu_hmalloc(r->lo.n * 2);
        r->ref_o = (float *)tu_hmalloc(r->lo.n * 4);
        r->ref_lse = (float *)tu_hmalloc(r->n_lse * 4);
        r->ref_dq = (float *)tu_hmalloc(r->lq.n * 4);
        r->ref_dk = (float *)tu_hmalloc(r->lk.n * 4);
        r->ref_dv = (float *)tu_hmalloc(r->lv.n * 4);
        r->mq = (unsigned char *)tu_hmalloc(r->lq.n);
        r->mk = (unsigned char *)tu_hmalloc(r->lk.n);
        r->mv = (unsigned char *)tu_hmalloc(r->lv.n);
        r->dq_in = tu_dmalloc(r->lq.n * 2); r->dk_in = tu_dmalloc(r->lk.n * 2); r->dv_in = tu_dmalloc(r->lv.n * 2);
        r->d_o = tu_dmalloc(r->lo.n * 2); r->d_do = tu_dmalloc(r->lo.n * 2);
        r->d_lse = (float *)tu_dmalloc(r->n_lse * 4);
        r->d_ssq = (int32_t *)tu_dmalloc(sizeof(r->ssq)); r->d_ssk = (int32_t *)tu_dmalloc(sizeof(r->ssk));
        r->g_dq = (uint16_t *)tu_dmalloc((r->lq.n + 2 * GUARD) * 2);
        r->g_dk = (uint16_t *)tu_dmalloc((r->lk.n + 2 * GUARD) * 2);
        r->g_dv = (uint16_t *)tu_dmalloc((r->lv.n + 2 * GUARD) * 2);
        r->sinks = (float *)tu_hmalloc((size_t)c->hq * 4);
        r->ref_dsinks = (double *)tu_hmalloc((size_t)c->hq * 8);
        r->d_sinks = (float *)tu_dmalloc((size_t)c->hq * 4);
        r->d_dsinks = (float *)tu_dmalloc((size_t)c->hq * 4);
        /* ALiBi: the usual geometric slopes, varied per batch entry; the
         * padding of per-batch rows is NaN */
        r->slopes = (float *)tu_hmalloc((size_t)(c->batch + 1) * (c->hq + 3) * 4);
        r->d_slopes = (float *)tu_dmalloc((size_t)(c->batch + 1) * (c->hq + 3) * 4);
        for (b = 0; b < c->batch; b++) {
            int h;
            for (h = 0; h < c->hq + 3; h++)
                r->slopes[b * (c->hq + 3) + h] =
                    h < c->hq ? (float)(pow(2.0, -8.0 * (h + 1) / c->hq) * (1.0 + 0.25 * b)) : NAN;
        }
        tu_upload(r->d_slopes, r->slopes, (size_t)c->batch * (c->hq + 3) * 4);
        if (c->bias) {
            bias_layout(c, r);
            r->biasf = (float *)tu_hmalloc(r->n_b * 4);
            r->ref_dbias = (double *)tu_hmalloc(r->n_b * 8);
            r->d_bias = tu_dmalloc(r->n_b * (size_t)bias_esize(c));
            r->d_dbias = tu_dmalloc((r->n_db + 2 * GUARD) * (size_t)bias_esize(c));
        }
    }
    if (c->bias) {   /* values in [-2, 2] as the bias dtype holds them; padding NaN (poison) */
        const int es = bias_esize(c);
        void *h = tu_hmalloc(r->n_b * (size_t)es);
        int bb, hh, i, j;
        for (i = 0; i < (int)r->n_b; i++) {
            r->biasf[i] = NAN;
            if (es == 4) ((float *)h)[i] = NAN;
            else ((uint16_t *)h)[i] = TU_POISON_IN16;
        }
        for (bb = 0; bb < r->nbb; bb++)
            for (hh = 0; hh < r->nbh; hh++)
                for (i = 0; i < r->brows; i++)
                    for (j = 0; j < r->bcols; j++) {
                        const int64_t o = bb * r->b_batch + hh * r->b_head + i * r->b_row + j;
                        float x = fmha_ref_rng_uniform(&rng, -2.0f, 2.0f);
                        if (c->hide && (i == 5 || (i == 3 && j % 7 == 0))) x = -INFINITY;
                        if (es == 4) {
                            ((float *)h)[o] = x;
                        } else {
                            const uint16_t u = fmha_ref_f32_to_bits16(x, c->bias_dt == FMHA_DTYPE_BF16);
                            ((uint16_t *)h)[o] = u;
                            x = fmha_ref_bits16_to_f32(u, c->bias_dt == FMHA_DTYPE_BF16);
                        }
                        r->biasf[o] = x;
                    }
        tu_upload(r->d_bias, h, r->n_b * (size_t)es);
        free(h);
        for (i = 0; i < (int)r->n_b; i++) r->ref_dbias[i] = 0.0;
    }
    for (b = 0; b < c->hq && c->sinks; b++) r->sinks[b] = fmha_ref_rng_uniform(&rng, -2.0f, 3.0f);
    make_ref(c, r, &p);
    fill_tensor(&rng, &p, 0, c->amp, is_bf16, r->qf, r->qh, r->mq, r->lq.n, c->hq, r->sq);
    fill_tensor(&rng, &p, 1, c->amp, is_bf16, r->kf, r->kh, r->mk, r->lk.n, c->hk, r->sk);
    fill_tensor(&rng, &p, 2, c->amp, is_bf16, r->vf, r->vh, r->mv, r->lv.n, c->hk, r->sk);
    fill_tensor(&rng, &p, 3, 1.0f, is_bf16, r->dof, r->doh, NULL, r->lo.n, c->hq, r->sq);
    mark_structural_zeros(&p, r, c);
    for (i = 0; i < r->lo.n; i++) r->ref_o[i] = NAN;
    for (i = 0; i < r->n_lse; i++) r->ref_lse[i] = NAN;
    if (fmha_ref_fwd_run(&p) != 0) return -1;
    /* O as the forward kernel would store it; padding poisoned */
    for (i = 0; i < r->lo.n; i++)
        r->oh[i] = r->ref_o[i] == r->ref_o[i] ? fmha_ref_f32_to_bits16(r->ref_o[i], is_bf16) : TU_POISON_IN16;
    memset(&g, 0, sizeof(g));
    g.fwd = p;
    g.dout = r->dof;
    g.dq = r->ref_dq; g.dk = r->ref_dk; g.dv = r->ref_dv;
    g.dsinks = r->ref_dsinks;
    g.dbias = c->bias ? r->ref_dbias : NULL;
    for (i = 0; i < r->lq.n; i++) r->ref_dq[i] = NAN;
    for (i = 0; i < r->lk.n; i++) r->ref_dk[i] = NAN;
    for (i = 0; i < r->lv.n; i++) r->ref_dv[i] = NAN;
    if (fmha_ref_bwd_run(&g) != 0) return -1;
    tu_upload(r->dq_in, r->qh, r->lq.n * 2);
    tu_upload(r->dk_in, r->kh, r->lk.n * 2);
    tu_upload(r->dv_in, r->vh, r->lv.n * 2);
    tu_upload(r->d_o, r->oh, r->lo.n * 2);
    tu_upload(r->d_do, r->doh, r->lo.n * 2);
    tu_upload(r->d_lse, r->ref_lse, r->n_lse * 4);
    tu_upload(r->d_ssq, r->ssq, sizeof(r->ssq));
    tu_upload(r->d_ssk, r->ssk, sizeof(r->ssk));
    if (c->sinks) tu_upload(r->d_sinks, r->sinks, (size_t)c->hq * 4);
    /* the uploads (legacy stream) are done before work on the test stream */
    TU_CUDA(cudaDeviceSynchronize());
    return 0;
}

static void make_traits(const bwd_cfg *c, const bwd_run *r, fmha_bwd_traits *t)
{
    memset(t, 0, sizeof(*t));
    t->dtype = c->dtype;
    t->is_group_mode = c->group;
    t->batch = c->batch; t->nhead_q = c->hq; t->nhead_k = c->hk;
    t->seqlen_q = c->group ? r->tq : c->sq;
    t->seqlen_k = c->group ? r->tk : c->sk;
    t->max_seqlen_q = c->group ? r->maxq : 0;
    t->max_seqlen_k = c->group ? r->maxk : 0;
    t->hdim_q = c->d;
    t->hdim_v = cfg_dv(c);
    t->mask_type = c->mask; t->window_left = c->wl; t->window_right = c->wr;
    t->has_logits_soft_cap = c->cap > 0;
    t->has_alibi = c->alibi != 0;
    t->is_deterministic = c->det;
    t->has_bias = c->bias != 0;
    t->has_dbias = c->bias && !c->nodbias;
    t->dbias_bcast = t->has_dbias ? bias_bcast(c, r) : 0;
}

static void make_args(const bwd_cfg *c, const bwd_run *r, const fmha_bwd_plan *plan, fmha_bwd_args *a)
{
    const fmha_bwd_traits *t = &plan->traits;
    memset(a, 0, sizeof(*a));
    a->dtype = t->dtype; a->is_group_mode = t->is_group_mode;
    a->batch = t->batch; a->nhead_q = t->nhead_q; a->nhead_k = t->nhead_k;
    a->seqlen_q = t->seqlen_q; a->seqlen_k = t->seqlen_k;
    a->max_seqlen_q = t->max_seqlen_q; a->max_seqlen_k = t->max_seqlen_k;
    a->hdim_q = c->d;
    a->hdim_v = cfg_dv(c);
    a->q = r->dq_in; a->k = r->dk_in; a->v = r->dv_in; a->o = r->d_o; a->dout = r->d_do; a->lse = r->d_lse;
    a->dq = r->g_dq + GUARD; a->dk = r->g_dk + GUARD; a->dv = r->g_dv + GUARD;
    a->seqstart_q = c->group ? r->d_ssq : NULL;
    a->seqstart_k = c->group ? r->d_ssk : NULL;
    a->stride_q = r->lq.row; a->nhead_stride_q = r->lq.head; a->batch_stride_q = r->lq.batch;
    a->stride_k = r->lk.row; a->nhead_stride_k = r->lk.head; a->batch_stride_k = r->lk.batch;
    a->stride_v = r->lv.row; a->nhead_stride_v = r->lv.head; a->batch_stride_v = r->lv.batch;
    a->stride_o = r->lo.row; a->nhead_stride_o = r->lo.head; a->batch_stride_o = r->lo.batch;
    a->stride_do = r->lo.row; a->nhead_stride_do = r->lo.head; a->batch_stride_do = r->lo.batch;
    a->stride_dq = r->lq.row; a->nhead_stride_dq = r->lq.head; a->batch_stride_dq = r->lq.batch;
    a->stride_dk = r->lk.row; a->nhead_stride_dk = r->lk.head; a->batch_stride_dk = r->lk.batch;
    a->stride_dv = r->lv.row; a->nhead_stride_dv = r->lv.head; a->batch_stride_dv = r->lv.batch;
    a->nhead_stride_lse = r->lse_head; a->batch_stride_lse = r->lse_batch;
    a->scale = c->scale > 0 ? c->scale : 1.0f / sqrtf((float)c->d);
    a->logits_soft_cap = c->cap;
    a->mask_type = c->mask; a->window_left = c->wl; a->window_right = c->wr;
    a->is_deterministic = c->det;
    a->workspace = r->ws;
    a->workspace_size = plan->workspace_size;
    if (c->sinks) { a->sinks = r->d_sinks; a->dsinks = r->d_dsinks; }
    if (c->alibi) {
        a->alibi_slopes = r->d_slopes;
        a->alibi_batch_stride = c->alibi == 2 ? c->hq + 3 : 0;
    }
    a->dropout_p = c->drop;
    a->dropout_seed = c->dseed; a->dropout_offset = c->doff;
    if (c->bias) {
        a->bias = r->d_bias; a->bias_dtype = c->bias_dt;
        a->stride_bias = r->b_row; a->nhead_stride_bias = r->b_head; a->batch_stride_bias = r->b_batch;
        if (!c->nodbias) {
            a->dbias = (char *)r->d_dbias + GUARD * bias_esize(c);
            a->stride_dbias = r->db_row; a->nhead_stride_dbias = r->db_head; a->batch_stride_dbias = r->db_batch;
        }
    }
}

/* dbias poison: the 16-bit output poison, or a NaN pattern for fp32 */
static void poison_dbias(const bwd_cfg *c, bwd_run *r)
{
    if (!c->bias || c->nodbias) return;
    if (bias_esize(c) == 4) tu_poison32(r->d_dbias, r->n_db + 2 * GUARD, TU_POISON_LSE);
    else tu_poison16(r->d_dbias, r->n_db + 2 * GUARD, TU_POISON_OUT16);
    TU_CUDA(cudaDeviceSynchronize());
}

/* dbias: every logical element written, finite, exactly 0 where the mask
 * hides (i, j) (or, group mode, j is past the entry's keys), padding and
 * guards untouched, rel-L2 against the reference (its terms summed over
 * the broadcast dims) within the gradients' tolerance; *keep gets the
 * download for the deterministic re-runs. */
static int check_dbias(const bwd_cfg *c, const bwd_run *r, const fmha_ref_fwd *p, void **keep, char *why, size_t cap)
{
    /* dbias is stored in the bias dtype: a bf16 dbias takes bf16's tolerance */
    const int es = bias_esize(c), bf = c->dtype == FMHA_DTYPE_BF16 || c->bias_dt == FMHA_DTYPE_BF16;
    const size_t n = r->n_db + 2 * GUARD;
    char *h = (char *)tu_hmalloc(n * (size_t)es);
    unsigned char *logical = (unsigned char *)tu_hmalloc(n);
    fmha_ref_err e;
    size_t t, unwritten = 0, pad = 0, nan = 0, zero_bad = 0, nzero = 0;
    int bb, hh, row, j;
    double rel;
    tu_download(h, r->d_dbias, n * (size_t)es);
    memset(logical, 0, n);
    fmha_ref_err_init(&e);
    for (bb = 0; bb < r->nbb; bb++)
        for (hh = 0; hh < r->nbh; hh++)
            for (row = 0; row < r->brows; row++) {
                /* the entry of a group-mode row, and the row in it */
                int b = 0, i = row, lo = 0, hi = -1;
                if (c->group) {
                    while (b + 1 < c->batch && row >= r->ssq[b + 1]) b++;
                    i = row - r->ssq[b];
                } else {
                    b = bb;
                }
                if (fmha_ref_visible_range(p, r->sq[b], r->sk[b], i, &lo, &hi) == 0) hi = -1;
                for (j = 0; j < r->bcols; j++) {
                    const size_t od = (size_t)(GUARD + bb * r->db_batch + hh * r->db_head + row * r->db_row + j);
                    const size_t ob = (size_t)(bb * r->b_batch + hh * r->b_head + row * r->b_row + j);
                    const int seen = j >= lo && j <= hi;
                    float x;
                    logical[od] = 1;
                    if (es == 4) {
                        uint32_t u;
                        memcpy(&u, h + od * 4, 4);
                        if (u == TU_POISON_LSE) { unwritten++; continue; }
                        memcpy(&x, &u, 4);
                    } else {
                        uint16_t u;
                        memcpy(&u, h + od * 2, 2);
                        if (u == TU_POISON_OUT16) { unwritten++; continue; }
                        x = fmha_ref_bits16_to_f32(u, c->bias_dt == FMHA_DTYPE_BF16);
                    }
                    if (!isfinite(x)) { nan++; continue; }
                    if (!seen) { zero_bad += x != 0.0f; nzero++; }
                    fmha_ref_err_add(&e, x, r->ref_dbias[ob]);
                }
            }
    for (t = 0; t < n; t++) {
        if (logical[t]) continue;
        if (es == 4) { uint32_t u; memcpy(&u, h + t * 4, 4); pad += u != TU_POISON_LSE; }
        else { uint16_t u; memcpy(&u, h + t * 2, 2); pad += u != TU_POISON_OUT16; }
    }
    free(logical);
    rel = fmha_ref_err_rel_l2(&e);
    if (keep) *keep = h; else free(h);
    if (unwritten || pad || nan || zero_bad || !(rel <= tol_grad(bf))) {
        snprintf(why, cap, "dbias: %zu unwritten, %zu padding/guard written, %zu NaN/inf, %zu of %zu hidden not 0, "
                           "rel-L2 %.3g (tol %.1g, max abs err %.3g)",
                 unwritten, pad, nan, zero_bad, nzero, rel, tol_grad(bf), e.max_abs);
        return -1;
    }
    return 0;
}

static void poison_grads(bwd_run *r)
{
    tu_poison16(r->g_dq, r->lq.n + 2 * GUARD, TU_POISON_OUT16);
    tu_poison16(r->g_dk, r->lk.n + 2 * GUARD, TU_POISON_OUT16);
    tu_poison16(r->g_dv, r->lv.n + 2 * GUARD, TU_POISON_OUT16);
    TU_CUDA(cudaDeviceSynchronize());
}

/* dsinks against the reference (rel-L2 over the heads, the gradients'
 * tolerance); *bits gets the result for the deterministic re-runs. */
static int check_dsinks(const bwd_cfg *c, const bwd_run *r, float *bits, char *why, size_t cap)
{
    fmha_ref_err e;
    int h;
    double rel;
    tu_download(bits, r->d_dsinks, (size_t)c->hq * 4);
    fmha_ref_err_init(&e);
    for (h = 0; h < c->hq; h++) {
        if (!isfinite(bits[h])) {
            snprintf(why, cap, "dsinks[%d] = %g", h, bits[h]);
            return -1;
        }
        fmha_ref_err_add(&e, bits[h], r->ref_dsinks[h]);
    }
    rel = fmha_ref_err_rel_l2(&e);
    if (!(rel <= tol_grad(c->dtype == FMHA_DTYPE_BF16))) {
        snprintf(why, cap, "dsinks: rel-L2 %.3g (tol %.1g, max abs err %.3g; dsinks[0] %.6g, want %.6g)", rel,
                 tol_grad(c->dtype == FMHA_DTYPE_BF16), e.max_abs, bits[0], r->ref_dsinks[0]);
        return -1;
    }
    return 0;
}

/* One gradient tensor: written where logical, untouched elsewhere, finite,
 * exact zeros kept, rel-L2 within tol. Returns 0 or fills why. */
static int check_grad(const char *what, const uint16_t *dev, const float *ref, const unsigned char *mask, size_t n,
                      int is_bf16, uint16_t **keep, char *why, size_t cap)
{
    uint16_t *h = (uint16_t *)tu_hmalloc((n + 2 * GUARD) * 2);
    fmha_ref_err e;
    size_t i, unwritten = 0, pad = 0, nan = 0, zero_bad = 0;
    double rel;
    tu_download(h, dev, (n + 2 * GUARD) * 2);
    fmha_ref_err_init(&e);
    for (i = 0; i < 2 * GUARD; i++) pad += h[i < GUARD ? i : n + i] != TU_POISON_OUT16;
    for (i = 0; i < n; i++) {
        const uint16_t u = h[GUARD + i];
        if (!mask[i]) { pad += u != TU_POISON_OUT16; continue; }
        if (u == TU_POISON_OUT16) { unwritten++; continue; }
        {
            const float x = fmha_ref_bits16_to_f32(u, is_bf16);
            if (!(x == x) || isinf(x)) { nan++; continue; }
            if (mask[i] == 2 && x != 0.0f) zero_bad++;   /* must be exactly 0 */
            fmha_ref_err_add(&e, x, ref[i]);
        }
    }
    rel = fmha_ref_err_rel_l2(&e);
    if (keep) *keep = h; else free(h);
    if (unwritten || pad || nan || zero_bad || !(rel <= tol_grad(is_bf16))) {
        snprintf(why, cap, "%s: %zu unwritten, %zu padding/guard written, %zu NaN/inf, %zu nonzero where no key/query "
                           "is visible, rel-L2 %.3g (tol %.1g, max abs err %.3g)",
                 what, unwritten, pad, nan, zero_bad, rel, tol_grad(is_bf16), e.max_abs);
        return -1;
    }
    return 0;
}

static int check_all(const bwd_cfg *c, bwd_run *r, uint16_t **keep, char *why, size_t cap)
{
    const int bf = c->dtype == FMHA_DTYPE_BF16;
    if (check_grad("dQ", r->g_dq, r->ref_dq, r->mq, r->lq.n, bf, keep ? &keep[0] : NULL, why, cap)) return -1;
    if (check_grad("dK", r->g_dk, r->ref_dk, r->mk, r->lk.n, bf, keep ? &keep[1] : NULL, why, cap)) return -1;
    if (check_grad("dV", r->g_dv, r->ref_dv, r->mv, r->lv.n, bf, keep ? &keep[2] : NULL, why, cap)) return -1;
    return 0;
}

static const char *plan_str(const fmha_bwd_plan *plan)
{
    static char buf[512];
    snprintf(buf, sizeof(buf), " [%s, nsplits %d, %s, workspace %zu]", plan->dq_dk_dv ? plan->dq_dk_dv->name : "?",
             plan->nsplits, plan->dq_direct ? "dQ direct" : "dq_acc", plan->workspace_size);
    return buf;
}

static int prepare(const bwd_cfg *c, bwd_run *r, const fmha_bwd_plan *plan, cudaStream_t stream, char *why,
                   size_t cap)
{
    fmha_status st;
    if (c->prep == PREP_ASYNC) {
        if (!r->staging && plan->staging_size) TU_CUDA(cudaHostAlloc(&r->staging, plan->staging_size, 0));
        st = fmha_bwd_prepare_workspace_async(plan, r->ws, plan->workspace_size, c->group ? r->d_ssq : NULL,
                                              c->group ? r->d_ssk : NULL, r->staging, (void *)stream);
    } else if (c->prep == PREP_DEVICE) {
        st = fmha_bwd_prepare_workspace_device(plan, r->ws, plan->workspace_size, c->group ? r->d_ssq : NULL,
                                               c->group ? r->d_ssk : NULL, (void *)stream);
    } else {
        st = fmha_bwd_prepare_workspace(plan, r->ws, plan->workspace_size, c->group ? r->d_ssq : NULL,
                                        c->group ? r->d_ssk : NULL, (void *)stream);
    }
    if (st != FMHA_OK) {
        snprintf(why, cap, "prepare_workspace%s: %s: %s",
                 c->prep == PREP_ASYNC ? "_async" : c->prep == PREP_DEVICE ? "_device" : "", fmha_status_str(st),
                 fmha_last_error());
        return -1;
    }
    return 0;
}

static void run_config(const bwd_cfg *c, cudaStream_t stream, uint64_t seed)
{
    bwd_run r;
    fmha_bwd_traits t;
    fmha_bwd_plan plan;
    fmha_bwd_args a;
    fmha_status st;
    char why[1024] = "";
    uint16_t *first[3] = { NULL, NULL, NULL };
    void *db_first = NULL;
    fmha_ref_fwd pref;
    float ds_first[64], ds_now[64];
    int ok = 1, run, nrun = c->det ? 4 + c->reruns : 1;

    tu_current = c->name;
    memset(&r, 0, sizeof(r));
    if (setup_problem(c, &r, seed, 1) != 0) {
        tu_fail(c->name, "reference out of memory");
        run_free(&r);
        return;
    }
    make_traits(c, &r, &t);
    make_ref(c, &r, &pref);
    st = fmha_bwd_plan_make(c->set ? c->set : &bwd_default, &t, &plan);
    if (st != FMHA_OK) {
        tu_fail(c->name, "plan: %s: %s", fmha_status_str(st), fmha_last_error());
        run_free(&r);
        return;
    }
    if (c->set == &hd192_set && (plan.dq_dk_dv->hdim != 192 || plan.dot_do_o->hdim != 192 ||
                                 plan.convert_dq->hdim != 192)) {
        tu_fail(c->name, "plan took %s, want the hdim 192 kernels", plan.dq_dk_dv->name);
        run_free(&r);
        return;
    }
#if !defined(FMHA_PLATFORM_AMD)
    if (c->mla && (plan.dq_dk_dv->hdim != 192 || plan.dq_dk_dv->hdim_v != 128 || plan.dot_do_o->hdim_v != 128 ||
                   plan.convert_dq->hdim != 192 || plan.convert_dq->hdim_v != 128 ||
                   (c->set == MLA_S1 && plan.dq_dk_dv->stages != 1))) {
        tu_fail(c->name, "plan took %s, want the 192_128 kernels", plan.dq_dk_dv->name);
        run_free(&r);
        return;
    }
#endif
#if defined(TEST_BWD_VARIANT_ROW)
    if (!TEST_BWD_VARIANT_PLAN(&plan)) {
        tu_fail(c->name, "plan took %s, not a row this variant build tests", plan.dq_dk_dv->name);
        run_free(&r);
        return;
    }
#endif
    if (!c->set && cfg_dv(c) == c->d) {   /* default set, equal dims: the portable stages pad least (head dims
                                            * 32, 64, 96, 128, 256; unequal ones: the 192_128 check above) */
        const int want = cfg_pad_hd(c);
        if (plan.dot_do_o->hdim != want || plan.convert_dq->hdim != want ||
            (plan.dq_dk_dv->arch == FMHA_ARCH_SM80 && plan.dq_dk_dv->hdim != want)) {
            tu_fail(c->name, "plan took %s / %s, want the portable hdim %d kernels", plan.dq_dk_dv->name,
                    plan.dot_do_o->name, want);
            run_free(&r);
            return;
        }
    }
    if (plan.workspace_size) r.ws = tu_dmalloc(plan.workspace_size);
    {   /* a stale dbias sum must not matter: fmha_bwd zeroes it */
        fmhai_bwd_layout L;
        fmhai_bwd_layout_make(&plan.traits, plan.nsplits, plan.dq_direct, &L);
        if (L.dbias_bytes) TU_CUDA(cudaMemset((char *)r.ws + L.dbias_off, 0x7f, L.dbias_bytes));
    }
    if (prepare(c, &r, &plan, stream, why, sizeof(why)) != 0) ok = 0;
    make_args(c, &r, &plan, &a);
    for (run = 0; ok && run < nrun; ++run) {
        poison_grads(&r);
        poison_dbias(c, &r);
        if (c->sinks) {
            tu_poison32(r.d_dsinks, (size_t)c->hq, TU_POISON_LSE);
            TU_CUDA(cudaDeviceSynchronize());
        }
        /* deterministic: run 1 as fmha_bwd schedules it, run 2 with one row
         * of blocks walking every unit, run 3 with a block per unit: same
         * bits; run 4 with the sweeps never rotated (the order of sequences
         * with more key tiles than the device has SMs): against the
         * reference; runs 5.. (reruns) as run 1, same bits */
        fmhai_bwd_det_rows_force = run == 0 || run >= 4 ? -1 : run == 1 ? 1 : 0;
        fmhai_bwd_det_rot_force = run == 3 ? 0 : -1;
        st = fmha_bwd(&plan, &a, (void *)stream);
        fmhai_bwd_det_rows_force = -1;
        fmhai_bwd_det_rot_force = -1;
        if (st != FMHA_OK) {
            snprintf(why, sizeof(why), "fmha_bwd: %s: %s", fmha_status_str(st), fmha_last_error());
            ok = 0;
            break;
        }
        TU_CUDA(cudaGetLastError());
        TU_CUDA(cudaStreamSynchronize(stream));
        if (run == 3) {
            if (check_all(c, &r, NULL, why, sizeof(why)) != 0) ok = 0;
        } else if (run == 0) {
            if (check_all(c, &r, first, why, sizeof(why)) != 0) ok = 0;
            if (ok && c->sinks && check_dsinks(c, &r, ds_first, why, sizeof(why)) != 0) ok = 0;
            if (ok && c->bias && !c->nodbias && check_dbias(c, &r, &pref, &db_first, why, sizeof(why)) != 0) ok = 0;
        } else {
            if (c->bias && !c->nodbias) {
                const size_t nb = (r.n_db + 2 * GUARD) * (size_t)bias_esize(&c[0]);
                char *now = (char *)tu_hmalloc(nb);
                tu_download(now, r.d_dbias, nb);
                if (memcmp(now, db_first, nb)) {
                    snprintf(why, sizeof(why), "deterministic mode: run %d differs from run 1 in dbias", run + 1);
                    ok = 0;
                }
                free(now);
            }
            if (c->sinks) {
                tu_download(ds_now, r.d_dsinks, (size_t)c->hq * 4);
                if (memcmp(ds_now, ds_first, (size_t)c->hq * 4)) {
                    snprintf(why, sizeof(why), "deterministic mode: run %d differs from run 1 in dsinks", run + 1);
                    ok = 0;
                }
            }
            const uint16_t *devs[3] = { r.g_dq, r.g_dk, r.g_dv };
            const size_t ns[3] = { r.lq.n, r.lk.n, r.lv.n };
            int w;
            for (w = 0; w < 3 && ok; ++w)
                if (!tu_same_on_device(devs[w], first[w], ns[w] + 2 * GUARD)) {
                    snprintf(why, sizeof(why), "deterministic mode: run %d differs from run 1 in d%c", run + 1,
                             "QKV"[w]);
                    ok = 0;
                }
        }
    }
    if (ok) tu_pass(c->name);
    else tu_fail(c->name, "%s%s", why, plan_str(&plan));
    free(first[0]); free(first[1]); free(first[2]); free(db_first);
    run_free(&r);
    tu_current = "";
}

/* ============================================================================
 * Graph capture of prepare_workspace_async (or _device) + fmha_bwd, replayed
 * with new seqstarts (the captured callback, or the tables kernel, packs each
 * replay's own tables)
 * ========================================================================== */
typedef struct graph_ctx {
    const fmha_bwd_plan *plan;
    const fmha_bwd_args *a;
    bwd_run *r;
} graph_ctx;

static void test_graph(cudaStream_t stream, uint64_t seed, int prep, int det)
{
    char name[96];
    static const int q0[4] = { 300, 0, 17, 129 }, k0[4] = { 200, 40, 0, 700 };
    static const int q1[4] = { 1, 250, 100, 95 }, k1[4] = { 500, 3, 300, 129 };   /* rows fit the buffers */
    bwd_cfg c0 = cfg_group(FMHA_DTYPE_BF16, 4, q0, k0, 4, 2, 128), c1;
    bwd_run r;
    fmha_bwd_traits t;
    fmha_bwd_plan plan;
    fmha_bwd_args a;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    char why[1024] = "";
    int ok = 1, rep;
    fmha_status st;
    snprintf(name, sizeof(name), "bwd_graph_prepare_%s_replay_new_seqstarts%s", prep == PREP_ASYNC ? "async" : "device",
             det ? "" : "_nondet");
    if (!tu_selected(name)) return;
    tu_current = name;
    cfg_mask(&c0, FMHA_MASK_BOTTOM_RIGHT, -1, 0);
    c0.det = det; c0.prep = prep;
    c1 = c0;
    memcpy(c1.lq, q1, sizeof(q1));
    memcpy(c1.lk, k1, sizeof(k1));
    memset(&r, 0, sizeof(r));
    if (setup_problem(&c0, &r, seed, 1) != 0) { tu_fail(name, "reference out of memory"); run_free(&r); return; }
    /* bounds that hold for both replays: total rows, longest sequences */
    make_traits(&c0, &r, &t);
    t.seqlen_q = 446 + 3;   /* both totals are 446 rows; a slack of 3 */
    t.seqlen_k = 1000;
    t.max_seqlen_q = 300; t.max_seqlen_k = 700;
    st = fmha_bwd_plan_make(&bwd_default, &t, &plan);
    if (st != FMHA_OK) { tu_fail(name, "plan: %s", fmha_last_error()); run_free(&r); return; }
    r.ws = tu_dmalloc(plan.workspace_size);
    if (prep == PREP_ASYNC) TU_CUDA(cudaHostAlloc(&r.staging, plan.staging_size, 0));
    make_args(&c0, &r, &plan, &a);
    /* the workspace starts as garbage: the captured preparation writes all
     * that the stages read */
    TU_CUDA(cudaMemset(r.ws, 0xa5, plan.workspace_size));
    TU_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    st = prep == PREP_ASYNC
             ? fmha_bwd_prepare_workspace_async(&plan, r.ws, plan.workspace_size, r.d_ssq, r.d_ssk, r.staging,
                                                (void *)stream)
             : fmha_bwd_prepare_workspace_device(&plan, r.ws, plan.workspace_size, r.d_ssq, r.d_ssk,
                                                 (void *)stream);
    if (st == FMHA_OK) st = fmha_bwd(&plan, &a, (void *)stream);
    {
        cudaError_t e = cudaStreamEndCapture(stream, &graph);
        if (st != FMHA_OK || e != cudaSuccess) {
            tu_fail(name, "capture: %s / %s", st != FMHA_OK ? fmha_last_error() : "ok", cudaGetErrorString(e));
            if (graph) cudaGraphDestroy(graph);
            (void)cudaGetLastError();
            run_free(&r);
            return;
        }
    }
    TU_CUDA(cudaGraphInstantiateWithFlags(&exec, graph, 0));
    for (rep = 0; rep < 3 && ok; ++rep) {
        const bwd_cfg *c = rep == 1 ? &c1 : &c0;
        /* the inputs of this replay: same buffers, new lengths and values */
        if (rep > 0 && setup_problem(c, &r, seed + 17u * (uint64_t)rep, 0) != 0) { ok = 0; snprintf(why, sizeof(why), "reference"); break; }
        poison_grads(&r);
        TU_CUDA(cudaGraphLaunch(exec, stream));
        TU_CUDA(cudaStreamSynchronize(stream));
        if (check_all(c, &r, NULL, why, sizeof(why)) != 0) {
            char tmp[1024];
            snprintf(tmp, sizeof(tmp), "replay %d: %s", rep + 1, why);
            snprintf(why, sizeof(why), "%s", tmp);
            ok = 0;
        }
    }
    TU_CUDA(cudaGraphExecDestroy(exec));
    TU_CUDA(cudaGraphDestroy(graph));
    if (ok) tu_pass(name);
    else tu_fail(name, "%s%s", why, plan_str(&plan));
    run_free(&r);
    tu_current = "";
}

/* ============================================================================
 * The device-built tables (prepare_workspace_device) against the host packing
 * (fmhai_bwd_pack_tables, which the synchronous and async forms run), bit for
 * bit, on random lengths: batch sizes around the kernel's 256-entry chunks,
 * empty entries, and entries that break the bounds (a negative length, rows
 * past total_q), deterministic and not. The table bytes start as garbage.
 * ========================================================================== */
static void test_tables(cudaStream_t stream, uint64_t seed)
{
    static const char *name = "bwd_prepare_device_tables_equal_host_packing";
    static const int batches[6] = { 1, 7, 255, 256, 257, 1000 };
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    char why[512] = "";
    int ok = 1, bi, det;
    if (!tu_selected(name)) return;
    tu_current = name;
#define NEXT(mod) ((int)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (mod))
    for (bi = 0; bi < 6 && ok; ++bi)
        for (det = 0; det < 2 && ok; ++det) {
            const int B = batches[bi];
            int32_t *sq = (int32_t *)malloc(4u * (size_t)(B + 1)), *sk = (int32_t *)malloc(4u * (size_t)(B + 1));
            int32_t *ns_host = (int32_t *)malloc(4u * (size_t)B), *ns_dev = (int32_t *)malloc(4u * (size_t)B);
            int64_t *off_host = (int64_t *)malloc(8u * (size_t)(B + 1)), *off_dev = (int64_t *)malloc(8u * (size_t)(B + 1));
            int32_t *d_sq = (int32_t *)tu_dmalloc(4u * (size_t)(B + 1)), *d_sk = (int32_t *)tu_dmalloc(4u * (size_t)(B + 1));
            fmha_bwd_traits t;
            fmha_bwd_plan plan;
            fmhai_bwd_layout L;
            void *ws = NULL;
            int b, maxq = 1, maxk = 1, bad = 0;
            fmha_status st;
            sq[0] = sk[0] = 0;
            for (b = 0; b < B; ++b) {
                const int lq = NEXT(5) == 0 ? 0 : NEXT(300), lk = NEXT(5) == 0 ? 0 : NEXT(900);
                sq[b + 1] = sq[b] + lq;
                sk[b + 1] = sk[b] + lk;
                if (lq > maxq) maxq = lq;
                if (lk > maxk) maxk = lk;
            }
            /* entries that break the bounds: a negative query length (entry 3),
             * a negative key length (entry 5) */
            if (B >= 7 && sq[B] > 0) {
                sq[3] = sq[4] + 5;
                sk[6] = sk[5] - 1;
                bad = 1;
            }
            memset(&t, 0, sizeof(t));
            t.dtype = FMHA_DTYPE_BF16; t.is_group_mode = 1;
            t.batch = B; t.nhead_q = 4; t.nhead_k = 2; t.hdim_q = t.hdim_v = 64;
            /* total rows one short of the last entry's end: it breaks the bound */
            t.seqlen_q = bad ? sq[B] - 1 : sq[B];
            t.seqlen_k = sk[B];
            t.max_seqlen_q = maxq; t.max_seqlen_k = maxk + 300;   /* never dQ direct */
            t.mask_type = FMHA_MASK_NONE; t.window_left = t.window_right = -1;
            t.is_deterministic = det;
            st = fmha_bwd_plan_make(&bwd_default, &t, &plan);
            if (st != FMHA_OK || plan.dq_direct || !plan.workspace_size) {
                snprintf(why, sizeof(why), "plan (batch %d): %s", B, st != FMHA_OK ? fmha_last_error() : "no workspace");
                ok = 0;
            }
            if (ok) {
                fmhai_bwd_layout_make(&plan.traits, plan.nsplits, plan.dq_direct, &L);
                ws = tu_dmalloc(plan.workspace_size);
                TU_CUDA(cudaMemset(ws, 0xa5, L.tables_bytes));
                tu_upload(d_sq, sq, 4u * (size_t)(B + 1));
                tu_upload(d_sk, sk, 4u * (size_t)(B + 1));
                st = fmha_bwd_prepare_workspace_device(&plan, ws, plan.workspace_size, d_sq, d_sk, (void *)stream);
                if (st != FMHA_OK) {
                    snprintf(why, sizeof(why), "prepare_device (batch %d): %s", B, fmha_last_error());
                    ok = 0;
                }
            }
            if (ok) {
                int rejected;
                TU_CUDA(cudaStreamSynchronize(stream));
                tu_download(ns_dev, (char *)ws + L.nsplits_off, 4u * (size_t)B);
                tu_download(off_dev, (char *)ws + L.offsets_off, 8u * (size_t)(B + 1));
                rejected = fmhai_bwd_pack_tables(B, t.nhead_q, t.hdim_q, fmhai_bwd_plan_tile_n(&plan), plan.nsplits,
                                                 det, t.seqlen_q, sq, sk, ns_host, off_host);
                if (bad && rejected < 3) {   /* entries 3, 5 and the last at least */
                    snprintf(why, sizeof(why), "batch %d: the host packing rejected %d entries, not >= 3", B,
                             rejected);
                    ok = 0;
                }
                for (b = 0; ok && b < B; ++b)
                    if (ns_dev[b] != ns_host[b]) {
                        snprintf(why, sizeof(why), "batch %d det %d: nsplits[%d] device %d, host %d", B, det, b,
                                 ns_dev[b], ns_host[b]);
                        ok = 0;
                    }
                for (b = 0; ok && b <= B; ++b)
                    if (off_dev[b] != off_host[b]) {
                        snprintf(why, sizeof(why), "batch %d det %d: offsets[%d] device %lld, host %lld", B, det, b,
                                 (long long)off_dev[b], (long long)off_host[b]);
                        ok = 0;
                    }
                /* the packing never runs past the plan's dq_acc */
                if (ok && (size_t)off_host[B] * 4u > L.dq_acc_bytes) {
                    snprintf(why, sizeof(why), "batch %d: offsets[batch] %lld past dq_acc", B, (long long)off_host[B]);
                    ok = 0;
                }
                if (ok && det && plan.nsplits < 2 && B <= 7) {   /* few units: several slices an entry */
                    snprintf(why, sizeof(why), "batch %d: deterministic plan with %d splits (wanted several)", B,
                             plan.nsplits);
                    ok = 0;
                }
            }
            free(sq); free(sk); free(ns_host); free(ns_dev); free(off_host); free(off_dev);
            tu_dfree(d_sq); tu_dfree(d_sk); tu_dfree(ws);
        }
#undef NEXT
    if (ok) tu_pass(name);
    else tu_fail(name, "%s", why);
    tu_current = "";
}

/* ============================================================================
 * API contract
 * ========================================================================== */
/* The deterministic ordering count (fmhai_bwd_det_need, closed-form) against
 * a plain count over the tiles with fmhai_bwd_m_range, on random lengths,
 * windows, splits and tiles, for chains in tile order, reversed, and (no
 * mask, det_rot) in the order the rotated sweeps of fmhai_bwd_tile_of reach
 * the query tile (every tile's sweep found by fmhai_bwd_m_at, which must
 * visit each query tile once): a count too high hangs the ordered adds, one
 * too low lets a tile add out of turn. One thread per random problem; each
 * checks every (tile, query tile) pair and counts disagreements. */
__device__ int need_visit_step(const fmhai_bwd_params *p, const fmhai_bwd_seq *s, int k, int n_tiles, int BM, int BN,
                               int m, int BIG, int *rot, int *ci)
{
    fmhai_bwd_tile T;
    int mi, at = -1, seen = 0;
    fmhai_bwd_tile_of(p, s, k, n_tiles, 0, BM, BN, 1, 0, -BIG, BIG, BIG, &T);
    *rot = T.rot;
    *ci = T.ci;
    for (mi = 0; mi < T.n_m; ++mi)
        if (fmhai_bwd_m_at(&T, mi) == m) { at = mi; ++seen; }
    return seen == 1 ? at : -1000000;   /* a sweep that misses or repeats m: every count disagrees */
}

__global__ void need_check_kernel(uint64_t seed, int problems, int *bad)
{
    const int BIG = 1 << 30, id = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(id + 1));
    fmhai_bwd_seq s;
    fmhai_bwd_params p;
    int BM, BN, c_lo, c_hi, masked, n, m, k, n_tiles, rev, rot, ci, errs = 0;
    if (id >= problems) return;
#define NEXT(mod) ((int)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (mod))
    memset(&s, 0, sizeof(s));
    memset(&p, 0, sizeof(p));
    s.s_q = 1 + NEXT(700);
    s.s_k = 1 + NEXT(700);
    s.nsplits = 1 + NEXT(5);
    BM = NEXT(2) ? 64 : 128;
    BN = NEXT(2) ? 64 : 128;
    masked = NEXT(4) != 0;
    c_lo = NEXT(3) == 0 ? -BIG : NEXT(900) - 450;
    c_hi = NEXT(3) == 0 ? BIG : (c_lo == -BIG ? NEXT(900) - 450 : c_lo + NEXT(400));
#undef NEXT
    p.head_ratio = 1;
    p.det_rot = 1;
    n_tiles = (s.s_k + BN - 1) / BN;
    for (rev = 0; rev < 3; ++rev)   /* 2: rotated sweeps (no mask), where the chain fits */
        for (n = 0; n < n_tiles; ++n)
            for (m = 0; m * BM < s.s_q; ++m) {
                int want = 0, lo, hi, sn = 0, sk;
                rot = ci = 0;
                if (rev == 2) sn = need_visit_step(&p, &s, n, n_tiles, BM, BN, m, BIG, &rot, &ci);
                for (k = n % s.nsplits; k < n_tiles; k += s.nsplits) {
                    if (rot) {   /* reached m earlier in its sweep (a tie: the lower tile first) */
                        if (k == n) continue;
                        sk = need_visit_step(&p, &s, k, n_tiles, BM, BN, m, BIG, &lo, &hi);
                        want += sk < sn || (sk == sn && k < n);
                        continue;
                    }
                    if (rev == 1 ? k <= n : k >= n) continue;   /* the tiles that add before n */
                    fmhai_bwd_m_range(&s, k, BM, BN, rev == 2 ? 0 : masked, c_lo, c_hi, BIG, &lo, &hi);
                    want += lo <= m && m < hi;
                }
                errs += want != fmhai_bwd_det_need(n, n_tiles, rev == 1, rot, ci, n % s.nsplits, s.nsplits, m * BM, s.s_q,
                                                   s.s_k, BM, BN, rev == 2 ? 0 : masked, c_lo, c_hi, BIG);
            }
    if (errs) atomicAdd(bad, errs);
}

static void test_need(uint64_t seed)
{
    static const char *name = "bwd_det_order_count_matches_plain_count";
    const int problems = 4096;
    int *d_bad = (int *)tu_dmalloc(sizeof(int)), bad = -1;
    if (!tu_selected(name)) { TU_CUDA(cudaFree(d_bad)); return; }
    TU_CUDA(cudaMemset(d_bad, 0, sizeof(int)));
    need_check_kernel<<<problems / 128, 128>>>(seed, problems, d_bad);
    TU_CUDA(cudaGetLastError());
    TU_CUDA(cudaMemcpy(&bad, d_bad, sizeof(int), cudaMemcpyDeviceToHost));
    TU_CUDA(cudaFree(d_bad));
    if (bad == 0) tu_pass(name);
    else tu_fail(name, "%d (key tile, query tile) pairs disagree over %d problems", bad, problems);
}

static void test_api(cudaStream_t stream, uint64_t seed)
{
    bwd_cfg c = cfg_batch(FMHA_DTYPE_BF16, 2, 4, 2, 100, 300, 128);
    bwd_run r;
    fmha_bwd_traits t;
    fmha_bwd_plan plan;
    fmha_bwd_args a;
    fmha_status st;
    tu_current = "bwd_api";
    memset(&r, 0, sizeof(r));
    if (setup_problem(&c, &r, seed, 1) != 0) { tu_fail("bwd_api", "reference"); run_free(&r); return; }
    make_traits(&c, &r, &t);

    if (tu_selected("bwd_api_missing_stage_fails_at_plan_time")) {
        st = fmha_bwd_plan_make(&no_dot_set, &t, &plan);
        if (st == FMHA_ERR_NO_KERNEL && strstr(fmha_last_error(), "dot_do_o")) tu_pass("bwd_api_missing_stage_fails_at_plan_time");
        else tu_fail("bwd_api_missing_stage_fails_at_plan_time", "got %s: %s", fmha_status_str(st), fmha_last_error());
    }
    st = fmha_bwd_plan_make(&bwd_default, &t, &plan);
    if (st != FMHA_OK) { tu_fail("bwd_api", "plan: %s", fmha_last_error()); run_free(&r); return; }
    r.ws = tu_dmalloc(plan.workspace_size);
    TU_CUDA(cudaDeviceSynchronize());
    make_args(&c, &r, &plan, &a);
    {
        static const char *names[3] = { "bwd_api_workspace_too_small_refused", "bwd_api_alibi_off_plan_refused",
                                        "bwd_api_null_dq_refused" };
        int w;
        for (w = 0; w < 3; ++w) {
            fmha_bwd_args b = a;
            fmha_status want = FMHA_ERR_INVALID_ARG;
            if (!tu_selected(names[w])) continue;
            if (w == 0) b.workspace_size = plan.workspace_size - 1;
            if (w == 1) b.alibi_slopes = r.d_lse;
            if (w == 2) b.dq = NULL;
            poison_grads(&r);
            TU_CUDA(cudaDeviceSynchronize());
            st = fmha_bwd(&plan, &b, (void *)stream);
            TU_CUDA(cudaStreamSynchronize(stream));
            {
                uint16_t *h = (uint16_t *)tu_hmalloc((r.lk.n + 2 * GUARD) * 2);
                size_t written;
                tu_download(h, r.g_dk, (r.lk.n + 2 * GUARD) * 2);
                written = tu_count_not16(h, r.lk.n + 2 * GUARD, TU_POISON_OUT16);
                free(h);
                if (st == want && fmha_last_error()[0] && written == 0) tu_pass(names[w]);
                else tu_fail(names[w], "got %s (%s), %zu dK elements written", fmha_status_str(st), fmha_last_error(), written);
            }
        }
    }
    if (tu_selected("bwd_api_prepare_refuses_seqstarts_past_the_bounds")) {
        static const int gq[2] = { 50, 60 }, gk[2] = { 200, 300 };
        bwd_cfg g = cfg_group(FMHA_DTYPE_FP16, 2, gq, gk, 2, 2, 64);
        bwd_run rg;
        fmha_bwd_plan pg;
        memset(&rg, 0, sizeof(rg));
        if (setup_problem(&g, &rg, seed + 1, 1) != 0) tu_fail("bwd_api_prepare_refuses_seqstarts_past_the_bounds", "reference");
        else {
            make_traits(&g, &rg, &t);
            t.seqlen_q = 100;   /* the seqstarts hold 110 rows */
            st = fmha_bwd_plan_make(&bwd_default, &t, &pg);
            if (st == FMHA_OK) {
                rg.ws = tu_dmalloc(pg.workspace_size);
                st = fmha_bwd_prepare_workspace(&pg, rg.ws, pg.workspace_size, rg.d_ssq, rg.d_ssk, (void *)stream);
            }
            if (st == FMHA_ERR_INVALID_ARG && strstr(fmha_last_error(), "bounds"))
                tu_pass("bwd_api_prepare_refuses_seqstarts_past_the_bounds");
            else
                tu_fail("bwd_api_prepare_refuses_seqstarts_past_the_bounds", "got %s: %s", fmha_status_str(st),
                        fmha_last_error());
        }
        run_free(&rg);
    }
    if (tu_selected("bwd_api_registry")) {
        int i, n = fmha_set_size(&bwd_default), fam[6] = { 0, 0, 0, 0, 0, 0 };
#if defined(FMHA_PLATFORM_AMD)
        const int n_aux = 6;    /* 2 dtypes x head dims 64, 128, 256 */
#else
        const int n_aux = 12;   /* 2 dtypes x head dims 32, 64, 96, 128, 256 and 192_128 */
#endif
        for (i = 0; i < n; i++) fam[fmha_set_kernel(&bwd_default, i)->family]++;
        if (fam[FMHA_FAMILY_BWD] >= 24 && fam[FMHA_FAMILY_BWD_DET] >= 24 && fam[FMHA_FAMILY_BWD_DOT_DO_O] == n_aux &&
            fam[FMHA_FAMILY_BWD_CONVERT_DQ] == n_aux)
            tu_pass("bwd_api_registry");
        else
            tu_fail("bwd_api_registry", "%d kernels: %d dq_dk_dv, %d dq_dk_dv_det, %d dot_do_o, %d convert_dq", n,
                    fam[2], fam[5], fam[3], fam[4]);
    }
    run_free(&r);
    tu_current = "";
}

/* ============================================================================
 * Dropout's seed and offset: by pointer (dropout_rng), another offset, and a
 * captured graph replayed with new values behind the pointer
 * ========================================================================== */
/* rel-L2 of a gradient on the device (16-bit, GUARD inside) against ref over
 * the logical elements; -1 when one is unwritten or not finite. */
static double grad_rel(const uint16_t *dev, const float *ref, const unsigned char *mask, size_t n, int is_bf16)
{
    uint16_t *h = (uint16_t *)tu_hmalloc((n + 2 * GUARD) * 2);
    fmha_ref_err e;
    size_t i;
    int bad = 0;
    tu_download(h, dev, (n + 2 * GUARD) * 2);
    fmha_ref_err_init(&e);
    for (i = 0; i < n; i++) {
        float x;
        if (!mask[i]) continue;
        x = fmha_ref_bits16_to_f32(h[GUARD + i], is_bf16);
        if (h[GUARD + i] == TU_POISON_OUT16 || !isfinite(x)) bad = 1;
        else fmha_ref_err_add(&e, x, ref[i]);
    }
    free(h);
    return bad ? -1.0 : fmha_ref_err_rel_l2(&e);
}

static void test_dropout(cudaStream_t stream, uint64_t seed)
{
    static const char *n_ref = "bwd_dropout_fields_match_reference";
    static const char *n_ptr = "bwd_dropout_rng_pointer_bitwise_equals_fields";
    static const char *n_off = "bwd_dropout_other_offset_far_from_reference";
    static const char *n_graph = "bwd_dropout_rng_graph_replay_reads_new_seed";
    /* deterministic (bitwise comparable), hdim 128 (wgmma on sm_90) */
    bwd_cfg c = cfg_batch(FMHA_DTYPE_BF16, 2, 4, 2, 200, 300, 128), c2;
    bwd_run r;
    fmha_bwd_traits t;
    fmha_bwd_plan plan;
    fmha_bwd_args a, b;
    fmha_status st;
    uint64_t *d_rng = NULL, h_rng[2];
    uint16_t *first[3] = { NULL, NULL, NULL };
    char why[1024] = "";
    const int bf = 1;
    if (!tu_selected(n_ref) && !tu_selected(n_ptr) && !tu_selected(n_off) && !tu_selected(n_graph)) return;
    tu_current = "bwd_dropout";
    c.det = 1; c.drop = 0.3f;
    c.dseed = 0x0123456789abcdefull; c.doff = (3ull << 32) + 12345u;
    memset(&r, 0, sizeof(r));
    if (setup_problem(&c, &r, seed, 1) != 0) { tu_fail(n_ref, "reference out of memory"); run_free(&r); return; }
    make_traits(&c, &r, &t);
    st = fmha_bwd_plan_make(&bwd_default, &t, &plan);
    if (st != FMHA_OK) { tu_fail(n_ref, "plan: %s", fmha_last_error()); run_free(&r); return; }
    if (plan.workspace_size) r.ws = tu_dmalloc(plan.workspace_size);
    if (prepare(&c, &r, &plan, stream, why, sizeof(why)) != 0) { tu_fail(n_ref, "%s", why); run_free(&r); return; }
    make_args(&c, &r, &plan, &a);
    d_rng = (uint64_t *)tu_dmalloc(16);
    h_rng[0] = c.dseed; h_rng[1] = c.doff;
    tu_upload(d_rng, h_rng, 16);
    TU_CUDA(cudaDeviceSynchronize());

    /* 1. by field, against the reference (kept for the bitwise checks) */
    poison_grads(&r);
    st = fmha_bwd(&plan, &a, (void *)stream);
    TU_CUDA(cudaStreamSynchronize(stream));
    if (st != FMHA_OK) snprintf(why, sizeof(why), "fmha_bwd: %s", fmha_last_error());
    else check_all(&c, &r, first, why, sizeof(why));
    if (st != FMHA_OK || why[0]) {
        tu_fail(n_ref, "%s%s", why, plan_str(&plan));
        goto done;
    }
    tu_pass(n_ref);

    /* 2. the same seed and offset behind dropout_rng (the fields hold other
     * values, which must be ignored): the same bits */
    if (tu_selected(n_ptr)) {
        const uint16_t *devs[3] = { r.g_dq, r.g_dk, r.g_dv };
        const size_t ns[3] = { r.lq.n, r.lk.n, r.lv.n };
        int w, same = 1;
        b = a;
        b.dropout_seed = 0xdeadull; b.dropout_offset = 0xbeefull;
        b.dropout_rng = d_rng;
        poison_grads(&r);
        st = fmha_bwd(&plan, &b, (void *)stream);
        TU_CUDA(cudaStreamSynchronize(stream));
        for (w = 0; w < 3 && st == FMHA_OK; ++w) same &= tu_same_on_device(devs[w], first[w], ns[w] + 2 * GUARD);
        if (st == FMHA_OK && same) tu_pass(n_ptr);
        else tu_fail(n_ptr, "%s", st != FMHA_OK ? fmha_last_error() : "dQ, dK or dV differs from the run by field");
    }

    /* 3. another offset: other decisions, dV far from the reference (the
     * check can fail: the offset must reach the kernel's draws) */
    if (tu_selected(n_off)) {
        double rel;
        b = a;
        b.dropout_offset = a.dropout_offset + 1u;
        poison_grads(&r);
        st = fmha_bwd(&plan, &b, (void *)stream);
        TU_CUDA(cudaStreamSynchronize(stream));
        rel = st == FMHA_OK ? grad_rel(r.g_dv, r.ref_dv, r.mv, r.lv.n, bf) : -1.0;
        if (rel > 0.1) tu_pass(n_off);
        else tu_fail(n_off, "dV rel-L2 %.3g against the reference of the first offset (want > 0.1; -1: a "
                            "failed call or unwritten/non-finite elements: %s)", rel, st != FMHA_OK ? fmha_last_error() : "");
    }

    /* 4. fmha_bwd with dropout_rng captured once, replayed after new
     * {seed, offset} are written behind the pointer: each replay matches the
     * reference of the values it found there */
    if (tu_selected(n_graph)) {
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        int rep, ok = 1;
        b = a;
        b.dropout_seed = 0; b.dropout_offset = 0;
        b.dropout_rng = d_rng;
        TU_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        st = fmha_bwd(&plan, &b, (void *)stream);
        {
            cudaError_t e = cudaStreamEndCapture(stream, &graph);
            if (st != FMHA_OK || e != cudaSuccess) {
                tu_fail(n_graph, "capture: %s / %s", st != FMHA_OK ? fmha_last_error() : "ok", cudaGetErrorString(e));
                if (graph) cudaGraphDestroy(graph);
                (void)cudaGetLastError();
                goto done;
            }
        }
        TU_CUDA(cudaGraphInstantiateWithFlags(&exec, graph, 0));
        for (rep = 0; rep < 2 && ok; ++rep) {
            c2 = c;
            c2.dseed = c.dseed + 0x1111ull * (uint64_t)(rep + 1);
            c2.doff = c.doff + ((uint64_t)(rep + 1) << 32) + 99u;
            h_rng[0] = c2.dseed; h_rng[1] = c2.doff;
            tu_upload(d_rng, h_rng, 16);
            /* the same inputs, the reference of the new draws */
            if (setup_problem(&c2, &r, seed, 0) != 0) { snprintf(why, sizeof(why), "reference"); ok = 0; break; }
            poison_grads(&r);
            TU_CUDA(cudaGraphLaunch(exec, stream));
            TU_CUDA(cudaStreamSynchronize(stream));
            why[0] = 0;
            if (check_all(&c2, &r, NULL, why, sizeof(why)) != 0) {
                char tmp[1024];
                snprintf(tmp, sizeof(tmp), "replay %d: %s", rep + 1, why);
                snprintf(why, sizeof(why), "%s", tmp);
                ok = 0;
            }
        }
        TU_CUDA(cudaGraphExecDestroy(exec));
        TU_CUDA(cudaGraphDestroy(graph));
        if (ok) tu_pass(n_graph);
        else tu_fail(n_graph, "%s%s", why, plan_str(&plan));
    }
done:
    free(first[0]); free(first[1]); free(first[2]);
    tu_dfree(d_rng);
    run_free(&r);
    tu_current = "";
}

/* ============================================================================
 * main
 * ========================================================================== */
static const char usage_extra[] =
    "  --quick   ~30 problems plus the API and graph checks (for compute-sanitizer)\n"
    "  --filter  run only checks whose name contains SUBSTR\n"
    "  --list    print the problem names and exit\n";

static const char *cfg_name_at(int i) { return g_cfgs[i].name; }
static int cfg_quick_at(int i) { return g_cfgs[i].quick; }
static double cfg_work_at(int i) { return cfg_work(&g_cfgs[i]); }

static void checks(cudaStream_t stream, uint64_t seed)
{
    test_need(seed);
    test_api(stream, seed);
    test_graph(stream, seed + 5, PREP_ASYNC, 1);
    test_graph(stream, seed + 6, PREP_DEVICE, 1);
    test_graph(stream, seed + 7, PREP_DEVICE, 0);
    test_tables(stream, seed + 8);
    test_dropout(stream, seed + 9);
}

static void run_at(int i, cudaStream_t stream, uint64_t seed) { run_config(&g_cfgs[i], stream, seed); }

int main(int argc, char **argv)
{
    tu_suite s = { "test_bwd", usage_extra, { 0, cfg_name_at, cfg_quick_at, cfg_work_at }, checks, run_at, NULL };
    build_configs();
#if defined(TEST_BWD_VARIANT_ROW)
    {
        int i, n = 0;
        for (i = 0; i < g_ncfg; i++)
            if (TEST_BWD_VARIANT_KEEP(&g_cfgs[i])) g_cfgs[n++] = g_cfgs[i];
        g_ncfg = n;
        s.checks = NULL;
    }
#endif
    s.cfgs.n = g_ncfg;
    return tu_main(argc, argv, &s);
}
