"""fwd_masks.py - causal masks in both alignments and sliding windows.

fmha_tile's causal= and window=(left, right) follow FlashAttention >= 2.1:
bottom-right aligned, so with s_q queries and s_k keys query i sees key j
when i + s_k - s_q - left <= j <= i + s_k - s_q + right (-1: unbounded;
causal sets right = 0). That is prefill with a cached prefix: the last
query row is aligned with the last key. When s_q > s_k the first
s_q - s_k rows see no key: O = 0 and LSE = -inf, never NaN.

Top-left alignment (query i sees keys 0..i, as SDPA's is_causal) is the C
API's FMHA_MASK_TOP_LEFT; from Python, with s_q <= s_k, it is the causal
mask over the first s_q keys: attention(q, k[:, :s_q], v[:, :s_q],
causal=True), which is what this example does (checked against SDPA's
is_causal on all s_k keys).

Cases (bf16, b 2, h 8, d 128, against the fp32 reference):
  causal bottom-right, s_q 200 > s_k 150 (50 rows see nothing)
  causal top-left, s_q 128 < s_k 300
  sliding window (64, 0), s_q 128, s_k 517; symmetric window (32, 32)
"""
import math

from _common import setup, main, Checker, reference, sdpa_f32, TOL_BF16


def run():
    torch, fmha_tile = setup("fwd_masks")
    c = Checker("fwd_masks")

    def qkv(s_q, s_k, h=8, d=128):
        return (torch.randn(2, s_q, h, d, dtype=torch.bfloat16, device="cuda"),
                torch.randn(2, s_k, h, d, dtype=torch.bfloat16, device="cuda"),
                torch.randn(2, s_k, h, d, dtype=torch.bfloat16, device="cuda"))

    # causal, bottom-right, more queries than keys
    q, k, v = qkv(200, 150)
    o, lse = fmha_tile.attention(q, k, v, causal=True, return_lse=True)
    ref_o, ref_lse = reference(q, k, v, causal=True)
    c.close("causal bottom-right s_q 200 s_k 150: O", o, ref_o, TOL_BF16)
    c.lse("causal bottom-right: LSE", lse, ref_lse)
    c.true("rows 0..49 see no key: O = 0, LSE = -inf",
           bool((o[:, :50] == 0).all()) and bool((lse[:, :, :50] == -math.inf).all()))

    # causal, top-left: the causal mask over the first s_q keys
    q, k, v = qkv(128, 300)
    o = fmha_tile.attention(q, k[:, :128], v[:, :128], causal=True)
    c.close("causal top-left s_q 128 s_k 300 (vs SDPA is_causal)", o,
            sdpa_f32(q, k, v, is_causal=True), TOL_BF16)

    # sliding windows
    q, k, v = qkv(128, 517)
    for window in ((64, 0), (32, 32)):
        o, lse = fmha_tile.attention(q, k, v, window=window, return_lse=True)
        ref_o, ref_lse = reference(q, k, v, window=window)
        c.close("window %s s_q 128 s_k 517: O" % (window,), o, ref_o, TOL_BF16)
        c.lse("window %s: LSE" % (window,), lse, ref_lse)
    c.finish()


if __name__ == "__main__":
    main(run)
