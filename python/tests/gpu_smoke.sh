#!/bin/sh
# gpu_smoke.sh: issue 3 end to end on a GPU machine (shared library, C program,
# Python package, Python benchmark), with a short summary at the end.
#
#   sh python/tests/gpu_smoke.sh          (from anywhere; it cd's to the repo root)
#
# Steps:
#   1. make lib c_api        build/libfmha_tile.so with nvcc (the Makefile checks
#                            that nm -D lists exactly the C API), build/examples/c_api
#                            with gcc
#   2. build/examples/c_api  one forward pass through the C API; must print valid:y
#   3. python/tests/run.sh   pytest on python/tests (host tests + GPU tests vs SDPA)
#   4. bench/py_bench.py --quick   fmha_tile vs SDPA flash/cuDNN, JSON + PNG plots
#
# Environment: PYTHON (default python3), BUILD (default build), OUT (where logs,
# the JSON and the plots go; default $BUILD/smoke; the device tool's $OUT works).
# Exit status 1 when a step failed.
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
PYTHON=${PYTHON:-python3}
BUILD=${BUILD:-build}
dest=${OUT:-$BUILD/smoke}
mkdir -p "$dest"
export PYTHONUNBUFFERED=1
summary=""
fails=0

note() { summary="$summary
$1"; }
step() {  # step NAME LOG CMD...: run, tee to LOG, record PASS/FAIL and seconds
    name=$1; log=$2; shift 2
    echo "==== $name: $*"
    t0=$(date +%s)
    ( "$@" ) > "$log" 2>&1
    rc=$?
    cat "$log"
    t1=$(date +%s)
    if [ "$rc" -eq 0 ] && grep -q '^SKIP ' "$log"; then note "SKIP $name (see $log)"
    elif [ "$rc" -eq 0 ]; then note "PASS $name ($((t1 - t0)) s)"
    else note "FAIL $name (exit $rc, $((t1 - t0)) s; log $log)"; fails=$((fails + 1)); fi
    return $rc
}

echo "gpu_smoke: $(date), in $root"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L
"$PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())" 2>&1

# 1. build -----------------------------------------------------------------------------------
if step "make lib c_api" "$dest/build.log" make lib c_api BUILD="$BUILD"; then
    syms=$(nm -D --defined-only "$BUILD/libfmha_tile.so" | awk 'NF == 3 { print $3 }' | tr '\n' ' ')
    note "     exports: $syms"
    note "     needs:   $(readelf -d "$BUILD/libfmha_tile.so" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
    # 2. the C program ---------------------------------------------------------------------
    step "c_api" "$dest/c_api.log" "$BUILD/examples/c_api"
    note "     $(grep -E '^(valid:|SKIP|c_api: kernel|c_api: [0-9]+ rows)' "$dest/c_api.log" | tr '\n' ' ')"
else
    note "SKIP c_api (no library)"
fi

# 3. pytest -----------------------------------------------------------------------------------
step "pytest" "$dest/pytest.log" sh python/tests/run.sh "$PYTHON" "$BUILD"
note "     $(grep -E '^(python tests:|SKIP)' "$dest/pytest.log" | tail -n 1)"
grep -E '^(FAILED|ERROR) ' "$dest/pytest.log" | head -n 20 | while IFS= read -r l; do echo "  $l"; done > "$dest/pytest_failures.txt"
[ -s "$dest/pytest_failures.txt" ] && note "$(cat "$dest/pytest_failures.txt")"

# 4. benchmark --------------------------------------------------------------------------------
step "py_bench --quick" "$dest/py_bench.log" "$PYTHON" bench/py_bench.py --quick \
    --json "$dest/py_bench_quick.json" --plot-dir "$dest"
note "$(grep -E '^(hdim|[0-9]+ +[0-9]+ +[01] |py_bench: host|SKIP)' "$dest/py_bench.log" | sed 's/^/     /')"

echo
echo "==== gpu_smoke summary (logs, JSON and plots in $dest)$summary"
echo "gpu_smoke: $fails step(s) failed"
[ "$fails" -eq 0 ]
