/*
 * fwd_batch.cu - the forward pass in batch mode: every batch entry has the
 * same query length and the same key length.
 *
 * Declare the kernels you need with DECL_FMHA_KERNEL_SET (one row here: fp16,
 * kernel head dim 128, no mask, no soft cap, no ALiBi, tuned tiles), fill an
 * fmha_fwd_args with pointers and 64-bit element strides (batch, head, row;
 * the head-dim stride is 1), and call fmha_fwd(set, &args, stream). This
 * example lays Q, K, V and O out as [batch, seq, head, dim] ("bshd"); for
 * [batch, head, seq, dim] swap the row and head strides. fmha_fwd_check()
 * answers "supported, and by which kernel?" without launching.
 *
 * Checked: O of b=2, h=8, s_q=300, s_k=517 (not multiples of any tile),
 * d=128, against the CPU reference (rel-L2 <= 2e-3 for fp16), every element
 * written.
 */
#define EX_PROG "fwd_batch"
#include "features.h"

/* family dtype hdim mask    softcap    alibi    tile_m    tile_n    warps     stages */
#define KERNELS(X) \
    X(FWD, FP16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

int main(void)
{
    enum { B = 2, H = 8, SQ = 300, SK = 517, D = 128 };
    const size_t nq = (size_t)B * SQ * H * D, nk = (size_t)B * SK * H * D;
    fmha_ref_rng rng = fmha_ref_rng_make(1);
    float *qf = (float *)fx_host(nq * 4), *kf = (float *)fx_host(nk * 4), *vf = (float *)fx_host(nk * 4);
    uint16_t *qh = (uint16_t *)fx_host(nq * 2), *kh = (uint16_t *)fx_host(nk * 2), *vh = (uint16_t *)fx_host(nk * 2);
    uint16_t *oh = (uint16_t *)fx_host(nq * 2);
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmha_ref_fwd p;
    fx_check c;

    fx_device();
    fx_random16(&rng, nq, 0, 1.0f, qh, qf);
    fx_random16(&rng, nk, 0, 1.0f, kh, kf);
    fx_random16(&rng, nk, 0, 1.0f, vh, vf);

    memset(&a, 0, sizeof(a));
    a.dtype = FMHA_DTYPE_FP16;
    a.batch = B; a.nhead_q = H; a.nhead_k = H;
    a.seqlen_q = SQ; a.seqlen_k = SK; a.hdim_q = a.hdim_v = D;
    a.q = fx_to_device(qh, nq * 2);
    a.k = fx_to_device(kh, nk * 2);
    a.v = fx_to_device(vh, nk * 2);
    a.o = fx_poisoned(nq * 2);
    a.lse = NULL;                                          /* not wanted here */
    /* [batch, seq, head, dim]: row stride H*D, head stride D, batch stride S*H*D */
    a.stride_q = (int64_t)H * D; a.nhead_stride_q = D; a.batch_stride_q = (int64_t)SQ * H * D;
    a.stride_k = (int64_t)H * D; a.nhead_stride_k = D; a.batch_stride_k = (int64_t)SK * H * D;
    a.stride_v = (int64_t)H * D; a.nhead_stride_v = D; a.batch_stride_v = (int64_t)SK * H * D;
    a.stride_o = (int64_t)H * D; a.nhead_stride_o = D; a.batch_stride_o = (int64_t)SQ * H * D;
    a.scale = 1.0f / sqrtf((float)D);
    a.mask_type = FMHA_MASK_NONE; a.window_left = a.window_right = -1;

    FX_OK(fmha_fwd_check(&kernels, &a, &plan));            /* optional: which kernel, and why */
    FX_OK(fmha_fwd(&kernels, &a, NULL));                   /* NULL: the default stream */
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(oh, a.o, nq * 2);

    /* the reference: the same problem on the host copies, same strides */
    memset(&p, 0, sizeof(p));
    p.batch = B; p.nhead_q = H; p.nhead_k = H; p.seqlen_q = SQ; p.seqlen_k = SK; p.hdim_q = p.hdim_v = D;
    p.q = qf; p.k = kf; p.v = vf;
    p.stride_q = a.stride_q; p.nhead_stride_q = a.nhead_stride_q; p.batch_stride_q = a.batch_stride_q;
    p.stride_k = a.stride_k; p.nhead_stride_k = a.nhead_stride_k; p.batch_stride_k = a.batch_stride_k;
    p.stride_v = a.stride_v; p.nhead_stride_v = a.nhead_stride_v; p.batch_stride_v = a.batch_stride_v;
    p.stride_o = a.stride_o; p.nhead_stride_o = a.nhead_stride_o; p.batch_stride_o = a.batch_stride_o;
    p.scale = a.scale; p.mask_type = FMHA_REF_MASK_NONE; p.window_left = p.window_right = -1;
    fx_check_init(&c);
    fx_check_rows(&c, &p, oh, 0, NULL, 0.0, 0);
    return fx_report(&c, fx_tol(0), "fp16 b2 h8 s_q 300 s_k 517 d128", plan.kernel->name);
}
