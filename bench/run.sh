#!/usr/bin/env bash
# bench/run.sh: build bench_fwd, run it, run the PyTorch SDPA baseline, print the report.
#
#   bench/run.sh [--quick] [--hdim 64,128,256] [--seqlen 512,...,16k] [--causal 0,1]
#                [--bwd] [--build-only] [--no-sdpa]
#   bench/run.sh --features [options of bench/run_features.sh]
#
# --features (first argument) runs bench/run_features.sh instead: dropout and the
# elementwise bias, forward and backward, against SDPA's backends with ratios.
#
# Options other than the three below go to both bench_fwd and sdpa_bench.py (do not pass
# --json: run.sh sets it). --bwd goes to sdpa_bench.py only (backward baseline);
# --build-only stops after the build; --no-sdpa skips the PyTorch baseline.
#
# Environment: NVCC (default nvcc, else /usr/local/cuda/bin/nvcc), BUILD (default
# build; the binary is $BUILD/bench/bench_fwd), OUT_DIR (default $BUILD/bench),
# PYTHON (default python3), ANCHORS (reference anchors JSON; default the first of
# shared/anchors/h100_torch_sdpa_*.json, ../shared/anchors/... if present),
# NVCC_FLAGS (extra flags appended to the nvcc line), SKIP_BUILD=1 (reuse an
# existing binary).
#
# Outputs in $OUT_DIR: fmha_fwd.json, sdpa.json, report.md, and the logs
# bench_fwd.log, sdpa_bench.log. Without a GPU it prints a SKIP line and exits 0.
set -euo pipefail

if [ "${1:-}" = --features ]; then
    shift
    exec "$(dirname "${BASH_SOURCE[0]}")/run_features.sh" "$@"
fi

# shellcheck source=bench/bench_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_env.sh"

build_only=0
run_sdpa=1
common=()
sdpa_extra=()
for arg in "$@"; do
    case "$arg" in
        --build-only) build_only=1 ;;
        --no-sdpa) run_sdpa=0 ;;
        --bwd) sdpa_extra+=("--bwd") ;;
        --json|--json=*) echo "run.sh: --json is set by run.sh (use OUT_DIR)" >&2; exit 2 ;;
        *) common+=("$arg") ;;
    esac
done

# ---- GPU present? (nvidia-smi when it exists; else bench_fwd decides below) ----------
if [ "$build_only" = 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
    if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        echo "SKIP bench/run.sh: no GPU"
        exit 0
    fi
fi

# ---- build ---------------------------------------------------------------------------
if ! command -v "$NVCC" >/dev/null 2>&1; then
    echo "SKIP bench/run.sh: nvcc not found (set NVCC)"
    exit 0
fi
BIN="$BUILD/bench/bench_fwd"
mkdir -p "$BUILD/bench" "$OUT_DIR"
if [ "${SKIP_BUILD:-0}" = 1 ] && [ -x "$BIN" ]; then
    echo "run.sh: using the existing $BIN (SKIP_BUILD=1)"
else
    echo "run.sh: building $BIN with $NVCC"
    # shellcheck disable=SC2086
    "$NVCC" -x cu -std=c++17 -O3 \
        -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 \
        -Iinclude ${NVCC_FLAGS:-} bench/bench_fwd.cu -o "$BIN"
fi
if [ "$build_only" = 1 ]; then
    echo "run.sh: built $BIN"
    exit 0
fi

# ---- fmha_tile -----------------------------------------------------------------------
FMHA_JSON="$OUT_DIR/fmha_fwd.json"
SDPA_JSON="$OUT_DIR/sdpa.json"
rm -f "$FMHA_JSON" "$SDPA_JSON"
set +e
"$BIN" "${common[@]+"${common[@]}"}" --json "$FMHA_JSON" 2>&1 | tee "$OUT_DIR/bench_fwd.log"
rc=${PIPESTATUS[0]}
set -e
if grep -q '^SKIP' "$OUT_DIR/bench_fwd.log"; then
    exit 0
fi
if [ "$rc" != 0 ]; then
    echo "run.sh: bench_fwd failed (exit $rc)" >&2
    [ -f "$FMHA_JSON" ] || exit "$rc"
fi

# ---- PyTorch SDPA baseline -----------------------------------------------------------
if [ "$run_sdpa" = 1 ]; then
    set +e
    "$PYTHON" bench/sdpa_bench.py "${common[@]+"${common[@]}"}" \
        "${sdpa_extra[@]+"${sdpa_extra[@]}"}" --json "$SDPA_JSON" 2>&1 \
        | tee "$OUT_DIR/sdpa_bench.log"
    src=${PIPESTATUS[0]}
    set -e
    [ "$src" = 0 ] || echo "run.sh: sdpa_bench.py failed (exit $src); report without it" >&2
fi

# ---- report --------------------------------------------------------------------------
if [ -z "${ANCHORS:-}" ]; then
    for f in shared/anchors/h100_torch_sdpa_*.json ../shared/anchors/h100_torch_sdpa_*.json; do
        if [ -f "$f" ]; then ANCHORS="$f"; break; fi
    done
fi
report_args=("$FMHA_JSON")
[ -f "$SDPA_JSON" ] && report_args+=("$SDPA_JSON")
[ -n "${ANCHORS:-}" ] && [ -f "$ANCHORS" ] && report_args+=(--anchors "$ANCHORS")
echo
"$PYTHON" bench/report.py "${report_args[@]}" --out "$OUT_DIR/report.md"
echo "run.sh: outputs in $OUT_DIR"
exit "$rc"
