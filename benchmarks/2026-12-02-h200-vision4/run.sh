#!/usr/bin/env bash
# The vision4 branch's one device call (issue 28): the GPU tests of its kernels (pixel rows from u8, LayerNorm of BF16
# rows, the owned attention at head_dim 72 and batched, the vision tower at head_dim 72 and against transformers'
# fixtures), then bench/fl2va_encoders_bench.cpp and its peers bench/fl2va_encoders_peer.py (transformers on the
# image, diffusers 0.42.1 from the carried wheel) on the same GPU. Writes logs and evidence under $OUT; prints the
# same-run ratios last.
set -uo pipefail
C=.carry/vision4
OUT=${OUT:-out/vision4}
mkdir -p "$OUT"
tar -xJf $C/bin.tar.xz -C $C && tar -xJf $C/lib.tar.xz -C $C || exit 1
export VORTEX_VISION_FIXTURES=$PWD/tests/vision/fixtures
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for lib in "$d"/*/lib; do NV="$lib:${NV:-}"; done
  break
done
VLD="/usr/local/cuda/lib64:${NV:-}:$PWD/$C/bin:$PWD/$C/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/nvidia-smi.csv"
for t in cuda_vision_prep_test bf16_attention_test vision_tower_cuda_test cuda_vae_ops_test; do
  echo "== $t"
  LD_LIBRARY_PATH="$VLD" timeout 60 "$C/bin/$t" --gtest_output=json:"$OUT/$t.json" > "$OUT/$t.log" 2>&1
  echo "$t rc=$?"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure|head_dim 72|d=72|\] owned' "$OUT/$t.log" | head -24
done
echo "== fl2va_encoders_bench"
LD_LIBRARY_PATH="$VLD" timeout 100 "$C/bin/fl2va_encoders_bench" "$OUT" \
  --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --reps 10 > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -v '^  region' "$OUT/bench.log" | tail -14; grep '^  region' "$OUT/bench.log"
echo "== peers"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $C/diffusers-*.whl \
  && export PYTHONPATH=/tmp/site
PYTHONUNBUFFERED=1 timeout 100 python3 bench/fl2va_encoders_peer.py \
  --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --out "$OUT/peer.json" --reps 10 > "$OUT/peer.log" 2>&1
echo "peer rc=$?"; tail -3 "$OUT/peer.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv | tee -a "$OUT/nvidia-smi.csv"
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for f in glob.glob(os.path.join(out, "*fl2va-encoders.jsonl")) for l in open(f)]
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
    print("%-40s %-70.70s p50 %8.3f ms  peer %s  x%s" % (s["workload"], s["impl"], ours or -1,
          "%.2f" % p["p50"] if p else "-", "%.2f" % s["speedup_vs_peer"] if s["speedup_vs_peer"] else "-"))
json.dump({"vortex_rows": rows, "peer": peer, "summary": summary}, open(os.path.join(out, "summary.json"), "w"), indent=1)
PY
