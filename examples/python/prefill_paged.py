"""prefill_paged.py - batch prefill over a paged KV cache: packed new queries
of several sequences attend to each sequence's keys, which live in pages of
a shared pool (SGLang / vLLM / FlashInfer style).

    o = fmha_tile.batch_prefill(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q,
                                kv_indptr=..., kv_page_indices=..., kv_last_page_len=...,
                                kv_layout="NHD", causal=True)

q [total_q, h, d] packed as in attention_varlen. Page tables:
  SGLang 1-D: kv_indptr [b+1] (prefix sums of page counts), kv_page_indices
              (every sequence's pages end to end), kv_last_page_len [b] (1..page)
  vLLM 2-D:   block_table [b, max_pages] (int32, any row stride) + seqlens_k [b]
Layouts: LINEAR "NHD" [pages, page, h_k, d] or "HND" [pages, h_k, page, d];
"VECTORIZED" (vLLM v0 / CK) K [pages, h_k, d/8, page, 8], V [pages, h_k,
page/8, d, 8]. Page size: a power of two. causal is bottom-right aligned:
the new tokens are the last of each sequence (the rest is the cached prefix).

Each case scatters random K/V into shuffled pages, with NaN in every slot no
sequence owns (a read past a sequence's end would show), and compares with
the fp32 reference on each sequence's contiguous K/V.
"""
from _common import (setup, main, Checker, paged_cache, page_table, prefix_sums,
                     varlen_reference, TOL_BF16, TOL_FP16)

CASES = [
    # table,   layout,       page, dtype
    ("sglang", "NHD",        16,   "bf16"),
    ("vllm",   "HND",        1,    "bf16"),
    ("sglang", "VECTORIZED", 16,   "fp16"),
    ("vllm",   "VECTORIZED", 64,   "bf16"),
    ("vllm",   "NHD",        1024, "fp16"),
]


def run():
    torch, fmha_tile = setup("prefill_paged")
    c = Checker("prefill_paged")
    h, hk, d = 8, 2, 128
    lens_q = [37, 1, 100]          # new tokens per sequence
    lens_k = [300, 1, 164]         # keys per sequence: cached prefix + the new tokens
    for table, layout, page, dt in CASES:
        dtype, tol = (torch.bfloat16, TOL_BF16) if dt == "bf16" else (torch.float16, TOL_FP16)
        Ks = [torch.randn(n, hk, d, dtype=dtype, device="cuda") for n in lens_k]
        Vs = [torch.randn(n, hk, d, dtype=dtype, device="cuda") for n in lens_k]
        k_cache, v_cache, pages = paged_cache(torch, Ks, Vs, page, layout)
        q = torch.randn(sum(lens_q), h, d, dtype=dtype, device="cuda")
        cu_q = prefix_sums(torch, lens_q)
        o, lse = fmha_tile.batch_prefill(q, k_cache, v_cache, cu_q, max(lens_q), kv_layout=layout,
                                         causal=True, return_lse=True,
                                         **page_table(torch, pages, lens_k, page, table))
        ref_o, ref_lse = varlen_reference(q, Ks, Vs, lens_q, causal=True)
        what = "%s table, %s, page %d, %s" % (table, layout, page, dt)
        c.close(what + ": O", o, ref_o, tol)
        c.lse(what + ": LSE", lse, ref_lse)
    plan = fmha_tile.batch_prefill_plan(q, k_cache, v_cache, cu_q, max(lens_q), kv_layout=layout,
                                        **page_table(torch, pages, lens_k, page, table))
    print("prefill_paged: last case's kernel %s (%s)" % (plan["kernel"], plan["why"]))
    c.finish()


if __name__ == "__main__":
    main(run)
