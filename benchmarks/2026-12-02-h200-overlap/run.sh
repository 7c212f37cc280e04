#!/usr/bin/env bash
# overlap (issue 27) device call: one-shot generate from a 12-block checkpoint on disk, the sequential load order
# against the overlapped one (and the defaults), page cache dropped before each run. Evidence under $OUT.
set -uo pipefail
root=$(pwd); c=$root/.carry/overlap
cd "$c" && tar -xJf bin.tar.xz && tar -xJf lib.tar.xz || { echo "untar failed"; exit 1; }
cd "$root"
export LD_LIBRARY_PATH="$c/lib:${LD_LIBRARY_PATH:-}"
export VORTEX_COMMIT=$(cat $c/commit.txt) VORTEX_DIRTY=no PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
{ free -g; df -h "$root" /tmp; findmnt -T "$root"; nproc; uname -r; } >> "$OUT/gpu.txt" 2>&1
ldd $c/bin/vortex | grep "not found"
cp bench/memory2_bench.py bench/residency_bench.py "$c/"
timeout 215 python3 $c/memory4_bench.py $c/bin/vortex "$OUT" "$root/m4work" --layers 12 --steps 12 --timeout 65 2>&1 \
  | tee "$OUT/bench.txt" | grep -v '^{'
echo "bench rc=$? in $SECONDS s"; rm -rf "$root/m4work"
