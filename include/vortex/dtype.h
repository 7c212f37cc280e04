// Element types and exact host conversions.
// Every conversion here reproduces the CUDA conversion instruction named beside it bit for bit, so the
// CPU reference and GPU kernels produce identical bytes (docs/numerics.md, level E0). Exhaustively tested in
// tests/core/dtype_test.cpp, cross-checked against ml_dtypes (tests/core/dtype_oracle.py) and against
// the cvt instructions on a GPU (tests/core/dtype_cuda_test.cu, all 2^32 FP32 inputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vortex/status.h"

namespace vortex {

// Storage dtypes. Names in comments are the safetensors dtype strings.
enum class DType : uint8_t {
  kF64,     // "F64"
  kF32,     // "F32"
  kF16,     // "F16"
  kBF16,    // "BF16"
  kF8E4M3,  // "F8_E4M3"  (E4M3FN: no inf, NaN = 0x7F/0xFF, max 448)
  kF8E5M2,  // "F8_E5M2"
  kF8E8M0,  // "F8_E8M0"  (UE8M0 scale: 2^(e-127), 0xFF = NaN)
  kI64,     // "I64"
  kI32,     // "I32"
  kI16,     // "I16"
  kI8,      // "I8"
  kU8,      // "U8"  (also packed E2M1 pairs and raw scale bytes)
  kBool,    // "BOOL"
};

size_t dtype_size(DType dtype);
// The safetensors name ("BF16", "F8_E4M3", ...).
const char* dtype_name(DType dtype);
// Short lower-case name for messages and shape strings ("bf16", "f8e4m3", ...).
const char* dtype_short_name(DType dtype);
Result<DType> dtype_from_name(std::string_view safetensors_name);

// A BF16 value as stored: the top 16 bits of an IEEE binary32.
struct bf16 {
  uint16_t bits;
};

// ---- BF16 -------------------------------------------------------------------------------------
// cvt.rn.bf16.f32: round to nearest even; NaN -> canonical 0x7FFF (sign dropped), inf kept.
uint16_t bf16_bits_from_f32(float x);
inline float f32_from_bf16_bits(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
inline bf16 to_bf16(float x) { return bf16{bf16_bits_from_f32(x)}; }
inline float to_f32(bf16 x) { return f32_from_bf16_bits(x.bits); }
// R(x) of docs/numerics.md: round an FP32 value to BF16 and back.
inline float round_bf16(float x) { return f32_from_bf16_bits(bf16_bits_from_f32(x)); }
// Round an FP64 value to BF16 once (no intermediate FP32 rounding): used where docs/numerics.md says
// "evaluated in FP64 and rounded once".
uint16_t bf16_bits_from_f64(double x);

// ---- FP8 --------------------------------------------------------------------------------------
// cvt.rn.satfinite.e4m3x2.f32: RNE, finite values beyond 448 saturate to +-448, +-inf -> +-448,
// NaN -> 0x7F (sign dropped).
uint8_t e4m3_from_f32(float x);
float f32_from_e4m3(uint8_t b);
// cvt.rn.satfinite.e5m2x2.f32: RNE, saturate to +-57344, +-inf -> +-57344, NaN -> 0x7F.
uint8_t e5m2_from_f32(float x);
float f32_from_e5m2(uint8_t b);

// ---- E2M1 (FP4) -------------------------------------------------------------------------------
// cvt.rn.satfinite.e2m1x2.f32 semantics: RNE on the grid {0, .5, 1, 1.5, 2, 3, 4, 6}, |x| > 6
// saturates to 6, sign kept on zero (-0.0 and tiny negatives -> 0x8). NaN -> 0x7 (+6, the PTX
// satfinite result). Returns a 4-bit code in the low nibble.
uint8_t e2m1_from_f32(float x);
float f32_from_e2m1(uint8_t nibble);

// ---- UE8M0 (power-of-two scale) ---------------------------------------------------------------
// Value 2^(b-127); b = 0xFF is NaN. ue8m0_from_f32 rounds up to the next power of two
// (cvt.rp.satfinite.ue8m0x2.f32), the MX convention for scales.
uint8_t ue8m0_from_f32(float x);
float f32_from_ue8m0(uint8_t b);

// ---- UE4M3 (NVFP4 block scale) ----------------------------------------------------------------
// An E4M3 code used as an unsigned scale: same conversion as e4m3_from_f32 on a non-negative input.
inline uint8_t ue4m3_from_f32(float x) { return e4m3_from_f32(x); }
inline float f32_from_ue4m3(uint8_t b) { return f32_from_e4m3(b); }

}  // namespace vortex
