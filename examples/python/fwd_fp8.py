"""fwd_fp8.py - the FP8 (e4m3) forward on Hopper: q, k and v
torch.float8_e4m3fn with per-tensor descales, a bf16 output.

    o = fmha_tile.attention(q8, k8, v8, causal=True,
                            q_descale=qd, k_descale=kd, v_descale=vd)   # 1-element fp32 tensors

real = stored * descale. Here bf16-range inputs are quantised with the
descale amax / 448, and the reference is the fp32 attention on the
dequantised values (codes * descale). The kernel also rounds the softmax
probabilities P to e4m3 for the P V product (FlashAttention-3 does the
same), which costs about 3e-2 rel-L2 against this exact reference: the
tolerance is 6e-2. The plan names an fmha_fwd_..._fp8_ kernel on the wgmma
pipeline. Hopper (sm_90) only: elsewhere the library has no fp8 kernel and
this example prints SKIP.

V given K-major: vt = fmha_tile.fp8_v_kmajor(v8) writes V^T once (e.g.
when a cache is filled), and attention(q8, k8, vt, v_kmajor=True, ...)
then copies V^T tiles instead of transposing V in the kernel (head dims
128 and 256): the same output bits, faster at long sequences.
"""
from _common import setup, main, Checker, reference, skip

E4M3_MAX = 448.0
TOL = 6e-2


def run():
    torch, fmha_tile = setup("fwd_fp8", sm90=True)
    if not hasattr(torch, "float8_e4m3fn"):
        skip("fwd_fp8", "this PyTorch has no torch.float8_e4m3fn")
    c = Checker("fwd_fp8")
    b, s_q, s_k, h, hk, d = 2, 300, 517, 8, 2, 128

    def quantise(x):
        ds = x.abs().amax() / E4M3_MAX                       # fp32 0-dim tensor on the GPU
        codes = (x / ds).to(torch.float8_e4m3fn)
        return codes, ds.reshape(1), codes.float() * ds      # codes, descale [1], real values

    q8, qd, qr = quantise(torch.randn(b, s_q, h, d, device="cuda"))
    k8, kd, kr = quantise(torch.randn(b, s_k, hk, d, device="cuda"))
    v8, vd, vr = quantise(torch.randn(b, s_k, hk, d, device="cuda"))
    descales = dict(q_descale=qd, k_descale=kd, v_descale=vd)
    plan = fmha_tile.attention_plan(q8, k8, v8, causal=True, **descales)
    print("fwd_fp8: kernel %s (%s pipeline)" % (plan["kernel"], plan["pipeline"]))
    c.true("an fp8 kernel", "_fp8_" in plan["kernel"], plan["kernel"])
    for causal in (False, True):
        o, lse = fmha_tile.attention(q8, k8, v8, causal=causal, return_lse=True, **descales)
        ref_o, ref_lse = reference(qr, kr, vr, causal=causal)
        c.true("output bf16 [b, s_q, h, d]", o.dtype == torch.bfloat16 and o.shape == (b, s_q, h, d))
        c.close("causal=%s: O vs fp32 on dequantised inputs" % causal, o, ref_o, TOL)
        c.lse("causal=%s: LSE" % causal, lse, ref_lse, 2e-2)
        vt = fmha_tile.fp8_v_kmajor(v8)                      # [b, hk, d, keys rounded up to 16]
        o_vt = fmha_tile.attention(q8, k8, vt, causal=causal, v_kmajor=True, **descales)
        c.true("causal=%s: V^T given, the same output bits" % causal, torch.equal(o_vt, o))
    c.finish()


if __name__ == "__main__":
    main(run)
