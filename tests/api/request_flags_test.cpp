// The request contract of the option table (src/api/request_flags.h) and the checks between fields
// (src/api/resolve.h), in both dialects: the CLI's (messages name --flags) and the API's / JSON's (ids):
// * the table: one row per flag and per id, each typed row's Field naming the same flag;
// * every typed row refuses a bad value, naming its field in the caller's spelling, and takes its limits;
// * every cross-field error of resolve_generate / resolve_load names its field id.
// The per-request ranges of check_run_request are tests/engine/request_contract_test.cpp's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "api/request_flags.h"
#include "api/resolve.h"

namespace vortex::api {
namespace {

namespace fs = std::filesystem;

Status parse(const char* flag, const std::string& text, RequestSpec& spec, FieldStyle style) {
  const RequestFlag* f = find_request_flag(flag);
  EXPECT_NE(f, nullptr) << flag;
  if (f == nullptr) return internal_error("no row");
  return apply_request_flag(*f, text, spec, style);
}

TEST(RequestFlags, OneRowPerFlagAndIdAndTheFieldsAgree) {
  std::set<std::string> flags, ids;
  for (const RequestFlag& f : request_flags()) {
    EXPECT_TRUE(flags.insert(f.flag()).second) << f.flag();
    EXPECT_TRUE(ids.insert(f.id).second) << f.id;
    EXPECT_EQ(f.flag().rfind("--", 0), 0u) << f.names;
    EXPECT_EQ(find_request_flag(f.id), &f);
    EXPECT_EQ(find_request_flag(f.flag()), &f);
    EXPECT_NE(std::string(f.help), "") << f.flag();
    if (f.field == Field::kNone) {
      EXPECT_EQ(f.kind, FlagKind::kSwitch) << f.flag() << ": a value some error names needs a Field";
      continue;
    }
    ASSERT_NE(field_flag(f.field), nullptr) << f.flag();
    EXPECT_EQ(std::string(field_flag(f.field)), f.flag());
    // fl2va's two keyframes and ref2va's references are lists in serve's SGLang body: their fields share the JSON
    // name "conditions".
    if (f.field == Field::kFirstFrame || f.field == Field::kLastFrame || f.field == Field::kReferences)
      EXPECT_EQ(field_id(f.field), "conditions") << f.flag();
    else EXPECT_EQ(field_id(f.field), f.id) << f.flag();
    EXPECT_EQ(find_request_flag(f.field), &f);
  }
  EXPECT_EQ(find_request_flag("--stepz"), nullptr);
  EXPECT_EQ(field_id(Field::kNone), "");
  EXPECT_EQ(field_id(Field::kPromptFile), "prompt_file");             // no JSON name: the flag without dashes
  EXPECT_EQ(field_id(Field::kSyntheticText), "synthetic_text_rows");  // the JSON name
}

// A bad value for every row whose parser types its text; rows that take any text (paths, prompts) are listed.
struct Bad {
  const char* flag;
  const char* text;
  const char* says;  // the message, after the field's name (or the whole message when it names none)
  bool names_field = true;
};

const Bad kBad[] = {
    {"--weights-seed", "x", " expects a non-negative integer, got 'x'"},
    {"--synthetic-text", "x", " expects an integer, got 'x'"},
    {"--text-layer", "-1", " must be >= 0, got -1"},
    {"--width", "4.5", " expects an integer, got '4.5'"},
    {"--height", "", " expects an integer, got ''"},
    {"--frames", "ten", " expects an integer, got 'ten'"},
    {"--seconds", "nan", " expects a positive number of seconds, got 'nan'"},
    {"--steps", "12x", " expects an integer, got '12x'"},
    {"--schedule", "karras", "unknown schedule 'karras'", false},
    {"--sampler", "dpm", "unknown sampler 'dpm'", false},
    {"--seed", "-2", " expects a non-negative integer or -1 (random), got '-2'"},
    {"--preset", "turbo9", " must be turbo4, got 'turbo9'"},
    {"--synthetic-vae", "huge", " must be 'tiny' or 'full', got 'huge'"},
    {"--vae-seed", "-5", " expects a non-negative integer, got '-5'"},
    {"--crf", "high", " expects an integer, got 'high'"},
    {"--video-encoder", "vp9", " must be auto, libx264 or h264_nvenc, got 'vp9'"},
    {"--x264-preset", "turbo",
     " must be one of ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, "
     "veryslow, placebo, got 'turbo'"},
    {"--backend", "tpu", " must be cpu or cuda, got 'tpu'"},
    {"--threads", "all", " expects an integer, got 'all'"},
    {"--precision", "fp4", " must be one of"},
    {"--adaln-weights", "gpu", " must be auto, device or host, got 'gpu'"},
    {"--max-vram", "0", " expects a positive number of GB, got '0'"},
    {"--max-host-ram", "-1", " expects a positive number of GB, got '-1'"},
    {"--attention", "flash", " must be sdpa, sage2 or bf16-owned, got 'flash'"},
    {"--cuda-graph", "maybe", "maybe", false},
    {"--gpus", "0", " must be an integer between 1 and 64, got '0'"},
    {"--comm-timeout", "0", " expects seconds in (0, 86400], got '0'"},
    {"--lora", "/no/such/dir/adapter.safetensors:1e9", "SCALE must be a finite number in [-100, 100]", false},
    {"--lora-mode", "both", " must be merge or runtime, got 'both'"},
};
const std::set<std::string> kAnyText = {
    "--model",       "--config",     "--checkpoint",   "--prompt",  "--prompt-file", "--text-embeddings",
    "--first-frame", "--last-frame", "--keyframe-vae", "--ref",     "--out",         "--frames-dir",
    "--vae",         "--audio-vae",  "--switches",     "--lora-dir"};

TEST(RequestFlags, EveryTypedRowRefusesABadValueInBothDialects) {
  std::set<std::string> covered;
  for (const Bad& b : kBad) {
    covered.insert(b.flag);
    const RequestFlag* row = find_request_flag(b.flag);
    ASSERT_NE(row, nullptr) << b.flag;
    for (FieldStyle style : {FieldStyle::kFlag, FieldStyle::kJson}) {
      RequestSpec spec;
      const Status s = apply_request_flag(*row, b.text, spec, style);
      ASSERT_FALSE(s.ok()) << b.flag << " " << b.text;
      EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.message();
      EXPECT_FALSE(spec.has(b.flag)) << b.flag;  // a refused value is not given
      if (!b.names_field) {
        EXPECT_NE(s.message().find(b.says), std::string::npos) << s.message();
        continue;
      }
      const std::string name = style == FieldStyle::kFlag ? row->flag() : row->id;
      EXPECT_EQ(s.message().rfind(name + b.says, 0), 0u) << s.message();
      if (style == FieldStyle::kJson) {
        EXPECT_EQ(s.message().find("--"), std::string::npos) << s.message();
      }
    }
  }
  for (const RequestFlag& f : request_flags()) {
    if (f.kind == FlagKind::kSwitch || kAnyText.count(f.flag()) > 0) continue;
    EXPECT_EQ(covered.count(f.flag()), 1u) << f.flag() << " has no bad-value case";
  }
}

TEST(RequestFlags, LimitsOfTheFlagRows) {
  RequestSpec s;
  const FieldStyle c = FieldStyle::kFlag;
  EXPECT_TRUE(parse("--gpus", "1", s, c).ok());
  EXPECT_TRUE(parse("--gpus", "64", s, c).ok());
  EXPECT_EQ(s.gpus, 64);
  EXPECT_FALSE(parse("--gpus", "65", s, c).ok());
  EXPECT_FALSE(parse("--gpus", "two", s, c).ok());
  EXPECT_TRUE(parse("--comm-timeout", "86400", s, c).ok());
  EXPECT_DOUBLE_EQ(s.comm_timeout_seconds, 86400.0);
  EXPECT_FALSE(parse("--comm-timeout", "86400.5", s, c).ok());
  EXPECT_FALSE(parse("--comm-timeout", "inf", s, c).ok());
  EXPECT_TRUE(parse("--text-layer", "0", s, c).ok());
  EXPECT_EQ(s.text_layer, 0);
  EXPECT_TRUE(parse("--seed", "18446744073709551615", s, c).ok());
  EXPECT_EQ(s.run.seed, 18446744073709551615ull);
  EXPECT_FALSE(s.random_seed);
  EXPECT_TRUE(parse("--seed", "-1", s, c).ok());
  EXPECT_TRUE(s.random_seed);
  EXPECT_FALSE(parse("--seed", "18446744073709551616", s, c).ok());
  // Choices become enums.
  EXPECT_TRUE(parse("--backend", "cuda", s, c).ok());
  EXPECT_EQ(s.load.backend, BackendKind::kCuda);
  EXPECT_TRUE(parse("--precision", "nvfp4-weight-only", s, c).ok());
  EXPECT_EQ(s.load.precision, Precision::kNvfp4WeightOnly);
  EXPECT_TRUE(parse("--attention", "sage2", s, c).ok());
  EXPECT_EQ(s.run.attention, AttentionKind::kSage2);
  EXPECT_TRUE(parse("--schedule", "diffusers", s, c).ok());
  EXPECT_EQ(s.run.schedule, AvScheduleMode::kDiffusers);
  EXPECT_TRUE(parse("--sampler", "euler", s, c).ok());
  EXPECT_EQ(s.run.sampler, SamplerKind::kEuler);
  EXPECT_TRUE(parse("--cuda-graph", "auto", s, c).ok());
  EXPECT_EQ(s.cuda_graph, CudaGraphMode::kAuto);
  EXPECT_TRUE(parse("--synthetic-vae", "full", s, c).ok());
  EXPECT_EQ(s.load.synthetic_vae, SyntheticVae::kFull);
  EXPECT_TRUE(parse("--lora-mode", "runtime", s, c).ok());
  EXPECT_EQ(s.load.lora_mode, LoraMode::kRuntime);
  EXPECT_TRUE(parse("--adaln-weights", "host", s, c).ok());
  EXPECT_EQ(s.load.adaln_weights, AdalnPlacement::kHost);
  EXPECT_TRUE(parse("--preset", "turbo4", s, c).ok());
  EXPECT_EQ(s.preset, Preset::kTurbo4);
  // Switches, and a repeatable value.
  EXPECT_TRUE(parse("--no-tiling", "1", s, c).ok());
  EXPECT_FALSE(s.load.vae_tiling);
  EXPECT_TRUE(s.has("--no-tiling"));
}

// A scratch folder for the file-backed checks.
class Resolve : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vortex_request_flags_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

struct CrossCase {
  std::map<std::string, std::string> flags;
  Field field;
  const char* flag_says;  // the CLI's message (a fragment)
  const char* id_says;    // the API's
};

TEST_F(Resolve, EveryCrossFieldErrorNamesItsField) {
  const std::string prompt_file = (dir_ / "prompt.txt").string();
  std::ofstream(prompt_file) << "a cat\n";
  const std::string out = (dir_ / "out").string();
  const CrossCase cases[] = {
      {{{"--config", "h3"}, {"--checkpoint", "x.safetensors"}},
       Field::kConfig,
       "--config and --checkpoint exclude each other",
       "config and checkpoint exclude each other"},
      {{{"--prompt", "a"}, {"--prompt-file", prompt_file}},
       Field::kPromptFile,
       "--prompt and --prompt-file exclude each other",
       "prompt and prompt_file exclude each other"},
      {{{"--prompt-file", (dir_ / "missing.txt").string()}}, Field::kPromptFile, "does not exist", "does not exist"},
      {{{"--text-embeddings", "e.safetensors"}, {"--synthetic-text", "4"}},
       Field::kTextEmbeddings,
       "--text-embeddings and --synthetic-text exclude each other",
       "text_embeddings and synthetic_text_rows exclude each other"},
      {{{"--seconds", "1"}, {"--frames", "22"}},
       Field::kSeconds,
       "--seconds and --frames exclude each other",
       "seconds and frames exclude each other"},
      {{{"--preset", "turbo4"}},
       Field::kPreset,
       "pass the adapter with --lora FILE",
       "pass the adapter with lora FILE"},
      {{{"--prompt", "a cat"}},
       Field::kPrompt,
       "--prompt needs the text encoder: pass --model DIR",
       "prompt needs the text encoder: pass model DIR"},
      {{{"--text-layer", "3"}}, Field::kTextLayer, "--text-layer K chooses", "text_layer K chooses"},
      {{{"--model", dir_.string()}, {"--synthetic", "1"}, {"--prompt", "a"}},
       Field::kModel,
       "--model and --synthetic exclude each other",
       "model and synthetic exclude each other"},
      {{{"--model", dir_.string()}}, Field::kModel, "--model DIR needs the text", "model DIR needs the text"},
      {{{"--model", dir_.string()}, {"--prompt", "a"}, {"--synthetic-text", "4"}},
       Field::kPrompt,
       "--prompt excludes --text-embeddings and --synthetic-text",
       "prompt excludes text_embeddings and synthetic_text_rows"},
      {{{"--model", dir_.string()}, {"--prompt", " "}}, Field::kPrompt, "--prompt", "prompt"},
      {{{"--latents-only", "1"}, {"--synthetic-vae", "tiny"}, {"--synthetic", "1"}},
       Field::kVae,
       "--latents-only excludes --vae, --audio-vae and --synthetic-vae",
       "latents_only excludes vae, audio_vae and synthetic_vae"},
  };
  for (const CrossCase& c : cases) {
    for (FieldStyle style : {FieldStyle::kFlag, FieldStyle::kJson}) {
      RequestSpec spec;
      spec.out_dir = out;
      for (const auto& [flag, text] : c.flags) ASSERT_TRUE(parse(flag.c_str(), text, spec, style).ok()) << flag;
      Field failed = Field::kNone;
      Result<ResolvedGenerate> r = resolve_generate(spec, style, &failed);
      ASSERT_FALSE(r.ok()) << c.flag_says;
      EXPECT_EQ(failed, c.field) << r.status().message();
      const char* says = style == FieldStyle::kFlag ? c.flag_says : c.id_says;
      EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
      if (style == FieldStyle::kJson && c.field != Field::kPromptFile) {
        EXPECT_EQ(r.status().message().find("--"), std::string::npos) << r.status().message();
      }
    }
  }
}

TEST_F(Resolve, ThePresetAndTheRandomSeedAndTheSwitches) {
  const std::string adapter = (dir_ / "turbo.safetensors").string();
  std::ofstream(adapter) << "x";
  RequestSpec spec;
  const FieldStyle c = FieldStyle::kFlag;
  ASSERT_TRUE(parse("--synthetic", "1", spec, c).ok());
  ASSERT_TRUE(parse("--lora", adapter, spec, c).ok());
  ASSERT_TRUE(parse("--preset", "turbo4", spec, c).ok());
  ASSERT_TRUE(parse("--steps", "6", spec, c).ok());  // given: the preset keeps it
  ASSERT_TRUE(parse("--seed", "-1", spec, c).ok());
  ASSERT_TRUE(parse("--switches", "fused_gate_add=0", spec, c).ok());
  ASSERT_TRUE(parse("--cuda-graph", "on", spec, c).ok());
  ASSERT_TRUE(parse("--comm-timeout", "2.5", spec, c).ok());
  ASSERT_TRUE(parse("--out", (dir_ / "o").string(), spec, c).ok());
  Result<ResolvedGenerate> r = resolve_generate(spec, c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const RunRequest& run = r->request.run;
  EXPECT_EQ(run.steps, 6);
  EXPECT_EQ(run.sampler, SamplerSpec::turbo4().kind);
  EXPECT_EQ(run.video_shift, SamplerSpec::turbo4().video_shift);
  EXPECT_LT(run.seed, uint64_t{1} << 53);  // a random seed, exact in JSON
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_NE(r->notes[0].find("--seed -1: random seed " + std::to_string(run.seed)), std::string::npos);
  EXPECT_EQ(r->request.pipeline.switches, "fused_gate_add=0,cuda_graph=on");
  EXPECT_EQ(r->request.comm.timeout.count(), 2500);
  EXPECT_EQ(r->request.out_dir, (dir_ / "o").string());
}

TEST_F(Resolve, LoadOptionsAlone) {
  RequestSpec spec;
  ASSERT_TRUE(parse("--model", (dir_ / "missing").string(), spec, FieldStyle::kJson).ok());
  Field failed = Field::kNone;
  Result<PipelineOptions> o = resolve_load(spec, FieldStyle::kJson, &failed);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(failed, Field::kModel);
  RequestSpec synthetic;
  ASSERT_TRUE(parse("--synthetic", "1", synthetic, FieldStyle::kJson).ok());
  ASSERT_TRUE(parse("--synthetic-vae", "tiny", synthetic, FieldStyle::kJson).ok());
  ASSERT_TRUE(parse("--cuda-graph", "off", synthetic, FieldStyle::kJson).ok());
  o = resolve_load(synthetic, FieldStyle::kJson);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->synthetic_weights);
  EXPECT_EQ(o->synthetic_vae, SyntheticVae::kTiny);
  EXPECT_EQ(o->switches, "cuda_graph=off");
}

}  // namespace
}  // namespace vortex::api
