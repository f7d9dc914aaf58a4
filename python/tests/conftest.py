"""pytest setup for python/tests: import the fmha_tile package from this
source tree (python/), whatever the current directory (host_util puts it on
sys.path)."""
import host_util  # noqa: F401
