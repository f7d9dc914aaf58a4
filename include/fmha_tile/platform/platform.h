/*
 * Platform layer: one set of names over HIP (AMD) and CUDA (NVIDIA).
 *
 * The library is written against HIP's runtime names. On AMD the real HIP
 * runtime provides them; on NVIDIA this header maps the few the library uses
 * onto the CUDA runtime (the HIP 5.2 NVIDIA headers do not build against
 * CUDA 13, so the mapping is ours and deliberately small). A plain C or C++
 * host compiler (no device compiler) gets FMHA_PLATFORM_HOST_ONLY: the
 * registry, selection and validation compile, the kernels do not.
 *
 * Also here: warp width (32 on NVIDIA, 64 on CDNA; kernels that reason in
 * 32-lane groups use FMHAI_LANES = 32 and shuffle with width 32), shuffles
 * and the 16-bit float types.
 */
#ifndef FMHA_TILE_PLATFORM_H
#define FMHA_TILE_PLATFORM_H

#if defined(__HIPCC__) || defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#  define FMHA_PLATFORM_AMD 1
#elif defined(__CUDACC__)
#  define FMHA_PLATFORM_NVIDIA 1
#else
#  define FMHA_PLATFORM_HOST_ONLY 1
#endif

/* ---- C/C++ dialect helpers (nvcc and hipcc compile C++; tests compile C) - */
#ifdef __cplusplus
#  define FMHA_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#  define FMHA_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#if defined(__cplusplus)
#  define FMHAI_THREAD_LOCAL thread_local
#else
#  define FMHAI_THREAD_LOCAL _Thread_local
#endif

#if defined(FMHA_PLATFORM_AMD)
/* ---------------------------------------------------------------- AMD ---- */
#  if !defined(FMHA_AMD_DEVICE_CHECK_ONLY)
#    include <hip/hip_runtime.h>
#    include <hip/hip_fp16.h>
#    include <hip/hip_bf16.h>
#  endif
#  define FMHAI_DEVICE static __device__ __forceinline__
#  define FMHAI_WARP_SIZE 64
#  define FMHAI_GRID_CONSTANT
/* threads per block, and blocks per CU the registers must allow (HIP's own
 * __launch_bounds__ reads its second argument as waves per SIMD) */
#  define FMHAI_LAUNCH_BOUNDS(threads, blocks)                          \
    __attribute__((amdgpu_flat_work_group_size(1, threads),              \
                   amdgpu_waves_per_eu(((blocks) * (((threads) + 63) / 64) + 3) / 4)))
/* HIP has no ...MaxSharedMemoryPerBlockOptin (CUDA's name); on AMD a block may
 * use the per-block maximum (64 KB on gfx90a/gfx942) without opting in. */
#  define hipDeviceAttributeMaxSharedMemoryPerBlockOptin hipDeviceAttributeMaxSharedMemoryPerBlock
#elif defined(FMHA_PLATFORM_NVIDIA)
/* ------------------------------------------------------------- NVIDIA ---- */
#  include <cuda_runtime.h>
#  include <cuda_fp16.h>
#  include <cuda_bf16.h>
#  include <string.h>
#  define FMHAI_DEVICE static __device__ __forceinline__
#  define FMHAI_WARP_SIZE 32
/* kernel parameters read in place (no local copy when their address is taken) */
#  define FMHAI_GRID_CONSTANT __grid_constant__
#  define FMHAI_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaFuncAttributes hipFuncAttributes;
#  define hipSuccess cudaSuccess
#  define hipGetDevice cudaGetDevice
#  define hipDeviceGetAttribute cudaDeviceGetAttribute
#  define hipDeviceAttributeComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#  define hipDeviceAttributeComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor
#  define hipDeviceAttributeMaxSharedMemoryPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#  define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#  define hipFuncGetAttributes cudaFuncGetAttributes
#  define hipFuncSetAttribute cudaFuncSetAttribute
#  define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#  define hipGetLastError cudaGetLastError
#  define hipGetErrorString cudaGetErrorString
#  define hipLaunchKernel cudaLaunchKernel
#  define hipMemcpyAsync cudaMemcpyAsync
#  define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#  define hipStreamSynchronize cudaStreamSynchronize
/* backward workspace preparation (stream-ordered copies, host callbacks) */
typedef cudaHostFn_t hipHostFn_t;
#  define hipMemsetAsync cudaMemsetAsync
#  define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#  define hipLaunchHostFunc cudaLaunchHostFunc
#endif

/* FMHA_TILE_SETS_ONLY: a translation unit that only declares kernel sets for
 * API calls another unit of the same binary makes (the shared library's part
 * units) leaves the helper kernels (split-KV combine, append-KV) to that
 * unit, so that no kernel is built twice. */
#if !defined(FMHA_PLATFORM_HOST_ONLY) && !defined(FMHA_TILE_SETS_ONLY)
#  define FMHAI_AUX_KERNELS 1
#endif

/* Lanes in the groups the kernels reason about (an NVIDIA warp; half a wave64). */
#define FMHAI_LANES 32

#if !defined(FMHA_PLATFORM_HOST_ONLY)
/* Butterfly exchange inside a 32-lane group. HIP's __shfl_xor has no mask. */
FMHAI_DEVICE float fmhai_shfl_xor(float v, int lane_mask)
{
#  if defined(FMHA_PLATFORM_NVIDIA)
    return __shfl_xor_sync(0xffffffffu, v, lane_mask, 32);
#  else
    return __shfl_xor(v, lane_mask, 32);
#  endif
}

/* Number of lanes of the 32-lane group whose x is non-zero. */
FMHAI_DEVICE int fmhai_count_lanes(int x)
{
#  if defined(FMHA_PLATFORM_NVIDIA)
    return __popc(__ballot_sync(0xffffffffu, x));
#  else
    return __popcll(__ballot(x) >> (__lane_id() & 32) & 0xffffffffull);
#  endif
}

FMHAI_DEVICE float fmhai_exp2(float x)
{
#  if defined(FMHA_PLATFORM_NVIDIA)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#  else
    return __builtin_amdgcn_exp2f(x);
#  endif
}

/* Programmatic dependent launch (sm_90+): a kernel launched with
 * fmhai_launch_dependent may start while the kernel before it in the stream
 * is still running (its launch and prologue hidden behind that kernel's
 * tail); it calls fmhai_pdl_wait() before reading what that kernel wrote,
 * which returns once the earlier grid has completed and its writes are
 * visible. fmhai_pdl_trigger() lets the dependent start before this grid's
 * blocks have exited. Both are no-ops where the pass has no such
 * instructions (older archs, AMD) and in a kernel launched normally. */
FMHAI_DEVICE void fmhai_pdl_wait(void)
{
#  if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#  endif
}
FMHAI_DEVICE void fmhai_pdl_trigger(void)
{
#  if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#  endif
}

/* Launch fn as a programmatic dependent of the stream's previous kernel when
 * `dependent` (NVIDIA; the caller has checked that fn's binary waits with
 * fmhai_pdl_wait), else as a plain launch. */
static inline hipError_t fmhai_launch_dependent(const void *fn, dim3 grid, dim3 block, void **args, size_t smem,
                                                hipStream_t stream, int dependent)
{
#  if defined(FMHA_PLATFORM_NVIDIA)
    if (dependent) {
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute at[1];
        memset(&cfg, 0, sizeof cfg);
        memset(at, 0, sizeof at);
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.gridDim = grid;
        cfg.blockDim = block;
        cfg.dynamicSmemBytes = smem;
        cfg.stream = stream;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        return cudaLaunchKernelExC(&cfg, fn, args);
    }
#  endif
    (void)dependent;
    return hipLaunchKernel(fn, grid, block, args, smem, stream);
}
#endif /* !FMHA_PLATFORM_HOST_ONLY */

#endif /* FMHA_TILE_PLATFORM_H */
