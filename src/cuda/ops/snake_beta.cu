// snake_beta: BigVGAN's SnakeBeta in place, x + fp32(1 / fp32(b + 1e-9)) * fp32(sin(a * x))^2 with a =
// fp32(exp(alpha)), b = fp32(exp(beta)), every FP32 step rounded once in src/ref/snake_beta.cpp's order. exp and sin
// run in FP64 (libdevice, <= 1 and <= 2 FP64 ulps) and round once to FP32, as the reference does with the host libm:
// the FP32 values agree except when the FP64 value lies within ~2 FP64 ulps of an FP32 rounding midpoint (probability
// ~2^-27 per element; docs/numerics.md states the tolerance). Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/activation1d.cuh"
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

__global__ void __launch_bounds__(kEltThreads)
    snake_beta_kernel(float* __restrict__ x, int64_t ldx, const float* __restrict__ alpha,
                      const float* __restrict__ beta, int rows, int cols, int channels) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const SnakeBetaCoeffs co = snake_beta_coeffs(alpha[r % channels], beta[r % channels]);
    for (int c = blockIdx.x * kEltThreads + threadIdx.x; c < cols; c += gridDim.x * kEltThreads) {
      float& xr = x[static_cast<int64_t>(r) * ldx + c];
      xr = snake_beta_at(xr, co);
    }
  }
}

}  // namespace

Status snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "snake_beta x", DType::kF32, -1, -1));
  // Rows are B stacked signals of C channels: row r reads alpha / beta [r % C].
  const int64_t ch = alpha.defined() ? alpha.numel() : 0;
  if (ch < 1 || xv.rows % ch != 0)
    return invalid_argument("snake_beta: x " + x.describe() + " does not hold whole signals of " + std::to_string(ch) +
                            " channels (alpha " + (alpha.defined() ? alpha.describe() : std::string("undefined")) +
                            ")");
  VORTEX_ASSIGN_OR_RETURN(const void* a, device_vector(alpha, ch, DType::kF32, "snake_beta alpha"));
  VORTEX_ASSIGN_OR_RETURN(const void* b, device_vector(beta, ch, DType::kF32, "snake_beta beta"));
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  snake_beta_kernel<<<elementwise_grid(xv.rows, xv.cols), kEltThreads, 0, stream>>>(
      static_cast<float*>(xv.ptr), xv.ld, static_cast<const float*>(a), static_cast<const float*>(b),
      static_cast<int>(xv.rows), static_cast<int>(xv.cols), static_cast<int>(ch));
  VORTEX_CUDA_LAUNCH_CHECK("snake_beta_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
