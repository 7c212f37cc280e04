// Parity of Vortex's VAE decoders with diffusers 0.42.1 (fixtures from tests/vae/make_vae_fixtures.py):
// the tiny video VAE's BF16 program vs diffusers' FP32 decode (PSNR on [0, 1] pixels, uint8 agreement),
// on a single odd-sized tile and on a tiled two-clip case (spatial blends + temporal cross-fade), and the
// tiny audio VAE's FP32 program vs diffusers (SNR). The folders are loaded through the real loaders.
#include <cmath>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "vae/audio_vae.h"
#include "vae/vae_test_util.h"
#include "vae/video_vae.h"

namespace vortex {
namespace {

using vae_test::fixtures;
using vae_test::get;

struct VideoCase {
  const char* name;
  int tile, overlap;
  int expect_tiles;  // tile forwards
};

class VideoParity : public ::testing::TestWithParam<VideoCase> {};

TEST_P(VideoParity, Bf16ProgramVsDiffusersFp32) {
  const VideoCase c = GetParam();
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  auto vae = VideoVae::load(fixtures() + "/video_vae", **backend);
  ASSERT_TRUE(vae.ok()) << vae.status().to_string();
  (*vae)->mutable_config().tile = c.tile;
  (*vae)->mutable_config().tile_overlap = c.overlap;
  auto cases = SafetensorsFile::open(fixtures() + "/video_cases.safetensors");
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  const std::string n = c.name;
  Tensor latents = get(*cases, n + ".latents"), want = get(*cases, n + ".decoded"), want_u8 = get(*cases, n + ".u8");
  EXPECT_EQ((*vae)->tile_forwards(latents.shape()), c.expect_tiles);
  EXPECT_EQ((*vae)->frames_for(latents.dim(1)), want.dim(1));
  int64_t calls = 0;
  auto got = (*vae)->decode(latents, [&](const VaeProgress& p) { calls = p.done; });
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(calls, c.expect_tiles);
  ASSERT_EQ(got->shape(), want.shape());
  // PSNR on de-normalized [0, 1] pixels (peak 1), as the frames are shown.
  auto rgb8 = video_to_rgb8(*got);
  ASSERT_TRUE(rgb8.ok());
  const int64_t f = want.dim(1), plane = f * want.dim(2) * want.dim(3);
  double se = 0.0;
  int64_t equal = 0, off_by_one = 0;
  for (int ch = 0; ch < 3; ++ch)
    for (int64_t i = 0; i < plane; ++i) {
      const double e = vae_test::shown_pixel(got->data<float>()[ch * plane + i], ch) -
                       vae_test::shown_pixel(want.data<float>()[ch * plane + i], ch);
      se += e * e;
      const int a = rgb8->data<uint8_t>()[i * 3 + ch], b = want_u8.data<uint8_t>()[ch * plane + i];
      equal += a == b;
      off_by_one += std::abs(a - b) <= 1;
    }
  const double mse = se / static_cast<double>(3 * plane);
  const double psnr = 10.0 * std::log10(1.0 / std::max(mse, 1e-20));
  const double total = static_cast<double>(3 * plane);
  std::printf("[video %s] %s: PSNR %.2f dB vs diffusers FP32; uint8 equal %.4f, within 1 %.4f (%lld values)\n", c.name,
              shape_to_string(got->shape()).c_str(), psnr, equal / total, off_by_one / total,
              static_cast<long long>(3 * plane));
  EXPECT_GE(psnr, 45.0);
  EXPECT_GE(off_by_one / total, 0.99);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VideoParity,
                         ::testing::Values(VideoCase{"odd_single_tile", 256, 64, 1},
                                           VideoCase{"tiled_two_clips", 16, 4, 12}),
                         [](const auto& info) { return std::string(info.param.name); });

// The tiling must matter: decoding the tiled case untiled gives different pixels (so the test above can fail).
TEST(VideoParity, UntiledDiffersFromReleasedTiling) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  auto vae = VideoVae::load(fixtures() + "/video_vae", **backend);
  ASSERT_TRUE(vae.ok()) << vae.status().to_string();
  (*vae)->mutable_config().tiling = false;
  auto cases = SafetensorsFile::open(fixtures() + "/video_cases.safetensors");
  ASSERT_TRUE(cases.ok());
  Tensor latents = get(*cases, "tiled_two_clips.latents"), want = get(*cases, "tiled_two_clips.decoded");
  auto got = (*vae)->decode(latents);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  double se = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double e = got->data<float>()[i] - want.data<float>()[i];
    se += e * e;
  }
  EXPECT_GT(se / static_cast<double>(want.numel()), 1e-4);
}

TEST(AudioParity, Fp32ProgramVsDiffusers) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  auto vae = AudioVae::load(fixtures() + "/audio_vae", **backend);
  ASSERT_TRUE(vae.ok()) << vae.status().to_string();
  auto cases = SafetensorsFile::open(fixtures() + "/audio_cases.safetensors");
  ASSERT_TRUE(cases.ok());
  for (const char* name : {"short", "odd"}) {
    const std::string n = name;
    Tensor latents = get(*cases, n + ".latents"), want = get(*cases, n + ".audio");
    auto got = (*vae)->decode(latents);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->shape(), want.shape());
    double max_abs = 0.0;
    const double snr = vae_test::snr_db(want, *got, &max_abs);
    std::printf("[audio %s] %s: SNR %.2f dB vs diffusers FP32, max |err| %.3g\n", name,
                shape_to_string(got->shape()).c_str(), snr, max_abs);
    EXPECT_GE(snr, 40.0);
  }
}

// The Kaiser-sinc filters Vortex computes for synthetic weights equal the checkpoint's buffers.
TEST(AudioParity, KaiserFilterMatchesCheckpointBuffer) {
  auto f = SafetensorsFile::open(fixtures() + "/audio_vae/diffusion_pytorch_model.safetensors");
  ASSERT_TRUE(f.ok());
  Tensor buf = get(*f, "decoder.activation_post.upsample.filter");
  const std::vector<float> mine = kaiser_sinc_filter(0.25, 0.3, 12);
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(mine[static_cast<size_t>(i)], buf.data<float>()[i], 2e-7) << i;
}

}  // namespace
}  // namespace vortex
