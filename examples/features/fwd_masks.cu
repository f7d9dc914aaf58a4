/*
 * fwd_masks.cu - causal masks in both alignments and a sliding window, all
 * served by one MASK kernel chosen at run time.
 *
 * A mask is a window (window_left, window_right) around the diagonal, -1
 * meaning unbounded, and an alignment (mask_type):
 *   FMHA_MASK_TOP_LEFT      query i sees key j when i - left <= j <= i + right
 *   FMHA_MASK_BOTTOM_RIGHT  the same, shifted by s_k - s_q (the last query
 *                           row is aligned with the last key: prefill with a
 *                           cached prefix)
 * Causal is (-1, 0); a sliding window of w keys is (w - 1, 0) (FlashAttention
 * semantics). A kernel-set row with MASK serves every one of these; a NOMASK
 * row serves only unmasked problems. A query row that sees no key gets O = 0
 * and LSE = -inf, never NaN.
 *
 * Checked, bf16 b=2 h=8 d=128, O and LSE against the CPU reference:
 *   causal top-left       s_q 200 > s_k 150
 *   causal bottom-right   s_q 200 > s_k 150: the first 50 rows see no key
 *   window (64, 0) bottom-right, s_q 128, s_k 517
 */
#define EX_PROG "fwd_masks"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

typedef struct mask_case {
    int sq, sk;
    fmha_mask_type type;
    int left, right;
} mask_case;

int main(void)
{
    static const mask_case cases[3] = {
        { 200, 150, FMHA_MASK_TOP_LEFT, -1, 0 },       /* causal, top-left */
        { 200, 150, FMHA_MASK_BOTTOM_RIGHT, -1, 0 },   /* causal, bottom-right */
        { 128, 517, FMHA_MASK_BOTTOM_RIGHT, 64, 0 },   /* sliding window */
    };
    fmha_fwd_plan plan;
    fx_check c;
    int i;

    fx_device();
    fx_check_init(&c);
    for (i = 0; i < 3; i++) {
        fx_fwd f;
        fx_fwd_make(&f, FMHA_DTYPE_BF16, 2, 8, 8, cases[i].sq, cases[i].sk, 128, 10 + i);
        f.a.mask_type = cases[i].type;
        f.a.window_left = cases[i].left;
        f.a.window_right = cases[i].right;
        f.a.lse = f.lse_buf;                /* to see the -inf of rows that see no key */
        FX_OK(fmha_fwd_check(&kernels, &f.a, &plan));
        FX_OK(fmha_fwd(&kernels, &f.a, NULL));
        fx_fwd_check(&f, NULL, &c);
        fx_fwd_free(&f);
    }
    return fx_report(&c, fx_tol(1), "bf16 causal top-left, causal bottom-right (s_q > s_k), window (64,0)",
                     plan.kernel->name);
}
