// The typed request (see request.h): the field table, the converters from CLI strings and names, and the cheap
// checks of PipelineOptions and RunRequest. Every message names its field through field_name, so the CLI and the
// HTTP API read the same sentence with their own spelling of the field.
#include "engine/request.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "backend/backend.h"
#include "engine/decode.h"
#include "engine/precision.h"
#include "engine/references.h"
#include "media/mp4_writer.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

struct FieldNames {
  Field field;
  const char* flag;  // nullptr: no CLI flag
  const char* json;  // nullptr: no JSON field
};

// One row per Field, in the enum's order (field_flag / field_json index it).
constexpr FieldNames kFields[] = {
    {Field::kNone, nullptr, ""},
    {Field::kMemory, nullptr, ""},
    {Field::kModel, "--model", nullptr},
    {Field::kConfig, "--config", nullptr},
    {Field::kCheckpoint, "--checkpoint", nullptr},
    {Field::kSynthetic, "--synthetic", nullptr},
    {Field::kWeightsSeed, "--weights-seed", nullptr},
    {Field::kBackend, "--backend", nullptr},
    {Field::kThreads, "--threads", nullptr},
    {Field::kDevice, "--device", nullptr},
    {Field::kPrecision, "--precision", "precision"},
    {Field::kSwitches, "--switches", nullptr},
    {Field::kCudaGraph, "--cuda-graph", nullptr},
    {Field::kAdalnWeights, "--adaln-weights", nullptr},
    {Field::kMaxVram, "--max-vram", nullptr},
    {Field::kMaxHostRam, "--max-host-ram", nullptr},
    {Field::kLoraFiles, "--lora", nullptr},
    {Field::kLoraMode, "--lora-mode", nullptr},
    {Field::kLoraDir, "--lora-dir", nullptr},
    {Field::kTextLayer, "--text-layer", nullptr},
    {Field::kVae, "--vae", nullptr},
    {Field::kAudioVae, "--audio-vae", nullptr},
    {Field::kSyntheticVae, "--synthetic-vae", nullptr},
    {Field::kVaeSeed, "--vae-seed", nullptr},
    {Field::kCrf, "--crf", nullptr},
    {Field::kVideoEncoder, "--video-encoder", nullptr},
    {Field::kX264Preset, "--x264-preset", nullptr},
    {Field::kGpus, "--gpus", nullptr},
    {Field::kCommTimeout, "--comm-timeout", nullptr},
    {Field::kPrompt, "--prompt", "prompt"},
    {Field::kPromptFile, "--prompt-file", nullptr},
    {Field::kTextEmbeddings, "--text-embeddings", "text_embeddings"},
    {Field::kSyntheticText, "--synthetic-text", "synthetic_text_rows"},
    {Field::kWidth, "--width", "width"},
    {Field::kHeight, "--height", "height"},
    {Field::kSize, nullptr, "size"},
    {Field::kAspectRatio, nullptr, "aspect_ratio"},
    {Field::kShortEdge, nullptr, "short_edge"},
    {Field::kFrames, "--frames", "frames"},
    {Field::kSeconds, "--seconds", "seconds"},
    {Field::kSteps, "--steps", "steps"},
    {Field::kSchedule, "--schedule", "schedule"},
    {Field::kSampler, "--sampler", "sampler"},
    {Field::kSeed, "--seed", "seed"},
    {Field::kPreset, "--preset", nullptr},
    {Field::kAttention, "--attention", "attention"},
    {Field::kMedia, nullptr, "media"},
    {Field::kLora, "--lora", "lora"},
    {Field::kFramesDir, "--frames-dir", "frames_dir"},
    {Field::kFailAllocAfter, nullptr, "fail_alloc_after"},
    {Field::kOut, "--out", nullptr},
    {Field::kFirstFrame, "--first-frame", "conditions"},
    {Field::kLastFrame, "--last-frame", "conditions"},
    {Field::kReferences, "--ref", "conditions"},
    {Field::kKeyframeVae, "--keyframe-vae", nullptr},
};
static_assert(sizeof(kFields) / sizeof(kFields[0]) == static_cast<size_t>(Field::kKeyframeVae) + 1,
              "kFields has one row per Field");

const FieldNames& names_of(Field f) { return kFields[static_cast<size_t>(f)]; }

Status choice_error(Field f, FieldStyle style, const char* choices, std::string_view got) {
  return invalid_argument(field_name(f, style) + " must be " + choices + ", got '" + std::string(got) + "'");
}

}  // namespace

const char* backend_kind_name(BackendKind b) { return b == BackendKind::kCuda ? "cuda" : "cpu"; }

const char* adaln_placement_name(AdalnPlacement p) {
  return p == AdalnPlacement::kHost ? "host" : p == AdalnPlacement::kDevice ? "device" : "auto";
}

const char* synthetic_vae_name(SyntheticVae v) {
  return v == SyntheticVae::kTiny ? "tiny" : v == SyntheticVae::kFull ? "full" : "";
}

const char* lora_mode_name(LoraMode m) { return m == LoraMode::kRuntime ? "runtime" : "merge"; }

const char* field_flag(Field f) { return names_of(f).flag; }
const char* field_json(Field f) { return names_of(f).json; }

std::string field_name(Field f, FieldStyle style) {
  const FieldNames& n = names_of(f);
  const char* first = style == FieldStyle::kFlag ? n.flag : n.json;
  const char* other = style == FieldStyle::kFlag ? n.json : n.flag;
  return first != nullptr ? first : other != nullptr ? other : "";
}

std::string field_json_name(const FieldError& e) {
  if (!e.unknown.empty()) return e.unknown;
  return field_name(e.field, FieldStyle::kJson);
}

Result<int> parse_int_text(Field f, std::string_view s) {
  int v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end)
    return invalid_argument(field_name(f, FieldStyle::kFlag) + " expects an integer, got '" + std::string(s) + "'");
  return v;
}

Result<uint64_t> parse_u64_text(Field f, std::string_view s) {
  uint64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end)
    return invalid_argument(field_name(f, FieldStyle::kFlag) + " expects a non-negative integer, got '" +
                            std::string(s) + "'");
  return v;
}

Result<double> parse_positive_text(Field f, std::string_view s, const char* unit) {
  const std::string text(s);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || !(v > 0.0))
    return invalid_argument(field_name(f, FieldStyle::kFlag) + " expects a positive number of " + unit + ", got '" +
                            text + "'");
  return v;
}

Result<BackendKind> parse_backend_kind(std::string_view name, FieldStyle style) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return choice_error(Field::kBackend, style, "cpu or cuda", name);
}

Result<Precision> parse_precision_field(std::string_view name, FieldStyle style) {
  Result<Precision> p = parse_precision(name);
  if (p.ok()) return p;
  return invalid_argument(field_name(Field::kPrecision, style) + " must be one of " +
                          std::string(precision_names_help()) + ", got '" + std::string(name) + "'");
}

Result<AttentionKind> parse_attention_field(std::string_view name, FieldStyle style) {
  Result<AttentionKind> a = parse_attention(name);
  if (a.ok()) return a;
  return choice_error(Field::kAttention, style, "sdpa, sage2 or bf16-owned", name);
}

Result<AdalnPlacement> parse_adaln_placement(std::string_view name) {
  if (name == "auto") return AdalnPlacement::kAuto;
  if (name == "device") return AdalnPlacement::kDevice;
  if (name == "host") return AdalnPlacement::kHost;
  return choice_error(Field::kAdalnWeights, FieldStyle::kFlag, "auto, device or host", name);
}

Result<SyntheticVae> parse_synthetic_vae(std::string_view name) {
  if (name == "tiny") return SyntheticVae::kTiny;
  if (name == "full") return SyntheticVae::kFull;
  return choice_error(Field::kSyntheticVae, FieldStyle::kFlag, "'tiny' or 'full'", name);
}

Result<LoraMode> parse_lora_mode(std::string_view name) {
  if (name == "merge") return LoraMode::kMerge;
  if (name == "runtime") return LoraMode::kRuntime;
  return choice_error(Field::kLoraMode, FieldStyle::kFlag, "merge or runtime", name);
}

Result<std::string> parse_video_encoder(std::string_view name) {
  if (check_video_encoder(std::string(name)).ok()) return std::string(name);
  return choice_error(Field::kVideoEncoder, FieldStyle::kFlag, "auto, libx264 or h264_nvenc", name);
}

Result<std::string> parse_x264_preset(std::string_view name) {
  if (check_x264_preset(std::string(name)).ok()) return std::string(name);
  std::string all;
  for (const char* p : kX264Presets) all += std::string(all.empty() ? "" : ", ") + p;
  return choice_error(Field::kX264Preset, FieldStyle::kFlag, ("one of " + all).c_str(), name);
}

Result<AvScheduleMode> parse_schedule_field(std::string_view name) {
  return av_schedule_mode_from_name(std::string(name));
}

Result<SamplerKind> parse_sampler_field(std::string_view name) { return sampler_kind_from_name(std::string(name)); }

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
  if (!o.text_encoder_dir.empty() && (o.tokenizer_path.empty() || o.text_layer < 0)) {
    return invalid_argument("a text encoder needs its tokenizer.json and the hidden-state index (--text-layer K)");
  }
  if (o.backend == BackendKind::kCpu && o.precision != Precision::kBf16 && o.precision != Precision::kNvfp4WeightOnly) {
    return unsupported(
        "the cpu backend runs BF16 GEMMs only: use --precision bf16 (or nvfp4-weight-only) --attention sdpa "
        "(fp8/nvfp4/sage2 are approximate CUDA modes, --backend cuda)");
  }
  // Decoders: both folders, or synthetic ones; the folders themselves are read (and fully checked) by
  // load_decoders, before the transformer's weights.
  if (o.synthetic_vae != SyntheticVae::kNone) {
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
  if (o.max_vram_gb > 0.0 && o.backend == BackendKind::kCpu)
    return invalid_argument("--max-vram budgets GPU memory: it needs --backend cuda");
  if (!std::isfinite(o.max_host_ram_gb) || o.max_host_ram_gb < 0.0)
    return invalid_argument("--max-host-ram must be a positive number of GB (10^9 bytes)");
  if (o.mp4_crf < 0 || o.mp4_crf > 51)
    return invalid_argument("--crf must be in [0, 51], got " + std::to_string(o.mp4_crf));
  VORTEX_RETURN_IF_ERROR(parse_video_encoder(o.mp4_video_encoder).status());
  if (!o.mp4_x264_preset.empty()) VORTEX_RETURN_IF_ERROR(parse_x264_preset(o.mp4_x264_preset).status());
  return validate_lora_dir_options(o);
}

Status validate_lora_dir_options(const PipelineOptions& o) {
  if (!o.lora_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(o.lora_dir, ec))
      return not_found("--lora-dir " + o.lora_dir + " is not a directory (the folder requests name adapters in)");
    if (!o.loras.empty())
      return invalid_argument("--lora-dir (adapters per request) excludes load-time --lora adapters");
    if (o.precision != Precision::kBf16)
      return unsupported("--lora-dir applies adapters as run-time branches, which need --precision bf16 (got " +
                         std::string(precision_name(o.precision)) + ")");
  }
  return Status::Ok();
}

std::optional<FieldError> check_run_request(const RunRequest& r, const PipelineOptions& o, FieldStyle style) {
  auto bad = [](Field f, Status s) { return std::optional<FieldError>(FieldError{f, std::move(s), {}}); };
  if (r.steps < 1 || r.steps > kMaxSteps) {
    return bad(Field::kSteps, invalid_argument(field_name(Field::kSteps, style) + " must be in [1, " +
                                               std::to_string(kMaxSteps) + "], got " + std::to_string(r.steps)));
  }
  const std::string wh = style == FieldStyle::kFlag ? "--width/--height" : "width/height";
  if (r.width <= 0 || r.height <= 0) {
    return bad(r.width <= 0 ? Field::kWidth : Field::kHeight,
               invalid_argument(wh + " must be positive multiples of 32, got " + std::to_string(r.width) + "x" +
                                std::to_string(r.height)));
  }
  if (r.width > kMaxSidePixels || r.height > kMaxSidePixels) {
    return bad(r.width > kMaxSidePixels ? Field::kWidth : Field::kHeight,
               invalid_argument(wh + " must be at most " + std::to_string(kMaxSidePixels) + " pixels, got " +
                                std::to_string(r.width) + "x" + std::to_string(r.height)));
  }
  if (r.frames <= 0) {
    return bad(Field::kFrames, invalid_argument(field_name(Field::kFrames, style) + " must be positive, got " +
                                                std::to_string(r.frames)));
  }
  if (r.text_embeddings_path.empty() && r.prompt.empty() &&
      (r.synthetic_text_rows < 1 || r.synthetic_text_rows > kMaxSyntheticTextRows)) {
    return bad(Field::kSyntheticText, invalid_argument(field_name(Field::kSyntheticText, style) + " must be in [1, " +
                                                       std::to_string(kMaxSyntheticTextRows) + "] rows, got " +
                                                       std::to_string(r.synthetic_text_rows)));
  }
  if (!r.prompt.empty() && !r.text_embeddings_path.empty()) {
    return bad(Field::kPrompt, invalid_argument("prompt and text_embeddings exclude each other: give one text source"));
  }
  if (!r.prompt.empty() && !o.synthetic_weights && o.text_encoder_dir.empty()) {
    // Real weights need real conditioning, and no text encoder is loaded.
    return bad(Field::kPrompt,
               unsupported("a prompt needs the text encoder, which this pipeline has not loaded (give the model "
                           "folder: --model DIR); upload text_embeddings (a safetensors file with one "
                           "[L, text_dim] tensor) instead"));
  }
  if (r.precision && *r.precision != o.precision) {
    return bad(Field::kPrecision,
               invalid_argument(field_name(Field::kPrecision, style) + " '" + precision_name(*r.precision) +
                                "' is not the loaded precision '" + precision_name(o.precision) +
                                "': precision converts the weights at load, so it is chosen at startup"));
  }
  if (o.backend == BackendKind::kCpu && r.attention && *r.attention != AttentionKind::kSdpa) {
    return bad(Field::kAttention,
               unsupported(
                   "the cpu backend runs BF16 GEMMs only: use --precision bf16 (or nvfp4-weight-only) --attention "
                   "sdpa (fp8/nvfp4/sage2 are approximate CUDA modes and bf16-owned an sm_90 kernel, --backend cuda)"));
  }
  if (r.media.value_or(false) && !o.wants_decoders()) {
    return bad(Field::kMedia,
               invalid_argument(style == FieldStyle::kFlag
                                    ? std::string("decoded media needs the decoders: pass --vae DIR --audio-vae DIR")
                                    : std::string("media needs the decoders, which this server has not loaded "
                                                  "(start it with --vae DIR --audio-vae DIR)")));
  }
  if (!r.frames_dir.empty()) {
    if (!o.wants_decoders() || !r.media.value_or(true))
      return bad(Field::kFramesDir, invalid_argument("--frames-dir needs the decoders (--vae DIR --audio-vae DIR)"));
    if (Status s = check_frames_dir(r.frames_dir, r.frames_overwrite); !s.ok()) return bad(Field::kFramesDir, s);
  }
  if (r.fail_alloc_after < -1) {
    return bad(Field::kFailAllocAfter, invalid_argument("fail_alloc_after must be >= 0 (or -1: off), got " +
                                                        std::to_string(r.fail_alloc_after)));
  }
  if (!r.loras.empty()) {
    if (o.lora_dir.empty())
      return bad(Field::kLora, unsupported("this server takes no per-request adapters: start it with --lora-dir DIR"));
    for (const LoraSpec& l : r.loras) {
      std::error_code ec;
      if (!fs::is_regular_file(l.path, ec))
        return bad(Field::kLora, not_found("no adapter " + fs::path(l.path).filename().string() + " in --lora-dir"));
      if (l.scale && !std::isfinite(*l.scale))
        return bad(Field::kLora, invalid_argument("an adapter's scale must be finite"));
    }
  }
  if (!r.references.empty()) {
    Result<std::vector<ReferenceProbe>> refs =
        check_references(r.references, r.keyframes.any(), o.checkpoint_path,
                         {o.encoder_vae_dir(), o.reference_audio_encoder_dir()}, field_name(Field::kReferences, style));
    if (!refs.ok()) return bad(Field::kReferences, refs.status());
  }
  if (r.keyframes.any()) {
    const std::string first = field_name(Field::kFirstFrame, style), last = field_name(Field::kLastFrame, style);
    if (Status s = check_keyframes(r.keyframes, o.checkpoint_path, o.encoder_vae_dir(), first, last); !s.ok())
      return bad(r.keyframes.first.empty() ? Field::kLastFrame : Field::kFirstFrame, s);
  }
  // The Ref2VA transformer runs ref2va alone (keyframes on it are refused above, naming their flag).
  if (Status s = check_task_transformer(!r.references.empty(), o.checkpoint_path); !s.ok()) return bad(Field::kNone, s);
  return std::nullopt;
}

}  // namespace vortex
