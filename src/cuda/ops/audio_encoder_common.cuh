// Host checks shared by the audio VAE encoder's kernels (src/cuda/ops/audio_encoder_ops.h): the argument checks
// they share with their CPU programs (src/ref/audio_encoder_internal.h) and the no-overlap check of out-of-place ops.
// Included only by those .cu files; tested through tests/cuda/audio_encoder_ops_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/check.h"
#include "cuda/ops/audio_encoder_ops.h"
#include "cuda/ops/ops_internal.h"
#include "ref/audio_encoder_internal.h"

namespace vortex::cuda_ops {

// Out-of-place kernels: the whole byte ranges of two contiguous tensors must not overlap.
inline Status expect_apart(const Tensor& in, const Tensor& out, const char* op) {
  const auto a = reinterpret_cast<uintptr_t>(in.raw_data()), b = reinterpret_cast<uintptr_t>(out.raw_data());
  if (a < b + out.nbytes() && b < a + in.nbytes())
    return invalid_argument(std::string(op) + ": the output overlaps the input (this op is out of place)");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
