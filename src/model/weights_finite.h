// The load-time finiteness check of the transformer's weights: every tensor of H3Weights (and the scales of
// quantized linears) is scanned for NaN and Inf, and the first bad one is named with its element index. A
// damaged checkpoint then fails at load with exit 2 instead of as a non-finite velocity at step 0. Host tensors
// are scanned in place; device tensors are downloaded one tensor at a time. Packed FP4 data (no NaN encoding)
// is skipped, its scales are scanned. Called by engine/pipeline.cpp after the load and after a LoRA merge;
// tested in tests/model/weights_finite_test.cpp and tests/cli/cli_errors_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "model/h3_weights.h"
#include "vortex/status.h"

namespace vortex {

// The index of the first NaN / Inf element of a contiguous host tensor (F64, F32, F16, BF16, F8 E4M3 / E5M2 /
// E8M0); nullopt when all are finite or the dtype has no non-finite encoding (integers, packed FP4 bytes).
std::optional<int64_t> first_non_finite(const Tensor& host);

// OK when every weight is finite; otherwise kFormat "<what>: tensor '<name>' (<shape>) holds a non-finite value
// (NaN or Inf) at element <i>; <advice>".
Status check_weights_finite(H3Weights& weights, Backend& backend, const std::string& what, const std::string& advice);

}  // namespace vortex
