/*
 * fwd_bias.cu - elementwise attention bias (CK's elementwise_bias): a tensor
 * added to the scaled scores before the mask and the softmax, e.g. a learned
 * relative-position bias or an additive padding mask.
 *
 * Pass bias (device), bias_dtype (FP16, BF16 or FP32) and element strides:
 * element (b, h, i, j) sits at b * batch_stride_bias + h * nhead_stride_bias
 * + i * stride_bias + j; a stride of 0 shares the bias over batch entries or
 * heads (here: [1, h, s_q, s_k], one bias per head for the whole batch). A
 * -inf entry hides its key like a mask does. The bias is compiled in or out
 * per kernel: declare a BIAS row (the ALiBi column holds NOALIBI, ALIBI or
 * BIAS, so a kernel has one or the other).
 *
 * Checked, bf16 b=2 h=8 (GQA 8:2) s_q 111 s_k 300 d=128, a bf16 bias in
 * [-2, 2] with -inf on the last 20 keys (a padded tail), causal bottom-right:
 * O and LSE against the CPU reference.
 */
#define EX_PROG "fwd_bias"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, BIAS, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

int main(void)
{
    enum { B = 2, H = 8, HK = 2, SQ = 111, SK = 300, D = 128 };
    const size_t n = (size_t)H * SQ * SK;   /* [1, h, s_q, s_k] */
    uint16_t *bits = (uint16_t *)fx_host(n * 2);
    float *biasf = (float *)fx_host(n * 4);
    fmha_ref_rng rng = fmha_ref_rng_make(7);
    fmha_ref_fwd p;
    fmha_fwd_plan plan;
    fx_check c;
    fx_fwd f;
    size_t i;

    fx_device();
    for (i = 0; i < n; i++) {
        const float v = i % SK >= SK - 20 ? -INFINITY : fmha_ref_rng_uniform(&rng, -2.0f, 2.0f);
        bits[i] = fmha_ref_f32_to_bf16(v);
        biasf[i] = fmha_ref_bf16_to_f32(bits[i]);   /* the values the GPU sees */
    }
    fx_fwd_make(&f, FMHA_DTYPE_BF16, B, H, HK, SQ, SK, D, 41);
    f.a.bias = fx_to_device(bits, n * 2);
    f.a.bias_dtype = FMHA_DTYPE_BF16;
    f.a.stride_bias = SK;
    f.a.nhead_stride_bias = (int64_t)SQ * SK;
    f.a.batch_stride_bias = 0;              /* shared by the batch entries */
    f.a.mask_type = FMHA_MASK_BOTTOM_RIGHT; f.a.window_left = -1; f.a.window_right = 0;
    f.a.lse = f.lse_buf;
    FX_OK(fmha_fwd_check(&kernels, &f.a, &plan));
    FX_OK(fmha_fwd(&kernels, &f.a, NULL));

    /* the reference with the same bias */
    p = fx_fwd_ref(&f, NULL);
    p.bias = biasf;
    p.stride_bias = f.a.stride_bias; p.nhead_stride_bias = f.a.nhead_stride_bias; p.batch_stride_bias = 0;
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(f.oh, f.a.o, f.nq * 2);
    fx_to_host(f.lseh, f.a.lse, (size_t)B * H * SQ * 4);
    fx_check_init(&c);
    fx_check_rows(&c, &p, f.oh, 1, f.lseh, 2e-3, 0);
    return fx_report(&c, fx_tol(1), "bf16 bias [1, h, s_q, s_k] with a -inf tail, causal bottom-right",
                     plan.kernel->name);
}
