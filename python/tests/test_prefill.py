"""GPU tests of fmha_tile.batch_prefill against PyTorch SDPA on the gathered K/V
(dequantised for fp8 caches).

Each case builds a paged cache (pages shuffled, some shared between
sequences, the last page partly filled, unused slots poisoned with NaN),
runs batch_prefill, gathers every sequence's K/V from its pages and compares
with scaled_dot_product_attention (float32 math backend, explicit bottom-right
mask). Tolerances as the forward tests: bf16 1e-2, fp16 2e-3 rel-L2; LSE 2e-3.
Skips cleanly without torch, a GPU or the library.

FP8 (torch.float8_e4m3fn) caches: codes drawn over the whole e4m3 range
(subnormals up to 448), NaN in every unused slot, descales none / per tensor
(numbers, a 0-dim and a 1-element tensor) / per page and KV head (contiguous,
and a strided view); bf16 or fp8 queries (with and without q_descale). The
reference gets the dequantised K/V (and Q): stored * descale; the output is
bf16 and held to the bf16 tolerance. On Hopper, fp8 queries with head dims
above 64 run on the wgmma pipeline (e4m3 P V): there the reference rounds P
as the kernel does (test_fwd_fp8.reference_p8, with each key's V descale) and
the LSE tolerance is test_fwd_fp8's.
"""
import math
import random

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import torch.nn.functional as F  # noqa: E402

import fmha_tile  # noqa: E402
from fmha_tile import _lib  # noqa: E402

from test_attention import visible, math_backend, TOL, LSE_TOL, BF16, FP16  # noqa: E402

DEV = "cuda"
SM90 = torch.cuda.get_device_capability() == (9, 0)


def check_plan(plan, fp8, q8=False, d=0, per_page=False):
    """batch_prefill_plan names the pipeline and why: the Hopper one on sm_90 for
    16-bit KV and for fp8 KV with fp8 queries, or with bf16 queries without
    per-page descales (head dim above 64: the e4m3 kernels are 128 and 256,
    d <= 64 takes the portable 64 one), the portable one otherwise (fp8 KV with
    bf16 queries and per-page descales by the fallback rule)."""
    if SM90 and (not fp8 or ((q8 or not per_page) and d > 64)):
        assert plan["pipeline"] == "wgmma" and plan["why"].startswith("fast pipeline"), plan
    else:
        assert plan["pipeline"] == "portable_mma" and plan["why"].startswith("portable pipeline"), plan
        if SM90 and fp8 and not q8 and d > 64:
            assert plan["why"].startswith("portable pipeline: fp8 KV with bf16 queries and per-page"), plan
    assert plan["kernel"] in [k["name"] for k in fmha_tile.kernels()["kernels"]]
    return plan


def make_cache(s_ks, page, hk, d, dtype, layout, share_first_page=False, seed=0):
    """Random pages for sequences of s_ks keys -> (k_cache, v_cache, page lists, K, V per seq)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    counts = [(s + page - 1) // page for s in s_ks]
    n_pages = sum(counts) + 3                       # a few pages nobody uses
    order = torch.randperm(n_pages, generator=g).tolist()
    lists, it = [], 0
    for b, c in enumerate(counts):
        lists.append(order[it:it + c])
        it += c
    if share_first_page and len(lists) > 1 and lists[0] and lists[1]:
        lists[1][0] = lists[0][0]                   # prefix sharing: same first page
    kd = torch.full((n_pages, page, hk, d), float("nan"), dtype=dtype)   # poison everything
    vd = torch.full((n_pages, page, hk, d), float("nan"), dtype=dtype)
    Ks, Vs = [], []
    for b, s in enumerate(s_ks):
        K = torch.randn(s, hk, d, generator=g).to(dtype)
        V = torch.randn(s, hk, d, generator=g).to(dtype)
        if share_first_page and b == 1 and lists[1]:
            n0 = min(page, s, s_ks[0])
            K[:n0], V[:n0] = Ks[0][:n0], Vs[0][:n0]
        for t in range(s):
            kd[lists[b][t // page], t % page] = K[t]
            vd[lists[b][t // page], t % page] = V[t]
        Ks.append(K)
        Vs.append(V)
    if layout == "NHD":
        kc, vc = kd.to(DEV), vd.to(DEV)
    elif layout == "HND":
        kc, vc = kd.permute(0, 2, 1, 3).contiguous().to(DEV), vd.permute(0, 2, 1, 3).contiguous().to(DEV)
    else:  # VECTORIZED: K [p, h, d/8, page, 8], V [p, h, page/8, d, 8]
        kc = kd.reshape(n_pages, page, hk, d // 8, 8).permute(0, 2, 3, 1, 4).contiguous().to(DEV)
        vc = vd.reshape(n_pages, page // 8, 8, hk, d).permute(0, 3, 1, 4, 2).contiguous().to(DEV)
    return kc, vc, lists, Ks, Vs


def reference(q_list, Ks, Vs, causal, window, scale):
    outs, lses = [], []
    for q, K, V in zip(q_list, Ks, Vs):
        s_q, h, d = q.shape
        s_k, hk = K.shape[0], K.shape[1]
        qf = q.float().to(DEV).permute(1, 0, 2)
        kf = K.float().to(DEV).repeat_interleave(h // hk, dim=1).permute(1, 0, 2)
        vf = V.float().to(DEV).repeat_interleave(h // hk, dim=1).permute(1, 0, 2)
        if s_q == 0:
            outs.append(torch.zeros(0, h, d, device=DEV))
            lses.append(torch.zeros(h, 0, device=DEV))
            continue
        vis = visible(s_q, s_k, causal, window)
        s = (qf @ kf.transpose(1, 2)) * scale
        s = s.masked_fill(~vis, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
        outs.append((p @ vf).permute(1, 0, 2))
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses, dim=1)


CASES = [
    # (dtype, page, s_qs, s_ks, h, hk, d, layout, table, causal, window, share)
    (BF16, 16, [100, 1, 0, 37], [300, 1, 0, 37], 8, 2, 128, "NHD", "sglang", True, None, True),
    (BF16, 1, [64, 33], [200, 33], 4, 4, 64, "NHD", "vllm", True, None, False),
    (BF16, 4, [17, 90], [17, 250], 4, 1, 128, "HND", "sglang", True, (32, 0), False),
    (FP16, 64, [128, 5], [700, 300], 8, 1, 64, "NHD", "vllm", True, None, True),
    (BF16, 1024, [200, 300], [1500, 300], 4, 2, 256, "HND", "sglang", True, None, False),
    (FP16, 16, [50, 70], [90, 70], 4, 2, 96, "NHD", "sglang", False, None, False),
    (BF16, 16, [120, 9], [400, 9], 8, 2, 128, "VECTORIZED", "sglang", True, None, True),
    (FP16, 64, [77, 128], [300, 200], 4, 4, 64, "VECTORIZED", "vllm", True, None, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-p%d-%s-%s-d%d" % (
    "bf16" if c[0] is BF16 else "fp16", c[1], c[7], c[8], c[6]))
def test_batch_prefill(case):
    dtype, page, s_qs, s_ks, h, hk, d, layout, table, causal, window, share = case
    kc, vc, lists, Ks, Vs = make_cache(s_ks, page, hk, d, dtype, layout, share)
    q_list = [torch.randn(s, h, d).to(dtype) for s in s_qs]
    q = torch.cat(q_list).to(DEV)
    cu_q = torch.tensor([0] + list(torch.tensor(s_qs).cumsum(0).tolist()), dtype=torch.int32, device=DEV)
    kw = {}
    if table == "sglang":
        kw["kv_indptr"] = torch.tensor([0] + list(torch.tensor([len(x) for x in lists]).cumsum(0).tolist()),
                                       dtype=torch.int32, device=DEV)
        flat = [p for x in lists for p in x]
        kw["kv_page_indices"] = torch.tensor(flat or [0], dtype=torch.int32, device=DEV)
        kw["kv_last_page_len"] = torch.tensor([(s - 1) % page + 1 if s else 1 for s in s_ks],
                                              dtype=torch.int32, device=DEV)
    else:
        width = max(len(x) for x in lists) + 2
        bt = torch.full((len(lists), width), 123456, dtype=torch.int32)   # garbage past the end
        for b, x in enumerate(lists):
            bt[b, :len(x)] = torch.tensor(x, dtype=torch.int32)
        kw["block_table"], kw["seqlens_k"] = bt.to(DEV), torch.tensor(s_ks, dtype=torch.int32, device=DEV)
    scale = d ** -0.5
    out = torch.full_like(q, float("nan"))
    check_plan(fmha_tile.batch_prefill_plan(q, kc, vc, cu_q, max(s_qs), kv_layout=layout, causal=causal,
                                            window=window or (-1, -1), **kw), fp8=False)
    out, lse = fmha_tile.batch_prefill(q, kc, vc, cu_q, max(s_qs), kv_layout=layout, causal=causal,
                                       window=window or (-1, -1), return_lse=True, out=out, **kw)
    torch.cuda.synchronize()
    with math_backend():
        ref_o, ref_lse = reference(q_list, Ks, Vs, causal, window, scale)
    assert torch.isfinite(out).all(), "non-finite output"
    err = ((out.float() - ref_o).norm() / ref_o.norm().clamp_min(1e-12)).item()
    assert err <= TOL[dtype], "rel-L2 %.3e" % err
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), fin)
    if fin.any():
        assert (lse[fin] - ref_lse[fin]).abs().max().item() <= LSE_TOL


def test_batch_prefill_bad_inputs():
    q = torch.randn(10, 4, 64, dtype=BF16, device=DEV)
    kc = torch.randn(4, 16, 4, 64, dtype=BF16, device=DEV)
    cu = torch.tensor([0, 10], dtype=torch.int32, device=DEV)
    with pytest.raises(ValueError):
        fmha_tile.batch_prefill(q, kc, kc, cu, 10)                       # no page table
    with pytest.raises(ValueError):
        fmha_tile.batch_prefill(q, kc, kc, cu, 10, kv_layout="XYZ",
                                block_table=torch.zeros(1, 1, dtype=torch.int32, device=DEV),
                                seqlens_k=torch.ones(1, dtype=torch.int32, device=DEV))
    kc24 = torch.randn(4, 24, 4, 64, dtype=BF16, device=DEV)             # page 24: not a power of 2
    with pytest.raises(fmha_tile.FmhaError) as e:
        fmha_tile.batch_prefill(q, kc24, kc24, cu, 10,
                                block_table=torch.zeros(1, 1, dtype=torch.int32, device=DEV),
                                seqlens_k=torch.ones(1, dtype=torch.int32, device=DEV))
    assert "power of two" in str(e.value)


# ---- FP8 (e4m3) KV ------------------------------------------------------------------------------
FP8 = getattr(torch, "float8_e4m3fn", None)
needs_fp8 = pytest.mark.skipif(FP8 is None, reason="this PyTorch has no torch.float8_e4m3fn")


def e4m3_values(shape, g, lo=-9.0, hi=8.8):
    """float32 values exact in e4m3: log-uniform magnitudes from the subnormals
    (2^-9) up to 448, random signs (the whole format)."""
    mag = torch.exp2(torch.rand(shape, generator=g) * (hi - lo) + lo).clamp(max=448.0)
    sign = torch.randint(0, 2, shape, generator=g).float() * 2 - 1
    return (mag * sign).to(FP8).float()


def make_cache_fp8(s_ks, page, hk, d, layout, share, scale_mode, seed=0):
    """fp8 pages (NaN, code 0x7F, in every slot nobody may read) and their descales
    -> (k_cache, v_cache, page lists, dequantised K and V per sequence, kw)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    counts = [(s + page - 1) // page for s in s_ks]
    n_pages = sum(counts) + 3
    order = torch.randperm(n_pages, generator=g).tolist()
    lists, it = [], 0
    for c in counts:
        lists.append(order[it:it + c])
        it += c
    if share and len(lists) > 1 and lists[0] and lists[1]:
        lists[1][0] = lists[0][0]                  # prefix sharing: same first page
    kd = torch.full((n_pages, page, hk, d), float("nan"))
    vd = torch.full((n_pages, page, hk, d), float("nan"))
    for b, s in enumerate(s_ks):                   # codes, page by page (shared pages once)
        for t in range(s):
            p = lists[b][t // page]
            if torch.isnan(kd[p, t % page, 0, 0]):
                kd[p, t % page] = e4m3_values((hk, d), g)
                vd[p, t % page] = e4m3_values((hk, d), g)
    kw = {}
    kds = vds = None                               # per-page descales [pages, hk], host
    if scale_mode in ("tensor_float", "tensor_tensor"):
        kds = torch.full((n_pages, hk), 0.37)
        vds = torch.full((n_pages, hk), 1.9)
        if scale_mode == "tensor_float":
            kw["k_descale"], kw["v_descale"] = 0.37, 1.9
        else:                                      # a 0-dim and a 1-element tensor
            kw["k_descale"] = torch.tensor(0.37, dtype=torch.float32, device=DEV)
            kw["v_descale"] = torch.tensor([1.9], dtype=torch.float32, device=DEV)
    elif scale_mode in ("page", "page_strided"):
        kds = torch.exp2(torch.rand(n_pages, hk, generator=g) * 4 - 2)   # [0.25, 4]
        vds = torch.exp2(torch.rand(n_pages, hk, generator=g) * 4 - 2)
        if scale_mode == "page":
            kw["k_descale"], kw["v_descale"] = kds.to(DEV), vds.to(DEV)
        else:                                      # [pages, hk] views of [hk, pages + 3] buffers
            kb = torch.full((hk, n_pages + 3), float("nan"), device=DEV)
            vb = torch.full((hk, n_pages + 3), float("nan"), device=DEV)
            kb[:, :n_pages] = kds.t().to(DEV)
            vb[:, :n_pages] = vds.t().to(DEV)
            kw["k_descale"], kw["v_descale"] = kb[:, :n_pages].t(), vb[:, :n_pages].t()
    Ks, Vs, VSs = [], [], []                       # VSs: each key's V descale [s, hk]
    for b, s in enumerate(s_ks):
        idx = torch.tensor([lists[b][t // page] for t in range(s)], dtype=torch.long)
        slot = torch.tensor([t % page for t in range(s)], dtype=torch.long)
        K, V = kd[idx, slot], vd[idx, slot]                 # [s, hk, d] codes as float32
        VSs.append(torch.ones(s, hk) if kds is None else vds[idx])
        if kds is not None:
            K, V = K * kds[idx][:, :, None], V * vds[idx][:, :, None]
        Ks.append(K)
        Vs.append(V)
    if layout == "HND":
        kd, vd = kd.permute(0, 2, 1, 3).contiguous(), vd.permute(0, 2, 1, 3).contiguous()
    return kd.to(FP8).to(DEV), vd.to(FP8).to(DEV), lists, Ks, Vs, VSs, kw


FP8_CASES = [
    # (q dtype, page, s_qs, s_ks, h, hk, d, layout, table, causal, window, share, descales, q descale)
    ("bf16", 16, [100, 1, 0, 37], [300, 1, 0, 37], 8, 2, 128, "NHD", "sglang", True, None, True,
     "tensor_float", None),
    ("fp8", 1, [64, 33], [200, 33], 4, 4, 64, "NHD", "vllm", True, None, False, "tensor_tensor", 0.6),
    ("bf16", 4, [17, 90], [17, 250], 4, 1, 128, "HND", "sglang", True, (32, 0), False, "page", None),
    ("fp8", 64, [128, 5], [700, 300], 8, 1, 64, "NHD", "vllm", True, None, True, "page_strided", "tensor"),
    ("bf16", 1024, [200, 300], [1500, 300], 4, 2, 256, "HND", "sglang", True, None, False, "none", None),
    ("fp8", 16, [50, 70], [90, 70], 4, 2, 96, "NHD", "sglang", False, None, False, "page", None),
]


@needs_fp8
@pytest.mark.parametrize("case", FP8_CASES, ids=lambda c: "q%s-p%d-%s-%s-d%d-%s" % (
    c[0], c[1], c[7], c[8], c[6], c[12]))
def test_batch_prefill_fp8(case):
    qdt, page, s_qs, s_ks, h, hk, d, layout, table, causal, window, share, scale_mode, qds = case
    kc, vc, lists, Ks, Vs, VSs, kw = make_cache_fp8(s_ks, page, hk, d, layout, share, scale_mode)
    g = torch.Generator(device="cpu").manual_seed(1)
    if qdt == "fp8":                               # mid-range e4m3 queries
        q_codes = [e4m3_values((s, h, d), g, -2.0, 2.9) for s in s_qs]
        q = torch.cat(q_codes).to(FP8).to(DEV)
        qd = 1.0 if qds is None else 0.6
        q_list = [x * qd for x in q_codes]
        if qds == "tensor":
            kw["q_descale"] = torch.tensor(0.6, dtype=torch.float32, device=DEV)
        elif qds is not None:
            kw["q_descale"] = qds
    else:
        q_list = [torch.randn(s, h, d, generator=g).to(BF16) for s in s_qs]
        q = torch.cat(q_list).to(DEV)
    cu_q = torch.tensor([0] + list(torch.tensor(s_qs).cumsum(0).tolist()), dtype=torch.int32, device=DEV)
    if table == "sglang":
        kw["kv_indptr"] = torch.tensor([0] + list(torch.tensor([len(x) for x in lists]).cumsum(0).tolist()),
                                       dtype=torch.int32, device=DEV)
        kw["kv_page_indices"] = torch.tensor([p for x in lists for p in x] or [0], dtype=torch.int32, device=DEV)
        kw["kv_last_page_len"] = torch.tensor([(s - 1) % page + 1 if s else 1 for s in s_ks],
                                              dtype=torch.int32, device=DEV)
    else:
        width = max(len(x) for x in lists) + 2
        bt = torch.full((len(lists), width), 123456, dtype=torch.int32)   # garbage past the end
        for b, x in enumerate(lists):
            bt[b, :len(x)] = torch.tensor(x, dtype=torch.int32)
        kw["block_table"], kw["seqlens_k"] = bt.to(DEV), torch.tensor(s_ks, dtype=torch.int32, device=DEV)
    scale = d ** -0.5
    plan = check_plan(fmha_tile.batch_prefill_plan(q, kc, vc, cu_q, max(s_qs), kv_layout=layout, causal=causal,
                                                   window=window or (-1, -1), **kw), fp8=True, q8=qdt == "fp8", d=d,
                      per_page=scale_mode in ("page", "page_strided"))
    out, lse = fmha_tile.batch_prefill(q, kc, vc, cu_q, max(s_qs), kv_layout=layout, causal=causal,
                                       window=window or (-1, -1), return_lse=True, **kw)
    torch.cuda.synchronize()
    assert out.dtype == BF16
    lse_tol = torch.full((h, sum(s_qs)), LSE_TOL, device=DEV)
    if plan["pipeline"] == "wgmma" and qdt == "fp8":
        # e4m3 P V: the reference rounds P per key tile as the kernel does (each
        # key's V descale first, over the tile's largest), and the LSE tolerance
        # grows with sum |q k| (test_fwd_fp8's rules)
        from test_fwd_fp8 import reference_p8
        per_page = scale_mode in ("page", "page_strided")
        outs, lses, tols = [], [], []
        for qb, K, V, VS in zip(q_list, Ks, Vs, VSs):
            if qb.shape[0] == 0:
                continue
            o_, l_, t_ = reference_p8(qb[None].to(DEV), K[None].to(DEV), V[None].to(DEV), plan["tile"][1],
                                      causal=causal, window=window or (-1, -1), scale=scale,
                                      vscale=VS[None].to(DEV) if per_page else None)
            outs.append(o_[0])
            lses.append(l_[0])
            tols.append(t_[0])
        ref_o, ref_lse, lse_tol = torch.cat(outs), torch.cat(lses, dim=1), torch.cat(tols, dim=1)
    else:
        with math_backend():
            ref_o, ref_lse = reference(q_list, Ks, Vs, causal, window, scale)
    assert torch.isfinite(out).all(), "non-finite output"
    err = ((out.float() - ref_o).norm() / ref_o.norm().clamp_min(1e-12)).item()
    assert err <= TOL[BF16], "rel-L2 %.3e" % err
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), fin)
    if fin.any():
        assert ((lse[fin] - ref_lse[fin]).abs() <= lse_tol[fin]).all(), \
            "LSE error %.3e" % (lse[fin] - ref_lse[fin]).abs().max().item()


@needs_fp8
def test_batch_prefill_fp8_bad_inputs():
    q = torch.randn(10, 4, 64, dtype=BF16, device=DEV)
    kc = torch.zeros(4, 16, 4, 64, dtype=BF16, device=DEV).to(FP8)
    cu = torch.tensor([0, 10], dtype=torch.int32, device=DEV)
    tab = dict(block_table=torch.zeros(1, 1, dtype=torch.int32, device=DEV),
               seqlens_k=torch.ones(1, dtype=torch.int32, device=DEV))
    with pytest.raises(TypeError):                  # fp16 queries on fp8 caches
        fmha_tile.batch_prefill(q.half(), kc, kc, cu, 10, **tab)
    with pytest.raises(ValueError):                 # q_descale with bf16 queries
        fmha_tile.batch_prefill(q, kc, kc, cu, 10, q_descale=0.5, **tab)
    with pytest.raises(ValueError):                 # descale shapes
        fmha_tile.batch_prefill(q, kc, kc, cu, 10, k_descale=torch.ones(3, 4, device=DEV),
                                v_descale=torch.ones(3, 4, device=DEV), **tab)
    kc72 = torch.zeros(4, 16, 4, 72, dtype=BF16, device=DEV).to(FP8)
    q72 = torch.randn(10, 4, 72, dtype=BF16, device=DEV)
    with pytest.raises(fmha_tile.FmhaError) as e:   # head dim not a multiple of 16
        fmha_tile.batch_prefill(q72, kc72, kc72, cu, 10, **tab)
    assert e.value.status == _lib.FMHA_ERR_UNSUPPORTED
