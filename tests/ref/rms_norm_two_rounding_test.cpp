// rms_norm_two_rounding reference (transformers' Qwen3 RMSNorm): vs an independent FP64 formula of
// R(R(x / rms) * w) on strided rows, and vs rms_norm (the one-rounding program): some elements differ, none by
// more than 1 BF16 ulp, and with w = 1 the two programs are identical.
#include <cmath>
#include <cstring>

#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

TEST(RmsNormTwoRounding, MatchesFp64FormulaOnStridedRows) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 31, d = 160;
  Tensor buf = test::random_bf16({s, 2 * d}, rng, 3.0);
  Tensor x = buf.as_strided({s, d}, {2 * d, 1}, d).value();
  Tensor w = test::random_bf16({d}, rng, 0.3, 1.0);
  Tensor out = Tensor::empty({s, d}, DType::kBF16);
  test::poison(out);
  ASSERT_TRUE(ref::rms_norm_two_rounding(x, w, 1e-6f, out).ok());
  test::MatchStats st;
  for (int64_t r = 0; r < s; ++r) {
    const uint16_t* xr = buf.data<uint16_t>() + r * 2 * d + d;
    long double sum = 0;
    for (int64_t j = 0; j < d; ++j) sum += static_cast<long double>(bf(xr[j])) * bf(xr[j]);
    const long double inv = 1.0L / std::sqrt(sum / d + static_cast<long double>(1e-6f));
    for (int64_t j = 0; j < d; ++j) {
      const double n = bf(bf16_bits_from_f64(static_cast<double>(bf(xr[j]) * inv)));
      st.add(out.data<uint16_t>()[r * d + j], bf16_bits_from_f64(n * bf(w.data<uint16_t>()[j])));
    }
  }
  EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));
}

TEST(RmsNormTwoRounding, DiffersFromOneRoundingByAtMostOneUlp) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 16, d = 256;
  Tensor x = test::random_bf16({s, d}, rng, 2.0);
  Tensor w = test::random_bf16({d}, rng, 0.3, 1.0);
  Tensor one = Tensor::empty({s, d}, DType::kBF16), two = Tensor::empty({s, d}, DType::kBF16);
  ASSERT_TRUE(ref::rms_norm(x, w, 1e-6f, one).ok());
  ASSERT_TRUE(ref::rms_norm_two_rounding(x, w, 1e-6f, two).ok());
  test::MatchStats st;
  for (int64_t i = 0; i < s * d; ++i) st.add(two.data<uint16_t>()[i], one.data<uint16_t>()[i]);
  EXPECT_LT(st.equal_fraction(), 1.0) << st.str() << " " << test::seed_msg(seed);  // the programs differ
  EXPECT_LE(st.max_ulp, 1) << st.str() << " " << test::seed_msg(seed);
  Tensor ones = Tensor::empty({d}, DType::kBF16);
  for (int64_t j = 0; j < d; ++j) ones.data<uint16_t>()[j] = bf16_bits_from_f32(1.0f);
  ASSERT_TRUE(ref::rms_norm(x, ones, 1e-6f, one).ok());
  ASSERT_TRUE(ref::rms_norm_two_rounding(x, ones, 1e-6f, two).ok());
  EXPECT_EQ(std::memcmp(one.raw_data(), two.raw_data(), one.nbytes()), 0) << test::seed_msg(seed);
}

}  // namespace
}  // namespace vortex
