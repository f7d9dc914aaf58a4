#!/usr/bin/env bash
# bench/run_bwd.sh: build bench_bwd, run it, run PyTorch SDPA's backward (flash and
# cuDNN) on the same grid in the same session, print the comparison.
#
#   bench/run_bwd.sh [--quick] [--hdim 64,128] [--seqlen 1k,...,16k] [--causal 0,1]
#                    [--det 0,1] [--dtype bf16|fp16] [--hdim_v N] [--padded 0|1]
#                    [--no-sdpa] [--build-only]
#
# MLA (unequal head dims): --hdim 192 --hdim_v 128 times the 192_128 kernels
# (--padded 1: the 256 kernels, V padded) and SDPA's flash, memory-efficient
# and cuDNN backends with v of 128 columns (a backend that refuses the shape:
# "-" and its reason in sdpa_bwd.log); FLOPs 2 s^2 (3 hdim + 2 hdim_v) a head.
#
# Outputs in $OUT_DIR (default $BUILD/bench): fmha_bwd.json, sdpa_bwd.json,
# report_bwd.md and the logs. The report gives fmha_tile's backward TFLOPS per point,
# the ratio to flash and cuDNN measured here, and the deterministic / non-deterministic
# ratio; its summary line is the smallest ratio to flash at hdim 64/128, seqlen >= 2k.
# Without a GPU it prints a SKIP line and exits 0.
set -euo pipefail

# shellcheck source=bench/bench_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_env.sh"

build_only=0; run_sdpa=1; common=(); fmha_only=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build-only) build_only=1 ;;
        --no-sdpa) run_sdpa=0 ;;
        --det|--dtype|--padded) fmha_only+=("$1" "$2"); shift ;;
        --json|--json=*) echo "run_bwd.sh: --json is set by run_bwd.sh (use OUT_DIR)" >&2; exit 2 ;;
        *) common+=("$1") ;;
    esac
    shift
done

if ! command -v "$NVCC" >/dev/null 2>&1; then echo "SKIP bench/run_bwd.sh: nvcc not found (set NVCC)"; exit 0; fi
BIN="$BUILD/bench/bench_bwd"
mkdir -p "$BUILD/bench" "$OUT_DIR"
if [ "${SKIP_BUILD:-0}" = 1 ] && [ -x "$BIN" ]; then
    echo "run_bwd.sh: using the existing $BIN"
else
    echo "run_bwd.sh: building $BIN"
    "$NVCC" -x cu -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 \
        -Iinclude ${NVCC_FLAGS:-} bench/bench_bwd.cu -o "$BIN"
fi
[ "$build_only" = 1 ] && { echo "run_bwd.sh: built $BIN"; exit 0; }

FMHA_JSON="$OUT_DIR/fmha_bwd.json"; SDPA_JSON="$OUT_DIR/sdpa_bwd.json"
rm -f "$FMHA_JSON" "$SDPA_JSON"
set +e
"$BIN" "${common[@]+"${common[@]}"}" "${fmha_only[@]+"${fmha_only[@]}"}" --json "$FMHA_JSON" 2>&1 | tee "$OUT_DIR/bench_bwd.log"
rc=${PIPESTATUS[0]}
set -e
grep -q '^SKIP' "$OUT_DIR/bench_bwd.log" && exit 0
if [ "$run_sdpa" = 1 ]; then
    # sdpa_bench's default grid starts at 512 and includes hdim 256; pass ours
    hd=64,128; sl=1k,2k,4k,8k,16k
    for ((i = 0; i < ${#common[@]}; i++)); do
        case "${common[$i]}" in --quick) hd=128; sl=2k,8k ;; esac
    done
    for ((i = 0; i < ${#common[@]}; i++)); do
        case "${common[$i]}" in --hdim) hd=${common[$((i + 1))]} ;; --seqlen) sl=${common[$((i + 1))]} ;; esac
    done
    set +e
    "$PYTHON" bench/sdpa_bench.py --hdim "$hd" --seqlen "$sl" "${common[@]+"${common[@]}"}" --bwd \
        --json "$SDPA_JSON" 2>&1 | tee "$OUT_DIR/sdpa_bwd.log"
    set -e
fi
"$PYTHON" - "$FMHA_JSON" "$SDPA_JSON" "$OUT_DIR/report_bwd.md" <<'EOF'
import json, os, sys
fm = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else []
sd = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else []
sdk = {(r["d"], r["s"], bool(r["causal"])): r for r in sd}
nd = {(r["d"], r["s"], r["causal"]): r for r in fm if not r["det"] and r.get("tflops")}
eff = any("efficient_bwd" in r for r in sd)   # unequal head dims: the memory-efficient backend too
lines = ["| hdim | seqlen | causal | det | fmha_tile TFLOPS | flash bwd | cuDNN bwd | / flash | / cuDNN | det / non-det |"
         + (" efficient bwd | / efficient |" if eff else ""),
         "|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if eff else "")]
worst = None
f = lambda x: "%.1f" % x if isinstance(x, (int, float)) else "-"
for r in fm:
    t = r.get("tflops"); s = sdk.get((r["d"], r["s"], r["causal"]), {})
    fl, cu = s.get("flash_bwd"), s.get("cudnn_bwd")
    rf = t / fl if t and fl else None
    rc = t / cu if t and cu else None
    base = nd.get((r["d"], r["s"], r["causal"]))
    rd = t / base["tflops"] if r["det"] and t and base else None
    if rf and not r["det"] and r["s"] >= 2048 and r["d"] in (64, 128):
        worst = rf if worst is None else min(worst, rf)
    hd = "%d" % r["d"] if r.get("dv", r["d"]) == r["d"] else "%d/%d" % (r["d"], r["dv"])
    row = "| %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |" % (hd, r["s"], r["causal"], r["det"], f(t),
          f(fl), f(cu), "%.2f" % rf if rf else "-", "%.2f" % rc if rc else "-", "%.2f" % rd if rd else "-")
    if eff:
        ef = s.get("efficient_bwd")
        row += " %s | %s |" % (f(ef), "%.2f" % (t / ef) if t and ef else "-")
    lines.append(row)
if worst is not None:
    lines.append("\nsmallest ratio to flash (non-deterministic, hdim 64/128, seqlen >= 2k): %.2f" % worst)
open(sys.argv[3], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "run_bwd.sh: outputs in $OUT_DIR"
exit "$rc"
