// `vortex generate` end to end: runs the built binary (path from the VORTEX_CLI_PATH compile definition)
// and checks exit codes and messages for bad input, and for a real h3-tiny run that all four outputs
// appear atomically, run.json parses, its sha256 values match the files (recomputed here with OpenSSL),
// latents are finite and non-trivial, and threads 1 vs 2 give byte-identical latents.
// Test inputs (embedding files) are written here with a minimal safetensors writer of our own, so the
// test does not trust src/io. Random values are seeded from std::random_device (seed printed on failure).
#include <cmath>
#include <cstdlib>

#include "cli/cli_test_util.h"

namespace {
using namespace vortex_cli_test;

bool no_partial_dirs_next_to(const fs::path& out) {
  for (const auto& e : fs::directory_iterator(out.parent_path())) {
    const std::string name = e.path().filename().string();
    if (name.find(out.filename().string() + ".partial-") == 0) return false;
    if (name.find(out.filename().string() + ".old-") == 0) return false;
  }
  return true;
}

constexpr const char* kSmallRun = "generate --synthetic --width 64 --height 64 --frames 5 --steps 1 --quiet";
constexpr const char* kErrorPrefix = "vortex generate: error:";

TEST(CliGenerate, MissingOutIsAnArgumentError) {
  RunResult r = run_vortex("generate --synthetic");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(kErrorPrefix), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--out is required"), std::string::npos) << r.output;
}

TEST(CliGenerate, MissingWeightsIsAnArgumentError) {
  ScratchDir dir;
  RunResult r = run_vortex("generate --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no weights"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
}

TEST(CliGenerate, NonIntegerValueIsAnArgumentError) {
  ScratchDir dir;
  RunResult r = run_vortex("generate --synthetic --width abc --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--width expects an integer"), std::string::npos) << r.output;
}

TEST(CliGenerate, UnknownOptionIsAnArgumentError) {
  ScratchDir dir;
  RunResult r = run_vortex("generate --synthetic --no-such-flag --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no-such-flag"), std::string::npos) << r.output;
}

TEST(CliGenerate, ConflictingTextSourcesAreAnArgumentError) {
  ScratchDir dir;
  RunResult r = run_vortex("generate --synthetic --synthetic-text 4 --text-embeddings x.safetensors --out " +
                           dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("exclude each other"), std::string::npos) << r.output;
}

TEST(CliGenerate, UnknownConfig) {
  ScratchDir dir;
  RunResult r = run_vortex("generate --config h9-huge --synthetic --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("h9-huge"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
}

TEST(CliGenerate, SizeNotMultipleOf32) {
  ScratchDir dir;
  RunResult r = run_vortex("generate --synthetic --width 450 --height 256 --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(kErrorPrefix), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("32"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
}

TEST(CliGenerate, BadStepsSamplerAndBackendNames) {
  ScratchDir dir;
  RunResult steps = run_vortex("generate --synthetic --steps 0 --out " + dir.str("o"));
  EXPECT_EQ(steps.exit_code, 2) << steps.output;
  EXPECT_NE(steps.output.find("--steps"), std::string::npos) << steps.output;
  RunResult sampler = run_vortex("generate --synthetic --sampler dpmpp --out " + dir.str("o"));
  EXPECT_EQ(sampler.exit_code, 2) << sampler.output;
  EXPECT_NE(sampler.output.find("dpmpp"), std::string::npos) << sampler.output;
  RunResult backend = run_vortex("generate --synthetic --backend tpu --out " + dir.str("o"));
  EXPECT_EQ(backend.exit_code, 2) << backend.output;
  EXPECT_NE(backend.output.find("tpu"), std::string::npos) << backend.output;
}

TEST(CliGenerate, AbsurdlyLargeRequestIsRefusedBeforeAllocating) {
  ScratchDir dir;
  RunResult r = run_vortex("generate --synthetic --width 4096 --height 4096 --frames 1000 --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("request too large"), std::string::npos) << r.output;
}

TEST(CliGenerate, MissingTextEmbeddingsFile) {
  ScratchDir dir;
  RunResult r = run_vortex("generate --synthetic --text-embeddings " + dir.str("nope.safetensors") + " --out " +
                           dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("nope.safetensors"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
}

TEST(CliGenerate, WrongEmbeddingWidth) {
  ScratchDir dir;
  std::random_device rd;
  const uint32_t seed = rd();
  // h3-tiny: text_dim 128, hidden 256; 100 is neither.
  write_one_tensor_safetensors(dir.path() / "text.safetensors", "text", 6, 100, false, seed);
  RunResult r = run_vortex("generate --synthetic --text-embeddings " + dir.str("text.safetensors") + " --out " +
                           dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output << " (seed " << seed << ")";
  EXPECT_NE(r.output.find("width 100"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
}

TEST(CliGenerate, NonEmptyOutWithoutOverwriteIsRefusedAndUntouched) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "o");
  { std::ofstream(dir.path() / "o" / "keep.txt") << "precious"; }
  RunResult r = run_vortex(std::string(kSmallRun) + " --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--overwrite"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir.path() / "o" / "keep.txt"), "precious");
  EXPECT_TRUE(no_partial_dirs_next_to(dir.path() / "o"));
}

TEST(CliGenerate, CudaBackendWithoutGpuGivesAClearMessage) {
  ScratchDir dir;
  RunResult r = run_vortex(std::string(kSmallRun) + " --backend cuda --out " + dir.str("o"));
  if (r.exit_code == 0) {
    GTEST_SKIP() << "a CUDA device is present here: the no-GPU message cannot be checked on this machine";
  }
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(kErrorPrefix), std::string::npos) << r.output;
  EXPECT_TRUE(r.output.find("CUDA") != std::string::npos || r.output.find("cuda") != std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
  EXPECT_TRUE(no_partial_dirs_next_to(dir.path() / "o"));
}

TEST(CliGenerate, CpuRejectsApproximateModes) {
  ScratchDir dir;
  RunResult r = run_vortex(std::string(kSmallRun) + " --precision fp8 --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("bf16"), std::string::npos) << r.output;
}

// Checks the four files, run.json against the files, latents finite and non-trivial. Returns the
// video + audio latent file bytes.
std::string check_outputs(const fs::path& out, int steps, const std::vector<int64_t>& video_shape,
                          const std::vector<int64_t>& audio_shape) {
  for (const char* f : {"video_latents.safetensors", "audio_latents.safetensors", "preview.png", "run.json"}) {
    EXPECT_TRUE(fs::is_regular_file(out / f)) << "missing " << (out / f);
  }
  EXPECT_TRUE(no_partial_dirs_next_to(out));
  nlohmann::json run = nlohmann::json::parse(read_file(out / "run.json"));
  for (const char* f : {"video_latents.safetensors", "audio_latents.safetensors", "preview.png"}) {
    EXPECT_EQ(run["outputs"][f]["sha256"].get<std::string>(), sha256_hex_of(read_file(out / f))) << f;
    EXPECT_EQ(run["outputs"][f]["bytes"].get<uint64_t>(), fs::file_size(out / f)) << f;
  }
  EXPECT_EQ(run["timing"]["step_seconds"].size(), static_cast<size_t>(steps));
  EXPECT_GT(run["timing"]["total_seconds"].get<double>(), 0.0);
  EXPECT_FALSE(run["vortex"]["version"].get<std::string>().empty());
  EXPECT_FALSE(run["vortex"]["git_commit"].get<std::string>().empty());
  EXPECT_EQ(run["request"]["steps"].get<int>(), steps);
  EXPECT_EQ(run["request"]["backend"].get<std::string>(), "cpu");
  EXPECT_EQ(run["model_config"]["name"].get<std::string>(), "h3-tiny");
  EXPECT_EQ(run["time_utc"].get<std::string>().size(), 20u);

  std::string latent_bytes;
  const std::pair<const char*, std::vector<int64_t>> tensors[] = {{"video_latents", video_shape},
                                                                  {"audio_latents", audio_shape}};
  for (const auto& [name, shape] : tensors) {
    ParsedSafetensors st = parse_safetensors(out / (std::string(name) + ".safetensors"));
    EXPECT_EQ(st.header[name]["dtype"].get<std::string>(), "F32") << name;
    EXPECT_EQ(st.header[name]["shape"].get<std::vector<int64_t>>(), shape) << name;
    const size_t n = st.data.size() / 4;
    int64_t expected_n = 1;
    for (int64_t d : shape) expected_n *= d;
    EXPECT_EQ(static_cast<int64_t>(n), expected_n) << name;
    std::vector<float> v(n);
    std::memcpy(v.data(), st.data.data(), n * 4);
    double sum_sq = 0.0;
    for (float x : v) {
      EXPECT_TRUE(std::isfinite(x)) << name;
      if (!std::isfinite(x)) break;
      sum_sq += static_cast<double>(x) * x;
    }
    EXPECT_GT(sum_sq / static_cast<double>(n), 1e-4) << name << " is (nearly) all zeros";
    latent_bytes += read_file(out / (std::string(name) + ".safetensors"));
  }
  const std::string png = read_file(out / "preview.png");
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  return latent_bytes;
}

TEST(CliGenerate, DemoSizeEndToEndThreadInvarianceAndOverwrite) {
  ScratchDir dir;
  const std::string common = "generate --synthetic --config h3-tiny --width 448 --height 256 --frames 22 --steps 2 "
                             "--sampler res_multistep --synthetic-text 16";
  RunResult a = run_vortex(common + " --seed 7 --threads 1 --out " + dir.str("a"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("step 2/2"), std::string::npos) << a.output;  // plain progress lines (not a TTY)
  EXPECT_NE(a.output.find(dir.str("a")), std::string::npos) << a.output;
  // 448x256, 22 frames: latent [24, 7, 16, 28]; audio round(22 / 24 * 40) = 37 latents.
  const std::string bytes_a = check_outputs(dir.path() / "a", 2, {24, 7, 16, 28}, {2, 32, 37});

  RunResult b = run_vortex(common + " --seed 7 --threads 2 --out " + dir.str("b"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::string bytes_b = check_outputs(dir.path() / "b", 2, {24, 7, 16, 28}, {2, 32, 37});
  EXPECT_TRUE(bytes_a == bytes_b) << "latents differ between --threads 1 and --threads 2";

  // A different seed must change the latents (the seed reaches the noise). The trailing '/' must still
  // stage next to b, not inside it.
  RunResult c = run_vortex(common + " --threads 2 --seed 8 --overwrite --out " + dir.str("b") + "/");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const std::string bytes_c = check_outputs(dir.path() / "b", 2, {24, 7, 16, 28}, {2, 32, 37});
  EXPECT_FALSE(bytes_a == bytes_c) << "seed 7 and seed 8 gave identical latents";
}

// A checkpoint written by `vortex synth --seed N` must give the same latents as `--synthetic
// --weights-seed N` (the loader, the QKV reorder of the original layout and synthesize_weights agree).
TEST(CliGenerate, SynthCheckpointMatchesSyntheticWeights) {
  ScratchDir dir;
  std::random_device rd;
  const uint32_t weights_seed = rd() % 100000;
  for (const char* layout : {"original", "comfy"}) {
    const std::string ckpt = dir.str(std::string("h3-tiny-") + layout + ".safetensors");
    RunResult synth = run_vortex("synth --config h3-tiny --layout " + std::string(layout) + " --seed " +
                                 std::to_string(weights_seed) + " --out " + ckpt);
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
    const std::string out = dir.str(std::string("from_ckpt_") + layout);
    RunResult from_file = run_vortex("generate --checkpoint " + ckpt +
                                     " --width 64 --height 64 --frames 5 --steps 2 --quiet --out " + out);
    ASSERT_EQ(from_file.exit_code, 0) << from_file.output << " (weights seed " << weights_seed << ")";
    const std::string synthetic_out = dir.str(std::string("synthetic_") + layout);
    RunResult synthetic = run_vortex("generate --synthetic --width 64 --height 64 --frames 5 --steps 2 --quiet --weights-seed " +
                           std::to_string(weights_seed) + " --out " + synthetic_out);
    ASSERT_EQ(synthetic.exit_code, 0) << synthetic.output;
    for (const char* f : {"video_latents.safetensors", "audio_latents.safetensors"}) {
      EXPECT_TRUE(read_file(fs::path(out) / f) == read_file(fs::path(synthetic_out) / f))
          << f << ": --checkpoint (" << layout << " layout) and --synthetic differ, weights seed " << weights_seed;
    }
  }
}

TEST(CliGenerate, ProgressBarOnATerminal) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "util-linux `script` is not installed: cannot give vortex a pseudo-terminal here";
  }
  ScratchDir dir;
  std::string inner = "'";
  inner.append(vortex_cli_path()).append("' generate");
  inner += " --synthetic --width 64 --height 64 --frames 5 --steps 3 --out " + dir.str("o");
  const std::string cmd = "script -q -e -c \"" + inner + "\" /dev/null 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  // Redrawn in place: carriage return + bar, every step, ending at 3/3.
  EXPECT_NE(out.find("\r[##########....................] step 1/3"), std::string::npos) << out;
  EXPECT_NE(out.find("step 3/3"), std::string::npos) << out;
  EXPECT_NE(out.find("eta"), std::string::npos) << out;
  EXPECT_EQ(out.find("\nstep 1/3"), std::string::npos) << "plain progress lines on a terminal: " << out;
}

TEST(CliGenerate, TextEmbeddingFilesRawAndRefinedBf16AndF32) {
  ScratchDir dir;
  std::random_device rd;
  const uint32_t seed = rd();
  // h3-tiny: raw states are [L, 128], refined states [L, 256].
  write_one_tensor_safetensors(dir.path() / "raw.safetensors", "prompt", 5, 128, true, seed);
  write_one_tensor_safetensors(dir.path() / "refined.safetensors", "prompt", 9, 256, false, seed + 1);
  for (const char* file : {"raw.safetensors", "refined.safetensors"}) {
    const std::string out = dir.str(std::string("out_") + file);
    RunResult run = run_vortex(std::string(kSmallRun) + " --sampler euler --text-embeddings " + dir.str(file) +
                               " --out " + out);
    ASSERT_EQ(run.exit_code, 0) << run.output << " (seed " << seed << ")";
    nlohmann::json j = nlohmann::json::parse(read_file(fs::path(out) / "run.json"));
    EXPECT_EQ(j["geometry"]["text_rows"].get<int>(), std::string(file) == "raw.safetensors" ? 5 : 9);
    EXPECT_EQ(j["request"]["sampler"].get<std::string>(), "euler");
    EXPECT_EQ(j["request"]["text_embeddings_sha256"].get<std::string>(), sha256_hex_of(read_file(dir.str(file))));
  }
}

}  // namespace
