/*
 * fwd_softcap.cu - logits soft cap (Gemma 2, Grok): scores are bent into
 * (-c, c) before the softmax.
 *
 * With logits_soft_cap = c > 0 each score s = scale * q.k becomes
 * c * tanh(s / c); 0 turns it off. The soft cap is compiled in or out per
 * kernel: declare a SOFTCAP row to call with c > 0 (a NOSOFTCAP set answers
 * FMHA_ERR_NO_KERNEL). A SOFTCAP kernel runs calls without a cap too.
 *
 * Checked, bf16 b=2 h=4 s_q 129 s_k 257 d=128, scale 0.5 (scores of several
 * units) and cap 2, so the cap really bends them: O and LSE against the CPU
 * reference (LSE within 5e-3), and O differs from the uncapped reference.
 */
#define EX_PROG "fwd_softcap"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, NOMASK, SOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

int main(void)
{
    fmha_fwd_plan plan;
    fx_check c, uncapped;
    fmha_ref_fwd p;
    fx_fwd f;

    fx_device();
    fx_fwd_make(&f, FMHA_DTYPE_BF16, 2, 4, 4, 129, 257, 128, 30);
    f.a.scale = 0.5f;                       /* large scores, for the cap to matter */
    f.a.logits_soft_cap = 2.0f;             /* s -> 2 tanh(s / 2) */
    f.a.lse = f.lse_buf;
    FX_OK(fmha_fwd_check(&kernels, &f.a, &plan));
    FX_OK(fmha_fwd(&kernels, &f.a, NULL));
    fx_check_init(&c);
    fx_fwd_check(&f, NULL, &c);

    /* the same output against the reference without the cap: far off */
    p = fx_fwd_ref(&f, NULL);
    p.logits_soft_cap = 0.0f;
    fx_check_init(&uncapped);
    fx_check_rows(&uncapped, &p, f.oh, 1, NULL, 0.0, 0);
    if (!(fmha_ref_err_rel_l2(&uncapped.err) > 10 * fx_tol(1))) {
        printf(EX_PROG ": O is as close to the uncapped reference (rel-L2 %.2e): the cap did nothing valid:n\n",
               fmha_ref_err_rel_l2(&uncapped.err));
        return 1;
    }
    return fx_report(&c, fx_tol(1), "bf16 soft cap 2, scale 0.5", plan.kernel->name);
}
