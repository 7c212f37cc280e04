// The ref2va presentation against diffusers' MiniMaxH3Ref2VATextEncoderStep and transformers' get_rope_index
// (tests/vision/make_ref2va_presentation_fixtures.py, the repository's Qwen tokenizer, the release's processor
// configs): the 2 fps frame sampling and pair timestamps; token ids, per-row tags and M-RoPE positions equal for
// images, audio clips and videos with and without sound in mixed orders; errors.
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "vision/positions_check.h"
#include "vision/ref2va_presentation.h"

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

const nlohmann::json& fixture() {
  static const nlohmann::json j =
      nlohmann::json::parse(std::ifstream(std::string(VORTEX_VISION_FIXTURES) + "/ref2va_presentation.json"));
  return j;
}

TEST(Ref2vaPresentation, VideoSamplingAndTimestampsEqualDiffusers) {
  int checked = 0;
  for (const auto& s : fixture()["sampling"]) {
    auto got = sample_reference_video_frames(s["frames"].get<int64_t>());
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->indices, s["indices"].get<std::vector<int64_t>>()) << s["frames"];
    EXPECT_EQ(got->block_timestamps, s["block_timestamps"].get<std::vector<double>>()) << s["frames"];
    ++checked;
  }
  EXPECT_GE(checked, 15);
  EXPECT_FALSE(sample_reference_video_frames(12).ok());  // one sampled frame: no pair to merge
  EXPECT_TRUE(sample_reference_video_frames(13).ok());
  // Round half to even, as Python's format: the first 2 fps pair is 0.25 s.
  EXPECT_EQ(video_block_label(0.25), "<0.2 seconds>");
  EXPECT_EQ(video_block_label(1.25), "<1.2 seconds>");
  EXPECT_EQ(video_block_label(2.0), "<2.0 seconds>");
  EXPECT_EQ(video_block_label(0.75), "<0.8 seconds>");
}

TEST(Ref2vaPresentation, EqualsDiffusersAndGetRopeIndex) {
  int checked = 0, videos = 0;
  for (const auto& c : fixture()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<Ref2vaPresentationReference> refs;
    size_t image = 0, video = 0;
    for (const auto& r : c["references"]) {
      Ref2vaPresentationReference p;
      const std::string kind = r["kind"].get<std::string>();
      p.has_audio = r["sound"].get<bool>();
      if (kind == "image") {
        p.kind = ReferenceKind::kImage;
        const auto& g = c["image_grid_thw"][image++];
        p.grid = {g[1].get<int>(), g[2].get<int>()};
      } else if (kind == "video") {
        p.kind = ReferenceKind::kVideo;
        const auto& g = c["video_grid_thw"][video++];
        p.grid = {g[1].get<int>(), g[2].get<int>()};
        auto s = sample_reference_video_frames(r["frames"].get<int64_t>());
        ASSERT_TRUE(s.ok()) << s.status().to_string();
        ASSERT_EQ(static_cast<int64_t>(s->block_timestamps.size()), g[0].get<int64_t>());  // blocks = grid t
        p.block_timestamps = s->block_timestamps;
        ++videos;
      } else {
        p.kind = ReferenceKind::kAudio;
      }
      refs.push_back(p);
    }
    auto p = build_ref2va_presentation(qwen(), refs, 2, c["prompt"].get<std::string>());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->ids, c["token_ids"].get<std::vector<int32_t>>());
    std::vector<int> tags;
    for (Modality m : p->tags) tags.push_back(static_cast<int>(m));  // 0 video, 1 text
    EXPECT_EQ(tags, c["tags"].get<std::vector<int>>());
    expect_positions_equal(p->positions, c);
    const int32_t image_pad = *qwen().token_id("<|image_pad|>"), video_pad = *qwen().token_id("<|video_pad|>");
    for (int64_t r : p->image_pad_rows) EXPECT_EQ(p->ids[static_cast<size_t>(r)], image_pad);
    for (int64_t r : p->video_pad_rows) EXPECT_EQ(p->ids[static_cast<size_t>(r)], video_pad);
    EXPECT_EQ(
        static_cast<int64_t>(p->image_pad_rows.size() + p->video_pad_rows.size()),
        std::count(p->ids.begin(), p->ids.end(), image_pad) + std::count(p->ids.begin(), p->ids.end(), video_pad));
    ++checked;
  }
  EXPECT_EQ(checked, 4);
  EXPECT_GE(videos, 4);
}

TEST(Ref2vaPresentation, Errors) {
  Ref2vaPresentationReference img;
  img.grid = {4, 6};
  EXPECT_TRUE(build_ref2va_presentation(qwen(), {img}, 2, "ok").ok());
  EXPECT_FALSE(build_ref2va_presentation(qwen(), {img}, 2, "a <|video_pad|> inside").ok());
  img.grid = {5, 6};
  EXPECT_FALSE(build_ref2va_presentation(qwen(), {img}, 2, "odd grid").ok());
  Ref2vaPresentationReference vid;
  vid.kind = ReferenceKind::kVideo;
  vid.grid = {4, 4};
  EXPECT_FALSE(build_ref2va_presentation(qwen(), {vid}, 2, "a video without blocks").ok());
}

}  // namespace
}  // namespace vortex
