"""GPU tests of fmha_tile.attention / attention_varlen against PyTorch.

The reference is torch.nn.functional.scaled_dot_product_attention with the
float32 math backend on upcast inputs and an explicit boolean attn_mask built
with FlashAttention's bottom-right alignment; soft cap and ALiBi references
are computed by hand in fp32 (scores, cap, bias, mask, softmax). A query row
that sees no key must give O = 0 exactly and LSE = -inf. Tolerances (rel-L2
of O): bf16 1e-2, fp16 2e-3; LSE absolute 2e-3.

Gradients (the autograd.Function over fmha_bwd) are compared with PyTorch's
autograd through the same fp32 references (SDPA's math backend where no row
is fully masked, the hand-written one for soft cap, windows and varlen), with
rel-L2 per gradient within fp16 5e-3 / bf16 2e-2; deterministic mode must
give bitwise-identical dq, dk, dv over two runs.

Skips cleanly (module level) without torch, without a CUDA GPU, or without
the library (make lib, or FMHA_TILE_LIB).
"""
import math
import random

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import torch.nn.functional as F  # noqa: E402

import fmha_tile  # noqa: E402
from fmha_tile import _lib  # noqa: E402

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def math_backend():
        return sdpa_kernel([SDPBackend.MATH])
except ImportError:  # torch < 2.3
    def math_backend():
        return torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True,
                                              enable_mem_efficient=False)

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

DEV = "cuda"
BF16, FP16 = torch.bfloat16, torch.float16
TOL = {BF16: 1e-2, FP16: 2e-3}
LSE_TOL = 2e-3


# ---- reference ---------------------------------------------------------------------------------
def visible(s_q, s_k, causal, window, device=DEV):
    """[s_q, s_k] bool: query i sees key j (FlashAttention, bottom-right aligned)."""
    left, right = (-1, -1) if window is None else window
    if causal:
        right = 0
    i = torch.arange(s_q, device=device)[:, None]
    j = torch.arange(s_k, device=device)[None, :]
    off = s_k - s_q
    m = torch.ones(s_q, s_k, dtype=torch.bool, device=device)
    if left >= 0:
        m &= j >= i + off - left
    if right >= 0:
        m &= j <= i + off + right
    return m


def reference(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi=None, scale=None):
    """q [b, s_q, h, d], k/v [b, s_k, h_k, d] -> O fp32 [b, s_q, h, d], LSE fp32 [b, h, s_q]."""
    b, s_q, h, d = q.shape
    s_k, hk = k.shape[1], k.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    mask = visible(s_q, s_k, causal, window, q.device)
    empty = ~mask.any(dim=-1)                       # [s_q]: rows that see no key
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi is not None:
        slopes = alibi.float().reshape(-1, h)[:, :, None, None]     # [1 or b, h, 1, 1]
        i = torch.arange(s_q, device=q.device)[:, None]
        j = torch.arange(s_k, device=q.device)[None, :]
        s = s - slopes * (i + s_k - s_q - j).abs().float()
    s = s.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(s, dim=-1) if s_k > 0 else \
        torch.full((b, h, s_q), -math.inf, device=q.device)
    if s_k == 0:
        o = torch.zeros(b, h, s_q, vf.shape[-1], device=q.device)
    elif softcap == 0 and alibi is None:
        with math_backend():
            o = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, scale=scale)
    else:
        o = torch.matmul(torch.softmax(s, dim=-1), vf)
    o = o.masked_fill(empty[None, None, :, None], 0.0)
    return o.transpose(1, 2), lse


def rel_l2(got, ref):
    num = (got.float() - ref).norm().item()
    den = ref.norm().item()
    return num / den if den > 0 else num


def check(o, lse, ref_o, ref_lse, dtype, empty_rows=None):
    """O: finite, rel-L2 within the dtype's tolerance, exactly 0 where no key
    is visible. LSE: -inf exactly where the reference is, else within LSE_TOL."""
    assert o.dtype == dtype and o.shape == ref_o.shape
    assert torch.isfinite(o).all(), "non-finite output"
    err = rel_l2(o, ref_o)
    assert err <= TOL[dtype], "rel-L2 %.3e > %.0e" % (err, TOL[dtype])
    zero_ref = ref_o.abs().amax(dim=-1) == 0        # rows the reference sets to 0
    if zero_ref.any():
        assert (o.float().abs().amax(dim=-1)[zero_ref] == 0).all(), "masked-out rows not zero"
    if lse is not None:
        assert lse.dtype == torch.float32 and lse.shape == ref_lse.shape
        fin = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(lse), fin), "LSE -inf pattern differs"
        assert (lse[~fin] == -math.inf).all()
        if fin.any():
            dl = (lse[fin] - ref_lse[fin]).abs().max().item()
            assert dl <= LSE_TOL, "LSE error %.3e" % dl


def rand(*shape, dtype=BF16, device=DEV):
    return torch.randn(*shape, dtype=dtype, device=device)


def run_and_check(b, s_q, s_k, h, hk, d, dtype, causal=False, window=(-1, -1), softcap=0.0,
                  alibi=None, scale=None):
    q, k, v = rand(b, s_q, h, d, dtype=dtype), rand(b, s_k, hk, d, dtype=dtype), \
        rand(b, s_k, hk, d, dtype=dtype)
    o, lse = fmha_tile.attention(q, k, v, causal=causal, window=window, softcap=softcap,
                                 alibi_slopes=alibi, scale=scale, return_lse=True)
    ref_o, ref_lse = reference(q, k, v, causal, window, softcap, alibi, scale)
    check(o, lse, ref_o, ref_lse, dtype)


def alibi_slopes(h, b=None):
    s = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], device=DEV)
    return s if b is None else (s[None, :] * torch.linspace(0.5, 1.5, b, device=DEV)[:, None]).contiguous()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


# ---- batch mode ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("seed", range(10))
def test_random_shapes(seed, dtype):
    r = random.Random(seed)
    h = r.choice([2, 4, 6, 8, 16])
    hk = r.choice([x for x in (1, 2, 3, 4, 8, 16) if h % x == 0])
    d = r.choice([64, 128, 256, 32, 72, 96, 200])
    b = r.randint(1, 3)
    s_q = r.choice([1, 7, 63, 64, 65, 127, 255, 333])
    s_k = r.choice([s_q, 1, 17, 128, 129, 301, 513])
    causal = r.random() < 0.5
    torch.manual_seed(seed)
    run_and_check(b, s_q, s_k, h, hk, d, dtype, causal=causal)


@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("d", [8, 40, 64, 72, 96, 128, 200, 256])
def test_head_dims(d, dtype):
    run_and_check(2, 129, 257, 4, 2, d, dtype, causal=d % 16 == 0)


@pytest.mark.parametrize("ratio", [1, 2, 4, 8, 16])
def test_gqa(ratio):
    run_and_check(2, 100, 150, 16, 16 // ratio, 128, BF16, causal=True)


@pytest.mark.parametrize("s_q,s_k", [(1, 1), (1, 300), (300, 1), (257, 100), (100, 257),
                                     (513, 513), (64, 1000)])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_causal_bottom_right(s_q, s_k, dtype):
    # s_q > s_k: the first s_q - s_k rows see no key (O = 0, LSE = -inf)
    run_and_check(2, s_q, s_k, 4, 1, 64, dtype, causal=True)


@pytest.mark.parametrize("window,causal", [((0, 0), False), ((16, 0), False), ((32, 32), False),
                                           ((-1, 8), False), ((8, -1), False), ((100, 3), False),
                                           ((64, 5), True), ((0, -1), True)])
def test_windows(window, causal):
    run_and_check(2, 200, 333, 8, 2, 128, BF16, causal=causal, window=window)
    run_and_check(1, 333, 200, 4, 4, 64, FP16, causal=causal, window=window)


@pytest.mark.parametrize("softcap", [5.0, 30.0])
@pytest.mark.parametrize("causal", [False, True])
def test_softcap(softcap, causal):
    run_and_check(2, 150, 190, 8, 2, 128, BF16, causal=causal, softcap=softcap)
    run_and_check(1, 77, 77, 4, 1, 256, FP16, causal=causal, softcap=softcap)


@pytest.mark.parametrize("per_batch", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_alibi(per_batch, causal):
    b, h = 2, 8
    slopes = alibi_slopes(h, b if per_batch else None)
    run_and_check(b, 120, 250, h, 2, 128, BF16, causal=causal, alibi=slopes)
    run_and_check(b, 250, 120, h, 4, 64, FP16, causal=causal, alibi=slopes)


def test_everything_at_once():
    slopes = alibi_slopes(8, 3)
    run_and_check(3, 211, 307, 8, 2, 96, BF16, causal=True, window=(50, 7), softcap=20.0,
                  alibi=slopes, scale=0.07)


def test_scale_and_no_lse():
    q, k, v = rand(2, 50, 4, 64), rand(2, 60, 4, 64), rand(2, 60, 4, 64)
    o = fmha_tile.attention(q, k, v, scale=0.3)
    assert isinstance(o, torch.Tensor)
    check(o, None, reference(q, k, v, scale=0.3)[0], None, BF16)


def test_decode_shape():
    # one query per sequence against a long cache, GQA 8:1
    run_and_check(4, 1, 4097, 32, 4, 128, BF16, causal=True)


def test_long_sequence():
    run_and_check(1, 2048, 2048, 8, 8, 128, BF16, causal=True)


# ---- layouts and strides --------------------------------------------------------------------------
def test_bshd_views_of_bhsd():
    b, h, hk, s_q, s_k, d = 2, 8, 2, 130, 170, 64
    q = rand(b, h, s_q, d).transpose(1, 2)         # [b, s, h, d] views, not contiguous
    k = rand(b, hk, s_k, d).transpose(1, 2)
    v = rand(b, hk, s_k, d).transpose(1, 2)
    assert not q.is_contiguous()
    out = torch.empty(b, h, s_q, d, dtype=BF16, device=DEV).transpose(1, 2)
    lse = torch.empty(b, h, s_q + 5, dtype=torch.float32, device=DEV)[:, :, :s_q]
    o, l2 = fmha_tile.attention(q, k, v, causal=True, return_lse=True, out=out, out_lse=lse)
    assert o is out and l2 is lse
    ref_o, ref_lse = reference(q, k, v, causal=True)
    check(o, l2, ref_o, ref_lse, BF16)


def test_packed_qkv_and_padded_heads():
    b, s, h, d = 2, 99, 4, 64
    qkv = rand(b, s, 3, h, d)
    q, k, v = qkv.unbind(2)                        # row stride 3*h*d
    o = fmha_tile.attention(q, k, v, causal=True)
    check(o, None, reference(q, k, v, causal=True)[0], None, BF16)
    # K/V heads as an expanded view (head stride 0): every query head reads one KV head
    k1, v1 = rand(b, s, 1, d).expand(b, s, h, d), rand(b, s, 1, d).expand(b, s, h, d)
    o = fmha_tile.attention(q, k1, v1, causal=True)
    check(o, None, reference(q, k1, v1, causal=True)[0], None, BF16)
    with pytest.raises(ValueError, match="overlap"):
        fmha_tile.attention(q, k, v, out=torch.empty(b, s, 1, d, dtype=BF16, device=DEV).expand(b, s, h, d))
    # head dim 64 stored with a padded head stride of 72 (a multiple of 8: accepted)
    x = rand(b, s, h, 72)[..., :d]
    o = fmha_tile.attention(x, x, x)
    check(o, None, reference(x, x, x)[0], None, BF16)


def test_strides_the_library_refuses():
    b, s, h, d = 1, 64, 2, 64
    x = rand(b, s, h, d + 4)[..., :d]              # head stride 68: not a multiple of 8
    with pytest.raises(fmha_tile.FmhaError, match="stride") as ei:
        fmha_tile.attention(x, x, x)
    assert ei.value.status == _lib.FMHA_ERR_UNSUPPORTED
    flat = rand(b * s * h * d + 1)
    y = flat[1:].view(b, s, h, d)                  # 2-byte offset: not 16-byte aligned
    with pytest.raises(fmha_tile.FmhaError, match="aligned"):
        fmha_tile.attention(y, y, y)


# ---- group (varlen) mode ----------------------------------------------------------------------------
def varlen_case(lens_q, lens_k, h, hk, d, dtype):
    cq = [0]
    ck = [0]
    for a, b in zip(lens_q, lens_k):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + b)
    q = rand(cq[-1], h, d, dtype=dtype)
    k = rand(ck[-1], hk, d, dtype=dtype)
    v = rand(ck[-1], hk, d, dtype=dtype)
    cu_q = torch.tensor(cq, dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(ck, dtype=torch.int32, device=DEV)
    return q, k, v, cu_q, cu_k, cq, ck


def varlen_reference(q, k, v, cq, ck, **kw):
    alibi = kw.pop("alibi", None)
    h = q.shape[1]
    outs, lses = [], []
    for i in range(len(cq) - 1):
        if cq[i + 1] == cq[i]:
            continue                                # no query rows: nothing to compare
        qi = q[cq[i]:cq[i + 1]][None]
        ki, vi = k[ck[i]:ck[i + 1]][None], v[ck[i]:ck[i + 1]][None]
        ai = alibi if alibi is None or alibi.dim() == 1 else alibi[i]
        o, l = reference(qi, ki, vi, alibi=ai, **kw)
        outs.append(o[0])
        lses.append(l[0])
    o = torch.cat(outs, 0) if outs else torch.zeros(0, h, v.shape[-1], device=DEV)
    lse = torch.cat(lses, 1) if lses else torch.zeros(h, 0, device=DEV)
    return o, lse


@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen(causal, dtype):
    lens_q = [17, 0, 300, 1, 128, 65]
    lens_k = [40, 9, 257, 0, 128, 30]               # a zero-length query and a zero-length key sequence
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(lens_q, lens_k, 8, 2, 128, dtype)
    o, lse = fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                        causal=causal, return_lse=True)
    assert o.shape == q.shape and lse.shape == (8, q.shape[0])
    ref_o, ref_lse = varlen_reference(q, k, v, cq, ck, causal=causal)
    check(o, lse, ref_o, ref_lse, dtype)


def test_varlen_window_softcap_alibi():
    lens_q = [100, 33, 0, 250]
    lens_k = [120, 33, 5, 200]
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(lens_q, lens_k, 4, 4, 64, BF16)
    slopes = alibi_slopes(4, len(lens_q))
    o, lse = fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, 256, 256, window=(40, 10),
                                        softcap=15.0, alibi_slopes=slopes, return_lse=True)
    ref_o, ref_lse = varlen_reference(q, k, v, cq, ck, window=(40, 10), softcap=15.0, alibi=slopes)
    check(o, lse, ref_o, ref_lse, BF16)


def test_varlen_no_keys_at_all():
    q, k, v, cu_q, cu_k, cq, ck = varlen_case([5, 7], [0, 0], 2, 2, 64, BF16)
    o, lse = fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, 7, 0, return_lse=True)
    assert (o == 0).all() and (lse == -math.inf).all()


def test_varlen_packed_views():
    # q, k, v as slices of one packed [total, 3, h, d] tensor
    lens = [31, 64, 5]
    total = sum(lens)
    qkv = rand(total, 3, 4, 128)
    q, k, v = qkv.unbind(1)
    cu = torch.tensor([0, 31, 95, 100], dtype=torch.int32, device=DEV)
    o = fmha_tile.attention_varlen(q, k, v, cu, cu, 64, 64, causal=True)
    ref_o, _ = varlen_reference(q, k, v, [0, 31, 95, 100], [0, 31, 95, 100], causal=True)
    check(o, None, ref_o, None, BF16)


# ---- empty problems ------------------------------------------------------------------------------
def test_empty_batch_and_queries():
    for b, s_q in ((0, 10), (2, 0)):
        q, k, v = rand(b, s_q, 4, 64), rand(b, 10, 4, 64), rand(b, 10, 4, 64)
        o, lse = fmha_tile.attention(q, k, v, return_lse=True)
        assert o.shape == (b, s_q, 4, 64) and lse.shape == (b, 4, s_q)


def test_no_keys():
    q, k, v = rand(2, 10, 4, 64), rand(2, 0, 4, 64), rand(2, 0, 4, 64)
    o, lse = fmha_tile.attention(q, k, v, return_lse=True)
    assert (o == 0).all() and (lse == -math.inf).all()


def test_empty_still_validated():
    q, k, v = rand(2, 0, 4, 100), rand(2, 10, 4, 100), rand(2, 10, 4, 100)
    with pytest.raises(fmha_tile.FmhaError, match="head dim"):
        fmha_tile.attention(q, k, v)


# ---- bad inputs ------------------------------------------------------------------------------------
def test_bad_inputs():
    q, k, v = rand(2, 64, 4, 64), rand(2, 64, 2, 64), rand(2, 64, 2, 64)
    with pytest.raises(ValueError, match="CUDA"):
        fmha_tile.attention(q.cpu(), k, v)
    with pytest.raises(TypeError, match="float16 or torch.bfloat16"):
        fmha_tile.attention(q.float(), k.float(), v.float())
    with pytest.raises(TypeError, match="one dtype"):
        fmha_tile.attention(q, k.half(), v)
    with pytest.raises(ValueError, match="4 dimensions"):
        fmha_tile.attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="multiple of the number of KV heads"):
        fmha_tile.attention(rand(2, 64, 5, 64), k, v)
    with pytest.raises(ValueError, match="unit stride"):
        fmha_tile.attention(rand(2, 64, 4, 128)[..., ::2], k, v)
    with pytest.raises(TypeError, match="torch.Tensor"):
        fmha_tile.attention(q.tolist(), k, v)
    with pytest.raises(ValueError, match="softcap"):
        fmha_tile.attention(q, k, v, softcap=-1.0)
    with pytest.raises(ValueError, match="window"):
        fmha_tile.attention(q, k, v, window=(-5, 0))
    with pytest.raises(TypeError, match="alibi_slopes must be torch.float32"):
        fmha_tile.attention(q, k, v, alibi_slopes=alibi_slopes(4).half())
    with pytest.raises(ValueError, match="alibi_slopes must have shape"):
        fmha_tile.attention(q, k, v, alibi_slopes=alibi_slopes(3))
    with pytest.raises(ValueError, match="out must have shape"):
        fmha_tile.attention(q, k, v, out=torch.empty_like(k))
    with pytest.raises(fmha_tile.FmhaError) as ei:      # a refusal that only the library knows
        x = rand(1, 16, 2, 264)
        fmha_tile.attention(x, x, x)
    assert ei.value.status == _lib.FMHA_ERR_UNSUPPORTED
    assert "head dim 264" in ei.value.message and "unsupported" in str(ei.value)
    with pytest.raises(ValueError, match="out="):
        fmha_tile.attention(q.clone().requires_grad_(), k, v, out=torch.empty_like(q))
    with torch.no_grad():
        o = fmha_tile.attention(q.clone().requires_grad_(), k, v, alibi_slopes=alibi_slopes(4))
    assert o.grad_fn is None and not o.requires_grad


def test_varlen_bad_inputs():
    q, k, v, cu_q, cu_k, cq, ck = varlen_case([3, 4], [5, 6], 2, 2, 64, BF16)
    with pytest.raises(TypeError, match="int32"):
        fmha_tile.attention_varlen(q, k, v, cu_q.long(), cu_k, 4, 6)
    with pytest.raises(ValueError, match="CUDA device"):
        fmha_tile.attention_varlen(q, k, v, cu_q.cpu(), cu_k, 4, 6)
    with pytest.raises(ValueError, match="entries"):
        fmha_tile.attention_varlen(q, k, v, cu_q, cu_k[:2], 4, 6)
    with pytest.raises(ValueError, match="max_seqlen_q"):
        fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, -1, 6)
    with pytest.raises(ValueError, match="3 dimensions"):
        fmha_tile.attention_varlen(q[None], k, v, cu_q, cu_k, 4, 6)


# ---- streams, devices, plans ---------------------------------------------------------------------------
def test_current_stream():
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        q, k, v = rand(2, 300, 8, 128), rand(2, 300, 8, 128), rand(2, 300, 8, 128)
        o = fmha_tile.attention(q, k, v, causal=True)
        ref = reference(q, k, v, causal=True)[0]
    s.synchronize()
    check(o, None, ref, None, BF16)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_device():
    dev = torch.device("cuda", 1)
    q, k, v = (torch.randn(2, 100, 4, 64, dtype=BF16, device=dev) for _ in range(3))
    assert torch.cuda.current_device() == 0
    o = fmha_tile.attention(q, k, v, causal=True)
    assert o.device == dev
    check(o, None, reference(q, k, v, causal=True)[0], None, BF16)


def test_plan_and_kernels():
    q, k, v = rand(2, 100, 8, 128), rand(2, 100, 8, 128), rand(2, 100, 8, 128)
    p = fmha_tile.attention_plan(q, k, v, causal=True)
    assert "bf16" in p["kernel"] and p["hdim"] >= 128 and p["grid"][1:] == (8, 2)
    names = [x["name"] for x in fmha_tile.kernels()["kernels"]]
    assert p["kernel"] in names
    with pytest.raises(fmha_tile.FmhaError):
        fmha_tile.attention_plan(rand(1, 8, 2, 264), rand(1, 8, 2, 264), rand(1, 8, 2, 264))


# ---- CUDA graphs ----------------------------------------------------------------------------------------
def _warm(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def test_cuda_graph():
    b, s_q, s_k, h, hk, d = 2, 200, 300, 8, 2, 128
    sq, sk, sv = rand(b, s_q, h, d), rand(b, s_k, hk, d), rand(b, s_k, hk, d)
    slopes = alibi_slopes(h)

    def fn():
        return fmha_tile.attention(sq, sk, sv, causal=True, alibi_slopes=slopes, return_lse=True)
    _warm(fn)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, lse = fn()
    for _ in range(2):
        q, k, v = rand(b, s_q, h, d), rand(b, s_k, hk, d), rand(b, s_k, hk, d)
        sq.copy_(q)
        sk.copy_(k)
        sv.copy_(v)
        g.replay()
        torch.cuda.synchronize()
        ref_o, ref_lse = reference(q, k, v, causal=True, alibi=slopes)
        check(out, lse, ref_o, ref_lse, BF16)


def test_cuda_graph_varlen():
    # the same graph replayed with other sequence lengths: cu_seqlens are only read on the device
    # max_len bounds every query length of every replay (the first has 300)
    h, d, total, max_len = 4, 64, 400, 300
    sq, sk, sv = rand(total, h, d), rand(total, h, d), rand(total, h, d)
    cu_q = torch.tensor([0, 100, 400], dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0, 150, 400], dtype=torch.int32, device=DEV)

    def fn():
        return fmha_tile.attention_varlen(sq, sk, sv, cu_q, cu_k, max_len, max_len, causal=True,
                                          return_lse=True)
    _warm(fn)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, lse = fn()
    for cq, ck in (([0, 100, 400], [0, 150, 400]), ([0, 256, 256 + 144], [0, 0, 400]),
                   ([0, 7, 263], [0, 200, 390])):
        q, k, v = rand(total, h, d), rand(total, h, d), rand(total, h, d)
        sq.copy_(q)
        sk.copy_(k)
        sv.copy_(v)
        cu_q.copy_(torch.tensor(cq, dtype=torch.int32))
        cu_k.copy_(torch.tensor(ck, dtype=torch.int32))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        n = cq[-1]
        ref_o, ref_lse = varlen_reference(q, k, v, cq, ck, causal=True)
        check(out[:n], lse[:, :n].contiguous(), ref_o, ref_lse, BF16)


# ---- gradients (backward) ----------------------------------------------------------------------------
GRAD_TOL = {BF16: 2e-2, FP16: 5e-3}


def sdpa_ref_f32(q, k, v, causal=False, window=(-1, -1), scale=None):
    """Differentiable fp32 reference through SDPA's math backend (no fully masked
    rows allowed: SDPA gives NaN there). GQA by repeat_interleave of K/V, whose
    backward sums the query heads' gradients back onto each KV head."""
    h, hk = q.shape[2], k.shape[2]
    qt = q.transpose(1, 2)
    kt = k.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vt = v.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    mask = visible(q.shape[1], k.shape[1], causal, window, q.device)
    assert mask.any(dim=-1).all(), "SDPA reference needs every row to see a key"
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    with math_backend():
        o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale)
    return o.transpose(1, 2)


def manual_ref_f32(q, k, v, causal=False, window=(-1, -1), softcap=0.0, scale=None, alibi=None):
    """Differentiable fp32 reference by hand: scores, soft cap, ALiBi, mask,
    softmax. A finite fill and a multiply by the mask keep rows that see no
    key at O = 0 with zero (not NaN) gradients."""
    b, s_q, h, d = q.shape
    s_k, hk = k.shape[1], k.shape[2]
    if s_k == 0:
        return torch.zeros(b, s_q, h, v.shape[-1], device=q.device)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    qt = q.transpose(1, 2)
    kt = k.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vt = v.transpose(1, 2).repeat_interleave(h // hk, dim=1)
    s = torch.matmul(qt, kt.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi is not None:
        slopes = alibi.float().reshape(-1, h)[:, :, None, None]     # [1 or b, h, 1, 1]
        i = torch.arange(s_q, device=q.device)[:, None]
        j = torch.arange(s_k, device=q.device)[None, :]
        s = s - slopes * (i + s_k - s_q - j).abs().float()
    mask = visible(s_q, s_k, causal, window, q.device)
    p = torch.softmax(s.masked_fill(~mask, -1e30), dim=-1) * mask
    return torch.matmul(p, vt).transpose(1, 2)


def fmha_grads(fn, q, k, v, dout):
    """(o, dq, dk, dv) of fn(q, k, v) on leaf copies of q, k, v, backward with dout."""
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    o = fn(q, k, v)
    assert o.requires_grad and o.grad_fn is not None
    o.backward(dout)
    return o.detach(), q.grad, k.grad, v.grad


def ref_grads(fn, q, k, v, dout):
    q, k, v = (x.detach().float().requires_grad_() for x in (q, k, v))
    o = fn(q, k, v)
    o.backward(dout.float())
    return o.detach(), q.grad, k.grad, v.grad


def check_grads(got, ref, dtype):
    """dq, dk, dv: shapes and dtypes of q, k, v, finite, rel-L2 within GRAD_TOL;
    exact zeros where nothing is seen: dq of a query row whose reference output
    is zero (it sees no key), dk/dv of a key whose reference dv is zero (no
    query sees it). A gradient that is zero only by cancellation (one visible
    key: dS = P (dP - D) = 0) keeps the kernel's fp32 residue."""
    unseen = (ref[0].abs().amax(dim=-1) == 0, ref[3].abs().amax(dim=-1) == 0,
              ref[3].abs().amax(dim=-1) == 0)
    for name, g, r, zero in zip(("dq", "dk", "dv"), got[1:], ref[1:], unseen):
        assert g is not None, name
        assert g.dtype == dtype and g.shape == r.shape, (name, g.dtype, g.shape, r.shape)
        assert torch.isfinite(g).all(), "%s not finite" % name
        err = rel_l2(g, r)
        assert err <= GRAD_TOL[dtype], "%s rel-L2 %.3e > %.0e" % (name, err, GRAD_TOL[dtype])
        if zero.any():
            assert (g.float().abs().amax(dim=-1)[zero] == 0).all(), "%s not zero where nothing is seen" % name


def grad_case(b, s_q, s_k, h, hk, d, dtype):
    return (rand(b, s_q, h, d, dtype=dtype), rand(b, s_k, hk, d, dtype=dtype),
            rand(b, s_k, hk, d, dtype=dtype), rand(b, s_q, h, d, dtype=dtype))


@pytest.mark.parametrize("s_q,s_k", [(200, 257), (77, 100)], ids=["dq_acc", "short_keys"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_grad_vs_sdpa(dtype, d, causal, s_q, s_k):
    # s_q <= s_k: bottom-right causal leaves no row without keys (SDPA's reference)
    q, k, v, dout = grad_case(2, s_q, s_k, 4, 4, d, dtype)
    got = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=causal), q, k, v, dout)
    ref = ref_grads(lambda q, k, v: sdpa_ref_f32(q, k, v, causal), q, k, v, dout)
    check(got[0], None, ref[0], None, dtype)
    check_grads(got, ref, dtype)


@pytest.mark.parametrize("ratio", [2, 4, 8])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_grad_gqa(dtype, ratio):
    q, k, v, dout = grad_case(2, 150, 300, 8, 8 // ratio, 128, dtype)
    got = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=True), q, k, v, dout)
    assert got[2].shape == k.shape and got[3].shape == v.shape     # nhead_k heads
    ref = ref_grads(lambda q, k, v: sdpa_ref_f32(q, k, v, True), q, k, v, dout)
    check_grads(got, ref, dtype)


@pytest.mark.parametrize("softcap", [5.0, 30.0])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_grad_softcap(dtype, causal, softcap):
    q, k, v, dout = grad_case(2, 130, 270, 8, 2, 128, dtype)
    got = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=causal, softcap=softcap),
                     q, k, v, dout)
    ref = ref_grads(lambda q, k, v: manual_ref_f32(q, k, v, causal, softcap=softcap), q, k, v, dout)
    check_grads(got, ref, dtype)


@pytest.mark.parametrize("s_q,s_k,causal,window", [
    (300, 200, True, (-1, -1)),      # the first 100 rows see no key: dq = 0 there
    (200, 333, False, (40, 10)),     # keys no row sees: dk = dv = 0 there
    (129, 257, True, (64, 0)),
])
def test_grad_masks(s_q, s_k, causal, window):
    for dtype, d in ((BF16, 128), (FP16, 64)):
        q, k, v, dout = grad_case(2, s_q, s_k, 4, 2, d, dtype)
        got = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=causal, window=window),
                         q, k, v, dout)
        ref = ref_grads(lambda q, k, v: manual_ref_f32(q, k, v, causal, window), q, k, v, dout)
        check_grads(got, ref, dtype)


@pytest.mark.parametrize("per_batch", [False, True])
@pytest.mark.parametrize("s_q,s_k,causal", [(200, 257, True), (300, 200, True), (77, 100, False)])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_grad_alibi(dtype, s_q, s_k, causal, per_batch):
    # ALiBi in training: the backward's ALiBi rows (the slopes get no gradient)
    q, k, v, dout = grad_case(2, s_q, s_k, 8, 2, 128, dtype)
    sl = alibi_slopes(8, 2 if per_batch else None)
    got = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=causal, alibi_slopes=sl),
                     q, k, v, dout)
    ref = ref_grads(lambda q, k, v: manual_ref_f32(q, k, v, causal, alibi=sl), q, k, v, dout)
    check_grads(got, ref, dtype)
    a = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=causal, alibi_slopes=sl,
                                                      deterministic=True), q, k, v, dout)
    b = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=causal, alibi_slopes=sl,
                                                      deterministic=True), q, k, v, dout)
    check_grads(a, ref, dtype)
    assert all(torch.equal(x, y) for x, y in zip(a[1:], b[1:]))


def test_grad_scale_lse_and_expanded_dout():
    # return_lse: lse is not differentiable; o.sum() hands the backward an expanded
    # (stride 0) gradient, which the package makes dense
    q, k, v, _ = grad_case(2, 100, 180, 4, 2, 64, BF16)
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    o, lse = fmha_tile.attention(qg, kg, vg, causal=True, scale=0.2, return_lse=True)
    assert not lse.requires_grad and o.requires_grad
    ref_o, ref_lse = reference(q, k, v, causal=True, scale=0.2)
    check(o.detach(), lse, ref_o, ref_lse, BF16)
    o.sum().backward()
    ref = ref_grads(lambda q, k, v: sdpa_ref_f32(q, k, v, True, scale=0.2), q, k, v,
                    torch.ones_like(q))
    check_grads((None, qg.grad, kg.grad, vg.grad), ref, BF16)


def test_grad_only_some_inputs_and_views():
    # q only requires grad; inputs are [b, s, h, d] views of [b, h, s, d] tensors
    b, h, s, d = 2, 4, 150, 128
    qb = rand(b, h, s, d).requires_grad_()
    k = rand(b, h, s, d).transpose(1, 2)
    v = rand(b, h, s, d).transpose(1, 2)
    q = qb.transpose(1, 2)
    dout = rand(b, s, h, d)
    o = fmha_tile.attention(q, k, v, causal=True)
    o.backward(dout)
    assert qb.grad is not None and qb.grad.shape == (b, h, s, d)
    ref = ref_grads(lambda q, k, v: sdpa_ref_f32(q, k, v, True), q, k, v, dout)
    err = rel_l2(qb.grad.transpose(1, 2), ref[1])
    assert err <= GRAD_TOL[BF16], err


def test_grad_empty():
    # no keys: O = 0, dq = 0; no queries: dk = dv = 0
    q, k, v = (x.requires_grad_() for x in (rand(2, 10, 4, 64), rand(2, 0, 4, 64), rand(2, 0, 4, 64)))
    fmha_tile.attention(q, k, v).backward(rand(2, 10, 4, 64))
    assert (q.grad == 0).all() and k.grad.shape == k.shape and v.grad.shape == v.shape
    q, k, v = (x.requires_grad_() for x in (rand(2, 0, 4, 64), rand(2, 10, 4, 64), rand(2, 10, 4, 64)))
    fmha_tile.attention(q, k, v).backward(rand(2, 0, 4, 64))
    assert (k.grad == 0).all() and (v.grad == 0).all()


# ---- unequal head dims: DeepSeek MLA prefill (q/k 192, v/o 128) ----------------------------------------
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_mla_head_dims(dtype, causal):
    # the default set's 192_128 kernels: O as wide as V, LSE, GQA 4, odd lengths
    q, k, v = rand(2, 333, 8, 192, dtype=dtype), rand(2, 517, 2, 192, dtype=dtype), \
        rand(2, 517, 2, 128, dtype=dtype)
    o, lse = fmha_tile.attention(q, k, v, causal=causal, return_lse=True)
    assert o.shape == (2, 333, 8, 128)
    ref_o, ref_lse = reference(q, k, v, causal)
    check(o, lse, ref_o, ref_lse, dtype)
    p = fmha_tile.attention_plan(q, k, v, causal=causal)
    assert p["hdim"] == 192 and p["hdim_v"] == 128 and "d192_128" in p["kernel"], p


def test_mla_varlen():
    lens_q, lens_k = [37, 0, 1, 200], [50, 9, 0, 300]
    cq, ck = [0], [0]
    for a, b in zip(lens_q, lens_k):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + b)
    q, k, v = rand(cq[-1], 8, 192), rand(ck[-1], 2, 192), rand(ck[-1], 2, 128)
    cu_q = torch.tensor(cq, dtype=torch.int32, device=DEV)
    cu_k = torch.tensor(ck, dtype=torch.int32, device=DEV)
    o = fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True)
    assert o.shape == (cq[-1], 8, 128)
    for i in range(len(lens_q)):
        if lens_q[i] == 0:
            continue
        ref = reference(q[cq[i]:cq[i + 1]][None], k[ck[i]:ck[i + 1]][None], v[ck[i]:ck[i + 1]][None],
                        causal=True)[0][0]
        check(o[cq[i]:cq[i + 1]], None, ref, None, BF16)


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_mla_grads(dtype, deterministic):
    # dq, dk of 192 columns, dv of 128 (the backward's 192_128 kernels of the default set)
    q, k, v = rand(2, 200, 8, 192, dtype=dtype), rand(2, 257, 2, 192, dtype=dtype), \
        rand(2, 257, 2, 128, dtype=dtype)
    dout = rand(2, 200, 8, 128, dtype=dtype)
    got = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=True, deterministic=deterministic),
                     q, k, v, dout)
    ref = ref_grads(lambda q, k, v: sdpa_ref_f32(q, k, v, True), q, k, v, dout)
    check(got[0], None, ref[0], None, dtype)
    check_grads(got, ref, dtype)
    if deterministic:
        again = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=True, deterministic=True),
                           q, k, v, dout)
        assert all(torch.equal(a, b) for a, b in zip(got[1:], again[1:]))


def test_mla_bad_dims():
    # hdim_v above hdim_q is refused, nothing launched
    with pytest.raises(fmha_tile.FmhaError):
        fmha_tile.attention(rand(1, 8, 2, 128), rand(1, 8, 2, 128), rand(1, 8, 2, 192))


def varlen_grad_reference(q, k, v, cq, ck, **kw):
    """fp32, differentiable: the per-sequence manual reference, rows concatenated."""
    outs = []
    for i in range(len(cq) - 1):
        if cq[i + 1] == cq[i]:
            continue
        o = manual_ref_f32(q[cq[i]:cq[i + 1]][None], k[ck[i]:ck[i + 1]][None],
                           v[ck[i]:ck[i + 1]][None], **kw)
        outs.append(o[0])
    return torch.cat(outs, 0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_grad_varlen(dtype, causal):
    # a zero-length query sequence, a one-token sequence, a sequence without keys
    lens_q = [37, 0, 1, 200, 5, 64]
    lens_k = [50, 9, 1, 300, 0, 20]
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(lens_q, lens_k, 8, 2, 128, dtype)
    dout = rand(*q.shape, dtype=dtype)
    got = fmha_grads(lambda q, k, v: fmha_tile.attention_varlen(
        q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal), q, k, v, dout)
    ref = ref_grads(lambda q, k, v: varlen_grad_reference(q, k, v, cq, ck, causal=causal),
                    q, k, v, dout)
    check_grads(got, ref, dtype)
    # keys of the sequence without queries, queries of the sequence without keys
    assert (got[2][ck[1]:ck[2]] == 0).all() and (got[3][ck[1]:ck[2]] == 0).all()
    assert (got[1][cq[4]:cq[5]] == 0).all()


def test_grad_varlen_softcap_window_hdim64():
    lens_q = [100, 1, 0, 250]
    lens_k = [120, 1, 5, 200]
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(lens_q, lens_k, 4, 4, 64, FP16)
    dout = rand(*q.shape, dtype=FP16)
    got = fmha_grads(lambda q, k, v: fmha_tile.attention_varlen(
        q, k, v, cu_q, cu_k, 256, 256, window=(40, 10), softcap=15.0), q, k, v, dout)
    ref = ref_grads(lambda q, k, v: varlen_grad_reference(q, k, v, cq, ck, window=(40, 10),
                                                          softcap=15.0), q, k, v, dout)
    check_grads(got, ref, FP16)


def test_grad_varlen_bounds_checked():
    q, k, v, cu_q, cu_k, cq, ck = varlen_case([10, 300], [20, 300], 2, 2, 64, BF16)
    q.requires_grad_()
    o = fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, 300, 100)   # max_seqlen_k too small
    with pytest.raises(ValueError, match="max_seqlen_k"):
        o.backward(torch.ones_like(o))


def _three_grads(fn, q, k, v, dout):
    _, dq, dk, dv = fmha_grads(fn, q, k, v, dout)
    return dq, dk, dv


@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_grad_deterministic(dtype):
    # long keys and few (batch x KV head) units: several dq_acc splits per entry
    q, k, v, dout = grad_case(1, 700, 1500, 8, 2, 128, dtype)

    def fn(q, k, v):
        return fmha_tile.attention(q, k, v, causal=True, deterministic=True)
    first = _three_grads(fn, q, k, v, dout)
    second = _three_grads(fn, q, k, v, dout)
    for name, a, b in zip(("dq", "dk", "dv"), first, second):
        assert torch.equal(a, b), "deterministic mode: %s differs between two runs" % name
    ref = ref_grads(lambda q, k, v: sdpa_ref_f32(q, k, v, True), q, k, v, dout)
    check_grads((None,) + first, ref, dtype)
    # varlen
    lens_q, lens_k = [300, 1, 0, 500], [900, 1, 7, 1200]
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(lens_q, lens_k, 4, 2, 64, dtype)
    dout = rand(*q.shape, dtype=dtype)

    def fnv(q, k, v):
        return fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, 500, 1200, softcap=20.0,
                                          deterministic=True)
    first = _three_grads(fnv, q, k, v, dout)
    second = _three_grads(fnv, q, k, v, dout)
    for name, a, b in zip(("dq", "dk", "dv"), first, second):
        assert torch.equal(a, b), "deterministic varlen: %s differs between two runs" % name
    ref = ref_grads(lambda q, k, v: varlen_grad_reference(q, k, v, cq, ck, softcap=20.0),
                    q, k, v, dout)
    check_grads((None,) + first, ref, dtype)


def test_grad_current_stream():
    s = torch.cuda.Stream()
    q, k, v, dout = grad_case(2, 200, 300, 4, 2, 128, BF16)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = fmha_grads(lambda q, k, v: fmha_tile.attention(q, k, v, causal=True), q, k, v, dout)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    ref = ref_grads(lambda q, k, v: sdpa_ref_f32(q, k, v, True), q, k, v, dout)
    check_grads(got, ref, BF16)
