// The audio VAE encoder's CPU programs (src/ref/vae_ops.h) against independent formulas: conv1d_strided equals every
// stride-th output of the stride-1 conv1d (the same FP64 chain) and a long-double formula; snake and gelu_tanh_mul
// against the FP64 formula (one rounding) and their fixed points; layer_norm_channels against a long-double formula
// and in place; pooled_causal_attention against a naive long-double evaluation (bins that overlap included) and its
// one-position identity (the softmax of one key is 1); bytes independent of the thread count; refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ref/cpu_backend.h"
#include "ref/vae_ops.h"

namespace vortex {
namespace {

Tensor random_f32(Shape shape, std::mt19937_64& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::normal_distribution<float> n(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

Tensor clone(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype());
  std::memcpy(c.raw_data(), t.raw_data(), t.nbytes());
  return c;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// |got - want| <= ulps FP32 ulps of want (plus a denormal floor).
void expect_ulps(double got, long double want, double ulps, const std::string& what) {
  const double bound = ulps * std::ldexp(1.0, std::ilogb(static_cast<double>(want)) - 23) + 1e-38;
  EXPECT_LE(std::fabs(got - static_cast<double>(want)), bound)
      << what << ": got " << got << " want " << static_cast<double>(want);
}

TEST(AudioEncoderOps, Conv1dStridedIsTheStrideOneChainDecimated) {
  std::mt19937_64 rng(1);
  for (int stride : {2, 3, 5}) {
    const int64_t b = 2, cin = 5, cout = 4, l = 61, k = 2 * stride;
    const int padding = (stride + 1) / 2;
    Tensor x = random_f32({b, cin, l}, rng), w = random_f32({cout, cin, k}, rng), bias = random_f32({cout}, rng);
    const int64_t full = ref::conv1d_out_length(l, k, 1, padding);
    Tensor dense = Tensor::empty({b, cout, full}, DType::kF32);
    ASSERT_TRUE(ref::conv1d(x, w, &bias, 1, padding, dense).ok());
    const int64_t lout = ref::conv1d_strided_out_length(l, k, stride, 1, padding);
    Tensor out = Tensor::empty({b, cout, lout}, DType::kF32);
    ASSERT_TRUE(ref::conv1d_strided(x, w, bias, stride, 1, padding, out).ok());
    for (int64_t s = 0; s < b * cout; ++s)
      for (int64_t t = 0; t < lout; ++t) {
        const float got = out.data<float>()[s * lout + t], want = dense.data<float>()[s * full + t * stride];
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "stride " << stride << " row " << s << " t " << t;
        long double ld = bias.data<float>()[s % cout];
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t kk = 0; kk < k; ++kk) {
            const int64_t i = t * stride + kk - padding;
            if (i >= 0 && i < l)
              ld += static_cast<long double>(w.data<float>()[((s % cout) * cin + c) * k + kk]) *
                    x.data<float>()[((s / cout) * cin + c) * l + i];
          }
        EXPECT_NEAR(got, static_cast<double>(ld), 1e-5);
      }
  }
  // Dilation with stride: the formula directly.
  Tensor x = random_f32({1, 2, 20}, rng), w = random_f32({1, 2, 3}, rng), bias = random_f32({1}, rng);
  Tensor out = Tensor::empty({1, 1, ref::conv1d_strided_out_length(20, 3, 3, 2, 1)}, DType::kF32);
  ASSERT_TRUE(ref::conv1d_strided(x, w, bias, 3, 2, 1, out).ok());
  for (int64_t t = 0; t < out.dim(2); ++t) {
    long double ld = bias.data<float>()[0];
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t kk = 0; kk < 3; ++kk) {
        const int64_t i = t * 3 + kk * 2 - 1;
        if (i >= 0 && i < 20) ld += static_cast<long double>(w.data<float>()[c * 3 + kk]) * x.data<float>()[c * 20 + i];
      }
    expect_ulps(out.data<float>()[t], ld, 1, "dilated strided conv t " + std::to_string(t));
  }
  Tensor wrong = Tensor::empty({1, 1, 5}, DType::kF32);
  EXPECT_FALSE(ref::conv1d_strided(x, w, bias, 3, 2, 1, wrong).ok());
  EXPECT_FALSE(ref::conv1d_strided(x, w, bias, 0, 1, 1, out).ok());
}

TEST(AudioEncoderOps, SnakeAndGeluAgainstTheFormula) {
  std::mt19937_64 rng(2);
  Tensor x = random_f32({6, 50}, rng, 3.0f), alpha = random_f32({3}, rng);
  for (int i = 0; i < 3; ++i) alpha.data<float>()[i] = std::fabs(alpha.data<float>()[i]) + 0.1f;
  x.data<float>()[7] = 0.0f;
  Tensor y = clone(x);
  ASSERT_TRUE(ref::snake(y, alpha).ok());
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t i = 0; i < 50; ++i) {
      const long double a = alpha.data<float>()[r % 3], v = x.data<float>()[r * 50 + i];
      const long double s = std::sin(a * v);
      expect_ulps(y.data<float>()[r * 50 + i], v + s * s / (a + 1e-9L), 1, "snake");
    }
  EXPECT_EQ(y.data<float>()[7], 0.0f);  // sin(0) = 0: a fixed point
  Tensor a = random_f32({2, 4, 30}, rng, 3.0f), g = random_f32({2, 4, 30}, rng);
  Tensor out = Tensor::empty(a.shape(), DType::kF32);
  ASSERT_TRUE(ref::gelu_tanh_mul(a, g, out).ok());
  for (int64_t i = 0; i < a.numel(); ++i) {
    const long double v = a.data<float>()[i];
    const long double ge = 0.5L * v * (1.0L + std::tanh(std::sqrt(2.0L / M_PIl) * (v + 0.044715L * v * v * v)));
    const float gf = static_cast<float>(ge);
    // 1 + tanh cancels for negative a: FP64 keeps ~2^-53 of 0.5 |a| absolute, not of the (tiny) result.
    const long double want = static_cast<long double>(gf) * g.data<float>()[i];
    const double cancel = std::ldexp(std::fabs(static_cast<double>(v) * g.data<float>()[i]), -50);
    EXPECT_LE(std::fabs(out.data<float>()[i] - static_cast<double>(want)),
              2 * std::ldexp(1.0, std::ilogb(static_cast<double>(want)) - 23) + cancel + 1e-38)
        << "gelu_tanh_mul a " << static_cast<double>(v);
  }
  Tensor inplace = clone(a);
  ASSERT_TRUE(ref::gelu_tanh_mul(inplace, g, inplace).ok());
  EXPECT_TRUE(same_bytes(inplace, out));
  Tensor bad_alpha = random_f32({4}, rng);
  EXPECT_FALSE(ref::snake(y, bad_alpha).ok());  // 6 rows are not whole signals of 4 channels
  EXPECT_FALSE(ref::gelu_tanh_mul(a, random_f32({2, 4, 29}, rng), out).ok());
}

TEST(AudioEncoderOps, LayerNormChannelsAgainstTheFormula) {
  std::mt19937_64 rng(3);
  const int64_t b = 2, d = 24, l = 9;
  Tensor x = random_f32({b, d, l}, rng, 2.0f), w = random_f32({d}, rng), bias = random_f32({d}, rng);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += 5.0f;
  Tensor out = Tensor::empty({b, d, l}, DType::kF32);
  ASSERT_TRUE(ref::layer_norm_channels(x, w, bias, 1e-5, out).ok());
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t t = 0; t < l; ++t) {
      long double mean = 0, var = 0;
      for (int64_t j = 0; j < d; ++j) mean += x.data<float>()[(bb * d + j) * l + t];
      mean /= d;
      for (int64_t j = 0; j < d; ++j) {
        const long double dv = x.data<float>()[(bb * d + j) * l + t] - mean;
        var += dv * dv;
      }
      var /= d;
      for (int64_t j = 0; j < d; ++j) {
        const long double want =
            (x.data<float>()[(bb * d + j) * l + t] - mean) / std::sqrt(var + 1e-5L) * w.data<float>()[j] +
            bias.data<float>()[j];
        EXPECT_NEAR(out.data<float>()[(bb * d + j) * l + t], static_cast<double>(want),
                    1e-6 * (1 + std::fabs(static_cast<double>(want))));
      }
    }
  Tensor inplace = clone(x);
  ASSERT_TRUE(ref::layer_norm_channels(inplace, w, bias, 1e-5, inplace).ok());
  EXPECT_TRUE(same_bytes(inplace, out));
  Tensor short_w = random_f32({d - 1}, rng);
  EXPECT_FALSE(ref::layer_norm_channels(x, short_w, bias, 1e-5, out).ok());
}

TEST(AudioEncoderOps, PooledCausalAttentionAgainstANaiveEvaluation) {
  std::mt19937_64 rng(4);
  const int64_t b = 2, heads = 3, hd = 12, d = heads * hd, t_n = 7, c = 8;  // 12 into 8: overlapping bins
  Tensor qkv = random_f32({b, 3 * d, t_n}, rng);
  Tensor out = Tensor::empty({b, c, t_n}, DType::kF32);
  ASSERT_TRUE(ref::pooled_causal_attention(qkv, heads, out).ok());
  auto at = [&](int64_t bb, int64_t ch, int64_t t) {
    return static_cast<long double>(qkv.data<float>()[(bb * 3 * d + ch) * t_n + t]);
  };
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t i = 0; i < t_n; ++i) {
      std::vector<long double> mean(hd, 0.0L);
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<long double> s(i + 1);
        long double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t e = 0; e < hd; ++e) s[j] += at(bb, h * hd + e, i) * at(bb, d + h * hd + e, j);
          s[j] /= std::sqrt(static_cast<long double>(hd));
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t e = 0; e < hd; ++e) {
          long double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += s[j] / sum * at(bb, 2 * d + h * hd + e, j);
          mean[e] += o / heads;
        }
      }
      for (int64_t oc = 0; oc < c; ++oc) {
        const int64_t lo = oc * hd / c, hi = ((oc + 1) * hd + c - 1) / c;  // floor / ceil
        long double want = 0;
        for (int64_t e = lo; e < hi; ++e) want += mean[e];
        want /= (hi - lo);
        EXPECT_NEAR(out.data<float>()[(bb * c + oc) * t_n + i], static_cast<double>(want), 1e-6);
      }
    }
  // One position, one head, as many channels as the head width: the output is v itself.
  Tensor one = random_f32({1, 3 * 4, 1}, rng), o1 = Tensor::empty({1, 4, 1}, DType::kF32);
  ASSERT_TRUE(ref::pooled_causal_attention(one, 1, o1).ok());
  for (int e = 0; e < 4; ++e) EXPECT_EQ(o1.data<float>()[e], one.data<float>()[8 + e]);
  // Bytes do not depend on the thread count.
  CpuBackend four(4);
  Tensor threaded = Tensor::empty({b, c, t_n}, DType::kF32);
  ASSERT_TRUE(four.pooled_causal_attention(qkv, heads, threaded).ok());
  EXPECT_TRUE(same_bytes(threaded, out));
  Tensor wrong_t = Tensor::empty({b, c, t_n + 1}, DType::kF32);
  EXPECT_FALSE(ref::pooled_causal_attention(qkv, heads, wrong_t).ok());
  EXPECT_FALSE(ref::pooled_causal_attention(qkv, 5, out).ok());  // 36 channels are not 3 x 5 heads
}

}  // namespace
}  // namespace vortex
