// gemm_bench: the `vortex gemm-tune` work without the CLI (so it runs where the full CLI is not built):
//   gemm_bench tune  [M] [max_configs] [reps] [precisions] [shapes] [evidence.json] [table.json]
//   gemm_bench bench [M] [reps] [precisions]        -> evidence rows (docs/evidence.md), one JSON line each;
//     an FP8 row's same-run baseline is the BF16 row of its shape.
// Precisions/shapes are comma lists (bf16,fp8_per_tensor,fp8_blockwise / qkv,out,fc1,fc2).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/strings.h"
#include "measure/gemm_evidence.h"
#include "measure/gemm_tune.h"
#include "vortex/build_info.h"

namespace {

void log_line(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

}  // namespace

int main(int argc, char** argv) {
  using namespace vortex;
  const std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i, const char* def) { return std::string(argc > i ? argv[i] : def); };
  std::vector<GemmPrecision> precisions;
  for (const auto& p : split_list(arg(mode == "tune" ? 5 : 4, "bf16,fp8_per_tensor,fp8_blockwise"))) {
    auto r = gemm_precision_from_name(p);
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.status().to_string().c_str());
      return 2;
    }
    precisions.push_back(*r);
  }
  if (mode == "bench") {
    auto engine = GemmEngine::create();
    if (!engine.ok()) {
      std::fprintf(stderr, "error: %s\n", engine.status().to_string().c_str());
      return 1;
    }
    GemmBenchOptions opt;
    opt.m = std::atoll(arg(2, "37810").c_str());
    opt.reps = std::atoi(arg(3, "20").c_str());
    opt.precisions = precisions;
    auto rows = bench_gemm(**engine, opt);
    if (!rows.ok()) {
      std::fprintf(stderr, "error: %s\n", rows.status().to_string().c_str());
      return 1;
    }
    const RunEnvironment env = cuda_run_environment();  // clocks right after the timed GEMMs
    for (const auto& row : gemm_bench_evidence(*rows, env)) std::printf("%s\n", row.dump().c_str());
    return 0;
  }
  if (mode == "tune") {
    GemmTuneRunOptions opt;
    opt.tune.m = std::atoll(arg(2, "37810").c_str());
    opt.tune.max_configs = std::atoi(arg(3, "48").c_str());
    opt.tune.reps = std::atoi(arg(4, "10").c_str());
    opt.precisions = precisions;
    opt.shapes = split_list(arg(6, "qkv,out,fc1,fc2"));
    opt.evidence_path = arg(7, "gemm_tune_evidence.json");
    opt.table_path = arg(8, "gemm_table.json");
    opt.commit = VORTEX_GIT_COMMIT_STRING;
    opt.dirty = VORTEX_GIT_DIRTY;
    vortex::Status st = run_gemm_tune(opt, &log_line);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
      return 1;
    }
    return 0;
  }
  std::fprintf(stderr, "usage: gemm_bench tune|bench ...\n");
  return 2;
}
