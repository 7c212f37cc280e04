#!/usr/bin/env bash
# Lead's integrated H200 check, call B (issue 30): vae_decode_bench of the merged tree (fused vs unfused residual
# norm, per-op breakdown, FP8 linears with PSNR, stereo audio; no MP4: the image lacks FFmpeg), then diffusers 0.42.1
# eager at the same shapes in the same call.
set -u
root=$(pwd); c=$root/.carry/final; T0=$(date +%s)
cd "$c" && { [ -d bin ] || tar -xJf bin.tar.xz; } && { [ -d lib ] || tar -xJf lib.tar.xz; } || { echo "untar failed"; exit 1; }
cd "$root"
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for l in "$d"/*/lib; do LD_LIBRARY_PATH="$l:${LD_LIBRARY_PATH:-}"; done
  break
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$c/lib"
export VORTEX_VAE_FIXTURES="$root/tests/vae/fixtures" PYTHONUNBUFFERED=1
mkdir -p "$OUT/vae"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
timeout 270 "$c/bin/vae_decode_bench" "$OUT/vae" --reps 3 --audio-reps 10 --no-mux --breakdown --fp8 \
  > "$OUT/vae_bench.log" 2>&1
echo "bench rc=$? at +$(( $(date +%s) - T0 )) s" >> "$OUT/vae_bench.log"
left=$(( 520 - ($(date +%s) - T0) ))
if [ "$left" -gt 60 ]; then
  timeout "$left" python3 bench/vae_decode_diffusers.py "$OUT/vae" --wheel "$c/diffusers-0.42.1-py3-none-any.whl" \
    --dtypes fp16 --reps 2 --audio-reps 10 > "$OUT/vae_decode_diffusers.log" 2>&1
  echo "diffusers rc=$? at +$(( $(date +%s) - T0 )) s" >> "$OUT/vae_decode_diffusers.log"
else
  echo "diffusers skipped: $left s left" > "$OUT/vae_decode_diffusers.log"
fi
grep -v "^\[vortex-cuda.*video decode [0-9]" "$OUT/vae_bench.log" | tail -40
tail -8 "$OUT/vae_decode_diffusers.log"
