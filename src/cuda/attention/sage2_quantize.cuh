// The Sage2 Q/K INT8 rule on the device (src/ref/sage2_attention.h): group scale amax/127 + 1e-7 and
// round-half-away quantization, each FP32 step correctly rounded as in the CPU reference
// (src/ref/sage2_attention.cpp). Shared by the pre-pass (sage2_quantize.cu) and the fused Q producer
// (src/cuda/ops/qk_norm_rope_sage2.cu), so both write the same bytes; E0 tests in
// tests/attention/sage2_sm90_test.cpp and tests/attention/qk_norm_rope_sage2_test.cpp.
#pragma once

#include <cstdint>

namespace vortex {

__device__ __forceinline__ float sage2_int8_scale(float amax) { return __fadd_rn(__fdiv_rn(amax, 127.0f), 1e-7f); }

__device__ __forceinline__ int8_t sage2_int8(float x, float scale) {
  float y = __fdiv_rn(x, scale);
  y = __fadd_rn(y, y >= 0.0f ? 0.5f : -0.5f);
  return static_cast<int8_t>(__float2int_rz(y));
}

}  // namespace vortex
