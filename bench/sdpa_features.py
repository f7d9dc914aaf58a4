#!/usr/bin/env python3
"""sdpa_features: PyTorch SDPA with dropout and with an additive float mask, per backend.

The SDPA side of bench/run_features.sh: the points that bench_fwd --dropout P /
--bias 1|2 and bench_bwd --dropout P time for fmha_tile, on the same grid and
with the same FLOP count (bench/sdpa_bench.py: bf16, total tokens 16384, hidden
2048, [b, h, s, d] contiguous; forward 4 * b * h * s * s * d, halved for causal;
backward 2.5x that), so the ratios are like for like:

  dropout  F.scaled_dot_product_attention(q, k, v, dropout_p=P, is_causal=c)
  bias1    attn_mask bf16 [1, 1, s, s] (one mask shared by every entry and head)
  bias2    attn_mask bf16 [1, h, s, s] (one per head, shared by the batch)
  mla      DeepSeek MLA's unequal head dims: q and k of 192 columns, v (and o)
           of 128, h = hidden / 128 = 16 heads, whatever --hdim says; is_causal=c.
           FLOPs per head: forward 2 * s^2 * (192 + 128), backward's five GEMMs
           2 * s^2 * (3 * 192 + 2 * 128) (S, dK, dQ over 192; dP, dV over 128;
           2.5x the forward at equal dims), halved for causal. Three
           directions: fwd, bwd, and fwdbwd (one training step: the forward
           and its backward in one timed call, FLOPs the sum)

Backends: flash, efficient (memory-efficient), cudnn and, with --math, math
(slow: it materialises the scores). Each is forced alone (sdpa_kernel); a
backend that refuses a feature is probed once at a small shape and reported as
not accepting it, with PyTorch's reason. With causal, SDPA takes no attn_mask
together with is_causal, so the bias points fold the causal mask into the
float mask (-inf above the diagonal): SDPA then computes every tile, while
the FLOPs stay those of the causal problem (what a user of SDPA gets). The
mask does not require grad (dQ, dK, dV only).

Timing as sdpa_bench.time_calls: event pairs per call, warm-up, median; the
inputs rotate among sets larger than twice the L2.

  python3 bench/sdpa_features.py [--hdim 64,128] [--seqlen 2k,8k] [--causal 0,1]
                                 [--dropout 0.1] [--features dropout,bias1,bias2]
                                 [--math] [--quick] [--json out.json]

JSON: {"dropout_p", "accepts": {feature: {backend: true or the refusal}},
"points": [{"feature", "dir" ("fwd"|"bwd"|"fwdbwd"), "d", "dv", "s", "causal",
"<backend>": TFLOPS or null}]}; a backend that refuses a feature has null
points and its refusal under "accepts" ("unsupported" in the table).
Without torch or a GPU it prints a SKIP line and exits 0.
"""
import argparse
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdpa_bench import HIDDEN, TOKENS, fwd_flops, parse_list, time_calls  # noqa: E402

BACKENDS = (("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"),
            ("cudnn", "CUDNN_ATTENTION"), ("math", "MATH"))
FEATURES = ("dropout", "bias1", "bias2", "mla")
MLA_D, MLA_DV = 192, 128   # DeepSeek MLA: q/k and v head dims


def dims(feature, d):
    """(hdim_q, hdim_v, heads) of a point: mla fixes its dims and heads."""
    if feature == "mla":
        return MLA_D, MLA_DV, HIDDEN // MLA_DV
    return d, d, HIDDEN // d


def flops_of(feature, b, h, s, d, dv, causal):
    """(forward, backward) FLOPs; unequal dims: 2 s^2 (d + dv) and 2 s^2 (3 d + 2 dv) a
    head (2.5x the forward at equal dims), halved for causal."""
    if feature != "mla":
        f = fwd_flops(b, h, s, d, causal)
        return f, 2.5 * f
    half = 0.5 if causal else 1.0
    return (2.0 * b * h * s * s * (d + dv) * half, 2.0 * b * h * s * s * (3 * d + 2 * dv) * half)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hdim", type=parse_list, default=None)
    ap.add_argument("--seqlen", type=parse_list, default=None)
    ap.add_argument("--causal", type=parse_list, default=None)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--features", default=",".join(FEATURES))
    ap.add_argument("--math", action="store_true", help="time the math backend too")
    ap.add_argument("--quick", action="store_true", help="hdim 128, seqlen 8k, not causal")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    a.hdim = a.hdim or ([128] if a.quick else [64, 128])
    a.seqlen = a.seqlen or ([8192] if a.quick else [2048, 8192])
    a.causal = a.causal or ([0] if a.quick else [0, 1])
    a.features = [f for f in a.features.split(",") if f]
    for f in a.features:
        if f not in FEATURES:
            ap.error("unknown feature %r (%s)" % (f, ", ".join(FEATURES)))
    if not 0 < a.dropout < 1:
        ap.error("--dropout takes P in (0, 1)")
    return a


def first_line(e):
    s = str(e).strip().splitlines()
    return (s[0] if s else type(e).__name__)[:160]


def make_mask(torch, feature, b, h, s, causal):
    """The additive bf16 mask of a bias point: values in (-1, 1), -inf above the
    diagonal when causal (SDPA takes no is_causal with a mask)."""
    if not feature.startswith("bias"):
        return None   # dropout, mla
    heads = 1 if feature == "bias1" else h
    m = torch.rand(1, heads, s, s, device="cuda", dtype=torch.bfloat16) * 2 - 1
    if causal:
        above = torch.ones(s, s, device="cuda", dtype=torch.bool).triu_(1)
        m.masked_fill_(above, float("-inf"))
    return m


class Call:
    """One SDPA call of a feature point: fn(q, k, v) with its mask and flags."""

    def __init__(self, F, feature, mask, causal, p):
        self.F, self.mask = F, mask
        self.causal = bool(causal) and mask is None
        self.p = p if feature == "dropout" else 0.0

    def __call__(self, q, k, v):
        return self.F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask,
                                                   dropout_p=self.p, is_causal=self.causal)


def probe(torch, F, sdpa_kernel, SDPBackend, feature, p):
    """{backend: True or the reason it refuses} at a small shape, forward and backward."""
    out = {}
    b, h, s, d = 2, 4, 256, 64
    d, dv = (MLA_D, MLA_DV) if feature == "mla" else (d, d)
    for key, name in BACKENDS:
        # PyTorch says why a forced backend refuses in warnings, then raises
        # "No available kernel": keep the first warning as the reason
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                q, k, v = (torch.randn(b, h, s, x, device="cuda", dtype=torch.bfloat16,
                                       requires_grad=True) for x in (d, d, dv))
                call = Call(F, feature, make_mask(torch, feature, b, h, s, 0), 0, p)
                with sdpa_kernel([getattr(SDPBackend, name)]):
                    o = call(q, k, v)
                    torch.autograd.grad(o, (q, k, v), torch.randn_like(o))
                torch.cuda.synchronize()
                out[key] = True
            except (RuntimeError, ValueError) as e:
                why = [first_line(w.message) for w in seen]
                out[key] = "; ".join([first_line(e)] + why[:1])
                torch.cuda.synchronize()
    return out


def bench_point(torch, F, sdpa_kernel, SDPBackend, feature, d, s, causal, p, backends, l2):
    d, dv, h = dims(feature, d)
    b = TOKENS // s
    flops, bflops = flops_of(feature, b, h, s, d, dv, causal)
    fwd = {"feature": feature, "dir": "fwd", "d": d, "dv": dv, "s": s, "causal": bool(causal)}
    bwd = dict(fwd, dir="bwd")
    both = dict(fwd, dir="fwdbwd") if feature == "mla" else None
    notes = []
    set_bytes = b * h * s * (2 * d + dv) * 2 * 2
    nsets = max(2, min(8, -(-2 * l2 // set_bytes) + 1))
    sets = [[torch.randn(b, h, s, x, device="cuda", dtype=torch.bfloat16, requires_grad=True)
             for x in (d, d, dv)] for _ in range(nsets)]
    call = Call(F, feature, make_mask(torch, feature, b, h, s, causal), causal, p)
    for key, name in BACKENDS:
        fwd[key] = bwd[key] = None
        if both is not None:
            both[key] = None
        if key not in backends:
            continue
        try:
            with sdpa_kernel([getattr(SDPBackend, name)]):
                with torch.no_grad():
                    o = call(*sets[0])
                    if not torch.isfinite(o).all():
                        raise RuntimeError("non-finite output")
                    del o
                    ms = time_calls(torch, lambda i: call(*sets[i]), nsets)
                fwd[key] = round(flops / (ms * 1e-3) / 1e12, 2)
                graphs = []
                for q, k, v in sets:
                    o = call(q, k, v)
                    graphs.append((o, torch.randn_like(o), (q, k, v)))

                def step(i):
                    o, do, inputs = graphs[i]
                    return torch.autograd.grad(o, inputs, do, retain_graph=True)
                ms = time_calls(torch, step, nsets)
                graphs.clear()
                bwd[key] = round(bflops / (ms * 1e-3) / 1e12, 2)
                if both is not None:   # a training step: forward and backward in one call
                    dos = [torch.randn(b, h, s, dv, device="cuda", dtype=torch.bfloat16)
                           for _ in range(nsets)]

                    def fb(i):
                        o = call(*sets[i])
                        return torch.autograd.grad(o, sets[i], dos[i])
                    ms = time_calls(torch, fb, nsets)
                    both[key] = round((flops + bflops) / (ms * 1e-3) / 1e12, 2)
        except (RuntimeError, ValueError) as e:   # torch.OutOfMemoryError included
            notes.append("%s: %s" % (key, first_line(e)))
            torch.cuda.synchronize()
    sets.clear()
    call.mask = None
    torch.cuda.empty_cache()
    return [r for r in (fwd, bwd, both) if r is not None], notes


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print("SKIP sdpa_features: torch not available (%s)" % e)
        return 0
    if not torch.cuda.is_available():
        print("SKIP sdpa_features: no GPU")
        return 0
    prop = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(prop, "L2_cache_size", 50 << 20)
    print("sdpa_features: torch %s, %s, dropout p %g" % (torch.__version__, prop.name, a.dropout))
    accepts, results = {}, []
    keys = [k for k, _ in BACKENDS]
    for feature in a.features:
        accepts[feature] = probe(torch, F, sdpa_kernel, SDPBackend, feature, a.dropout)
        print("%s: accepted by %s" % (feature, ", ".join(k for k in keys if accepts[feature][k] is True)
                                     or "none"))
        for k in keys:
            if accepts[feature][k] is not True:
                print("    (%s refuses it: %s)" % (k, accepts[feature][k]))
    print("%-8s %-6s %-5s %-6s %-6s " % ("feature", "dir", "hdim", "seqlen", "causal")
          + " ".join("%11s" % k for k in keys))
    sys.stdout.flush()
    for feature in a.features:
        use = [k for k in keys if accepts[feature][k] is True and (k != "math" or a.math)]
        for d in ([MLA_D] if feature == "mla" else a.hdim):
            for s in a.seqlen:
                for c in a.causal:
                    rows, notes = bench_point(torch, F, sdpa_kernel, SDPBackend, feature, d, s,
                                              c, a.dropout, use, l2)
                    for r in rows:
                        results.append(r)
                        print("%-8s %-6s %-5s %-6d %-6d " % (
                            feature, r["dir"], "%d" % d if r["dv"] == d else "%d/%d" % (d, r["dv"]),
                            s, c) + " ".join(
                            "%11s" % ("%.1f" % r[k] if r[k] is not None else
                                      "unsupported" if accepts[feature][k] is not True
                                      else "-") for k in keys))
                    for n in notes:
                        print("    (%s)" % n)
                    sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"dropout_p": a.dropout, "accepts": accepts, "points": results}, f, indent=1)
            f.write("\n")
        print("sdpa_features: wrote %s" % a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
