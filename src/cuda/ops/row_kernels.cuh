// Row-kernel building blocks shared by rms_norm.cu, modulate.cu and rms_norm_modulate.cu: staging a
// bf16 row into shared memory with 16-byte loads, and the canonical inverse RMS of the staged row.
// One 256-thread block per row, so lane t of src/core/reduce.h is thread t. Launch helpers set the
// dynamic shared-memory limit for wide rows. Tested through tests/cuda/ops_test.cpp.
#pragma once

#include "cuda/check.h"
#include "cuda/ops/common.cuh"

namespace vortex::cuda_ops {

constexpr int kLaneBytes = kRowThreads * static_cast<int>(sizeof(double));  // 2048

inline size_t row_smem_bytes(int64_t cols) { return static_cast<size_t>(kLaneBytes) + static_cast<size_t>(cols) * 2; }

template <int kV>
__device__ __forceinline__ void stage_row(const uint16_t* src, int cols, uint16_t* row) {
  for (int c = threadIdx.x * kV; c < cols; c += kRowThreads * kV) store_chunk<kV>(row + c, load_chunk<kV>(src + c));
  __syncthreads();
}

// Canonical r = fp32(1/sqrt(mean(x^2) + eps)) of a staged row.
__device__ __forceinline__ float staged_row_inverse_rms(const uint16_t* row, int cols, float eps, double* lanes) {
  const double ss = block_canonical_sum_squares(
      cols, [&](int j) { return static_cast<double>(bf16_to_f32(row[j])); }, lanes);
  return inverse_rms(ss, cols, eps);
}

// Raises the kernel's dynamic shared-memory limit when a row needs more than the default 48 KB.
template <typename Kernel>
Status prepare_row_kernel(Kernel kernel, size_t smem_bytes) {
  if (smem_bytes <= 48 * 1024) return Status::Ok();
  int device = 0, optin = 0;
  VORTEX_CUDA_CHECK(cudaGetDevice(&device));
  VORTEX_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem_bytes > static_cast<size_t>(optin))
    return unsupported("row of " + std::to_string((smem_bytes - kLaneBytes) / 2) +
                       " bf16 elements does not fit in shared memory (" + std::to_string(optin) + " bytes per block)");
  VORTEX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
