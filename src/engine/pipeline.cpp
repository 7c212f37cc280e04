// Pipeline (see pipeline.h): the request contract (validation, plan, memory estimate) and the resident
// model's run: pack -> text -> noise -> sample -> outputs. Everything that can fail cheaply runs in
// check_run_request / plan_run, before weights are touched; run() writes into a directory its caller
// publishes, so a failed or cancelled run never leaves half a result.
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

#include "core/rng.h"
#include "core/strings.h"
#include "engine/conditioning.h"
#include "engine/decode.h"
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
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kMaxSteps = 1000;
constexpr int kMaxSyntheticTextRows = 4096;
// Packed rows per request: 50x the canonical 37,810 (the seeds' long shape is ~74K). Beyond this a
// request is a typo (e.g. --frames 100000) that would only end in an out-of-memory kill.
constexpr int64_t kMaxPackedRows = 2'000'000;
// Pixels per side: 6x the canonical 1344. Larger is a typo (--width 1048576) that would otherwise pass
// the row limit for a small config and then spend minutes before failing.
constexpr int kMaxSidePixels = 8192;
// A CPU run estimated above this many seconds gets a warning with the estimate.
constexpr double kSlowCpuRunSeconds = 3600.0;
// Weight-loading progress reports at most this often.
constexpr double kLoadReportSeconds = 0.25;

// "blocks.{i}.adaln_proj.linear.weight": a main block's AdaLN projection (the one placed by adaln_weights).
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

// A field's name in messages.
std::string fname(FieldStyle style, const char* flag, const char* json) {
  return style == FieldStyle::kFlag ? std::string("--") + flag : std::string(json);
}

FieldError field_error(FieldStyle style, const char* json, Status s) {
  (void)style;
  return FieldError{json, std::move(s)};
}

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

Tensor latents_tensor(const std::vector<float>& values, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

// Bytes the weights occupy once loaded: the config's spec (BF16 program) for synthetic weights, the
// file's tensors for a checkpoint (a quantized one stays small unless nvfp4-weight-only expands it).
Result<uint64_t> weights_bytes_as_loaded(const PipelineOptions& req, const ModelConfig& cfg) {
  const uint64_t spec = static_cast<uint64_t>(h3_total_bytes(cfg));
  if (req.checkpoint_path.empty() || req.precision == "nvfp4-weight-only") return spec;
  VORTEX_ASSIGN_OR_RETURN(std::string file, resolve_checkpoint_path(req.checkpoint_path));  // a folder's index
  Result<SafetensorsSet> set = SafetensorsSet::open(file);
  if (!set.ok()) return with_checkpoint_advice(set.status(), req.checkpoint_path);
  uint64_t bytes = 0;
  for (const std::string& name : set->names()) bytes += set->entry(*set->find(name)).bytes();
  return bytes;
}

Status check_fits(const MemoryEstimate& need, std::optional<uint64_t> available, const std::string& what,
                  const std::string& backend, const ModelConfig& cfg, const RequestGeometry& geo) {
  if (!available || need.total() <= *available) return Status::Ok();
  return invalid_argument("not enough memory: " + cfg.name + " at " + std::to_string(geo.width) + "x" +
                          std::to_string(geo.height) + ", " + std::to_string(geo.frames) + " frames needs about " +
                          format_gb(need.total()) + " (" + need.largest(3) + ") but only " + format_gb(*available) +
                          " of " + what + " is available; use a smaller config or request" +
                          (backend == "cpu" ? " (the h3 model needs a GPU: --backend cuda)" : ""));
}

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

Status validate_pipeline_options(const PipelineOptions& o) {
  if (o.checkpoint_path.empty() && !o.synthetic_weights) {
    return invalid_argument(
        "no weights: pass --checkpoint FILE, or --synthetic for deterministic synthetic weights "
        "of --config " +
        o.config_name);
  }
  if (!o.checkpoint_path.empty() && o.synthetic_weights) {
    return invalid_argument("--checkpoint and --synthetic exclude each other: synthetic weights come from --config");
  }
  if (o.threads < 0)
    return invalid_argument("--threads must be >= 0 (0 = all cores), got " + std::to_string(o.threads));
  if (o.threads > max_cpu_threads()) {
    return invalid_argument("--threads " + std::to_string(o.threads) + " is more than " +
                            std::to_string(kMaxThreadsPerCore) + "x this machine's " +
                            std::to_string(max_cpu_threads() / kMaxThreadsPerCore) + " cores; use at most " +
                            std::to_string(max_cpu_threads()) + " (0 = all cores)");
  }
  if (o.backend != "cpu" && o.backend != "cuda") {
    return invalid_argument("--backend must be cpu or cuda, got '" + o.backend + "'");
  }
  if (!is_precision_name(o.precision)) {
    return invalid_argument("--precision must be one of " + std::string(precision_names_help()) + ", got '" +
                            o.precision + "'");
  }
  if (!o.text_encoder_dir.empty() && (o.tokenizer_path.empty() || o.text_layer < 0)) {
    return invalid_argument("a text encoder needs its tokenizer.json and the hidden-state index (--text-layer K)");
  }
  if (o.backend == "cpu" && o.precision != "bf16" && o.precision != "nvfp4-weight-only") {
    return unsupported(
        "the cpu backend runs BF16 GEMMs only: use --precision bf16 (or nvfp4-weight-only) --attention sdpa "
        "(fp8/nvfp4/sage2 are approximate CUDA modes, --backend cuda)");
  }
  // Decoders: both folders, or synthetic ones; the folders themselves are read (and fully checked) by
  // load_decoders, before the transformer's weights.
  if (!o.synthetic_vae.empty()) {
    if (o.synthetic_vae != "tiny" && o.synthetic_vae != "full")
      return invalid_argument("--synthetic-vae must be 'tiny' or 'full', got '" + o.synthetic_vae + "'");
    if (!o.vae_dir.empty() || !o.audio_vae_dir.empty())
      return invalid_argument("--synthetic-vae replaces --vae / --audio-vae; pass one or the other");
  } else if (o.vae_dir.empty() != o.audio_vae_dir.empty()) {
    return invalid_argument(std::string("pass both --vae DIR and --audio-vae DIR (an MP4 carries the video and its "
                                        "sound); missing ") +
                            (o.vae_dir.empty() ? "--vae" : "--audio-vae"));
  }
  for (const auto& [flag, dir] :
       {std::pair<const char*, const std::string&>{"--vae", o.vae_dir}, {"--audio-vae", o.audio_vae_dir}}) {
    std::error_code ec;
    if (!dir.empty() && !fs::is_directory(dir, ec))
      return not_found(std::string(flag) + " " + dir +
                       " is not a directory (pass the VAE folder: config.json + weights)");
  }
  if (!std::isfinite(o.max_vram_gb) || o.max_vram_gb < 0.0)
    return invalid_argument("--max-vram must be a positive number of GB (10^9 bytes)");
  if (o.max_vram_gb > 0.0 && o.backend == "cpu")
    return invalid_argument("--max-vram budgets GPU memory: it needs --backend cuda");
  if (o.adaln_weights != "auto" && o.adaln_weights != "device" && o.adaln_weights != "host")
    return invalid_argument("--adaln-weights must be auto, device or host, got '" + o.adaln_weights + "'");
  if (o.mp4_crf < 0 || o.mp4_crf > 51)
    return invalid_argument("--crf must be in [0, 51], got " + std::to_string(o.mp4_crf));
  return validate_lora_dir_options(o);
}

Status validate_lora_dir_options(const PipelineOptions& o) {
  if (!o.lora_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(o.lora_dir, ec))
      return not_found("--lora-dir " + o.lora_dir + " is not a directory (the folder requests name adapters in)");
    if (!o.loras.empty())
      return invalid_argument("--lora-dir (adapters per request) excludes load-time --lora adapters");
    if (o.precision != "bf16")
      return unsupported("--lora-dir applies adapters as run-time branches, which need --precision bf16 (got " +
                         o.precision + ")");
  }
  return Status::Ok();
}

std::optional<FieldError> check_run_request(const RunRequest& r, const PipelineOptions& o, FieldStyle style) {
  auto bad = [&](const char* json, Status s) {
    return std::optional<FieldError>(field_error(style, json, std::move(s)));
  };
  if (r.steps < 1 || r.steps > kMaxSteps) {
    return bad("steps", invalid_argument(fname(style, "steps", "steps") + " must be in [1, " +
                                         std::to_string(kMaxSteps) + "], got " + std::to_string(r.steps)));
  }
  const std::string wh = style == FieldStyle::kFlag ? "--width/--height" : "width/height";
  if (r.width <= 0 || r.height <= 0) {
    return bad(r.width <= 0 ? "width" : "height",
               invalid_argument(wh + " must be positive multiples of 32, got " + std::to_string(r.width) + "x" +
                                std::to_string(r.height)));
  }
  if (r.width > kMaxSidePixels || r.height > kMaxSidePixels) {
    return bad(r.width > kMaxSidePixels ? "width" : "height",
               invalid_argument(wh + " must be at most " + std::to_string(kMaxSidePixels) + " pixels, got " +
                                std::to_string(r.width) + "x" + std::to_string(r.height)));
  }
  if (r.frames <= 0) {
    return bad("frames", invalid_argument(fname(style, "frames", "frames") + " must be positive, got " +
                                          std::to_string(r.frames)));
  }
  if (r.text_embeddings_path.empty() && r.prompt.empty() &&
      (r.synthetic_text_rows < 1 || r.synthetic_text_rows > kMaxSyntheticTextRows)) {
    return bad("synthetic_text_rows", invalid_argument(fname(style, "synthetic-text", "synthetic_text_rows") +
                                                       " must be in [1, " + std::to_string(kMaxSyntheticTextRows) +
                                                       "] rows, got " + std::to_string(r.synthetic_text_rows)));
  }
  if (!r.prompt.empty() && !r.text_embeddings_path.empty()) {
    return bad("prompt", invalid_argument("prompt and text_embeddings exclude each other: give one text source"));
  }
  if (!r.prompt.empty() && !o.synthetic_weights && o.text_encoder_dir.empty()) {
    // Real weights need real conditioning, and no text encoder is loaded.
    return bad("prompt",
               unsupported("a prompt needs the text encoder, which this pipeline has not loaded (give the model "
                           "folder: --model DIR); upload text_embeddings (a safetensors file with one "
                           "[L, text_dim] tensor) instead"));
  }
  if (!r.precision.empty() && r.precision != o.precision) {
    return bad("precision", invalid_argument(fname(style, "precision", "precision") + " '" + r.precision +
                                             "' is not the loaded precision '" + o.precision +
                                             "': precision converts the weights at load, so it is chosen at startup"));
  }
  if (!r.attention.empty() && !parse_attention(r.attention).ok()) {
    return bad("attention", invalid_argument(fname(style, "attention", "attention") +
                                             " must be sdpa, sage2 or bf16-owned, got '" + r.attention + "'"));
  }
  if (o.backend == "cpu" && (r.attention == "sage2" || r.attention == "bf16-owned")) {
    return bad("attention",
               unsupported(
                   "the cpu backend runs BF16 GEMMs only: use --precision bf16 (or nvfp4-weight-only) --attention "
                   "sdpa (fp8/nvfp4/sage2 are approximate CUDA modes and bf16-owned an sm_90 kernel, --backend cuda)"));
  }
  if (r.media.value_or(false) && !o.wants_decoders()) {
    return bad("media",
               invalid_argument(style == FieldStyle::kFlag
                                    ? std::string("decoded media needs the decoders: pass --vae DIR --audio-vae DIR")
                                    : std::string("media needs the decoders, which this server has not loaded "
                                                  "(start it with --vae DIR --audio-vae DIR)")));
  }
  if (!r.frames_dir.empty()) {
    if (!o.wants_decoders() || !r.media.value_or(true))
      return bad("frames_dir", invalid_argument("--frames-dir needs the decoders (--vae DIR --audio-vae DIR)"));
    if (Status s = check_frames_dir(r.frames_dir, r.frames_overwrite); !s.ok()) return bad("frames_dir", s);
  }
  if (r.fail_alloc_after < -1) {
    return bad("fail_alloc_after", invalid_argument("fail_alloc_after must be >= 0 (or -1: off), got " +
                                                    std::to_string(r.fail_alloc_after)));
  }
  if (!r.loras.empty()) {
    if (o.lora_dir.empty())
      return bad("lora", unsupported("this server takes no per-request adapters: start it with --lora-dir DIR"));
    for (const LoraSpec& l : r.loras) {
      std::error_code ec;
      if (!fs::is_regular_file(l.path, ec))
        return bad("lora", not_found("no adapter " + fs::path(l.path).filename().string() + " in --lora-dir"));
      if (l.scale && !std::isfinite(*l.scale))
        return bad("lora", invalid_argument("an adapter's scale must be finite"));
    }
  }
  if (r.keyframes.any()) {
    const std::string first = fname(style, "first-frame", "first_frame"),
                      last = fname(style, "last-frame", "last_frame");
    if (Status s = check_keyframes(r.keyframes, o.checkpoint_path, o.encoder_vae_dir(), first, last); !s.ok())
      return bad(r.keyframes.first.empty() ? "last_frame" : "first_frame", s);
  }
  return std::nullopt;
}

Result<ModelConfig> resolve_model_config(const PipelineOptions& o) {
  ModelConfig cfg;
  if (!o.checkpoint_path.empty()) {
    std::error_code ec;
    if (!fs::exists(o.checkpoint_path, ec)) return not_found("--checkpoint " + o.checkpoint_path + " does not exist");
    VORTEX_RETURN_IF_ERROR(refuse_reference_transformer(o.checkpoint_path));
    Result<ModelConfig> from_checkpoint = config_for_checkpoint(o.checkpoint_path);
    if (!from_checkpoint.ok()) return with_checkpoint_advice(from_checkpoint.status(), o.checkpoint_path);
    cfg = *from_checkpoint;
  } else {
    VORTEX_ASSIGN_OR_RETURN(cfg, ModelConfig::by_name(o.config_name));
  }
  VORTEX_RETURN_IF_ERROR(cfg.validate());
  return cfg;
}

Result<RunPlan> plan_run(const ModelConfig& cfg, const PipelineOptions& options, const RunRequest& req,
                         ProgressSink& progress, bool weights_resident, FieldStyle style, std::string* failed_field) {
  auto at = [failed_field](const char* field, Status s) -> Status {
    if (failed_field != nullptr) *failed_field = field;
    return s;
  };
  RunPlan plan;
  plan.request = req;
  plan.cfg = cfg;
  Result<AvScheduleMode> mode = av_schedule_mode_from_name(req.schedule);
  if (!mode.ok()) return at("schedule", mode.status());
  plan.schedule_mode = *mode;
  const std::string sampler_name = req.sampler.empty() ? default_sampler_for_schedule(plan.schedule_mode) : req.sampler;
  Result<SamplerKind> kind = sampler_kind_from_name(sampler_name);
  if (!kind.ok()) return at("sampler", kind.status());
  plan.sampler_kind = *kind;
  int frames = req.frames;
  if (req.seconds != 0.0) {
    Result<int> f = frames_for_seconds(req.seconds);
    if (!f.ok()) return at("seconds", f.status());
    frames = *f;
  }

  if (!req.text_embeddings_path.empty()) {
    const std::string shown = style == FieldStyle::kFlag ? "--text-embeddings " + req.text_embeddings_path
                                                         : std::string("text_embeddings (the uploaded file)");
    Result<Tensor> t = load_text_embeddings(req.text_embeddings_path, shown, cfg);
    if (!t.ok()) return at("text_embeddings", t.status());
    plan.text = std::move(*t);
    plan.text_source = "embeddings";
  } else if (!req.prompt.empty() && !options.text_encoder_dir.empty()) {
    // Tokenized now (cheap) so the geometry and every prompt error come before any weight is loaded;
    // encoded by Pipeline::encode_prompt.
    Result<std::vector<int32_t>> ids = prompt_ids(options, cfg, req.prompt, fname(style, "prompt", "prompt"));
    if (!ids.ok()) return at("prompt", ids.status());
    plan.text_ids = std::move(*ids);
    plan.text_source = "prompt";
    if (req.keyframes.any()) {  // fl2va: per keyframe a label and a vision block, then the prompt
      Result<KeyframeText> kt = keyframe_presentation_for(options, req);
      if (!kt.ok()) return at(req.keyframes.first.empty() ? "last_frame" : "first_frame", kt.status());
      plan.keyframe_text = std::move(*kt);
      plan.text_ids = plan.keyframe_text.ids;
    }
  } else if (!req.prompt.empty()) {
    plan.text = synthetic_prompt_states(cfg, req.prompt);
    plan.text_source = "prompt";
  } else {
    plan.text = synthetic_text_states(cfg, req.synthetic_text_rows, req.seed);
    plan.text_source = "synthetic";
  }
  const int64_t text_rows = plan.text.defined() ? plan.text.dim(0) : static_cast<int64_t>(plan.text_ids.size());
  Result<RequestGeometry> geo = make_geometry(cfg, req.width, req.height, frames, text_rows);
  if (!geo.ok()) return at(geo.status().message().rfind("frames", 0) == 0 ? "frames" : "width", geo.status());
  plan.geo = *geo;
  plan.geo.keyframes = req.keyframes.anchors();
  const std::string frames_name = fname(style, "frames", "frames");
  if (req.seconds != 0.0) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", req.seconds);
    progress.note(std::string(secs) + " s at 24 fps -> " + std::to_string(plan.geo.frames) +
                  " frames (the next 17n + 5 at or above " +
                  std::to_string(static_cast<int>(std::ceil(req.seconds * 24.0))) + ")");
  } else if (plan.geo.frames != req.frames) {
    progress.note("frames " + std::to_string(req.frames) + " snapped up to " + std::to_string(plan.geo.frames) +
                  ": the video VAE decodes 17n + 5 frames (as diffusers' align_num_frames)");
  }
  const RequestGeometry& g = plan.geo;
  if (g.total_rows() > kMaxPackedRows) {
    return at("frames", invalid_argument("request too large: " + std::to_string(g.total_rows()) + " packed rows (" +
                                         std::to_string(g.width) + "x" + std::to_string(g.height) + ", " +
                                         std::to_string(g.frames) + " frames); the limit is " +
                                         std::to_string(kMaxPackedRows) + ", reduce the size or the frame count"));
  }
  plan.workers = options.threads > 0 ? options.threads : max_cpu_threads() / kMaxThreadsPerCore;
  MemoryEstimateOptions mem_opt;
  mem_opt.cpu_backend = options.backend == "cpu";
  mem_opt.threads = plan.workers;
  VORTEX_ASSIGN_OR_RETURN(mem_opt.weights_bytes, weights_bytes_as_loaded(options, cfg));
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
  if (weights_resident) {  // already allocated, so already out of what is free
    std::erase_if(plan.memory.items, [](const MemoryEstimate::Item& i) { return i.what == "weights"; });
  }
  if (options.backend == "cpu") {
    VORTEX_RETURN_IF_ERROR(
        at("", check_fits(plan.memory, available_host_memory(), "host memory", options.backend, cfg, g)));
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
  VORTEX_ASSIGN_OR_RETURN(plan.layout, pack_request(cfg, g, plan.keyframe_text.tags));
  plan.spec.kind = plan.sampler_kind;
  plan.spec.mode = plan.schedule_mode;
  plan.spec.steps = req.steps;
  plan.spec.video_shift = req.video_shift > 0.0 ? req.video_shift : cfg.video_shift;
  plan.spec.audio_shift = req.audio_shift > 0.0 ? req.audio_shift : cfg.audio_shift;
  VORTEX_ASSIGN_OR_RETURN(plan.schedule, make_av_schedule(plan.spec));
  return plan;
}

Result<ExecOptions> resolve_exec_options(const ExecOptions& policy, const std::string& precision,
                                         const std::string& switches) {
  ExecOptions opts = policy;
  VORTEX_ASSIGN_OR_RETURN(opts.precision, parse_precision(precision));
  VORTEX_RETURN_IF_ERROR(apply_switches(switches, opts));
  return opts;
}

Result<std::unique_ptr<Pipeline>> Pipeline::open(const PipelineOptions& options) {
  VORTEX_RETURN_IF_ERROR(validate_pipeline_options(options));
  std::unique_ptr<Pipeline> p(new Pipeline());
  p->options_ = options;
  VORTEX_ASSIGN_OR_RETURN(p->cfg_, resolve_model_config(options));
  Result<std::unique_ptr<Backend>> made = make_backend(options.backend, options.threads, options.device);
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
  if (!options_.synthetic_vae.empty()) {
    progress.stage("synthesizing decoders");
    const bool tiny = options_.synthetic_vae == "tiny";
    VORTEX_ASSIGN_OR_RETURN(video, VideoVae::synthetic(tiny ? VideoVaeConfig::tiny() : VideoVaeConfig::full(),
                                                       *backend_, options_.synthetic_vae_seed));
    VORTEX_ASSIGN_OR_RETURN(audio, AudioVae::synthetic(tiny ? AudioVaeConfig::tiny() : AudioVaeConfig::full(),
                                                       *backend_, options_.synthetic_vae_seed));
    decoders_source_ = "synthetic-" + options_.synthetic_vae;
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
    return Status(s.code(), "the " + options_.backend + " backend cannot run the VAE decoders: " + s.message());
  VORTEX_RETURN_IF_ERROR(backend_->synchronize());
  video_vae_ = std::move(video);
  audio_vae_ = std::move(audio);
  decoders_load_seconds_ = seconds_since(t_load);
  const size_t device_after = backend_->memory_in_use();
  decoders_device_bytes_ = device_after > device_before ? device_after - device_before : 0;
  return Status::Ok();
}

Result<ResidencyPlan> Pipeline::residency_plan(std::optional<uint64_t> reserve) const {
  VORTEX_ASSIGN_OR_RETURN(const uint64_t weights_bytes, weights_bytes_as_loaded(options_, cfg_));
  std::optional<uint64_t> budget;
  if (options_.backend != "cpu") {
    if (options_.max_vram_gb > 0.0) {
      budget = static_cast<uint64_t>(options_.max_vram_gb * 1e9);
    } else if (std::optional<size_t> free = backend_->free_device_memory()) {
      budget = *free + backend_->memory_in_use();  // what is free plus what this pipeline holds already
    }
  }
  return plan_residency(cfg_, options_, weights_bytes, decoders_device_bytes_, budget, options_.max_vram_gb > 0.0,
                        reserve          ? *reserve
                        : reserve_bytes_ ? *reserve_bytes_
                                         : canonical_activation_bytes(cfg_, options_));
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
  if (options_.backend != "cpu") {  // on the cpu backend the device is the host: nothing moves, nothing to say
    for (const std::string& line : residency.lines()) progress.note("residency: " + line);
  }
  VORTEX_RETURN_IF_ERROR(check_residency(residency));
  const int resident_blocks = residency.resident_blocks;
  progress.stage(options_.synthetic_weights ? "synthesizing weights" : "loading weights");
  const auto t_load = Clock::now();
  H3Weights weights;
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
          (options_.loras.empty() && streamed_gemm_weight(spec.name, resident_blocks) && options_.backend != "cpu")) {
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
    Result<H3Weights> loaded =
        load_checkpoint(options_.checkpoint_path, cfg_, *backend_, CheckpointLayout::kAuto, &load_notes);
    for (const std::string& n : load_notes) progress.note(n);
    if (!loaded.ok()) return with_checkpoint_advice(loaded.status(), options_.checkpoint_path);
    weights = std::move(*loaded);
    VORTEX_RETURN_IF_ERROR(check_weights_finite(weights, *backend_, options_.checkpoint_path,
                                                "the checkpoint is damaged (download it again)"));
  }
  if (!options_.loras.empty()) {
    progress.stage("applying LoRA adapters");
    LoraApplyOptions lora_options;
    lora_options.allow_unmatched = options_.lora_allow_unmatched;
    lora_options.mode = options_.lora_mode;
    lora_options.precision = precision_name(exec_.precision);
    VORTEX_RETURN_IF_ERROR(apply_lora_adapters(
        weights, options_.loras, lora_options, cfg_, *backend_, [&](std::string_view m) { progress.note(m); },
        [&](std::string_view m) { progress.warning(m); }, &lora_manifest_));
    if (options_.lora_mode != "runtime")
      VORTEX_RETURN_IF_ERROR(check_weights_finite(weights, *backend_, "the weights merged with --lora",
                                                  "a LoRA SCALE too large overflows the BF16 weights; lower it"));
  }
  PrecisionOptions precision;
  precision.precision = precision_name(exec_.precision);
  precision.nvfp4_fc2 = options_.nvfp4_fc2;
  if (precision.precision != "bf16") {
    progress.stage("converting the block GEMM weights to " + precision.precision +
                   (options_.backend == "cpu" ? "" : " on the device"));
  }
  VORTEX_RETURN_IF_ERROR(apply_precision(weights, *backend_, precision));
  VORTEX_RETURN_IF_ERROR(backend_->synchronize());
  VORTEX_RETURN_IF_ERROR(backend_->release_cached_memory());  // the BF16 originals' blocks
  model_ = std::make_unique<H3Model>(cfg_, *backend_, std::move(weights), exec_);
  if (resident_blocks < cfg_.num_layers) {
    progress.stage("streaming blocks " + std::to_string(resident_blocks) + ".." + std::to_string(cfg_.num_layers - 1) +
                   " from host memory");
    VORTEX_RETURN_IF_ERROR(model_->stream_blocks(resident_blocks));
  }
  if (options_.adaln_weights_on_host()) {
    if (!(adaln_host_early && options_.synthetic_weights))
      progress.stage("moving the AdaLN projections to host memory (" + format_gb(model_->adaln_weight_bytes()) + ")");
    VORTEX_RETURN_IF_ERROR(model_->place_adaln_weights(AdalnWeightPlace::kHost));
  }
  load_seconds_ = seconds_since(t_load);
  return Status::Ok();
}

Result<RunPlan> Pipeline::plan(const RunRequest& request, ProgressSink& progress, FieldStyle style,
                               std::string* failed_field) const {
  if (std::optional<FieldError> e = check_run_request(request, options_, style)) {
    if (failed_field != nullptr) *failed_field = e->field;
    return e->status;
  }
  VORTEX_ASSIGN_OR_RETURN(RunPlan plan,
                          plan_run(cfg_, options_, request, progress, weights_loaded(), style, failed_field));
  if (Status fit = check_device_fit(plan); !fit.ok()) {
    if (failed_field != nullptr) failed_field->clear();
    return fit;
  }
  if (Status dec = check_decodable(plan, style); !dec.ok()) {
    if (failed_field != nullptr) *failed_field = "frames";
    return dec;
  }
  return plan;
}

Status Pipeline::check_decodable(const RunPlan& plan, FieldStyle style) const {
  if (!has_decoders() || !plan.request.media.value_or(true)) return Status::Ok();
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

Status Pipeline::check_device_fit(const RunPlan& plan) const {
  if (options_.backend == "cpu") return Status::Ok();
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
  return check_fits(plan.memory, free, "free GPU memory", options_.backend, cfg_, plan.geo);
}

std::optional<uint64_t> Pipeline::free_memory() const {
  if (options_.backend == "cpu") return available_host_memory();
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
                                    const VisionEmbeddings* vision, const Tensor* positions) {
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
      return invalid_argument("not enough memory for the text encoder: " + std::to_string(layers) +
                              " layers need about " + format_gb(weight_bytes + act_bytes) + " but only " +
                              format_gb(*free) + " of " +
                              (options_.backend == "cpu" ? "host memory" : "free GPU memory") + " is available");
    }
    progress.stage("loading the text encoder (" + std::to_string(layers) + " of " + std::to_string(te.num_layers) +
                   " layers, " + format_gb(weight_bytes) + ")");
    TextEncoderLoadProgressFn on_load = [&progress](const TextEncoderLoadProgress& p) {
      progress.loading("text encoder", p.bytes_done, p.bytes_total, p.layers_done, p.layers_total, p.seconds);
    };
    VORTEX_ASSIGN_OR_RETURN(text_encoder_, TextEncoder::load(options_.text_encoder_dir, *backend_, layers, on_load));
    text_encoder_bytes_ = weight_bytes;
    ++conditioner_loads_;
  }
  progress.stage("encoding the prompt (" + std::to_string(ids.size()) + " tokens -> hidden_states[" +
                 std::to_string(layer) + "])");
  Result<Tensor> states = vision != nullptr && positions != nullptr
                              ? text_encoder_->encode(ids, *positions, layer, vision)
                              : text_encoder_->encode(ids, layer);
  Status synced = backend_->synchronize();
  // Resident only beside a loaded transformer and when the run still fits; else freed before the transformer needs
  // the memory (a one-shot generate loads it next).
  if (!states.ok() || !synced.ok() || !model_) {
    text_encoder_.reset();
    (void)backend_->release_cached_memory();
  } else {
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

Status Pipeline::encode_prompt(RunPlan& plan, ProgressSink& progress) {
  if (plan.text.defined() || plan.text_source != "prompt" || !has_text_encoder()) return Status::Ok();
  if (!plan.keyframe_text.ids.empty()) {
    VORTEX_ASSIGN_OR_RETURN(VisionEmbeddings vision, keyframe_vision_for(plan, progress));
    VORTEX_ASSIGN_OR_RETURN(
        plan.text, encode_ids(plan.text_ids, progress, plan.memory.total(), &vision, &plan.keyframe_text.positions));
    return Status::Ok();
  }
  VORTEX_ASSIGN_OR_RETURN(plan.text, encode_ids(plan.text_ids, progress, plan.memory.total()));
  return Status::Ok();
}

Result<VisionEmbeddings> Pipeline::keyframe_vision_for(const RunPlan& plan, ProgressSink& progress) {
  const RunRequest& req = plan.request;
  progress.stage("reading the keyframes");
  VORTEX_ASSIGN_OR_RETURN(PlacedKeyframes placed, read_keyframes(req.keyframes, req.width, req.height));
  VORTEX_ASSIGN_OR_RETURN(VisionProcessorConfig proc, keyframe_processor_config(options_.text_encoder_dir));
  if (!vision_tower_) {
    progress.stage("loading the vision tower");
    VORTEX_ASSIGN_OR_RETURN(VisionTower tower, load_vision_tower(options_.text_encoder_dir));
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
    VORTEX_ASSIGN_OR_RETURN(VideoVaeEncoder enc, VideoVaeEncoder::load(options_.encoder_vae_dir()));
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

// {"name", "bytes", "sha256", "adapter_config_sha256"} of an adapter file and of the adapter_config.json that
// load_lora may read beside it (null when there is none).
Result<nlohmann::ordered_json> adapter_fingerprint(const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec) return io_error("cannot read the size of " + path + ": " + ec.message());
  VORTEX_ASSIGN_OR_RETURN(const std::string sha, sha256_file(path));
  nlohmann::ordered_json config_sha = nullptr;
  const fs::path config = fs::path(path).parent_path() / "adapter_config.json";
  if (fs::is_regular_file(config, ec)) {
    VORTEX_ASSIGN_OR_RETURN(const std::string c, sha256_file(config.string()));
    config_sha = c;
  }
  return nlohmann::ordered_json{{"name", fs::path(path).filename().string()},
                                {"bytes", bytes},
                                {"sha256", sha},
                                {"adapter_config_sha256", config_sha}};
}

std::string short_sha(const nlohmann::ordered_json& sha) {
  return sha.is_string() ? sha.get<std::string>().substr(0, 16) : std::string("none");
}

}  // namespace

Result<std::vector<std::string>> all_gather_bytes(Communicator& comm, Backend& backend, const std::string& mine,
                                                  const std::string& what) {
  const int u = comm.size();
  Tensor size_host = Tensor::empty({8}, DType::kU8);  // [8] u8: this rank's byte count (u64)
  const uint64_t n = mine.size();
  std::memcpy(size_host.raw_data(), &n, sizeof(n));
  VORTEX_ASSIGN_OR_RETURN(Tensor size_send, backend.upload(size_host));
  std::vector<Tensor> size_recv(u);
  for (Tensor& t : size_recv) {
    VORTEX_ASSIGN_OR_RETURN(t, backend.alloc({8}, DType::kU8));  // [8] u8
  }
  VORTEX_RETURN_IF_ERROR(backend.synchronize());
  VORTEX_RETURN_IF_ERROR(comm.all_gather(size_send, size_recv).with_context(what + " (sizes)"));
  std::vector<uint64_t> sizes(u);
  for (int j = 0; j < u; ++j) {
    VORTEX_RETURN_IF_ERROR(backend.download(size_recv[j], size_host));
    std::memcpy(&sizes[j], size_host.raw_data(), sizeof(uint64_t));
    if (sizes[j] == 0 || sizes[j] > (uint64_t{1} << 24))
      return internal_error(what + ": rank " + std::to_string(j) + " announced " + std::to_string(sizes[j]) + " bytes");
  }
  Tensor host = Tensor::empty({static_cast<int64_t>(n)}, DType::kU8);  // [n] u8
  std::memcpy(host.raw_data(), mine.data(), n);
  VORTEX_ASSIGN_OR_RETURN(Tensor send, backend.upload(host));
  std::vector<Tensor> recv(u);
  for (int j = 0; j < u; ++j) {
    VORTEX_ASSIGN_OR_RETURN(recv[j], backend.alloc({static_cast<int64_t>(sizes[j])}, DType::kU8));  // [n_j] u8
  }
  VORTEX_RETURN_IF_ERROR(backend.synchronize());
  VORTEX_RETURN_IF_ERROR(comm.all_gather(send, recv).with_context(what));
  std::vector<std::string> out(u);
  for (int j = 0; j < u; ++j) {
    Tensor h = Tensor::empty({static_cast<int64_t>(sizes[j])}, DType::kU8);  // [n_j] u8
    VORTEX_RETURN_IF_ERROR(backend.download(recv[j], h));
    out[j].assign(static_cast<const char*>(h.raw_data()), sizes[j]);
  }
  return out;
}

bool Pipeline::request_loras_attached(const RunRequest& request) const {
  const std::vector<LoraSpec>& a = request.loras;
  const std::vector<LoraSpec>& b = attached_request_loras_;
  if (a.size() != b.size() || lora_manifest_.size() != a.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].path != b[i].path || a[i].scale != b[i].scale) return false;
  return true;
}

void Pipeline::detach_request_loras() {
  if (options_.lora_dir.empty()) return;  // nothing attached per request (load-time adapters stay)
  detach_lora_branches(model_->mutable_weights());
  attached_request_loras_.clear();
  lora_manifest_ = nlohmann::ordered_json::array();
  attached_fingerprints_ = nlohmann::ordered_json::array();
}

Status Pipeline::switch_request_loras(const RunRequest& request, ProgressSink& progress) {
  if (options_.lora_dir.empty()) {
    if (!request.loras.empty())
      return invalid_argument("this pipeline takes no per-request adapters (PipelineOptions::lora_dir is empty)");
    return Status::Ok();
  }
  if (request_loras_attached(request)) return Status::Ok();
  // With ranks, each file's fingerprint is taken as it is loaded, for agree_request_loras.
  nlohmann::ordered_json fingerprints = nlohmann::ordered_json::array();
  if (model_->communicator() != nullptr) {
    for (const LoraSpec& l : request.loras) {
      Result<nlohmann::ordered_json> f = adapter_fingerprint(l.path);
      if (!f.ok()) {
        detach_request_loras();
        return f.status();
      }
      fingerprints.push_back(std::move(*f));
    }
  }
  // Run-time branches only: the base weights stay the loaded bytes, so switching never reloads them.
  LoraApplyOptions lo;
  lo.allow_unmatched = options_.lora_allow_unmatched;
  lo.mode = "runtime";
  lo.precision = precision_name(exec_.precision);
  if (!request.loras.empty()) progress.stage("attaching LoRA adapters");
  nlohmann::ordered_json manifest = nlohmann::ordered_json::array();
  Status s = apply_lora_adapters(
      model_->mutable_weights(), request.loras, lo, cfg_, *backend_, [&](std::string_view m) { progress.note(m); },
      [&](std::string_view m) { progress.warning(m); }, &manifest);
  if (!s.ok()) {  // nothing half-attached survives a bad adapter: the next request starts from the base
    detach_request_loras();
    return s;
  }
  attached_request_loras_ = request.loras;
  lora_manifest_ = std::move(manifest);
  attached_fingerprints_ = std::move(fingerprints);
  return Status::Ok();
}

Result<AdapterVerdict> Pipeline::agree_request_loras(const RunRequest& request, ProgressSink& progress) {
  if (!model_) return internal_error("Pipeline::agree_request_loras before load_weights");
  Communicator* world = model_->communicator();
  if (world == nullptr) return internal_error("Pipeline::agree_request_loras: the model has no communicator");
  const int me = world->rank(), u = world->size();
  const std::string who = "rank " + std::to_string(me);
  // This rank's part: attach (the names resolved in its own lora_dir), or why not.
  Status local = Status::Ok();
  if (options_.lora_dir.empty()) {
    if (!request.loras.empty()) local = invalid_argument(who + " was started without --lora-dir");
  } else {
    for (const LoraSpec& l : request.loras) {
      std::error_code ec;
      if (!fs::is_regular_file(l.path, ec)) {
        local = not_found(who + ": no adapter " + fs::path(l.path).filename().string() + " in its --lora-dir " +
                          options_.lora_dir);
        break;
      }
    }
    if (local.ok()) {
      if (Status s = switch_request_loras(request, progress); !s.ok())
        local = Status(s.code(), who + " could not attach the adapters: " + s.message());
    }
  }
  nlohmann::ordered_json mine = {
      {"code", static_cast<int>(local.code())},
      {"error", local.ok() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(local.message())},
      {"lora_dir", options_.lora_dir},
      {"adapters", local.ok() ? attached_fingerprints_ : nlohmann::ordered_json::array()}};
  VORTEX_ASSIGN_OR_RETURN(std::vector<std::string> all,
                          all_gather_bytes(*world, *backend_, mine.dump(), "the adapters of the job (" + who + ")"));

  // Every rank judges the same bytes the same way.
  std::vector<nlohmann::ordered_json> ranks(u);
  for (int r = 0; r < u; ++r) {
    ranks[r] = nlohmann::ordered_json::parse(all[r], nullptr, /*allow_exceptions=*/false);
    if (!ranks[r].is_object() || !ranks[r].contains("error") || !ranks[r]["adapters"].is_array() ||
        !ranks[r]["code"].is_number_integer() || !ranks[r]["lora_dir"].is_string())
      return internal_error("the adapters of the job: rank " + std::to_string(r) + " sent a malformed report");
  }
  if (!ranks[0]["error"].is_null()) {  // the job's own adapters fail (as on one rank), with rank 0's error
    detach_request_loras();
    const int c = ranks[0]["code"].get<int>();
    const ErrorCode code =
        c > 0 && c <= static_cast<int>(ErrorCode::kCancelled) ? static_cast<ErrorCode>(c) : ErrorCode::kInternal;
    return AdapterVerdict{Status(code, ranks[0]["error"].get<std::string>())};
  }
  // A follower that differs from rank 0: the deployment's fault, not the request's.
  std::vector<std::string> reasons;
  const nlohmann::ordered_json& base = ranks[0]["adapters"];
  const std::string base_dir = ranks[0]["lora_dir"].get<std::string>();
  for (int r = 1; r < u; ++r) {
    const std::string rank = "rank " + std::to_string(r);
    if (!ranks[r]["error"].is_null()) {
      reasons.push_back(ranks[r]["error"].get<std::string>());
      continue;
    }
    const nlohmann::ordered_json& theirs = ranks[r]["adapters"];
    if (theirs.size() != base.size()) {
      reasons.push_back(rank + " attached " + std::to_string(theirs.size()) + " adapters, rank 0 " +
                        std::to_string(base.size()));
      continue;
    }
    const std::string dirs =
        " in its --lora-dir " + ranks[r]["lora_dir"].get<std::string>() + " than rank 0's (" + base_dir + ")";
    for (size_t i = 0; i < base.size(); ++i) {
      const nlohmann::ordered_json &a = base[i], &b = theirs[i];
      if (a == b) continue;
      const std::string name = a.value("name", std::string("?"));
      if (a["bytes"] != b["bytes"] || a["sha256"] != b["sha256"]) {
        reasons.push_back(rank + " has another " + name + dirs + ": " + b["bytes"].dump() + " bytes, sha256 " +
                          short_sha(b["sha256"]) + ".. vs rank 0's " + a["bytes"].dump() + " bytes, sha256 " +
                          short_sha(a["sha256"]) + "..");
      } else {
        reasons.push_back(rank + " has another adapter_config.json beside " + name + dirs + ": sha256 " +
                          short_sha(b["adapter_config_sha256"]) + " vs rank 0's " +
                          short_sha(a["adapter_config_sha256"]));
      }
    }
  }
  if (reasons.empty()) return AdapterVerdict{};
  detach_request_loras();  // on every rank: the next job attaches (and fingerprints) afresh
  std::string why;
  for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
  return AdapterVerdict{internal_error("the ranks do not agree on the job's adapters: " + why +
                                       "; every rank must serve the same --lora-dir files; the job was not run")};
}

Result<bool> agreed_cancel(Communicator& comm, Backend& backend, const CancelToken& cancel) {
  Tensor flag = Tensor::empty({1}, DType::kU8);  // [1] u8 host: 1 = stop
  flag.data<uint8_t>()[0] = comm.rank() == 0 && cancel.cancelled() ? 1 : 0;
  VORTEX_ASSIGN_OR_RETURN(Tensor on_device, backend.upload(flag));
  VORTEX_RETURN_IF_ERROR(backend.synchronize());
  VORTEX_RETURN_IF_ERROR(comm.broadcast(on_device, 0).with_context("the cancel agreement"));
  VORTEX_RETURN_IF_ERROR(backend.download(on_device, flag));
  return flag.data<uint8_t>()[0] != 0;
}

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
  if (!req.attention.empty()) {
    VORTEX_ASSIGN_OR_RETURN(exec.attention, parse_attention(req.attention));  // checked by check_run_request
  }
  model_->options() = exec;
  // With ranks the adapters were attached and compared by agree_request_loras: a rank loading here alone
  // could sample with other weights than its peers.
  if (model_->communicator() != nullptr && !req.loras.empty() && !request_loras_attached(req))
    return internal_error("Pipeline::run with ranks: the job's adapters were not agreed (agree_request_loras)");
  VORTEX_RETURN_IF_ERROR(switch_request_loras(req, progress));  // before prepare: the refiner may be adapted

  Tensor text = plan.text;  // [L, text_dim] host
  if (!text.defined()) {
    RunPlan encoded = plan;
    VORTEX_RETURN_IF_ERROR(encode_prompt(encoded, progress));
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
  VORTEX_RETURN_IF_ERROR(check_decodable(plan, FieldStyle::kFlag));  // a size the VAE cannot decode: before sampling
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
  VORTEX_ASSIGN_OR_RETURN(AvLatents final_latents, sample_av(plan.spec, std::move(noise), denoise, on_step));
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
    VORTEX_ASSIGN_OR_RETURN(StreamedDecode streamed, decode_to_mp4(video, audio, *video_vae_, *audio_vae_,
                                                                   (staged / "video.mp4").string(), mp4, on_tile));
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
  const bool from_file = plan.text_source == "embeddings";
  const bool encoded = plan.text_source == "prompt" && has_text_encoder();
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
      {"synthetic_text_rows", plan.text_source == "synthetic" ? J(req.synthetic_text_rows) : J(nullptr)},
      {"prompt", plan.text_source == "prompt" ? J(req.prompt) : J(nullptr)},
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
      {"sampler", sampler_kind_name(plan.sampler_kind)},
      {"schedule", av_schedule_mode_name(plan.schedule_mode)},
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
  manifest["noise"] = {{"contract",
                        "gaussian_noise (src/core/rng.h): one stream of `seed`, video elements first, "
                        "then audio"},
                       {"seed", req.seed},
                       {"video_offset", 0},
                       {"audio_offset", video_n},
                       {"keyframe_offset", geo.keyframes.empty() ? J(nullptr) : J(condition_noise_offset)},
                       {"synthetic_text_seed", plan.text_source == "synthetic" ? J(synthetic_text_seed(req.seed))
                                               : plan.text_source == "prompt" && !encoded
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
  manifest["schedule"] = {{"mode", av_schedule_mode_name(plan.schedule_mode)},
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

const char* default_sampler_for_schedule(AvScheduleMode mode) {
  return mode == AvScheduleMode::kDiffusers ? "euler" : "res_multistep";
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
