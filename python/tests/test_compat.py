"""GPU tests of fmha_tile.compat (FlashAttention 2's functions over fmha_tile's ops).

References are written in FlashAttention's terms, independently of
fmha_tile's own conventions: test_attention.reference (SDPA's float32 math
backend with a bottom-right mask; soft cap and ALiBi by hand) for the
forward, its differentiable fp32 references for gradients, and for
flash_attn_with_kvcache a cache written by hand (new rows at cache_seqlens,
rotary embedding at FlashAttention's positions) and the same reference per
sequence. Grid: causal / window / soft cap / ALiBi / GQA / head dims that
need padding, varlen (with empty sequences, and a paged block_table),
kvcache (contiguous with cache_batch_idx, paged, append + rotary, int
cache_seqlens). Also: torch.compile(fullgraph=True) over the compat
functions (no graph break, same values, gradients), and the errors for what
is not supported. Tolerances as test_attention (bf16 1e-2, fp16 2e-3 rel-L2;
LSE 2e-3). Skips cleanly without torch >= 2.4, a GPU or the library.
"""
import pytest

from gpu_setup import require_gpu_and_library

torch = require_gpu_and_library()

if not hasattr(torch.library, "custom_op"):
    pytest.skip("fmha_tile.compat needs torch >= 2.4, found %s" % torch.__version__,
                allow_module_level=True)

import torch._dynamo  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from fmha_tile.compat import (flash_attn_func, flash_attn_varlen_func,  # noqa: E402
                              flash_attn_with_kvcache, flash_attn_qkvpacked_func,
                              flash_attn_kvpacked_func, flash_attn_varlen_qkvpacked_func)

from test_attention import (reference, check, rand, rel_l2, alibi_slopes, varlen_case,  # noqa: E402
                            varlen_reference, varlen_grad_reference, manual_ref_f32, ref_grads,
                            fmha_grads, check_grads, TOL, BF16, FP16, DEV)
from test_decode import rotate  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(2024)
    torch._dynamo.reset()


# ---- flash_attn_func ---------------------------------------------------------------------------
GRID = [
    # b, s_q, s_k, h, hk, d, causal, window, softcap, dtype
    (2, 64, 64, 4, 4, 64, False, (-1, -1), 0.0, BF16),
    (2, 64, 64, 4, 4, 64, True, (-1, -1), 0.0, FP16),
    (1, 37, 101, 8, 2, 128, True, (-1, -1), 0.0, BF16),     # GQA 4, s_q < s_k
    (2, 101, 37, 8, 1, 128, True, (-1, -1), 0.0, FP16),     # MQA, s_q > s_k: rows without keys
    (2, 80, 120, 4, 2, 64, False, (16, 4), 0.0, BF16),
    (1, 80, 80, 4, 2, 96, True, (24, 0), 0.0, FP16),        # causal + window: right forced to 0
    (2, 50, 77, 4, 4, 128, False, (-1, -1), 30.0, BF16),
    (1, 77, 77, 8, 4, 64, True, (32, -1), 5.0, FP16),
    (2, 33, 65, 4, 2, 256, False, (-1, -1), 0.0, BF16),
]


@pytest.mark.parametrize("cfg", GRID, ids=lambda c: "b%d_q%d_k%d_h%d_%d_d%d_c%d_w%d_%d_sc%g" % (
    c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7][0], c[7][1], c[8]))
def test_flash_attn_func(cfg):
    b, s_q, s_k, h, hk, d, causal, window, softcap, dtype = cfg
    q, k, v = rand(b, s_q, h, d, dtype=dtype), rand(b, s_k, hk, d, dtype=dtype), \
        rand(b, s_k, hk, d, dtype=dtype)
    out = flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap)
    out2, lse, probs = flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap,
                                       return_attn_probs=True)
    ref_o, ref_lse = reference(q, k, v, causal, window, softcap)
    check(out, None, ref_o, None, dtype)
    check(out2, lse, ref_o, ref_lse, dtype)
    assert torch.equal(out, out2)
    assert probs.numel() == 0          # FlashAttention's S_dmask without dropout


def test_flash_attn_func_vs_sdpa():
    """Directly against SDPA (default backend, bf16), causal square and GQA."""
    b, s, h, hk, d = 2, 128, 8, 2, 128
    q, k, v = rand(b, s, h, d), rand(b, s, hk, d), rand(b, s, hk, d)
    out = flash_attn_func(q, k, v, causal=True)
    kk = k.repeat_interleave(h // hk, dim=2)
    vv = v.repeat_interleave(h // hk, dim=2)
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2),
                                         is_causal=True).transpose(1, 2)
    assert rel_l2(out, ref.float()) <= TOL[BF16]


@pytest.mark.parametrize("per_batch", [False, True])
def test_flash_attn_func_alibi_scale(per_batch):
    q, k, v = rand(2, 60, 8, 64), rand(2, 90, 2, 64), rand(2, 90, 2, 64)
    sl = alibi_slopes(8, 2 if per_batch else None)
    out, lse, _ = flash_attn_func(q, k, v, softmax_scale=0.3, causal=True, alibi_slopes=sl,
                                  return_attn_probs=True)
    ref_o, ref_lse = reference(q, k, v, True, (-1, -1), 0.0, sl, 0.3)
    check(out, lse, ref_o, ref_lse, BF16)


def test_head_dim_padding():
    """d = 36 is padded to 40 (FlashAttention pads to a multiple of 8); the
    default scale is 1/sqrt(36); gradients come back in 36 columns."""
    q, k, v = rand(2, 50, 4, 36, dtype=FP16), rand(2, 70, 2, 36, dtype=FP16), \
        rand(2, 70, 2, 36, dtype=FP16)
    out = flash_attn_func(q, k, v, causal=True)
    assert out.shape == (2, 50, 4, 36)
    ref_o, _ = reference(q, k, v, True)
    check(out, None, ref_o, None, FP16)
    dout = rand(*q.shape, dtype=FP16)
    got = fmha_grads(lambda q, k, v: flash_attn_func(q, k, v, causal=True), q, k, v, dout)
    ref = ref_grads(lambda q, k, v: manual_ref_f32(q, k, v, True), q, k, v, dout)
    check_grads(got, ref, FP16)


@pytest.mark.parametrize("causal,window,softcap", [(True, (-1, -1), 0.0), (False, (20, 5), 0.0),
                                                   (True, (-1, -1), 15.0)])
def test_flash_attn_func_grads(causal, window, softcap):
    q, k, v = rand(2, 70, 8, 64, dtype=FP16), rand(2, 90, 2, 64, dtype=FP16), \
        rand(2, 90, 2, 64, dtype=FP16)
    dout = rand(*q.shape, dtype=FP16)
    got = fmha_grads(lambda q, k, v: flash_attn_func(q, k, v, causal=causal, window_size=window,
                                                     softcap=softcap), q, k, v, dout)
    ref = ref_grads(lambda q, k, v: manual_ref_f32(q, k, v, causal, window, softcap), q, k, v, dout)
    check_grads(got, ref, FP16)
    a = fmha_grads(lambda q, k, v: flash_attn_func(q, k, v, causal=causal, window_size=window,
                                                   softcap=softcap, deterministic=True), q, k, v, dout)
    b = fmha_grads(lambda q, k, v: flash_attn_func(q, k, v, causal=causal, window_size=window,
                                                   softcap=softcap, deterministic=True), q, k, v, dout)
    assert all(torch.equal(x, y) for x, y in zip(a[1:], b[1:]))


def test_packed_variants():
    b, s, h, d = 2, 40, 4, 64
    qkv = rand(b, s, 3, h, d)
    want = flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], causal=True)
    assert torch.equal(flash_attn_qkvpacked_func(qkv, causal=True), want)
    q, kv = rand(b, s, h, d), rand(b, 55, 2, 2, d)
    assert torch.equal(flash_attn_kvpacked_func(q, kv, window_size=(8, 8)),
                       flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], window_size=(8, 8)))
    lens = [17, 0, 40]
    cu = torch.tensor([0, 17, 17, 57], dtype=torch.int32, device=DEV)
    qkv = rand(57, 3, h, d)
    got = flash_attn_varlen_qkvpacked_func(qkv, cu, max(lens), causal=True)
    assert torch.equal(got, flash_attn_varlen_func(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu, cu, 40, 40,
                                                   causal=True))


# ---- flash_attn_varlen_func --------------------------------------------------------------------
LENS_Q = [17, 0, 64, 1, 40]
LENS_K = [30, 9, 64, 12, 0]      # an empty query sequence and one without keys


@pytest.mark.parametrize("kw", [dict(causal=True), dict(window_size=(10, 3), softcap=20.0),
                                dict(causal=True, softmax_scale=0.2)],
                         ids=["causal", "window_softcap", "scale"])
@pytest.mark.parametrize("dtype", [BF16, FP16], ids=["bf16", "fp16"])
def test_flash_attn_varlen_func(kw, dtype):
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(LENS_Q, LENS_K, 8, 2, 64, dtype)
    out, lse, _ = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(LENS_Q), max(LENS_K),
                                         return_attn_probs=True, **kw)
    assert out.shape == q.shape and lse.shape == (8, q.shape[0])
    rk = dict(causal=kw.get("causal", False), window=kw.get("window_size", (-1, -1)),
              softcap=kw.get("softcap", 0.0), scale=kw.get("softmax_scale"))
    ref_o, ref_lse = varlen_reference(q, k, v, cq, ck, **rk)
    check(out, lse, ref_o, ref_lse, dtype)


def test_flash_attn_varlen_func_grads():
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(LENS_Q, LENS_K, 4, 2, 64, FP16)
    dout = rand(*q.shape, dtype=FP16)
    got = fmha_grads(lambda q, k, v: flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(LENS_Q), max(LENS_K), causal=True), q, k, v, dout)
    ref = ref_grads(lambda q, k, v: varlen_grad_reference(q, k, v, cq, ck, causal=True), q, k, v, dout)
    check_grads(got, ref, FP16)


def test_flash_attn_varlen_func_block_table():
    """Paged K/V (vLLM block table, page 16, shuffled pages) equals the
    contiguous call on the same keys."""
    h, hk, d, page = 4, 2, 64, 16
    lens_q, lens_k = [7, 1, 20], [30, 5, 44]
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(lens_q, lens_k, h, hk, d, BF16)
    counts = [(n + page - 1) // page for n in lens_k]
    pool = sum(counts) + 2
    perm = torch.randperm(pool).tolist()
    kc = torch.zeros(pool, page, hk, d, dtype=BF16, device=DEV)
    vc = torch.zeros_like(kc)
    table = torch.zeros(len(lens_k), max(counts), dtype=torch.int32)
    at = 0
    for i, n in enumerate(lens_k):
        pages = perm[at:at + counts[i]]
        at += counts[i]
        table[i, :len(pages)] = torch.tensor(pages, dtype=torch.int32)
        for t in range(n):
            kc[pages[t // page], t % page] = k[ck[i] + t]
            vc[pages[t // page], t % page] = v[ck[i] + t]
    out, lse, _ = flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                         window_size=(12, 0), return_attn_probs=True,
                                         block_table=table.to(DEV))
    ref_o, ref_lse = varlen_reference(q, k, v, cq, ck, causal=True, window=(12, 0))
    check(out, lse, ref_o, ref_lse, BF16)
    with pytest.raises(NotImplementedError, match="alibi"):
        flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, 20, 44, block_table=table.to(DEV),
                               alibi_slopes=alibi_slopes(h))


# ---- flash_attn_with_kvcache ---------------------------------------------------------------------
def kv_reference(q, k_seqs, v_seqs, causal, window=(-1, -1), softcap=0.0, scale=None, alibi=None):
    """q [b, s_q, h, d]; k_seqs / v_seqs per sequence [s_k_i, hk, d] -> out, lse [b, h, s_q]."""
    outs, lses = [], []
    for i in range(q.shape[0]):
        a = None if alibi is None else (alibi if alibi.dim() == 1 else alibi[i])
        o, l = reference(q[i:i + 1], k_seqs[i][None], v_seqs[i][None], causal, window, softcap, a,
                         scale)
        outs.append(o[0])
        lses.append(l[0])
    return torch.stack(outs), torch.stack(lses)


def rope_tables(n, rd):
    theta = torch.arange(n, device=DEV)[:, None] * (10000.0 ** (-torch.arange(rd // 2, device=DEV)
                                                                * 2.0 / rd))
    return theta.cos(), theta.sin()


@pytest.mark.parametrize("interleaved", [True, False])
def test_kvcache_append_rotary(interleaved):
    """Contiguous cache with cache_batch_idx; k / v appended at cache_seqlens
    (FlashAttention counts the keys before the append); keys and queries
    turned at positions cache_seqlens + i (causal, seqlen_q == seqlen_new)."""
    b, h, hk, d, s_new, cap, nb = 3, 8, 2, 128, 2, 100, 5
    dtype = BF16
    before = [40, 0, 90]
    k_cache, v_cache = rand(nb, cap, hk, d, dtype=dtype), rand(nb, cap, hk, d, dtype=dtype)
    cbi = torch.tensor([3, 0, 4], dtype=torch.int32, device=DEV)
    cache_seqlens = torch.tensor(before, dtype=torch.int32, device=DEV)
    q, k, v = rand(b, s_new, h, d, dtype=dtype), rand(b, s_new, hk, d, dtype=dtype), \
        rand(b, s_new, hk, d, dtype=dtype)
    cos, sin = rope_tables(cap, 64)
    # FlashAttention takes the tables in q's dtype; the reference turns by the same rounded values
    cos, sin = cos.to(dtype), sin.to(dtype)
    cf, sf = cos.float(), sin.float()
    kc_ref, vc_ref = k_cache.clone(), v_cache.clone()
    q_rot = q.float().clone()
    for i in range(b):
        pos = torch.arange(before[i], before[i] + s_new, device=DEV)
        e = int(cbi[i])
        kc_ref[e, before[i]:before[i] + s_new] = rotate(k[i].float(), cf, sf, pos[:, None],
                                                        interleaved).to(dtype)
        vc_ref[e, before[i]:before[i] + s_new] = v[i]
        q_rot[i] = rotate(q_rot[i], cf, sf, pos[:, None], interleaved)
    q0 = q.clone()
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, rotary_cos=cos,
                                       rotary_sin=sin, cache_seqlens=cache_seqlens,
                                       cache_batch_idx=cbi, causal=True,
                                       rotary_interleaved=interleaved, return_softmax_lse=True)
    assert torch.equal(q, q0) and torch.equal(cache_seqlens.cpu(), torch.tensor(before, dtype=torch.int32))
    for i in range(b):
        e, n = int(cbi[i]), before[i] + s_new
        assert torch.equal(v_cache[e, :n], vc_ref[e, :n])
        # the kernel turns in fp32 and rounds once, as the reference: within a bf16 step
        got, want = k_cache[e, :n].float(), kc_ref[e, :n].float()
        assert ((got - want).abs() <= want.abs() * 2.0 ** -7 + 1e-3).all()
    ks = [k_cache[int(cbi[i]), :before[i] + s_new] for i in range(b)]
    vs = [v_cache[int(cbi[i]), :before[i] + s_new] for i in range(b)]
    ref_o, ref_lse = kv_reference(q_rot.to(dtype), ks, vs, True)
    check(out, lse, ref_o, ref_lse, dtype)


@pytest.mark.parametrize("kw", [dict(), dict(causal=True, softcap=20.0), dict(window_size=(30, 0)),
                                dict(alibi_slopes="per_head")],
                         ids=["plain", "causal_softcap", "window", "alibi"])
def test_kvcache_paged(kw):
    """block_table (vLLM), page 16, GQA, s_q 1 and 3, no append."""
    h, hk, d, page = 8, 2, 64, 16
    lens = [70, 3, 33]
    b = len(lens)
    counts = [(n + page - 1) // page for n in lens]
    pool = sum(counts) + 3
    perm = torch.randperm(pool).tolist()
    kc, vc = rand(pool, page, hk, d, dtype=FP16), rand(pool, page, hk, d, dtype=FP16)
    table = torch.zeros(b, max(counts) + 1, dtype=torch.int32)
    at = 0
    for i, c in enumerate(counts):
        table[i, :c] = torch.tensor(perm[at:at + c], dtype=torch.int32)
        at += c
    table = table.to(DEV)
    kw = dict(kw)
    if kw.get("alibi_slopes") == "per_head":
        kw["alibi_slopes"] = alibi_slopes(h)
    for s_q in (1, 3):
        q = rand(b, s_q, h, d, dtype=FP16)
        out, lse = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=torch.tensor(lens, dtype=torch.int32,
                                                                                device=DEV),
                                           block_table=table, return_softmax_lse=True, **kw)
        ks = [kc[table[i].long()].flatten(0, 1)[:lens[i]] for i in range(b)]
        vs = [vc[table[i].long()].flatten(0, 1)[:lens[i]] for i in range(b)]
        ref_o, ref_lse = kv_reference(q, ks, vs, kw.get("causal", False),
                                      kw.get("window_size", (-1, -1)), kw.get("softcap", 0.0),
                                      alibi=kw.get("alibi_slopes"))
        check(out, lse, ref_o, ref_lse, FP16)


def test_kvcache_int_seqlens_and_full_cache():
    b, h, hk, d, cap = 2, 4, 4, 64, 48
    kc, vc = rand(b, cap, hk, d), rand(b, cap, hk, d)
    q = rand(b, 1, h, d)
    out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=30, num_splits=2)
    ref_o, _ = kv_reference(q, [kc[i, :30] for i in range(b)], [vc[i, :30] for i in range(b)], False)
    check(out, None, ref_o, None, BF16)
    out = flash_attn_with_kvcache(q, kc, vc)                        # cache_seqlens None: all of it
    ref_o, _ = kv_reference(q, list(kc), list(vc), False)
    check(out, None, ref_o, None, BF16)
    # int cache_seqlens with an append: rows land at 30, the call sees 31 keys
    k1, v1 = rand(b, 1, hk, d), rand(b, 1, hk, d)
    out = flash_attn_with_kvcache(q, kc, vc, k1, v1, cache_seqlens=30)
    assert torch.equal(kc[:, 30], k1[:, 0]) and torch.equal(vc[:, 30], v1[:, 0])
    ref_o, _ = kv_reference(q, [kc[i, :31] for i in range(b)], [vc[i, :31] for i in range(b)], False)
    check(out, None, ref_o, None, BF16)


def test_unsupported():
    q, k, v = rand(1, 16, 2, 64), rand(1, 16, 2, 64), rand(1, 16, 2, 64)
    # dropout works (test_dropout.py); its probabilities are never materialised
    with pytest.raises(NotImplementedError, match="return_attn_probs"):
        flash_attn_func(q, k, v, dropout_p=0.1, return_attn_probs=True)
    cu = torch.tensor([0, 16], dtype=torch.int32, device=DEV)
    with pytest.raises(NotImplementedError, match="return_attn_probs"):
        flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 16, 16, dropout_p=0.5,
                               return_attn_probs=True)
    with pytest.raises(ValueError, match="dropout_p"):
        flash_attn_func(q, k, v, dropout_p=1.0)
    bt = torch.zeros((1, 1), dtype=torch.int32, device=DEV)
    with pytest.raises(NotImplementedError, match="dropout"):
        flash_attn_varlen_func(q[0], k, v, cu, cu, 16, 16, dropout_p=0.5, block_table=bt)
    kc, vc = rand(1, 32, 2, 64), rand(1, 32, 2, 64)
    sl = torch.tensor([10], dtype=torch.int32, device=DEV)
    with pytest.raises(NotImplementedError, match="cache_leftpad"):
        flash_attn_with_kvcache(q[:, :1], kc, vc, cache_seqlens=sl, cache_leftpad=sl)
    cos, sin = rope_tables(32, 64)
    q2, k2 = rand(1, 2, 2, 64), rand(1, 2, 2, 64)
    with pytest.raises(NotImplementedError, match="rotary"):      # non-causal, seqlen_q 2
        flash_attn_with_kvcache(q2, kc, vc, k2, k2, cos, sin, cache_seqlens=sl)
    with pytest.raises(ValueError, match="rotary"):
        flash_attn_with_kvcache(q2, kc, vc, rotary_cos=cos, rotary_sin=sin, cache_seqlens=sl)
    with pytest.raises(ValueError, match="cache_seqlens"):
        flash_attn_with_kvcache(q2, kc, vc, k2, k2)


# ---- torch.compile ---------------------------------------------------------------------------------
def _explain_ok(fn, *args):
    torch._dynamo.reset()
    ex = torch._dynamo.explain(fn)(*args)
    assert ex.graph_break_count == 0 and ex.graph_count == 1, ex.break_reasons
    torch._dynamo.reset()


def test_compile_flash_attn_func_with_grads():
    def f(q, k, v):
        o, lse, _ = flash_attn_func(q, k, v, causal=True, window_size=(24, 0), softcap=10.0,
                                    deterministic=True, return_attn_probs=True)
        return o * 2, lse

    q, k, v = rand(2, 50, 4, 64, dtype=FP16), rand(2, 60, 2, 64, dtype=FP16), \
        rand(2, 60, 2, 64, dtype=FP16)
    dout = rand(*q.shape, dtype=FP16)
    res = []
    for fn in (f, torch.compile(f, backend="aot_eager", fullgraph=True)):
        xs = [t.clone().requires_grad_() for t in (q, k, v)]
        o, lse = fn(*xs)
        o.backward(dout)
        res.append([o.detach(), lse] + [t.grad for t in xs])
    for a, b in zip(*res):
        assert torch.equal(a, b)
    _explain_ok(f, q, k, v)


def test_compile_flash_attn_varlen_func():
    q, k, v, cu_q, cu_k, cq, ck = varlen_case(LENS_Q, LENS_K, 4, 2, 64, BF16)

    def f(q, k, v):
        return flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(LENS_Q), max(LENS_K), causal=True)

    assert torch.equal(torch.compile(f, backend="aot_eager", fullgraph=True)(q, k, v), f(q, k, v))
    _explain_ok(f, q, k, v)


def test_compile_flash_attn_with_kvcache():
    """A decode step with append under torch.compile: the caches are written
    (decode_append declares the mutation) and the output equals eager."""
    b, h, hk, d, cap = 2, 8, 2, 64, 64
    kc, vc = rand(b, cap, hk, d), rand(b, cap, hk, d)
    sl = torch.tensor([20, 45], dtype=torch.int32, device=DEV)
    cos, sin = rope_tables(cap, 32)
    q, k1, v1 = rand(b, 1, h, d), rand(b, 1, hk, d), rand(b, 1, hk, d)

    def step(q, kc, vc, k1, v1):
        return flash_attn_with_kvcache(q, kc, vc, k1, v1, cos, sin, cache_seqlens=sl, causal=True,
                                       rotary_interleaved=False)

    kc_e, vc_e = kc.clone(), vc.clone()
    want = step(q, kc_e, vc_e, k1, v1)
    got = torch.compile(step, backend="aot_eager", fullgraph=True)(q, kc, vc, k1, v1)
    assert torch.equal(got, want) and torch.equal(kc, kc_e) and torch.equal(vc, vc_e)
    assert torch.equal(vc[0, 20], v1[0, 0]) and torch.equal(vc[1, 45], v1[1, 0])
    _explain_ok(step, q, kc.clone(), vc.clone(), k1, v1)
