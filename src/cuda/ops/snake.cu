// snake: DAC's Snake1d in place, x + (1 / (a + 1e-9)) * sin(a * x)^2 in FP64 with src/ref/snake.cpp's order
// (explicit __d*_rn steps), rounded once to FP32. sin is libdevice's FP64 sin (<= 2 FP64 ulps) against the host
// libm's, so the FP32 outputs agree except within a few FP64 ulps of an FP32 rounding midpoint (probability ~2^-27
// per element; tests/cuda/audio_encoder_ops_test.cpp states the tolerance). Rows are B stacked signals of C channels.
#include "cuda/ops/audio_encoder_common.cuh"
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

__global__ void __launch_bounds__(kEltThreads)
    snake_kernel(float* __restrict__ x, int64_t ldx, const float* __restrict__ alpha, int rows, int cols,
                 int channels) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const double a = static_cast<double>(alpha[r % channels]);
    const double inv = __ddiv_rn(1.0, __dadd_rn(a, 1e-9));
    for (int c = blockIdx.x * kEltThreads + threadIdx.x; c < cols; c += gridDim.x * kEltThreads) {
      float& xr = x[static_cast<int64_t>(r) * ldx + c];
      const double v = static_cast<double>(xr);
      const double s = sin(__dmul_rn(a, v));
      xr = __double2float_rn(__dadd_rn(v, __dmul_rn(__dmul_rn(inv, s), s)));
    }
  }
}

}  // namespace

Status snake(Tensor& x, const Tensor& alpha, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "snake x", DType::kF32, -1, -1));
  const int64_t ch = alpha.defined() ? alpha.numel() : 0;
  if (ch < 1 || xv.rows % ch != 0)
    return invalid_argument("snake: x " + x.describe() + " does not hold whole signals of " + std::to_string(ch) +
                            " channels (alpha " + (alpha.defined() ? alpha.describe() : std::string("undefined")) +
                            ")");
  VORTEX_ASSIGN_OR_RETURN(const void* a, device_vector(alpha, ch, DType::kF32, "snake alpha"));
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  snake_kernel<<<elementwise_grid(xv.rows, xv.cols), kEltThreads, 0, stream>>>(
      static_cast<float*>(xv.ptr), xv.ld, static_cast<const float*>(a), static_cast<int>(xv.rows),
      static_cast<int>(xv.cols), static_cast<int>(ch));
  VORTEX_CUDA_LAUNCH_CHECK("snake_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
