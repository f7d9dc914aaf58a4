#!/usr/bin/env bash
# bench/dev_fp8k.sh: check and measure FP8 (e4m3) KV batch prefill with K read
# by the S GEMM straight from its e4m3 tile (in-register decode), from the repo
# root:
#
#   1. build build/dev/tests/test_prefill (sm_80 + sm_90a) and
#      build/dev/bench/bench_prefill (sm_90a), skipped for a binary that is
#      already there (REBUILD=1 forces it);
#   2. run the prefill GPU tests (85+ fp8 problems among them; TESTS=quick for
#      --quick); stop here unless the last line says 0 failed;
#   3. fp8 KV against bf16 KV at pages 1, 16, 1024 (SGLang table), per-tensor
#      descales, then per-page descales.
#
# Environment: NVCC (default nvcc, else /usr/local/cuda/bin/nvcc), REBUILD=1,
# TESTS=full|quick. Exit status: non-zero when a build or a test fails, or a
# bench_prefill run reports an error.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=build/dev
TP=$B/tests/test_prefill
BP=$B/bench/bench_prefill
if [ -z "${NVCC:-}" ]; then
    if command -v nvcc >/dev/null 2>&1; then NVCC=nvcc; else NVCC=/usr/local/cuda/bin/nvcc; fi
fi
mkdir -p $B/tests $B/bench

# ---- 1. build (in parallel; --threads 0: one process per target arch)
pids=()
if [ "${REBUILD:-0}" = 1 ] || [ ! -x $TP ]; then
    echo "build: $TP"
    $NVCC -x cu -std=c++17 -O3 -Iinclude -Itests --threads 0 \
        -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a \
        tests/gpu/test_prefill.cu -o $TP & pids+=($!)
else
    echo "build: using prebuilt $TP"
fi
if [ "${REBUILD:-0}" = 1 ] || [ ! -x $BP ]; then
    echo "build: $BP"
    $NVCC -x cu -std=c++17 -O3 -Iinclude -gencode=arch=compute_90a,code=sm_90a \
        bench/bench_prefill.cu -o $BP & pids+=($!)
else
    echo "build: using prebuilt $BP"
fi
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL build"; exit 1; }; done
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader 2>/dev/null || true

# ---- 2. prefill GPU tests ---------------------------------------------------------
targs=()
[ "${TESTS:-full}" = quick ] && targs+=(--quick)
echo "== test_prefill ${targs[*]:-}"
t0=$(date +%s)
$TP "${targs[@]}" > $B/test_prefill.log 2>&1
trc=$?
grep -E '^(FAIL|SKIP)' $B/test_prefill.log | head -40
echo "fp8 checks passed: $(grep -c '^PASS .*fp8' $B/test_prefill.log)"
last=$(tail -n 1 $B/test_prefill.log)
echo "test_prefill: $last (exit $trc, $(( $(date +%s) - t0 )) s; log $B/test_prefill.log)"
case "$last" in
    "0 passed, 0 failed") echo "FAIL: nothing ran (no GPU?)"; exit 1 ;;
    *" 0 failed") [ $trc -eq 0 ] || exit 1 ;;
    *) exit 1 ;;
esac

# ---- 3. fp8 KV vs bf16 KV, per-tensor then per-page descales ------------------------
rc=0
for s in tensor page; do
    echo "== bench_prefill --pages 1,16,1024 --tables sglang --fp8_vs_bf16 --kv_scale $s"
    $BP --pages 1,16,1024 --tables sglang --fp8_vs_bf16 --kv_scale $s || rc=1
done
exit $rc
