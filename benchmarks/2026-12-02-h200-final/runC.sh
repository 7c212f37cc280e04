#!/usr/bin/env bash
# Lead's integrated H200 check, call C (issue 25): block 24 and 12-step sampling, the merged tree (B) against the
# 92d6333 build (A, before the engine restructure), alternated in one call by bench/ab_binaries.sh.
set -u
root=$(pwd); c=$root/.carry/final
cd "$c" && { [ -d bin ] || tar -xJf bin.tar.xz; } && tar -xJf base.tar.xz && { [ -d lib ] || tar -xJf lib.tar.xz; } || exit 1
cd "$root"
export LD_LIBRARY_PATH="$c/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
timeout 400 bash bench/ab_binaries.sh "$c/base/vortex" "$c/bin/vortex" "$OUT/ab" 1 > "$OUT/ab.txt" 2>&1
echo "ab rc=$?" >> "$OUT/ab.txt"
tail -8 "$OUT/ab.txt"
