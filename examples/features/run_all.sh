#!/bin/sh
# Runs every built feature example (BUILD/examples/features/*) and sums up.
# Usage: run_all.sh [BUILD]   (make examples-run builds them first)
# An example passes when it exits 0 with a last line ending in "valid:y",
# is skipped when it exits 0 with a last line starting "SKIP" (no GPU, or
# not the GPU it needs), and fails otherwise. Last line: "N passed, M failed".
build=${1:-build}
dir="$build/examples/features"
pass=0; fail=0; skip=0
for exe in "$dir"/*; do
    [ -f "$exe" ] && [ -x "$exe" ] || continue
    name=$(basename "$exe")
    out=$("$exe" 2>&1); rc=$?
    printf '%s\n' "$out"
    last=$(printf '%s\n' "$out" | tail -n 1)
    case "$rc:$last" in
        0:*valid:y) pass=$((pass + 1)) ;;
        0:SKIP*)    skip=$((skip + 1)) ;;
        *)          fail=$((fail + 1)); echo "FAIL $name (exit $rc)" ;;
    esac
done
if [ $((pass + fail + skip)) -eq 0 ]; then echo "no feature examples built in $dir (make examples)"; fi
[ "$skip" -gt 0 ] && echo "$skip skipped"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
