/*
 * Wave (wave64) MFMA primitives for AMD CDNA: thin wrappers around clang's
 * MFMA builtins and the row reductions a softmax needs over their results.
 *
 *   fmhai_wave_mfma_32x32x8_f16(d, a, b)      d[32x32] += a[32x8] * b[8x32]    gfx90a, gfx942
 *   fmhai_wave_mfma_32x32x8_bf16(d, a, b)     the same, bf16 (..._1k)
 *   fmhai_wave_mfma_16x16x16_f16(d, a, b)     d[16x16] += a[16x16] * b[16x16]
 *   fmhai_wave_mfma_16x16x16_bf16(d, a, b)    the same, bf16 (..._1k)
 *   fmhai_wave_mfma_32x32x16_fp8(d, a, b)     d[32x32] += a[32x16] * b[16x32]  fp8, gfx942
 *   fmhai_wave_mfma_16x16x32_fp8(d, a, b)     d[16x16] += a[16x32] * b[32x16]  fp8, gfx942
 *   fmhai_wave_row_max(x, lanes) / fmhai_wave_row_sum(x, lanes)
 *                                             max / sum over aligned groups of
 *                                             `lanes` (16 or 32) lanes: one row
 *                                             of a D fragment
 * Which lane and slot of a, b and d holds which matrix element is
 * tile/mfma_layout.h's business (tested on the host against a model of the
 * instructions, tests/host/test_mfma_layout.c); a lane's a or b fragment is
 * 64 bits (4 f16/bf16 or 8 fp8 elements, slot 0 lowest), d is 16 (32x32) or
 * 4 (16x16) floats. The row reductions use the DPP / ds_swizzle sequence the
 * host test replays (row_ror 8 and 4, quad swaps, then a swizzle across the
 * two DPP rows of a 32-lane half): no LDS, no bpermute address math.
 *
 * The fp8 instructions read their bytes as the device's fp8: e4m3fnuz on
 * gfx942, OCP e4m3fn on gfx950 (the platform layer owns the type). A device
 * pass for a target without these instructions traps instead of computing
 * garbage; the host pass sees declarations only. AMD only: on NVIDIA this
 * header is empty (tile/warp_mma.h and tile/warpgroup_mma.h serve there).
 */
#ifndef FMHA_TILE_WAVE_MMA_H
#define FMHA_TILE_WAVE_MMA_H

#include "../platform/platform.h"
#include "../arch/arch.h"
#include "mfma_layout.h"

#if defined(FMHA_PLATFORM_AMD)

#if defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__)
#  define FMHAI_DEVICE_HAS_MFMA 1
#endif
#if defined(__gfx942__) || defined(__gfx950__)
#  define FMHAI_DEVICE_HAS_MFMA_FP8 1
#endif

typedef _Float16 fmhai_f16x4 __attribute__((ext_vector_type(4)));
typedef short fmhai_bf16x4 __attribute__((ext_vector_type(4)));      /* bf16 bits */
typedef float fmhai_f32x4 __attribute__((ext_vector_type(4)));
typedef float fmhai_f32x16 __attribute__((ext_vector_type(16)));
typedef long fmhai_fp8x8;                                             /* 8 fp8 codes, slot 0 lowest */

/* The last three builtin arguments are CBSZ, ABID and BLGP: 0 = no broadcast
 * or lane swizzle, the plain layouts of mfma_layout.h. */
#if defined(FMHAI_DEVICE_HAS_MFMA)
#  define FMHAI_MFMA_CALL_(builtin, d, a, b) (*(d) = builtin((a), (b), *(d), 0, 0, 0))
#elif defined(__HIP_DEVICE_COMPILE__)
#  define FMHAI_MFMA_CALL_(builtin, d, a, b) ((void)(d), (void)(a), (void)(b), __builtin_trap())
#else
#  define FMHAI_MFMA_CALL_(builtin, d, a, b) ((void)(d), (void)(a), (void)(b))
#endif
#if defined(FMHAI_DEVICE_HAS_MFMA_FP8)
#  define FMHAI_MFMA_FP8_CALL_(builtin, d, a, b) (*(d) = builtin((a), (b), *(d), 0, 0, 0))
#elif defined(__HIP_DEVICE_COMPILE__)
#  define FMHAI_MFMA_FP8_CALL_(builtin, d, a, b) ((void)(d), (void)(a), (void)(b), __builtin_trap())
#else
#  define FMHAI_MFMA_FP8_CALL_(builtin, d, a, b) ((void)(d), (void)(a), (void)(b))
#endif

FMHAI_DEVICE void fmhai_wave_mfma_32x32x8_f16(fmhai_f32x16 *d, fmhai_f16x4 a, fmhai_f16x4 b)
{
    FMHAI_MFMA_CALL_(__builtin_amdgcn_mfma_f32_32x32x8f16, d, a, b);
}
FMHAI_DEVICE void fmhai_wave_mfma_32x32x8_bf16(fmhai_f32x16 *d, fmhai_bf16x4 a, fmhai_bf16x4 b)
{
    FMHAI_MFMA_CALL_(__builtin_amdgcn_mfma_f32_32x32x8bf16_1k, d, a, b);
}
FMHAI_DEVICE void fmhai_wave_mfma_16x16x16_f16(fmhai_f32x4 *d, fmhai_f16x4 a, fmhai_f16x4 b)
{
    FMHAI_MFMA_CALL_(__builtin_amdgcn_mfma_f32_16x16x16f16, d, a, b);
}
FMHAI_DEVICE void fmhai_wave_mfma_16x16x16_bf16(fmhai_f32x4 *d, fmhai_bf16x4 a, fmhai_bf16x4 b)
{
    FMHAI_MFMA_CALL_(__builtin_amdgcn_mfma_f32_16x16x16bf16_1k, d, a, b);
}
FMHAI_DEVICE void fmhai_wave_mfma_32x32x16_fp8(fmhai_f32x16 *d, fmhai_fp8x8 a, fmhai_fp8x8 b)
{
    FMHAI_MFMA_FP8_CALL_(__builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8, d, a, b);
}
FMHAI_DEVICE void fmhai_wave_mfma_16x16x32_fp8(fmhai_f32x4 *d, fmhai_fp8x8 a, fmhai_fp8x8 b)
{
    FMHAI_MFMA_FP8_CALL_(__builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8, d, a, b);
}

/* ---- row reductions over a D fragment --------------------------------------- */
/* DPP controls (GFX9 encoding): quad_perm selects as 2-bit fields, row_ror:n is
 * 0x120 + n. ds_swizzle bit mode: and/or/xor masks in bits 0-4 / 5-9 / 10-14. */
#define FMHAI_DPP_ROW_ROR8 0x128
#define FMHAI_DPP_ROW_ROR4 0x124
#define FMHAI_DPP_QUAD_SWAP2 0x4e      /* quad_perm [2,3,0,1] */
#define FMHAI_DPP_QUAD_SWAP1 0xb1      /* quad_perm [1,0,3,2] */
#define FMHAI_SWIZZLE_XOR16 0x401f     /* and 0x1f, or 0, xor 0x10 */

#if defined(FMHAI_DEVICE_HAS_MFMA)
#  define FMHAI_DPP_(x, ctrl) __int_as_float(__builtin_amdgcn_update_dpp(0, __float_as_int(x), ctrl, 0xf, 0xf, false))
#  define FMHAI_SWZ_(x, pat) __int_as_float(__builtin_amdgcn_ds_swizzle(__float_as_int(x), pat))
#else
#  define FMHAI_DPP_(x, ctrl) (x)
#  define FMHAI_SWZ_(x, pat) (x)
#endif

/* lanes: 16 (16x16 shapes) or 32 (32x32 shapes), a constant at the call site.
 * Rotating by 8 and then 4 pairs lanes as xor 8 and xor 4 would, so every lane
 * of a row ends with the bitwise same sum (tests/host/test_mfma_layout.c). */
FMHAI_DEVICE float fmhai_wave_row_max(float x, int lanes)
{
    x = fmaxf(x, FMHAI_DPP_(x, FMHAI_DPP_ROW_ROR8));
    x = fmaxf(x, FMHAI_DPP_(x, FMHAI_DPP_ROW_ROR4));
    x = fmaxf(x, FMHAI_DPP_(x, FMHAI_DPP_QUAD_SWAP2));
    x = fmaxf(x, FMHAI_DPP_(x, FMHAI_DPP_QUAD_SWAP1));
    if (lanes > 16) x = fmaxf(x, FMHAI_SWZ_(x, FMHAI_SWIZZLE_XOR16));
    return x;
}
FMHAI_DEVICE float fmhai_wave_row_sum(float x, int lanes)
{
    x += FMHAI_DPP_(x, FMHAI_DPP_ROW_ROR8);
    x += FMHAI_DPP_(x, FMHAI_DPP_ROW_ROR4);
    x += FMHAI_DPP_(x, FMHAI_DPP_QUAD_SWAP2);
    x += FMHAI_DPP_(x, FMHAI_DPP_QUAD_SWAP1);
    if (lanes > 16) x += FMHAI_SWZ_(x, FMHAI_SWIZZLE_XOR16);
    return x;
}

#endif /* FMHA_PLATFORM_AMD */
#endif /* FMHA_TILE_WAVE_MMA_H */
