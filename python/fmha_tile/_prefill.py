"""fmha_tile.batch_prefill: attention of packed queries over a paged KV cache.

Mirrors struct fmha_batch_prefill_args of include/fmha_tile/api.h and calls
fmha_batch_prefill() of the shared library on the current stream. Like the
forward functions, nothing is read back to the host (max_seqlen_q is given),
so a call can be captured in a CUDA graph.

The checks and the argument struct are built by prefill_args(), which only
uses what a tensor exposes (shape, stride(), dtype, device, data_ptr()), so
they can be tested without PyTorch or a GPU; batch_prefill() adds the torch
parts (outputs, descales given as numbers, the stream, the launch).

FP8 (e4m3) KV: k/v caches of torch.float8_e4m3fn (LINEAR layouts NHD/HND only),
queries torch.bfloat16 or torch.float8_e4m3fn, output torch.bfloat16.
Descales follow real = stored * descale:
  - k_descale, v_descale: per tensor (a number, or a 0-dim / 1-element float32
    tensor on q's device), or per page and KV head (float32 tensors
    [num_pages, nhead_k] with any strides); both or neither (neither: 1).
  - q_descale: for fp8 queries, a number or a 0-dim / 1-element float32 tensor;
    None means 1.
Numbers become 1-element device tensors made with torch.full (a kernel, so the
call stays capturable); tensors are passed as they are.
"""
import ctypes
import math

from . import _lib
from ._args import (check_tensor, check_same_device, strides, check_no_overlap,
                    check_int, check_scalar, mask_from_flash, _is_tensor, check_sinks)

FMHA_PAGE_TABLE_SGLANG_1D = 0
FMHA_PAGE_TABLE_VLLM_2D = 1
FMHA_KV_LAYOUT_LINEAR = 0
FMHA_KV_LAYOUT_VECTORIZED = 1
FMHA_KV_SCALE_NONE = 0
FMHA_KV_SCALE_PER_TENSOR = 1
FMHA_KV_SCALE_PER_PAGE = 2
_c_enum = ctypes.c_int

FP8 = "torch.float8_e4m3fn"
BF16 = "torch.bfloat16"
FLOAT32 = "torch.float32"
KV_DTYPES = {
    "torch.float16": _lib.FMHA_DTYPE_FP16,
    BF16: _lib.FMHA_DTYPE_BF16,
    FP8: _lib.FMHA_DTYPE_FP8,
}


class FmhaBatchPrefillArgs(ctypes.Structure):
    """struct fmha_batch_prefill_args (field for field, in order)."""
    _fields_ = [
        ("q_dtype", _c_enum), ("kv_dtype", _c_enum),
        ("batch", ctypes.c_int), ("nhead_q", ctypes.c_int), ("nhead_k", ctypes.c_int),
        ("max_seqlen_q", ctypes.c_int), ("hdim_q", ctypes.c_int), ("hdim_v", ctypes.c_int),
        ("q", ctypes.c_void_p), ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("seqstart_q", ctypes.c_void_p),
        ("stride_q", ctypes.c_int64), ("nhead_stride_q", ctypes.c_int64),
        ("stride_o", ctypes.c_int64), ("nhead_stride_o", ctypes.c_int64),
        ("nhead_stride_lse", ctypes.c_int64),
        ("k_pool", ctypes.c_void_p), ("v_pool", ctypes.c_void_p),
        ("num_total_pages", ctypes.c_int), ("page_size", ctypes.c_int),
        ("kv_layout", _c_enum),
        ("page_stride_k", ctypes.c_int64), ("token_stride_k", ctypes.c_int64),
        ("nhead_stride_k", ctypes.c_int64),
        ("page_stride_v", ctypes.c_int64), ("token_stride_v", ctypes.c_int64),
        ("nhead_stride_v", ctypes.c_int64),
        ("page_table", _c_enum),
        ("kv_indptr", ctypes.c_void_p), ("kv_page_indices", ctypes.c_void_p),
        ("kv_last_page_lens", ctypes.c_void_p),
        ("block_table", ctypes.c_void_p), ("seqlen_k", ctypes.c_void_p),
        ("block_table_stride", ctypes.c_int64),
        ("kv_scale", _c_enum),
        ("q_descale", ctypes.c_void_p), ("k_descale", ctypes.c_void_p),
        ("v_descale", ctypes.c_void_p),
        ("k_page_descale", ctypes.c_void_p), ("v_page_descale", ctypes.c_void_p),
        ("descale_page_stride", ctypes.c_int64), ("descale_nhead_stride", ctypes.c_int64),
        ("scale", ctypes.c_float), ("logits_soft_cap", ctypes.c_float),
        ("mask_type", _c_enum), ("window_left", ctypes.c_int), ("window_right", ctypes.c_int),
        ("sinks", ctypes.c_void_p),
    ]


def _declare(lib):
    lib.fmha_batch_prefill.restype = ctypes.c_int
    lib.fmha_batch_prefill.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.fmha_batch_prefill_check.restype = ctypes.c_int
    lib.fmha_batch_prefill_check.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]


def _fn(h=None):
    """The CDLL of library handle h (default: the default library) with the
    batch prefill entry points declared."""
    return (h or _lib.handle()).declared("prefill", _declare)


def _int32_vector(name, t, n=None):
    check_tensor(name, t, 1, "(int32)")
    if str(t.dtype) != "torch.int32":
        raise TypeError("%s must be torch.int32, got %s" % (name, t.dtype))
    if n is not None and t.shape[0] != n:
        raise ValueError("%s must have %d entries, got %d" % (name, n, t.shape[0]))
    return t


def dtype_codes(q, k_cache, v_cache):
    """-> (q code, kv code, output dtype name): fp16/bf16 with q, k and v alike,
    or fp8 (e4m3fn) k/v with bf16 or fp8 q and a bf16 output."""
    kv = KV_DTYPES.get(str(k_cache.dtype))
    if kv is None:
        raise TypeError("k_cache must be torch.float16, torch.bfloat16 or torch.float8_e4m3fn, got %s"
                        % k_cache.dtype)
    if v_cache.dtype != k_cache.dtype:
        raise TypeError("v_cache has dtype %s but k_cache has %s: they must share one dtype"
                        % (v_cache.dtype, k_cache.dtype))
    qs = str(q.dtype)
    if kv == _lib.FMHA_DTYPE_FP8:
        if qs not in (BF16, FP8):
            raise TypeError("with fp8 (float8_e4m3fn) k/v caches q must be torch.bfloat16 or "
                            "torch.float8_e4m3fn, got %s" % q.dtype)
        return KV_DTYPES[qs], kv, BF16
    if q.dtype != k_cache.dtype:
        raise TypeError("q has dtype %s but the k/v caches %s: fp16/bf16 caches need queries of the "
                        "same dtype (fp8 queries need fp8 caches)" % (q.dtype, k_cache.dtype))
    return kv, kv, qs


def _descale_scalar(name, x, q, to_device):
    """A per-tensor descale: a 0-dim / 1-element float32 tensor on q's device is
    taken as it is; a number (or a CPU tensor's value) goes through to_device.
    -> a tensor whose data_ptr() is the float."""
    if _is_tensor(x):
        n = 1
        for s in x.shape:
            n *= s
        if n != 1:
            raise ValueError("%s must be a number or a 0-dim / 1-element tensor, got shape %s "
                             "(per-page descales are 2-D [num_pages, nhead_k])" % (name, tuple(x.shape)))
        if not getattr(x, "is_cuda", False):
            return _descale_scalar(name, float(x), q, to_device)
        if str(x.dtype) != FLOAT32:
            raise TypeError("%s must be torch.float32, got %s" % (name, x.dtype))
        check_same_device(q, ((name, x),))
        return x
    if isinstance(x, bool):
        raise TypeError("%s must be a number or a tensor, got bool" % name)
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise TypeError("%s must be a number or a tensor, got %s" % (name, type(x).__name__)) from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError("%s must be finite and > 0, got %r" % (name, v))
    return to_device(v)


def _descale_pages(name, t, q, pages, hk):
    """Per-page descales: float32 [num_pages, nhead_k] on q's device, any strides.
    -> (pointer, page stride, head stride) in elements."""
    if str(t.dtype) != FLOAT32:
        raise TypeError("%s must be torch.float32, got %s" % (name, t.dtype))
    if tuple(t.shape) != (pages, hk):
        raise ValueError("%s must have shape (num_pages, nhead_k) = (%d, %d), got %s"
                         % (name, pages, hk, tuple(t.shape)))
    if not getattr(t, "is_cuda", False):
        raise ValueError("%s must be on a CUDA device, got %s" % (name, t.device))
    check_same_device(q, ((name, t),))
    s = strides(t)
    if s[0] < 0 or s[1] < 0:
        raise ValueError("%s must have non-negative strides, got %s" % (name, tuple(t.stride())))
    return t.data_ptr(), s[0], s[1]


def _set_descales(a, q, kv8, q8, pages, hk, k_descale, v_descale, q_descale, to_device):
    """Fills kv_scale and the descale fields; returns the tensors to keep alive."""
    keep = []
    a.kv_scale = FMHA_KV_SCALE_NONE
    if (k_descale is None) != (v_descale is None):
        raise ValueError("pass k_descale and v_descale together (or neither)")
    if k_descale is not None:
        if not kv8:
            raise ValueError("k_descale/v_descale need fp8 (float8_e4m3fn) k/v caches")
        paged = [_is_tensor(x) and len(x.shape) == 2 for x in (k_descale, v_descale)]
        if paged[0] != paged[1]:
            raise ValueError("k_descale and v_descale must both be per tensor or both per page "
                             "([num_pages, nhead_k])")
        if paged[0]:
            a.kv_scale = FMHA_KV_SCALE_PER_PAGE
            a.k_page_descale, ks0, ks1 = _descale_pages("k_descale", k_descale, q, pages, hk)
            a.v_page_descale, vs0, vs1 = _descale_pages("v_descale", v_descale, q, pages, hk)
            if (ks0, ks1) != (vs0, vs1):
                raise ValueError("k_descale and v_descale must have the same strides, got %s and %s"
                                 % ((ks0, ks1), (vs0, vs1)))
            a.descale_page_stride, a.descale_nhead_stride = ks0, ks1
            keep += [k_descale, v_descale]
        else:
            kt = _descale_scalar("k_descale", k_descale, q, to_device)
            vt = _descale_scalar("v_descale", v_descale, q, to_device)
            a.kv_scale = FMHA_KV_SCALE_PER_TENSOR
            a.k_descale, a.v_descale = kt.data_ptr(), vt.data_ptr()
            keep += [kt, vt]
    if q_descale is not None:
        if not q8:
            raise ValueError("q_descale needs fp8 (float8_e4m3fn) queries")
        qt = _descale_scalar("q_descale", q_descale, q, to_device)
        a.q_descale = qt.data_ptr()
        keep.append(qt)
    return keep


def prefill_args(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, *, kv_indptr=None,
                 kv_page_indices=None, kv_last_page_len=None, block_table=None, seqlens_k=None,
                 kv_layout="NHD", causal=True, window=(-1, -1), softcap=0.0, scale=None,
                 k_descale=None, v_descale=None, q_descale=None, to_device=None, sinks=None):
    """The checks of batch_prefill() and its FmhaBatchPrefillArgs, outputs not
    set. to_device(x) turns a number into a 1-element float32 tensor on q's
    device (needed only when a descale is given as a number).
    -> (args, output dtype name, tensors to keep alive until the launch)."""
    check_tensor("q", q, 3, "[total_q, nheads, headdim]")
    total_q, hq, d = (int(x) for x in q.shape)
    layout = kv_layout.upper() if isinstance(kv_layout, str) else kv_layout
    if layout in ("NHD", "HND"):
        check_tensor("k_cache", k_cache, 4, "[pages, page_size, h_k, d] or [pages, h_k, page_size, d]")
        check_tensor("v_cache", v_cache, 4, "like k_cache")
        if tuple(k_cache.shape) != tuple(v_cache.shape):
            raise ValueError("k_cache and v_cache must have one shape, got %s and %s"
                             % (tuple(k_cache.shape), tuple(v_cache.shape)))
        pages = int(k_cache.shape[0])
        if layout == "NHD":
            page_size, hk = int(k_cache.shape[1]), int(k_cache.shape[2])
            ks, vs = strides(k_cache), strides(v_cache)
            kst, vst = (ks[0], ks[1], ks[2]), (vs[0], vs[1], vs[2])
        else:
            hk, page_size = int(k_cache.shape[1]), int(k_cache.shape[2])
            ks, vs = strides(k_cache), strides(v_cache)
            kst, vst = (ks[0], ks[2], ks[1]), (vs[0], vs[2], vs[1])
        if int(k_cache.shape[3]) != d:
            raise ValueError("k_cache head dim %d differs from q's %d" % (int(k_cache.shape[3]), d))
        c_layout = FMHA_KV_LAYOUT_LINEAR
    elif layout == "VECTORIZED":
        if str(getattr(k_cache, "dtype", "")) == FP8:
            raise ValueError("fp8 (float8_e4m3fn) k/v caches must use kv_layout 'NHD' or 'HND' "
                             "(the library serves fp8 KV in the LINEAR layout only)")
        check_tensor("k_cache", k_cache, 5, "[pages, h_k, d/8, page_size, 8]")
        check_tensor("v_cache", v_cache, 5, "[pages, h_k, page_size/8, d, 8]")
        pages, hk, page_size = int(k_cache.shape[0]), int(k_cache.shape[1]), int(k_cache.shape[3])
        if tuple(k_cache.shape) != (pages, hk, d // 8, page_size, 8) or \
                tuple(v_cache.shape) != (pages, hk, page_size // 8, d, 8):
            raise ValueError("VECTORIZED caches must be k [pages, h_k, d/8, page_size, 8] and "
                             "v [pages, h_k, page_size/8, d, 8]")
        if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
            raise ValueError("VECTORIZED caches must be contiguous")
        kst = (k_cache.stride(0), 0, k_cache.stride(1))
        vst = (v_cache.stride(0), 0, v_cache.stride(1))
        c_layout = FMHA_KV_LAYOUT_VECTORIZED
    else:
        raise ValueError("kv_layout must be 'NHD', 'HND' or 'VECTORIZED', got %r" % (kv_layout,))
    q_code, kv_code, out_dtype = dtype_codes(q, k_cache, v_cache)
    kv8 = kv_code == _lib.FMHA_DTYPE_FP8
    cu_q = _int32_vector("cu_seqlens_q", cu_seqlens_q)
    batch = int(cu_q.shape[0]) - 1
    if batch < 0:
        raise ValueError("cu_seqlens_q must have batch + 1 >= 1 entries")
    max_seqlen_q = check_int("max_seqlen_q", max_seqlen_q)
    named = [("k_cache", k_cache), ("v_cache", v_cache), ("cu_seqlens_q", cu_q)]
    a = FmhaBatchPrefillArgs()
    if kv_indptr is not None:
        if block_table is not None or seqlens_k is not None:
            raise ValueError("pass either the SGLang table (kv_indptr, ...) or the vLLM one "
                             "(block_table, seqlens_k), not both")
        a.page_table = FMHA_PAGE_TABLE_SGLANG_1D
        ind = _int32_vector("kv_indptr", kv_indptr, batch + 1)
        idx = _int32_vector("kv_page_indices", kv_page_indices)
        last = _int32_vector("kv_last_page_len", kv_last_page_len, batch)
        a.kv_indptr, a.kv_page_indices, a.kv_last_page_lens = ind.data_ptr(), idx.data_ptr(), last.data_ptr()
        named += [("kv_indptr", ind), ("kv_page_indices", idx), ("kv_last_page_len", last)]
    elif block_table is not None:
        check_tensor("block_table", block_table, 2, "[batch, max_pages] (int32)")
        if str(block_table.dtype) != "torch.int32" or int(block_table.shape[0]) != batch:
            raise ValueError("block_table must be int32 [batch, max_pages]")
        sk = _int32_vector("seqlens_k", seqlens_k, batch)
        a.page_table = FMHA_PAGE_TABLE_VLLM_2D
        a.block_table, a.seqlen_k = block_table.data_ptr(), sk.data_ptr()
        a.block_table_stride = block_table.stride(0)
        named += [("block_table", block_table), ("seqlens_k", sk)]
    else:
        raise ValueError("a page table is required: kv_indptr/kv_page_indices/kv_last_page_len "
                         "or block_table/seqlens_k")
    check_same_device(q, named)
    mask, left, right = mask_from_flash(causal, window)
    softcap = check_scalar("softcap", softcap, True)
    scale = (d ** -0.5) if scale is None else check_scalar("scale", scale, False)
    keep = _set_descales(a, q, kv8, q_code == _lib.FMHA_DTYPE_FP8, pages, hk, k_descale, v_descale,
                         q_descale, to_device)

    qs = strides(q)
    a.q_dtype, a.kv_dtype = q_code, kv_code
    a.batch, a.nhead_q, a.nhead_k = batch, hq, hk
    a.max_seqlen_q, a.hdim_q, a.hdim_v = max_seqlen_q, d, d
    a.q = q.data_ptr()
    a.seqstart_q = cu_q.data_ptr()
    a.stride_q, a.nhead_stride_q = qs[0], qs[1]
    a.k_pool, a.v_pool = k_cache.data_ptr(), v_cache.data_ptr()
    a.num_total_pages, a.page_size, a.kv_layout = pages, page_size, c_layout
    a.page_stride_k, a.token_stride_k, a.nhead_stride_k = kst
    a.page_stride_v, a.token_stride_v, a.nhead_stride_v = vst
    a.scale, a.logits_soft_cap = scale, softcap
    a.mask_type, a.window_left, a.window_right = mask, left, right
    a.sinks = check_sinks(sinks, q, hq)
    if sinks is not None:
        keep.append(sinks)
    return a, out_dtype, keep


def _device_args(q, *args, **kw):
    """prefill_args() with descale numbers turned into device floats (a fill
    kernel, not a host copy: capturable); call inside the q device's context."""
    import torch

    def to_device(v):
        return torch.full((1,), v, dtype=torch.float32, device=q.device)

    return prefill_args(q, *args, to_device=to_device, **kw)


def batch_prefill(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, *, kv_indptr=None,
                  kv_page_indices=None, kv_last_page_len=None, block_table=None, seqlens_k=None,
                  kv_layout="NHD", causal=True, window=(-1, -1), softcap=0.0, scale=None,
                  k_descale=None, v_descale=None, q_descale=None,
                  return_lse=False, out=None, out_lse=None, kernels=None, sinks=None):
    """Prefill of packed queries q [total_q, h, d] (rows cu_seqlens_q[b] ..
    cu_seqlens_q[b+1]-1 for sequence b) over a paged KV cache.

    Page table: either SGLang's 1-D (kv_indptr [b+1], kv_page_indices,
    kv_last_page_len [b]) or vLLM's 2-D (block_table [b, max_pages],
    seqlens_k [b]); int32 CUDA tensors.
    kv_layout: "NHD" k/v_cache [pages, page_size, h_k, d]; "HND"
    [pages, h_k, page_size, d]; "VECTORIZED" k [pages, h_k, d/8, page_size, 8]
    and v [pages, h_k, page_size/8, d, 8] (fp16/bf16 only).
    dtypes: q, k and v fp16 or bf16 alike; or k/v torch.float8_e4m3fn (NHD or
    HND, head dim a multiple of 16) with q bf16 or float8_e4m3fn, output bf16.
    k_descale, v_descale (fp8 caches): numbers or 0-dim / 1-element float32
    tensors (per tensor), or float32 [num_pages, nhead_k] tensors of any
    strides (per page and KV head); both or neither. q_descale (fp8 q): a
    number or a 0-dim / 1-element float32 tensor, None for 1.
    real = stored * descale.
    causal: bottom-right aligned (the new tokens are the last of each
    sequence); window (left, right), softcap, scale and sinks (fp32 [h]
    attention-sink logits) as in attention().
    Returns out [total_q, h, d] (q's dtype; bf16 for fp8 caches), or
    (out, lse) with lse fp32 [h, total_q]. out= / out_lse= take caller-owned
    outputs. kernels: the kernel set (None: the library's default set; an
    fmha_tile.KernelSet or the Library its build() returns).
    """
    import torch

    h = _lib.handle(kernels)
    with torch.cuda.device(q.device):
        a, out_dtype, keep = _device_args(
            q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, kv_indptr=kv_indptr,
            kv_page_indices=kv_page_indices, kv_last_page_len=kv_last_page_len,
            block_table=block_table, seqlens_k=seqlens_k, kv_layout=kv_layout, causal=causal,
            window=window, softcap=softcap, scale=scale, k_descale=k_descale, v_descale=v_descale,
            q_descale=q_descale, sinks=sinks)
        total_q, hq, d = (int(x) for x in q.shape)
        odt = torch.bfloat16 if out_dtype == BF16 else q.dtype
        o = out if out is not None else torch.empty((total_q, hq, d), dtype=odt, device=q.device)
        if tuple(o.shape) != (total_q, hq, d) or o.dtype != odt or o.device != q.device:
            raise ValueError("out must be %s [%d, %d, %d] on %s" % (odt, total_q, hq, d, q.device))
        check_no_overlap("out", o)
        lse = out_lse
        if lse is None and return_lse:
            lse = torch.empty((hq, total_q), dtype=torch.float32, device=q.device)
        if lse is not None:
            if tuple(lse.shape) != (hq, total_q) or str(lse.dtype) != "torch.float32" or \
                    (total_q > 1 and lse.stride(1) != 1):
                raise ValueError("out_lse must be float32 [%d, %d] with unit row stride" % (hq, total_q))
        os_ = strides(o)
        a.o = o.data_ptr()
        a.lse = lse.data_ptr() if lse is not None else None
        a.stride_o, a.nhead_stride_o = os_[0], os_[1]
        a.nhead_stride_lse = lse.stride(0) if lse is not None else 0
        lib = _fn(h)
        stream = _lib.current_stream_ptr(torch, q.device)
        st = lib.fmha_batch_prefill(h.set, ctypes.byref(a), ctypes.c_void_p(stream))
        del keep   # descale tensors made here: freed in stream order after the launch
        h.check_status(st, "fmha_tile.batch_prefill")
    return (o, lse) if return_lse else o


def batch_prefill_plan(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, *, kv_indptr=None,
                       kv_page_indices=None, kv_last_page_len=None, block_table=None, seqlens_k=None,
                       kv_layout="NHD", causal=True, window=(-1, -1), softcap=0.0, scale=None,
                       k_descale=None, v_descale=None, q_descale=None, kernels=None):
    """Is batch_prefill(...) with these arguments supported, and by which
    kernel? Validates and selects (fmha_batch_prefill_check) without
    launching; returns attention_plan()'s dict (page_size included) ("why": the pipeline
    picked and the reason, e.g. "portable pipeline: fp8 KV ...") or raises.
    kernels: as in batch_prefill()."""
    import torch

    h = _lib.handle(kernels)
    with torch.cuda.device(q.device):
        a, _, keep = _device_args(
            q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, kv_indptr=kv_indptr,
            kv_page_indices=kv_page_indices, kv_last_page_len=kv_last_page_len,
            block_table=block_table, seqlens_k=seqlens_k, kv_layout=kv_layout, causal=causal,
            window=window, softcap=softcap, scale=scale, k_descale=k_descale, v_descale=v_descale,
            q_descale=q_descale)
        # nothing is written: the check only needs a well-formed output view
        d = int(q.shape[2])
        a.o = q.data_ptr()
        a.stride_o, a.nhead_stride_o = int(q.shape[1]) * d, d
        plan = _lib.FmhaFwdPlan()
        st = _fn(h).fmha_batch_prefill_check(h.set, ctypes.byref(a), ctypes.byref(plan))
        del keep
        h.check_status(st, "fmha_tile.batch_prefill_plan")
    return _lib.plan_dict(plan)
