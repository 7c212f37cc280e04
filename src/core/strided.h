// for_each_strided_offset: visit the elements of a strided view in row-major logical order.
// Host fills (noise, synthetic values) define element i by its logical index, not its address, so
// a strided view gets the same values as a contiguous tensor of the same shape.
// Tested through the strided cases in tests/core/rng_test.cpp and synthetic_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vortex/tensor.h"

namespace vortex {

// Calls fn(i, element_offset) for logical indices i in [begin, end); element_offset is in elements
// from the view's first element (sum of index_d * stride_d).
template <typename Fn>
void for_each_strided_offset(const Shape& shape, const Shape& strides, size_t begin, size_t end, Fn fn) {
  if (begin >= end) return;
  size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  int64_t element_offset = 0;
  size_t rest = begin;
  for (size_t d = rank; d-- > 0;) {
    int64_t extent = shape[d];
    index[d] = static_cast<int64_t>(rest % static_cast<size_t>(extent));
    rest /= static_cast<size_t>(extent);
    element_offset += index[d] * strides[d];
  }
  for (size_t i = begin; i < end; ++i) {
    fn(i, element_offset);
    for (size_t d = rank; d-- > 0;) {
      element_offset += strides[d];
      if (++index[d] < shape[d]) break;
      element_offset -= index[d] * strides[d];
      index[d] = 0;
    }
  }
}

}  // namespace vortex
