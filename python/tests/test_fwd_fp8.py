"""GPU tests of the fp8 (e4m3) forward through fmha_tile.attention and
attention_varlen, against PyTorch on the dequantised inputs.

Inputs: q, k and v torch.float8_e4m3fn codes with log-uniform magnitudes
2^-3..7.5 and random signs (never zero or NaN), as tests/gpu/test_fwd_fp8.cu;
per-tensor descales 0.5 / 0.37 / 1.9 (1-element float32 tensors, one of them
0-dim), none, or [batch, nhead_k] descales (FlashAttention-3's, as strided
views). The references get stored * descale.

The kernel rounds each key tile's P (relative to the running row maximum, the
tiles from the last visible one down) to e4m3 before P V. Most kernels keep
the exact running maximum and divide O by the unrounded P's sum; the plan's
"p8_qsum" kernels (contiguous, without a soft cap) keep a lazy maximum (it moves
only by more than 2^8) and divide O by the rounded P's sum, the LSE still
taking the unrounded one. reference_p8() does the same arithmetic in float64
with the plan's tile_n and p8_qsum, so O must be within the bf16 tolerance
(rel-L2 1e-2). The
exact softmax (test_attention.reference, float32) is about 3e-2 away from a
correct kernel (P's 3-bit mantissa): held to 6e-2 as a second, independent
check. LSE (the unrounded row sum): within 2e-3 + 2^-11 * max_j scale *
sum_c |q_c k_jc| of the exact one (the fp32 accumulation of the e4m3
products). A row that sees no key: O = 0 exactly, LSE = -inf. The output is
bf16.

On a GPU other than Hopper (sm_90) the fp8 forward has no kernel: that
FmhaError is tested there and the rest skipped. Skips cleanly without torch
(or its float8_e4m3fn), a GPU or the library.
"""
import math

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()
FP8 = getattr(torch, "float8_e4m3fn", None)
if FP8 is None:
    pytest.skip("this PyTorch has no torch.float8_e4m3fn", allow_module_level=True)

import fmha_tile  # noqa: E402
from fmha_tile import _lib  # noqa: E402

from test_attention import visible, reference, rel_l2, alibi_slopes, TOL, BF16  # noqa: E402

DEV = "cuda"
SM90 = torch.cuda.get_device_capability() == (9, 0)
needs_sm90 = pytest.mark.skipif(not SM90, reason="the fp8 forward runs on Hopper (sm_90) only")
EXACT_TOL = 6e-2     # the exact reference: P's e4m3 rounding (about 3e-2) included
LAZY = 8 * math.log(2)   # p8_qsum kernels: the running max moves only by more than this
DESCALES = (0.5, 0.37, 1.9)


def codes(shape, g):
    """-> (fp8 tensor on the GPU, its values as float32 on the GPU)."""
    mag = torch.exp2(torch.rand(shape, generator=g) * 5.9 - 3.0)          # 2^-3 .. 7.46
    sign = torch.randint(0, 2, shape, generator=g).float() * 2 - 1
    c = (mag * sign).to(FP8)
    return c.to(DEV), c.float().to(DEV)


def descale_tensors(on):
    """q, k, v descales: a 1-element, a 0-dim and a 1-element float32 tensor."""
    if not on:
        return {}, (1.0, 1.0, 1.0)
    q, k, v = DESCALES
    return dict(q_descale=torch.tensor([q], device=DEV), k_descale=torch.tensor(k, device=DEV),
                v_descale=torch.tensor([v], device=DEV)), DESCALES


def reference_p8(q, k, v, tile_n, causal=False, window=(-1, -1), softcap=0.0, alibi=None,
                 scale=None, vscale=None, qsum=False):
    """float64, the kernel's P rounding (module docstring). q [b, s_q, h, d], k/v
    [b, s_k, h_k, d] real values -> O [b, s_q, h, d], LSE [b, h, s_q] and the
    LSE tolerance [b, h, s_q]. vscale [b, s_k, h_k] (optional): each key's V
    descale (paged fp8 with per-page descales), which scales P before its
    rounding over the largest |vscale| of the key tile, as the kernel does.
    qsum (the plan's p8_qsum): the lazy running max, O over the rounded P's sum."""
    b, s_q, h, d = q.shape
    s_k, hk = k.shape[1], k.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    qf = q.double().transpose(1, 2)
    kf = k.double().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vf = v.double().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vs = None if vscale is None else vscale.double().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    mask = visible(s_q, s_k, causal, window, q.device)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi is not None:
        slopes = alibi.double().reshape(-1, h)[:, :, None, None]
        i = torch.arange(s_q, device=q.device)[:, None]
        j = torch.arange(s_k, device=q.device)[None, :]
        s = s - slopes * (i + s_k - s_q - j).abs().double()
    s = s.masked_fill(~mask, -math.inf)
    sabs = (torch.matmul(qf.abs(), kf.abs().transpose(-1, -2)) * scale).masked_fill(~mask, 0)
    lse_tol = 2e-3 + (sabs.amax(dim=-1) if s_k > 0 else torch.zeros_like(sabs[..., 0])) * 2.0 ** -11
    m = torch.full((b, h, s_q, 1), -math.inf, dtype=torch.float64, device=q.device)
    l = torch.zeros_like(m)
    lq = torch.zeros_like(m)                                             # the rounded P's sum
    acc = torch.zeros(b, h, s_q, vf.shape[-1], dtype=torch.float64, device=q.device)
    for t in reversed(range((s_k + tile_n - 1) // tile_n)):
        st = s[..., t * tile_n:(t + 1) * tile_n]
        mt = torch.maximum(m, st.amax(dim=-1, keepdim=True))
        if qsum:                                                         # the max stays unless it grows by > 2^8
            mt = torch.where(torch.isfinite(m) & (mt - m <= LAZY), m, mt)
        base = torch.where(torch.isinf(mt), torch.zeros_like(mt), mt)   # no key yet: P = 0
        alpha = torch.exp(m - base)
        p = torch.exp(st - base)
        if vs is None:
            pq = p.float().to(FP8).double()                              # nearest even, as cvt.rn
        else:                                                            # P * vs / vref, rounded
            vt = vs[..., t * tile_n:(t + 1) * tile_n][:, :, None, :]
            vref = vt.abs().amax(dim=-1, keepdim=True)
            vref = torch.where(vref > 0, vref, torch.ones_like(vref))
            pq = (p * (vt / vref)).float().to(FP8).double() * vref / torch.where(vt != 0, vt, torch.ones_like(vt))
        acc = acc * alpha + torch.matmul(pq, vf[..., t * tile_n:(t + 1) * tile_n, :])
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        lq = lq * alpha + pq.sum(dim=-1, keepdim=True)
        m = mt
    seen = l > 0
    lo = lq if qsum else l
    o = torch.where(seen, acc / torch.where(seen, lo, torch.ones_like(lo)), torch.zeros_like(acc))
    lse = torch.where(seen, m + torch.log(torch.where(seen, l, torch.ones_like(l))),
                      torch.full_like(m, -math.inf))[..., 0]
    return o.transpose(1, 2).float(), lse.float(), lse_tol.float()


def check_fp8(o, lse, q, k, v, plan, **kw):
    """o, lse of the kernel against reference_p8 (the plan's tile_n) and the
    exact reference, on the real values q, k, v."""
    assert o.dtype == BF16 and torch.isfinite(o).all(), "non-finite or not bf16 output"
    ref_o, ref_lse, lse_tol = reference_p8(q, k, v, plan["tile"][1], qsum=plan["p8_qsum"], **kw)
    err = rel_l2(o, ref_o)
    assert err <= TOL[BF16], "rel-L2 %.3e against the P-rounding reference (tol %.0e)" % (err, TOL[BF16])
    exact_o, _ = reference(q, k, v, kw.get("causal", False), kw.get("window", (-1, -1)),
                           kw.get("softcap", 0.0), kw.get("alibi"), kw.get("scale"))
    err_exact = rel_l2(o, exact_o)
    assert err_exact <= EXACT_TOL, "rel-L2 %.3e against the exact reference" % err_exact
    zero_ref = ref_o.abs().amax(dim=-1) == 0
    if zero_ref.any():
        assert (o.float().abs().amax(dim=-1)[zero_ref] == 0).all(), "masked-out rows not zero"
    if lse is not None:
        fin = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(lse), fin), "LSE -inf pattern differs"
        assert (lse[~fin] == -math.inf).all()
        if fin.any():
            bad = (lse[fin] - ref_lse[fin]).abs() > lse_tol[fin]
            assert not bad.any(), "LSE error %.3e" % (lse[fin] - ref_lse[fin]).abs().max().item()


def check_plan(plan, d):
    assert "_fp8_" in plan["kernel"] and plan["pipeline"] == "wgmma", plan
    assert plan["why"].startswith("fast pipeline"), plan
    assert plan["hdim"] == (128 if d <= 128 else 256), plan
    assert plan["kernel"] in [x["name"] for x in fmha_tile.kernels()["kernels"]]


def batch_case(b, s_q, s_k, h, hk, d, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return [codes(shape, g) for shape in ((b, s_q, h, d), (b, s_k, hk, d), (b, s_k, hk, d))]


# (b, s_q, s_k, h, hk, d, causal, window, softcap, alibi, descales, default scale)
CASES = [
    (2, 300, 517, 4, 2, 128, False, (-1, -1), 0.0, None, True, False),
    (1, 1024, 1024, 2, 2, 128, True, (-1, -1), 0.0, None, True, False),
    (2, 257, 700, 4, 4, 256, True, (-1, -1), 0.0, None, True, False),
    (1, 200, 333, 4, 1, 256, False, (-1, -1), 0.0, None, False, False),
    (2, 190, 260, 2, 2, 64, False, (-1, -1), 0.0, None, True, False),      # the 128 kernel, padded
    (1, 129, 129, 2, 1, 80, True, (-1, -1), 0.0, None, True, False),
    (1, 100, 300, 2, 2, 192, False, (40, 10), 0.0, None, True, False),     # the 256 kernel, padded
    (1, 500, 100, 2, 2, 128, False, (10, 0), 0.0, None, True, False),      # rows that see no key
    (2, 333, 2100, 2, 2, 128, False, (-1, -1), 30.0, None, True, False),
    (1, 256, 640, 4, 2, 128, True, (-1, -1), 0.0, "alibi", True, False),
    (2, 160, 400, 2, 2, 256, True, (-1, -1), 20.0, None, False, False),
    (1, 1, 1, 2, 2, 128, False, (-1, -1), 0.0, None, True, True),
    (2, 700, 1500, 8, 2, 128, False, (-1, -1), 0.0, None, False, True),
]


@needs_sm90
@pytest.mark.parametrize("case", CASES, ids=lambda c: "b%d-q%d-k%d-h%d_%d-d%d%s%s%s%s%s" % (
    c[:6] + ("-causal" if c[6] else "", "-win" if c[7] != (-1, -1) else "", "-cap" if c[8] else "",
             "-alibi" if c[9] else "", "-descale" if c[10] else "")))
def test_fp8_batch(case):
    b, s_q, s_k, h, hk, d, causal, window, softcap, alibi, on, default_scale = case
    (q8, qv), (k8, kv), (v8, vv) = batch_case(b, s_q, s_k, h, hk, d)
    kw, ds = descale_tensors(on)
    scale = None if default_scale else 0.25 / math.sqrt(d)     # scores of order 1-10
    slopes = alibi_slopes(h) if alibi else None
    opts = dict(causal=causal, window=window, softcap=softcap, alibi_slopes=slopes, scale=scale)
    plan = fmha_tile.attention_plan(q8, k8, v8, **opts, **kw)
    check_plan(plan, d)
    o, lse = fmha_tile.attention(q8, k8, v8, return_lse=True, **opts, **kw)
    assert o.shape == (b, s_q, h, d) and lse.shape == (b, h, s_q)
    check_fp8(o, lse, qv * ds[0], kv * ds[1], vv * ds[2], plan, causal=causal, window=window,
              softcap=softcap, alibi=slopes, scale=scale)


@needs_sm90
def test_fp8_views_and_out():
    """[b, s, h, d] views of [b, h, s, d] tensors (row stride d: 128 bytes), a
    caller-owned bf16 out, no LSE."""
    g = torch.Generator(device="cpu").manual_seed(3)
    (q8, qv), (k8, kv), (v8, vv) = (codes(s, g) for s in ((2, 4, 200, 128), (2, 2, 300, 128),
                                                          (2, 2, 300, 128)))
    q8, k8, v8, qv, kv, vv = (t.transpose(1, 2) for t in (q8, k8, v8, qv, kv, vv))
    out = torch.empty(2, 4, 200, 128, dtype=BF16, device=DEV).transpose(1, 2)
    kw, ds = descale_tensors(True)
    scale = 0.25 / math.sqrt(128)
    plan = fmha_tile.attention_plan(q8, k8, v8, causal=True, scale=scale, **kw)
    o = fmha_tile.attention(q8, k8, v8, causal=True, scale=scale, out=out, **kw)
    assert o is out
    check_fp8(o, None, qv * ds[0], kv * ds[1], vv * ds[2], plan, causal=True, scale=scale)


def v_kmajor_reference(v8):
    """fp8_v_kmajor's layout built with torch: [b, s_k, h_k, d] -> [b, h_k, d,
    keys], position i of each group of 16 keys holding key 2 (i // 4) + (i & 1)
    + 8 ((i >> 1) & 1) of the group, the padding keys zero."""
    b, s_k, hk, d = v8.shape
    keys = (s_k + 15) // 16 * 16
    rows = torch.zeros(b, keys, hk, d, dtype=torch.uint8, device=v8.device)
    rows[:, :s_k] = v8.view(torch.uint8)
    i = torch.arange(keys, device=v8.device)
    src = i // 16 * 16 + 2 * (i % 16 // 4) + (i & 1) + 8 * ((i >> 1) & 1)
    return rows[:, src].permute(0, 2, 3, 1).contiguous()


@needs_sm90
@pytest.mark.parametrize("case", [(2, 256, 700, 4, 2, 256, False), (1, 300, 517, 4, 2, 256, True),
                                  (2, 130, 292, 4, 2, 128, False), (1, 1152, 1152, 4, 2, 128, True)],
                         ids=lambda c: "b%d-q%d-k%d-h%d_%d-d%d%s" % (c[:6] + ("-causal" if c[6] else "",)))
def test_fp8_v_kmajor(case):
    """V given K-major: fp8_v_kmajor() writes the documented layout (against a
    torch gather), and attention(..., v_kmajor=True) over it gives bitwise the
    output and LSE of V rows (the same products in the same order), also over
    a V^T with padded key rows; the plan names the same kernel."""
    b, s_q, s_k, h, hk, d, causal = case
    (q8, qv), (k8, kv), (v8, vv) = batch_case(b, s_q, s_k, h, hk, d, seed=11)
    kw, ds = descale_tensors(True)
    scale = 0.25 / math.sqrt(d)
    vt = fmha_tile.fp8_v_kmajor(v8)
    keys = (s_k + 15) // 16 * 16
    assert vt.dtype == FP8 and vt.shape == (b, hk, d, keys) and vt.is_contiguous()
    assert torch.equal(vt.view(torch.uint8), v_kmajor_reference(v8))
    plan = fmha_tile.attention_plan(q8, k8, vt, causal=causal, scale=scale, v_kmajor=True, **kw)
    assert plan["kernel"] == fmha_tile.attention_plan(q8, k8, v8, causal=causal, scale=scale, **kw)["kernel"]
    o_rows, lse_rows = fmha_tile.attention(q8, k8, v8, causal=causal, scale=scale, return_lse=True, **kw)
    o, lse = fmha_tile.attention(q8, k8, vt, causal=causal, scale=scale, return_lse=True, v_kmajor=True, **kw)
    check_fp8(o, lse, qv * ds[0], kv * ds[1], vv * ds[2], plan, causal=causal, scale=scale)
    assert torch.equal(o, o_rows) and torch.equal(lse, lse_rows)
    # a caller-owned V^T (out=), and V^T rows padded by 48 keys of NaN codes (never read)
    buf = torch.full_like(vt.view(torch.uint8), 0x7f).view(FP8)
    assert fmha_tile.fp8_v_kmajor(v8, out=buf) is buf and torch.equal(buf.view(torch.uint8), vt.view(torch.uint8))
    wide = torch.full((b, hk, d, keys + 48), 0x7f, dtype=torch.uint8, device=DEV)
    wide[..., :keys] = vt.view(torch.uint8)
    o2 = fmha_tile.attention(q8, k8, wide.view(FP8), causal=causal, scale=scale, v_kmajor=True, **kw)
    assert torch.equal(o2, o_rows)


@needs_sm90
def test_fp8_v_kmajor_refusals():
    """What v_kmajor refuses: 16-bit inputs, too few keys (Python), and a head
    dim its rows lack (hdim 64 runs the 128 rows padded: FmhaError)."""
    (q8, _), (k8, _), (v8, _) = batch_case(1, 64, 100, 2, 2, 64)
    vt = fmha_tile.fp8_v_kmajor(v8)
    with pytest.raises(fmha_tile.FmhaError, match="v_kmajor"):
        fmha_tile.attention(q8, k8, vt, v_kmajor=True)
    with pytest.raises(ValueError, match="keys >= 112"):
        fmha_tile.attention(q8, k8, vt[..., :100], v_kmajor=True)
    with pytest.raises(ValueError, match="needs fp8"):
        fmha_tile.attention(q8.to(BF16), k8.to(BF16), vt.to(BF16), v_kmajor=True)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        fmha_tile.fp8_v_kmajor(v8.to(BF16))
    with pytest.raises(ValueError, match="contiguous"):
        fmha_tile.fp8_v_kmajor(v8, out=torch.empty(1, 2, 64, 96, dtype=FP8, device=DEV))
    # no keys: an empty V^T, and the output of a row that sees nothing (0, LSE -inf)
    (q8, _), (k8, _), (v8, _) = batch_case(1, 64, 0, 2, 2, 256)
    vt = fmha_tile.fp8_v_kmajor(v8)
    assert vt.shape == (1, 2, 256, 0)
    o, lse = fmha_tile.attention(q8, k8, vt, v_kmajor=True, return_lse=True)
    assert (o == 0).all() and (lse == -math.inf).all()


@needs_sm90
@pytest.mark.parametrize("d", [128, 256])
def test_fp8_varlen(d):
    lens_q = [0, 1, 130, 257]
    lens_k = [5, 1, 600, 257]                      # a sequence without queries, one longer prefix
    cq, ck = [0], [0]
    for a, c in zip(lens_q, lens_k):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + c)
    g = torch.Generator(device="cpu").manual_seed(5)
    (q8, qv), (k8, kv), (v8, vv) = (codes(s, g) for s in ((cq[-1], 4, d), (ck[-1], 2, d), (ck[-1], 2, d)))
    cu_q = torch.tensor(cq, dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(ck, dtype=torch.int32, device=DEV)
    kw, ds = descale_tensors(True)
    scale = 0.25 / math.sqrt(d)
    plan = fmha_tile.attention_varlen_plan(q8, k8, v8, cu_q, cu_k, max(lens_q), max(lens_k),
                                           causal=True, scale=scale, **kw)
    check_plan(plan, d)
    o, lse = fmha_tile.attention_varlen(q8, k8, v8, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                        scale=scale, return_lse=True, **kw)
    assert o.dtype == BF16 and o.shape == (cq[-1], 4, d) and lse.shape == (4, cq[-1])
    for i in range(len(lens_q)):
        if lens_q[i] == 0:
            continue
        qs, ks = slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])
        check_fp8(o[qs][None], lse[:, qs][None], qv[qs][None] * ds[0], kv[ks][None] * ds[1],
                  vv[ks][None] * ds[2], plan, causal=True, scale=scale)


def head_descales(b, hk, g):
    """q, k, v descales per (batch entry, KV head): [b, hk] float32 in [0.3, 2),
    as views of one [3, hk, b] tensor (batch stride 1, head stride b)."""
    t = (torch.rand(3, hk, b, generator=g) * 1.7 + 0.3).to(DEV)
    ds = [t[i].t() for i in range(3)]
    return dict(q_descale=ds[0], k_descale=ds[1], v_descale=ds[2]), ds


@needs_sm90
@pytest.mark.parametrize("d", [128, 256])
def test_fp8_head_descales(d):
    """FlashAttention-3's [batch, nhead_k] descales; the query heads of a KV
    head share its q descale."""
    b, s_q, s_k, h, hk = 3, 260, 700, 8, 2
    g = torch.Generator(device="cpu").manual_seed(11)
    (q8, qv), (k8, kv), (v8, vv) = batch_case(b, s_q, s_k, h, hk, d, seed=7)
    kw, ds = head_descales(b, hk, g)
    scale = 0.25 / math.sqrt(d)
    plan = fmha_tile.attention_plan(q8, k8, v8, causal=d == 256, scale=scale, **kw)
    check_plan(plan, d)
    o, lse = fmha_tile.attention(q8, k8, v8, causal=d == 256, scale=scale, return_lse=True, **kw)
    qs = ds[0].repeat_interleave(h // hk, dim=1)[:, None, :, None]
    check_fp8(o, lse, qv * qs, kv * ds[1][:, None, :, None], vv * ds[2][:, None, :, None], plan,
              causal=d == 256, scale=scale)


@needs_sm90
def test_fp8_head_descales_varlen():
    """Varlen: one descale per (sequence, KV head)."""
    lens_q, lens_k = [3, 130, 257], [300, 130, 600]
    cq, ck = [0], [0]
    for a, c in zip(lens_q, lens_k):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + c)
    g = torch.Generator(device="cpu").manual_seed(13)
    (q8, qv), (k8, kv), (v8, vv) = (codes(s, g) for s in ((cq[-1], 4, 128), (ck[-1], 2, 128), (ck[-1], 2, 128)))
    cu_q = torch.tensor(cq, dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(ck, dtype=torch.int32, device=DEV)
    kw, ds = head_descales(3, 2, g)
    scale = 0.25 / math.sqrt(128)
    plan = fmha_tile.attention_varlen_plan(q8, k8, v8, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                           scale=scale, **kw)
    o, lse = fmha_tile.attention_varlen(q8, k8, v8, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                        scale=scale, return_lse=True, **kw)
    for i in range(3):
        qsl, ksl = slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])
        qs = ds[0][i].repeat_interleave(2)[None, :, None]
        check_fp8(o[qsl][None], lse[:, qsl][None], (qv[qsl] * qs)[None], (kv[ksl] * ds[1][i][None, :, None])[None],
                  (vv[ksl] * ds[2][i][None, :, None])[None], plan, causal=True, scale=scale)


@needs_sm90
def test_fp8_no_keys():
    (q8, _), (k8, _), (v8, _) = batch_case(2, 10, 0, 4, 4, 128)
    o, lse = fmha_tile.attention(q8, k8, v8, return_lse=True)
    assert o.dtype == BF16 and (o == 0).all() and (lse == -math.inf).all()


def test_fp8_bad_inputs():
    (q8, _), (k8, _), (v8, _) = batch_case(1, 64, 64, 4, 2, 128)
    ok = torch.tensor([0.5], device=DEV)
    with pytest.raises(TypeError, match="one dtype"):
        fmha_tile.attention(q8, k8.float().to(BF16), v8)
    with pytest.raises(ValueError, match="needs fp8"):
        x = torch.randn(1, 64, 4, 128, dtype=BF16, device=DEV)
        fmha_tile.attention(x, x, x, q_descale=ok)
    with pytest.raises(TypeError, match="float32"):
        fmha_tile.attention(q8, k8, v8, k_descale=ok.half())
    with pytest.raises(ValueError, match="one element"):
        fmha_tile.attention(q8, k8, v8, v_descale=torch.ones(2, device=DEV))
    with pytest.raises(ValueError, match=r"\[batch, nhead_k\]"):          # [b, h_q], not [b, h_k]
        fmha_tile.attention(q8, k8, v8, v_descale=torch.ones(1, 4, device=DEV))
    with pytest.raises(ValueError, match="all per tensor or all"):         # one kind for all three
        fmha_tile.attention(q8, k8, v8, q_descale=ok, k_descale=torch.ones(1, 2, device=DEV))
    with pytest.raises(ValueError, match="same strides"):
        fmha_tile.attention(q8, k8, v8, q_descale=torch.ones(1, 2, device=DEV),
                            k_descale=torch.ones(1, 4, device=DEV)[:, ::2])
    with pytest.raises(ValueError, match="CUDA"):
        fmha_tile.attention(q8, k8, v8, q_descale=ok.cpu())
    with pytest.raises(TypeError, match="tensor"):
        fmha_tile.attention(q8, k8, v8, q_descale=0.5)
    with pytest.raises(TypeError, match="torch.bfloat16"):
        fmha_tile.attention(q8, k8, v8, out=torch.empty(1, 64, 4, 128, dtype=torch.float16, device=DEV))
    with pytest.raises(fmha_tile.FmhaError) as ei:          # head dim not a multiple of 16
        x = batch_case(1, 16, 16, 2, 2, 72)[0][0]
        fmha_tile.attention(x, x, x)
    assert ei.value.status == _lib.FMHA_ERR_UNSUPPORTED
    with pytest.raises(fmha_tile.FmhaError) as ei:          # a row stride of 136 elements
        x = torch.zeros(1, 16, 2, 136, dtype=BF16, device=DEV).to(FP8)[..., :128]
        fmha_tile.attention(x, x, x)
    assert ei.value.status == _lib.FMHA_ERR_UNSUPPORTED and "stride" in ei.value.message


@pytest.mark.skipif(SM90, reason="tests the refusal on GPUs other than sm_90")
def test_fp8_no_kernel_off_hopper():
    (q8, _), (k8, _), (v8, _) = batch_case(1, 64, 64, 4, 2, 128)
    with pytest.raises(fmha_tile.FmhaError) as ei:
        fmha_tile.attention(q8, k8, v8)
    assert ei.value.status == _lib.FMHA_ERR_NO_KERNEL
