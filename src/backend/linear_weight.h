// The weight of one linear layer as every backend op takes it (LinearWeight: plain, FP8 per tensor or NVFP4,
// with an optional run-time LoRA branch) and the LoRA merge programs. Below the model so that the op
// interfaces (src/backend/backend.h) and the decoders (src/vae, src/text_encoder, src/lora) share it without the
// H3 transformer; H3Weights (src/model/h3_weights.h) is built from it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "vortex/tensor.h"

namespace vortex {

// How a linear layer's weight is stored (ComfyUI `comfy_quant` formats).
enum class QuantFormat : uint8_t {
  kNone,       // bf16 / f32 weight
  kFp8Scaled,  // weight f8e4m3 [N, K], weight_scale f32 scalar (per tensor)
  kNvfp4,      // weight u8 [N16, K16/2], weight_scale f8e4m3 tiled, weight_scale_2 f32 scalar
};
const char* quant_format_name(QuantFormat format);

// A run-time low-rank branch on one linear layer (LoRA applied unmerged, src/lora/lora.h):
// out = R(x W^T + bias + sum_p t_p B_p^T) on the rows [row_offset, row_offset + rows of B_p) of each part,
// t_p = R(scale_p * x A_p^T). The CPU reference (src/ref/lora.cpp) defines the accumulation.
struct LoraBranchPart {
  Tensor a;                // [r, K] bf16 on the backend
  Tensor b;                // [rows, r] bf16 on the backend
  int64_t row_offset = 0;  // first output row of the layer this part writes (q/k/v thirds of a split file)
  double scale = 1.0;      // strength * alpha / r
};
struct LoraBranch {
  std::vector<LoraBranchPart> parts;
};

// How merge_lora rounds (src/lora/lora.h, docs/lora.md "Merge order").
enum class LoraMergeProgram : uint8_t {
  kSingleRounding,  // Vortex: W' = R(W + scale * B @ A), FP64, one rounding
  kPeft,            // diffusers/PEFT fuse_lora on the CPU: delta rounded to BF16, then a BF16 add
};

struct LinearWeight {
  QuantFormat format = QuantFormat::kNone;
  Tensor weight;                           // [N, K] (bf16/f32), [N, K] f8e4m3, or [N16, K16/2] u8 for nvfp4
  Tensor weight_scale;                     // fp8: [] / [1] f32; nvfp4: tiled block scales f8e4m3
  Tensor weight_scale_2;                   // nvfp4: [] / [1] f32 global scale
  Tensor input_scale;                      // optional static activation scale
  int64_t out_features = 0;                // N (unpadded)
  int64_t in_features = 0;                 // K (unpadded)
  std::shared_ptr<const LoraBranch> lora;  // null: plain linear (the default program, untouched)
};

}  // namespace vortex
