#!/bin/sh
# Runs the Python examples (examples/python/*.py) and sums up.
# Usage: sh examples/python/run_all.sh [PYTHON] [BUILD]     (make examples-py)
#
# Needs PYTHON (default python3) with torch and a CUDA GPU, and the shared
# library: $FMHA_TILE_LIB, else BUILD/libfmha_tile.so (make lib). Without
# torch or a GPU it prints a SKIP line and "0 passed, 0 failed" and exits 0.
# fmha_tile is imported from $PYTHONPATH, else from this tree's python/.
#
# Every *.py here runs, except _common.py (shared helpers) and sweep.py
# (a benchmark). An example passes when it exits 0 and its last line ends in
# "valid:y", is skipped when it exits 0 with a last line starting "SKIP"
# (e.g. fwd_fp8 off Hopper, jit_kernel_set without nvcc), and fails
# otherwise (a timeout included: EXAMPLE_TIMEOUT seconds, default 300).
# Last line: "N passed, M failed"; exit status 1 on any failure.
python=${1:-${PYTHON:-python3}}
build=${2:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if ! "$python" -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
    echo "SKIP python examples: need $python with torch and a CUDA GPU"
    echo "0 passed, 0 failed"
    exit 0
fi
lib=${FMHA_TILE_LIB:-$build/libfmha_tile.so}
case "$lib" in /*) ;; *) lib="$root/$lib" ;; esac
if [ ! -f "$lib" ]; then
    echo "SKIP python examples: $lib not found (make lib, or set FMHA_TILE_LIB)"
    echo "0 passed, 0 failed"
    exit 0
fi
export FMHA_TILE_LIB="$lib"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
limit=${EXAMPLE_TIMEOUT:-300}
tmo=""
command -v timeout >/dev/null 2>&1 && tmo="timeout $limit"

pass=0; fail=0; skip=0; failed=""
t_all=$(date +%s)
for f in "$here"/*.py; do
    name=$(basename "$f" .py)
    case "$name" in _*|sweep) continue ;; esac
    t0=$(date +%s)
    out=$(cd "$here" && $tmo "$python" "$f" 2>&1); rc=$?
    t1=$(date +%s)
    printf '%s\n' "$out"
    last=$(printf '%s\n' "$out" | tail -n 1)
    case "$rc:$last" in
        0:*valid:y) pass=$((pass + 1)); echo "PASS $name ($((t1 - t0)) s)" ;;
        0:SKIP*)    skip=$((skip + 1)); echo "SKIP $name ($((t1 - t0)) s)" ;;
        *)          fail=$((fail + 1)); failed="$failed $name"
                    echo "FAIL $name (exit $rc, $((t1 - t0)) s)" ;;
    esac
done
echo "python examples: $((pass + fail + skip)) run in $(( $(date +%s) - t_all )) s${failed:+; failed:$failed}"
[ "$skip" -gt 0 ] && echo "$skip skipped"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
