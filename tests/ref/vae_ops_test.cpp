// CPU reference ops of the VAE decoders (src/ref/vae_ops.h) against independent long-double formulas and
// hand-picked values: padding, dilation and stride edges, resampler invariants, rounding of the norms.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ref/vae_ops.h"

namespace vortex::ref {
namespace {

Tensor rand_f32(Shape shape, uint32_t seed, float scale = 1.0f) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(g);
  return t;
}

TEST(Conv1d, MatchesNaiveFormulaWithDilationAndPadding) {
  for (auto [k, d, p] : {std::tuple{3, 1, 1}, {7, 3, 9}, {5, 2, 0}, {1, 1, 0}}) {
    Tensor x = rand_f32({3, 17}, 1), w = rand_f32({4, 3, k}, 2), b = rand_f32({4}, 3);
    const int64_t lo = conv1d_out_length(17, k, d, p);
    Tensor out = Tensor::empty({4, lo}, DType::kF32);
    ASSERT_TRUE(conv1d(x, w, &b, d, p, out).ok());
    for (int o = 0; o < 4; ++o)
      for (int64_t t = 0; t < lo; ++t) {
        long double acc = b.data<float>()[o];
        for (int c = 0; c < 3; ++c)
          for (int kk = 0; kk < k; ++kk) {
            const int64_t i = t + kk * d - p;
            if (i >= 0 && i < 17)
              acc += (long double)w.data<float>()[(o * 3 + c) * k + kk] * x.data<float>()[c * 17 + i];
          }
        EXPECT_NEAR(out.data<float>()[o * lo + t], (double)acc, 1e-6) << k << " " << d << " " << p;
      }
  }
}

TEST(Conv1d, RejectsWrongChannelsAndShortSignals) {
  Tensor x = rand_f32({3, 4}, 1), w = rand_f32({2, 5, 3}, 2), out = Tensor::empty({2, 4}, DType::kF32);
  EXPECT_FALSE(conv1d(x, w, nullptr, 1, 1, out).ok());
  Tensor w2 = rand_f32({2, 3, 7}, 2), out2 = Tensor::empty({2, 1}, DType::kF32);
  EXPECT_FALSE(conv1d(x, w2, nullptr, 1, 0, out2).ok());
}

TEST(ConvTranspose1d, MatchesScatterFormula) {
  for (auto [k, s, p] : {std::tuple{9, 5, 2}, {4, 2, 1}, {3, 1, 0}}) {
    Tensor x = rand_f32({3, 6}, 4), w = rand_f32({3, 2, k}, 5), b = rand_f32({2}, 6);
    const int64_t lo = conv_transpose1d_out_length(6, k, s, p);
    Tensor out = Tensor::empty({2, lo}, DType::kF32);
    ASSERT_TRUE(conv_transpose1d(x, w, &b, s, p, out).ok());
    std::vector<long double> want(static_cast<size_t>(2 * lo), 0.0L);
    for (int o = 0; o < 2; ++o) {
      for (int64_t j = 0; j < lo; ++j) want[o * lo + j] = b.data<float>()[o];
      for (int c = 0; c < 3; ++c)
        for (int i = 0; i < 6; ++i)
          for (int kk = 0; kk < k; ++kk) {
            const int64_t j = i * s + kk - p;
            if (j >= 0 && j < lo)
              want[o * lo + j] += (long double)x.data<float>()[c * 6 + i] * w.data<float>()[(c * 2 + o) * k + kk];
          }
    }
    for (int64_t i = 0; i < 2 * lo; ++i) EXPECT_NEAR(out.data<float>()[i], (double)want[i], 1e-6);
  }
}

// The FP32 program exactly: each output is fma over (c, i ascending) from +0, then + bias, written here as a gather
// per output (the reference scatters tap by tap); the bytes must agree, and the sum stays within the chain's error
// bound (n + 1) 2^-24 sum |w x| of the exact one. The upsamplers' (K, s) pairs and ragged ones.
TEST(ConvTranspose1d, IsTheFp32ChainInChannelPositionOrder) {
  std::mt19937 g(std::random_device{}());
  const uint32_t seed = g();
  for (auto [cin, l, cout, k, s, p] : {std::tuple{7, 13, 5, 9, 5, 2},
                                       {16, 40, 8, 4, 2, 1},
                                       {5, 9, 3, 3, 1, 0},
                                       {9, 11, 4, 7, 3, 4},
                                       {4, 1, 2, 4, 2, 1}}) {
    Tensor x = rand_f32({cin, l}, seed + 1, 2.0f), w = rand_f32({cin, cout, k}, seed + 2),
           b = rand_f32({cout}, seed + 3);
    const int64_t lo = conv_transpose1d_out_length(l, k, s, p);
    Tensor out = Tensor::empty({cout, lo}, DType::kF32);
    for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = std::nanf("");  // poisoned
    ASSERT_TRUE(conv_transpose1d(x, w, &b, s, p, out).ok());
    for (int o = 0; o < cout; ++o)
      for (int64_t j = 0; j < lo; ++j) {
        float acc = 0.0f;
        long double exact = 0.0L, mag = 0.0L;
        int n = 0;
        for (int c = 0; c < cin; ++c)
          for (int i = 0; i < l; ++i) {
            const int64_t kk = j + p - static_cast<int64_t>(i) * s;
            if (kk < 0 || kk >= k) continue;
            const float xv = x.data<float>()[c * l + i], wv = w.data<float>()[(c * cout + o) * k + kk];
            acc = std::fma(xv, wv, acc);
            exact += (long double)xv * wv;
            mag += std::fabs((long double)xv * wv);
            ++n;
          }
        volatile float sum = acc + b.data<float>()[o];  // one FP32 rounding, never contracted
        const float want = sum, got = out.data<float>()[o * lo + j];
        EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << "o " << o << " j " << j << " K " << k << " s " << s
                                                              << ": " << got << " vs " << want << "; seed " << seed;
        const long double bound = std::ldexp((long double)(n + 2), -24) * (mag + std::fabs(b.data<float>()[o]));
        EXPECT_LE(std::fabs((long double)got - (exact + b.data<float>()[o])), bound) << "seed " << seed;
      }
  }
}

TEST(Resample, ConstantSignalsStayConstantAndLengthsMatch) {
  // A filter normalized to sum 1 keeps a constant through replicate padding (the property the Kaiser
  // filters are normalized for); the upsampler's `ratio` gain undoes the zero-stuffing.
  Tensor filt = Tensor::empty({12}, DType::kF32);
  // Polyphase taps each sum to 1/2 so the transposed form is also constant-preserving.
  const float even[6] = {0.05f, 0.1f, 0.15f, 0.1f, 0.05f, 0.05f}, odd[6] = {0.02f, 0.13f, 0.2f, 0.1f, 0.03f, 0.02f};
  for (int i = 0; i < 6; ++i) filt.data<float>()[2 * i] = even[i], filt.data<float>()[2 * i + 1] = odd[i];
  Tensor x = Tensor::empty({2, 9}, DType::kF32);
  for (int64_t i = 0; i < 18; ++i) x.data<float>()[i] = i < 9 ? 0.75f : -2.0f;
  Tensor up = Tensor::empty({2, 18}, DType::kF32);
  ASSERT_TRUE(upsample1d(x, filt, 2, up).ok());
  for (int64_t i = 0; i < 36; ++i) EXPECT_NEAR(up.data<float>()[i], i < 18 ? 0.75f : -2.0f, 1e-6) << i;
  Tensor down = Tensor::empty({2, 9}, DType::kF32);
  ASSERT_TRUE(downsample1d(up, filt, 2, down).ok());
  for (int64_t i = 0; i < 18; ++i) EXPECT_NEAR(down.data<float>()[i], i < 9 ? 0.75f : -2.0f, 1e-6) << i;
  Tensor bad = Tensor::empty({2, 17}, DType::kF32);
  EXPECT_FALSE(upsample1d(x, filt, 2, bad).ok());
}

TEST(Resample, UpsampleMatchesPaddedTransposedFormula) {
  Tensor x = rand_f32({1, 7}, 7), filt = rand_f32({12}, 8);
  Tensor up = Tensor::empty({1, 14}, DType::kF32);
  ASSERT_TRUE(upsample1d(x, filt, 2, up).ok());
  const int pad = 12 / 2 - 1, pad_left = pad * 2 + (12 - 2) / 2;
  std::vector<float> xp;
  for (int i = -pad; i < 7 + pad; ++i) xp.push_back(x.data<float>()[std::clamp(i, 0, 6)]);
  const int full = (static_cast<int>(xp.size()) - 1) * 2 + 12;
  std::vector<long double> y(static_cast<size_t>(full), 0.0L);
  for (size_t i = 0; i < xp.size(); ++i)
    for (int k = 0; k < 12; ++k) y[i * 2 + k] += (long double)xp[i] * filt.data<float>()[k];
  for (int t = 0; t < 14; ++t)
    EXPECT_NEAR(up.data<float>()[t], 2.0 * (double)y[static_cast<size_t>(t + pad_left)], 1e-6);
}

TEST(SnakeBeta, MatchesFormulaAndKeepsZero) {
  Tensor x = rand_f32({2, 50}, 9, 3.0f), a = rand_f32({2}, 10, 0.5f), b = rand_f32({2}, 11, 0.5f);
  x.data<float>()[0] = 0.0f;
  Tensor ref = rand_f32({2, 50}, 9, 3.0f);
  ref.data<float>()[0] = 0.0f;
  ASSERT_TRUE(snake_beta(x, a, b).ok());
  EXPECT_EQ(x.data<float>()[0], 0.0f);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 50; ++i) {
      const double v = ref.data<float>()[c * 50 + i], al = std::exp((double)a.data<float>()[c]),
                   be = std::exp((double)b.data<float>()[c]);
      const double s = std::sin(al * v);
      EXPECT_NEAR(x.data<float>()[c * 50 + i], v + s * s / (be + 1e-9), 4e-6 * (1 + std::abs(v)));
    }
}

TEST(Norms, RmsNormFp32AndLayerNormMatchFp64) {
  Tensor x = rand_f32({5, 33}, 12, 4.0f), w = rand_f32({33}, 13), b = rand_f32({33}, 14);
  Tensor o = Tensor::empty({5, 33}, DType::kF32), ob = Tensor::empty({5, 33}, DType::kBF16);
  ASSERT_TRUE(rms_norm_fp32(x, w, 1e-5f, o).ok());
  ASSERT_TRUE(rms_norm_fp32(x, w, 1e-5f, ob).ok());
  Tensor lo = Tensor::empty({5, 33}, DType::kF32);
  ASSERT_TRUE(layer_norm(x, w, b, 1e-5f, lo).ok());
  for (int r = 0; r < 5; ++r) {
    double ss = 0, sum = 0;
    for (int i = 0; i < 33; ++i)
      ss += (double)x.data<float>()[r * 33 + i] * x.data<float>()[r * 33 + i], sum += x.data<float>()[r * 33 + i];
    const double mean = sum / 33;
    double var = 0;
    for (int i = 0; i < 33; ++i) var += std::pow(x.data<float>()[r * 33 + i] - mean, 2);
    var /= 33;
    for (int i = 0; i < 33; ++i) {
      const double xv = x.data<float>()[r * 33 + i], wv = w.data<float>()[i];
      EXPECT_NEAR(o.data<float>()[r * 33 + i], xv / std::sqrt(ss / 33 + 1e-5) * wv, 2e-6);
      // The bf16 output is the RNE rounding of the f32 one (one rounding).
      EXPECT_EQ(ob.data<uint16_t>()[r * 33 + i], bf16_bits_from_f32(o.data<float>()[r * 33 + i]));
      EXPECT_NEAR(lo.data<float>()[r * 33 + i], (xv - mean) / std::sqrt(var + 1e-5) * wv + b.data<float>()[i], 2e-6);
    }
  }
  Tensor wrong = rand_f32({32}, 1);
  EXPECT_FALSE(rms_norm_fp32(x, wrong, 1e-5f, o).ok());
}

TEST(Residuals, ScaleAddAndAddExact) {
  Tensor x = Tensor::empty({1, 3}, DType::kF32), a = Tensor::empty({1, 3}, DType::kBF16),
         s = Tensor::empty({3}, DType::kF32);
  const float xs[3] = {1.0f, -2.0f, 0.5f}, as[3] = {2.0f, 0.5f, -4.0f}, ss[3] = {0.25f, 2.0f, 0.125f};
  for (int i = 0; i < 3; ++i)
    x.data<float>()[i] = xs[i], a.data<uint16_t>()[i] = bf16_bits_from_f32(as[i]), s.data<float>()[i] = ss[i];
  ASSERT_TRUE(scale_add(x, a, s).ok());
  EXPECT_EQ(x.data<float>()[0], 1.5f);
  EXPECT_EQ(x.data<float>()[1], -1.0f);
  EXPECT_EQ(x.data<float>()[2], 0.0f);
  Tensor y = Tensor::empty({1, 3}, DType::kF32);
  for (int i = 0; i < 3; ++i) y.data<float>()[i] = 1.5f;
  ASSERT_TRUE(add(x, y, 0.5f).ok());
  EXPECT_EQ(x.data<float>()[0], 1.5f);
  EXPECT_EQ(x.data<float>()[1], 0.25f);
  EXPECT_EQ(x.data<float>()[2], 0.75f);
}

// [B, C, L] stacks (the audio decoder's stereo pair in one call): each signal gets the bytes of its own 2-D call.
TEST(Batched, ConvolutionsAndSnakeEqualPerSignalCalls) {
  const uint32_t seed = static_cast<uint32_t>(::testing::UnitTest::GetInstance()->random_seed()) * 7919u + 1u;
  const int64_t bs = 3, cin = 4, cout = 5, l = 23;
  Tensor x = rand_f32({bs, cin, l}, seed), w = rand_f32({cout, cin, 3}, seed + 1), b = rand_f32({cout}, seed + 2);
  Tensor wt = rand_f32({cin, cout, 4}, seed + 3);
  const int64_t lo = conv1d_out_length(l, 3, 2, 2), lt = conv_transpose1d_out_length(l, 4, 2, 1);
  Tensor out = rand_f32({bs, cout, lo}, seed + 4), outt = rand_f32({bs, cout, lt}, seed + 5);  // poisoned
  ASSERT_TRUE(conv1d(x, w, &b, 2, 2, out).ok());
  ASSERT_TRUE(conv_transpose1d(x, wt, &b, 2, 1, outt).ok());
  for (int64_t i = 0; i < bs; ++i) {
    Tensor xi = Tensor::empty({cin, l}, DType::kF32);
    std::memcpy(xi.raw_data(), x.data<float>() + i * cin * l, xi.nbytes());
    Tensor oi = Tensor::empty({cout, lo}, DType::kF32), ti = Tensor::empty({cout, lt}, DType::kF32);
    ASSERT_TRUE(conv1d(xi, w, &b, 2, 2, oi).ok());
    ASSERT_TRUE(conv_transpose1d(xi, wt, &b, 2, 1, ti).ok());
    EXPECT_EQ(std::memcmp(oi.raw_data(), out.data<float>() + i * cout * lo, oi.nbytes()), 0) << "signal " << i;
    EXPECT_EQ(std::memcmp(ti.raw_data(), outt.data<float>() + i * cout * lt, ti.nbytes()), 0) << "signal " << i;
  }
  // snake_beta on [B * C, L] rows: row r uses channel r % C.
  Tensor a = rand_f32({cin}, seed + 6, 0.5f), be = rand_f32({cin}, seed + 7, 0.5f);
  Tensor rows = rand_f32({bs * cin, l}, seed + 8, 3.0f), want = Tensor::empty({bs * cin, l}, DType::kF32);
  std::memcpy(want.raw_data(), rows.raw_data(), rows.nbytes());
  ASSERT_TRUE(snake_beta(rows, a, be).ok());
  for (int64_t i = 0; i < bs; ++i) {
    Tensor xi = Tensor::empty({cin, l}, DType::kF32);
    std::memcpy(xi.raw_data(), want.data<float>() + i * cin * l, xi.nbytes());
    ASSERT_TRUE(snake_beta(xi, a, be).ok());
    EXPECT_EQ(std::memcmp(xi.raw_data(), rows.data<float>() + i * cin * l, xi.nbytes()), 0) << "signal " << i;
  }
  // Mismatched batches and partial signals are refused.
  Tensor out2 = Tensor::empty({bs - 1, cout, lo}, DType::kF32);
  EXPECT_EQ(conv1d(x, w, &b, 2, 2, out2).code(), ErrorCode::kInvalidArgument);
  Tensor odd = rand_f32({cin + 1, l}, seed + 9);
  EXPECT_EQ(snake_beta(odd, a, be).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex::ref
