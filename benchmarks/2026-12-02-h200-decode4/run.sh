#!/usr/bin/env bash
# decode4's H200 call (issue 30, video decode): the clip-stitch kernel test and the CUDA decode parity tests, then
# vae_decode_bench of this branch (--breakdown, --fp8, --no-mux) and of main's binary (the baseline, same call),
# then diffusers 0.42.1 eager at the same shapes. Logs under $OUT; a short table last.
set -u
root=$(pwd); c=$root/.carry/decode4; T0=$(date +%s)
cd "$c" && mkdir -p new main && tar -xJf bin.tar.xz -C new && tar -xJf main.tar.xz -C main && tar -xJf lib.tar.xz \
  || { echo "untar failed"; exit 1; }
cd "$root"
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for l in "$d"/*/lib; do LD_LIBRARY_PATH="$l:${LD_LIBRARY_PATH:-}"; done
  break
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$c/lib"
export VORTEX_VAE_FIXTURES="$root/tests/vae/fixtures" PYTHONUNBUFFERED=1
mkdir -p "$OUT/vae" "$OUT/vae-main"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/tests.log" 2>&1
for t in cuda_video_stitch_test vae_cuda_parity_test cuda_vae_ops_test; do
  timeout 50 "$c/new/$t" > /tmp/t.log 2>&1; r=$?
  grep -E "^\[(cuda video|  (PASSED|FAILED|SKIPPED)|==========)|Failure|rc=" /tmp/t.log | tail -30 >> "$OUT/tests.log"
  echo "$t rc=$r at +$(( $(date +%s) - T0 )) s" | tee -a /tmp/tests.txt >> "$OUT/tests.log"
done
timeout 90 "$c/new/vae_decode_bench" "$OUT/vae" --reps 3 --audio-reps 2 --no-mux --no-variants --breakdown --fp8 \
  > "$OUT/vae_bench.log" 2>&1
echo "bench rc=$? at +$(( $(date +%s) - T0 )) s" >> "$OUT/vae_bench.log"
timeout 70 "$c/main/vae_decode_bench" "$OUT/vae-main" --reps 3 --audio-reps 2 --no-mux --no-variants --fp8 \
  > "$OUT/vae_bench_main.log" 2>&1
echo "main bench rc=$? at +$(( $(date +%s) - T0 )) s" >> "$OUT/vae_bench_main.log"
left=$(( 232 - ($(date +%s) - T0) ))
if [ "$left" -gt 30 ]; then
  timeout "$left" python3 bench/vae_decode_diffusers.py "$OUT/vae" --wheel "$c/diffusers-0.42.1-py3-none-any.whl" \
    --dtypes fp16 --reps 2 --audio-reps 2 > "$OUT/vae_decode_diffusers.log" 2>&1
  echo "diffusers rc=$? at +$(( $(date +%s) - T0 )) s" >> "$OUT/vae_decode_diffusers.log"
else
  echo "diffusers skipped: $left s left" > "$OUT/vae_decode_diffusers.log"
fi
cat /tmp/tests.txt
grep -v "video decode [0-9]" "$OUT/vae_bench.log" | tail -28
grep -v "video decode [0-9]" "$OUT/vae_bench_main.log" | tail -10
tail -6 "$OUT/vae_decode_diffusers.log"
