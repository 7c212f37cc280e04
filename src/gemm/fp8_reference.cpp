// Host FP8 quantizer reference (see fp8_reference.h). Plain loops in one obvious order; every rounding
// is a dtype.h conversion or an IEEE division, so GPU kernels can match the bytes exactly.
// Tested in tests/gemm/fp8_reference_test.cpp and (GPU vs this) tests/gemm/gemm_test.cpp (Fp8Quantize).
#include "gemm/fp8_reference.h"

#include <algorithm>

#include "vortex/dtype.h"

namespace vortex {

uint16_t bf16_abs_max_bits(const uint16_t* x, int64_t m, int64_t k, int64_t ldx) {
  uint16_t best = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) best = std::max<uint16_t>(best, x[r * ldx + c] & 0x7FFF);
  return best;
}

float fp8_scale_from_amax(float amax) { return amax == 0.0f ? 1.0f : amax / kE4M3Max; }

uint8_t fp8_quantize_value(float x, float scale) { return e4m3_from_f32(x / scale); }

void quantize_fp8_with_scale_ref(const uint16_t* x, int64_t m, int64_t k, int64_t ldx, float scale, uint8_t* q) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) q[r * k + c] = fp8_quantize_value(f32_from_bf16_bits(x[r * ldx + c]), scale);
}

float quantize_fp8_per_tensor_ref(const uint16_t* x, int64_t m, int64_t k, int64_t ldx, uint8_t* q) {
  const float scale = fp8_scale_from_amax(f32_from_bf16_bits(bf16_abs_max_bits(x, m, k, ldx)));
  quantize_fp8_with_scale_ref(x, m, k, ldx, scale, q);
  return scale;
}

void quantize_fp8_per_row_ref(const uint16_t* x, int64_t m, int64_t k, int64_t ldx, uint8_t* q, float* scales) {
  for (int64_t r = 0; r < m; ++r) scales[r] = quantize_fp8_per_tensor_ref(x + r * ldx, 1, k, ldx, q + r * k);
}

void quantize_fp8_rowblock128_ref(const uint16_t* x, int64_t m, int64_t k, int64_t ldx, uint8_t* q, float* scales,
                                  int64_t ld_scale) {
  const int64_t groups = (k + 127) / 128;
  for (int64_t r = 0; r < ld_scale; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * 128, c1 = std::min(k, c0 + 128);
      if (r >= m) {
        for (int64_t c = c0; c < c1; ++c) q[r * k + c] = 0;
        scales[g * ld_scale + r] = 1.0f;
        continue;
      }
      const float s = fp8_scale_from_amax(f32_from_bf16_bits(bf16_abs_max_bits(x + r * ldx + c0, 1, c1 - c0, ldx)));
      for (int64_t c = c0; c < c1; ++c) q[r * k + c] = fp8_quantize_value(f32_from_bf16_bits(x[r * ldx + c]), s);
      scales[g * ld_scale + r] = s;
    }
  }
}

void quantize_fp8_block128x128_ref(const uint16_t* w, int64_t n, int64_t k, uint8_t* q, float* scales) {
  const int64_t kb = (k + 127) / 128, nb = (n + 127) / 128, cols = fp8_block_scale_cols(k);
  for (int64_t bn = 0; bn < nb; ++bn) {
    for (int64_t bk = 0; bk < cols; ++bk) {
      if (bk >= kb) {
        scales[bn * cols + bk] = 1.0f;
        continue;
      }
      const int64_t r0 = bn * 128, r1 = std::min(n, r0 + 128), c0 = bk * 128, c1 = std::min(k, c0 + 128);
      const float s = fp8_scale_from_amax(f32_from_bf16_bits(bf16_abs_max_bits(w + r0 * k + c0, r1 - r0, c1 - c0, k)));
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) q[r * k + c] = fp8_quantize_value(f32_from_bf16_bits(w[r * k + c]), s);
      scales[bn * cols + bk] = s;
    }
  }
}

}  // namespace vortex
