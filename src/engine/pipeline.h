// Pipeline: one resident H3 model (backend, weights, model, and when the options name them the text encoder and
// the VAE decoders) loaded once, then `run` per request. `vortex generate` is plan + open + load + run + publish,
// `vortex serve` keeps one Pipeline for its whole life and runs its jobs on it one at a time.
// Load-time choices live in PipelineOptions, per-request ones in RunRequest (engine/request.h); a request becomes a
// RunPlan through the pipeline's Planner (engine/planner.h), the one request path of the CLI and the HTTP API.
// Tested through generate (tests/cli/cli_test.cpp) and tests/engine/request_contract_test.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "engine/conditioning.h"
#include "engine/memory_estimate.h"
#include "engine/planner.h"
#include "engine/progress_sink.h"
#include "engine/request.h"
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

// What the ranks decided about a job's adapters (Pipeline::agree_request_loras), the same on every rank.
struct AdapterVerdict {
  Status status;  // OK: the job may run; else why not
};

class BackgroundLoad;  // engine/load_overlap.h
struct PreparedRun;    // engine/pipeline_run.cpp: what prepare_run hands to sampling and run.json
class OutputRecord;    // engine/run_outputs.h

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
  // Makes the backend for `planner`'s options (validated and resolved by Planner::create); no weights yet.
  static Result<std::unique_ptr<Pipeline>> open(Planner planner);
  // Planner::create + open.
  static Result<std::unique_ptr<Pipeline>> open(const PipelineOptions& options);
  // open + load_weights.
  static Result<std::unique_ptr<Pipeline>> load(const PipelineOptions& options, ProgressSink& progress);

  // Loads (or synthesizes) the decoders the options name, then the weights; applies the precision and builds
  // the resident model. After begin_load decided to overlap: starts the background load (when begin_load did not)
  // and returns with the model usable, its blocks still arriving.
  Status load_weights(ProgressSink& progress);
  // A one-shot generate's load order (docs/memory.md "Overlapped loading"), decided before any weight loads and
  // printed with the residency plan: when overlap applies (load_overlap_refusal is empty) the transformer loads on a
  // thread of its own and run() waits for each block before its first use; the text encoder runs beside that load
  // when the budget holds both (then the load starts here, before encode_prompt), else the load starts in
  // load_weights, after the prompt is encoded. `plan`: the request (its text ids size the text encoder's
  // activations). `ranks`: a run with ranks loads sequentially. Without a call, load_weights loads sequentially.
  Status begin_load(const RunPlan& plan, ProgressSink& progress, bool ranks);
  // Waits for a background load to end; its error, and its notes into `progress`. A no-op without one.
  Status finish_load(ProgressSink& progress);
  // Test hook: runs on the loader thread before each group of weights is published (load_overlap.h).
  void set_load_hook(std::function<void(int group)> hook) { load_hook_ = std::move(hook); }
  bool load_overlapped() const { return load_order_.overlapped; }
  ~Pipeline();
  // The decoders alone (load_weights calls it first, so a bad VAE folder fails before the transformer loads).
  Status load_decoders(ProgressSink& progress);
  bool has_decoders() const { return video_vae_ != nullptr && audio_vae_ != nullptr; }

  const PipelineOptions& options() const { return options_; }
  // The request path of this pipeline (const, any thread): it knows the decoders once load_decoders has run and
  // leaves the weights out of the estimate once load_weights has.
  const Planner& planner() const { return planner_; }
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

  // planner().plan, then (off the CPU) the estimate against the free device memory (check_device_fit).
  Result<RunPlan> plan(const RunRequest& request, ProgressSink& progress, FieldStyle style,
                       Field* failed_field = nullptr) const;
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
  // an already filled plan. `cancel` (may be null) is read between the conditioner's layer loads and between its
  // layers (TextEncodeControl): a cancel ends it with kCancelled and leaves the plan unfilled.
  Status encode_prompt(RunPlan& plan, ProgressSink& progress, const CancelToken* cancel = nullptr);
  bool has_text_encoder() const { return !options_.text_encoder_dir.empty(); }
  int conditioner_runs() const { return conditioner_runs_; }    // encodings computed (cache misses)
  int conditioner_loads() const { return conditioner_loads_; }  // times its weights were loaded
  bool conditioner_resident() const { return text_encoder_ != nullptr; }

 private:
  // run()'s stages (engine/pipeline_run.cpp): adapters, text, keyframe rows, the model's prepare and AdaLN tables;
  // the tables alone (their seconds); sampling from the seed's noise (step and sampling seconds into `result`);
  // the media decode into `record`'s directory (its run.json "decode" section).
  Result<PreparedRun> prepare_run(const RunPlan& plan, ProgressSink& progress, const CancelToken& cancel);
  Result<double> precompute_tables(const RunPlan& plan, const ExecOptions& exec, ProgressSink& progress);
  Result<AvLatents> sample_run(const RunPlan& plan, ProgressSink& progress, const CancelToken& cancel,
                               RunOutputs& result);
  Result<nlohmann::ordered_json> decode_media(const Tensor& video, const Tensor& audio, const RunRequest& req,
                                              ProgressSink& progress, const CancelToken& cancel, OutputRecord& record,
                                              double& decode_seconds);
  // `keep_need`: the bytes a run needs beside the resident conditioner for it to stay (encode_prompt). With `vision`
  // (fl2va keyframes, `positions` their M-RoPE positions) the encoding is not cached: the same ids carry other images.
  Result<Tensor> encode_ids(const std::vector<int32_t>& ids, ProgressSink& progress, uint64_t keep_need,
                            const CancelToken* cancel, const VisionEmbeddings* vision = nullptr,
                            const Tensor* positions = nullptr);
  // fl2va: the keyframes' vision embeddings for `plan` (read, placed, processor, vision tower).
  Result<VisionEmbeddings> keyframe_vision_for(const RunPlan& plan, ProgressSink& progress);
  // fl2va: the keyframe rows of `plan` (read, placed, the video VAE's encoder, noised from the request's seed).
  Result<Tensor> keyframe_rows_for(const RunPlan& plan, ProgressSink& progress, uint64_t noise_offset);
  std::unique_ptr<VideoVaeEncoder> vae_encoder_;  // loaded by the first fl2va request
  std::unique_ptr<VisionTower> vision_tower_;     // loaded by the first fl2va request with a text encoder
  // ref2va (engine/pipeline_references.cpp): the references' vision embeddings for the conditioner, and their rows
  // (the video VAE encoder on images and video frames, the audio VAE encoder on soundtracks, each loaded by the first
  // request that needs it).
  Result<VisionEmbeddings> reference_vision_for(const RunPlan& plan, ProgressSink& progress);
  Result<ReferenceRows> reference_rows_for(const RunPlan& plan, ProgressSink& progress, uint64_t noise_offset);
  Status load_vision_tower_once(ProgressSink& progress);
  std::unique_ptr<AudioVaeEncoder> audio_encoder_;  // loaded by the first ref2va request with a soundtrack
  // Memory free for this backend's work: the device's (GPU backends) or the host's (cpu); nullopt when unknown.
  std::optional<uint64_t> free_memory() const;
  // Frees the resident conditioner when `need` does not fit the free memory beside it.
  void make_room_for(uint64_t need);
  explicit Pipeline(Planner planner)
      : planner_(std::move(planner)), options_(planner_.options()), cfg_(planner_.config()) {}
  Planner planner_;
  const PipelineOptions& options_;  // planner_'s
  const ModelConfig& cfg_;          // planner_'s
  std::unique_ptr<Backend> backend_;
  ExecOptions exec_;
  double load_seconds_ = 0.0;
  // The resident denoiser and, when the options name them, the decoders (run() then adds the MP4 and WAV).
  std::unique_ptr<H3Model> model_;
  std::unique_ptr<VideoVae> video_vae_;
  std::unique_ptr<AudioVae> audio_vae_;
  // Overlapped loading (begin_load): the decision, the loader (engine/load_overlap.h) and the timeline in seconds
  // since open() (run.json timing.load_overlap).
  struct LoadOrder {
    bool decided = false;  // begin_load ran
    bool overlapped = false;
    bool adaln_host = false;  // overlapped, the AdaLN projections read into host memory beside the load
    std::string refusal;      // why the load runs before sampling ("" when overlapped)
    bool text_beside = false;
    std::string text_note;  // where the text encoder runs relative to the load, and why
    double load_start = -1.0, load_end = -1.0, first_step = -1.0;
  } load_order_;
  std::shared_ptr<BackgroundLoad> background_;
  std::chrono::steady_clock::time_point t_open_ = std::chrono::steady_clock::now();
  std::string load_overlap_refusal(const ResidencyPlan& residency, bool ranks) const;
  Status start_background_load(ProgressSink& progress);
  std::optional<ResidencyPlan> planned_residency_;  // begin_load's, printed once
  std::function<void(int group)> load_hook_;
  bool load_overlap_on_ = true;  // --switches load_overlap (take_load_overlap_switch)
  // Bytes the text encoder needs for `tokens` tokens: its layers' weights and the prefill's activations.
  Result<uint64_t> text_encoder_need(size_t tokens) const;
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
Result<ExecOptions> resolve_exec_options(const ExecOptions& policy, Precision precision, const std::string& switches);

// Initial noise (the noise contract, docs/outputs.md): ONE Gaussian stream of `seed`
// (src/core/rng.h gaussian_noise), video first then audio: video element i (flattened [24, T, H, W])
// is stream element i, audio element j (flattened [2, 32, Ta]) is stream element video_size + j.
AvLatents initial_noise(const ModelConfig& cfg, const RequestGeometry& geo, uint64_t seed);

}  // namespace vortex
