// Micro-benchmark of the Component 1 elementwise kernels at the canonical shape (S = 37,810): fused
// rms_norm_modulate, gate_add, swiglu and qk_norm_rope, plus the eager programs they replace, timed with CUDA events
// (warm-up, >= 20 reps, p10/p50/p90/p95) on input sets rotated so the working set exceeds L2, reported as
// GB/s on the minimum bytes moved vs the 4.18 TB/s copy ceiling (PERFORMANCE.md). A library function
// returning a struct; `vortex bench` formats it. Fused and eager outputs are compared byte for byte, and every
// rms_norm_modulate kernel variant (below) is timed and compared with the default variant's bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vortex/status.h"

namespace vortex {

class CudaBackend;

namespace cuda_ops {
// Kernel variants of rms_norm_modulate's register-row path (rows of <= 6144 bf16, 16-byte aligned), selectable
// process-wide so that ONE benchmark run times all of them; every variant is E0 (tests/cuda/ops_test.cpp loops
// over them). Wide or unaligned rows take the block-per-row kernel whatever the variant. Defined in
// rms_norm_modulate.cu. kWarpRow is the default; the others are the persistent shared-memory-table kernels:
//   kSmemTables:           weight, t = R(1 + scale) and shift of the CTA's table rows staged in shared memory
//   kSmemTablesPrefetch:   + the next row's chunks loaded while the current row is written
//   kSmemTablesBf16x2:     kSmemTables with R(n * t) and R(p + shift) as native bf16x2 mul.rn / add.rn
//   kSmemTablesPrefetchBf16x2: both
//   kSmemTablesPrefetchBf16x2IntWiden: both, and the sum of squares widens BF16 -> FP64 by integer ops + one exact
//                          DMUL instead of the quarter-rate F2F.F64 (rows holding inf/NaN take the F2F path)
enum class RmsNormModulateVariant : int {
  kWarpRow = 0,
  kSmemTables = 1,
  kSmemTablesPrefetch = 2,
  kSmemTablesBf16x2 = 3,
  kSmemTablesPrefetchBf16x2 = 4,
  kSmemTablesPrefetchBf16x2IntWiden = 5,
};
constexpr int kRmsNormModulateVariants = 6;
const char* rms_norm_modulate_variant_name(RmsNormModulateVariant v);  // "warp_row", "smem", ...
void set_rms_norm_modulate_variant(RmsNormModulateVariant v);         // process-wide; not for concurrent use
RmsNormModulateVariant rms_norm_modulate_variant();
}  // namespace cuda_ops

struct OpsBenchConfig {
  int64_t rows = 37810;    // S, canonical
  int64_t hidden = 5376;   // D
  int64_t ffn = 14336;     // F
  int64_t table_rows = 3;  // AdaLN table rows (one timestep x 3 modalities)
  int reps = 20;
  int warmup = 3;
  uint64_t seed = 0x5eed;
  double peak_gbps = 4180.0;  // measured H200 device-to-device copy (PERFORMANCE.md)
  std::string ops;            // comma list of sections: rms_norm_modulate, gate_add, swiglu, qk_norm_rope; "": all
  std::string skip_variants;  // comma list of rms_norm_modulate variant names not to time (e.g. one that traps)
};

struct OpsBenchRow {
  std::string op;      // "rms_norm_modulate", "rms_norm+modulate (eager)", ...
  int64_t rows = 0, cols = 0;
  int reps = 0;
  double ms_p10 = 0, ms_p50 = 0, ms_p90 = 0, ms_p95 = 0;
  double bytes_moved = 0;   // minimum HBM bytes of this program
  double gbps_p50 = 0;      // bytes_moved / ms_p50
  double fraction_of_peak = 0;
  std::string check;        // correctness check run on the same inputs and its result
};

struct OpsBenchResult {
  std::string device;
  double peak_gbps = 0;
  int input_sets = 0;  // rotated input sets (working set > L2)
  std::vector<OpsBenchRow> rows;
};

Result<OpsBenchResult> bench_elementwise_ops(CudaBackend& backend, const OpsBenchConfig& config = {});

}  // namespace vortex
