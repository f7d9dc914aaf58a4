"""sweep.py - a parameter sweep: sequence length x head dim x KV page size,
timing fmha_tile's forward (contiguous K/V) and batch prefill (the same
problem over a paged KV cache) with CUDA events; prints a table and, with
matplotlib installed, writes a PNG.

    python examples/python/sweep.py                       # the default grid
    python examples/python/sweep.py --quick               # a smaller one
    python examples/python/sweep.py --seqlens 1024,8192 --hdims 128 --pages 1,16,1024 \
        --causal --out sweep_causal.png --json sweep.json

Grid (as DESIGN.md's benchmark grid): the total tokens (--tokens, default
16k) and the hidden size (--hidden, default 2048) are fixed, so batch =
tokens / seqlen and heads = hidden / hdim. For each point: the forward
fmha_tile.attention on [batch, seqlen, heads, hdim]; PyTorch SDPA on the
same tensors (its default backend; --no-sdpa to leave it out); and for each
page size fmha_tile.batch_prefill with the same queries, keys and values,
the keys laid out in NHD pages given out in shuffled order (SGLang table).
Each is warmed up, then timed --iters times (one event pair a call) and the
median taken; TFLOPS = 4 * batch * heads * seqlen^2 * hdim / time (halved
when causal). The prefill output is checked against the forward's (same
problem): a mismatch is flagged with "!" in the table. "x fwd" is prefill
time relative to the contiguous forward (the paging overhead).
"""
import argparse
import json
import math
import os
import sys


def ints(text):
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqlens", type=ints, default=[512, 1024, 2048, 4096, 8192])
    ap.add_argument("--hdims", type=ints, default=[64, 128, 256])
    ap.add_argument("--pages", type=ints, default=[16, 64, 1024], help="KV page sizes (powers of two)")
    ap.add_argument("--tokens", type=int, default=16384, help="batch * seqlen")
    ap.add_argument("--hidden", type=int, default=2048, help="heads * hdim")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-sdpa", action="store_true", help="leave PyTorch SDPA out")
    ap.add_argument("--quick", action="store_true", help="seqlens 512,2048, hdims 64,128, pages 16,1024, 5 iters")
    ap.add_argument("--out", default="sweep.png", help="the PNG (needs matplotlib); default sweep.png")
    ap.add_argument("--json", default=None, help="also write the results as JSON here")
    a = ap.parse_args()
    if a.quick:
        a.seqlens, a.hdims, a.pages, a.iters = [512, 2048], [64, 128], [16, 1024], 5
    return a


def timed(torch, fn, warmup, iters):
    """Median milliseconds of fn() over iters calls, each between two CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(iters)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in pairs)
    return ms[len(ms) // 2]


def paged(torch, k, v, page, seed):
    """k, v [b, s, h, d] -> NHD pools [pages, page, h, d] with each sequence's
    pages in shuffled places, and the SGLang table."""
    b, s, h, d = k.shape
    per = (s + page - 1) // page
    g = torch.Generator(device="cpu").manual_seed(seed)
    perm = torch.randperm(b * per, generator=g).to("cuda")
    kc = torch.empty(b * per, page, h, d, dtype=k.dtype, device="cuda")
    vc = torch.empty_like(kc)
    pad = per * page - s
    kp = torch.nn.functional.pad(k, (0, 0, 0, 0, 0, pad)) if pad else k
    vp = torch.nn.functional.pad(v, (0, 0, 0, 0, 0, pad)) if pad else v
    kc[perm] = kp.reshape(b * per, page, h, d)       # sequence i's page j -> perm[i * per + j]
    vc[perm] = vp.reshape(b * per, page, h, d)
    table = dict(kv_indptr=torch.arange(0, b * per + 1, per, dtype=torch.int32, device="cuda"),
                 kv_page_indices=perm.to(torch.int32),
                 kv_last_page_len=torch.full((b,), s - (per - 1) * page, dtype=torch.int32, device="cuda"))
    return kc, vc, table


def main():
    a = parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP sweep: PyTorch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("SKIP sweep: no CUDA GPU")
        return 0
    try:
        import fmha_tile
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        import fmha_tile
    import torch.nn.functional as F

    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    print("sweep: %s, torch %s, fmha_tile %s (%s)" % (torch.cuda.get_device_name(), torch.__version__,
                                                     fmha_tile.version(), fmha_tile.library_path()))
    print("sweep: %s, %s, tokens %d, hidden %d, median of %d calls"
          % (a.dtype, "causal" if a.causal else "non-causal", a.tokens, a.hidden, a.iters))
    head = "%5s %5s %6s %5s | %8s %7s" % ("hdim", "heads", "seqlen", "batch", "fwd ms", "TFLOPS")
    if not a.no_sdpa:
        head += " | %11s" % "sdpa TFLOPS"
    for p in a.pages:
        head += " | %-16s" % ("page %d TFLOPS" % p)
    print(head)
    print("-" * len(head))
    rows = []
    torch.manual_seed(0)
    for d in a.hdims:
        h = max(1, a.hidden // d)
        for s in a.seqlens:
            b = max(1, a.tokens // s)
            flops = 4.0 * b * h * s * s * d / (2 if a.causal else 1)
            tflops = (lambda ms: flops / (ms * 1e-3) / 1e12 if ms else None)
            q, k, v = (torch.randn(b, s, h, d, dtype=dtype, device="cuda") for _ in range(3))
            row = {"hdim": d, "heads": h, "seqlen": s, "batch": b, "causal": a.causal}
            try:
                o = fmha_tile.attention(q, k, v, causal=a.causal)
                row["fwd_ms"] = timed(torch, lambda: fmha_tile.attention(q, k, v, causal=a.causal),
                                      a.warmup, a.iters)
            except fmha_tile.FmhaError as e:
                o, row["fwd_ms"], row["fwd_error"] = None, None, str(e)
            line = "%5d %5d %6d %5d | %8s %7s" % (
                d, h, s, b, "%.3f" % row["fwd_ms"] if row["fwd_ms"] else "-",
                "%.0f" % tflops(row["fwd_ms"]) if row["fwd_ms"] else "-")
            if not a.no_sdpa:
                qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
                try:
                    row["sdpa_ms"] = timed(torch, lambda: F.scaled_dot_product_attention(
                        qt, kt, vt, is_causal=a.causal), a.warmup, a.iters)
                except RuntimeError as e:
                    row["sdpa_ms"], row["sdpa_error"] = None, str(e).splitlines()[0]
                line += " | %11s" % ("%.0f" % tflops(row["sdpa_ms"]) if row["sdpa_ms"] else "-")
            qp = q.reshape(b * s, h, d)
            cu = torch.arange(0, b * s + 1, s, dtype=torch.int32, device="cuda")
            row["prefill_ms"] = {}
            for p in a.pages:
                kc, vc, table = paged(torch, k, v, p, seed=s + p)

                def call():
                    return fmha_tile.batch_prefill(qp, kc, vc, cu, s, causal=a.causal, **table)
                try:
                    op = call()
                    bad = o is not None and \
                        ((op.float() - o.reshape(b * s, h, d).float()).norm() /
                         o.float().norm()).item() > 2e-2
                    ms = timed(torch, call, a.warmup, a.iters)
                    row["prefill_ms"][p] = ms
                    rel = (" x%.2f" % (ms / row["fwd_ms"])) if row["fwd_ms"] else ""
                    line += " | %-16s" % ("%.0f%s%s" % (tflops(ms), rel, " !" if bad else ""))
                    if bad:
                        row.setdefault("prefill_mismatch", []).append(p)
                except fmha_tile.FmhaError as e:
                    row["prefill_ms"][p] = None
                    line += " | %-16s" % ("- (%s)" % e.status_str)
                del kc, vc
            rows.append(row)
            print(line)
            del q, k, v, o
            torch.cuda.empty_cache()

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "dtype": a.dtype, "rows": rows}, f, indent=1)
        print("sweep: wrote %s" % a.json)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("sweep: matplotlib not installed: no plot")
        return 0
    fig, axes = plt.subplots(1, len(a.hdims), figsize=(5 * len(a.hdims), 4), squeeze=False)
    for ax, d in zip(axes[0], a.hdims):
        sub = [r for r in rows if r["hdim"] == d]
        xs = [r["seqlen"] for r in sub]

        def tf(r, ms):
            return 4.0 * r["batch"] * r["heads"] * r["seqlen"] ** 2 * d / (2 if a.causal else 1) / \
                (ms * 1e-3) / 1e12 if ms else math.nan
        ax.plot(xs, [tf(r, r["fwd_ms"]) for r in sub], "o-", label="fmha_tile forward")
        if not a.no_sdpa:
            ax.plot(xs, [tf(r, r.get("sdpa_ms")) for r in sub], "s--", label="torch SDPA")
        for p in a.pages:
            ax.plot(xs, [tf(r, r["prefill_ms"].get(p)) for r in sub], "^:", label="batch prefill, page %d" % p)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("seqlen")
        ax.set_ylabel("TFLOPS")
        ax.set_title("hdim %d, %d heads, %s%s" % (d, max(1, a.hidden // d), a.dtype, ", causal" if a.causal else ""))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(torch.cuda.get_device_name())
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print("sweep: wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
