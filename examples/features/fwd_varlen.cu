/*
 * fwd_varlen.cu - the forward pass in group (varlen) mode: a batch of
 * sequences of different lengths packed one after another, as
 * FlashAttention's flash_attn_varlen_func takes them.
 *
 * Set is_group_mode = 1 and pass seqstart_q / seqstart_k: device int32
 * prefix sums of the lengths, batch + 1 entries (sequence b owns rows
 * seqstart[b] .. seqstart[b+1]-1; a length may be 0), plus max_seqlen_q, a
 * host bound of the query lengths that sizes the grid (no host
 * synchronisation). Row strides and head strides are as in batch mode; the
 * batch strides are ignored. Here Q/O are [total_q, head, dim] and K/V
 * [total_k, head_k, dim].
 *
 * Checked: bf16, 4 sequences with query lengths 1, 0, 300, 77 and key
 * lengths 1, 5, 300, 1030, against the CPU reference (rel-L2 <= 1e-2), every
 * element written.
 */
#define EX_PROG "fwd_varlen"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

int main(void)
{
    enum { B = 4, H = 8, HK = 8, D = 128 };
    const int lq[B] = { 1, 0, 300, 77 }, lk[B] = { 1, 5, 300, 1030 };
    int32_t ssq[B + 1], ssk[B + 1];
    int b, max_q = 0;
    size_t nq, nk;
    fmha_ref_rng rng = fmha_ref_rng_make(2);
    float *qf, *kf, *vf;
    uint16_t *qh, *kh, *vh, *oh;
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmha_ref_fwd p;
    fx_check c;

    fx_device();
    ssq[0] = ssk[0] = 0;                      /* prefix sums of the lengths */
    for (b = 0; b < B; b++) {
        ssq[b + 1] = ssq[b] + lq[b];
        ssk[b + 1] = ssk[b] + lk[b];
        if (lq[b] > max_q) max_q = lq[b];
    }
    nq = (size_t)ssq[B] * H * D;
    nk = (size_t)ssk[B] * HK * D;
    qf = (float *)fx_host(nq * 4); kf = (float *)fx_host(nk * 4); vf = (float *)fx_host(nk * 4);
    qh = (uint16_t *)fx_host(nq * 2); kh = (uint16_t *)fx_host(nk * 2); vh = (uint16_t *)fx_host(nk * 2);
    oh = (uint16_t *)fx_host(nq * 2);
    fx_random16(&rng, nq, 1, 1.0f, qh, qf);
    fx_random16(&rng, nk, 1, 1.0f, kh, kf);
    fx_random16(&rng, nk, 1, 1.0f, vh, vf);

    memset(&a, 0, sizeof(a));
    a.dtype = FMHA_DTYPE_BF16;
    a.is_group_mode = 1;
    a.batch = B; a.nhead_q = H; a.nhead_k = HK; a.hdim_q = a.hdim_v = D;
    a.max_seqlen_q = max_q;                   /* grid size; seqlen_q/seqlen_k are ignored */
    a.seqstart_q = (const int32_t *)fx_to_device(ssq, sizeof(ssq));
    a.seqstart_k = (const int32_t *)fx_to_device(ssk, sizeof(ssk));
    a.q = fx_to_device(qh, nq * 2);
    a.k = fx_to_device(kh, nk * 2);
    a.v = fx_to_device(vh, nk * 2);
    a.o = fx_poisoned(nq * 2);
    a.stride_q = (int64_t)H * D; a.nhead_stride_q = D;      /* [total_q, H, D] */
    a.stride_k = (int64_t)HK * D; a.nhead_stride_k = D;     /* [total_k, HK, D] */
    a.stride_v = (int64_t)HK * D; a.nhead_stride_v = D;
    a.stride_o = (int64_t)H * D; a.nhead_stride_o = D;
    a.scale = 1.0f / sqrtf((float)D);
    a.mask_type = FMHA_MASK_NONE; a.window_left = a.window_right = -1;

    FX_OK(fmha_fwd_check(&kernels, &a, &plan));
    FX_OK(fmha_fwd(&kernels, &a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(oh, a.o, nq * 2);

    memset(&p, 0, sizeof(p));               /* the reference takes host seqstarts */
    p.is_group_mode = 1; p.batch = B; p.nhead_q = H; p.nhead_k = HK;
    p.seqstart_q = ssq; p.seqstart_k = ssk; p.hdim_q = p.hdim_v = D;
    p.q = qf; p.k = kf; p.v = vf;
    p.stride_q = a.stride_q; p.nhead_stride_q = a.nhead_stride_q;
    p.stride_k = a.stride_k; p.nhead_stride_k = a.nhead_stride_k;
    p.stride_v = a.stride_v; p.nhead_stride_v = a.nhead_stride_v;
    p.stride_o = a.stride_o; p.nhead_stride_o = a.nhead_stride_o;
    p.scale = a.scale; p.mask_type = FMHA_REF_MASK_NONE; p.window_left = p.window_right = -1;
    fx_check_init(&c);
    fx_check_rows(&c, &p, oh, 1, NULL, 0.0, 0);
    return fx_report(&c, fx_tol(1), "bf16 group mode, q lengths 1,0,300,77, k lengths 1,5,300,1030", plan.kernel->name);
}
