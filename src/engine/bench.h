// `vortex bench`: the seeds' measurement tools built in (PERFORMANCE.md "Method").
//   block: one block of a loaded model, per-component device timings (model regions) and the whole block;
//   step:  one full forward (50 blocks), per-block and total;
//   run:   the sampling trajectory, per step, with peak memory;
//   ab:    alternate two switch settings A,B,A,B inside one loaded model and process; per-pair ratios.
// Each returns evidence rows (profiling/evidence.h) and prints a short table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/workload.h"
#include "profiling/evidence.h"

namespace vortex {

struct BenchOptions {
  int block = 24;  // block under test (block / ab)
  int reps = 20;
  int warmup = 3;
  int steps = 12;              // run
  std::string a, b;            // ab: switch settings (engine/workload.h apply_switches)
  std::string what = "block";  // ab: block | step
};

Result<std::vector<nlohmann::json>> bench_block(Workload& w, const BenchOptions& o, const RunEnvironment& env);
Result<std::vector<nlohmann::json>> bench_step(Workload& w, const BenchOptions& o, const RunEnvironment& env);
Result<std::vector<nlohmann::json>> bench_run(Workload& w, const BenchOptions& o, const RunEnvironment& env);
Result<std::vector<nlohmann::json>> bench_ab(Workload& w, const BenchOptions& o, const RunEnvironment& env);

// Block input for benchmarks and gates: embed the noise at the step-1 sigmas of the canonical
// schedule (two distinct timesteps, as in every step after the first) and run blocks [0, block) with
// the model's current options. Returns x [S, D] bf16 on the backend plus the step tables.
struct BlockInput {
  Tensor x;
  StepTables tables;
};
Result<BlockInput> make_block_input(Workload& w, int block, int sampler_steps);

}  // namespace vortex
