// The video VAE encoder on the CUDA backend (VideoVaeEncoder::load with a backend) against diffusers 0.42.1's
// fixtures (tests/vae/make_vae_encoder_fixtures.py), FP64 run as truth. FP32 FMA math (device_tf32 = false): the
// moments within 2x diffusers' FP32 floor, the rule of the CPU reference. TF32 operands (the default, torch's
// program for cuDNN convolutions on the GPU): relative L2 error against FP64 within 2^-8 (a TF32 operand carries
// 2^-11 relative rounding; the encoder's depth compounds it; an error in the program is of order 1). The
// conditioning latents (float16-rounded samples) are printed against diffusers'. Label gpu; skips without a device.
#include <cmath>
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/cuda_backend.h"
#include "gpu_test.h"
#include "vae/vae_test_util.h"
#include "vae/video_vae_encoder.h"

namespace vortex {
namespace {

using vae_test::fixtures;
using vae_test::get;

std::string dir() { return fixtures() + "/video_encoder"; }

Tensor normalized(const Tensor& u8) {
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};
  Tensor x = Tensor::empty(u8.shape(), DType::kF32);
  const int64_t per = u8.numel() / 3;
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < per; ++i)
      x.data<float>()[c * per + i] =
          (static_cast<float>(u8.data<uint8_t>()[c * per + i]) / 255.0f - kMean[c]) / kStd[c];
  return x;
}

struct Err {
  double max_abs = 0, rms = 0, rel_l2 = 0;
};
Err error_vs(const Tensor& got, const Tensor& truth64) {
  Err e;
  double se = 0, ss = 0;
  for (int64_t i = 0; i < truth64.numel(); ++i) {
    const double t = truth64.data<double>()[i], d = std::abs(static_cast<double>(got.data<float>()[i]) - t);
    e.max_abs = std::max(e.max_abs, d);
    se += d * d;
    ss += t * t;
  }
  e.rms = std::sqrt(se / static_cast<double>(truth64.numel()));
  e.rel_l2 = std::sqrt(se / ss);
  return e;
}

TEST(VideoVaeEncoderCuda, MomentsAndLatents) {
  auto gpu = CudaBackend::create(0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(gpu.status());
  auto file = SafetensorsFile::open(dir() + "/cases.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(dir() + "/meta.json"));
  for (const char* name : {"keyframe", "keyframe_tiled", "video_two_clips"}) {
    SCOPED_TRACE(name);
    const auto& m = meta["cases"][name];
    const Tensor pixels = get(*file, std::string(name) + ".pixels");
    const Tensor want = get(*file, std::string(name) + ".moments");
    const Tensor truth = get(*file, std::string(name) + ".moments64");
    const Tensor latents = get(*file, std::string(name) + ".latents");
    for (bool tf32 : {false, true}) {
      auto enc = VideoVaeEncoder::load(dir() + "/vae", gpu->get());
      ASSERT_TRUE(enc.ok()) << enc.status().to_string();
      if (!m["tile"].is_null()) {
        enc->mutable_config().tile = m["tile"].get<int>();
        enc->mutable_config().tile_overlap = m["overlap"].get<int>();
      }
      enc->mutable_config().device_tf32 = tf32;
      auto got = enc->moments(normalized(pixels));
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_EQ(got->shape(), want.shape());
      const Err ours = error_vs(*got, truth), floor = error_vs(want, truth);
      std::printf(
          "%s tf32=%d moments: CUDA vs FP64 max %.3g rms %.3g rel-L2 %.3g; diffusers FP32 vs FP64 (floor) max "
          "%.3g rms %.3g\n",
          name, tf32, ours.max_abs, ours.rms, ours.rel_l2, floor.max_abs, floor.rms);
      if (!tf32) {
        EXPECT_LE(ours.rms, 2 * floor.rms + 1e-7);
        EXPECT_LE(ours.max_abs, 2 * floor.max_abs + 1e-6);
      } else {
        EXPECT_LE(ours.rel_l2, std::ldexp(1.0, -8));
      }
      auto lat = enc->encode_condition(pixels, 42);
      ASSERT_TRUE(lat.ok()) << lat.status().to_string();
      ASSERT_EQ(lat->shape(), latents.shape());
      int64_t equal = 0;
      double worst = 0;
      for (int64_t i = 0; i < latents.numel(); ++i) {
        equal += lat->data<float>()[i] == latents.data<float>()[i];
        worst = std::max(worst, static_cast<double>(std::abs(lat->data<float>()[i] - latents.data<float>()[i])));
      }
      std::printf("%s tf32=%d latents: %lld of %lld equal to diffusers', worst |diff| %.3g\n", name, tf32,
                  static_cast<long long>(equal), static_cast<long long>(latents.numel()), worst);
      if (!tf32) {
        EXPECT_GE(equal, latents.numel() * 99 / 100);
      }
    }
  }
}

}  // namespace
}  // namespace vortex
