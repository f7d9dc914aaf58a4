/*
 * Tensor memory accelerator (TMA) copies and the mbarriers that track them,
 * for the Hopper (sm_90a) pipelines' load warpgroup.
 *
 * One thread issues a whole tile: cp.async.bulk.tensor copies a box of a
 * tensor described by a tensor map (built on the host, dispatch/tma.h, and
 * passed inside the kernel parameters, which must then be __grid_constant__)
 * into shared memory with the 128-byte swizzle of tile/warpgroup_mma.h: a
 * box of 128 bytes x rows lands as one [rows][128 bytes] column block. The
 * copy counts its bytes on an mbarrier; a thread that waits for the
 * barrier's phase sees the tile. Each mbarrier here has an arrival count of
 * one (the issuing thread's arrive.expect_tx), so a phase completes when
 * that arrival and every byte it announced are in.
 *
 *   fmhai_mbar_init(bar, count)          once, before any use (then a block
 *                                        or named barrier publishes it)
 *   fmhai_mbar_arrive(bar)               a plain arrival
 *   fmhai_mbar_expect_tx(bar, bytes)     the issuing thread's arrival
 *   fmhai_mbar_wait(bar, parity)         until phase `parity` has completed
 *   fmhai_tma_load4(dst, map, c0..c3, bar) one box at coordinates c0..c3
 *   fmhai_tma_load5(dst, map, c0..c4, bar) the same in five dimensions (the
 *                                        grouped 16-bit page maps)
 *   fmhai_bulk_load(dst, src, bytes, bar) a contiguous run of bytes (a
 *                                        multiple of 16, both ends 16-byte
 *                                        aligned), no tensor map
 *   fmhai_tma_store4(map, src, c0..c3)   one box from shared memory to the
 *                                        tensor (the threads' writes made
 *                                        visible first: fmhai_wg_fence_smem)
 *   fmhai_tma_store_wait_read()          close the stores issued so far into
 *                                        a group and wait until they have
 *                                        read their shared memory
 *
 * Everything here is NVIDIA sm_90a only; elsewhere the functions are empty.
 */
#ifndef FMHA_TILE_TMA_H
#define FMHA_TILE_TMA_H

#include "warp_mma.h"

#if defined(FMHA_PLATFORM_NVIDIA)

FMHAI_DEVICE void fmhai_mbar_init(fmhai_smem_t bar, int count)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n"
                 "fence.mbarrier_init.release.cluster;\n" :: "r"(bar), "r"(count) : "memory");
#else
    (void)bar; (void)count;
#endif
}

FMHAI_DEVICE void fmhai_mbar_arrive(fmhai_smem_t bar)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
#else
    (void)bar;
#endif
}

FMHAI_DEVICE void fmhai_mbar_expect_tx(fmhai_smem_t bar, int bytes)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
#else
    (void)bar; (void)bytes;
#endif
}

FMHAI_DEVICE void fmhai_mbar_wait(fmhai_smem_t bar, int parity)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
#else
    (void)bar; (void)parity;
#endif
}

/* map: the generic address of a tensor map in the kernel parameters */
FMHAI_DEVICE void fmhai_tma_load4(fmhai_smem_t dst, const void *map, int c0, int c1, int c2, int c3,
                                  fmhai_smem_t bar)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar) : "memory");
#else
    (void)dst; (void)map; (void)c0; (void)c1; (void)c2; (void)c3; (void)bar;
#endif
}

FMHAI_DEVICE void fmhai_tma_load5(fmhai_smem_t dst, const void *map, int c0, int c1, int c2, int c3, int c4,
                                  fmhai_smem_t bar)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar) : "memory");
#else
    (void)dst; (void)map; (void)c0; (void)c1; (void)c2; (void)c3; (void)c4; (void)bar;
#endif
}

FMHAI_DEVICE void fmhai_bulk_load(fmhai_smem_t dst, const void *src, int bytes, fmhai_smem_t bar)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
#else
    (void)dst; (void)src; (void)bytes; (void)bar;
#endif
}

FMHAI_DEVICE void fmhai_tma_store4(const void *map, fmhai_smem_t src, int c0, int c1, int c2, int c3)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
                 :: "l"(map), "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
#else
    (void)map; (void)src; (void)c0; (void)c1; (void)c2; (void)c3;
#endif
}

FMHAI_DEVICE void fmhai_tma_store_wait_read(void)
{
#if defined(FMHAI_DEVICE_HAS_SM90A)
    asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

#endif /* FMHA_PLATFORM_NVIDIA */
#endif /* FMHA_TILE_TMA_H */
