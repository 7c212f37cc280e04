// TextEncoderWeights: the tensors of the Qwen3-VL language model that H3's conditioner reads, named after
// Qwen3VLForConditionalGeneration's checkpoint keys (transformers 5.x, prefix "model.language_model.").
// Only the first K decoder layers are held; the final `norm` only when all of them are (hidden_states[64]).
// The embedding table stays on the host (a view onto the mmap of its shard): a prompt gathers L rows of it.
// Tested in tests/text_encoder/text_encoder_test.cpp (folder loading of K layers, spec, synthetic weights).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/linear_weight.h"
#include "text_encoder/text_encoder_config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

constexpr const char* kTextEncoderKeyPrefix = "model.language_model.";

// model.language_model.layers.{i}.*
struct TextEncoderLayerWeights {
  Tensor input_layernorm_weight;           // [D] bf16
  LinearWeight self_attn_q_proj;           // [H * hd, D] bf16
  LinearWeight self_attn_k_proj;           // [H_kv * hd, D] bf16
  LinearWeight self_attn_v_proj;           // [H_kv * hd, D] bf16
  Tensor self_attn_q_norm_weight;          // [hd] bf16
  Tensor self_attn_k_norm_weight;          // [hd] bf16
  LinearWeight self_attn_o_proj;           // [D, H * hd] bf16
  Tensor post_attention_layernorm_weight;  // [D] bf16
  LinearWeight mlp_gate_proj;              // [F, D] bf16
  LinearWeight mlp_up_proj;                // [F, D] bf16
  LinearWeight mlp_down_proj;              // [D, F] bf16
};

struct TextEncoderWeights {
  Tensor embed_tokens_weight;                   // [V, D] bf16, HOST (mmap view or synthetic buffer)
  std::vector<TextEncoderLayerWeights> layers;  // layers 0 .. K-1
  Tensor norm_weight;                           // [D] bf16; defined only when K == num_layers
};

// One checkpoint tensor the conditioner reads, with the synthetic init used by `synthesize`:
// values offset + scale * u, u uniform in [-1, 1) (core/synthetic.h).
struct TextEncoderTensorSpec {
  std::string name;  // full key, e.g. "model.language_model.layers.3.self_attn.k_norm.weight"
  Shape shape;
  float scale = 0.0f, offset = 0.0f;
};
// The embedding, the first `layers` decoder layers' tensors, and `norm` when layers == cfg.num_layers, in
// checkpoint order. layers in [0, cfg.num_layers].
Result<std::vector<TextEncoderTensorSpec>> text_encoder_tensor_specs(const TextEncoderConfig& cfg, int layers);

// Where a load stands, reported after the embedding and after each decoder layer's tensors are on the backend.
struct TextEncoderLoadProgress {
  uint64_t bytes_done = 0, bytes_total = 0;  // tensor bytes read from the files (the embedding counts as read)
  int layers_done = 0, layers_total = 0;
  double seconds = 0.0;  // since the load began
};
using TextEncoderLoadProgressFn = std::function<void(const TextEncoderLoadProgress&)>;

// Reads the tensors of text_encoder_tensor_specs(cfg, layers) from a transformers folder (config.json beside
// model.safetensors.index.json + shards, or one model.safetensors): every other tensor (the vision tower,
// later layers, lm_head) is never read. Each tensor is uploaded from its mmap view (one copy, on the device);
// the embedding stays a host view. All missing / mis-shaped / non-BF16 tensors are listed in one kFormat error.
// `cancel` (may be null) is read before each upload: a set flag ends the load with kCancelled.
Result<TextEncoderWeights> load_text_encoder_weights(const std::string& folder, const TextEncoderConfig& cfg,
                                                     int layers, Backend& backend,
                                                     const TextEncoderLoadProgressFn& progress = nullptr,
                                                     const std::atomic<bool>* cancel = nullptr);
// Deterministic synthetic weights with the real names and shapes (for benchmarks): per-tensor seeds from
// synthetic_seed(seed, name), so a tensor's values do not depend on how many layers are built.
Result<TextEncoderWeights> synthesize_text_encoder_weights(const TextEncoderConfig& cfg, int layers, uint64_t seed,
                                                           Backend& backend);

// Writes a transformers folder with the weights `synthesize_text_encoder_weights(cfg, cfg.num_layers, seed)`
// holds (same values, bit for bit): DIR/config.json (cfg.to_config_json()) and DIR/model.safetensors with
// every tensor of text_encoder_tensor_specs(cfg, cfg.num_layers), BF16, metadata `vortex.synthetic_seed`.
// Host memory: the whole model at once, so this is for tiny configs (tests, `vortex synth --snapshot tiny`).
// DIR must not hold config.json or model.safetensors already.
Status write_synthetic_text_encoder(const std::string& dir, const TextEncoderConfig& cfg, uint64_t seed);

}  // namespace vortex
