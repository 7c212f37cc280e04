#!/usr/bin/env bash
# Configures and builds Vortex into build/ (Release, Ninja). The CUDA backend is built when nvcc is
# found (override with VORTEX_CUDA=ON|OFF; ON fails without nvcc); its targets come from VORTEX_CUDA_ARCHS
# (default: CMakeLists.txt's 90a;100a;120a;121a, one binary for every seed GPU; 90a alone builds about a
# quarter as much device code, docs/architectures.md) and VORTEX_CUDA_PTX. Parallelism from BUILD_JOBS (default:
# all cores). Usage: bash scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
jobs="${BUILD_JOBS:-$(nproc)}"
archs=()
[[ -n "${VORTEX_CUDA_ARCHS:-}" ]] && archs=(-DVORTEX_CUDA_ARCHS="$VORTEX_CUDA_ARCHS")
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVORTEX_CUDA="${VORTEX_CUDA:-AUTO}" "${archs[@]}" "$@"
cmake --build build -j "$jobs"
