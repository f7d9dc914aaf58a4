"""The dropout rule of the kernels, in Python: which elements of P a call with
a given Philox seed and offset keeps (include/fmha_tile/tile/philox.h).

    import torch, fmha_tile
    gen = torch.cuda.default_generators[q.device.index]
    seed, offset = gen.initial_seed(), gen.get_offset()      # before the call
    o = fmha_tile.attention(q, k, v, dropout_p=0.1)
    keep = fmha_tile.philox.keep_mask(seed, fmha_tile.philox.kernel_offset(offset),
                                      b * h, s_q, s_k, 0.1)  # [b*h, s_q, s_k] bool
    # o == ((softmax(q k^T * scale) * keep * philox.keep_scale(0.1)) @ v) up to rounding

The rule: element (i, j) of head h in batch entry b (group mode: sequence b,
i and j counted within it) takes byte 8*i3 + 4*i0 + 2*j3 + j0 (i3: bit 3 of
i, ...) of the 16 bytes (four 32-bit words, little-endian) of
Philox4x32-7 (DROPOUT_ROUNDS, as FlashAttention-2 and CK Tile) with
counter (j & ~9, i & ~9, b * nhead_q + h, offset mod 2^32) and key
(seed mod 2^32, (seed >> 32) + (offset >> 32) mod 2^32). It is kept when
that byte is >= threshold(p) = round(p * 256) (computed in fp32 as the C
code does, at most 255), and a kept value is scaled by
256 / (256 - threshold).

The offset the kernels get is the generator's with bit 63 set
(kernel_offset()): torch's own random ops draw Philox4x32-10 with key
(seed mod 2^32, seed >> 32) and their thread index in counter words 2 and 3,
so a dropout call at a generator offset that is 0 mod 2^32 would otherwise
draw some of the very words a later torch random op draws; with the bit,
the dropout key's high word differs from theirs for every offset below
2^63, and the two never share a draw.

A host reference for tests and for checking a training run: philox4x32()
works on Python ints; keep_mask() computes whole masks with int64 torch ops
(on any device; CPU by default). Neither is used on the kernels' path.
"""
import struct

M32 = 0xFFFFFFFF
M64 = 2 ** 64 - 1
KERNEL_OFFSET_BIT = 1 << 63
_MUL = (0xD2511F53, 0xCD9E8D57)
_WEYL = (0x9E3779B9, 0xBB67AE85)
DROPOUT_ROUNDS = 7   # the kernels' FMHAI_DROPOUT_ROUNDS (include/fmha_tile/tile/philox.h)


def philox4x32(ctr, key, rounds=DROPOUT_ROUNDS):
    """Philox4x32 with `rounds` rounds on Python ints: ctr 4 words, key 2
    words -> 4 words."""
    c0, c1, c2, c3 = (int(x) & M32 for x in ctr)
    k0, k1 = (int(x) & M32 for x in key)
    for _ in range(rounds):
        p0 = _MUL[0] * c0
        p1 = _MUL[1] * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32)
        k0 = (k0 + _WEYL[0]) & M32
        k1 = (k1 + _WEYL[1]) & M32
    return c0, c1, c2, c3


def kernel_offset(generator_offset):
    """The Philox offset the kernels get for a call made at this offset of
    torch's CUDA generator: bit 63 set (see the module docstring)."""
    return (int(generator_offset) | KERNEL_OFFSET_BIT) & M64


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def threshold(p):
    """The keep threshold of drop probability p: round(p * 256) as the C
    code computes it in fp32 (p * 256 + 0.5 truncated), clamped to 0..255."""
    t = _f32(_f32(float(p)) * 256.0 + 0.5)
    return 255 if t >= 255.0 else 0 if t <= 0.0 else int(t)


def keep_scale(p):
    """What a kept element is multiplied by: 256 / (256 - threshold(p)), in fp32."""
    return _f32(256.0 / (256 - threshold(p)))


def byte_index(i, j):
    """Element (i, j)'s byte in its 16-byte block."""
    return ((i >> 3) & 1) * 8 + (i & 1) * 4 + ((j >> 3) & 1) * 2 + (j & 1)


def dropout_byte(seed, offset, bh, i, j):
    """Element (i, j)'s random byte for head index bh = b * nhead_q + h."""
    seed, offset = int(seed) & (2 ** 64 - 1), int(offset) & (2 ** 64 - 1)
    w = philox4x32((j & ~9, i & ~9, bh, offset & M32),
                   (seed & M32, ((seed >> 32) + (offset >> 32)) & M32))
    k = byte_index(i, j)
    return (w[k >> 2] >> (8 * (k & 3))) & 0xFF


# ---- vectorised (torch int64 tensors holding 32-bit words) -------------------------------------
def _mulhilo(a, b):
    """(hi, lo) of a * b for a constant a < 2^32 and int64 tensor b of 32-bit
    words, without int64 overflow (b split in 16-bit halves)."""
    lo_part = b & 0xFFFF
    p_lo = lo_part * a                     # < 2^48
    p_hi = (b >> 16) * a                   # < 2^48
    t = (p_lo >> 16) + p_hi                # a * b = (p_lo & 0xffff) + t * 2^16
    lo = (p_lo & 0xFFFF) | ((t & 0xFFFF) << 16)
    hi = t >> 16
    return hi, lo


def philox4x32_tensor(c0, c1, c2, c3, k0, k1, rounds=DROPOUT_ROUNDS):
    """Philox4x32 with `rounds` rounds on int64 tensors (or ints) holding
    32-bit words, broadcast together -> four int64 tensors."""
    import torch
    c0, c1, c2, c3, k0, k1 = (x if torch.is_tensor(x) else torch.tensor(int(x) & M32, dtype=torch.int64)
                              for x in (c0, c1, c2, c3, k0, k1))
    for _ in range(rounds):
        hi0, lo0 = _mulhilo(_MUL[0], c0)
        hi1, lo1 = _mulhilo(_MUL[1], c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + _WEYL[0]) & M32
        k1 = (k1 + _WEYL[1]) & M32
    return c0, c1, c2, c3


def dropout_bytes(seed, offset, bh, seqlen_q, seqlen_k, device="cpu"):
    """The random bytes of elements (i, j), i < seqlen_q, j < seqlen_k, of
    the head indices bh (an int count n meaning 0..n-1, or a sequence of
    b * nhead_q + h values) -> int64 tensor [len(bh), seqlen_q, seqlen_k]."""
    import torch
    seed, offset = int(seed) & (2 ** 64 - 1), int(offset) & (2 ** 64 - 1)
    if isinstance(bh, int):
        bh = torch.arange(bh, dtype=torch.int64, device=device)
    else:
        bh = torch.as_tensor(list(bh) if not torch.is_tensor(bh) else bh, dtype=torch.int64,
                             device=device)
    i = torch.arange(seqlen_q, dtype=torch.int64, device=device)
    j = torch.arange(seqlen_k, dtype=torch.int64, device=device)
    # one Philox call per block of 16 elements: blocks are (i & ~9, j & ~9)
    ib, jb = i & ~9, j & ~9
    ui, inv_i = torch.unique(ib, return_inverse=True)
    uj, inv_j = torch.unique(jb, return_inverse=True)
    c0 = uj[None, None, :]
    c1 = ui[None, :, None]
    c2 = bh[:, None, None]
    shape = (bh.numel(), ui.numel(), uj.numel())
    w = philox4x32_tensor(c0.expand(shape), c1.expand(shape), c2.expand(shape), offset & M32,
                          seed & M32, ((seed >> 32) + (offset >> 32)) & M32)
    words = torch.stack(w, dim=-1)                         # [bh, blocks_i, blocks_j, 4]
    words = words[:, inv_i][:, :, inv_j]                   # [bh, s_q, s_k, 4]
    k = ((i[:, None] >> 3) & 1) * 8 + (i[:, None] & 1) * 4 + ((j[None, :] >> 3) & 1) * 2 + (j[None, :] & 1)
    word = torch.gather(words, -1, (k >> 2)[None, :, :, None].expand(bh.numel(), -1, -1, 1))[..., 0]
    return (word >> ((k & 3) * 8)[None]) & 0xFF


def keep_mask(seed, offset, bh, seqlen_q, seqlen_k, p, device="cpu"):
    """The keep mask [len(bh), seqlen_q, seqlen_k] (bool) of drop
    probability p: bytes >= threshold(p)."""
    return dropout_bytes(seed, offset, bh, seqlen_q, seqlen_k, device) >= threshold(p)
