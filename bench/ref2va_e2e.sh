#!/usr/bin/env bash
# Canonical ref2va end to end: 2 images, 1 video with its sound, 1 audio clip (bench/media/ref2va/, made by
# bench/make_ref2va_media.py), 12 steps, 1344x768 x 124 frames, on H3's full-size synthetic weights (--config h3
# --synthetic: the Ref2VA transformer's shapes; synthetic prompt states) with full-size random VAEs
# (bench/make_reference_vaes.py: the video VAE's encoder on the images and frames, the audio VAE's on the soundtracks,
# both decoders for the output). Prints the packed row count and the stage times from run.json; everything goes under
# $OUT (the run folder, its run.json and a summary.json).
#   --tiny: the same request shape on the tiny synthetic snapshot (`vortex synth --snapshot tiny`) on the CPU, at
#           64x64 x 22 frames and 2 steps: a check of the script, not a measurement.
# Environment: STEPS (default 12), VORTEX (default build/bin/vortex), OUT (default out/ref2va_e2e), WORK (scratch for the VAE folders and
# the snapshot; default $TMPDIR/ref2va_e2e_work, else /tmp), PYTHON (python3 with torch and diffusers 0.42.1, for the VAE folders).
set -euo pipefail
cd "$(dirname "$0")/.."
VORTEX=${VORTEX:-build/bin/vortex}
OUT=${OUT:-out/ref2va_e2e}
WORK=${WORK:-${TMPDIR:-/tmp}/ref2va_e2e_work}
PYTHON=${PYTHON:-python3}
MEDIA=bench/media/ref2va
tiny=0
[[ "${1:-}" == "--tiny" ]] && tiny=1
mkdir -p "$OUT" "$WORK"
refs=(--ref "$MEDIA/image_wide.png" --ref "$MEDIA/image_tall.jpg" --ref "$MEDIA/clip_sound.mkv"
      --ref "audio:$MEDIA/voice.wav")
run="$OUT/run"
rm -rf "$run"
if [[ $tiny == 1 ]]; then
  snap="$WORK/snap_tiny"
  [[ -d "$snap" ]] || "$VORTEX" synth --snapshot tiny --seed 1 --out "$snap"
  "$VORTEX" generate --model "$snap" --prompt "a product shot of the character" --backend cpu \
    --width 64 --height 64 --frames 22 --steps 2 --seed 1 "${refs[@]}" --out "$run" 2>&1 | tee "$OUT/generate.log"
else
  vaes="$WORK/vaes"
  if [[ ! -d "$vaes/vae" || ! -d "$vaes/audio_vae" ]]; then
    rm -rf "$vaes"
    "$PYTHON" bench/make_reference_vaes.py --release tests/fixtures/release --out "$vaes"
  fi
  "$VORTEX" generate --config h3 --synthetic --backend cuda \
    --width 1344 --height 768 --frames 124 --steps "${STEPS:-12}" --seed 1 --vae "$vaes/vae" --audio-vae "$vaes/audio_vae" \
    "${refs[@]}" --out "$run" 2>&1 | tee "$OUT/generate.log"
fi
"${PYTHON_PLAIN:-python3}" - "$run/run.json" "$OUT/summary.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
geo, refs = run["geometry"], run["references"]
summary = {
    "task": run["task"],
    "packed_rows": geo.get("total_rows", geo.get("rows")),
    "reference_rows": {"visual": refs["visual_rows"], "audio": refs["audio_rows"]},
    "references": [{"kind": f["kind"], "sha256": f["sha256"], "used": f["used"]} for f in refs["files"]],
    "reference_encoders_s": refs["seconds"],
    "timing": run.get("timing"),
}
json.dump(summary, open(sys.argv[2], "w"), indent=1)
print("ref2va: %s packed rows (%d visual and %d audio reference rows)" %
      (summary["packed_rows"], refs["visual_rows"], refs["audio_rows"]))
print("reference encoders: video VAE %.3f s, audio VAE %.3f s" % (refs["seconds"]["video_vae"], refs["seconds"]["audio_vae"]))
for k, v in (run.get("timing") or {}).items():
    if isinstance(v, (int, float)):
        print("  %-28s %.3f s" % (k, v))
PY
