// GPU tests of the VAE decoder kernels (src/cuda/ops/vae_ops.h) against the CPU reference (src/ref/vae_ops.h):
// byte for byte (E0) for rms_norm_fp32, layer_norm, scale_add, scale_add_rms_norm_fp32, add, conv1d, conv_transpose1d,
// upsample1d and downsample1d; snake_beta within docs/numerics.md's stated tolerance (the FP32 sine of two libraries).
// Fresh random inputs per run (the seed is printed on failure), outputs poisoned before the run and row padding /
// sentinel tails checked after it, the decoders' real shapes and ragged ones (tile remainders, channel chunks, narrow
// layers, the 64- and 128-position tile paths). Label gpu; skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>

#include "cuda_test_util.h"
#include "ref/cpu_backend.h"
#include "ref/vae_ops.h"
#include "vae/audio_vae.h"

namespace vortex {
namespace {

using cuda_test::Guarded;

class CudaVaeOps : public ::testing::Test {
 protected:
  void SetUp() override {
    VORTEX_REQUIRE_CUDA(gpu_);
    seed_ = cuda_test::fresh_seed();
    rng_.seed(seed_);
    cpu_ = std::make_unique<CpuBackend>(0);
  }
  std::string seed_note() const { return "seed " + std::to_string(seed_) + " (rerun to get fresh inputs)"; }

  // Host f32 [shape]: offset + scale * N(0, 1), with every 97th value scaled by 2^[-20, 20] (dynamic range).
  Tensor random_f32(Shape shape, float scale = 1.0f, float offset = 0.0f) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::uniform_int_distribution<int> e(-20, 20);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      float v = offset + scale * n(rng_);
      if (i % 97 == 13) v = std::ldexp(v, e(rng_));
      p[i] = v;
    }
    return t;
  }
  Tensor random_bf16(Shape shape) { return cuda_test::random_host_bf16(shape, rng_, cuda_test::Fill::kNormal); }
  Guarded guarded(const Tensor& host, int64_t ld) {
    Result<Guarded> g = cuda_test::make_guarded(*gpu_, host.dim(0), host.dim(1), ld, host.dtype(), &host);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return g.ok() ? g.value() : Guarded{};
  }
  Guarded poisoned(int64_t rows, int64_t cols, int64_t ld, DType dtype) {
    Result<Guarded> g = cuda_test::make_guarded(*gpu_, rows, cols, ld, dtype, nullptr);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return g.ok() ? g.value() : Guarded{};
  }
  Tensor upload(const Tensor& host) {
    Result<Tensor> t = gpu_->upload(host);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? t.value() : Tensor{};
  }
  Result<Tensor> read(const Guarded& g, const std::string& what) {
    std::string oob;
    Result<Tensor> got = cuda_test::read_guarded(*gpu_, g, &oob);
    EXPECT_TRUE(oob.empty()) << what << ": " << oob << "; " << seed_note();
    return got;
  }
  void expect_equal(const Tensor& expect, const Guarded& g, const std::string& what) {
    Result<Tensor> got = read(g, what);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const std::string diff = cuda_test::compare_bytes(expect, got.value());
    EXPECT_TRUE(diff.empty()) << what << ": " << diff << seed_note();
  }
  Tensor clone(const Tensor& t) {
    Tensor c = Tensor::empty(t.shape(), t.dtype());
    std::memcpy(c.raw_data(), t.raw_data(), t.nbytes());
    return c;
  }

  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuBackend> cpu_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

struct NormCase {
  int64_t rows, cols, ld;
};
// The video decoder's width (2048) at a tile's token count (1797) and ragged widths/strides.
const std::vector<NormCase> kNormCases = {{1, 1, 1},     {3, 7, 9},        {1797, 2048, 2048},
                                          {5, 300, 304}, {33, 2048, 2056}, {2, 5000, 5000}};

TEST_F(CudaVaeOps, RmsNormFp32MatchesReference) {
  for (const NormCase& c : kNormCases)
    for (DType od : {DType::kF32, DType::kBF16}) {
      const std::string what = "rms_norm_fp32 " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " ld " +
                               std::to_string(c.ld) + " -> " + dtype_short_name(od);
      Tensor x = random_f32({c.rows, c.cols}, 3.0f);
      Tensor w = random_f32({c.cols}, 0.2f, 1.0f);
      Tensor expect = Tensor::empty({c.rows, c.cols}, od);
      ASSERT_OK(cpu_->rms_norm_fp32(x, w, 1e-5f, expect));
      Guarded gx = guarded(x, c.ld);
      Guarded go = poisoned(c.rows, c.cols, c.ld + 3, od);
      Tensor wd = upload(w);
      ASSERT_OK(gpu_->rms_norm_fp32(gx.view, wd, 1e-5f, go.view));
      expect_equal(expect, go, what);
      expect_equal(x, gx, what + " (input untouched)");
    }
}

TEST_F(CudaVaeOps, LayerNormMatchesReference) {
  for (const NormCase& c : kNormCases)
    for (DType od : {DType::kF32, DType::kBF16}) {
      const std::string what =
          "layer_norm " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " -> " + dtype_short_name(od);
      Tensor x = random_f32({c.rows, c.cols}, 2.0f, 0.7f);  // a non-zero mean exercises the centring
      Tensor w = random_f32({c.cols}, 0.2f, 1.0f), b = random_f32({c.cols}, 0.1f);
      Tensor expect = Tensor::empty({c.rows, c.cols}, od);
      ASSERT_OK(cpu_->layer_norm(x, w, b, 1e-5f, expect));
      Guarded gx = guarded(x, c.ld);
      Guarded go = poisoned(c.rows, c.cols, c.ld, od);
      Tensor wd = upload(w), bd = upload(b);
      ASSERT_OK(gpu_->layer_norm(gx.view, wd, bd, 1e-5f, go.view));
      expect_equal(expect, go, what);
    }
}

TEST_F(CudaVaeOps, ScaleAddMatchesReference) {
  for (const NormCase& c : kNormCases)
    for (DType ad : {DType::kBF16, DType::kF32}) {
      const std::string what =
          "scale_add " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " a " + dtype_short_name(ad);
      Tensor x = random_f32({c.rows, c.cols}, 4.0f);
      Tensor a = ad == DType::kBF16 ? random_bf16({c.rows, c.cols}) : random_f32({c.rows, c.cols});
      Tensor s = random_f32({c.cols}, 0.1f);
      Tensor expect = clone(x);
      ASSERT_OK(cpu_->scale_add(expect, a, s));
      Guarded gx = guarded(x, c.ld);
      Guarded ga = guarded(a, c.ld + 1);
      Tensor sd = upload(s);
      ASSERT_OK(gpu_->scale_add(gx.view, ga.view, sd));
      expect_equal(expect, gx, what);
    }
}

// The fused LayerScale residual + RMSNorm against the CPU program (scale_add, then rms_norm_fp32): both outputs,
// the updated stream x and the normed rows, byte for byte.
TEST_F(CudaVaeOps, ScaleAddRmsNormMatchesReference) {
  for (const NormCase& c : kNormCases)
    for (DType ad : {DType::kBF16, DType::kF32})
      for (DType od : {DType::kBF16, DType::kF32}) {
        const std::string what = "scale_add_rms_norm_fp32 " + std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                                 " a " + dtype_short_name(ad) + " -> " + dtype_short_name(od);
        Tensor x = random_f32({c.rows, c.cols}, 4.0f);
        Tensor a = ad == DType::kBF16 ? random_bf16({c.rows, c.cols}) : random_f32({c.rows, c.cols});
        Tensor s = random_f32({c.cols}, 0.1f);
        Tensor w = random_f32({c.cols}, 0.2f, 1.0f);
        Tensor expect_x = clone(x);
        Tensor expect = Tensor::empty({c.rows, c.cols}, od);
        ASSERT_OK(cpu_->scale_add(expect_x, a, s));
        ASSERT_OK(cpu_->rms_norm_fp32(expect_x, w, 1e-5f, expect));
        Guarded gx = guarded(x, c.ld);
        Guarded ga = guarded(a, c.ld + 1);
        Guarded go = poisoned(c.rows, c.cols, c.ld + 3, od);
        Tensor sd = upload(s), wd = upload(w);
        ASSERT_OK(gpu_->scale_add_rms_norm_fp32(gx.view, ga.view, sd, wd, 1e-5f, go.view));
        expect_equal(expect_x, gx, what + " (x)");
        expect_equal(expect, go, what + " (out)");
      }
}

TEST_F(CudaVaeOps, ScaleAddRmsNormRejectsBadArguments) {
  Tensor x = random_f32({4, 64}), a = random_f32({4, 64}), s = random_f32({64}), w = random_f32({64});
  Guarded gx = guarded(x, 64), ga = guarded(a, 64);
  Guarded go = poisoned(4, 64, 64, DType::kBF16);
  Tensor sd = upload(s), wd = upload(w), w_short = upload(random_f32({63}));
  EXPECT_EQ(gpu_->scale_add_rms_norm_fp32(gx.view, ga.view, sd, w_short, 1e-5f, go.view).code(),
            ErrorCode::kInvalidArgument);  // weight width
  EXPECT_EQ(gpu_->scale_add_rms_norm_fp32(gx.view, gx.view, sd, wd, 1e-5f, go.view).code(),
            ErrorCode::kInvalidArgument);  // a aliases x
  EXPECT_EQ(gpu_->scale_add_rms_norm_fp32(gx.view, ga.view, sd, wd, 1e-5f, gx.view).code(),
            ErrorCode::kInvalidArgument);  // out aliases x
  Tensor wide = random_f32({2, 8200}), wide_a = random_f32({2, 8200});
  Guarded gw = guarded(wide, 8200), gwa = guarded(wide_a, 8200);
  Guarded gwo = poisoned(2, 8200, 8200, DType::kF32);
  Tensor ws = upload(random_f32({8200})), ww = upload(random_f32({8200}));
  EXPECT_EQ(gpu_->scale_add_rms_norm_fp32(gw.view, gwa.view, ws, ww, 1e-5f, gwo.view).code(), ErrorCode::kUnsupported);
}

TEST_F(CudaVaeOps, AddMatchesReference) {
  for (const NormCase& c : kNormCases)
    for (float scale : {1.0f, 1.0f / 3.0f}) {
      const std::string what =
          "add " + std::to_string(c.rows) + "x" + std::to_string(c.cols) + " scale " + std::to_string(scale);
      Tensor x = random_f32({c.rows, c.cols}), y = random_f32({c.rows, c.cols});
      Tensor expect = clone(x);
      ASSERT_OK(cpu_->add(expect, y, scale));
      Guarded gx = guarded(x, c.ld), gy = guarded(y, c.ld + 5);
      ASSERT_OK(gpu_->add(gx.view, gy.view, scale));
      expect_equal(expect, gx, what);
    }
}

struct ConvCase {
  int64_t cin, l, cout, k;
  int dilation, padding;
  bool bias;
};
// dec_in_proj (K 1), conv_pre (K 7), AMP convs (K 3/7/11, dilations 1/3/5 with 'same' padding), conv_post
// (Cout 1, no bias); channel counts off the 8-channel staging chunk and the 16/64-channel tiles; long signals
// that take the 128-position tiles (>= 264 tiles).
const std::vector<ConvCase> kConvCases = {
    {32, 50, 64, 1, 1, 0, true},    {48, 37, 80, 7, 1, 3, true},    {24, 300, 24, 11, 5, 25, true},
    {8, 1000, 8, 3, 3, 3, true},    {8, 400, 1, 7, 1, 3, false},    {130, 70, 70, 3, 1, 1, true},
    {16, 34000, 64, 3, 1, 1, true}, {16, 34000, 16, 7, 3, 9, true}, {3, 5, 5, 11, 1, 5, true},
    {64, 207, 128, 7, 1, 3, true},
};

TEST_F(CudaVaeOps, Conv1dMatchesReference) {
  for (const ConvCase& c : kConvCases) {
    const std::string what = "conv1d cin " + std::to_string(c.cin) + " L " + std::to_string(c.l) + " cout " +
                             std::to_string(c.cout) + " K " + std::to_string(c.k) + " d " + std::to_string(c.dilation) +
                             " p " + std::to_string(c.padding);
    const int64_t lout = ref::conv1d_out_length(c.l, c.k, c.dilation, c.padding);
    Tensor x = random_f32({c.cin, c.l});
    Tensor w = random_f32({c.cout, c.cin, c.k}, 1.0f / std::sqrt(static_cast<float>(c.cin * c.k)));
    Tensor b = random_f32({c.cout}, 0.1f);
    Tensor expect = Tensor::empty({c.cout, lout}, DType::kF32);
    ASSERT_OK(cpu_->conv1d(x, w, c.bias ? &b : nullptr, c.dilation, c.padding, expect));
    Guarded gx = guarded(x, c.l + 3);
    Guarded go = poisoned(c.cout, lout, lout + 2, DType::kF32);
    Tensor wd = upload(w), bd = upload(b);
    ASSERT_OK(gpu_->conv1d(gx.view, wd, c.bias ? &bd : nullptr, c.dilation, c.padding, go.view));
    expect_equal(expect, go, what);
  }
}

struct ConvTCase {
  int64_t cin, l, cout, k;
  int stride, padding;
};
// The upsamplers (K 9 / stride 5, K 4 / stride 2, padding (K - s) / 2) and ragged channel counts.
const std::vector<ConvTCase> kConvTCases = {
    {64, 21, 32, 9, 5, 2}, {32, 40, 16, 4, 2, 1},    {7, 13, 5, 4, 2, 1},    {16, 10, 3, 9, 5, 2},
    {5, 1, 3, 4, 2, 1},    {256, 207, 128, 9, 5, 2}, {16, 3000, 8, 4, 2, 1},
};

TEST_F(CudaVaeOps, ConvTranspose1dMatchesReference) {
  for (const ConvTCase& c : kConvTCases) {
    const std::string what = "conv_transpose1d cin " + std::to_string(c.cin) + " L " + std::to_string(c.l) + " cout " +
                             std::to_string(c.cout) + " K " + std::to_string(c.k) + " s " + std::to_string(c.stride);
    const int64_t lout = ref::conv_transpose1d_out_length(c.l, c.k, c.stride, c.padding);
    Tensor x = random_f32({c.cin, c.l});
    Tensor w = random_f32({c.cin, c.cout, c.k}, 1.0f / std::sqrt(static_cast<float>(c.cin)));
    Tensor b = random_f32({c.cout}, 0.1f);
    for (bool with_bias : {true, false}) {
      Tensor expect = Tensor::empty({c.cout, lout}, DType::kF32);
      ASSERT_OK(cpu_->conv_transpose1d(x, w, with_bias ? &b : nullptr, c.stride, c.padding, expect));
      Guarded gx = guarded(x, c.l + 1);
      Guarded go = poisoned(c.cout, lout, lout + 4, DType::kF32);
      Tensor wd = upload(w), bd = upload(b);
      ASSERT_OK(gpu_->conv_transpose1d(gx.view, wd, with_bias ? &bd : nullptr, c.stride, c.padding, go.view));
      expect_equal(expect, go, what + (with_bias ? " bias" : " no bias"));
    }
  }
}

// The video decoder's copy-out: download_async into page-locked memory (alloc_host) is queued behind the work
// on the stream and complete once wait_download returns; into pageable memory it is a synchronous download.
TEST_F(CudaVaeOps, DownloadAsyncIntoPinnedAndPageableMemory) {
  Tensor host = random_f32({257, 1031});
  Tensor dev = upload(host);
  Tensor sum = upload(host);
  ASSERT_OK(gpu_->add(sum, dev, 0.5f));  // queued work the copy must wait for: (x + x) * 0.5 == x in FP32
  auto pinned = gpu_->alloc_host({257, 1031}, DType::kF32);
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  std::memset(pinned->raw_data(), 0xff, pinned->nbytes());  // poison
  auto ticket = gpu_->download_async(sum, *pinned);
  ASSERT_TRUE(ticket.ok()) << ticket.status().to_string();
  EXPECT_NE(*ticket, 0u);  // asynchronous
  ASSERT_OK(gpu_->wait_download(*ticket));
  EXPECT_EQ(std::memcmp(pinned->raw_data(), host.raw_data(), host.nbytes()), 0);
  EXPECT_EQ(gpu_->wait_download(*ticket).code(), ErrorCode::kInvalidArgument);  // used once
  Tensor pageable = Tensor::empty({257, 1031}, DType::kF32);
  std::memset(pageable.raw_data(), 0xff, pageable.nbytes());
  auto sync = gpu_->download_async(dev, pageable);
  ASSERT_TRUE(sync.ok());
  EXPECT_EQ(*sync, 0u);  // the synchronous path
  ASSERT_OK(gpu_->wait_download(*sync));
  EXPECT_EQ(std::memcmp(pageable.raw_data(), host.raw_data(), host.nbytes()), 0);
  Tensor wrong = Tensor::empty({257, 1030}, DType::kF32);
  EXPECT_EQ(gpu_->download_async(dev, wrong).status().code(), ErrorCode::kInvalidArgument);
}

// [B, C, L] stacks (the audio decoder's stereo pair, one launch with grid z = B): byte for byte the CPU reference's
// batched call (itself per-signal calls, tests/ref/vae_ops_test.cpp). snake_beta on [B * C, L] rows: the same bytes
// as the GPU's per-signal calls (one kernel program; row r reads channel r % C).
TEST_F(CudaVaeOps, StereoStacksMatchReference) {
  auto poisoned_3d = [&](Shape shape) {
    Tensor h = Tensor::empty(shape, DType::kF32);
    for (int64_t i = 0; i < h.numel(); ++i) h.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
    return upload(h);
  };
  auto download = [&](const Tensor& d) {
    Tensor h = Tensor::empty(d.shape(), d.dtype());
    EXPECT_TRUE(gpu_->download(d, h).ok());
    return h;
  };
  for (const ConvCase& c : std::vector<ConvCase>{
           {64, 207, 128, 7, 1, 3, true}, {16, 5000, 16, 11, 5, 25, true}, {8, 3000, 1, 7, 1, 3, false}}) {
    const int64_t lout = ref::conv1d_out_length(c.l, c.k, c.dilation, c.padding);
    Tensor x = random_f32({2, c.cin, c.l});
    Tensor w = random_f32({c.cout, c.cin, c.k}, 1.0f / std::sqrt(static_cast<float>(c.cin * c.k)));
    Tensor b = random_f32({c.cout}, 0.1f);
    Tensor expect = Tensor::empty({2, c.cout, lout}, DType::kF32);
    ASSERT_OK(cpu_->conv1d(x, w, c.bias ? &b : nullptr, c.dilation, c.padding, expect));
    Tensor xd = upload(x), wd = upload(w), bd = upload(b), od = poisoned_3d({2, c.cout, lout});
    ASSERT_OK(gpu_->conv1d(xd, wd, c.bias ? &bd : nullptr, c.dilation, c.padding, od));
    const std::string diff = cuda_test::compare_bytes(expect, download(od));
    EXPECT_TRUE(diff.empty()) << "stacked conv1d cin " << c.cin << " L " << c.l << ": " << diff << seed_note();
  }
  for (const ConvTCase& c : std::vector<ConvTCase>{{256, 207, 128, 9, 5, 2}, {16, 3000, 8, 4, 2, 1}}) {
    const int64_t lout = ref::conv_transpose1d_out_length(c.l, c.k, c.stride, c.padding);
    Tensor x = random_f32({2, c.cin, c.l});
    Tensor w = random_f32({c.cin, c.cout, c.k}, 1.0f / std::sqrt(static_cast<float>(c.cin)));
    Tensor b = random_f32({c.cout}, 0.1f);
    Tensor expect = Tensor::empty({2, c.cout, lout}, DType::kF32);
    ASSERT_OK(cpu_->conv_transpose1d(x, w, &b, c.stride, c.padding, expect));
    Tensor xd = upload(x), wd = upload(w), bd = upload(b), od = poisoned_3d({2, c.cout, lout});
    ASSERT_OK(gpu_->conv_transpose1d(xd, wd, &bd, c.stride, c.padding, od));
    const std::string diff = cuda_test::compare_bytes(expect, download(od));
    EXPECT_TRUE(diff.empty()) << "stacked conv_transpose1d cin " << c.cin << ": " << diff << seed_note();
  }
  {
    const int64_t ch = 24, l = 4001;
    Tensor x = random_f32({2 * ch, l}, 3.0f), alpha = random_f32({ch}, 0.5f), beta = random_f32({ch}, 0.5f);
    Tensor ad = upload(alpha), bd = upload(beta);
    Tensor stacked = upload(x);
    ASSERT_OK(gpu_->snake_beta(stacked, ad, bd));
    const Tensor got = download(stacked);
    for (int64_t i = 0; i < 2; ++i) {
      Tensor xi = Tensor::empty({ch, l}, DType::kF32);
      std::memcpy(xi.raw_data(), x.data<float>() + i * ch * l, xi.nbytes());
      Tensor di = upload(xi);
      ASSERT_OK(gpu_->snake_beta(di, ad, bd));
      const Tensor want = download(di);
      EXPECT_EQ(std::memcmp(want.raw_data(), got.data<float>() + i * ch * l, want.nbytes()), 0)
          << "stacked snake_beta signal " << i << "; " << seed_note();
    }
    Tensor odd = upload(random_f32({ch + 1, l}));
    EXPECT_EQ(gpu_->snake_beta(odd, ad, bd).code(), ErrorCode::kInvalidArgument);
  }
  // A stack whose out holds another batch is refused before any launch.
  Tensor x = upload(random_f32({2, 4, 10})), w = upload(random_f32({3, 4, 3})), o = poisoned_3d({1, 3, 10});
  EXPECT_EQ(gpu_->conv1d(x, w, nullptr, 1, 1, o).code(), ErrorCode::kInvalidArgument);
}

// CUDA's sinf (<= 2 ulp) and the host's (<= 1 ulp) differ by at most 3 ulps of the sine: docs/numerics.md allows
// a differing element only if it is within 2^-19 of max(|y|, 1/b) (the sine's difference, and a one-ulp change of
// a or b from the FP64 exps, propagated through the FP32 steps).
TEST_F(CudaVaeOps, SnakeBetaWithinStatedTolerance) {
  int64_t total = 0, differing = 0;
  for (const NormCase& c : std::vector<NormCase>{{1, 1, 1}, {3, 1000, 1003}, {512, 2070, 2070}, {8, 331200, 331200}}) {
    const std::string what = "snake_beta " + std::to_string(c.rows) + "x" + std::to_string(c.cols);
    Tensor x = random_f32({c.rows, c.cols}, 3.0f);
    Tensor alpha = random_f32({c.rows}, 0.5f), beta = random_f32({c.rows}, 0.5f);
    Tensor expect = clone(x);
    ASSERT_OK(cpu_->snake_beta(expect, alpha, beta));
    Guarded gx = guarded(x, c.ld);
    Tensor ad = upload(alpha), bd = upload(beta);
    ASSERT_OK(gpu_->snake_beta(gx.view, ad, bd));
    Result<Tensor> got = read(gx, what);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    for (int64_t r = 0; r < c.rows; ++r) {
      const double inv_b = 1.0 / (std::exp(static_cast<double>(beta.data<float>()[r])) + 1e-9);
      for (int64_t i = 0; i < c.cols; ++i) {
        const float e = expect.data<float>()[r * c.cols + i], g = got->data<float>()[r * c.cols + i];
        ++total;
        if (std::memcmp(&e, &g, sizeof(float)) == 0) continue;
        // sin of an overflowed exp(alpha) * x is NaN on both sides; the sign of a NaN is not part of the program.
        if (std::isnan(e) && std::isnan(g)) continue;
        ++differing;
        const double bound = std::ldexp(std::max(std::fabs(static_cast<double>(e)), inv_b), -19);
        ASSERT_LE(std::fabs(static_cast<double>(e) - static_cast<double>(g)), bound)
            << what << " [" << r << ", " << i << "] x " << x.data<float>()[r * c.cols + i] << ": expect " << e
            << " got " << g << "; " << seed_note();
      }
    }
  }
  std::cout << "snake_beta: " << differing << " of " << total << " elements differ from the CPU reference\n";
  EXPECT_GT(total, 0);
}

TEST_F(CudaVaeOps, ResamplersMatchReference) {
  const std::vector<float> kaiser = kaiser_sinc_filter(0.25, 0.3, 12);
  Tensor kf = Tensor::empty({12}, DType::kF32);
  std::memcpy(kf.raw_data(), kaiser.data(), kaiser.size() * sizeof(float));
  struct Case {
    int64_t c, l, k;
    int ratio;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 12, 2},
                                         {3, 2, 12, 2},
                                         {5, 37, 12, 2},
                                         {16, 1000, 12, 2},
                                         {4, 101, 11, 2},
                                         {2, 50, 12, 3},
                                         {512, 1035, 12, 2},
                                         {8, 165600, 12, 2}}) {
    const std::string what = "C " + std::to_string(c.c) + " L " + std::to_string(c.l) + " K " + std::to_string(c.k) +
                             " ratio " + std::to_string(c.ratio);
    Tensor f = c.k == 12 && c.ratio == 2 ? kf : random_f32({c.k}, 0.3f);
    Tensor fd = upload(f);
    Tensor x = random_f32({c.c, c.l});
    Tensor up = Tensor::empty({c.c, c.l * c.ratio}, DType::kF32);
    ASSERT_OK(cpu_->upsample1d(x, f, c.ratio, up));
    Guarded gx = guarded(x, c.l + 2);
    Guarded gu = poisoned(c.c, c.l * c.ratio, c.l * c.ratio + 1, DType::kF32);
    ASSERT_OK(gpu_->upsample1d(gx.view, fd, c.ratio, gu.view));
    expect_equal(up, gu, "upsample1d " + what);
    const int64_t ld = (c.l - 1) / c.ratio + 1;
    Tensor down = Tensor::empty({c.c, ld}, DType::kF32);
    ASSERT_OK(cpu_->downsample1d(x, f, c.ratio, down));
    Guarded gd = poisoned(c.c, ld, ld + 3, DType::kF32);
    ASSERT_OK(gpu_->downsample1d(gx.view, fd, c.ratio, gd.view));
    expect_equal(down, gd, "downsample1d " + what);
  }
}

TEST_F(CudaVaeOps, BadArgumentsAreRejected) {
  Tensor x = upload(random_f32({4, 16}));
  Tensor w = upload(random_f32({4, 5, 3}));  // Cin 5 != 4
  Tensor out = upload(random_f32({4, 16}));
  Status s = gpu_->conv1d(x, w, nullptr, 1, 1, out);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  Tensor w2 = upload(random_f32({4, 4, 3}));
  Status alias = gpu_->conv1d(x, w2, nullptr, 1, 1, x);  // out == x
  EXPECT_EQ(alias.code(), ErrorCode::kInvalidArgument) << alias.to_string();
  Tensor host = random_f32({4, 16});
  Tensor wd = upload(random_f32({16}));
  Tensor od = upload(random_f32({4, 16}));
  EXPECT_EQ(gpu_->rms_norm_fp32(host, wd, 1e-5f, od).code(), ErrorCode::kInvalidArgument);  // host x
  Tensor bad_filter = upload(random_f32({1}));
  Tensor up = upload(random_f32({4, 32}));
  EXPECT_EQ(gpu_->upsample1d(x, bad_filter, 2, up).code(), ErrorCode::kInvalidArgument);  // fewer taps than ratio
}

}  // namespace
}  // namespace vortex
