// CUDA decode parity (label gpu): the diffusers 0.42.1 fixtures of tests/vae/vae_parity_test.cpp decoded on the
// CUDA backend, reporting PSNR (video, [0, 1] pixels) and SNR (audio) against diffusers' FP32 decode with the
// same targets as the CPU decode (>= 45 dB, >= 40 dB), and the CUDA decode against the CPU decode of the same
// program (video: the GEMM/attention accumulation order is the only difference, docs/numerics.md states the
// bound; audio: E0 ops except snake_beta's stated tolerance); the fused residual norm against the unfused ops (same
// bytes) and the opt-in FP8 linears' PSNR. Skips visibly without a device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "gpu_test.h"
#include "io/safetensors.h"
#include "vae/audio_vae.h"
#include "vae/vae_test_util.h"
#include "vae/video_vae.h"

namespace vortex {
namespace {

using vae_test::fixtures;
using vae_test::get;
using vae_test::snr_db;
using vae_test::video_psnr;

#define VORTEX_REQUIRE_CUDA_BACKEND(var) \
  auto var = make_backend("cuda", 0);    \
  VORTEX_SKIP_NO_GPU_OR_FAIL(var.status());

struct VideoCase {
  const char* name;
  int tile, overlap;
  int expect_tiles;
};

class CudaVideoParity : public ::testing::TestWithParam<VideoCase> {};

TEST_P(CudaVideoParity, Bf16ProgramVsDiffusersFp32AndCpu) {
  const VideoCase c = GetParam();
  VORTEX_REQUIRE_CUDA_BACKEND(gpu);
  auto cpu = make_backend("cpu", 0);
  ASSERT_TRUE(cpu.ok());
  auto cases = SafetensorsFile::open(fixtures() + "/video_cases.safetensors");
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  const std::string n = c.name;
  Tensor latents = get(*cases, n + ".latents"), want = get(*cases, n + ".decoded"), want_u8 = get(*cases, n + ".u8");
  Tensor decoded[2];
  Backend* backends[2] = {gpu->get(), cpu->get()};
  for (int b = 0; b < 2; ++b) {
    auto vae = VideoVae::load(fixtures() + "/video_vae", *backends[b]);
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    (*vae)->mutable_config().tile = c.tile;
    (*vae)->mutable_config().tile_overlap = c.overlap;
    int64_t calls = 0;
    auto got = (*vae)->decode(latents, [&](const VaeProgress& p) { calls = p.done; });
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(calls, c.expect_tiles);
    ASSERT_EQ(got->shape(), want.shape());
    decoded[b] = *got;
  }
  auto rgb8 = video_to_rgb8(decoded[0]);
  ASSERT_TRUE(rgb8.ok());
  const int64_t plane = want.numel() / 3;
  int64_t equal = 0, off_by_one = 0;
  for (int ch = 0; ch < 3; ++ch)
    for (int64_t i = 0; i < plane; ++i) {
      const int a = rgb8->data<uint8_t>()[i * 3 + ch], b = want_u8.data<uint8_t>()[ch * plane + i];
      equal += a == b;
      off_by_one += std::abs(a - b) <= 1;
    }
  const double total = static_cast<double>(want.numel());
  const double psnr = video_psnr(decoded[0], want), psnr_cpu = video_psnr(decoded[0], decoded[1]);
  std::printf(
      "[cuda video %s] %s: PSNR %.2f dB vs diffusers FP32 (CPU decode %.2f dB), %.2f dB vs the CPU decode; "
      "uint8 equal %.4f, within 1 %.4f\n",
      c.name, shape_to_string(want.shape()).c_str(), psnr, video_psnr(decoded[1], want), psnr_cpu, equal / total,
      off_by_one / total);
  EXPECT_GE(psnr, 45.0);
  EXPECT_GE(off_by_one / total, 0.99);
  EXPECT_GE(psnr_cpu, 50.0);  // docs/numerics.md: the CUDA and CPU decodes of the BF16 program
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaVideoParity,
                         ::testing::Values(VideoCase{"odd_single_tile", 256, 64, 1},
                                           VideoCase{"tiled_two_clips", 16, 4, 12}),
                         [](const auto& info) { return std::string(info.param.name); });

// Batched tile forwards on CUDA (a clip's tiles as one forward of B * S rows, cuDNN SDPA with a batch dimension)
// against one tile per forward: the GEMMs may pick other kernels for the larger M, so the contract is E1 (the
// uint8 frames within one level of each other, PSNR >= 45 dB vs diffusers FP32); the count of equal values is
// reported. The per-tile attention loop (batched_attention = false) is checked the same way.
TEST(CudaVideoBatching, BatchedTilesWithinE1OfPerTile) {
  VORTEX_REQUIRE_CUDA_BACKEND(gpu);
  auto cases = SafetensorsFile::open(fixtures() + "/video_cases.safetensors");
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  Tensor latents = get(*cases, "tiled_two_clips.latents"), want = get(*cases, "tiled_two_clips.decoded");
  auto vae = VideoVae::load(fixtures() + "/video_vae", **gpu);
  ASSERT_TRUE(vae.ok()) << vae.status().to_string();
  (*vae)->mutable_config().tile = 16;
  (*vae)->mutable_config().tile_overlap = 4;
  VideoVae::Batching per_tile, batched, looped, unfused;
  per_tile.max_batch_tiles = 1;
  looped.batched_attention = false;
  unfused.fused_residual_norm = false;
  Tensor out[4];
  const VideoVae::Batching settings[4] = {per_tile, batched, looped, unfused};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE((*vae)->set_batching(settings[i]).ok());
    auto got = (*vae)->decode(latents);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    out[i] = *got;
  }
  auto ref8 = video_to_rgb8(out[0]);
  ASSERT_TRUE(ref8.ok());
  for (int i = 1; i < 3; ++i) {
    auto u8 = video_to_rgb8(out[i]);
    ASSERT_TRUE(u8.ok());
    int64_t same = 0, worst = 0;
    for (int64_t k = 0; k < out[0].numel(); ++k) same += out[0].data<float>()[k] == out[i].data<float>()[k];
    for (int64_t k = 0; k < u8->numel(); ++k)
      worst = std::max<int64_t>(
          worst, std::abs(static_cast<int>(u8->data<uint8_t>()[k]) - static_cast<int>(ref8->data<uint8_t>()[k])));
    const double psnr = video_psnr(out[i], want);
    std::printf(
        "[cuda video batching %s] %lld of %lld values equal to the per-tile decode, max uint8 diff %lld, "
        "PSNR %.2f dB vs diffusers FP32\n",
        i == 1 ? "batched" : "batched GEMMs, per-tile attention", static_cast<long long>(same),
        static_cast<long long>(out[0].numel()), static_cast<long long>(worst), psnr);
    EXPECT_LE(worst, 1);
    EXPECT_GE(psnr, 45.0);
  }
  // The fused LayerScale residual + RMSNorm (the default) is E0 with the two ops: the whole decode is the same bytes.
  int64_t differ = 0;
  for (int64_t k = 0; k < out[1].numel(); ++k)
    differ += std::memcmp(out[1].data<float>() + k, out[3].data<float>() + k, sizeof(float)) != 0;
  std::printf("[cuda video fused residual norm] %lld of %lld values differ from the unfused decode\n",
              static_cast<long long>(differ), static_cast<long long>(out[1].numel()));
  EXPECT_EQ(differ, 0);
}

// The opt-in FP8 linears (VideoVaeLinears::kFp8Blockwise, E2): PSNR against diffusers FP32 and against the BF16
// program reported; the bound only catches a broken path (a wrong scale or layout lands far below it).
TEST(CudaVideoFp8, OptInFp8LinearsPsnrReported) {
  VORTEX_REQUIRE_CUDA_BACKEND(gpu);
  auto cases = SafetensorsFile::open(fixtures() + "/video_cases.safetensors");
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  Tensor latents = get(*cases, "tiled_two_clips.latents"), want = get(*cases, "tiled_two_clips.decoded");
  Tensor out[2];
  const VideoVaeLinears modes[2] = {VideoVaeLinears::kBf16, VideoVaeLinears::kFp8Blockwise};
  for (int i = 0; i < 2; ++i) {
    auto vae = VideoVae::load(fixtures() + "/video_vae", **gpu, modes[i]);
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    EXPECT_EQ((*vae)->linears(), modes[i]);
    (*vae)->mutable_config().tile = 16;
    (*vae)->mutable_config().tile_overlap = 4;
    auto got = (*vae)->decode(latents);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    out[i] = *got;
  }
  int64_t same = 0;
  for (int64_t k = 0; k < out[0].numel(); ++k) same += out[0].data<float>()[k] == out[1].data<float>()[k];
  const double psnr = video_psnr(out[1], want), psnr_bf16 = video_psnr(out[1], out[0]);
  std::printf(
      "[cuda video fp8-blockwise] PSNR %.2f dB vs diffusers FP32 (BF16 program %.2f dB), %.2f dB vs the BF16 "
      "program; %lld of %lld values equal to it\n",
      psnr, video_psnr(out[0], want), psnr_bf16, static_cast<long long>(same), static_cast<long long>(out[0].numel()));
  EXPECT_LT(same, out[0].numel());  // the FP8 GEMMs ran (the decode is not the BF16 one)
  EXPECT_GE(psnr, 30.0);
}

TEST(CudaAudioParity, Fp32ProgramVsDiffusersAndCpu) {
  VORTEX_REQUIRE_CUDA_BACKEND(gpu);
  auto cpu = make_backend("cpu", 0);
  ASSERT_TRUE(cpu.ok());
  auto gvae = AudioVae::load(fixtures() + "/audio_vae", **gpu);
  ASSERT_TRUE(gvae.ok()) << gvae.status().to_string();
  auto cvae = AudioVae::load(fixtures() + "/audio_vae", **cpu);
  ASSERT_TRUE(cvae.ok()) << cvae.status().to_string();
  auto cases = SafetensorsFile::open(fixtures() + "/audio_cases.safetensors");
  ASSERT_TRUE(cases.ok());
  for (const char* name : {"short", "odd"}) {
    const std::string n = name;
    Tensor latents = get(*cases, n + ".latents"), want = get(*cases, n + ".audio");
    auto got = (*gvae)->decode(latents);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto ref = (*cvae)->decode(latents);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    ASSERT_EQ(got->shape(), want.shape());
    double max_abs = 0.0, max_abs_cpu = 0.0;
    const double snr = snr_db(want, *got, &max_abs), snr_cpu = snr_db(*ref, *got, &max_abs_cpu);
    int64_t identical = 0;
    for (int64_t i = 0; i < got->numel(); ++i)
      identical += std::memcmp(got->data<float>() + i, ref->data<float>() + i, sizeof(float)) == 0;
    std::printf(
        "[cuda audio %s] %s: SNR %.2f dB vs diffusers FP32 (max |err| %.3g); vs the CPU decode SNR %.2f dB, "
        "max |err| %.3g, %lld of %lld samples bit-identical\n",
        name, shape_to_string(got->shape()).c_str(), snr, max_abs, snr_cpu, max_abs_cpu,
        static_cast<long long>(identical), static_cast<long long>(got->numel()));
    EXPECT_GE(snr, 40.0);
    EXPECT_GE(snr_cpu, 100.0);  // E0 ops but snake_beta's rare one-ulp differences
  }
}

}  // namespace
}  // namespace vortex
