"""fwd_softcap.py - logits soft cap (Gemma 2, Grok): every score s = scale *
q.k becomes c * tanh(s / c) before the softmax.

    o = fmha_tile.attention(q, k, v, softcap=10.0, scale=0.5)

The scale here is large (scores with a standard deviation of about 6) so
that the cap really bends them: the capped output is checked against the
fp32 reference with the cap, and checked to be far from the reference
without it (the cap was applied, not ignored).
"""
from _common import setup, main, Checker, reference, rel_l2, TOL_BF16


def run():
    torch, fmha_tile = setup("fwd_softcap")
    c = Checker("fwd_softcap")
    b, s_q, s_k, h, hk, d = 2, 150, 190, 8, 2, 128
    q = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
    for causal in (False, True):
        o = fmha_tile.attention(q, k, v, causal=causal, softcap=10.0, scale=0.5)
        ref = reference(q, k, v, causal=causal, softcap=10.0, scale=0.5)[0]
        uncapped = reference(q, k, v, causal=causal, scale=0.5)[0]
        c.close("softcap 10, scale 0.5, causal=%s" % causal, o, ref, TOL_BF16)
        away = rel_l2(o, uncapped)
        c.true("  ... and far from the uncapped result", away > 10 * TOL_BF16,
               "rel-L2 to uncapped %.2e (> %.0e)" % (away, 10 * TOL_BF16))
    c.finish()


if __name__ == "__main__":
    main(run)
