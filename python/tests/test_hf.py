"""GPU tests of fmha_tile.hf (a transformers attention backend).

A tiny randomly initialised Llama (2 layers, hidden 512, 8 query heads, 2 KV
heads: GQA 4, head dim 64; bf16) built with attn_implementation="sdpa" and
"fmha_tile" with the same weights: prefill logits, decode-step logits with a
KV cache (teacher-forced, so both see the same tokens), greedy tokens, a
padded batch (served by the SDPA fallback, or refused with fallback="raise"),
the attention function alone against SDPA (causal, GQA, sliding window,
softcap, decode alignment), and torch.compile(fullgraph=True) over it.
Tolerance: rel-L2 2e-2 on the logits (bf16 through 2 layers; eager vs sdpa
sits well below it). Skips cleanly without torch >= 2.4, transformers, a GPU
or the library.
"""
import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()
transformers = pytest.importorskip("transformers")

if not hasattr(torch.library, "custom_op"):
    pytest.skip("fmha_tile.hf needs torch >= 2.4, found %s" % torch.__version__,
                allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import fmha_tile.hf as hf  # noqa: E402

TOL = 2e-2
DEV = "cuda"


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


@pytest.fixture(scope="module")
def name():
    return hf.register()


def build(impl, state=None, layers=2):
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=512, intermediate_size=1024,
                                   num_hidden_layers=layers, num_attention_heads=8,
                                   num_key_value_heads=2, max_position_embeddings=512)
    try:
        m = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl)
    except TypeError:
        cfg._attn_implementation = impl
        m = transformers.AutoModelForCausalLM.from_config(cfg)
    m = m.to(device=DEV, dtype=torch.bfloat16).eval()
    if state is not None:
        m.load_state_dict(state)
    return m


@pytest.fixture(scope="module")
def models(name):
    torch.manual_seed(7)
    ref = build("sdpa")
    ours = build(name, ref.state_dict())
    return ref, ours


def test_register_returns_name(name):
    assert name == "fmha_tile"
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    assert ALL_ATTENTION_FUNCTIONS["fmha_tile"] is hf.attention_forward


@pytest.mark.parametrize("b,s", [(2, 64), (1, 200), (3, 17)])
def test_prefill_logits(models, b, s):
    ref, ours = models
    ids = torch.randint(0, 1000, (b, s), device=DEV)
    hf.stats.update({"fmha_tile": 0, "decode": 0, "fallback": 0})
    with torch.inference_mode():
        lr = ref(input_ids=ids).logits
        lo = ours(input_ids=ids).logits
    assert hf.stats["fmha_tile"] == 2 and hf.stats["fallback"] == 0
    assert rel_l2(lo, lr) < TOL


def _steps(model, ids, tokens):
    """Prefill ids, then feed tokens [b, n] one at a time -> logits [b, n + 1, vocab]."""
    out = model(input_ids=ids, use_cache=True)
    cache, logits = out.past_key_values, [out.logits[:, -1].float()]
    for i in range(tokens.shape[1]):
        out = model(input_ids=tokens[:, i:i + 1], past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        logits.append(out.logits[:, -1].float())
    return torch.stack(logits, 1)


def test_decode_steps_with_cache(models):
    ref, ours = models
    ids = torch.randint(0, 1000, (2, 40), device=DEV)
    toks = torch.randint(0, 1000, (2, 12), device=DEV)
    hf.stats.update({"fmha_tile": 0, "decode": 0, "fallback": 0})
    with torch.inference_mode():
        lr = _steps(ref, ids, toks)
        lo = _steps(ours, ids, toks)
    assert hf.stats["decode"] == 2 * 12 and hf.stats["fallback"] == 0
    assert rel_l2(lo, lr) < TOL


def test_decode_steps_forward_op(name, models):
    """decode=False: decode steps through the forward op (s_q = 1, bottom-right)."""
    ref, ours = models
    ids = torch.randint(0, 1000, (2, 33), device=DEV)
    toks = torch.randint(0, 1000, (2, 5), device=DEV)
    try:
        hf.register(decode=False)
        with torch.inference_mode():
            lo = _steps(ours, ids, toks)
            lr = _steps(ref, ids, toks)
    finally:
        hf.register()
    assert rel_l2(lo, lr) < TOL


def test_generate_tokens(models):
    ref, ours = models
    ids = torch.randint(0, 1000, (2, 32), device=DEV)
    kw = dict(max_new_tokens=8, do_sample=False, min_new_tokens=8)
    hf.stats.update({"fmha_tile": 0, "decode": 0, "fallback": 0})
    with torch.inference_mode():
        to = ours.generate(ids, attention_mask=torch.ones_like(ids), **kw)
        tr = ref.generate(ids, attention_mask=torch.ones_like(ids), **kw)
    assert to.shape == tr.shape == (2, 40)
    assert torch.equal(to[:, :32], ids)
    # served by fmha_tile: the prefill (2 layers: 2 calls) and 7 decode steps (14)
    assert hf.stats["fallback"] == 0, hf.stats
    assert hf.stats["fmha_tile"] >= 2 and hf.stats["decode"] >= 2, hf.stats
    # greedy runs of a random model may part at a bf16 near tie of two logits, so
    # token identity is not asserted (test_decode_steps_with_cache checks the logits)
    print("greedy tokens identical to sdpa's: %d of %d" % (int((to == tr).sum()), to.numel()))


def test_padding_mask_falls_back(name, models):
    ref, ours = models
    ids = torch.randint(0, 1000, (2, 24), device=DEV)
    mask = torch.ones_like(ids)
    mask[0, :5] = 0      # left padding
    hf.stats.update({"fmha_tile": 0, "decode": 0, "fallback": 0})
    with torch.inference_mode(), pytest.warns(UserWarning, match="attention mask"):
        hf._warned.clear()
        lo = ours(input_ids=ids, attention_mask=mask).logits
        lr = ref(input_ids=ids, attention_mask=mask).logits
    assert hf.stats["fallback"] == 2
    assert rel_l2(lo[:, 5:], lr[:, 5:]) < TOL
    try:
        hf.register(fallback="raise")
        with torch.inference_mode(), pytest.raises(NotImplementedError, match="attention mask"):
            ours(input_ids=ids, attention_mask=mask)
    finally:
        hf.register()


# ---- the attention function alone -----------------------------------------------------------
class _Mod(torch.nn.Module):
    def __init__(self, groups, causal=True):
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = causal


def _sdpa_ref(q, k, v, causal, window=None, softcap=None, scale=None):
    """fp32 reference in HF's layout [b, h, s, d] -> [b, s_q, h, d]; bottom-right masks."""
    b, h, s_q, d = q.shape
    s_k = k.shape[2]
    g = h // k.shape[1]
    k = k.float().repeat_interleave(g, 1)
    v = v.float().repeat_interleave(g, 1)
    s = torch.matmul(q.float(), k.transpose(-1, -2)) * (scale or d ** -0.5)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(s_q, device=q.device)[:, None] + s_k - s_q
    j = torch.arange(s_k, device=q.device)[None, :]
    m = torch.ones(s_q, s_k, dtype=torch.bool, device=q.device)
    if causal:
        m &= j <= i
    if window:
        m &= j > i - window
    s = s.masked_fill(~m, float("-inf"))
    return torch.softmax(s, -1).matmul(v).transpose(1, 2)


@pytest.mark.parametrize("b,h,hk,s_q,s_k,d,causal,window,softcap", [
    (2, 8, 2, 64, 64, 64, True, None, None),
    (1, 8, 8, 1, 300, 128, True, None, None),       # decode step: sees every key
    (2, 16, 4, 1, 77, 64, True, 32, None),          # decode with a sliding window
    (1, 4, 1, 50, 50, 128, True, 16, None),         # prefill, sliding window, MQA
    (2, 4, 2, 48, 48, 128, True, None, 30.0),       # soft cap
    (1, 8, 2, 40, 40, 256, True, None, None),       # head dim 256
    (2, 4, 4, 37, 37, 64, False, None, None),       # non-causal (an encoder)
    (1, 8, 2, 16, 80, 64, True, None, None),        # chunked prefill after a cache
])
def test_attention_forward(name, b, h, hk, s_q, s_k, d, causal, window, softcap):
    q = torch.randn(b, h, s_q, d, device=DEV, dtype=torch.bfloat16)
    k = torch.randn(b, hk, s_k, d, device=DEV, dtype=torch.bfloat16)
    v = torch.randn(b, hk, s_k, d, device=DEV, dtype=torch.bfloat16)
    mod = _Mod(h // hk, causal).eval()
    with torch.no_grad():
        out, w = hf.attention_forward(mod, q, k, v, None, scaling=d ** -0.5, dropout=0.0,
                                      sliding_window=window, softcap=softcap)
    assert w is None and out.shape == (b, s_q, h, d)
    ref = _sdpa_ref(q, k, v, causal, window, softcap)
    assert rel_l2(out, ref) < 1e-2


def test_attention_forward_grad(name):
    q = torch.randn(2, 8, 32, 64, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 2, 32, 64, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 2, 32, 64, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    out, _ = hf.attention_forward(_Mod(4), q, k, v, None, scaling=None)
    g = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), g)
    q2, k2, v2 = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref = _sdpa_ref(q2, k2, v2, True)
    rq, rk, rv = torch.autograd.grad(ref, (q2, k2, v2), g.float())
    for a, r in ((dq, rq), (dk, rk), (dv, rv)):
        assert rel_l2(a, r) < 2e-2


def test_attention_forward_compiles(name):
    import torch._dynamo
    torch._dynamo.reset()
    mod = _Mod(4).eval()

    def f(q, k, v):
        return hf.attention_forward(mod, q, k, v, None, scaling=None)[0]

    q = torch.randn(2, 8, 64, 64, device=DEV, dtype=torch.bfloat16)
    k = torch.randn(2, 2, 64, 64, device=DEV, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    with torch.no_grad():
        eager = f(q, k, v)
        exp = torch._dynamo.explain(f)(q, k, v)
        assert exp.graph_break_count == 0, exp.break_reasons
        got = torch.compile(f, fullgraph=True)(q, k, v)
    assert torch.equal(got, eager) or rel_l2(got, eager) < 1e-3


def test_fp32_falls_back_or_raises(name):
    q = torch.randn(1, 4, 8, 64, device=DEV)
    k = torch.randn(1, 4, 8, 64, device=DEV)
    mod = _Mod(1).eval()
    hf._warned.clear()
    with pytest.warns(UserWarning, match="dtype"):
        out, _ = hf.attention_forward(mod, q, k, k, None, scaling=None)
    ref = F.scaled_dot_product_attention(q, k, k, is_causal=True).transpose(1, 2)
    assert rel_l2(out, ref) < 1e-4
    try:
        hf.register(fallback="raise")
        with pytest.raises(NotImplementedError, match="dtype"):
            hf.attention_forward(mod, q, k, k, None, scaling=None)
    finally:
        hf.register()
