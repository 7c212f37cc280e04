// TextEncoder: H3's conditioner, the Qwen3-VL language model run as a causal prefill to one hidden state,
// written once against Backend (docs/text_encoder.md; the BF16 program is in docs/numerics.md).
// Layer-index semantics are transformers' `hidden_states[k]` of the FULL stack: k = 0 is the embedding,
// 0 < k < num_layers the pre-norm residual after decoder layer k-1, k = num_layers the final norm's output.
// The H3 trap: a stack truncated to 50 layers would return a post-norm hidden_states[50]; here the layer count
// comes from config.json and only the first k layers are loaded, so encode(ids, 50) is always pre-norm.
// Tested in tests/text_encoder/text_encoder_parity_test.cpp (transformers 5.24, every k) and
// text_encoder_test.cpp (also the cancel between layers and between layer loads).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "text_encoder/text_encoder_config.h"
#include "text_encoder/text_encoder_weights.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// fl2va keyframes in the conditioner (transformers' Qwen3VLModel.forward): the vision tokens replace the
// embedding rows of the image-pad tokens (masked_scatter), and DeepStack feature i is added to the residual
// stream at those rows after decoder layer i (Qwen3VLTextModel._deepstack_process), in BF16.
// The tensors come either as FP32 host rows (the vision tower's forward) or as BF16 rows on the text encoder's
// backend (forward_device on the same backend: no host round trip); both give the same bytes, since the tower's
// BF16 outputs widen to FP32 exactly and round back unchanged.
struct VisionEmbeddings {
  std::vector<int64_t> rows;      // the image-pad rows, ascending (src/vision/keyframe_presentation.h)
  Tensor tokens;                  // [rows, hidden] f32 host or bf16 on the backend: the vision tower's merged output
  std::vector<Tensor> deepstack;  // each [rows, hidden], the same form as tokens, in tap order
};

// How a caller stops or follows an encode. `cancel` is read before each decoder layer and once before the
// result is downloaded: a set flag ends the encode with kCancelled (and, on backends that poll it, cuts the
// running op short: Backend::set_cancel_flag). `on_layer(done, total)` is called after each decoder layer has
// been issued (on CUDA the device may still be running it). Both may be empty.
struct TextEncodeControl {
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(int done, int total)> on_layer;
};

class TextEncoder {
 public:
  // A transformers Qwen3-VL folder (config.json + safetensors), reading only what hidden_states[k] for
  // k <= layers_needed requires: layers 0 .. layers_needed-1, plus `norm` when layers_needed == num_layers.
  // `cancel` (may be null) is read before each tensor is uploaded: a set flag ends the load with kCancelled.
  static Result<std::unique_ptr<TextEncoder>> load(const std::string& dir, Backend& backend, int layers_needed,
                                                   const TextEncoderLoadProgressFn& progress = nullptr,
                                                   const std::atomic<bool>* cancel = nullptr);
  // Deterministic synthetic weights with the real names and shapes (benchmarks).
  static Result<std::unique_ptr<TextEncoder>> synthesize(const TextEncoderConfig& config, Backend& backend,
                                                         uint64_t seed, int layers);

  const TextEncoderConfig& config() const { return config_; }
  int layers_loaded() const { return static_cast<int>(weights_.layers.size()); }
  Backend& backend() const { return backend_; }

  // hidden_states[layer_index] of input ids (text positions (i, i, i)): host [L, hidden] bf16.
  Result<Tensor> encode(const std::vector<int32_t>& ids, int layer_index, const TextEncodeControl& control = {});
  // The same with explicit M-RoPE positions: host i32 [3, L] (t, h, w), for presentations with images, and the
  // vision embeddings of those images (null: none). hidden_states[k] is the output of decoder layer k - 1 before
  // its DeepStack addition, as transformers records it.
  Result<Tensor> encode(const std::vector<int32_t>& ids, const Tensor& positions, int layer_index,
                        const VisionEmbeddings* vision = nullptr, const TextEncodeControl& control = {});

 private:
  TextEncoder(const TextEncoderConfig& config, Backend& backend, TextEncoderWeights weights)
      : config_(config), backend_(backend), weights_(std::move(weights)) {}
  TextEncoderConfig config_;
  Backend& backend_;
  TextEncoderWeights weights_;
};

// The folder holding the conditioner under `dir`: `dir` itself when its config.json is a Qwen3-VL config,
// else `dir`/text_encoder (a diffusers pipeline folder). kNotFound naming both when neither is.
Result<std::string> text_encoder_folder(const std::string& dir);
// True when `path` is a Qwen3-VL config.json: the text encoder's class name (`architectures`), a `text_config`,
// or a bare `qwen3_vl_text` config.
bool is_qwen3_vl_config(const std::string& path);
// The hidden-state index the pipeline at `dir` conditions on: "text_encoder_layer" in its
// (modular_)model_index.json, else kH3TextEncoderLayer for a MiniMaxH3 pipeline (`_class_name`); `dir` may be
// the pipeline folder or its text_encoder/ subfolder. kNotFound when no pipeline config says (pass --text-layer).
Result<int> pipeline_text_layer(const std::string& dir);

}  // namespace vortex
