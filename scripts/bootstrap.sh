#!/usr/bin/env bash
# Installs what Vortex needs to build and test on a Debian/Ubuntu machine, idempotently: apt packages
# only when one is missing (apt-get update only then), numpy + ml_dtypes for the Python oracles.
# Works as root, or through sudo when available. The CUDA toolkit is NOT installed here: the build
# auto-detects nvcc and builds the CUDA backend only when it is present.
set -euo pipefail

APT_PACKAGES=(cmake ninja-build g++ libgtest-dev nlohmann-json3-dev libcli11-dev libpng-dev libssl-dev
              libpcre2-dev libicu-dev libcpp-httplib-dev libsqlite3-dev python3 python3-pip clang clang-format
              pkg-config libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev libx264-dev)

log() { echo "bootstrap: $*"; }

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  SUDO=(none)
fi

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
else
  log "no dpkg here: not a Debian/Ubuntu system; checking tools only"
  for tool in cmake ninja g++ python3 clang-format; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    log "missing: ${missing[*]} (plus the headers of gtest, nlohmann-json, CLI11, libpng, OpenSSL, cpp-httplib, PCRE2, ICU, FFmpeg's libav* with libx264 and pkg-config); install them with your package manager"
    exit 1
  fi
fi

if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ "${SUDO[*]}" == "none" ]]; then
    log "missing packages: ${missing[*]}; run this script as root or install sudo"
    exit 1
  fi
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "apt packages present"
fi

# CMake >= 3.25 (CMakeLists.txt); older distributions can take it from pip.
cmake_version=$(cmake --version | head -n1 | awk '{print $3}')
if [[ "$(printf '%s\n3.25.0\n' "$cmake_version" | sort -V | head -n1)" != "3.25.0" ]]; then
  log "cmake $cmake_version is older than 3.25; installing a newer one with pip (user site)"
  python3 -m pip install --user cmake || python3 -m pip install --user --break-system-packages cmake
  export PATH="$HOME/.local/bin:$PATH"
fi

if python3 -c "import numpy, ml_dtypes" >/dev/null 2>&1; then
  log "python numpy + ml_dtypes present"
else
  log "installing numpy ml_dtypes (pip, user site)"
  pip_log=$(mktemp)
  if ! python3 -m pip install --user numpy ml_dtypes 2>"$pip_log"; then
    if grep -q "externally-managed-environment" "$pip_log"; then
      log "PEP 668 externally managed Python: retrying with --break-system-packages (user site only)"
      python3 -m pip install --user --break-system-packages numpy ml_dtypes
    else
      cat "$pip_log" >&2
      rm -f "$pip_log"
      exit 1
    fi
  fi
  rm -f "$pip_log"
fi
# NCCL header for the multi-GPU build (src/dist/nccl.cpp), only where the CUDA backend is built: the
# toolkit's or libnccl-dev's nccl.h when present, else the nvidia-nccl-cu13 wheel (its nvidia/nccl/include;
# CMake finds it through python3). libnccl.so.2 is loaded at run time, so nothing links against it.
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda_inc=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/../include
  if [[ -f "$cuda_inc/nccl.h" || -f /usr/include/nccl.h ]] || python3 -c "import nvidia.nccl" >/dev/null 2>&1; then
    log "nccl.h present"
  else
    log "installing nvidia-nccl-cu13 (pip, user site) for nccl.h"
    python3 -m pip install --user nvidia-nccl-cu13 || python3 -m pip install --user --break-system-packages nvidia-nccl-cu13
  fi
fi
log "done"
