// `vortex generate` requests as the references build them: frames snapped up to 17n + 5 with a note,
// `--seconds`, `--schedule comfyui|diffusers` (the diffusers tables in run.json bit-identical to
// MiniMaxH3Scheduler's, from tests/parity/fixtures/schedules.json) and the schedule's default sampler.
#include <cstring>

#include "cli/cli_test_util.h"
#include "parity/parity_fixtures.h"

namespace vortex_cli_test {
namespace {

const std::string kSmall = "generate --synthetic --config h3-tiny --width 64 --height 64 --steps 2 --synthetic-text 4";

nlohmann::json run_json(const fs::path& out) { return nlohmann::json::parse(read_file(out / "run.json")); }

TEST(CliRequest, FramesSnapUpWithANote) {
  ScratchDir dir;
  RunResult r = run_vortex(kSmall + " --frames 23 --out " + dir.str("a"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: frames 23 snapped up to 39"), std::string::npos) << r.output;
  const nlohmann::json j = run_json(dir.path() / "a");
  EXPECT_EQ(j["geometry"]["frames"], 39);  // nearest would be 22
  EXPECT_EQ(j["geometry"]["latent_frames"], 12);
  EXPECT_EQ(j["request"]["frames_requested"], 23);
  // A legal count runs without a frames note.
  RunResult ok = run_vortex(kSmall + " --frames 22 --out " + dir.str("b"));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.output.find("note: frames"), std::string::npos) << ok.output;
  EXPECT_EQ(ok.output.find("snapped"), std::string::npos) << ok.output;
}

TEST(CliRequest, SecondsAt24FpsRoundedUp) {
  ScratchDir dir;
  RunResult r = run_vortex(kSmall + " --seconds 0.5 --out " + dir.str("a"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0.5 s at 24 fps -> 22 frames"), std::string::npos) << r.output;
  const nlohmann::json j = run_json(dir.path() / "a");
  EXPECT_EQ(j["geometry"]["frames"], 22);
  EXPECT_EQ(j["request"]["seconds_requested"], 0.5);
  EXPECT_TRUE(j["request"]["frames_requested"].is_null());
  for (const char* bad : {"--seconds 0", "--seconds -2", "--seconds abc", "--seconds nan", "--seconds 1 --frames 22"}) {
    RunResult e = run_vortex(kSmall + " " + bad + " --out " + dir.str("bad"));
    EXPECT_EQ(e.exit_code, 2) << bad << ": " << e.output;
    EXPECT_NE(e.output.find("--seconds"), std::string::npos) << bad << ": " << e.output;
    EXPECT_FALSE(fs::exists(dir.path() / "bad")) << bad;
  }
}

TEST(CliRequest, DiffusersScheduleTablesBitIdenticalAndEulerByDefault) {
  ScratchDir dir;
  RunResult r = run_vortex(kSmall + " --frames 5 --schedule diffusers --out " + dir.str("d"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = run_json(dir.path() / "d");
  EXPECT_EQ(j["request"]["schedule"], "diffusers");
  EXPECT_EQ(j["request"]["sampler"], "euler");  // MiniMaxH3Scheduler's only update
  const nlohmann::json fx = vortex::parity::read_json("schedules.json");
  ASSERT_TRUE(fx.is_object());
  int matched = 0;
  for (const auto& e : fx["diffusers"]) {
    if (e["steps"] != 2) continue;
    const double shift = e["shift"];
    const char* key = shift == 12.0 ? "sigma_video" : shift == 3.0 ? "sigma_audio" : nullptr;
    if (!key) continue;
    const std::vector<uint32_t> want = vortex::parity::hex_words(e["sigmas"]);
    const auto& got = j["schedule"][key];
    ASSERT_EQ(got.size(), want.size()) << key;
    for (size_t i = 0; i < want.size(); ++i) {
      const float g = static_cast<float>(got[i].get<double>());
      uint32_t b;
      std::memcpy(&b, &g, 4);
      EXPECT_EQ(b, want[i]) << key << "[" << i << "]";
    }
    ++matched;
  }
  EXPECT_EQ(matched, 2);
  // An explicit sampler wins over the schedule's default.
  RunResult res = run_vortex(kSmall + " --frames 5 --schedule diffusers --sampler res_multistep --out " + dir.str("r"));
  ASSERT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(run_json(dir.path() / "r")["request"]["sampler"], "res_multistep");
}

TEST(CliRequest, ComfyuiIsTheDefaultScheduleAndBadNamesAreArgumentErrors) {
  ScratchDir dir;
  RunResult r = run_vortex(kSmall + " --frames 5 --out " + dir.str("c"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = run_json(dir.path() / "c");
  EXPECT_EQ(j["request"]["schedule"], "comfyui");
  EXPECT_EQ(j["request"]["sampler"], "res_multistep");
  EXPECT_EQ(j["schedule"]["mode"], "comfyui");
  RunResult bad = run_vortex(kSmall + " --schedule reference --out " + dir.str("x"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("unknown schedule 'reference'"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(dir.path() / "x"));
}

}  // namespace
}  // namespace vortex_cli_test
