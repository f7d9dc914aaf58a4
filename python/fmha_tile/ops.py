"""fmha_tile.ops: the package's entry points as torch.library custom ops.

    import fmha_tile.ops            # registers torch.ops.fmha_tile.* (needs PyTorch >= 2.4)
    o = fmha_tile.ops.attention(q, k, v, causal=True)           # or torch.ops.fmha_tile.fwd(...)
    f = torch.compile(model, fullgraph=True)                    # no graph break at the attention

The ctypes calls of the package (fmha_tile.attention, attention_varlen,
batch_prefill, attention_with_kvcache and the backward) are opaque to
torch.compile: Dynamo cannot trace into ctypes, so it breaks the graph there.
Registered as custom ops, each call is one node of the graph: a fake
implementation gives its output shapes and dtypes without touching the GPU,
and the forward ops carry an autograd formula (the backward op), so
AOTAutograd traces training graphs through them too. The implementations
are the package's own code paths (_args / _bwd / _prefill / _decode): the
same checks, the same kernel arguments, the same launch on
torch.cuda.current_stream() of q's device, so a call works inside
torch.cuda.graph and under torch.compile(mode="reduce-overhead") as the
ctypes functions do.

Ops (namespace fmha_tile; schema types: no tuples and no Python objects, so
window=(left, right) is two ints and kernels= is a kernel set's name):

    fwd(q, k, v, causal=False, window_left=-1, window_right=-1, softcap=0.0,
        alibi_slopes=None, scale=None, sinks=None, deterministic=False,
        q_descale=None, k_descale=None, v_descale=None, kernels=None,
        dropout_p=0.0, dropout_seed=0, dropout_offset=0, dropout_rng=None, bias=None,
        v_kmajor=False) -> (out, lse)
        fmha_tile.attention: q [b, s_q, h, d], k/v [b, s_k, h_k, d]; out
        [b, s_q, h, d_v] (bf16 for fp8 inputs), lse fp32 [b, h, s_q] (always
        computed: the backward needs it). Differentiable in q, k, v and sinks;
        deterministic selects the deterministic backward. Dropout: dropout_p
        in [0, 1) with the Philox seed and offset as arguments (the seed as a
        signed int64: its bit pattern is used), or dropout_rng, an int64 [2]
        device tensor {seed, offset} the kernel reads when it runs (then the
        two ints are ignored). The op is a pure function of them: the
        wrappers below (and fmha_tile.compat) take them from torch's CUDA
        generator per call (fmha_tile._dropout); a caller of the op itself
        must pass fresh ones per call. The backward gets the same ones.
        bias: the elementwise bias of fmha_tile.attention (differentiable:
        its gradient summed to its shape). v_kmajor: v is e4m3 V^T as
        fp8_v_kmajor returns it (fp8 only; not in fwd_varlen).
    fp8_v_kmajor(v) -> vt
        fmha_tile.fp8_v_kmajor: e4m3 V [b, s_k, h_k, d] -> V^T [b, h_k, d,
        keys] (keys = s_k rounded up to 16). No autograd.
    fwd_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, <fwd's tail>)
        fmha_tile.attention_varlen: q [total_q, h, d] ...; out [total_q, h, d_v],
        lse fp32 [h, total_q]. Differentiable as fwd.
    bwd(dout, q, k, v, out, lse, causal, window_left, window_right, softcap,
        alibi_slopes, scale, sinks, deterministic, kernels=None, dropout_p=0.0,
        dropout_seed=0, dropout_offset=0, dropout_rng=None, bias=None,
        want_dbias=False) -> (dq, dk, dv, dsinks, dbias)
    bwd_varlen(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
               max_seqlen_k, <bwd's tail>) -> (dq, dk, dv, dsinks, dbias)
        the backward (fmha_bwd); dq, dk, dv contiguous in the shapes and dtypes
        of q, k, v; dsinks fp32 [h], or an empty tensor without sinks; dbias
        the bias's shape and dtype (want_dbias), else an empty tensor. Not
        capturable in a CUDA graph (the workspace preparation synchronises).
        With dropout, the forward's dropout_p / seed / offset / rng.
    batch_prefill(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, kv_layout, kv_indptr=None,
                  kv_page_indices=None, kv_last_page_len=None, block_table=None,
                  seqlens_k=None, causal=True, window_left=-1, window_right=-1,
                  softcap=0.0, scale=None, k_descale=None, v_descale=None, q_descale=None,
                  sinks=None, return_lse=False, kernels=None) -> (out, lse)
        fmha_tile.batch_prefill (descales as tensors only); lse fp32
        [h, total_q], or an empty tensor when return_lse is False. No autograd.
    decode(q, k_cache, v_cache, seqlens_k=None, rotary_cos=None, rotary_sin=None,
           rotary_interleaved=False, cache_batch_idx=None, kv_indptr=None,
           kv_page_indices=None, kv_last_page_len=None, block_table=None,
           max_seqlen_k=None, causal=False, window_left=-1, window_right=-1,
           softcap=0.0, scale=None, alibi_slopes=None, k_descale=None, v_descale=None,
           num_splits=0, sinks=None, return_lse=False, kernels=None) -> (out, lse)
        fmha_tile.attention_with_kvcache without new rows (reads the cache
        only); lse fp32 [b, h, s_q] or empty. No autograd.
    decode_append(q, k_cache, v_cache, k, v, <decode's tail>) -> (out, lse)
        the same with k / v [b, s_new, h_k, d] appended first: it writes into
        k_cache and v_cache (declared in mutates_args, so torch.compile
        functionalizes it correctly). seqlens_k counts the keys after the
        append (fmha_tile's convention; fmha_tile.compat.flash_attn_with_kvcache
        takes FlashAttention's). No autograd.

Python wrappers with the package's signatures (window as a pair, return_lse
choosing the return value) call these ops: attention, attention_varlen,
batch_prefill, attention_with_kvcache. kernels= takes None (the library's
default set), a kernel set's name (Library.name) or a Library that has one
(fmha_tile.KernelSet(...).build() returns such a Library; build it before
torch.compile traces, since building is not traceable).
"""
from typing import Optional, Tuple

try:
    import torch
except ImportError as e:  # the package itself works without torch; this module does not
    raise ImportError("fmha_tile.ops needs PyTorch (%s)" % e) from None

if not hasattr(torch.library, "custom_op") or not hasattr(torch.library, "register_fake"):
    raise ImportError("fmha_tile.ops needs PyTorch >= 2.4 (torch.library.custom_op); found %s"
                      % torch.__version__)

from torch import Tensor

from . import _args, _bwd, _decode, _dropout, _lib, _prefill
from . import _run as _run_forward

__all__ = ["fwd", "fwd_varlen", "bwd", "bwd_varlen", "batch_prefill_op", "decode", "decode_append",
           "attention", "attention_varlen", "batch_prefill", "attention_with_kvcache", "fp8_v_kmajor"]

NS = "fmha_tile"
FP8 = getattr(torch, "float8_e4m3fn", None)


def _out_dtype(q, kv_dtype=None):
    """The output dtype: q's; bf16 when q (or, for the paged families, the
    cache) is fp8."""
    if FP8 is not None and (q.dtype == FP8 or kv_dtype == FP8):
        return torch.bfloat16
    return q.dtype


def _empty_lse(q):
    """The lse output of a call that was not asked for it (custom ops return
    tensors, never None)."""
    return q.new_empty((0,), dtype=torch.float32)


def _set_dropout(p, q, seed, offset, rng):
    """The Philox seed/offset (or device rng tensor) of a dropout problem."""
    if not p.dropout:
        return
    if rng is not None:
        _args.check_same_device(q, (("dropout_rng", rng),))
    p.set_dropout_rng(seed, offset, rng)


# ---- forward, dense and varlen ----------------------------------------------------------------
@torch.library.custom_op(NS + "::fwd", mutates_args=())
def fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, window_left: int = -1,
        window_right: int = -1, softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None,
        scale: Optional[float] = None, sinks: Optional[Tensor] = None, deterministic: bool = False,
        q_descale: Optional[Tensor] = None, k_descale: Optional[Tensor] = None,
        v_descale: Optional[Tensor] = None, kernels: Optional[str] = None, dropout_p: float = 0.0,
        dropout_seed: int = 0, dropout_offset: int = 0,
        dropout_rng: Optional[Tensor] = None, bias: Optional[Tensor] = None,
        v_kmajor: bool = False) -> Tuple[Tensor, Tensor]:
    """fmha_tile.attention as a custom op -> (out, lse); see the module docstring."""
    p = _args.batch_problem(q, k, v, causal, (window_left, window_right), softcap, alibi_slopes,
                            scale, q_descale, k_descale, v_descale, sinks, dropout_p, v_kmajor)
    _args.set_bias(p, bias, q)
    _set_dropout(p, q, dropout_seed, dropout_offset, dropout_rng)
    return _run_forward(torch, p, q, None, None, True, "fmha_tile::fwd", _lib.handle(kernels))


@fwd.register_fake
def _fwd_fake(q, k, v, causal=False, window_left=-1, window_right=-1, softcap=0.0,
              alibi_slopes=None, scale=None, sinks=None, deterministic=False, q_descale=None,
              k_descale=None, v_descale=None, kernels=None, dropout_p=0.0, dropout_seed=0,
              dropout_offset=0, dropout_rng=None, bias=None, v_kmajor=False):
    b, s_q, h = q.shape[0], q.shape[1], q.shape[2]
    out = q.new_empty((b, s_q, h, v.shape[-2] if v_kmajor else v.shape[-1]), dtype=_out_dtype(q))
    lse = q.new_empty((b, h, s_q), dtype=torch.float32)
    return out, lse


@torch.library.custom_op(NS + "::fwd_varlen", mutates_args=())
def fwd_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
               max_seqlen_q: int, max_seqlen_k: int, causal: bool = False, window_left: int = -1,
               window_right: int = -1, softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None,
               scale: Optional[float] = None, sinks: Optional[Tensor] = None,
               deterministic: bool = False, q_descale: Optional[Tensor] = None,
               k_descale: Optional[Tensor] = None, v_descale: Optional[Tensor] = None,
               kernels: Optional[str] = None, dropout_p: float = 0.0, dropout_seed: int = 0,
               dropout_offset: int = 0, dropout_rng: Optional[Tensor] = None,
               bias: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """fmha_tile.attention_varlen as a custom op -> (out, lse)."""
    p = _args.varlen_problem(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             causal, (window_left, window_right), softcap, alibi_slopes, scale,
                             q_descale, k_descale, v_descale, sinks, dropout_p)
    _args.set_bias(p, bias, q)
    _set_dropout(p, q, dropout_seed, dropout_offset, dropout_rng)
    return _run_forward(torch, p, q, None, None, True, "fmha_tile::fwd_varlen",
                        _lib.handle(kernels))


@fwd_varlen.register_fake
def _fwd_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                     window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None, scale=None,
                     sinks=None, deterministic=False, q_descale=None, k_descale=None,
                     v_descale=None, kernels=None, dropout_p=0.0, dropout_seed=0, dropout_offset=0,
                     dropout_rng=None, bias=None):
    total_q, h = q.shape[0], q.shape[1]
    out = q.new_empty((total_q, h, v.shape[-1]), dtype=_out_dtype(q))
    lse = q.new_empty((h, total_q), dtype=torch.float32)
    return out, lse


# ---- backward, dense and varlen ---------------------------------------------------------------
def _backward(p, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks, deterministic,
              kernels, where, want_dbias):
    if p.fp8:
        raise NotImplementedError("%s: the fp8 forward has no backward pass" % where)
    if want_dbias and p.bias is None:
        raise ValueError("%s: want_dbias needs a bias" % where)
    dq, dk, dv, dsinks, dbias = _bwd.run_backward(torch, p, q, k, v, out, lse, dout, cu_seqlens_q,
                                                  cu_seqlens_k, deterministic, where, kernels, sinks,
                                                  want_dbias)
    if dsinks is None:
        dsinks = _empty_lse(q)
    if dbias is None:
        dbias = q.new_empty((0,))
    return dq, dk, dv, dsinks, dbias


def _bwd_fake_outputs(q, k, v, sinks, bias, want_dbias):
    dsinks = q.new_empty(tuple(sinks.shape) if sinks is not None else (0,), dtype=torch.float32)
    dbias = bias.new_empty(tuple(bias.shape)) if want_dbias and bias is not None else q.new_empty((0,))
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dsinks, dbias)


@torch.library.custom_op(NS + "::bwd", mutates_args=())
def bwd(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, causal: bool,
        window_left: int, window_right: int, softcap: float, alibi_slopes: Optional[Tensor],
        scale: Optional[float], sinks: Optional[Tensor], deterministic: bool,
        kernels: Optional[str] = None, dropout_p: float = 0.0, dropout_seed: int = 0,
        dropout_offset: int = 0, dropout_rng: Optional[Tensor] = None,
        bias: Optional[Tensor] = None,
        want_dbias: bool = False) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The backward of fwd -> (dq, dk, dv, dsinks, dbias); dsinks is empty without
    sinks, dbias (bias's shape and dtype) without want_dbias."""
    p = _args.batch_problem(q, k, v, causal, (window_left, window_right), softcap, alibi_slopes,
                            scale, sinks=sinks, dropout_p=dropout_p)
    _args.set_bias(p, bias, q)
    _set_dropout(p, q, dropout_seed, dropout_offset, dropout_rng)
    return _backward(p, dout, q, k, v, out, lse, None, None, sinks, deterministic, kernels,
                     "fmha_tile::bwd", want_dbias)


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, causal, window_left, window_right, softcap, alibi_slopes,
              scale, sinks, deterministic, kernels=None, dropout_p=0.0, dropout_seed=0,
              dropout_offset=0, dropout_rng=None, bias=None, want_dbias=False):
    return _bwd_fake_outputs(q, k, v, sinks, bias, want_dbias)


@torch.library.custom_op(NS + "::bwd_varlen", mutates_args=())
def bwd_varlen(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
               cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
               causal: bool, window_left: int, window_right: int, softcap: float,
               alibi_slopes: Optional[Tensor], scale: Optional[float], sinks: Optional[Tensor],
               deterministic: bool, kernels: Optional[str] = None, dropout_p: float = 0.0,
               dropout_seed: int = 0, dropout_offset: int = 0,
               dropout_rng: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               want_dbias: bool = False) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The backward of fwd_varlen -> (dq, dk, dv, dsinks, dbias). Reads the sequence
    lengths back to check max_seqlen_q / max_seqlen_k (as attention_varlen's
    backward does)."""
    p = _args.varlen_problem(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             causal, (window_left, window_right), softcap, alibi_slopes, scale,
                             sinks=sinks, dropout_p=dropout_p)
    _args.set_bias(p, bias, q)
    _set_dropout(p, q, dropout_seed, dropout_offset, dropout_rng)
    return _backward(p, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks, deterministic,
                     kernels, "fmha_tile::bwd_varlen", want_dbias)


@bwd_varlen.register_fake
def _bwd_varlen_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     max_seqlen_k, causal, window_left, window_right, softcap, alibi_slopes, scale,
                     sinks, deterministic, kernels=None, dropout_p=0.0, dropout_seed=0,
                     dropout_offset=0, dropout_rng=None, bias=None, want_dbias=False):
    return _bwd_fake_outputs(q, k, v, sinks, bias, want_dbias)


@torch.library.custom_op(NS + "::fp8_v_kmajor", mutates_args=())
def fp8_v_kmajor(v: Tensor) -> Tensor:
    """fmha_tile.fp8_v_kmajor as a custom op: e4m3 V [b, s_k, h_k, d] -> V^T
    [b, h_k, d, keys] for fwd(..., v_kmajor=True)."""
    from . import fp8_v_kmajor as _vt
    return _vt(v)


@fp8_v_kmajor.register_fake
def _fp8_v_kmajor_fake(v):
    b, s_k, hk, d = v.shape
    return v.new_empty((b, hk, d, _args.v_kmajor_keys(s_k)))


# ---- autograd of the forward ops -------------------------------------------------------------
# Positions of the arguments in the schemas above (inputs arrive positionally,
# defaults filled in).
_FWD_TAIL = ("causal", "window_left", "window_right", "softcap", "alibi_slopes", "scale", "sinks",
             "deterministic", "q_descale", "k_descale", "v_descale", "kernels", "dropout_p",
             "dropout_seed", "dropout_offset", "dropout_rng", "bias")


def _setup(ctx, inputs, output, varlen):
    n = 7 if varlen else 3                      # q, k, v (, cu_q, cu_k, max_q, max_k)
    tail = dict(zip(_FWD_TAIL, inputs[n:]))
    q, k, v = inputs[:3]
    out, lse = output
    cu = inputs[3:5] if varlen else (None, None)
    ctx.save_for_backward(q, k, v, out, lse, tail["alibi_slopes"], tail["sinks"], cu[0], cu[1],
                          tail["dropout_rng"], tail["bias"])
    ctx.max_seqlens = tuple(inputs[5:7]) if varlen else None
    ctx.params = (tail["causal"], tail["window_left"], tail["window_right"], tail["softcap"],
                  tail["scale"], tail["deterministic"], tail["kernels"])
    # the backward redraws the forward's dropout mask from the same values
    ctx.dropout = (tail["dropout_p"], tail["dropout_seed"], tail["dropout_offset"])
    ctx.n_head_args = n
    ctx.mark_non_differentiable(lse)


def _fwd_setup(ctx, inputs, output):
    _setup(ctx, inputs, output, False)


def _fwd_varlen_setup(ctx, inputs, output):
    _setup(ctx, inputs, output, True)


def _grads(ctx, dout):
    q, k, v, out, lse, alibi, sinks, cu_q, cu_k, rng, bias = ctx.saved_tensors
    causal, wl, wr, softcap, scale, deterministic, kernels = ctx.params
    dp, seed, offset = ctx.dropout
    need = ctx.needs_input_grad
    n = ctx.n_head_args
    want_dbias = bias is not None and bool(need[n + _FWD_TAIL.index("bias")])
    if ctx.max_seqlens is None:
        dq, dk, dv, dsinks, dbias = torch.ops.fmha_tile.bwd(
            dout, q, k, v, out, lse, causal, wl, wr, softcap, alibi, scale, sinks, deterministic,
            kernels, dp, seed, offset, rng, bias, want_dbias)
    else:
        mq, mk = ctx.max_seqlens
        dq, dk, dv, dsinks, dbias = torch.ops.fmha_tile.bwd_varlen(
            dout, q, k, v, out, lse, cu_q, cu_k, mq, mk, causal, wl, wr, softcap, alibi, scale,
            sinks, deterministic, kernels, dp, seed, offset, rng, bias, want_dbias)
    grads = [dq if need[0] else None, dk if need[1] else None, dv if need[2] else None]
    grads += [None] * (n - 3)
    for name in _FWD_TAIL:
        g = None
        if name == "sinks" and sinks is not None and need[n + _FWD_TAIL.index("sinks")]:
            g = dsinks
        if name == "bias" and want_dbias:
            g = dbias
        grads.append(g)
    if ctx.max_seqlens is None:
        grads.append(None)   # fwd's v_kmajor (fp8 only: never differentiated)
    return tuple(grads)


def _fwd_backward(ctx, dout, dlse):
    return _grads(ctx, dout)


fwd.register_autograd(_fwd_backward, setup_context=_fwd_setup)
fwd_varlen.register_autograd(_fwd_backward, setup_context=_fwd_varlen_setup)


# ---- batch prefill ------------------------------------------------------------------------------
@torch.library.custom_op(NS + "::batch_prefill", mutates_args=())
def batch_prefill_op(q: Tensor, k_cache: Tensor, v_cache: Tensor, cu_seqlens_q: Tensor,
                     max_seqlen_q: int, kv_layout: str, kv_indptr: Optional[Tensor] = None,
                     kv_page_indices: Optional[Tensor] = None,
                     kv_last_page_len: Optional[Tensor] = None,
                     block_table: Optional[Tensor] = None, seqlens_k: Optional[Tensor] = None,
                     causal: bool = True, window_left: int = -1,
                     window_right: int = -1, softcap: float = 0.0, scale: Optional[float] = None,
                     k_descale: Optional[Tensor] = None, v_descale: Optional[Tensor] = None,
                     q_descale: Optional[Tensor] = None, sinks: Optional[Tensor] = None,
                     return_lse: bool = False,
                     kernels: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """fmha_tile.batch_prefill as a custom op -> (out, lse or an empty tensor)."""
    r = _prefill.batch_prefill(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, kv_indptr=kv_indptr,
                               kv_page_indices=kv_page_indices, kv_last_page_len=kv_last_page_len,
                               block_table=block_table, seqlens_k=seqlens_k, kv_layout=kv_layout,
                               causal=causal, window=(window_left, window_right), softcap=softcap,
                               scale=scale, k_descale=k_descale, v_descale=v_descale,
                               q_descale=q_descale, return_lse=return_lse, kernels=kernels,
                               sinks=sinks)
    return r if return_lse else (r, _empty_lse(q))


@batch_prefill_op.register_fake
def _batch_prefill_fake(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, kv_layout,
                        kv_indptr=None, kv_page_indices=None, kv_last_page_len=None,
                        block_table=None, seqlens_k=None, causal=True, window_left=-1,
                        window_right=-1, softcap=0.0, scale=None, k_descale=None, v_descale=None,
                        q_descale=None, sinks=None, return_lse=False, kernels=None):
    total_q, h, d = q.shape[0], q.shape[1], q.shape[2]
    out = q.new_empty((total_q, h, d), dtype=_out_dtype(q, k_cache.dtype))
    lse = q.new_empty((h, total_q), dtype=torch.float32) if return_lse else _empty_lse(q)
    return out, lse


# ---- decode -------------------------------------------------------------------------------------
def _decode_run(q, k_cache, v_cache, k, v, seqlens_k, rotary_cos, rotary_sin, rotary_interleaved,
                cache_batch_idx, kv_indptr, kv_page_indices, kv_last_page_len, block_table,
                max_seqlen_k, causal, window_left, window_right, softcap, scale, alibi_slopes,
                k_descale, v_descale, num_splits, sinks, return_lse, kernels):
    r = _decode.attention_with_kvcache(
        q, k_cache, v_cache, seqlens_k, k, v, rotary_cos, rotary_sin, rotary_interleaved,
        cache_batch_idx, kv_indptr=kv_indptr, kv_page_indices=kv_page_indices,
        kv_last_page_len=kv_last_page_len, block_table=block_table, max_seqlen_k=max_seqlen_k,
        causal=causal, window=(window_left, window_right), softcap=softcap, scale=scale,
        alibi_slopes=alibi_slopes, k_descale=k_descale, v_descale=v_descale,
        num_splits=num_splits, return_lse=return_lse, kernels=kernels, sinks=sinks)
    return r if return_lse else (r, _empty_lse(q))


def _decode_fake_outputs(q, k_cache, return_lse):
    b, s_q, h, d = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
    out = q.new_empty((b, s_q, h, d), dtype=_out_dtype(q, k_cache.dtype))
    lse = q.new_empty((b, h, s_q), dtype=torch.float32) if return_lse else _empty_lse(q)
    return out, lse


@torch.library.custom_op(NS + "::decode", mutates_args=())
def decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, seqlens_k: Optional[Tensor] = None,
           rotary_cos: Optional[Tensor] = None, rotary_sin: Optional[Tensor] = None,
           rotary_interleaved: bool = False, cache_batch_idx: Optional[Tensor] = None,
           kv_indptr: Optional[Tensor] = None, kv_page_indices: Optional[Tensor] = None,
           kv_last_page_len: Optional[Tensor] = None, block_table: Optional[Tensor] = None,
           max_seqlen_k: Optional[int] = None, causal: bool = False, window_left: int = -1,
           window_right: int = -1, softcap: float = 0.0, scale: Optional[float] = None,
           alibi_slopes: Optional[Tensor] = None, k_descale: Optional[Tensor] = None,
           v_descale: Optional[Tensor] = None, num_splits: int = 0, sinks: Optional[Tensor] = None,
           return_lse: bool = False, kernels: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """fmha_tile.attention_with_kvcache without appended rows -> (out, lse or empty)."""
    return _decode_run(q, k_cache, v_cache, None, None, seqlens_k, rotary_cos, rotary_sin,
                       rotary_interleaved, cache_batch_idx, kv_indptr, kv_page_indices,
                       kv_last_page_len, block_table, max_seqlen_k, causal, window_left,
                       window_right, softcap, scale, alibi_slopes, k_descale, v_descale,
                       num_splits, sinks, return_lse, kernels)


@decode.register_fake
def _decode_fake(q, k_cache, v_cache, seqlens_k=None, rotary_cos=None, rotary_sin=None,
                 rotary_interleaved=False, cache_batch_idx=None, kv_indptr=None,
                 kv_page_indices=None, kv_last_page_len=None, block_table=None, max_seqlen_k=None,
                 causal=False, window_left=-1, window_right=-1, softcap=0.0, scale=None,
                 alibi_slopes=None, k_descale=None, v_descale=None, num_splits=0, sinks=None,
                 return_lse=False, kernels=None):
    return _decode_fake_outputs(q, k_cache, return_lse)


@torch.library.custom_op(NS + "::decode_append", mutates_args=("k_cache", "v_cache"))
def decode_append(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Tensor, v: Tensor,
                  seqlens_k: Optional[Tensor] = None, rotary_cos: Optional[Tensor] = None,
                  rotary_sin: Optional[Tensor] = None, rotary_interleaved: bool = False,
                  cache_batch_idx: Optional[Tensor] = None, kv_indptr: Optional[Tensor] = None,
                  kv_page_indices: Optional[Tensor] = None,
                  kv_last_page_len: Optional[Tensor] = None, block_table: Optional[Tensor] = None,
                  max_seqlen_k: Optional[int] = None, causal: bool = False, window_left: int = -1,
                  window_right: int = -1, softcap: float = 0.0, scale: Optional[float] = None,
                  alibi_slopes: Optional[Tensor] = None, k_descale: Optional[Tensor] = None,
                  v_descale: Optional[Tensor] = None, num_splits: int = 0,
                  sinks: Optional[Tensor] = None, return_lse: bool = False,
                  kernels: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """fmha_tile.attention_with_kvcache with k / v appended into k_cache / v_cache
    (in place) before the attention -> (out, lse or empty)."""
    return _decode_run(q, k_cache, v_cache, k, v, seqlens_k, rotary_cos, rotary_sin,
                       rotary_interleaved, cache_batch_idx, kv_indptr, kv_page_indices,
                       kv_last_page_len, block_table, max_seqlen_k, causal, window_left,
                       window_right, softcap, scale, alibi_slopes, k_descale, v_descale,
                       num_splits, sinks, return_lse, kernels)


@decode_append.register_fake
def _decode_append_fake(q, k_cache, v_cache, k, v, seqlens_k=None, rotary_cos=None,
                        rotary_sin=None, rotary_interleaved=False, cache_batch_idx=None,
                        kv_indptr=None, kv_page_indices=None, kv_last_page_len=None,
                        block_table=None, max_seqlen_k=None, causal=False, window_left=-1,
                        window_right=-1, softcap=0.0, scale=None, alibi_slopes=None,
                        k_descale=None, v_descale=None, num_splits=0, sinks=None,
                        return_lse=False, kernels=None):
    return _decode_fake_outputs(q, k_cache, return_lse)


# ---- Python wrappers with the package's signatures ------------------------------------------
def _kernels_name(kernels):
    """kernels= as a custom op can take it: None or a loaded kernel set's name."""
    if kernels is None or isinstance(kernels, str):
        return kernels
    if isinstance(kernels, _lib.Library):
        if kernels.name:
            return kernels.name
        raise ValueError("kernels=%r has no name: load it with Library.load(path, name=...) or pass "
                         "the Library a KernelSet's build() returns" % (kernels,))
    raise TypeError("fmha_tile.ops: kernels must be None, a kernel set's name or a named "
                    "fmha_tile.Library (call KernelSet.build() before torch.compile), got %r"
                    % (kernels,))


def _pair(window):
    if window is None:
        return -1, -1
    left, right = window
    return left, right


def _dropout_args(q, dropout_p, generator):
    """(dropout_p, seed, offset, rng) for one forward op call: the
    generator's seed and offset (advanced by 4), or a device draw under
    torch.compile tracing or CUDA graph capture (fmha_tile._dropout). A
    bad dropout_p is left for the op's checks (no generator is touched)."""
    if isinstance(dropout_p, (bool, str, bytes)):
        return dropout_p, 0, 0, None
    try:
        p = float(dropout_p)
    except (TypeError, ValueError):
        return dropout_p, 0, 0, None
    if not 0.0 < p < 1.0:
        return p, 0, 0, None
    seed, offset, rng = _dropout.op_args(torch, q.device, p, generator)
    return p, seed, offset, rng


def attention(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None, scale=None,
              return_lse=False, *, deterministic=False, q_descale=None, k_descale=None,
              v_descale=None, kernels=None, sinks=None, dropout_p=0.0, generator=None, v_kmajor=False):
    """fmha_tile.attention through the custom op fmha_tile::fwd (no out= /
    out_lse=: custom ops allocate their outputs). Differentiable in q, k, v
    and sinks. dropout_p / generator / v_kmajor: as in fmha_tile.attention
    (V^T from fmha_tile.ops.fp8_v_kmajor, the op, under torch.compile)."""
    wl, wr = _pair(window)
    dp, seed, offset, rng = _dropout_args(q, dropout_p, generator)
    o, lse = torch.ops.fmha_tile.fwd(q, k, v, causal, wl, wr, softcap, alibi_slopes, scale, sinks,
                                     deterministic, q_descale, k_descale, v_descale,
                                     _kernels_name(kernels), dp, seed, offset, rng, v_kmajor=bool(v_kmajor))
    return (o, lse) if return_lse else o


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                     window=(-1, -1), softcap=0.0, alibi_slopes=None, scale=None, return_lse=False,
                     *, deterministic=False, q_descale=None, k_descale=None, v_descale=None,
                     kernels=None, sinks=None, dropout_p=0.0, generator=None):
    """fmha_tile.attention_varlen through the custom op fmha_tile::fwd_varlen."""
    wl, wr = _pair(window)
    dp, seed, offset, rng = _dropout_args(q, dropout_p, generator)
    o, lse = torch.ops.fmha_tile.fwd_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                            max_seqlen_k, causal, wl, wr, softcap, alibi_slopes,
                                            scale, sinks, deterministic, q_descale, k_descale,
                                            v_descale, _kernels_name(kernels), dp, seed, offset,
                                            rng)
    return (o, lse) if return_lse else o


def batch_prefill(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, *, kv_indptr=None,
                  kv_page_indices=None, kv_last_page_len=None, block_table=None, seqlens_k=None,
                  kv_layout="NHD", causal=True, window=(-1, -1), softcap=0.0, scale=None,
                  k_descale=None, v_descale=None, q_descale=None, return_lse=False, kernels=None,
                  sinks=None):
    """fmha_tile.batch_prefill through the custom op fmha_tile::batch_prefill
    (descales as tensors: a 1-element float32 tensor per tensor, or
    [num_pages, nhead_k] per page)."""
    wl, wr = _pair(window)
    o, lse = torch.ops.fmha_tile.batch_prefill(
        q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, kv_layout, kv_indptr, kv_page_indices,
        kv_last_page_len, block_table, seqlens_k, causal, wl, wr, softcap, scale,
        k_descale, v_descale, q_descale, sinks, return_lse, _kernels_name(kernels))
    return (o, lse) if return_lse else o


def attention_with_kvcache(q, k_cache, v_cache, seqlens_k=None, k=None, v=None, rotary_cos=None,
                           rotary_sin=None, rotary_interleaved=False, cache_batch_idx=None, *,
                           kv_indptr=None, kv_page_indices=None, kv_last_page_len=None,
                           block_table=None, max_seqlen_k=None, causal=False, window=(-1, -1),
                           softcap=0.0, scale=None, alibi_slopes=None, k_descale=None,
                           v_descale=None, num_splits=0, return_lse=False, kernels=None,
                           sinks=None):
    """fmha_tile.attention_with_kvcache through fmha_tile::decode, or
    fmha_tile::decode_append when k / v are given (the caches are written in
    place). seqlens_k counts the keys after the append."""
    wl, wr = _pair(window)
    tail = (seqlens_k, rotary_cos, rotary_sin, rotary_interleaved, cache_batch_idx, kv_indptr,
            kv_page_indices, kv_last_page_len, block_table, max_seqlen_k, causal, wl, wr, softcap,
            scale, alibi_slopes, k_descale, v_descale, num_splits, sinks, return_lse,
            _kernels_name(kernels))
    if (k is None) != (v is None):
        raise ValueError("pass k and v together (or neither)")
    if k is None:
        o, lse = torch.ops.fmha_tile.decode(q, k_cache, v_cache, *tail)
    else:
        o, lse = torch.ops.fmha_tile.decode_append(q, k_cache, v_cache, k, v, *tail)
    return (o, lse) if return_lse else o
