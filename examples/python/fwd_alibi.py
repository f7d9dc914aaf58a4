"""fwd_alibi.py - ALiBi (attention with linear biases): each score gets
-slope_h * |i + s_k - s_q - j| (bottom-right aligned distance between query
i and key j), with one slope per head (fp32 [h]) or per sequence and head
(fp32 [b, h]).

    o = fmha_tile.attention(q, k, v, causal=True, alibi_slopes=slopes)

Checked against the fp32 reference for both slope shapes, causal and not,
with s_q < s_k (a cached prefix) and s_q > s_k.
"""
from _common import setup, main, Checker, reference, alibi_slopes, TOL_BF16


def run():
    torch, fmha_tile = setup("fwd_alibi")
    c = Checker("fwd_alibi")
    b, h, hk, d = 2, 8, 2, 128
    for s_q, s_k in ((120, 250), (250, 120)):
        q = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
        for per_batch in (False, True):
            slopes = alibi_slopes(torch, h, b if per_batch else None)
            for causal in (False, True):
                o = fmha_tile.attention(q, k, v, causal=causal, alibi_slopes=slopes)
                ref = reference(q, k, v, causal=causal, alibi=slopes)[0]
                c.close("s_q %d s_k %d slopes %s causal=%s" % (s_q, s_k, tuple(slopes.shape), causal),
                        o, ref, TOL_BF16)
    c.finish()


if __name__ == "__main__":
    main(run)
