// Where the diffusers parity fixtures live (tests/parity/fixtures, made by make_diffusers_fixtures.py):
// the source tree's copy, or $VORTEX_PARITY_FIXTURES when the test binaries run on another machine; and the
// comparisons the model parity tests share (values, rel_l2).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vortex/dtype.h"
#include "vortex/tensor.h"

#ifndef VORTEX_PARITY_FIXTURES
#error "VORTEX_PARITY_FIXTURES must name tests/parity/fixtures"
#endif

namespace vortex::parity {

inline std::string fixtures_dir() {
  const char* env = std::getenv("VORTEX_PARITY_FIXTURES");
  return env && *env ? env : VORTEX_PARITY_FIXTURES;
}

inline nlohmann::json read_json(const std::string& name) {
  std::ifstream in(fixtures_dir() + "/" + name, std::ios::binary);
  if (!in) return nlohmann::json();
  return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}), nullptr, false);
}

// "3f800000..." -> float32 bit patterns, 8 hex digits each.
inline std::vector<uint32_t> hex_words(const std::string& hex) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i + 8 <= hex.size(); i += 8)
    out.push_back(static_cast<uint32_t>(std::stoul(hex.substr(i, 8), nullptr, 16)));
  return out;
}

// A host F32 or BF16 tensor's values as floats.
inline std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kF32) {
    std::memcpy(v.data(), t.raw_data(), v.size() * 4);
  } else {
    for (size_t i = 0; i < v.size(); ++i) v[i] = f32_from_bf16_bits(t.data<uint16_t>()[i]);
  }
  return v;
}

// ||got - want|| / ||want||, accumulated in double.
inline double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace vortex::parity
