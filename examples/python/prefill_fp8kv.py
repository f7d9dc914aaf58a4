"""prefill_fp8kv.py - batch prefill over an FP8 (e4m3) paged KV cache with
bf16 queries and a bf16 output.

    o = fmha_tile.batch_prefill(q_bf16, k_cache_fp8, v_cache_fp8, cu_seqlens_q, max_seqlen_q,
                                block_table=..., seqlens_k=...,
                                k_descale=kd, v_descale=vd)

Caches are torch.float8_e4m3fn in a LINEAR layout (NHD or HND). Descales
follow real = stored * descale and come either per tensor (a number, or a
1-element float32 tensor) or per page and KV head (float32 [num_pages,
nheads_k]: each page quantised with its own range, as a cache that is
filled page by page). Here K/V start in fp32, are quantised with the
descale amax / 448 (per tensor, then per page and head), and the reference
is the fp32 attention on the dequantised values (codes * descale);
tolerance 3e-2 rel-L2 (fp8 inputs). Slots no sequence owns hold NaN.
"""
from _common import (setup, main, Checker, paged_cache, page_table, prefix_sums,
                     varlen_reference, TOL_FP8)

E4M3_MAX = 448.0


def run():
    torch, fmha_tile = setup("prefill_fp8kv")
    if not hasattr(torch, "float8_e4m3fn"):
        from _common import skip
        skip("prefill_fp8kv", "this PyTorch has no torch.float8_e4m3fn")
    fp8 = torch.float8_e4m3fn
    c = Checker("prefill_fp8kv")
    h, hk, d, page = 8, 2, 128, 16
    lens_q, lens_k = [37, 1, 100], [300, 1, 164]
    # fp32 K/V in pages (NaN in unowned slots), per sequence lists for the reference
    Ks = [torch.randn(n, hk, d, device="cuda") * 3 for n in lens_k]
    Vs = [torch.randn(n, hk, d, device="cuda") for n in lens_k]
    kf, vf, pages = paged_cache(torch, Ks, Vs, page, "NHD")           # fp32 [pages, page, hk, d]
    q = torch.randn(sum(lens_q), h, d, dtype=torch.bfloat16, device="cuda")
    cu_q = prefix_sums(torch, lens_q)
    table = page_table(torch, pages, lens_k, page, "vllm")

    def dequantised(codes, descales):
        """Each sequence's K or V [s_k, hk, d] from an fp8 pool [pages, page, hk, d]
        and descales [pages, hk]: codes * descale, the sequence's pages in order."""
        real = codes.float() * descales[:, None, :, None]
        return [real[ids].reshape(-1, hk, d)[:n] for ids, n in zip(pages, lens_k)]

    # per tensor: one descale for K, one for V
    kd = kf.nan_to_num(0.0).abs().amax().item() / E4M3_MAX
    vd = vf.nan_to_num(0.0).abs().amax().item() / E4M3_MAX
    k8, v8 = (kf / kd).to(fp8), (vf / vd).to(fp8)
    o = fmha_tile.batch_prefill(q, k8, v8, cu_q, max(lens_q), causal=True, k_descale=kd,
                                v_descale=vd, **table)
    ones = torch.ones(kf.shape[0], hk, device="cuda")
    ref = varlen_reference(q, dequantised(k8, ones * kd), dequantised(v8, ones * vd),
                           lens_q, causal=True)[0]
    c.true("output dtype bf16", o.dtype == torch.bfloat16, str(o.dtype))
    c.close("per-tensor descales (%.3g, %.3g)" % (kd, vd), o, ref, TOL_FP8)

    # per page and KV head: descales [num_pages, nheads_k]
    kdp = (kf.nan_to_num(0.0).abs().amax(dim=(1, 3)) / E4M3_MAX).clamp_min(1e-6)
    vdp = (vf.nan_to_num(0.0).abs().amax(dim=(1, 3)) / E4M3_MAX).clamp_min(1e-6)
    k8 = (kf / kdp[:, None, :, None]).to(fp8)
    v8 = (vf / vdp[:, None, :, None]).to(fp8)
    o = fmha_tile.batch_prefill(q, k8, v8, cu_q, max(lens_q), causal=True, k_descale=kdp,
                                v_descale=vdp, **table)
    ref = varlen_reference(q, dequantised(k8, kdp), dequantised(v8, vdp),
                           lens_q, causal=True)[0]
    c.close("per-page descales [%d, %d]" % tuple(kdp.shape), o, ref, TOL_FP8)
    plan = fmha_tile.batch_prefill_plan(q, k8, v8, cu_q, max(lens_q), k_descale=kdp, v_descale=vdp,
                                        **table)
    print("prefill_fp8kv: kernel %s (%s)" % (plan["kernel"], plan["why"]))
    c.finish()


if __name__ == "__main__":
    main(run)
