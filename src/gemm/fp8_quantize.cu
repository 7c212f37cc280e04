// GPU FP8 E4M3 activation quantizers for the cuBLASLt FP8 GEMMs: per tensor (exact amax reduction,
// then scale = amax/448 and q = cvt.rn.satfinite.e4m3(x / scale)) and 1x128 per (row, channel group).
// Divisions are __fdiv_rn so the bytes equal the host reference (gemm/fp8_reference.cpp, E0).
// Per tensor has a vector path (8 bf16 per 16-byte load, 8 bytes per store) where x, ldx, K and q allow
// it, and the element path otherwise: the same per-element program, so both are E0 with the reference.
// Tested in tests/gemm/gemm_test.cpp (Fp8Quantize.*: bytes and scales vs the reference, both paths).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <string>

#include "gemm/gemm.h"

namespace vortex {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float scale_from_amax_bits(uint32_t amax_bf16_bits) {
  const float amax = __uint_as_float(amax_bf16_bits << 16);
  return amax == 0.0f ? 1.0f : __fdiv_rn(amax, 448.0f);
}

__device__ __forceinline__ uint8_t quantize_e4m3(float x, float scale) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(x, scale), __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// amax over [m, k] (row stride ldx) as max of (bits & 0x7FFF) — exact in any order, NaN sorts high.
static __global__ void abs_max_kernel(const uint16_t* __restrict__ x, int64_t m, int64_t k, int64_t ldx,
                                      uint32_t* __restrict__ amax) {
  uint32_t best = 0;
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x)
    for (int64_t c = threadIdx.x; c < k; c += blockDim.x)
      best = max(best, static_cast<uint32_t>(x[r * ldx + c] & 0x7FFF));
  for (int off = 16; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, off));
  __shared__ uint32_t warp_best[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) best = max(best, warp_best[w]);
    atomicMax(amax, best);
  }
}

// q = e4m3(x / scale); scale from the amax bits (dynamic) or given (static). Block 0 stores the
// dynamic scale for the GEMM.
static __global__ void quantize_per_tensor_kernel(const uint16_t* __restrict__ x, int64_t m, int64_t k, int64_t ldx,
                                                  uint8_t* __restrict__ q, const uint32_t* __restrict__ amax,
                                                  const float* __restrict__ static_scale,
                                                  float* __restrict__ scale_out) {
  const float scale = static_scale ? *static_scale : scale_from_amax_bits(*amax);
  if (scale_out && blockIdx.x == 0 && threadIdx.x == 0) *scale_out = scale;
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x)
    for (int64_t c = threadIdx.x; c < k; c += blockDim.x)
      q[r * k + c] = quantize_e4m3(bf16_bits_to_float(x[r * ldx + c]), scale);
}

// Vector path of the two kernels above (x 16-byte aligned, ldx % 8 == 0, K % 8 == 0, q 8-byte
// aligned): lane t of a row loads 8 bf16 with one 16-byte load. The element path's 2-byte loads and
// 1-byte stores moved ~1.6 TB/s inside block 24 (out_proj / FC2 region minus the GEMM,
// docs/performance.md "FP8 GEMMs in the block"); `gemm_bench fp8` times both in the same run.
static __global__ void abs_max_vec8_kernel(const uint16_t* __restrict__ x, int64_t m, int64_t k8, int64_t ldx,
                                           uint32_t* __restrict__ amax) {
  uint32_t best = 0;
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
    const uint4* row = reinterpret_cast<const uint4*>(x + r * ldx);
    for (int64_t c = threadIdx.x; c < k8; c += blockDim.x) {
      const uint4 v = __ldg(row + c);
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) best = max(best, max(words[i] & 0x7FFFu, (words[i] >> 16) & 0x7FFFu));
    }
  }
  for (int off = 16; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, off));
  __shared__ uint32_t warp_best[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) best = max(best, warp_best[w]);
    atomicMax(amax, best);
  }
}

static __global__ void quantize_per_tensor_vec8_kernel(const uint16_t* __restrict__ x, int64_t m, int64_t k8,
                                                       int64_t ldx, uint8_t* __restrict__ q,
                                                       const uint32_t* __restrict__ amax,
                                                       const float* __restrict__ static_scale,
                                                       float* __restrict__ scale_out) {
  const float scale = static_scale ? *static_scale : scale_from_amax_bits(*amax);
  if (scale_out && blockIdx.x == 0 && threadIdx.x == 0) *scale_out = scale;
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
    const uint4* row = reinterpret_cast<const uint4*>(x + r * ldx);
    uint2* out = reinterpret_cast<uint2*>(q + r * k8 * 8);
    for (int64_t c = threadIdx.x; c < k8; c += blockDim.x) {
      const uint4 v = __ldg(row + c);
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
      uint32_t packed[2] = {0u, 0u};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint16_t b = static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2)));
        packed[i / 4] |= static_cast<uint32_t>(quantize_e4m3(bf16_bits_to_float(b), scale)) << (8 * (i % 4));
      }
      out[c] = make_uint2(packed[0], packed[1]);
    }
  }
}

// Per row: one block per row; the amax pass reads the row from DRAM and the quantize pass re-reads it
// from L2 (a row is at most 28 KiB at H3 widths), so the tensor costs one DRAM read and one write.
// Vector loads only (x 16-byte aligned, ldx % 8 == 0, K % 8 == 0, q 8-byte aligned).
static __global__ void quantize_per_row_vec8_kernel(const uint16_t* __restrict__ x, int64_t m, int64_t k8, int64_t ldx,
                                                    uint8_t* __restrict__ q, float* __restrict__ scales) {
  __shared__ uint32_t warp_best[kThreads / 32];
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
    const uint4* row = reinterpret_cast<const uint4*>(x + r * ldx);
    uint32_t best = 0;
    for (int64_t c = threadIdx.x; c < k8; c += blockDim.x) {
      const uint4 v = __ldg(row + c);
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) best = max(best, max(words[i] & 0x7FFFu, (words[i] >> 16) & 0x7FFFu));
    }
    for (int off = 16; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, off));
    if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
    __syncthreads();
    best = warp_best[0];
    for (int w = 1; w < kThreads / 32; ++w) best = max(best, warp_best[w]);
    __syncthreads();  // warp_best is rewritten by the next row
    const float scale = scale_from_amax_bits(best);
    if (threadIdx.x == 0) scales[r] = scale;
    uint2* out = reinterpret_cast<uint2*>(q + r * k8 * 8);
    for (int64_t c = threadIdx.x; c < k8; c += blockDim.x) {
      const uint4 v = __ldg(row + c);
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
      uint32_t packed[2] = {0u, 0u};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint16_t b = static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2)));
        packed[i / 4] |= static_cast<uint32_t>(quantize_e4m3(bf16_bits_to_float(b), scale)) << (8 * (i % 4));
      }
      out[c] = make_uint2(packed[0], packed[1]);
    }
  }
}

// out[j] = s_w * gate[j] (one FP32 product; gate bf16, s_w one f32 on the device): the OUTER_VEC weight
// scale of the gated-residual epilogue.
static __global__ void gate_scale_vector_kernel(const float* __restrict__ w_scale, const uint16_t* __restrict__ gate,
                                                int64_t n, float* __restrict__ out) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < n) out[j] = __fmul_rn(*w_scale, bf16_bits_to_float(gate[j]));
}

// One warp per (row, 128-channel group); lane l owns channels g*128 + 4l .. 4l+3 (k % 4 == 0).
static __global__ void quantize_rowblock128_kernel(const uint16_t* __restrict__ x, int64_t m, int64_t k, int64_t ldx,
                                                   uint8_t* __restrict__ q, float* __restrict__ scales,
                                                   int64_t ld_scale) {
  const int64_t groups = (k + 127) / 128;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= groups * ld_scale) return;
  const int64_t r = warp / groups, g = warp % groups;
  const int64_t c = g * 128 + lane * 4;
  const bool in = c < k;
  if (r >= m) {  // padding row: zeros, scale 1
    if (in) *reinterpret_cast<uint32_t*>(q + r * k + c) = 0u;
    if (lane == 0) scales[g * ld_scale + r] = 1.0f;
    return;
  }
  float v[4] = {0.f, 0.f, 0.f, 0.f};
  uint32_t best = 0;
  if (in) {
    for (int i = 0; i < 4; ++i) {
      const uint16_t b = x[r * ldx + c + i];
      v[i] = bf16_bits_to_float(b);
      best = max(best, static_cast<uint32_t>(b & 0x7FFF));
    }
  }
  for (int off = 16; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, off));
  const float scale = scale_from_amax_bits(best);
  if (in) {
    uint32_t packed = 0;
    for (int i = 0; i < 4; ++i) packed |= static_cast<uint32_t>(quantize_e4m3(v[i], scale)) << (8 * i);
    *reinterpret_cast<uint32_t*>(q + r * k + c) = packed;
  }
  if (lane == 0) scales[g * ld_scale + r] = scale;
}

Status launch_check(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return Status(ErrorCode::kCuda, std::string(what) + " launch failed: " + cudaGetErrorString(err));
  return Status::Ok();
}

Status check_args(const void* x, int64_t m, int64_t k, int64_t ldx, const void* q) {
  if (!x || !q) return invalid_argument("fp8 quantize: null pointer");
  if (m <= 0 || k <= 0 || ldx < k)
    return invalid_argument("fp8 quantize: bad shape m=" + std::to_string(m) + " k=" + std::to_string(k) +
                            " ldx=" + std::to_string(ldx));
  return Status::Ok();
}

unsigned grid_rows(int64_t m) { return static_cast<unsigned>(m < 65535 ? m : 65535); }

// The vector path's preconditions (16-byte loads of x rows, 8-byte stores of q rows).
bool vec8_ok(const void* x, int64_t k, int64_t ldx, const void* q) {
  return reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(q) % 8 == 0 && k % 8 == 0 &&
         ldx % 8 == 0;
}

}  // namespace

Status quantize_fp8_per_tensor(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, float* scale,
                               uint32_t* amax_scratch, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_args(x, m, k, ldx, q));
  if (!scale || !amax_scratch) return invalid_argument("fp8 quantize: null scale or amax scratch");
  if (!vec8_ok(x, k, ldx, q)) return quantize_fp8_per_tensor_element_path(x, m, k, ldx, q, scale, amax_scratch, stream);
  cudaError_t err = cudaMemsetAsync(amax_scratch, 0, sizeof(uint32_t), stream);
  if (err != cudaSuccess) return Status(ErrorCode::kCuda, std::string("cudaMemsetAsync: ") + cudaGetErrorString(err));
  const uint16_t* xs = static_cast<const uint16_t*>(x);
  abs_max_vec8_kernel<<<grid_rows(m), kThreads, 0, stream>>>(xs, m, k / 8, ldx, amax_scratch);
  VORTEX_RETURN_IF_ERROR(launch_check("abs_max_vec8_kernel"));
  quantize_per_tensor_vec8_kernel<<<grid_rows(m), kThreads, 0, stream>>>(xs, m, k / 8, ldx, static_cast<uint8_t*>(q),
                                                                         amax_scratch, nullptr, scale);
  return launch_check("quantize_per_tensor_vec8_kernel");
}

Status quantize_fp8_per_tensor_element_path(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, float* scale,
                                            uint32_t* amax_scratch, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_args(x, m, k, ldx, q));
  if (!scale || !amax_scratch) return invalid_argument("fp8 quantize: null scale or amax scratch");
  cudaError_t err = cudaMemsetAsync(amax_scratch, 0, sizeof(uint32_t), stream);
  if (err != cudaSuccess) return Status(ErrorCode::kCuda, std::string("cudaMemsetAsync: ") + cudaGetErrorString(err));
  const uint16_t* xs = static_cast<const uint16_t*>(x);
  abs_max_kernel<<<grid_rows(m), kThreads, 0, stream>>>(xs, m, k, ldx, amax_scratch);
  VORTEX_RETURN_IF_ERROR(launch_check("abs_max_kernel"));
  quantize_per_tensor_kernel<<<grid_rows(m), kThreads, 0, stream>>>(xs, m, k, ldx, static_cast<uint8_t*>(q),
                                                                    amax_scratch, nullptr, scale);
  return launch_check("quantize_per_tensor_kernel");
}

Status quantize_fp8_per_tensor_static(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, const float* scale,
                                      cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_args(x, m, k, ldx, q));
  if (!scale) return invalid_argument("fp8 quantize: null static scale");
  if (vec8_ok(x, k, ldx, q)) {
    quantize_per_tensor_vec8_kernel<<<grid_rows(m), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(x), m, k / 8, ldx, static_cast<uint8_t*>(q), nullptr, scale, nullptr);
    return launch_check("quantize_per_tensor_vec8_kernel(static)");
  }
  quantize_per_tensor_kernel<<<grid_rows(m), kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), m, k, ldx,
                                                                    static_cast<uint8_t*>(q), nullptr, scale, nullptr);
  return launch_check("quantize_per_tensor_kernel(static)");
}

Status quantize_fp8_per_row(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, float* scales,
                            cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_args(x, m, k, ldx, q));
  if (!scales) return invalid_argument("fp8 per-row quantize: null scales");
  if (!vec8_ok(x, k, ldx, q))
    return invalid_argument(
        "fp8 per-row quantize needs x 16-byte aligned, K and ldx multiples of 8 and q 8-byte "
        "aligned; got K=" +
        std::to_string(k) + " ldx=" + std::to_string(ldx));
  quantize_per_row_vec8_kernel<<<grid_rows(m), kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), m, k / 8, ldx,
                                                                      static_cast<uint8_t*>(q), scales);
  return launch_check("quantize_per_row_vec8_kernel");
}

Status fp8_gate_scale_vector(const float* w_scale, const void* gate_bf16, int64_t n, float* out, cudaStream_t stream) {
  if (!w_scale || !gate_bf16 || !out || n <= 0)
    return invalid_argument("fp8_gate_scale_vector: null pointer or n <= 0");
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  gate_scale_vector_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      w_scale, static_cast<const uint16_t*>(gate_bf16), n, out);
  return launch_check("gate_scale_vector_kernel");
}

Status quantize_fp8_rowblock128(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, float* scales,
                                int64_t ld_scale, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_args(x, m, k, ldx, q));
  if (!scales || ld_scale < m) return invalid_argument("fp8 1x128 quantize: null scales or ld_scale < m");
  if (k % 4) return invalid_argument("fp8 1x128 quantize needs k % 4 == 0, got " + std::to_string(k));
  if (reinterpret_cast<uintptr_t>(q) % 4) return invalid_argument("fp8 1x128 quantize: q must be 4-byte aligned");
  const int64_t warps = (k + 127) / 128 * ld_scale;
  const int64_t blocks = (warps * 32 + kThreads - 1) / kThreads;
  quantize_rowblock128_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const uint16_t*>(x), m, k, ldx, static_cast<uint8_t*>(q), scales, ld_scale);
  return launch_check("quantize_rowblock128_kernel");
}

}  // namespace vortex
