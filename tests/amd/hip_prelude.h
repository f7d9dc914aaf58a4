/*
 * Minimal stand-in for the HIP headers, for the AMD compile check
 * (tests/amd/check.sh) on machines without a HIP installation:
 *     clang++-19 -x hip --offload-arch=gfx942 --cuda-device-only
 *       --no-gpu-bundle-output -nogpulib -nogpuinc -c
 *       -DFMHA_AMD_DEVICE_CHECK_ONLY -include tests/amd/hip_prelude.h
 * (and the same with --cuda-host-only for the host pass). It declares what
 * the library uses, defined the way HIP defines it where that matters for
 * code generation: shuffles through ds_bpermute, __launch_bounds__ as
 * amdgpu_flat_work_group_size + amdgpu_waves_per_eu (HIP's meaning of the
 * second argument: minimum waves per SIMD), __syncthreads with its
 * workgroup fences; plus the host runtime declarations that registry.h and
 * kernel/fwd.h need (host functions, declared only). Nothing here is linked
 * or run: it is not a HIP runtime.
 *
 * FMHA_AMD_CHECK_LB_AS_BLOCKS (experiment, off by default): read the second
 * __launch_bounds__ argument as CUDA's minimum blocks per CU instead.
 */
#ifndef FMHA_TILE_TESTS_HIP_PRELUDE_H
#define FMHA_TILE_TESTS_HIP_PRELUDE_H

#if !defined(__HIP__)
#  error "hip_prelude.h is for clang -x hip"
#endif

#include <stddef.h>
#include <stdint.h>
#include <math.h>

/* ---- attributes (as in HIP's host_defines.h) ------------------------------ */
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))

/* HIP's __launch_bounds__ (amd_hip_runtime.h): the second argument becomes
 * amdgpu_waves_per_eu (minimum waves per SIMD), not CUDA's "minimum blocks
 * per multiprocessor". */
#define __fmhap_lb0(t) __attribute__((amdgpu_flat_work_group_size(1, t)))
#if defined(FMHA_AMD_CHECK_LB_AS_BLOCKS)
/* Experiment: what CUDA's meaning (m blocks of t threads per CU, 4 SIMDs per
 * CU) would give: waves per SIMD = ceil(m * ceil(t / 64) / 4). */
#  define __fmhap_lb1(t, m)                                 \
    __attribute__((amdgpu_flat_work_group_size(1, t),      \
                   amdgpu_waves_per_eu(((m) * (((t) + 63) / 64) + 3) / 4)))
#else
#  define __fmhap_lb1(t, m) \
    __attribute__((amdgpu_flat_work_group_size(1, t), amdgpu_waves_per_eu(m)))
#endif
#define __fmhap_lb_sel(_1, _2, name, ...) name
#define __launch_bounds__(...) \
    __fmhap_lb_sel(__VA_ARGS__, __fmhap_lb1, __fmhap_lb0, ~)(__VA_ARGS__)

#ifndef __HIP_PLATFORM_AMD__
#  define __HIP_PLATFORM_AMD__ 1
#endif
/* wave64 on CDNA (gfx90a, gfx942); the kernels reason in 32-lane groups */
static constexpr int warpSize = 64;

/* ---- built-in variables ---------------------------------------------------- */
struct __fmhap_thread_idx {
    __declspec(property(get = __gx)) unsigned x;
    __declspec(property(get = __gy)) unsigned y;
    __declspec(property(get = __gz)) unsigned z;
    static __device__ __forceinline__ unsigned __gx() { return __builtin_amdgcn_workitem_id_x(); }
    static __device__ __forceinline__ unsigned __gy() { return __builtin_amdgcn_workitem_id_y(); }
    static __device__ __forceinline__ unsigned __gz() { return __builtin_amdgcn_workitem_id_z(); }
};
struct __fmhap_block_idx {
    __declspec(property(get = __gx)) unsigned x;
    __declspec(property(get = __gy)) unsigned y;
    __declspec(property(get = __gz)) unsigned z;
    static __device__ __forceinline__ unsigned __gx() { return __builtin_amdgcn_workgroup_id_x(); }
    static __device__ __forceinline__ unsigned __gy() { return __builtin_amdgcn_workgroup_id_y(); }
    static __device__ __forceinline__ unsigned __gz() { return __builtin_amdgcn_workgroup_id_z(); }
};
struct __fmhap_block_dim {
    __declspec(property(get = __gx)) unsigned x;
    __declspec(property(get = __gy)) unsigned y;
    __declspec(property(get = __gz)) unsigned z;
    static __device__ __forceinline__ unsigned __gx() { return __builtin_amdgcn_workgroup_size_x(); }
    static __device__ __forceinline__ unsigned __gy() { return __builtin_amdgcn_workgroup_size_y(); }
    static __device__ __forceinline__ unsigned __gz() { return __builtin_amdgcn_workgroup_size_z(); }
};
struct __fmhap_grid_dim {
    __declspec(property(get = __gx)) unsigned x;
    __declspec(property(get = __gy)) unsigned y;
    __declspec(property(get = __gz)) unsigned z;
    static __device__ __forceinline__ unsigned __gx() { return __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(); }
    static __device__ __forceinline__ unsigned __gy() { return __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(); }
    static __device__ __forceinline__ unsigned __gz() { return __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z(); }
};
extern const __device__ __attribute__((weak)) __fmhap_grid_dim gridDim;
extern const __device__ __attribute__((weak)) __fmhap_thread_idx threadIdx;
extern const __device__ __attribute__((weak)) __fmhap_block_idx blockIdx;
extern const __device__ __attribute__((weak)) __fmhap_block_dim blockDim;

struct dim3 {
    unsigned x, y, z;
    __host__ __device__ constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1)
        : x(x_), y(y_), z(z_) {}
};

/* ---- vector types ------------------------------------------------------------ */
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) float2 { float x, y; };
static __device__ __forceinline__ float2 make_float2(float x, float y) { float2 v = { x, y }; return v; }
static __device__ __forceinline__ uint2 make_uint2(unsigned x, unsigned y) { uint2 v = { x, y }; return v; }

/* ---- barriers and lanes ---------------------------------------------------------- */
static __device__ __forceinline__ void __syncthreads(void)
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
static __device__ __forceinline__ void __threadfence_block(void)
{
    __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
}
static __device__ __forceinline__ unsigned __lane_id(void)
{
    return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
static __device__ __forceinline__ unsigned long long __ballot(int predicate)
{
    return __builtin_amdgcn_ballot_w64(predicate != 0);
}
static __device__ __forceinline__ int __popcll(unsigned long long x) { return __builtin_popcountll(x); }

/* ---- atomics (HIP's amd_hip_atomic.h: relaxed, device scope) ------------------------- */
static __device__ __forceinline__ float atomicAdd(float *p, float v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}

/* ---- bit casts --------------------------------------------------------------------- */
static __host__ __device__ __forceinline__ unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
static __host__ __device__ __forceinline__ int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
static __host__ __device__ __forceinline__ float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
static __host__ __device__ __forceinline__ float __int_as_float(int x) { return __builtin_bit_cast(float, x); }

/* ---- shuffles (HIP's amd_warp_functions.h) ---------------------------------------------- */
static __device__ __forceinline__ int __shfl(int var, int src_lane, int width = warpSize)
{
    int self = (int)__lane_id();
    int index = (src_lane & (width - 1)) + (self & ~(width - 1));
    return __builtin_amdgcn_ds_bpermute(index << 2, var);
}
static __device__ __forceinline__ unsigned __shfl(unsigned var, int src_lane, int width = warpSize)
{
    return (unsigned)__shfl((int)var, src_lane, width);
}
static __device__ __forceinline__ float __shfl(float var, int src_lane, int width = warpSize)
{
    return __int_as_float(__shfl(__float_as_int(var), src_lane, width));
}
static __device__ __forceinline__ int __shfl_xor(int var, int lane_mask, int width = warpSize)
{
    int self = (int)__lane_id();
    int index = self ^ lane_mask;
    index = index >= ((self + width) & ~(width - 1)) ? self : index;
    return __builtin_amdgcn_ds_bpermute(index << 2, var);
}
static __device__ __forceinline__ float __shfl_xor(float var, int lane_mask, int width = warpSize)
{
    return __int_as_float(__shfl_xor(__float_as_int(var), lane_mask, width));
}

/* ---- 16-bit floats ------------------------------------------------------------------------ */
typedef _Float16 __half;
struct __hip_bfloat16 { unsigned short data; };
static __host__ __device__ __forceinline__ __half __float2half_rn(float x) { return (__half)x; }
static __host__ __device__ __forceinline__ float __half2float(__half x) { return (float)x; }
static __host__ __device__ __forceinline__ __half __ushort_as_half(unsigned short x) { return __builtin_bit_cast(__half, x); }
static __host__ __device__ __forceinline__ unsigned short __half_as_ushort(__half x) { return __builtin_bit_cast(unsigned short, x); }

/* ---- integer min/max (HIP's device overloads) ---------------------------------------------------- */
static __host__ __device__ __forceinline__ int min(int a, int b) { return a < b ? a : b; }
static __host__ __device__ __forceinline__ int max(int a, int b) { return a > b ? a : b; }
static __host__ __device__ __forceinline__ unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static __host__ __device__ __forceinline__ unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static __host__ __device__ __forceinline__ long long min(long long a, long long b) { return a < b ? a : b; }
static __host__ __device__ __forceinline__ long long max(long long a, long long b) { return a > b ? a : b; }

/* ---- float math: device overloads of the libm names (HIP maps them to ocml;
 * ocml is not available here, so builtins / a close stand-in) ------------------------------------ */
static __device__ __forceinline__ float fabsf(float x) { return __builtin_fabsf(x); }
static __device__ __forceinline__ float rintf(float x) { return __builtin_rintf(x); }
static __device__ __forceinline__ float fmaxf(float x, float y) { return __builtin_fmaxf(x, y); }
static __device__ __forceinline__ float fminf(float x, float y) { return __builtin_fminf(x, y); }
static __device__ __forceinline__ float sqrtf(float x) { return __builtin_sqrtf(x); }
static __device__ __forceinline__ float logf(float x) { return __builtin_logf(x); }
static __device__ __forceinline__ float log2f(float x) { return __builtin_log2f(x); }
static __device__ __forceinline__ float expf(float x) { return __builtin_expf(x); }
static __device__ __forceinline__ float exp2f(float x) { return __builtin_exp2f(x); }
/* LLVM has no AMDGPU lowering (nor libcall) for tanh; ocml's __ocml_tanh_f32 is
 * an exp-based evaluation of similar cost: tanh|x| = 1 - 2 / (exp(2|x|) + 1). */
static __device__ __forceinline__ float tanhf(float x)
{
    float ax = __builtin_fabsf(x);
    float e = __builtin_amdgcn_exp2f(ax * 2.8853900817779268f);   /* 2 * log2(e) */
    float r = 1.f - 2.f * __builtin_amdgcn_rcpf(e + 1.f);
    return __builtin_copysignf(r, x);
}

/* ---- host runtime declarations (type-checked by the device pass; never called) ----------------- */
typedef enum hipError_t { hipSuccess = 0, hipErrorInvalidValue = 1 } hipError_t;
typedef struct ihipStream_t *hipStream_t;
typedef enum hipDeviceAttribute_t {
    hipDeviceAttributeComputeCapabilityMajor,
    hipDeviceAttributeComputeCapabilityMinor,
    hipDeviceAttributeMaxSharedMemoryPerBlock,
    hipDeviceAttributeSharedMemPerBlockOptin,
    hipDeviceAttributeMultiprocessorCount,
    hipDeviceAttributeWarpSize
} hipDeviceAttribute_t;
typedef enum hipFuncAttribute {
    hipFuncAttributeMaxDynamicSharedMemorySize = 8,
    hipFuncAttributePreferredSharedMemoryCarveout = 9
} hipFuncAttribute;
typedef struct hipFuncAttributes {
    int binaryVersion, cacheModeCA;
    size_t constSizeBytes, localSizeBytes;
    int maxDynamicSharedSizeBytes, maxThreadsPerBlock, numRegs, preferredShmemCarveout, ptxVersion;
    size_t sharedSizeBytes;
} hipFuncAttributes;
typedef struct hipDeviceProp_t {
    char name[256];
    char gcnArchName[256];
    size_t sharedMemPerBlock;
    int warpSize, major, minor, multiProcessorCount;
} hipDeviceProp_t;

extern "C" {
__host__ hipError_t hipGetDevice(int *device);
__host__ hipError_t hipDeviceGetAttribute(int *value, hipDeviceAttribute_t attr, int device);
__host__ hipError_t hipGetDeviceProperties(hipDeviceProp_t *prop, int device);
__host__ hipError_t hipFuncGetAttributes(hipFuncAttributes *attr, const void *func);
__host__ hipError_t hipFuncSetAttribute(const void *func, hipFuncAttribute attr, int value);
__host__ hipError_t hipLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                                    size_t shared_bytes, hipStream_t stream);
__host__ hipError_t hipGetLastError(void);
typedef enum hipMemcpyKind { hipMemcpyHostToDevice = 1, hipMemcpyDeviceToHost = 2 } hipMemcpyKind;
__host__ hipError_t hipMemcpyAsync(void *dst, const void *src, size_t bytes, hipMemcpyKind kind,
                                   hipStream_t stream);
__host__ hipError_t hipStreamSynchronize(hipStream_t stream);
typedef void (*hipHostFn_t)(void *user_data);
__host__ hipError_t hipMemsetAsync(void *dst, int value, size_t bytes, hipStream_t stream);
__host__ hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void *user_data);
__host__ hipError_t hipPeekAtLastError(void);
__host__ const char *hipGetErrorString(hipError_t err);
__host__ hipError_t hipDeviceSynchronize(void);
}

#endif /* FMHA_TILE_TESTS_HIP_PRELUDE_H */
