#!/usr/bin/env bash
# Block 24 at the canonical shape in one run: Vortex bf16 (the exact program), the fastest mode (fp8 GEMMs +
# Sage2 attention with its Q quantization in the norm pass) and the fastest mode with the gated residual in the
# FP8 GEMM epilogue, then diffusers' MiniMaxH3TransformerBlock (bench/diffusers_peer.py), with
# the same-run ratios written to OUT_DIR/block24_summary.json and printed. SM clocks: Vortex rows carry
# nvidia-smi clocks at collection time, the diffusers row the clock sampled during its timing loop.
#   bash bench/block24_vs_diffusers.sh OUT_DIR DIFFUSERS_WHEEL [VORTEX_BIN]
# Expects a CUDA build (build/bin/vortex by default) and PyTorch on the machine.
set -euo pipefail
out=${1:?usage: block24_vs_diffusers.sh OUT_DIR DIFFUSERS_WHEEL [VORTEX_BIN]}
wheel=${2:?usage: block24_vs_diffusers.sh OUT_DIR DIFFUSERS_WHEEL [VORTEX_BIN]}
v=${3:-build/bin/vortex}
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$v" ] || { echo "error: no vortex binary at $v (build the CUDA tree first)" >&2; exit 2; }
[ -f "$wheel" ] || { echo "error: diffusers wheel not found: $wheel" >&2; exit 2; }
mkdir -p "$out/vortex_bf16" "$out/vortex_fastest" "$out/vortex_fastest_gate_epilogue"
canon=(--config h3 --backend cuda --block 24 --reps 20)
echo "[block24] vortex bf16 ..." >&2
"$v" bench block "${canon[@]}" --switches fused --evidence-dir "$out/vortex_bf16"
fastest=fused,attention=sage2,fused_q_quantize=1
echo "[block24] vortex fp8 + sage2 + fused Q ..." >&2
"$v" bench block "${canon[@]}" --switches "$fastest" --precision fp8 --evidence-dir "$out/vortex_fastest"
echo "[block24] vortex fp8 + sage2 + fused Q + gate epilogue ..." >&2
"$v" bench block "${canon[@]}" --switches "$fastest,fp8_gate_epilogue=1" --precision fp8 \
  --evidence-dir "$out/vortex_fastest_gate_epilogue"
echo "[block24] diffusers block ..." >&2
python3 "$here/diffusers_peer.py" "$out" --wheel "$wheel" --rows 37810 --reps 20
python3 - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
def block_row(d):
    rows = [json.loads(l) for f in sorted(glob.glob(os.path.join(out, d, "*.jsonl"))) for l in open(f) if l.strip()]
    rows = [r for r in rows if r.get("block") == 24 and "components" in r]
    if not rows:
        sys.exit(f"error: no block-24 row under {os.path.join(out, d)}")
    return rows[-1]
peer = json.load(open(os.path.join(out, "diffusers_peer.json")))["rows"][0]
summary = {"diffusers": peer, "modes": {}}
print(f"{'mode':22s} {'p10':>9s} {'p50':>9s} {'p90':>9s}  {'vs diffusers':>12s}  SM clock MHz  components p50 (ms)")
print(f"{'diffusers':22s} {peer['ms_p10']:9.2f} {peer['ms_p50']:9.2f} {peer['ms_p90']:9.2f}  {1.0:12.2f}x  "
      f"{peer['sm_clock_mhz'].get('p50', 0)}")
for mode, d in (("bf16", "vortex_bf16"), ("fastest", "vortex_fastest"),
                ("fastest+gate-epilogue", "vortex_fastest_gate_epilogue")):
    r = block_row(d)
    ratio = peer["ms_p50"] / r["ms_p50"]
    comps = {c["name"]: round(c["ms_p50"], 2) for c in r["components"]}
    summary["modes"][mode] = {"row": r, "ratio_diffusers_over_vortex_p50": ratio}
    print(f"{mode:22s} {r['ms_p10']:9.2f} {r['ms_p50']:9.2f} {r['ms_p90']:9.2f}  {ratio:12.2f}x  "
          f"{r.get('clocks_mhz', {}).get('sm', 0)}  {comps}")
json.dump(summary, open(os.path.join(out, "block24_summary.json"), "w"), indent=1)
print(f"evidence: {os.path.join(out, 'block24_summary.json')}")
EOF
