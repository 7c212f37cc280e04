// H3Weights: every tensor of the H3 transformer, named after the original checkpoint keys
// (the release checkpoint's). Tensors live on whichever backend loaded them.
// `attn_qkv_proj` is always stored in the reordered layout [q(inner) | k(inner) | v(inner)] rows;
// the loader converts per-head-interleaved files. `mlp_fc1` rows are [gate(F) | value(F)].
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/linear_weight.h"
#include "vortex/config.h"
#include "vortex/tensor.h"

namespace vortex {

// One transformer block: blocks.{i}.* (and token_refiner.blocks.{i}.*, which has no adaln_proj).
struct H3BlockWeights {
  Tensor norm1_weight;                                // [D] bf16
  LinearWeight attn_qkv_proj;                         // [3*inner, D], rows [q | k | v]
  Tensor attn_q_norm_weight;                          // [head_dim] bf16
  Tensor attn_k_norm_weight;                          // [head_dim] bf16
  LinearWeight attn_out_proj;                         // [D, inner]
  Tensor norm2_weight;                                // [D] bf16
  LinearWeight mlp_fc1;                               // [2F, D], rows [gate | value]
  LinearWeight mlp_fc2;                               // [D, F]
  Tensor adaln_proj_linear_weight;                    // [18D, E] bf16 (main blocks only)
  Tensor adaln_proj_linear_bias;                      // [18D] bf16
  std::shared_ptr<const LoraBranch> adaln_proj_lora;  // run-time LoRA on adaln_proj.linear (null: none)
};

struct H3Weights {
  Tensor video_patch_proj_weight;        // [D, 96] f32
  Tensor video_patch_proj_bias;          // [D] f32
  Tensor audio_patch_proj_weight;        // [D, 32] f32
  Tensor audio_patch_proj_bias;          // [D] f32
  Tensor condition_proj_weight;          // [D, text_dim] bf16
  Tensor condition_proj_bias;            // [D] bf16
  Tensor time_embedder_proj_in_weight;   // [time_embed_hidden, freq_dim] f32
  Tensor time_embedder_proj_in_bias;     // [time_embed_hidden] f32
  Tensor time_embedder_proj_out_weight;  // [E, time_embed_hidden] f32
  Tensor time_embedder_proj_out_bias;    // [E] f32
  Tensor rope_inv_freq;                  // [rope_inv_freq_len] f32, optional (else computed)
  std::vector<H3BlockWeights> token_refiner_blocks;
  Tensor token_refiner_final_norm_weight;  // [D] bf16
  std::vector<H3BlockWeights> blocks;
  Tensor final_layer_norm_weight;                                 // [D] bf16
  Tensor final_layer_adaln_proj_linear_weight;                    // [2D, E] bf16
  Tensor final_layer_adaln_proj_linear_bias;                      // [2D] bf16
  std::shared_ptr<const LoraBranch> final_layer_adaln_proj_lora;  // run-time LoRA (null: none)
  Tensor final_layer_video_out_weight;                            // [96, D] f32
  Tensor final_layer_video_out_bias;                              // [96] f32
  Tensor final_layer_audio_out_weight;                            // [32, D] f32
  Tensor final_layer_audio_out_bias;                              // [32] f32
};

}  // namespace vortex
