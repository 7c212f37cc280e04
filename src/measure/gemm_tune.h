// gemm-tune and bench_gemm: enumerate cuBLASLt algorithms for the four H3 GEMM shapes, check each
// (bit identity vs the heuristic default on the whole output, error vs FP64 on sampled elements),
// time them alternating (median over reps), and produce the pinned table; bench_gemm times the
// shapes for `vortex bench` (p10/p50/p90, TFLOP/s). Inputs are device-random (Philox), never zeros.
// Exercised by apps/vortex/cmd_gemm_tune.cpp and tests/gemm/gemm_tune_test.cpp (small shapes, GPU).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gemm/gemm.h"
#include "gemm/gemm_table.h"
#include "vortex/status.h"

namespace vortex {

struct GemmShape {
  std::string name;
  int64_t n = 0, k = 0;  // out features, in features
};
// QKV 5376->21504, out 7168->5376, FC1 5376->28672, FC2 14336->5376.
const std::vector<GemmShape>& h3_gemm_shapes();
constexpr int64_t kCanonicalTokens = 37810;

// Timing percentiles of one measurement, by vortex::percentiles (docs/evidence.md).
struct TimingStats {
  double p10 = 0, p50 = 0, p90 = 0, p95 = 0;
  int n = 0;
};
TimingStats timing_stats(std::vector<double> ms);

// Device helpers (gemm_random.cu).
Status fill_uniform_bf16_device(void* dst, int64_t count, uint64_t seed, float scale, cudaStream_t s);
Status fill_uniform_f32_device(float* dst, int64_t count, uint64_t seed, float lo, float hi, cudaStream_t s);
Status fill_u16_device(void* dst, int64_t count, uint16_t value, cudaStream_t s);
// Number of differing 16-bit words between a and b (count in *mismatches, device uint64).
Status count_u16_mismatches_device(const void* a, const void* b, int64_t count, unsigned long long* mismatches,
                                   cudaStream_t s);

// Device operands for one GEMM of a precision at (m, n, k): random data, FP8 quantized with the
// engine's quantizers (weights: 1x128 bytes plus random 128x128 scales in [0.5, 1.5) — any valid
// blockwise operand), output buffer d. Owns its memory.
class GemmOperands {
 public:
  static Result<std::unique_ptr<GemmOperands>> create(GemmPrecision precision, int64_t m, int64_t n, int64_t k,
                                                      uint64_t seed, cudaStream_t s);
  ~GemmOperands();
  GemmCall call() const { return call_; }
  void* d() const { return call_.d; }
  // FP64 value of out[i, j] from the operands as the GEMM sees them (dequantized for FP8).
  Result<double> reference_f64(int64_t i, int64_t j) const;

 private:
  GemmOperands() = default;
  GemmCall call_;
  std::vector<void*> allocations_;
  int64_t scale_ld_ = 0;
};

struct GemmTuneOptions {
  int64_t m = kCanonicalTokens;
  int max_configs = 48;
  int reps = 10;      // timed runs per candidate, alternating across candidates
  int samples = 192;  // sampled output elements for the FP64 check
  uint64_t seed = 1;
};

struct GemmTuneCandidate {
  GemmAlgoConfig algo;
  bool from_heuristic = false;
  bool ran = false;
  std::string error;
  int64_t mismatches_vs_default = -1;  // 16-bit words that differ from the default's output
  double max_rel_err = 0;              // max |d - ref| / rms(ref) over sampled elements
  double check_ms = 0;                 // the (cold) correctness run's time
  TimingStats ms;
};

struct GemmTuneResult {
  GemmShape shape;
  GemmPrecision precision = GemmPrecision::kBf16;
  int64_t m = 0;
  GemmAlgoConfig heuristic;
  double heuristic_max_rel_err = 0;
  std::vector<GemmTuneCandidate> candidates;  // [0] is the heuristic default
  int best = 0;                               // the pin: the default unless a passing candidate is > 2% faster (p50)
  std::string json() const;
};

Result<GemmTuneResult> tune_gemm(GemmEngine& engine, GemmPrecision precision, const GemmShape& shape,
                                 const GemmTuneOptions& options);
// The pinned-table entry for a tune result on this GPU (precision, exact shape, lds, no bias).
Result<GemmTableEntry> table_entry_from_tune(const GemmTuneResult& result, const std::string& evidence);

struct GemmBenchOptions {
  int64_t m = kCanonicalTokens;
  int reps = 20;
  int warmup = 3;
  std::vector<GemmPrecision> precisions = {GemmPrecision::kBf16, GemmPrecision::kFp8PerTensor,
                                           GemmPrecision::kFp8Blockwise};
  uint64_t seed = 1;
};
struct GemmBenchRow {
  std::string shape;
  GemmPrecision precision = GemmPrecision::kBf16;
  int64_t m = 0, n = 0, k = 0;
  TimingStats ms;
  double tflops_p50 = 0;
  std::string algo;
  bool pinned = false;
  std::string error;  // non-empty: this (shape, precision) could not run (row has no timings)
  std::string json() const;
};
Result<std::vector<GemmBenchRow>> bench_gemm(GemmEngine& engine, const GemmBenchOptions& options);

}  // namespace vortex

namespace vortex {

// The whole `vortex gemm-tune` run: every (shape, precision) is tuned; the evidence JSON (all
// candidates, metadata) goes to `evidence_path` and the pinned table (best candidate per exact shape)
// to `table_path` (either may be empty to skip). Progress lines go to `log`.
struct GemmTuneRunOptions {
  GemmTuneOptions tune;
  std::vector<std::string> shapes = {"qkv", "out", "fc1", "fc2"};
  std::vector<GemmPrecision> precisions = {GemmPrecision::kBf16, GemmPrecision::kFp8PerTensor,
                                           GemmPrecision::kFp8Blockwise};
  std::string evidence_path;
  std::string table_path;
  std::string commit = "unknown";
  bool dirty = false;
};
Status run_gemm_tune(const GemmTuneRunOptions& options, void (*log)(const std::string&));

// Metadata shared by evidence rows: time_utc, gpu, sm, driver, cuda, cublaslt version.
std::string gemm_environment_json(const std::string& commit, bool dirty);

}  // namespace vortex
