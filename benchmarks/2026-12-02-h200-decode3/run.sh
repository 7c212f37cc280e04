#!/usr/bin/env bash
# One device call for issue 30 (decode3): the CUDA tests of the new kernels and paths (cuda_vae_ops_test,
# vae_cuda_parity_test), then vae_decode_bench (default = fused residual norm; unfused A/B; opt-in FP8 linears with
# PSNR; per-op device-time breakdown; stereo audio; decode_to_mp4 with libx264 medium and veryfast), then diffusers
# 0.42.1 eager at the same shapes in the same call (its rows carry the ratio vs the vortex-cuda rows).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$HERE"
T0=$(date +%s)
tar -xJf bin.tar.xz && tar -xJf lib.tar.xz || { echo "unpack failed"; exit 1; }
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for l in "$d"/*/lib; do LD_LIBRARY_PATH="$l:${LD_LIBRARY_PATH:-}"; done
  break
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$HERE/lib2:$HERE/lib"
export VORTEX_VAE_FIXTURES="$ROOT/tests/vae/fixtures"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/vae"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
for b in bin/libvortex_ffmpeg.so bin/libvortex.so bin/vae_decode_bench; do
  echo "== $b"; ldd "$b" | grep -i "not found"
done >> "$OUT/gpu.txt" 2>&1
echo "unpacked at +$(( $(date +%s) - T0 )) s"
for tl in cuda_vae_ops_test:50 vae_cuda_parity_test:40; do
  t=${tl%%:*}
  timeout "${tl##*:}" "bin/$t" --gtest_color=no > "$OUT/$t.log" 2>&1
  echo "rc=$?" >> "$OUT/$t.log"
  echo "=== $t"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|rc=|^\[cuda video" "$OUT/$t.log" | head -20
done
echo "tests done at +$(( $(date +%s) - T0 )) s"
timeout 150 bin/vae_decode_bench "$OUT/vae" --reps 3 --audio-reps 10 --mux-reps 1 --no-mux-auto --breakdown --fp8 \
  > "$OUT/vae_bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/vae_bench.log"
echo "bench done at +$(( $(date +%s) - T0 )) s"
left=$(( 285 - ($(date +%s) - T0) ))
if [ "$left" -gt 40 ]; then
  PYTHONUNBUFFERED=1 timeout "$left" python3 "$ROOT/bench/vae_decode_diffusers.py" "$OUT/vae" \
    --wheel "$HERE/diffusers-0.42.1-py3-none-any.whl" --dtypes fp16 --reps 2 --audio-reps 10 \
    > "$OUT/vae_decode_diffusers.log" 2>&1
  echo "diffusers rc=$?" >> "$OUT/vae_decode_diffusers.log"
else
  echo "diffusers skipped: $left s left" > "$OUT/vae_decode_diffusers.log"
fi
grep -v "^\[vortex-cuda.*video decode [0-9]" "$OUT/vae_bench.log" | tail -45
tail -8 "$OUT/vae_decode_diffusers.log"
