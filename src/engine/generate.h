// `generate`: one text -> video + stereo audio latent request, end to end, behind one call.
// Validates every input before heavy work, then loads a Pipeline (engine/pipeline.h), runs the request
// on it and publishes the outputs (docs/outputs.md) atomically: everything appears in `out_dir` at
// once, or nothing does.
// Tested end to end through the CLI in tests/cli/cli_test.cpp (cuda vs cpu: cli_gpu_test.cpp); the noise
// contract in tests/cli/golden_noise.py.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dist/communicator.h"
#include "dist/launcher.h"
#include "engine/pipeline.h"
#include "io/publish.h"
#include "model/packing.h"
#include "vortex/status.h"

namespace vortex {

struct GenerateRequest {
  PipelineOptions pipeline;  // what to load: config or checkpoint, backend, threads, precision
  RunRequest run;            // the request: text, size, frames, steps, schedule, seed, attention
  std::string out_dir;
  bool overwrite = false;  // replace an out_dir holding a previous run (check_replaceable_run_dir)
  // One rank of a multi-GPU world (docs/multi_gpu.md): Ulysses sequence parallelism over NCCL on
  // --backend cuda; every rank samples the same latents, rank 0 alone publishes the outputs.
  std::optional<RankEnv> rank;
  CommOptions comm;
  FieldStyle style = FieldStyle::kFlag;  // how messages name the request's fields
};

struct GenerateResult {
  std::string out_dir;             // final directory holding the four files
  std::vector<std::string> files;  // file names inside out_dir
  RequestGeometry geometry;
  std::vector<double> step_seconds;  // one per denoising step
  double sampling_seconds = 0.0;
  double total_seconds = 0.0;
};

// Validate -> plan -> out dir -> Pipeline::open -> device fit -> staging dir -> weights -> run -> publish.
// `cancel` (may be null) stops the run with kCancelled, nothing published; `failed_field` (when given) names the
// request's field at fault when planning refused it.
Result<GenerateResult> generate(const GenerateRequest& request, ProgressSink& progress,
                                const CancelToken* cancel = nullptr, Field* failed_field = nullptr);

// One planned request on a pipeline whose weights are loaded (the public API's Engine), into `out_dir` that the caller
// has checked (check_out_dir, before loading anything): a staging folder beside it, the prompt encoded, the run, the
// outputs published (publish_outputs checks `out_dir` again at the rename). kCancelled when `cancel` fires.
Result<GenerateResult> generate_on(Pipeline& pipeline, RunPlan& plan, const std::string& out_dir, bool overwrite,
                                   ProgressSink& progress, const CancelToken& cancel);
// The checks of an output folder before any work: not `/`, $HOME or the current directory, not a symbolic link, and
// absent, empty or (with `overwrite`) holding a previous Vortex run; its parent is created.
Status check_out_dir(const std::string& out_dir, bool overwrite);

// ---- Pieces of the request contract, public so tests can check them independently ----

// OK when `dir` holds a Vortex run and nothing else: a run.json whose "schema" starts with "vortex.run/",
// and only regular files that its "outputs" lists (plus run.json). Otherwise kInvalidArgument naming
// the first foreign entry. --overwrite replaces a non-empty --out only when this passes; `.`, `/`, $HOME
// and the current directory or its ancestors are refused whatever they hold.
Status check_replaceable_run_dir(const std::string& dir);
// This rank's communicator (`vortex generate` and `vortex serve` ranks): rank 0 makes the NCCL unique id and
// publishes it in the rendezvous file, the others read it; then all join on `backend`'s stream (bounded by
// the communicator timeout). kInvalidArgument off --backend cuda, kUnsupported in a build without NCCL.
Result<std::unique_ptr<Communicator>> join_world(const RankEnv& rank, const CommOptions& comm, Backend& backend);
}  // namespace vortex
