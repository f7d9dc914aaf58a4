/*
 * fwd_trace: where the Hopper forward's time goes, key tile by key tile.
 *
 * bench_fwd built with the pipeline's timeline hooks (FMHAI_FWD90_MARK in
 * pipeline/fwd_sm90.h): lane 0 of every warp of one block (the middle of
 * the grid) stores the SM clock at each phase of each key tile; after the
 * benchmark (its last launch) the tool prints, per warp, the mean cycles of
 * each phase over the steady tiles, and the raw clocks of a few tiles.
 * A warp may read the clock before a named barrier it passed has
 * completed (BAR.SYNC.DEFER_BLOCKING blocks at the next instruction that
 * needs it), so a barrier's wait can land in the next phase's column (the
 * FULL wait under "TURN wait", the TURN wait under "issue").
 * Same arguments as bench_fwd; run one kernel, e.g.
 *
 *   fwd_trace --prec fp8 --hdim 128 --seqlen 8k --causal 0
 *
 * FWD_TRACE_DUMP=file also writes every warp's raw clocks, one line a
 * (warp, tile): warp, tile, events 0..7 (0 where not reached).
 *
 *   make build/bench/fwd_trace   (sm_90a only; not part of make test)
 */
#define FWD_TRACE_WARPS 16
#define FWD_TRACE_TILES 128
__device__ unsigned int fwd_trace_buf[FWD_TRACE_WARPS * FWD_TRACE_TILES * 8];
__device__ int fwd_trace_ntiles[FWD_TRACE_WARPS];
#define FMHAI_FWD90_MARK(ev, it)                                                                   \
    do {                                                                                          \
        if (blockIdx.x == gridDim.x / 2 && lane == 0 && (it) < FWD_TRACE_TILES) {                 \
            unsigned int c_;                                                                      \
            asm volatile("mov.u32 %0, %%clock;" : "=r"(c_)::"memory");                           \
            fwd_trace_buf[(warp * FWD_TRACE_TILES + (it)) * 8 + (ev)] = c_;                       \
            atomicMax(&fwd_trace_ntiles[warp], (it) + 1);                                         \
        }                                                                                         \
    } while (0)

#define main bench_fwd_main
#include "bench_fwd.cu"
#undef main

static const char *const trace_mma_phase[7] = { "FULL wait", "TURN wait", "issue", "S wait", "softmax",
                                                "P V wait", "pack" };

int main(int argc, char **argv)
{
    static unsigned int h[FWD_TRACE_WARPS * FWD_TRACE_TILES * 8];
    int n[FWD_TRACE_WARPS];
    const int rc = bench_fwd_main(argc, argv);
    if (rc != 0) return rc;
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpyFromSymbol(h, fwd_trace_buf, sizeof(h)) != cudaSuccess ||
        cudaMemcpyFromSymbol(n, fwd_trace_ntiles, sizeof(n)) != cudaSuccess) {
        fprintf(stderr, "fwd_trace: reading the trace failed\n");
        return 1;
    }
    /* FWD_TRACE_DUMP=file: every warp's raw clocks, a line a (warp, tile):
     * warp tile ev0 .. ev7 (0: not reached), for a timeline of one's own */
    const char *dump = getenv("FWD_TRACE_DUMP");
    if (dump) {
        FILE *f = fopen(dump, "w");
        if (!f) {
            fprintf(stderr, "fwd_trace: cannot write %s\n", dump);
            return 1;
        }
        for (int w = 0; w < FWD_TRACE_WARPS; ++w)
            for (int it = 0; it < n[w] && it < FWD_TRACE_TILES; ++it) {
                fprintf(f, "%d %d", w, it);
                for (int e = 0; e < 8; ++e) fprintf(f, " %u", h[(w * FWD_TRACE_TILES + it) * 8 + e]);
                fprintf(f, "\n");
            }
        fclose(f);
    }
    /* MMA warps: tiles 2 .. n - 3 (past the pipeline fill, before the drain) */
    printf("\nfwd_trace: mean SM cycles per key tile, one block (tiles past the first 2 and before the last 2)\n");
    printf("warp  tiles  period");
    for (int e = 0; e < 7; ++e) printf("  %9s", trace_mma_phase[e]);
    printf("\n");
    for (int w = 0; w < FWD_TRACE_WARPS; ++w) {
        const int nt = n[w] < FWD_TRACE_TILES ? n[w] : FWD_TRACE_TILES;
        if (nt < 6) continue;
        if (h[(w * FWD_TRACE_TILES + 2) * 8 + 7] == 0u) {   /* a load warp: its tile period only, on the
                                                              * first event it records a tile (FP8 with
                                                              * TMA: no event 0 past tile 0) */
            int e0 = 0;
            while (e0 < 7 && h[(w * FWD_TRACE_TILES + 2) * 8 + e0] == 0u) ++e0;
            double per = 0;
            for (int it = 2; it + 3 < nt; ++it) per += (double)(h[(w * FWD_TRACE_TILES + it + 1) * 8 + e0] -
                                                                h[(w * FWD_TRACE_TILES + it) * 8 + e0]);
            printf("%4d  %5d  %6.0f  (load warp)\n", w, nt, per / (nt - 5));
            continue;
        }
        double per = 0, ph[7] = { 0 };
        int cnt = 0;
        for (int it = 2; it + 3 < nt; ++it, ++cnt) {
            const unsigned int *a = h + (w * FWD_TRACE_TILES + it) * 8, *b = a + 8;
            per += (double)(b[0] - a[0]);
            for (int e = 0; e < 7; ++e) ph[e] += (double)(a[e + 1] - a[e]);
        }
        printf("%4d  %5d  %6.0f", w, nt, per / cnt);
        for (int e = 0; e < 7; ++e) printf("  %9.0f", ph[e] / cnt);
        printf("\n");
    }
    return 0;
}
