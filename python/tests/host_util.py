"""Shared by the host tests (test_*_host.py, test_host.py), which run under
pytest or as scripts (`python3 python/tests/test_x_host.py`; both put this
folder on sys.path): the fmha_tile package of this source tree on sys.path,
skips and expected errors that work both ways, stand-in tensors, and the
script runner (PASS / FAIL / SKIP lines, the last "N passed, M failed")."""
import os
import shutil
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)


class Skip(Exception):
    pass


_script = []      # set when run as a script: skips are reported by run_tests()


def skip(why):
    if _script or "pytest" not in sys.modules:
        raise Skip(why)
    import pytest
    pytest.skip(why)


def raised(exc, fn, *a, **kw):
    """fn(*a, **kw) raises exc; -> the exception."""
    try:
        fn(*a, **kw)
    except exc as e:
        return e
    raise AssertionError("%s not raised by %s" % (exc.__name__, getattr(fn, "__name__", fn)))


def raises(exc, fn, *a, **kw):
    """fn(*a, **kw) raises exc; -> its message."""
    return str(raised(exc, fn, *a, **kw))


def c_compiler():
    """$CC, cc, gcc or clang: the first on PATH (None: none)."""
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


# ---- stand-ins ------------------------------------------------------------------------------------
class FakeDevice(object):
    def __init__(self, type="cuda", index=0):
        self.type, self.index = type, index

    def __eq__(self, other):
        return (self.type, self.index) == (getattr(other, "type", None), getattr(other, "index", None))

    def __ne__(self, other):
        return not self == other

    def __str__(self):
        return self.type if self.index is None else "%s:%d" % (self.type, self.index)


class StandInTensor(object):
    """What the package reads of a tensor: shape, stride(), dtype, device,
    is_cuda, data_ptr(), numel(), requires_grad (strides None: contiguous)."""

    def __init__(self, shape, dtype, strides, device, ptr):
        self.shape = tuple(shape)
        if strides is None:
            strides, acc = [], 1
            for n in reversed(self.shape):
                strides.insert(0, acc)
                acc *= max(n, 1)
        self._strides = tuple(strides)
        self.dtype = dtype
        self.device = device
        self.is_cuda = device.type == "cuda"
        self._ptr = ptr
        self.requires_grad = False

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def data_ptr(self):
        return self._ptr

    def numel(self):
        n = 1
        for x in self.shape:
            n *= x
        return n


# ---- running as a script ------------------------------------------------------------------------------
def run_tests(namespace):
    """Runs the test_* functions of a module's namespace in file order. -> exit status."""
    _script.append(True)
    tests = [(n, f) for n, f in sorted(namespace.items(), key=lambda kv: kv[1].__code__.co_firstlineno
                                       if callable(kv[1]) and hasattr(kv[1], "__code__") else 0)
             if n.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
        except Skip as e:
            print("SKIP %s: %s" % (name, e))
            continue
        except Exception as e:  # noqa: BLE001 (report every failure, go on)
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
            traceback.print_exc(limit=3, file=sys.stdout)
            failed += 1
            continue
        print("PASS %s" % name)
        passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0
