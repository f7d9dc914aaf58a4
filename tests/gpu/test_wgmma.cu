/*
 * test_wgmma.cu - the Hopper warpgroup primitives (tile/warpgroup_mma.h)
 * against a CPU product, one warpgroup per case, fp16 and bf16.
 *
 * Each case loads its operands with fmhai_wg_load_tile (random values, the
 * tiles' 128-byte swizzle), runs one wgmma shape and operand order the way the
 * backward pipeline uses it, and compares every accumulator with the double
 * product of the same 16-bit inputs:
 *   kk   S = A B^T, both K-major (A at a row offset: a warpgroup's 64 keys)
 *   rs   D = A B, A from registers (mma.sync A fragments), B MN-major
 *   rsk  D = A B, A from registers, B K-major, B^T stored [N][K] chunk-major
 *        (no-swizzle descriptor: the forward's VECTORIZED V^T tiles)
 *   kkc  S = A B^T, B K-major chunk-major (VECTORIZED K tiles)
 *   tt   D = A^T B, both MN-major, B at a column offset (a warpgroup's half
 *        of the head dim, inside a 64-column block for N = 32)
 * Head dims 32 and 96 (the forward's wgmma 32 / 96 kernels): tiles of 32 /
 * 96 columns keep whole 64-column blocks (the last one half empty), S over
 * K = 32 / 96 (kk) and P V as n32 / n96 (rs, the n96 B operand spanning a
 * block and a half). 
 * Skips without an sm_90 GPU (the kernels are built for sm_90a only).
 */
#include "fmha_tile.h"
#include "gpu/test_util.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

enum { KK = 0, RS = 1, TT = 2, RSK = 3, KKC = 4 };

typedef struct wg_case {
    const char *name;
    int kind, n;            /* operand order, N of the instruction          */
    int a_rows, a_cols;     /* A in global memory (row-major, 16-bit)       */
    int b_rows, b_cols;     /* B in global memory                           */
    int a_off, b_off;       /* kk: A row offset; tt: B column offset        */
} wg_case;

static const wg_case cases[] = {
    { "kk_n64_k128",        KK, 64,  64, 128,  64, 128,  0,  0 },
    { "kk_n64_k128_rows64", KK, 64, 128, 128,  64, 128, 64,  0 },
    { "kk_n128_k64",        KK, 128, 64,  64, 128,  64,  0,  0 },
    { "kk_n64_k64",         KK, 64,  64,  64,  64,  64,  0,  0 },
    { "rs_n128_k64",        RS, 128, 64,  64,  64, 128,  0,  0 },
    { "rs_n64_k64",         RS, 64,  64,  64,  64,  64,  0,  0 },
    { "rs_n64_k128",        RS, 64,  64, 128, 128,  64,  0,  0 },
    { "kkc_n128_k64",       KKC, 128, 64,  64, 128,  64,  0,  0 },
    { "kkc_n64_k128",       KKC, 64,  64, 128,  64, 128,  0,  0 },
    { "rsk_n128_k64",       RSK, 128, 64, 64, 128,  64,  0,  0 },
    { "rsk_n256_k64",       RSK, 256, 64, 64, 256,  64,  0,  0 },
    { "rsk_n64_k128",       RSK, 64,  64, 128, 64, 128,  0,  0 },
    { "tt_n64_k128",        TT, 64, 128,  64, 128, 128,  0,  0 },
    { "tt_n64_k128_col64",  TT, 64, 128,  64, 128, 128, 64,  0 },
    { "tt_n32_k128",        TT, 32, 128,  64, 128,  64,  0,  0 },
    { "tt_n32_k128_col32",  TT, 32, 128,  64, 128,  64, 32,  0 },
    { "kk_n128_k96",        KK, 128, 64,  96, 128,  96,  0,  0 },
    { "kk_n128_k32",        KK, 128, 64,  32, 128,  32,  0,  0 },
    { "rs_n96_k128",        RS, 96,  64, 128, 128,  96,  0,  0 },
    { "rs_n32_k128",        RS, 32,  64, 128, 128,  32,  0,  0 },
};
/* bytes of a tile of `cols` 16-bit columns: whole 64-column blocks */
#define WG_TILE_BYTES(rows, cols) ((rows) * (((cols) * 2 + 127) / 128) * 128)
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static __global__ void __launch_bounds__(128, 1) wg_kernel(wg_case c, const uint16_t *A, const uint16_t *B,
                                                             float *D, int is_bf16)
{
    extern __shared__ __align__(1024) char smem_raw[];
#if defined(FMHAI_DEVICE_HAS_SM90A)
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const fmhai_smem_t base = (fmhai_smem_addr(smem_raw) + 1023u) & ~1023u;
    const fmhai_smem_t sA = base, sB = base + WG_TILE_BYTES(c.a_rows, c.a_cols);
    fmhai_wg_load_tile(sA, (const char *)A, c.a_cols * 2, c.a_rows, c.a_rows, c.a_cols, c.a_cols, 128, tid);
    if (c.kind == RSK || c.kind == KKC) {   /* chunk-major: chunk j of row r at (j * rows + r) * 16 */
        for (int i = tid; i < c.b_rows * c.b_cols / 8; i += 128) {
            const int r = i % c.b_rows, j = i / c.b_rows;
            fmhai_copy_async16(sB + fmhai_cmaj(r, j, c.b_rows), B + r * c.b_cols + 8 * j, 1);
        }
    } else {
        fmhai_wg_load_tile(sB, (const char *)B, c.b_cols * 2, c.b_rows, c.b_rows, c.b_cols, c.b_cols, 128, tid);
    }
    fmhai_copy_commit();
    fmhai_copy_wait(0);
    __syncthreads();
    fmhai_wg_fence_smem();
    float d[128];
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    fmhai_wg_fence_acc(d, 128);
    fmhai_wg_fence();
    if (c.kind == KKC) {   /* A [64][K], B [N][K] chunk-major */
        fmhai_wg_gemm_abt(d, sA, c.a_rows, sB, c.n, c.a_cols, is_bf16, 1);
    } else if (c.kind == KK) {   /* A [rows][K] at row a_off, B [N][K] */
        for (int k = 0; k < c.a_cols / 16; ++k) {
            const uint64_t da = fmhai_wg_desc(sA + (k / 4) * c.a_rows * 128 + c.a_off * 128 + (k % 4) * 32, 16, 1024);
            const uint64_t db = fmhai_wg_desc(sB + (k / 4) * c.b_rows * 128 + (k % 4) * 32, 16, 1024);
            if (c.n == 64) fmhai_wg_mma_ss_kk_n64(d, da, db, k > 0, is_bf16);
            else fmhai_wg_mma_ss_kk_n128(d, da, db, k > 0, is_bf16);
        }
    } else if (c.kind == RS || c.kind == RSK) {   /* A [64][K] in registers, B [K][N] or [N][K] */
        for (int k = 0; k < c.a_cols / 16; ++k) {
            uint32_t a[4];
            for (int q = 0; q < 4; ++q) {
                const int r = 16 * warp + g + 8 * (q % 2), col = 16 * k + 2 * t + 8 * (q / 2);
                a[q] = (uint32_t)A[r * c.a_cols + col] | ((uint32_t)A[r * c.a_cols + col + 1] << 16);
            }
            const int kb = c.kind == RSK;
            const uint64_t db = kb ? fmhai_wg_desc_cmaj(sB + k * 2 * c.b_rows * 16, c.b_rows)
                                   : fmhai_wg_desc(sB + k * 2048, c.b_rows * 128, 1024);
            if (c.n == 256) fmhai_wg_mma_rs_n256(d, a, db, 1, is_bf16, kb);
            else if (c.n == 64) fmhai_wg_mma_rs_n64(d, a, db, 1, is_bf16, kb);
            else if (c.n == 96) fmhai_wg_mma_rs_n96(d, a, db, 1, is_bf16, kb);
            else if (c.n == 32) fmhai_wg_mma_rs_n32(d, a, db, 1, is_bf16, kb);
            else fmhai_wg_mma_rs_n128(d, a, db, 1, is_bf16, kb);
        }
    } else {   /* A [K][64], B [K][cols] at column b_off */
        for (int k = 0; k < c.a_rows / 16; ++k) {
            const uint64_t da = fmhai_wg_desc(sA + k * 2048, c.a_rows * 128, 1024);
            const uint64_t db = fmhai_wg_desc(sB + (c.b_off / 64) * c.b_rows * 128 + (c.b_off % 64) * 2 + k * 2048,
                                              c.b_rows * 128, 1024);
            if (c.n == 64) fmhai_wg_mma_ss_tt_n64(d, da, db, k > 0, is_bf16);
            else fmhai_wg_mma_ss_tt_n32(d, da, db, k > 0, is_bf16);
        }
    }
    if (c.kind != KKC) fmhai_wg_commit();
    fmhai_wg_wait(0);
    fmhai_wg_fence_acc(d, 128);
    for (int i = 0; i < c.n / 2; ++i) {
        const int r = 16 * warp + g + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * t + (i % 2);
        D[r * c.n + col] = d[i];
    }
#else
    (void)c; (void)A; (void)B; (void)D; (void)is_bf16;
#endif
}

static uint16_t to16(float x, int is_bf16, float *back)
{
    uint16_t u;
    if (is_bf16) {
        __nv_bfloat16 h = __float2bfloat16(x);
        memcpy(&u, &h, 2);
        *back = __bfloat162float(h);
    } else {
        __half h = __float2half(x);
        memcpy(&u, &h, 2);
        *back = __half2float(h);
    }
    return u;
}

int main(int argc, char **argv)
{
    cudaDeviceProp prop;
    int dev = 0;
    (void)argc; (void)argv;
    if (tu_compile_check_only("test_wgmma")) return 0;
    if (!tu_gpu_available()) {
        printf("SKIP test_wgmma: no GPU\n0 passed, 0 failed\n");
        return 0;
    }
    TU_CUDA(cudaGetDevice(&dev));
    TU_CUDA(cudaGetDeviceProperties(&prop, dev));
    if (prop.major != 9) {
        printf("SKIP test_wgmma: needs sm_90 (device is sm_%d%d)\n0 passed, 0 failed\n", prop.major, prop.minor);
        return 0;
    }
    TU_CUDA(cudaFuncSetAttribute(wg_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    srand(7);
    for (int ci = 0; ci < NCASES; ++ci)
        for (int is_bf16 = 0; is_bf16 < 2; ++is_bf16) {
            const wg_case c = cases[ci];
            char name[96];
            snprintf(name, sizeof(name), "wgmma_%s_%s", c.name, is_bf16 ? "bf16" : "fp16");
            if (!tu_selected(name)) continue;
            const int na = c.a_rows * c.a_cols, nb = c.b_rows * c.b_cols;
            uint16_t *ha = (uint16_t *)malloc(na * 2), *hb = (uint16_t *)malloc(nb * 2);
            float *fa = (float *)malloc(na * 4), *fb = (float *)malloc(nb * 4), *hd = (float *)malloc(64 * 256 * 4);
            for (int i = 0; i < na; ++i) ha[i] = to16((float)rand() / RAND_MAX * 2.f - 1.f, is_bf16, &fa[i]);
            for (int i = 0; i < nb; ++i) hb[i] = to16((float)rand() / RAND_MAX * 2.f - 1.f, is_bf16, &fb[i]);
            uint16_t *da = (uint16_t *)tu_dmalloc(na * 2), *db = (uint16_t *)tu_dmalloc(nb * 2);
            float *dd = (float *)tu_dmalloc(64 * 256 * 4);
            tu_upload(da, ha, na * 2);
            tu_upload(db, hb, nb * 2);
            tu_poison32(dd, 64 * 256, TU_POISON_LSE);
            wg_kernel<<<1, 128, WG_TILE_BYTES(c.a_rows, c.a_cols) + WG_TILE_BYTES(c.b_rows, c.b_cols) + 1024>>>(
                c, da, db, dd, is_bf16);
            TU_CUDA(cudaGetLastError());
            TU_CUDA(cudaDeviceSynchronize());
            tu_download(hd, dd, 64 * c.n * 4);
            double worst = 0.0;
            for (int m = 0; m < 64; ++m)
                for (int n = 0; n < c.n; ++n) {
                    double ref = 0.0;
                    if (c.kind == KK || c.kind == KKC)
                        for (int k = 0; k < c.a_cols; ++k)
                            ref += (double)fa[(c.a_off + m) * c.a_cols + k] * fb[n * c.b_cols + k];
                    else if (c.kind == RS)
                        for (int k = 0; k < c.a_cols; ++k) ref += (double)fa[m * c.a_cols + k] * fb[k * c.b_cols + n];
                    else if (c.kind == RSK)
                        for (int k = 0; k < c.a_cols; ++k) ref += (double)fa[m * c.a_cols + k] * fb[n * c.b_cols + k];
                    else
                        for (int k = 0; k < c.a_rows; ++k)
                            ref += (double)fa[k * c.a_cols + m] * fb[k * c.b_cols + c.b_off + n];
                    const double e = fabs(ref - hd[m * c.n + n]);
                    if (!(e <= worst)) worst = e;   /* NaN sticks */
                }
            if (worst <= 1e-3) tu_pass(name);
            else tu_fail(name, "max abs error %g", worst);
            tu_dfree(da); tu_dfree(db); tu_dfree(dd);
            free(ha); free(hb); free(fa); free(fb); free(hd);
        }
    tu_finish();
    return 0;
}
