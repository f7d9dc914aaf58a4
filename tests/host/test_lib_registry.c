/*
 * test_lib_registry.c - the shared library's default kernel set, joined from
 * its parts (src/lib_parts.h: one translation unit per part), lists exactly
 * the kernels one unit declaring the whole list builds, in the same order
 * (selection takes the first entry that serves a problem, so the order is
 * part of the contract).
 *
 * The reference is DECL_FMHA_KERNEL_SET over FMHA_LIB_DEFAULT_SET compiled
 * here, host-only (the tables without kernels); the library is loaded with
 * dlopen and read through its C API (fmha_default_kernel_set, fmha_set_size,
 * fmha_set_kernel). Checked: the count, and per kernel the name, family,
 * dtype, head dim, tile, warps, stages, arch, page size and layout; every
 * name is unique; the decode set of the library is non-empty and holds
 * decode kernels only. No GPU needed.
 *
 * Run: build/host/test_lib_registry build/libfmha_tile.so
 * Output: PASS/FAIL lines, last line `N passed, M failed`.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "fmha_tile.h"
#include "../../src/lib_parts.h"

DECL_FMHA_KERNEL_SET(ref_set, FMHA_LIB_DEFAULT_SET)

typedef const fmha_kernel_set *(*set_fn)(void);
typedef int (*size_fn)(const fmha_kernel_set *);
typedef const fmha_kernel_info *(*kernel_fn)(const fmha_kernel_set *, int);

static int g_pass, g_fail;
static void check(int ok, const char *name, const char *detail)
{
    if (ok) { printf("PASS %s\n", name); g_pass++; }
    else { printf("FAIL %s: %s\n", name, detail); g_fail++; }
}

static int same_info(const fmha_kernel_info *a, const fmha_kernel_info *b)
{
    return strcmp(a->name, b->name) == 0 && a->family == b->family && a->dtype == b->dtype &&
           a->hdim == b->hdim && a->has_mask == b->has_mask && a->has_softcap == b->has_softcap &&
           a->has_alibi == b->has_alibi && a->tile_m == b->tile_m && a->tile_n == b->tile_n &&
           a->warps == b->warps && a->stages == b->stages && a->arch == b->arch &&
           strcmp(a->pipeline, b->pipeline) == 0 && a->page_size == b->page_size && a->kv_layout == b->kv_layout &&
           a->has_bias == b->has_bias && a->hdim_v == b->hdim_v;
}

int main(int argc, char **argv)
{
    char msg[512];
    void *h;
    set_fn lib_default, lib_decode;
    size_fn lib_size;
    kernel_fn lib_kernel;
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/libfmha_tile.so\n", argv[0]);
        return 2;
    }
    h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL lib_registry_load: %s\n0 passed, 1 failed\n", dlerror());
        return 1;
    }
    *(void **)&lib_default = dlsym(h, "fmha_default_kernel_set");
    *(void **)&lib_decode = dlsym(h, "fmha_default_decode_kernel_set");
    *(void **)&lib_size = dlsym(h, "fmha_set_size");
    *(void **)&lib_kernel = dlsym(h, "fmha_set_kernel");
    if (!lib_default || !lib_decode || !lib_size || !lib_kernel) {
        printf("FAIL lib_registry_symbols: the C API is missing\n0 passed, 1 failed\n");
        return 1;
    }
    {
        const fmha_kernel_set *ls = lib_default();
        const int nl = ls ? lib_size(ls) : -1, nr = fmha_set_size(&ref_set);
        int first_bad = -1, i, j, dup = 0;
        snprintf(msg, sizeof msg, "library %d kernels, one-unit reference %d", nl, nr);
        check(ls && nl == nr && nr > 0, "lib_registry_count_matches_one_unit_build", msg);
        for (i = 0; ls && i < nl && i < nr; ++i)
            if (!same_info(lib_kernel(ls, i), fmha_set_kernel(&ref_set, i))) { first_bad = i; break; }
        snprintf(msg, sizeof msg, "kernel %d: library %s, reference %s", first_bad,
                 first_bad >= 0 ? lib_kernel(ls, first_bad)->name : "-",
                 first_bad >= 0 ? fmha_set_kernel(&ref_set, first_bad)->name : "-");
        check(ls && first_bad < 0, "lib_registry_same_kernels_same_order", msg);
        for (i = 0; i < nr && !dup; ++i)
            for (j = i + 1; j < nr; ++j)
                if (strcmp(fmha_set_kernel(&ref_set, i)->name, fmha_set_kernel(&ref_set, j)->name) == 0) {
                    snprintf(msg, sizeof msg, "%s twice", fmha_set_kernel(&ref_set, i)->name);
                    dup = 1;
                    break;
                }
        check(!dup, "lib_registry_names_unique", msg);
    }
    {
        const fmha_kernel_set *ds = lib_decode();
        const int n = ds ? lib_size(ds) : 0;
        int i, other = 0;
        for (i = 0; i < n; ++i) {
            const fmha_family f = lib_kernel(ds, i)->family;
            other += f != FMHA_FAMILY_DECODE;
        }
        snprintf(msg, sizeof msg, "%d kernels, %d not decode", n, other);
        check(n > 0 && other == 0, "lib_registry_decode_set", msg);
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
