"""ctypes mirror of include/fmha_tile/api.h and the loader of libfmha_tile.so.

Nothing here imports torch at module level: the structures, the enums and the
library loader are plain ctypes, so they can be checked (struct layout against
a C compiler, library loading, the JSON of the kernel set) on a machine
without a GPU or PyTorch.

Every structure below mirrors its C definition field for field, in order,
with the C types: enums are C ints (gcc/clang/nvcc give these enums 4 bytes),
pointers are c_void_p, strides are int64. python/tests/test_host.py compares
sizeof/offsetof of each field with what a C compiler says.
"""
import ctypes
import os
import threading

__all__ = [
    "FmhaError", "FmhaLibraryError", "FmhaFwdArgs", "FmhaKernelInfo", "FmhaFwdPlan",
    "FmhaBwdTraits", "FmhaBwdPlan", "FmhaBwdArgs",
    "FMHA_OK", "FMHA_ERR_INVALID_ARG", "FMHA_ERR_UNSUPPORTED", "FMHA_ERR_NO_KERNEL",
    "FMHA_ERR_DEVICE", "FMHA_ERR_LAUNCH", "FMHA_DTYPE_FP16", "FMHA_DTYPE_BF16",
    "FMHA_DTYPE_FP8", "FMHA_DTYPE_FP32", "FMHA_MASK_NONE", "FMHA_MASK_TOP_LEFT", "FMHA_MASK_BOTTOM_RIGHT",
    "library", "bwd_library", "library_path", "default_set", "check_status", "Library", "handle",
    "current_stream_ptr",
]

# ---- enums (api.h) ------------------------------------------------------------
FMHA_OK = 0
FMHA_ERR_INVALID_ARG = 1
FMHA_ERR_UNSUPPORTED = 2
FMHA_ERR_NO_KERNEL = 3
FMHA_ERR_DEVICE = 4
FMHA_ERR_LAUNCH = 5

FMHA_DTYPE_FP16 = 0
FMHA_DTYPE_BF16 = 1
FMHA_DTYPE_FP8 = 2
FMHA_DTYPE_FP32 = 3   # the elementwise bias (and dbias) only
FMHA_BIAS_BCAST_BATCH = 1   # fmha_bwd_traits.dbias_bcast bits: dbias summed over the batch
FMHA_BIAS_BCAST_HEAD = 2    # ... over the query heads

FMHA_MASK_NONE = 0
FMHA_MASK_TOP_LEFT = 1
FMHA_MASK_BOTTOM_RIGHT = 2

FMHA_FAMILY_FWD = 0
FMHA_FAMILY_BATCH_PREFILL = 1
FMHA_FAMILY_BWD = 2
FMHA_FAMILY_BWD_DOT_DO_O = 3
FMHA_FAMILY_BWD_CONVERT_DQ = 4
FMHA_FAMILY_BWD_DET = 5
FMHA_FAMILY_DECODE = 6
FMHA_FAMILY_SPLITKV_COMBINE = 7

FMHA_ARCH_SM80 = 0
FMHA_ARCH_SM90A = 1
FMHA_ARCH_GFX9 = 2

_c_enum = ctypes.c_int


# ---- structures (api.h) ------------------------------------------------------------
class FmhaFwdArgs(ctypes.Structure):
    """struct fmha_fwd_args. Strides in elements; LSE row stride is 1."""
    _fields_ = [
        ("dtype", _c_enum),
        ("is_group_mode", ctypes.c_int),
        ("batch", ctypes.c_int),
        ("nhead_q", ctypes.c_int),
        ("nhead_k", ctypes.c_int),
        ("seqlen_q", ctypes.c_int),
        ("seqlen_k", ctypes.c_int),
        ("max_seqlen_q", ctypes.c_int),
        ("hdim_q", ctypes.c_int),
        ("hdim_v", ctypes.c_int),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),            # float *
        ("seqstart_q", ctypes.c_void_p),     # const int32_t *
        ("seqstart_k", ctypes.c_void_p),     # const int32_t *
        ("stride_q", ctypes.c_int64),
        ("nhead_stride_q", ctypes.c_int64),
        ("batch_stride_q", ctypes.c_int64),
        ("stride_k", ctypes.c_int64),
        ("nhead_stride_k", ctypes.c_int64),
        ("batch_stride_k", ctypes.c_int64),
        ("stride_v", ctypes.c_int64),
        ("nhead_stride_v", ctypes.c_int64),
        ("batch_stride_v", ctypes.c_int64),
        ("stride_o", ctypes.c_int64),
        ("nhead_stride_o", ctypes.c_int64),
        ("batch_stride_o", ctypes.c_int64),
        ("nhead_stride_lse", ctypes.c_int64),
        ("batch_stride_lse", ctypes.c_int64),
        ("scale", ctypes.c_float),
        ("logits_soft_cap", ctypes.c_float),
        ("alibi_slopes", ctypes.c_void_p),   # const float *
        ("alibi_batch_stride", ctypes.c_int64),
        ("mask_type", _c_enum),
        ("window_left", ctypes.c_int),
        ("window_right", ctypes.c_int),
        ("q_descale", ctypes.c_void_p),      # const float * (fp8 only)
        ("k_descale", ctypes.c_void_p),
        ("v_descale", ctypes.c_void_p),
        ("sinks", ctypes.c_void_p),          # const float * [nhead_q]
        ("dropout_p", ctypes.c_float),       # [0, 1), 0: off
        ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint64),
        ("dropout_rng", ctypes.c_void_p),    # const uint64_t * (device {seed, offset}) or NULL
        ("bias", ctypes.c_void_p),           # const void * elementwise bias or NULL (BIAS rows)
        ("bias_dtype", _c_enum),             # FP16, BF16 or FP32
        ("stride_bias", ctypes.c_int64),
        ("nhead_stride_bias", ctypes.c_int64),
        ("batch_stride_bias", ctypes.c_int64),
        ("descale_batch_stride", ctypes.c_int64),   # fp8 descales per (b, hk); 0, 0: per tensor
        ("descale_head_stride", ctypes.c_int64),
        ("v_kmajor", ctypes.c_int),          # 1: v holds e4m3 V^T (fmha_fp8_v_kmajor's layout)
    ]


class FmhaKernelInfo(ctypes.Structure):
    """struct fmha_kernel_info."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("family", _c_enum),
        ("dtype", _c_enum),
        ("hdim", ctypes.c_int),
        ("has_mask", ctypes.c_int),
        ("has_softcap", ctypes.c_int),
        ("has_alibi", ctypes.c_int),
        ("tile_m", ctypes.c_int),
        ("tile_n", ctypes.c_int),
        ("warps", ctypes.c_int),
        ("stages", ctypes.c_int),
        ("pipeline", ctypes.c_char_p),
        ("arch", _c_enum),
        ("page_size", ctypes.c_int),
        ("kv_layout", _c_enum),
        ("has_bias", ctypes.c_int),
        ("hdim_v", ctypes.c_int),
        ("has_dropout", ctypes.c_int),
        ("p8_qsum", ctypes.c_int),
    ]


class FmhaFwdPlan(ctypes.Structure):
    """struct fmha_fwd_plan."""
    _fields_ = [
        ("kernel", ctypes.POINTER(FmhaKernelInfo)),
        ("workspace_size", ctypes.c_size_t),
        ("grid_x", ctypes.c_int),
        ("grid_y", ctypes.c_int),
        ("grid_z", ctypes.c_int),
        ("block", ctypes.c_int),
        ("why", ctypes.c_char_p),
    ]


def plan_dict(plan):
    """A filled FmhaFwdPlan as the dict attention_plan() and
    batch_prefill_plan() return."""
    k = plan.kernel.contents
    return {
        "kernel": k.name.decode(), "pipeline": k.pipeline.decode(), "hdim": k.hdim,
        "hdim_v": k.hdim_v or k.hdim, "page_size": k.page_size, "tile": (k.tile_m, k.tile_n), "warps": k.warps, "stages": k.stages,
        "grid": (plan.grid_x, plan.grid_y, plan.grid_z), "block": plan.block,
        "workspace_size": plan.workspace_size, "why": plan.why.decode(), "p8_qsum": bool(k.p8_qsum),
    }


class FmhaBwdTraits(ctypes.Structure):
    """struct fmha_bwd_traits: what the backward plan depends on."""
    _fields_ = [
        ("dtype", _c_enum),
        ("is_group_mode", ctypes.c_int),
        ("batch", ctypes.c_int),
        ("nhead_q", ctypes.c_int),
        ("nhead_k", ctypes.c_int),
        ("seqlen_q", ctypes.c_int),          # group mode: total query rows (bound)
        ("seqlen_k", ctypes.c_int),          # group mode: total keys (bound)
        ("max_seqlen_q", ctypes.c_int),
        ("max_seqlen_k", ctypes.c_int),
        ("hdim_q", ctypes.c_int),
        ("hdim_v", ctypes.c_int),
        ("mask_type", _c_enum),
        ("window_left", ctypes.c_int),
        ("window_right", ctypes.c_int),
        ("has_logits_soft_cap", ctypes.c_int),
        ("has_alibi", ctypes.c_int),
        ("is_deterministic", ctypes.c_int),
        ("has_bias", ctypes.c_int),
        ("has_dbias", ctypes.c_int),
        ("dbias_bcast", ctypes.c_int),       # FMHA_BIAS_BCAST_* bits
    ]


class FmhaBwdPlan(ctypes.Structure):
    """struct fmha_bwd_plan (made by fmha_bwd_plan_make; its private fields
    are read by the other backward calls, so pass the same object)."""
    _fields_ = [
        ("traits", FmhaBwdTraits),
        ("dot_do_o", ctypes.POINTER(FmhaKernelInfo)),
        ("dq_dk_dv", ctypes.POINTER(FmhaKernelInfo)),
        ("convert_dq", ctypes.POINTER(FmhaKernelInfo)),
        ("workspace_size", ctypes.c_size_t),
        ("staging_size", ctypes.c_size_t),
        ("nsplits", ctypes.c_int),
        ("dq_direct", ctypes.c_int),
        ("set_", ctypes.c_void_p),           # const fmha_kernel_set *
        ("entry_", ctypes.c_int * 3),
    ]


class FmhaBwdArgs(ctypes.Structure):
    """struct fmha_bwd_args. Strides in elements; LSE row stride is 1."""
    _fields_ = [
        ("dtype", _c_enum),
        ("is_group_mode", ctypes.c_int),
        ("batch", ctypes.c_int),
        ("nhead_q", ctypes.c_int),
        ("nhead_k", ctypes.c_int),
        ("seqlen_q", ctypes.c_int),
        ("seqlen_k", ctypes.c_int),
        ("max_seqlen_q", ctypes.c_int),
        ("max_seqlen_k", ctypes.c_int),
        ("hdim_q", ctypes.c_int),
        ("hdim_v", ctypes.c_int),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("dout", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),            # const float *
        ("dq", ctypes.c_void_p),
        ("dk", ctypes.c_void_p),
        ("dv", ctypes.c_void_p),
        ("seqstart_q", ctypes.c_void_p),     # const int32_t *
        ("seqstart_k", ctypes.c_void_p),     # const int32_t *
    ] + [(pre + name, ctypes.c_int64)
         for name in ("q", "k", "v", "o", "do", "dq", "dk", "dv")
         for pre in ("stride_", "nhead_stride_", "batch_stride_")] + [
        ("nhead_stride_lse", ctypes.c_int64),
        ("batch_stride_lse", ctypes.c_int64),
        ("scale", ctypes.c_float),
        ("logits_soft_cap", ctypes.c_float),
        ("alibi_slopes", ctypes.c_void_p),   # const float * (plan with has_alibi)
        ("mask_type", _c_enum),
        ("window_left", ctypes.c_int),
        ("window_right", ctypes.c_int),
        ("is_deterministic", ctypes.c_int),
        ("workspace", ctypes.c_void_p),
        ("workspace_size", ctypes.c_size_t),
        ("sinks", ctypes.c_void_p),          # const float *
        ("dsinks", ctypes.c_void_p),         # float *
        ("alibi_batch_stride", ctypes.c_int64),
        ("dropout_p", ctypes.c_float),       # the forward's: the same p, seed and offset
        ("dropout_seed", ctypes.c_uint64),   # (or dropout_rng) redraw the same mask
        ("dropout_offset", ctypes.c_uint64),
        ("dropout_rng", ctypes.c_void_p),    # const uint64_t * (device {seed, offset}) or NULL
        ("bias", ctypes.c_void_p),           # const void *: the forward's bias, or NULL
        ("bias_dtype", _c_enum),
        ("stride_bias", ctypes.c_int64),
        ("nhead_stride_bias", ctypes.c_int64),
        ("batch_stride_bias", ctypes.c_int64),
        ("dbias", ctypes.c_void_p),          # void *: d loss / d bias (the bias's dtype), or NULL
        ("stride_dbias", ctypes.c_int64),
        ("nhead_stride_dbias", ctypes.c_int64),
        ("batch_stride_dbias", ctypes.c_int64),
    ]


# ---- errors ------------------------------------------------------------------------
class FmhaError(RuntimeError):
    """A library call returned a status other than FMHA_OK.

    Attributes: status (int, fmha_status), status_str (fmha_status_str) and
    message (fmha_last_error: what the library said about this call).
    """

    def __init__(self, status, status_str, message, where=""):
        self.status = status
        self.status_str = status_str
        self.message = message
        text = "%s: %s" % (status_str, message) if message else status_str
        if where:
            text = "%s: %s" % (where, text)
        super().__init__(text)


class FmhaLibraryError(OSError):
    """libfmha_tile.so could not be found or loaded."""


# ---- loading -------------------------------------------------------------------------
LIB_NAME = "libfmha_tile.so"
ENV_VAR = "FMHA_TILE_LIB"

_lock = threading.Lock()
_lib = None
_lib_path = None
_default_set = None


def _candidates():
    """(path, how it was found) in the order they are tried."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [(env, "$" + ENV_VAR)]
    here = os.path.dirname(os.path.abspath(__file__))
    in_tree = os.path.normpath(os.path.join(here, "..", "..", "build", LIB_NAME))
    out = []
    if os.path.isfile(in_tree):
        out.append((in_tree, "the source tree's build/"))
    out.append((LIB_NAME, "the dynamic loader's search path"))
    return out


def _declare(lib):
    P = ctypes.POINTER
    lib.fmha_status_str.argtypes = [_c_enum]
    lib.fmha_status_str.restype = ctypes.c_char_p
    lib.fmha_last_error.argtypes = []
    lib.fmha_last_error.restype = ctypes.c_char_p
    lib.fmha_fwd_check.argtypes = [ctypes.c_void_p, P(FmhaFwdArgs), P(FmhaFwdPlan)]
    lib.fmha_fwd_check.restype = _c_enum
    lib.fmha_fwd.argtypes = [ctypes.c_void_p, P(FmhaFwdArgs), ctypes.c_void_p]
    lib.fmha_fwd.restype = _c_enum
    lib.fmha_fp8_v_kmajor.argtypes = [P(FmhaFwdArgs), ctypes.c_void_p, ctypes.c_void_p]
    lib.fmha_fp8_v_kmajor.restype = _c_enum
    lib.fmha_set_size.argtypes = [ctypes.c_void_p]
    lib.fmha_set_size.restype = ctypes.c_int
    lib.fmha_set_kernel.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.fmha_set_kernel.restype = P(FmhaKernelInfo)
    lib.fmha_set_json.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.fmha_set_json.restype = ctypes.c_size_t
    lib.fmha_default_kernel_set.argtypes = []
    lib.fmha_default_kernel_set.restype = ctypes.c_void_p
    lib.fmha_version.argtypes = []
    lib.fmha_version.restype = ctypes.c_char_p


class Library(object):
    """A loaded fmha_tile C-ABI library and its kernel set: the default build
    (make lib; handle()) or a kernel set built from Python
    (fmha_tile.KernelSet.build()). Every entry point of the package takes
    one as kernels=.

    Attributes: cdll (the ctypes.CDLL), path, set (its
    fmha_default_kernel_set(), an fmha_kernel_set * as an int), name (the
    set's name). Errors of a call are read from the library that made it
    (check_status), since each library keeps its own last error."""

    def __init__(self, cdll, path):
        _declare(cdll)
        self.cdll = cdll
        self.path = path
        self.set = cdll.fmha_default_kernel_set()
        self._declared = set()
        self.decode_set = None     # fmha_default_decode_kernel_set(), read by _decode
        self.name = None

    @classmethod
    def load(cls, path, name=None):
        """Load the library at path (torch first when installed, as library() does)."""
        try:  # share PyTorch's libcudart when it is the same soname
            import torch  # noqa: F401
        except ImportError:
            pass
        try:
            cdll = ctypes.CDLL(path)
        except OSError as e:
            raise FmhaLibraryError("fmha_tile: cannot load %s: %s" % (path, e)) from None
        try:
            lib = cls(cdll, path)
        except AttributeError as e:
            raise FmhaLibraryError("fmha_tile: %s is not an fmha_tile library (%s)" % (path, e)) from None
        if not lib.set:
            raise FmhaLibraryError("fmha_tile: %s has no kernel set (%s)" % (path, lib.last_error()))
        lib.name = name
        if name:
            with _lock:
                _by_name[name] = lib
        return lib

    def __repr__(self):
        return "<fmha_tile.Library %s>" % self.path

    def declared(self, what, declare):
        """Run declare(cdll) once per library for a group of entry points
        (what: its name); returns the CDLL."""
        if what not in self._declared:
            declare(self.cdll)
            self._declared.add(what)
        return self.cdll

    def status_str(self, status):
        s = self.cdll.fmha_status_str(status)
        return s.decode() if s else "unknown status"

    def last_error(self):
        s = self.cdll.fmha_last_error()
        return s.decode(errors="replace") if s else ""

    def check_status(self, status, where=""):
        """Raise FmhaError for a status other than FMHA_OK (this library's message)."""
        if status != FMHA_OK:
            raise FmhaError(status, self.status_str(status), self.last_error(), where)

    def version(self):
        return self.cdll.fmha_version().decode()


_default_handle = [None]
_by_name = {}     # set name -> Library loaded with that name (Library.load)


def handle(kernels=None):
    """The Library an entry point's kernels= argument names: None, the
    default library (library()); a Library; the name of a loaded one (its
    set's name, Library.name: e.g. "fmha_jit_<key>"); or an object with
    build() (a fmha_tile.KernelSet), built or found in the cache and loaded."""
    if kernels is None:
        library()
        return _default_handle[0]
    if isinstance(kernels, Library):
        return kernels
    if isinstance(kernels, str):       # a loaded set by name (a string passes where objects cannot)
        lib = _by_name.get(kernels)
        if lib is None:
            raise ValueError("kernels=%r: no kernel set of that name is loaded (loaded: %s)"
                             % (kernels, ", ".join(sorted(_by_name)) or "none"))
        return lib
    build = getattr(kernels, "build", None)
    if callable(build):
        lib = build()
        if isinstance(lib, Library):
            return lib
    raise TypeError("kernels must be None (the library's default set), an fmha_tile.KernelSet, "
                    "the Library its build() returns or that Library's name, got %r" % (kernels,))


def library():
    """The loaded ctypes.CDLL (loaded on first use, then cached).

    Search order: $FMHA_TILE_LIB (a path; nothing else is tried when it is
    set), then build/libfmha_tile.so of the source tree this package sits in
    (python/fmha_tile/../../build), then libfmha_tile.so on the dynamic
    loader's path (LD_LIBRARY_PATH, ldconfig). torch is imported first when it
    is installed, so that the library binds to the CUDA runtime PyTorch has
    already loaded when their versions agree.
    """
    global _lib, _lib_path, _default_set
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        try:  # share PyTorch's libcudart when it is the same soname
            import torch  # noqa: F401
        except ImportError:
            pass
        tried = []
        for path, how in _candidates():
            if os.sep in path and not os.path.isfile(path):
                tried.append("%s (from %s): no such file" % (path, how))
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (from %s): %s" % (path, how, e))
                continue
            try:
                h = Library(lib, path)
            except AttributeError as e:
                tried.append("%s (from %s): not an fmha_tile library (%s)" % (path, how, e))
                continue
            except FmhaLibraryError as e:
                tried.append("%s (from %s): %s" % (path, how, e))
                continue
            _default_handle[0] = h
            _default_set = h.set
            _lib_path = path
            _lib = lib
            return lib
        raise FmhaLibraryError(
            "fmha_tile: cannot load %s. Build it with `make lib` in the fmha_tile source "
            "tree (it writes build/%s), or set %s to its path. Tried:\n  %s"
            % (LIB_NAME, LIB_NAME, ENV_VAR, "\n  ".join(tried)))


def library_path():
    """Path (or name) the library was loaded from; loads it if needed."""
    library()
    return _lib_path


def default_set():
    """The fmha_kernel_set * of the library's default kernel set (an int)."""
    library()
    return _default_set


def bwd_library(kernels=None):
    """The CDLL of handle(kernels), with the backward entry points declared.
    They are declared here rather than in _declare() so that a library built
    before the backward existed still loads for the forward; such a library
    raises FmhaLibraryError here."""
    h = handle(kernels)
    try:
        return h.declared("bwd", _declare_bwd)
    except AttributeError as e:
        raise FmhaLibraryError(
            "fmha_tile: %s has no backward pass (%s); rebuild it with `make lib`"
            % (h.path, e)) from None


def _declare_bwd(lib):
    P = ctypes.POINTER
    vp = ctypes.c_void_p
    lib.fmha_bwd_plan_make.argtypes = [vp, P(FmhaBwdTraits), P(FmhaBwdPlan)]
    lib.fmha_bwd_plan_make.restype = _c_enum
    lib.fmha_bwd_prepare_workspace.argtypes = [P(FmhaBwdPlan), vp, ctypes.c_size_t, vp, vp, vp]
    lib.fmha_bwd_prepare_workspace.restype = _c_enum
    lib.fmha_bwd_prepare_workspace_async.argtypes = [P(FmhaBwdPlan), vp, ctypes.c_size_t, vp, vp,
                                                     vp, vp]
    lib.fmha_bwd_prepare_workspace_async.restype = _c_enum
    # the device form (graph-capturable); a library built before it lacks it
    if hasattr(lib, "fmha_bwd_prepare_workspace_device"):
        lib.fmha_bwd_prepare_workspace_device.argtypes = [P(FmhaBwdPlan), vp, ctypes.c_size_t, vp,
                                                          vp, vp]
        lib.fmha_bwd_prepare_workspace_device.restype = _c_enum
    lib.fmha_bwd.argtypes = [P(FmhaBwdPlan), P(FmhaBwdArgs), vp]
    lib.fmha_bwd.restype = _c_enum


_raw_stream = []   # [torch, torch._C._cuda_getCurrentRawStream or None]


def current_stream_ptr(torch, device):
    """The cudaStream_t (an int) of torch.cuda.current_stream(device), read
    without building a torch.cuda.Stream object per call (the raw getter
    PyTorch itself uses; a few microseconds less per launch than
    torch.cuda.current_stream(device).cuda_stream, which it falls back to)."""
    c = _raw_stream
    if not c or c[0] is not torch:    # (torch module, its raw getter), looked up once
        c[:] = [torch, getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)]
    raw = c[1]
    index = getattr(device, "index", None)
    if raw is None or not isinstance(index, int):
        return torch.cuda.current_stream(device).cuda_stream
    return raw(index)


def status_str(status):
    s = library().fmha_status_str(status)
    return s.decode() if s else "unknown status"


def last_error():
    s = library().fmha_last_error()
    return s.decode(errors="replace") if s else ""


def check_status(status, where=""):
    """Raise FmhaError for a status other than FMHA_OK."""
    if status != FMHA_OK:
        raise FmhaError(status, status_str(status), last_error(), where)
