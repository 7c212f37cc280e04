#!/usr/bin/env bash
# audio4's H200 call: the audio decoder's CUDA tests, audio_decode_bench (decode, op breakdown, conv1d layers FP32 vs
# FP64 chain) and diffusers' audio decode (TF32 off / on) in the same call. No FFmpeg (MP4 rows are the lead's run).
set -u
root=$(pwd); c=$root/.carry/audio4; T0=$(date +%s)
cd "$c" && tar -xJf bin.tar.xz && tar -xJf lib.tar.xz || { echo "untar failed"; exit 1; }
cd "$root"
export LD_LIBRARY_PATH="$c/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
# The test binaries carry the fixture paths of the worktree they were built in.
[ -e /work/wt/audio4 ] || { mkdir -p /work/wt && ln -s "$root" /work/wt/audio4; }
B=$c/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
ldd $B/* 2>/dev/null | grep "not found" | sort -u | tee -a "$OUT/gpu.txt"
for t in "cuda_audio_decoder_ops_test" "cuda_vae_ops_test" "vae_cuda_parity_test --gtest_filter=CudaAudioParity*"; do
  timeout 90 $B/$t >> "$OUT/tests.log" 2>&1; echo "$t rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/tests.log"
done
timeout 60 $B/audio_decode_bench "$OUT" --reps 30 > "$OUT/audio_bench.log" 2>&1
echo "audio_decode_bench rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/audio_bench.log"
timeout 70 python3 "$c/audio_decode_diffusers.py" "$OUT" --wheel "$c/diffusers-0.42.1-py3-none-any.whl" --reps 20 \
  > "$OUT/diffusers.log" 2>&1
echo "audio_decode_diffusers rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/diffusers.log"
grep -E "^\[  (PASSED|FAILED)|FAILED|rc=" "$OUT/tests.log" | head -30
grep -E "^\|" "$OUT/audio_bench.log" | head -80
tail -8 "$OUT/diffusers.log"
