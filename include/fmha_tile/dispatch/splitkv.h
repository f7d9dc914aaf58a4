/*
 * Split-KV (decode): how a sequence's keys are cut into splits, how many
 * splits a problem gets, and where the partial results live.
 *
 * Decode has a handful of query rows per sequence against a long KV cache:
 * one block per (sequence, KV head group) leaves most SMs idle, so each
 * block's key tiles are cut into `splits` independent blocks. Split s takes
 * the key tiles [s * per, min((s + 1) * per, n_tiles)), per =
 * ceil(n_tiles / splits) (splits past the last tile are empty), and writes
 * its own O (normalised by its own row sum, fp32) and LSE (natural log,
 * -inf where none of its keys is visible) to the workspace. A combine
 * kernel then merges the splits of each row in split order, so the result
 * does not depend on scheduling:
 *     m = max_s lse_s,  w_s = exp(lse_s - m)
 *     O = sum_s w_s O_s / sum_s w_s,  lse = m + log(sum_s w_s)
 * A row no split sees (every lse_s = -inf) gets O = 0 and lse = -inf; a
 * split without visible keys has w_s = 0 and changes nothing. One split
 * skips the combine and writes O directly.
 *
 * Workspace (caller-owned, sized before launch; 16-byte aligned segments):
 *     lse_acc [splits][rows]          fp32
 *     o_acc   [splits][rows][hdim_v]  fp32
 * rows = query rows x query heads of the whole call (group mode: total).
 *
 * The split count comes from fmhai_splitkv_heuristic (a caller may pass its
 * own, 1..FMHA_SPLITKV_MAX_SPLITS): split only while the blocks do not fill
 * the GPU's block slots: the most splits whose blocks still fit one wave of
 * the slots when that wave is at least 90% full (measured on an H200: 3-9%
 * faster than the 85%-full waves the rule below picked there, and more
 * splits than one wave holds were slower, bench/RESULTS.md); otherwise the
 * fewest splits that reach 85% of the best wave efficiency (blocks x splits
 * over whole waves of slots). Each split keeps at least two key tiles. The decode plan passes the slots:
 * two blocks per SM for 16-bit KV, every slot for e4m3 KV (measured,
 * bench/RESULTS.md), then fmhai_splitkv_fill_waves adds splits to a grid
 * whose last wave of the SMs' real slots would run mostly empty.
 */
#ifndef FMHA_TILE_DISPATCH_SPLITKV_H
#define FMHA_TILE_DISPATCH_SPLITKV_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "error.h"

#define FMHA_SPLITKV_MAX_SPLITS 128

/* Key tiles [*t0, *t1) of split s (of `splits`) over n_tiles tiles; returns
 * their count (0: an empty split). */
static inline int fmhai_splitkv_range(int n_tiles, int splits, int s, int *t0, int *t1)
{
    const int per = splits > 0 ? (n_tiles + splits - 1) / splits : n_tiles;
    int a = s * per, z = a + per;
    if (a > n_tiles) a = n_tiles;
    if (z > n_tiles) z = n_tiles;
    *t0 = a;
    *t1 = z;
    return z - a;
}

/* Splits for `blocks` blocks (sequences x KV head groups x query tiles) whose
 * longest key range has n_tiles tiles, on num_sms SMs; at most max_splits
 * (<= FMHA_SPLITKV_MAX_SPLITS). */
static inline int fmhai_splitkv_heuristic(int num_sms, int blocks, int n_tiles, int max_splits)
{
    double eff[FMHA_SPLITKV_MAX_SPLITS + 1], best = 0.0;
    int s, cap = n_tiles / 2;
    if (max_splits > FMHA_SPLITKV_MAX_SPLITS) max_splits = FMHA_SPLITKV_MAX_SPLITS;
    if (cap > max_splits) cap = max_splits;
    if (num_sms <= 0 || blocks <= 0 || cap <= 1 || 10 * blocks >= 8 * num_sms) return 1;
    /* the fullest single wave, when it is nearly full */
    for (s = cap; s > 1; --s)
        if ((int64_t)blocks * s <= num_sms && (s - 1) * ((n_tiles + s - 1) / s) < n_tiles) break;
    if (s > 1 && 10 * (int64_t)blocks * s >= 9 * (int64_t)num_sms) return s;
    for (s = 1; s <= cap; ++s) {
        const int per = (n_tiles + s - 1) / s;
        const double waves = (double)blocks * s / num_sms;
        eff[s] = 0.0;
        if ((s - 1) * per >= n_tiles) continue;   /* a split would be empty */
        eff[s] = waves / ceil(waves);
        if (eff[s] > best) best = eff[s];
    }
    for (s = 1; s <= cap; ++s)
        if (eff[s] >= 0.85 * best) return s;
    return 1;
}

/* A grid of blocks x splits that runs past one wave of the device's real
 * block slots (`slots`: SMs x the blocks an SM holds) with a mostly empty
 * last wave: more splits, so that the waves come out nearly full (each a
 * slice of the same work). The heuristic's own slot count may be smaller
 * than what the SMs hold (two per SM for 16-bit KV), so a grid it counts as
 * two full waves can run as one full wave and a third of another (batch 64,
 * VECTORIZED pages, 3 blocks per SM: 512 blocks on 396 slots). Grids within
 * one wave are left alone: their partial wave is the heuristic's choice. */
static inline int fmhai_splitkv_fill_waves(int slots, int blocks, int n_tiles, int splits, int max_splits)
{
    int s, cap = n_tiles / 2;
    if (cap > max_splits) cap = max_splits;
    if (slots <= 0 || blocks <= 0 || splits < 1) return splits;
    for (s = splits; s <= cap || s == splits; ++s) {
        const double waves = (double)blocks * s / slots;
        if (s > splits && (s - 1) * ((n_tiles + s - 1) / s) >= n_tiles) continue;   /* an empty split */
        if (waves <= 1.0 || waves / ceil(waves) >= (s == splits ? 0.8 : 0.9)) return s;
    }
    return splits;
}

static inline size_t fmhai_align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Bytes of the workspace for `rows` query rows (x query heads) of hdim_v. */
static inline size_t fmhai_splitkv_workspace_bytes(int64_t rows, int hdim_v, int splits)
{
    if (rows <= 0 || hdim_v <= 0 || splits <= 1) return 0;
    return fmhai_align16((size_t)splits * (size_t)rows * 4) +
           fmhai_align16((size_t)splits * (size_t)rows * (size_t)hdim_v * 4);
}

/* A caller's split count and workspace: FMHA_OK, or a status and message. */
static inline fmha_status fmhai_splitkv_check(int splits, const void *workspace, size_t workspace_bytes,
                                              int64_t rows, int hdim_v)
{
    size_t need;
    if (splits < 1 || splits > FMHA_SPLITKV_MAX_SPLITS)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "split count %d outside 1..%d", splits, FMHA_SPLITKV_MAX_SPLITS);
    need = fmhai_splitkv_workspace_bytes(rows, hdim_v, splits);
    if (need == 0) return FMHA_OK;
    if (!workspace)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "%d splits need a workspace of %zu bytes", splits, need);
    if ((uintptr_t)workspace % 16 != 0)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "split-KV workspace not 16-byte aligned");
    if (workspace_bytes < need)
        return fmhai_fail(FMHA_ERR_INVALID_ARG, "split-KV workspace of %zu bytes, %d splits need %zu", workspace_bytes,
                          splits, need);
    return FMHA_OK;
}

#endif /* FMHA_TILE_DISPATCH_SPLITKV_H */
