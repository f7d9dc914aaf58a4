#!/bin/sh
# Kernel-set rows that must not build, and the message each must give.
# Usage: compile_fail.sh CC   (a C11 compiler; the library is host-only there)
# Last line: "N passed, M failed".
CC=${1:-cc}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
expect_fail() { # name, row, expected text
    printf '#include "fmha_tile.h"\n#define ROWS(X) %s\nDECL_FMHA_KERNEL_SET(s, ROWS)\nint main(void) { return fmha_set_size(&s); }\n' "$2" > "$dir/t.c"
    if $CC -std=c11 -Iinclude -c "$dir/t.c" -o "$dir/t.o" > "$dir/log" 2>&1; then
        echo "FAIL $1: compiled"; fail=$((fail + 1))
    elif grep -q "$3" "$dir/log"; then
        echo "PASS $1"; pass=$((pass + 1))
    else
        echo "FAIL $1: message lacks '$3'"; sed -n 1,5p "$dir/log"; fail=$((fail + 1))
    fi
}
expect_fail "explicit row breaking tile_m rule" \
    "X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 100, 64, 4, 1)" "constraint tile_m_16_or_32_rows_per_warp"
expect_fail "explicit row with hdim 80" \
    "X(FWD, BF16, 80, MASK, NOSOFTCAP, NOALIBI, 64, 64, 4, 1)" "constraint hdim_32_64_96_128_192_256"
expect_fail "hdim 96 row with 4 warps (a Q row is 12 chunks)" \
    "X(FWD, BF16, 96, MASK, NOSOFTCAP, NOALIBI, 64, 64, 4, 1)" "constraint threads_cover_row_chunks"
expect_fail "prefill row of hdim 96" \
    "X(PREFILL, BF16, 96, MASK, NOSOFTCAP, 16, 96, 64, 6, 1)" "head dims 32 and 96"
expect_fail "explicit row with 4 stages" \
    "X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 128, 64, 4, 4)" "constraint stages_1_to_3"
expect_fail "explicit row over the shared memory limit" \
    "X(FWD, BF16, 256, MASK, NOSOFTCAP, NOALIBI, 256, 128, 8, 3)" "constraint"
expect_fail "wildcard row whose given column matches no tuned row" \
    "X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 48, FMHA_ANY, FMHA_ANY, FMHA_ANY)" "no tuned row matches"
expect_fail "prefill row with a page size that is not a power of two" \
    "X(PREFILL, BF16, 128, MASK, NOSOFTCAP, 24, 128, 64, 4, 1)" "constraint page_size_power_of_two"
expect_fail "VECTORIZED prefill row with tile_n 32" \
    "X(PREFILL_VEC, BF16, 128, MASK, NOSOFTCAP, 16, 128, 32, 4, 1)" "constraint vectorized_tile_n_64_128"
expect_fail "convert_dq row with the elementwise bias" \
    "X(BWD_CONVERT_DQ, BF16, 128, NOMASK, NOSOFTCAP, BIAS, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)" "constraint bwd_aux_no_features"
expect_fail "prefill row of unequal head dims" \
    "X(PREFILL, BF16, 192_128, MASK, NOSOFTCAP, 16, 96, 64, 6, 1)" "unequal head dims"
expect_fail "192_128 row with 4 warps (a Q row is 24 chunks)" \
    "X(FWD, BF16, 192_128, MASK, NOSOFTCAP, NOALIBI, 64, 64, 4, 1)" "constraint threads_cover_row_chunks"
expect_fail "backward 192_128 row with 8 warps (a Q row is 24 chunks)" \
    "X(BWD, BF16, 192_128, MASK, NOSOFTCAP, NOALIBI, 64, 128, 8, 2)" "constraint bwd_threads_cover_row_chunks"
expect_fail "backward 192_128 wildcard row with a tile_n no tuned row has" \
    "X(BWD_DET, BF16, 192_128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, 128, FMHA_ANY, FMHA_ANY)" "no tuned row matches"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
