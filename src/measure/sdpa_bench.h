// bench_sdpa (src/measure/sdpa_bench.cpp): the cuDNN SDPA of src/cuda/attention/sdpa.h timed at one shape, for
// bench/sdpa_bench.cpp's evidence row. Measurement code: linked by bench/ only, not part of libvortex.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/attention/sdpa.h"
#include "vortex/status.h"

namespace vortex {

// Times the SDPA at one shape on device-random Q/K/V read from a [S, 3*I] buffer (the canonical
// shape: S = 37,810, 56 heads, D = 128; FLOP = 4 * S^2 * heads * D). bench/sdpa_bench.cpp writes it as an
// evidence row; the PyTorch peer (scripts/peer_torch.py) times the same shape in the same gpu-check run.
struct SdpaBenchResult {
  int64_t seq_len = 0;
  int num_heads = 0, head_dim = 0;
  double ms_p10 = 0, ms_p50 = 0, ms_p90 = 0, ms_p95 = 0;
  int reps = 0;
  double tflops_p50 = 0;
  std::string plan;
};
Result<SdpaBenchResult> bench_sdpa(SdpaAttention& sdpa, int64_t seq_len = 37810, int num_heads = 56, int head_dim = 128,
                                   int reps = 20);

}  // namespace vortex
