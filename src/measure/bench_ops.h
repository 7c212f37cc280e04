// Micro-benchmark of the Component 1 elementwise kernels at the canonical shape (S = 37,810): fused
// rms_norm_modulate, gate_add, swiglu and qk_norm_rope, plus the eager programs they replace, timed with CUDA events
// (warm-up, >= 20 reps, p10/p50/p90/p95) on input sets rotated so the working set exceeds L2, reported as
// GB/s on the minimum bytes moved vs the 4.18 TB/s H200 copy ceiling. A library function
// returning a struct; `vortex bench` formats it. Fused and eager outputs are compared byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vortex/status.h"

namespace vortex {

class CudaBackend;

struct OpsBenchConfig {
  int64_t rows = 37810;    // S, canonical
  int64_t hidden = 5376;   // D
  int64_t ffn = 14336;     // F
  int64_t table_rows = 3;  // AdaLN table rows (one timestep x 3 modalities)
  int reps = 20;
  int warmup = 3;
  uint64_t seed = 0x5eed;
  double peak_gbps = 4180.0;  // measured H200 device-to-device copy rate
  std::string ops;            // comma list of sections: rms_norm_modulate, gate_add, swiglu, qk_norm_rope; "": all
};

struct OpsBenchRow {
  std::string op;  // "rms_norm_modulate", "rms_norm+modulate (eager)", ...
  int64_t rows = 0, cols = 0;
  int reps = 0;
  double ms_p10 = 0, ms_p50 = 0, ms_p90 = 0, ms_p95 = 0;
  double bytes_moved = 0;  // minimum HBM bytes of this program
  double gbps_p50 = 0;     // bytes_moved / ms_p50
  double fraction_of_peak = 0;
  std::string check;  // correctness check run on the same inputs and its result
};

struct OpsBenchResult {
  std::string device;
  double peak_gbps = 0;
  int input_sets = 0;  // rotated input sets (working set > L2)
  std::vector<OpsBenchRow> rows;
};

Result<OpsBenchResult> bench_elementwise_ops(CudaBackend& backend, const OpsBenchConfig& config = {});

}  // namespace vortex
