// `vortex bench`: the measurement tools built in (method: docs/evidence.md).
//   block: one block of a loaded model, per-component device timings (model regions) and the whole block;
//   step:  one full forward (50 blocks), per-block and total;
//   run:   the sampling trajectory, per step, with peak memory;
//   ab:    alternate two switch settings A,B,A,B inside one loaded model and process; per-pair ratios.
// Each returns evidence rows (profiling/evidence.h) and prints a short table.
// With a world (Workload::comm, Ulysses sequence parallelism): every rank must call the same function with
// the same options; each runs the timed loop on its rows, a barrier starts every timed iteration on all
// ranks, and rank 0 returns one row gathered from every rank (the slowest rank per iteration and per
// component, every rank's p50, the all-to-all bytes per rank and bandwidth, `world=U` in config). The other
// ranks return no rows. bench_ab refuses a world.
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
// the model's current options. Returns x [S, D] bf16 on the backend plus the step tables; with a world,
// x is the rank's rows [rows_r, D] (blocks run through run_block_shard).
struct BlockInput {
  Tensor x;
  StepTables tables;
};
Result<BlockInput> make_block_input(Workload& w, int block, int sampler_steps);

}  // namespace vortex
