// Shared helpers for the Sage2 tests and benchmark: random bf16 Q/K/V matrices laid out as the
// [S, 3*heads*128] QKV buffer (random and "realistic" — large per-channel K means, outlier channels),
// row selection and error metrics (max-abs, rel-L2, cosine) for the two-reference rule.
// Used by tests/attention/sage2_ref_test.cpp, tests/attention/sage2_sm90_test.cpp, bench/sage2_bench.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ref/sage2_attention.h"
#include "seed.h"
#include "vortex/dtype.h"

namespace vortex::sage2_test {

enum class InputKind { kRandom, kRealistic };

// [S, 3*H*128] bf16 bits: columns [q | k | v], head h at h*128 inside each third.
inline std::vector<uint16_t> make_qkv(int64_t seq, int heads, InputKind kind, uint64_t seed) {
  const int64_t width = 3LL * heads * kSage2HeadDim;
  std::vector<uint16_t> qkv(static_cast<size_t>(seq * width));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Per-channel structure for the realistic kind: K channel means (the reason for smoothing) and
  // outlier channels in Q, K and V.
  std::vector<float> k_mean(static_cast<size_t>(heads * kSage2HeadDim), 0.0f);
  std::vector<float> gain(static_cast<size_t>(3 * heads * kSage2HeadDim), 1.0f);
  if (kind == InputKind::kRealistic) {
    for (auto& m : k_mean) m = 4.0f * normal(rng);
    // Q outliers are moderate (3-5x: Sage2 has no Q smoothing, so a 30x Q channel costs every other
    // channel of its group 5 bits); K and V outlier channels are large (10-30x).
    const int hd = heads * kSage2HeadDim;
    std::uniform_int_distribution<int> pick(0, hd - 1);
    std::uniform_real_distribution<float> moderate(3.0f, 5.0f), big(10.0f, 30.0f);
    for (int i = 0; i < 2 * heads; ++i) gain[static_cast<size_t>(pick(rng))] = moderate(rng);
    // K outliers are mostly channel means (removed by smoothing): a few channels at +-20..50, the
    // rest N(0, 4); K variance outliers are mild (3x).
    std::uniform_real_distribution<float> huge_mean(20.0f, 50.0f);
    for (int i = 0; i < 2 * heads; ++i)
      k_mean[static_cast<size_t>(pick(rng))] = (i % 2 ? -1.0f : 1.0f) * huge_mean(rng);
    for (int i = 0; i < 2 * heads; ++i) gain[static_cast<size_t>(hd + pick(rng))] = 3.0f;
    for (int i = 0; i < 2 * heads; ++i) gain[static_cast<size_t>(2 * hd + pick(rng))] = big(rng);
  }
  const float q_gain = 1.0f;
  for (int64_t s = 0; s < seq; ++s)
    for (int64_t c = 0; c < width; ++c) {
      float x = normal(rng) * gain[static_cast<size_t>(c)];
      const int64_t part = c / (heads * kSage2HeadDim), hc = c % (heads * kSage2HeadDim);
      if (part == 0) x *= q_gain;
      if (part == 1) x += k_mean[static_cast<size_t>(hc)];
      qkv[static_cast<size_t>(s * width + c)] = bf16_bits_from_f32(x);
    }
  return qkv;
}

inline Sage2HostInput view(const std::vector<uint16_t>& qkv, int heads, int part) {
  const int64_t width = 3LL * heads * kSage2HeadDim;
  return Sage2HostInput{qkv.data() + part * heads * kSage2HeadDim, width};
}

// All rows when seq <= limit, else `limit` rows: first, last, and random ones (sorted, unique).
inline std::vector<int64_t> pick_rows(int64_t seq, int limit, uint64_t seed) {
  std::vector<int64_t> rows;
  if (seq <= limit) {
    for (int64_t i = 0; i < seq; ++i) rows.push_back(i);
    return rows;
  }
  std::mt19937_64 rng(seed ^ 0x5A5A5A5AULL);
  std::uniform_int_distribution<int64_t> any(0, seq - 1);
  rows = {0, seq - 1};
  while (static_cast<int>(rows.size()) < limit) rows.push_back(any(rng));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

struct ErrorStats {
  double max_abs = 0.0, rel_l2 = 0.0, cosine = 1.0;
  bool has_nan = false;
  std::string str() const {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "max_abs=%.3e rel_l2=%.3e cos=%.6f%s", max_abs, rel_l2, cosine,
                  has_nan ? " NaN!" : "");
    return buf;
  }
};

template <typename A>
ErrorStats compare(const std::vector<A>& got, const std::vector<double>& want) {
  ErrorStats e;
  double num = 0.0, den = 0.0, dot = 0.0, gg = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (std::isnan(g)) e.has_nan = true;
    const double diff = g - want[i];
    e.max_abs = std::max(e.max_abs, std::fabs(diff));
    num += diff * diff;
    den += want[i] * want[i];
    dot += g * want[i];
    gg += g * g;
  }
  e.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  e.cosine = dot / std::sqrt(std::max(gg * den, 1e-300));
  if (e.has_nan) e.max_abs = e.rel_l2 = INFINITY;
  return e;
}

using ::vortex::testing::fresh_seed;

}  // namespace vortex::sage2_test
