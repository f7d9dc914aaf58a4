/*
 * fmha_fwd.cu - command-line example of the forward family, in the style of CK
 * Tile's tile_example_fmha_fwd: describe one problem with -key=value options, run
 * it with the library's default kernel set, print the kernel chosen, the median
 * time, TFLOPS and GB/s, and check the result against the CPU reference of
 * tests/ref/fmha_ref.h.
 *
 *   fmha_fwd -b=2 -h=8 -h_k=2 -s=1024 -s_k=4096 -d=128 -prec=bf16 -mask=b
 *   fmha_fwd -mode=1 -b=3 -s=17,300,0 -s_k=17,300,5 -mask=t:64,0 -lse=1
 *   fmha_fwd --list-kernels
 *
 * Options (defaults in brackets):
 *   -b [2] batch     -h [8] query heads     -h_k [=h] KV heads (GQA/MQA)
 *   -s [3328] query length; in group mode (-mode=1) a comma list, one entry per
 *      batch entry, a single value meaning all equal      -s_k [=s] key lengths, same
 *   -d [128] head dim (multiple of 8, <= 256)     -prec [fp16] fp16 | bf16
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

DECL_FMHA_KERNEL_SET(fmha_default, FMHA_DEFAULT_FWD_SET)

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
    int list_kernels;
} options;

static void usage(void)
{
    fprintf(stderr,
            "usage: fmha_fwd [-b=2] [-h=8] [-h_k=H] [-s=3328|list] [-s_k=S|list] [-d=128]\n"
            "                [-prec=fp16|bf16] [-mode=0|1] [-mask=0|t|b|t:l,r|b:l,r] [-lse=0|1]\n"
            "                [-logits_soft_cap=F] [-alibi=0|1] [-iperm=0|1] [-operm=0|1] [-scale=F]\n"
            "                [-v=0|1] [-warmup=5] [-repeat=20] [-seed=N] [-json=0|1] [--list-kernels]\n"
            "(the comment at the top of examples/fmha_fwd.cu describes each option)\n");
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
        else if (!strcmp(key, "mask")) {
            o->mask_str = eq;
            if (ex_parse_mask(eq, &o->mask, &o->wl, &o->wr) != 0) { fprintf(stderr, "fmha_fwd: bad -mask=%s\n", eq); return -1; }
        } else if (!strcmp(key, "prec")) {
            if (!strcmp(eq, "fp16")) o->dtype = FMHA_DTYPE_FP16;
            else if (!strcmp(eq, "bf16")) o->dtype = FMHA_DTYPE_BF16;
            else { fprintf(stderr, "fmha_fwd: -prec must be fp16 or bf16\n"); return -1; }
        } else {
            fprintf(stderr, "fmha_fwd: unknown option -%s\n", key);
            return -1;
        }
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
    int ndev = 0, bi, i, hh, x, maxq = 0, maxk = 0, all_square = 1, is_bf16;
    int64_t tq = 0, tk = 0;
    size_t nq, nk, no, nlse, idx;
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmha_ref_fwd p;
    fmha_status st;
    fmha_ref_rng rng;
    uint16_t *hq, *hk, *hv, *ho;
    float *fq, *fk, *fv, *hlse = NULL, *hslopes = NULL;
    void *dq, *dk, *dv, *dout;
    float *dlse = NULL, *dslopes = NULL;
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
    is_bf16 = o.dtype == FMHA_DTYPE_BF16;

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
    hq = (uint16_t *)malloc((nq + 1) * 2); hk = (uint16_t *)malloc((nk + 1) * 2);
    hv = (uint16_t *)malloc((nk + 1) * 2); ho = (uint16_t *)malloc((no + 1) * 2);
    fq = (float *)malloc((nq + 1) * 4); fk = (float *)malloc((nk + 1) * 4); fv = (float *)malloc((nk + 1) * 4);
    hlse = (float *)malloc((nlse + 1) * 4);
    hslopes = (float *)malloc(sizeof(float) * (size_t)o.h);
    if (!hq || !hk || !hv || !ho || !fq || !fk || !fv || !hlse || !hslopes) {
        fprintf(stderr, "fmha_fwd: out of host memory\n");
        return 2;
    }
    rng = fmha_ref_rng_make(o.seed);
    for (idx = 0; idx < nq; idx++) { hq[idx] = fmha_ref_f32_to_bits16(fmha_ref_rng_input(&rng, 1.0f), is_bf16); fq[idx] = fmha_ref_bits16_to_f32(hq[idx], is_bf16); }
    for (idx = 0; idx < nk; idx++) { hk[idx] = fmha_ref_f32_to_bits16(fmha_ref_rng_input(&rng, 1.0f), is_bf16); fk[idx] = fmha_ref_bits16_to_f32(hk[idx], is_bf16); }
    for (idx = 0; idx < nk; idx++) { hv[idx] = fmha_ref_f32_to_bits16(fmha_ref_rng_input(&rng, 1.0f), is_bf16); fv[idx] = fmha_ref_bits16_to_f32(hv[idx], is_bf16); }
    for (hh = 0; hh < o.h; hh++) hslopes[hh] = (float)pow(2.0, -8.0 * (hh + 1) / o.h);

    CHECK_CUDA(cudaMalloc(&dq, (nq + 8) * 2));
    CHECK_CUDA(cudaMalloc(&dk, (nk + 8) * 2));
    CHECK_CUDA(cudaMalloc(&dv, (nk + 8) * 2));
    CHECK_CUDA(cudaMalloc(&dout, (no + 8) * 2));
    CHECK_CUDA(cudaMalloc((void **)&dlse, (nlse + 1) * 4));
    CHECK_CUDA(cudaMalloc((void **)&dslopes, sizeof(float) * (size_t)o.h));
    CHECK_CUDA(cudaMalloc((void **)&dssq, sizeof(int32_t) * (size_t)(o.b + 1)));
    CHECK_CUDA(cudaMalloc((void **)&dssk, sizeof(int32_t) * (size_t)(o.b + 1)));
    CHECK_CUDA(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dk, hk, nk * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dv, hv, nk * 2, cudaMemcpyHostToDevice));
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
        bytes = 2.0 * ((double)nq + 2.0 * nk + no) + (o.lse ? 4.0 * nlse : 0.0);
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
                    double lse_ref;
                    int row_bad = 0, check;
                    /* every element finite, whatever the sampling */
                    for (x = 0; x < o.d; x++)
                        if (!isfinite(fmha_ref_bits16_to_f32(ho[oo + x], is_bf16))) { bad_elems++; row_bad = 1; }
                    if (o.lse && !(isfinite(hlse[fmha_ref_off_lse(&p, bi, hh, i)]) ||
                                   hlse[fmha_ref_off_lse(&p, bi, hh, i)] == -INFINITY)) { bad_elems++; row_bad = 1; }
                    /* evenly spaced rows, always the first and last of a sequence */
                    check = stride_rows <= 1.0 || i == 0 || i == sq[bi] - 1 ||
                            fmod((double)i + hh * 7.0 + bi * 13.0, stride_rows) < 1.0;
                    if (!check) { bad_rows += row_bad; continue; }
                    rows_checked++;
                    fmha_ref_fwd_row(&p, bi, hh, i, scores, orow, &lse_ref);
                    for (x = 0; x < o.d; x++) {
                        float g = fmha_ref_bits16_to_f32(ho[oo + x], is_bf16);
                        if (isinf(lse_ref) && g != 0.0f) row_bad = 1;
                        if (isfinite(g)) fmha_ref_err_add(&err, g, orow[x]);
                    }
                    if (o.lse) {
                        float gl = hlse[fmha_ref_off_lse(&p, bi, hh, i)];
                        if (isinf(lse_ref)) { if (gl != -INFINITY) row_bad = 1; }
                        else {
                            double e = fabs((double)gl - lse_ref);
                            if (!(e <= (o.cap > 0 ? 5e-3 : 2e-3))) row_bad = 1;
                            if (e > lse_err || e != e) lse_err = e;
                        }
                    }
                    bad_rows += row_bad;
                }
        rel = fmha_ref_err_rel_l2(&err);
        valid = bad_rows == 0 && rel <= (is_bf16 ? 1e-2 : 2e-3);
        vstr = valid ? "y" : "n";
        free(scores);
        free(orow);
    }

    /* ---- report ------------------------------------------------------------- */
    if (o.json) {
        printf("{\"prec\": \"%s\", \"mode\": \"%s\", \"layout\": \"%s/%s\", \"b\": %d, \"h\": %d, \"h_k\": %d, "
               "\"s\": \"%s\", \"s_k\": \"%s\", \"d\": %d, \"scale\": %g, \"logits_soft_cap\": %g, "
               "\"alibi\": %d, \"lse\": %d, \"mask\": \"%s\", \"kernel\": \"%s\", \"why\": \"%s\", \"ms\": %.5f, "
               "\"tflops\": %.3f, \"gbps\": %.2f, \"flops\": %.6g, \"valid\": \"%s\", \"rel_l2\": %.3g, "
               "\"rows_checked\": %lld, \"rows\": %lld}\n",
               is_bf16 ? "bf16" : "fp16", a.is_group_mode ? "group" : "batch", o.iperm ? "bhsd" : "bshd",
               o.operm ? "bhsd" : "bshd", o.b, o.h, o.h_k, o.s_str, o.s_k_str, o.d, o.scale, o.cap, o.alibi,
               o.lse, o.mask_str, plan.kernel->name, plan.why, ms, tflops, gbs, flops, vstr, rel, rows_checked, rows_total);
    } else {
        printf("pipeline: %s\n", plan.why);
        printf("[%s|%s|%s/%s] b:%d, h:%d/%d, s:%s/%s, d:%d, scale_s:%g, logits_soft_cap:%g, alibi:%s, lse:%d, "
               "mask:%s, %s, %.4f ms, %.2f TFlops, %.2f GB/s, valid:%s",
               is_bf16 ? "bf16" : "fp16", a.is_group_mode ? "group" : "batch", o.iperm ? "bhsd" : "bshd",
               o.operm ? "bhsd" : "bshd", o.b, o.h, o.h_k, o.s_str, o.s_k_str, o.d, o.scale, o.cap,
               o.alibi ? "y" : "n", o.lse, o.mask_str, plan.kernel->name, ms, tflops, gbs, vstr);
        if (o.v && rows_checked < rows_total) printf(" (checked %lld of %lld rows)", rows_checked, rows_total);
        if (o.v && !valid) printf(" (rel-L2 %.3g, %lld bad rows, %lld non-finite, lse err %.3g)", rel, bad_rows, bad_elems, lse_err);
        printf("\n");
    }

    for (i = 0; i < 2 * o.repeat; i++) CHECK_CUDA(cudaEventDestroy(ev[i]));
    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_CUDA(cudaFree(dq)); CHECK_CUDA(cudaFree(dk)); CHECK_CUDA(cudaFree(dv)); CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(dlse)); CHECK_CUDA(cudaFree(dslopes)); CHECK_CUDA(cudaFree(dssq)); CHECK_CUDA(cudaFree(dssk));
    free(hq); free(hk); free(hv); free(ho); free(fq); free(fk); free(fv); free(hlse); free(hslopes);
    free(times); free(ev);
    return valid ? 0 : 1;
}
