// H3 checkpoint spec: every tensor of an H3 checkpoint for a ModelConfig (original key, shape, dtype)
// and its documented synthetic initialisation, plus the name -> H3Weights slot mapping used by the
// loader and by synthesize_weights (which fills the same bytes on any backend that `vortex synth`
// writes to disk). Tested in tests/io/checkpoint_test.cpp (spec vs synth files, loader round trips).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/h3_weights.h"
#include "vortex/config.h"
#include "vortex/tensor.h"

namespace vortex {

// How `vortex synth` / synthesize_weights fill a tensor.
enum class SynthInit : uint8_t {
  kUniform,      // element i = offset + scale * u(synthetic_seed(seed, name), i), u in [-1, 1)
  kRopeInvFreq,  // the real table (not random): 1 / theta^(2k / 2L) in the reference's FP32 steps (h3_spec.cpp)
};

// Synthetic scales (chosen so a forward pass on synthetic weights keeps activations O(1)):
//  * GEMM weights [N, K]: uniform(-a, a), a = sqrt(3/K) -> variance 1/K, unit-variance outputs for
//    unit-variance inputs;
//  * biases: uniform(-0.02, 0.02);
//  * RMSNorm / q_norm / k_norm weights: 1 +- 0.1 (offset 1, scale 0.1);
//  * AdaLN projections: a = 0.1 * sqrt(3/E) and bias +-0.05, so shift/scale/gate stay O(0.1);
//  * rope.inv_freq: the exact table (kRopeInvFreq).
struct TensorSpec {
  std::string name;  // original checkpoint key, e.g. "blocks.0.attn.qkv_proj.weight"
  Shape shape;       // [out, in] for weights
  DType dtype;
  SynthInit init = SynthInit::kUniform;
  float synth_scale = 0.0f;
  float synth_offset = 0.0f;
  int64_t bytes() const { return shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype)); }
};

// All tensors of an H3 checkpoint in a fixed order (embeddings, refiner, blocks, final layer).
std::vector<TensorSpec> h3_tensor_specs(const ModelConfig& config);
int64_t h3_total_bytes(const ModelConfig& config);

// The fused-QKV weight names (their rows are per-head interleaved in original MiniMax files).
bool is_qkv_weight_name(std::string_view name);

// An H3Weights with blocks/refiner vectors sized for `config`, every tensor undefined.
H3Weights make_empty_h3_weights(const ModelConfig& config);
// (name, slot) for every spec tensor, in h3_tensor_specs order. Slots point into `weights`.
std::vector<std::pair<std::string, Tensor*>> h3_tensor_slots(H3Weights& weights);
// (layer prefix, LinearWeight) for the GEMM layers that may be quantized ("blocks.3.mlp.fc1").
std::vector<std::pair<std::string, LinearWeight*>> h3_linear_slots(H3Weights& weights);
// Sets out_features / in_features of every LinearWeight from the config (format left as is).
void set_linear_dims(H3Weights& weights, const ModelConfig& config);

// Host fill of one spec tensor: exactly the bytes synthesize_weights produces on a backend
// (QKV rows in the [q | k | v] layout of H3Weights).
Status fill_spec_host(const TensorSpec& spec, const ModelConfig& config, uint64_t seed, Tensor& host);

// Allocates every tensor on `backend` and fills it with Backend::fill_synthetic (seed per tensor =
// synthetic_seed(seed, name)); rope.inv_freq is computed on the host and uploaded. The full 33B
// model can be generated directly on a GPU this way.
Result<H3Weights> synthesize_weights(const ModelConfig& config, Backend& backend, uint64_t seed);
// The same, calling `after_each(spec, tensor)` once each tensor is filled (in h3_tensor_specs order): it may report
// progress or replace the tensor (e.g. by a host copy, H3Model's host-resident AdaLN projections) before the next one
// is allocated, so such tensors never share the device at once. An error from it ends the synthesis.
using SynthesizedTensorFn = std::function<Status(const TensorSpec& spec, Tensor& tensor)>;
Result<H3Weights> synthesize_weights(const ModelConfig& config, Backend& backend, uint64_t seed,
                                     const SynthesizedTensorFn& after_each);

}  // namespace vortex
