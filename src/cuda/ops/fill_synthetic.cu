// fill_synthetic: element i (row-major logical index) = synthetic_value(seed, i, scale, offset) from
// src/core/philox.h, converted to the tensor's dtype (f32 as is, bf16 RNE, f8e4m3 RNE satfinite) — the
// same bytes as fill_synthetic_host (src/core/synthetic.h) for any launch shape. Kernel -> launcher ->
// validating entry point. Device == host bytes are checked in tests/cuda/ops_test.cpp.
#include <cuda_fp8.h>

#include "core/philox.h"
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

template <typename T>
__device__ __forceinline__ T synthetic_as(float v);
template <>
__device__ __forceinline__ float synthetic_as<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ uint16_t synthetic_as<uint16_t>(float v) {
  return f32_to_bf16(v);
}
template <>
__device__ __forceinline__ uint8_t synthetic_as<uint8_t>(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));  // cvt.rn.satfinite.e4m3x2.f32
}

// One thread per Philox block of 4 elements: the 4 words are used with compile-time indices (no local
// memory), each value formed exactly as synthetic_value() forms it (offset + scale * u, no FMA).
template <typename T>
__global__ void fill_synthetic_kernel(T* dst, int64_t ld, int64_t rows, int64_t cols, uint64_t seed, float scale,
                                      float offset) {
  const int64_t n = rows * cols;
  const int64_t groups = (n + 3) / 4;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Philox4x32 bits = philox_block(seed, static_cast<uint64_t>(g));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = 4 * g + k;
      if (i >= n) break;
      const float v = __fadd_rn(__fmul_rn(scale, uniform_pm1_from_bits(bits.v[k])), offset);
      const int64_t r = i / cols, c = i - r * cols;
      dst[r * ld + c] = synthetic_as<T>(v);
    }
  }
}

template <typename T>
Status launch_fill(const RowView& v, uint64_t seed, float scale, float offset, cudaStream_t stream) {
  const int64_t n = v.rows * v.cols;
  const int64_t blocks = std::min<int64_t>(((n + 3) / 4 + 255) / 256, 65536);
  fill_synthetic_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(static_cast<T*>(v.ptr), v.ld, v.rows,
                                                                              v.cols, seed, scale, offset);
  VORTEX_CUDA_LAUNCH_CHECK("fill_synthetic_kernel");
  return Status::Ok();
}

}  // namespace

Status fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView v, row_view(dst, "fill_synthetic dst"));
  if (v.rows == 0 || v.cols == 0) return Status::Ok();
  switch (v.dtype) {
    case DType::kF32:
      return launch_fill<float>(v, seed, scale, offset, stream);
    case DType::kBF16:
      return launch_fill<uint16_t>(v, seed, scale, offset, stream);
    case DType::kF8E4M3:
      return launch_fill<uint8_t>(v, seed, scale, offset, stream);
    default:
      return unsupported(std::string("fill_synthetic: dtype ") + dtype_short_name(v.dtype) +
                         " is not supported on CUDA (f32, bf16, f8e4m3 are)");
  }
}

}  // namespace vortex::cuda_ops
