#!/usr/bin/env bash
# Configures and builds Vortex into build/ (Release, Ninja). The CUDA backend is built when nvcc is
# found (override with VORTEX_CUDA=ON|OFF); parallelism from BUILD_JOBS (default: all cores).
# Usage: bash scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
jobs="${BUILD_JOBS:-$(nproc)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVORTEX_CUDA="${VORTEX_CUDA:-AUTO}" "$@"
cmake --build build -j "$jobs"
