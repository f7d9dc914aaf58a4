/*
 * Host unit tests of split-KV decode's conventions, in plain C: the split
 * ranges, the split-count heuristic, the workspace size and argument checks
 * (include/fmha_tile/dispatch/splitkv.h), and the CPU reference pieces the
 * GPU decode tests build on (tests/ref/fmha_ref_decode.h).
 *
 * Covers: ranges that tile [0, n_tiles) in order for every split count up
 * to the maximum, empty splits only at the end; the LSE combine of the
 * splits of a row equal to the whole row (1e-12) for splits 1..64 (more
 * splits than key tiles too), seqlen_q 1..8, GQA 1/4/8/16, masks, windows,
 * soft cap, ALiBi, seqlen_k up to 64k; rows no key reaches and splits with
 * no visible key (zeros and -inf, no NaN); the heuristic's choices; the
 * workspace and bad arguments; the rotary reference (identity at angle 0,
 * pair norms kept, half-split = interleaved under a permutation, the tail
 * past rotary_dim untouched). Last line: "N passed, M failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fmha_tile.h"
#include "host_check.h"
#include "../ref/fmha_ref_decode.h"


/* ---- split ranges --------------------------------------------------------- */
static void test_ranges(void)
{
    int n, sp, bad = 0;
    for (n = 0; n <= 300 && !bad; ++n)
        for (sp = 1; sp <= FMHA_SPLITKV_MAX_SPLITS && !bad; ++sp) {
            int s, next = 0, seen_empty = 0, per = (n + sp - 1) / sp;
            for (s = 0; s < sp; ++s) {
                int t0, t1, c = fmhai_splitkv_range(n, sp, s, &t0, &t1);
                if (c != t1 - t0 || c < 0 || c > per) bad = 1;
                if (c > 0 && (t0 != next || seen_empty)) bad = 1;   /* in order, empties last */
                if (c == 0) seen_empty = 1;
                else next = t1;
            }
            if (next != n) bad = 1;
            if (bad) printf("# ranges broken at n_tiles %d, splits %d\n", n, sp);
        }
    CHECK(!bad, "ranges_cover_in_order");
}

/* ---- combine of the splits == the whole row --------------------------------- */
typedef struct prob {
    int b, hq, hk, sq, sk, d, tile, splits, mask, wl, wr, softcap, alibi;
} prob;

/* max |O diff| and |LSE diff| over every row; counts rows with no key */
static int run_combine(const prob *pr, uint64_t seed, double *err_o, double *err_lse, int *empty_rows)
{
    fmha_ref_fwd p;
    fmha_ref_rng r = fmha_ref_rng_make(seed);
    const int nq = pr->b * pr->sq * pr->hq * pr->d, nk = pr->b * pr->sk * pr->hk * pr->d;
    float *q = (float *)malloc(sizeof(float) * nq), *k = (float *)malloc(sizeof(float) * nk),
          *v = (float *)malloc(sizeof(float) * nk), slopes[64];
    double *scores = (double *)malloc(sizeof(double) * (pr->sk + 1));
    double *po = (double *)malloc(sizeof(double) * pr->splits * pr->d), *plse = (double *)malloc(sizeof(double) * pr->splits);
    double full_o[256], comb_o[256], full_lse, comb_lse;
    const int n_tiles = (pr->sk + pr->tile - 1) / pr->tile;
    int i, bb, h, s, c, nan = 0;
    if (!q || !k || !v || !scores || !po || !plse) return -1;
    for (i = 0; i < nq; ++i) q[i] = fmha_ref_rng_input(&r, 1.f);
    for (i = 0; i < nk; ++i) k[i] = fmha_ref_rng_input(&r, 1.f);
    for (i = 0; i < nk; ++i) v[i] = fmha_ref_rng_input(&r, 1.f);
    for (i = 0; i < pr->hq; ++i) slopes[i] = fmha_ref_rng_uniform(&r, 0.01f, 0.5f);
    memset(&p, 0, sizeof(p));
    p.batch = pr->b; p.nhead_q = pr->hq; p.nhead_k = pr->hk;
    p.seqlen_q = pr->sq; p.seqlen_k = pr->sk; p.hdim_q = p.hdim_v = pr->d;
    p.q = q; p.k = k; p.v = v;
    /* bshd */
    p.stride_q = (int64_t)pr->hq * pr->d; p.nhead_stride_q = pr->d; p.batch_stride_q = (int64_t)pr->sq * p.stride_q;
    p.stride_k = p.stride_v = (int64_t)pr->hk * pr->d; p.nhead_stride_k = p.nhead_stride_v = pr->d;
    p.batch_stride_k = p.batch_stride_v = (int64_t)pr->sk * p.stride_k;
    p.scale = 1.f / sqrtf((float)pr->d);
    p.logits_soft_cap = pr->softcap ? 4.f : 0.f;
    p.alibi_slopes = pr->alibi ? slopes : 0;
    p.mask_type = pr->mask; p.window_left = pr->wl; p.window_right = pr->wr;
    *err_o = *err_lse = 0.0;
    *empty_rows = 0;
    for (bb = 0; bb < pr->b; ++bb)
        for (h = 0; h < pr->hq; ++h)
            for (i = 0; i < pr->sq; ++i) {
                fmha_ref_fwd_row(&p, bb, h, i, scores, full_o, &full_lse);
                for (s = 0; s < pr->splits; ++s) {
                    int t0, t1;
                    fmhai_splitkv_range(n_tiles, pr->splits, s, &t0, &t1);
                    fmha_ref_fwd_row_keys(&p, bb, h, i, t0 * pr->tile, t1 * pr->tile, scores, po + s * pr->d,
                                          plse + s);
                }
                fmha_ref_lse_combine(pr->splits, plse, po, pr->d, pr->d, comb_o, &comb_lse);
                for (c = 0; c < pr->d; ++c) {
                    if (comb_o[c] != comb_o[c]) nan = 1;
                    if (fabs(comb_o[c] - full_o[c]) > *err_o) *err_o = fabs(comb_o[c] - full_o[c]);
                }
                if (full_lse == -INFINITY) {
                    ++*empty_rows;
                    if (comb_lse != -INFINITY) *err_lse = INFINITY;
                    for (c = 0; c < pr->d; ++c)
                        if (comb_o[c] != 0.0) *err_o = INFINITY;
                } else if (fabs(comb_lse - full_lse) > *err_lse) {
                    *err_lse = fabs(comb_lse - full_lse);
                }
                if (comb_lse != comb_lse) nan = 1;
            }
    free(q); free(k); free(v); free(scores); free(po); free(plse);
    return nan;
}

static void test_combine(void)
{
    static const prob cases[] = {
        /* b  hq  hk  sq  sk     d    tile splits mask wl  wr  cap alibi  (causal: wr 0) */
        {  2,  4,  4,  1,  300,   64,  64,  1,   0, -1, -1,  0, 0 },
        {  2,  4,  4,  1,  300,   64,  64,  3,   0, -1, -1,  0, 0 },
        {  2,  8,  2,  1,  1000, 128, 128,  8,   0, -1, -1,  0, 0 },
        {  1, 16,  1,  4,  777,   64,  64, 13,   2, -1,  0,  0, 0 },   /* GQA 16, causal */
        {  1,  8,  1,  8,  513,  128, 128, 64,   2, -1,  0,  0, 0 },   /* more splits than tiles */
        {  3,  8,  8,  2,  1,     64,  64,  5,   0, -1, -1,  0, 0 },   /* one key */
        {  1, 32,  8,  3,  2048, 128, 128, 16,   2, 300, 0,  0, 0 },   /* sliding window: most splits see nothing */
        {  1,  4,  1,  1,  4096,  64,  64, 32,   2, 256, 0,  1, 0 },   /* window + soft cap */
        {  2,  4,  4,  5,  1500,  64, 128,  7,   1, -1,  0,  0, 1 },   /* top-left causal + ALiBi */
        {  1,  8,  2,  1,  65536, 64, 128, 64,   0, -1, -1,  0, 0 },   /* 64k keys */
        {  1,  4,  4,  8,  5,     64,  64,  4,   2, -1,  0,  0, 0 },   /* bottom-right, s_q > s_k: keyless rows */
    };
    int n;
    for (n = 0; n < (int)(sizeof(cases) / sizeof(cases[0])); ++n) {
        const prob *c = &cases[n];
        double eo, el;
        int empty, nan = run_combine(c, 1234 + n, &eo, &el, &empty);
        char name[160];
        snprintf(name, sizeof(name), "combine_b%d_h%d:%d_q%d_k%d_d%d_tile%d_splits%d_mask%d_w%d,%d%s%s (O %.1e, LSE %.1e, %d empty rows)",
                 c->b, c->hq, c->hk, c->sq, c->sk, c->d, c->tile, c->splits, c->mask, c->wl, c->wr,
                 c->softcap ? "_softcap" : "", c->alibi ? "_alibi" : "", eo, el, empty);
        CHECK(nan == 0 && eo <= 1e-12 && el <= 1e-12, name);
    }
    {   /* the last case must reach rows that see no key at all */
        double eo, el;
        int empty;
        run_combine(&cases[10], 99, &eo, &el, &empty);
        CHECK(empty > 0, "combine_case_has_keyless_rows");
    }
}

/* the combine's own edge cases */
static void test_combine_edges(void)
{
    double lse[3] = { -INFINITY, -INFINITY, -INFINITY }, o[3 * 2] = { 5, 5, 7, 7, 9, 9 }, out[2], ol;
    fmha_ref_lse_combine(3, lse, o, 2, 2, out, &ol);
    CHECK(ol == -INFINITY && out[0] == 0.0 && out[1] == 0.0, "combine_all_empty_zero_and_neg_inf");
    lse[1] = 0.5;
    fmha_ref_lse_combine(3, lse, o, 2, 2, out, &ol);
    CHECK(ol == 0.5 && out[0] == 7.0 && out[1] == 7.0, "combine_one_split_with_keys_is_that_split");
}

/* ---- heuristic ---------------------------------------------------------------- */
static void test_heuristic(void)
{
    int s, sp, ok = 1;
    /* blocks already filling 80% of the SMs, or too few tiles: no split */
    CHECK(fmhai_splitkv_heuristic(132, 106, 512, 128) == 1, "heuristic_full_gpu_one_split");
    CHECK(fmhai_splitkv_heuristic(132, 8, 1, 128) == 1, "heuristic_one_tile_one_split");
    CHECK(fmhai_splitkv_heuristic(132, 8, 3, 128) == 1, "heuristic_three_tiles_one_split");
    CHECK(fmhai_splitkv_heuristic(0, 8, 512, 128) == 1 && fmhai_splitkv_heuristic(132, 0, 512, 128) == 1,
          "heuristic_degenerate_one_split");
    /* batch 1 x 8 KV heads, 32k keys of 128-key tiles: 16 splits, 128
     * blocks, the fullest single wave (97%; the efficiency rule alone took
     * 14, 85%) */
    s = fmhai_splitkv_heuristic(132, 8, 256, 128);
    CHECK(s == 16, "heuristic_b1_h8_32k_16_splits");
    /* e4m3 decode on 528 slots (132 SMs x 4), 32-key tiles: batch 8 x 8
     * heads, 8k keys: 8 splits (512 blocks, 97%), not 7 (85%); batch 1, 32k
     * keys: 64 (65 would leave a split empty) */
    CHECK(fmhai_splitkv_heuristic(528, 64, 256, 128) == 8, "heuristic_b8_fp8_8_splits");
    CHECK(fmhai_splitkv_heuristic(528, 8, 1024, 128) == 64, "heuristic_b1_fp8_32k_64_splits");
    /* 16-bit decode on 264 slots (two a SM), batch 8 x 8 heads: 4 splits,
     * one wave (97%), not 37 (nine waves, 99.7%: slower) */
    CHECK(fmhai_splitkv_heuristic(264, 64, 256, 128) == 4, "heuristic_b8_bf16_one_wave");
    /* a single wave under 90% full keeps the efficiency rule: 48 blocks on
     * 132 slots, 2 splits fill 73% of one wave; 5 splits run 1.8 waves at
     * 91%, the fewest within 85% of the best (8: 97%) */
    CHECK(fmhai_splitkv_heuristic(132, 48, 256, 128) == 5, "heuristic_partial_wave_efficiency_rule");
    /* batch 8 x 8: 2 splits (128 blocks) */
    CHECK(fmhai_splitkv_heuristic(132, 64, 64, 128) == 2, "heuristic_b8_h8_2_splits");
    /* short KV caps the splits at half the tiles */
    CHECK(fmhai_splitkv_heuristic(132, 1, 8, 128) == 4, "heuristic_short_kv_capped");
    CHECK(fmhai_splitkv_heuristic(132, 1, 4096, 16) <= 16, "heuristic_respects_max_splits");
    /* any answer: 1..max, at least two tiles a split when split, no empty split */
    for (sp = 1; sp <= 300 && ok; sp += 7)
        for (s = 1; s <= 200 && ok; s += 3) {
            const int got = fmhai_splitkv_heuristic(132, s, sp, 128);
            int t0, t1, e;
            if (got < 1 || got > FMHA_SPLITKV_MAX_SPLITS || (got > 1 && 2 * got > sp)) ok = 0;
            for (e = 0; e < got && ok; ++e)
                if (fmhai_splitkv_range(sp, got, e, &t0, &t1) == 0) ok = 0;
            if (!ok) printf("# heuristic(132, %d, %d) = %d\n", s, sp, got);
        }
    CHECK(ok, "heuristic_answers_in_bounds_no_empty_split");
    /* waves of the real slots: batch 64 x 8 KV heads on 132 SMs x 3 blocks
     * (VECTORIZED decode, 128 tiles): one split runs 1.29 waves, two 2.59
     * (86% full), three 3.88 (97%): 3; on 4 blocks a SM (528 slots) 512 blocks
     * are one wave: unchanged; a grid within one wave (batch 1's 29 splits
     * x 8 heads) is left alone */
    CHECK(fmhai_splitkv_fill_waves(396, 512, 128, 1, 128) == 3, "fill_waves_b64_vec_3_splits");
    CHECK(fmhai_splitkv_fill_waves(528, 512, 128, 1, 128) == 1, "fill_waves_one_wave_unchanged");
    CHECK(fmhai_splitkv_fill_waves(528, 8, 256, 29, 128) == 29, "fill_waves_partial_wave_unchanged");
    CHECK(fmhai_splitkv_fill_waves(396, 792, 128, 1, 128) == 1, "fill_waves_whole_waves_unchanged");
    CHECK(fmhai_splitkv_fill_waves(396, 512, 4, 1, 128) == 1, "fill_waves_too_few_tiles");
    ok = 1;
    for (sp = 1; sp <= 300 && ok; sp += 7)
        for (s = 1; s <= 2000 && ok; s += 37) {
            const int got = fmhai_splitkv_fill_waves(396, s, sp, 1, 128);
            int t0, t1, e;
            if (got < 1 || got > FMHA_SPLITKV_MAX_SPLITS || (got > 1 && 2 * got > sp)) ok = 0;
            for (e = 0; e < got && ok; ++e)
                if (fmhai_splitkv_range(sp, got, e, &t0, &t1) == 0) ok = 0;
            if (!ok) printf("# fill_waves(396, %d, %d, 1) = %d\n", s, sp, got);
        }
    CHECK(ok, "fill_waves_answers_in_bounds_no_empty_split");
}

/* ---- workspace and arguments ------------------------------------------------- */
static void test_workspace(void)
{
    static char buf[1 << 16] __attribute__((aligned(16)));
    const size_t need = fmhai_splitkv_workspace_bytes(3 * 32, 128, 4);
    CHECK(need == 4 * 96 * 4 + 4 * 96 * 128 * 4, "workspace_bytes_formula");
    CHECK(fmhai_splitkv_workspace_bytes(5, 64, 3) == 64 + 3 * 5 * 64 * 4, "workspace_lse_segment_16_aligned");
    CHECK(fmhai_splitkv_workspace_bytes(96, 128, 1) == 0, "workspace_none_for_one_split");
    CHECK(fmhai_splitkv_check(4, buf, need, 96, 128) == FMHA_OK, "check_ok");
    CHECK(fmhai_splitkv_check(1, 0, 0, 96, 128) == FMHA_OK, "check_one_split_no_workspace");
    CHECK(fmhai_splitkv_check(0, buf, need, 96, 128) == FMHA_ERR_INVALID_ARG, "check_zero_splits");
    CHECK(fmhai_splitkv_check(FMHA_SPLITKV_MAX_SPLITS + 1, buf, sizeof(buf), 1, 8) == FMHA_ERR_INVALID_ARG,
          "check_too_many_splits");
    CHECK(fmhai_splitkv_check(4, 0, need, 96, 128) == FMHA_ERR_INVALID_ARG, "check_null_workspace");
    CHECK(fmhai_splitkv_check(4, buf + 4, need, 96, 128) == FMHA_ERR_INVALID_ARG, "check_misaligned_workspace");
    CHECK(fmhai_splitkv_check(4, buf, need - 1, 96, 128) == FMHA_ERR_INVALID_ARG &&
              strstr(fmha_last_error(), "need") != NULL,
          "check_workspace_too_small_says_size");
}

/* ---- rotary reference ------------------------------------------------------------ */
static void test_rotary(void)
{
    fmha_ref_rng r = fmha_ref_rng_make(7);
    float x[64], y[64], z[64], cs[32], sn[32], one[32], zero[32];
    int i, ok = 1;
    const int rd = 48, half = rd / 2;
    for (i = 0; i < 64; ++i) x[i] = fmha_ref_rng_input(&r, 1.f);
    for (i = 0; i < 32; ++i) {
        const double a = fmha_ref_rng_uniform(&r, -3.f, 3.f);
        cs[i] = (float)cos(a); sn[i] = (float)sin(a); one[i] = 1.f; zero[i] = 0.f;
    }
    memcpy(y, x, sizeof(x));
    fmha_ref_rotary(y, rd, one, zero, 1);
    CHECK(memcmp(x, y, sizeof(x)) == 0, "rotary_angle_zero_identity");
    /* pair norms kept, tail untouched */
    memcpy(y, x, sizeof(x));
    fmha_ref_rotary(y, rd, cs, sn, 1);
    for (i = 0; i < half; ++i) {
        const double n0 = (double)x[2 * i] * x[2 * i] + (double)x[2 * i + 1] * x[2 * i + 1];
        const double n1 = (double)y[2 * i] * y[2 * i] + (double)y[2 * i + 1] * y[2 * i + 1];
        if (fabs(n0 - n1) > 1e-5 * (n0 + 1e-6)) ok = 0;
    }
    for (i = rd; i < 64; ++i)
        if (y[i] != x[i]) ok = 0;
    CHECK(ok, "rotary_interleaved_keeps_pair_norms_and_tail");
    /* half-split of a permuted row = the interleaved rotation, permuted */
    for (i = 0; i < half; ++i) { z[i] = x[2 * i]; z[i + half] = x[2 * i + 1]; }
    for (i = rd; i < 64; ++i) z[i] = x[i];
    fmha_ref_rotary(z, rd, cs, sn, 0);
    ok = 1;
    for (i = 0; i < half; ++i)
        if (z[i] != y[2 * i] || z[i + half] != y[2 * i + 1]) ok = 0;
    CHECK(ok, "rotary_half_split_is_permuted_interleaved");
    /* one pair by hand: (1, 0) by 90 degrees -> (0, 1) */
    x[0] = 1.f; x[1] = 0.f; cs[0] = 0.f; sn[0] = 1.f;
    fmha_ref_rotary(x, 2, cs, sn, 1);
    CHECK(x[0] == 0.f && x[1] == 1.f, "rotary_quarter_turn");
}

int main(void)
{
    test_ranges();
    test_combine();
    test_combine_edges();
    test_heuristic();
    test_workspace();
    test_rotary();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
