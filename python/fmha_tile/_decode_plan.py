"""fmha_tile.decode_plan / fmha_tile.DecodePlan: a reusable decode plan, the
host fast path of attention_with_kvcache.

attention_with_kvcache() checks every argument, fills all fields of an
fmha_decode_args, makes a plan (kernel selection, split count) and runs it on
each call. A model step calls decode with the same shapes in every layer, so
decode_plan() does that work once: it takes the same arguments (sample
tensors fix the shapes, strides, dtypes and the device), makes the C plan
(fmha_decode_plan_make) and keeps a filled fmha_decode_args. DecodePlan.run()
then only

  - checks each tensor against the plan's record of it: shape, strides,
    dtype and device (a few attribute reads and tuple compares; a tensor that
    differs raises ValueError / TypeError naming it, before anything reaches
    the library);
  - writes the data pointers into the kept struct (and the block table's row
    stride, and the page index vector's pointer, whose length may change);
  - reads the current stream with the raw getter PyTorch uses itself;
  - calls fmha_decode_run, which validates the struct again in C (alignment,
    strides, the plan's shape; a refused call is an FmhaError, never a launch)
    and launches.

What the fast path does not redo, and why that is safe: the dtype / feature
rules, the mask and scalar conversions and the kernel selection depend only
on what the plan records, and run() refuses any tensor whose shape, strides,
dtype or device differ from the record, so every field it does not write
still describes the call. The split-KV workspace (and the rotated-query
buffer with rotary) belongs to the plan, one per CUDA stream, allocated on
first use on that stream (stream-ordered reuse, as the caching allocator
does); under CUDA-graph capture they are allocated per call instead (in the
graph's pool, so the graph owns them). The current device must be the
tensors' (run() switches to it when it is not, at the usual cost).

A plan is not thread-safe (run() writes into one struct): use one plan per
thread.
"""
import ctypes

from . import _lib
from ._args import _is_tensor, check_no_overlap, strides
from ._decode import _call_out, _fn, _plan_make, _q_rope, decode_args
from ._prefill import _descale_scalar

__all__ = ["DecodePlan", "decode_plan"]

# run()'s tensors and the fmha_decode_args field that takes each one's data_ptr.
# Per-call tensors: given to run() exactly when the plan was made with them.
PER_CALL = (("seqlens_k", "seqlen_k"), ("k", "k_new"), ("v", "v_new"),
            ("cache_batch_idx", "cache_batch_idx"), ("kv_indptr", "kv_indptr"),
            ("kv_page_indices", "kv_page_indices"), ("kv_last_page_len", "kv_last_page_lens"),
            ("block_table", "block_table"))
# Parameters (per layer, say): None in run() keeps the plan's own.
PARAMS = (("rotary_cos", "rotary_cos"), ("rotary_sin", "rotary_sin"), ("alibi_slopes", "alibi_slopes"),
          ("sinks", "sinks"), ("k_descale", None), ("v_descale", None))
# Tensors whose length may change between calls (page indices of a step;
# the block table's width): checked by kind, not by shape.
VARIABLE = ("kv_page_indices", "block_table")
_KEYWORDS = frozenset(n for n, _ in PER_CALL + PARAMS) - {"seqlens_k", "k", "v"}


class _Spec(object):
    """What run() requires of one tensor: the sample's shape, strides, dtype
    and device index, and the pointer field it goes to."""
    __slots__ = ("name", "field", "shape", "stride", "dtype", "device", "zstride", "where")

    def __init__(self, name, field, t, where="DecodePlan.run"):
        self.name, self.field, self.where = name, field, where
        self.shape, self.stride, self.dtype = tuple(t.shape), tuple(t.stride()), t.dtype
        self.device = t.get_device()
        self.zstride = strides(t)

    def describe(self):
        return "%s %s with strides %s on cuda:%d" % (self.dtype, self.shape, self.stride, self.device)


def _mismatch(spec, t):
    """The error for a tensor that differs from the plan's record of it,
    or None where it differs only by strides of size-1 dimensions (which the
    library never reads)."""
    if not _is_tensor(t):
        return TypeError("%s: %s must be a torch.Tensor (%s), got %s"
                         % (spec.where, spec.name, spec.describe(), type(t).__name__))
    if t.dtype != spec.dtype:
        return TypeError("%s: %s has dtype %s, the plan was made for %s (make another plan)"
                         % (spec.where, spec.name, t.dtype, spec.dtype))
    if tuple(t.shape) != spec.shape:
        return ValueError("%s: %s has shape %s, the plan was made for %s (make another plan "
                          "for this shape)" % (spec.where, spec.name, tuple(t.shape), spec.shape))
    if t.get_device() != spec.device:
        return ValueError("%s: %s is on %s, the plan was made for cuda:%d"
                          % (spec.where, spec.name, t.device, spec.device))
    if strides(t) != spec.zstride:
        return ValueError("%s: %s has strides %s, the plan was made for %s (make another "
                          "plan, or pass a tensor of the plan's layout)"
                          % (spec.where, spec.name, tuple(t.stride()), spec.stride))
    return None


def _checked_ptr(spec, t):
    """t's data_ptr after the cheap check against spec (the full one only
    when the cheap one fails); the plans' run() and fill() take each tensor
    through it."""
    try:
        if t.dtype is spec.dtype and t.shape == spec.shape and t.stride() == spec.stride and \
                t.get_device() == spec.device:
            return t.data_ptr()
    except (AttributeError, TypeError):
        pass
    err = _mismatch(spec, t)
    if err is not None:
        raise err
    return t.data_ptr()


def _stream(torch, raw, index):
    """Device index's current stream: torch's raw getter (raw) where it has one."""
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream

def _variable(name, t, batch, device):
    """kv_page_indices (int32 [n]) and block_table (int32 [batch, m], rows of
    unit stride): -> (pointer, row stride)."""
    if not _is_tensor(t):
        raise TypeError("DecodePlan.run: %s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if str(t.dtype) != "torch.int32":
        raise TypeError("DecodePlan.run: %s must be torch.int32, got %s" % (name, t.dtype))
    if t.get_device() != device:
        raise ValueError("DecodePlan.run: %s is on %s, the plan was made for cuda:%d" % (name, t.device, device))
    if name == "kv_page_indices":
        if t.dim() != 1 or (t.shape[0] > 1 and t.stride(0) != 1):
            raise ValueError("DecodePlan.run: kv_page_indices must be a contiguous int32 vector, got shape %s "
                             "strides %s" % (tuple(t.shape), tuple(t.stride())))
        return t.data_ptr(), 0
    if t.dim() != 2 or t.shape[0] != batch or (t.shape[1] > 1 and t.stride(1) != 1) or t.stride(0) < 0:
        raise ValueError("DecodePlan.run: block_table must be int32 [%d, max_pages] with unit-stride rows, "
                         "got shape %s strides %s" % (batch, tuple(t.shape), tuple(t.stride())))
    return t.data_ptr(), t.stride(0)


class _Dense(object):
    """shape and stride() of a contiguous tensor of a shape."""

    def __init__(self, shape):
        self.shape, st, acc = shape, [], 1
        for n in reversed(shape):
            st.insert(0, acc)
            acc *= max(n, 1)
        self._st = tuple(st)

    def stride(self):
        return self._st


class DecodePlan(object):
    """A decode call made once and run many times (fmha_tile.decode_plan()).

    run(q, k_cache, v_cache, seqlens_k=None, k=None, v=None, *, <per-call
    tensors>, <parameters>, out=None, lse=None) -> out, or (out, lse) for a
    plan made with return_lse=True.
      q, k_cache, v_cache, and the per-call tensors the plan was made with
      (seqlens_k, k, v, cache_batch_idx, kv_indptr, kv_page_indices,
      kv_last_page_len, block_table): required, each of the plan's shape,
      strides, dtype and device (kv_page_indices: any length; block_table:
      any width); the others must stay None.
      Parameters (rotary_cos, rotary_sin, alibi_slopes, sinks, k_descale,
      v_descale): None uses the plan's; a tensor like the plan's replaces it
      for this call (one plan for every layer of a model). Only those the
      plan was made with can be given.
      out / lse: written when given (the plan's layout), else allocated.
    Everything else (scale, mask, soft cap, rotary_interleaved,
    max_seqlen_k, the split count) is the plan's.

    Attributes: kernel (name), combine (name or None), num_splits,
    workspace_size, grid, block, why, info() (the dict plan_only gives).
    """

    def __init__(self, torch, h, args, plan, specs, variable, params, out_spec, lse_spec, keep, rotary):
        self._torch, self._h = torch, h
        self._args, self._plan = args, plan
        self._specs = specs                 # name -> _Spec: q, k_cache, v_cache and the per-call tensors
        self._sq, self._skc, self._svc, self._slens = specs["q"], specs["k_cache"], specs["v_cache"], \
            specs.get("seqlens_k")
        self._snew = (specs["k"], specs["v"]) if "k" in specs else None
        self._others = tuple((n, f) for n, f in PER_CALL
                             if n not in ("seqlens_k", "k", "v") and (n in specs or n in variable))
        self._others_names = frozenset(n for n, _ in self._others)
        self._dirty = []                    # (spec, the plan's own pointer) of parameters a call replaced
        self._variable = variable           # names of VARIABLE tensors the plan takes
        self._params = params               # name -> (_Spec, the plan's own tensor)
        self._out, self._lse = out_spec, lse_spec
        self._out_dense = out_spec.zstride == strides(_Dense(out_spec.shape))   # torch.empty's layout
        self._keep = keep                   # the plan's own tensors (parameters, converted descales)
        self._rotary = rotary
        self._index = specs["q"].device
        self._device = torch.device("cuda", self._index)
        self._batch = args.batch
        self._scratch = {}                  # stream -> (workspace tensor, rotated-q tensor)
        self._needs_scratch = plan.workspace_size > 0 or rotary
        lib, _ = _fn(h)
        self._run_c = lib.fmha_decode_run
        self._pplan, self._pargs = ctypes.pointer(plan), ctypes.pointer(args)
        C = getattr(torch, "_C", None)
        self._raw_stream = getattr(C, "_cuda_getCurrentRawStream", None)
        self._get_device = getattr(C, "_cuda_getDevice", None) or torch.cuda.current_device
        cap = getattr(C, "_cuda_isCurrentStreamCapturing", None)
        self._capturing = cap or torch.cuda.is_current_stream_capturing

    # ---- what the plan picked -----------------------------------------------------------------
    @property
    def kernel(self):
        return self._plan.kernel.contents.name.decode()

    @property
    def combine(self):
        return self._plan.combine.contents.name.decode() if self._plan.combine else None

    @property
    def num_splits(self):
        return self._plan.num_splits

    @property
    def workspace_size(self):
        return self._plan.workspace_size

    @property
    def grid(self):
        return (self._plan.grid_x, self._plan.grid_y, self._plan.grid_z)

    @property
    def block(self):
        return self._plan.block

    @property
    def why(self):
        return self._plan.why.decode() if self._plan.why else ""

    def info(self):
        return {"kernel": self.kernel, "num_splits": self.num_splits, "workspace_size": self.workspace_size,
                "combine": self.combine, "grid": self.grid, "block": self.block, "why": self.why}

    def __repr__(self):
        s = self._specs["q"]
        return "<fmha_tile.DecodePlan q %s %s, %s, %d split(s)>" % (s.dtype, s.shape, self.kernel, self.num_splits)

    # ---- run ------------------------------------------------------------------------------------
    _ptr = staticmethod(_checked_ptr)

    def fill(self, q, k_cache, v_cache, seqlens_k=None, k=None, v=None, *, out=None, lse=None, **tensors):
        """Write the call's pointers into the plan's args: run() without the
        launch (the same arguments). -> (out, lse) as written."""
        a, ptr = self._args, self._ptr
        a.q = ptr(self._sq, q)
        a.k_cache = ptr(self._skc, k_cache)
        a.v_cache = ptr(self._svc, v_cache)
        lens = self._slens
        if lens is not None:
            if seqlens_k is None:
                raise ValueError("DecodePlan.run: seqlens_k is required (the plan was made with it)")
            a.seqlen_k = ptr(lens, seqlens_k)
        elif seqlens_k is not None:
            raise ValueError("DecodePlan.run: seqlens_k was not given to decode_plan(); make a plan with it")
        if self._snew is not None:
            if k is None or v is None:
                raise ValueError("DecodePlan.run: k and v are required (the plan was made with them)")
            a.k_new = ptr(self._snew[0], k)
            a.v_new = ptr(self._snew[1], v)
        elif k is not None or v is not None:
            raise ValueError("DecodePlan.run: k / v were not given to decode_plan(); make a plan with them")
        if self._dirty:          # parameters a previous call replaced: the plan's own again
            for spec, own_ptr in self._dirty:
                setattr(a, spec.field, own_ptr)
            self._dirty = []
        if tensors or self._others:
            self._fill_others(a, tensors)
        if out is None:
            o = self._out
            out = self._torch.empty(o.shape, dtype=o.dtype, device=self._device) if self._out_dense else \
                self._torch.empty_strided(o.shape, o.stride, dtype=o.dtype, device=self._device)
            a.o = out.data_ptr()
        else:
            a.o = ptr(self._out, out)
        if self._lse is not None:
            if lse is None:
                lse = self._torch.empty(self._lse.shape, dtype=self._lse.dtype, device=self._device)
                a.lse = lse.data_ptr()
            else:
                a.lse = ptr(self._lse, lse)
        elif lse is not None:
            raise ValueError("DecodePlan.run: lse= needs a plan made with return_lse=True")
        return out, lse

    def _fill_others(self, a, tensors):
        """The page tables, cache_batch_idx and the parameters."""
        for name in tensors:
            if name not in _KEYWORDS:
                raise TypeError("DecodePlan.run() got an unexpected keyword argument %r" % name)
        ptr = self._ptr
        for name, field in self._others:        # per-call tensors besides seqlens_k / k / v
            t = tensors.get(name)
            if t is None:
                raise ValueError("DecodePlan.run: %s is required (the plan was made with it)" % name)
            if name in VARIABLE:
                p, stride = _variable(name, t, self._batch, self._index)
                setattr(a, field, p)
                if name == "block_table":
                    a.block_table_stride = stride
            else:
                setattr(a, field, ptr(self._specs[name], t))
        for name, t in tensors.items():
            if t is None or name in self._others_names:
                continue
            entry = self._params.get(name)
            if entry is None:
                raise ValueError("DecodePlan.run: %s was not given to decode_plan(); make a plan with it" % name)
            spec, own = entry
            setattr(a, spec.field, ptr(spec, t))
            self._dirty.append((spec, own.data_ptr()))

    def _alloc_scratch(self):
        torch, ws, qr = self._torch, None, None
        if self._plan.workspace_size:
            ws = torch.empty(self._plan.workspace_size + 16, dtype=torch.uint8, device=self._device)
        if self._rotary:
            s = self._specs["q"]
            qr = torch.empty_strided(s.shape, s.stride, dtype=s.dtype, device=self._device)
        return ws, qr

    def _set_scratch(self, ws, qr):
        a = self._args
        if ws is not None:
            base = ws.data_ptr()
            a.workspace = base + (-base % 16)
            a.workspace_size = self._plan.workspace_size
        if qr is not None:
            a.q_rope = qr.data_ptr()

    def launch(self):
        """fmha_decode_run on the filled args, on the current stream
        (run() = fill() + launch())."""
        torch = self._torch
        if self._get_device() != self._index:
            with torch.cuda.device(self._index):
                return self.launch()
        stream = _stream(torch, self._raw_stream, self._index)
        held = None
        if self._needs_scratch:
            if self._capturing():      # the graph's own buffers (its pool keeps them)
                held = self._alloc_scratch()
                self._set_scratch(*held)
            else:
                sc = self._scratch.get(stream)
                if sc is None:
                    sc = self._scratch[stream] = self._alloc_scratch()
                self._set_scratch(*sc)
        st = self._run_c(self._pplan, self._pargs, stream)
        del held                       # freed in stream order after the launch
        if st:
            self._h.check_status(st, "fmha_tile.DecodePlan.run")

    def run(self, q, k_cache, v_cache, seqlens_k=None, k=None, v=None, *, out=None, lse=None, **tensors):
        """One decode call on the plan: -> out, or (out, lse). Keywords
        besides out / lse: cache_batch_idx, kv_indptr, kv_page_indices,
        kv_last_page_len, block_table (the plan's per-call tensors) and
        rotary_cos, rotary_sin, alibi_slopes, sinks, k_descale, v_descale
        (parameters; see the class)."""
        out, lse = self.fill(q, k_cache, v_cache, seqlens_k, k, v, out=out, lse=lse, **tensors)
        self.launch()
        return (out, lse) if self._lse is not None else out

    __call__ = run


def decode_plan(q, k_cache, v_cache, seqlens_k=None, k=None, v=None, rotary_cos=None, rotary_sin=None,
                rotary_interleaved=False, cache_batch_idx=None, *, kv_indptr=None, kv_page_indices=None,
                kv_last_page_len=None, block_table=None, max_seqlen_k=None, causal=False, window=(-1, -1),
                softcap=0.0, scale=None, alibi_slopes=None, k_descale=None, v_descale=None, num_splits=0,
                return_lse=False, out=None, kernels=None, sinks=None):
    """A DecodePlan for calls shaped like this one: the arguments of
    attention_with_kvcache(), checked as there, with sample tensors (their
    shapes, strides, dtypes and device are the plan's; nothing is launched,
    the cache is not written). Numbers given as k_descale / v_descale are
    copied to the device once and kept by the plan. out: a sample of the
    outputs' layout (default: contiguous). Use plan.run(q, k_cache, v_cache,
    seqlens_k, ...) per call."""
    import torch

    h = _lib.handle(kernels)
    with torch.cuda.device(q.device):
        def to_device(x):
            return torch.full((1,), x, dtype=torch.float32, device=q.device)

        # per-tensor descales become the plan's device tensors now (run() takes tensors)
        if k_descale is not None and v_descale is not None:
            if not (_is_tensor(k_descale) and len(k_descale.shape) == 2):
                k_descale = _descale_scalar("k_descale", k_descale, q, to_device)
            if not (_is_tensor(v_descale) and len(v_descale.shape) == 2):
                v_descale = _descale_scalar("v_descale", v_descale, q, to_device)
        a, out_dtype, keep = decode_args(
            q, k_cache, v_cache, seqlens_k, to_device=to_device, k=k, v=v, rotary_cos=rotary_cos,
            rotary_sin=rotary_sin, rotary_interleaved=rotary_interleaved, cache_batch_idx=cache_batch_idx,
            kv_indptr=kv_indptr, kv_page_indices=kv_page_indices, kv_last_page_len=kv_last_page_len,
            block_table=block_table, max_seqlen_k=max_seqlen_k, causal=causal, window=window, softcap=softcap,
            scale=scale, alibi_slopes=alibi_slopes, k_descale=k_descale, v_descale=v_descale,
            num_splits=num_splits, sinks=sinks)
        o = _call_out(torch, q, out, out_dtype)
        batch, s_q, hq, d = (int(x) for x in q.shape)
        check_no_overlap("out", o)
        os_ = strides(o)
        a.o = o.data_ptr()
        a.batch_stride_o, a.stride_o, a.nhead_stride_o = os_[0], os_[1], os_[2]
        lse_spec = None
        if return_lse:
            lse = torch.empty((batch, hq, s_q), dtype=torch.float32, device=q.device)
            a.lse, a.batch_stride_lse, a.nhead_stride_lse = lse.data_ptr(), hq * s_q, s_q
            lse_spec = _Spec("lse", "lse", lse)
        q_rot = _q_rope(torch, a, q)    # a non-NULL q_rope for the plan's checks; run() gives the real buffer
        rotary = q_rot is not None
        _, plan = _plan_make(h, a, "fmha_tile.decode_plan")
        return _make(torch, h, a, plan, dict(q=q, k_cache=k_cache, v_cache=v_cache, seqlens_k=seqlens_k, k=k, v=v,
                                             cache_batch_idx=cache_batch_idx, kv_indptr=kv_indptr,
                                             kv_page_indices=kv_page_indices, kv_last_page_len=kv_last_page_len,
                                             block_table=block_table, rotary_cos=rotary_cos,
                                             rotary_sin=rotary_sin, alibi_slopes=alibi_slopes, sinks=sinks,
                                             k_descale=k_descale, v_descale=v_descale),
                     o, lse_spec, rotary)


def _make(torch, h, a, plan, given, o, lse_spec, rotary):
    """The DecodePlan of filled args a and a made plan: the records of the
    tensors given (name -> tensor or None; the decode_args() checks passed)."""
    specs = {n: _Spec(n, n, given[n]) for n in ("q", "k_cache", "v_cache")}
    variable = set()
    for name, field in PER_CALL:
        t = given.get(name)
        if t is None:
            continue
        if name in VARIABLE:
            variable.add(name)
        else:
            specs[name] = _Spec(name, field, t)
    params, keep = {}, []
    per_page = a.k_page_descale is not None
    for name, field in PARAMS:
        t = given.get(name)
        if t is None:
            continue
        if field is None:     # descales: per tensor or per page, as the plan was made
            field = ("k_page_descale" if name == "k_descale" else "v_page_descale") if per_page else name
        params[name] = (_Spec(name, field, t), t)
        keep.append(t)
    return DecodePlan(torch, h, a, plan, specs, variable, params, _Spec("out", "o", o), lse_spec, keep, rotary)
