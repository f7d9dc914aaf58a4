"""fwd_varlen.py - group (varlen) mode: packed sequences of different
lengths in one call, fmha_tile.attention_varlen.

    o, lse = fmha_tile.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k,
                                        max_seqlen_q, max_seqlen_k, causal=True,
                                        return_lse=True)

q [total_q, h, d], k and v [total_k, h_k, d]; sequence i is rows
cu_seqlens_q[i] .. cu_seqlens_q[i+1]-1 of q (and likewise of k, v); the
prefix sums are int32 tensors on the GPU and are never read on the host
(max_seqlen_q sizes the grid). A sequence may be empty; one with queries
but no keys gives O = 0 and LSE = -inf. LSE is [h, total_q].
Checked per sequence against the fp32 reference (O and LSE).
"""
from _common import setup, main, Checker, prefix_sums, varlen_reference, TOL_BF16


def run():
    torch, fmha_tile = setup("fwd_varlen")
    c = Checker("fwd_varlen")
    h, hk, d = 8, 2, 128
    lens_q = [17, 0, 300, 1, 128, 5]
    lens_k = [40, 9, 257, 1, 128, 0]      # no queries in #1, no keys in #5
    q = torch.randn(sum(lens_q), h, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(sum(lens_k), hk, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(sum(lens_k), hk, d, dtype=torch.bfloat16, device="cuda")
    cu_q, cu_k = prefix_sums(torch, lens_q), prefix_sums(torch, lens_k)
    Ks, Vs, at = [], [], 0
    for n in lens_k:
        Ks.append(k[at:at + n])
        Vs.append(v[at:at + n])
        at += n
    for causal in (False, True):
        o, lse = fmha_tile.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                            causal=causal, return_lse=True)
        ref_o, ref_lse = varlen_reference(q, Ks, Vs, lens_q, causal=causal)
        what = "causal" if causal else "no mask"
        c.close("O   %s, lengths %s" % (what, lens_q), o, ref_o, TOL_BF16)
        c.lse("LSE %s" % what, lse, ref_lse)
    last = slice(sum(lens_q) - lens_q[-1], sum(lens_q))
    c.true("sequence without keys: O = 0", bool((o[last] == 0).all()))
    c.finish()


if __name__ == "__main__":
    main(run)
