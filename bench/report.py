#!/usr/bin/env python3
"""report: fmha_tile forward TFLOPS next to PyTorch SDPA (flash, cuDNN) as markdown.

  python3 bench/report.py FMHA_JSON [SDPA_JSON] [--anchors ANCHORS_JSON] [--out FILE.md]

FMHA_JSON is bench_fwd's output: a list of {"d","s","causal","b","h","kernel","ms",
"tflops"}. SDPA_JSON is sdpa_bench.py's output: a list of {"d","s","causal",
"flash_fwd","cudnn_fwd"}. ANCHORS_JSON has the SDPA format too (e.g.
shared/anchors/h100_torch_sdpa_2026-11-22.json) and adds a column with its flash /
cuDNN forward numbers. Ratios are fmha_tile / other, measured in the same run.
A summary line gives the smallest ratio vs flash (and vs cuDNN) for seqlen >= 2k.
Python 3 standard library only for the table.

Plots (optional): when matplotlib is importable, also a PNG of TFLOPS vs
seqlen, one panel per (hdim, causal), with fmha_tile, flash and cuDNN (and
the anchors, dashed): next to --out (report.md -> report.png), else next to
FMHA_JSON (fmha_fwd.json -> fmha_fwd.png); --plot PATH picks the file,
--no-plot turns it off. Without matplotlib: a message on stderr, no PNG.
"""
import argparse
import json
import os
import sys

SUMMARY_MIN_SEQLEN = 2048


def load(path):
    """List of dicts keyed by (d, s, causal)."""
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):  # tolerate {"results": [...]}
        data = data.get("results", [])
    out = {}
    for row in data:
        try:
            key = (int(row["d"]), int(row["s"]), bool(row["causal"]))
        except (KeyError, TypeError, ValueError):
            continue
        out[key] = row
    return out


def num(row, field):
    if row is None:
        return None
    v = row.get(field)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def f1(x):
    return "%.1f" % x if x is not None else "-"


def ratio(a, b):
    return a / b if a is not None and b else None


def f2(x):
    return "%.2f" % x if x is not None else "-"


def seqlen_label(s):
    return "%dk" % (s // 1024) if s >= 1024 and s % 1024 == 0 else str(s)


def build(fmha, sdpa, anchors):
    header = ["hdim", "seqlen", "causal", "fmha_tile TFLOPS", "kernel", "flash", "cuDNN",
              "ratio vs flash", "ratio vs cuDNN"]
    if anchors is not None:
        header.append("anchor flash / cuDNN")
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    worst_flash = None   # (ratio, key)
    worst_cudnn = None
    missing = 0          # fmha_tile points at seqlen >= 2k without a number
    keys = sorted(set(fmha) | set(sdpa), key=lambda k: (k[0], k[1], k[2]))
    for key in keys:
        d, s, causal = key
        fr = fmha.get(key)
        sr = sdpa.get(key)
        ours = num(fr, "tflops")
        flash = num(sr, "flash_fwd")
        cudnn = num(sr, "cudnn_fwd")
        rf, rc = ratio(ours, flash), ratio(ours, cudnn)
        if fr is None:
            kernel = "-"
        elif fr.get("kernel"):
            kernel = "`%s`" % fr["kernel"]
        else:
            kernel = "(no kernel)"
        cells = [str(d), seqlen_label(s), "yes" if causal else "no", f1(ours), kernel,
                 f1(flash), f1(cudnn), f2(rf), f2(rc)]
        if anchors is not None:
            ar = anchors.get(key)
            cells.append("%s / %s" % (f1(num(ar, "flash_fwd")), f1(num(ar, "cudnn_fwd"))))
        lines.append("| " + " | ".join(cells) + " |")
        if s >= SUMMARY_MIN_SEQLEN:
            if fr is not None and ours is None:
                missing += 1
            if rf is not None and (worst_flash is None or rf < worst_flash[0]):
                worst_flash = (rf, key)
            if rc is not None and (worst_cudnn is None or rc < worst_cudnn[0]):
                worst_cudnn = (rc, key)

    def where(w):
        d, s, c = w[1]
        return "%.2f (hdim %d, seqlen %s, %s)" % (w[0], d, seqlen_label(s),
                                                  "causal" if c else "non-causal")
    summary = "Summary (seqlen >= %s): min ratio vs flash %s; min ratio vs cuDNN %s." % (
        seqlen_label(SUMMARY_MIN_SEQLEN),
        where(worst_flash) if worst_flash else "n/a",
        where(worst_cudnn) if worst_cudnn else "n/a")
    if missing:
        summary += " %d fmha_tile point(s) at seqlen >= %s have no kernel or no number." % (
            missing, seqlen_label(SUMMARY_MIN_SEQLEN))
    return "\n".join(lines) + "\n\n" + summary + "\n"


def plot(fmha, sdpa, anchors, path):
    """TFLOPS vs seqlen, a panel per (hdim, causal), into the PNG at path.
    -> True when written, False when matplotlib is missing (message on stderr)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: matplotlib is not installed; no plot (pip install matplotlib)",
              file=sys.stderr)
        return False
    keys = set(fmha) | set(sdpa)
    panels = sorted({(d, c) for d, _, c in keys})
    if not panels:
        print("report: nothing to plot", file=sys.stderr)
        return False
    hdims = sorted({d for d, _ in panels})
    causals = sorted({c for _, c in panels})
    fig, axes = plt.subplots(len(hdims), len(causals), squeeze=False,
                             figsize=(5.5 * len(causals), 3.6 * len(hdims)))
    series = [("fmha_tile", fmha, "tflops", "-", "o"),
              ("flash (SDPA)", sdpa, "flash_fwd", "-", "s"),
              ("cuDNN (SDPA)", sdpa, "cudnn_fwd", "-", "^")]
    if anchors is not None:
        series += [("anchor flash", anchors, "flash_fwd", "--", None),
                   ("anchor cuDNN", anchors, "cudnn_fwd", "--", None)]
    for i, d in enumerate(hdims):
        for j, c in enumerate(causals):
            ax = axes[i][j]
            seqlens = sorted({s for dd, s, cc in keys if dd == d and cc == c})
            for label, table, field, style, marker in series:
                pts = [(s, num(table.get((d, s, c)), field)) for s in seqlens]
                pts = [(s, y) for s, y in pts if y is not None]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=style,
                            marker=marker, label=label)
            ax.set_xscale("log", base=2)
            ax.minorticks_off()
            ax.set_xticks(seqlens)
            ax.set_xticklabels([seqlen_label(s) for s in seqlens], fontsize=8)
            ax.set_title("hdim %d, %s" % (d, "causal" if c else "non-causal"), fontsize=10)
            ax.set_xlabel("seqlen")
            ax.set_ylabel("TFLOPS")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("forward TFLOPS: fmha_tile vs PyTorch SDPA")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("report: wrote %s" % path, file=sys.stderr)
    return True


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("fmha_json", help="bench_fwd --json output")
    ap.add_argument("sdpa_json", nargs="?", default=None, help="sdpa_bench.py --json output")
    ap.add_argument("--anchors", default=None, help="reference anchors JSON (SDPA format)")
    ap.add_argument("--out", default=None, help="also write the markdown here")
    ap.add_argument("--plot", default=None,
                    help="PNG path (default: next to --out, else next to FMHA_JSON)")
    ap.add_argument("--no-plot", action="store_true", help="no PNG even with matplotlib")
    a = ap.parse_args(argv)
    try:
        fmha = load(a.fmha_json)
        sdpa = load(a.sdpa_json) if a.sdpa_json else {}
        anchors = load(a.anchors) if a.anchors else None
    except (OSError, ValueError) as e:
        print("report: %s" % e, file=sys.stderr)
        return 1
    text = build(fmha, sdpa, anchors)
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if not a.no_plot:
        path = a.plot or os.path.splitext(a.out or a.fmha_json)[0] + ".png"
        try:
            plot(fmha, sdpa, anchors, path)
        except Exception as e:  # a plot is an extra: the table stands without it
            print("report: plot failed (%s: %s)" % (type(e).__name__, e), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
