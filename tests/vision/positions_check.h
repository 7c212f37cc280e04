// The presentation tests' check of M-RoPE positions [3, L] i32 against a fixture case: SHA-256 of the positions as
// int64 (as transformers' get_rope_index returns them), and every value when the case holds them in full.
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/run_manifest.h"  // sha256_hex
#include "vortex/tensor.h"

namespace vortex {

inline void expect_positions_equal(const Tensor& positions, const nlohmann::json& c) {
  const int64_t n = positions.dim(1);
  std::vector<int64_t> pos64(static_cast<size_t>(3 * n));
  for (int64_t i = 0; i < 3 * n; ++i) pos64[static_cast<size_t>(i)] = positions.data<int32_t>()[i];
  EXPECT_EQ(sha256_hex(pos64.data(), pos64.size() * 8), c["positions_sha256"].get<std::string>());
  if (!c.contains("positions")) return;
  for (int a = 0; a < 3; ++a)
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(pos64[static_cast<size_t>(a * n + i)], c["positions"][a][i].get<int64_t>())
          << "axis " << a << " row " << i;
    }
}

}  // namespace vortex
