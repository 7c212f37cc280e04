// The audio VAE encoder against diffusers 0.42.1 (fixtures from tests/vae/make_audio_encoder_fixtures.py): the
// posterior mean of two stereo soundtracks (hop padding included) is as close to the FP64 run of the same model as
// diffusers' FP32 run is (rule: 2x that floor); the Ref2VA reference step's normalized rows match diffusers' within
// the same rule; the Backend program on the cpu backend gives the reference's bytes; a missing tensor, a bad input and
// the original layout are refused.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "audio_encoder_test_util.h"
#include "ref/cpu_backend.h"
#include "vae/audio_vae_encoder.h"

namespace vortex {
namespace {

using audio_encoder_test::cases;
using audio_encoder_test::dir;
using audio_encoder_test::Err;
using audio_encoder_test::error_vs;
using vae_test::get;

AudioVaeEncoder load(Backend* backend = nullptr) {
  auto enc = AudioVaeEncoder::load(dir() + "/audio_vae", backend);
  EXPECT_TRUE(enc.ok()) << enc.status().to_string();
  return std::move(*enc);
}

class AudioEncoderCase : public ::testing::TestWithParam<const char*> {};

TEST_P(AudioEncoderCase, MeanWithinTwiceTheFp32Floor) {
  const std::string name = GetParam();
  const AudioVaeEncoder enc = load();
  const Tensor audio = get(cases(), name + ".audio");
  const Tensor want = get(cases(), name + ".mean");
  const Tensor truth = get(cases(), name + ".mean64");
  auto got = enc.encode_mean(audio);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->shape(), want.shape());
  const Err ours = error_vs<double>(*got, truth), floor = error_vs<double>(want, truth);
  std::printf("%s mean %s: Vortex vs FP64 max %.3g rms %.3g; diffusers FP32 vs FP64 (floor) max %.3g rms %.3g\n",
              name.c_str(), got->describe().c_str(), ours.max_abs, ours.rms, floor.max_abs, floor.rms);
  EXPECT_GT(floor.max_abs, 0.0);  // the floor is a real FP32 error, not a copy of the FP64 run
  EXPECT_LE(ours.rms, 2 * floor.rms);
  EXPECT_LE(ours.max_abs, 2 * floor.max_abs);
}

TEST_P(AudioEncoderCase, ConditionRowsMatchTheReferenceStep) {
  const std::string name = GetParam();
  const AudioVaeEncoder enc = load();
  const Tensor audio = get(cases(), name + ".audio");
  const Tensor want = get(cases(), name + ".rows");
  const Tensor mean = get(cases(), name + ".mean"), truth = get(cases(), name + ".mean64");
  auto got = enc.encode_condition(audio);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->shape(), want.shape());
  ASSERT_EQ(want.dim(0), 2 * mean.dim(2));
  // The rows are (mean^T - latents_mean) / latents_std: diffusers' rows differ from Vortex's by the two means'
  // difference over std, so the allowance is the floor of the mean scaled by the smallest std, twice.
  const Err floor = error_vs<double>(mean, truth);
  const auto& stdv = enc.config().latents_std;
  const double min_std = *std::min_element(stdv.begin(), stdv.end());
  const Err diff = error_vs<float>(*got, want);
  std::printf("%s rows %s: max |Vortex - diffusers| %.3g (allowance %.3g)\n", name.c_str(), got->describe().c_str(),
              diff.max_abs, 2 * 2 * floor.max_abs / min_std);
  EXPECT_LE(diff.max_abs, 2 * 2 * floor.max_abs / min_std);
  // Channel-major: row t of the left channel, then row t of the right, each the mean's column t.
  const int64_t t_n = mean.dim(2), c = mean.dim(1);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < t_n; t += t_n - 1) {
      const double v = got->data<float>()[(b * t_n + t) * c + 1];
      const double m = mean.data<float>()[(b * c + 1) * t_n + t];
      EXPECT_NEAR(v, (m - enc.config().latents_mean[1]) / stdv[1], 1e-4) << b << " " << t;
    }
}

// Every Backend op is the reference's program (src/ref/vae_ops.h), so the cpu backend reproduces it byte for byte.
TEST_P(AudioEncoderCase, CpuBackendGivesTheReferenceBytes) {
  const std::string name = GetParam();
  CpuBackend cpu(0);
  const AudioVaeEncoder reference = load(), on_backend = load(&cpu);
  ASSERT_EQ(reference.backend(), nullptr);
  ASSERT_EQ(on_backend.backend(), &cpu);
  const Tensor audio = get(cases(), name + ".audio");
  auto want = reference.encode_mean(audio), got = on_backend.encode_mean(audio);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->shape(), want->shape());
  EXPECT_EQ(0, std::memcmp(got->raw_data(), want->raw_data(), want->nbytes()));
  auto rows_want = reference.encode_condition(audio), rows_got = on_backend.encode_condition(audio);
  ASSERT_TRUE(rows_want.ok() && rows_got.ok());
  ASSERT_EQ(rows_got->shape(), rows_want->shape());
  EXPECT_EQ(0, std::memcmp(rows_got->raw_data(), rows_want->raw_data(), rows_want->nbytes()));
  // One signal at a time gives the same bytes as the stereo batch.
  Tensor left = Tensor::empty({1, audio.dim(1)}, DType::kF32);
  std::memcpy(left.raw_data(), audio.raw_data(), left.nbytes());
  auto one = on_backend.encode_mean(left);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(0, std::memcmp(one->raw_data(), want->raw_data(), one->nbytes()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AudioEncoderCase, ::testing::Values("short", "long"));

TEST(AudioVaeEncoder, HopPaddingIsZeros) {
  // 53 samples pad to 60 with zeros: the same signal with explicit zeros encodes to the same bytes.
  const AudioVaeEncoder enc = load();
  const Tensor audio = get(cases(), "short.audio");
  const int64_t n = audio.dim(1), hop = enc.config().hop();
  const int64_t padded = (n + hop - 1) / hop * hop;
  ASSERT_GT(padded, n);
  Tensor z = Tensor::empty({2, padded}, DType::kF32);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < padded; ++i) z.data<float>()[b * padded + i] = i < n ? audio.data<float>()[b * n + i] : 0;
  auto a = enc.encode_mean(audio), b = enc.encode_mean(z);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->shape(), b->shape());
  EXPECT_EQ(0, std::memcmp(a->raw_data(), b->raw_data(), static_cast<size_t>(a->numel()) * 4));
}

TEST(AudioVaeEncoder, Errors) {
  const AudioVaeEncoder enc = load();
  EXPECT_FALSE(enc.encode_mean(Tensor::empty({2, 0}, DType::kF32)).ok());
  EXPECT_FALSE(enc.encode_mean(Tensor::empty({2, 10}, DType::kBF16)).ok());
  EXPECT_FALSE(enc.encode_condition(Tensor::empty({1, 10}, DType::kF32)).ok());  // mono: the step upmixes first
  Tensor nan = Tensor::empty({2, 10}, DType::kF32);
  for (int i = 0; i < 20; ++i) nan.data<float>()[i] = i == 7 ? NAN : 0.1f * i;
  auto r = enc.encode_mean(nan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not finite"), std::string::npos) << r.status().to_string();
  auto missing = AudioVaeEncoder::load(dir() + "/no_such_folder");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  // A checkpoint without the encoder (pre_block removed) names the missing tensor.
  const VaeTensorSource src = [](const std::string& name, const Shape&) -> Result<Tensor> {
    return not_found("no tensor " + name);
  };
  auto none = AudioVaeEncoder::from_source(enc.config(), src);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("encoder.block.0"), std::string::npos) << none.status().to_string();
  CpuBackend cpu(0);
  const AudioVaeEncoder on_backend = load(&cpu);
  EXPECT_FALSE(on_backend.encode_mean(nan).ok());  // checked before any op runs
  EXPECT_FALSE(on_backend.encode_mean(Tensor::empty({2, 0}, DType::kF32)).ok());
  EXPECT_FALSE(AudioVaeEncoder::from_source(enc.config(), src, &cpu).ok());
  AudioVaeEncoderConfig bad = enc.config();
  bad.num_attention_heads = 5;  // does not divide latent_dim 24
  EXPECT_FALSE(bad.validate().ok());
}

TEST(AudioVaeEncoder, ReleasedConfigParses) {
  // The verbatim release audio_vae/config.json (tests/fixtures/release).
  std::ifstream in(std::string(VORTEX_RELEASE_FIXTURES) + "/audio_vae/config.json");
  ASSERT_TRUE(in.good());
  auto cfg = ConfigJson::from_object(nlohmann::json::parse(in), "audio_vae/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  auto c = AudioVaeEncoderConfig::from_json(*cfg);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hop(), 800);
  EXPECT_EQ(c->latent_dim, 2048);
  EXPECT_EQ(c->latent_channels, 32);
  EXPECT_EQ(c->num_attention_heads, 8);
  EXPECT_FLOAT_EQ(c->latents_std[0], 1.6895524230479284f);
}

}  // namespace
}  // namespace vortex
