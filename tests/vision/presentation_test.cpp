// The fl2va presentation against diffusers' MiniMaxH3FL2VATextEncoderStep and transformers' get_rope_index
// (tests/vision/make_presentation_fixtures.py, the repository's Qwen tokenizer): token ids, per-row tags and M-RoPE
// positions equal for one and two keyframes on small and real canvases; errors.
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "vision/keyframe_presentation.h"
#include "vision/positions_check.h"

namespace vortex {
namespace {

const Tokenizer& qwen() {
  static const Tokenizer t = [] {
    auto r = Tokenizer::from_json_file(VORTEX_QWEN_TOKENIZER);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(*r);
  }();
  return t;
}

TEST(KeyframePresentation, EqualsDiffusersAndGetRopeIndex) {
  const nlohmann::json j =
      nlohmann::json::parse(std::ifstream(std::string(VORTEX_VISION_FIXTURES) + "/presentation.json"));
  int checked = 0;
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<std::pair<int, int>> grids;
    for (const auto& g : c["grid_thw"]) grids.push_back({g[1].get<int>(), g[2].get<int>()});
    auto p = build_keyframe_presentation(qwen(), grids, 2, c["prompt"].get<std::string>());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->ids, c["token_ids"].get<std::vector<int32_t>>());
    std::vector<int> tags;
    for (Modality m : p->tags) tags.push_back(static_cast<int>(m));  // 0 video, 1 text
    EXPECT_EQ(tags, c["tags"].get<std::vector<int>>());
    expect_positions_equal(p->positions, c);
    int64_t pads = 0;
    for (auto [gh, gw] : grids) pads += static_cast<int64_t>(gh / 2) * (gw / 2);
    EXPECT_EQ(static_cast<int64_t>(p->image_pad_rows.size()), pads);
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(KeyframePresentation, Errors) {
  EXPECT_FALSE(build_keyframe_presentation(qwen(), {{16, 21}}, 2, "x").ok());
  EXPECT_FALSE(build_keyframe_presentation(qwen(), {{16, 20}}, 2, "a <|image_pad|> b").ok());
  auto text_only = build_keyframe_presentation(qwen(), {}, 2, "a cat");
  ASSERT_TRUE(text_only.ok());
  EXPECT_TRUE(text_only->image_pad_rows.empty());
}

}  // namespace
}  // namespace vortex
