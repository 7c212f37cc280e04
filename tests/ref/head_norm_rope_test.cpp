// head_norm_rope reference: E0 against its composition (rms_norm_two_rounding on every head, then the RoPE of
// qk_norm_rope), GQA head counts on strided views against an FP64 formulation (Qwen3's two-rounding norm,
// rotate-half RoPE with three roundings), the columns outside the view untouched, bad weights/tables rejected.
#include <cmath>
#include <cstring>

#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

RopeTables random_angles(int64_t s, int half, std::mt19937_64& rng) {
  RopeTables rope;
  rope.rope_dims = 2 * half;
  rope.cos = Tensor::empty({s, half}, DType::kBF16);
  rope.sin = Tensor::empty({s, half}, DType::kBF16);
  std::uniform_real_distribution<double> ang(-20.0, 20.0);
  for (int64_t i = 0; i < s * half; ++i) {
    const double a = ang(rng);
    rope.cos.data<uint16_t>()[i] = bf16_bits_from_f64(std::cos(a));
    rope.sin.data<uint16_t>()[i] = bf16_bits_from_f64(std::sin(a));
  }
  return rope;
}

TEST(HeadNormRope, EqualsTwoRoundingNormPerHeadThenRope) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 19;
  const int heads = 3, hd = 32, inner = heads * hd, half = 12;  // rope_dims 24 < head_dim: pass-through dims
  Tensor a = test::random_bf16({s, inner}, rng, 2.0);
  Tensor w = test::random_bf16({hd}, rng, 0.1, 1.0);
  RopeTables rope = random_angles(s, half, rng);
  Tensor b = Tensor::empty({s * heads, hd}, DType::kBF16);  // heads as rows
  Tensor a_rows = a.reshape({s * heads, hd}).value();
  ASSERT_TRUE(ref::rms_norm_two_rounding(a_rows, w, 1e-6f, b).ok());
  for (int64_t r = 0; r < s; ++r)
    for (int h = 0; h < heads; ++h)
      ref::rope_head_row(b.data<uint16_t>() + (r * heads + h) * hd, rope.cos.data<uint16_t>() + r * half,
                         rope.sin.data<uint16_t>() + r * half, half);
  ASSERT_TRUE(ref::head_norm_rope(a, w, 1e-6f, &rope, heads, hd).ok());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << test::seed_msg(seed);
}

TEST(HeadNormRope, GqaViewsMatchFp64Formulation) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 17;
  const int q_heads = 4, kv_heads = 2, hd = 32, half = 16;
  const int64_t width = (q_heads + 2 * kv_heads) * hd;  // [q | k | v] rows of a GQA projection
  Tensor buf = test::random_bf16({s, width}, rng, 3.0);
  Tensor orig = Tensor::empty({s, width}, DType::kBF16);
  std::memcpy(orig.raw_data(), buf.raw_data(), buf.nbytes());
  Tensor w = test::random_bf16({hd}, rng, 0.2, 1.0);
  RopeTables rope = random_angles(s, half, rng);
  Tensor k = buf.as_strided({s, kv_heads * hd}, {width, 1}, q_heads * hd).value();
  ASSERT_TRUE(ref::head_norm_rope(k, w, 1e-6f, &rope, kv_heads, hd).ok());
  test::MatchStats st;
  int64_t untouched_diff = 0;
  for (int64_t r = 0; r < s; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const bool in_k = c >= q_heads * hd && c < (q_heads + kv_heads) * hd;
      if (!in_k) untouched_diff += buf.data<uint16_t>()[r * width + c] != orig.data<uint16_t>()[r * width + c];
    }
    for (int h = 0; h < kv_heads; ++h) {
      const int64_t off = r * width + q_heads * hd + h * hd;
      const uint16_t* x = orig.data<uint16_t>() + off;
      long double sum = 0;
      for (int d = 0; d < hd; ++d) sum += static_cast<long double>(bf(x[d])) * bf(x[d]);
      // Qwen3's norm in FP32 (transformers' Qwen3RMSNorm): the factor rsqrt(mean + eps) and x * factor are FP32
      // values, the product then rounded to BF16. An exact factor instead flips a BF16 rounding in about 0.6% of
      // runs, and the RoPE's cancellation can turn that flip into 2 ulp.
      const float inv = static_cast<float>(1.0L / std::sqrt(sum / hd + static_cast<long double>(1e-6f)));
      double n[32];
      for (int d = 0; d < hd; ++d)
        n[d] = bf(bf16_bits_from_f64(
            bf(bf16_bits_from_f64(static_cast<float>(static_cast<double>(bf(x[d])) * static_cast<double>(inv)))) *
            static_cast<double>(bf(w.data<uint16_t>()[d]))));
      for (int d = 0; d < hd; ++d) {
        const int j = d % half;
        const double c = bf(rope.cos.data<uint16_t>()[r * half + j]), sn = bf(rope.sin.data<uint16_t>()[r * half + j]);
        const double rot = d < half ? -n[d + half] : n[d - half];
        st.add(buf.data<uint16_t>()[off + d],
               bf16_bits_from_f64(bf(bf16_bits_from_f64(n[d] * c)) + bf(bf16_bits_from_f64(rot * sn))));
      }
    }
  }
  EXPECT_EQ(untouched_diff, 0) << test::seed_msg(seed);
  EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));
}

TEST(HeadNormRope, RejectsBadWeightAndTables) {
  std::mt19937_64 rng(test::fresh_seed());
  Tensor x = test::random_bf16({5, 64}, rng);
  Tensor w = test::random_bf16({16}, rng);
  EXPECT_FALSE(ref::head_norm_rope(x, w, 1e-6f, nullptr, 2, 32).ok());  // weight is not [head_dim]
  Tensor w32 = test::random_bf16({32}, rng);
  RopeTables rope = random_angles(4, 16, rng);  // 4 rows for 5
  EXPECT_FALSE(ref::head_norm_rope(x, w32, 1e-6f, &rope, 2, 32).ok());
  EXPECT_FALSE(ref::head_norm_rope(x, w32, 1e-6f, nullptr, 3, 32).ok());  // 3 * 32 != 64
  EXPECT_TRUE(ref::head_norm_rope(x, w32, 1e-6f, nullptr, 2, 32).ok());
}

}  // namespace
}  // namespace vortex
