"""appendkv_rope.py - one decode step as an inference engine runs it: the
new token's key and value are written into the KV cache, rotary position
embedding (RoPE) is applied to the new keys and to the queries, and the
attention over the whole cache follows, all in one call.

    o = fmha_tile.attention_with_kvcache(q, k_cache, v_cache, seqlens_k,
                                         k=k_new, v=v_new,
                                         rotary_cos=cos, rotary_sin=sin,
                                         rotary_interleaved=False)

seqlens_k counts each sequence's keys after the append (SGLang's and
FlashInfer's convention), so the new rows land at positions seqlens_k -
s_new .. seqlens_k - 1 and the queries sit at the last s_q positions.
cos / sin: fp32 [max_position, rotary_dim / 2]; half-split pairs (x[i],
x[i + rotary_dim/2]) or, with rotary_interleaved, (x[2i], x[2i+1]); a
rotary_dim below the head dim leaves the rest of each head as it is. The
cache is modified in place; q is not (a rotated copy is used).

Checked, contiguous cache and paged (vLLM table, page 16): the new cache
rows (K rotated, V as given), q unchanged, and O against the fp32 reference
on the updated cache with rotated queries.
"""
from _common import (setup, main, Checker, reference, paged_cache, page_table, TOL_BF16)


def rotate(torch, x, cos, sin, pos, interleaved):
    """x [..., n, h, d] fp32 at positions pos [n] -> rotated copy (first rotary_dim dims)."""
    r = 2 * cos.shape[1]
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]        # [n, 1, r/2]
    y = x.clone()
    if interleaved:
        a, b = x[..., 0:r:2], x[..., 1:r:2]
        y[..., 0:r:2], y[..., 1:r:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., :r // 2], x[..., r // 2:r]
        y[..., :r // 2], y[..., r // 2:r] = a * c - b * s, a * s + b * c
    return y


def run():
    torch, fmha_tile = setup("appendkv_rope")
    c = Checker("appendkv_rope")
    b, h, hk, d, s_new, rd = 3, 8, 2, 128, 1, 64
    lens = [40, 2, 300]                                       # keys after the append
    max_pos = 512
    inv = 10000.0 ** (-torch.arange(rd // 2, device="cuda", dtype=torch.float32) * 2.0 / rd)
    theta = torch.arange(max_pos, device="cuda", dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = theta.cos().contiguous(), theta.sin().contiguous()

    for paged, interleaved in ((False, False), (True, True)):
        # old keys (the last s_new positions of each sequence are still empty: NaN)
        Ks = [torch.randn(n, hk, d, device="cuda").to(torch.bfloat16) for n in lens]
        Vs = [torch.randn(n, hk, d, device="cuda").to(torch.bfloat16) for n in lens]
        for K, V in zip(Ks, Vs):
            K[-s_new:], V[-s_new:] = float("nan"), float("nan")
        q = torch.randn(b, 1, h, d, dtype=torch.bfloat16, device="cuda")
        k_new = torch.randn(b, s_new, hk, d, dtype=torch.bfloat16, device="cuda")
        v_new = torch.randn(b, s_new, hk, d, dtype=torch.bfloat16, device="cuda")
        seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        if paged:
            k_cache, v_cache, pages = paged_cache(torch, Ks, Vs, 16, "NHD")
            kw = page_table(torch, pages, lens, 16, "vllm")
            kw["max_seqlen_k"] = max(lens)
            seqlens = kw.pop("seqlens_k")

            def rows(cache, i):                               # sequence i's keys, in order
                return cache[pages[i]].reshape(-1, hk, d)[:lens[i]]
        else:
            k_cache = torch.full((b, 320, hk, d), float("nan"), dtype=torch.bfloat16, device="cuda")
            v_cache = torch.full_like(k_cache, float("nan"))
            for i in range(b):
                k_cache[i, :lens[i]], v_cache[i, :lens[i]] = Ks[i], Vs[i]
            kw = {}

            def rows(cache, i):
                return cache[i, :lens[i]]
        q0 = q.clone()
        o = fmha_tile.attention_with_kvcache(q, k_cache, v_cache, seqlens, k=k_new, v=v_new,
                                             rotary_cos=cos, rotary_sin=sin,
                                             rotary_interleaved=interleaved, num_splits=2, **kw)
        what = "%s, %s RoPE" % ("paged" if paged else "contiguous",
                                "interleaved" if interleaved else "half-split")
        c.equal(what + ": q unchanged", q, q0)
        outs = []
        for i in range(b):
            pos = torch.arange(lens[i] - s_new, lens[i], device="cuda")
            k_rot = rotate(torch, k_new[i].float(), cos, sin, pos, interleaved)
            got_k, got_v = rows(k_cache, i), rows(v_cache, i)
            ok_old = torch.equal(got_k[:-s_new], Ks[i][:-s_new]) and \
                torch.equal(got_v[:-s_new], Vs[i][:-s_new])
            c.true("%s: seq %d old rows untouched" % (what, i), ok_old)
            c.equal("%s: seq %d new V row" % (what, i), got_v[-s_new:], v_new[i])
            c.close("%s: seq %d new K row (rotated)" % (what, i), got_k[-s_new:], k_rot, TOL_BF16)
            # the query at the last position, rotated and kept in bf16 as the kernel does
            q_rot = rotate(torch, q[i].float(), cos, sin, pos[-1:], interleaved).to(q.dtype)
            outs.append(reference(q_rot[None], got_k[None], got_v[None])[0])
        c.close(what + ": O", o, torch.cat(outs), TOL_BF16)
    c.finish()


if __name__ == "__main__":
    main(run)
