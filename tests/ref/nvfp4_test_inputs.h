// Adversarial BF16 inputs for the NVFP4 quantizer tests (CPU and GPU): per 16-block a random kind —
// gaussian, E2M1 rounding midpoints (v = x * e lands on 0.25, 0.75, ... when the scale is exact), all-zero,
// negative zeros, tiny blocks whose E4M3 scale rounds to 0, BF16 subnormals, all-equal, huge dynamic range,
// and (only when asked) +-inf / NaN. Header-only; used by tests/ref/nvfp4_quantize_test.cpp,
// tests/ref/nvfp4_dump.cpp and tests/cuda/nvfp4_quantize_test.cu.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "vortex/dtype.h"

namespace vortex::test {

// x [rows, ld] bf16 bits (columns >= cols are filled with a 0x7FC0 NaN pattern that must never be read).
inline std::vector<uint16_t> nvfp4_adversarial_bf16(int64_t rows, int64_t cols, int64_t ld, std::mt19937_64& rng,
                                                    bool with_inf_nan) {
  std::vector<uint16_t> x(static_cast<size_t>(rows * ld), 0x7FC0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> kind_dist(0, with_inf_nan ? 10 : 9);
  std::uniform_int_distribution<int> exp_dist(-30, 30);
  const float midpoints[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.5f, 1.0f, 3.0f, 4.0f};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int kind = kind_dist(rng);
      const float block_scale = std::ldexp(1.0f, exp_dist(rng));
      for (int64_t c = c0; c < c0 + 16 && c < cols; ++c) {
        float v = 0.0f;
        switch (kind) {
          case 0:
          case 1:
          case 2:
            v = static_cast<float>(normal(rng)) * block_scale;
            break;
          case 3:  // ties: amax = 6 * 2^k, so a power-of-two g gives an exact scale and v = x * 2^-k exactly
            v = (c == c0 ? 6.0f : midpoints[rng() % 12]) * (rng() % 2 ? -1.0f : 1.0f) * block_scale;
            break;
          case 4:
            v = 0.0f;
            break;
          case 5:
            v = rng() % 2 ? -0.0f : static_cast<float>(normal(rng)) * 1e-3f;
            break;  // negative zeros
          case 6:
            v = static_cast<float>(normal(rng)) * 1e-30f;
            break;  // scale rounds to 0
          case 7: {
            const uint16_t sub = static_cast<uint16_t>((rng() % 127 + 1) | (rng() % 2 ? 0x8000 : 0));  // subnormals
            x[static_cast<size_t>(r * ld + c)] = sub;
            continue;
          }
          case 8:
            v = 1.5f * block_scale;
            break;  // all equal
          case 9:
            v = static_cast<float>(normal(rng)) * std::ldexp(1.0f, exp_dist(rng) * 2);
            break;    // huge range
          default: {  // inf / NaN sprinkled into a gaussian block
            const int pick = static_cast<int>(rng() % 8);
            v = pick == 0 ? INFINITY : pick == 1 ? -INFINITY : pick == 2 ? NAN : static_cast<float>(normal(rng));
          }
        }
        x[static_cast<size_t>(r * ld + c)] = bf16_bits_from_f32(v);
      }
    }
  return x;
}

}  // namespace vortex::test
