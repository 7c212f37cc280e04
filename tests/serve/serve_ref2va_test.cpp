// ref2va through `POST /v1/videos` on an in-process server (127.0.0.1, the CPU backend, synthetic h3-tiny weights, the
// tiny snapshot's vae/ and audio_vae/ as the reference encoders): every bad body (a silent video declared video_audio,
// missing, corrupt, too short or 5-channel files, a non-image data URL, a path outside --input-dir, a remote URI, the
// release's count limits, audio alone) is refused with 400 naming its condition and leaves no job row and no job
// folder; a good body (an image data URL, a video with its sound and an audio clip under --input-dir) passes every
// admission check and is queued (201), then cancelled; the job ends cancelled or succeeded, never failed. A server on
// an FL2VA transformer refuses task ref2va before reading any file.
#include <fstream>
#include <sstream>

#include "engine/synthetic_snapshot.h"
#include "serve_test_util.h"

#ifndef VORTEX_IMAGE_FIXTURES
#error "VORTEX_IMAGE_FIXTURES must name tests/media/fixtures/images"
#endif
#ifndef VORTEX_REFERENCE_FIXTURES
#error "VORTEX_REFERENCE_FIXTURES must name tests/media/fixtures/reference/media"
#endif

namespace {
using namespace vortex_serve_test;

const fs::path kImages = VORTEX_IMAGE_FIXTURES;
const fs::path kMedia = VORTEX_REFERENCE_FIXTURES;

json ref(const std::string& type, const std::string& uri) {
  return {{"type", type}, {"uri", uri}, {"role", "reference"}};
}

// `frames`: 5 for the bodies refused before planning; a queued ref2va job needs at least 22 (a video reference's
// 17n + 5 frames, engine/references.h).
std::string body(const json& conditions, int frames = 5) {
  return json{{"model", "MiniMaxAI/MiniMax-H3"},
              {"prompt", "<Picture 1> sings with <Audio 1>"},
              {"task", "ref2va"},
              {"conditions", conditions},
              {"width", 64},
              {"height", 64},
              {"frames", frames},
              {"num_inference_steps", 3},
              {"seed", 5}}
      .dump();
}

// The job store and the jobs folder hold nothing.
void expect_no_job(httplib::Client& c, const fs::path& data) {
  EXPECT_TRUE(body_json(c.Get("/v1/videos"))["data"].empty());
  EXPECT_TRUE(fs::is_empty(data / "jobs"));
}

TEST(ServeRef2va, BadBodiesAreRefusedNamingTheirConditionAndAGoodOneReachesThePlanner) {
  ScratchDir dir;
  vortex::SyntheticSnapshotOptions snap;
  snap.out = (dir.path() / "snap").string();
  snap.seed = 3;
  auto written = vortex::write_synthetic_snapshot(snap);
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  const fs::path inputs = dir.path() / "inputs";
  fs::create_directories(inputs);
  for (const char* f : {"clip_sound.mkv", "clip_silent.mkv", "voice_mono.wav", "voice_short.wav", "voice_5ch.wav"})
    fs::copy_file(kMedia / f, inputs / f);
  {
    std::ofstream broken(inputs / "broken.mp4", std::ios::binary);
    broken << "this is not an mp4 file, only text with an mp4 name";
  }
  vortex::serve::ServeOptions o = tiny_options(dir.path() / "data");
  o.pipeline.keyframe_vae_dir = snap.out + "/vae";
  o.pipeline.reference_audio_vae_dir = snap.out + "/audio_vae";
  o.limits.input_dir = inputs.string();
  TestServer server(o);
  ASSERT_TRUE(server.server);
  auto c = server.client();

  auto file = [&](const std::string& name) { return "file://" + (inputs / name).string(); };
  const std::string png_url = "data:image/png;base64," + base64(read_bytes(kImages / "rgb.png"));
  const json image = ref("image", png_url);
  struct Case {
    json conditions;
    std::string field, says;
  };
  json ten_images = json::array();
  for (int i = 0; i < 10; ++i) ten_images.push_back(ref("image", file("clip_sound.mkv")));
  const Case cases[] = {
      {json::array({image, ref("video_audio", file("clip_silent.mkv"))}), "conditions[1].type", "no audio stream"},
      {json::array({image, ref("audio", file("missing.wav"))}), "conditions[1].uri", "missing.wav: no such file"},
      {json::array({ref("video", file("broken.mp4"))}), "conditions[0].uri", "broken.mp4"},
      {json::array({image, ref("audio", file("voice_short.wav"))}), "conditions[1].uri", "voice_short.wav"},
      {json::array({image, ref("audio", file("voice_5ch.wav"))}), "conditions[1].uri", "voice_5ch.wav"},
      {json::array({ref("image", "data:image/png;base64," + base64("not a png at all"))}), "conditions[0].uri",
       "conditions[0].uri: "},
      {json::array({ref("image", "file://" + (kImages / "rgb.png").string())}), "conditions[0].uri",
       "inside the server's input folder"},
      {json::array({ref("image", "https://example.com/a.png")}), "conditions[0].uri", "fetches no remote files"},
      {ten_images, "conditions", "at most 9 image references, got 10"},
      {json::array({ref("audio", file("voice_mono.wav"))}), "conditions", "cannot be used on its own"},
      {json::array({ref("image", file("clip_sound.mkv"))}), "conditions[0].uri", "clip_sound.mkv"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.conditions.dump().substr(0, 200));
    auto r = c->Post("/v1/videos", body(k.conditions), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << r->body;
    EXPECT_EQ(e["error"]["field"], k.field) << r->body;
    EXPECT_NE(e["error"]["message"].get<std::string>().find(k.says), std::string::npos) << r->body;
    expect_no_job(*c, dir.path() / "data");
  }

  // A good body: every admission check passes and the job is queued; it is cancelled here and must not fail.
  const json good =
      json::array({image, ref("video_audio", file("clip_sound.mkv")), ref("audio", file("voice_mono.wav"))});
  auto r = c->Post("/v1/videos", body(good, 22), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = json::parse(r->body)["id"];
  auto d = c->Delete("/v1/videos/" + id);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->status == 202 || d->status == 409) << d->body;
  const json done = wait_for(*c, id, is_terminal, 120.0);
  EXPECT_NE(done["status"], "failed") << done.dump();
}

TEST(ServeRef2va, AServerOnTheFl2vaTransformerRefusesTaskRef2vaBeforeReadingFiles) {
  ScratchDir dir;
  vortex::SyntheticSnapshotOptions snap;
  snap.out = (dir.path() / "snap").string();
  snap.seed = 4;
  auto written = vortex::write_synthetic_snapshot(snap);
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  vortex::serve::ServeOptions o = tiny_options(dir.path() / "data");
  o.pipeline.synthetic_weights = false;
  o.pipeline.checkpoint_path = snap.out + "/transformer";
  o.limits.input_dir = (dir.path() / "inputs").string();
  TestServer server(o);
  ASSERT_TRUE(server.server);
  auto c = server.client();
  // The file does not exist: the transformer is refused first.
  auto r =
      c->Post("/v1/videos",
              json{{"prompt", "p"},
                   {"task", "ref2va"},
                   {"conditions", json::array({ref("image", "file://" + (dir.path() / "inputs" / "a.png").string())})},
                   {"width", 64},
                   {"height", 64},
                   {"frames", 5}}
                  .dump(),
              "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const json e = json::parse(r->body, nullptr, false);
  EXPECT_EQ(e["error"]["field"], "task") << r->body;
  EXPECT_NE(e["error"]["message"].get<std::string>().find("Ref2VA transformer"), std::string::npos) << r->body;
  expect_no_job(*c, dir.path() / "data");
}

}  // namespace
