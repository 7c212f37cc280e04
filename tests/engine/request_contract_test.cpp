// The request contract (src/engine/request.h, planner.h, plan_codec.h): every field's limits and the field each
// error names, in both dialects: the CLI's (FieldStyle::kFlag, `--steps`, strings through parse_*_text) and the
// HTTP API's (FieldStyle::kJson, `steps`, bodies through src/serve/request.cpp). Then the planner's own refusals
// (geometry, seconds, text, packed rows) and the plan's bytes for serve followers (round trip, damaged input).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "engine/plan_codec.h"
#include "engine/planner.h"
#include "engine/request.h"
#include "serve/request.h"

namespace vortex {
namespace {

PipelineOptions tiny_options() {
  PipelineOptions o;
  o.config_name = "h3-tiny";
  o.synthetic_weights = true;
  o.threads = 1;
  return o;
}

RunRequest small_request() {
  RunRequest r;
  r.width = 64;
  r.height = 64;
  r.frames = 5;
  r.steps = 2;
  r.synthetic_text_rows = 4;
  return r;
}

// One row per limit: a request one step past it, the field it must name, the flag and JSON spellings that must
// open the message (nullptr: the message names the field another way), and the request at the limit, accepted.
struct LimitCase {
  const char* what;
  void (*past)(RunRequest&);
  void (*at)(RunRequest&);
  Field field;
  const char* flag_message;
  const char* json_message;
};

const LimitCase kLimits[] = {
    {"steps 0", [](RunRequest& r) { r.steps = 0; }, [](RunRequest& r) { r.steps = 1; }, Field::kSteps, "--steps",
     "steps"},
    {"steps 1001", [](RunRequest& r) { r.steps = kMaxSteps + 1; }, [](RunRequest& r) { r.steps = kMaxSteps; },
     Field::kSteps, "--steps", "steps"},
    {"width 0", [](RunRequest& r) { r.width = 0; }, [](RunRequest& r) { r.width = 32; }, Field::kWidth,
     "--width/--height", "width/height"},
    {"height 0", [](RunRequest& r) { r.height = 0; }, [](RunRequest& r) { r.height = 32; }, Field::kHeight,
     "--width/--height", "width/height"},
    {"width 8193", [](RunRequest& r) { r.width = kMaxSidePixels + 1; }, [](RunRequest& r) { r.width = 8192; },
     Field::kWidth, "--width/--height", "width/height"},
    {"height 8193", [](RunRequest& r) { r.height = kMaxSidePixels + 1; }, [](RunRequest& r) { r.height = 8192; },
     Field::kHeight, "--width/--height", "width/height"},
    {"frames 0", [](RunRequest& r) { r.frames = 0; }, [](RunRequest& r) { r.frames = 1; }, Field::kFrames, "--frames",
     "frames"},
    {"synthetic text 0", [](RunRequest& r) { r.synthetic_text_rows = 0; },
     [](RunRequest& r) { r.synthetic_text_rows = 1; }, Field::kSyntheticText, "--synthetic-text",
     "synthetic_text_rows"},
    {"synthetic text 4097", [](RunRequest& r) { r.synthetic_text_rows = kMaxSyntheticTextRows + 1; },
     [](RunRequest& r) { r.synthetic_text_rows = kMaxSyntheticTextRows; }, Field::kSyntheticText, "--synthetic-text",
     "synthetic_text_rows"},
    {"fail_alloc_after -2", [](RunRequest& r) { r.fail_alloc_after = -2; },
     [](RunRequest& r) { r.fail_alloc_after = -1; }, Field::kFailAllocAfter, "fail_alloc_after", "fail_alloc_after"},
    {"prompt and embeddings",
     [](RunRequest& r) {
       r.prompt = "a fox";
       r.text_embeddings_path = "x.safetensors";
     },
     [](RunRequest& r) { r.prompt = "a fox"; }, Field::kPrompt, nullptr, nullptr},
    {"precision restated wrongly", [](RunRequest& r) { r.precision = Precision::kFp8; },
     [](RunRequest& r) { r.precision = Precision::kBf16; }, Field::kPrecision, "--precision", "precision"},
    {"attention sage2 on the cpu", [](RunRequest& r) { r.attention = AttentionKind::kSage2; },
     [](RunRequest& r) { r.attention = AttentionKind::kSdpa; }, Field::kAttention, nullptr, nullptr},
    {"attention bf16-owned on the cpu", [](RunRequest& r) { r.attention = AttentionKind::kBf16Owned; },
     [](RunRequest& r) { r.attention = AttentionKind::kSdpa; }, Field::kAttention, nullptr, nullptr},
    {"media without decoders", [](RunRequest& r) { r.media = true; }, [](RunRequest& r) { r.media = false; },
     Field::kMedia, nullptr, "media"},
    {"frames_dir without decoders", [](RunRequest& r) { r.frames_dir = "frames"; },
     [](RunRequest& r) { r.frames_dir.clear(); }, Field::kFramesDir, "--frames-dir", "--frames-dir"},
    {"adapters without --lora-dir",
     [](RunRequest& r) {
       r.loras.push_back(LoraSpec{"a.safetensors", {}});
     },
     [](RunRequest& r) { r.loras.clear(); }, Field::kLora, nullptr, nullptr},
};

TEST(RequestContract, EveryLimitNamesItsFieldInBothDialects) {
  const PipelineOptions o = tiny_options();
  for (const LimitCase& c : kLimits) {
    for (FieldStyle style : {FieldStyle::kFlag, FieldStyle::kJson}) {
      RunRequest past = small_request();
      c.past(past);
      const std::optional<FieldError> e = check_run_request(past, o, style);
      ASSERT_TRUE(e.has_value()) << c.what;
      EXPECT_EQ(e->field, c.field) << c.what;
      EXPECT_FALSE(e->status.ok()) << c.what;
      const char* opens = style == FieldStyle::kFlag ? c.flag_message : c.json_message;
      if (opens != nullptr) {
        EXPECT_EQ(e->status.message().rfind(opens, 0), 0u) << c.what << ": " << e->status.message();
      }
      EXPECT_EQ(field_json_name(*e), field_name(c.field, FieldStyle::kJson)) << c.what;
      RunRequest at = small_request();
      c.at(at);
      const std::optional<FieldError> ok = check_run_request(at, o, style);
      EXPECT_FALSE(ok.has_value()) << c.what << " at the limit: " << ok->status.message();
    }
  }
}

TEST(RequestContract, FieldNamesInBothSpellings) {
  EXPECT_EQ(field_name(Field::kSteps, FieldStyle::kFlag), "--steps");
  EXPECT_EQ(field_name(Field::kSteps, FieldStyle::kJson), "steps");
  EXPECT_EQ(field_name(Field::kSyntheticText, FieldStyle::kJson), "synthetic_text_rows");
  EXPECT_EQ(field_name(Field::kTextEmbeddings, FieldStyle::kFlag), "--text-embeddings");
  EXPECT_EQ(field_name(Field::kTextEmbeddings, FieldStyle::kJson), "text_embeddings");
  // A field only one dialect has falls back to that spelling; the request as a whole has none.
  EXPECT_EQ(field_name(Field::kBackend, FieldStyle::kJson), "--backend");
  EXPECT_EQ(field_name(Field::kSize, FieldStyle::kFlag), "size");
  EXPECT_EQ(field_name(Field::kMemory, FieldStyle::kJson), "");
  EXPECT_EQ(field_name(Field::kNone, FieldStyle::kFlag), "");
  EXPECT_EQ(field_name(Field::kFirstFrame, FieldStyle::kFlag), "--first-frame");
  EXPECT_EQ(field_name(Field::kLastFrame, FieldStyle::kFlag), "--last-frame");
  // Every field has a spelling in at least one dialect, except the two that name no single field.
  for (int i = 0; i <= static_cast<int>(Field::kLastFrame); ++i) {
    const Field f = static_cast<Field>(i);
    if (f == Field::kNone || f == Field::kMemory) continue;
    EXPECT_FALSE(field_name(f, FieldStyle::kFlag).empty()) << i;
    EXPECT_TRUE(field_flag(f) != nullptr || field_json(f) != nullptr) << i;
  }
  FieldError unknown{Field::kNone, invalid_argument("unknown field 'x'"), "x"};
  EXPECT_EQ(field_json_name(unknown), "x");
}

// CLI strings: one converter per kind, the flag in the message.
TEST(RequestContract, CliConvertersNameTheFlag) {
  EXPECT_EQ(*parse_int_text(Field::kWidth, "448"), 448);
  EXPECT_EQ(*parse_int_text(Field::kWidth, "-3"), -3);  // the range is check_run_request's
  for (const char* bad : {"", "abc", "12x", "1.5", "99999999999"}) {
    Result<int> v = parse_int_text(Field::kWidth, bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message(), std::string("--width expects an integer, got '") + bad + "'");
  }
  EXPECT_EQ(*parse_u64_text(Field::kSeed, "18446744073709551615"), 18446744073709551615ull);
  for (const char* bad : {"", "-1", "18446744073709551616", "1e3"}) {
    Result<uint64_t> v = parse_u64_text(Field::kWeightsSeed, bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message(), std::string("--weights-seed expects a non-negative integer, got '") + bad + "'");
  }
  EXPECT_DOUBLE_EQ(*parse_positive_text(Field::kSeconds, "2.5", "seconds"), 2.5);
  for (const char* bad : {"", "0", "-2", "abc", "nan", "inf", "1s"}) {
    Result<double> v = parse_positive_text(Field::kSeconds, bad, "seconds");
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message(), std::string("--seconds expects a positive number of seconds, got '") + bad + "'");
  }
  EXPECT_FALSE(parse_positive_text(Field::kMaxVram, "0", "GB").ok());
  EXPECT_EQ(parse_positive_text(Field::kMaxHostRam, "-4", "GB").status().message(),
            "--max-host-ram expects a positive number of GB, got '-4'");
}

TEST(RequestContract, ChoicesByNameInBothDialects) {
  EXPECT_EQ(*parse_backend_kind("cuda"), BackendKind::kCuda);
  EXPECT_EQ(parse_backend_kind("gpu").status().message(), "--backend must be cpu or cuda, got 'gpu'");
  EXPECT_EQ(*parse_precision_field("nvfp4-weight-only"), Precision::kNvfp4WeightOnly);
  EXPECT_EQ(parse_precision_field("fp16").status().message().rfind("--precision must be one of", 0), 0u);
  EXPECT_EQ(parse_precision_field("fp16", FieldStyle::kJson).status().message().rfind("precision must be one of", 0),
            0u);
  EXPECT_EQ(*parse_attention_field("bf16-owned"), AttentionKind::kBf16Owned);
  EXPECT_EQ(parse_attention_field("flash").status().message(),
            "--attention must be sdpa, sage2 or bf16-owned, got 'flash'");
  EXPECT_EQ(parse_attention_field("flash", FieldStyle::kJson).status().message(),
            "attention must be sdpa, sage2 or bf16-owned, got 'flash'");
  EXPECT_EQ(*parse_adaln_placement("host"), AdalnPlacement::kHost);
  EXPECT_EQ(parse_adaln_placement("gpu").status().message(), "--adaln-weights must be auto, device or host, got 'gpu'");
  EXPECT_EQ(*parse_synthetic_vae("full"), SyntheticVae::kFull);
  EXPECT_EQ(parse_synthetic_vae("small").status().message(), "--synthetic-vae must be 'tiny' or 'full', got 'small'");
  EXPECT_EQ(*parse_lora_mode("runtime"), LoraMode::kRuntime);
  EXPECT_EQ(parse_lora_mode("fuse").status().message(), "--lora-mode must be merge or runtime, got 'fuse'");
  EXPECT_EQ(*parse_schedule_field("diffusers"), AvScheduleMode::kDiffusers);
  EXPECT_FALSE(parse_schedule_field("karras").ok());
  EXPECT_EQ(*parse_sampler_field("euler"), SamplerKind::kEuler);
  EXPECT_FALSE(parse_sampler_field("dpmpp").ok());
  // Names round-trip.
  for (BackendKind b : {BackendKind::kCpu, BackendKind::kCuda}) EXPECT_EQ(*parse_backend_kind(backend_kind_name(b)), b);
  for (AdalnPlacement p : {AdalnPlacement::kAuto, AdalnPlacement::kDevice, AdalnPlacement::kHost})
    EXPECT_EQ(*parse_adaln_placement(adaln_placement_name(p)), p);
  for (LoraMode m : {LoraMode::kMerge, LoraMode::kRuntime}) EXPECT_EQ(*parse_lora_mode(lora_mode_name(m)), m);
}

// The JSON dialect: the body parser reaches the same converters and names the field as the API spells it.
TEST(RequestContract, JsonBodiesNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "x", "schedule": "karras"})", "schedule"},
      {R"({"prompt": "x", "sampler": "dpmpp"})", "sampler"},
      {R"({"prompt": "x", "attention": "flash"})", "attention"},
      {R"({"prompt": "x", "precision": "fp16"})", "precision"},
      {R"({"prompt": "x", "steps": 0})", "steps"},
      {R"({"prompt": "x", "frames": 0})", "frames"},
      {R"({"prompt": "x", "seconds": -1})", "seconds"},
      {R"({"prompt": "x", "width": 0, "height": 64})", "width"},
  };
  for (const auto& [body, expected] : cases) {
    std::string field = "unset";
    Result<RunRequest> r = serve::parse_video_request(body, serve::RequestLimits{}, RunRequest{}, &field);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(field, expected) << body << ": " << r.status().message();
  }
  std::string field;
  Result<RunRequest> r = serve::parse_video_request(
      R"({"prompt": "x", "schedule": "diffusers", "sampler": "euler", "attention": "sage2", "precision": "fp8"})",
      serve::RequestLimits{}, RunRequest{}, &field);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->schedule, AvScheduleMode::kDiffusers);
  EXPECT_EQ(r->sampler, SamplerKind::kEuler);
  EXPECT_EQ(r->attention, AttentionKind::kSage2);
  EXPECT_EQ(r->precision, Precision::kFp8);
  // The JSON body's request through the planner: the field rendered as the API spells it.
  Result<Planner> planner = Planner::create(tiny_options());
  ASSERT_TRUE(planner.ok()) << planner.status().message();
  ProgressSink quiet;
  Field failed = Field::kNone;
  RunRequest q = *r;
  q.attention.reset();
  Result<RunPlan> plan = planner->plan(q, quiet, FieldStyle::kJson, &failed);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(failed, Field::kPrecision);
  EXPECT_EQ(plan.status().message().rfind("precision 'fp8' is not the loaded precision 'bf16'", 0), 0u)
      << plan.status().message();
}

TEST(RequestContract, PlannerRefusalsNameTheField) {
  Result<Planner> planner = Planner::create(tiny_options());
  ASSERT_TRUE(planner.ok()) << planner.status().message();
  ProgressSink quiet;
  struct Case {
    const char* what;
    void (*change)(RunRequest&);
    Field field;
  };
  const Case cases[] = {
      {"width 100", [](RunRequest& r) { r.width = 100; }, Field::kWidth},
      {"height 100", [](RunRequest& r) { r.height = 100; }, Field::kHeight},
      {"seconds 7200", [](RunRequest& r) { r.seconds = 7200.0; }, Field::kSeconds},
      {"missing embeddings", [](RunRequest& r) { r.text_embeddings_path = "/nonexistent/text.safetensors"; },
       Field::kTextEmbeddings},
      {"too many rows",
       [](RunRequest& r) {
         r.width = 8192;
         r.height = 8192;
         r.frames = 4000;
       },
       Field::kFrames},
      {"steps 0 (check_run_request first)", [](RunRequest& r) { r.steps = 0; }, Field::kSteps},
  };
  for (const Case& c : cases) {
    for (FieldStyle style : {FieldStyle::kFlag, FieldStyle::kJson}) {
      RunRequest r = small_request();
      c.change(r);
      Field failed = Field::kNone;
      Result<RunPlan> plan = planner->plan(r, quiet, style, &failed);
      EXPECT_FALSE(plan.ok()) << c.what;
      EXPECT_EQ(failed, c.field) << c.what << ": " << plan.status().message();
    }
  }
  // The text file is named as each dialect names it.
  RunRequest r = small_request();
  r.text_embeddings_path = "/nonexistent/text.safetensors";
  EXPECT_NE(planner->plan(r, quiet, FieldStyle::kFlag).status().message().find("--text-embeddings"), std::string::npos);
  EXPECT_NE(planner->plan(r, quiet, FieldStyle::kJson).status().message().find("text_embeddings (the uploaded file)"),
            std::string::npos);
}

TEST(RequestContract, PlanChoicesAndDefaults) {
  Result<Planner> planner = Planner::create(tiny_options());
  ASSERT_TRUE(planner.ok());
  ProgressSink quiet;
  RunRequest r = small_request();
  Result<RunPlan> comfy = planner->plan(r, quiet, FieldStyle::kFlag);
  ASSERT_TRUE(comfy.ok()) << comfy.status().message();
  EXPECT_EQ(comfy->spec.kind, SamplerKind::kResMultistep);  // the comfyui schedule's default
  EXPECT_EQ(comfy->schedule.sigma_video.size(), 3u);
  EXPECT_EQ(comfy->text_source, TextSource::kSynthetic);
  r.schedule = AvScheduleMode::kDiffusers;
  Result<RunPlan> diffusers = planner->plan(r, quiet, FieldStyle::kFlag);
  ASSERT_TRUE(diffusers.ok());
  EXPECT_EQ(diffusers->spec.kind, SamplerKind::kEuler);  // MiniMaxH3Scheduler's only update
  r.sampler = SamplerKind::kResMultistep;
  EXPECT_EQ(planner->plan(r, quiet, FieldStyle::kFlag)->spec.kind, SamplerKind::kResMultistep);
  // Options are validated once, when the planner is made.
  PipelineOptions no_weights;
  EXPECT_EQ(Planner::create(no_weights).status().code(), ErrorCode::kInvalidArgument);
}

TEST(RequestContract, PlanBytesRoundTripForFollowers) {
  Result<Planner> planner = Planner::create(tiny_options());
  ASSERT_TRUE(planner.ok());
  ProgressSink quiet;
  RunRequest r = small_request();
  r.seed = std::random_device{}();
  r.frames = 23;  // snapped up to 39
  r.sampler = SamplerKind::kEuler;
  r.video_shift = 6.0;
  r.audio_shift = 3.0;
  r.loras.push_back(LoraSpec{"/some/dir/style.safetensors", 0.5});
  RunRequest without_adapters = r;
  without_adapters.loras.clear();  // no --lora-dir here: the plan gets the adapters below, as serve resolves them
  Result<RunPlan> planned = planner->plan(without_adapters, quiet, FieldStyle::kFlag);
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  RunPlan plan = std::move(planned).value();
  plan.request.loras = r.loras;
  Result<std::string> bytes = encode_plan(plan);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  Result<RunPlan> back = decode_plan(*bytes, planner->config());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->geo.frames, 39);
  EXPECT_EQ(back->geo.frames_requested, plan.geo.frames_requested);
  EXPECT_EQ(back->geo.total_rows(), plan.geo.total_rows());
  EXPECT_EQ(back->layout.positions, plan.layout.positions);
  EXPECT_EQ(back->layout.modality, plan.layout.modality);
  EXPECT_EQ(back->request.seed, r.seed);
  EXPECT_EQ(back->request.sampler, SamplerKind::kEuler);
  EXPECT_EQ(back->request.loras.size(), 1u);
  EXPECT_EQ(back->request.loras[0].path, "style.safetensors");  // by file name: each rank resolves it
  EXPECT_EQ(back->request.loras[0].scale, std::optional<double>(0.5));
  EXPECT_EQ(back->spec.kind, plan.spec.kind);
  EXPECT_EQ(back->spec.video_shift, 6.0);
  EXPECT_EQ(back->schedule.sigma_video, plan.schedule.sigma_video);  // bit-exact doubles
  EXPECT_EQ(back->schedule.sigma_audio, plan.schedule.sigma_audio);
  EXPECT_EQ(back->memory.total(), plan.memory.total());
  EXPECT_EQ(back->text_source, TextSource::kRank0);
  ASSERT_EQ(back->text.nbytes(), plan.text.nbytes());
  EXPECT_EQ(std::memcmp(back->text.raw_data(), plan.text.raw_data(), plan.text.nbytes()), 0);
  // Damaged bytes are refused, never half-read.
  EXPECT_FALSE(decode_plan(bytes->substr(0, 4), planner->config()).ok());
  EXPECT_FALSE(decode_plan(bytes->substr(0, bytes->size() - 1), planner->config()).ok());
  std::string flipped = *bytes;
  const size_t at = flipped.find("\"total_rows\":");
  ASSERT_NE(at, std::string::npos);
  flipped[at + 13] = flipped[at + 13] == '9' ? '8' : '9';
  EXPECT_FALSE(decode_plan(flipped, planner->config()).ok());
  RunPlan unresolved = plan;
  unresolved.text = Tensor();
  EXPECT_EQ(encode_plan(unresolved).status().code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace vortex
