// Row-kernel building blocks shared by rms_norm.cu, modulate.cu and rms_norm_modulate.cu.
// Fused fast path (rows of <= kMaxRegChunks * 256 bf16, 16-byte aligned): ONE WARP PER ROW, the row held in
// registers as 16-byte chunks (lane q holds chunks q, q + 32, ...), so it is read from HBM once with all
// loads in flight; the warp reproduces the 256 canonical lanes of src/core/reduce.h exactly (see
// warp_row_canonical_sum_squares). Fallback (wide or unaligned rows): one 256-thread block per row,
// row staged in shared memory. Tested through tests/cuda/ops_test.cpp (E0 vs the CPU reference).
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

// ---- Warp-per-row register path -------------------------------------------------------------------
constexpr int kRowWarpsPerBlock = 4;  // rows per 128-thread block
constexpr int kMaxRegChunks = 24;     // 16-byte chunks per lane: rows up to 24 * 256 = 6144 bf16

// Row in registers: lane q holds chunks c = q + 32 m (elements 8c .. 8c + 7), m < kChunks, c < nchunks.
template <int kChunks>
struct RegRow {
  uint4 chunk[kChunks];
};

// Loads (plain loads: x may alias the output of another row-disjoint op).
template <int kChunks>
__device__ __forceinline__ void load_reg_row(const uint16_t* src, int nchunks, int lane, RegRow<kChunks>& row) {
#pragma unroll
  for (int m = 0; m < kChunks; ++m) {
    const int c = lane + 32 * m;
    row.chunk[m] =
        c < nchunks ? *reinterpret_cast<const uint4*>(src + 8 * static_cast<int64_t>(c)) : make_uint4(0, 0, 0, 0);
  }
}

// Element 2k (low half) and 2k + 1 (high half) of a packed bf16 pair, as FP32 (exact).
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
// Two RNE roundings FP32 -> BF16 in one cvt.rn.bf16x2.f32 (the same F2FP rounding as f32_to_bf16):
// low half = R(a), high half = R(b).
__device__ __forceinline__ uint32_t f32x2_to_bf16x2(float a, float b) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&p);
}
__device__ __forceinline__ uint32_t word(const uint4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
__device__ __forceinline__ void set_word(uint4& v, int k, uint32_t w) {
  if (k == 0) v.x = w;
  else if (k == 1) v.y = w;
  else if (k == 2) v.z = w;
  else v.w = w;
}

// Canonical FP64 sum of squares of a register row (src/core/reduce.h), returned in every lane.
// Canonical lane t = 8 q + i owns elements j = t + 256 m = 8 (q + 32 m) + i: element i of chunk m of
// warp lane q, so acc[i] of lane q is lane t's partial sum in ascending j. Halving tree: w = 128..8 pair
// lane t with t + w = 8 (q + w / 8) + i (a shuffle from lane q + w / 8, same i); w = 4, 2, 1 pair i with
// i + w inside lane q = 0. fma(v, v, acc) == acc + v * v exactly: a bf16 square is exact in FP64.
template <int kChunks>
__device__ __forceinline__ double warp_row_canonical_sum_squares(const RegRow<kChunks>& row) {
  double acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.0;
#pragma unroll
  for (int m = 0; m < kChunks; ++m) {  // chunks past the row are zero: adding +0.0 to a sum >= +0 is exact
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t w = word(row.chunk[m], k);
      const double lo = static_cast<double>(bf16_lo(w)), hi = static_cast<double>(bf16_hi(w));
      acc[2 * k] = __fma_rn(lo, lo, acc[2 * k]);
      acc[2 * k + 1] = __fma_rn(hi, hi, acc[2 * k + 1]);
    }
  }
#pragma unroll
  for (int w = 16; w >= 1; w /= 2) {  // canonical w = 128, 64, 32, 16, 8
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = __dadd_rn(acc[i], __shfl_down_sync(0xFFFFFFFFu, acc[i], w));
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = __dadd_rn(acc[i], acc[i + 4]);  // w = 4
#pragma unroll
  for (int i = 0; i < 2; ++i) acc[i] = __dadd_rn(acc[i], acc[i + 2]);  // w = 2
  const double total = __dadd_rn(acc[0], acc[1]);                      // w = 1
  return __shfl_sync(0xFFFFFFFFu, total, 0);
}

// Smallest register-row instantiation that holds `cols` (a multiple of 8); 0 when the row is too wide.
inline int reg_row_chunks(int64_t cols) {
  const int64_t per_lane = (cols / 8 + 31) / 32;
  for (int k : {4, 8, 16, 21, kMaxRegChunks})
    if (per_lane <= k) return k;
  return 0;
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
  VORTEX_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
