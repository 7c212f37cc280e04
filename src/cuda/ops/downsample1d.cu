// downsample1d: BigVGAN's anti-aliased /`ratio` downsampler (replicate pad K/2 - (K even) left and K/2 right,
// depthwise convolution with the Kaiser-sinc filter at stride ratio). One thread per output runs the
// reference's FP64 chain in tap order, one rounding: E0 vs src/ref/downsample1d.cpp.
// Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/activation1d.cuh"
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

__global__ void __launch_bounds__(kEltThreads)
    downsample1d_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ f, int k, int ratio,
                        float* __restrict__ out, int64_t ldo, int rows, int l, int lout) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* xr = x + static_cast<int64_t>(r) * ldx;
    auto x_at = [xr](int64_t i) { return xr[i]; };
    for (int t = blockIdx.x * kEltThreads + threadIdx.x; t < lout; t += gridDim.x * kEltThreads)
      out[static_cast<int64_t>(r) * ldo + t] = downsample1d_at(x_at, l, f, k, ratio, t);
  }
}

}  // namespace

Status downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out, cudaStream_t stream) {
  if (ratio < 1) return invalid_argument("downsample1d: ratio must be >= 1");
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "downsample1d x", DType::kF32, -1, -1));
  if (!filter.defined() || filter.device() != Device::kCuda || filter.dtype() != DType::kF32 ||
      !filter.is_contiguous() || filter.numel() < 1)
    return invalid_argument("downsample1d: filter must be a contiguous device f32 tensor, got " +
                            (filter.defined() ? filter.describe() : std::string("undefined")));
  if (xv.cols <= 0) return invalid_argument("downsample1d: empty signal");
  const int64_t lout = (xv.cols - 1) / ratio + 1;
  VORTEX_ASSIGN_OR_RETURN(RowView ov, vae_rows(out, "downsample1d out", DType::kF32, xv.rows, lout));
  VORTEX_RETURN_IF_ERROR(expect_disjoint(xv, ov, "downsample1d"));
  if (xv.rows == 0) return Status::Ok();
  downsample1d_kernel<<<elementwise_grid(xv.rows, lout), kEltThreads, 0, stream>>>(
      static_cast<const float*>(xv.ptr), xv.ld, static_cast<const float*>(filter.raw_data()),
      static_cast<int>(filter.numel()), ratio, static_cast<float*>(ov.ptr), ov.ld, static_cast<int>(xv.rows),
      static_cast<int>(xv.cols), static_cast<int>(lout));
  VORTEX_CUDA_LAUNCH_CHECK("downsample1d_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
