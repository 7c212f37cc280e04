// ref2va packing against diffusers 0.42.1 (fixtures from tests/parity/make_ref2va_fixtures.py): the
// [text | reference blocks | audio | video] layout of build_ref2va_packed_sequence bit for bit (FP64 positions and
// modality tags) for images, audio clips, videos with and without a soundtrack, in mixed orders, on tiny canvases,
// the canonical request and long portrait videos; the per-row timesteps of build_row_timesteps through the
// final-layer segments (visual references at max(t_v, 0.999), reference audio at 1.0); block segments by tag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "engine/run_manifest.h"  // sha256_hex
#include "model/packing.h"
#include "parity/parity_fixtures.h"
#include "parity/row_timesteps.h"

namespace vortex {
namespace {

ReferenceKind kind_of(const std::string& s) {
  return s == "image" ? ReferenceKind::kImage : s == "video" ? ReferenceKind::kVideo : ReferenceKind::kAudio;
}

PackedLayout build(const nlohmann::json& c) {
  const ModelConfig tiny = ModelConfig::h3_tiny();  // no pixel-area cap
  auto geo = make_geometry(tiny, c["width"].get<int>(), c["height"].get<int>(), c["frames"].get<int>(),
                           c["text_rows"].get<int64_t>());
  EXPECT_TRUE(geo.ok()) << geo.status().to_string();
  for (const auto& r : c["references"]) {
    ReferenceBlock b;
    b.kind = kind_of(r["kind"].get<std::string>());
    b.latent_frames = r["latent_frames"].get<int>();
    b.latent_h = r["latent_h"].get<int>();
    b.latent_w = r["latent_w"].get<int>();
    b.audio_latents = r["audio_latents"].get<int>();
    geo->references.push_back(b);
  }
  std::vector<Modality> text(static_cast<size_t>(c["text_rows"].get<int64_t>()), Modality::kText);
  for (const auto& b : c["vision_blocks"])
    for (int i = 0; i < b[1].get<int>(); ++i) text[static_cast<size_t>(b[0].get<int>() + i)] = Modality::kVideo;
  auto layout = pack_request(tiny, *geo, text);
  EXPECT_TRUE(layout.ok()) << layout.status().to_string();
  return layout.ok() ? std::move(*layout) : PackedLayout{};
}

const nlohmann::json& fixture() {
  static const nlohmann::json j = parity::read_json("ref2va_packing.json");
  return j;
}

TEST(Ref2vaPackingParity, PositionsAndTagsBitIdentical) {
  ASSERT_TRUE(fixture().is_object()) << "missing " << parity::fixtures_dir() << "/ref2va_packing.json";
  int checked = 0;
  for (const auto& c : fixture()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const PackedLayout layout = build(c);
    const RequestGeometry& g = layout.geo;
    ASSERT_EQ(g.total_rows(), c["rows"].get<int64_t>());
    EXPECT_EQ(g.frames, c["aligned_frames"].get<int>());
    EXPECT_EQ(g.latent_frames, c["latent_frames"].get<int>());
    EXPECT_EQ(g.audio_latents, c["audio_latents"].get<int>());
    int64_t ref_video = 0, ref_audio = 0;
    for (const ReferenceBlock& r : g.references) {
      ref_video += r.video_rows();
      ref_audio += r.audio_rows();
    }
    EXPECT_EQ(ref_video, c["condition_video_rows"].get<int64_t>());
    EXPECT_EQ(ref_audio, c["condition_audio_rows"].get<int64_t>());
    std::vector<double> pos;
    for (const auto& p : layout.positions) pos.insert(pos.end(), p.begin(), p.end());
    EXPECT_EQ(sha256_hex(pos.data(), pos.size() * sizeof(double)), c["positions_sha256"].get<std::string>());
    std::vector<int64_t> tags;
    for (Modality m : layout.modality) tags.push_back(static_cast<int64_t>(m));  // 0 video, 1 text, 2 audio
    EXPECT_EQ(sha256_hex(tags.data(), tags.size() * sizeof(int64_t)), c["tags_sha256"].get<std::string>());
    // The first row of each block, readable when a hash differs.
    int64_t row = g.condition_start();
    for (size_t k = 0; k < g.references.size(); ++k) {
      const auto want = c["reference_first_positions"][k].get<std::vector<double>>();
      const auto& got = layout.positions[static_cast<size_t>(row)];
      EXPECT_EQ(std::vector<double>(got.begin(), got.end()), want) << "reference " << k;
      row += g.references[k].rows();
    }
    EXPECT_EQ(row, g.audio_start());
    const auto& a = layout.positions[static_cast<size_t>(g.audio_start())];
    const auto& v = layout.positions[static_cast<size_t>(g.video_start())];
    EXPECT_EQ(std::vector<double>(a.begin(), a.end()), c["generated_audio_first_position"].get<std::vector<double>>());
    EXPECT_EQ(std::vector<double>(v.begin(), v.end()), c["generated_video_first_position"].get<std::vector<double>>());
    ++checked;
  }
  EXPECT_GE(checked, 7);
}

TEST(Ref2vaPackingParity, RowTimestepsThroughFinalSegments) {
  ASSERT_TRUE(fixture().is_object());
  int checked = 0;
  for (const auto& c : fixture()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const PackedLayout layout = build(c);
    for (const auto& ts : c["timesteps"]) {
      const float tv = ts["t_video"].get<float>(), ta = ts["t_audio"].get<float>();
      // Slots: 0 video, 1 audio, 2 visual conditioning, 3 reference audio.
      const std::vector<float> slot_t = {tv, ta, std::max(tv, kKeyframeNoiseAug), 1.0f};
      const parity::RowTimestepSignature sig =
          parity::row_timestep_signature(layout.final_segments(0, 1, 2, 3), slot_t);
      EXPECT_EQ(sig.values_f32_bits, ts["values_f32_bits"].get<std::vector<std::string>>()) << "t_video " << tv;
      EXPECT_EQ(sig.inverse_sha256, ts["inverse_sha256"].get<std::string>()) << "t_video " << tv;
      ++checked;
    }
  }
  EXPECT_GE(checked, 28);
}

TEST(Ref2vaPackingParity, BlockSegmentsFollowTheTags) {
  int checked = 0;
  for (const auto& c : fixture()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const PackedLayout layout = build(c);
    const SegmentTable seg = layout.block_segments(0, 1, 2, 3);
    int64_t prev = 0;
    for (const auto& s : seg.segments) {
      EXPECT_EQ(s.start, prev);
      prev = s.stop;
      const int slot = s.table_row / kNumModalities;
      const auto tag = static_cast<Modality>(s.table_row % kNumModalities);
      for (int64_t r = s.start; r < s.stop; ++r) {
        ASSERT_EQ(layout.modality[static_cast<size_t>(r)], tag) << "row " << r;
        const bool text = r < layout.geo.condition_start();
        const bool reference = !text && r < layout.geo.audio_start();
        const int want = text ? 0 : reference ? (tag == Modality::kAudio ? 3 : 2) : (tag == Modality::kAudio ? 1 : 0);
        ASSERT_EQ(slot, want) << "row " << r;
      }
    }
    EXPECT_EQ(prev, layout.geo.total_rows());
    ++checked;
  }
  EXPECT_GE(checked, 7);
}

TEST(Ref2vaPacking, RefusesBadReferences) {
  const ModelConfig tiny = ModelConfig::h3_tiny();
  auto geo = make_geometry(tiny, 96, 64, 22, 4);
  ASSERT_TRUE(geo.ok());
  auto refuse = [&](ReferenceBlock b, const char* why) {
    RequestGeometry g = *geo;
    g.references = {b};
    auto r = pack_request(tiny, g);
    EXPECT_FALSE(r.ok()) << why;
  };
  refuse({ReferenceKind::kImage, 2, 4, 4, 0}, "an image of two frames");
  refuse({ReferenceKind::kImage, 1, 5, 4, 0}, "an odd latent height");
  refuse({ReferenceKind::kImage, 1, 4, 4, 3}, "an image with audio");
  refuse({ReferenceKind::kAudio, 0, 0, 0, 0}, "an empty audio clip");
  refuse({ReferenceKind::kAudio, 1, 4, 4, 3}, "an audio clip with video geometry");
  refuse({ReferenceKind::kVideo, 0, 4, 4, 3}, "a video without frames");
  refuse({ReferenceKind::kVideo, 2, 4, 4, -1}, "a negative soundtrack");
  RequestGeometry both = *geo;
  both.keyframes = {KeyframeAnchor::kFirst};
  both.references = {{ReferenceKind::kImage, 1, 4, 4, 0}};
  EXPECT_FALSE(pack_request(tiny, both).ok());
}

}  // namespace
}  // namespace vortex
