// fl2va through the built binary on the tiny synthetic snapshot (`vortex synth --snapshot tiny`: h3-tiny weights and
// a vae/ that also holds a tiny encoder), text embeddings, latents only, the CPU backend:
// * `generate --first-frame / --last-frame` runs first, last and both keyframes: run.json says fl2va, lists each
//   image with its SHA-256, the keyframe rows and their noise offset; the same request twice gives the same latents,
//   and the keyframes change them (t2va is the same command without the flags, unchanged by them);
// * bad keyframes exit 2 before any weight loads, each naming the file and the reason: missing, empty, not an image,
//   truncated, damaged pixel data, over the pixel limit, 16-bit, CMYK, animated; a keyframe on the Ref2VA
//   transformer; keyframes without a video VAE;
// * a prompt with keyframes runs the snapshot's tiny vision tower through the conditioner;
// * without --width/--height the canvas follows the first keyframe (EXIF orientation applied);
// * `inspect` on the snapshot lists its tasks.
#include <set>

#include "cli/cli_test_util.h"

#ifndef VORTEX_IMAGE_FIXTURES
#error "VORTEX_IMAGE_FIXTURES must name tests/media/fixtures/images"
#endif

namespace {
using namespace vortex_cli_test;

const fs::path kImages = VORTEX_IMAGE_FIXTURES;

class CliFl2va : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    RunResult r = run_vortex("synth --snapshot tiny --seed 3 --out " + dir_->str("snap"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string snap() { return dir_->str("snap"); }
  // The snapshot's transformer with text embeddings, its vae/ encoding the keyframes, latents only.
  static std::string base() {
    const fs::path text = dir_->path() / "text.safetensors";
    if (!fs::exists(text)) write_one_tensor_safetensors(text, "text", 8, 128, false, 11);
    return "generate --model " + snap() + " --text-embeddings " + text.string() +
           " --latents-only --width 64 --height 64 --frames 5 --steps 2 --seed 7 ";
  }
  static ScratchDir* dir_;
};
ScratchDir* CliFl2va::dir_ = nullptr;

std::string latents_sha(const std::string& out_dir) {
  return sha256_hex_of(read_file(fs::path(out_dir) / "video_latents.safetensors"));
}

TEST_F(CliFl2va, FirstLastAndBothKeyframesRunAndAreRecorded) {
  const std::string first = (kImages / "rgb.png").string(), last = (kImages / "photo420.jpg").string();
  RunResult t2va = run_vortex(base() + "--quiet --out " + dir_->str("t2va"));
  ASSERT_EQ(t2va.exit_code, 0) << t2va.output;
  struct Case {
    std::string name, flags;
    std::vector<std::string> anchors, files;
  };
  const std::vector<Case> cases = {
      {"first", "--first-frame " + first, {"first"}, {first}},
      {"last", "--last-frame " + last, {"last"}, {last}},
      {"both", "--first-frame " + first + " --last-frame " + last, {"first", "last"}, {first, last}},
  };
  std::set<std::string> seen = {latents_sha(dir_->str("t2va"))};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RunResult r = run_vortex(base() + c.flags + " --out " + dir_->str(c.name));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("encoding the keyframes (video VAE encoder"), std::string::npos) << r.output;
    const nlohmann::json run = nlohmann::json::parse(read_file(fs::path(dir_->str(c.name)) / "run.json"));
    EXPECT_EQ(run["task"], "fl2va");
    ASSERT_EQ(run["keyframes"]["anchors"].size(), c.anchors.size());
    for (size_t i = 0; i < c.anchors.size(); ++i) EXPECT_EQ(run["keyframes"]["anchors"][i], c.anchors[i]);
    // 64x64: 4x4 latents, 2x2 rows per keyframe.
    EXPECT_EQ(run["keyframes"]["condition_rows"].get<int>(), 4 * static_cast<int>(c.anchors.size()));
    EXPECT_TRUE(run["noise"]["keyframe_offset"].is_number());
    ASSERT_EQ(run["inputs"].size(), c.files.size() + 1);  // the keyframes, then the text embeddings
    EXPECT_EQ(run["inputs"][c.files.size()]["role"], "text_embeddings");
    EXPECT_EQ(run["inputs"][c.files.size()]["sha256"], sha256_hex_of(read_file(dir_->path() / "text.safetensors")));
    for (size_t i = 0; i < c.files.size(); ++i) {
      EXPECT_EQ(run["inputs"][i]["path"], c.files[i]);
      EXPECT_EQ(run["inputs"][i]["sha256"], sha256_hex_of(read_file(c.files[i])));
      EXPECT_EQ(run["inputs"][i]["role"], c.anchors[i] + "_frame");
    }
    EXPECT_TRUE(seen.insert(latents_sha(dir_->str(c.name))).second) << "the keyframes must change the latents";
  }
  // The same request again: the same latents (keyframe encode, noise and sampling are deterministic).
  RunResult again = run_vortex(base() + cases[2].flags + " --quiet --out " + dir_->str("both2"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(latents_sha(dir_->str("both2")), latents_sha(dir_->str("both")));
  const nlohmann::json t2va_run = nlohmann::json::parse(read_file(fs::path(dir_->str("t2va")) / "run.json"));
  EXPECT_EQ(t2va_run["task"], "t2va");
  ASSERT_EQ(t2va_run["inputs"].size(), 1u);
  EXPECT_EQ(t2va_run["inputs"][0]["role"], "text_embeddings");
}

TEST_F(CliFl2va, BadKeyframesExitTwoBeforeAnyWeightLoads) {
  // A damaged IDAT in an intact PNG container: the header passes, the decode refuses.
  std::string png = read_file(kImages / "rgb.png");
  for (size_t i = 100; i < 140; ++i) png[i] = static_cast<char>(png[i] ^ 0x5a);
  const fs::path damaged = dir_->path() / "damaged.png";
  std::ofstream(damaged, std::ios::binary) << png;
  struct Case {
    std::string flags, why;
  };
  const std::vector<Case> cases = {
      {"--first-frame " + dir_->str("no_such.png"), "no_such.png"},
      {"--first-frame " + (kImages / "empty.png").string(), "empty"},
      {"--last-frame " + (kImages / "text.png").string(), "not a PNG, JPEG or WebP"},
      {"--first-frame " + (kImages / "truncated.png").string(), "truncated"},
      {"--first-frame " + damaged.string(), "corrupt"},
      {"--first-frame " + (kImages / "bomb.png").string(), "over the limit"},
      {"--first-frame " + (kImages / "rgb16.png").string(), "16 bits"},
      {"--last-frame " + (kImages / "cmyk.jpg").string(), "CMYK"},
      {"--first-frame " + (kImages / "animated.png").string(), "animated"},
      {"--last-frame " + (kImages / "animated.webp").string(), "animated"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    RunResult r = run_vortex(base() + c.flags + " --out " + dir_->str("bad"));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(c.why), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.flags.substr(0, c.flags.find(' '))), std::string::npos) << "names the flag";
    EXPECT_EQ(r.output.find("loading"), std::string::npos) << "nothing loaded: " << r.output;
    EXPECT_FALSE(fs::exists(dir_->str("bad")));
  }
  // Keyframes need the video VAE's encoder.
  RunResult no_vae = run_vortex(
      "generate --synthetic --config h3-tiny --width 64 --height 64 --frames 22 --steps 1 "
      "--latents-only --first-frame " +
      (kImages / "rgb.png").string() + " --out " + dir_->str("bad"));
  EXPECT_EQ(no_vae.exit_code, 2) << no_vae.output;
  EXPECT_NE(no_vae.output.find("video VAE"), std::string::npos) << no_vae.output;
  // A keyframe on the Ref2VA transformer (transformer_ref/ of a snapshot): refused naming the task.
  fs::create_directories(dir_->path() / "ref");
  fs::copy(fs::path(snap()) / "transformer", dir_->path() / "ref" / "transformer_ref", fs::copy_options::recursive);
  RunResult ref = run_vortex("generate --checkpoint " + dir_->str("ref/transformer_ref") + " --vae " + snap() +
                             "/vae --audio-vae " + snap() + "/audio_vae --width 64 --height 64 --frames 22 --steps 1 " +
                             "--first-frame " + (kImages / "rgb.png").string() + " --out " + dir_->str("bad"));
  EXPECT_EQ(ref.exit_code, 2) << ref.output;
  EXPECT_NE(ref.output.find("Ref2VA"), std::string::npos) << ref.output;
  EXPECT_EQ(ref.output.find("loading"), std::string::npos) << ref.output;
}

// The vision path end to end: the snapshot's text encoder holds a tiny Qwen3-VL vision tower, so a prompt with
// keyframes runs the presentation, the processor, the tower and the conditioner with its vision embeddings.
TEST_F(CliFl2va, PromptWithKeyframesRunsTheVisionTower) {
  const std::string first = (kImages / "rgb.png").string(), last = (kImages / "photo420.jpg").string();
  const std::string cmd = "generate --model " + snap() +
                          " --prompt \"a red kite over the sea\" --latents-only --width 64 --height 64 --frames 5 "
                          "--steps 2 --seed 7 ";
  RunResult t2va = run_vortex(cmd + "--quiet --out " + dir_->str("vision_t2va"));
  ASSERT_EQ(t2va.exit_code, 0) << t2va.output;
  RunResult both =
      run_vortex(cmd + "--first-frame " + first + " --last-frame " + last + " --out " + dir_->str("vision_both"));
  ASSERT_EQ(both.exit_code, 0) << both.output;
  const nlohmann::json run = nlohmann::json::parse(read_file(fs::path(dir_->str("vision_both")) / "run.json"));
  EXPECT_EQ(run["task"], "fl2va");
  ASSERT_TRUE(run["keyframes"]["vision"].is_string()) << run["keyframes"].dump();  // the vision tower's folder
  EXPECT_TRUE(fs::equivalent(run["keyframes"]["vision"].get<std::string>(), fs::path(snap()) / "text_encoder"))
      << run["keyframes"].dump();
  EXPECT_NE(latents_sha(dir_->str("vision_both")), latents_sha(dir_->str("vision_t2va")));
  // The same images in the other order: other vision tokens and other keyframe rows, other latents; the same
  // request again: the same latents.
  RunResult swapped = run_vortex(cmd + "--first-frame " + last + " --last-frame " + first + " --quiet --out " +
                                 dir_->str("vision_swapped"));
  ASSERT_EQ(swapped.exit_code, 0) << swapped.output;
  EXPECT_NE(latents_sha(dir_->str("vision_swapped")), latents_sha(dir_->str("vision_both")));
  RunResult again = run_vortex(cmd + "--first-frame " + first + " --last-frame " + last + " --quiet --out " +
                               dir_->str("vision_both2"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(latents_sha(dir_->str("vision_both2")), latents_sha(dir_->str("vision_both")));
}

// Without --width and --height the canvas follows the first keyframe as diffusers' MiniMaxH3ResizeStep resolves it:
// exif6.jpg is stored 97x61 with EXIF orientation 6, so load_image gives 61x97, whose canvas is 768x1216 (the stored
// size would give 1216x768; tests/engine/keyframe_canvas_test.cpp checks more keyframes). One of the two flags alone
// is refused.
TEST_F(CliFl2va, CanvasFollowsTheFirstKeyframeWithoutASize) {
  const fs::path text = dir_->path() / "text.safetensors";
  if (!fs::exists(text)) write_one_tensor_safetensors(text, "text", 8, 128, false, 11);
  const std::string cmd = "generate --model " + snap() + " --text-embeddings " + text.string() +
                          " --latents-only --frames 5 --steps 1 --seed 7 ";
  RunResult r = run_vortex(cmd + "--first-frame " + (kImages / "exif6.jpg").string() + " --last-frame " +
                           (kImages / "rgb.png").string() + " --out " + dir_->str("canvas"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("canvas 768x1216 from the first keyframe"), std::string::npos) << r.output;
  const nlohmann::json run = nlohmann::json::parse(read_file(fs::path(dir_->str("canvas")) / "run.json"));
  EXPECT_EQ(run["keyframes"]["canvas"]["width"], 768);
  EXPECT_EQ(run["keyframes"]["canvas"]["height"], 1216);
  RunResult half = run_vortex(cmd + "--width 64 --first-frame " + (kImages / "rgb.png").string() + " --out " +
                              dir_->str("canvas_bad"));
  EXPECT_EQ(half.exit_code, 2) << half.output;
  EXPECT_NE(half.output.find("--width and --height go together"), std::string::npos) << half.output;
  EXPECT_FALSE(fs::exists(dir_->str("canvas_bad")));
}

TEST_F(CliFl2va, InspectListsTheTasks) {
  RunResult r = run_vortex("inspect " + snap());
  // The tiny snapshot holds the Ref2VA transformer too (transformer_ref/).
  EXPECT_NE(r.output.find("tasks: t2va, fl2va, ref2va; Vortex runs here: t2va, fl2va, ref2va"), std::string::npos)
      << r.output;
  fs::copy(fs::path(snap()), dir_->path() / "snap_ref", fs::copy_options::recursive);
  fs::remove_all(dir_->path() / "snap_ref" / "vae");
  RunResult ref = run_vortex("inspect " + dir_->str("snap_ref"));
  EXPECT_NE(ref.output.find("tasks: t2va, fl2va, ref2va; Vortex runs here: t2va"), std::string::npos) << ref.output;
  EXPECT_NE(ref.output.find("fl2va needs vae/"), std::string::npos) << ref.output;
  EXPECT_NE(ref.output.find("ref2va needs the Ref2VA transformer, the conditioner, vae/ and audio_vae/"),
            std::string::npos)
      << ref.output;
}

}  // namespace
