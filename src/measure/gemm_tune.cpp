// The gemm-tune run (see gemm_tune.h): the H3 shapes, timing statistics, the environment record, and
// run_gemm_tune, which tunes every shape and writes the evidence and the table. Search in gemm_tune_search.cpp,
// operands in gemm_tune_operands.cpp. Exercised by tests/gemm/gemm_tune_test.cpp and `vortex gemm-tune` on the H200.
#include "measure/gemm_tune.h"

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "gemm/fp8_reference.h"
#include "measure/gemm_tune_internal.h"
#include "profiling/evidence.h"
#include "vortex/dtype.h"

namespace vortex {

const std::vector<GemmShape>& h3_gemm_shapes() {
  static const std::vector<GemmShape> shapes = {
      {"qkv", 21504, 5376}, {"out", 5376, 7168}, {"fc1", 28672, 5376}, {"fc2", 5376, 14336}};
  return shapes;
}

TimingStats timing_stats(std::vector<double> ms) {
  const Percentiles p = percentiles(std::move(ms));
  TimingStats t;
  t.n = p.n;
  t.p10 = p.p10;
  t.p50 = p.p50;
  t.p90 = p.p90;
  t.p95 = p.p95;
  return t;
}

// ---- the gemm-tune run ---------------------------------------------------------------------------
std::string gemm_environment_json(const std::string& commit, bool dirty) {
  nlohmann::json j;
  char ts[32] = {0};
  std::time_t now = std::time(nullptr);
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["time_utc"] = ts;
  j["commit"] = commit;
  j["dirty"] = dirty;
  int dev = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
    j["gpu"] = prop.name;
    j["sm"] = prop.major * 10 + prop.minor;
    j["sm_count"] = prop.multiProcessorCount;
  }
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  j["driver"] = driver;
  j["cuda"] = runtime;
  j["cublaslt_version"] = cublasLtGetVersion();
  j["clocks_mhz"] = nullptr;  // not queried here: record `nvidia-smi --query-gpu=clocks.sm,clocks.mem` beside it
  return j.dump();
}

Status run_gemm_tune(const GemmTuneRunOptions& options, void (*log)(const std::string&)) {
  GemmEngineOptions eopt;
  eopt.load_pinned_table = false;  // measure the heuristic default itself
  VORTEX_ASSIGN_OR_RETURN(auto engine, GemmEngine::create(eopt));
  nlohmann::json evidence;
  evidence["schema"] = "vortex.gemm_tune.v1";
  evidence["environment"] = nlohmann::json::parse(gemm_environment_json(options.commit, options.dirty));
  evidence["method"] =
      "candidates = heuristic top-16 + AlgoGetIds x tiles x stages x split-K {1,2,4} x reduction x "
      "swizzle, filtered by cublasLtMatmulAlgoCheck; each run on poisoned output, compared word for "
      "word with the heuristic default and vs FP64 on sampled elements; passing candidates timed "
      "alternating (1 warm-up + reps), CUDA events; best = lowest p50 that passes";
  evidence["results"] = nlohmann::json::array();
  evidence["failures"] = nlohmann::json::array();
  int failures = 0;
  GemmTable table;
  for (const auto& name : options.shapes) {
    const GemmShape* shape = nullptr;
    for (const auto& s : h3_gemm_shapes())
      if (s.name == name) shape = &s;
    if (!shape) return invalid_argument("unknown GEMM shape '" + name + "' (expected qkv, out, fc1, fc2)");
    for (GemmPrecision p : options.precisions) {
      log("tuning " + name + " " + gemm_precision_name(p) + " M=" + std::to_string(options.tune.m) + " ...");
      auto tuned = tune_gemm(*engine, p, *shape, options.tune);
      if (!tuned.ok()) {
        // Recorded and skipped: one unsupported precision must not hide the others' evidence.
        log("  " + name + " " + gemm_precision_name(p) + ": FAILED: " + tuned.status().to_string());
        evidence["failures"].push_back(
            {{"shape", name}, {"precision", gemm_precision_name(p)}, {"error", tuned.status().to_string()}});
        failures++;
        continue;
      }
      const GemmTuneResult& r = *tuned;
      const auto& best = r.candidates[static_cast<size_t>(r.best)];
      const auto& def = r.candidates[0];
      char line[512];
      std::snprintf(line, sizeof(line),
                    "  %s %s: heuristic [%s] %.3f ms (split-K/stream-K fields: %s); best [%s] %.3f ms, %s vs default, "
                    "%zu candidates",
                    name.c_str(), gemm_precision_name(p), r.heuristic.describe().c_str(), def.ms.p50,
                    (r.heuristic.splitk_num != 1 || r.heuristic.reduction_scheme != 0) ? "yes" : "no",
                    best.algo.describe().c_str(), best.ms.p50,
                    best.mismatches_vs_default == 0 ? "bit-identical" : "NOT bit-identical", r.candidates.size());
      log(line);
      evidence["results"].push_back(nlohmann::json::parse(r.json()));
      VORTEX_ASSIGN_OR_RETURN(GemmTableEntry e, table_entry_from_tune(r, options.evidence_path));
      e.cublaslt_version = cublasLtGetVersion();
      table.entries.push_back(e);
      // Written after every (shape, precision) so an interrupted run keeps what it proved.
      if (!options.evidence_path.empty()) {
        std::ofstream f(options.evidence_path);
        if (!f) return io_error("cannot write evidence '" + options.evidence_path + "'");
        f << evidence.dump(1) << "\n";
      }
      if (!options.table_path.empty()) VORTEX_RETURN_IF_ERROR(save_gemm_table(table, options.table_path));
    }
  }
  if (!options.evidence_path.empty()) log("evidence: " + options.evidence_path);
  if (!options.table_path.empty())
    log("pinned table: " + options.table_path + " (load with VORTEX_GEMM_TABLE or GemmEngineOptions)");
  if (failures > 0)
    return internal_error(std::to_string(failures) +
                          " (shape, precision) tunes failed; see the log and the "
                          "evidence file's \"failures\"");
  return Status::Ok();
}

}  // namespace vortex
