/*
 * fmha_decode.cu - command-line example of decode with split-KV: a few query
 * rows per sequence against a KV cache, contiguous or paged, with the
 * library's default decode kernel set. It plans once (kernel, split count,
 * workspace), allocates the workspace the plan asks for, runs, prints the
 * plan, the median time and the KV read bandwidth, and checks the result
 * against the CPU reference of tests/ref/fmha_ref.h.
 *
 *   fmha_decode -b=8 -h=32 -h_k=8 -s_k=8192 -d=128                 (contiguous cache)
 *   fmha_decode -b=1 -h=32 -h_k=8 -s_k=32768 -page=16 -splits=0    (paged, heuristic splits)
 *   fmha_decode -b=4 -s=4 -s_k=1000,77,4096,1 -mask=b -kv_prec=fp8 -page=64
 *
 * Options (defaults in brackets):
 *   -b [4] batch     -h [32] query heads     -h_k [8] KV heads
 *   -s [1] query rows per sequence (e.g. 1..8 for speculative decoding)
 *   -s_k [4096] keys per sequence: one value, or a comma list of b values
 *   -d [128] head dim (multiple of 8, <= 256; fp8 KV: of 16)
 *   -prec [bf16] fp16 | bf16 (queries, O and 16-bit caches)
 *   -kv_prec [= prec] fp16 | bf16 | fp8 (e4m3, per-tensor descale 1/448; bf16 O)
 *   -page [0] 0: contiguous cache [b, s_k max, h_k, d]; P: LINEAR pages of P
 *      tokens [pages, P, h_k, d] in shuffled order (SGLang 1-D table)
 *   -splits [0] split count (0: the plan's heuristic)
 *   -mask [0] 0 none | b causal bottom-right (the last query row sees every key)
 *   -v [1] validate     -warmup [5] -repeat [50]
 *
 * Inputs are uniform in [-1, 1]; fp8 caches hold e4m3(real * 448) with the
 * descale 1/448 and the reference gets the dequantised values. GB/s counts
 * the bytes of K and V the sequences hold (each read once per KV head).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"
#define EX_PROG "fmha_decode"
#include "example_util.h"
#include "../tests/ref/fmha_ref.h"

/* The library's decode rows; FMHA_EXAMPLE_ONE_ROW (the test build's compile
 * check): one row, bf16 hdim 128, contiguous or LINEAR pages. */
#if defined(FMHA_EXAMPLE_ONE_ROW)
#  define FMHA_DECODE_CLI_SET(X) \
    X(DECODE, BF16, 128, MASK, SOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#else
#  define FMHA_DECODE_CLI_SET(X) FMHA_DEFAULT_DECODE_SET(X)
#endif
DECL_FMHA_KERNEL_SET(decode_set, FMHA_DECODE_CLI_SET)

#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

typedef struct options {
    int b, h, h_k, s, d, page, splits, v, warmup, repeat, causal;
    fmha_dtype prec, kv_prec;
    int s_k[64];
} options;

static fmha_dtype parse_prec(const char *v)
{
    return !strcmp(v, "fp16") ? FMHA_DTYPE_FP16 : !strcmp(v, "fp8") ? FMHA_DTYPE_FP8 : FMHA_DTYPE_BF16;
}

static int parse_args(int argc, char **argv, options *o)
{
    const char *sk = "4096", *kvp = 0;
    int i;
    o->b = 4; o->h = 32; o->h_k = 8; o->s = 1; o->d = 128; o->page = 0; o->splits = 0; o->v = 1;
    o->warmup = 5; o->repeat = 50; o->causal = 0; o->prec = FMHA_DTYPE_BF16;
    for (i = 1; i < argc; ++i) {
        char key[32];
        const char *val = ex_split_opt(argv[i], key, sizeof(key));
        const ex_int_opt ints[] = { { "b", &o->b }, { "h", &o->h }, { "h_k", &o->h_k }, { "s", &o->s },
                                    { "d", &o->d }, { "page", &o->page }, { "splits", &o->splits },
                                    { "v", &o->v }, { "warmup", &o->warmup }, { "repeat", &o->repeat } };
        if (!val) return 0;
        if (ex_set_int_opt(ints, (int)(sizeof(ints) / sizeof(ints[0])), key, val)) continue;
        if (!strcmp(key, "s_k")) sk = val;
        else if (!strcmp(key, "prec")) o->prec = parse_prec(val);
        else if (!strcmp(key, "kv_prec")) kvp = val;
        else if (!strcmp(key, "mask")) o->causal = val[0] == 'b';
        else return 0;
    }
    o->kv_prec = kvp ? parse_prec(kvp) : o->prec;
    if (o->b < 1 || o->b > 64) return 0;
    return ex_parse_lengths(sk, o->b, o->s_k, 1) == 0;
}

static float elem_f32(const unsigned char *buf, fmha_dtype dt, size_t i)
{
    if (dt == FMHA_DTYPE_FP8) return fmha_ref_e4m3_to_f32(buf[i]) / 448.f;
    return fmha_ref_bits16_to_f32(((const uint16_t *)buf)[i], dt == FMHA_DTYPE_BF16);
}

static void put_f32(unsigned char *buf, fmha_dtype dt, size_t i, float x)
{
    if (dt == FMHA_DTYPE_FP8) buf[i] = fmha_ref_f32_to_e4m3(x * 448.f);
    else ((uint16_t *)buf)[i] = fmha_ref_f32_to_bits16(x, dt == FMHA_DTYPE_BF16);
}

int main(int argc, char **argv)
{
    options o;
    fmha_decode_args a;
    fmha_decode_plan plan;
    fmha_ref_rng rng = fmha_ref_rng_make(7);
    if (!parse_args(argc, argv, &o)) {
        fprintf(stderr, "usage: see the comment atop examples/fmha_decode.cu\n");
        return 2;
    }
    const int B = o.b, H = o.h, HK = o.h_k, S = o.s, D = o.d, P = o.page;
    const int kv8 = o.kv_prec == FMHA_DTYPE_FP8, kes = kv8 ? 1 : 2;
    const fmha_dtype out_dt = kv8 ? FMHA_DTYPE_BF16 : o.prec;
    int max_sk = 0, total_k = 0, b;
    for (b = 0; b < B; ++b) { max_sk = o.s_k[b] > max_sk ? o.s_k[b] : max_sk; total_k += o.s_k[b]; }

    /* queries [b, s, h, d], O alike, LSE [b, h, s] */
    const size_t nq = (size_t)B * S * H * D;
    uint16_t *hq = (uint16_t *)malloc(nq * 2), *ho = (uint16_t *)malloc(nq * 2);
    for (size_t i = 0; i < nq; ++i) hq[i] = fmha_ref_f32_to_bits16(fmha_ref_rng_uniform(&rng, -1.f, 1.f), o.prec == FMHA_DTYPE_BF16);

    /* the cache: contiguous [b, max_sk, hk, d], or pages [pages, P, hk, d] */
    int *pages_of = (int *)malloc(sizeof(int) * (B + 1)), n_pages = 0;
    for (b = 0; b < B; ++b) { pages_of[b] = n_pages; n_pages += P ? (o.s_k[b] + P - 1) / P : 0; }
    pages_of[B] = n_pages;
    const int pool_pages = P ? n_pages + 3 : 0;
    const size_t rows = P ? (size_t)pool_pages * P : (size_t)B * (max_sk > 0 ? max_sk : 1);
    const size_t nkv = rows * HK * D;
    unsigned char *hk_ = (unsigned char *)calloc(nkv, kes), *hv_ = (unsigned char *)calloc(nkv, kes);
    int32_t *perm = (int32_t *)malloc(sizeof(int32_t) * (pool_pages + 1));
    for (int i = 0; i < pool_pages; ++i) perm[i] = i;
    for (int i = pool_pages - 1; i > 0; --i) { int j = fmha_ref_rng_int(&rng, 0, i); int t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    /* row of token t of sequence b in the cache */
    #define CACHE_ROW(b, t) (P ? (size_t)perm[pages_of[b] + (t) / P] * P + (t) % P : (size_t)(b) * max_sk + (t))
    /* reference K/V, gathered per sequence (group mode) */
    float *rk = (float *)malloc(sizeof(float) * ((size_t)total_k * HK * D + 1));
    float *rv = (float *)malloc(sizeof(float) * ((size_t)total_k * HK * D + 1));
    int32_t *sq = (int32_t *)malloc(sizeof(int32_t) * (B + 1)), *skk = (int32_t *)malloc(sizeof(int32_t) * (B + 1));
    sq[0] = skk[0] = 0;
    for (b = 0; b < B; ++b) {
        sq[b + 1] = sq[b] + S;
        skk[b + 1] = skk[b] + o.s_k[b];
        for (int t = 0; t < o.s_k[b]; ++t)
            for (int hh = 0; hh < HK; ++hh)
                for (int c = 0; c < D; ++c) {
                    const size_t at = (CACHE_ROW(b, t) * HK + hh) * D + c, r = ((size_t)(skk[b] + t) * HK + hh) * D + c;
                    put_f32(hk_, o.kv_prec, at, fmha_ref_rng_uniform(&rng, -1.f, 1.f));
                    put_f32(hv_, o.kv_prec, at, fmha_ref_rng_uniform(&rng, -1.f, 1.f));
                    rk[r] = elem_f32(hk_, o.kv_prec, at);
                    rv[r] = elem_f32(hv_, o.kv_prec, at);
                }
    }
    /* SGLang table */
    int32_t *indptr = (int32_t *)malloc(sizeof(int32_t) * (B + 1)), *last = (int32_t *)malloc(sizeof(int32_t) * B);
    int32_t *idx = (int32_t *)malloc(sizeof(int32_t) * (n_pages + 1));
    for (b = 0; b < B; ++b) {
        indptr[b] = pages_of[b];
        last[b] = o.s_k[b] > 0 && P ? o.s_k[b] - (pages_of[b + 1] - pages_of[b] - 1) * P : 1;
        for (int j = pages_of[b]; j < pages_of[b + 1]; ++j) idx[j] = perm[j];
    }
    indptr[B] = n_pages;

    void *dq, *dout, *dk, *dv, *dws = 0;
    float *dlse, *ddesc;
    int32_t *dsk, *dindptr, *didx, *dlast;
    CK(cudaMalloc(&dq, nq * 2)); CK(cudaMalloc(&dout, nq * 2)); CK(cudaMalloc(&dlse, nq / D * 4));
    CK(cudaMalloc(&dk, nkv * kes)); CK(cudaMalloc(&dv, nkv * kes)); CK(cudaMalloc(&ddesc, 4));
    CK(cudaMalloc(&dsk, 4 * B)); CK(cudaMalloc(&dindptr, 4 * (B + 1))); CK(cudaMalloc(&didx, 4 * (n_pages + 1)));
    CK(cudaMalloc(&dlast, 4 * B));
    const float desc = 1.f / 448.f;
    CK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dk, hk_, nkv * kes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, hv_, nkv * kes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ddesc, &desc, 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dsk, o.s_k, 4 * B, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dindptr, indptr, 4 * (B + 1), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(didx, idx, 4 * (n_pages + 1), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dlast, last, 4 * B, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xff, nq * 2));

    memset(&a, 0, sizeof(a));
    a.q_dtype = kv8 ? FMHA_DTYPE_BF16 : o.prec; a.kv_dtype = o.kv_prec;
    a.batch = B; a.nhead_q = H; a.nhead_k = HK; a.seqlen_q = S; a.max_seqlen_k = max_sk;
    a.hdim_q = a.hdim_v = D;
    a.q = dq; a.o = dout; a.lse = dlse;
    a.stride_q = a.stride_o = (int64_t)H * D; a.nhead_stride_q = a.nhead_stride_o = D;
    a.batch_stride_q = a.batch_stride_o = (int64_t)S * H * D;
    a.nhead_stride_lse = S; a.batch_stride_lse = (int64_t)H * S;
    a.k_cache = dk; a.v_cache = dv;
    a.stride_k = a.stride_v = (int64_t)HK * D; a.nhead_stride_k = a.nhead_stride_v = D;
    a.seqlen_k = dsk;
    if (P) {
        a.is_paged = 1; a.page_size = P; a.num_total_pages = pool_pages; a.kv_layout = FMHA_KV_LAYOUT_LINEAR;
        a.page_stride_k = a.page_stride_v = (int64_t)P * HK * D;
        a.page_table = FMHA_PAGE_TABLE_SGLANG_1D;
        a.kv_indptr = dindptr; a.kv_page_indices = didx; a.kv_last_page_lens = dlast;
    } else {
        a.batch_stride_k = a.batch_stride_v = (int64_t)max_sk * HK * D;
    }
    if (kv8) { a.kv_scale = FMHA_KV_SCALE_PER_TENSOR; a.k_descale = a.v_descale = ddesc; }
    a.scale = 1.f / sqrtf((float)D);
    if (o.causal) { a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0; }
    a.num_splits = o.splits;

    fmha_status st = fmha_decode_plan_make(&decode_set, &a, &plan);
    if (st != FMHA_OK) { fprintf(stderr, "plan: %s: %s\n", fmha_status_str(st), fmha_last_error()); return 1; }
    if (plan.workspace_size) CK(cudaMalloc(&dws, plan.workspace_size));
    a.workspace = dws; a.workspace_size = plan.workspace_size;
    printf("kernel %s\nsplits %d, workspace %zu bytes, grid %d x %d x %d, combine %s\n", plan.kernel->name,
           plan.num_splits, plan.workspace_size, plan.grid_x, plan.grid_y, plan.grid_z,
           plan.combine ? plan.combine->name : "none");
    st = fmha_decode_run(&plan, &a, 0);
    if (st != FMHA_OK) { fprintf(stderr, "run: %s: %s\n", fmha_status_str(st), fmha_last_error()); return 1; }
    CK(cudaDeviceSynchronize());

    int bad = 0;
    if (o.v) {
        float *hlse = (float *)malloc(nq / D * 4);
        double *sc = (double *)malloc(sizeof(double) * (max_sk + 1)), *orow = (double *)malloc(sizeof(double) * D), lse;
        float *fq = (float *)malloc(sizeof(float) * nq);
        fmha_ref_fwd r;
        fmha_ref_err eo;
        double lse_err = 0.0;
        CK(cudaMemcpy(ho, dout, nq * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hlse, dlse, nq / D * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < nq; ++i) fq[i] = fmha_ref_bits16_to_f32(hq[i], a.q_dtype == FMHA_DTYPE_BF16);
        memset(&r, 0, sizeof(r));
        r.is_group_mode = 1; r.batch = B; r.nhead_q = H; r.nhead_k = HK; r.seqstart_q = sq; r.seqstart_k = skk;
        r.hdim_q = r.hdim_v = D; r.q = fq; r.k = rk; r.v = rv;
        r.stride_q = (int64_t)H * D; r.nhead_stride_q = D;   /* [b * s + i] rows: batch-major like a */
        r.stride_k = r.stride_v = (int64_t)HK * D; r.nhead_stride_k = r.nhead_stride_v = D;
        r.scale = a.scale;
        r.mask_type = o.causal ? FMHA_REF_MASK_BOTTOM_RIGHT : FMHA_REF_MASK_NONE;
        r.window_left = -1; r.window_right = o.causal ? 0 : -1;
        fmha_ref_err_init(&eo);
        for (b = 0; b < B; ++b)
            for (int hh = 0; hh < H; ++hh)
                for (int i = 0; i < S; ++i) {
                    fmha_ref_fwd_row(&r, b, hh, i, sc, orow, &lse);
                    const size_t at = ((size_t)(b * S + i) * H + hh) * D;
                    for (int c = 0; c < D; ++c) {
                        const float g = fmha_ref_bits16_to_f32(ho[at + c], out_dt == FMHA_DTYPE_BF16);
                        if (!isfinite(g)) ++bad;
                        fmha_ref_err_add(&eo, g, orow[c]);
                    }
                    const float gl = hlse[(size_t)b * H * S + (size_t)hh * S + i];
                    if (isinf(lse) ? gl != (float)lse : !(fabs(gl - lse) <= 2e-3)) ++bad;
                    else if (!isinf(lse) && fabs(gl - lse) > lse_err) lse_err = fabs(gl - lse);
                }
        const double tol = out_dt == FMHA_DTYPE_BF16 ? 1e-2 : 2e-3;
        const double rel = fmha_ref_err_rel_l2(&eo);
        if (rel > tol) ++bad;
        printf("validation: rel-L2 %.3g (tol %.0e), max LSE error %.3g, %d bad -> %s\n", rel, tol, lse_err, bad,
               bad ? "FAIL" : "PASS");
        free(hlse); free(sc); free(orow); free(fq);
    }

    /* timing: events around each call, median */
    {
        float ms[1024];
        cudaEvent_t e0, e1;
        const int n = o.repeat < 1024 ? o.repeat : 1024;
        CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
        for (int i = 0; i < o.warmup; ++i) fmha_decode_run(&plan, &a, 0);
        for (int i = 0; i < n; ++i) {
            CK(cudaEventRecord(e0));
            st = fmha_decode_run(&plan, &a, 0);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&ms[i], e0, e1));
            if (st != FMHA_OK) { fprintf(stderr, "run: %s\n", fmha_last_error()); return 1; }
        }
        qsort(ms, n, sizeof(float), ex_cmp_float);
        const double bytes = 2.0 * total_k * HK * D * kes;
        printf("time %.1f us, KV read %.0f GB/s\n", ms[n / 2] * 1e3, bytes / (ms[n / 2] * 1e-3) / 1e9);
    }
    return bad ? 1 : 0;
}
