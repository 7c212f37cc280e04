// Benchmark statistics and evidence rows (docs/evidence.md): the one percentile definition, the environment of
// a run (commit, dirty flag, GPU, driver, CUDA, clocks) and a JSONL writer for
// benchmarks/<yyyy-mm-dd>-<gpu>-<what>.jsonl. The Python twin is bench/evidence.py.
// Tested in tests/core/evidence_test.cpp (percentiles against hand-computed values, row fields).
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
// Linear interpolation between closest ranks (numpy's default `linear` method): sorted samples sit at
// positions 0..n-1 and the q-quantile is read at position q * (n - 1). n = 0 and all fields 0 when empty.
Percentiles percentiles(std::vector<double> samples);
// One quantile (q in [0, 1]) by the same definition; 0 when `samples` is empty.
double quantile(std::vector<double> samples, double q);

struct RunEnvironment {
  std::string commit;    // git commit the binary was built from
  bool dirty = false;    // working tree had uncommitted changes at configure time
  std::string time_utc;  // ISO 8601
  std::string gpu;       // e.g. "NVIDIA H200" ("" on CPU runs)
  std::string sm;        // e.g. "sm_90"
  std::string driver;    // nvidia-smi driver_version
  std::string cuda;      // CUDA runtime version, e.g. "13.0"
  int clock_sm_mhz = 0;  // nvidia-smi clocks.sm at collection time
  int clock_mem_mhz = 0;
  std::string host;
};
// Fills commit/dirty/time/host; GPU fields from nvidia-smi when it exists (left empty otherwise).
// `gpu_name`, `sm` and `cuda` come from the caller's device query.
RunEnvironment collect_environment(const std::string& gpu_name, const std::string& sm, const std::string& cuda);
std::string utc_now_iso8601();
// Re-reads the SM and memory clocks (they move between idle and load; record them next to timings).
void refresh_clocks(RunEnvironment& env);

// The same-run baseline of a row: what it is (impl and config) and its p50. `ratio` is ms_p50 / baseline
// p50 unless the caller measured it otherwise (alternating A/B pairs: the median of per-pair ratios).
struct EvidenceBaseline {
  std::string what;  // empty: the row has no same-run baseline (baseline, baseline_ms_p50, ratio are null)
  double ms_p50 = 0;
  double ratio = 0;  // 0: computed as ms.p50 / ms_p50
};
// One evidence row with every schema field (docs/evidence.md); `extra` is merged in (tflops/gbps, check,
// components...). The clocks are env's: refresh_clocks(env) right after the timed work.
nlohmann::json evidence_row(const RunEnvironment& env, const std::string& workload, const std::string& impl,
                            const std::string& config, const Percentiles& ms, const EvidenceBaseline& baseline = {},
                            const nlohmann::json& extra = nlohmann::json::object());
// Appends rows to a .jsonl file (creating directories); never rewrites existing lines.
Status append_jsonl(const std::string& path, const std::vector<nlohmann::json>& rows);
// benchmarks/<yyyy-mm-dd>-<gpu-slug>-<what>.jsonl under `dir`.
std::string evidence_path(const std::string& dir, const RunEnvironment& env, const std::string& what);

}  // namespace vortex
