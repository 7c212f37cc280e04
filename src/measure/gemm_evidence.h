// Evidence rows (docs/evidence.md) for the CUDA benchmarks: the run environment of device 0 (name, sm_XY and
// the CUDA runtime version from the runtime API; commit, driver and clocks from vortex::collect_environment),
// and bench_gemm's rows in the one schema, an FP8 row's same-run baseline being the BF16 GEMM of its shape.
// Used by `vortex gemm-tune --bench`, bench/gemm_bench.cpp and the other bench/*.cpp CUDA tools.
// Tested through tests/core/evidence_test.cpp (the row fields); the CUDA parts run only on a GPU.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "measure/gemm_tune.h"
#include "profiling/evidence.h"

namespace vortex {

// Environment of device 0 with the clocks sampled now (call it right after the timed work).
RunEnvironment cuda_run_environment();
// One evidence row per bench_gemm row (errors recorded in the row's "error").
std::vector<nlohmann::json> gemm_bench_evidence(const std::vector<GemmBenchRow>& rows, const RunEnvironment& env);

}  // namespace vortex
