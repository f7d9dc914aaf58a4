"""fwd_sinks.py - attention sinks (gpt-oss): one learned logit per query
head that joins every row's softmax as an extra key with no value, so a row
can put weight "nowhere".

    o, lse = fmha_tile.attention(q, k, v, causal=True, sinks=sinks, return_lse=True)

sinks: fp32 [h] on the GPU. The LSE includes the sink; a row that sees no
key gets O = 0 and LSE = its sink. Sinks are differentiable: dsinks comes
with dq, dk, dv. Checked against the fp32 reference (the sink as one more
score column, dropped before P V), gradients against autograd through it.
"""
from _common import setup, main, Checker, reference, TOL_BF16

GRAD_TOL = 2e-2


def run():
    torch, fmha_tile = setup("fwd_sinks")
    c = Checker("fwd_sinks")
    b, s_q, s_k, h, hk, d = 2, 300, 200, 8, 2, 128
    q = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
    sinks = torch.rand(h, device="cuda") * 5.0 - 2.0          # some rows ruled by their sink

    o, lse = fmha_tile.attention(q, k, v, causal=True, sinks=sinks, return_lse=True)
    ref_o, ref_lse = reference(q, k, v, causal=True, sinks=sinks)
    c.close("O (causal, s_q 300 > s_k 200)", o, ref_o, TOL_BF16)
    c.lse("LSE (sink included)", lse, ref_lse)
    c.true("rows 0..99 see no key: O = 0, LSE = sink",
           bool((o[:, :100] == 0).all()) and
           torch.equal(lse[:, :, :100], sinks.view(1, h, 1).expand(b, h, 100)))

    # gradients, the sinks' included
    dout = torch.randn_like(o)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v, sinks)]
    fmha_tile.attention(*leaves[:3], causal=True, sinks=leaves[3]).backward(dout)
    refs = [t.detach().float().requires_grad_() for t in (q, k, v, sinks)]
    reference(*refs[:3], causal=True, sinks=refs[3])[0].backward(dout.float())
    for name, got, want in zip(("dq", "dk", "dv", "dsinks"), leaves, refs):
        c.close(name, got.grad, want.grad, GRAD_TOL)
    c.finish()


if __name__ == "__main__":
    main(run)
