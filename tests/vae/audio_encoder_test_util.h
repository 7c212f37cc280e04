// Shared by the audio VAE encoder's tests (tests/vae/audio_vae_encoder_test.cpp, the CPU reference and the cpu
// backend; tests/vae/audio_vae_encoder_cuda_test.cpp, label gpu): the diffusers fixtures of
// tests/vae/make_audio_encoder_fixtures.py and the max / rms error of an f32 result against a reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "vae/vae_test_util.h"

namespace vortex::audio_encoder_test {

inline std::string dir() { return vae_test::fixtures() + "/audio_encoder"; }

inline const SafetensorsFile& cases() {
  static const SafetensorsFile f = [] {
    auto r = SafetensorsFile::open(dir() + "/cases.safetensors");
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(*r);
  }();
  return f;
}

struct Err {
  double max_abs = 0, rms = 0;
};
// |got - truth| over f32 got and a T (float or double) truth of the same size.
template <typename T>
Err error_vs(const Tensor& got, const Tensor& truth) {
  Err e;
  double se = 0;
  for (int64_t i = 0; i < truth.numel(); ++i) {
    const double d = std::abs(static_cast<double>(got.data<float>()[i]) - truth.data<T>()[i]);
    e.max_abs = std::max(e.max_abs, d);
    se += d * d;
  }
  e.rms = std::sqrt(se / static_cast<double>(truth.numel()));
  return e;
}

}  // namespace vortex::audio_encoder_test
