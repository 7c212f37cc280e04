// The request and load option table (see request_flags.h): one row per option, its parser next to it. The converters
// of engine/request.h do the typing; the rows add ranges that belong to the flag alone (--gpus, --comm-timeout) and
// spell messages in the caller's dialect.
#include "api/request_flags.h"

#include <cmath>
#include <cstdlib>

#include "lora/lora.h"

namespace vortex::api {
namespace {

using S = RequestSpec;
using St = FieldStyle;

// `f` as `style` names it: "--steps" or "steps".
std::string name_in(Field f, St style) {
  if (style == St::kFlag) {
    const char* flag = field_flag(f);
    return flag != nullptr ? flag : field_id(f);
  }
  return field_id(f);
}

// The engine's converters name the field as a flag; in the id dialect the message starts with the id instead.
Status restyle(Status s, Field f, St style) {
  if (s.ok() || style == St::kFlag) return s;
  const char* flag = field_flag(f);
  std::string m = s.message();
  if (flag != nullptr && m.rfind(flag, 0) == 0) m = field_id(f) + m.substr(std::string(flag).size());
  return Status(s.code(), m);
}

template <typename T>
Status assign(Result<T> parsed, T& out, Field f, St style) {
  if (!parsed.ok()) return restyle(parsed.status(), f, style);
  out = *std::move(parsed);
  return Status::Ok();
}

template <typename T>
Status assign_optional(Result<T> parsed, std::optional<T>& out, Field f, St style) {
  if (!parsed.ok()) return restyle(parsed.status(), f, style);
  out = *std::move(parsed);
  return Status::Ok();
}

Status non_negative_int(std::string_view t, int& out, Field f, St style) {
  VORTEX_RETURN_IF_ERROR(assign(parse_int_text(f, t), out, f, style));
  if (out < 0) return invalid_argument(name_in(f, style) + " must be >= 0, got " + std::string(t));
  return Status::Ok();
}

Status parse_seed(std::string_view t, S& s, St style) {
  if (t == "-1") {
    s.random_seed = true;
    return Status::Ok();
  }
  Result<uint64_t> v = parse_u64_text(Field::kSeed, t);
  if (!v.ok())
    return invalid_argument(name_in(Field::kSeed, style) + " expects a non-negative integer or -1 (random), got '" +
                            std::string(t) + "'");
  s.random_seed = false;
  s.run.seed = *v;
  return Status::Ok();
}

Status parse_gpus(std::string_view t, S& s, St style) {
  Result<int> v = parse_int_text(Field::kGpus, t);
  if (!v.ok() || *v < 1 || *v > 64)
    return invalid_argument(name_in(Field::kGpus, style) + " must be an integer between 1 and 64, got '" +
                            std::string(t) + "'");
  s.gpus = *v;
  return Status::Ok();
}

Status parse_comm_timeout(std::string_view t, S& s, St style) {
  const std::string text(t);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v > 0.0) || v > 86400.0)
    return invalid_argument(name_in(Field::kCommTimeout, style) + " expects seconds in (0, 86400], got '" + text + "'");
  s.comm_timeout_seconds = v;
  return Status::Ok();
}

Status parse_preset(std::string_view t, S& s, St style) {
  if (t != "turbo4")
    return invalid_argument(name_in(Field::kPreset, style) + " must be turbo4, got '" + std::string(t) + "'");
  s.preset = Preset::kTurbo4;
  return Status::Ok();
}

Status parse_lora_file(std::string_view t, S& s, St) {
  VORTEX_ASSIGN_OR_RETURN(LoraSpec spec, parse_lora_spec(t));
  s.load.loras.push_back(std::move(spec));
  return Status::Ok();
}

Status parse_crf(std::string_view t, S& s, St style) {
  return assign(parse_int_text(Field::kCrf, t), s.load.mp4_crf, Field::kCrf, style);
}

Status choice_of_synthetic_vae(std::string_view t, S& s, St style) {
  return assign(parse_synthetic_vae(t), s.load.synthetic_vae, Field::kSyntheticVae, style);
}

Status set_path(std::string& out, std::string_view t) {
  out = std::string(t);
  return Status::Ok();
}

// The model and weights rows.
void add_model_and_weights_rows(std::vector<RequestFlag>& t) {
  using K = FlagKind;
  using F = Field;
  constexpr FlagScope L = FlagScope::kLoad, R = FlagScope::kRun;
  (void)L, (void)R;
  const RequestFlag rows[] = {
      {"-m,--model", "model", F::kModel, L, K::kValue, "DIR",
       "The model folder (the MiniMax-H3 snapshot, or its FL2VA/ partition): transformer, text encoder, tokenizer "
       "(docs/checkpoints.md)",
       [](std::string_view t, S& s, St) { return set_path(s.model_dir, t); }},
      {"--config", "config", F::kConfig, L, K::kValue, "NAME", "Built-in config: h3-tiny | h3 (default h3-tiny)",
       [](std::string_view t, S& s, St) { return set_path(s.load.config_name, t); }},
      {"--checkpoint", "checkpoint", F::kCheckpoint, L, K::kValue, "FILE|DIR",
       "Weights: a .safetensors file, a .safetensors.index.json, or a folder (original or diffusers layout)",
       [](std::string_view t, S& s, St) { return set_path(s.load.checkpoint_path, t); }},
      {"--synthetic", "synthetic", F::kSynthetic, L, K::kSwitch, "",
       "Deterministic synthetic weights for --config (no file)",
       [](std::string_view, S& s, St) {
         s.load.synthetic_weights = true;
         return Status::Ok();
       }},
      {"--weights-seed", "weights_seed", F::kWeightsSeed, L, K::kValue, "INT",
       "Seed of the synthetic weights (default 0)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_u64_text(F::kWeightsSeed, t), s.load.weights_seed, F::kWeightsSeed, st);
       }},
  };
  for (const RequestFlag& r : rows) t.push_back(r);
}

// The text rows.
void add_text_rows(std::vector<RequestFlag>& t) {
  using K = FlagKind;
  using F = Field;
  constexpr FlagScope L = FlagScope::kLoad, R = FlagScope::kRun;
  (void)L, (void)R;
  const RequestFlag rows[] = {
      {"-p,--prompt", "prompt", F::kPrompt, R, K::kValue, "TEXT",
       "The prompt, encoded by the folder's Qwen3-VL text encoder",
       [](std::string_view t, S& s, St) { return set_path(s.run.prompt, t); }},
      {"--prompt-file", "prompt_file", F::kPromptFile, R, K::kValue, "FILE",
       "Read the prompt from a UTF-8 text file (for prompts too long for the command line)",
       [](std::string_view t, S& s, St) { return set_path(s.prompt_file, t); }},
      {"--text-embeddings", "text_embeddings", F::kTextEmbeddings, R, K::kValue, "FILE",
       "safetensors with one [L, text_dim] or [L, hidden] tensor, f32/bf16",
       [](std::string_view t, S& s, St) { return set_path(s.run.text_embeddings_path, t); }},
      {"--synthetic-text", "synthetic_text_rows", F::kSyntheticText, R, K::kValue, "INT",
       "N deterministic synthetic text rows (default 16)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_int_text(F::kSyntheticText, t), s.run.synthetic_text_rows, F::kSyntheticText, st);
       }},
      {"--text-layer", "text_layer", F::kTextLayer, L, K::kValue, "K",
       "hidden_states index the transformer reads (default: the pipeline config's, 50 for H3)",
       [](std::string_view t, S& s, St st) { return non_negative_int(t, s.text_layer, F::kTextLayer, st); }},
      {"--first-frame", "first_frame", F::kFirstFrame, R, K::kValue, "IMG",
       "fl2va: the first keyframe (PNG, JPEG or WebP), stretched onto the canvas (--width x --height, else its own "
       "aspect ratio at H3's 768 short edge); needs the video VAE (--model DIR, --vae DIR or --keyframe-vae DIR)",
       [](std::string_view t, S& s, St) { return set_path(s.run.keyframes.first, t); }},
      {"--last-frame", "last_frame", F::kLastFrame, R, K::kValue, "IMG",
       "fl2va: the last keyframe, cover-cropped onto the canvas (with or without --first-frame)",
       [](std::string_view t, S& s, St) { return set_path(s.run.keyframes.last, t); }},
      {"--ref", "ref", F::kReferences, R, K::kRepeated, "FILE",
       "ref2va: a reference (PNG/JPEG/WebP image, video with or without sound, or audio), repeatable; the order is the "
       "packed order; the kind comes from the file or an image:, video: or audio: prefix. Runs on the Ref2VA "
       "transformer (--model picks it); at most 9 images, 3 videos, 3 audio, 12 in all",
       [](std::string_view t, S& s, St) {
         s.run.references.emplace_back(t);
         return Status::Ok();
       }},
  };
  for (const RequestFlag& r : rows) t.push_back(r);
}

// The request rows.
void add_request_rows(std::vector<RequestFlag>& t) {
  using K = FlagKind;
  using F = Field;
  constexpr FlagScope L = FlagScope::kLoad, R = FlagScope::kRun;
  (void)L, (void)R;
  const RequestFlag rows[] = {
      {"--width", "width", F::kWidth, R, K::kValue, "INT",
       "Pixels, a multiple of 32, at most 8192 (default 448; with keyframes and neither --width nor --height, the "
       "first keyframe's canvas)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_int_text(F::kWidth, t), s.run.width, F::kWidth, st);
       }},
      {"--height", "height", F::kHeight, R, K::kValue, "INT", "Pixels, a multiple of 32, at most 8192 (default 256)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_int_text(F::kHeight, t), s.run.height, F::kHeight, st);
       }},
      {"--frames", "frames", F::kFrames, R, K::kValue, "INT", "Pixel frames, snapped up to 17n + 5 (default 22)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_int_text(F::kFrames, t), s.run.frames, F::kFrames, st);
       }},
      {"--seconds", "seconds", F::kSeconds, R, K::kValue, "FLOAT",
       "Duration at 24 fps instead of --frames (rounded up to 17n + 5 frames)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_positive_text(F::kSeconds, t, "seconds"), s.run.seconds, F::kSeconds, st);
       }},
      {"--steps", "steps", F::kSteps, R, K::kValue, "INT", "Denoising steps = model evaluations (default 12)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_int_text(F::kSteps, t), s.run.steps, F::kSteps, st);
       }},
      {"--schedule", "schedule", F::kSchedule, R, K::kValue, "NAME",
       "comfyui (ModelSamplingAV + simple, default) | diffusers (MiniMaxH3Scheduler), bit-identical tables",
       [](std::string_view t, S& s, St st) {
         return assign(parse_schedule_field(t), s.run.schedule, F::kSchedule, st);
       }},
      {"--sampler", "sampler", F::kSampler, R, K::kValue, "NAME",
       "euler | res_multistep (default: res_multistep for comfyui, euler for diffusers)",
       [](std::string_view t, S& s, St st) {
         return assign_optional(parse_sampler_field(t), s.run.sampler, F::kSampler, st);
       }},
      {"--seed", "seed", F::kSeed, R, K::kValue, "INT",
       "Noise seed (default 42; -1: a random seed, recorded in run.json)", parse_seed},
      {"--preset", "preset", F::kPreset, R, K::kValue, "NAME",
       "turbo4: 4 steps, shift 6 / 3, euler, for the Turbo LoRA given with --lora", parse_preset},
  };
  for (const RequestFlag& r : rows) t.push_back(r);
}

// The output rows.
void add_output_rows(std::vector<RequestFlag>& t) {
  using K = FlagKind;
  using F = Field;
  constexpr FlagScope L = FlagScope::kLoad, R = FlagScope::kRun;
  (void)L, (void)R;
  const RequestFlag rows[] = {
      {"-o,--out", "out", F::kOut, R, K::kValue, "DIR", "Output directory (required)",
       [](std::string_view t, S& s, St) { return set_path(s.out_dir, t); }},
      {"--overwrite", "overwrite", F::kNone, R, K::kSwitch, "",
       "Replace an --out directory holding a previous Vortex run (only that)",
       [](std::string_view, S& s, St) {
         s.overwrite = true;
         return Status::Ok();
       }},
      {"--latents-only", "latents_only", F::kNone, L, K::kSwitch, "",
       "With --model DIR: stop at the latents instead of decoding with the folder's vae/ and audio_vae/",
       [](std::string_view, S& s, St) {
         s.latents_only = true;
         return Status::Ok();
       }},
      {"--frames-dir", "frames_dir", F::kFramesDir, R, K::kValue, "DIR",
       "Also write every decoded frame as 8-bit RGB PNG here",
       [](std::string_view t, S& s, St) { return set_path(s.run.frames_dir, t); }},
      {"--quiet", "quiet", F::kNone, R, K::kSwitch, "", "No progress output",
       [](std::string_view, S& s, St) {
         s.quiet = true;
         return Status::Ok();
       }},
  };
  for (const RequestFlag& r : rows) t.push_back(r);
}

// The decoders rows.
void add_decoders_rows(std::vector<RequestFlag>& t) {
  using K = FlagKind;
  using F = Field;
  constexpr FlagScope L = FlagScope::kLoad, R = FlagScope::kRun;
  (void)L, (void)R;
  const RequestFlag rows[] = {
      {"--keyframe-vae", "keyframe_vae", F::kKeyframeVae, L, K::kValue, "DIR",
       "fl2va: the video VAE folder (diffusers layout) whose encoder encodes the keyframes (default: --vae, else the "
       "--model folder's vae/); needs no decoder",
       [](std::string_view t, S& s, St) { return set_path(s.load.keyframe_vae_dir, t); }},
      {"--vae", "vae", F::kVae, L, K::kValue, "DIR",
       "Video VAE folder, diffusers (the snapshot's vae/) or original (FL2VA/video_vae) layout: also decode to "
       "video.mp4",
       [](std::string_view t, S& s, St) { return set_path(s.load.vae_dir, t); }},
      {"--audio-vae", "audio_vae", F::kAudioVae, L, K::kValue, "DIR",
       "Audio VAE folder, diffusers (audio_vae/) or original (FL2VA/audio_vae) layout: also audio.wav",
       [](std::string_view t, S& s, St) { return set_path(s.load.audio_vae_dir, t); }},
      {"--synthetic-vae", "synthetic_vae", F::kSyntheticVae, L, K::kValue, "NAME",
       "tiny | full: deterministic synthetic decoders (media is noise)", choice_of_synthetic_vae},
      {"--vae-seed", "vae_seed", F::kVaeSeed, L, K::kValue, "INT", "Seed of the synthetic decoders (default 0)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_u64_text(F::kVaeSeed, t), s.load.synthetic_vae_seed, F::kVaeSeed, st);
       }},
      {"--no-tiling", "no_tiling", F::kNone, L, K::kSwitch, "",
       "Decode whole frames (not the released tiling; changes the pixels)",
       [](std::string_view, S& s, St) {
         s.load.vae_tiling = false;
         return Status::Ok();
       }},
      {"--crf", "crf", F::kCrf, L, K::kValue, "INT", "x264 constant rate factor of video.mp4 (default 18)", parse_crf},
      {"--video-encoder", "video_encoder", F::kVideoEncoder, L, K::kValue, "NAME",
       "auto | libx264 | h264_nvenc: video.mp4's H.264 encoder (auto: NVENC when the driver offers it, else libx264)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_video_encoder(t), s.load.mp4_video_encoder, F::kVideoEncoder, st);
       }},
      {"--x264-preset", "x264_preset", F::kX264Preset, L, K::kValue, "NAME",
       "libx264 preset of video.mp4, ultrafast .. placebo (default veryfast; docs/decode.md has each one's cost)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_x264_preset(t), s.load.mp4_x264_preset, F::kX264Preset, st);
       }},
  };
  for (const RequestFlag& r : rows) t.push_back(r);
}

// The backend and precision rows.
void add_backend_and_precision_rows(std::vector<RequestFlag>& t) {
  using K = FlagKind;
  using F = Field;
  constexpr FlagScope L = FlagScope::kLoad, R = FlagScope::kRun;
  (void)L, (void)R;
  const RequestFlag rows[] = {
      {"--backend", "backend", F::kBackend, L, K::kValue, "NAME", "cpu | cuda (default cpu)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_backend_kind(t, st), s.load.backend, F::kBackend, st);
       }},
      {"--threads", "threads", F::kThreads, L, K::kValue, "INT",
       "CPU threads, 0 = all cores, at most 4x the cores; results never depend on it",
       [](std::string_view t, S& s, St st) {
         return assign(parse_int_text(F::kThreads, t), s.load.threads, F::kThreads, st);
       }},
      {"--precision", "precision", F::kPrecision, L, K::kValue, "NAME",
       "bf16 | fp8 | nvfp4 | nvfp4-weight-only (GEMM precision; default bf16)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_precision_field(t, st), s.load.precision, F::kPrecision, st);
       }},
      {"--adaln-weights", "adaln_weights", F::kAdalnWeights, L, K::kValue, "PLACE",
       "auto | device | host: where the blocks' AdaLN projections live (host: page-locked memory, read once per "
       "request for all steps' tables; auto = host on cuda; same bytes either way)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_adaln_placement(t), s.load.adaln_weights, F::kAdalnWeights, st);
       }},
      {"--max-vram", "max_vram", F::kMaxVram, L, K::kValue, "GB",
       "device memory budget in GB (10^9 bytes) for weights, activations and workspaces, enforced by the allocator "
       "(default: the free device memory)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_positive_text(F::kMaxVram, t, "GB"), s.load.max_vram_gb, F::kMaxVram, st);
       }},
      {"--max-host-ram", "max_host_ram", F::kMaxHostRam, L, K::kValue, "GB",
       "page-locked host memory budget in GB (10^9 bytes) for weights kept in host memory; past it they stream from "
       "the checkpoint's files with direct reads (default: 90% of the available host memory)",
       [](std::string_view t, S& s, St st) {
         return assign(parse_positive_text(F::kMaxHostRam, t, "GB"), s.load.max_host_ram_gb, F::kMaxHostRam, st);
       }},
      {"--attention", "attention", F::kAttention, R, K::kValue, "NAME",
       "sdpa | sage2 | bf16-owned (default: the backend policy's; sdpa on the CPU)",
       [](std::string_view t, S& s, St st) {
         return assign_optional(parse_attention_field(t, st), s.run.attention, F::kAttention, st);
       }},
      {"--switches", "switches", F::kSwitches, L, K::kValue, "LIST",
       "run-time switches over the backend policy, e.g. fp8_gate_epilogue=1 (with --precision fp8)",
       [](std::string_view t, S& s, St) { return set_path(s.load.switches, t); }},
      {"--cuda-graph", "cuda_graph", F::kCudaGraph, L, K::kValue, "MODE",
       "off | on | auto: run each denoiser step as a replayed CUDA graph (cuda backend; bit-identical; default off, "
       "auto = requests of at most 4096 packed rows)",
       [](std::string_view t, S& s, St st) {
         return assign_optional(parse_cuda_graph(t), s.cuda_graph, F::kCudaGraph, st);
       }},
      {"--gpus", "gpus", F::kGpus, L, K::kValue, "N",
       "N GPUs: one rank process per GPU, Ulysses sequence parallelism over NCCL, latents identical to one GPU "
       "(--backend cuda; docs/multi_gpu.md)",
       parse_gpus},
      {"--comm-timeout", "comm_timeout", F::kCommTimeout, L, K::kValue, "S",
       "Seconds one collective may wait for the other ranks before the run fails (default 300)", parse_comm_timeout},
      {"--lora", "lora", F::kLoraFiles, L, K::kRepeated, "FILE[:SCALE]",
       "LoRA adapter FILE[:SCALE], repeatable; SCALE multiplies alpha/rank (default 1), or is the whole scale when the "
       "file's alpha is ambiguous (docs/lora.md)",
       parse_lora_file},
      {"--lora-allow-unmatched", "lora_allow_unmatched", F::kNone, L, K::kSwitch, "",
       "Skip LoRA keys that match no layer with a warning instead of failing",
       [](std::string_view, S& s, St) {
         s.load.lora_allow_unmatched = true;
         return Status::Ok();
       }},
      {"--lora-mode", "lora_mode", F::kLoraMode, L, K::kValue, "NAME",
       "merge (into the BF16 weights at load, default) | runtime (unmerged low-rank branch, BF16 only)",
       [](std::string_view t, S& s, St st) { return assign(parse_lora_mode(t), s.load.lora_mode, F::kLoraMode, st); }},
      {"--lora-dir", "lora_dir", F::kLoraDir, L, K::kValue, "DIR",
       "Folder of LoRA adapters that requests name in their \"lora\" field; applied per request as run-time branches, "
       "the base weights untouched (docs/lora.md)",
       [](std::string_view t, S& s, St) { return set_path(s.load.lora_dir, t); }},
  };
  for (const RequestFlag& r : rows) t.push_back(r);
}

const std::vector<RequestFlag>& table() {
  static const std::vector<RequestFlag> kTable = [] {
    std::vector<RequestFlag> t;
    add_model_and_weights_rows(t);
    add_text_rows(t);
    add_request_rows(t);
    add_output_rows(t);
    add_decoders_rows(t);
    add_backend_and_precision_rows(t);
    return t;
  }();
  return kTable;
}

}  // namespace

std::string RequestFlag::flag() const {
  const std::string_view n(names);
  const size_t comma = n.rfind(',');
  return std::string(comma == std::string_view::npos ? n : n.substr(comma + 1));
}

const std::vector<RequestFlag>& request_flags() { return table(); }

const RequestFlag* find_request_flag(std::string_view name) {
  for (const RequestFlag& f : table())
    if (name == f.id || name == f.flag()) return &f;
  return nullptr;
}

const RequestFlag* find_request_flag(Field field) {
  if (field == Field::kNone) return nullptr;
  for (const RequestFlag& f : table())
    if (f.field == field) return &f;
  return nullptr;
}

std::string field_id(Field field) {
  const char* json = field_json(field);
  if (json != nullptr && *json != '\0') return json;
  const char* flag = field_flag(field);
  if (flag == nullptr) return "";
  std::string id(flag);
  while (!id.empty() && id.front() == '-') id.erase(id.begin());
  for (char& c : id)
    if (c == '-') c = '_';
  return id;
}

Status apply_request_flag(const RequestFlag& flag, std::string_view text, RequestSpec& spec, FieldStyle style) {
  VORTEX_RETURN_IF_ERROR(flag.parse(text, spec, style));
  spec.given.insert(flag.flag());
  return Status::Ok();
}

}  // namespace vortex::api
