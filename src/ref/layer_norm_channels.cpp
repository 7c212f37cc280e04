// Reference LayerNorm over the channels of a [B, D, L] stack (the audio VAE encoder's pre_block norms on its
// channel-major activations): per position, FP64 mean and biased variance with d ascending, then
// (x - mean) * (1 / sqrt(var + eps)) * w + b in FP64, rounded once to FP32. Rows are (signal, position).
// Tested in tests/ref/audio_encoder_ops_test.cpp and tests/cuda/audio_encoder_ops_test.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "ref/audio_encoder_internal.h"
#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& out,
                           const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_f32(x, "layer_norm_channels x", {-1, -1, -1}));
  const int64_t b_n = x.dim(0), d = x.dim(1), l = x.dim(2);
  VORTEX_RETURN_IF_ERROR(check_f32(weight, "layer_norm_channels weight", {d}));
  VORTEX_RETURN_IF_ERROR(check_f32(bias, "layer_norm_channels bias", {d}));
  VORTEX_RETURN_IF_ERROR(check_f32(out, "layer_norm_channels out", {b_n, d, l}));
  if (!(eps >= 0.0)) return invalid_argument("layer_norm_channels: eps must be >= 0");
  const float* w = weight.data<float>();
  const float* bi = bias.data<float>();
  run(b_n * l, [&](int64_t begin, int64_t end) {
    std::vector<float> col(static_cast<size_t>(d));
    for (int64_t job = begin; job < end; ++job) {
      const int64_t b = job / l, t = job % l;
      const float* xp = x.data<float>() + b * d * l + t;
      for (int64_t j = 0; j < d; ++j) col[static_cast<size_t>(j)] = xp[j * l];  // out may be x
      double mean = 0.0, var = 0.0;
      for (int64_t j = 0; j < d; ++j) mean += col[static_cast<size_t>(j)];
      mean /= static_cast<double>(d);
      for (int64_t j = 0; j < d; ++j) {
        const double dv = col[static_cast<size_t>(j)] - mean;
        var += dv * dv;
      }
      var /= static_cast<double>(d);
      const double inv = 1.0 / std::sqrt(var + eps);
      float* op = out.data<float>() + b * d * l + t;
      for (int64_t j = 0; j < d; ++j)
        op[j * l] = static_cast<float>((col[static_cast<size_t>(j)] - mean) * inv * w[j] + bi[j]);
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
