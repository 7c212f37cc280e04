// The public API of libvortex: load an H3 pipeline once with the options fixed at load (LoadOptions), then generate
// with per-request options (Request), watched through progress, frame and cancel callbacks (Callbacks). Options are
// plain fields for the common ones plus `set`, any other option by its id ("max_vram") or CLI flag ("--max-vram")
// as `vortex generate` spells it (docs/api.md lists them). Errors are Status values whose Failure names the field at
// fault. Needs only include/ (Engine hides the engine behind a pointer). Tested in tests/api/api_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vortex/status.h"

namespace vortex {

// Option values by name: {"max_vram", "40"}, {"--lora", "turbo.safetensors:0.8"}; a repeatable option may appear
// more than once. Keys are option ids or CLI flags; messages name the field the way its key spells it.
using OptionList = std::vector<std::pair<std::string, std::string>>;

// Fixed for the pipeline's life (what stable-diffusion.cpp calls context parameters).
struct LoadOptions {
  // Weights, one way: a model folder (the MiniMax-H3 snapshot: transformer, text encoder, tokenizer, vae/ and
  // audio_vae/), a checkpoint, or deterministic synthetic weights of a built-in config ("h3-tiny", "h3").
  std::string model_dir;
  std::string checkpoint;
  std::string config;  // "" = h3-tiny
  bool synthetic_weights = false;
  std::string backend;    // "cpu" | "cuda"; "" = cpu
  std::string precision;  // "bf16" | "fp8" | "nvfp4" | "nvfp4-weight-only"; "" = bf16
  int device = 0;         // CUDA device ordinal
  int threads = 0;        // CPU workers, 0 = all cores
  OptionList set;         // any other load option (decoders, budgets, LoRA, switches)
  // How messages name fields: by id ("steps must be in [1, 1000]") or as CLI flags ("--steps ...").
  enum class Names : uint8_t { kIds, kFlags };
  Names names = Names::kIds;
};

// One generation (per-generation parameters). Zero / empty fields keep the defaults docs/api.md lists.
struct Request {
  std::string prompt;           // needs a model folder with a text encoder (or synthetic weights)
  std::string text_embeddings;  // or: a safetensors file with one [L, text_dim] or [L, hidden] tensor
  int width = 0, height = 0;    // pixels, multiples of 32 (default 448 x 256)
  int frames = 0;               // pixel frames, snapped up to 17n + 5 (default 22)
  int steps = 0;                // denoising steps (default 12)
  int64_t seed = -2;            // noise seed >= 0; -1: a random one (reported in Outputs::seed); -2: default 42
  std::string out_dir;          // where the outputs appear, all at once or not at all (docs/outputs.md)
  bool overwrite = false;       // replace an out_dir holding a previous Vortex run (only that)
  OptionList set;               // any other request option (seconds, schedule, sampler, attention, keyframes)
};

// What a call reports while it works.
struct ProgressEvent {
  enum class Kind : uint8_t { kStage, kNote, kWarning, kStep, kLoading, kDecode };
  Kind kind = Kind::kStage;
  std::string_view text;        // the stage, note or warning; kLoading: what loads; kDecode: "video" | "audio"
  int64_t done = 0, total = 0;  // kStep: steps; kLoading: layers; kDecode: tiles or channels
  uint64_t bytes_done = 0, bytes_total = 0;  // kLoading
  double seconds = 0.0;                      // kStep: this step; kLoading, kDecode: since it began
  double elapsed = 0.0;                      // kStep: since sampling began
};

// One decoded video frame, delivered once the media is decoded, before the outputs are published.
struct Frame {
  int index = 0, count = 0;  // frame `index` of `count`
  int width = 0, height = 0;
  const uint8_t* rgb = nullptr;  // [height, width, 3] 8-bit RGB, valid during the call
};

// Each callback runs on the calling thread; returning false cancels the call (it fails with kCancelled and
// publishes nothing). `cancelled` is polled at every progress event and frame. All are optional.
struct Callbacks {
  std::function<bool(const ProgressEvent&)> on_progress;
  std::function<bool(const Frame&)> on_frame;
  std::function<bool()> cancelled;
};

struct Outputs {
  std::string out_dir;
  std::vector<std::string>
      files;  // inside out_dir: latents, preview.png, video.mp4 + audio.wav with decoders, run.json
  int width = 0, height = 0, frames = 0, latent_frames = 0;
  int64_t rows = 0;  // packed sequence rows (video, audio and text) the transformer ran on
  uint64_t seed = 0;
  std::vector<double> step_seconds;
  double sampling_seconds = 0.0, total_seconds = 0.0;
  // A model folder's decoders left unused (the option latents_only): `vortex decode` turns the latents into media.
  std::string unused_vae_dir, unused_audio_vae_dir;
};

// Why a call failed, and the option or request field at fault: its id ("steps", "width"; "" when no single field
// is) and its CLI flag ("--steps"; "" when it has none).
struct Failure {
  Status status;
  std::string field;
  std::string flag;
};

// A value or a Failure.
template <typename T>
class [[nodiscard]] Outcome {
 public:
  Outcome(T value) : value_(std::move(value)) {}                   // NOLINT(google-explicit-constructor)
  Outcome(Failure failure) : failure_(std::move(failure)) {}       // NOLINT(google-explicit-constructor)
  Outcome(Status status) : failure_{std::move(status), {}, {}} {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return failure_.status.ok(); }
  const Status& status() const { return failure_.status; }
  const Failure& failure() const { return failure_; }
  const std::string& field() const { return failure_.field; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }

 private:
  T value_{};
  Failure failure_;
};

// A loaded pipeline: one model resident, requests run one at a time (generate is not reentrant; cancel may be
// called from any thread).
class Engine {
 public:
  // Checks the options and opens the backend; the weights load with load() or the first generate().
  static Outcome<std::unique_ptr<Engine>> open(const LoadOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Loads the decoders and the weights (progress through `callbacks`).
  Outcome<bool> load(const Callbacks& callbacks = {});
  bool loaded() const;
  // Checks `request` against this pipeline without running it: ranges, text, geometry, memory.
  Outcome<bool> check(const Request& request) const;
  // Plans `request` (a bad one fails before any weight loads), loads if needed, runs it and publishes its outputs.
  Outcome<Outputs> generate(const Request& request, const Callbacks& callbacks = {});
  // Stops the running generate at its next transformer block (it fails with kCancelled); any thread.
  void cancel();

  // The library's own (src/api/engine_internal.h); Impl is opaque here.
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// One request end to end, as `vortex generate` runs it: every check (options, request, output folder, memory)
// before the backend starts and any weight loads, the text encoder freed before the transformer loads.
Outcome<Outputs> generate(const LoadOptions& options, const Request& request, const Callbacks& callbacks = {});

// The library's version string.
const char* version();

}  // namespace vortex
