#!/usr/bin/env python3
"""py_overhead: the host cost of one decode-sized attention call from Python.

Shape: q [batch, 1, 32, 128] bf16 against a contiguous KV cache
[batch, 4096, 8, 128] (GQA 32/8), batch 1, 2, 4, 8. Entry points:
  ctypes        fmha_tile.attention_with_kvcache(q, k_cache, v_cache, seqlens_k)
  ctypes out=   the same with a preallocated output (no torch.empty per call)
  torch op      torch.ops.fmha_tile.decode(q, k_cache, v_cache, seqlens_k=...)
                (the custom op: torch.compile's route; the dispatcher adds its cost)
  op .default   the same through the OpOverload (no overload resolution per call)
  fwd ctypes    fmha_tile.attention(q, k, v) with the cache as k / v (s_q = 1 through
                the dense forward, no split-KV)
  fwd plan      plan.run(q, k, v) of a fmha_tile.forward_plan() made once (the same
                dense forward; fmha_fwd still selects its kernel per call in C)
  plan.run      plan.run(q, k_cache, v_cache, seqlens_k) of a fmha_tile.decode_plan()
                made once (the fast path: checks against the plan's record, pointers
                patched into a kept struct, fmha_decode_run)
  plan out=     the same with a preallocated output
  plan launch   plan.launch() alone on args filled once: fmha_decode_run from Python
                (the C checks and the launches), the floor under plan.run
  plan layers   plan out= over --layers sets of q / caches / outputs in turn (other
                pointers every call, as the layers of a model step)
  sdpa layers   sdpa over the same sets in turn
  sdpa          torch.nn.functional.scaled_dot_product_attention on [b, h, s, d]
                views of the same tensors (enable_gqa=True where torch has it, else
                K/V expanded once outside the loop)

For each: N calls in a loop, torch.cuda.synchronize() only before and after.
  host us   perf_counter over the loop up to the last call's return, / N: the CPU
            cost of a call (argument checks, struct filling, the launches). N is
            kept below the launch queue's depth, so the CPU does not wait for the
            GPU inside the loop.
  wall us   the same loop including the final synchronize, / N: max(host, GPU)
            once the loop is long; a call whose kernels outlast its host cost is
            GPU bound here.
  gpu us    CUDA events around the same loop, / N.
Median of 7 repetitions after a warm-up. The issue's target: host + launch
< 15 us per decode call on an H100. A summary table follows: host us per call
of plan.run, plan out=, plan launch and sdpa, and whether plan.run meets it.

  PYTHONPATH=python FMHA_TILE_LIB=build/libfmha_tile.so python3 bench/py_overhead.py
      [--batch 1,2,4,8] [--seqlen 4096] [--calls 200] [--layers 8] [--json out.json]

Without torch or a GPU: a SKIP line, exit 0.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))


def time_loop(torch, fn, calls, reps=7):
    """-> (host us, wall us, gpu us) per call, medians."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    host, wall, gpu = [], [], []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        e0.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        e1.record()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) / calls * 1e6)
        wall.append((t2 - t0) / calls * 1e6)
        gpu.append(e0.elapsed_time(e1) / calls * 1e3)
    return statistics.median(host), statistics.median(wall), statistics.median(gpu)


TARGET_US = 15.0


def summary(rows):
    """The short table: host us per call of the fast path next to sdpa's."""
    cols = ["plan.run", "plan out=", "plan launch", "plan layers", "sdpa", "sdpa layers", "ctypes", "fwd plan"]
    by = {}
    for r in rows:
        by.setdefault(r["batch"], {})[r["entry"]] = r["host_us"]
    print()
    print("host us per call (Python + launch); target < %.0f us for plan.run" % TARGET_US)
    hdr = "%-6s" % "batch" + "".join("%12s" % c for c in cols) + "  target"
    print(hdr)
    print("-" * len(hdr))
    for b in sorted(by):
        cells = by[b]
        line = "%-6d" % b + "".join("%12s" % ("n/a" if cells.get(c) is None else "%.1f" % cells[c]) for c in cols)
        got = cells.get("plan.run")
        line += "  " + ("n/a" if got is None else ("met" if got < TARGET_US else "missed"))
        print(line)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", default="1,2,4,8")
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hk", type=int, default=8)
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--layers", type=int, default=8, help="sets of tensors of the layers rows (0: no such rows)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("SKIP py_overhead: PyTorch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("SKIP py_overhead: no CUDA GPU")
        return 0
    import fmha_tile
    try:
        fmha_tile.version()
    except fmha_tile.FmhaLibraryError as e:
        print("SKIP py_overhead: %s" % str(e).splitlines()[0])
        return 0
    ops = None
    try:
        import fmha_tile.ops as ops
    except ImportError as e:
        print("py_overhead: no custom ops (%s); the torch op column is n/a" % e)
    import torch.nn.functional as F

    dev, dt = "cuda", torch.bfloat16
    hq, hk, d, s = a.hq, a.hk, a.hdim, a.seqlen
    try:   # enable_gqa: torch >= 2.5
        t = torch.zeros(1, 2, 1, 8, device=dev, dtype=dt)
        F.scaled_dot_product_attention(t, t[:, :1], t[:, :1], enable_gqa=True)
        gqa_kw = {"enable_gqa": True}
    except (TypeError, RuntimeError):
        gqa_kw = None
    print("py_overhead: %s, torch %s, fmha_tile %s; q [b, 1, %d, %d], cache [b, %d, %d, %d] bf16, "
          "%d calls per timing" % (torch.cuda.get_device_name(), torch.__version__,
                                   fmha_tile.version(), hq, d, s, hk, d, a.calls))
    rows = []
    hdr = "%-6s %-12s %9s %9s %9s" % ("batch", "entry", "host us", "wall us", "gpu us")
    print(hdr)
    print("-" * len(hdr))
    for b in [int(x) for x in a.batch.split(",")]:
        q = torch.randn(b, 1, hq, d, device=dev, dtype=dt)
        kc = torch.randn(b, s, hk, d, device=dev, dtype=dt)
        vc = torch.randn(b, s, hk, d, device=dev, dtype=dt)
        lens = torch.full((b,), s, dtype=torch.int32, device=dev)
        out = torch.empty_like(q)
        qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
        if gqa_kw is None:
            kt = kt.repeat_interleave(hq // hk, 1)
            vt = vt.repeat_interleave(hq // hk, 1)
        sdpa_kw = gqa_kw or {}
        entries = [
            ("ctypes", lambda: fmha_tile.attention_with_kvcache(q, kc, vc, lens)),
            ("ctypes out=", lambda: fmha_tile.attention_with_kvcache(q, kc, vc, lens, out=out)),
        ]
        if ops is not None:
            entries.append(("torch op", lambda: torch.ops.fmha_tile.decode(q, kc, vc, seqlens_k=lens)))
            entries.append(("op .default",
                            lambda: torch.ops.fmha_tile.decode.default(q, kc, vc, seqlens_k=lens)))
        entries.append(("fwd ctypes", lambda: fmha_tile.attention(q, kc, vc)))
        try:
            fplan = fmha_tile.forward_plan(q, kc, vc)
            entries.append(("fwd plan", lambda: fplan.run(q, kc, vc)))
        except Exception as e:
            fplan = None
            print("%-6d %-12s n/a (%s: %s)" % (b, "fwd plan", type(e).__name__, str(e)[:80]))
        try:
            plan = fmha_tile.decode_plan(q, kc, vc, lens)
            filled = fmha_tile.decode_plan(q, kc, vc, lens)
            filled.fill(q, kc, vc, lens, out=out)
        except Exception as e:  # a library without decode: the rows say n/a
            plan = filled = None
            print("%-6d %-12s n/a (%s: %s)" % (b, "plan", type(e).__name__, str(e)[:80]))
        if plan is not None:
            entries += [
                ("plan.run", lambda: plan.run(q, kc, vc, lens)),
                ("plan out=", lambda: plan.run(q, kc, vc, lens, out=out)),
                ("plan launch", lambda: (filled.launch(), out)[1]),
            ]
        entries.append(("sdpa", lambda: F.scaled_dot_product_attention(qt, kt, vt, **sdpa_kw)))
        sets = []
        for i in range(a.layers):   # other tensors per layer (the layer 0 set is the one above)
            if i == 0:
                sets.append((q, kc, vc, out, qt, kt, vt))
                continue
            q_, kc_, vc_ = torch.randn_like(q), torch.randn_like(kc), torch.randn_like(vc)
            kt_, vt_ = kc_.transpose(1, 2), vc_.transpose(1, 2)
            if gqa_kw is None:
                kt_, vt_ = kt_.repeat_interleave(hq // hk, 1), vt_.repeat_interleave(hq // hk, 1)
            sets.append((q_, kc_, vc_, torch.empty_like(q_), q_.transpose(1, 2), kt_, vt_))
        if sets:
            turn = [0]

            def layer():
                i = turn[0] = (turn[0] + 1) % len(sets)
                return sets[i]

            def plan_layers():
                q_, kc_, vc_, o_, _, _, _ = layer()
                return plan.run(q_, kc_, vc_, lens, out=o_)

            def sdpa_layers():
                _, _, _, _, qt_, kt_, vt_ = layer()
                return F.scaled_dot_product_attention(qt_, kt_, vt_, **sdpa_kw)

            if plan is not None:
                entries.append(("plan layers", plan_layers))
            entries.append(("sdpa layers", sdpa_layers))
        with torch.inference_mode():
            ref = F.scaled_dot_product_attention(qt, kt, vt, **sdpa_kw).transpose(1, 2).float()
            for name, fn in entries:
                try:
                    if name.endswith(" layers"):   # checked on layer 0's set
                        turn[0] = len(sets) - 1
                    r = fn()
                    r = r[0] if isinstance(r, tuple) else r
                    if name.startswith("sdpa"):
                        r = r.transpose(1, 2)
                    err = ((r.float() - ref).norm() / ref.norm()).item()
                    host, wall, gpu = time_loop(torch, fn, a.calls)
                except Exception as e:  # a refused call is a row of n/a, not the end of the table
                    print("%-6d %-12s n/a (%s: %s)" % (b, name, type(e).__name__, str(e)[:80]))
                    rows.append({"batch": b, "entry": name, "host_us": None, "wall_us": None,
                                 "gpu_us": None, "error": str(e)})
                    continue
                flag = "" if err < 2e-2 else "  (rel-L2 vs sdpa %.1e!)" % err
                print("%-6d %-12s %9.1f %9.1f %9.1f%s" % (b, name, host, wall, gpu, flag))
                rows.append({"batch": b, "entry": name, "host_us": host, "wall_us": wall,
                             "gpu_us": gpu, "rel_l2_vs_sdpa": err})
        del q, kc, vc, kt, vt, out, sets, plan, filled, fplan
        torch.cuda.empty_cache()
    summary(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "seqlen": s, "hq": hq, "hk": hk, "hdim": d, "calls": a.calls,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
