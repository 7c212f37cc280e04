// fl2va through `POST /v1/videos` on an in-process server (127.0.0.1, the CPU backend, synthetic h3-tiny weights,
// the tiny snapshot's vae/ encoding the keyframes): a body in SGLang's dialect with a first keyframe as a data URL
// and a last one as a file:// URI under the server's --input-dir runs to success, its run.json naming both images
// with their SHA-256; an undecodable data URL, a file outside the input folder and a missing file are refused with
// 400 naming the condition before admission, and leave no job or folder behind.
#include <fstream>
#include <sstream>

#include <openssl/sha.h>

#include "engine/synthetic_snapshot.h"
#include "serve_test_util.h"

#ifndef VORTEX_IMAGE_FIXTURES
#error "VORTEX_IMAGE_FIXTURES must name tests/media/fixtures/images"
#endif

namespace {
using namespace vortex_serve_test;

const fs::path kImages = VORTEX_IMAGE_FIXTURES;

std::string sha256_hex(const std::string& bytes) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : d) s += {hex[c >> 4], hex[c & 15]};
  return s;
}

TEST(ServeFl2va, KeyframesAsDataUrlAndFileUriRunAndBadOnesAreRefusedBeforeAdmission) {
  ScratchDir dir;
  vortex::SyntheticSnapshotOptions snap;
  snap.out = (dir.path() / "snap").string();
  snap.seed = 3;
  auto written = vortex::write_synthetic_snapshot(snap);
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  const fs::path inputs = dir.path() / "inputs";
  fs::create_directories(inputs);
  fs::copy_file(kImages / "photo420.jpg", inputs / "last.jpg");
  vortex::serve::ServeOptions o = tiny_options(dir.path() / "data");
  o.pipeline.keyframe_vae_dir = snap.out + "/vae";
  o.limits.input_dir = inputs.string();
  TestServer server(o);
  ASSERT_TRUE(server.server);
  auto c = server.client();

  const std::string first_png = read_bytes(kImages / "rgb.png");
  auto body = [](const std::string& first_uri, const std::string& last_uri) {
    return json{{"model", "MiniMaxAI/MiniMax-H3"},
                {"prompt", "a lighthouse at dusk"},
                {"task", "fl2va"},
                {"conditions",
                 {{{"type", "image"}, {"uri", first_uri}, {"role", "keyframe"}, {"frame_index", 0}},
                  {{"type", "image"}, {"uri", last_uri}, {"role", "keyframe"}, {"frame_index", -1}}}},
                {"width", 64},
                {"height", 64},
                {"frames", 5},
                {"num_inference_steps", 3},
                {"seed", 5}}
        .dump();
  };
  const std::string file_uri = "file://" + (inputs / "last.jpg").string();
  // Refused before admission, naming the condition: not an image, outside the input folder, missing.
  for (const auto& [first, last, why] :
       {std::tuple<std::string, std::string, std::string>{"data:image/png;base64," + base64("not a png at all"),
                                                          file_uri, "not a PNG, JPEG or WebP"},
        {"data:image/png;base64," + base64(first_png), "file://" + (kImages / "rgb.png").string(),
         "inside the server's input folder"},
        {"data:image/png;base64," + base64(first_png), "file://" + (inputs / "missing.jpg").string(), "missing.jpg"}}) {
    SCOPED_TRACE(why);
    auto r = c->Post("/v1/videos", body(first, last), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body, nullptr, false);
    EXPECT_EQ(e["error"]["field"].get<std::string>().rfind("conditions", 0), 0u) << r->body;
    EXPECT_NE(e["error"]["message"].get<std::string>().find(why), std::string::npos) << r->body;
  }
  EXPECT_TRUE(body_json(c->Get("/v1/videos"))["data"].empty());
  EXPECT_TRUE(fs::is_empty(dir.path() / "data" / "jobs"));

  auto r = c->Post("/v1/videos", body("data:image/png;base64," + base64(first_png), file_uri), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = json::parse(r->body)["id"];
  const json done = wait_for(*c, id, is_terminal, 120.0);
  ASSERT_EQ(done["status"], "succeeded") << done.dump();
  EXPECT_EQ(done["total_steps"], 2);  // num_inference_steps 3: two model evaluations
  auto run = c->Get("/v1/videos/" + id + "/content?variant=run_json");
  ASSERT_TRUE(run);
  const json manifest = json::parse(run->body);
  EXPECT_EQ(manifest["task"], "fl2va");
  ASSERT_EQ(manifest["keyframes"]["anchors"].size(), 2u);
  ASSERT_GE(manifest["inputs"].size(), 2u);
  EXPECT_EQ(manifest["inputs"][0]["role"], "first_frame");
  EXPECT_EQ(manifest["inputs"][0]["sha256"], sha256_hex(first_png));
  EXPECT_EQ(manifest["inputs"][1]["role"], "last_frame");
  EXPECT_EQ(manifest["inputs"][1]["path"], (inputs / "last.jpg").string());
  EXPECT_EQ(manifest["inputs"][1]["sha256"], sha256_hex(read_bytes(inputs / "last.jpg")));
}

}  // namespace
