// Exhaustive and randomized tests of the host dtype conversions (include/vortex/dtype.h).
// References here are written differently from src/core/dtype.cpp on purpose: decoders use pow()
// formulas, encoders enumerate the format's grid and pick the nearest value (ties to the even code,
// saturation decided first), f32/f64 -> bf16 compares the two bracketing BF16 values in FP64.
// Random inputs are fresh per run; the seed is printed in every failure message.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "vortex/dtype.h"

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string hex32(uint32_t u) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", u);
  return buf;
}

float f32_of(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// ---- independent decoders -------------------------------------------------------------------
// Generic sign/exponent/mantissa formula with pow(); special codes handled by the caller.
double minifloat_formula(uint32_t code, int exp_bits, int man_bits, int bias) {
  int sign = (code >> (exp_bits + man_bits)) & 1;
  int e = (code >> man_bits) & ((1 << exp_bits) - 1);
  int m = code & ((1 << man_bits) - 1);
  double frac = m / std::pow(2.0, man_bits);
  double mag = e == 0 ? frac * std::pow(2.0, 1 - bias) : (1.0 + frac) * std::pow(2.0, e - bias);
  return sign ? -mag : mag;
}

double ref_decode_e4m3(uint8_t b) {
  if ((b & 0x7F) == 0x7F) return std::numeric_limits<double>::quiet_NaN();
  return minifloat_formula(b, 4, 3, 7);
}
double ref_decode_e5m2(uint8_t b) {
  if (((b >> 2) & 0x1F) == 0x1F)
    return (b & 3) ? std::numeric_limits<double>::quiet_NaN() : ((b & 0x80) ? -HUGE_VAL : HUGE_VAL);
  return minifloat_formula(b, 5, 2, 15);
}
double ref_decode_e2m1(uint8_t b) { return minifloat_formula(b, 2, 1, 1); }

// ---- grid-enumeration encoder ---------------------------------------------------------------
struct GridPoint {
  double value;
  uint8_t code;
};
struct Grid {
  std::vector<GridPoint> points;  // non-negative finite values, ascending
  uint8_t sign_bit;
  uint8_t nan_code;
  double max_value() const { return points.back().value; }
  uint8_t max_code() const { return points.back().code; }
};

Grid make_grid(int magnitude_codes, double (*decode)(uint8_t), uint8_t sign_bit, uint8_t nan_code) {
  Grid g{{}, sign_bit, nan_code};
  for (int c = 0; c < magnitude_codes; ++c) {
    double v = decode(static_cast<uint8_t>(c));
    if (std::isfinite(v)) g.points.push_back({v, static_cast<uint8_t>(c)});
  }
  std::sort(g.points.begin(), g.points.end(), [](auto& a, auto& b) { return a.value < b.value; });
  return g;
}

uint8_t grid_encode(const Grid& g, double x) {
  if (std::isnan(x)) return g.nan_code;
  uint8_t sign = std::signbit(x) ? g.sign_bit : 0;
  double a = std::fabs(x);
  if (a > g.max_value()) return sign | g.max_code();  // satfinite: saturate first (inf included)
  auto it =
      std::lower_bound(g.points.begin(), g.points.end(), a, [](const GridPoint& p, double v) { return p.value < v; });
  if (it->value == a) return sign | it->code;
  const GridPoint& hi = *it;
  const GridPoint& lo = *(it - 1);
  double d_lo = a - lo.value, d_hi = hi.value - a;  // exact in FP64 for FP32 inputs
  uint8_t code = d_lo < d_hi ? lo.code : d_hi < d_lo ? hi.code : ((lo.code & 1) == 0 ? lo.code : hi.code);
  return sign | code;
}

const Grid& e4m3_grid() {
  static Grid g = make_grid(128, ref_decode_e4m3, 0x80, 0x7F);
  return g;
}
const Grid& e5m2_grid() {
  static Grid g = make_grid(128, ref_decode_e5m2, 0x80, 0x7F);
  return g;
}
const Grid& e2m1_grid() {
  static Grid g = make_grid(8, ref_decode_e2m1, 0x8, 0x7);
  return g;
}

// ---- independent f32/f64 -> bf16 ------------------------------------------------------------
double bf16_magnitude(uint32_t code) {  // code in [0, 0x7F80]; 0x7F80 stands for 2^128 (IEEE overflow point)
  if (code == 0x7F80) return std::ldexp(1.0, 128);
  return static_cast<double>(f32_of(code << 16));
}

// Bracket |x| between consecutive non-negative BF16 codes by binary search over codes (values are
// monotonic in the code), compare the distances in FP64, ties to the even code.
uint16_t ref_bf16_from_f64(double x) {
  if (std::isnan(x)) return 0x7FFF;
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (a >= std::ldexp(1.0, 128)) return sign | 0x7F80;
  uint32_t lo = 0, hi = 0x7F80;  // invariant: value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (bf16_magnitude(mid) <= a) lo = mid;
    else hi = mid;
  }
  double d_lo = a - bf16_magnitude(lo), d_hi = bf16_magnitude(hi) - a;
  uint32_t code = d_lo < d_hi ? lo : d_hi < d_lo ? hi : ((lo & 1) == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | code);
}

// ---- BF16 -----------------------------------------------------------------------------------
TEST(DTypeBf16, AllCodesRoundTrip) {
  int nan_codes = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = f32_from_bf16_bits(static_cast<uint16_t>(b));
    ASSERT_EQ(bits_of(f), b << 16) << "decode of bf16 code " << b;
    uint16_t expect = std::isnan(f) ? 0x7FFF : static_cast<uint16_t>(b);
    nan_codes += std::isnan(f);
    ASSERT_EQ(bf16_bits_from_f32(f), expect) << "f32 -> bf16 of code " << b;
    ASSERT_EQ(bf16_bits_from_f64(static_cast<double>(f)), expect) << "f64 -> bf16 of code " << b;
  }
  EXPECT_EQ(nan_codes, 2 * 127);
}

TEST(DTypeBf16, F32SpecialCases) {
  EXPECT_EQ(bf16_bits_from_f32(1.0f), 0x3F80);
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x3F808001u)), 0x3F81);  // just above the tie
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to inf
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x7F7F7FFFu)), 0x7F7F);  // just below the overflow tie
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x7F7F8000u)), 0x7F80);  // overflow tie: odd max -> inf
  EXPECT_EQ(bf16_bits_from_f32(HUGE_VALF), 0x7F80);
  EXPECT_EQ(bf16_bits_from_f32(-HUGE_VALF), 0xFF80);
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0xFFC00001u)), 0x7FFF);  // negative NaN -> canonical
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x7F800001u)), 0x7FFF);  // NaN with low payload only
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x00008000u)), 0x0000);  // denormal tie to even 0
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x00018000u)), 0x0002);  // denormal tie, odd -> up
  EXPECT_EQ(bf16_bits_from_f32(f32_of(0x80000001u)), 0x8000);  // tiny negative keeps sign
}

TEST(DTypeBf16, F32RandomAndStructuredVsFp64Reference) {
  uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> inputs;
  for (int i = 0; i < 4'000'000; ++i) inputs.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t hi = 0; hi < 65536; ++hi) {  // every tie and its neighbours, every code
    uint32_t base = hi << 16;
    for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) inputs.push_back(base | low);
  }
  size_t failures = 0;
  for (uint32_t u : inputs) {
    float f = f32_of(u);
    uint16_t got = bf16_bits_from_f32(f), want = ref_bf16_from_f64(static_cast<double>(f));
    if (got != want && failures++ < 5)
      ADD_FAILURE() << "f32 " << hex32(u) << " -> bf16 got " << got << " want " << want << " (seed " << seed << ")";
  }
  EXPECT_EQ(failures, 0u) << "seed " << seed;
}

TEST(DTypeBf16, F64SingleRoundingVsReference) {
  uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  // Double rounding trap: 1 + 2^-8 + 2^-30 rounds to 1 + 2^-8 in FP32 (a BF16 tie, then 1.0), but
  // directly it is above the tie: 1 + 2^-7.
  double trap = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(bf16_bits_from_f32(static_cast<float>(trap)), 0x3F80);
  EXPECT_EQ(bf16_bits_from_f64(trap), 0x3F81);
  EXPECT_EQ(bf16_bits_from_f64(std::numeric_limits<double>::quiet_NaN()), 0x7FFF);
  EXPECT_EQ(bf16_bits_from_f64(-std::numeric_limits<double>::quiet_NaN()), 0x7FFF);
  EXPECT_EQ(bf16_bits_from_f64(HUGE_VAL), 0x7F80);
  EXPECT_EQ(bf16_bits_from_f64(-HUGE_VAL), 0xFF80);
  EXPECT_EQ(bf16_bits_from_f64(1e300), 0x7F80);
  EXPECT_EQ(bf16_bits_from_f64(-1e-300), 0x8000);
  EXPECT_EQ(bf16_bits_from_f64(-0.0), 0x8000);
  EXPECT_EQ(bf16_bits_from_f64(std::ldexp(1.0, -134)), 0x0000);  // half the min denormal: tie -> 0
  EXPECT_EQ(bf16_bits_from_f64(std::nextafter(std::ldexp(1.0, -134), 1.0)), 0x0001);
  double overflow_tie = std::ldexp(2.0 - std::ldexp(1.0, -8), 127);  // max + half ulp
  EXPECT_EQ(bf16_bits_from_f64(overflow_tie), 0x7F80);
  EXPECT_EQ(bf16_bits_from_f64(std::nextafter(overflow_tie, 0.0)), 0x7F7F);

  size_t failures = 0;
  auto check = [&](double x) {
    uint16_t got = bf16_bits_from_f64(x), want = ref_bf16_from_f64(x);
    if (got != want && failures++ < 5)
      ADD_FAILURE() << "f64 " << x << " (bits " << std::bit_cast<uint64_t>(x) << ") got " << got << " want " << want
                    << " (seed " << seed << ")";
  };
  for (int i = 0; i < 2'000'000; ++i) {
    check(std::bit_cast<double>(rng()));  // any double
    // a double inside BF16's range: random exponent in [-140, 129], random 52-bit fraction
    int e = static_cast<int>(rng() % 270) - 140;
    double x = std::ldexp(1.0 + static_cast<double>(rng() >> 12) * std::ldexp(1.0, -52), e);
    check((rng() & 1) ? -x : x);
  }
  for (uint32_t code = 0; code < 0x7F80; ++code) {  // every BF16 midpoint and the doubles around it
    double mid = (bf16_magnitude(code) + bf16_magnitude(code + 1)) / 2;  // exact in FP64
    check(mid);
    check(-mid);
    check(std::nextafter(mid, 0.0));
    check(std::nextafter(mid, HUGE_VAL));
  }
  EXPECT_EQ(failures, 0u) << "seed " << seed;
}

// ---- FP8 / FP4 decode -----------------------------------------------------------------------
void expect_same(double want, float got, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
  } else {
    EXPECT_EQ(static_cast<double>(got), want) << what;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << what << " (sign of zero)";
  }
}

TEST(DTypeFp8, DecodeAllCodes) {
  for (int b = 0; b < 256; ++b) {
    expect_same(ref_decode_e4m3(static_cast<uint8_t>(b)), f32_from_e4m3(static_cast<uint8_t>(b)),
                "e4m3 code " + std::to_string(b));
    expect_same(ref_decode_e5m2(static_cast<uint8_t>(b)), f32_from_e5m2(static_cast<uint8_t>(b)),
                "e5m2 code " + std::to_string(b));
  }
  EXPECT_EQ(f32_from_e4m3(0x7E), 448.0f);
  EXPECT_EQ(f32_from_e4m3(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(f32_from_e5m2(0x7B), 57344.0f);
  EXPECT_EQ(f32_from_e5m2(0x01), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(f32_from_e5m2(0x7C)));
  for (int n = 0; n < 16; ++n)
    expect_same(ref_decode_e2m1(static_cast<uint8_t>(n)), f32_from_e2m1(static_cast<uint8_t>(n)),
                "e2m1 code " + std::to_string(n));
}

// ---- FP8 / FP4 encode -----------------------------------------------------------------------
struct EncodeCase {
  const char* name;
  uint8_t (*encode)(float);
  const Grid& (*grid)();
};
const EncodeCase kEncoders[] = {
    {"e4m3", e4m3_from_f32, e4m3_grid},
    {"e5m2", e5m2_from_f32, e5m2_grid},
    {"e2m1", e2m1_from_f32, e2m1_grid},
};

TEST(DTypeFp8, EncodeEveryBf16ValueAndGridNeighbourhood) {
  for (const auto& enc : kEncoders) {
    const Grid& g = enc.grid();
    size_t failures = 0;
    auto check = [&](float x) {
      uint8_t got = enc.encode(x), want = grid_encode(g, static_cast<double>(x));
      if (got != want && failures++ < 5)
        ADD_FAILURE() << enc.name << "(" << hex32(bits_of(x)) << " = " << x << ") got " << int(got) << " want "
                      << int(want);
    };
    for (uint32_t b = 0; b < 65536; ++b) check(f32_of(b << 16));
    for (size_t i = 0; i + 1 < g.points.size(); ++i) {
      float mid = static_cast<float>((g.points[i].value + g.points[i + 1].value) / 2);  // exact
      for (float x :
           {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, HUGE_VALF), static_cast<float>(g.points[i].value)}) {
        check(x);
        check(-x);
      }
    }
    float mx = static_cast<float>(g.max_value());
    for (float x : {mx, std::nextafter(mx, HUGE_VALF), std::nextafter(mx, 0.0f), 2 * mx, HUGE_VALF,
                    std::numeric_limits<float>::max(), 0.0f, std::numeric_limits<float>::denorm_min(),
                    std::numeric_limits<float>::min()}) {
      check(x);
      check(-x);
    }
    EXPECT_EQ(failures, 0u) << enc.name;
  }
}

TEST(DTypeFp8, EncodeRandomF32Patterns) {
  uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  size_t failures = 0;
  for (int i = 0; i < 10'000'000; ++i) {
    uint32_t u = static_cast<uint32_t>(rng());
    if (i % 4 == 1) u = (u & 0x80000000u) | (u & 0x007FFFFFu);                                   // FP32 denormals
    if (i % 4 == 2) u = (u & 0x807FFFFFu) | ((110u + static_cast<uint32_t>(rng() % 40)) << 23);  // near the grids
    float x = f32_of(u);
    for (const auto& enc : kEncoders) {
      uint8_t got = enc.encode(x), want = grid_encode(enc.grid(), static_cast<double>(x));
      if (got != want && failures++ < 5)
        ADD_FAILURE() << enc.name << "(" << hex32(u) << ") got " << int(got) << " want " << int(want) << " (seed "
                      << seed << ")";
    }
  }
  EXPECT_EQ(failures, 0u) << "seed " << seed;
}

TEST(DTypeFp8, SpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(e4m3_from_f32(448.0f), 0x7E);
  EXPECT_EQ(e4m3_from_f32(449.0f), 0x7E);
  EXPECT_EQ(e4m3_from_f32(464.0f), 0x7E);  // would be a tie to 480 without satfinite
  EXPECT_EQ(e4m3_from_f32(1e30f), 0x7E);
  EXPECT_EQ(e4m3_from_f32(HUGE_VALF), 0x7E);
  EXPECT_EQ(e4m3_from_f32(-HUGE_VALF), 0xFE);
  EXPECT_EQ(e4m3_from_f32(nan), 0x7F);
  EXPECT_EQ(e4m3_from_f32(-nan), 0x7F);
  EXPECT_EQ(e4m3_from_f32(-0.0f), 0x80);
  EXPECT_EQ(e4m3_from_f32(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(e4m3_from_f32(std::ldexp(1.0f, -10)), 0x00);   // tie -> even 0
  EXPECT_EQ(e4m3_from_f32(-std::ldexp(1.0f, -10)), 0x80);  // keeps the sign
  EXPECT_EQ(e4m3_from_f32(std::ldexp(3.0f, -11)), 0x01);   // 0.75 units -> 1
  EXPECT_EQ(e4m3_from_f32(std::ldexp(3.0f, -10)), 0x02);   // 1.5 units tie -> even 2
  EXPECT_EQ(e4m3_from_f32(std::ldexp(15.0f, -10)), 0x08);  // 7.5 units tie -> 8 = min normal
  EXPECT_EQ(e4m3_from_f32(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(e5m2_from_f32(57344.0f), 0x7B);
  EXPECT_EQ(e5m2_from_f32(61440.0f), 0x7B);
  EXPECT_EQ(e5m2_from_f32(HUGE_VALF), 0x7B);
  EXPECT_EQ(e5m2_from_f32(-HUGE_VALF), 0xFB);
  EXPECT_EQ(e5m2_from_f32(nan), 0x7F);
  EXPECT_EQ(e5m2_from_f32(-nan), 0x7F);
  EXPECT_EQ(e5m2_from_f32(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(e5m2_from_f32(-0.0f), 0x80);
}

TEST(DTypeE2m1, Thresholds) {
  struct Tie {
    float x;
    uint8_t at, below, above;
  };
  // grid codes: 0:0 1:.5 2:1 3:1.5 4:2 5:3 6:4 7:6; a tie goes to the even code.
  const Tie ties[] = {{0.25f, 0, 0, 1}, {0.75f, 2, 1, 2}, {1.25f, 2, 2, 3}, {1.75f, 4, 3, 4},
                      {2.5f, 4, 4, 5},  {3.5f, 6, 5, 6},  {5.0f, 6, 6, 7}};
  for (const Tie& t : ties) {
    for (int s = 0; s < 2; ++s) {
      float sign = s ? -1.0f : 1.0f;
      uint8_t sb = s ? 0x8 : 0x0;
      EXPECT_EQ(e2m1_from_f32(sign * t.x), sb | t.at) << sign * t.x;
      EXPECT_EQ(e2m1_from_f32(sign * std::nextafter(t.x, 0.0f)), sb | t.below) << "below " << sign * t.x;
      EXPECT_EQ(e2m1_from_f32(sign * std::nextafter(t.x, HUGE_VALF)), sb | t.above) << "above " << sign * t.x;
    }
  }
  EXPECT_EQ(e2m1_from_f32(0.0f), 0x0);
  EXPECT_EQ(e2m1_from_f32(-0.0f), 0x8);
  EXPECT_EQ(e2m1_from_f32(-1e-30f), 0x8);
  EXPECT_EQ(e2m1_from_f32(-std::numeric_limits<float>::denorm_min()), 0x8);
  EXPECT_EQ(e2m1_from_f32(std::numeric_limits<float>::denorm_min()), 0x0);
  EXPECT_EQ(e2m1_from_f32(6.0f), 0x7);
  EXPECT_EQ(e2m1_from_f32(7.0f), 0x7);
  EXPECT_EQ(e2m1_from_f32(1e30f), 0x7);
  EXPECT_EQ(e2m1_from_f32(HUGE_VALF), 0x7);
  EXPECT_EQ(e2m1_from_f32(-HUGE_VALF), 0xF);
  EXPECT_EQ(e2m1_from_f32(-6.5f), 0xF);
  EXPECT_EQ(e2m1_from_f32(std::numeric_limits<float>::quiet_NaN()), 0x7);
  EXPECT_EQ(e2m1_from_f32(-std::numeric_limits<float>::quiet_NaN()), 0x7);
}

// ---- UE8M0 ----------------------------------------------------------------------------------
TEST(DTypeUe8m0, DecodeAllCodes) {
  for (int b = 0; b < 255; ++b)
    EXPECT_EQ(static_cast<double>(f32_from_ue8m0(static_cast<uint8_t>(b))), std::pow(2.0, b - 127)) << b;
  EXPECT_TRUE(std::isnan(f32_from_ue8m0(0xFF)));
}

uint8_t ref_ue8m0(float x) {  // smallest 2^k >= x, k clamped to [-127, 127]; NaN -> 0xFF
  if (std::isnan(x)) return 0xFF;
  if (!(x > 0.0f)) return 0;
  if (std::isinf(x)) return 254;
  int e;
  double m = std::frexp(static_cast<double>(x), &e);  // x = m * 2^e, m in [0.5, 1)
  int k = (m == 0.5) ? e - 1 : e;
  return static_cast<uint8_t>(std::clamp(k, -127, 127) + 127);
}

TEST(DTypeUe8m0, EncodeRoundsUp) {
  for (int k = -127; k <= 127; ++k) {
    float p = std::ldexp(1.0f, k);
    EXPECT_EQ(ue8m0_from_f32(p), k + 127) << "2^" << k;
    EXPECT_EQ(ue8m0_from_f32(std::nextafter(p, HUGE_VALF)), std::min(k + 128, 254)) << "above 2^" << k;
    EXPECT_EQ(ue8m0_from_f32(std::nextafter(p, 0.0f)), k + 127) << "below 2^" << k;
  }
  EXPECT_EQ(ue8m0_from_f32(0.0f), 0);
  EXPECT_EQ(ue8m0_from_f32(-0.0f), 0);
  EXPECT_EQ(ue8m0_from_f32(-3.0f), 0);
  EXPECT_EQ(ue8m0_from_f32(std::numeric_limits<float>::denorm_min()), 0);
  EXPECT_EQ(ue8m0_from_f32(HUGE_VALF), 254);
  EXPECT_EQ(ue8m0_from_f32(std::numeric_limits<float>::max()), 254);
  EXPECT_EQ(ue8m0_from_f32(std::numeric_limits<float>::quiet_NaN()), 0xFF);
  uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  size_t failures = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    float x = f32_of(static_cast<uint32_t>(rng()));
    if (ue8m0_from_f32(x) != ref_ue8m0(x) && failures++ < 5)
      ADD_FAILURE() << "ue8m0(" << hex32(bits_of(x)) << ") got " << int(ue8m0_from_f32(x)) << " want "
                    << int(ref_ue8m0(x)) << " (seed " << seed << ")";
  }
  EXPECT_EQ(failures, 0u) << "seed " << seed;
}

TEST(DTypeNames, RoundTrip) {
  for (DType d : {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2, DType::kF8E8M0,
                  DType::kI64, DType::kI32, DType::kI16, DType::kI8, DType::kU8, DType::kBool}) {
    auto parsed = dtype_from_name(dtype_name(d));
    ASSERT_TRUE(parsed.ok()) << dtype_name(d);
    EXPECT_EQ(*parsed, d);
    EXPECT_GT(dtype_size(d), 0u);
  }
  auto bad = dtype_from_name("F4");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kFormat);
  EXPECT_NE(bad.status().message().find("F4"), std::string::npos);
}

}  // namespace
}  // namespace vortex
