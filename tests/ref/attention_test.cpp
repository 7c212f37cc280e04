// attention references: the FP64 oracle vs a naive long-double softmax(QK^T/sqrt(d))V (>= 99.9% equal,
// <= 1 ulp), exact cases (identical keys -> mean of V; a dominant key -> its V row), strided Q/K/V views of a
// QKV buffer, and the FP32 flash "same program" vs the oracle (the two-reference rule's second reference:
// its error must be at BF16-rounding level; numbers are printed).
#include <cmath>

#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

struct Qkv {
  Tensor buf, q, k, v;
};
Qkv make_qkv(int64_t s, int64_t inner, std::mt19937_64& rng, double stddev) {
  Qkv t;
  t.buf = test::random_bf16({s, 3 * inner}, rng, stddev);
  t.q = t.buf.as_strided({s, inner}, {3 * inner, 1}, 0).value();
  t.k = t.buf.as_strided({s, inner}, {3 * inner, 1}, inner).value();
  t.v = t.buf.as_strided({s, inner}, {3 * inner, 1}, 2 * inner).value();
  return t;
}

TEST(Attention, Fp64ReferenceMatchesNaiveLongDouble) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (auto [s, heads, hd] : {std::tuple<int64_t, int, int>{1, 1, 8}, {37, 3, 16}, {70, 2, 64}}) {
    const int64_t inner = heads * hd;
    Qkv t = make_qkv(s, inner, rng, 1.5);
    Tensor out = Tensor::empty({s, inner}, DType::kBF16);
    test::poison(out);
    ASSERT_TRUE(ref::attention(t.q, t.k, t.v, heads, hd, out).ok());
    test::MatchStats st;
    auto at = [&](const Tensor& x, int64_t r, int64_t c) {
      return static_cast<long double>(bf(x.data<uint16_t>()[r * 3 * inner + c]));
    };
    for (int h = 0; h < heads; ++h)
      for (int64_t i = 0; i < s; ++i) {
        std::vector<long double> p(static_cast<size_t>(s));
        long double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < s; ++j) {
          long double dot = 0;
          for (int d = hd - 1; d >= 0; --d) dot += at(t.q, i, h * hd + d) * at(t.k, j, h * hd + d);
          p[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<long double>(hd));
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        for (auto& e : p) sum += (e = std::exp(e - mx));
        for (int d = 0; d < hd; ++d) {
          long double o = 0;
          for (int64_t j = 0; j < s; ++j) o += p[static_cast<size_t>(j)] / sum * at(t.v, j, h * hd + d);
          st.add(out.data<uint16_t>()[i * inner + h * hd + d], bf16_bits_from_f64(static_cast<double>(o)));
        }
      }
    EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));
  }
}

// The FP64 oracle's exact program: per key one FP64 chain in ascending d, times 1/sqrt(hd); max; exp; the
// sum and P.V chains in ascending key order; one rounding of acc / sum. Bit-exact against this plain loop.
TEST(Attention, ExactFp64Program) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 45;
  const int heads = 2, hd = 24, inner = heads * hd;
  Qkv t = make_qkv(s, inner, rng, 1.0);
  Tensor out = Tensor::empty({s, inner}, DType::kBF16);
  ASSERT_TRUE(ref::attention(t.q, t.k, t.v, heads, hd, out).ok());
  auto at = [&](int64_t r, int64_t c) { return static_cast<double>(bf(t.buf.data<uint16_t>()[r * 3 * inner + c])); };
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int h = 0; h < heads; ++h)
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> p(static_cast<size_t>(s));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int d = 0; d < hd; ++d) dot += at(i, h * hd + d) * at(j, inner + h * hd + d);
        p[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      for (auto& e : p) sum += (e = std::exp(e - mx));
      for (int d = 0; d < hd; ++d) {
        double o = 0;
        for (int64_t j = 0; j < s; ++j) o += p[static_cast<size_t>(j)] * at(j, 2 * inner + h * hd + d);
        ASSERT_EQ(out.data<uint16_t>()[i * inner + h * hd + d], bf16_bits_from_f64(o / sum)) << test::seed_msg(seed);
      }
    }
}

TEST(Attention, ExactCases) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 8, hd = 4;
  // Identical keys: softmax is uniform, out = mean of V = exact when V sums are exact (small integers).
  Tensor q = test::random_bf16({s, hd}, rng), k = Tensor::empty({s, hd}, DType::kBF16),
         v = Tensor::empty({s, hd}, DType::kBF16);
  for (int64_t i = 0; i < s * hd; ++i) {
    k.data<uint16_t>()[i] = bf16_bits_from_f32(0.5f);
    v.data<uint16_t>()[i] = bf16_bits_from_f32(static_cast<float>(i / hd));  // row j holds j
  }
  Tensor out = Tensor::empty({s, hd}, DType::kBF16);
  ASSERT_TRUE(ref::attention(q, k, v, 1, hd, out).ok());
  for (int64_t i = 0; i < s * hd; ++i) EXPECT_EQ(bf(out.data<uint16_t>()[i]), 3.5f) << test::seed_msg(seed);
  // A dominant key (score difference ~ 1e4): output is exactly that key's V row.
  for (int64_t i = 0; i < s * hd; ++i) {
    q.data<uint16_t>()[i] = bf16_bits_from_f32(100.0f);
    k.data<uint16_t>()[i] = bf16_bits_from_f32(i / hd == 5 ? 100.0f : -100.0f);
  }
  ASSERT_TRUE(ref::attention(q, k, v, 1, hd, out).ok());
  for (int64_t i = 0; i < s * hd; ++i) EXPECT_EQ(bf(out.data<uint16_t>()[i]), 5.0f);
  ASSERT_TRUE(ref::attention_flash_fp32(q, k, v, 1, hd, out, 3).ok());
  for (int64_t i = 0; i < s * hd; ++i) EXPECT_EQ(bf(out.data<uint16_t>()[i]), 5.0f);
}

TEST(Attention, FlashFp32ProgramIsCloseToFp64) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 300;
  const int heads = 2, hd = 64, inner = heads * hd;
  Qkv t = make_qkv(s, inner, rng, 2.0);
  Tensor exact = Tensor::empty({s, inner}, DType::kBF16), flash = Tensor::empty({s, inner}, DType::kBF16);
  ASSERT_TRUE(ref::attention(t.q, t.k, t.v, heads, hd, exact).ok());
  ASSERT_TRUE(ref::attention_flash_fp32(t.q, t.k, t.v, heads, hd, flash, 128).ok());
  double num = 0, den = 0, max_abs = 0;
  for (int64_t i = 0; i < s * inner; ++i) {
    const double e = bf(exact.data<uint16_t>()[i]), f = bf(flash.data<uint16_t>()[i]);
    ASSERT_FALSE(std::isnan(f));
    num += (f - e) * (f - e);
    den += e * e;
    max_abs = std::max(max_abs, std::fabs(f - e));
  }
  const double rel_l2 = std::sqrt(num / den);
  std::printf("flash-fp32 vs fp64 attention: rel-L2 %.3e, max-abs %.3e\n", rel_l2, max_abs);
  EXPECT_LT(rel_l2, 1e-2) << test::seed_msg(seed);  // BF16 P costs ~2^-9 per weight; random outputs are small
  EXPECT_GT(rel_l2, 0.0) << "the two programs are expected to differ somewhere";
}

TEST(Attention, RejectsBadArguments) {
  Tensor q = Tensor::empty({4, 8}, DType::kBF16), out = Tensor::empty({4, 8}, DType::kBF16);
  EXPECT_EQ(ref::attention(q, q, q, 3, 8, out).code(), ErrorCode::kInvalidArgument);
  Tensor v = Tensor::empty({3, 8}, DType::kBF16);
  EXPECT_EQ(ref::attention(q, q, v, 1, 8, out).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
