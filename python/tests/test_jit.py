"""GPU tests of kernel sets declared from Python (fmha_tile.KernelSet, jit.py):
sets built with nvcc for the current GPU (or $FMHA_TILE_ARCHS) into a
temporary cache, then used through kernels= by attention (forward, plan,
backward), batch_prefill and attention_with_kvcache, against fp32
references. Skipped without torch, a CUDA GPU, the default library
(the shared helpers of test_decode / test_prefill need it), nvcc or a C
compiler. The host-side parts (rows, generated sources, validation, cache
keys, build orchestration) are python/tests/test_jit_host.py.
"""
import random

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import fmha_tile  # noqa: E402
from fmha_tile import _lib, jit  # noqa: E402

try:
    jit.find_nvcc()
    jit.find_cc()
    ARCHS = jit.default_archs()
except jit.FmhaBuildError as e:
    pytest.skip(str(e), allow_module_level=True)

from test_attention import TOL  # noqa: E402
from test_decode import make_case, gather, call, reference as decode_reference, rel_l2  # noqa: E402
from test_prefill import make_cache, reference as prefill_reference  # noqa: E402

ANY = fmha_tile.ANY
DEV = "cuda"
BF16 = torch.bfloat16
ONE_ROW = ("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 1)
ONE_ROW_NAME = "fmha_fwd_d128_bf16_mask_nsoftcap_nalibi_b128x64_w4_s1_portable_mma_sm80"
IS_SM90 = torch.cuda.get_device_capability() == (9, 0) and "sm_90a" in ARCHS


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fmha_jit_cache"))


def build(rows, cache):
    return fmha_tile.KernelSet(rows).build(archs=ARCHS, cache=cache)


def dense_reference(q, k, v, causal):
    """q [b, s_q, h, d], k, v [b, s_k, hk, d] -> out [b, s_q, h, d] (fp32)."""
    out, _ = decode_reference(q, list(k), list(v), causal, q.shape[-1] ** -0.5)
    return out


def qkv(b=2, sq=300, sk=333, h=8, hk=2, d=128, dtype=BF16, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(DEV, dtype)  # noqa: E731
    return mk(b, sq, h, d), mk(b, sk, hk, d), mk(b, sk, hk, d)


def test_one_row_builds_and_runs(cache, monkeypatch):
    monkeypatch.setenv("FMHA_TILE_CACHE", cache)     # kernels=KernelSet builds into the default cache
    lib = build([ONE_ROW], cache)
    assert isinstance(lib, fmha_tile.Library)
    info = fmha_tile.kernels(kernels=lib)
    assert info["set"].startswith("fmha_jit_") and [k["name"] for k in info["kernels"]] == [ONE_ROW_NAME]
    q, k, v = qkv()
    plan = fmha_tile.attention_plan(q, k, v, causal=True, kernels=lib)
    assert plan["kernel"] == ONE_ROW_NAME and plan["pipeline"] == "portable_mma"
    out = fmha_tile.attention(q, k, v, causal=True, kernels=lib)
    assert torch.isfinite(out).all()
    assert rel_l2(out, dense_reference(q, k, v, True)) <= TOL[BF16]
    # the KernelSet itself as kernels=: built on first use (here: the cache), then reused
    ks = fmha_tile.KernelSet([ONE_ROW])
    out2 = fmha_tile.attention(q, k, v, causal=True, kernels=ks)
    assert torch.equal(out, out2)
    assert ks.build() is ks.build() is lib


def test_second_build_is_a_cache_hit(cache, monkeypatch):
    first = build([ONE_ROW], cache)

    def no_compiler(cmd, cwd):
        raise AssertionError("nvcc called on a cache hit: %s" % " ".join(cmd))

    def no_compiler_query(cmd):
        raise AssertionError("nvcc asked on a cache hit: %s" % " ".join(cmd))

    monkeypatch.setattr(jit, "_run_cmd", no_compiler)
    monkeypatch.setattr(jit, "_built", {})            # past the process-wide memo: the disk cache
    monkeypatch.setattr(jit, "_tool_output", no_compiler_query)   # nor nvcc --version
    again = fmha_tile.KernelSet([jit.row_text(ONE_ROW), ONE_ROW]).build(archs=ARCHS, cache=cache)
    assert again.path == first.path and again is first     # a library is loaded once


def test_changed_row_rebuilds(cache):
    first = build([ONE_ROW], cache)
    changed = ONE_ROW[:9] + (2,)
    lib = build([changed], cache)
    assert lib.path != first.path
    q, k, v = qkv(seed=1)
    plan = fmha_tile.attention_plan(q, k, v, kernels=lib)
    assert plan["kernel"] == ONE_ROW_NAME.replace("_s1_", "_s2_") and plan["stages"] == 2
    out = fmha_tile.attention(q, k, v, kernels=lib)
    assert rel_l2(out, dense_reference(q, k, v, False)) <= TOL[BF16]


def test_invalid_row_raises_with_the_constraint(cache):
    with pytest.raises(fmha_tile.InvalidRowError) as ei:
        build([ONE_ROW[:6] + (100, 64, 4, 1)], cache)
    assert ei.value.constraint == "tile_m_16_or_32_rows_per_warp"
    assert "tile_m must be 16*warps or 32*warps" in str(ei.value)


def test_problem_outside_the_set(cache):
    lib = build([ONE_ROW], cache)
    q, k, v = qkv(dtype=torch.float16)
    with pytest.raises(fmha_tile.FmhaError) as ei:
        fmha_tile.attention(q, k, v, kernels=lib)
    assert ei.value.status == _lib.FMHA_ERR_NO_KERNEL
    assert "fmha_jit_" in ei.value.message        # the error comes from the set's own library
    with pytest.raises(ValueError, match="no kernel set of that name"):
        fmha_tile.attention(q, k, v, kernels="FWD")
    with pytest.raises(TypeError, match="kernels must be"):
        fmha_tile.attention(q, k, v, kernels=3)


def test_varlen_through_the_set(cache):
    lib = build([ONE_ROW], cache)
    q, k, v = qkv(b=1, sq=150, sk=190, seed=7)
    cu_q = torch.tensor([0, 60, 150], dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0, 100, 190], dtype=torch.int32, device=DEV)
    plan = fmha_tile.attention_varlen_plan(q[0], k[0], v[0], cu_q, cu_k, 90, 100, causal=True,
                                           kernels=lib)
    assert plan["kernel"] == ONE_ROW_NAME
    out = fmha_tile.attention_varlen(q[0], k[0], v[0], cu_q, cu_k, 90, 100, causal=True, kernels=lib)
    for (a, b), (c, e) in (((0, 60), (0, 100)), ((60, 150), (100, 190))):
        want = dense_reference(q[:, a:b], k[:, c:e], v[:, c:e], True)[0]
        assert rel_l2(out[a:b], want) <= TOL[BF16]


def test_wildcard_row_takes_the_fast_pipeline(cache):
    lib = build([ONE_ROW[:6] + (ANY,) * 4], cache)
    q, k, v = qkv(seed=2)
    plan = fmha_tile.attention_plan(q, k, v, causal=True, kernels=lib)
    assert plan["pipeline"] == ("wgmma" if IS_SM90 else "portable_mma"), plan
    out = fmha_tile.attention(q, k, v, causal=True, kernels=lib)
    assert rel_l2(out, dense_reference(q, k, v, True)) <= TOL[BF16]


def test_backward_through_the_set(cache):
    rows = [(fam, "BF16", 128, mask, "NOSOFTCAP", "NOALIBI") + (ANY,) * 4
            for fam, mask in (("FWD", "MASK"), ("BWD", "MASK"), ("BWD_DOT_DO_O", "NOMASK"),
                              ("BWD_CONVERT_DQ", "NOMASK"))]
    lib = build(rows, cache)
    q, k, v = (t.requires_grad_() for t in qkv(sq=200, sk=260, seed=3))
    out = fmha_tile.attention(q, k, v, causal=True, kernels=lib)
    dout = torch.randn_like(out)
    out.backward(dout)
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref = dense_reference(qf, kf, vf, True)
    ref.backward(dout.float())
    for got, want in ((q.grad, qf.grad), (k.grad, kf.grad), (v.grad, vf.grad)):
        assert rel_l2(got, want) <= TOL[BF16]
    # the default set has the same rows: the forward agrees with it bitwise when
    # both pick the same kernel (the plans name it)
    with torch.no_grad():
        if fmha_tile.attention_plan(q, k, v, causal=True, kernels=lib)["kernel"] == \
                fmha_tile.attention_plan(q, k, v, causal=True)["kernel"]:
            assert torch.equal(fmha_tile.attention(q, k, v, causal=True, kernels=lib),
                               fmha_tile.attention(q, k, v, causal=True))


def test_prefill_and_decode_through_the_set(cache):
    rows = [("PREFILL", "BF16", 128, "MASK", "NOSOFTCAP", 16, ANY, ANY, ANY, ANY),
            ("DECODE", "BF16", 128, "MASK", "SOFTCAP", ANY, ANY, ANY, ANY, ANY)]
    lib = build(rows, cache)
    # batch prefill, SGLang pages of 16
    s_qs, s_ks, h, hk, d = [37, 5], [100, 70], 8, 2, 128
    kc, vc, lists, Ks, Vs = make_cache(s_ks, 16, hk, d, BF16, "NHD", seed=4)
    g = torch.Generator(device="cpu").manual_seed(5)
    qs = [torch.randn(s, h, d, generator=g).to(BF16) for s in s_qs]
    q = torch.cat(qs).to(DEV)
    cu_q = torch.tensor([0, s_qs[0], sum(s_qs)], dtype=torch.int32, device=DEV)
    indptr = torch.tensor([0, len(lists[0]), len(lists[0]) + len(lists[1])], dtype=torch.int32, device=DEV)
    indices = torch.tensor(lists[0] + lists[1], dtype=torch.int32, device=DEV)
    last = torch.tensor([s - (len(p) - 1) * 16 for s, p in zip(s_ks, lists)], dtype=torch.int32, device=DEV)
    kw = dict(kv_indptr=indptr, kv_page_indices=indices, kv_last_page_len=last, causal=True)
    plan = fmha_tile.batch_prefill_plan(q, kc, vc, cu_q, max(s_qs), kernels=lib, **kw)
    assert plan["page_size"] >= 16
    out = fmha_tile.batch_prefill(q, kc, vc, cu_q, max(s_qs), kernels=lib, **kw)
    ref, _ = prefill_reference(qs, Ks, Vs, True, None, d ** -0.5)
    assert rel_l2(out, ref) <= TOL[BF16]
    # decode over a contiguous cache
    random.seed(6)
    case = make_case(BF16, 3, 8, 2, 128, 1, [300, 1, 77], False, seed=6)
    dplan = call(case, kernels=lib, plan_only=True)
    assert dplan["kernel"].startswith("fmha_decode_d128_bf16_")
    got = call(case, kernels=lib)
    ks_, vs_ = gather(case, case["k_cache"], case["v_cache"])
    want, _ = decode_reference(case["q"], ks_, vs_, False, 128 ** -0.5)
    assert rel_l2(got, want) <= TOL[BF16]
    # a set without decode rows says so
    lib1 = build([ONE_ROW], cache)
    with pytest.raises(fmha_tile.FmhaError) as ei:
        call(case, kernels=lib1)
    assert ei.value.status == _lib.FMHA_ERR_NO_KERNEL

