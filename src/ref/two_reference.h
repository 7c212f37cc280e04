// The two-reference rule of docs/numerics.md (from FlashAttention-3's tests), for E1 ops (GEMMs, attention):
// a kernel's error vs the FP64 reference must be no worse than 2x the error of the CPU reference of the
// SAME low-precision program (e.g. ref::attention_flash_fp32) vs FP64, plus a small absolute floor.
// NaN never passes. The report carries the numbers (max-abs and rel-L2) so tests print them.
// Tested in tests/ref/two_reference_test.cpp.
#pragma once

#include <string>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::ref {

struct TwoReferenceReport {
  double kernel_max_abs = 0, kernel_rel_l2 = 0;    // kernel vs FP64 reference
  double program_max_abs = 0, program_rel_l2 = 0;  // same-program CPU reference vs FP64 reference
  double floor = 0;
  bool kernel_has_nan = false;
  bool pass = false;  // no NaN, max-abs <= 2 * program max-abs + floor and rel-L2 <= 2 * program rel-L2 + floor
  std::string to_string() const;
};

// All three: host tensors of one shape, bf16 or f32 (any mix), any strides.
Result<TwoReferenceReport> two_reference_rule(const Tensor& kernel, const Tensor& fp64_reference,
                                              const Tensor& same_program_reference, double floor = 1e-6);

}  // namespace vortex::ref
