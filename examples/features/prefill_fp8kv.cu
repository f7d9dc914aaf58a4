/*
 * prefill_fp8kv.cu - batch prefill over an FP8 (e4m3) paged KV cache, with a
 * descale per page and KV head: half the bytes of a 16-bit cache.
 *
 * Set kv_dtype = FMHA_DTYPE_FP8 (LINEAR pages, head dim a multiple of 16)
 * and q_dtype BF16 or FP8; the output is bf16. A stored element means
 * stored * descale; kv_scale picks the descales:
 *   NONE        1
 *   PER_TENSOR  k_descale, v_descale: one device float each
 *   PER_PAGE    k_page_descale, v_page_descale: device floats indexed by pool
 *               page and KV head (descale_page_stride, descale_nhead_stride)
 * e4m3 queries take an optional q_descale (NULL: 1). Kernel-set rows use the
 * dtype FP8: X(PREFILL, FP8, ...). On an H100 e4m3 queries run the Hopper
 * pipeline in e4m3 (P rounded to e4m3 per key tile, as the FP8 forward);
 * bf16 queries run it in fp16 on pages widened in shared memory under
 * per-tensor descales, and (as here, per page) the portable pipeline, as
 * other GPUs do (in fp16).
 *
 * Checked, GQA 8:2, d=128, causal bottom-right, 3 sequences of 37/1/200 new
 * tokens over 100/64/700 keys in shuffled pages of 16 with per-page descales,
 * once with bf16 queries and once with e4m3 queries (q_descale 1/448): O and
 * LSE against the CPU reference on the dequantised values (on the e4m3
 * pipeline the reference rounds P as the kernel does, as tests/gpu do).
 */
#define EX_PROG "prefill_fp8kv"
#include "features.h"

#define KERNELS(X) \
    X(PREFILL, FP8, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 3, H = 8, HK = 2, D = 128, PAGE = 16 };

int main(void)
{
    const int lq[B] = { 37, 1, 200 }, lk[B] = { 100, 64, 700 };
    const float q_descale = 1.0f / 448.0f;
    int32_t ssq[B + 1];
    int b, q8;
    size_t nq, nrows, i;
    fmha_ref_rng rng = fmha_ref_rng_make(70);
    float *qf = NULL, *lseh;
    uint16_t *oh;
    const char *pipes[2] = { "", "" };
    char what[160];
    fmha_fwd_plan plan;
    fx_pool P;
    fx_check c;

    fx_device();
    ssq[0] = 0;
    for (b = 0; b < B; b++) ssq[b + 1] = ssq[b] + lq[b];
    nq = (size_t)ssq[B] * H * D;
    nrows = (size_t)ssq[B] * H;
    oh = (uint16_t *)fx_host(nq * 2);
    lseh = (float *)fx_host(nrows * 4);
    fx_pool_make(&P, &rng, FMHA_DTYPE_FP8, B, lk, HK, D, PAGE, 0);    /* e4m3 pages, LINEAR */
    fx_check_init(&c);
    for (q8 = 0; q8 < 2; q8++) {
        fmha_batch_prefill_args a;
        fmha_ref_fwd p;
        int p8;
        /* queries: bf16, or e4m3(x / q_descale) */
        uint16_t *qh = (uint16_t *)fx_host(nq * 2);
        uint8_t *q8h = (uint8_t *)fx_host(nq);
        free(qf);
        qf = (float *)fx_host(nq * 4);
        fx_random16(&rng, nq, 1, 1.0f, qh, qf);
        for (i = 0; i < nq && q8; i++) {
            q8h[i] = fmha_ref_f32_to_e4m3(qf[i] / q_descale);
            qf[i] = fmha_ref_e4m3_to_f32(q8h[i]) * q_descale;
        }
        memset(&a, 0, sizeof(a));
        a.q_dtype = q8 ? FMHA_DTYPE_FP8 : FMHA_DTYPE_BF16;
        a.kv_dtype = FMHA_DTYPE_FP8;
        a.batch = B; a.nhead_q = H; a.nhead_k = HK; a.hdim_q = a.hdim_v = D; a.max_seqlen_q = 200;
        a.q = q8 ? fx_to_device(q8h, nq) : fx_to_device(qh, nq * 2);
        a.seqstart_q = (const int32_t *)fx_to_device(ssq, sizeof(ssq));
        a.o = fx_poisoned(nq * 2);                                  /* bf16 */
        a.lse = (float *)fx_poisoned(nrows * 4);
        a.stride_q = a.stride_o = (int64_t)H * D; a.nhead_stride_q = a.nhead_stride_o = D;
        a.nhead_stride_lse = ssq[B];
        a.k_pool = fx_to_device(P.k, (size_t)P.n_pages * P.ps);     /* one byte an element */
        a.v_pool = fx_to_device(P.v, (size_t)P.n_pages * P.ps);
        a.num_total_pages = P.n_pages; a.page_size = PAGE; a.kv_layout = FMHA_KV_LAYOUT_LINEAR;
        a.page_stride_k = a.page_stride_v = P.ps;
        a.token_stride_k = a.token_stride_v = P.ts;
        a.nhead_stride_k = a.nhead_stride_v = P.hs;
        a.page_table = FMHA_PAGE_TABLE_SGLANG_1D;
        a.kv_indptr = (const int32_t *)fx_to_device(P.indptr, sizeof(int32_t) * (B + 1));
        a.kv_page_indices = (const int32_t *)fx_to_device(P.indices, sizeof(int32_t) * P.indptr[B]);
        a.kv_last_page_lens = (const int32_t *)fx_to_device(P.last, sizeof(int32_t) * B);
        a.kv_scale = FMHA_KV_SCALE_PER_PAGE;                        /* [pool page][KV head] */
        a.k_page_descale = (const float *)fx_to_device(P.kds, sizeof(float) * P.n_pages * HK);
        a.v_page_descale = (const float *)fx_to_device(P.vds, sizeof(float) * P.n_pages * HK);
        a.descale_page_stride = HK; a.descale_nhead_stride = 1;
        a.q_descale = q8 ? (const float *)fx_to_device(&q_descale, sizeof(float)) : NULL;
        a.scale = 1.0f / sqrtf((float)D);
        a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;
        FX_OK(fmha_batch_prefill_check(&kernels, &a, &plan));
        FX_OK(fmha_batch_prefill(&kernels, &a, NULL));
        CHECK_CUDA(cudaDeviceSynchronize());
        fx_to_host(oh, a.o, nq * 2);
        fx_to_host(lseh, a.lse, nrows * 4);

        memset(&p, 0, sizeof(p));
        p.is_group_mode = 1; p.batch = B; p.nhead_q = H; p.nhead_k = HK; p.hdim_q = p.hdim_v = D;
        p.seqstart_q = ssq; p.seqstart_k = P.kstart;
        p.q = qf; p.k = P.kf; p.v = P.vf;                           /* dequantised */
        p.stride_q = p.stride_o = (int64_t)H * D; p.nhead_stride_q = p.nhead_stride_o = D;
        p.stride_k = p.stride_v = (int64_t)HK * D; p.nhead_stride_k = p.nhead_stride_v = D;
        p.nhead_stride_lse = a.nhead_stride_lse;
        p.scale = a.scale; p.mask_type = FMHA_REF_MASK_BOTTOM_RIGHT; p.window_left = -1; p.window_right = 0;
        /* the e4m3 (Hopper) kernels round P to e4m3 per key tile, scaled by each key's V descale */
        p8 = plan.kernel->arch == FMHA_ARCH_SM90A;
        p.p8_vscale = p8 ? P.vsk : NULL;
        fx_check_rows(&c, &p, oh, 1, lseh, 2e-3, p8 ? plan.kernel->tile_n : 0);
        pipes[q8] = plan.kernel->pipeline;
        free(qh); free(q8h);
    }
    snprintf(what, sizeof(what), "e4m3 KV, per-page descales, bf16 queries (%s) and e4m3 queries (%s)", pipes[0],
             pipes[1]);
    return fx_report(&c, fx_tol(1), what, plan.kernel->name);
}
