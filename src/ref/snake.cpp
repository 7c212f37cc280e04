// Reference Snake1d (DAC, the audio VAE encoder): x + 1/(alpha + 1e-9) * sin(alpha * x)^2 per channel, evaluated in
// FP64 (the host libm's sin) and rounded once to FP32. A GPU's FP64 sin gives the same FP32 values except within a
// few FP64 ulps of an FP32 rounding midpoint (src/cuda/ops/snake.cu). Rows are channels of B stacked signals.
// Tested in tests/ref/audio_encoder_ops_test.cpp (FP64 formula, x = 0 fixed point) and
// tests/cuda/audio_encoder_ops_test.cpp.
#include <cmath>
#include <string>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status snake(Tensor& x, const Tensor& alpha, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("snake: x must be 2-D [B * C, L] f32, got " + x.describe());
  const int64_t rows = x.dim(0), l = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "snake x", DType::kF32, rows, l));
  const int64_t c = alpha.defined() ? alpha.numel() : 0;
  if (c < 1 || rows % c != 0 || alpha.dtype() != DType::kF32 || !alpha.is_contiguous() ||
      alpha.device() != Device::kCpu)
    return invalid_argument("snake: x " + x.describe() +
                            " needs a contiguous host alpha of whole-signal channels, got " +
                            (alpha.defined() ? alpha.describe() : std::string("undefined")));
  run(rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const double a = alpha.data<float>()[row % c], inv = 1.0 / (a + 1e-9);
      float* xr = row_ptr<float>(x, row);
      for (int64_t i = 0; i < l; ++i) {
        const double s = std::sin(a * xr[i]);
        xr[i] = static_cast<float>(xr[i] + inv * s * s);
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
