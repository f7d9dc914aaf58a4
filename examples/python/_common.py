"""What the Python examples share: the setup (torch, a CUDA GPU and the
library, or a SKIP line and exit 0), a plain fp32 PyTorch reference of
attention, paged-cache builders and a small checker whose last line is
valid:y or valid:n.

Every example imports it as `from _common import ...` (the examples run as
scripts from this folder; Python puts the script's folder on sys.path).
Nothing here is part of the fmha_tile package: it is example scaffolding.

Tolerances (rel-L2 of the output against the fp32 reference, as the tests):
bf16 1e-2, fp16 2e-3, fp8 inputs 3e-2 (against the dequantised inputs);
LSE 2e-3 absolute; gradients bf16 2e-2, fp16 5e-3.
"""
import math
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

TOL_BF16, TOL_FP16, TOL_FP8 = 1e-2, 2e-3, 3e-2
LSE_TOL = 2e-3


# ---- setup ------------------------------------------------------------------------------------
def skip(name, why):
    print("SKIP %s: %s" % (name, why))
    sys.exit(0)


def setup(name, sm90=False):
    """-> (torch, fmha_tile). Exits 0 with a SKIP line when torch, a CUDA GPU
    or the shared library is missing (or, with sm90=True, when the GPU is not
    a Hopper sm_90). The package is taken from PYTHONPATH, else from this
    source tree's python/."""
    try:
        import torch
    except ImportError:
        skip(name, "PyTorch is not installed")
    if not torch.cuda.is_available():
        skip(name, "no CUDA GPU")
    try:
        import fmha_tile
    except ImportError:
        sys.path.insert(0, os.path.join(REPO, "python"))
        import fmha_tile
    try:
        fmha_tile.version()
    except fmha_tile.FmhaLibraryError as e:
        skip(name, "libfmha_tile.so not loaded (make lib, or set FMHA_TILE_LIB): %s"
             % str(e).splitlines()[0])
    if sm90 and torch.cuda.get_device_capability() != (9, 0):
        skip(name, "needs a Hopper (sm_90) GPU, this is sm_%d%d" % torch.cuda.get_device_capability())
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False   # an fp32 reference in fp32
    torch.backends.cudnn.allow_tf32 = False
    return torch, fmha_tile


def main(fn):
    """Runs fn(); an exception is printed and counts as invalid (valid:n)."""
    try:
        fn()
    except SystemExit:
        raise
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print("valid:n")
        sys.exit(1)


# ---- checks ------------------------------------------------------------------------------------
def rel_l2(got, ref):
    """||got - ref|| / ||ref|| in fp32 (the absolute error when ref is 0)."""
    got, ref = got.float(), ref.float()
    den = ref.norm().item()
    num = (got - ref).norm().item()
    return num / den if den > 0 else num


class Checker(object):
    """Collects named checks, prints one line each, and finish() prints
    valid:y / valid:n as the last line (exit status 0 / 1)."""

    def __init__(self, name):
        self.name = name
        self.ok = True

    def _line(self, ok, what, detail):
        self.ok = self.ok and ok
        print("%s: %-52s %s%s" % (self.name, what, detail, "" if ok else "  <-- FAIL"))
        return ok

    def close(self, what, got, ref, tol):
        """got within rel-L2 tol of ref, every element finite."""
        import torch
        finite = bool(torch.isfinite(got.float()).all())
        err = rel_l2(got, ref) if finite else float("inf")
        return self._line(finite and err <= tol, what,
                          "rel-L2 %.2e (tol %.0e)%s" % (err, tol, "" if finite else " NOT FINITE"))

    def lse(self, what, got, ref, tol=LSE_TOL):
        """LSE: -inf exactly where the reference has -inf, else within tol."""
        import torch
        fin = torch.isfinite(ref)
        same = torch.equal(torch.isfinite(got), fin) and bool((got[~fin] == ref[~fin]).all())
        err = (got[fin] - ref[fin]).abs().max().item() if bool(fin.any()) else 0.0
        return self._line(same and err <= tol, what, "max |err| %.2e (tol %.0e)%s"
                          % (err, tol, "" if same else " -inf pattern differs"))

    def equal(self, what, a, b):
        """Bitwise equal tensors."""
        import torch
        return self._line(torch.equal(a, b), what, "bitwise equal" if torch.equal(a, b) else "differ")

    def true(self, what, cond, detail=""):
        return self._line(bool(cond), what, detail or ("yes" if cond else "no"))

    def finish(self):
        print("valid:y" if self.ok else "valid:n")
        sys.exit(0 if self.ok else 1)


# ---- the reference -----------------------------------------------------------------------------
def visible(torch, s_q, s_k, causal=False, window=(-1, -1), top_left=False, device="cuda"):
    """[s_q, s_k] bool: query i sees key j. FlashAttention's window (left,
    right), -1 unbounded, causal = right 0; bottom-right aligned (shifted by
    s_k - s_q) unless top_left."""
    left, right = window
    if causal:
        right = 0
    i = torch.arange(s_q, device=device)[:, None] + (0 if top_left else s_k - s_q)
    j = torch.arange(s_k, device=device)[None, :]
    m = torch.ones(s_q, s_k, dtype=torch.bool, device=device)
    if left >= 0:
        m &= j >= i - left
    if right >= 0:
        m &= j <= i + right
    return m


def reference(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi=None, scale=None,
              sinks=None, top_left=False, bias=None):
    """softmax(scale * q k^T [capped, ALiBi, bias, masked, sink column]) v in fp32,
    differentiable in q, k, v (and sinks, bias).

    q [b, s_q, h, d], k and v [b, s_k, h_k, d] of any float dtype (upcast);
    GQA by repeating each KV head h // h_k times. alibi: fp32 [h] or [b, h]
    slopes, bias -slope * |i + s_k - s_q - j|. sinks: fp32 [h] logits of one
    extra key with no value. bias: an elementwise bias broadcast to
    [b, h, s_q, s_k], added after the cap (its gradient sums over its
    broadcast dims). -> (O fp32 [b, s_q, h, d], LSE fp32 [b, h, s_q]);
    a row that sees no key gets O = 0 and LSE = -inf (its sink with sinks)."""
    import torch
    b, s_q, h, d = q.shape
    s_k, hk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    qf = q.float().transpose(1, 2)                                   # [b, h, s_q, d]
    kf = k.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)  # [b, h, s_k, d]
    vf = v.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi is not None:
        slopes = alibi.float().reshape(-1, h)[:, :, None, None]     # [1 or b, h, 1, 1]
        i = torch.arange(s_q, device=q.device)[:, None]
        j = torch.arange(s_k, device=q.device)[None, :]
        s = s - slopes * (i + s_k - s_q - j).abs().float()
    if bias is not None:
        s = s + bias.float()
    s = s.masked_fill(~visible(torch, s_q, s_k, causal, window, top_left, q.device), -math.inf)
    if sinks is not None:
        s = torch.cat([s, sinks.float().view(1, h, 1, 1).expand(b, h, s_q, 1)], dim=-1)
    if s.shape[-1] == 0:
        return (torch.zeros(b, s_q, h, v.shape[-1], device=q.device),
                torch.full((b, h, s_q), -math.inf, device=q.device))
    lse = torch.logsumexp(s, dim=-1)
    # rows with LSE -inf see nothing: subtract 0 there so that P = exp(-inf) = 0
    base = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    p = torch.exp(s - base[..., None])[..., :s_k]
    return torch.matmul(p, vf).transpose(1, 2), lse


def sdpa_f32(q, k, v, **kw):
    """torch.nn.functional.scaled_dot_product_attention on fp32 copies of
    [b, s, h, d] tensors with the math backend (GQA by repeating K/V heads).
    Note: SDPA's is_causal is top-left aligned. -> O fp32 [b, s_q, h, d]."""
    import torch
    import torch.nn.functional as F
    h, hk = q.shape[2], k.shape[2]
    qt = q.float().transpose(1, 2)
    kt = k.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    vt = v.float().transpose(1, 2).repeat_interleave(h // hk, dim=1)
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = sdpa_kernel([SDPBackend.MATH])
    except ImportError:                                              # torch < 2.3
        ctx = torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True,
                                             enable_mem_efficient=False)
    with ctx:
        o = F.scaled_dot_product_attention(qt, kt, vt, **kw)
    return o.transpose(1, 2)


def alibi_slopes(torch, h, batch=None):
    """The ALiBi paper's slopes 2^(-8 (i+1) / h), fp32 [h] (or [batch, h],
    scaled per sequence)."""
    s = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], device="cuda")
    if batch is None:
        return s
    return (s[None, :] * torch.linspace(0.5, 1.5, batch, device="cuda")[:, None]).contiguous()


def prefix_sums(torch, lens):
    """int32 [len(lens) + 1] prefix sums on the GPU (cu_seqlens, kv_indptr)."""
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32, device="cuda")


# ---- paged KV caches ---------------------------------------------------------------------------
def paged_cache(torch, Ks, Vs, page, layout="NHD", spare=3, seed=0, fill=float("nan")):
    """Scatters each sequence's K and V ([s_k, h_k, d], one list entry a
    sequence) into pages given out in shuffled order, with `spare` pages
    nobody uses; every slot no sequence owns holds `fill` (NaN: any read of
    it would show). -> (k_cache, v_cache, pages: a list of page indices per
    sequence). Layouts: "NHD" [pages, page, h_k, d], "HND" [pages, h_k,
    page, d], "VECTORIZED" K [pages, h_k, d/8, page, 8] and V [pages, h_k,
    page/8, d, 8] (16-bit dtypes: 8 elements make 16 bytes)."""
    hk, d = Ks[0].shape[1], Ks[0].shape[2]
    counts = [(K.shape[0] + page - 1) // page for K in Ks]
    n = sum(counts) + spare
    g = torch.Generator(device="cpu").manual_seed(seed)
    order = torch.randperm(n, generator=g).tolist()
    pages, at = [], 0
    for c in counts:
        pages.append(order[at:at + c])
        at += c
    kp = torch.full((n, page, hk, d), fill, dtype=Ks[0].dtype, device="cuda")
    vp = torch.full((n, page, hk, d), fill, dtype=Vs[0].dtype, device="cuda")
    for K, V, ids in zip(Ks, Vs, pages):
        s = K.shape[0]
        for t0 in range(0, s, page):
            p = ids[t0 // page]
            kp[p, :min(page, s - t0)] = K[t0:t0 + page]
            vp[p, :min(page, s - t0)] = V[t0:t0 + page]
    if layout == "NHD":
        return kp, vp, pages
    if layout == "HND":
        return kp.permute(0, 2, 1, 3).contiguous(), vp.permute(0, 2, 1, 3).contiguous(), pages
    if layout == "VECTORIZED":
        kc = kp.reshape(n, page, hk, d // 8, 8).permute(0, 2, 3, 1, 4).contiguous()
        vc = vp.reshape(n, page // 8, 8, hk, d).permute(0, 3, 1, 4, 2).contiguous()
        return kc, vc, pages
    raise ValueError("layout %r" % layout)


def page_table(torch, pages, lens, page, kind):
    """The page table of batch_prefill / attention_with_kvcache as keyword
    arguments. kind "sglang": kv_indptr [b+1] (prefix sums of the page
    counts), kv_page_indices (all lists end to end), kv_last_page_len [b]
    (1..page). kind "vllm": block_table [b, max_pages] (rows padded with an
    index nobody may read) and seqlens_k [b]."""
    if kind == "sglang":
        flat = [p for ids in pages for p in ids]
        return dict(kv_indptr=prefix_sums(torch, [len(ids) for ids in pages]),
                    kv_page_indices=torch.tensor(flat or [0], dtype=torch.int32, device="cuda"),
                    kv_last_page_len=torch.tensor([(n - 1) % page + 1 if n else 1 for n in lens],
                                                  dtype=torch.int32, device="cuda"))
    if kind == "vllm":
        width = max(len(ids) for ids in pages) + 1
        bt = torch.full((len(pages), width), 1 << 20, dtype=torch.int32)   # past the end: never read
        for i, ids in enumerate(pages):
            if ids:
                bt[i, :len(ids)] = torch.tensor(ids, dtype=torch.int32)
        return dict(block_table=bt.cuda(), seqlens_k=torch.tensor(lens, dtype=torch.int32, device="cuda"))
    raise ValueError("kind %r" % kind)


def varlen_reference(q, Ks, Vs, lens_q, **kw):
    """Packed queries q [total_q, h, d] (sequence i: lens_q[i] rows) against
    per-sequence K/V [s_k, h_k, d]: reference() per sequence, rows
    concatenated. -> (O fp32 [total_q, h, d], LSE fp32 [h, total_q])."""
    import torch
    outs, lses, at = [], [], 0
    for n, K, V in zip(lens_q, Ks, Vs):
        o, l = reference(q[at:at + n][None], K[None], V[None], **kw)
        outs.append(o[0])
        lses.append(l[0])
        at += n
    return torch.cat(outs, 0), torch.cat(lses, 1)
