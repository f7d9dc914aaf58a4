"""fwd_lse.py - the log-sum-exp output, and what it is for: merging partial
attention results.

    o, lse = fmha_tile.attention(q, k, v, return_lse=True)   # lse fp32 [b, h, s_q]

LSE_i = log sum_j exp(s_ij) (natural log, the scaled scores). Attention over
two halves of the keys, each with its LSE, merges into attention over all
of them:

    lse = logaddexp(lse1, lse2)
    o   = o1 * exp(lse1 - lse) + o2 * exp(lse2 - lse)

(split-KV decode and ring attention do exactly this). Checked: the LSE
against the fp32 reference, the merged halves against the one-call result
and the reference. Also shown: out_lse= takes a caller-owned LSE buffer
(here a strided slice of a larger one).
"""

from _common import setup, main, Checker, reference, TOL_BF16


def run():
    torch, fmha_tile = setup("fwd_lse")
    c = Checker("fwd_lse")
    b, s_q, s_k, h, hk, d = 2, 200, 512, 8, 2, 128
    q = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(b, s_k, hk, d, dtype=torch.bfloat16, device="cuda")
    o, lse = fmha_tile.attention(q, k, v, return_lse=True)
    ref_o, ref_lse = reference(q, k, v)
    c.close("one call: O", o, ref_o, TOL_BF16)
    c.lse("one call: LSE [b, h, s_q]", lse, ref_lse)

    half = s_k // 2
    o1, l1 = fmha_tile.attention(q, k[:, :half], v[:, :half], return_lse=True)
    buf = torch.empty(b, h, s_q + 8, dtype=torch.float32, device="cuda")
    l2 = buf[:, :, :s_q]                                   # caller-owned, row stride s_q + 8
    o2, _ = fmha_tile.attention(q, k[:, half:], v[:, half:], return_lse=True, out_lse=l2)
    lm = torch.logaddexp(l1, l2)                           # [b, h, s_q]
    w1 = torch.exp(l1 - lm).transpose(1, 2)[..., None]     # [b, s_q, h, 1]
    w2 = torch.exp(l2 - lm).transpose(1, 2)[..., None]
    merged = o1.float() * w1 + o2.float() * w2
    c.lse("merged halves: LSE", lm, ref_lse)
    c.close("merged halves: O vs the reference", merged, ref_o, TOL_BF16)
    c.close("merged halves: O vs the one call", merged, o.float(), TOL_BF16)
    c.finish()


if __name__ == "__main__":
    main(run)
