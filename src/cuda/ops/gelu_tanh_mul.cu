// gelu_tanh_mul: the GeGLU gate of the audio VAE encoder's pre_block MLP, fp32(fp32(gelu_tanh(a)) * g). Program:
// src/ref/gelu_tanh_mul.cpp's — 0.5 a (1 + tanh(k (a + ((0.044715 a) a) a))) in FP64 with explicit __d*_rn steps
// (k = sqrt(2 / pi) computed on the host, as the reference computes it), rounded once, then an FP32 multiply.
// libdevice's FP64 tanh against the host libm's: the FP32 outputs agree except near an FP32 rounding midpoint
// (tests/cuda/audio_encoder_ops_test.cpp states the tolerance). Elementwise.
#include <algorithm>
#include <cmath>

#include "cuda/ops/audio_encoder_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    gelu_tanh_mul_kernel(const float* a, const float* g, float* out, int64_t n, double k) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const double x = static_cast<double>(a[i]);
    const double inner = __dadd_rn(x, __dmul_rn(__dmul_rn(__dmul_rn(0.044715, x), x), x));
    const double ge = __dmul_rn(__dmul_rn(0.5, x), __dadd_rn(1.0, tanh(__dmul_rn(k, inner))));
    out[i] = __fmul_rn(__double2float_rn(ge), g[i]);
  }
}

}  // namespace

Status gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(ref::check_f32(a, "gelu_tanh_mul a", a.defined() ? a.shape() : Shape{}, Device::kCuda));
  VORTEX_RETURN_IF_ERROR(ref::check_f32(g, "gelu_tanh_mul g", a.shape(), Device::kCuda));
  VORTEX_RETURN_IF_ERROR(ref::check_f32(out, "gelu_tanh_mul out", a.shape(), Device::kCuda));
  const int64_t n = a.numel();
  if (n == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 1 << 20);
  gelu_tanh_mul_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      a.data<float>(), g.data<float>(), out.data<float>(), n, std::sqrt(2.0 / M_PI));
  VORTEX_CUDA_LAUNCH_CHECK("gelu_tanh_mul_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
