"""Host tests of dropout in the Python package: no GPU, no pytest needed
(PyTorch optional).

  - fmha_tile.philox, the Python form of the kernels' dropout rule (the
    oracle of test_dropout.py): Philox4x32-10 against Random123's published
    known-answer vectors (the ones tests/host/test_philox.c checks the C
    code with); the element -> byte rule and the threshold against the C
    header itself (include/fmha_tile/tile/philox.h compiled with cc, many
    seeds, offsets above 2^32, heads, positions, and p values near the
    rounding edges); with PyTorch, the vectorised int64 form against the
    scalar one;
  - argument checks: dropout_p in [0, 1), not with fp8, seed/offset taken
    modulo 2^64, the device rng tensor's checks; the backward's args carry
    the forward's p, seed, offset and rng pointer;
  - fmha_tile._dropout with a stand-in torch and generator: seed =
    initial_seed(), offset = get_offset(), the offset advanced by 4 per
    call; a device draw under graph capture and torch.compile tracing; a
    clear error for generators without get_offset; p = 0 leaves the
    generator alone.

Run as a script (the last line is "N passed, M failed") or under pytest.
Uses cc (or $CC) for the C cross-check.
"""
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile


# host_util first: it puts python/ on sys.path
from host_util import REPO, FakeDevice, StandInTensor, c_compiler, raises, run_tests, skip
from fmha_tile import _args, _bwd, _dropout, _lib, philox


# ---- Philox -------------------------------------------------------------------------------------
# Random123's kat_vectors for philox4x32 with 10 rounds (as tests/host/test_philox.c)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


def test_philox_known_answers():
    for ctr, key, want in KAT:
        got = philox.philox4x32(ctr, key, rounds=10)
        assert got == want, "%s %s: %s != %s" % (ctr, key, [hex(x) for x in got], [hex(x) for x in want])
    # dropout draws 7 rounds, as the kernels (FMHAI_DROPOUT_ROUNDS); 7 and 10 differ
    assert philox.DROPOUT_ROUNDS == 7
    assert philox.philox4x32(KAT[2][0], KAT[2][1], rounds=7) != KAT[2][2]


def test_byte_rule_shares_blocks():
    # the 16 elements differing from (i & ~9, j & ~9) in bits 0 and 3 share
    # one call: distinct bytes of it, 8 i3 + 4 i0 + 2 j3 + j0
    seen = set()
    for i in (16, 17, 24, 25):
        for j in (32, 33, 40, 41):
            seen.add(philox.byte_index(i, j))
    assert seen == set(range(16))
    seed, off = 0x0123456789abcdef, 77
    w = philox.philox4x32((32, 16, 5, 77), (seed & 0xffffffff, seed >> 32))
    for i in (16, 17, 24, 25):
        for j in (32, 33, 40, 41):
            k = philox.byte_index(i, j)
            assert philox.dropout_byte(seed, off, 5, i, j) == (w[k >> 2] >> (8 * (k & 3))) & 0xff


def test_kernel_offset():
    # bit 63 set: the key's high word (seed >> 32) + (offset >> 32) then differs
    # from the one torch's own Philox draws use with the same seed (seed >> 32)
    assert philox.kernel_offset(0) == 1 << 63
    assert philox.kernel_offset(12) == (1 << 63) + 12
    assert philox.kernel_offset((5 << 32) + 4) == (1 << 63) + (5 << 32) + 4
    for seed in (0, 2 ** 64 - 1, 0x0123456789abcdef):
        for off in (0, 4, 1 << 32, (7 << 32) + 4, (1 << 62) + 8):
            key1 = ((seed >> 32) + (philox.kernel_offset(off) >> 32)) & 0xffffffff
            assert key1 != seed >> 32, (seed, off)


def test_threshold_and_scale():
    assert [philox.threshold(p) for p in (0.0, 0.001, 0.1, 0.25, 0.5, 0.9, 0.999)] == \
        [0, 0, 26, 64, 128, 230, 255]
    assert philox.keep_scale(0.5) == 2.0 and philox.keep_scale(0.0) == 1.0
    assert abs(philox.keep_scale(0.1) - 256.0 / 230.0) < 1e-6


# (seed, offset, bh, i, j): large seeds, offsets past 2^32 (the key's high word),
# positions past one block
CASES = [(0, 0, 0, 0, 0), (42, 0, 3, 17, 9), (2 ** 64 - 1, 2 ** 64 - 4, 7, 1023, 4095),
         (0x5eed, 4096, 1, 8, 8), (0x0123456789abcdef, (3 << 32) + 8, 65535, 300, 77)]
# p near the rounding edges; 25.5 / 256 - 1e-12: p is taken in fp32 (the C field), where it
# is 25.5 / 256 exactly and rounds up to 26 (in double it would give 25)
P_EDGES = [0.0, 1e-9, 0.001, 0.00195, 0.001953125, 0.002, 0.1, 0.25, 127.5 / 256, 0.4980468,
           25.5 / 256 - 1e-12, 0.5, 0.75, 0.99, 0.998, 0.999, 0.9999]


def test_python_rule_matches_c_header():
    cc = c_compiler()
    if cc is None:
        skip("no C compiler (cc, gcc, clang)")
    rng = random.Random(17)
    cases = list(CASES)
    for _ in range(200):
        cases.append((rng.getrandbits(64), rng.getrandbits(64) & ~3, rng.randrange(1 << 16),
                      rng.randrange(1 << 14), rng.randrange(1 << 14)))
    lines = ['#include <stdio.h>', '#include <stdint.h>', '#include "fmha_tile/tile/philox.h"',
             "int main(void) {"]
    for seed, off, bh, i, j in cases:
        lines.append('    printf("%%u\\n", fmhai_dropout_byte(%duLL, %duLL, %du, %du, %du));'
                     % (seed, off, bh, i, j))
    for p in P_EDGES:
        lines.append('    printf("%%u %%.9g\\n", fmhai_dropout_threshold(%.17ef), '
                     '(double)fmhai_dropout_scale(fmhai_dropout_threshold(%.17ef)));' % (p, p))
    lines += ["    return 0;", "}"]
    tmp = tempfile.mkdtemp(prefix="fmha_philox_")
    try:
        src, exe = os.path.join(tmp, "p.c"), os.path.join(tmp, "p")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([cc, "-std=c11", "-I" + os.path.join(REPO, "include"), src, "-o", exe],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        assert r.returncode == 0, r.stdout
        out = subprocess.run([exe], stdout=subprocess.PIPE, universal_newlines=True,
                             check=True).stdout.split("\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for n, (seed, off, bh, i, j) in enumerate(cases):
        assert int(out[n]) == philox.dropout_byte(seed, off, bh, i, j), (seed, off, bh, i, j)
    for n, p in enumerate(P_EDGES):
        thr, scale = out[len(cases) + n].split()
        assert int(thr) == philox.threshold(p), (p, thr, philox.threshold(p))
        assert scale == "%.9g" % philox.keep_scale(p), (p, scale)   # 9 digits: an fp32 exactly


def _torch_or_skip():
    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed (the vectorised Philox needs it)")
    return torch


def test_vectorised_matches_scalar():
    torch = _torch_or_skip()
    for ctr, key, want in KAT:
        got = philox.philox4x32_tensor(*[torch.tensor(x, dtype=torch.int64) for x in ctr + key], rounds=10)
        assert tuple(int(x) for x in got) == want
    rng = random.Random(5)
    for seed, off in ((2 ** 64 - 1, (7 << 32) + 12), (0x5eed, 4096), (rng.getrandbits(64), 0)):
        bh = [0, 3, 40000]
        b = philox.dropout_bytes(seed, off, bh, 37, 50)
        assert tuple(b.shape) == (3, 37, 50) and b.dtype == torch.int64
        for _ in range(200):
            n, i, j = rng.randrange(3), rng.randrange(37), rng.randrange(50)
            assert int(b[n, i, j]) == philox.dropout_byte(seed, off, bh[n], i, j), (seed, off, n, i, j)
    m = philox.keep_mask(42, 0, 4, 256, 256, 0.25)
    assert m.dtype == torch.bool
    frac = m.float().mean().item()
    # 262144 draws, expected 0.75: 4 sigma is about 0.0034
    assert abs(frac - 0.75) < 4 * (0.75 * 0.25 / m.numel()) ** 0.5, frac


# ---- argument checks ------------------------------------------------------------------------------
class FakeTensor(StandInTensor):
    def __init__(self, shape, dtype="torch.bfloat16", ptr=1 << 20, device=None):
        StandInTensor.__init__(self, shape, dtype, None, device or FakeDevice(), ptr)


def qkv(dtype="torch.bfloat16"):
    return (FakeTensor((2, 100, 8, 64), dtype, 1 << 20), FakeTensor((2, 130, 2, 64), dtype, 2 << 20),
            FakeTensor((2, 130, 2, 64), dtype, 3 << 20))


def test_dropout_p_checks():
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, causal=True, dropout_p=0.1)
    assert p.dropout and abs(p.args.dropout_p - 0.1) < 1e-7
    assert not _args.batch_problem(q, k, v).dropout
    assert not _args.batch_problem(q, k, v, dropout_p=0).dropout
    for bad in (1.0, 1.5, -0.1, float("nan"), float("inf")):
        assert "[0, 1)" in raises(ValueError, _args.batch_problem, q, k, v, dropout_p=bad)
    assert "bool" in raises(TypeError, _args.batch_problem, q, k, v, dropout_p=True)
    assert "float" in raises(TypeError, _args.batch_problem, q, k, v, dropout_p="0.1")
    q8, k8, v8 = qkv("torch.float8_e4m3fn")
    assert "fp8" in raises(ValueError, _args.batch_problem, q8, k8, v8, dropout_p=0.1)
    _args.batch_problem(q8, k8, v8, dropout_p=0.0)          # no dropout: fine
    cu = FakeTensor((3,), "torch.int32", 7 << 20)
    qv, kv = FakeTensor((300, 8, 64)), FakeTensor((400, 2, 64))
    p = _args.varlen_problem(qv, kv, kv, cu, cu, 200, 250, dropout_p=0.5)
    assert p.dropout and p.args.dropout_p == 0.5
    assert "[0, 1)" in raises(ValueError, _args.varlen_problem, qv, kv, kv, cu, cu, 200, 250,
                              dropout_p=1.0)


def test_seed_offset_and_rng_fields():
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, dropout_p=0.2)
    p.set_dropout_rng(2 ** 64 - 1, (5 << 32) + 8)
    a = p.args
    assert (a.dropout_seed, a.dropout_offset, a.dropout_rng) == (2 ** 64 - 1, (5 << 32) + 8, None)
    p.set_dropout_rng(-1, 4)                      # an int64 schema's bit pattern
    assert a.dropout_seed == 2 ** 64 - 1
    assert "64 bits" in raises(ValueError, p.set_dropout_rng, 2 ** 64, 0)
    assert "int" in raises(TypeError, p.set_dropout_rng, 1.5, 0)
    rng = FakeTensor((2,), "torch.int64", 9 << 20)
    p.set_dropout_rng(0, 0, rng)
    assert a.dropout_rng == 9 << 20 and p.dropout_rng is rng
    assert "int64" in raises(ValueError, p.set_dropout_rng, 0, 0, FakeTensor((3,), "torch.int64"))
    assert "int64" in raises(ValueError, p.set_dropout_rng, 0, 0, FakeTensor((2,), "torch.float32"))
    assert "aligned" in raises(ValueError, p.set_dropout_rng, 0, 0,
                               FakeTensor((2,), "torch.int64", (9 << 20) + 4))
    assert "CUDA" in raises(ValueError, p.set_dropout_rng, 0, 0,
                            FakeTensor((2,), "torch.int64", device=FakeDevice("cpu", None)))
    # fmha_fwd_check's copy keeps them
    c = p.check_args()
    assert c.dropout_rng == 9 << 20 and c.dropout_p == p.args.dropout_p


def test_bwd_args_carry_dropout():
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, causal=True, dropout_p=0.3)
    p.set_dropout_rng(0x5eed, 4096)
    o = FakeTensor(p.out_shape, ptr=5 << 20)
    lse = FakeTensor(p.lse_shape, "torch.float32", 6 << 20)
    grads = [FakeTensor(t.shape, ptr=(20 + n) << 20) for n, t in enumerate((q, k, v))]
    _, a = _bwd.bwd_structs(p, q, k, v, o, lse, o, *grads, deterministic=False)
    assert (a.dropout_p, a.dropout_seed, a.dropout_offset, a.dropout_rng) == \
        (p.args.dropout_p, 0x5eed, 4096, None)
    p.set_dropout_rng(0, 0, FakeTensor((2,), "torch.int64", 9 << 20))
    _, a = _bwd.bwd_structs(p, q, k, v, o, lse, o, *grads, deterministic=True)
    assert a.dropout_rng == 9 << 20
    # no dropout: zeros
    p = _args.batch_problem(q, k, v)
    _, a = _bwd.bwd_structs(p, q, k, v, o, lse, o, *grads, deterministic=False)
    assert (a.dropout_p, a.dropout_seed, a.dropout_offset, a.dropout_rng) == (0.0, 0, 0, None)


def test_struct_fields_in_order():
    # the C layout itself is compared in test_host.py; here the order the
    # header gives: dropout_rng right after dropout_offset, then (both
    # structs) the elementwise bias appended after it (and the fp8 descale
    # strides and v_kmajor after that in the forward's)
    f = [n for n, _ in _lib.FmhaFwdArgs._fields_]
    i = f.index("dropout_p")
    assert f[i:i + 4] == ["dropout_p", "dropout_seed", "dropout_offset", "dropout_rng"]
    assert f[i + 4:] == ["bias", "bias_dtype", "stride_bias", "nhead_stride_bias", "batch_stride_bias",
                         "descale_batch_stride", "descale_head_stride", "v_kmajor"]
    b = [n for n, _ in _lib.FmhaBwdArgs._fields_]
    i = b.index("alibi_batch_stride")
    assert b[i:i + 5] == ["alibi_batch_stride", "dropout_p", "dropout_seed", "dropout_offset",
                          "dropout_rng"]
    assert b[i + 5:] == ["bias", "bias_dtype", "stride_bias", "nhead_stride_bias", "batch_stride_bias",
                         "dbias", "stride_dbias", "nhead_stride_dbias", "batch_stride_dbias"]


def test_library_reads_the_mirrored_dropout_fields():
    # with build/libfmha_tile.so: fmha_fwd_check validates before it touches a
    # device, so the library's answers show it reads dropout_p where the
    # mirror writes it (and the fp8 refusal)
    import ctypes
    try:
        h = _lib.handle()
    except _lib.FmhaLibraryError as e:
        skip("libfmha_tile.so not available: %s" % str(e).splitlines()[0])

    def check(p):
        p.set_outputs(FakeTensor(p.out_shape, ptr=5 << 20), None)
        st = h.cdll.fmha_fwd_check(h.set, ctypes.byref(p.check_args()), None)
        return st, h.last_error()

    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, dropout_p=0.1)
    p.set_dropout_rng(1, 2)
    st, msg = check(p)
    assert st in (_lib.FMHA_OK, _lib.FMHA_ERR_DEVICE), (st, msg)      # no GPU here: DEVICE
    p.args.dropout_p = 1.5                    # past the Python checks: the library's own
    st, msg = check(p)
    assert st == _lib.FMHA_ERR_INVALID_ARG and "dropout_p" in msg, (st, msg)
    q8, k8, v8 = qkv("torch.float8_e4m3fn")
    p = _args.batch_problem(q8, k8, v8)
    p.args.dropout_p = 0.1
    st, msg = check(p)
    assert st != _lib.FMHA_OK and "dropout" in msg, (st, msg)


# ---- seed and offset from the generator (stand-in torch) ---------------------------------------------
class FakeGenerator(object):
    def __init__(self, seed=1234, offset=0, device=None, has_offset=True):
        self.seed, self.offset = seed, offset
        self.device = device or FakeDevice()
        self.calls = []
        if not has_offset:
            self.get_offset = self.set_offset = None

    def initial_seed(self):
        return self.seed

    def get_offset(self):
        return self.offset

    def set_offset(self, x):
        assert x % 4 == 0, "torch's CUDA generator takes multiples of 4"
        self.calls.append(x)
        self.offset = x


class FakeTorch(object):
    """What _dropout touches: torch.cuda (default generators, capture, the
    device context), torch.compiler.is_compiling, torch.randint, int64."""
    int64 = "torch.int64"
    __version__ = "0.0-fake"

    def __init__(self, gens):
        outer = self

        class Cuda(object):
            default_generators = gens
            capturing = False

            def is_current_stream_capturing(self):
                return self.capturing

            def current_device(self):
                return 0

            @contextlib.contextmanager
            def device(self, d):
                outer.devices.append(d)
                yield

        class Compiler(object):
            compiling = False

            def is_compiling(self):
                return self.compiling

        self.cuda = Cuda()
        self.compiler = Compiler()
        self.devices = []
        self.draws = []

    def randint(self, low, high, size, dtype=None, device=None, generator=None):
        t = FakeTensor(size, dtype, 12 << 20, device)
        self.draws.append((low, high, size, generator))
        return t


def test_host_seed_offset_advances_by_four():
    gens = [FakeGenerator(1234, 0), FakeGenerator(99, 40, FakeDevice("cuda", 1))]
    torch = FakeTorch(gens)
    q, k, v = qkv()
    seeds = []
    for _ in range(3):
        p = _args.batch_problem(q, k, v, dropout_p=0.1)
        _dropout.setup(torch, p, q.device)
        seeds.append((p.args.dropout_seed, p.args.dropout_offset, p.args.dropout_rng))
    # the kernels get the generator's offset with bit 63 set (philox.kernel_offset)
    top = 1 << 63
    assert seeds == [(1234, top, None), (1234, top + 4, None), (1234, top + 8, None)]
    assert gens[0].offset == 12 and gens[1].offset == 40
    assert torch.devices == [q.device] * 3
    # device 1's default generator for a tensor there
    q1 = FakeTensor((2, 100, 8, 64), device=FakeDevice("cuda", 1))
    p = _args.batch_problem(q1, *[FakeTensor(t.shape, ptr=t.data_ptr(), device=q1.device)
                                  for t in (k, v)], dropout_p=0.5)
    _dropout.setup(torch, p, q1.device)
    assert (p.args.dropout_seed, p.args.dropout_offset) == (99, top + 40) and gens[1].offset == 44
    # an explicit generator; a 64-bit seed
    g = FakeGenerator(2 ** 64 - 5, 1 << 40)
    p = _args.batch_problem(q, k, v, dropout_p=0.5)
    _dropout.setup(torch, p, q.device, g)
    assert (p.args.dropout_seed, p.args.dropout_offset) == (2 ** 64 - 5, top + (1 << 40))
    assert g.offset == (1 << 40) + _dropout.OFFSET_INCREMENT and gens[0].offset == 12
    # no dropout: the generator is not touched
    p = _args.batch_problem(q, k, v, dropout_p=0.0)
    _dropout.setup(torch, p, q.device)
    assert gens[0].offset == 12 and p.args.dropout_seed == 0
    assert _dropout.op_args(torch, q.device, 0.0) == (0, 0, None) and gens[0].offset == 12
    # the op's int64 seed
    s, o, r = _dropout.op_args(torch, q.device, 0.1, g)
    assert s == -5 and o == -(1 << 63) + (1 << 40) + 4 and r is None      # int64 bit patterns


def test_generator_checks():
    torch = FakeTorch([FakeGenerator()])
    q, k, v = qkv()
    p = _args.batch_problem(q, k, v, dropout_p=0.1)
    msg = raises(ValueError, _dropout.setup, torch, p, q.device, FakeGenerator(device=FakeDevice("cpu", None)))
    assert "CUDA generator" in msg
    msg = raises(ValueError, _dropout.setup, torch, p, q.device, FakeGenerator(device=FakeDevice("cuda", 3)))
    assert "cuda:3" in msg
    assert "torch.Generator" in raises(TypeError, _dropout.setup, torch, p, q.device, 42)
    msg = raises(RuntimeError, _dropout.setup, torch, p, q.device, FakeGenerator(has_offset=False))
    assert "get_offset" in msg and "2.1" in msg


def test_device_draw_under_capture_and_compile():
    gen = FakeGenerator(7, 0)
    torch = FakeTorch([gen])
    q, k, v = qkv()
    torch.cuda.capturing = True
    p = _args.batch_problem(q, k, v, dropout_p=0.1)
    _dropout.setup(torch, p, q.device)
    assert gen.offset == 0 and len(torch.draws) == 1          # the generator is not read
    low, high, size, g = torch.draws[0]
    assert size == (2,) and g is None and high <= 2 ** 63
    assert p.args.dropout_rng == 12 << 20 and p.dropout_rng is not None
    torch.cuda.capturing = False
    torch.compiler.compiling = True
    s, o, r = _dropout.op_args(torch, q.device, 0.1, gen)
    assert (s, o) == (0, 0) and r is not None and torch.draws[-1][3] is gen and gen.offset == 0



if __name__ == "__main__":
    sys.exit(run_tests(globals()))
