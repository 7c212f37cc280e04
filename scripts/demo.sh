#!/usr/bin/env bash
# The demo: bootstrap, build, then one h3-tiny generation on the CPU with synthetic weights and text,
# decoded at the end by synthetic decoders, into out/demo (replaced on every run): the latents, run.json
# and video.mp4 + audio.wav (noise, since the decoder weights are random). docs/outputs.md explains the files.
# It builds only what it runs (the CLI and its FFmpeg module; scripts/test.sh builds everything): on 2 cores
# a fresh CPU-only clone takes a few minutes, most of it compiling.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
BUILD_TARGETS="vortex_cli vortex_ffmpeg" bash scripts/build.sh
start=$(date +%s%N)
build/bin/vortex generate --config h3-tiny --synthetic --synthetic-text 16 \
  --width 448 --height 256 --frames 22 --steps 12 --sampler res_multistep --seed 42 \
  --backend cpu --synthetic-vae tiny --out out/demo --overwrite
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "demo: generate + decode took $((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000))) s;" \
  "out/demo/video.mp4 (H.264 + AAC) and audio.wav are noise (synthetic decoder weights);" \
  "out/demo/preview.png is a latent preview, out/demo/run.json the manifest"
