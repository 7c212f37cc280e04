// `generate`: one text -> video + stereo audio latent request, end to end, behind one call.
// Validates every input before heavy work, loads or synthesizes the weights on the chosen backend,
// packs the request, draws the noise, runs the sampler over H3Model::forward and writes the outputs
// (docs/outputs.md) atomically: everything appears in `out_dir` at once, or nothing does.
// Tested end to end through the CLI in tests/cli/cli_test.cpp (cuda vs cpu: cli_gpu_test.cpp); the noise
// contract in tests/cli/golden_noise.py.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lora/lora.h"
#include "model/backend.h"
#include "model/packing.h"
#include "sampler/sampler.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

struct GenerateRequest {
  // Model: a built-in config name ("h3-tiny", "h3") or a checkpoint file (.safetensors or a sharded
  // *.safetensors.index.json). With `synthetic_weights` the weights are generated deterministically on
  // the backend from `weights_seed` (src/model/h3_spec.h) instead of read from a file.
  std::string config_name = "h3-tiny";
  std::string checkpoint_path;  // empty: use config_name
  bool synthetic_weights = false;
  uint64_t weights_seed = 0;

  // Text conditioning: a safetensors file with exactly one 2-D tensor [L, text_dim] (raw Qwen3-VL
  // layer-50 states) or [L, hidden] (already refined), F32 or BF16; or, when the path is empty,
  // `synthetic_text_rows` deterministic raw states (see synthetic_text_states()).
  std::string text_embeddings_path;
  int synthetic_text_rows = 16;

  int width = 448, height = 256, frames = 22;  // pixels; frames snap up to 17n + 5 (src/model/packing.h)
  double seconds = 0.0;                   // > 0: frames = ceil(24 * seconds), snapped up (replaces frames)
  int steps = 12;                         // model evaluations
  // "comfyui" (ModelSamplingAV + simple, default) | "diffusers" (MiniMaxH3Scheduler); src/sampler/sampler.h.
  std::string schedule = "comfyui";
  std::string sampler;                    // "euler" | "res_multistep"; empty: the schedule's own default
  uint64_t seed = 42;                     // noise (and synthetic text) seed
  std::string backend = "cpu";            // "cpu" | "cuda"
  int threads = 0;                        // CPU workers, 0 = all cores; results never depend on it
  std::string out_dir;
  bool overwrite = false;                 // replace an out_dir holding a previous run (check_replaceable_run_dir)
  ExecOptions exec;                       // precision / attention switches (passed to H3Model)

  // LoRA adapters (src/lora/lora.h, docs/lora.md): merged into the BF16 weights after loading (mode "merge",
  // before apply_precision quantizes them) or attached as run-time branches (mode "runtime").
  std::vector<LoraSpec> loras;
  bool lora_allow_unmatched = false;
  std::string lora_mode = "merge";
  // > 0: the flow shifts instead of the config's (--preset turbo4: video 6, audio 3).
  double video_shift = 0.0, audio_shift = 0.0;
};

// Progress reports from generate(); the CLI draws a bar, tests ignore them.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // A phase begins ("loading weights", "preparing text", "sampling", "writing outputs").
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
};

struct GenerateResult {
  std::string out_dir;                   // final directory holding the four files
  std::vector<std::string> files;        // file names inside out_dir
  RequestGeometry geometry;
  std::vector<double> step_seconds;      // one per denoising step
  double sampling_seconds = 0.0;
  double total_seconds = 0.0;
};

Result<GenerateResult> generate(const GenerateRequest& request, ProgressSink& progress);

// The sampler a schedule runs when none is named: res_multistep for comfyui (ComfyUI's H3 workflow),
// euler for diffusers (MiniMaxH3Scheduler's only update).
const char* default_sampler_for_schedule(AvScheduleMode mode);

// ---- Pieces of the request contract, public so tests can check them independently ----

// OK when `dir` holds a Vortex run and nothing else: a run.json whose "schema" starts with "vortex.run/",
// and only regular files that its "outputs" lists (plus run.json). Otherwise kInvalidArgument naming
// the first foreign entry. --overwrite replaces a non-empty --out only when this passes; `.`, `/`, $HOME
// and the current directory or its ancestors are refused whatever they hold.
Status check_replaceable_run_dir(const std::string& dir);

// A loader error about a --checkpoint with advice that fits it: the loader suggests "--config", but a
// checkpoint brings its own config (the config.json beside it, or shapes inferred from the tensors).
Status with_checkpoint_advice(const Status& status, const std::string& checkpoint_path);

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

}  // namespace vortex
