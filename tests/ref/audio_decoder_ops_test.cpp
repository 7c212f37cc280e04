// The audio decoder's FP32 ops of the CPU reference (src/ref/vae_ops.h): conv1d_fp32 byte for byte the FP32 FMA
// chain written out naively here (every tap, the zero padding multiplied in), within the chain's worst-case error of
// the exact long-double sum, [B, C, L] stacks equal to per-signal calls, bad shapes refused; conv1d_fp32_residual
// equal to the convolution then the add, in and out of place; activation1d equal to
// upsample1d -> snake_beta -> downsample1d called one by one (each tested against its formula in
// tests/ref/vae_ops_test.cpp) on stacked rows, and constant where SnakeBeta's input is zero. Fresh random inputs per
// run (the seed is printed on failure).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ref/vae_ops.h"
#include "seed.h"

namespace vortex::ref {
namespace {

Tensor rand_f32(Shape shape, std::mt19937_64& g, float scale = 1.0f) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::normal_distribution<float> n(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(g);
  return t;
}

Tensor poisoned(Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  return t;
}

struct Case {
  int64_t cin, l, cout, k;
  int dilation, padding;
  bool bias;
};

// The decoder's kinds of layer: dec_in_proj (K 1), conv_pre (K 7), AMP convs (K 3/7/11, dilation 1/3/5, 'same'
// padding), conv_post (Cout 1, no bias), and a signal shorter than the kernel's span with padding.
const std::vector<Case> kCases = {{32, 20, 40, 1, 1, 0, true},   {24, 31, 16, 7, 1, 3, true},
                                  {16, 90, 16, 11, 5, 25, true}, {8, 64, 8, 3, 3, 3, true},
                                  {8, 50, 1, 7, 1, 3, false},    {5, 3, 6, 11, 1, 5, true}};

TEST(Conv1dFp32, EqualsTheNaiveFmaChainAndItsErrorBound) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 g(seed);
  for (const Case& c : kCases) {
    Tensor x = rand_f32({c.cin, c.l}, g), w = rand_f32({c.cout, c.cin, c.k}, g, 0.3f), b = rand_f32({c.cout}, g, 0.1f);
    const int64_t lo = conv1d_out_length(c.l, c.k, c.dilation, c.padding);
    Tensor out = poisoned({c.cout, lo});
    ASSERT_TRUE(conv1d_fp32(x, w, c.bias ? &b : nullptr, c.dilation, c.padding, out).ok());
    const int64_t n = c.cin * c.k + 1;  // FMAs and the bias add
    const double gamma = n * std::ldexp(1.0, -24) / (1.0 - n * std::ldexp(1.0, -24));
    for (int64_t o = 0; o < c.cout; ++o)
      for (int64_t t = 0; t < lo; ++t) {
        float acc = 0.0f;
        long double exact = 0.0L, magnitude = 0.0L;
        for (int64_t ci = 0; ci < c.cin; ++ci)
          for (int64_t kk = 0; kk < c.k; ++kk) {
            const int64_t i = t + kk * c.dilation - c.padding;
            const float xv = (i >= 0 && i < c.l) ? x.data<float>()[ci * c.l + i] : 0.0f;
            const float wv = w.data<float>()[(o * c.cin + ci) * c.k + kk];
            acc = std::fma(wv, xv, acc);
            exact += static_cast<long double>(wv) * xv;
            magnitude += std::fabs(static_cast<long double>(wv) * xv);
          }
        const float bv = c.bias ? b.data<float>()[o] : 0.0f;
        const float want = acc + bv;
        exact += bv;
        magnitude += std::fabs(bv);
        const float got = out.data<float>()[o * lo + t];
        ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
            << "cin " << c.cin << " K " << c.k << " d " << c.dilation << " o " << o << " t " << t << ": " << got
            << " vs " << want << "; seed " << seed;
        EXPECT_LE(std::fabs(static_cast<long double>(got) - exact), gamma * magnitude + 1e-30L)
            << "o " << o << " t " << t << "; seed " << seed;
      }
  }
}

TEST(Conv1dFp32, StacksEqualPerSignalCalls) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 g(seed);
  const Case c{12, 77, 10, 7, 3, 9, true};
  Tensor x = rand_f32({2, c.cin, c.l}, g), w = rand_f32({c.cout, c.cin, c.k}, g, 0.3f), b = rand_f32({c.cout}, g);
  const int64_t lo = conv1d_out_length(c.l, c.k, c.dilation, c.padding);
  Tensor stacked = poisoned({2, c.cout, lo});
  ASSERT_TRUE(conv1d_fp32(x, w, &b, c.dilation, c.padding, stacked).ok());
  for (int64_t s = 0; s < 2; ++s) {
    Tensor xs = Tensor::empty({c.cin, c.l}, DType::kF32), os = poisoned({c.cout, lo});
    std::memcpy(xs.raw_data(), x.data<float>() + s * c.cin * c.l, xs.nbytes());
    ASSERT_TRUE(conv1d_fp32(xs, w, &b, c.dilation, c.padding, os).ok());
    EXPECT_EQ(std::memcmp(os.raw_data(), stacked.data<float>() + s * c.cout * lo, os.nbytes()), 0)
        << "signal " << s << "; seed " << seed;
  }
}

TEST(Conv1dFp32, BadShapesAreRefused) {
  std::mt19937_64 g(testing::fresh_seed());
  Tensor x = rand_f32({4, 16}, g), out = poisoned({4, 16});
  Tensor w_bad = rand_f32({4, 5, 3}, g);  // Cin 5 != 4
  EXPECT_EQ(conv1d_fp32(x, w_bad, nullptr, 1, 1, out).code(), ErrorCode::kInvalidArgument);
  Tensor w = rand_f32({4, 4, 3}, g);
  Tensor out_bad = poisoned({4, 15});  // 'same' padding keeps 16
  EXPECT_EQ(conv1d_fp32(x, w, nullptr, 1, 1, out_bad).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(conv1d_fp32(x, w, nullptr, 0, 1, out).code(), ErrorCode::kInvalidArgument);  // dilation 0
  Tensor short_x = rand_f32({4, 2}, g), short_out = poisoned({4, 1});
  EXPECT_EQ(conv1d_fp32(short_x, w, nullptr, 5, 0, short_out).code(), ErrorCode::kInvalidArgument);
  Tensor b_bad = rand_f32({3}, g);
  EXPECT_EQ(conv1d_fp32(x, w, &b_bad, 1, 1, out).code(), ErrorCode::kInvalidArgument);
}

// A Kaiser-sinc-like normalized 12-tap low-pass filter (the shape of the decoder's; its values do not matter here).
Tensor lowpass12() {
  Tensor f = Tensor::empty({12}, DType::kF32);
  double sum = 0.0;
  for (int i = 0; i < 12; ++i) sum += std::exp(-0.1 * (i - 5.5) * (i - 5.5));
  for (int i = 0; i < 12; ++i) f.data<float>()[i] = static_cast<float>(std::exp(-0.1 * (i - 5.5) * (i - 5.5)) / sum);
  return f;
}

// The AMP block's residual convolution: conv1d_fp32 into its own output, then fp32(residual + conv) element by
// element; out of place and in place (residual == out), on a [B, C, L] stack and a 2-D view; x as the residual is
// refused.
TEST(Conv1dFp32Residual, IsConvThenAddInAndOutOfPlace) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 g(seed);
  const int64_t cin = 12, l = 77, cout = 12, k = 7;
  Tensor x = rand_f32({2, cin, l}, g), w = rand_f32({cout, cin, k}, g, 0.3f), b = rand_f32({cout}, g, 0.1f);
  Tensor res = rand_f32({2, cout, l}, g);
  Tensor conv = poisoned({2, cout, l});
  ASSERT_TRUE(conv1d_fp32(x, w, &b, 3, 9, conv).ok());
  Tensor want = poisoned({2, cout, l});
  for (int64_t i = 0; i < want.numel(); ++i) {
    volatile float s = res.data<float>()[i] + conv.data<float>()[i];
    want.data<float>()[i] = s;
  }
  Tensor out = poisoned({2, cout, l});
  ASSERT_TRUE(conv1d_fp32_residual(x, w, &b, 3, 9, res, out).ok());
  EXPECT_EQ(std::memcmp(out.raw_data(), want.raw_data(), want.nbytes()), 0) << "out of place; seed " << seed;
  Tensor inplace = poisoned({2, cout, l});
  std::memcpy(inplace.raw_data(), res.raw_data(), res.nbytes());
  ASSERT_TRUE(conv1d_fp32_residual(x, w, &b, 3, 9, inplace, inplace).ok());
  EXPECT_EQ(std::memcmp(inplace.raw_data(), want.raw_data(), want.nbytes()), 0) << "in place; seed " << seed;
  // A 2-D signal.
  Result<Tensor> x0 = x.narrow(0, 0, 1).value().reshape({cin, l});
  Tensor out0 = poisoned({cout, l});
  Result<Tensor> res0 = res.narrow(0, 0, 1).value().reshape({cout, l});
  ASSERT_TRUE(x0.ok() && res0.ok());
  ASSERT_TRUE(conv1d_fp32_residual(*x0, w, &b, 3, 9, *res0, out0).ok());
  EXPECT_EQ(std::memcmp(out0.raw_data(), want.raw_data(), out0.nbytes()), 0) << "2-D; seed " << seed;
  EXPECT_EQ(conv1d_fp32_residual(x, w, &b, 3, 9, x, out).code(), ErrorCode::kInvalidArgument);
  Tensor short_res = rand_f32({2, cout, l - 1}, g);
  EXPECT_EQ(conv1d_fp32_residual(x, w, &b, 3, 9, short_res, out).code(), ErrorCode::kInvalidArgument);
}

TEST(Activation1d, EqualsTheThreeOpsOneByOne) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 g(seed);
  const Tensor f = lowpass12();
  for (auto [ch, l] : {std::pair<int64_t, int64_t>{3, 37}, {2, 1}, {5, 2}, {4, 300}}) {
    const int64_t rows = 2 * ch;
    Tensor x = rand_f32({rows, l}, g), a = rand_f32({ch}, g, 0.3f), b = rand_f32({ch}, g, 0.3f);
    Tensor out = poisoned({rows, l});
    ASSERT_TRUE(activation1d(x, a, b, f, f, 2, out).ok());
    Tensor up = poisoned({rows, 2 * l}), want = poisoned({rows, l});
    ASSERT_TRUE(upsample1d(x, f, 2, up).ok());
    ASSERT_TRUE(snake_beta(up, a, b).ok());
    ASSERT_TRUE(downsample1d(up, f, 2, want).ok());
    EXPECT_EQ(std::memcmp(out.raw_data(), want.raw_data(), out.nbytes()), 0)
        << "C " << ch << " L " << l << "; seed " << seed;
  }
}

TEST(Activation1d, ZeroInputGivesZero) {
  // SnakeBeta(0) = 0, and both resamplers map a zero signal to zero.
  std::mt19937_64 g(testing::fresh_seed());
  Tensor x = Tensor::empty({4, 50}, DType::kF32);
  std::memset(x.raw_data(), 0, x.nbytes());
  Tensor a = rand_f32({2}, g), b = rand_f32({2}, g), out = poisoned({4, 50});
  ASSERT_TRUE(activation1d(x, a, b, lowpass12(), lowpass12(), 2, out).ok());
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.data<float>()[i], 0.0f) << i;
}

TEST(Activation1d, BadShapesAreRefused) {
  std::mt19937_64 g(testing::fresh_seed());
  Tensor x = rand_f32({6, 20}, g), a = rand_f32({4}, g), b = rand_f32({4}, g), out = poisoned({6, 20});
  EXPECT_FALSE(activation1d(x, a, b, lowpass12(), lowpass12(), 2, out).ok());  // 6 rows, 4 channels
  Tensor a3 = rand_f32({3}, g), b3 = rand_f32({3}, g), wide = poisoned({6, 40});
  EXPECT_EQ(activation1d(x, a3, b3, lowpass12(), lowpass12(), 2, wide).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(activation1d(x, a3, b3, lowpass12(), lowpass12(), 0, out).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex::ref
