// Request packing against diffusers' own MiniMaxH3PrepareLayoutStep.build_packed_sequence
// (fixtures/packing.json): frame snapping (align_num_frames for every count 1..199), latent and audio
// counts, and the SHA-256 of the FP64 position grid, of its FP32 cast (what the RoPE reads) and of the
// modality tags, for real request shapes including the canonical 1344x768x124 one.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstring>

#include "engine/run_manifest.h"  // sha256_hex
#include "model/packing.h"
#include "parity/parity_fixtures.h"

namespace vortex {
namespace {

// diffusers' tags: 0 video, 1 text, 2 audio (MINIMAX_H3 video_tag / text / audio_tag).
int64_t diffusers_tag(Modality m) {
  switch (m) {
    case Modality::kVideo:
      return 0;
    case Modality::kText:
      return 1;
    case Modality::kAudio:
      return 2;
  }
  return -1;
}

TEST(PackingParity, FrameSnappingMatchesAlignNumFrames) {
  const nlohmann::json j = parity::read_json("packing.json");
  ASSERT_TRUE(j.is_object()) << "missing " << parity::fixtures_dir() << "/packing.json";
  ASSERT_GE(j["align_num_frames"].size(), 190u);
  for (const auto& [k, v] : j["align_num_frames"].items()) {
    EXPECT_EQ(snap_frames_up(std::stoi(k)), v.get<int>()) << "frames " << k;
  }
}

TEST(PackingParity, PositionsAndTagsBitIdentical) {
  const nlohmann::json j = parity::read_json("packing.json");
  ASSERT_TRUE(j.is_object());
  const ModelConfig tiny = ModelConfig::h3_tiny();  // no pixel-area cap: every fixture shape is legal
  int checked = 0;
  for (const auto& r : j["requests"]) {
    const std::string what = std::to_string(r["width"].get<int>()) + "x" + std::to_string(r["height"].get<int>()) +
                             " frames " + std::to_string(r["frames"].get<int>()) + " text " +
                             std::to_string(r["text_rows"].get<int>());
    auto geo = make_geometry(tiny, r["width"], r["height"], r["frames"], r["text_rows"].get<int64_t>());
    ASSERT_TRUE(geo.ok()) << what << ": " << geo.status().to_string();
    EXPECT_EQ(geo->frames, r["aligned_frames"].get<int>()) << what;
    EXPECT_EQ(geo->latent_frames, r["latent_frames"].get<int>()) << what;
    EXPECT_EQ(geo->latent_h, r["latent_h"].get<int>()) << what;
    EXPECT_EQ(geo->latent_w, r["latent_w"].get<int>()) << what;
    EXPECT_EQ(geo->audio_latents, r["audio_latents"].get<int>()) << what;
    ASSERT_EQ(geo->total_rows(), r["rows"].get<int64_t>()) << what;
    EXPECT_EQ(geo->audio_start(), r["audio_indices"][0].get<int64_t>()) << what;
    EXPECT_EQ(geo->video_start(), r["video_indices"][0].get<int64_t>()) << what;
    EXPECT_EQ(geo->video_rows, r["video_indices"][2].get<int64_t>()) << what;
    auto layout = pack_request(tiny, *geo);
    ASSERT_TRUE(layout.ok()) << what;
    const size_t n = layout->positions.size();
    std::vector<double> pos64(3 * n);
    std::vector<float> pos32(3 * n);
    std::vector<int64_t> tags(n);
    for (size_t i = 0; i < n; ++i) {
      for (int a = 0; a < 3; ++a) {
        pos64[3 * i + a] = layout->positions[i][static_cast<size_t>(a)];
        pos32[3 * i + a] = static_cast<float>(pos64[3 * i + a]);
      }
      tags[i] = diffusers_tag(layout->modality[i]);
    }
    EXPECT_EQ(sha256_hex(pos64.data(), pos64.size() * 8), r["position_ids_f64_sha256"].get<std::string>()) << what;
    EXPECT_EQ(sha256_hex(pos32.data(), pos32.size() * 4), r["position_ids_f32_sha256"].get<std::string>()) << what;
    EXPECT_EQ(sha256_hex(tags.data(), tags.size() * 8), r["token_tags_i64_sha256"].get<std::string>()) << what;
    if (r.contains("position_ids_f64_bits")) {
      // Small shapes carry the values themselves: name the first differing coordinate.
      const auto& want = r["position_ids_f64_bits"];
      ASSERT_EQ(want.size(), pos64.size()) << what;
      for (size_t i = 0; i < pos64.size(); ++i) {
        uint64_t b;
        std::memcpy(&b, &pos64[i], 8);
        if (b != want[i].get<uint64_t>()) {
          ADD_FAILURE() << what << ": row " << i / 3 << " axis " << i % 3 << " = " << pos64[i] << " differs";
          break;
        }
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 9);
}

}  // namespace
}  // namespace vortex
