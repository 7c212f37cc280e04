// Deterministic Gaussian noise: the noise contract of Vortex. Same (seed, offset, n) -> the same
// FP32 values on every backend, host and thread count, because noise is always generated here on
// the host from the counter-based Philox4x32-10 of core/philox.h and then uploaded.
// Tested in tests/core/rng_test.cpp (Random123 known answers, thread-count invariance, chunking
// invariance, moments).
#pragma once

#include <cstddef>
#include <cstdint>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// Algorithm (the contract; changing it changes every sampled video):
//   Element j (j = offset + i for output i) belongs to Philox block b = j / 4, lane l = j % 4:
//     r = philox4x32_10(counter = {lo32(b), hi32(b), 0, 0}, key = {lo32(seed), hi32(seed)})
//   Lanes {0,1} use the Box-Muller pair (w1, w2) = (r[0], r[1]); lanes {2,3} use (r[2], r[3]).
//     u1 = (w1 + 1) * 2^-32   in (0, 1], never 0, so log(u1) is finite
//     u2 =  w2      * 2^-32   in [0, 1)
//     radius = sqrt(-2 ln u1),  angle = 2 pi u2          (all in FP64)
//     even lane: radius * cos(angle);  odd lane: radius * sin(angle)
//   The FP64 result is rounded once to FP32 (round to nearest even).
// Every element depends only on (seed, j), so any chunking or thread count gives the same bytes.
// FP64 log/sqrt/cos/sin come from the host libm (glibc: results are within 1 ulp in FP64; the
// single rounding to FP32 makes a cross-libm difference an extremely rare last-bit event).
float gaussian_noise_value(uint64_t seed, uint64_t index);

// out[i] = gaussian_noise_value(seed, offset + i), i in [0, n). num_threads <= 0 picks automatically;
// the result never depends on it.
void gaussian_noise(uint64_t seed, uint64_t offset, float* out, size_t n, int num_threads = 0);

// Fills a host F32 tensor (any strides): the element with row-major logical index i gets
// gaussian_noise_value(seed, offset + i).
Status gaussian_noise(uint64_t seed, uint64_t offset, Tensor& out, int num_threads = 0);

}  // namespace vortex
