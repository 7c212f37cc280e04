// upsample1d: BigVGAN's anti-aliased x`ratio` upsampler (replicate pad, depthwise transposed convolution with
// the Kaiser-sinc filter, times ratio, crop). One thread per output runs the reference's FP64 chain in
// ascending input order and the FP32 product with ratio: E0 vs src/ref/upsample1d.cpp.
// Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/activation1d.cuh"
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

__global__ void __launch_bounds__(kEltThreads)
    upsample1d_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ f, int k, int ratio,
                      float* __restrict__ out, int64_t ldo, int rows, int l) {
  const int lout = l * ratio;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* xr = x + static_cast<int64_t>(r) * ldx;
    for (int t = blockIdx.x * kEltThreads + threadIdx.x; t < lout; t += gridDim.x * kEltThreads)
      out[static_cast<int64_t>(r) * ldo + t] = upsample1d_at(xr, l, f, k, ratio, t);
  }
}

}  // namespace

Status upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out, cudaStream_t stream) {
  if (ratio < 1) return invalid_argument("upsample1d: ratio must be >= 1");
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "upsample1d x", DType::kF32, -1, -1));
  if (!filter.defined() || filter.device() != Device::kCuda || filter.dtype() != DType::kF32 ||
      !filter.is_contiguous() || filter.numel() < ratio)
    return invalid_argument("upsample1d: filter must be a contiguous device f32 tensor of at least `ratio` taps, got " +
                            (filter.defined() ? filter.describe() : std::string("undefined")));
  if (xv.cols <= 0) return invalid_argument("upsample1d: empty signal");
  if (xv.cols * ratio > INT32_MAX) return invalid_argument("upsample1d: output longer than 2^31 - 1 samples");
  VORTEX_ASSIGN_OR_RETURN(RowView ov, vae_rows(out, "upsample1d out", DType::kF32, xv.rows, xv.cols * ratio));
  VORTEX_RETURN_IF_ERROR(expect_disjoint(xv, ov, "upsample1d"));
  if (xv.rows == 0) return Status::Ok();
  upsample1d_kernel<<<elementwise_grid(xv.rows, ov.cols), kEltThreads, 0, stream>>>(
      static_cast<const float*>(xv.ptr), xv.ld, static_cast<const float*>(filter.raw_data()),
      static_cast<int>(filter.numel()), ratio, static_cast<float*>(ov.ptr), ov.ld, static_cast<int>(xv.rows),
      static_cast<int>(xv.cols));
  VORTEX_CUDA_LAUNCH_CHECK("upsample1d_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
