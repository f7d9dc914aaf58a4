"""GPU tests of fmha_tile.decode_plan (DecodePlan.run, the host fast path of
decode) against fmha_tile.attention_with_kvcache on the same tensors.

The plan makes the same C plan as the call (same kernel, same split count),
so its outputs are compared bit for bit: contiguous and paged caches
(SGLang's and vLLM's tables), heuristic and fixed split counts, append with
rotary (the caches written alike), fp8 caches with number descales,
per-call sinks; one plan run on other tensors (other pointers) call after
call; run under CUDA-graph capture and replayed on new inputs; refusals of
tensors of another shape, dtype, layout or device (nothing written). The
forward plan (fmha_tile.forward_plan) likewise against fmha_tile.attention.
Skips cleanly without torch, a GPU or the library.
"""
import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import fmha_tile  # noqa: E402

from test_decode import CASES, call, make_case  # noqa: E402


def per_call(case):
    """The tensors of a case besides q / k_cache / v_cache, as run() takes them."""
    kw = {}
    for name in ("kv_indptr", "kv_page_indices", "kv_last_page_len", "block_table"):
        if name in case:
            kw[name] = case[name]
    if not case["paged"]:
        kw["cache_batch_idx"] = case["cbi"]
    return kw


def make_plan(case, **kw):
    extra = per_call(case)
    if case["paged"]:
        extra["max_seqlen_k"] = max(case["lens"])
    seqlens = None if "kv_indptr" in case else case["seqlens"]
    return fmha_tile.decode_plan(case["q"], case["k_cache"], case["v_cache"], seqlens, **extra, **kw)


def run(plan, case, **kw):
    seqlens = None if "kv_indptr" in case else case["seqlens"]
    return plan.run(case["q"], case["k_cache"], case["v_cache"], seqlens, **per_call(case), **kw)


def bitwise(a, b):
    """Same dtype, shape and bytes (NaN-safe)."""
    return a.dtype == b.dtype and a.shape == b.shape and \
        torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@pytest.mark.parametrize("splits", [0, 1, 5])
@pytest.mark.parametrize("cfg", CASES, ids=lambda c: "x".join(str(x) for x in c[1:7]) + ("_paged" if c[7] else ""))
def test_plan_bitwise_as_call(cfg, splits):
    dtype, b, hq, hk, d, s_q, lens, paged, page, vllm = cfg
    case = make_case(dtype, b, hq, hk, d, s_q, lens, paged, page, vllm, seed=b * 7 + d)
    causal = s_q > 1
    want, want_lse = call(case, causal=causal, num_splits=splits, return_lse=True)
    plan = make_plan(case, causal=causal, num_splits=splits, return_lse=True)
    info = call(case, causal=causal, num_splits=splits, plan_only=True)
    assert plan.info() == info, "the plan is not the one the call makes"
    got, got_lse = run(plan, case)
    assert bitwise(got, want) and bitwise(got_lse, want_lse)
    out = torch.full_like(want, float("nan"))
    lse = torch.full_like(want_lse, float("nan"))
    r = run(plan, case, out=out, lse=lse)
    assert r[0] is out and r[1] is lse
    assert bitwise(out, want) and bitwise(lse, want_lse)


@pytest.mark.parametrize("cfg", [CASES[0], CASES[2], CASES[3]], ids=["contiguous", "sglang", "vllm"])
def test_plan_reused_on_other_tensors(cfg):
    dtype, b, hq, hk, d, s_q, lens, paged, page, vllm = cfg
    cases = [make_case(dtype, b, hq, hk, d, s_q, lens, paged, page, vllm, seed=100 + i) for i in range(4)]
    plan = make_plan(cases[0], num_splits=0)
    wants = [call(c) for c in cases]
    outs = [torch.empty_like(w) for w in wants]
    for rep in range(2):     # other pointers every call, interleaved
        for c, o, w in zip(cases, outs, wants):
            o.fill_(float("nan"))
            assert run(plan, c, out=o) is o
            assert bitwise(o, w), "call on other tensors differs (rep %d)" % rep
    # a plan made for one layer serves another layer's cache of the same shape
    plan2 = make_plan(cases[1])
    assert bitwise(run(plan2, cases[3]), wants[3])


@pytest.mark.parametrize("paged", [False, True])
def test_plan_append_with_rotary(paged):
    dtype, b, hq, hk, d, s_q, s_new = torch.bfloat16, 3, 8, 2, 128, 2, 2
    lens = [40, 2, 300]
    case = make_case(dtype, b, hq, hk, d, s_q, lens, paged, 16, False, s_new=s_new, seed=11)
    g = torch.Generator(device="cpu").manual_seed(3)
    k_new = (torch.rand(b, s_new, hk, d, generator=g) * 2 - 1).cuda().to(dtype)
    v_new = (torch.rand(b, s_new, hk, d, generator=g) * 2 - 1).cuda().to(dtype)
    rd, npos = 64, max(lens) + 8
    theta = torch.arange(npos, device="cuda")[:, None] * (10000.0 ** (-torch.arange(rd // 2, device="cuda") * 2.0 / rd))
    cos, sin = theta.cos().float().contiguous(), theta.sin().float().contiguous()
    kw = dict(k=k_new, v=v_new, rotary_cos=cos, rotary_sin=sin, causal=True, num_splits=3)
    c2 = dict(case, k_cache=case["k_cache"].clone(), v_cache=case["v_cache"].clone())
    q0 = case["q"].clone()
    want = call(case, **kw)
    k_before = c2["k_cache"].clone()
    plan = make_plan(c2, **kw)
    assert bitwise(c2["k_cache"], k_before), "decode_plan wrote the cache"
    got = run(plan, c2, k=k_new, v=v_new)
    assert bitwise(got, want)
    assert torch.equal(c2["q"], q0), "q was modified"
    assert torch.equal(c2["k_cache"].nan_to_num(7.0), case["k_cache"].nan_to_num(7.0))
    assert torch.equal(c2["v_cache"].nan_to_num(7.0), case["v_cache"].nan_to_num(7.0))
    with pytest.raises(ValueError, match="k and v are required"):
        run(plan, c2)


def test_plan_fp8_number_descales():
    case = make_case(torch.bfloat16, 2, 8, 2, 128, 1, [500, 33], False, seed=5)
    case.update(k_cache=case["k_cache"].nan_to_num(0.0).to(torch.float8_e4m3fn),
                v_cache=case["v_cache"].nan_to_num(0.0).to(torch.float8_e4m3fn))
    want = call(case, k_descale=0.5, v_descale=2.0)
    plan = make_plan(case, k_descale=0.5, v_descale=2.0)
    assert bitwise(run(plan, case), want)
    kd, vd = torch.full((1,), 0.25, device="cuda"), torch.full((1,), 4.0, device="cuda")
    assert bitwise(run(plan, case, k_descale=kd, v_descale=vd), call(case, k_descale=kd, v_descale=vd))
    assert bitwise(run(plan, case), want), "a call's descales stuck to the plan"


def test_plan_sinks_per_call():
    case = make_case(torch.bfloat16, 3, 8, 2, 128, 1, [300, 1, 1030], False, seed=9)
    s1 = torch.randn(8, device="cuda")
    s2 = torch.randn(8, device="cuda")
    plan = make_plan(case, sinks=s1)
    assert bitwise(run(plan, case), call(case, sinks=s1))
    assert bitwise(run(plan, case, sinks=s2), call(case, sinks=s2))
    assert bitwise(run(plan, case), call(case, sinks=s1))


def test_plan_under_graph_capture():
    dtype, b, hq, hk, d, s_q, lens, paged, page, vllm = CASES[2]
    cases = [make_case(dtype, b, hq, hk, d, s_q, lens, paged, page, vllm, seed=40 + i) for i in range(3)]
    static = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in cases[0].items()}
    plan = make_plan(static, num_splits=4)
    assert plan.num_splits == 4 and plan.workspace_size > 0
    out = torch.empty_like(static["q"])
    run(plan, static, out=out)     # eager first: the plan's own workspace on this stream
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run(plan, static, out=out)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run(plan, static, out=out)
    for c in cases[1:] + cases[:1]:
        for name in ("q", "k_cache", "v_cache", "kv_indptr", "kv_page_indices", "kv_last_page_len", "seqlens"):
            if name in c:
                static[name].copy_(c[name])
        out.fill_(float("nan"))
        g.replay()
        # an eager call of the plan between replays must not disturb the graph's workspace
        other = run(plan, cases[1])
        torch.cuda.synchronize()
        assert bitwise(out, call(c, num_splits=4)), "graph replay differs"
        assert bitwise(other, call(cases[1], num_splits=4))


def test_plan_refuses_other_tensors():
    case = make_case(torch.bfloat16, 3, 8, 2, 128, 1, [300, 1, 1030], False, seed=1)
    plan = make_plan(case)
    out = torch.full_like(case["q"], float("nan"))
    bad = [
        (ValueError, "q has shape", dict(case, q=case["q"][:2])),
        (TypeError, "q has dtype", dict(case, q=case["q"].half())),
        (ValueError, "q has strides", dict(case, q=case["q"].transpose(0, 2).contiguous().transpose(0, 2))),
        (ValueError, "k_cache is on cpu", dict(case, k_cache=case["k_cache"].cpu())),
        (ValueError, "v_cache has shape", dict(case, v_cache=case["v_cache"][:, :-1])),
        (ValueError, "seqlens_k has shape", dict(case, seqlens=case["seqlens"][:2])),
        (TypeError, "cache_batch_idx has dtype", dict(case, cbi=case["cbi"].long())),
    ]
    for exc, msg, c in bad:
        with pytest.raises(exc, match=msg):
            run(plan, c, out=out)
    with pytest.raises(ValueError, match="out has shape"):
        run(plan, case, out=out[:, :, :4])
    with pytest.raises(ValueError, match="block_table was not given"):
        run(plan, case, block_table=torch.zeros(3, 4, dtype=torch.int32, device="cuda"))
    with pytest.raises(TypeError, match="unexpected keyword"):
        run(plan, case, seqlen_k=case["seqlens"])
    torch.cuda.synchronize()
    assert torch.isnan(out).all(), "a refused call wrote the output"
    # a misaligned q of the plan's shape and strides: the library refuses it
    buf = torch.empty(case["q"].numel() + 1, dtype=torch.bfloat16, device="cuda")
    q_mis = buf[1:].view(case["q"].shape)
    with pytest.raises(fmha_tile.FmhaError, match="aligned"):
        run(plan, dict(case, q=q_mis), out=out)
    torch.cuda.synchronize()
    assert torch.isnan(out).all()


# ---- the forward plan ------------------------------------------------------------------------------
FWD = [
    # dtype, b, s_q, s_k, hq, hk, d, kwargs
    (torch.bfloat16, 2, 1, 1000, 32, 8, 128, dict(causal=True)),
    (torch.float16, 3, 77, 301, 8, 2, 64, dict(window=(32, 0), softcap=30.0, return_lse=True)),
    (torch.bfloat16, 1, 128, 128, 16, 16, 256, dict(causal=True, sinks=True)),
]


@pytest.mark.parametrize("cfg", FWD, ids=lambda c: "%dx%dx%dx%d_d%d" % (c[1], c[2], c[3], c[4], c[6]))
def test_forward_plan_bitwise_as_attention(cfg):
    dtype, b, s_q, s_k, hq, hk, d, kw = cfg
    kw = dict(kw)
    g = torch.Generator(device="cpu").manual_seed(s_k)

    def rnd(*s):
        return (torch.rand(*s, generator=g) * 2 - 1).cuda().to(dtype)

    sets = [(rnd(b, s_q, hq, d), rnd(b, s_k, hk, d), rnd(b, s_k, hk, d)) for _ in range(3)]
    if kw.pop("sinks", False):
        kw["sinks"] = torch.randn(hq, device="cuda")
    with torch.no_grad():
        plan = fmha_tile.forward_plan(*sets[0], **kw)
        if "sinks" not in kw:   # attention_plan() takes no sinks
            want_plan = fmha_tile.attention_plan(*sets[0], **{n: x for n, x in kw.items() if n != "return_lse"})
            assert plan.info["kernel"] == want_plan["kernel"]
        for rep in range(2):
            for q, k, v in sets:
                want = fmha_tile.attention(q, k, v, **kw)
                got = plan.run(q, k, v)
                if kw.get("return_lse"):
                    assert bitwise(got[0], want[0]) and bitwise(got[1], want[1])
                else:
                    assert bitwise(got, want)
        if "sinks" in kw:
            s2 = torch.randn(hq, device="cuda")
            kw2 = dict(kw, sinks=s2)
            assert bitwise(plan.run(*sets[1], sinks=s2), fmha_tile.attention(*sets[1], **kw2))
            assert bitwise(plan.run(*sets[1]), fmha_tile.attention(*sets[1], **kw))


def test_forward_plan_refusals():
    q = torch.randn(2, 1, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 100, 2, 128, device="cuda", dtype=torch.bfloat16)
    plan = fmha_tile.forward_plan(q, k, k)
    out = torch.full_like(q, float("nan"))
    with pytest.raises(ValueError, match="k has shape"):
        plan.run(q, k[:, :99], k, out=out)
    with pytest.raises(TypeError, match="v has dtype"):
        plan.run(q, k, k.half(), out=out)
    with pytest.raises(ValueError, match="k has strides"):
        plan.run(q, k.transpose(1, 2).contiguous().transpose(1, 2), k, out=out)
    qg = q.clone().requires_grad_()
    with pytest.raises(ValueError, match="requires grad"):
        plan.run(qg, k, k, out=out)
    torch.cuda.synchronize()
    assert torch.isnan(out).all()
    with torch.no_grad():
        assert bitwise(plan.run(qg, k, k), fmha_tile.attention(q, k, k))
