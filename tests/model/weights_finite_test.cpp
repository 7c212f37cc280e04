// check_weights_finite / first_non_finite (model/weights_finite.h): every float dtype's NaN and Inf encodings
// found at a random position among random finite values; the h3-tiny synthetic weights pass; one poisoned
// element of a named tensor is reported with that name and index.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "model/h3_spec.h"
#include "model/weights_finite.h"
#include "ref/cpu_backend.h"

namespace vortex {
namespace {

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

TEST(WeightsFinite, FindsEachNonFiniteEncodingAtItsIndex) {
  std::mt19937 gen(std::random_device{}());
  std::normal_distribution<float> dist(0.0f, 100.0f);
  const int64_t n = 1000;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (float special : specials) {
    const int64_t at = std::uniform_int_distribution<int64_t>(0, n - 1)(gen);
    Tensor f32 = Tensor::empty({n}, DType::kF32);
    Tensor bf16 = Tensor::empty({n}, DType::kBF16);
    Tensor f64 = Tensor::empty({n}, DType::kF64);
    for (int64_t i = 0; i < n; ++i) {
      const float v = dist(gen);
      f32.data<float>()[i] = v;
      bf16.data<uint16_t>()[i] = bf16_bits(v);
      f64.data<double>()[i] = v;
    }
    EXPECT_FALSE(first_non_finite(f32)) << "all finite";
    EXPECT_FALSE(first_non_finite(bf16)) << "all finite";
    EXPECT_FALSE(first_non_finite(f64)) << "all finite";
    f32.data<float>()[at] = special;
    bf16.data<uint16_t>()[at] = bf16_bits(special);
    f64.data<double>()[at] = special;
    EXPECT_EQ(first_non_finite(f32).value_or(-1), at);
    EXPECT_EQ(first_non_finite(bf16).value_or(-1), at);
    EXPECT_EQ(first_non_finite(f64).value_or(-1), at);
  }
  // E4M3FN: 0x7E (448) is finite, 0x7F / 0xFF are NaN.
  Tensor f8 = Tensor::empty({4}, DType::kF8E4M3);
  const uint8_t bytes[] = {0x7E, 0xFE, 0x01, 0xFF};
  std::memcpy(f8.raw_data(), bytes, 4);
  EXPECT_EQ(first_non_finite(f8).value_or(-1), 3);
  f8.data<uint8_t>()[3] = 0x00;
  EXPECT_FALSE(first_non_finite(f8));
  // Packed FP4 bytes have no NaN encoding: never reported.
  Tensor u8 = Tensor::empty({2}, DType::kU8);
  u8.data<uint8_t>()[0] = u8.data<uint8_t>()[1] = 0xFF;
  EXPECT_FALSE(first_non_finite(u8));
}

TEST(WeightsFinite, NamesThePoisonedTensorOfTinyWeights) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  CpuBackend be(2);
  Result<H3Weights> w = synthesize_weights(cfg, be, 7);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_TRUE(check_weights_finite(*w, be, "tiny", "advice").ok());
  Tensor& t = w->blocks.at(1).mlp_fc2.weight;  // bf16
  ASSERT_EQ(t.dtype(), DType::kBF16);
  std::mt19937 gen(std::random_device{}());
  const int64_t at = std::uniform_int_distribution<int64_t>(0, t.numel() - 1)(gen);
  t.data<uint16_t>()[at] = 0xFFFF;  // the "64 bytes of 0xFF" of a damaged download
  Status s = check_weights_finite(*w, be, "ckpt.safetensors", "the checkpoint is damaged");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("ckpt.safetensors: tensor 'blocks.1.mlp.fc2.weight'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("at element " + std::to_string(at)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("the checkpoint is damaged"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace vortex
