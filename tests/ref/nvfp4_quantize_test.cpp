// CPU tests of the NVFP4 reference quantizer (src/ref/nvfp4_quantize.cpp): layout and 128x4 tile offsets vs an
// independent reshape/permute formulation, the rcp table file format (round trip, corruption), the rcp model's
// exponent/special-case handling, hand-derived bytes for ties / zeros / negative zeros / tiny blocks / inf / NaN /
// all-zero tensors, E2M1 choice vs a brute-force nearest-even search, and the shipped table when present.
// The GPU side (instruction tables, producers) is tests/cuda/nvfp4_quantize_test.cu.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "ref/nvfp4_quantize.h"
#include "ref/nvfp4_test_inputs.h"
#include "ref/ref_test_util.h"
#include "vortex/dtype.h"

namespace vortex::ref {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A table whose rcp is correctly rounded: makes every step of the recipe exact and hand-checkable.
const RcpApproxTable& correctly_rounded_table() {
  static const RcpApproxTable t([] {
    std::vector<uint32_t> b(kRcpBinadeSize);
    for (uint32_t m = 0; m < kRcpBinadeSize; ++m) b[m] = rcp_correctly_rounded_binade_bits(m);
    return b;
  }());
  return t;
}

Nvfp4Options exact_rcp() { return {Nvfp4Encode::kApproxInstructions, &correctly_rounded_table()}; }

uint16_t b16(float f) { return bf16_bits_from_f32(f); }

// Codes of a block (high nibble first), unpacked.
std::vector<uint8_t> unpack(const uint8_t packed[8]) {
  std::vector<uint8_t> c;
  for (int k = 0; k < 8; ++k) {
    c.push_back(packed[k] >> 4);
    c.push_back(packed[k] & 0xF);
  }
  return c;
}

TEST(Nvfp4Layout, CanonicalShapes) {
  const Nvfp4Layout l = nvfp4_layout(37810, 5376);
  EXPECT_EQ(l.data_rows, 37824);
  EXPECT_EQ(l.scale_rows, 37888);
  EXPECT_EQ(l.data_row_bytes, 2688);
  EXPECT_EQ(l.blocks, 336);
  EXPECT_EQ(l.scale_cols, 336);
  const Nvfp4Layout r = nvfp4_layout(20, 40);
  EXPECT_EQ(r.data_rows, 32);
  EXPECT_EQ(r.data_row_bytes, 24);
  EXPECT_EQ(r.blocks, 3);
  EXPECT_EQ(r.scale_rows, 128);
  EXPECT_EQ(r.scale_cols, 4);
}

TEST(Nvfp4Layout, TileOffsetsAreTheReshapePermute) {
  // [Rp/128, 4, 32, Cp/4, 4] -> permute(0, 3, 2, 1, 4) -> [Rp/128, Cp/4, 32, 4, 4], row-major (§1.7).
  for (int64_t rows : {128, 256, 384}) {
    for (int64_t cols : {4, 8, 20}) {
      std::set<int64_t> seen;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t t0 = r / 128, i1 = (r % 128) / 32, i2 = r % 32, t3 = c / 4, i4 = c % 4;
          const int64_t want = (((t0 * (cols / 4) + t3) * 32 + i2) * 4 + i1) * 4 + i4;
          ASSERT_EQ(nvfp4_scale_offset(r, c, cols), want) << r << "," << c;
          seen.insert(want);
        }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), rows * cols);
    }
  }
}

TEST(Nvfp4RcpTable, EncodeDecodeRoundTripAndCorruption) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> b(kRcpBinadeSize);
  for (uint32_t m = 0; m < kRcpBinadeSize; ++m) {
    const uint32_t cr = rcp_correctly_rounded_binade_bits(m);
    const int pick = static_cast<int>(rng() % 1000);
    b[m] = pick < 300 ? cr + 1 : pick < 600 ? cr - 1 : pick < 602 ? cr + 5 : cr;  // deltas and exceptions
  }
  const std::vector<uint8_t> file = encode_rcp_approx_table(b);
  EXPECT_LT(file.size(), 3u << 20) << test::seed_msg(seed);
  auto back = decode_rcp_approx_table(file);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back.value() == b) << test::seed_msg(seed);
  std::vector<uint8_t> bad = file;
  bad[100] ^= 0x10;
  EXPECT_FALSE(decode_rcp_approx_table(bad).ok());
  bad = file;
  bad.pop_back();
  EXPECT_FALSE(decode_rcp_approx_table(bad).ok());
}

TEST(Nvfp4RcpModel, SpecialCasesAndExponentScaling) {
  const RcpApproxTable& t = correctly_rounded_table();
  EXPECT_EQ(bits(t.rcp(0.0f)), 0x7F800000u);
  EXPECT_EQ(bits(t.rcp(-0.0f)), 0xFF800000u);
  EXPECT_EQ(bits(t.rcp(from_bits(0x00000001u))), 0x7F800000u);  // subnormal input flushed
  EXPECT_EQ(bits(t.rcp(from_bits(0x807FFFFFu))), 0xFF800000u);
  EXPECT_EQ(bits(t.rcp(INFINITY)), 0u);
  EXPECT_EQ(bits(t.rcp(-INFINITY)), 0x80000000u);
  EXPECT_TRUE(std::isnan(t.rcp(NAN)));
  EXPECT_EQ(t.rcp(0x1p126f), 0x1p-126f);
  EXPECT_EQ(bits(t.rcp(0x1p127f)), 0u);  // 2^-127 is subnormal: flushed
  EXPECT_EQ(bits(t.rcp(-0x1.8p126f)), 0x80000000u);
  EXPECT_EQ(t.rcp(0x1p-126f), 0x1p126f);
  EXPECT_EQ(t.rcp(FLT_MIN * 1.5f), 1.0f / (FLT_MIN * 1.5f));
  // With a correctly rounded binade, the model must equal IEEE 1/x wherever the result is normal.
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 200000; ++i) {
    const float x = from_bits(static_cast<uint32_t>(rng()));
    if (!std::isnormal(x) || !std::isnormal(1.0f / x)) continue;
    ASSERT_EQ(bits(t.rcp(x)), bits(1.0f / x)) << "x=" << x << " " << test::seed_msg(seed);
  }
  EXPECT_EQ(t.div(3.0f, 6.0f), mul_ftz(3.0f, 1.0f / 6.0f));
  EXPECT_EQ(mul_ftz(0x1p-100f, 0x1p-30f), 0.0f);  // subnormal result flushed
  // Tininess after 24-bit rounding (measured on the H200, approx_probe seed 16253581722165530101 pair 3689):
  // the exact product is within 2^-151 of FLT_MIN, IEEE rounds it to FLT_MIN and so does mul.rn.ftz ...
  EXPECT_EQ(mul_ftz(0x1.000002p-63f, 0x1.fffffcp-64f), FLT_MIN);
  // ... but FLT_MIN - 2^-150 (exact in 24 bits) is tiny: flushed, although IEEE on the denormal grid gives FLT_MIN.
  EXPECT_EQ(0x1.fffffep-1f * 0x1p-126f, FLT_MIN);
  EXPECT_EQ(bits(mul_ftz(0x1.fffffep-1f, 0x1p-126f)), 0u);
  EXPECT_EQ(bits(mul_ftz(-0x1.be7b92p-63f, 0x1.2590dp-64f)), 0x80000000u);  // the probe's example pair, sign kept
  EXPECT_EQ(mul_ftz(0x1.be7b92p-63f, 0x1.2590dp-64f) == 0.0f, true);
  EXPECT_TRUE(std::signbit(mul_ftz(-0x1p-100f, 0x1p-30f)));
  EXPECT_EQ(min_ftz(NAN, 448.0f), 448.0f);
}

TEST(Nvfp4Quantize, GlobalScaleReproducesBf16Rounding) {
  EXPECT_EQ(nvfp4_global_scale_from_amax(b16(2688.0f)), 1.0f);
  EXPECT_EQ(nvfp4_global_scale_from_amax(0), 0.0f);
  EXPECT_TRUE(std::isnan(nvfp4_global_scale_from_amax(0x7FC0)));
  // Independent: the fp32 product then RNE to bf16, checked on random amax values.
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 10000; ++i) {
    const uint16_t a = static_cast<uint16_t>(rng() % 0x7F80);
    const double exact = static_cast<double>(f32_from_bf16_bits(a)) * static_cast<double>(from_bits(0x39C30C31u));
    const float p = static_cast<float>(exact);  // the fp32 multiply (exact product rounded once)
    ASSERT_EQ(nvfp4_global_scale_from_amax(a), round_bf16(p)) << test::seed_msg(seed);
  }
  const uint16_t x[6] = {b16(1.0f), b16(-7.0f), 0x8000, b16(3.0f), b16(2.0f), 0x7FC0};
  EXPECT_EQ(bf16_abs_max_bits(x, 2, 2, 3), b16(7.0f));  // the NaN at [1][2] is outside the 2x2 view
  EXPECT_EQ(bf16_abs_max_bits(x, 2, 3, 3), 0x7FC0);     // NaN propagates (torch.amax)
}

TEST(Nvfp4Quantize, TiesZerosAndSignedZeros) {
  // g = 1 and block amax 6: d = 6 * RN(1/6) = 1 exactly, s = 1.0 (0x38), e = 1, v = x: the E2M1 ties are exact.
  const float vals[16] = {6.0f,   0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f,  5.0f,
                          -0.25f, -0.0f, 0.0f,  -2.5f, 0.5f,  7.0f, -6.0f, 4.0f};
  const uint8_t want[16] = {0x7, 0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x8, 0x8, 0x0, 0xC, 0x1, 0x7, 0xF, 0x6};
  uint16_t x[16];
  for (int i = 0; i < 16; ++i) x[i] = b16(vals[i]);
  x[13] = b16(6.0f);  // keep amax = 6 (7 would change the scale); 6 -> code 7
  uint8_t packed[8];
  Nvfp4BlockTrace trace;
  EXPECT_EQ(nvfp4_quantize_block(x, 1.0f, exact_rcp(), packed, &trace), 0x38);
  EXPECT_EQ(trace.d, 1.0f);
  const std::vector<uint8_t> codes = unpack(packed);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(codes[i], want[i]) << "element " << i << " value " << vals[i];
  EXPECT_EQ(packed[0], 0x70) << "even element must be in the high nibble";
  // The same block through the eager (exact division) variant gives the same bytes here.
  uint8_t packed_eager[8];
  EXPECT_EQ(nvfp4_quantize_block(x, 1.0f, {Nvfp4Encode::kExactDivision, nullptr}, packed_eager), 0x38);
  EXPECT_EQ(std::memcmp(packed, packed_eager, 8), 0);
}

TEST(Nvfp4Quantize, ZeroTinyInfNanBlocks) {
  uint8_t packed[8];
  uint16_t zeros[16] = {};
  zeros[3] = 0x8000;
  EXPECT_EQ(nvfp4_quantize_block(zeros, 0.5f, exact_rcp(), packed), 0x00);
  EXPECT_EQ(unpack(packed)[3], 0x8) << "-0 keeps its sign: e = FLT_MAX, v = -0";
  EXPECT_EQ(unpack(packed)[2], 0x0);
  // Tiny block: d < 2^-10 -> scale byte 0, e = min(rcp(0), FLT_MAX) = FLT_MAX -> non-zero elements saturate.
  uint16_t tiny[16];
  for (int i = 0; i < 16; ++i) tiny[i] = b16(i % 2 ? -0x1p-12f : 0x1p-13f);
  EXPECT_EQ(nvfp4_quantize_block(tiny, 1.0f, exact_rcp(), packed), 0x00);
  EXPECT_EQ(unpack(packed)[0], 0x7);
  EXPECT_EQ(unpack(packed)[1], 0xF);
  // All-zero tensor with dynamic g = 0: 0/0 = NaN -> min(NaN, 448) = 448 -> 0x7E, codes 0.
  EXPECT_EQ(nvfp4_quantize_block(zeros, 0.0f, exact_rcp(), packed), 0x7E);
  EXPECT_EQ(unpack(packed)[0], 0x0);
  // inf -> d = 448, inf * e -> +-6; NaN -> 0x7; NaN ignored by the block amax.
  uint16_t special[16];
  for (int i = 0; i < 16; ++i) special[i] = b16(1.0f);
  special[0] = b16(INFINITY);
  special[1] = b16(-INFINITY);
  special[2] = 0x7FC0;
  EXPECT_EQ(nvfp4_quantize_block(special, 1.0f, exact_rcp(), packed), e4m3_from_f32(448.0f));
  const std::vector<uint8_t> c = unpack(packed);
  EXPECT_EQ(c[0], 0x7);
  EXPECT_EQ(c[1], 0xF);
  EXPECT_EQ(c[2], 0x7);
  uint16_t nan_only[16];
  for (auto& v : nan_only) v = 0xFFC1;
  EXPECT_EQ(nvfp4_quantize_block(nan_only, 1.0f, exact_rcp(), packed), 0x7E) << "all-NaN block: d = NaN -> 448";
}

// Brute-force E2M1 nearest-even over the grid; the code's value must be the closest to v, ties to even code.
uint8_t brute_e2m1(float v) {
  if (std::isnan(v)) return 0x7;
  const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const double a = std::min(std::fabs(static_cast<double>(v)), 6.0);
  int best = 0;
  for (int k = 1; k < 8; ++k) {
    const double dk = std::fabs(a - grid[k]), db = std::fabs(a - grid[best]);
    if (dk < db || (dk == db && k % 2 == 0)) best = k;
  }
  return static_cast<uint8_t>((std::signbit(v) ? 8 : 0) | best);
}

TEST(Nvfp4Quantize, RandomAdversarialMatchesIndependentSteps) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t rows = 45, cols = 200, ld = 203;
  const std::vector<uint16_t> x = test::nvfp4_adversarial_bf16(rows, cols, ld, rng, true);
  const float g = 0.0123f;
  const Nvfp4Layout l = nvfp4_layout(rows, cols);
  std::vector<uint8_t> data(l.data_bytes(), 0xEE), scales(l.scale_bytes(), 0xEE);
  ASSERT_TRUE(nvfp4_quantize(x.data(), rows, cols, ld, g, exact_rcp(), data.data(), scales.data()).ok());
  for (int64_t r = 0; r < l.scale_rows; ++r)
    for (int64_t j = 0; j < l.scale_cols; ++j) {
      const uint8_t s = scales[nvfp4_scale_offset(r, j, l.scale_cols)];
      if (r >= l.data_rows || j >= l.blocks) {
        ASSERT_EQ(s, 0) << "scale padding at " << r << "," << j;
        continue;
      }
      uint16_t block[16];
      for (int i = 0; i < 16; ++i) block[i] = r < rows && 16 * j + i < cols ? x[r * ld + 16 * j + i] : uint16_t{0};
      uint8_t packed[8];
      Nvfp4BlockTrace trace;
      ASSERT_EQ(nvfp4_quantize_block(block, g, exact_rcp(), packed, &trace), s);
      ASSERT_EQ(std::memcmp(packed, data.data() + r * l.data_row_bytes + 8 * j, 8), 0);
      ASSERT_EQ(s, e4m3_from_f32(trace.d));
      const std::vector<uint8_t> codes = unpack(packed);
      for (int i = 0; i < 16; ++i)
        ASSERT_EQ(codes[i], brute_e2m1(trace.v[i])) << "v=" << trace.v[i] << " " << test::seed_msg(seed);
    }
}

TEST(Nvfp4Quantize, RejectsBadArguments) {
  uint16_t x[32] = {};
  uint8_t data[16], scales[512];
  EXPECT_FALSE(nvfp4_quantize(x, 1, 32, 16, 1.0f, exact_rcp(), data, scales).ok());
  EXPECT_FALSE(nvfp4_quantize(x, 1, 32, 32, 1.0f, {Nvfp4Encode::kApproxInstructions, nullptr}, data, scales).ok());
}

TEST(Nvfp4Quantize, ShippedTableLoads) {
  auto t = RcpApproxTable::default_table();
  if (!t.ok()) GTEST_SKIP() << t.status().message();
  // rcp.approx is documented to be within ~1 ulp: the measured binade must be close to 1/x everywhere.
  const std::vector<uint32_t>& b = t.value()->binade();
  for (uint32_t m = 0; m < kRcpBinadeSize; m += 97) {
    const int64_t delta = static_cast<int64_t>(b[m]) - rcp_correctly_rounded_binade_bits(m);
    ASSERT_LE(std::abs(delta), 2) << "m=" << m;
  }
}

}  // namespace
}  // namespace vortex::ref
