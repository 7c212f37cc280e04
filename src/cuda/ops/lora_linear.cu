// Elementwise steps of the run-time LoRA linear on CUDA (lora_linear.h): R(scale * t) with the scale in FP64, the
// FP32 accumulator add, and R(acc + bias) with the add in FP64 and one rounding (f64_to_bf16: round-to-odd to FP32,
// then RNE, the host's bf16_bits_from_f64). Grid-stride loops over int64 element indices; the output pass moves 4
// columns per thread when the row width and strides allow 16-byte accumulator loads. Tested through
// tests/cuda/lora_linear_test.cpp (CudaBackend::linear_lora vs ref::linear_lora).
#include "cuda/check.h"
#include "cuda/ops/common.cuh"
#include "cuda/ops/lora_linear.h"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

__global__ void __launch_bounds__(kThreads)
    scale_round_kernel(const float* __restrict__ t32, int64_t ld32, int64_t m, int64_t r, double scale,
                       uint16_t* __restrict__ t16, int64_t ld16) {
  const int64_t total = m * r;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    t16[(e / r) * ld16 + e % r] = f64_to_bf16(__dmul_rn(scale, static_cast<double>(t32[(e / r) * ld32 + e % r])));
}

__global__ void __launch_bounds__(kThreads)
    add_columns_kernel(float* __restrict__ acc, int64_t ld_acc, const float* __restrict__ u, int64_t m, int64_t cols) {
  const int64_t total = m * cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / cols, j = e % cols;
    float& a = acc[i * ld_acc + j];
    a = __fadd_rn(a, u[e]);
  }
}

__device__ __forceinline__ uint16_t round_out(float acc, const uint16_t* bias, int64_t j) {
  double v = static_cast<double>(acc);
  if (bias) v = __dadd_rn(v, static_cast<double>(bf16_to_f32(bias[j])));
  return f64_to_bf16(v);
}

template <bool kVec4>
__global__ void __launch_bounds__(kThreads)
    round_output_kernel(const float* __restrict__ acc, int64_t m, int64_t n, const uint16_t* __restrict__ bias,
                        uint16_t* __restrict__ out, int64_t ldo) {
  constexpr int kPer = kVec4 ? 4 : 1;
  const int64_t per_row = n / kPer, total = m * per_row;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / per_row, j = (e % per_row) * kPer;
    if constexpr (kVec4) {
      const float4 a = *reinterpret_cast<const float4*>(acc + i * n + j);
      ushort4 o;
      o.x = round_out(a.x, bias, j);
      o.y = round_out(a.y, bias, j + 1);
      o.z = round_out(a.z, bias, j + 2);
      o.w = round_out(a.w, bias, j + 3);
      *reinterpret_cast<ushort4*>(out + i * ldo + j) = o;
    } else {
      out[i * ldo + j] = round_out(acc[i * n + j], bias, j);
    }
  }
}

bool aligned(const void* p, unsigned bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

}  // namespace

Status lora_scale_round(const float* t32, int64_t ld_t32, int64_t m, int64_t r, double scale, uint16_t* t16,
                        int64_t ld_t16, cudaStream_t stream) {
  if (m < 0 || r < 0 || ld_t32 < r || ld_t16 < r) return invalid_argument("lora_scale_round: bad sizes");
  if (m == 0 || r == 0) return Status::Ok();
  scale_round_kernel<<<grid_for(m * r), kThreads, 0, stream>>>(t32, ld_t32, m, r, scale, t16, ld_t16);
  VORTEX_CUDA_LAUNCH_CHECK("lora scale_round_kernel");
  return Status::Ok();
}

Status lora_add_columns(float* acc, int64_t ld_acc, const float* u, int64_t m, int64_t cols, cudaStream_t stream) {
  if (m < 0 || cols < 0 || ld_acc < cols) return invalid_argument("lora_add_columns: bad sizes");
  if (m == 0 || cols == 0) return Status::Ok();
  add_columns_kernel<<<grid_for(m * cols), kThreads, 0, stream>>>(acc, ld_acc, u, m, cols);
  VORTEX_CUDA_LAUNCH_CHECK("lora add_columns_kernel");
  return Status::Ok();
}

Status lora_round_output(const float* acc, int64_t m, int64_t n, const uint16_t* bias, uint16_t* out, int64_t ldo,
                         cudaStream_t stream) {
  if (m < 0 || n < 0 || ldo < n) return invalid_argument("lora_round_output: bad sizes");
  if (m == 0 || n == 0) return Status::Ok();
  if (n % 4 == 0 && ldo % 4 == 0 && aligned(acc, 16) && aligned(out, 8)) {
    round_output_kernel<true><<<grid_for(m * n / 4), kThreads, 0, stream>>>(acc, m, n, bias, out, ldo);
  } else {
    round_output_kernel<false><<<grid_for(m * n), kThreads, 0, stream>>>(acc, m, n, bias, out, ldo);
  }
  VORTEX_CUDA_LAUNCH_CHECK("lora round_output_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
