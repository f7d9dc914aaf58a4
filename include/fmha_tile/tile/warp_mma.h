/*
 * Warp tile primitives for the portable pipeline.
 *
 * The portable forward pipeline is written with these few operations, named
 * scope first and destination first (ThunderKittens style):
 *   fmhai_copy_async16(dst_smem, src, valid)   16-byte global->shared copy;
 *                                              zero-fills when !valid
 *   fmhai_copy_commit() / fmhai_copy_wait(n)   group the copies; wait until at
 *                                              most n groups are in flight
 *   fmhai_warp_ldsm_x4(r, addr)                four 8x8 16-bit tiles from shared
 *   fmhai_warp_ldsm_x4_t(r, addr)              the same, transposed
 *   fmhai_warp_mma_16816(c, a, b, is_bf16)     c[16x8] += a[16x16] * b[16x8]
 *   fmhai_pack2(x, y, is_bf16)                 two floats -> packed fp16/bf16
 * Fragment layouts are those of mma.sync.m16n8k16 on NVIDIA: lane l holds rows
 * l/4 and l/4+8, columns 2*(l%4) and 2*(l%4)+1 of each 16x8 accumulator.
 *
 * NVIDIA (sm_80 and newer): cp.async, ldmatrix and mma.sync. AMD: the same
 * operations and fragment layouts emulated with plain loads and 32-lane
 * shuffles, so the portable kernels compile and run unchanged; the MFMA
 * pipeline that replaces them on CDNA is a separate, later pipeline.
 *
 * Shared-memory addresses are fmhai_smem_t: a 32-bit shared-window address on
 * NVIDIA (what the instructions take), a byte pointer on AMD.
 */
#ifndef FMHA_TILE_WARP_MMA_H
#define FMHA_TILE_WARP_MMA_H

#include "../platform/platform.h"
#include "../arch/arch.h"

#if defined(FMHA_PLATFORM_NVIDIA)
/* =========================================================== NVIDIA ====== */
typedef uint32_t fmhai_smem_t;

FMHAI_DEVICE fmhai_smem_t fmhai_smem_addr(const void *p)
{
    return (fmhai_smem_t)__cvta_generic_to_shared(p);
}

/* XOR on a shared address (the swizzle works on address bits 4..6). */
FMHAI_DEVICE fmhai_smem_t fmhai_smem_xor(fmhai_smem_t a, int x) { return a ^ (uint32_t)x; }

/* Hides a pointer's value from the optimiser: used for running pointers the
 * compiler would otherwise expand into one live register pair per step. */
FMHAI_DEVICE const void *fmhai_opaque_ptr(const void *p)
{
    asm volatile("" : "+l"(p));
    return p;
}

FMHAI_DEVICE void fmhai_copy_async16(fmhai_smem_t dst, const void *src, int valid)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
#endif
}

FMHAI_DEVICE void fmhai_copy_commit(void)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* n is a compile-time constant after inlining; the switch folds away. */
FMHAI_DEVICE void fmhai_copy_wait(int n)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::); break;
    default: asm volatile("cp.async.wait_group 4;\n" ::); break;
    }
#endif
}

FMHAI_DEVICE void fmhai_warp_ldsm_x4(uint32_t *r, fmhai_smem_t addr)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}

FMHAI_DEVICE void fmhai_warp_ldsm_x4_t(uint32_t *r, fmhai_smem_t addr)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}

FMHAI_DEVICE void fmhai_warp_mma_16816(float *c, const uint32_t *a, const uint32_t *b,
                                       int is_bf16)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    if (is_bf16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

FMHAI_DEVICE uint32_t fmhai_pack2(float x, float y, int is_bf16)
{
    uint32_t r = 0;
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    /* cvt packs its second source into the low half. */
    if (is_bf16)
        asm("cvt.rn.bf16x2.f32 %0, %2, %1;\n" : "=r"(r) : "f"(x), "f"(y));
    else
        asm("cvt.rn.f16x2.f32 %0, %2, %1;\n" : "=r"(r) : "f"(x), "f"(y));
#endif
    return r;
}

FMHAI_DEVICE void fmhai_sync_warp(void) { __syncwarp(); }

#elif defined(FMHA_PLATFORM_AMD)
/* ============================================================== AMD ====== */
typedef char *fmhai_smem_t;

FMHAI_DEVICE fmhai_smem_t fmhai_smem_addr(const void *p) { return (fmhai_smem_t)p; }
FMHAI_DEVICE fmhai_smem_t fmhai_smem_xor(fmhai_smem_t a, int x)
{
    return (fmhai_smem_t)((uintptr_t)a ^ (uintptr_t)x);
}
FMHAI_DEVICE const void *fmhai_opaque_ptr(const void *p) { return p; }

FMHAI_DEVICE void fmhai_copy_async16(fmhai_smem_t dst, const void *src, int valid)
{
    uint4 v = {0u, 0u, 0u, 0u};
    if (valid) v = *(const uint4 *)src;
    *(uint4 *)dst = v;
}
/* Copies above complete synchronously; the block barrier that follows every
 * wait in the pipeline orders them. */
FMHAI_DEVICE void fmhai_copy_commit(void) {}
FMHAI_DEVICE void fmhai_copy_wait(int n) { (void)n; }

FMHAI_DEVICE int fmhai_lane(void) { return (int)(threadIdx.x & 31u); }

FMHAI_DEVICE uint32_t fmhai_shfl_u32(uint32_t v, int src_lane)
{
    return (uint32_t)__shfl((int)v, src_lane, 32);
}

/* ldmatrix: lane l supplies the row address of tile l/8, row l%8; lane l
 * receives from tile i the 32-bit word at column pair l%4 of row l/4. */
FMHAI_DEVICE void fmhai_warp_ldsm_x4(uint32_t *r, fmhai_smem_t addr)
{
    int lane = fmhai_lane();
    for (int i = 0; i < 4; ++i) {
        uintptr_t row = (uintptr_t)addr;
        uint32_t lo = fmhai_shfl_u32((uint32_t)row, 8 * i + lane / 4);
        uint32_t hi = fmhai_shfl_u32((uint32_t)(row >> 32), 8 * i + lane / 4);
        const char *p = (const char *)(((uintptr_t)hi << 32) | lo);
        r[i] = *(const uint32_t *)(p + 4 * (lane % 4));
    }
}

/* Transposed: lane l receives elements (2*(l%4), l/4) and (2*(l%4)+1, l/4). */
FMHAI_DEVICE void fmhai_warp_ldsm_x4_t(uint32_t *r, fmhai_smem_t addr)
{
    int lane = fmhai_lane();
    for (int i = 0; i < 4; ++i) {
        uint32_t v[2];
        for (int e = 0; e < 2; ++e) {
            uintptr_t row = (uintptr_t)addr;
            int src = 8 * i + 2 * (lane % 4) + e;
            uint32_t lo = fmhai_shfl_u32((uint32_t)row, src);
            uint32_t hi = fmhai_shfl_u32((uint32_t)(row >> 32), src);
            const char *p = (const char *)(((uintptr_t)hi << 32) | lo);
            v[e] = *(const uint16_t *)(p + 2 * (lane / 4));
        }
        r[i] = v[0] | (v[1] << 16);
    }
}

FMHAI_DEVICE float fmhai_half_bits_to_float(uint32_t h, int is_bf16)
{
    if (is_bf16) return __uint_as_float(h << 16);
    return __half2float(__ushort_as_half((unsigned short)h));
}

/* c[16x8] += a[16x16] * b[16x8] with the mma.sync fragment layouts, by
 * shuffling the operands through the 32-lane group (slow, but exact in fp32). */
FMHAI_DEVICE void fmhai_warp_mma_16816(float *c, const uint32_t *a, const uint32_t *b,
                                       int is_bf16)
{
    int lane = fmhai_lane(), g = lane / 4, t = lane % 4;
    for (int k2 = 0; k2 < 8; ++k2) {           /* pairs of k: k = 2*k2, 2*k2+1 */
        int tk = k2 % 4, hi = k2 / 4;           /* owner lane column, k half    */
        uint32_t a_lo = fmhai_shfl_u32(a[hi * 2 + 0], g * 4 + tk);     /* row g   */
        uint32_t a_hi = fmhai_shfl_u32(a[hi * 2 + 1], g * 4 + tk);     /* row g+8 */
        for (int j = 0; j < 2; ++j) {           /* output column 2t + j         */
            uint32_t bw = fmhai_shfl_u32(b[hi], (2 * t + j) * 4 + tk);
            for (int e = 0; e < 2; ++e) {
                float bv = fmhai_half_bits_to_float((bw >> (16 * e)) & 0xffffu, is_bf16);
                c[j] += fmhai_half_bits_to_float((a_lo >> (16 * e)) & 0xffffu, is_bf16) * bv;
                c[2 + j] += fmhai_half_bits_to_float((a_hi >> (16 * e)) & 0xffffu, is_bf16) * bv;
            }
        }
    }
}

FMHAI_DEVICE uint32_t fmhai_pack2(float x, float y, int is_bf16)
{
    uint32_t lo, hi;
    if (is_bf16) {
        uint32_t ux = __float_as_uint(x), uy = __float_as_uint(y);
        lo = (ux + 0x7fffu + ((ux >> 16) & 1u)) >> 16;   /* round to nearest even */
        hi = (uy + 0x7fffu + ((uy >> 16) & 1u)) >> 16;
    } else {
        lo = __half_as_ushort(__float2half_rn(x));
        hi = __half_as_ushort(__float2half_rn(y));
    }
    return (lo & 0xffffu) | (hi << 16);
}

FMHAI_DEVICE void fmhai_sync_warp(void) { __syncthreads(); }
#endif

#endif /* FMHA_TILE_WARP_MMA_H */
