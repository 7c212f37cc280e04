// Tests of synthetic seeds and host fills (core/synthetic.h): FNV-1a / splitmix64 reference values,
// exactness (value == offset + scale * u in FP32 with no FMA, then one conversion), determinism
// across thread counts, strided views, and errors. Seeds are fresh per run and printed on failure.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/philox.h"
#include "core/synthetic.h"
#include "vortex/dtype.h"
#include "vortex/tensor.h"

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

TEST(SyntheticSeed, KnownValues) {
  // FNV-1a 64 published test values ("" -> offset basis, "a", "foobar").
  EXPECT_EQ(fnv1a_64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a_64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a_64("foobar"), 0x85944171f73967e8ull);
  // splitmix64 reference: first outputs of the splitmix64 generator seeded with 0 are
  // splitmix64(0), splitmix64(0x9E3779B97F4A7C15), ... -> 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4.
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15ull), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(synthetic_seed(7, "blocks.0.attn.qkv.weight"),
            splitmix64(7 ^ splitmix64(fnv1a_64("blocks.0.attn.qkv.weight"))));
  EXPECT_NE(synthetic_seed(7, "a"), synthetic_seed(7, "b"));
  EXPECT_NE(synthetic_seed(7, "a"), synthetic_seed(8, "a"));
}

// Independent exact expectation: u from the documented bits, product and sum rounded once each.
float expected_value(uint64_t seed, uint64_t i, float scale, float offset) {
  Philox4x32 r = philox4x32_10({{static_cast<uint32_t>(i >> 2), static_cast<uint32_t>(i >> 34), 0, 0}},
                               static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  int32_t top24 = static_cast<int32_t>(r.v[i & 3] >> 8);
  double u = (top24 - 8388608) / 8388608.0;                          // exact
  float product = static_cast<float>(scale * u);                     // exact double product, one rounding to FP32
  return static_cast<float>(static_cast<double>(product) + offset);  // exact double sum, one rounding
}

TEST(SyntheticFill, F32ExactAndThreadInvariant) {
  uint64_t seed = fresh_seed();
  const float scale = 0.02f, offset = 0.5f;
  Tensor a = Tensor::empty({257, 129}, DType::kF32);  // [257, 129] f32
  Tensor b = Tensor::empty({257, 129}, DType::kF32);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = b.data<float>()[i] = std::nanf("");
  ASSERT_TRUE(fill_synthetic_host(a, seed, scale, offset, 1).ok());
  ASSERT_TRUE(fill_synthetic_host(b, seed, scale, offset, 7).ok());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "seed " << seed;
  double sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    float v = a.data<float>()[i];
    ASSERT_EQ(v, expected_value(seed, static_cast<uint64_t>(i), scale, offset)) << i << " seed " << seed;
    ASSERT_GE(v, offset - scale);
    ASSERT_LE(v, offset + scale);  // u < 1, but offset + scale * u may round up to offset + scale
    sum += v;
  }
  EXPECT_NEAR(sum / a.numel(), offset, 0.001) << "seed " << seed;
}

TEST(SyntheticFill, Bf16AndE4m3AreOneConversionOfTheF32Value) {
  uint64_t seed = fresh_seed();
  const float scale = 3.0f, offset = -0.25f;
  Tensor bf = Tensor::empty({1000}, DType::kBF16);
  Tensor f8 = Tensor::empty({1000}, DType::kF8E4M3);
  std::memset(bf.raw_data(), 0xFF, bf.nbytes());
  std::memset(f8.raw_data(), 0xFF, f8.nbytes());
  ASSERT_TRUE(fill_synthetic_host(bf, seed, scale, offset, 2).ok());
  ASSERT_TRUE(fill_synthetic_host(f8, seed, scale, offset, 2).ok());
  for (uint64_t i = 0; i < 1000; ++i) {
    float v = expected_value(seed, i, scale, offset);
    ASSERT_EQ(bf.data<uint16_t>()[i], bf16_bits_from_f32(v)) << i << " seed " << seed;
    ASSERT_EQ(f8.data<uint8_t>()[i], e4m3_from_f32(v)) << i << " seed " << seed;
  }
}

TEST(SyntheticFill, StridedViewUsesLogicalIndex) {
  uint64_t seed = fresh_seed();
  Tensor big = Tensor::empty({6, 10}, DType::kBF16);  // [6, 10] bf16
  for (int i = 0; i < 60; ++i) big.data<uint16_t>()[i] = 0xDEAD;
  auto view = big.as_strided({3, 4}, {20, 2}, 1);  // every other row, every other column from 1
  ASSERT_TRUE(view.ok());
  ASSERT_TRUE(fill_synthetic_host(*view, seed, 1.0f, 0.0f, 3).ok());
  Tensor dense = Tensor::empty({3, 4}, DType::kBF16);
  ASSERT_TRUE(fill_synthetic_host(dense, seed, 1.0f, 0.0f, 1).ok());
  int written = 0;
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 10; ++c) {
      uint16_t v = big.data<uint16_t>()[r * 10 + c];
      bool inside = r % 2 == 0 && c % 2 == 1 && c <= 7;
      if (inside) {
        EXPECT_EQ(v, dense.data<uint16_t>()[(r / 2) * 4 + (c - 1) / 2]) << r << "," << c;
        ++written;
      } else {
        EXPECT_EQ(v, 0xDEAD) << "write outside the view at " << r << "," << c;
      }
    }
  EXPECT_EQ(written, 12);
}

TEST(SyntheticFill, Errors) {
  Tensor t = Tensor::empty({4}, DType::kF16);
  Status s = fill_synthetic_host(t, 1, 1.0f, 0.0f);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("f16"), std::string::npos) << s.message();
  Tensor undefined;
  EXPECT_EQ(fill_synthetic_host(undefined, 1, 1.0f, 0.0f).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
