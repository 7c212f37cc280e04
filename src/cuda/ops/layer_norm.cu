// layer_norm: LayerNorm of FP32 or BF16 rows (read exactly into FP32) with FP32 weight and bias (the video VAE's
// norm_out, the vision tower's norms), E0 vs
// src/ref/layer_norm.cpp: one 256-thread block per row; the mean and the biased variance are FP64 sums in
// the canonical lanes and tree of src/core/reduce.h, r = fp32(1/sqrt(var + eps)), then
// y = fp32(fp32(fp32(x - fp32(mean)) * r) * w) + b in FP32, stored as f32 or RNE bf16.
// Tested in tests/cuda/vae_ops_test.cpp.
#include <type_traits>

#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

// canonical_sum (src/core/reduce.h) over a 256-thread block: the lanes of block_canonical_sum_squares
// accumulating the values themselves. Returns the total in every thread.
template <typename LoadFn>
__device__ __forceinline__ double block_canonical_sum(int n, LoadFn vals, double* lanes) {
  const int t = threadIdx.x;
  double acc = 0.0;
  for (int j = t; j < n; j += kRowThreads) acc = __dadd_rn(acc, vals(j));
  lanes[t] = acc;
  __syncthreads();
  for (int w = kRowThreads / 2; w >= 32; w /= 2) {
    if (t < w) lanes[t] = __dadd_rn(lanes[t], lanes[t + w]);
    __syncthreads();
  }
  if (t < 32) {
    double v = lanes[t];
    for (int w = 16; w >= 1; w /= 2) v = __dadd_rn(v, __shfl_down_sync(0xFFFFFFFFu, v, w));
    if (t == 0) lanes[0] = v;
  }
  __syncthreads();
  const double total = lanes[0];
  __syncthreads();
  return total;
}

__device__ __forceinline__ float load_f32(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f32(const uint16_t* p, int64_t i) { return bf16_to_f32(p[i]); }

template <typename In, bool kBf16Out>
__global__ void __launch_bounds__(kRowThreads)
    layer_norm_kernel(const In* __restrict__ x, int64_t ldx, const float* __restrict__ w, const float* __restrict__ b,
                      void* __restrict__ out, int64_t ldo, int d, float eps) {
  __shared__ double lanes[kRowThreads];
  const int64_t r = blockIdx.x;
  const In* xr = x + r * ldx;  // [D] f32 or bf16
  const double sum = block_canonical_sum(
      d, [&](int j) { return static_cast<double>(load_f32(xr, j)); }, lanes);
  const double mean = __ddiv_rn(sum, static_cast<double>(d));
  const double ss = block_canonical_sum_squares(
      d, [&](int j) { return __dsub_rn(static_cast<double>(load_f32(xr, j)), mean); }, lanes);
  const double var = __ddiv_rn(ss, static_cast<double>(d));
  const float rs = __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, static_cast<double>(eps)))));
  const float mean_f = __double2float_rn(mean);
  for (int j = threadIdx.x; j < d; j += kRowThreads) {
    const float y = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(load_f32(xr, j), mean_f), rs), w[j]), b[j]);
    if constexpr (kBf16Out) static_cast<uint16_t*>(out)[r * ldo + j] = f32_to_bf16(y);
    else static_cast<float*>(out)[r * ldo + j] = y;
  }
}

}  // namespace

Status layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out,
                  cudaStream_t stream) {
  if (!x.defined() || (x.dtype() != DType::kF32 && x.dtype() != DType::kBF16))
    return invalid_argument("layer_norm: x must be f32 or bf16 [S, D], got " +
                            (x.defined() ? x.describe() : std::string("undefined")));
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "layer_norm x", x.dtype(), -1, -1));
  VORTEX_ASSIGN_OR_RETURN(const void* w, device_vector(weight, xv.cols, DType::kF32, "layer_norm weight"));
  VORTEX_ASSIGN_OR_RETURN(const void* b, device_vector(bias, xv.cols, DType::kF32, "layer_norm bias"));
  if (!out.defined() || (out.dtype() != DType::kF32 && out.dtype() != DType::kBF16))
    return invalid_argument("layer_norm: out must be f32 or bf16 [S, D], got " +
                            (out.defined() ? out.describe() : std::string("undefined")));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, vae_rows(out, "layer_norm out", out.dtype(), xv.rows, xv.cols));
  // The row is read twice (statistics, then the output): out may not overlap x.
  VORTEX_RETURN_IF_ERROR(expect_disjoint(xv, ov, "layer_norm"));
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  if (xv.rows > kMaxGridX) return invalid_argument("layer_norm: too many rows");
  const unsigned grid = static_cast<unsigned>(xv.rows);
  const int d = static_cast<int>(xv.cols);
  const float* wp = static_cast<const float*>(w);
  const float* bp = static_cast<const float*>(b);
  auto launch = [&](auto* xp) -> Status {
    using In = std::remove_const_t<std::remove_pointer_t<decltype(xp)>>;
    if (out.dtype() == DType::kBF16) {
      layer_norm_kernel<In, true><<<grid, kRowThreads, 0, stream>>>(xp, xv.ld, wp, bp, ov.ptr, ov.ld, d, eps);
      VORTEX_CUDA_LAUNCH_CHECK("layer_norm_kernel<bf16 out>");
    } else {
      layer_norm_kernel<In, false><<<grid, kRowThreads, 0, stream>>>(xp, xv.ld, wp, bp, ov.ptr, ov.ld, d, eps);
      VORTEX_CUDA_LAUNCH_CHECK("layer_norm_kernel<f32 out>");
    }
    return Status::Ok();
  };
  if (x.dtype() == DType::kBF16) return launch(static_cast<const uint16_t*>(xv.ptr));
  return launch(static_cast<const float*>(xv.ptr));
}

}  // namespace vortex::cuda_ops
