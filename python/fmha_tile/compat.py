"""fmha_tile.compat: FlashAttention 2's Python functions over fmha_tile.

    # from flash_attn import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache
    from fmha_tile.compat import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache

The same argument names, defaults, shapes and return values as
flash_attn.flash_attn_interface (FlashAttention 2.6+), computed by the
custom ops of fmha_tile.ops, so the calls trace under
torch.compile(fullgraph=True) and replay in CUDA graphs (forward; the
backward synchronises the stream once). Semantics are FlashAttention's, which
are fmha_tile's: causal and window_size bottom-right aligned, -1 unbounded;
softcap 0 off; alibi_slopes fp32 [nheads] or [batch, nheads]; softmax_scale
default 1/sqrt(headdim); GQA/MQA by fewer K/V heads; a query row that sees no
key gives 0. Head dims that are not a multiple of 8 are zero-padded (q, k, v)
and the output sliced back, as FlashAttention does.

Returns:
  flash_attn_func / flash_attn_varlen_func (and the packed variants): out, or
  with return_attn_probs=True (out, softmax_lse, S_dmask): lse fp32 [b, h, s_q]
  (varlen: [h, total_q]); S_dmask is an empty tensor, which is what
  FlashAttention returns when dropout_p == 0.
  flash_attn_with_kvcache: out, or (out, softmax_lse) with return_softmax_lse.

Dropout: dropout_p in [0, 1) (forward and backward, batch and varlen), as
fmha_tile.attention takes it: each element of P dropped with probability p
(in 256ths), the kept ones scaled by 256 / (256 - round(256 p)); the Philox
seed and offset come from torch's default CUDA generator of q's device
(advanced by 4 per call, so torch.manual_seed reproduces a run), and the
backward redraws the same mask. The masks differ from FlashAttention's own
(another random number layout), with the same distribution.

Not supported (a clear error, never a silent difference):
  - return_attn_probs=True with dropout_p > 0 (NotImplementedError: the
    dropped probabilities are never materialised); dropout_p > 0 with a
    block_table (NotImplementedError: the paged path has no dropout);
  - cache_leftpad (NotImplementedError);
  - rotary embedding in flash_attn_with_kvcache where FlashAttention's query
    positions differ from fmha_tile's: fmha_tile turns query i by position
    seqlen_k_after_append - seqlen_q + i, FlashAttention by cache_seqlens + i
    (causal or local) or cache_seqlens for every query (neither). They agree
    when seqlen_q == seqlen_new, and for the non-causal non-local case also
    seqlen_q == 1; other shapes raise NotImplementedError. rotary_cos/sin are
    used as fp32 (pass fp32 tables to avoid a conversion each call);
  - flash_attn_varlen_func with block_table: no alibi_slopes and no backward
    (fmha_tile's batch prefill serves it).
Differences in what is accepted: paged caches take any power-of-two page
size (FlashAttention: multiples of 256); strides must be 16-byte aligned
multiples of 8 elements (inputs with a non-unit last stride are made
contiguous, as FlashAttention does); head dim at most 256.
"""
from . import ops as _ops  # noqa: F401  (registers torch.ops.fmha_tile.*; needs torch >= 2.4)

import torch
import torch.nn.functional as F

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache",
           "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
           "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func"]


def _dropout(q, dropout_p, return_attn_probs, where):
    """(dropout_p, seed, offset, rng) for the forward op (fmha_tile.ops)."""
    if dropout_p is None:
        dropout_p = 0.0
    if return_attn_probs and dropout_p != 0.0:
        raise NotImplementedError(
            "fmha_tile.compat.%s: return_attn_probs=True with dropout_p=%r is not supported "
            "(fmha_tile never materialises the dropped attention probabilities); pass "
            "return_attn_probs=False" % (where, dropout_p))
    return _ops._dropout_args(q, dropout_p, None)


def _unit_last(x):
    return x if x is None or x.stride(-1) == 1 else x.contiguous()


def _pad8(x):
    d = x.shape[-1]
    return x if d % 8 == 0 else F.pad(x, (0, 8 - d % 8))


def _window(window_size):
    if window_size is None:
        return -1, -1
    left, right = window_size
    return int(left), int(right)


def _attn_probs_placeholder(q):
    # what FlashAttention returns as S_dmask when dropout_p == 0
    return torch.empty((0,), dtype=q.dtype, device=q.device)


def _prepare_qkv(q, k, v, softmax_scale):
    """Unit last stride, default scale from the real head dim, zero-padding to
    a multiple of 8. -> (q, k, v, scale, head dim of the output)."""
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** (-0.5)
    dv = v.shape[-1]
    q, k, v = (_pad8(_unit_last(x)) for x in (q, k, v))
    return q, k, v, softmax_scale, dv


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False):
    """FlashAttention's flash_attn_func: q [b, s_q, h, d], k/v [b, s_k, h_k, d]
    -> out [b, s_q, h, d] (or (out, softmax_lse [b, h, s_q], S_dmask) with
    return_attn_probs). Differentiable in q, k, v (deterministic: bitwise
    repeatable backward). dropout_p: see the module docstring."""
    dp, seed, offset, rng = _dropout(q, dropout_p, return_attn_probs, "flash_attn_func")
    q, k, v, scale, dv = _prepare_qkv(q, k, v, softmax_scale)
    wl, wr = _window(window_size)
    out, lse = torch.ops.fmha_tile.fwd(q, k, v, bool(causal), wl, wr, softcap, alibi_slopes, scale,
                                       None, bool(deterministic), None, None, None, None,
                                       dp, seed, offset, rng)
    if out.shape[-1] != dv:
        out = out[..., :dv]
    return (out, lse, _attn_probs_placeholder(q)) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, block_table=None):
    """FlashAttention's flash_attn_varlen_func: packed q [total_q, h, d], k/v
    [total_k, h_k, d], cu_seqlens_* int32 [b + 1] -> out [total_q, h, d] (or
    (out, softmax_lse [h, total_q], S_dmask)). max_seqlen_q must bound every
    query length (it sizes the grid; the prefix sums stay on the device).

    block_table (int32 [b, max_blocks]): k/v are paged caches [num_blocks,
    page_block_size, h_k, d] and sequence i has cu_seqlens_k[i+1] -
    cu_seqlens_k[i] keys (served by fmha_tile's batch prefill: forward
    only, no alibi_slopes, no dropout). dropout_p: see the module docstring."""
    wl, wr = _window(window_size)
    if block_table is not None:
        if dropout_p:
            raise NotImplementedError("fmha_tile.compat.flash_attn_varlen_func: dropout_p=%r with a "
                                      "block_table (paged KV) is not supported" % (dropout_p,))
        if alibi_slopes is not None:
            raise NotImplementedError("fmha_tile.compat.flash_attn_varlen_func: alibi_slopes with a "
                                      "block_table (paged KV) is not supported")
        if softmax_scale is None:
            softmax_scale = q.shape[-1] ** (-0.5)
        q = _unit_last(q)
        seqlens_k = cu_seqlens_k[1:] - cu_seqlens_k[:-1]
        out, lse = torch.ops.fmha_tile.batch_prefill(
            q, k, v, cu_seqlens_q, max_seqlen_q, "NHD", None, None, None, block_table, seqlens_k,
            bool(causal), wl, wr, softcap, softmax_scale, None, None, None, None,
            bool(return_attn_probs), None)
        return (out, lse, _attn_probs_placeholder(q)) if return_attn_probs else out
    dp, seed, offset, rng = _dropout(q, dropout_p, return_attn_probs, "flash_attn_varlen_func")
    q, k, v, scale, dv = _prepare_qkv(q, k, v, softmax_scale)
    out, lse = torch.ops.fmha_tile.fwd_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                              max_seqlen_k, bool(causal), wl, wr, softcap,
                                              alibi_slopes, scale, None, bool(deterministic), None,
                                              None, None, None, dp, seed, offset, rng)
    if out.shape[-1] != dv:
        out = out[..., :dv]
    return (out, lse, _attn_probs_placeholder(q)) if return_attn_probs else out


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    """qkv [b, s, 3, h, d]: flash_attn_func on its three views."""
    return flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p, softmax_scale,
                           causal, window_size, softcap, alibi_slopes, deterministic,
                           return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    """kv [b, s_k, 2, h_k, d]: flash_attn_func(q, kv[:, :, 0], kv[:, :, 1])."""
    return flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], dropout_p, softmax_scale, causal,
                           window_size, softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0,
                                     softmax_scale=None, causal=False, window_size=(-1, -1),
                                     softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """qkv [total, 3, h, d] with one cu_seqlens for queries and keys."""
    return flash_attn_varlen_func(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens, cu_seqlens,
                                  max_seqlen, max_seqlen, dropout_p, softmax_scale, causal,
                                  window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p=0.0, softmax_scale=None, causal=False,
                                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                                    deterministic=False, return_attn_probs=False):
    """kv [total_k, 2, h_k, d]."""
    return flash_attn_varlen_func(q, kv[:, 0], kv[:, 1], cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, dropout_p, softmax_scale, causal, window_size,
                                  softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
                            block_table=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
                            alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """FlashAttention's flash_attn_with_kvcache: q [b, s_q, h, d] over
    k_cache / v_cache [b_cache, s_cache, h_k, d] (or, with block_table int32
    [b, max_blocks], pages [num_blocks, page_block_size, h_k, d]).
    cache_seqlens (int or int32 [b]) counts the keys before the append; k / v
    [b, s_new, h_k, d], when given, are written into the caches in place at
    positions cache_seqlens .. cache_seqlens + s_new - 1 (turned by rotary_cos /
    rotary_sin [seqlen_ro, rotary_dim / 2] first, as the queries are) and
    attended to. cache_seqlens None means full caches. Returns out
    [b, s_q, h, d] (or (out, softmax_lse [b, h, s_q]) with return_softmax_lse).
    No backward (as FlashAttention)."""
    if cache_leftpad is not None:
        raise NotImplementedError("fmha_tile.compat.flash_attn_with_kvcache: cache_leftpad is not "
                                  "supported")
    if (k is None) != (v is None):
        raise ValueError("flash_attn_with_kvcache: pass k and v together (or neither)")
    if (rotary_cos is None) != (rotary_sin is None):
        raise ValueError("flash_attn_with_kvcache: pass rotary_cos and rotary_sin together")
    batch, s_q = q.shape[0], q.shape[1]
    s_new = 0 if k is None else k.shape[1]
    wl, wr = _window(window_size)
    if rotary_cos is not None:
        if k is None:
            raise ValueError("flash_attn_with_kvcache: rotary_cos / rotary_sin need the new k and v "
                             "(rotary embedding applies to the appended keys and the queries)")
        local = wl >= 0 or wr >= 0
        if s_q != s_new or not (causal or local or s_q == 1):
            raise NotImplementedError(
                "fmha_tile.compat.flash_attn_with_kvcache: rotary embedding needs seqlen_q == "
                "seqlen_new (got %d and %d), and causal or a window when seqlen_q > 1: fmha_tile "
                "places query i at position seqlen_k - seqlen_q + i" % (s_q, s_new))
        rotary_cos = rotary_cos.float().contiguous()
        rotary_sin = rotary_sin.float().contiguous()
    paged = block_table is not None
    if paged:
        max_seqlen_k = block_table.shape[1] * k_cache.shape[1]
    else:
        max_seqlen_k = None          # the cache's capacity
    # fmha_tile counts the keys after the append; FlashAttention before it
    if cache_seqlens is None:
        if k is not None:
            raise ValueError("flash_attn_with_kvcache: cache_seqlens is required when k / v are "
                             "appended")
        full = max_seqlen_k if paged else k_cache.shape[1]
        seqlens_k = torch.full((batch,), full, dtype=torch.int32, device=q.device)
    elif isinstance(cache_seqlens, int):
        seqlens_k = torch.full((batch,), cache_seqlens + s_new, dtype=torch.int32, device=q.device)
    else:
        seqlens_k = cache_seqlens.to(torch.int32)
        if s_new:
            seqlens_k = seqlens_k + s_new
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** (-0.5)
    q = _unit_last(q)
    tail = (seqlens_k, rotary_cos, rotary_sin, bool(rotary_interleaved), cache_batch_idx, None, None,
            None, block_table, max_seqlen_k, bool(causal), wl, wr, softcap, softmax_scale,
            alibi_slopes, None, None, num_splits, None, bool(return_softmax_lse), None)
    if k is None:
        out, lse = torch.ops.fmha_tile.decode(q, k_cache, v_cache, *tail)
    else:
        k, v = _unit_last(k), _unit_last(v)
        out, lse = torch.ops.fmha_tile.decode_append(q, k_cache, v_cache, k, v, *tail)
    return (out, lse) if return_softmax_lse else out
