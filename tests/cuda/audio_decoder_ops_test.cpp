// GPU tests of the audio decoder's FP32 kernels (src/cuda/ops/audio_decoder_ops.h) against the CPU reference
// (src/ref/vae_ops.h): conv1d_fp32 byte for byte (E0: the same FP32 FMA chain per output) at the decoder's layer
// shapes and ragged ones through the tile conv1d_fp32 picks (32 x 256, 16 x 256, 8 x 512, 1 x 1024) and with every tile
// forced, 2-D row views with padded strides and [2, C, L] stereo stacks; activation1d byte for byte the three single-op
// kernels (upsample1d, snake_beta, downsample1d) and within snake_beta's stated tolerance (FP32 sinf of two
// libraries) carried through the low-pass filter of the CPU reference; every conv1d_fp32 register tile forced, and
// the FP32 transposed convolution (phase convolutions on the same kernel) byte for byte. Fresh random inputs per run
// (the seed is printed on failure), outputs poisoned before the run and row padding / sentinel tails checked after it;
// bad arguments refused before any launch. Label gpu; skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>

#include "cuda/ops/audio_decoder_ops.h"
#include "cuda_test_util.h"
#include "ref/cpu_backend.h"
#include "ref/vae_ops.h"
#include "vae/audio_vae.h"

namespace vortex {
namespace {

using cuda_test::Guarded;

struct ConvCase {
  int64_t batch, cin, l, cout, k;
  int dilation, padding;
  bool bias;
};

class CudaAudioDecoderOps : public ::testing::Test {
 protected:
  void SetUp() override {
    VORTEX_REQUIRE_CUDA(gpu_);
    seed_ = cuda_test::fresh_seed();
    rng_.seed(seed_);
    cpu_ = std::make_unique<CpuBackend>(0);
  }
  std::string seed_note() const { return "; seed " + std::to_string(seed_) + " (rerun to get fresh inputs)"; }
  // Host f32: scale * N(0, 1), with `dynamic_range` every 97th value scaled by 2^[-20, 20]. SnakeBeta's log-space
  // alpha / beta take plain normals: exp(2^20 * 0.3) overflows, and sin(inf) is a NaN on both sides.
  Tensor random_f32(Shape shape, float scale = 1.0f, bool dynamic_range = true) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::uniform_int_distribution<int> e(-20, 20);
    for (int64_t i = 0; i < t.numel(); ++i) {
      float v = scale * n(rng_);
      if (dynamic_range && i % 97 == 13) v = std::ldexp(v, e(rng_));
      t.data<float>()[i] = v;
    }
    return t;
  }
  Tensor upload(const Tensor& host) {
    Result<Tensor> t = gpu_->upload(host);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? t.value() : Tensor{};
  }
  Tensor download(const Tensor& d) {
    Tensor h = Tensor::empty(d.shape(), d.dtype());
    Status s = gpu_->download(d, h);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return h;
  }
  Tensor poisoned_3d(Shape shape) {
    Tensor h = Tensor::empty(shape, DType::kF32);
    for (int64_t i = 0; i < h.numel(); ++i) h.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
    return upload(h);
  }

  // Fresh host operands of a conv1d_fp32 case ([B, Cin, L] signal, [Cout, Cin, K] weights, [Cout] bias) and the CPU
  // reference's output [B, Cout, Lout].
  struct ConvOperands {
    Tensor x, w, b, expect;
    int64_t lout = 0;
  };
  ConvOperands conv_operands(const ConvCase& c) {
    ConvOperands o;
    o.lout = ref::conv1d_out_length(c.l, c.k, c.dilation, c.padding);
    o.x = random_f32({c.batch, c.cin, c.l});
    o.w = random_f32({c.cout, c.cin, c.k}, 1.0f / std::sqrt(static_cast<float>(c.cin * c.k)));
    o.b = random_f32({c.cout}, 0.1f);
    o.expect = Tensor::empty({c.batch, c.cout, o.lout}, DType::kF32);
    const Status s = cpu_->conv1d_fp32(o.x, o.w, c.bias ? &o.b : nullptr, c.dilation, c.padding, o.expect);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return o;
  }

  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuBackend> cpu_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// The decoder's layers at reduced length (dec_in_proj K 1, conv_pre K 7, AMP convs K 3/7/11 with dilations 1/3/5,
// conv_post Cout 1 without bias) and widths that pick each automatic tile: Cout >= 32 with a grid of two waves
// (32 x 256), Cout >= 16 otherwise (16 x 256), 2..15 (8 x 512) and 1 (1 x 1024); ragged channel counts off the tiles
// and the staging chunk.
const std::vector<ConvCase> kCases = {
    {2, 32, 207, 2048, 1, 1, 0, true}, {2, 512, 207, 1024, 7, 1, 3, true}, {2, 64, 20000, 128, 3, 1, 1, true},
    {2, 130, 300, 200, 7, 3, 9, true}, {2, 48, 1000, 64, 11, 5, 25, true}, {2, 32, 2000, 40, 7, 3, 9, true},
    {2, 16, 3000, 20, 3, 1, 1, true},  {2, 8, 5000, 8, 11, 5, 25, true},   {2, 8, 4000, 1, 7, 1, 3, false},
    {1, 3, 5, 5, 11, 1, 5, true},      {1, 17, 700, 3, 11, 5, 25, true},   {2, 256, 1035, 256, 11, 5, 25, true},
};

TEST_F(CudaAudioDecoderOps, Conv1dFp32MatchesReference) {
  for (const ConvCase& c : kCases) {
    const std::string what = "conv1d_fp32 B " + std::to_string(c.batch) + " cin " + std::to_string(c.cin) + " L " +
                             std::to_string(c.l) + " cout " + std::to_string(c.cout) + " K " + std::to_string(c.k) +
                             " d " + std::to_string(c.dilation);
    const ConvOperands op = conv_operands(c);
    const Tensor &x = op.x, &w = op.w, &b = op.b, &expect = op.expect;
    const int64_t lout = op.lout;
    Tensor xd = upload(x), wd = upload(w), bd = upload(b), od = poisoned_3d({c.batch, c.cout, lout});
    ASSERT_OK(gpu_->conv1d_fp32(xd, wd, c.bias ? &bd : nullptr, c.dilation, c.padding, od));
    ASSERT_OK(gpu_->synchronize());
    const std::string diff = cuda_test::compare_bytes(expect, download(od));
    EXPECT_TRUE(diff.empty()) << what << ": " << diff << seed_note();
  }
}

const std::vector<cuda_ops::Conv1dTile> kTiles = {cuda_ops::Conv1dTile::k128x128, cuda_ops::Conv1dTile::k128x64,
                                                  cuda_ops::Conv1dTile::k64x128,  cuda_ops::Conv1dTile::k64x64,
                                                  cuda_ops::Conv1dTile::k32x256,  cuda_ops::Conv1dTile::k16x256,
                                                  cuda_ops::Conv1dTile::k8x512,   cuda_ops::Conv1dTile::k1x1024};

// Every register tile, forced, on shapes ragged against all of them (Cout off the tile rows, positions off the
// tile columns, channel counts off the staging chunk): the same bytes as the CPU reference (the tile is speed only).
TEST_F(CudaAudioDecoderOps, Conv1dFp32EveryTileMatchesReference) {
  for (const ConvCase& c : std::vector<ConvCase>{
           {2, 37, 301, 133, 11, 5, 25, true}, {2, 64, 1035, 70, 3, 3, 3, false}, {1, 19, 129, 9, 7, 1, 3, true}}) {
    const ConvOperands op = conv_operands(c);
    const Tensor &x = op.x, &w = op.w, &b = op.b, &expect = op.expect;
    const int64_t lout = op.lout;
    Tensor xd = upload(x), wd = upload(w), bd = upload(b);
    for (cuda_ops::Conv1dTile tile : kTiles) {
      Tensor od = poisoned_3d({c.batch, c.cout, lout});
      ASSERT_OK(cuda_ops::conv1d_fp32(xd, wd, c.bias ? &bd : nullptr, c.dilation, c.padding, od, gpu_->stream(), tile));
      ASSERT_OK(gpu_->synchronize());
      const std::string diff = cuda_test::compare_bytes(expect, download(od));
      EXPECT_TRUE(diff.empty()) << "tile " << cuda_ops::conv1d_tile_name(tile) << " cin " << c.cin << " cout " << c.cout
                                << ": " << diff << seed_note();
    }
  }
}

// The FP32 transposed convolution on conv1d_fp32's kernel (stride phase convolutions): every tile forced, the
// upsamplers' (K, stride, padding) and ragged ones, [2, C, L] stacks; the CPU reference's bytes.
TEST_F(CudaAudioDecoderOps, ConvTranspose1dEveryTileMatchesReference) {
  struct Case {
    int64_t cin, l, cout, k;
    int stride, padding;
  };
  for (const Case& c : std::vector<Case>{{40, 53, 70, 9, 5, 2}, {33, 130, 17, 4, 2, 1}, {6, 9, 5, 7, 3, 4}}) {
    const int64_t lout = ref::conv_transpose1d_out_length(c.l, c.k, c.stride, c.padding);
    Tensor x = random_f32({2, c.cin, c.l});
    Tensor w = random_f32({c.cin, c.cout, c.k}, 1.0f / std::sqrt(static_cast<float>(c.cin)));
    Tensor b = random_f32({c.cout}, 0.1f);
    Tensor expect = Tensor::empty({2, c.cout, lout}, DType::kF32);
    ASSERT_OK(cpu_->conv_transpose1d(x, w, &b, c.stride, c.padding, expect));
    Tensor xd = upload(x), wd = upload(w), bd = upload(b);
    for (cuda_ops::Conv1dTile tile : kTiles) {
      Tensor od = poisoned_3d({2, c.cout, lout});
      cuda_ops::ConvTransposeLaunch a{};
      a.x = xd.data<float>(), a.w = wd.data<float>(), a.bias = bd.data<float>(), a.out = od.data<float>();
      a.ldx = c.l, a.ldo = lout, a.x_batch_stride = c.cin * c.l, a.out_batch_stride = c.cout * lout;
      a.batch = 2, a.cin = static_cast<int>(c.cin), a.l = static_cast<int>(c.l), a.cout = static_cast<int>(c.cout);
      a.k = static_cast<int>(c.k), a.stride = c.stride, a.padding = c.padding, a.lout = static_cast<int>(lout);
      ASSERT_OK(cuda_ops::conv_transpose1d_fp32_launch(a, gpu_->stream(), tile));
      ASSERT_OK(gpu_->synchronize());
      const std::string diff = cuda_test::compare_bytes(expect, download(od));
      EXPECT_TRUE(diff.empty()) << "tile " << cuda_ops::conv1d_tile_name(tile) << " K " << c.k << " s " << c.stride
                                << ": " << diff << seed_note();
    }
    // The validating entry point (its tile by Cout and grid size) on the same operands.
    Tensor od = poisoned_3d({2, c.cout, lout});
    ASSERT_OK(gpu_->conv_transpose1d(xd, wd, &bd, c.stride, c.padding, od));
    ASSERT_OK(gpu_->synchronize());
    const std::string diff = cuda_test::compare_bytes(expect, download(od));
    EXPECT_TRUE(diff.empty()) << "conv_transpose1d K " << c.k << ": " << diff << seed_note();
  }
}

// The AMP block's residual convolution on the GPU: the CPU reference's bytes out of place and in place
// (residual == out), at a decoder stage shape and a ragged one; a residual overlapping x is refused.
TEST_F(CudaAudioDecoderOps, Conv1dFp32ResidualMatchesReferenceInAndOutOfPlace) {
  for (const ConvCase& c :
       std::vector<ConvCase>{{2, 256, 1035, 256, 11, 5, 25, true}, {2, 20, 333, 20, 3, 3, 3, true}}) {
    const int64_t lout = ref::conv1d_out_length(c.l, c.k, c.dilation, c.padding);
    Tensor x = random_f32({c.batch, c.cin, c.l});
    Tensor w = random_f32({c.cout, c.cin, c.k}, 1.0f / std::sqrt(static_cast<float>(c.cin * c.k)));
    Tensor b = random_f32({c.cout}, 0.1f), res = random_f32({c.batch, c.cout, lout});
    Tensor expect = Tensor::empty({c.batch, c.cout, lout}, DType::kF32);
    ASSERT_OK(cpu_->conv1d_fp32_residual(x, w, &b, c.dilation, c.padding, res, expect));
    Tensor xd = upload(x), wd = upload(w), bd = upload(b), rd = upload(res);
    Tensor od = poisoned_3d({c.batch, c.cout, lout});
    ASSERT_OK(gpu_->conv1d_fp32_residual(xd, wd, &bd, c.dilation, c.padding, rd, od));
    ASSERT_OK(gpu_->synchronize());
    std::string diff = cuda_test::compare_bytes(expect, download(od));
    EXPECT_TRUE(diff.empty()) << "out of place cin " << c.cin << ": " << diff << seed_note();
    ASSERT_OK(gpu_->conv1d_fp32_residual(xd, wd, &bd, c.dilation, c.padding, rd, rd));  // in place
    ASSERT_OK(gpu_->synchronize());
    diff = cuda_test::compare_bytes(expect, download(rd));
    EXPECT_TRUE(diff.empty()) << "in place cin " << c.cin << ": " << diff << seed_note();
    if (c.cin == c.cout && lout == c.l) {
      EXPECT_EQ(gpu_->conv1d_fp32_residual(xd, wd, &bd, c.dilation, c.padding, xd, od).code(),
                ErrorCode::kInvalidArgument);
    }
  }
}

// 2-D row views whose rows are padded (ld > L): the kernel reads and writes only the views, the padding and the
// sentinel tail stay poison.
TEST_F(CudaAudioDecoderOps, Conv1dFp32RowViewsWithPaddedStrides) {
  for (const ConvCase& c : std::vector<ConvCase>{
           {1, 24, 300, 24, 11, 5, 25, true}, {1, 70, 513, 90, 3, 1, 1, true}, {1, 8, 400, 1, 7, 1, 3, false}}) {
    const int64_t lout = ref::conv1d_out_length(c.l, c.k, c.dilation, c.padding);
    Tensor x = random_f32({c.cin, c.l});
    Tensor w = random_f32({c.cout, c.cin, c.k}, 1.0f / std::sqrt(static_cast<float>(c.cin * c.k)));
    Tensor b = random_f32({c.cout}, 0.1f);
    Tensor expect = Tensor::empty({c.cout, lout}, DType::kF32);
    ASSERT_OK(cpu_->conv1d_fp32(x, w, c.bias ? &b : nullptr, c.dilation, c.padding, expect));
    Result<Guarded> gx = cuda_test::make_guarded(*gpu_, c.cin, c.l, c.l + 3, DType::kF32, &x);
    ASSERT_TRUE(gx.ok()) << gx.status().to_string();
    Result<Guarded> go = cuda_test::make_guarded(*gpu_, c.cout, lout, lout + 2, DType::kF32, nullptr);
    ASSERT_TRUE(go.ok()) << go.status().to_string();
    Tensor wd = upload(w), bd = upload(b);
    ASSERT_OK(gpu_->conv1d_fp32(gx->view, wd, c.bias ? &bd : nullptr, c.dilation, c.padding, go->view));
    std::string oob;
    Result<Tensor> got = cuda_test::read_guarded(*gpu_, *go, &oob);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(oob.empty()) << oob << seed_note();
    const std::string diff = cuda_test::compare_bytes(expect, *got);
    EXPECT_TRUE(diff.empty()) << "row view cin " << c.cin << " cout " << c.cout << ": " << diff << seed_note();
  }
}

TEST_F(CudaAudioDecoderOps, Conv1dFp32RefusesBadArguments) {
  Tensor x = upload(random_f32({4, 16}));
  Tensor w_bad = upload(random_f32({4, 5, 3}));  // Cin 5 != 4
  Tensor out = upload(random_f32({4, 16}));
  EXPECT_EQ(gpu_->conv1d_fp32(x, w_bad, nullptr, 1, 1, out).code(), ErrorCode::kInvalidArgument);
  Tensor w = upload(random_f32({4, 4, 3}));
  EXPECT_EQ(gpu_->conv1d_fp32(x, w, nullptr, 1, 1, x).code(), ErrorCode::kInvalidArgument);  // out == x
  Tensor host_w = random_f32({4, 4, 3});
  EXPECT_EQ(gpu_->conv1d_fp32(x, host_w, nullptr, 1, 1, out).code(), ErrorCode::kInvalidArgument);
  Tensor out_short = upload(random_f32({4, 15}));
  EXPECT_EQ(gpu_->conv1d_fp32(x, w, nullptr, 1, 1, out_short).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu_->conv1d_fp32(x, w, nullptr, 0, 1, out).code(), ErrorCode::kInvalidArgument);  // dilation 0
  Tensor b_bad = upload(random_f32({3}));
  EXPECT_EQ(gpu_->conv1d_fp32(x, w, &b_bad, 1, 1, out).code(), ErrorCode::kInvalidArgument);
  // A stack whose out holds another batch.
  Tensor xs = upload(random_f32({2, 4, 10})), os = poisoned_3d({1, 4, 10});
  EXPECT_EQ(gpu_->conv1d_fp32(xs, w, nullptr, 1, 1, os).code(), ErrorCode::kInvalidArgument);
  ASSERT_OK(gpu_->synchronize());
}

struct ActCase {
  int64_t channels, l;
};
// The decoder's stage widths at reduced lengths, segment remainders (512 outputs per block), 1- and 2-sample signals.
const std::vector<ActCase> kActCases = {{512, 1035}, {256, 700}, {16, 5000}, {8, 1025}, {3, 513}, {5, 1}, {4, 2}};

TEST_F(CudaAudioDecoderOps, Activation1dMatchesTheSingleOpsAndTheReference) {
  const std::vector<float> kaiser = kaiser_sinc_filter(0.25, 0.3, 12);
  Tensor fh = Tensor::empty({12}, DType::kF32);
  std::memcpy(fh.raw_data(), kaiser.data(), 12 * sizeof(float));
  double filter_l1 = 0.0;
  for (float f : kaiser) filter_l1 += std::fabs(f);
  Tensor fd = upload(fh);
  int64_t differing = 0, total = 0;
  for (const ActCase& c : kActCases) {
    const std::string what = "activation1d C " + std::to_string(c.channels) + " L " + std::to_string(c.l);
    const int64_t rows = 2 * c.channels;  // a stereo pair
    Tensor x = random_f32({rows, c.l});
    Tensor alpha = random_f32({c.channels}, 0.3f, false), beta = random_f32({c.channels}, 0.3f, false);
    Tensor xd = upload(x), ad = upload(alpha), bd = upload(beta);
    // The three single-op kernels.
    Tensor up = poisoned_3d({1, rows, 2 * c.l}), chain = poisoned_3d({1, rows, c.l});
    Result<Tensor> up2 = up.reshape({rows, 2 * c.l});
    Result<Tensor> chain2 = chain.reshape({rows, c.l});
    ASSERT_TRUE(up2.ok() && chain2.ok());
    ASSERT_OK(gpu_->upsample1d(xd, fd, 2, *up2));
    ASSERT_OK(gpu_->snake_beta(*up2, ad, bd));
    ASSERT_OK(gpu_->downsample1d(*up2, fd, 2, *chain2));
    // The fused pass into a guarded, poisoned output.
    Result<Guarded> go = cuda_test::make_guarded(*gpu_, rows, c.l, c.l + 5, DType::kF32, nullptr);
    ASSERT_TRUE(go.ok()) << go.status().to_string();
    ASSERT_OK(gpu_->activation1d(xd, ad, bd, fd, fd, 2, go->view));
    std::string oob;
    Result<Tensor> got = cuda_test::read_guarded(*gpu_, *go, &oob);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(oob.empty()) << what << ": " << oob << seed_note();
    const Tensor single = download(*chain2);
    const std::string diff = cuda_test::compare_bytes(single, *got);
    EXPECT_TRUE(diff.empty()) << what << " vs the single-op kernels: " << diff << seed_note();
    // Against the CPU reference: a differing snake output s is within 2^-19 * max(|s|, 1/b) (snake_beta's stated
    // tolerance), so an output differs by at most sum_k |f_k| * 2^-19 * max(|s_k|, 1/b) plus one rounding.
    Tensor expect = Tensor::empty({rows, c.l}, DType::kF32);
    ASSERT_OK(cpu_->activation1d(x, alpha, beta, fh, fh, 2, expect));
    Tensor s_ref = Tensor::empty({rows, 2 * c.l}, DType::kF32);
    ASSERT_OK(cpu_->upsample1d(x, fh, 2, s_ref));
    ASSERT_OK(cpu_->snake_beta(s_ref, alpha, beta));
    for (int64_t r = 0; r < rows; ++r) {
      const double inv_b = 1.0 / std::exp(static_cast<double>(beta.data<float>()[r % c.channels]));
      double s_max = 0.0;
      for (int64_t i = 0; i < 2 * c.l; ++i)
        s_max = std::max(s_max, std::fabs(static_cast<double>(s_ref.data<float>()[r * 2 * c.l + i])));
      for (int64_t t = 0; t < c.l; ++t) {
        const float e = expect.data<float>()[r * c.l + t], g = got->data<float>()[r * c.l + t];
        ++total;
        if (std::memcmp(&e, &g, sizeof(float)) == 0) continue;
        ++differing;
        const double bound =
            filter_l1 * std::ldexp(std::max(s_max, inv_b), -19) + std::ldexp(std::fabs(static_cast<double>(e)), -23);
        EXPECT_LE(std::fabs(static_cast<double>(e) - g), bound) << what << " row " << r << " t " << t << seed_note();
      }
    }
  }
  // The two sines (CUDA's sinf, the host's) differ in a few ulps on some arguments; the bound above is the check.
  std::cout << "activation1d: " << differing << " of " << total << " outputs differ from the CPU reference\n";
  EXPECT_GT(total, 0);
}

TEST_F(CudaAudioDecoderOps, Activation1dRefusesBadArguments) {
  const std::vector<float> kaiser = kaiser_sinc_filter(0.25, 0.3, 12);
  Tensor fh = Tensor::empty({12}, DType::kF32);
  std::memcpy(fh.raw_data(), kaiser.data(), 12 * sizeof(float));
  Tensor fd = upload(fh), x = upload(random_f32({6, 40})), a = upload(random_f32({3})), b = upload(random_f32({3}));
  Tensor out = upload(random_f32({6, 40}));
  EXPECT_EQ(gpu_->activation1d(x, a, b, fd, fd, 2, x).code(), ErrorCode::kInvalidArgument);  // out == x
  Tensor a4 = upload(random_f32({4}));
  EXPECT_EQ(gpu_->activation1d(x, a4, a4, fd, fd, 2, out).code(), ErrorCode::kInvalidArgument);  // 6 % 4 rows
  Tensor wrong = upload(random_f32({6, 80}));
  EXPECT_EQ(gpu_->activation1d(x, a, b, fd, fd, 2, wrong).code(), ErrorCode::kInvalidArgument);  // out keeps L
  EXPECT_EQ(gpu_->activation1d(x, a, b, fh, fd, 2, out).code(), ErrorCode::kInvalidArgument);    // host filter
  EXPECT_EQ(gpu_->activation1d(x, a, b, fd, fd, 0, out).code(), ErrorCode::kInvalidArgument);    // ratio 0
  ASSERT_OK(gpu_->synchronize());
}

}  // namespace
}  // namespace vortex
