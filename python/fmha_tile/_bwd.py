"""The backward pass: fmha_bwd_traits / fmha_bwd_args from a forward problem,
and the calls fmha_bwd_plan_make -> workspace -> fmha_bwd_prepare_workspace_device
-> fmha_bwd on the current stream.

Graph-safe: the workspace size comes from the shapes (the plan), the
workspace from the caching allocator, its tables from a kernel on the current
stream; nothing is read back on the host, except the varlen bound check in
eager mode (under capture that check runs on the device, _check_bounds).

bwd_structs() only uses what a tensor exposes (shape, stride(), data_ptr()),
so it can be tested with stand-in tensors on a machine without PyTorch or a
GPU; run_backward() adds the torch parts (gradient buffers, the workspace,
the stream, the launch). The autograd.Function that calls it lives in
__init__.py, next to the forward it saves tensors from.
"""
import ctypes

from . import _lib
from ._args import check_size, strides


def _rows_heads_batch(t, group):
    """(row, head, batch) element strides of [b, s, h, d] or [total, h, d]."""
    s = strides(t)
    return (s[0], s[1], 0) if group else (s[1], s[2], s[0])


def bwd_structs(p, q, k, v, o, lse, dout, dq, dk, dv, deterministic, dbias=None):
    """-> (FmhaBwdTraits, FmhaBwdArgs) of the backward of forward problem p
    (an _args.Problem) with the forward's q, k, v, o and lse, the incoming
    gradient dout (o's shape) and the gradient buffers dq, dk, dv (the shapes
    of q, k, v), and dbias (p's bias shape, contiguous; None: not wanted)
    when p has a bias. The workspace fields are left for the caller."""
    fa = p.args
    group = bool(fa.is_group_mode)
    t = _lib.FmhaBwdTraits()
    t.dtype, t.is_group_mode = fa.dtype, fa.is_group_mode
    t.batch, t.nhead_q, t.nhead_k = fa.batch, fa.nhead_q, fa.nhead_k
    if group:
        # totals size the workspace (the tensors' rows bound seqstart[batch]);
        # the max lengths choose the splits and the direct-dQ path
        t.seqlen_q = check_size("total tokens of q", q.shape[0])
        t.seqlen_k = check_size("total tokens of k", k.shape[0])
        t.max_seqlen_q, t.max_seqlen_k = fa.max_seqlen_q, p.max_seqlen_k
    else:
        t.seqlen_q, t.seqlen_k = fa.seqlen_q, fa.seqlen_k
        t.max_seqlen_q, t.max_seqlen_k = fa.seqlen_q, fa.seqlen_k
    t.hdim_q, t.hdim_v = fa.hdim_q, fa.hdim_v
    t.mask_type, t.window_left, t.window_right = fa.mask_type, fa.window_left, fa.window_right
    t.has_logits_soft_cap = int(fa.logits_soft_cap > 0)
    t.has_alibi = int(bool(fa.alibi_slopes))
    t.is_deterministic = int(bool(deterministic))
    t.has_bias = int(bool(fa.bias))
    t.has_dbias = int(dbias is not None)
    t.dbias_bcast = p.bias_bcast if dbias is not None else 0

    a = _lib.FmhaBwdArgs()
    for f in ("dtype", "is_group_mode", "batch", "nhead_q", "nhead_k", "seqlen_q", "seqlen_k",
              "max_seqlen_q", "max_seqlen_k", "hdim_q", "hdim_v", "mask_type", "window_left",
              "window_right", "is_deterministic"):
        setattr(a, f, getattr(t, f))
    for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("do", dout), ("dq", dq), ("dk", dk),
                    ("dv", dv)):
        setattr(a, "dout" if name == "do" else name, x.data_ptr() or None)
        row, head, batch = _rows_heads_batch(x, group)
        setattr(a, "stride_" + name, row)
        setattr(a, "nhead_stride_" + name, head)
        setattr(a, "batch_stride_" + name, batch)
    a.lse = lse.data_ptr() or None
    sl = strides(lse)
    if group:   # [h, total_q]
        a.nhead_stride_lse, a.batch_stride_lse = sl[0], 0
    else:       # [b, h, s_q]
        a.nhead_stride_lse, a.batch_stride_lse = sl[1], sl[0]
    a.seqstart_q, a.seqstart_k = fa.seqstart_q, fa.seqstart_k
    a.scale, a.logits_soft_cap = fa.scale, fa.logits_soft_cap
    a.alibi_slopes, a.alibi_batch_stride = fa.alibi_slopes, fa.alibi_batch_stride
    # dropout: the forward's p and Philox seed/offset (or its device rng
    # pointer), so the backward redraws the forward's mask
    a.dropout_p, a.dropout_seed, a.dropout_offset = fa.dropout_p, fa.dropout_seed, fa.dropout_offset
    a.dropout_rng = fa.dropout_rng
    # the forward's bias; dbias contiguous in p's bias shape (a summed dim
    # has size 1, its stride unused)
    a.bias, a.bias_dtype = fa.bias, fa.bias_dtype
    a.stride_bias, a.nhead_stride_bias, a.batch_stride_bias = \
        fa.stride_bias, fa.nhead_stride_bias, fa.batch_stride_bias
    if dbias is not None:
        sd = strides(dbias)
        a.dbias = dbias.data_ptr() or None
        if group:   # [h or 1, total_q, cols]
            a.nhead_stride_dbias, a.stride_dbias, a.batch_stride_dbias = sd[0], sd[1], 0
        else:       # [b or 1, h or 1, s_q, s_k]
            a.batch_stride_dbias, a.nhead_stride_dbias, a.stride_dbias = sd[0], sd[1], sd[2]
    return t, a


def _is_capturing(torch):
    """True while the current stream of the current device is being captured."""
    f = getattr(torch.cuda, "is_current_stream_capturing", None)
    return bool(f()) if f is not None else False


def _dense_grad(torch, dout, o):
    """The incoming gradient as the library reads it: o's dtype, a unit head-dim
    stride, 16-byte aligned (autograd may hand in expanded or odd views)."""
    if dout.dtype != o.dtype:
        dout = dout.to(o.dtype)
    if not dout.is_contiguous() or dout.data_ptr() % 16:
        dout = dout.clone(memory_format=torch.contiguous_format)
    return dout


def _check_bounds(torch, p, cu_seqlens_q, cu_seqlens_k, capturing):
    """Group mode: the plan trusts max_seqlen_q/max_seqlen_k (a too small
    max_seqlen_k could make it write dQ directly from several key tiles), so
    check them against the lengths. Eager: one small device-to-host copy and
    a ValueError. Under graph capture nothing may be read on the host: the
    check is a device-side assert (torch._assert_async) captured with the
    backward, which fails the replay (a CUDA error at the next
    synchronisation) instead of giving wrong gradients."""
    lq = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max()
    lk = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).max()
    if capturing:
        ok = (lq <= p.args.max_seqlen_q) & (lk <= p.max_seqlen_k)
        torch._assert_async(ok)
        return
    mq, mk = torch.stack([lq, lk]).tolist()
    if mq > p.args.max_seqlen_q or mk > p.max_seqlen_k:
        raise ValueError("fmha_tile.attention_varlen backward: the longest sequences (%d queries, %d "
                         "keys) exceed max_seqlen_q=%d / max_seqlen_k=%d"
                         % (mq, mk, p.args.max_seqlen_q, p.max_seqlen_k))


def run_backward(torch, p, q, k, v, o, lse, dout, cu_seqlens_q, cu_seqlens_k, deterministic,
                 where, kernels=None, sinks=None, want_dbias=False):
    """dq, dk, dv (contiguous, the shapes and dtypes of q, k, v), dsinks
    (fp32 [h], None without sinks) and dbias (p.bias's shape and dtype,
    summed over its broadcast dims; None unless want_dbias) of forward
    problem p, computed on the current stream of q's device with the kernel
    set of kernels (an _lib.handle() argument: None for the default set)."""
    group = bool(p.args.is_group_mode)
    with torch.cuda.device(q.device):
        # group mode: rows past cu_seqlens[-1] belong to no sequence and are
        # never written, so start from zeros; empty problems have nothing to launch
        trivial = p.empty_q or p.empty_k
        alloc = torch.zeros if group or trivial else torch.empty
        dq = alloc(tuple(q.shape), dtype=q.dtype, device=q.device)
        dk = alloc(tuple(k.shape), dtype=k.dtype, device=q.device)
        dv = alloc(tuple(v.shape), dtype=v.dtype, device=q.device)
        # no keys: O = 0, so D = 0 and dsinks = 0 too
        dsinks = torch.zeros(tuple(sinks.shape), dtype=torch.float32, device=q.device) \
            if sinks is not None else None
        # dbias in the library's view of the bias (p.bias_shape); group mode
        # leaves columns past max_seqlen_k and rows past the last sequence
        # unwritten (their gradient is 0)
        dbias = None
        if want_dbias:
            dbias = (torch.zeros if group or trivial else torch.empty)(
                p.bias_shape, dtype=p.bias.dtype, device=q.device)
        if trivial:   # no query rows: dK = dV = 0; no keys: O = 0, so dQ = 0
            return dq, dk, dv, dsinks, _dbias_out(p, dbias)
        capturing = _is_capturing(torch)
        if group:
            _check_bounds(torch, p, cu_seqlens_q, cu_seqlens_k, capturing)
        dout = _dense_grad(torch, dout, o)
        traits, a = bwd_structs(p, q, k, v, o, lse, dout, dq, dk, dv, deterministic, dbias)
        if sinks is not None:
            a.sinks, a.dsinks = sinks.data_ptr(), dsinks.data_ptr()
        h = _lib.handle(kernels)
        lib = _lib.bwd_library(h)
        plan = _lib.FmhaBwdPlan()
        st = lib.fmha_bwd_plan_make(h.set, ctypes.byref(traits), ctypes.byref(plan))
        h.check_status(st, where)
        stream = ctypes.c_void_p(torch.cuda.current_stream(q.device).cuda_stream)
        ws = None
        size = plan.workspace_size
        if size:
            ws = torch.empty(size, dtype=torch.uint8, device=q.device)
        ws_ptr = ws.data_ptr() if ws is not None else None
        # the tables built by a kernel on the stream from the seqstarts on the
        # device: no host read, no pinned staging, capturable. A library built
        # before that form has only the synchronous one (not capturable).
        prep = getattr(lib, "fmha_bwd_prepare_workspace_device", None)
        if prep is None:
            if capturing:
                raise RuntimeError("%s: this fmha_tile library has no fmha_bwd_prepare_workspace_device, "
                                   "so its backward cannot be captured in a CUDA graph; rebuild it "
                                   "(make lib)" % where)
            prep = lib.fmha_bwd_prepare_workspace
        st = prep(ctypes.byref(plan), ws_ptr, size, a.seqstart_q, a.seqstart_k, stream)
        h.check_status(st, where)
        a.workspace, a.workspace_size = ws_ptr, size
        st = lib.fmha_bwd(ctypes.byref(plan), ctypes.byref(a), stream)
        h.check_status(st, where)
        # ws is freed here; the caching allocator reuses it in stream order
    return dq, dk, dv, dsinks, _dbias_out(p, dbias)


def _dbias_out(p, dbias):
    """dbias in the caller's bias shape (the library's view drops nothing
    but leading dims of size 1)."""
    return None if dbias is None else dbias.view(tuple(p.bias.shape))
