/*
 * bwd_dropout.cu - dropout in training: the forward drops attention
 * probabilities, the backward regenerates the same decisions.
 *
 * The dropout mask is never stored. fmha_fwd_args.dropout_p, dropout_seed
 * and dropout_offset decide, per element (b, h, i, j), a Philox byte
 * (include/fmha_tile/tile/philox.h) that keeps the element when it is at
 * least round(p * 256); kept values are scaled by 256 / (256 - that). The
 * backward is given the same three values (fmha_bwd_args.dropout_p, _seed,
 * _offset) and draws the same bytes for the transposed scores: with
 * Z = keep * scale, O = (P o Z) V, so dV = (P o Z)^T dO, dP = (dO V^T) o Z
 * and dS = P o (dP - D), D = rowsum(dO o O). Instead of the two fields the
 * calls can take dropout_rng, a device pointer to {seed, offset} read when
 * the kernels run (a framework's generator state, or values a captured graph
 * advances between replays). The backward's dropout runs on the Hopper
 * (wgmma) dq_dk_dv pipeline (hdim 64/128 on sm_90a) and the portable one.
 *
 * Checked, bf16 b=2 h=8 (GQA 8:2) s_q 300 s_k 500 d=128, causal
 * bottom-right, p = 0.2: the forward's O against the CPU reference drawing
 * the same decisions; dQ, dK and dV from the GPU forward's O and LSE
 * against the reference backward (rel-L2 <= 2e-2, every element written);
 * the same backward with {seed, offset} behind dropout_rng (the fields set
 * to other values) bitwise equal in dK and dV and within tolerance in dQ
 * (its fp32 atomics may add in another order).
 */
#define EX_PROG "bwd_dropout"
#include "features.h"
#include "../../tests/ref/fmha_ref_bwd.h"

#define KERNELS(X)                                                                                \
    X(FWD,            BF16, 128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DOT_DO_O,   BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD,            BF16, 128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 2, H = 8, HK = 2, SQ = 300, SK = 500, D = 128 };

int main(void)
{
    const float drop_p = 0.2f;
    const uint64_t seed = 0xfeedbeefcafe1234ull, offset = (2ull << 32) + 640;
    fx_fwd f;
    fx_check c;
    fmha_fwd_plan fplan;
    fmha_ref_fwd p;
    fmha_ref_bwd g;
    fmha_bwd_traits t;
    fmha_bwd_plan plan;
    fmha_bwd_args a;
    fmha_ref_rng rng = fmha_ref_rng_make(77);
    float *dof, *rdq, *rdk, *rdv;
    uint16_t *doh, *got[2][3];
    uint64_t rng_host[2];
    void *grads[3], *ws = NULL;
    size_t n[3];
    double err[2][3];
    int run, w, same = 1, ok, fwd_bad;

    fx_device();
    fx_fwd_make(&f, FMHA_DTYPE_BF16, B, H, HK, SQ, SK, D, 76);
    n[0] = f.nq; n[1] = n[2] = f.nk;

    /* ---- forward with dropout on the GPU: O and the LSE (without dropout) */
    f.a.mask_type = FMHA_MASK_BOTTOM_RIGHT;
    f.a.window_left = -1; f.a.window_right = 0;
    f.a.lse = f.lse_buf;
    f.a.dropout_p = drop_p;
    f.a.dropout_seed = seed;
    f.a.dropout_offset = offset;
    FX_OK(fmha_fwd_check(&kernels, &f.a, &fplan));
    FX_OK(fmha_fwd(&kernels, &f.a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(f.oh, f.a.o, f.nq * 2);
    fx_to_host(f.lseh, f.a.lse, (size_t)B * H * SQ * 4);
    p = fx_fwd_ref(&f, NULL);
    p.dropout_p = drop_p;
    p.dropout_seed = seed;
    p.dropout_offset = offset;
    fx_check_init(&c);
    fx_check_rows(&c, &p, f.oh, 1, f.lseh, 2e-3, 0);
    fwd_bad = c.bad != 0 || !(fmha_ref_err_rel_l2(&c.err) <= fx_tol(1));

    /* ---- the reference backward of the same draws; dO random ------------- */
    dof = (float *)fx_host(f.nq * 4); doh = (uint16_t *)fx_host(f.nq * 2);
    rdq = (float *)fx_host(f.nq * 4); rdk = (float *)fx_host(f.nk * 4); rdv = (float *)fx_host(f.nk * 4);
    fx_random16(&rng, f.nq, 1, 1.0f, doh, dof);
    memset(&g, 0, sizeof(g));
    g.fwd = p; g.dout = dof; g.dq = rdq; g.dk = rdk; g.dv = rdv;
    if (fmha_ref_bwd_run(&g) != 0) { printf(EX_PROG ": out of memory valid:n\n"); return 1; }

    /* ---- the backward on the GPU, from the forward's O and LSE ------------- */
    fx_bwd_of(&f, &t, &a);                 /* shape, mask, Q/K/V and the forward's O and LSE */
    FX_OK(fmha_bwd_plan_make(&kernels, &t, &plan));
    if (plan.workspace_size) CHECK_CUDA(cudaMalloc(&ws, plan.workspace_size));
    FX_OK(fmha_bwd_prepare_workspace(&plan, ws, plan.workspace_size, NULL, NULL, NULL));

    a.dout = fx_to_device(doh, f.nq * 2);
    a.workspace = ws; a.workspace_size = plan.workspace_size;
    /* the forward's dropout: the same p, seed and offset */
    a.dropout_p = drop_p;
    a.dropout_seed = seed;
    a.dropout_offset = offset;
    for (w = 0; w < 3; w++) grads[w] = fx_poisoned(n[w] * 2);
    a.dq = grads[0]; a.dk = grads[1]; a.dv = grads[2];

    /* run 2: {seed, offset} in device memory, the fields set to other values */
    rng_host[0] = seed; rng_host[1] = offset;
    for (run = 0; run < 2; run++) {
        if (run == 1) {
            a.dropout_rng = (const uint64_t *)fx_to_device(rng_host, sizeof(rng_host));
            a.dropout_seed = 1; a.dropout_offset = 2;
        }
        for (w = 0; w < 3; w++) CHECK_CUDA(cudaMemset(grads[w], 0xFF, n[w] * 2));
        FX_OK(fmha_bwd(&plan, &a, NULL));
        CHECK_CUDA(cudaDeviceSynchronize());
        for (w = 0; w < 3; w++) {
            got[run][w] = (uint16_t *)fx_host(n[w] * 2);
            fx_to_host(got[run][w], grads[w], n[w] * 2);
        }
        err[run][0] = fx_err_bf16(got[run][0], rdq, n[0]);
        err[run][1] = fx_err_bf16(got[run][1], rdk, n[1]);
        err[run][2] = fx_err_bf16(got[run][2], rdv, n[2]);
    }
    for (w = 1; w < 3; w++) same = same && !memcmp(got[0][w], got[1][w], n[w] * 2);
    ok = same && !fwd_bad;
    for (run = 0; run < 2; run++)
        for (w = 0; w < 3; w++) ok = ok && err[run][w] >= 0.0 && err[run][w] <= 2e-2;
    printf(EX_PROG ": bf16 GQA 8:2 s_q 300 s_k 500 causal, p %.2f: forward [%s] O rel-L2 %.2e (%ld bad); "
           "backward (plan's dq_dk_dv %s) rel-L2 dQ %.2e dK %.2e dV %.2e (tol 2e-2, -1: unwritten); through "
           "dropout_rng dQ %.2e, dK and dV %s valid:%s\n",
           (double)drop_p, fplan.kernel->name, fmha_ref_err_rel_l2(&c.err), c.bad, plan.dq_dk_dv->name, err[0][0],
           err[0][1], err[0][2], err[1][0], same ? "bitwise equal" : "DIFFER", ok ? "y" : "n");
    return ok ? 0 : 1;
}
