// What the vision tests (tests/vision/*_test.cpp) share: the relative L2 distance of two f32 tensors, the measure
// their parity checks hold against twice the BF16 floor.
#pragma once

#include <cmath>
#include <cstdint>

#include "vortex/tensor.h"

namespace vortex::test {

// ||a - b|| / ||b|| over two f32 tensors of one shape.
inline double rel_l2_f32(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = static_cast<double>(a.data<float>()[i]) - b.data<float>()[i];
    num += d * d;
    den += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / den);
}

}  // namespace vortex::test
