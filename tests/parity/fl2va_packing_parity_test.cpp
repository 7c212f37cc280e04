// fl2va packing against diffusers 0.42.1 (fixtures from tests/parity/make_fl2va_fixtures.py): the
// [text | keyframe conditions | audio | video] layout of build_packed_sequence bit for bit (FP64 positions and
// modality tags, text rows of a vision block tagged video) for a first, a last and both keyframes; the per-row
// timesteps of build_row_timesteps through the final-layer segments (conditioning rows at max(t_v, 0.999));
// MiniMaxH3PrepareConditionLatentsStep's noised, patchified conditioning rows from the same noise.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "engine/run_manifest.h"  // sha256_hex
#include "io/safetensors.h"
#include "model/packing.h"
#include "parity/parity_fixtures.h"
#include "parity/row_timesteps.h"

namespace vortex {
namespace {

struct Built {
  PackedLayout layout;
  std::string what;
};

Built build(const nlohmann::json& c) {
  const ModelConfig tiny = ModelConfig::h3_tiny();  // no pixel-area cap
  auto geo = make_geometry(tiny, c["width"].get<int>(), c["height"].get<int>(), c["frames"].get<int>(),
                           c["text_rows"].get<int64_t>());
  EXPECT_TRUE(geo.ok()) << geo.status().to_string();
  for (const auto& a : c["anchors"])
    geo->keyframes.push_back(a == "first" ? KeyframeAnchor::kFirst : KeyframeAnchor::kLast);
  std::vector<Modality> text(static_cast<size_t>(c["text_rows"].get<int64_t>()), Modality::kText);
  for (const auto& b : c["vision_blocks"])
    for (int i = 0; i < b[1].get<int>(); ++i) text[static_cast<size_t>(b[0].get<int>() + i)] = Modality::kVideo;
  auto layout = pack_request(tiny, *geo, text);
  EXPECT_TRUE(layout.ok()) << layout.status().to_string();
  return {std::move(*layout), c["name"].get<std::string>()};
}

TEST(Fl2vaPackingParity, PositionsAndTagsBitIdentical) {
  const nlohmann::json j = parity::read_json("fl2va_packing.json");
  ASSERT_TRUE(j.is_object()) << "missing " << parity::fixtures_dir() << "/fl2va_packing.json";
  int checked = 0, with_keyframes = 0;
  for (const auto& c : j["cases"]) {
    const Built b = build(c);
    SCOPED_TRACE(b.what);
    const RequestGeometry& g = b.layout.geo;
    EXPECT_EQ(g.frames, c["aligned_frames"].get<int>());
    EXPECT_EQ(g.latent_frames, c["latent_frames"].get<int>());
    EXPECT_EQ(g.audio_latents, c["audio_latents"].get<int>());
    EXPECT_EQ(g.total_rows(), c["rows"].get<int64_t>());
    EXPECT_EQ(g.condition_rows(), c["condition_rows"].get<int64_t>());
    std::vector<double> pos;
    for (const auto& p : b.layout.positions) pos.insert(pos.end(), p.begin(), p.end());
    EXPECT_EQ(sha256_hex(pos.data(), pos.size() * sizeof(double)), c["positions_sha256"].get<std::string>());
    std::vector<int64_t> tags;
    for (Modality m : b.layout.modality) tags.push_back(static_cast<int64_t>(m));  // 0 video, 1 text, 2 audio
    EXPECT_EQ(sha256_hex(tags.data(), tags.size() * sizeof(int64_t)), c["tags_sha256"].get<std::string>());
    for (size_t k = 0; k < c["condition_times"].size(); ++k) {
      const double t =
          b.layout.positions[static_cast<size_t>(g.condition_start() + static_cast<int64_t>(k) * g.frame_rows())][0];
      EXPECT_EQ(t, c["condition_times"][k].get<double>()) << "keyframe " << k;
    }
    ++checked;
    with_keyframes += !c["anchors"].empty();
  }
  EXPECT_GE(checked, 7);
  EXPECT_GE(with_keyframes, 6);
}

TEST(Fl2vaPackingParity, RowTimestepsThroughFinalSegments) {
  const nlohmann::json j = parity::read_json("fl2va_packing.json");
  ASSERT_TRUE(j.is_object());
  int checked = 0;
  for (const auto& c : j["cases"]) {
    const Built b = build(c);
    SCOPED_TRACE(b.what);
    for (const auto& ts : c["timesteps"]) {
      const float tv = ts["t_video"].get<float>(), ta = ts["t_audio"].get<float>();
      const std::vector<float> slot_t = {tv, ta, std::max(tv, kKeyframeNoiseAug)};
      // Per-row timestep from the final-layer segments (slots: 0 video, 1 audio, 2 conditioning).
      const parity::RowTimestepSignature sig = parity::row_timestep_signature(b.layout.final_segments(0, 1, 2), slot_t);
      EXPECT_EQ(sig.values_f32_bits, ts["values_f32_bits"].get<std::vector<std::string>>()) << "t_video " << tv;
      EXPECT_EQ(sig.inverse_sha256, ts["inverse_sha256"].get<std::string>()) << "t_video " << tv;
      ++checked;
    }
  }
  EXPECT_GE(checked, 28);
}

TEST(Fl2vaPackingParity, BlockSegmentsFollowTheTags) {
  const nlohmann::json j = parity::read_json("fl2va_packing.json");
  for (const auto& c : j["cases"]) {
    const Built b = build(c);
    SCOPED_TRACE(b.what);
    const SegmentTable seg = b.layout.block_segments(0, 1, 2);
    int64_t covered = 0, prev = 0;
    for (const auto& s : seg.segments) {
      EXPECT_EQ(s.start, prev);
      prev = s.stop;
      covered += s.stop - s.start;
      for (int64_t r = s.start; r < s.stop; ++r) {
        const Modality m = b.layout.modality[static_cast<size_t>(r)];
        ASSERT_EQ(s.table_row % kNumModalities, static_cast<int>(m)) << "row " << r;
        const bool condition = r >= b.layout.geo.condition_start() && r < b.layout.geo.audio_start();
        const int slot = condition ? 2 : (m == Modality::kAudio ? 1 : 0);
        ASSERT_EQ(s.table_row / kNumModalities, slot) << "row " << r;
      }
    }
    EXPECT_EQ(covered, b.layout.geo.total_rows());
  }
}

TEST(Fl2vaPackingParity, ConditionRowsEqualPrepareConditionLatentsStep) {
  auto f = SafetensorsFile::open(parity::fixtures_dir() + "/fl2va_condition.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const Tensor want = *f->tensor("condition_rows");
  ModelConfig cfg = ModelConfig::h3_tiny();
  cfg.in_channels = 24;
  std::vector<float> got;
  for (int i = 0; i < 2; ++i) {
    const Tensor lat = *f->tensor("latents." + std::to_string(i));
    const Tensor noise = *f->tensor("noise." + std::to_string(i));
    Tensor lat_c = Tensor::empty(lat.shape(), DType::kF32), noise_c = Tensor::empty(noise.shape(), DType::kF32);
    std::memcpy(lat_c.data<float>(), lat.data<float>(), lat.nbytes());
    std::memcpy(noise_c.data<float>(), noise.data<float>(), noise.nbytes());
    auto noised = noise_condition_latents(lat_c, noise_c);
    ASSERT_TRUE(noised.ok()) << noised.status().to_string();
    auto rows = patchify_video(cfg, *noised);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    got.insert(got.end(), rows->data<float>(), rows->data<float>() + rows->numel());
  }
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.numel());
  EXPECT_EQ(std::memcmp(got.data(), want.data<float>(), got.size() * sizeof(float)), 0);
  // And the mix is not the identity: the noise moved every row.
  const Tensor lat0 = *f->tensor("latents.0");
  EXPECT_NE(std::memcmp(got.data(), lat0.data<float>(), 4 * sizeof(float)), 0);
}

TEST(Fl2vaPacking, Errors) {
  const ModelConfig tiny = ModelConfig::h3_tiny();
  auto geo = make_geometry(tiny, 96, 64, 22, 4);
  ASSERT_TRUE(geo.ok());
  EXPECT_FALSE(pack_request(tiny, *geo, {Modality::kText}).ok());  // 1 tag for 4 text rows
  EXPECT_FALSE(pack_request(tiny, *geo, std::vector<Modality>(4, Modality::kAudio)).ok());
  Tensor a = Tensor::empty({24, 1, 6, 8}, DType::kF32), b = Tensor::empty({24, 1, 6, 6}, DType::kF32);
  EXPECT_FALSE(noise_condition_latents(a, b).ok());
}

}  // namespace
}  // namespace vortex
