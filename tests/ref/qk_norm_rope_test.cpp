// qk_norm_rope reference on strided Q/K views of a QKV buffer: vs an FP64 formulation (norm as one rounding,
// then the rotate-half RoPE with the contract's three roundings), pass-through dims beyond rope_dims, the
// no-RoPE path (refiner) equal to a per-head rms_norm, V untouched, and bad table shapes rejected.
#include <cmath>

#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

TEST(QkNormRope, MatchesFp64FormulationOnStridedViews) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 23;
  const int heads = 3, hd = 32, inner = heads * hd, rope_dims = 24, half = 12;
  Tensor buf = test::random_bf16({s, 3 * inner}, rng, 2.0);
  Tensor orig = Tensor::empty({s, 3 * inner}, DType::kBF16);
  ASSERT_TRUE(ref::cast(buf, orig).ok());
  Tensor q = buf.as_strided({s, inner}, {3 * inner, 1}, 0).value();
  Tensor k = buf.as_strided({s, inner}, {3 * inner, 1}, inner).value();
  Tensor qw = test::random_bf16({hd}, rng, 0.1, 1.0), kw = test::random_bf16({hd}, rng, 0.1, 1.0);
  RopeTables rope;
  rope.rope_dims = rope_dims;
  rope.cos = Tensor::empty({s, half}, DType::kBF16);
  rope.sin = Tensor::empty({s, half}, DType::kBF16);
  for (int64_t r = 0; r < s; ++r)
    for (int j = 0; j < half; ++j) {
      const double ang = r * std::pow(10000.0, -double(j) / half);
      rope.cos.data<uint16_t>()[r * half + j] = bf16_bits_from_f64(std::cos(ang));
      rope.sin.data<uint16_t>()[r * half + j] = bf16_bits_from_f64(std::sin(ang));
    }
  ASSERT_TRUE(ref::qk_norm_rope(q, k, qw, kw, 1e-5f, &rope, heads, hd).ok());
  test::MatchStats st;
  for (int which = 0; which < 2; ++which) {
    const uint16_t* w = which == 0 ? qw.data<uint16_t>() : kw.data<uint16_t>();
    for (int64_t r = 0; r < s; ++r)
      for (int h = 0; h < heads; ++h) {
        const uint16_t* x = orig.data<uint16_t>() + r * 3 * inner + which * inner + h * hd;
        long double sum = 0;
        for (int d = 0; d < hd; ++d) sum += static_cast<long double>(bf(x[d])) * bf(x[d]);
        const long double inv = 1.0L / std::sqrt(sum / hd + static_cast<long double>(1e-5f));
        double n[64];
        for (int d = 0; d < hd; ++d) n[d] = bf(bf16_bits_from_f64(static_cast<double>(bf(x[d]) * inv * bf(w[d]))));
        const uint16_t* got = buf.data<uint16_t>() + r * 3 * inner + which * inner + h * hd;
        for (int d = 0; d < hd; ++d) {
          uint16_t want;
          if (d >= rope_dims) {
            want = bf16_bits_from_f64(n[d]);
          } else {
            const int j = d % half;
            const double c = bf(rope.cos.data<uint16_t>()[r * half + j]),
                         sn = bf(rope.sin.data<uint16_t>()[r * half + j]);
            const double rot = d < half ? -n[d + half] : n[d - half];
            want = bf16_bits_from_f64(bf(bf16_bits_from_f64(n[d] * c)) + bf(bf16_bits_from_f64(rot * sn)));
          }
          st.add(got[d], want);
        }
      }
  }
  // The norm is compared through an independent formula (long-double eps differs from fp32 eps in
  // the last bits), so allow the usual oracle tolerance.
  EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));
  // V is untouched.
  for (int64_t r = 0; r < s; ++r)
    EXPECT_EQ(0, std::memcmp(buf.data<uint16_t>() + r * 3 * inner + 2 * inner,
                             orig.data<uint16_t>() + r * 3 * inner + 2 * inner, inner * 2));
}

TEST(QkNormRope, WithoutRopeEqualsPerHeadRmsNorm) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 11;
  const int heads = 4, hd = 16, inner = 64;
  Tensor q = test::random_bf16({s, inner}, rng), k = test::random_bf16({s, inner}, rng);
  Tensor qw = test::random_bf16({hd}, rng, 0.1, 1.0), kw = test::random_bf16({hd}, rng, 0.1, 1.0);
  Tensor q_heads = q.reshape({s * heads, hd}).value();
  Tensor want = Tensor::empty({s * heads, hd}, DType::kBF16);
  ASSERT_TRUE(ref::rms_norm(q_heads, qw, 1e-5f, want).ok());
  ASSERT_TRUE(ref::qk_norm_rope(q, k, qw, kw, 1e-5f, nullptr, heads, hd).ok());
  EXPECT_EQ(0, std::memcmp(q.raw_data(), want.raw_data(), want.nbytes())) << test::seed_msg(seed);
  RopeTables bad;
  bad.rope_dims = 8;
  bad.cos = Tensor::empty({s, 3}, DType::kBF16);
  bad.sin = Tensor::empty({s, 4}, DType::kBF16);
  EXPECT_EQ(ref::qk_norm_rope(q, k, qw, kw, 1e-5f, &bad, heads, hd).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
