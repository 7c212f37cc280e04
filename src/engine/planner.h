// The planner: one path from a RunRequest to a RunPlan (text, geometry, packed layout, schedule, memory estimate),
// validated once, for generate, serve admission (HTTP threads), serve followers and tests. Built from the loaded
// pipeline's fixed facts (the options, the resolved config, the weights' bytes as loaded, the decoders once they
// are loaded); plan() is const and reads nothing that changes after load, so any thread may call it.
// Tested in tests/engine/request_contract_test.cpp and end to end through generate (tests/cli/cli_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/memory_estimate.h"
#include "engine/progress_sink.h"
#include "engine/references.h"
#include "engine/request.h"
#include "model/packing.h"
#include "sampler/sampler.h"
#include "vae/video_vae.h"
#include "vortex/config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// Where a run's text conditioning comes from.
enum class TextSource : uint8_t { kEmbeddings, kPrompt, kSynthetic, kRank0 };
const char* text_source_name(TextSource s);  // "embeddings" | "prompt" | "synthetic" | "rank 0"

// Everything a request needs before any weight is touched: the text, the geometry and packed layout,
// the schedule and the memory estimate.
struct RunPlan {
  RunRequest request;
  ModelConfig cfg;
  // host [L, text_dim] or [L, hidden], f32 or bf16. Undefined for a prompt the text encoder has yet to
  // encode (Pipeline::encode_prompt fills it; Pipeline::run does when the caller has not).
  Tensor text;
  TextSource text_source = TextSource::kSynthetic;
  std::vector<int32_t> text_ids;  // the prompt's t2va presentation, when a text encoder conditions on it
  // fl2va with a text encoder: the keyframes' presentation (text_ids are its ids; its tags tag the layout's text rows)
  KeyframeText keyframe_text;
  // ref2va: each reference's geometry and encoding plan (engine/references.h), and with a text encoder the
  // conditioner's presentation of the references and the prompt (text_ids are its ids; its tags tag the text rows).
  ReferencePlan references;
  Ref2vaPresentation reference_text;
  RequestGeometry geo;
  PackedLayout layout;
  SamplerSpec spec;  // kind, mode, steps and shifts of the run
  AvSchedule schedule;
  MemoryEstimate memory;
  int workers = 1;
};

class Planner {
 public:
  // Validates `options` (validate_pipeline_options), resolves the model config (a built-in one, or the one a
  // checkpoint brings) and sizes the weights as they will be loaded. Reads checkpoint headers, no weights.
  static Result<Planner> create(const PipelineOptions& options);

  const PipelineOptions& options() const { return options_; }
  const ModelConfig& config() const { return cfg_; }
  // Bytes the weights occupy once loaded: the config's spec for synthetic weights, the file's tensors for a
  // checkpoint (a quantized one stays small unless nvfp4-weight-only expands it).
  uint64_t weights_bytes() const { return weights_bytes_; }

  // check_run_request, then the plan: schedule and sampler, --seconds, the text (file, prompt tokens or
  // synthetic rows), the geometry and its limits, the memory estimate (on the CPU backend checked against the
  // free host memory) and, with decoders, whether they can decode it. Notes (frames snapped up) and warnings
  // (a slow CPU run) go to `progress`. On failure `failed_field` (when given) names the field at fault.
  Result<RunPlan> plan(const RunRequest& request, ProgressSink& progress, FieldStyle style,
                       Field* failed_field = nullptr) const;
  // With decoders known and media wanted (RunRequest::media unset or true): kInvalidArgument when the video VAE
  // cannot decode the plan's latent frames (fewer than one clip). Part of plan(); generate calls it alone once
  // its decoders are loaded, after planning.
  Status check_decodable(const RunPlan& plan, FieldStyle style) const;

  // Facts the pipeline adds while it loads, before any concurrent plan(): the weights are resident (the estimate
  // leaves them out), and the video decoder (owned by the pipeline, read through its const frames_for).
  void set_weights_resident(bool resident) { weights_resident_ = resident; }
  void set_video_decoder(const VideoVae* vae) { video_vae_ = vae; }

 private:
  Planner() = default;
  PipelineOptions options_;
  ModelConfig cfg_;
  uint64_t weights_bytes_ = 0;
  bool weights_resident_ = false;
  const VideoVae* video_vae_ = nullptr;
};

// The model config `options` names: a built-in config, or the one a checkpoint brings (its config.json,
// else inferred from its tensors), validated. (Planner::create calls it; the CLI's --gpus checks use it alone.)
Result<ModelConfig> resolve_model_config(const PipelineOptions& options);

// The sampler a schedule runs when none is named: res_multistep for comfyui (ComfyUI's H3 workflow),
// euler for diffusers (MiniMaxH3Scheduler's only update).
SamplerKind default_sampler_for_schedule(AvScheduleMode mode);

// Seed of the synthetic text stream: seed ^ 0x7465787400000000 ("text" in the top four bytes, as
// src/engine/workload.cpp does for bench), so the text never reuses the latent noise stream.
uint64_t synthetic_text_seed(uint64_t seed);
// Deterministic raw "Qwen-like" states [rows, text_dim] F32: element i = gaussian_noise(
// synthetic_text_seed(seed), offset 0)[i]. Not a real prompt: stands in for one in demos and tests.
Tensor synthetic_text_states(const ModelConfig& cfg, int rows, uint64_t seed);
// A prompt's stand-in while no text encoder is loaded: synthetic_text_states of seed FNV-1a-64(prompt),
// one row per 4 bytes of the prompt (about one token each), between 1 and kMaxPromptRows.
constexpr int kMaxPromptRows = 1024;
uint64_t prompt_hash(std::string_view prompt);
Tensor synthetic_prompt_states(const ModelConfig& cfg, std::string_view prompt);

// kInvalidArgument "not enough memory: ..." with the numbers when `need` exceeds `available` (`what`: "host
// memory", "free GPU memory"); OK when `available` is unknown.
Status check_memory_fits(const MemoryEstimate& need, std::optional<uint64_t> available, const std::string& what,
                         BackendKind backend, const ModelConfig& cfg, const RequestGeometry& geo);

// A loader error about a --checkpoint with advice that fits it: the loader suggests "--config", but a
// checkpoint brings its own config (the config.json beside it, or shapes inferred from the tensors).
Status with_checkpoint_advice(const Status& status, const std::string& checkpoint_path);

}  // namespace vortex
