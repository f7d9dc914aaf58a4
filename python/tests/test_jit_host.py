"""Host tests of kernel sets declared from Python (fmha_tile.jit): no GPU, no
PyTorch, no pytest, no nvcc needed.

  - the column vocabulary against the headers' tokens, row normalisation
    and C-text parsing, column errors;
  - the generated sources: the rows header and the per-family units (text),
    and the rows header compiled with the host C compiler as src/lib_parts.h
    reads it;
  - validation by the library's constraints (the host C compiler): the
    failing constraint by name, the failing row among several;
  - cache keys; arch and nvcc errors;
  - build() with a stand-in nvcc (a script that logs its calls): one unit
    per family plus the main and decode units, progress lines, a second
    build of the same rows is a cache hit without compiler calls, a changed
    row rebuilds, an invalid row stops before nvcc, a failing unit is
    reported;
  - with a real nvcc (optional, FMHA_TILE_ARCHS or sm_90a): one row built,
    linked and loaded, its kernel set read back (JSON; no GPU needed).

Run as a script (make test: the last line is "N passed, M failed") or
under pytest (python/tests/run.sh). Uses cc (or $CC) for the C checks.
"""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import contextlib


# host_util first: it puts python/ on sys.path
from host_util import REPO, raised, run_tests, skip
from fmha_tile import jit, _lib

ANY = jit.ANY
FWD_ROW = ("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 1)
PREFILL_ROW = ("PREFILL", "BF16", 128, "MASK", "NOSOFTCAP", 16, ANY, ANY, ANY, ANY)


def have_cc():
    try:
        jit.find_cc()
        return True
    except jit.FmhaBuildError:
        return False


def need_cc():
    if not have_cc():
        skip("no C compiler (cc, gcc, clang or $CC)")


# ---- vocabulary and rows -----------------------------------------------------------------------
def header_tokens(prefix):
    found = set()
    for name in ("kernel_set.h", "bwd_set.h"):
        with open(os.path.join(REPO, "include", "fmha_tile", "dispatch", name)) as f:
            found |= set(re.findall(r"#define\s+%s(\w+)\s" % prefix, f.read()))
    return found


def test_vocabulary_matches_headers():
    assert set(jit.FAMILIES) == header_tokens("FMHAI_FAM_")
    assert set(jit.DTYPES) == header_tokens("FMHAI_DT_")
    assert set(jit.MASKS + jit.SOFTCAPS + jit.ALIBIS) == header_tokens("FMHAI_ON_")
    # the families whose column 6 is a page size expand through FMHAI_ROWS_PREFILL
    with open(os.path.join(REPO, "include", "fmha_tile", "dispatch", "kernel_set.h")) as f:
        text = f.read()
    paged = set(re.findall(r"#define FMHAI_ROWS_(\w+) FMHAI_ROWS_PREFILL\b", text)) | {"PREFILL"}
    assert paged == set(jit.PAGE_FAMILIES)


def test_normalize_row():
    r = jit.normalize_row(("fwd", "bf16", "128", "mask", "nosoftcap", "noalibi", None, "ANY",
                           "FMHA_ANY", ANY))
    assert r == ("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", ANY, ANY, ANY, ANY)
    assert jit.row_text(r) == "X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, " \
                              "FMHA_ANY, FMHA_ANY)"
    assert jit.normalize_row(jit.row_text(r)) == r
    p = jit.normalize_row(("PREFILL_VEC", "FP16", 64, "MASK", "SOFTCAP", None, 128, 64, 4, 1))
    assert p[5] == ANY and p[6:] == (128, 64, 4, 1)
    # unequal head dims (MLA): the Q_V token, kept as written
    m = jit.normalize_row("X(FWD, BF16, 192_128, MASK, NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)")
    assert m[2] == "192_128" and jit.normalize_row(jit.row_text(m)) == m


def test_parse_c_rows():
    text = """
    /* family dtype hdim ... */
    #define MY_KERNELS(X) \\
        X(FWD, BF16, 128, MASK,   NOSOFTCAP, NOALIBI, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY) \\
        X(FWD, FP16,  64, MASK,   NOSOFTCAP, NOALIBI, 128,      64,       4,        2)  // tuned
    """
    rows = jit.parse_rows(text)
    assert rows == [("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", ANY, ANY, ANY, ANY),
                    ("FWD", "FP16", 64, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 2)]
    assert jit.KernelSet.parse(text).rows == jit.KernelSet(rows).rows


def test_set_is_unordered_and_deduplicated():
    a = jit.KernelSet([FWD_ROW, PREFILL_ROW, FWD_ROW])
    b = jit.KernelSet([PREFILL_ROW, jit.row_text(FWD_ROW)])
    assert a.rows == b.rows and len(a) == 2
    assert a.rows[0][0] == "FWD"           # family order: FWD first
    raised(ValueError, jit.KernelSet, [])


def test_column_errors():
    cases = [
        (("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4), "columns"),
        (("ATTN", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 1), "column_family"),
        (("FWD", "FP32", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 1), "column_dtype"),
        (("FWD", "BF16", "big", "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 1), "column_hdim"),
        (("FWD", "BF16", 128, "CAUSAL", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 1), "column_mask"),
        (("FWD", "BF16", 128, "MASK", "NOSOFTCAP", 16, 128, 64, 4, 1), "column_alibi"),
        (("PREFILL", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 1), "column_page"),
        (("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, True, 1), "column_warps"),
        # the elementwise bias: FWD, BWD and BWD_DET rows only
        (("BWD_DOT_DO_O", "BF16", 128, "NOMASK", "NOSOFTCAP", "BIAS", "FMHA_ANY", "FMHA_ANY",
          "FMHA_ANY", "FMHA_ANY"), "column_alibi"),
    ]
    for row, name in cases:
        e = raised(jit.InvalidRowError, jit.KernelSet, [row])
        assert e.constraint == name, (row, e.constraint)
        assert "constraint %s violated" % name in str(e)
    raised(TypeError, jit.normalize_row, 5)
    for fam in ("FWD", "BWD", "BWD_DET"):   # BIAS rows of the dq_dk_dv families are valid
        row = (fam, "BF16", 128, "MASK", "NOSOFTCAP", "BIAS", "FMHA_ANY", "FMHA_ANY", "FMHA_ANY", "FMHA_ANY")
        assert jit.KernelSet([row]).rows[0][5] == "BIAS"


# ---- generated sources -------------------------------------------------------------------------
def test_rows_header_text():
    ks = jit.KernelSet([PREFILL_ROW, FWD_ROW])
    text = jit.rows_header(ks.rows, "fmha_jit_abc")
    assert '#define FMHA_LIB_SET_NAME "fmha_jit_abc"' in text
    assert "#define FMHA_LIB_PARTS(P, a) \\\n    P(fwd, a) \\\n    P(prefill, a)\n" in text
    assert ("#define FMHAI_LIB_ROWS_fwd(X) \\\n"
            "    X(FWD, BF16, 128, MASK, NOSOFTCAP, NOALIBI, 128, 64, 4, 1)\n") in text
    assert ("#define FMHAI_LIB_ROWS_prefill(X) \\\n"
            "    X(PREFILL, BF16, 128, MASK, NOSOFTCAP, 16, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)\n") in text


def test_unit_sources_text():
    ks = jit.KernelSet([PREFILL_ROW, FWD_ROW, FWD_ROW[:6] + (ANY,) * 4])
    files = jit.unit_sources(ks.rows, "fmha_jit_abc")
    assert sorted(files) == ["fmha_jit_rows.h", "lib_decode.cu", "lib_main.cu", "part_fwd.cu",
                             "part_prefill.cu"]
    assert files["part_fwd.cu"] == (
        "/* Generated by fmha_tile.jit: part fwd of kernel set fmha_jit_abc (2 FWD rows). */\n"
        '#define FMHA_LIB_ROWS_HEADER "fmha_jit_rows.h"\n'
        "#define FMHA_LIB_PART fwd\n"
        '#include "fmha_tile_lib_part.cu"\n')
    assert files["lib_main.cu"].endswith('#define FMHA_LIB_ROWS_HEADER "fmha_jit_rows.h"\n'
                                         '#include "fmha_tile_lib.cu"\n')
    assert files["lib_decode.cu"].endswith('#include "fmha_tile_lib_decode.cu"\n')
    # every include of a generated unit exists in src/
    for name, text in files.items():
        for inc in re.findall(r'#include "([^"]+)"', text):
            assert os.path.isfile(os.path.join(REPO, "src", inc)), inc


def test_rows_header_read_by_lib_parts():
    """The generated header, read through src/lib_parts.h as the library's
    units read it, declares one kernel set per part with the right rows
    (host C compiler, the library's host-only mode)."""
    need_cc()
    rows = [FWD_ROW, PREFILL_ROW, ("DECODE", "BF16", 128, "MASK", "SOFTCAP") + (ANY,) * 5,
            ("BWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI") + (ANY,) * 4]
    ks = jit.KernelSet(rows)
    files = jit.unit_sources(ks.rows, "fmha_jit_test")
    prog = r'''
#include <stdio.h>
#define FMHA_LIB_ROWS_HEADER "fmha_jit_rows.h"
#include "fmha_tile.h"
#include "lib_parts.h"
#define DECL_PART(n, a) DECL_FMHA_KERNEL_SET(part_##n, FMHAI_LIB_ROWS_##n)
FMHA_LIB_PARTS(DECL_PART, ~)
#define PRINT_PART(n, a) printf("%s %d %s\n", #n, fmha_set_size(&part_##n), \
                                fmha_set_kernel(&part_##n, 0)->name);
int main(void) { FMHA_LIB_PARTS(PRINT_PART, ~) printf("%s\n", FMHA_LIB_SET_NAME); return 0; }
'''
    d = tempfile.mkdtemp(prefix="fmha_jit_test_")
    try:
        with open(os.path.join(d, jit.ROWS_HEADER), "w") as f:
            f.write(files[jit.ROWS_HEADER])
        with open(os.path.join(d, "t.c"), "w") as f:
            f.write(prog)
        cc = jit.find_cc()
        r = subprocess.run(cc + ["-std=c11", "-I" + os.path.join(REPO, "include"),
                                 "-I" + os.path.join(REPO, "src"), "-I" + d, os.path.join(d, "t.c"),
                                 "-o", os.path.join(d, "t"), "-lm"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        assert r.returncode == 0, r.stdout[-3000:]
        out = subprocess.run([os.path.join(d, "t")], stdout=subprocess.PIPE,
                             universal_newlines=True).stdout.split("\n")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    parts = [line.split() for line in out if line.strip()]
    assert [p[0] for p in parts[:-1]] == ["fwd", "prefill", "decode", "bwd"], parts
    assert parts[0][1:] == ["1", "fmha_fwd_d128_bf16_mask_nsoftcap_nalibi_b128x64_w4_s1_portable_mma_sm80"]
    assert int(parts[1][1]) >= 1 and parts[1][2].startswith("fmha_batch_prefill_d128_bf16_mask_")
    assert int(parts[2][1]) >= 1 and parts[2][2].startswith("fmha_decode_d128_bf16_")
    assert int(parts[3][1]) >= 1 and parts[3][2].startswith("fmha_bwd_dq_dk_dv_d128_bf16_mask_")
    assert parts[-1] == ["fmha_jit_test"]


# ---- validation by the C constraints ---------------------------------------------------------------
def test_valid_rows_pass():
    need_cc()
    jit.KernelSet([FWD_ROW, PREFILL_ROW, FWD_ROW[:6] + (ANY,) * 4,
                   ("BWD_DOT_DO_O", "FP16", 64, "NOMASK", "NOSOFTCAP", "NOALIBI") + (ANY,) * 4,
                   ("DECODE_VEC", "BF16", 256, "MASK", "SOFTCAP") + (ANY,) * 5]).validate()


def test_invalid_rows_name_the_constraint():
    need_cc()
    cases = [
        (("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 100, 64, 4, 1),
         "tile_m_16_or_32_rows_per_warp", "tile_m must be 16*warps or 32*warps"),
        (("FWD", "BF16", 80, "MASK", "NOSOFTCAP", "NOALIBI", 64, 64, 4, 1),
         "hdim_32_64_96_128_192_256", "kernel head dim"),
        (("FWD", "BF16", 96, "MASK", "NOSOFTCAP", "NOALIBI", 64, 64, 4, 1),
         "threads_cover_row_chunks", "hdim/8"),
        (("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 128, 64, 4, 4), "stages_1_to_3", ""),
        (("FWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 48, ANY, ANY, ANY), "no_tuned_row", ""),
        (("PREFILL", "BF16", 192, "MASK", "NOSOFTCAP", ANY, ANY, ANY, ANY, ANY), "no_tuned_table", ""),
        (("PREFILL", "BF16", "192_128", "MASK", "NOSOFTCAP", 16, 96, 64, 6, 1),
         "hdim_v_below_hdim_contiguous_16bit", "contiguous 16-bit"),
        (("PREFILL", "BF16", 128, "MASK", "NOSOFTCAP", 24, 128, 64, 4, 1),
         "page_size_power_of_two", "power of two"),
        (("PREFILL_VEC", "BF16", 128, "MASK", "NOSOFTCAP", 16, 128, 32, 4, 1),
         "vectorized_tile_n_64_128", ""),
        (("PREFILL_VEC", "FP8", 128, "MASK", "NOSOFTCAP", ANY, ANY, ANY, ANY, ANY),
         "fp8_kv_linear_pages", ""),
        (("BWD_DET", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 64, 48, 3, 1),
         "bwd_det_even_warps", "even warp count"),
        (("BWD_DOT_DO_O", "BF16", 128, "NOMASK", "NOSOFTCAP", "ALIBI", ANY, ANY, ANY, ANY),
         "bwd_aux_no_features", "NOALIBI"),
        (("BWD", "BF16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 64, 128, 8, 3), "bwd_stages_1_or_2", ""),
    ]
    for row, name, text in cases:
        e = raised(jit.InvalidRowError, jit.KernelSet([row]).validate)
        assert e.constraint == name, (row, e.constraint, e.message)
        assert text in e.message, (row, e.message)
        assert e.row == jit.row_text(jit.normalize_row(row))
        assert str(e).startswith("fmha_tile: invalid kernel-set row X(")
        assert "constraint %s violated" % name in str(e)


def test_validate_with_a_given_compiler():
    need_cc()
    cc = jit.find_cc()
    jit.KernelSet([FWD_ROW]).validate(cc=" ".join(cc))
    e = raised(jit.InvalidRowError, jit.KernelSet([FWD_ROW[:9] + (4,)]).validate, cc=cc)
    assert e.constraint == "stages_1_to_3"


def test_invalid_row_among_valid_ones():
    """The error names the failing row, not its neighbours; every violated
    constraint of the row is listed."""
    need_cc()
    bad = ("FWD", "FP16", 128, "MASK", "NOSOFTCAP", "NOALIBI", 100, 64, 4, 1)
    ks = jit.KernelSet([FWD_ROW, bad, PREFILL_ROW, FWD_ROW[:6] + (ANY,) * 4])
    e = raised(jit.InvalidRowError, ks.validate)
    assert e.row == jit.row_text(bad)
    names = [c for c, _ in e.violations]
    assert names[0] == "tile_m_16_or_32_rows_per_warp" and "tiles_split_over_threads" in names


def test_parse_diagnostics():
    out = ("fmha_jit_rows:2:1: error: static assertion failed: \"fmha_tile constraint warps_1_to_8 "
           "violated: warps must be 1..8\"\n"
           "include/x.h:10:3: error: static assertion failed: \"fmha_tile constraint stages_1_to_3 "
           "violated: stages must be 1..3\"\n"
           "fmha_jit_rows:1:5: note: in expansion of macro\n"
           "fmha_jit_rows:3:21: error: expected ')' before 'FMHAI_TILES_FWDX_192'\n"
           "fmha_jit_rows:3:1: error: static assertion failed: \"fmha_tile: no tuned row matches "
           "this wildcard row\\'s columns\"\n")
    d = jit.parse_diagnostics(out, 3)
    assert d[1] == [("warps_1_to_8", "warps must be 1..8")]
    assert d[0] == [("stages_1_to_3", "stages must be 1..3")]          # located by its note
    assert [c for c, _ in d[2]] == ["no_tuned_table", "no_tuned_row"]


# ---- cache keys, archs, nvcc -----------------------------------------------------------------------
def test_cache_key():
    rows = jit.KernelSet([FWD_ROW, PREFILL_ROW]).rows
    k = jit.cache_key(rows, "0.1.0", "src1", "nvcc 13.0", ("sm_90a",))
    assert re.fullmatch(r"[0-9a-f]{64}", k)
    assert k == jit.cache_key(list(reversed(rows)), "0.1.0", "src1", "nvcc 13.0", ("sm_90a",))
    other = [jit.cache_key(jit.KernelSet([FWD_ROW[:9] + (2,), PREFILL_ROW]).rows, "0.1.0", "src1",
                           "nvcc 13.0", ("sm_90a",)),
             jit.cache_key(rows, "0.2.0", "src1", "nvcc 13.0", ("sm_90a",)),
             jit.cache_key(rows, "0.1.0", "src2", "nvcc 13.0", ("sm_90a",)),
             jit.cache_key(rows, "0.1.0", "src1", "nvcc 13.1", ("sm_90a",)),
             jit.cache_key(rows, "0.1.0", "src1", "nvcc 13.0", ("sm_80", "sm_90a"))]
    assert len(set(other + [k])) == len(other) + 1
    h = jit.source_hash(REPO)
    assert re.fullmatch(r"[0-9a-f]{64}", h) and h == jit.source_hash(REPO)
    assert re.fullmatch(r"\d+\.\d+\.\d+", jit.library_version(REPO))


def test_archs():
    assert jit._arch_list("sm_90a") == ("sm_90a",)
    assert jit._arch_list("sm_90a, sm_80") == ("sm_80", "sm_90a")
    assert jit.gencode_flags(("sm_80", "sm_90a")) == [
        "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"]
    e = raised(jit.FmhaBuildError, jit._arch_list, "sm_90")
    assert "unsupported arch 'sm_90'" in str(e) and "sm_80 and sm_90a" in str(e)
    assert jit.arch_of_capability(9, 0) == "sm_90a"
    assert jit.arch_of_capability(8, 6) == "sm_80"
    e = raised(jit.FmhaBuildError, jit.arch_of_capability, 10, 0)
    assert "unsupported arch sm_100" in str(e)


def test_nvcc_missing():
    e = raised(jit.FmhaBuildError, jit.find_nvcc, "/nonexistent/bin/nvcc")
    assert "nvcc not found" in str(e) and "/nonexistent/bin/nvcc" in str(e)
    # nowhere to be found: no $NVCC, PATH, $CUDA_HOME, fallback
    saved = {k: os.environ.get(k) for k in ("NVCC", "PATH", "CUDA_HOME", "CUDA_PATH")}
    fallbacks = jit.NVCC_FALLBACKS
    try:
        for k in saved:
            os.environ.pop(k, None)
        os.environ["PATH"] = tempfile.gettempdir() + "/fmha_jit_no_such_dir"
        jit.NVCC_FALLBACKS = ("/nonexistent/cuda/bin/nvcc",)
        e = raised(jit.FmhaBuildError, jit.find_nvcc)
        assert "nvcc not found" in str(e) and "set NVCC or CUDA_HOME" in str(e)
    finally:
        jit.NVCC_FALLBACKS = fallbacks
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    ks = jit.KernelSet([FWD_ROW])
    e = raised(jit.FmhaBuildError, ks.compile, archs="sm_90a", nvcc="/nonexistent/bin/nvcc",
               verbose=False, cache=tempfile.gettempdir())
    assert "nvcc not found" in str(e)


def test_handle_argument():
    e = raised(TypeError, _lib.handle, 42)
    assert "kernels must be" in str(e)
    e = raised(ValueError, _lib.handle, "fmha_jit_000000000000")
    assert "no kernel set of that name is loaded" in str(e)


# ---- build() with a stand-in nvcc -----------------------------------------------------------------
FAKE_NVCC = r'''#!%(python)s
"""A stand-in nvcc: logs its arguments, writes the outputs it is asked for."""
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_NVCC_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
if args == ["--version"]:
    print("Cuda compilation tools, release 99.0, V99.0.0 (fake)")
    sys.exit(0)
if args == ["--list-gpu-code"]:
    print("sm_80\nsm_90")
    sys.exit(0)
fail = os.environ.get("FAKE_NVCC_FAIL")
if fail and fail in args:
    print("%%s(1): error: something the test asked for" %% fail)
    sys.exit(2)
out = args[args.index("-o") + 1]
with open(out, "w") as f:
    f.write("fake")
'''


@contextlib.contextmanager
def fake_nvcc(fail=None):
    d = tempfile.mkdtemp(prefix="fmha_jit_fake_")
    nvcc = os.path.join(d, "nvcc")
    log = os.path.join(d, "log")
    with open(nvcc, "w") as f:
        f.write(FAKE_NVCC % {"python": sys.executable})
    os.chmod(nvcc, 0o755)
    open(log, "w").close()
    old = {k: os.environ.get(k) for k in ("FAKE_NVCC_LOG", "FAKE_NVCC_FAIL")}
    os.environ["FAKE_NVCC_LOG"] = log
    if fail:
        os.environ["FAKE_NVCC_FAIL"] = fail
    else:
        os.environ.pop("FAKE_NVCC_FAIL", None)

    def calls():
        with open(log) as f:
            return [json.loads(line) for line in f if line.strip()]
    try:
        yield nvcc, os.path.join(d, "cache"), calls
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(d, ignore_errors=True)


def builds(cache):
    """The build directories in a cache (not the nvcc version memo)."""
    return sorted(n for n in os.listdir(os.path.join(cache, "jit")) if not n.endswith(".json"))


def compiles(calls):
    return [c for c in calls if "-c" in c or "-shared" in c]


def test_build_with_stand_in_nvcc():
    need_cc()
    with fake_nvcc() as (nvcc, cache, calls):
        ks = jit.KernelSet([FWD_ROW, PREFILL_ROW])
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            path = ks.compile(archs="sm_90a", nvcc=nvcc, jobs=2, cache=cache)
        assert os.path.isfile(path) and path.endswith("/" + jit.LIB_FILE)
        d = os.path.dirname(path)
        assert os.path.dirname(d) == os.path.join(cache, "jit")
        assert builds(cache) == [os.path.basename(d)]        # no leftovers
        for name in ("fmha_jit_rows.h", "part_fwd.cu", "part_prefill.cu", "lib_main.cu",
                     "lib_decode.cu", "build.json"):
            assert os.path.isfile(os.path.join(d, name)), name
        with open(os.path.join(d, "build.json")) as f:
            info = json.load(f)
        assert info["rows"] == [jit.row_text(r) for r in ks.rows] and info["archs"] == ["sm_90a"]
        cs = compiles(calls())
        units = sorted(c[c.index("-c") + 1] for c in cs if "-c" in c)
        assert units == ["lib_decode.cu", "lib_main.cu", "part_fwd.cu", "part_prefill.cu"]
        for c in cs:
            assert "-gencode=arch=compute_90a,code=sm_90a" in c
        for c in cs[:-1]:
            assert "-I" + os.path.join(REPO, "src") in c and "-I" + os.path.join(REPO, "include") in c
            assert "--compress-mode=size" in c and "-fvisibility=hidden" in c
        link = cs[-1]
        assert link[:3] == ["-shared", "-cudart", "shared"] and link[-1] == jit.LIB_FILE
        lines = err.getvalue().splitlines()
        assert lines[0].startswith("fmha_tile.jit: compiling 4 units for sm_90a (2 at a time)")
        assert sorted(re.sub(r" \(.*", "", l.split("] ")[1]) for l in lines if "] " in l) == units
        assert [l for l in lines if re.match(r"fmha_tile.jit: \[4/4\] ", l)]
        assert lines[-1].startswith("fmha_tile.jit: linked %s" % jit.LIB_FILE)

        # the same rows again (another order, another object): a cache hit, no nvcc call,
        # in this process and in a fresh one (its version queries forgotten)
        n = len(calls())
        again = jit.KernelSet([PREFILL_ROW, FWD_ROW]).compile(archs="sm_90a", nvcc=nvcc, cache=cache,
                                                              verbose=False)
        assert again == path and len(calls()) == n
        jit._tool_memo.clear()
        again = jit.KernelSet([PREFILL_ROW, FWD_ROW]).compile(archs="sm_90a", nvcc=nvcc, cache=cache,
                                                              verbose=False)
        assert again == path and len(calls()) == n
        # the key is what compile() used
        assert os.path.basename(d) == ks.key(archs="sm_90a", nvcc=nvcc, cache=cache)[:32]

        # a changed row rebuilds, into another directory
        changed = jit.KernelSet([FWD_ROW[:9] + (2,), PREFILL_ROW])
        other = changed.compile(archs="sm_90a", nvcc=nvcc, cache=cache, verbose=False)
        assert other != path and len(compiles(calls())) == 2 * len(cs)

        # another arch is another library
        sm80 = ks.compile(archs="sm_80", nvcc=nvcc, cache=cache, verbose=False)
        assert sm80 not in (path, other)

        # a build that died a day ago leaves a temporary directory: the next build removes it
        dead = os.path.join(cache, "jit", "0123456789ab.tmp.dead")
        os.makedirs(dead)
        os.utime(dead, (0, 0))
        jit.KernelSet([FWD_ROW[:9] + (3,)]).compile(archs="sm_90a", nvcc=nvcc, cache=cache,
                                                   verbose=False)
        assert not os.path.exists(dead)

        # an invalid row stops before nvcc
        n = len(calls())
        bad = jit.KernelSet([FWD_ROW[:6] + (100, 64, 4, 1)])
        e = raised(jit.InvalidRowError, bad.compile, archs="sm_90a", nvcc=nvcc, cache=cache,
                   verbose=False)
        assert e.constraint == "tile_m_16_or_32_rows_per_warp"
        assert len(compiles(calls())) == len(compiles(calls()[:n]))


def test_build_failure_is_reported():
    need_cc()
    with fake_nvcc(fail="part_prefill.cu") as (nvcc, cache, calls):
        ks = jit.KernelSet([FWD_ROW, PREFILL_ROW])
        e = raised(jit.FmhaBuildError, ks.compile, archs="sm_90a", nvcc=nvcc, jobs=1, cache=cache,
                   verbose=False)
        assert "nvcc failed on part_prefill.cu" in str(e)
        assert "something the test asked for" in str(e)
        assert builds(cache) == []                           # nothing half-built is kept


def test_unsupported_arch_of_nvcc():
    need_cc()
    with fake_nvcc() as (nvcc, cache, calls):
        ks = jit.KernelSet([FWD_ROW])
        old = jit.SUPPORTED_ARCHS
        jit.SUPPORTED_ARCHS = old + ("sm_100a",)
        try:
            e = raised(jit.FmhaBuildError, ks.compile, archs="sm_100a", nvcc=nvcc, cache=cache,
                       verbose=False)
        finally:
            jit.SUPPORTED_ARCHS = old
        assert "cannot build for sm_100a" in str(e)


# ---- a real build (nvcc present; no GPU needed) -------------------------------------------------------
def test_real_build_one_row():
    try:
        nvcc = jit.find_nvcc()
    except jit.FmhaBuildError:
        skip("nvcc not found")
    need_cc()
    archs = os.environ.get("FMHA_TILE_ARCHS", "sm_90a")
    cache = tempfile.mkdtemp(prefix="fmha_jit_real_")
    try:
        ks = jit.KernelSet([FWD_ROW])
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            lib = ks.build(archs=archs, nvcc=nvcc, jobs=2, cache=cache)
        assert isinstance(lib, _lib.Library)
        assert ks.build(archs=archs, nvcc=nvcc, cache=cache) is lib
        import fmha_tile
        info = fmha_tile.kernels(kernels=lib)
        assert info["set"].startswith("fmha_jit_")
        assert lib.name == info["set"] and _lib.handle(lib.name) is lib     # by name, too
        assert [k["name"] for k in info["kernels"]] == [
            "fmha_fwd_d128_bf16_mask_nsoftcap_nalibi_b128x64_w4_s1_portable_mma_sm80"]
        assert fmha_tile.version(kernels=lib) == jit.library_version(REPO)
        # the decode entry point of a built set is its whole set
        from fmha_tile import _decode
        _, dset = _decode._fn(lib)
        assert dset == lib.set
    finally:
        shutil.rmtree(cache, ignore_errors=True)



if __name__ == "__main__":
    sys.exit(run_tests(globals()))
