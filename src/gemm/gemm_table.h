// The pinned GEMM algorithm table: JSON written by `vortex gemm-tune`, read by GemmEngine. An entry is
// used ONLY for the exact (precision, M, N, K, ldx, ldw, ldd, bias) it was proven on, and only on the
// same GPU name and cuBLASLt version (cuBLAS promises identical results only there, docs §2.1.4).
// Everything else runs the heuristic top-1. Tested in tests/gemm/fp8_reference_test.cpp (GemmTable) (round trip).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gemm/gemm.h"
#include "vortex/status.h"

namespace vortex {

struct GemmTableEntry {
  GemmPrecision precision = GemmPrecision::kBf16;
  int64_t m = 0, n = 0, k = 0, ldx = 0, ldw = 0, ldd = 0;
  bool bias = false;
  std::string gpu;                // cudaDeviceProp::name
  uint64_t cublaslt_version = 0;  // cublasLtGetVersion()
  GemmAlgoConfig algo;
  std::string evidence;  // benchmarks/ file that proved it (informational)
};

struct GemmTable {
  std::vector<GemmTableEntry> entries;
  const GemmTableEntry* find(GemmPrecision precision, int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldw,
                             int64_t ldd, bool bias, const std::string& gpu, uint64_t cublaslt_version) const;
};

Result<GemmTable> parse_gemm_table(const std::string& json_text);
Result<GemmTable> load_gemm_table(const std::string& path);
// The tables shipped in src/gemm/tables/ (compiled in), merged in file order.
Result<GemmTable> builtin_gemm_table();
std::string gemm_table_to_json(const GemmTable& table);
Status save_gemm_table(const GemmTable& table, const std::string& path);

}  // namespace vortex
