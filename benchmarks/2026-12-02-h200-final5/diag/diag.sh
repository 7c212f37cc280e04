#!/usr/bin/env bash
# Diagnosis of vision_tower_cuda_test's VisionEpiloguesMatchTheirCpuPrograms: cuBLASLt's API log names the algorithm
# (tile, split-K, reduction scheme, stream-K) each linear_residual call ran.
set -u
root=$(pwd); c=$root/.carry/final5
cd "$c" && tar -xJf bin.tar.xz && tar -xJf lib.tar.xz || exit 1
cd "$root"
for py in python3; do d=$($py -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null) || continue
  for l in "$d"/*/lib; do LD_LIBRARY_PATH="$l:${LD_LIBRARY_PATH:-}"; done; done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:$c/bin:$c/lib"
export VORTEX_VISION_FIXTURES="$root/tests/vision/fixtures"
[ -e /work/main ] || { mkdir -p /work && ln -s "$root" /work/main; }
CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE="$OUT/lt.log" timeout 60 "$c/bin/vision_tower_cuda_test" \
  --gtest_filter='*VisionEpilogues*' > "$OUT/test.log" 2>&1; echo "rc=$?"
grep -E "beyond|FAILED|PASSED" "$OUT/test.log" | head -20
grep -ciE "cublasLtMatmul\b|cublasLtMatmul\(" "$OUT/lt.log"
grep -iE "splitK|reductionScheme|stream|algo" "$OUT/lt.log" | sort | uniq -c | sort -rn | head -30
xz -T4 "$OUT/lt.log"
