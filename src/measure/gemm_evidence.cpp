// See gemm_evidence.h.
#include "measure/gemm_evidence.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <string>

namespace vortex {

RunEnvironment cuda_run_environment() {
  std::string name, sm, cuda;
  int dev = 0, runtime = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
    name = prop.name;
    sm = "sm_" + std::to_string(prop.major * 10 + prop.minor);
  }
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    cuda = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  return collect_environment(name, sm, cuda);
}

std::vector<nlohmann::json> gemm_bench_evidence(const std::vector<GemmBenchRow>& rows, const RunEnvironment& env) {
  std::map<std::string, double> bf16_p50;  // shape -> the BF16 row's p50 (the FP8 rows' baseline)
  for (const GemmBenchRow& r : rows)
    if (r.precision == GemmPrecision::kBf16 && r.error.empty()) bf16_p50[r.shape] = r.ms.p50;
  std::vector<nlohmann::json> out;
  for (const GemmBenchRow& r : rows) {
    Percentiles p;
    p.p10 = r.ms.p10;
    p.p50 = r.ms.p50;
    p.p90 = r.ms.p90;
    p.p95 = r.ms.p95;
    p.n = r.ms.n;
    EvidenceBaseline base;
    if (r.precision != GemmPrecision::kBf16 && bf16_p50.count(r.shape))
      base = {"cublaslt_bf16 (same shape, same run)", bf16_p50[r.shape], 0};
    nlohmann::json extra = {{"m", r.m},
                            {"n_cols", r.n},
                            {"k", r.k},
                            {"tflops", r.tflops_p50},
                            {"algo", r.algo},
                            {"pinned", r.pinned},
                            {"cublaslt_version", cublasLtGetVersion()}};
    if (!r.error.empty()) extra["error"] = r.error;  // this (shape, precision) cannot run on this GPU
    const std::string config = "m=" + std::to_string(r.m) + " n=" + std::to_string(r.n) + " k=" + std::to_string(r.k);
    out.push_back(evidence_row(env, "gemm_" + r.shape, std::string("cublaslt_") + gemm_precision_name(r.precision),
                               config, p, base, extra));
  }
  return out;
}

}  // namespace vortex
