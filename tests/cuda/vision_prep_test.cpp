// GPU tests of the vision tower's device preparation against the CPU programs: vision_pixel_rows
// (src/cuda/ops/vision_prep.cu vs src/ref/vision_prep.cpp) byte for byte on random u8 images with the release's
// normalization and random ones, the LayerNorm of BF16 rows (src/cuda/ops/layer_norm.cu vs src/ref/layer_norm.cpp)
// byte for byte and equal to the LayerNorm of the same rows widened to FP32. Fresh random inputs per run (seed
// printed on failure), outputs poisoned with NaN bytes before each run, every return code checked. Label gpu.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "ref/cpu_backend.h"

namespace vortex {
namespace {

class CudaVisionPrep : public ::testing::Test {
 protected:
  void SetUp() override {
    VORTEX_REQUIRE_CUDA(gpu_);
    seed_ = cuda_test::fresh_seed();
    rng_.seed(seed_);
    cpu_ = std::make_unique<CpuBackend>(0);
  }
  std::string note() const { return " (seed " + std::to_string(seed_) + ")"; }
  Tensor random_u8(Shape shape) {
    Tensor t = Tensor::empty(shape, DType::kU8);
    std::uniform_int_distribution<int> v(0, 255);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(v(rng_));
    return t;
  }
  Tensor up(const Tensor& h) {
    auto t = gpu_->upload(h);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? *t : Tensor();
  }
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

TEST_F(CudaVisionPrep, PixelRowsBitExact) {
  struct Case {
    int h, w, patch, tp, merge;
  };
  std::uniform_real_distribution<float> mean(0.0f, 255.0f), stdv(1.0f, 200.0f);
  // A keyframe canvas of the release (768 x 1344, patch 16, T 2, merge 2), a small one and an odd patch size.
  for (const Case& c : {Case{768, 1344, 16, 2, 2}, Case{64, 96, 16, 2, 2}, Case{42, 28, 7, 3, 2}}) {
    for (bool release_norm : {true, false}) {
      std::array<float, 3> m{}, s{};
      for (int i = 0; i < 3; ++i) {
        m[static_cast<size_t>(i)] = release_norm ? 127.5f : mean(rng_);
        s[static_cast<size_t>(i)] = release_norm ? 127.5f : stdv(rng_);
      }
      const Tensor rgb = random_u8({c.h, c.w, 3});
      const Shape os{static_cast<int64_t>(c.h / c.patch) * (c.w / c.patch), 3LL * c.tp * c.patch * c.patch};
      Tensor want = Tensor::empty(os, DType::kBF16);
      Status st = cpu_->vision_pixel_rows(rgb, m, s, c.patch, c.tp, c.merge, want);
      ASSERT_TRUE(st.ok()) << st.to_string();
      Tensor out = poisoned(os, DType::kBF16);
      st = gpu_->vision_pixel_rows(up(rgb), m, s, c.patch, c.tp, c.merge, out);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_TRUE(gpu_->synchronize().ok());
      EXPECT_EQ(cuda_test::compare_bytes(want, down(out)), "") << c.h << "x" << c.w << note();
    }
  }
}

TEST_F(CudaVisionPrep, PixelRowsRefusesBadShapes) {
  const std::array<float, 3> m{127.5f, 127.5f, 127.5f}, s{127.5f, 127.5f, 127.5f};
  Tensor out = poisoned({12, 1536}, DType::kBF16);
  // 48 x 64 is 3 x 4 patches: 3 is not a multiple of the merge size.
  EXPECT_FALSE(gpu_->vision_pixel_rows(up(random_u8({48, 64, 3})), m, s, 16, 2, 2, out).ok());
  // The right image with the wrong output shape, and a host output.
  const Tensor rgb = up(random_u8({64, 64, 3}));
  EXPECT_FALSE(gpu_->vision_pixel_rows(rgb, m, s, 16, 2, 2, out).ok());
  Tensor host_out = Tensor::empty({16, 1536}, DType::kBF16);
  EXPECT_FALSE(gpu_->vision_pixel_rows(rgb, m, s, 16, 2, 2, host_out).ok());
  Tensor good = poisoned({16, 1536}, DType::kBF16);
  EXPECT_FALSE(gpu_->vision_pixel_rows(rgb, m, {127.5f, 0.0f, 127.5f}, 16, 2, 2, good).ok());
  EXPECT_TRUE(gpu_->vision_pixel_rows(rgb, m, s, 16, 2, 2, good).ok());
  EXPECT_TRUE(gpu_->synchronize().ok());
}

TEST_F(CudaVisionPrep, LayerNormOfBf16RowsBitExact) {
  for (const Shape& shape : {Shape{333, 1152}, Shape{101, 4608}}) {
    const int64_t d = shape[1];
    const Tensor x = cuda_test::random_host_bf16(shape, rng_, cuda_test::Fill::kNormal);
    Tensor w = Tensor::empty({d}, DType::kF32), b = Tensor::empty({d}, DType::kF32);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (int64_t i = 0; i < d; ++i) {
      w.data<float>()[i] = round_bf16(1.0f + 0.1f * n(rng_));
      b.data<float>()[i] = round_bf16(0.02f * n(rng_));
    }
    Tensor want = Tensor::empty(shape, DType::kBF16);
    Status st = cpu_->layer_norm(x, w, b, 1e-6f, want);
    ASSERT_TRUE(st.ok()) << st.to_string();
    // The same rows widened to FP32 give the same result (the BF16 read is exact).
    Tensor xf = Tensor::empty(shape, DType::kF32);
    for (int64_t i = 0; i < x.numel(); ++i) xf.data<float>()[i] = f32_from_bf16_bits(x.data<uint16_t>()[i]);
    Tensor want_f = Tensor::empty(shape, DType::kBF16);
    ASSERT_TRUE(cpu_->layer_norm(xf, w, b, 1e-6f, want_f).ok());
    EXPECT_EQ(cuda_test::compare_bytes(want_f, want), "") << note();
    Tensor out = poisoned(shape, DType::kBF16);
    st = gpu_->layer_norm(up(x), up(w), up(b), 1e-6f, out);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(gpu_->synchronize().ok());
    EXPECT_EQ(cuda_test::compare_bytes(want, down(out)), "") << shape_to_string(shape) << note();
  }
}

}  // namespace
}  // namespace vortex
