#!/usr/bin/env bash
# overlap5 (issue 27) device call: one-shot generate from a 12-block checkpoint on disk with the default options
# (AdaLN projections in page-locked host memory), the sequential load order against the overlapped one, page cache
# dropped before each run; then, within the call's budget, a synthetic text encoder on disk beside the load.
set -uo pipefail
root=$(pwd); c=$root/.carry/overlap5
cd "$c" && tar -xJf bin.tar.xz && tar -xJf lib.tar.xz || { echo "untar failed"; exit 1; }
cd "$root"
export LD_LIBRARY_PATH="$c/bin:$c/lib:${LD_LIBRARY_PATH:-}"
export VORTEX_COMMIT=$(cat $c/commit.txt) VORTEX_DIRTY=no PYTHONUNBUFFERED=1
export VORTEX_CUDA_VERSION=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo "runtime $(nvidia-smi | grep -o 'CUDA Version: [0-9.]*')")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
{ free -g; df -h "$root" /tmp; findmnt -T "$root"; nproc; uname -r; } >> "$OUT/gpu.txt" 2>&1
ldd $c/bin/vortex | grep "not found"
cp $c/run.sh "$OUT/"
timeout 185 python3 $c/overlap_bench.py $c/bin/vortex "$OUT" "$root/o5work" --layers 12 --steps 12 \
  --index-json $c/fl2va_model_index.json --te-config $c/fl2va_te_config.json \
  --tokenizer-tar tests/text/fixtures/qwen_tokenizer.tar.xz --te-layers 6 --te-steps 4 --budget 178 --timeout 70 2>&1 \
  | tee "$OUT/bench.txt" | grep -v '^{'
echo "bench rc=$? in $SECONDS s"; rm -rf "$root/o5work"
