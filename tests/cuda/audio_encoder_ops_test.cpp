// GPU tests of the audio VAE encoder's kernels (src/cuda/ops/audio_encoder_ops.h) against their CPU programs
// (src/ref/vae_ops.h): conv1d_strided and layer_norm_channels byte for byte (E0); snake, gelu_tanh_mul and
// pooled_causal_attention within the stated tolerance (libdevice's FP64 sin / tanh / exp against the host libm's:
// an element may differ by at most 2^-20 relative, and at most 1 in 10^4 elements (1 in 10^3 for the attention,
// whose exp feeds every output of a position) may differ at all). Fresh random inputs per run (the seed is printed on
// failure), outputs poisoned before the run and sentinel tails checked after it, the released encoder's shapes
// (kernel 2s strides 2/4/5, head width 256 into 32 channels) and ragged ones; invalid arguments are refused.
// Label gpu; skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "cuda_test_util.h"
#include "ref/cpu_backend.h"
#include "ref/vae_ops.h"

namespace vortex {
namespace {

using cuda_test::Guarded;

class CudaAudioEncoderOps : public ::testing::Test {
 protected:
  void SetUp() override {
    VORTEX_REQUIRE_CUDA(gpu_);
    seed_ = cuda_test::fresh_seed();
    rng_.seed(seed_);
    cpu_ = std::make_unique<CpuBackend>(0);
  }
  std::string seed_note() const { return "seed " + std::to_string(seed_) + " (rerun to get fresh inputs)"; }

  Tensor random_f32(Shape shape, float scale = 1.0f) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * n(rng_);
    return t;
  }
  Tensor upload(const Tensor& host) {
    Result<Tensor> t = gpu_->upload(host);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? t.value() : Tensor{};
  }
  // A poisoned device output of `shape` with a sentinel tail; init (host, contiguous) fills it when given.
  Guarded guarded(const Shape& shape, const Tensor* init = nullptr) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Tensor flat;
    if (init) flat = init->reshape({1, n}).value();
    Result<Guarded> g = cuda_test::make_guarded(*gpu_, 1, n, n, DType::kF32, init ? &flat : nullptr);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return Guarded{};
    Guarded out = g.value();
    out.view = out.view.reshape(shape).value();
    return out;
  }
  // The output as host [shape] after checking the sentinel tail.
  Tensor read(const Guarded& g, const Shape& shape, const std::string& what) {
    std::string oob;
    Result<Tensor> got = cuda_test::read_guarded(*gpu_, g, &oob);  // the whole buffer: [1, n] and the tail
    EXPECT_TRUE(oob.empty()) << what << ": " << oob << "; " << seed_note();
    EXPECT_TRUE(got.ok()) << got.status().to_string();
    return got.ok() ? got->reshape(shape).value() : Tensor{};
  }
  Tensor clone(const Tensor& t) {
    Tensor c = Tensor::empty(t.shape(), t.dtype());
    std::memcpy(c.raw_data(), t.raw_data(), t.nbytes());
    return c;
  }
  void expect_equal(const Tensor& expect, const Tensor& got, const std::string& what) {
    const std::string diff = cuda_test::compare_bytes(expect, got);
    EXPECT_TRUE(diff.empty()) << what << ": " << diff << seed_note();
  }
  // Differences of at most 2^-20 relative (to max(|e|, `scale`)) in at most total / per elements.
  void expect_close(const Tensor& expect, const Tensor& got, double scale, int64_t per, const std::string& what,
                    int64_t* differing_out = nullptr) {
    ASSERT_EQ(expect.numel(), got.numel()) << what;
    int64_t differing = 0;
    for (int64_t i = 0; i < expect.numel(); ++i) {
      const float e = expect.data<float>()[i], g = got.data<float>()[i];
      if (std::memcmp(&e, &g, sizeof(float)) == 0) continue;
      ++differing;
      const double bound = std::ldexp(std::max(std::fabs(static_cast<double>(e)), scale), -20);
      ASSERT_LE(std::fabs(static_cast<double>(e) - g), bound)
          << what << " [" << i << "]: expect " << e << " got " << g << "; " << seed_note();
    }
    std::cout << what << ": " << differing << " of " << expect.numel() << " elements differ from the CPU program\n";
    EXPECT_LE(differing, std::max<int64_t>(1, expect.numel() / per)) << what << "; " << seed_note();
    if (differing_out) *differing_out += differing;
  }

  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuBackend> cpu_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST_F(CudaAudioEncoderOps, Conv1dStridedMatchesReference) {
  struct Case {
    int64_t b, cin, cout, l, k;
    int stride, dilation, padding;
  };
  // The released downsampling convs (k = 2s, padding ceil(s / 2)), an odd stride, dilation, ragged tails.
  for (const Case& c : std::vector<Case>{{2, 64, 128, 4000, 4, 2, 1, 1},
                                         {2, 128, 256, 2000, 8, 4, 1, 2},
                                         {1, 16, 32, 1003, 10, 5, 1, 3},
                                         {3, 5, 7, 37, 3, 3, 2, 4},
                                         {1, 1, 1, 1, 1, 1, 1, 0},
                                         {2, 8, 300, 517, 5, 2, 3, 0}}) {
    const std::string what = "conv1d_strided b" + std::to_string(c.b) + " " + std::to_string(c.cin) + "->" +
                             std::to_string(c.cout) + " l" + std::to_string(c.l) + " k" + std::to_string(c.k) + " s" +
                             std::to_string(c.stride);
    const int64_t lout = ref::conv1d_strided_out_length(c.l, c.k, c.stride, c.dilation, c.padding);
    Tensor x = random_f32({c.b, c.cin, c.l}), w = random_f32({c.cout, c.cin, c.k}, 0.3f), b = random_f32({c.cout});
    Tensor expect = Tensor::empty({c.b, c.cout, lout}, DType::kF32);
    ASSERT_OK(cpu_->conv1d_strided(x, w, b, c.stride, c.dilation, c.padding, expect));
    Tensor xd = upload(x), wd = upload(w), bd = upload(b);
    Guarded o = guarded({c.b, c.cout, lout});
    ASSERT_OK(gpu_->conv1d_strided(xd, wd, bd, c.stride, c.dilation, c.padding, o.view));
    expect_equal(expect, read(o, {c.b, c.cout, lout}, what), what);
  }
  Tensor x = upload(random_f32({1, 4, 10})), w = upload(random_f32({4, 4, 3})), b = upload(random_f32({4}));
  Guarded o = guarded({1, 4, 4});  // stride 2: (10 - 2 - 1) / 2 + 1 = 4 positions
  ASSERT_OK(gpu_->conv1d_strided(x, w, b, 2, 1, 0, o.view));
  EXPECT_EQ(gpu_->conv1d_strided(x, w, b, 0, 1, 0, o.view).code(), ErrorCode::kInvalidArgument);  // stride 0
  EXPECT_EQ(gpu_->conv1d_strided(x, w, b, 3, 1, 0, o.view).code(), ErrorCode::kInvalidArgument);  // 3 positions
  Tensor w5 = upload(random_f32({4, 5, 3}));
  EXPECT_EQ(gpu_->conv1d_strided(x, w5, b, 2, 1, 0, o.view).code(), ErrorCode::kInvalidArgument);  // channels
  Tensor w1 = upload(random_f32({4, 4, 1}));
  EXPECT_EQ(gpu_->conv1d_strided(x, w1, b, 1, 1, 0, x).code(), ErrorCode::kInvalidArgument);  // out overlaps x
}

TEST_F(CudaAudioEncoderOps, LayerNormChannelsMatchesReference) {
  struct Case {
    int64_t b, d, l;
  };
  for (const Case& c : std::vector<Case>{{2, 2048, 40}, {2, 32, 601}, {1, 12, 1}, {3, 7, 257}}) {
    const std::string what =
        "layer_norm_channels " + std::to_string(c.b) + "x" + std::to_string(c.d) + "x" + std::to_string(c.l);
    Tensor x = random_f32({c.b, c.d, c.l}, 2.0f), w = random_f32({c.d}), bias = random_f32({c.d});
    for (int64_t i = 0; i < x.numel(); i += 7) x.data<float>()[i] += 3.0f;  // a mean away from zero
    Tensor expect = Tensor::empty({c.b, c.d, c.l}, DType::kF32);
    ASSERT_OK(cpu_->layer_norm_channels(x, w, bias, 1e-5, expect));
    Tensor xd = upload(x), wd = upload(w), bd = upload(bias);
    Guarded o = guarded({c.b, c.d, c.l});
    ASSERT_OK(gpu_->layer_norm_channels(xd, wd, bd, 1e-5, o.view));
    expect_equal(expect, read(o, {c.b, c.d, c.l}, what), what);
    Guarded inplace = guarded({c.b, c.d, c.l}, &x);  // out == x
    ASSERT_OK(gpu_->layer_norm_channels(inplace.view, wd, bd, 1e-5, inplace.view));
    expect_equal(expect, read(inplace, {c.b, c.d, c.l}, what + " in place"), what + " in place");
  }
  Tensor x = upload(random_f32({1, 4, 3})), w = upload(random_f32({5})), b = upload(random_f32({4}));
  Guarded o = guarded({1, 4, 3});
  EXPECT_EQ(gpu_->layer_norm_channels(x, w, b, 1e-5, o.view).code(), ErrorCode::kInvalidArgument);
}

TEST_F(CudaAudioEncoderOps, SnakeWithinStatedTolerance) {
  struct Case {
    int64_t rows, cols, channels;
  };
  for (const Case& c : std::vector<Case>{{128, 4000, 64}, {2 * 1024, 75, 1024}, {3, 1001, 3}, {1, 1, 1}}) {
    const std::string what = "snake " + std::to_string(c.rows) + "x" + std::to_string(c.cols);
    Tensor x = random_f32({c.rows, c.cols}, 3.0f), alpha = random_f32({c.channels}, 1.0f);
    for (int64_t i = 0; i < c.channels; ++i) alpha.data<float>()[i] = std::fabs(alpha.data<float>()[i]) + 0.05f;
    Tensor expect = clone(x);
    ASSERT_OK(cpu_->snake(expect, alpha));
    Tensor ad = upload(alpha);
    Guarded g = guarded({c.rows, c.cols}, &x);
    ASSERT_OK(gpu_->snake(g.view, ad));
    // The added term is at most 1 / alpha: the scale of an element's error.
    expect_close(expect, read(g, {c.rows, c.cols}, what), 1.0 / 0.05, 10000, what);
  }
  Tensor x = upload(random_f32({5, 3})), alpha = upload(random_f32({2}));
  EXPECT_EQ(gpu_->snake(x, alpha).code(), ErrorCode::kInvalidArgument);  // 5 rows of 2 channels
}

TEST_F(CudaAudioEncoderOps, GeluTanhMulWithinStatedTolerance) {
  for (const Shape& shape : std::vector<Shape>{{2, 64, 600}, {1, 16, 7}, {1, 1, 1}}) {
    const std::string what = "gelu_tanh_mul " + std::to_string(shape[1]) + "x" + std::to_string(shape[2]);
    Tensor a = random_f32(shape, 3.0f), g = random_f32(shape);
    Tensor expect = Tensor::empty(shape, DType::kF32);
    ASSERT_OK(cpu_->gelu_tanh_mul(a, g, expect));
    Tensor ad = upload(a), gd = upload(g);
    Guarded o = guarded(shape);
    ASSERT_OK(gpu_->gelu_tanh_mul(ad, gd, o.view));
    expect_close(expect, read(o, shape, what), 1e-30, 10000, what);
    Guarded inplace = guarded(shape, &a);  // out == a
    ASSERT_OK(gpu_->gelu_tanh_mul(inplace.view, gd, inplace.view));
    expect_close(expect, read(inplace, shape, what + " in place"), 1e-30, 10000, what + " in place");
  }
  Tensor a = upload(random_f32({1, 2, 3})), g = upload(random_f32({1, 3, 2}));
  Guarded o = guarded({1, 2, 3});
  EXPECT_EQ(gpu_->gelu_tanh_mul(a, g, o.view).code(), ErrorCode::kInvalidArgument);
}

TEST_F(CudaAudioEncoderOps, PooledCausalAttentionWithinStatedTolerance) {
  struct Case {
    int64_t b, d, t, c;
    int heads;
  };
  // The released pre_block (2048 wide, 8 heads of 256 into 32), a head width that does not divide evenly into the
  // channels (overlapping bins), more positions than threads, one position.
  for (const Case& c : std::vector<Case>{
           {2, 2048, 150, 32, 8}, {2, 96, 25, 8, 8}, {1, 64, 300, 5, 2}, {1, 4, 1, 4, 1}, {3, 600, 33, 7, 3}}) {
    const std::string what = "pooled_causal_attention b" + std::to_string(c.b) + " d" + std::to_string(c.d) + " t" +
                             std::to_string(c.t) + " heads" + std::to_string(c.heads) + " c" + std::to_string(c.c);
    Tensor qkv = random_f32({c.b, 3 * c.d, c.t}, 1.0f);
    Tensor expect = Tensor::empty({c.b, c.c, c.t}, DType::kF32);
    ASSERT_OK(cpu_->pooled_causal_attention(qkv, c.heads, expect));
    Tensor qd = upload(qkv);
    Guarded o = guarded({c.b, c.c, c.t});
    ASSERT_OK(gpu_->pooled_causal_attention(qd, c.heads, o.view));
    expect_close(expect, read(o, {c.b, c.c, c.t}, what), 1e-3, 1000, what);
  }
  Tensor qkv = upload(random_f32({1, 3 * 10, 4}));
  Guarded o = guarded({1, 2, 4});
  EXPECT_EQ(gpu_->pooled_causal_attention(qkv, 3, o.view).code(), ErrorCode::kInvalidArgument);  // 10 % 3
  Guarded wrong_t = guarded({1, 2, 5});
  EXPECT_EQ(gpu_->pooled_causal_attention(qkv, 2, wrong_t.view).code(), ErrorCode::kInvalidArgument);
  Tensor long_qkv = upload(random_f32({1, 3 * 2, 7000}));
  Guarded long_out = guarded({1, 2, 7000});
  EXPECT_EQ(gpu_->pooled_causal_attention(long_qkv, 1, long_out.view).code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace vortex
