# bench/bench_env.sh: sourced by the bench/run*.sh scripts (bash). Moves to the
# repository root and sets the variables they share from the environment or
# their defaults: ROOT, BUILD (build), OUT_DIR ($BUILD/bench), PYTHON
# (python3), NVCC (nvcc on PATH, else /usr/local/cuda/bin/nvcc).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
OUT_DIR="${OUT_DIR:-$BUILD/bench}"
PYTHON="${PYTHON:-python3}"
if [ -z "${NVCC:-}" ]; then
    if command -v nvcc >/dev/null 2>&1; then NVCC=nvcc
    elif [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc
    else NVCC=nvcc; fi
fi
