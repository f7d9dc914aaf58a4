"""fwd_batch.py - the forward in batch mode: fmha_tile.attention on
[batch, seqlen, heads, headdim] tensors, checked against PyTorch SDPA (fp32,
math backend).

    o = fmha_tile.attention(q, k, v)                     # q [b, s_q, h, d], k/v [b, s_k, h_k, d]
    plan = fmha_tile.attention_plan(q, k, v)             # which kernel, without launching

Shows: bf16 and fp16, s_q != s_k, a causal square problem (where SDPA's
top-left is_causal and fmha_tile's bottom-right causal agree), strided
[b, s, h, d] views of [b, h, s, d] tensors with a caller-owned output
(out=: the call then allocates nothing). The kernel runs on the current
stream; nothing synchronises with the host.
"""
from _common import setup, main, Checker, sdpa_f32, TOL_BF16, TOL_FP16


def run():
    torch, fmha_tile = setup("fwd_batch")
    c = Checker("fwd_batch")
    b, s_q, s_k, h, d = 2, 300, 333, 8, 128
    for dtype, tol in ((torch.bfloat16, TOL_BF16), (torch.float16, TOL_FP16)):
        q = torch.randn(b, s_q, h, d, dtype=dtype, device="cuda")
        k = torch.randn(b, s_k, h, d, dtype=dtype, device="cuda")
        v = torch.randn(b, s_k, h, d, dtype=dtype, device="cuda")
        o = fmha_tile.attention(q, k, v)
        c.close("%s s_q %d s_k %d" % (str(dtype)[6:], s_q, s_k), o, sdpa_f32(q, k, v), tol)

    # causal, s_q == s_k: both alignments are the same mask
    x = [torch.randn(b, 256, h, d, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
    plan = fmha_tile.attention_plan(*x, causal=True)
    print("fwd_batch: kernel %s (%s pipeline)" % (plan["kernel"], plan["pipeline"]))
    o = fmha_tile.attention(*x, causal=True)
    c.close("bf16 causal s 256", o, sdpa_f32(*x, is_causal=True), TOL_BF16)

    # [b, s, h, d] views of [b, h, s, d] tensors, and an output of the same kind
    qh = torch.randn(b, h, 200, d, dtype=torch.bfloat16, device="cuda")
    kh = torch.randn(b, h, 260, d, dtype=torch.bfloat16, device="cuda")
    vh = torch.randn(b, h, 260, d, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(b, h, 200, d, dtype=torch.bfloat16, device="cuda").transpose(1, 2)
    q, k, v = qh.transpose(1, 2), kh.transpose(1, 2), vh.transpose(1, 2)
    o = fmha_tile.attention(q, k, v, out=out)
    c.true("out= is the tensor returned", o is out)
    c.close("bf16 strided views, out=", o, sdpa_f32(q, k, v), TOL_BF16)
    c.finish()


if __name__ == "__main__":
    main(run)
