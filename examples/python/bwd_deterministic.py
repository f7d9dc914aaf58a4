"""bwd_deterministic.py - training: gradients through fmha_tile.attention
(autograd), and deterministic mode.

    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = fmha_tile.attention(q, k, v, causal=True, deterministic=True)
    o.backward(dout)                       # q.grad, k.grad, v.grad (k/v grads with h_k heads)

When an input requires grad (and grad mode is on) the forward keeps the LSE
and the backward runs the library's three stages (dot(dO, O), dq/dk/dv,
dq conversion). deterministic=True uses no float atomics: the gradients are
bitwise identical run to run (slower). Checked: dq, dk, dv against PyTorch
autograd through the fp32 reference (rel-L2 2e-2 for bf16), with GQA 8:2
and a causal mask, in batch and varlen mode; two deterministic runs give
the same bits.
"""
from _common import setup, main, Checker, reference, prefix_sums

GRAD_TOL = 2e-2


def run():
    torch, fmha_tile = setup("bwd_deterministic")
    c = Checker("bwd_deterministic")

    def grads(fn, inputs, dout):
        leaves = [t.detach().clone().requires_grad_() for t in inputs]
        fn(*leaves).backward(dout)
        return [t.grad for t in leaves]

    # batch mode, GQA 8:2, causal
    b, s_q, s_k, h, hk, d = 2, 256, 384, 8, 2, 128
    x = [torch.randn(b, s, n, d, dtype=torch.bfloat16, device="cuda")
         for s, n in ((s_q, h), (s_k, hk), (s_k, hk))]
    dout = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
    want = grads(lambda q, k, v: reference(q.float(), k.float(), v.float(), causal=True)[0],
                 [t.float() for t in x], dout.float())
    for det in (False, True):
        got = grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=True, deterministic=det),
                    x, dout)
        for name, g, w in zip(("dq", "dk", "dv"), got, want):
            c.close("batch, deterministic=%s: %s %s" % (det, name, tuple(g.shape)), g, w, GRAD_TOL)
    again = grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=True, deterministic=True),
                  x, dout)
    for name, g1, g2 in zip(("dq", "dk", "dv"), got, again):
        c.equal("batch, deterministic rerun: %s" % name, g1, g2)

    # varlen (packed sequences), deterministic
    lens_q, lens_k = [100, 1, 200], [300, 1, 250]
    xv = [torch.randn(sum(lens), n, d, dtype=torch.bfloat16, device="cuda")
          for lens, n in ((lens_q, h), (lens_k, hk), (lens_k, hk))]
    doutv = torch.randn(sum(lens_q), h, d, dtype=torch.bfloat16, device="cuda")
    cu_q, cu_k = prefix_sums(torch, lens_q), prefix_sums(torch, lens_k)

    def fmha_varlen(q, k, v):
        return fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                          causal=True, deterministic=True)

    def ref_varlen(q, k, v):
        outs, aq, ak = [], 0, 0
        for nq, nk in zip(lens_q, lens_k):
            outs.append(reference(q[aq:aq + nq][None], k[ak:ak + nk][None], v[ak:ak + nk][None],
                                  causal=True)[0][0])
            aq, ak = aq + nq, ak + nk
        return torch.cat(outs)

    got = grads(fmha_varlen, xv, doutv)
    want = grads(ref_varlen, [t.float() for t in xv], doutv.float())
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        c.close("varlen, deterministic: %s" % name, g, w, GRAD_TOL)
    again = grads(fmha_varlen, xv, doutv)
    c.true("varlen, deterministic rerun: dq dk dv bitwise equal",
           all(torch.equal(g1, g2) for g1, g2 in zip(got, again)))
    c.finish()


if __name__ == "__main__":
    main(run)
