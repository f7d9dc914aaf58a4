/*
 * fwd_gqa.cu - grouped-query and multi-query attention (GQA / MQA): fewer
 * K/V heads than query heads.
 *
 * Set nhead_k to the number of K/V heads (nhead_q % nhead_k == 0); query
 * head h reads K/V head h / (nhead_q / nhead_k). K and V are passed with
 * their own head count and strides, nothing is repeated or copied. MQA is
 * nhead_k = 1. The same kernels serve every ratio.
 *
 * Checked, bf16 b=2 s_q=s_k=333 d=128, O against the CPU reference:
 *   GQA 16 query heads over 4 K/V heads, MQA 8 query heads over 1.
 */
#define EX_PROG "fwd_gqa"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

int main(void)
{
    static const int heads[2][2] = { { 16, 4 }, { 8, 1 } };   /* (nhead_q, nhead_k): GQA, MQA */
    fmha_fwd_plan plan;
    fx_check c;
    int i;

    fx_device();
    fx_check_init(&c);
    for (i = 0; i < 2; i++) {
        fx_fwd f;
        /* K/V [b, s_k, nhead_k, d]: row stride nhead_k * d (set by fx_fwd_make) */
        fx_fwd_make(&f, FMHA_DTYPE_BF16, 2, heads[i][0], heads[i][1], 333, 333, 128, 20 + i);
        FX_OK(fmha_fwd_check(&kernels, &f.a, &plan));
        FX_OK(fmha_fwd(&kernels, &f.a, NULL));
        fx_fwd_check(&f, NULL, &c);
        fx_fwd_free(&f);
    }
    return fx_report(&c, fx_tol(1), "bf16 GQA 16:4 and MQA 8:1", plan.kernel->name);
}
