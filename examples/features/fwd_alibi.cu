/*
 * fwd_alibi.cu - ALiBi (attention with linear biases): each score gets
 * -slope_h * |i + s_k - s_q - j| added, a per-head penalty on distance.
 *
 * Pass alibi_slopes, a device float array of nhead_q slopes shared by the
 * batch (alibi_batch_stride = 0) or [batch, nhead_q] (alibi_batch_stride =
 * nhead_q); NULL turns it off. The bias is bottom-right aligned (the last
 * query row is at distance 0 from the last key), as FlashAttention's.
 * ALiBi is compiled in or out per kernel: declare an ALIBI row.
 *
 * Checked, bf16 b=2 h=8 s_q 111 s_k 300 d=128, the usual slopes 2^(-8(h+1)/H)
 * per head and batch entry 1 twice as steep (per-batch slopes), with a causal
 * bottom-right mask: O and LSE against the CPU reference.
 */
#define EX_PROG "fwd_alibi"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, MASK, NOSOFTCAP, ALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

int main(void)
{
    enum { B = 2, H = 8 };
    float slopes[B * H];                    /* [batch, nhead_q] */
    fmha_fwd_plan plan;
    fx_check c;
    fx_fwd f;
    int b, h;

    fx_device();
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) slopes[b * H + h] = (float)pow(2.0, -8.0 * (h + 1) / H) * (b + 1);
    fx_fwd_make(&f, FMHA_DTYPE_BF16, B, H, H, 111, 300, 128, 40);
    f.a.alibi_slopes = (const float *)fx_to_device(slopes, sizeof(slopes));
    f.a.alibi_batch_stride = H;             /* 0: one slope per head for every batch entry */
    f.a.mask_type = FMHA_MASK_BOTTOM_RIGHT; f.a.window_left = -1; f.a.window_right = 0;
    f.a.lse = f.lse_buf;
    FX_OK(fmha_fwd_check(&kernels, &f.a, &plan));
    FX_OK(fmha_fwd(&kernels, &f.a, NULL));
    fx_check_init(&c);
    fx_fwd_check(&f, slopes, &c);
    return fx_report(&c, fx_tol(1), "bf16 ALiBi per-batch slopes, causal bottom-right", plan.kernel->name);
}
