/*
 * fmha_fwd.cu - command-line example of the forward family, in the style of CK
 * Tile's tile_example_fmha_fwd: describe one problem with -key=value options, run
 * it with the library's default kernel set, print the kernel chosen, the median
 * time, TFLOPS and GB/s, and check the result against the CPU reference of
 * tests/ref/fmha_ref.h.
 *
 *   fmha_fwd -b=2 -h=8 -h_k=2 -s=1024 -s_k=4096 -d=128 -prec=bf16 -mask=b
 *   fmha_fwd -mode=1 -b=3 -s=17,300,0 -s_k=17,300,5 -mask=t:64,0 -lse=1
 *   fmha_fwd -prec=fp8 -descale=0.5,0.37,1.9 -mask=b -lse=1
 *   fmha_fwd --list-kernels
 *
 * Options (defaults in brackets):
 *   -b [2] batch     -h [8] query heads     -h_k [=h] KV heads (GQA/MQA)
 *   -s [3328] query length; in group mode (-mode=1) a comma list, one entry per
 *      batch entry, a single value meaning all equal      -s_k [=s] key lengths, same
 *   -d [128] head dim (multiple of 8, <= 256; fp8: of 16)     -prec [fp16] fp16 | bf16 | fp8
 *      fp8: e4m3 Q, K and V, bf16 O, on the Hopper (sm_90a) pipeline only (other
 *      GPUs: not supported, exit 2)
 *   -descale [none] fp8 per-tensor descales q,k,v (one value: all three), each > 0;
 *      real = stored * descale; none passes NULL (1)
 *   -mode [0] 0 batch, 1 group (varlen)
 *   -mask [0] 0 none; t (or 1) causal top-left; b (or 2) causal bottom-right;
 *      t:l,r / b:l,r sliding window (left, right), -1 unbounded, in either alignment
 *   -lse [0] also write the log-sum-exp     -logits_soft_cap [0] cap c > 0
 *   -alibi [0] ALiBi with the usual slopes 2^(-8(h+1)/H), shared by the batch
 *   -iperm [1] Q/K/V layout: 1 bhsd [b,h,s,d], 0 bshd [b,s,h,d]   -operm [1] same for O
 *   -scale [1/sqrt(d)] softmax scale
 *   -v [1] validate against the CPU reference     -warmup [5] -repeat [20]
 *   -seed [11939] input seed     -json [0] print one JSON object instead of text
 *   --list-kernels  print the kernel set as JSON (fmha_set_json) and exit
 *
 * Time is the median of `repeat` launches, each bracketed by its own pair of device
 * events. FLOPs follow the project's benchmark convention: 4 * h * d * pairs, where
 * pairs = sum over batch entries of s_q * s_k without a mask, half of that for a
 * causal mask when every s_q == s_k, and otherwise (windows, causal with s_q != s_k)
 * the exact number of (query, key) pairs the mask lets through. GB/s counts Q, K, V
 * and O (and LSE) once. Validation checks every output element for NaN and compares
 * rows with the reference (rel-L2 fp16 2e-3 / bf16 1e-2, LSE 2e-3 absolute); large
 * problems compare an evenly spaced subset of rows, which the output says.
 * fp8: random e4m3 codes of magnitude 2^-6..1.875 (never zero or NaN), the reference
 * on the dequantised values (stored * descale) rounding P to e4m3 per key tile as
 * the kernel does (fmha_ref_fwd_row_p8 with the kernel's tile_n and its running max
 * and row sum: fmha_kernel_info.p8_qsum); O within the bf16
 * rel-L2 1e-2 of it (an exact reference would be about 3e-2 off: P's 3-bit
 * mantissa), LSE within 2e-3 + 2^-11 * max_j scale * sum_c |q_c k_jc| (the fp32
 * accumulation of the e4m3 products), the bounds of tests/gpu/test_fwd_fp8.cu.
 * Exit status: 0 when valid (or -v=0), 1 when invalid, 2 on bad options, an
 * unsupported problem or no GPU.
 *
 * Build: nvcc -x cu -std=c++17 -O2 -gencode=arch=compute_80,code=sm_80 \
 *             -gencode=arch=compute_90a,code=sm_90a -Iinclude examples/fmha_fwd.cu \
 *             -o build/examples/fmha_fwd
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_tile.h"
#define EX_PROG "fmha_fwd"
#include "example_util.h"
#include "../tests/ref/fmha_ref.h"

/* The library's forward rows, and the e4m3 forward's Hopper rows for -prec=fp8;
 * FMHA_EXAMPLE_ONE_ROW (`make run`, and the test build's compile check): only
 * the row `make run`'s problem needs (bf16, hdim 128, a mask), to reach a
 * first result fast. */
#if defined(FMHA_EXAMPLE_ONE_ROW)
#  define FMHA_FWD_CLI_SET(X) X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
#else
#  define FMHA_FWD_CLI_SET(X) FMHA_DEFAULT_FWD_SET(X) FMHA_DEFAULT_FWD_FP8_SET(X)
#endif
DECL_FMHA_KERNEL_SET(fmha_default, FMHA_FWD_CLI_SET)

#define MAX_BATCH 4096
/* Rows x keys x d the reference may spend per validation before sampling rows. */
#define REF_BUDGET 4e8

/* ============================================================================
 * Options
 * ========================================================================== */
typedef struct options {
    int b, h, h_k, d, mode, lse, alibi, iperm, operm, v, warmup, repeat, json;
    unsigned long long seed;
    fmha_dtype dtype;
    float scale, cap;
    fmha_mask_type mask;
    int wl, wr;
    const char *mask_str;
    const char *s_str, *s_k_str;
    const char *descale_str;     /* NULL: no descales */
    float descale[3];            /* q, k, v (1 without -descale) */
    int list_kernels;
} options;

static void usage(void)
{
    fprintf(stderr,
            "usage: fmha_fwd [-b=2] [-h=8] [-h_k=H] [-s=3328|list] [-s_k=S|list] [-d=128]\n"
            "                [-prec=fp16|bf16|fp8] [-descale=q,k,v] [-mode=0|1] [-lse=0|1]\n"
            "                [-mask=0|t|b|t:l,r|b:l,r] [-logits_soft_cap=F] [-alibi=0|1] [-iperm=0|1]\n"
            "                [-operm=0|1] [-scale=F] [-v=0|1] [-warmup=5] [-repeat=20] [-seed=N]\n"
            "                [-json=0|1] [--list-kernels]\n"
            "fp8: e4m3 Q/K/V (random codes), bf16 O, Hopper only; -descale: per-tensor descales\n"
            "(real = stored * descale), checked against a reference that rounds P to e4m3 as\n"
            "the kernel does (rel-L2 1e-2)\n"
            "(the comment at the top of examples/fmha_fwd.cu describes each option)\n");
}

/* "q,k,v" or one value for all three; each finite and > 0. 0 or -1. */
static int parse_descale(const char *s, float *ds)
{
    int n = 0, i;
    while (n < 3) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || !(v > 0.0) || !isfinite(v) || (float)v <= 0.0f) return -1;
        ds[n++] = (float)v;
        s = end;
        if (*s != ',') break;
        s++;
    }
    if (*s != 0 || (n != 1 && n != 3)) return -1;
    for (i = n; i < 3; i++) ds[i] = ds[0];
    return 0;
}

/* n random inputs of dtype dt: the stored bits into raw (2 bytes an element,
 * 1 for e4m3) and the values the kernel computes with into f. 16-bit: the
 * usual magnitudes 1/64..1; e4m3: codes of exponent field 1..7 (2^-6..1.875,
 * never zero, never NaN), times the descale. */
static void fill_input(fmha_ref_rng *rng, fmha_dtype dt, float descale, size_t n, unsigned char *raw, float *f)
{
    size_t idx;
    for (idx = 0; idx < n; idx++) {
        if (dt == FMHA_DTYPE_FP8) {
            raw[idx] = fmha_ref_rng_e4m3(rng, 1, 7);
            f[idx] = fmha_ref_e4m3_to_f32(raw[idx]) * descale;
        } else {
            const int is_bf16 = dt == FMHA_DTYPE_BF16;
            const uint16_t u = fmha_ref_f32_to_bits16(fmha_ref_rng_input(rng, 1.0f), is_bf16);
            memcpy(raw + 2 * idx, &u, 2);
            f[idx] = fmha_ref_bits16_to_f32(u, is_bf16);
        }
    }
}

static int parse_args(int argc, char **argv, options *o)
{
    int i;
    ex_int_opt ints[13];
    memset(o, 0, sizeof(*o));
    /* integer options by name (filled here: C++ rejects designated arrays) */
    ints[0].name = "b";       ints[0].field = &o->b;
    ints[1].name = "h";       ints[1].field = &o->h;
    ints[2].name = "h_k";     ints[2].field = &o->h_k;
    ints[3].name = "d";       ints[3].field = &o->d;
    ints[4].name = "mode";    ints[4].field = &o->mode;
    ints[5].name = "lse";     ints[5].field = &o->lse;
    ints[6].name = "alibi";   ints[6].field = &o->alibi;
    ints[7].name = "iperm";   ints[7].field = &o->iperm;
    ints[8].name = "operm";   ints[8].field = &o->operm;
    ints[9].name = "v";       ints[9].field = &o->v;
    ints[10].name = "warmup"; ints[10].field = &o->warmup;
    ints[11].name = "repeat"; ints[11].field = &o->repeat;
    ints[12].name = "json";   ints[12].field = &o->json;
    o->b = 2; o->h = 8; o->h_k = -1; o->d = 128; o->iperm = 1; o->operm = 1; o->v = 1;
    o->warmup = 5; o->repeat = 20; o->seed = 11939; o->dtype = FMHA_DTYPE_FP16;
    o->mask = FMHA_MASK_NONE; o->wl = o->wr = -1; o->mask_str = "0";
    o->s_str = "3328"; o->s_k_str = NULL;
    o->descale_str = NULL; o->descale[0] = o->descale[1] = o->descale[2] = 1.0f;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *eq;
        char key[64];
        if (!strcmp(a, "--list-kernels") || !strcmp(a, "-list-kernels")) { o->list_kernels = 1; continue; }
        if (!strcmp(a, "-help") || !strcmp(a, "--help") || !strcmp(a, "-?")) { usage(); exit(0); }
        eq = ex_split_opt(a, key, sizeof(key));
        if (!eq) { fprintf(stderr, "fmha_fwd: expected -key=value, got %s\n", argv[i]); return -1; }
        if (ex_set_int_opt(ints, (int)(sizeof(ints) / sizeof(ints[0])), key, eq)) continue;
        if (!strcmp(key, "seed")) o->seed = strtoull(eq, NULL, 10);
        else if (!strcmp(key, "s")) o->s_str = eq;
        else if (!strcmp(key, "s_k")) o->s_k_str = eq;
        else if (!strcmp(key, "scale")) o->scale = (float)atof(eq);
        else if (!strcmp(key, "logits_soft_cap")) o->cap = (float)atof(eq);
        else if (!strcmp(key, "descale")) {
            if (parse_descale(eq, o->descale) != 0) {
                fprintf(stderr, "fmha_fwd: bad -descale=%s (q,k,v or one value, each finite and > 0)\n", eq);
                return -1;
            }
            o->descale_str = eq;
        }
        else if (!strcmp(key, "mask")) {
            o->mask_str = eq;
            if (ex_parse_mask(eq, &o->mask, &o->wl, &o->wr) != 0) { fprintf(stderr, "fmha_fwd: bad -mask=%s\n", eq); return -1; }
        } else if (!strcmp(key, "prec")) {
            if (!strcmp(eq, "fp16")) o->dtype = FMHA_DTYPE_FP16;
            else if (!strcmp(eq, "bf16")) o->dtype = FMHA_DTYPE_BF16;
            else if (!strcmp(eq, "fp8")) o->dtype = FMHA_DTYPE_FP8;
            else { fprintf(stderr, "fmha_fwd: -prec must be fp16, bf16 or fp8\n"); return -1; }
        } else {
            fprintf(stderr, "fmha_fwd: unknown option -%s\n", key);
            return -1;
        }
    }
    if (o->descale_str && o->dtype != FMHA_DTYPE_FP8) {
        fprintf(stderr, "fmha_fwd: -descale needs -prec=fp8\n");
        return -1;
    }
    if (o->h_k <= 0) o->h_k = o->h;
    if (!o->s_k_str) o->s_k_str = o->s_str;
    if (o->scale <= 0.0f) o->scale = 1.0f / sqrtf((float)(o->d > 0 ? o->d : 1));
    if (o->repeat < 1) o->repeat = 1;
    if (o->warmup < 0) o->warmup = 0;
    if (o->b < 0 || o->b > MAX_BATCH) { fprintf(stderr, "fmha_fwd: -b must be in 0..%d\n", MAX_BATCH); return -1; }
    return 0;
}

/* ============================================================================
 * Main
 * ========================================================================== */
int main(int argc, char **argv)
{
    options o;
    static int sq[MAX_BATCH], sk[MAX_BATCH];
    static int32_t ssq[MAX_BATCH + 1], ssk[MAX_BATCH + 1];
    int ndev = 0, bi, i, hh, x, maxq = 0, maxk = 0, all_square = 1, is_fp8, out_bf16;
    size_t esz;                    /* bytes of a Q/K/V element */
    const char *prec;
    int64_t tq = 0, tk = 0;
    size_t nq, nk, no, nlse;
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmha_ref_fwd p;
    fmha_status st;
    fmha_ref_rng rng;
    unsigned char *hq, *hk, *hv;
    uint16_t *ho;
    float *fq, *fk, *fv, *hlse = NULL, *hslopes = NULL;
    void *dq, *dk, *dv, *dout;
    float *dlse = NULL, *dslopes = NULL, *ddescale = NULL;
    int32_t *dssq = NULL, *dssk = NULL;
    float *times, ms;
    double pairs, flops, bytes, tflops, gbs, rel = 0.0, lse_err = 0.0;
    long long rows_total = 0, rows_checked = 0, bad_elems = 0, bad_rows = 0;
    int valid = 1;
    const char *vstr = "n/a";
    cudaStream_t stream;
    cudaEvent_t *ev;

    if (parse_args(argc, argv, &o) != 0) { usage(); return 2; }
    if (o.list_kernels) {
        size_t len = fmha_set_json(&fmha_default, NULL, 0);
        char *buf = (char *)malloc(len + 1);
        if (!buf) return 2;
        fmha_set_json(&fmha_default, buf, len + 1);
        fputs(buf, stdout);
        free(buf);
        return 0;
    }
    if (ex_parse_lengths(o.s_str, o.b, sq, o.mode) != 0 || ex_parse_lengths(o.s_k_str, o.b, sk, o.mode) != 0) {
        fprintf(stderr, "fmha_fwd: bad -s/-s_k (%s, %s): batch mode takes one length, group mode one or %d\n",
                o.s_str, o.s_k_str, o.b);
        return 2;
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "fmha_fwd: no GPU\n");
        return 2;
    }
    is_fp8 = o.dtype == FMHA_DTYPE_FP8;
    out_bf16 = o.dtype != FMHA_DTYPE_FP16;   /* fp8: a bf16 O */
    esz = is_fp8 ? 1 : 2;
    prec = is_fp8 ? "fp8" : out_bf16 ? "bf16" : "fp16";

    for (bi = 0; bi < o.b; bi++) {
        ssq[bi] = (int32_t)tq; ssk[bi] = (int32_t)tk;
        tq += sq[bi]; tk += sk[bi];
        if (sq[bi] > maxq) maxq = sq[bi];
        if (sk[bi] > maxk) maxk = sk[bi];
        if (sq[bi] != sk[bi]) all_square = 0;
    }
    ssq[o.b] = (int32_t)tq; ssk[o.b] = (int32_t)tk;
    if (tq > INT32_MAX || tk > INT32_MAX) { fprintf(stderr, "fmha_fwd: total length exceeds int32\n"); return 2; }

    /* ---- arguments: contiguous bhsd (perm 1) or bshd (perm 0) --------------- */
    memset(&a, 0, sizeof(a));
    a.dtype = o.dtype;
    a.is_group_mode = o.mode == 1;
    a.batch = o.b; a.nhead_q = o.h; a.nhead_k = o.h_k;
    a.seqlen_q = a.is_group_mode ? maxq : sq[0];
    a.seqlen_k = a.is_group_mode ? maxk : sk[0];
    a.max_seqlen_q = maxq;
    a.hdim_q = a.hdim_v = o.d;
    a.scale = o.scale;
    a.logits_soft_cap = o.cap;
    a.mask_type = o.mask; a.window_left = o.wl; a.window_right = o.wr;
    {
        /* rows per batch entry (batch mode) or in total (group mode) */
        int64_t rq = a.is_group_mode ? tq : sq[0], rk = a.is_group_mode ? tk : sk[0], d = o.d;
        if (o.iperm) {
            a.stride_q = d; a.nhead_stride_q = rq * d; a.batch_stride_q = o.h * rq * d;
            a.stride_k = d; a.nhead_stride_k = rk * d; a.batch_stride_k = o.h_k * rk * d;
        } else {
            a.stride_q = o.h * d; a.nhead_stride_q = d; a.batch_stride_q = rq * o.h * d;
            a.stride_k = o.h_k * d; a.nhead_stride_k = d; a.batch_stride_k = rk * o.h_k * d;
        }
        a.stride_v = a.stride_k; a.nhead_stride_v = a.nhead_stride_k; a.batch_stride_v = a.batch_stride_k;
        if (o.operm) { a.stride_o = d; a.nhead_stride_o = rq * d; a.batch_stride_o = o.h * rq * d; }
        else { a.stride_o = o.h * d; a.nhead_stride_o = d; a.batch_stride_o = rq * o.h * d; }
        a.nhead_stride_lse = rq; a.batch_stride_lse = o.h * rq;
        if (a.is_group_mode) a.batch_stride_q = a.batch_stride_k = a.batch_stride_v = a.batch_stride_o = 0;
        nq = (size_t)(a.is_group_mode ? tq : (int64_t)o.b * sq[0]) * o.h * d;
        nk = (size_t)(a.is_group_mode ? tk : (int64_t)o.b * sk[0]) * o.h_k * d;
        no = nq;
        nlse = (size_t)(a.is_group_mode ? tq : (int64_t)o.b * sq[0]) * o.h;
    }

    /* ---- inputs --------------------------------------------------------------- */
    hq = (unsigned char *)malloc((nq + 1) * esz); hk = (unsigned char *)malloc((nk + 1) * esz);
    hv = (unsigned char *)malloc((nk + 1) * esz); ho = (uint16_t *)malloc((no + 1) * 2);
    fq = (float *)malloc((nq + 1) * 4); fk = (float *)malloc((nk + 1) * 4); fv = (float *)malloc((nk + 1) * 4);
    hlse = (float *)malloc((nlse + 1) * 4);
    hslopes = (float *)malloc(sizeof(float) * (size_t)o.h);
    if (!hq || !hk || !hv || !ho || !fq || !fk || !fv || !hlse || !hslopes) {
        fprintf(stderr, "fmha_fwd: out of host memory\n");
        return 2;
    }
    rng = fmha_ref_rng_make(o.seed);
    fill_input(&rng, o.dtype, o.descale[0], nq, hq, fq);
    fill_input(&rng, o.dtype, o.descale[1], nk, hk, fk);
    fill_input(&rng, o.dtype, o.descale[2], nk, hv, fv);
    for (hh = 0; hh < o.h; hh++) hslopes[hh] = (float)pow(2.0, -8.0 * (hh + 1) / o.h);

    CHECK_CUDA(cudaMalloc(&dq, nq * esz + 16));
    CHECK_CUDA(cudaMalloc(&dk, nk * esz + 16));
    CHECK_CUDA(cudaMalloc(&dv, nk * esz + 16));
    CHECK_CUDA(cudaMalloc(&dout, (no + 8) * 2));
    CHECK_CUDA(cudaMalloc((void **)&dlse, (nlse + 1) * 4));
    CHECK_CUDA(cudaMalloc((void **)&dslopes, sizeof(float) * (size_t)o.h));
    CHECK_CUDA(cudaMalloc((void **)&dssq, sizeof(int32_t) * (size_t)(o.b + 1)));
    CHECK_CUDA(cudaMalloc((void **)&dssk, sizeof(int32_t) * (size_t)(o.b + 1)));
    CHECK_CUDA(cudaMalloc((void **)&ddescale, sizeof(o.descale)));
    CHECK_CUDA(cudaMemcpy(dq, hq, nq * esz, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dk, hk, nk * esz, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dv, hv, nk * esz, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(ddescale, o.descale, sizeof(o.descale), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dslopes, hslopes, sizeof(float) * (size_t)o.h, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dssq, ssq, sizeof(int32_t) * (size_t)(o.b + 1), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dssk, ssk, sizeof(int32_t) * (size_t)(o.b + 1), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dout, 0xff, (no + 8) * 2));        /* NaN: unwritten output shows */
    CHECK_CUDA(cudaMemset(dlse, 0xff, (nlse + 1) * 4));
    CHECK_CUDA(cudaDeviceSynchronize());

    a.q = dq; a.k = dk; a.v = dv; a.o = dout;
    a.lse = o.lse ? dlse : NULL;
    a.alibi_slopes = o.alibi ? dslopes : NULL;
    a.alibi_batch_stride = 0;
    a.seqstart_q = a.is_group_mode ? dssq : NULL;
    a.seqstart_k = a.is_group_mode ? dssk : NULL;
    if (o.descale_str) { a.q_descale = ddescale; a.k_descale = ddescale + 1; a.v_descale = ddescale + 2; }

    /* ---- "supported?", then one checked launch, warm-up, timed launches ----- */
    st = fmha_fwd_check(&fmha_default, &a, &plan);
    if (st != FMHA_OK) {
        fprintf(stderr, "fmha_fwd: not supported: %s: %s\n", fmha_status_str(st), fmha_last_error());
        return 2;
    }
    CHECK_CUDA(cudaStreamCreate(&stream));
    st = fmha_fwd(&fmha_default, &a, (void *)stream);
    if (st != FMHA_OK) {
        fprintf(stderr, "fmha_fwd: %s: %s\n", fmha_status_str(st), fmha_last_error());
        return 2;
    }
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(ho, dout, no * 2, cudaMemcpyDeviceToHost));
    if (o.lse) CHECK_CUDA(cudaMemcpy(hlse, dlse, nlse * 4, cudaMemcpyDeviceToHost));

    for (i = 0; i < o.warmup; i++)
        if (fmha_fwd(&fmha_default, &a, (void *)stream) != FMHA_OK) return 2;
    times = (float *)malloc(sizeof(float) * (size_t)o.repeat);
    ev = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * 2 * (size_t)o.repeat);
    if (!times || !ev) return 2;
    for (i = 0; i < 2 * o.repeat; i++) CHECK_CUDA(cudaEventCreate(&ev[i]));
    for (i = 0; i < o.repeat; i++) {
        CHECK_CUDA(cudaEventRecord(ev[2 * i], stream));
        if (fmha_fwd(&fmha_default, &a, (void *)stream) != FMHA_OK) return 2;
        CHECK_CUDA(cudaEventRecord(ev[2 * i + 1], stream));
    }
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (i = 0; i < o.repeat; i++) CHECK_CUDA(cudaEventElapsedTime(&times[i], ev[2 * i], ev[2 * i + 1]));
    qsort(times, (size_t)o.repeat, sizeof(float), ex_cmp_float);
    ms = times[o.repeat / 2];

    /* ---- reference problem (host copies at the same strides) ---------------- */
    memset(&p, 0, sizeof(p));
    p.is_group_mode = a.is_group_mode; p.batch = o.b; p.nhead_q = o.h; p.nhead_k = o.h_k;
    p.seqlen_q = sq[0]; p.seqlen_k = sk[0]; p.seqstart_q = ssq; p.seqstart_k = ssk;
    p.hdim_q = p.hdim_v = o.d;
    p.q = fq; p.k = fk; p.v = fv;
    p.stride_q = a.stride_q; p.nhead_stride_q = a.nhead_stride_q; p.batch_stride_q = a.batch_stride_q;
    p.stride_k = a.stride_k; p.nhead_stride_k = a.nhead_stride_k; p.batch_stride_k = a.batch_stride_k;
    p.stride_v = a.stride_v; p.nhead_stride_v = a.nhead_stride_v; p.batch_stride_v = a.batch_stride_v;
    p.stride_o = a.stride_o; p.nhead_stride_o = a.nhead_stride_o; p.batch_stride_o = a.batch_stride_o;
    p.nhead_stride_lse = a.nhead_stride_lse; p.batch_stride_lse = a.batch_stride_lse;
    p.scale = o.scale; p.logits_soft_cap = o.cap;
    p.alibi_slopes = o.alibi ? hslopes : NULL; p.alibi_batch_stride = 0;
    p.mask_type = (int)o.mask; p.window_left = o.wl; p.window_right = o.wr;
    if (is_fp8) fmha_ref_p8_qsum(&p, plan.kernel->p8_qsum);   /* the kernel's e4m3 softmax */

    /* ---- FLOPs and bytes ------------------------------------------------------ */
    {
        int causal = o.mask != FMHA_MASK_NONE && o.wl == -1 && o.wr == 0;
        int unmasked = o.mask == FMHA_MASK_NONE || (o.wl == -1 && o.wr == -1);
        double full = 0.0;
        for (bi = 0; bi < o.b; bi++) full += (double)sq[bi] * sk[bi];
        if (unmasked) pairs = full;
        else if (causal && all_square) pairs = full / 2;
        else pairs = fmha_ref_visible_pairs(&p);
        flops = 4.0 * o.h * o.d * pairs;
        bytes = (double)esz * ((double)nq + 2.0 * nk) + 2.0 * no + (o.lse ? 4.0 * nlse : 0.0);
        tflops = ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0;
        gbs = ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0;
    }

    /* ---- validation ----------------------------------------------------------- */
    if (o.v) {
        fmha_ref_err err;
        double work = 0.0, stride_rows = 1.0;
        double *scores = (double *)malloc(sizeof(double) * ((size_t)maxk + 1));
        double *orow = (double *)malloc(sizeof(double) * (size_t)o.d);
        if (!scores || !orow) { fprintf(stderr, "fmha_fwd: out of host memory\n"); return 2; }
        fmha_ref_err_init(&err);
        for (bi = 0; bi < o.b; bi++) { work += (double)sq[bi] * sk[bi] * o.d * o.h; rows_total += (long long)sq[bi] * o.h; }
        if (work > REF_BUDGET) stride_rows = ceil(work / REF_BUDGET);
        for (bi = 0; bi < o.b; bi++)
            for (hh = 0; hh < o.h; hh++)
                for (i = 0; i < sq[bi]; i++) {
                    int64_t oo = fmha_ref_off_o(&p, bi, hh, i);
                    double lse_ref, sabs = 0.0;
                    int row_bad = 0, check;
                    /* every element finite, whatever the sampling */
                    for (x = 0; x < o.d; x++)
                        if (!isfinite(fmha_ref_bits16_to_f32(ho[oo + x], out_bf16))) { bad_elems++; row_bad = 1; }
                    if (o.lse && !(isfinite(hlse[fmha_ref_off_lse(&p, bi, hh, i)]) ||
                                   hlse[fmha_ref_off_lse(&p, bi, hh, i)] == -INFINITY)) { bad_elems++; row_bad = 1; }
                    /* evenly spaced rows, always the first and last of a sequence */
                    check = stride_rows <= 1.0 || i == 0 || i == sq[bi] - 1 ||
                            fmod((double)i + hh * 7.0 + bi * 13.0, stride_rows) < 1.0;
                    if (!check) { bad_rows += row_bad; continue; }
                    rows_checked++;
                    if (is_fp8) fmha_ref_fwd_row_p8(&p, bi, hh, i, plan.kernel->tile_n, scores, orow, &lse_ref, &sabs);
                    else fmha_ref_fwd_row(&p, bi, hh, i, scores, orow, &lse_ref);
                    for (x = 0; x < o.d; x++) {
                        float g = fmha_ref_bits16_to_f32(ho[oo + x], out_bf16);
                        if (isinf(lse_ref) && g != 0.0f) row_bad = 1;
                        if (isfinite(g)) fmha_ref_err_add(&err, g, orow[x]);
                    }
                    if (o.lse) {
                        float gl = hlse[fmha_ref_off_lse(&p, bi, hh, i)];
                        if (isinf(lse_ref)) { if (gl != -INFINITY) row_bad = 1; }
                        else {
                            double e = fabs((double)gl - lse_ref);
                            /* fp8: plus the accumulation error of the e4m3 products */
                            if (!(e <= (o.cap > 0 ? 5e-3 : 2e-3) + ldexp(sabs, -11))) row_bad = 1;
                            if (e > lse_err || e != e) lse_err = e;
                        }
                    }
                    bad_rows += row_bad;
                }
        rel = fmha_ref_err_rel_l2(&err);
        valid = bad_rows == 0 && rel <= (out_bf16 ? 1e-2 : 2e-3);
        vstr = valid ? "y" : "n";
        free(scores);
        free(orow);
    }

    /* ---- report ------------------------------------------------------------- */
    if (o.json) {
        printf("{\"prec\": \"%s\", \"mode\": \"%s\", \"layout\": \"%s/%s\", \"b\": %d, \"h\": %d, \"h_k\": %d, "
               "\"s\": \"%s\", \"s_k\": \"%s\", \"d\": %d, \"scale\": %g, \"logits_soft_cap\": %g, "
               "\"alibi\": %d, \"lse\": %d, \"mask\": \"%s\", \"descale\": \"%s\", \"kernel\": \"%s\", "
               "\"pipeline\": \"%s\", \"why\": \"%s\", \"ms\": %.5f, "
               "\"tflops\": %.3f, \"gbps\": %.2f, \"flops\": %.6g, \"valid\": \"%s\", \"rel_l2\": %.3g, "
               "\"rows_checked\": %lld, \"rows\": %lld}\n",
               prec, a.is_group_mode ? "group" : "batch", o.iperm ? "bhsd" : "bshd",
               o.operm ? "bhsd" : "bshd", o.b, o.h, o.h_k, o.s_str, o.s_k_str, o.d, o.scale, o.cap, o.alibi,
               o.lse, o.mask_str, o.descale_str ? o.descale_str : "none", plan.kernel->name,
               plan.kernel->pipeline, plan.why, ms, tflops, gbs, flops, vstr, rel, rows_checked, rows_total);
    } else {
        printf("pipeline: %s\n", plan.why);
        printf("[%s|%s|%s/%s] b:%d, h:%d/%d, s:%s/%s, d:%d, scale_s:%g, logits_soft_cap:%g, alibi:%s, lse:%d, "
               "mask:%s, ",
               prec, a.is_group_mode ? "group" : "batch", o.iperm ? "bhsd" : "bshd",
               o.operm ? "bhsd" : "bshd", o.b, o.h, o.h_k, o.s_str, o.s_k_str, o.d, o.scale, o.cap,
               o.alibi ? "y" : "n", o.lse, o.mask_str);
        if (is_fp8) printf("descale:%s, ", o.descale_str ? o.descale_str : "none");
        printf("%s, %.4f ms, %.2f TFlops, %.2f GB/s, valid:%s", plan.kernel->name, ms, tflops, gbs, vstr);
        if (o.v && rows_checked < rows_total) printf(" (checked %lld of %lld rows)", rows_checked, rows_total);
        if (o.v && !valid) printf(" (rel-L2 %.3g, %lld bad rows, %lld non-finite, lse err %.3g)", rel, bad_rows, bad_elems, lse_err);
        printf("\n");
    }

    for (i = 0; i < 2 * o.repeat; i++) CHECK_CUDA(cudaEventDestroy(ev[i]));
    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_CUDA(cudaFree(dq)); CHECK_CUDA(cudaFree(dk)); CHECK_CUDA(cudaFree(dv)); CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(dlse)); CHECK_CUDA(cudaFree(dslopes)); CHECK_CUDA(cudaFree(dssq)); CHECK_CUDA(cudaFree(dssk));
    CHECK_CUDA(cudaFree(ddescale));
    free(hq); free(hk); free(hv); free(ho); free(fq); free(fk); free(fv); free(hlse); free(hslopes);
    free(times); free(ev);
    return valid ? 0 : 1;
}
