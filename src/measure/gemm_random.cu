// Device helpers for GEMM tuning, benchmarks and tests: Philox-uniform fills (the same values
// core/philox.h gives on the host), a 16-bit poison fill and an exact 16-bit mismatch counter.
// Tested through tests/gemm/gemm_tune_test.cpp (fills are checked against synthetic_value on the host).
#include <string>

#include "core/philox.h"
#include "measure/gemm_tune.h"

namespace vortex {
namespace {

static __global__ void fill_bf16_kernel(uint16_t* dst, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = synthetic_value(seed, static_cast<uint64_t>(i), scale, 0.0f);
    // RNE to bf16 (finite inputs only).
    const uint32_t u = __float_as_uint(v);
    dst[i] = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
}

static __global__ void fill_f32_kernel(float* dst, int64_t count, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float u = synthetic_value(seed, static_cast<uint64_t>(i), 0.5f, 0.5f);  // [0, 1)
    dst[i] = __fadd_rn(lo, __fmul_rn(u, __fsub_rn(hi, lo)));
  }
}

static __global__ void fill_u16_kernel(uint16_t* dst, int64_t count, uint16_t value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = value;
}

static __global__ void mismatch_kernel(const uint16_t* a, const uint16_t* b, int64_t count, unsigned long long* out) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    local += a[i] != b[i];
  for (int off = 16; off > 0; off >>= 1) local += __shfl_xor_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(out, local);
}

unsigned grid_for(int64_t count) {
  const int64_t blocks = (count + 255) / 256;
  return static_cast<unsigned>(blocks < 8192 ? (blocks > 0 ? blocks : 1) : 8192);
}

Status launched(const char* name) {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess
             ? Status::Ok()
             : Status(ErrorCode::kCuda, std::string(name) + " launch failed: " + cudaGetErrorString(err));
}

}  // namespace

Status fill_uniform_bf16_device(void* dst, int64_t count, uint64_t seed, float scale, cudaStream_t s) {
  fill_bf16_kernel<<<grid_for(count), 256, 0, s>>>(static_cast<uint16_t*>(dst), count, seed, scale);
  return launched("fill_bf16_kernel");
}

Status fill_uniform_f32_device(float* dst, int64_t count, uint64_t seed, float lo, float hi, cudaStream_t s) {
  fill_f32_kernel<<<grid_for(count), 256, 0, s>>>(dst, count, seed, lo, hi);
  return launched("fill_f32_kernel");
}

Status fill_u16_device(void* dst, int64_t count, uint16_t value, cudaStream_t s) {
  fill_u16_kernel<<<grid_for(count), 256, 0, s>>>(static_cast<uint16_t*>(dst), count, value);
  return launched("fill_u16_kernel");
}

Status count_u16_mismatches_device(const void* a, const void* b, int64_t count, unsigned long long* mismatches,
                                   cudaStream_t s) {
  cudaError_t err = cudaMemsetAsync(mismatches, 0, sizeof(unsigned long long), s);
  if (err != cudaSuccess) return Status(ErrorCode::kCuda, std::string("cudaMemsetAsync: ") + cudaGetErrorString(err));
  mismatch_kernel<<<grid_for(count), 256, 0, s>>>(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
                                                  count, mismatches);
  return launched("mismatch_kernel");
}

}  // namespace vortex
