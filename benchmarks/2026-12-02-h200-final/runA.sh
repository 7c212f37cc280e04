#!/usr/bin/env bash
# Lead's integrated H200 check, call A: every GPU test executable of the merged tree (sm90 policy), then the
# memory3 bench (one-shot generate from a 12-block checkpoint on disk: this tree's loader vs the 92d6333 baseline).
set -u
root=$(pwd); c=$root/.carry/final; T0=$(date +%s)
cd "$c" && tar -xJf bin.tar.xz && tar -xJf base.tar.xz && tar -xJf lib.tar.xz || { echo "untar failed"; exit 1; }
cd "$root"
export LD_LIBRARY_PATH="$c/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# The test binaries carry the fixture paths of the tree they were built in: that path is linked to this checkout.
[ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
mkdir -p build && rm -rf build/bin && ln -s "$c/bin" build/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
ldd build/bin/vortex build/bin/libvortex.so | grep "not found" | tee -a "$OUT/gpu.txt"
timeout 330 bash scripts/gpu-check.sh --bin build/bin --work "$OUT/gpu-check" --part tests --policies sm90 > "$OUT/gpu-check.log" 2>&1
echo "gpu-check rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/gpu-check.log"
export VORTEX_COMMIT=$(cat $c/commit.txt) VORTEX_BASELINE_COMMIT=92d6333 VORTEX_DIRTY=no
left=$(( 560 - ($(date +%s) - T0) ))
if [ "$left" -gt 150 ]; then
  timeout "$left" python3 bench/memory3_bench.py "$c/bin/vortex" "$c/base/vortex" "$OUT/memory" "$root/m3work" --layers 12 \
    --steps 3 --host-ram 2 --timeout 60 > "$OUT/memory-bench.txt" 2>&1
  echo "memory bench rc=$? at +$(( $(date +%s) - T0 )) s" >> "$OUT/memory-bench.txt"
else
  echo "memory bench skipped: $left s left" > "$OUT/memory-bench.txt"
fi
rm -rf "$root/m3work"
grep -E "PASS|FAIL|SKIP|passed|failed" "$OUT/gpu-check.log" | tail -45
grep -v '^{' "$OUT/memory-bench.txt" | tail -14
