// Where the diffusers parity fixtures live (tests/parity/fixtures, made by make_diffusers_fixtures.py):
// the source tree's copy, or $VORTEX_PARITY_FIXTURES when the test binaries run on another machine.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

}  // namespace vortex::parity
