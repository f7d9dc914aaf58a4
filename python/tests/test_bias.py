"""GPU tests of the elementwise attention bias (fmha_tile.attention /
attention_varlen, bias=) and its gradient.

The oracle is PyTorch SDPA (math backend) on fp32 copies with the bias and
the mask as one float attn_mask: bias + (0 where the key is visible, -inf
where not). Gradients (dq, dk, dv and the bias's, which SDPA reduces to the
bias's broadcast shape through autograd) come from the same SDPA call;
gradcheck in float64 is not possible on the kernels (16-bit only), so the
fp32 reference stands in for it. Tolerances as test_attention.py (O rel-L2
bf16 1e-2 / fp16 2e-3; gradients bf16 2e-2 / fp16 5e-3). Covered: every
broadcast shape ([b,h], [1,h], [1,1], [b,1], [s_q, s_k]), fp16/bf16/fp32
bias, causal and sliding windows, GQA, -inf elements, varlen (packed bias
rows, per head and shared), deterministic mode (the same bits twice, dbias
included), the torch.library ops under autograd, and the refusals.
"""
import itertools
import math

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import fmha_tile  # noqa: E402
from test_attention import visible  # noqa: E402  (the mask the other tests use)

DEV = "cuda"
BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32
TOL = {BF16: 1e-2, FP16: 2e-3}
GRAD_TOL = {BF16: 2e-2, FP16: 5e-3}

torch.backends.cuda.matmul.allow_tf32 = False


def rel_l2(got, ref):
    num = (got.float() - ref.float()).norm().item()
    den = ref.float().norm().item()
    return num / den if den > 0 else num


def sdpa(q, k, v, bias, causal=False, window=(-1, -1)):
    """fp32 SDPA (math backend), differentiable in q, k, v and bias:
    q [b, s_q, h, d], k/v [b, s_k, hk, d], bias broadcastable to
    [b, h, s_q, s_k]. Rows that see no key give NaN in SDPA; callers keep
    every row visible."""
    import torch.nn.functional as F
    b, s_q, h, d = q.shape
    s_k, hk = k.shape[1], k.shape[2]
    qt = q.float().transpose(1, 2)
    kt = k.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vt = v.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    mask = torch.zeros(s_q, s_k, device=DEV).masked_fill(~visible(s_q, s_k, causal, window), -math.inf)
    attn_mask = bias.float() + mask
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = sdpa_kernel([SDPBackend.MATH])
    except ImportError:                                      # torch < 2.3
        ctx = torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True,
                                             enable_mem_efficient=False)
    with ctx:
        o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=attn_mask)
    return o.transpose(1, 2)


def inputs(b, s_q, s_k, h, hk, d, dtype):
    q = torch.randn(b, s_q, h, d, dtype=dtype, device=DEV)
    k = torch.randn(b, s_k, hk, d, dtype=dtype, device=DEV)
    v = torch.randn(b, s_k, hk, d, dtype=dtype, device=DEV)
    return q, k, v


def make_bias(shape, dtype, hide=False):
    bias = (4 * torch.rand(shape, device=DEV) - 2).to(dtype)
    if hide:   # every 7th key hidden, never a whole row
        bias[..., 3::7] = -math.inf
    return bias


def grads(fn, tensors, dout):
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    out = fn(*leaves)
    out.backward(dout)
    return out.detach(), [t.grad for t in leaves]


CASES = [
    # (b, s_q, s_k, h, hk, d, dtype, bias shape (None: per test), bias dtype, causal, window, hide)
    (2, 128, 128, 4, 4, 64, BF16, "bh", FP32, False, (-1, -1), False),
    (2, 200, 300, 8, 2, 128, BF16, "1h", BF16, True, (-1, -1), True),
    (2, 97, 257, 4, 1, 64, FP16, "11", FP16, False, (-1, -1), False),
    (3, 130, 260, 4, 2, 128, FP16, "b1", FP32, False, (32, 8), False),
    (1, 255, 255, 2, 2, 64, BF16, "2d", BF16, True, (-1, -1), True),
    (2, 1, 77, 16, 1, 64, BF16, "1h", FP32, False, (-1, -1), False),
    (2, 64, 40, 4, 2, 64, FP16, "bh", FP16, False, (-1, -1), False),   # one key tile: dQ direct
]


def bias_shape(kind, b, h, s_q, s_k):
    return {"bh": (b, h, s_q, s_k), "1h": (1, h, s_q, s_k), "11": (1, 1, s_q, s_k),
            "b1": (b, 1, s_q, s_k), "2d": (s_q, s_k)}[kind]


def _id(c):
    return "b%d_s%dx%d_h%d:%d_d%d_%s_bias%s_%s%s%s%s" % (
        c[0], c[1], c[2], c[3], c[4], c[5], str(c[6])[6:], c[7], str(c[8])[6:],
        "_causal" if c[9] else "", "_win%d,%d" % c[10] if c[10] != (-1, -1) else "", "_inf" if c[11] else "")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
@pytest.mark.parametrize("deterministic", [False, True])
def test_bias_fwd_bwd(case, deterministic):
    b, s_q, s_k, h, hk, d, dtype, kind, bdt, causal, window, hide = case
    torch.manual_seed(1)
    q, k, v = inputs(b, s_q, s_k, h, hk, d, dtype)
    bias = make_bias(bias_shape(kind, b, h, s_q, s_k), bdt, hide)
    dout = torch.randn(b, s_q, h, d, dtype=dtype, device=DEV)
    o, got = grads(lambda q_, k_, v_, b_: fmha_tile.attention(q_, k_, v_, causal=causal, window=window,
                                                              bias=b_, deterministic=deterministic),
                   (q, k, v, bias), dout)
    ref, want = grads(lambda q_, k_, v_, b_: sdpa(q_, k_, v_, b_, causal, window),
                      (q.float(), k.float(), v.float(), bias.float()), dout.float())
    assert rel_l2(o, ref) <= TOL[dtype], "out rel-L2 %.3g" % rel_l2(o, ref)
    for name, g, w in zip(("dq", "dk", "dv", "dbias"), got, want):
        assert g.shape == w.shape, name
        assert torch.isfinite(g.float()).all(), name + " not finite"
        err = rel_l2(g, w)
        assert err <= GRAD_TOL[dtype], "%s rel-L2 %.3g (tol %g)" % (name, err, GRAD_TOL[dtype])
    assert got[3].dtype == bdt and got[3].shape == bias.shape
    if hide:   # a hidden key has no gradient
        assert (got[3].float()[torch.isinf(bias)] == 0).all()
    if deterministic:
        _, again = grads(lambda q_, k_, v_, b_: fmha_tile.attention(q_, k_, v_, causal=causal, window=window,
                                                                    bias=b_, deterministic=True),
                         (q, k, v, bias), dout)
        for name, g1, g2 in zip(("dq", "dk", "dv", "dbias"), got, again):
            assert torch.equal(g1, g2), "deterministic: %s differs between two runs" % name


def test_bias_forward_no_grad_and_lse():
    """Inference path (no grad): out and lse against SDPA; -inf hides keys."""
    q, k, v = inputs(2, 100, 150, 8, 2, 128, BF16)
    bias = make_bias((1, 8, 100, 150), FP16, hide=True)
    with torch.no_grad():
        o, lse = fmha_tile.attention(q, k, v, causal=True, bias=bias, return_lse=True)
    ref = sdpa(q, k, v, bias, causal=True)
    assert rel_l2(o, ref) <= TOL[BF16]
    # LSE: logsumexp of the biased, masked scores
    qt = q.float().transpose(1, 2)
    kt = k.float().transpose(1, 2).repeat_interleave(4, dim=1)
    s = torch.matmul(qt, kt.transpose(-1, -2)) / math.sqrt(128) + bias.float()
    s = s.masked_fill(~visible(100, 150, True, (-1, -1)), -math.inf)
    assert (lse - torch.logsumexp(s, dim=-1)).abs().max().item() <= 2e-3


def test_bias_only_bias_requires_grad():
    q, k, v = inputs(2, 64, 96, 4, 2, 64, FP16)
    bias = make_bias((4, 64, 96), FP32).requires_grad_()
    dout = torch.randn(2, 64, 4, 64, dtype=FP16, device=DEV)
    fmha_tile.attention(q, k, v, bias=bias).backward(dout)
    b2 = bias.detach().clone().requires_grad_()
    sdpa(q, k, v, b2).backward(dout.float())
    assert bias.grad.shape == (4, 64, 96) and rel_l2(bias.grad, b2.grad) <= GRAD_TOL[FP16]


def _varlen_ref(q, k, v, bias, lens_q, lens_k, causal):
    """Per-sequence SDPA: sequence i reads bias rows cu_q[i].. and columns 0..s_k_i-1."""
    outs, aq, ak = [], 0, 0
    for nq, nk in zip(lens_q, lens_k):
        bb = bias[..., aq:aq + nq, :nk]
        bb = bb.unsqueeze(0) if bb.dim() == 3 else bb
        outs.append(sdpa(q[None, aq:aq + nq], k[None, ak:ak + nk], v[None, ak:ak + nk], bb, causal)[0])
        aq, ak = aq + nq, ak + nk
    return torch.cat(outs, dim=0)


@pytest.mark.parametrize("heads_shared", [False, True])
@pytest.mark.parametrize("deterministic", [False, True])
def test_bias_varlen(heads_shared, deterministic):
    torch.manual_seed(2)
    lens_q, lens_k = [100, 1, 200, 37], [300, 1, 250, 37]
    h, hk, d = 8, 2, 64
    cu_q = torch.tensor([0] + list(itertools.accumulate(lens_q)), dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0] + list(itertools.accumulate(lens_k)), dtype=torch.int32, device=DEV)
    tq, tk, mq, mk = sum(lens_q), sum(lens_k), max(lens_q), max(lens_k)
    q = torch.randn(tq, h, d, dtype=BF16, device=DEV)
    k = torch.randn(tk, hk, d, dtype=BF16, device=DEV)
    v = torch.randn(tk, hk, d, dtype=BF16, device=DEV)
    cols = mk + 5   # wider than the longest sequence: the extra columns get 0 gradient
    bias = make_bias((tq, cols) if heads_shared else (h, tq, cols), FP32)
    dout = torch.randn(tq, h, d, dtype=BF16, device=DEV)
    o, got = grads(lambda q_, k_, v_, b_: fmha_tile.attention_varlen(
        q_, k_, v_, cu_q, cu_k, mq, mk, causal=True, bias=b_, deterministic=deterministic),
        (q, k, v, bias), dout)
    bref = bias if not heads_shared else bias.unsqueeze(0)
    ref, want = grads(lambda q_, k_, v_, b_: _varlen_ref(q_, k_, v_, b_, lens_q, lens_k, True),
                      (q.float(), k.float(), v.float(), bref.float()), dout.float())
    assert rel_l2(o, ref) <= TOL[BF16]
    want[3] = want[3].reshape(bias.shape)
    for name, g, w in zip(("dq", "dk", "dv", "dbias"), got, want):
        err = rel_l2(g, w)
        assert g.shape == w.shape and err <= GRAD_TOL[BF16], "%s rel-L2 %.3g" % (name, err)
    # columns past a sequence's keys: exactly 0
    g = got[3] if not heads_shared else got[3].unsqueeze(0)
    aq = 0
    for nq, nk in zip(lens_q, lens_k):
        assert (g[:, aq:aq + nq, nk:] == 0).all()
        aq += nq


def test_bias_ops_autograd():
    """The torch.library ops: fwd with bias= under autograd returns the bias
    gradient through bwd (want_dbias)."""
    import fmha_tile.ops  # noqa: F401
    q, k, v = inputs(2, 80, 120, 4, 2, 64, FP16)
    bias = make_bias((1, 4, 80, 120), FP16)
    dout = torch.randn(2, 80, 4, 64, dtype=FP16, device=DEV)
    _, got = grads(lambda q_, k_, v_, b_: torch.ops.fmha_tile.fwd(q_, k_, v_, True, bias=b_)[0],
                   (q, k, v, bias), dout)
    _, want = grads(lambda q_, k_, v_, b_: sdpa(q_, k_, v_, b_, True),
                    (q.float(), k.float(), v.float(), bias.float()), dout.float())
    for name, g, w in zip(("dq", "dk", "dv", "dbias"), got, want):
        assert rel_l2(g, w) <= GRAD_TOL[FP16], name


@pytest.mark.parametrize("kw,exc,match", [
    ({"bias": "shape"}, ValueError, "bias must have shape"),
    ({"bias": "dtype"}, TypeError, "bias must be torch.float16"),
    ({"bias": "alibi"}, ValueError, "alibi"),
    ({"bias": "softcap_grad"}, fmha_tile.FmhaError, "soft ?cap"),
])
def test_bias_refusals(kw, exc, match):
    q, k, v = inputs(1, 32, 48, 2, 2, 64, BF16)
    what = kw["bias"]
    with pytest.raises(exc, match=match):
        if what == "shape":
            fmha_tile.attention(q, k, v, bias=torch.zeros(1, 2, 32, 47, device=DEV))
        elif what == "dtype":
            fmha_tile.attention(q, k, v, bias=torch.zeros(32, 48, device=DEV, dtype=torch.int32))
        elif what == "alibi":
            fmha_tile.attention(q, k, v, bias=torch.zeros(32, 48, device=DEV),
                                alibi_slopes=torch.ones(2, device=DEV))
        else:   # dbias with a soft cap: the plan refuses (and the default set has no such row)
            bias = torch.zeros(32, 48, device=DEV).requires_grad_()
            fmha_tile.attention(q, k, v, bias=bias, softcap=5.0).sum().backward()
