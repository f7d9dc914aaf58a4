#!/usr/bin/env bash
# bench/run_features.sh: dropout and elementwise bias, fmha_tile against PyTorch SDPA's
# backends measured in the same run; prints one table with the ratios.
#
#   bench/run_features.sh [--quick] [--hdim 64,128] [--seqlen 2k,8k] [--causal 0,1]
#                         [--dropout P] [--math] [--no-sdpa] [--build-only]
#
# Points (the grid of bench_fwd / bench_bwd: bf16, 16k tokens, hidden 2048):
#   dropout  fwd: bench_fwd --dropout P      bwd: bench_bwd --det 0 --dropout P
#   bias1    fwd: bench_fwd --bias 1 ([1, 1, s, s] bf16)
#   bias2    fwd: bench_fwd --bias 2 ([1, h, s, s] bf16)
#   bias1/2  bwd: bench_bwd --bias 1|2 when the binary has that option, else SDPA only
#   mla      fwd: bench_fwd --hdim 192 --hdim_v 128   bwd: bench_bwd --det 0 --hdim 192
#            --hdim_v 128 (DeepSeek MLA's q/k 192, v 128: the 192_128 kernels; 16 heads,
#            whatever --hdim says); fwd+bwd: the two times added (one training step)
# against bench/sdpa_features.py (flash, efficient, cudnn; math with --math), which also
# says which backends accept each feature (SDPA's flash takes no unequal head dims). Defaults: hdim 64,128, seqlen 2k,8k, causal
# 0,1, P = 0.1; --quick: hdim 128, seqlen 8k, not causal. About 2-4 minutes of GPU time
# with the defaults (plus the build, unless SKIP_BUILD=1 finds the binaries).
#
# Environment: as bench/run.sh (NVCC, BUILD, OUT_DIR, PYTHON, SKIP_BUILD=1, NVCC_FLAGS);
# NVCC_ARCH (default sm_90a only). Outputs in $OUT_DIR: feat_*.json, sdpa_features.json,
# report_features.md and the logs. Without a GPU it prints a SKIP line and exits 0.
set -euo pipefail

# shellcheck source=bench/bench_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_env.sh"

build_only=0; run_sdpa=1; quick=0; math=0
hdim=64,128; seqlen=2k,8k; causal=0,1; p=0.1
while [ $# -gt 0 ]; do
    case "$1" in
        --build-only) build_only=1 ;;
        --no-sdpa) run_sdpa=0 ;;
        --math) math=1 ;;
        --quick) quick=1; hdim=128; seqlen=8k; causal=0 ;;
        --hdim) hdim=$2; shift ;;
        --seqlen) seqlen=$2; shift ;;
        --causal) causal=$2; shift ;;
        --dropout) p=$2; shift ;;
        *) echo "run_features.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

if [ "$build_only" = 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
    if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then echo "SKIP bench/run_features.sh: no GPU"; exit 0; fi
fi
ARCH=${NVCC_ARCH:--gencode=arch=compute_90a,code=sm_90a}
FWD="$BUILD/bench/bench_fwd"; BWD="$BUILD/bench/bench_bwd"
mkdir -p "$BUILD/bench" "$OUT_DIR"
for prog in bench_fwd bench_bwd; do
    bin="$BUILD/bench/$prog"
    if [ "${SKIP_BUILD:-0}" = 1 ] && [ -x "$bin" ]; then
        echo "run_features.sh: using the existing $bin"
    elif ! command -v "$NVCC" >/dev/null 2>&1; then
        echo "SKIP bench/run_features.sh: nvcc not found (set NVCC) and no $bin"; exit 0
    else
        echo "run_features.sh: building $bin"
        # shellcheck disable=SC2086
        "$NVCC" -x cu -std=c++17 -O3 $ARCH -Iinclude ${NVCC_FLAGS:-} "bench/$prog.cu" -o "$bin"
    fi
done
[ "$build_only" = 1 ] && { echo "run_features.sh: built $FWD $BWD"; exit 0; }

grid=(--hdim "$hdim" --seqlen "$seqlen" --causal "$causal")
rc=0
# run NAME BINARY ARGS...: one fmha_tile measurement into $OUT_DIR/feat_NAME.json
run() {
    local name=$1 bin=$2; shift 2
    rm -f "$OUT_DIR/feat_$name.json"
    echo "== fmha_tile $name: $(basename "$bin") $*"
    set +e
    "$bin" "${grid[@]}" "$@" --json "$OUT_DIR/feat_$name.json" >"$OUT_DIR/feat_$name.log" 2>&1
    local r=$?
    set -e
    if grep -q '^SKIP' "$OUT_DIR/feat_$name.log"; then cat "$OUT_DIR/feat_$name.log"; exit 0; fi
    if [ "$r" != 0 ]; then
        echo "run_features.sh: $name failed (exit $r), see $OUT_DIR/feat_$name.log" >&2
        tail -n 5 "$OUT_DIR/feat_$name.log" >&2
        rc=1
    fi
}
run fwd_dropout "$FWD" --dropout "$p"
run fwd_bias1 "$FWD" --bias 1
run fwd_bias2 "$FWD" --bias 2
run bwd_dropout "$BWD" --det 0 --dropout "$p"
if "$BWD" --help 2>/dev/null | grep -q -- '--bias'; then
    run bwd_bias1 "$BWD" --det 0 --bias 1
    run bwd_bias2 "$BWD" --det 0 --bias 2
else
    echo "== fmha_tile bwd bias: bench_bwd has no --bias (SDPA columns only)"
fi
# MLA: its own head dims (the grid's seqlen and causal)
saved=("${grid[@]}")
grid=(--hdim 192 --seqlen "$seqlen" --causal "$causal")
run fwd_mla "$FWD" --hdim_v 128
if "$BWD" --help 2>/dev/null | grep -q -- '--hdim_v'; then
    run bwd_mla "$BWD" --det 0 --hdim_v 128
else
    echo "== fmha_tile bwd mla: bench_bwd has no --hdim_v (SDPA columns only)"
fi
grid=("${saved[@]}")

SDPA_JSON="$OUT_DIR/sdpa_features.json"
rm -f "$SDPA_JSON"
if [ "$run_sdpa" = 1 ]; then
    extra=()
    [ "$math" = 1 ] && extra+=(--math)
    set +e
    "$PYTHON" bench/sdpa_features.py "${grid[@]}" --dropout "$p" "${extra[@]+"${extra[@]}"}" \
        --json "$SDPA_JSON" 2>&1 | tee "$OUT_DIR/sdpa_features.log"
    set -e
fi
echo
"$PYTHON" bench/report_features.py "$OUT_DIR" --out "$OUT_DIR/report_features.md"
echo "run_features.sh: outputs in $OUT_DIR"
exit "$rc"
