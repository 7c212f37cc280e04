// Reference GeGLU gate of the audio VAE encoder's pre_block MLP: fp32(fp32(gelu_tanh(a)) * g), the GELU evaluated in
// FP64 with the host libm's tanh and rounded once; the product of two FP32 values is exact in FP64, so the second
// rounding is an FP32 multiply. Elementwise. Tested in tests/ref/audio_encoder_ops_test.cpp and
// tests/cuda/audio_encoder_ops_test.cpp.
#include <algorithm>
#include <cmath>
#include <string>

#include "ref/audio_encoder_internal.h"
#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(ref::check_f32(a, "gelu_tanh_mul a", a.defined() ? a.shape() : Shape{}, Device::kCpu));
  VORTEX_RETURN_IF_ERROR(ref::check_f32(g, "gelu_tanh_mul g", a.shape(), Device::kCpu));
  VORTEX_RETURN_IF_ERROR(ref::check_f32(out, "gelu_tanh_mul out", a.shape(), Device::kCpu));
  const int64_t n = a.numel();
  constexpr int64_t kChunk = 4096;
  const double k = std::sqrt(2.0 / M_PI);
  run((n + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin * kChunk; i < std::min(n, end * kChunk); ++i) {
      const double x = a.data<float>()[i];
      const float ge = static_cast<float>(0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))));
      out.data<float>()[i] = static_cast<float>(ge * static_cast<double>(g.data<float>()[i]));
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
