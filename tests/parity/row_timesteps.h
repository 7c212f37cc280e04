// The per-row timesteps of a packed layout as diffusers' MiniMaxH3SetTimestepsStep.build_row_timesteps reduces them
// (torch.unique(sorted=True, return_inverse=True)): the distinct values' float32 bits as 8 hex digits, and SHA-256
// of the int64 index of every row into them. Used by the fl2va and ref2va packing parity tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/segments.h"
#include "engine/run_manifest.h"  // sha256_hex

namespace vortex::parity {

struct RowTimestepSignature {
  std::vector<std::string> values_f32_bits;
  std::string inverse_sha256;
};

// slot_t[s]: the timestep of table slot s (segment table_row = slot, as final_segments assigns them).
inline RowTimestepSignature row_timestep_signature(const SegmentTable& seg, const std::vector<float>& slot_t) {
  std::vector<float> row_t(static_cast<size_t>(seg.rows), -1.0f);
  for (const auto& s : seg.segments)
    for (int64_t r = s.start; r < s.stop; ++r) row_t[static_cast<size_t>(r)] = slot_t[static_cast<size_t>(s.table_row)];
  std::vector<float> values(row_t);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  RowTimestepSignature sig;
  for (float v : values) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%08x", u);
    sig.values_f32_bits.push_back(hex);
  }
  std::vector<int64_t> inverse;
  for (float t : row_t) inverse.push_back(std::lower_bound(values.begin(), values.end(), t) - values.begin());
  sig.inverse_sha256 = sha256_hex(inverse.data(), inverse.size() * sizeof(int64_t));
  return sig;
}

}  // namespace vortex::parity
