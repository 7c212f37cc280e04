// Helpers shared by the gemm-tune sources (gemm_tune_operands.cpp, gemm_tune_search.cpp, gemm_tune.cpp): the CUDA
// check of the tuner (a Status with the failing call) and the precision facts. Internal to component `gemm`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "measure/gemm_tune.h"

#define VORTEX_TUNE_CUDA(expr)                                                                      \
  do {                                                                                              \
    cudaError_t vortex_err_ = (expr);                                                               \
    if (vortex_err_ != cudaSuccess)                                                                 \
      return Status(ErrorCode::kCuda, std::string(#expr) + ": " + cudaGetErrorString(vortex_err_)); \
  } while (0)

namespace vortex::gemm_tune_detail {

inline bool is_fp8(GemmPrecision p) {
  return p == GemmPrecision::kFp8PerTensor || p == GemmPrecision::kFp8Blockwise || p == GemmPrecision::kFp8RowScaled;
}
inline size_t out_elem_size(GemmPrecision p) { return p == GemmPrecision::kF32 ? 4 : 2; }

}  // namespace vortex::gemm_tune_detail
