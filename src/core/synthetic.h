// Deterministic synthetic tensors (weights and embeddings for benchmarks without the real
// checkpoint): every element is synthetic_value() of core/philox.h, so the host fill here and a GPU
// fill produce identical bytes. Per-tensor seeds come from the tensor's name, so a tensor's values
// do not depend on load order. Tested in tests/core/synthetic_test.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// 64-bit FNV-1a of the bytes of `text` (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a_64(std::string_view text);
// splitmix64 finalizer (Steele, Lea, Flood 2014): z = x + 0x9E3779B97F4A7C15;
// z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB; return z ^ z>>31.
uint64_t splitmix64(uint64_t x);

// Seed of the tensor called `tensor_name` in the synthetic model `base_seed`:
//   splitmix64(base_seed ^ splitmix64(fnv1a_64(tensor_name)))
// (the inner mix spreads the name hash before the XOR; the outer one decorrelates nearby seeds).
uint64_t synthetic_seed(uint64_t base_seed, std::string_view tensor_name);

// Host fill: the element with row-major logical index i gets
//   v = synthetic_value(seed, i, scale, offset)      (FP32: offset + scale * u, no FMA)
// converted to t's dtype: f32 as is, bf16 by bf16_bits_from_f32 (RNE), f8e4m3 by e4m3_from_f32
// (RNE, satfinite). Any strides. Other dtypes return kUnsupported. num_threads <= 0 picks
// automatically; the bytes never depend on it.
Status fill_synthetic_host(Tensor& t, uint64_t seed, float scale, float offset, int num_threads = 0);

}  // namespace vortex
