// Helpers of the VAE tests: the fixture folder (tests/vae/fixtures, $VORTEX_VAE_FIXTURES overrides the path
// compiled in), tensors read from a fixture file, and the two parity measures the issue states: PSNR of
// de-normalized video and SNR of audio against diffusers' FP32 decode.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "io/safetensors.h"
#include "vortex/tensor.h"

#ifndef VORTEX_VAE_FIXTURES
#error "VORTEX_VAE_FIXTURES must name tests/vae/fixtures"
#endif

namespace vortex::vae_test {

inline std::string fixtures() {
  const char* env = std::getenv("VORTEX_VAE_FIXTURES");
  return env && *env ? env : VORTEX_VAE_FIXTURES;
}

inline Tensor get(const SafetensorsFile& f, const std::string& name) {
  auto t = f.tensor(name);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : Tensor();
}

// ImageNet de-normalization, clamped to [0, 1]: the pixel value of channel `ch` as the frames are shown.
inline double shown_pixel(float v, int ch) {
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
  return std::min(1.0, std::max(0.0, static_cast<double>(v) * stdv[ch] + mean[ch]));
}

// PSNR (peak 1) of two ImageNet-space videos [3, F, H, W] f32 on de-normalized, clamped pixels.
inline double video_psnr(const Tensor& a, const Tensor& b) {
  const int64_t plane = a.numel() / 3;
  double se = 0.0;
  for (int ch = 0; ch < 3; ++ch)
    for (int64_t i = 0; i < plane; ++i) {
      const double e =
          shown_pixel(a.data<float>()[ch * plane + i], ch) - shown_pixel(b.data<float>()[ch * plane + i], ch);
      se += e * e;
    }
  return 10.0 * std::log10(1.0 / std::max(se / static_cast<double>(a.numel()), 1e-20));
}

// SNR in dB of `got` against `want` (same shape, f32), and the largest absolute error.
inline double snr_db(const Tensor& want, const Tensor& got, double* max_abs) {
  double sig = 0.0, err = 0.0;
  *max_abs = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = want.data<float>()[i], e = got.data<float>()[i] - w;
    sig += w * w;
    err += e * e;
    *max_abs = std::max(*max_abs, std::abs(e));
  }
  return 10.0 * std::log10(sig / std::max(err, 1e-30));
}

}  // namespace vortex::vae_test
