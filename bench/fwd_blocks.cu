/*
 * fwd_blocks: where a Hopper forward block's time goes outside its key loop.
 *
 * bench_fwd built with the pipeline's block hooks (FMHAI_FWD90_BLOCK_MARK in
 * pipeline/fwd_sm90.h): thread 0 of every block stores the SM clock and the
 * SM's id when the body starts, when tile 0 and Q have landed, when the
 * first S is done, when the last P V is done and when O is stored. After
 * the benchmark (its last launch) the tool prints the mean cycles of each
 * span over the blocks, and, per SM, the mean gap from one block's last
 * mark to the next block's first (the launch of the next block, and the
 * rest of the other warpgroups' epilogue). A block's overhead is its
 * prologue, epilogue and gap against the key loop: at short sequences
 * (few key tiles a block) it is a sizeable part of the time.
 * Same arguments as bench_fwd; run one point, e.g.
 *
 *   fwd_blocks --hdim 128 --seqlen 2k --causal 0
 *
 *   make build/bench/fwd_blocks   (sm_90a only; not part of make test)
 */
#define FWD_BLOCKS_MAX 16384
__device__ unsigned long long fwd_blocks_buf[FWD_BLOCKS_MAX * 6];
#define FMHAI_FWD90_BLOCK_MARK(ev)                                                                 \
    do {                                                                                          \
        if (threadIdx.x == 0) {                                                                   \
            const unsigned int l_ = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); \
            unsigned long long c_;                                                                \
            unsigned int s_;                                                                      \
            asm volatile("mov.u64 %0, %%clock64;" : "=l"(c_)::"memory");                         \
            asm volatile("mov.u32 %0, %%smid;" : "=r"(s_));                                        \
            if (l_ < FWD_BLOCKS_MAX) {                                                            \
                fwd_blocks_buf[l_ * 6 + (ev)] = c_;                                               \
                fwd_blocks_buf[l_ * 6 + 5] = s_;                                                  \
            }                                                                                     \
        }                                                                                         \
    } while (0)

#define main bench_fwd_main
#include "bench_fwd.cu"
#undef main

#define FWD_BLOCKS_SMS 256

static unsigned long long fwd_blocks_h[FWD_BLOCKS_MAX * 6];
static int fwd_blocks_order[FWD_BLOCKS_MAX];

int main(int argc, char **argv)
{
    const unsigned long long *h = fwd_blocks_h;
    static const char *const span[4] = { "start -> tile 0 landed", "first S", "key loop", "epilogue" };
    double sum[4] = { 0, 0, 0, 0 }, gap = 0, busy = 0, wall = 0;
    int n = 0, ngap = 0, nsm = 0;
    const int rc = bench_fwd_main(argc, argv);
    if (rc != 0) return rc;
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpyFromSymbol(fwd_blocks_h, fwd_blocks_buf, sizeof(fwd_blocks_h)) != cudaSuccess) {
        fprintf(stderr, "fwd_blocks: reading the marks failed\n");
        return 1;
    }
    while (n < FWD_BLOCKS_MAX && h[n * 6 + 4] != 0) ++n;   /* the blocks of the last launch */
    if (n == 0) {
        fprintf(stderr, "fwd_blocks: no block marks (not a Hopper forward kernel?)\n");
        return 1;
    }
    for (int i = 0; i < n; ++i)
        for (int e = 0; e < 4; ++e) sum[e] += (double)(h[i * 6 + e + 1] - h[i * 6 + e]);
    /* per SM: its blocks in start order (the clock is the SM's own) */
    for (int sm = 0; sm < FWD_BLOCKS_SMS; ++sm) {
        int k = 0;
        for (int i = 0; i < n; ++i)
            if ((int)h[i * 6 + 5] == sm) fwd_blocks_order[k++] = i;
        if (k == 0) continue;
        for (int a = 1; a < k; ++a)   /* insertion sort by start */
            for (int b = a; b > 0 && h[fwd_blocks_order[b] * 6] < h[fwd_blocks_order[b - 1] * 6]; --b) {
                const int x = fwd_blocks_order[b];
                fwd_blocks_order[b] = fwd_blocks_order[b - 1];
                fwd_blocks_order[b - 1] = x;
            }
        for (int a = 0; a < k; ++a) {
            const int i = fwd_blocks_order[a];
            busy += (double)(h[i * 6 + 4] - h[i * 6]);
            if (a > 0) {
                gap += (double)h[i * 6] - (double)h[fwd_blocks_order[a - 1] * 6 + 4];
                ++ngap;
            }
        }
        wall += (double)(h[fwd_blocks_order[k - 1] * 6 + 4] - h[fwd_blocks_order[0] * 6]);
        ++nsm;
    }
    printf("\nfwd_blocks: %d blocks on %d SMs, mean SM cycles of a block (thread 0)\n", n, nsm);
    for (int e = 0; e < 4; ++e) printf("  %-24s %9.0f\n", span[e], sum[e] / n);
    printf("  %-24s %9.0f   (%d gaps)\n", "gap to the SM's next", ngap ? gap / ngap : 0.0, ngap);
    printf("  blocks' marked time / SM wall time: %.3f\n", wall > 0 ? busy / wall : 0.0);
    return 0;
}
