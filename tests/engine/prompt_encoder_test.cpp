// The prompt path (engine/prompt_encoder.h, Pipeline::encode_prompt):
// * parity with diffusers' MiniMaxH3TextEncoderStep on a tiny random Qwen3-VL (fixtures/prompt_model, made by
//   make_prompt_fixtures.py): the token ids are identical, the states within 2x the BF16 noise floor that
//   transformers' BF16 model has against the same weights in FP32;
// * prompt errors (empty, whitespace, invalid UTF-8, too long with the limit stated, a foreign tokenizer);
// * the on-disk synthetic text encoder equals the in-memory one bit for bit;
// * the memory plan and the cache on a Pipeline over a tiny synthetic snapshot: encode once per prompt, reuse
//   the encoding when it repeats, the same states as the text encoder run directly;
// * a cancel while the conditioner loads or encodes stops the run at the next layer (load) boundary.
#include "engine/prompt_encoder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/model_folder.h"
#include "engine/pipeline.h"
#include "engine/synthetic_snapshot.h"
#include "io/safetensors.h"
#include "text_encoder/text_encoder.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;
const std::string kPromptModel = std::string(VORTEX_ENGINE_FIXTURES) + "/prompt_model";
const std::string kTinyTokenizer = std::string(VORTEX_TEXT_FIXTURES) + "/tiny_tokenizer.json";

class Scratch {
 public:
  Scratch() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("vortex_prompt_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kF32) {
    std::copy(t.data<float>(), t.data<float>() + v.size(), v.begin());
  } else {
    const uint16_t* b = static_cast<const uint16_t*>(t.raw_data());
    for (size_t i = 0; i < v.size(); ++i) v[i] = f32_from_bf16_bits(b[i]);
  }
  return v;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// The options `--model DIR` gives for a tiny synthetic snapshot written to `dir` (weights from `seed`), on 2 threads.
Result<PipelineOptions> tiny_snapshot_options(const fs::path& dir, uint64_t seed) {
  SyntheticSnapshotOptions so;
  so.out = dir.string();
  so.tokenizer_json = kTinyTokenizer;
  so.seed = seed;
  VORTEX_RETURN_IF_ERROR(write_synthetic_snapshot(so).status());
  VORTEX_ASSIGN_OR_RETURN(ModelFolder folder, open_model_folder(so.out));
  PipelineOptions o;
  o.threads = 2;
  VORTEX_RETURN_IF_ERROR(apply_model_folder(folder, -1, o));
  return o;
}

TEST(PromptEncoder, MatchesDiffusersT2vaStep) {
  Result<ModelFolder> folder = open_model_folder(kPromptModel);
  ASSERT_TRUE(folder.ok()) << folder.status().to_string();
  ASSERT_TRUE(require_parts(*folder, {"text_encoder", "tokenizer"}, "").ok());
  Result<SafetensorsFile> fx =
      SafetensorsFile::open(std::string(VORTEX_ENGINE_FIXTURES) + "/prompt_states.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().to_string();
  const int layer = std::stoi(fx->metadata().at("text_encoder_layer"));
  EXPECT_EQ(folder->text_layer, layer);  // from the folder's model_index.json
  Result<std::shared_ptr<const Tokenizer>> tok = shared_tokenizer(folder->path_of("tokenizer"));
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  Result<TextEncoderConfig> cfg = TextEncoderConfig::from_file(folder->path_of("text_encoder") + "/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  Result<std::unique_ptr<Backend>> cpu = make_backend("cpu", 2);
  ASSERT_TRUE(cpu.ok());
  Result<std::unique_ptr<TextEncoder>> enc = TextEncoder::load(folder->path_of("text_encoder"), **cpu, layer);
  ASSERT_TRUE(enc.ok()) << enc.status().to_string();
  int checked = 0;
  for (int p = 0;; ++p) {
    const auto meta = fx->metadata().find("prompt_" + std::to_string(p));
    if (meta == fx->metadata().end()) break;
    const std::string prompt = nlohmann::json::parse(meta->second).get<std::string>();
    Result<Tensor> want_ids = fx->tensor("ids_" + std::to_string(p));
    Result<Tensor> want = fx->tensor("states_" + std::to_string(p));
    ASSERT_TRUE(want_ids.ok() && want.ok());
    Result<std::vector<int32_t>> ids = present_t2va_prompt(**tok, *cfg, prompt, "--prompt");
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    ASSERT_EQ(static_cast<int64_t>(ids->size()), want_ids->numel()) << prompt;
    for (size_t i = 0; i < ids->size(); ++i)
      ASSERT_EQ((*ids)[i], want_ids->data<int32_t>()[i]) << prompt << " token " << i;
    Result<Tensor> got = (*enc)->encode(*ids, layer);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->shape(), want->shape());
    const double floor = std::stod(fx->metadata().at("floor_" + std::to_string(p)));
    const double err = rel_l2(to_f32(*got), to_f32(*want));
    std::printf("prompt %d (%zu tokens): rel-L2 vs diffusers %.3e, BF16 floor %.3e (%.2fx)\n", p, ids->size(), err,
                floor, err / floor);
    EXPECT_LT(err, 2.0 * floor) << prompt;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(PromptEncoder, SpecialTokenTextIsThatToken) {
  Result<std::shared_ptr<const Tokenizer>> tok = shared_tokenizer(kPromptModel + "/tokenizer/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  TextEncoderConfig cfg = tiny_text_encoder_config((*tok)->vocab_size());
  Result<std::vector<int32_t>> ids = present_t2va_prompt(**tok, cfg, "<|im_start|>", "--prompt");
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 1u);  // HF tokenizer(prompt, add_special_tokens=False) matches it as one added token
  EXPECT_EQ((*ids)[0], *(*tok)->token_id("<|im_start|>"));
}

TEST(PromptEncoder, PromptErrorsAreClear) {
  Result<std::shared_ptr<const Tokenizer>> tok = shared_tokenizer(kTinyTokenizer);
  ASSERT_TRUE(tok.ok());
  TextEncoderConfig cfg = tiny_text_encoder_config((*tok)->vocab_size());
  auto err = [&](std::string_view prompt, const TextEncoderConfig& c) {
    Result<std::vector<int32_t>> r = present_t2va_prompt(**tok, c, prompt, "--prompt");
    EXPECT_FALSE(r.ok()) << prompt;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(err("", cfg).find("empty"), std::string::npos);
  EXPECT_NE(err(" \t\n", cfg).find("whitespace"), std::string::npos);
  const std::string bad_utf8 = err(std::string("a cat \xC3\x28 runs"), cfg);
  EXPECT_NE(bad_utf8.find("UTF-8"), std::string::npos) << bad_utf8;
  EXPECT_NE(bad_utf8.find("6"), std::string::npos) << bad_utf8;  // the byte offset
  TextEncoderConfig short_cfg = cfg;
  short_cfg.max_positions = 8;
  const std::string too_long = err("a cat walks along the river bank in the rain at night", short_cfg);
  EXPECT_NE(too_long.find("at most 8"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("max_position_embeddings"), std::string::npos) << too_long;
  TextEncoderConfig small_vocab = cfg;
  small_vocab.vocab = 64;
  const std::string foreign = err("zebra", small_vocab);
  EXPECT_NE(foreign.find("does not belong"), std::string::npos) << foreign;
  Result<std::vector<int32_t>> ok = present_t2va_prompt(**tok, cfg, "a cat", "--prompt");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_FALSE(ok->empty());
}

TEST(PromptEncoder, OnDiskSyntheticTextEncoderEqualsTheInMemoryOne) {
  Scratch s;
  const TextEncoderConfig cfg = tiny_text_encoder_config(640);
  ASSERT_TRUE(write_synthetic_text_encoder(s.path().string(), cfg, 11).ok());
  EXPECT_FALSE(write_synthetic_text_encoder(s.path().string(), cfg, 11).ok());  // never overwrites
  Result<std::unique_ptr<Backend>> cpu = make_backend("cpu", 2);
  ASSERT_TRUE(cpu.ok());
  std::vector<TextEncoderLoadProgress> reports;
  Result<std::unique_ptr<TextEncoder>> disk =
      TextEncoder::load(s.path().string(), **cpu, 3, [&](const TextEncoderLoadProgress& p) { reports.push_back(p); });
  ASSERT_TRUE(disk.ok()) << disk.status().to_string();
  Result<std::unique_ptr<TextEncoder>> mem = TextEncoder::synthesize(cfg, **cpu, 11, 3);
  ASSERT_TRUE(mem.ok());
  const std::vector<int32_t> ids = {5, 17, 300, 2, 2, 639, 64};
  Result<Tensor> a = (*disk)->encode(ids, 3);
  Result<Tensor> b = (*mem)->encode(ids, 3);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->nbytes(), b->nbytes());
  EXPECT_EQ(std::memcmp(a->raw_data(), b->raw_data(), a->nbytes()), 0);
  // Loading progress: the embedding, then one report per layer, ending at every byte.
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_EQ(reports.back().layers_done, 3);
  EXPECT_EQ(reports.back().layers_total, 3);
  EXPECT_EQ(reports.back().bytes_done, reports.back().bytes_total);
  for (size_t i = 1; i < reports.size(); ++i) EXPECT_GT(reports[i].bytes_done, reports[i - 1].bytes_done);
}

class CountingProgress : public ProgressSink {
 public:
  void stage(std::string_view what) override { stages.emplace_back(what); }
  std::vector<std::string> stages;
};

// Cancels `token` from the progress of the prompt path: once `load_layers` conditioner layers are loaded
// (-1: never), or when the prompt encoding stage begins.
class CancellingProgress : public ProgressSink {
 public:
  CancellingProgress(CancelToken& token, int load_layers, bool at_encode)
      : token_(token), load_layers_(load_layers), at_encode_(at_encode) {}
  void stage(std::string_view what) override {
    stages.emplace_back(what);
    if (at_encode_ && what.rfind("encoding the prompt", 0) == 0) token_.cancel();
  }
  void loading(std::string_view, uint64_t, uint64_t, int layers_done, int, double) override {
    most_layers = std::max(most_layers, layers_done);
    if (layers_done == load_layers_) token_.cancel();
  }
  std::vector<std::string> stages;
  int most_layers = -1;

 private:
  CancelToken& token_;
  int load_layers_;
  bool at_encode_;
};

// A cancel while the conditioner loads or encodes (the serve path: Pipeline::run encodes the prompt) ends
// the run with kCancelled at the next layer (load) boundary; a cancelled load leaves nothing loaded, a
// cancelled encode leaves a resident conditioner resident and caches nothing.
TEST(PromptEncoder, ACancelDuringThePromptPathStopsTheRun) {
  Scratch s;
  Result<PipelineOptions> opts = tiny_snapshot_options(s.path(), 7);
  ASSERT_TRUE(opts.ok()) << opts.status().to_string();
  PipelineOptions o = *opts;
  ASSERT_GE(kTinyTextLayer, 2);
  CountingProgress quiet;
  Result<std::unique_ptr<Pipeline>> p = Pipeline::open(o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_TRUE((*p)->load_weights(quiet).ok());
  RunRequest r;
  r.prompt = "a cat";
  r.width = r.height = 64;
  r.frames = 5;
  r.steps = 1;
  const fs::path out = s.path() / "run";
  fs::create_directories(out);

  // During the load, once the first layer is on the backend.
  CancelToken at_load;
  CancellingProgress load_sink(at_load, 1, false);
  Result<RunPlan> plan = (*p)->plan(r, quiet, FieldStyle::kFlag);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  Result<RunOutputs> run = (*p)->run(*plan, load_sink, at_load, out.string());
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), ErrorCode::kCancelled) << run.status().to_string();
  EXPECT_EQ(load_sink.most_layers, 1);
  EXPECT_EQ((*p)->conditioner_loads(), 0);
  EXPECT_FALSE((*p)->conditioner_resident());
  EXPECT_EQ(std::find(load_sink.stages.begin(), load_sink.stages.end(), "sampling"), load_sink.stages.end());

  // During the encode, with the conditioner resident beside the transformer.
  Result<RunPlan> first = (*p)->plan(r, quiet, FieldStyle::kFlag);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*p)->encode_prompt(*first, quiet).ok());
  ASSERT_TRUE((*p)->conditioner_resident());
  EXPECT_EQ((*p)->conditioner_runs(), 1);
  RunRequest dog = r;
  dog.prompt = "a dog on a skateboard";
  Result<RunPlan> other = (*p)->plan(dog, quiet, FieldStyle::kFlag);
  ASSERT_TRUE(other.ok());
  CancelToken at_encode;
  CancellingProgress encode_sink(at_encode, -1, true);
  Result<RunOutputs> stopped = (*p)->run(*other, encode_sink, at_encode, out.string());
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), ErrorCode::kCancelled) << stopped.status().to_string();
  EXPECT_NE(stopped.status().message().find("before text encoder layer 0"), std::string::npos)
      << stopped.status().message();
  EXPECT_EQ((*p)->conditioner_runs(), 1);
  EXPECT_TRUE((*p)->conditioner_resident());
  EXPECT_EQ(std::find(encode_sink.stages.begin(), encode_sink.stages.end(), "sampling"), encode_sink.stages.end());

  // Uncancelled, the same prompt then encodes (not from a cache) and the run completes.
  const CancelToken never;
  Result<RunOutputs> done = (*p)->run(*other, quiet, never, out.string());
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  EXPECT_EQ((*p)->conditioner_runs(), 2);
  EXPECT_EQ((*p)->conditioner_loads(), 1);
}

TEST(PromptEncoder, PipelineEncodesOncePerPromptAndFreesTheConditioner) {
  Scratch s;
  Result<PipelineOptions> opts = tiny_snapshot_options(s.path(), 3);
  ASSERT_TRUE(opts.ok()) << opts.status().to_string();
  PipelineOptions o = *opts;
  EXPECT_EQ(o.text_layer, kTinyTextLayer);
  CountingProgress progress;
  Result<std::unique_ptr<Pipeline>> p = Pipeline::open(o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_TRUE((*p)->has_text_encoder());
  RunRequest r;
  r.prompt = "a cat";
  r.width = r.height = 64;
  r.frames = 5;
  r.steps = 1;
  Result<RunPlan> plan = (*p)->plan(r, progress, FieldStyle::kFlag);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_FALSE(plan->text.defined());  // tokenized, not yet encoded: nothing heavy in plan()
  EXPECT_EQ(plan->geo.text_rows, static_cast<int64_t>(plan->text_ids.size()));
  ASSERT_TRUE((*p)->encode_prompt(*plan, progress).ok());
  ASSERT_TRUE(plan->text.defined());
  EXPECT_EQ((*p)->conditioner_runs(), 1);
  EXPECT_EQ(plan->text.shape(), (Shape{static_cast<int64_t>(plan->text_ids.size()), 128}));
  EXPECT_FALSE((*p)->weights_loaded());  // the transformer comes after the conditioner is gone

  // The same states as the text encoder run directly on the presentation.
  Result<std::unique_ptr<TextEncoder>> direct = TextEncoder::load(o.text_encoder_dir, (*p)->backend(), kTinyTextLayer);
  ASSERT_TRUE(direct.ok());
  Result<Tensor> want = (*direct)->encode(plan->text_ids, kTinyTextLayer);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(std::memcmp(want->raw_data(), plan->text.raw_data(), want->nbytes()), 0);

  // Repeats reuse the encoding; a new prompt runs the conditioner again.
  Result<RunPlan> again = (*p)->plan(r, progress, FieldStyle::kFlag);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*p)->encode_prompt(*again, progress).ok());
  EXPECT_EQ((*p)->conditioner_runs(), 1);
  EXPECT_EQ(std::memcmp(again->text.raw_data(), plan->text.raw_data(), plan->text.nbytes()), 0);
  RunRequest dog = r;
  dog.prompt = "a dog on a skateboard";
  Result<RunPlan> other = (*p)->plan(dog, progress, FieldStyle::kFlag);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*p)->encode_prompt(*other, progress).ok());
  EXPECT_EQ((*p)->conditioner_runs(), 2);

  // Pipeline::run encodes a plan whose caller did not (the serve path), from the cache here.
  ASSERT_TRUE((*p)->load_weights(progress).ok());
  Result<RunPlan> fresh = (*p)->plan(r, progress, FieldStyle::kFlag);
  ASSERT_TRUE(fresh.ok());
  const fs::path out = s.path() / "run";
  fs::create_directories(out);
  const CancelToken never;
  Result<RunOutputs> run = (*p)->run(*fresh, progress, never, out.string());
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_EQ((*p)->conditioner_runs(), 2);
  EXPECT_EQ(run->geo.text_rows, static_cast<int64_t>(plan->text_ids.size()));

  // A prompt error is found by plan(), before any weight: nothing new is encoded.
  RunRequest bad = r;
  bad.prompt = std::string("\xFF\xFE");
  Result<RunPlan> refused = (*p)->plan(bad, progress, FieldStyle::kFlag);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--prompt"), std::string::npos) << refused.status().message();
}

TEST(PromptEncoder, ConditionerStaysResidentBesideTheTransformerWhenItFits) {
  Scratch s;
  Result<PipelineOptions> opts = tiny_snapshot_options(s.path(), 5);
  ASSERT_TRUE(opts.ok()) << opts.status().to_string();
  PipelineOptions o = *opts;
  CountingProgress progress;
  Result<std::unique_ptr<Pipeline>> p = Pipeline::open(o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  RunRequest r;
  r.width = r.height = 64;
  r.frames = 5;
  r.steps = 1;
  auto encode = [&](const std::string& prompt) -> Result<RunPlan> {
    RunRequest q = r;
    q.prompt = prompt;
    VORTEX_ASSIGN_OR_RETURN(RunPlan plan, (*p)->plan(q, progress, FieldStyle::kFlag));
    VORTEX_RETURN_IF_ERROR((*p)->encode_prompt(plan, progress));
    return plan;
  };
  // Before the transformer (a one-shot generate): loaded, used, freed.
  ASSERT_TRUE(encode("a cat").ok());
  EXPECT_EQ((*p)->conditioner_loads(), 1);
  EXPECT_FALSE((*p)->conditioner_resident());
  // Beside the transformer (serve): the first new prompt loads it once, the next new prompts reuse it.
  ASSERT_TRUE((*p)->load_weights(progress).ok());
  Result<RunPlan> dog = encode("a dog on a skateboard");
  ASSERT_TRUE(dog.ok()) << dog.status().to_string();
  EXPECT_EQ((*p)->conditioner_loads(), 2);
  EXPECT_TRUE((*p)->conditioner_resident());
  Result<RunPlan> bird = encode("a bird over the sea at dawn");
  ASSERT_TRUE(bird.ok()) << bird.status().to_string();
  EXPECT_EQ((*p)->conditioner_loads(), 2) << "a second, different prompt reloaded the conditioner";
  EXPECT_EQ((*p)->conditioner_runs(), 3);
  // The resident conditioner gives the bytes a fresh one gives.
  Result<std::unique_ptr<TextEncoder>> direct = TextEncoder::load(o.text_encoder_dir, (*p)->backend(), kTinyTextLayer);
  ASSERT_TRUE(direct.ok());
  Result<Tensor> want = (*direct)->encode(bird->text_ids, kTinyTextLayer);
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(want->nbytes(), bird->text.nbytes());
  EXPECT_EQ(std::memcmp(want->raw_data(), bird->text.raw_data(), want->nbytes()), 0);
  // A run with the conditioner resident.
  const fs::path out = s.path() / "run";
  fs::create_directories(out);
  const CancelToken never;
  Result<RunOutputs> run = (*p)->run(*bird, progress, never, out.string());
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_EQ((*p)->conditioner_loads(), 2);
}

}  // namespace
}  // namespace vortex
