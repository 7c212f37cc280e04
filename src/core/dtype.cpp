// DType names/sizes and the exact host conversions declared in include/vortex/dtype.h.
#include "vortex/dtype.h"

#include <cstring>
#include <string>

namespace vortex {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: case DType::kI16: return 2;
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kF8E8M0: case DType::kI8: case DType::kU8:
    case DType::kBool: return 1;
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
    {DType::kF64, "F64", "f64"},         {DType::kF32, "F32", "f32"},
    {DType::kF16, "F16", "f16"},         {DType::kBF16, "BF16", "bf16"},
    {DType::kF8E4M3, "F8_E4M3", "f8e4m3"}, {DType::kF8E5M2, "F8_E5M2", "f8e5m2"},
    {DType::kF8E8M0, "F8_E8M0", "f8e8m0"}, {DType::kI64, "I64", "i64"},
    {DType::kI32, "I32", "i32"},         {DType::kI16, "I16", "i16"},
    {DType::kI8, "I8", "i8"},            {DType::kU8, "U8", "u8"},
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

}  // namespace vortex
