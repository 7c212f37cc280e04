// Pipeline (see pipeline.h): loading (decoders, weights, precision, residency) and the resident model's run:
// adapters -> text -> prepare -> sample -> outputs. Requests arrive planned (engine/planner.h); run() writes into a
// directory its caller publishes, so a failed or cancelled run never leaves half a result.
#include "engine/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "core/clock.h"
#include "core/rng.h"
#include "core/strings.h"
#include "engine/conditioning.h"
#include "engine/decode.h"
#include "engine/host_weight_fill.h"
#include "engine/precision.h"
#include "engine/preview.h"
#include "engine/prompt_encoder.h"
#include "engine/run_manifest.h"
#include "engine/stream_mux.h"
#include "engine/workload.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/h3_spec.h"
#include "model/weights_finite.h"
#include "profiling/evidence.h"
#include "text_encoder/text_encoder.h"
#include "vision/keyframe_presentation.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Weight-loading progress reports at most this often.
constexpr double kLoadReportSeconds = 0.25;

// "blocks.{i}.adaln_proj.linear.weight": a main block's AdaLN projection (the one placed by adaln_weights).
// Why the transformer's weights cannot stream from the checkpoint's files ("" when they can): a direct read gives
// the bytes as stored, so they must be the bytes the model runs (docs/memory.md "Streaming from disk").
std::string disk_stream_refusal(const PipelineOptions& o) {
  if (o.synthetic_weights || o.checkpoint_path.empty()) return "synthetic weights have no file (give --checkpoint)";
  if (o.precision != Precision::kBf16)
    return std::string("--precision ") + precision_name(o.precision) +
           " converts the weights at load, and a direct read gives them as stored";
  if (!o.loras.empty()) return "load-time --lora adapters are merged into the weights";
  Result<CheckpointInfo> info = inspect_checkpoint(o.checkpoint_path);
  if (!info.ok()) return info.status().message();
  if (!info->quantized_layers.empty()) return "the checkpoint holds quantized layers";
  if (info->layout == CheckpointLayout::kOriginal || info->layout == CheckpointLayout::kDiffusers)
    return std::string("the checkpoint's ") + checkpoint_layout_name(info->layout) +
           " layout stores QKV rows (or names) otherwise than the model reads them; a ComfyUI-layout file streams";
  return "";
}

uint64_t model_bytes_of(const std::map<std::string, Tensor>& tensors) {
  uint64_t n = 0;
  for (const auto& [name, t] : tensors) n += t.nbytes();
  return n;
}

bool is_block_adaln_weight(const std::string& name) {
  static constexpr std::string_view kSuffix = ".adaln_proj.linear.weight";
  return name.rfind("blocks.", 0) == 0 && name.size() > kSuffix.size() &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

// "blocks.{i}.{attn.qkv_proj, attn.out_proj, mlp.fc1, mlp.fc2}.weight" with i >= first_streamed: a GEMM weight that
// streams (H3Model::stream_blocks).
bool streamed_gemm_weight(const std::string& name, int first_streamed) {
  if (name.rfind("blocks.", 0) != 0 || std::atoi(name.c_str() + 7) < first_streamed) return false;
  for (std::string_view s : {".attn.qkv_proj.weight", ".attn.out_proj.weight", ".mlp.fc1.weight", ".mlp.fc2.weight"})
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  return false;
}

// Main blocks complete before the tensor `name` (the spec lists them in order): its block index, or all of them
// once the last tensor is done.
int blocks_before(const std::string& name, int num_layers, bool all_done) {
  if (all_done) return num_layers;
  if (name.rfind("blocks.", 0) != 0) return name.rfind("final_layer", 0) == 0 ? num_layers : 0;
  return std::atoi(name.c_str() + 7);
}

Tensor latents_tensor(const std::vector<float>& values, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

}  // namespace

Result<ExecOptions> resolve_exec_options(const ExecOptions& policy, Precision precision, const std::string& switches) {
  ExecOptions opts = policy;
  opts.precision = precision;
  VORTEX_RETURN_IF_ERROR(apply_switches(switches, opts));
  return opts;
}

Result<std::unique_ptr<Pipeline>> Pipeline::open(const PipelineOptions& options) {
  VORTEX_ASSIGN_OR_RETURN(Planner planner, Planner::create(options));
  return open(std::move(planner));
}

Result<std::unique_ptr<Pipeline>> Pipeline::open(Planner planner) {
  std::unique_ptr<Pipeline> p(new Pipeline(std::move(planner)));
  const PipelineOptions& options = p->options_;
  Result<std::unique_ptr<Backend>> made =
      make_backend(backend_kind_name(options.backend), options.threads, options.device);
  if (!made.ok()) {
    // No CUDA build or device is this machine's limitation, not bad input: a runtime failure.
    if (made.status().code() == ErrorCode::kUnsupported) return Status(ErrorCode::kCuda, made.status().message());
    return made.status();
  }
  p->backend_ = std::move(*made);
  if (options.max_vram_gb > 0.0)
    VORTEX_RETURN_IF_ERROR(p->backend_->set_memory_budget(static_cast<uint64_t>(options.max_vram_gb * 1e9)));
  VORTEX_ASSIGN_OR_RETURN(p->exec_,
                          resolve_exec_options(p->backend_->default_options(), options.precision, options.switches));
  return p;
}

Result<std::unique_ptr<Pipeline>> Pipeline::load(const PipelineOptions& options, ProgressSink& progress) {
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> p, open(options));
  VORTEX_RETURN_IF_ERROR(p->load_weights(progress));
  return p;
}

Status Pipeline::load_decoders(ProgressSink& progress) {
  if (has_decoders() || !options_.wants_decoders()) return Status::Ok();
  const auto t_load = Clock::now();
  const size_t device_before = backend_->memory_in_use();
  std::unique_ptr<VideoVae> video;
  std::unique_ptr<AudioVae> audio;
  if (options_.synthetic_vae != SyntheticVae::kNone) {
    progress.stage("synthesizing decoders");
    const bool tiny = options_.synthetic_vae == SyntheticVae::kTiny;
    VORTEX_ASSIGN_OR_RETURN(video, VideoVae::synthetic(tiny ? VideoVaeConfig::tiny() : VideoVaeConfig::full(),
                                                       *backend_, options_.synthetic_vae_seed));
    VORTEX_ASSIGN_OR_RETURN(audio, AudioVae::synthetic(tiny ? AudioVaeConfig::tiny() : AudioVaeConfig::full(),
                                                       *backend_, options_.synthetic_vae_seed));
    decoders_source_ = std::string("synthetic-") + synthetic_vae_name(options_.synthetic_vae);
  } else {
    progress.stage("loading decoders");
    VORTEX_ASSIGN_OR_RETURN(video, VideoVae::load(options_.vae_dir, *backend_));
    VORTEX_ASSIGN_OR_RETURN(audio, AudioVae::load(options_.audio_vae_dir, *backend_));
    decoders_source_.clear();
  }
  // The decoders take the transformer's latents as they are: same channel counts.
  if (video->config().latent_channels != cfg_.in_channels)
    return invalid_argument("--vae " + options_.vae_dir + " decodes " +
                            std::to_string(video->config().latent_channels) + "-channel latents; this model makes " +
                            std::to_string(cfg_.in_channels));
  if (audio->config().latent_channels != cfg_.audio_in_channels)
    return invalid_argument("--audio-vae " + options_.audio_vae_dir + " decodes " +
                            std::to_string(audio->config().latent_channels) + "-channel latents; this model makes " +
                            std::to_string(cfg_.audio_in_channels));
  video->mutable_config().tiling = options_.vae_tiling;
  // The smallest decode the VAEs accept, on this backend: an op the backend lacks fails here, before any
  // sampling, not after it.
  int64_t probe_t = 1;
  while (probe_t < 64 && video->frames_for(probe_t) <= 0) ++probe_t;
  auto probe = [&]() -> Status {
    VORTEX_RETURN_IF_ERROR(video->decode(Tensor::zeros({cfg_.in_channels, probe_t, 1, 1}, DType::kF32)).status());
    return audio->decode(Tensor::zeros({2, cfg_.audio_in_channels, 1}, DType::kF32)).status();
  };
  if (Status s = probe(); !s.ok())
    return Status(s.code(), std::string("the ") + backend_kind_name(options_.backend) +
                                " backend cannot run the VAE decoders: " + s.message());
  VORTEX_RETURN_IF_ERROR(backend_->synchronize());
  video_vae_ = std::move(video);
  audio_vae_ = std::move(audio);
  planner_.set_video_decoder(video_vae_.get());
  decoders_load_seconds_ = seconds_since(t_load);
  const size_t device_after = backend_->memory_in_use();
  decoders_device_bytes_ = device_after > device_before ? device_after - device_before : 0;
  return Status::Ok();
}

Result<ResidencyPlan> Pipeline::residency_plan(std::optional<uint64_t> reserve) const {
  const uint64_t weights_bytes = planner_.weights_bytes();
  std::optional<uint64_t> budget;
  if (options_.backend != BackendKind::kCpu) {
    if (options_.max_vram_gb > 0.0) {
      budget = static_cast<uint64_t>(options_.max_vram_gb * 1e9);
    } else if (std::optional<size_t> free = backend_->free_device_memory()) {
      budget = *free + backend_->memory_in_use();  // what is free plus what this pipeline holds already
    }
  }
  VORTEX_ASSIGN_OR_RETURN(
      ResidencyPlan plan,
      plan_residency(cfg_, options_, weights_bytes, decoders_device_bytes_, budget, options_.max_vram_gb > 0.0,
                     reserve          ? *reserve
                     : reserve_bytes_ ? *reserve_bytes_
                                      : canonical_activation_bytes(cfg_, options_)));
  if (options_.backend == BackendKind::kCpu) return plan;  // the device is the host: nothing is page-locked
  std::optional<uint64_t> host_budget;
  if (options_.max_host_ram_gb > 0.0) {
    host_budget = static_cast<uint64_t>(options_.max_host_ram_gb * 1e9);
  } else if (std::optional<uint64_t> available = available_host_memory()) {
    host_budget = *available / 10 * 9;
  }
  if (host_budget) {
    const std::string refusal = plan.host_bytes() > *host_budget ? disk_stream_refusal(options_) : std::string();
    VORTEX_RETURN_IF_ERROR(apply_host_budget(plan, *host_budget, options_.max_host_ram_gb > 0.0, refusal));
  }
  return plan;
}

void Pipeline::reserve_for(const RunPlan& plan) {
  uint64_t n = 0;
  for (const MemoryEstimate::Item& i : plan.memory.items)
    if (i.what != "weights") n += i.bytes;
  reserve_bytes_ = n;
}

Status Pipeline::load_weights(ProgressSink& progress) {
  VORTEX_RETURN_IF_ERROR(load_decoders(progress));
  if (model_) return Status::Ok();
  VORTEX_ASSIGN_OR_RETURN(const ResidencyPlan residency, residency_plan());
  if (options_.backend !=
      BackendKind::kCpu) {  // on the cpu backend the device is the host: nothing moves, nothing to say
    for (const std::string& line : residency.lines()) progress.note("residency: " + line);
  }
  VORTEX_RETURN_IF_ERROR(check_residency(residency));
  const int resident_blocks = residency.resident_blocks;
  progress.stage(options_.synthetic_weights ? "synthesizing weights" : "loading weights");
  const auto t_load = Clock::now();
  H3Weights weights;
  DeferredWeights deferred;   // weights streamed from the checkpoint's files (residency.blocks/adaln_from_disk)
  bool adaln_filled = false;  // a checkpoint's projections were read straight into host memory (HostWeightFill)
  // AdaLN projections bound for host memory leave the device as soon as each is made (when no load-time adapter
  // merges into them first), so they never occupy it together.
  const bool adaln_host_early = options_.adaln_weights_on_host() && options_.loras.empty();
  if (options_.synthetic_weights) {
    const uint64_t total = static_cast<uint64_t>(h3_total_bytes(cfg_));
    uint64_t done = 0;
    auto t_report = t_load;
    SynthesizedTensorFn after_each = [&](const TensorSpec& spec, Tensor& t) -> Status {
      done += static_cast<uint64_t>(spec.bytes());
      if ((adaln_host_early && is_block_adaln_weight(spec.name)) ||
          (options_.loras.empty() && streamed_gemm_weight(spec.name, resident_blocks) &&
           options_.backend != BackendKind::kCpu)) {
        Result<Tensor> host = move_to_host(*backend_, t);
        if (!host.ok()) return host.status().with_context(spec.name + " to host memory");
        t = std::move(host).value();
      }
      if (seconds_since(t_report) >= kLoadReportSeconds || done == total) {
        t_report = Clock::now();
        progress.loading("transformer", done, total, blocks_before(spec.name, cfg_.num_layers, done == total),
                         cfg_.num_layers, seconds_since(t_load));
      }
      return Status::Ok();
    };
    VORTEX_ASSIGN_OR_RETURN(weights, synthesize_weights(cfg_, *backend_, options_.weights_seed, after_each));
  } else {
    std::vector<std::string> load_notes;  // dtype conversions of a diffusers folder
    // AdaLN projections bound for host memory: read from the files into page-locked memory on a thread of their own
    // while the rest loads (engine/host_weight_fill.h); a file that stores them otherwise loads and moves them after.
    std::unique_ptr<HostWeightFill> adaln_fill;
    if (options_.adaln_weights_on_host() && options_.loras.empty() && !residency.adaln_from_disk) {
      Result<std::unique_ptr<HostWeightFill>> f = HostWeightFill::start(
          *backend_, options_.checkpoint_path, cfg_, is_block_adaln_weight, /*threaded=*/options_.device == 0);
      if (f.ok()) adaln_fill = std::move(f).value();
    }
    if (residency.adaln_from_disk || residency.blocks_from_disk || adaln_fill) {  // left in the files here
      deferred.wanted = [&residency, resident_blocks, filled = adaln_fill != nullptr](const std::string& name) {
        return ((residency.adaln_from_disk || filled) && is_block_adaln_weight(name)) ||
               (residency.blocks_from_disk && streamed_gemm_weight(name, resident_blocks));
      };
    }
    Result<H3Weights> loaded =
        load_checkpoint(options_.checkpoint_path, cfg_, *backend_, CheckpointLayout::kAuto, &load_notes, &deferred);
    for (const std::string& n : load_notes) progress.note(n);
    if (!loaded.ok()) return with_checkpoint_advice(loaded.status(), options_.checkpoint_path);
    if (!deferred.refused.empty())
      return unsupported("cannot stream from disk: " + deferred.refused.front() + " (" +
                         std::to_string(deferred.refused.size()) + " weights)");
    weights = std::move(*loaded);
    if (adaln_fill) {
      Result<std::map<std::string, Tensor>> filled = adaln_fill->finish();
      VORTEX_RETURN_IF_ERROR(filled.status());
      const std::map<std::string, Tensor>& host = *filled;
      for (auto& [name, t] : h3_tensor_slots(weights)) {
        auto it = host.find(name);
        if (it == host.end()) continue;
        *t = it->second;
        deferred.extents.erase(name);
      }
      adaln_filled = true;
      progress.note("AdaLN projections read into page-locked host memory beside the load (" +
                    format_gb(model_bytes_of(host)) + " in " + std::to_string(adaln_fill->seconds()).substr(0, 5) +
                    " s)");
    }
    // Weights left in the files are not scanned here (their placeholders are never read).
    H3Weights scanned = weights;
    for (auto& [name, t] : h3_tensor_slots(scanned))
      if (deferred.extents.count(name) != 0) *t = Tensor();
    VORTEX_RETURN_IF_ERROR(check_weights_finite(scanned, *backend_, options_.checkpoint_path,
                                                "the checkpoint is damaged (download it again)"));
  }
  if (!options_.loras.empty()) {
    progress.stage("applying LoRA adapters");
    LoraApplyOptions lora_options;
    lora_options.allow_unmatched = options_.lora_allow_unmatched;
    lora_options.mode = lora_mode_name(options_.lora_mode);
    lora_options.precision = precision_name(exec_.precision);
    VORTEX_RETURN_IF_ERROR(apply_lora_adapters(
        weights, options_.loras, lora_options, cfg_, *backend_, [&](std::string_view m) { progress.note(m); },
        [&](std::string_view m) { progress.warning(m); }, &lora_manifest_));
    if (options_.lora_mode != LoraMode::kRuntime)
      VORTEX_RETURN_IF_ERROR(check_weights_finite(weights, *backend_, "the weights merged with --lora",
                                                  "a LoRA SCALE too large overflows the BF16 weights; lower it"));
  }
  PrecisionOptions precision;
  precision.precision = precision_name(exec_.precision);
  precision.nvfp4_fc2 = options_.nvfp4_fc2;
  if (precision.precision != "bf16") {
    progress.stage("converting the block GEMM weights to " + precision.precision +
                   (options_.backend == BackendKind::kCpu ? "" : " on the device"));
  }
  VORTEX_RETURN_IF_ERROR(apply_precision(weights, *backend_, precision));
  VORTEX_RETURN_IF_ERROR(backend_->synchronize());
  VORTEX_RETURN_IF_ERROR(backend_->release_cached_memory());  // the BF16 originals' blocks
  model_ = std::make_unique<H3Model>(cfg_, *backend_, std::move(weights), exec_);
  std::shared_ptr<DirectFileReader> disk;
  if (!deferred.extents.empty()) disk = std::make_shared<DirectFileReader>(deferred.extents);
  if (resident_blocks < cfg_.num_layers) {
    progress.stage("streaming blocks " + std::to_string(resident_blocks) + ".." + std::to_string(cfg_.num_layers - 1) +
                   (residency.blocks_from_disk ? " from disk (direct reads)" : " from host memory"));
    VORTEX_RETURN_IF_ERROR(model_->stream_blocks(resident_blocks, residency.blocks_from_disk ? disk : nullptr));
  }
  if (residency.adaln_from_disk) {
    VORTEX_RETURN_IF_ERROR(model_->place_adaln_weights(AdalnWeightPlace::kDisk, disk));
  } else if (options_.adaln_weights_on_host()) {
    if (!(adaln_host_early && options_.synthetic_weights) && !adaln_filled)
      progress.stage("moving the AdaLN projections to host memory (" + format_gb(model_->adaln_weight_bytes()) + ")");
    VORTEX_RETURN_IF_ERROR(model_->place_adaln_weights(AdalnWeightPlace::kHost));
  }
  planner_.set_weights_resident(true);
  load_seconds_ = seconds_since(t_load);
  return Status::Ok();
}

Result<RunPlan> Pipeline::plan(const RunRequest& request, ProgressSink& progress, FieldStyle style,
                               Field* failed_field) const {
  VORTEX_ASSIGN_OR_RETURN(RunPlan plan, planner_.plan(request, progress, style, failed_field));
  if (Status fit = check_device_fit(plan); !fit.ok()) {
    if (failed_field != nullptr) *failed_field = Field::kMemory;
    return fit;
  }
  return plan;
}

Status Pipeline::check_device_fit(const RunPlan& plan) const {
  if (options_.backend == BackendKind::kCpu) return Status::Ok();
  if (!weights_loaded()) {
    uint64_t activations = 0;
    for (const MemoryEstimate::Item& i : plan.memory.items)
      if (i.what != "weights") activations += i.bytes;
    VORTEX_ASSIGN_OR_RETURN(const ResidencyPlan residency, residency_plan(activations));
    return check_residency(residency).with_context(std::to_string(plan.geo.width) + "x" +
                                                   std::to_string(plan.geo.height) + ", " +
                                                   std::to_string(plan.geo.frames) + " frames");
  }
  std::optional<size_t> free = backend_->free_device_memory();
  if (free && text_encoder_) *free += text_encoder_bytes_;  // run() frees a resident conditioner that is in the way
  return check_memory_fits(plan.memory, free, "free GPU memory", options_.backend, cfg_, plan.geo);
}

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
    // Activations of the prefill: the residual, q|k|v, the attention output and the two FFN halves in F32.
    const uint64_t act_bytes = static_cast<uint64_t>(ids.size()) *
                               static_cast<uint64_t>(4 * te.hidden + te.q_width() + 2 * te.kv_width() + 2 * te.ffn) * 4;
    const std::optional<uint64_t> free = free_memory();
    if (free && weight_bytes + act_bytes > *free) {
      return invalid_argument(
          "not enough memory for the text encoder: " + std::to_string(layers) + " layers need about " +
          format_gb(weight_bytes + act_bytes) + " but only " + format_gb(*free) + " of " +
          (options_.backend == BackendKind::kCpu ? "host memory" : "free GPU memory") + " is available");
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
  if ((!states.ok() && !was_cancelled) || !synced.ok() || !model_) {
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

Status Pipeline::encode_prompt(RunPlan& plan, ProgressSink& progress, const CancelToken* cancel) {
  if (plan.text.defined() || plan.text_source != TextSource::kPrompt || !has_text_encoder()) return Status::Ok();
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

namespace {

// Disarms an injected allocation failure when a run ends, however it ends.
class InjectedFailureGuard {
 public:
  InjectedFailureGuard(Backend& backend, int after) : backend_(backend), armed_(after >= 0) {
    if (armed_) backend_.inject_alloc_failure(after);
  }
  ~InjectedFailureGuard() {
    if (armed_) backend_.inject_alloc_failure(-1);
  }
  InjectedFailureGuard(const InjectedFailureGuard&) = delete;
  InjectedFailureGuard& operator=(const InjectedFailureGuard&) = delete;

 private:
  Backend& backend_;
  bool armed_;
};

}  // namespace

Result<RunOutputs> Pipeline::run(const RunPlan& plan, ProgressSink& progress, const CancelToken& cancel,
                                 const std::string& dir, double seconds_before) {
  if (!model_) return internal_error("Pipeline::run before load_weights");
  const auto t_run = Clock::now();
  const RunRequest& req = plan.request;
  const ModelConfig& cfg = cfg_;
  const RequestGeometry& geo = plan.geo;
  const fs::path staged(dir);
  InjectedFailureGuard injected(*backend_, req.fail_alloc_after);

  ExecOptions exec = exec_;
  if (req.attention) exec.attention = *req.attention;
  model_->options() = exec;
  // With ranks the adapters were attached and compared by agree_request_loras: a rank loading here alone
  // could sample with other weights than its peers.
  if (model_->communicator() != nullptr && !req.loras.empty() && !request_loras_attached(req))
    return internal_error("Pipeline::run with ranks: the job's adapters were not agreed (agree_request_loras)");
  VORTEX_RETURN_IF_ERROR(switch_request_loras(req, progress));  // before prepare: the refiner may be adapted

  Tensor text = plan.text;  // [L, text_dim] host
  if (!text.defined()) {
    RunPlan encoded = plan;
    // With ranks only the agreed cancel counts (agreed_cancel below): a rank stopping alone here would leave its
    // peers waiting in a collective.
    const bool alone = model_->communicator() == nullptr;
    VORTEX_RETURN_IF_ERROR(encode_prompt(encoded, progress, alone ? &cancel : nullptr));
    if (!encoded.text.defined()) return internal_error("Pipeline::run: the plan has no text and no prompt to encode");
    text = encoded.text;
  }
  // With ranks, only rank 0's token counts and it is agreed before every model evaluation (agreed_cancel):
  // a rank that stopped on its own, before sampling or between blocks, would leave its peers waiting in a
  // collective.
  Communicator* world = model_->communicator();
  if (world == nullptr && cancel.cancelled()) return cancelled("cancelled before sampling");
  const bool media = has_decoders() && req.media.value_or(true);
  if (req.media.value_or(false) && !has_decoders())
    return invalid_argument("media requested but no decoders are loaded");
  make_room_for(plan.memory.total());  // a resident conditioner gives way to a request that needs its memory

  // fl2va: the keyframe rows, their noise from the request's stream after the video and audio noise.
  const uint64_t condition_noise_offset =
      static_cast<uint64_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w +
      static_cast<uint64_t>(2) * cfg.audio_in_channels * geo.audio_latents;
  Tensor condition_rows;  // [Nc, 4C] f32 host (fl2va)
  double keyframes_seconds = 0.0;
  if (!geo.keyframes.empty()) {
    const auto t_keyframes = Clock::now();
    VORTEX_ASSIGN_OR_RETURN(condition_rows, keyframe_rows_for(plan, progress, condition_noise_offset));
    keyframes_seconds = seconds_since(t_keyframes);
    if (world == nullptr && cancel.cancelled()) return cancelled("cancelled before sampling");
  }
  progress.stage("preparing text and positions");
  const auto t_prepare = Clock::now();
  VORTEX_RETURN_IF_ERROR(model_->prepare(plan.layout, text, condition_rows));
  // Every step's AdaLN tables before step 1 (H3Model::precompute_adaln): each adaln_proj weight read once.
  std::vector<std::pair<double, double>> sigmas;
  for (int i = 0; i < plan.spec.steps; ++i)
    sigmas.emplace_back(plan.schedule.sigma_video[static_cast<size_t>(i)],
                        plan.schedule.sigma_audio[static_cast<size_t>(i)]);
  const auto t_tables = Clock::now();
  if (exec.adaln_ahead) {
    progress.stage(std::string("computing the AdaLN tables of ") + std::to_string(plan.spec.steps) + " steps" +
                   (model_->adaln_weights_on_host() ? " (AdaLN projections from host memory)" : ""));
    VORTEX_RETURN_IF_ERROR(model_->precompute_adaln(sigmas));
    // The projection upload buffer (0.5 GB at h3 scale) is free now: back to the driver, not held through sampling.
    if (model_->adaln_weights_on_host()) VORTEX_RETURN_IF_ERROR(backend_->release_cached_memory());
  } else {
    VORTEX_RETURN_IF_ERROR(model_->precompute_adaln({}));  // drops held entries: every step computes its own
  }
  VORTEX_RETURN_IF_ERROR(backend_->synchronize());
  const double tables_seconds = seconds_since(t_tables);
  RunOutputs result;
  result.prepare_seconds = seconds_since(t_prepare);
  if (world == nullptr && cancel.cancelled()) return cancelled("cancelled before sampling");

  // ---- sampling ----
  progress.stage("sampling");
  AvLatents noise = initial_noise(cfg, geo, req.seed);
  result.geo = geo;
  const auto t_sample = Clock::now();
  auto t_mark = t_sample;
  H3Model& model = *model_;
  Backend& backend = *backend_;
  DenoiseFn denoise = [&model, &cancel, &backend, world](const AvLatents& x, double sigma_v, double sigma_a,
                                                         int) -> Result<AvLatents> {
    if (world == nullptr) return model.forward(x, sigma_v, sigma_a, cancel.flag());
    VORTEX_ASSIGN_OR_RETURN(const bool stop, agreed_cancel(*world, backend, cancel));
    if (stop) return cancelled("cancelled between steps");
    return model.forward(x, sigma_v, sigma_a, nullptr);
  };
  StepCallback on_step = [&](int, int total) {
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - t_mark).count();
    t_mark = now;
    result.step_seconds.push_back(dt);
    progress.step(static_cast<int>(result.step_seconds.size()), total, dt, seconds_since(t_sample));
  };
  VORTEX_ASSIGN_OR_RETURN(AvLatents final_latents,
                          sample_av(plan.spec, plan.schedule, std::move(noise), denoise, on_step));
  result.sampling_seconds = seconds_since(t_sample);
  const size_t video_n = static_cast<size_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
  const size_t audio_n = static_cast<size_t>(2) * cfg.audio_in_channels * geo.audio_latents;
  if (final_latents.video.size() != video_n || final_latents.audio.size() != audio_n) {
    return internal_error("sampler returned " + std::to_string(final_latents.video.size()) + " video / " +
                          std::to_string(final_latents.audio.size()) + " audio values, expected " +
                          std::to_string(video_n) + " / " + std::to_string(audio_n));
  }

  // ---- outputs, into the caller's staging directory ----
  progress.stage("writing outputs");
  std::error_code ec;
  Tensor video = latents_tensor(final_latents.video, {cfg.in_channels, geo.latent_frames, geo.latent_h,
                                                      geo.latent_w});  // [24, T, H/16, W/16] f32
  Tensor audio = latents_tensor(final_latents.audio, {2, cfg.audio_in_channels, geo.audio_latents});  // [2, 32, Ta] f32
  const std::string video_file = "video_latents.safetensors";
  const std::string audio_file = "audio_latents.safetensors";
  const std::string preview_file = "preview.png";
  const std::string manifest_file = "run.json";
  VORTEX_RETURN_IF_ERROR(write_safetensors((staged / video_file).string(), {{"video_latents", video}}, {}));
  VORTEX_RETURN_IF_ERROR(write_safetensors((staged / audio_file).string(), {{"audio_latents", audio}}, {}));
  VORTEX_ASSIGN_OR_RETURN(PreviewImage preview, render_latent_preview(video));
  VORTEX_RETURN_IF_ERROR(write_png_rgb(preview, (staged / preview_file).string()));

  nlohmann::ordered_json outputs = nlohmann::ordered_json::object();
  auto describe_output = [&](const std::string& file, const nlohmann::ordered_json& extra) -> Status {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file((staged / file).string()));
    nlohmann::ordered_json entry = extra;
    entry["sha256"] = sha;
    entry["bytes"] = fs::file_size(staged / file, ec);
    outputs[file] = entry;
    return Status::Ok();
  };
  VORTEX_RETURN_IF_ERROR(describe_output(
      video_file,
      {{"tensor", "video_latents"}, {"dtype", "F32"}, {"shape", video.shape()}, {"layout", "[C, T, H/16, W/16]"}}));
  VORTEX_RETURN_IF_ERROR(describe_output(
      audio_file, {{"tensor", "audio_latents"}, {"dtype", "F32"}, {"shape", audio.shape()}, {"layout", "[2, C, Ta]"}}));
  VORTEX_RETURN_IF_ERROR(describe_output(preview_file, {{"width", preview.width},
                                                        {"height", preview.height},
                                                        {"frames_shown", preview_frame_indices(geo.latent_frames)},
                                                        {"note", "fixed linear latent->RGB map, NOT a VAE decode"}}));

  using J = nlohmann::ordered_json;
  J decode_manifest = nullptr;
  if (media) {
    if (cancel.cancelled()) return cancelled("cancelled before decoding");
    progress.stage("decoding video and audio");
    const auto t_decode = Clock::now();
    // Elapsed per stage (a stage starts when the previous one reported last), so each ETA is its own.
    std::string stage_now;
    auto t_stage = t_decode, t_last = t_decode;
    VaeProgressFn on_tile = [&](const VaeProgress& p) {
      if (p.stage != stage_now) stage_now = p.stage, t_stage = t_last;
      progress.decode(p.stage, p.done, p.total, seconds_since(t_stage));
      t_last = Clock::now();
    };
    const int64_t tiles = video_vae_->tile_forwards(video.shape());
    auto t0 = Clock::now();
    VORTEX_RETURN_IF_ERROR(video_vae_->check_latents(video).with_context("sampled video latents"));
    VORTEX_RETURN_IF_ERROR(audio_vae_->check_latents(audio).with_context("sampled audio latents"));
    // video.mp4 is encoded while the video decodes (the audio first; src/engine/stream_mux.h).
    Mp4Options mp4;
    mp4.crf = options_.mp4_crf;
    // A cancel stops the decode between clips and before the mux's flush (decode_to_mp4); on backends that poll
    // it, inside long ops too, whose cut-short outputs the cancel then discards.
    struct CancelScope {
      Backend& b;
      ~CancelScope() { b.set_cancel_flag(nullptr); }
    } cancel_scope{*backend_};
    backend_->set_cancel_flag(cancel.flag());
    VORTEX_ASSIGN_OR_RETURN(StreamedDecode streamed,
                            decode_to_mp4(video, audio, *video_vae_, *audio_vae_, (staged / "video.mp4").string(), mp4,
                                          on_tile, cancel.flag()));
    const DecodedMedia& decoded = streamed.media;
    const double video_s = streamed.video_decode_s, audio_s = streamed.audio_decode_s;
    t0 = Clock::now();
    VORTEX_ASSIGN_OR_RETURN(nlohmann::json described,
                            write_media_files(decoded, staged.string(), mp4, &streamed.encoder));
    for (const char* f : {"video.mp4", "audio.wav"})
      VORTEX_RETURN_IF_ERROR(describe_output(f, J::parse(described[f].dump())));
    if (!req.frames_dir.empty()) VORTEX_RETURN_IF_ERROR(write_frames_dir(decoded, req.frames_dir));
    const double write_s = seconds_since(t0);
    result.decode_seconds = seconds_since(t_decode);
    const VideoVaeConfig& vc = video_vae_->config();
    decode_manifest = {
        {"vae", decoders_source_.empty() ? J(options_.vae_dir) : J(decoders_source_)},
        {"audio_vae", decoders_source_.empty() ? J(options_.audio_vae_dir) : J(decoders_source_)},
        {"vae_layout", decoders_source_.empty() ? J(vae_layout_name(video_vae_->layout())) : J(nullptr)},
        {"audio_vae_layout", decoders_source_.empty() ? J(vae_layout_name(audio_vae_->layout())) : J(nullptr)},
        {"synthetic_seed", decoders_source_.empty() ? J(nullptr) : J(options_.synthetic_vae_seed)},
        {"backend", std::string(backend_->name())},
        {"program",
         "video: BF16 activations, FP32 residual stream and pinned modules; audio: FP32 "
         "(docs/numerics.md \"VAE decoders\")"},
        {"tiling", vc.tiling ? J{{"tile", vc.tile}, {"min_overlap", vc.tile_overlap}} : J(false)},
        {"clip", {{"latent_frames", vc.tokens_chunk_size()}, {"overlap", vc.token_overlap()}}},
        {"tile_forwards", tiles},
        {"video_parameters", video_vae_->parameter_count()},
        {"audio_parameters", audio_vae_->parameter_count()},
        {"frames_dir", req.frames_dir.empty() ? J(nullptr) : J(req.frames_dir)},
        {"timing",
         {{"load_decoders_seconds", decoders_load_seconds_},
          {"video_decode_seconds", video_s},
          {"audio_decode_seconds", audio_s},
          {"write_media_seconds", write_s}}}};
  }
  const bool from_file = plan.text_source == TextSource::kEmbeddings;
  const bool encoded = plan.text_source == TextSource::kPrompt && has_text_encoder();
  J text_sha = nullptr;
  if (from_file) {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(req.text_embeddings_path));
    text_sha = sha;
  }
  const PipelineOptions& o = options_;
  J manifest;
  manifest["schema"] = "vortex.run/1";
  manifest["vortex"] = build_info_json();
  manifest["time_utc"] = utc_now_iso8601();
  manifest["host"] = host_name();
  manifest["request"] = {
      {"config", o.checkpoint_path.empty() ? o.config_name : cfg.name},
      {"checkpoint", o.checkpoint_path.empty() ? J(nullptr) : J(o.checkpoint_path)},
      {"synthetic_weights", o.synthetic_weights},
      {"weights_seed", o.synthetic_weights ? J(o.weights_seed) : J(nullptr)},
      {"text_embeddings", from_file ? J(req.text_embeddings_path) : J(nullptr)},
      {"text_embeddings_sha256", text_sha},
      {"synthetic_text_rows", plan.text_source == TextSource::kSynthetic ? J(req.synthetic_text_rows) : J(nullptr)},
      {"prompt", plan.text_source == TextSource::kPrompt ? J(req.prompt) : J(nullptr)},
      {"model", o.model_dir.empty() ? J(nullptr) : J(o.model_dir)},
      {"text_encoder", encoded ? J(o.text_encoder_dir) : J(nullptr)},
      {"tokenizer", encoded ? J(o.tokenizer_path) : J(nullptr)},
      {"text_layer", encoded ? J(o.text_layer) : J(nullptr)},
      {"prompt_tokens", encoded ? J(plan.text_ids.size()) : J(nullptr)},
      {"text_shape", text.shape()},
      {"text_dtype", dtype_name(text.dtype())},
      {"width", req.width},
      {"height", req.height},
      {"frames_requested", req.seconds != 0.0 ? J(nullptr) : J(req.frames)},
      {"seconds_requested", req.seconds != 0.0 ? J(req.seconds) : J(nullptr)},
      {"steps", req.steps},
      {"sampler", sampler_kind_name(plan.spec.kind)},
      {"schedule", av_schedule_mode_name(plan.spec.mode)},
      {"seed", req.seed},
      {"backend", std::string(backend_->name())},
      {"threads", o.threads},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"precision", precision_name(exec.precision)},
      {"attention", attention_name(exec.attention)},
      {"fused_norm_modulate", exec.fused_norm_modulate},
      {"fused_gate_add", exec.fused_gate_add},
      {"fp8_gate_epilogue", exec.fp8_gate_epilogue},
      {"adaln_weights", model_->adaln_weights_on_host() ? "host" : "device"}};
  manifest["noise"] = {
      {"contract",
       "gaussian_noise (src/core/rng.h): one stream of `seed`, video elements first, "
       "then audio"},
      {"seed", req.seed},
      {"video_offset", 0},
      {"audio_offset", video_n},
      {"keyframe_offset", geo.keyframes.empty() ? J(nullptr) : J(condition_noise_offset)},
      {"synthetic_text_seed", plan.text_source == TextSource::kSynthetic ? J(synthetic_text_seed(req.seed))
                              : plan.text_source == TextSource::kPrompt && !encoded
                                  ? J(synthetic_text_seed(prompt_hash(req.prompt)))
                                  : J(nullptr)}};
  // Every input file of the request with its SHA-256: the keyframe images and the text-embeddings file.
  J inputs = J::array();
  for (const auto& [role, path] : {std::pair<std::string, std::string>{"first_frame", req.keyframes.first},
                                   {"last_frame", req.keyframes.last},
                                   {"text_embeddings", from_file ? req.text_embeddings_path : std::string()}}) {
    if (path.empty()) continue;
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(path));
    J entry = {{"role", role}, {"path", path}, {"bytes", fs::file_size(path, ec)}, {"sha256", sha}};
    if (role != "text_embeddings") {
      VORTEX_ASSIGN_OR_RETURN(ImageHeader h, probe_image(path));
      entry["format"] = image_format_name(h.format);
      entry["width"] = h.width;
      entry["height"] = h.height;
      entry["exif_orientation"] = h.orientation;
    }
    inputs.push_back(entry);
  }
  manifest["inputs"] = inputs;
  manifest["task"] = geo.keyframes.empty() ? "t2va" : "fl2va";
  if (!geo.keyframes.empty()) {
    J anchors = J::array();
    for (KeyframeAnchor a : geo.keyframes) anchors.push_back(keyframe_anchor_name(a));
    manifest["keyframes"] = {
        {"anchors", anchors},
        {"canvas", {{"width", geo.width}, {"height", geo.height}}},
        {"placement", "MiniMaxH3ResizeStep: the first stretched, the last cover-cropped, Pillow LANCZOS"},
        {"vae", o.encoder_vae_dir()},
        {"encoder_seed", 42},
        {"noise_aug", kKeyframeNoiseAug},
        {"condition_rows", geo.condition_rows()},
        {"vision", plan.keyframe_text.ids.empty() ? J(nullptr) : J(o.text_encoder_dir)},
        {"seconds", keyframes_seconds}};
  }
  manifest["lora"] = lora_manifest_;
  manifest["world"] = world_json(world);
  manifest["model_config"] = model_config_json(cfg);
  manifest["geometry"] = geometry_json(geo);
  manifest["schedule"] = {{"mode", av_schedule_mode_name(plan.spec.mode)},
                          {"video_shift", plan.spec.video_shift},
                          {"audio_shift", plan.spec.audio_shift},
                          {"sigma_video", plan.schedule.sigma_video},
                          {"sigma_audio", plan.schedule.sigma_audio},
                          {"timesteps_video", timesteps_from_sigmas_f32(plan.schedule.sigma_video)},
                          {"timesteps_audio", timesteps_from_sigmas_f32(plan.schedule.sigma_audio)}};
  manifest["decode"] = decode_manifest;
  manifest["outputs"] = outputs;
  result.run_seconds = seconds_since(t_run);
  manifest["timing"] = {
      {"load_weights_seconds", load_seconds_},     {"encode_prompt_seconds", encoded ? J(encode_seconds_) : J(nullptr)},
      {"prepare_seconds", result.prepare_seconds}, {"adaln_tables_seconds", tables_seconds},
      {"step_seconds", result.step_seconds},       {"sampling_seconds", result.sampling_seconds},
      {"decode_seconds", result.decode_seconds},   {"total_seconds", seconds_before + result.run_seconds}};
  VORTEX_RETURN_IF_ERROR(write_json_file(manifest, (staged / manifest_file).string()));
  result.files = {video_file, audio_file, preview_file};
  if (media) result.files.insert(result.files.end(), {"video.mp4", "audio.wav"});
  result.files.push_back(manifest_file);
  return result;
}

AvLatents initial_noise(const ModelConfig& cfg, const RequestGeometry& geo, uint64_t seed) {
  const size_t video_n = static_cast<size_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
  const size_t audio_n = static_cast<size_t>(2) * cfg.audio_in_channels * geo.audio_latents;
  AvLatents noise;
  noise.video.resize(video_n);  // [24, T, H/16, W/16] flattened
  noise.audio.resize(audio_n);  // [2, 32, Ta] flattened
  gaussian_noise(seed, 0, noise.video.data(), video_n);
  gaussian_noise(seed, video_n, noise.audio.data(), audio_n);
  return noise;
}

}  // namespace vortex
