#!/usr/bin/env bash
# memory3 (issue 27) device call: one-shot generate from a checkpoint on disk, the direct-read loader (this branch)
# against the mapping loader (main f8753a8), the disk's raw rate in the same run. Run from the repo root; evidence
# under $OUT.
set -uo pipefail
root=$(pwd); c=$root/.carry/memory3
tar -xJf "$c/bin.tar.xz" -C "$c" && tar -xJf "$c/lib.tar.xz" -C "$c" || { echo "untar failed"; exit 1; }
export LD_LIBRARY_PATH="$c/lib:${LD_LIBRARY_PATH:-}"  # each vortex finds its own libvortex.so ($ORIGIN)
export VORTEX_COMMIT=$(cat $c/commit.txt) VORTEX_BASELINE_COMMIT=$(cat $c/base_commit.txt) VORTEX_DIRTY=no
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
{ free -g; df -h "$root" /dev/shm /tmp; findmnt -T "$root"; nproc; uname -r; } >> "$OUT/gpu.txt" 2>&1
ldd $c/mine/bin/vortex | grep "not found"; ldd $c/base/bin/vortex | grep "not found"
timeout 222 python3 $c/memory3_bench.py $c/mine/bin/vortex $c/base/bin/vortex "$OUT" "$root/m3work" --layers 12 \
  --steps 3 --host-ram 2 --timeout 60 2>&1 | tee "$OUT/bench.txt" | grep -v '^{'
echo "bench rc=$? in $SECONDS s"; rm -rf "$root/m3work"
