#!/usr/bin/env python3
"""report_features: the table of bench/run_features.sh.

Reads OUT_DIR/feat_{fwd,bwd}_{dropout,bias1,bias2,mla}.json (bench_fwd /
bench_bwd --json) and OUT_DIR/sdpa_features.json (bench/sdpa_features.py), and
prints one row per (feature, direction, hdim, seqlen, causal): fmha_tile's
TFLOPS, each SDPA backend's, and fmha_tile / backend; then which backends
accept each feature. A missing measurement is "-" (no kernel, or a run that
failed), a backend that refuses the feature "unsupported". The MLA rows (q/k
192, v 128) have a third direction, fwdbwd: a training step, fmha_tile's as
its forward and backward times added, SDPA's one timed forward + backward.

  python3 bench/report_features.py OUT_DIR [--out report.md]
"""
import argparse
import json
import os
import sys

BACKENDS = ("flash", "efficient", "cudnn", "math")
ROWS = (("dropout", "fwd"), ("dropout", "bwd"), ("bias1", "fwd"), ("bias1", "bwd"),
        ("bias2", "fwd"), ("bias2", "bwd"), ("mla", "fwd"), ("mla", "bwd"), ("mla", "fwdbwd"))
WHAT = {"dropout": "dropout p", "bias1": "bias [1,1,s,s]", "bias2": "bias [1,h,s,s]",
        "mla": "MLA q,k 192 / v 128"}


def mla_flops(r, direction):
    """FLOPs of an MLA point (unequal dims): forward 2 s^2 (d + dv), backward
    2 s^2 (3 d + 2 dv) a head, halved for causal."""
    d, dv = r["d"], r.get("dv", r["d"])
    per = {"fwd": d + dv, "bwd": 3 * d + 2 * dv}[direction]
    return 2.0 * r["b"] * r["h"] * r["s"] * r["s"] * per * (0.5 if r["causal"] else 1.0)


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def ours(out_dir, feature, direction):
    """{(d, s, causal): TFLOPS or None} of fmha_tile (non-deterministic backward);
    fwdbwd: the forward's and the backward's FLOPs over their added times."""
    if direction == "fwdbwd":
        f, b = (ours_points(out_dir, feature, x) for x in ("fwd", "bwd"))
        out = {}
        for k in set(f) & set(b):
            rf, rb = f[k], b[k]
            if rf.get("ms") and rb.get("ms"):
                out[k] = (mla_flops(rf, "fwd") + mla_flops(rb, "bwd")) / ((rf["ms"] + rb["ms"]) * 1e-3) / 1e12
        return out
    return {k: r.get("tflops") for k, r in ours_points(out_dir, feature, direction).items()}


def ours_points(out_dir, feature, direction):
    pts = load(os.path.join(out_dir, "feat_%s_%s.json" % (direction, feature))) or []
    return {(r["d"], r["s"], bool(r["causal"])): r for r in pts if not r.get("det")}


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
            refused = accepts.get(feature, {})
            lines.append("| %s | %s | %d | %d | %d | %s | %s | %s |" % (
                name, direction, d, s, int(c), f1(t),
                " | ".join(f1(v) if v is not None or refused.get(b, True) is True else "unsupported"
                           for b, v in zip(used, vals)),
                " | ".join("%.2f" % x if x is not None else "-" for x in ratios)))
    lines.append("")
    lines.append("TFLOPS (FLOPs of the problem: 4 b h s^2 d, causal halved, backward x2.5; MLA's "
                 "unequal dims: forward 2 b h s^2 (d + dv), backward 2 b h s^2 (3 d + 2 dv)); "
                 "fmha_tile's backward non-deterministic. SDPA with causal and a bias: the "
                 "causal mask folded into the float mask (SDPA takes no is_causal with "
                 "attn_mask), so it computes every tile.")
    for feature in ("dropout", "bias1", "bias2", "mla"):
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
