/*
 * prefill_paged.cu - batch prefill over a paged KV cache: queries in group
 * (varlen) mode, K and V gathered page by page from a pool, as serving
 * engines (vLLM, SGLang) keep them.
 *
 * Fill an fmha_batch_prefill_args: the queries as in group mode (seqstart_q,
 * max_seqlen_q, row and head strides), the pools (k_pool, v_pool,
 * num_total_pages, page_size: a power of two 1..2048), the layout and one of
 * two page tables, chosen per call:
 *   SGLANG_1D  kv_indptr[batch + 1] (prefix sums of the page counts),
 *              kv_page_indices[], kv_last_page_lens[batch] (1..page_size)
 *   VLLM_2D    block_table[batch][block_table_stride] and seqlen_k[batch]
 *   LINEAR     [pages, page, h_k, d] (or [pages, h_k, page, d]) by
 *              page_stride, token_stride and nhead_stride
 *   VECTORIZED K [pages, h_k, d/8, page, 8], V [pages, h_k, page/8, d, 8]
 *              (vLLM v0 / CK; the token stride is unused)
 * Kernel-set rows: PREFILL for LINEAR pages, PREFILL_VEC for VECTORIZED
 * ones (two rows here); the page column FMHA_ANY gives the tuned page-size
 * classes. fmha_batch_prefill_check_pages() is an optional debugging aid that
 * validates the tables (it synchronises).
 *
 * Checked, bf16, GQA 8:2, d=128, causal bottom-right (new tokens after a
 * cached prefix), 3 sequences of 37/1/200 new tokens over 100/64/700 keys in
 * shuffled pages of 16: O and LSE against the CPU reference on K/V gathered
 * from the pages, for both tables and both layouts.
 */
#define EX_PROG "prefill_paged"
#include "features.h"

#define KERNELS(X)                                                                               \
    X(PREFILL,     BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(PREFILL_VEC, BF16, 128, MASK, NOSOFTCAP, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 3, H = 8, HK = 2, D = 128, PAGE = 16 };

int main(void)
{
    const int lq[B] = { 37, 1, 200 }, lk[B] = { 100, 64, 700 };
    int32_t ssq[B + 1];
    int b, vec, vllm;
    size_t nq, nrows;
    fmha_ref_rng rng = fmha_ref_rng_make(60);
    float *qf, *lseh;
    uint16_t *qh, *oh;
    void *dq;
    fmha_fwd_plan plan;
    fx_check c;

    fx_device();
    ssq[0] = 0;
    for (b = 0; b < B; b++) ssq[b + 1] = ssq[b] + lq[b];
    nq = (size_t)ssq[B] * H * D;
    nrows = (size_t)ssq[B] * H;
    qf = (float *)fx_host(nq * 4); qh = (uint16_t *)fx_host(nq * 2); oh = (uint16_t *)fx_host(nq * 2);
    lseh = (float *)fx_host(nrows * 4);
    fx_random16(&rng, nq, 1, 1.0f, qh, qf);
    dq = fx_to_device(qh, nq * 2);
    fx_check_init(&c);
    for (vec = 0; vec < 2; vec++) {
        fx_pool P;
        void *kpool, *vpool;
        fx_pool_make(&P, &rng, FMHA_DTYPE_BF16, B, lk, HK, D, PAGE, vec);
        kpool = fx_to_device(P.k, (size_t)P.n_pages * P.ps * 2);
        vpool = fx_to_device(P.v, (size_t)P.n_pages * P.ps * 2);
        for (vllm = 0; vllm < 2; vllm++) {
            fmha_batch_prefill_args a;
            fmha_ref_fwd p;
            memset(&a, 0, sizeof(a));
            a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16;
            a.batch = B; a.nhead_q = H; a.nhead_k = HK; a.hdim_q = a.hdim_v = D;
            a.max_seqlen_q = 200;
            a.q = dq; a.seqstart_q = (const int32_t *)fx_to_device(ssq, sizeof(ssq));
            a.o = fx_poisoned(nq * 2);
            a.lse = (float *)fx_poisoned(nrows * 4);
            a.stride_q = a.stride_o = (int64_t)H * D; a.nhead_stride_q = a.nhead_stride_o = D;   /* [total_q, H, D] */
            a.nhead_stride_lse = ssq[B];                                                         /* [H, total_q] */
            a.k_pool = kpool; a.v_pool = vpool;
            a.num_total_pages = P.n_pages; a.page_size = PAGE;
            a.kv_layout = vec ? FMHA_KV_LAYOUT_VECTORIZED : FMHA_KV_LAYOUT_LINEAR;
            a.page_stride_k = a.page_stride_v = P.ps;
            a.token_stride_k = a.token_stride_v = P.ts;
            a.nhead_stride_k = a.nhead_stride_v = P.hs;
            if (vllm) {
                a.page_table = FMHA_PAGE_TABLE_VLLM_2D;
                a.block_table = (const int32_t *)fx_to_device(P.bt, sizeof(int32_t) * B * P.bt_stride);
                a.block_table_stride = P.bt_stride;
                a.seqlen_k = (const int32_t *)fx_to_device(P.seqk, sizeof(int32_t) * B);
            } else {
                a.page_table = FMHA_PAGE_TABLE_SGLANG_1D;
                a.kv_indptr = (const int32_t *)fx_to_device(P.indptr, sizeof(int32_t) * (B + 1));
                a.kv_page_indices = (const int32_t *)fx_to_device(P.indices, sizeof(int32_t) * P.indptr[B]);
                a.kv_last_page_lens = (const int32_t *)fx_to_device(P.last, sizeof(int32_t) * B);
            }
            a.kv_scale = FMHA_KV_SCALE_NONE;
            a.scale = 1.0f / sqrtf((float)D);
            a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;   /* causal */
            FX_OK(fmha_batch_prefill_check(&kernels, &a, &plan));
            FX_OK(fmha_batch_prefill_check_pages(&a, NULL));
            FX_OK(fmha_batch_prefill(&kernels, &a, NULL));
            CHECK_CUDA(cudaDeviceSynchronize());
            fx_to_host(oh, a.o, nq * 2);
            fx_to_host(lseh, a.lse, nrows * 4);

            /* the reference: group mode on K/V gathered from the pages */
            memset(&p, 0, sizeof(p));
            p.is_group_mode = 1; p.batch = B; p.nhead_q = H; p.nhead_k = HK; p.hdim_q = p.hdim_v = D;
            p.seqstart_q = ssq; p.seqstart_k = P.kstart;
            p.q = qf; p.k = P.kf; p.v = P.vf;
            p.stride_q = p.stride_o = (int64_t)H * D; p.nhead_stride_q = p.nhead_stride_o = D;
            p.stride_k = p.stride_v = (int64_t)HK * D; p.nhead_stride_k = p.nhead_stride_v = D;
            p.nhead_stride_lse = a.nhead_stride_lse;
            p.scale = a.scale; p.mask_type = FMHA_REF_MASK_BOTTOM_RIGHT; p.window_left = -1; p.window_right = 0;
            fx_check_rows(&c, &p, oh, 1, lseh, 2e-3, 0);
            CHECK_CUDA(cudaFree(a.o)); CHECK_CUDA(cudaFree(a.lse));
        }
    }
    return fx_report(&c, fx_tol(1), "bf16 pages of 16, SGLang and vLLM tables, LINEAR and VECTORIZED", plan.kernel->name);
}
