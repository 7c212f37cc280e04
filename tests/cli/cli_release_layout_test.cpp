// The MiniMax-H3 release's folder layout through the built binary, with the release's own config files
// (tests/fixtures/release, verbatim) and tiny weights: a snapshot root whose model_index.json is the release's, an
// FL2VA/ partition (the release's model_index.json, transformer/ with original-layout shards and a config.json that
// is the release's file with h3-tiny's value under each of its keys, class MiniMaxH3DiTModel kept), a Ref2VA/
// partition and a transformer_ref/ folder.
// * `--checkpoint` on FL2VA/transformer (original layout) and on transformer/ (diffusers) gives the latents of
//   `--synthetic` with the same weights seed; `--model ROOT` and `--model ROOT/FL2VA` give one another's latents;
// * `--checkpoint` on transformer_ref/ or Ref2VA/transformer and `--model ROOT/Ref2VA` exit 2 naming the FL2VA
//   transformer; `--checkpoint` on the VAE or text encoder folder exits 2 saying what the folder holds;
// * `vortex serve --model ROOT/Ref2VA` starts on the Ref2VA transformer.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

#ifndef VORTEX_RELEASE_FIXTURES
#error "VORTEX_RELEASE_FIXTURES must name tests/fixtures/release"
#endif

namespace {
using namespace vortex_cli_test;

const fs::path kRelease = VORTEX_RELEASE_FIXTURES;
// Starts `vortex serve ARGS`, reads its output until the "listening on" line or its exit, then kills it. Returns
// "listening" or the output it printed before exiting.
std::string serve_start(std::vector<std::string> args) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe() failed";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    args.insert(args.begin(), {vortex_cli_path(), "serve"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  FILE* out = fdopen(fds[0], "r");
  std::string printed;
  char line[1024];
  while (std::fgets(line, sizeof line, out) != nullptr) {
    if (std::string(line).find("listening on http://127.0.0.1:") != std::string::npos) {
      printed = "listening";
      break;
    }
    printed += line;
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  fclose(out);
  return printed;
}

const std::string kTokenizer = std::string(VORTEX_TEXT_FIXTURES) + "/tiny_tokenizer.json";
constexpr const char* kRun = " --width 64 --height 64 --frames 5 --steps 2 --latents-only --quiet --out ";

std::string latents_sha(const std::string& out_dir) {
  return sha256_hex_of(read_file(fs::path(out_dir) / "video_latents.safetensors")) + " " +
         sha256_hex_of(read_file(fs::path(out_dir) / "audio_latents.safetensors"));
}

// The release's config file `release_path` with, under each of its keys, the value `vortex synth` wrote for
// h3-tiny in `synth_config` (same spellings): the release's key set, order and class name, tiny dimensions.
std::string release_config_at_tiny_size(const std::string& release_path, const fs::path& synth_config) {
  nlohmann::ordered_json release = nlohmann::ordered_json::parse(read_file(kRelease / release_path));
  const nlohmann::ordered_json tiny = nlohmann::ordered_json::parse(read_file(synth_config));
  for (auto& [key, value] : release.items()) {
    if (key == "_class_name" || key == "_diffusers_version") continue;
    EXPECT_TRUE(tiny.contains(key)) << release_path << ": synth wrote no '" << key << "'";
    if (tiny.contains(key)) value = tiny[key];
  }
  return release.dump(2) + "\n";
}

void copy_tree(const fs::path& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy(from, to, fs::copy_options::recursive);
}

TEST(CliReleaseLayout, ReleaseConfigsWithTinyWeightsLoadThroughCheckpointAndModel) {
  ScratchDir dir;
  std::random_device rd;
  const std::string seed = std::to_string(rd() % 100000);
  SCOPED_TRACE("weights seed " + seed);
  const fs::path snap = dir.path() / "snap";
  // Root: the tiny synthetic snapshot (diffusers transformer/, 4-layer text encoder, tokenizer, VAEs), with the
  // release's model_index.json and the release's transformer config.json.
  RunResult r =
      run_vortex("synth --snapshot tiny --tokenizer " + kTokenizer + " --seed " + seed + " --out " + snap.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ofstream(snap / "model_index.json", std::ios::binary) << read_file(kRelease / "model_index.json");
  const std::string diffusers_config =
      release_config_at_tiny_size("transformer/config.json", snap / "transformer" / "config.json");
  std::ofstream(snap / "transformer" / "config.json", std::ios::binary) << diffusers_config;
  // FL2VA/: the release's partition index, original-layout shards, the release's config.json at tiny size.
  const fs::path fl2va = snap / "FL2VA";
  r = run_vortex("synth --config h3-tiny --quiet --seed " + seed + " --shard-size-gb 0.001 --out " +
                 (fl2va / "transformer" / "model.safetensors.index.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string original_config =
      release_config_at_tiny_size("FL2VA/transformer/config.json", fl2va / "transformer" / "config.json");
  EXPECT_NE(original_config.find("\"_class_name\": \"MiniMaxH3DiTModel\""), std::string::npos) << original_config;
  EXPECT_NE(original_config.find("\"token_refiner_num_layers\": 1"), std::string::npos) << original_config;
  std::ofstream(fl2va / "transformer" / "config.json", std::ios::binary) << original_config;
  std::ofstream(fl2va / "model_index.json", std::ios::binary) << read_file(kRelease / "FL2VA" / "model_index.json");
  copy_tree(snap / "text_encoder", fl2va / "text_encoder");
  copy_tree(snap / "tokenizer", fl2va / "tokenizer");

  RunResult synthetic = run_vortex("generate --synthetic --weights-seed " + seed + kRun + dir.str("out_synthetic"));
  ASSERT_EQ(synthetic.exit_code, 0) << synthetic.output;
  const std::string want = latents_sha(dir.str("out_synthetic"));
  for (const fs::path& transformer : {fl2va / "transformer", snap / "transformer"}) {
    const std::string out = dir.str("out_" + transformer.parent_path().filename().string());
    RunResult g = run_vortex("generate --checkpoint " + transformer.string() + kRun + out);
    ASSERT_EQ(g.exit_code, 0) << transformer << ": " << g.output;
    EXPECT_EQ(latents_sha(out), want) << "--checkpoint " << transformer << " and --synthetic differ";
  }
  RunResult inspect = run_vortex("inspect " + fl2va.string());
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("layout: partition (MiniMaxH3Pipeline), partition fl2va"), std::string::npos)
      << inspect.output;

  // --model on the root and on the partition: one prompt, one set of weights, one result. The release's indexes
  // name no text layer (50 for H3); the tiny encoder has 4 layers, so --text-layer 3.
  std::string shas[2];
  int i = 0;
  for (const fs::path& model : {snap, fl2va}) {
    const std::string out = dir.str("model_" + std::to_string(i));
    RunResult g = run_vortex("generate --model " + model.string() + " --prompt \"a cat\" --text-layer 3" + kRun + out);
    ASSERT_EQ(g.exit_code, 0) << model << ": " << g.output;
    shas[i++] = latents_sha(out);
  }
  EXPECT_EQ(shas[0], shas[1]) << "--model ROOT and --model ROOT/FL2VA differ";
}

TEST(CliReleaseLayout, Ref2vaAndOtherComponentsAreRefusedNamingWhatToUse) {
  ScratchDir dir;
  const fs::path snap = dir.path() / "snap";
  RunResult r = run_vortex("synth --snapshot tiny --tokenizer " + kTokenizer + " --seed 3 --out " + snap.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::is_directory(snap / "transformer_ref"));  // the tiny snapshot's Ref2VA transformer
  const fs::path ref = snap / "Ref2VA";
  r = run_vortex("synth --config h3-tiny --quiet --seed 3 --out " +
                 (ref / "transformer" / "model.safetensors").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ref_config =
      release_config_at_tiny_size("Ref2VA/transformer/config.json", ref / "transformer" / "config.json");
  std::ofstream(ref / "transformer" / "config.json", std::ios::binary) << ref_config;
  std::ofstream(ref / "model_index.json", std::ios::binary) << read_file(kRelease / "Ref2VA" / "model_index.json");
  copy_tree(snap / "text_encoder", ref / "text_encoder");
  copy_tree(snap / "tokenizer", ref / "tokenizer");

  struct Case {
    std::string args, want;
  } cases[] = {
      {"--checkpoint " + (snap / "transformer_ref").string(), (snap / "transformer").string() + " (diffusers layout)"},
      {"--checkpoint " + (ref / "transformer").string(), (snap / "FL2VA" / "transformer").string()},
      {"--model " + ref.string() + " --prompt \"a cat\"", "'ref2va' partition"},
      {"--checkpoint " + (snap / "vae").string(), "holds the video VAE (AutoencoderKLMiniMaxH3)"},
      {"--checkpoint " + (snap / "text_encoder").string(), "holds the text encoder (Qwen3-VL)"},
  };
  for (const Case& c : cases) {
    const std::string out = dir.str("out");
    RunResult g = run_vortex("generate " + c.args + kRun + out);
    EXPECT_EQ(g.exit_code, 2) << c.args << ": " << g.output;
    EXPECT_NE(g.output.find(c.want), std::string::npos) << c.args << ": " << g.output;
    EXPECT_FALSE(fs::exists(out)) << c.args << " wrote output";
  }
  RunResult g = run_vortex("generate --model " + ref.string() + " --prompt \"a cat\"" + kRun + dir.str("out"));
  EXPECT_NE(g.output.find((snap / "FL2VA").lexically_normal().string()), std::string::npos) << g.output;

  // `vortex serve --model ROOT/Ref2VA` takes the partition's transformer for reference jobs instead of refusing the
  // partition. The release's model_index.json names text layer 50, which the tiny 4-layer encoder lacks (serve has
  // no --text-layer), so this tiny partition stops there: past the transformer's choice.
  const std::string served = serve_start({"--model", ref.string(), "--data", dir.str("serve"), "--port", "0"});
  EXPECT_EQ(served.find("'ref2va' partition"), std::string::npos) << served;
  EXPECT_TRUE(served == "listening" || served.find("text encoder: 50 layers requested") != std::string::npos) << served;
}

}  // namespace
