/*
 * bwd_bias.cu - training with an elementwise attention bias: the gradient
 * of the bias (dbias) next to dQ, dK and dV.
 *
 * The backward takes the forward's bias (fmha_bwd_args.bias, bias_dtype
 * and strides, traits.has_bias) so that it recomputes the same P, and
 * returns dbias = dS = P o (dP - D), the gradient of the biased logits, in
 * the bias's dtype at its own strides (fmha_bwd_args.dbias,
 * traits.has_dbias). A bias shared over batch entries or heads (stride 0)
 * has a gradient summed over them: traits.dbias_bcast names those dims
 * (FMHA_BIAS_BCAST_BATCH / _HEAD) and dbias has extent 1 there. The sum
 * goes through an fp32 buffer in the plan's workspace: fp32 atomics, or in
 * deterministic mode one slice per entry and head summed in a fixed order
 * (bitwise reproducible). Masked elements get 0. The kernel set needs a
 * dq_dk_dv row built with BIAS.
 *
 * Checked, bf16 b=2 h=8 (GQA 8:2) s_q 200 s_k 300 d=64, a bf16 bias
 * [1, h, s_q, s_k] in [-2, 2] with -inf on the last 10 keys, causal
 * bottom-right, deterministic: the forward's O against the CPU reference;
 * dQ, dK, dV and dbias (summed over the batch) from the GPU forward's O and
 * LSE against the reference backward (rel-L2 <= 2e-2, every element
 * written); a second run bitwise equal.
 */
#define EX_PROG "bwd_bias"
#include "features.h"
#include "../../tests/ref/fmha_ref_bwd.h"

#define KERNELS(X)                                                                                \
    X(FWD,            BF16, 64, MASK,   NOSOFTCAP, BIAS,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   BF16, 64, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        BF16, 64, MASK,   NOSOFTCAP, BIAS,    FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, BF16, 64, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 2, H = 8, HK = 2, SQ = 200, SK = 300, D = 64 };

int main(void)
{
    const size_t nb = (size_t)H * SQ * SK;   /* [1, h, s_q, s_k] */
    uint16_t *bits = (uint16_t *)fx_host(nb * 2), *doh, *got[2][4];
    float *biasf = (float *)fx_host(nb * 4), *dof, *ref[4];
    double *rdb = (double *)fx_host(nb * 8), err[4];
    fmha_ref_rng rng = fmha_ref_rng_make(91);
    fx_fwd f;
    fx_check c;
    fmha_fwd_plan fplan;
    fmha_ref_fwd p;
    fmha_ref_bwd g;
    fmha_bwd_traits t;
    fmha_bwd_plan plan;
    fmha_bwd_args a;
    void *out[4], *ws = NULL;
    size_t n[4], i;
    int run, w, same = 1, ok, fwd_bad;

    fx_device();
    for (i = 0; i < nb; i++) {
        const float v = i % SK >= SK - 10 ? -INFINITY : fmha_ref_rng_uniform(&rng, -2.0f, 2.0f);
        bits[i] = fmha_ref_f32_to_bf16(v);
        biasf[i] = fmha_ref_bf16_to_f32(bits[i]);   /* the values the GPU sees */
        rdb[i] = 0.0;
    }
    fx_fwd_make(&f, FMHA_DTYPE_BF16, B, H, HK, SQ, SK, D, 92);
    n[0] = f.nq; n[1] = n[2] = f.nk; n[3] = nb;

    /* ---- forward with the bias on the GPU: O and the LSE ------------------ */
    f.a.bias = fx_to_device(bits, nb * 2);
    f.a.bias_dtype = FMHA_DTYPE_BF16;
    f.a.stride_bias = SK;
    f.a.nhead_stride_bias = (int64_t)SQ * SK;
    f.a.batch_stride_bias = 0;              /* shared by the batch entries */
    f.a.mask_type = FMHA_MASK_BOTTOM_RIGHT; f.a.window_left = -1; f.a.window_right = 0;
    f.a.lse = f.lse_buf;
    FX_OK(fmha_fwd_check(&kernels, &f.a, &fplan));
    FX_OK(fmha_fwd(&kernels, &f.a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(f.oh, f.a.o, f.nq * 2);
    fx_to_host(f.lseh, f.a.lse, (size_t)B * H * SQ * 4);
    p = fx_fwd_ref(&f, NULL);
    p.bias = biasf;
    p.stride_bias = SK; p.nhead_stride_bias = (int64_t)SQ * SK; p.batch_stride_bias = 0;
    fx_check_init(&c);
    fx_check_rows(&c, &p, f.oh, 1, f.lseh, 2e-3, 0);
    fwd_bad = c.bad != 0 || !(fmha_ref_err_rel_l2(&c.err) <= fx_tol(1));

    /* ---- the reference backward; dO random; dbias summed over the batch --- */
    dof = (float *)fx_host(f.nq * 4); doh = (uint16_t *)fx_host(f.nq * 2);
    ref[0] = (float *)fx_host(f.nq * 4); ref[1] = (float *)fx_host(f.nk * 4); ref[2] = (float *)fx_host(f.nk * 4);
    ref[3] = (float *)fx_host(nb * 4);
    fx_random16(&rng, f.nq, 1, 1.0f, doh, dof);
    memset(&g, 0, sizeof(g));
    g.fwd = p; g.dout = dof; g.dq = ref[0]; g.dk = ref[1]; g.dv = ref[2];
    g.dbias = rdb;   /* added at the bias's offsets: batch stride 0 sums the entries */
    if (fmha_ref_bwd_run(&g) != 0) { printf(EX_PROG ": out of memory valid:n\n"); return 1; }
    for (i = 0; i < nb; i++) ref[3][i] = (float)rdb[i];

    /* ---- the backward on the GPU, from the forward's O and LSE ------------- */
    fx_bwd_of(&f, &t, &a);                 /* shape, mask, Q/K/V and the forward's O and LSE */
    t.is_deterministic = 1;
    t.has_bias = 1;
    t.has_dbias = 1;
    t.dbias_bcast = FMHA_BIAS_BCAST_BATCH;  /* dbias [1, h, s_q, s_k] */
    FX_OK(fmha_bwd_plan_make(&kernels, &t, &plan));
    if (plan.workspace_size) CHECK_CUDA(cudaMalloc(&ws, plan.workspace_size));
    FX_OK(fmha_bwd_prepare_workspace(&plan, ws, plan.workspace_size, NULL, NULL, NULL));

    a.dout = fx_to_device(doh, f.nq * 2);
    a.is_deterministic = 1;
    a.workspace = ws; a.workspace_size = plan.workspace_size;
    /* the forward's bias, and dbias [1, h, s_q, s_k] (its batch stride unused) */
    a.bias = f.a.bias; a.bias_dtype = FMHA_DTYPE_BF16;
    a.stride_bias = SK; a.nhead_stride_bias = (int64_t)SQ * SK; a.batch_stride_bias = 0;
    a.stride_dbias = SK; a.nhead_stride_dbias = (int64_t)SQ * SK; a.batch_stride_dbias = 0;
    for (w = 0; w < 4; w++) out[w] = fx_poisoned(n[w] * 2);
    a.dq = out[0]; a.dk = out[1]; a.dv = out[2]; a.dbias = out[3];

    for (run = 0; run < 2; run++) {
        for (w = 0; w < 4; w++) CHECK_CUDA(cudaMemset(out[w], 0xFF, n[w] * 2));
        FX_OK(fmha_bwd(&plan, &a, NULL));
        CHECK_CUDA(cudaDeviceSynchronize());
        for (w = 0; w < 4; w++) {
            got[run][w] = (uint16_t *)fx_host(n[w] * 2);
            fx_to_host(got[run][w], out[w], n[w] * 2);
        }
    }
    for (w = 0; w < 4; w++) {
        err[w] = fx_err_bf16(got[0][w], ref[w], n[w]);
        same = same && !memcmp(got[0][w], got[1][w], n[w] * 2);
    }
    ok = same && !fwd_bad;
    for (w = 0; w < 4; w++) ok = ok && err[w] >= 0.0 && err[w] <= 2e-2;
    printf(EX_PROG ": bf16 GQA 8:2 s_q 200 s_k 300 causal, bias [1, h, s_q, s_k] with a -inf tail: forward [%s] O "
           "rel-L2 %.2e (%ld bad); deterministic backward [%s] rel-L2 dQ %.2e dK %.2e dV %.2e dbias %.2e (tol 2e-2, "
           "-1: unwritten); second run %s valid:%s\n",
           fplan.kernel->name, fmha_ref_err_rel_l2(&c.err), c.bad, plan.dq_dk_dv->name, err[0], err[1], err[2],
           err[3], same ? "bitwise equal" : "DIFFERS", ok ? "y" : "n");
    return ok ? 0 : 1;
}
