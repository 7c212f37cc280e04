// H3Model: the H3 denoiser written once against the Backend interface (CPU reference or CUDA).
// Per request: text refinement (condition_proj -> refiner blocks -> final_norm) or already-refined
// states, RoPE tables, segment tables. Per step: FP32 time MLP on the host for the distinct timesteps,
// AdaLN tables (adaln_proj per block), input projections, 50 blocks, final layer and FP32 heads.
// Block order and BF16 boundaries: NUMERICS.md "The BF16 program of one H3 block".
#pragma once

#include <memory>
#include <vector>

#include "model/backend.h"
#include "model/h3_weights.h"
#include "model/packing.h"
#include "sampler/sampler.h"
#include "vortex/config.h"

namespace vortex {

// Per-step conditioning shared by all blocks of one forward.
struct StepTables {
  std::vector<float> timesteps;     // distinct t values, sorted ascending (t = 1 - sigma)
  int video_slot = 0, audio_slot = 0;
  SegmentTable block_segments;      // row -> slot * 3 + modality
  SegmentTable final_segments;      // row -> slot
  std::vector<Tensor> block_tables; // per block [slots * 3, 6 * D] bf16, on the backend
  Tensor final_table;               // [slots, 2 * D] bf16, on the backend
};

class H3Model {
 public:
  H3Model(ModelConfig cfg, Backend& backend, H3Weights weights, ExecOptions opts);

  const ModelConfig& config() const { return cfg_; }
  Backend& backend() { return backend_; }
  const H3Weights& weights() const { return weights_; }
  ExecOptions& options() { return opts_; }

  // Once per request. `text` is host [L, text_dim] (Qwen3-VL layer-50 states, refined here) or
  // [L, hidden] (already refined), f32 or bf16. L must equal layout.geo.text_rows.
  Status prepare(const PackedLayout& layout, const Tensor& text);

  // One denoiser evaluation: host latents (flattened [C, T, H, W] video and [2, C, Ta] audio, FP32)
  // at (sigma_v, sigma_a) -> data-ward velocity, same sizes (host FP32).
  Result<AvLatents> forward(const AvLatents& x, double sigma_v, double sigma_a);

  // Pieces of forward, public for `vortex bench` / `vortex gate` and tests.
  Result<StepTables> make_step_tables(double sigma_v, double sigma_a);
  // x [S, D] bf16 on the backend, updated in place by block `index`.
  Status run_block(int index, Tensor& x, const StepTables& tables);
  // Packed input rows [S, D] bf16: projected video/audio rows + refined text.
  Result<Tensor> embed_inputs(const AvLatents& x);
  // Final layer + heads: x [S, D] bf16 -> velocity latents (host FP32).
  Result<AvLatents> final_layer(const Tensor& x, const StepTables& tables);

 private:
  ModelConfig cfg_;
  Backend& backend_;
  H3Weights weights_;
  ExecOptions opts_;
  PackedLayout layout_;
  RopeTables rope_;      // on the backend
  Tensor text_refined_;  // [L, D] bf16 on the backend
  // Scratch buffers reused by every block (allocated in prepare()).
  Tensor qkv_, attn_out_, proj_out_, norm_out_, fc1_out_, swiglu_out_;
};

}  // namespace vortex
