/*
 * The host unit tests' check (tests/host/test_*.c that include fmha_tile.h):
 * CHECK(cond, name) prints PASS or FAIL with the file, line and the
 * library's last error message, and counts into g_pass / g_fail; each test
 * ends with printf("%d passed, %d failed\n", g_pass, g_fail).
 */
#ifndef FMHA_TILE_TESTS_HOST_CHECK_H
#define FMHA_TILE_TESTS_HOST_CHECK_H

#include <stdio.h>
#include "fmha_tile.h"

static int g_pass, g_fail;
#define CHECK(cond, name)                                                     \
    do {                                                                      \
        if (cond) { ++g_pass; printf("PASS %s\n", name); }                    \
        else { ++g_fail; printf("FAIL %s (%s:%d) last error: %s\n", name,     \
                                __FILE__, __LINE__, fmha_last_error()); }     \
    } while (0)

#endif /* FMHA_TILE_TESTS_HOST_CHECK_H */
