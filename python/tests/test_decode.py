"""GPU tests of fmha_tile.attention_with_kvcache (decode with split-KV, append
and rotary embedding) against PyTorch on the same tensors.

Each case fills a cache (contiguous with cache_batch_idx, or NHD pages in
shuffled order under SGLang's or vLLM's table), runs the call, and compares
with a float32 softmax attention computed with torch on every
sequence's keys gathered from the cache; for the append cases the reference
first writes the new rows (turned by rotary embedding computed here with
torch) into a copy of the cache, and the test also checks that the library
wrote the same rows into the real cache and left q unchanged. Tolerances
as the forward tests (bf16 1e-2, fp16 2e-3 rel-L2; LSE 2e-3). Skips cleanly
without torch, a GPU or the library.
"""
import random

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import fmha_tile  # noqa: E402

from test_attention import TOL, LSE_TOL  # noqa: E402

DEV = "cuda"


def rel_l2(got, ref):
    return ((got.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)).item()


def rotate(x, cos, sin, pos, interleaved):
    """x [..., d] float32 at positions pos (a tensor broadcast over x's leading dims)."""
    r = 2 * cos.shape[1]
    c, s = cos[pos], sin[pos]            # [..., r/2]
    y = x.clone()
    if interleaved:
        a, b = x[..., 0:r:2], x[..., 1:r:2]
        y[..., 0:r:2], y[..., 1:r:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., : r // 2], x[..., r // 2: r]
        y[..., : r // 2], y[..., r // 2: r] = a * c - b * s, a * s + b * c
    return y


def reference(q, ks, vs, causal, scale):
    """q [b, s_q, hq, d]; ks, vs: per sequence [s_k, hk, d] -> out, lse."""
    b, s_q, hq, d = q.shape
    outs, lses = [], []
    for i in range(b):
        k, v = ks[i].float(), vs[i].float()
        s_k, hk = k.shape[0], k.shape[1]
        qq = q[i].float().transpose(0, 1)                         # [hq, s_q, d]
        kk = k.transpose(0, 1).repeat_interleave(hq // hk, 0)     # [hq, s_k, d]
        vv = v.transpose(0, 1).repeat_interleave(hq // hk, 0)
        sc = (qq @ kk.transpose(1, 2)) * scale
        if causal:
            qi = torch.arange(s_q, device=DEV)[:, None]
            kj = torch.arange(s_k, device=DEV)[None, :]
            sc = sc.masked_fill(kj > qi + s_k - s_q, float("-inf"))
        lse = torch.logsumexp(sc, -1)
        p = torch.softmax(sc, -1).nan_to_num(0.0)
        outs.append((p @ vv).transpose(0, 1))
        lses.append(lse)
    return torch.stack(outs), torch.stack(lses)


def make_case(dtype, b, hq, hk, d, s_q, lens, paged, page=16, vllm=False, s_new=0, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    rnd = lambda *s: (torch.rand(*s, generator=g) * 2 - 1).to(DEV)  # noqa: E731
    q = rnd(b, s_q, hq, d).to(dtype)
    cap = max(lens) + 5
    case = {"q": q, "lens": lens, "paged": paged}
    if not paged:
        nb = b + 2
        kc = torch.full((nb, cap, hk, d), float("nan"), device=DEV).to(dtype)
        vc = kc.clone()
        cbi = torch.tensor([(3 * i + 1) % nb for i in range(b)], dtype=torch.int32, device=DEV)
        rows = [[(int(cbi[i]), t) for t in range(lens[i])] for i in range(b)]
        case.update(cbi=cbi)
    else:
        npg = [(n + page - 1) // page for n in lens]
        pool = sum(npg) + 3
        perm = list(range(pool))
        random.Random(seed).shuffle(perm)
        kc = torch.full((pool, page, hk, d), float("nan"), device=DEV).to(dtype)
        vc = kc.clone()
        pages, at = [], 0
        for n in npg:
            pages.append(perm[at: at + n])
            at += n
        rows = [[(pages[i][t // page], t % page) for t in range(lens[i])] for i in range(b)]
        if vllm:
            bt = torch.full((b, max(npg) + 2), -1, dtype=torch.int32)
            for i in range(b):
                bt[i, : npg[i]] = torch.tensor(pages[i], dtype=torch.int32)
            case.update(block_table=bt.to(DEV))
        else:
            case.update(kv_indptr=torch.tensor([0] + list(torch.tensor(npg).cumsum(0)), dtype=torch.int32, device=DEV),
                        kv_page_indices=torch.tensor(sum(pages, []), dtype=torch.int32, device=DEV),
                        kv_last_page_len=torch.tensor([n - (m - 1) * page for n, m in zip(lens, npg)],
                                                      dtype=torch.int32, device=DEV))
    for i in range(b):   # old keys (the new rows' slots keep NaN)
        for t in range(lens[i] - s_new):
            e, r = rows[i][t]
            kc[e, r] = rnd(hk, d).to(dtype)
            vc[e, r] = rnd(hk, d).to(dtype)
    case.update(k_cache=kc, v_cache=vc, rows=rows,
                seqlens=torch.tensor(lens, dtype=torch.int32, device=DEV))
    return case


def gather(case, kc, vc):
    ks = [torch.stack([kc[e, r] for e, r in rows]) for rows in case["rows"]]
    vs = [torch.stack([vc[e, r] for e, r in rows]) for rows in case["rows"]]
    return ks, vs


def call(case, **kw):
    extra = {}
    for name in ("kv_indptr", "kv_page_indices", "kv_last_page_len", "block_table"):
        if name in case:
            extra[name] = case[name]
    if case["paged"]:
        extra["max_seqlen_k"] = max(case["lens"])
    else:
        extra["cache_batch_idx"] = case["cbi"]
    seqlens = None if "kv_indptr" in case else case["seqlens"]
    return fmha_tile.attention_with_kvcache(case["q"], case["k_cache"], case["v_cache"], seqlens, **extra, **kw)


CASES = [
    # dtype, b, hq, hk, d, s_q, lens, paged, page, vllm
    (torch.bfloat16, 3, 8, 2, 128, 1, [300, 1, 1030], False, 0, False),
    (torch.float16, 2, 16, 16, 64, 4, [77, 513], False, 0, False),
    (torch.bfloat16, 4, 32, 8, 128, 1, [4100, 7, 64, 65], True, 16, False),
    (torch.bfloat16, 3, 8, 1, 256, 2, [200, 33, 2], True, 1, True),
    (torch.float16, 2, 8, 4, 128, 3, [1000, 17], True, 64, True),
]


@pytest.mark.parametrize("splits", [0, 1, 5])
@pytest.mark.parametrize("cfg", CASES, ids=lambda c: "x".join(str(x) for x in c[1:7]) + ("_paged" if c[7] else ""))
def test_decode_matches_reference(cfg, splits):
    dtype, b, hq, hk, d, s_q, lens, paged, page, vllm = cfg
    case = make_case(dtype, b, hq, hk, d, s_q, lens, paged, page, vllm, seed=b * 7 + d)
    causal = s_q > 1
    out, lse = call(case, causal=causal, num_splits=splits, return_lse=True)
    ks, vs = gather(case, case["k_cache"], case["v_cache"])
    ref, ref_lse = reference(case["q"], ks, vs, causal, d ** -0.5)
    assert torch.isfinite(out).all()
    assert rel_l2(out, ref) <= TOL[dtype]
    assert (lse - ref_lse).abs().max().item() <= LSE_TOL


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("paged", [False, True])
def test_append_with_rotary(paged, interleaved):
    dtype, b, hq, hk, d, s_q, s_new = torch.bfloat16, 3, 8, 2, 128, 2, 2
    lens = [40, 2, 300]
    case = make_case(dtype, b, hq, hk, d, s_q, lens, paged, 16, False, s_new=s_new, seed=11)
    g = torch.Generator(device="cpu").manual_seed(3)
    k_new = (torch.rand(b, s_new, hk, d, generator=g) * 2 - 1).to(DEV).to(dtype)
    v_new = (torch.rand(b, s_new, hk, d, generator=g) * 2 - 1).to(DEV).to(dtype)
    rd, npos = 64, max(lens) + 8   # the contiguous cache holds max(lens) + 5 tokens
    theta = torch.arange(npos, device=DEV)[:, None] * (10000.0 ** (-torch.arange(rd // 2, device=DEV) * 2.0 / rd))
    cos, sin = theta.cos().float().contiguous(), theta.sin().float().contiguous()
    q0 = case["q"].clone()
    # the reference: rotated new rows written into a copy of the cache
    kc, vc = case["k_cache"].clone(), case["v_cache"].clone()
    q_rot = case["q"].float().clone()
    for i in range(b):
        pos = torch.arange(lens[i] - s_new, lens[i], device=DEV)
        kr = rotate(k_new[i].float(), cos, sin, pos[:, None], interleaved).to(dtype)
        for j in range(s_new):
            e, r = case["rows"][i][lens[i] - s_new + j]
            kc[e, r], vc[e, r] = kr[j], v_new[i, j]
        qpos = torch.arange(lens[i] - s_q, lens[i], device=DEV)
        q_rot[i] = rotate(q_rot[i], cos, sin, qpos[:, None], interleaved)
    out = call(case, k=k_new, v=v_new, rotary_cos=cos, rotary_sin=sin, rotary_interleaved=interleaved,
               causal=True, num_splits=3)
    assert torch.equal(case["q"], q0), "q was modified"
    ks_got, vs_got = gather(case, case["k_cache"], case["v_cache"])
    ks_ref, vs_ref = gather(case, kc, vc)
    for i in range(b):
        assert torch.equal(vs_got[i], vs_ref[i])
        assert (ks_got[i].float() - ks_ref[i].float()).abs().max().item() <= 1e-2
    ref, _ = reference(q_rot.to(dtype), ks_got, vs_got, True, d ** -0.5)
    assert rel_l2(out, ref) <= TOL[dtype]


def test_fp8_cache_per_tensor():
    case = make_case(torch.bfloat16, 2, 8, 2, 128, 1, [500, 33], False, seed=5)
    k8 = case["k_cache"].nan_to_num(0.0).to(torch.float8_e4m3fn)
    v8 = case["v_cache"].nan_to_num(0.0).to(torch.float8_e4m3fn)
    ks, vs = 0.5, 2.0
    case.update(k_cache=k8, v_cache=v8)
    out = call(case, k_descale=ks, v_descale=vs)
    kd, vd = gather(case, k8.float() * ks, v8.float() * vs)
    ref, _ = reference(case["q"], kd, vd, False, 128 ** -0.5)
    assert out.dtype == torch.bfloat16
    assert rel_l2(out, ref) <= TOL[torch.bfloat16]


@pytest.mark.parametrize("paged", [False, True])
def test_fp8_cache_append(paged):
    """bf16 k / v appended into an e4m3 cache: K turned then stored as
    e4m3(k / descale) (within one e4m3 step of torch's rounding of the same),
    V exactly torch's e4m3(v * (1 / descale)), the attention on the result."""
    b, hq, hk, d, s_new = 3, 8, 2, 128, 1
    lens = [40, 1, 300]
    case = make_case(torch.bfloat16, b, hq, hk, d, 1, lens, paged, 16, True, s_new=s_new, seed=13)
    k8 = case["k_cache"].nan_to_num(0.0).to(torch.float8_e4m3fn)
    v8 = case["v_cache"].nan_to_num(0.0).to(torch.float8_e4m3fn)
    case.update(k_cache=k8, v_cache=v8)
    ks, vs = 0.37, 1.9
    g = torch.Generator(device="cpu").manual_seed(4)
    k_new = (torch.rand(b, s_new, hk, d, generator=g) * 2 - 1).to(DEV).to(torch.bfloat16)
    v_new = (torch.rand(b, s_new, hk, d, generator=g) * 2 - 1).to(DEV).to(torch.bfloat16)
    rd, npos = 128, max(lens) + 8
    theta = torch.arange(npos, device=DEV)[:, None] * (10000.0 ** (-torch.arange(rd // 2, device=DEV) * 2.0 / rd))
    cos, sin = theta.cos().float().contiguous(), theta.sin().float().contiguous()
    k_before, v_before = k8.clone(), v8.clone()
    out = call(case, k=k_new, v=v_new, rotary_cos=cos, rotary_sin=sin, rotary_interleaved=True,
               k_descale=ks, v_descale=vs, num_splits=2)
    kc_ref, vc_ref = k_before.float(), v_before.float()
    for i in range(b):
        pos = torch.arange(lens[i] - s_new, lens[i], device=DEV)
        kr = rotate(k_new[i].float(), cos, sin, pos[:, None], True)
        for j in range(s_new):
            e, r = case["rows"][i][lens[i] - s_new + j]
            got = k8[e, r].float() * ks
            assert (got - kr[j]).abs().le(kr[j].abs() / 8 + ks / 512).all(), "new K row off"
            vinv = torch.ones((), device=DEV) / torch.tensor(vs, device=DEV)   # fp32, as the kernel
            assert torch.equal(v8[e, r].view(torch.uint8),
                               (v_new[i, j].float() * vinv).to(torch.float8_e4m3fn).view(torch.uint8))
            kc_ref[e, r], vc_ref[e, r] = k8[e, r].float(), v8[e, r].float()
    # nothing else of the cache changed
    assert torch.equal(k8.float().nan_to_num(7.0), kc_ref.nan_to_num(7.0))
    assert torch.equal(v8.float().nan_to_num(7.0), vc_ref.nan_to_num(7.0))
    q_rot = case["q"].float().clone()
    for i in range(b):
        q_rot[i] = rotate(q_rot[i], cos, sin, torch.arange(lens[i] - 1, lens[i], device=DEV)[:, None], True)
    kd, vd = gather(case, k8.float() * ks, v8.float() * vs)
    ref, _ = reference(q_rot.to(torch.bfloat16), kd, vd, False, d ** -0.5)
    assert rel_l2(out, ref) <= TOL[torch.bfloat16]


def test_plan_and_graph():
    case = make_case(torch.bfloat16, 1, 32, 8, 128, 1, [8192], False, seed=2)
    plan = call(case, plan_only=True)
    assert plan["num_splits"] > 1 and plan["workspace_size"] > 0 and plan["combine"]
    assert plan["kernel"].startswith("fmha_decode_d128_bf16")
    eager = call(case, num_splits=plan["num_splits"])
    graph, out = torch.cuda.CUDAGraph(), None
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call(case)  # warm-up on the side stream
        with torch.cuda.graph(graph):
            out = call(case, num_splits=plan["num_splits"])
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)


def test_bad_input():
    case = make_case(torch.bfloat16, 2, 8, 2, 128, 1, [10, 20], False, seed=1)
    with pytest.raises(ValueError):
        call(case, num_splits=129)
    with pytest.raises(fmha_tile.FmhaError):
        cos = torch.zeros(25, 12, device=DEV)   # rotary_dim 24: not a multiple of 16
        call(case, rotary_cos=cos, rotary_sin=cos)
    with pytest.raises(ValueError):
        fmha_tile.attention_with_kvcache(case["q"], case["k_cache"], case["v_cache"], None)
