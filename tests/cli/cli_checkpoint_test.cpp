// `--checkpoint DIR` end to end through the built binary: an original-layout folder (config.json +
// shards + index) and a diffusers folder written by `vortex synth --layout diffusers` give latents with
// the same sha256 as `--synthetic` with the same weights seed; `vortex inspect DIR` reports the layout;
// a folder with nothing loadable is an argument error (exit 2) that says what the folder holds.
#include "cli/cli_test_util.h"

namespace {
using namespace vortex_cli_test;

constexpr const char* kRun = " --width 64 --height 64 --frames 5 --steps 2 --quiet --out ";

std::string latents_sha(const std::string& out_dir) {
  return sha256_hex_of(read_file(fs::path(out_dir) / "video_latents.safetensors")) + " " +
         sha256_hex_of(read_file(fs::path(out_dir) / "audio_latents.safetensors"));
}

TEST(CliCheckpointFolder, OriginalAndDiffusersFoldersGiveTheSyntheticLatents) {
  ScratchDir dir;
  std::random_device rd;
  const std::string seed = std::to_string(rd() % 100000);
  SCOPED_TRACE("weights seed " + seed);
  RunResult synth = run_vortex("synth --config h3-tiny --quiet --seed " + seed + " --shard-size-gb 0.001 --out " +
                               dir.str("original/model.safetensors.index.json"));
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  synth = run_vortex("synth --config h3-tiny --quiet --layout diffusers --seed " + seed + " --out " +
                     dir.str("diffusers/diffusion_pytorch_model.safetensors"));
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  const std::string config = read_file(dir.path() / "diffusers" / "config.json");
  EXPECT_NE(config.find("\"_class_name\": \"MiniMaxH3Transformer3DModel\""), std::string::npos) << config;
  EXPECT_NE(config.find("\"time_embed_hidden_dim\""), std::string::npos) << config;

  RunResult inspect = run_vortex("inspect " + dir.str("diffusers"));
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("layout: diffusers"), std::string::npos) << inspect.output;
  inspect = run_vortex("inspect " + dir.str("original"));
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("layout: original"), std::string::npos) << inspect.output;

  RunResult synthetic = run_vortex("generate --synthetic --weights-seed " + seed + kRun + dir.str("out_synthetic"));
  ASSERT_EQ(synthetic.exit_code, 0) << synthetic.output;
  const std::string want = latents_sha(dir.str("out_synthetic"));
  for (const char* folder : {"original", "diffusers"}) {
    const std::string out = dir.str(std::string("out_") + folder);
    RunResult r = run_vortex("generate --checkpoint " + dir.str(folder) + kRun + out);
    ASSERT_EQ(r.exit_code, 0) << folder << ": " << r.output;
    EXPECT_EQ(latents_sha(out), want) << "--checkpoint " << folder << "/ and --synthetic differ";
  }
}

TEST(CliCheckpointFolder, FolderWithNothingLoadableIsAnArgumentError) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "snapshot");
  std::ofstream(dir.path() / "snapshot" / "config.json") << "{}";
  RunResult r = run_vortex("generate --checkpoint " + dir.str("snapshot") + kRun + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("holds no *.safetensors or *.safetensors.index.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
  r = run_vortex("inspect " + dir.str("snapshot"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("holds no"), std::string::npos) << r.output;
}

}  // namespace
