#!/usr/bin/env bash
# vae5's H200 call (issue 30, video decode): the GPU tests this branch touches (owned attention at head_dim 64, the
# head_dim-64 qk_norm_rope path, the CUDA decode parity, the VAE ops, the attention policy), then vae_decode_bench of
# main's binary (the baseline, same call) and of this branch (default = owned attention, the cuDNN-attention program,
# the breakdown, the opt-in FP8 mode last). Logs under $OUT; a short table last. Budget: 195 s.
set -u
root=$(pwd); c=$root/.carry/vae5; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
cd "$c" && mkdir -p new main && tar -xJf bin.tar.xz -C new && tar -xJf main.tar.xz -C main && tar -xJf lib.tar.xz \
  || { echo "untar failed"; exit 1; }
cd "$root"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$c/lib"
export VORTEX_VAE_FIXTURES="$root/tests/vae/fixtures" PYTHONUNBUFFERED=1
mkdir -p "$OUT/vae" "$OUT/vae-main"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/tests.log" 2>&1
run_test() {  # name timeout [gtest args]
  local t=$1 lim=$2; shift 2
  echo "=== $t $*" >> "$OUT/tests.log"
  timeout "$lim" "$c/new/$t" "$@" > "$OUT/$t.log" 2>&1; local r=$?
  grep -E "^\[(bf16_attention|  (PASSED|FAILED|SKIPPED)|==========)|Failure|PSNR|psnr" "$OUT/$t.log" | tail -40 >> "$OUT/tests.log"
  echo "$t rc=$r at +$(el) s" | tee -a "$OUT/tests.log"
}
run_test bf16_attention_test 40
run_test cuda_ops_test 20 --gtest_filter='*QkNormRope*'
run_test cuda_device_test 15
run_test vae_cuda_parity_test 30
run_test cuda_vae_ops_test 20
timeout 48 "$c/main/vae_decode_bench" "$OUT/vae-main" --reps 2 --audio-reps 2 --no-mux --no-variants \
  > "$OUT/vae_bench_main.log" 2>&1
echo "main bench rc=$? at +$(el) s" | tee -a "$OUT/vae_bench_main.log"
left=$(( 193 - $(el) ))
timeout "$left" "$c/new/vae_decode_bench" "$OUT/vae" --reps 3 --audio-reps 2 --no-mux --no-variants --cudnn-attention \
  --breakdown --fp8 > "$OUT/vae_bench.log" 2>&1
echo "bench rc=$? at +$(el) s (limit $left s)" | tee -a "$OUT/vae_bench.log"
grep -v "video decode [0-9]" "$OUT/vae_bench.log" | tail -40
grep -E "warm-up|video decode [0-9]" "$OUT/vae_bench_main.log"
