// The fl2va part of the POST /v1/videos parser (src/serve/request.h) in SGLang's minimax_h3 dialect: verbatim copies
// of the cookbook's t2va and fl2va request bodies (tests/fixtures/sglang_minimax_h3, with their source and commit)
// parse to the request they describe; keyframes as file:// URIs under the server's input folder or as data URLs
// (decoded and handed back for the job folder); every malformed condition names its field.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "serve/request.h"

#ifndef VORTEX_SGLANG_FIXTURES
#error "VORTEX_SGLANG_FIXTURES must name tests/fixtures/sglang_minimax_h3"
#endif

namespace vortex::serve {
namespace {
namespace fs = std::filesystem;

std::string read(const std::string& name) {
  std::ifstream in(fs::path(VORTEX_SGLANG_FIXTURES) / name, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<RunRequest> parse(const std::string& body, std::string* field, std::vector<KeyframeUpload>* uploads = nullptr,
                         const std::string& input_dir = "/data/minimax-h3") {
  RequestLimits limits;
  limits.input_dir = input_dir;
  return parse_video_request(body, limits, RunRequest{}, field, uploads);
}

TEST(ServeFl2vaRequest, CookbookT2vaBody) {
  std::string field;
  Result<RunRequest> r = parse(read("t2va_request.json"), &field);
  ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
  EXPECT_FALSE(r->keyframes.any());
  EXPECT_FALSE(r->canvas_from_keyframe);
  EXPECT_EQ(r->width, 1344);  // 16:9 at the 768 short edge, H3's canvas rule
  EXPECT_EQ(r->height, 768);
  EXPECT_EQ(r->seconds, 5.0);
  EXPECT_EQ(r->steps, 49);  // num_inference_steps 50 counts the terminal sigma
  EXPECT_EQ(r->seed, 1101u);
  EXPECT_EQ(r->video_shift, 12.0);
  EXPECT_EQ(r->audio_shift, 3.0);
}

TEST(ServeFl2vaRequest, CookbookFl2vaBody) {
  std::string field;
  Result<RunRequest> r = parse(read("fl2va_request.json"), &field);
  ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
  EXPECT_EQ(r->keyframes.first, "/data/minimax-h3/first-frame.png");
  EXPECT_TRUE(r->keyframes.last.empty());
  EXPECT_TRUE(r->canvas_from_keyframe);  // aspect_ratio "auto": the planner takes the keyframe's canvas
  EXPECT_EQ(r->seconds, 5.0);
  EXPECT_EQ(r->steps, 49);
  EXPECT_EQ(r->seed, 2101u);
  EXPECT_EQ(r->prompt, "The supplied frame continues with calm, natural motion and synchronized ambient sound.");
  // The same body on a server without an input folder: the file:// URI is refused, naming the condition.
  Result<RunRequest> closed = parse(read("fl2va_request.json"), &field, nullptr, "");
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(field, "conditions[0].uri");
  EXPECT_NE(closed.status().message().find("--input-dir"), std::string::npos) << closed.status().message();
}

TEST(ServeFl2vaRequest, FirstAndLastKeyframesAndDataUrls) {
  // "\x89PNG" + 4 bytes, base64: the parser hands the bytes back; the image checks run at admission.
  const std::string body = R"({"prompt": "p", "task": "fl2va", "width": 64, "height": 64, "conditions": [
      {"type": "image", "uri": "data:image/png;base64,iVBORwABAgM=", "role": "keyframe", "frame_index": -1},
      {"type": "image", "uri": "file:///data/minimax-h3/a/../b.webp", "frame_index": 0}]})";
  std::string field;
  std::vector<KeyframeUpload> uploads;
  Result<RunRequest> r = parse(body, &field, &uploads);
  ASSERT_TRUE(r.ok()) << field << ": " << r.status().to_string();
  EXPECT_EQ(r->keyframes.first, "/data/minimax-h3/b.webp");
  EXPECT_TRUE(r->keyframes.last.empty());  // filled from the upload by the server
  EXPECT_FALSE(r->canvas_from_keyframe);   // a size is given
  ASSERT_EQ(uploads.size(), 1u);
  EXPECT_EQ(uploads[0].anchor, "last");
  EXPECT_EQ(uploads[0].ext, "png");
  EXPECT_EQ(uploads[0].bytes, std::string("\x89PNG\x00\x01\x02\x03", 8));
  // Without a size the canvas follows the keyframe; without an upload list a data URL is refused.
  Result<RunRequest> auto_canvas = parse(R"({"prompt": "p", "task": "fl2va", "conditions": [
      {"type": "image", "uri": "file:///data/minimax-h3/x.png", "frame_index": 0}]})",
                                         &field);
  ASSERT_TRUE(auto_canvas.ok()) << auto_canvas.status().to_string();
  EXPECT_TRUE(auto_canvas->canvas_from_keyframe);
  EXPECT_FALSE(parse(body, &field).ok());
  EXPECT_EQ(field, "conditions[0].uri");
}

TEST(ServeFl2vaRequest, EveryBadConditionNamesItsField) {
  struct Case {
    std::string body, field, why;
  };
  const std::string img = R"("type": "image", "uri": "file:///data/minimax-h3/x.png")";
  const std::vector<Case> cases = {
      {R"({"task": "fl2va", "conditions": []})", "conditions", "one or two"},
      {R"({"task": "fl2va"})", "conditions", "one or two"},
      {R"({"task": "t2va", "conditions": [{)" + img + R"(, "frame_index": 0}]})", "conditions", "takes no"},
      {R"({"task": "v2v"})", "task", "t2va"},
      {R"({"task": 3})", "task", "string"},
      {R"({"task": "fl2va", "conditions": {}})", "conditions", "array"},
      {R"({"task": "fl2va", "conditions": [{)" + img + R"(, "frame_index": 1}]})", "conditions[0].frame_index",
       "0 (first frame) or -1"},
      {R"({"task": "fl2va", "conditions": [{)" + img + R"(, "frame_index": 0}, {)" + img + R"(, "frame_index": 0}]})",
       "conditions[1].frame_index", "two conditions"},
      {R"({"task": "fl2va", "conditions": [{"type": "video", "uri": "file:///data/minimax-h3/x.mp4", "frame_index": 0}]})",
       "conditions[0].type", "image"},
      {R"({"task": "fl2va", "conditions": [{)" + img + R"(, "role": "reference", "frame_index": 0}]})",
       "conditions[0].role", "keyframe"},
      {R"({"task": "fl2va", "conditions": [{)" + img + R"(, "frame_index": 0, "start_time_seconds": 1}]})",
       "conditions[0]", "unknown field"},
      {R"({"task": "fl2va", "conditions": [{"type": "image", "uri": "file:///etc/passwd", "frame_index": 0}]})",
       "conditions[0].uri", "inside the server's input folder"},
      {R"({"task": "fl2va", "conditions": [{"type": "image", "uri": "file:///data/minimax-h3/../x.png", "frame_index": 0}]})",
       "conditions[0].uri", "inside the server's input folder"},
      {R"({"task": "fl2va", "conditions": [{"type": "image", "uri": "https://x/y.png", "frame_index": 0}]})",
       "conditions[0].uri", "file:///"},
      {R"({"task": "fl2va", "conditions": [{"type": "image", "uri": "data:image/gif;base64,R0lG", "frame_index": 0}]})",
       "conditions[0].uri", "image/png"},
      {R"({"task": "fl2va", "conditions": [{"type": "image", "uri": "data:image/png;base64,iVB=ORw=", "frame_index": 0}]})",
       "conditions[0].uri", "malformed"},
      {R"({"task": "fl2va", "conditions": [{)" + img + R"(, "frame_index": 0}], "target": {"aspect_ratio": "wide"}})",
       "target.aspect_ratio", "W:H"},
      {R"({"task": "fl2va", "conditions": [{)" + img + R"(, "frame_index": 0}], "target": {"fps": 24}})", "target.fps",
       "unknown target field"},
      {R"({"target": {"aspect_ratio": "auto"}})", "target.aspect_ratio", "keyframe"},
      {R"({"target": {"aspect_ratio": "16:9"}, "width": 64, "height": 64})", "target", "one way"},
      {R"({"seconds": 4, "target": {"duration_seconds": 5.0}})", "target.duration_seconds", "differ"},
      {R"({"num_inference_steps": 1})", "num_inference_steps", "[2, 1001]"},
      {R"({"num_inference_steps": 9, "steps": 8})", "num_inference_steps", "exclude"},
      {R"({"num_outputs_per_prompt": 2})", "num_outputs_per_prompt", "one output"},
      {R"({"flow_shift": -1})", "flow_shift", "positive"},
      {R"({"model": 7})", "model", "string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    std::string field;
    std::vector<KeyframeUpload> uploads;
    Result<RunRequest> r = parse(c.body, &field, &uploads);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(field, c.field);
    EXPECT_NE(r.status().message().find(c.why), std::string::npos) << r.status().message();
  }
}

TEST(ServeFl2vaRequest, DataUrlSizeLimit) {
  RequestLimits limits;
  limits.max_keyframe_bytes = 6;  // the CLI's file limit, scaled down
  std::string field;
  std::vector<KeyframeUpload> uploads;
  auto body = [](const std::string& b64) {
    return R"({"task": "fl2va", "conditions": [{"type": "image", "uri": "data:image/png;base64,)" + b64 +
           R"(", "frame_index": 0}]})";
  };
  Result<RunRequest> six = parse_video_request(body("iVBORwAB"), limits, RunRequest{}, &field, &uploads);
  ASSERT_TRUE(six.ok()) << six.status().to_string();
  ASSERT_EQ(uploads.size(), 1u);
  EXPECT_EQ(uploads[0].bytes.size(), 6u);
  for (const std::string& over : {std::string("iVBORwABAA=="), std::string("iVBORwABAgM=")}) {  // 7 and 8 bytes
    Result<RunRequest> r = parse_video_request(body(over), limits, RunRequest{}, &field, &uploads);
    ASSERT_FALSE(r.ok()) << over;
    EXPECT_EQ(field, "conditions[0].uri");
    EXPECT_NE(r.status().message().find("over 6 bytes"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace vortex::serve
