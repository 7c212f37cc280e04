#!/usr/bin/env bash
# Lead's integrated H200 call of the merged tree: the new GPU tests, then canonical fl2va and ref2va end to end and
# decode + mux per encoder (FFmpeg's libraries unpacked into .carry/ffx by the call before), each under a time guard.
set -u
root=$(pwd); c=$root/.carry/final; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
want() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }
PHASES="${*:-tests fl2va ref2va mux}"
cd "$c" && tar -xJf bin.tar.xz && tar -xJf lib.tar.xz || { echo "untar failed"; exit 1; }
cd "$root"
ff=$root/.carry/ffx/ffc
[ -d "$ff" ] || { echo "no FFmpeg libraries at $ff"; ff=""; }
for py in python3; do
  d=$($py -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for l in "$d"/*/lib; do LD_LIBRARY_PATH="$l:${LD_LIBRARY_PATH:-}"; done
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$c/lib:$c/cj${ff:+:$ff}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export VORTEX_VAE_FIXTURES="$root/tests/vae/fixtures"
python3 -m pip install -q --no-deps --target "$c/pydeps" "$c/diffusers-0.42.1-py3-none-any.whl" > "$OUT/pip.log" 2>&1
export PYTHONPATH="$c/pydeps${PYTHONPATH:+:$PYTHONPATH}"
# The test binaries carry the fixture paths of the tree they were built in: that path is linked to this checkout.
[ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
mkdir -p build && rm -rf build/bin && ln -s "$c/bin" build/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/gpu.txt"
ldd build/bin/vortex build/bin/libvortex.so build/bin/libvortex_ffmpeg.so | grep "not found" >> "$OUT/gpu.txt"
echo "git $(cat $c/commit.txt)" >> "$OUT/gpu.txt"
summary=$OUT/summary.txt; : > "$summary"
# 1. The GPU test executables that are new or changed since the last integrated check.
want tests && for t in $(cat "$c/tests.txt"); do
  [ -x "build/bin/$t" ] || { echo "$t MISSING" >> "$summary"; continue; }
  timeout 120 "build/bin/$t" > "$OUT/test-$t.log" 2>&1; rc=$?
  echo "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/test-$t.log" | tr '\n' ' ')" >> "$summary"
done
want tests && echo "tests done at +$(el) s" >> "$summary"
# 2. Canonical fl2va end to end (2 keyframes, 12 steps).
if want fl2va && [ $(el) -lt 300 ]; then
  OUT="$root/e2e/fl2va" timeout 170 bash bench/fl2va_e2e.sh --vortex build/bin/vortex > "$OUT/fl2va.log" 2>&1
  echo "fl2va_e2e rc=$? at +$(el) s" >> "$summary"
  mkdir -p "$OUT/fl2va"; cp "$root/e2e/fl2va/summary.json" "$root/e2e/fl2va/run/run.json" "$OUT/fl2va/" 2>/dev/null
  ls -la "$root/e2e/fl2va/run" > "$OUT/fl2va/files.txt" 2>&1
fi
# 3. Canonical ref2va end to end (2 images, a video with sound, an audio clip, 12 steps).
if want ref2va && [ $(el) -lt 330 ]; then
  STEPS="${STEPS:-12}" OUT="$root/e2e/ref2va" WORK="$root/r2vwork" VORTEX=build/bin/vortex timeout 230 bash bench/ref2va_e2e.sh > "$OUT/ref2va.log" 2>&1
  echo "ref2va_e2e rc=$? at +$(el) s" >> "$summary"
  mkdir -p "$OUT/ref2va"; cp "$root/e2e/ref2va/summary.json" "$root/e2e/ref2va/run/run.json" "$OUT/ref2va/" 2>/dev/null
  ls -la "$root/e2e/ref2va/run" > "$OUT/ref2va/files.txt" 2>&1
fi
# 4. Decode + mux per encoder against the video decode alone.
if want mux && [ $(el) -lt 480 ] && [ -n "$ff" ]; then
  timeout $(( 585 - $(el) )) bash bench/decode_mux_bench.sh "$OUT/mux" --bin build/bin --ffmpeg-lib "$ff" -- --reps 2 > "$OUT/mux.log" 2>&1
  echo "decode_mux rc=$? at +$(el) s" >> "$summary"
fi
rm -rf "$root/r2vwork"
rm -rf "$root/e2e"
cd "$OUT" && tar -cf logs.tar test-*.log fl2va ref2va mux 2>/dev/null && rm -rf test-*.log; cd "$root"
tail -5 "$OUT/fl2va.log" 2>/dev/null; tail -5 "$OUT/ref2va.log" 2>/dev/null; tail -8 "$OUT/mux.log" 2>/dev/null
cat "$summary"
