// rms_norm reference vs (a) an independent pure-FP64 formulation with one final rounding (>= 99.9% equal,
// <= 1 ulp), (b) exact expected bits computed with numpy float32 + ml_dtypes (rows where the program's
// FP32-through-the-weight single rounding differs from a two-rounding RMSNorm), (c) adversarial rows:
// huge dynamic range, signed zeros, all-zero rows, inf/NaN propagation, ragged row counts, strided views.
#include <cmath>
#include <limits>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

// Independent oracle: long-double sum in reverse order, everything in long double, one rounding.
uint16_t oracle_rms(const uint16_t* x, const uint16_t* w, int64_t n, float eps, int64_t j) {
  long double sum = 0;
  for (int64_t i = n - 1; i >= 0; --i) sum += static_cast<long double>(bf(x[i])) * bf(x[i]);
  const long double inv = 1.0L / std::sqrt(sum / n + static_cast<long double>(eps));
  return bf16_bits_from_f64(static_cast<double>(bf(x[j]) * inv * bf(w[j])));
}

TEST(RmsNorm, MatchesIndependentFp64Formulation) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int64_t d : {1, 7, 64, 255, 256, 257, 1000}) {
    const int64_t s = 13;
    Tensor x = test::random_bf16({s, d}, rng, 2.0, 0.3);
    Tensor w = test::random_bf16({d}, rng, 0.1, 1.0);
    Tensor out = Tensor::empty({s, d}, DType::kBF16);
    test::poison(out);
    ASSERT_TRUE(ref::rms_norm(x, w, 1e-5f, out).ok());
    test::MatchStats st;
    for (int64_t r = 0; r < s; ++r)
      for (int64_t j = 0; j < d; ++j)
        st.add(out.data<uint16_t>()[r * d + j],
               oracle_rms(x.data<uint16_t>() + r * d, w.data<uint16_t>(), d, 1e-5f, j));
    EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed) + " d=" + std::to_string(d));
  }
}

// Expected bits from numpy: r = fp32(1/sqrt(ms + eps)), fp32(x*r), fp32(*w), one BF16 rounding.
TEST(RmsNorm, ExactProgramRoundings) {
  struct Case {
    uint16_t x[8], w[8], out[8];
  };
  const Case cases[] = {
      {{0xBFAC, 0xBEEA, 0xBFF3, 0xBFA5, 0xBFEC, 0xBE71, 0xBFA2, 0x3E8B},
       {0x3F82, 0x3F7B, 0x3F40, 0x3F72, 0x3F7F, 0x3F81, 0x3F59, 0x3F74},
       {0xBF8C, 0xBEB8, 0xBF92, 0xBF7A, 0xBFBD, 0xBE43, 0xBF5D, 0x3E55}},
      {{0xBF7B, 0xBF4F, 0x3F88, 0xBF4F, 0xBD05, 0x3F62, 0xBF15, 0xBDE5},
       {0x3F81, 0x3F81, 0x3F61, 0x3F81, 0x3F91, 0x3F58, 0x3F8B, 0x3F82},
       {0xBFA8, 0xBF8B, 0x3F9F, 0xBF8B, 0xBD48, 0x3F7D, 0xBF57, 0xBE1B}},
  };
  for (const Case& c : cases) {
    uint16_t out[8];
    ref::rms_norm_row(c.x, c.w, 8, 1e-5f, out);
    for (int j = 0; j < 8; ++j) EXPECT_EQ(out[j], c.out[j]) << "element " << j;
  }
  // All-equal row, eps = 0: r = 1/|c| exactly, out = sign * w.
  uint16_t x[4] = {0x4080, 0x4080, 0x4080, 0x4080};  // 4.0
  uint16_t w[4] = {0x3F81, 0x3F80, 0xBF80, 0x3F00};  // 1.0078125, 1, -1, 0.5
  uint16_t out[4];
  ref::rms_norm_row(x, w, 4, 0.0f, out);
  EXPECT_EQ(out[0], 0x3F81);
  EXPECT_EQ(out[1], 0x3F80);
  EXPECT_EQ(out[2], 0xBF80);
  EXPECT_EQ(out[3], 0x3F00);
}

TEST(RmsNorm, AdversarialRows) {
  const int64_t d = 300;
  Tensor x = Tensor::empty({5, d}, DType::kBF16);
  Tensor w = Tensor::empty({d}, DType::kBF16);
  uint16_t* xp = x.data<uint16_t>();
  for (int64_t j = 0; j < d; ++j) w.data<uint16_t>()[j] = bf16_bits_from_f32(1.0f);
  // Row 0: huge dynamic range (1e30 next to 1e-30); row 1: signed zeros and one value;
  // row 2: all zeros; row 3: one inf; row 4: one NaN.
  for (int64_t j = 0; j < d; ++j) {
    xp[0 * d + j] = bf16_bits_from_f32(j % 2 ? 1e30f : -1e-30f);
    xp[1 * d + j] = (j == 5) ? bf16_bits_from_f32(3.0f) : (j % 2 ? 0x8000 : 0x0000);
    xp[2 * d + j] = 0;
    xp[3 * d + j] = bf16_bits_from_f32(j == 7 ? std::numeric_limits<float>::infinity() : 1.0f);
    xp[4 * d + j] = bf16_bits_from_f32(j == 9 ? std::numeric_limits<float>::quiet_NaN() : 1.0f);
  }
  Tensor out = Tensor::empty({5, d}, DType::kBF16);
  test::poison(out);
  ASSERT_TRUE(ref::rms_norm(x, w, 1e-5f, out).ok());
  const uint16_t* o = out.data<uint16_t>();
  for (int64_t j = 0; j < d; ++j) {
    EXPECT_LE(test::bf16_ulp_distance(o[0 * d + j], oracle_rms(xp, w.data<uint16_t>(), d, 1e-5f, j)), 1) << j;
    EXPECT_TRUE(std::isfinite(bf(o[0 * d + j])));
    if (j != 5) {
      EXPECT_EQ(o[1 * d + j], xp[1 * d + j]) << "signed zero kept at " << j;
    }
    EXPECT_EQ(o[2 * d + j], 0) << "zero row stays +0";
    if (j == 7) {
      EXPECT_TRUE(std::isnan(bf(o[3 * d + j]))) << "inf * rsqrt(inf) = inf * 0 = NaN";
    } else {
      EXPECT_EQ(o[3 * d + j], 0) << "finite lanes of an inf row become 0";
    }
    EXPECT_TRUE(std::isnan(bf(o[4 * d + j]))) << "NaN poisons its row";
  }
  EXPECT_EQ(o[1 * d + 5], oracle_rms(xp + d, w.data<uint16_t>(), d, 1e-5f, 5));
}

TEST(RmsNorm, StridedRowViewsAndRaggedRows) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t d = 96;
  for (int64_t s : {1, 3, 17}) {
    Tensor big = test::random_bf16({s, 3 * d}, rng);
    Tensor view = big.as_strided({s, d}, {3 * d, 1}, d).value();  // middle third, like k in QKV
    Tensor packed = Tensor::empty({s, d}, DType::kBF16);
    ASSERT_TRUE(ref::cast(view, packed).ok());
    Tensor w = test::random_bf16({d}, rng, 0.1, 1.0);
    Tensor out_big = Tensor::empty({s, 2 * d}, DType::kBF16);
    Tensor out_view = out_big.as_strided({s, d}, {2 * d, 1}, d).value();
    Tensor out_ref = Tensor::empty({s, d}, DType::kBF16);
    ASSERT_TRUE(ref::rms_norm(view, w, 1e-5f, out_view).ok());
    ASSERT_TRUE(ref::rms_norm(packed, w, 1e-5f, out_ref).ok());
    for (int64_t r = 0; r < s; ++r)
      EXPECT_EQ(0, std::memcmp(out_big.data<uint16_t>() + r * 2 * d + d, out_ref.data<uint16_t>() + r * d, d * 2))
          << test::seed_msg(seed);
  }
}

TEST(RmsNorm, RejectsBadArguments) {
  Tensor x = Tensor::empty({2, 8}, DType::kBF16), out = Tensor::empty({2, 8}, DType::kBF16);
  Tensor w = Tensor::empty({7}, DType::kBF16);
  Status st = ref::rms_norm(x, w, 1e-5f, out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("weight"), std::string::npos) << st.message();
  Tensor xf = Tensor::empty({2, 8}, DType::kF32);
  EXPECT_EQ(ref::rms_norm(xf, Tensor::empty({8}, DType::kBF16), 1e-5f, out).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
