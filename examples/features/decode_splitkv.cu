/*
 * decode_splitkv.cu - decode with split-KV: a few query rows per sequence
 * (one here: the next token) against a long KV cache, the keys of each
 * sequence cut into splits that run side by side and are merged by a
 * combine kernel (in split order: the result is the same on every run).
 *
 * Fill an fmha_decode_args (queries, O and LSE in batch mode [b, s_q, h, d];
 * the cache contiguous by batch/row/head strides with device key counts
 * seqlen_k[b], or paged with batch prefill's tables and layouts), then
 *   fmha_decode_plan_make(set, &args, &plan)   kernel, split count, workspace
 *                                               (num_splits 0: a heuristic)
 *   args.workspace = <plan.workspace_size bytes of device memory>
 *   fmha_decode_run(&plan, &args, stream)       graph-safe, no allocation
 * One plan serves every call of the same shape (every layer of a step).
 * The query heads that share a K/V head are packed into one tile, so each
 * K/V byte is read once per K/V head. Kernel-set rows: DECODE (page column
 * 0: a contiguous cache; FMHA_ANY adds the LINEAR page classes) and
 * DECODE_VEC (VECTORIZED pages); MASK + SOFTCAP rows serve every mask, soft
 * cap and ALiBi at run time.
 *
 * Checked, bf16, GQA 16:4, d=128, 3 sequences of 1000, 37 and 4096 keys in
 * a contiguous cache of 4096 rows an entry (rows past a sequence's length
 * hold NaN), 4 splits: O and LSE against the CPU reference.
 */
#define EX_PROG "decode_splitkv"
#include "features.h"

#define KERNELS(X) \
    X(DECODE, BF16, 128, MASK, SOFTCAP, 0, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 3, H = 16, HK = 4, S = 1, D = 128, CAP = 4096 };

int main(void)
{
    const int32_t sk[B] = { 1000, 37, 4096 };
    const size_t nq = (size_t)B * S * H * D, nkv = (size_t)B * CAP * HK * D, nrows = (size_t)B * H * S;
    fmha_ref_rng rng = fmha_ref_rng_make(100);
    float *qf = (float *)fx_host(nq * 4), *kf = (float *)fx_host(nkv * 4), *vf = (float *)fx_host(nkv * 4);
    uint16_t *qh = (uint16_t *)fx_host(nq * 2), *kh = (uint16_t *)fx_host(nkv * 2), *vh = (uint16_t *)fx_host(nkv * 2);
    uint16_t *oh = (uint16_t *)fx_host(nq * 2);
    float *lseh = (float *)fx_host(nrows * 4);
    fmha_decode_args a;
    fmha_decode_plan plan;
    fx_check c;
    char what[160];
    int b;

    fx_device();
    fx_random16(&rng, nq, 1, 1.0f, qh, qf);
    fx_random16(&rng, nkv, 1, 1.0f, kh, kf);
    fx_random16(&rng, nkv, 1, 1.0f, vh, vf);
    for (b = 0; b < B; b++) {              /* cache rows past each sequence: NaN */
        const size_t used = (size_t)sk[b] * HK * D, entry = (size_t)CAP * HK * D;
        memset(kh + b * entry + used, 0xFF, (entry - used) * 2);
        memset(vh + b * entry + used, 0xFF, (entry - used) * 2);
    }

    memset(&a, 0, sizeof(a));
    a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16;
    a.batch = B; a.nhead_q = H; a.nhead_k = HK; a.seqlen_q = S; a.hdim_q = a.hdim_v = D;
    a.max_seqlen_k = 4096;                 /* host bound: sizes the split count only */
    a.q = fx_to_device(qh, nq * 2);
    a.o = fx_poisoned(nq * 2);
    a.lse = (float *)fx_poisoned(nrows * 4);
    a.stride_q = a.stride_o = (int64_t)H * D; a.nhead_stride_q = a.nhead_stride_o = D;   /* [b, s_q, h, d] */
    a.batch_stride_q = a.batch_stride_o = (int64_t)S * H * D;
    a.nhead_stride_lse = S; a.batch_stride_lse = (int64_t)H * S;                         /* [b, h, s_q] */
    a.is_paged = 0;                        /* contiguous cache [b, CAP, HK, D] */
    a.k_cache = fx_to_device(kh, nkv * 2);
    a.v_cache = fx_to_device(vh, nkv * 2);
    a.stride_k = a.stride_v = (int64_t)HK * D; a.nhead_stride_k = a.nhead_stride_v = D;
    a.batch_stride_k = a.batch_stride_v = (int64_t)CAP * HK * D;
    a.seqlen_k = (const int32_t *)fx_to_device(sk, sizeof(sk));
    a.cache_batch_idx = NULL;              /* sequence b reads cache entry b */
    a.cache_seqlen_max = CAP;
    a.scale = 1.0f / sqrtf((float)D);
    a.mask_type = FMHA_MASK_NONE; a.window_left = a.window_right = -1;
    a.num_splits = 4;                      /* 0: let the plan choose */

    FX_OK(fmha_decode_plan_make(&kernels, &a, &plan));
    if (plan.workspace_size) CHECK_CUDA(cudaMalloc(&a.workspace, plan.workspace_size));
    a.workspace_size = plan.workspace_size;
    FX_OK(fmha_decode_run(&plan, &a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(oh, a.o, nq * 2);
    fx_to_host(lseh, a.lse, nrows * 4);

    /* the reference, one sequence at a time (batch mode of one entry) */
    fx_check_init(&c);
    for (b = 0; b < B; b++) {
        fmha_ref_fwd p;
        memset(&p, 0, sizeof(p));
        p.batch = 1; p.nhead_q = H; p.nhead_k = HK; p.seqlen_q = S; p.seqlen_k = sk[b]; p.hdim_q = p.hdim_v = D;
        p.q = qf + (size_t)b * S * H * D;
        p.k = kf + (size_t)b * CAP * HK * D;
        p.v = vf + (size_t)b * CAP * HK * D;
        p.stride_q = p.stride_o = (int64_t)H * D; p.nhead_stride_q = p.nhead_stride_o = D;
        p.stride_k = p.stride_v = (int64_t)HK * D; p.nhead_stride_k = p.nhead_stride_v = D;
        p.nhead_stride_lse = S;
        p.scale = a.scale; p.mask_type = FMHA_REF_MASK_NONE; p.window_left = p.window_right = -1;
        fx_check_rows(&c, &p, oh + (size_t)b * S * H * D, 1, lseh + (size_t)b * H * S, 2e-3, 0);
    }
    snprintf(what, sizeof(what), "bf16 GQA 16:4, keys 1000/37/4096, %d splits, workspace %zu bytes",
             plan.num_splits, plan.workspace_size);
    return fx_report(&c, fx_tol(1), what, plan.kernel->name);
}
