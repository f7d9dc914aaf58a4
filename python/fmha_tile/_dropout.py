"""Dropout's random numbers: the Philox seed and offset of a call, taken from
PyTorch's CUDA generator so that torch.manual_seed() (or a generator's
manual_seed) reproduces a training run.

The kernels draw element (i, j) of head h, batch entry b from Philox4x32-7
with counter (j & ~9, i & ~9, b * nhead + h, offset mod 2^32) and key seed
plus (offset >> 32) in its high word (include/fmha_tile/tile/philox.h,
fmha_tile.philox), so two calls draw independent masks when their (seed,
offset) differ. A call takes

    seed   = generator.initial_seed()   (what manual_seed set)
    offset = generator.get_offset() with bit 63 set (philox.kernel_offset:
             a key no torch random op uses with this seed, so dropout never
             shares a Philox draw with them)

and advances the generator by OFFSET_INCREMENT (4: the smallest step the
CUDA generator accepts; set_offset needs a multiple of 4, and
philox_cuda_state() rounds every consumer's increment up to one). The
counter already spans every (b, h, i, j), so one offset per call is enough;
the next attention call or any other random op of torch then starts past
it. The backward redraws the mask from the same (seed, offset), saved for
it (the mask itself is never stored).

Where the generator cannot be read on the host, the values go to the
kernels through a device tensor (fmha_fwd_args.dropout_rng, two int64
{seed, offset} read when the kernel runs):
  - under CUDA graph capture (torch.cuda.graph): get_offset (and, in some
    versions, initial_seed) refuse to run while capturing, and a value read
    at capture would be replayed unchanged, so the pair is drawn on the device by a
    torch random op (torch.randint with the generator), which is itself
    graph-safe: every replay draws a fresh pair, and torch.manual_seed
    before the replays reproduces them;
  - under torch.compile tracing (fmha_tile.ops / compat wrappers): the same
    device draw, so the compiled graph holds a random op instead of a seed
    and offset frozen in as constants.
Generators without get_offset/set_offset (PyTorch < 2.1) raise a clear
RuntimeError for dropout_p > 0.
"""

from . import philox

OFFSET_INCREMENT = 4
U64_MASK = 2 ** 64 - 1
# device draws: each of seed and offset uniform in [0, 2^62)
_DEVICE_DRAW_HIGH = 2 ** 62


def is_compiling(torch):
    """True while torch.compile (Dynamo) traces the calling code."""
    compiler = getattr(torch, "compiler", None)
    f = getattr(compiler, "is_compiling", None)
    if f is None:
        f = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return bool(f()) if f is not None else False


def is_capturing(torch):
    """True while the current CUDA stream (of the current device) is captured."""
    f = getattr(torch.cuda, "is_current_stream_capturing", None)
    return bool(f()) if f is not None else False


def generator_for(torch, device, generator=None):
    """The CUDA generator a call on device draws from: generator (a
    torch.Generator on that CUDA device) or the device's default one."""
    if generator is None:
        index = getattr(device, "index", None)
        if index is None:
            index = torch.cuda.current_device()
        return torch.cuda.default_generators[index]
    gdev = getattr(generator, "device", None)
    if gdev is None or not hasattr(generator, "initial_seed"):
        raise TypeError("generator must be a torch.Generator on q's CUDA device or None, got %r"
                        % (generator,))
    if getattr(gdev, "type", None) != "cuda":
        raise ValueError("generator is on %s: dropout needs a CUDA generator (torch.Generator("
                         "device=%r)) on q's device" % (gdev, str(device)))
    gi, di = getattr(gdev, "index", None), getattr(device, "index", None)
    if gi is not None and di is not None and gi != di:
        raise ValueError("generator is on %s but q is on %s" % (gdev, device))
    return generator


def host_seed_offset(torch, device, generator=None):
    """(seed, offset) of one call from the generator (the offset as the
    kernels get it, philox.kernel_offset), the generator advanced by
    OFFSET_INCREMENT. Not under graph capture (the generator refuses)."""
    gen = generator_for(torch, device, generator)
    get_offset = getattr(gen, "get_offset", None)
    set_offset = getattr(gen, "set_offset", None)
    if get_offset is None or set_offset is None:
        raise RuntimeError(
            "fmha_tile: dropout_p > 0 needs torch.Generator.get_offset/set_offset (PyTorch >= 2.1; "
            "found %s) to take its Philox seed and offset from torch's generator"
            % getattr(torch, "__version__", "an unknown version"))
    seed = int(gen.initial_seed()) & U64_MASK
    offset = int(get_offset())
    set_offset(offset + OFFSET_INCREMENT)
    return seed, philox.kernel_offset(offset)


def device_seed_offset(torch, device, generator=None):
    """A device int64 tensor [seed, offset] drawn by a torch random op (graph
    capture and torch.compile tracing)."""
    kw = {"dtype": torch.int64, "device": device}
    if generator is not None:
        kw["generator"] = generator_for(torch, device, generator)
    return torch.randint(0, _DEVICE_DRAW_HIGH, (2,), **kw)


def draw(torch, device, generator=None):
    """-> (seed, offset, rng) for one dropout call on device: ints and None
    on the host path, (0, 0, the device tensor) under capture or tracing.
    The caller has made device current (the capture check reads the
    current device's stream)."""
    if is_compiling(torch) or is_capturing(torch):
        return 0, 0, device_seed_offset(torch, device, generator)
    seed, offset = host_seed_offset(torch, device, generator)
    return seed, offset, None


def setup(torch, p, device, generator=None):
    """Fill problem p's dropout seed/offset (or rng tensor) for one call when
    p has dropout; a problem without dropout leaves the generator alone."""
    if not p.dropout:
        return
    with torch.cuda.device(device):
        seed, offset, rng = draw(torch, device, generator)
    p.set_dropout_rng(seed, offset, rng)


def to_i64(x):
    """A 64-bit pattern as a signed int64 (what an int in a torch op schema
    carries): seeds can reach 2^64 - 1."""
    x &= U64_MASK
    return x - 2 ** 64 if x >= 2 ** 63 else x


def op_args(torch, device, dropout_p, generator=None):
    """(dropout_seed, dropout_offset, dropout_rng) for the custom ops
    (fmha_tile.ops): (0, 0, None) without dropout; a device draw while
    torch.compile traces or a graph is captured; else the generator's seed
    and offset (as signed int64s: their bit patterns)."""
    if not dropout_p:
        return 0, 0, None
    if is_compiling(torch):
        return 0, 0, device_seed_offset(torch, device, generator)
    with torch.cuda.device(device):
        seed, offset, rng = draw(torch, device, generator)
    return to_i64(seed), to_i64(offset), rng
