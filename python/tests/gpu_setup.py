"""The GPU test modules' shared preamble: torch with a CUDA GPU and the
shared library (make lib, or FMHA_TILE_LIB), or the calling module is
skipped at import (module level)."""
import pytest


def require_gpu_and_library():
    """-> torch; skips the importing module when something is missing."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU", allow_module_level=True)
    from fmha_tile import _lib
    try:
        _lib.library()
    except _lib.FmhaLibraryError as e:
        pytest.skip("libfmha_tile.so not available: %s" % str(e).splitlines()[0],
                    allow_module_level=True)
    return torch
