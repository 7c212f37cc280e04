// The conditioner with keyframes against transformers 5.x (tests/vision/make_conditioner_fixtures.py, on the tiny
// Qwen3-VL the text encoder tests ship): the image processor's pixel_values bit for bit, then the vision tower, the
// M-RoPE positions with images, the vision tokens in place of the image-pad embeddings and the DeepStack addition:
// every hidden_states[k] within 2x the BF16 floor (transformers' BF16 model, vision tower included, against the
// same weights in FP32), for one and two keyframes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "text_encoder/text_encoder.h"
#include "vae/vae_checkpoint.h"
#include "vision/keyframe_presentation.h"
#include "vision/vision_tower.h"
#include "vision_test_util.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

const std::string kModel = std::string(VORTEX_TE_FIXTURES) + "/model";
constexpr int32_t kImagePad = 500;

double rel_l2(const Tensor& got_bf16, const Tensor& want_bf16) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want_bf16.numel(); ++i) {
    const double g = f32_from_bf16_bits(got_bf16.data<uint16_t>()[i]),
                 w = f32_from_bf16_bits(want_bf16.data<uint16_t>()[i]);
    num += (g - w) * (g - w);
    den += w * w;
  }
  return std::sqrt(num / den);
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  for (const Tensor& t : parts) rows += t.dim(0);
  Tensor out = Tensor::empty({rows, parts[0].dim(1)}, DType::kF32);
  size_t at = 0;
  for (const Tensor& t : parts) {
    std::memcpy(out.data<float>() + at, t.data<float>(), t.nbytes());
    at += static_cast<size_t>(t.numel());
  }
  return out;
}

Tensor to_bf16(const Tensor& f32) {
  Tensor out = Tensor::empty(f32.shape(), DType::kBF16);
  for (int64_t i = 0; i < f32.numel(); ++i) out.data<uint16_t>()[i] = bf16_bits_from_f32(f32.data<float>()[i]);
  return out;
}

TEST(ConditionerVision, EveryHiddenStateWithinTwiceTheBf16Floor) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  auto enc = TextEncoder::load(kModel, **backend, 4);
  ASSERT_TRUE(enc.ok()) << enc.status().to_string();
  auto tower = test::tower_from_model_folder(kModel);  // the BF16 checkpoint read as FP32
  ASSERT_TRUE(tower.ok()) << tower.status().to_string();
  auto fx = SafetensorsFile::open(std::string(VORTEX_VISION_FIXTURES) + "/conditioner.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().to_string();
  VisionProcessorConfig proc;
  proc.patch = 8;
  proc.min_pixels = 64;
  int checked = 0;
  for (const std::string name : {"one", "two"}) {
    SCOPED_TRACE(name);
    const Tensor ids_t = *fx->tensor(name + ".ids");
    const std::vector<int32_t> ids(ids_t.data<int32_t>(), ids_t.data<int32_t>() + ids_t.numel());
    const Tensor want_pixels = *fx->tensor(name + ".pixel_values");
    std::vector<std::pair<int, int>> grids;
    std::vector<Tensor> tokens, deep0;
    int64_t pixel_row = 0;
    for (int i = 0; fx->contains(name + ".image." + std::to_string(i)); ++i) {
      const Tensor img = *fx->tensor(name + ".image." + std::to_string(i));
      RgbImage rgb{static_cast<int>(img.dim(1)), static_cast<int>(img.dim(0)), {}};
      rgb.rgb.assign(img.data<uint8_t>(), img.data<uint8_t>() + img.numel());
      auto in = preprocess_image(rgb, proc);
      ASSERT_TRUE(in.ok()) << in.status().to_string();
      EXPECT_EQ(std::memcmp(in->pixel_values.data<float>(), want_pixels.data<float>() + pixel_row * want_pixels.dim(1),
                            in->pixel_values.nbytes()),
                0)
          << "pixel_values of keyframe " << i;
      pixel_row += in->pixel_values.dim(0);
      grids.push_back({in->grid_h, in->grid_w});
      auto out = tower->forward(*in);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      tokens.push_back(out->merged);
      ASSERT_EQ(out->deepstack.size(), 1u);
      deep0.push_back(out->deepstack[0]);
    }
    ASSERT_EQ(pixel_row, want_pixels.dim(0));
    auto positions = mrope_positions_with_images(ids, kImagePad, grids, 2);
    ASSERT_TRUE(positions.ok()) << positions.status().to_string();
    VisionEmbeddings vision;
    for (size_t r = 0; r < ids.size(); ++r)
      if (ids[r] == kImagePad) vision.rows.push_back(static_cast<int64_t>(r));
    vision.tokens = concat_rows(tokens);
    vision.deepstack = {concat_rows(deep0)};
    // The same embeddings as BF16 rows on the text encoder's backend (the device hand-off's form; the cpu backend's
    // device is the host): the encoder rounds FP32 rows to these bytes itself, so every state is byte-identical.
    VisionEmbeddings vision_bf16;
    vision_bf16.rows = vision.rows;
    vision_bf16.tokens = to_bf16(vision.tokens);
    vision_bf16.deepstack = {to_bf16(vision.deepstack[0])};
    for (int k = 0; k <= 4; ++k) {
      auto h = (*enc)->encode(ids, *positions, k, &vision);
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      auto h_bf16 = (*enc)->encode(ids, *positions, k, &vision_bf16);
      ASSERT_TRUE(h_bf16.ok()) << h_bf16.status().to_string();
      EXPECT_EQ(std::memcmp(h->raw_data(), h_bf16->raw_data(), h->nbytes()), 0)
          << "hidden_states[" << k << "]: BF16 and FP32 vision rows differ";
      const Tensor want = *fx->tensor(name + ".bf16." + std::to_string(k));
      ASSERT_EQ(h->shape(), want.shape());
      const double err = rel_l2(*h, want);
      const double floor = std::stod(fx->metadata().at("floor_" + name + "_" + std::to_string(k)));
      std::printf("%s hidden_states[%d]: rel-L2 %.3e, BF16 floor %.3e, ratio %.2f\n", name.c_str(), k, err, floor,
                  err / floor);
      EXPECT_LE(err, 2.0 * floor) << "hidden_states[" << k << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 10);
}

TEST(ConditionerVision, Errors) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  auto enc = TextEncoder::load(kModel, **backend, 1);
  ASSERT_TRUE(enc.ok());
  const std::vector<int32_t> ids = {1, 2, 500, 3};
  auto positions = mrope_positions_with_images(ids, kImagePad, {{2, 2}}, 2);
  ASSERT_TRUE(positions.ok());
  VisionEmbeddings bad;
  bad.rows = {2};
  bad.tokens = Tensor::zeros({1, 64}, DType::kF32);  // hidden is 128
  EXPECT_FALSE((*enc)->encode(ids, *positions, 1, &bad).ok());
  bad.tokens = Tensor::zeros({1, 128}, DType::kF32);
  bad.rows = {7};  // past the end
  EXPECT_FALSE((*enc)->encode(ids, *positions, 1, &bad).ok());
  bad.rows = {2};
  bad.tokens = Tensor::zeros({1, 128}, DType::kBF16);
  bad.deepstack = {Tensor::zeros({1, 128}, DType::kF32)};  // BF16 tokens with an FP32 feature: mixed forms
  auto mixed = (*enc)->encode(ids, *positions, 1, &bad);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().to_string().find("bf16 on the text encoder's device"), std::string::npos)
      << mixed.status().to_string();
  EXPECT_FALSE(mrope_positions_with_images(ids, kImagePad, {{2, 4}}, 2).ok());  // 2 tokens for a 1-token run
  EXPECT_FALSE(mrope_positions_with_images(ids, kImagePad, {}, 2).ok());
}

}  // namespace
}  // namespace vortex
