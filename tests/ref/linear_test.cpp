// linear reference: bf16 and f32 paths vs a long-double sum in reverse k order (>= 99.9% equal, <= 1 ulp),
// exact small-integer GEMMs, bias added before the single rounding (a case where rounding twice differs),
// fp8_scaled dequantization R(fp32(fp8 * scale)) then the bf16 program, strided x/out views, bad shapes.
#include <cmath>

#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

LinearWeight plain(Tensor w) {
  LinearWeight lw;
  lw.weight = w;
  lw.out_features = w.dim(0);
  lw.in_features = w.dim(1);
  return lw;
}

TEST(Linear, Bf16MatchesReverseOrderLongDouble) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 64, 7}, {17, 300, 33}}) {
    Tensor x = test::random_bf16({m, k}, rng), w = test::random_bf16({n, k}, rng, 1.0 / std::sqrt(double(k)));
    Tensor b = test::random_bf16({n}, rng, 0.1);
    Tensor out = Tensor::empty({m, n}, DType::kBF16);
    test::poison(out);
    ASSERT_TRUE(ref::linear(x, plain(w), &b, out).ok());
    test::MatchStats st;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double acc = bf(b.data<uint16_t>()[j]);
        for (int64_t kk = k - 1; kk >= 0; --kk)
          acc += static_cast<long double>(bf(x.data<uint16_t>()[i * k + kk])) * bf(w.data<uint16_t>()[j * k + kk]);
        st.add(out.data<uint16_t>()[i * n + j], bf16_bits_from_f64(static_cast<double>(acc)));
      }
    EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));
  }
}

// The program is exactly "one FP64 chain in ascending k, + bias, one rounding": the blocked/vectorized
// implementation must equal this plain loop bit for bit (few-row path and ragged sizes that cross the
// 4-row / 256-column tiles).
TEST(Linear, ExactAscendingKProgram) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{9, 33, 300}, {1, 513, 5}, {6, 3, 257}, {13, 40, 9}}) {
    Tensor x = test::random_bf16({m, k}, rng, 3.0), w = test::random_bf16({n, k}, rng), b = test::random_bf16({n}, rng);
    Tensor out = Tensor::empty({m, n}, DType::kBF16);
    test::poison(out);
    ASSERT_TRUE(ref::linear(x, plain(w), &b, out).ok());
    Tensor xf = test::random_f32({m, k}, rng), wf = test::random_f32({n, k}, rng), bfl = test::random_f32({n}, rng);
    Tensor outf = Tensor::empty({m, n}, DType::kF32);
    ASSERT_TRUE(ref::linear(xf, plain(wf), &bfl, outf).ok());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0, accf = 0.0;
        for (int64_t kk = 0; kk < k; ++kk) {
          acc += static_cast<double>(bf(x.data<uint16_t>()[i * k + kk])) * bf(w.data<uint16_t>()[j * k + kk]);
          accf += static_cast<double>(xf.data<float>()[i * k + kk]) * wf.data<float>()[j * k + kk];
        }
        acc += bf(b.data<uint16_t>()[j]);
        accf += bfl.data<float>()[j];
        ASSERT_EQ(out.data<uint16_t>()[i * n + j], bf16_bits_from_f64(acc)) << test::seed_msg(seed);
        ASSERT_EQ(outf.data<float>()[i * n + j], static_cast<float>(accf)) << test::seed_msg(seed);
      }
  }
}

TEST(Linear, F32MatchesLongDouble) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t m = 6, k = 96, n = 40;
  Tensor x = test::random_f32({m, k}, rng), w = test::random_f32({n, k}, rng, 0.1), b = test::random_f32({n}, rng);
  Tensor out = Tensor::empty({m, n}, DType::kF32);
  test::poison(out);
  ASSERT_TRUE(ref::linear(x, plain(w), &b, out).ok());
  int64_t equal = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double acc = b.data<float>()[j];
      for (int64_t kk = k - 1; kk >= 0; --kk)
        acc += static_cast<long double>(x.data<float>()[i * k + kk]) * w.data<float>()[j * k + kk];
      const float want = static_cast<float>(acc), got = out.data<float>()[i * n + j];
      equal += got == want;
      EXPECT_LE(std::fabs(got - want), std::fabs(want) * 2.4e-7f + 1e-30f) << test::seed_msg(seed);
    }
  EXPECT_GE(equal, m * n * 99 / 100) << test::seed_msg(seed);
}

TEST(Linear, ExactCasesAndSingleRoundingWithBias) {
  // [1, 2] x [[3, 4], [-1, 0.5]]^T = [11, 0]; bias [0.5, 2^-9].
  Tensor x = Tensor::empty({1, 2}, DType::kBF16), w = Tensor::empty({2, 2}, DType::kBF16),
         b = Tensor::empty({2}, DType::kBF16);
  const float xv[2] = {1, 2}, wv[4] = {3, 4, -1, 0.5f};
  for (int i = 0; i < 2; ++i) x.data<uint16_t>()[i] = bf16_bits_from_f32(xv[i]);
  for (int i = 0; i < 4; ++i) w.data<uint16_t>()[i] = bf16_bits_from_f32(wv[i]);
  b.data<uint16_t>()[0] = bf16_bits_from_f32(0.5f);
  b.data<uint16_t>()[1] = bf16_bits_from_f32(1.0f / 512);
  Tensor out = Tensor::empty({1, 2}, DType::kBF16);
  ASSERT_TRUE(ref::linear(x, plain(w), &b, out).ok());
  EXPECT_EQ(bf(out.data<uint16_t>()[0]), 11.5f);
  EXPECT_EQ(bf(out.data<uint16_t>()[1]), 1.0f / 512);
  // Single rounding after the bias: x.w = 1 + 2^-8 (a BF16 tie) plus bias 2^-30 must round UP to 1 + 2^-7;
  // rounding the sum before the bias (ties-to-even -> 1.0) and then adding the bias would give 1.0.
  Tensor x2 = Tensor::empty({1, 2}, DType::kBF16), w2 = Tensor::empty({1, 2}, DType::kBF16),
         b2 = Tensor::empty({1}, DType::kBF16);
  x2.data<uint16_t>()[0] = bf16_bits_from_f32(1.0f);
  x2.data<uint16_t>()[1] = bf16_bits_from_f32(1.0f / 256);
  w2.data<uint16_t>()[0] = w2.data<uint16_t>()[1] = bf16_bits_from_f32(1.0f);
  b2.data<uint16_t>()[0] = bf16_bits_from_f32(std::ldexp(1.0f, -30));
  Tensor out2 = Tensor::empty({1, 1}, DType::kBF16);
  ASSERT_TRUE(ref::linear(x2, plain(w2), &b2, out2).ok());
  EXPECT_EQ(bf(out2.data<uint16_t>()[0]), 1.0f + 1.0f / 128);
  ASSERT_TRUE(ref::linear(x2, plain(w2), nullptr, out2).ok());
  EXPECT_EQ(bf(out2.data<uint16_t>()[0]), 1.0f) << "tie without bias rounds to even";
}

TEST(Linear, Fp8ScaledDequantizesToBf16First) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t m = 4, k = 48, n = 12;
  Tensor x = test::random_bf16({m, k}, rng);
  LinearWeight q;
  q.format = QuantFormat::kFp8Scaled;
  q.weight = Tensor::empty({n, k}, DType::kF8E4M3);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < n * k; ++i) {
    uint8_t v = static_cast<uint8_t>(byte(rng));
    if ((v & 0x7F) == 0x7F) v = 0x01;  // no NaN codes
    q.weight.data<uint8_t>()[i] = v;
  }
  q.weight_scale = Tensor::empty({}, DType::kF32);
  *q.weight_scale.data<float>() = 0.00731f;
  q.out_features = n;
  q.in_features = k;
  Tensor dq = Tensor::empty({n, k}, DType::kBF16);
  for (int64_t i = 0; i < n * k; ++i)
    dq.data<uint16_t>()[i] = bf16_bits_from_f64(static_cast<double>(
        static_cast<float>(static_cast<double>(f32_from_e4m3(q.weight.data<uint8_t>()[i])) * 0.00731f)));
  Tensor out_q = Tensor::empty({m, n}, DType::kBF16), out_b = Tensor::empty({m, n}, DType::kBF16);
  ASSERT_TRUE(ref::linear(x, q, nullptr, out_q).ok());
  ASSERT_TRUE(ref::linear(x, plain(dq), nullptr, out_b).ok());
  EXPECT_EQ(0, std::memcmp(out_q.raw_data(), out_b.raw_data(), out_q.nbytes())) << test::seed_msg(seed);
  q.format = QuantFormat::kNvfp4;
  EXPECT_EQ(ref::linear(x, q, nullptr, out_q).code(), ErrorCode::kUnsupported);
}

TEST(Linear, StridedViewsAndBadShapes) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  Tensor xbig = test::random_bf16({5, 30}, rng);
  Tensor x = xbig.as_strided({5, 10}, {30, 1}, 10).value();
  Tensor xc = Tensor::empty({5, 10}, DType::kBF16);
  ASSERT_TRUE(ref::cast(x, xc).ok());
  Tensor w = test::random_bf16({6, 10}, rng);
  Tensor obig = Tensor::empty({5, 12}, DType::kBF16);
  Tensor o = obig.as_strided({5, 6}, {12, 1}, 6).value();
  Tensor oc = Tensor::empty({5, 6}, DType::kBF16);
  ASSERT_TRUE(ref::linear(x, plain(w), nullptr, o).ok());
  ASSERT_TRUE(ref::linear(xc, plain(w), nullptr, oc).ok());
  for (int r = 0; r < 5; ++r)
    EXPECT_EQ(0, std::memcmp(obig.data<uint16_t>() + r * 12 + 6, oc.data<uint16_t>() + r * 6, 12));
  Tensor wrong = Tensor::empty({6, 9}, DType::kBF16);
  EXPECT_EQ(ref::linear(xc, plain(wrong), nullptr, oc).code(), ErrorCode::kInvalidArgument);
  Tensor wf = Tensor::empty({6, 10}, DType::kF32);
  EXPECT_EQ(ref::linear(xc, plain(wf), nullptr, oc).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
