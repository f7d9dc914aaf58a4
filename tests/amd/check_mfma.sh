#!/bin/sh
# AMD compile check of the MFMA primitives (include/fmha_tile/tile/wave_mma.h,
# tile/mfma_layout.h from device code): tests/amd/mfma_check.hip compiled with
# clang >= 19 and no HIP installation (tests/amd/hip_prelude.h, as in
# tests/amd/check.sh), device-only to assembly for gfx942 and gfx90a (and
# gfx950 where the compiler knows it), plus its host pass. Nothing runs:
# there is no AMD GPU here.
#
#   sh tests/amd/check_mfma.sh [CLANGXX]    (else $CLANGXX, clang++-19, clang++)
#
# Tests per arch: it compiles without warnings; every kernel is spill-free
# with no scratch; each MFMA the arch has is in the assembly (gfx90a: the
# f16 and bf16_1k shapes; gfx942: those and the fp8 ones), with the DPP row
# rotations and the ds_swizzle of the row reductions, and no s_trap (the
# wrappers' fallback for a target without the instruction). Prints PASS/FAIL
# lines, one resource line per kernel, and `N passed, M failed` last. Without
# clang >= 19: `SKIP ...` and exit 0. POSIX sh, run from anywhere.
set -u

case "$0" in */*) here=${0%/*} ;; *) here=. ;; esac
root=$(cd "$here/../.." && pwd) || exit 2
cd "$root" || exit 2

cxx=""
for c in ${1:-} ${CLANGXX:-} clang++-19 clang++; do
    p=$(command -v "$c" 2>/dev/null) || continue
    v=$("$p" --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\)\..*/\1/p' | head -n 1)
    if [ -n "$v" ] && [ "$v" -ge 19 ]; then cxx=$p; break; fi
done
if [ -z "$cxx" ]; then
    echo "SKIP amd mfma check: clang-19 not found"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fmha_amd_mfma.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
echo "amd mfma check: $cxx ($("$cxx" --version | head -n 1))"

base="-x hip -nogpulib -nogpuinc -std=c++17 -Wall -Wextra -Iinclude -DFMHA_AMD_DEVICE_CHECK_ONLY -include tests/amd/hip_prelude.h"
src=tests/amd/mfma_check.hip

# the archs (gfx950 where the compiler knows it)
amd_name=amd_mfma_compile; . "$(dirname "$0")/amd_archs.sh"

# device passes of every arch side by side
for arch in $archs; do
    # shellcheck disable=SC2086
    { "$cxx" $base --cuda-device-only --no-gpu-bundle-output -O3 --offload-arch=$arch \
          -Rpass-analysis=kernel-resource-usage -S "$src" -o "$tmp/$arch.s" > "$tmp/$arch.log" 2>&1
      echo $? > "$tmp/$arch.rc"; } &
done
wait
# shellcheck disable=SC2086
"$cxx" $base --cuda-host-only -O1 --offload-arch=gfx942 -c "$src" -o "$tmp/host.o" > "$tmp/host.log" 2>&1
echo $? > "$tmp/host.rc"

passed=0; failed=0
ok()  { echo "PASS $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }

if [ "$(cat "$tmp/host.rc")" = 0 ] && ! grep -q 'warning:' "$tmp/host.log"; then ok "amd_mfma_host_pass"
else bad "amd_mfma_host_pass"; grep -E 'error|warning' "$tmp/host.log" | head -n 20 | sed 's/^/    /'; fi

for arch in $archs; do
    if [ "$(cat "$tmp/$arch.rc")" != 0 ]; then
        bad "amd_mfma_compile_$arch"; grep -E 'error' "$tmp/$arch.log" | head -n 20 | sed 's/^/    /'
        continue
    fi
    if grep -q 'warning:' "$tmp/$arch.log"; then
        bad "amd_mfma_compile_$arch (warnings)"; grep 'warning:' "$tmp/$arch.log" | sort -u | head -n 10 | sed 's/^/    /'
    else ok "amd_mfma_compile_$arch"; fi
    # one line per kernel; count spills and scratch
    awk '
        function val(s) { sub(/.*: /, "", s); sub(/ \[-Rpass.*/, "", s); return s + 0 }
        / remark: Function Name: / { n = $0; sub(/.*Function Name: /, "", n); sub(/ \[-Rpass.*/, "", n)
                                     sub(/^_Z[0-9]+/, "", n); sub(/P.*$/, "", n); name = n; next }
        / remark: +VGPRs: /        { v = val($0) }
        / remark: +AGPRs: /        { a = val($0) }
        / remark: +ScratchSize /   { s = val($0) }
        / remark: +VGPRs Spill: /  { sp = val($0) }
        / remark: +Occupancy /     { printf "    %-30s vgpr %3d agpr %3d spill %d scratch %d B/lane waves/SIMD %d\n", name, v, a, sp, s, val($0)
                                     k++; if (sp > 0 || s > 0) nbad++ }
        END { printf "%d %d\n", k, nbad + 0 > "/dev/stderr" }
    ' "$tmp/$arch.log" 2> "$tmp/$arch.count"
    set -- $(cat "$tmp/$arch.count")
    want=6; [ "$arch" != gfx90a ] && want=8
    if [ "$1" -eq "$want" ] && [ "$2" -eq 0 ]; then ok "amd_mfma_spill_free_$arch ($1 kernels, 0 spills, 0 scratch)"
    else bad "amd_mfma_spill_free_$arch ($1 of $want kernels, $2 with spills or scratch)"; fi
    # the instructions (gfx942's assembler spells the f16/bf16 shapes with an underscore and no _1k)
    pats="v_mfma_f32_32x32x8_?f16 v_mfma_f32_32x32x8_?bf16 v_mfma_f32_16x16x16_?f16 v_mfma_f32_16x16x16_?bf16"
    [ "$arch" != gfx90a ] && pats="$pats v_mfma_f32_32x32x16_fp8_fp8 v_mfma_f32_16x16x32_fp8_fp8"
    miss=""; counts=""
    for p in $pats; do
        n=$(grep -cE "^[[:space:]]*$p([[:space:]]|_1k)" "$tmp/$arch.s")
        [ "$n" -gt 0 ] || miss="$miss $p"
        counts="$counts $(echo "$p" | sed 's/v_mfma_f32_//; s/_?//'):$n"
    done
    for p in 'row_ror:8' 'row_ror:4' 'quad_perm:\[2,3,0,1\]' 'quad_perm:\[1,0,3,2\]' 'ds_swizzle_b32'; do
        grep -q "$p" "$tmp/$arch.s" || miss="$miss $p"
    done
    grep -q 's_trap' "$tmp/$arch.s" && miss="$miss (s_trap present)"
    if [ -z "$miss" ]; then ok "amd_mfma_instructions_$arch (static counts$counts; DPP row_ror/quad_perm, ds_swizzle)"
    else bad "amd_mfma_instructions_$arch: missing$miss"; fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
