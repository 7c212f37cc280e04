// A ref2va video reference's frame pairs through the vision tower's BF16 program on the CUDA backend
// (encode_video_pairs over VisionTower::from_source with a backend) against transformers' BF16 tower on the tiny
// fixtures (tests/vision/make_ref2va_vision_fixtures.py): the video features and the DeepStack feature within 2x the
// floor (transformers BF16 vs FP32). Label gpu; skips without a device.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "cuda/cuda_backend.h"
#include "gpu_test.h"
#include "io/safetensors.h"
#include "vae/vae_checkpoint.h"
#include "vision/reference_video_vision.h"
#include "vision_test_util.h"

namespace vortex {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* env = std::getenv(name);
  return env && *env ? env : fallback;
}

TEST(Ref2vaVisionCuda, VideoFeaturesWithinTwiceTheBf16Floor) {
  auto gpu = CudaBackend::create(0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(gpu.status());
  const std::string model = env_or("VORTEX_TE_FIXTURES", VORTEX_TE_FIXTURES) + "/model";
  auto fx =
      SafetensorsFile::open(env_or("VORTEX_VISION_FIXTURES", VORTEX_VISION_FIXTURES) + "/ref2va_vision.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().to_string();
  auto tower = test::tower_from_model_folder(model, gpu->get());
  ASSERT_TRUE(tower.ok()) << tower.status().to_string();
  const Tensor frames = *fx->tensor("video.frames");  // u8 [S, H, W, 3]
  std::vector<RgbImage> sampled;
  const int64_t per = frames.numel() / frames.dim(0);
  for (int64_t s = 0; s < frames.dim(0); ++s) {
    RgbImage img{static_cast<int>(frames.dim(2)), static_cast<int>(frames.dim(1)), {}};
    img.rgb.assign(frames.data<uint8_t>() + s * per, frames.data<uint8_t>() + (s + 1) * per);
    sampled.push_back(std::move(img));
  }
  VisionProcessorConfig proc;  // the release's video_preprocessor_config.json with the tiny patch
  proc.patch = 8;
  proc.min_pixels = 4096;
  proc.max_pixels = 25165824;
  auto pairs = preprocess_video_pairs(sampled, proc);
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  auto out = encode_video_pairs(*tower, *pairs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->deepstack.size(), 1u);
  for (const auto& [key, bf, ours] : std::vector<std::tuple<std::string, std::string, const Tensor*>>{
           {"merged", "merged_bf16", &out->merged}, {"deepstack.0", "deepstack_bf16.0", &out->deepstack[0]}}) {
    const Tensor theirs = *fx->tensor("video." + bf), fp32 = *fx->tensor("video." + key);
    ASSERT_EQ(ours->shape(), theirs.shape()) << key;
    const double floor = test::rel_l2_f32(theirs, fp32), err = test::rel_l2_f32(*ours, theirs);
    std::printf("video %s on CUDA: vs transformers BF16 rel-L2 %.3g; floor (BF16 vs FP32) %.3g\n", key.c_str(), err,
                floor);
    EXPECT_GT(floor, 0.0) << key;
    EXPECT_LE(err, 2 * floor) << key;
  }
}

}  // namespace
}  // namespace vortex
