#!/bin/sh
# AMD compile check: the library compiled for CDNA with clang >= 19 and no
# HIP installation (tests/amd/hip_prelude.h stands in for the HIP headers).
#
#   sh tests/amd/check.sh [CLANGXX]   subset (28 kernels), gfx942 and gfx90a
#                                     (and gfx950 where the compiler knows it)
#   AMD_CHECK_FULL=1 ...              the default forward, batch prefill (16-bit
#                                     and FP8 KV), decode and backward sets
#                                     (many minutes)
#   AMD_CHECK_BWD=1 ...               the default backward set alone
#   AMD_CHECK_VERBOSE=1 ...           one resource line per kernel
#   CLANGXX=/path/to/clang++ ...      compiler (else clang++-19, then clang++)
#
# Tests: platform.h alone (device pass); the host pass of amd_check.hip
# (registry/host code on the HIP runtime names); the kernels device-only for
# gfx942 and gfx90a (and gfx950 where the compiler knows it; all at once).
# Prints PASS/FAIL per test with its time, a resource summary per arch (kernels, VGPRs/AGPRs, spills, scratch), which
# kernels run on MFMA (pipeline/fwd_mfma.h, pipeline/bwd_mfma.h: v_mfma in
# their code) and which still on the portable pipeline's emulated mma.sync
# (listed by name; the backward's dot_do_o and convert_dq, which have no
# products, are listed apart), and
# `N passed, M failed` last; exits non-zero on failure. A spill or scratch in
# an MFMA kernel is a failure (amd_mfma_spill_free_<arch>); the emulated
# kernels' spills are reported, not failed. Without clang >= 19
# it prints `SKIP amd compile check: clang-19 not found` and exits 0.
# POSIX sh; run from anywhere (paths are relative to the repository root).
set -u

case "$0" in */*) here=${0%/*} ;; *) here=. ;; esac
root=$(cd "$here/../.." && pwd) || exit 2
cd "$root" || exit 2

clang_major() {   # major version of clang++ $1, or nothing
    "$1" --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\)\..*/\1/p' | head -n 1
}

cxx=""
for c in ${1:-} ${CLANGXX:-} clang++-19 clang++; do
    p=$(command -v "$c" 2>/dev/null) || continue
    v=$(clang_major "$p")
    if [ -n "$v" ] && [ "$v" -ge 19 ]; then cxx=$p; break; fi
done
if [ -z "$cxx" ]; then
    echo "SKIP amd compile check: clang-19 not found"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fmha_amd_check.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

extra=""; what="subset"
if [ "${AMD_CHECK_FULL:-0}" != "0" ]; then extra="-DFMHA_AMD_CHECK_FULL"; what="full default set"
elif [ "${AMD_CHECK_BWD:-0}" != "0" ]; then extra="-DFMHA_AMD_CHECK_BWD"; what="default backward set"; fi
echo "amd compile check: $cxx ($("$cxx" --version | head -n 1)), $what"

now() { date +%s.%N 2>/dev/null || date +%s; }

# compile NAME ARCH SOURCE PASS [FLAGS...]: PASS is device or host; SOURCE '-'
# reads $tmp/NAME.in. Writes $tmp/NAME.{o,log,cmd,rc,time}.
compile() {
    name=$1 arch=$2 src=$3 pass=$4
    shift 4
    if [ "$pass" = device ]; then
        # assembly, so the MFMA kernels can be told from the emulated ones
        set -- --cuda-device-only --no-gpu-bundle-output -O3 "$@"
        cflag=-S
    else
        cflag=-c
        set -- --cuda-host-only -O1 "$@"
    fi
    set -- "$cxx" -x hip -nogpulib -nogpuinc -std=c++17 -Wall -Wextra -Iinclude \
        -DFMHA_AMD_DEVICE_CHECK_ONLY -include tests/amd/hip_prelude.h "$@" \
        --offload-arch="$arch" -Rpass-analysis=kernel-resource-usage $cflag "$src" -o "$tmp/$name.o"
    echo "$*" > "$tmp/$name.cmd"
    t0=$(now)
    if [ "$src" = - ]; then "$@" < "$tmp/$name.in" > "$tmp/$name.log" 2>&1
    else "$@" > "$tmp/$name.log" 2>&1; fi
    echo $? > "$tmp/$name.rc"
    t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }' > "$tmp/$name.time"
}

# Resource summary from the kernel-resource-usage remarks in $tmp/$1.log.
summary() {
    awk -v verbose="${AMD_CHECK_VERBOSE:-0}" '
        function val(s) { sub(/.*: /, "", s); sub(/ \[-Rpass.*/, "", s); return s + 0 }
        / remark: Function Name: / {
            n = $0; sub(/.*Function Name: /, "", n); sub(/ \[-Rpass.*/, "", n)
            if (n !~ /fmhai_k_/) { name = ""; next }
            name = n; sub(/^_ZL[0-9]+fmhai_k_/, "", name)
            sub(/_FMHA_ANY_FMHA_ANY_FMHA_ANY_FMHA_ANY_GFX9_/, " ", name)
            sub(/_L[0-9]+1[0-9]fmhai_[a-z]+_params$/, "", name); k++; next }
        name == "" { next }
        / remark: +VGPRs: /       { v = val($0); if (v > vmax) vmax = v }
        / remark: +AGPRs: /       { a = val($0); if (a > amax) amax = a }
        / remark: +ScratchSize /  { s = val($0); if (s > 0) ns++; if (s > smax) smax = s }
        / remark: +Occupancy /    { o = val($0) }
        / remark: +VGPRs Spill: / { sp = val($0); if (sp > 0) nsp++; tsp += sp }
        / remark: +LDS Size / {
            if (verbose != "0")
                printf "    %-52s vgpr %3d agpr %3d spill %4d scratch %5d B/lane waves/SIMD %d\n",
                       name, v, a, sp, s, o }
        END {
            printf "    %d kernels; max VGPRs %d, AGPRs %d; %d with VGPR spills (%d dwords in all); " \
                   "%d with scratch, max %d bytes/lane\n", k, vmax, amax, nsp, tsp, ns, smax }
    ' "$tmp/$1.log"
}

passed=0; failed=0
# report TEST NAME SUMMARY(0/1)
report() {
    rc=$(cat "$tmp/$2.rc")
    if [ "$rc" = 0 ]; then
        echo "PASS $1 ($(cat "$tmp/$2.time") s)"
        passed=$((passed + 1))
        # warnings, each distinct one once with its count (kernel rows repeat them)
        grep -E 'warning:' "$tmp/$2.log" | sort | uniq -c | sort -rn | head -n 20 |
            sed 's/^ *\([0-9][0-9]*\) /    (x\1) /'
        if [ "$3" = 1 ]; then summary "$2"; fi
    else
        echo "FAIL $1 ($(cat "$tmp/$2.time") s, exit $rc)"
        failed=$((failed + 1))
        echo "    command: $(cat "$tmp/$2.cmd")"
        grep -E 'error|fatal' "$tmp/$2.log" | head -n 40 | sed 's/^/    /'
    fi
}

# platform.h alone, plus a kernel that instantiates its device helpers.
cat > "$tmp/platform.in" <<'EOF'
#include "fmha_tile/platform/platform.h"
__global__ void fmha_amd_platform_probe(float *x)
{
    x[threadIdx.x] = fmhai_exp2(fmhai_shfl_xor(x[threadIdx.x], 1));
}
EOF
compile platform gfx942 - device
report amd_platform_h platform 0

# Host pass of the kernel unit: registry.h / kernel/fwd.h host code against
# the HIP runtime names (as the prelude declares them), the kernel stubs.
compile host gfx942 tests/amd/amd_check.hip host $extra
report amd_host_pass host 0

# MFMA instructions per kernel function of $tmp/$1.o (assembly): "name count"
mfma_counts() {
    awk '/^_ZL[0-9]+fmhai_k_[A-Za-z0-9_]*:/ { n = $1; sub(/:.*/, "", n); c[n] = 0; cur = n; next }
         /^\.Lfunc_end/ { cur = "" }
         cur != "" && /^[[:space:]]+v_mfma_/ { c[cur]++ }
         END { for (n in c) print n, c[n] }' "$tmp/$1.o"
}

# MFMA kernels must be spill- and scratch-free; list the emulated ones.
mfma_gate() {
    mfma_counts "$2" > "$tmp/$2.mfma"
    awk -v tname="$1" '
        function val(s) { sub(/.*: /, "", s); sub(/ \[-Rpass.*/, "", s); return s + 0 }
        function short(n) { sub(/^_ZL[0-9]+fmhai_k_/, "", n); sub(/_FMHA_ANY_FMHA_ANY_FMHA_ANY_FMHA_ANY/, "", n)
                            sub(/_L[0-9]+1[0-9]fmhai_[a-z]+_params$/, "", n); return n }
        FNR == NR { m[$1] = $2; next }
        / remark: Function Name: / { n = $0; sub(/.*Function Name: /, "", n); sub(/ \[-Rpass.*/, "", n)
                                     name = (n in m) ? n : ""; next }
        name == "" { next }
        / remark: +ScratchSize / { s = val($0) }
        / remark: +VGPRs Spill: / {
            if (m[name] > 0) { nm++; if (val($0) > 0 || s > 0) { bad++; badl = badl "\n    spills: " short(name) } }
            else if (name ~ /fmhai_k_BWD_(DOT_DO_O|CONVERT_DQ)_/) { ns++; str = str "\n    streaming: " short(name) }
            else { ne++; emu = emu "\n    portable: " short(name) } name = "" }
        END {
            printf "%s %d %d %d\n", (bad || !nm ? "FAIL" : "PASS"), nm, ne, bad + 0
            printf "MFMA kernels %d (%d with spills or scratch); kernels on the portable pipeline with " \
                   "emulated mma.sync %d; backward streaming stages (no products) %d%s%s%s\n",
                   nm, bad, ne, ns + 0, badl, emu, str
        }' "$tmp/$2.mfma" "$tmp/$2.log" > "$tmp/$2.gate"
    gate=$tmp/$2.gate
    set -- "$1" $(head -n 1 "$gate")
    if [ "$2" = PASS ]; then echo "PASS $1 ($3 MFMA kernels, 0 spills, 0 scratch)"; passed=$((passed + 1))
    else echo "FAIL $1 ($5 of $3 MFMA kernels spill or use scratch)"; failed=$((failed + 1)); fi
    tail -n +2 "$gate" | sed '1s/^/    /'
}

# the archs (gfx950 where the compiler knows it)
amd_name=amd_compile; . "$(dirname "$0")/amd_archs.sh"

# The kernels, device-only, every arch at once.
for arch in $archs; do
    compile "$arch" "$arch" tests/amd/amd_check.hip device $extra &
done
wait
for arch in $archs; do report "amd_compile_$arch" "$arch" 1; done
for arch in $archs; do
    [ "$(cat "$tmp/$arch.rc")" = 0 ] && mfma_gate "amd_mfma_spill_free_$arch" "$arch"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
