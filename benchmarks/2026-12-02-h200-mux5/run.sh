#!/usr/bin/env bash
# mux5's H200 call (issue 30, decode + mux): FFmpeg's libraries were unpacked into .carry/ffx by the call before
# (ff_run.sh). bench/decode_mux_bench.sh of the mux5 branch (reps 2: libx264 at the default preset, h264_nvenc,
# auto, libx264@medium), then main's decode_mux_bench (72639a3: libx264 medium, its only preset) as the baseline.
set -u
root=$(pwd); c=$root/.carry/mux5; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
cd "$c" && tar -xJf bin.tar.xz && tar -xJf bin_main.tar.xz && tar -xJf lib.tar.xz || { echo "untar failed"; exit 1; }
ff=$root/.carry/ffx/ffc
[ -d "$ff" ] || { echo "no FFmpeg libraries at $ff"; exit 1; }
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$c/lib:$c/cj:$ff"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/gpu.txt"
echo "cpus $(nproc); $(grep -m1 'model name' /proc/cpuinfo)" >> "$OUT/gpu.txt"
ldd "$c/bin/decode_mux_bench" "$c/bin/libvortex_ffmpeg.so" | grep "not found" >> "$OUT/gpu.txt"
summary=$OUT/summary.txt; : > "$summary"
timeout 100 bash "$c/decode_mux_bench.sh" "$OUT/mux5" --bin "$c/bin" --ffmpeg-lib "$ff" -- --reps 2 > "$OUT/mux5.log" 2>&1
echo "mux5 rc=$? at +$(el) s" >> "$summary"
left=$(( 140 - $(el) ))
if [ $left -gt 30 ]; then
  timeout $left "$c/bin_main/decode_mux_bench" "$OUT/main" --backend cuda --vae full --frames 37 --reps 2 \
    --encoders libx264 --preset medium > "$OUT/main.log" 2>&1
  echo "main rc=$? at +$(el) s" >> "$summary"
fi
cd "$OUT" && tar -cf logs.tar mux5 main mux5.log main.log 2>/dev/null; cd "$root"
cat "$summary"; grep -A8 "^| what" "$OUT/mux5.log"; grep -A4 "^| what" "$OUT/main.log"
