#!/usr/bin/env bash
# bench/run_prefill.sh: check and measure batch prefill in one go, from the
# repo root (the runs behind bench/RESULTS.md's prefill and FP8 tables):
#
#   1. build $BUILD/tests/test_prefill, $BUILD/tests/test_prefill_portable and
#      $BUILD/bench/bench_prefill (sm_90a), skipped for a binary that is
#      already there (REBUILD=1 forces it);
#   2. the prefill GPU tests on both pipelines (test_prefill: 16-bit KV on the
#      Hopper one; test_prefill_portable: everything on the portable one;
#      TESTS=quick for --quick); stop unless each last line says 0 failed and
#      something ran;
#   3. paged vs contiguous at pages 1, 16, 64, 1024, both tables, LINEAR and
#      VECTORIZED;
#   4. fp8 KV vs bf16 KV at pages 1, 16, 1024 (SGLang), per-tensor then
#      per-page descales, bf16 then e4m3 queries (FP8=0 skips it).
#
# Environment: NVCC, BUILD (default build/dev), REBUILD=1, TESTS=full|quick,
# FP8=1|0. Exit status: non-zero when a build or a test fails, or a
# bench_prefill run reports an error.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${BUILD:-build/dev}
TP=$B/tests/test_prefill
TPP=$B/tests/test_prefill_portable
BP=$B/bench/bench_prefill
if [ -z "${NVCC:-}" ]; then
    if command -v nvcc >/dev/null 2>&1; then NVCC=nvcc; else NVCC=/usr/local/cuda/bin/nvcc; fi
fi
mkdir -p $B/tests $B/bench

pids=()
for t in "$TP tests/gpu/test_prefill.cu -Itests" "$TPP tests/gpu/test_prefill_portable.cu -Itests" \
         "$BP bench/bench_prefill.cu"; do
    set -- $t
    if [ "${REBUILD:-0}" = 1 ] || [ ! -x "$1" ]; then
        echo "build: $1"
        $NVCC -x cu -std=c++17 -O3 -Iinclude ${3:-} -gencode=arch=compute_90a,code=sm_90a "$2" -o "$1" & pids+=($!)
    else
        echo "build: using prebuilt $1"
    fi
done
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL build"; exit 1; }; done

targs=()
[ "${TESTS:-full}" = quick ] && targs+=(--quick)
for t in "$TP" "$TPP"; do
    name=$(basename "$t")
    echo "== $name ${targs[*]:-}"
    "$t" "${targs[@]}" > "$B/$name.log" 2>&1
    trc=$?
    grep -E '^(FAIL|SKIP)' "$B/$name.log" | head -40
    last=$(tail -n 1 "$B/$name.log")
    echo "$name: $last (exit $trc; log $B/$name.log)"
    case "$last" in
        "0 passed, 0 failed") echo "FAIL: nothing ran (no GPU?)"; exit 1 ;;
        *" 0 failed") [ $trc -eq 0 ] || exit 1 ;;
        *) exit 1 ;;
    esac
done

rc=0
echo "== bench_prefill --layouts linear,vectorized"
$BP --layouts linear,vectorized || rc=1
if [ "${FP8:-1}" = 1 ]; then
    for q in bf16 fp8; do
        for s in tensor page; do
            echo "== bench_prefill --pages 1,16,1024 --tables sglang --fp8_vs_bf16 --kv_scale $s --q_prec $q"
            $BP --pages 1,16,1024 --tables sglang --fp8_vs_bf16 --kv_scale $s --q_prec $q || rc=1
        done
    done
fi
exit $rc
