// Host reference for the FP8 E4M3 quantizers (per tensor, 1x128 activations, 128x128 weights) and
// for GEMM checking (FP64 and same-program FP32 dot products). The GPU quantizers in fp8_quantize.cu
// must reproduce these bytes and scales exactly (E0); the conversions are dtype.h's exact ones.
// Tested in tests/gemm/gemm_test.cpp (Fp8Quantize) (GPU vs this) and tests/gemm/fp8_reference_test.cpp.
#pragma once

#include <cstdint>

namespace vortex {

constexpr float kE4M3Max = 448.0f;

// max |x| over bf16 values, taken as max of (bits & 0x7FFF) so NaN propagates (it sorts above inf)
// and any order gives the same answer.
uint16_t bf16_abs_max_bits(const uint16_t* x, int64_t m, int64_t k, int64_t ldx);
// scale = amax / 448 (IEEE RN division); amax == 0 -> 1 (an all-zero tensor quantizes to zeros).
float fp8_scale_from_amax(float amax);
// q = e4m3_rn_satfinite(x / scale) (IEEE RN division).
uint8_t fp8_quantize_value(float x, float scale);

// Per tensor: returns the scale; q is [m, k] (row stride k).
float quantize_fp8_per_tensor_ref(const uint16_t* x, int64_t m, int64_t k, int64_t ldx, uint8_t* q);
// Given a scale (static input_scale path).
void quantize_fp8_with_scale_ref(const uint16_t* x, int64_t m, int64_t k, int64_t ldx, float scale, uint8_t* q);
// Per row (per token): scales[r] = amax(row r) / 448 (0 -> 1), q[r, c] = e4m3(x[r, c] / scales[r]).
void quantize_fp8_per_row_ref(const uint16_t* x, int64_t m, int64_t k, int64_t ldx, uint8_t* q, float* scales);
// 1x128: scales [ceil(k/128), ld_scale] (token-contiguous per channel group); rows in [m, ld_scale)
// of q are zero with scale 1.
void quantize_fp8_rowblock128_ref(const uint16_t* x, int64_t m, int64_t k, int64_t ldx, uint8_t* q, float* scales,
                                  int64_t ld_scale);
// 128x128 (weights [n, k] bf16): scales [ceil(n/128), roundup(ceil(k/128), 4)], padding = 1.
void quantize_fp8_block128x128_ref(const uint16_t* w, int64_t n, int64_t k, uint8_t* q, float* scales);
// Columns of the 128x128 weight scale array: roundup(ceil(k/128), 4) (cuBLASLt BLK128x128 layout).
inline int64_t fp8_block_scale_cols(int64_t k) { return ((k + 127) / 128 + 3) / 4 * 4; }

}  // namespace vortex
