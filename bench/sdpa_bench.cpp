// sdpa_bench: times the cuDNN SDPA baseline at one shape (default canonical S = 37,810, 56 heads,
// D = 128) and prints one JSON evidence row (bench_sdpa; peer PyTorch cuDNN SDPA 71.9 ms on the H200).
//   sdpa_bench [S] [heads] [reps]
#include <cstdio>
#include <cstdlib>

#include "cuda/attention/sdpa.h"
#include "gemm/gemm_tune.h"
#include "vortex/build_info.h"

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
  std::printf("{\"environment\":%s,\"row\":%s}\n",
              gemm_environment_json(VORTEX_GIT_COMMIT_STRING, VORTEX_GIT_DIRTY).c_str(), r->json().c_str());
  return 0;
}
