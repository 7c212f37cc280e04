// sdpa_bench: times the cuDNN SDPA baseline at one shape (default canonical S = 37,810, 56 heads, D = 128) and
// prints one evidence row (docs/evidence.md). It has no same-run baseline of its own: the PyTorch peer
// (scripts/peer_torch.py) times the same shape in the same gpu-check run.
//   sdpa_bench [S] [heads] [reps]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "measure/gemm_evidence.h"
#include "measure/sdpa_bench.h"

int main(int argc, char** argv) {
  using namespace vortex;
  const int64_t s = argc > 1 ? std::atoll(argv[1]) : 37810;
  const int heads = argc > 2 ? std::atoi(argv[2]) : 56;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  auto sdpa = SdpaAttention::create();
  if (!sdpa.ok()) {
    std::fprintf(stderr, "error: %s\n", sdpa.status().to_string().c_str());
    return 1;
  }
  auto r = bench_sdpa(**sdpa, s, heads, 128, reps);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().to_string().c_str());
    return 1;
  }
  RunEnvironment env = cuda_run_environment();  // clocks right after the timed runs
  Percentiles p;
  p.p10 = r->ms_p10;
  p.p50 = r->ms_p50;
  p.p90 = r->ms_p90;
  p.p95 = r->ms_p95;
  p.n = r->reps;
  const std::string workload = "sdpa S=" + std::to_string(s) + " H=" + std::to_string(heads) + " D=128";
  const nlohmann::json extra = {{"seq_len", s}, {"num_heads", heads}, {"head_dim", 128}, {"tflops", r->tflops_p50}};
  std::printf("%s\n", evidence_row(env, workload, "cudnn_sdpa", r->plan, p, {}, extra).dump().c_str());
  return 0;
}
