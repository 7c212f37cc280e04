#!/usr/bin/env bash
# Lead's integrated H200 call of the merged tree (session 5): FFmpeg's libraries were unpacked into .carry/ffx by the
# call before (benchmarks/2026-12-02-h200-final4/ff_run.sh). Then, each under a time guard: the vision tower against
# transformers (bench/fl2va_encoders_bench.cpp + bench/fl2va_encoders_peer.py), decode + mux per encoder
# (bench/decode_mux_bench.sh), the audio decode (bench/audio_decode_bench.cpp), every GPU test
# (scripts/gpu-check.sh --part tests --policies sm90), and diffusers' audio decode if time is left.
set -u
root=$(pwd); c=$root/.carry/final5; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
cd "$c" && tar -xJf bin.tar.xz && tar -xJf lib.tar.xz || { echo "untar failed"; exit 1; }
cd "$root"
ff=$root/.carry/ffx/ffc
[ -d "$ff" ] || { echo "no FFmpeg libraries at $ff"; ff=""; }
for py in python3; do
  d=$($py -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for l in "$d"/*/lib; do LD_LIBRARY_PATH="$l:${LD_LIBRARY_PATH:-}"; done
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$c/bin:$c/lib:$c/cj${ff:+:$ff}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export VORTEX_VAE_FIXTURES="$root/tests/vae/fixtures" VORTEX_VISION_FIXTURES="$root/tests/vision/fixtures"
export VORTEX_TE_FIXTURES="$root/tests/text_encoder/fixtures"
# The test binaries carry the fixture paths of the tree they were built in: that path is linked to this checkout.
[ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
mkdir -p build && rm -rf build/bin && ln -s "$c/bin" build/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/gpu.txt"
echo "cpus $(nproc); git $(cat $c/commit.txt)" >> "$OUT/gpu.txt"
ldd build/bin/vortex build/bin/libvortex.so build/bin/libvortex_ffmpeg.so | grep "not found" >> "$OUT/gpu.txt"
summary=$OUT/summary.txt; : > "$summary"
mkdir -p "$OUT/vision" "$OUT/audio"
# 1. The vision tower for 2 keyframes against transformers, same GPU.
timeout 70 build/bin/fl2va_encoders_bench "$OUT/vision" --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --reps 20 --skip-vae > "$OUT/vision/bench.log" 2>&1
echo "vision bench rc=$? at +$(el) s" >> "$summary"
timeout 60 python3 bench/fl2va_encoders_peer.py --only vision --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --out "$OUT/vision/peer.json" --reps 20 > "$OUT/vision/peer.log" 2>&1
echo "vision peer rc=$? at +$(el) s" >> "$summary"
# 2. Decode + mux per encoder against the video decode alone.
if [ -n "$ff" ]; then
  timeout 110 bash bench/decode_mux_bench.sh "$OUT/mux" --bin build/bin --ffmpeg-lib "$ff" -- --reps 2 \
    --encoders libx264,h264_nvenc,auto,libx264@medium > "$OUT/mux.log" 2>&1
  echo "decode_mux rc=$? at +$(el) s" >> "$summary"
fi
# 3. The audio decode with the tile rule.
timeout 40 build/bin/audio_decode_bench "$OUT/audio" --reps 30 --no-ops > "$OUT/audio/bench.log" 2>&1
echo "audio bench rc=$? at +$(el) s" >> "$summary"
# 4. Every GPU test under the device's own policy.
left=$(( 560 - $(el) ))
timeout $left bash scripts/gpu-check.sh --bin build/bin --part tests --policies sm90 --work "$root/gc" > "$OUT/gpu-check.log" 2>&1
echo "gpu-check tests rc=$? at +$(el) s" >> "$summary"
grep -E "rc=|FAILED" "$OUT/gpu-check.log" | grep -v "rc=0 " | head -20 >> "$summary"
# 5. diffusers' FP32 audio decode, if time is left.
left=$(( 585 - $(el) ))
if [ $left -gt 40 ]; then
  timeout $(( left - 10 )) python3 bench/audio_decode_diffusers.py "$OUT/audio" \
    --wheel "$c/diffusers-0.42.1-py3-none-any.whl" --reps 20 > "$OUT/audio/diffusers.log" 2>&1
  echo "audio diffusers rc=$? at +$(el) s" >> "$summary"
fi
cd "$OUT" && tar -cf logs.tar vision audio mux mux.log gpu-check.log 2>/dev/null && rm -rf vision audio mux; cd "$root"
echo "gpu tests: $(grep -cE '_sm90 +rc=0 ' "$OUT/gpu-check.log") rc=0; not 0: $(grep -E '_sm90 +(rc=[1-9]|FAILED)' "$OUT/gpu-check.log" | tr '\n' ';')"
tail -4 "$OUT/mux.log" 2>/dev/null
cat "$summary"
