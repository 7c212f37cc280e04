#!/usr/bin/env bash
# Configures and builds Vortex into build/ (Release, Ninja). The CUDA backend is built when nvcc is
# found and an NVIDIA GPU is present (`nvidia-smi -L` lists one); VORTEX_CUDA=ON|OFF overrides that (ON fails
# without nvcc; CI sets ON to compile every target without a GPU). Its targets come from VORTEX_CUDA_ARCHS
# (default: CMakeLists.txt's 90a;100a;120a;121a, one binary for every seed GPU; 90a alone builds about a
# quarter as much device code, docs/architectures.md) and VORTEX_CUDA_PTX. Parallelism from BUILD_JOBS (default:
# all cores); BUILD_TARGETS (default: all) limits the build to those targets (the demo builds only the CLI and
# its FFmpeg module). Usage: bash scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
jobs="${BUILD_JOBS:-$(nproc)}"
archs=()
[[ -n "${VORTEX_CUDA_ARCHS:-}" ]] && archs=(-DVORTEX_CUDA_ARCHS="$VORTEX_CUDA_ARCHS")
cuda="${VORTEX_CUDA:-}"
if [[ -z "$cuda" ]]; then
  if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    cuda=ON
  else
    cuda=OFF
    echo "build.sh: no NVIDIA GPU with nvcc here: building the CPU backend only (VORTEX_CUDA=ON builds CUDA too)"
  fi
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVORTEX_CUDA="$cuda" "${archs[@]}" "$@"
targets=()
[[ -n "${BUILD_TARGETS:-}" ]] && read -r -a targets <<<"$BUILD_TARGETS" && targets=(--target "${targets[@]}")
cmake --build build -j "$jobs" "${targets[@]}"
