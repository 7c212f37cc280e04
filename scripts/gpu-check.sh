#!/usr/bin/env bash
# GPU check: runs every GPU test, the gates and the canonical benchmarks on a CUDA machine, in one call,
# and leaves evidence files. Usage:
#   scripts/gpu-check.sh [--bin DIR] [--out DIR] [--quick]
#     --bin DIR  prebuilt binaries (vortex + *_test) built for sm_90a (default: build/bin, built if missing)
#     --out DIR  where logs and evidence go (default: $OUT if set, else out/gpu-check)
#     --quick    tests + block benchmarks only (no trajectories)
# Evidence rows are appended to benchmarks/ (commit them) and copied to the out dir.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bin=build/bin
out=${OUT:-out/gpu-check}
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" benchmarks
log=$out/gpu-check.log
exec > >(tee -a "$log") 2>&1

if [ ! -x "$bin/vortex" ]; then
  echo "== building (no prebuilt binaries in $bin)"
  bash scripts/build.sh || { echo "gpu-check: build failed"; exit 1; }
  bin=build/bin
fi

# cuDNN / cuBLASLt may live in the PyTorch wheel folders on machines without a system install.
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null) || continue
  for lib in "$d"/nvidia/*/lib; do LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"; done
  break
done
export LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv || { echo "gpu-check: no GPU"; exit 1; }

declare -A result
run_step() {  # run_step NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  echo "== $name"
  local t0=$(date +%s.%N)
  timeout "$limit" "$@"
  local rc=$?
  local t1=$(date +%s.%N)
  result[$name]="rc=$rc $(printf '%.1f' "$(echo "$t1 - $t0" | bc)")s"
  return $rc
}

# 1. GPU tests (every *_test binary; CPU tests inside them run too).
for t in "$bin"/*_test; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  run_step "$n" 300 "$t" --gtest_brief=1 --gtest_output=json:"$out/$n.json"
done

v="$bin/vortex"
# 2. Gates: Component 1 fusion, canonical h3 with synthetic weights on the GPU.
if [ $quick -eq 0 ]; then
  run_step gate_component1 900 "$v" gate --config h3 --backend cuda --a eager --b fused --out "$out/gate-component1.json"
else
  run_step gate_component1_short 300 "$v" gate --config h3 --backend cuda --a eager --b fused --skip-full-trajectory \
    --out "$out/gate-component1.json"
fi
# 3. Benchmarks.
run_step bench_block_bf16 300 "$v" bench block --config h3 --backend cuda --block 24 --reps 20
run_step bench_ab_component1 300 "$v" bench ab --config h3 --backend cuda --block 24 --reps 20 --a eager --b fused
run_step bench_block_fp8 300 "$v" bench block --config h3 --backend cuda --block 24 --reps 20 --precision fp8
if [ $quick -eq 0 ]; then
  run_step bench_run_bf16 600 "$v" bench run --config h3 --backend cuda --steps 12
fi
for b in "$bin"/*_bench; do
  [ -x "$b" ] || continue
  run_step "$(basename "$b")" 300 "$b" --evidence-dir benchmarks
done

cp benchmarks/*.jsonl "$out"/ 2>/dev/null
echo
echo "== summary"
for k in "${!result[@]}"; do printf '%-36s %s\n' "$k" "${result[$k]}"; done | sort
