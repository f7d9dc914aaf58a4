"""fmha_tile.hf: fmha_tile as a Hugging Face transformers attention backend.

    import fmha_tile.hf
    name = fmha_tile.hf.register()                    # -> "fmha_tile"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=name)
    # or model.set_attn_implementation(name) / model.config._attn_implementation = name

register() adds attention_forward below to transformers' AttentionInterface
under the name "fmha_tile", and gives the same name the mask builder that
"sdpa" uses (AttentionMaskInterface), so the model builds its masks exactly
as it does for SDPA: None when the mask is plain causal (no padding, s_q ==
s_k or s_q == 1) and a 4-D boolean mask otherwise. Nothing is registered on
import; transformers is imported only by register() (and by a fallback).
Importing this module needs PyTorch >= 2.4 (it imports fmha_tile.ops).

What the backend computes, through the custom ops of fmha_tile.ops (so a
model compiled with torch.compile keeps the attention inside its graph):
  - query [b, h, s_q, d], key / value [b, h_k, s_k, d] (HF's layout) are
    taken as [b, s, h, d] views (no copy for HF's usual layouts); the output
    is [b, s_q, h, d] as HF expects, attn_weights None.
  - causal: module.is_causal (or an is_causal keyword), bottom-right aligned,
    so a prefill after a cache, and a decode step (s_q = 1, s_k > 1) see every
    key up to their own position.
  - GQA / MQA: h_k = h / module.num_key_value_groups heads are read directly
    (no repeat_kv).
  - sliding_window=W (Mistral, Gemma 2/3 local layers): the query sees itself
    and the W - 1 keys before it (HF's sliding-window mask), window (W - 1, 0).
  - softcap (Gemma 2), scaling (scale, default 1/sqrt(d)), s_aux (attention
    sinks, gpt-oss) as fp32 [h].
  - decode steps (s_q == 1) without autograd use the split-KV decode op
    (fmha_tile::decode) over the cache tensors as they are; everything else
    the forward op (fmha_tile::fwd, differentiable in q, k, v and sinks).

What it does not express, and what happens then (fallback="sdpa", the
default: HF's own SDPA function computes that call, with a one-time warning;
fallback="raise": NotImplementedError):
  - a non-None attention_mask. With the SDPA mask builder this means padding
    (left-padded batches in generate), packed sequences, a static cache
    (compileable caches always get a mask), a sliding window shorter than
    the keys, or a model-specific mask. Our kernels take causal / window
    masks by shape only, not an arbitrary [b, 1, s_q, s_k] tensor; reading
    the tensor back to find out whether it is "just causal" would synchronise
    and break graphs, so such a call is served by SDPA with that mask.
    Padded batches are better sent to fmha_tile's varlen / batch-prefill
    entry points by the caller (unpadding is not done here).
  - dtypes other than fp16 / bf16, head dims the library does not take.
Attention dropout (dropout > 0 while the module is training) is served:
fmha_tile::fwd with dropout_p, the Philox seed and offset taken from the
default CUDA generator per call (advanced by 4; fmha_tile._dropout), the
backward redrawing the same mask; the decode op is not used then.
"""
import warnings

try:
    import torch
except ImportError as e:  # the package itself works without torch; this module does not
    raise ImportError("fmha_tile.hf needs PyTorch (%s)" % e) from None

from . import ops  # noqa: F401  registers torch.ops.fmha_tile.* (PyTorch >= 2.4)

NAME = "fmha_tile"

__all__ = ["register", "attention_forward", "NAME", "stats"]

_state = {"fallback": "sdpa", "decode": True}
_warned = set()
stats = {"fmha_tile": 0, "decode": 0, "fallback": 0}   # calls served, for tests and examples


def _transformers():
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        raise ImportError("fmha_tile.hf needs transformers (%s)" % e) from None
    return transformers


def register(name=NAME, fallback="sdpa", decode=True):
    """Register fmha_tile with transformers' AttentionInterface (and its mask
    builder with AttentionMaskInterface where that exists) under `name`;
    returns the name, to pass as attn_implementation=.

    fallback: "sdpa" (calls our kernels cannot express go to HF's SDPA
    function, with a one-time warning) or "raise" (NotImplementedError).
    decode: use the split-KV decode op for s_q == 1 without autograd (True)
    or the forward op for every call (False)."""
    if fallback not in ("sdpa", "raise"):
        raise ValueError("fallback must be 'sdpa' or 'raise', got %r" % (fallback,))
    _transformers()
    from transformers import AttentionInterface
    _state["fallback"] = fallback
    _state["decode"] = bool(decode)
    AttentionInterface.register(name, attention_forward)
    try:
        from transformers.masking_utils import AttentionMaskInterface, ALL_MASK_ATTENTION_FUNCTIONS
        sdpa_mask = ALL_MASK_ATTENTION_FUNCTIONS["sdpa"]
    except (ImportError, KeyError, AttributeError) as e:
        # transformers before masking_utils built one mask for every non-flash backend. Even
        # without a mask builder of our own, causal attention stays causal (we take it from
        # module.is_causal, not from the mask); a padding mask may then go unseen.
        warnings.warn("fmha_tile.hf: could not register a mask builder (%s); padding masks may "
                      "not reach the attention function" % e)
        return name
    AttentionMaskInterface.register(name, sdpa_mask)
    return name


def _compiling():
    c = getattr(torch, "compiler", None)
    f = getattr(c, "is_compiling", None)
    return bool(f()) if f is not None else False


def _fallback(why, module, query, key, value, attention_mask, scaling, dropout, kwargs):
    if _state["fallback"] == "raise":
        raise NotImplementedError("fmha_tile attention backend: %s" % why)
    if why not in _warned and not _compiling():
        _warned.add(why)
        warnings.warn("fmha_tile attention backend: %s; this call (and others like it) "
                      "is computed by SDPA" % why, stacklevel=3)
    stats["fallback"] += 1
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                  scaling=scaling, **kwargs)


def attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                      **kwargs):
    """An AttentionInterface function: query [b, h, s_q, d], key / value
    [b, h_k, s_k, d] -> (out [b, s_q, h, d], None). See the module docstring."""

    given_causal = kwargs.pop("is_causal", None)
    is_causal = given_causal
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    sliding_window = kwargs.get("sliding_window", None)
    softcap = kwargs.get("softcap", None)
    sinks = kwargs.get("s_aux", None)

    why = None
    if attention_mask is not None:
        why = ("an explicit attention mask (padding, packing, a static cache or a model-specific "
               "mask) that causal / window masks cannot express")
    elif query.dtype not in (torch.float16, torch.bfloat16) or key.dtype != query.dtype or \
            value.dtype != query.dtype:
        why = "dtype %s is not supported (fp16 / bf16 only)" % query.dtype
    elif query.shape[-1] % 8 or query.shape[-1] > 256 or value.shape[-1] != query.shape[-1]:
        why = "head dim %d is not supported" % query.shape[-1]
    elif not query.is_cuda:
        why = "tensors are not on a CUDA device"
    if why is not None:
        if given_causal is not None:
            kwargs["is_causal"] = given_causal
        return _fallback(why, module, query, key, value, attention_mask, scaling, dropout,
                         kwargs)

    s_q, s_k = query.shape[2], key.shape[2]
    # HF's layout [b, h, s, d] as [b, s, h, d] views (unit head-dim stride kept)
    q = query.transpose(1, 2)
    k = key.transpose(1, 2)
    v = value.transpose(1, 2)
    if q.stride(-1) != 1:
        q = q.contiguous()
    if k.stride(-1) != 1:
        k = k.contiguous()
    if v.stride(-1) != 1:
        v = v.contiguous()

    causal = bool(is_causal) and s_q > 1
    wl = -1
    if sliding_window is not None and sliding_window > 0:
        wl = int(sliding_window) - 1
        causal = bool(is_causal)
    wr = 0 if (causal and wl >= 0) else -1
    sc = float(softcap) if softcap else 0.0
    if sinks is not None and sinks.dtype != torch.float32:
        sinks = sinks.float()

    needs_grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or
                                              value.requires_grad or
                                              (sinks is not None and sinks.requires_grad))
    dp = float(dropout) if dropout and module.training else 0.0
    if s_q == 1 and _state["decode"] and not needs_grad and not dp:
        stats["decode"] += 1
        seqlens = torch.full((q.shape[0],), s_k, dtype=torch.int32, device=q.device)
        out, _ = torch.ops.fmha_tile.decode.default(
            q, k, v, seqlens_k=seqlens, max_seqlen_k=s_k, causal=False, window_left=wl,
            window_right=-1 if wl < 0 else 0, softcap=sc, scale=scaling, sinks=sinks)
        return out, None
    stats["fmha_tile"] += 1
    dp, seed, offset, rng = ops._dropout_args(q, dp, None)
    out, _ = torch.ops.fmha_tile.fwd.default(q, k, v, causal, wl, wr, sc, None, scaling, sinks,
                                             False, None, None, None, None, dp, seed, offset, rng)
    return out, None
