// GPU tests of the vision tower and video VAE encoder ops (src/cuda/ops/encoder_ops.h) against the CPU programs
// (src/ref/encoder_ops.h): rope_fp32, pos_embed_add and pad_causal_reflect byte for byte; gelu within one BF16 ulp
// (tanhf/erff of CUDA's libdevice against the host libm), or 2^-22 |x| in the cancelling negative tail;
// group_norm_frames within 4 FP32 ulps (tree-ordered FP64 statistics, expf); conv3d against an FP64 convolution within
// a bound of its operand magnitudes: 2^-14 sum|w x| in FMA math (cuDNN may pick Winograd or FFT algorithms), 2^-8 sum|w
// x| with TF32 operands. Fresh random inputs per run (seed printed on failure), outputs poisoned with NaN before each
// run. Label gpu; skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "ref/cpu_backend.h"

namespace vortex {
namespace {

class CudaEncoderOps : public ::testing::Test {
 protected:
  void SetUp() override {
    VORTEX_REQUIRE_CUDA(gpu_);
    seed_ = cuda_test::fresh_seed();
    rng_.seed(seed_);
    cpu_ = std::make_unique<CpuBackend>(0);
  }
  std::string note() const { return " (seed " + std::to_string(seed_) + ")"; }
  Tensor random_f32(Shape shape, float scale = 1.0f) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    std::normal_distribution<float> n(0.0f, scale);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng_);
    return t;
  }
  Tensor random_bf16(Shape shape) { return cuda_test::random_host_bf16(shape, rng_, cuda_test::Fill::kNormal); }
  Tensor clone(const Tensor& t) {
    Tensor c = Tensor::empty(t.shape(), t.dtype());
    std::memcpy(c.raw_data(), t.raw_data(), t.nbytes());
    return c;
  }
  Tensor up(const Tensor& h) {
    auto t = gpu_->upload(h);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? *t : Tensor();
  }
  // A device tensor filled with NaN bytes (0xFF).
  Tensor poisoned(Shape shape, DType dtype) {
    Tensor h = Tensor::empty(shape, dtype);
    std::memset(h.raw_data(), 0xFF, h.nbytes());
    return up(h);
  }
  Tensor down(const Tensor& d) {
    Tensor h = Tensor::empty(d.shape(), d.dtype());
    Status s = gpu_->download(d, h);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return h;
  }
  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuBackend> cpu_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST_F(CudaEncoderOps, GeluWithinOneBf16Ulp) {
  for (bool tanh_approx : {true, false}) {
    Tensor host = random_bf16({37, 4304});
    for (int64_t i = 0; i < host.numel(); i += 101)
      host.data<uint16_t>()[i] = bf16_bits_from_f32(-8.0f + 0.01f * (i % 1600));
    Tensor want = clone(host);
    ASSERT_TRUE(cpu_->gelu(want, tanh_approx).ok());
    Tensor d = up(host);
    ASSERT_TRUE(gpu_->gelu(d, tanh_approx).ok());
    const Tensor got = down(d);
    // Within one BF16 ulp, except in the far negative tail, where 1 + erf(x) (or 1 + tanh) cancels: there the two
    // libms' one-ulp difference in erf/tanh is an absolute error of up to 2^-24 |x| in gelu (as in torch itself).
    int64_t exact = 0, outside = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const uint16_t a = want.data<uint16_t>()[i], b = got.data<uint16_t>()[i];
      exact += a == b;
      const float fa = f32_from_bf16_bits(a), fb = f32_from_bf16_bits(b);
      const float x = f32_from_bf16_bits(host.data<uint16_t>()[i]);
      // One BF16 ulp at `fa`: the gap to the next BF16 value away from zero (bit pattern + 1).
      const double ulp = std::abs(static_cast<double>(f32_from_bf16_bits(static_cast<uint16_t>(a + 1))) - fa);
      const double tol = std::max(ulp, std::ldexp(std::abs(static_cast<double>(x)), -22));
      outside += std::abs(static_cast<double>(fa) - fb) > tol;
    }
    std::printf("gelu %s: %lld of %lld equal, %lld outside one BF16 ulp / the tail bound\n",
                tanh_approx ? "tanh" : "erf", static_cast<long long>(exact), static_cast<long long>(want.numel()),
                static_cast<long long>(outside));
    EXPECT_EQ(outside, 0) << note();
    EXPECT_GE(exact, want.numel() * 99 / 100) << note();
  }
}

TEST_F(CudaEncoderOps, RopeFp32BitExactOnStridedViews) {
  const int heads = 16, hd = 72;
  const int64_t s = 333, d = heads * hd;
  Tensor qkv = random_bf16({s, 3 * d});  // q and k are strided column views, as in the vision blocks
  Tensor cs = random_f32({s, hd}), sn = random_f32({s, hd});
  Tensor want = clone(qkv);
  for (int part = 0; part < 2; ++part) {
    auto view = want.narrow(1, part * d, d);
    ASSERT_TRUE(view.ok());
    ASSERT_TRUE(cpu_->rope_fp32(*view, cs, sn, heads, hd).ok());
  }
  Tensor dq = up(qkv), dc = up(cs), ds = up(sn);
  for (int part = 0; part < 2; ++part) {
    auto view = dq.narrow(1, part * d, d);
    ASSERT_TRUE(view.ok());
    Status st = gpu_->rope_fp32(*view, dc, ds, heads, hd);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  const Tensor got = down(dq);
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0) << note();
  // v (the third part) is untouched.
  EXPECT_EQ(cuda_test::compare_bytes(want, got), "") << note();
  auto bad = dq.narrow(1, 0, d);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(gpu_->rope_fp32(*bad, dc, ds, heads, hd + 2).ok());
}

TEST_F(CudaEncoderOps, PosEmbedAddBitExact) {
  const int64_t s = 4032, d = 1152, p = 2304;
  Tensor x = random_bf16({s, d}), table = random_bf16({p, d});
  Tensor index = Tensor::empty({s, 4}, DType::kI32), weight = Tensor::empty({s, 4}, DType::kF32);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(p) - 1);
  std::uniform_real_distribution<float> w(0.0f, 1.0f);
  for (int64_t i = 0; i < s * 4; ++i) {
    index.data<int32_t>()[i] = pick(rng_);
    weight.data<float>()[i] = w(rng_);
  }
  Tensor want = clone(x);
  ASSERT_TRUE(cpu_->pos_embed_add(want, table, index, weight).ok());
  Tensor dx = up(x);
  Status st = gpu_->pos_embed_add(dx, up(table), up(index), up(weight));
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(cuda_test::compare_bytes(want, down(dx)), "") << note();
}

TEST_F(CudaEncoderOps, PadCausalReflectBitExact) {
  struct Case {
    Shape x;
    int front, top, bottom, left, right;
  };
  for (const Case& c : {Case{{2, 1, 9, 11, 3}, 0, 1, 1, 1, 1}, Case{{3, 4, 6, 5, 16}, 2, 1, 1, 1, 1},
                        Case{{1, 3, 7, 8, 32}, 2, 0, 1, 0, 1}}) {
    const Tensor x = random_f32(c.x);
    const Shape os{c.x[0], c.x[1] + c.front, c.x[2] + c.top + c.bottom, c.x[3] + c.left + c.right, c.x[4]};
    Tensor want = Tensor::empty(os, DType::kF32);
    ASSERT_TRUE(cpu_->pad_causal_reflect(x, c.front, c.top, c.bottom, c.left, c.right, want).ok());
    Tensor out = poisoned(os, DType::kF32);
    Status st = gpu_->pad_causal_reflect(up(x), c.front, c.top, c.bottom, c.left, c.right, out);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(cuda_test::compare_bytes(want, down(out)), "") << shape_to_string(c.x) << note();
  }
}

TEST_F(CudaEncoderOps, GroupNormFramesWithinFourUlps) {
  for (bool silu : {true, false})
    for (const Shape& shape : {Shape{3, 2, 17, 19, 64}, Shape{2, 1, 64, 64, 128}, Shape{1, 1, 4, 6, 1024}}) {
      Tensor x = random_f32(shape, 3.0f);
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += 1.5f;  // a mean away from zero
      const int64_t c = shape[4];
      Tensor w = random_f32({c}), b = random_f32({c});
      Tensor want = Tensor::empty(shape, DType::kF32);
      ASSERT_TRUE(cpu_->group_norm_frames(x, w, b, 32, 1e-6f, silu, want).ok());
      Tensor out = poisoned(shape, DType::kF32);
      Status st = gpu_->group_norm_frames(up(x), up(w), up(b), 32, 1e-6f, silu, out);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const Tensor got = down(out);
      double worst = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const float a = want.data<float>()[i], g = got.data<float>()[i];
        ASSERT_TRUE(std::isfinite(g)) << i << note();
        const double ulp = std::max(std::abs(std::nextafter(a, INFINITY) - a), 1e-7f);
        worst = std::max(worst, std::abs(static_cast<double>(a) - g) / ulp);
      }
      std::printf("group_norm_frames %s silu=%d: worst %.2f FP32 ulps\n", shape_to_string(shape).c_str(), silu, worst);
      EXPECT_LE(worst, 4.0) << shape_to_string(shape) << note();
    }
}

TEST_F(CudaEncoderOps, Conv3dAgainstFp64WithinOperandBound) {
  struct Case {
    Shape x, w;
    int st, ss;
  };
  for (const Case& c :
       {Case{{2, 1, 18, 20, 16}, {32, 1, 3, 3, 16}, 1, 1}, Case{{2, 3, 17, 19, 8}, {16, 3, 3, 3, 8}, 2, 2},
        Case{{3, 1, 10, 12, 3}, {128, 1, 3, 3, 3}, 1, 1}, Case{{1, 2, 9, 9, 64}, {48, 1, 1, 1, 64}, 1, 1}})
    for (bool tf32 : {false, true}) {
      const Tensor x = random_f32(c.x), w = random_f32(c.w, 0.2f), b = random_f32({c.w[0]});
      const Shape os{c.x[0], (c.x[1] - c.w[1]) / c.st + 1, (c.x[2] - c.w[2]) / c.ss + 1, (c.x[3] - c.w[3]) / c.ss + 1,
                     c.w[0]};
      Tensor cpu_out = Tensor::empty(os, DType::kF32);
      ASSERT_TRUE(cpu_->conv3d(x, w, b, c.st, c.ss, tf32, cpu_out).ok());
      Tensor out = poisoned(os, DType::kF32);
      Status st = gpu_->conv3d(up(x), up(w), up(b), c.st, c.ss, tf32, out);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const Tensor got = down(out);
      // FP64 truth and sum |w x| per output.
      const int64_t ci = c.x[4], kt = c.w[1], kh = c.w[2], kw = c.w[3];
      double worst = 0, worst_cpu = 0;
      for (int64_t bi = 0; bi < os[0]; ++bi)
        for (int64_t f = 0; f < os[1]; ++f)
          for (int64_t i = 0; i < os[2]; ++i)
            for (int64_t j = 0; j < os[3]; ++j)
              for (int64_t o = 0; o < os[4]; ++o) {
                double sum = b.data<float>()[o], mag = std::abs(b.data<float>()[o]);
                for (int64_t a = 0; a < kt; ++a)
                  for (int64_t p = 0; p < kh; ++p)
                    for (int64_t q = 0; q < kw; ++q)
                      for (int64_t k = 0; k < ci; ++k) {
                        const double xv =
                            x.data<float>()[((((bi * c.x[1] + f * c.st + a) * c.x[2] + i * c.ss + p) * c.x[3] +
                                              j * c.ss + q) *
                                             ci) +
                                            k];
                        const double wv = w.data<float>()[(((o * kt + a) * kh + p) * kw + q) * ci + k];
                        sum += xv * wv;
                        mag += std::abs(xv * wv);
                      }
                const int64_t at = (((bi * os[1] + f) * os[2] + i) * os[3] + j) * os[4] + o;
                worst = std::max(worst, std::abs(got.data<float>()[at] - sum) / mag);
                worst_cpu = std::max(worst_cpu, std::abs(cpu_out.data<float>()[at] - sum) / mag);
              }
      const double bound = tf32 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -14);
      std::printf("conv3d x %s w %s tf32=%d: worst |err| / sum|w x| GPU %.3g, CPU %.3g (bound %.3g)\n",
                  shape_to_string(c.x).c_str(), shape_to_string(c.w).c_str(), tf32, worst, worst_cpu, bound);
      EXPECT_LE(worst, bound) << note();
      EXPECT_LE(worst_cpu, std::ldexp(1.0, -14));
    }
}

TEST_F(CudaEncoderOps, RefusesBadShapes) {
  Tensor x = poisoned({1, 1, 8, 8, 4}, DType::kF32), w = poisoned({4, 1, 3, 3, 5}, DType::kF32),
         b = poisoned({4}, DType::kF32), out = poisoned({1, 1, 6, 6, 4}, DType::kF32);
  EXPECT_EQ(gpu_->conv3d(x, w, b, 1, 1, true, out).code(), ErrorCode::kInvalidArgument);  // channel mismatch
  Tensor pad_out = poisoned({1, 1, 8, 8, 4}, DType::kF32);
  EXPECT_EQ(gpu_->pad_causal_reflect(x, 0, 1, 1, 1, 1, pad_out).code(), ErrorCode::kInvalidArgument);
  Tensor gn_w = poisoned({4}, DType::kF32);
  EXPECT_EQ(gpu_->group_norm_frames(x, gn_w, gn_w, 3, 1e-6f, true, pad_out).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
