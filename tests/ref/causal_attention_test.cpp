// causal_attention reference: against a long-double formula of causal GQA softmax attention (kv head
// h / group, keys j <= i), E0 against attention() run on each query row's key prefix with the kv heads
// repeated (the same FP64 program), row 0 equal to its own v, and bad head counts rejected.
#include <cmath>
#include <cstring>
#include <vector>

#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

TEST(CausalAttention, MatchesLongDoubleFormulaWithGqa) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 29;
  const int heads = 6, kv_heads = 2, hd = 16, group = heads / kv_heads;
  Tensor q = test::random_bf16({s, heads * hd}, rng, 1.5);
  Tensor k = test::random_bf16({s, kv_heads * hd}, rng, 1.5);
  Tensor v = test::random_bf16({s, kv_heads * hd}, rng);
  Tensor out = Tensor::empty({s, heads * hd}, DType::kBF16);
  test::poison(out);
  ASSERT_TRUE(ref::causal_attention(q, k, v, heads, kv_heads, hd, out).ok());
  test::MatchStats st;
  for (int h = 0; h < heads; ++h) {
    const int kvh = h / group;
    for (int64_t i = 0; i < s; ++i) {
      std::vector<long double> p(static_cast<size_t>(i + 1));
      long double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        long double dot = 0;
        for (int d = 0; d < hd; ++d)
          dot += static_cast<long double>(bf(q.data<uint16_t>()[i * heads * hd + h * hd + d])) *
                 bf(k.data<uint16_t>()[j * kv_heads * hd + kvh * hd + d]);
        p[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<long double>(hd));
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      for (auto& x : p) sum += (x = std::exp(x - mx));
      for (int d = 0; d < hd; ++d) {
        long double acc = 0;
        for (int64_t j = 0; j <= i; ++j)
          acc += p[static_cast<size_t>(j)] * bf(v.data<uint16_t>()[j * kv_heads * hd + kvh * hd + d]);
        st.add(out.data<uint16_t>()[i * heads * hd + h * hd + d], bf16_bits_from_f64(static_cast<double>(acc / sum)));
      }
    }
  }
  EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));
  // Row 0 sees only key 0: its output is v row 0 of the head's kv head, exactly.
  for (int h = 0; h < heads; ++h)
    for (int d = 0; d < hd; ++d)
      EXPECT_EQ(out.data<uint16_t>()[h * hd + d], v.data<uint16_t>()[(h / group) * hd + d]) << test::seed_msg(seed);
}

TEST(CausalAttention, EqualsAttentionOnEachPrefixOnStridedViews) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 13;
  const int heads = 4, kv_heads = 2, hd = 32, group = 2;
  const int64_t width = (heads + 2 * kv_heads) * hd;  // [q | k | v] rows
  Tensor qkv = test::random_bf16({s, width}, rng, 2.0);
  Tensor q = qkv.as_strided({s, heads * hd}, {width, 1}, 0).value();
  Tensor k = qkv.as_strided({s, kv_heads * hd}, {width, 1}, heads * hd).value();
  Tensor v = qkv.as_strided({s, kv_heads * hd}, {width, 1}, (heads + kv_heads) * hd).value();
  Tensor out = Tensor::empty({s, heads * hd}, DType::kBF16);
  ASSERT_TRUE(ref::causal_attention(q, k, v, heads, kv_heads, hd, out).ok());
  // repeat_kv: [S, heads * hd] copies of k and v.
  Tensor kr = Tensor::empty({s, heads * hd}, DType::kBF16), vr = Tensor::empty({s, heads * hd}, DType::kBF16);
  for (int64_t j = 0; j < s; ++j)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < hd; ++d) {
        kr.data<uint16_t>()[j * heads * hd + h * hd + d] =
            qkv.data<uint16_t>()[j * width + heads * hd + (h / group) * hd + d];
        vr.data<uint16_t>()[j * heads * hd + h * hd + d] =
            qkv.data<uint16_t>()[j * width + (heads + kv_heads) * hd + (h / group) * hd + d];
      }
  for (int64_t i = 0; i < s; ++i) {
    Tensor qi = q.narrow(0, i, 1).value();
    Tensor ki = kr.narrow(0, 0, i + 1).value(), vi = vr.narrow(0, 0, i + 1).value();
    Tensor oi = Tensor::empty({1, heads * hd}, DType::kBF16);
    ASSERT_TRUE(ref::attention(qi, ki, vi, heads, hd, oi).ok());
    EXPECT_EQ(std::memcmp(oi.raw_data(), out.data<uint16_t>() + i * heads * hd, oi.nbytes()), 0)
        << "row " << i << " " << test::seed_msg(seed);
  }
}

TEST(CausalAttention, RejectsBadHeadCounts) {
  std::mt19937_64 rng(test::fresh_seed());
  Tensor q = test::random_bf16({4, 96}, rng), k = test::random_bf16({4, 64}, rng), v = test::random_bf16({4, 64}, rng);
  Tensor out = Tensor::empty({4, 96}, DType::kBF16);
  EXPECT_FALSE(ref::causal_attention(q, k, v, 3, 2, 32, out).ok());  // 3 q-heads over 2 kv-heads
  Tensor k3 = test::random_bf16({3, 64}, rng);
  Tensor q2 = test::random_bf16({4, 128}, rng), out2 = Tensor::empty({4, 128}, DType::kBF16);
  EXPECT_FALSE(ref::causal_attention(q2, k3, v, 4, 2, 32, out2).ok());  // k rows != q rows
  EXPECT_TRUE(ref::causal_attention(q2, k, v, 4, 2, 32, out2).ok());
}

}  // namespace
}  // namespace vortex
