// The planner (see planner.h): the request's text, geometry, schedule and memory estimate, checked once. Every
// check that can fail cheaply runs here, before any weight is touched; the field at fault travels as a Field.
#include "engine/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>

#include "backend/backend.h"
#include "core/rng.h"
#include "engine/prompt_encoder.h"
#include "engine/residency.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/h3_spec.h"
#include "text_encoder/text_encoder.h"
#include "vision/keyframe_presentation.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

// Packed rows per request: 50x the canonical 37,810 (the seeds' long shape is ~74K). Beyond this a
// request is a typo (e.g. --frames 100000) that would only end in an out-of-memory kill.
constexpr int64_t kMaxPackedRows = 2'000'000;
// A CPU run estimated above this many seconds gets a warning with the estimate.
constexpr double kSlowCpuRunSeconds = 3600.0;

// Text conditioning from a safetensors file: exactly one 2-D tensor, width text_dim or hidden, f32/bf16.
// `shown` names it in messages ("--text-embeddings FILE" or the API field).
Result<Tensor> load_text_embeddings(const std::string& path, const std::string& shown, const ModelConfig& cfg) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return not_found(shown + " does not exist (pass a safetensors file with one [L, " + std::to_string(cfg.text_dim) +
                     "] tensor, or use --synthetic-text N)");
  }
  VORTEX_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  if (file.entries().size() != 1) {
    return invalid_argument(shown + " holds " + std::to_string(file.entries().size()) +
                            " tensors; it must hold exactly one 2-D tensor [L, " + std::to_string(cfg.text_dim) +
                            "] (Qwen3-VL layer-50 states) or [L, " + std::to_string(cfg.hidden) + "] (refined)");
  }
  const std::string name = file.entries().front().name;
  VORTEX_ASSIGN_OR_RETURN(Tensor t, file.tensor(name));
  if (t.ndim() != 2) {
    return invalid_argument(shown + ": tensor '" + name + "' is " + t.describe() + "; it must be 2-D [L, " +
                            std::to_string(cfg.text_dim) + "] or [L, " + std::to_string(cfg.hidden) + "]");
  }
  if (t.dim(1) != cfg.text_dim && t.dim(1) != cfg.hidden) {
    return invalid_argument(shown + ": tensor '" + name + "' has width " + std::to_string(t.dim(1)) + "; config " +
                            cfg.name + " expects text_dim " + std::to_string(cfg.text_dim) +
                            " (raw text-encoder states) or hidden " + std::to_string(cfg.hidden) +
                            " (already refined)");
  }
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) {
    return invalid_argument(shown + ": tensor '" + name + "' is " + t.describe() + "; only f32 and bf16 are accepted");
  }
  if (t.dim(0) < 1) return invalid_argument(shown + ": tensor '" + name + "' has no rows");
  if (!t.is_contiguous()) return internal_error(shown + ": non-contiguous mapping view");
  // A NaN/Inf here would surface only as a non-finite velocity after the first step.
  const int64_t n = t.numel(), cols = t.dim(1);
  int64_t bad = 0, first = -1;
  if (t.dtype() == DType::kF32) {
    const float* v = t.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i]) && bad++ == 0) first = i;
    }
  } else {
    const uint16_t* v = static_cast<const uint16_t*>(t.raw_data());  // bf16 bits: exponent all ones = inf/NaN
    for (int64_t i = 0; i < n; ++i) {
      if ((v[i] & 0x7F80) == 0x7F80 && bad++ == 0) first = i;
    }
  }
  if (bad > 0) {
    return invalid_argument(shown + ": tensor '" + name + "' has " + std::to_string(bad) +
                            " non-finite (NaN/Inf) value" + (bad > 1 ? "s" : "") + ", the first at row " +
                            std::to_string(first / cols) + ", column " + std::to_string(first % cols) +
                            "; regenerate the embeddings");
  }
  return t;
}

// Bytes the weights occupy once loaded: the config's spec (BF16 program) for synthetic weights, the
// file's tensors for a checkpoint (a quantized one stays small unless nvfp4-weight-only expands it).
Result<uint64_t> weights_bytes_as_loaded(const PipelineOptions& req, const ModelConfig& cfg) {
  const uint64_t spec = static_cast<uint64_t>(h3_total_bytes(cfg));
  if (req.checkpoint_path.empty() || req.precision == Precision::kNvfp4WeightOnly) return spec;
  VORTEX_ASSIGN_OR_RETURN(std::string file, resolve_checkpoint_path(req.checkpoint_path));  // a folder's index
  Result<SafetensorsSet> set = SafetensorsSet::open(file);
  if (!set.ok()) return with_checkpoint_advice(set.status(), req.checkpoint_path);
  uint64_t bytes = 0;
  for (const std::string& name : set->names()) bytes += set->entry(*set->find(name)).bytes();
  return bytes;
}

}  // namespace

Status check_memory_fits(const MemoryEstimate& need, std::optional<uint64_t> available, const std::string& what,
                         BackendKind backend, const ModelConfig& cfg, const RequestGeometry& geo) {
  if (!available || need.total() <= *available) return Status::Ok();
  return invalid_argument("not enough memory: " + cfg.name + " at " + std::to_string(geo.width) + "x" +
                          std::to_string(geo.height) + ", " + std::to_string(geo.frames) + " frames needs about " +
                          format_gb(need.total()) + " (" + need.largest(3) + ") but only " + format_gb(*available) +
                          " of " + what + " is available; use a smaller config or request" +
                          (backend == BackendKind::kCpu ? " (the h3 model needs a GPU: --backend cuda)" : ""));
}

namespace {

// The prompt's t2va presentation, after checking that the text encoder fits the transformer: its width is
// the transformer's text_dim and it has the hidden state the pipeline reads.
Result<std::vector<int32_t>> prompt_ids(const PipelineOptions& o, const ModelConfig& cfg, const std::string& prompt,
                                        const std::string& field) {
  VORTEX_ASSIGN_OR_RETURN(TextEncoderConfig te,
                          TextEncoderConfig::from_file((fs::path(o.text_encoder_dir) / "config.json").string()));
  if (te.hidden != cfg.text_dim) {
    return invalid_argument("the text encoder " + o.text_encoder_dir + " is " + std::to_string(te.hidden) +
                            " wide but the transformer (" + cfg.name + ") reads text_dim " +
                            std::to_string(cfg.text_dim) + " states: the parts belong to different models");
  }
  if (o.text_layer > te.num_layers) {
    return invalid_argument("--text-layer " + std::to_string(o.text_layer) +
                            ": the text encoder has hidden_states[0.." + std::to_string(te.num_layers) + "] (" +
                            std::to_string(te.num_layers) + " layers)");
  }
  VORTEX_ASSIGN_OR_RETURN(std::shared_ptr<const Tokenizer> tok, shared_tokenizer(o.tokenizer_path));
  return present_t2va_prompt(*tok, te, prompt, field);
}

// The fl2va presentation of `req`'s keyframes and prompt on its canvas (no pixel read yet).
Result<KeyframeText> keyframe_presentation_for(const PipelineOptions& o, const RunRequest& req) {
  VORTEX_ASSIGN_OR_RETURN(std::shared_ptr<const Tokenizer> tok, shared_tokenizer(o.tokenizer_path));
  VORTEX_ASSIGN_OR_RETURN(VisionProcessorConfig proc, keyframe_processor_config(o.text_encoder_dir));
  VORTEX_ASSIGN_OR_RETURN(ConfigJson root,
                          ConfigJson::read_file((fs::path(o.text_encoder_dir) / "config.json").string()));
  VORTEX_ASSIGN_OR_RETURN(VisionConfig vcfg, VisionConfig::from_json(root));
  return present_keyframes(*tok, proc, vcfg.merge, req.width, req.height,
                           static_cast<int>(req.keyframes.anchors().size()), req.prompt);
}

}  // namespace

Result<ModelConfig> resolve_model_config(const PipelineOptions& o) {
  ModelConfig cfg;
  if (!o.checkpoint_path.empty()) {
    std::error_code ec;
    if (!fs::exists(o.checkpoint_path, ec)) return not_found("--checkpoint " + o.checkpoint_path + " does not exist");
    Result<ModelConfig> from_checkpoint = config_for_checkpoint(o.checkpoint_path);
    if (!from_checkpoint.ok()) return with_checkpoint_advice(from_checkpoint.status(), o.checkpoint_path);
    cfg = *from_checkpoint;
  } else {
    VORTEX_ASSIGN_OR_RETURN(cfg, ModelConfig::by_name(o.config_name));
  }
  VORTEX_RETURN_IF_ERROR(cfg.validate());
  return cfg;
}

const char* text_source_name(TextSource s) {
  switch (s) {
    case TextSource::kEmbeddings:
      return "embeddings";
    case TextSource::kPrompt:
      return "prompt";
    case TextSource::kSynthetic:
      return "synthetic";
    case TextSource::kRank0:
      return "rank 0";
  }
  return "synthetic";
}

Result<Planner> Planner::create(const PipelineOptions& options) {
  VORTEX_RETURN_IF_ERROR(validate_pipeline_options(options));
  Planner p;
  p.options_ = options;
  VORTEX_ASSIGN_OR_RETURN(p.cfg_, resolve_model_config(options));
  VORTEX_ASSIGN_OR_RETURN(p.weights_bytes_, weights_bytes_as_loaded(options, p.cfg_));
  return p;
}

namespace {

// The text of `req`: a file's states, a prompt's tokens (encoded later by the pipeline's text encoder), a
// prompt's synthetic stand-in, or synthetic rows.
Status plan_text(const PipelineOptions& options, const ModelConfig& cfg, const RunRequest& req, FieldStyle style,
                 RunPlan& plan) {
  if (!req.text_embeddings_path.empty()) {
    const std::string shown = style == FieldStyle::kFlag ? "--text-embeddings " + req.text_embeddings_path
                                                         : std::string("text_embeddings (the uploaded file)");
    VORTEX_ASSIGN_OR_RETURN(plan.text, load_text_embeddings(req.text_embeddings_path, shown, cfg));
    plan.text_source = TextSource::kEmbeddings;
  } else if (!req.prompt.empty() && !options.text_encoder_dir.empty()) {
    // Tokenized now (cheap) so the geometry and every prompt error come before any weight is loaded;
    // encoded by Pipeline::encode_prompt.
    VORTEX_ASSIGN_OR_RETURN(plan.text_ids, prompt_ids(options, cfg, req.prompt, field_name(Field::kPrompt, style)));
    plan.text_source = TextSource::kPrompt;
    if (req.keyframes.any()) {  // fl2va: per keyframe a label and a vision block, then the prompt
      VORTEX_ASSIGN_OR_RETURN(plan.keyframe_text, keyframe_presentation_for(options, req));
      plan.text_ids = plan.keyframe_text.ids;
    }
    if (!plan.references.refs.empty()) {  // ref2va: per reference its labels and vision blocks, then the prompt
      VORTEX_ASSIGN_OR_RETURN(std::shared_ptr<const Tokenizer> tok, shared_tokenizer(options.tokenizer_path));
      VORTEX_ASSIGN_OR_RETURN(VisionProcessorConfig proc, keyframe_processor_config(options.text_encoder_dir));
      std::vector<Ref2vaPresentationReference> refs;
      for (const PlannedReference& r : plan.references.refs) refs.push_back(r.presentation);
      VORTEX_ASSIGN_OR_RETURN(plan.reference_text, build_ref2va_presentation(*tok, refs, proc.merge, req.prompt));
      plan.text_ids = plan.reference_text.ids;
    }
  } else if (!req.prompt.empty()) {
    plan.text = synthetic_prompt_states(cfg, req.prompt);
    plan.text_source = TextSource::kPrompt;
  } else {
    plan.text = synthetic_text_states(cfg, req.synthetic_text_rows, req.seed);
    plan.text_source = TextSource::kSynthetic;
  }
  return Status::Ok();
}

// The note a request's frame count earns: --seconds converted, or frames snapped up to 17n + 5.
void note_frames(const RunRequest& req, const RequestGeometry& geo, ProgressSink& progress) {
  if (req.seconds != 0.0) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", req.seconds);
    progress.note(std::string(secs) + " s at 24 fps -> " + std::to_string(geo.frames) +
                  " frames (the next 17n + 5 at or above " +
                  std::to_string(static_cast<int>(std::ceil(req.seconds * 24.0))) + ")");
  } else if (geo.frames != req.frames) {
    progress.note("frames " + std::to_string(req.frames) + " snapped up to " + std::to_string(geo.frames) +
                  ": the video VAE decodes 17n + 5 frames (as diffusers' align_num_frames)");
  }
}

// The references' plan (engine/references.h): every reference checked and its geometry read from its media, with
// the vision processors' configs when the prompt runs through the text encoder. Errors belong to the references field.
Result<ReferencePlan> plan_request_references(const RunRequest& req, const PipelineOptions& options, int frames,
                                              FieldStyle style) {
  const std::string field = field_name(Field::kReferences, style);
  VORTEX_ASSIGN_OR_RETURN(const std::vector<ReferenceProbe> probes,
                          check_references(req.references, req.keyframes.any(), options.checkpoint_path,
                                           {options.encoder_vae_dir(), options.reference_audio_encoder_dir()}, field));
  VORTEX_ASSIGN_OR_RETURN(const ReferenceSettings settings, reference_settings(options.model_dir));
  ReferenceProcessors processors;
  const bool vision = !req.prompt.empty() && !options.text_encoder_dir.empty() && req.text_embeddings_path.empty();
  if (vision) {
    Result<VisionProcessorConfig> image = keyframe_processor_config(options.text_encoder_dir);
    if (!image.ok()) return image.status().with_context(field);
    processors.image = *image;
    bool videos = false;
    for (const ReferenceProbe& p : probes) videos = videos || p.kind == ReferenceKind::kVideo;
    if (videos) {
      Result<VisionProcessorConfig> video = video_processor_config(options.text_encoder_dir);
      if (!video.ok()) return video.status().with_context(field);
      processors.video = *video;
    }
  }
  return plan_references(probes, frames, settings, options.reference_audio_encoder_dir(),
                         vision ? &processors : nullptr, field);
}

}  // namespace

Result<RunPlan> Planner::plan(const RunRequest& request, ProgressSink& progress, FieldStyle style,
                              Field* failed_field) const {
  auto at = [failed_field](Field field, Status s) -> Status {
    if (failed_field != nullptr && !s.ok()) *failed_field = field;
    return s;
  };
  if (std::optional<FieldError> e = check_run_request(request, options_, style)) return at(e->field, e->status);
  RunRequest req = request;  // with the canvas resolved
  if (req.canvas_from_keyframe && req.keyframes.any()) {
    const Field field = req.keyframes.first.empty() ? Field::kLastFrame : Field::kFirstFrame;
    Result<CanvasSize> canvas = keyframe_canvas(req.keyframes, field_name(field, style));
    if (!canvas.ok()) return at(field, canvas.status());
    req.width = canvas->width;
    req.height = canvas->height;
    req.canvas_from_keyframe = false;
    progress.note("canvas " + std::to_string(req.width) + "x" + std::to_string(req.height) +
                  " from the first keyframe's aspect ratio (no width and height given)");
  }
  const PipelineOptions& options = options_;
  const ModelConfig& cfg = cfg_;
  RunPlan plan;
  plan.request = req;
  plan.cfg = cfg;
  int frames = req.frames;
  if (req.seconds != 0.0) {
    Result<int> f = frames_for_seconds(req.seconds);
    if (!f.ok()) return at(Field::kSeconds, f.status());
    frames = *f;
  }
  if (!req.references.empty()) {  // ref2va: each reference's geometry (its media decoded, not yet encoded)
    Result<ReferencePlan> refs = plan_request_references(req, options, snap_frames_up(frames), style);
    if (!refs.ok()) return at(Field::kReferences, refs.status());
    plan.references = std::move(*refs);
  }
  if (Status s = plan_text(options, cfg, req, style, plan); !s.ok())
    return at(req.text_embeddings_path.empty() ? Field::kPrompt : Field::kTextEmbeddings, s);
  const int64_t text_rows = plan.text.defined() ? plan.text.dim(0) : static_cast<int64_t>(plan.text_ids.size());
  // check_run_request has checked frames >= 1 and the sides' range: what fails here is a side that is no
  // multiple of 32 or an area beyond the model's.
  Result<RequestGeometry> geo = make_geometry(cfg, req.width, req.height, frames, text_rows);
  if (!geo.ok()) return at(req.width % 32 != 0 || req.height % 32 == 0 ? Field::kWidth : Field::kHeight, geo.status());
  plan.geo = *geo;
  plan.geo.keyframes = req.keyframes.anchors();
  for (const PlannedReference& r : plan.references.refs) plan.geo.references.push_back(r.block);
  note_frames(req, plan.geo, progress);
  if (!plan.geo.references.empty()) {
    int64_t visual = 0, audio = 0;
    for (const ReferenceBlock& b : plan.geo.references) visual += b.video_rows(), audio += b.audio_rows();
    progress.note(std::to_string(plan.geo.references.size()) + " reference(s): " + std::to_string(visual) +
                  " visual and " + std::to_string(audio) + " audio conditioning rows; " +
                  std::to_string(plan.geo.total_rows()) + " packed rows in all");
  }
  const RequestGeometry& g = plan.geo;
  if (g.total_rows() > kMaxPackedRows) {
    return at(Field::kFrames,
              invalid_argument("request too large: " + std::to_string(g.total_rows()) + " packed rows (" +
                               std::to_string(g.width) + "x" + std::to_string(g.height) + ", " +
                               std::to_string(g.frames) + " frames); the limit is " + std::to_string(kMaxPackedRows) +
                               ", reduce the size or the frame count"));
  }
  plan.workers = options.threads > 0 ? options.threads : max_cpu_threads() / kMaxThreadsPerCore;
  MemoryEstimateOptions mem_opt;
  mem_opt.cpu_backend = options.backend == BackendKind::kCpu;
  mem_opt.threads = plan.workers;
  mem_opt.weights_bytes = weights_bytes_;
  if (options.adaln_weights_on_host()) {  // the blocks' AdaLN projections live in host memory
    const uint64_t adaln = static_cast<uint64_t>(cfg.num_layers) * 18 * cfg.hidden * cfg.time_embed_dim * 2;
    mem_opt.weights_bytes -= std::min(adaln, mem_opt.weights_bytes);
  }
  plan.memory = estimate_memory(cfg, g, mem_opt);
  if (!mem_opt.cpu_backend) {  // precompute_adaln's tables and projection upload buffer (docs/memory.md)
    plan.memory.items.push_back({"AdaLN tables", adaln_request_bytes(cfg, options, req.steps)});
    std::stable_sort(plan.memory.items.begin(), plan.memory.items.end(),
                     [](const MemoryEstimate::Item& a, const MemoryEstimate::Item& b) { return a.bytes > b.bytes; });
  }
  if (weights_resident_) {  // already allocated, so already out of what is free
    std::erase_if(plan.memory.items, [](const MemoryEstimate::Item& i) { return i.what == "weights"; });
  }
  if (options.backend == BackendKind::kCpu) {
    VORTEX_RETURN_IF_ERROR(at(Field::kMemory, check_memory_fits(plan.memory, available_host_memory(), "host memory",
                                                                options.backend, cfg, g)));
    const double cpu_seconds = estimate_cpu_seconds(cfg, g, req.steps, plan.workers);
    if (cpu_seconds > kSlowCpuRunSeconds) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "this CPU run is estimated at %.1f hours (%.3g FLOP per step x %d steps on %d threads at %.2f "
                    "GFLOP/s each); --backend cuda or a smaller request is faster",
                    cpu_seconds / 3600.0, forward_flops(cfg, g), req.steps, plan.workers, kCpuFlopsPerThread / 1e9);
      progress.warning(line);
    }
  }
  VORTEX_ASSIGN_OR_RETURN(
      plan.layout, pack_request(cfg, g, g.references.empty() ? plan.keyframe_text.tags : plan.reference_text.tags));
  plan.spec.kind = req.sampler.value_or(default_sampler_for_schedule(req.schedule));
  plan.spec.mode = req.schedule;
  plan.spec.steps = req.steps;
  plan.spec.video_shift = req.video_shift > 0.0 ? req.video_shift : cfg.video_shift;
  plan.spec.audio_shift = req.audio_shift > 0.0 ? req.audio_shift : cfg.audio_shift;
  VORTEX_ASSIGN_OR_RETURN(plan.schedule, make_av_schedule(plan.spec));
  VORTEX_RETURN_IF_ERROR(at(Field::kFrames, check_decodable(plan, style)));
  return plan;
}

Status Planner::check_decodable(const RunPlan& plan, FieldStyle style) const {
  if (video_vae_ == nullptr || !plan.request.media.value_or(true)) return Status::Ok();
  if (video_vae_->frames_for(plan.geo.latent_frames) > 0) return Status::Ok();
  // The fewest pixel frames on the 17n + 5 grid (src/model/packing.h) whose latents the VAE decodes.
  const int pt = video_vae_->config().patch_t;
  int min_frames = 5;
  while (min_frames < 17 * 64 && video_vae_->frames_for((min_frames - 1) / pt + 1) <= 0) min_frames += 17;
  return invalid_argument(
      std::to_string(plan.geo.frames) + " frames (" + std::to_string(plan.geo.latent_frames) +
      " latent) are fewer than the video VAE decodes: ask for at least " + std::to_string(min_frames) + " frames, or " +
      (style == FieldStyle::kFlag ? "leave out --vae/--audio-vae" : "\"media\": false") + " for latents only");
}

SamplerKind default_sampler_for_schedule(AvScheduleMode mode) {
  return mode == AvScheduleMode::kDiffusers ? SamplerKind::kEuler : SamplerKind::kResMultistep;
}

uint64_t synthetic_text_seed(uint64_t seed) { return seed ^ 0x7465787400000000ull; }

Tensor synthetic_text_states(const ModelConfig& cfg, int rows, uint64_t seed) {
  Tensor text = Tensor::empty({rows, cfg.text_dim}, DType::kF32);  // [L, text_dim] f32
  gaussian_noise(synthetic_text_seed(seed), 0, text.data<float>(), static_cast<size_t>(text.numel()));
  return text;
}

uint64_t prompt_hash(std::string_view prompt) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : prompt) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

Tensor synthetic_prompt_states(const ModelConfig& cfg, std::string_view prompt) {
  const int rows = static_cast<int>(std::clamp<size_t>((prompt.size() + 3) / 4, 1, kMaxPromptRows));
  return synthetic_text_states(cfg, rows, prompt_hash(prompt));
}

Status with_checkpoint_advice(const Status& status, const std::string& checkpoint_path) {
  // The loader's advice names --config, but with --checkpoint the config comes from the checkpoint.
  static const std::string kConfigAdvice = ". Check --config (or the config.json next to the checkpoint)";
  std::string m = status.message();
  const size_t at = m.find(kConfigAdvice);
  if (at == std::string::npos) return status;
  std::error_code ec;
  const fs::path abs = fs::absolute(checkpoint_path, ec);
  const fs::path config_json = (fs::is_directory(abs, ec) ? abs : abs.parent_path()) / "config.json";
  const std::string advice =
      fs::exists(config_json, ec)
          ? ". Check the checkpoint's config.json (" + config_json.string() + "): it does not describe these weights"
          : ". The config was inferred from the checkpoint's tensor shapes (no config.json beside it): put the "
            "model's config.json next to the checkpoint";
  m.replace(at, kConfigAdvice.size(), advice);
  return Status(status.code(), m);
}

}  // namespace vortex
