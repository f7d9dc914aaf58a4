"""fmha_tile.jit: kernel sets declared from Python and compiled on the fly.

A KernelSet holds rows with the columns and FMHA_ANY wildcards of the C
macro DECL_FMHA_KERNEL_SET (include/fmha_tile/dispatch/kernel_set.h):

    X(family, dtype, hdim, mask, softcap, alibi | page, tile_m, tile_n, warps, stages)

    import fmha_tile
    ks = fmha_tile.KernelSet([
        ("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", fmha_tile.ANY, fmha_tile.ANY,
         fmha_tile.ANY, fmha_tile.ANY),
        ("PREFILL", "BF16", 128, "MASK", "NOSOFTCAP", 16, 128, 64, 4, 1),
    ])
    lib = ks.build()                       # compiled once, then found in the cache
    o = fmha_tile.attention(q, k, v, causal=True, kernels=lib)

build() makes the library's C ABI from these rows instead of the default
set: it writes a header of the rows (fmha_jit_rows.h) and one small
translation unit per family, which include the library's own units
(src/fmha_tile_lib_part.cu, src/fmha_tile_lib.cu, src/fmha_tile_lib_decode.cu;
src/lib_parts.h takes the generated header in place of the default parts),
compiles them with nvcc side by side (one progress line a unit), links a
shared library and loads it. The result is an fmha_tile Library: every
entry point of the package takes it as kernels= (attention,
attention_varlen, their plans and backward, batch_prefill, its plan,
attention_with_kvcache); passing the KernelSet itself builds it on first use.

Validation. A row is checked by the constraint table of the C side, the
FMHAI_*_CONSTRAINTS lists of include/fmha_tile/policy, and the wildcard
expansion into the tuned rows, by compiling the rows with the host C
compiler (cc -fsyntax-only, the library's host-only mode: no nvcc, no GPU):
the build's own static assertions, one kernel set per row, so an error names
its row. InvalidRowError carries the constraint's name and message; the
columns Python can check alone (tokens, numbers) are checked first.

Cache. The library is kept in $FMHA_TILE_CACHE, else
$XDG_CACHE_HOME/fmha_tile, else ~/.cache/fmha_tile, under jit/<key>/, where
key hashes the rows (sorted; selection does not depend on their order), the
library version and a hash of its sources (include/, src/), the nvcc
version, the archs and the compile flags. A second build() of the same rows
loads the cached library without running the compiler. Builds go to a
temporary directory renamed into place, so concurrent builds do not see
each other's half-written files.

Errors: InvalidRowError (a ValueError) for a bad row; FmhaBuildError (a
RuntimeError) when nvcc is missing, an arch is unsupported, the library's
sources are not found or a compile fails (its output included).
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from . import _lib

__all__ = ["ANY", "KernelSet", "InvalidRowError", "FmhaBuildError", "SUPPORTED_ARCHS",
           "cache_dir", "find_nvcc", "source_root"]

# ---- the columns of a row ----------------------------------------------------------------
ANY = "FMHA_ANY"
"""The wildcard of the tile_m, tile_n, warps, stages (and page) columns."""

COLUMNS = ("family", "dtype", "hdim", "mask", "softcap", "alibi_or_page", "tile_m", "tile_n",
           "warps", "stages")

# The column tokens of kernel_set.h / bwd_set.h (FMHAI_FAM_*, FMHAI_DT_*,
# FMHAI_ON_*); tests/test_jit_host.py checks these lists against the headers.
# Families whose column 6 is the KV page size take a number or FMHA_ANY
# there; the others take NOALIBI / ALIBI (FWD, BWD and BWD_DET rows also
# BIAS, the elementwise bias).
FAMILIES = ("FWD", "PREFILL", "PREFILL_VEC", "DECODE", "DECODE_VEC", "BWD", "BWD_DET",
            "BWD_DOT_DO_O", "BWD_CONVERT_DQ")
PAGE_FAMILIES = ("PREFILL", "PREFILL_VEC", "DECODE", "DECODE_VEC")
BIAS_FAMILIES = ("FWD", "BWD", "BWD_DET")
DTYPES = ("FP16", "BF16", "FP8")
MASKS = ("NOMASK", "MASK")
SOFTCAPS = ("NOSOFTCAP", "SOFTCAP")
ALIBIS = ("NOALIBI", "ALIBI", "BIAS", "DROPOUT")   # BIAS: elementwise bias, FWD and dq_dk_dv rows only;
                                                   # DROPOUT: dropout compiled in, FWD rows only

# The archs the library is built for (the Makefile's FMHA_TILE_ARCHS): sm_80
# code runs on every sm_8x GPU (the portable pipeline), sm_90a on Hopper
# (its wgmma pipeline, with the portable one as fallback).
SUPPORTED_ARCHS = ("sm_80", "sm_90a")

# What the Makefile's LIB_FLAGS give every unit of the shared library.
NVCC_FLAGS = ("-x", "cu", "-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-Xcompiler",
              "-fvisibility=hidden", "--compress-mode=size")

# Where nvcc is looked for after $NVCC, PATH and $CUDA_HOME/bin.
NVCC_FALLBACKS = ("/usr/local/cuda/bin/nvcc",)

ROWS_HEADER = "fmha_jit_rows.h"
LIB_FILE = "libfmha_tile_jit.so"
KEY_FORMAT = 1          # bump when the generated files change meaning


class InvalidRowError(ValueError):
    """A kernel-set row the library would not build.

    Attributes: row (the row as C text, X(...)), constraint (the name of the
    failed constraint, e.g. tile_m_16_or_32_rows_per_warp, or column_<name>
    for a column Python rejects), message (why), violations (every
    (constraint, message) the compiler reported for the row)."""

    def __init__(self, row, constraint, message, violations=None):
        self.row = row
        self.constraint = constraint
        self.message = message
        self.violations = list(violations or [(constraint, message)])
        super().__init__("fmha_tile: invalid kernel-set row %s: constraint %s violated: %s"
                         % (row, constraint, message))


class FmhaBuildError(RuntimeError):
    """A kernel set could not be built (nvcc missing, unsupported arch, no
    sources, a failed compile)."""


# ---- rows ----------------------------------------------------------------------------------
def _is_any(x):
    return x is None or (isinstance(x, str) and x.strip().upper() in ("FMHA_ANY", "ANY"))


def _number(x, name, text):
    """An int column: an int or a string of digits (bool refused)."""
    if isinstance(x, bool):
        raise InvalidRowError(text, "column_" + name, "%s must be a number, got %r" % (name, x))
    if isinstance(x, int):
        return x
    if isinstance(x, str) and re.fullmatch(r"\s*\d+\s*", x):
        return int(x)
    raise InvalidRowError(text, "column_" + name, "%s must be a number, got %r" % (name, x))


def _hdim(x, text):
    """The hdim column: a number, or the Q_V token of unequal head dims
    ("192_128": hdim_q 192, hdim_v 128; kept as that token)."""
    if isinstance(x, str) and re.fullmatch(r"\s*\d+_\d+\s*", x):
        return x.strip()
    return _number(x, "hdim", text)


def _token(x, name, allowed, text):
    if isinstance(x, str) and x.strip().upper() in allowed:
        return x.strip().upper()
    raise InvalidRowError(text, "column_" + name, "%s must be one of %s, got %r"
                          % (name, ", ".join(allowed), x))


def _raw_text(cols):
    return "X(%s)" % ", ".join(str(c) for c in cols)


def normalize_row(cols):
    """A row (a sequence of the ten columns, or the C text "X(...)") as a
    tuple of canonical columns: tokens upper case, numbers int, wildcards
    "FMHA_ANY". Raises InvalidRowError for what Python can see alone."""
    if isinstance(cols, str):
        rows = parse_rows(cols)
        if len(rows) != 1:
            raise InvalidRowError(cols.strip(), "columns", "expected one row X(...), found %d"
                                  % len(rows))
        return rows[0]
    try:
        cols = tuple(cols)
    except TypeError:
        raise TypeError("a kernel-set row is a sequence of %d columns %s or the C text "
                        "\"X(...)\", got %r" % (len(COLUMNS), COLUMNS, cols)) from None
    text = _raw_text(cols)
    if len(cols) != len(COLUMNS):
        raise InvalidRowError(text, "columns", "a row has %d columns (%s), got %d"
                              % (len(COLUMNS), ", ".join(COLUMNS), len(cols)))
    fam = _token(cols[0], "family", FAMILIES, text)
    dt = _token(cols[1], "dtype", DTYPES, text)
    hd = _hdim(cols[2], text)
    mask = _token(cols[3], "mask", MASKS, text)
    sc = _token(cols[4], "softcap", SOFTCAPS, text)
    if fam in PAGE_FAMILIES:
        c6 = ANY if _is_any(cols[5]) else _number(cols[5], "page", text)
    else:
        c6 = _token(cols[5], "alibi", ALIBIS, text)
        if c6 == "BIAS" and fam not in BIAS_FAMILIES:
            raise InvalidRowError(text, "column_alibi", "BIAS (elementwise bias) is a column value of FWD, BWD and "
                                  "BWD_DET rows only")
        if c6 == "DROPOUT" and fam != "FWD":
            raise InvalidRowError(text, "column_alibi", "DROPOUT (dropout compiled in) is a column value of FWD "
                                  "rows only")
    tiles = tuple(ANY if _is_any(c) else _number(c, n, text)
                  for c, n in zip(cols[6:], COLUMNS[6:]))
    return (fam, dt, hd, mask, sc, c6) + tiles


def row_text(row):
    """The C text of a normalized row: X(FWD, BF16, 128, ...)."""
    return _raw_text(row)


def parse_rows(text):
    """Rows from C text: every X(...) in it (a LIST macro body pasted from C,
    comments and line continuations included)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    found = re.findall(r"\bX\s*\(([^()]*)\)", text)
    return [normalize_row([c.strip() for c in body.split(",")]) for body in found]


def part_name(family):
    """The name of a family's part (translation unit): its token in lower case."""
    return family.lower()


# ---- where things are ---------------------------------------------------------------------------
def source_root():
    """The fmha_tile source tree (include/ and src/): $FMHA_TILE_ROOT, else
    the tree this package sits in (python/fmha_tile/../..)."""
    root = os.environ.get("FMHA_TILE_ROOT")
    if not root:
        root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    for need in ("include/fmha_tile.h", "src/fmha_tile_lib.cu", "src/fmha_tile_lib_part.cu",
                 "src/fmha_tile_lib_decode.cu", "src/lib_parts.h"):
        if not os.path.isfile(os.path.join(root, need)):
            raise FmhaBuildError("fmha_tile.jit: the library's sources are not in %s (%s is "
                                 "missing); set FMHA_TILE_ROOT to the fmha_tile source tree"
                                 % (root, need))
    return root


def cache_dir():
    """$FMHA_TILE_CACHE, else $XDG_CACHE_HOME/fmha_tile, else ~/.cache/fmha_tile."""
    d = os.environ.get("FMHA_TILE_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fmha_tile")


def find_nvcc(nvcc=None):
    """The nvcc to use: the argument, $NVCC, nvcc on PATH, $CUDA_HOME/bin/nvcc,
    /usr/local/cuda/bin/nvcc. FmhaBuildError when there is none."""
    tried = []
    cands = [nvcc] if nvcc else []
    if not nvcc:
        if os.environ.get("NVCC"):
            cands.append(os.environ["NVCC"])
        cands.append(shutil.which("nvcc"))
        for var in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(var):
                cands.append(os.path.join(os.environ[var], "bin", "nvcc"))
        cands.extend(NVCC_FALLBACKS)
    for c in cands:
        if not c:
            continue
        path = c if os.sep in c else shutil.which(c)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        tried.append(c)
    raise FmhaBuildError("fmha_tile.jit: nvcc not found (tried: %s); install the CUDA toolkit, "
                         "put nvcc on PATH, or set NVCC or CUDA_HOME"
                         % (", ".join(tried) or "nothing"))


def find_cc():
    """The host C compiler that checks rows: $CC, else cc, gcc, clang."""
    for c in ([os.environ["CC"]] if os.environ.get("CC", "").strip() else []) + ["cc", "gcc", "clang"]:
        words = c.split()
        path = shutil.which(words[0])
        if path:
            return [path] + words[1:]
    raise FmhaBuildError("fmha_tile.jit: no C compiler (cc, gcc or clang; or $CC) to check the "
                         "rows against the library's constraints")


_tool_memo = {}
_tool_lock = threading.Lock()


def _tool_output(cmd):
    """Output of a version query, once per process per command."""
    key = tuple(cmd)
    with _tool_lock:
        if key in _tool_memo:
            return _tool_memo[key]
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise FmhaBuildError("fmha_tile.jit: `%s` failed: %s" % (" ".join(cmd), e)) from None
    with _tool_lock:
        _tool_memo[key] = out
    return out


def nvcc_version(nvcc, cache=None):
    """The `nvcc --version` text (part of the cache key). Asked once per
    process, and with cache (a directory) kept there per nvcc binary (its
    real path, size and modification time), so that a build found in the
    cache runs no nvcc at all."""
    if cache is None:
        return _tool_output([nvcc, "--version"]).strip()
    try:
        st = os.stat(os.path.realpath(nvcc))
        ident = "%s|%d|%d" % (os.path.realpath(nvcc), st.st_size, st.st_mtime_ns)
    except OSError:
        return _tool_output([nvcc, "--version"]).strip()
    memo = os.path.join(cache, "nvcc_versions.json")
    try:
        with open(memo) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    if ident in known:
        return known[ident]
    text = _tool_output([nvcc, "--version"]).strip()
    known[ident] = text
    try:
        os.makedirs(cache, exist_ok=True)
        tmp = "%s.%d.tmp" % (memo, os.getpid())
        with open(tmp, "w") as f:
            json.dump(known, f, indent=1)
        os.replace(tmp, memo)
    except OSError:
        pass
    return text


def _arch_list(archs):
    if isinstance(archs, str):
        archs = archs.replace(",", " ").split()
    out = []
    for a in archs:
        a = str(a).strip()
        if a not in SUPPORTED_ARCHS:
            raise FmhaBuildError("fmha_tile.jit: unsupported arch %r: fmha_tile builds for %s "
                                 "(sm_80 code runs on every sm_8x GPU, sm_90a on Hopper)"
                                 % (a, " and ".join(SUPPORTED_ARCHS)))
        if a not in out:
            out.append(a)
    if not out:
        raise FmhaBuildError("fmha_tile.jit: no arch given")
    return tuple(sorted(out))


def arch_of_capability(major, minor):
    """The arch a GPU of compute capability major.minor runs (FmhaBuildError
    for one fmha_tile does not build for)."""
    if major == 8:
        return "sm_80"
    if (major, minor) == (9, 0):
        return "sm_90a"
    raise FmhaBuildError("fmha_tile.jit: unsupported arch sm_%d%d (the current GPU): fmha_tile "
                         "builds for %s" % (major, minor, " and ".join(SUPPORTED_ARCHS)))


def default_archs():
    """$FMHA_TILE_ARCHS (e.g. "sm_90a" or "sm_80 sm_90a"), else the arch of
    PyTorch's current CUDA device."""
    env = os.environ.get("FMHA_TILE_ARCHS")
    if env:
        return _arch_list(env)
    try:
        import torch
        if torch.cuda.is_available():
            return (arch_of_capability(*torch.cuda.get_device_capability()),)
    except ImportError:
        pass
    raise FmhaBuildError("fmha_tile.jit: no GPU to take the arch from: pass archs= (%s) or set "
                         "FMHA_TILE_ARCHS" % ", ".join(SUPPORTED_ARCHS))


def gencode_flags(archs):
    """-gencode options of the archs, as the Makefile writes them."""
    return ["-gencode=arch=compute_%s,code=%s" % (a[3:], a) for a in archs]


def source_hash(root):
    """sha256 of the library's sources a build reads (include/, src/)."""
    h = hashlib.sha256()
    for sub in ("include", "src"):
        base = os.path.join(root, sub)
        files = []
        for d, _, names in os.walk(base):
            files.extend(os.path.join(d, n) for n in names if n.endswith((".h", ".cu")))
        for f in sorted(files):
            h.update(os.path.relpath(f, root).replace(os.sep, "/").encode())
            h.update(b"\0")
            with open(f, "rb") as fh:
                h.update(fh.read())
            h.update(b"\0")
    return h.hexdigest()


def library_version(root):
    """The version the library's main unit reports (FMHA_TILE_LIB_VERSION_BASE)."""
    with open(os.path.join(root, "src", "fmha_tile_lib.cu")) as f:
        m = re.search(r'#define\s+FMHA_TILE_LIB_VERSION_BASE\s+"([^"]*)"', f.read())
    return m.group(1) if m else "unknown"


# ---- validation: the C side's constraint table, through the host C compiler --------------------
_C_CONSTRAINT = re.compile(r"fmha_tile constraint (\w+) violated: (.*)")
_C_NO_TUNED = "no tuned row matches"


def check_source(rows):
    """The C file that checks rows: one kernel set per row, row i's on line
    i + 1 of the file "fmha_jit_rows" (#line), built in the library's
    host-only mode, where each row meets the same static assertions as in
    the nvcc build."""
    lines = ["/* fmha_tile.jit: the rows of a kernel set against the library's constraints */",
             '#include "fmha_tile.h"']
    for i, r in enumerate(rows):
        lines.append("#define FMHA_JIT_ROW_%d(X) %s" % (i, row_text(r)))
    lines.append('#line 1 "fmha_jit_rows"')
    for i in range(len(rows)):
        lines.append("DECL_FMHA_KERNEL_SET(fmha_jit_row_%d, FMHA_JIT_ROW_%d)" % (i, i))
    return "\n".join(lines) + "\n"


def _unescape(s):
    s = s.strip()
    if s.endswith('"'):
        s = s[:-1]
    return s.replace("\\'", "'").replace('\\"', '"')


def parse_diagnostics(text, nrows):
    """{row index: [(constraint, message), ...]} from the compiler's output
    for check_source(): each error goes to the row whose line it (or a note
    after it) names."""
    out = {}
    loc = re.compile(r'fmha_jit_rows:(\d+)(?::\d+)?:')
    cur = None        # [row or None, text]
    diags = []
    for line in text.splitlines():
        m = loc.search(line)
        if re.search(r"\berror\b:", line):
            cur = [int(m.group(1)) - 1 if m else None, line]
            diags.append(cur)
        elif cur is not None and cur[0] is None and m:
            cur[0] = int(m.group(1)) - 1
    for row, line in diags:
        if row is None or not 0 <= row < nrows:
            continue
        msg = line.split("error:", 1)[1].strip()
        m = _C_CONSTRAINT.search(msg)
        if m:
            v = (m.group(1), _unescape(m.group(2)))
        elif _C_NO_TUNED in msg:
            v = ("no_tuned_row", "no tuned row of include/fmha_tile/policy matches the columns "
                 "this wildcard row gives")
        elif "FMHAI_TILES_" in msg or "FMHAI_TTAB_" in msg:
            v = ("no_tuned_table", "the policy has no tuned tiles for this family, dtype and head "
                 "dim: give tile_m, tile_n, warps and stages")
        else:
            v = ("compile_error", msg)
        if v not in out.setdefault(row, []):
            out[row].append(v)
    # a row with a named constraint reports it before the compiler's follow-on errors
    for row, vs in out.items():
        vs.sort(key=lambda v: v[0] == "compile_error")
    return out


def check_rows(rows, root=None, cc=None):
    """Raise InvalidRowError for the first invalid row (its first failed
    constraint), checked by the library's own static assertions compiled
    with the host C compiler. rows: normalized rows."""
    rows = list(rows)
    if not rows:
        return
    root = root or source_root()
    cc = (cc.split() if isinstance(cc, str) else list(cc)) if cc else find_cc()
    with tempfile.TemporaryDirectory(prefix="fmha_tile_check_") as d:
        src = os.path.join(d, "check.c")
        with open(src, "w") as f:
            f.write(check_source(rows))
        cmd = cc + ["-std=c11", "-fsyntax-only", "-fmax-errors=0", "-ftrack-macro-expansion=0",
                    "-I" + os.path.join(root, "include"), src]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if r.returncode != 0 and "fmha_jit_rows" not in r.stdout and \
                re.search(r"(unrecognized|unknown|unsupported)[^\n]*-f(max-errors|track-macro)", r.stdout):
            # not gcc: its two options dropped (errors are still placed by their notes)
            cmd = [c for c in cmd if not c.startswith(("-fmax-errors", "-ftrack-macro"))]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True)
    if r.returncode == 0:
        return
    found = parse_diagnostics(r.stdout, len(rows))
    if not found:
        raise FmhaBuildError("fmha_tile.jit: the row check did not compile (%s):\n%s"
                             % (" ".join(cmd[:1]), r.stdout[-4000:]))
    i = min(found)
    c, m = found[i][0]
    raise InvalidRowError(row_text(rows[i]), c, m, found[i])


# ---- generated sources --------------------------------------------------------------------------
def group_by_part(rows):
    """[(part, family, rows)] in FAMILIES order."""
    out = []
    for fam in FAMILIES:
        rs = [r for r in rows if r[0] == fam]
        if rs:
            out.append((part_name(fam), fam, rs))
    return out


def rows_header(rows, set_name):
    """The text of fmha_jit_rows.h: FMHA_LIB_SET_NAME, FMHA_LIB_PARTS (one
    part per family) and FMHAI_LIB_ROWS_<part>, as src/lib_parts.h reads them."""
    parts = group_by_part(rows)
    out = ["/* %s: generated by fmha_tile.jit (python/fmha_tile/jit.py); do not edit." % ROWS_HEADER,
           " * Kernel set %s: %d rows in %d parts (src/lib_parts.h reads this in place of the"
           % (set_name, len(rows), len(parts)),
           " * library's default parts). */",
           "#define FMHA_LIB_SET_NAME \"%s\"" % set_name,
           "",
           "#define FMHA_LIB_PARTS(P, a) \\"]
    out += ["    P(%s, a)%s" % (p, " \\" if i + 1 < len(parts) else "")
            for i, (p, _, _) in enumerate(parts)]
    for p, _, rs in parts:
        out.append("")
        out.append("#define FMHAI_LIB_ROWS_%s(X) \\" % p)
        out += ["    %s%s" % (row_text(r), " \\" if i + 1 < len(rs) else "") for i, r in enumerate(rs)]
    return "\n".join(out) + "\n"


def unit_sources(rows, set_name):
    """{file name: text}: the rows header and the translation units, each a
    few lines that include one of the library's units (src/) with the
    generated header in place of the default parts."""
    head = ('#define FMHA_LIB_ROWS_HEADER "%s"\n' % ROWS_HEADER)
    files = {ROWS_HEADER: rows_header(rows, set_name)}
    for p, fam, rs in group_by_part(rows):
        files["part_%s.cu" % p] = (
            "/* Generated by fmha_tile.jit: part %s of kernel set %s (%d %s row%s). */\n"
            % (p, set_name, len(rs), fam, "" if len(rs) == 1 else "s")
            + head + "#define FMHA_LIB_PART %s\n#include \"fmha_tile_lib_part.cu\"\n" % p)
    files["lib_main.cu"] = (
        "/* Generated by fmha_tile.jit: the C API of kernel set %s, joining its parts. */\n"
        % set_name + head + "#include \"fmha_tile_lib.cu\"\n")
    files["lib_decode.cu"] = (
        "/* Generated by fmha_tile.jit: the decode entry point of kernel set %s. */\n"
        % set_name + head + "#include \"fmha_tile_lib_decode.cu\"\n")
    return files


def cache_key(rows, version, sources, nvcc_version_text, archs, flags=NVCC_FLAGS):
    """The hex key of a build: rows (sorted), the library version and source
    hash, the nvcc version, the archs and the flags."""
    blob = json.dumps({"format": KEY_FORMAT, "rows": [row_text(r) for r in sorted_rows(rows)],
                       "version": version, "sources": sources, "nvcc": nvcc_version_text,
                       "archs": list(archs), "flags": list(flags)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _row_sort_key(r):
    return (FAMILIES.index(r[0]), tuple((0, c) if isinstance(c, int) else (1, str(c)) for c in r[1:]))


def sorted_rows(rows):
    """Rows without duplicates in a canonical order (family order, then columns)."""
    return sorted(set(rows), key=_row_sort_key)


# ---- the compile -------------------------------------------------------------------------------
_say_lock = threading.Lock()


def _say(verbose, msg):
    """A progress line on stderr (whole lines, from any thread)."""
    if verbose:
        with _say_lock:
            sys.stderr.write(msg + "\n")
            sys.stderr.flush()


def _nvcc_error(unit, cmd, out):
    m = _C_CONSTRAINT.search(out)
    if m:
        return InvalidRowError("(in %s)" % unit, m.group(1), _unescape(m.group(2).split('"')[0]))
    tail = "\n".join(out.strip().splitlines()[-40:])
    return FmhaBuildError("fmha_tile.jit: nvcc failed on %s:\n  %s\n%s" % (unit, " ".join(cmd), tail))


def compile_units(workdir, files, nvcc, archs, root, jobs, verbose, runner=None):
    """Compile the generated units in workdir side by side (at most jobs
    compilers at once, a progress line per unit) and link LIB_FILE there.
    runner(cmd, cwd) -> (returncode, output) runs a command (tests pass a
    fake). Returns the library's path."""
    run = runner or _run_cmd
    units = sorted(n for n in files if n.endswith(".cu"))
    inc = ["-I" + os.path.join(root, "include"), "-I" + os.path.join(root, "src"), "-I" + workdir]
    gen = gencode_flags(archs)
    cmds = [(u, [nvcc] + list(NVCC_FLAGS) + inc + gen + ["-c", u, "-o", u[:-3] + ".o"])
            for u in units]
    t0 = time.time()
    _say(verbose, "fmha_tile.jit: compiling %d units for %s (%d at a time) in %s"
         % (len(units), " ".join(archs), jobs, workdir))
    done = [0]
    failure = []

    def one(item):
        unit, cmd = item
        t = time.time()
        rc, out = run(cmd, workdir)
        if rc != 0:
            failure.append(_nvcc_error(unit, cmd, out))
            return
        with _say_lock:
            done[0] += 1
            n = done[0]
        _say(verbose, "fmha_tile.jit: [%d/%d] %s (%.1f s)" % (n, len(units), unit, time.time() - t))

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        list(ex.map(one, cmds))
    if failure:
        raise failure[0]
    objs = [u[:-3] + ".o" for u in units]
    cuda_lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "lib64")
    link = [nvcc, "-shared", "-cudart", "shared"] + gen + objs + \
           ["-Xlinker", "-rpath," + cuda_lib, "-o", LIB_FILE]
    rc, out = run(link, workdir)
    if rc != 0:
        raise FmhaBuildError("fmha_tile.jit: link failed:\n  %s\n%s" % (" ".join(link), out[-4000:]))
    _say(verbose, "fmha_tile.jit: linked %s in %.1f s" % (LIB_FILE, time.time() - t0))
    return os.path.join(workdir, LIB_FILE)


def _remove_stale_builds(base, age_s=24 * 3600):
    """Remove the temporary directories of builds that died (a day old)."""
    now = time.time()
    for name in os.listdir(base):
        path = os.path.join(base, name)
        try:
            if ".tmp." in name and os.path.isdir(path) and now - os.path.getmtime(path) > age_s:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def _run_cmd(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    return r.returncode, r.stdout


# ---- the set ---------------------------------------------------------------------------------
_loaded = {}             # library path -> Library: a library is loaded once per process
_built = {}              # (rows, archs, nvcc, cache) -> Library, for build() in this process
_loaded_lock = threading.Lock()
_build_lock = threading.Lock()     # one build() at a time in a process


def load(path, name=None):
    """The Library at path (loaded once per process). Its name (default:
    the set name of the build.json beside it, fmha_jit_<key>) also works as
    kernels=."""
    with _loaded_lock:
        lib = _loaded.get(path)
        if lib is None:
            if name is None:
                try:
                    with open(os.path.join(os.path.dirname(path), "build.json")) as f:
                        name = json.load(f).get("set")
                except (OSError, ValueError):
                    name = None
            lib = _lib.Library.load(path, name)
            _loaded[path] = lib
        return lib


class KernelSet(object):
    """Rows of a kernel set declared from Python; build() compiles and loads them.

    rows: an iterable of rows, each the ten columns of DECL_FMHA_KERNEL_SET
    (family, dtype, hdim, mask, softcap, alibi or page, tile_m, tile_n,
    warps, stages) as a sequence (tokens as strings, numbers as ints,
    fmha_tile.ANY / "FMHA_ANY" / None for a wildcard) or the C text
    "X(...)"; or a string of C rows (KernelSet.parse). Duplicates are
    dropped and the order does not matter (selection does not depend on it).
    Columns Python can check are checked here (InvalidRowError); the C
    constraints are checked by validate() and build().
    """

    def __init__(self, rows):
        if isinstance(rows, str):
            rows = parse_rows(rows)
        self.rows = tuple(sorted_rows(normalize_row(r) for r in rows))
        if not self.rows:
            raise ValueError("fmha_tile.KernelSet: no rows")

    @classmethod
    def parse(cls, text):
        """A set from C text: every X(...) in it."""
        return cls(parse_rows(text))

    def __repr__(self):
        return "fmha_tile.KernelSet([%s])" % ", ".join("%r" % row_text(r) for r in self.rows)

    def __len__(self):
        return len(self.rows)

    def c_rows(self):
        """The rows as the body of a C LIST macro."""
        return " \\\n".join(row_text(r) for r in self.rows)

    def validate(self, cc=None):
        """Check every row against the library's constraints (the host C
        compiler in the library's host-only mode; cc: its command, default
        find_cc()); InvalidRowError names the first failing row's constraint."""
        check_rows(self.rows, cc=cc)

    def key(self, archs=None, nvcc=None, cache=None):
        """The cache key build() would use."""
        root = source_root()
        nv = find_nvcc(nvcc)
        return cache_key(self.rows, library_version(root), source_hash(root),
                         nvcc_version(nv, os.path.join(cache or cache_dir(), "jit")),
                         _arch_list(archs) if archs else default_archs())

    def compile(self, archs=None, nvcc=None, jobs=None, verbose=True, cache=None, runner=None):
        """Build (or find in the cache) the shared library of these rows;
        returns its path. archs: "sm_80", "sm_90a", or both (default:
        $FMHA_TILE_ARCHS, else the current GPU's); nvcc: its path (default:
        find_nvcc()); jobs: compilers at once (default: the CPU count);
        verbose: progress lines on stderr; cache: the cache directory
        (default cache_dir()). A cached library is returned without
        running the compiler."""
        root = source_root()
        archs = _arch_list(archs) if archs else default_archs()
        nv = find_nvcc(nvcc)
        version = library_version(root)
        base = os.path.join(cache or cache_dir(), "jit")
        nv_text = nvcc_version(nv, base)
        key = cache_key(self.rows, version, source_hash(root), nv_text, archs)
        final = os.path.join(base, key[:32])
        path = os.path.join(final, LIB_FILE)
        if os.path.isfile(path):
            _say(verbose, "fmha_tile.jit: cached %s" % path)
            return path
        # not cached: check the rows, the archs against this nvcc, then build
        check_rows(self.rows, root=root)
        codes = _tool_output([nv, "--list-gpu-code"]).split()
        for a in archs:
            if codes and a.rstrip("a") not in codes:
                raise FmhaBuildError("fmha_tile.jit: %s cannot build for %s (it lists: %s)"
                                     % (nv, a, " ".join(codes)))
        set_name = "fmha_jit_" + key[:12]
        files = unit_sources(self.rows, set_name)
        os.makedirs(base, exist_ok=True)
        _remove_stale_builds(base)
        work = tempfile.mkdtemp(prefix=key[:12] + ".tmp.", dir=base)
        try:
            for name, text in files.items():
                with open(os.path.join(work, name), "w") as f:
                    f.write(text)
            with open(os.path.join(work, "build.json"), "w") as f:
                json.dump({"set": set_name, "rows": [row_text(r) for r in self.rows],
                           "version": version, "archs": list(archs), "nvcc": nv_text,
                           "key": key}, f, indent=1)
            n = len([u for u in files if u.endswith(".cu")])
            jobs = jobs or int(os.environ.get("FMHA_TILE_JIT_JOBS", 0)) or os.cpu_count() or 1
            compile_units(work, files, nv, archs, root, min(jobs, n), verbose, runner)
            try:
                os.rename(work, final)
            except OSError:
                if not os.path.isfile(path):   # not a concurrent build of the same key
                    raise
                shutil.rmtree(work, ignore_errors=True)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return path

    def build(self, archs=None, nvcc=None, jobs=None, verbose=True, cache=None):
        """compile(), then load the library: an fmha_tile Library to pass as
        kernels=. In one process the same rows and arguments give the same
        Library without hashing or compiling again (a loaded library stays
        loaded), whichever KernelSet object asks."""
        k = (self.rows, tuple(archs) if isinstance(archs, (list, tuple)) else archs, nvcc,
             cache or os.environ.get("FMHA_TILE_CACHE"))
        with _build_lock:
            lib = _built.get(k)
            if lib is None:
                path = self.compile(archs=archs, nvcc=nvcc, jobs=jobs, verbose=verbose, cache=cache)
                lib = load(path)
                _built[k] = lib
        return lib
