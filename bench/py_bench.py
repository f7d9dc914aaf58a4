#!/usr/bin/env python3
"""py_bench: fmha_tile (Python binding) and PyTorch SDPA flash / cuDNN, one process.

Times fmha_tile.attention (libfmha_tile.so through the ctypes package in
python/fmha_tile) and torch.nn.functional.scaled_dot_product_attention with the
FLASH_ATTENTION and CUDNN_ATTENTION backends on the grid of the design brief
(section 7): bf16, total tokens 16384 (batch = 16384 / seqlen), hidden 2048
(hdim 64/128/256 with 32/16/8 heads), seqlen 512..16k, causal and not, forward.

Layouts: fmha_tile gets contiguous [b, s, h, d] tensors (its and FlashAttention's
native layout) and a preallocated out= per input set, so the timed calls allocate
nothing; SDPA gets contiguous [b, h, s, d] (what it expects).

FLOPs: 4 * b * h * s * s * d, halved for causal. Timing: one pair of CUDA events
around each call on the current stream, warm-up calls first (about 0.05 s), then
the median of at least 20 timed calls (more for short calls, about 0.3 s per
point); calls rotate among input sets whose total exceeds twice the L2 (at least
2). Each point also checks fmha_tile's output against SDPA's (rel-L2 on the first
input set; above 2e-2 is flagged). The host cost of one fmha_tile.attention call
(argument checks, ctypes, launch; no GPU wait) is measured on a tiny problem and
reported in the JSON's "meta".

Output:
  - one line per point on stdout;
  - JSON (--json, default build/bench/py_bench.json):
      {"meta": {...}, "results": [{"d", "s", "causal", "b", "h", "kernel", "ms",
       "tflops", "flash_fwd", "cudnn_fwd", "flash_ms", "cudnn_ms", "rel_l2_vs_sdpa"}]}
    ("tflops" is fmha_tile's; "flash_fwd"/"cudnn_fwd" are TFLOPS; null where a
    backend failed). bench/report.py reads it as both of its inputs:
      python3 bench/report.py build/bench/py_bench.json build/bench/py_bench.json
  - PNG plots (--plot-dir, default the JSON's folder): py_bench_noncausal.png and
    py_bench_causal.png, TFLOPS against seqlen, one panel per head dim, one line
    per backend. Needs matplotlib; without it the plots are skipped with a message.

  python3 bench/py_bench.py [--hdim 64,128,256] [--seqlen 512,1k,...,16k] [--causal 0,1]
                            [--quick] [--json FILE] [--plot-dir DIR] [--no-plot]
                            [--backends fmha_tile,flash,cudnn]

--quick: hdim 128, seqlen 2k and 8k. The library is found as fmha_tile finds it
($FMHA_TILE_LIB, else build/libfmha_tile.so of this tree; `make lib` builds it).
Without torch or a GPU it prints a SKIP line and exits 0; exit status 1 when a
point fails (a backend error for fmha_tile, or an output mismatch).
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from sdpa_bench import time_calls  # noqa: E402  (one timing loop for every backend)

TOKENS = 16384
HIDDEN = 2048
CHECK_TOL = 2e-2
SDPA_BACKENDS = (("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"))
ALL_BACKENDS = ("fmha_tile", "flash", "cudnn")


def parse_list(text):
    """'512,1k,2048' -> [512, 1024, 2048]"""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise argparse.ArgumentTypeError("empty item in %r" % text)
        mult = 1
        if item[-1] in "kK":
            mult, item = 1024, item[:-1]
        try:
            out.append(int(item) * mult)
        except ValueError:
            raise argparse.ArgumentTypeError("not an integer list: %r" % text)
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hdim", type=parse_list, default=None)
    ap.add_argument("--seqlen", type=parse_list, default=None)
    ap.add_argument("--causal", type=parse_list, default=None)
    ap.add_argument("--quick", action="store_true", help="hdim 128, seqlen 2k and 8k")
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "py_bench.json"))
    ap.add_argument("--plot-dir", default=None, help="where the PNGs go (default: the JSON's folder)")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--backends", default=",".join(ALL_BACKENDS),
                    help="comma list of fmha_tile, flash, cudnn")
    a = ap.parse_args(argv)
    if a.hdim is None:
        a.hdim = [128] if a.quick else [64, 128, 256]
    if a.seqlen is None:
        a.seqlen = [2048, 8192] if a.quick else [512, 1024, 2048, 4096, 8192, 16384]
    if a.causal is None:
        a.causal = [0, 1]
    for d in a.hdim:
        if d <= 0 or HIDDEN % d:
            ap.error("hdim %d does not divide hidden %d" % (d, HIDDEN))
    for s in a.seqlen:
        if s <= 0 or s > TOKENS:
            ap.error("seqlen %d out of range 1..%d" % (s, TOKENS))
    for c in a.causal:
        if c not in (0, 1):
            ap.error("--causal takes 0 and/or 1")
    a.backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    for b in a.backends:
        if b not in ALL_BACKENDS:
            ap.error("unknown backend %r (fmha_tile, flash, cudnn)" % b)
    if a.plot_dir is None:
        a.plot_dir = os.path.dirname(os.path.abspath(a.json))
    return a


def fwd_flops(b, h, s, d, causal):
    f = 4.0 * b * h * s * s * d
    return f * 0.5 if causal else f


def tflops(flops, ms):
    return round(flops / (ms * 1e-3) / 1e12, 2) if ms else None


def n_sets(b, h, s, d, l2_bytes):
    set_bytes = 4 * b * h * s * d * 2          # q, k, v, o in bf16
    return max(2, min(16, -(-2 * l2_bytes // set_bytes) + 1))


def first_line(e):
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else type(e).__name__)[:160]


def host_overhead_us(torch, fmha_tile):
    """CPU microseconds per fmha_tile.attention call on a tiny problem (median of 5
    batches of 200 calls; launches are asynchronous, the GPU is not waited for)."""
    q = torch.randn(1, 128, 2, 64, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(q)
    res = {}
    for name, kw in (("alloc", {}), ("out", {"out": out})):
        fmha_tile.attention(q, q, q, **kw)
        torch.cuda.synchronize()
        per = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(200):
                fmha_tile.attention(q, q, q, causal=True, **kw)
            per.append((time.perf_counter() - t0) / 200 * 1e6)
            torch.cuda.synchronize()
        res[name] = round(statistics.median(per), 1)
    return {"host_us_per_call": res["alloc"], "host_us_per_call_with_out": res["out"]}


def bench_point(torch, F, sdpa_kernel, SDPBackend, fmha_tile, d, s, causal, l2_bytes, backends):
    b, h = TOKENS // s, HIDDEN // d
    flops = fwd_flops(b, h, s, d, causal)
    res = {"d": d, "s": s, "causal": bool(causal), "b": b, "h": h, "kernel": None, "ms": None,
           "tflops": None, "flash_fwd": None, "cudnn_fwd": None, "flash_ms": None,
           "cudnn_ms": None, "rel_l2_vs_sdpa": None}
    notes, failed = [], False
    n = n_sets(b, h, s, d, l2_bytes)
    ref = None            # SDPA output on set 0, [b, s, h, d] fp32
    # ---- SDPA: [b, h, s, d] ----------------------------------------------------------------
    sets = [[torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
            for _ in range(n)]
    for key, backend in SDPA_BACKENDS:
        if key not in backends:
            continue
        try:
            with sdpa_kernel([getattr(SDPBackend, backend)]):
                def fwd(i):
                    q, k, v = sets[i]
                    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                out = fwd(0)
                if not torch.isfinite(out).all():
                    raise RuntimeError("non-finite output")
                if ref is None:
                    ref = out.transpose(1, 2).float()
                del out
                ms = time_calls(torch, fwd, n)
            res[key + "_ms"] = round(ms, 4)
            res[key + "_fwd"] = tflops(flops, ms)
        except (RuntimeError, ValueError) as e:      # includes torch.OutOfMemoryError
            notes.append("%s: %s" % (key, first_line(e)))
            torch.cuda.synchronize()
    # ---- fmha_tile: [b, s, h, d], same values as set 0 for the check -------------------------
    if "fmha_tile" in backends:
        fsets = []
        for i in range(n):
            q, k, v = (x.transpose(1, 2).contiguous() for x in sets[i])
            fsets.append((q, k, v, torch.empty_like(q)))
        del sets
        try:
            plan = fmha_tile.attention_plan(fsets[0][0], fsets[0][1], fsets[0][2], causal=bool(causal))
            res["kernel"] = plan["kernel"]

            def fwd(i):
                q, k, v, o = fsets[i]
                return fmha_tile.attention(q, k, v, causal=bool(causal), out=o)
            fwd(0)
            torch.cuda.synchronize()
            o = fsets[0][3]
            if not torch.isfinite(o).all():
                raise RuntimeError("non-finite output")
            if ref is not None:
                err = ((o.float() - ref).norm() / ref.norm()).item()
                res["rel_l2_vs_sdpa"] = float("%.3g" % err)
                if not err <= CHECK_TOL:
                    notes.append("fmha_tile: rel-L2 vs SDPA %.3g > %g" % (err, CHECK_TOL))
                    failed = True
            ms = time_calls(torch, fwd, n)
            res["ms"] = round(ms, 4)
            res["tflops"] = tflops(flops, ms)
        except (RuntimeError, ValueError, TypeError) as e:   # FmhaError is a RuntimeError
            notes.append("fmha_tile: %s" % first_line(e))
            failed = True
            torch.cuda.synchronize()
        del fsets
    ref = None
    torch.cuda.empty_cache()
    return res, notes, failed


def fmt(x):
    return "%8.1f" % x if x is not None else "%8s" % "-"


def plot(results, plot_dir, hdims, backends):
    """Two PNGs (non-causal, causal): TFLOPS vs seqlen, one panel per head dim."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("py_bench: plots skipped: matplotlib not available (%s)" % e)
        return []
    series = (("fmha_tile", "tflops", "fmha_tile", "o-"), ("flash", "flash_fwd", "SDPA flash (FA2)", "s--"),
              ("cudnn", "cudnn_fwd", "SDPA cuDNN", "^--"))
    written = []
    os.makedirs(plot_dir, exist_ok=True)
    for causal in (False, True):
        rows = [r for r in results if r["causal"] == causal]
        if not rows:
            continue
        fig, axes = plt.subplots(1, len(hdims), figsize=(5 * len(hdims), 4), squeeze=False)
        for ax, d in zip(axes[0], hdims):
            pts = sorted((r for r in rows if r["d"] == d), key=lambda r: r["s"])
            for key, field, label, style in series:
                if key not in backends:
                    continue
                xs = [r["s"] for r in pts if r.get(field) is not None]
                ys = [r[field] for r in pts if r.get(field) is not None]
                if xs:
                    ax.plot(xs, ys, style, label=label)
            ax.set_xscale("log", base=2)
            ax.set_xticks([r["s"] for r in pts])
            ax.set_xticklabels(["%dk" % (r["s"] // 1024) if r["s"] >= 1024 else str(r["s"])
                                for r in pts])
            ax.set_title("hdim %d, %s" % (d, "causal" if causal else "non-causal"))
            ax.set_xlabel("sequence length (batch = 16k / seqlen)")
            ax.set_ylabel("TFLOPS (bf16 forward)")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        path = os.path.join(plot_dir, "py_bench_%s.png" % ("causal" if causal else "noncausal"))
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
        print("py_bench: wrote %s" % path)
    return written


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print("SKIP py_bench: torch not available (%s)" % e)
        return 0
    if not torch.cuda.is_available():
        print("SKIP py_bench: no GPU")
        return 0
    import fmha_tile
    try:
        lib_version = fmha_tile.version()
    except fmha_tile.FmhaLibraryError as e:
        if "fmha_tile" in a.backends:
            print("py_bench: %s" % e, file=sys.stderr)
            return 1
        lib_version = None
    dev = torch.cuda.current_device()
    prop = torch.cuda.get_device_properties(dev)
    l2_bytes = getattr(prop, "L2_cache_size", 50 << 20)
    meta = {"device": prop.name, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "fmha_tile": lib_version,
            "library": fmha_tile.library_path() if lib_version else None,
            "dtype": "bf16", "tokens": TOKENS, "hidden": HIDDEN,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "timing": "CUDA events per call, median; warm-up; input sets > 2x L2"}
    print("py_bench: torch %s, %s (L2 %d MB), fmha_tile %s (%s)"
          % (torch.__version__, prop.name, l2_bytes >> 20, lib_version, meta["library"]))
    if "fmha_tile" in a.backends:
        meta.update(host_overhead_us(torch, fmha_tile))
        print("py_bench: host cost of one fmha_tile.attention call: %.1f us (%.1f us with out=)"
              % (meta["host_us_per_call"], meta["host_us_per_call_with_out"]))
    cols = [("fmha_tile", "tflops"), ("flash", "flash_fwd"), ("cudnn", "cudnn_fwd")]
    cols = [c for c in cols if c[0] in a.backends]
    print("%-5s %-6s %-6s " % ("hdim", "seqlen", "causal") + " ".join("%9s" % c[0] for c in cols)
          + "  kernel")
    sys.stdout.flush()
    results, nfail = [], 0
    for d in a.hdim:
        for s in a.seqlen:
            for c in a.causal:
                res, notes, failed = bench_point(torch, F, sdpa_kernel, SDPBackend, fmha_tile, d, s,
                                                 c, l2_bytes, a.backends)
                results.append(res)
                nfail += failed
                print("%-5d %-6d %-6d " % (d, s, c) + " ".join(" " + fmt(res[k]) for _, k in cols)
                      + "  " + (res["kernel"] or "-"))
                for n in notes:
                    print("    (%s)" % n)
                sys.stdout.flush()
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
        f.write("\n")
    print("py_bench: wrote %s" % a.json)
    if not a.no_plot:
        plot(results, a.plot_dir, a.hdim, a.backends)
    if nfail:
        print("py_bench: %d point(s) failed" % nfail)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
