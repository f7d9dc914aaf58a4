#!/usr/bin/env python3
"""sdpa_decode: PyTorch SDPA decode bandwidth on the grid of bench/bench_decode.cu.

Times torch.nn.functional.scaled_dot_product_attention with the FLASH_ATTENTION and
CUDNN_ATTENTION backends (each forced with torch.nn.attention.sdpa_kernel) on decode
shapes: q [batch, nhead_q, seqlen_q, hdim], k/v [batch, nhead_k, seqlen_k, hdim],
bf16, contiguous, no mask (seqlen_q > 1 too: SDPA's is_causal is top-left aligned,
which is not the decode mask, and a mask tensor would turn flash away; the mask does
not change the bytes read). Grouped-query attention goes through enable_gqa=True; a
backend that refuses it runs on K/V expanded with repeat_interleave to nhead_q heads
(the JSON's "<backend>_gqa" says which), still counted with nhead_k heads, so the
figures stay comparable with bench_decode's.

Metric (the same as bench_decode's): K+V bytes = batch * seqlen_k * nhead_k * hdim * 2
tensors * 2 bytes, over the time of one call, in TB/s. Two timings per backend:
  per call   one pair of CUDA events around each Python call (the decode anchors of
             the design brief were measured so; short calls are bound by the Python
             and launch cost, about 25-40 us)
  graph      a CUDA graph of N calls replayed, events around each replay, time / N:
             the kernels' own time without the host cost
Both rotate among input sets: K/V copies smaller than 16x the L2 come in N >= 2 sets
with N x copy >= 4x the L2 (200 MB on an H100), so no call starts on K/V in the L2.
Median of at least 20 timings, about 0.3 s per point (0.1 s with --quick). Also a
1 GiB device-to-device copy (read + write bytes over time): the ceiling.

  python3 bench/sdpa_decode.py [--batch 1,8,64] [--kv 8k,32k] [--hq 32] [--hk 8]
                               [--hdim 128] [--seqlen_q 1] [--max_gb 16] [--no_graph]
                               [--quick] [--json out.json]

A shape whose bf16 K+V exceeds --max_gb is skipped; a backend that refuses a shape
(or runs out of memory) prints n/a and its note. Output: a line per shape and, with
--json, {"device", "torch", "copy_tbps", "rows": [{"batch", "kv", "hq", "hk", "hdim",
"seqlen_q", "flash", "cudnn" (TB/s per call), "flash_us", "cudnn_us", "flash_graph",
"cudnn_graph" (TB/s), "flash_gqa", "cudnn_gqa", "notes"}]}; null where n/a.
Without torch or without a GPU it prints a SKIP line and exits 0.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_bench  # noqa: E402  (its list parser and timing loop)
from sdpa_bench import time_calls  # noqa: E402

COPY_BYTES = 1 << 30
MAX_SETS = 512
BACKENDS = (("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"))


def parse_list(text):
    """'1,8k,32k' -> [1, 8192, 32768] (sdpa_bench's lists, every value >= 1)"""
    out = sdpa_bench.parse_list(text)
    if min(out) < 1:
        raise argparse.ArgumentTypeError("values must be >= 1: %r" % text)
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=parse_list, default=[1, 8, 64])
    ap.add_argument("--kv", type=parse_list, default=[8192, 32768])
    ap.add_argument("--hq", type=parse_list, default=[32])
    ap.add_argument("--hk", type=parse_list, default=[8])
    ap.add_argument("--hdim", type=parse_list, default=[128])
    ap.add_argument("--seqlen_q", type=parse_list, default=[1])
    ap.add_argument("--max_gb", type=float, default=16.0,
                    help="skip shapes whose bf16 K+V exceeds this (GB)")
    ap.add_argument("--target_s", type=float, default=None,
                    help="seconds of timed calls per point (0.3; 0.1 with --quick)")
    ap.add_argument("--no_graph", action="store_true", help="skip the CUDA-graph timing")
    ap.add_argument("--quick", action="store_true", help="0.1 s per point")
    ap.add_argument("--json", default=None, help="write results here")
    a = ap.parse_args(argv)
    if a.target_s is None:
        a.target_s = 0.1 if a.quick else 0.3
    for d in a.hdim:
        if d % 8 or d > 256:
            ap.error("hdim %d: a multiple of 8 up to 256" % d)
    return a


def kv_bytes(b, kv, hk, d):
    return float(b) * kv * hk * d * 2 * 2


def rotation_sets(copy_bytes, l2):
    """Input sets so that no call starts on K/V still in the L2 (bench_decode's rule)."""
    if copy_bytes >= 16 * l2:
        return 1
    return int(min(MAX_SETS, max(2, math.ceil(4 * l2 / copy_bytes))))


def time_graph(torch, fn, nsets, target_s):
    """Median milliseconds per call of a CUDA graph of n calls (rotating sets) replayed."""
    n = max(nsets, 8)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graph asks
        for i in range(3):
            fn(i % nsets)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = [fn(i % nsets) for i in range(n)]
    del outs

    def replay(_):
        g.replay()

    ms = time_calls(torch, replay, 1, target_s)
    del g
    return ms / n


def copy_bandwidth(torch, target_s):
    """TB/s of a 1 GiB device-to-device copy (read + write bytes), or None."""
    try:
        src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").fill_(0x3C)
        dst = torch.empty_like(src)
    except RuntimeError:
        torch.cuda.empty_cache()
        return None
    ms = time_calls(torch, lambda i: dst.copy_(src), 1, target_s)
    del src, dst
    torch.cuda.empty_cache()
    return 2.0 * COPY_BYTES / (ms * 1e-3) / 1e12


def run_backend(torch, F, sdpa_kernel, be, sets, ratio, expand, a):
    """One backend on the sets: (ms per call, graph ms per call or None, graph note,
    output of set 0). expand: K/V repeated to nhead_q heads instead of enable_gqa.
    Raises RuntimeError/ValueError when the backend refuses the shape."""
    if expand:
        sets = [(q, k.repeat_interleave(ratio, dim=1), v.repeat_interleave(ratio, dim=1)) for q, k, v in sets]
    gqa = ratio > 1 and not expand

    def call(i):
        q, k, v = sets[i]
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)

    gms, note = None, None
    with sdpa_kernel([be]):
        out = call(0)
        if not torch.isfinite(out).all():
            raise RuntimeError("non-finite output")
        out = out.float()
        ms = time_calls(torch, call, len(sets), a.target_s)
        if not a.no_graph:
            try:
                gms = time_graph(torch, call, len(sets), a.target_s)
            except RuntimeError as e:
                note = "graph: %s" % str(e).strip().splitlines()[0][:120]
                torch.cuda.synchronize()
    return ms, gms, note, out


def bench_shape(torch, F, sdpa_kernel, SDPBackend, shp, l2, a):
    b, kv, hq, hk, d, sq = shp
    nbytes = kv_bytes(b, kv, hk, d)
    nsets = rotation_sets(nbytes, l2)
    ratio = hq // hk
    res = {"batch": b, "kv": kv, "hq": hq, "hk": hk, "hdim": d, "seqlen_q": sq,
           "bytes": nbytes, "nsets": nsets, "notes": []}
    for key, _ in BACKENDS:
        for suffix in ("", "_us", "_graph", "_graph_us", "_gqa"):
            res[key + suffix] = None
    try:
        sets = [(torch.randn(b, hq, sq, d, device="cuda", dtype=torch.bfloat16),
                 torch.randn(b, hk, kv, d, device="cuda", dtype=torch.bfloat16),
                 torch.randn(b, hk, kv, d, device="cuda", dtype=torch.bfloat16)) for _ in range(nsets)]
    except RuntimeError as e:  # includes torch.OutOfMemoryError
        res["notes"].append("inputs: %s" % str(e).strip().splitlines()[0][:120])
        torch.cuda.empty_cache()
        return res
    outs = {}
    for key, backend in BACKENDS:
        for expand in ((False, True) if ratio > 1 else (False,)):
            mode = "repeat_interleave" if expand else "enable_gqa"
            if expand and nbytes * ratio * nsets > a.max_gb * 1e9:
                res["notes"].append("%s (%s): expanded K/V %.1f GB > --max_gb" %
                                    (key, mode, nbytes * ratio * nsets * 1e-9))
                break
            try:
                ms, gms, note, out = run_backend(torch, F, sdpa_kernel, getattr(SDPBackend, backend), sets,
                                                 ratio, expand, a)
            except (RuntimeError, ValueError) as e:
                res["notes"].append("%s (%s): %s" % (key, mode, str(e).strip().splitlines()[0][:120]))
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                continue
            res[key] = round(nbytes / (ms * 1e-3) / 1e12, 4)
            res[key + "_us"] = round(ms * 1e3, 3)
            res[key + "_gqa"] = mode
            if gms is not None:
                res[key + "_graph"] = round(nbytes / (gms * 1e-3) / 1e12, 4)
                res[key + "_graph_us"] = round(gms * 1e3, 3)
            if note:
                res["notes"].append("%s: %s" % (key, note))
            outs[key] = out
            torch.cuda.empty_cache()
            break
    if len(outs) == 2:  # the two backends on the same inputs: a sanity check
        x, y = outs["flash"], outs["cudnn"]
        res["flash_vs_cudnn_rel_l2"] = float(((x - y).norm() / y.norm().clamp_min(1e-30)).item())
    del sets, outs
    torch.cuda.empty_cache()
    return res


def fmt(x, w=7, p=3):
    return ("%*.*f" % (w, p, x)) if x is not None else ("%*s" % (w, "n/a"))


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print("SKIP sdpa_decode: torch not available (%s)" % e)
        return 0
    if not torch.cuda.is_available():
        print("SKIP sdpa_decode: no GPU")
        return 0
    prop = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(prop, "L2_cache_size", 50 << 20) or (50 << 20)
    print("sdpa_decode: torch %s, %s (L2 %d MB); bf16, K+V bytes read / time"
          % (torch.__version__, prop.name, l2 >> 20))
    copy_tbps = copy_bandwidth(torch, a.target_s)
    if copy_tbps:
        print("sdpa_decode: copy 1 GiB device to device: %.3f TB/s (read + write)" % copy_tbps)
    print("%-28s %9s %9s %11s %11s %9s %9s  %s" % ("shape", "flash", "cuDNN", "flash graph", "cuDNN graph",
                                                  "flash us", "cuDNN us", "GQA path"))
    sys.stdout.flush()
    rows = []
    for d in a.hdim:
        for hq in a.hq:
            for hk in a.hk:
                for sq in a.seqlen_q:
                    for b in a.batch:
                        for kv in a.kv:
                            name = "b%d kv%s h%d/%d d%d q%d" % (
                                b, "%dk" % (kv // 1024) if kv % 1024 == 0 else str(kv), hq, hk, d, sq)
                            if hq % hk:
                                print("%-28s skipped: nhead_q %% nhead_k != 0" % name)
                                continue
                            if kv_bytes(b, kv, hk, d) > a.max_gb * 1e9:
                                print("%-28s skipped: bf16 K+V %.1f GB > --max_gb %g"
                                      % (name, kv_bytes(b, kv, hk, d) * 1e-9, a.max_gb))
                                continue
                            r = bench_shape(torch, F, sdpa_kernel, SDPBackend, (b, kv, hq, hk, d, sq), l2, a)
                            rows.append(r)
                            paths = ",".join("%s:%s" % (k, r[k + "_gqa"]) for k, _ in BACKENDS if r[k + "_gqa"])
                            print("%-28s %s TB/s %s TB/s %s TB/s %s TB/s %s %s  %s" % (
                                name, fmt(r["flash"], 4), fmt(r["cudnn"], 4), fmt(r["flash_graph"], 6),
                                fmt(r["cudnn_graph"], 6), fmt(r["flash_us"], 9, 2), fmt(r["cudnn_us"], 9, 2),
                                paths or "-"))
                            for n in r["notes"]:
                                print("    (%s)" % n)
                            sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": prop.name, "torch": torch.__version__, "l2_mb": l2 / 2.0 ** 20,
                       "copy_tbps": copy_tbps, "quick": a.quick, "rows": rows}, f, indent=1)
            f.write("\n")
        print("sdpa_decode: wrote %s" % a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
