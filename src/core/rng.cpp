// Host Gaussian noise (see rng.h for the algorithm, which is the noise contract).
// Works block by block (4 normals per Philox call) and splits the index range over threads on
// block boundaries; each value depends only on its index. Tested in tests/core/rng_test.cpp.
#include "core/rng.h"

#include <cmath>
#include <numbers>
#include <string>

#include "core/parallel.h"
#include "core/philox.h"
#include "core/strided.h"

namespace vortex {
namespace {

constexpr double kTwoPow32Inv = 1.0 / 4294967296.0;

// The four normals of Philox block `block`.
void gaussian_block(uint64_t seed, uint64_t block, float out[4]) {
  Philox4x32 r = philox_block(seed, block);
  for (int pair = 0; pair < 2; ++pair) {
    double u1 = (static_cast<double>(r.v[2 * pair]) + 1.0) * kTwoPow32Inv;  // (0, 1]
    double u2 = static_cast<double>(r.v[2 * pair + 1]) * kTwoPow32Inv;      // [0, 1)
    double radius = std::sqrt(-2.0 * std::log(u1));
    double angle = 2.0 * std::numbers::pi * u2;
    out[2 * pair] = static_cast<float>(radius * std::cos(angle));
    out[2 * pair + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

// out[k] = value of index first + k, k in [0, count).
void gaussian_range(uint64_t seed, uint64_t first, float* out, size_t count) {
  size_t k = 0;
  while (k < count) {
    uint64_t index = first + k;
    float block_values[4];
    gaussian_block(seed, index / 4, block_values);
    for (uint64_t lane = index % 4; lane < 4 && k < count; ++lane, ++k) out[k] = block_values[lane];
  }
}

}  // namespace

float gaussian_noise_value(uint64_t seed, uint64_t index) {
  float block_values[4];
  gaussian_block(seed, index / 4, block_values);
  return block_values[index % 4];
}

void gaussian_noise(uint64_t seed, uint64_t offset, float* out, size_t n, int num_threads) {
  parallel_for_ranges(n, num_threads, 4, [&](size_t begin, size_t end) {
    gaussian_range(seed, offset + begin, out + begin, end - begin);
  });
}

Status gaussian_noise(uint64_t seed, uint64_t offset, Tensor& out, int num_threads) {
  if (!out.defined()) return invalid_argument("gaussian_noise: output tensor is undefined");
  if (out.device() != Device::kCpu)
    return invalid_argument("gaussian_noise: output " + out.describe() +
                            " is not a host tensor; generate on the host and upload it");
  if (out.dtype() != DType::kF32)
    return unsupported("gaussian_noise: output " + out.describe() + " must be f32 (noise is FP32)");
  size_t n = static_cast<size_t>(out.numel());
  if (out.is_contiguous()) {
    gaussian_noise(seed, offset, out.data<float>(), n, num_threads);
    return Status::Ok();
  }
  float* base = out.data<float>();
  parallel_for_ranges(n, num_threads, 4, [&](size_t begin, size_t end) {
    for_each_strided_offset(out.shape(), out.strides(), begin, end, [&](size_t i, int64_t element_offset) {
      base[element_offset] = gaussian_noise_value(seed, offset + i);
    });
  });
  return Status::Ok();
}

}  // namespace vortex
