/*
 * fwd_dropout.cu - dropout on the attention probabilities (training).
 *
 * fmha_fwd_args.dropout_p (in [0, 1), taken in 256ths), dropout_seed and
 * dropout_offset: element (i, j) of head h and batch entry b is kept when
 * its Philox byte (include/fmha_tile/tile/philox.h: a pure function of
 * seed, offset, b * nhead_q + h, i and j) is at least round(p * 256), and
 * kept values are scaled by 256 / (256 - that). The LSE is the one without
 * dropout. The Hopper pipeline has no dropout: the fallback rule sends these
 * calls to the portable one, and the plan says so.
 *
 * Checked, bf16 b=2 h=8 (GQA 8:2) s_q 300 s_k 500 d=128, causal bottom-right,
 * p = 0.25: O and LSE against the CPU reference drawing the same decisions,
 * O far from the reference without dropout, and another offset giving
 * another O.
 */
#define EX_PROG "fwd_dropout"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

int main(void)
{
    const int h = 8;
    fmha_fwd_plan plan;
    fx_check c, plain, other;
    fmha_ref_fwd p;
    fx_fwd f;

    fx_device();
    fx_fwd_make(&f, FMHA_DTYPE_BF16, 2, h, 2, 300, 500, 128, 37);
    f.a.mask_type = FMHA_MASK_BOTTOM_RIGHT;
    f.a.window_left = -1; f.a.window_right = 0;
    f.a.lse = f.lse_buf;
    f.a.dropout_p = 0.25f;
    f.a.dropout_seed = 0x5eedull;
    f.a.dropout_offset = 4096;
    FX_OK(fmha_fwd_check(&kernels, &f.a, &plan));
    printf(EX_PROG ": kernel %s (%s)\n", plan.kernel->name, plan.why);
    FX_OK(fmha_fwd(&kernels, &f.a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(f.oh, f.a.o, f.nq * 2);
    fx_to_host(f.lseh, f.a.lse, (size_t)2 * h * 300 * 4);

    /* against the reference drawing the same decisions: O, and the LSE
     * (without dropout) */
    p = fx_fwd_ref(&f, NULL);
    p.dropout_p = f.a.dropout_p;
    p.dropout_seed = f.a.dropout_seed;
    p.dropout_offset = f.a.dropout_offset;
    fx_check_init(&c);
    fx_check_rows(&c, &p, f.oh, 1, f.lseh, 2e-3, 0);

    /* the same output against the reference without dropout, and against
     * the draws of another offset: both far off */
    p.dropout_p = 0.f;
    fx_check_init(&plain);
    fx_check_rows(&plain, &p, f.oh, 1, NULL, 0.0, 0);
    p.dropout_p = f.a.dropout_p;
    p.dropout_offset = f.a.dropout_offset + 1;
    fx_check_init(&other);
    fx_check_rows(&other, &p, f.oh, 1, NULL, 0.0, 0);
    if (!(fmha_ref_err_rel_l2(&plain.err) > 10 * fx_tol(1)) || !(fmha_ref_err_rel_l2(&other.err) > 10 * fx_tol(1))) {
        printf(EX_PROG ": O is as close to the reference without dropout (rel-L2 %.2e) or with another offset "
               "(%.2e) valid:n\n", fmha_ref_err_rel_l2(&plain.err), fmha_ref_err_rel_l2(&other.err));
        return 1;
    }
    return fx_report(&c, fx_tol(1), "bf16 dropout 0.25, GQA 8:2, causal bottom-right", plan.kernel->name);
}
