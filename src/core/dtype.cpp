// DType names/sizes and the exact host conversions declared in include/vortex/dtype.h.
// All narrowing conversions share one integer rounding routine (value = M * 2^E, RNE by an exact
// shift), so FP32 denormals and FP64 inputs need no special paths and no FP rounding mode matters.
// Tested exhaustively in tests/core/dtype_test.cpp against grid-enumeration references, and
// byte-for-byte against ml_dtypes by tests/core/dtype_oracle.py.
#include "vortex/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace vortex {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
      return 2;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kF8E8M0:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

namespace {
struct DTypeNames {
  DType dtype;
  const char* safetensors;
  const char* short_name;
};
constexpr DTypeNames kNames[] = {
    {DType::kF64, "F64", "f64"},
    {DType::kF32, "F32", "f32"},
    {DType::kF16, "F16", "f16"},
    {DType::kBF16, "BF16", "bf16"},
    {DType::kF8E4M3, "F8_E4M3", "f8e4m3"},
    {DType::kF8E5M2, "F8_E5M2", "f8e5m2"},
    {DType::kF8E8M0, "F8_E8M0", "f8e8m0"},
    {DType::kI64, "I64", "i64"},
    {DType::kI32, "I32", "i32"},
    {DType::kI16, "I16", "i16"},
    {DType::kI8, "I8", "i8"},
    {DType::kU8, "U8", "u8"},
    {DType::kBool, "BOOL", "bool"},
};
}  // namespace

const char* dtype_name(DType dtype) {
  for (const auto& n : kNames)
    if (n.dtype == dtype) return n.safetensors;
  return "?";
}

const char* dtype_short_name(DType dtype) {
  for (const auto& n : kNames)
    if (n.dtype == dtype) return n.short_name;
  return "?";
}

Result<DType> dtype_from_name(std::string_view name) {
  for (const auto& n : kNames)
    if (name == n.safetensors) return n.dtype;
  return format_error("unknown dtype name '" + std::string(name) + "'");
}

uint16_t bf16_bits_from_f32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;  // NaN -> canonical
  uint32_t rounding_bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

namespace {

// An exact non-zero magnitude M * 2^exp2 (M > 0).
struct ExactMagnitude {
  uint64_t mantissa;
  int exp2;
};

ExactMagnitude magnitude_of_f32_bits(uint32_t abs_bits) {
  uint32_t exponent_field = abs_bits >> 23;
  uint32_t fraction = abs_bits & 0x7FFFFFu;
  if (exponent_field == 0) return {fraction, -149};  // FP32 denormal: fraction * 2^-149
  return {fraction | 0x800000u, static_cast<int>(exponent_field) - 150};
}

ExactMagnitude magnitude_of_f64_bits(uint64_t abs_bits) {
  uint64_t exponent_field = abs_bits >> 52;
  uint64_t fraction = abs_bits & 0xFFFFFFFFFFFFFull;
  if (exponent_field == 0) return {fraction, -1074};
  return {fraction | (1ull << 52), static_cast<int>(exponent_field) - 1075};
}

// round-half-to-even of m / 2^shift (shift >= 0), exact.
uint64_t shift_right_rne(uint64_t m, int shift) {
  if (shift == 0) return m;
  if (shift > 64) return 0;                          // m < 2^64 <= half of 2^shift: rounds to 0
  if (shift == 64) return m > (1ull << 63) ? 1 : 0;  // tie (m == 2^63) goes to even 0
  uint64_t quotient = m >> shift;
  uint64_t remainder = m & ((1ull << shift) - 1);
  uint64_t half = 1ull << (shift - 1);
  if (remainder > half || (remainder == half && (quotient & 1))) ++quotient;
  return quotient;
}

// The unsigned code of the binary format (mantissa_bits stored fraction bits, minimum normal
// exponent min_normal_exp, subnormals below it) nearest to `mag`, ties to even. Codes are
// contiguous in value, so a mantissa carry simply increments the code. The caller guarantees the
// rounded result fits (saturation / overflow are decided before calling).
uint32_t round_to_code(ExactMagnitude mag, int mantissa_bits, int min_normal_exp) {
  int msb = 63 - std::countl_zero(mag.mantissa);
  int exponent = mag.exp2 + msb;  // floor(log2(value))
  int binade = exponent > min_normal_exp ? exponent : min_normal_exp;
  int quantum_exp = binade - mantissa_bits;  // value of one unit in the last place
  int shift = quantum_exp - mag.exp2;
  uint64_t units = shift >= 0 ? shift_right_rne(mag.mantissa, shift) : mag.mantissa << (-shift);
  // Normal binade: units in [2^mb, 2^(mb+1)]; subnormal: units in [0, 2^mb]. One formula for both.
  return (static_cast<uint32_t>(binade - min_normal_exp) << mantissa_bits) + static_cast<uint32_t>(units);
}

struct MiniFloat {
  int mantissa_bits;
  int min_normal_exp;
  float max_finite;
  uint32_t max_code;  // magnitude code of max_finite
  uint32_t sign_bit;  // sign position in the code
  uint32_t nan_code;  // returned for NaN input
};

constexpr MiniFloat kE4M3{3, -6, 448.0f, 0x7E, 0x80, 0x7F};
constexpr MiniFloat kE5M2{2, -14, 57344.0f, 0x7B, 0x80, 0x7F};
constexpr MiniFloat kE2M1{1, 0, 6.0f, 0x7, 0x8, 0x7};

// cvt.rn.satfinite semantics: NaN -> nan_code; |x| > max (incl. inf) -> signed max; else RNE with
// the sign kept (also on zero results).
uint8_t minifloat_from_f32(float x, const MiniFloat& f) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  uint32_t sign = (u >> 31) ? f.sign_bit : 0u;
  uint32_t abs_bits = u & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return static_cast<uint8_t>(f.nan_code);
  if (std::fabs(x) > f.max_finite) return static_cast<uint8_t>(sign | f.max_code);
  if (abs_bits == 0) return static_cast<uint8_t>(sign);
  return static_cast<uint8_t>(sign | round_to_code(magnitude_of_f32_bits(abs_bits), f.mantissa_bits, f.min_normal_exp));
}

float quiet_nan_with_sign(bool negative) { return std::bit_cast<float>(negative ? 0xFFC00000u : 0x7FC00000u); }

}  // namespace

uint16_t bf16_bits_from_f64(double x) {
  uint64_t u = std::bit_cast<uint64_t>(x);
  uint16_t sign = (u >> 63) ? 0x8000 : 0;
  uint64_t abs_bits = u & 0x7FFFFFFFFFFFFFFFull;
  if (abs_bits > 0x7FF0000000000000ull) return 0x7FFF;
  if (abs_bits == 0) return sign;
  // BF16 max finite is (2 - 2^-7) * 2^127; anything rounding beyond it (>= max + half ulp, i.e.
  // >= (2 - 2^-8) * 2^127) becomes inf. round_to_code carries into the inf code 0x7F80 by itself,
  // so only inputs whose binade is above BF16's (>= 2^128, including inf) need a separate case.
  if (abs_bits >= 0x47F0000000000000ull) return static_cast<uint16_t>(sign | 0x7F80);  // >= 2^128
  return static_cast<uint16_t>(sign | round_to_code(magnitude_of_f64_bits(abs_bits), 7, -126));
}

uint8_t e4m3_from_f32(float x) { return minifloat_from_f32(x, kE4M3); }
uint8_t e5m2_from_f32(float x) { return minifloat_from_f32(x, kE5M2); }

uint8_t e2m1_from_f32(float x) { return minifloat_from_f32(x, kE2M1); }

float f32_from_e4m3(uint8_t b) {
  bool negative = b & 0x80;
  uint32_t exponent_field = (b >> 3) & 0xF;
  uint32_t mantissa = b & 0x7;
  if ((b & 0x7F) == 0x7F) return quiet_nan_with_sign(negative);
  float magnitude = exponent_field == 0
                        ? std::ldexp(static_cast<float>(mantissa), -9)
                        : std::ldexp(static_cast<float>(8 + mantissa), static_cast<int>(exponent_field) - 10);
  return negative ? -magnitude : magnitude;
}

float f32_from_e5m2(uint8_t b) {
  bool negative = b & 0x80;
  uint32_t exponent_field = (b >> 2) & 0x1F;
  uint32_t mantissa = b & 0x3;
  if (exponent_field == 0x1F) {
    if (mantissa != 0) return quiet_nan_with_sign(negative);
    return negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  float magnitude = exponent_field == 0
                        ? std::ldexp(static_cast<float>(mantissa), -16)
                        : std::ldexp(static_cast<float>(4 + mantissa), static_cast<int>(exponent_field) - 17);
  return negative ? -magnitude : magnitude;
}

float f32_from_e2m1(uint8_t nibble) {
  bool negative = nibble & 0x8;
  uint32_t exponent_field = (nibble >> 1) & 0x3;
  uint32_t mantissa = nibble & 0x1;
  float magnitude = exponent_field == 0
                        ? 0.5f * static_cast<float>(mantissa)
                        : std::ldexp(static_cast<float>(2 + mantissa), static_cast<int>(exponent_field) - 2);
  return negative ? -magnitude : magnitude;
}

// cvt.rp.satfinite.ue8m0x2.f32: the smallest power of two >= x, as 2^(code - 127), code in [0, 254].
// NaN -> 0xFF. Below 2^-127 (including 0, denormals and negatives: rounding up in an unsigned
// format whose smallest value is 2^-127) -> 0. Above 2^127 (and +inf) -> 254 (satfinite).
uint8_t ue8m0_from_f32(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFF;
  if (!(x > 0.0f)) return 0;
  if (u >= 0x7F000001u) return 254;  // > 2^127, including +inf
  uint32_t exponent_field = u >> 23;
  uint32_t fraction = u & 0x7FFFFFu;
  if (exponent_field == 0) return fraction <= 0x400000u ? 0 : 1;  // denormal: <= 2^-127 -> 0, else 2^-126
  return static_cast<uint8_t>(exponent_field + (fraction != 0 ? 1 : 0));
}

float f32_from_ue8m0(uint8_t b) {
  if (b == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  if (b == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127, an FP32 denormal
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 23);
}

}  // namespace vortex
