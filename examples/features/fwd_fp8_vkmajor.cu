/*
 * fwd_fp8_vkmajor.cu - the e4m3 forward at hdim 256 with V given K-major.
 *
 * wgmma reads an 8-bit B operand K-major only, so the FP8 forward turns each
 * V tile into V^T in shared memory; at hdim 256 that transpose is the
 * kernel's slowest stage. A caller that holds V^T instead (an inference
 * cache written that way, or V used by many calls) writes it once with
 * fmha_fp8_v_kmajor (dense [batch][nhead_k][hdim][keys], keys = seqlen_k
 * rounded up to 16, fmha_fp8_v_kmajor_bytes of them) and passes it with
 * v_kmajor = 1 and V^T's strides; the kernel then copies V^T tiles by TMA
 * (10-14% faster at 8k-16k on an H100, bench/RESULTS.md). Batch mode,
 * head dims 128 and 256; other head dims, group mode and builds without
 * tensor maps refuse it (FMHA_ERR_UNSUPPORTED).
 *
 * Checked, b=2, GQA 8:2, s_q 300, s_k 700 (keys padded to 704), d=256, causal
 * bottom-right, random e4m3 codes, per-tensor descales: O with V^T the same
 * bits as with V rows (same arithmetic, only where V^T comes from differs),
 * and within rel-L2 1e-2 of the reference that rounds P to e4m3 per key
 * tile as the kernel does (this row: a lazy running max, O over the rounded
 * P's sum, fmha_kernel_info.p8_qsum); LSE within 2e-3 + 2^-11 of the row's score bound.
 */
#define EX_PROG "fwd_fp8_vkmajor"
#include "features.h"

#define KERNELS(X) \
    X(FWD, FP8, 256, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 2, H = 8, HK = 2, SQ = 300, SK = 700, D = 256 };

/* random e4m3 codes (2^-3..7.5, never 0 or NaN) and the values they mean */
static void random_e4m3(fmha_ref_rng *rng, size_t n, float ds, uint8_t *codes, float *f)
{
    size_t i;
    for (i = 0; i < n; i++) {
        codes[i] = fmha_ref_rng_e4m3(rng, 4, 9);
        f[i] = fmha_ref_e4m3_to_f32(codes[i]) * ds;
    }
}

int main(void)
{
    const float descales[3] = { 0.5f, 0.37f, 1.9f };
    const size_t nq = (size_t)B * SQ * H * D, nk = (size_t)B * SK * HK * D, nrows = (size_t)B * H * SQ;
    const int cc = fx_device();
    fmha_ref_rng rng = fmha_ref_rng_make(81);
    float *qf, *kf, *vf, *lseh, *dds;
    uint8_t *q8, *k8, *v8;
    uint16_t *oh, *oh_rows;
    void *vt, *o_rows;
    size_t vt_bytes, i, differ = 0;
    fmha_fwd_args a, rows;
    fmha_fwd_plan plan;
    fmha_ref_fwd p;
    fx_check c;

    if (cc != 90) {
        printf("SKIP " EX_PROG ": the FP8 forward runs on sm_90 (Hopper) only; this GPU is sm_%d\n", cc);
        return 0;
    }
    qf = (float *)fx_host(nq * 4); kf = (float *)fx_host(nk * 4); vf = (float *)fx_host(nk * 4);
    q8 = (uint8_t *)fx_host(nq); k8 = (uint8_t *)fx_host(nk); v8 = (uint8_t *)fx_host(nk);
    oh = (uint16_t *)fx_host(nq * 2); oh_rows = (uint16_t *)fx_host(nq * 2); lseh = (float *)fx_host(nrows * 4);
    random_e4m3(&rng, nq, descales[0], q8, qf);
    random_e4m3(&rng, nk, descales[1], k8, kf);
    random_e4m3(&rng, nk, descales[2], v8, vf);
    dds = (float *)fx_to_device(descales, sizeof(descales));

    memset(&a, 0, sizeof(a));
    fx_fwd_shape(&a, FMHA_DTYPE_FP8, B, H, HK, SQ, SK, D);
    a.q = fx_to_device(q8, nq); a.k = fx_to_device(k8, nk); a.v = fx_to_device(v8, nk);
    a.o = fx_poisoned(nq * 2);                                   /* bf16 */
    a.lse = (float *)fx_poisoned(nrows * 4);
    a.q_descale = dds; a.k_descale = dds + 1; a.v_descale = dds + 2;
    a.scale = 0.25f / sqrtf((float)D);                           /* scores of order 1-10 */
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;

    /* once with V rows, for the bit-for-bit comparison (and the reference) */
    rows = a;
    o_rows = fx_poisoned(nq * 2);
    {
        void *o = a.o;
        a.o = o_rows;
        FX_OK(fmha_fwd(&kernels, &a, NULL));
        a.o = o;
    }

    /* V^T, then the call that reads it */
    vt_bytes = fmha_fp8_v_kmajor_bytes(&a);
    CHECK_CUDA(cudaMalloc(&vt, vt_bytes));
    FX_OK(fmha_fp8_v_kmajor(&a, vt, NULL));
    fmha_fp8_v_kmajor_use(&a, vt);                               /* v, v_kmajor and V^T's strides */
    FX_OK(fmha_fwd_check(&kernels, &a, &plan));
    FX_OK(fmha_fwd(&kernels, &a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(oh, a.o, nq * 2);
    fx_to_host(oh_rows, o_rows, nq * 2);
    fx_to_host(lseh, a.lse, nrows * 4);
    for (i = 0; i < nq; i++) differ += oh[i] != oh_rows[i];
    printf("V^T %zu bytes (keys %d a d row); outputs with V^T and with V rows differ in %zu of %zu elements\n",
           vt_bytes, fmha_fp8_v_kmajor_keys(SK), differ, nq);

    /* the reference on the dequantised values (V as rows), P rounded per key tile */
    p = fx_ref_of(&rows, qf, kf, vf, NULL);
    fmha_ref_p8_qsum(&p, plan.kernel->p8_qsum);   /* the kernel's running max and row sum */
    fx_check_init(&c);
    c.bad += (long)differ;   /* V^T must not change a bit */
    fx_check_rows(&c, &p, oh, 1, lseh, 2e-3, plan.kernel->tile_n);
    return fx_report(&c, 1e-2, "e4m3 hdim 256, V^T given (v_kmajor), GQA 8:2, causal", plan.kernel->name);
}
