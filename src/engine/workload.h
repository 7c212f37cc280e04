// A loaded H3 workload for `vortex bench` and `vortex gate`: a Pipeline (backend, weights synthetic on the
// device or from a checkpoint, the switch override rule of `generate` and `serve`), the packed canonical
// request, synthetic refined text, and the initial noise.
// Canonical defaults (the shape of the published block timings): h3, 1344x768, 124 frames, 100 synthetic refined-text
// rows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "model/h3_model.h"
#include "model/packing.h"
#include "sampler/sampler.h"
#include "vortex/config.h"

namespace vortex {

struct WorkloadSpec {
  std::string config = "h3";
  std::string checkpoint;  // empty: synthetic weights generated on the backend
  std::string backend = "cuda";
  int threads = 0;
  int device = 0;  // CUDA device ordinal (--device N)
  int width = 1344, height = 768, frames = 124;
  int text_rows = 100;        // synthetic refined text [text_rows, hidden]
  uint64_t weights_seed = 0;  // same default as `vortex generate` and `vortex synth`
  uint64_t noise_seed = 42;
  std::string precision = "bf16";  // bf16 | fp8 | nvfp4 | nvfp4-weight-only
  std::string switches;            // applied over the backend's policy defaults (apply_switches); also
                                   // nvfp4_fc2_fallback=off|weight-only|bf16 (load time, precision nvfp4)
};

class Pipeline;

struct Workload {
  ModelConfig cfg;
  std::shared_ptr<Pipeline> pipeline;  // owns the backend and the model (engine/pipeline.h)
  // This rank's communicator when the workload runs sequence parallel (declared after the pipeline so it
  // goes first: an NCCL communicator uses the backend's stream). Empty when the caller owns it.
  std::unique_ptr<Communicator> owned_comm;
  Communicator* comm = nullptr;  // nullptr: one device, no world
  Backend* backend = nullptr;
  H3Model* model = nullptr;
  PackedLayout layout;
  AvLatents noise;  // FP32 host latents at sigma = 1
};

using LogFn = std::function<void(const std::string&)>;

// The workload's sampler: res_multistep, ComfyUI-parity AV schedules with the config's shifts.
SamplerSpec workload_sampler(const Workload& w, int steps);
// Step-1 sigmas of a `steps`-step schedule (at least 2 steps): two distinct timesteps, as in every step
// after the first — the conditioning used for block benchmarks and gates.
Result<std::pair<double, double>> second_step_sigmas(const Workload& w, int steps);
// Joins a world on the opened backend, before any weights load (`vortex bench --gpus N` ranks: join_world;
// tests: an InProcessWorld rank). Returns the communicator and, when the workload should own it, sets `own`.
using JoinWorldFn = std::function<Result<Communicator*>(Backend& backend, std::unique_ptr<Communicator>& own)>;
// With `join`: the model runs Ulysses sequence parallelism over the returned communicator (docs/multi_gpu.md);
// a world with more ranks than the request's packed rows is refused before the weights load.
Result<Workload> load_workload(const WorkloadSpec& spec, const LogFn& log, const JoinWorldFn& join = {});

// Parses "name=value" switch settings into ExecOptions: fused_norm_modulate=0|1, fused_gate_add=0|1,
// fused_nvfp4_producers=0|1 (precision nvfp4 only), fp8_gate_epilogue=0|1 (precision fp8 only, E2),
// fused_q_quantize=0|1 (attention sage2 only, E0), attention=sdpa|sage2|bf16-owned, cuda_graph=off|on|auto
// (denoiser steps as CUDA graphs), debug_sync=0|1, and
// precision=<the loaded precision> (accepted only when it restates opts.precision: precision is a load-time
// choice). Several separated by commas. "eager" = both Component-1 fusions off, "fused" = both on (neither
// touches fused_nvfp4_producers).
Status apply_switches(const std::string& settings, ExecOptions& opts);
std::string describe_switches(const ExecOptions& opts);

}  // namespace vortex
