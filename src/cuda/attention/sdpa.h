// SdpaAttention: the BF16 attention baseline through cuDNN's graph API (backend `sdpa`).
// Reads q, k, v as strided views of the [S, 3*I] QKV buffer (head h at column offset h*head_dim,
// row stride 3*I) and writes token-major out [S, I] for the output projection — no layout copies.
// Non-causal, no mask, scale 1/sqrt(head_dim), FP32 softmax; E1 vs the CPU reference.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/device_buffer.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

class SdpaAttention {
 public:
  // cuDNN's workspace comes from `memory` (the backend's caching allocator; null: cudaMalloc).
  static Result<std::unique_ptr<SdpaAttention>> create(std::shared_ptr<DeviceMemoryResource> memory = nullptr);
  virtual ~SdpaAttention() = default;
  // q, k, v: [S, num_heads*head_dim] bf16 views (row stride may exceed the width); out: [S, I] bf16.
  virtual Status run(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                     cudaStream_t stream) = 0;
  // Raw form on device pointers: q/k/v rows of `ld_qkv` elements (head h at column h*head_dim of
  // each), out rows of `ld_out` elements. All bf16, 16-byte aligned.
  virtual Status run_raw(const void* q, const void* k, const void* v, int64_t ld_qkv, void* out, int64_t ld_out,
                         int64_t seq_len, int num_heads, int head_dim, cudaStream_t stream) = 0;
  // `batch` equal-length sequences packed along the rows of q, k, v, out ([batch * L, I] views as in run()), one
  // cuDNN call with a batch dimension: sequence b is rows [b * L, (b + 1) * L) (the video VAE's tiles).
  virtual Status run_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int num_heads,
                             int head_dim, Tensor& out, cudaStream_t stream) = 0;
  // Which cuDNN graph / engine the plan for this shape uses (builds the plan if needed).
  virtual Result<std::string> plan_info(int64_t seq_len, int num_heads, int head_dim, int64_t ld_qkv,
                                        int64_t ld_out) = 0;
};

}  // namespace vortex
