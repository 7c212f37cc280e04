// CUDA kernel of EncoderOps::vision_pixel_rows (src/backend/encoder_ops.h): the Qwen3-VL image processor's
// normalize + temporal patch + patchify from a u8 image on the device into BF16 pixel rows. E0 against its CPU
// program src/ref/vision_prep.cpp (the same FP32 subtraction and division, RNE to BF16). Tested in
// tests/cuda/vision_prep_test.cpp (label gpu).
#pragma once

#include <cuda_runtime.h>

#include <array>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::cuda_ops {

Status vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255, const std::array<float, 3>& std255,
                         int patch, int temporal_patch, int merge, Tensor& out, cudaStream_t stream);

}  // namespace vortex::cuda_ops
