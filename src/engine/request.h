// The typed request: what a pipeline loads (PipelineOptions, fixed for its life) and what one run asks for
// (RunRequest), with every choice an enum, and the fields' identities (Field) that errors carry. Front ends fill
// these structs through one set of converters (parse_*_text for CLI strings, the JSON parser in
// src/serve/request.cpp) and render a field as `--flag` (FieldStyle::kFlag) or `json.field` (kJson).
// The checks here are the cheap ones, made before any file beyond existence checks is read.
// Tested in tests/engine/request_contract_test.cpp (every field's limits and error field, both dialects).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/exec_options.h"
#include "engine/conditioning.h"
#include "lora/lora.h"
#include "sampler/sampler.h"
#include "vortex/status.h"

namespace vortex {

enum class BackendKind : uint8_t { kCpu, kCuda };
const char* backend_kind_name(BackendKind b);  // "cpu" | "cuda"
// Where the blocks' AdaLN projections live (PipelineOptions::adaln_weights).
enum class AdalnPlacement : uint8_t { kAuto, kDevice, kHost };
const char* adaln_placement_name(AdalnPlacement p);  // "auto" | "device" | "host"
// Synthetic decoders (output is noise): none, or the tiny / full VAE configs.
enum class SyntheticVae : uint8_t { kNone, kTiny, kFull };
const char* synthetic_vae_name(SyntheticVae v);  // "" | "tiny" | "full"
// Load-time LoRA adapters: merged into the BF16 weights, or attached as run-time branches (docs/lora.md).
enum class LoraMode : uint8_t { kMerge, kRuntime };
const char* lora_mode_name(LoraMode m);  // "merge" | "runtime"

// Field names in messages: the CLI's flags ("--steps") or the HTTP API's JSON fields ("steps").
enum class FieldStyle { kFlag, kJson };

// Every field a front end can name. A field has a CLI flag, a JSON name, or both (field_flag / field_json).
enum class Field : uint8_t {
  kNone,    // no single field: the body or the command line as a whole
  kMemory,  // the request as a whole, against the memory it needs
  // What is loaded (PipelineOptions).
  kModel,
  kConfig,
  kCheckpoint,
  kSynthetic,
  kWeightsSeed,
  kBackend,
  kThreads,
  kDevice,
  kPrecision,  // load-time; a request may only restate it
  kSwitches,
  kCudaGraph,
  kAdalnWeights,
  kMaxVram,
  kMaxHostRam,
  kLoraFiles,  // load-time adapters (--lora FILE[:SCALE])
  kLoraMode,
  kLoraDir,
  kTextLayer,
  kVae,
  kAudioVae,
  kSyntheticVae,
  kVaeSeed,
  kCrf,
  kVideoEncoder,
  kX264Preset,
  kGpus,
  kCommTimeout,
  // One run (RunRequest).
  kPrompt,
  kPromptFile,
  kTextEmbeddings,
  kSyntheticText,
  kWidth,
  kHeight,
  kSize,         // JSON "WxH"
  kAspectRatio,  // JSON "W:H", with short_edge
  kShortEdge,
  kFrames,
  kSeconds,
  kSteps,
  kSchedule,
  kSampler,
  kSeed,
  kPreset,
  kAttention,
  kMedia,
  kLora,  // per-request adapters (serve, --lora-dir)
  kFramesDir,
  kFailAllocAfter,
  kOut,
  kFirstFrame,  // fl2va keyframes (serve: conditions[])
  kLastFrame,
  kReferences,   // ref2va references (--ref)
  kKeyframeVae,  // fl2va: the keyframes' encoder folder (--keyframe-vae)
};
// "--steps", or nullptr when the CLI has no flag for the field.
const char* field_flag(Field f);
// "steps", or nullptr when the JSON body has no such field ("" for kNone and kMemory).
const char* field_json(Field f);
// The field as `style` spells it; falls back to the other spelling when `style` has none.
std::string field_name(Field f, FieldStyle style);

// A rejected request: the field at fault and why. `unknown` holds a JSON key that is no field at all (field kNone).
struct FieldError {
  Field field = Field::kNone;
  Status status;
  std::string unknown;
};
// The JSON "field" of an error response: the field's JSON name, the unknown key, or "".
std::string field_json_name(const FieldError& e);

// ---- CLI strings -> typed values, one converter per kind; messages name the field's flag ----
Result<int> parse_int_text(Field f, std::string_view text);       // "--width expects an integer, got 'x'"
Result<uint64_t> parse_u64_text(Field f, std::string_view text);  // "... expects a non-negative integer ..."
Result<double> parse_positive_text(Field f, std::string_view text, const char* unit);  // finite, > 0
// Choices by name; the message names the field in `style` and lists the names.
Result<BackendKind> parse_backend_kind(std::string_view name, FieldStyle style = FieldStyle::kFlag);
Result<Precision> parse_precision_field(std::string_view name, FieldStyle style = FieldStyle::kFlag);
Result<AttentionKind> parse_attention_field(std::string_view name, FieldStyle style = FieldStyle::kFlag);
Result<AdalnPlacement> parse_adaln_placement(std::string_view name);
Result<SyntheticVae> parse_synthetic_vae(std::string_view name);  // "tiny" | "full"
Result<LoraMode> parse_lora_mode(std::string_view name);
Result<std::string> parse_video_encoder(std::string_view name);  // "auto" | "libx264" | "h264_nvenc"
Result<std::string> parse_x264_preset(std::string_view name);    // one of kX264Presets (src/media/mp4_writer.h)
Result<AvScheduleMode> parse_schedule_field(std::string_view name);
Result<SamplerKind> parse_sampler_field(std::string_view name);

// What is loaded, fixed for the pipeline's life.
struct PipelineOptions {
  // A built-in config name ("h3-tiny", "h3") or a checkpoint (file, index or folder). With
  // `synthetic_weights` the weights are generated on the backend from `weights_seed` (src/model/h3_spec.h).
  std::string config_name = "h3-tiny";
  std::string checkpoint_path;  // empty: use config_name
  bool synthetic_weights = false;
  uint64_t weights_seed = 0;
  BackendKind backend = BackendKind::kCpu;
  int threads = 0;  // CPU workers, 0 = all cores; results never depend on it
  int device = 0;   // CUDA device ordinal (--device N); the cpu backend takes only 0
  // GEMM precision: converts the weights at load, so a request can only restate it.
  Precision precision = Precision::kBf16;
  std::string nvfp4_fc2;  // precision nvfp4 only: PrecisionOptions::nvfp4_fc2 ("" = the policy's)
  // Run-time switches over the backend's policy (apply_switches syntax, e.g. "fused_gate_add=0,attention=sage2").
  std::string switches;
  // LoRA adapters (src/lora/lora.h, docs/lora.md): merged into the BF16 weights after loading, before the
  // precision conversion quantizes them (kMerge), or attached as run-time branches (kRuntime).
  std::vector<LoraSpec> loras;
  bool lora_allow_unmatched = false;
  LoraMode lora_mode = LoraMode::kMerge;
  // Per-request adapters (RunRequest::loras, `vortex serve --lora-dir DIR`): the folder requests name them in.
  // Non-empty: each run attaches its request's adapters as run-time branches (detaching the previous ones),
  // never merging, so the base weights stay as loaded. Excludes `loras`.
  std::string lora_dir;
  // The prompt path (engine/model_folder.h apply_model_folder fills these from `--model DIR`): a Qwen3-VL
  // text encoder folder, its tokenizer.json and the hidden-state index H3 reads (50). With a text encoder a
  // prompt is encoded for real (engine/prompt_encoder.h), on this pipeline's backend, before the
  // transformer is loaded (generate) and reused while the same prompt repeats.
  std::string model_dir;  // the --model folder, for run.json ("" without one)
  std::string text_encoder_dir;
  std::string tokenizer_path;
  int text_layer = -1;
  // Decoders (docs/outputs.md "Decoded media"): the video and audio VAE folders (diffusers or original
  // layout, src/vae/vae_checkpoint.h), or synthetic decoders (output is noise). Loaded, and so fully validated,
  // before the transformer's weights; a run then also writes video.mp4 + audio.wav.
  std::string vae_dir, audio_vae_dir;
  SyntheticVae synthetic_vae = SyntheticVae::kNone;
  uint64_t synthetic_vae_seed = 0;
  bool vae_tiling = true;  // the released spatial tiling; off changes the pixels
  // fl2va: the video VAE folder (diffusers layout) whose encoder encodes keyframes; empty: vae_dir.
  std::string keyframe_vae_dir;
  const std::string& encoder_vae_dir() const { return keyframe_vae_dir.empty() ? vae_dir : keyframe_vae_dir; }
  // ref2va: the audio VAE folder (diffusers layout) whose encoder encodes soundtracks; empty: audio_vae_dir.
  std::string reference_audio_vae_dir;
  const std::string& reference_audio_encoder_dir() const {
    return reference_audio_vae_dir.empty() ? audio_vae_dir : reference_audio_vae_dir;
  }
  // Where the blocks' AdaLN projections (adaln_proj.linear: 13.0 B of h3's 33 B parameters, 26 GB in BF16) live:
  // kHost (page-locked host memory; each request uploads each weight once, before step 1, to compute the tables
  // of its whole schedule: H3Model::precompute_adaln), kDevice, or kAuto (host on a GPU backend; on the cpu
  // backend the device is the host). The tables and so the latents are the same bytes either way.
  AdalnPlacement adaln_weights = AdalnPlacement::kAuto;
  // Device memory budget in GB (10^9 bytes) for everything Vortex allocates on the device (--max-vram): weights,
  // activations, workspaces. The backend's allocator enforces it (an allocation past it fails with kOutOfMemory);
  // the residency plan and every request's estimate are checked against it first. 0: the free device memory.
  double max_vram_gb = 0.0;
  // Page-locked host memory budget in GB (10^9 bytes) for weights kept in host memory; 0: 90% of the available host
  // memory. Weights past it stream from the checkpoint's files (residency.h apply_host_budget).
  double max_host_ram_gb = 0.0;
  bool adaln_weights_on_host() const {
    return backend != BackendKind::kCpu && adaln_weights != AdalnPlacement::kDevice;
  }
  int mp4_crf = 18;  // x264 constant rate factor of video.mp4
  // video.mp4's H.264 encoder ("auto" | "libx264" | "h264_nvenc") and libx264 preset; an empty preset keeps
  // Mp4Options's default (src/media/mp4_writer.h).
  std::string mp4_video_encoder = "auto";
  std::string mp4_x264_preset;
  bool wants_decoders() const {
    return !vae_dir.empty() || !audio_vae_dir.empty() || synthetic_vae != SyntheticVae::kNone;
  }
};

// One request on a loaded pipeline.
struct RunRequest {
  // Text conditioning, first that applies: a safetensors file with one 2-D tensor [L, text_dim] (raw
  // Qwen3-VL layer-50 states) or [L, hidden] (refined), F32/BF16; else, with synthetic weights and no
  // text encoder, a prompt's synthetic rows (synthetic_prompt_states); else `synthetic_text_rows`
  // synthetic raw states of `seed` (synthetic_text_states).
  std::string text_embeddings_path;
  std::string prompt;
  int synthetic_text_rows = 16;

  int width = 448, height = 256, frames = 22;  // pixels; frames snap up to 17n + 5 (src/model/packing.h)
  double seconds = 0.0;                        // > 0: frames = ceil(24 * seconds), snapped up (replaces frames)
  int steps = 12;                              // model evaluations
  AvScheduleMode schedule = AvScheduleMode::kComfyParity;  // src/sampler/sampler.h
  std::optional<SamplerKind> sampler;                      // unset: the schedule's default
  uint64_t seed = 42;                                      // noise (and synthetic text) seed
  std::optional<AttentionKind> attention;                  // unset: the pipeline's
  std::optional<Precision> precision;                      // unset or the loaded precision (a load-time choice)
  // Run-time LoRA adapters for this request alone (PipelineOptions::lora_dir must be set; paths, as the server
  // resolves them there): attached as branches before the run, the base weights untouched (docs/lora.md).
  std::vector<LoraSpec> loras;
  // > 0: the flow shifts instead of the config's (--preset turbo4: video 6, audio 3).
  double video_shift = 0.0, audio_shift = 0.0;
  // Decoded media (video.mp4, audio.wav) beside the latents: unset = whenever the pipeline holds decoders;
  // true without decoders is a request error; false keeps a run to latents.
  std::optional<bool> media;
  std::string frames_dir;  // with media: also every frame as frame_00000.png ... (published on its own)
  bool frames_overwrite = false;
  // fl2va (engine/conditioning.h): a first and/or last keyframe image, placed on the width x height canvas. Empty:
  // t2va. Checked (probe_image, not a Ref2VA transformer, a video VAE given) by check_run_request.
  KeyframeFiles keyframes;
  // ref2va (engine/references.h): the references in packed order, each a path with an optional "image:", "video:" or
  // "audio:" prefix. Checked (headers, the set's limits, the Ref2VA transformer, the encoders) by check_run_request.
  std::vector<std::string> references;
  // fl2va with neither width nor height given: the planner takes the canvas from the first keyframe
  // (keyframe_canvas, engine/conditioning.h), as diffusers' MiniMaxH3ResizeStep does; width and height are ignored.
  bool canvas_from_keyframe = false;
  // Fault injection: the allocation after this many successful ones fails with kOutOfMemory, through
  // the backend's own allocation path (Backend::inject_alloc_failure). -1: off.
  int fail_alloc_after = -1;
};

// Limits of a request's fields (check_run_request).
constexpr int kMaxSteps = 1000;
constexpr int kMaxSyntheticTextRows = 4096;
// Pixels per side: 6x the canonical 1344. Larger is a typo (--width 1048576) that would otherwise pass
// the row limit for a small config and then spend minutes before failing.
constexpr int kMaxSidePixels = 8192;

// Load-time options: weights source, thread count, decoders, budgets. Cheap: touches no file beyond existence
// checks.
Status validate_pipeline_options(const PipelineOptions& options);
// The part of validate_pipeline_options about PipelineOptions::lora_dir (a directory, no load-time adapters,
// BF16 weights); the multi-GPU launcher runs it before any rank starts.
Status validate_lora_dir_options(const PipelineOptions& options);
// The per-request fields against what `options` loads: ranges, backend support, exclusive fields. In the CLI's
// order; the first failure wins. Messages name fields in `style`.
std::optional<FieldError> check_run_request(const RunRequest& request, const PipelineOptions& options,
                                            FieldStyle style);

}  // namespace vortex
