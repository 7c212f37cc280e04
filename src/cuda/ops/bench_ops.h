// Micro-benchmark of the Component 1 elementwise kernels at the canonical shape (S = 37,810): fused
// rms_norm_modulate, gate_add, swiglu and qk_norm_rope, plus the eager programs they replace, timed with CUDA events
// (warm-up, >= 20 reps, p10/p50/p90/p95) on input sets rotated so the working set exceeds L2, reported as
// GB/s on the minimum bytes moved vs the 4.18 TB/s copy ceiling (PERFORMANCE.md). A library function
// returning a struct; `vortex bench` formats it. Fused and eager outputs are compared byte for byte, and the
// other rms_norm_modulate kernel variant (below: the warp_row baseline) is timed and compared with the default's bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vortex/status.h"

namespace vortex {

class CudaBackend;

namespace cuda_ops {
// Kernel variants of rms_norm_modulate's register-row path (rows of <= 6144 bf16, 16-byte aligned), selectable
// process-wide so that ONE benchmark run times both; both are E0 (tests/cuda/ops_test.cpp loops over them). Wide
// or unaligned rows take the block-per-row kernel whatever the variant. Defined in rms_norm_modulate.cu.
//   kSmemPrefetchBf16x2 (default): persistent CTAs, weight, t = R(1 + scale) and shift of the CTA's table rows staged
//       in shared memory, the next row loaded while the current row is written, R(n * t) and R(p + shift) as native
//       bf16x2 mul.rn / add.rn. H200, S = 37,810, D = 5376: 0.226 ms, 85.9% of copy.
//   kWarpRow: one warp per row, scale/shift/weight from L2 per chunk; 0.269 ms, 72.3%. The measured baseline the
//       bench compares against, and the path taken when the table kernel cannot be resident.
// Evidence: benchmarks/2026-11-29-h200-s8/run5-rms-norm-modulate-variants.txt (smem 0.239, smem_prefetch 0.242,
// smem_bf16x2 0.229, smem_prefetch_bf16x2_intcvt 0.228 ms: not kept).
enum class RmsNormModulateVariant : int {
  kSmemPrefetchBf16x2 = 0,
  kWarpRow = 1,
};
constexpr int kRmsNormModulateVariants = 2;
constexpr RmsNormModulateVariant kRmsNormModulateDefaultVariant = RmsNormModulateVariant::kSmemPrefetchBf16x2;
const char* rms_norm_modulate_variant_name(RmsNormModulateVariant v);  // "smem_prefetch_bf16x2", "warp_row"
void set_rms_norm_modulate_variant(RmsNormModulateVariant v);          // process-wide; not for concurrent use
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
