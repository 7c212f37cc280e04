#!/usr/bin/env bash
# audio5's H200 call (one `run`, bash .carry/audio5/run.sh): the audio decoder's CUDA tests, audio_decode_bench of
# this branch against main's binary alternated A/B/A/B (main, branch with the per-tile conv1d sweep, main, branch),
# and diffusers 0.42.1's FP32 audio decode (TF32 off / on) in the same call. Evidence under $OUT.
set -u
root=$(pwd); c=$root/.carry/audio5; T0=$(date +%s)
cd "$c" && tar -xJf bin.tar.xz && tar -xJf mainbin.tar.xz && tar -xJf lib.tar.xz || { echo "untar failed"; exit 1; }
cd "$root"
export LD_LIBRARY_PATH="$c/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
# The test binaries carry the fixture paths of the worktree they were built in.
[ -e /work/wt/audio5 ] || { mkdir -p /work/wt && ln -s "$root" /work/wt/audio5; }
B=$c/bin M=$c/mainbin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
ldd $B/* $M/* 2>/dev/null | grep "not found" | sort -u | tee -a "$OUT/gpu.txt"
for t in "cuda_audio_decoder_ops_test" "cuda_vae_ops_test" "vae_cuda_parity_test --gtest_filter=CudaAudioParity*"; do
  timeout 60 $B/$t >> "$OUT/tests.log" 2>&1; echo "$t rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/tests.log"
done
mkdir -p "$OUT/main" "$OUT/branch"
timeout 40 $M/audio_decode_bench "$OUT/main" --reps 30 --no-ops > "$OUT/main_bench_1.log" 2>&1
echo "main audio_decode_bench (A1) rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/main_bench_1.log"
timeout 60 $B/audio_decode_bench "$OUT/branch" --reps 30 > "$OUT/audio_bench.log" 2>&1
echo "branch audio_decode_bench (B1, with the tile sweep) rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/audio_bench.log"
timeout 40 $M/audio_decode_bench "$OUT/main" --reps 30 --no-ops > "$OUT/main_bench_2.log" 2>&1
echo "main audio_decode_bench (A2) rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/main_bench_2.log"
timeout 40 $B/audio_decode_bench "$OUT/branch" --reps 30 --no-ops > "$OUT/branch_bench_2.log" 2>&1
echo "branch audio_decode_bench (B2) rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/branch_bench_2.log"
timeout 80 python3 "$c/audio_decode_diffusers.py" "$OUT/branch" --wheel "$c/diffusers-0.42.1-py3-none-any.whl" \
  --reps 20 > "$OUT/diffusers.log" 2>&1
echo "audio_decode_diffusers rc=$? at +$(( $(date +%s) - T0 )) s" | tee -a "$OUT/diffusers.log"
grep -E "^\[  (PASSED|FAILED)|FAILED|rc=|differ from|SNR|snr" "$OUT/tests.log" | head -30
grep -E "^\| (audio|all|stage0|sum|wall)" "$OUT/audio_bench.log" | head -40
grep -hE "^\| audio decode" "$OUT"/main_bench_*.log "$OUT/branch_bench_2.log"
tail -5 "$OUT/diffusers.log"
