#!/usr/bin/env bash
# scripts/gpu-check.sh --part tests on stand-in binaries and a stand-in nvidia-smi (no GPU needed): it exits 1
# when a GPU test fails, exits 1 when a test skips for want of a device (a GPU machine must run every GPU test),
# and exits 0 only when every test passed. Usage: tests/tools/gpu_check_test.sh REPO
set -u
repo=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/path"
printf '#!/bin/sh\necho "NVIDIA H200, 580.00, 1980 MHz, 3201 MHz, 143771 MiB"\n' > "$tmp/path/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/vortex"
printf '#!/bin/sh\necho "[  PASSED  ] 3 tests."\n' > "$tmp/bin/pass_test"
printf '#!/bin/sh\necho "x_test.cpp:12: Skipped"\necho "no CUDA device: cudaGetDeviceCount returned cudaErrorNoDevice"\n' \
  > "$tmp/bin/skip_test"
printf '#!/bin/sh\necho "[  FAILED  ] X.Y"\nexit 1\n' > "$tmp/bin/fail_test"
chmod +x "$tmp"/path/* "$tmp"/bin/*
check() {  # check EXPECTED_RC NAME
  PATH="$tmp/path:$PATH" OUT= bash "$repo/scripts/gpu-check.sh" --bin "$tmp/bin" --work "$tmp/work-$2" --part tests \
    > "$tmp/$2.log" 2>&1
  local rc=$?
  if [ "$rc" -ne "$1" ]; then
    echo "FAIL: $2: gpu-check exited $rc, expected $1"
    cat "$tmp/$2.log"
    exit 1
  fi
  echo "ok: $2 -> exit $rc"
}
check 1 failing-test
rm "$tmp/bin/fail_test"
check 1 skipped-for-want-of-a-device
rm "$tmp/bin/skip_test"
check 0 all-pass
