/*
 * Architecture capabilities, for the device and for the host.
 *
 * Device side: macros that say which instructions the current compilation pass
 * may use (FMHAI_DEVICE_HAS_MMA_SM80 for mma.sync/ldmatrix/cp.async,
 * FMHAI_DEVICE_HAS_SM90A for wgmma/TMA/setmaxnreg, FMHAI_DEVICE_IS_GFX9 for
 * CDNA). A kernel body compiled in a pass without its instructions becomes an
 * empty function; the host never selects it there because selection asks the
 * runtime which binary version the kernel has for the running device.
 *
 * Host side: fmhai_arch_runs_on() says whether a kernel written for an arch
 * may run on a device of a given compute capability, and
 * fmhai_arch_name() gives the name used in kernel names and JSON.
 */
#ifndef FMHA_TILE_ARCH_H
#define FMHA_TILE_ARCH_H

#include "../api.h"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
#  define FMHAI_DEVICE_HAS_MMA_SM80 1
#endif
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#  define FMHAI_DEVICE_HAS_SM90A 1
#endif
#if defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__)
#  define FMHAI_DEVICE_IS_GFX9 1
#endif
/* The device's e4m3 (DESIGN: the platform owns the type): gfx942 stores
 * e4m3fnuz (exponent bias 8, 0x80 the only NaN), NVIDIA and gfx950 OCP
 * e4m3fn (bias 7). FP8 data handed to a gfx942 kernel is read as fnuz. */
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#  define FMHAI_DEVICE_E4M3_FNUZ 1
#endif

/* Device descriptor the selection works from (filled from the runtime). */
typedef struct fmhai_device {
    int is_amd;
    int cc;            /* NVIDIA: major*10+minor (90 for H100); AMD: gfx id in hex (0x942) */
    int smem_optin;    /* bytes of shared memory a block may opt in to */
    int sms;           /* multiprocessors (compute units on AMD) */
} fmhai_device;

static inline int fmhai_arch_runs_on(fmha_arch a, const fmhai_device *d)
{
    switch (a) {
    case FMHA_ARCH_SM80:  return !d->is_amd && d->cc >= 80;
    case FMHA_ARCH_SM90A: return !d->is_amd && d->cc == 90;
    case FMHA_ARCH_GFX9:  return d->is_amd && (d->cc == 0x90a || d->cc == 0x942 ||
                                               d->cc == 0x950);
    }
    return 0;
}

static inline const char *fmhai_arch_name(fmha_arch a)
{
    switch (a) {
    case FMHA_ARCH_SM80:  return "sm80";
    case FMHA_ARCH_SM90A: return "sm90a";
    case FMHA_ARCH_GFX9:  return "gfx9";
    }
    return "?";
}

#endif /* FMHA_TILE_ARCH_H */
