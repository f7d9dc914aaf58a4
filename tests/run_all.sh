#!/bin/sh
# Runs every test suite and sums their "N passed, M failed" last lines.
# Usage: run_all.sh --all|--compile-only BUILD CC [CLANG19] [PYTHON]
# A suite that cannot run here (no GPU, no clang-19, no nvcc) prints SKIP and
# counts nothing. The last line is the total; exit status 1 on any failure.
mode=$1; build=$2; cc=$3; clang19=$4; python=${5:-python3}
total_pass=0; total_fail=0

# run_suite NAME CMD...: run, echo its output, add its last-line counts
run_suite() {
    name=$1; shift
    out=$("$@" 2>&1); rc=$?
    printf '%s\n' "$out"
    last=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s' "$last" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1/p')
    f=$(printf '%s' "$last" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\2/p')
    if [ -z "$p" ]; then p=0; f=1; echo "FAIL $name: no summary line (exit $rc)"; fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $name: exit status $rc"; fi
    echo "== $name: $p passed, $f failed"
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
}

api_c11() {
    if $cc -std=c11 -pedantic -Werror -Wall -Wextra -fsyntax-only -x c include/fmha_tile/api.h; then
        echo "PASS api.h compiles as C11 (-pedantic -Werror)"; echo "1 passed, 0 failed"
    else
        echo "FAIL api.h as C11"; echo "0 passed, 1 failed"
    fi
}

nvcc_built() {
    if [ -x "$build/tests/test_fwd" ] && [ -f "$build/libfmha_tile.so" ] && [ -x "$build/tests/test_prefill" ] &&
       [ -x "$build/examples/fmha_fwd_one" ] && [ -x "$build/examples/fmha_batch_prefill_one" ] &&
       [ -x "$build/examples/fmha_decode_one" ]; then
        echo "PASS default kernel sets build (the library's parts; test_fwd, test_prefill) and the examples compile"
        echo "1 passed, 0 failed"
    else
        echo "SKIP nvcc compile check: nvcc not found"; echo "0 passed, 0 failed"
    fi
}

run_suite api_c11 api_c11
run_suite compile_fail sh tests/host/compile_fail.sh "$cc"
run_suite nvcc_build nvcc_built
# Register report of the default set (informational): kernels with a stack frame.
log="$build/tests/test_fwd.ptxas.log"
if [ -f "$log" ]; then
    awk '/Compiling entry function/ { k = $0; sub(/.*fmhai_k_FWD_/, "", k); sub(/_L[0-9]+16fmhai.*/, "", k);
                                      arch = ($0 ~ /sm_90a/) ? "sm_90a" : "sm_80"; n[arch]++ }
         /bytes stack frame/ { if ($1 > 0) { bad[arch]++; list[arch] = list[arch] " " k "(" $1 "B)" } }
         END { for (a in n) printf "INFO ptxas %s: %d kernels, %d with a stack frame%s\n", a, n[a], bad[a] + 0, list[a] }' "$log"
fi
log="$build/tests/test_bwd.ptxas.log"
if [ -f "$log" ]; then
    awk '/Compiling entry function/ { k = $0; sub(/.*fmhai_k_BWD_?/, "", k); sub(/_L[0-9]+1[68]fmhai.*/, "", k);
                                      arch = ($0 ~ /sm_90a/) ? "sm_90a" : "sm_80"; n[arch]++ }
         /bytes stack frame/ { if ($1 > 0) { bad[arch]++; list[arch] = list[arch] " " k "(" $1 "B)" } }
         END { for (a in n) printf "INFO ptxas bwd %s: %d kernels, %d with a stack frame%s\n", a, n[a], bad[a] + 0, list[a] }' "$log"
fi
log="$build/tests/test_decode.ptxas.log"
if [ -f "$log" ]; then
    awk '/Compiling entry function/ { k = $0; sub(/.*fmhai_k_/, "", k); sub(/_L[0-9]+16fmhai.*/, "", k);
                                      gsub(/_FMHA_ANY|_NOALIBI/, "", k);
                                      arch = ($0 ~ /sm_90a/) ? "sm_90a" : "sm_80"; n[arch]++ }
         /bytes stack frame/ { if ($1 > 0) { bad[arch]++; list[arch] = list[arch] " " k "(" $1 "B)" } }
         END { for (a in n) printf "INFO ptxas decode %s: %d kernels, %d with a stack frame%s\n", a, n[a], bad[a] + 0, list[a] }' "$log"
fi
# ptxas C7517 ("warpgroup.wait is injected") and C7515 ("wgmma.mma_async
# instructions are serialized") slow a wgmma pipeline down: none may appear in
# the default forward, prefill and backward sets. Their ptxas reports: the
# library's parts (the default sets) and the suites' (the default sets and
# the suites' own rows; a suite built as a compile check,
# FMHA_TILE_TEST_COMPILE_ONLY, has none); only reports with sm_90a code count.
c7517() {
    n=0; found=0; logs=
    for log in "$build"/lib/part_*.o.ptxas.log "$build/tests/test_fwd.ptxas.log" "$build/tests/test_prefill.ptxas.log" \
               "$build/tests/test_fwd_fp8.ptxas.log" "$build/tests/test_bwd.ptxas.log"; do
        [ -f "$log" ] && grep -q "for 'sm_90a'" "$log" || continue
        found=$((found + 1)); logs="$logs $log"
        n=$((n + $(grep -c 'C751[57]' "$log")))
    done
    if [ "$found" -eq 0 ]; then echo "SKIP no sm_90a ptxas reports"; echo "0 passed, 0 failed"
    elif [ "$n" -eq 0 ]; then echo "PASS no ptxas C7517/C7515 (wgmma waits injected or serialised) in the forward, fp8 forward, prefill and backward sets ($found ptxas reports)"; echo "1 passed, 0 failed"
    else grep -h 'C751[57]' $logs | head -5
         echo "FAIL $n ptxas C7517/C7515 warnings"; echo "0 passed, 1 failed"; fi
}
run_suite ptxas_c7517 c7517
if [ -n "$clang19" ] && [ -f tests/amd/check.sh ]; then
    run_suite amd_compile sh tests/amd/check.sh
    run_suite amd_mfma sh tests/amd/check_mfma.sh
else
    echo "SKIP amd compile check: clang-19 not found"
fi

if [ "$mode" = "--all" ]; then
    run_suite host_dispatch "$build/host/test_dispatch"
    run_suite host_ref "$build/host/test_ref"
    run_suite host_ref_bwd "$build/host/test_ref_bwd"
    run_suite host_bwd_workspace "$build/host/test_bwd_workspace"
    run_suite host_splitkv "$build/host/test_splitkv"
    run_suite host_philox "$build/host/test_philox"
    run_suite host_vt8_layout "$build/host/test_vt8_layout"
    run_suite host_mfma_layout "$build/host/test_mfma_layout"
    run_suite host_fwd_mfma_model "$build/host/test_fwd_mfma_model"
    run_suite host_bwd_mfma_model "$build/host/test_bwd_mfma_model"
    if [ -x "$build/host/test_lib_registry" ] && [ -f "$build/libfmha_tile.so" ]; then
        run_suite lib_registry "$build/host/test_lib_registry" "$build/libfmha_tile.so"
    else
        echo "SKIP lib_registry: the library is not built (no nvcc)"
    fi
    if [ -x "$build/tests/test_fwd" ]; then
        # the sm_90a-only tests are not built for FMHA_TILE_ARCHS=sm_80
        for t in fwd prefill prefill_portable fwd_fp8 decode appendkv bwd bwd_chain bwd_stage1 bwd_portable wgmma; do
            if [ -x "$build/tests/test_$t" ]; then run_suite "gpu_$t" "$build/tests/test_$t"
            else echo "SKIP gpu_$t: not built for these archs"; fi
        done
        # the Hopper pipelines' cp.async path where TMA serves by default
        for t in fwd prefill fwd_fp8 bwd; do
            if [ -x "$build/tests/test_$t" ]; then
                run_suite "gpu_${t}_no_tma" env FMHA_TILE_TMA=0 "$build/tests/test_$t" --quick
            fi
        done
    else
        echo "SKIP gpu tests: not built (no nvcc)"
    fi
    # kernel sets declared from Python (python/fmha_tile/jit.py): standard
    # library only, no GPU (the C checks use cc; one real build where nvcc is)
    run_suite python_jit_host env CC="$cc" "$python" python/tests/test_jit_host.py
    # dropout in the Python package: the Philox rule against tile/philox.h (cc),
    # argument checks, seed/offset from the generator (stand-ins; no GPU)
    run_suite python_dropout_host env CC="$cc" "$python" python/tests/test_dropout_host.py
    # the decode plan's fast path (fmha_tile.decode_plan): pointer patching read
    # back by C (cc), the refusals, the launch glue (stand-ins; no GPU)
    run_suite python_decode_plan_host env CC="$cc" "$python" python/tests/test_decode_plan_host.py
    # Python package (python/tests): runs where torch, pytest and a GPU exist
    run_suite python sh python/tests/run.sh "$python" "$build"
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
