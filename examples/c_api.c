/*
 * c_api.c - a plain C11 program that links the shared library
 * build/libfmha_tile.so (make lib) and runs one forward pass through its C API.
 *
 * No CUDA compiler is involved: the program is built with gcc, includes only
 * include/fmha_tile/api.h (with FMHA_TILE_LINK_SHARED defined, which declares
 * fmha_default_kernel_set() and fmha_version()) and the CUDA runtime's C
 * header, and links -lfmha_tile -lcudart:
 *
 *   gcc -std=c11 -O2 -DFMHA_TILE_LINK_SHARED -Iinclude -I/usr/local/cuda/include \
 *       examples/c_api.c -o build/examples/c_api \
 *       -Lbuild -lfmha_tile -L/usr/local/cuda/lib64 -lcudart -lm \
 *       -Wl,-rpath,'$ORIGIN/..' -Wl,-rpath,/usr/local/cuda/lib64
 *   (or: make c_api)
 *
 * The problem: batch 2, 8 query heads over 2 KV heads (GQA), 200 queries and
 * 333 keys (odd lengths, s_q != s_k), head dim 128, bf16, causal with
 * FlashAttention's bottom-right alignment, log-sum-exp written. Tensors are
 * [batch, seq, heads, dim] ("bshd"), contiguous, addressed by element strides.
 *
 * It asks "supported?" first (fmha_fwd_check: prints the kernel selected), shows
 * what a bad call returns, launches on a stream, and checks a few query rows
 * of O and LSE against a direct CPU computation in double on the same
 * bf16-rounded inputs (rel-L2 <= 1e-2 for O, |dLSE| <= 2e-3).
 *
 * Output: a few lines, then `valid:y` or `valid:n`. Exit status 0 only when
 * valid; with no GPU it prints a SKIP line and exits 0.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include "fmha_tile/api.h"

#define B    2
#define HQ   8
#define HK   2
#define SQ   200
#define SK   333
#define D    128

#define CHECK_CUDA(call)                                                              \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "c_api: %s failed: %s (line %d)\n", #call,                \
                    cudaGetErrorString(e_), __LINE__);                                \
            printf("valid:n\n");                                                      \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

/* ---- bf16 on the host: round to nearest even, and back ---------------------- */
static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);   /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- inputs: uniform in [-1, 1) from a 64-bit LCG -------------------------------- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float rng_uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* bshd element offsets */
static size_t off_q(int b, int i, int h) { return (((size_t)b * SQ + i) * HQ + h) * D; }
static size_t off_k(int b, int j, int h) { return (((size_t)b * SK + j) * HK + h) * D; }

/* CPU reference of one query row: O row (D values) and LSE, in double.
 * Causal, bottom-right aligned: query i sees keys j <= i + SK - SQ. */
static void reference_row(const float *q, const float *k, const float *v, int b, int h, int i,
                          float scale, double *o, double *lse)
{
    static double s[SK];
    const int hk = h / (HQ / HK);
    const int last = i + SK - SQ;      /* last key this query sees */
    double mx = -INFINITY, sum = 0.0;
    int j, x;
    for (x = 0; x < D; x++) o[x] = 0.0;
    if (last < 0) { *lse = -INFINITY; return; }
    for (j = 0; j <= last && j < SK; j++) {
        double dot = 0.0;
        for (x = 0; x < D; x++) dot += (double)q[off_q(b, i, h) + x] * k[off_k(b, j, hk) + x];
        s[j] = dot * scale;
        if (s[j] > mx) mx = s[j];
    }
    for (j = 0; j <= last && j < SK; j++) {
        double p = exp(s[j] - mx);
        sum += p;
        for (x = 0; x < D; x++) o[x] += p * v[off_k(b, j, hk) + x];
    }
    for (x = 0; x < D; x++) o[x] /= sum;
    *lse = mx + log(sum);
}

int main(void)
{
    const size_t nq = (size_t)B * SQ * HQ * D, nk = (size_t)B * SK * HK * D;
    const size_t nlse = (size_t)B * HQ * SQ;
    const float scale = 1.0f / sqrtf((float)D);
    const fmha_kernel_set *set = fmha_default_kernel_set();
    uint16_t *hq, *hk, *hv, *ho;
    float *fq, *fk, *fv, *hlse;
    void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL;
    float *dlse = NULL;
    cudaStream_t stream;
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmha_status st;
    int ndev = 0, valid = 1, r;
    size_t i;
    double num = 0.0, den = 0.0, lse_err = 0.0;
    /* rows checked: (batch, head, query) */
    static const int rows[][3] = { { 0, 0, 0 }, { 0, 3, 1 }, { 0, 7, 99 }, { 1, 1, 133 },
                                   { 1, 4, 198 }, { 1, 7, SQ - 1 } };
    const int nrows = (int)(sizeof(rows) / sizeof(rows[0]));

    printf("c_api: libfmha_tile %s, default set of %d kernels\n", fmha_version(), fmha_set_size(set));
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP c_api: no GPU\n");
        return 0;
    }

    /* ---- host inputs (bf16, and the same values as float for the reference) -- */
    hq = malloc(nq * 2); hk = malloc(nk * 2); hv = malloc(nk * 2); ho = malloc(nq * 2);
    fq = malloc(nq * 4); fk = malloc(nk * 4); fv = malloc(nk * 4); hlse = malloc(nlse * 4);
    if (!hq || !hk || !hv || !ho || !fq || !fk || !fv || !hlse) {
        fprintf(stderr, "c_api: out of host memory\n");
        printf("valid:n\n");
        return 1;
    }
    for (i = 0; i < nq; i++) { hq[i] = f32_to_bf16(rng_uniform()); fq[i] = bf16_to_f32(hq[i]); }
    for (i = 0; i < nk; i++) { hk[i] = f32_to_bf16(rng_uniform()); fk[i] = bf16_to_f32(hk[i]); }
    for (i = 0; i < nk; i++) { hv[i] = f32_to_bf16(rng_uniform()); fv[i] = bf16_to_f32(hv[i]); }

    /* ---- device buffers ----------------------------------------------------------- */
    CHECK_CUDA(cudaMalloc(&dq, nq * 2));
    CHECK_CUDA(cudaMalloc(&dk, nk * 2));
    CHECK_CUDA(cudaMalloc(&dv, nk * 2));
    CHECK_CUDA(cudaMalloc(&dout, nq * 2));
    CHECK_CUDA(cudaMalloc((void **)&dlse, nlse * 4));
    CHECK_CUDA(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dk, hk, nk * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dv, hv, nk * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dout, 0xff, nq * 2));       /* NaN: an unwritten output shows */
    CHECK_CUDA(cudaMemset(dlse, 0xff, nlse * 4));

    /* ---- arguments: bshd strides in elements ------------------------------------ */
    memset(&a, 0, sizeof(a));
    a.dtype = FMHA_DTYPE_BF16;
    a.is_group_mode = 0;
    a.batch = B; a.nhead_q = HQ; a.nhead_k = HK;
    a.seqlen_q = SQ; a.seqlen_k = SK; a.max_seqlen_q = SQ;
    a.hdim_q = D; a.hdim_v = D;
    a.q = dq; a.k = dk; a.v = dv; a.o = dout; a.lse = dlse;
    a.stride_q = (int64_t)HQ * D; a.nhead_stride_q = D; a.batch_stride_q = (int64_t)SQ * HQ * D;
    a.stride_k = (int64_t)HK * D; a.nhead_stride_k = D; a.batch_stride_k = (int64_t)SK * HK * D;
    a.stride_v = a.stride_k;      a.nhead_stride_v = D; a.batch_stride_v = a.batch_stride_k;
    a.stride_o = a.stride_q;      a.nhead_stride_o = D; a.batch_stride_o = a.batch_stride_q;
    a.nhead_stride_lse = SQ;      a.batch_stride_lse = (int64_t)HQ * SQ;
    a.scale = scale;
    a.logits_soft_cap = 0.0f;
    a.alibi_slopes = NULL; a.alibi_batch_stride = 0;
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;   /* causal */

    /* ---- a bad call returns a status and a message, and launches nothing ---------- */
    {
        fmha_fwd_args bad = a;
        bad.nhead_k = 3;
        st = fmha_fwd_check(set, &bad, NULL);
        printf("c_api: bad call (nhead_k = 3) -> %s: %s\n", fmha_status_str(st), fmha_last_error());
        if (st == FMHA_OK) valid = 0;
    }

    /* ---- supported? then launch ------------------------------------------------- */
    st = fmha_fwd_check(set, &a, &plan);
    if (st != FMHA_OK) {
        fprintf(stderr, "c_api: not supported: %s: %s\n", fmha_status_str(st), fmha_last_error());
        printf("valid:n\n");
        return 1;
    }
    printf("c_api: kernel %s, grid %d x %d x %d, block %d\n", plan.kernel->name, plan.grid_x,
           plan.grid_y, plan.grid_z, plan.block);
    CHECK_CUDA(cudaStreamCreate(&stream));
    st = fmha_fwd(set, &a, (void *)stream);
    if (st != FMHA_OK) {
        fprintf(stderr, "c_api: fmha_fwd: %s: %s\n", fmha_status_str(st), fmha_last_error());
        printf("valid:n\n");
        return 1;
    }
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(ho, dout, nq * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hlse, dlse, nlse * 4, cudaMemcpyDeviceToHost));

    /* ---- check: every output finite; a few rows against the CPU ----------------- */
    for (i = 0; i < nq; i++)
        if (!isfinite(bf16_to_f32(ho[i]))) { valid = 0; break; }
    if (!valid) printf("c_api: non-finite output at element %zu\n", i);
    for (r = 0; r < nrows; r++) {
        double o[D], lse, got_lse;
        int b = rows[r][0], h = rows[r][1], q = rows[r][2], x;
        reference_row(fq, fk, fv, b, h, q, scale, o, &lse);
        for (x = 0; x < D; x++) {
            double g = bf16_to_f32(ho[off_q(b, q, h) + x]);
            num += (g - o[x]) * (g - o[x]);
            den += o[x] * o[x];
        }
        got_lse = hlse[(size_t)b * HQ * SQ + (size_t)h * SQ + q];
        if (fabs(got_lse - lse) > lse_err) lse_err = fabs(got_lse - lse);
    }
    {
        double rel = sqrt(num / (den > 0 ? den : 1.0));
        printf("c_api: %d rows checked: rel-L2 %.2e (bf16 limit 1e-2), max |dLSE| %.2e (limit 2e-3)\n",
               nrows, rel, lse_err);
        if (!(rel <= 1e-2) || !(lse_err <= 2e-3)) valid = 0;
    }

    cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dlse);
    cudaStreamDestroy(stream);
    free(hq); free(hk); free(hv); free(ho); free(fq); free(fk); free(fv); free(hlse);
    printf("valid:%s\n", valid ? "y" : "n");
    return valid ? 0 : 1;
}
