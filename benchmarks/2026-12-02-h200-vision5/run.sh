#!/usr/bin/env bash
# The vision5 branch's one device call (issue 28): the GPU tests of the vision tower (the fused GEMM epilogues against
# their CPU programs, the tower against transformers' fixtures and the cpu backend, the BF16 device hand-off to the
# text encoder byte for byte against the host one; the ref2va frame pairs through the tower), then
# bench/fl2va_encoders_bench.cpp (the tower fused and unfused, the hand-off with a synthetic one-layer text encoder of
# the released shape) and its vision peer bench/fl2va_encoders_peer.py --only vision (transformers on the image) on
# the same GPU. Writes logs and evidence under $OUT; prints the same-run ratios last.
set -uo pipefail
C=.carry/vision5
OUT=${OUT:-out/vision5}
mkdir -p "$OUT"
tar -xJf $C/bin.tar.xz -C $C && tar -xJf $C/lib.tar.xz -C $C || exit 1
export VORTEX_VISION_FIXTURES=$PWD/tests/vision/fixtures VORTEX_TE_FIXTURES=$PWD/tests/text_encoder/fixtures
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for lib in "$d"/*/lib; do NV="$lib:${NV:-}"; done
  break
done
VLD="/usr/local/cuda/lib64:${NV:-}:$PWD/$C/bin:$PWD/$C/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/nvidia-smi.csv"
for t in vision_tower_cuda_test ref2va_vision_cuda_test; do
  echo "== $t"
  LD_LIBRARY_PATH="$VLD" timeout 60 "$C/bin/$t" --gtest_output=json:"$OUT/$t.json" > "$OUT/$t.log" 2>&1
  echo "$t rc=$?"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure|rel-L2|beyond' "$OUT/$t.log" | head -40
done
echo "== fl2va_encoders_bench"
LD_LIBRARY_PATH="$VLD" timeout 70 "$C/bin/fl2va_encoders_bench" "$OUT" \
  --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --reps 20 --skip-vae > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -v '^  region' "$OUT/bench.log" | tail -16; grep '^  region' "$OUT/bench.log"
echo "== peer"
PYTHONUNBUFFERED=1 timeout 60 python3 bench/fl2va_encoders_peer.py --only vision \
  --text-encoder-config tests/fixtures/release/text_encoder/config.json \
  --vae-config tests/fixtures/release/vae/config.json --out "$OUT/peer.json" --reps 20 > "$OUT/peer.log" 2>&1
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
    ours = r.get("ms_p50")
    p = peer.get(r.get("workload"))
    s = {"workload": r.get("workload"), "impl": r.get("impl"), "ms_p10": r.get("ms_p10"), "ms_p50": ours,
         "ms_p90": r.get("ms_p90"), "peer_ms_p50": p and p["p50"], "peer_ms_p10": p and p.get("p10"),
         "peer_ms_p90": p and p.get("p90"), "speedup_vs_peer": p and ours and p["p50"] / ours,
         "regions_ms": r.get("regions_ms"), "check": r.get("check")}
    summary.append(s)
    print("%-36s %-60.60s p50 %8.3f ms  peer %s  x%s" % (s["workload"], s["impl"], ours or -1,
          "%.2f" % p["p50"] if p else "-", "%.3f" % s["speedup_vs_peer"] if s["speedup_vs_peer"] else "-"))
json.dump({"vortex_rows": rows, "peer": peer, "summary": summary}, open(os.path.join(out, "summary.json"), "w"), indent=1)
PY
