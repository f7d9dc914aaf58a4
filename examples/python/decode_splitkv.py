"""decode_splitkv.py - decode: a few new queries per sequence against a long
KV cache, the keys split over several thread blocks (split-KV) and the
partial results combined by their LSE.

    o = fmha_tile.attention_with_kvcache(q, k_cache, v_cache, seqlens_k,
                                         num_splits=0)           # 0: the library chooses
    plan = fmha_tile.attention_with_kvcache(..., plan_only=True)  # kernel, splits, workspace

q [b, s_q, h, d]; a contiguous cache [b_cache, capacity, h_k, d] with
seqlens_k int32 [b] (keys of each sequence) and optionally cache_batch_idx
(sequence i reads cache entry cache_batch_idx[i]); or NHD pages with an
SGLang / vLLM page table (then max_seqlen_k is required). GQA heads are
packed so that one block serves all query heads of a KV head.
The split-KV workspace is allocated by torch (caching allocator), so the
call is CUDA-graph capturable.

Checked against the fp32 reference on each sequence's keys: the library's
choice of splits, 1 split and 4 splits (all must agree), contiguous with
cache_batch_idx, and paged (SGLang table, page 16).
"""
from _common import (setup, main, Checker, reference, paged_cache, page_table, TOL_BF16)


def run():
    torch, fmha_tile = setup("decode_splitkv")
    c = Checker("decode_splitkv")
    b, h, hk, d = 4, 32, 8, 128
    lens = [1000, 4, 300, 2048]     # s_q 4 over 4 keys: causal row 0 sees one key
    cap = 2048 + 16
    Ks = [torch.randn(n, hk, d, dtype=torch.bfloat16, device="cuda") for n in lens]
    Vs = [torch.randn(n, hk, d, dtype=torch.bfloat16, device="cuda") for n in lens]
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")

    # contiguous cache of b + 2 entries, sequence i in entry cbi[i]
    cbi = [2, 0, 5, 3]
    k_cache = torch.full((b + 2, cap, hk, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    v_cache = torch.full_like(k_cache, float("nan"))
    for i, e in enumerate(cbi):
        k_cache[e, :lens[i]], v_cache[e, :lens[i]] = Ks[i], Vs[i]
    cbi_t = torch.tensor(cbi, dtype=torch.int32, device="cuda")

    for s_q in (1, 4):
        q = torch.randn(b, s_q, h, d, dtype=torch.bfloat16, device="cuda")
        causal = s_q > 1                       # the s_q new tokens see each other causally
        outs, lses = [], []
        for i in range(b):
            o_i, l_i = reference(q[i:i + 1], Ks[i][None], Vs[i][None], causal=causal)
            outs.append(o_i)
            lses.append(l_i)
        ref_o, ref_lse = torch.cat(outs), torch.cat(lses)
        plan = fmha_tile.attention_with_kvcache(q, k_cache, v_cache, seqlens, cache_batch_idx=cbi_t,
                                                causal=causal, plan_only=True)
        print("decode_splitkv: s_q %d: kernel %s, %d splits (library's choice), workspace %d bytes"
              % (s_q, plan["kernel"], plan["num_splits"], plan["workspace_size"]))
        for splits in (0, 1, 4):
            o, lse = fmha_tile.attention_with_kvcache(q, k_cache, v_cache, seqlens,
                                                      cache_batch_idx=cbi_t, causal=causal,
                                                      num_splits=splits, return_lse=True)
            c.close("contiguous, s_q %d, num_splits %d: O" % (s_q, splits), o, ref_o, TOL_BF16)
            c.lse("contiguous, s_q %d, num_splits %d: LSE" % (s_q, splits), lse, ref_lse)

    # paged: NHD pages of 16, SGLang table (its lengths come from the table)
    kp, vp, pages = paged_cache(torch, Ks, Vs, 16, "NHD")
    q = torch.randn(b, 1, h, d, dtype=torch.bfloat16, device="cuda")
    ref_o = torch.cat([reference(q[i:i + 1], Ks[i][None], Vs[i][None])[0] for i in range(b)])
    o = fmha_tile.attention_with_kvcache(q, kp, vp, None, max_seqlen_k=max(lens), num_splits=4,
                                         **page_table(torch, pages, lens, 16, "sglang"))
    c.close("paged (SGLang, page 16), num_splits 4", o, ref_o, TOL_BF16)
    c.finish()


if __name__ == "__main__":
    main(run)
