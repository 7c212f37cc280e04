// The exit-code contract as a table: every subcommand's bad inputs (a wrong flag or value, a directory for a
// file, a malformed file, a bad LoRA scale, a misspelt option) exit 2 with a message naming the fault, before any
// work (no --out is created). Then the CLI conventions: `vortex help [cmd]`, -V, did-you-mean, grouped help
// without CLI11 type tags, short aliases, --prompt-file, --seed -1 (recorded in run.json), one progress style.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace vortex_cli_test {
namespace {

struct Case {
  const char* args;      // {D} {OUT} {EMB} {BADJSON} {GARBAGE} {TXT} {MISSING} {TOK} are replaced
  int code;              // expected exit code
  const char* fragment;  // must appear in the output
};

// A small valid generate request: every case below changes one thing.
#define GEN "generate --config h3-tiny --synthetic --steps 1 -o {OUT} "

const Case kCases[] = {
    // ---- generate: flags and values ----
    {GEN "--step 1", 2, "unknown option --step (did you mean --steps?)"},
    {"generate --config h3-tiny --synthetic -o {OUT} --out {OUT}2", 2, "--out was given 2 times; give it once"},
    {GEN "--widht 448", 2, "did you mean --width?"},
    {GEN "--width 100", 2, "width and height must be positive multiples of 32"},
    {GEN "--width abc", 2, "--width expects an integer, got 'abc'"},
    {GEN "--height 0", 2, "--height"},
    {GEN "--frames -3", 2, "--frames"},
    {GEN "--steps 0", 2, "--steps"},
    {GEN "--seed abc", 2, "--seed expects a non-negative integer or -1 (random), got 'abc'"},
    {GEN "--seed -2", 2, "--seed expects a non-negative integer or -1 (random), got '-2'"},
    {GEN "--schedule foo", 2, "unknown schedule 'foo'"},
    {GEN "--sampler foo", 2, "unknown sampler 'foo'"},
    {GEN "--backend tpu", 2, "tpu"},
    {GEN "--threads -1", 2, "--threads"},
    {GEN "--precision fp4", 2, "fp4"},
    {GEN "--attention flash", 2, "flash"},
    {GEN "--cuda-graph maybe", 2, "maybe"},
    {"generate --config h4 --synthetic -o {OUT}", 2, "h4"},
    {GEN "--synthetic-text abc", 2, "--synthetic-text expects an integer"},
    {GEN "--seconds -1", 2, "--seconds expects a positive number of seconds"},
    {GEN "--seconds 1 --frames 22", 2, "--seconds and --frames exclude each other"},
    {GEN "--crf abc", 2, "--crf"},
    {GEN "--x264-preset turbo", 2, "--x264-preset must be one of ultrafast"},
    {GEN "--video-encoder vp9", 2, "--video-encoder must be auto, libx264 or h264_nvenc, got 'vp9'"},
    {GEN "--text-layer -1", 2, "--text-layer"},
    {GEN "--gpus 0", 2, "--gpus must be an integer between 1 and 64, got '0'"},
    {GEN "--comm-timeout abc", 2, "--comm-timeout"},
    {GEN "--synthetic-vae huge", 2, "huge"},
    {GEN "--latents-only --synthetic-vae tiny", 2, "--latents-only excludes"},
    {GEN "--vae {D} --audio-vae {D}", 2, "{D}"},
    {"generate --config h3-tiny --synthetic --steps 1", 2, "--out"},
    {"generate --config h3-tiny --synthetic --steps 1 -o /", 2, "is the root directory"},
    {"generate --config h3-tiny --synthetic --steps 1 -o .", 2, "is the current directory"},
    // ---- generate: text inputs ----
    {GEN "--text-embeddings {D}", 2, "is a directory, expected a .safetensors file"},
    {GEN "--text-embeddings {MISSING}", 2, "--text-embeddings {MISSING} does not exist"},
    {GEN "--text-embeddings {GARBAGE}", 2, "{GARBAGE}"},
    {GEN "--text-embeddings {EMB} --synthetic-text 4", 2, "exclude each other"},
    {GEN "--prompt \"a cat\"", 2, "--prompt needs the text encoder: pass --model DIR"},
    {"generate -m {MISSING} -p \"a cat\" -o {OUT}", 2, "{MISSING}"},
    {"generate -m {D} -p \"a cat\" -o {OUT}", 2, "{D}"},
    {"generate -m {D} --prompt-file {MISSING} -o {OUT}", 2, "--prompt-file {MISSING} does not exist"},
    {"generate -m {D} --prompt-file {D} -o {OUT}", 2, "is not a regular file"},
    {"generate -m {D} -p x --prompt-file {TXT} -o {OUT}", 2, "--prompt and --prompt-file exclude each other"},
    {"generate -m {D} --synthetic -p x -o {OUT}", 2, "exclude each other"},
    // ---- generate: weights and LoRA ----
    {"generate --checkpoint {MISSING} --steps 1 -o {OUT}", 2, "{MISSING}"},
    {"generate --checkpoint {GARBAGE} --steps 1 -o {OUT}", 2, "{GARBAGE}"},
    {"generate --checkpoint {GARBAGE} --config h3-tiny -o {OUT}", 2, "--config and --checkpoint exclude each other"},
    {GEN "--lora {EMB}:1e9", 2, "SCALE must be a finite number in [-100, 100], got 1e9"},
    {GEN "--lora {EMB}:-150", 2, "SCALE must be a finite number in [-100, 100]"},
    {GEN "--lora {EMB}:inf", 2, "SCALE must be a finite number"},
    {GEN "--lora {EMB}:1e999", 2, "out of range"},
    {GEN "--lora {EMB}:abc", 2, "SCALE 'abc' is not a number"},
    {GEN "--lora {MISSING}", 2, "no such file"},
    {GEN "--lora {D}", 2, "is a directory"},
    {GEN "--preset turbo9", 2, "--preset must be turbo4"},
    {GEN "--preset turbo4", 2, "pass the adapter with --lora FILE"},
    {GEN "--lora-mode both --lora {EMB}", 2, "both"},
    // ---- decode ----
    {"decode", 2, "LATENTS_DIR is required"},
    {"decode {MISSING} --synthetic-vae tiny -o {OUT}", 2, "does not exist"},
    {"decode {D} --synthetic-vae medium -o {OUT}", 2, "medium"},
    {"decode {D} --synthetic-vae tiny --crf abc -o {OUT}", 2, "--crf"},
    {"decode {D} --synthetic-vae tiny --tiling -o {OUT}", 2, "unknown option --tiling (did you mean --no-tiling?)"},
    {"decode {D} --synthetic-vae tiny", 2, "--out is required"},
    // ---- synth ----
    {"synth --config h4 -o {OUT}", 2, "h4"},
    {"synth --layout weird -o {OUT}", 2, "--layout must be original, comfy or diffusers, got 'weird'"},
    {"synth --seed -1 -o {OUT}", 2, "--seed expects a non-negative integer"},
    {"synth", 2, "--out FILE is required"},
    {"synth --shard-size-gb -1 -o {OUT}", 2, "--shard-size-gb expects a positive number"},
    {"synth --layers 3 -o {OUT}", 2, "--layers must be in [1, 2] for h3-tiny, got 3"},
    {"synth --snapshot huge -o {OUT}", 2, "--snapshot must be tiny"},
    {"synth --snapshot tiny --tokenizer {BADJSON} -o {OUT}", 2, "{BADJSON}"},
    {"synth --snapshot tiny --tokenizer {D} -o {OUT}", 2, "{D}"},
    {"synth --snapshot tiny --vae {D} -o {OUT}", 2, "pass both --vae DIR and --audio-vae DIR"},
    // ---- quantize ----
    {"quantize --in {EMB} -o {OUT}", 2, "--format is required"},
    {"quantize --format fp4 --in {EMB} -o {OUT}", 2, "fp4"},
    {"quantize --format nvfp4 -o {OUT}", 2, "--in FILE is required"},
    {"quantize --format fp8_scaled --in {MISSING} -o {OUT}", 2, "{MISSING}"},
    {"quantize --format fp8_scaled --in {GARBAGE} -o {OUT}", 2, "{GARBAGE}"},
    {"quantize --format fp8_scaled --in {D} -o {OUT}", 2, "{D}"},
    {"quantize --format nvfp4 --encode fast --in {EMB} -o {OUT}", 2, "--encode must be approx or exact"},
    {"quantize --format fp8_scaled --threads -3 --in {EMB} -o {OUT}", 2, "--threads must be in [0, "},
    {"quantize --format fp8_scaled --in {EMB} -o {OUT}", 2, "no block GEMM weights to quantize"},
    // ---- inspect ----
    {"inspect", 2, "file is required"},
    {"inspect {MISSING}", 2, "{MISSING}"},
    {"inspect {GARBAGE}", 2, "{GARBAGE}"},
    {"inspect {EMB} --layout weird", 2, "weird"},
    // ---- tokenize ----
    {"tokenize \"a cat\"", 2, "give exactly one of --tokenizer FILE.json or --model DIR"},
    {"tokenize --tokenizer {BADJSON} \"a cat\"", 2, "{BADJSON}"},
    {"tokenize --tokenizer {MISSING} \"a cat\"", 2, "{MISSING}"},
    {"tokenize --tokenizer {TOK}", 2, "give the prompt as TEXT or --file F"},
    {"tokenize --tokenizer {TOK} --file {MISSING}", 2, "cannot read the prompt file"},
    // ---- encode-text ----
    {"encode-text --prompt x --ids 1 -o {OUT}", 2, "exclude"},
    {"encode-text --prompt x --out {OUT}", 2, "--model DIR is required"},
    {"encode-text --model {MISSING} --prompt x --out {OUT}", 2, "{MISSING}"},
    {"encode-text --model {D} --prompt x --text-layer -2 --out {OUT}", 2, "--text-layer"},
    // ---- serve ----
    {"serve --synthetic --data {TXT}", 2, "--data {TXT} is not a directory"},
    {"serve --synthetic", 2, "--data is required"},
    {"serve --synthetic --data {D} --port abc", 2, "--port"},
    // ---- bench, gate, gemm-tune ----
    {"bench frobnicate", 2, "unknown bench mode 'frobnicate'; one of: "},
    {"gate --frobnicate", 2, "unknown option --frobnicate"},
    {"gemm-tune --frobnicate", 2, "unknown option --frobnicate"},
    // ---- the top level ----
    {"frobnicate", 2, "unknown command 'frobnicate'"},
    {"generat --steps 1", 2, "unknown command 'generat' (did you mean 'generate'?)"},
    {"help frobnicate", 2, "unknown command 'frobnicate'"},
    {"--device -1 inspect {EMB}", 2, "--device"},
};

// No Vortex staging (`*.partial-*`, `*.tmp.*`) left in `dir`.
bool staging_free(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.find(".partial-") != std::string::npos || n.find(".tmp.") != std::string::npos) return false;
  }
  return true;
}

class CliErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    fs::create_directories(dir_->path() / "a_folder");
    write_one_tensor_safetensors(dir_->path() / "emb.safetensors", "text", 4, 128, false, 1);
    std::ofstream(dir_->path() / "bad_tokenizer.json") << "{\"model\": {\"type\": \"BPE\", \"vocab\": [";
    std::ofstream(dir_->path() / "garbage.safetensors") << "0123456789abcdefghijklmnopqrstuvwxyz";
    std::ofstream(dir_->path() / "notes.txt") << "a cat\n";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string expand(std::string s) {
    const std::pair<const char*, std::string> vars[] = {{"{D}", dir_->str("a_folder")},
                                                        {"{OUT}", dir_->str("out")},
                                                        {"{EMB}", dir_->str("emb.safetensors")},
                                                        {"{BADJSON}", dir_->str("bad_tokenizer.json")},
                                                        {"{GARBAGE}", dir_->str("garbage.safetensors")},
                                                        {"{TXT}", dir_->str("notes.txt")},
                                                        {"{MISSING}", dir_->str("missing.safetensors")},
                                                        {"{TOK}", VORTEX_TINY_TOKENIZER}};
    for (const auto& [key, value] : vars)
      for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
        s.replace(at, std::string(key).size(), value);
    return s;
  }
  static ScratchDir* dir_;
};
ScratchDir* CliErrors::dir_ = nullptr;

TEST_F(CliErrors, EveryBadInputExitsTwoWithItsMessageBeforeAnyWork) {
  EXPECT_GE(sizeof(kCases) / sizeof(kCases[0]), 60u);
  for (const Case& c : kCases) {
    const std::string args = expand(c.args);
    RunResult r = run_vortex(args);
    EXPECT_EQ(r.exit_code, c.code) << "vortex " << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expand(c.fragment)), std::string::npos)
        << "vortex " << args << "\nexpected: " << expand(c.fragment) << "\n"
        << r.output;
    EXPECT_NE(r.output.find("error:"), std::string::npos) << "vortex " << args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(dir_->path() / "out")) << "vortex " << args << " wrote --out\n" << r.output;
    std::error_code ec;
    fs::remove_all(dir_->path() / "out", ec);
  }
}

TEST_F(CliErrors, HelpVersionAndConventions) {
  RunResult v = run_vortex("-V");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.output.rfind("vortex ", 0), 0u) << v.output;
  EXPECT_NE(v.output.find("(git "), std::string::npos) << v.output;

  RunResult h = run_vortex("help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.output.find("generate"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("Examples:"), std::string::npos) << h.output;

  RunResult g = run_vortex("help generate");
  EXPECT_EQ(g.exit_code, 0) << g.output;
  for (const char* group :
       {"Model and weights", "Text", "Request", "Output", "Decoders", "Backend and precision", "LoRA",
        "Examples:", "-p,--prompt", "-o,--out", "-m,--model", "--prompt-file", "guidance-distilled"})
    EXPECT_NE(g.output.find(group), std::string::npos) << group << "\n" << g.output;
  // No CLI11 validator tags (K:NONNEGATIVE, INT:POSITIVE ...) in any command's help.
  for (const char* cmd : {"generate", "decode", "synth", "quantize", "inspect", "tokenize", "encode-text", "serve",
                          "bench", "gate", "gemm-tune"}) {
    RunResult c = run_vortex(std::string("help ") + cmd);
    EXPECT_EQ(c.exit_code, 0) << cmd << "\n" << c.output;
    EXPECT_FALSE(std::regex_search(c.output, std::regex(":(NONNEGATIVE|POSITIVE|NUMBER|FILE|DIR|PATH\\(existing\\))")))
        << cmd << "\n"
        << c.output;
  }
  EXPECT_EQ(run_vortex("generate --help").output, g.output) << "vortex help generate == vortex generate --help";
}

TEST_F(CliErrors, PromptFileSeedMinusOneAndAliases) {
  ScratchDir tmp;
  RunResult s = run_vortex("synth --snapshot tiny -o " + tmp.str("snap"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_TRUE(fs::exists(tmp.path() / "snap" / "tokenizer" / "tokenizer.json")) << "the bundled tokenizer";
  // Without its decoders the folder stops at the latents (with a note): these runs are latents only.
  EXPECT_TRUE(fs::exists(tmp.path() / "snap" / "vae" / "config.json"));
  fs::remove_all(tmp.path() / "snap" / "vae");
  fs::remove_all(tmp.path() / "snap" / "audio_vae");
  // A prompt with newlines, quotes and UTF-8 arrives verbatim through --prompt-file (one trailing newline dropped).
  std::string prompt = "a cat \"walks\" along a wall\nat dusk, $HOME `x` \xc3\xa9t\xc3\xa9;";
  while (prompt.size() < 4000) prompt += " the wall is old, the light is warm.";
  std::ofstream(tmp.path() / "prompt.txt", std::ios::binary) << prompt << "\n";
  const std::string small = " --width 64 --height 64 --frames 5 --steps 1 --threads 2 --backend cpu ";
  RunResult g = run_vortex("generate -m " + tmp.str("snap") + " --prompt-file " + tmp.str("prompt.txt") +
                           " --seed -1 --latents-only --quiet" + small + "-o " + tmp.str("run"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  auto run = nlohmann::json::parse(read_file(tmp.path() / "run" / "run.json"));
  EXPECT_EQ(run["request"]["prompt"].get<std::string>(), prompt);
  EXPECT_TRUE(run["request"]["seed"].is_number_unsigned());
  // A 2 MB prompt file is refused by size, naming the limit.
  std::ofstream(tmp.path() / "big.txt") << std::string(2 << 20, 'a');
  RunResult big = run_vortex("generate -m " + tmp.str("snap") + " --prompt-file " + tmp.str("big.txt") + small + "-o " +
                             tmp.str("big"));
  EXPECT_FALSE(fs::exists(tmp.path() / "big"));
  EXPECT_EQ(big.exit_code, 2) << big.output;
  EXPECT_NE(big.output.find("larger than the prompt limit"), std::string::npos) << big.output;
  // --seed -1 with a short prompt: recorded, and two runs differ.
  RunResult a =
      run_vortex("generate -m " + tmp.str("snap") + " -p \"a cat\" --seed -1" + small + "-o " + tmp.str("r1"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("--seed -1: random seed "), std::string::npos) << a.output;
  RunResult b =
      run_vortex("generate -m " + tmp.str("snap") + " -p \"a cat\" --seed -1" + small + "-o " + tmp.str("r2"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto s1 = nlohmann::json::parse(read_file(tmp.path() / "r1" / "run.json"))["request"]["seed"];
  const auto s2 = nlohmann::json::parse(read_file(tmp.path() / "r2" / "run.json"))["request"]["seed"];
  EXPECT_NE(s1, s2);
  // inspect on a run folder: a summary from its run.json (the seed it recorded), no advice about options that
  // do not exist; a missing output makes it exit 2.
  RunResult i = run_vortex("inspect " + tmp.str("r1"));
  EXPECT_EQ(i.exit_code, 0) << i.output;
  EXPECT_NE(i.output.find("run folder: " + tmp.str("r1")), std::string::npos) << i.output;
  EXPECT_NE(i.output.find("seed " + s1.dump()), std::string::npos) << i.output;
  EXPECT_NE(i.output.find("prompt a cat"), std::string::npos) << i.output;
  EXPECT_EQ(i.output.find("--checkpoint"), std::string::npos) << i.output;
  fs::remove(tmp.path() / "r1" / "preview.png");
  RunResult im = run_vortex("inspect " + tmp.str("r1"));
  EXPECT_EQ(im.exit_code, 2) << im.output;
  EXPECT_NE(im.output.find("preview.png  MISSING"), std::string::npos) << im.output;
  EXPECT_NE(a.output.find("has no vae/ and audio_vae/: the run stops at the latents"), std::string::npos)
      << "the note for a folder without decoders\n"
      << a.output;
}

// Two F32 tensors in one safetensors file (independent of src/io), every element `value`.
void write_pair(const fs::path& p, const std::string& a, std::vector<int64_t> a_shape, const std::string& b,
                std::vector<int64_t> b_shape, float value) {
  const int64_t na = a_shape[0] * a_shape[1], nb = b_shape[0] * b_shape[1];
  nlohmann::json header;
  header[a] = {{"dtype", "F32"}, {"shape", a_shape}, {"data_offsets", {0, na * 4}}};
  header[b] = {{"dtype", "F32"}, {"shape", b_shape}, {"data_offsets", {na * 4, (na + nb) * 4}}};
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  const uint64_t n = h.size();
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h;
  for (int64_t i = 0; i < na + nb; ++i) f.write(reinterpret_cast<const char*>(&value), 4);
}

TEST_F(CliErrors, NonFiniteWeightsAreRefusedAtLoadNamingTheTensor) {
  ScratchDir tmp;
  RunResult s = run_vortex("synth --config h3-tiny --quiet -o " + tmp.str("ck/w.safetensors"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const std::string run = " --steps 1 --width 64 --height 64 --frames 5 --quiet -o ";
  // 64 bytes of 0xFF inside one tensor (a damaged download): located with the file's own header.
  ParsedSafetensors st = parse_safetensors(tmp.path() / "ck" / "w.safetensors");
  const std::string name = "blocks.1.mlp.fc2.weight";
  ASSERT_TRUE(st.header.contains(name)) << st.header.dump();
  const uint64_t header_bytes = read_file(tmp.path() / "ck" / "w.safetensors").size() - st.data.size();
  const uint64_t at = header_bytes + st.header[name]["data_offsets"][0].get<uint64_t>() + 128;
  {
    std::fstream f(tmp.path() / "ck" / "w.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    const std::string ff(64, '\xff');
    f.write(ff.data(), 64);
  }
  RunResult g = run_vortex("generate --checkpoint " + tmp.str("ck/w.safetensors") + run + tmp.str("out"));
  EXPECT_EQ(g.exit_code, 2) << g.output;
  EXPECT_NE(g.output.find("tensor '" + name + "'"), std::string::npos) << g.output;
  EXPECT_NE(g.output.find("non-finite value (NaN or Inf) at element 64"), std::string::npos) << g.output;
  EXPECT_EQ(g.output.find("step 1/"), std::string::npos) << "refused before sampling\n" << g.output;
  EXPECT_FALSE(fs::exists(tmp.path() / "out"));
  EXPECT_TRUE(staging_free(tmp.path()));

  // A LoRA whose merge overflows BF16 (finite adapter values, an infinite product): refused at load, naming the
  // layer, before sampling.
  RunResult c = run_vortex("synth --config h3-tiny --quiet -o " + tmp.str("ck2/w.safetensors"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  write_pair(tmp.path() / "huge.safetensors", "blocks.0.attn.out_proj.lora_A.weight", {4, 256},
             "blocks.0.attn.out_proj.lora_B.weight", {256, 4}, 1e20f);
  RunResult l = run_vortex("generate --checkpoint " + tmp.str("ck2/w.safetensors") + " --lora " +
                           tmp.str("huge.safetensors") + run + tmp.str("out2"));
  EXPECT_EQ(l.exit_code, 2) << l.output;
  EXPECT_NE(l.output.find("the weights merged with --lora: tensor 'blocks.0.attn.out_proj.weight'"), std::string::npos)
      << l.output;
  EXPECT_NE(l.output.find("lower it"), std::string::npos) << l.output;
  EXPECT_EQ(l.output.find("step 1/"), std::string::npos) << l.output;
  EXPECT_FALSE(fs::exists(tmp.path() / "out2"));
}

}  // namespace
}  // namespace vortex_cli_test
