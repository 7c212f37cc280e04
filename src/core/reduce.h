// Canonical reductions shared by the CPU reference and the CUDA kernels (docs/numerics.md "Rules that make E0
// possible"). Sum of squares of a row (and a plain sum), FP64, in ONE fixed order that both sides reproduce:
//   256 lanes; lane t accumulates elements j = t, t + 256, t + 512, ... in ascending j (FP64 adds);
//   then lanes combine by a halving tree: for w = 128, 64, ..., 1: lane[t] += lane[t + w] for t < w.
// A BF16 (or FP32) square is exact in FP64, so the only roundings are these adds, in this order.
// GPU kernels use 256 threads (or emulate the 256 lanes in the same order). Tested in tests/ref.
#pragma once

#include <cstdint>

#include "core/philox.h"  // VORTEX_HD

namespace vortex {

constexpr int kCanonicalLanes = 256;

// x: `n` values at stride `stride`, read through `load(ptr) -> double`.
template <typename LoadFn>
VORTEX_HD double canonical_sum_squares(int64_t n, LoadFn load) {
  double lane[kCanonicalLanes];
  for (int t = 0; t < kCanonicalLanes; ++t) {
    double acc = 0.0;
    for (int64_t j = t; j < n; j += kCanonicalLanes) {
      double v = load(j);
      acc += v * v;
    }
    lane[t] = acc;
  }
  for (int w = kCanonicalLanes / 2; w >= 1; w /= 2)
    for (int t = 0; t < w; ++t) lane[t] += lane[t + w];
  return lane[0];
}

// The same lanes and tree over the values themselves (a plain sum: the VAE LayerNorm's mean).
template <typename LoadFn>
VORTEX_HD double canonical_sum(int64_t n, LoadFn load) {
  double lane[kCanonicalLanes];
  for (int t = 0; t < kCanonicalLanes; ++t) {
    double acc = 0.0;
    for (int64_t j = t; j < n; j += kCanonicalLanes) acc += load(j);
    lane[t] = acc;
  }
  for (int w = kCanonicalLanes / 2; w >= 1; w /= 2)
    for (int t = 0; t < w; ++t) lane[t] += lane[t + w];
  return lane[0];
}

}  // namespace vortex
