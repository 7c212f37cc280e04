// Benchmark statistics and evidence rows (PERFORMANCE.md "Evidence files"): percentiles over repeated
// timings, the environment of a run (commit, dirty flag, GPU, driver, CUDA, clocks) and a JSONL writer
// for benchmarks/<yyyy-mm-dd>-<gpu>-<what>.jsonl. Tested in tests/core/evidence_test.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vortex/status.h"

namespace vortex {

struct Percentiles {
  double p10 = 0, p50 = 0, p90 = 0, p95 = 0, mean = 0, min = 0, max = 0;
  int n = 0;
};
// Linear-interpolated percentiles (numpy's default) of `samples`; n = 0 when empty.
Percentiles percentiles(std::vector<double> samples);

struct RunEnvironment {
  std::string commit;      // git commit the binary was built from
  bool dirty = false;      // working tree had uncommitted changes at configure time
  std::string time_utc;    // ISO 8601
  std::string gpu;         // e.g. "NVIDIA H200" ("" on CPU runs)
  std::string sm;          // e.g. "sm_90"
  std::string driver;      // nvidia-smi driver_version
  std::string cuda;        // CUDA runtime version, e.g. "13.0"
  int clock_sm_mhz = 0;    // nvidia-smi clocks.sm at collection time
  int clock_mem_mhz = 0;
  std::string host;
};
// Fills commit/dirty/time/host; GPU fields from nvidia-smi when it exists (left empty otherwise).
// `gpu_name`, `sm` and `cuda` come from the caller's device query.
RunEnvironment collect_environment(const std::string& gpu_name, const std::string& sm, const std::string& cuda);
std::string utc_now_iso8601();
// Re-reads the SM and memory clocks (they move between idle and load; record them next to timings).
void refresh_clocks(RunEnvironment& env);

// One evidence row with the schema fields; `extra` is merged in (tflops/gbps, check, components...).
nlohmann::json evidence_row(const RunEnvironment& env, const std::string& workload, const std::string& impl,
                            const Percentiles& ms, const nlohmann::json& extra = nlohmann::json::object());
// Appends rows to a .jsonl file (creating directories); never rewrites existing lines.
Status append_jsonl(const std::string& path, const std::vector<nlohmann::json>& rows);
// benchmarks/<yyyy-mm-dd>-<gpu-slug>-<what>.jsonl under `dir`.
std::string evidence_path(const std::string& dir, const RunEnvironment& env, const std::string& what);

}  // namespace vortex
