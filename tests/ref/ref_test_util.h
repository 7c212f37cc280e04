// Shared helpers for the CPU reference op tests: a fresh per-run seed (printed on failure), random BF16 /
// FP32 host tensors, poisoning, and ULP/match-rate comparisons of BF16 results against an FP64 oracle.
// Header-only; used by every tests/ref/*_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "vortex/dtype.h"
#include "vortex/tensor.h"

#include "seed.h"

namespace vortex::test {

using ::vortex::testing::fresh_seed;

inline std::string seed_msg(uint64_t seed) { return "seed=" + std::to_string(seed); }

// Random BF16 tensor: normal(mean, stddev) values rounded to BF16 (never all zeros).
inline Tensor random_bf16(Shape shape, std::mt19937_64& rng, double stddev = 1.0, double mean = 0.0) {
  Tensor t = Tensor::empty(std::move(shape), DType::kBF16);
  std::normal_distribution<double> dist(mean, stddev);
  uint16_t* p = t.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = bf16_bits_from_f32(static_cast<float>(dist(rng)));
  return t;
}

inline Tensor random_f32(Shape shape, std::mt19937_64& rng, double stddev = 1.0) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::normal_distribution<double> dist(0.0, stddev);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(dist(rng));
  return t;
}

// Fill with a NaN pattern so an op that skips an element is caught.
inline void poison(Tensor& t) { std::memset(t.raw_data(), 0xFF, t.nbytes()); }

inline float bf(uint16_t b) { return f32_from_bf16_bits(b); }

// Distance in BF16 units in the last place between two finite BF16 values (ordered-integer distance).
inline int64_t bf16_ulp_distance(uint16_t a, uint16_t b) {
  auto ordered = [](uint16_t x) -> int64_t {
    return (x & 0x8000) ? -static_cast<int64_t>(x & 0x7FFF) : static_cast<int64_t>(x);
  };
  return std::llabs(ordered(a) - ordered(b));
}

struct MatchStats {
  int64_t total = 0, equal = 0, max_ulp = 0;
  double equal_fraction() const { return total ? static_cast<double>(equal) / static_cast<double>(total) : 1.0; }
  void add(uint16_t got, uint16_t want) {
    ++total;
    const bool both_nan = std::isnan(bf(got)) && std::isnan(bf(want));
    if (got == want || both_nan) {
      ++equal;
      return;
    }
    max_ulp = std::max(max_ulp, bf16_ulp_distance(got, want));
  }
  std::string str() const {
    return std::to_string(equal) + "/" + std::to_string(total) + " equal, max " + std::to_string(max_ulp) + " ulp";
  }
};

// The docs/numerics.md acceptance for "same program vs independent FP64 formulation": >= 99.9% identical,
// the rest within 1 BF16 ulp.
#define EXPECT_BF16_CLOSE_TO_ORACLE(stats, seedmsg)                                  \
  do {                                                                               \
    EXPECT_GE((stats).equal_fraction(), 0.999) << (stats).str() << " " << (seedmsg); \
    EXPECT_LE((stats).max_ulp, 1) << (stats).str() << " " << (seedmsg);              \
  } while (0)

}  // namespace vortex::test
