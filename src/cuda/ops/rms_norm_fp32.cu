// rms_norm_fp32: RMSNorm of FP32 rows with an FP32 weight (the video VAE's norm1/norm2), E0 vs
// src/ref/rms_norm_fp32.cpp: one 256-thread block per row reproduces the canonical FP64 sum of squares
// (src/core/reduce.h), r = fp32(1/sqrt(ms + eps)) in FP64, y = fp32(fp32(x * r) * w) stored as f32 or RNE bf16.
// Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

template <bool kBf16Out>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_fp32_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ w, void* __restrict__ out,
                         int64_t ldo, int d, float eps) {
  __shared__ double lanes[kRowThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * ldx;  // [D] f32
  const double ss = block_canonical_sum_squares(
      d, [&](int j) { return static_cast<double>(xr[j]); }, lanes);
  const float rs = inverse_rms(ss, d, eps);
  for (int j = threadIdx.x; j < d; j += kRowThreads) {
    const float y = __fmul_rn(__fmul_rn(xr[j], rs), w[j]);
    if constexpr (kBf16Out) static_cast<uint16_t*>(out)[r * ldo + j] = f32_to_bf16(y);
    else static_cast<float*>(out)[r * ldo + j] = y;
  }
}

}  // namespace

Status rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "rms_norm_fp32 x", DType::kF32, -1, -1));
  VORTEX_ASSIGN_OR_RETURN(const void* w, device_vector(weight, xv.cols, DType::kF32, "rms_norm_fp32 weight"));
  if (!out.defined() || (out.dtype() != DType::kF32 && out.dtype() != DType::kBF16))
    return invalid_argument("rms_norm_fp32: out must be f32 or bf16 [S, D], got " +
                            (out.defined() ? out.describe() : std::string("undefined")));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, vae_rows(out, "rms_norm_fp32 out", out.dtype(), xv.rows, xv.cols));
  VORTEX_RETURN_IF_ERROR(expect_disjoint(xv, ov, "rms_norm_fp32"));  // x is read twice (sum, then output)
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  if (xv.rows > kMaxGridX) return invalid_argument("rms_norm_fp32: too many rows");
  const unsigned grid = static_cast<unsigned>(xv.rows);
  const float* xp = static_cast<const float*>(xv.ptr);
  const float* wp = static_cast<const float*>(w);
  const int d = static_cast<int>(xv.cols);
  if (out.dtype() == DType::kBF16) {
    rms_norm_fp32_kernel<true><<<grid, kRowThreads, 0, stream>>>(xp, xv.ld, wp, ov.ptr, ov.ld, d, eps);
    VORTEX_CUDA_LAUNCH_CHECK("rms_norm_fp32_kernel<bf16>");
  } else {
    rms_norm_fp32_kernel<false><<<grid, kRowThreads, 0, stream>>>(xp, xv.ld, wp, ov.ptr, ov.ld, d, eps);
    VORTEX_CUDA_LAUNCH_CHECK("rms_norm_fp32_kernel<f32>");
  }
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
