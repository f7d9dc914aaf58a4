/*
 * bench_force.h - --kernel A,B,..: time one kernel of a set, whatever the
 * selection rule would pick.
 *
 * bench_force_set() copies a kernel set and disables, among the rows of the
 * timed families, every kernel whose name lacks one of the comma-separated
 * pieces (e.g. "d96_,portable" or "d128_,wgmma"); the other rows stay, so a
 * backward plan still finds its streaming stages and the forward that makes
 * O and the LSE. The selection rule then runs on what is left: with pieces
 * that name one kernel per variant the bench times that kernel (its name is
 * printed with each point), and a problem it cannot serve is reported
 * unsupported. The head-dim rule (dispatch/registry.h, fmhai_hdim_cost) is
 * tuned from such runs: d = 96 on "d96_,portable" against "d128_,wgmma".
 */
#ifndef FMHA_TILE_BENCH_FORCE_H
#define FMHA_TILE_BENCH_FORCE_H

#include <stdlib.h>
#include <string.h>

/* 1 when name holds every comma-separated piece of pieces */
static int bench_force_match(const char *name, const char *pieces)
{
    char piece[64];
    const char *p = pieces;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n >= sizeof(piece)) n = sizeof(piece) - 1;
        memcpy(piece, p, n);
        piece[n] = 0;
        if (n && !strstr(name, piece)) return 0;
        p += strcspn(p, ",");
        if (*p == ',') p++;
    }
    return 1;
}

/* A copy of src whose kernels of families fam0 and fam1 (the timed ones)
 * are limited to those matching pieces; the entries are leaked (one per
 * run). Exits when no kernel of the timed families is left. */
static fmha_kernel_set bench_force_set(const fmha_kernel_set *src, const char *pieces, fmha_family fam0,
                                       fmha_family fam1, const char *prog)
{
    fmha_kernel_set out = *src;
    fmhai_entry *e = (fmhai_entry *)malloc(sizeof(fmhai_entry) * (size_t)src->count);
    int *probe = (int *)calloc((size_t)src->count, sizeof(int));
    int i, left = 0;
    if (!e || !probe) { fprintf(stderr, "%s: out of host memory\n", prog); exit(1); }
    memcpy(e, src->entries, sizeof(fmhai_entry) * (size_t)src->count);
    for (i = 0; i < src->count; ++i) {
        const int timed = e[i].info.family == fam0 || e[i].info.family == fam1;
        if (timed && e[i].enabled && !bench_force_match(e[i].info.name, pieces)) e[i].enabled = 0;
        left += timed && e[i].enabled;
    }
    if (!left) {
        fprintf(stderr, "%s: --kernel %s matches no kernel of the set\n", prog, pieces);
        exit(2);
    }
    out.entries = e;
    out.probe = probe;
    return out;
}

#endif /* FMHA_TILE_BENCH_FORCE_H */
