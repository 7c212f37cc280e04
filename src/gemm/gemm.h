// GemmEngine: every linear layer on the GPU goes through cuBLASLt here (BF16 with FP32 accumulation,
// FP32 without TF32 for the FP32 patch projections/heads, FP8 E4M3 per-tensor and Hopper blockwise).
// One cuBLASLt handle, a plan cache per (shape, dtypes, layout), a workspace, and the pinned algorithm
// table written by `vortex gemm-tune` (used only for the exact shapes it was proven on).
// Numerics: out = R(x @ W^T + bias) (NUMERICS.md step 3/6/9/10). Tested in tests/gemm (E1 vs FP64).
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "model/h3_weights.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

class GemmEngine {
 public:
  static Result<std::unique_ptr<GemmEngine>> create();
  virtual ~GemmEngine() = default;
  // out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) on `stream`; x/out row-major with leading-dimension
  // strides allowed (row views of larger buffers). Dispatches on x.dtype() and w.format.
  virtual Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out,
                        cudaStream_t stream) = 0;
};

}  // namespace vortex
