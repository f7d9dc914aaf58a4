#!/bin/sh
# build_cost.sh: what building fmha_tile costs on this machine, as the
# README's build-cost table (markdown on stdout).
#
# Measured from a clean build directory each (nothing reused):
#   one-variant user unit  nvcc -c of a unit declaring one forward row
#                          (bf16, hdim 128, mask; its tuned tiles), both archs
#   make run               the example's one-row build, to the first result
#                          (the build only where there is no GPU)
#   make -j$JOBS lib       the shared library (every family of the default
#                          set), and its size
#   make -j$JOBS test      (FULL=1 only: tens of minutes on two cores) the
#                          whole test build, no test run (make check)
# Environment: JOBS (default: the cores), BUILD_ROOT (default
# /tmp/fmha_tile_build_cost), NVCC (default nvcc or /usr/local/cuda/bin/nvcc),
# FMHA_TILE_ARCHS (default "sm_80 sm_90a"), FULL=1.
set -eu
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
ROOT=${BUILD_ROOT:-/tmp/fmha_tile_build_cost}
ARCHS=${FMHA_TILE_ARCHS:-sm_80 sm_90a}
if [ -z "${NVCC:-}" ]; then
    if command -v nvcc >/dev/null 2>&1; then NVCC=nvcc; else NVCC=/usr/local/cuda/bin/nvcc; fi
fi
if ! command -v "$NVCC" >/dev/null 2>&1; then echo "SKIP build_cost.sh: nvcc not found"; exit 0; fi
rm -rf "$ROOT"; mkdir -p "$ROOT"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }
gencode=""
for a in $ARCHS; do gencode="$gencode -gencode=arch=compute_${a#sm_},code=$a"; done

# one-variant user unit
cat > "$ROOT/one_variant.cu" <<'EOF'
#include "fmha_tile.h"
#define ONE_ROW(X) X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(one_row, ONE_ROW)
const fmha_kernel_set *my_set(void) { return &one_row; }
EOF
t0=$(now)
"$NVCC" -x cu -std=c++17 -O3 -Iinclude $gencode -c "$ROOT/one_variant.cu" -o "$ROOT/one_variant.o"
one=$(secs "$t0" "$(now)")

t0=$(now)
make -s BUILD="$ROOT/run" FMHA_TILE_ARCHS="$ARCHS" "$ROOT/run/examples/fmha_fwd_one" >/dev/null
"$ROOT/run/examples/fmha_fwd_one" -b=2 -h=16 -h_k=4 -s=1000 -s_k=1200 -d=128 -prec=bf16 -mask=b -v=1 \
    >/dev/null 2>&1 || true
run=$(secs "$t0" "$(now)")

t0=$(now)
make -s -j"$JOBS" BUILD="$ROOT/lib" FMHA_TILE_ARCHS="$ARCHS" lib >"$ROOT/lib.log"
lib=$(secs "$t0" "$(now)")
so=$(wc -c < "$ROOT/lib/libfmha_tile.so")
units=$(ls "$ROOT"/lib/lib/*.o | wc -l)
slowest=$(sed -n 's/^ *built .*\/\([a-z0-9_]*\)\.o (\([0-9]*\) s)$/\2 \1/p' "$ROOT/lib.log" | sort -n | tail -n 1)

echo "Build cost on $(nproc 2>/dev/null || echo '?') cores ($(uname -m)), $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/nvcc \1/p'), archs: $ARCHS, $(date -u +%Y-%m-%d)"
echo
echo "| what | time | size |"
echo "|---|---:|---:|"
echo "| one-variant user unit (one forward row, nvcc -c) | $one s | |"
echo "| \`make run\` (build, then the first validated result where there is a GPU) | $run s | |"
echo "| \`make -j$JOBS lib\` ($units units; slowest: ${slowest#* }, ${slowest%% *} s) | $lib s | $(awk -v b="$so" 'BEGIN { printf "%.1f MB", b / 1048576 }') |"
if [ "${FULL:-0}" = 1 ]; then
    t0=$(now)
    make -s -j"$JOBS" BUILD="$ROOT/test" FMHA_TILE_ARCHS="$ARCHS" check >/dev/null
    echo "| \`make -j$JOBS check\` (everything \`make test\` builds) | $(secs "$t0" "$(now)") s | |"
fi
