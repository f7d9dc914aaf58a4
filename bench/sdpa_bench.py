#!/usr/bin/env python3
"""sdpa_bench: PyTorch SDPA attention throughput on the fmha_tile benchmark grid.

Times torch.nn.functional.scaled_dot_product_attention with the FLASH_ATTENTION and
CUDNN_ATTENTION backends (forced with torch.nn.attention.sdpa_kernel) on the grid of
bench/bench_fwd.cu (design brief section 7): bf16, total tokens 16384 (batch = 16384 /
seqlen), hidden 2048 (hdim 64/128/256 with 32/16/8 heads), seqlen 512..16k, causal and
not. Tensors are contiguous [b, h, s, d], as SDPA expects.

FLOPs: forward 4 * b * h * s * s * d, halved for causal; backward 2.5x forward.
With --hdim_v N (unequal head dims, DeepSeek MLA: --hdim 192 --hdim_v 128): q and k
of hdim columns, v of N, h = hidden / N; FLOPs per head forward 2 * s^2 * (hdim + N),
backward (its five GEMMs: S, dK, dQ over hdim, dP, dV over N) 2 * s^2 * (3 * hdim +
2 * N), which are 4 s^2 d and 2.5x that at equal dims; halved for causal. The
memory-efficient backend is timed too (flash requires equal dims in PyTorch); a
backend that refuses the shape is reported "unsupported" (null in the JSON) with
PyTorch's reason.
Timing: one pair of torch.cuda.Event around each call, warm-up calls first, median of
at least 20 timed calls (more for short calls, about 0.3 s per point); calls rotate
among input sets whose total exceeds twice the L2 (at least 2 sets).

Output: one line per point and, with --json, a list of
  {"d", "s", "causal", "flash_fwd", "cudnn_fwd"}            (TFLOPS; null on error)
plus "flash_bwd", "cudnn_bwd" with --bwd (the format of the anchors file); with
--hdim_v also "dv", "efficient_fwd" (and "efficient_bwd").

  python3 bench/sdpa_bench.py [--hdim 64,128,256] [--seqlen 512,...,16k]
                              [--causal 0,1] [--hdim_v N] [--quick] [--bwd] [--json out.json]

Without torch or without a GPU it prints a SKIP line and exits 0.
"""
import argparse
import json
import statistics
import sys

TOKENS = 16384
HIDDEN = 2048
MIN_RUNS = 20
MAX_RUNS = 2000
TARGET_S = 0.3
WARMUP_S = 0.05
BACKENDS = (("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"))
# unequal head dims: every backend that may take them
BACKENDS_HV = (("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"),
               ("cudnn", "CUDNN_ATTENTION"))


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
    ap.add_argument("--quick", action="store_true",
                    help="hdim 128, seqlen 2k and 8k")
    ap.add_argument("--bwd", action="store_true", help="also time backward")
    ap.add_argument("--hdim_v", type=int, default=0,
                    help="v of N columns (MLA: --hdim 192 --hdim_v 128); heads = hidden / N")
    ap.add_argument("--json", default=None, help="write results here")
    a = ap.parse_args(argv)
    if a.hdim is None:
        a.hdim = [128] if a.quick else [64, 128, 256]
    if a.seqlen is None:
        a.seqlen = [2048, 8192] if a.quick else [512, 1024, 2048, 4096, 8192, 16384]
    if a.causal is None:
        a.causal = [0, 1]
    if a.hdim_v:
        if a.hdim_v < 0 or HIDDEN % a.hdim_v or any(d < a.hdim_v for d in a.hdim):
            ap.error("--hdim_v %d must divide hidden %d and be at most every hdim" % (a.hdim_v, HIDDEN))
    else:
        for d in a.hdim:
            if d <= 0 or HIDDEN % d:
                ap.error("hdim %d does not divide hidden %d" % (d, HIDDEN))
    for s in a.seqlen:
        if s <= 0 or s > TOKENS:
            ap.error("seqlen %d out of range 1..%d" % (s, TOKENS))
    for c in a.causal:
        if c not in (0, 1):
            ap.error("--causal takes 0 and/or 1")
    return a


def fwd_flops(b, h, s, d, causal):
    f = 4.0 * b * h * s * s * d
    return f * 0.5 if causal else f


def flops_hv(b, h, s, d, dv, causal):
    """(forward, backward) FLOPs of unequal head dims (equal: 4 s^2 d and 2.5x)."""
    half = 0.5 if causal else 1.0
    return (2.0 * b * h * s * s * (d + dv) * half, 2.0 * b * h * s * s * (3 * d + 2 * dv) * half)


def time_calls(torch, fn, nsets, target_s=TARGET_S):
    """Median milliseconds of fn(set_index), each call under its own event pair,
    for about target_s seconds."""
    fn(0)  # first call: backend/graph setup
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(3):
        fn(i % nsets)
    stop.record()
    stop.synchronize()
    per_ms = max(start.elapsed_time(stop) / 3.0, 1e-3)
    nwarm = min(500, max(3, int(WARMUP_S * 1e3 / per_ms)))
    runs = min(MAX_RUNS, max(MIN_RUNS, int(target_s * 1e3 / per_ms)))
    k = 0
    for _ in range(nwarm):
        fn(k % nsets)
        k += 1
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        starts[i].record()
        fn(k % nsets)
        stops[i].record()
        k += 1
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(starts, stops))


def make_sets(torch, b, h, s, d, l2_bytes, grad, dv=0):
    dv = dv or d
    set_bytes = b * h * s * (2 * d + dv) * 2 * (2 if grad else 1)  # q, k, v (+ o, do, grads)
    n = max(2, min(16, -(-2 * l2_bytes // set_bytes) + 1))
    sets = []
    for _ in range(n):
        t = [torch.randn(b, h, s, x, device="cuda", dtype=torch.bfloat16) for x in (d, d, dv)]
        if grad:
            for x in t:
                x.requires_grad_(True)
        sets.append(t)
    return sets


def refusal(e):
    """'unsupported: ...' for a backend that refuses the shape (PyTorch's 'No available
    kernel' or a head-dim check), else the error's first line."""
    msg = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
    low = msg.lower()
    if "no available kernel" in low or "head_dim" in low or "head dim" in low or "not supported" in low:
        return "unsupported: " + msg
    return msg


def bench_point(torch, F, sdpa_kernel, SDPBackend, d, s, causal, l2_bytes, do_bwd, dv=0):
    b, h = TOKENS // s, HIDDEN // (dv or d)
    flops, bflops = flops_hv(b, h, s, d, dv, causal) if dv else (fwd_flops(b, h, s, d, causal), None)
    bflops = bflops or 2.5 * flops
    res = {"d": d, "s": s, "causal": bool(causal)}
    if dv:
        res["dv"] = dv
    notes = []
    backends = BACKENDS_HV if dv else BACKENDS
    sets = make_sets(torch, b, h, s, d, l2_bytes, False, dv)
    for key, backend in backends:
        res[key + "_fwd"] = None
        try:
            with sdpa_kernel([getattr(SDPBackend, backend)]):
                def fwd(i):
                    q, k, v = sets[i]
                    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                out = fwd(0)
                if not torch.isfinite(out).all():
                    raise RuntimeError("non-finite output")
                del out
                ms = time_calls(torch, fwd, len(sets))
            res[key + "_fwd"] = round(flops / (ms * 1e-3) / 1e12, 2)
        except (RuntimeError, ValueError) as e:  # includes torch.OutOfMemoryError
            notes.append("%s fwd: %s" % (key, refusal(e)))
            torch.cuda.synchronize()
    del sets
    if do_bwd:
        gsets = make_sets(torch, b, h, s, d, l2_bytes, True, dv)
        for key, backend in backends:
            res[key + "_bwd"] = None
            try:
                with sdpa_kernel([getattr(SDPBackend, backend)]):
                    graphs = []
                    for q, k, v in gsets:
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                        graphs.append((o, torch.randn_like(o), (q, k, v)))

                    def bwd(i):
                        o, do, inputs = graphs[i]
                        return torch.autograd.grad(o, inputs, do, retain_graph=True)
                    ms = time_calls(torch, bwd, len(graphs))
                    del graphs
                res[key + "_bwd"] = round(bflops / (ms * 1e-3) / 1e12, 2)
            except (RuntimeError, ValueError) as e:
                notes.append("%s bwd: %s" % (key, refusal(e)))
                torch.cuda.synchronize()
        del gsets
    torch.cuda.empty_cache()
    return res, notes


def fmt(x):
    return "%8.1f" % x if x is not None else "%8s" % "-"


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print("SKIP sdpa_bench: torch not available (%s)" % e)
        return 0
    if not torch.cuda.is_available():
        print("SKIP sdpa_bench: no GPU")
        return 0
    dev = torch.cuda.current_device()
    prop = torch.cuda.get_device_properties(dev)
    l2_bytes = getattr(prop, "L2_cache_size", 50 << 20)
    print("sdpa_bench: torch %s, %s (L2 %d MB)" % (torch.__version__, prop.name,
                                                 l2_bytes >> 20))
    names = [k for k, _ in (BACKENDS_HV if a.hdim_v else BACKENDS)]
    cols = [k + "_fwd" for k in names] + ([k + "_bwd" for k in names] if a.bwd else [])
    if a.hdim_v:
        print("sdpa_bench: hdim_v %d (q, k of hdim, v of %d; h = %d)" % (a.hdim_v, a.hdim_v, HIDDEN // a.hdim_v))
    print("%-5s %-6s %-6s " % ("hdim", "seqlen", "causal") + " ".join("%9s" % c for c in cols))
    sys.stdout.flush()
    results = []
    for d in a.hdim:
        for s in a.seqlen:
            for c in a.causal:
                res, notes = bench_point(torch, F, sdpa_kernel, SDPBackend, d, s, c,
                                         l2_bytes, a.bwd, a.hdim_v)
                results.append(res)
                print("%-5d %-6d %-6d " % (d, s, c) + " ".join(" " + fmt(res[k]) for k in cols))
                for n in notes:
                    print("    (%s)" % n)
                sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        print("sdpa_bench: wrote %s" % a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
