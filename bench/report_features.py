#!/usr/bin/env python3
"""report_features: the table of bench/run_features.sh.

Reads OUT_DIR/feat_{fwd,bwd}_{dropout,bias1,bias2}.json (bench_fwd / bench_bwd
--json) and OUT_DIR/sdpa_features.json (bench/sdpa_features.py), and prints one
row per (feature, direction, hdim, seqlen, causal): fmha_tile's TFLOPS, each
SDPA backend's, and fmha_tile / backend; then which backends accept each
feature. A missing measurement is "-" (no kernel, a backend that refuses the
feature, or a run that failed).

  python3 bench/report_features.py OUT_DIR [--out report.md]
"""
import argparse
import json
import os
import sys

BACKENDS = ("flash", "efficient", "cudnn", "math")
ROWS = (("dropout", "fwd"), ("dropout", "bwd"), ("bias1", "fwd"), ("bias1", "bwd"),
        ("bias2", "fwd"), ("bias2", "bwd"))
WHAT = {"dropout": "dropout p", "bias1": "bias [1,1,s,s]", "bias2": "bias [1,h,s,s]"}


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def ours(out_dir, feature, direction):
    """{(d, s, causal): TFLOPS or None} of fmha_tile (non-deterministic backward)."""
    pts = load(os.path.join(out_dir, "feat_%s_%s.json" % (direction, feature))) or []
    return {(r["d"], r["s"], bool(r["causal"])): r.get("tflops")
            for r in pts if not r.get("det")}


def f1(x):
    return "%.1f" % x if isinstance(x, (int, float)) else "-"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    sd = load(os.path.join(a.out_dir, "sdpa_features.json")) or {}
    spts = {(r["feature"], r["dir"], r["d"], r["s"], bool(r["causal"])): r
            for r in sd.get("points", [])}
    accepts = sd.get("accepts", {})
    used = [b for b in BACKENDS if any(r.get(b) is not None for r in spts.values())] or \
        list(BACKENDS[:3])
    p = sd.get("dropout_p")
    head = ["feature", "dir", "hdim", "seqlen", "causal", "fmha_tile"] + used + \
        ["/ " + b for b in used]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    worst = {}
    for feature, direction in ROWS:
        mine = ours(a.out_dir, feature, direction)
        keys = sorted(set(mine) | {k[2:] for k in spts if k[:2] == (feature, direction)})
        for d, s, c in keys:
            t = mine.get((d, s, c))
            r = spts.get((feature, direction, d, s, c), {})
            vals = [r.get(b) for b in used]
            ratios = [t / v if t and v else None for v in vals]
            for b, x in zip(used, ratios):
                if x is not None:
                    k = (feature, direction, b)
                    worst[k] = min(worst.get(k, x), x)
            name = WHAT[feature] + (" %g" % p if feature == "dropout" and p else "")
            lines.append("| %s | %s | %d | %d | %d | %s | %s | %s |" % (
                name, direction, d, s, int(c), f1(t), " | ".join(f1(v) for v in vals),
                " | ".join("%.2f" % x if x is not None else "-" for x in ratios)))
    lines.append("")
    lines.append("TFLOPS (FLOPs of the problem: 4 b h s^2 d, causal halved, backward x2.5); "
                 "fmha_tile's backward non-deterministic. SDPA with causal and a bias: the "
                 "causal mask folded into the float mask (SDPA takes no is_causal with "
                 "attn_mask), so it computes every tile.")
    for feature in ("dropout", "bias1", "bias2"):
        acc = accepts.get(feature)
        if not acc:
            continue
        yes = [b for b in BACKENDS if acc.get(b) is True]
        no = ["%s (%s)" % (b, acc[b]) for b in BACKENDS if b in acc and acc[b] is not True]
        lines.append("- %s: SDPA backends that accept it: %s%s" % (
            WHAT[feature], ", ".join(yes) or "none", "; refused by " + "; ".join(no) if no else ""))
    if worst:
        lines.append("- smallest ratio fmha_tile / backend: " + ", ".join(
            "%s %s vs %s %.2f" % (f, dr, b, x) for (f, dr, b), x in sorted(worst.items())))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
