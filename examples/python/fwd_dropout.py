"""fwd_dropout.py - training with attention dropout: forward and backward.

    torch.manual_seed(0)                                   # seeds the dropout masks too
    o = fmha_tile.attention(q, k, v, causal=True, dropout_p=0.1)
    o.backward(dout)                                       # the same mask, redrawn

Each element of P is dropped with probability dropout_p (in 256ths) and the
kept ones are scaled by 256 / (256 - round(256 p)). The mask comes from
Philox with torch's CUDA generator: seed = its initial_seed(), offset = its
get_offset() (with bit 63 set: fmha_tile.philox.kernel_offset), which each
call advances by 4, so torch.manual_seed
reproduces a run and successive calls draw new masks. The backward redraws
the forward's mask from the same seed and offset (nothing is stored).

Checked against an explicit-mask oracle: the keep mask rebuilt on the host
from the seed and offset read before the call (fmha_tile.philox), O =
(softmax(scale q k^T, causal) * Z) v in fp32 and dq/dk/dv by autograd
through it (rel-L2: O 1e-2, gradients 2e-2, bf16), GQA 8:2; the LSE is the
one without dropout; a rerun from the same seed is bitwise equal and the
next call's mask differs.
"""
from _common import setup, main, Checker, reference, visible

GRAD_TOL = 2e-2


def run():
    torch, fmha_tile = setup("fwd_dropout")
    from fmha_tile import philox
    import math
    c = Checker("fwd_dropout")
    b, s_q, s_k, h, hk, d, p = 2, 256, 320, 8, 2, 128, 0.1
    x = [torch.randn(b, s, n, d, dtype=torch.bfloat16, device="cuda")
         for s, n in ((s_q, h), (s_k, hk), (s_k, hk))]
    dout = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
    gen = torch.cuda.default_generators[torch.cuda.current_device()]

    # the training step: forward with dropout, backward
    torch.manual_seed(1234)
    seed, offset = gen.initial_seed(), gen.get_offset()
    q, k, v = (t.clone().requires_grad_() for t in x)
    o, lse = fmha_tile.attention(q, k, v, causal=True, dropout_p=p, return_lse=True)
    o.backward(dout)
    c.true("the generator's offset advanced by 4", gen.get_offset() == offset + 4,
           "offset %d -> %d" % (offset, gen.get_offset()))

    # the oracle: the keep mask of (seed, offset) for heads b * h + head
    keep = philox.keep_mask(seed, philox.kernel_offset(offset), b * h, s_q, s_k, p).view(b, h, s_q, s_k)
    z = keep.to("cuda").float() * philox.keep_scale(p)
    c.true("kept fraction of the mask", abs(keep.float().mean().item() - (1 - philox.threshold(p) / 256))
           < 0.01, "%.4f (1 - %d/256)" % (keep.float().mean().item(), philox.threshold(p)))
    qr, kr, vr = (t.float().requires_grad_() for t in x)
    scale = 1.0 / math.sqrt(d)
    kt = kr.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vt = vr.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    s = torch.matmul(qr.transpose(1, 2), kt.transpose(-1, -2)) * scale
    s = s.masked_fill(~visible(torch, s_q, s_k, causal=True), -math.inf)
    ref = torch.matmul(torch.softmax(s, dim=-1) * z, vt).transpose(1, 2)
    ref.backward(dout.float())
    c.close("O vs the explicit-mask oracle", o.detach(), ref.detach(), 1e-2)
    for name, g, w in (("dq", q.grad, qr.grad), ("dk", k.grad, kr.grad), ("dv", v.grad, vr.grad)):
        c.close("%s %s vs autograd of the oracle" % (name, tuple(g.shape)), g, w, GRAD_TOL)
    plain_o, plain_lse = reference(x[0], x[1], x[2], causal=True)
    c.lse("LSE is the one without dropout", lse, plain_lse)
    c.true("O differs from attention without dropout",
           (o.detach().float() - plain_o).norm().item() > 0.1 * plain_o.norm().item())

    # reproducible from the seed; the next call draws another mask
    torch.manual_seed(1234)
    with torch.no_grad():
        again = fmha_tile.attention(x[0], x[1], x[2], causal=True, dropout_p=p, return_lse=True)[0]
        nxt = fmha_tile.attention(x[0], x[1], x[2], causal=True, dropout_p=p, return_lse=True)[0]
    c.equal("torch.manual_seed reproduces O", again, o.detach())
    c.true("the next call's mask differs", not torch.equal(nxt, again))
    c.finish()


if __name__ == "__main__":
    main(run)
