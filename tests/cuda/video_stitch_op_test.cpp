// GPU test of the video VAE's clip stitch kernel (src/cuda/ops/video_stitch.h) against its CPU program
// (src/ref/video_stitch.h), byte for byte (E0): random geometries (patch sizes, tile grids, overlaps, frame ranges,
// cross-fades, rows per tile above the voxel count) and the released decode's clip (4 x 7 tiles of 7 x 16 x 16
// tokens, 256-pixel tiles over 768 x 1344 pixels), fresh random bf16 tiles per run (the seed is printed on failure),
// outputs poisoned before the run and every word compared after it; bad operands are rejected. Label gpu; skips
// without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "cuda_test_util.h"
#include "ref/cpu_backend.h"
#include "ref/video_stitch.h"
#include "vae/video_vae.h"

namespace vortex {
namespace {

class CudaVideoStitch : public ::testing::Test {
 protected:
  void SetUp() override {
    VORTEX_REQUIRE_CUDA(gpu_);
    seed_ = cuda_test::fresh_seed();
    rng_.seed(seed_);
    cpu_ = std::make_unique<CpuBackend>(0);
  }
  std::string note() const { return "seed " + std::to_string(seed_) + " (rerun to get fresh inputs)"; }
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // Runs the stitch on both backends and compares every output word; poisons the device outputs first.
  void check(const VideoStitchClip& g, int prev_frames, const std::string& what) {
    SCOPED_TRACE(what + ", " + note());
    const int64_t pv = static_cast<int64_t>(g.channels) * g.patch_t * g.patch * g.patch;
    const int64_t rows = static_cast<int64_t>(g.ny) * g.nx * g.rows_per_tile;
    const int64_t h = g.y_off[g.ny], w = g.x_off[g.nx], n0 = g.fe0 - g.f00, n1 = g.fe1 - g.f01;
    Tensor y = cuda_test::random_host_bf16({rows, pv}, rng_, cuda_test::Fill::kNormal);
    Tensor prev = g.cross_fade > 0 ? random_f32({g.channels, prev_frames, h, w}) : Tensor();
    Tensor out_cpu = poisoned({g.channels, n0, h, w});
    Tensor next_cpu = n1 > 0 ? poisoned({g.channels, n1, h, w}) : Tensor();
    ASSERT_OK(cpu_->video_stitch_clip(y, g, prev, out_cpu, next_cpu));
    auto y_d = gpu_->upload(y);
    ASSERT_TRUE(y_d.ok()) << y_d.status().to_string();
    Tensor prev_d;
    if (prev.defined()) {
      auto p = gpu_->upload(prev);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      prev_d = *p;
    }
    auto out_d = gpu_->upload(poisoned({g.channels, n0, h, w}));
    ASSERT_TRUE(out_d.ok()) << out_d.status().to_string();
    Tensor next_d;
    if (n1 > 0) {
      auto nd = gpu_->upload(poisoned({g.channels, n1, h, w}));
      ASSERT_TRUE(nd.ok()) << nd.status().to_string();
      next_d = *nd;
    }
    ASSERT_OK(gpu_->video_stitch_clip(*y_d, g, prev_d, *out_d, next_d));
    ASSERT_OK(gpu_->synchronize());
    expect_same(*out_d, out_cpu, "out");
    if (n1 > 0) expect_same(next_d, next_cpu, "next");
  }

  Tensor random_f32(Shape shape) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng_);
    return t;
  }
  static Tensor poisoned(Shape shape) {
    Tensor t = Tensor::empty(shape, DType::kF32);
    for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(t.data<float>() + i, &cuda_test::kPoisonF32, 4);
    return t;
  }
  void expect_same(const Tensor& dev, const Tensor& want, const char* what) {
    Tensor got = Tensor::empty(want.shape(), DType::kF32);
    ASSERT_OK(gpu_->download(dev, got));
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < want.numel(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, got.data<float>() + i, 4);
      std::memcpy(&b, want.data<float>() + i, 4);
      ASSERT_NE(b, cuda_test::kPoisonF32) << what << ": the CPU program left element " << i << " unwritten";
      if (a != b && diff++ == 0) first = i;
    }
    EXPECT_EQ(diff, 0) << what << ": " << diff << " of " << want.numel() << " words differ, first at " << first
                       << " (gpu " << (first >= 0 ? got.data<float>()[first] : 0.0f) << ", cpu "
                       << (first >= 0 ? want.data<float>()[first] : 0.0f) << ")";
  }

  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuBackend> cpu_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// A geometry from one axis' split_tiles layout (the decode's kept extents and blend widths).
void axis_layout(const TileSplit& s, int* off, int* blend) {
  const int n = static_cast<int>(s.starts.size());
  off[0] = 0;
  for (int i = 0; i < n; ++i) {
    off[i + 1] = off[i] + s.lengths[static_cast<size_t>(i)] - (i + 1 < n ? s.overlaps[static_cast<size_t>(i)] : 0);
    blend[i] = i > 0 ? std::min(s.lengths[0], s.overlaps[static_cast<size_t>(i - 1)]) : 0;
  }
}

TEST_F(CudaVideoStitch, RandomGeometriesMatchTheCpuProgram) {
  for (int iter = 0; iter < 24; ++iter) {
    VideoStitchClip g;
    g.channels = uniform(1, 3);
    g.patch = 1 << uniform(0, 2);
    g.patch_t = 1 << uniform(0, 2);
    g.tile_t = uniform(1, 3), g.tile_h = uniform(1, 5), g.tile_w = uniform(1, 5);
    g.rows_per_tile = static_cast<int64_t>(g.tile_t) * g.tile_h * g.tile_w + uniform(0, 5);
    g.ny = uniform(1, 4), g.nx = uniform(1, 5);
    const int th = g.tile_h * g.patch, tw = g.tile_w * g.patch, tf = g.tile_t * g.patch_t;
    for (int i = 0; i < g.ny; ++i) {
      const int ov = i + 1 < g.ny ? uniform(0, th - 1) : 0;
      g.y_off[i + 1] = g.y_off[i] + th - ov;
      if (i + 1 < g.ny) g.blend_y[i + 1] = ov;
    }
    for (int j = 0; j < g.nx; ++j) {
      const int ov = j + 1 < g.nx ? uniform(0, tw - 1) : 0;
      g.x_off[j + 1] = g.x_off[j] + tw - ov;
      if (j + 1 < g.nx) g.blend_x[j + 1] = ov;
    }
    g.f00 = uniform(0, tf - 1), g.fe0 = uniform(g.f00 + 1, tf);
    g.f01 = uniform(g.fe0, tf), g.fe1 = uniform(g.f01, tf);
    const int prev_frames = uniform(1, 4);
    g.cross_fade = uniform(0, std::min(prev_frames, g.fe0 - g.f00));
    check(g, prev_frames, "random geometry " + std::to_string(iter));
  }
}

TEST_F(CudaVideoStitch, ReleasedClipMatchesTheCpuProgram) {
  VideoStitchClip g;  // 768 x 1344 pixels in 256-pixel tiles (>= 64 overlap), a 7-latent-frame clip
  g.tile_t = 7, g.tile_h = 16, g.tile_w = 16;
  g.rows_per_tile = 7 * 16 * 16 + 5;
  const TileSplit ys = split_tiles(768, 256, 64, 16), xs = split_tiles(1344, 256, 64, 16);
  g.ny = static_cast<int>(ys.starts.size()), g.nx = static_cast<int>(xs.starts.size());
  ASSERT_EQ(g.ny * g.nx, 28);
  axis_layout(ys, g.y_off, g.blend_y);
  axis_layout(xs, g.x_off, g.blend_x);
  ASSERT_EQ(g.y_off[g.ny], 768);
  ASSERT_EQ(g.x_off[g.nx], 1344);
  g.f00 = 3, g.fe0 = 20, g.f01 = 23, g.fe1 = 28, g.cross_fade = 5;
  check(g, 5, "released clip");
  g.cross_fade = 0;  // the first clip
  check(g, 0, "released first clip");
}

TEST_F(CudaVideoStitch, RejectsBadOperands) {
  VideoStitchClip g;
  g.channels = 1, g.patch = 2, g.patch_t = 1, g.tile_t = 1, g.tile_h = 2, g.tile_w = 2, g.rows_per_tile = 4;
  g.ny = g.nx = 1, g.y_off[1] = g.x_off[1] = 4, g.f00 = 0, g.fe0 = 1;
  auto y = gpu_->alloc({4, 4}, DType::kBF16);
  auto out = gpu_->alloc({1, 1, 4, 4}, DType::kF32);
  ASSERT_TRUE(y.ok() && out.ok());
  Tensor none;
  ASSERT_OK(gpu_->video_stitch_clip(*y, g, none, *out, none));  // the valid baseline
  ASSERT_OK(gpu_->synchronize());
  Tensor host_out = Tensor::empty({1, 1, 4, 4}, DType::kF32);
  EXPECT_EQ(gpu_->video_stitch_clip(*y, g, none, host_out, none).code(), ErrorCode::kInvalidArgument);
  auto short_y = gpu_->alloc({3, 4}, DType::kBF16);
  ASSERT_TRUE(short_y.ok());
  EXPECT_EQ(gpu_->video_stitch_clip(*short_y, g, none, *out, none).code(), ErrorCode::kInvalidArgument);
  VideoStitchClip bad = g;
  bad.cross_fade = 1;  // no prev frames
  EXPECT_EQ(gpu_->video_stitch_clip(*y, bad, none, *out, none).code(), ErrorCode::kInvalidArgument);
  bad = g;
  bad.blend_x[0] = 1;  // the first column blends with nothing
  EXPECT_EQ(gpu_->video_stitch_clip(*y, bad, none, *out, none).code(), ErrorCode::kInvalidArgument);
  bad = g;
  bad.f01 = 0, bad.fe1 = 1;  // overlaps [f00, fe0)
  EXPECT_EQ(gpu_->video_stitch_clip(*y, bad, none, *out, none).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
