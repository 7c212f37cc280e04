#!/usr/bin/env bash
# The one device call of the vision-cuda branch (issue 28): the encoders' GPU tests, then
# bench/fl2va_encoders_bench.cpp and its peers (bench/fl2va_encoders_peer.py) on the same GPU. Runs from the
# repository root of the device's copy with everything it needs under .carry/vision-cuda (binaries built on the
# branch, its fixtures, the peer script and the diffusers/transformers wheels); writes logs and evidence under $OUT.
set -uo pipefail
C=.carry/vision-cuda
OUT=${OUT:-out/fl2va-encoders}
mkdir -p "$OUT"
tar -xJf $C/bin.tar.xz -C $C || exit 1
# The test binaries name the branch's fixture folders; point them at the carried copies.
export VORTEX_VAE_FIXTURES=$PWD/$C/tree/tests/vae/fixtures VORTEX_VISION_FIXTURES=$PWD/$C/tree/tests/vision/fixtures
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for lib in "$d"/*/lib; do LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"; done
  break
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$PWD/$C/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/nvidia-smi.csv"
rc_all=0
for t in cuda_encoder_ops_test vision_tower_cuda_test video_vae_encoder_cuda_test; do
  echo "== $t"
  timeout 120 "$C/bin/$t" --gtest_output=json:"$OUT/$t.json" > "$OUT/$t.log" 2>&1
  rc=$?
  echo "$t rc=$rc"; grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$t.log"; grep -E 'rel-L2|worst|equal|Failure|error' "$OUT/$t.log" | head -40
  [ $rc -ne 0 ] && rc_all=1
done
echo "== fl2va_encoders_bench"
timeout 150 "$C/bin/fl2va_encoders_bench" "$OUT" --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --reps 10 2>&1 | tee "$OUT/bench.log"
echo "== peers"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $C/whl/*.whl \
  && export PYTHONPATH=/tmp/site
PYTHONUNBUFFERED=1 timeout 150 python3 $C/fl2va_encoders_peer.py --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --out "$OUT/peer.json" --reps 10 2>&1 | tail -20 | tee "$OUT/peer.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv | tee -a "$OUT/nvidia-smi.csv"
echo "tests rc=$rc_all"
# Same-run ratios: each Vortex row against its peer's p50 (peer p50 / Vortex p50 = how many times faster).
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for f in glob.glob(os.path.join(out, "**", "*fl2va-encoders.jsonl"), recursive=True) for l in open(f)]
peer = {r["workload"]: r for r in json.load(open(os.path.join(out, "peer.json")))["rows"]} if os.path.exists(os.path.join(out, "peer.json")) else {}
summary = []
for r in rows:
    p = peer.get(r["workload"])
    ours = r.get("ms_p50", r.get("p50"))
    s = {"workload": r["workload"], "impl": r["impl"], "ms_p50": ours, "peer": p and p["impl"], "peer_ms_p50": p and p["p50"],
         "speedup_vs_peer": p and p["p50"] / ours}
    summary.append(s)
    print(json.dumps(s))
json.dump({"vortex_rows": rows, "peer": peer, "summary": summary}, open(os.path.join(out, "summary.json"), "w"), indent=1)
PY
