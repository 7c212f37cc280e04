// The fl2va presentation against diffusers' MiniMaxH3FL2VATextEncoderStep and transformers' get_rope_index
// (tests/vision/make_presentation_fixtures.py, the repository's Qwen tokenizer): token ids, per-row tags and M-RoPE
// positions equal for one and two keyframes on small and real canvases; errors.
#include <openssl/sha.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "vision/keyframe_presentation.h"

namespace vortex {
namespace {

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(static_cast<const unsigned char*>(data), n, md);
  char hex[2 * SHA256_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) std::snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return hex;
}

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
    const int64_t n = static_cast<int64_t>(p->ids.size());
    std::vector<int64_t> pos64(static_cast<size_t>(3 * n));
    for (int64_t i = 0; i < 3 * n; ++i) pos64[static_cast<size_t>(i)] = p->positions.data<int32_t>()[i];
    EXPECT_EQ(sha256_hex(pos64.data(), pos64.size() * 8), c["positions_sha256"].get<std::string>());
    if (c.contains("positions")) {
      for (int a = 0; a < 3; ++a)
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(pos64[static_cast<size_t>(a * n + i)], c["positions"][a][i].get<int64_t>())
              << "axis " << a << " row " << i;
        }
    }
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
