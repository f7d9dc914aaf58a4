/*
 * fmha_tile: fused multi-head attention kernels, header-only, C style.
 *
 * Include this header in one of your HIP (AMD) or CUDA (NVIDIA, `nvcc -x cu`)
 * translation units, declare the kernels you want, and call the C API:
 *
 *     #include "fmha_tile.h"
 *     #define MY_KERNELS(X) \
 *         X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
 *     DECL_FMHA_KERNEL_SET(my_kernels, MY_KERNELS)
 *     ...
 *     fmha_status st = fmha_fwd(&my_kernels, &args, stream);
 *
 * Manual
 * ------
 * Macros (expand to code):
 *   DECL_FMHA_KERNEL_SET(name, LIST)   static const fmha_kernel_set name;
 *                                      plus the kernels of every row of LIST
 *   LIST(X) expands to rows X(family, dtype, hdim, mask, softcap, alibi or page,
 *                              tile_m, tile_n, warps, stages)
 *   FMHA_DEFAULT_FWD_SET(X)            every forward row the library tunes
 *   FMHA_DEFAULT_FWD_FP8_SET(X)        the e4m3 forward's rows (Hopper only)
 *   FMHA_DEFAULT_PREFILL_SET(X)        batch prefill (both layouts, fp8 KV)
 *   FMHA_DEFAULT_DECODE_SET(X)         decode with split-KV (contiguous and
 *                                      paged caches, fp8 KV)
 *   FMHA_ANY                           wildcard for tile_m, tile_n, warps, stages
 *
 * Columns:
 *   family   FWD | PREFILL | PREFILL_VEC (batch prefill over LINEAR /
 *            VECTORIZED KV pages) | DECODE | DECODE_VEC (decode with
 *            split-KV over a contiguous cache or LINEAR pages / VECTORIZED
 *            pages); the backward has its own sets (dispatch/bwd_set.h);
 *            append-KV joins later
 *   dtype    FP16 | BF16 (PREFILL also FP8: e4m3 KV, bf16 or e4m3 queries,
 *            portable pipeline, and wildcard rows add wgmma e4m3 kernels for
 *            e4m3 queries on sm_90a; FWD wildcard rows also FP8: e4m3 Q/K/V,
 *            bf16 O, wgmma, sm_90a)
 *   hdim     kernel head dim 64 | 128 | 192 | 256; a problem of head dim d
 *            (a multiple of 8) runs on the smallest kernel hdim >= d; or
 *            192_128 (FWD and the backward families, 16-bit): hdim_q 192
 *            with hdim_v 128 (DeepSeek MLA), serving hdim_q <= 192 with
 *            hdim_v <= 128
 *   mask     NOMASK | MASK      MASK kernels take any window/causal mask and
 *                               either alignment at run time
 *   softcap  NOSOFTCAP | SOFTCAP
 *   alibi    NOALIBI | ALIBI | BIAS  (FWD, BWD, BWD_DET; BIAS: the
 *            elementwise bias, fmha_fwd_args.bias, and in the backward
 *            its gradient dbias); PREFILL and DECODE rows have the
 *            page column here: smallest page size served (DECODE: 0 is a
 *            contiguous cache), FMHA_ANY for the tuned classes; decode
 *            kernels take ALiBi at run time and a SOFTCAP decode kernel
 *            serves problems without a soft cap too
 *   tile_m   query rows per block: 16 or 32 per warp
 *   tile_n   keys per step: a multiple of 16, at most 128
 *   warps    1..8
 *   stages   K/V staging depth, 1..3
 *   (explicit rows build the portable pipeline; the Hopper wgmma rows of
 *   FWD wildcards and of PREFILL / PREFILL_VEC wildcards have their
 *   own shapes, FMHAI_FWD90_CONSTRAINTS, and one Hopper prefill kernel serves
 *   every page size; which problems they serve: FMHAI_FWD90_SERVES, the
 *   fallback rule, and fmha_fwd_plan.why says which pipeline ran and why)
 * A wildcard expands at compile time into the tuned rows of
 * include/fmha_tile/policy/fwd_tiles.h for the platform's archs, the family
 * and the head dim, keeping those that match the columns given explicitly. A
 * row without wildcards is built as written; a row that breaks a constraint
 * stops the build with "fmha_tile constraint <name> violated: <why>".
 *
 * Functions (include/fmha_tile/api.h): fmha_fwd, fmha_fwd_check,
 * fmha_fp8_v_kmajor, fmha_batch_prefill[_check], fmha_decode_plan_make, fmha_decode_run,
 * fmha_decode, fmha_appendkv, the backward's fmha_bwd_*,
 * fmha_set_size, fmha_set_kernel, fmha_set_json, fmha_status_str,
 * fmha_last_error. Selection rules: include/fmha_tile/dispatch/registry.h.
 *
 * Layers (one folder each under include/fmha_tile/):
 *   api.h      C11 host API        platform/  HIP names over CUDA
 *   arch/      capabilities        tile/      warp tile primitives
 *   pipeline/  block pipelines     policy/    tuned tile tables + constraints
 *   kernel/    family host code    dispatch/  kernel sets, selection, JSON
 */
#ifndef FMHA_TILE_H
#define FMHA_TILE_H

#ifndef FMHA_API
#  if defined(FMHA_TILE_BUILD_SHARED)
#    define FMHA_API extern "C" __attribute__((visibility("default")))
#  else
#    define FMHA_API static inline
#  endif
#endif

#include "fmha_tile/api.h"
#include "fmha_tile/platform/platform.h"
#include "fmha_tile/arch/arch.h"
#if !defined(FMHA_PLATFORM_HOST_ONLY)
#  include "fmha_tile/tile/warp_mma.h"
#  include "fmha_tile/pipeline/fwd_portable.h"
#  include "fmha_tile/pipeline/fwd_sm90.h"
#endif
#if defined(FMHA_PLATFORM_AMD)
#  include "fmha_tile/pipeline/fwd_mfma.h"
#endif
#include "fmha_tile/policy/fwd_tiles.h"
#include "fmha_tile/kernel/fwd.h"
#include "fmha_tile/dispatch/registry.h"
#include "fmha_tile/dispatch/kernel_set.h"
#include "fmha_tile/kernel/fp8_vt.h"   /* fmha_fp8_v_kmajor: V^T for the e4m3 forward */

/* backward: dot_do_o, dq_dk_dv, convert_dq (fmha_bwd_plan_make, fmha_bwd) */
#if !defined(FMHA_PLATFORM_HOST_ONLY)
#  include "fmha_tile/pipeline/bwd_portable.h"
#  include "fmha_tile/pipeline/bwd_sm90.h"
#endif
#if defined(FMHA_PLATFORM_AMD)
#  include "fmha_tile/pipeline/bwd_mfma.h"
#endif
#include "fmha_tile/policy/bwd_tiles.h"
#include "fmha_tile/kernel/bwd.h"
#include "fmha_tile/dispatch/bwd_dispatch.h"
#include "fmha_tile/dispatch/bwd_set.h"

/* decode with split-KV: split ranges, heuristic, workspace; the combine
 * kernel; plans (fmha_decode_plan_make, fmha_decode_run, fmha_decode) */
#include "fmha_tile/dispatch/splitkv.h"
#include "fmha_tile/kernel/decode.h"
#include "fmha_tile/kernel/combine.h"
#include "fmha_tile/dispatch/decode_dispatch.h"

#endif /* FMHA_TILE_H */
