// CPU reference program of EncoderOps::vision_pixel_rows (src/backend/encoder_ops.h): the Qwen3-VL image
// processor's normalize + temporal patch + patchify from a u8 image into BF16 pixel rows, the program of
// preprocess_image (src/vision/vision_tower.cpp) followed by the tower's BF16 rounding of pixel_values. Tested
// against the CUDA kernel (src/cuda/ops/vision_prep.cu) bit for bit in tests/cuda/vision_prep_test.cpp, and against
// preprocess_image in tests/vision/vision_tower_test.cpp.
#pragma once

#include <array>

#include "ref/ref_ops.h"

namespace vortex::ref {

// The argument checks the CUDA entry point shares: rgb [H, W, 3] u8 contiguous with H, W multiples of
// patch * merge; out [(H / patch) (W / patch), 3 temporal_patch patch^2] bf16 contiguous; std255 positive.
Status check_vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& std255, int patch, int temporal_patch,
                               int merge, const Tensor& out);
Status vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255, const std::array<float, 3>& std255,
                         int patch, int temporal_patch, int merge, Tensor& out, const RowRunner& run = run_serial);

}  // namespace vortex::ref
