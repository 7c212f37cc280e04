// Pipeline (see pipeline.h): opening the backend, loading (decoders, weights, load-time adapters, precision,
// residency), planning against the device's free memory, and the initial noise. The run itself is in
// engine/pipeline_run.cpp, its outputs in engine/run_outputs.cpp and engine/run_record.cpp, the text conditioning
// in engine/pipeline_text.cpp, per-request adapters in engine/request_adapters.cpp.
#include "engine/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "core/clock.h"
#include "core/rng.h"
#include "core/strings.h"
#include "engine/host_weight_fill.h"
#include "engine/load_overlap.h"
#include "engine/precision.h"
#include "engine/workload.h"
#include "io/checkpoint.h"
#include "model/h3_spec.h"
#include "model/weights_finite.h"

namespace vortex {
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

// The transformer's weights as synthesized or read, before load-time adapters and the precision.
struct TransformerWeights {
  H3Weights weights;
  DeferredWeights deferred;   // weights streamed from the checkpoint's files (residency.blocks/adaln_from_disk)
  bool adaln_filled = false;  // a checkpoint's projections were read straight into host memory (HostWeightFill)
};

// Synthetic weights of `o.weights_seed`, with loading progress. Each AdaLN projection bound for host memory
// (`adaln_host_early`) and, without load-time adapters on a GPU backend, each GEMM weight of a streamed block
// moves to host memory as soon as it is made.
Result<H3Weights> synthesize_transformer(const PipelineOptions& o, const ModelConfig& cfg, Backend& backend,
                                         int resident_blocks, bool adaln_host_early, ProgressSink& progress,
                                         Clock::time_point t_load) {
  const uint64_t total = static_cast<uint64_t>(h3_total_bytes(cfg));
  uint64_t done = 0;
  auto t_report = t_load;
  SynthesizedTensorFn after_each = [&](const TensorSpec& spec, Tensor& t) -> Status {
    done += static_cast<uint64_t>(spec.bytes());
    if ((adaln_host_early && is_block_adaln_weight(spec.name)) ||
        (o.loras.empty() && streamed_gemm_weight(spec.name, resident_blocks) && o.backend != BackendKind::kCpu)) {
      Result<Tensor> host = move_to_host(backend, t);
      if (!host.ok()) return host.status().with_context(spec.name + " to host memory");
      t = std::move(host).value();
    }
    if (seconds_since(t_report) >= kLoadReportSeconds || done == total) {
      t_report = Clock::now();
      progress.loading("transformer", done, total, blocks_before(spec.name, cfg.num_layers, done == total),
                       cfg.num_layers, seconds_since(t_load));
    }
    return Status::Ok();
  };
  return synthesize_weights(cfg, backend, o.weights_seed, after_each);
}

// The checkpoint's weights into `out`: what `residency` streams stays in the files (out.deferred), AdaLN projections
// bound for host memory are read into page-locked memory beside the load when the file allows, and every weight
// read is checked finite.
Status read_transformer(const PipelineOptions& o, const ModelConfig& cfg, Backend& backend,
                        const ResidencyPlan& residency, ProgressSink& progress, TransformerWeights& out) {
  const int resident_blocks = residency.resident_blocks;
  DeferredWeights& deferred = out.deferred;
  std::vector<std::string> load_notes;  // dtype conversions of a diffusers folder
  // AdaLN projections bound for host memory: read from the files into page-locked memory on a thread of their own
  // while the rest loads (engine/host_weight_fill.h); a file that stores them otherwise loads and moves them after.
  std::unique_ptr<HostWeightFill> adaln_fill;
  if (adaln_projections_beside_load(o, residency)) {
    Result<std::unique_ptr<HostWeightFill>> f =
        HostWeightFill::start(backend, o.checkpoint_path, cfg, is_block_adaln_weight, /*threaded=*/o.device == 0);
    if (f.ok()) adaln_fill = std::move(f).value();
  }
  if (residency.adaln_from_disk || residency.blocks_from_disk || adaln_fill) {  // left in the files here
    deferred.wanted = [&residency, resident_blocks, filled = adaln_fill != nullptr](const std::string& name) {
      return ((residency.adaln_from_disk || filled) && is_block_adaln_weight(name)) ||
             (residency.blocks_from_disk && streamed_gemm_weight(name, resident_blocks));
    };
  }
  CheckpointLoadHooks hooks;  // progress per tensor; resident weights by direct reads (io/direct_upload.h)
  hooks.scan_finite = true;   // checked on their way through host memory: not downloaded again below
  const auto t_load = Clock::now();
  auto t_report = t_load;
  hooks.loaded = [&](const std::string& name, uint64_t done, uint64_t total) {
    if (seconds_since(t_report) >= kLoadReportSeconds || done == total) {
      t_report = Clock::now();
      progress.loading("transformer", done, total, blocks_before(name, cfg.num_layers, done == total), cfg.num_layers,
                       seconds_since(t_load));
    }
    return Status::Ok();
  };
  Result<H3Weights> loaded =
      load_checkpoint(o.checkpoint_path, cfg, backend, CheckpointLayout::kAuto, &load_notes, &deferred, &hooks);
  for (const std::string& n : load_notes) progress.note(n);
  if (!loaded.ok()) return with_checkpoint_advice(loaded.status(), o.checkpoint_path);
  progress.note(describe_checkpoint_load(hooks, seconds_since(t_load)));
  if (!deferred.refused.empty())
    return unsupported("cannot stream from disk: " + deferred.refused.front() + " (" +
                       std::to_string(deferred.refused.size()) + " weights)");
  out.weights = std::move(*loaded);
  if (adaln_fill) {
    Result<std::map<std::string, Tensor>> filled = adaln_fill->finish();
    VORTEX_RETURN_IF_ERROR(filled.status());
    const std::map<std::string, Tensor>& host = *filled;
    for (auto& [name, t] : h3_tensor_slots(out.weights)) {
      auto it = host.find(name);
      if (it == host.end()) continue;
      *t = it->second;
      deferred.extents.erase(name);
    }
    out.adaln_filled = true;
    progress.note(std::string("AdaLN projections read into ") +
                  (o.backend == BackendKind::kCpu ? "host memory" : "page-locked host memory") + " beside the load (" +
                  format_gb(model_bytes_of(host)) + " in " + std::to_string(adaln_fill->seconds()).substr(0, 5) +
                  " s)");
  }
  // Weights left in the files are not scanned here (their placeholders are never read), nor those the direct reads
  // checked.
  H3Weights scanned = out.weights;
  for (auto& [name, t] : h3_tensor_slots(scanned))
    if (deferred.extents.count(name) != 0 || hooks.scanned.count(name) != 0) *t = Tensor();
  return check_weights_finite(scanned, backend, o.checkpoint_path, "the checkpoint is damaged (download it again)");
}

// The overlapped load's body (on the loader's thread; engine/load_overlap.h): the checkpoint with direct reads, each
// group of weights checked finite (what the direct reads did not check on the way) and published once its last tensor
// is in place. With `adaln_beside` the blocks' AdaLN projections stay out of the device load: a HostWeightFill reads
// them into page-locked host memory on a thread of its own, in block order, checks each finite and places it
// (BackgroundLoad::place_host), so a block is in place once its device weights and its projection both are. Reports
// into `load` only: the ProgressSink belongs to the run's thread.
Result<H3Weights> load_in_background(BackgroundLoad& load, const PipelineOptions& o, const ModelConfig& cfg,
                                     Backend& backend, bool adaln_beside) {
  std::vector<std::string> load_notes;
  CheckpointLoadHooks hooks;
  hooks.scan_finite = true;
  DeferredWeights deferred;  // the projections read beside the load: left in the files by load_checkpoint
  std::unique_ptr<HostWeightFill> fill;
  if (adaln_beside) {
    deferred.wanted = is_block_adaln_weight;
    HostWeightFill::Hooks fh;
    fh.filled = [&load, &o, &cfg, &backend](const std::string& name, const Tensor& host) -> Status {
      if (load.stopping()) return cancelled("the transformer's load was stopped (the run ended first)");
      H3Weights one = make_empty_h3_weights(cfg);
      for (auto& [n, t] : h3_tensor_slots(one))
        if (n == name) *t = host;
      VORTEX_RETURN_IF_ERROR(
          check_weights_finite(one, backend, o.checkpoint_path, "the checkpoint is damaged (download it again)"));
      load.place_host(name, host);
      return Status::Ok();
    };
    fh.failed = [&load](const Status& error) {
      load.fail(error.with_context("reading the AdaLN projections into host memory beside the load"));
    };
    VORTEX_ASSIGN_OR_RETURN(fill, HostWeightFill::start(backend, o.checkpoint_path, cfg, is_block_adaln_weight,
                                                        /*threaded=*/true, std::move(fh)));
  }
  const std::vector<TensorSpec> specs = h3_tensor_specs(cfg);
  std::set<std::string> last_of_group;  // a group is in place once its last spec tensor is (load_checkpoint's order)
  for (size_t i = 0; i < specs.size(); ++i)
    if (i + 1 == specs.size() ||
        weight_group_of(specs[i].name, cfg.num_layers) != weight_group_of(specs[i + 1].name, cfg.num_layers))
      last_of_group.insert(specs[i].name);
  int published = -2;
  auto check_and_publish = [&](const H3Weights& placed, int through) -> Status {
    for (int g = published + 1; g <= through; ++g) {
      H3Weights unscanned = make_empty_h3_weights(cfg);  // the group's weights the direct reads did not check
      copy_weight_group(g, placed, unscanned);
      for (auto& [name, t] : h3_tensor_slots(unscanned))
        if (hooks.scanned.count(name) != 0 || deferred.extents.count(name) != 0 ||
            weight_group_of(name, cfg.num_layers) != g)
          *t = Tensor();
      VORTEX_RETURN_IF_ERROR(
          check_weights_finite(unscanned, backend, o.checkpoint_path, "the checkpoint is damaged (download it again)"));
    }
    load.publish(through, placed);
    published = std::max(published, through);
    return Status::Ok();
  };
  hooks.loaded = [&](const std::string& name, uint64_t done, uint64_t total) -> Status {
    if (load.stopping()) return cancelled("the transformer's load was stopped (the run ended first)");
    load.report(done, total);
    if (last_of_group.count(name) == 0 || hooks.placed == nullptr) return Status::Ok();
    return check_and_publish(*hooks.placed, weight_group_of(name, cfg.num_layers));
  };
  const auto t_load = Clock::now();
  Result<H3Weights> loaded = load_checkpoint(o.checkpoint_path, cfg, backend, CheckpointLayout::kAuto, &load_notes,
                                             adaln_beside ? &deferred : nullptr, &hooks);
  for (std::string& n : load_notes) load.note(std::move(n));
  if (!loaded.ok()) return with_checkpoint_advice(loaded.status(), o.checkpoint_path);
  load.note(describe_checkpoint_load(hooks, seconds_since(t_load)));
  if (!deferred.refused.empty())
    return unsupported("cannot read the AdaLN projections into host memory as stored: " + deferred.refused.front());
  VORTEX_RETURN_IF_ERROR(check_and_publish(*loaded, cfg.num_layers));  // groups no hook published
  if (fill) {
    Result<std::map<std::string, Tensor>> filled = fill->finish();
    VORTEX_RETURN_IF_ERROR(filled.status().with_context("reading the AdaLN projections into host memory"));
    load.note(std::string("AdaLN projections read into ") +
              (o.backend == BackendKind::kCpu ? "host memory" : "page-locked host memory") +
              " beside the load, each block's handed to the run as it landed (" + format_gb(model_bytes_of(*filled)) +
              " in " + std::to_string(fill->seconds()).substr(0, 5) + " s)");
  }
  return loaded;
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
  std::string switches = options.switches;
  VORTEX_ASSIGN_OR_RETURN(p->load_overlap_on_, take_load_overlap_switch(switches));
  VORTEX_ASSIGN_OR_RETURN(p->exec_, resolve_exec_options(p->backend_->default_options(), options.precision, switches));
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

Pipeline::~Pipeline() {
  // A load still running stops at its next tensor and its thread is joined before the backend goes.
  model_.reset();
  background_.reset();
}

std::string Pipeline::load_overlap_refusal(const ResidencyPlan& residency, bool ranks) const {
  return vortex::load_overlap_refusal(options_, cfg_, residency, load_overlap_on_, ranks);
}

Status Pipeline::begin_load(const RunPlan& plan, ProgressSink& progress, bool ranks) {
  VORTEX_RETURN_IF_ERROR(load_decoders(progress));
  if (model_ || load_order_.decided) return Status::Ok();
  VORTEX_ASSIGN_OR_RETURN(ResidencyPlan residency, residency_plan());
  if (options_.backend != BackendKind::kCpu)
    for (const std::string& line : residency.lines()) progress.note("residency: " + line);
  VORTEX_RETURN_IF_ERROR(check_residency(residency));
  load_order_.decided = true;
  load_order_.refusal = load_overlap_refusal(residency, ranks);
  load_order_.overlapped = load_order_.refusal.empty();
  load_order_.adaln_host = load_order_.overlapped && adaln_projections_beside_load(options_, residency);
  const bool encodes = !plan.text.defined() && plan.text_source == TextSource::kPrompt && has_text_encoder();
  if (encodes && load_order_.overlapped) {
    // Both at once: the plan's resident weights and reserve, and the text encoder's weights and activations.
    Result<uint64_t> te = text_encoder_need(plan.text_ids.size());
    uint64_t limit = UINT64_MAX;  // the device budget; on the cpu backend the available host memory
    bool known = false;
    if (residency.budget) {
      limit = *residency.budget;
      known = true;
    } else if (options_.backend == BackendKind::kCpu) {
      if (const std::optional<uint64_t> free = free_memory()) {
        limit = *free;
        known = true;
      }
    }
    const uint64_t need = residency.resident_device_bytes() + residency.reserve_bytes + (te.ok() ? *te : 0);
    const std::string within = known ? format_gb(limit) : std::string("no known limit");
    load_order_.text_beside = te.ok() && need <= limit;
    load_order_.text_note =
        !te.ok() ? "the text encoder runs before the load (" + te.status().message() + ")"
        : load_order_.text_beside
            ? "the text encoder runs beside the load (" + format_gb(need) + " together, " + within + " available)"
            : "the text encoder runs before the load (" + format_gb(need) + " together pass " + within + ")";
  } else if (encodes) {
    load_order_.text_note = "the text encoder runs before the load";
  }
  progress.note(
      "residency: load order: " +
      (load_order_.overlapped
           ? std::string("overlapped: the transformer loads beside the run, step 1 uses "
                         "each block once it has arrived") +
                 (!load_order_.adaln_host ? std::string()
                  : options_.backend == BackendKind::kCpu
                      ? std::string("; the AdaLN projections are read into host memory beside it, and each "
                                    "block's tables are computed from its projection when the block arrives")
                      : std::string("; the AdaLN projections are read into page-locked host memory beside it, "
                                    "and each block's tables are computed from its projection (uploaded into "
                                    "one reused device buffer) when the block arrives"))
           : "sequential: the transformer loads before sampling (" + load_order_.refusal + ")") +
      (load_order_.text_note.empty() ? std::string() : "; " + load_order_.text_note));
  planned_residency_ = std::move(residency);
  if (load_order_.overlapped && (load_order_.text_beside || !encodes)) return start_background_load(progress);
  return Status::Ok();
}

Status Pipeline::start_background_load(ProgressSink& progress) {
  if (model_) return Status::Ok();
  progress.stage("loading weights beside the run (each block is used once it has arrived)");
  load_order_.load_start = seconds_since(t_open_);
  BackgroundLoad::Options lo;
  lo.num_layers = cfg_.num_layers;
  lo.before_publish = load_hook_;
  const bool adaln_beside = load_order_.adaln_host;
  if (adaln_beside)
    for (int i = 0; i < cfg_.num_layers; ++i)
      lo.host_weights.push_back("blocks." + std::to_string(i) + ".adaln_proj.linear.weight");
  background_ = BackgroundLoad::start(std::move(lo), [this, adaln_beside](BackgroundLoad& load) {
    return load_in_background(load, options_, cfg_, *backend_, adaln_beside);
  });
  model_ = std::make_unique<H3Model>(cfg_, *backend_, make_empty_h3_weights(cfg_), exec_);
  VORTEX_RETURN_IF_ERROR(model_->set_arrivals(background_));
  planner_.set_weights_resident(true);
  return Status::Ok();
}

Status Pipeline::finish_load(ProgressSink& progress) {
  if (!background_) return Status::Ok();
  const std::shared_ptr<BackgroundLoad> load = std::move(background_);
  const Status done = load->finish();
  for (const std::string& n : load->take_notes()) progress.note(n);
  load_seconds_ = load->seconds();
  load_order_.load_end = load_order_.load_start + load_seconds_;
  if (!done.ok()) {
    model_.reset();
    return done.with_context("loading the transformer beside the run");
  }
  return model_->await_weights(cfg_.num_layers);  // every group into the model (a no-op once step 1 ran)
}

Status Pipeline::load_weights(ProgressSink& progress) {
  VORTEX_RETURN_IF_ERROR(load_decoders(progress));
  if (model_) return Status::Ok();
  if (load_order_.overlapped) return start_background_load(progress);
  ResidencyPlan residency;
  if (planned_residency_) {  // begin_load printed and checked it
    residency = *planned_residency_;
  } else {
    VORTEX_ASSIGN_OR_RETURN(residency, residency_plan());
    if (options_.backend !=
        BackendKind::kCpu) {  // on the cpu backend the device is the host: nothing moves, nothing to say
      for (const std::string& line : residency.lines()) progress.note("residency: " + line);
    }
    VORTEX_RETURN_IF_ERROR(check_residency(residency));
  }
  const int resident_blocks = residency.resident_blocks;
  progress.stage(options_.synthetic_weights ? "synthesizing weights" : "loading weights");
  const auto t_load = Clock::now();
  load_order_.load_start = seconds_since(t_open_);
  TransformerWeights loaded;
  // AdaLN projections bound for host memory leave the device as soon as each is made (when no load-time adapter
  // merges into them first), so they never occupy it together.
  const bool adaln_host_early = options_.adaln_weights_on_host() && options_.loras.empty();
  if (options_.synthetic_weights) {
    VORTEX_ASSIGN_OR_RETURN(loaded.weights, synthesize_transformer(options_, cfg_, *backend_, resident_blocks,
                                                                   adaln_host_early, progress, t_load));
  } else {
    VORTEX_RETURN_IF_ERROR(read_transformer(options_, cfg_, *backend_, residency, progress, loaded));
  }
  H3Weights& weights = loaded.weights;
  DeferredWeights& deferred = loaded.deferred;
  const bool adaln_filled = loaded.adaln_filled;
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
  load_order_.load_end = load_order_.load_start + load_seconds_;
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
