#!/bin/sh
# python/tests/run.sh [PYTHON] [BUILD]: the Python package's pytest suite as a
# tests/run_all.sh suite (make test, make pytest).
#
# Runs only where `PYTHON -c "import torch, pytest; assert torch.cuda.is_available()"`
# works and the library is built ($FMHA_TILE_LIB, else BUILD/libfmha_tile.so);
# otherwise it prints a SKIP line. Its last line is always "N passed, M failed"
# (pytest's failures and errors count as failed; skipped tests are reported on
# the line before). Exit status 1 on any failure.
python=${1:-python3}
build=${2:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if ! "$python" -c "import torch, pytest; assert torch.cuda.is_available()" >/dev/null 2>&1; then
    echo "SKIP python tests: need $python with torch, pytest and a CUDA GPU"
    echo "0 passed, 0 failed"
    exit 0
fi
lib=${FMHA_TILE_LIB:-$build/libfmha_tile.so}
case "$lib" in /*) ;; *) lib="$root/$lib" ;; esac
if [ ! -f "$lib" ]; then
    echo "SKIP python tests: $lib not built (make lib)"
    echo "0 passed, 0 failed"
    exit 0
fi

out=$(cd "$root" && FMHA_TILE_LIB="$lib" PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" \
      "$python" -m pytest -q -rfEs -p no:cacheprovider python/tests 2>&1)
rc=$?
printf '%s\n' "$out"
# pytest's summary: "3 failed, 40 passed, 2 skipped, 1 error in 12.3s" (maybe between ='s)
summary=$(printf '%s\n' "$out" | grep -E '[0-9]+ (passed|failed|skipped|errors?|deselected|xfailed|xpassed)' | tail -n 1)
count() { printf '%s' "$summary" | grep -oE "[0-9]+ $1" | grep -oE '[0-9]+' | head -n 1; }
p=$(count passed); f=$(count failed); e=$(count 'errors?'); s=$(count skipped)
p=${p:-0}; f=${f:-0}; e=${e:-0}; s=${s:-0}
f=$((f + e))
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL python tests: pytest exit status $rc"
    f=1
fi
echo "python tests: $p passed, $f failed (incl. $e errors), $s skipped"
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
