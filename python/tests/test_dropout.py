"""GPU tests of dropout through the Python API: fmha_tile.attention /
attention_varlen (autograd), the custom ops and fmha_tile.compat.

The oracle is an explicit mask: the keep decisions are rebuilt on the host
from the Philox rule (fmha_tile.philox, itself checked against Random123's
vectors and the C header in test_dropout_host.py) with the seed and offset
read from torch's CUDA generator before the call (initial_seed(), and
get_offset() with bit 63 set: philox.kernel_offset). Then O_ref = (softmax(scale * Q K^T + masks) * Z) V in fp32,
Z = keep * 256 / (256 - threshold), and the gradients are PyTorch autograd
through that reference. Tolerances as test_attention.py: O rel-L2 bf16 1e-2,
fp16 2e-3, LSE (the one without dropout) 2e-3 absolute; gradients bf16
2e-2, fp16 5e-3.

A second oracle reads the mask straight out of the kernel: with q = 0 every
row's P is uniform (1 / s_k), and with V the identity (s_k = head dim) O is
Z / s_k, so O != 0 is the kernel's keep mask, compared bit for bit with the
host's (batch, GQA and varlen indexing), and counted for the keep rate.

Also: the generator's offset advances by 4 per call; torch.manual_seed
reproduces a run bitwise; another seed or the next call draws another mask;
dropout_p = 0 is bitwise the call without dropout and leaves the generator
alone; a generator= argument; CUDA graph capture (the device rng path);
argument errors.

Skips cleanly (module level) without torch, a CUDA GPU or the library.
"""
import math

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import fmha_tile  # noqa: E402
from fmha_tile import _dropout, philox  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

DEV = "cuda"
BF16, FP16 = torch.bfloat16, torch.float16
TOL = {BF16: 1e-2, FP16: 2e-3}
GRAD_TOL = {BF16: 2e-2, FP16: 5e-3}
LSE_TOL = 2e-3


# ---- helpers ------------------------------------------------------------------------------------
def generator():
    return torch.cuda.default_generators[torch.cuda.current_device()]


def seed_offset(gen=None):
    """The generator's (seed, offset): the next dropout call draws from
    seed and K(offset)."""
    g = gen or generator()
    return g.initial_seed(), g.get_offset()


K = philox.kernel_offset      # the generator's offset -> the kernels' (bit 63 set)


def rand(*shape, dtype=BF16):
    return torch.randn(*shape, dtype=dtype, device=DEV)


def rel_l2(got, ref):
    num = (got.float() - ref.float()).norm().item()
    den = ref.float().norm().item()
    return num / den if den > 0 else num


def visible(s_q, s_k, causal, window):
    """[s_q, s_k] bool, FlashAttention's bottom-right alignment."""
    left, right = window
    if causal:
        right = 0
    i = torch.arange(s_q, device=DEV)[:, None]
    j = torch.arange(s_k, device=DEV)[None, :]
    off = s_k - s_q
    m = torch.ones(s_q, s_k, dtype=torch.bool, device=DEV)
    if left >= 0:
        m &= j >= i + off - left
    if right >= 0:
        m &= j <= i + off + right
    return m


def z_factor(seed, offset, bh, s_q, s_k, p):
    """Z [len(bh), s_q, s_k] fp32 on the GPU: keep * 256 / (256 - threshold)."""
    keep = philox.keep_mask(seed, offset, bh, s_q, s_k, p)
    return keep.to(DEV).float() * philox.keep_scale(p)


def reference(q, k, v, z, causal=False, window=(-1, -1), softcap=0.0, scale=None):
    """Differentiable fp32 reference of one batch-mode call with dropout
    factors z [b, h, s_q, s_k] -> (O [b, s_q, h, d], LSE [b, h, s_q], the
    LSE without dropout)."""
    b, s_q, h, d = q.shape
    s_k, hk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    qt = q.float().transpose(1, 2)
    kt = k.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vt = v.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    s = torch.matmul(qt, kt.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    mask = visible(s_q, s_k, causal, window)
    lse = torch.logsumexp(s.masked_fill(~mask, -math.inf), dim=-1)
    pr = torch.softmax(s.masked_fill(~mask, -1e30), dim=-1) * mask
    o = torch.matmul(pr * z, vt)
    return o.transpose(1, 2), lse


def batch_z(seed, offset, b, h, s_q, s_k, p):
    return z_factor(seed, offset, b * h, s_q, s_k, p).view(b, h, s_q, s_k)


def leaf(*xs):
    return [x.detach().clone().requires_grad_() for x in xs]


def check_close(name, got, ref, tol):
    assert torch.isfinite(got.float()).all(), "%s not finite" % name
    err = rel_l2(got, ref)
    assert err <= tol, "%s rel-L2 %.3e > %.0e" % (name, err, tol)


def check_lse(got, ref):
    fin = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(got), fin)
    if fin.any():
        assert (got[fin] - ref[fin]).abs().max().item() <= LSE_TOL


# ---- forward and backward against the explicit-mask oracle ---------------------------------------------
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_forward_vs_mask_oracle(dtype, d, causal):
    b, s_q, s_k, h, hk, p = 2, 200, 257, 4, 2, 0.2       # GQA 2:1, partial tiles
    q, k, v = rand(b, s_q, h, d, dtype=dtype), rand(b, s_k, hk, d, dtype=dtype), \
        rand(b, s_k, hk, d, dtype=dtype)
    seed, offset = seed_offset()
    o, lse = fmha_tile.attention(q, k, v, causal=causal, return_lse=True, dropout_p=p)
    assert seed_offset() == (seed, offset + _dropout.OFFSET_INCREMENT)
    ref_o, ref_lse = reference(q, k, v, batch_z(seed, K(offset), b, h, s_q, s_k, p), causal)
    assert o.dtype == dtype and o.shape == (b, s_q, h, d)
    check_close("O", o, ref_o, TOL[dtype])
    check_lse(lse, ref_lse)
    # far from the reference without dropout and from another offset's mask
    plain, _ = reference(q, k, v, torch.ones(1, device=DEV), causal)
    assert rel_l2(o, plain) > 10 * TOL[dtype]
    other, _ = reference(q, k, v, batch_z(seed, K(offset + 4), b, h, s_q, s_k, p), causal)
    assert rel_l2(o, other) > 10 * TOL[dtype]


@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_backward_vs_mask_oracle(dtype, causal, deterministic):
    b, s_q, s_k, h, hk, d, p = 2, 130, 190, 4, 2, 64, 0.3
    q, k, v = rand(b, s_q, h, d, dtype=dtype), rand(b, s_k, hk, d, dtype=dtype), \
        rand(b, s_k, hk, d, dtype=dtype)
    dout = rand(b, s_q, h, d, dtype=dtype)
    seed, offset = seed_offset()
    state = generator().get_state()
    ql, kl, vl = leaf(q, k, v)
    o = fmha_tile.attention(ql, kl, vl, causal=causal, dropout_p=p, deterministic=deterministic)
    o.backward(dout)
    z = batch_z(seed, K(offset), b, h, s_q, s_k, p)
    qr, kr, vr = leaf(q.float(), k.float(), v.float())
    ref_o, _ = reference(qr, kr, vr, z, causal)
    ref_o.backward(dout.float())
    check_close("O", o.detach(), ref_o.detach(), TOL[dtype])
    for name, g, r, x in (("dq", ql.grad, qr.grad, q), ("dk", kl.grad, kr.grad, k),
                          ("dv", vl.grad, vr.grad, v)):
        assert g.dtype == dtype and g.shape == x.shape, name
        check_close(name, g, r, GRAD_TOL[dtype])
    if deterministic:       # the same forward draw, the same bits
        generator().set_state(state)
        ql2, kl2, vl2 = leaf(q, k, v)
        o2 = fmha_tile.attention(ql2, kl2, vl2, causal=causal, dropout_p=p, deterministic=True)
        o2.backward(dout)
        assert torch.equal(o2, o)
        assert torch.equal(ql2.grad, ql.grad) and torch.equal(kl2.grad, kl.grad) \
            and torch.equal(vl2.grad, vl.grad)


def test_backward_window_softcap_scale():
    b, s_q, s_k, h, d, p = 1, 96, 160, 2, 128, 0.1
    q, k, v, dout = rand(b, s_q, h, d), rand(b, s_k, h, d), rand(b, s_k, h, d), rand(b, s_q, h, d)
    kw = dict(window=(48, 8), softcap=20.0, scale=0.07)
    seed, offset = seed_offset()
    ql, kl, vl = leaf(q, k, v)
    o = fmha_tile.attention(ql, kl, vl, dropout_p=p, **kw)
    o.backward(dout)
    qr, kr, vr = leaf(q.float(), k.float(), v.float())
    ref_o, _ = reference(qr, kr, vr, batch_z(seed, K(offset), b, h, s_q, s_k, p), **kw)
    ref_o.backward(dout.float())
    check_close("O", o.detach(), ref_o.detach(), TOL[BF16])
    for name, g, r in (("dq", ql.grad, qr.grad), ("dk", kl.grad, kr.grad), ("dv", vl.grad, vr.grad)):
        check_close(name, g, r, GRAD_TOL[BF16])


@pytest.mark.parametrize("s_q,s_k,d", [(1, 1, 8), (3, 17, 16), (33, 5, 32), (9, 40, 256)],
                         ids=["1x1_d8", "3x17_d16", "33x5_d32", "9x40_d256"])
def test_small_shapes_gradients(s_q, s_k, d):
    # a gradcheck in spirit (the kernels have no float64): tiny and odd shapes,
    # a high drop rate, fp16, against autograd of the fp32 oracle
    b, h, hk, p = 2, 2, 1, 0.5
    q, k, v = rand(b, s_q, h, d, dtype=FP16), rand(b, s_k, hk, d, dtype=FP16), \
        rand(b, s_k, hk, d, dtype=FP16)
    dout = rand(b, s_q, h, d, dtype=FP16)
    seed, offset = seed_offset()
    ql, kl, vl = leaf(q, k, v)
    o = fmha_tile.attention(ql, kl, vl, dropout_p=p)
    o.backward(dout)
    qr, kr, vr = leaf(q.float(), k.float(), v.float())
    ref_o, _ = reference(qr, kr, vr, batch_z(seed, K(offset), b, h, s_q, s_k, p))
    ref_o.backward(dout.float())
    check_close("O", o.detach(), ref_o.detach(), TOL[FP16])
    for name, g, r in (("dq", ql.grad, qr.grad), ("dk", kl.grad, kr.grad), ("dv", vl.grad, vr.grad)):
        check_close(name, g, r, GRAD_TOL[FP16])


# ---- varlen ------------------------------------------------------------------------------------------
def varlen_case(lens_q, lens_k, h, hk, d, dtype=BF16):
    q, k, v = rand(sum(lens_q), h, d, dtype=dtype), rand(sum(lens_k), hk, d, dtype=dtype), \
        rand(sum(lens_k), hk, d, dtype=dtype)
    cq = [0]
    ck = [0]
    for a, c in zip(lens_q, lens_k):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + c)
    cu = [torch.tensor(x, dtype=torch.int32, device=DEV) for x in (cq, ck)]
    return q, k, v, cu[0], cu[1], cq, ck


def varlen_reference(q, k, v, cq, ck, seed, offset, p, causal):
    """Per sequence b: its own (b * h + head) Philox streams, i and j within it."""
    h = q.shape[1]
    outs = []
    for n in range(len(cq) - 1):
        sq, sk = cq[n + 1] - cq[n], ck[n + 1] - ck[n]
        qs, ks, vs = q[cq[n]:cq[n + 1]][None], k[ck[n]:ck[n + 1]][None], v[ck[n]:ck[n + 1]][None]
        if sq == 0:
            continue
        if sk == 0:
            outs.append(torch.zeros(sq, h, v.shape[-1], device=DEV))
            continue
        z = z_factor(seed, offset, [n * h + x for x in range(h)], sq, sk, p)[None]
        outs.append(reference(qs, ks, vs, z, causal)[0][0])
    return torch.cat(outs, 0)


@pytest.mark.parametrize("api", ["attention_varlen", "compat"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_forward_backward(api, causal):
    from fmha_tile import compat
    lens_q, lens_k = [37, 0, 1, 150, 64], [50, 9, 1, 200, 20]
    h, hk, d, p = 4, 2, 64, 0.25
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(lens_q, lens_k, h, hk, d)
    dout = rand(*q.shape)
    seed, offset = seed_offset()
    ql, kl, vl = leaf(q, k, v)
    if api == "compat":
        o = compat.flash_attn_varlen_func(ql, kl, vl, cu_q, cu_k, max(lens_q), max(lens_k),
                                          dropout_p=p, causal=causal)
    else:
        o = fmha_tile.attention_varlen(ql, kl, vl, cu_q, cu_k, max(lens_q), max(lens_k),
                                       causal=causal, dropout_p=p)
    o.backward(dout)
    assert seed_offset() == (seed, offset + _dropout.OFFSET_INCREMENT)
    qr, kr, vr = leaf(q.float(), k.float(), v.float())
    ref_o = varlen_reference(qr, kr, vr, cq, ck, seed, K(offset), p, causal)
    ref_o.backward(dout.float())
    check_close("O", o.detach(), ref_o.detach(), TOL[BF16])
    for name, g, r in (("dq", ql.grad, qr.grad), ("dk", kl.grad, kr.grad), ("dv", vl.grad, vr.grad)):
        check_close(name, g, r, GRAD_TOL[BF16])


# ---- the ops and compat's batch function -------------------------------------------------------------
@pytest.mark.parametrize("api", ["ops", "compat"])
def test_ops_and_compat_batch(api):
    from fmha_tile import compat, ops
    b, s_q, s_k, h, d, p = 2, 64, 100, 2, 64, 0.4
    q, k, v, dout = rand(b, s_q, h, d), rand(b, s_k, h, d), rand(b, s_k, h, d), rand(b, s_q, h, d)
    seed, offset = seed_offset()
    ql, kl, vl = leaf(q, k, v)
    if api == "ops":
        o = ops.attention(ql, kl, vl, causal=True, dropout_p=p)
    else:
        o = compat.flash_attn_func(ql, kl, vl, dropout_p=p, causal=True)
    o.backward(dout)
    assert seed_offset() == (seed, offset + _dropout.OFFSET_INCREMENT)
    qr, kr, vr = leaf(q.float(), k.float(), v.float())
    ref_o, _ = reference(qr, kr, vr, batch_z(seed, K(offset), b, h, s_q, s_k, p), True)
    ref_o.backward(dout.float())
    check_close("O", o.detach(), ref_o.detach(), TOL[BF16])
    for name, g, r in (("dq", ql.grad, qr.grad), ("dk", kl.grad, kr.grad), ("dv", vl.grad, vr.grad)):
        check_close(name, g, r, GRAD_TOL[BF16])


def test_op_with_explicit_seed_offset():
    # the op is a pure function of (seed, offset): no generator involved; the
    # seed's top bit set travels as a negative int64
    import fmha_tile.ops  # noqa: F401
    b, s_q, s_k, h, d, p = 1, 40, 72, 2, 64, 0.5
    q, k, v = rand(b, s_q, h, d), rand(b, s_k, h, d), rand(b, s_k, h, d)
    seed, offset = 2 ** 64 - 12345, (3 << 32) + 8
    before = seed_offset()
    o, _ = torch.ops.fmha_tile.fwd(q, k, v, False, -1, -1, 0.0, None, None, None, False, None, None,
                                   None, None, p, _dropout.to_i64(seed), offset, None)
    assert seed_offset() == before
    ref_o, _ = reference(q, k, v, batch_z(seed, offset, b, h, s_q, s_k, p))
    check_close("O", o, ref_o, TOL[BF16])
    # the same values through a device {seed, offset} tensor (fmha_fwd_args.dropout_rng)
    rng = torch.tensor([_dropout.to_i64(seed), offset], dtype=torch.int64, device=DEV)
    o2, _ = torch.ops.fmha_tile.fwd(q, k, v, False, -1, -1, 0.0, None, None, None, False, None, None,
                                    None, None, p, 0, 0, rng)
    assert torch.equal(o2, o)


def _ops_or_skip():
    try:
        from fmha_tile import ops
    except ImportError as e:
        pytest.skip("fmha_tile.ops: %s" % e)
    return ops


def test_opcheck_dropout():
    # the ops with dropout: fixed seed/offset make them deterministic, which
    # opcheck's repeated runs (schema, fake, autograd registration) rely on
    _ops_or_skip()
    q, k, v = (x.requires_grad_() for x in (rand(1, 17, 2, 64), rand(1, 33, 1, 64), rand(1, 33, 1, 64)))
    torch.library.opcheck(torch.ops.fmha_tile.fwd.default,
                          (q, k, v, True, -1, -1, 0.0, None, None, None, False, None, None, None, None,
                           0.3, _dropout.to_i64(2 ** 63 + 5), 8, None))
    o, lse = torch.ops.fmha_tile.fwd(q.detach(), k.detach(), v.detach(), True, -1, -1, 0.0, None,
                                     None, None, False, None, None, None, None, 0.3, 11, 8, None)
    torch.library.opcheck(torch.ops.fmha_tile.bwd.default,
                          (torch.randn_like(o), q.detach(), k.detach(), v.detach(), o, lse, True, -1, -1,
                           0.0, None, None, None, False, None, 0.3, 11, 8, None))


def test_compile_fullgraph_draws_per_call():
    # under torch.compile the wrapper draws {seed, offset} on the device (a
    # random op in the graph), never a pair frozen into it: two calls of the
    # compiled function draw two masks; no graph break
    ops = _ops_or_skip()
    from torch._dynamo.utils import counters
    b, s_q, h, d, p = 1, 64, 2, 128, 0.5
    q = torch.zeros(b, s_q, h, d, dtype=BF16, device=DEV)
    k = rand(b, d, h, d)
    v = torch.eye(d, dtype=BF16, device=DEV)[None, :, None, :].expand(b, d, h, d).contiguous()

    def fn(q, k, v):
        return ops.attention(q, k, v, dropout_p=p) * 1.0

    counters.clear()
    f = torch.compile(fn, backend="aot_eager", fullgraph=True)
    r1, r2 = f(q, k, v), f(q, k, v)
    assert len(counters["graph_break"]) == 0, dict(counters["graph_break"])
    assert not torch.equal(r1, r2)
    want = 1.0 - philox.threshold(p) / 256.0
    for r in (r1, r2):
        keep, vals = kernel_mask(r, d)
        f_ = keep.float().mean().item()
        assert abs(f_ - want) <= 4 * math.sqrt(want * (1 - want) / keep.numel()), f_
        assert (vals - philox.keep_scale(p)).abs().max().item() <= 1e-2 * philox.keep_scale(p)


# ---- the kernel's own mask (q = 0, V = I) ---------------------------------------------------------------
def kernel_mask(o, s_k):
    """O = Z / s_k elementwise when P is uniform and V the identity: -> (keep
    mask, the kept values times s_k)."""
    keep = o != 0
    return keep, (o.float() * s_k)[keep]


def test_mask_bitwise_batch_gqa():
    b, s_q, h, hk, d, p = 2, 77, 8, 2, 128, 0.3
    s_k = d
    q = torch.zeros(b, s_q, h, d, dtype=BF16, device=DEV)
    eye = torch.eye(s_k, d, dtype=BF16, device=DEV)
    k = rand(b, s_k, hk, d)
    v = eye[None, :, None, :].expand(b, s_k, hk, d).contiguous()
    seed, offset = seed_offset()
    o = fmha_tile.attention(q, k, v, dropout_p=p)
    keep, vals = kernel_mask(o, s_k)                                  # [b, s_q, h, s_k]
    want = philox.keep_mask(seed, K(offset), b * h, s_q, s_k, p).view(b, h, s_q, s_k).transpose(1, 2)
    assert torch.equal(keep.cpu(), want), "keep mask differs from the Philox rule at %d of %d" % (
        (keep.cpu() != want).sum().item(), want.numel())
    scale = philox.keep_scale(p)
    assert (vals - scale).abs().max().item() <= 1e-2 * scale          # bf16 rounding of Z / s_k


def test_mask_bitwise_varlen():
    lens_q, lens_k = [50, 1, 0, 77], [128, 64, 10, 100]
    h, d, p = 2, 128, 0.5
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(lens_q, lens_k, h, h, d)
    q.zero_()
    for n in range(len(lens_k)):            # V of sequence n: the identity's first rows
        v[ck[n]:ck[n + 1]] = torch.eye(lens_k[n], d, dtype=BF16, device=DEV)[:, None, :]
    seed, offset = seed_offset()
    o = fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), dropout_p=p)
    for n in range(len(lens_q)):
        sq, sk = lens_q[n], lens_k[n]
        if sq == 0:
            continue
        keep = (o[cq[n]:cq[n + 1]] != 0).cpu()                        # [sq, h, d]
        assert not keep[:, :, sk:].any()
        want = philox.keep_mask(seed, K(offset), [n * h + x for x in range(h)], sq, sk, p)
        assert torch.equal(keep[:, :, :sk], want.transpose(0, 1)), "sequence %d" % n


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_keep_rate_over_seeds(p):
    # 8 seeds x 4 x 8 x 512 x 128 elements: the kept fraction within 4 sigma of
    # 1 - threshold / 256, per call and over all
    b, s_q, h, d = 4, 512, 8, 128
    q = torch.zeros(b, s_q, h, d, dtype=BF16, device=DEV)
    k = rand(b, d, h, d)
    v = torch.eye(d, dtype=BF16, device=DEV)[None, :, None, :].expand(b, d, h, d).contiguous()
    want = 1.0 - philox.threshold(p) / 256.0
    kept = total = 0
    masks = []
    for s in range(8):
        torch.manual_seed(1000 + s)
        o = fmha_tile.attention(q, k, v, dropout_p=p)
        keep = o != 0
        n = keep.numel()
        f = keep.float().mean().item()
        assert abs(f - want) <= 4 * math.sqrt(want * (1 - want) / n), (s, f, want)
        kept += keep.sum().item()
        total += n
        masks.append(keep)
    assert abs(kept / total - want) <= 4 * math.sqrt(want * (1 - want) / total)
    # masks of different seeds agree only as often as independent draws would
    same = (masks[0] == masks[1]).float().mean().item()
    indep = want * want + (1 - want) * (1 - want)
    assert abs(same - indep) <= 4 * math.sqrt(indep * (1 - indep) / masks[0].numel()), same


# ---- reproducibility and the generator ----------------------------------------------------------------
def test_manual_seed_reproduces_and_seeds_differ():
    q, k, v = rand(2, 100, 4, 64), rand(2, 120, 4, 64), rand(2, 120, 4, 64)
    torch.manual_seed(7)
    o1 = fmha_tile.attention(q, k, v, dropout_p=0.2)
    o1b = fmha_tile.attention(q, k, v, dropout_p=0.2)                 # the next offset
    torch.manual_seed(7)
    o2 = fmha_tile.attention(q, k, v, dropout_p=0.2)
    o2b = fmha_tile.attention(q, k, v, dropout_p=0.2)
    assert torch.equal(o1, o2) and torch.equal(o1b, o2b)
    assert not torch.equal(o1, o1b)
    torch.manual_seed(8)
    o3 = fmha_tile.attention(q, k, v, dropout_p=0.2)
    assert not torch.equal(o1, o3)
    # other random ops in between move the offset, and a rerun from the same
    # seed replays them too
    torch.manual_seed(7)
    torch.rand(1000, device=DEV)
    o4 = fmha_tile.attention(q, k, v, dropout_p=0.2)
    assert not torch.equal(o4, o1)
    torch.manual_seed(7)
    torch.rand(1000, device=DEV)
    assert torch.equal(fmha_tile.attention(q, k, v, dropout_p=0.2), o4)


def test_generator_argument():
    q, k, v = rand(1, 64, 2, 64), rand(1, 64, 2, 64), rand(1, 64, 2, 64)
    g = torch.Generator(device=DEV)
    g.manual_seed(123)
    before = seed_offset()
    seed, offset = seed_offset(g)
    o = fmha_tile.attention(q, k, v, dropout_p=0.3, generator=g)
    assert seed_offset() == before                                    # the default one untouched
    assert seed_offset(g) == (123, offset + _dropout.OFFSET_INCREMENT)
    ref_o, _ = reference(q, k, v, batch_z(seed, K(offset), 1, 2, 64, 64, 0.3))
    check_close("O", o, ref_o, TOL[BF16])
    g.manual_seed(123)
    assert torch.equal(fmha_tile.attention(q, k, v, dropout_p=0.3, generator=g), o)
    with pytest.raises(ValueError, match="CUDA generator"):
        fmha_tile.attention(q, k, v, dropout_p=0.3, generator=torch.Generator())


def test_p0_is_no_dropout():
    q, k, v, dout = rand(2, 90, 4, 64), rand(2, 110, 2, 64), rand(2, 110, 2, 64), rand(2, 90, 4, 64)
    before = seed_offset()
    o0, lse0 = fmha_tile.attention(q, k, v, causal=True, return_lse=True)
    o1, lse1 = fmha_tile.attention(q, k, v, causal=True, return_lse=True, dropout_p=0.0)
    assert torch.equal(o0, o1) and torch.equal(lse0, lse1)
    grads = []
    for kw in ({}, {"dropout_p": 0.0}):
        ql, kl, vl = leaf(q, k, v)
        fmha_tile.attention(ql, kl, vl, causal=True, deterministic=True, **kw).backward(dout)
        grads.append((ql.grad, kl.grad, vl.grad))
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    assert seed_offset() == before


def test_lse_is_without_dropout():
    q, k, v = rand(1, 50, 2, 64), rand(1, 80, 2, 64), rand(1, 80, 2, 64)
    _, lse0 = fmha_tile.attention(q, k, v, return_lse=True)
    _, lse1 = fmha_tile.attention(q, k, v, return_lse=True, dropout_p=0.5)
    assert (lse0 - lse1).abs().max().item() <= LSE_TOL


def test_cuda_graph_capture():
    # under capture the {seed, offset} pair is drawn on the device by a torch
    # random op (fmha_fwd_args.dropout_rng): each replay draws a new mask, and
    # torch.manual_seed before a replay reproduces it
    b, s_q, h, d, p = 2, 64, 2, 128, 0.5
    q = torch.zeros(b, s_q, h, d, dtype=BF16, device=DEV)
    k = rand(b, d, h, d)
    v = torch.eye(d, dtype=BF16, device=DEV)[None, :, None, :].expand(b, d, h, d).contiguous()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fmha_tile.attention(q, k, v, dropout_p=p)                      # warm-up
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o = fmha_tile.attention(q, k, v, dropout_p=p)
    torch.manual_seed(3)
    g.replay()
    r1 = o.clone()
    g.replay()
    r2 = o.clone()
    torch.manual_seed(3)
    g.replay()
    r3 = o.clone()
    torch.cuda.synchronize()
    assert torch.equal(r1, r3) and not torch.equal(r1, r2)
    want = 1.0 - philox.threshold(p) / 256.0
    for r in (r1, r2):
        keep, vals = kernel_mask(r, d)
        f = keep.float().mean().item()
        assert abs(f - want) <= 4 * math.sqrt(want * (1 - want) / keep.numel()), f
        assert (vals - philox.keep_scale(p)).abs().max().item() <= 1e-2 * philox.keep_scale(p)


# ---- errors --------------------------------------------------------------------------------------------
def test_errors():
    q, k, v = rand(1, 16, 2, 64), rand(1, 16, 2, 64), rand(1, 16, 2, 64)
    before = seed_offset()
    for bad in (1.0, -0.1, 2.0, float("nan")):
        with pytest.raises(ValueError, match="dropout_p"):
            fmha_tile.attention(q, k, v, dropout_p=bad)
    with pytest.raises(TypeError, match="dropout_p"):
        fmha_tile.attention(q, k, v, dropout_p="0.1")
    assert seed_offset() == before
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is not None:
        with pytest.raises(ValueError, match="fp8"):
            fmha_tile.attention(q.to(fp8), k.to(fp8), v.to(fp8), dropout_p=0.1)
    from fmha_tile import compat
    with pytest.raises(NotImplementedError, match="return_attn_probs"):
        compat.flash_attn_func(q, k, v, dropout_p=0.1, return_attn_probs=True)


def test_hf_attention_forward_training_dropout():
    # the Hugging Face backend serves attention dropout in training (module.training)
    try:
        from fmha_tile import hf
    except ImportError as e:
        pytest.skip("fmha_tile.hf: %s" % e)

    class Mod(torch.nn.Module):
        is_causal = True
        num_key_value_groups = 2

    b, h, hk, s, d, p = 2, 4, 2, 48, 64, 0.1
    q, k, v = rand(b, h, s, d), rand(b, hk, s, d), rand(b, hk, s, d)
    mod = Mod().train()
    seed, offset = seed_offset()
    out, w = hf.attention_forward(mod, q, k, v, None, scaling=d ** -0.5, dropout=p)
    assert w is None and out.shape == (b, s, h, d)
    assert seed_offset() == (seed, offset + _dropout.OFFSET_INCREMENT)
    ref_o, _ = reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                         batch_z(seed, K(offset), b, h, s, s, p), causal=True)
    check_close("O", out, ref_o, TOL[BF16])
    # eval: no dropout, the generator untouched
    before = seed_offset()
    out_eval, _ = hf.attention_forward(mod.eval(), q, k, v, None, scaling=d ** -0.5, dropout=p)
    plain, _ = reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                         torch.ones(1, device=DEV), causal=True)
    check_close("O (eval)", out_eval, plain, TOL[BF16])
    assert seed_offset() == before
