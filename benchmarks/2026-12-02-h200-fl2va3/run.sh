#!/usr/bin/env bash
# The one device call of the fl2va3 branch (issue 28): the vision tower's GPU test, then
# bench/fl2va_encoders_bench.cpp (vision tower: both keyframes in one call, one call each, host outputs, per-stage
# device regions; the tower's attention alone at head_dim 72 / 64 / 128; the keyframe VAE encode) and its peers
# bench/fl2va_encoders_peer.py (transformers 5.24.0, diffusers 0.42.1) on the same GPU. Runs from the repository root
# of the device's copy with the branch's binaries, the libraries the GPU image lacks and the wheels under
# .carry/fl2va3; writes logs and evidence under $OUT and prints the same-run ratios last.
set -uo pipefail
C=.carry/fl2va3
OUT=${OUT:-out/fl2va3}
mkdir -p "$OUT"
tar -xJf $C/bin.tar.xz -C $C && tar -xJf $C/bench.tar.xz -C $C || exit 1  # bench.tar.xz: the rebuilt bench over bin.tar.xz
export VORTEX_VISION_FIXTURES=$PWD/tests/vision/fixtures
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for lib in "$d"/*/lib; do NV="$lib:${NV:-}"; done
  break
done
VLD="/usr/local/cuda/lib64:${NV:-}:$PWD/$C/bin:$PWD/$C/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/nvidia-smi.csv"
echo "== vision_tower_cuda_test"
LD_LIBRARY_PATH="$VLD" timeout 90 "$C/bin/vision_tower_cuda_test" --gtest_output=json:"$OUT/vision_tower_cuda_test.json" \
  > "$OUT/vision_tower_cuda_test.log" 2>&1
echo "vision_tower_cuda_test rc=$?"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |batched vs alone|Failure' "$OUT/vision_tower_cuda_test.log" | head -20
echo "== fl2va_encoders_bench"
LD_LIBRARY_PATH="$VLD" timeout 150 "$C/bin/fl2va_encoders_bench" "$OUT" \
  --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --reps 10 2>&1 | tee "$OUT/bench.log"
echo "== peers"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $C/whl/*.whl \
  && export PYTHONPATH=/tmp/site
PYTHONUNBUFFERED=1 timeout 150 python3 bench/fl2va_encoders_peer.py \
  --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --out "$OUT/peer.json" --reps 10 2>&1 | tail -20 | tee "$OUT/peer.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv | tee -a "$OUT/nvidia-smi.csv"
# Same-run ratios: each Vortex vision/VAE row against its peer's p50 (peer p50 / Vortex p50 = times faster).
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for f in glob.glob(os.path.join(out, "**", "*fl2va-encoders.jsonl"), recursive=True) for l in open(f)]
pp = os.path.join(out, "peer.json")
peer = {r["workload"]: r for r in json.load(open(pp))["rows"]} if os.path.exists(pp) else {}
summary = []
for r in rows:
    row = r.get("row", r)
    ours = row.get("ms_p50", row.get("p50"))
    p = peer.get(row.get("workload"))
    s = {"workload": row.get("workload"), "impl": row.get("impl"), "ms_p50": ours,
         "peer_ms_p50": p and p["p50"], "speedup_vs_peer": p and ours and p["p50"] / ours,
         "regions_ms": row.get("regions_ms"), "tflops_p50": row.get("tflops_p50")}
    summary.append(s)
    print(json.dumps(s))
json.dump({"vortex_rows": rows, "peer": peer, "summary": summary}, open(os.path.join(out, "summary.json"), "w"), indent=1)
PY
