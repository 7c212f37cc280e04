// The model folder as one argument, through the built binary, on a tiny synthetic snapshot
// (`vortex synth --snapshot tiny`: the bundled tiny tokenizer, synthetic tiny decoders as vae/ and audio_vae/):
// * the snapshot's decoders equal --synthetic-vae tiny with its seed, a prompt run ends in an MP4, and VAE
//   folders that cannot decode the tiny transformer's latents (the 8-channel audio fixture) are refused;
// * `vortex inspect DIR` lists every part; a broken copy lists each missing part;
// * `vortex generate --model DIR --prompt "a cat"` runs end to end on the CPU, and its latents equal those of
//   `encode-text --model DIR --prompt` + `generate --text-embeddings` (the prompt is fed to the refiner exactly as
//   a file is);
// * every missing part in one message, and prompt errors (empty, invalid UTF-8, too long), exit 2 before any
//   weight is loaded; `--text-layer` overrides the pipeline config.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/cli_test_util.h"

namespace vortex_cli_test {
namespace {

const std::string kTokenizer = std::string(VORTEX_TEXT_FIXTURES) + "/tiny_tokenizer.json";
const std::string kVae = std::string(VORTEX_VAE_FIXTURES) + "/video_vae";
const std::string kAudioVae = std::string(VORTEX_VAE_FIXTURES) + "/audio_vae";
const std::string kSmall = " --width 64 --height 64 --frames 5 --steps 1 --threads 2 ";

class Snapshot : public ::testing::Test {
 protected:
  void SetUp() override {
    RunResult r = run_vortex("synth --snapshot tiny --seed 5 --out " + dir_.str("snap"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  std::string snap() const { return dir_.str("snap"); }
  ScratchDir dir_;
};

TEST_F(Snapshot, InspectListsEveryPart) {
  RunResult r = run_vortex("inspect " + snap());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"transformer", "text_encoder", "tokenizer", "vae", "audio_vae"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  EXPECT_EQ(r.output.find("MISSING"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hidden_states[3]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("complete"), std::string::npos) << r.output;
  // The bundled tokenizer is the tiny fixture, byte for byte.
  EXPECT_EQ(read_file(dir_.path() / "snap" / "tokenizer" / "tokenizer.json"), read_file(kTokenizer));
  // A truncated part is damaged: named, never "ok", and inspect exits 2.
  const fs::path te = dir_.path() / "snap" / "text_encoder" / "model.safetensors";
  fs::resize_file(te, fs::file_size(te) / 2);
  RunResult t = run_vortex("inspect " + snap());
  EXPECT_EQ(t.exit_code, 2) << t.output;
  EXPECT_NE(t.output.find("text_encoder DAMAGED"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("truncated"), std::string::npos) << t.output;
  EXPECT_EQ(t.output.find("text_encoder ok"), std::string::npos) << t.output;
  // A snapshot writer never touches an existing folder.
  RunResult again = run_vortex("synth --snapshot tiny --tokenizer " + kTokenizer + " --out " + snap());
  EXPECT_EQ(again.exit_code, 2) << again.output;
}

TEST_F(Snapshot, GenerateFromAPromptEqualsGenerateFromItsEmbeddings) {
  RunResult g = run_vortex("generate --model " + snap() + " --prompt \"a cat\" --latents-only" + kSmall + "--out " +
                           dir_.str("run"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_NE(g.output.find("loading the text encoder (3 of 4 layers"), std::string::npos) << g.output;
  // Both fit: the transformer's load starts first and the conditioner runs beside it (docs/memory.md "Overlapped
  // loading"); the plan says so.
  const size_t enc = g.output.find("encoding the prompt"), dit = g.output.find("loading weights beside the run");
  ASSERT_NE(enc, std::string::npos) << g.output;
  ASSERT_NE(dit, std::string::npos) << g.output;
  EXPECT_LT(dit, enc) << g.output;
  EXPECT_NE(g.output.find("the text encoder runs beside the load"), std::string::npos) << g.output;
  // The sequential order: the conditioner is loaded, run and freed before the transformer is loaded.
  RunResult s = run_vortex("generate --model " + snap() + " --prompt \"a cat\" --latents-only" + kSmall +
                           "--switches load_overlap=0 --out " + dir_.str("seq"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const size_t s_enc = s.output.find("encoding the prompt"), s_dit = s.output.find("loading weights");
  ASSERT_NE(s_enc, std::string::npos) << s.output;
  ASSERT_NE(s_dit, std::string::npos) << s.output;
  EXPECT_LT(s_enc, s_dit) << s.output;
  EXPECT_EQ(read_file(dir_.path() / "seq" / "video_latents.safetensors"),
            read_file(dir_.path() / "run" / "video_latents.safetensors"));
  EXPECT_NE(g.output.find("vortex decode"), std::string::npos) << g.output;  // the folder's VAEs are named
  const nlohmann::json run = nlohmann::json::parse(read_file(dir_.path() / "run" / "run.json"));
  EXPECT_EQ(run["request"]["prompt"], "a cat");
  EXPECT_EQ(run["request"]["text_layer"], 3);
  const int tokens = run["request"]["prompt_tokens"].get<int>();
  EXPECT_GT(tokens, 0);
  EXPECT_EQ(run["request"]["text_shape"], nlohmann::json::array({tokens, 128}));
  EXPECT_EQ(run["request"]["text_dtype"], "BF16");
  EXPECT_TRUE(run["noise"]["synthetic_text_seed"].is_null());  // real conditioning, no stand-in

  RunResult e =
      run_vortex("encode-text --model " + snap() + " --prompt \"a cat\" --quiet --out " + dir_.str("cat.safetensors"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  ParsedSafetensors st = parse_safetensors(dir_.path() / "cat.safetensors");
  EXPECT_EQ(st.header["hidden_states"]["shape"], nlohmann::json::array({tokens, 128}));
  EXPECT_EQ(st.header["__metadata__"]["vortex.text_layer"], "3");
  RunResult f = run_vortex("generate --checkpoint " + snap() + "/transformer --text-embeddings " +
                           dir_.str("cat.safetensors") + kSmall + "--quiet --out " + dir_.str("run_file"));
  ASSERT_EQ(f.exit_code, 0) << f.output;
  for (const char* file : {"video_latents.safetensors", "audio_latents.safetensors"}) {
    EXPECT_EQ(sha256_hex_of(read_file(dir_.path() / "run" / file)),
              sha256_hex_of(read_file(dir_.path() / "run_file" / file)))
        << file;
  }
  // --model with --text-embeddings: the folder's transformer, the same latents again.
  RunResult m = run_vortex("generate --model " + snap() + " --latents-only --text-embeddings " +
                           dir_.str("cat.safetensors") + kSmall + "--quiet --out " + dir_.str("run_model_file"));
  ASSERT_EQ(m.exit_code, 0) << m.output;
  EXPECT_EQ(sha256_hex_of(read_file(dir_.path() / "run" / "video_latents.safetensors")),
            sha256_hex_of(read_file(dir_.path() / "run_model_file" / "video_latents.safetensors")));
  // Another prompt conditions differently.
  RunResult d = run_vortex("generate --model " + snap() + " --prompt \"a dog\" --latents-only" + kSmall +
                           "--quiet --out " + dir_.str("dog"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(sha256_hex_of(read_file(dir_.path() / "run" / "video_latents.safetensors")),
            sha256_hex_of(read_file(dir_.path() / "dog" / "video_latents.safetensors")));
}

TEST_F(Snapshot, TextLayerOverride) {
  RunResult a = run_vortex("encode-text --model " + snap() + " --prompt \"a cat\" --text-layer 4 --quiet --out " +
                           dir_.str("a.st"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(parse_safetensors(dir_.path() / "a.st").header["__metadata__"]["vortex.text_layer"], "4");
  RunResult g = run_vortex("generate --model " + snap() + " --prompt \"a cat\" --text-layer 5 --latents-only" + kSmall +
                           "--out " + dir_.str("r"));
  EXPECT_EQ(g.exit_code, 2) << g.output;
  EXPECT_NE(g.output.find("hidden_states[0..4]"), std::string::npos) << g.output;
  EXPECT_FALSE(fs::exists(dir_.path() / "r"));
}

TEST_F(Snapshot, PromptErrorsComeBeforeAnyWeight) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--prompt \"\"", "empty"},
      {"--prompt \"   \"", "whitespace"},
      {"--prompt \"$(printf 'a \\377 cat')\"", "UTF-8"},
      {"--prompt \"$(printf 'a %.0s' $(seq 1 5000))\"", "at most 4096"},
  };
  for (const auto& [arg, expect] : cases) {
    RunResult r = run_vortex("generate --model " + snap() + " " + arg + kSmall + "--out " + dir_.str("out"));
    EXPECT_EQ(r.exit_code, 2) << arg << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << arg << "\n" << r.output;
    EXPECT_EQ(r.output.find("loading"), std::string::npos) << arg << "\n" << r.output;
    EXPECT_FALSE(fs::exists(dir_.path() / "out")) << arg;
  }
  RunResult e =
      run_vortex("encode-text --model " + snap() + " --prompt \"$(printf '\\377')\" --out " + dir_.str("o.st"));
  EXPECT_EQ(e.exit_code, 2) << e.output;
  EXPECT_NE(e.output.find("UTF-8"), std::string::npos) << e.output;
}

TEST_F(Snapshot, MissingPartsAreListedTogether) {
  fs::remove_all(dir_.path() / "snap" / "tokenizer");
  fs::remove(dir_.path() / "snap" / "transformer" / "diffusion_pytorch_model.safetensors");
  RunResult r = run_vortex("generate --model " + snap() + " --prompt \"a cat\"" + kSmall + "--out " + dir_.str("out"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("lacks 2 parts"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("transformer:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokenizer:"), std::string::npos) << r.output;
  RunResult i = run_vortex("inspect " + snap());
  EXPECT_EQ(i.exit_code, 2) << i.output;
  EXPECT_NE(i.output.find("2 parts missing"), std::string::npos) << i.output;
  // Exclusive flags.
  RunResult c = run_vortex("generate --model " + snap() + " --synthetic --prompt \"a cat\"" + kSmall + "--out " +
                           dir_.str("out"));
  EXPECT_EQ(c.exit_code, 2) << c.output;
  RunResult p = run_vortex("generate --synthetic --prompt \"a cat\"" + kSmall + "--out " + dir_.str("out"));
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_NE(p.output.find("--model"), std::string::npos) << p.output;
}

TEST_F(Snapshot, PromptRunEndsInAnMp4DecodedByTheSnapshotsSyntheticVaes) {
  const std::string size = " --width 64 --height 64 --frames 22 --steps 1 --threads 2 --quiet ";
  RunResult g = run_vortex("generate -m " + snap() + " -p \"a cat\"" + size + "-o " + dir_.str("cat"));
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_TRUE(fs::exists(dir_.path() / "cat" / "video.mp4"));
  EXPECT_TRUE(fs::exists(dir_.path() / "cat" / "audio.wav"));
  // The folder's decoders are --synthetic-vae tiny with the snapshot's seed: the same audio, the same frames.
  RunResult a = run_vortex("decode " + dir_.str("cat") + " --vae " + snap() + "/vae --audio-vae " + snap() +
                           "/audio_vae --quiet -o " + dir_.str("dec_folder") + " --frames-dir " + dir_.str("f1"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  RunResult b = run_vortex("decode " + dir_.str("cat") + " --synthetic-vae tiny --vae-seed 5 --quiet -o " +
                           dir_.str("dec_synth") + " --frames-dir " + dir_.str("f2"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(sha256_hex_of(read_file(dir_.path() / "dec_folder" / "audio.wav")),
            sha256_hex_of(read_file(dir_.path() / "dec_synth" / "audio.wav")));
  EXPECT_EQ(sha256_hex_of(read_file(dir_.path() / "f1" / "frame_00010.png")),
            sha256_hex_of(read_file(dir_.path() / "f2" / "frame_00010.png")));
  RunResult c = run_vortex("decode " + dir_.str("cat") + " --synthetic-vae tiny --vae-seed 6 --quiet -o " +
                           dir_.str("dec_other") + " --frames-dir " + dir_.str("f3"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(sha256_hex_of(read_file(dir_.path() / "dec_other" / "audio.wav")),
            sha256_hex_of(read_file(dir_.path() / "dec_folder" / "audio.wav")))
      << "another seed decodes differently (the comparison above can fail)";
}

TEST(SnapshotVaes, FoldersThatCannotDecodeTheTinyLatentsAreRefused) {
  ScratchDir dir;
  // The VAE fixtures decode 8 audio latent channels; the tiny transformer makes [2, 32, Ta].
  RunResult r = run_vortex("synth --snapshot tiny --tokenizer " + kTokenizer + " --vae " + kVae + " --audio-vae " +
                           kAudioVae + " --out " + dir.str("snap"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--audio-vae " + kAudioVae + " takes 8 latent channels"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "snap"));
}

}  // namespace
}  // namespace vortex_cli_test
