// The ref2va part of the POST /v1/videos parser (src/serve/request.h) in SGLang's minimax_h3 dialect: verbatim copies
// of the cookbook's two ref2va bodies (tests/fixtures/sglang_minimax_h3, with their source and commit) parse to the
// request they describe or are refused naming the field Vortex does not take; references map onto
// RunRequest::references in the order of conditions[] with their kinds; data URLs are decoded and handed back for the
// job folder; every limit of the release and every malformed condition is refused naming its field.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "serve/request.h"

#ifndef VORTEX_SGLANG_FIXTURES
#error "VORTEX_SGLANG_FIXTURES must name tests/fixtures/sglang_minimax_h3"
#endif

namespace vortex::serve {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string read(const std::string& name) {
  std::ifstream in(fs::path(VORTEX_SGLANG_FIXTURES) / name, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<RunRequest> parse(const std::string& body, std::string* field, ReferenceInputs* refs = nullptr,
                         const std::string& input_dir = "/data/minimax-h3") {
  RequestLimits limits;
  limits.input_dir = input_dir;
  return parse_video_request(body, limits, RunRequest{}, field, nullptr, refs);
}

json condition(const std::string& type, const std::string& uri) {
  return {{"type", type}, {"uri", uri}, {"role", "reference"}};
}

std::string body_of(const json& conditions) {
  return json{{"prompt", "p"}, {"task", "ref2va"}, {"conditions", conditions}}.dump();
}

TEST(ServeRef2vaRequest, CookbookMultimodalBodyMapsOntoReferencesInOrder) {
  std::string field;
  Result<RunRequest> r = parse(read("ref2va_request.json"), &field);
  ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
  EXPECT_EQ(r->references,
            (std::vector<std::string>{"image:/data/minimax-h3/reference.png", "audio:/data/minimax-h3/reference.mp3"}));
  EXPECT_FALSE(r->keyframes.any());
  EXPECT_FALSE(r->canvas_from_keyframe);
  // aspect_ratio "auto" on ref2va: the model's 16:9 fallback at the 768 short edge (SGLang's cookbook, section 8).
  EXPECT_EQ(r->width, 1344);
  EXPECT_EQ(r->height, 768);
  EXPECT_EQ(r->seconds, 5.0);
  EXPECT_EQ(r->steps, 49);  // num_inference_steps 50 counts the terminal sigma
  EXPECT_EQ(r->seed, 3101u);
  EXPECT_EQ(r->video_shift, 12.0);
  EXPECT_EQ(r->audio_shift, 3.0);
  EXPECT_EQ(r->prompt,
            "Use <Picture 1> as the visual subject and <Audio 1> as the sound reference, with coherent natural "
            "motion.");
}

TEST(ServeRef2vaRequest, CookbookV2vBodyIsRefusedAtItsStartTime) {
  // The V2V tab seeks 35 s into its video; Vortex reads a reference from its start.
  std::string field;
  Result<RunRequest> r = parse(read("ref2va_v2v_request.json"), &field);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(field, "conditions[0].start_time_seconds");
  EXPECT_NE(r.status().message().find("from its start"), std::string::npos) << r.status().message();
  // The same body from the start (0, SGLang's default) is the request it describes.
  json body = json::parse(read("ref2va_v2v_request.json"));
  body["conditions"][0]["start_time_seconds"] = 0;
  r = parse(body.dump(), &field);
  ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
  EXPECT_EQ(r->references, (std::vector<std::string>{"video:/data/minimax-h3/input.mp4"}));
  EXPECT_EQ(r->width, 1344);
  EXPECT_EQ(r->height, 768);
  EXPECT_EQ(r->seed, 4101u);
  body["conditions"][0].erase("start_time_seconds");
  r = parse(body.dump(), &field);
  ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
}

TEST(ServeRef2vaRequest, DataUrlsAndVideoAudioGoToTheServer) {
  const std::string png = "\x89PNG\r\n\x1a\n-bytes";
  // base64 of png, computed by hand: the parser must hand the exact bytes back.
  const std::string b64 = "iVBORw0KGgotYnl0ZXM=";
  const json conditions = {
      condition("video_audio", "file:///data/minimax-h3/clip.mp4"), condition("image", "data:image/png;base64," + b64),
      condition("audio", "data:audio/wav;base64,UklGRg=="), condition("video", "data:video/mp4;base64,AAAAGGZ0eXA=")};
  ReferenceInputs refs;
  std::string field;
  Result<RunRequest> r = parse(body_of(conditions), &field, &refs);
  ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
  // Packed order kept; uploads' paths are for the server to fill.
  EXPECT_EQ(r->references, (std::vector<std::string>{"video:/data/minimax-h3/clip.mp4", "image:", "audio:", "video:"}));
  ASSERT_EQ(refs.uploads.size(), 3u);
  EXPECT_EQ(refs.uploads[0].index, 1u);
  EXPECT_EQ(refs.uploads[0].kind, "image");
  EXPECT_EQ(refs.uploads[0].ext, "png");
  EXPECT_EQ(refs.uploads[0].bytes, png);
  EXPECT_EQ(refs.uploads[1].index, 2u);
  EXPECT_EQ(refs.uploads[1].kind, "audio");
  EXPECT_EQ(refs.uploads[1].ext, "wav");
  EXPECT_EQ(refs.uploads[1].bytes, "RIFF");
  EXPECT_EQ(refs.uploads[2].index, 3u);
  EXPECT_EQ(refs.uploads[2].kind, "video");
  EXPECT_EQ(refs.uploads[2].ext, "mp4");
  EXPECT_EQ(refs.with_soundtrack, (std::vector<size_t>{0}));
  // Without the server's hands (no ReferenceInputs), data URLs and video_audio are refused, not dropped.
  r = parse(body_of(json::array({condition("image", "data:image/png;base64," + b64)})), &field);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(field, "conditions[0].uri");
  r = parse(body_of(json::array({condition("video_audio", "file:///data/minimax-h3/clip.mp4")})), &field);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(field, "conditions[0].type");
}

TEST(ServeRef2vaRequest, TheReleaseLimitsAreCheckedOnTheDeclaredKinds) {
  auto many = [](const std::string& type, int n) {
    json c = json::array();
    for (int i = 0; i < n; ++i) c.push_back(condition(type, "file:///data/minimax-h3/" + std::to_string(i)));
    return c;
  };
  auto concat = [](json a, const json& b) {
    for (const json& e : b) a.push_back(e);
    return a;
  };
  struct Case {
    json conditions;
    std::string says;
  };
  const Case cases[] = {
      {many("image", 10), "at most 9 image references, got 10"},
      {concat(many("video", 2), many("video_audio", 2)), "at most 3 video references, got 4"},
      {concat(many("image", 1), many("audio", 4)), "at most 3 audio references, got 4"},
      {concat(concat(many("image", 9), many("video", 3)), many("audio", 1)), "at most 12 references in total, got 13"},
      {many("audio", 2), "cannot be used on its own"},
      {json::array(), "needs at least one reference"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    std::string field;
    ReferenceInputs refs;
    Result<RunRequest> r = parse(body_of(c.conditions), &field, &refs);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(field, "conditions");
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
  // At the limits: 9 images, 3 videos; and 3 audio clips beside an image. Accepted.
  for (const json& ok : {concat(many("image", 9), many("video", 3)), concat(many("image", 1), many("audio", 3))}) {
    std::string field;
    ReferenceInputs refs;
    Result<RunRequest> r = parse(body_of(ok), &field, &refs);
    ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
    EXPECT_EQ(r->references.size(), ok.size());
  }
}

TEST(ServeRef2vaRequest, EachMalformedConditionIsRefusedNamingItsField) {
  const std::string good = "file:///data/minimax-h3/a.png";
  struct Case {
    json condition;
    std::string field, says;
    std::string input_dir = "/data/minimax-h3";
  };
  const Case cases[] = {
      {condition("sticker", good), "conditions[0].type", "got 'sticker'"},
      {json{{"uri", good}, {"role", "reference"}}, "conditions[0].type", "must be \"image\", \"video\""},
      {json{{"type", "image"}, {"uri", good}, {"role", "keyframe"}}, "conditions[0].role", "fl2va's"},
      {json{{"type", "image"}, {"uri", good}, {"role", "style"}}, "conditions[0].role", "must be \"reference\""},
      {json{{"type", "image"}, {"uri", good}, {"frame_index", 0}}, "conditions[0].frame_index", "fl2va keyframe"},
      {json{{"type", "image"}, {"uri", good}, {"weight", 1}}, "conditions[0]", "unknown field"},
      {json{{"type", "image"}, {"uri", good}, {"start_time_seconds", 0}}, "conditions[0].start_time_seconds",
       "applies to a video reference"},
      {json{{"type", "video"}, {"uri", good}, {"start_time_seconds", -1}}, "conditions[0].start_time_seconds",
       "non-negative"},
      {json{{"type", "image"}}, "conditions[0].uri", "non-empty string"},
      {condition("image", "https://example.com/a.png"), "conditions[0].uri", "fetches no remote files"},
      {condition("video", "http://example.com/a.mp4"), "conditions[0].uri", "fetches no remote files"},
      {condition("image", "ftp://example.com/a.png"), "conditions[0].uri", "file:///ABSOLUTE/PATH"},
      {condition("image", "file:///etc/passwd"), "conditions[0].uri", "inside the server's input folder"},
      {condition("image", "file:///data/minimax-h3/../../etc/passwd"), "conditions[0].uri",
       "inside the server's input folder"},
      {condition("image", good), "conditions[0].uri", "reads no local files", ""},
      {condition("image", "data:audio/wav;base64,UklGRg=="), "conditions[0].uri", "image/png, image/jpeg"},
      {condition("video", "data:audio/wav;base64,UklGRg=="), "conditions[0].uri", "video/mp4, video/quicktime"},
      {condition("video", "data:video/avi;base64,UklGRg=="), "conditions[0].uri", "video/mp4"},
      {condition("image", "data:image/png;base64,not base64!"), "conditions[0].uri", "malformed or empty"},
      {condition("image", "data:image/png;base64,"), "conditions[0].uri", "malformed or empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.condition.dump());
    std::string field;
    ReferenceInputs refs;
    Result<RunRequest> r = parse(body_of(json::array({c.condition})), &field, &refs, c.input_dir);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(field, c.field);
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
    EXPECT_TRUE(refs.uploads.empty());
  }
  // A symbolic link inside the input folder that leads out of it is refused too.
  const fs::path dir = fs::temp_directory_path() / ("vortex_ref2va_request_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink("/etc", dir / "out");
  std::string field;
  ReferenceInputs refs;
  Result<RunRequest> r =
      parse(body_of(json::array({condition("image", "file://" + (dir / "out" / "hostname").string())})), &field, &refs,
            dir.string());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(field, "conditions[0].uri");
  fs::remove_all(dir);
}

TEST(ServeRef2vaRequest, TaskAndConditionsMustAgree) {
  std::string field;
  // t2va takes no reference; fl2va's keyframe parser refuses a reference; an unknown task names the three.
  Result<RunRequest> r = parse(
      json{{"prompt", "p"}, {"task", "t2va"}, {"conditions", {condition("image", "file:///data/minimax-h3/a.png")}}}
          .dump(),
      &field);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(field, "conditions");
  r = parse(
      json{{"prompt", "p"}, {"task", "fl2va"}, {"conditions", {condition("image", "file:///data/minimax-h3/a.png")}}}
          .dump(),
      &field);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(field, "conditions[0].role");
  r = parse(json{{"prompt", "p"}, {"task", "v2v"}}.dump(), &field);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(field, "task");
  EXPECT_NE(r.status().message().find("\"ref2va\""), std::string::npos) << r.status().message();
  // A ref2va body with "auto" and no keyframe is not an fl2va canvas.
  ReferenceInputs refs;
  r = parse(json{{"prompt", "p"},
                 {"task", "ref2va"},
                 {"conditions", {condition("image", "file:///data/minimax-h3/a.png")}},
                 {"target", {{"short_edge", 512}, {"aspect_ratio", "auto"}}}}
                .dump(),
            &field, &refs);
  ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
  EXPECT_FALSE(r->canvas_from_keyframe);
  EXPECT_EQ(r->height, 512);
  EXPECT_EQ(r->width, 896);  // 16:9 on H3's canvas rule at a 512 short edge
}

}  // namespace
}  // namespace vortex::serve
