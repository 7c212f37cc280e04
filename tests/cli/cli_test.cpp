// `vortex generate` end to end: runs the built binary (path from the VORTEX_CLI_PATH compile definition)
// and checks exit codes and messages for bad input, and for a real h3-tiny run that all four outputs
// appear atomically, run.json parses, its sha256 values match the files (recomputed here with OpenSSL),
// latents are finite and non-trivial, and threads 1 vs 2 give byte-identical latents. --overwrite replaces
// only a previous Vortex run (never `.`, $HOME, a folder with foreign files); unwritable --out, non-finite
// text, requests too big for memory and absurd thread counts fail before any weight is loaded; synth and
// quantize keep files they did not write; the top-level CLI (--version, unknown command, --help types).
// Test inputs (embedding files) are written here with a minimal safetensors writer of our own, so the
// test does not trust src/io. Random values are seeded from std::random_device (seed printed on failure).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>

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
  RunResult r =
      run_vortex("generate --synthetic --synthetic-text 4 --text-embeddings x.safetensors --out " + dir.str("o"));
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
  RunResult r =
      run_vortex("generate --synthetic --text-embeddings " + dir.str("nope.safetensors") + " --out " + dir.str("o"));
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
  RunResult r =
      run_vortex("generate --synthetic --text-embeddings " + dir.str("text.safetensors") + " --out " + dir.str("o"));
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
  // Exactly the two reasons a machine cannot run --backend cuda: no device, or a build without the backend.
  EXPECT_TRUE(r.output.find("no CUDA device") != std::string::npos ||
              r.output.find("no CUDA backend") != std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--backend cpu"), std::string::npos) << r.output;  // says what to do instead
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
  EXPECT_TRUE(no_partial_dirs_next_to(dir.path() / "o"));
}

TEST(CliGenerate, CpuRejectsApproximateModes) {
  ScratchDir dir;
  // Bad input for this backend: exit 2 (it was 1, like a runtime failure).
  RunResult r = run_vortex(std::string(kSmallRun) + " --precision fp8 --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bf16"), std::string::npos) << r.output;
  RunResult sage = run_vortex(std::string(kSmallRun) + " --attention sage2 --out " + dir.str("o"));
  EXPECT_EQ(sage.exit_code, 2) << sage.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
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
  // One device, no world of ranks (docs/outputs.md "world").
  EXPECT_EQ(run["world"]["world_size"].get<int>(), 1);
  EXPECT_EQ(run["world"]["parallelism"].get<std::string>(), "none");
  EXPECT_TRUE(run["world"]["communicator"].is_null());

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
  const std::string common =
      "generate --synthetic --config h3-tiny --width 448 --height 256 --frames 22 --steps 2 "
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
    RunResult synthetic =
        run_vortex("generate --synthetic --width 64 --height 64 --frames 5 --steps 2 --quiet --weights-seed " +
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
  // The rate (steps per second, or seconds per step when slower), and no time printed with more than 2 decimals.
  EXPECT_TRUE(out.find(" step/s") != std::string::npos || out.find("/step") != std::string::npos) << out;
  EXPECT_FALSE(std::regex_search(out, std::regex("[0-9]\\.[0-9]{3,} ?s\\b"))) << out;
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
    RunResult run =
        run_vortex(std::string(kSmallRun) + " --sampler euler --text-embeddings " + dir.str(file) + " --out " + out);
    ASSERT_EQ(run.exit_code, 0) << run.output << " (seed " << seed << ")";
    nlohmann::json j = nlohmann::json::parse(read_file(fs::path(out) / "run.json"));
    EXPECT_EQ(j["geometry"]["text_rows"].get<int>(), std::string(file) == "raw.safetensors" ? 5 : 9);
    EXPECT_EQ(j["request"]["sampler"].get<std::string>(), "euler");
    EXPECT_EQ(j["request"]["text_embeddings_sha256"].get<std::string>(), sha256_hex_of(read_file(dir.str(file))));
  }
}

// ---- --out and --overwrite: only a directory Vortex wrote is ever replaced ----

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// `--out . --overwrite` used to delete the whole working directory.
TEST(CliOverwrite, CurrentDirectoryIsNeverReplaced) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "work" / "folder");
  { std::ofstream(dir.path() / "work" / "notes.txt") << "mine"; }
  RunResult r = run_vortex_in(dir.path() / "work", std::string(kSmallRun) + " --out . --overwrite");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("current directory"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir.path() / "work" / "notes.txt"), "mine");
  EXPECT_TRUE(fs::is_directory(dir.path() / "work" / "folder"));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"work"});  // no staging or aside dirs
  // An ancestor of the working directory, and the root, are refused the same way.
  RunResult up = run_vortex_in(dir.path() / "work" / "folder", std::string(kSmallRun) + " --out .. --overwrite");
  EXPECT_EQ(up.exit_code, 2) << up.output;
  EXPECT_NE(up.output.find("ancestor of the current directory"), std::string::npos) << up.output;
  EXPECT_EQ(read_file(dir.path() / "work" / "notes.txt"), "mine");
  RunResult root = run_vortex(std::string(kSmallRun) + " --out / --overwrite");
  EXPECT_EQ(root.exit_code, 2) << root.output;
  EXPECT_NE(root.output.find("root directory"), std::string::npos) << root.output;
}

TEST(CliOverwrite, HomeDirectoryIsNeverReplaced) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "home");
  { std::ofstream(dir.path() / "home" / ".profile") << "mine"; }
  const std::string cmd = "HOME='" + dir.str("home") + "' '" + vortex_cli_path() + "' " + kSmallRun +
                          " --overwrite --out " + dir.str("home") + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << out;
  EXPECT_NE(out.find("home directory"), std::string::npos) << out;
  EXPECT_EQ(read_file(dir.path() / "home" / ".profile"), "mine");
}

// A directory of someone else's files is refused even with --overwrite (it used to be deleted).
TEST(CliOverwrite, DirectoryWithoutRunJsonIsRefused) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "o" / "sub");
  { std::ofstream(dir.path() / "o" / "keep.txt") << "precious"; }
  RunResult r = run_vortex(std::string(kSmallRun) + " --overwrite --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no run.json"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir.path() / "o" / "keep.txt"), "precious");
  EXPECT_TRUE(fs::is_directory(dir.path() / "o" / "sub"));
  EXPECT_TRUE(no_partial_dirs_next_to(dir.path() / "o"));
}

TEST(CliOverwrite, ForeignRunJsonIsRefused) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "o");
  { std::ofstream(dir.path() / "o" / "run.json") << R"({"schema": "someone.else/2", "outputs": {}})"; }
  RunResult r = run_vortex(std::string(kSmallRun) + " --overwrite --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not a Vortex run manifest"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir.path() / "o" / "run.json"), R"({"schema": "someone.else/2", "outputs": {}})");
}

TEST(CliOverwrite, PreviousRunIsReplacedButNotWithAForeignFileInside) {
  ScratchDir dir;
  const fs::path o = dir.path() / "o";
  RunResult first = run_vortex(std::string(kSmallRun) + " --seed 1 --out " + o.string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string run1 = read_file(o / "run.json");

  // A file the user added to the run directory makes it theirs: refused, everything kept.
  { std::ofstream(o / "notes.txt") << "my notes"; }
  RunResult refused = run_vortex(std::string(kSmallRun) + " --seed 2 --overwrite --out " + o.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("'notes.txt'"), std::string::npos) << refused.output;
  EXPECT_EQ(read_file(o / "notes.txt"), "my notes");
  EXPECT_EQ(read_file(o / "run.json"), run1);
  EXPECT_TRUE(no_partial_dirs_next_to(o));

  // Without it the run directory is Vortex's own and is replaced.
  fs::remove(o / "notes.txt");
  RunResult replaced = run_vortex(std::string(kSmallRun) + " --seed 2 --overwrite --out " + o.string());
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output;
  nlohmann::json run2 = nlohmann::json::parse(read_file(o / "run.json"));
  EXPECT_EQ(run2["request"]["seed"].get<int>(), 2);
  EXPECT_EQ(names_in(o), (std::vector<std::string>{"audio_latents.safetensors", "preview.png", "run.json",
                                                   "video_latents.safetensors"}));
  EXPECT_TRUE(no_partial_dirs_next_to(o));
}

// ---- checks that run before any weight is loaded or step computed ----

TEST(CliGenerate, UncreatableOutFailsBeforeLoadingWeights) {
  ScratchDir dir;
  { std::ofstream(dir.path() / "a_file") << "x"; }
  // A path under a regular file cannot be created by anyone (root included).
  RunResult r = run_vortex("generate --synthetic --width 64 --height 64 --frames 5 --steps 3 --out " +
                           dir.str("a_file") + "/sub");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("cannot be written"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("synthesizing weights"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir.path() / "a_file"), "x");
}

TEST(CliGenerate, NonFiniteTextEmbeddingsAreRefusedBeforeSampling) {
  ScratchDir dir;
  for (const bool bf16 : {false, true}) {
    // h3-tiny raw states [6, 128]; NaN at (2, 5) and Inf at (4, 0).
    std::vector<float> v(6 * 128, 0.5f);
    v[2 * 128 + 5] = std::numeric_limits<float>::quiet_NaN();
    v[4 * 128 + 0] = std::numeric_limits<float>::infinity();
    const fs::path file = dir.path() / (bf16 ? "bf16.safetensors" : "f32.safetensors");
    write_tensor_values(file, "prompt_states", 6, 128, v, bf16);
    RunResult r = run_vortex("generate --synthetic --width 64 --height 64 --frames 5 --steps 2 --text-embeddings " +
                             file.string() + " --out " + dir.str("o"));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("'prompt_states' has 2 non-finite (NaN/Inf) values"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("row 2, column 5"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("velocity"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir.path() / "o"));
  }
}

uint64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

// h3 (33B, ~66 GB of BF16 weights) on the CPU of a small machine grew to 12 GB before it was killed.
TEST(CliGenerate, H3OnTheCpuIsRefusedWithTheMemoryNumbers) {
  if (mem_available_bytes() >= 80ull * 1000 * 1000 * 1000) {
    GTEST_SKIP() << "this machine has >= 80 GB available: h3 on the CPU fits, the refusal cannot be checked here";
  }
  ScratchDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_vortex("generate --config h3 --synthetic --backend cpu --out " + dir.str("o"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not enough memory"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("weights 6"), std::string::npos) << r.output;  // "weights 66.x GB"
  EXPECT_NE(r.output.find("GB of host memory is available"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("synthesizing weights"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 5.0) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
  EXPECT_TRUE(no_partial_dirs_next_to(dir.path() / "o"));
}

// A 1,048,576-pixel-wide request was accepted and ran silently for a minute.
TEST(CliGenerate, HugeWidthIsRefusedFast) {
  ScratchDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_vortex("generate --synthetic --width 1048576 --height 64 --frames 5 --out " + dir.str("o"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("at most 8192 pixels"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 5.0);
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
}

// A long CPU request is warned about (with the estimate) but not refused.
TEST(CliGenerate, SlowCpuRunIsWarnedAbout) {
  ScratchDir dir;
  // 4096x4096, 22 frames on h3-tiny: ~115K rows, attention 4 S^2 I per block: more than a day at the
  // CPU rate. The out path cannot be written, so the run stops right after the warning.
  { std::ofstream(dir.path() / "a_file") << "x"; }
  RunResult r = run_vortex("generate --synthetic --width 4096 --height 4096 --frames 22 --steps 1 --threads 1 --out " +
                           dir.str("a_file") + "/sub");
  EXPECT_NE(r.output.find("vortex generate: warning: this CPU run is estimated at"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hours"), std::string::npos) << r.output;
  EXPECT_EQ(r.exit_code, 2) << r.output;  // the unwritable --out, reported after the warning
}

TEST(CliGenerate, ThreadCountBeyondTheMachineIsAnArgumentError) {
  ScratchDir dir;
  RunResult r = run_vortex(std::string(kSmallRun) + " --threads 100000 --out " + dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--threads 100000 is more than 4x"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("system_error"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
  RunResult q = run_vortex("quantize --in x.safetensors --out y.safetensors --format fp8_scaled --threads 100000");
  EXPECT_EQ(q.exit_code, 2) << q.output;
  EXPECT_NE(q.output.find("--threads must be in [0,"), std::string::npos) << q.output;
}

TEST(CliGenerate, ConfigAdviceFitsACheckpoint) {
  ScratchDir dir;
  const std::string ckpt = dir.str("tiny.safetensors");
  RunResult synth = run_vortex("synth --config h3-tiny --quiet --out " + ckpt);
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  // A config.json that does not describe the weights beside it (3 blocks instead of 2).
  nlohmann::json cfg = nlohmann::json::parse(read_file(dir.path() / "config.json"));
  cfg["num_layers"] = 3;
  { std::ofstream(dir.path() / "config.json") << cfg.dump(2); }
  RunResult r = run_vortex("generate --checkpoint " + ckpt + " --width 64 --height 64 --frames 5 --steps 1 --out " +
                           dir.str("o"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.find("Check --config"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Check the checkpoint's config.json"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "o"));
  EXPECT_TRUE(no_partial_dirs_next_to(dir.path() / "o"));
}

// ---- synth / quantize never replace files Vortex did not write ----

TEST(CliSynth, ExistingOutputsAreKeptUnlessVortexWroteThemAndOverwriteIsGiven) {
  ScratchDir dir;
  const std::string ckpt = dir.str("tiny.safetensors");
  ASSERT_EQ(run_vortex("synth --config h3-tiny --quiet --seed 1 --out " + ckpt).exit_code, 0);
  const std::string first = read_file(ckpt);
  RunResult again = run_vortex("synth --config h3-tiny --quiet --seed 2 --out " + ckpt);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("--overwrite"), std::string::npos) << again.output;
  EXPECT_TRUE(read_file(ckpt) == first);
  RunResult replaced = run_vortex("synth --config h3-tiny --quiet --seed 2 --overwrite --out " + ckpt);
  EXPECT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_FALSE(read_file(ckpt) == first);

  // Someone else's safetensors file: refused with and without --overwrite.
  const fs::path theirs = dir.path() / "theirs.safetensors";
  write_one_tensor_safetensors(theirs, "w", 2, 2, false, 7);
  const std::string theirs_bytes = read_file(theirs);
  for (const char* flag : {"", " --overwrite"}) {
    RunResult r = run_vortex("synth --config h3-tiny --quiet --out " + theirs.string() + flag);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(read_file(theirs) == theirs_bytes) << flag;
  }
  EXPECT_NE(run_vortex("synth --config h3-tiny --quiet --overwrite --out " + theirs.string())
                .output.find("was not written by Vortex"),
            std::string::npos);

  // A config.json of someone else's model directory is never replaced, and nothing is written.
  fs::create_directories(dir.path() / "model");
  { std::ofstream(dir.path() / "model" / "config.json") << R"({"hidden_size": 5376})"; }
  for (const char* flag : {"", " --overwrite"}) {
    RunResult r = run_vortex("synth --config h3-tiny --quiet --out " + dir.str("model/new.safetensors") + flag);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
    EXPECT_EQ(read_file(dir.path() / "model" / "config.json"), R"({"hidden_size": 5376})");
    EXPECT_FALSE(fs::exists(dir.path() / "model" / "new.safetensors"));
  }
}

TEST(CliQuantize, ExistingOutputIsKeptUnlessVortexWroteItAndOverwriteIsGiven) {
  ScratchDir dir;
  const std::string ckpt = dir.str("tiny.safetensors");
  ASSERT_EQ(run_vortex("synth --config h3-tiny --quiet --out " + ckpt).exit_code, 0);
  const std::string q = dir.str("tiny_fp8.safetensors");
  const std::string args = "quantize --quiet --format fp8_scaled --in " + ckpt + " --out " + q;
  RunResult first = run_vortex(args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string bytes = read_file(q);
  RunResult again = run_vortex(args);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("--overwrite"), std::string::npos) << again.output;
  RunResult replaced = run_vortex(args + " --overwrite");
  EXPECT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_TRUE(read_file(q) == bytes);  // same input, same bytes

  const fs::path theirs = dir.path() / "theirs.safetensors";
  write_one_tensor_safetensors(theirs, "w", 2, 2, false, 7);
  const std::string theirs_bytes = read_file(theirs);
  RunResult r =
      run_vortex("quantize --quiet --format fp8_scaled --in " + ckpt + " --out " + theirs.string() + " --overwrite");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("was not written by Vortex"), std::string::npos) << r.output;
  EXPECT_TRUE(read_file(theirs) == theirs_bytes);
}

// ---- top-level CLI ----

TEST(CliTop, VersionPrintsVersionAndCommit) {
  RunResult r = run_vortex("--version");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("vortex ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("(git "), std::string::npos) << r.output;
}

TEST(CliTop, UnknownCommandAndNoCommand) {
  RunResult r = run_vortex("frobnicate");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("vortex: error: unknown command 'frobnicate'; commands: generate, inspect"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("A subcommand is required"), std::string::npos) << r.output;
  RunResult none = run_vortex("");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("Usage"), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("a command is required"), std::string::npos) << none.output;
}

TEST(CliTop, HelpShowsIntegerOptionsAndBenchDescriptions) {
  RunResult g = run_vortex("generate --help");
  EXPECT_EQ(g.exit_code, 0) << g.output;
  for (const char* opt :
       {"--width INT", "--height INT", "--frames INT", "--steps INT", "--seed INT", "--threads INT"}) {
    EXPECT_NE(g.output.find(opt), std::string::npos) << opt << "\n" << g.output;
  }
  EXPECT_EQ(g.output.find("--width TEXT"), std::string::npos) << g.output;
  RunResult s = run_vortex("synth --help");
  EXPECT_NE(s.output.find("--seed INT"), std::string::npos) << s.output;
  RunResult b = run_vortex("bench --help");
  EXPECT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("per-component device timings"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("per-step timings"), std::string::npos) << b.output;
}

}  // namespace
