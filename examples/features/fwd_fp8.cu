/*
 * fwd_fp8.cu - the FP8 (e4m3) forward pass on Hopper: Q, K and V in e4m3
 * (one byte an element), O in bf16, both products on e4m3 tensor cores.
 *
 * Call fmha_fwd with dtype = FMHA_DTYPE_FP8 and declare an FP8 FWD row (the
 * wildcard row below gives the tuned Hopper kernel; build for sm_90a). Q, K
 * and V hold e4m3 codes; q_descale, k_descale, v_descale are optional device
 * floats (NULL: 1), real = stored * descale: one a tensor, or (as here) one
 * per (batch entry, KV head) like FlashAttention-3's [batch, nhead_k]
 * descale tensors, located by descale_batch_stride and descale_head_stride
 * (a query head takes its KV head's). Strides are in elements (bytes
 * for e4m3) and multiples of 16; the head dim a multiple of 16. Every other
 * forward feature works as with 16-bit inputs (masks, GQA, LSE, group mode,
 * soft cap, ALiBi). P is rounded to e4m3 per key tile for P V, so the result
 * is about 3e-2 (rel-L2) off an exact softmax; the check below uses a
 * reference that rounds P the same way (as tests/gpu/test_fwd_fp8.cu).
 * Other GPUs have no FP8 forward (FMHA_ERR_NO_KERNEL): this prints SKIP.
 *
 * Checked, b=2, GQA 8:2, s_q 300, s_k 700, d=128, causal bottom-right, random
 * e4m3 codes of magnitude 2^-3..7.5, descales per (batch entry, KV head)
 * between 0.3 and 1.9: O within
 * rel-L2 1e-2, LSE within 2e-3 + 2^-11 of the row's score bound.
 */
#define EX_PROG "fwd_fp8"
#include "features.h"

#define KERNELS(X) \
    X(FWD, FP8, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 2, H = 8, HK = 2, SQ = 300, SK = 700, D = 128 };

/* random e4m3 codes (exponent fields 4..9: 2^-3..7.5, never 0 or NaN) of a
 * [B][s][heads][D] tensor and the values they mean, element (b, ., h, .)
 * with descale ds[b][h / group] (group: query heads per KV head) */
static void random_e4m3(fmha_ref_rng *rng, int s, int heads, int group, const float (*ds)[HK], uint8_t *codes,
                        float *f)
{
    size_t i, n = (size_t)B * s * heads * D;
    for (i = 0; i < n; i++) {
        const int b = (int)(i / ((size_t)s * heads * D)), h = (int)(i / D) % heads;
        codes[i] = fmha_ref_rng_e4m3(rng, 4, 9);
        f[i] = fmha_ref_e4m3_to_f32(codes[i]) * ds[b][h / group];
    }
}

int main(void)
{
    /* q, k, v descales per (batch entry, KV head): [3][B][HK] */
    const float descales[3][B][HK] = { { { 0.5f, 0.8f }, { 0.3f, 1.2f } },
                                       { { 0.37f, 0.6f }, { 1.1f, 0.45f } },
                                       { { 1.9f, 0.7f }, { 1.3f, 0.9f } } };
    const size_t nq = (size_t)B * SQ * H * D, nk = (size_t)B * SK * HK * D, nrows = (size_t)B * H * SQ;
    const int cc = fx_device();
    fmha_ref_rng rng = fmha_ref_rng_make(80);
    float *qf, *kf, *vf, *lseh, *dds;
    uint8_t *q8, *k8, *v8;
    uint16_t *oh;
    fmha_fwd_args a;
    fmha_fwd_plan plan;
    fmha_ref_fwd p;
    fx_check c;

    if (cc != 90) {
        printf("SKIP " EX_PROG ": the FP8 forward runs on sm_90 (Hopper) only; this GPU is sm_%d\n", cc);
        return 0;
    }
    qf = (float *)fx_host(nq * 4); kf = (float *)fx_host(nk * 4); vf = (float *)fx_host(nk * 4);
    q8 = (uint8_t *)fx_host(nq); k8 = (uint8_t *)fx_host(nk); v8 = (uint8_t *)fx_host(nk);
    oh = (uint16_t *)fx_host(nq * 2); lseh = (float *)fx_host(nrows * 4);
    random_e4m3(&rng, SQ, H, H / HK, descales[0], q8, qf);
    random_e4m3(&rng, SK, HK, 1, descales[1], k8, kf);
    random_e4m3(&rng, SK, HK, 1, descales[2], v8, vf);
    dds = (float *)fx_to_device(descales, sizeof(descales));

    memset(&a, 0, sizeof(a));
    fx_fwd_shape(&a, FMHA_DTYPE_FP8, B, H, HK, SQ, SK, D);
    a.q = fx_to_device(q8, nq); a.k = fx_to_device(k8, nk); a.v = fx_to_device(v8, nk);
    a.o = fx_poisoned(nq * 2);                                   /* bf16 */
    a.lse = (float *)fx_poisoned(nrows * 4);
    a.q_descale = dds; a.k_descale = dds + B * HK; a.v_descale = dds + 2 * B * HK;
    a.descale_batch_stride = HK; a.descale_head_stride = 1;     /* [B][HK] */
    a.scale = 0.25f / sqrtf((float)D);                           /* scores of order 1-10 */
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;
    FX_OK(fmha_fwd_check(&kernels, &a, &plan));
    FX_OK(fmha_fwd(&kernels, &a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(oh, a.o, nq * 2);
    fx_to_host(lseh, a.lse, nrows * 4);

    /* the reference on the dequantised values, P rounded per key tile of the kernel */
    p = fx_ref_of(&a, qf, kf, vf, NULL);
    fmha_ref_p8_qsum(&p, plan.kernel->p8_qsum);   /* and its running max and row sum */
    fx_check_init(&c);
    fx_check_rows(&c, &p, oh, 1, lseh, 2e-3, plan.kernel->tile_n);
    return fx_report(&c, 1e-2, "e4m3 Q/K/V, bf16 O, descales per (batch, KV head), GQA 8:2, causal", plan.kernel->name);
}
