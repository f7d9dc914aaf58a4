"""GPU tests of fmha_tile.ops: the entry points as torch.library custom ops.

For each op (fwd, fwd_varlen, bwd, bwd_varlen, batch_prefill, decode,
decode_append):
  - eager: the op gives bitwise the same result as the package's ctypes
    function it wraps (the same kernel on the same inputs);
  - torch.library.opcheck (schema, fake tensor, autograd registration, AOT
    dispatch with dynamic shapes; with inputs that require grad for the
    forward ops, so the backward op is checked through the autograd formula);
  - torch.compile(fullgraph=True) of a small function around it: the same
    output as eager, and no graph break (torch._dynamo.explain);
  - CUDA graph capture and replay (forward ops): the replay equals eager on
    new inputs copied into the captured buffers;
  - gradients through a compiled module (projections around the op, GQA,
    dense / varlen / sinks) equal eager ones within rounding (the op and its
    deterministic backward are the same calls; the compiled projections may
    round differently).
Sizes are small (the whole file runs in well under a minute on an H100, most
of it compile time). Skips cleanly without torch >= 2.4, a GPU or the library.
"""
import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

if not hasattr(torch.library, "custom_op") or not hasattr(torch.library, "opcheck"):
    pytest.skip("fmha_tile.ops needs torch >= 2.4 (torch.library.custom_op), found %s"
                % torch.__version__, allow_module_level=True)

import torch._dynamo  # noqa: E402

import fmha_tile  # noqa: E402
from fmha_tile import ops  # noqa: E402

DEV = "cuda"
BF16, FP16 = torch.bfloat16, torch.float16

try:
    import triton  # noqa: F401
    HAVE_INDUCTOR = True
except ImportError:
    HAVE_INDUCTOR = False
needs_inductor = pytest.mark.skipif(not HAVE_INDUCTOR, reason="inductor needs triton")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(4321)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def rand(*shape, dtype=BF16):
    return torch.randn(*shape, dtype=dtype, device=DEV)


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def no_graph_breaks(fn, *args):
    """Run fn under torch._dynamo.explain: one graph, no break."""
    torch._dynamo.reset()
    ex = torch._dynamo.explain(fn)(*args)
    assert ex.graph_break_count == 0, ex.break_reasons
    assert ex.graph_count == 1, ex.graph_count
    torch._dynamo.reset()


# ---- small cases -------------------------------------------------------------------------------
def dense_case(b=2, s_q=37, s_k=61, h=4, hk=2, d=64, dtype=BF16):
    return rand(b, s_q, h, d, dtype=dtype), rand(b, s_k, hk, d, dtype=dtype), \
        rand(b, s_k, hk, d, dtype=dtype)


LENS_Q = [5, 0, 33, 17]
LENS_K = [9, 3, 40, 17]


def prefix(lens):
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32, device=DEV)


def varlen_case(h=4, hk=2, d=64, dtype=BF16):
    q = rand(sum(LENS_Q), h, d, dtype=dtype)
    k = rand(sum(LENS_K), hk, d, dtype=dtype)
    v = rand(sum(LENS_K), hk, d, dtype=dtype)
    return q, k, v, prefix(LENS_Q), prefix(LENS_K), max(LENS_Q), max(LENS_K)


def paged_case(lens_q=(7, 1, 20), lens_k=(30, 5, 44), page=16, h=4, hk=2, d=64, dtype=BF16):
    """q packed [total_q, h, d] over NHD pages (shuffled) with a vLLM block table."""
    counts = [(n + page - 1) // page for n in lens_k]
    pool = sum(counts) + 2
    perm = torch.randperm(pool).tolist()
    table = torch.zeros(len(lens_k), max(counts) + 1, dtype=torch.int32)
    at = 0
    for i, c in enumerate(counts):
        table[i, :c] = torch.tensor(perm[at:at + c], dtype=torch.int32)
        at += c
    return dict(q=rand(sum(lens_q), h, d, dtype=dtype),
                k_cache=rand(pool, page, hk, d, dtype=dtype), v_cache=rand(pool, page, hk, d, dtype=dtype),
                cu_seqlens_q=prefix(lens_q), max_seqlen_q=max(lens_q), block_table=table.to(DEV),
                seqlens_k=torch.tensor(lens_k, dtype=torch.int32, device=DEV))


def cache_case(b=3, s_q=1, cap=96, h=8, hk=2, d=64, lens=(50, 1, 90), s_new=0, dtype=BF16):
    """A contiguous cache [b, cap, hk, d]; lens count the keys after an append of s_new rows."""
    c = dict(q=rand(b, s_q, h, d, dtype=dtype), k_cache=rand(b, cap, hk, d, dtype=dtype),
             v_cache=rand(b, cap, hk, d, dtype=dtype),
             seqlens_k=torch.tensor(lens, dtype=torch.int32, device=DEV))
    if s_new:
        c.update(k=rand(b, s_new, hk, d, dtype=dtype), v=rand(b, s_new, hk, d, dtype=dtype))
    return c


# ---- registration and eager equality ------------------------------------------------------------
def test_registered():
    for name in ("fwd", "fwd_varlen", "bwd", "bwd_varlen", "batch_prefill", "decode", "decode_append",
                 "fp8_v_kmajor"):
        assert hasattr(torch.ops.fmha_tile, name), name
    assert fmha_tile.ops is ops


def test_eager_equals_package():
    q, k, v = dense_case()
    sl = torch.linspace(0.1, 0.5, 4, device=DEV)
    for kw in (dict(causal=True), dict(window=(8, 3), softcap=20.0), dict(alibi_slopes=sl),
               dict(sinks=torch.randn(4, device=DEV))):
        a = ops.attention(q, k, v, return_lse=True, **kw)
        b = fmha_tile.attention(q, k, v, return_lse=True, **kw)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), kw
    q, k, v, cq, ck, mq, mk = varlen_case()
    a = ops.attention_varlen(q, k, v, cq, ck, mq, mk, causal=True, return_lse=True)
    b = fmha_tile.attention_varlen(q, k, v, cq, ck, mq, mk, causal=True, return_lse=True)
    n = int(cq[-1])
    assert torch.equal(a[0][:n], b[0][:n]) and torch.equal(a[1][:, :n], b[1][:, :n])
    c = paged_case()
    args = (c["q"], c["k_cache"], c["v_cache"], c["cu_seqlens_q"], c["max_seqlen_q"])
    kw = dict(block_table=c["block_table"], seqlens_k=c["seqlens_k"], causal=True, return_lse=True)
    a, b = ops.batch_prefill(*args, **kw), fmha_tile.batch_prefill(*args, **kw)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = cache_case()
    a = ops.attention_with_kvcache(c["q"], c["k_cache"], c["v_cache"], c["seqlens_k"], return_lse=True)
    b = fmha_tile.attention_with_kvcache(c["q"], c["k_cache"], c["v_cache"], c["seqlens_k"],
                                         return_lse=True)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert ops.attention_with_kvcache(c["q"], c["k_cache"], c["v_cache"], c["seqlens_k"]).shape == \
        c["q"].shape
    c = cache_case(s_q=2, s_new=2, lens=(50, 2, 90))
    kc, vc = c["k_cache"].clone(), c["v_cache"].clone()
    a = ops.attention_with_kvcache(c["q"], c["k_cache"], c["v_cache"], c["seqlens_k"], c["k"], c["v"],
                                   causal=True)
    b = fmha_tile.attention_with_kvcache(c["q"], kc, vc, c["seqlens_k"], c["k"], c["v"], causal=True)
    assert torch.equal(a, b) and torch.equal(c["k_cache"], kc) and torch.equal(c["v_cache"], vc)
    # the appended rows are in the cache
    assert torch.equal(kc[0, 48:50], c["k"][0]) and torch.equal(vc[2, 88:90], c["v"][2])


def test_eager_grads_equal_package():
    q, k, v = dense_case(dtype=FP16)
    sinks = torch.randn(4, device=DEV)
    dout = rand(*q.shape, dtype=FP16)
    grads = []
    for fn in (ops.attention, fmha_tile.attention):
        xs = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
        o = fn(xs[0], xs[1], xs[2], causal=True, sinks=xs[3], deterministic=True)
        o.backward(dout)
        grads.append([o.detach()] + [t.grad for t in xs])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_errors_pass_through():
    q, k, v = dense_case()
    with pytest.raises(ValueError, match="multiple of the number of KV heads"):
        ops.attention(rand(2, 37, 5, 64), k, v)
    with pytest.raises(TypeError):
        ops.attention(q, k, v, kernels=object())
    x = rand(1, 16, 2, 264)
    with pytest.raises(fmha_tile.FmhaError, match="head dim 264"):   # refused by the library
        ops.attention(x, x, x)


# ---- opcheck -----------------------------------------------------------------------------------
def _req(*ts):
    return [t.requires_grad_() for t in ts]


def sample_fwd():
    q, k, v = _req(*dense_case(b=1, s_q=17, s_k=33, h=2, hk=1))
    return torch.ops.fmha_tile.fwd.default, (q, k, v, True, -1, -1, 0.0, None, None, None, True,
                                             None, None, None, None)


def sample_fwd_sinks_window():
    q, k, v = _req(*dense_case(b=2, s_q=9, s_k=20, h=4, hk=2, dtype=FP16))
    sinks = torch.randn(4, device=DEV).requires_grad_()
    return torch.ops.fmha_tile.fwd.default, (q, k, v, False, 5, 2, 10.0, None, 0.2, sinks, True,
                                             None, None, None, None)


def sample_fwd_bias():
    # a [1, h, s_q, s_k] fp32 bias that requires grad: its gradient summed over the batch
    q, k, v = _req(*dense_case(b=2, s_q=9, s_k=20, h=4, hk=2, dtype=FP16))
    bias = torch.randn(1, 4, 9, 20, device=DEV).requires_grad_()
    return torch.ops.fmha_tile.fwd.default, (q, k, v, True, -1, -1, 0.0, None, None, None, True,
                                             None, None, None, None, 0.0, 0, 0, None, bias)


def sample_fwd_varlen():
    q, k, v, cq, ck, mq, mk = varlen_case(h=2, hk=2)
    q, k, v = _req(q, k, v)
    return torch.ops.fmha_tile.fwd_varlen.default, (q, k, v, cq, ck, mq, mk, True, -1, -1, 0.0,
                                                    None, None, None, True, None, None, None, None)


def sample_bwd():
    q, k, v = dense_case(b=1, s_q=17, s_k=33, h=2, hk=1)
    o, lse = ops.attention(q, k, v, causal=True, return_lse=True)
    return torch.ops.fmha_tile.bwd.default, (torch.randn_like(o), q, k, v, o, lse, True, -1, -1, 0.0,
                                             None, None, None, True, None)


def sample_bwd_varlen():
    q, k, v, cq, ck, mq, mk = varlen_case(h=2, hk=1)
    o, lse = ops.attention_varlen(q, k, v, cq, ck, mq, mk, return_lse=True)
    return torch.ops.fmha_tile.bwd_varlen.default, (torch.randn_like(o), q, k, v, o, lse, cq, ck, mq,
                                                    mk, False, -1, -1, 0.0, None, None, None, True,
                                                    None)


def sample_batch_prefill():
    c = paged_case()
    return torch.ops.fmha_tile.batch_prefill.default, (
        c["q"], c["k_cache"], c["v_cache"], c["cu_seqlens_q"], c["max_seqlen_q"], "NHD", None, None,
        None, c["block_table"], c["seqlens_k"], True, -1, -1, 0.0, None, None, None, None, None, True,
        None)


def sample_decode():
    c = cache_case()
    return torch.ops.fmha_tile.decode.default, (c["q"], c["k_cache"], c["v_cache"], c["seqlens_k"])


def sample_decode_append():
    c = cache_case(s_new=1)
    return torch.ops.fmha_tile.decode_append.default, (c["q"], c["k_cache"], c["v_cache"], c["k"],
                                                       c["v"], c["seqlens_k"])


SAMPLES = [sample_fwd, sample_fwd_sinks_window, sample_fwd_bias, sample_fwd_varlen, sample_bwd, sample_bwd_varlen,
           sample_batch_prefill, sample_decode, sample_decode_append]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda f: f.__name__[len("sample_"):])
def test_opcheck(sample):
    op, args = sample()
    torch.library.opcheck(op, args)


def test_fake_shapes():
    """The fake implementations alone (FakeTensorMode: nothing runs on the GPU)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q = torch.empty(2, 7, 8, 64, device=DEV, dtype=BF16)
        k = torch.empty(2, 9, 2, 64, device=DEV, dtype=BF16)
        o, lse = torch.ops.fmha_tile.fwd(q, k, k)
        assert o.shape == (2, 7, 8, 64) and lse.shape == (2, 8, 7) and lse.dtype == torch.float32
        qv = torch.empty(30, 8, 64, device=DEV, dtype=FP16)
        kv = torch.empty(40, 2, 64, device=DEV, dtype=FP16)
        cu = torch.empty(3, device=DEV, dtype=torch.int32)
        o, lse = torch.ops.fmha_tile.fwd_varlen(qv, kv, kv, cu, cu, 20, 20)
        assert o.shape == (30, 8, 64) and o.dtype == FP16 and lse.shape == (8, 30)
        dq, dk, dv, ds, db = torch.ops.fmha_tile.bwd(q, q, k, k, q, lse, False, -1, -1, 0.0, None, None,
                                                     None, False)
        assert dq.shape == q.shape and dk.shape == k.shape and ds.numel() == 0 and db.numel() == 0
        bias = torch.empty(1, 8, 7, 7, device=DEV, dtype=torch.float32)
        o, lse = torch.ops.fmha_tile.fwd(q, k, k, bias=bias)
        assert o.shape == (2, 7, 8, 64)
        dq, dk, dv, ds, db = torch.ops.fmha_tile.bwd(q, q, k, k, q, lse, False, -1, -1, 0.0, None, None,
                                                     None, False, bias=bias, want_dbias=True)
        assert db.shape == bias.shape and db.dtype == torch.float32
        kc = torch.empty(5, 16, 2, 64, device=DEV, dtype=FP16)
        o, lse = torch.ops.fmha_tile.batch_prefill(qv, kc, kc, cu, 20, "NHD", return_lse=False)
        assert o.shape == (30, 8, 64) and lse.numel() == 0
        o, lse = torch.ops.fmha_tile.decode(q, k, k, return_lse=True)
        assert o.shape == q.shape and lse.shape == (2, 8, 7)
        if hasattr(torch, "float8_e4m3fn"):
            q8 = torch.empty(2, 7, 8, 64, device=DEV, dtype=torch.float8_e4m3fn)
            assert torch.ops.fmha_tile.fwd(q8, q8, q8)[0].dtype == BF16
            v8 = torch.empty(2, 9, 2, 128, device=DEV, dtype=torch.float8_e4m3fn)
            vt = torch.ops.fmha_tile.fp8_v_kmajor(v8)
            assert vt.shape == (2, 2, 128, 16) and vt.dtype == torch.float8_e4m3fn
            q8 = torch.empty(2, 7, 8, 128, device=DEV, dtype=torch.float8_e4m3fn)
            o, _ = torch.ops.fmha_tile.fwd(q8, v8, vt, v_kmajor=True)
            assert o.shape == (2, 7, 8, 128) and o.dtype == BF16


# ---- torch.compile -------------------------------------------------------------------------------
@pytest.mark.skipif(torch.cuda.get_device_capability() != (9, 0) or not hasattr(torch, "float8_e4m3fn"),
                    reason="the fp8 forward runs on Hopper (sm_90) only")
def test_compile_fp8_v_kmajor():
    """fp8_v_kmajor and fwd(v_kmajor=True) as ops: one graph under
    torch.compile(fullgraph=True), the same bits as the package's eager call
    with V rows."""
    g = torch.Generator(device="cpu").manual_seed(7)
    q8, k8, v8 = ((torch.randn(s, generator=g) * 2).to(torch.float8_e4m3fn).to(DEV)
                  for s in ((2, 200, 4, 256), (2, 300, 2, 256), (2, 300, 2, 256)))

    def fn(q, k, v):
        return ops.attention(q, k, ops.fp8_v_kmajor(v), causal=True, v_kmajor=True, return_lse=True)

    want = fmha_tile.attention(q8, k8, v8, causal=True, return_lse=True)
    torch._dynamo.reset()
    got = torch.compile(fn, backend="aot_eager", fullgraph=True)(q8, k8, v8)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    no_graph_breaks(fn, q8, k8, v8)


def _fn_fwd(q, k, v):
    o, lse = ops.attention(q * 1.0, k, v, causal=True, window=(16, 0), return_lse=True)
    return o + 1, lse


def _fn_varlen(q, k, v, cq, ck):
    return ops.attention_varlen(q, k, v, cq, ck, max(LENS_Q), max(LENS_K), causal=True,
                                softcap=20.0) * 2


def _fn_prefill(q, kc, vc, cq, bt, sk):
    o, lse = ops.batch_prefill(q, kc, vc, cq, 20, block_table=bt, seqlens_k=sk, causal=True,
                               return_lse=True)
    return o.float().sum(-1), lse


def _fn_decode(q, kc, vc, sk):
    return ops.attention_with_kvcache(q, kc, vc, sk, softcap=30.0).relu()


def _fn_decode_append(q, kc, vc, sk, k, v):
    return ops.attention_with_kvcache(q, kc, vc, sk, k, v, causal=True) - q


def _compile_case(name):
    if name == "fwd":
        q, k, v = dense_case()
        return _fn_fwd, (q, k, v), ()
    if name == "fwd_varlen":
        q, k, v, cq, ck, _, _ = varlen_case()
        return _fn_varlen, (q, k, v, cq, ck), ()
    if name == "batch_prefill":
        c = paged_case()
        return _fn_prefill, (c["q"], c["k_cache"], c["v_cache"], c["cu_seqlens_q"],
                             c["block_table"], c["seqlens_k"]), ()
    if name == "decode":
        c = cache_case()
        return _fn_decode, (c["q"], c["k_cache"], c["v_cache"], c["seqlens_k"]), ()
    c = cache_case(s_q=2, s_new=2, lens=(50, 2, 90))
    return _fn_decode_append, (c["q"], c["k_cache"], c["v_cache"], c["seqlens_k"], c["k"],
                               c["v"]), (1, 2)      # the mutated arguments


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


# every op with aot_eager (Dynamo + AOTAutograd + functionalization, no codegen: fast);
# inductor (slow to compile) for the mutating decode here (its caches are written in
# place after reinplacing), for the dense forward in test_compile_reduce_overhead and for
# the backward in test_compiled_grads
COMPILE_CASES = [(n, "aot_eager") for n in ("fwd", "fwd_varlen", "batch_prefill", "decode",
                                            "decode_append")] + \
    [pytest.param("decode_append", "inductor", marks=needs_inductor)]


@pytest.mark.parametrize("name,backend", COMPILE_CASES)
def test_compile_fullgraph(name, backend):
    fn, args, mutated = _compile_case(name)

    def fresh():
        return [a.clone() if i in mutated else a for i, a in enumerate(args)]

    eager_args, comp_args = fresh(), fresh()
    want = _as_tuple(fn(*eager_args))
    torch._dynamo.reset()
    got = _as_tuple(torch.compile(fn, backend=backend, fullgraph=True)(*comp_args))
    for a, b in zip(got, want):
        if backend == "aot_eager":
            assert torch.equal(a, b)
        else:
            assert rel_l2(a, b) < 1e-3
    for i in mutated:
        assert torch.equal(comp_args[i], eager_args[i]), "cache not updated as in eager"
    no_graph_breaks(fn, *fresh())


def test_compile_counters():
    """torch._dynamo.utils.counters: nothing recorded as a graph break."""
    from torch._dynamo.utils import counters
    q, k, v = dense_case()
    counters.clear()
    torch.compile(_fn_fwd, backend="aot_eager")(q, k, v)
    assert len(counters["graph_break"]) == 0, dict(counters["graph_break"])


@needs_inductor
def test_compile_reduce_overhead():
    """inductor with CUDA graphs (cudagraph trees) around the forward op."""
    q, k, v = dense_case()
    f = torch.compile(_fn_fwd, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        want = _fn_fwd(q, k, v)
        for _ in range(3):
            got = f(q, k, v)
            assert rel_l2(got[0], want[0]) < 1e-3 and torch.equal(got[1], want[1])


# ---- CUDA graphs ---------------------------------------------------------------------------------
def _capture(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, _as_tuple(out)


def _graph_cases():
    q, k, v = dense_case()
    yield (lambda q, k, v: ops.attention(q, k, v, causal=True, softcap=10.0, return_lse=True),
           [q, k, v], ())
    q, k, v, cq, ck, mq, mk = varlen_case()
    yield (lambda q, k, v: ops.attention_varlen(q, k, v, cq, ck, mq, mk, window=(7, 7),
                                                return_lse=True), [q, k, v], ())
    c = paged_case()
    yield (lambda q, kc, vc: ops.batch_prefill(q, kc, vc, c["cu_seqlens_q"], c["max_seqlen_q"],
                                               block_table=c["block_table"],
                                               seqlens_k=c["seqlens_k"], return_lse=True),
           [c["q"], c["k_cache"], c["v_cache"]], ())
    d = cache_case()
    yield (lambda q, kc, vc: ops.attention_with_kvcache(q, kc, vc, d["seqlens_k"], return_lse=True),
           [d["q"], d["k_cache"], d["v_cache"]], ())
    e = cache_case(s_q=1, s_new=1, lens=(50, 1, 90))
    yield (lambda q, kc, vc, k, v: ops.attention_with_kvcache(q, kc, vc, e["seqlens_k"], k, v),
           [e["q"], e["k_cache"], e["v_cache"], e["k"], e["v"]], (1, 2))


def test_cuda_graph_replay():
    for i, (fn, bufs, mutated) in enumerate(_graph_cases()):
        g, outs = _capture(lambda: fn(*bufs))
        for _ in range(2):
            new = [torch.randn_like(b) for b in bufs]
            for b, n in zip(bufs, new):
                b.copy_(n)
            for o in outs:
                o.fill_(float("nan"))     # every element must be written by the replay
            g.replay()
            torch.cuda.synchronize()
            fresh = [n.clone() if j in mutated else n for j, n in enumerate(new)]
            want = _as_tuple(fn(*fresh))
            for o, w in zip(outs, want):
                assert torch.equal(o, w), i
            for j in mutated:
                assert torch.equal(bufs[j], fresh[j]), (i, "cache")


# ---- gradients through compiled modules ---------------------------------------------------------
class Block(torch.nn.Module):
    """q/k/v projections around the attention op (GQA 4 / 2 heads, d 64)."""

    def __init__(self, dim=128, h=4, hk=2, d=64, varlen=None, sinks=False):
        super().__init__()
        self.h, self.hk, self.d, self.varlen = h, hk, d, varlen
        self.wq = torch.nn.Linear(dim, h * d, bias=False)
        self.wkv = torch.nn.Linear(dim, 2 * hk * d, bias=False)
        self.sinks = torch.nn.Parameter(torch.randn(h)) if sinks else None

    def forward(self, x):
        q = self.wq(x).unflatten(-1, (self.h, self.d))
        k, v = self.wkv(x).unflatten(-1, (2, self.hk, self.d)).unbind(-3)
        if self.varlen is None:
            o = ops.attention(q, k, v, causal=True, deterministic=True, sinks=self.sinks)
        else:
            cq, mq = self.varlen
            o = ops.attention_varlen(q, k, v, cq, cq, mq, mq, causal=True, deterministic=True,
                                     sinks=self.sinks)
        return o.flatten(-2)


def _grads_of(model, x, g):
    model.zero_grad(set_to_none=True)
    xg = x.clone().requires_grad_()
    y = model(xg)
    y.backward(g)
    return [y.detach(), xg.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("kind,backend", [("dense", "aot_eager"), ("varlen", "aot_eager"),
                                          ("sinks", "aot_eager"),
                                          pytest.param("dense", "inductor", marks=needs_inductor)])
def test_compiled_grads(kind, backend):
    if kind == "varlen":
        x = rand(sum(LENS_Q), 128, dtype=FP16)
        model = Block(varlen=(prefix(LENS_Q), max(LENS_Q)))
    else:
        x = rand(2, 45, 128, dtype=FP16)
        model = Block(sinks=kind == "sinks")
    model = model.to(device=DEV, dtype=FP16)
    if model.sinks is not None:
        model.sinks.data = model.sinks.data.float()     # sinks are fp32
    g = torch.randn(*x.shape[:-1], 4 * 64, device=DEV, dtype=FP16)
    want = _grads_of(model, x, g)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    got = _grads_of(compiled, x, g)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a is not None and b is not None
        # the attention op and its backward are the same calls (deterministic); the
        # projections around them may be rounded differently by the compiled graph
        assert a.shape == b.shape and a.dtype == b.dtype
        assert rel_l2(a, b) < 2e-3
    no_graph_breaks(model, x)
