"""fwd_gqa.py - grouped-query and multi-query attention.

K and V carry fewer heads than Q (nheads % nheads_k == 0); query head i
reads KV head i // (nheads // nheads_k). Nothing is repeated in memory:

    o = fmha_tile.attention(q, k, v)       # q [b, s, 16, d], k/v [b, s_k, 4, d]

Checked: GQA 16:4 and MQA 8:1 against the fp32 reference, and GQA against
the same call on K/V whose heads are repeated to 16 (plain multi-head
attention), which must agree.
"""
from _common import setup, main, Checker, reference, TOL_BF16


def run():
    torch, fmha_tile = setup("fwd_gqa")
    c = Checker("fwd_gqa")
    b, s_q, s_k, d = 2, 200, 300, 128
    for h, hk in ((16, 4), (8, 1)):
        q = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
        o = fmha_tile.attention(q, k, v, causal=True)
        c.close("%s %d:%d causal" % ("MQA" if hk == 1 else "GQA", h, hk), o,
                reference(q, k, v, causal=True)[0], TOL_BF16)
        if hk == 4:
            # each KV head copied for its 4 query heads: plain multi-head attention
            ke = k.repeat_interleave(h // hk, dim=2)
            ve = v.repeat_interleave(h // hk, dim=2)
            oe = fmha_tile.attention(q, ke, ve, causal=True)
            c.close("GQA 16:4 == MHA on repeated K/V heads", o, oe.float(), TOL_BF16)
    c.finish()


if __name__ == "__main__":
    main(run)
