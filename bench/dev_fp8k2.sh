#!/usr/bin/env bash
# bench/dev_fp8k2.sh: FP8 (e4m3) KV prefill decode variants, one device run,
# from the repo root (carry build/dev):
#
#   1. build/dev/tests/test_prefill --filter fp8 (built with variant e, the
#      one that exercises both K decodes, the mixed query scaling and the row
#      fold); stop unless its last line says 0 failed;
#   2. each variant's bench_prefill --pages 1,16,1024 --tables sglang
#      --fp8_vs_bf16 --kv_scale tensor: its markdown table rows, and the
#      largest fp8 rel-L2 against the contiguous reference.
#
# Variants (compile-time macros, include/fmha_tile/tile/warp_mma.h):
#   FMHAI_FP8K_INT=N     N of every 4 head-dim chunks of K decoded by the integer
#                        trick (times 2^-8, folded into the logit scale) instead of
#                        cvt.rn.f16x2.e4m3x2
#   FMHAI_FP8_ROW_FOLD=1 bf16 queries' row scales folded into the exp2 scale
#                        (no per-score multiply)
# A missing binary is built here (NVCC, default nvcc or /usr/local/cuda/bin/nvcc).
# Exit status: non-zero when a build or a test fails, or a bench run errors.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=build/dev
TP=$B/tests/test_prefill
if [ -z "${NVCC:-}" ]; then
    if command -v nvcc >/dev/null 2>&1; then NVCC=nvcc; else NVCC=/usr/local/cuda/bin/nvcc; fi
fi
# name:INT:ROW_FOLD:what
VARIANTS="a:0:0:baseline_cvt
b:4:0:all_integer_decode
c:2:0:half_cvt_half_integer
d:0:1:row_fold_only
e:2:1:half_half+row_fold
f:1:1:quarter_integer+row_fold
g:3:1:three_quarters_integer+row_fold
h:4:1:all_integer+row_fold"
mkdir -p $B/tests $B/bench
flags() { echo "-DFMHAI_FP8K_INT=$1 -DFMHAI_FP8_ROW_FOLD=$2"; }

# ---- build what is missing
if [ ! -x $TP ]; then
    echo "build: $TP (variant e)"
    $NVCC -x cu -std=c++17 -O3 -Iinclude -Itests $(flags 2 1) -gencode=arch=compute_90a,code=sm_90a \
        tests/gpu/test_prefill.cu -o $TP || { echo "FAIL build"; exit 1; }
fi
while IFS=: read -r n i f w; do
    bp=$B/bench/bench_prefill_$n
    if [ ! -x $bp ]; then
        echo "build: $bp"
        $NVCC -x cu -std=c++17 -O3 -Iinclude $(flags "$i" "$f") -gencode=arch=compute_90a,code=sm_90a \
            bench/bench_prefill.cu -o $bp || { echo "FAIL build"; exit 1; }
    fi
done <<< "$VARIANTS"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null || true

# ---- 1. fp8 tests
echo "== test_prefill --filter fp8 (variant e)"
t0=$(date +%s)
$TP --filter fp8 > $B/test_prefill_fp8.log 2>&1
trc=$?
grep -E '^(FAIL|SKIP)' $B/test_prefill_fp8.log | head -20
last=$(tail -n 1 $B/test_prefill_fp8.log)
echo "test_prefill: $last (exit $trc, $(( $(date +%s) - t0 )) s)"
case "$last" in
    "0 passed, 0 failed") echo "FAIL: nothing ran (no GPU?)"; exit 1 ;;
    *" 0 failed") [ $trc -eq 0 ] || exit 1 ;;
    *) exit 1 ;;
esac

# ---- 2. variants
rc=0
echo "| kv layout | page | table | bf16 TFLOPS | fp8 TFLOPS | fp8/bf16 | bf16 fwd TFLOPS | fp8 kernel |"
while IFS=: read -r n i f w; do
    log=$B/bench/bench_$n.log
    $B/bench/bench_prefill_$n --pages 1,16,1024 --tables sglang --fp8_vs_bf16 --kv_scale tensor > $log 2>&1 || rc=1
    rel=$(sed -n 's/.*rel-L2 vs contiguous [^ ]* \/ \([^ ]*\) .*/\1/p' $log | sort -g | tail -n 1)
    echo "== $n INT=$i ROW_FOLD=$f ($w): max fp8 rel-L2 ${rel:-?}"
    grep -E '^\| (paged|contiguous)' $log | sed -E 's/ \| `[^`]*` \|$/ |/'
    grep -iE 'error|fail' $log | head -3
done <<< "$VARIANTS"
exit $rc
