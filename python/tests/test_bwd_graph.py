"""GPU tests: the backward captured in a CUDA graph (forward + backward).

The training step `o = attention(q, k, v); dq, dk, dv = autograd.grad(o,
(q, k, v), dout)` is captured once in a torch.cuda.CUDAGraph (after a warm-up
on a side stream, as PyTorch asks), then replayed with new values copied into
the captured (static) tensors; each replay's gradients, poisoned with NaN
before the replay so that a stale or unwritten buffer shows, are compared with
the same step run eagerly on the same values:
  - attention() (batch mode; GQA, causal, sinks with dsinks), attention_varlen()
    with other sequence lengths per replay (cu_seqlens only change on the
    device; max_seqlen bounds them all), and the custom ops through autograd
    (fmha_tile.ops.attention / attention_varlen, torch >= 2.4);
  - deterministic mode: bitwise equal to eager; otherwise dQ (fp32 atomics)
    within rel-L2 1e-3 of eager and dK/dV too;
  - dropout: each replay draws a new mask, and torch.manual_seed before a
    replay reproduces it bit for bit (deterministic backward);
  - a capture whose cu_seqlens break max_seqlen_k fails at replay (the
    device-side bound check) in a child process, never giving gradients.
Before this the backward could not be captured at all (its workspace
preparation synchronised). Skips cleanly without torch, a GPU or the library.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

import fmha_tile  # noqa: E402

DEV = "cuda"
BF16, FP16 = torch.bfloat16, torch.float16
HAVE_OPS = hasattr(torch.library, "custom_op")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


def rand(*shape, dtype=BF16):
    return torch.randn(*shape, dtype=dtype, device=DEV)


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


class Step:
    """A training step over static inputs: fn(q, k, v, extra) -> o, then the
    gradients of o with dout for the tensors in `wrt` (the inputs that require
    grad). capture() records it in a CUDA graph; run() is the eager step."""

    def __init__(self, fn, statics, wrt):
        self.fn, self.statics, self.wrt = fn, statics, wrt

    def run(self):
        s = self.statics
        o = self.fn(s)
        return [o] + list(torch.autograd.grad(o, [s[n] for n in self.wrt], s["dout"]))

    def eager(self):
        return [t.detach() for t in self.run()]

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):   # warm-up: kernels loaded, allocator pools filled
                self.run()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outs = self.run()
        return self

    def replay(self):
        """-> copies of the captured outputs after one replay."""
        with torch.no_grad():
            for t in self.outs:
                t.fill_(float("nan"))      # stale or unwritten results show
            self.graph.replay()
            torch.cuda.synchronize()
            return [t.detach().clone() for t in self.outs]

    def load(self, **values):
        with torch.no_grad():   # the statics are leaves that require grad
            for n, x in values.items():
                self.statics[n].copy_(x)


def compare(got, ref, names, exact, where):
    assert len(got) == len(ref)
    for name, g, r in zip(names, got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype, (where, name)
        assert torch.isfinite(g).all(), "%s: %s not finite (not written by the replay?)" % (where, name)
        if exact:
            assert torch.equal(g, r), "%s: %s differs from eager (deterministic mode)" % (where, name)
        else:
            err = rel_l2(g, r)
            assert err <= 1e-3, "%s: %s rel-L2 %.2e from eager" % (where, name, err)


def _dense_statics(b, s_q, s_k, h, hk, d, dtype, sinks):
    st = {"q": rand(b, s_q, h, d, dtype=dtype).requires_grad_(),
          "k": rand(b, s_k, hk, d, dtype=dtype).requires_grad_(),
          "v": rand(b, s_k, hk, d, dtype=dtype).requires_grad_(),
          "dout": rand(b, s_q, h, d, dtype=dtype)}
    if sinks:
        st["sinks"] = torch.randn(h, device=DEV).requires_grad_()
    return st


def _check_dense(attn, deterministic, dtype=BF16, d=128, sinks=True, replays=3):
    b, s_q, s_k, h, hk = 2, 200, 333, 8, 2   # GQA 4, key tiles past one (dq_acc)
    st = _dense_statics(b, s_q, s_k, h, hk, d, dtype, sinks)
    wrt = ["q", "k", "v"] + (["sinks"] if sinks else [])

    def fn(s):
        return attn(s["q"], s["k"], s["v"], causal=True, deterministic=deterministic,
                    sinks=s.get("sinks"))
    step = Step(fn, st, wrt).capture()
    names = ["o"] + ["d" + n for n in wrt]
    for r in range(replays):
        new = {n: torch.randn_like(st[n]) for n in wrt + ["dout"]}
        step.load(**new)
        got = step.replay()
        ref = step.eager()                      # eager on the same static values
        compare(got, ref, names, deterministic, "replay %d" % r)


@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "det"])
@pytest.mark.parametrize("dtype,d", [(BF16, 128), (FP16, 64)], ids=["bf16_d128", "fp16_d64"])
def test_graph_attention(dtype, d, deterministic):
    _check_dense(fmha_tile.attention, deterministic, dtype, d)


def test_graph_attention_direct_dq():
    # one key tile: the plan writes dQ directly and has no workspace
    st = _dense_statics(2, 50, 40, 4, 2, 64, BF16, False)
    step = Step(lambda s: fmha_tile.attention(s["q"], s["k"], s["v"]), st, ["q", "k", "v"]).capture()
    for r in range(2):
        step.load(**{n: torch.randn_like(st[n]) for n in ("q", "k", "v", "dout")})
        got = step.replay()
        compare(got, step.eager(), ["o", "dq", "dk", "dv"], False, "replay %d" % r)


# (lengths q, lengths k) per replay; the first is the captured one. Empty
# entries, one-token entries, long keys (several dq_acc splits when deterministic)
VARLEN_REPLAYS = [
    ([120, 0, 1, 300, 57], [200, 9, 1, 700, 0]),
    ([1, 300, 100, 77, 0], [500, 3, 300, 129, 64]),
    ([300, 178, 0, 0, 0], [700, 700, 0, 0, 0]),
    ([1, 300, 100, 7, 0], [0, 0, 1, 5, 1]),           # rows past cu_seqlens_q[-1]
]
MAXQ, MAXK, TOTQ, TOTK = 300, 700, 478, 1400


def _cu(lens):
    c = [0]
    for n in lens:
        c.append(c[-1] + n)
    return torch.tensor(c, dtype=torch.int32, device=DEV)


def _check_varlen(attn, deterministic, dtype=BF16, d=64, causal=False):
    h, hk = 4, 2
    st = {"q": rand(TOTQ, h, d, dtype=dtype).requires_grad_(),
          "k": rand(TOTK, hk, d, dtype=dtype).requires_grad_(),
          "v": rand(TOTK, hk, d, dtype=dtype).requires_grad_(),
          "dout": rand(TOTQ, h, d, dtype=dtype),
          "cu_q": _cu(VARLEN_REPLAYS[0][0]), "cu_k": _cu(VARLEN_REPLAYS[0][1])}
    assert all(sum(lq) <= TOTQ and sum(lk) <= TOTK and max(lq) <= MAXQ and max(lk) <= MAXK
               for lq, lk in VARLEN_REPLAYS)

    def fn(s):
        return attn(s["q"], s["k"], s["v"], s["cu_q"], s["cu_k"], MAXQ, MAXK, causal=causal,
                    deterministic=deterministic)
    step = Step(fn, st, ["q", "k", "v"]).capture()
    for r, (lq, lk) in enumerate(VARLEN_REPLAYS):
        step.load(q=torch.randn_like(st["q"]), k=torch.randn_like(st["k"]),
                  v=torch.randn_like(st["v"]), dout=torch.randn_like(st["dout"]),
                  cu_q=_cu(lq), cu_k=_cu(lk))
        got = step.replay()
        ref = step.eager()
        n = sum(lq)
        # rows past cu_seqlens_q[-1] belong to no sequence: O is not written
        # there (NaN poison stays), the gradients are zero
        got[0], ref[0] = got[0][:n], ref[0][:n]
        compare(got, ref, ["o", "dq", "dk", "dv"], deterministic, "replay %d %s" % (r, (lq, lk)))
        assert (got[1][n:] == 0).all() and (got[2][sum(lk):] == 0).all()


@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "det"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_graph_attention_varlen(causal, deterministic):
    _check_varlen(fmha_tile.attention_varlen, deterministic, causal=causal)


def test_graph_attention_varlen_fp16_d128():
    _check_varlen(fmha_tile.attention_varlen, True, dtype=FP16, d=128, causal=True)


needs_ops = pytest.mark.skipif(not HAVE_OPS, reason="fmha_tile.ops needs torch >= 2.4")


@needs_ops
@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "det"])
def test_graph_ops_attention(deterministic):
    from fmha_tile import ops
    _check_dense(ops.attention, deterministic, sinks=True)


@needs_ops
@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "det"])
def test_graph_ops_attention_varlen(deterministic):
    from fmha_tile import ops
    _check_varlen(ops.attention_varlen, deterministic, causal=True)


def test_graph_dropout_new_mask_per_replay_and_seeded():
    st = _dense_statics(2, 200, 333, 4, 2, 64, BF16, False)

    def fn(s):
        return fmha_tile.attention(s["q"], s["k"], s["v"], causal=True, deterministic=True,
                                   dropout_p=0.2)
    step = Step(fn, st, ["q", "k", "v"]).capture()
    torch.manual_seed(99)
    first = step.replay()
    second = step.replay()
    torch.manual_seed(99)
    again = step.replay()
    for name, a, b, c in zip(("o", "dq", "dk", "dv"), first, second, again):
        assert torch.isfinite(a).all() and torch.isfinite(b).all(), name
        assert not torch.equal(a, b), "%s: two replays drew the same dropout mask" % name
        assert torch.equal(a, c), "%s: manual_seed before the replay does not reproduce it" % name


_BOUND_SCRIPT = textwrap.dedent("""
    import torch, fmha_tile
    q = torch.randn(400, 2, 64, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    k = torch.randn(400, 2, 64, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    v = torch.randn(400, 2, 64, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    dout = torch.randn(400, 2, 64, dtype=torch.bfloat16, device="cuda")
    cu = torch.tensor([0, 100, 200], dtype=torch.int32, device="cuda")
    def step():
        o = fmha_tile.attention_varlen(q, k, v, cu, cu, 100, 100)
        return torch.autograd.grad(o, (q, k, v), dout)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        grads = step()
    g.replay()
    torch.cuda.synchronize()
    print("REPLAY_OK")
    cu.copy_(torch.tensor([0, 100, 400], dtype=torch.int32))   # 300 keys > max_seqlen_k 100
    try:
        g.replay()
        torch.cuda.synchronize()
        print("NO_ERROR")
    except RuntimeError as e:
        print("DEVICE_ERROR", str(e).splitlines()[0])
""")


def test_graph_varlen_bound_broken_at_replay_fails():
    # the device-side assert kills the CUDA context: run it in a child process
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(here, ".."), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _BOUND_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=300)
    out = r.stdout + r.stderr
    assert "REPLAY_OK" in r.stdout, out[-3000:]
    assert "NO_ERROR" not in r.stdout, "a replay past max_seqlen_k ran without an error:\n" + out[-3000:]
    assert "DEVICE_ERROR" in r.stdout or r.returncode != 0, out[-3000:]
