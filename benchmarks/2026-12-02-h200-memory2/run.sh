#!/usr/bin/env bash
# memory2 (issue 27) device call: streaming from disk, checkpoint load overlap, serve second prompt, 512x512x22 under
# --max-vram 24. Run from the repo root on the device; evidence under $OUT.
set -uo pipefail
root=$(pwd); c=$root/.carry/memory2
mkdir -p "$c/b" && tar -xJf "$c/bin.tar.xz" -C "$c/b" || { echo "untar failed"; exit 1; }
tar -xJf "$c/lib.tar.xz" -C "$c" && export LD_LIBRARY_PATH="$c/b/bin:$c/lib:${LD_LIBRARY_PATH:-}"
if [ ! -e /work/wt/memory2 ]; then mkdir -p /work/wt && ln -s "$root" /work/wt/memory2; fi
export VORTEX_COMMIT=$(cat $c/commit.txt) VORTEX_DIRTY=no PYTHONUNBUFFERED=1
V=$c/b/bin/vortex
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
{ free -g; df -h "$root" /dev/shm /tmp; findmnt -T "$root"; nproc; } >> "$OUT/gpu.txt" 2>&1
ldd $V | grep "not found"
t0=$SECONDS
timeout 250 python3 $c/memory2_bench.py $V "$OUT" "$root/m2work" --layers 12 --steps 3 --vram 13 --host-ram 4 \
  --phases synth,raw,ckpt --timeout 90 2>&1 | tee "$OUT/bench-ckpt.txt" | grep -v '^{'
echo "ckpt phases rc=$? in $((SECONDS - t0)) s"; rm -rf "$root/m2work"
t1=$SECONDS
(cd $c/b/bin && timeout 45 ./device_residency_test 2>&1 | tail -25) > "$OUT/tests.log"; echo "device_residency_test rc=$? in $((SECONDS - t1)) s"; tail -3 "$OUT/tests.log"
t2=$SECONDS
rem=$((385 - SECONDS)); [ $rem -gt 20 ] && timeout $rem python3 $c/memory2_bench.py $V "$OUT" "$root/m2work" --steps 3 \
  --phases s512,serve --timeout 75 2>&1 | tee "$OUT/bench-s512-serve.txt" | grep -v '^{'
echo "s512/serve rc=$? in $((SECONDS - t2)) s; total $SECONDS s"
