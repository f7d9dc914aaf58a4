/*
 * bwd_trace: where the Hopper backward's time goes, step by step.
 *
 * bench_bwd built with the dq_dk_dv pipeline's timeline hooks
 * (FMHAI_BWD90_MARK in pipeline/bwd_sm90.h): lane 0 of every warp of one
 * block (x the middle of the grid, y = z = 0) stores the SM clock at each
 * event of each step (a step: one BM-query tile against the block's key
 * tile); after the benchmark (its last dq_dk_dv launch) the tool prints,
 * per warp, the mean cycles between consecutive events over the steady
 * steps. As in fwd_trace, a warp may read the clock before a named barrier
 * it passed has completed (BAR.SYNC.DEFER_BLOCKING), so a barrier's wait
 * can land in the next column. Same arguments as bench_bwd; run one
 * kernel, e.g.
 *
 *   bwd_trace --hdim 128 --seqlen 8192 --causal 0 --det 0
 *
 *   make build/bench/bwd_trace   (sm_90a only; not part of make test)
 */
#define BWD_TRACE_WARPS 12
#define BWD_TRACE_STEPS 256
#define BWD_TRACE_EV 12
__device__ unsigned int bwd_trace_buf[BWD_TRACE_WARPS * BWD_TRACE_STEPS * 16];
__device__ int bwd_trace_nsteps[BWD_TRACE_WARPS];
#define FMHAI_BWD90_MARK(ev, k)                                                                    \
    do {                                                                                          \
        if (blockIdx.x == gridDim.x / 2 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x % 32 == 0 && \
            (k) < BWD_TRACE_STEPS) {                                                              \
            unsigned int c_;                                                                      \
            const int w_ = (int)threadIdx.x / 32;                                                 \
            asm volatile("mov.u32 %0, %%clock;" : "=r"(c_)::"memory");                           \
            bwd_trace_buf[(w_ * BWD_TRACE_STEPS + (k)) * 16 + (ev)] = c_;                         \
            if ((ev) == 0) atomicMax(&bwd_trace_nsteps[w_], (k) + 1);                             \
        }                                                                                         \
    } while (0)

#define main bench_bwd_main
#include "bench_bwd.cu"
#undef main

static const char *const trace_mma_phase[BWD_TRACE_EV] = {
    "landed", "step bar", "S,dP iss", "S wait", "P^T,dV", "dP,dV wt", "dS^T,dK", "dS bar", "dQ", "dQ buf", "dQ out",
    "to next" };
/* rows whose third warpgroup computes dQ (FMHAI_BWD90_DQW: hdim 64) mark
 * events 0..9 only, and wait for the previous step's dK with its tiles */
static const char *const trace_mma_phase_dqw[10] = {
    "landed,dK", "step bar", "S,dP iss", "S wait", "P^T,dV", "dP,dV wt", "dS^T", "dK iss", "-", "to next" };

int main(int argc, char **argv)
{
    static unsigned int h[BWD_TRACE_WARPS * BWD_TRACE_STEPS * 16];
    int n[BWD_TRACE_WARPS];
    const int rc = bench_bwd_main(argc, argv);
    if (rc != 0) return rc;
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpyFromSymbol(h, bwd_trace_buf, sizeof(h)) != cudaSuccess ||
        cudaMemcpyFromSymbol(n, bwd_trace_nsteps, sizeof(n)) != cudaSuccess) {
        fprintf(stderr, "bwd_trace: reading the trace failed\n");
        return 1;
    }
    /* steps 2 .. n - 3 (past the fill, before the drain); a column is the
     * time from the event before it to its own (the last: to the next step) */
    printf("\nbwd_trace: mean SM cycles per step, one block (steps past the first 2 and before the last 2)\n");
    const int mma_evs = h[(0 * BWD_TRACE_STEPS + 2) * 16 + 10] != 0u ? BWD_TRACE_EV : 10;
    printf("warp  steps  period");
    for (int e = 0; e < mma_evs; ++e) printf("  %8s", mma_evs == 10 ? trace_mma_phase_dqw[e] : trace_mma_phase[e]);
    printf("\n");
    for (int w = 0; w < BWD_TRACE_WARPS; ++w) {
        const int nt = n[w] < BWD_TRACE_STEPS ? n[w] : BWD_TRACE_STEPS;
        if (nt < 6) continue;
        const int evs = h[(w * BWD_TRACE_STEPS + 2) * 16 + 3] != 0u ? mma_evs : 3;   /* third warpgroup: 3 */
        double per = 0, ph[BWD_TRACE_EV] = { 0 };
        int cnt = 0;
        for (int it = 2; it + 3 < nt; ++it, ++cnt) {
            const unsigned int *a = h + (w * BWD_TRACE_STEPS + it) * 16, *b = a + 16;
            per += (double)(b[0] - a[0]);
            for (int e = 0; e + 1 < evs; ++e) ph[e] += (double)(a[e + 1] - a[e]);
            ph[evs - 1] += (double)(b[0] - a[evs - 1]);
        }
        printf("%4d  %5d  %6.0f", w, nt, per / cnt);
        for (int e = 0; e < evs; ++e) printf("  %8.0f", ph[e] / cnt);
        printf(evs == 3 ? (mma_evs == 10 ? "  (dQ warpgroup: FULL wait, dQ and adds, to next)\n"
                                         : "  (writer: FULL wait, adds, to next)\n")
                        : "\n");
    }
    return 0;
}
