/*
 * bwd_deterministic.cu - the backward pass (dQ, dK, dV) in deterministic
 * mode: no float atomics, bitwise-identical gradients from run to run.
 *
 * The backward is three kernels run as one plan, each its own kernel-set
 * row: BWD_DOT_DO_O (D = rowsum(dO * O)), BWD_DET (dq_dk_dv of deterministic
 * plans; BWD for the atomic one) and BWD_CONVERT_DQ. The calls:
 *   fmha_bwd_plan_make(set, &traits, &plan)    kernels, splits, workspace size
 *   cudaMalloc(&ws, plan.workspace_size)        the only device memory it needs
 *   fmha_bwd_prepare_workspace(&plan, ws, size, seqstart_q, seqstart_k, stream)
 *                                               (NULL seqstarts in batch mode; an
 *                                               _async form is graph-capturable)
 *   fmha_bwd(&plan, &args, stream)              the three stages
 * The args hold Q, K, V, O, dO and the forward's LSE (fp32, natural log) with
 * their strides, and dQ, dK, dV (dK/dV with nhead_k heads: summed over each
 * K/V head's query heads). In training O and LSE come from fmha_fwd with lse
 * set; here the CPU reference computes them (O rounded to bf16).
 *
 * Checked, bf16, GQA 8:2, b=2, s_q 300, s_k 517, d=128, no mask: dQ, dK and
 * dV against the CPU double-precision reference (rel-L2 <= 2e-2, every
 * element written), and a second run bitwise equal to the first.
 */
#define EX_PROG "bwd_deterministic"
#include "features.h"
#include "../../tests/ref/fmha_ref_bwd.h"

#define KERNELS(X)                                                                                \
    X(BWD_DOT_DO_O,   BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_DET,        BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \
    X(BWD_CONVERT_DQ, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 2, H = 8, HK = 2, SQ = 300, SK = 517, D = 128 };

int main(void)
{
    fx_fwd f;                              /* Q, K, V [b, s, h, d] and their strides */
    fmha_ref_fwd p;
    fmha_ref_bwd g;
    fmha_bwd_traits t;
    fmha_bwd_plan plan;
    fmha_bwd_args a;
    fmha_ref_rng rng = fmha_ref_rng_make(91);
    float *of, *lsef, *dof, *rdq, *rdk, *rdv;
    uint16_t *oh, *doh, *got[2][3];
    void *grads[3], *ws = NULL;
    size_t n[3], i;
    double err[3];
    int run, w, same = 1, ok;

    fx_device();
    fx_fwd_make(&f, FMHA_DTYPE_BF16, B, H, HK, SQ, SK, D, 90);
    n[0] = f.nq; n[1] = n[2] = f.nk;
    of = (float *)fx_host(f.nq * 4); oh = (uint16_t *)fx_host(f.nq * 2);
    dof = (float *)fx_host(f.nq * 4); doh = (uint16_t *)fx_host(f.nq * 2);
    lsef = (float *)fx_host((size_t)B * H * SQ * 4);
    rdq = (float *)fx_host(f.nq * 4); rdk = (float *)fx_host(f.nk * 4); rdv = (float *)fx_host(f.nk * 4);

    /* forward (O, LSE) and backward on the CPU; dO random */
    p = fx_fwd_ref(&f, NULL);
    p.o = of; p.lse = lsef;
    if (fmha_ref_fwd_run(&p) != 0) { printf(EX_PROG ": out of memory valid:n\n"); return 1; }
    for (i = 0; i < f.nq; i++) oh[i] = fmha_ref_f32_to_bf16(of[i]);
    fx_random16(&rng, f.nq, 1, 1.0f, doh, dof);
    memset(&g, 0, sizeof(g));
    g.fwd = p; g.dout = dof; g.dq = rdq; g.dk = rdk; g.dv = rdv;
    if (fmha_ref_bwd_run(&g) != 0) { printf(EX_PROG ": out of memory valid:n\n"); return 1; }

    /* plan from the traits, then the workspace it asks for */
    fx_bwd_of(&f, &t, &a);                 /* shape, no mask, Q/K/V */
    t.is_deterministic = 1;
    FX_OK(fmha_bwd_plan_make(&kernels, &t, &plan));
    if (plan.workspace_size) CHECK_CUDA(cudaMalloc(&ws, plan.workspace_size));
    FX_OK(fmha_bwd_prepare_workspace(&plan, ws, plan.workspace_size, NULL, NULL, NULL));

    a.o = fx_to_device(oh, f.nq * 2);      /* the reference's O and LSE [b, h, s_q] */
    a.dout = fx_to_device(doh, f.nq * 2);
    a.lse = (const float *)fx_to_device(lsef, (size_t)B * H * SQ * 4);
    a.is_deterministic = 1;
    a.workspace = ws; a.workspace_size = plan.workspace_size;
    for (w = 0; w < 3; w++) grads[w] = fx_poisoned(n[w] * 2);
    a.dq = grads[0]; a.dk = grads[1]; a.dv = grads[2];

    for (run = 0; run < 2; run++) {       /* twice, gradients poisoned before each */
        for (w = 0; w < 3; w++) CHECK_CUDA(cudaMemset(grads[w], 0xFF, n[w] * 2));
        FX_OK(fmha_bwd(&plan, &a, NULL));
        CHECK_CUDA(cudaDeviceSynchronize());
        for (w = 0; w < 3; w++) {
            got[run][w] = (uint16_t *)fx_host(n[w] * 2);
            fx_to_host(got[run][w], grads[w], n[w] * 2);
        }
    }
    for (w = 0; w < 3; w++) same = same && !memcmp(got[0][w], got[1][w], n[w] * 2);
    err[0] = fx_err_bf16(got[0][0], rdq, n[0]);
    err[1] = fx_err_bf16(got[0][1], rdk, n[1]);
    err[2] = fx_err_bf16(got[0][2], rdv, n[2]);
    ok = same;
    for (w = 0; w < 3; w++) ok = ok && err[w] >= 0.0 && err[w] <= 2e-2;
    printf(EX_PROG ": bf16 GQA 8:2 s_q 300 s_k 517, %d dq_acc slices [%s]: rel-L2 dQ %.2e dK %.2e dV %.2e "
           "(tol 2e-2, -1: unwritten), run 2 %s run 1 valid:%s\n",
           plan.nsplits, plan.dq_dk_dv->name, err[0], err[1], err[2], same ? "bitwise equal to" : "DIFFERS from",
           ok ? "y" : "n");
    return ok ? 0 : 1;
}
