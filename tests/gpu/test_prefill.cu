/*
 * test_prefill.cu - GPU tests of batch prefill over a paged KV cache against the
 * CPU reference.
 *
 * Each problem builds a paged K/V pool on the host: sequence b has lk[b] keys in
 * ceil(lk[b] / page) pages, the pages are numbered (in order or shuffled over the
 * pool), may be shared between sequences (prefix sharing: the second request points
 * at the first one's pages), and the pool has pages no sequence references. Slots
 * nobody may read hold NaN: unreferenced pages, the unused tail of a partly filled
 * last page, head-dim and page padding. The page table is the SGLang 1-D one
 * (kv_indptr / kv_page_indices / kv_last_page_lens, optionally with garbage entries
 * before and after the used range) or the vLLM 2-D one (block_table rows with
 * garbage entries, -1, INT32_MAX, INT32_MIN, num_total_pages + 7, past each
 * sequence's last page). The pool is LINEAR, token-major [pages, page, h_k, d] ("nhd")
 * or head-major [pages, h_k, page, d] ("hnd"), with optional row and page padding, or
 * VECTORIZED (vLLM v0 / CK: K [pages, h_k, d/8, page, 8], V [pages, h_k, page/8, d, 8],
 * optional head and page padding; token strides are documented as unused and are
 * passed as 8, and in one problem as 0).
 * The reference gets K/V gathered from the pages into contiguous per-sequence arrays
 * and runs the group-mode forward reference of tests/ref/fmha_ref.h. (Pools, tables
 * and the gather: tests/gpu/paged_pool.h, shared with test_decode.cu.)
 *
 * Two pipelines, one suite: this file builds as test_prefill, where an sm_90
 * device runs every 16-bit problem on the Hopper wgmma pipeline (one kernel per
 * variant serves every page size), and fp8 KV with head dims above 64 too:
 * with e4m3 queries as e4m3 products, with bf16 queries as f16 products of
 * the pages widened in shared memory (with per-page descales these fall back
 * to the portable pipeline),
 * and as test_prefill_portable (test_prefill_portable.cu: the default set without
 * its Hopper rows), where every problem runs on the portable pipeline.
 *
 * Checked per problem: fmha_batch_prefill_check selects a kernel of the right dtype,
 * the smallest fitting head dim, the expected pipeline (wgmma for 16-bit KV on
 * sm_90 where the set has Hopper rows) and the right page class (default set on
 * the portable pipeline: the page-1 kernel below page 16, the page-16 kernel for
 * 16 and 32, the page-64 kernel from 64 up; the wgmma kernel: page 1; other sets:
 * the largest kernel page size <= the problem's among the chosen pipeline's
 * kernels); the plan says why it picked its pipeline; fmha_batch_prefill_check_pages accepts the
 * tables; one launch on a non-blocking stream (or a captured CUDA graph) writes every
 * logical O element and LSE entry with a finite value (fully masked rows exactly O = 0,
 * LSE = -inf), leaves O/LSE padding and the guard zones before and after them
 * untouched, does not modify Q or the pool, and matches the reference within rel-L2
 * fp16 2e-3 / bf16 1e-2 (plus a loose max-abs bound), LSE within 2e-3 (5e-3 with a
 * soft cap).
 *
 * FP8 KV (prefill_fp8_*): e4m3 K/V pages (LINEAR only) with bf16 queries or e4m3
 * queries (and a q_descale, or none), bf16 output, descales NONE, PER_TENSOR (0.37
 * and 1.9, both ways round) or PER_PAGE (per page and KV head, log-uniform in
 * [0.25, 4], page stride padded past nhead_k, or a head-major array). Codes are
 * drawn log-uniformly over an exponent range: "full" (subnormals up to 448, the
 * default for K and V), "mid" (0.25..7.5, the default for Q) or "low" (subnormals
 * and the smallest normals, with a larger softmax scale so the scores still
 * matter). Full-range keys reach 448 x descale, so their problems run with the
 * default softmax scale divided by 16 (64 with e4m3 queries): scores of order 10,
 * not 1000, where the absolute LSE tolerance would ask for more than fp32 has.
 * Every slot nobody may read holds the e4m3 NaN 0x7F (page tails,
 * padding, unreferenced pages), and every descale nobody may read holds a float
 * NaN. The reference gets the dequantised K/V (and Q): stored * descale. The
 * tolerance is the bf16 one (the output is bf16), the max-abs bound scaled by the
 * largest |V| the problem holds. With e4m3 queries on the wgmma pipeline (e4m3 P V) the reference
 * rounds P to e4m3 per key tile as the kernel does, after scaling it by each
 * key's V descale over the tile's largest (per-page descales; fmha_ref_fwd_row_p8),
 * and the LSE tolerance adds 2^-11 of the row's sum |q k| * scale (the fp8
 * products' accumulator). Also: fp8 plans, registry rows, fp8 bad input.
 *
 * Then: selection of page classes (plans) in the default set and in a small explicit
 * set with page-4, page-32 and page-128 rows (a kernel built for page P serves every
 * power of two >= P: page 4 runs on the page-1 kernel of the default set); the
 * registry of the default prefill set (LINEAR and VECTORIZED rows); which pools
 * get TMA maps on the Hopper rows (tma_grouped_maps: 16-bit pages of 4 KB and
 * more back to back with d the kernel's head dim, e4m3 pages from 32); bad input
 * (statuses, messages naming the sequence, nothing launched); and, in the full run
 * only, large_pool_*: K and V pools of 4.5 GiB each with every accessed page past the
 * 4 GiB mark (64-bit page offsets), page 8 (staged per-row offsets), page 16 (one
 * lookup per 16-row run) and page 1024 (one page per key tile),
 * batch 1 and 4, LINEAR and VECTORIZED, bf16 and fp8 (for fp8 KV the page offsets
 * are bytes). A pool that cannot be allocated
 * prints a SKIP line for that problem.
 *
 * compute-sanitizer: `--quick` leaves out the large pools (memcheck of 9 GiB of
 * pools is slow); the vLLM rows' garbage entries and the NaN slots make any read
 * past a sequence's last page or past its length show up as an invalid access or a
 * NaN.
 *
 * Build:  nvcc -x cu -std=c++17 -O3 -gencode=arch=compute_80,code=sm_80 \
 *              -gencode=arch=compute_90a,code=sm_90a -Iinclude -Itests \
 *              tests/gpu/test_prefill.cu -o build/tests/test_prefill
 * Run:    build/tests/test_prefill [--quick] [--filter SUBSTR] [--list] [--seed N]
 * Output: one `PASS name` / `FAIL name: why` line per check, last line
 *         `N passed, M failed`; exit status 1 on any failure. Without a GPU:
 *         `SKIP test_prefill: no GPU`, `0 passed, 0 failed`, exit 0.
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

/* Everything the library offers for batch prefill (page classes 1, 16 and 64,
 * both layouts; Hopper rows for 16-bit KV unless built as
 * test_prefill_portable). */
DECL_FMHA_KERNEL_SET(prefill_set, FMHA_DEFAULT_PREFILL_SET)

#ifndef TEST_PREFILL_PORTABLE
#define TEST_PREFILL_PORTABLE 0
#endif
/* Does this run pick the wgmma pipeline for 16-bit KV (an sm_90 device and a
 * build with Hopper prefill rows)? */
static int g_fast16 = -1;
static int fast16(void)
{
    if (g_fast16 < 0) {
        int dev = 0, major = 0, minor = 0;
        g_fast16 = !TEST_PREFILL_PORTABLE && cudaGetDevice(&dev) == cudaSuccess &&
                   cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                   cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                   major == 9 && minor == 0;
    }
    return g_fast16;
}
/* The pipeline a default-set problem runs on: 16-bit KV, e4m3 KV with
 * e4m3 queries, and e4m3 KV with bf16 queries but no per-page descales (pds)
 * on the wgmma pipeline (whose e4m3 kernels have head dims 128 and 256: d <=
 * 64 takes the portable 64 kernel, the least padding). */
static int expect_wgmma(fmha_dtype kv_dt, int q8, int pds, int d)
{
    return fast16() && (kv_dt != FMHA_DTYPE_FP8 || ((q8 || !pds) && d > 64));
}

/* Explicit page columns: page 4 (not a tuned class; staged per-row offsets, serves
 * 4..2048), page 32 (bf16: one lookup per 16-row run, serves 32..2048, so pages of
 * 64 run it with one page per tile) and page 128 (a multiple of the 64-key tile: one
 * lookup per tile, serves 128..2048), for bf16 and for fp8 KV (tuned tiles). */
#define PAGE4_SET(X)                                                                      \
    X(PREFILL, BF16, 128, MASK, NOSOFTCAP, 4,   128,      64,       4,        1)          \
    X(PREFILL, BF16, 128, MASK, NOSOFTCAP, 32,  128,      64,       4,        1)          \
    X(PREFILL, BF16, 128, MASK, NOSOFTCAP, 128, 128,      64,       4,        1)          \
    X(PREFILL, FP16, 64,  MASK, SOFTCAP,   4,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)   \
    X(PREFILL, FP8,  128, MASK, NOSOFTCAP, 4,   FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)   \
    X(PREFILL, FP8,  128, MASK, NOSOFTCAP, 128, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(page4_set, PAGE4_SET)

/* VECTORIZED with only the page-16 kernel (one page index per 16-row run):
 * it serves pages from 16 up, where a 64-key tile starts inside a page. */
#define VEC16_SET(X)                                                                      \
    X(PREFILL_VEC, BF16, 128, MASK, NOSOFTCAP, 16, 128,      64,       4,        1)       \
    X(PREFILL_VEC, FP16, 64,  MASK, NOSOFTCAP, 16, 128,      64,       8,        1)
DECL_FMHA_KERNEL_SET(vec16_set, VEC16_SET)

/* Page 16 with three stages (no tuned row has them): class 3's staged run
 * indices two tiles ahead of the copies, bf16 and fp8 KV. */
#define STAGES3_SET(X)                                                                    \
    X(PREFILL, BF16, 64,  MASK, NOSOFTCAP, 16,  128,      64,       4,        3)          \
    X(PREFILL, FP8,  64,  MASK, NOSOFTCAP, 16,  128,      64,       4,        3)
DECL_FMHA_KERNEL_SET(stages3_set, STAGES3_SET)

/* ============================================================================
 * Problem descriptions
 * ========================================================================== */
#define MAXB PP_MAXB
#define MAXCFG 400
/* Poisoned elements before and after the O and LSE buffers (keeps O 16-byte aligned). */
#define GUARD 256
#define SG FMHA_PAGE_TABLE_SGLANG_1D
#define VL FMHA_PAGE_TABLE_VLLM_2D
/* Large pool test: bytes of each of the K and V pools; accessed pages start here. */
#define LARGE_POOL_BYTES ((size_t)9 << 29)          /* 4.5 GiB */
#define LARGE_POOL_FIRST ((size_t)1 << 32)          /* 4 GiB   */
/* Pools up to this size are built as one host image and uploaded at once. */
#define SMALL_POOL_BYTES ((size_t)256 << 20)

typedef struct pf_cfg {
    char name[256];
    const fmha_kernel_set *set;  /* NULL: prefill_set                                */
    fmha_dtype dtype;
    int batch, hq, hk, d;
    int lq[MAXB], lk[MAXB];      /* new tokens (queries) and total keys per sequence */
    int page;
    int table;                   /* SG or VL                                         */
    int hnd;                     /* LINEAR: 0 [pages, page, h_k, d]; 1 [pages, h_k, page, d] */
    int vec;                     /* VECTORIZED: K [pages, h_k, d/8, page, 8],
                                    V [pages, h_k, page/8, d, 8]                     */
    int vec_ts;                  /* VECTORIZED: token strides passed (documented as
                                    unused); 0 means pass 8                          */
    int shuffle;                 /* page numbers permuted over the pool              */
    int share;                   /* 0: none; 1: odd sequences share a page prefix with
                                    the previous one; 2: all share sequence 0's pages */
    int spare;                   /* unreferenced (NaN) pages in the pool             */
    int pad;                     /* extra elements per Q/O/K row (V gets pad + 8);
                                    VECTORIZED: 8*pad extra elements per KV head     */
    int page_pad;                /* extra elements per page (V gets page_pad + 8)     */
    int indptr_base;             /* SGLang: garbage entries before the used indices  */
    int bt_extra;                /* vLLM: garbage entries past each row's last page  */
    int maxq_slack;              /* max_seqlen_q = max lq + slack                     */
    int npages0;                 /* num_total_pages 0 (not given) in the launch's args */
    fmha_mask_type mask;
    int wl, wr;
    float cap;
    int lse, lse_pad;
    float scale;                 /* 0: 1/sqrt(d)                                      */
    float amp;
    int graph;
    int large;                   /* pool of 4.5 GiB, accessed pages past 4 GiB        */
    /* FP8 KV (dtype FP8): */
    int q8;                      /* queries stored as e4m3 too                        */
    fmha_kv_scale kvs;           /* NONE, PER_TENSOR or PER_PAGE                      */
    float kds, vds;              /* PER_TENSOR descales                               */
    float qds;                   /* q8: q_descale; 0 passes NULL (descale 1)          */
    int ds_pad;                  /* PER_PAGE: descale page stride nhead_k + ds_pad;
                                    -1: head-major [nhead_k][pages + 3]               */
    int r8k, r8v, r8q;           /* e4m3 code ranges of K, V and Q (R8_*)              */
    int sinks;                   /* one attention-sink logit per query head          */
    int quick;
} pf_cfg;

static pf_cfg g_cfgs[MAXCFG];
static int g_ncfg;

static const char *dtype_str(fmha_dtype t) { return t == FMHA_DTYPE_BF16 ? "bf16" : t == FMHA_DTYPE_FP16 ? "fp16" : "fp8"; }

/* Causal bottom-right (the prefill-with-prefix mask), LSE on, shuffled pages, three
 * spare pages, three garbage entries per vLLM row. */
static pf_cfg cfg_make(fmha_dtype dt, int b, const int *lq, const int *lk, int hq, int hk, int d, int page,
                       int table)
{
    pf_cfg c;
    int i;
    memset(&c, 0, sizeof(c));
    c.dtype = dt; c.batch = b; c.hq = hq; c.hk = hk; c.d = d; c.page = page; c.table = table;
    for (i = 0; i < b; i++) { c.lq[i] = lq[i]; c.lk[i] = lk[i]; }
    c.shuffle = 1; c.spare = 3; c.bt_extra = 3;
    c.mask = FMHA_MASK_BOTTOM_RIGHT; c.wl = -1; c.wr = 0;
    c.lse = 1; c.amp = 1.0f;
    return c;
}

static void cfg_mask(pf_cfg *c, fmha_mask_type m, int wl, int wr) { c->mask = m; c->wl = wl; c->wr = wr; }

/* FP8 KV with the given query type and descale mode: per-tensor descales 0.37 (K)
 * and 1.9 (V), q_descale 0.6, padded per-page descale rows, mid-range queries,
 * full-range K/V. */
static pf_cfg cfg_make8(int b, const int *lq, const int *lk, int hq, int hk, int d, int page, int table, int q8,
                        fmha_kv_scale kvs)
{
    pf_cfg c = cfg_make(FMHA_DTYPE_FP8, b, lq, lk, hq, hk, d, page, table);
    c.q8 = q8;
    c.kvs = kvs;
    c.kds = 0.37f; c.vds = 1.9f;
    c.qds = q8 ? 0.6f : 0.0f;
    c.ds_pad = 3;                        /* PER_PAGE: descale page stride h_k + 3 */
    c.r8q = R8_MID;
    return c;
}

static void cfg_name(pf_cfg *c)
{
    char *s = c->name;
    size_t cap = sizeof(c->name), n;
    int i;
    n = (size_t)snprintf(s, cap, "%s_%s_b%d_h%d:%d_q", c->large ? "large_pool" : "prefill", dtype_str(c->dtype),
                         c->batch, c->hq, c->hk);
    for (i = 0; i < c->batch; i++) n += (size_t)snprintf(s + n, cap - n, "%s%d", i ? "," : "", c->lq[i]);
    n += (size_t)snprintf(s + n, cap - n, "_k");
    for (i = 0; i < c->batch; i++) n += (size_t)snprintf(s + n, cap - n, "%s%d", i ? "," : "", c->lk[i]);
    n += (size_t)snprintf(s + n, cap - n, "_d%d_page%d_%s_%s", c->d, c->page, c->table == VL ? "vllm" : "sglang",
                          c->vec ? "vectorized" : c->hnd ? "hnd" : "nhd");
    if (c->vec && c->vec_ts) n += (size_t)snprintf(s + n, cap - n, "_tokstride%d", c->vec_ts == -1 ? 0 : c->vec_ts);
    if (c->mask == FMHA_MASK_NONE) n += (size_t)snprintf(s + n, cap - n, "_nomask");
    else n += (size_t)snprintf(s + n, cap - n, "_%s(%d,%d)", c->mask == FMHA_MASK_TOP_LEFT ? "t" : "b", c->wl, c->wr);
    if (!c->shuffle) n += (size_t)snprintf(s + n, cap - n, "_inorder");
    if (c->share) n += (size_t)snprintf(s + n, cap - n, "_share%d", c->share);
    if (c->spare != 3 && !c->large) n += (size_t)snprintf(s + n, cap - n, "_spare%d", c->spare);
    if (c->pad) n += (size_t)snprintf(s + n, cap - n, "_pad%d", c->pad);
    if (c->page_pad) n += (size_t)snprintf(s + n, cap - n, "_pagepad%d", c->page_pad);
    if (c->indptr_base) n += (size_t)snprintf(s + n, cap - n, "_indptrbase%d", c->indptr_base);
    if (c->table == VL && c->bt_extra != 3) n += (size_t)snprintf(s + n, cap - n, "_btextra%d", c->bt_extra);
    if (c->maxq_slack) n += (size_t)snprintf(s + n, cap - n, "_maxqslack%d", c->maxq_slack);
    if (c->npages0) n += (size_t)snprintf(s + n, cap - n, "_npages0");
    if (c->cap > 0) n += (size_t)snprintf(s + n, cap - n, "_cap%g", c->cap);
    if (!c->lse) n += (size_t)snprintf(s + n, cap - n, "_nolse");
    if (c->lse_pad) n += (size_t)snprintf(s + n, cap - n, "_lsepad%d", c->lse_pad);
    if (c->sinks) n += (size_t)snprintf(s + n, cap - n, "_sinks");
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
        if (c->q8 && c->r8q != R8_MID) n += (size_t)snprintf(s + n, cap - n, "_q%s", r8_str[c->r8q]);
    }
    if (c->set == &page4_set) n += (size_t)snprintf(s + n, cap - n, "_page4set");
    if (c->set == &vec16_set) n += (size_t)snprintf(s + n, cap - n, "_vec16set");
    if (c->set == &stages3_set) n += (size_t)snprintf(s + n, cap - n, "_stages3set");
    if (c->graph) n += (size_t)snprintf(s + n, cap - n, "_graph");
}

/* q.k products of the reference, ignoring the mask. */
static double cfg_work(const pf_cfg *c)
{
    double w = 0.0;
    int b;
    for (b = 0; b < c->batch; b++) w += (double)c->lq[b] * c->lk[b];
    return w * c->hq * c->d;
}

static void add(pf_cfg c, int quick)
{
    if (g_ncfg >= MAXCFG) { fprintf(stderr, "test_prefill: MAXCFG too small\n"); exit(2); }
    c.quick = quick;
    cfg_name(&c);
    g_cfgs[g_ncfg++] = c;
}

/* The table. Comments say what each group is after; `quick` marks the ~40 problems
 * of --quick (the run for compute-sanitizer). */
static void build_configs(void)
{
    const fmha_dtype F = FMHA_DTYPE_FP16, B = FMHA_DTYPE_BF16;
    const fmha_mask_type NO = FMHA_MASK_NONE, TL = FMHA_MASK_TOP_LEFT, BR = FMHA_MASK_BOTTOM_RIGHT;
    const fmha_kv_scale NS = FMHA_KV_SCALE_NONE, PT = FMHA_KV_SCALE_PER_TENSOR, PP = FMHA_KV_SCALE_PER_PAGE;
    const fmha_kv_scale kvr[3] = { PP, PT, NS };    /* fp8 descale modes in rotation */
    int i, j, k;

    /* 1. page size x table x KV order: the core matrix. Lengths end in a partly
     * filled last page for every page size but 1; sequence 1 is a single key. */
    {
        static const int pages[5] = { 1, 4, 16, 64, 1024 };
        static const int hd[3] = { 64, 128, 256 };
        static const int lq[3] = { 37, 1, 100 }, lk[3] = { 300, 1, 1500 };
        for (i = 0; i < 5; i++)
            for (j = 0; j < 2; j++)
                for (k = 0; k < 2; k++) {
                    pf_cfg c = cfg_make((i + j + k) % 2 ? B : F, 3, lq, lk, 4, 2, hd[(i + 2 * j + k) % 3], pages[i],
                                        j ? VL : SG);
                    c.hnd = k;
                    add(c, k == (i % 2) && j == ((i / 2) % 2));
                }
    }

    /* 2. the other powers of two up to 2048 (2048 once more with three pages). */
    {
        static const int pages[7] = { 2, 8, 32, 128, 256, 512, 2048 };
        static const int lq[2] = { 50, 200 }, lk[2] = { 700, 4100 };
        for (i = 0; i < 7; i++) {
            pf_cfg c = cfg_make(i % 2 ? B : F, 2, lq, lk, 2, 1, 128, pages[i], i % 2 ? SG : VL);
            c.hnd = (i / 2) % 2;
            add(c, i == 6);
        }
        /* page 8 at hdim 256: a 4 KB page, by TMA on the Hopper rows (the
         * grouped maps), both tables */
        for (i = 0; i < 2; i++) add(cfg_make(i ? F : B, 2, lq, lk, 2, 1, 256, 8, i ? VL : SG), 1);
        /* num_total_pages not given (0): 64-bit page offsets, and the
         * grouped TMA maps over the largest extent (pages of 16 and 64) */
        for (i = 0; i < 2; i++) {
            pf_cfg c = cfg_make(i ? F : B, 2, lq, lk, 2, 1, 128, i ? 64 : 16, i ? VL : SG);
            c.npages0 = 1;
            add(c, 1);
        }
    }

    /* 3. pages in order, with and without unreferenced pages. */
    {
        static const int pages[3] = { 1, 16, 1024 };
        static const int lq[2] = { 65, 129 }, lk[2] = { 1100, 129 };
        for (i = 0; i < 3; i++)
            for (j = 0; j < 2; j++) {
                pf_cfg c = cfg_make(j ? B : F, 2, lq, lk, 4, 1, 64, pages[i], j ? VL : SG);
                c.shuffle = 0;
                c.spare = j ? 0 : 5;
                add(c, i == 1 && j == 0);
            }
    }

    /* 4. pages shared between sequences: a shared prefix (1), and sequences pointing
     * at exactly the same pages (2: equal lengths, different queries). A page that
     * is one sequence's partly filled last page can be a full page of another: the
     * keys past the first sequence's end are then real data it must not see. */
    {
        static const int pages[3] = { 1, 16, 1024 };
        static const int lq1[4] = { 20, 33, 1, 64 }, lk1[4] = { 500, 700, 300, 1300 };
        static const int lq2[3] = { 50, 1, 77 }, lk2[3] = { 777, 777, 777 };
        for (i = 0; i < 3; i++)
            for (j = 0; j < 2; j++) {
                pf_cfg c = cfg_make((i + j) % 2 ? B : F, 4, lq1, lk1, 4, 2, 128, pages[i], j ? VL : SG);
                c.share = 1;
                c.hnd = i == 2;
                add(c, i == 1 || (i == 2 && j == 1));
                c = cfg_make((i + j) % 2 ? F : B, 3, lq2, lk2, 2, 2, 64, pages[i], j ? SG : VL);
                c.share = 2;
                add(c, i == 0 && j == 0);
            }
    }

    /* 5. lengths: 0 queries and/or 0 keys, 1, tile edges, s_q > s_k under causal
     * bottom-right (top rows see nothing), keys = page and page + 1, decode-like. */
    {
        static const struct { int b; int q[MAXB]; int k[MAXB]; } g[] = {
            { 4, { 0, 17, 0, 5 }, { 0, 300, 7, 5 } },
            { 3, { 5, 0, 33 }, { 0, 0, 100 } },                          /* s_k = 0, s_q > 0 */
            { 8, { 1, 1, 1, 1, 1, 1, 1, 1 }, { 1000, 1, 17, 255, 0, 64, 128, 3 } },
            { 2, { 0, 0 }, { 0, 0 } },                                   /* nothing at all  */
            { 3, { 64, 65, 63 }, { 64, 65, 63 } },
            { 2, { 300, 100 }, { 100, 255 } },                           /* s_q > s_k       */
            { 4, { 16, 17, 1, 2 }, { 16, 17, 1024, 1025 } },             /* page edges      */
            { 1, { 1 }, { 1 } },
        };
        static const int pages[3] = { 1, 16, 1024 };
        for (j = 0; j < 8; j++)
            for (k = 0; k < 3; k++) {
                pf_cfg c = cfg_make((j + k) % 2 ? B : F, g[j].b, g[j].q, g[j].k, 4, j % 3 ? 2 : 1,
                                    (j + k) % 3 == 0 ? 128 : 64, pages[k], (j + k) % 2 ? VL : SG);
                if (k == 1) cfg_mask(&c, NO, -1, -1);
                if (k == 2) cfg_mask(&c, TL, -1, 0);
                c.hnd = j % 2;
                add(c, (j == 0 && k == 1) || (j == 1 && k == 0) || (j == 2 && k == 2) || (j == 3 && k == 0) ||
                           (j == 5 && k == 0) || (j == 6 && k == 1));
            }
    }

    /* 6. prefix longer than the new tokens (the prefill case): s_k >> s_q. */
    {
        static const int lq[3] = { 64, 128, 1 }, lk[3] = { 2000, 1100, 3000 };
        static const int pages[2] = { 16, 1024 };
        for (i = 0; i < 2; i++)
            for (j = 0; j < 2; j++) {
                pf_cfg c = cfg_make(j ? B : F, 3, lq, lk, 8, 2, 128, pages[i], (i + j) % 2 ? VL : SG);
                if (j) c.hnd = 1;
                add(c, i == 0 && j == 1);
            }
        {   /* top-left: the new tokens see only the start of the prefix */
            pf_cfg c = cfg_make(B, 3, lq, lk, 4, 2, 64, 16, SG);
            cfg_mask(&c, TL, -1, 0);
            add(c, 0);
        }
    }

    /* 7. windows, both alignments, including windows that hide whole rows. */
    {
        static const struct { fmha_mask_type m; int wl, wr; } w[] = {
            { BR, 128, 0 }, { TL, 16, 16 }, { BR, 0, 0 }, { BR, 5, 5 }, { TL, 2, -1 }, { BR, -1, 32 },
            { TL, 5, 0 },   { BR, 64, 64 },
        };
        static const int pages[4] = { 1, 16, 64, 1024 };
        static const int lq[2] = { 100, 300 }, lk[2] = { 1100, 100 };
        for (j = 0; j < 8; j++) {
            pf_cfg c = cfg_make(j % 2 ? B : F, 2, lq, lk, 4, 2, j % 3 == 1 ? 128 : 64, pages[j % 4], j % 2 ? SG : VL);
            cfg_mask(&c, w[j].m, w[j].wl, w[j].wr);
            c.hnd = (j / 2) % 2;
            add(c, j == 0 || j == 4 || j == 7);
        }
    }

    /* 8. logits soft cap, masked and not. */
    {
        static const float caps[3] = { 0.5f, 2.0f, 10.0f };
        static const int pages[3] = { 16, 1, 1024 };
        static const int lq[2] = { 129, 40 }, lk[2] = { 1200, 257 };
        for (j = 0; j < 3; j++)
            for (i = 0; i < 2; i++) {
                pf_cfg c = cfg_make(i ? B : F, 2, lq, lk, 4, 2, j == 2 ? 256 : 64 * (i + 1), pages[j], i ? VL : SG);
                c.cap = caps[j];
                if (i) cfg_mask(&c, NO, -1, -1);
                add(c, j == 1 && i == 0);
            }
        {
            pf_cfg c = cfg_make(F, 2, lq, lk, 2, 2, 64, 16, SG);
            c.cap = 5.0f; c.scale = 1.0f;                 /* the cap saturates */
            add(c, 0);
        }
    }

    /* 9. GQA ratios 1, 4, 8 (and 16). */
    {
        static const int ratio[4][2] = { { 2, 2 }, { 8, 2 }, { 8, 1 }, { 16, 1 } };
        static const int lq[2] = { 67, 3 }, lk[2] = { 900, 450 };
        for (j = 0; j < 4; j++)
            for (i = 0; i < 2; i++) {
                pf_cfg c = cfg_make((i + j) % 2 ? B : F, 2, lq, lk, ratio[j][0], ratio[j][1], j % 2 ? 128 : 64,
                                    i ? 1024 : 16, (i + j) % 2 ? SG : VL);
                c.hnd = i;
                add(c, (j == 1 && i == 0) || (j == 2 && i == 1));
            }
    }

    /* 10. head dims: the kernel ones and padded ones (96 and 72 on d128, 200 on
     * d256, 40 and 8 on d64), with padded rows. */
    {
        static const int hd[8] = { 64, 128, 256, 96, 40, 200, 8, 72 };
        static const int lq[2] = { 77, 20 }, lk[2] = { 333, 1030 };
        for (j = 0; j < 8; j++)
            for (i = 0; i < 2; i++) {
                pf_cfg c = cfg_make(i ? B : F, 2, lq, lk, 4, 2, hd[j], i ? 16 : (j % 2 ? 1 : 1024), (i + j) % 2 ? VL : SG);
                c.pad = j >= 3 ? 8 : 0;
                c.hnd = (i + j) % 2;
                add(c, (j == 3 && i == 0) || (j == 5 && i == 1) || (j == 2 && i == 0));
            }
    }

    /* 11. strides: padded rows and pages, both KV orders, LSE row padding. */
    {
        static const int pages[3] = { 1, 16, 1024 };
        static const int lq[3] = { 33, 90, 1 }, lk[3] = { 500, 90, 1500 };
        for (i = 0; i < 3; i++)
            for (j = 0; j < 2; j++) {
                pf_cfg c = cfg_make((i + j) % 2 ? B : F, 3, lq, lk, 4, 2, 64 + 64 * j, pages[i], (i + j) % 2 ? SG : VL);
                c.hnd = j;
                c.pad = 8 + 16 * j;
                c.page_pad = 8 * (1 + i);
                c.lse_pad = 3 + j;
                add(c, i == 0 && j == 1);
            }
    }

    /* 12. tables: SGLang indices starting past garbage, vLLM rows without and with
     * many garbage entries, no spare pages; LSE off; scale and input range. */
    {
        static const int lq[3] = { 40, 7, 100 }, lk[3] = { 400, 7, 1500 };
        pf_cfg c = cfg_make(B, 3, lq, lk, 4, 2, 128, 16, SG);
        c.indptr_base = 5;
        add(c, 1);
        c.page = 1024;
        add(c, 0);
        c = cfg_make(F, 3, lq, lk, 4, 2, 64, 16, VL);
        c.bt_extra = 0;
        add(c, 0);
        c.bt_extra = 40;
        c.page = 1;
        add(c, 1);
        c = cfg_make(F, 3, lq, lk, 4, 4, 64, 64, SG);
        c.lse = 0;
        add(c, 0);
        c = cfg_make(F, 3, lq, lk, 2, 2, 128, 16, VL);
        c.scale = 1.0f;                                /* peaky softmax */
        add(c, 0);
        c = cfg_make(B, 3, lq, lk, 2, 1, 64, 1, SG);
        c.amp = 4.0f;
        add(c, 0);
        c = cfg_make(B, 3, lq, lk, 2, 1, 64, 16, VL);
        c.maxq_slack = 300;                            /* more query blocks than rows */
        add(c, 1);
    }

    /* 13. no mask (NOMASK kernels) over long prefixes; big batch of varlen. */
    {
        static const int lq[8] = { 100, 1, 0, 37, 64, 5, 250, 17 }, lk[8] = { 100, 2000, 5, 37, 700, 5, 250, 1100 };
        pf_cfg c = cfg_make(B, 8, lq, lk, 8, 2, 128, 16, SG);
        cfg_mask(&c, NO, -1, -1);
        add(c, 0);
        c.page = 1024; c.table = VL;
        add(c, 0);
        c = cfg_make(F, 8, lq, lk, 4, 1, 64, 1, VL);
        c.share = 1;
        add(c, 0);
    }

    /* 14. graph capture: fmha_batch_prefill inside stream capture, then replay. */
    {
        static const int lq[3] = { 17, 0, 64 }, lk[3] = { 300, 7, 1100 };
        pf_cfg c = cfg_make(F, 3, lq, lk, 4, 2, 64, 16, SG);
        c.graph = 1;
        add(c, 1);
        c = cfg_make(B, 3, lq, lk, 4, 2, 128, 1024, VL);
        c.graph = 1;
        add(c, 0);
    }

    /* 15. the explicit set: bf16 page 4 (staged per-row offsets) serves 4..16, page
     * 32 (one lookup per 16-row run) 32..64, page 128 (one lookup per tile)
     * 128..2048; the fp16 d64 soft-cap row has page 4. */
    {
        static const int pages[6] = { 4, 16, 64, 1024, 2048, 32 };
        static const int lq[2] = { 50, 130 }, lk[2] = { 2100, 300 };
        for (i = 0; i < 6; i++) {
            pf_cfg c = cfg_make(B, 2, lq, lk, 4, 2, 128, pages[i], i % 2 ? VL : SG);
            c.set = &page4_set;
            c.hnd = i == 2;
            add(c, i == 0 || i == 3 || i == 5);
        }
        {
            pf_cfg c = cfg_make(F, 2, lq, lk, 4, 2, 64, 8, SG);
            c.set = &page4_set;
            c.cap = 2.0f;
            add(c, 0);
            c.d = 40; c.page = 4; c.table = VL; c.pad = 8;
            add(c, 0);
        }
    }

    /* 16. VECTORIZED pages (vLLM v0 / CK): K [pages, h_k, d/8, page, 8], V [pages,
     * h_k, page/8, d, 8]; page sizes 8..2048 (multiples of 8), both tables; lengths
     * that end inside an 8-token group (NaN past it), head dims with fewer chunks
     * than the kernel's, soft cap, windows, GQA, sharing, zero lengths, padding. */
    {
        static const int pages[7] = { 8, 16, 32, 64, 128, 1024, 2048 };
        static const int hd[4] = { 64, 128, 256, 96 };
        static const int lq[3] = { 37, 1, 100 }, lk[3] = { 301, 1, 2053 };
        static const int lq2[2] = { 129, 40 }, lk2[2] = { 1203, 257 };
        static const int lq8[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, lk8[8] = { 1000, 1, 17, 255, 0, 64, 128, 3 };
        static const int lqz[4] = { 0, 17, 0, 5 }, lkz[4] = { 0, 300, 7, 5 };
        static const int lqs[4] = { 20, 33, 1, 64 }, lks[4] = { 500, 700, 300, 1300 };
        pf_cfg c;
        for (i = 0; i < 7; i++)
            for (j = 0; j < 2; j++) {
                c = cfg_make((i + j) % 2 ? B : F, 3, lq, lk, 4, 2, hd[(i + j) % 4], pages[i], j ? VL : SG);
                c.vec = 1;
                add(c, (i == 1 && j == 0) || (i == 5 && j == 1) || (i == 0 && j == 1));
            }
        c = cfg_make(B, 2, lq2, lk2, 4, 2, 128, 16, SG); c.vec = 1; c.cap = 2.0f; cfg_mask(&c, NO, -1, -1);
        add(c, 1);
        c = cfg_make(F, 2, lq2, lk2, 4, 2, 64, 1024, VL); c.vec = 1; c.cap = 10.0f;
        add(c, 0);
        c = cfg_make(F, 2, lq2, lk2, 4, 2, 64, 64, VL); c.vec = 1; cfg_mask(&c, BR, 64, 0);
        add(c, 0);
        c = cfg_make(B, 2, lq2, lk2, 4, 2, 128, 8, SG); c.vec = 1; cfg_mask(&c, TL, 8, 8);
        add(c, 0);
        c = cfg_make(B, 2, lq2, lk2, 8, 1, 128, 16, VL); c.vec = 1;
        add(c, 0);
        c = cfg_make(F, 4, lqs, lks, 4, 2, 128, 16, SG); c.vec = 1; c.share = 1;
        add(c, 0);
        c = cfg_make(B, 4, lqs, lks, 4, 2, 64, 1024, VL); c.vec = 1; c.share = 2;
        add(c, 0);
        c = cfg_make(F, 4, lqz, lkz, 4, 1, 64, 8, VL); c.vec = 1;
        add(c, 1);
        c = cfg_make(B, 8, lq8, lk8, 4, 2, 128, 16, SG); c.vec = 1;
        add(c, 0);
        c = cfg_make(F, 2, lq2, lk2, 4, 2, 40, 32, SG); c.vec = 1;
        add(c, 0);
        c = cfg_make(B, 2, lq2, lk2, 4, 2, 200, 128, VL); c.vec = 1;
        add(c, 0);
        c = cfg_make(F, 2, lq2, lk2, 2, 1, 8, 16, VL); c.vec = 1;
        add(c, 0);
        c = cfg_make(B, 2, lq2, lk2, 4, 2, 64, 16, VL); c.vec = 1; c.pad = 8; c.page_pad = 24; c.bt_extra = 0;
        add(c, 0);
        c = cfg_make(F, 2, lq2, lk2, 4, 2, 128, 1024, SG); c.vec = 1; c.pad = 16; c.page_pad = 8; c.indptr_base = 2;
        add(c, 0);
        c = cfg_make(B, 2, lq2, lk2, 4, 2, 64, 64, SG); c.vec = 1; c.graph = 1;
        add(c, 0);
        /* api.h documents the token strides as unused for VECTORIZED: pass 0 (a
         * larger garbage value is not tried: if the kernel used it, the reads would
         * leave the pool and could abort the whole run) */
        c = cfg_make(B, 2, lq2, lk2, 4, 2, 128, 16, SG); c.vec = 1; c.vec_ts = -1;
        add(c, 0);
        /* the page-16 kernel alone (vec16_set) on pages of 32, 256 and 1024:
         * tiles that start inside a page; fp16 d64 with 8 warps (four groups
         * per thread row step) */
        c = cfg_make(B, 2, lq2, lk2, 4, 2, 128, 256, SG); c.vec = 1; c.set = &vec16_set;
        add(c, 1);
        c = cfg_make(B, 2, lq2, lk2, 4, 2, 128, 32, VL); c.vec = 1; c.set = &vec16_set;
        add(c, 0);
        c = cfg_make(F, 2, lq2, lk2, 4, 2, 64, 1024, SG); c.vec = 1; c.set = &vec16_set;
        add(c, 0);
    }

    /* 17. FP8 (e4m3) KV, LINEAR pages, bf16 or e4m3 queries, bf16 output; the
     * descale modes and query types rotate through every group.
     * (a) page size x table x KV order (as group 1): partly filled last pages, a
     * single-key sequence, hdim 64/128/256. */
    {
        static const int pages[5] = { 1, 4, 16, 64, 1024 };
        static const int hd[3] = { 64, 128, 256 };
        static const int lq[3] = { 37, 1, 100 }, lk[3] = { 300, 1, 1500 };
        for (i = 0; i < 5; i++)
            for (j = 0; j < 2; j++)
                for (k = 0; k < 2; k++) {
                    const int n = 4 * i + 2 * j + k;
                    pf_cfg c = cfg_make8(3, lq, lk, 4, 2, hd[(i + 2 * j + k) % 3], pages[i], j ? VL : SG,
                                         (i + j + k) % 2, kvr[n % 3]);
                    c.hnd = k;
                    c.ds_pad = n % 4 == 1 ? -1 : n % 4;          /* padded, unpadded, head-major */
                    if (n % 6 == 4) { c.kds = 1.9f; c.vds = 0.37f; }
                    if (n % 5 == 3) c.qds = 0.0f;                /* q8 without q_descale */
                    add(c, n == 0 || n == 7 || n == 9 || n == 18);
                }
    }
    /* (b) shared pages (one descale per shared page): a shared prefix, and
     * sequences on exactly the same pages. */
    {
        static const int pages[3] = { 1, 16, 1024 };
        static const int lq1[4] = { 20, 33, 1, 64 }, lk1[4] = { 500, 700, 300, 1300 };
        static const int lq2[3] = { 50, 1, 77 }, lk2[3] = { 777, 777, 777 };
        for (i = 0; i < 3; i++) {
            pf_cfg c = cfg_make8(4, lq1, lk1, 4, 2, 128, pages[i], i % 2 ? VL : SG, i == 1, PP);
            c.share = 1;
            c.hnd = i == 2;
            add(c, i == 1);
            c = cfg_make8(3, lq2, lk2, 2, 2, 64, pages[i], i % 2 ? SG : VL, i != 1, i == 2 ? PP : PT);
            c.share = 2;
            add(c, 0);
        }
    }
    /* (c) lengths: 0 queries and/or 0 keys, single keys and queries, s_q > s_k
     * under causal bottom-right (top rows see nothing), keys = page and page + 1;
     * masked, unmasked and top-left. */
    {
        static const struct { int b; int q[MAXB]; int k[MAXB]; } g[] = {
            { 4, { 0, 17, 0, 5 }, { 0, 300, 7, 5 } },
            { 3, { 5, 0, 33 }, { 0, 0, 100 } },
            { 8, { 1, 1, 1, 1, 1, 1, 1, 1 }, { 1000, 1, 17, 255, 0, 64, 128, 3 } },
            { 2, { 300, 100 }, { 100, 255 } },
            { 4, { 16, 17, 1, 2 }, { 16, 17, 1024, 1025 } },
        };
        static const int pages[3] = { 1, 16, 1024 };
        for (j = 0; j < 5; j++)
            for (k = 0; k < 3; k++) {
                pf_cfg c = cfg_make8(g[j].b, g[j].q, g[j].k, 4, j % 2 ? 2 : 1, (j + k) % 3 == 0 ? 128 : 64, pages[k],
                                     (j + k) % 2 ? VL : SG, (j + k) % 2, kvr[(j + k) % 3]);
                if (k == 1) cfg_mask(&c, NO, -1, -1);
                if (k == 2) cfg_mask(&c, TL, -1, 0);
                c.hnd = j % 2;
                add(c, (j == 0 && k == 1) || (j == 3 && k == 0) || (j == 2 && k == 2));
            }
    }
    /* (d) long prefix, few new tokens (the prefill case): s_k >> s_q, causal. */
    {
        static const int lq[3] = { 64, 128, 1 }, lk[3] = { 2000, 1100, 3000 };
        pf_cfg c = cfg_make8(3, lq, lk, 8, 2, 128, 16, SG, 0, PP);
        add(c, 0);
        c = cfg_make8(3, lq, lk, 8, 2, 128, 1024, VL, 1, PT);
        c.hnd = 1;
        add(c, 0);
    }
    /* (e) sliding windows, both alignments, some hiding whole rows. */
    {
        static const struct { fmha_mask_type m; int wl, wr; } w[] = {
            { BR, 128, 0 }, { TL, 16, 16 }, { BR, 0, 0 }, { TL, 2, -1 }, { BR, -1, 32 }, { BR, 64, 64 },
        };
        static const int pages[3] = { 1, 16, 1024 };
        static const int lq[2] = { 100, 300 }, lk[2] = { 1100, 100 };
        for (j = 0; j < 6; j++) {
            pf_cfg c = cfg_make8(2, lq, lk, 4, 2, j % 2 ? 128 : 64, pages[j % 3], j % 2 ? SG : VL, j % 2, kvr[j % 3]);
            cfg_mask(&c, w[j].m, w[j].wl, w[j].wr);
            c.hnd = (j / 2) % 2;
            add(c, j == 0);
        }
    }
    /* (f) logits soft cap (the full-range keys saturate it), masked and not. */
    {
        static const float caps[3] = { 0.5f, 2.0f, 10.0f };
        static const int pages[3] = { 16, 1, 1024 };
        static const int lq[2] = { 129, 40 }, lk[2] = { 1200, 257 };
        for (j = 0; j < 3; j++)
            for (i = 0; i < 2; i++) {
                pf_cfg c = cfg_make8(2, lq, lk, 4, 2, j == 2 ? 256 : 64 * (i + 1), pages[j], i ? VL : SG, i,
                                     kvr[(i + j) % 3]);
                c.cap = caps[j];
                if (i) cfg_mask(&c, NO, -1, -1);
                add(c, j == 1 && i == 0);
            }
        {
            pf_cfg c = cfg_make8(2, lq, lk, 2, 2, 64, 16, SG, 1, PP);
            c.cap = 5.0f; c.r8k = R8_MID; c.scale = 1.0f;       /* the cap saturates */
            add(c, 0);
        }
    }
    /* (g) GQA ratios 1, 4, 8, 16 (per-page descales are per KV head). */
    {
        static const int ratio[4][2] = { { 2, 2 }, { 8, 2 }, { 8, 1 }, { 16, 1 } };
        static const int lq[2] = { 67, 3 }, lk[2] = { 900, 450 };
        for (j = 0; j < 4; j++) {
            pf_cfg c = cfg_make8(2, lq, lk, ratio[j][0], ratio[j][1], j % 2 ? 128 : 64, j % 2 ? 1024 : 16,
                                 j % 2 ? SG : VL, j >= 2, PP);
            c.hnd = j % 2;
            c.ds_pad = j == 3 ? -1 : 2 * j + 1;
            add(c, j == 2);
        }
    }
    /* (g2) bf16 queries under per-tensor descales or none: on sm_90 the wgmma
     * pipeline's f16 products of pages widened in shared memory (hdim 128 and
     * 256): sliding windows, a soft cap, GQA 16, sinks (subnormal codes: group (j)). */
    {
        static const int lq[3] = { 100, 1, 300 }, lk[3] = { 1100, 129, 300 };
        pf_cfg c = cfg_make8(3, lq, lk, 4, 2, 128, 16, SG, 0, PT);
        cfg_mask(&c, BR, 64, 0);
        add(c, 1);
        c = cfg_make8(3, lq, lk, 4, 2, 256, 1024, VL, 0, NS);
        cfg_mask(&c, TL, 16, 16);
        add(c, 0);
        c = cfg_make8(3, lq, lk, 4, 2, 128, 64, VL, 0, PT);
        c.cap = 2.0f;
        add(c, 1);
        c = cfg_make8(3, lq, lk, 16, 1, 128, 1, SG, 0, NS);
        add(c, 0);
        c = cfg_make8(3, lq, lk, 8, 2, 256, 4, VL, 0, PT);
        c.sinks = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
    }
    /* (h) head dims: the kernel ones and padded ones (96 on d128, 240 on d256, 48
     * and 16 on d64), with padded rows (16 elements: fp8 rows are 16-byte units). */
    {
        static const int hd[7] = { 64, 128, 256, 96, 48, 240, 16 };
        static const int pages[3] = { 1, 16, 1024 };
        static const int lq[2] = { 77, 20 }, lk[2] = { 333, 1030 };
        for (j = 0; j < 7; j++) {
            pf_cfg c = cfg_make8(2, lq, lk, 4, 2, hd[j], pages[j % 3], j % 2 ? VL : SG, j % 2 == 0, kvr[j % 3]);
            c.pad = j >= 3 ? 16 : 0;
            c.hnd = (j / 2) % 2;
            add(c, j == 3);
        }
    }
    /* (i) strides: padded rows and pages, both KV orders, LSE row padding,
     * padded and head-major descale arrays. */
    {
        static const int pages[3] = { 1, 16, 1024 };
        static const int lq[3] = { 33, 90, 1 }, lk[3] = { 500, 90, 1500 };
        for (i = 0; i < 3; i++) {
            pf_cfg c = cfg_make8(3, lq, lk, 4, 2, 64 + 64 * (i % 2), pages[i], i % 2 ? SG : VL, i != 1, PP);
            c.hnd = i % 2;
            c.pad = 16 + 16 * (i % 2);
            c.page_pad = 16 * (1 + i);
            c.lse_pad = 3;
            c.ds_pad = i == 2 ? -1 : 5;
            add(c, i == 0);
        }
    }
    /* (j) value ranges: subnormal-heavy V (relative error shows a wrong decode),
     * subnormal-heavy K and Q (a larger softmax scale keeps the scores of order 1),
     * full-range Q on small keys, mid ranges; descales both ways round. */
    {
        static const int lq[2] = { 100, 33 }, lk[2] = { 700, 300 };
        pf_cfg c;
        c = cfg_make8(2, lq, lk, 4, 2, 128, 16, SG, 0, PT); c.r8k = R8_MID; c.r8v = R8_LOW;
        add(c, 1);
        c = cfg_make8(2, lq, lk, 4, 2, 128, 16, VL, 0, PT); c.r8k = R8_LOW; c.scale = 4.0f; c.kds = 1.9f; c.vds = 0.37f;
        add(c, 0);
        c = cfg_make8(2, lq, lk, 4, 2, 64, 1, SG, 1, PP); c.r8k = R8_LOW; c.r8v = R8_LOW; c.scale = 4.0f;
        add(c, 1);
        c = cfg_make8(2, lq, lk, 4, 2, 256, 1024, VL, 0, NS); c.r8k = R8_MID; c.r8v = R8_MID;
        add(c, 0);
        c = cfg_make8(2, lq, lk, 4, 2, 128, 4, SG, 1, PT); c.r8q = R8_LOW; c.qds = 4.0f; c.r8k = R8_MID; c.scale = 4.0f;
        add(c, 0);
        c = cfg_make8(2, lq, lk, 4, 2, 128, 64, VL, 1, PT); c.r8q = R8_FULL; c.r8k = R8_LOW;
        add(c, 0);
        c = cfg_make8(2, lq, lk, 4, 2, 64, 16, SG, 1, NS); c.qds = 0.0f; c.r8k = R8_MID; c.r8v = R8_MID;
        add(c, 0);
    }
    /* (k) graph capture, no LSE, more query blocks than rows, in-order pages. */
    {
        static const int lq[3] = { 17, 0, 64 }, lk[3] = { 300, 7, 1100 };
        pf_cfg c = cfg_make8(3, lq, lk, 4, 2, 64, 16, SG, 1, PP);
        c.graph = 1;
        add(c, 1);
        c = cfg_make8(3, lq, lk, 4, 2, 128, 1024, VL, 0, PT);
        c.lse = 0; c.maxq_slack = 300; c.shuffle = 0; c.spare = 4;
        add(c, 0);
    }
    /* (l) the explicit set's fp8 rows: page 4 (per-row lookups) serves 4..64, page
     * 128 (one lookup per tile) serves 128..2048. */
    {
        static const int pages[4] = { 4, 16, 128, 2048 };
        static const int lq[2] = { 50, 130 }, lk[2] = { 2100, 300 };
        for (i = 0; i < 4; i++) {
            pf_cfg c = cfg_make8(2, lq, lk, 4, 2, i == 1 ? 96 : 128, pages[i], i % 2 ? VL : SG, i % 2, kvr[i % 3]);
            c.set = &page4_set;
            c.hnd = i == 2;
            add(c, i == 0 || i == 2);
        }
    }
    /* (m) page 16 with three stages (class 3 for pages 16..2048): sequences of
     * one tile and of fewer tiles than stages, a sliding window (first tile
     * past 0), bf16 and fp8 KV. */
    {
        static const int pages[4] = { 16, 32, 64, 1024 };
        static const int lq[3] = { 17, 1, 130 }, lk[3] = { 300, 7, 1100 };
        for (i = 0; i < 4; i++) {
            pf_cfg c = i % 2 ? cfg_make8(3, lq, lk, 4, 2, 64, pages[i], i / 2 ? SG : VL, 0, kvr[i / 2])
                             : cfg_make(B, 3, lq, lk, 4, 2, 64, pages[i], i / 2 ? VL : SG);
            c.set = &stages3_set;
            c.hnd = i == 2;
            if (i == 2) cfg_mask(&c, BR, 200, 0);
            add(c, i == 0);
        }
    }

    /* 18. pools over 4 GiB: every accessed page past the 4 GiB mark; page 16 takes
     * the 16-row-run path (LINEAR) or the per-row one (VECTORIZED), page 1024 the
     * per-tile one, page 8 (LINEAR, after the loop) the staged per-row offsets;
     * batch 1 and 4; bf16, fp16 and fp8 KV (bf16 and e4m3 queries); full run
     * only. */
    {
        static const int lq1[1] = { 200 }, lk1[1] = { 3000 };
        static const int lq4[4] = { 1, 64, 150, 17 }, lk4[4] = { 1500, 64, 2100, 1041 };
        static const int pages[2] = { 16, 1024 };
        for (i = 0; i < 2; i++) {
            pf_cfg c = cfg_make(B, 1, lq1, lk1, 8, 2, 128, pages[i], i ? VL : SG);
            c.large = 1;
            add(c, 0);
            c = cfg_make(i ? B : F, 4, lq4, lk4, 8, 2, 128, pages[i], i ? SG : VL);
            c.large = 1;
            c.hnd = 1;
            c.share = i;
            add(c, 0);
            c = cfg_make(i ? F : B, i ? 1 : 4, i ? lq1 : lq4, i ? lk1 : lk4, 8, 2, 128, pages[i], i ? VL : SG);
            c.large = 1;
            c.vec = 1;
            add(c, 0);
            /* fp8 KV: the page offsets past 4 GiB are byte offsets */
            c = cfg_make8(i ? 1 : 4, i ? lq1 : lq4, i ? lk1 : lk4, 8, 2, 128, pages[i], i ? VL : SG, i, i ? PT : PP);
            c.large = 1;
            c.hnd = !i;
            add(c, 0);
            /* bf16 queries under per-tensor descales: on sm_90 the wgmma
             * pipeline's pages widened in shared memory (cp.async at 16, TMA
             * at 1024) */
            c = cfg_make8(i ? 1 : 4, i ? lq1 : lq4, i ? lk1 : lk4, 8, 2, 128, pages[i], i ? SG : VL, 0, PT);
            c.large = 1;
            add(c, 0);
        }
        {
            pf_cfg c = cfg_make(B, 1, lq1, lk1, 8, 2, 128, 8, VL);
            c.large = 1;
            add(c, 0);
        }
    }

    /* 19. attention sinks: both pipelines (the default set's Hopper rows;
     * page4_set's explicit portable rows), both tables and layouts, an entry with no
     * keys (O = 0, LSE = sink), fp8 KV with e4m3 queries (the sink joins
     * after the last tile, as in the rounded-P reference). */
    {
        static const int lq[3] = { 130, 17, 40 }, lk[3] = { 700, 0, 300 };
        pf_cfg c = cfg_make(B, 3, lq, lk, 8, 2, 128, 16, SG);
        c.sinks = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 1);
        c = cfg_make(F, 3, lq, lk, 4, 4, 64, 64, VL);
        c.sinks = 1; c.vec = 1;
        add(c, 0);
        c = cfg_make8(3, lq, lk, 8, 2, 128, 16, VL, 1, PT);
        c.sinks = 1;
        cfg_mask(&c, BR, -1, 0);
        add(c, 0);
        c = cfg_make(B, 3, lq, lk, 8, 2, 128, 16, VL);
        c.sinks = 1;
        c.set = &page4_set;            /* explicit rows: the portable pipeline */
        cfg_mask(&c, BR, 64, 0);
        add(c, 1);
    }
}

/* ============================================================================
 * Pool, tables, reference
 * ========================================================================== */

/* The large pools, allocated on first use and kept for the large problems. */
static void *g_big_k, *g_big_v;
static int g_big_failed;

static void big_pool_free(void)
{
    tu_dfree(g_big_k); tu_dfree(g_big_v);
    g_big_k = g_big_v = NULL;
}

/* 0 when both pools exist; fills why otherwise (and keeps failing quietly). */
static int big_pool_get(char *why, size_t cap)
{
    cudaError_t e;
    if (g_big_k && g_big_v) return 0;
    if (g_big_failed) { snprintf(why, cap, "a previous allocation of the 4.5 GiB pools failed"); return -1; }
    e = cudaMalloc(&g_big_k, LARGE_POOL_BYTES);
    if (e == cudaSuccess) e = cudaMalloc(&g_big_v, LARGE_POOL_BYTES);
    if (e != cudaSuccess) {
        snprintf(why, cap, "cannot allocate two pools of %zu bytes: %s", (size_t)LARGE_POOL_BYTES, cudaGetErrorString(e));
        (void)cudaGetLastError();
        if (g_big_k) cudaFree(g_big_k);
        g_big_k = g_big_v = NULL;
        g_big_failed = 1;
        return -1;
    }
    return 0;
}

typedef struct pf_run {
    pp_spec spec;                /* the pool's description (from the problem)          */
    pp_pool pool;                /* pages, tables, images, gathered K/V, descales      */
    int32_t ssq[MAXB + 1], ssk[MAXB + 1];
    int tq, tk, maxq;
    int esq;                     /* bytes per Q element (1: e4m3)                      */
    int dq;                      /* padded Q/O row length                              */
    size_t n_q, n_o, n_lse;
    int64_t lse_head;
    /* host */
    float *qf, *ref_o, *ref_lse, *sinks, *d_sinks;
    unsigned char *qh;           /* Q as stored (16-bit or e4m3)                        */
    uint16_t *oh_all, *oh;
    double *sabs;                /* e4m3 kernels: per O row, the score bound of the LSE tolerance */
    uint32_t *lseh_all, *lseh;
    unsigned char *o_logical_all, *o_logical, *lse_logical_all, *lse_logical;
    /* device */
    void *dqp, *dout_all, *dout, *dk, *dv;
    float *dlse_all, *dlse;
    int32_t *dssq, *d_indptr, *d_indices, *d_last, *d_bt, *d_seqk;
    float *d_kds, *d_vds, *d_qds;   /* PER_TENSOR scalars or PER_PAGE arrays; q_descale */
    int big;                     /* dk/dv are the shared large pools                   */
} pf_run;

static void run_free(pf_run *r)
{
    pp_free(&r->pool);
    free(r->qf); free(r->ref_o); free(r->ref_lse); free(r->sabs); free(r->sinks); tu_dfree(r->d_sinks);
    free(r->qh); free(r->oh_all); free(r->lseh_all); free(r->o_logical_all); free(r->lse_logical_all);
    tu_dfree(r->dqp); tu_dfree(r->dout_all); tu_dfree(r->dlse_all); tu_dfree(r->dssq);
    tu_dfree(r->d_indptr); tu_dfree(r->d_indices); tu_dfree(r->d_last); tu_dfree(r->d_bt); tu_dfree(r->d_seqk);
    tu_dfree(r->d_kds); tu_dfree(r->d_vds); tu_dfree(r->d_qds);
    if (!r->big) { tu_dfree(r->dk); tu_dfree(r->dv); }
}

/* The pool of a problem (paged_pool.h): its layout, sharing and table
 * options, and a large problem's 4.5 GiB pool with every used page past 4 GiB. */
static void pool_spec(const pf_cfg *c, pp_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->name = c->name;
    s->dtype = c->dtype;
    s->batch = c->batch; s->hk = c->hk; s->d = c->d;
    s->lk = c->lk;
    s->page = c->page;
    s->hnd = c->hnd; s->vec = c->vec; s->vec_ts = c->vec_ts;
    s->pad = c->pad; s->page_pad = c->page_pad;
    s->shuffle = c->shuffle; s->share = c->share; s->spare = c->spare;
    s->indptr_base = c->indptr_base; s->bt_extra = c->bt_extra;
    if (c->large) { s->large_bytes = LARGE_POOL_BYTES; s->large_first = LARGE_POOL_FIRST; }
    s->amp = c->amp;
    s->r8k = c->r8k; s->r8v = c->r8v;
    s->kvs = c->kvs; s->kds = c->kds; s->vds = c->vds; s->ds_pad = c->ds_pad;
}

/* The softmax scale: the problem's, or 1/sqrt(d). Full-range fp8 keys (|k| up to
 * 448 x descale 4) get the default divided by 16 (64 with e4m3 queries, which
 * are larger than the bf16 ones): scores stay of order 10, not 1000, where an
 * fp32 LSE could no longer resolve the absolute 2e-3 tolerance. */
static float cfg_scale(const pf_cfg *c)
{
    float s = 1.0f / sqrtf((float)c->d);
    if (c->scale > 0) return c->scale;
    if (c->dtype == FMHA_DTYPE_FP8 && c->r8k == R8_FULL) s /= c->q8 ? 64.0f : 16.0f;
    return s;
}

/* The reference of an e4m3 (wgmma) kernel with key tiles of tile_n: P rounded
 * to e4m3 per tile after each key's V descale scaled it (fmha_ref_fwd_row_p8);
 * r->sabs gets each row's score bound for the LSE tolerance. 0, or -1 when
 * scratch allocation fails. */
static int ref_run_p8(const pf_cfg *c, pf_run *r, const fmha_ref_fwd *p, int tile_n)
{
    double *sc = (double *)malloc(sizeof(double) * ((size_t)(r->tk > 0 ? r->tk : 1) + c->d)), *orow, lse, sabs;
    int b, h, i, x;
    if (!sc) return -1;
    orow = sc + (r->tk > 0 ? r->tk : 1);
    r->sabs = (double *)tu_hmalloc(r->n_lse * sizeof(double));
    for (b = 0; b < c->batch; b++)
        for (h = 0; h < c->hq; h++)
            for (i = 0; i < c->lq[b]; i++) {
                float *o = p->o + fmha_ref_off_o(p, b, h, i);
                fmha_ref_fwd_row_p8(p, b, h, i, tile_n, sc, orow, &lse, &sabs);
                for (x = 0; x < c->d; x++) o[x] = (float)orow[x];
                p->lse[fmha_ref_off_lse(p, b, h, i)] = (float)lse;
                r->sabs[fmha_ref_off_lse(p, b, h, i)] = sabs;
            }
    free(sc);
    return 0;
}

static void make_ref(const pf_cfg *c, pf_run *r, fmha_ref_fwd *p)
{
    memset(p, 0, sizeof(*p));
    p->is_group_mode = 1;
    p->batch = c->batch; p->nhead_q = c->hq; p->nhead_k = c->hk;
    p->seqstart_q = r->ssq; p->seqstart_k = r->ssk;
    p->hdim_q = p->hdim_v = c->d;
    p->q = r->qf; p->k = r->pool.kf; p->v = r->pool.vf; p->o = r->ref_o; p->lse = r->ref_lse;
    p->stride_q = (int64_t)c->hq * r->dq; p->nhead_stride_q = r->dq;
    p->stride_k = p->stride_v = (int64_t)c->hk * c->d; p->nhead_stride_k = p->nhead_stride_v = c->d;
    p->stride_o = (int64_t)c->hq * r->dq; p->nhead_stride_o = r->dq;
    p->nhead_stride_lse = r->lse_head;
    p->scale = cfg_scale(c);
    p->logits_soft_cap = c->cap;
    p->mask_type = (int)c->mask;
    p->window_left = c->wl; p->window_right = c->wr;
    p->sinks = c->sinks ? r->sinks : NULL;
}

static void make_args(const pf_cfg *c, const pf_run *r, const fmha_ref_fwd *p, fmha_batch_prefill_args *a)
{
    memset(a, 0, sizeof(*a));
    a->q_dtype = c->dtype != FMHA_DTYPE_FP8 ? c->dtype : c->q8 ? FMHA_DTYPE_FP8 : FMHA_DTYPE_BF16;
    a->kv_dtype = c->dtype;
    a->batch = c->batch; a->nhead_q = c->hq; a->nhead_k = c->hk;
    a->max_seqlen_q = r->maxq + c->maxq_slack;
    a->hdim_q = a->hdim_v = c->d;
    a->q = r->dqp; a->o = r->dout;
    a->lse = c->lse ? r->dlse : NULL;
    a->seqstart_q = r->dssq;
    a->stride_q = p->stride_q; a->nhead_stride_q = p->nhead_stride_q;
    a->stride_o = p->stride_o; a->nhead_stride_o = p->nhead_stride_o;
    a->nhead_stride_lse = r->lse_head;
    a->k_pool = r->dk; a->v_pool = r->dv;
    a->num_total_pages = c->npages0 ? 0 : r->pool.n_total;
    a->page_size = c->page;
    a->kv_layout = c->vec ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
    a->page_stride_k = r->pool.ps_k; a->token_stride_k = r->pool.ts_k; a->nhead_stride_k = r->pool.hs_k;
    a->page_stride_v = r->pool.ps_v; a->token_stride_v = r->pool.ts_v; a->nhead_stride_v = r->pool.hs_v;
    a->page_table = (fmha_page_table)c->table;
    if (c->table == SG) {
        a->kv_indptr = r->d_indptr; a->kv_page_indices = r->d_indices; a->kv_last_page_lens = r->d_last;
    } else {
        a->block_table = r->d_bt; a->seqlen_k = r->d_seqk; a->block_table_stride = r->pool.bt_stride;
    }
    a->kv_scale = c->dtype == FMHA_DTYPE_FP8 ? c->kvs : FMHA_KV_SCALE_NONE;
    if (a->kv_scale == FMHA_KV_SCALE_PER_TENSOR) {
        a->k_descale = r->d_kds; a->v_descale = r->d_vds;
    } else if (a->kv_scale == FMHA_KV_SCALE_PER_PAGE) {
        a->k_page_descale = r->d_kds; a->v_page_descale = r->d_vds;
        a->descale_page_stride = r->pool.ds_page; a->descale_nhead_stride = r->pool.ds_head;
    }
    if (c->q8 && c->qds > 0) a->q_descale = r->d_qds;
    a->scale = p->scale;
    a->logits_soft_cap = c->cap;
    a->mask_type = c->mask;
    a->window_left = c->wl; a->window_right = c->wr;
    a->sinks = c->sinks ? r->d_sinks : NULL;
}

/* Smallest kernel hdim >= d among the set's prefill kernels of this dtype and KV
 * layout (0: none). */
static int expected_kernel_hdim(const fmha_kernel_set *set, fmha_dtype dt, fmha_kv_layout lay, int d)
{
    int i, best = 0, n = fmha_set_size(set);
    for (i = 0; i < n; i++) {
        const fmha_kernel_info *k = fmha_set_kernel(set, i);
        if (k && k->family == FMHA_FAMILY_BATCH_PREFILL && k->dtype == dt && k->kv_layout == lay && k->hdim >= d &&
            (!best || k->hdim < best))
            best = k->hdim;
    }
    return best;
}

/* The page class a problem of page size P must get: in the default set 1 below
 * 16, 16 below 64 and 64 from there (both layouts); in any set, the
 * largest kernel page size <= P among the kernels that differ from the chosen
 * one only in their page size. */
static int expected_page_class(const fmha_kernel_set *set, const fmha_kernel_info *chosen, int P)
{
    int i, best = -1, n = fmha_set_size(set);
    if (set == &prefill_set)
        return chosen->arch == FMHA_ARCH_SM90A ? 1 : P >= 64 ? 64 : P >= 16 ? 16 : 1;
    for (i = 0; i < n; i++) {
        const fmha_kernel_info *k = fmha_set_kernel(set, i);
        if (k && k->family == FMHA_FAMILY_BATCH_PREFILL && k->arch == chosen->arch && k->dtype == chosen->dtype &&
            k->hdim == chosen->hdim &&
            k->kv_layout == chosen->kv_layout && k->has_mask == chosen->has_mask && k->has_softcap == chosen->has_softcap && k->page_size <= P &&
            k->page_size > best)
            best = k->page_size;
    }
    return best;
}

static int cfg_masked(const pf_cfg *c) { return c->mask != FMHA_MASK_NONE && (c->wl >= 0 || c->wr >= 0); }

static const char *plan_str(const fmha_kernel_set *set, const fmha_batch_prefill_args *a)
{
    static char buf[768];
    fmha_fwd_plan plan;
    fmha_status st;
    memset(&plan, 0, sizeof(plan));
    st = fmha_batch_prefill_check(set, a, &plan);
    if (st != FMHA_OK || !plan.kernel)
        snprintf(buf, sizeof(buf), " [no plan: %s: %s]", fmha_status_str(st), fmha_last_error());
    else
        snprintf(buf, sizeof(buf), " [kernel=%s grid=%d,%d,%d block=%d pages=%d]", plan.kernel->name, plan.grid_x,
                 plan.grid_y, plan.grid_z, plan.block, a->num_total_pages);
    return buf;
}

/* LSE: absolute; the e4m3 wgmma kernels add 2^-11 of the row's score bound
 * (scale * sum |q k|): the tensor cores' fp8 products keep fewer accumulator
 * bits than fp32 (as test_fwd_fp8). */
static double tol_lse(const pf_cfg *c) { return c->cap > 0 ? 5e-3 : 2e-3; }

typedef struct pf_launch {
    const fmha_kernel_set *set;
    const fmha_batch_prefill_args *a;
} pf_launch;

/* Enqueues fmha_batch_prefill for tu_launch_graph: 0 on success, else fills why. */
static int enqueue_test_prefill(const void *ctx, cudaStream_t st, char *why, size_t cap)
{
    const pf_launch *l = (const pf_launch *)ctx;
    fmha_status s = fmha_batch_prefill(l->set, l->a, (void *)st);
    if (s == FMHA_OK) return 0;
    snprintf(why, cap, "fmha_batch_prefill under capture: %s: %s", fmha_status_str(s), fmha_last_error());
    return -1;
}

/* Launches through a captured graph. Returns 0 on success, else fills why. */
static int launch_graph(const fmha_kernel_set *set, const fmha_batch_prefill_args *a, cudaStream_t st, char *why, size_t cap)
{
    pf_launch l;
    l.set = set;
    l.a = a;
    return tu_launch_graph(enqueue_test_prefill, &l, st, why, cap);
}

/* ============================================================================
 * One problem
 * ========================================================================== */
static void run_config(const pf_cfg *c, cudaStream_t stream, uint64_t seed)
{
    const fmha_kernel_set *set = c->set ? c->set : &prefill_set;
    const int P = c->page, kv8 = c->dtype == FMHA_DTYPE_FP8;
    const int is_bf16 = c->dtype != FMHA_DTYPE_FP16;       /* the output: bf16 for fp8 KV */
    const fmha_dtype qdt = !kv8 ? c->dtype : c->q8 ? FMHA_DTYPE_FP8 : FMHA_DTYPE_BF16;
    const float qds = c->q8 && c->qds > 0 ? c->qds : 1.0f;
    pf_run r;
    fmha_ref_fwd p;
    fmha_batch_prefill_args a;
    fmha_fwd_plan plan;
    fmha_ref_rng rng = fmha_ref_rng_make(seed);
    fmha_ref_err err;
    fmha_status st;
    char why[1024] = "";
    size_t i, n_unwritten = 0, n_nan = 0, n_masked_bad = 0, n_pad = 0, n_lse_bad = 0, n_lse_pad = 0;
    double rel;
    float amp;
    int b, h, row, x, want_hd, want_pg, want_fast, p8 = 0;

    tu_current = c->name;
    memset(&r, 0, sizeof(r));
    r.esq = qdt == FMHA_DTYPE_FP8 ? 1 : 2;

    /* lengths */
    for (b = 0; b < c->batch; b++) {
        r.ssq[b] = r.tq; r.ssk[b] = r.tk;
        r.tq += c->lq[b]; r.tk += c->lk[b];
        if (c->lq[b] > r.maxq) r.maxq = c->lq[b];
    }
    r.ssq[c->batch] = r.tq; r.ssk[c->batch] = r.tk;

    /* layouts: Q/O [tq, hq, d + pad]; pool pages nhd or hnd, V padded differently */
    r.dq = c->d + c->pad;
    pool_spec(c, &r.spec);
    pp_layout(&r.spec, &r.pool);
    if (c->large && r.pool.ps_k != r.pool.ps_v) { tu_fail(c->name, "large pool problems need equal K and V page strides"); goto done; }
    r.n_q = r.n_o = (size_t)(r.tq > 0 ? r.tq : 1) * c->hq * r.dq;
    r.lse_head = (r.tq > 0 ? r.tq : 1) + c->lse_pad;
    r.n_lse = (size_t)c->hq * (size_t)r.lse_head;

    /* pages, tables, page images, descales, the gathered K/V (paged_pool.h) */
    pp_build(&r.spec, &r.pool, &rng);

    /* Q (NaN in its padding), reference outputs, host copies of O/LSE */
    r.qf = (float *)tu_hmalloc(r.n_q * 4);
    r.qh = (unsigned char *)tu_hmalloc(r.n_q * (size_t)r.esq);
    img_poison(r.qh, r.esq, r.n_q);
    for (i = 0; i < r.n_q; i++) r.qf[i] = NAN;
    for (row = 0; row < r.tq; row++)
        for (h = 0; h < c->hq; h++)
            for (x = 0; x < c->d; x++) {
                size_t o = ((size_t)row * c->hq + h) * r.dq + x;
                img_put(r.qh, r.esq, (int64_t)o, rand_elem(&rng, qdt, c->amp, c->r8q));
                r.qf[o] = elem_f32(img_get(r.qh, r.esq, (int64_t)o), qdt) * qds;   /* dequantised */
            }
    r.ref_o = (float *)tu_hmalloc(r.n_o * 4);
    r.ref_lse = (float *)tu_hmalloc(r.n_lse * 4);
    for (i = 0; i < r.n_o; i++) r.ref_o[i] = NAN;
    for (i = 0; i < r.n_lse; i++) r.ref_lse[i] = NAN;
    r.oh_all = (uint16_t *)tu_hmalloc((r.n_o + 2 * GUARD) * 2);
    r.lseh_all = (uint32_t *)tu_hmalloc((r.n_lse + 2 * GUARD) * 4);
    r.o_logical_all = (unsigned char *)calloc(r.n_o + 2 * GUARD, 1);
    r.lse_logical_all = (unsigned char *)calloc(r.n_lse + 2 * GUARD, 1);
    if (!r.o_logical_all || !r.lse_logical_all) { tu_fail(c->name, "out of host memory"); tu_finish(); }
    r.oh = r.oh_all + GUARD; r.lseh = r.lseh_all + GUARD;
    r.o_logical = r.o_logical_all + GUARD; r.lse_logical = r.lse_logical_all + GUARD;

    /* device: Q, O/LSE inside guard zones, tables, pool */
    r.dqp = tu_dmalloc(r.n_q * (size_t)r.esq);
    r.dout_all = tu_dmalloc((r.n_o + 2 * GUARD) * 2);
    r.dlse_all = (float *)tu_dmalloc((r.n_lse + 2 * GUARD) * 4);
    r.dout = (uint16_t *)r.dout_all + GUARD;
    r.dlse = r.dlse_all + GUARD;
    r.dssq = (int32_t *)tu_dmalloc(sizeof(r.ssq));
    r.d_indptr = (int32_t *)tu_dmalloc(sizeof(int32_t) * (size_t)(c->batch + 1));
    r.d_indices = (int32_t *)tu_dmalloc(sizeof(int32_t) * r.pool.n_indices);
    r.d_last = (int32_t *)tu_dmalloc(sizeof(int32_t) * (size_t)(c->batch + 1));
    r.d_bt = (int32_t *)tu_dmalloc(sizeof(int32_t) * r.pool.n_bt);
    r.d_seqk = (int32_t *)tu_dmalloc(sizeof(int32_t) * (size_t)(c->batch + 1));
    tu_upload(r.dqp, r.qh, r.n_q * (size_t)r.esq);
    if (kv8 && c->kvs == FMHA_KV_SCALE_PER_TENSOR) {
        r.d_kds = (float *)tu_dmalloc(4); r.d_vds = (float *)tu_dmalloc(4);
        tu_upload(r.d_kds, &c->kds, 4); tu_upload(r.d_vds, &c->vds, 4);
    } else if (kv8 && c->kvs == FMHA_KV_SCALE_PER_PAGE) {
        r.d_kds = (float *)tu_dmalloc(r.pool.n_ds * 4); r.d_vds = (float *)tu_dmalloc(r.pool.n_ds * 4);
        tu_upload(r.d_kds, r.pool.h_kds, r.pool.n_ds * 4); tu_upload(r.d_vds, r.pool.h_vds, r.pool.n_ds * 4);
    }
    if (c->q8 && c->qds > 0) {
        r.d_qds = (float *)tu_dmalloc(4);
        tu_upload(r.d_qds, &c->qds, 4);
    }
    tu_upload(r.dssq, r.ssq, sizeof(int32_t) * (size_t)(c->batch + 1));
    tu_upload(r.d_indptr, r.pool.h_indptr, sizeof(int32_t) * (size_t)(c->batch + 1));
    tu_upload(r.d_indices, r.pool.h_indices, sizeof(int32_t) * r.pool.n_indices);
    tu_upload(r.d_last, r.pool.h_last, sizeof(int32_t) * (size_t)c->batch);
    tu_upload(r.d_bt, r.pool.h_bt, sizeof(int32_t) * r.pool.n_bt);
    tu_upload(r.d_seqk, r.pool.h_seqk, sizeof(int32_t) * (size_t)c->batch);
    tu_poison16(r.dout_all, r.n_o + 2 * GUARD, TU_POISON_OUT16);
    tu_poison32(r.dlse_all, r.n_lse + 2 * GUARD, TU_POISON_LSE);

    if (c->large) {
        /* NaN everywhere (0xFFFF, e4m3 0x7F), then the used pages; a truncated
         * 32-bit page offset lands on NaN below 4 GiB */
        if (big_pool_get(why, sizeof(why)) != 0) {
            printf("SKIP %s: %s\n", c->name, why);
            fflush(stdout);
            goto done;
        }
        r.big = 1;
        r.dk = g_big_k; r.dv = g_big_v;
        TU_CUDA(cudaMemset(r.dk, kv8 ? FP8_POISON : 0xFF, LARGE_POOL_BYTES));
        TU_CUDA(cudaMemset(r.dv, kv8 ? FP8_POISON : 0xFF, LARGE_POOL_BYTES));
        for (i = 0; i < (size_t)r.pool.n_logical; i++) {
            const size_t kb = (size_t)r.pool.ps_k * r.pool.es, vb = (size_t)r.pool.ps_v * r.pool.es;
            tu_upload((unsigned char *)r.dk + (size_t)r.pool.phys[i] * kb, r.pool.kimg + i * kb, kb);
            tu_upload((unsigned char *)r.dv + (size_t)r.pool.phys[i] * vb, r.pool.vimg + i * vb, vb);
        }
    } else {
        int which;
        if ((r.pool.n_kpool + r.pool.n_vpool) * r.pool.es > SMALL_POOL_BYTES) { tu_fail(c->name, "pool too big for a small problem"); goto done; }
        r.dk = tu_dmalloc(r.pool.n_kpool * r.pool.es);
        r.dv = tu_dmalloc(r.pool.n_vpool * r.pool.es);
        for (which = 0; which < 2; which++) {
            unsigned char *pool = pp_pool_image(&r.pool, which);
            tu_upload(which ? r.dv : r.dk, pool, (which ? r.pool.n_vpool : r.pool.n_kpool) * r.pool.es);
            free(pool);
        }
    }

    if (c->sinks) {
        r.sinks = (float *)tu_hmalloc((size_t)c->hq * 4);
        r.d_sinks = (float *)tu_dmalloc((size_t)c->hq * 4);
        for (h = 0; h < c->hq; h++) r.sinks[h] = fmha_ref_rng_uniform(&rng, -2.0f, 3.0f);
        tu_upload(r.d_sinks, r.sinks, (size_t)c->hq * 4);
        TU_CUDA(cudaDeviceSynchronize());
    }
    make_ref(c, &r, &p);
    make_args(c, &r, &p, &a);

    /* selection: right dtype, smallest fitting hdim, features, page class */
    memset(&plan, 0, sizeof(plan));
    st = fmha_batch_prefill_check(set, &a, &plan);
    if (st != FMHA_OK || !plan.kernel) {
        tu_fail(c->name, "fmha_batch_prefill_check: %s: %s", fmha_status_str(st), fmha_last_error());
        goto done;
    }
    want_hd = expected_kernel_hdim(set, c->dtype, a.kv_layout, c->d);
    want_pg = expected_page_class(set, plan.kernel, P);
    want_fast = set == &prefill_set ? expect_wgmma(c->dtype, c->q8, c->kvs == FMHA_KV_SCALE_PER_PAGE, c->d) : plan.kernel->arch == FMHA_ARCH_SM90A;
    if (plan.kernel->family != FMHA_FAMILY_BATCH_PREFILL || plan.kernel->dtype != c->dtype ||
        plan.kernel->kv_layout != a.kv_layout ||
        plan.kernel->hdim != want_hd || plan.kernel->has_softcap != (c->cap > 0) ||
        (cfg_masked(c) && !plan.kernel->has_mask) || plan.kernel->page_size != want_pg ||
        (plan.kernel->arch == FMHA_ARCH_SM90A) != want_fast || !plan.why ||
        strncmp(plan.why, want_fast ? "fast pipeline" : "portable pipeline", want_fast ? 13 : 17) != 0) {
        tu_fail(c->name, "selected %s (page class %d; %s), want dtype %s %s hdim %d softcap %d mask %d page class %d "
                "on the %s pipeline", plan.kernel->name, plan.kernel->page_size, plan.why ? plan.why : "no why",
                dtype_str(c->dtype), c->vec ? "vectorized" : "linear", want_hd, c->cap > 0, cfg_masked(c), want_pg,
                want_fast ? "wgmma" : "portable");
        goto done;
    }
    if (plan.grid_x != (a.max_seqlen_q + plan.kernel->tile_m - 1) / plan.kernel->tile_m || plan.grid_y != c->hq ||
        plan.grid_z != c->batch) {
        tu_fail(c->name, "plan grid %d,%d,%d, want %d,%d,%d", plan.grid_x, plan.grid_y, plan.grid_z,
                (a.max_seqlen_q + plan.kernel->tile_m - 1) / plan.kernel->tile_m, c->hq, c->batch);
        goto done;
    }

    /* uploads from pageable memory may still be in flight for a non-blocking stream */
    TU_CUDA(cudaDeviceSynchronize());
    {   /* the tables against the pool's page count (given here even where the launch leaves it 0) */
        fmha_batch_prefill_args ac = a;
        ac.num_total_pages = r.pool.n_total;
        st = fmha_batch_prefill_check_pages(&ac, (void *)stream);
    }
    if (st != FMHA_OK) {
        tu_fail(c->name, "fmha_batch_prefill_check_pages rejects valid tables: %s: %s", fmha_status_str(st),
                fmha_last_error());
        goto done;
    }
    if (c->graph) {
        st = fmha_batch_prefill(set, &a, (void *)stream);   /* eager warm-up, then capture */
        if (st != FMHA_OK) {
            tu_fail(c->name, "fmha_batch_prefill: %s: %s%s", fmha_status_str(st), fmha_last_error(), plan_str(set, &a));
            goto done;
        }
        TU_CUDA(cudaStreamSynchronize(stream));
        tu_poison16(r.dout_all, r.n_o + 2 * GUARD, TU_POISON_OUT16);
        tu_poison32(r.dlse_all, r.n_lse + 2 * GUARD, TU_POISON_LSE);
        TU_CUDA(cudaDeviceSynchronize());
        if (launch_graph(set, &a, stream, why, sizeof(why)) != 0) {
            tu_fail(c->name, "%s%s", why, plan_str(set, &a));
            goto done;
        }
    } else {
        st = fmha_batch_prefill(set, &a, (void *)stream);
        if (st != FMHA_OK) {
            tu_fail(c->name, "fmha_batch_prefill: %s: %s%s", fmha_status_str(st), fmha_last_error(), plan_str(set, &a));
            goto done;
        }
        TU_CUDA(cudaGetLastError());
        TU_CUDA(cudaStreamSynchronize(stream));
    }
    tu_download(r.oh_all, r.dout_all, (r.n_o + 2 * GUARD) * 2);
    tu_download(r.lseh_all, r.dlse_all, (r.n_lse + 2 * GUARD) * 4);

    /* e4m3 products (e4m3 queries on the wgmma pipeline): the reference
     * rounds P as they do (per-page V descales included); 16-bit, fp8-KV
     * portable kernels and bf16 queries on the wgmma pipeline (f16
     * products of the widened pages): the exact one */
    p8 = kv8 && c->q8 && plan.kernel->arch == FMHA_ARCH_SM90A;
    if (p8 && c->kvs == FMHA_KV_SCALE_PER_PAGE) p.p8_vscale = r.pool.vsk;
    if ((p8 ? ref_run_p8(c, &r, &p, plan.kernel->tile_n) : fmha_ref_fwd_run(&p)) != 0) {
        tu_fail(c->name, "reference: out of memory");
        tu_finish();
    }

    /* every logical element */
    fmha_ref_err_init(&err);
    for (b = 0; b < c->batch; b++)
        for (h = 0; h < c->hq; h++)
            for (row = 0; row < c->lq[b]; row++) {
                int64_t oo = fmha_ref_off_o(&p, b, h, row), lo = fmha_ref_off_lse(&p, b, h, row);
                float rl = r.ref_lse[lo];
                int masked = isinf(rl) && rl < 0;
                for (x = 0; x < c->d; x++) {
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
                            snprintf(why, sizeof(why), "fully masked row b%d h%d row %d: O[%d] = %g, want 0", b, h, row,
                                     x, g);
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
                            snprintf(why, sizeof(why), "fully masked row b%d h%d row %d: LSE = %g, want -inf", b, h,
                                     row, g);
                    } else if (!isfinite(g) ||
                               fabs((double)g - rl) > tol_lse(c) + (p8 ? ldexp(r.sabs[lo], -11) : 0.0)) {
                        if (!n_lse_bad++ && !why[0])
                            snprintf(why, sizeof(why), "LSE at b%d h%d row %d = %.7g, want %.7g", b, h, row, g, rl);
                    }
                }
            }
    /* nothing else may change: O/LSE padding and the guard zones */
    for (i = 0; i < r.n_o + 2 * GUARD; i++)
        if (!r.o_logical_all[i] && r.oh_all[i] != TU_POISON_OUT16 && !n_pad++ && !why[0])
            snprintf(why, sizeof(why), "O element %lld (outside the logical rows) overwritten (0x%04x)",
                     (long long)i - GUARD, r.oh_all[i]);
    for (i = 0; i < r.n_lse + 2 * GUARD; i++)
        if (!r.lse_logical_all[i] && r.lseh_all[i] != TU_POISON_LSE && !n_lse_pad++ && !why[0])
            snprintf(why, sizeof(why), "LSE element %lld (outside the logical rows) overwritten (%g)",
                     (long long)i - GUARD, fmha_ref_bits_f32(r.lseh_all[i]));
    /* inputs are read-only (the whole small pool; the used pages of a large one) */
    if (!why[0] && !same_bytes_on_device(r.dqp, r.qh, r.n_q * r.esq)) snprintf(why, sizeof(why), "Q changed");
    if (!why[0] && !c->large) {
        const size_t kb = (size_t)r.pool.ps_k * r.pool.es, vb = (size_t)r.pool.ps_v * r.pool.es;
        for (i = 0; i < (size_t)r.pool.n_logical && !why[0]; i++)
            if (!same_bytes_on_device((unsigned char *)r.dk + (size_t)r.pool.phys[i] * kb, r.pool.kimg + i * kb, kb) ||
                !same_bytes_on_device((unsigned char *)r.dv + (size_t)r.pool.phys[i] * vb, r.pool.vimg + i * vb, vb))
                snprintf(why, sizeof(why), "page %d of the K or V pool changed", r.pool.phys[i]);
    }

    /* bf16 tolerances for fp8 KV (bf16 output); the max-abs bound scales with the
     * amplitude of V: the inputs' for fp16/bf16, the largest dequantised |V| for fp8 */
    amp = kv8 ? r.pool.vamp : c->amp;
    rel = fmha_ref_err_rel_l2(&err);
    if (!why[0] && !(rel <= tu_tol_rel_l2(is_bf16)))
        snprintf(why, sizeof(why), "rel-L2 %.3g > %.0e (max abs %.3g)", rel, tu_tol_rel_l2(is_bf16), err.max_abs);
    if (!why[0] && !(err.max_abs <= tu_tol_max_abs(is_bf16, amp)))
        snprintf(why, sizeof(why), "max abs error %.3g > %.3g (rel-L2 %.3g)", err.max_abs, tu_tol_max_abs(is_bf16, amp),
                 rel);
    if (why[0])
        tu_fail(c->name, "%s; counts: unwritten %zu nan %zu masked %zu pad %zu lse %zu lsepad %zu%s", why, n_unwritten,
                n_nan, n_masked_bad, n_pad, n_lse_bad, n_lse_pad, plan_str(set, &a));
    else
        tu_pass(c->name);
done:
    run_free(&r);
    tu_current = "";
}

/* ============================================================================
 * API contract: selection of page classes, bad input
 * ========================================================================== */

/* A valid small problem: batch 2, 2 query heads on 1 KV head, d 64, page 16,
 * 17 + 5 queries on 40 + 16 keys in 3 + 1 of 8 pool pages. Both tables. f8: the
 * same with bf16 queries and e4m3 K/V pools (PER_TENSOR descales). */
typedef struct pbad_env {
    fmha_batch_prefill_args sg, vl, f8;
    void *dq, *dout, *dk, *dv;
    void *dq8, *dk8, *dv8;       /* e4m3 Q and pools                                   */
    float *dds;                  /* descales: [0] K, [1] V, [2] Q; per-page K at 8, V at
                                    48 ([8 pages][stride 4], one KV head)              */
    float *dlse;
    int32_t *dssq, *dindptr, *dindices, *dlast, *dbt, *dseqk, *dscratch;
    int32_t indptr[3], indices[4], last[2], bt[8], seqk[2];
    size_t n_o, n_lse;
} pbad_env;

static void pbad_make(pbad_env *e)
{
    const int d = 256, rows = 22, pages = 8, P = 16;   /* buffers sized for d 256 */
    const int32_t ssq[3] = { 0, 17, 22 };
    const int32_t indptr[3] = { 0, 3, 4 }, indices[4] = { 5, 2, 7, 0 }, last[2] = { 8, 16 };
    const int32_t bt[8] = { 5, 2, 7, -1, 0, -1, INT32_MAX, -1 }, seqk[2] = { 40, 16 };
    size_t nq = (size_t)rows * 2 * d, npool = (size_t)pages * P * d, i;
    uint16_t *host;
    fmha_ref_rng rng = fmha_ref_rng_make(77);
    memset(e, 0, sizeof(*e));
    memcpy(e->indptr, indptr, sizeof(indptr)); memcpy(e->indices, indices, sizeof(indices));
    memcpy(e->last, last, sizeof(last)); memcpy(e->bt, bt, sizeof(bt)); memcpy(e->seqk, seqk, sizeof(seqk));
    e->n_o = nq;
    e->n_lse = (size_t)2 * rows;
    e->dq = tu_dmalloc(nq * 2); e->dout = tu_dmalloc(nq * 2);
    e->dk = tu_dmalloc(npool * 2); e->dv = tu_dmalloc(npool * 2);
    e->dlse = (float *)tu_dmalloc(e->n_lse * 4);
    e->dssq = (int32_t *)tu_dmalloc(sizeof(ssq));
    e->dindptr = (int32_t *)tu_dmalloc(sizeof(indptr)); e->dindices = (int32_t *)tu_dmalloc(sizeof(indices));
    e->dlast = (int32_t *)tu_dmalloc(sizeof(last)); e->dbt = (int32_t *)tu_dmalloc(sizeof(bt));
    e->dseqk = (int32_t *)tu_dmalloc(sizeof(seqk));
    e->dscratch = (int32_t *)tu_dmalloc(256);
    host = (uint16_t *)tu_hmalloc((nq > npool ? nq : npool) * 2);
    for (i = 0; i < (nq > npool ? nq : npool); i++) host[i] = fmha_ref_f32_to_f16(fmha_ref_rng_input(&rng, 1.0f));
    tu_upload(e->dq, host, nq * 2);
    tu_upload(e->dk, host, npool * 2);
    tu_upload(e->dv, host, npool * 2);
    free(host);
    {   /* e4m3 Q and pools (valid codes everywhere), descales */
        unsigned char *h8 = (unsigned char *)tu_hmalloc(nq > npool ? nq : npool);
        float ds[128];
        for (i = 0; i < (nq > npool ? nq : npool); i++) h8[i] = fmha_ref_rng_e4m3(&rng, 5, 9);
        e->dq8 = tu_dmalloc(nq); e->dk8 = tu_dmalloc(npool); e->dv8 = tu_dmalloc(npool);
        tu_upload(e->dq8, h8, nq);
        tu_upload(e->dk8, h8, npool);
        tu_upload(e->dv8, h8, npool);
        free(h8);
        for (i = 0; i < 128; i++) ds[i] = 0.5f + 0.01f * (float)i;
        ds[0] = 0.37f; ds[1] = 1.9f; ds[2] = 0.6f;
        e->dds = (float *)tu_dmalloc(sizeof(ds));
        tu_upload(e->dds, ds, sizeof(ds));
    }
    tu_upload(e->dssq, ssq, sizeof(ssq));
    tu_upload(e->dindptr, indptr, sizeof(indptr)); tu_upload(e->dindices, indices, sizeof(indices));
    tu_upload(e->dlast, last, sizeof(last)); tu_upload(e->dbt, bt, sizeof(bt)); tu_upload(e->dseqk, seqk, sizeof(seqk));
    TU_CUDA(cudaDeviceSynchronize());

    {
        fmha_batch_prefill_args *a = &e->sg;
        memset(a, 0, sizeof(*a));
        a->q_dtype = a->kv_dtype = FMHA_DTYPE_FP16;
        a->batch = 2; a->nhead_q = 2; a->nhead_k = 1; a->max_seqlen_q = 17;
        a->hdim_q = a->hdim_v = 64;
        a->q = e->dq; a->o = e->dout; a->lse = e->dlse; a->seqstart_q = e->dssq;
        a->stride_q = a->stride_o = 2 * 64; a->nhead_stride_q = a->nhead_stride_o = 64;
        a->nhead_stride_lse = rows;
        a->k_pool = e->dk; a->v_pool = e->dv;
        a->num_total_pages = pages; a->page_size = P; a->kv_layout = FMHA_KV_LAYOUT_LINEAR;
        a->page_stride_k = a->page_stride_v = (int64_t)P * 64;
        a->token_stride_k = a->token_stride_v = 64;
        a->nhead_stride_k = a->nhead_stride_v = 64;
        a->page_table = FMHA_PAGE_TABLE_SGLANG_1D;
        a->kv_indptr = e->dindptr; a->kv_page_indices = e->dindices; a->kv_last_page_lens = e->dlast;
        a->kv_scale = FMHA_KV_SCALE_NONE;
        a->scale = 0.125f;
        a->mask_type = FMHA_MASK_BOTTOM_RIGHT; a->window_left = -1; a->window_right = 0;
    }
    e->vl = e->sg;
    e->vl.page_table = FMHA_PAGE_TABLE_VLLM_2D;
    e->vl.kv_indptr = e->vl.kv_page_indices = e->vl.kv_last_page_lens = NULL;
    e->vl.block_table = e->dbt; e->vl.seqlen_k = e->dseqk; e->vl.block_table_stride = 4;
    e->f8 = e->sg;
    e->f8.q_dtype = FMHA_DTYPE_BF16; e->f8.kv_dtype = FMHA_DTYPE_FP8;
    e->f8.k_pool = e->dk8; e->f8.v_pool = e->dv8;
    e->f8.kv_scale = FMHA_KV_SCALE_PER_TENSOR; e->f8.k_descale = e->dds; e->f8.v_descale = e->dds + 1;
}

static void pbad_free(pbad_env *e)
{
    tu_dfree(e->dq); tu_dfree(e->dout); tu_dfree(e->dk); tu_dfree(e->dv); tu_dfree(e->dlse); tu_dfree(e->dssq);
    tu_dfree(e->dindptr); tu_dfree(e->dindices); tu_dfree(e->dlast); tu_dfree(e->dbt); tu_dfree(e->dseqk);
    tu_dfree(e->dscratch);
    tu_dfree(e->dq8); tu_dfree(e->dk8); tu_dfree(e->dv8); tu_dfree(e->dds);
}

/* Copies n table entries to the scratch table and returns it. */
static const int32_t *scratch_table(pbad_env *e, const int32_t *h, int n)
{
    tu_upload(e->dscratch, h, sizeof(int32_t) * (size_t)n);
    TU_CUDA(cudaDeviceSynchronize());
    return e->dscratch;
}

/* O and LSE still hold their poison. */
static int pbad_untouched(pbad_env *e, size_t *bad_o, size_t *bad_l)
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

static void pbad_poison(pbad_env *e)
{
    tu_poison16(e->dout, e->n_o, TU_POISON_OUT16);
    tu_poison32(e->dlse, e->n_lse, TU_POISON_LSE);
    TU_CUDA(cudaDeviceSynchronize());
}

/* Expects `want` from fmha_batch_prefill_check and fmha_batch_prefill, a message
 * for an error (containing msg_must_contain when given), and untouched O/LSE for an
 * error or when `untouched` (a valid call with nothing to compute). */
static void expect_status(const char *name, const fmha_kernel_set *set, const fmha_batch_prefill_args *a,
                          pbad_env *e, fmha_status want, const char *msg_must_contain, int untouched,
                          cudaStream_t stream)
{
    fmha_fwd_plan plan;
    fmha_status s1, s2;
    char msg[512];
    size_t bad_o = 0, bad_l = 0;
    int clean;
    if (!tu_selected(name)) return;
    tu_current = name;
    pbad_poison(e);
    memset(&plan, 0, sizeof(plan));
    s1 = fmha_batch_prefill_check(set, a, &plan);
    s2 = fmha_batch_prefill(set, a, (void *)stream);
    snprintf(msg, sizeof(msg), "%s", fmha_last_error() ? fmha_last_error() : "");
    TU_CUDA(cudaGetLastError());
    TU_CUDA(cudaStreamSynchronize(stream));
    clean = pbad_untouched(e, &bad_o, &bad_l);
    if (s1 != want || s2 != want)
        tu_fail(name, "fmha_batch_prefill_check -> %s, fmha_batch_prefill -> %s, want %s (message: \"%s\")",
                fmha_status_str(s1), fmha_status_str(s2), fmha_status_str(want), msg);
    else if (want != FMHA_OK && !msg[0])
        tu_fail(name, "%s without a message in fmha_last_error()", fmha_status_str(want));
    else if ((want != FMHA_OK || untouched) && !clean)
        tu_fail(name, "returned %s but wrote %zu O and %zu LSE elements", fmha_status_str(want), bad_o, bad_l);
    else if (want != FMHA_OK && msg_must_contain && !strstr(msg, msg_must_contain))
        tu_fail(name, "message \"%s\" does not mention \"%s\"", msg, msg_must_contain);
    else
        tu_pass(name);
    tu_current = "";
}

/* Expects `want` from fmha_batch_prefill_check_pages (which launches nothing). */
static void expect_pages(const char *name, const fmha_batch_prefill_args *a, pbad_env *e, fmha_status want,
                         const char *msg_must_contain, cudaStream_t stream)
{
    fmha_status s;
    char msg[512];
    size_t bad_o = 0, bad_l = 0;
    if (!tu_selected(name)) return;
    tu_current = name;
    pbad_poison(e);
    s = fmha_batch_prefill_check_pages(a, (void *)stream);
    snprintf(msg, sizeof(msg), "%s", fmha_last_error() ? fmha_last_error() : "");
    TU_CUDA(cudaGetLastError());
    TU_CUDA(cudaStreamSynchronize(stream));
    if (s != want)
        tu_fail(name, "fmha_batch_prefill_check_pages -> %s, want %s (message: \"%s\")", fmha_status_str(s),
                fmha_status_str(want), msg);
    else if (want != FMHA_OK && !msg[0])
        tu_fail(name, "%s without a message", fmha_status_str(want));
    else if (want != FMHA_OK && msg_must_contain && !strstr(msg, msg_must_contain))
        tu_fail(name, "message \"%s\" does not mention \"%s\"", msg, msg_must_contain);
    else if (!pbad_untouched(e, &bad_o, &bad_l))
        tu_fail(name, "O/LSE changed (%zu, %zu elements)", bad_o, bad_l);
    else
        tu_pass(name);
    tu_current = "";
}

static void test_bad_inputs(cudaStream_t stream)
{
    pbad_env e;
    fmha_batch_prefill_args a;
    int32_t t[16];
    pbad_make(&e);

    /* valid baselines */
    expect_status("prefill_bad_base_sglang_is_valid", &prefill_set, &e.sg, &e, FMHA_OK, NULL, 0, stream);
    expect_status("prefill_bad_base_vllm_is_valid", &prefill_set, &e.vl, &e, FMHA_OK, NULL, 0, stream);
    expect_pages("check_pages_sglang_valid", &e.sg, &e, FMHA_OK, NULL, stream);
    expect_pages("check_pages_vllm_valid_with_garbage_past_last_page", &e.vl, &e, FMHA_OK, NULL, stream);

    /* fmha_batch_prefill_check_pages: bad indices, bad last-page lengths */
    memcpy(t, e.indices, sizeof(e.indices)); t[3] = 8;              /* seq 1, = num_total_pages */
    a = e.sg; a.kv_page_indices = scratch_table(&e, t, 4);
    expect_pages("check_pages_sglang_index_eq_num_total_pages", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 1", stream);
    memcpy(t, e.indices, sizeof(e.indices)); t[1] = 1000000;        /* seq 0 */
    a = e.sg; a.kv_page_indices = scratch_table(&e, t, 4);
    expect_pages("check_pages_sglang_index_huge", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 0", stream);
    memcpy(t, e.indices, sizeof(e.indices)); t[0] = -1;             /* seq 0 */
    a = e.sg; a.kv_page_indices = scratch_table(&e, t, 4);
    expect_pages("check_pages_sglang_index_negative", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 0", stream);
    a = e.sg; a.num_total_pages = 7;                                 /* page 7 of seq 0 now out */
    expect_pages("check_pages_sglang_num_total_pages_too_small", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 0", stream);
    memcpy(t, e.bt, sizeof(e.bt)); t[4] = 8;                        /* seq 1, first page */
    a = e.vl; a.block_table = scratch_table(&e, t, 8);
    expect_pages("check_pages_vllm_index_eq_num_total_pages", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 1", stream);
    memcpy(t, e.bt, sizeof(e.bt)); t[2] = -5;                       /* seq 0, its last page */
    a = e.vl; a.block_table = scratch_table(&e, t, 8);
    expect_pages("check_pages_vllm_index_negative", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 0", stream);
    memcpy(t, e.last, sizeof(e.last)); t[1] = 0;
    a = e.sg; a.kv_last_page_lens = scratch_table(&e, t, 2);
    expect_pages("check_pages_last_page_len_zero", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 1", stream);
    memcpy(t, e.last, sizeof(e.last)); t[0] = 17;                   /* page_size + 1 */
    a = e.sg; a.kv_last_page_lens = scratch_table(&e, t, 2);
    expect_pages("check_pages_last_page_len_above_page_size", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 0", stream);
    memcpy(t, e.last, sizeof(e.last)); t[1] = -3;
    a = e.sg; a.kv_last_page_lens = scratch_table(&e, t, 2);
    expect_pages("check_pages_last_page_len_negative", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 1", stream);
    /* indptr decreasing at seq 0 (a decrease after seq 0 would make check_pages read
     * past its host copy of the indices, which holds only kv_indptr[batch] entries) */
    t[0] = 2; t[1] = 1; t[2] = 4;
    a = e.sg; a.kv_indptr = scratch_table(&e, t, 3);
    expect_pages("check_pages_sglang_indptr_decreasing", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 0", stream);
    t[0] = 40; t[1] = -1;
    a = e.vl; a.seqlen_k = scratch_table(&e, t, 2);
    expect_pages("check_pages_vllm_seqlen_k_negative", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 1", stream);
    t[0] = 40; t[1] = 5 * 16;                                       /* 5 pages in a row of 4 */
    a = e.vl; a.seqlen_k = scratch_table(&e, t, 2);
    expect_pages("check_pages_vllm_more_pages_than_row", &a, &e, FMHA_ERR_INVALID_ARG, "sequence 1", stream);
    a = e.sg; a.page_size = 24;
    expect_pages("check_pages_validates_args_first", &a, &e, FMHA_ERR_INVALID_ARG, NULL, stream);
    if (tu_selected("check_pages_null_args")) {
        fmha_status s = fmha_batch_prefill_check_pages(NULL, (void *)stream);
        if (s == FMHA_ERR_INVALID_ARG) tu_pass("check_pages_null_args");
        else tu_fail("check_pages_null_args", "-> %s", fmha_status_str(s));
    }

    /* page size */
    a = e.sg; a.page_size = 24;
    expect_status("prefill_bad_page_size_24", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, "24", 0, stream);
    a = e.sg; a.page_size = 0;
    expect_status("prefill_bad_page_size_0", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.page_size = -16;
    expect_status("prefill_bad_page_size_negative", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.page_size = 4096;
    expect_status("prefill_bad_page_size_4096", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.page_size = 3;
    expect_status("prefill_bad_page_size_3", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);

    /* layouts and dtypes */
    a = e.sg; a.kv_layout = FMHA_KV_LAYOUT_VECTORIZED; a.page_size = 4;
    expect_status("prefill_bad_vectorized_page4_not_divisible_by_8", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0,
                  stream);
    a = e.sg; a.kv_layout = FMHA_KV_LAYOUT_VECTORIZED; a.token_stride_k = a.token_stride_v = 8;
    expect_status("prefill_vectorized_page16_is_valid", &prefill_set, &a, &e, FMHA_OK, NULL, 0, stream);
    a.logits_soft_cap = 2.0f;      /* the set's fp16 d64 soft-cap row differs only in its layout */
    expect_status("no_kernel_vectorized_in_linear_only_set", &page4_set, &a, &e, FMHA_ERR_NO_KERNEL, "kv layout", 0,
                  stream);
    a = e.sg; a.kv_layout = FMHA_KV_LAYOUT_VECTORIZED; a.page_size = 12;
    expect_status("prefill_bad_vectorized_page12", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.kv_layout = (fmha_kv_layout)5;
    expect_status("prefill_bad_kv_layout_unknown", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.kv_dtype = FMHA_DTYPE_BF16;
    expect_status("prefill_q_fp16_kv_bf16_is_unsupported", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);
    a = e.sg; a.kv_scale = FMHA_KV_SCALE_PER_PAGE;
    expect_status("prefill_bad_kv_scale_without_fp8", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);

    /* FP8 KV: valid baselines, then each rule broken once */
    expect_status("prefill_fp8_base_per_tensor_is_valid", &prefill_set, &e.f8, &e, FMHA_OK, NULL, 0, stream);
    expect_pages("check_pages_fp8_valid", &e.f8, &e, FMHA_OK, NULL, stream);
    a = e.f8; a.page_table = e.vl.page_table; a.kv_indptr = a.kv_page_indices = a.kv_last_page_lens = NULL;
    a.block_table = e.vl.block_table; a.seqlen_k = e.vl.seqlen_k; a.block_table_stride = e.vl.block_table_stride;
    expect_status("prefill_fp8_base_vllm_is_valid", &prefill_set, &a, &e, FMHA_OK, NULL, 0, stream);
    a = e.f8; a.kv_scale = FMHA_KV_SCALE_NONE; a.k_descale = a.v_descale = NULL;
    expect_status("prefill_fp8_scale_none_is_valid", &prefill_set, &a, &e, FMHA_OK, NULL, 0, stream);
    {
        fmha_batch_prefill_args pp = e.f8;
        pp.kv_scale = FMHA_KV_SCALE_PER_PAGE; pp.k_descale = pp.v_descale = NULL;
        pp.k_page_descale = e.dds + 8; pp.v_page_descale = e.dds + 48;
        pp.descale_page_stride = 4; pp.descale_nhead_stride = 1;
        expect_status("prefill_fp8_per_page_is_valid", &prefill_set, &pp, &e, FMHA_OK, NULL, 0, stream);
        a = pp; a.k_page_descale = NULL;
        expect_status("prefill_bad_fp8_per_page_null_k_page_descale", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0,
                      stream);
        a = pp; a.v_page_descale = NULL;
        expect_status("prefill_bad_fp8_per_page_null_v_page_descale", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0,
                      stream);
        a = pp; a.k_page_descale = a.v_page_descale = NULL;
        expect_status("prefill_bad_fp8_per_page_null_arrays", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
        a = pp; a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16; a.k_pool = e.dk; a.v_pool = e.dv;
        expect_status("prefill_bad_page_descales_with_bf16_kv", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0,
                      stream);
    }
    a = e.f8; a.q_dtype = FMHA_DTYPE_FP8; a.q = e.dq8; a.q_descale = e.dds + 2;
    expect_status("prefill_fp8_q_fp8_is_valid", &prefill_set, &a, &e, FMHA_OK, NULL, 0, stream);
    a.q_descale = NULL;
    expect_status("prefill_fp8_q_fp8_without_q_descale_is_valid", &prefill_set, &a, &e, FMHA_OK, NULL, 0, stream);
    a = e.f8; a.stride_q = 136;          /* bf16 Q: 16-byte rows of 8 elements suffice */
    expect_status("prefill_fp8_kv_bf16_q_stride_136_is_valid", &prefill_set, &a, &e, FMHA_OK, NULL, 0, stream);
    a = e.f8; a.q_dtype = FMHA_DTYPE_FP8; a.q = e.dq8; a.stride_q = 136;
    expect_status("prefill_bad_fp8_q_stride_not_multiple_of_16", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, "stride", 0,
                  stream);
    a = e.f8; a.token_stride_k = 72;
    expect_status("prefill_bad_fp8_token_stride_not_multiple_of_16", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, "stride",
                  0, stream);
    a = e.f8; a.page_stride_v = 16 * 64 + 8;
    expect_status("prefill_bad_fp8_page_stride_not_multiple_of_16", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, "stride",
                  0, stream);
    a = e.f8; a.k_pool = (const unsigned char *)e.dk8 + 8;
    expect_status("prefill_bad_fp8_k_pool_misaligned", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);
    a = e.f8; a.kv_layout = FMHA_KV_LAYOUT_VECTORIZED; a.token_stride_k = a.token_stride_v = 16;
    expect_status("prefill_bad_fp8_vectorized", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);
    a = e.f8; a.hdim_q = a.hdim_v = 72;  /* strides fit 72 and are multiples of 16 */
    a.stride_q = a.stride_o = 160; a.nhead_stride_q = a.nhead_stride_o = 80;
    a.token_stride_k = a.token_stride_v = a.nhead_stride_k = a.nhead_stride_v = 80;
    a.page_stride_k = a.page_stride_v = 16 * 80;
    expect_status("prefill_bad_fp8_hdim_72", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);
    a.hdim_q = a.hdim_v = 40;
    expect_status("prefill_bad_fp8_hdim_40", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);
    a = e.f8; a.k_descale = NULL;
    expect_status("prefill_bad_fp8_per_tensor_null_k_descale", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.f8; a.v_descale = NULL;
    expect_status("prefill_bad_fp8_per_tensor_null_v_descale", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.f8; a.kv_scale = (fmha_kv_scale)7;
    expect_status("prefill_bad_fp8_kv_scale_unknown", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.f8; a.q_descale = e.dds + 2;   /* bf16 queries */
    expect_status("prefill_bad_q_descale_with_bf16_q", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16; a.q_descale = e.dds + 2;
    expect_status("prefill_bad_q_descale_with_bf16_q_and_kv", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16;
    a.kv_scale = FMHA_KV_SCALE_PER_TENSOR; a.k_descale = e.dds; a.v_descale = e.dds + 1;
    expect_status("prefill_bad_descales_with_bf16_kv", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16; a.k_descale = e.dds;    /* kv_scale NONE */
    expect_status("prefill_bad_k_descale_pointer_with_bf16_kv", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0,
                  stream);
    a = e.sg; a.q_dtype = FMHA_DTYPE_FP8; a.kv_dtype = FMHA_DTYPE_BF16; a.q = e.dq8; a.q_descale = e.dds + 2;
    expect_status("prefill_bad_q_fp8_with_bf16_kv", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);
    a = e.f8; a.q_dtype = FMHA_DTYPE_FP16;
    expect_status("prefill_bad_fp8_kv_with_fp16_q", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);

    /* null pointers */
    a = e.sg; a.kv_indptr = NULL;
    expect_status("prefill_bad_null_kv_indptr", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.kv_page_indices = NULL;
    expect_status("prefill_bad_null_kv_page_indices", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.kv_last_page_lens = NULL;
    expect_status("prefill_bad_null_kv_last_page_lens", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.vl; a.block_table = NULL;
    expect_status("prefill_bad_null_block_table", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.vl; a.seqlen_k = NULL;
    expect_status("prefill_bad_null_seqlen_k", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.vl; a.block_table_stride = -4;
    expect_status("prefill_bad_negative_block_table_stride", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.k_pool = NULL;
    expect_status("prefill_bad_null_k_pool", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.v_pool = NULL;
    expect_status("prefill_bad_null_v_pool", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.q = NULL;
    expect_status("prefill_bad_null_q", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.o = NULL;
    expect_status("prefill_bad_null_o", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.seqstart_q = NULL;
    expect_status("prefill_bad_null_seqstart_q", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.page_table = (fmha_page_table)7;
    expect_status("prefill_bad_page_table_unknown", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    expect_status("prefill_bad_null_set", NULL, &e.sg, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    if (tu_selected("prefill_bad_null_args")) {
        fmha_status s1 = fmha_batch_prefill_check(&prefill_set, NULL, NULL);
        fmha_status s2 = fmha_batch_prefill(&prefill_set, NULL, (void *)stream);
        if (s1 == FMHA_ERR_INVALID_ARG && s2 == FMHA_ERR_INVALID_ARG && fmha_last_error()[0]) tu_pass("prefill_bad_null_args");
        else tu_fail("prefill_bad_null_args", "check -> %s, run -> %s", fmha_status_str(s1), fmha_status_str(s2));
    }

    /* sizes, heads, strides */
    a = e.sg; a.num_total_pages = -1;
    expect_status("prefill_bad_num_total_pages_negative", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.max_seqlen_q = -1;
    expect_status("prefill_bad_max_seqlen_q_negative", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.batch = -1;
    expect_status("prefill_bad_batch_negative", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.nhead_q = 3; a.nhead_k = 2;
    expect_status("prefill_bad_nhead_q_not_multiple", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.hdim_q = a.hdim_v = 264;
    expect_status("prefill_bad_hdim_264", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);
    a = e.sg; a.hdim_v = 128;
    expect_status("prefill_bad_hdim_v_ne_hdim_q", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);
    a = e.sg; a.scale = 0.0f;
    expect_status("prefill_bad_scale_zero", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.page_stride_k = -(int64_t)16 * 64;
    expect_status("prefill_bad_negative_page_stride", &prefill_set, &a, &e, FMHA_ERR_INVALID_ARG, NULL, 0, stream);
    a = e.sg; a.token_stride_v = 68;
    expect_status("prefill_bad_token_stride_not_multiple_of_8", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0,
                  stream);
    a = e.sg; a.k_pool = (const uint16_t *)e.dk + 4;
    expect_status("prefill_bad_k_pool_misaligned", &prefill_set, &a, &e, FMHA_ERR_UNSUPPORTED, NULL, 0, stream);

    /* valid calls with nothing to compute: OK, nothing written */
    a = e.sg; a.batch = 0; a.q = NULL; a.o = NULL; a.k_pool = a.v_pool = NULL; a.kv_indptr = NULL;
    expect_status("prefill_batch_0_is_ok_and_writes_nothing", &prefill_set, &a, &e, FMHA_OK, NULL, 1, stream);
    {
        static const int32_t zero_ssq[3] = { 0, 0, 0 };
        a = e.sg; a.max_seqlen_q = 0; a.seqstart_q = scratch_table(&e, zero_ssq, 3);
        expect_status("prefill_no_queries_is_ok_and_writes_nothing", &prefill_set, &a, &e, FMHA_OK, NULL, 1, stream);
    }

    /* no kernel: the explicit set has no page-1/2 and no fp16 d64 non-soft-cap kernel */
    a = e.sg; a.logits_soft_cap = 2.0f; a.page_size = 2;
    expect_status("no_kernel_page2_in_page4_set", &page4_set, &a, &e, FMHA_ERR_NO_KERNEL, "page size", 0, stream);
    a = e.sg;
    expect_status("no_kernel_fp16_d64_nosoftcap_in_page4_set", &page4_set, &a, &e, FMHA_ERR_NO_KERNEL, NULL, 0, stream);
    a = e.f8; a.logits_soft_cap = 2.0f;  /* the set's fp8 rows have no soft cap */
    expect_status("no_kernel_fp8_softcap_in_page4_set", &page4_set, &a, &e, FMHA_ERR_NO_KERNEL, NULL, 0, stream);
    a = e.sg; a.logits_soft_cap = 2.0f; a.page_size = 4;        /* tables need page 16; check only */
    if (tu_selected("page4_set_serves_fp16_d64_softcap_page4")) {
        fmha_fwd_plan plan;
        fmha_status s = fmha_batch_prefill_check(&page4_set, &a, &plan);
        if (s == FMHA_OK && plan.kernel && plan.kernel->page_size == 4 && plan.kernel->has_softcap)
            tu_pass("page4_set_serves_fp16_d64_softcap_page4");
        else
            tu_fail("page4_set_serves_fp16_d64_softcap_page4", "%s: %s", fmha_status_str(s), fmha_last_error());
    }
    pbad_free(&e);
}

/* Page classes picked by selection (plans only, nothing launched). The kernel's
 * dtype must be the KV one for fp8 KV (whatever the queries), else the queries'. */
static void expect_plan_page(const char *name, const fmha_kernel_set *set, const fmha_batch_prefill_args *a,
                             int want_page, const char *want_name_part)
{
    const fmha_dtype want_dt = a->kv_dtype == FMHA_DTYPE_FP8 ? FMHA_DTYPE_FP8 : a->q_dtype;
    fmha_fwd_plan plan;
    fmha_status s;
    if (!tu_selected(name)) return;
    memset(&plan, 0, sizeof(plan));
    s = fmha_batch_prefill_check(set, a, &plan);
    if (s != FMHA_OK || !plan.kernel)
        tu_fail(name, "%s: %s", fmha_status_str(s), fmha_last_error());
    else if (plan.kernel->dtype != want_dt)
        tu_fail(name, "picked %s (dtype %d), want dtype %d", plan.kernel->name, (int)plan.kernel->dtype, (int)want_dt);
    else if (plan.kernel->family != FMHA_FAMILY_BATCH_PREFILL || plan.kernel->page_size != want_page ||
             (want_name_part && !strstr(plan.kernel->name, want_name_part)))
        tu_fail(name, "picked %s (page class %d), want page class %d", plan.kernel->name, plan.kernel->page_size,
                want_page);
    else
        tu_pass(name);
}

static void test_plans(void)
{
    static const int pages[11] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 2048 };
    pbad_env e;
    fmha_batch_prefill_args a;
    char name[160], part[32];
    int i, m;
    pbad_make(&e);
    /* default set, LINEAR (m 0, 1) and VECTORIZED (m 2, page >= 8) */
    for (m = 0; m < 3; m++)
        for (i = 0; i < 11; i++) {
            /* 16-bit KV: the wgmma kernel (page 1) where this run has one */
            const int want = expect_wgmma(FMHA_DTYPE_FP16, 0, 0, 64) ? 1 : pages[i] >= 64 ? 64 : pages[i] >= 16 ? 16 : 1;
            if (m == 2 && pages[i] < 8) continue;
            a = m == 1 ? e.vl : e.sg;
            a.page_size = pages[i];
            if (m == 1) { a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16; a.hdim_q = a.hdim_v = 96; a.mask_type = FMHA_MASK_NONE; }
            if (m == 2) { a.kv_layout = FMHA_KV_LAYOUT_VECTORIZED; a.token_stride_k = a.token_stride_v = 8; a.logits_soft_cap = 5.0f; }
            snprintf(name, sizeof(name), "plan_default_%s_page%d_uses_page%d_kernel",
                     m == 0 ? "fp16_d64_causal" : m == 1 ? "bf16_d96_nomask" : "vectorized_fp16_d64_softcap", pages[i], want);
            snprintf(part, sizeof(part), "_%s_page%d_", m == 2 ? "vectorized" : "linear", want);
            expect_plan_page(name, &prefill_set, &a, want, part);
        }
    for (i = 2; i < 11; i++) {   /* explicit portable tiles: no Hopper row */
        const int want = pages[i] >= 128 ? 128 : pages[i] >= 32 ? 32 : 4;
        a = e.sg;
        a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16;
        a.hdim_q = a.hdim_v = 128;
        a.page_size = pages[i];
        snprintf(name, sizeof(name), "plan_page4_set_page%d_uses_page%d_kernel", pages[i], want);
        snprintf(part, sizeof(part), "_linear_page%d_", want);
        expect_plan_page(name, &page4_set, &a, want, part);
    }
    /* fp8 KV: the default set's classes 1, 16 and 64 with bf16 queries (d64 causal) and
     * e4m3 queries (d128, no mask, soft cap; the wgmma kernel, page 1, where this run
     * has one); the explicit set's fp8 rows 4 and 128 */
    for (m = 0; m < 2; m++)
        for (i = 0; i < 11; i++) {
            const int want = m && expect_wgmma(FMHA_DTYPE_FP8, 1, 0, 128) ? 1
                             : pages[i] >= 64 ? 64 : pages[i] >= 16 ? 16 : 1;
            a = e.f8;
            a.page_size = pages[i];
            if (m) {
                a.q_dtype = FMHA_DTYPE_FP8; a.q = e.dq8; a.q_descale = e.dds + 2;
                a.hdim_q = a.hdim_v = 128; a.stride_q = a.stride_o = 256; a.nhead_stride_q = a.nhead_stride_o = 128;
                a.token_stride_k = a.token_stride_v = a.nhead_stride_k = a.nhead_stride_v = 128;
                a.page_stride_k = a.page_stride_v = 16 * 128;
                a.mask_type = FMHA_MASK_NONE; a.logits_soft_cap = 5.0f;
            }
            snprintf(name, sizeof(name), "plan_default_fp8_%s_page%d_uses_page%d_kernel",
                     m ? "qfp8_d128_nomask_softcap" : "qbf16_d64_causal", pages[i], want);
            snprintf(part, sizeof(part), "_linear_page%d_", want);
            expect_plan_page(name, &prefill_set, &a, want, part);
        }
    for (i = 2; i < 11; i++) {
        const int want = pages[i] >= 128 ? 128 : 4;
        a = e.f8;
        a.page_size = pages[i];
        snprintf(name, sizeof(name), "plan_page4_set_fp8_page%d_uses_page%d_kernel", pages[i], want);
        snprintf(part, sizeof(part), "_linear_page%d_", want);
        expect_plan_page(name, &page4_set, &a, want, part);
    }
    pbad_free(&e);
}

/* The default prefill set: LINEAR pages for 3 KV dtypes (fp16, bf16, fp8) x 3
 * hdims x mask x soft cap x page classes {1, 16, 64}; VECTORIZED pages for the
 * masked fp16/bf16 rows of each, the same page classes (fp8 KV is LINEAR
 * only). */
static void test_registry(void)
{
    static const int hds[3] = { 64, 128, 256 }, pgs[3] = { 1, 64, 16 };
    static const char *const dts[3] = { "fp16", "bf16", "fp8" };
    int n = fmha_set_size(&prefill_set), i, dt, hd, m, sc, pg, lay, missing = 0, bad = -1, nlin = 0, nvec = 0, n8 = 0;
    char miss[160] = "";
    if (tu_selected("registry_prefill_set_covers_all_features")) {
        for (lay = 0; lay < 2; lay++)
            for (dt = 0; dt < 3 - lay; dt++)           /* no VECTORIZED fp8 */
                for (hd = 0; hd < 3; hd++)
                    for (m = lay; m < 2; m++)          /* VECTORIZED: masked rows only */
                        for (sc = 0; sc < 2; sc++)
                            for (pg = 0; pg < 3; pg++) {
                                int found = 0;
                                for (i = 0; i < n; i++) {
                                    const fmha_kernel_info *k = fmha_set_kernel(&prefill_set, i);
                                    if (k && (int)k->kv_layout == lay && (int)k->dtype == dt && k->hdim == hds[hd] &&
                                        k->has_mask == m && k->has_softcap == sc && k->page_size == pgs[pg])
                                        found = 1;
                                }
                                if (!found && !missing++)
                                    snprintf(miss, sizeof(miss), "%s %s d%d mask%d softcap%d page%d",
                                             lay ? "vectorized" : "linear", dts[dt], hds[hd], m, sc, pgs[pg]);
                            }
        for (i = 0; i < n; i++) {
            const fmha_kernel_info *k = fmha_set_kernel(&prefill_set, i);
            if (k && k->kv_layout == FMHA_KV_LAYOUT_LINEAR) nlin++;
            if (k && k->kv_layout == FMHA_KV_LAYOUT_VECTORIZED) nvec++;
            if (k && k->dtype == FMHA_DTYPE_FP8) n8++;
        }
        if (nlin >= 108 && nvec >= 36 && n8 >= 36 && !missing) tu_pass("registry_prefill_set_covers_all_features");
        else tu_fail("registry_prefill_set_covers_all_features",
                     "%d kernels (%d linear, %d vectorized, %d fp8), %d combinations missing (first: %s)", n, nlin, nvec,
                     n8, missing, miss);
    }
    if (tu_selected("registry_prefill_kernel_info_sane")) {
        for (i = 0; i < n && bad < 0; i++) {
            const fmha_kernel_info *k = fmha_set_kernel(&prefill_set, i);
            char part[48];
            if (!k) { bad = i; break; }
            snprintf(part, sizeof(part), "_%s_page%d_", k->kv_layout == FMHA_KV_LAYOUT_VECTORIZED ? "vectorized" : "linear",
                     k->page_size);
            if (!k->name || !strstr(k->name, "batch_prefill") || !strstr(k->name, part) ||
                k->family != FMHA_FAMILY_BATCH_PREFILL || k->has_alibi || k->tile_m <= 0 || k->tile_n <= 0 ||
                k->warps <= 0 || k->stages <= 0 ||
                (k->page_size != 1 && k->page_size != 16 && k->page_size != 64) ||
                (k->arch == FMHA_ARCH_SM90A && (k->page_size != 1 || strcmp(k->pipeline, "wgmma") != 0 ||
                                                (k->dtype == FMHA_DTYPE_FP8 && k->hdim != 128 && k->hdim != 256))) ||
                (k->dtype == FMHA_DTYPE_FP8 && k->kv_layout != FMHA_KV_LAYOUT_LINEAR))
                bad = i;
        }
        if (bad < 0) tu_pass("registry_prefill_kernel_info_sane");
        else tu_fail("registry_prefill_kernel_info_sane", "kernel %d: %s", bad,
                     fmha_set_kernel(&prefill_set, bad) ? fmha_set_kernel(&prefill_set, bad)->name : "(null)");
    }
    if (tu_selected("registry_prefill_json")) {
        size_t len = fmha_set_json(&prefill_set, NULL, 0);
        char *buf = (char *)tu_hmalloc(len + 1);
        const char *why = NULL;
        fmha_set_json(&prefill_set, buf, len + 1);
        if (!strstr(buf, "\"family\": \"batch_prefill\"")) why = "no batch_prefill family";
        else if (!strstr(buf, "\"page_size\": 64") || !strstr(buf, "\"page_size\": 1,")) why = "page sizes missing";
        else if (!strstr(buf, "\"kv_layout\": \"linear\"") || !strstr(buf, "\"kv_layout\": \"vectorized\"")) why = "kv layouts missing";
        else if (!strstr(buf, "\"dtype\": \"fp8\"")) why = "no fp8 kernel";
        else
            for (i = 0; i < n && !why; i++)
                if (!strstr(buf, fmha_set_kernel(&prefill_set, i)->name)) why = "a kernel name is missing";
        if (why) tu_fail("registry_prefill_json", "%s", why);
        else tu_pass("registry_prefill_json");
        free(buf);
    }
    if (tu_selected("registry_page4_set")) {
        int tn = fmha_set_size(&page4_set), n4 = 0, n128 = 0, nf8 = 0;
        for (i = 0; i < tn; i++) {
            const fmha_kernel_info *k = fmha_set_kernel(&page4_set, i);
            if (k && k->page_size == 4 && k->kv_layout == FMHA_KV_LAYOUT_LINEAR) n4++;
            if (k && k->page_size == 128 && k->kv_layout == FMHA_KV_LAYOUT_LINEAR) n128++;
            if (k && k->dtype == FMHA_DTYPE_FP8 && k->hdim == 128 && k->has_mask && !k->has_softcap) nf8++;
        }
        /* the fp16 wildcard row adds its Hopper page-4 kernel, and each fp8 one its
         * Hopper e4m3 kernel (page 4, page 128), unless built portable */
        const int hop = !TEST_PREFILL_PORTABLE;
        if (tn == 6 + 3 * hop && n4 == 3 + 2 * hop && n128 == 2 + hop && nf8 == 2 + 2 * hop)
            tu_pass("registry_page4_set");
        else tu_fail("registry_page4_set", "%d kernels, %d of page 4, %d of page 128, %d fp8 (want %d, %d, %d, %d)", tn,
                     n4, n128, nf8, 6 + 3 * hop, 3 + 2 * hop, 2 + hop, 2 + 2 * hop);
    }
    if (tu_selected("registry_prefill_wgmma_rows")) {
        /* one wgmma kernel per 16-bit variant: 2 dtypes x 3 hdims x (4 LINEAR + 2
         * VECTORIZED), and per fp8 variant of hdim 128 and 256 (4 LINEAR each),
         * page 1; none in the portable build */
        int nw = 0, nw_bad = 0;
        for (i = 0; i < n; i++) {
            const fmha_kernel_info *k = fmha_set_kernel(&prefill_set, i);
            if (k && k->arch == FMHA_ARCH_SM90A) {
                ++nw;
                if (k->page_size != 1 || k->tile_m != 128 || k->warps != 12 ||
                    (k->dtype == FMHA_DTYPE_FP8 && ((k->hdim != 128 && k->hdim != 256) || k->stages != 3 ||
                                                    k->kv_layout != FMHA_KV_LAYOUT_LINEAR)))
                    ++nw_bad;
            }
        }
        if (nw == (TEST_PREFILL_PORTABLE ? 0 : 44) && nw_bad == 0) tu_pass("registry_prefill_wgmma_rows");
        else tu_fail("registry_prefill_wgmma_rows", "%d wgmma kernels (%d malformed), want %d", nw, nw_bad,
                     TEST_PREFILL_PORTABLE ? 0 : 44);
    }
}

/* ============================================================================
 * main
 * ========================================================================== */
static const char usage_extra[] =
    "  --quick   ~55 problems (fp8 ones included) plus the API checks, no large pool\n"
    "            (for compute-sanitizer)\n"
    "  --filter  run only checks whose name contains SUBSTR (e.g. large_pool, page1024, vllm)\n"
    "  --list    print the problem names and exit\n";

static const char *cfg_name_at(int i) { return g_cfgs[i].name; }
static int cfg_quick_at(int i) { return g_cfgs[i].quick; }
static double cfg_work_at(int i) { return cfg_work(&g_cfgs[i]); }

/* Which pools take the 16-bit grouped TMA maps (dispatch/tma.h): pages
 * of 4 KB and more (16 tokens at hdim 128, 32 at 64, 8 at 256) laid out
 * back to back with d equal to the kernel's head dim; anything else
 * gathers (tma_kv 0), e4m3 pages from 32 tokens.
 * The maps are only encoded, nothing is launched (the problems above run
 * both paths). */
static void test_tma_maps(void)
{
    const fmha_kernel_info *k16 = NULL, *k8 = NULL, *k64 = NULL, *k256 = NULL;
    const int tma = fmhai_tma_unit_ok();
    void *buf = NULL;
    int i, bad = 0;
    char why[256] = "";
    if (!tu_selected("tma_grouped_maps") || !fast16()) return;   /* the Hopper rows on an sm_90 device */
    for (i = 0; i < fmha_set_size(&prefill_set); i++) {
        const fmha_kernel_info *k = fmha_set_kernel(&prefill_set, i);
        if (!k || k->arch != FMHA_ARCH_SM90A || k->kv_layout != FMHA_KV_LAYOUT_LINEAR) continue;
        if (k->dtype == FMHA_DTYPE_BF16 && k->hdim == 128 && !k16) k16 = k;
        if (k->dtype == FMHA_DTYPE_BF16 && k->hdim == 64 && !k64) k64 = k;
        if (k->dtype == FMHA_DTYPE_BF16 && k->hdim == 256 && !k256) k256 = k;
        if (k->dtype == FMHA_DTYPE_FP8 && k->hdim == 128 && !k8) k8 = k;
    }
    if (!k16 || !k8 || !k64 || !k256) {
        tu_fail("tma_grouped_maps", "no Hopper LINEAR rows (bf16 hdim 64 / 128 / 256, e4m3 128) in the default set");
        return;
    }
    if (cudaMalloc(&buf, (size_t)1 << 20) != cudaSuccess) {
        tu_fail("tma_grouped_maps", "cudaMalloc failed");
        return;
    }
    {
        /* page, head-major pool, d, e4m3, want (with a TMA unit) */
        static const int cs[][5] = { { 16, 0, 128, 0, 1 }, { 1024, 0, 128, 0, 1 }, { 8, 0, 128, 0, 0 },
                                     { 8, 0, 256, 0, 1 }, { 16, 0, 64, 0, 0 }, { 32, 0, 64, 0, 1 },
                                     { 16, 1, 128, 0, 0 }, { 64, 0, 120, 0, 0 }, { 16, 0, 128, 1, 0 },
                                     { 32, 0, 128, 1, 1 }, { 2048, 0, 256, 0, 1 } };
        for (i = 0; i < (int)(sizeof cs / sizeof cs[0]); i++) {
            const int page = cs[i][0], hnd = cs[i][1], d = cs[i][2], e8 = cs[i][3], nhk = 8;
            const fmha_kernel_info *k = e8 ? k8 : d == 64 ? k64 : d == 256 ? k256 : k16;
            fmha_batch_prefill_args a;
            fmhai_fwd_params p;
            memset(&a, 0, sizeof a);
            memset(&p, 0, sizeof p);
            a.batch = 2; a.nhead_q = 32; a.nhead_k = nhk; a.page_size = page;
            a.num_total_pages = i % 2 ? 64 : 0;   /* 0: not given (the maps take the largest extent) */
            a.kv_layout = FMHA_KV_LAYOUT_LINEAR;
            a.kv_dtype = e8 ? FMHA_DTYPE_FP8 : FMHA_DTYPE_BF16;
            p.k = buf; p.v = buf; p.d = d; p.dv = d;
            p.k_row = p.v_row = hnd ? 128 : (int64_t)nhk * 128;
            p.k_head = p.v_head = hnd ? (int64_t)page * 128 : 128;
            p.k_page = p.v_page = (int64_t)page * nhk * 128;
            fmhai_prefill_tma_prepare(k, &a, &p);
            if (p.tma_kv != (tma && cs[i][4])) {
                ++bad;
                snprintf(why, sizeof why, "page %d %s d %d %s: tma_kv %d, want %d", page, hnd ? "hnd" : "nhd", d,
                         e8 ? "e4m3" : "bf16", p.tma_kv, tma && cs[i][4]);
            }
        }
    }
    cudaFree(buf);
    if (bad) tu_fail("tma_grouped_maps", "%s", why);
    else tu_pass("tma_grouped_maps");
}

static void checks(cudaStream_t stream, uint64_t seed)
{
    (void)seed;
    test_registry();
    test_tma_maps();
    test_plans();
    test_bad_inputs(stream);
}

static void run_at(int i, cudaStream_t stream, uint64_t seed) { run_config(&g_cfgs[i], stream, seed); }

int main(int argc, char **argv)
{
    tu_suite s = { "test_prefill", usage_extra, { 0, cfg_name_at, cfg_quick_at, cfg_work_at }, checks, run_at, big_pool_free };
    build_configs();
    s.cfgs.n = g_ncfg;
    return tu_main(argc, argv, &s);
}
