// Synthetic seeds and host fills (see synthetic.h). Elements are computed from their logical index
// only, over threads split on index ranges; strided views use the same logical indexing.
// Tested in tests/core/synthetic_test.cpp (determinism, exactness, strides, thread counts).
#include "core/synthetic.h"

#include <algorithm>
#include <string>

#include "core/parallel.h"
#include "core/philox.h"
#include "core/strided.h"

namespace vortex {

uint64_t fnv1a_64(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t synthetic_seed(uint64_t base_seed, std::string_view tensor_name) {
  return splitmix64(base_seed ^ splitmix64(fnv1a_64(tensor_name)));
}

namespace {

template <typename Element, typename Convert>
void fill_typed(Tensor& t, uint64_t seed, float scale, float offset, int num_threads, Convert convert) {
  Element* base = static_cast<Element*>(t.raw_data());
  size_t n = static_cast<size_t>(t.numel());
  bool contiguous = t.is_contiguous();
  const Shape& shape = t.shape();
  const Shape& strides = t.strides();
  parallel_for_ranges(n, num_threads, 4, [&](size_t begin, size_t end) {
    if (contiguous) {
      // One Philox call per 4 elements (ranges start on multiples of 4; the last may be partial).
      for (size_t block_start = begin; block_start < end; block_start += 4) {
        Philox4x32 r = philox_block(seed, block_start >> 2);
        size_t lanes = std::min<size_t>(4, end - block_start);
        for (size_t lane = 0; lane < lanes; ++lane)
          base[block_start + lane] = convert(synthetic_value_from_word(r.v[lane], scale, offset));
      }
    } else {
      for_each_strided_offset(shape, strides, begin, end, [&](size_t i, int64_t element_offset) {
        base[element_offset] = convert(synthetic_value(seed, i, scale, offset));
      });
    }
  });
}

}  // namespace

Status fill_synthetic_host(Tensor& t, uint64_t seed, float scale, float offset, int num_threads) {
  if (!t.defined()) return invalid_argument("fill_synthetic_host: tensor is undefined");
  if (t.device() != Device::kCpu)
    return invalid_argument("fill_synthetic_host: " + t.describe() +
                            " is not a host tensor; use the backend's fill_synthetic for device tensors");
  switch (t.dtype()) {
    case DType::kF32:
      fill_typed<float>(t, seed, scale, offset, num_threads, [](float v) { return v; });
      return Status::Ok();
    case DType::kBF16:
      fill_typed<uint16_t>(t, seed, scale, offset, num_threads, [](float v) { return bf16_bits_from_f32(v); });
      return Status::Ok();
    case DType::kF8E4M3:
      fill_typed<uint8_t>(t, seed, scale, offset, num_threads, [](float v) { return e4m3_from_f32(v); });
      return Status::Ok();
    default:
      return unsupported("fill_synthetic_host: dtype " + std::string(dtype_short_name(t.dtype())) + " of " +
                         t.describe() + " is not supported; use f32, bf16 or f8e4m3");
  }
}

}  // namespace vortex
