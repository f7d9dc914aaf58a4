/*
 * fwd_lse.cu - the log-sum-exp output: LSE_i = log sum_j exp(s_ij) (natural
 * log, fp32) of each query row, what a backward pass needs and what lets
 * partial attention results be merged (split-KV, ring attention, a cached
 * prefix and new tokens computed apart).
 *
 * Pass lse, a device float buffer, with nhead_stride_lse and
 * batch_stride_lse (row stride 1): [batch, nhead_q, s_q] in batch mode,
 * [nhead_q, total_q] in group mode; NULL skips it. A row that sees no key
 * has LSE = -inf.
 *
 * This example runs the keys in two halves, two calls with their own O and
 * LSE, and merges them on the host the way split-KV does:
 *   m = max(l1, l2),  w_k = exp(l_k - m),  O = (w1 O1 + w2 O2) / (w1 + w2),
 *   LSE = m + log(w1 + w2)
 * Checked, bf16 b=2 h=8 s_q=100 s_k=2x300 d=128: each half's O and LSE
 * against the CPU reference of its keys (LSE within 2e-3), and the merged O
 * and LSE against the reference over all the keys.
 */
#define EX_PROG "fwd_lse"
#include "features.h"

#define KERNELS(X) \
    X(FWD, BF16, 128, NOMASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 2, H = 8, SQ = 100, SK = 600, HALF = 300, D = 128 };

int main(void)
{
    const size_t nrows = (size_t)B * H * SQ;
    uint16_t *oh[2];
    float *lseh[2];
    double sc[SK], orow[D], ref_lse;
    fmha_fwd_plan plan;
    fmha_ref_fwd p;
    fx_check c;
    fx_fwd f;
    int half, b, h, i, x;

    fx_device();
    fx_check_init(&c);
    fx_fwd_make(&f, FMHA_DTYPE_BF16, B, H, H, SQ, SK, D, 50);
    for (half = 0; half < 2; half++) {
        fmha_fwd_args a = f.a;              /* keys [half * 300, half * 300 + 300) */
        a.seqlen_k = HALF;
        a.k = (const uint16_t *)f.a.k + (size_t)half * HALF * f.a.stride_k;
        a.v = (const uint16_t *)f.a.v + (size_t)half * HALF * f.a.stride_v;
        a.o = fx_poisoned(f.nq * 2);
        a.lse = (float *)fx_poisoned(nrows * 4);
        a.nhead_stride_lse = SQ;            /* [batch, nhead_q, s_q] */
        a.batch_stride_lse = (int64_t)H * SQ;
        FX_OK(fmha_fwd_check(&kernels, &a, &plan));
        FX_OK(fmha_fwd(&kernels, &a, NULL));
        CHECK_CUDA(cudaDeviceSynchronize());
        oh[half] = (uint16_t *)fx_host(f.nq * 2);
        lseh[half] = (float *)fx_host(nrows * 4);
        fx_to_host(oh[half], a.o, f.nq * 2);
        fx_to_host(lseh[half], a.lse, nrows * 4);
        /* this half against its own reference */
        f.a.seqlen_k = HALF;
        p = fx_fwd_ref(&f, NULL);
        p.k += (size_t)half * HALF * p.stride_k;
        p.v += (size_t)half * HALF * p.stride_v;
        fx_check_rows(&c, &p, oh[half], 1, lseh[half], 2e-3, 0);
        f.a.seqlen_k = SK;
    }

    /* merge the halves by their LSE and compare with the reference over all keys */
    p = fx_fwd_ref(&f, NULL);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (i = 0; i < SQ; i++) {
                const int64_t oo = fmha_ref_off_o(&p, b, h, i), lo = fmha_ref_off_lse(&p, b, h, i);
                const double l1 = lseh[0][lo], l2 = lseh[1][lo], m = l1 > l2 ? l1 : l2;
                const double w1 = exp(l1 - m), w2 = exp(l2 - m);
                fmha_ref_fwd_row(&p, b, h, i, sc, orow, &ref_lse);
                for (x = 0; x < D; x++) {
                    const double o1 = fmha_ref_bf16_to_f32(oh[0][oo + x]), o2 = fmha_ref_bf16_to_f32(oh[1][oo + x]);
                    fmha_ref_err_add(&c.err, (w1 * o1 + w2 * o2) / (w1 + w2), orow[x]);
                }
                if (!(fabs(m + log(w1 + w2) - ref_lse) <= 2e-3)) c.bad++;
            }
    return fx_report(&c, fx_tol(1), "bf16 LSE of two key halves, merged", plan.kernel->name);
}
