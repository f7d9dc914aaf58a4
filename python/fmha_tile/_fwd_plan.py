"""fmha_tile.forward_plan / fmha_tile.ForwardPlan: the forward (batch mode,
inference) made once and run many times, as decode_plan() does for decode.

forward_plan() takes attention()'s arguments with sample tensors, runs its
checks and fmha_fwd_check (the kernel the call gets; FmhaError when none
serves it) and keeps the filled fmha_fwd_args. ForwardPlan.run(q, k, v,
out=...) checks each tensor against the plan's record (shape, strides, dtype,
device), writes the data pointers into the kept struct and calls fmha_fwd on
the current stream. The C library has no forward plan/run pair, so fmha_fwd
still selects the kernel on each call (a table walk in C) and validates the
struct (alignment, strides) before it launches; what run() saves is the
Python side: argument conversion, the checks of every option, building the
struct. Not differentiable (a call with an input that requires grad while
grad mode is on is refused: use attention()), no dropout, no varlen, no
empty problems.
"""
import ctypes

from . import _lib
from ._args import batch_problem
from ._decode_plan import _Spec, _checked_ptr, _stream

__all__ = ["ForwardPlan", "forward_plan"]

WHERE = "ForwardPlan.run"
PARAMS = ("alibi_slopes", "sinks", "q_descale", "k_descale", "v_descale")


class ForwardPlan(object):
    """attention() made once (fmha_tile.forward_plan()).

    run(q, k, v, *, out=None, lse=None, alibi_slopes=None, sinks=None,
    q_descale=None, k_descale=None, v_descale=None) -> out, or (out, lse)
    for a plan made with return_lse=True. q, k, v (and out / lse when
    given) must have the plan's shapes, strides, dtypes and device; the
    parameters default to the plan's and may be replaced per call by
    tensors like them. Attributes: info (the attention_plan() dict).
    """

    def __init__(self, torch, h, p, specs, params, out_spec, lse_spec, info):
        self._torch, self._h, self._p = torch, h, p
        self._args = p.args
        self._sq, self._sk, self._sv = specs["q"], specs["k"], specs["v"]
        self._params = params                  # name -> (_Spec, the plan's own tensor)
        self._dirty = []
        self._out, self._lse = out_spec, lse_spec
        self.info = info
        self._index = self._sq.device
        self._device = torch.device("cuda", self._index)
        self._fwd = h.cdll.fmha_fwd
        self._set = h.set
        self._pargs = ctypes.pointer(self._args)
        C = getattr(torch, "_C", None)
        self._raw_stream = getattr(C, "_cuda_getCurrentRawStream", None)
        self._get_device = getattr(C, "_cuda_getDevice", None) or torch.cuda.current_device
        self._grad_enabled = torch.is_grad_enabled

    def __repr__(self):
        return "<fmha_tile.ForwardPlan q %s %s, %s>" % (self._sq.dtype, self._sq.shape, self.info.get("kernel"))

    _ptr = staticmethod(_checked_ptr)

    def fill(self, q, k, v, *, out=None, lse=None, **params):
        """Write the call's pointers into the plan's args (run() without the
        launch). -> (out, lse)."""
        a, ptr = self._args, self._ptr
        a.q = ptr(self._sq, q)
        a.k = ptr(self._sk, k)
        a.v = ptr(self._sv, v)
        if (q.requires_grad or k.requires_grad or v.requires_grad) and self._grad_enabled():
            raise ValueError("%s: an input requires grad: the plan has no backward (use fmha_tile.attention, "
                             "or call under torch.no_grad() / torch.inference_mode())" % WHERE)
        if self._dirty:
            for spec, own_ptr in self._dirty:
                setattr(a, spec.field, own_ptr)
            self._dirty = []
        for name, t in params.items():
            if name not in PARAMS:
                raise TypeError("ForwardPlan.run() got an unexpected keyword argument %r" % name)
            if t is None:
                continue
            entry = self._params.get(name)
            if entry is None:
                raise ValueError("%s: %s was not given to forward_plan(); make a plan with it" % (WHERE, name))
            spec, own = entry
            setattr(a, spec.field, ptr(spec, t))
            self._dirty.append((spec, own.data_ptr()))
        torch = self._torch
        if out is None:
            o = self._out
            out = torch.empty_strided(o.shape, o.stride, dtype=o.dtype, device=self._device)
            a.o = out.data_ptr()
        else:
            a.o = ptr(self._out, out)
        if self._lse is not None:
            if lse is None:
                s = self._lse
                lse = torch.empty_strided(s.shape, s.stride, dtype=s.dtype, device=self._device)
                a.lse = lse.data_ptr()
            else:
                a.lse = ptr(self._lse, lse)
        elif lse is not None:
            raise ValueError("%s: lse= needs a plan made with return_lse=True" % WHERE)
        return out, lse

    def launch(self):
        """fmha_fwd on the filled args, on the current stream."""
        torch = self._torch
        if self._get_device() != self._index:
            with torch.cuda.device(self._index):
                return self.launch()
        stream = _stream(torch, self._raw_stream, self._index)
        st = self._fwd(self._set, self._pargs, stream)
        if st:
            self._h.check_status(st, "fmha_tile.ForwardPlan.run")

    def run(self, q, k, v, *, out=None, lse=None, **params):
        """One forward call on the plan: -> out, or (out, lse)."""
        out, lse = self.fill(q, k, v, out=out, lse=lse, **params)
        self.launch()
        return (out, lse) if self._lse is not None else out

    __call__ = run


def forward_plan(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None, scale=None,
                 return_lse=False, *, out=None, out_lse=None, q_descale=None, k_descale=None, v_descale=None,
                 kernels=None, sinks=None, v_kmajor=False):
    """A ForwardPlan for calls shaped like attention(q, k, v, ...) (batch
    mode, inference): the arguments as attention()'s, sample tensors (their
    shapes, strides, dtypes and device are the plan's); out / out_lse:
    samples of the outputs' layouts (default: contiguous; out_lse given
    means return_lse). Nothing is launched. Use plan.run(q, k, v, out=...) per call."""
    import torch

    return_lse = bool(return_lse) or out_lse is not None
    p = batch_problem(q, k, v, causal, window, softcap, alibi_slopes, scale, q_descale, k_descale, v_descale,
                      sinks, 0.0, v_kmajor)
    if p.empty_q or p.empty_k:
        raise ValueError("forward_plan: no query rows or no keys (shapes %s, %s): nothing to plan, call "
                         "fmha_tile.attention" % (tuple(q.shape), tuple(k.shape)))
    h = _lib.handle(kernels)
    p.check_out(out, q)
    p.check_lse(out_lse, q)
    with torch.cuda.device(q.device):
        o = out if out is not None else torch.empty(p.out_shape, dtype=p.out_dtype(torch, q), device=q.device)
        lse = out_lse
        if lse is None and return_lse:
            lse = torch.empty(p.lse_shape, dtype=torch.float32, device=q.device)
    p.set_outputs(o, lse)
    plan = _lib.FmhaFwdPlan()
    h.check_status(h.cdll.fmha_fwd_check(h.set, ctypes.byref(p.args), ctypes.byref(plan)), "fmha_tile.forward_plan")
    given = {"alibi_slopes": alibi_slopes, "sinks": sinks, "q_descale": q_descale, "k_descale": k_descale,
             "v_descale": v_descale}
    return _make(torch, h, p, {"q": q, "k": k, "v": v}, given, o, lse, _lib.plan_dict(plan))


def _make(torch, h, p, tensors, given, o, lse, info):
    """The ForwardPlan of a checked problem p (outputs set) and its tensors."""
    specs = {n: _Spec(n, n, t, WHERE) for n, t in tensors.items()}
    params = {}
    for name in PARAMS:
        t = given.get(name)
        if t is not None:
            params[name] = (_Spec(name, name, t, WHERE), t)
    return ForwardPlan(torch, h, p, specs, params, _Spec("out", "o", o, WHERE),
                       None if lse is None else _Spec("lse", "lse", lse, WHERE), info)
