#!/usr/bin/env bash
# NVFP4 GPU evidence in one call, from PREBUILT binaries (builds nothing): the approximate-instruction probe
# (rcp.approx.ftz.f32 binade table + model checks), the NVFP4 GPU tests and the producer benchmark.
# Usage: scripts/nvfp4-probe.sh [BIN_DIR] [OUT_DIR]   (defaults: .carry/nvfp4, $OUT or ./nvfp4-out)
# Writes to OUT_DIR: rcp_approx_<arch>.bin (commit as data/approx/rcp_approx_sm90.bin), approx_probe.json,
# probe.log, test.log, bench.log, nvfp4_bench.jsonl. Exit status: non-zero if any step failed.
set -u
bin="${1:-.carry/nvfp4}"
out="${2:-${OUT:-./nvfp4-out}}"
mkdir -p "$out"
status=0
nvidia-smi -L 2>&1 | head -2

echo "== probe"
timeout 35 "$bin/nvfp4_approx_probe" --out "$out" > "$out/probe.log" 2>&1 || { echo "probe FAILED ($?)"; status=1; }
cat "$out/probe.log"

# Let the GPU tests also check the freshly written table file through the loader.
data="$(mktemp -d)"
mkdir -p "$data/approx"
cp "$out"/rcp_approx_sm9*.bin "$data/approx/rcp_approx_sm90.bin" 2>/dev/null

# nvfp4_cuda_test links libcublasLt (through the cuda component); find it if the loader does not.
lt="$(find /usr/local/cuda*/ /opt/torch/.venv/ -name 'libcublasLt.so.13*' 2>/dev/null | head -1)"
[ -n "$lt" ] && export LD_LIBRARY_PATH="$(dirname "$lt")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "== tests"
VORTEX_DATA_DIR="$data" timeout 60 "$bin/nvfp4_cuda_test" > "$out/test.log" 2>&1 || { echo "tests FAILED ($?)"; status=1; }
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^rcp.approx|Failure|seed=" "$out/test.log" | head -40
tail -3 "$out/test.log"

echo "== bench"
timeout 40 "$bin/nvfp4_bench" --reps 20 --evidence-dir "$out" > "$out/bench.log" 2>&1 || { echo "bench FAILED ($?)"; status=1; }
cat "$out/bench.log"
exit $status
