// swiglu reference: the SiLU rounding on all 65,536 BF16 gate inputs vs an independent long-double
// formulation g * sigmoid(g) (one rounding), special values (inf, -inf -> NaN as PyTorch's g / (1 + exp(-g)), NaN,
// signed zero), and the full op (R(R(silu) * value), [gate | value] column split) on random ragged shapes.
#include <cmath>
#include <limits>

#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

TEST(Swiglu, SiluOnEveryBf16Input) {
  test::MatchStats st;
  for (uint32_t b = 0; b < 65536; ++b) {
    const long double g = bf(static_cast<uint16_t>(b));
    if (std::isnan(static_cast<double>(g))) {
      EXPECT_TRUE(std::isnan(bf(ref::silu_bf16_bits(static_cast<uint16_t>(b)))));
      continue;
    }
    const long double sig = 1.0L / (1.0L + std::exp(-g));
    if (std::isinf(static_cast<double>(g))) continue;  // checked below
    const long double want = g * sig;
    st.add(ref::silu_bf16_bits(static_cast<uint16_t>(b)), bf16_bits_from_f64(static_cast<double>(want)));
  }
  EXPECT_BF16_CLOSE_TO_ORACLE(st, std::string("exhaustive"));
  EXPECT_EQ(ref::silu_bf16_bits(0x0000), 0x0000);
  EXPECT_EQ(ref::silu_bf16_bits(0x8000), 0x8000);            // -0 stays -0
  EXPECT_EQ(ref::silu_bf16_bits(0x7F80), 0x7F80);            // silu(+inf) = +inf
  EXPECT_TRUE(std::isnan(bf(ref::silu_bf16_bits(0xFF80))));  // -inf / (1 + exp(inf)) = NaN, as PyTorch
  EXPECT_EQ(ref::silu_bf16_bits(bf16_bits_from_f32(1.0f)), bf16_bits_from_f64(1.0 / (1.0 + std::exp(-1.0))));
}

TEST(Swiglu, FullOpMatchesFp64Formulation) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int64_t f : {1, 37, 512}) {
    const int64_t s = 9;
    Tensor u = test::random_bf16({s, 2 * f}, rng, 3.0);
    Tensor m = Tensor::empty({s, f}, DType::kBF16);
    test::poison(m);
    ASSERT_TRUE(ref::swiglu(u, m).ok());
    test::MatchStats st;
    for (int64_t r = 0; r < s; ++r)
      for (int64_t j = 0; j < f; ++j) {
        const double g = bf(u.data<uint16_t>()[r * 2 * f + j]);
        const double v = bf(u.data<uint16_t>()[r * 2 * f + f + j]);
        const double silu = bf(bf16_bits_from_f64(g * (1.0 / (1.0 + std::exp(-g)))));
        st.add(m.data<uint16_t>()[r * f + j], bf16_bits_from_f64(silu * v));
      }
    EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));
  }
  Tensor odd = Tensor::empty({2, 5}, DType::kBF16), m = Tensor::empty({2, 2}, DType::kBF16);
  EXPECT_EQ(ref::swiglu(odd, m).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
