// Exact NVFP4 -> BF16 dequantization without the global scale (the operands of the Hopper W4A4 emulation)
// and the device alpha = g_a * g_b. Why exact: see nvfp4_gemm.h (e2m1 * e4m3 has <= 6 significant bits).
// One thread per 16-element block: 8 packed bytes + 1 tiled scale byte in, 32 bytes of BF16 out.
// Tested in tests/gemm/nvfp4_gemm_test.cpp (every output bit vs ref::nvfp4_dequantized_value).
#include <cuda_bf16.h>

#include <string>

#include "gemm/nvfp4_gemm.h"
#include "ref/nvfp4_quantize.h"

namespace vortex {
namespace {

// E2M1 magnitudes by code (bit 3 = sign): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
__device__ __forceinline__ float e2m1_value(uint32_t code) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = mag[code & 7u];
  return (code & 8u) ? -m : m;
}

// E4M3FN (bias 7): exact in FP32. The sign bit is ignored (cuBLAS treats UE4M3 block scales as unsigned);
// 0x7F (NaN) never occurs in a valid scale tensor (the quantizer clamps to 448, the loader rejects NaN).
__device__ __forceinline__ float ue4m3_value(uint32_t b) {
  const uint32_t e = (b >> 3) & 0xFu, m = b & 7u;
  if (e == 0) return static_cast<float>(m) * 0.001953125f;                  // m * 2^-9 (subnormal)
  return __int_as_float(static_cast<int>(((e + 120u) << 23) | (m << 20)));  // 2^(e-7) * 1.mmm
}

__global__ void nvfp4_dequantize_unscaled_kernel(const uint8_t* __restrict__ data, const uint8_t* __restrict__ scales,
                                                 int64_t rows, int64_t blocks, int64_t data_row_bytes,
                                                 int64_t scale_cols, __nv_bfloat16* __restrict__ out, int64_t ld_out) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * blocks) return;
  const int64_t r = idx / blocks, c = idx % blocks;
  const uint2 packed = *reinterpret_cast<const uint2*>(data + r * data_row_bytes + c * 8);  // 16 codes
  const float s = ue4m3_value(scales[ref::nvfp4_scale_offset(r, c, scale_cols)]);
  const uint32_t words[2] = {packed.x, packed.y};
  __align__(16) __nv_bfloat16 v[16];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const uint32_t byte = (words[w] >> (8 * b)) & 0xFFu;
      // Even element in the high nibble (comfy hi-first order).
      v[w * 8 + b * 2] = __float2bfloat16_rn(__fmul_rn(e2m1_value(byte >> 4), s));
      v[w * 8 + b * 2 + 1] = __float2bfloat16_rn(__fmul_rn(e2m1_value(byte & 0xFu), s));
    }
  }
  uint4* dst = reinterpret_cast<uint4*>(out + r * ld_out + c * 16);
  dst[0] = reinterpret_cast<const uint4*>(v)[0];
  dst[1] = reinterpret_cast<const uint4*>(v)[1];
}

__global__ void nvfp4_alpha_kernel(const float* g_a, const float* g_b, float* alpha) {
  alpha[0] = __fmul_rn(g_a[0], g_b[0]);
}

bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

}  // namespace

Status nvfp4_dequantize_unscaled_bf16(const Nvfp4Operand& a, uint16_t* out, int64_t ld_out, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0)
    return invalid_argument("nvfp4_dequantize_unscaled_bf16: rows and cols must be positive, got " +
                            std::to_string(a.rows) + " x " + std::to_string(a.cols));
  if (!a.data || !a.scales || !out) return invalid_argument("nvfp4_dequantize_unscaled_bf16: null pointer");
  const ref::Nvfp4Layout layout = ref::nvfp4_layout(a.rows, a.cols);
  if (ld_out < layout.blocks * 16 || ld_out % 8 != 0 || !aligned(out, 16) || !aligned(a.data, 8))
    return invalid_argument(
        "nvfp4_dequantize_unscaled_bf16: out needs 16-byte aligned rows of at least roundup(K,16) = " +
        std::to_string(layout.blocks * 16) + " elements (ld_out=" + std::to_string(ld_out) +
        ") and data 8-byte aligned");
  const int64_t work = a.rows * layout.blocks;
  const int threads = 256;
  const int64_t grid = (work + threads - 1) / threads;
  nvfp4_dequantize_unscaled_kernel<<<static_cast<unsigned>(grid), threads, 0, stream>>>(
      a.data, a.scales, a.rows, layout.blocks, layout.data_row_bytes, layout.scale_cols,
      reinterpret_cast<__nv_bfloat16*>(out), ld_out);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return Status(ErrorCode::kCuda, std::string("nvfp4_dequantize_unscaled_kernel launch: ") + cudaGetErrorString(err));
  return Status::Ok();
}

Status nvfp4_alpha(const float* g_a, const float* g_b, float* alpha, cudaStream_t stream) {
  if (!g_a || !g_b || !alpha)
    return invalid_argument("nvfp4_alpha: null pointer (global scales must be on the device)");
  nvfp4_alpha_kernel<<<1, 1, 0, stream>>>(g_a, g_b, alpha);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return Status(ErrorCode::kCuda, std::string("nvfp4_alpha_kernel launch: ") + cudaGetErrorString(err));
  return Status::Ok();
}

}  // namespace vortex
