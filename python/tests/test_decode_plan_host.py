"""Host tests of fmha_tile.decode_plan's fast path (DecodePlan.run): no GPU,
no pytest needed (PyTorch not used: stand-in tensors and a stand-in torch).

  - pointer patching against the C layout: the fmha_decode_args a plan
    fills for a call is dumped byte for byte and read back by a C program
    compiled here with cc against include/fmha_tile/api.h; every pointer
    (q, o, lse, caches, seqlens, page tables, new rows, parameters,
    workspace) and the block table's row stride are where C reads them, and
    the shape fields are the plan's;
  - run() writes only the fields of the call: two calls with other tensors
    differ in those fields and nowhere else;
  - refusals before any launch: a tensor of another shape, dtype, device or
    layout (strides of size-1 dimensions excepted), a missing per-call
    tensor, one the plan was not made with, a non-tensor; each error names
    the tensor;
  - launch glue with a stand-in torch: the current raw stream is passed to
    fmha_decode_run, the workspace is kept per stream (16-byte aligned) and
    allocated per call under graph capture, a status other than FMHA_OK is
    an FmhaError, another current device is switched to;
  - the forward plan (fmha_tile.forward_plan): the pointers of q, k, v,
    out, lse and a per-call sinks in fmha_fwd_args and nothing else moved,
    its refusals (and of an input that requires grad in grad mode);
  - with build/libfmha_tile.so: fmha_decode_run itself reads the patched
    struct (a call of the plan's shape passes its checks and stops at the
    device query without a GPU; a misaligned q and a plan of another batch
    are refused with their messages).

Run as a script (the last line is "N passed, M failed") or under pytest.
"""
import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile


# host_util first: it puts python/ on sys.path
from host_util import REPO, FakeDevice, StandInTensor, c_compiler, raises, run_tests, skip
from fmha_tile import _args, _decode, _decode_plan, _fwd_plan, _lib


# ---- stand-ins ------------------------------------------------------------------------------------
class Dtype(object):
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name

    def __repr__(self):
        return str(self)


BF16, FP16, FP32, I32 = Dtype("bfloat16"), Dtype("float16"), Dtype("float32"), Dtype("int32")


class Device(FakeDevice):
    def __init__(self, index=0, type="cuda"):
        FakeDevice.__init__(self, type, index)

    def __str__(self):
        return "%s:%s" % (self.type, self.index)


_next_ptr = [1 << 32]


def fresh_ptr(size=1 << 24):
    p = _next_ptr[0]
    _next_ptr[0] += size
    return p


class T(StandInTensor):
    """shape, stride(), dtype, device, is_cuda, get_device(), dim(), data_ptr()."""

    def __init__(self, shape, dtype=BF16, strides=None, device=0, ptr=None):
        StandInTensor.__init__(self, shape, dtype, strides,
                               Device(device) if device is not None else Device(None, "cpu"),
                               fresh_ptr() if ptr is None else ptr)

    def get_device(self):
        return self.device.index if self.is_cuda else -1

    def dim(self):
        return len(self.shape)

    def is_contiguous(self):
        return self._strides == T(self.shape)._strides


class FakeTorch(object):
    """torch as DecodePlan uses it: device(), empty(), empty_strided(), the
    raw stream / device / capture getters, torch.cuda.device()."""

    def __init__(self):
        self.stream, self.dev, self.capturing = 0x5000, 0, False
        self.allocs, self.switched = [], []
        self.grad = False
        self.uint8, self.float32 = Dtype("uint8"), FP32
        torch = self

        class C(object):
            @staticmethod
            def _cuda_getCurrentRawStream(index):
                return torch.stream

            @staticmethod
            def _cuda_getDevice():
                return torch.dev

            @staticmethod
            def _cuda_isCurrentStreamCapturing():
                return torch.capturing

        class Cuda(object):
            @staticmethod
            @contextlib.contextmanager
            def device(index):
                old, torch.dev = torch.dev, index
                torch.switched.append(index)
                try:
                    yield
                finally:
                    torch.dev = old

        self._C, self.cuda = C, Cuda

    def device(self, type, index):
        return Device(index, type)

    def is_grad_enabled(self):
        return self.grad

    def empty(self, shape, dtype=None, device=None):
        t = T(shape if isinstance(shape, tuple) else (shape,), dtype, device=device.index, ptr=fresh_ptr() + 4)
        self.allocs.append(t)
        return t

    def empty_strided(self, shape, stride, dtype=None, device=None):
        t = T(shape, dtype, stride, device=device.index)
        self.allocs.append(t)
        return t


class FakeLib(object):
    """The CDLL with a recording fmha_decode_run."""

    def __init__(self, status=0):
        self.calls, self.status = [], status

        def run(pplan, pargs, stream):
            a = pargs.contents
            self.calls.append((ctypes.string_at(ctypes.addressof(a), ctypes.sizeof(a)), stream,
                               a.workspace, a.q_rope))
            return self.status

        self.fmha_decode_run = run


class FakeHandle(object):
    def __init__(self, lib):
        self.lib, self.decode_set, self.path = lib, 1, "fake"

    def declared(self, what, declare):
        return self.lib

    def check_status(self, status, where=""):
        if status != 0:
            raise _lib.FmhaError(status, "FMHA_ERR_LAUNCH", "stand-in failure", where)


B, HQ, HK, D, S = 3, 8, 2, 128, 256


def contiguous_given(**extra):
    g = dict(q=T((B, 1, HQ, D)), k_cache=T((B + 1, S, HK, D)), v_cache=T((B + 1, S, HK, D)),
             seqlens_k=T((B,), I32))
    g.update(extra)
    return g


def paged_given(vllm=False, **extra):
    pages, page = 40, 16
    g = dict(q=T((B, 1, HQ, D)), k_cache=T((pages, page, HK, D)), v_cache=T((pages, page, HK, D)))
    if vllm:
        g.update(block_table=T((B, 7), I32), seqlens_k=T((B,), I32))
    else:
        g.update(kv_indptr=T((B + 1,), I32), kv_page_indices=T((12,), I32), kv_last_page_len=T((B,), I32))
    g.update(extra)
    return g


def make_plan(given, workspace=0, rotary=False, lse=False, status=0, num_splits=1, torch=None, out_strides=None):
    """A DecodePlan over stand-ins: the args from decode_args() (the real
    checks), a plan struct filled as fmha_decode_plan_make would."""
    torch = torch or FakeTorch()
    names = ("seqlens_k", "k", "v", "rotary_cos", "rotary_sin", "cache_batch_idx", "kv_indptr",
             "kv_page_indices", "kv_last_page_len", "block_table", "alibi_slopes", "k_descale", "v_descale",
             "sinks")
    kw = {n: given.get(n) for n in names}
    seqlens_k = kw.pop("seqlens_k")
    if kw["kv_indptr"] is not None or kw["block_table"] is not None:
        kw["max_seqlen_k"] = 200
    a, out_dtype, keep = _decode.decode_args(given["q"], given["k_cache"], given["v_cache"], seqlens_k,
                                             to_device=None, **kw)
    q = given["q"]
    o = T(q.shape, q.dtype, out_strides)
    a.o = o.data_ptr()
    a.batch_stride_o, a.stride_o, a.nhead_stride_o = o.stride(0), 0, o.stride(2)
    lse_spec = None
    if lse:
        lt = T((q.shape[0], q.shape[2], q.shape[1]), FP32)
        a.lse, a.batch_stride_lse, a.nhead_stride_lse = lt.data_ptr(), q.shape[2] * q.shape[1], q.shape[1]
        lse_spec = _decode_plan._Spec("lse", "lse", lt)
    p = _decode.FmhaDecodePlan()
    p.num_splits, p.workspace_size = num_splits, workspace
    p.batch_, p.nhead_q_, p.nhead_k_, p.seqlen_q_, p.hdim_ = a.batch, a.nhead_q, a.nhead_k, a.seqlen_q, a.hdim_q
    lib = FakeLib(status)
    plan = _decode_plan._make(torch, FakeHandle(lib), a, p, given, o, lse_spec, rotary)
    return plan, torch, lib


def like(t, **kw):
    """Another tensor of t's kind at a new address."""
    d = dict(shape=t.shape, dtype=t.dtype, strides=t.stride(), device=t.get_device())
    d.update(kw)
    return T(d["shape"], d["dtype"], d["strides"], d["device"])


def call_tensors(given, **over):
    """run()'s tensors for a call: new ones of the plan's kinds."""
    out = {}
    for n, t in given.items():
        if n in ("alibi_slopes", "sinks", "rotary_cos", "rotary_sin", "k_descale", "v_descale"):
            continue
        out[n] = like(t)
    out.update(over)
    return out


def run_plan(plan, call, **kw):
    call = dict(call)
    call.update(kw)
    q, kc, vc = call.pop("q"), call.pop("k_cache"), call.pop("v_cache")
    return plan.run(q, kc, vc, **call)


# ---- pointer patching against the C layout -------------------------------------------------------
C_FIELDS = [("q", "p"), ("o", "p"), ("lse", "p"), ("k_cache", "p"), ("v_cache", "p"), ("seqlen_k", "p"),
            ("cache_batch_idx", "p"), ("kv_indptr", "p"), ("kv_page_indices", "p"), ("kv_last_page_lens", "p"),
            ("block_table", "p"), ("block_table_stride", "i64"), ("k_new", "p"), ("v_new", "p"),
            ("rotary_cos", "p"), ("rotary_sin", "p"), ("q_rope", "p"), ("alibi_slopes", "p"), ("sinks", "p"),
            ("workspace", "p"), ("workspace_size", "z"), ("batch", "i"), ("nhead_q", "i"), ("nhead_k", "i"),
            ("seqlen_q", "i"), ("hdim_q", "i"), ("stride_q", "i64"), ("nhead_stride_k", "i64"),
            ("batch_stride_o", "i64"), ("seqlen_knew", "i"), ("num_splits", "i")]


def _c_reader():
    """A program that reads an fmha_decode_args from stdin and prints the
    fields of C_FIELDS as C sees them; None without a C compiler."""
    cc = c_compiler()
    if cc is None:
        return None, None
    fmt = {"p": ('%s %%llu\\n', "(unsigned long long)(uintptr_t)a.%s"),
           "i64": ('%s %%lld\\n', "(long long)a.%s"), "i": ('%s %%d\\n', "a.%s"),
           "z": ('%s %%llu\\n', "(unsigned long long)a.%s")}
    lines = ['#include <stdio.h>', '#include <stdint.h>', '#include "fmha_tile/api.h"', "int main(void) {",
             "    fmha_decode_args a;",
             "    if (fread(&a, sizeof a, 1, stdin) != 1) return 2;"]
    for name, kind in C_FIELDS:
        f, e = fmt[kind]
        lines.append('    printf("%s", %s);' % (f % name, e % name))
    lines += ["    return 0;", "}"]
    tmp = tempfile.mkdtemp(prefix="fmha_decode_plan_")
    src, exe = os.path.join(tmp, "read.c"), os.path.join(tmp, "read")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = subprocess.run([cc, "-std=c11", "-I" + os.path.join(REPO, "include"), src, "-o", exe],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert r.returncode == 0, "the C reader failed to compile:\n" + r.stdout
    return tmp, exe


def _c_read(exe, raw):
    out = subprocess.run([exe], input=raw, stdout=subprocess.PIPE, check=True).stdout.decode()
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


# run()'s tensors and the api.h field each one's pointer goes to (written out
# here, not taken from the module under test)
WHERE = {"seqlens_k": "seqlen_k", "k": "k_new", "v": "v_new", "cache_batch_idx": "cache_batch_idx",
         "kv_indptr": "kv_indptr", "kv_page_indices": "kv_page_indices", "kv_last_page_len": "kv_last_page_lens",
         "block_table": "block_table", "rotary_cos": "rotary_cos", "rotary_sin": "rotary_sin",
         "alibi_slopes": "alibi_slopes", "sinks": "sinks"}
PARAMS = ("rotary_cos", "rotary_sin", "alibi_slopes", "sinks")


def test_patched_pointers_are_where_c_reads_them():
    tmp, exe = _c_reader()
    if exe is None:
        skip("no C compiler (cc, gcc, clang)")
    try:
        cases = [
            ("contiguous", contiguous_given(cache_batch_idx=T((B,), I32), sinks=T((HQ,), FP32),
                                            alibi_slopes=T((HQ,), FP32)), {}),
            ("append+rotary", contiguous_given(k=T((B, 1, HK, D)), v=T((B, 1, HK, D)),
                                               rotary_cos=T((S, 32), FP32), rotary_sin=T((S, 32), FP32)),
             {"rotary": True, "workspace": 4096, "num_splits": 4}),
            ("sglang", paged_given(), {"lse": True}),
            ("vllm", paged_given(vllm=True), {"workspace": 1000, "num_splits": 2}),
        ]
        for label, given, opts in cases:
            plan, torch, lib = make_plan(given, **opts)
            call = call_tensors(given)
            if "kv_page_indices" in call:
                call["kv_page_indices"] = T((5,), I32)          # another page count
            if "block_table" in call:
                call["block_table"] = T((B, 9), I32)            # another width: row stride 9
            out = T(given["q"].shape, given["q"].dtype)
            lse = T((B, HQ, 1), FP32) if opts.get("lse") else None
            r = run_plan(plan, call, out=out, lse=lse)
            raw, stream, ws, qrope = lib.calls[-1]
            c = _c_read(exe, raw)
            want = {"q": call["q"], "o": out, "k_cache": call["k_cache"], "v_cache": call["v_cache"]}
            for n, f in WHERE.items():
                if n in call:
                    want[f] = call[n]
                elif n in PARAMS and given.get(n) is not None:
                    want[f] = given[n]           # the plan's own: run() got none
            if lse is not None:
                want["lse"] = lse
                assert r[0] is out and r[1] is lse, label
            else:
                assert r is out, label
            for f, t in want.items():
                assert c[f] == t.data_ptr(), "%s: C reads %s = %#x, want %#x" % (label, f, c[f], t.data_ptr())
            for n, f in WHERE.items():
                if f not in want:
                    assert c[f] == 0, "%s: %s set without a tensor" % (label, f)
            if "block_table" in call:
                assert c["block_table_stride"] == 9, label
            assert (c["batch"], c["nhead_q"], c["nhead_k"], c["seqlen_q"], c["hdim_q"]) == (B, HQ, HK, 1, D), label
            assert c["nhead_stride_k"] == given["k_cache"].stride(2), label
            if opts.get("workspace"):
                assert c["workspace"] == ws and ws % 16 == 0 and c["workspace_size"] == opts["workspace"], label
            else:
                assert c["workspace"] == 0, label
            if opts.get("rotary"):
                assert c["q_rope"] == qrope and qrope not in (0, call["q"].data_ptr()), label
            assert stream == torch.stream, label
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_run_writes_only_the_calls_fields():
    given = contiguous_given(sinks=T((HQ,), FP32))
    plan, torch, lib = make_plan(given, workspace=512, num_splits=2)
    run_plan(plan, call_tensors(given), out=T(given["q"].shape))
    first = lib.calls[-1][0]
    run_plan(plan, call_tensors(given), out=T(given["q"].shape), sinks=T((HQ,), FP32))
    second = lib.calls[-1][0]
    A = _decode.FmhaDecodeArgs
    moved = set(f for f in ("q", "o", "k_cache", "v_cache", "seqlen_k", "sinks"))
    for name, ctype in A._fields_:
        desc = getattr(A, name)
        a, b = first[desc.offset:desc.offset + desc.size], second[desc.offset:desc.offset + desc.size]
        if name in moved:
            assert a != b, "%s did not change between calls with other tensors" % name
        else:
            assert a == b, "%s changed between two calls of one plan" % name


# ---- refusals ------------------------------------------------------------------------------------
def test_mismatches_raise_clear_errors():
    given = contiguous_given()
    plan, torch, lib = make_plan(given)
    call = call_tensors(given)
    q = call["q"]
    m = raises(ValueError, run_plan, plan, call, q=T((B, 2, HQ, D)))
    assert "q has shape (3, 2, 8, 128)" in m and "(3, 1, 8, 128)" in m, m
    m = raises(TypeError, run_plan, plan, call, q=like(q, dtype=FP16))
    assert "q has dtype torch.float16" in m and "bfloat16" in m, m
    m = raises(ValueError, run_plan, plan, call, k_cache=like(call["k_cache"], device=1))
    assert "k_cache is on cuda:1" in m, m
    m = raises(ValueError, run_plan, plan, call, v_cache=like(call["v_cache"], device=None))
    assert "v_cache is on cpu" in m, m
    m = raises(ValueError, run_plan, plan, call, k_cache=T((B + 1, S, HK, D), strides=(S * HK * D * 2, HK * D, D, 1)))
    assert "k_cache has strides" in m, m
    m = raises(ValueError, run_plan, plan, call, seqlens_k=T((B + 1,), I32))
    assert "seqlens_k has shape" in m, m
    m = raises(TypeError, run_plan, plan, call, seqlens_k=T((B,), Dtype("int64")))
    assert "seqlens_k has dtype" in m, m
    m = raises(TypeError, run_plan, plan, call, q=None)
    assert "q must be a torch.Tensor" in m, m
    m = raises(ValueError, run_plan, plan, call, out=T((B, 1, HQ, 64)))
    assert "out has shape" in m, m
    call2 = dict(call)
    del call2["seqlens_k"]
    m = raises(ValueError, run_plan, plan, call2)
    assert "seqlens_k is required" in m, m
    m = raises(ValueError, run_plan, plan, call, sinks=T((HQ,), FP32))
    assert "sinks was not given to decode_plan" in m, m
    m = raises(ValueError, run_plan, plan, call, block_table=T((B, 4), I32))
    assert "block_table was not given to decode_plan" in m, m
    m = raises(ValueError, run_plan, plan, call, lse=T((B, HQ, 1), FP32))
    assert "return_lse" in m, m
    assert lib.calls == [], "a refused call reached fmha_decode_run"
    # strides of size-1 dimensions are never read: another value there is the same layout
    run_plan(plan, call, q=T((B, 1, HQ, D), strides=(HQ * D, 12345, D, 1)))
    assert len(lib.calls) == 1


def test_variable_length_tables():
    given = paged_given()
    plan, torch, lib = make_plan(given)
    call = call_tensors(given)
    for n in (1, 12, 300):
        run_plan(plan, call, kv_page_indices=T((n,), I32))
    m = raises(ValueError, run_plan, plan, call, kv_page_indices=T((4, 3), I32))
    assert "kv_page_indices must be a contiguous int32 vector" in m, m
    m = raises(TypeError, run_plan, plan, call, kv_page_indices=T((4,), Dtype("int64")))
    assert "kv_page_indices must be torch.int32" in m, m
    m = raises(ValueError, run_plan, plan, call, kv_indptr=T((B + 2,), I32))
    assert "kv_indptr has shape" in m, m
    given = paged_given(vllm=True)
    plan, torch, lib = make_plan(given)
    call = call_tensors(given)
    m = raises(ValueError, run_plan, plan, call, block_table=T((B + 1, 7), I32))
    assert "block_table must be int32 [3, max_pages]" in m, m
    m = raises(ValueError, run_plan, plan, call, block_table=T((B, 7), I32, strides=(1, B)))
    assert "unit-stride rows" in m, m


def test_parameters_default_to_the_plans():
    given = contiguous_given(sinks=T((HQ,), FP32), alibi_slopes=T((B, HQ), FP32))
    plan, torch, lib = make_plan(given)
    call = call_tensors(given)
    A = _decode.FmhaDecodeArgs

    def field(raw, name):
        d = getattr(A, name)
        return int.from_bytes(raw[d.offset:d.offset + d.size], sys.byteorder)

    run_plan(plan, call)
    assert field(lib.calls[-1][0], "sinks") == given["sinks"].data_ptr()
    s2 = T((HQ,), FP32)
    run_plan(plan, call, sinks=s2)
    assert field(lib.calls[-1][0], "sinks") == s2.data_ptr()
    run_plan(plan, call)
    assert field(lib.calls[-1][0], "sinks") == given["sinks"].data_ptr(), "a call's parameter stuck to the plan"
    m = raises(ValueError, run_plan, plan, call, alibi_slopes=T((HQ,), FP32))
    assert "alibi_slopes has shape" in m, m


# ---- launch glue -----------------------------------------------------------------------------------
def test_workspace_per_stream_and_under_capture():
    given = contiguous_given()
    plan, torch, lib = make_plan(given, workspace=4000, num_splits=3)
    call = call_tensors(given)
    run_plan(plan, call)
    run_plan(plan, call)
    (_, s1, w1, _), (_, s2, w2, _) = lib.calls[-2:]
    assert s1 == s2 == torch.stream and w1 == w2 and w1 % 16 == 0, "one workspace per stream"
    ws_allocs = [t for t in torch.allocs if str(t.dtype) == "torch.uint8"]
    assert len(ws_allocs) == 1 and ws_allocs[0].shape == (4016,)
    torch.stream = 0x6000
    run_plan(plan, call)
    assert lib.calls[-1][1] == 0x6000 and lib.calls[-1][2] not in (0, w1), "another stream, another workspace"
    torch.stream = 0x5000
    run_plan(plan, call)
    assert lib.calls[-1][2] == w1
    torch.capturing = True
    run_plan(plan, call)
    run_plan(plan, call)
    w_cap = [c[2] for c in lib.calls[-2:]]
    assert w_cap[0] != w_cap[1] and w1 not in w_cap, "under capture each call gets its own workspace"
    assert len([t for t in torch.allocs if str(t.dtype) == "torch.uint8"]) == 4


def test_no_workspace_with_one_split_and_out_allocated():
    given = contiguous_given()
    plan, torch, lib = make_plan(given)
    r = run_plan(plan, call_tensors(given))
    assert lib.calls[-1][2] is None and torch.allocs == [r], "one split: only the output is allocated"
    assert r.shape == given["q"].shape and r.dtype is given["q"].dtype


def test_output_allocated_in_the_plans_layout():
    given = contiguous_given()
    wide = (2 * HQ * D, HQ * D, D, 1)       # rows of a [B, 1, 2 * HQ, D] buffer
    plan, torch, lib = make_plan(given, out_strides=wide)
    r = run_plan(plan, call_tensors(given))
    assert r.stride() == wide and r.shape == given["q"].shape, r.stride()
    m = raises(ValueError, run_plan, plan, call_tensors(given), out=T(given["q"].shape))
    assert "out has strides" in m, m


def test_status_and_device_switch():
    given = contiguous_given()
    plan, torch, lib = make_plan(given, status=5)
    m = raises(_lib.FmhaError, run_plan, plan, call_tensors(given))
    assert "DecodePlan.run" in m and "stand-in failure" in m, m
    plan, torch, lib = make_plan(given)
    torch.dev = 3
    run_plan(plan, call_tensors(given))
    assert torch.switched == [0] and torch.dev == 3 and len(lib.calls) == 1


def test_plan_attributes():
    given = contiguous_given()
    plan, torch, lib = make_plan(given, workspace=64, num_splits=2)
    assert plan.num_splits == 2 and plan.workspace_size == 64 and plan.combine is None


# ---- the forward plan -----------------------------------------------------------------------------
class FakeFwdCdll(object):
    def __init__(self, status=0):
        self.calls, self.status = [], status

        def fwd(kset, pargs, stream):
            a = pargs.contents
            self.calls.append((kset, ctypes.string_at(ctypes.addressof(a), ctypes.sizeof(a)), stream))
            return self.status

        self.fmha_fwd = fwd


def make_fwd_plan(q, k, v, lse=False, sinks=None, status=0):
    p = _args.batch_problem(q, k, v, sinks=sinks)
    o = T(p.out_shape, q.dtype)
    lt = T(p.lse_shape, FP32) if lse else None
    p.set_outputs(o, lt)
    torch, cdll = FakeTorch(), FakeFwdCdll(status)
    h = FakeHandle(None)
    h.cdll, h.set = cdll, 0x77
    plan = _fwd_plan._make(torch, h, p, {"q": q, "k": k, "v": v}, {"sinks": sinks}, o, lt, {"kernel": "k"})
    return plan, torch, cdll


def _fwd_field(raw, name):
    d = getattr(_lib.FmhaFwdArgs, name)
    return int.from_bytes(raw[d.offset:d.offset + d.size], sys.byteorder)


def test_forward_plan_patches_pointers():
    q, k, v = T((2, 1, HQ, D)), T((2, 300, HK, D)), T((2, 300, HK, D))
    sinks = T((HQ,), FP32)
    plan, torch, cdll = make_fwd_plan(q, k, v, lse=True, sinks=sinks)
    q2, k2, v2, o2 = like(q), like(k), like(v), T((2, 1, HQ, D))
    out, lse = plan.run(q2, k2, v2, out=o2)
    kset, raw, stream = cdll.calls[-1]
    assert kset == 0x77 and stream == torch.stream and out is o2
    for name, t in (("q", q2), ("k", k2), ("v", v2), ("o", o2), ("lse", lse), ("sinks", sinks)):
        assert _fwd_field(raw, name) == t.data_ptr(), name
    s2 = T((HQ,), FP32)
    plan.run(q2, k2, v2, sinks=s2)
    assert _fwd_field(cdll.calls[-1][1], "sinks") == s2.data_ptr()
    plan.run(q2, k2, v2)
    assert _fwd_field(cdll.calls[-1][1], "sinks") == sinks.data_ptr()
    # only the pointers of the call move
    first = cdll.calls[-1][1]
    plan.run(like(q), like(k), like(v), out=T((2, 1, HQ, D)), lse=T((2, HQ, 1), FP32))
    second = cdll.calls[-1][1]
    for name, _ in _lib.FmhaFwdArgs._fields_:
        d = getattr(_lib.FmhaFwdArgs, name)
        changed = first[d.offset:d.offset + d.size] != second[d.offset:d.offset + d.size]
        assert changed == (name in ("q", "k", "v", "o", "lse")), name


def test_forward_plan_refusals():
    q, k, v = T((2, 1, HQ, D)), T((2, 300, HK, D)), T((2, 300, HK, D))
    plan, torch, cdll = make_fwd_plan(q, k, v)
    m = raises(ValueError, plan.run, q, T((2, 301, HK, D)), v)
    assert m.startswith("ForwardPlan.run: k has shape"), m
    m = raises(TypeError, plan.run, like(q, dtype=FP16), k, v)
    assert "q has dtype" in m, m
    m = raises(ValueError, plan.run, q, k, like(v, device=2))
    assert "v is on cuda:2" in m, m
    m = raises(ValueError, plan.run, q, k, v, sinks=T((HQ,), FP32))
    assert "sinks was not given to forward_plan" in m, m
    m = raises(TypeError, plan.run, q, k, v, bias=T((HQ,), FP32))
    assert "unexpected keyword argument 'bias'" in m, m
    m = raises(ValueError, plan.run, q, k, v, lse=T((2, HQ, 1), FP32))
    assert "return_lse" in m, m
    g = like(q)
    g.requires_grad = True
    plan.run(g, k, v)                 # no grad mode: runs
    torch.grad = True
    m = raises(ValueError, plan.run, g, k, v)
    assert "requires grad" in m, m
    assert len(cdll.calls) == 1
    plan2, torch2, cdll2 = make_fwd_plan(q, k, v, status=1)
    m = raises(_lib.FmhaError, plan2.run, q, k, v)
    assert "ForwardPlan.run" in m, m


# ---- the built library ------------------------------------------------------------------------------
def _load_library():
    try:
        return _lib.handle()
    except _lib.FmhaLibraryError as e:
        skip("libfmha_tile.so not available: %s" % str(e).splitlines()[0])


def test_library_reads_the_patched_struct():
    h = _load_library()
    lib, dset = _decode._fn(h)
    n = lib.fmha_set_size(dset)
    entry = None
    for i in range(n):
        e = lib.fmha_set_kernel(dset, i).contents
        if e.family == _lib.FMHA_FAMILY_DECODE and e.dtype == _lib.FMHA_DTYPE_BF16 and e.hdim >= D and \
                e.page_size == 0:
            entry = i
            break
    if entry is None:
        skip("the library's decode set has no bf16 DECODE kernel for a contiguous cache")
    given = contiguous_given()
    a, out_dtype, keep = _decode.decode_args(given["q"], given["k_cache"], given["v_cache"], given["seqlens_k"],
                                             to_device=None)
    q = given["q"]
    o = T(q.shape, q.dtype)
    a.o, a.batch_stride_o, a.nhead_stride_o = o.data_ptr(), o.stride(0), o.stride(2)

    def plan_struct(batch):
        # two splits and (fill() only, no launch()) no workspace: a call that passes every
        # check of the args stops at the workspace check, so nothing is launched even on a GPU
        p = _decode.FmhaDecodePlan()
        p.num_splits = 2
        p.batch_, p.nhead_q_, p.nhead_k_, p.seqlen_q_, p.hdim_ = batch, HQ, HK, 1, D
        p.dtypes_ = a.q_dtype * 16 + a.kv_dtype
        p.paged_ = 0
        p.set_ = dset
        p.entry_ = entry
        return p

    plan = _decode_plan._make(FakeTorch(), h, a, plan_struct(B), given, o, None, False)
    call = call_tensors(given)
    # a misaligned q is refused by C through the patched field
    plan.fill(T(q.shape, ptr=fresh_ptr() + 2), call["k_cache"], call["v_cache"], seqlens_k=call["seqlens_k"],
              out=T(q.shape))
    st = lib.fmha_decode_run(plan._pplan, plan._pargs, None)
    assert st == _lib.FMHA_ERR_UNSUPPORTED and "16-byte aligned" in h.last_error(), (st, h.last_error())
    # a plan made for another batch refuses the call (C compares the args' shape with the plan's)
    plan2 = _decode_plan._make(FakeTorch(), h, a, plan_struct(B + 1), given, o, None, False)
    plan2.fill(call["q"], call["k_cache"], call["v_cache"], seqlens_k=call["seqlens_k"], out=T(q.shape))
    st = lib.fmha_decode_run(plan2._pplan, plan2._pargs, None)
    assert st == _lib.FMHA_ERR_INVALID_ARG and "differs from the plan" in h.last_error(), (st, h.last_error())
    # the patched call of the plan's shape passes the checks of the args: without a GPU it
    # stops at the device query, with one at the missing workspace
    plan.fill(call["q"], call["k_cache"], call["v_cache"], seqlens_k=call["seqlens_k"], out=T(q.shape))
    st = lib.fmha_decode_run(plan._pplan, plan._pargs, None)
    msg = h.last_error()
    assert (st == _lib.FMHA_ERR_DEVICE) or (st == _lib.FMHA_ERR_INVALID_ARG and "need a workspace" in msg), \
        (st, msg)



if __name__ == "__main__":
    sys.exit(run_tests(globals()))
