// lora_merge: one LoRA part merged into a BF16 weight in place on the GPU, rows [row_offset, row_offset + rows),
// the two programs of ref::lora_merge (docs/lora.md "Merge order"), byte for byte:
//   kSingleRounding: W' = R(W + scale * d), d = sum_q B[i,q] A[q,j] in FP64, ascending q (an FP32 x FP32 product is
//                    exact in FP64, so __fma_rn equals the reference's add of the exact product), FP64 scale
//                    multiply and add, one rounding FP64 -> BF16;
//   kPeft:           d = FP32 fma chain ascending q, R(fp32(d * fp32(scale))), then the FP32 add and one rounding.
// A 64 x 64 output tile per 256-thread block (4 x 4 per thread), A and B staged 16 ranks at a time in shared memory;
// each output walks q in ascending order, so the tiling does not change the sums. E0 vs ref::lora_merge in
// tests/cuda/lora_merge_test.cpp.
#include <cmath>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/ops/common.cuh"
#include "cuda/ops/ops_internal.h"

namespace vortex::cuda_ops {
namespace {

constexpr int kTile = 64, kRankChunk = 16, kThreads = 256, kPer = 4;

template <bool kSingle>
__global__ void __launch_bounds__(kThreads)
    lora_merge_kernel(uint16_t* w, int64_t k, const float* __restrict__ a, const float* __restrict__ b, int64_t rows,
                      int r, double scale, float scale_f32) {
  __shared__ float as[kRankChunk][kTile];      // A[q0 + q, j0 + c]
  __shared__ float bs[kTile][kRankChunk + 1];  // B[i0 + rr, q0 + q]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTile, j0 = static_cast<int64_t>(blockIdx.x) * kTile;
  using Acc = typename std::conditional<kSingle, double, float>::type;
  Acc acc[kPer][kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u)
#pragma unroll
    for (int v = 0; v < kPer; ++v) acc[u][v] = Acc(0);
  for (int q0 = 0; q0 < r; q0 += kRankChunk) {
    __syncthreads();
    for (int e = threadIdx.x; e < kRankChunk * kTile; e += kThreads) {
      const int q = e / kTile, c = e % kTile;
      const int64_t j = j0 + c;
      as[q][c] = (q0 + q < r && j < k) ? a[static_cast<int64_t>(q0 + q) * k + j] : 0.0f;
      const int rr = e / kRankChunk, qq = e % kRankChunk;
      const int64_t i = i0 + rr;
      bs[rr][qq] = (q0 + qq < r && i < rows) ? b[i * r + q0 + qq] : 0.0f;
    }
    __syncthreads();
    const int nq = r - q0 < kRankChunk ? r - q0 : kRankChunk;
    for (int q = 0; q < nq; ++q) {  // ascending q for every output
      float av[kPer], bv[kPer];
#pragma unroll
      for (int v = 0; v < kPer; ++v) av[v] = as[q][tx + 16 * v];
#pragma unroll
      for (int u = 0; u < kPer; ++u) bv[u] = bs[ty + 16 * u][q];
#pragma unroll
      for (int u = 0; u < kPer; ++u)
#pragma unroll
        for (int v = 0; v < kPer; ++v) {
          if constexpr (kSingle)
            acc[u][v] = __fma_rn(static_cast<double>(bv[u]), static_cast<double>(av[v]), acc[u][v]);
          else acc[u][v] = __fmaf_rn(bv[u], av[v], acc[u][v]);
        }
    }
  }
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int64_t i = i0 + ty + 16 * u;
    if (i >= rows) continue;
#pragma unroll
    for (int v = 0; v < kPer; ++v) {
      const int64_t j = j0 + tx + 16 * v;
      if (j >= k) continue;
      uint16_t& out = w[i * k + j];
      if constexpr (kSingle) {
        out = f64_to_bf16(__dadd_rn(static_cast<double>(bf16_to_f32(out)), __dmul_rn(scale, acc[u][v])));
      } else {
        const float delta = round_bf16(__fmul_rn(acc[u][v], scale_f32));
        out = f32_to_bf16(__fadd_rn(bf16_to_f32(out), delta));
      }
    }
  }
}

Status check_factor(const Tensor& t, const char* what, int64_t rows, int64_t cols, DType dtype) {
  if (!t.defined() || t.device() != Device::kCuda || t.ndim() != 2 || t.dtype() != dtype || !t.is_contiguous() ||
      (rows >= 0 && t.dim(0) != rows) || (cols >= 0 && t.dim(1) != cols))
    return invalid_argument(std::string("lora_merge: ") + what + " must be a contiguous device [" +
                            (rows >= 0 ? std::to_string(rows) : std::string("rows")) + ", " +
                            (cols >= 0 ? std::to_string(cols) : std::string("r")) + "] " + dtype_short_name(dtype) +
                            " tensor, got " + (t.defined() ? t.describe() : std::string("undefined")));
  return Status::Ok();
}

}  // namespace

Status lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale, bool single_rounding,
                  cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_factor(w, "merged weight", -1, -1, DType::kBF16));
  const int64_t n = w.dim(0), k = w.dim(1);
  VORTEX_RETURN_IF_ERROR(check_factor(a, "A", -1, k, DType::kF32));
  const int64_t r = a.dim(0);
  VORTEX_RETURN_IF_ERROR(check_factor(b, "B", -1, r, DType::kF32));
  const int64_t rows = b.dim(0);
  if (row_offset < 0 || row_offset + rows > n)
    return invalid_argument("lora_merge: rows [" + std::to_string(row_offset) + ", " +
                            std::to_string(row_offset + rows) + ") outside the weight's " + std::to_string(n) +
                            " rows");
  if (!std::isfinite(scale)) return invalid_argument("lora_merge: the scale must be finite");
  if (rows == 0 || k == 0) return Status::Ok();
  if (r > (1 << 20)) return invalid_argument("lora_merge: rank " + std::to_string(r) + " too large");
  const int64_t gx = (k + kTile - 1) / kTile, gy = (rows + kTile - 1) / kTile;
  if (gx > kMaxGridX || gy > 65535) return invalid_argument("lora_merge: weight too large for one launch");
  uint16_t* wp = static_cast<uint16_t*>(w.raw_data()) + row_offset * k;
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  const float* ap = static_cast<const float*>(a.raw_data());
  const float* bp = static_cast<const float*>(b.raw_data());
  if (single_rounding) {
    lora_merge_kernel<true>
        <<<grid, kThreads, 0, stream>>>(wp, k, ap, bp, rows, static_cast<int>(r), scale, static_cast<float>(scale));
  } else {
    lora_merge_kernel<false>
        <<<grid, kThreads, 0, stream>>>(wp, k, ap, bp, rows, static_cast<int>(r), scale, static_cast<float>(scale));
  }
  VORTEX_CUDA_LAUNCH_CHECK("lora_merge_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
