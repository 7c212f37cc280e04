#!/usr/bin/env bash
# From the last denoising step to a finished video.mp4, per H.264 encoder, against the video decode alone
# (bench/decode_mux_bench.cpp): the canonical request's latents (1344x768, 124 frames, audio [2, 32, 207]) through
# synthetic decoders of the released shapes on the GPU, decode_to_mp4 with --video-encoder libx264, h264_nvenc (a
# row with FFmpeg's error where NVENC is absent), auto (h264_nvenc, else libx264 with the fallback reason) and
# libx264@medium (the slower preset, for its cost).
# Evidence rows: OUT_DIR/<date>-<gpu>-decode-mux.jsonl. --cpu-tiny runs the same measurement on the CPU backend with
# the narrow CLI decoders and short latents (a check of the bench itself on a machine without a GPU).
#   bench/decode_mux_bench.sh OUT_DIR [--bin DIR] [--ffmpeg-lib DIR] [--cpu-tiny] [-- extra decode_mux_bench args]
set -euo pipefail

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}
[[ $# -ge 1 && "$1" != -* ]] || usage
out=$1
shift
bin=$(cd "$(dirname "$0")/.." && pwd)/build/bin
lib=""
mode=gpu
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --ffmpeg-lib) lib=$2; shift 2 ;;
    --cpu-tiny) mode=cpu; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "decode_mux_bench.sh: unknown argument $1" >&2; usage ;;
  esac
done
exe=$bin/decode_mux_bench
[[ -x $exe ]] || { echo "decode_mux_bench.sh: $exe not found (cmake --build build --target decode_mux_bench)" >&2; exit 2; }
# FFmpeg's shared libraries (and their dependencies) carried to a machine that lacks them.
[[ -z $lib ]] || export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"
if [[ $mode == gpu ]]; then
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  args=(--backend cuda --vae full --frames 37 --reps 3 --encoders libx264,h264_nvenc,auto,libx264@medium)
else
  args=(--backend cpu --vae tiny --frames 7 --width 256 --height 128 --reps 2 --encoders libx264,h264_nvenc,auto,libx264@medium)
fi
"$exe" "$out" "${args[@]}" "${extra[@]}" 2>&1 | tee "$out/decode_mux_bench.log"
