// ref2va through the built binary on the tiny synthetic snapshot (`vortex synth --snapshot tiny`, whose
// transformer_ref/ is the Ref2VA transformer), the committed reference media, the CPU backend:
// * `generate --ref` picks transformer_ref/ from --model; every bad reference set exits 2 naming --ref and the cause
//   before any weight loads (a missing file, a kind prefix the file contradicts, audio alone, too many images, a
//   too-short clip, references beside keyframes, references on the FL2VA transformer);
// * a valid set (an image, a video with its soundtrack, an audio clip) runs end to end: the encoders on the references,
//   the vision tower on the image and the video's frame pairs, sampling, the decoders; run.json records each reference
//   with its SHA-256, kind and what the run used of it, and the packed rows match the printed plan;
// * a request without references on the Ref2VA transformer is refused naming FL2VA's; `inspect` lists ref2va.
#include "cli/cli_test_util.h"

#ifndef VORTEX_REFERENCE_MEDIA
#error "VORTEX_REFERENCE_MEDIA must name tests/media/fixtures/reference/media"
#endif
#ifndef VORTEX_IMAGE_FIXTURES
#error "VORTEX_IMAGE_FIXTURES must name tests/media/fixtures/images"
#endif

namespace {
using namespace vortex_cli_test;

const fs::path kMedia = VORTEX_REFERENCE_MEDIA;
const fs::path kImages = VORTEX_IMAGE_FIXTURES;

class CliRef2va : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    RunResult r = run_vortex("synth --snapshot tiny --seed 3 --out " + dir_->str("snap"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_TRUE(fs::is_directory(fs::path(snap()) / "transformer_ref")) << "the tiny snapshot's Ref2VA transformer";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string snap() { return dir_->str("snap"); }
  static std::string base() {
    return "generate --model " + snap() + " --prompt \"a cat\" --latents-only --width 64 --height 64 --frames 5 " +
           "--steps 1 --out " + dir_->str("out") + " ";
  }
  static ScratchDir* dir_;
};
ScratchDir* CliRef2va::dir_ = nullptr;

TEST_F(CliRef2va, BadReferenceSetsExitTwoBeforeAnyWeightLoads) {
  const std::string image = (kImages / "rgb.png").string(), voice = (kMedia / "voice_mono.wav").string();
  std::string ten_images;
  for (int i = 0; i < 10; ++i) ten_images += " --ref " + image;
  struct Case {
    std::string flags, why;
  };
  const std::vector<Case> cases = {
      {"--ref " + dir_->str("no_such.mp4"), "no_such.mp4"},
      {"--ref video:" + image, "given as video"},
      {"--ref " + voice, "paired with at least one image or video"},
      {ten_images, "at most 9 image"},
      {"--ref " + (kMedia / "voice_short.wav").string() + " --ref " + image, "voice_short.wav"},
      {"--ref " + image + " --first-frame " + image, "keyframes (fl2va)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    RunResult r = run_vortex(base() + c.flags);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(c.why), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--ref"), std::string::npos) << "names the flag: " << r.output;
    EXPECT_EQ(r.output.find("loading"), std::string::npos) << "nothing loaded: " << r.output;
    EXPECT_FALSE(fs::exists(dir_->str("out")));
  }
  // References on the FL2VA transformer, named by --checkpoint.
  RunResult fl = run_vortex("generate --checkpoint " + snap() + "/transformer --latents-only --width 64 --height 64 " +
                            "--frames 5 --steps 1 --ref " + image + " --out " + dir_->str("out"));
  EXPECT_EQ(fl.exit_code, 2) << fl.output;
  EXPECT_NE(fl.output.find("Ref2VA transformer"), std::string::npos) << fl.output;
}

TEST_F(CliRef2va, AValidSetRunsEndToEndAndRunJsonRecordsEachReference) {
  const fs::path image = kImages / "rgb.png", video = kMedia / "clip_sound.mkv", voice = kMedia / "voice_mono.wav";
  const std::string out = dir_->str("e2e");
  RunResult r = run_vortex("generate --model " + snap() + " --prompt \"a cat\" --width 64 --height 64 --frames 22 " +
                           "--steps 2 --seed 5 --ref " + image.string() + " --ref " + video.string() +
                           " --ref audio:" + voice.string() + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("3 reference(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("encoding the references"), std::string::npos) << r.output;
  for (const char* f : {"video_latents.safetensors", "audio_latents.safetensors", "video.mp4", "audio.wav", "run.json"})
    EXPECT_TRUE(fs::is_regular_file(fs::path(out) / f)) << f << ": " << r.output;
  const nlohmann::json run = nlohmann::json::parse(read_file(fs::path(out) / "run.json"));
  EXPECT_EQ(run["task"], "ref2va");
  const nlohmann::json& refs = run["references"];
  ASSERT_TRUE(refs.is_object()) << run.dump(1);
  ASSERT_EQ(refs["files"].size(), 3u);
  const std::vector<std::pair<fs::path, std::string>> want = {{image, "image"}, {video, "video"}, {voice, "audio"}};
  int64_t visual = 0, audio = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const nlohmann::json& f = refs["files"][i];
    SCOPED_TRACE(f.dump());
    EXPECT_EQ(f["index"], static_cast<int>(i));
    EXPECT_EQ(f["kind"], want[i].second);
    EXPECT_EQ(f["sha256"], sha256_hex_of(read_file(want[i].first)));
    ASSERT_TRUE(f["used"].is_object());
    visual += f["used"]["video_rows"].get<int64_t>();
    audio += f["used"]["audio_rows"].get<int64_t>();
  }
  // The image at the tiny snapshot's 64-pixel short edge (its model_index.json's reference_image_short_edge).
  const nlohmann::json& used_image = refs["files"][0]["used"];
  EXPECT_EQ(std::min(used_image["encoded_size"]["width"].get<int>(), used_image["encoded_size"]["height"].get<int>()),
            64);
  // The video: 22 frames at 24 fps (the generated count), all encoded (17 + 5), its soundtrack's latents; the
  // conditioner read frames 0 and 12 (2 fps), one pair.
  const nlohmann::json& used_video = refs["files"][1]["used"];
  EXPECT_EQ(used_video["frames_24fps"], 22);
  EXPECT_EQ(used_video["vae_frames"], 22);
  EXPECT_EQ(used_video["latent"][0], 7);
  EXPECT_EQ(used_video["vision_frames"], nlohmann::json::array({0, 12}));
  EXPECT_GT(used_video["soundtrack"]["latents_per_channel"].get<int>(), 0);
  // The audio clip: truncated to the generated 22 / 24 s at 32 kHz, 800 samples per latent.
  const nlohmann::json& used_voice = refs["files"][2]["used"];
  EXPECT_EQ(used_voice["soundtrack"]["sample_rate"], 32000);
  EXPECT_EQ(used_voice["soundtrack"]["latents_per_channel"],
            (used_voice["soundtrack"]["samples"].get<int64_t>() + 799) / 800);
  EXPECT_EQ(refs["visual_rows"], visual);
  EXPECT_EQ(refs["audio_rows"], audio);
  EXPECT_FALSE(refs["vision"].is_null()) << "the conditioner saw the references through the vision tower";
  // The packed rows: text + the reference blocks + the generated audio and video, as the plan printed them.
  const nlohmann::json& geo = run["geometry"];
  ASSERT_TRUE(geo.is_object()) << run.dump(1);
  EXPECT_EQ(geo["total_rows"].get<int64_t>(), geo["text_rows"].get<int64_t>() + visual + audio +
                                                  geo["audio_rows"].get<int64_t>() + geo["video_rows"].get<int64_t>());
  EXPECT_NE(r.output.find(std::to_string(geo["total_rows"].get<int64_t>()) + " packed rows in all"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(std::to_string(visual) + " visual and " + std::to_string(audio) + " audio conditioning rows"),
            std::string::npos)
      << r.output;

  // The same request again gives the same latents (the reference noise comes from the seed's stream); another seed
  // others.
  RunResult again = run_vortex("generate --model " + snap() + " --prompt \"a cat\" --width 64 --height 64 " +
                               "--frames 22 --steps 2 --seed 5 --latents-only --ref " + image.string() + " --ref " +
                               video.string() + " --ref audio:" + voice.string() + " --out " + dir_->str("again"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  for (const char* f : {"video_latents.safetensors", "audio_latents.safetensors"})
    EXPECT_EQ(read_file(fs::path(out) / f), read_file(fs::path(dir_->str("again")) / f)) << f;
  // Without the audio clip the generated rows see other conditioning: other latents.
  RunResult fewer = run_vortex("generate --model " + snap() + " --prompt \"a cat\" --width 64 --height 64 " +
                               "--frames 22 --steps 2 --seed 5 --latents-only --ref " + image.string() + " --ref " +
                               video.string() + " --out " + dir_->str("fewer"));
  ASSERT_EQ(fewer.exit_code, 0) << fewer.output;
  EXPECT_NE(read_file(fs::path(out) / "audio_latents.safetensors"),
            read_file(fs::path(dir_->str("fewer")) / "audio_latents.safetensors"));
}

TEST_F(CliRef2va, TheRef2vaTransformerRefusesRequestsWithoutReferences) {
  RunResult r = run_vortex("generate --checkpoint " + snap() + "/transformer_ref --latents-only --width 64 " +
                           "--height 64 --frames 5 --steps 1 --out " + dir_->str("out"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("Ref2VA transformer"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find((fs::path(snap()) / "transformer").string()), std::string::npos) << r.output;
  RunResult inspect = run_vortex("inspect " + snap());
  EXPECT_NE(inspect.output.find("tasks: t2va, fl2va, ref2va"), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("transformer_ref"), std::string::npos) << inspect.output;
}

}  // namespace
