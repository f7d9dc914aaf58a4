/*
 * Where K/V tiles come from: contiguous rows or the pages of a paged KV
 * cache, copied (cp.async) into the shared-memory layout a pipeline reads.
 *
 * Portable pipelines (mma.sync layouts of tile/smem_layout.h):
 *   fmhai_block_load_tile  contiguous rows
 *   fmhai_block_load_kv    K (or LINEAR V) of key tile n through a
 *                          fmhai_kv_src: contiguous, or paged by page class
 *                          (FMHAI_PAGING, policy/fwd_tiles.h)
 *   fmhai_block_load_v     V, VECTORIZED pages transposed to V^T
 *   fmhai_issue_kv         either one, or the e4m3 tile of FP8 KV
 * Hopper pipelines (128-byte-swizzled wgmma layout, tile/warpgroup_mma.h),
 * run by a load warpgroup:
 *   fmhai_wg_load_kv       K or V of one key tile: contiguous rows, paged
 *                          VECTORIZED K, or VECTORIZED V as V^T (the B
 *                          operand K-major)
 *   fmhai_wg_load_kv_rows  paged LINEAR K and V of one key tile together
 *   fmhai_wg_vt8_transpose e4m3 V of one key tile, landed in a staging tile,
 *                          as V^T (128-byte panel, + a 64-byte one for
 *                          192-key tiles: tile/vt8_layout.h)
 *   fmhai_wg_widen_e4m3    e4m3 K and V of one key tile, landed in the upper
 *                          half of their 16-bit stages, widened there to f16
 *   (paged tiles read each row's page index from shared memory, where the
 *   load warpgroup staged it a tile ahead)
 * Rows past the sequence's end and head-dim columns past d are zero-filled;
 * page slots are clamped to the sequence's last page (branch-free), so no
 * table entry past it is read. Pools over 4 GB take 64-bit page offsets
 * (off64), others form them in 32 bits.
 */
#ifndef FMHA_TILE_PIPELINE_KV_SOURCE_H
#define FMHA_TILE_PIPELINE_KV_SOURCE_H

#include "../tile/smem_layout.h"
#include "../tile/warpgroup_mma.h"
#include "../tile/vt8_layout.h"
#include "../tile/tma.h"           /* fmhai_bulk_load (VECTORIZED V^T) */
#include "../kernel/fwd_params.h"
#include "../policy/fwd_tiles.h"    /* FMHAI_PAGE_RUN */
#include "fwd_common.h"

/* Cooperative async copy of a rows x hd tile into a swizzled shared tile: row
 * stride and 16-byte chunk stride in bytes (16 for rows stored contiguously;
 * VECTORIZED K pages interleave chunks). Rows >= rows_valid and columns >= d
 * are zero-filled. lin: 1 unswizzled rows (VECTORIZED K's chunk-major
 * tile), 2 e4m3 rows swizzled for ldmatrix (fmhai_swz8; hd and d then count
 * byte pairs). Each thread walks one column chunk down the rows
 * with a running pointer (kept opaque so the compiler does not precompute one
 * 64-bit address per row and hold them all in registers). */
FMHAI_DEVICE int fmhai_tile_off(int r, int c, int hd, int lin)
{
    return lin == 2 ? fmhai_swz8(r, c, hd * 2) : lin ? r * hd * 2 + c * 16 : fmhai_swz(r, c, hd);
}

FMHAI_DEVICE void fmhai_block_load_tile(fmhai_smem_t dst, const char *src, int64_t row_bytes,
                                        int64_t chunk_bytes, int rows, int rows_valid, int d,
                                        int hd, int nthreads, int tid, int lin)
{
    const int chunks = hd / 8, rstep = nthreads / chunks;   /* rows per pass */
    const int r0 = tid / chunks, c = tid % chunks;
    const int col_ok = c * 8 < d;
    const int64_t gstep = rstep * row_bytes;
    const char *g = src + r0 * row_bytes + c * chunk_bytes;
    const int rv = rows_valid - r0;
    /* a tile of rows not a multiple of rstep (MLA's V: 16 chunks a row over
     * 192 threads) ends in a partial pass */
#pragma unroll
    for (int i = 0; i < (rows + rstep - 1) / rstep; ++i) {
        const int r = r0 + i * rstep;
        if (rows % rstep != 0 && r >= rows) break;
        const int ok = col_ok && (i * rstep < rv);
        fmhai_copy_async16(dst + fmhai_tile_off(r, c, hd, lin), ok ? g : src, ok);
        g = (const char *)fmhai_opaque_ptr(g + gstep);
    }
}

/* Where one (sequence, KV head)'s keys or values live: contiguous rows, or
 * pages of a paged cache. */
typedef struct fmhai_kv_src {
    const char *base;        /* contiguous: row 0; paged: pool + head offset  */
    int64_t row_bytes;       /* row stride (paged: token stride in a page)     */
    const int32_t *pages;    /* paged: the sequence's page indices             */
    int64_t page_bytes;      /* paged: page stride                             */
    int64_t chunk_bytes;     /* stride of 16-byte chunks along d (16, or
                                page_size*16 for VECTORIZED K)                 */
    int last_page;           /* paged: index of the sequence's last page       */
    const int64_t *row_offs; /* small pages: this tile's byte offset of each
                                row from base, staged in shared memory (NULL:
                                read the table) */
    const int32_t *run_pages;/* class 3: this tile's page index per 16-row
                                run, staged in shared memory */
} fmhai_kv_src;

/* The K and V sources of KV head hk of batch entry S (fwd_common.h), both
 * pipelines: contiguous rows, or the entry's pages (base = pool + head
 * offset). kvb: bytes per element. VECTORIZED (vec): K tokens sit 16 bytes
 * apart and a token's chunks page_size * 16 apart, V's 8-token groups d * 16
 * bytes apart. */
FMHAI_DEVICE void fmhai_kv_srcs_of(const fmhai_fwd_params *p, const fmhai_fwd_seq *S, int hk, int kvb, int vec,
                                   fmhai_kv_src *k, fmhai_kv_src *v)
{
    k->row_offs = v->row_offs = 0;
    k->run_pages = v->run_pages = 0;
    k->row_bytes = vec ? 16 : kvb * p->k_row;
    v->row_bytes = kvb * p->v_row;
    k->pages = v->pages = S->pages;
    k->last_page = v->last_page = S->last_page;
    k->page_bytes = kvb * p->k_page;
    v->page_bytes = kvb * p->v_page;
    k->chunk_bytes = vec ? (int64_t)16 << p->page_log2 : 16;
    v->chunk_bytes = vec ? (int64_t)16 * p->d : 16;
    k->base = (const char *)p->k + kvb * ((int64_t)S->kv_b * p->k_batch + (int64_t)S->k_start * p->k_row +
                                          (int64_t)hk * p->k_head);
    v->base = (const char *)p->v + kvb * ((int64_t)S->kv_b * p->v_batch + (int64_t)S->k_start * p->v_row +
                                          (int64_t)hk * p->v_head);
}

/* Page index of token tok, clamped to the sequence's last page. */
FMHAI_DEVICE int fmhai_page_of(const fmhai_kv_src *s, int tok, int page_log2)
{
    return s->pages[min(tok >> page_log2, s->last_page)];
}

/* Stages row r (token tok, in page `page`) of a tile: its K row offset and
 * its V row (or, VECTORIZED, 8-token group) offset from the sources' bases. */
FMHAI_DEVICE void fmhai_stage_row(int64_t *dst, int bn, int r, const fmhai_kv_src *k,
                                  const fmhai_kv_src *v, int tok, int page, int page_log2,
                                  int vec)
{
    const int in_page = tok & ((1 << page_log2) - 1);
    dst[r] = (int64_t)page * k->page_bytes + (int64_t)in_page * k->row_bytes;
    dst[bn + r] = (int64_t)page * v->page_bytes +
                  (vec ? (int64_t)(in_page >> 3) * v->chunk_bytes : (int64_t)in_page * v->row_bytes);
}

/* Tile n (rows n*BN ..) of K or V into shared memory. paging 0: contiguous
 * rows; 1: pages of any power-of-two size; 2: pages that are multiples of
 * the tile (no per-row path compiled); 3: pages of at least FMHAI_PAGE_RUN
 * tokens (LINEAR only). Pages that hold whole tiles take one index read per
 * tile; class 3 reads one index per run of FMHAI_PAGE_RUN rows; smaller pages
 * are looked up per row. Page slots are clamped to the sequence's last page
 * (branch-free), so no index past its table is read; rows past s_k are
 * zero-filled. off64: 64-bit page offsets (pools over 4 GB); otherwise the
 * page offset is formed in 32 bits. */
FMHAI_DEVICE const char *fmhai_page_base(const fmhai_kv_src *s, int page, int off64)
{
    return off64 ? s->base + (int64_t)page * s->page_bytes
                 : s->base + (uint32_t)page * (uint32_t)s->page_bytes;
}

/* The n run page indices of a tile (class 3) from shared memory into
 * registers, with the widest loads n allows (the slot is 32-byte aligned). */
FMHAI_DEVICE void fmhai_runs_to_regs(int *rp, const int32_t *runs, int n)
{
    if (n % 4 == 0) {
#pragma unroll
        for (int q = 0; q < n; q += 4) {
            const int4 v = *(const int4 *)(runs + q);
            rp[q] = v.x; rp[q + 1] = v.y; rp[q + 2] = v.z; rp[q + 3] = v.w;
        }
    } else if (n % 2 == 0) {
#pragma unroll
        for (int q = 0; q < n; q += 2) {
            const int2 v = *(const int2 *)(runs + q);
            rp[q] = v.x; rp[q + 1] = v.y;
        }
    } else {
#pragma unroll
        for (int q = 0; q < n; ++q) rp[q] = runs[q];
    }
}

/* Page class 3 (pages of >= FMHAI_PAGE_RUN tokens, LINEAR): the tile is
 * runs of FMHAI_PAGE_RUN rows that each lie in one page, whose page indices
 * were staged in shared memory ahead (s->run_pages; a global read here would
 * stall the copies behind it). Thread (r0, c) copies chunk c of rows r0,
 * r0 + rstep, ..: its offset inside a run, (r0 % RUN) rows and c chunks, is
 * formed once per tile (tb); per run of `span` rows (RUN, or rstep when a
 * thread's rows are further apart: one row per run), the run's page offset
 * and its first token's offset in the page are added, in 32 bits when the
 * pool is under 4 GB (OFF64 == 0: every page offset fits; no 64-bit
 * multiply), and the thread's rows follow a running pointer. The indices of
 * a tile are read with vector loads. Thread counts whose row step neither
 * divides nor is a multiple of RUN (3 or 6 warps) take the per-row form. */
FMHAI_DEVICE void fmhai_load_runs(fmhai_smem_t dst, const fmhai_kv_src *s, int tok0, int s_k,
                                  int hd, int bn, int rstep, int r0, int c, int col_ok,
                                  int page_mask, int64_t chunk_bytes, int lin, const int OFF64)
{
    const int RUN = FMHAI_PAGE_RUN;
    if (RUN % rstep != 0 && rstep % RUN != 0) {
#pragma unroll
        for (int i = 0; i < bn / rstep; ++i) {
            const int r = r0 + i * rstep, tok = tok0 + r;
            const char *g = fmhai_page_base(s, s->run_pages[r / RUN], OFF64) +
                            (int64_t)(tok & page_mask) * s->row_bytes + c * chunk_bytes;
            fmhai_copy_async16(dst + fmhai_tile_off(r, c, hd, lin), g, col_ok && tok < s_k);
        }
        return;
    }
    const int span = rstep > RUN ? rstep : RUN;
    const int64_t gstep = rstep * s->row_bytes;
    /* opaque: formed here per tile (one add), not held across the GEMMs */
    const char *tb = (const char *)fmhai_opaque_ptr(s->base + (int64_t)(r0 % RUN) * s->row_bytes +
                                                    c * chunk_bytes);
    const int rv = s_k - tok0 - r0;   /* this thread's row r0 + k is valid while k < rv */
    int rp[8];                        /* run page indices (<= 8 runs: tile_n <= 128) */
    if (span == RUN && (bn / RUN) % 2 == 0) {
        fmhai_runs_to_regs(rp, s->run_pages, bn / RUN);
    } else {
#pragma unroll
        for (int j = 0; j < bn / span; ++j) rp[j] = s->run_pages[(j * span + r0) / RUN];
    }
#pragma unroll
    for (int j = 0; j < bn / span; ++j) {
        const int q = (j * span + r0) / RUN;   /* the run's index in the tile (span == RUN: j) */
        const int in_page = (tok0 + q * RUN) & page_mask;
        const char *g = OFF64 ? tb + ((int64_t)rp[j] * s->page_bytes + (int64_t)in_page * s->row_bytes)
                              : tb + ((uint32_t)rp[j] * (uint32_t)s->page_bytes +
                                      (uint32_t)in_page * (uint32_t)s->row_bytes);
#pragma unroll
        for (int i = 0; i < span / rstep; ++i) {
            const int k = j * span + i * rstep;
            fmhai_copy_async16(dst + fmhai_tile_off(r0 + k, c, hd, lin), g, col_ok && k < rv);
            g += gstep;
        }
    }
}

/* VECTORIZED pages below the tile (class 1 or 3): the address of tile row r
 * (token tok0 + r) in K (chunk 0 of the token) or of the V group holding it:
 * class 3 from its run's staged page index, class 1 from the staged row
 * offset (the prologue's tiles, staged by nobody, look the page up). */
FMHAI_DEVICE const char *fmhai_vec_at(const fmhai_kv_src *s, int paging, int r, int tok0,
                                      int page_log2, int off64, int is_v)
{
    const int tok = tok0 + r, in_page = tok & ((1 << page_log2) - 1);
    const int64_t off = is_v ? (int64_t)(in_page >> 3) * s->chunk_bytes : (int64_t)in_page * 16;
    if (paging == 3) return fmhai_page_base(s, s->run_pages[r / FMHAI_PAGE_RUN], off64) + off;
    if (s->row_offs) return s->base + s->row_offs[r];
    return fmhai_page_base(s, fmhai_page_of(s, tok, page_log2), off64) + off;
}

FMHAI_DEVICE void fmhai_block_load_kv(fmhai_smem_t dst, const fmhai_kv_src *s, int n, int s_k,
                                      int d, int hd, int bn, int nthreads, int tid,
                                      int paging, int page_log2, int off64, int vec, int lin)
{
    const int64_t chunk_bytes = vec ? s->chunk_bytes : 16;
    if (paging == 0) {
        fmhai_block_load_tile(dst, s->base + (int64_t)n * bn * s->row_bytes, s->row_bytes, 16, bn,
                              s_k - n * bn, d, hd, nthreads, tid, lin);
        return;
    }
    const int tok0 = n * bn;
    const int page_mask = (1 << page_log2) - 1;
    if (vec) {
        /* VECTORIZED K: a token's 16-byte chunks sit page_size*16 bytes apart
         * and consecutive tokens 16 bytes apart, so consecutive threads take
         * consecutive tokens of one chunk column (coalesced reads). */
        const int one_page = paging == 2;
        if (one_page && nthreads % bn == 0) {
            /* the tile is a [hd/8][bn] array of 16-byte chunks, chunk rows
             * chunk_bytes apart: a plain unswizzled tile copy of it lands
             * chunk-major (fmhai_cmaj) */
            fmhai_block_load_tile(dst, fmhai_page_base(s, fmhai_page_of(s, tok0, page_log2), off64) +
                                           (int64_t)(tok0 & page_mask) * 16,
                                  chunk_bytes, 16, hd / 8, d / 8, min(s_k - tok0, bn) * 8, bn * 8,
                                  nthreads, tid, 1);
            return;
        }
        /* ROW: the threads cover whole chunk columns, so a thread keeps one
         * token (row) and walks chunk columns, its row's address formed once
         * per tile; otherwise each copy finds its own row */
        const int ROW = nthreads % bn == 0;
        const char *tile = one_page ? fmhai_page_base(s, fmhai_page_of(s, tok0, page_log2), off64) +
                                          (int64_t)(tok0 & page_mask) * 16
                                    : s->base;
        const char *trow = ROW ? fmhai_vec_at(s, paging, tid % bn, tok0, page_log2, off64, 0) : s->base;
#pragma unroll
        for (int i = 0; i < bn * (hd / 8) / nthreads; ++i) {
            const int idx = tid + i * nthreads;
            const int r = ROW ? tid % bn : idx % bn, c = ROW ? tid / bn + i * (nthreads / bn) : idx / bn;
            const int tok = tok0 + r;
            const char *row = ROW ? trow : one_page ? tile + r * 16
                                                    : fmhai_vec_at(s, paging, r, tok0, page_log2, off64, 0);
            const int ok = c * 8 < d && tok < s_k;
            fmhai_copy_async16(dst + fmhai_cmaj(r, c, bn), ok ? row + c * chunk_bytes : s->base, ok);
        }
        return;
    }
    if (paging == 2 || (paging == 1 && ((1 << page_log2) % bn) == 0)) {   /* the tile sits in one page */
        const char *pg = fmhai_page_base(s, s->pages[min(tok0 >> page_log2, s->last_page)], off64);
        fmhai_block_load_tile(dst, pg + (int64_t)(tok0 & page_mask) * s->row_bytes, s->row_bytes,
                              chunk_bytes, bn, s_k - tok0, d, hd, nthreads, tid, lin);
        return;
    }
    const int chunks = hd / 8, rstep = nthreads / chunks;
    const int r0 = tid / chunks, c = tid % chunks;
    const int col_ok = c * 8 < d;
    if (paging == 3) {
        if (off64)
            fmhai_load_runs(dst, s, tok0, s_k, hd, bn, rstep, r0, c, col_ok, page_mask, chunk_bytes,
                            lin, 1);
        else
            fmhai_load_runs(dst, s, tok0, s_k, hd, bn, rstep, r0, c, col_ok, page_mask, chunk_bytes,
                            lin, 0);
        return;
    }
#pragma unroll
    for (int i = 0; i < bn / rstep; ++i) {
        const int r = r0 + i * rstep, tok = tok0 + r;
        const char *g = s->row_offs ? s->base + s->row_offs[r]
                                    : fmhai_page_base(s, fmhai_page_of(s, tok, page_log2), off64) +
                                          (int64_t)(tok & page_mask) * s->row_bytes;
        g += c * chunk_bytes;
        fmhai_copy_async16(dst + fmhai_tile_off(r, c, hd, lin), g, col_ok && tok < s_k);
    }
}

/* Class 3: starts the copy of tile n's page index per 16-row run (clamped
 * to the sequence's last page) into dst[0 .. bn/16), in the current commit
 * group; the wait and barrier before the tile's K/V copies publish it. */
FMHAI_DEVICE void fmhai_stage_runs(fmhai_smem_t dst, const fmhai_kv_src *s, int n, int bn,
                                   int tid, int page_log2)
{
    if (tid < bn / FMHAI_PAGE_RUN)
        fmhai_copy_async4(dst + 4 * tid,
                          s->pages + min((n * bn + tid * FMHAI_PAGE_RUN) >> page_log2, s->last_page), 1);
}

/* VECTORIZED V tile n, transposed into shared memory as V^T (chunk-major
 * [bn/8][hd][8], fmhai_cmaj): each 16-byte chunk of a page holds 8
 * consecutive tokens of one d, which is one chunk of a V^T row. Pages hold
 * whole 8-token groups (page_size % 8 == 0); a group that runs past s_k
 * copies only its valid tokens and zero-fills the rest (FULL == 0: the
 * tile's last groups), rows past d are zero-filled. The group stride is
 * d * 16 bytes. When the threads cover whole groups (nthreads % hd == 0) a
 * thread keeps one d row and walks the groups: in a one-page tile (class 2)
 * with a running pointer, otherwise from each group's run page index or
 * staged offset (fmhai_vec_at). */
FMHAI_DEVICE void fmhai_vt_copy(fmhai_smem_t dst, const fmhai_kv_src *s, const char *tile,
                                int paging, int tok0, int s_k, int d, int hd, int bn,
                                int nthreads, int tid, int page_log2, int off64, const int FULL)
{
    /* k0 = tid / hd is 0 when the threads are one group wide */
    const int row = tid % hd, kstep = nthreads / hd, k0 = kstep == 1 ? 0 : tid / hd, one_page = paging == 2;
    const int64_t gstep = kstep * s->chunk_bytes;
    const char *g = (const char *)fmhai_opaque_ptr(tile + k0 * s->chunk_bytes + row * 16);
    /* class 3: the tile's run page indices in registers (16-byte loads); with
     * one or two groups per thread row step, a group's run is known at
     * compile time (k0 <= 1), else it is read per group */
    const int GPR = FMHAI_PAGE_RUN / 8;   /* groups per run */
    int rp[FMHAI_FWD_MAX_BN / FMHAI_PAGE_RUN];
    const int RP = paging == 3 && kstep <= GPR && (bn / FMHAI_PAGE_RUN) % 4 == 0;
    if (RP) fmhai_runs_to_regs(rp, s->run_pages, bn / FMHAI_PAGE_RUN);
    const char *rb = s->base + row * 16;
#pragma unroll
    for (int i = 0; i < bn / 8 / kstep; ++i) {
        const int kc = k0 + i * kstep, tok = tok0 + kc * 8;
        const char *src;
        if (one_page) {
            src = g;
        } else if (paging == 3) {
            /* the run's page and the group's slot in it (a class-16 kernel
             * serves pages of any size from 16 up, so tok0 need not start a
             * page), in 32 bits below 4 GB */
            const int pg = RP ? rp[(i * kstep) / GPR] : s->run_pages[kc / GPR];
            const uint32_t slot = (uint32_t)(((tok0 >> 3) + kc) & ((1 << (page_log2 - 3)) - 1)) *
                                  (uint32_t)s->chunk_bytes;
            src = off64 ? rb + ((int64_t)pg * s->page_bytes + slot)
                        : rb + ((uint32_t)pg * (uint32_t)s->page_bytes + slot);
        } else {
            src = fmhai_vec_at(s, paging, kc * 8, tok0, page_log2, off64, 1) + row * 16;
        }
        if (FULL) {
            fmhai_copy_async16(dst + fmhai_cmaj(row, kc, hd), row < d ? src : s->base, row < d);
        } else {
            const int valid = row < d ? min(max(s_k - tok, 0), 8) : 0;
            fmhai_copy_async16_part(dst + fmhai_cmaj(row, kc, hd), valid ? src : s->base, valid * 2);
        }
        if (one_page) g = (const char *)fmhai_opaque_ptr(g + gstep);
    }
}

FMHAI_DEVICE void fmhai_block_load_vt(fmhai_smem_t dst, const fmhai_kv_src *s, int n, int s_k,
                                      int d, int hd, int bn, int nthreads, int tid, int paging,
                                      int page_log2, int off64)
{
    const int groups = bn / 8, tok0 = n * bn, page_mask = (1 << page_log2) - 1;
    /* a tile in one page (class 2; class 1 reads its staged row offsets for
     * every page size): its first group's address, read once per tile */
    const int one_page = paging == 2;
    const char *tile = one_page ? fmhai_page_base(s, fmhai_page_of(s, tok0, page_log2), off64) +
                                      (int64_t)((tok0 & page_mask) >> 3) * s->chunk_bytes
                                : s->base;
    if (nthreads % hd == 0) {
        if (s_k - tok0 >= bn)
            fmhai_vt_copy(dst, s, tile, paging, tok0, s_k, d, hd, bn, nthreads, tid, page_log2, off64, 1);
        else
            fmhai_vt_copy(dst, s, tile, paging, tok0, s_k, d, hd, bn, nthreads, tid, page_log2, off64, 0);
        return;
    }
#pragma unroll
    for (int i = 0; i < hd * groups / nthreads; ++i) {
        /* consecutive threads take consecutive d rows of one 8-token group:
         * 16-byte chunks that are contiguous in the page */
        const int idx = tid + i * nthreads;
        const int row = idx % hd, kc = idx / hd, tok = tok0 + kc * 8;
        const char *g = (one_page ? tile + kc * s->chunk_bytes
                                  : fmhai_vec_at(s, paging, kc * 8, tok0, page_log2, off64, 1)) + row * 16;
        const int valid = row < d ? min(max(s_k - tok, 0), 8) : 0;
        fmhai_copy_async16_part(dst + fmhai_cmaj(row, kc, hd), valid ? g : s->base, valid * 2);
    }
}

FMHAI_DEVICE void fmhai_block_load_v(fmhai_smem_t dst, const fmhai_kv_src *s, int n, int s_k, int d,
                                     int hd, int bn, int nthreads, int tid, int paging,
                                     int page_log2, int off64, int vec)
{
    if (vec)
        fmhai_block_load_vt(dst, s, n, s_k, d, hd, bn, nthreads, tid, paging, page_log2, off64);
    else
        fmhai_block_load_kv(dst, s, n, s_k, d, hd, bn, nthreads, tid, paging, page_log2, off64, 0, 0);
}

/* K or V tile n into its slot: 16-bit KV straight into the GEMM tile, e4m3
 * KV into its e4m3 tile (d and hd in byte pairs there; swizzled for the
 * GEMMs' ldmatrix). */
FMHAI_DEVICE void fmhai_issue_kv(fmhai_smem_t dst16, fmhai_smem_t dst8, const fmhai_kv_src *s,
                                 int is_v, int n, int s_k, int d, int hd, int bn, int nthreads,
                                 int tid, int paging, int page_log2, int off64, int vec, int kv8)
{
    if (kv8)
        fmhai_block_load_kv(dst8, s, n, s_k, d / 2, hd / 2, bn, nthreads, tid, paging, page_log2,
                            off64, 0, 2);
    else if (is_v)
        fmhai_block_load_v(dst16, s, n, s_k, d, hd, bn, nthreads, tid, paging, page_log2, off64, vec);
    else
        fmhai_block_load_kv(dst16, s, n, s_k, d, hd, bn, nthreads, tid, paging, page_log2, off64,
                            vec, 0);
}

#if defined(FMHA_PLATFORM_NVIDIA)
/* ---- wgmma-layout tiles (the Hopper pipelines' load warpgroup) -------------
 * Tiles in the 128-byte-swizzled layout of tile/warpgroup_mma.h. Paged tiles
 * read each row's page index from sPage[r] (the tile's rows, clamped to the
 * sequence's last page, staged in shared memory a tile ahead), so no copy
 * waits on a global table read. */

/* base + page * page stride + slot * slot_bytes: 32-bit offsets below 4 GB */
FMHAI_DEVICE const char *fmhai_page_at(const fmhai_kv_src *s, const char *base, int page, int slot,
                                       int64_t slot_bytes, int off64)
{
    return off64 ? base + ((int64_t)page * s->page_bytes + (int64_t)slot * slot_bytes)
                 : base + ((uint32_t)page * (uint32_t)s->page_bytes + (uint32_t)slot * (uint32_t)slot_bytes);
}

/* Where a Hopper K/V tile comes from (compile-time at each call site). */
#define FMHAI_WG_KV_CONTIG 0      /* contiguous rows                         */
#define FMHAI_WG_KV_PAGED 1       /* LINEAR pages (fmhai_wg_load_kv_rows)    */
#define FMHAI_WG_KV_VEC_K 2       /* VECTORIZED K [d/8][page][8]             */
#define FMHAI_WG_KV_VEC_VT 3      /* VECTORIZED V [page/8][d][8], lands as V^T */

/* VECTORIZED K or V^T of one key tile (fmhai_wg_load_kv), OFF64 fixed */
FMHAI_DEVICE void fmhai_wg_load_kv_vec(fmhai_smem_t dst, const fmhai_kv_src *s, const int32_t *sPage, int tok0,
                                       int s_k, int d, int hd, int rows, int nthreads, int tid, int page_mask,
                                       int OFF64, int kind)
{
    if (kind == FMHAI_WG_KV_VEC_K) {
        /* a token's chunks sit chunk_bytes apart, consecutive tokens 16
         * bytes apart: consecutive threads take consecutive tokens of one
         * chunk column (rows divides nthreads) */
        const int cstep = nthreads / rows, r = tid % rows, c0 = tid / rows;
        const int row_ok = tok0 + r < s_k;
        const char *g = fmhai_page_at(s, s->base, sPage[r], (tok0 + r) & page_mask, 16, OFF64) +
                        c0 * s->chunk_bytes;
        const int64_t gstep = cstep * s->chunk_bytes;
#pragma unroll
        for (int i = 0; i < hd / 8 / cstep; ++i) {
            const int c = c0 + i * cstep;
            fmhai_copy_async16(dst + fmhai_cmaj(r, c, rows), g, row_ok && c * 8 < d);
            g += gstep;
        }
    } else if (nthreads % hd == 0 && tok0 + rows <= s_k) {
        /* a whole tile (all but a sequence's last): each thread keeps one d
         * row (consecutive threads, consecutive rows of one 8-token group,
         * contiguous in the page) and copies whole chunks, no per-copy
         * length (the general loop below spent 4 of its ~10 instructions a
         * copy on it) */
        const int dr = tid % hd, kstep = nthreads / hd;
        const char *vb = s->base + dr * 16;
        const int d_ok = dr < d;
#pragma unroll
        for (int i = 0; i < (rows / 8) / kstep; ++i) {
            const int kc = tid / hd + i * kstep, tok = tok0 + kc * 8;
            const char *g = fmhai_page_at(s, vb, sPage[kc * 8], (tok & page_mask) >> 3, s->chunk_bytes, OFF64);
            fmhai_copy_async16(dst + fmhai_cmaj(dr, kc, hd), g, d_ok);
        }
    } else {
        /* consecutive threads take consecutive d rows of one 8-token group
         * (contiguous in the page); a group past s_k copies its valid tokens
         * and zero-fills the rest */
#pragma unroll
        for (int i = 0; i < hd * (rows / 8) / nthreads; ++i) {
            const int idx = tid + i * nthreads, dr = idx % hd, kc = idx / hd, tok = tok0 + kc * 8;
            const char *g = fmhai_page_at(s, s->base + dr * 16, sPage[kc * 8], (tok & page_mask) >> 3,
                                          s->chunk_bytes, OFF64);
            const int valid = dr < d ? min(max(s_k - tok, 0), 8) : 0;
            fmhai_copy_async16_part(dst + fmhai_cmaj(dr, kc, hd), g, valid * 2);
        }
    }
}

/* VECTORIZED V of a whole key tile as V^T by bulk copies: an 8-token group
 * of a page is d x 16 contiguous bytes (src, this thread's group) and lands
 * as chunk column kc of the chunk-major V^T ([groups][d][16 bytes]), so
 * thread kc < groups copies group kc in one instruction (the cp.async
 * gather took d copies a group), counted on mbarrier bar, whose arrival
 * thread 0 makes with the tile's bytes. d must be the tile's head dim (no
 * zero-filled rows). fence: the slot was last read through the generic
 * proxy (ldmatrix), which the issuing threads order before the copies. */
FMHAI_DEVICE void fmhai_vt_bulk(fmhai_smem_t dst, const char *src, int d, int groups, int tid, int fence,
                                fmhai_smem_t bar)
{
    const int bytes = d * 16;
    if (tid >= groups) return;
    if (fence) fmhai_wg_fence_smem();
    if (tid == 0) fmhai_mbar_expect_tx(bar, groups * bytes);
    fmhai_bulk_load(dst + (uint32_t)(tid * bytes), src, bytes, bar);
}

/* The Hopper load warpgroup's: tile [tok0, tok0 + rows), the groups' pages
 * from the staged row pages (the stage was last read by wgmma) */
FMHAI_DEVICE void fmhai_wg_load_vt_bulk(fmhai_smem_t dst, const fmhai_kv_src *s, const int32_t *sPage, int tok0,
                                        int d, int rows, int tid, int page_log2, int off64, fmhai_smem_t bar)
{
    const char *src = s->base;
    if (tid < rows / 8)
        src = fmhai_page_at(s, s->base, sPage[tid * 8], ((tok0 + tid * 8) & ((1 << page_log2) - 1)) >> 3,
                            s->chunk_bytes, off64);
    fmhai_vt_bulk(dst, src, d, rows / 8, tid, 0, bar);
}

/* Key tile [tok0, tok0 + rows) of K or V into dst by nthreads threads
 * (paged LINEAR K and V load together: fmhai_wg_load_kv_rows). Rows past s_k
 * and columns past d are zero-filled (their copies read nothing; their
 * addresses stay inside the pool, page slots being clamped). CONTIG lands
 * in the 128-byte-swizzled layout; VECTORIZED pages land chunk-major
 * (fmhai_cmaj, read through fmhai_wg_desc_cmaj): K as [rows][hd], V as V^T
 * [hd][rows] (each 16-byte chunk of a V page is 8 consecutive tokens of one
 * d, one chunk of a V^T row). A page stores those chunks in that order, so
 * a warp's 32 copies are 512 contiguous bytes on both sides; swizzled, each
 * 32-byte sector was split over two shared rows and fetched twice from L2
 * (0.70-0.74 of the contiguous forward, measured). 64- and 32-bit page
 * offsets are separate loops (as fmhai_wg_load_kv_rows). */
FMHAI_DEVICE void fmhai_wg_load_kv(fmhai_smem_t dst, const fmhai_kv_src *s, const int32_t *sPage, int tok0,
                                   int s_k, int d, int hd, int rows, int nthreads, int tid, int page_log2,
                                   int off64, int kind)
{
    if (kind == FMHAI_WG_KV_CONTIG) {
        fmhai_wg_load_tile(dst, s->base + (int64_t)tok0 * s->row_bytes, s->row_bytes, rows, s_k - tok0, d, hd,
                           nthreads, tid);
        return;
    }
    asm volatile("" : "+r"(dst), "+r"(tid));   /* as fmhai_wg_load_tile: no hoisted addresses */
    const int page_mask = (1 << page_log2) - 1;
    if (off64) fmhai_wg_load_kv_vec(dst, s, sPage, tok0, s_k, d, hd, rows, nthreads, tid, page_mask, 1, kind);
    else fmhai_wg_load_kv_vec(dst, s, sPage, tok0, s_k, d, hd, rows, nthreads, tid, page_mask, 0, kind);
}

/* Paged LINEAR K and V of key tile [tok0, tok0 + rows) together (their rows
 * share the page lookups). Thread (g, c), g = tid / chunks, copies chunk c of
 * the consecutive rows g * rpt .. g * rpt + rpt - 1 (rpt = rows per thread):
 * a warp instruction still covers whole rows (adjacent 16-byte chunks), and
 * the thread reads its rows' page indices four at a time with one 16-byte
 * shared load. One row per copy with its own lookup, K and V apart, ran at
 * 0.81 of the contiguous forward, this at 0.97-0.98 (bench/RESULTS.md).
 * Each variant (64-bit offsets; 32-bit with K and V pools laid out alike,
 * one offset per row for both; 32-bit apart) is its own loop: selected per
 * row, every row paid for all of them, and once the forward had got faster
 * that held paged at 0.92 of it (1.01-1.02 as loops apart). Rows past s_k
 * copy nothing from the chunk's base (zero-filled). */
FMHAI_DEVICE void fmhai_wg_kv_rows_loop(fmhai_smem_t dk, fmhai_smem_t dv, const fmhai_kv_src *ks,
                                        const fmhai_kv_src *vs, const int32_t *pg, int tok0, int s_k, int col_ok,
                                        int r0, int c, int rpt, int rows, int page_mask, int OFF64, int SAME)
{
    const char *kb = ks->base + c * 16, *vb = vs->base + c * 16;
#pragma unroll
    for (int q = 0; q < rpt; q += 4) {
        const int4 p4 = *(const int4 *)(pg + q);
        const int pages[4] = { p4.x, p4.y, p4.z, p4.w };
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r = r0 + q + e, slot = (tok0 + r) & page_mask;
            const int ok = col_ok && tok0 + r < s_k;
            const char *gk, *gv;
            if (OFF64) {
                gk = ok ? fmhai_page_at(ks, kb, pages[e], slot, ks->row_bytes, 1) : kb;
                gv = ok ? fmhai_page_at(vs, vb, pages[e], slot, vs->row_bytes, 1) : vb;
            } else {
                const uint32_t ko = ok ? (uint32_t)pages[e] * (uint32_t)ks->page_bytes +
                                         (uint32_t)slot * (uint32_t)ks->row_bytes : 0u;
                const uint32_t vo = SAME ? ko : ok ? (uint32_t)pages[e] * (uint32_t)vs->page_bytes +
                                                     (uint32_t)slot * (uint32_t)vs->row_bytes : 0u;
                gk = kb + ko;
                gv = vb + vo;
            }
            fmhai_copy_async16(dk + fmhai_wg_tile_off(r, c, rows), gk, ok);
            fmhai_copy_async16(dv + fmhai_wg_tile_off(r, c, rows), gv, ok);
        }
    }
}

/* A whole tile whose rows of a thread share one page (pages of at least
 * rpt tokens: the thread's rpt rows start at a multiple of rpt): one page
 * lookup, then a running pointer a row (as the contiguous tiles), two
 * instructions a copy where the loop above spends six to eight. */
FMHAI_DEVICE void fmhai_wg_kv_rows_run(fmhai_smem_t dk, fmhai_smem_t dv, const fmhai_kv_src *ks,
                                       const fmhai_kv_src *vs, int page, int slot, int col_ok, int r0, int c,
                                       int rpt, int rows)
{
    const char *gk = fmhai_page_at(ks, ks->base + c * 16, page, slot, ks->row_bytes, 1);
    const char *gv = fmhai_page_at(vs, vs->base + c * 16, page, slot, vs->row_bytes, 1);
    const int64_t kst = ks->row_bytes, vst = vs->row_bytes;
    const fmhai_smem_t ok = dk + fmhai_wg_tile_off(r0, c, rows), ov = dv + fmhai_wg_tile_off(r0, c, rows);
#pragma unroll
    for (int e = 0; e < rpt; ++e) {
        /* r0 is a multiple of 8: row r0 + e's swizzle is e's */
        const int at = e * 128 + ((((c & 7) ^ (e & 7)) - (c & 7)) << 4);
        fmhai_copy_async16(ok + at, gk, col_ok);
        fmhai_copy_async16(ov + at, gv, col_ok);
        gk = (const char *)fmhai_opaque_ptr(gk + kst);
        gv = (const char *)fmhai_opaque_ptr(gv + vst);
    }
}

FMHAI_DEVICE void fmhai_wg_load_kv_rows(fmhai_smem_t dk, fmhai_smem_t dv, const fmhai_kv_src *ks,
                                        const fmhai_kv_src *vs, const int32_t *sPage, int tok0, int s_k, int d,
                                        int hd, int rows, int nthreads, int tid, int page_log2, int off64)
{
    asm volatile("" : "+r"(dk), "+r"(dv), "+r"(tid));
    const int chunks = hd / 8, groups = nthreads / chunks, rpt = rows / groups;
    const int g = tid / chunks, c = tid % chunks, page_mask = (1 << page_log2) - 1;
    const int col_ok = c * 8 < d;
    const int32_t *pg = sPage + g * rpt;
    if (rpt % 8 == 0 && ((rpt - 1) >> page_log2) == 0 && tok0 + rows <= s_k)
        fmhai_wg_kv_rows_run(dk, dv, ks, vs, pg[0], (tok0 + g * rpt) & page_mask, col_ok, g * rpt, c, rpt, rows);
    else if (off64)
        fmhai_wg_kv_rows_loop(dk, dv, ks, vs, pg, tok0, s_k, col_ok, g * rpt, c, rpt, rows, page_mask, 1, 0);
    else if (ks->page_bytes == vs->page_bytes && ks->row_bytes == vs->row_bytes)
        fmhai_wg_kv_rows_loop(dk, dv, ks, vs, pg, tok0, s_k, col_ok, g * rpt, c, rpt, rows, page_mask, 0, 1);
    else
        fmhai_wg_kv_rows_loop(dk, dv, ks, vs, pg, tok0, s_k, col_ok, g * rpt, c, rpt, rows, page_mask, 0, 0);
}

/* The same in the grouped layout: the partial first tile of a row block
 * whose whole tiles come by TMA in that layout. Once a block, so a rolled
 * loop (64-bit offsets, any page size; unrolled as above, its copies grew
 * the load warpgroup's loop by 900 instructions). */
FMHAI_DEVICE void fmhai_wg_load_kv_rows_grp(fmhai_smem_t dk, fmhai_smem_t dv, const fmhai_kv_src *ks,
                                            const fmhai_kv_src *vs, const int32_t *sPage, int tok0, int s_k, int d,
                                            int hd, int rows, int nthreads, int tid, int page_log2)
{
    const int chunks = hd / 8, cbs = hd / 64;
    const int page_mask = (1 << page_log2) - 1;
#pragma unroll 1
    for (int i = tid; i < rows * chunks; i += nthreads) {
        const int r = i / chunks, c = i % chunks, slot = (tok0 + r) & page_mask;
        const int ok = c * 8 < d && tok0 + r < s_k;
        const int pg = sPage[r];
        const char *gk = ok ? fmhai_page_at(ks, ks->base + c * 16, pg, slot, ks->row_bytes, 1) : ks->base;
        const char *gv = ok ? fmhai_page_at(vs, vs->base + c * 16, pg, slot, vs->row_bytes, 1) : vs->base;
        fmhai_copy_async16(dk + fmhai_wg_tile_off_grp(r, c, cbs), gk, ok);
        fmhai_copy_async16(dv + fmhai_wg_tile_off_grp(r, c, cbs), gv, ok);
    }
}

/* ---- FP8 (e4m3) V for the Hopper e4m3 P V product --------------------------
 * wgmma reads an 8-bit B operand K-major only, and V rows are MN-major, so
 * the load warpgroup lands V rows of a key tile (bn 64, 128 or 192) by
 * cp.async or TMA in a staging tile (fmhai_wg_load_tile's layout, [bn][hd]
 * bytes) and then writes them as V^T [hd][bn] in the layout of
 * tile/vt8_layout.h: fmhai_wg_vt8_transpose. Keys 0..127 go to a panel of
 * 128-byte rows (a 64-key tile fills half of each row), keys 128..191 of a
 * 192-key tile to a panel of 64-byte rows (64-byte swizzle) after it.
 * 128-byte panel: lane (c, t) of a group of keys / 4 lanes (c = 16-key
 * chunk, t = lane % 4) takes keys 16c + 2t + {0, 1, 8, 9}: the score columns
 * that thread t of an MMA warp holds and packs into bytes 4t..4t+3 of an
 * e4m3 A fragment, so those keys are stored in that order and P needs no
 * shuffle. The groups share out the 16-byte columns of d; per column: four
 * 16-byte shared loads, a 4 x 4 byte transpose per word (prmt), sixteen
 * 4-byte stores; the stores of one d row from a 32-lane group cover 32 banks
 * (chunk c ^ (d % 8), word t; two 16-lane groups meet in a bank twice); the
 * loads of a phase of 8 lanes hit 8 different 16-byte bank groups.
 * 64-byte panel: 16 lanes a column (c 0..3, t), two columns a warp, one
 * column a lane at hdim 128 (fmhai_vt8_lane64); the half-warp of the odd
 * column stores its rows in the other parity order, so a store instruction
 * covers 32 banks there too. At bn 192 each lane does three columns (two in
 * the 128-byte panel, one in the 64-byte one), as many as at bn 128 plus half.
 * Rows past s_k and columns past d were zero-filled by the copy (P is 0
 * there, but 0 * NaN is not). Through registers straight from global memory
 * instead, each tile waited out its loads' latency in the load warpgroup. */
FMHAI_DEVICE uint32_t fmhai_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

/* Four 16-byte loads of column col, keys key0 + {0, 1, 8, 9} (v[e]), and
 * the 4 x 4 byte transposes of word m: o[b] holds byte b of the four keys'
 * word m (d row col * 16 + 4m + b), key offsets 0, 1, 8, 9 in bytes 0..3. */
FMHAI_DEVICE void fmhai_vt8_load4(uint4 *v, fmhai_smem_t srow, int srows, int col, int t)
{
#pragma unroll
    for (int e = 0; e < 4; ++e)
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v[e].x), "=r"(v[e].y), "=r"(v[e].z), "=r"(v[e].w)
                     : "r"(fmhai_vt8_ld(srow, srows, col, t, e)));
}
FMHAI_DEVICE void fmhai_vt8_word(uint32_t *o, const uint4 *v, int m, uint32_t sel_a, uint32_t sel_b)
{
    const uint32_t w0 = (&v[0].x)[m], w1 = (&v[1].x)[m], w2 = (&v[2].x)[m], w3 = (&v[3].x)[m];
    const uint32_t lo01 = fmhai_prmt(w0, w1, 0x5140), hi01 = fmhai_prmt(w0, w1, 0x7362);
    const uint32_t lo23 = fmhai_prmt(w2, w3, 0x5140), hi23 = fmhai_prmt(w2, w3, 0x7362);
    /* sel_a / sel_b: 0x5410 / 0x7632 (bytes 0 and 1 of each pair), swapped
     * for the 64-byte panel's odd half-warp (o[b ^ 1] in place of o[b]) */
    o[0] = fmhai_prmt(lo01, lo23, sel_a);
    o[1] = fmhai_prmt(lo01, lo23, sel_b);
    o[2] = fmhai_prmt(hi01, hi23, sel_a);
    o[3] = fmhai_prmt(hi01, hi23, sel_b);
}

/* keys [0, keys) of the staging tile (srows rows) into the 128-byte panel */
FMHAI_DEVICE void fmhai_vt8_panel128(fmhai_smem_t dst, fmhai_smem_t stage, int srows, int hd, int keys, int tid)
{
    int c, t, col0, cols;
    fmhai_vt8_lane128(tid, keys, hd, &c, &t, &col0, &cols);
    const fmhai_smem_t srow = fmhai_vt8_srow(stage, c, t);
#pragma unroll
    for (int ci = 0; ci < cols; ++ci) {
        /* lanes of odd chunks c take their columns in the other order: the
         * 8 lanes of a load phase (c = 2k, 2k + 1, t = 0..3) then read 8
         * different 16-byte bank groups (swizzle chunk col ^ (key % 8), key %
         * 8 = 2t + offset); in one order it was 8 wavefronts a load, not 4 */
        const int col = col0 + (ci + c) % cols;
        /* Addresses as a base and immediates (fmhai_vt8_ld, _st128): formed
         * per access they were half the load warpgroup's instructions (ncu) */
        uint4 v[4];
        fmhai_vt8_load4(v, srow, srows, col, t);
        const fmhai_smem_t s0 = fmhai_vt8_s0_128(dst, col, c, t);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            uint32_t o[4];
            fmhai_vt8_word(o, v, m, 0x5410u, 0x7632u);
#pragma unroll
            for (int b = 0; b < 4; ++b)
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(fmhai_vt8_st128(s0, m, b)), "r"(o[b]));
        }
    }
}

/* keys 128..191 of the staging tile (stage: its row 128) into the 64-byte
 * panel at dst1 */
FMHAI_DEVICE void fmhai_vt8_panel64(fmhai_smem_t dst1, fmhai_smem_t stage, int srows, int hd, int tid)
{
    int c, t, h, col0, cols;
    fmhai_vt8_lane64(tid, hd, &c, &t, &h, &col0, &cols);
    const uint32_t sel_a = h ? 0x7632u : 0x5410u, sel_b = h ? 0x5410u : 0x7632u;
    const fmhai_smem_t srow = fmhai_vt8_srow(stage, c, t);
#pragma unroll
    for (int ci = 0; ci < cols; ++ci) {
        const int col = col0 + 8 * ci;
        uint4 v[4];
        fmhai_vt8_load4(v, srow, srows, col, t);
        const fmhai_smem_t s1 = fmhai_vt8_s1_64(dst1, col, c, t);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            uint32_t o[4];
            fmhai_vt8_word(o, v, m, sel_a, sel_b);
#pragma unroll
            for (int b = 0; b < 4; ++b)
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(fmhai_vt8_st64(s1, h, m, b)), "r"(o[b]));
        }
    }
}

/* The staged [bn][hd] e4m3 V rows of a key tile as V^T at dst (bn 64, 128
 * or 192; a stage of vr d rows: tile/vt8_layout.h), by the load
 * warpgroup's 128 threads. */
FMHAI_DEVICE void fmhai_wg_vt8_transpose(fmhai_smem_t dst, fmhai_smem_t stage, int hd, int vr, int bn, int tid)
{
    asm volatile("" : "+r"(dst), "+r"(stage), "+r"(tid));
    fmhai_vt8_panel128(dst, stage, bn, hd, bn > 128 ? 128 : bn, tid);
    if (bn > 128) fmhai_vt8_panel64(dst + vr * 128, stage + 128 * 128, bn, hd, tid);
}

/* ---- e4m3 K/V widened to f16 in place (bf16 queries on e4m3 pages) ------
 * The Hopper forward's 16-bit stages take an e4m3 key tile (hd 128 or 256)
 * in their upper half: e4m3 128-byte panel k lands where the f16 tile's
 * panel hd / 128 + k goes (`src` bytes in: the loaders' swizzled layout of
 * hd-byte rows, so a row's e4m3 bytes sit only in that row's own f16 rows).
 * A lane takes one 16-byte chunk of a row (16 codes: f16 chunks 2c and 2c +
 * 1 of the row, exact), a warp instruction whole rows, K's tile then V's
 * (dk, dv), four chunks a lane at a time: the four loads, then (every load
 * of those rows done: __syncwarp, so no row clobbers another's codes) the
 * conversions and stores. One chunk at a time, each waited for its load and
 * the load warpgroup took about 1 us a tile (bench/RESULTS.md, session 28).
 * A store instruction covers each 16-byte bank group 4 times (512 bytes:
 * conflict-free). */
FMHAI_DEVICE void fmhai_wg_widen_e4m3(fmhai_smem_t dk, fmhai_smem_t dv, int src, int hd, int rows, int tid)
{
    const int cpr = hd / 16, rpi = 32 / cpr, step = 4 * rpi;   /* chunks a row, rows a warp instruction */
    const int n = rows / step;                                  /* a lane's chunks a tile */
    asm volatile("" : "+r"(dk), "+r"(dv), "+r"(tid));
    /* the lane's rows r0 + k * step share r0's swizzle (step: a multiple of 8) */
    const int c = tid % cpr, r0 = (tid / 32) * rpi + (tid % 32) / cpr;
    const uint32_t so = (uint32_t)(src + fmhai_wg_tile_off(r0, c, rows));
    const uint32_t d0 = (uint32_t)fmhai_wg_tile_off(r0, 2 * c, rows), d1 = (uint32_t)fmhai_wg_tile_off(r0, 2 * c + 1, rows);
#pragma unroll 1
    for (int t = 0; t < 2; ++t) {
        const fmhai_smem_t d = t ? dv : dk;
#pragma unroll 1
        for (int b = 0; b < n; b += 4) {
            uint32_t x[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i) fmhai_lds_load16(x[i], d + so + (uint32_t)((b + i) * step * 128));
            __syncwarp();
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint32_t ro = (uint32_t)((b + i) * step * 128);
                uint32_t y[8];
#pragma unroll
                for (int e = 0; e < 4; ++e) fmhai_e4m3x4_to_f16(x[i][e], y + 2 * e);
                fmhai_lds_store16(d + d0 + ro, y);
                fmhai_lds_store16(d + d1 + ro, y + 4);
            }
            __syncwarp();
        }
    }
}

/* The portable decode's: tile n, the groups' pages by fmhai_vec_at (the
 * slot was last read by ldmatrix, behind the barrier before this issue) */
FMHAI_DEVICE void fmhai_block_load_vt_bulk(fmhai_smem_t dst, const fmhai_kv_src *s, int n, int d, int bn, int tid,
                                           int paging, int page_log2, int off64, fmhai_smem_t bar)
{
    const char *src = s->base;
    if (tid < bn / 8) src = fmhai_vec_at(s, paging, tid * 8, n * bn, page_log2, off64, 1);
    fmhai_vt_bulk(dst, src, d, bn / 8, tid, 1, bar);
}
#endif /* FMHA_PLATFORM_NVIDIA */

/* V tile n of the portable pipeline into its slot: with vbk (the decode's
 * VECTORIZED V^T on sm_90, mbarrier bar a slot) a whole tile by bulk copies
 * and a partial one by cp.async with thread 0's plain arrival completing
 * the barrier's phase; else as fmhai_issue_kv. */
FMHAI_DEVICE void fmhai_issue_v(fmhai_smem_t dst16, fmhai_smem_t dst8, const fmhai_kv_src *s, int n, int s_k, int d,
                                int hd, int bn, int nthreads, int tid, int paging, int page_log2, int off64, int vec,
                                int kv8, int vbk, fmhai_smem_t bar)
{
#if defined(FMHA_PLATFORM_NVIDIA)
    if (vbk && (n + 1) * bn <= s_k) {
        fmhai_block_load_vt_bulk(dst16, s, n, d, bn, tid, paging, page_log2, off64, bar);
        return;
    }
    fmhai_issue_kv(dst16, dst8, s, 1, n, s_k, d, hd, bn, nthreads, tid, paging, page_log2, off64, vec, kv8);
    if (vbk && tid == 0) fmhai_mbar_arrive(bar);
#else
    (void)vbk; (void)bar;
    fmhai_issue_kv(dst16, dst8, s, 1, n, s_k, d, hd, bn, nthreads, tid, paging, page_log2, off64, vec, kv8);
#endif
}

#endif /* FMHA_TILE_PIPELINE_KV_SOURCE_H */
