#!/usr/bin/env bash
# bench/run_decode.sh: split-KV decode bandwidth, fmha_tile against PyTorch SDPA, in
# one go from the repo root:
#
#   1. build $BUILD/bench/bench_decode (sm_90a) unless SKIP_BUILD=1 finds it there;
#   2. bench_decode: the decode grid of the design brief (bf16 queries, hq 32 / hk 8,
#      hdim 128, seqlen_q 1, batch 1/8/64 x seqlen_k 8k/32k), contiguous and paged
#      caches, bf16 and e4m3 KV, a 1 GiB device copy as the ceiling, and one model
#      step of 32 layers in a CUDA graph against 32 plain launches;
#   3. bench/sdpa_decode.py: SDPA's flash and cuDNN backends on the same shapes
#      (per call, as the anchors were measured, and replayed in a CUDA graph);
#   4. one table: shape | cache | ours TB/s | splits | flash TB/s | cuDNN TB/s |
#      ours/cuDNN | % copy | cuDNN graph TB/s | ours/cuDNN graph, then the fp8/bf16
#      tokens/s ratios and the graph step lines.
#
#   bench/run_decode.sh [--quick] [--batch 1,8,64] [--kv 8k,32k] [--hq 32] [--hk 8]
#                       [--hdim 128] [--seqlen_q 1] [--max_gb 16] [--target_s S]
#                       [--layouts ..] [--tables ..] [--pages ..] [--kv_dtype ..]
#                       [--kv_scale ..] [--splits ..] [--graph_layers 32]
#                       [--no-sdpa] [--build-only]
#
# Shape options (and --quick, --max_gb, --target_s) go to both programs; the cache,
# dtype, split and graph options to bench_decode only (bench_decode --help).
# TB/s: K+V bytes read (batch x seqlen_k x nhead_k x hdim x 2 x element size) / time.
#
# Environment: NVCC (default nvcc, else /usr/local/cuda/bin/nvcc), BUILD (default
# build; the binary is $BUILD/bench/bench_decode), OUT_DIR (default $BUILD/bench),
# PYTHON (default python3), SKIP_BUILD=1 (reuse an existing binary), NVCC_FLAGS
# (appended to the nvcc line).
# Outputs in $OUT_DIR: fmha_decode.json, sdpa_decode.json, report_decode.md and the
# logs bench_decode.log, sdpa_decode.log. Exit status: that of bench_decode (1 when a
# point failed or an output was off); without a GPU a SKIP line and 0.
set -euo pipefail

# shellcheck source=bench/bench_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_env.sh"

build_only=0; run_sdpa=1; common=(); fmha_only=(); graph_set=0
while [ $# -gt 0 ]; do
    case "$1" in
        --build-only) build_only=1 ;;
        --no-sdpa) run_sdpa=0 ;;
        --quick) common+=("$1") ;;
        --batch|--kv|--hq|--hk|--hdim|--seqlen_q|--max_gb|--target_s)
            [ $# -ge 2 ] || { echo "run_decode.sh: $1 needs a value" >&2; exit 2; }
            common+=("$1" "$2"); shift ;;
        --graph_layers)
            [ $# -ge 2 ] || { echo "run_decode.sh: $1 needs a value" >&2; exit 2; }
            graph_set=1; fmha_only+=("$1" "$2"); shift ;;
        --layouts|--tables|--pages|--kv_dtype|--kv_scale|--splits)
            [ $# -ge 2 ] || { echo "run_decode.sh: $1 needs a value" >&2; exit 2; }
            fmha_only+=("$1" "$2"); shift ;;
        --json|--json=*) echo "run_decode.sh: --json is set by run_decode.sh (use OUT_DIR)" >&2; exit 2 ;;
        *) echo "run_decode.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ "$graph_set" = 1 ] || fmha_only+=(--graph_layers 32)

# ---- GPU present? (nvidia-smi when it exists; else bench_decode decides below) -------
if [ "$build_only" = 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
    if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        echo "SKIP bench/run_decode.sh: no GPU"
        exit 0
    fi
fi

# ---- build -----------------------------------------------------------------------------
BIN="$BUILD/bench/bench_decode"
mkdir -p "$BUILD/bench" "$OUT_DIR"
if [ "${SKIP_BUILD:-0}" = 1 ] && [ -x "$BIN" ]; then
    echo "run_decode.sh: using the existing $BIN (SKIP_BUILD=1)"
else
    if ! command -v "$NVCC" >/dev/null 2>&1; then
        echo "SKIP bench/run_decode.sh: nvcc not found (set NVCC) and no prebuilt $BIN"
        exit 0
    fi
    echo "run_decode.sh: building $BIN with $NVCC"
    # shellcheck disable=SC2086
    "$NVCC" -x cu -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude ${NVCC_FLAGS:-} \
        bench/bench_decode.cu -o "$BIN"
fi
if [ "$build_only" = 1 ]; then
    echo "run_decode.sh: built $BIN"
    exit 0
fi

# ---- fmha_tile -------------------------------------------------------------------------
FMHA_JSON="$OUT_DIR/fmha_decode.json"
SDPA_JSON="$OUT_DIR/sdpa_decode.json"
REPORT="$OUT_DIR/report_decode.md"
rm -f "$FMHA_JSON" "$SDPA_JSON" "$REPORT"
set +e
"$BIN" "${common[@]+"${common[@]}"}" "${fmha_only[@]}" --json "$FMHA_JSON" 2>&1 | tee "$OUT_DIR/bench_decode.log"
rc=${PIPESTATUS[0]}
set -e
if grep -q '^SKIP' "$OUT_DIR/bench_decode.log"; then
    exit 0
fi
if [ "$rc" != 0 ]; then
    echo "run_decode.sh: bench_decode failed (exit $rc)" >&2
    [ -f "$FMHA_JSON" ] || exit "$rc"
fi

# ---- PyTorch SDPA ----------------------------------------------------------------------
if [ "$run_sdpa" = 1 ]; then
    set +e
    "$PYTHON" bench/sdpa_decode.py "${common[@]+"${common[@]}"}" --json "$SDPA_JSON" 2>&1 \
        | tee "$OUT_DIR/sdpa_decode.log"
    src=${PIPESTATUS[0]}
    set -e
    [ "$src" = 0 ] || echo "run_decode.sh: sdpa_decode.py failed (exit $src); report without it" >&2
fi

# ---- report ----------------------------------------------------------------------------
echo
"$PYTHON" - "$FMHA_JSON" "$SDPA_JSON" "$REPORT" <<'EOF'
import json, os, sys

fm = json.load(open(sys.argv[1]))
sd = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else {"rows": []}
SHAPE = ("batch", "kv", "hq", "hk", "hdim", "seqlen_q")
sdk = {tuple(r[k] for k in SHAPE): r for r in sd.get("rows", [])}
copy = fm.get("copy_tbps") or 0.0


def shape(r):
    kv = "%dk" % (r["kv"] // 1024) if r["kv"] % 1024 == 0 else str(r["kv"])
    return "b%d kv%s h%d/%d d%d q%d" % (r["batch"], kv, r["hq"], r["hk"], r["hdim"], r["seqlen_q"])


def cache(r):
    if r["layout"] == "contig":
        return "contig"
    return "%s p%d %s" % (r["layout"], r["page"], r["table"])


def f(x, p=3):
    return ("%.*f" % (p, x)) if isinstance(x, (int, float)) else "n/a"


def ratio(a, b):
    return "%.2f" % (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else "-"


out = ["fmha_tile decode vs PyTorch %s SDPA on %s; K+V bytes read / time per call;" %
       (sd.get("torch", "(not run)"), fm.get("device", "?")),
       "flash/cuDNN: one Python call per timing (the anchors' method); cuDNN graph: calls replayed"
       " in a CUDA graph (kernel time). copy: 1 GiB device to device, read + write: %s TB/s"
       " (torch: %s TB/s)." % (f(copy), f(sd.get("copy_tbps"))),
       "",
       "| shape | cache | ours TB/s | splits | flash TB/s | cuDNN TB/s | ours/cuDNN | % copy | cuDNN graph TB/s | ours/cuDNN graph |",
       "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
expanded = False
for r in fm.get("rows", []):
    if r["kv_dtype"] != "bf16":
        continue
    s = sdk.get(tuple(r[k] for k in SHAPE), {})
    sp = "%d%s" % (r["splits"], "" if r["splits_req"] else " (heu)")
    mark = {k: "*" if s.get(k + "_gqa") == "repeat_interleave" else "" for k in ("flash", "cudnn")}
    expanded = expanded or any(mark.values())
    out.append("| %s | %s | %s | %s | %s%s | %s%s | %s | %s | %s%s | %s |" % (
        shape(r), cache(r), f(r["tbps"]), sp, f(s.get("flash")), mark["flash"], f(s.get("cudnn")), mark["cudnn"],
        ratio(r["tbps"], s.get("cudnn")), "%.1f" % (100.0 * r["tbps"] / copy) if copy else "-",
        f(s.get("cudnn_graph")), mark["cudnn"], ratio(r["tbps"], s.get("cudnn_graph"))))
if expanded:
    out += ["", "* SDPA refused enable_gqa: K/V expanded with repeat_interleave to nhead_q heads (it reads"
                " nhead_q/nhead_k times the bytes counted)"]
notes = sorted({"%s: %s" % (shape(s), n) for s in sd.get("rows", []) for n in s.get("notes", [])})
gqa = sorted({"%s %s" % (k, s[k + "_gqa"]) for s in sd.get("rows", []) for k in ("flash", "cudnn")
              if s.get(k + "_gqa")})
if gqa:
    out += ["", "SDPA GQA path: " + ", ".join(gqa)]
if notes:
    out += ["", "SDPA notes:"] + ["  " + n for n in notes]

fr = fm.get("fp8_ratios", [])
if fr:
    out += ["", "fp8 KV vs bf16 KV, tokens/s ratio (same shape, cache, split request):"]
    for r in fr:
        out.append("fp8/bf16 %-26s | %-22s | descales %-6s | %.2fx (%.2f vs %.2f us)" % (
            shape(r), cache(r), r["kv_scale"], r["tokens_ratio"], r["fp8_us"], r["bf16_us"]))
for g in fm.get("graph", []):
    if g is fm["graph"][0]:
        out += ["", "CUDA graph, one model step (layer l on cache l, one plan, bf16 KV):"]
    out.append("graph %-26s | %-22s | %d layers | graph %.1f us/step (%.2f us/layer, %.3f TB/s) | "
               "plain %.1f us/step (%.2f us/layer) | launch cost %.2f us/layer" % (
                   shape(g), cache(g), g["layers"], g["graph_us_step"], g["graph_us_layer"], g["graph_tbps"],
                   g["plain_us_step"], g["plain_us_layer"], g["plain_us_layer"] - g["graph_us_layer"]))
text = "\n".join(out) + "\n"
sys.stdout.write(text)
open(sys.argv[3], "w").write(text)
EOF
echo "run_decode.sh: outputs in $OUT_DIR"
exit "$rc"
