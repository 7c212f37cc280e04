// Pipeline: one resident H3 model (backend, weights, model, and when named the text encoder and the VAE
// decoders) loaded once, then `run` per request. `vortex generate` is open + load + run + publish,
// `vortex serve` keeps one Pipeline for its whole life and runs its jobs on it one at a time.
// Load-time choices (weights, precision, backend, threads) live in PipelineOptions; per-request choices
// (size, frames, steps, seed, schedule, attention, text) in RunRequest, checked by the same functions for
// the CLI and the HTTP API (only the field names in messages differ: FieldStyle).
// Tested through generate (tests/cli/cli_test.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "engine/memory_estimate.h"
#include "engine/residency.h"
#include "lora/lora.h"
#include "model/h3_model.h"
#include "model/packing.h"
#include "sampler/sampler.h"
#include "text_encoder/text_encoder.h"
#include "vae/audio_vae.h"
#include "vae/video_vae.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

// What is loaded, fixed for the pipeline's life.
struct PipelineOptions {
  // A built-in config name ("h3-tiny", "h3") or a checkpoint (file, index or folder). With
  // `synthetic_weights` the weights are generated on the backend from `weights_seed` (src/model/h3_spec.h).
  std::string config_name = "h3-tiny";
  std::string checkpoint_path;  // empty: use config_name
  bool synthetic_weights = false;
  uint64_t weights_seed = 0;
  std::string backend = "cpu";  // "cpu" | "cuda"
  int threads = 0;              // CPU workers, 0 = all cores; results never depend on it
  int device = 0;               // CUDA device ordinal (--device N); the cpu backend takes only 0
  // GEMM precision: converts the weights at load, so a request can only restate it.
  std::string precision = "bf16";
  std::string nvfp4_fc2;  // precision nvfp4 only: PrecisionOptions::nvfp4_fc2 ("" = the policy's)
  // Run-time switches over the backend's policy (apply_switches syntax, e.g. "fused_gate_add=0,attention=sage2").
  std::string switches;
  // LoRA adapters (src/lora/lora.h, docs/lora.md): merged into the BF16 weights after loading, before the
  // precision conversion quantizes them (mode "merge"), or attached as run-time branches (mode "runtime").
  std::vector<LoraSpec> loras;
  bool lora_allow_unmatched = false;
  std::string lora_mode = "merge";
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
  // layout, src/vae/vae_checkpoint.h), or synthetic decoders ("tiny" | "full", output is noise). Loaded,
  // and so fully validated, before the transformer's weights; a run then also writes video.mp4 + audio.wav.
  std::string vae_dir, audio_vae_dir;
  std::string synthetic_vae;
  uint64_t synthetic_vae_seed = 0;
  bool vae_tiling = true;  // the released spatial tiling; off changes the pixels
  // Where the blocks' AdaLN projections (adaln_proj.linear: 13.0 B of h3's 33 B parameters, 26 GB in BF16) live:
  // "host" (page-locked host memory; each request uploads each weight once, before step 1, to compute the tables
  // of its whole schedule: H3Model::precompute_adaln), "device", or "auto" (host on a GPU backend; on the cpu
  // backend the device is the host). The tables and so the latents are the same bytes either way.
  std::string adaln_weights = "auto";
  // Device memory budget in GB (10^9 bytes) for everything Vortex allocates on the device (--max-vram): weights,
  // activations, workspaces. The backend's allocator enforces it (an allocation past it fails with kOutOfMemory);
  // the residency plan and every request's estimate are checked against it first. 0: the free device memory.
  double max_vram_gb = 0.0;
  bool adaln_weights_on_host() const {
    return backend != "cpu" && (adaln_weights == "host" || adaln_weights == "auto");
  }
  int mp4_crf = 18;  // x264 constant rate factor of video.mp4
  bool wants_decoders() const { return !vae_dir.empty() || !audio_vae_dir.empty() || !synthetic_vae.empty(); }
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
  std::string schedule = "comfyui";            // "comfyui" | "diffusers" (src/sampler/sampler.h)
  std::string sampler;                         // "euler" | "res_multistep"; empty: the schedule's default
  uint64_t seed = 42;                          // noise (and synthetic text) seed
  std::string attention;                       // "sdpa" | "sage2"; empty: the pipeline's
  std::string precision;                       // empty or the loaded precision (a load-time choice)
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
  // Fault injection: the allocation after this many successful ones fails with kOutOfMemory, through
  // the backend's own allocation path (Backend::inject_alloc_failure). -1: off.
  int fail_alloc_after = -1;
};

// Field names in messages: the CLI's flags ("--steps") or the HTTP API's JSON fields ("steps").
enum class FieldStyle { kFlag, kJson };

// A rejected request: the field at fault (in the FieldStyle's spelling; empty when no single field is)
// and why.
struct FieldError {
  std::string field;
  Status status;
};

// What the ranks decided about a job's adapters (Pipeline::agree_request_loras), the same on every rank.
struct AdapterVerdict {
  Status status;  // OK: the job may run; else why not
};

// Load-time options: weights source, backend name, thread count, precision name (the CLI's flags name
// them). Cheap: touches no file beyond existence checks.
Status validate_pipeline_options(const PipelineOptions& options);
// The part of validate_pipeline_options about PipelineOptions::lora_dir (a directory, no load-time adapters,
// BF16 weights); the multi-GPU launcher runs it before any rank starts.
Status validate_lora_dir_options(const PipelineOptions& options);
// The per-request fields against what `options` loads: ranges, names, backend support. In the CLI's
// order; the first failure wins.
std::optional<FieldError> check_run_request(const RunRequest& request, const PipelineOptions& options,
                                            FieldStyle style);
// The model config `options` names: a built-in config, or the one a checkpoint brings (its config.json,
// else inferred from its tensors), validated.
Result<ModelConfig> resolve_model_config(const PipelineOptions& options);

// Everything a request needs before any weight is touched: the text, the geometry and packed layout,
// the schedule and the memory estimate.
struct RunPlan {
  RunRequest request;
  ModelConfig cfg;
  // host [L, text_dim] or [L, hidden], f32 or bf16. Undefined for a prompt the text encoder has yet to
  // encode (Pipeline::encode_prompt fills it; Pipeline::run does when the caller has not).
  Tensor text;
  std::string text_source;        // "embeddings" | "prompt" | "synthetic"
  std::vector<int32_t> text_ids;  // the prompt's t2va presentation, when a text encoder conditions on it
  RequestGeometry geo;
  PackedLayout layout;
  SamplerSpec spec;
  SamplerKind sampler_kind = SamplerKind::kResMultistep;
  AvScheduleMode schedule_mode = AvScheduleMode::kComfyParity;
  AvSchedule schedule;
  MemoryEstimate memory;
  int workers = 1;
};

// Progress reports from a run; the CLI draws a bar, the server updates the job's status.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // A phase begins ("loading weights", "preparing text and positions", "sampling", "writing outputs").
  virtual void stage(std::string_view what) { (void)what; }
  // Something the user should know that does not stop the run (e.g. a frame count snapped up).
  virtual void note(std::string_view what) { (void)what; }
  // Something the user should know that does not stop the run (e.g. a CPU run estimated at hours).
  virtual void warning(std::string_view what) { (void)what; }
  // Denoising step `done` of `total` finished (1-based) after `step_seconds`; `elapsed_seconds` since
  // sampling began.
  virtual void step(int done, int total, double step_seconds, double elapsed_seconds) {
    (void)done, (void)total, (void)step_seconds, (void)elapsed_seconds;
  }
  // Weights of `what` ("text encoder") loading: bytes and layers so far, seconds since it began.
  virtual void loading(std::string_view what, uint64_t bytes_done, uint64_t bytes_total, int layers_done,
                       int layers_total, double seconds) {
    (void)what, (void)bytes_done, (void)bytes_total, (void)layers_done, (void)layers_total, (void)seconds;
  }
  // Decode progress: `stage` "video" (tile forwards) or "audio" (stereo channels), `done` of `total`,
  // `elapsed_seconds` since decoding began.
  virtual void decode(std::string_view stage, int64_t done, int64_t total, double elapsed_seconds) {
    (void)stage, (void)done, (void)total, (void)elapsed_seconds;
  }
};

// Set from any thread; a run stops at the next transformer-block boundary with kCancelled.
class CancelToken {
 public:
  void cancel() { flag_.store(true); }
  bool cancelled() const { return flag_.load(); }
  const std::atomic<bool>* flag() const { return &flag_; }

 private:
  std::atomic<bool> flag_{false};
};

// Builds the plan of `request` on `cfg` (checks check_run_request has not: schedule and sampler names,
// --seconds, the text file, geometry, the packed-row limit) and, on the CPU backend, checks the estimate
// against the free host memory. `weights_resident`: the weights are already loaded (and so already out
// of the free memory), so the estimate leaves them out. On failure `failed_field` (when given) names the
// field at fault in `style`.
Result<RunPlan> plan_run(const ModelConfig& cfg, const PipelineOptions& options, const RunRequest& request,
                         ProgressSink& progress, bool weights_resident, FieldStyle style,
                         std::string* failed_field = nullptr);

struct RunOutputs {
  std::vector<std::string> files;  // names inside the output directory, run.json last
  RequestGeometry geo;
  std::vector<double> step_seconds;  // one per denoising step
  double prepare_seconds = 0.0;
  double sampling_seconds = 0.0;
  double decode_seconds = 0.0;  // video + audio decode and media writing; 0 without media
  double run_seconds = 0.0;     // prepare + sampling + outputs
};

class Pipeline {
 public:
  // Validates `options`, resolves the config and makes the backend; no weights yet.
  static Result<std::unique_ptr<Pipeline>> open(const PipelineOptions& options);
  // open + load_weights.
  static Result<std::unique_ptr<Pipeline>> load(const PipelineOptions& options, ProgressSink& progress);

  // Loads (or synthesizes) the decoders the options name, then the weights; applies the precision and builds
  // the resident model.
  Status load_weights(ProgressSink& progress);
  // The decoders alone (load_weights calls it first, so a bad VAE folder fails before the transformer loads).
  Status load_decoders(ProgressSink& progress);
  bool has_decoders() const { return video_vae_ != nullptr && audio_vae_ != nullptr; }

  const PipelineOptions& options() const { return options_; }
  const ModelConfig& config() const { return cfg_; }
  Backend& backend() { return *backend_; }
  const ExecOptions& exec_options() const { return exec_; }  // the switches in force (override rule)
  // The residency plan of this pipeline (engine/residency.h): load_weights prints and checks it before loading,
  // and streams the blocks it does not keep resident.
  // `reserve`: the activations to keep room for (default: reserve_for's, else the canonical request's).
  Result<ResidencyPlan> residency_plan(std::optional<uint64_t> reserve = std::nullopt) const;
  // Keeps `plan`'s activations free when placing the weights (a one-shot generate knows its request before loading);
  // without it the pipeline keeps the canonical request's (canonical_activation_bytes).
  void reserve_for(const RunPlan& plan);
  bool weights_loaded() const { return model_ != nullptr; }
  H3Model& model() { return *model_; }  // after load_weights
  double load_seconds() const { return load_seconds_; }

  // check_run_request + plan_run on this pipeline's config, then (off the CPU) the estimate against the
  // free device memory.
  Result<RunPlan> plan(const RunRequest& request, ProgressSink& progress, FieldStyle style,
                       std::string* failed_field = nullptr) const;
  // With decoders loaded and media wanted (RunRequest::media unset or true): kInvalidArgument when the video
  // VAE cannot decode the plan's latent frames (fewer than one clip), before any sampling.
  Status check_decodable(const RunPlan& plan, FieldStyle style) const;
  // kInvalidArgument with the numbers when the plan does not fit the backend's free device memory (no-op
  // on the CPU backend, whose host memory plan_run checked). Before the weights are loaded, the weights count as the
  // residency plan places them (host-resident AdaLN projections and streamed blocks left out).
  Status check_device_fit(const RunPlan& plan) const;

  // Samples `plan` on the resident model and writes the outputs of docs/outputs.md (video and audio
  // latents, preview.png, with decoders and media video.mp4 + audio.wav, run.json) into `dir`, an existing empty
  // directory the caller publishes atomically (it renames `dir` into place only on success). kCancelled when `cancel`
  // fires. run.json's total_seconds is `seconds_before` (the caller's time spent on this request before run) plus
  // run's own.
  Result<RunOutputs> run(const RunPlan& plan, ProgressSink& progress, const CancelToken& cancel, const std::string& dir,
                         double seconds_before = 0.0);

  // Per-request adapters with ranks (the model has a communicator; docs/multi_gpu.md "Adapters"): every rank
  // calls it with the job's request before run(). Attaches `request.loras` on this rank as run() would (each
  // rank resolved the names in its own lora_dir), then all ranks all-gather what they attached (an error, or
  // per adapter the file name, byte size and SHA-256 of the file and of an adapter_config.json beside it,
  // taken when the file was loaded) and judge it the same way: the job may run only when every rank attached
  // and every fingerprint equals rank 0's. The outer error: the exchange itself failed (the ranks no longer
  // agree on the collective sequence). The value: the verdict, the same on every rank: OK, or why the job
  // cannot run, naming the rank and the file; after a failed verdict every rank has detached its adapters and
  // none has entered sampling, so the world can run the next job.
  Result<AdapterVerdict> agree_request_loras(const RunRequest& request, ProgressSink& progress);

  // Fills plan.text for a prompt the text encoder conditions on: from the cache when this pipeline encoded
  // the same ids before, else on the conditioner's first K layers (loaded on the backend after checking they fit
  // the free memory, unless still resident), then encodes. Residency: before the transformer is loaded (a one-shot
  // generate) the conditioner is freed again, so the two never share the memory; once the transformer is resident
  // (serve) the conditioner stays when the memory free beside it still covers `plan`'s estimate, so the next new
  // prompt costs no reload; run() frees it when a later plan needs its memory. A no-op for any other text source or
  // an already filled plan.
  Status encode_prompt(RunPlan& plan, ProgressSink& progress);
  bool has_text_encoder() const { return !options_.text_encoder_dir.empty(); }
  int conditioner_runs() const { return conditioner_runs_; }    // encodings computed (cache misses)
  int conditioner_loads() const { return conditioner_loads_; }  // times its weights were loaded
  bool conditioner_resident() const { return text_encoder_ != nullptr; }

 private:
  // `keep_need`: the bytes a run needs beside the resident conditioner for it to stay (encode_prompt).
  Result<Tensor> encode_ids(const std::vector<int32_t>& ids, ProgressSink& progress, uint64_t keep_need);
  // Memory free for this backend's work: the device's (GPU backends) or the host's (cpu); nullopt when unknown.
  std::optional<uint64_t> free_memory() const;
  // Frees the resident conditioner when `need` does not fit the free memory beside it.
  void make_room_for(uint64_t need);
  Pipeline() = default;
  PipelineOptions options_;
  ModelConfig cfg_;
  std::unique_ptr<Backend> backend_;
  ExecOptions exec_;
  double load_seconds_ = 0.0;
  // The resident denoiser and, when the options name them, the decoders (run() then adds the MP4 and WAV).
  std::unique_ptr<H3Model> model_;
  std::unique_ptr<VideoVae> video_vae_;
  std::unique_ptr<AudioVae> audio_vae_;
  std::string decoders_source_;  // run.json decode.vae: the folders or "synthetic-tiny|full"
  double decoders_load_seconds_ = 0.0;
  uint64_t decoders_device_bytes_ = 0;                                      // what load_decoders added to the device
  std::optional<uint64_t> reserve_bytes_;                                   // reserve_for's activations
  nlohmann::ordered_json lora_manifest_ = nlohmann::ordered_json::array();  // run.json "lora"
  // Per-request adapters (options_.lora_dir): attaches `request.loras` unless they are the ones attached.
  Status switch_request_loras(const RunRequest& request, ProgressSink& progress);
  bool request_loras_attached(const RunRequest& request) const;
  void detach_request_loras();
  std::vector<LoraSpec> attached_request_loras_;  // what the branches hold now
  // With ranks: per attached adapter, {"name", "bytes", "sha256", "adapter_config_sha256"} of the file as it
  // was loaded (agree_request_loras compares them across ranks).
  nlohmann::ordered_json attached_fingerprints_ = nlohmann::ordered_json::array();
  // Encodings by token ids (the layer is fixed for the pipeline): host [L, hidden] bf16, a few entries
  // (oldest dropped first) so a server alternating prompts does not re-run the conditioner each time.
  static constexpr size_t kMaxCachedEncodings = 16;
  std::vector<std::pair<std::vector<int32_t>, Tensor>> encodings_;
  int conditioner_runs_ = 0;
  int conditioner_loads_ = 0;
  // The conditioner kept resident beside the transformer (encode_prompt), and its weight bytes.
  std::unique_ptr<TextEncoder> text_encoder_;
  uint64_t text_encoder_bytes_ = 0;
  double encode_seconds_ = 0.0;  // the last encode_ids call (0 for a cache hit)
};

// Rank 0's `cancel` broadcast to every rank of `comm` (a one-byte broadcast on `backend`'s device): true on
// every rank when rank 0's token has fired. Pipeline::run calls it before every model evaluation of a run
// with ranks, so all ranks stop at the same step.
Result<bool> agreed_cancel(Communicator& comm, Backend& backend, const CancelToken& cancel);

// Every rank's `mine` (host bytes, 1 byte to 16 MiB) on every rank, in rank order: the sizes, then the bytes, by
// two all-gathers through tensors on `backend`'s device (NCCL moves device memory); `what` names the exchange in
// errors.
Result<std::vector<std::string>> all_gather_bytes(Communicator& comm, Backend& backend, const std::string& mine,
                                                  const std::string& what);

// The override rule for run-time switches, shared by generate, serve, bench and gate
// (docs/architecture.md "Switches, policy and gates"): start from the backend's policy table, set the
// loaded precision, then apply the caller's explicit switches in order; a switch nobody names keeps the
// policy's value.
Result<ExecOptions> resolve_exec_options(const ExecOptions& policy, const std::string& precision,
                                         const std::string& switches);

// The sampler a schedule runs when none is named: res_multistep for comfyui (ComfyUI's H3 workflow),
// euler for diffusers (MiniMaxH3Scheduler's only update).
const char* default_sampler_for_schedule(AvScheduleMode mode);

// Initial noise (the noise contract, docs/outputs.md): ONE Gaussian stream of `seed`
// (src/core/rng.h gaussian_noise), video first then audio: video element i (flattened [24, T, H, W])
// is stream element i, audio element j (flattened [2, 32, Ta]) is stream element video_size + j.
AvLatents initial_noise(const ModelConfig& cfg, const RequestGeometry& geo, uint64_t seed);

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

// A loader error about a --checkpoint with advice that fits it: the loader suggests "--config", but a
// checkpoint brings its own config (the config.json beside it, or shapes inferred from the tensors).
Status with_checkpoint_advice(const Status& status, const std::string& checkpoint_path);

}  // namespace vortex
