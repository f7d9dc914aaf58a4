"""Host-side tests of the fmha_tile package: no GPU and no PyTorch needed.

  - the ctypes structures against a C compiler (sizeof/offsetof of every
    mirrored field of api.h, compiled here with cc);
  - argument checks, mask mapping and stride computation of _args with
    stand-in tensors (the fp8 forward's dtypes and descales included), and
    those of batch_prefill (_prefill.prefill_args:
    fp16/bf16 and fp8 caches, descales per tensor and per page), and the
    backward's traits and args (_bwd.bwd_structs);
  - with build/libfmha_tile.so present: loading, version(), kernels() (the
    fp8 forward's Hopper rows too) and the mapping of library status codes
    to FmhaError (fmha_fwd_check and fmha_bwd_plan_make validate before they
    touch a device, so this runs without a GPU), the fp8 forward's refusals
    through the mirrored descale fields.
"""
import ctypes
import json
import math
import os
import shutil
import subprocess
import tempfile

import pytest

from host_util import REPO, FakeDevice, StandInTensor, c_compiler

from fmha_tile import _args, _bwd, _decode, _lib, _prefill
import fmha_tile


# ---- stand-in tensors -------------------------------------------------------------------
class FakeDtype(object):
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name

    def __eq__(self, other):
        return isinstance(other, FakeDtype) and other.name == self.name

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.name)


BF16, FP16, FP32, I32, I64, FP8 = (FakeDtype(n) for n in ("bfloat16", "float16", "float32", "int32",
                                                           "int64", "float8_e4m3fn"))


class FakeTensor(StandInTensor):
    """shape, stride(), dtype, device, is_cuda, data_ptr(), numel(), transpose()."""

    def __init__(self, shape, dtype=BF16, strides=None, device=None, ptr=1 << 20):
        StandInTensor.__init__(self, shape, dtype, strides, device or FakeDevice(), ptr)
        if not self.numel():
            self._ptr = 0

    def transpose(self, a, b):
        s, st = list(self.shape), list(self._strides)
        s[a], s[b] = s[b], s[a]
        st[a], st[b] = st[b], st[a]
        return FakeTensor(s, self.dtype, st, self.device, self._ptr)

    def is_contiguous(self):
        acc = 1
        for n, st in reversed(list(zip(self.shape, self._strides))):
            if n > 1 and st != acc:
                return False
            acc *= max(n, 1)
        return True


class FakeScalar(FakeTensor):
    """A 1-element CPU tensor: float() gives its value."""

    def __init__(self, value):
        FakeTensor.__init__(self, (), FP32, device=FakeDevice("cpu", None), ptr=0)
        self.value = value

    def __float__(self):
        return float(self.value)


def qkv(b=2, sq=100, sk=130, h=8, hk=2, d=64, dtype=BF16):
    return (FakeTensor((b, sq, h, d), dtype, ptr=1 << 20), FakeTensor((b, sk, hk, d), dtype, ptr=2 << 20),
            FakeTensor((b, sk, hk, d), dtype, ptr=3 << 20))


# ---- struct layout against the C compiler -------------------------------------------------
# (ctypes structure, C type, exact): exact structures must match sizeof too;
# fmha_kernel_info is read only through pointers the library returns, so the
# mirror may be a prefix of it (later families append fields).
STRUCTS = [
    (_lib.FmhaFwdArgs, "fmha_fwd_args", True),
    (_lib.FmhaFwdPlan, "fmha_fwd_plan", True),
    (_lib.FmhaKernelInfo, "fmha_kernel_info", False),
    (_prefill.FmhaBatchPrefillArgs, "fmha_batch_prefill_args", True),
    (_lib.FmhaBwdTraits, "fmha_bwd_traits", True),
    (_lib.FmhaBwdPlan, "fmha_bwd_plan", True),
    (_lib.FmhaBwdArgs, "fmha_bwd_args", True),
    (_decode.FmhaDecodeArgs, "fmha_decode_args", True),
    (_decode.FmhaDecodePlan, "fmha_decode_plan", True),
]


def _c_layout():
    cc = c_compiler()
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang) to compare the struct layout with")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "fmha_tile/api.h"',
             "int main(void) {"]
    for cls, cname, _ in STRUCTS:
        lines.append('    printf("%s sizeof %%zu\\n", sizeof(%s));' % (cname, cname))
        for fname, ftype in cls._fields_:
            lines.append('    printf("%s %s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                         % (cname, fname, cname, fname, cname, fname))
    lines += ["    return 0;", "}"]
    tmp = tempfile.mkdtemp(prefix="fmha_abi_")
    try:
        src, exe = os.path.join(tmp, "abi.c"), os.path.join(tmp, "abi")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([cc, "-std=c11", "-DFMHA_TILE_LINK_SHARED",
                            "-I" + os.path.join(REPO, "include"), src, "-o", exe],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        assert r.returncode == 0, "C layout probe failed to compile (a mirrored field missing " \
                                  "from api.h?):\n" + r.stdout
        out = subprocess.run([exe], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    layout = {}
    for line in out.splitlines():
        parts = line.split()
        if parts[1] == "sizeof":
            layout[(parts[0], None)] = int(parts[2])
        else:
            layout[(parts[0], parts[1])] = (int(parts[2]), int(parts[3]))
    return layout


@pytest.mark.parametrize("cls,cname,exact", STRUCTS, ids=[s[1] for s in STRUCTS])
def test_struct_layout_matches_c(cls, cname, exact):
    layout = _c_layout()
    for fname, ftype in cls._fields_:
        off, size = layout[(cname, fname)]
        desc = getattr(cls, fname)
        assert (desc.offset, desc.size) == (off, size), \
            "%s.%s: ctypes offset/size %d/%d, C %d/%d" % (cname, fname, desc.offset, desc.size,
                                                          off, size)
    if exact:
        assert ctypes.sizeof(cls) == layout[(cname, None)], \
            "sizeof(%s): ctypes %d, C %d (a field added to api.h?)" % (
                cname, ctypes.sizeof(cls), layout[(cname, None)])
    else:
        assert ctypes.sizeof(cls) <= layout[(cname, None)]


# ---- mask mapping ------------------------------------------------------------------------
BR, NONE = _lib.FMHA_MASK_BOTTOM_RIGHT, _lib.FMHA_MASK_NONE


@pytest.mark.parametrize("causal,window,want", [
    (False, (-1, -1), (NONE, -1, -1)),
    (False, None, (NONE, -1, -1)),
    (True, (-1, -1), (BR, -1, 0)),
    (False, (64, 0), (BR, 64, 0)),
    (False, (16, 16), (BR, 16, 16)),
    (False, (-1, 8), (BR, -1, 8)),
    (True, (32, 7), (BR, 32, 0)),       # causal forces right = 0, as in FlashAttention
    (True, [0, -1], (BR, 0, 0)),
])
def test_mask_from_flash(causal, window, want):
    assert _args.mask_from_flash(causal, window) == want


@pytest.mark.parametrize("causal,window,exc", [
    (False, (-2, 0), ValueError), (False, (0,), ValueError), (False, (1, 2, 3), ValueError),
    (False, "ab", TypeError),
    (False, (1.5, 0), TypeError), ("yes", (-1, -1), TypeError), (False, (True, 0), TypeError),
])
def test_mask_bad(causal, window, exc):
    with pytest.raises(exc):
        _args.mask_from_flash(causal, window)


# ---- batch mode ------------------------------------------------------------------------------
def test_batch_contiguous_bshd():
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, causal=True)
    a = p.args
    assert (a.dtype, a.is_group_mode, a.batch, a.nhead_q, a.nhead_k) == (_lib.FMHA_DTYPE_BF16, 0, 2, 8, 2)
    assert (a.seqlen_q, a.seqlen_k, a.max_seqlen_q, a.hdim_q, a.hdim_v) == (100, 130, 100, 64, 64)
    assert (a.stride_q, a.nhead_stride_q, a.batch_stride_q) == (8 * 64, 64, 100 * 8 * 64)
    assert (a.stride_k, a.nhead_stride_k, a.batch_stride_k) == (2 * 64, 64, 130 * 2 * 64)
    assert (a.stride_v, a.nhead_stride_v, a.batch_stride_v) == (2 * 64, 64, 130 * 2 * 64)
    assert (a.q, a.k, a.v) == (1 << 20, 2 << 20, 3 << 20)
    assert (a.mask_type, a.window_left, a.window_right) == (BR, -1, 0)
    assert a.scale == pytest.approx(1 / 8.0)
    assert a.logits_soft_cap == 0.0 and a.alibi_slopes is None
    assert p.out_shape == (2, 100, 8, 64) and p.lse_shape == (2, 8, 100)
    assert not p.empty_q and not p.empty_k


def test_batch_bhsd_view():
    # [b, h, s, d] tensors seen as [b, s, h, d]: non-contiguous views
    q = FakeTensor((2, 8, 100, 64)).transpose(1, 2)
    k = FakeTensor((2, 2, 130, 64), ptr=2 << 20).transpose(1, 2)
    v = FakeTensor((2, 2, 130, 64), ptr=3 << 20).transpose(1, 2)
    a = _args.batch_problem(q, k, v).args
    assert (a.stride_q, a.nhead_stride_q, a.batch_stride_q) == (64, 100 * 64, 8 * 100 * 64)
    assert (a.stride_k, a.nhead_stride_k, a.batch_stride_k) == (64, 130 * 64, 2 * 130 * 64)
    assert a.mask_type == NONE


def test_size_one_dims_get_stride_zero():
    # decode-like: one query, one batch entry, one KV head; odd strides on size-1 dims
    q = FakeTensor((1, 1, 4, 128), strides=(3, 5, 128, 1))
    k = FakeTensor((1, 50, 1, 128), strides=(7, 128, 1, 1), ptr=2 << 20)
    v = FakeTensor((1, 50, 1, 128), ptr=3 << 20)
    a = _args.batch_problem(q, k, v).args
    assert (a.batch_stride_q, a.stride_q, a.nhead_stride_q) == (0, 0, 128)
    assert (a.batch_stride_k, a.stride_k, a.nhead_stride_k) == (0, 128, 0)


def test_batch_options():
    q, k, v = qkv(d=128)
    slopes = FakeTensor((2, 8), FP32, ptr=4 << 20)
    a = _args.batch_problem(q, k, v, window=(32, 4), softcap=30.0, alibi_slopes=slopes,
                            scale=0.5).args
    assert (a.mask_type, a.window_left, a.window_right) == (BR, 32, 4)
    assert a.logits_soft_cap == 30.0 and a.scale == 0.5
    assert (a.alibi_slopes, a.alibi_batch_stride) == (4 << 20, 8)
    a = _args.batch_problem(q, k, v, alibi_slopes=FakeTensor((8,), FP32, ptr=4 << 20)).args
    assert (a.alibi_slopes, a.alibi_batch_stride) == (4 << 20, 0)
    assert a.scale == pytest.approx(1 / math.sqrt(128))


def test_fp16_and_gqa_ratios():
    for hk in (1, 2, 4, 8):
        q, k, v = qkv(h=8, hk=hk, dtype=FP16)
        a = _args.batch_problem(q, k, v).args
        assert (a.dtype, a.nhead_k) == (_lib.FMHA_DTYPE_FP16, hk)


def test_empty_flags():
    q, k, v = qkv(sq=0)
    assert _args.batch_problem(q, k, v).empty_q
    q, k, v = qkv(b=0)
    assert _args.batch_problem(q, k, v).empty_q
    q, k, v = qkv(sk=0)
    p = _args.batch_problem(q, k, v)
    assert p.empty_k and not p.empty_q
    c = p.check_args()     # placeholders for the NULL data pointers of empty k and v
    assert (c.k, c.v) == (_args.PLACEHOLDER_PTR, _args.PLACEHOLDER_PTR)
    assert p.args.k is None   # the original is untouched


def _bad(exc, match, **kw):
    q, k, v = qkv()
    args = dict(q=q, k=k, v=v)
    args.update(kw)
    with pytest.raises(exc, match=match):
        _args.batch_problem(**args)


def test_batch_bad_inputs():
    _bad(TypeError, "torch.Tensor", q="not a tensor")
    _bad(ValueError, "4 dimensions", q=FakeTensor((2, 100, 64)))
    _bad(TypeError, "float16 or torch.bfloat16", q=FakeTensor((2, 100, 8, 64), FP32))
    _bad(TypeError, "share one dtype", k=FakeTensor((2, 130, 2, 64), FP16))
    _bad(ValueError, "CUDA device", v=FakeTensor((2, 130, 2, 64), device=FakeDevice("cpu", None)))
    _bad(ValueError, "one device", k=FakeTensor((2, 130, 2, 64), device=FakeDevice("cuda", 1)))
    _bad(ValueError, "unit stride", q=FakeTensor((2, 100, 8, 64), strides=(100 * 8 * 128, 8 * 128, 128, 2)))
    _bad(ValueError, "multiple of the number of KV heads", k=FakeTensor((2, 130, 3, 64)),
         v=FakeTensor((2, 130, 3, 64)))
    _bad(ValueError, "batch sizes differ", k=FakeTensor((3, 130, 2, 64)))
    _bad(ValueError, "same seqlen and heads", v=FakeTensor((2, 131, 2, 64)))
    _bad(ValueError, "head dim", k=FakeTensor((2, 130, 2, 128)), v=FakeTensor((2, 130, 2, 128)))
    _bad(ValueError, "softcap", softcap=-1.0)
    _bad(ValueError, "softcap", softcap=float("nan"))
    _bad(TypeError, "softcap", softcap="big")
    _bad(ValueError, "scale", scale=0.0)
    _bad(ValueError, "scale", scale=float("inf"))
    _bad(TypeError, "alibi_slopes must be torch.float32", alibi_slopes=FakeTensor((8,), BF16))
    _bad(ValueError, "alibi_slopes must have shape", alibi_slopes=FakeTensor((4,), FP32))
    _bad(ValueError, "alibi_slopes must have shape", alibi_slopes=FakeTensor((3, 8), FP32))
    _bad(ValueError, "window", window=(5, -3))


def test_outputs():
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v)
    with pytest.raises(ValueError, match="out must have shape"):
        p.check_out(FakeTensor((2, 100, 8, 32)), q)
    with pytest.raises(TypeError, match="dtype of q"):
        p.check_out(FakeTensor((2, 100, 8, 64), FP16), q)
    with pytest.raises(TypeError, match="float32"):
        p.check_lse(FakeTensor((2, 8, 100), BF16), q)
    with pytest.raises(ValueError, match="out_lse must have shape"):
        p.check_lse(FakeTensor((2, 100, 8), FP32), q)
    with pytest.raises(ValueError, match="overlap"):
        p.check_out(FakeTensor((2, 100, 8, 64), strides=(0, 512, 64, 1)), q)
    with pytest.raises(ValueError, match="overlap"):
        p.check_lse(FakeTensor((2, 8, 100), FP32, strides=(800, 0, 1)), q)
    # out as a [b, s, h, d] view of a [b, h, s, d] buffer; lse padded rows
    o = FakeTensor((2, 8, 100, 64), ptr=5 << 20).transpose(1, 2)
    lse = FakeTensor((2, 8, 100), FP32, strides=(8 * 128, 128, 1), ptr=6 << 20)
    p.check_out(o, q)
    p.check_lse(lse, q)
    p.set_outputs(o, lse)
    a = p.args
    assert (a.o, a.stride_o, a.nhead_stride_o, a.batch_stride_o) == (5 << 20, 64, 6400, 51200)
    assert (a.lse, a.nhead_stride_lse, a.batch_stride_lse) == (6 << 20, 128, 1024)
    p.set_outputs(o, None)
    assert a.lse is None


# ---- the fp8 (e4m3) forward ---------------------------------------------------------------------
def descale(ptr, shape=(1,), dtype=FP32, device=None):
    return FakeTensor(shape, dtype, device=device, ptr=ptr)


def test_fp8_batch_args():
    q, k, v = qkv(d=128, dtype=FP8)
    p = _args.batch_problem(q, k, v, causal=True, q_descale=descale(30 << 20),
                            v_descale=descale(32 << 20, shape=()))
    a = p.args
    assert a.dtype == _lib.FMHA_DTYPE_FP8 and p.fp8
    assert (a.q_descale, a.k_descale, a.v_descale) == (30 << 20, None, 32 << 20)
    # strides in elements (= bytes for e4m3), as for 16-bit inputs
    assert (a.stride_q, a.nhead_stride_q, a.batch_stride_q) == (8 * 128, 128, 100 * 8 * 128)
    assert p.out_shape == (2, 100, 8, 128)
    assert p.out_dtype(_FakeTorch(), q) == BF16          # the fp8 forward writes bf16
    p.check_out(FakeTensor((2, 100, 8, 128), BF16), q)
    with pytest.raises(TypeError, match="torch.bfloat16"):
        p.check_out(FakeTensor((2, 100, 8, 128), FP8), q)
    a = _args.batch_problem(q, k, v).args                 # descales optional
    assert (a.q_descale, a.k_descale, a.v_descale) == (None, None, None)
    q16, k16, v16 = qkv()
    p16 = _args.batch_problem(q16, k16, v16)
    assert not p16.fp8 and p16.out_dtype(_FakeTorch(), q16) == BF16
    q16, k16, v16 = qkv(dtype=FP16)
    assert _args.batch_problem(q16, k16, v16).out_dtype(_FakeTorch(), q16) == FP16


def test_fp8_head_descale_args():
    """[batch, nhead_k] descales (FlashAttention-3's): their strides reach the
    args; a dimension of extent 1 gets stride 0."""
    q, k, v = qkv(d=128, dtype=FP8)                       # batch 2, nhead_k 2
    a = _args.batch_problem(q, k, v, q_descale=descale(30 << 20, shape=(2, 2)),
                            k_descale=descale(31 << 20, shape=(2, 2))).args
    assert (a.q_descale, a.k_descale, a.v_descale) == (30 << 20, 31 << 20, None)
    assert (a.descale_batch_stride, a.descale_head_stride) == (2, 1)
    t = FakeTensor((2, 2), FP32, strides=(1, 2), ptr=32 << 20)
    a = _args.batch_problem(q, k, v, v_descale=t).args
    assert (a.descale_batch_stride, a.descale_head_stride) == (1, 2)
    q1, k1, v1 = qkv(b=1, d=128, dtype=FP8)
    a = _args.batch_problem(q1, k1, v1, v_descale=FakeTensor((1, 2), FP32, strides=(7, 3), ptr=33 << 20)).args
    assert (a.descale_batch_stride, a.descale_head_stride) == (0, 3)
    a = _args.batch_problem(q, k, v, q_descale=descale(30 << 20)).args
    assert (a.descale_batch_stride, a.descale_head_stride) == (0, 0)
    with pytest.raises(ValueError, match="all per tensor or all"):
        _args.batch_problem(q, k, v, q_descale=descale(30 << 20), k_descale=descale(31 << 20, shape=(2, 2)))
    with pytest.raises(ValueError, match="same strides"):
        _args.batch_problem(q, k, v, q_descale=descale(30 << 20, shape=(2, 2)), k_descale=t)
    with pytest.raises(ValueError, match="one element"):   # [batch, nhead_q]
        _args.batch_problem(q, k, v, q_descale=descale(30 << 20, shape=(2, 8)))


def test_fp8_v_kmajor_args():
    """v_kmajor: v is V^T [b, h_k, d, keys]; hdim_v is its third dim, the V
    strides are its d-row, head and batch strides; padded key rows accepted."""
    q, k, _ = qkv(sk=130, d=128, dtype=FP8)              # keys 130 -> 144
    vt = FakeTensor((2, 2, 128, 160), FP8, ptr=3 << 20)   # 16 keys of row padding
    p = _args.batch_problem(q, k, vt, v_kmajor=True)
    a = p.args
    assert (a.v_kmajor, a.hdim_v, a.v) == (1, 128, 3 << 20)
    assert (a.stride_v, a.nhead_stride_v, a.batch_stride_v) == (160, 128 * 160, 2 * 128 * 160)
    assert (a.stride_k, a.nhead_stride_k) == (2 * 128, 128)   # K unchanged
    assert p.out_shape == (2, 100, 8, 128)
    assert _args.batch_problem(q, k, FakeTensor((2, 2, 128, 144), FP8), v_kmajor=True).args.stride_v == 144
    assert _args.batch_problem(*qkv(d=128, dtype=FP8)).args.v_kmajor == 0
    with pytest.raises(ValueError, match="keys >= 144"):
        _args.batch_problem(q, k, FakeTensor((2, 2, 128, 130), FP8), v_kmajor=True)
    with pytest.raises(ValueError, match="keys >= 144"):
        _args.batch_problem(q, k, FakeTensor((2, 1, 128, 144), FP8), v_kmajor=True)   # heads
    with pytest.raises(ValueError, match="batch sizes differ"):
        _args.batch_problem(q, k, FakeTensor((1, 2, 128, 144), FP8), v_kmajor=True)
    with pytest.raises(ValueError, match="unit stride"):
        _args.batch_problem(q, k, FakeTensor((2, 2, 128, 144), FP8).transpose(2, 3), v_kmajor=True)
    q16, k16, _ = qkv(sk=130, d=128)
    with pytest.raises(ValueError, match="v_kmajor=True needs fp8"):
        _args.batch_problem(q16, k16, FakeTensor((2, 2, 128, 144), BF16), v_kmajor=True)


def test_fp8_varlen_args():
    q, k, v = (FakeTensor(t.shape, FP8, ptr=t.data_ptr()) for t in varlen(d=64)[:3])
    cq, ck = varlen()[3:]
    p = _args.varlen_problem(q, k, v, cq, ck, 200, 250, k_descale=descale(31 << 20))
    a = p.args
    assert (a.dtype, a.is_group_mode, p.fp8) == (_lib.FMHA_DTYPE_FP8, 1, True)
    assert (a.q_descale, a.k_descale, a.v_descale) == (None, 31 << 20, None)
    assert (a.stride_k, a.nhead_stride_k, a.batch_stride_k) == (4 * 64, 64, 0)


def test_fp8_bad_inputs():
    q, k, v = qkv(d=128, dtype=FP8)
    k16 = FakeTensor(k.shape, BF16)
    with pytest.raises(TypeError, match="share one dtype"):
        _args.batch_problem(q, k16, v)
    with pytest.raises(TypeError, match="share one dtype"):
        _args.batch_problem(FakeTensor(q.shape, BF16), k, v)
    q16, k16, v16 = qkv(d=128)
    for name in ("q_descale", "k_descale", "v_descale"):
        with pytest.raises(ValueError, match="%s needs fp8" % name):
            _args.batch_problem(q16, k16, v16, **{name: descale(30 << 20)})
    bad = [(TypeError, "1-element torch.float32 tensor", 0.5),
           (TypeError, "must be torch.float32", descale(30 << 20, dtype=FP16)),
           (ValueError, "one element", descale(30 << 20, shape=(2,))),
           (ValueError, "one element", descale(30 << 20, shape=(1, 3))),
           (ValueError, "CUDA device", descale(30 << 20, device=FakeDevice("cpu", None))),
           (ValueError, "one device", descale(30 << 20, device=FakeDevice("cuda", 1)))]
    for exc, match, d in bad:
        for name in ("q_descale", "k_descale", "v_descale"):
            with pytest.raises(exc, match=match):
                _args.batch_problem(q, k, v, **{name: d})
    cq, ck = varlen()[3:]
    qv = FakeTensor((300, 8, 64), FP8)
    kv = FakeTensor((400, 4, 64), FP8)
    with pytest.raises(ValueError, match="one element"):
        _args.varlen_problem(qv, kv, kv, cq, ck, 10, 10, v_descale=descale(1 << 20, shape=(4,)))
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        _args.batch_problem(*qkv(dtype=FP32))


# ---- batch prefill (prefill_args) ------------------------------------------------------------
class _ToDevice(object):
    """Stand-in for torch.full((1,), v, ...): records the values, hands out tensors."""

    def __init__(self):
        self.values = []

    def __call__(self, v):
        self.values.append(v)
        return FakeTensor((1,), FP32, ptr=(40 + len(self.values)) << 20)


def paged(total_q=120, h=8, hk=2, d=128, pages=20, page=16, dtype=BF16, kv_dtype=None, batch=2):
    """q [total_q, h, d], NHD caches [pages, page, hk, d], SGLang table tensors."""
    kvd = kv_dtype or dtype
    return dict(q=FakeTensor((total_q, h, d), dtype, ptr=1 << 20),
                k_cache=FakeTensor((pages, page, hk, d), kvd, ptr=2 << 20),
                v_cache=FakeTensor((pages, page, hk, d), kvd, ptr=3 << 20),
                cu_seqlens_q=FakeTensor((batch + 1,), I32, ptr=7 << 20), max_seqlen_q=100,
                kv_indptr=FakeTensor((batch + 1,), I32, ptr=8 << 20),
                kv_page_indices=FakeTensor((pages,), I32, ptr=9 << 20),
                kv_last_page_len=FakeTensor((batch,), I32, ptr=10 << 20))


def test_prefill_args_bf16():
    a, odt, keep = _prefill.prefill_args(**paged())
    assert (a.q_dtype, a.kv_dtype, a.kv_scale) == (_lib.FMHA_DTYPE_BF16, _lib.FMHA_DTYPE_BF16, 0)
    assert odt == "torch.bfloat16" and keep == []
    assert (a.batch, a.nhead_q, a.nhead_k, a.max_seqlen_q, a.hdim_q) == (2, 8, 2, 100, 128)
    assert (a.page_stride_k, a.token_stride_k, a.nhead_stride_k) == (16 * 2 * 128, 2 * 128, 128)
    assert (a.num_total_pages, a.page_size, a.kv_layout) == (20, 16, _prefill.FMHA_KV_LAYOUT_LINEAR)
    assert (a.k_descale, a.v_descale, a.q_descale, a.k_page_descale) == (None, None, None, None)
    assert (a.mask_type, a.window_left, a.window_right) == (BR, -1, 0)


def test_prefill_args_sinks():
    kw = paged()
    a, _, keep = _prefill.prefill_args(sinks=FakeTensor((8,), FP32, ptr=11 << 20), **kw)
    assert a.sinks == 11 << 20 and len(keep) == 1
    a, _, keep = _prefill.prefill_args(**kw)
    assert a.sinks is None and keep == []
    with pytest.raises(ValueError, match="one logit per query head"):
        _prefill.prefill_args(sinks=FakeTensor((2,), FP32), **kw)
    with pytest.raises(TypeError, match="float32"):
        _prefill.prefill_args(sinks=FakeTensor((8,), BF16), **kw)


def test_prefill_args_fp8_per_tensor():
    to_dev = _ToDevice()
    kw = paged(kv_dtype=FP8)
    a, odt, keep = _prefill.prefill_args(k_descale=0.37, v_descale=FakeScalar(1.9), to_device=to_dev, **kw)
    assert (a.q_dtype, a.kv_dtype) == (_lib.FMHA_DTYPE_BF16, _lib.FMHA_DTYPE_FP8)
    assert odt == "torch.bfloat16"        # output bf16 whatever the caches
    assert a.kv_scale == _prefill.FMHA_KV_SCALE_PER_TENSOR
    assert to_dev.values == [0.37, 1.9]   # numbers and CPU tensors become device tensors
    assert (a.k_descale, a.v_descale) == (41 << 20, 42 << 20) and len(keep) == 2
    assert a.q_descale is None and a.k_page_descale is None
    # fp8 strides are in elements (= bytes), as for 16-bit caches
    assert (a.page_stride_v, a.token_stride_v, a.nhead_stride_v) == (16 * 2 * 128, 2 * 128, 128)
    # device tensors: 0-dim and 1-element float32 on q's device are passed as they are
    kd, vd = FakeTensor((), FP32, ptr=50 << 20), FakeTensor((1,), FP32, ptr=51 << 20)
    a, _, keep = _prefill.prefill_args(k_descale=kd, v_descale=vd, to_device=None, **kw)
    assert (a.k_descale, a.v_descale) == (50 << 20, 51 << 20)


def test_prefill_args_fp8_q_and_descale():
    kw = paged(dtype=FP8, kv_dtype=FP8)
    to_dev = _ToDevice()
    a, odt, keep = _prefill.prefill_args(q_descale=0.6, to_device=to_dev, **kw)
    assert (a.q_dtype, a.kv_dtype, a.kv_scale) == (_lib.FMHA_DTYPE_FP8, _lib.FMHA_DTYPE_FP8,
                                                   _prefill.FMHA_KV_SCALE_NONE)
    assert odt == "torch.bfloat16" and a.q_descale == 41 << 20 and to_dev.values == [0.6]
    a, _, _ = _prefill.prefill_args(**kw)          # q_descale optional (1)
    assert a.q_descale is None
    qd = FakeTensor((1,), FP32, ptr=60 << 20)
    a, _, _ = _prefill.prefill_args(q_descale=qd, **kw)
    assert a.q_descale == 60 << 20


def test_prefill_args_fp8_per_page_strides():
    kw = paged(kv_dtype=FP8, pages=20, hk=2)
    # [pages, hk] views with any strides: a padded row, and a transposed [hk, pages + 3] buffer
    kd = FakeTensor((20, 2), FP32, strides=(5, 1), ptr=70 << 20)
    vd = FakeTensor((20, 2), FP32, strides=(5, 1), ptr=71 << 20)
    a, _, keep = _prefill.prefill_args(k_descale=kd, v_descale=vd, **kw)
    assert a.kv_scale == _prefill.FMHA_KV_SCALE_PER_PAGE
    assert (a.k_page_descale, a.v_page_descale) == (70 << 20, 71 << 20)
    assert (a.descale_page_stride, a.descale_nhead_stride) == (5, 1)
    assert a.k_descale is None and a.v_descale is None and len(keep) == 2
    kd = FakeTensor((20, 2), FP32, strides=(1, 23), ptr=72 << 20)
    vd = FakeTensor((20, 2), FP32, strides=(1, 23), ptr=73 << 20)
    a, _, _ = _prefill.prefill_args(k_descale=kd, v_descale=vd, **kw)
    assert (a.descale_page_stride, a.descale_nhead_stride) == (1, 23)
    # one KV head: the head stride of a size-1 dimension is meaningless, passed as 0
    kw = paged(kv_dtype=FP8, pages=20, hk=1, h=4)
    a, _, _ = _prefill.prefill_args(k_descale=FakeTensor((20, 1), FP32, strides=(4, 7)),
                                    v_descale=FakeTensor((20, 1), FP32, strides=(4, 7)), **kw)
    assert (a.descale_page_stride, a.descale_nhead_stride) == (4, 0)


def _bad_prefill(exc, match, **kw):
    base = paged(kv_dtype=FP8)
    base["to_device"] = _ToDevice()
    base.update(kw)
    with pytest.raises(exc, match=match):
        _prefill.prefill_args(**base)


def test_prefill_args_bad_dtypes_and_descales():
    pd = FakeTensor((20, 2), FP32)
    _bad_prefill(TypeError, "bfloat16 or torch.float8_e4m3fn", q=FakeTensor((120, 8, 128), FP16))
    _bad_prefill(TypeError, "share one dtype", v_cache=FakeTensor((20, 16, 2, 128), BF16))
    _bad_prefill(TypeError, "fp8 queries need fp8 caches", **{k: v for k, v in paged(dtype=BF16).items()
                                                              if k != "q"},
                 q=FakeTensor((120, 8, 128), FP8))
    _bad_prefill(TypeError, "float16, torch.bfloat16 or torch.float8_e4m3fn",
                 k_cache=FakeTensor((20, 16, 2, 128), FP32), v_cache=FakeTensor((20, 16, 2, 128), FP32))
    _bad_prefill(ValueError, "together", k_descale=0.5)
    _bad_prefill(ValueError, "together", v_descale=pd)
    _bad_prefill(ValueError, "per tensor or both per page", k_descale=0.5, v_descale=pd)
    _bad_prefill(ValueError, "need fp8", k_descale=0.5, v_descale=0.5, **paged())
    _bad_prefill(ValueError, "q_descale needs fp8", q_descale=0.5)
    _bad_prefill(ValueError, "q_descale needs fp8", q_descale=0.5, **paged())
    _bad_prefill(ValueError, "finite and > 0", k_descale=0.0, v_descale=1.0)
    _bad_prefill(ValueError, "finite and > 0", k_descale=float("nan"), v_descale=1.0)
    _bad_prefill(TypeError, "got bool", k_descale=True, v_descale=1.0)
    _bad_prefill(TypeError, "number or a tensor", k_descale="x", v_descale=1.0)
    _bad_prefill(ValueError, "0-dim / 1-element", k_descale=FakeTensor((3,), FP32), v_descale=1.0)
    _bad_prefill(TypeError, "float32", k_descale=FakeTensor((1,), BF16), v_descale=1.0)
    _bad_prefill(ValueError, "one device", k_descale=FakeTensor((1,), FP32, device=FakeDevice("cuda", 1)),
                 v_descale=1.0)
    _bad_prefill(ValueError, "shape \\(num_pages, nhead_k\\)", k_descale=FakeTensor((19, 2), FP32),
                 v_descale=FakeTensor((19, 2), FP32))
    _bad_prefill(TypeError, "float32", k_descale=FakeTensor((20, 2), BF16), v_descale=FakeTensor((20, 2), BF16))
    _bad_prefill(ValueError, "CUDA device", k_descale=FakeTensor((20, 2), FP32, device=FakeDevice("cpu", None)),
                 v_descale=pd)
    _bad_prefill(ValueError, "same strides", k_descale=FakeTensor((20, 2), FP32, strides=(1, 20)), v_descale=pd)
    _bad_prefill(ValueError, "NHD' or 'HND", kv_layout="VECTORIZED",
                 k_cache=FakeTensor((20, 2, 16, 16, 8), FP8), v_cache=FakeTensor((20, 2, 2, 128, 8), FP8))


# ---- group (varlen) mode -----------------------------------------------------------------------
def varlen(total_q=300, total_k=400, h=8, hk=4, d=64, batch=3):
    return (FakeTensor((total_q, h, d), ptr=1 << 20), FakeTensor((total_k, hk, d), ptr=2 << 20),
            FakeTensor((total_k, hk, d), ptr=3 << 20), FakeTensor((batch + 1,), I32, ptr=7 << 20),
            FakeTensor((batch + 1,), I32, ptr=8 << 20))


def test_varlen_args():
    q, k, v, cq, ck = varlen()
    p = _args.varlen_problem(q, k, v, cq, ck, 200, 250, causal=True)
    a = p.args
    assert (a.is_group_mode, a.batch, a.nhead_q, a.nhead_k, a.max_seqlen_q) == (1, 3, 8, 4, 200)
    assert (a.seqstart_q, a.seqstart_k) == (7 << 20, 8 << 20)
    assert (a.stride_q, a.nhead_stride_q, a.batch_stride_q) == (8 * 64, 64, 0)
    assert (a.stride_k, a.nhead_stride_k, a.batch_stride_k) == (4 * 64, 64, 0)
    assert p.out_shape == (300, 8, 64) and p.lse_shape == (8, 300)
    lse = FakeTensor((8, 300), FP32, ptr=6 << 20)
    p.set_outputs(FakeTensor((300, 8, 64), ptr=5 << 20), lse)
    assert (a.stride_o, a.nhead_stride_o, a.batch_stride_o) == (512, 64, 0)
    assert (a.nhead_stride_lse, a.batch_stride_lse) == (300, 0)


def test_varlen_bad_inputs():
    q, k, v, cq, ck = varlen()
    with pytest.raises(TypeError, match="int32"):
        _args.varlen_problem(q, k, v, FakeTensor((4,), I64), ck, 10, 10)
    with pytest.raises(ValueError, match="1-D"):
        _args.varlen_problem(q, k, v, FakeTensor((2, 2), I32), ck, 10, 10)
    with pytest.raises(ValueError, match="entries"):
        _args.varlen_problem(q, k, v, cq, FakeTensor((5,), I32), 10, 10)
    with pytest.raises(ValueError, match="CUDA device"):
        _args.varlen_problem(q, k, v, FakeTensor((4,), I32, device=FakeDevice("cpu", None)), ck, 10, 10)
    with pytest.raises(ValueError, match="max_seqlen_q"):
        _args.varlen_problem(q, k, v, cq, ck, -1, 10)
    with pytest.raises(TypeError, match="max_seqlen_k"):
        _args.varlen_problem(q, k, v, cq, ck, 10, 2.5)
    with pytest.raises(ValueError, match="3 dimensions"):
        _args.varlen_problem(FakeTensor((1, 300, 8, 64)), k, v, cq, ck, 10, 10)
    with pytest.raises(ValueError, match="contiguous"):
        _args.varlen_problem(q, k, v, FakeTensor((4,), I32, strides=(2,)), ck, 10, 10)


def test_varlen_empty():
    q, k, v, cq, ck = varlen(total_q=0)
    assert _args.varlen_problem(q, k, v, cq, ck, 0, 5).empty_q
    q, k, v, cq, ck = varlen(batch=0)
    assert _args.varlen_problem(q, k, v, cq, ck, 10, 5).empty_q
    q, k, v, cq, ck = varlen(total_k=0)
    p = _args.varlen_problem(q, k, v, cq, ck, 10, 0)
    assert p.empty_k and not p.empty_q


# ---- backward (bwd_structs) ----------------------------------------------------------------------
def _grads_like(*ts):
    return [FakeTensor(t.shape, t.dtype, ptr=(20 + i) << 20) for i, t in enumerate(ts)]


def test_bwd_structs_batch():
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, causal=True, softcap=30.0, scale=0.1)
    o = FakeTensor(p.out_shape, ptr=5 << 20)
    lse = FakeTensor((2, 8, 104), FP32, ptr=6 << 20)   # padded rows: any row stride
    dout = FakeTensor(p.out_shape, ptr=4 << 20)
    dq, dk, dv = _grads_like(q, k, v)
    t, a = _bwd.bwd_structs(p, q, k, v, o, lse, dout, dq, dk, dv, deterministic=True)
    assert (t.dtype, t.is_group_mode, t.batch, t.nhead_q, t.nhead_k) == (_lib.FMHA_DTYPE_BF16, 0, 2, 8, 2)
    assert (t.seqlen_q, t.seqlen_k, t.hdim_q, t.hdim_v) == (100, 130, 64, 64)
    assert (t.mask_type, t.window_left, t.window_right) == (BR, -1, 0)
    assert (t.has_logits_soft_cap, t.has_alibi, t.is_deterministic) == (1, 0, 1)
    for f, _ in _lib.FmhaBwdTraits._fields_:
        if hasattr(a, f):
            assert getattr(a, f) == getattr(t, f), f
    assert (a.q, a.k, a.v, a.o, a.dout, a.lse) == (1 << 20, 2 << 20, 3 << 20, 5 << 20, 4 << 20, 6 << 20)
    assert (a.dq, a.dk, a.dv) == (20 << 20, 21 << 20, 22 << 20)
    assert (a.stride_q, a.nhead_stride_q, a.batch_stride_q) == (8 * 64, 64, 100 * 8 * 64)
    assert (a.stride_do, a.nhead_stride_do, a.batch_stride_do) == (8 * 64, 64, 100 * 8 * 64)
    assert (a.stride_dq, a.nhead_stride_dq, a.batch_stride_dq) == (8 * 64, 64, 100 * 8 * 64)
    assert (a.stride_dk, a.nhead_stride_dk, a.batch_stride_dk) == (2 * 64, 64, 130 * 2 * 64)
    assert (a.stride_dv, a.nhead_stride_dv, a.batch_stride_dv) == (2 * 64, 64, 130 * 2 * 64)
    assert (a.nhead_stride_lse, a.batch_stride_lse) == (104, 8 * 104)
    assert a.scale == pytest.approx(0.1) and a.logits_soft_cap == 30.0 and a.alibi_slopes is None
    assert a.seqstart_q is None and a.workspace is None and a.workspace_size == 0
    # a [b, s, h, d] view of [b, h, s, d] q and a plain problem
    qt = FakeTensor((2, 8, 100, 64), ptr=1 << 20).transpose(1, 2)
    p = _args.batch_problem(qt, k, v)
    t, a = _bwd.bwd_structs(p, qt, k, v, o, lse, dout, dq, dk, dv, deterministic=False)
    assert (a.stride_q, a.nhead_stride_q, a.batch_stride_q) == (64, 100 * 64, 8 * 100 * 64)
    assert (t.mask_type, t.has_logits_soft_cap, t.is_deterministic) == (NONE, 0, 0)


def test_bwd_structs_varlen():
    q, k, v, cq, ck = varlen()
    p = _args.varlen_problem(q, k, v, cq, ck, 200, 250, window=(32, 4))
    o = FakeTensor(p.out_shape, ptr=5 << 20)
    lse = FakeTensor(p.lse_shape, FP32, ptr=6 << 20)
    dq, dk, dv = _grads_like(q, k, v)
    t, a = _bwd.bwd_structs(p, q, k, v, o, lse, o, dq, dk, dv, deterministic=False)
    assert (t.is_group_mode, t.batch, t.nhead_q, t.nhead_k) == (1, 3, 8, 4)
    # totals from the tensors (bounds of seqstart[batch]), max lengths from the caller
    assert (t.seqlen_q, t.seqlen_k, t.max_seqlen_q, t.max_seqlen_k) == (300, 400, 200, 250)
    assert (t.mask_type, t.window_left, t.window_right) == (BR, 32, 4)
    assert (a.seqlen_q, a.seqlen_k, a.max_seqlen_q, a.max_seqlen_k) == (300, 400, 200, 250)
    assert (a.seqstart_q, a.seqstart_k) == (7 << 20, 8 << 20)
    assert (a.stride_dk, a.nhead_stride_dk, a.batch_stride_dk) == (4 * 64, 64, 0)
    assert (a.stride_o, a.nhead_stride_o, a.batch_stride_o) == (8 * 64, 64, 0)
    assert (a.nhead_stride_lse, a.batch_stride_lse) == (300, 0)


def test_bwd_structs_alibi():
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, alibi_slopes=FakeTensor((8,), FP32, ptr=9 << 20))
    dq, dk, dv = _grads_like(q, k, v)
    t, a = _bwd.bwd_structs(p, q, k, v, q, FakeTensor(p.lse_shape, FP32), q, dq, dk, dv, False)
    assert t.has_alibi == 1 and a.alibi_slopes == 9 << 20 and a.alibi_batch_stride == 0


def test_bias_args_batch():
    # [1, h, s_q, s_k] fp32: broadcast over the batch (stride 0), dbias summed over it
    q, k, v = qkv()
    bias = FakeTensor((1, 8, 100, 130), FP32, ptr=9 << 20)
    p = _args.batch_problem(q, k, v, causal=True)
    _args.set_bias(p, bias, q)
    a = p.args
    assert (a.bias, a.bias_dtype) == (9 << 20, _lib.FMHA_DTYPE_FP32)
    assert (a.batch_stride_bias, a.nhead_stride_bias, a.stride_bias) == (0, 100 * 130, 130)
    assert p.bias_bcast == _lib.FMHA_BIAS_BCAST_BATCH and p.bias_shape == (1, 8, 100, 130)
    # [s_q, s_k] bf16: missing dims read as 1, shared by entries and heads
    p = _args.batch_problem(q, k, v)
    _args.set_bias(p, FakeTensor((100, 130), BF16, ptr=9 << 20), q)
    assert (p.args.batch_stride_bias, p.args.nhead_stride_bias, p.args.stride_bias) == (0, 0, 130)
    assert p.bias_bcast == _lib.FMHA_BIAS_BCAST_BATCH | _lib.FMHA_BIAS_BCAST_HEAD
    assert p.args.bias_dtype == _lib.FMHA_DTYPE_BF16
    # full [b, h, s_q, s_k] with padded rows: nothing summed
    p = _args.batch_problem(q, k, v)
    _args.set_bias(p, FakeTensor((2, 8, 100, 130), FP16, strides=(8 * 100 * 136, 100 * 136, 136, 1)), q)
    assert (p.args.batch_stride_bias, p.args.nhead_stride_bias, p.args.stride_bias) == (8 * 100 * 136,
                                                                                         100 * 136, 136)
    assert p.bias_bcast == 0
    # the backward's traits and args: the bias as the forward's, dbias at its own strides
    dq, dk, dv = _grads_like(q, k, v)
    p = _args.batch_problem(q, k, v)
    _args.set_bias(p, FakeTensor((1, 1, 100, 130), FP32, ptr=9 << 20), q)
    db = FakeTensor((1, 1, 100, 130), FP32, ptr=10 << 20)
    t, a = _bwd.bwd_structs(p, q, k, v, q, FakeTensor(p.lse_shape, FP32), q, dq, dk, dv, True, db)
    assert (t.has_bias, t.has_dbias, t.dbias_bcast) == (1, 1, 3)
    assert (a.bias, a.bias_dtype, a.stride_bias, a.nhead_stride_bias, a.batch_stride_bias) == (
        9 << 20, _lib.FMHA_DTYPE_FP32, 130, 0, 0)
    assert (a.dbias, a.stride_dbias) == (10 << 20, 130)
    t, a = _bwd.bwd_structs(p, q, k, v, q, FakeTensor(p.lse_shape, FP32), q, dq, dk, dv, True)
    assert (t.has_bias, t.has_dbias, t.dbias_bcast, a.dbias) == (1, 0, 0, None)


def test_bias_args_varlen():
    q, k, v, cq, ck = varlen()
    p = _args.varlen_problem(q, k, v, cq, ck, 200, 250)
    _args.set_bias(p, FakeTensor((8, 300, 256), BF16, ptr=9 << 20), q)
    a = p.args
    assert (a.nhead_stride_bias, a.stride_bias, a.batch_stride_bias) == (300 * 256, 256, 0)
    assert p.bias_bcast == 0 and p.bias_shape == (8, 300, 256)
    p = _args.varlen_problem(q, k, v, cq, ck, 200, 250)
    _args.set_bias(p, FakeTensor((300, 250), FP32, ptr=9 << 20), q)
    assert (p.args.nhead_stride_bias, p.args.stride_bias) == (0, 250)
    assert p.bias_bcast == _lib.FMHA_BIAS_BCAST_HEAD
    dq, dk, dv = _grads_like(q, k, v)
    db = FakeTensor((1, 300, 250), FP32, ptr=10 << 20)
    t, a = _bwd.bwd_structs(p, q, k, v, q, FakeTensor(p.lse_shape, FP32), q, dq, dk, dv, False, db)
    assert (t.has_bias, t.has_dbias, t.dbias_bcast) == (1, 1, _lib.FMHA_BIAS_BCAST_HEAD)
    # (a dim of size 1 reads as stride 0: unused, the plan sums over it)
    assert (a.dbias, a.stride_dbias, a.nhead_stride_dbias, a.batch_stride_dbias) == (10 << 20, 250, 0, 0)


@pytest.mark.parametrize("shape,dtype,kw,exc,match", [
    ((2, 8, 100, 131), FP32, {}, ValueError, "bias must have shape"),
    ((3, 8, 100, 130), FP32, {}, ValueError, "bias must have shape"),
    ((2, 4, 100, 130), FP32, {}, ValueError, "bias must have shape"),
    ((1, 2, 8, 100, 130), FP32, {}, ValueError, "2 to 4 dims"),
    ((100, 130), I32, {}, TypeError, "bias must be torch.float16"),
    ((100, 130), FP32, {"device": FakeDevice("cpu")}, ValueError, "CUDA"),
    ((100, 130), FP32, {"strides": (1, 100)}, ValueError, "unit stride"),
])
def test_bias_bad(shape, dtype, kw, exc, match):
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v)
    with pytest.raises(exc, match=match):
        _args.set_bias(p, FakeTensor(shape, dtype, **kw), q)


def test_bias_with_alibi_refused():
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, alibi_slopes=FakeTensor((8,), FP32, ptr=9 << 20))
    with pytest.raises(ValueError, match="alibi"):
        _args.set_bias(p, FakeTensor((100, 130), FP32), q)


# ---- the library itself (no GPU needed for these calls) ----------------------------------------
def _lib_or_skip():
    try:
        return _lib.library()
    except _lib.FmhaLibraryError as e:
        pytest.skip("libfmha_tile.so not available (make lib): %s" % str(e).splitlines()[0])


def test_library_version_and_kernels():
    _lib_or_skip()
    assert fmha_tile.version().startswith("0.")
    ks = fmha_tile.kernels()
    assert ks["set"] == "fmha_lib_default"
    assert len(ks["kernels"]) == _lib.library().fmha_set_size(_lib.default_set()) > 0
    names = set(k["name"] for k in ks["kernels"])
    for dt in ("fp16", "bf16"):
        for d in (64, 128, 256):
            assert any(k["dtype"] == dt and k["hdim_q"] == d and k["mask"] and k["softcap"] and k["alibi"]
                       for k in ks["kernels"]), (dt, d)
    assert all(n.startswith("fmha_") for n in names)
    json.dumps(ks)


def test_library_status_maps_to_fmha_error():
    lib = _lib_or_skip()
    q, k, v = qkv(d=100)                # not a multiple of 8: refused before any device query
    p = _args.batch_problem(q, k, v)
    st = lib.fmha_fwd_check(_lib.default_set(), ctypes.byref(p.check_args()), None)
    assert st == _lib.FMHA_ERR_UNSUPPORTED
    with pytest.raises(fmha_tile.FmhaError) as ei:
        _lib.check_status(st, "test")
    e = ei.value
    assert isinstance(e, RuntimeError)
    assert e.status == _lib.FMHA_ERR_UNSUPPORTED and e.status_str == "unsupported"
    assert "head dim 100" in e.message and "head dim 100" in str(e)
    # misaligned strides: the library's message names the stride
    q = FakeTensor((2, 100, 8, 64), strides=(100 * 8 * 68, 8 * 68, 68, 1))
    _, k, v = qkv()
    p = _args.batch_problem(q, k, v)
    st = lib.fmha_fwd_check(_lib.default_set(), ctypes.byref(p.check_args()), None)
    assert st == _lib.FMHA_ERR_UNSUPPORTED and "stride" in _lib.last_error()


def test_library_lists_fp8_forward():
    """The library's default set has the e4m3 forward's Hopper rows."""
    _lib_or_skip()
    ks = [k for k in fmha_tile.kernels()["kernels"] if k["family"] == "fwd" and k["dtype"] == "fp8"]
    assert ks, "no fp8 forward kernel in the library's default set"
    assert all(k["pipeline"] == "wgmma" and k["arch"] == "sm90a" and "_fp8_" in k["name"] for k in ks)
    assert set(k["hdim_q"] for k in ks) == {128, 256}
    assert any(k["mask"] and k["softcap"] and k["alibi"] for k in ks)


def test_library_fp8_refusals():
    """fmha_fwd_check's fp8 refusals, before any device query: the descale
    fields of the ctypes mirror reach the library where api.h puts them."""
    lib = _lib_or_skip()
    kset = _lib.default_set()

    def status(p):
        return lib.fmha_fwd_check(kset, ctypes.byref(p.check_args()), None)

    q, k, v = qkv(d=72, dtype=FP8)                   # a multiple of 8, not of 16
    assert status(_args.batch_problem(q, k, v)) == _lib.FMHA_ERR_UNSUPPORTED
    assert "16" in _lib.last_error()
    q, k, v = qkv(d=128)
    for name in ("q_descale", "k_descale", "v_descale"):
        p = _args.batch_problem(q, k, v)              # bf16 with a descale: Python refuses it,
        setattr(p.args, name, 30 << 20)               # the library too
        assert status(p) == _lib.FMHA_ERR_INVALID_ARG, name
        assert "descale" in _lib.last_error()
    q, k, v = qkv(d=128, dtype=FP8)
    for name in ("q_descale", "k_descale", "v_descale"):
        p = _args.batch_problem(q, k, v)
        setattr(p.args, name, (30 << 20) + 2)         # not 4-byte aligned
        assert status(p) == _lib.FMHA_ERR_INVALID_ARG, name
        assert "aligned" in _lib.last_error()
    # an fp8 row stride of 8 * 130 elements: a multiple of 8, not of 16
    q = FakeTensor((2, 100, 8, 128), FP8, strides=(100 * 8 * 130, 8 * 130, 130, 1))
    assert status(_args.batch_problem(q, k, v)) == _lib.FMHA_ERR_UNSUPPORTED
    assert "stride" in _lib.last_error()
    # valid: a plan, or (no GPU here) the device error; on a GPU other than sm_90: no kernel
    st = status(_args.batch_problem(q=FakeTensor((2, 100, 8, 128), FP8), k=k, v=v,
                                    q_descale=descale(30 << 20)))
    assert st in (_lib.FMHA_OK, _lib.FMHA_ERR_DEVICE, _lib.FMHA_ERR_NO_KERNEL), _lib.last_error()


def _bwd_lib_or_skip():
    _lib_or_skip()
    try:
        return _lib.bwd_library()
    except _lib.FmhaLibraryError as e:
        pytest.skip(str(e))


def test_library_bwd_plan_refusals():
    """fmha_bwd_plan_make validates the traits before it asks for a device."""
    lib = _bwd_lib_or_skip()
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, causal=True)
    dq, dk, dv = _grads_like(q, k, v)
    lse = FakeTensor(p.lse_shape, FP32)
    t, _ = _bwd.bwd_structs(p, q, k, v, q, lse, q, dq, dk, dv, False)
    for field, value, status, text in (("has_alibi", 2, _lib.FMHA_ERR_INVALID_ARG, "has_alibi"),
                                       ("hdim_q", 100, _lib.FMHA_ERR_UNSUPPORTED, "head dim 100"),
                                       ("nhead_k", 3, _lib.FMHA_ERR_INVALID_ARG, "multiple")):
        bad = _lib.FmhaBwdTraits.from_buffer_copy(t)
        setattr(bad, field, value)
        plan = _lib.FmhaBwdPlan()
        st = lib.fmha_bwd_plan_make(_lib.default_set(), ctypes.byref(bad), ctypes.byref(plan))
        assert st == status, field
        assert text in _lib.last_error()
    # valid traits: a plan, or (no GPU here) the device error
    plan = _lib.FmhaBwdPlan()
    st = lib.fmha_bwd_plan_make(_lib.default_set(), ctypes.byref(t), ctypes.byref(plan))
    assert st in (_lib.FMHA_OK, _lib.FMHA_ERR_DEVICE), _lib.last_error()
    if st == _lib.FMHA_OK:
        assert plan.dq_dk_dv and plan.traits.batch == 2 and plan.nsplits == 1


def test_library_path_env(monkeypatch):
    monkeypatch.setattr(_lib, "_lib", None)
    monkeypatch.setenv(_lib.ENV_VAR, "/nonexistent/libfmha_tile.so")
    with pytest.raises(_lib.FmhaLibraryError, match="make lib"):
        _lib.library()


# ---- the glue of attention() with a stand-in torch module ------------------------------------------
class _FakeCuda(object):
    class _Stream(object):
        cuda_stream = 0

    def __init__(self):
        self.devices = []

    def device(self, dev):
        cuda = self

        class _Ctx(object):
            def __enter__(self):
                cuda.devices.append(dev)

            def __exit__(self, *a):
                return False
        return _Ctx()

    def current_stream(self, dev=None):
        return self._Stream()


class _FakeTorch(object):
    float32 = FP32
    bfloat16 = BF16

    def __init__(self):
        self.cuda = _FakeCuda()
        self.allocated = []

    def is_grad_enabled(self):
        return True

    def empty(self, shape, dtype=None, device=None):
        t = FakeTensor(shape, dtype, device=device, ptr=(9 + len(self.allocated)) << 20)
        t.zeroed = t.filled = None
        t.zero_ = lambda: setattr(t, "zeroed", True)
        t.fill_ = lambda x: setattr(t, "filled", x)
        self.allocated.append(t)
        return t

    def full(self, shape, value, dtype=None, device=None):
        t = self.empty(shape, dtype, device)
        t.value = value
        return t


def test_attention_glue(monkeypatch):
    """attention()/attention_varlen() through the real library with stand-in
    tensors, on calls that never launch: a head dim the library refuses (the
    launch path returns before any device work) and a problem without keys
    (validated with fmha_fwd_check; O and LSE filled by 'torch')."""
    _lib_or_skip()
    fake = _FakeTorch()
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    q, k, v = qkv(d=100)
    with pytest.raises(fmha_tile.FmhaError, match="head dim 100") as ei:
        fmha_tile.attention(q, k, v, return_lse=True)
    assert ei.value.status == _lib.FMHA_ERR_UNSUPPORTED
    assert "fmha_tile.attention" in str(ei.value)
    assert [t.shape for t in fake.allocated] == [(2, 100, 8, 100), (2, 8, 100)]
    assert fake.cuda.devices == [q.device]
    q, k, v, cq, ck = varlen(d=100)
    with pytest.raises(fmha_tile.FmhaError, match="head dim 100"):
        fmha_tile.attention_varlen(q, k, v, cq, ck, 10, 10)
    # no keys: validated, then O = 0 and LSE = -inf (or, without a GPU, the device error)
    q, k, v = qkv(sk=0)
    try:
        o, lse = fmha_tile.attention(q, k, v, return_lse=True)
    except fmha_tile.FmhaError as e:
        assert e.status == _lib.FMHA_ERR_DEVICE
    else:
        assert o.zeroed and lse.filled == -math.inf
    # grad mode with an input that requires grad: no out=/out_lse= (refused
    # before the autograd Function, which needs the real torch)
    q, k, v = qkv()
    q.requires_grad = True
    with pytest.raises(ValueError, match="out="):
        fmha_tile.attention(q, k, v, out=FakeTensor((2, 100, 8, 64), ptr=12 << 20))
    with pytest.raises(TypeError, match="deterministic"):
        fmha_tile.attention(q, k, v, deterministic="yes")
    # caller-owned outputs are used as given
    q, k, v = qkv(d=100)
    out = FakeTensor((2, 100, 8, 100), ptr=12 << 20)
    n = len(fake.allocated)
    with pytest.raises(fmha_tile.FmhaError):
        fmha_tile.attention(q, k, v, out=out)
    assert len(fake.allocated) == n


def test_attention_glue_fp8(monkeypatch):
    """The fp8 forward through attention()/attention_varlen(): a bf16 output
    (allocated or given), refusals of the library (head dim 72) and of
    Python (descales, grad)."""
    _lib_or_skip()
    fake = _FakeTorch()
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    q, k, v = qkv(d=72, dtype=FP8)
    with pytest.raises(fmha_tile.FmhaError, match="16") as ei:
        fmha_tile.attention(q, k, v, return_lse=True, q_descale=descale(30 << 20))
    assert ei.value.status == _lib.FMHA_ERR_UNSUPPORTED
    assert [(t.shape, t.dtype) for t in fake.allocated] == [((2, 100, 8, 72), BF16), ((2, 8, 100), FP32)]
    with pytest.raises(TypeError, match="torch.bfloat16"):
        fmha_tile.attention(q, k, v, out=FakeTensor((2, 100, 8, 72), FP8))
    qv, kv = FakeTensor((300, 8, 64), FP8), FakeTensor((400, 4, 64), FP8)
    cq, ck = varlen()[3:]
    with pytest.raises(ValueError, match="one element"):
        fmha_tile.attention_varlen(qv, kv, kv, cq, ck, 10, 10, k_descale=descale(1 << 20, shape=(2,)))
    q16, k16, v16 = qkv()
    with pytest.raises(ValueError, match="needs fp8"):
        fmha_tile.attention(q16, k16, v16, v_descale=descale(30 << 20))
    q, k, v = qkv(d=128, dtype=FP8)
    q.requires_grad = True
    with pytest.raises(NotImplementedError, match="fp8"):
        fmha_tile.attention(q, k, v)
    # no keys: validated, then O (bf16) = 0 and LSE = -inf (or, without a GPU, the device error)
    q, k, v = qkv(d=128, sk=0, dtype=FP8)
    n = len(fake.allocated)
    try:
        o, lse = fmha_tile.attention(q, k, v, return_lse=True)
    except fmha_tile.FmhaError as e:
        assert e.status in (_lib.FMHA_ERR_DEVICE, _lib.FMHA_ERR_NO_KERNEL)
    else:
        assert o.zeroed and lse.filled == -math.inf
    assert fake.allocated[n].dtype == BF16


def test_batch_prefill_glue(monkeypatch):
    """batch_prefill() through the real library with stand-in tensors, on calls
    the library refuses before any device work: fp8 caches with head dim 72 (not a
    multiple of 16; an older library refuses fp8 altogether) and a bf16 page size
    that is not a power of two. Outputs: bf16 for fp8 caches; number descales
    become 'device' tensors through torch.full."""
    _lib_or_skip()
    fake = _FakeTorch()
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    kw = paged(kv_dtype=FP8, d=72)
    with pytest.raises(fmha_tile.FmhaError) as ei:
        fmha_tile.batch_prefill(k_descale=0.5, v_descale=2.0, return_lse=True, **kw)
    assert ei.value.status == _lib.FMHA_ERR_UNSUPPORTED
    assert "fmha_tile.batch_prefill" in str(ei.value)
    shapes = [(t.shape, t.dtype) for t in fake.allocated]
    assert shapes == [((1,), FP32), ((1,), FP32), ((120, 8, 72), BF16), ((8, 120), FP32)]
    assert [t.value for t in fake.allocated[:2]] == [0.5, 2.0]
    # out must be bf16 for fp8 caches
    with pytest.raises(ValueError, match="out must be"):
        fmha_tile.batch_prefill(out=FakeTensor((120, 8, 72), FP8), **kw)
    kw = paged(page=24)
    with pytest.raises(fmha_tile.FmhaError, match="power of two") as ei:
        fmha_tile.batch_prefill(**kw)
    assert ei.value.status == _lib.FMHA_ERR_INVALID_ARG
