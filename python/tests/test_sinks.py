"""GPU tests of attention sinks (fmha_tile.attention / attention_varlen, sinks=).

A sink is one logit per query head that joins every row's softmax as a key
with no value (gpt-oss). The reference is written by hand in fp32: scores
(scaled, soft-capped, masked), the sink appended as one more column, a
softmax, the sink column dropped before P V; LSE = logsumexp over the scores
and the sink. A row that sees no key gets O = 0 and LSE = its sink.
Gradients (dq, dk, dv and dsinks) against PyTorch autograd through the same
reference; tolerances as test_attention.py (O rel-L2 bf16 1e-2 / fp16 2e-3,
LSE 2e-3; gradients bf16 2e-2 / fp16 5e-3). Deterministic mode gives the
same bits twice, dsinks included.
"""
import math

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import fmha_tile  # noqa: E402
from test_attention import visible  # noqa: E402  (the mask the other tests use)

DEV = "cuda"
BF16, FP16 = torch.bfloat16, torch.float16
TOL = {BF16: 1e-2, FP16: 2e-3}
GRAD_TOL = {BF16: 2e-2, FP16: 5e-3}
LSE_TOL = 2e-3

torch.backends.cuda.matmul.allow_tf32 = False


def reference(q, k, v, sinks, causal=False, window=(-1, -1), softcap=0.0):
    """fp32, differentiable: q [b, s_q, h, d], k/v [b, s_k, hk, d], sinks [h]
    -> O [b, s_q, h, d], LSE [b, h, s_q]."""
    b, s_q, h, d = q.shape
    s_k, hk = k.shape[1], k.shape[2]
    qf = q.transpose(1, 2)
    kf = k.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vf = v.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    s = torch.matmul(qf, kf.transpose(-1, -2)) / math.sqrt(d)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    s = s.masked_fill(~visible(s_q, s_k, causal, window), -math.inf)
    col = sinks.float().view(1, h, 1, 1).expand(b, h, s_q, 1)
    full = torch.cat([s, col], dim=-1)
    lse = torch.logsumexp(full, dim=-1)
    p = torch.softmax(full, dim=-1)[..., :s_k]
    return torch.matmul(p, vf).transpose(1, 2), lse


def rel_l2(got, ref):
    num = (got.float() - ref.float()).norm().item()
    den = ref.float().norm().item()
    return num / den if den > 0 else num


def inputs(b, s_q, s_k, h, hk, d, dtype):
    q = torch.randn(b, s_q, h, d, dtype=dtype, device=DEV)
    k = torch.randn(b, s_k, hk, d, dtype=dtype, device=DEV)
    v = torch.randn(b, s_k, hk, d, dtype=dtype, device=DEV)
    # from below to above the scores' range: some rows ruled by their sink
    sinks = torch.rand(h, device=DEV) * 5.0 - 2.0
    return q, k, v, sinks


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(4321)


@pytest.mark.parametrize("s_q,s_k,causal,window", [
    (200, 333, True, (-1, -1)),
    (300, 200, True, (-1, -1)),      # the first 100 rows see no key: O = 0, LSE = sink
    (129, 257, False, (40, 10)),
])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_forward(dtype, d, s_q, s_k, causal, window):
    q, k, v, sinks = inputs(2, s_q, s_k, 4, 2, d, dtype)
    o, lse = fmha_tile.attention(q, k, v, causal=causal, window=window, sinks=sinks, return_lse=True)
    ref_o, ref_lse = reference(q.float(), k.float(), v.float(), sinks, causal, window)
    assert torch.isfinite(o).all()
    assert rel_l2(o, ref_o) <= TOL[dtype]
    assert (lse - ref_lse).abs().max().item() <= LSE_TOL
    empty = ~visible(s_q, s_k, causal, window).any(dim=-1)
    if empty.any():
        assert (o[:, empty].float().abs().amax() == 0).item()
        assert torch.equal(lse[:, :, empty], sinks.view(1, -1, 1).expand(2, -1, int(empty.sum())))


def test_forward_softcap_and_no_keys():
    q, k, v, sinks = inputs(2, 100, 150, 8, 8, 128, BF16)
    o = fmha_tile.attention(q, k, v, softcap=20.0, sinks=sinks)
    ref_o, _ = reference(q.float(), k.float(), v.float(), sinks, softcap=20.0)
    assert rel_l2(o, ref_o) <= TOL[BF16]
    o, lse = fmha_tile.attention(q, k[:, :0], v[:, :0], sinks=sinks, return_lse=True)
    assert (o == 0).all()
    assert torch.equal(lse, sinks.view(1, -1, 1).expand(2, -1, 100))


def test_varlen_forward():
    lens_q, lens_k = [17, 0, 130, 5], [40, 7, 300, 0]
    h, hk, d = 4, 1, 128
    cq = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=DEV)
    ck = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=DEV)
    q = torch.randn(sum(lens_q), h, d, dtype=BF16, device=DEV)
    k = torch.randn(sum(lens_k), hk, d, dtype=BF16, device=DEV)
    v = torch.randn(sum(lens_k), hk, d, dtype=BF16, device=DEV)
    sinks = torch.rand(h, device=DEV) * 5.0 - 2.0
    o, lse = fmha_tile.attention_varlen(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=True,
                                        sinks=sinks, return_lse=True)
    for i in range(len(lens_q)):
        a, z, ka, kz = int(cq[i]), int(cq[i + 1]), int(ck[i]), int(ck[i + 1])
        if a == z:
            continue
        ro, rl = reference(q[None, a:z].float(), k[None, ka:kz].float(), v[None, ka:kz].float(),
                           sinks, causal=True)
        assert rel_l2(o[a:z], ro[0]) <= TOL[BF16] or ro.abs().max() == 0
        assert (lse[:, a:z] - rl[0]).abs().max().item() <= LSE_TOL


def grads(fn, q, k, v, sinks, dout):
    q, k, v, sinks = (x.detach().clone().requires_grad_() for x in (q, k, v, sinks))
    o = fn(q, k, v, sinks)
    o.backward(dout)
    return o.detach(), q.grad, k.grad, v.grad, sinks.grad


@pytest.mark.parametrize("s_q,s_k,causal,window", [
    (200, 257, True, (-1, -1)),
    (300, 200, True, (-1, -1)),      # rows with no key: their sink takes all the weight
    (77, 100, False, (-1, -1)),      # one key tile per sequence: dQ written directly
    (129, 333, False, (64, 8)),
])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_grad(dtype, s_q, s_k, causal, window):
    q, k, v, sinks = inputs(2, s_q, s_k, 8, 2, 128, dtype)
    dout = torch.randn(2, s_q, 8, 128, dtype=dtype, device=DEV)
    got = grads(lambda q, k, v, s: fmha_tile.attention(q, k, v, causal=causal, window=window, sinks=s),
                q, k, v, sinks, dout)
    ref = grads(lambda q, k, v, s: reference(q, k, v, s, causal, window)[0],
                q.float(), k.float(), v.float(), sinks, dout.float())
    for name, g, r in zip(("dq", "dk", "dv", "dsinks"), got[1:], ref[1:]):
        assert g is not None and g.shape == r.shape, name
        assert torch.isfinite(g).all(), name
        err = rel_l2(g, r)
        assert err <= GRAD_TOL[dtype], "%s rel-L2 %.3e" % (name, err)


def test_grad_deterministic_and_softcap():
    q, k, v, sinks = inputs(1, 300, 500, 4, 4, 64, FP16)
    dout = torch.randn(1, 300, 4, 64, dtype=FP16, device=DEV)

    def fn(q, k, v, s):
        return fmha_tile.attention(q, k, v, causal=True, softcap=10.0, sinks=s, deterministic=True)
    a = grads(fn, q, k, v, sinks, dout)
    b = grads(fn, q, k, v, sinks, dout)
    for x, y in zip(a[1:], b[1:]):
        assert torch.equal(x, y)
    ref = grads(lambda q, k, v, s: reference(q, k, v, s, True, softcap=10.0)[0],
                q.float(), k.float(), v.float(), sinks, dout.float())
    assert rel_l2(a[4], ref[4]) <= GRAD_TOL[FP16]


def test_bad_sinks():
    q, k, v, sinks = inputs(1, 10, 10, 4, 4, 64, BF16)
    with pytest.raises(ValueError):
        fmha_tile.attention(q, k, v, sinks=sinks[:3])
    with pytest.raises(TypeError):
        fmha_tile.attention(q, k, v, sinks=sinks.double())
    with pytest.raises(ValueError):
        fmha_tile.attention(q, k, v, sinks=sinks.cpu())
