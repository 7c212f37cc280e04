// SdpaAttention: the BF16 attention baseline through cuDNN's graph API (backend `sdpa`).
// Reads q, k, v as strided views of the [S, 3*I] QKV buffer (head h at column offset h*head_dim,
// row stride 3*I) and writes token-major out [S, I] for the output projection — no layout copies.
// Non-causal, no mask, scale 1/sqrt(head_dim), FP32 softmax; E1 vs the CPU reference.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

class SdpaAttention {
 public:
  static Result<std::unique_ptr<SdpaAttention>> create();
  virtual ~SdpaAttention() = default;
  // q, k, v: [S, num_heads*head_dim] bf16 views (row stride may exceed the width); out: [S, I] bf16.
  virtual Status run(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim,
                     Tensor& out, cudaStream_t stream) = 0;
};

}  // namespace vortex
