#!/usr/bin/env bash
# GPU check: builds if needed, runs every GPU test, the gates and the canonical benchmarks on a CUDA
# machine in one call, and leaves evidence files. Usage:
#   scripts/gpu-check.sh [--bin DIR] [--work DIR] [--part tests|gate|bench|all] [--quick] [--policies LIST]
#     --bin DIR   prebuilt binaries (vortex + *_test + *_bench) for sm_90a (default build/bin; built if missing)
#     --work DIR  logs and per-test JSON (default out/gpu-check); when $OUT is set (the lent device) the
#                 log and a tarball of the work dir are also written there
#     --part P    tests | gate | bench (block benchmarks, kernels, PyTorch peer) | run (the 12-step
#                 trajectory) | deviation (fp8/nvfp4 vs bf16 latents, nvfp4 per-op) | gemm (GEMM bench + FC2 algorithm search)
#                 | all (default)
#     --quick     skip the 12-step trajectories
#     --policies  the CUDA policies the GPU tests run under (default "sm90 sm120": the device's own, then the
#                 sm120 row forced on this GPU, VORTEX_POLICY=sm120: cuDNN, the mma.sync Sage2 mainloop and the
#                 non-FP4 GEMMs; cuBLASLt FP4 is compiled, never run here, and its tests skip naming the policy)
# The tests part first prints `cuobjdump --list-elf` of the vortex binary (the SASS targets it carries).
# Evidence rows (docs/evidence.md) are appended to benchmarks/<date>-<gpu>-*.jsonl: commit them, then regenerate
# docs/results.md (python3 tools/results_md.py).
# Exit code: 0 only if every step passed; a GPU test that skips for want of a device (the message after
# gtest's 'Skipped' names no CUDA device / no GPU / nvidia-smi) fails its step, since this is a GPU machine.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bin=build/bin
work=out/gpu-check
part=all
quick=0
policies="sm90 sm120"
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --part) part=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --policies) policies=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$work" benchmarks
log=$work/gpu-check-$part.log
exec > >(tee -a "$log") 2>&1

if [ ! -x "$bin/vortex" ]; then
  echo "== building (no prebuilt binaries in $bin)"
  bash scripts/build.sh || { echo "gpu-check: build failed"; exit 1; }
  bin=build/bin
fi
# cuDNN may live only in the PyTorch wheels on machines without a system install.
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$($py -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for lib in "$d"/*/lib; do LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"; done
  break
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VORTEX_DATA_DIR="$here/data"  # measured approximate-instruction tables (NVFP4 reference)
export VORTEX_PARITY_FIXTURES="$here/tests/parity/fixtures"  # diffusers fixtures (diffusers_parity_gpu_test)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv || { echo "gpu-check: no GPU"; exit 1; }

summary=()
failed=0
run_step() {  # run_step NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  echo "== $name"
  local t0=$SECONDS
  timeout "$limit" "$@"
  local rc=$?
  summary+=("$(printf '%-34s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  [ $rc -ne 0 ] && failed=1
  return $rc
}
# A GPU test binary on this GPU machine: any test that skips for want of a device is a failure here.
run_gpu_test() {  # run_gpu_test NAME BINARY [POLICY]
  local name=$1 t=$2 policy=${3:-} out="$work/$1.out"
  VORTEX_POLICY="$policy" VORTEX_RUN_BENCH=1 VORTEX_CLI="$v" run_step "$name" 300 "$t" --gtest_brief=1 --gtest_output=json:"$work/$name.json" \
    > >(tee "$out") 2>&1
  sleep 0.2  # let tee flush
  local skipped
  skipped=$(grep -A1 ': Skipped$' "$out" | grep -ci 'no CUDA device\|no GPU\|nvidia-smi')
  if [ "$skipped" -gt 0 ]; then
    summary+=("$(printf '%-34s FAILED: %s test(s) skipped for want of a GPU on a GPU machine' "$name" "$skipped")")
    failed=1
  fi
}
v="$bin/vortex"
canon=(--config h3 --backend cuda)

if [ "$part" = all ] || [ "$part" = tests ]; then
  # The fat binary's SASS targets (expected: sm_90a, sm_100a, sm_120a, sm_121a; the PTX is listed by --list-ptx).
  echo "== cuobjdump --list-elf $v"
  cuobjdump --list-elf "$v" "$bin/libvortex.so" | sed 's/^/  /'
  cuobjdump --list-elf "$bin/libvortex.so" | grep -o 'sm_[0-9]*a' | sort -u | tr '\n' ' '; echo
  # The GPU-labelled test executables (bin/gpu-tests.txt, written by tests/CMakeLists.txt); every *_test
  # when the list is absent. CPU-only tests are CI's (scripts/test.sh).
  if [ -f "$bin/gpu-tests.txt" ]; then
    mapfile -t gpu_tests < <(grep -v '^$' "$bin/gpu-tests.txt")
  else
    gpu_tests=()
    for t in "$bin"/*_test; do gpu_tests+=("$(basename "$t")"); done
  fi
  for p in $policies; do
    own=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
    forced=$p; [ "sm$own" = "$p" ] && forced=""  # the device's own row: no VORTEX_POLICY
    for n in "${gpu_tests[@]}"; do
      t="$bin/$n"
      if [ ! -x "$t" ]; then
        summary+=("$(printf '%-34s FAILED: listed in gpu-tests.txt but not in %s' "$n" "$bin")")
        failed=1
        continue
      fi
      run_gpu_test "${n}_$p" "$t" "$forced"
    done
  done
fi
if [ "$part" = all ] || [ "$part" = gate ]; then
  extra=()
  [ $quick -eq 1 ] && extra=(--skip-full-trajectory)
  run_step gate_component1 580 "$v" gate "${canon[@]}" --a eager --b fused "${extra[@]}" --out "$work/gate-component1.json"
  # Fused NVFP4 producers (modulate -> NVFP4 for QKV/FC1, SwiGLU -> NVFP4 for FC2): nvfp4 weights loaded
  # once, only fused_nvfp4_producers flipped; expected identical (E0 producers, same GEMM inputs). Then
  # the speed evidence (A/B on block 24) before the sm90 default may flip (src/cuda/device.cpp).
  run_step gate_nvfp4_fused_producers 600 "$v" gate "${canon[@]}" --precision nvfp4 \
    --a fused_nvfp4_producers=0 --b fused_nvfp4_producers=1 "${extra[@]}" --out "$work/gate-nvfp4-fused-producers.json"
  # Denoiser steps as replayed CUDA graphs at the small request they are for (E0: identical bytes).
  run_step gate_cuda_graph 400 "$v" gate "${canon[@]}" --width 512 --height 512 --frames 22 \
    --a cuda_graph=off --b cuda_graph=on "${extra[@]}" --out "$work/gate-cuda-graph.json"
  run_step bench_ab_nvfp4_fused_producers 400 "$v" bench ab "${canon[@]}" --precision nvfp4 --block 24 --reps 20 \
    --a fused_nvfp4_producers=0 --b fused_nvfp4_producers=1
fi
if [ "$part" = all ] || [ "$part" = bench ]; then
  run_step bench_block_bf16 200 "$v" bench block "${canon[@]}" --block 24 --reps 20 --switches fused
  run_step bench_ab_component1 200 "$v" bench ab "${canon[@]}" --block 24 --reps 20 --a eager --b fused
  run_step bench_block_fp8 300 "$v" bench block "${canon[@]}" --block 24 --reps 20 --switches fused --precision fp8
  run_step bench_block_nvfp4 400 "$v" bench block "${canon[@]}" --block 24 --reps 20 --switches fused --precision nvfp4
  run_step bench_block_nvfp4_weight_only 300 "$v" bench block "${canon[@]}" --block 24 --reps 20 --switches fused --precision nvfp4-weight-only
  run_step bench_block_sage2 200 "$v" bench block "${canon[@]}" --block 24 --reps 20 --switches fused,attention=sage2
  run_step bench_block_fp8_sage2 300 "$v" bench block "${canon[@]}" --block 24 --reps 20 --switches fused,attention=sage2 \
    --precision fp8
  for b in "$bin"/*_bench; do
    [ -x "$b" ] || continue
    case "$(basename "$b")" in
      gemm_bench) continue ;;
      # the block's four FP8 GEMMs: every cuBLASLt config, quantizers, gated-residual epilogue; pinned table out
      fp8_gemm_bench) run_step fp8_gemm_bench 500 "$b" "$work/fp8-gemm" ;;
      # both mainloops at 37,810 / 8K / 16K / 32K, cuDNN SDPA on the same inputs, ratio and deviation
      sage2_bench) run_step sage2_bench 300 "$b" --evidence "benchmarks/$(date -u +%F)-h200-sage2.jsonl" ;;
      # conditioner prefill vs transformers on the same GPU (the Python baseline first), load GB/s vs the disk
      text_encoder_bench)
        run_step text_encoder_transformers 400 python3 bench/text_encoder_transformers.py --out "$work"
        run_step text_encoder_bench 400 "$b" --out benchmarks --baseline "$work/text_encoder_transformers.json" ;;
      text_encoder_load_bench) run_step text_encoder_load_bench 500 "$b" --dir "$work/te-load-$$" --out benchmarks ;;
      lora_merge_bench) run_step lora_merge_bench 400 "$b" --out benchmarks ;;
      # one denoiser step at 512x512 x 22 frames, eager vs the replayed CUDA graph, idle fraction of each
      step_graph_bench) run_step step_graph_bench 400 "$b" benchmarks ;;
      nvfp4_bench) run_step nvfp4_bench 200 "$b" --evidence-dir benchmarks ;;
      # qk_norm_rope + the Sage2 pre-pass vs the fused Q producer + the K/V-only pre-pass, alternating, bytes checked
      qk_norm_rope_sage2_bench) run_step qk_norm_rope_sage2_bench 200 "$b" benchmarks ;;
      sdpa_bench) run_step sdpa_bench 200 bash -c "'$b' >> benchmarks/$(date -u +%F)-h200-sdpa-cudnn.jsonl" ;;
      *) run_step "$(basename "$b")" 200 "$b" ;;
    esac
  done
  for py in /opt/torch/.venv/bin/python3 python3; do
    if $py -c 'import torch' 2>/dev/null; then run_step peer_pytorch 300 $py scripts/peer_torch.py; break; fi
  done
fi
if [ "$part" = all ] || [ "$part" = run ]; then
  run_step bench_run_bf16 400 "$v" bench run "${canon[@]}" --steps 12 --switches fused
fi
if [ "$part" = all ] || [ "$part" = deviation ]; then
  # E2 modes vs the BF16 program: latent deviation after 1 and 12 steps, canonical request.
  day=$(date -u +%F)
  gen=("$v" generate --config h3 --synthetic --backend cuda --width 1344 --height 768 --frames 124
       --synthetic-text 100 --seed 42 --overwrite --quiet)
  for steps in 1 12; do
    for prec in bf16 fp8 nvfp4 nvfp4-weight-only; do
      run_step "generate_${prec}_${steps}" 600 "${gen[@]}" --steps "$steps" --precision "$prec" --out "$work/gen-$prec-$steps"
    done
    run_step "generate_sage2_${steps}" 600 "${gen[@]}" --steps "$steps" --attention sage2 --out "$work/gen-sage2-$steps"
    run_step "deviation_sage2_${steps}" 60 python3 scripts/compare_latents.py "$work/gen-bf16-$steps" "$work/gen-sage2-$steps" \
      --label "bf16 + Sage2 attention (wgmma) vs bf16, canonical, $steps steps" --evidence "benchmarks/$day-h200-precision-deviation.jsonl"
    run_step "deviation_fp8_${steps}" 60 python3 scripts/compare_latents.py "$work/gen-bf16-$steps" "$work/gen-fp8-$steps" \
      --label "fp8 (per-tensor W8A8) vs bf16, canonical, $steps steps" --evidence "benchmarks/$day-h200-precision-deviation.jsonl"
    run_step "deviation_nvfp4_${steps}" 60 python3 scripts/compare_latents.py "$work/gen-bf16-$steps" "$work/gen-nvfp4-$steps" \
      --label "nvfp4 (W4A4, exact Hopper emulation) vs bf16, canonical, $steps steps" --evidence "benchmarks/$day-h200-precision-deviation.jsonl"
    run_step "deviation_nvfp4_weight_only_${steps}" 60 python3 scripts/compare_latents.py "$work/gen-bf16-$steps" \
      "$work/gen-nvfp4-weight-only-$steps" --label "nvfp4-weight-only (ComfyUI Hopper) vs bf16, canonical, $steps steps" \
      --evidence "benchmarks/$day-h200-precision-deviation.jsonl"
  done
  # Per-op deviation (each GEMM of blocks 0/24/49 on the BF16 program's inputs, and each whole block).
  if [ -x "$bin/nvfp4_deviation" ]; then
    run_step nvfp4_deviation_ops 600 "$bin/nvfp4_deviation" --config h3 --blocks 0,24,49 \
      --evidence "benchmarks/$day-h200-nvfp4-op-deviation.jsonl"
  fi
fi
if [ "$part" = all ] || [ "$part" = gemm ]; then
  if [ -x "$bin/gemm_bench" ]; then
    day=$(date -u +%F)
    run_step gemm_bench 200 bash -c "'$bin/gemm_bench' bench 37810 20 > benchmarks/$day-h200-gemm-bench.jsonl"
    # What does the heuristic pick for FC2, and does any proven-identical algorithm beat it?
    run_step gemm_tune_fc2 240 "$bin/gemm_bench" tune 37810 48 10 bf16,fp8_per_tensor fc2 \
      "benchmarks/$day-h200-gemm-tune-fc2.json" "$work/gemm_table_fc2.json"
  fi
fi

cp benchmarks/*.jsonl "$work"/ 2>/dev/null
echo
echo "== summary ($part)"
printf '%s\n' "${summary[@]}"
[ $failed -eq 0 ] && echo "gpu-check: every step passed" || echo "gpu-check: FAILED (a step failed or a GPU test skipped)"
if [ -n "${OUT:-}" ]; then
  cp "$log" "$OUT"/
  tar czf "$OUT/gpu-check-$part.tgz" -C "$work" . benchmarks 2>/dev/null || tar czf "$OUT/gpu-check-$part.tgz" -C "$work" .
fi
exit $failed
