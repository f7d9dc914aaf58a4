"""fwd_bias.py - an elementwise attention bias (a learned relative-position
bias, an additive padding mask): added to the scaled scores before the mask
and the softmax, and trainable.

    o = fmha_tile.attention(q, k, v, causal=True, bias=bias)   # bias [b or 1, h or 1, s_q, s_k]
    o.backward(dout)                                           # bias.grad: summed to bias's shape

The bias broadcasts over the dims where it has size 1 (missing leading dims
read as 1, so [s_q, s_k] is shared by every sequence and head); fp16, bf16
or fp32; -inf hides a key. With bias.requires_grad the backward returns its
gradient dS (the gradient of the biased scores) summed over the broadcast
dims, in the bias's dtype. Checked against the fp32 reference (autograd
through it for the gradients): the forward for three bias shapes and dtypes
with a -inf tail of padded keys, causal and not; dq, dk, dv and the bias
gradient for each shape, and two deterministic runs bitwise equal.
"""
import math

from _common import setup, main, Checker, reference, TOL_BF16

GRAD_TOL = 2e-2


def run():
    torch, fmha_tile = setup("fwd_bias")
    c = Checker("fwd_bias")
    b, h, hk, d, s_q, s_k = 2, 8, 2, 128, 200, 300
    q = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
    dout = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
    cases = (((1, h, s_q, s_k), torch.bfloat16, True),     # one bias per head, shared by the batch
             ((b, 1, s_q, s_k), torch.float32, False),     # per sequence, shared by the heads
             ((s_q, s_k), torch.float16, True))            # one [s_q, s_k] for everything
    for shape, dtype, causal in cases:
        bias = (2 * torch.rand(shape, device="cuda") - 1).to(dtype)
        bias[..., s_k - 16:] = -math.inf                   # padded keys
        what = "bias %s %s causal=%s" % (tuple(shape), str(dtype)[6:], causal)
        o = fmha_tile.attention(q, k, v, causal=causal, bias=bias)
        ref = reference(q, k, v, causal=causal, bias=bias)[0]
        c.close(what + ": out", o, ref, TOL_BF16)

        # training: every input and the bias require grad
        def grads(fn, det=False):
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v, bias)]
            fn(*leaves, det).backward(dout)
            return [t.grad for t in leaves]

        got = grads(lambda q_, k_, v_, b_, det: fmha_tile.attention(q_, k_, v_, causal=causal, bias=b_,
                                                                    deterministic=det))
        want = grads(lambda q_, k_, v_, b_, det: reference(q_.float(), k_.float(), v_.float(),
                                                           causal=causal, bias=b_.float())[0])
        for name, g, w in zip(("dq", "dk", "dv", "dbias"), got, want):
            c.close("%s: %s %s" % (what, name, tuple(g.shape)), g, w, GRAD_TOL)
        c.true(what + ": dbias dtype is the bias's", got[3].dtype == dtype, str(got[3].dtype))
        det = [grads(lambda q_, k_, v_, b_, dt: fmha_tile.attention(q_, k_, v_, causal=causal, bias=b_,
                                                                    deterministic=True)) for _ in range(2)]
        c.equal(what + ": deterministic rerun, dbias", det[0][3], det[1][3])
    c.finish()


if __name__ == "__main__":
    main(run)
