// The video VAE encoder against diffusers 0.42.1 (fixtures from tests/vae/make_vae_encoder_fixtures.py): the
// posterior noise equals torch's CPU randn bit for bit; the moments of a keyframe, a tiled keyframe and a two-clip
// video are as close to the FP64 run of the same model as diffusers' FP32 run is (the floor); the conditioning latents
// after the float16 rounding equal diffusers' except for rare one-ulp rounding flips; errors.
#include <openssl/sha.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ref/cpu_backend.h"
#include "vae/vae_test_util.h"
#include "vae/video_vae_encoder.h"

namespace vortex {
namespace {

using vae_test::fixtures;
using vae_test::get;

std::string dir() { return fixtures() + "/video_encoder"; }

ConfigJson config_of(nlohmann::json j) {
  auto c = ConfigJson::from_object(std::move(j), "edited config.json");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(*c) : ConfigJson();
}

std::string sha256_hex(const std::vector<uint8_t>& bytes) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(bytes.data(), bytes.size(), md);
  char hex[2 * SHA256_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) std::snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return hex;
}

struct Cases {
  SafetensorsFile file;
  nlohmann::json meta;
};

const Cases& cases() {
  static const Cases c = [] {
    auto f = SafetensorsFile::open(dir() + "/cases.safetensors");
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    std::ifstream in(dir() + "/meta.json");
    return Cases{std::move(*f), nlohmann::json::parse(in)};
  }();
  return c;
}

Tensor u8_to_normalized(const Tensor& u8) {
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};
  Tensor x = Tensor::empty(u8.shape(), DType::kF32);
  const int64_t per = u8.numel() / 3;
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < per; ++i)
      x.data<float>()[c * per + i] =
          (static_cast<float>(u8.data<uint8_t>()[c * per + i]) / 255.0f - kMean[c]) / kStd[c];
  return x;
}

VideoVaeEncoder load_for(const std::string& name, Backend* backend = nullptr) {
  auto enc = VideoVaeEncoder::load(dir() + "/vae", backend);
  EXPECT_TRUE(enc.ok()) << enc.status().to_string();
  const auto& m = cases().meta["cases"][name];
  if (!m["tile"].is_null()) {
    enc->mutable_config().tile = m["tile"].get<int>();
    enc->mutable_config().tile_overlap = m["overlap"].get<int>();
  }
  return std::move(*enc);
}

TEST(VideoVaeEncoder, TorchCpuRandnMatchesTorch) {
  for (const char* name : {"keyframe", "keyframe_tiled", "video_two_clips"}) {
    const Tensor want = get(cases().file, std::string(name) + ".noise");
    const std::vector<float> got = torch_cpu_randn(42, static_cast<size_t>(want.numel()));
    int exact = 0;
    double max_rel = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float w = want.data<float>()[i];
      exact += got[static_cast<size_t>(i)] == w;
      max_rel = std::max(max_rel, std::abs(static_cast<double>(got[static_cast<size_t>(i)]) - w) /
                                      std::max(std::abs(static_cast<double>(w)), 1e-3));
    }
    std::printf("%s: randn n=%lld, %d bit-equal, max relative error %.3g (torch CPU capability %s)\n", name,
                static_cast<long long>(want.numel()), exact, max_rel,
                cases().meta["cpu_capability"].get<std::string>().c_str());
    EXPECT_EQ(exact, want.numel()) << name << ": max relative error " << max_rel;
  }
}

TEST(VideoVaeEncoder, TorchCpuRandnLargeMatchesTorch) {
  // The posterior noise of a keyframe on the released 1344x768 canvas (24 x 1 x 48 x 84), and an odd size
  // (its last 16 values redrawn): SHA-256 of torch's float32 bytes.
  for (const auto& e : cases().meta["randn_sha256"]) {
    const std::vector<float> got = torch_cpu_randn(42, e["n"].get<size_t>());
    std::vector<uint8_t> bytes(got.size() * 4);
    std::memcpy(bytes.data(), got.data(), bytes.size());
    EXPECT_EQ(sha256_hex(bytes), e["sha256"].get<std::string>()) << "n = " << e["n"];
  }
  EXPECT_EQ(cases().meta["randn_sha256"].size(), 2u);
}

TEST(VideoVaeEncoder, Float16Rounding) {
  EXPECT_EQ(round_to_f16(1.0f), 1.0f);
  EXPECT_EQ(round_to_f16(1.0f + 1.0f / 2048), 1.0f);                // tie to even
  EXPECT_EQ(round_to_f16(1.0f + 3.0f / 2048), 1.0f + 2.0f / 1024);  // tie to even (up)
  EXPECT_EQ(round_to_f16(65504.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(round_to_f16(65520.0f)));
  EXPECT_EQ(round_to_f16(-std::ldexp(1.0f, -24)), -std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(round_to_f16(std::ldexp(1.0f, -26)), 0.0f);
  EXPECT_EQ(round_to_f16(std::ldexp(3.0f, -25)), std::ldexp(1.0f, -23));  // 1.5 subnormal ulps -> 2 (even)
  EXPECT_EQ(round_to_f16(0.1f), 0.0999755859375f);
}

// |a - b| over the moments, with the FP64 run as truth: Vortex's error next to diffusers' FP32 error.
struct Err {
  double max_abs = 0, rms = 0;
};
Err error_vs(const Tensor& got, const Tensor& truth64) {
  Err e;
  double se = 0;
  for (int64_t i = 0; i < truth64.numel(); ++i) {
    const double d = std::abs(static_cast<double>(got.data<float>()[i]) - truth64.data<double>()[i]);
    e.max_abs = std::max(e.max_abs, d);
    se += d * d;
  }
  e.rms = std::sqrt(se / static_cast<double>(truth64.numel()));
  return e;
}

class EncoderCase : public ::testing::TestWithParam<const char*> {};

TEST_P(EncoderCase, MomentsWithinTwiceTheFp32Floor) {
  const std::string name = GetParam();
  const VideoVaeEncoder enc = load_for(name);
  const Tensor pixels = get(cases().file, name + ".pixels");
  const Tensor want = get(cases().file, name + ".moments");
  const Tensor truth = get(cases().file, name + ".moments64");
  auto got = enc.moments(u8_to_normalized(pixels));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->shape(), want.shape());
  const Err ours = error_vs(*got, truth), floor = error_vs(want, truth);
  std::printf("%s moments %s: Vortex vs FP64 max %.3g rms %.3g; diffusers FP32 vs FP64 (floor) max %.3g rms %.3g\n",
              name.c_str(), got->describe().c_str(), ours.max_abs, ours.rms, floor.max_abs, floor.rms);
  EXPECT_LE(ours.rms, 2 * floor.rms + 1e-7);
  EXPECT_LE(ours.max_abs, 2 * floor.max_abs + 1e-6);
}

// The backend program on the cpu backend (channels-last batched tiles, the single-frame last-tap convolutions, the
// Backend ops of src/ref/encoder_ops.h) gives the FP32 reference's moments bit for bit: the same FP32 operations in
// the same order, taps over causal zero frames adding exact zeros.
TEST_P(EncoderCase, CpuBackendProgramEqualsReference) {
  const std::string name = GetParam();
  CpuBackend cpu(0);
  const VideoVaeEncoder ref = load_for(name);
  const VideoVaeEncoder enc = load_for(name, &cpu);
  ASSERT_EQ(enc.backend(), &cpu);
  const Tensor x = u8_to_normalized(get(cases().file, name + ".pixels"));
  auto want = ref.moments(x);
  auto got = enc.moments(x);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->shape(), want->shape());
  int64_t differ = 0;
  for (int64_t i = 0; i < want->numel(); ++i) differ += got->data<float>()[i] != want->data<float>()[i];
  EXPECT_EQ(differ, 0) << name << ": " << differ << " of " << want->numel() << " moments differ";
}

TEST_P(EncoderCase, ConditionLatentsEqualDiffusers) {
  const std::string name = GetParam();
  const VideoVaeEncoder enc = load_for(name);
  const Tensor pixels = get(cases().file, name + ".pixels");
  const Tensor want = get(cases().file, name + ".latents");
  auto got = enc.encode_condition(pixels, 42);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->shape(), want.shape());
  // Both sides round the sample (mean + std * noise, the noise bit-equal) to float16, so a value differs only
  // where the FP32 moments fall on opposite sides of a float16 rounding boundary: by one float16 ulp of the
  // sample, or near zero (where float16 steps are finer than FP32 moment noise) by the moment difference.
  const auto& mean = enc.config().latents_mean;
  const auto& stdv = enc.config().latents_std;
  const int64_t per_c = want.numel() / static_cast<int64_t>(stdv.size());
  int64_t equal = 0;
  double worst = 0;  // in units of the allowance
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float w = want.data<float>()[i], g = got->data<float>()[i];
    if (w == g) {
      ++equal;
      continue;
    }
    const size_t c = static_cast<size_t>(i / per_c);
    const double sw = static_cast<double>(w) * stdv[c] + mean[c], sg = static_cast<double>(g) * stdv[c] + mean[c];
    const double big = std::max(std::abs(sw), std::abs(sg));
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(big), -14) - 10);
    worst = std::max(worst, std::abs(sw - sg) / (ulp + 1e-5));
  }
  std::printf("%s latents: %lld of %lld equal; worst difference %.2f of (1 float16 ulp + 1e-5)\n", name.c_str(),
              static_cast<long long>(equal), static_cast<long long>(want.numel()), worst);
  EXPECT_GE(equal, want.numel() * 99 / 100);
  EXPECT_LE(worst, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EncoderCase, ::testing::Values("keyframe", "keyframe_tiled", "video_two_clips"));

TEST(VideoVaeEncoder, Errors) {
  const VideoVaeEncoder enc = load_for("keyframe");
  EXPECT_FALSE(enc.moments(Tensor::empty({3, 1, 10, 16}, DType::kF32)).ok());           // 10 is not a multiple of 4
  EXPECT_FALSE(enc.moments(Tensor::empty({4, 1, 16, 16}, DType::kF32)).ok());           // 4 channels
  EXPECT_FALSE(enc.encode_condition(Tensor::empty({3, 1, 16, 16}, DType::kF32)).ok());  // not u8
  auto missing = VideoVaeEncoder::load(dir() + "/no_such_folder");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir() + "/vae/config.json"));
  cfg["norm_num_groups"] = 3;  // does not divide 8
  EXPECT_FALSE(VideoVaeEncoderConfig::from_json(config_of(cfg)).ok());
  cfg["norm_num_groups"] = 4;
  cfg["latents_std"] = {1.0, 1.0};
  EXPECT_FALSE(VideoVaeEncoderConfig::from_json(config_of(cfg)).ok());
  cfg.erase("latents_std");
  cfg["spatial_padding_mode"] = "zeros";
  EXPECT_FALSE(VideoVaeEncoderConfig::from_json(config_of(cfg)).ok());
  cfg.erase("spatial_padding_mode");
  ASSERT_TRUE(VideoVaeEncoderConfig::from_json(config_of(cfg)).ok());
  // A value of the wrong type is refused naming the file and the key (ConfigJson's wording).
  for (const nlohmann::json& bad : {nlohmann::json("four"), nlohmann::json(4.5)}) {
    nlohmann::json edited = cfg;
    edited["norm_num_groups"] = bad;
    auto r = VideoVaeEncoderConfig::from_json(config_of(edited));
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().code(), ErrorCode::kFormat);
    EXPECT_NE(r.status().message().find("edited config.json: 'norm_num_groups'"), std::string::npos)
        << r.status().to_string();
  }
  nlohmann::json edited = cfg;
  edited["block_out_channels"] = {8, "16"};
  auto r = VideoVaeEncoderConfig::from_json(config_of(edited));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'block_out_channels'"), std::string::npos) << r.status().to_string();
}

TEST(VideoVaeEncoder, LoadRefusesAnotherComponentsConfig) {
  // A folder whose config.json is the transformer's: refused by its class name before any weights are read.
  const std::filesystem::path tmp = std::filesystem::path(::testing::TempDir()) / "vortex_encoder_wrong_kind";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  std::ofstream(tmp / "config.json") << R"({"_class_name": "MiniMaxH3Transformer3DModel", "num_layers": 2})";
  auto r = VideoVaeEncoder::load(tmp.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kFormat);
  EXPECT_NE(r.status().message().find("the H3 transformer"), std::string::npos) << r.status().to_string();
  std::filesystem::remove_all(tmp);
}

TEST(VideoVaeEncoder, ReleasedConfig) {
  // A verbatim copy of the release's vae/config.json (MiniMax-AI/MiniMax-H3), which the defaults also follow.
  auto cfg = ConfigJson::read_file(fixtures() + "/release/vae_config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  auto c = VideoVaeEncoderConfig::from_json(*cfg);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->spatial_ratio(), 16);
  EXPECT_EQ(c->temporal_ratio(), 4);
  EXPECT_EQ(c->latent_channels, 24);
  EXPECT_EQ(c->block_out_channels, (std::vector<int>{128, 256, 256, 512, 512, 1024}));
  EXPECT_EQ(c->groups, 32);
  EXPECT_EQ(c->latents_mean.size(), 24u);
  EXPECT_FLOAT_EQ(c->latents_mean[0], 0.858090341091156f);
  const VideoVaeEncoderConfig defaults;
  EXPECT_EQ(defaults.block_out_channels, c->block_out_channels);
  EXPECT_EQ(defaults.spatial_down, c->spatial_down);
  EXPECT_EQ(defaults.temporal_down, c->temporal_down);
}

}  // namespace
}  // namespace vortex
