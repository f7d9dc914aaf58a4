"""fmha_tile.attention_with_kvcache: decode over a KV cache (split-KV), with
the new K/V rows appended and rotary embedding applied in the same call.

Mirrors struct fmha_decode_args of include/fmha_tile/api.h and calls
fmha_decode_plan_make / fmha_decode_run of the shared library on the current
stream, with the library's decode kernel set (fmha_default_decode_kernel_set).
The split-KV workspace is a torch.empty of the size the plan reports (the
caching allocator: capturable in a CUDA graph); nothing is read back to the
host (max_seqlen_k is given or taken from the cache's capacity).

Convention (as SGLang's and FlashInfer's page tables): seqlens_k counts each
sequence's keys after the append, so the new rows k / v land at positions
seqlens_k - seqlen_new .. seqlens_k - 1 (FlashAttention's cache_seqlens count
them before).
"""
import ctypes

from . import _lib
from ._args import (check_tensor, check_same_device, strides, check_int, check_scalar,
                    mask_from_flash, check_alibi, check_sinks)
from ._prefill import (FMHA_PAGE_TABLE_SGLANG_1D, FMHA_PAGE_TABLE_VLLM_2D, FMHA_KV_LAYOUT_LINEAR,
                       dtype_codes, _int32_vector, _set_descales)

_c_enum = ctypes.c_int
_i64 = ctypes.c_int64
_vp = ctypes.c_void_p


class FmhaDecodeArgs(ctypes.Structure):
    """struct fmha_decode_args (field for field, in order)."""
    _fields_ = [
        ("q_dtype", _c_enum), ("kv_dtype", _c_enum),
        ("batch", ctypes.c_int), ("nhead_q", ctypes.c_int), ("nhead_k", ctypes.c_int),
        ("seqlen_q", ctypes.c_int), ("max_seqlen_k", ctypes.c_int),
        ("hdim_q", ctypes.c_int), ("hdim_v", ctypes.c_int),
        ("q", _vp), ("o", _vp), ("lse", _vp),
        ("stride_q", _i64), ("nhead_stride_q", _i64), ("batch_stride_q", _i64),
        ("stride_o", _i64), ("nhead_stride_o", _i64), ("batch_stride_o", _i64),
        ("nhead_stride_lse", _i64), ("batch_stride_lse", _i64),
        ("is_paged", ctypes.c_int),
        ("k_cache", _vp), ("v_cache", _vp),
        ("stride_k", _i64), ("nhead_stride_k", _i64), ("batch_stride_k", _i64),
        ("stride_v", _i64), ("nhead_stride_v", _i64), ("batch_stride_v", _i64),
        ("seqlen_k", _vp), ("cache_batch_idx", _vp),
        ("num_total_pages", ctypes.c_int), ("page_size", ctypes.c_int),
        ("kv_layout", _c_enum),
        ("page_stride_k", _i64), ("page_stride_v", _i64),
        ("page_table", _c_enum),
        ("kv_indptr", _vp), ("kv_page_indices", _vp), ("kv_last_page_lens", _vp),
        ("block_table", _vp), ("block_table_stride", _i64),
        ("kv_scale", _c_enum),
        ("q_descale", _vp), ("k_descale", _vp), ("v_descale", _vp),
        ("k_page_descale", _vp), ("v_page_descale", _vp),
        ("descale_page_stride", _i64), ("descale_nhead_stride", _i64),
        ("scale", ctypes.c_float), ("logits_soft_cap", ctypes.c_float),
        ("alibi_slopes", _vp), ("alibi_batch_stride", _i64),
        ("mask_type", _c_enum), ("window_left", ctypes.c_int), ("window_right", ctypes.c_int),
        ("k_new", _vp), ("v_new", _vp), ("seqlen_knew", ctypes.c_int),
        ("stride_knew", _i64), ("nhead_stride_knew", _i64), ("batch_stride_knew", _i64),
        ("stride_vnew", _i64), ("nhead_stride_vnew", _i64), ("batch_stride_vnew", _i64),
        ("cache_seqlen_max", ctypes.c_int),
        ("rotary_dim", ctypes.c_int), ("rotary_interleaved", ctypes.c_int), ("rotary_seqlen", ctypes.c_int),
        ("rotary_cos", _vp), ("rotary_sin", _vp), ("q_rope", _vp),
        ("num_splits", ctypes.c_int),
        ("workspace", _vp), ("workspace_size", ctypes.c_size_t),
        ("sinks", _vp),
    ]


class FmhaDecodePlan(ctypes.Structure):
    """struct fmha_decode_plan."""
    _fields_ = [
        ("kernel", ctypes.POINTER(_lib.FmhaKernelInfo)),
        ("combine", ctypes.POINTER(_lib.FmhaKernelInfo)),
        ("num_splits", ctypes.c_int),
        ("workspace_size", ctypes.c_size_t),
        ("grid_x", ctypes.c_int), ("grid_y", ctypes.c_int), ("grid_z", ctypes.c_int), ("block", ctypes.c_int),
        ("why", ctypes.c_char_p),
        ("batch_", ctypes.c_int), ("nhead_q_", ctypes.c_int), ("nhead_k_", ctypes.c_int),
        ("seqlen_q_", ctypes.c_int), ("hdim_", ctypes.c_int), ("dtypes_", ctypes.c_int), ("paged_", ctypes.c_int),
        ("set_", _vp), ("entry_", ctypes.c_int),
    ]


def _declare(lib):
    P = ctypes.POINTER
    lib.fmha_default_decode_kernel_set.argtypes = []
    lib.fmha_default_decode_kernel_set.restype = _vp
    lib.fmha_decode_plan_make.argtypes = [_vp, P(FmhaDecodeArgs), P(FmhaDecodePlan)]
    lib.fmha_decode_plan_make.restype = _c_enum
    lib.fmha_decode_run.argtypes = [P(FmhaDecodePlan), P(FmhaDecodeArgs), _vp]
    lib.fmha_decode_run.restype = _c_enum


def _fn(h=None):
    """The CDLL of library handle h (default: the default library) with the
    decode entry points declared, and its decode set (in a library built
    from Python, the whole set: selection takes its decode rows)."""
    h = h or _lib.handle()
    try:
        lib = h.declared("decode", _declare)
    except AttributeError as e:
        raise _lib.FmhaLibraryError("fmha_tile: %s has no decode (%s); rebuild it with `make lib`"
                                    % (h.path, e)) from None
    dset = h.decode_set
    if dset is None:
        dset = h.decode_set = lib.fmha_default_decode_kernel_set()
    return lib, dset


def _cache_layout(a, k_cache, v_cache, d, paged):
    """Cache shape and strides into the args: contiguous [b_cache, s_cache,
    h_k, d], or NHD pages [pages, page_size, h_k, d]. -> (h_k, tokens per
    entry or page size, entries or pages)."""
    check_tensor("k_cache", k_cache, 4, "[batch_cache or pages, seqlen or page_size, h_k, d]")
    check_tensor("v_cache", v_cache, 4, "like k_cache")
    if tuple(k_cache.shape) != tuple(v_cache.shape):
        raise ValueError("k_cache and v_cache must have one shape, got %s and %s"
                         % (tuple(k_cache.shape), tuple(v_cache.shape)))
    n, s, hk, dk = (int(x) for x in k_cache.shape)
    if dk != d:
        raise ValueError("k_cache head dim %d differs from q's %d" % (dk, d))
    ks, vs = strides(k_cache), strides(v_cache)
    a.stride_k, a.nhead_stride_k = ks[1], ks[2]
    a.stride_v, a.nhead_stride_v = vs[1], vs[2]
    if paged:
        a.page_stride_k, a.page_stride_v = ks[0], vs[0]
    else:
        a.batch_stride_k, a.batch_stride_v = ks[0], vs[0]
    return hk, s, n


def decode_args(q, k_cache, v_cache, seqlens_k, *, k=None, v=None, rotary_cos=None, rotary_sin=None,
                rotary_interleaved=False, cache_batch_idx=None, kv_indptr=None, kv_page_indices=None,
                kv_last_page_len=None, block_table=None, max_seqlen_k=None, causal=False,
                window=(-1, -1), softcap=0.0, scale=None, alibi_slopes=None, k_descale=None,
                v_descale=None, num_splits=0, to_device=None, sinks=None):
    """The checks of attention_with_kvcache() and its FmhaDecodeArgs, outputs
    not set. -> (args, output dtype name, tensors to keep alive)."""
    check_tensor("q", q, 4, "[batch, seqlen_q, nheads, headdim]")
    batch, s_q, hq, d = (int(x) for x in q.shape)
    paged = kv_indptr is not None or block_table is not None
    a = FmhaDecodeArgs()
    hk, s_or_page, n = _cache_layout(a, k_cache, v_cache, d, paged)
    q_code, kv_code, out_dtype = dtype_codes(q, k_cache, v_cache)
    kv8 = kv_code == _lib.FMHA_DTYPE_FP8
    named = [("k_cache", k_cache), ("v_cache", v_cache)]
    keep = []
    if paged:
        a.is_paged, a.page_size, a.num_total_pages, a.kv_layout = 1, s_or_page, n, FMHA_KV_LAYOUT_LINEAR
        if kv_indptr is not None:
            if block_table is not None:
                raise ValueError("pass either the SGLang table (kv_indptr, ...) or block_table, not both")
            ind = _int32_vector("kv_indptr", kv_indptr, batch + 1)
            idx = _int32_vector("kv_page_indices", kv_page_indices)
            last = _int32_vector("kv_last_page_len", kv_last_page_len, batch)
            a.page_table = FMHA_PAGE_TABLE_SGLANG_1D
            a.kv_indptr, a.kv_page_indices, a.kv_last_page_lens = ind.data_ptr(), idx.data_ptr(), last.data_ptr()
            named += [("kv_indptr", ind), ("kv_page_indices", idx), ("kv_last_page_len", last)]
        else:
            check_tensor("block_table", block_table, 2, "[batch, max_pages] (int32)")
            if str(block_table.dtype) != "torch.int32" or int(block_table.shape[0]) != batch:
                raise ValueError("block_table must be int32 [batch, max_pages]")
            a.page_table = FMHA_PAGE_TABLE_VLLM_2D
            a.block_table, a.block_table_stride = block_table.data_ptr(), block_table.stride(0)
            named.append(("block_table", block_table))
        if cache_batch_idx is not None:
            raise ValueError("cache_batch_idx is for a contiguous cache")
    else:
        a.cache_seqlen_max = s_or_page
        if cache_batch_idx is not None:
            cbi = _int32_vector("cache_batch_idx", cache_batch_idx, batch)
            a.cache_batch_idx = cbi.data_ptr()
            named.append(("cache_batch_idx", cbi))
    if seqlens_k is not None:
        sk = _int32_vector("seqlens_k", seqlens_k, batch)
        a.seqlen_k = sk.data_ptr()
        named.append(("seqlens_k", sk))
    elif not (paged and kv_indptr is not None):
        raise ValueError("seqlens_k (int32 [batch], keys after the append) is required")
    if max_seqlen_k is None:
        if paged:
            raise ValueError("max_seqlen_k is required with a paged cache (it sizes the split count)")
        max_seqlen_k = s_or_page
    a.max_seqlen_k = check_int("max_seqlen_k", max_seqlen_k)
    if (k is None) != (v is None):
        raise ValueError("pass k and v together (or neither)")
    if k is not None:
        check_tensor("k", k, 4, "[batch, seqlen_new, nheads_k, headdim]")
        check_tensor("v", v, 4, "like k")
        if tuple(k.shape) != tuple(v.shape) or int(k.shape[0]) != batch or int(k.shape[2]) != hk or \
                int(k.shape[3]) != d:
            raise ValueError("k and v must be [batch, seqlen_new, nheads_k, headdim] = [%d, *, %d, %d]"
                             % (batch, hk, d))
        # an fp8 cache takes its new rows in the queries' dtype (stored as row / descale)
        want = q.dtype if kv8 else k_cache.dtype
        if k.dtype != want or v.dtype != want:
            raise TypeError("k and v must be %s (the cache's dtype, or the queries' for an fp8 cache)" % want)
        ks, vs = strides(k), strides(v)
        a.k_new, a.v_new, a.seqlen_knew = k.data_ptr(), v.data_ptr(), int(k.shape[1])
        a.batch_stride_knew, a.stride_knew, a.nhead_stride_knew = ks[0], ks[1], ks[2]
        a.batch_stride_vnew, a.stride_vnew, a.nhead_stride_vnew = vs[0], vs[1], vs[2]
        named += [("k", k), ("v", v)]
    if (rotary_cos is None) != (rotary_sin is None):
        raise ValueError("pass rotary_cos and rotary_sin together (or neither)")
    if rotary_cos is not None:
        for name, t in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
            check_tensor(name, t, 2, "[seqlen_rotary, rotary_dim / 2] float32")
            if str(t.dtype) != "torch.float32" or not t.is_contiguous():
                raise ValueError("%s must be a contiguous float32 tensor" % name)
        if tuple(rotary_cos.shape) != tuple(rotary_sin.shape):
            raise ValueError("rotary_cos and rotary_sin must have one shape")
        a.rotary_seqlen, a.rotary_dim = int(rotary_cos.shape[0]), 2 * int(rotary_cos.shape[1])
        a.rotary_interleaved = 1 if rotary_interleaved else 0
        a.rotary_cos, a.rotary_sin = rotary_cos.data_ptr(), rotary_sin.data_ptr()
        named += [("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)]
    check_same_device(q, named)
    mask, left, right = mask_from_flash(causal, window)
    a.scale = (d ** -0.5) if scale is None else check_scalar("scale", scale, False)
    a.logits_soft_cap = check_scalar("softcap", softcap, True)
    if alibi_slopes is not None:
        a.alibi_slopes, a.alibi_batch_stride = check_alibi(alibi_slopes, q, batch, hq)
        keep.append(alibi_slopes)
    a.sinks = check_sinks(sinks, q, hq)
    if sinks is not None:
        keep.append(sinks)
    keep += _set_descales(a, q, kv8, q_code == _lib.FMHA_DTYPE_FP8, n, hk, k_descale, v_descale, None,
                          to_device)
    qs = strides(q)
    a.q_dtype, a.kv_dtype = q_code, kv_code
    a.batch, a.nhead_q, a.nhead_k, a.seqlen_q = batch, hq, hk, s_q
    a.hdim_q = a.hdim_v = d
    a.q = q.data_ptr()
    a.batch_stride_q, a.stride_q, a.nhead_stride_q = qs[0], qs[1], qs[2]
    a.k_cache, a.v_cache = k_cache.data_ptr(), v_cache.data_ptr()
    a.mask_type, a.window_left, a.window_right = mask, left, right
    a.num_splits = check_int("num_splits", num_splits, 0, 128)
    return a, out_dtype, keep


def _call_out(torch, q, out, out_dtype):
    """A decode call's output: out checked against q's shape and the dtype
    decode_args() chose, or a new one."""
    batch, s_q, hq, d = (int(x) for x in q.shape)
    odt = torch.bfloat16 if out_dtype == "torch.bfloat16" else q.dtype
    o = out if out is not None else torch.empty((batch, s_q, hq, d), dtype=odt, device=q.device)
    if tuple(o.shape) != (batch, s_q, hq, d) or o.dtype != odt or o.device != q.device:
        raise ValueError("out must be %s [%d, %d, %d, %d] on %s" % (odt, batch, s_q, hq, d, q.device))
    return o


def _q_rope(torch, a, q):
    """The buffer of the rotated queries, at q's strides (a.q_rope), where
    the call rotates; else None."""
    if a.rotary_dim <= 0:
        return None
    q_rot = torch.empty_strided(tuple(q.shape), tuple(q.stride()), dtype=q.dtype, device=q.device)
    a.q_rope = q_rot.data_ptr()
    return q_rot


def _plan_make(h, a, where):
    """fmha_decode_plan_make on the args (a refusal: FmhaError from where)
    -> (the set's library functions, the plan)."""
    lib, dset = _fn(h)
    plan = FmhaDecodePlan()
    h.check_status(lib.fmha_decode_plan_make(dset, ctypes.byref(a), ctypes.byref(plan)), where)
    return lib, plan

def attention_with_kvcache(q, k_cache, v_cache, seqlens_k=None, k=None, v=None, rotary_cos=None,
                           rotary_sin=None, rotary_interleaved=False, cache_batch_idx=None, *,
                           kv_indptr=None, kv_page_indices=None, kv_last_page_len=None, block_table=None,
                           max_seqlen_k=None, causal=False, window=(-1, -1), softcap=0.0, scale=None,
                           alibi_slopes=None, k_descale=None, v_descale=None, num_splits=0,
                           return_lse=False, out=None, plan_only=False, kernels=None, sinks=None):
    """Decode step: q [batch, seqlen_q, nheads, headdim] against a KV cache.

    Cache: contiguous k_cache / v_cache [batch_cache, seqlen_cache, nheads_k,
    headdim] (sequence b reads entry cache_batch_idx[b], default b), or NHD
    pages [pages, page_size, nheads_k, headdim] with SGLang's table
    (kv_indptr, kv_page_indices, kv_last_page_len) or vLLM's (block_table with
    seqlens_k). seqlens_k int32 [batch]: keys of each sequence after the
    append. k, v [batch, seqlen_new, nheads_k, headdim]: new rows written into
    the cache before the attention (the cache is modified in place).
    rotary_cos / rotary_sin float32 [seqlen_rotary, rotary_dim / 2]: the new
    keys and the queries are turned by their positions (interleaved or
    half-split pairs; the caller's q is not modified: a rotated copy is
    used). dtypes as batch_prefill (fp16/bf16, or float8_e4m3fn caches with
    bf16 queries and per-tensor / per-page descales; an fp8 cache takes bf16
    k / v, stored as e4m3(row / descale) with its page's or the tensor's
    descale).
    sinks: fp32 [nheads] attention-sink logits as in attention() (None: none).
    num_splits 0 lets the library choose. Returns out [batch, seqlen_q,
    nheads, headdim] (bf16 for fp8 caches), or (out, lse fp32 [batch,
    nheads, seqlen_q]); plan_only=True returns the plan as a dict instead of
    running. kernels: the kernel set (None: the library's decode set; an
    fmha_tile.KernelSet or the Library its build() returns, with DECODE /
    DECODE_VEC rows).
    """
    import torch

    h = _lib.handle(kernels)
    with torch.cuda.device(q.device):
        def to_device(x):
            return torch.full((1,), x, dtype=torch.float32, device=q.device)

        a, out_dtype, keep = decode_args(
            q, k_cache, v_cache, seqlens_k, to_device=to_device, k=k, v=v, rotary_cos=rotary_cos,
            rotary_sin=rotary_sin, rotary_interleaved=rotary_interleaved, cache_batch_idx=cache_batch_idx,
            kv_indptr=kv_indptr, kv_page_indices=kv_page_indices, kv_last_page_len=kv_last_page_len,
            block_table=block_table, max_seqlen_k=max_seqlen_k, causal=causal, window=window, softcap=softcap,
            scale=scale, alibi_slopes=alibi_slopes, k_descale=k_descale, v_descale=v_descale,
            num_splits=num_splits, sinks=sinks)
        o = _call_out(torch, q, out, out_dtype)
        batch, s_q, hq, d = (int(x) for x in q.shape)
        lse = torch.empty((batch, hq, s_q), dtype=torch.float32, device=q.device) if return_lse else None
        os_ = strides(o)
        a.o = o.data_ptr()
        a.batch_stride_o, a.stride_o, a.nhead_stride_o = os_[0], os_[1], os_[2]
        if lse is not None:
            a.lse, a.batch_stride_lse, a.nhead_stride_lse = lse.data_ptr(), hq * s_q, s_q
        q_rot = _q_rope(torch, a, q)
        lib, plan = _plan_make(h, a, "fmha_tile.attention_with_kvcache")
        if plan_only:
            return {"kernel": plan.kernel.contents.name.decode(), "num_splits": plan.num_splits,
                    "workspace_size": plan.workspace_size,
                    "combine": plan.combine.contents.name.decode() if plan.combine else None,
                    "grid": (plan.grid_x, plan.grid_y, plan.grid_z), "block": plan.block,
                    "why": plan.why.decode() if plan.why else ""}
        ws = None
        if plan.workspace_size:
            ws = torch.empty(plan.workspace_size + 16, dtype=torch.uint8, device=q.device)
            base = ws.data_ptr()
            a.workspace = base + (-base % 16)
            a.workspace_size = plan.workspace_size
        stream = _lib.current_stream_ptr(torch, q.device)
        st = lib.fmha_decode_run(ctypes.byref(plan), ctypes.byref(a), _vp(stream))
        del keep, ws, q_rot   # freed in stream order after the launch
        h.check_status(st, "fmha_tile.attention_with_kvcache")
    return (o, lse) if return_lse else o
