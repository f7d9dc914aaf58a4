/*
 * Warp tile primitives for the portable pipeline.
 *
 * The portable forward pipeline is written with these few operations, named
 * scope first and destination first (ThunderKittens style):
 *   fmhai_copy_async16(dst_smem, src, valid)   16-byte global->shared copy;
 *                                              zero-fills when !valid
 *   fmhai_copy_async4(dst_smem, src, valid)    4-byte global->shared copy
 *                                              (zero-filled when !valid)
 *   fmhai_copy_commit() / fmhai_copy_wait(n)   group the copies; wait until at
 *                                              most n groups are in flight
 *   fmhai_warp_ldsm_x4(r, addr)                four 8x8 16-bit tiles from shared
 *   fmhai_warp_ldsm_x4_t(r, addr)              the same, transposed
 *   fmhai_warp_mma_16816(c, a, b, is_bf16)     c[16x8] += a[16x16] * b[16x8]
 *   fmhai_pack2(x, y, is_bf16)                 two floats -> packed fp16/bf16
 *   fmhai_lds_load16 / fmhai_lds_store16       16 bytes shared <-> registers
 *   fmhai_lds_store8                           8 bytes registers -> shared
 *   fmhai_st_shared_u32                        4 bytes register -> shared
 *   fmhai_e4m3x4_to_f16(x, y)                  four e4m3 codes -> two f16x2, exact
 *   fmhai_f32_to_e4m3(f)                       float -> e4m3 code (RNE, saturating)
 *   fmhai_warp_ldsm_x4_e4m3(b, addr)           four 8-key e4m3 K tiles from shared,
 *                                              decoded to f16 B fragments in a
 *                                              permuted head-dim order (below)
 *   fmhai_warp_ldsm_x4_t_e4m3(b, addr)         four 8-key e4m3 V tiles, decoded to
 *                                              the B fragments of even and odd d
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
/* Hides a shared address from the optimiser: a GEMM phase re-derives its
 * swizzled addresses from it, instead of every phase's addresses being
 * hoisted out of the loop and held in registers for its whole length. */
FMHAI_DEVICE fmhai_smem_t fmhai_opaque_smem(fmhai_smem_t a)
{
    asm volatile("" : "+r"(a));
    return a;
}

FMHAI_DEVICE void fmhai_copy_async16(fmhai_smem_t dst, const void *src, int valid)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
#endif
}

/* One 4-byte word (a page index), in the same commit groups as the tiles. */
FMHAI_DEVICE void fmhai_copy_async4(fmhai_smem_t dst, const void *src, int valid)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(valid ? 4 : 0));
#endif
}

/* Copies `bytes` (0..16) and zero-fills the rest of the 16. */
FMHAI_DEVICE void fmhai_copy_async16_part(fmhai_smem_t dst, const void *src, int bytes)
{
#if defined(FMHAI_DEVICE_HAS_MMA_SM80)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(bytes));
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

FMHAI_DEVICE void fmhai_lds_load16(uint32_t *v, fmhai_smem_t a)
{
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(a));
}
FMHAI_DEVICE void fmhai_lds_store16(fmhai_smem_t a, const uint32_t *v)
{
    asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n"
                 :: "r"(a), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]));
}
FMHAI_DEVICE void fmhai_lds_store8(fmhai_smem_t a, uint32_t x, uint32_t y)
{
    asm volatile("st.shared.v2.b32 [%0], {%1,%2};\n" :: "r"(a), "r"(x), "r"(y));
}

/* Four e4m3 codes (byte i = element i) -> f16 pairs y[0] = (0, 1), y[1] =
 * (2, 3), exact (every e4m3 value is an f16 normal). sm_89+: the hardware
 * conversion; sm_80: the code shifted into f16 position (sign to bit 15,
 * exponent and mantissa to bits 7..13) is the value times 2^-8, for
 * subnormal codes too, and one f16x2 multiply by 256 restores it. */
FMHAI_DEVICE void fmhai_e4m3x4_to_f16(uint32_t x, uint32_t *y)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm("{ .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n"
        "cvt.rn.f16x2.e4m3x2 %0, lo;\n cvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
        : "=r"(y[0]), "=r"(y[1]) : "r"(x));
#elif defined(FMHAI_DEVICE_HAS_MMA_SM80)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint32_t a = __byte_perm(x, 0u, i ? 0x4342u : 0x4140u);   /* [0 b(2i+1) 0 b(2i)] */
        const uint32_t f = ((a & 0x00800080u) << 8) | ((a & 0x007f007fu) << 7);
        asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(y[i]) : "r"(f), "r"(0x5c005c00u));
    }
#else
    y[0] = y[1] = x & 0u;
#endif
}

FMHAI_DEVICE void fmhai_sync_warp(void) { __syncwarp(); }

#elif defined(FMHA_PLATFORM_AMD)
/* ============================================================== AMD ====== */
/* A 32-lane group is half of a wave64 (lanes 0-31 or 32-63 of one wave), so
 * 32-lane shuffles (ds_bpermute inside the half) reach exactly the lanes of
 * an NVIDIA warp. fmhai_smem_t is a 32-bit LDS pointer (address space 3), as
 * the shared-window address is on NVIDIA: swizzle arithmetic stays 32-bit,
 * the emulated ldmatrix shuffles one register per row address and reads with
 * ds_read. */
#define FMHAI_LDS __attribute__((address_space(3)))
typedef FMHAI_LDS char *fmhai_smem_t;
typedef uint32_t fmhai_u32x4 __attribute__((ext_vector_type(4)));

FMHAI_DEVICE fmhai_smem_t fmhai_smem_addr(const void *p) { return (fmhai_smem_t)p; }
/* XOR on the 32-bit LDS address (the swizzle works on address bits 4..6). */
FMHAI_DEVICE fmhai_smem_t fmhai_smem_xor(fmhai_smem_t a, int x)
{
    return (fmhai_smem_t)(uintptr_t)((uint32_t)(uintptr_t)a ^ (uint32_t)x);
}
/* An empty asm the value passes through: the compiler cannot see through it,
 * so a running pointer is advanced step by step instead of one 64-bit
 * address per row being formed before a loop and held in registers (which
 * alone cost the MFMA forward 30+ VGPRs). */
FMHAI_DEVICE const void *fmhai_opaque_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
#if defined(__HIP_DEVICE_COMPILE__)
    asm volatile("" : "+v"(x));
#endif
    return (const void *)(uintptr_t)x;
}
FMHAI_DEVICE fmhai_smem_t fmhai_opaque_smem(fmhai_smem_t a) { return a; }

FMHAI_DEVICE uint32_t fmhai_lds_u32(fmhai_smem_t p) { return (uint32_t)(uintptr_t)p; }
FMHAI_DEVICE uint32_t fmhai_lds_load_u32(uint32_t lds) { return *(const FMHAI_LDS uint32_t *)(uintptr_t)lds; }
FMHAI_DEVICE uint32_t fmhai_lds_load_u16(uint32_t lds) { return *(const FMHAI_LDS uint16_t *)(uintptr_t)lds; }

FMHAI_DEVICE void fmhai_copy_async16(fmhai_smem_t dst, const void *src, int valid)
{
    fmhai_u32x4 v = {0u, 0u, 0u, 0u};
    if (valid) v = *(const fmhai_u32x4 *)src;
    *(FMHAI_LDS fmhai_u32x4 *)dst = v;
}
FMHAI_DEVICE void fmhai_copy_async4(fmhai_smem_t dst, const void *src, int valid)
{
    *(FMHAI_LDS uint32_t *)dst = valid ? *(const uint32_t *)src : 0u;
}
FMHAI_DEVICE void fmhai_copy_async16_part(fmhai_smem_t dst, const void *src, int bytes)
{
    uint16_t h[8];
    for (int i = 0; i < 8; ++i) h[i] = 2 * i < bytes ? ((const uint16_t *)src)[i] : (uint16_t)0;
    for (int i = 0; i < 8; ++i) ((FMHAI_LDS uint16_t *)dst)[i] = h[i];
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
    const int lane = fmhai_lane();
    const uint32_t row = fmhai_lds_u32(addr);
#pragma unroll
    for (int i = 0; i < 4; ++i)
        r[i] = fmhai_lds_load_u32(fmhai_shfl_u32(row, 8 * i + lane / 4) + 4 * (lane % 4));
}

/* Transposed: lane l receives elements (2*(l%4), l/4) and (2*(l%4)+1, l/4)
 * of tile i, the first in the low half. */
FMHAI_DEVICE void fmhai_warp_ldsm_x4_t(uint32_t *r, fmhai_smem_t addr)
{
    const int lane = fmhai_lane();
    const uint32_t row = fmhai_lds_u32(addr);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int src = 8 * i + 2 * (lane % 4);
        const uint32_t lo = fmhai_lds_load_u16(fmhai_shfl_u32(row, src) + 2 * (lane / 4));
        const uint32_t hi = fmhai_lds_load_u16(fmhai_shfl_u32(row, src + 1) + 2 * (lane / 4));
        r[i] = lo | (hi << 16);
    }
}

/* acc + x.lo * y.lo + x.hi * y.hi over packed 16-bit pairs (fp32 math). */
FMHAI_DEVICE float fmhai_dot2_acc(uint32_t x, uint32_t y, float acc, int is_bf16)
{
    if (is_bf16)
        return __builtin_fmaf(__uint_as_float(x & 0xffff0000u), __uint_as_float(y & 0xffff0000u),
                              __builtin_fmaf(__uint_as_float(x << 16), __uint_as_float(y << 16), acc));
#if defined(FMHAI_DEVICE_IS_GFX9)
    {   typedef _Float16 fmhai_h2 __attribute__((ext_vector_type(2)));
        return __builtin_amdgcn_fdot2(__builtin_bit_cast(fmhai_h2, x), __builtin_bit_cast(fmhai_h2, y),
                                      acc, false);
    }
#else
    return __builtin_fmaf(__half2float(__ushort_as_half((unsigned short)(x >> 16))),
                          __half2float(__ushort_as_half((unsigned short)(y >> 16))),
                          __builtin_fmaf(__half2float(__ushort_as_half((unsigned short)x)),
                                         __half2float(__ushort_as_half((unsigned short)y)), acc));
#endif
}

/* c[16x8] += a[16x16] * b[16x8] with the mma.sync fragment layouts, by
 * shuffling the operands through the 32-lane group: for each pair of k
 * (k2 = 0..7: k = 2*k2, 2*k2+1) lane (g, t) fetches rows g and g+8 of A from
 * lane 4g + k2%4 (a0/a1 for k < 8, a2/a3 above) and columns 2t, 2t+1 of B from
 * lanes 4(2t) + k2%4 and 4(2t+1) + k2%4 (b0 for k < 8, b1 above). 32 shuffles
 * and 32 two-term dot products per call; products are exact in fp32, the
 * summation order differs from the tensor cores'. */
FMHAI_DEVICE void fmhai_warp_mma_16816(float *c, const uint32_t *a, const uint32_t *b,
                                       int is_bf16)
{
    const int lane = fmhai_lane(), g = lane / 4, t = lane % 4;
#pragma unroll
    for (int k2 = 0; k2 < 8; ++k2) {
        const int tk = k2 % 4, hi = k2 / 4;
        const uint32_t a_g = fmhai_shfl_u32(a[2 * hi + 0], 4 * g + tk);        /* row g     */
        const uint32_t a_g8 = fmhai_shfl_u32(a[2 * hi + 1], 4 * g + tk);       /* row g + 8 */
        const uint32_t b_0 = fmhai_shfl_u32(b[hi], 4 * (2 * t) + tk);          /* col 2t    */
        const uint32_t b_1 = fmhai_shfl_u32(b[hi], 4 * (2 * t + 1) + tk);      /* col 2t+1  */
        c[0] = fmhai_dot2_acc(a_g, b_0, c[0], is_bf16);
        c[1] = fmhai_dot2_acc(a_g, b_1, c[1], is_bf16);
        c[2] = fmhai_dot2_acc(a_g8, b_0, c[2], is_bf16);
        c[3] = fmhai_dot2_acc(a_g8, b_1, c[3], is_bf16);
    }
}

/* fp32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN. */
FMHAI_DEVICE uint32_t fmhai_f32_to_bf16_bits(float x)
{
    const uint32_t u = __float_as_uint(x);
    const uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rne;
}

/* x in the low half, y in the high half (as cvt.rn.{bf16,f16}x2.f32). */
FMHAI_DEVICE uint32_t fmhai_pack2(float x, float y, int is_bf16)
{
    uint32_t lo, hi;
    if (is_bf16) {
        lo = fmhai_f32_to_bf16_bits(x);
        hi = fmhai_f32_to_bf16_bits(y);
    } else {
        lo = __half_as_ushort(__float2half_rn(x));
        hi = __half_as_ushort(__float2half_rn(y));
    }
    return (lo & 0xffffu) | (hi << 16);
}

FMHAI_DEVICE void fmhai_lds_load16(uint32_t *v, fmhai_smem_t a)
{
    const fmhai_u32x4 x = *(const FMHAI_LDS fmhai_u32x4 *)a;
    v[0] = x[0]; v[1] = x[1]; v[2] = x[2]; v[3] = x[3];
}
FMHAI_DEVICE void fmhai_lds_store16(fmhai_smem_t a, const uint32_t *v)
{
    const fmhai_u32x4 x = { v[0], v[1], v[2], v[3] };
    *(FMHAI_LDS fmhai_u32x4 *)a = x;
}
FMHAI_DEVICE void fmhai_lds_store8(fmhai_smem_t a, uint32_t x, uint32_t y)
{
    typedef uint32_t fmhai_u32x2 __attribute__((ext_vector_type(2)));
    const fmhai_u32x2 v = { x, y };
    *(FMHAI_LDS fmhai_u32x2 *)a = v;
}
/* Four e4m3 codes -> two f16 pairs, exact (see the NVIDIA version). */
FMHAI_DEVICE void fmhai_e4m3x4_to_f16(uint32_t x, uint32_t *y)
{
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        float v[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const uint32_t b = (x >> (16 * i + 8 * j)) & 0xffu;
            /* into fp32 position: value times 2^-120 (fnuz: 2^-119), exact */
#if defined(FMHAI_DEVICE_E4M3_FNUZ)
            v[j] = __uint_as_float(((b & 0x80u) << 24) | ((b & 0x7fu) << 20)) * 6.64613997892458e35f;
#else
            v[j] = __uint_as_float(((b & 0x80u) << 24) | ((b & 0x7fu) << 20)) * 1.329227995784916e36f;
#endif
        }
        y[i] = fmhai_pack2(v[0], v[1], 0);
    }
}

/* A 32-lane group never spans two waves, and a wave's LDS accesses complete
 * in order: __syncwarp is a wave-scope fence plus a scheduling barrier. */
FMHAI_DEVICE void fmhai_sync_warp(void)
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
#endif

/* float -> e4m3 (OCP e4m3fn), round to nearest even, saturating to +-448
 * (NaN stays NaN): the code in the low byte. sm_89+: the hardware
 * conversion; elsewhere from the float's bits (normals: the 3-bit mantissa
 * rounded in place; below 2^-6: units of 2^-9). */
FMHAI_DEVICE uint32_t fmhai_f32_to_e4m3(float f)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;\n" : "=h"(r) : "f"(f));
    return (uint32_t)r & 0xffu;
#else
    const uint32_t sign = (__float_as_uint(f) >> 24) & 0x80u;
    const float a = fabsf(f);
    if (a != a) return sign | 0x7fu;
    if (a >= 448.f) return sign | 0x7eu;
    if (a < 0.015625f) return sign | (uint32_t)rintf(a * 512.f);   /* 8 units: the smallest normal's code */
    {
        const uint32_t u = __float_as_uint(a);
        const uint32_t r = u + 0x7ffffu + ((u >> 20) & 1u);        /* to 3 mantissa bits, ties to even */
        return sign | ((((r >> 23) - 120u) << 3) | ((r >> 20) & 7u));
    }
#endif
}

/* ---- e4m3 K fragments straight from shared memory (both platforms) --------
 * ldmatrix moves bytes (the AMD emulation too): over a tile whose 16-byte
 * rows are e4m3 keys (16 head-dim columns of one key per row), lane (g, t)
 * receives bytes 4t..4t+3 of row g, i.e. K[g][4t .. 4t+3]. Decoded, those
 * are the mma.m16n8k16 B fragment (b0b1 = k slots 2t, 2t+1; b2b3 = slots
 * 2t+8, 2t+9) once the head-dim columns of each 16-column chunk are taken in
 * the order
 *     slot    0 1 2 3 4 5  6  7   8 9 10 11 12 13 14 15
 *     column  0 1 4 5 8 9 12 13   2 3  6  7 10 11 14 15
 * A permutation of k applied to both operands leaves Q K^T unchanged, so the
 * queries are stored in that order (fmhai_load_q_f16) and K needs no 16-bit
 * copy in shared memory: no decode round trip through it, half the ldmatrix
 * bytes. */

/* b[i] = the B fragment (16 columns x 8 keys) of the 8x16-byte e4m3 tile
 * whose row addresses lanes 8i .. 8i+7 supply. Decoded by cvt: an exact
 * integer-bit decode (times 2^-8) measured slower on H100, in full or for
 * part of the chunks (fp8/bf16 prefill 0.74-0.80 against 0.84-0.90). */
FMHAI_DEVICE void fmhai_warp_ldsm_x4_e4m3(uint32_t (*b)[2], fmhai_smem_t addr)
{
    uint32_t r[4];
    fmhai_warp_ldsm_x4(r, addr);
#pragma unroll
    for (int i = 0; i < 4; ++i) fmhai_e4m3x4_to_f16(r[i], b[i]);
}

/* ---- e4m3 V fragments straight from shared memory ---------------------------
 * The transposed ldmatrix moves 16-bit pairs: over 8 e4m3 key rows of 16
 * bytes (16 d of one key per row), lane (g, t) receives the byte pairs
 * (d 2g, 2g+1) of keys 2t and 2t+1, i.e. the 2 x 2 block
 *     bytes 0 1 2 3 = V[2t][2g] V[2t][2g+1] V[2t+1][2g] V[2t+1][2g+1].
 * Reordered to (0, 2, 1, 3) and decoded, it gives the B fragment slot pair
 * (keys 2t, 2t+1) of d 2g and of d 2g+1: two mma.m16n8k16 B operands, one
 * whose 8 columns are the chunk's even d and one the odd d. The product's
 * column n is then d 2n (even MMA) or 2n+1 (odd MMA), so lane t's two
 * accumulator columns of each are d 4t, 4t+2 and 4t+1, 4t+3: together the
 * contiguous d 4t .. 4t+3, stored in that order by the epilogue.
 *
 * b[i] = the (even d, odd d) fragment halves of the 8 keys whose row
 * addresses lanes 8i .. 8i+7 supply. */
FMHAI_DEVICE void fmhai_warp_ldsm_x4_t_e4m3(uint32_t (*b)[2], fmhai_smem_t addr)
{
    uint32_t r[4];
    fmhai_warp_ldsm_x4_t(r, addr);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if defined(FMHA_PLATFORM_NVIDIA)
        const uint32_t x = __byte_perm(r[i], 0, 0x3120);
#else
        const uint32_t x = (r[i] & 0xff0000ffu) | ((r[i] >> 8) & 0xff00u) | ((r[i] << 8) & 0xff0000u);
#endif
        fmhai_e4m3x4_to_f16(x, b[i]);
    }
}

FMHAI_DEVICE void fmhai_st_shared_u32(fmhai_smem_t dst, uint32_t v)
{
#if defined(FMHA_PLATFORM_NVIDIA)
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(dst), "r"(v));
#else
    *(FMHAI_LDS uint32_t *)dst = v;
#endif
}

#endif /* FMHA_TILE_WARP_MMA_H */
