#!/usr/bin/env bash
# AMD device-code compile check: the library's kernels compiled device-only
# for CDNA with clang >= 19, without a HIP installation (tests/amd/hip_prelude.h
# stands in for the HIP headers).
#
#   tests/amd/check.sh                 subset (12 kernels) for gfx942 and gfx90a
#   AMD_CHECK_FULL=1 tests/amd/check.sh    the whole default forward set (48)
#   AMD_CHECK_VERBOSE=1 ...            one resource line per kernel
#   CLANGXX=/path/to/clang++ ...       compiler to use (else clang++-19, clang++)
#
# Prints PASS/FAIL per test, a resource summary per arch (kernels, VGPRs,
# spills, scratch) and `N passed, M failed` last; exits non-zero on failure.
# Without clang >= 19 it prints `SKIP amd compile check: clang-19 not found`
# and exits 0. Run from anywhere; paths are relative to the repository root.
set -u

here="${BASH_SOURCE[0]%/*}"
[ "$here" = "${BASH_SOURCE[0]}" ] && here=.
root="$(cd "$here/../.." && pwd)"
cd "$root" || exit 2

clang_major() {   # prints the major version of clang++ $1, or nothing
    "$1" --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\)\..*/\1/p' | head -n1
}

cxx=""
for c in ${CLANGXX:-} clang++-19 clang++; do
    command -v "$c" >/dev/null 2>&1 || continue
    v="$(clang_major "$c")"
    if [ -n "$v" ] && [ "$v" -ge 19 ]; then cxx="$(command -v "$c")"; break; fi
done
if [ -z "$cxx" ]; then
    echo "SKIP amd compile check: clang-19 not found"
    exit 0
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/fmha_amd_check.XXXXXX")" || exit 2
trap 'rm -rf "$tmp"' EXIT

flags=(-x hip --cuda-device-only --no-gpu-bundle-output -nogpulib -nogpuinc
       -O3 -std=c++17 -Wall -Wextra -Iinclude
       -DFMHA_AMD_DEVICE_CHECK_ONLY -include tests/amd/hip_prelude.h)
set_flags=()
what="subset"
if [ "${AMD_CHECK_FULL:-0}" != "0" ]; then set_flags=(-DFMHA_AMD_CHECK_FULL); what="full default set"; fi

echo "amd compile check: $cxx ($("$cxx" --version | head -n1)), $what"

# $1 name, $2 arch, $3 source ('-' = stdin from $4), rest: extra flags.
# Writes $tmp/$1.{log,o,cmd,rc,time}.
compile() {
    local name="$1" arch="$2" src="$3"; shift 3
    local cmd=("$cxx" "${flags[@]}" "$@" --offload-arch="$arch"
               -Rpass-analysis=kernel-resource-usage -c "$src" -o "$tmp/$name.o")
    printf '%q ' "${cmd[@]}" > "$tmp/$name.cmd"
    local t0 t1
    t0=$(date +%s.%N)
    if [ "$src" = "-" ]; then
        "${cmd[@]}" < "$tmp/$name.in" > "$tmp/$name.log" 2>&1
    else
        "${cmd[@]}" > "$tmp/$name.log" 2>&1
    fi
    echo $? > "$tmp/$name.rc"
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }' > "$tmp/$name.time"
}

# Resource summary from the kernel-resource-usage remarks of $tmp/$1.log.
summary() {
    awk -v verbose="${AMD_CHECK_VERBOSE:-0}" '
        / remark: Function Name: / {
            n = $0; sub(/.*Function Name: /, "", n); sub(/ \[-Rpass.*/, "", n)
            if (n !~ /fmhai_k_/) { name = ""; next }
            name = n; sub(/^_ZL[0-9]+fmhai_k_FWD_/, "", name)
            sub(/_FMHA_ANY_FMHA_ANY_FMHA_ANY_FMHA_ANY_GFX9_/, " ", name)
            sub(/_L[0-9]+16fmhai_fwd_params$/, "", name); k++ }
        name == "" { next }
        function val(s) { sub(/.*: /, "", s); sub(/ \[-Rpass.*/, "", s); return s + 0 }
        / remark: +VGPRs: /                   { v = val($0); if (v > vmax) vmax = v }
        / remark: +AGPRs: /                   { a = val($0); if (a > amax) amax = a }
        / remark: +ScratchSize /              { s = val($0); if (s > 0) ns++; if (s > smax) smax = s }
        / remark: +Occupancy /                { o = val($0) }
        / remark: +VGPRs Spill: /             { sp = val($0); if (sp > 0) nsp++; tsp += sp }
        / remark: +LDS Size / {
            if (verbose != "0")
                printf "    %-42s vgpr %3d agpr %3d spill %4d scratch %5d B/lane occupancy %d\n",
                       name, v, a, sp, s, o }
        END {
            printf "    %d kernels; max VGPRs %d, AGPRs %d; %d with VGPR spills (%d dwords in all); " \
                   "%d with scratch, max %d bytes/lane\n", k, vmax, amax, nsp, tsp, ns, smax }
    ' "$tmp/$1.log"
}

passed=0; failed=0
report() {   # $1 test name, $2 compile name, $3 show resource summary (0/1)
    local rc; rc="$(cat "$tmp/$2.rc")"
    if [ "$rc" = "0" ]; then
        echo "PASS $1 ($(cat "$tmp/$2.time") s)"
        passed=$((passed + 1))
        grep -E 'warning:' "$tmp/$2.log" | head -n 20 | sed 's/^/    /'
        [ "$3" = "1" ] && summary "$2"
    else
        echo "FAIL $1 ($(cat "$tmp/$2.time") s, rc $rc)"
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
compile platform gfx942 -
report amd_platform_h platform 0

# The kernels, both archs at once.
compile gfx942 gfx942 tests/amd/amd_check.hip ${set_flags[@]+"${set_flags[@]}"} &
compile gfx90a gfx90a tests/amd/amd_check.hip ${set_flags[@]+"${set_flags[@]}"} &
wait
report amd_compile_gfx942 gfx942 1
report amd_compile_gfx90a gfx90a 1

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
