/*
 * test_decode.cu - GPU tests of decode with split-KV (fmha_decode_plan_make,
 * fmha_decode_run, fmha_decode) against the CPU reference.
 *
 * Each problem has `batch` sequences of seqlen_q query rows (1..8) against a
 * KV cache whose per-sequence key counts vary (0, 1, tile edges, 1000, 4097,
 * and one 65536-key sequence in the full run). The cache is contiguous (entries
 * [entry, token, h_k, d] or head-major [entry, h_k, token, d], optional
 * cache_batch_idx: a permutation, a cache with more entries than sequences, two
 * sequences on one entry; slots past a sequence's keys, unused entries and row
 * padding hold NaN) or paged exactly as in test_prefill (tests/gpu/paged_pool.h:
 * SGLang 1-D and vLLM 2-D tables, LINEAR nhd/hnd and VECTORIZED pages of 1..2048
 * tokens, shuffled and shared pages, partly filled last pages, garbage table
 * entries before and after the used ones, NaN in every slot nobody may read).
 * Queries/O are [batch, seqlen_q, nhead_q, d] or head-major [batch, nhead_q,
 * seqlen_q, d], with padded rows and batch entries; LSE [batch, nhead_q,
 * seqlen_q] with padded heads and batches. FP8 (e4m3) KV with bf16 or e4m3
 * queries and a bf16 O: descales NONE / PER_TENSOR (contiguous or paged) and
 * PER_PAGE (paged); codes drawn as in test_prefill (full-range K/V with the
 * softmax scale divided by 16, 64 for e4m3 queries).
 * The reference (tests/ref/fmha_ref.h) runs the group-mode forward over K/V
 * gathered into contiguous float arrays (dequantised for fp8), one row at a
 * time (fmha_ref_fwd_row): masks (FlashAttention semantics, both alignments),
 * soft cap, ALiBi ([nhead_q] or [batch, nhead_q] slopes, bottom-right). The
 * split/combine identity itself is the host test's (test_splitkv).
 *
 * Checked per problem: the plan (kernel of family DECODE, KV dtype, the
 * smallest serving head dim, page class 0 for a contiguous cache and the
 * largest kernel page size <= the problem's for pages, the right layout, soft
 * cap/mask served, the lean kernel where the set has one; num_splits equal to
 * an explicit request, within 1..key tiles for the heuristic; combine of family
 * SPLITKV_COMBINE, NULL iff one split; workspace_size > 0 iff splits > 1 and
 * large enough for fp32 partials; a sane launch); one launch (plan + run, or
 * fmha_decode, or a captured CUDA graph of fmha_decode_run) writes every
 * logical O element and LSE entry with a finite value (rows that see no key:
 * O exactly 0, LSE -inf), leaves O/LSE padding, the guard zones around O, LSE
 * and the workspace untouched, does not modify Q, the cache, the tables or the
 * descales, and matches the reference within rel-L2 fp16 2e-3 / bf16 1e-2 (fp8
 * KV: bf16, the output's) plus a loose max-abs bound, LSE within 2e-3 (5e-3
 * with a soft cap). With more than one split the problem runs twice and both
 * outputs must be bitwise equal (the workspace poisoned with NaN in between).
 * Layer problems make one plan and run it on a second, independent set of
 * inputs (new pointers, same shape). fmha_decode with num_splits 0 and a
 * missing or too small workspace must fall back to one split (and leave the
 * small workspace alone).
 *
 * Then: the registry of the default decode set, plans (page classes, padded
 * head dims, split requests, the heuristic's extremes, a small explicit set
 * with a SOFTCAP-only and a NOMASK row), and bad input (statuses, a message,
 * O/LSE untouched: nothing launched), including runs whose args differ from
 * the plan's shape or features.
 *
 * compute-sanitizer: `--quick` (~35 problems plus the API checks) for memcheck;
 * the NaN slots and garbage table entries make a read past a sequence's keys
 * show up as NaN or an invalid access.
 *
 * Build:  make BUILD=build build/tests/test_decode
 *         (nvcc -x cu -std=c++17 -O3 -Iinclude -Itests $(NVCC_ARCH) tests/gpu/test_decode.cu)
 * Run:    build/tests/test_decode [--quick] [--filter SUBSTR] [--list] [--seed N]
 * Output: one `PASS name` / `FAIL name: why` line per check, last line
 *         `N passed, M failed`; exit status 1 on any failure. Without a GPU:
 *         `SKIP test_decode: no GPU`, `0 passed, 0 failed`, exit 0.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmha_tile.h"
#include "test_util.h"
#include "paged_pool.h"
#include "../ref/fmha_ref.h"

/* The library's decode kernels: fp16/bf16/fp8-KV, hdim 64/128/256, every page
 * class (0: contiguous cache), LINEAR and VECTORIZED. */
DECL_FMHA_KERNEL_SET(decode_set, FMHA_DEFAULT_DECODE_SET)

/* A SOFTCAP-only contiguous row (it must also serve problems without a soft
 * cap, a run-time choice) and a NOMASK page-16 row (unmasked problems only;
 * no contiguous kernel, nothing below page 16). */
#define LEAN_SET(X)                                                                        \
    X(DECODE, BF16, 128, MASK,   SOFTCAP,   0,  FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)    \
    X(DECODE, FP16, 64,  NOMASK, NOSOFTCAP, 16, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(lean_set, LEAN_SET)

/* ============================================================================
 * Problem descriptions
 * ========================================================================== */
#define MAXB PP_MAXB
#define MAXCFG 300
/* Poisoned elements before and after the O and LSE buffers (keeps O 16-byte aligned). */
#define GUARD 256
/* Poisoned bytes before and after the workspace (keeps it 16-byte aligned). */
#define WS_GUARD 256
#define WS_POISON 0xFFu            /* fp32 NaN in every byte pattern */
#define SG FMHA_PAGE_TABLE_SGLANG_1D
#define VL FMHA_PAGE_TABLE_VLLM_2D

typedef struct dc_cfg {
    char name[256];
    const fmha_kernel_set *set;  /* NULL: decode_set                                   */
    fmha_dtype dtype;            /* KV dtype (and Q/O for fp16/bf16)                   */
    int batch, hq, hk, d, sq;
    int lk[MAXB];                /* keys of each sequence                              */
    int maxk_slack;              /* max_seqlen_k = longest + slack                     */
    /* contiguous cache */
    int paged;
    int cbi;                     /* cache_batch_idx: 0 NULL; 1 a permutation; 2 a
                                    permutation into a cache of batch + 3 entries;
                                    3 sequences 0 and 1 on one entry                  */
    int cap_slack;               /* cache tokens past the longest sequence (NaN)       */
    int khnd;                    /* cache [entry, h_k, token, d] (else [entry, token, h_k, d]) */
    /* paged cache (paged_pool.h) */
    int page, table, hnd, vec, shuffle, share, spare, indptr_base, bt_extra, page_pad;
    /* strides */
    int pad;                     /* extra elements per Q/O/K row (V gets pad + a unit)  */
    int qhm;                     /* Q/O head-major [b, hq, sq, d]                      */
    int bpad;                    /* extra elements per batch entry of Q/O and the cache */
    int lse, lse_pad;            /* LSE on; extra floats per head (and 5 per batch)     */
    fmha_mask_type mask;
    int wl, wr;
    float cap;
    int alibi;                   /* 0 off, 1 one slope per head, 2 per batch entry     */
    int splits;                  /* num_splits passed: 0 the heuristic                 */
    int one_call;                /* fmha_decode instead of plan + run                  */
    int ws;                      /* one_call, splits 0: workspace 0 the plan's size,
                                    1 NULL, 2 too small (16 bytes)                    */
    int graph;                   /* fmha_decode_run captured in a CUDA graph           */
    int layers;                  /* 2: the plan also runs a second, independent input  */
    float scale;                 /* 0: 1/sqrt(d) (fp8: see cfg_scale)                  */
    float amp;
    /* FP8 KV (dtype FP8) */
    int q8;                      /* e4m3 queries (else bf16)                            */
    fmha_kv_scale kvs;
    float kds, vds, qds;         /* PER_TENSOR descales; q8: q_descale (0: NULL)        */
    int ds_pad;                  /* PER_PAGE descale page stride h_k + ds_pad; -1 head-major */
    int r8k, r8v, r8q;
    int sinks;                   /* one attention-sink logit per query head            */
    int quick;
} dc_cfg;

static dc_cfg g_cfgs[MAXCFG];
static int g_ncfg;

static const char *dtype_str(fmha_dtype t) { return t == FMHA_DTYPE_BF16 ? "bf16" : t == FMHA_DTYPE_FP16 ? "fp16" : "fp8"; }

/* Contiguous cache, causal bottom-right (-1, 0), LSE on, the heuristic's splits;
 * paged defaults (when cfg_paged is called): shuffled pages, 3 spare pages, 3
 * garbage entries per vLLM row. */
static dc_cfg cfg_make(fmha_dtype dt, int b, const int *lk, int sq, int hq, int hk, int d)
{
    dc_cfg c;
    int i;
    memset(&c, 0, sizeof(c));
    c.dtype = dt; c.batch = b; c.sq = sq; c.hq = hq; c.hk = hk; c.d = d;
    for (i = 0; i < b; i++) c.lk[i] = lk[i];
    c.shuffle = 1; c.spare = 3; c.bt_extra = 3;
    c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wl = -1; c.wr = 0;
    c.lse = 1; c.amp = 1.0f;
    return c;
}

static void cfg_paged(dc_cfg *c, int page, int table, int hnd, int vec)
{
    c->paged = 1; c->page = page; c->table = table; c->hnd = hnd; c->vec = vec;
}

static void cfg_mask(dc_cfg *c, fmha_mask_type m, int wl, int wr) { c->mask = m; c->wl = wl; c->wr = wr; }

/* FP8 KV: per-tensor descales 0.37 (K) and 1.9 (V), q_descale 0.6 for e4m3
 * queries, padded per-page descale rows, mid-range queries, full-range K/V. */
static dc_cfg cfg_make8(int b, const int *lk, int sq, int hq, int hk, int d, int q8, fmha_kv_scale kvs)
{
    dc_cfg c = cfg_make(FMHA_DTYPE_FP8, b, lk, sq, hq, hk, d);
    c.q8 = q8; c.kvs = kvs;
    c.kds = 0.37f; c.vds = 1.9f;
    c.qds = q8 ? 0.6f : 0.0f;
    c.ds_pad = 3;
    c.r8q = R8_MID;
    return c;
}

static void cfg_name(dc_cfg *c)
{
    char *s = c->name;
    size_t cap = sizeof(c->name), n;
    int i;
    n = (size_t)snprintf(s, cap, "decode_%s_b%d_h%d:%d_sq%d_k", dtype_str(c->dtype), c->batch, c->hq, c->hk, c->sq);
    for (i = 0; i < c->batch; i++) n += (size_t)snprintf(s + n, cap - n, "%s%d", i ? "," : "", c->lk[i]);
    n += (size_t)snprintf(s + n, cap - n, "_d%d", c->d);
    if (!c->paged) {
        n += (size_t)snprintf(s + n, cap - n, "_contig%s", c->khnd ? "_hnd" : "");
        if (c->cbi) n += (size_t)snprintf(s + n, cap - n, "_cbi%s", c->cbi == 1 ? "perm" : c->cbi == 2 ? "bigcache" : "shared");
        if (c->cap_slack) n += (size_t)snprintf(s + n, cap - n, "_capslack%d", c->cap_slack);
    } else {
        n += (size_t)snprintf(s + n, cap - n, "_page%d_%s_%s", c->page, c->table == VL ? "vllm" : "sglang",
                              c->vec ? "vectorized" : c->hnd ? "hnd" : "nhd");
        if (!c->shuffle) n += (size_t)snprintf(s + n, cap - n, "_inorder");
        if (c->share) n += (size_t)snprintf(s + n, cap - n, "_share%d", c->share);
        if (c->spare != 3) n += (size_t)snprintf(s + n, cap - n, "_spare%d", c->spare);
        if (c->indptr_base) n += (size_t)snprintf(s + n, cap - n, "_indptrbase%d", c->indptr_base);
        if (c->table == VL && c->bt_extra != 3) n += (size_t)snprintf(s + n, cap - n, "_btextra%d", c->bt_extra);
        if (c->page_pad) n += (size_t)snprintf(s + n, cap - n, "_pagepad%d", c->page_pad);
    }
    if (c->pad) n += (size_t)snprintf(s + n, cap - n, "_pad%d", c->pad);
    if (c->qhm) n += (size_t)snprintf(s + n, cap - n, "_qheadmajor");
    if (c->bpad) n += (size_t)snprintf(s + n, cap - n, "_bpad%d", c->bpad);
    if (c->mask == FMHA_MASK_NONE) n += (size_t)snprintf(s + n, cap - n, "_nomask");
    else n += (size_t)snprintf(s + n, cap - n, "_%s(%d,%d)", c->mask == FMHA_MASK_TOP_LEFT ? "t" : "b", c->wl, c->wr);
    if (c->cap > 0) n += (size_t)snprintf(s + n, cap - n, "_cap%g", c->cap);
    if (c->alibi) n += (size_t)snprintf(s + n, cap - n, "_alibi%s", c->alibi == 2 ? "batch" : "head");
    if (c->sinks) n += (size_t)snprintf(s + n, cap - n, "_sinks");
    if (!c->lse) n += (size_t)snprintf(s + n, cap - n, "_nolse");
    if (c->lse_pad) n += (size_t)snprintf(s + n, cap - n, "_lsepad%d", c->lse_pad);
    if (c->maxk_slack) n += (size_t)snprintf(s + n, cap - n, "_maxkslack%d", c->maxk_slack);
    if (c->scale > 0) n += (size_t)snprintf(s + n, cap - n, "_scale%g", c->scale);
    if (c->amp != 1.0f) n += (size_t)snprintf(s + n, cap - n, "_amp%g", c->amp);
    if (c->dtype == FMHA_DTYPE_FP8) {
        n += (size_t)snprintf(s + n, cap - n, "_q%s", c->q8 ? "fp8" : "bf16");
        if (c->q8) n += c->qds > 0 ? (size_t)snprintf(s + n, cap - n, "_qds%g", c->qds) : (size_t)snprintf(s + n, cap - n, "_qdsnull");
        if (c->kvs == FMHA_KV_SCALE_NONE) n += (size_t)snprintf(s + n, cap - n, "_scalenone");
        else if (c->kvs == FMHA_KV_SCALE_PER_TENSOR) n += (size_t)snprintf(s + n, cap - n, "_tensor%g,%g", c->kds, c->vds);
        else if (c->ds_pad < 0) n += (size_t)snprintf(s + n, cap - n, "_perpage_headmajor");
        else n += (size_t)snprintf(s + n, cap - n, "_perpage_dspad%d", c->ds_pad);
        if (c->r8k != R8_FULL || c->r8v != R8_FULL) n += (size_t)snprintf(s + n, cap - n, "_k%s_v%s", r8_str[c->r8k], r8_str[c->r8v]);
    }
    n += c->splits ? (size_t)snprintf(s + n, cap - n, "_splits%d", c->splits) : (size_t)snprintf(s + n, cap - n, "_heuristic");
    if (c->one_call) n += (size_t)snprintf(s + n, cap - n, "_onecall%s", !c->splits ? (c->ws == 1 ? "_nows" : c->ws == 2 ? "_smallws" : "") : "");
    if (c->graph) n += (size_t)snprintf(s + n, cap - n, "_graph");
    if (c->layers > 1) n += (size_t)snprintf(s + n, cap - n, "_layers%d", c->layers);
    if (c->set == &lean_set) n += (size_t)snprintf(s + n, cap - n, "_leanset");
}

/* q.k products of the reference, ignoring the mask (x layers). */
static double cfg_work(const dc_cfg *c)
{
    double w = 0.0;
    int b;
    for (b = 0; b < c->batch; b++) w += (double)c->sq * c->lk[b];
    return w * c->hq * c->d * (c->layers > 1 ? c->layers : 1);
}

static void add(dc_cfg c, int quick)
{
    if (g_ncfg >= MAXCFG) { fprintf(stderr, "test_decode: MAXCFG too small\n"); exit(2); }
    c.quick = quick;
    cfg_name(&c);
    g_cfgs[g_ncfg++] = c;
}

/* The table. Comments say what each group is after; `quick` marks the ~35
 * problems of --quick (the run for compute-sanitizer). */
static void build_configs(void)
{
    const fmha_dtype F = FMHA_DTYPE_FP16, B = FMHA_DTYPE_BF16;
    const fmha_mask_type NO = FMHA_MASK_NONE, TL = FMHA_MASK_TOP_LEFT, BR = FMHA_MASK_BOTTOM_RIGHT;
    const fmha_kv_scale NS = FMHA_KV_SCALE_NONE, PT = FMHA_KV_SCALE_PER_TENSOR, PP = FMHA_KV_SCALE_PER_PAGE;
    int i, j;

    /* 1. contiguous cache, the core matrix: head dims 64/128/256 x seqlen_q 1, 2,
     * 3, 8; GQA ratios 1, 4, 8, 16; batch 1..8 with key counts from tile edges to
     * 4097; split counts rotate over the heuristic, 1, 2, 3, 7 and 64. */
    {
        static const int hd[3] = { 64, 128, 256 }, sqs[4] = { 1, 2, 3, 8 };
        static const int ratio[4][2] = { { 2, 2 }, { 8, 2 }, { 8, 1 }, { 16, 1 } };
        static const int pool[10] = { 1, 17, 63, 64, 65, 1000, 4097, 300, 129, 33 };
        static const int spl[6] = { 0, 1, 2, 3, 7, 64 };
        for (i = 0; i < 3; i++)
            for (j = 0; j < 4; j++) {
                const int n = 4 * i + j, b = 1 + (3 * n) % 8;
                int lk[MAXB], k;
                dc_cfg c;
                for (k = 0; k < b; k++) lk[k] = pool[(n + 3 * k) % 10];
                c = cfg_make(n % 2 ? B : F, b, lk, sqs[j], ratio[n % 4][0], ratio[n % 4][1], hd[i]);
                c.splits = spl[n % 6];
                if (n % 3 == 2) cfg_mask(&c, NO, -1, -1);
                add(c, n == 0 || n == 5 || n == 10);
            }
    }

    /* 2. key counts: a sequence with none (O = 0, LSE = -inf), one key, tile
     * edges, long ones; seqlen_q 8 under causal bottom-right (the top rows of
     * short sequences see nothing); every sequence empty; the 64k-key sequence
     * (full run). */
    {
        static const int lk8[8] = { 0, 1, 17, 63, 64, 65, 1000, 4097 };
        static const int lk0[3] = { 0, 0, 0 }, lk1[4] = { 1, 1, 1, 1 };
        static const int lkb[2] = { 65536, 5 }, lkc[2] = { 3, 65536 };
        dc_cfg c;
        c = cfg_make(F, 8, lk8, 1, 8, 2, 128);
        add(c, 1);
        c = cfg_make(B, 8, lk8, 8, 4, 1, 64); c.splits = 3;
        add(c, 1);
        c = cfg_make(F, 8, lk8, 3, 16, 1, 256); c.splits = 64;
        add(c, 0);
        c = cfg_make(B, 8, lk8, 2, 4, 4, 128); c.splits = 7; cfg_mask(&c, NO, -1, -1);
        add(c, 0);
        c = cfg_make(F, 3, lk0, 2, 4, 2, 64); c.splits = 2;
        add(c, 1);
        c = cfg_make(B, 4, lk1, 8, 8, 2, 128); c.splits = 2;
        add(c, 0);
        c = cfg_make(F, 2, lkb, 1, 8, 1, 128);
        add(c, 0);
        c = cfg_make(B, 2, lkc, 2, 16, 2, 64); c.splits = 128;
        add(c, 0);
    }

    /* 3. cache_batch_idx: a permutation, a cache with more entries than
     * sequences (and tokens past the longest one), two sequences on one entry
     * (the shorter must not see the longer one's keys). */
    {
        static const int lka[5] = { 100, 7, 1000, 0, 64 }, lkb[3] = { 500, 33, 1 }, lkc[3] = { 300, 100, 777 };
        dc_cfg c;
        c = cfg_make(F, 5, lka, 1, 8, 2, 64); c.cbi = 1; c.splits = 2;
        add(c, 1);
        c = cfg_make(B, 3, lkb, 4, 4, 1, 128); c.cbi = 2; c.cap_slack = 37;
        add(c, 0);
        c = cfg_make(F, 3, lkc, 2, 4, 2, 128); c.cbi = 3; c.splits = 3;
        add(c, 0);
        c = cfg_make(B, 5, lka, 8, 8, 1, 256); c.cbi = 2; c.splits = 7; c.khnd = 1;
        add(c, 0);
    }

    /* 4. strides: padded rows and batch entries, head-major Q/O and cache,
     * padded LSE; padded head dims on larger kernels (72, 96 -> 128; 200 -> 256;
     * 40 and 8 -> 64). */
    {
        static const int lk[3] = { 300, 1, 1500 };
        static const int hd[6] = { 72, 96, 200, 40, 8, 96 };
        dc_cfg c;
        c = cfg_make(F, 3, lk, 2, 8, 2, 64); c.pad = 8; c.bpad = 24; c.lse_pad = 3; c.splits = 3;
        add(c, 1);
        c = cfg_make(B, 3, lk, 4, 8, 2, 128); c.qhm = 1; c.khnd = 1; c.pad = 16; c.lse_pad = 1;
        add(c, 0);
        c = cfg_make(F, 3, lk, 3, 4, 4, 256); c.qhm = 1; c.bpad = 8; c.cap_slack = 5;
        add(c, 0);
        for (i = 0; i < 6; i++) {
            c = cfg_make(i % 2 ? B : F, 3, lk, 1 + i % 4, 8, 2, hd[i]);
            c.pad = i < 3 ? 8 : 0;
            c.splits = i % 3 ? 4 : 0;
            if (i == 5) cfg_paged(&c, 16, SG, 1, 0);
            add(c, i == 0);
        }
    }

    /* 5. split counts on one problem, and more splits than key tiles (empty
     * splits); fmha_decode with explicit splits, with the heuristic and enough
     * workspace, with none and with one too small (both: one split). */
    {
        static const int lk[2] = { 1000, 300 }, lks[2] = { 100, 5 }, lkl[1] = { 8000 };
        static const int spl[7] = { 1, 2, 3, 7, 64, 128, 0 };
        dc_cfg c;
        for (i = 0; i < 7; i++) {
            c = cfg_make(F, 2, lk, 2, 8, 2, 128); c.splits = spl[i];
            add(c, i == 2 || i == 4);
        }
        c = cfg_make(B, 2, lks, 1, 4, 1, 64); c.splits = 7;
        add(c, 0);
        c = cfg_make(B, 2, lks, 3, 4, 1, 64); c.splits = 64;
        add(c, 1);
        for (i = 0; i < 4; i++) {
            c = cfg_make(i % 2 ? B : F, 1, lkl, 1, 8, 1, 128);
            c.one_call = 1;
            c.splits = i == 3 ? 5 : 0;
            c.ws = i < 3 ? i : 0;
            add(c, i == 1 || i == 3);
        }
    }

    /* 6. paged, LINEAR: page sizes 1, 8, 16, 64, 1024 x both tables, token- and
     * head-major pages; lengths that end in a partly filled last page, a
     * single-key sequence; splits rotate. */
    {
        static const int pages[5] = { 1, 8, 16, 64, 1024 };
        static const int hd[3] = { 64, 128, 256 };
        static const int lk[4] = { 300, 1, 1500, 17 };
        static const int spl[5] = { 0, 3, 1, 64, 7 };
        for (i = 0; i < 5; i++)
            for (j = 0; j < 2; j++) {
                dc_cfg c = cfg_make((i + j) % 2 ? B : F, 4, lk, 1 + 3 * j, 8, 2, hd[(i + j) % 3]);
                cfg_paged(&c, pages[i], j ? VL : SG, (i + j) % 2, 0);
                c.splits = spl[(i + 2 * j) % 5];
                add(c, (i == 0 && j == 1) || (i == 2 && j == 0) || (i == 4 && j == 1));
            }
    }
    /* the other powers of two (2, 4, 32, 128, 256, 512, 2048) */
    {
        static const int pages[7] = { 2, 4, 32, 128, 256, 512, 2048 };
        static const int lk[2] = { 700, 4100 };
        for (i = 0; i < 7; i++) {
            dc_cfg c = cfg_make(i % 2 ? B : F, 2, lk, 2, 4, 1, 128);
            cfg_paged(&c, pages[i], i % 2 ? SG : VL, (i / 2) % 2, 0);
            c.splits = i % 3 ? 0 : 5;
            add(c, 0);
        }
    }
    /* VECTORIZED pages 8 (the minimum), 16, 64, 1024 x both tables */
    {
        static const int pages[4] = { 8, 16, 64, 1024 };
        static const int hd[4] = { 64, 128, 256, 96 };
        static const int lk[3] = { 301, 1, 2053 };
        for (i = 0; i < 4; i++)
            for (j = 0; j < 2; j++) {
                dc_cfg c = cfg_make((i + j) % 2 ? F : B, 3, lk, 1 + j, 8, 2, hd[(i + j) % 4]);
                cfg_paged(&c, pages[i], j ? VL : SG, 0, 1);
                c.splits = (i + j) % 2 ? 0 : 3;
                add(c, (i == 0 && j == 0) || (i == 2 && j == 1));
            }
    }
    /* shared pages, in-order pages without spares, table garbage, padding */
    {
        static const int lks[4] = { 500, 700, 300, 1300 }, lke[3] = { 777, 777, 777 };
        static const int lk[3] = { 400, 7, 1500 };
        dc_cfg c;
        c = cfg_make(F, 4, lks, 2, 8, 2, 128); cfg_paged(&c, 16, SG, 0, 0); c.share = 1; c.splits = 3;
        add(c, 1);
        c = cfg_make(B, 4, lks, 1, 4, 1, 64); cfg_paged(&c, 1, VL, 1, 0); c.share = 1;
        add(c, 0);
        c = cfg_make(F, 3, lke, 4, 4, 2, 64); cfg_paged(&c, 1024, VL, 0, 0); c.share = 2; c.splits = 2;
        add(c, 0);
        c = cfg_make(B, 3, lke, 1, 8, 2, 128); cfg_paged(&c, 16, SG, 0, 1); c.share = 2;
        add(c, 0);
        c = cfg_make(F, 3, lk, 1, 4, 2, 64); cfg_paged(&c, 16, SG, 0, 0); c.shuffle = 0; c.spare = 0;
        c.indptr_base = 5;
        add(c, 0);
        c = cfg_make(B, 3, lk, 2, 4, 2, 128); cfg_paged(&c, 64, VL, 0, 0); c.bt_extra = 0; c.spare = 5;
        add(c, 0);
        c = cfg_make(F, 3, lk, 2, 4, 2, 64); cfg_paged(&c, 8, VL, 1, 0); c.bt_extra = 40; c.pad = 8; c.page_pad = 24;
        c.bpad = 8; c.lse_pad = 2; c.splits = 4;
        add(c, 1);
        c = cfg_make(B, 3, lk, 2, 8, 1, 128); cfg_paged(&c, 64, SG, 0, 1); c.pad = 16; c.page_pad = 8; c.qhm = 1;
        add(c, 0);
    }
    /* sequences without keys: no pages (SGLang: equal indptr entries, the
     * last-page length ignored; vLLM: seqlen_k 0) */
    {
        static const int lkz[4] = { 0, 300, 0, 5 };
        dc_cfg c;
        c = cfg_make(F, 4, lkz, 2, 8, 2, 64); cfg_paged(&c, 16, SG, 0, 0); c.splits = 3;
        add(c, 1);
        c = cfg_make(B, 4, lkz, 1, 4, 1, 128); cfg_paged(&c, 1, VL, 1, 0);
        add(c, 0);
        c = cfg_make(F, 4, lkz, 3, 8, 2, 128); cfg_paged(&c, 8, VL, 0, 1); c.splits = 2;
        add(c, 0);
    }

    /* 7. FP8 (e4m3) KV, bf16 or e4m3 queries, bf16 O: LINEAR pages with each
     * descale mode, contiguous caches (NONE, PER_TENSOR), masks, soft cap,
     * ALiBi, windows, value ranges. */
    {
        static const int pages[4] = { 1, 16, 64, 1024 };
        static const int hd[4] = { 64, 128, 256, 96 };
        static const fmha_kv_scale kvr[3] = { PP, PT, NS };
        static const int lk[4] = { 300, 1, 1500, 64 };
        for (i = 0; i < 4; i++)
            for (j = 0; j < 2; j++) {
                const int n = 2 * i + j;
                dc_cfg c = cfg_make8(4, lk, 1 + 3 * j, 8, 2, hd[(i + j) % 4], n % 2, kvr[n % 3]);
                cfg_paged(&c, pages[i], j ? VL : SG, i % 2, 0);
                c.splits = n % 3 ? 0 : 3;
                if (n % 4 == 1) c.ds_pad = -1;
                if (n == 5) c.qds = 0.0f;                     /* e4m3 queries without a q_descale */
                add(c, n == 0 || n == 3);
            }
    }
    {
        static const int lk[3] = { 1000, 0, 129 }, lkl[2] = { 4097, 17 };
        dc_cfg c;
        c = cfg_make8(3, lk, 1, 8, 1, 128, 0, PT); c.splits = 2;
        add(c, 1);
        c = cfg_make8(3, lk, 8, 4, 2, 64, 1, NS); c.cbi = 1;
        add(c, 0);
        c = cfg_make8(3, lk, 2, 16, 1, 256, 1, PT); c.cbi = 2; c.khnd = 1; c.pad = 16; c.splits = 7;
        add(c, 0);
        c = cfg_make8(2, lkl, 4, 8, 2, 128, 0, PP); cfg_paged(&c, 16, VL, 0, 0); c.cap = 30.0f; c.alibi = 1;
        add(c, 1);
        c = cfg_make8(2, lkl, 3, 4, 2, 64, 1, PT); cfg_mask(&c, BR, 100, 0); c.alibi = 2; c.splits = 5;
        add(c, 0);
        c = cfg_make8(2, lkl, 8, 4, 1, 128, 1, PP); cfg_paged(&c, 64, SG, 1, 0); cfg_mask(&c, TL, 0, 0);
        add(c, 0);
        c = cfg_make8(2, lkl, 2, 4, 2, 128, 0, PT); c.r8k = R8_MID; c.r8v = R8_LOW; c.splits = 3;
        add(c, 0);
        c = cfg_make8(2, lkl, 1, 4, 2, 64, 1, PP); cfg_paged(&c, 1, SG, 0, 0); c.r8k = R8_LOW; c.r8v = R8_LOW;
        c.scale = 4.0f; c.lse = 0;
        add(c, 0);
        c = cfg_make8(2, lkl, 2, 8, 2, 128, 0, PP); cfg_paged(&c, 16, SG, 0, 0); c.share = 2; c.layers = 2;
        c.splits = 3;
        add(c, 0);
    }

    /* 8. masks: causal bottom-right with seqlen_q 8 over short and long
     * sequences, sliding windows, a right window past the diagonal, top-left
     * windows that hide every key of some rows (O = 0, LSE = -inf), top-left
     * causal; soft cap 30 (and a saturating one), ALiBi per head and per batch,
     * with masks and soft cap, on pages; LSE off. */
    {
        static const int lkm[4] = { 3, 8, 100, 1000 }, lkw[3] = { 1000, 50, 4097 };
        static const struct { fmha_mask_type m; int wl, wr; } w[] = {
            { BR, -1, 0 }, { BR, 100, 0 }, { BR, 0, 0 }, { TL, 0, 0 }, { BR, -1, 2 }, { TL, -1, 0 },
            { TL, 2, -1 }, { BR, 5, -1 }, { TL, -1, -1 },
        };
        for (i = 0; i < 9; i++) {
            dc_cfg c = cfg_make(i % 2 ? B : F, i % 3 == 1 ? 3 : 4, i % 3 == 1 ? lkw : lkm, i % 3 == 1 ? 4 : 8,
                                8, i % 2 ? 1 : 2, i % 3 == 2 ? 128 : 64);
            cfg_mask(&c, w[i].m, w[i].wl, w[i].wr);
            c.splits = i % 2 ? 3 : 0;
            if (i == 6) cfg_paged(&c, 16, VL, 0, 0);
            add(c, i == 0 || i == 1 || i == 3);
        }
    }
    {
        static const int lk[3] = { 1000, 50, 4097 }, lk8[4] = { 3, 8, 100, 1000 };
        dc_cfg c;
        c = cfg_make(F, 3, lk, 2, 8, 2, 128); c.cap = 30.0f; c.splits = 3;
        add(c, 1);
        c = cfg_make(B, 3, lk, 1, 8, 1, 64); c.cap = 30.0f; cfg_mask(&c, NO, -1, -1);
        add(c, 0);
        c = cfg_make(F, 3, lk, 2, 4, 2, 64); c.cap = 2.0f; c.scale = 1.0f;   /* the cap saturates */
        add(c, 0);
        c = cfg_make(B, 4, lk8, 8, 8, 2, 128); c.alibi = 1; c.splits = 2;
        add(c, 1);
        c = cfg_make(F, 3, lk, 1, 8, 2, 64); c.alibi = 2; cfg_mask(&c, NO, -1, -1);
        add(c, 0);
        c = cfg_make(B, 3, lk, 3, 4, 1, 256); c.alibi = 2; c.cap = 30.0f; cfg_mask(&c, BR, 100, 0); c.splits = 7;
        add(c, 0);
        c = cfg_make(F, 3, lk, 2, 8, 2, 128); c.alibi = 1; cfg_paged(&c, 64, SG, 0, 1); c.splits = 3;
        add(c, 0);
        c = cfg_make(B, 3, lk, 2, 8, 2, 128); c.alibi = 2; cfg_paged(&c, 1, VL, 1, 0);
        add(c, 0);
        c = cfg_make(F, 4, lk8, 8, 8, 2, 64); c.lse = 0; c.splits = 3;
        add(c, 1);
        c = cfg_make(B, 3, lk, 1, 8, 2, 128); c.lse = 0; cfg_paged(&c, 16, SG, 0, 0); cfg_mask(&c, NO, -1, -1);
        add(c, 0);
        c = cfg_make(F, 3, lk, 1, 8, 2, 128); c.maxk_slack = 5000; c.amp = 4.0f;   /* a loose bound, peaky scores */
        add(c, 0);
    }

    /* 9. CUDA graph capture of fmha_decode_run; one plan run on two layers'
     * inputs; the explicit lean set (a SOFTCAP kernel without a soft cap, a
     * NOMASK kernel). */
    {
        static const int lk[3] = { 1000, 17, 300 };
        dc_cfg c;
        c = cfg_make(F, 3, lk, 2, 8, 2, 128); c.graph = 1; c.splits = 3;
        add(c, 1);
        c = cfg_make(B, 3, lk, 1, 8, 1, 64); c.graph = 1; cfg_paged(&c, 16, VL, 0, 0);
        add(c, 0);
        c = cfg_make(F, 3, lk, 2, 8, 2, 128); c.layers = 2; c.splits = 4;
        add(c, 1);
        c = cfg_make(B, 3, lk, 1, 4, 1, 64); c.layers = 2; cfg_paged(&c, 16, SG, 0, 0); c.splits = 1;
        add(c, 0);
        c = cfg_make(B, 3, lk, 2, 8, 2, 128); c.set = &lean_set; c.splits = 2;
        add(c, 1);
        c = cfg_make(B, 3, lk, 1, 8, 2, 96); c.set = &lean_set; c.cap = 10.0f;
        add(c, 0);
        c = cfg_make(F, 3, lk, 2, 8, 2, 64); c.set = &lean_set; cfg_paged(&c, 16, SG, 0, 0);
        cfg_mask(&c, NO, -1, -1); c.splits = 3;
        add(c, 1);
        c = cfg_make(F, 3, lk, 1, 4, 4, 64); c.set = &lean_set; cfg_paged(&c, 64, VL, 1, 0);
        cfg_mask(&c, TL, -1, -1);           /* a window of (-1, -1): no mask */
        add(c, 0);
    }

    /* attention sinks: the first split's rows fold the sink, the combine
     * merges it with the others' (splits 1, 3, 16 and the heuristic), a
     * sequence with no keys (O = 0, LSE = sink), GQA-packed rows of several
     * heads, seqlen_q 4, paged, fp8 KV. */
    {
        static const int lk[3] = { 1000, 0, 300 };
        dc_cfg c;
        c = cfg_make(B, 3, lk, 1, 8, 2, 128); c.sinks = 1; c.splits = 3;
        add(c, 1);
        c = cfg_make(B, 3, lk, 1, 8, 2, 128); c.sinks = 1; c.splits = 1;
        add(c, 0);
        c = cfg_make(F, 3, lk, 4, 8, 1, 64); c.sinks = 1; c.splits = 16; cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_make(B, 3, lk, 2, 16, 2, 128); c.sinks = 1; cfg_paged(&c, 16, SG, 1, 0);
        add(c, 0);
        c = cfg_make8(3, lk, 1, 8, 2, 128, 1, FMHA_KV_SCALE_PER_TENSOR); c.sinks = 1; c.splits = 4;
        add(c, 0);
    }
}

/* ============================================================================
 * One problem's inputs, reference and device buffers
 * ========================================================================== */
typedef struct dc_inst {
    /* geometry */
    int32_t ssq[MAXB + 1], ssk[MAXB + 1];
    int tq, tk, maxk;
    int esq, es;                 /* bytes per Q and per K/V element (1: e4m3)        */
    int dq;                      /* padded Q/O row                                  */
    int64_t s_q, hs_q, bs_q;     /* Q/O strides (elements)                           */
    int64_t hs_l, bs_l;          /* LSE strides                                      */
    size_t n_q, n_lse;
    /* contiguous cache */
    int n_ent, ctok;             /* entries, tokens per entry                         */
    int32_t cbi[MAXB];
    int64_t s_k, hs_k, bs_k, s_v, hs_v, bs_v;
    size_t n_kc, n_vc;
    unsigned char *kc, *vc;      /* the whole cache images                            */
    float *ckf, *cvf;            /* gathered (dequantised) K/V [tk][h_k][d]           */
    float cvamp;
    /* paged cache */
    pp_spec spec;
    pp_pool pool;
    /* Q, slopes, reference */
    unsigned char *qh;
    float *qf, *slopes, *ref_o, *ref_lse, *sinks;
    size_t n_slopes;
    /* device */
    void *dqp, *dk, *dv, *dout_all, *dout;
    float *dlse_all, *dlse, *dslopes, *d_kds, *d_vds, *d_qds, *d_sinks;
    int32_t *d_seqk, *d_cbi, *d_indptr, *d_indices, *d_last, *d_bt;
    unsigned char *dws_all;      /* workspace with guards                            */
    size_t ws_bytes;             /* the workspace passed (inside the guards)         */
    fmha_decode_args a;
} dc_inst;

static void inst_free(dc_inst *r)
{
    free(r->kc); free(r->vc); free(r->ckf); free(r->cvf);
    pp_free(&r->pool);
    free(r->qh); free(r->qf); free(r->slopes); free(r->ref_o); free(r->ref_lse); free(r->sinks);
    tu_dfree(r->dqp); tu_dfree(r->dk); tu_dfree(r->dv); tu_dfree(r->dout_all); tu_dfree(r->dlse_all);
    tu_dfree(r->dslopes); tu_dfree(r->d_kds); tu_dfree(r->d_vds); tu_dfree(r->d_qds); tu_dfree(r->d_sinks);
    tu_dfree(r->d_seqk); tu_dfree(r->d_cbi); tu_dfree(r->d_indptr); tu_dfree(r->d_indices); tu_dfree(r->d_last);
    tu_dfree(r->d_bt); tu_dfree(r->dws_all);
    memset(r, 0, sizeof(*r));
}

static int cfg_kv8(const dc_cfg *c) { return c->dtype == FMHA_DTYPE_FP8; }
static fmha_dtype cfg_qdt(const dc_cfg *c)
{
    return !cfg_kv8(c) ? c->dtype : c->q8 ? FMHA_DTYPE_FP8 : FMHA_DTYPE_BF16;
}
static int cfg_masked(const dc_cfg *c) { return c->mask != FMHA_MASK_NONE && (c->wl >= 0 || c->wr >= 0); }

/* The softmax scale: the problem's, or 1/sqrt(d); full-range fp8 keys (up to
 * 448 x descale 4) get it divided by 16 (64 with e4m3 queries) so scores stay
 * of order 10, where an fp32 LSE can still meet the absolute tolerance (as
 * test_prefill). */
static float cfg_scale(const dc_cfg *c)
{
    float s = 1.0f / sqrtf((float)c->d);
    if (c->scale > 0) return c->scale;
    if (cfg_kv8(c) && c->r8k == R8_FULL) s /= c->q8 ? 64.0f : 16.0f;
    return s;
}

static double tol_lse(const dc_cfg *c) { return c->cap > 0 ? 5e-3 : 2e-3; }

static void pool_spec(const dc_cfg *c, pp_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->name = c->name;
    s->dtype = c->dtype;
    s->batch = c->batch; s->hk = c->hk; s->d = c->d;
    s->lk = c->lk;
    s->page = c->page;
    s->hnd = c->hnd; s->vec = c->vec;
    s->pad = c->pad; s->page_pad = c->page_pad;
    s->shuffle = c->shuffle; s->share = c->share; s->spare = c->spare;
    s->indptr_base = c->indptr_base; s->bt_extra = c->bt_extra;
    s->amp = c->amp;
    s->r8k = c->r8k; s->r8v = c->r8v;
    s->kvs = c->kvs; s->kds = c->kds; s->vds = c->vds; s->ds_pad = c->ds_pad;
}

/* The contiguous cache: entries of ctok tokens, [entry, token, h_k, d] or
 * head-major, rows padded like the pool's; entry e holds the keys of every
 * sequence mapped to it (the longest one's count), NaN everywhere else. */
static void build_contiguous(const dc_cfg *c, dc_inst *r, fmha_ref_rng *rng)
{
    const int kv8 = cfg_kv8(c), vx = kv8 ? 16 : 8;
    const int dk = c->d + c->pad, dv = c->d + (c->pad ? c->pad + vx : 0);
    int efill[MAXB + 3], b, e, t, h, x, j, which;
    memset(efill, 0, sizeof(efill));
    r->n_ent = c->batch + (c->cbi == 2 ? 3 : 0);
    for (b = 0; b < c->batch; b++) r->cbi[b] = b;
    if (c->cbi == 1 || c->cbi == 2) {          /* a permutation of the entries, the first batch of it */
        int perm[MAXB + 3];
        for (e = 0; e < r->n_ent; e++) perm[e] = e;
        for (e = r->n_ent - 1; e > 0; e--) {
            int k = (int)(fmha_ref_rng_next(rng) % (uint64_t)(e + 1)), tmp = perm[e];
            perm[e] = perm[k]; perm[k] = tmp;
        }
        for (b = 0; b < c->batch; b++) r->cbi[b] = perm[b];
    } else if (c->cbi == 3) {                  /* sequences 0 and 1 on entry 1, the rest reversed */
        for (b = 0; b < c->batch; b++) r->cbi[b] = c->batch - 1 - b;
        r->cbi[0] = r->cbi[1] = 1;
    }
    for (b = 0; b < c->batch; b++)
        if (c->lk[b] > efill[r->cbi[b]]) efill[r->cbi[b]] = c->lk[b];
    r->ctok = r->maxk + c->cap_slack > 0 ? r->maxk + c->cap_slack : 1;
    if (!c->khnd) {
        r->s_k = (int64_t)c->hk * dk; r->hs_k = dk;
        r->s_v = (int64_t)c->hk * dv; r->hs_v = dv;
    } else {
        r->hs_k = (int64_t)r->ctok * dk; r->s_k = dk;
        r->hs_v = (int64_t)r->ctok * dv; r->s_v = dv;
    }
    r->bs_k = (int64_t)r->ctok * c->hk * dk + c->bpad;
    r->bs_v = (int64_t)r->ctok * c->hk * dv + c->bpad;
    r->n_kc = (size_t)r->n_ent * (size_t)r->bs_k;
    r->n_vc = (size_t)r->n_ent * (size_t)r->bs_v;
    r->kc = (unsigned char *)tu_hmalloc(r->n_kc * r->es + 2);
    r->vc = (unsigned char *)tu_hmalloc(r->n_vc * r->es + 2);
    img_poison(r->kc, r->es, r->n_kc);
    img_poison(r->vc, r->es, r->n_vc);
    for (which = 0; which < 2; which++) {
        unsigned char *img = which ? r->vc : r->kc;
        const int64_t bs = which ? r->bs_v : r->bs_k, st = which ? r->s_v : r->s_k, hs = which ? r->hs_v : r->hs_k;
        for (e = 0; e < r->n_ent; e++)
            for (t = 0; t < efill[e]; t++)
                for (h = 0; h < c->hk; h++)
                    for (x = 0; x < c->d; x++)
                        img_put(img, r->es, e * bs + t * st + h * hs + x,
                                rand_elem(rng, c->dtype, c->amp, which ? c->r8v : c->r8k));
    }
    /* gathered, dequantised (descale NONE or PER_TENSOR) */
    {
        const size_t n = (size_t)(r->tk > 0 ? r->tk : 1) * c->hk * c->d;
        const float kds = kv8 && c->kvs == FMHA_KV_SCALE_PER_TENSOR ? c->kds : 1.0f;
        const float vds = kv8 && c->kvs == FMHA_KV_SCALE_PER_TENSOR ? c->vds : 1.0f;
        r->ckf = (float *)tu_hmalloc(n * 4);
        r->cvf = (float *)tu_hmalloc(n * 4);
        r->cvamp = 0.0f;
        for (b = 0; b < c->batch; b++)
            for (j = 0; j < c->lk[b]; j++)
                for (h = 0; h < c->hk; h++)
                    for (x = 0; x < c->d; x++) {
                        const int64_t e0 = r->cbi[b];
                        const size_t o = ((size_t)(r->ssk[b] + j) * c->hk + h) * c->d + x;
                        r->ckf[o] = elem_f32(img_get(r->kc, r->es, e0 * r->bs_k + j * r->s_k + h * r->hs_k + x), c->dtype) * kds;
                        r->cvf[o] = elem_f32(img_get(r->vc, r->es, e0 * r->bs_v + j * r->s_v + h * r->hs_v + x), c->dtype) * vds;
                        if (fabsf(r->cvf[o]) > r->cvamp) r->cvamp = fabsf(r->cvf[o]);
                    }
    }
}

/* Logical (b, h, i) -> element offsets of Q/O and LSE on the device. */
static int64_t off_qo(const dc_inst *r, int b, int h, int i) { return b * r->bs_q + i * r->s_q + h * r->hs_q; }
static int64_t off_lse(const dc_inst *r, int b, int h, int i) { return b * r->bs_l + h * r->hs_l + i; }

/* The reference in group mode over compact arrays: Q [tq][hq][d], K/V
 * [tk][hk][d], O like Q, LSE [hq][tq]. */
static void make_ref(const dc_cfg *c, const dc_inst *r, fmha_ref_fwd *p)
{
    memset(p, 0, sizeof(*p));
    p->is_group_mode = 1;
    p->batch = c->batch; p->nhead_q = c->hq; p->nhead_k = c->hk;
    p->seqstart_q = r->ssq; p->seqstart_k = r->ssk;
    p->hdim_q = p->hdim_v = c->d;
    p->q = r->qf;
    p->k = c->paged ? r->pool.kf : r->ckf;
    p->v = c->paged ? r->pool.vf : r->cvf;
    p->o = r->ref_o; p->lse = r->ref_lse;
    p->stride_q = p->stride_o = (int64_t)c->hq * c->d; p->nhead_stride_q = p->nhead_stride_o = c->d;
    p->stride_k = p->stride_v = (int64_t)c->hk * c->d; p->nhead_stride_k = p->nhead_stride_v = c->d;
    p->nhead_stride_lse = r->tq > 0 ? r->tq : 1;
    p->scale = cfg_scale(c);
    p->logits_soft_cap = c->cap;
    p->alibi_slopes = c->alibi ? r->slopes : NULL;
    p->alibi_batch_stride = c->alibi == 2 ? c->hq + 3 : 0;   /* padded per-batch rows */
    p->mask_type = (int)c->mask;
    p->window_left = c->wl; p->window_right = c->wr;
    p->sinks = c->sinks ? r->sinks : NULL;
}

/* Builds one instance's host data (from rng), the reference, the device
 * buffers and the args (without a workspace). */
static void inst_make(const dc_cfg *c, dc_inst *r, fmha_ref_rng *rng)
{
    const int kv8 = cfg_kv8(c);
    const fmha_dtype qdt = cfg_qdt(c);
    const float qds = c->q8 && c->qds > 0 ? c->qds : 1.0f;
    fmha_ref_fwd p;
    fmha_decode_args *a = &r->a;
    size_t i;
    int b, h, x, row;

    memset(r, 0, sizeof(*r));
    r->es = kv8 ? 1 : 2;
    r->esq = qdt == FMHA_DTYPE_FP8 ? 1 : 2;
    for (b = 0; b < c->batch; b++) {
        r->ssq[b] = r->tq; r->ssk[b] = r->tk;
        r->tq += c->sq; r->tk += c->lk[b];
        if (c->lk[b] > r->maxk) r->maxk = c->lk[b];
    }
    r->ssq[c->batch] = r->tq; r->ssk[c->batch] = r->tk;

    /* Q/O: [b, sq, hq, dq] or [b, hq, sq, dq], batch entries padded; LSE
     * [b, hq, sq + lse_pad] with 5 more floats per batch entry when padded */
    r->dq = c->d + c->pad;
    if (!c->qhm) { r->hs_q = r->dq; r->s_q = (int64_t)c->hq * r->dq; }
    else { r->s_q = r->dq; r->hs_q = (int64_t)c->sq * r->dq; }
    r->bs_q = (int64_t)c->sq * c->hq * r->dq + c->bpad;
    r->n_q = (size_t)c->batch * (size_t)r->bs_q;
    r->hs_l = c->sq + c->lse_pad;
    r->bs_l = (int64_t)c->hq * r->hs_l + (c->lse_pad ? 5 : 0);
    r->n_lse = (size_t)c->batch * (size_t)r->bs_l;

    /* the cache */
    if (c->paged) {
        pool_spec(c, &r->spec);
        pp_layout(&r->spec, &r->pool);
        pp_build(&r->spec, &r->pool, rng);
    } else {
        build_contiguous(c, r, rng);
    }

    /* Q (NaN in its padding), dequantised compact copy */
    r->qh = (unsigned char *)tu_hmalloc(r->n_q * r->esq + 2);
    r->qf = (float *)tu_hmalloc(((size_t)r->tq * c->hq * c->d + 1) * 4);
    img_poison(r->qh, r->esq, r->n_q);
    for (b = 0; b < c->batch; b++)
        for (row = 0; row < c->sq; row++)
            for (h = 0; h < c->hq; h++)
                for (x = 0; x < c->d; x++) {
                    const int64_t o = off_qo(r, b, h, row) + x;
                    img_put(r->qh, r->esq, o, rand_elem(rng, qdt, c->amp, c->r8q));
                    r->qf[((size_t)(r->ssq[b] + row) * c->hq + h) * c->d + x] = elem_f32(img_get(r->qh, r->esq, o), qdt) * qds;
                }

    /* ALiBi slopes: the geometric ones, varied per batch entry; padding NaN */
    r->n_slopes = (size_t)c->batch * (size_t)(c->hq + 3);
    r->slopes = (float *)tu_hmalloc(r->n_slopes * 4);
    for (b = 0; b < c->batch; b++)
        for (h = 0; h < c->hq + 3; h++)
            r->slopes[b * (c->hq + 3) + h] = h < c->hq ? (float)(pow(2.0, -8.0 * (h + 1) / c->hq) * (1.0 + 0.25 * b)) : NAN;

    /* sinks from below to above the scores' range */
    if (c->sinks) {
        r->sinks = (float *)tu_hmalloc((size_t)c->hq * 4);
        for (h = 0; h < c->hq; h++) r->sinks[h] = fmha_ref_rng_uniform(rng, -2.0f, 3.0f);
        r->d_sinks = (float *)tu_dmalloc((size_t)c->hq * 4);
        tu_upload(r->d_sinks, r->sinks, (size_t)c->hq * 4);
    }

    /* the reference */
    r->ref_o = (float *)tu_hmalloc(((size_t)r->tq * c->hq * c->d + 1) * 4);
    r->ref_lse = (float *)tu_hmalloc(((size_t)r->tq * c->hq + 1) * 4);
    make_ref(c, r, &p);
    if (fmha_ref_fwd_run(&p) != 0) { tu_fail(c->name, "reference: out of memory"); tu_finish(); }

    /* device */
    r->dqp = tu_dmalloc(r->n_q * r->esq);
    tu_upload(r->dqp, r->qh, r->n_q * r->esq);
    r->dout_all = tu_dmalloc((r->n_q + 2 * GUARD) * 2);
    r->dout = (uint16_t *)r->dout_all + GUARD;
    r->dlse_all = (float *)tu_dmalloc((r->n_lse + 2 * GUARD) * 4);
    r->dlse = r->dlse_all + GUARD;
    r->dslopes = (float *)tu_dmalloc(r->n_slopes * 4);
    tu_upload(r->dslopes, r->slopes, r->n_slopes * 4);
    r->d_seqk = (int32_t *)tu_dmalloc(sizeof(int32_t) * MAXB);
    tu_upload(r->d_seqk, c->lk, sizeof(int32_t) * (size_t)c->batch);
    if (c->paged) {
        unsigned char *img;
        r->dk = tu_dmalloc(r->pool.n_kpool * r->es);
        r->dv = tu_dmalloc(r->pool.n_vpool * r->es);
        img = pp_pool_image(&r->pool, 0);
        tu_upload(r->dk, img, r->pool.n_kpool * r->es);
        free(img);
        img = pp_pool_image(&r->pool, 1);
        tu_upload(r->dv, img, r->pool.n_vpool * r->es);
        free(img);
        r->d_indptr = (int32_t *)tu_dmalloc(sizeof(int32_t) * (size_t)(c->batch + 1));
        r->d_indices = (int32_t *)tu_dmalloc(sizeof(int32_t) * r->pool.n_indices);
        r->d_last = (int32_t *)tu_dmalloc(sizeof(int32_t) * (size_t)(c->batch + 1));
        r->d_bt = (int32_t *)tu_dmalloc(sizeof(int32_t) * r->pool.n_bt);
        tu_upload(r->d_indptr, r->pool.h_indptr, sizeof(int32_t) * (size_t)(c->batch + 1));
        tu_upload(r->d_indices, r->pool.h_indices, sizeof(int32_t) * r->pool.n_indices);
        tu_upload(r->d_last, r->pool.h_last, sizeof(int32_t) * (size_t)c->batch);
        tu_upload(r->d_bt, r->pool.h_bt, sizeof(int32_t) * r->pool.n_bt);
        if (kv8 && c->kvs == FMHA_KV_SCALE_PER_PAGE) {
            r->d_kds = (float *)tu_dmalloc(r->pool.n_ds * 4); r->d_vds = (float *)tu_dmalloc(r->pool.n_ds * 4);
            tu_upload(r->d_kds, r->pool.h_kds, r->pool.n_ds * 4); tu_upload(r->d_vds, r->pool.h_vds, r->pool.n_ds * 4);
        }
    } else {
        r->dk = tu_dmalloc(r->n_kc * r->es);
        r->dv = tu_dmalloc(r->n_vc * r->es);
        tu_upload(r->dk, r->kc, r->n_kc * r->es);
        tu_upload(r->dv, r->vc, r->n_vc * r->es);
        r->d_cbi = (int32_t *)tu_dmalloc(sizeof(int32_t) * MAXB);
        tu_upload(r->d_cbi, r->cbi, sizeof(int32_t) * (size_t)c->batch);
    }
    if (kv8 && c->kvs == FMHA_KV_SCALE_PER_TENSOR) {
        r->d_kds = (float *)tu_dmalloc(4); r->d_vds = (float *)tu_dmalloc(4);
        tu_upload(r->d_kds, &c->kds, 4); tu_upload(r->d_vds, &c->vds, 4);
    }
    if (c->q8 && c->qds > 0) {
        r->d_qds = (float *)tu_dmalloc(4);
        tu_upload(r->d_qds, &c->qds, 4);
    }

    /* the args */
    memset(a, 0, sizeof(*a));
    a->q_dtype = qdt; a->kv_dtype = c->dtype;
    a->batch = c->batch; a->nhead_q = c->hq; a->nhead_k = c->hk;
    a->seqlen_q = c->sq;
    a->max_seqlen_k = r->maxk + c->maxk_slack;
    a->hdim_q = a->hdim_v = c->d;
    a->q = r->dqp; a->o = r->dout; a->lse = c->lse ? r->dlse : NULL;
    a->stride_q = a->stride_o = r->s_q; a->nhead_stride_q = a->nhead_stride_o = r->hs_q;
    a->batch_stride_q = a->batch_stride_o = r->bs_q;
    a->nhead_stride_lse = r->hs_l; a->batch_stride_lse = r->bs_l;
    a->is_paged = c->paged;
    a->k_cache = r->dk; a->v_cache = r->dv;
    if (c->paged) {
        a->stride_k = r->pool.ts_k; a->nhead_stride_k = r->pool.hs_k;
        a->stride_v = r->pool.ts_v; a->nhead_stride_v = r->pool.hs_v;
        a->num_total_pages = r->pool.n_total; a->page_size = c->page;
        a->kv_layout = c->vec ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
        a->page_stride_k = r->pool.ps_k; a->page_stride_v = r->pool.ps_v;
        a->page_table = (fmha_page_table)c->table;
        if (c->table == SG) {
            a->kv_indptr = r->d_indptr; a->kv_page_indices = r->d_indices; a->kv_last_page_lens = r->d_last;
        } else {
            a->block_table = r->d_bt; a->block_table_stride = r->pool.bt_stride; a->seqlen_k = r->d_seqk;
        }
    } else {
        a->stride_k = r->s_k; a->nhead_stride_k = r->hs_k; a->batch_stride_k = r->bs_k;
        a->stride_v = r->s_v; a->nhead_stride_v = r->hs_v; a->batch_stride_v = r->bs_v;
        a->seqlen_k = r->d_seqk;
        a->cache_batch_idx = c->cbi ? r->d_cbi : NULL;
    }
    a->kv_scale = kv8 ? c->kvs : FMHA_KV_SCALE_NONE;
    if (a->kv_scale == FMHA_KV_SCALE_PER_TENSOR) {
        a->k_descale = r->d_kds; a->v_descale = r->d_vds;
    } else if (a->kv_scale == FMHA_KV_SCALE_PER_PAGE) {
        a->k_page_descale = r->d_kds; a->v_page_descale = r->d_vds;
        a->descale_page_stride = r->pool.ds_page; a->descale_nhead_stride = r->pool.ds_head;
    }
    if (c->q8 && c->qds > 0) a->q_descale = r->d_qds;
    a->scale = p.scale;
    a->logits_soft_cap = c->cap;
    a->alibi_slopes = c->alibi ? r->dslopes : NULL;
    a->alibi_batch_stride = p.alibi_batch_stride;
    a->mask_type = c->mask;
    a->window_left = c->wl; a->window_right = c->wr;
    a->num_splits = c->splits;
    a->sinks = c->sinks ? r->d_sinks : NULL;
    (void)i;
}

/* Gives the instance a workspace of `bytes` (0: none) inside poisoned guards. */
static void inst_workspace(dc_inst *r, size_t bytes)
{
    tu_dfree(r->dws_all);
    r->dws_all = NULL;
    r->ws_bytes = bytes;
    r->a.workspace = NULL;
    r->a.workspace_size = 0;
    if (!bytes) return;
    r->dws_all = (unsigned char *)tu_dmalloc(bytes + 2 * WS_GUARD);
    r->a.workspace = r->dws_all + WS_GUARD;
    r->a.workspace_size = bytes;
}

/* Poisons O, LSE and the workspace (with its guards) before a run. */
static void inst_poison(dc_inst *r)
{
    tu_poison16(r->dout_all, r->n_q + 2 * GUARD, TU_POISON_OUT16);
    tu_poison32(r->dlse_all, r->n_lse + 2 * GUARD, TU_POISON_LSE);
    if (r->dws_all) TU_CUDA(cudaMemset(r->dws_all, WS_POISON, r->ws_bytes + 2 * WS_GUARD));
    TU_CUDA(cudaDeviceSynchronize());
}

/* ============================================================================
 * Plans: what a problem must get
 * ========================================================================== */

/* Can kernel k serve the problem of c (family, dtype, head dim, mask, soft
 * cap, cache kind, page size, layout)? */
static int kernel_serves(const fmha_kernel_info *k, const dc_cfg *c)
{
    const fmha_kv_layout lay = c->paged && c->vec ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
    if (!k || k->family != FMHA_FAMILY_DECODE || k->dtype != c->dtype || k->hdim < c->d) return 0;
    if (cfg_masked(c) && !k->has_mask) return 0;
    if (c->cap > 0 && !k->has_softcap) return 0;
    if (k->kv_layout != lay) return 0;
    if (!c->paged) return k->page_size == 0;
    return k->page_size >= 1 && k->page_size <= c->page;
}

/* The kernel selection must pick, by the registry's documented order: least
 * head-dim padding, then the lean kernel (no soft cap compiled in for a
 * problem without one, no mask for an unmasked one) where the set has it,
 * then the largest page size (ties on arch ignored: every decode row is
 * portable so far). Fills *want with the expected features; 0 if none serves. */
static int expected_kernel(const fmha_kernel_set *set, const dc_cfg *c, fmha_kernel_info *want)
{
    int i, n = fmha_set_size(set), found = 0;
    for (i = 0; i < n; i++) {
        const fmha_kernel_info *k = fmha_set_kernel(set, i);
        int better;
        if (!kernel_serves(k, c)) continue;
        if (!found) better = 1;
        else if (k->hdim != want->hdim) better = k->hdim < want->hdim;
        else if ((c->cap <= 0 && k->has_softcap) != (c->cap <= 0 && want->has_softcap))
            better = !(c->cap <= 0 && k->has_softcap);
        else if ((!cfg_masked(c) && k->has_mask) != (!cfg_masked(c) && want->has_mask))
            better = !(!cfg_masked(c) && k->has_mask);
        else better = k->page_size > want->page_size;
        if (better) { *want = *k; found = 1; }
    }
    return found;
}

/* Checks a plan of problem c (made with num_splits = req): kernel, splits,
 * combine, workspace, launch. 0 if fine, else fills why. */
static int check_plan(const fmha_kernel_set *set, const dc_cfg *c, const dc_inst *r, const fmha_decode_plan *pl,
                      int req, char *why, size_t cap)
{
    fmha_kernel_info want;
    const fmha_kernel_info *k = pl->kernel;
    const int64_t rows = (int64_t)c->batch * c->hq * c->sq;
    int n_tiles;
    memset(&want, 0, sizeof(want));
    if (!k) { snprintf(why, cap, "plan without a kernel"); return -1; }
    if (!expected_kernel(set, c, &want)) { snprintf(why, cap, "the set has no kernel for this problem, yet the plan picked %s", k->name); return -1; }
    if (!kernel_serves(k, c) || k->hdim != want.hdim || k->has_softcap != want.has_softcap ||
        k->has_mask != want.has_mask || k->page_size != want.page_size || !k->name || !strstr(k->name, "decode")) {
        snprintf(why, cap, "selected %s (family %d dtype %d hdim %d mask %d softcap %d page %d layout %d), want "
                 "%s dtype %s hdim %d mask %d softcap %d page %d", k->name, (int)k->family, (int)k->dtype, k->hdim,
                 k->has_mask, k->has_softcap, k->page_size, (int)k->kv_layout, want.name, dtype_str(c->dtype),
                 want.hdim, want.has_mask, want.has_softcap, want.page_size);
        return -1;
    }
    n_tiles = k->tile_n > 0 ? (r->maxk + c->maxk_slack + k->tile_n - 1) / k->tile_n : 1;
    if (req > 0 && pl->num_splits != req) {
        snprintf(why, cap, "plan has %d splits, %d requested", pl->num_splits, req);
        return -1;
    }
    if (req == 0 && (pl->num_splits < 1 || pl->num_splits > FMHA_SPLITKV_MAX_SPLITS ||
                     pl->num_splits > (n_tiles > 1 ? n_tiles : 1))) {
        snprintf(why, cap, "heuristic gave %d splits for %d key tiles", pl->num_splits, n_tiles);
        return -1;
    }
    if ((pl->combine == NULL) != (pl->num_splits == 1) ||
        (pl->combine && pl->combine->family != FMHA_FAMILY_SPLITKV_COMBINE)) {
        snprintf(why, cap, "%d splits with combine %s (family %d)", pl->num_splits,
                 pl->combine ? pl->combine->name : "NULL", pl->combine ? (int)pl->combine->family : -1);
        return -1;
    }
    /* fp32 partials: at least O and LSE of every row for every split */
    if ((pl->workspace_size > 0) != (pl->num_splits > 1) ||
        (pl->num_splits > 1 && pl->workspace_size < (size_t)pl->num_splits * (size_t)rows * (size_t)(c->d + 1) * 4)) {
        snprintf(why, cap, "workspace_size %zu for %d splits of %lld rows of %d", pl->workspace_size, pl->num_splits,
                 (long long)rows, c->d);
        return -1;
    }
    if (pl->block != k->warps * 32 || pl->grid_x < 1 || pl->grid_y < 1 || pl->grid_z < 1 ||
        (int64_t)pl->grid_x * pl->grid_y * pl->grid_z < (int64_t)c->batch * pl->num_splits || !pl->why || !pl->why[0]) {
        snprintf(why, cap, "launch grid %d,%d,%d block %d (kernel warps %d, %d splits, batch %d), why %s", pl->grid_x,
                 pl->grid_y, pl->grid_z, pl->block, k->warps, pl->num_splits, c->batch, pl->why ? pl->why : "NULL");
        return -1;
    }
    return 0;
}

static const char *plan_str(const fmha_decode_plan *pl)
{
    static char buf[512];
    if (!pl || !pl->kernel) return " [no plan]";
    snprintf(buf, sizeof(buf), " [kernel=%s splits=%d ws=%zu grid=%d,%d,%d block=%d]", pl->kernel->name,
             pl->num_splits, pl->workspace_size, pl->grid_x, pl->grid_y, pl->grid_z, pl->block);
    return buf;
}

typedef struct dc_launch {
    const fmha_decode_plan *plan;
    const fmha_decode_args *a;
} dc_launch;

/* Enqueues fmha_decode_run for tu_launch_graph: 0 on success, else fills why. */
static int enqueue_decode(const void *ctx, cudaStream_t st, char *why, size_t cap)
{
    const dc_launch *l = (const dc_launch *)ctx;
    fmha_status s = fmha_decode_run(l->plan, l->a, (void *)st);
    if (s == FMHA_OK) return 0;
    snprintf(why, cap, "fmha_decode_run under capture: %s: %s", fmha_status_str(s), fmha_last_error());
    return -1;
}

/* One launch of instance r: graph, one call, or plan + run. 0, or fills why. */
static int launch(const dc_cfg *c, const fmha_kernel_set *set, const fmha_decode_plan *pl, dc_inst *r,
                  cudaStream_t stream, char *why, size_t cap)
{
    fmha_status st;
    if (c->graph) {
        dc_launch l;
        l.plan = pl;
        l.a = &r->a;
        return tu_launch_graph(enqueue_decode, &l, stream, why, cap);
    }
    st = c->one_call ? fmha_decode(set, &r->a, (void *)stream) : fmha_decode_run(pl, &r->a, (void *)stream);
    if (st != FMHA_OK) {
        snprintf(why, cap, "%s: %s: %s", c->one_call ? "fmha_decode" : "fmha_decode_run", fmha_status_str(st),
                 fmha_last_error());
        return -1;
    }
    TU_CUDA(cudaGetLastError());
    TU_CUDA(cudaStreamSynchronize(stream));
    return 0;
}

/* Compares one run's outputs (downloaded) with the reference, padding, guards
 * and the workspace guards; inputs unchanged. 0 if fine, else fills why. */
static int check_outputs(const dc_cfg *c, const dc_inst *r, const uint16_t *oh_all, const uint32_t *lseh_all,
                         char *why, size_t cap)
{
    const int kv8 = cfg_kv8(c), is_bf16 = c->dtype != FMHA_DTYPE_FP16;
    const uint16_t *oh = oh_all + GUARD;
    const uint32_t *lseh = lseh_all + GUARD;
    unsigned char *ol_all = (unsigned char *)calloc(r->n_q + 2 * GUARD, 1);
    unsigned char *ll_all = (unsigned char *)calloc(r->n_lse + 2 * GUARD, 1);
    unsigned char *ol, *ll;
    size_t i, n_unwritten = 0, n_nan = 0, n_masked_bad = 0, n_pad = 0, n_lse_bad = 0, n_lse_pad = 0;
    fmha_ref_err err;
    double rel;
    float amp;
    int b, h, row, x, bad = 0;
    if (!ol_all || !ll_all) { tu_fail(c->name, "out of host memory"); tu_finish(); }
    ol = ol_all + GUARD;
    ll = ll_all + GUARD;
    why[0] = 0;
    fmha_ref_err_init(&err);
    for (b = 0; b < c->batch; b++)
        for (h = 0; h < c->hq; h++)
            for (row = 0; row < c->sq; row++) {
                const int64_t oo = off_qo(r, b, h, row), lo = off_lse(r, b, h, row);
                const size_t ro = ((size_t)(r->ssq[b] + row) * c->hq + h) * c->d;
                const float rl = r->ref_lse[(size_t)h * (r->tq > 0 ? r->tq : 1) + r->ssq[b] + row];
                const int masked = isinf(rl) && rl < 0;
                for (x = 0; x < c->d; x++) {
                    const uint16_t u = oh[oo + x];
                    const float g = fmha_ref_bits16_to_f32(u, is_bf16);
                    ol[oo + x] = 1;
                    if (u == TU_POISON_OUT16) {
                        if (!n_unwritten++ && !why[0])
                            snprintf(why, cap, "O not written at b%d h%d row %d col %d", b, h, row, x);
                    } else if (!isfinite(g)) {
                        if (!n_nan++ && !why[0])
                            snprintf(why, cap, "O = %g (0x%04x) at b%d h%d row %d col %d", g, u, b, h, row, x);
                    } else if (masked && (u & 0x7fffu) != 0) {
                        if (!n_masked_bad++ && !why[0])
                            snprintf(why, cap, "row b%d h%d row %d sees no key: O[%d] = %g, want 0", b, h, row, x, g);
                    } else {
                        fmha_ref_err_add(&err, g, r->ref_o[ro + x]);
                    }
                }
                if (c->lse) {
                    const uint32_t u = lseh[lo];
                    const float g = fmha_ref_bits_f32(u);
                    ll[lo] = 1;
                    if (u == TU_POISON_LSE) {
                        if (!n_lse_bad++ && !why[0]) snprintf(why, cap, "LSE not written at b%d h%d row %d", b, h, row);
                    } else if (masked) {
                        if (!(isinf(g) && g < 0) && !n_lse_bad++ && !why[0])
                            snprintf(why, cap, "row b%d h%d row %d sees no key: LSE = %g, want -inf", b, h, row, g);
                    } else if (!isfinite(g) || fabs((double)g - rl) > tol_lse(c)) {
                        if (!n_lse_bad++ && !why[0])
                            snprintf(why, cap, "LSE at b%d h%d row %d = %.7g, want %.7g", b, h, row, g, rl);
                    }
                }
            }
    for (i = 0; i < r->n_q + 2 * GUARD; i++)
        if (!ol_all[i] && oh_all[i] != TU_POISON_OUT16 && !n_pad++ && !why[0])
            snprintf(why, cap, "O element %lld (outside the logical rows) overwritten (0x%04x)", (long long)i - GUARD,
                     oh_all[i]);
    for (i = 0; i < r->n_lse + 2 * GUARD; i++)
        if (!ll_all[i] && lseh_all[i] != TU_POISON_LSE && !n_lse_pad++ && !why[0])
            snprintf(why, cap, "LSE element %lld (outside the logical rows) overwritten (%g)", (long long)i - GUARD,
                     fmha_ref_bits_f32(lseh_all[i]));
    amp = kv8 ? (c->paged ? r->pool.vamp : r->cvamp) : c->amp;
    rel = fmha_ref_err_rel_l2(&err);
    if (!why[0] && !(rel <= tu_tol_rel_l2(is_bf16)))
        snprintf(why, cap, "rel-L2 %.3g > %.0e (max abs %.3g)", rel, tu_tol_rel_l2(is_bf16), err.max_abs);
    if (!why[0] && !(err.max_abs <= tu_tol_max_abs(is_bf16, amp)))
        snprintf(why, cap, "max abs error %.3g > %.3g (rel-L2 %.3g)", err.max_abs, tu_tol_max_abs(is_bf16, amp), rel);
    if (why[0]) {
        const size_t n = strlen(why);
        snprintf(why + n, cap - n, "; counts: unwritten %zu nan %zu masked %zu pad %zu lse %zu lsepad %zu", n_unwritten,
                 n_nan, n_masked_bad, n_pad, n_lse_bad, n_lse_pad);
        bad = -1;
    }
    free(ol_all);
    free(ll_all);
    return bad;
}

/* Inputs are read-only: Q, the cache, tables, key counts, descales, slopes. */
static int check_inputs(const dc_cfg *c, const dc_inst *r, char *why, size_t cap)
{
    const char *what = NULL;
    if (!same_bytes_on_device(r->dqp, r->qh, r->n_q * r->esq)) what = "Q";
    else if (!same_bytes_on_device(r->d_seqk, c->lk, sizeof(int32_t) * (size_t)c->batch)) what = "seqlen_k";
    else if (!same_bytes_on_device(r->dslopes, r->slopes, r->n_slopes * 4)) what = "alibi_slopes";
    else if (c->paged) {
        const size_t kb = (size_t)r->pool.ps_k * r->es, vb = (size_t)r->pool.ps_v * r->es;
        size_t i;
        for (i = 0; i < (size_t)r->pool.n_logical && !what; i++)
            if (!same_bytes_on_device((unsigned char *)r->dk + (size_t)r->pool.phys[i] * kb, r->pool.kimg + i * kb, kb) ||
                !same_bytes_on_device((unsigned char *)r->dv + (size_t)r->pool.phys[i] * vb, r->pool.vimg + i * vb, vb))
                what = "a K or V page";
        if (!what && (!same_bytes_on_device(r->d_indptr, r->pool.h_indptr, sizeof(int32_t) * (size_t)(c->batch + 1)) ||
                      !same_bytes_on_device(r->d_indices, r->pool.h_indices, sizeof(int32_t) * r->pool.n_indices) ||
                      !same_bytes_on_device(r->d_last, r->pool.h_last, sizeof(int32_t) * (size_t)c->batch) ||
                      !same_bytes_on_device(r->d_bt, r->pool.h_bt, sizeof(int32_t) * r->pool.n_bt)))
            what = "a page table";
        if (!what && r->pool.n_ds && (!same_bytes_on_device(r->d_kds, r->pool.h_kds, r->pool.n_ds * 4) ||
                                      !same_bytes_on_device(r->d_vds, r->pool.h_vds, r->pool.n_ds * 4)))
            what = "the per-page descales";
    } else {
        if (!same_bytes_on_device(r->dk, r->kc, r->n_kc * r->es)) what = "the K cache";
        else if (!same_bytes_on_device(r->dv, r->vc, r->n_vc * r->es)) what = "the V cache";
        else if (!same_bytes_on_device(r->d_cbi, r->cbi, sizeof(int32_t) * (size_t)c->batch)) what = "cache_batch_idx";
    }
    if (what) snprintf(why, cap, "%s changed", what);
    return what ? -1 : 0;
}

/* The workspace guards (and, when the run must not use it, the whole
 * workspace) still hold their poison. */
static int check_workspace(const dc_inst *r, int untouched, char *why, size_t cap)
{
    unsigned char *h;
    size_t i, n;
    if (!r->dws_all) return 0;
    n = r->ws_bytes + 2 * WS_GUARD;
    h = (unsigned char *)tu_hmalloc(n);
    tu_download(h, r->dws_all, n);
    for (i = 0; i < n; i++)
        if (h[i] != WS_POISON && (untouched || i < WS_GUARD || i >= WS_GUARD + r->ws_bytes)) {
            snprintf(why, cap, "workspace byte %lld (of %zu) written%s", (long long)i - WS_GUARD, r->ws_bytes,
                     untouched ? " by a run that must not use it" : ", outside the workspace");
            free(h);
            return -1;
        }
    free(h);
    return 0;
}

/* ============================================================================
 * One problem
 * ========================================================================== */
static void run_config(const dc_cfg *c, cudaStream_t stream, uint64_t seed)
{
    const fmha_kernel_set *set = c->set ? c->set : &decode_set;
    const int nl = c->layers > 1 ? 2 : 1;
    dc_inst inst[2];
    fmha_decode_plan plan;
    fmha_status st;
    char why[1536] = "";
    uint16_t *oh = NULL, *oh2 = NULL;
    uint32_t *lh = NULL, *lh2 = NULL;
    size_t ws = 0;
    int l, ws_untouched = 0;

    tu_current = c->name;
    memset(inst, 0, sizeof(inst));
    for (l = 0; l < nl; l++) {
        fmha_ref_rng rng = fmha_ref_rng_make(seed + 1000003u * (uint64_t)l);
        inst_make(c, &inst[l], &rng);
    }

    /* the plan (for fmha_decode: the one it makes, to size the workspace) */
    memset(&plan, 0, sizeof(plan));
    st = fmha_decode_plan_make(set, &inst[0].a, &plan);
    if (st != FMHA_OK) {
        tu_fail(c->name, "fmha_decode_plan_make: %s: %s", fmha_status_str(st), fmha_last_error());
        goto done;
    }
    if (check_plan(set, c, &inst[0], &plan, c->splits, why, sizeof(why)) != 0) {
        tu_fail(c->name, "%s%s", why, plan_str(&plan));
        goto done;
    }
    ws = plan.workspace_size;
    if (c->one_call && !c->splits && c->ws == 1) { ws = 0; ws_untouched = 1; }
    if (c->one_call && !c->splits && c->ws == 2) { ws = 16; ws_untouched = plan.num_splits > 1; }
    for (l = 0; l < nl; l++) inst_workspace(&inst[l], ws);

    oh = (uint16_t *)tu_hmalloc((inst[0].n_q + 2 * GUARD) * 2);
    lh = (uint32_t *)tu_hmalloc((inst[0].n_lse + 2 * GUARD) * 4);
    for (l = 0; l < nl; l++) {
        dc_inst *r = &inst[l];
        inst_poison(r);
        if (launch(c, set, &plan, r, stream, why, sizeof(why)) != 0) {
            tu_fail(c->name, "%s%s%s", l ? "second layer: " : "", why, plan_str(&plan));
            goto done;
        }
        tu_download(oh, r->dout_all, (r->n_q + 2 * GUARD) * 2);
        tu_download(lh, r->dlse_all, (r->n_lse + 2 * GUARD) * 4);
        if (check_outputs(c, r, oh, lh, why, sizeof(why)) != 0 || check_workspace(r, ws_untouched, why, sizeof(why)) != 0 ||
            check_inputs(c, r, why, sizeof(why)) != 0) {
            tu_fail(c->name, "%s%s%s", l ? "second layer (same plan, new inputs): " : "", why, plan_str(&plan));
            goto done;
        }
    }

    /* split-KV is deterministic: the same problem again, bitwise the same */
    if (plan.num_splits > 1 && !ws_untouched) {
        dc_inst *r = &inst[nl - 1];
        oh2 = (uint16_t *)tu_hmalloc((r->n_q + 2 * GUARD) * 2);
        lh2 = (uint32_t *)tu_hmalloc((r->n_lse + 2 * GUARD) * 4);
        inst_poison(r);
        if (launch(c, set, &plan, r, stream, why, sizeof(why)) != 0) {
            tu_fail(c->name, "second run: %s%s", why, plan_str(&plan));
            goto done;
        }
        tu_download(oh2, r->dout_all, (r->n_q + 2 * GUARD) * 2);
        tu_download(lh2, r->dlse_all, (r->n_lse + 2 * GUARD) * 4);
        if (memcmp(oh, oh2, (r->n_q + 2 * GUARD) * 2) != 0 || memcmp(lh, lh2, (r->n_lse + 2 * GUARD) * 4) != 0) {
            size_t i = 0;
            while (i < r->n_q + 2 * GUARD && oh[i] == oh2[i]) i++;
            tu_fail(c->name, "not deterministic: a second run with %d splits differs (first O difference at element "
                    "%lld)%s", plan.num_splits, i < r->n_q + 2 * GUARD ? (long long)i - GUARD : -1LL, plan_str(&plan));
            goto done;
        }
    }
    tu_pass(c->name);
done:
    free(oh); free(lh); free(oh2); free(lh2);
    for (l = 0; l < nl; l++) inst_free(&inst[l]);
    tu_current = "";
}

/* ============================================================================
 * API contract: registry, plans, bad input
 * ========================================================================== */

/* A valid small problem: batch 2, 4 query heads on 2 KV heads, d 64, seqlen_q
 * 2, 40 + 16 keys; a contiguous cache of 64 tokens per entry (ct), the same
 * keys in pages of 16 with the SGLang table (sg) and the vLLM one (vl), and
 * fp8 pages with bf16 queries and per-tensor descales (f8). Buffers are sized
 * for d 256. A 1 MiB workspace. */
typedef struct dbad_env {
    fmha_decode_args ct, sg, vl, f8;
    void *dq, *dout, *dk, *dv, *dk8, *dv8, *dq8;
    float *dlse, *dds;
    unsigned char *dws;
    int32_t *dseqk, *dindptr, *dindices, *dlast, *dbt, *dcbi;
    size_t n_o, n_lse;
} dbad_env;

#define DBAD_WS ((size_t)1 << 20)

static void dbad_make(dbad_env *e)
{
    const int d = 256, B = 2, SQ = 2, HQ = 4, HK = 2, CAP = 64, pages = 8, P = 16;
    const int32_t seqk[2] = { 40, 16 }, cbi[2] = { 1, 0 };
    const int32_t indptr[3] = { 0, 3, 4 }, indices[4] = { 5, 2, 7, 0 }, last[2] = { 8, 16 };
    const int32_t bt[8] = { 5, 2, 7, -1, 0, -1, INT32_MAX, -1 };
    const size_t nq = (size_t)B * SQ * HQ * d, ncache = (size_t)B * CAP * HK * d, npool = (size_t)pages * P * HK * d;
    const size_t nkv = ncache > npool ? ncache : npool;
    size_t i;
    uint16_t *host;
    unsigned char *h8;
    float ds[4] = { 0.37f, 1.9f, 0.6f, 1.0f };
    fmha_ref_rng rng = fmha_ref_rng_make(91);
    memset(e, 0, sizeof(*e));
    e->n_o = nq;
    e->n_lse = (size_t)B * HQ * SQ;
    e->dq = tu_dmalloc(nq * 2); e->dout = tu_dmalloc(nq * 2);
    e->dk = tu_dmalloc(nkv * 2); e->dv = tu_dmalloc(nkv * 2);
    e->dq8 = tu_dmalloc(nq); e->dk8 = tu_dmalloc(nkv); e->dv8 = tu_dmalloc(nkv);
    e->dlse = (float *)tu_dmalloc(e->n_lse * 4);
    e->dds = (float *)tu_dmalloc(sizeof(ds));
    e->dws = (unsigned char *)tu_dmalloc(DBAD_WS + 64);
    e->dseqk = (int32_t *)tu_dmalloc(sizeof(seqk)); e->dcbi = (int32_t *)tu_dmalloc(sizeof(cbi));
    e->dindptr = (int32_t *)tu_dmalloc(sizeof(indptr)); e->dindices = (int32_t *)tu_dmalloc(sizeof(indices));
    e->dlast = (int32_t *)tu_dmalloc(sizeof(last)); e->dbt = (int32_t *)tu_dmalloc(sizeof(bt));
    host = (uint16_t *)tu_hmalloc((nq > nkv ? nq : nkv) * 2);
    h8 = (unsigned char *)tu_hmalloc(nq > nkv ? nq : nkv);
    for (i = 0; i < (nq > nkv ? nq : nkv); i++) {
        host[i] = fmha_ref_f32_to_f16(fmha_ref_rng_input(&rng, 1.0f));
        h8[i] = fmha_ref_rng_e4m3(&rng, 5, 9);
    }
    tu_upload(e->dq, host, nq * 2); tu_upload(e->dk, host, nkv * 2); tu_upload(e->dv, host, nkv * 2);
    tu_upload(e->dq8, h8, nq); tu_upload(e->dk8, h8, nkv); tu_upload(e->dv8, h8, nkv);
    free(host);
    free(h8);
    tu_upload(e->dds, ds, sizeof(ds));
    tu_upload(e->dseqk, seqk, sizeof(seqk)); tu_upload(e->dcbi, cbi, sizeof(cbi));
    tu_upload(e->dindptr, indptr, sizeof(indptr)); tu_upload(e->dindices, indices, sizeof(indices));
    tu_upload(e->dlast, last, sizeof(last)); tu_upload(e->dbt, bt, sizeof(bt));
    TU_CUDA(cudaDeviceSynchronize());
    {
        fmha_decode_args *a = &e->ct;
        memset(a, 0, sizeof(*a));
        a->q_dtype = a->kv_dtype = FMHA_DTYPE_FP16;
        a->batch = B; a->nhead_q = HQ; a->nhead_k = HK; a->seqlen_q = SQ; a->max_seqlen_k = 40;
        a->hdim_q = a->hdim_v = 64;
        a->q = e->dq; a->o = e->dout; a->lse = e->dlse;
        a->stride_q = a->stride_o = (int64_t)HQ * 64; a->nhead_stride_q = a->nhead_stride_o = 64;
        a->batch_stride_q = a->batch_stride_o = (int64_t)SQ * HQ * 64;
        a->nhead_stride_lse = SQ; a->batch_stride_lse = (int64_t)HQ * SQ;
        a->k_cache = e->dk; a->v_cache = e->dv;
        a->stride_k = a->stride_v = (int64_t)HK * 64; a->nhead_stride_k = a->nhead_stride_v = 64;
        a->batch_stride_k = a->batch_stride_v = (int64_t)CAP * HK * 64;
        a->seqlen_k = e->dseqk; a->cache_batch_idx = e->dcbi;
        a->kv_scale = FMHA_KV_SCALE_NONE;
        a->scale = 0.125f;
        a->mask_type = FMHA_MASK_BOTTOM_RIGHT; a->window_left = -1; a->window_right = 0;
        a->num_splits = 1;
    }
    e->sg = e->ct;
    e->sg.is_paged = 1;
    e->sg.batch_stride_k = e->sg.batch_stride_v = 0;
    e->sg.seqlen_k = NULL; e->sg.cache_batch_idx = NULL;
    e->sg.num_total_pages = pages; e->sg.page_size = P; e->sg.kv_layout = FMHA_KV_LAYOUT_LINEAR;
    e->sg.page_stride_k = e->sg.page_stride_v = (int64_t)P * HK * 64;
    e->sg.page_table = FMHA_PAGE_TABLE_SGLANG_1D;
    e->sg.kv_indptr = e->dindptr; e->sg.kv_page_indices = e->dindices; e->sg.kv_last_page_lens = e->dlast;
    e->vl = e->sg;
    e->vl.page_table = FMHA_PAGE_TABLE_VLLM_2D;
    e->vl.kv_indptr = e->vl.kv_page_indices = e->vl.kv_last_page_lens = NULL;
    e->vl.block_table = e->dbt; e->vl.block_table_stride = 4; e->vl.seqlen_k = e->dseqk;
    e->f8 = e->sg;
    e->f8.q_dtype = FMHA_DTYPE_BF16; e->f8.kv_dtype = FMHA_DTYPE_FP8;
    e->f8.k_cache = e->dk8; e->f8.v_cache = e->dv8;
    e->f8.kv_scale = FMHA_KV_SCALE_PER_TENSOR; e->f8.k_descale = e->dds; e->f8.v_descale = e->dds + 1;
}

static void dbad_free(dbad_env *e)
{
    tu_dfree(e->dq); tu_dfree(e->dout); tu_dfree(e->dk); tu_dfree(e->dv); tu_dfree(e->dq8); tu_dfree(e->dk8);
    tu_dfree(e->dv8); tu_dfree(e->dlse); tu_dfree(e->dds); tu_dfree(e->dws); tu_dfree(e->dseqk); tu_dfree(e->dcbi);
    tu_dfree(e->dindptr); tu_dfree(e->dindices); tu_dfree(e->dlast); tu_dfree(e->dbt);
}

static void dbad_poison(dbad_env *e)
{
    tu_poison16(e->dout, e->n_o, TU_POISON_OUT16);
    tu_poison32(e->dlse, e->n_lse, TU_POISON_LSE);
    TU_CUDA(cudaDeviceSynchronize());
}

/* O and LSE still hold their poison. */
static int dbad_untouched(dbad_env *e, size_t *bad_o, size_t *bad_l)
{
    uint16_t *o = (uint16_t *)tu_hmalloc(e->n_o * 2);
    uint32_t *l = (uint32_t *)tu_hmalloc(e->n_lse * 4);
    size_t i;
    tu_download(o, e->dout, e->n_o * 2);
    tu_download(l, e->dlse, e->n_lse * 4);
    *bad_o = tu_count_not16(o, e->n_o, TU_POISON_OUT16);
    *bad_l = 0;
    for (i = 0; i < e->n_lse; i++) *bad_l += l[i] != TU_POISON_LSE;
    free(o);
    free(l);
    return *bad_o == 0 && *bad_l == 0;
}

/* "Any error": the call must fail, with whichever status fits. */
#define WANT_ANY_ERROR ((fmha_status)-1)

static int status_ok(fmha_status got, fmha_status want)
{
    return want == WANT_ANY_ERROR ? got != FMHA_OK : got == want;
}

/* Expects `want` from both ways in: plan_make then run (the first failing
 * status counts: a bad workspace can only be seen by run), and fmha_decode.
 * An error needs a message and untouched O/LSE (nothing launched); want
 * WANT_ANY_ERROR accepts any error status. */
static void expect_status_paths(const char *name, const fmha_kernel_set *set, const fmha_decode_args *a,
                                dbad_env *e, fmha_status want, int two_step, cudaStream_t stream)
{
    fmha_decode_plan plan;
    fmha_status s_two, s_one;
    char msg[512] = "";
    size_t bad_o = 0, bad_l = 0;
    int clean;
    if (!tu_selected(name)) return;
    tu_current = name;
    dbad_poison(e);
    memset(&plan, 0, sizeof(plan));
    s_two = want;
    if (two_step) {
        s_two = fmha_decode_plan_make(set, a, &plan);
        if (s_two == FMHA_OK) s_two = fmha_decode_run(&plan, a, (void *)stream);
        if (s_two != FMHA_OK) snprintf(msg, sizeof(msg), "%s", fmha_last_error() ? fmha_last_error() : "");
    }
    s_one = fmha_decode(set, a, (void *)stream);
    if (s_one != FMHA_OK && !msg[0]) snprintf(msg, sizeof(msg), "%s", fmha_last_error() ? fmha_last_error() : "");
    TU_CUDA(cudaGetLastError());
    TU_CUDA(cudaStreamSynchronize(stream));
    clean = dbad_untouched(e, &bad_o, &bad_l);
    if (!status_ok(s_two, want) || !status_ok(s_one, want))
        tu_fail(name, "plan_make + run -> %s, fmha_decode -> %s, want %s (message: \"%s\")",
                two_step ? fmha_status_str(s_two) : "(not tried)", fmha_status_str(s_one),
                want == WANT_ANY_ERROR ? "an error" : fmha_status_str(want), msg);
    else if (want != FMHA_OK && !msg[0])
        tu_fail(name, "%s without a message in fmha_last_error()", fmha_status_str(s_one));
    else if (want != FMHA_OK && !clean)
        tu_fail(name, "returned %s but wrote %zu O and %zu LSE elements", fmha_status_str(s_one), bad_o, bad_l);
    else
        tu_pass(name);
    tu_current = "";
}

static void expect_status(const char *name, const fmha_kernel_set *set, const fmha_decode_args *a, dbad_env *e,
                          fmha_status want, cudaStream_t stream)
{
    expect_status_paths(name, set, a, e, want, 1, stream);
}

/* A plan made from `base`, run with `a`: expects `want` from fmha_decode_run
 * (and untouched O/LSE for an error). */
static void expect_run(const char *name, const fmha_kernel_set *set, const fmha_decode_args *base,
                       const fmha_decode_args *a, dbad_env *e, fmha_status want, cudaStream_t stream)
{
    fmha_decode_plan plan;
    fmha_status s;
    size_t bad_o = 0, bad_l = 0;
    if (!tu_selected(name)) return;
    tu_current = name;
    memset(&plan, 0, sizeof(plan));
    s = fmha_decode_plan_make(set, base, &plan);
    if (s != FMHA_OK) {
        tu_fail(name, "fmha_decode_plan_make of the base problem: %s: %s", fmha_status_str(s), fmha_last_error());
        tu_current = "";
        return;
    }
    dbad_poison(e);
    s = fmha_decode_run(&plan, a, (void *)stream);
    TU_CUDA(cudaGetLastError());
    TU_CUDA(cudaStreamSynchronize(stream));
    if (!status_ok(s, want))
        tu_fail(name, "fmha_decode_run -> %s, want %s (message: \"%s\")", fmha_status_str(s),
                want == WANT_ANY_ERROR ? "an error" : fmha_status_str(want), s != FMHA_OK ? fmha_last_error() : "");
    else if (s != FMHA_OK && !dbad_untouched(e, &bad_o, &bad_l))
        tu_fail(name, "returned %s but wrote %zu O and %zu LSE elements", fmha_status_str(s), bad_o, bad_l);
    else
        tu_pass(name);
    tu_current = "";
}

static void test_bad_inputs(cudaStream_t stream)
{
    dbad_env e;
    fmha_decode_args a;
    fmha_decode_plan plan;
    dbad_make(&e);

    /* valid baselines */
    expect_status("decode_bad_base_contiguous_is_valid", &decode_set, &e.ct, &e, FMHA_OK, stream);
    expect_status("decode_bad_base_sglang_is_valid", &decode_set, &e.sg, &e, FMHA_OK, stream);
    expect_status("decode_bad_base_vllm_is_valid", &decode_set, &e.vl, &e, FMHA_OK, stream);
    expect_status("decode_bad_base_fp8_per_tensor_is_valid", &decode_set, &e.f8, &e, FMHA_OK, stream);
    a = e.ct; a.num_splits = 4; a.workspace = e.dws; a.workspace_size = DBAD_WS;
    expect_status("decode_bad_base_splits4_with_workspace_is_valid", &decode_set, &a, &e, FMHA_OK, stream);
    /* fmha_decode with the heuristic (a key bound that makes it split) and no
     * or too small a workspace: one split (plan + run would need one) */
    a = e.ct; a.num_splits = 0; a.max_seqlen_k = 30000;
    expect_status_paths("decode_one_call_heuristic_without_workspace_is_valid", &decode_set, &a, &e, FMHA_OK, 0, stream);
    a.workspace = e.dws; a.workspace_size = 16;
    expect_status_paths("decode_one_call_heuristic_small_workspace_is_valid", &decode_set, &a, &e, FMHA_OK, 0, stream);
    a.workspace = e.dws + 8; a.workspace_size = DBAD_WS;
    expect_status_paths("decode_one_call_heuristic_misaligned_workspace_is_valid", &decode_set, &a, &e, FMHA_OK, 0,
                        stream);
    a = e.ct; a.num_splits = 0; a.max_seqlen_k = 30000;
    memset(&plan, 0, sizeof(plan));
    if (fmha_decode_plan_make(&decode_set, &a, &plan) == FMHA_OK && plan.num_splits > 1)
        expect_run("decode_run_heuristic_split_plan_without_workspace", &decode_set, &a, &a, &e, FMHA_ERR_INVALID_ARG,
                   stream);
    else if (tu_selected("decode_run_heuristic_split_plan_without_workspace"))
        tu_fail("decode_run_heuristic_split_plan_without_workspace", "the heuristic did not split 2 x 2 heads over "
                "30000 keys (%d splits): %s", plan.num_splits, fmha_last_error());
    a = e.ct; a.lse = NULL; a.cache_batch_idx = NULL;
    expect_status("decode_bad_base_no_lse_no_cbi_is_valid", &decode_set, &a, &e, FMHA_OK, stream);

    /* split counts and the workspace */
    a = e.ct; a.num_splits = -1;
    expect_status("decode_bad_num_splits_negative", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.num_splits = FMHA_SPLITKV_MAX_SPLITS + 1;
    expect_status("decode_bad_num_splits_129", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.num_splits = 4;
    expect_status("decode_bad_splits4_null_workspace", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.num_splits = 4; a.workspace = e.dws + 8; a.workspace_size = DBAD_WS;
    expect_status("decode_bad_splits4_misaligned_workspace", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.num_splits = 4; a.workspace = e.dws;
    memset(&plan, 0, sizeof(plan));
    if (fmha_decode_plan_make(&decode_set, &a, &plan) == FMHA_OK && plan.workspace_size > 16) {
        a.workspace_size = plan.workspace_size - 16;
        expect_status("decode_bad_splits4_workspace_too_small", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
        a.workspace_size = plan.workspace_size;
        expect_status("decode_splits4_workspace_exact_is_valid", &decode_set, &a, &e, FMHA_OK, stream);
    } else if (tu_selected("decode_bad_splits4_workspace_too_small")) {
        tu_fail("decode_bad_splits4_workspace_too_small", "no plan with a workspace: %s", fmha_last_error());
    }

    /* shapes */
    a = e.ct; a.seqlen_q = 0;
    expect_status("decode_bad_seqlen_q_0", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.seqlen_q = -1;
    expect_status("decode_bad_seqlen_q_negative", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.nhead_q = 3;
    expect_status("decode_bad_nhead_q_not_multiple_of_nhead_k", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.batch = -1;
    expect_status("decode_bad_batch_negative", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.max_seqlen_k = -1;
    expect_status("decode_bad_max_seqlen_k_negative", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.hdim_q = a.hdim_v = 264;
    expect_status("decode_bad_hdim_264", &decode_set, &a, &e, FMHA_ERR_UNSUPPORTED, stream);
    a = e.ct; a.hdim_v = 128;
    expect_status("decode_bad_hdim_v_ne_hdim_q", &decode_set, &a, &e, FMHA_ERR_UNSUPPORTED, stream);
    a = e.ct; a.scale = 0.0f;
    expect_status("decode_bad_scale_zero", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);

    /* dtypes */
    a = e.ct; a.kv_dtype = FMHA_DTYPE_BF16;
    expect_status("decode_bad_q_fp16_kv_bf16", &decode_set, &a, &e, FMHA_ERR_UNSUPPORTED, stream);
    a = e.f8; a.q_dtype = FMHA_DTYPE_FP16;
    expect_status("decode_bad_fp8_kv_with_fp16_q", &decode_set, &a, &e, FMHA_ERR_UNSUPPORTED, stream);
    a = e.f8; a.k_descale = NULL;
    expect_status("decode_bad_fp8_per_tensor_null_k_descale", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.f8; a.q_descale = e.dds + 2;     /* bf16 queries take no q_descale */
    expect_status("decode_bad_q_descale_with_bf16_q", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.f8; a.q_dtype = FMHA_DTYPE_FP8; a.q = e.dq8; a.q_descale = e.dds + 2;
    expect_status("decode_fp8_q_fp8_is_valid", &decode_set, &a, &e, FMHA_OK, stream);
    a = e.f8; a.kv_layout = FMHA_KV_LAYOUT_VECTORIZED; a.stride_k = a.stride_v = 16;
    expect_status("decode_bad_fp8_vectorized", &decode_set, &a, &e, WANT_ANY_ERROR, stream);
    a = e.ct; a.q_dtype = FMHA_DTYPE_BF16; a.kv_dtype = FMHA_DTYPE_FP8; a.k_cache = e.dk8; a.v_cache = e.dv8;
    a.kv_scale = FMHA_KV_SCALE_PER_TENSOR; a.k_descale = e.dds; a.v_descale = e.dds + 1;
    expect_status("decode_fp8_contiguous_per_tensor_is_valid", &decode_set, &a, &e, FMHA_OK, stream);
    a.kv_scale = FMHA_KV_SCALE_PER_PAGE; a.k_descale = a.v_descale = NULL;
    a.k_page_descale = e.dds; a.v_page_descale = e.dds + 1; a.descale_page_stride = 1; a.descale_nhead_stride = 1;
    expect_status("decode_bad_fp8_per_page_on_contiguous_cache", &decode_set, &a, &e, WANT_ANY_ERROR, stream);

    /* null pointers */
    a = e.ct; a.q = NULL;
    expect_status("decode_bad_null_q", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.o = NULL;
    expect_status("decode_bad_null_o", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.k_cache = NULL;
    expect_status("decode_bad_null_k_cache", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.v_cache = NULL;
    expect_status("decode_bad_null_v_cache", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.seqlen_k = NULL;
    expect_status("decode_bad_contiguous_without_seqlen_k", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.sg; a.kv_indptr = NULL;
    expect_status("decode_bad_sglang_null_kv_indptr", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.vl; a.block_table = NULL;
    expect_status("decode_bad_vllm_null_block_table", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.vl; a.seqlen_k = NULL;
    expect_status("decode_bad_vllm_null_seqlen_k", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    expect_status("decode_bad_null_set", NULL, &e.ct, &e, FMHA_ERR_INVALID_ARG, stream);
    if (tu_selected("decode_bad_null_args_and_plan")) {
        fmha_decode_plan pl;
        fmha_status s1 = fmha_decode_plan_make(&decode_set, NULL, &pl);
        fmha_status s2 = fmha_decode(&decode_set, NULL, (void *)stream);
        fmha_status s3 = fmha_decode_run(NULL, &e.ct, (void *)stream);
        fmha_status s4 = fmha_decode_plan_make(&decode_set, &e.ct, NULL);
        if (s1 == FMHA_ERR_INVALID_ARG && s2 == FMHA_ERR_INVALID_ARG && s3 == FMHA_ERR_INVALID_ARG &&
            s4 == FMHA_ERR_INVALID_ARG && fmha_last_error()[0])
            tu_pass("decode_bad_null_args_and_plan");
        else
            tu_fail("decode_bad_null_args_and_plan", "plan_make(NULL args) -> %s, decode(NULL) -> %s, run(NULL plan) -> %s, "
                    "plan_make(NULL plan) -> %s", fmha_status_str(s1), fmha_status_str(s2), fmha_status_str(s3),
                    fmha_status_str(s4));
    }

    /* pages */
    a = e.sg; a.page_size = 3;
    expect_status("decode_bad_page_size_3", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.sg; a.page_size = 0;
    expect_status("decode_bad_paged_page_size_0", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.sg; a.page_size = 4096;
    expect_status("decode_bad_page_size_4096", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.sg; a.kv_layout = FMHA_KV_LAYOUT_VECTORIZED; a.page_size = 4;
    expect_status("decode_bad_vectorized_page_4", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.sg; a.page_table = (fmha_page_table)7;
    expect_status("decode_bad_page_table_unknown", &decode_set, &a, &e, FMHA_ERR_INVALID_ARG, stream);

    /* no kernel: the lean set's NOMASK row cannot take a mask, it has no
     * contiguous row for fp16 and nothing for pages below 16 */
    a = e.sg; a.page_size = 16;
    expect_status("decode_no_kernel_masked_in_lean_set", &lean_set, &a, &e, FMHA_ERR_NO_KERNEL, stream);
    a = e.ct; a.mask_type = FMHA_MASK_NONE;
    expect_status("decode_no_kernel_contiguous_fp16_in_lean_set", &lean_set, &a, &e, FMHA_ERR_NO_KERNEL, stream);
    a = e.sg; a.mask_type = FMHA_MASK_NONE; a.page_size = 8; a.page_stride_k = a.page_stride_v = 8 * 2 * 64;
    expect_status("decode_no_kernel_page8_in_lean_set", &lean_set, &a, &e, FMHA_ERR_NO_KERNEL, stream);
    a = e.sg; a.mask_type = FMHA_MASK_NONE;
    expect_status("decode_lean_set_nomask_page16_is_valid", &lean_set, &a, &e, FMHA_OK, stream);

    /* a plan serves calls of its shape only */
    a = e.ct; a.batch = 1;
    expect_run("decode_run_batch_differs_from_plan", &decode_set, &e.ct, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.seqlen_q = 1;
    expect_run("decode_run_seqlen_q_differs_from_plan", &decode_set, &e.ct, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.nhead_q = 8;
    expect_run("decode_run_nhead_q_differs_from_plan", &decode_set, &e.ct, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.hdim_q = a.hdim_v = 128; a.stride_q = a.stride_o = 4 * 128; a.nhead_stride_q = a.nhead_stride_o = 128;
    a.batch_stride_q = a.batch_stride_o = 2 * 4 * 128; a.stride_k = a.stride_v = 2 * 128;
    a.nhead_stride_k = a.nhead_stride_v = 128; a.batch_stride_k = a.batch_stride_v = 64 * 2 * 128;
    expect_run("decode_run_hdim_differs_from_plan", &decode_set, &e.ct, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.ct; a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16;
    expect_run("decode_run_dtype_differs_from_plan", &decode_set, &e.ct, &a, &e, FMHA_ERR_INVALID_ARG, stream);
    expect_run("decode_run_paged_args_with_contiguous_plan", &decode_set, &e.ct, &e.sg, &e, FMHA_ERR_INVALID_ARG, stream);
    a = e.sg; a.kv_layout = FMHA_KV_LAYOUT_VECTORIZED; a.stride_k = a.stride_v = 8;
    expect_run("decode_run_layout_differs_from_plan", &decode_set, &e.sg, &a, &e, WANT_ANY_ERROR, stream);
    /* a plan for pages of 1024 (the largest class) cannot run pages of 1 */
    a = e.sg; a.page_size = 1024;
    {
        fmha_decode_args small = e.sg;
        small.page_size = 1; small.page_stride_k = small.page_stride_v = 2 * 64;
        expect_run("decode_run_smaller_page_than_plan", &decode_set, &a, &small, &e, WANT_ANY_ERROR, stream);
    }
    /* lean set: its NOMASK kernel cannot run a masked call made with the same shape */
    a = e.sg; a.mask_type = FMHA_MASK_NONE;
    expect_run("decode_run_mask_not_served_by_plan_kernel", &lean_set, &a, &e.sg, &e, WANT_ANY_ERROR, stream);
    /* a plan made without a soft cap on a set whose preferred kernel lacks one */
    {
        fmha_decode_args capped = e.ct;
        capped.logits_soft_cap = 5.0f;
        memset(&plan, 0, sizeof(plan));
        if (fmha_decode_plan_make(&decode_set, &e.ct, &plan) == FMHA_OK && plan.kernel && !plan.kernel->has_softcap)
            expect_run("decode_run_softcap_not_served_by_plan_kernel", &decode_set, &e.ct, &capped, &e, WANT_ANY_ERROR,
                       stream);
        else
            expect_run("decode_run_softcap_served_by_plan_kernel", &decode_set, &e.ct, &capped, &e, FMHA_OK, stream);
    }
    /* same shape, other pointers and key counts: fine */
    a = e.ct; a.cache_batch_idx = NULL; a.lse = NULL; a.max_seqlen_k = 64;
    expect_run("decode_run_same_shape_other_args_is_valid", &decode_set, &e.ct, &a, &e, FMHA_OK, stream);
    a = e.ct; a.num_splits = 4; a.workspace = e.dws; a.workspace_size = DBAD_WS;
    {
        fmha_decode_args nows = a;
        nows.workspace = NULL; nows.workspace_size = 0;
        expect_run("decode_run_split_plan_without_workspace", &decode_set, &a, &nows, &e, FMHA_ERR_INVALID_ARG, stream);
    }
    dbad_free(&e);
}

/* A problem description of the args (what selection sees). */
static dc_cfg cfg_of_args(const fmha_decode_args *a)
{
    dc_cfg c;
    memset(&c, 0, sizeof(c));
    c.dtype = a->kv_dtype;
    c.q8 = a->q_dtype == FMHA_DTYPE_FP8;
    c.batch = a->batch; c.hq = a->nhead_q; c.hk = a->nhead_k; c.d = a->hdim_q; c.sq = a->seqlen_q;
    c.paged = a->is_paged; c.page = a->page_size; c.vec = a->is_paged && a->kv_layout == FMHA_KV_LAYOUT_VECTORIZED;
    c.cap = a->logits_soft_cap;
    c.mask = a->mask_type; c.wl = a->window_left; c.wr = a->window_right;
    c.splits = a->num_splits;
    snprintf(c.name, sizeof(c.name), "plan");
    return c;
}

/* Plans only (nothing launched): the plan of `a` must pass check_plan, its
 * kernel's page class be want_page (-1: do not check) and its split count
 * want_splits (0: do not check; -1: more than one). */
static void expect_plan(const char *name, const fmha_kernel_set *set, const fmha_decode_args *a, int want_page,
                        int want_splits)
{
    fmha_decode_plan plan;
    dc_cfg c;
    dc_inst r;
    fmha_status s;
    char why[1024] = "";
    if (!tu_selected(name)) return;
    c = cfg_of_args(a);
    memset(&r, 0, sizeof(r));
    r.maxk = a->max_seqlen_k;
    memset(&plan, 0, sizeof(plan));
    s = fmha_decode_plan_make(set, a, &plan);
    if (s != FMHA_OK)
        tu_fail(name, "%s: %s", fmha_status_str(s), fmha_last_error());
    else if (check_plan(set, &c, &r, &plan, a->num_splits, why, sizeof(why)) != 0)
        tu_fail(name, "%s%s", why, plan_str(&plan));
    else if (want_page >= 0 && plan.kernel->page_size != want_page)
        tu_fail(name, "page class %d, want %d%s", plan.kernel->page_size, want_page, plan_str(&plan));
    else if ((want_splits > 0 && plan.num_splits != want_splits) || (want_splits < 0 && plan.num_splits < 2))
        tu_fail(name, "%d splits, want %s%d%s", plan.num_splits, want_splits < 0 ? "more than " : "",
                want_splits < 0 ? 1 : want_splits, plan_str(&plan));
    else
        tu_pass(name);
}

/* The largest page size <= P among the set's decode kernels of this dtype,
 * head dim and layout that have a page (the class a page-P problem runs). */
static int page_class(const fmha_kernel_set *set, fmha_dtype dt, int hd, fmha_kv_layout lay, int P)
{
    int i, best = -1, n = fmha_set_size(set);
    for (i = 0; i < n; i++) {
        const fmha_kernel_info *k = fmha_set_kernel(set, i);
        if (k && k->family == FMHA_FAMILY_DECODE && k->dtype == dt && k->hdim == hd && k->kv_layout == lay &&
            k->page_size >= 1 && k->page_size <= P && k->page_size > best)
            best = k->page_size;
    }
    return best;
}

static void test_plans(void)
{
    static const int pages[11] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 2048 };
    static const int hds[7] = { 8, 40, 64, 72, 96, 200, 256 };
    static const int spl[6] = { 1, 2, 3, 7, 64, 128 };
    dbad_env e;
    fmha_decode_args a;
    char name[160];
    int i, m;
    dbad_make(&e);

    /* page classes: LINEAR fp16 (causal), bf16 (unmasked, soft cap), fp8 KV;
     * VECTORIZED fp16/bf16 from page 8; the contiguous cache: class 0 */
    for (m = 0; m < 4; m++)
        for (i = 0; i < 11; i++) {
            const fmha_kv_layout lay = m == 3 ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
            fmha_dtype dt = m == 1 || m == 3 ? FMHA_DTYPE_BF16 : m == 2 ? FMHA_DTYPE_FP8 : FMHA_DTYPE_FP16;
            if (m == 3 && pages[i] < 8) continue;
            a = m == 2 ? e.f8 : e.sg;
            a.page_size = pages[i];
            a.page_stride_k = a.page_stride_v = (int64_t)pages[i] * 2 * 64;
            if (m == 1 || m == 3) { a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16; }
            if (m == 1) { a.mask_type = FMHA_MASK_NONE; a.logits_soft_cap = 20.0f; }
            if (m == 3) { a.kv_layout = lay; a.stride_k = a.stride_v = 8; }
            snprintf(name, sizeof(name), "plan_page%d_%s_%s_uses_page%d_kernel", pages[i], dtype_str(dt),
                     m == 3 ? "vectorized" : "linear", page_class(&decode_set, dt, 64, lay, pages[i]));
            expect_plan(name, &decode_set, &a, page_class(&decode_set, dt, 64, lay, pages[i]), 0);
        }
    expect_plan("plan_contiguous_fp16_uses_page0_kernel", &decode_set, &e.ct, 0, 0);
    a = e.ct; a.q_dtype = FMHA_DTYPE_BF16; a.kv_dtype = FMHA_DTYPE_FP8; a.k_cache = e.dk8; a.v_cache = e.dv8;
    a.kv_scale = FMHA_KV_SCALE_PER_TENSOR; a.k_descale = e.dds; a.v_descale = e.dds + 1;
    expect_plan("plan_contiguous_fp8_uses_page0_kernel", &decode_set, &a, 0, 0);
    a = e.ct; a.logits_soft_cap = 30.0f; a.alibi_slopes = e.dds;
    expect_plan("plan_contiguous_softcap_alibi", &decode_set, &a, 0, 0);

    /* head dims: the smallest kernel that holds them */
    for (i = 0; i < 7; i++) {
        a = e.ct;
        a.hdim_q = a.hdim_v = hds[i];
        snprintf(name, sizeof(name), "plan_hdim%d_smallest_kernel", hds[i]);
        expect_plan(name, &decode_set, &a, 0, 0);
    }

    /* explicit split counts: exactly those, combine and workspace with them */
    for (i = 0; i < 6; i++) {
        a = e.ct;
        a.num_splits = spl[i];
        snprintf(name, sizeof(name), "plan_explicit_splits%d", spl[i]);
        expect_plan(name, &decode_set, &a, 0, spl[i]);
        a = e.vl;
        a.num_splits = spl[i];
        snprintf(name, sizeof(name), "plan_explicit_splits%d_vllm", spl[i]);
        expect_plan(name, &decode_set, &a, -1, spl[i]);
    }

    /* the heuristic: one sequence of 64k keys on one KV head splits; blocks that
     * fill the GPU many times over, one key tile, or no keys do not */
    a = e.ct; a.num_splits = 0; a.batch = 1; a.nhead_q = 8; a.nhead_k = 1; a.seqlen_q = 1; a.max_seqlen_k = 65536;
    a.stride_q = a.stride_o = 8 * 64; a.batch_stride_q = a.batch_stride_o = 8 * 64;
    a.stride_k = a.stride_v = 64; a.nhead_stride_k = a.nhead_stride_v = 64; a.batch_stride_k = a.batch_stride_v = 65536 * 64;
    expect_plan("plan_heuristic_one_sequence_64k_keys_splits", &decode_set, &a, 0, -1);
    a.seqlen_q = 4; a.batch_stride_q = a.batch_stride_o = 4 * 8 * 64;
    expect_plan("plan_heuristic_one_sequence_64k_keys_sq4_splits", &decode_set, &a, 0, -1);
    a = e.ct; a.num_splits = 0; a.batch = 4096; a.nhead_q = 8; a.nhead_k = 8; a.seqlen_q = 1; a.max_seqlen_k = 4096;
    a.stride_q = a.stride_o = 8 * 64; a.batch_stride_q = a.batch_stride_o = 8 * 64;
    a.stride_k = a.stride_v = 8 * 64; a.batch_stride_k = a.batch_stride_v = (int64_t)4096 * 8 * 64;
    expect_plan("plan_heuristic_many_blocks_one_split", &decode_set, &a, 0, 1);
    a = e.ct; a.num_splits = 0; a.max_seqlen_k = 16;
    expect_plan("plan_heuristic_one_key_tile_one_split", &decode_set, &a, 0, 1);
    a.max_seqlen_k = 0;
    expect_plan("plan_heuristic_no_keys_one_split", &decode_set, &a, 0, 1);
    a = e.vl; a.num_splits = 0; a.batch = 1; a.max_seqlen_k = 30000;
    expect_plan("plan_heuristic_paged_long_sequence_splits", &decode_set, &a, -1, -1);

    /* the lean set: its SOFTCAP row serves problems without a soft cap, its
     * NOMASK row unmasked ones (and no-window masks) */
    a = e.ct; a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16; a.hdim_q = a.hdim_v = 128;
    a.stride_q = a.stride_o = 4 * 128; a.nhead_stride_q = a.nhead_stride_o = 128;
    a.batch_stride_q = a.batch_stride_o = 2 * 4 * 128; a.stride_k = a.stride_v = 2 * 128;
    a.nhead_stride_k = a.nhead_stride_v = 128; a.batch_stride_k = a.batch_stride_v = 64 * 2 * 128;
    expect_plan("plan_lean_set_softcap_kernel_without_softcap", &lean_set, &a, 0, 0);
    a = e.sg; a.mask_type = FMHA_MASK_NONE; a.page_size = 1024; a.page_stride_k = a.page_stride_v = 1024 * 2 * 64;
    expect_plan("plan_lean_set_nomask_page1024_uses_page16_kernel", &lean_set, &a, 16, 0);
    a = e.sg; a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = a.window_right = -1;
    expect_plan("plan_lean_set_window_minus1_is_no_mask", &lean_set, &a, 16, 0);
    dbad_free(&e);
}

/* The default decode set: LINEAR rows (contiguous class 0 and pages from 1)
 * for fp16, bf16 and fp8 KV x hdim 64/128/256, VECTORIZED rows for fp16 and
 * bf16 from page 8; every kernel masked, with a soft cap available, ALiBi at
 * run time. */
static void test_registry(void)
{
    static const int hds[3] = { 64, 128, 256 };
    static const fmha_dtype dts[3] = { FMHA_DTYPE_FP16, FMHA_DTYPE_BF16, FMHA_DTYPE_FP8 };
    int n = fmha_set_size(&decode_set), i, dt, hd, missing = 0, bad = -1;
    char miss[160] = "";
    if (tu_selected("registry_decode_set_covers_all_features")) {
        for (dt = 0; dt < 3; dt++)
            for (hd = 0; hd < 3; hd++) {
                /* want[0]: contiguous, [1]: LINEAR page 1, [2]: VECTORIZED page <= 8 */
                int want[3] = { 0, 0, 0 }, c;
                for (i = 0; i < n; i++) {
                    const fmha_kernel_info *k = fmha_set_kernel(&decode_set, i);
                    if (!k || k->family != FMHA_FAMILY_DECODE || k->dtype != dts[dt] || k->hdim != hds[hd] ||
                        !k->has_mask || !k->has_softcap)
                        continue;
                    if (k->kv_layout == FMHA_KV_LAYOUT_LINEAR && k->page_size == 0) want[0] = 1;
                    if (k->kv_layout == FMHA_KV_LAYOUT_LINEAR && k->page_size == 1) want[1] = 1;
                    if (k->kv_layout == FMHA_KV_LAYOUT_VECTORIZED && k->page_size >= 1 && k->page_size <= 8) want[2] = 1;
                }
                for (c = 0; c < (dts[dt] == FMHA_DTYPE_FP8 ? 2 : 3); c++)
                    if (!want[c] && !missing++)
                        snprintf(miss, sizeof(miss), "%s d%d %s", dtype_str(dts[dt]), hds[hd],
                                 c == 0 ? "contiguous" : c == 1 ? "linear page 1" : "vectorized page <= 8");
            }
        if (!missing) tu_pass("registry_decode_set_covers_all_features");
        else tu_fail("registry_decode_set_covers_all_features", "%d kernels, %d combinations missing (first: %s, "
                     "masked with a soft cap)", n, missing, miss);
    }
    if (tu_selected("registry_decode_kernel_info_sane")) {
        for (i = 0; i < n && bad < 0; i++) {
            const fmha_kernel_info *k = fmha_set_kernel(&decode_set, i);
            if (!k || !k->name || !strstr(k->name, "decode") || k->family != FMHA_FAMILY_DECODE || !k->has_alibi ||
                k->tile_m <= 0 || k->tile_n <= 0 || k->warps <= 0 || k->stages <= 0 || !k->pipeline ||
                k->page_size < 0 || k->page_size > 2048 || (k->page_size & (k->page_size - 1)) != 0 ||
                (k->kv_layout == FMHA_KV_LAYOUT_VECTORIZED && (k->page_size == 0 || !strstr(k->name, "vectorized") ||
                                                               k->dtype == FMHA_DTYPE_FP8)))
                bad = i;
        }
        if (n > 0 && bad < 0) tu_pass("registry_decode_kernel_info_sane");
        else tu_fail("registry_decode_kernel_info_sane", "%d kernels; kernel %d: %s", n, bad,
                     bad >= 0 && fmha_set_kernel(&decode_set, bad) ? fmha_set_kernel(&decode_set, bad)->name : "(null)");
    }
    if (tu_selected("registry_decode_json")) {
        size_t len = fmha_set_json(&decode_set, NULL, 0);
        char *buf = (char *)tu_hmalloc(len + 1);
        const char *why = NULL;
        fmha_set_json(&decode_set, buf, len + 1);
        if (len == 0 || strlen(buf) != len) why = "length";
        for (i = 0; i < n && !why; i++)
            if (!strstr(buf, fmha_set_kernel(&decode_set, i)->name)) why = "a kernel name is missing";
        if (why) tu_fail("registry_decode_json", "%s", why);
        else tu_pass("registry_decode_json");
        free(buf);
    }
    if (tu_selected("registry_lean_set")) {
        int tn = fmha_set_size(&lean_set), nsc = 0, nnm = 0;
        for (i = 0; i < tn; i++) {
            const fmha_kernel_info *k = fmha_set_kernel(&lean_set, i);
            if (k && k->family == FMHA_FAMILY_DECODE && k->dtype == FMHA_DTYPE_BF16 && k->hdim == 128 && k->has_mask &&
                k->has_softcap && k->page_size == 0)
                nsc++;
            if (k && k->family == FMHA_FAMILY_DECODE && k->dtype == FMHA_DTYPE_FP16 && k->hdim == 64 && !k->has_mask &&
                !k->has_softcap && k->page_size == 16 && k->kv_layout == FMHA_KV_LAYOUT_LINEAR)
                nnm++;
        }
        if (nsc >= 1 && nnm >= 1 && nsc + nnm == tn) tu_pass("registry_lean_set");
        else tu_fail("registry_lean_set", "%d kernels: %d contiguous bf16 SOFTCAP, %d fp16 NOMASK page 16", tn, nsc, nnm);
    }
}

/* ============================================================================
 * main
 * ========================================================================== */
static const char usage_extra[] =
    "  --quick   ~35 problems plus the API checks, no 64k-key sequence (for compute-sanitizer)\n"
    "  --filter  run only checks whose name contains SUBSTR (e.g. page16, fp8, splits7, plan_, decode_bad)\n"
    "  --list    print the problem names and exit\n";

static const char *cfg_name_at(int i) { return g_cfgs[i].name; }
static int cfg_quick_at(int i) { return g_cfgs[i].quick; }
static double cfg_work_at(int i) { return cfg_work(&g_cfgs[i]); }

static void checks(cudaStream_t stream, uint64_t seed)
{
    (void)seed;
    if ((int)FMHA_MASK_TOP_LEFT != FMHA_REF_MASK_TOP_LEFT || (int)FMHA_MASK_BOTTOM_RIGHT != FMHA_REF_MASK_BOTTOM_RIGHT)
        tu_fail("reference_mask_enums", "fmha_mask_type and the reference's mask values differ");
    test_registry();
    test_plans();
    test_bad_inputs(stream);
}

static void run_at(int i, cudaStream_t stream, uint64_t seed) { run_config(&g_cfgs[i], stream, seed); }

int main(int argc, char **argv)
{
    tu_suite s = { "test_decode", usage_extra, { 0, cfg_name_at, cfg_quick_at, cfg_work_at }, checks, run_at, NULL };
    build_configs();
    s.cfgs.n = g_ncfg;
    return tu_main(argc, argv, &s);
}
