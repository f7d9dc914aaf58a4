"""fmha_tile: fused multi-head attention on PyTorch tensors, through the C API
of libfmha_tile.so.

A pure-Python package (ctypes, no compiled extension of its own). It loads the
shared library that `make lib` builds (build/libfmha_tile.so; or the path in
$FMHA_TILE_LIB; or libfmha_tile.so on the loader path), takes torch.Tensors as
they are (device pointers, strides, dtype, the current stream) and calls
fmha_fwd() with the library's default kernel set (fmha_bwd() for gradients).

    import torch, fmha_tile
    q = torch.randn(2, 1000, 16, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 1200, 4, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    o = fmha_tile.attention(q, k, v, causal=True)                 # [2, 1000, 16, 128]
    o, lse = fmha_tile.attention(q, k, v, window=(256, 0), return_lse=True)
    # fp8 (Hopper): e4m3 q, k, v with per-tensor descales, bf16 out
    ds = torch.tensor([0.5], device="cuda")
    o8 = fmha_tile.attention(q.to(torch.float8_e4m3fn), k.to(torch.float8_e4m3fn),
                             v.to(torch.float8_e4m3fn), causal=True, q_descale=ds)
    # the same with V given K-major (the Hopper head dims 128 / 256: no
    # transpose in the kernel, 5-14% faster); V^T made once, e.g. per cache
    vt = fmha_tile.fp8_v_kmajor(v.to(torch.float8_e4m3fn))        # [2, 4, 128, 1200]
    o8 = fmha_tile.attention(q.to(torch.float8_e4m3fn), k.to(torch.float8_e4m3fn), vt,
                             causal=True, v_kmajor=True)

Functions (names and meanings follow FlashAttention's Python API):

    attention(q, k, v, causal=False, window=(-1, -1), softcap=0.0,
              alibi_slopes=None, scale=None, return_lse=False, *, out=None, out_lse=None,
              deterministic=False, q_descale=None, k_descale=None, v_descale=None, sinks=None,
              dropout_p=0.0, generator=None)
        q [batch, seqlen_q, nheads, headdim], k and v [batch, seqlen_k,
        nheads_k, headdim]; returns out [batch, seqlen_q, nheads, headdim]
        and, with return_lse, lse fp32 [batch, nheads, seqlen_q].
    fp8_v_kmajor(v, *, out=None)
        e4m3 V [batch, seqlen_k, nheads_k, headdim] as V^T [batch, nheads_k,
        headdim, keys] (keys = seqlen_k rounded up to 16, in the layout's own
        key order; fmha_fp8_v_kmajor), for attention(..., v_kmajor=True).
    attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None,
                     scale=None, return_lse=False, *, out=None, out_lse=None,
                     deterministic=False, q_descale=None, k_descale=None, v_descale=None,
                     sinks=None, dropout_p=0.0, generator=None)
        packed q [total_q, nheads, headdim], k and v [total_k, nheads_k,
        headdim]; cu_seqlens_* int32 [batch + 1] prefix sums on the device
        (sequences may be empty); max_seqlen_q must bound every query length
        (it sizes the grid: the lengths are never read on the host). Returns
        out [total_q, nheads, headdim] and, with return_lse, lse fp32
        [nheads, total_q]. Rows past cu_seqlens_q[-1] are not written.
    batch_prefill(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, *, kv_indptr=None,
                  kv_page_indices=None, kv_last_page_len=None, block_table=None,
                  seqlens_k=None, kv_layout="NHD", causal=True, window=(-1, -1),
                  softcap=0.0, scale=None, k_descale=None, v_descale=None,
                  q_descale=None, return_lse=False, out=None, out_lse=None, sinks=None)
        packed q [total_q, nheads, headdim] over a paged KV cache (SGLang 1-D
        or vLLM 2-D page table; NHD, HND or VECTORIZED pages). fp16/bf16
        caches with queries of the same dtype, or torch.float8_e4m3fn caches
        (NHD/HND) with bf16 or float8_e4m3fn queries and a bf16 output;
        descales per tensor (numbers or 1-element float32 tensors) or per page
        and KV head (float32 [num_pages, nheads_k], any strides), real =
        stored * descale. See fmha_tile._prefill.
    attention_with_kvcache(q, k_cache, v_cache, seqlens_k=None, k=None, v=None,
                           rotary_cos=None, rotary_sin=None, rotary_interleaved=False,
                           cache_batch_idx=None, *, kv_indptr=None, kv_page_indices=None,
                           kv_last_page_len=None, block_table=None, max_seqlen_k=None,
                           causal=False, window=(-1, -1), softcap=0.0, scale=None,
                           alibi_slopes=None, k_descale=None, v_descale=None, num_splits=0,
                           return_lse=False, out=None, plan_only=False, sinks=None)
        decode (split-KV) of q [batch, seqlen_q, nheads, headdim] over a
        contiguous or paged cache, appending k / v first and applying rotary
        embedding; seqlens_k counts the keys after the append. See
        fmha_tile._decode.
    decode_plan(<attention_with_kvcache's arguments>) -> DecodePlan
        the same call made once (checks, kernel selection, split count):
        plan.run(q, k_cache, v_cache, seqlens_k, ..., out=) patches the
        pointers of tensors shaped like the plan's and launches (the host
        fast path for decode; see fmha_tile._decode_plan).
    forward_plan(<attention's arguments>) -> ForwardPlan
        the same for the forward (batch mode, inference): plan.run(q, k, v,
        out=) (see fmha_tile._fwd_plan).
    attention_plan(...), attention_varlen_plan(...)
        the same arguments: "is it supported, and by which kernel?" without
        launching or allocating (fmha_fwd_check); a dict, or FmhaError.
    kernels()   the default kernel set as parsed JSON (fmha_set_json)
    version()   the library's version string (fmha_version)
    library_path()  where the library was loaded from
    KernelSet(rows).build()
        a kernel set declared from Python (DECL_FMHA_KERNEL_SET's rows and
        wildcards), checked by the library's constraints, compiled with nvcc
        and cached (fmha_tile.jit); every function above takes the Library
        it returns (or the KernelSet) as kernels= in place of the default set.

Semantics:
  - dtype fp16 or bf16 (q, k, v alike); head dim a multiple of 8, at most 256.
  - sinks (every entry point): None, or fp32 [nheads] attention-sink logits
    on q's device: one more key per row with that logit and no value; the
    LSE includes it (a row that sees no key: out 0, lse = its sink);
    differentiable in attention() / attention_varlen().
  - fp8: q, k and v torch.float8_e4m3fn, head dim a multiple of 16, output
    torch.bfloat16; on a Hopper (sm_90) GPU only (elsewhere FmhaError, no
    kernel). q_descale, k_descale, v_descale: per-tensor descales, each None
    (1) or a 1-element float32 tensor on q's device, real = stored * descale
    (ValueError with 16-bit inputs). P is rounded to e4m3 for P V: against
    an fp32 reference on the dequantised inputs expect a rel-L2 of about
    3e-2. No backward (NotImplementedError when an input requires grad).
    v_kmajor=True (attention(), attention_plan(), forward_plan()): v is
    V^T as fp8_v_kmajor() writes it ([batch, nheads_k, headdim, keys],
    keys >= seqlen_k rounded up to 16, unit key stride, any other strides
    multiples of 16); the Hopper e4m3 rows of head dims 128 and 256 then
    copy V^T tiles by TMA instead of transposing V in shared memory; other
    head dims, varlen and builds without tensor maps refuse it (FmhaError).
  - GQA/MQA: nheads % nheads_k == 0; query head h reads KV head
    h // (nheads // nheads_k).
  - dropout_p in [0, 1) (attention() and attention_varlen(), forward and
    backward; fp16/bf16): each element of P is dropped with probability p,
    taken in 256ths (threshold round(256 p)), the kept ones scaled by
    256 / (256 - threshold); the LSE is the one without dropout. The mask is
    Philox4x32-7 of (seed, offset, b * nheads + h, i, j) (fmha_tile.philox
    computes it on the host); seed = the CUDA generator's initial_seed(),
    offset = its get_offset() with bit 63 set (philox.kernel_offset: no
    draw shared with torch's own random ops), the generator advanced by 4
    per call (generator=: a
    torch.Generator on q's device, else the device's default one), so
    torch.manual_seed reproduces a run; the backward redraws the mask from
    the saved seed and offset. Under CUDA graph capture the pair is drawn on
    the device by a torch random op (fmha_fwd_args.dropout_rng), so each
    replay draws a new mask. dropout_p=0 leaves the generator alone. See
    fmha_tile._dropout.
  - causal is bottom-right aligned (FlashAttention >= 2.1): with s_q queries and
    s_k keys, query i sees key j when j <= i + s_k - s_q. window=(left, right),
    -1 unbounded, is bottom-right aligned too; causal=True sets right to 0. A
    query row that sees no key gives out = 0 and lse = -inf (its sink with
    sinks=).
  - softcap c > 0: scores s become c * tanh(s / c). alibi_slopes fp32 [nheads]
    or [batch, nheads]: adds -slope * |i + s_k - s_q - j|. scale defaults to
    1 / sqrt(headdim).
  - Any strides with a unit head-dim stride are taken as they are (a
    [b, s, h, d] view of a [b, h, s, d] tensor, a slice of a packed QKV
    tensor); the library needs 16-byte aligned data and strides that are
    multiples of 8 elements, and says so (FmhaError) otherwise.
  - Autograd: attention() and attention_varlen() are differentiable in q, k
    and v (a torch.autograd.Function over fmha_bwd: dq, dk, dv contiguous,
    dk/dv with nheads_k heads under GQA). Only when an input requires grad
    and grad mode is on does the forward keep the LSE and save q, k, v, out
    and lse; otherwise it is the plain forward. deterministic=True makes the
    backward bitwise reproducible (no float atomics). ALiBi trains too (the
    slopes themselves get no gradient; the default set's ALiBi backward rows
    have no soft cap: ALiBi with a soft cap raises FmhaError NO_KERNEL at the
    backward). Not differentiable: out= / out_lse= (ValueError then), the
    LSE output, double backward. The
    backward allocates its workspace with torch and prepares it with
    fmha_bwd_prepare_workspace_device (a kernel on the current stream), so
    forward and backward can be captured together in a CUDA graph; the
    varlen backward checks max_seqlen_q / max_seqlen_k against the lengths
    (eager: a ValueError after one small read-back; under capture: a
    device-side assert, nothing read on the host).

Streams, devices, allocation, CUDA graphs:
  - The kernel runs on torch.cuda.current_stream() of the tensors' device,
    with that device current; nothing synchronises with the host.
  - Outputs are allocated with torch.empty (PyTorch's caching allocator, which
    is safe under CUDA graph capture: inside torch.cuda.graph they come from
    the graph's private pool) unless you pass out= / out_lse=, in which case
    the call allocates nothing. Calls work inside torch.cuda.graph.

torch.compile and FlashAttention's API:
  - fmha_tile.ops (import it explicitly, or touch fmha_tile.ops) registers
    the entry points as torch.library custom ops (torch.ops.fmha_tile.fwd,
    fwd_varlen, bwd, bwd_varlen, batch_prefill, decode, decode_append) with
    fake implementations and autograd, so torch.compile(fullgraph=True)
    traces through them; it also has wrappers with the signatures above.
    The functions above are ctypes calls that Dynamo cannot trace (a graph
    break under torch.compile).
  - fmha_tile.compat: flash_attn_func, flash_attn_varlen_func,
    flash_attn_with_kvcache (and the packed variants) with FlashAttention
    2's arguments and return values, over those ops.

Errors: TypeError and ValueError for arguments Python can check (types,
shapes, devices, dtypes, unit strides, ranges); FmhaError (a RuntimeError)
when the library refuses the call: its status, fmha_status_str() and the
library's message (fmha_last_error()). FmhaLibraryError (an OSError) when the
library cannot be loaded.
"""
import ctypes
import json
import math

from . import _args, _bwd, _dropout, _lib
from . import philox  # noqa: F401  (the dropout rule on the host; no torch at import)
from ._lib import FmhaError, FmhaLibraryError, library_path
from ._prefill import batch_prefill, batch_prefill_plan
from ._decode import attention_with_kvcache
from ._decode_plan import DecodePlan, decode_plan
from ._fwd_plan import ForwardPlan, forward_plan
from ._lib import Library
from .jit import ANY, KernelSet, InvalidRowError, FmhaBuildError

__version__ = "0.1.0"

__all__ = [
    "attention", "attention_varlen", "attention_plan", "attention_varlen_plan", "batch_prefill",
    "batch_prefill_plan", "attention_with_kvcache", "decode_plan", "DecodePlan",
    "forward_plan", "ForwardPlan", "fp8_v_kmajor",
    "kernels", "version", "library_path", "FmhaError", "FmhaLibraryError",
    "KernelSet", "Library", "ANY", "InvalidRowError", "FmhaBuildError",
]


def __getattr__(name):
    """fmha_tile.ops, fmha_tile.compat and fmha_tile.hf (they need PyTorch >= 2.4) load on
    first access, so that `import fmha_tile` works without torch."""
    if name in ("ops", "compat", "hf"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("fmha_tile.attention needs PyTorch (%s)" % e) from None
    return torch


def version(kernels=None):
    """The library's version string (fmha_version()); kernels: as in attention()."""
    return _lib.handle(kernels).version()


def kernels(kernels=None):
    """The library's default kernel set (or the one kernels= names, as in
    attention()) as parsed JSON (fmha_set_json()):
    {"set": name, "kernels": [{"name", "family", "dtype", "hdim_q", "hdim_v",
    "mask", "softcap", "alibi", "bias", "dropout", "p8_qsum", "tile", "warps", "stages", "pipeline", "arch",
    "smem_bytes"}, ...]}."""
    h = _lib.handle(kernels)
    n = h.cdll.fmha_set_json(h.set, None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    h.cdll.fmha_set_json(h.set, buf, n + 1)
    return json.loads(buf.value.decode())


def _needs_grad(torch, tensors):
    return torch.is_grad_enabled() and any(
        t is not None and getattr(t, "requires_grad", False) for t in tensors)


def _check_flag(name, x):
    if not isinstance(x, bool):
        if x in (0, 1):
            return bool(x)
        raise TypeError("%s must be a bool, got %r" % (name, x))
    return x


def _launch(torch, p, q, o, lse, where, h):
    """Launch the forward into o (and lse, unless None) on the current stream
    with library handle h; the caller has made q's device current."""
    lib = h.cdll
    kset = h.set
    p.set_outputs(o, lse)
    if p.empty_q or p.empty_k:
        # Nothing to launch, but the call is validated all the same.
        st = lib.fmha_fwd_check(kset, ctypes.byref(p.check_args()), None)
        h.check_status(st, where)
        if not p.empty_q:      # queries but no keys: every row sees nothing
            o.zero_()
            if lse is not None:
                if p.sinks is None:
                    lse.fill_(-math.inf)
                else:          # [b, h, s] or [h, total]: each row's LSE is its sink
                    lse.copy_(p.sinks.view((1, -1, 1) if lse.dim() == 3 else (-1, 1)).expand_as(lse))
    else:
        stream = _lib.current_stream_ptr(torch, q.device)
        st = lib.fmha_fwd(kset, ctypes.byref(p.args), ctypes.c_void_p(stream))
        h.check_status(st, where)


def _run(torch, p, q, out, out_lse, return_lse, where, h):
    """Allocate (unless given) the outputs and launch on the current stream."""
    p.check_out(out, q)
    p.check_lse(out_lse, q)
    with torch.cuda.device(q.device):
        o = out if out is not None else torch.empty(p.out_shape, dtype=p.out_dtype(torch, q),
                                                    device=q.device)
        lse = out_lse
        if lse is None and return_lse:
            lse = torch.empty(p.lse_shape, dtype=torch.float32, device=q.device)
        _launch(torch, p, q, o, lse, where, h)
    return (o, lse) if return_lse else o


_function = []


def _attention_function(torch):
    """The torch.autograd.Function of attention() and attention_varlen(),
    defined on first use (the package imports torch lazily)."""
    if _function:
        return _function[0]
    from torch.autograd.function import once_differentiable

    class _Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, sinks, cu_seqlens_q, cu_seqlens_k, p, deterministic, where, h,
                    dropout_rng, bias):
            with torch.cuda.device(q.device):
                o = torch.empty(p.out_shape, dtype=q.dtype, device=q.device)
                # the backward needs the LSE whether or not the caller asked for it
                lse = torch.empty(p.lse_shape, dtype=torch.float32, device=q.device)
                _launch(torch, p, q, o, lse, where, h)
            # dropout: p.args keeps the seed and offset (or the pointer to
            # dropout_rng, saved here) for the backward to redraw the mask
            ctx.save_for_backward(q, k, v, o, lse, sinks, cu_seqlens_q, cu_seqlens_k, dropout_rng, bias)
            ctx.problem = p
            ctx.deterministic = deterministic
            ctx.where = where
            ctx.lib = h
            ctx.mark_non_differentiable(lse)
            return o, lse

        @staticmethod
        @once_differentiable
        def backward(ctx, dout, dlse):
            q, k, v, o, lse, sinks, cu_q, cu_k, _rng, _bias = ctx.saved_tensors
            need = ctx.needs_input_grad
            # the bias (kept alive by the save; p points at it) gets its
            # gradient summed over its broadcast dims
            dq, dk, dv, dsinks, dbias = _bwd.run_backward(
                torch, ctx.problem, q, k, v, o, lse, dout, cu_q, cu_k, ctx.deterministic,
                ctx.where + " (backward)", ctx.lib, sinks, want_dbias=bool(need[11]))
            return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
                    dsinks if need[3] else None, None, None, None, None, None, None, None, dbias)

    _function.append(_Attention)
    return _Attention


def _run_grad(torch, p, q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, out, out_lse,
              return_lse, deterministic, where, h):
    """The differentiable path: inputs require grad and grad mode is on."""
    if p.fp8:
        raise NotImplementedError(
            "%s: the fp8 forward has no backward pass; call it under torch.no_grad() or "
            "torch.inference_mode(), or pass detached tensors" % where)
    if out is not None or out_lse is not None:
        raise ValueError("%s: out= and out_lse= are not supported when an input requires grad "
                         "(use return_lse=True for the LSE)" % where)
    o, lse = _attention_function(torch).apply(q, k, v, p.sinks, cu_seqlens_q, cu_seqlens_k, p,
                                              deterministic, where, h, p.dropout_rng, p.bias)
    return (o, lse) if return_lse else o


def _plan(p, h):
    plan = _lib.FmhaFwdPlan()
    st = h.cdll.fmha_fwd_check(h.set, ctypes.byref(p.check_args()), ctypes.byref(plan))
    h.check_status(st, "fmha_fwd_check")
    return _lib.plan_dict(plan)


def fp8_v_kmajor(v, *, out=None, kernels=None):
    """e4m3 V as V^T for attention(..., v_kmajor=True) (fmha_fp8_v_kmajor).

    v: torch.float8_e4m3fn [batch, seqlen_k, nheads_k, headdim] (16-byte
    aligned, strides multiples of 16, headdim a multiple of 16 up to 256).
    Returns V^T [batch, nheads_k, headdim, keys], keys = seqlen_k rounded up
    to 16: row (b, h, c) holds V[b, :, h, c] with each group of 16 keys in
    the order the kernel's e4m3 P fragments hold them (fmha_fp8_v_kmajor_pos:
    within a group, position i holds key 2 (i // 4) + (i & 1) + 8 ((i >> 1)
    & 1)), the padding keys zero. out=: a tensor of that
    shape and dtype, contiguous. Runs on the current stream (one copy of V,
    about 25 us for 34 MB on an H100); kernels: as in attention()."""
    torch = _torch()
    fp8 = getattr(torch, "float8_e4m3fn", None)
    _args.check_tensor("v", v, 4, "[batch, seqlen_k, nheads_k, headdim]")
    if fp8 is None or v.dtype != fp8:
        raise TypeError("fp8_v_kmajor: v must be torch.float8_e4m3fn, got %s" % v.dtype)
    b, s_k, hk, d = v.shape
    shape = (b, hk, d, _args.v_kmajor_keys(s_k))
    if out is None:
        with torch.cuda.device(v.device):
            out = torch.empty(shape, dtype=fp8, device=v.device)
    elif (not _args._is_tensor(out) or tuple(out.shape) != shape or out.dtype != fp8 or
          out.device != v.device or not out.is_contiguous()):
        raise ValueError("fp8_v_kmajor: out must be a contiguous torch.float8_e4m3fn tensor of shape %s on "
                         "%s" % (shape, v.device))
    if out.numel() == 0:   # no keys (or an empty batch): nothing to write
        return out
    a = _lib.FmhaFwdArgs()
    a.dtype = _lib.FMHA_DTYPE_FP8
    a.batch, a.nhead_k, a.seqlen_k, a.hdim_v = b, hk, s_k, d
    a.v = v.data_ptr() or None
    st = _args.strides(v)
    a.batch_stride_v, a.stride_v, a.nhead_stride_v = st[0], st[1], st[2]
    h = _lib.handle(kernels)
    with torch.cuda.device(v.device):
        stream = _lib.current_stream_ptr(torch, v.device)
        status = h.cdll.fmha_fp8_v_kmajor(ctypes.byref(a), ctypes.c_void_p(out.data_ptr() or None),
                                          ctypes.c_void_p(stream))
    h.check_status(status, "fmha_tile.fp8_v_kmajor")
    return out


def attention(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None,
              scale=None, return_lse=False, *, out=None, out_lse=None, deterministic=False,
              q_descale=None, k_descale=None, v_descale=None, kernels=None, sinks=None,
              dropout_p=0.0, generator=None, bias=None, v_kmajor=False):
    """Attention over [batch, seqlen, nheads, headdim] tensors.

    q [b, s_q, h, d], k and v [b, s_k, h_k, d] (fp16 or bf16, one CUDA device,
    unit head-dim stride, any other strides the library accepts). causal:
    bottom-right aligned; window (left, right), -1 unbounded; softcap: 0 off;
    alibi_slopes fp32 [h] or [b, h]; scale: default 1/sqrt(d).

    FP8 (Hopper only): q, k and v torch.float8_e4m3fn (strides multiples of
    16, head dim a multiple of 16); q_descale, k_descale, v_descale None (1)
    or 1-element float32 tensors on q's device, real = stored * descale;
    out is torch.bfloat16. Not differentiable. v_kmajor=True: v is V^T as
    fp8_v_kmajor() returns it (the module docstring).

    Returns out [b, s_q, h, d] (q's dtype; bf16 for fp8), or (out, lse) with return_lse,
    lse fp32 [b, h, s_q] (natural log; -inf for a row that sees no key).
    out= / out_lse= take caller-owned outputs of those shapes (any strides
    with a unit last-dim stride); the call then allocates nothing.

    sinks: None, or fp32 [h] attention-sink logits (gpt-oss): one more key
    per row with that logit and no value; the LSE includes it, a row that
    sees no key gets out 0 and lse = its sink.

    Differentiable with respect to q, k, v and sinks (ALiBi included; the
    slopes get no gradient). When an input requires grad and grad mode is on, the
    forward also keeps the LSE and saves q, k, v, out and lse for the
    backward (fmha_bwd); out= / out_lse= are refused then. deterministic:
    the backward uses no float atomics and gives bitwise-identical dq, dk,
    dv run to run (slower).

    kernels: the kernel set that serves the call, forward and backward:
    None for the library's default set, or a set declared from Python, an
    fmha_tile.KernelSet (built on first use) or the Library its build()
    returns.

    dropout_p in [0, 1): dropout on the attention probabilities (training;
    fp16/bf16 only): each element of P is dropped with probability p (taken
    in 256ths: threshold round(p * 256)) and the kept ones scaled by
    256 / (256 - threshold); lse stays the one without dropout. The mask
    comes from Philox seeded by torch's CUDA generator (generator=, a
    torch.Generator on q's device, or the device's default one): its
    initial_seed() and get_offset() (with bit 63 set), the offset advanced
    by 4 per call, so torch.manual_seed reproduces it; the
    backward redraws the same mask from the saved seed and offset. See
    fmha_tile._dropout (CUDA graph capture included). 0 leaves the
    generator untouched.

    bias: None, or an elementwise attention bias [b or 1, h or 1, s_q, s_k]
    (missing leading dims read as 1; fp16, bf16 or fp32, unit last-dim
    stride; the kernel set needs BIAS rows, the default set has them for
    head dims up to 128, fp16/bf16): added to the scaled (soft-capped)
    scores before the mask, as an attn_mask of SDPA; -inf hides a key (a
    row that sees none: out 0, lse -inf). Not with ALiBi or fp8. With
    bias.requires_grad its gradient (dS, summed over the dims of size 1;
    the bias's dtype) comes back too; deterministic covers it (the sums
    then run in a fixed order); not with a soft cap.
    """
    torch = _torch()
    p = _args.batch_problem(q, k, v, causal, window, softcap, alibi_slopes, scale,
                            q_descale, k_descale, v_descale, sinks, dropout_p, v_kmajor)
    _args.set_bias(p, bias, q)
    deterministic = _check_flag("deterministic", deterministic)
    h = _lib.handle(kernels)
    where = "fmha_tile.attention"
    _dropout.setup(torch, p, q.device, generator)
    if _needs_grad(torch, (q, k, v, alibi_slopes, sinks, bias)):
        return _run_grad(torch, p, q, k, v, None, None, alibi_slopes, out, out_lse, return_lse,
                         deterministic, where, h)
    return _run(torch, p, q, out, out_lse, return_lse, where, h)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None,
                     scale=None, return_lse=False, *, out=None, out_lse=None,
                     deterministic=False, q_descale=None, k_descale=None, v_descale=None,
                     kernels=None, sinks=None, dropout_p=0.0, generator=None, bias=None):
    """Attention over packed variable-length sequences.

    q [total_q, h, d], k and v [total_k, h_k, d]; sequence i holds rows
    cu_seqlens_q[i] .. cu_seqlens_q[i+1]-1 of q and cu_seqlens_k[i] ..
    cu_seqlens_k[i+1]-1 of k and v (int32 prefix sums of batch + 1 entries on
    q's device; a sequence may be empty). max_seqlen_q must be at least the
    longest query sequence (it sizes the grid; the prefix sums are never read
    on the host, so the call does not synchronise). max_seqlen_k is taken for
    FlashAttention compatibility and checked to be >= 0. Masks, soft cap,
    ALiBi ([h] or [batch, h]), sinks and scale as in attention(), per
    sequence; fp8 q, k, v and their descales too.

    Returns out [total_q, h, d], or (out, lse) with return_lse, lse fp32
    [h, total_q]. Rows of q past cu_seqlens_q[-1] are left unwritten.

    Differentiable as attention() is (deterministic: the same). The
    backward reads the sequence lengths on the host (it synchronises the
    stream): max_seqlen_q and max_seqlen_k must bound them (ValueError
    otherwise); gradients of rows past cu_seqlens[-1] are 0. kernels: as in
    attention(). dropout_p, generator: as in attention(), i and j counted
    within each sequence and b its index.

    bias: as in attention(), packed by rows: [h or 1, total_q, cols] or
    [total_q, cols] with cols >= max_seqlen_k; query r of sequence i reads
    row cu_seqlens_q[i] + r, its key j column j. Its gradient has its shape
    (0 in columns past a sequence's keys and rows past cu_seqlens_q[-1]).
    """
    torch = _torch()
    p = _args.varlen_problem(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             causal, window, softcap, alibi_slopes, scale,
                             q_descale, k_descale, v_descale, sinks, dropout_p)
    _args.set_bias(p, bias, q)
    deterministic = _check_flag("deterministic", deterministic)
    h = _lib.handle(kernels)
    where = "fmha_tile.attention_varlen"
    _dropout.setup(torch, p, q.device, generator)
    if _needs_grad(torch, (q, k, v, alibi_slopes, sinks, bias)):
        return _run_grad(torch, p, q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, out,
                         out_lse, return_lse, deterministic, where, h)
    return _run(torch, p, q, out, out_lse, return_lse, where, h)


def attention_plan(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None,
                   scale=None, *, q_descale=None, k_descale=None, v_descale=None, kernels=None,
                   dropout_p=0.0, v_kmajor=False):
    """Is attention(q, k, v, ...) supported, and by which kernel? Validates and
    selects (fmha_fwd_check) without launching or allocating; returns a dict
    {"kernel", "pipeline", "hdim", "hdim_v", "page_size", "tile", "warps", "stages", "grid",
    "block", "workspace_size", "why", "p8_qsum"} ("why": the pipeline picked and the reason, e.g.
    why the fast wgmma pipeline does not serve it; fp8 inputs: an fmha_fwd_d*_fp8_*
    wgmma kernel; "p8_qsum": that e4m3 kernel takes a lazy running max and divides O
    by the sum of the rounded P, README "FP8 forward") or raises (TypeError, ValueError, FmhaError). kernels: as
    in attention(); dropout_p: as in attention() (it may change the kernel
    chosen), the generator untouched; v_kmajor: as in attention()."""
    _torch()
    p = _args.batch_problem(q, k, v, causal, window, softcap, alibi_slopes, scale,
                            q_descale, k_descale, v_descale, dropout_p=dropout_p, v_kmajor=v_kmajor)
    h = _lib.handle(kernels)
    with _torch().cuda.device(q.device):
        return _plan(p, h)


def attention_varlen_plan(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None,
                          scale=None, *, q_descale=None, k_descale=None, v_descale=None,
                          kernels=None, dropout_p=0.0):
    """attention_plan() for attention_varlen()'s arguments."""
    _torch()
    p = _args.varlen_problem(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             causal, window, softcap, alibi_slopes, scale,
                             q_descale, k_descale, v_descale, dropout_p=dropout_p)
    h = _lib.handle(kernels)
    with _torch().cuda.device(q.device):
        return _plan(p, h)
