/*
 * fwd_sinks.cu - attention sinks (gpt-oss): one learned logit per query
 * head joins every row's softmax as a key with no value.
 *
 * fmha_fwd_args.sinks points to fp32 [nhead_q] logits on the device (NULL:
 * none). O = sum_j e^(s_j) v_j / (e^sink + sum_j e^(s_j)) over the final
 * scores s_j; the LSE includes the sink, so a row that sees no key gets
 * O = 0 and LSE = its sink. Sinks are a run-time pointer, not a kernel-set
 * column: every forward, batch-prefill and decode kernel serves them, and
 * the backward returns d loss / d sinks (fmha_bwd_args.dsinks).
 *
 * Checked, bf16 b=2 h=8 (GQA 8:2) s_q 300 s_k 200 d=128, causal bottom-right
 * (the first 100 rows see no key): O and LSE against the CPU reference with
 * the sinks, and O far from the reference without them.
 */
#define EX_PROG "fwd_sinks"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

int main(void)
{
    const int h = 8;
    float sinks[8];
    fmha_fwd_plan plan;
    fx_check c, plain;
    fmha_ref_fwd p;
    fx_fwd f;
    int i;

    fx_device();
    fx_fwd_make(&f, FMHA_DTYPE_BF16, 2, h, 2, 300, 200, 128, 31);
    for (i = 0; i < h; i++) sinks[i] = -1.0f + 0.5f * (float)i;   /* some below the scores, some above */
    f.a.sinks = (const float *)fx_to_device(sinks, sizeof(sinks));
    f.a.mask_type = FMHA_MASK_BOTTOM_RIGHT;
    f.a.window_left = -1; f.a.window_right = 0;
    f.a.lse = f.lse_buf;
    FX_OK(fmha_fwd_check(&kernels, &f.a, &plan));
    FX_OK(fmha_fwd(&kernels, &f.a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(f.oh, f.a.o, f.nq * 2);
    fx_to_host(f.lseh, f.a.lse, (size_t)2 * h * 300 * 4);

    /* against the reference with the sinks: O, and LSE (= the sink on the
     * rows that see no key) */
    p = fx_fwd_ref(&f, NULL);
    p.sinks = sinks;
    fx_check_init(&c);
    fx_check_rows(&c, &p, f.oh, 1, f.lseh, 2e-3, 0);

    /* the same output against the reference without them: far off */
    p.sinks = NULL;
    fx_check_init(&plain);
    fx_check_rows(&plain, &p, f.oh, 1, NULL, 0.0, 0);
    if (!(fmha_ref_err_rel_l2(&plain.err) > 10 * fx_tol(1))) {
        printf(EX_PROG ": O is as close to the reference without sinks (rel-L2 %.2e) valid:n\n",
               fmha_ref_err_rel_l2(&plain.err));
        return 1;
    }
    CHECK_CUDA(cudaFree((void *)f.a.sinks));
    return fx_report(&c, fx_tol(1), "bf16 sinks, GQA 8:2, causal bottom-right (100 rows without keys)",
                     plan.kernel->name);
}
