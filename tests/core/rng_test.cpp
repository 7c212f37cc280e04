// Tests of Philox4x32-10 (core/philox.h) and the Gaussian noise contract (core/rng.h):
// Random123 known-answer vectors, an independent Box-Muller recomputation, invariance under thread
// count / chunking / strides, and moment sanity. Seeds are fresh per run and printed on failure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/philox.h"
#include "core/rng.h"
#include "vortex/tensor.h"

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// Random123 kat_vectors, "philox4x32 10" lines: counter (4 words), key (2 words) -> output.
TEST(Philox, Random123KnownAnswers) {
  struct Kat {
    Philox4x32 ctr;
    uint32_t key0, key1;
    uint32_t out[4];
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    Philox4x32 r = philox4x32_10(k.ctr, k.key0, k.key1);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(r.v[w], k.out[w]) << "word " << w << " of ctr " << k.ctr.v[0];
  }
  // philox_block packs (seed, index) as key = seed halves, counter = {index lo, index hi, 0, 0}.
  Philox4x32 b = philox_block(0x299f31d0a4093822ull, 0);
  Philox4x32 direct = philox4x32_10({{0, 0, 0, 0}}, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(std::memcmp(&b, &direct, sizeof b), 0);
}

// Independent recomputation of one element from the documented algorithm (per element, no blocks).
double reference_noise(uint64_t seed, uint64_t j) {
  Philox4x32 r = philox4x32_10({{static_cast<uint32_t>(j / 4), static_cast<uint32_t>((j / 4) >> 32), 0, 0}},
                               static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  int lane = static_cast<int>(j % 4);
  int pair = lane / 2;
  long double u1 = (static_cast<long double>(r.v[2 * pair]) + 1) / 4294967296.0L;
  long double u2 = static_cast<long double>(r.v[2 * pair + 1]) / 4294967296.0L;
  double radius = std::sqrt(-2.0 * std::log(static_cast<double>(u1)));
  double angle = 2.0 * M_PI * static_cast<double>(u2);
  return lane % 2 == 0 ? radius * std::cos(angle) : radius * std::sin(angle);
}

TEST(GaussianNoise, MatchesDocumentedAlgorithm) {
  uint64_t seed = fresh_seed();
  uint64_t offset = seed % 1000003;
  std::vector<float> out(4099, std::nanf(""));
  gaussian_noise(seed, offset, out.data(), out.size(), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    float want = static_cast<float>(reference_noise(seed, offset + i));
    ASSERT_EQ(out[i], want) << "element " << i << " seed " << seed << " offset " << offset;
    ASSERT_EQ(gaussian_noise_value(seed, offset + i), want) << i;
  }
}

TEST(GaussianNoise, ThreadCountAndChunkingInvariant) {
  uint64_t seed = fresh_seed();
  const size_t n = 300'001;   // not a multiple of 4 or of any thread count
  const uint64_t offset = 3;  // unaligned start
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2, 7}) {
    std::vector<float> out(n, std::nanf(""));
    gaussian_noise(seed, offset, out.data(), n, threads);
    runs.push_back(std::move(out));
  }
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), n * 4), 0) << "1 vs 2 threads, seed " << seed;
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[2].data(), n * 4), 0) << "1 vs 7 threads, seed " << seed;
  // Chunked generation with ragged chunk sizes gives the same stream.
  std::vector<float> chunked(n, std::nanf(""));
  size_t pos = 0, chunk = 1;
  while (pos < n) {
    size_t len = std::min(chunk, n - pos);
    gaussian_noise(seed, offset + pos, chunked.data() + pos, len, 3);
    pos += len;
    chunk = chunk * 3 + 1;
  }
  EXPECT_EQ(std::memcmp(runs[0].data(), chunked.data(), n * 4), 0) << "chunked, seed " << seed;
  // A different seed or offset gives a different stream.
  std::vector<float> other(64);
  gaussian_noise(seed + 1, offset, other.data(), other.size(), 1);
  EXPECT_NE(std::memcmp(runs[0].data(), other.data(), 64 * 4), 0);
}

TEST(GaussianNoise, Moments) {
  uint64_t seed = fresh_seed();
  const size_t n = 1'000'000;
  std::vector<float> out(n, std::nanf(""));
  gaussian_noise(seed, 0, out.data(), n);
  double sum = 0, sum_sq = 0, max_abs = 0;
  size_t beyond_3 = 0;
  for (float v : out) {
    ASSERT_TRUE(std::isfinite(v)) << "seed " << seed;
    sum += v;
    sum_sq += static_cast<double>(v) * v;
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
    beyond_3 += std::fabs(v) > 3.0f;
  }
  double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_LT(std::fabs(mean), 0.01) << "seed " << seed;
  EXPECT_LT(std::fabs(var - 1.0), 0.01) << "seed " << seed;
  // P(|z| > 3) = 0.0027: expect ~2700 of 1M (6 sigma band ~ +-310).
  EXPECT_GT(beyond_3, 2390u) << "seed " << seed;
  EXPECT_LT(beyond_3, 3010u) << "seed " << seed;
  EXPECT_LT(max_abs, 6.7) << "seed " << seed;  // sqrt(-2 ln 2^-32) = 6.66 bounds every value
}

TEST(GaussianNoise, TensorOverloadStridedAndErrors) {
  uint64_t seed = fresh_seed();
  Tensor t = Tensor::empty({5, 7}, DType::kF32);  // [5, 7] f32
  for (int i = 0; i < 35; ++i) t.data<float>()[i] = std::nanf("");
  ASSERT_TRUE(gaussian_noise(seed, 11, t, 2).ok());
  for (int i = 0; i < 35; ++i) ASSERT_EQ(t.data<float>()[i], gaussian_noise_value(seed, 11 + i)) << i;

  // A strided [5, 3] view: logical index i (row-major over the view) gets element 11 + i.
  Tensor big = Tensor::empty({5, 7}, DType::kF32);
  for (int i = 0; i < 35; ++i) big.data<float>()[i] = -1234.5f;  // sentinel outside the view
  auto view = big.narrow(1, 2, 3);
  ASSERT_TRUE(view.ok());
  ASSERT_TRUE(gaussian_noise(seed, 11, *view, 3).ok());
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 7; ++c) {
      float v = big.data<float>()[r * 7 + c];
      if (c >= 2 && c < 5) EXPECT_EQ(v, gaussian_noise_value(seed, 11 + r * 3 + (c - 2))) << r << "," << c;
      else EXPECT_EQ(v, -1234.5f) << "write outside the view at " << r << "," << c;
    }

  Tensor bf = Tensor::empty({4}, DType::kBF16);
  Status s = gaussian_noise(seed, 0, bf);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("f32"), std::string::npos);
  Tensor undefined;
  EXPECT_EQ(gaussian_noise(seed, 0, undefined).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
