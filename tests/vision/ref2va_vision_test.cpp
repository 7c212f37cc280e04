// The vision side of a ref2va presentation with one video and one image, against diffusers 0.42.1 and transformers
// 5.x (tests/vision/make_ref2va_vision_fixtures.py, on the tiny Qwen3-VL the text encoder tests ship): the 2 fps
// frame choice, pixel_values_videos bit for bit (two different frames per temporal patch, the last repeated), the
// video features of the FP32 tower within 2x the floor (transformers FP32 vs FP64) and of the BF16 program on the
// cpu backend within 2x its floor (transformers BF16 vs FP32), get_rope_index, and every hidden_states[k] within 2x
// the BF16 floor; then the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "ref/cpu_backend.h"
#include "text_encoder/text_encoder.h"
#include "vae/vae_checkpoint.h"
#include "vision/keyframe_presentation.h"
#include "vision/ref2va_presentation.h"
#include "vision/reference_video_vision.h"
#include "vision_test_util.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

const std::string kModel = std::string(VORTEX_TE_FIXTURES) + "/model";
constexpr int32_t kImagePad = 500, kVideoPad = 501;

struct Fixture {
  SafetensorsFile file;
  Tensor get(const std::string& name) const {
    auto t = file.tensor(name);
    EXPECT_TRUE(t.ok()) << name << ": " << t.status().to_string();
    return t.ok() ? *t : Tensor();
  }
};

const Fixture& fixture() {
  static const Fixture f = [] {
    auto r = SafetensorsFile::open(std::string(VORTEX_VISION_FIXTURES) + "/ref2va_vision.safetensors");
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return Fixture{std::move(*r)};
  }();
  return f;
}

// The tiny model's processors: the release's settings with patch 8 (video: its video_preprocessor_config.json).
VisionProcessorConfig video_processor() {
  VisionProcessorConfig c;
  c.patch = 8;
  c.min_pixels = 4096;
  c.max_pixels = 25165824;
  return c;
}
VisionProcessorConfig image_processor() {
  VisionProcessorConfig c;
  c.patch = 8;
  c.min_pixels = 64;
  return c;
}

RgbImage rgb_of(const Tensor& hw3) {  // u8 [H, W, 3]
  RgbImage img{static_cast<int>(hw3.dim(1)), static_cast<int>(hw3.dim(0)), {}};
  img.rgb.assign(hw3.data<uint8_t>(), hw3.data<uint8_t>() + hw3.numel());
  return img;
}

std::vector<RgbImage> sampled_frames() {
  const Tensor frames = fixture().get("video.frames");  // u8 [S, H, W, 3]
  std::vector<RgbImage> out;
  const int64_t per = frames.numel() / frames.dim(0);
  for (int64_t s = 0; s < frames.dim(0); ++s) {
    RgbImage img{static_cast<int>(frames.dim(2)), static_cast<int>(frames.dim(1)), {}};
    img.rgb.assign(frames.data<uint8_t>() + s * per, frames.data<uint8_t>() + (s + 1) * per);
    out.push_back(std::move(img));
  }
  return out;
}

VisionTower tower(Backend* backend) {
  auto t = test::tower_from_model_folder(kModel, backend);  // the BF16 checkpoint read as FP32
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(*t);
}

Tensor concat(const std::vector<VisionInput>& pairs) {
  Tensor out = Tensor::empty(
      {static_cast<int64_t>(pairs.size()) * pairs[0].pixel_values.dim(0), pairs[0].pixel_values.dim(1)}, DType::kF32);
  size_t at = 0;
  for (const VisionInput& p : pairs) {
    std::memcpy(out.data<float>() + at, p.pixel_values.data<float>(), p.pixel_values.nbytes());
    at += static_cast<size_t>(p.pixel_values.numel());
  }
  return out;
}

// max |a - truth| over f32 a and f64 truth.
double max_err(const Tensor& a, const Tensor& truth) {
  double m = 0;
  for (int64_t i = 0; i < truth.numel(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a.data<float>()[i]) - truth.data<double>()[i]));
  return m;
}

double rel_l2_bf16(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = f32_from_bf16_bits(got.data<uint16_t>()[i]), w = f32_from_bf16_bits(want.data<uint16_t>()[i]);
    num += (g - w) * (g - w);
    den += w * w;
  }
  return std::sqrt(num / den);
}

TEST(Ref2vaVision, FramePairsPixelValuesBitForBit) {
  const Tensor want_idx = fixture().get("video.indices"), want_ts = fixture().get("video.timestamps");
  auto sampled = sample_reference_video_frames(std::stoll(fixture().file.metadata().at("frames")));
  ASSERT_TRUE(sampled.ok()) << sampled.status().to_string();
  ASSERT_EQ(sampled->indices.size(), static_cast<size_t>(want_idx.numel()));
  for (int64_t i = 0; i < want_idx.numel(); ++i) EXPECT_EQ(sampled->indices[i], want_idx.data<int64_t>()[i]);
  ASSERT_EQ(sampled->block_timestamps.size(), static_cast<size_t>(want_ts.numel()));
  for (int64_t i = 0; i < want_ts.numel(); ++i) EXPECT_EQ(sampled->block_timestamps[i], want_ts.data<double>()[i]);

  const std::vector<RgbImage> frames = sampled_frames();
  ASSERT_EQ(frames.size() % 2, 1u) << "the case repeats the last frame";
  auto pairs = preprocess_video_pairs(frames, video_processor());
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  ASSERT_EQ(pairs->size(), sampled->block_timestamps.size());
  EXPECT_EQ((*pairs)[0].grid_t, 1);
  EXPECT_EQ((*pairs)[0].grid_h, 4);
  EXPECT_EQ((*pairs)[0].grid_w, 6);
  const Tensor got = concat(*pairs), want = fixture().get("video.pixel_values");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.data<float>(), want.data<float>(), want.nbytes()), 0);
  // A pair holds two different frames: the halves of a patch's temporal columns differ (the last pair repeats).
  const int64_t half = got.dim(1) / 6;  // one channel's frame: p * p columns
  EXPECT_NE(std::memcmp(got.data<float>(), got.data<float>() + half, half * sizeof(float)), 0);
  const float* last = (*pairs).back().pixel_values.data<float>();
  EXPECT_EQ(std::memcmp(last, last + half, half * sizeof(float)), 0);

  auto image = preprocess_image(rgb_of(fixture().get("image.image")), image_processor());
  ASSERT_TRUE(image.ok()) << image.status().to_string();
  const Tensor want_image = fixture().get("image.pixel_values");
  ASSERT_EQ(image->pixel_values.shape(), want_image.shape());
  EXPECT_EQ(std::memcmp(image->pixel_values.data<float>(), want_image.data<float>(), want_image.nbytes()), 0);
}

TEST(Ref2vaVision, VideoFeaturesWithinTwiceTheFloor) {
  auto pairs = preprocess_video_pairs(sampled_frames(), video_processor());
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  const VisionTower t = tower(nullptr);
  auto out = encode_video_pairs(t, *pairs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->deepstack.size(), 1u);
  const std::vector<std::tuple<std::string, const Tensor*, std::string>> cases = {
      {"merged", &out->merged, "merged64"}, {"deepstack.0", &out->deepstack[0], "deepstack64.0"}};
  for (const auto& [key, ours, key64] : cases) {
    const Tensor theirs = fixture().get("video." + key), truth = fixture().get("video." + key64);
    ASSERT_EQ(ours->shape(), truth.shape()) << key;
    const double err = max_err(*ours, truth), floor = max_err(theirs, truth);
    std::printf("video %s %s: Vortex vs FP64 max %.3g; transformers FP32 vs FP64 (floor) max %.3g\n", key.c_str(),
                ours->describe().c_str(), err, floor);
    EXPECT_GT(floor, 0.0) << key;
    EXPECT_LE(err, 2 * floor + 1e-7) << key;
  }
  EXPECT_EQ(out->last_hidden.dim(0), 3 * 4 * 6);
}

// The BF16 program (VisionTower with a backend) on the cpu backend, the same entry point the CUDA backend takes
// (tests/vision/ref2va_vision_cuda_test.cpp): within 2x its floor, transformers BF16 vs FP32.
TEST(Ref2vaVision, VideoFeaturesBf16ProgramOnCpuBackend) {
  auto pairs = preprocess_video_pairs(sampled_frames(), video_processor());
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  CpuBackend cpu(0);
  const VisionTower t = tower(&cpu);
  auto out = encode_video_pairs(t, *pairs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->deepstack.size(), 1u);
  for (const auto& [key, ours] : std::vector<std::pair<std::string, const Tensor*>>{
           {"merged", &out->merged}, {"deepstack.0", &out->deepstack[0]}}) {
    const std::string bf = key == "merged" ? "merged_bf16" : "deepstack_bf16.0";
    const Tensor theirs = fixture().get("video." + bf), fp32 = fixture().get("video." + key);
    ASSERT_EQ(ours->shape(), theirs.shape()) << key;
    const double floor = test::rel_l2_f32(theirs, fp32), err = test::rel_l2_f32(*ours, theirs);
    std::printf("video %s: Vortex BF16 vs transformers BF16 rel-L2 %.3g; floor (transformers BF16 vs FP32) %.3g\n",
                key.c_str(), err, floor);
    EXPECT_GT(floor, 0.0) << key;
    EXPECT_LE(err, 2 * floor) << key;
  }
}

TEST(Ref2vaVision, PresentationHiddenStatesWithinTwiceTheBf16Floor) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  auto enc = TextEncoder::load(kModel, **backend, 4);
  ASSERT_TRUE(enc.ok()) << enc.status().to_string();
  const Tensor ids_t = fixture().get("ids");
  const std::vector<int32_t> ids(ids_t.data<int32_t>(), ids_t.data<int32_t>() + ids_t.numel());

  auto pairs = preprocess_video_pairs(sampled_frames(), video_processor());
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  auto image = preprocess_image(rgb_of(fixture().get("image.image")), image_processor());
  ASSERT_TRUE(image.ok()) << image.status().to_string();
  const VisionTower t = tower(nullptr);
  auto video_out = encode_video_pairs(t, *pairs);
  auto image_out = t.forward(*image);
  ASSERT_TRUE(video_out.ok()) << video_out.status().to_string();
  ASSERT_TRUE(image_out.ok()) << image_out.status().to_string();

  // The vision blocks in sequence order: the video's pairs, then the image (one frame each, get_rope_index).
  std::vector<std::pair<int, int>> grids;
  for (const VisionInput& p : *pairs) grids.push_back({p.grid_h, p.grid_w});
  grids.push_back({image->grid_h, image->grid_w});
  auto positions = mrope_positions_with_vision(ids, {kImagePad, kVideoPad}, grids, 2);
  ASSERT_TRUE(positions.ok()) << positions.status().to_string();
  const Tensor want_pos = fixture().get("positions");  // i64 [3, L]
  ASSERT_EQ(positions->numel(), want_pos.numel());
  for (int64_t i = 0; i < want_pos.numel(); ++i)
    ASSERT_EQ(positions->data<int32_t>()[i], want_pos.data<int64_t>()[i]) << "position " << i;

  // Qwen3VLModel scatters image and video tokens into their pad rows; the DeepStack features follow the rows.
  VisionEmbeddings vision;
  std::vector<int64_t> video_rows, image_rows;
  for (size_t r = 0; r < ids.size(); ++r) {
    if (ids[r] == kVideoPad) video_rows.push_back(static_cast<int64_t>(r));
    if (ids[r] == kImagePad) image_rows.push_back(static_cast<int64_t>(r));
  }
  ASSERT_EQ(static_cast<int64_t>(video_rows.size()), video_out->merged.dim(0));
  ASSERT_EQ(static_cast<int64_t>(image_rows.size()), image_out->merged.dim(0));
  ASSERT_LT(video_rows.back(), image_rows.front()) << "the case puts the video first";
  vision.rows = video_rows;
  vision.rows.insert(vision.rows.end(), image_rows.begin(), image_rows.end());
  auto stack = [](const Tensor& a, const Tensor& b) {
    Tensor out = Tensor::empty({a.dim(0) + b.dim(0), a.dim(1)}, DType::kF32);
    std::memcpy(out.data<float>(), a.data<float>(), a.nbytes());
    std::memcpy(out.data<float>() + a.numel(), b.data<float>(), b.nbytes());
    return out;
  };
  vision.tokens = stack(video_out->merged, image_out->merged);
  vision.deepstack = {stack(video_out->deepstack[0], image_out->deepstack[0])};
  int checked = 0;
  for (int k = 0; k <= 4; ++k) {
    auto h = (*enc)->encode(ids, *positions, k, &vision);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    const Tensor want = fixture().get("bf16." + std::to_string(k));
    ASSERT_EQ(h->shape(), want.shape());
    const double err = rel_l2_bf16(*h, want);
    const double floor = std::stod(fixture().file.metadata().at("floor_" + std::to_string(k)));
    std::printf("hidden_states[%d]: rel-L2 %.3e, BF16 floor %.3e, ratio %.2f\n", k, err, floor, err / floor);
    EXPECT_LE(err, 2.0 * floor) << "hidden_states[" << k << "]";
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(Ref2vaVision, Refusals) {
  const VisionProcessorConfig cfg = video_processor();
  std::vector<RgbImage> frames = sampled_frames();
  // Frames the processor would resize (not multiples of patch * merge).
  std::vector<RgbImage> odd(3, RgbImage{40, 32, std::vector<uint8_t>(40 * 32 * 3, 7)});
  auto r = preprocess_video_pairs(odd, cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("would resize"), std::string::npos) << r.status().message();
  // Below the video's pixel floor: 2 frames of 32x32 are 2048 pixels, under shortest_edge 4096.
  auto small = video_smart_resize(2, 32, 32, cfg);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(*small, (std::pair<int, int>{48, 48}));
  // The budget is per video: two of the case's 48x32 frames (3072 pixels) fall under the floor that five pass.
  auto two = preprocess_video_pairs({frames[0], frames[1]}, cfg);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), ErrorCode::kUnsupported);
  // Over the budget: the whole video's pixels, frames included, scale every frame down.
  VisionProcessorConfig tight = cfg;
  tight.max_pixels = 4 * 32 * 48 - 1;
  auto big = video_smart_resize(4, 32, 48, tight);
  ASSERT_TRUE(big.ok());
  EXPECT_LT(big->first * big->second, 32 * 48);
  EXPECT_FALSE(preprocess_video_pairs(std::vector<RgbImage>(frames.begin(), frames.begin() + 4), tight).ok());
  // Too few frames, mixed sizes, a broken frame, nothing.
  EXPECT_FALSE(preprocess_video_pairs({frames[0]}, cfg).ok());
  std::vector<RgbImage> mixed = {frames[0], frames[1], RgbImage{16, 32, std::vector<uint8_t>(16 * 32 * 3, 1)}};
  EXPECT_FALSE(preprocess_video_pairs(mixed, cfg).ok());
  std::vector<RgbImage> broken = {frames[0], RgbImage{frames[0].width, frames[0].height, {1, 2, 3}}};
  EXPECT_FALSE(preprocess_video_pairs(broken, cfg).ok());
  EXPECT_FALSE(preprocess_video_pairs({}, cfg).ok());
  const VisionTower t = tower(nullptr);
  EXPECT_FALSE(encode_video_pairs(t, {}).ok());
}

}  // namespace
}  // namespace vortex
