// gemm_bench: the `vortex gemm-tune` work without the CLI (so it runs where the full CLI is not built):
//   gemm_bench tune  [M] [max_configs] [reps] [precisions] [shapes] [evidence.json] [table.json]
//   gemm_bench bench [M] [reps] [precisions]        -> evidence rows (docs/evidence.md), one JSON line each;
//     an FP8 row's same-run baseline is the BF16 row of its shape.
// Precisions/shapes are comma lists (bf16,fp8_per_tensor,fp8_blockwise / qkv,out,fc1,fc2).
#include <cublasLt.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "bench_env.h"
#include "core/strings.h"
#include "gemm/gemm_tune.h"
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
    RunEnvironment env = bench::cuda_environment();  // clocks right after the timed GEMMs
    std::map<std::string, double> bf16_p50;         // shape -> the BF16 row's p50 (the FP8 rows' baseline)
    for (const auto& r : *rows)
      if (r.precision == GemmPrecision::kBf16 && r.error.empty()) bf16_p50[r.shape] = r.ms.p50;
    for (const auto& r : *rows) {
      Percentiles p;
      p.p10 = r.ms.p10;
      p.p50 = r.ms.p50;
      p.p90 = r.ms.p90;
      p.p95 = r.ms.p95;
      p.n = r.ms.n;
      EvidenceBaseline base;
      if (r.precision != GemmPrecision::kBf16 && bf16_p50.count(r.shape))
        base = {"cublaslt_bf16 (same shape, same run)", bf16_p50[r.shape], 0};
      nlohmann::json extra = {{"m", r.m}, {"n", r.n}, {"k", r.k}, {"tflops", r.tflops_p50}, {"algo", r.algo},
                              {"pinned", r.pinned}, {"cublaslt_version", cublasLtGetVersion()}};
      if (!r.error.empty()) extra["error"] = r.error;  // this (shape, precision) cannot run on this GPU
      const std::string config = "m=" + std::to_string(r.m) + " n=" + std::to_string(r.n) + " k=" + std::to_string(r.k);
      std::printf("%s\n", evidence_row(env, "gemm_" + r.shape, std::string("cublaslt_") + gemm_precision_name(r.precision),
                                        config, p, base, extra)
                              .dump()
                              .c_str());
    }
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
