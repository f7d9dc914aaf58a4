"""jit_kernel_set.py - a kernel set declared from Python, compiled on the fly
(fmha_tile.jit) and used through kernels=.

    ks = fmha_tile.KernelSet([
        # family dtype  hdim mask    softcap      alibi      tile_m tile_n warps stages
        ("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128,   64,    4,    1),
    ])
    lib = ks.build()        # nvcc, once; later builds (any process) come from the cache
    o = fmha_tile.attention(q, k, v, causal=True, kernels=lib)

The rows have the columns and fmha_tile.ANY wildcards of the C macro
DECL_FMHA_KERNEL_SET and are checked by the library's own constraints
before nvcc runs (fmha_tile.InvalidRowError names the failed constraint).
build() compiles for the current GPU's arch (or $FMHA_TILE_ARCHS) into
$FMHA_TILE_CACHE (default ~/.cache/fmha_tile), keyed by the rows, the
library's sources, nvcc's version and the arch. The result is a
fmha_tile.Library whose set has exactly these kernels: a problem outside it
is refused (FmhaError NO_KERNEL), not served by some other kernel.

Shown: the one-row set, its kernel list, the plan naming that kernel, the
output against the fp32 reference, the refusal of an fp16 problem, a
second build() that compiles nothing, and an invalid row's error.
Needs nvcc and a C compiler: without them this prints SKIP and exits 0.
"""
import time

from _common import setup, main, Checker, reference, skip, TOL_BF16

ROW = ("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 1)


def run():
    torch, fmha_tile = setup("jit_kernel_set")
    from fmha_tile import jit, _lib
    try:
        jit.find_nvcc()
        jit.find_cc()
        archs = jit.default_archs()
    except jit.FmhaBuildError as e:
        skip("jit_kernel_set", str(e))
    c = Checker("jit_kernel_set")

    ks = fmha_tile.KernelSet([ROW])
    print("jit_kernel_set: %r, archs %s, cache %s" % (ks, " ".join(archs), jit.cache_dir()))
    t0 = time.time()
    lib = ks.build()                                   # progress lines on stderr
    print("jit_kernel_set: build() %.1f s -> %s" % (time.time() - t0, lib.path))
    names = [x["name"] for x in fmha_tile.kernels(kernels=lib)["kernels"]]
    print("jit_kernel_set: set %s: %s" % (fmha_tile.kernels(kernels=lib)["set"], " ".join(names)))
    c.true("one kernel in the set", len(names) == 1, str(len(names)))

    q = torch.randn(2, 300, 8, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(2, 333, 2, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(2, 333, 2, 128, dtype=torch.bfloat16, device="cuda")
    plan = fmha_tile.attention_plan(q, k, v, causal=True, kernels=lib)
    c.true("the plan picks the set's kernel", plan["kernel"] == names[0], plan["kernel"])
    o = fmha_tile.attention(q, k, v, causal=True, kernels=lib)
    c.close("bf16 causal through kernels=lib", o, reference(q, k, v, causal=True)[0], TOL_BF16)

    try:                                               # fp16: no row serves it
        fmha_tile.attention(q.half(), k.half(), v.half(), kernels=lib)
        c.true("fp16 refused (no kernel in the set)", False, "it ran")
    except fmha_tile.FmhaError as e:
        c.true("fp16 refused (no kernel in the set)", e.status == _lib.FMHA_ERR_NO_KERNEL,
               e.status_str)

    t0 = time.time()
    again = fmha_tile.KernelSet([ROW]).build(verbose=False)
    c.true("second build() of the same rows: the same library", again is lib,
           "%.3f s" % (time.time() - t0))

    try:                                               # tile_m 100 with 4 warps: invalid
        fmha_tile.KernelSet([ROW[:6] + (100, 64, 4, 1)]).validate()
        c.true("invalid row rejected", False, "accepted")
    except fmha_tile.InvalidRowError as e:
        c.true("invalid row rejected", True, "constraint " + e.constraint)
    c.finish()


if __name__ == "__main__":
    main(run)
