/*
 * Warpgroup tile primitives for the Hopper (sm_90a) pipelines: wgmma with
 * operands in shared memory described by matrix descriptors, and the copies
 * that lay tiles out the way the descriptors read them.
 *
 * Shared tiles are 16-bit [rows][hd] matrices stored as hd/64 column blocks
 * of [rows][64] (128-byte rows) with the 128-byte swizzle: 16-byte chunk c
 * of row r sits at chunk c ^ (r % 8) of its row, so eight rows (1024 bytes)
 * form one swizzle atom. Every block starts 1024-byte aligned. One such tile
 * serves two operand roles without a copy:
 *   K-major  (rows are M or N, hd is the reduction): SBO 1024 (8-row groups),
 *            a 16-wide k-step moves the start by 32 bytes inside the block,
 *            the next 64 columns are the next block (rows * 128 bytes on);
 *   MN-major (rows are the reduction, hd is M or N): SBO 1024 (8-row groups
 *            of the reduction), LBO rows * 128 (the next 64 columns of M or
 *            N), a 16-row k-step moves the start by 2048 bytes.
 *
 *   fmhai_wg_desc(addr, lbo, sbo)           128-byte-swizzle matrix descriptor
 *   fmhai_wg_desc_mode(addr, lbo, sbo, m)   any swizzle mode (2: 64-byte, the
 *                                           e4m3 V^T's second panel)
 *   fmhai_wg_desc_cmaj(addr, rows)          no-swizzle descriptor of a
 *                                           chunk-major K-major tile
 *   fmhai_wg_tile_off(r, c, rows)           byte offset of chunk c of row r
 *   fmhai_wg_tile_off_grp(r, c, cbs)        the same in the grouped layout
 *                                           (16-bit LINEAR pages)
 *   fmhai_wg_load_tile(...)                 cooperative cp.async of a tile
 *   fmhai_wg_fence() / _commit() / _wait(n) wgmma.fence, commit_group,
 *                                           wait_group n (n <= 3)
 *   fmhai_bar_sync / fmhai_bar_arrive       named barriers (producer/consumer
 *                                           hand-offs between warpgroups)
 *   fmhai_wg_setmaxnreg_inc / _dec(n)       rebalance registers between
 *                                           warpgroups
 *   fmhai_wg_fence_acc(d, n)                keeps the compiler from moving
 *                                           accumulator reads or writes across
 *                                           an asynchronous MMA
 *   fmhai_wg_mma_ss_kk_n{64,80,128,192}     d[64xN] (+)= A B^T, A and B K-major
 *                                           in shared memory
 *   fmhai_wg_mma_ss_tt_n{32,64}             d[64xN] (+)= A B, A and B MN-major
 *   fmhai_wg_mma_rs8_n136                   e4m3 P V and P's row sums
 *   fmhai_wg_mma_rs_n{64,128,256}           d += A B, A in registers (the
 *                                           mma.sync m16n8k16 A fragment of
 *                                           the warp's 16 rows), B MN-major
 *                                           or K-major (a run-time flag that
 *                                           folds to the immediate)
 *   fmhai_wg_gemm_abt / fmhai_wg_gemm_rs    a whole product over K of the two
 *                                           kinds above, one commit group
 *   fmhai_wg_gemm_rs8                       the register-A product in e4m3
 *   fmhai_wg_gemm_rs8_sum                   the same, and P's row sums (a
 *                                           row of ones, fmhai_wg_desc_ones)
 *                                           (B = V^T, K-major, one or two
 *                                           panels: tile/vt8_layout.h)
 *   fmhai_wg_load_afrags / fmhai_wg_gemm_rbt   a warp's rows of a K-major
 *                                           tile as A fragments (ldmatrix),
 *                                           and A B^T from them with B as
 *                                           fmhai_wg_gemm_abt's
 * The type code `ty` (is_bf16 where only 16-bit types pass) is 0
 * fp16, 1 bf16, 2 e4m3: e4m3 products are k32 and read both operands
 * K-major (wgmma has no transpose for 8-bit types).
 * Accumulator layout: warp w of the warpgroup holds rows 16w..16w+15 in the
 * mma.sync m16n8 C layout, n-tile j (columns 8j..8j+7) in d[4j..4j+3]. The
 * fp32 accumulate flag is a run-time value (0 clears d).
 *
 * Everything here is NVIDIA sm_90a only; outside an sm_90a compilation pass
 * the functions are empty (the pipelines that call them are too).
 */
#ifndef FMHA_TILE_WARPGROUP_MMA_H
#define FMHA_TILE_WARPGROUP_MMA_H

#include "warp_mma.h"
#include "vt8_layout.h"

#if defined(FMHA_PLATFORM_NVIDIA)

/* Matrix descriptor (PTX ISA, wgmma "Matrix Descriptor Format"): bits 0-13
 * start address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45
 * stride-dimension byte offset >> 4, 49-51 base offset ((start >> 7) & 7
 * for a start whole rows into a swizzle atom; 0 here: the starts are at most
 * 32 bytes into an atom's first row), 62-63 the swizzle mode: 0 none, 1 128-byte,
 * 2 64-byte, 3 32-byte. K-major with a swizzle, the LBO is not used (a
 * k-step stays inside one swizzled row); SBO is the distance of 8-row
 * groups: 8 rows of the swizzle's width (1024 for 128-byte rows, 512 for
 * 64-byte ones). The swizzle XORs the address's chunk bits (4-6 with 7-9 at
 * 128 bytes, 4-5 with 7-8 at 64) of each row, so a start moved 32 bytes
 * into an aligned atom reads the row's next 32 bytes. */
FMHAI_DEVICE uint64_t fmhai_wg_desc_mode(fmhai_smem_t addr, uint32_t lbo, uint32_t sbo, uint64_t mode)
{
    return (uint64_t)((addr & 0x3ffffu) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
           (mode << 62);
}
FMHAI_DEVICE uint64_t fmhai_wg_desc(fmhai_smem_t addr, uint32_t lbo, uint32_t sbo)
{
    return fmhai_wg_desc_mode(addr, lbo, sbo, 1);
}
/* Descriptor d with its start moved `bytes` on (a multiple of 16): a 32-bit
 * add to the low word (a start stays under the 256 KB the 14-bit field
 * holds, so nothing carries out of it). A 64-bit add made the compiler
 * move the k-steps' descriptors through vector registers (an add with
 * carry and two R2UR each); this one it keeps in uniform registers. */
FMHAI_DEVICE uint64_t fmhai_wg_desc_add(uint64_t d, uint32_t bytes)
{
    const uint32_t lo = (uint32_t)d + (bytes >> 4), hi = (uint32_t)(d >> 32);
    return ((uint64_t)hi << 32) | lo;
}

/* No-swizzle descriptor of a chunk-major K-major tile (fmhai_cmaj's layout:
 * 16-byte chunk c of row r at (c * rows + r) * 16): each 8-row x 16-byte core
 * matrix is 128 contiguous bytes, the next 8 rows 128 bytes on (SBO), the next
 * 8 columns of K rows * 16 bytes on (LBO). VECTORIZED K and V^T pages store
 * their chunks in this order, so a warp's copies land contiguously. */
FMHAI_DEVICE uint64_t fmhai_wg_desc_cmaj(fmhai_smem_t addr, int rows)
{
    return (uint64_t)((addr & 0x3ffffu) >> 4) | ((uint64_t)((rows * 16) >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
}

FMHAI_DEVICE int fmhai_wg_tile_off(int r, int c, int rows)
{
    return (c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

/* The grouped layout (FMHAI_WG_LAY_GRP; batch prefill's 16-bit LINEAR
 * pages): the same swizzled 8-row x 128-byte atoms, stored 8-row group
 * major, [rows / 8][hd / 64][8][128 bytes], so a group's atoms for every
 * column block are contiguous and a 16-token page is one contiguous box of
 * a TMA map (dispatch/tma.h, fmhai_tma_encode_kv_grp). Read K-major with SBO
 * hd * 16 (the next 8 rows) and the next 64 columns 1024 bytes on;
 * MN-major with LBO 1024 (the next 64 columns of N) and SBO hd * 16. With
 * hd 64 it is the plain layout. cbs = hd / 64. */
FMHAI_DEVICE int fmhai_wg_tile_off_grp(int r, int c, int cbs)
{
    return (r >> 3) * cbs * 1024 + (c >> 3) * 1024 + (r & 7) * 128 + (((c & 7) ^ (r & 7)) << 4);
}
/* B-operand layouts of fmhai_wg_gemm_abt_c / fmhai_wg_gemm_rs */
#define FMHAI_WG_LAY_SWZ 0    /* fmhai_wg_load_tile's: [hd / 64][rows][128 bytes] */
#define FMHAI_WG_LAY_CMAJ 1   /* chunk-major, no swizzle (VECTORIZED pages)    */
#define FMHAI_WG_LAY_GRP 2    /* grouped: [rows / 8][hd / 64][8][128 bytes]      */

/* rows x hd tile from global rows `row_bytes` apart; rows >= rows_valid and
 * columns >= d are zero-filled. Each thread keeps one column chunk (when
 * the thread count is a multiple of the row's chunks). The
 * base and thread index are hidden from the optimiser: otherwise the
 * swizzled addresses of every call site are hoisted out of the caller's
 * loop and held (or spilled) across the whole step; forming them here
 * costs a few integer instructions per call. */
FMHAI_DEVICE void fmhai_wg_load_tile(fmhai_smem_t dst, const char *src, int64_t row_bytes, int rows,
                                     int rows_valid, int d, int hd, int nthreads, int tid)
{
    asm volatile("" : "+r"(dst), "+r"(tid));
    if (nthreads % (hd / 8) != 0) {
        /* rows of a chunk count the threads do not divide (hdim 192: 24
         * over 128): a flat walk of the tile's chunks (rows * hd / 8 a
         * multiple of nthreads) */
        const int chunks = hd / 8, rstep = nthreads / chunks, cstep = nthreads % chunks;
        int r = tid / chunks, c = tid % chunks;   /* stepped, not divided: the load warpgroup has few registers */
        const char *g = src + r * row_bytes + c * 16;
#pragma unroll
        for (int i = 0; i < rows * chunks / nthreads; ++i) {
            const int ok = c * 8 < d && r < rows_valid;
            fmhai_copy_async16(dst + fmhai_wg_tile_off(r, c, rows), ok ? g : src, ok);
            r += rstep; c += cstep;
            g += rstep * row_bytes + cstep * 16;
            if (c >= chunks) { c -= chunks; ++r; g += row_bytes - chunks * 16; }
        }
        return;
    }
    const int chunks = hd / 8, rstep = nthreads / chunks;
    const int r0 = tid / chunks, c = tid % chunks;
    const int col_ok = c * 8 < d;
    const int64_t gstep = rstep * row_bytes;
    const char *g = src + r0 * row_bytes + c * 16;
    const int rv = rows_valid - r0;
#pragma unroll
    for (int i = 0; i < rows / rstep; ++i) {
        const int ok = col_ok && (i * rstep < rv);
        fmhai_copy_async16(dst + fmhai_wg_tile_off(r0 + i * rstep, c, rows), ok ? g : src, ok);
        g = (const char *)fmhai_opaque_ptr(g + gstep);
    }
}

FMHAI_DEVICE void fmhai_wg_fence(void)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
FMHAI_DEVICE void fmhai_wg_commit(void)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/* n is a compile-time constant after inlining */
FMHAI_DEVICE void fmhai_wg_wait(int n)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    switch (n) {
    case 0: asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); break;
    case 1: asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); break;
    case 2: asm volatile("wgmma.wait_group.sync.aligned 2;\n" ::: "memory"); break;
    default: asm volatile("wgmma.wait_group.sync.aligned 3;\n" ::: "memory"); break;
    }
#endif
}
FMHAI_DEVICE void fmhai_wg_fence_acc(float *d, int n)
{
#pragma unroll
    for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
/* shared-memory stores made by threads, then read by wgmma (the async proxy) */
FMHAI_DEVICE void fmhai_wg_fence_smem(void)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/* Named barriers: `count` threads (a multiple of 32) meet at barrier id
 * (1..15; 0 is __syncthreads). arrive does not wait: a producer signals a
 * consumer that syncs on the same id with the total count. */
FMHAI_DEVICE void fmhai_bar_sync(int id, int count)
{
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(count) : "memory");
}
FMHAI_DEVICE void fmhai_bar_arrive(int id, int count)
{
    asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(count) : "memory");
}

/* Register budget of the calling warpgroup (every warp of it calls); the
 * count is an immediate of the instruction, so these take the splits the
 * pipelines use (a constant at every call site: the branch folds away).
 * The warpgroups must keep the block's launch total, or the increase never
 * completes: a 384-thread block starts at 168 a thread (2 x 240 + 24, or
 * 2 x 232 + 40, 2 x 224 + 56 or 2 x 216 + 72 when the third warpgroup needs more), a 512-thread block at
 * 128 (3 x 160 + 32). */
FMHAI_DEVICE void fmhai_wg_setmaxnreg_inc(int n)   /* 240, 232, 224, 216 or 160 */
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (n == 224) asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
    else if (n == 216) asm volatile("setmaxnreg.inc.sync.aligned.u32 216;\n" ::: "memory");
    else if (n == 240) asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    else if (n == 232) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n" ::: "memory");
#else
    (void)n;
#endif
}
FMHAI_DEVICE void fmhai_wg_setmaxnreg_dec(int n)   /* 24, 40, 56, 72 or 32 */
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (n == 56) asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
    else if (n == 72) asm volatile("setmaxnreg.dec.sync.aligned.u32 72;\n" ::: "memory");
    else if (n == 24) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    else if (n == 40) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 32;\n" ::: "memory");
#else
    (void)n;
#endif
}

/* ---- wgmma wrappers: one per shape and operand order the pipelines use (the
 * transpose flags and the type are immediates of the instruction) --------- */
/* The accumulator operands of an m64nN wgmma: N/2 floats a thread, as
 * "+f" operands (FMHAI_WG_ACC<n>) and as the register list of the
 * instruction (FMHAI_WG_REGS<n>, operands %0..%n-1). */

#define FMHAI_WG_ACC16(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])

#define FMHAI_WG_REGS16 \
    "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" "}"

#define FMHAI_WG_ACC32(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

#define FMHAI_WG_REGS32 \
    "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" ", " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" "}"

#define FMHAI_WG_ACC40(d) \
    FMHAI_WG_ACC32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), \
    "+f"(d[38]), "+f"(d[39])

#define FMHAI_WG_REGS40 \
    "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" ", " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39" "}"

#define FMHAI_WG_ACC48(d) \
    FMHAI_WG_ACC32(d), FMHAI_WG_ACC16((d + 32))

#define FMHAI_WG_REGS48 \
    "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" ", " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" "}"

#define FMHAI_WG_ACC64(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define FMHAI_WG_REGS64 \
    "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" ", " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" ", " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" "}"


/* m64n136 (e4m3 P V with 8 columns of P's row sums: fmhai_wg_gemm_rs8) */
#define FMHAI_WG_ACC68(d) \
    FMHAI_WG_ACC64(d), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])

#define FMHAI_WG_REGS68 \
    "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" ", " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" ", " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" ", " \
    "%64, %65, %66, %67" "}"

#define FMHAI_WG_ACC96(d) FMHAI_WG_ACC64(d), FMHAI_WG_ACC32((d + 64))

#define FMHAI_WG_REGS96 \
    "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" ", " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" ", " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" ", " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" "}"

#define FMHAI_WG_ACC128(d) FMHAI_WG_ACC64(d), FMHAI_WG_ACC64((d + 64))

#define FMHAI_WG_REGS128 \
    "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" ", " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" ", " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" ", " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" ", " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" ", " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" "}"


/* d[64x64] (+)= A B^T, A and B K-major (ty: 0 fp16, 1 bf16, 2 e4m3 with k32) */
FMHAI_DEVICE void fmhai_wg_mma_ss_kk_n64(float *d, uint64_t a_desc, uint64_t b_desc, int accumulate, int ty)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    const int is_bf16 = ty == 1;
    if (ty == 2)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " FMHAI_WG_REGS32
                     ", %32, %33, p, 1, 1;\n}\n"
                     : FMHAI_WG_ACC32(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else if (is_bf16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FMHAI_WG_REGS32
                     ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : FMHAI_WG_ACC32(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FMHAI_WG_REGS32
                     ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : FMHAI_WG_ACC32(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d; (void)a_desc; (void)b_desc; (void)accumulate; (void)ty;
#endif
}

/* d[64x80] (+)= A B^T, A and B K-major, 16-bit (the hdim-256 key tile of 80) */
FMHAI_DEVICE void fmhai_wg_mma_ss_kk_n80(float *d, uint64_t a_desc, uint64_t b_desc, int accumulate, int ty)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (ty == 1)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 " FMHAI_WG_REGS40
                     ", %40, %41, p, 1, 1, 0, 0;\n}\n"
                     : FMHAI_WG_ACC40(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16 " FMHAI_WG_REGS40
                     ", %40, %41, p, 1, 1, 0, 0;\n}\n"
                     : FMHAI_WG_ACC40(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d; (void)a_desc; (void)b_desc; (void)accumulate; (void)ty;
#endif
}

/* d[64x128] (+)= A B^T, A and B K-major (ty: 0 fp16, 1 bf16, 2 e4m3 with k32) */
FMHAI_DEVICE void fmhai_wg_mma_ss_kk_n128(float *d, uint64_t a_desc, uint64_t b_desc, int accumulate, int ty)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    const int is_bf16 = ty == 1;
    if (ty == 2)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " FMHAI_WG_REGS64
                     ", %64, %65, p, 1, 1;\n}\n"
                     : FMHAI_WG_ACC64(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else if (is_bf16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FMHAI_WG_REGS64
                     ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : FMHAI_WG_ACC64(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FMHAI_WG_REGS64
                     ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : FMHAI_WG_ACC64(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d; (void)a_desc; (void)b_desc; (void)accumulate; (void)ty;
#endif
}

/* d[64x192] (+)= A B^T, A and B K-major (the e4m3 forward's 192-key tile:
 * S as m64n192k32, 96 accumulator registers a thread) */
FMHAI_DEVICE void fmhai_wg_mma_ss_kk_n192(float *d, uint64_t a_desc, uint64_t b_desc, int accumulate, int ty)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (ty == 2)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 " FMHAI_WG_REGS96
                     ", %96, %97, p, 1, 1;\n}\n"
                     : FMHAI_WG_ACC96(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else if (ty == 1)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 " FMHAI_WG_REGS96
                     ", %96, %97, p, 1, 1, 0, 0;\n}\n"
                     : FMHAI_WG_ACC96(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 " FMHAI_WG_REGS96
                     ", %96, %97, p, 1, 1, 0, 0;\n}\n"
                     : FMHAI_WG_ACC96(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d; (void)a_desc; (void)b_desc; (void)accumulate; (void)ty;
#endif
}

/* d[64x32] (+)= A B, A and B MN-major */
FMHAI_DEVICE void fmhai_wg_mma_ss_tt_n32(float *d, uint64_t a_desc, uint64_t b_desc, int accumulate, int is_bf16)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (is_bf16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " FMHAI_WG_REGS16
                     ", %16, %17, p, 1, 1, 1, 1;\n}\n"
                     : FMHAI_WG_ACC16(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " FMHAI_WG_REGS16
                     ", %16, %17, p, 1, 1, 1, 1;\n}\n"
                     : FMHAI_WG_ACC16(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d; (void)a_desc; (void)b_desc; (void)accumulate; (void)is_bf16;
#endif
}

/* d[64x64] (+)= A B, A and B MN-major */
FMHAI_DEVICE void fmhai_wg_mma_ss_tt_n64(float *d, uint64_t a_desc, uint64_t b_desc, int accumulate, int is_bf16)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (is_bf16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FMHAI_WG_REGS32
                     ", %32, %33, p, 1, 1, 1, 1;\n}\n"
                     : FMHAI_WG_ACC32(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FMHAI_WG_REGS32
                     ", %32, %33, p, 1, 1, 1, 1;\n}\n"
                     : FMHAI_WG_ACC32(d) : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d; (void)a_desc; (void)b_desc; (void)accumulate; (void)is_bf16;
#endif
}

/* One register-A wgmma: TYPE and SHAPE strings, the accumulator list
 * (FMHAI_WG_REGS<n>, FMHAI_WG_ACC<n>), the operand numbers of A's four
 * registers, the descriptor and the accumulate flag, and TB, B's transpose
 * immediate ("1": B MN-major, "0": K-major). */
#define FMHAI_WG_RS_ASM(TYPE, SHAPE, REGS, ACC, A, DESC, FLAG, TB, d, a, b_desc, accumulate)        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" FLAG ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE " " REGS ", " A ", %" DESC        \
                 ", p, 1, 1, " TB ";\n}\n"                                                           \
                 : ACC(d)                                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate))
/* e4m3 has no transpose immediates: B is K-major, the shape k32 */
#define FMHAI_WG_RS8_ASM(SHAPE, REGS, ACC, A, DESC, FLAG, d, a, b_desc, accumulate)                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" FLAG ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32.e4m3.e4m3 " REGS ", " A ", %" DESC        \
                 ", p, 1, 1;\n}\n"                                                                  \
                 : ACC(d)                                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate))
#define FMHAI_WG_RS_ANY(SHAPE, REGS, ACC, A, DESC, FLAG, d, a, b_desc, accumulate, is_bf16, b_kmajor)  \
    if (is_bf16 && b_kmajor)                                                                         \
        FMHAI_WG_RS_ASM("bf16.bf16", SHAPE, REGS, ACC, A, DESC, FLAG, "0", d, a, b_desc, accumulate);  \
    else if (is_bf16)                                                                                \
        FMHAI_WG_RS_ASM("bf16.bf16", SHAPE, REGS, ACC, A, DESC, FLAG, "1", d, a, b_desc, accumulate);  \
    else if (b_kmajor)                                                                               \
        FMHAI_WG_RS_ASM("f16.f16", SHAPE, REGS, ACC, A, DESC, FLAG, "0", d, a, b_desc, accumulate);    \
    else                                                                                             \
        FMHAI_WG_RS_ASM("f16.f16", SHAPE, REGS, ACC, A, DESC, FLAG, "1", d, a, b_desc, accumulate)

/* d[64xN] (+)= A B, A in registers, B MN-major ([K][N] rows) or, b_kmajor,
 * K-major ([N][K] rows); ty 0 fp16, 1 bf16, 2 e4m3 (k32, B K-major always) */
FMHAI_DEVICE void fmhai_wg_mma_rs_n64(float *d, const uint32_t *a, uint64_t b_desc, int accumulate, int ty,
                                      int b_kmajor)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (ty == 2)
        FMHAI_WG_RS8_ASM("m64n64k32", FMHAI_WG_REGS32, FMHAI_WG_ACC32, "{%32, %33, %34, %35}", "36", "37",
                         d, a, b_desc, accumulate);
    else
        FMHAI_WG_RS_ANY("m64n64k16", FMHAI_WG_REGS32, FMHAI_WG_ACC32, "{%32, %33, %34, %35}", "36", "37",
                    d, a, b_desc, accumulate, ty, b_kmajor);
#else
    (void)d; (void)a; (void)b_desc; (void)accumulate; (void)ty; (void)b_kmajor;
#endif
}
/* n32 and n96 (head dims 32 and 96: O of 32 / 96 columns, B's second
 * 64-column panel half read at 96); 16-bit only */
FMHAI_DEVICE void fmhai_wg_mma_rs_n32(float *d, const uint32_t *a, uint64_t b_desc, int accumulate, int ty,
                                      int b_kmajor)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    FMHAI_WG_RS_ANY("m64n32k16", FMHAI_WG_REGS16, FMHAI_WG_ACC16, "{%16, %17, %18, %19}", "20", "21",
                    d, a, b_desc, accumulate, ty, b_kmajor);
#else
    (void)d; (void)a; (void)b_desc; (void)accumulate; (void)ty; (void)b_kmajor;
#endif
}
FMHAI_DEVICE void fmhai_wg_mma_rs_n96(float *d, const uint32_t *a, uint64_t b_desc, int accumulate, int ty,
                                      int b_kmajor)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    FMHAI_WG_RS_ANY("m64n96k16", FMHAI_WG_REGS48, FMHAI_WG_ACC48, "{%48, %49, %50, %51}", "52", "53",
                    d, a, b_desc, accumulate, ty, b_kmajor);
#else
    (void)d; (void)a; (void)b_desc; (void)accumulate; (void)ty; (void)b_kmajor;
#endif
}
FMHAI_DEVICE void fmhai_wg_mma_rs_n128(float *d, const uint32_t *a, uint64_t b_desc, int accumulate, int ty,
                                       int b_kmajor)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (ty == 2)
        FMHAI_WG_RS8_ASM("m64n128k32", FMHAI_WG_REGS64, FMHAI_WG_ACC64, "{%64, %65, %66, %67}", "68", "69",
                         d, a, b_desc, accumulate);
    else
        FMHAI_WG_RS_ANY("m64n128k16", FMHAI_WG_REGS64, FMHAI_WG_ACC64, "{%64, %65, %66, %67}", "68", "69",
                    d, a, b_desc, accumulate, ty, b_kmajor);
#else
    (void)d; (void)a; (void)b_desc; (void)accumulate; (void)ty; (void)b_kmajor;
#endif
}
/* e4m3 only: V^T's 128 d rows and 8 rows of ones (fmhai_wg_gemm_rs8) */
FMHAI_DEVICE void fmhai_wg_mma_rs8_n136(float *d, const uint32_t *a, uint64_t b_desc, int accumulate)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    FMHAI_WG_RS8_ASM("m64n136k32", FMHAI_WG_REGS68, FMHAI_WG_ACC68, "{%68, %69, %70, %71}", "72", "73",
                     d, a, b_desc, accumulate);
#else
    (void)d; (void)a; (void)b_desc; (void)accumulate;
#endif
}
FMHAI_DEVICE void fmhai_wg_mma_rs_n256(float *d, const uint32_t *a, uint64_t b_desc, int accumulate, int ty,
                                       int b_kmajor)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    if (ty == 2)
        FMHAI_WG_RS8_ASM("m64n256k32", FMHAI_WG_REGS128, FMHAI_WG_ACC128, "{%128, %129, %130, %131}", "132",
                         "133", d, a, b_desc, accumulate);
    else
        FMHAI_WG_RS_ANY("m64n256k16", FMHAI_WG_REGS128, FMHAI_WG_ACC128, "{%128, %129, %130, %131}", "132", "133",
                    d, a, b_desc, accumulate, ty, b_kmajor);
#else
    (void)d; (void)a; (void)b_desc; (void)accumulate; (void)ty; (void)b_kmajor;
#endif
}

/* acc[64 x N] = A B^T over K columns (one commit group): A is 64 rows at
 * `a` of a tile whose 64-column panels hold a_rows rows, B an N-row tile
 * (N = 64 or 128); both K-major, A in fmhai_wg_load_tile's layout, B in
 * layout b_lay (FMHAI_WG_LAY_*: that one, chunk-major as fmhai_wg_desc_cmaj
 * reads it, or grouped); N = 64, 80, 128 or 192 (e4m3);
 * another N would run as 64 (wrong), which policy/fwd_tiles.h's
 * fwd90_tile_n constraint rules out at compile time. K counts 16-bit columns (32
 * bytes a step); e4m3 tiles (ty 2) pass their bytes / 2, each step then a
 * k32 product. */
/* (acc_in: acc += A B^T, acc holding a start value; else acc = A B^T) */
/* Byte offset of 32-byte k-step k in a K-major tile of `rows` rows in
 * fmhai_wg_load_tile's layout (64-column panels of rows x 128 bytes). */
FMHAI_DEVICE int fmhai_wg_kstep_off(int k, int rows)
{
    return (k / 4) * rows * 128 + (k % 4) * 32;
}
FMHAI_DEVICE void fmhai_wg_gemm_abt_c(float *acc, fmhai_smem_t a, int a_rows, fmhai_smem_t b, int N, int K,
                                      int ty, int b_lay, int acc_in)
{
    /* b_lay may be a run-time (uniform) value: the grouped layout's strides
     * are picked once, not per k-step */
    const int grp = b_lay == FMHAI_WG_LAY_GRP;
    const uint64_t da = fmhai_wg_desc(a, 16, 1024);
    const uint64_t db = b_lay == FMHAI_WG_LAY_CMAJ ? fmhai_wg_desc_cmaj(b, N)
                                                   : fmhai_wg_desc(b, 16, grp ? (uint32_t)K * 16 : 1024u);
    const int prow = grp ? 8 : N;   /* rows of a 64-column panel: the next 64 columns of K are prow * 128 on */
#pragma unroll
    for (int k = 0; k < K / 16; ++k) {
        const uint64_t dak = fmhai_wg_desc_add(da, (uint32_t)fmhai_wg_kstep_off(k, a_rows));
        const int bo = b_lay == FMHAI_WG_LAY_CMAJ ? k * 2 * N * 16 : fmhai_wg_kstep_off(k, prow);
        const uint64_t dbk = fmhai_wg_desc_add(db, (uint32_t)bo);
        if (N == 192) fmhai_wg_mma_ss_kk_n192(acc, dak, dbk, k > 0 || acc_in, ty);
        else if (N == 128) fmhai_wg_mma_ss_kk_n128(acc, dak, dbk, k > 0 || acc_in, ty);
        else if (N == 80) fmhai_wg_mma_ss_kk_n80(acc, dak, dbk, k > 0 || acc_in, ty);
        else fmhai_wg_mma_ss_kk_n64(acc, dak, dbk, k > 0 || acc_in, ty);
    }
    fmhai_wg_commit();
}
FMHAI_DEVICE void fmhai_wg_gemm_abt(float *acc, fmhai_smem_t a, int a_rows, fmhai_smem_t b, int N, int K,
                                    int ty, int b_lay)
{
    fmhai_wg_gemm_abt_c(acc, a, a_rows, b, N, K, ty, b_lay, 0);
}

/* A fragments of a warp's 16 rows (wrow0..) of a K-major tile of `rows`
 * rows in fmhai_wg_load_tile's layout, `steps` 32-byte k-steps: the
 * mma.sync m16k16 A fragment of each step (also the e4m3 k32 one: the same
 * bytes), by one ldmatrix.x4 a step. */
FMHAI_DEVICE void fmhai_wg_load_afrags(uint32_t (*a)[4], fmhai_smem_t tile, int rows, int wrow0, int lane,
                                       int steps)
{
    const int r = wrow0 + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int k = 0; k < steps; ++k)
        fmhai_warp_ldsm_x4(a[k], tile + (uint32_t)fmhai_wg_tile_off(r, k * 2 + (lane >> 4), rows));
}

/* acc[64 x 64] = A B^T over kbytes bytes of each row (one commit group;
 * acc_in: acc += A B^T, acc holding a start value): A as kbytes / 32
 * register fragments (fmhai_wg_load_afrags; a 32-byte k-step is k16 in
 * 16 bits, k32 in e4m3), B a 64-row K-major tile read as fmhai_wg_gemm_abt
 * reads it; only B comes from shared memory. ty as fmhai_wg_mma_rs_n64. */
FMHAI_DEVICE void fmhai_wg_gemm_rbt(float *acc, const uint32_t (*a)[4], fmhai_smem_t b, int kbytes, int ty,
                                    int acc_in)
{
    const uint64_t db = fmhai_wg_desc(b, 16, 1024);
#pragma unroll
    for (int k = 0; k < kbytes / 32; ++k)
        fmhai_wg_mma_rs_n64(acc, a[k], fmhai_wg_desc_add(db, (uint32_t)fmhai_wg_kstep_off(k, 64)), k > 0 || acc_in, ty,
                            1);
    fmhai_wg_commit();
}

/* acc[64 x N] += A[64 x K] B (one commit group): A as K/16 register
 * fragments (the mma.sync A layout of each warp's 16 rows), B a [K][N] tile
 * read MN-major (b_lay: fmhai_wg_load_tile's layout with K rows, or the
 * grouped one) or, chunk-major, B^T as a chunk-major [N][K] tile read
 * K-major (fmhai_wg_desc_cmaj; VECTORIZED V lands as V^T so), N = 32, 64,
 * 96, 128, 192 (as 128 + 64) or 256. */
FMHAI_DEVICE void fmhai_wg_gemm_rs(float *acc, const uint32_t (*a)[4], fmhai_smem_t b, int N, int K, int is_bf16,
                                   int b_lay)
{
    const int b_cmaj = b_lay == FMHAI_WG_LAY_CMAJ, grp = b_lay == FMHAI_WG_LAY_GRP;
    /* the next 64 columns of N (LBO) and the next 8 rows of K (SBO); b_lay
     * may be a run-time (uniform) value */
    const int cb_off = grp ? 1024 : K * 128, g8 = grp ? N * 16 : 1024;
    const uint64_t db = b_cmaj ? fmhai_wg_desc_cmaj(b, N) : fmhai_wg_desc(b, (uint32_t)cb_off, (uint32_t)g8);
#pragma unroll
    for (int kq = 0; kq < K / 16; ++kq) {
        /* a 16-deep k-step: two 8-row groups on (MN-major), or two chunk
         * columns of N rows on (chunk-major) */
        const uint64_t dk = fmhai_wg_desc_add(db, (uint32_t)(b_cmaj ? kq * 2 * N * 16 : kq * 2 * g8));
        if (N == 256) {
            fmhai_wg_mma_rs_n256(acc, a[kq], dk, 1, is_bf16, b_cmaj);
        } else if (N == 192) {
            /* n128, then n64 for columns 128..191 (n-tiles 16..23, acc + 64):
             * two 64-column panels on, or 128 chunk-major rows */
            fmhai_wg_mma_rs_n128(acc, a[kq], dk, 1, is_bf16, b_cmaj);
            fmhai_wg_mma_rs_n64(acc + 64, a[kq], fmhai_wg_desc_add(dk, (uint32_t)(b_cmaj ? 128 * 16 : 2 * cb_off)), 1,
                                is_bf16, b_cmaj);
        } else if (N == 128) {
            fmhai_wg_mma_rs_n128(acc, a[kq], dk, 1, is_bf16, b_cmaj);
        } else if (N == 96) {
            fmhai_wg_mma_rs_n96(acc, a[kq], dk, 1, is_bf16, b_cmaj);
        } else if (N == 32) {
            fmhai_wg_mma_rs_n32(acc, a[kq], dk, 1, is_bf16, b_cmaj);
        } else {
            fmhai_wg_mma_rs_n64(acc, a[kq], dk, 1, is_bf16, b_cmaj);
        }
    }
    fmhai_wg_commit();
}

/* d[64x8] (+)= A ones (e4m3): each column of d the row sums of A (B the
 * all-ones K-major tile of `ones`, fmhai_wg_desc_ones) */
FMHAI_DEVICE void fmhai_wg_mma_rs8_n8(float *d, const uint32_t *a, uint64_t ones, int accumulate)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(ones), "r"(accumulate));
#else
    (void)d; (void)a; (void)ones; (void)accumulate;
#endif
}
/* The no-swizzle descriptor of 256 bytes of e4m3 ones (0x38): an [8][32]
 * K-major B, its two 8 x 16-byte core matrices 128 bytes apart; every
 * k-step reads the same bytes. */
FMHAI_DEVICE uint64_t fmhai_wg_desc_ones(fmhai_smem_t ones) { return fmhai_wg_desc_mode(ones, 128, 256, 0); }

/* acc[64 x N] += P[64 x K] V in e4m3 (one commit group): P as K/32 register
 * fragments (wgmma's e4m3 A layout: row g and g + 8 of each warp's 16, bytes
 * 4t..4t+3 and 16 + 4t..), V as V^T [N][K] in the layout of
 * tile/vt8_layout.h (K-major): keys 0..127 a 128-byte-swizzled panel of
 * 128-byte rows, k-steps 32 bytes apart in it; keys 128..191 (K = 192) a
 * 64-byte-swizzled panel of 64-byte rows N * 128 bytes on (SBO 512: 8 rows
 * of 64 bytes), k-steps 4 and 5 at its bytes 0 and 32. The fragments' byte
 * order need not be the keys' order: the V^T loader stores the keys of each
 * k-step in the order the score accumulator hands them over
 * (fmhai_wg_vt8_transpose).
 * vr: the stage's d rows (the second panel vr * 128 bytes on); N = 136 with
 * vr = 136, hdim 128 and the stage's 8 rows of e4m3 ones
 * (FMHAI_FWD90_VFOLD: policy/fwd_tiles.h), so that acc columns 128..135
 * (acc[64..67]) take P's row sums in the product itself.
 * With sum given (fmhai_wg_gemm_rs8_sum), also P's row sums into sum[4]
 * (set, not added: an m64n8 of ones beside each k-step; sum[0] row g,
 * sum[2] row g + 8), in the same commit group. */
FMHAI_DEVICE void fmhai_wg_gemm_rs8_sum(float *acc, float *sum, const uint32_t (*a)[4], fmhai_smem_t b, int N,
                                        int vr, int K, uint64_t ones)
{
    const uint64_t d0 = fmhai_wg_desc(b, 16, 1024);
    const uint64_t d1 = fmhai_wg_desc_mode(b + vr * 128, 16, 512, 2);
#pragma unroll
    for (int kq = 0; kq < K / 32; ++kq) {
        /* the k-step's start (fmhai_vt8_kstep_start), as an offset of its
         * panel's descriptor */
        const int at = fmhai_vt8_kstep_start(kq, vr);
        const uint64_t dk = fmhai_vt8_kstep_width(kq) == 128 ? fmhai_wg_desc_add(d0, (uint32_t)at)
                                                             : fmhai_wg_desc_add(d1, (uint32_t)(at - vr * 128));
        if (N == 256) fmhai_wg_mma_rs_n256(acc, a[kq], dk, 1, 2, 1);
        else if (N == 136) fmhai_wg_mma_rs8_n136(acc, a[kq], dk, 1);
        else if (N == 128) fmhai_wg_mma_rs_n128(acc, a[kq], dk, 1, 2, 1);
        else fmhai_wg_mma_rs_n64(acc, a[kq], dk, 1, 2, 1);
        if (sum) fmhai_wg_mma_rs8_n8(sum, a[kq], ones, kq > 0);
    }
    fmhai_wg_commit();
}

FMHAI_DEVICE void fmhai_wg_gemm_rs8(float *acc, const uint32_t (*a)[4], fmhai_smem_t b, int N, int vr, int K)
{
    fmhai_wg_gemm_rs8_sum(acc, 0, a, b, N, vr, K, 0);
}

#endif /* FMHA_PLATFORM_NVIDIA */
#endif /* FMHA_TILE_WARPGROUP_MMA_H */
