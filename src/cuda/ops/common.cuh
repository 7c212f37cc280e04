// Device helpers shared by the E0 elementwise kernels: exact BF16 conversions, 16-byte vector access,
// the canonical FP64 sum of squares (src/core/reduce.h order) for a 256-thread block and for one warp,
// and the FP64 inverse RMS. Every rounding is explicit (__fmul_rn, __fadd_rn, __dadd_rn, ...), so nvcc
// cannot contract into FMAs. Included only by src/cuda/ops/*.cu; tested through tests/cuda/ops_test.cpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/reduce.h"

namespace vortex::cuda_ops {

constexpr int kRowThreads = kCanonicalLanes;  // 256: one block per row reproduces the canonical lanes
constexpr int kVec = 8;                       // bf16 elements per 16-byte access

__device__ __forceinline__ float bf16_to_f32(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
// cvt.rn.bf16.f32 (RNE, NaN -> 0x7FFF), the instruction include/vortex/dtype.h reproduces on the host.
__device__ __forceinline__ uint16_t f32_to_bf16(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
// R(x) of docs/numerics.md.
__device__ __forceinline__ float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// Native bf16x2 arithmetic: mul.rn / add.rn round the EXACT result once to BF16, subnormals kept. For BF16
// operands this equals R(fp32 op): the product of two BF16 values is exact in FP32 except in FP32's subnormal
// range (where both paths give the same BF16: the FP32 rounding step 2^-149 cannot create a BF16 tie), and a
// sum rounded to FP32 (24 bits >= 2 * 8 + 2) then to BF16 equals the sum rounded once (double rounding is
// innocuous at that margin; a host emulation agreed on 97.5M random BF16 pairs, subnormal and overflow ranges
// included). NaN results: the same bytes as the scalar path in the inf/NaN test cases on the H200
// (benchmarks/2026-11-29-h200-s8/cuda_ops_test.log). Used by rms_norm_modulate.cu and the NVFP4 modulated producer.
__device__ __forceinline__ uint32_t bf16x2_mul_rn(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t bf16x2_add_rn(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// One rounding FP64 -> BF16 (RNE): round-to-odd to FP32 first (24 >= 8 + 2 bits), then RNE to BF16.
__device__ __forceinline__ uint16_t f64_to_bf16(double d) {
  if (d != d) return 0x7FFF;
  float f = __double2float_rz(d);
  if (static_cast<double>(f) != d && !isinf(f)) f = __uint_as_float(__float_as_uint(f) | 1u);
  return f32_to_bf16(f);
}

// Canonical FP64 sum of squares over a 256-thread block; `vals(j)` yields element j as double.
// Lane t = threadIdx.x accumulates j = t, t+256, ... ascending; then the halving tree 128..1 (shared
// memory down to 32 lanes, then warp shuffles: the same pairs lane[t] += lane[t + w]).
// Returns the total in every thread. `lanes` is __shared__ double[256].
template <typename LoadFn>
__device__ __forceinline__ double block_canonical_sum_squares(int n, LoadFn vals, double* lanes) {
  const int t = threadIdx.x;
  double acc = 0.0;
  for (int j = t; j < n; j += kRowThreads) {
    const double v = vals(j);
    acc = __dadd_rn(acc, __dmul_rn(v, v));
  }
  lanes[t] = acc;
  __syncthreads();
  for (int w = kRowThreads / 2; w >= 32; w /= 2) {
    if (t < w) lanes[t] = __dadd_rn(lanes[t], lanes[t + w]);
    __syncthreads();
  }
  if (t < 32) {
    double v = lanes[t];
    for (int w = 16; w >= 1; w /= 2) v = __dadd_rn(v, __shfl_down_sync(0xFFFFFFFFu, v, w));
    if (t == 0) lanes[0] = v;
  }
  __syncthreads();
  const double total = lanes[0];
  __syncthreads();  // lanes may be reused by the caller
  return total;
}

// Same order for one warp emulating the 256 lanes: lane l = lane_id + 32 * i lives in register i.
template <typename LoadFn>
__device__ __forceinline__ double warp_canonical_sum_squares(int n, LoadFn vals) {
  const int lane_id = threadIdx.x & 31;
  double lane[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    double acc = 0.0;
    for (int j = lane_id + 32 * i; j < n; j += kRowThreads) {
      const double v = vals(j);
      acc = __dadd_rn(acc, __dmul_rn(v, v));
    }
    lane[i] = acc;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) lane[i] = __dadd_rn(lane[i], lane[i + 4]);  // w = 128
#pragma unroll
  for (int i = 0; i < 2; ++i) lane[i] = __dadd_rn(lane[i], lane[i + 2]);  // w = 64
  double v = __dadd_rn(lane[0], lane[1]);                                 // w = 32
  for (int w = 16; w >= 1; w /= 2) v = __dadd_rn(v, __shfl_down_sync(0xFFFFFFFFu, v, w));
  return __shfl_sync(0xFFFFFFFFu, v, 0);
}

// r = fp32(1 / sqrt(sum / n + eps)) evaluated in FP64 (IEEE-rounded div/sqrt), one rounding to FP32.
__device__ __forceinline__ float inverse_rms(double sum_squares, int n, float eps) {
  const double ms = __ddiv_rn(sum_squares, static_cast<double>(n));
  return __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(ms, static_cast<double>(eps)))));
}

// n = R(fp32(fp32(x * r) * w)).
__device__ __forceinline__ float norm_value(float x, float r, float w) {
  return round_bf16(__fmul_rn(__fmul_rn(x, r), w));
}

// R(R(n * R(1 + scale)) + shift): the modulation contract (x * (scale + 1)) + shift.
__device__ __forceinline__ float modulate_value(float n, float scale, float shift) {
  const float t = round_bf16(__fadd_rn(1.0f, scale));
  return round_bf16(__fadd_rn(round_bf16(__fmul_rn(n, t)), shift));
}

// Element access to a bf16 row in either 16-byte vectors (kV = 8) or scalars (kV = 1).
template <int kV>
struct Chunk {
  uint16_t v[kV];
};
template <int kV>
__device__ __forceinline__ Chunk<kV> load_chunk(const uint16_t* p) {
  Chunk<kV> c;
  if constexpr (kV == 8) {
    *reinterpret_cast<uint4*>(c.v) = *reinterpret_cast<const uint4*>(p);
  } else {
#pragma unroll
    for (int i = 0; i < kV; ++i) c.v[i] = p[i];
  }
  return c;
}
template <int kV>
__device__ __forceinline__ void store_chunk(uint16_t* p, const Chunk<kV>& c) {
  if constexpr (kV == 8) {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(c.v);
  } else {
#pragma unroll
    for (int i = 0; i < kV; ++i) p[i] = c.v[i];
  }
}

}  // namespace vortex::cuda_ops
