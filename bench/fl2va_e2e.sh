#!/usr/bin/env bash
# Canonical fl2va end to end: two keyframes (bench/fl2va_e2e_keyframes/first.png and last.png, 320x180, placed on the
# canvas as diffusers' MiniMaxH3ResizeStep places them) through `vortex generate`, then the packed row count and the
# stage times from run.json. Default (the H200 run): --config h3 --synthetic (full-size synthetic DiT), cuda,
# 1344x768, 124 frames, 12 steps, the keyframes' VAE encoder from bench/make_keyframe_vae.py (diffusers on the
# machine) or --keyframe-vae DIR, decoded with --synthetic-vae full to MP4 (FFmpeg's libraries on LD_LIBRARY_PATH)
# unless --no-decode. --tiny: the same request shape on the CPU with `vortex synth --snapshot tiny` (its text encoder
# carries a vision tower, so the keyframes also pass the image processor and the tower), 128x64, 22 frames, 2 steps.
#   bash bench/fl2va_e2e.sh [--tiny] [--vortex PATH] [--keyframe-vae DIR] [--no-decode] [--steps N]
# Outputs under $OUT (default out/fl2va_e2e): the run folder, generate.log, summary.json; the summary is printed last.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-out/fl2va_e2e}
vortex=""
tiny=0
decode=1
steps=""
kvae=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tiny) tiny=1 ;;
    --no-decode) decode=0 ;;
    --vortex) vortex=$2; shift ;;
    --keyframe-vae) kvae=$2; shift ;;
    --steps) steps=$2; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "fl2va_e2e: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$vortex" ]; then
  for c in "$here/../build/bin/vortex" "$(command -v vortex || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then vortex=$c; break; fi
  done
fi
[ -n "$vortex" ] && [ -x "$vortex" ] || { echo "fl2va_e2e: no vortex binary (--vortex PATH)" >&2; exit 2; }
first="$here/fl2va_e2e_keyframes/first.png"
last="$here/fl2va_e2e_keyframes/last.png"
[ -f "$first" ] && [ -f "$last" ] || { echo "fl2va_e2e: keyframes missing under $here/fl2va_e2e_keyframes" >&2; exit 2; }
mkdir -p "$OUT"
run="$OUT/run"
log="$OUT/generate.log"

if [ "$tiny" = 1 ]; then
  model="$OUT/model"
  [ -d "$model" ] || "$vortex" synth --snapshot tiny -o "$model" --quiet
  args=(-m "$model" -p "a kite rises over the dunes at sunrise" --width 128 --height 64 --frames 22
        --steps "${steps:-2}" --backend cpu --latents-only)
else
  if [ -z "$kvae" ]; then
    kvae="$OUT/keyframe_vae"
    if [ ! -d "$kvae" ]; then
      echo "fl2va_e2e: writing the keyframe VAE encoder (released shapes, random weights) to $kvae"
      python3 "$here/make_keyframe_vae.py" --config "$here/../tests/fixtures/release/vae/config.json" --out "$kvae"
    fi
  fi
  args=(--config h3 --synthetic --backend cuda --width 1344 --height 768 --frames 124 --steps "${steps:-12}"
        --keyframe-vae "$kvae")
  [ "$decode" = 1 ] && args+=(--synthetic-vae full)
fi
echo "fl2va_e2e: $vortex generate ${args[*]} --first-frame $first --last-frame $last -o $run"
start=$(date +%s.%N)
"$vortex" generate "${args[@]}" --first-frame "$first" --last-frame "$last" -o "$run" --overwrite 2>&1 | tee "$log"
end=$(date +%s.%N)

# Row count and stage times from run.json (what the run recorded), with the wall time of the command.
python3 - "$run/run.json" "$OUT/summary.json" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g, t, k = r["geometry"], r["timing"], r.get("keyframes") or {}
steps = t.get("step_seconds", [])
s = {
    "task": r.get("task"),
    "canvas": "%dx%d" % (g["width"], g["height"]), "frames": g["frames"], "steps": len(steps),
    "rows": {"total": g["total_rows"], "video": g["video_rows"], "audio": g["audio_rows"], "text": g["text_rows"],
             "keyframe_condition": k.get("condition_rows")},
    "seconds": {"wall": float(sys.argv[4]) - float(sys.argv[3]), "load_weights": t.get("load_weights_seconds"),
                "keyframes_encode": k.get("seconds"), "encode_prompt": t.get("encode_prompt_seconds"),
                "prepare": t.get("prepare_seconds"), "adaln_tables": t.get("adaln_tables_seconds"),
                "sampling": t.get("sampling_seconds"), "step_p50": sorted(steps)[len(steps) // 2] if steps else None,
                "decode": t.get("decode_seconds"), "total": t.get("total_seconds")},
    "vision": k.get("vision"), "keyframe_vae": k.get("vae"), "outputs": r.get("outputs"),
}
json.dump(s, open(sys.argv[2], "w"), indent=1)
print("task %s, %s x %d frames, %d steps: %d packed rows (%d keyframe condition rows)" %
      (s["task"], s["canvas"], s["frames"], s["steps"], g["total_rows"], k.get("condition_rows") or 0))
for name, v in s["seconds"].items():
    if v is not None:
        print("  %-17s %9.3f s" % (name, v))
PY
