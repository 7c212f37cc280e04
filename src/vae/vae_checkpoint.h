// Reading a VAE folder: config.json plus diffusion_pytorch_model.safetensors (or a sharded
// *.safetensors.index.json), the layout of both the official snapshot's vae/ and audio_vae/ folders and of
// diffusers' save_pretrained. Every tensor is checked by name, shape and dtype with errors naming the tensor
// and the file; values come back as contiguous host FP32 (f32, bf16 and f16 files accepted).
// Tested in tests/vae/vae_loader_test.cpp (fixture folders, corrupted copies) and tests/vae/vae_parity_test.cpp.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// name -> host f32 tensor with exactly `shape`; a missing tensor or a different shape is an error naming it.
using VaeTensorSource = std::function<Result<Tensor>(const std::string& name, const Shape& shape)>;

struct VaeFolder {
  std::string dir;
  nlohmann::json config;  // config.json
  SafetensorsSet weights;
};

// Opens DIR/config.json and DIR/diffusion_pytorch_model.safetensors(.index.json). `what` names the VAE in errors.
Result<VaeFolder> open_vae_folder(const std::string& dir, std::string_view what);
// A VaeTensorSource over a folder's safetensors (converts to f32, checks the shape).
VaeTensorSource folder_tensor_source(const VaeFolder& folder);
// A VaeTensorSource that synthesizes every requested tensor deterministically from (seed, name):
// element = offset + scale * u, u uniform in [-1, 1), with (scale, offset) chosen by `init(name, shape)`.
VaeTensorSource synthetic_tensor_source(uint64_t seed, std::function<std::pair<float, float>(const std::string&, const Shape&)> init);

// config.json readers with errors naming the key.
Result<int> config_int(const nlohmann::json& cfg, const char* key, int fallback);
Result<float> config_float(const nlohmann::json& cfg, const char* key, float fallback);
Result<std::vector<int>> config_ints(const nlohmann::json& cfg, const char* key, std::vector<int> fallback);
Result<std::vector<float>> config_floats(const nlohmann::json& cfg, const char* key, std::vector<float> fallback);

// Contiguous host copy of `t` as f32 (f32 / bf16 / f16 sources).
Result<Tensor> to_f32_host(const Tensor& t, std::string_view name);
// Contiguous host bf16 copy (RNE) of a host f32 tensor.
Tensor to_bf16_host(const Tensor& f32);

}  // namespace vortex
