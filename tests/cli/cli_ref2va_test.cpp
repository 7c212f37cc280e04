// ref2va through the built binary on the tiny synthetic snapshot (`vortex synth --snapshot tiny`, its transformer
// copied to transformer_ref/ as the Ref2VA transformer), the committed reference media, the CPU backend:
// * `generate --ref` picks transformer_ref/ from --model; every bad reference set exits 2 naming --ref and the cause
//   before any weight loads (a missing file, a kind prefix the file contradicts, audio alone, too many images, a
//   too-short clip, references beside keyframes, references on the FL2VA transformer);
// * a valid set passes every check and is then refused, still before any weight loads, because ref2va sampling is
//   not built; no output folder is written;
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
    fs::copy(fs::path(snap()) / "transformer", fs::path(snap()) / "transformer_ref", fs::copy_options::recursive);
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

TEST_F(CliRef2va, AValidSetPassesEveryCheckThenStopsBeforeTheWeights) {
  RunResult r =
      run_vortex(base() + "--ref " + (kImages / "rgb.png").string() + " --ref " + (kMedia / "clip_sound.mkv").string() +
                 " --ref audio:" + (kMedia / "voice_mono.wav").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the 3 reference(s) pass every check"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ref2va sampling is not built"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("loading"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_->str("out")));
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
