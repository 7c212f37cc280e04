// Pipeline's text conditioning (see pipeline.h): encode_prompt, the cache of encodings by token ids, the conditioner
// kept resident beside the transformer while the memory allows, and the fl2va keyframe encoders (the vision tower
// for the prompt, the video VAE encoder for the condition rows), each loaded by the first request that needs it.
// Tested through tests/engine/prompt_encoder_test.cpp and tests/cli/cli_fl2va_test.cpp.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>

#include "core/clock.h"
#include "core/strings.h"
#include "engine/conditioning.h"
#include "engine/pipeline.h"
#include "engine/prompt_encoder.h"
#include "text_encoder/text_encoder.h"
#include "vision/keyframe_presentation.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

std::optional<uint64_t> Pipeline::free_memory() const {
  if (options_.backend == BackendKind::kCpu) return available_host_memory();
  const std::optional<size_t> device = backend_->free_device_memory();
  return device ? std::optional<uint64_t>(*device) : std::nullopt;
}

void Pipeline::make_room_for(uint64_t need) {
  if (!text_encoder_) return;
  const std::optional<uint64_t> free = free_memory();
  if (free && need <= *free) return;
  text_encoder_.reset();  // its memory goes back before the request allocates
  (void)backend_->release_cached_memory();
}

Result<Tensor> Pipeline::encode_ids(const std::vector<int32_t>& ids, ProgressSink& progress, uint64_t keep_need,
                                    const CancelToken* cancel, const VisionEmbeddings* vision,
                                    const Tensor* positions) {
  const std::atomic<bool>* stop = cancel != nullptr ? cancel->flag() : nullptr;
  for (const auto& [cached_ids, states] : encodings_) {
    if (vision == nullptr && cached_ids == ids) {
      progress.note("prompt encoding reused (the same prompt was encoded before in this process)");
      encode_seconds_ = 0.0;
      return states;
    }
  }
  const auto t0 = Clock::now();
  const int layer = options_.text_layer;
  VORTEX_ASSIGN_OR_RETURN(TextEncoderConfig te,
                          TextEncoderConfig::from_file((fs::path(options_.text_encoder_dir) / "config.json").string()));
  // The first `layer` decoder layers, plus `norm` only for the last hidden state (TextEncoder::load).
  const int layers = std::max(layer, 0);
  if (!text_encoder_) {
    VORTEX_ASSIGN_OR_RETURN(const uint64_t weight_bytes, text_encoder_weight_bytes(options_.text_encoder_dir, layers));
    VORTEX_ASSIGN_OR_RETURN(const uint64_t need, text_encoder_need(ids.size()));
    const std::optional<uint64_t> free = free_memory();
    if (free && need > *free) {
      return invalid_argument("not enough memory for the text encoder: " + std::to_string(layers) +
                              " layers need about " + format_gb(need) + " but only " + format_gb(*free) + " of " +
                              (options_.backend == BackendKind::kCpu ? "host memory" : "free GPU memory") +
                              " is available");
    }
    progress.stage("loading the text encoder (" + std::to_string(layers) + " of " + std::to_string(te.num_layers) +
                   " layers, " + format_gb(weight_bytes) + ")");
    TextEncoderLoadProgressFn on_load = [&progress](const TextEncoderLoadProgress& p) {
      progress.loading("text encoder", p.bytes_done, p.bytes_total, p.layers_done, p.layers_total, p.seconds);
    };
    VORTEX_ASSIGN_OR_RETURN(text_encoder_,
                            TextEncoder::load(options_.text_encoder_dir, *backend_, layers, on_load, stop));
    text_encoder_bytes_ = weight_bytes;
    ++conditioner_loads_;
  }
  progress.stage("encoding the prompt (" + std::to_string(ids.size()) + " tokens -> hidden_states[" +
                 std::to_string(layer) + "])");
  TextEncodeControl control;
  control.cancel = stop;
  Result<Tensor> states = vision != nullptr && positions != nullptr
                              ? text_encoder_->encode(ids, *positions, layer, vision, control)
                              : text_encoder_->encode(ids, layer, control);
  Status synced = backend_->synchronize();
  // Resident only beside a loaded transformer and when the run still fits; else freed before the transformer needs
  // the memory (a one-shot generate loads it next). A cancel leaves a resident conditioner resident.
  const bool was_cancelled = !states.ok() && states.status().code() == ErrorCode::kCancelled;
  // A transformer still loading beside it (begin_load) counted on the encoder's memory coming back.
  if ((!states.ok() && !was_cancelled) || !synced.ok() || !model_ || background_) {
    text_encoder_.reset();
    (void)backend_->release_cached_memory();
  } else if (states.ok()) {
    make_room_for(keep_need);
  }
  VORTEX_RETURN_IF_ERROR(states.status());
  VORTEX_RETURN_IF_ERROR(synced);
  ++conditioner_runs_;
  if (vision == nullptr) {
    if (encodings_.size() >= kMaxCachedEncodings) encodings_.erase(encodings_.begin());
    encodings_.emplace_back(ids, *states);
  }
  encode_seconds_ = seconds_since(t0);
  return *states;
}

Result<uint64_t> Pipeline::text_encoder_need(size_t tokens) const {
  VORTEX_ASSIGN_OR_RETURN(TextEncoderConfig te,
                          TextEncoderConfig::from_file((fs::path(options_.text_encoder_dir) / "config.json").string()));
  VORTEX_ASSIGN_OR_RETURN(const uint64_t weight_bytes,
                          text_encoder_weight_bytes(options_.text_encoder_dir, std::max(options_.text_layer, 0)));
  // Activations of the prefill: the residual, q|k|v, the attention output and the two FFN halves in F32.
  const uint64_t act_bytes = static_cast<uint64_t>(tokens) *
                             static_cast<uint64_t>(4 * te.hidden + te.q_width() + 2 * te.kv_width() + 2 * te.ffn) * 4;
  return weight_bytes + act_bytes;
}

Status Pipeline::encode_prompt(RunPlan& plan, ProgressSink& progress, const CancelToken* cancel) {
  if (plan.text.defined() || plan.text_source != TextSource::kPrompt || !has_text_encoder()) return Status::Ok();
  if (!plan.reference_text.ids.empty()) {  // ref2va: engine/pipeline_references.cpp
    VORTEX_ASSIGN_OR_RETURN(VisionEmbeddings vision, reference_vision_for(plan, progress));
    VORTEX_ASSIGN_OR_RETURN(plan.text, encode_ids(plan.text_ids, progress, plan.memory.total(), cancel, &vision,
                                                  &plan.reference_text.positions));
    return Status::Ok();
  }
  if (!plan.keyframe_text.ids.empty()) {
    VORTEX_ASSIGN_OR_RETURN(VisionEmbeddings vision, keyframe_vision_for(plan, progress));
    VORTEX_ASSIGN_OR_RETURN(plan.text, encode_ids(plan.text_ids, progress, plan.memory.total(), cancel, &vision,
                                                  &plan.keyframe_text.positions));
    return Status::Ok();
  }
  VORTEX_ASSIGN_OR_RETURN(plan.text, encode_ids(plan.text_ids, progress, plan.memory.total(), cancel));
  return Status::Ok();
}

Result<VisionEmbeddings> Pipeline::keyframe_vision_for(const RunPlan& plan, ProgressSink& progress) {
  const RunRequest& req = plan.request;
  progress.stage("reading the keyframes");
  VORTEX_ASSIGN_OR_RETURN(PlacedKeyframes placed, read_keyframes(req.keyframes, req.width, req.height));
  VORTEX_ASSIGN_OR_RETURN(VisionProcessorConfig proc, keyframe_processor_config(options_.text_encoder_dir));
  if (!vision_tower_) {
    progress.stage("loading the vision tower");
    VORTEX_ASSIGN_OR_RETURN(VisionTower tower, load_vision_tower(options_.text_encoder_dir, backend_.get()));
    vision_tower_ = std::make_unique<VisionTower>(std::move(tower));
  }
  progress.stage("encoding the keyframes (vision tower, " + std::to_string(placed.keyframes.size()) + " image" +
                 (placed.keyframes.size() > 1 ? "s" : "") + ")");
  return keyframe_vision(*vision_tower_, proc, placed, plan.keyframe_text);
}

Result<Tensor> Pipeline::keyframe_rows_for(const RunPlan& plan, ProgressSink& progress, uint64_t noise_offset) {
  const RunRequest& req = plan.request;
  VORTEX_ASSIGN_OR_RETURN(PlacedKeyframes placed, read_keyframes(req.keyframes, req.width, req.height));
  if (!vae_encoder_) {
    progress.stage("loading the video VAE encoder");
    VORTEX_ASSIGN_OR_RETURN(VideoVaeEncoder enc, VideoVaeEncoder::load(options_.encoder_vae_dir(), backend_.get()));
    vae_encoder_ = std::make_unique<VideoVaeEncoder>(std::move(enc));
  }
  progress.stage("encoding the keyframes (video VAE encoder, " + std::to_string(placed.keyframes.size()) + " image" +
                 (placed.keyframes.size() > 1 ? "s" : "") + ")");
  return keyframe_condition_rows(*vae_encoder_, cfg_, placed, req.seed, noise_offset);
}

}  // namespace vortex
