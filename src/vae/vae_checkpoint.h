// Reading a VAE folder in either of the layouts the official Hugging Face snapshot ships:
//   diffusers: config.json + diffusion_pytorch_model.safetensors (or a sharded *.safetensors.index.json): the
//              snapshot's top-level vae/ and audio_vae/, and diffusers' save_pretrained;
//   original:  the per-variant FL2VA/video_vae (config.json wrapper naming source/config.json and
//              source/model.safetensors) and FL2VA/audio_vae (config.json + metadata.json + model.safetensors),
//              whose key names diffusers/scripts/convert_minimax_h3_to_diffusers.py maps (video_vae.cpp,
//              audio_vae.cpp hold the per-model mapping).
// Every tensor is checked by name, shape and dtype with errors naming the tensor and the file, and a file
// tensor nobody reads (outside the encoder-side prefixes a model declares) is an error too; values come back
// as contiguous host FP32 (f32, bf16 and f16 files accepted).
// Tested in tests/vae/vae_loader_test.cpp (both layouts, corrupted copies) and vae_parity_test.cpp.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/config_json.h"
#include "io/safetensors.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// name -> host f32 tensor with exactly `shape`; a missing tensor or a different shape is an error naming it.
using VaeTensorSource = std::function<Result<Tensor>(const std::string& name, const Shape& shape)>;

enum class VaeLayout { kDiffusers, kOriginal };
const char* vae_layout_name(VaeLayout layout);  // "diffusers" | "original"

struct VaeFolder {
  std::string dir;
  VaeLayout layout = VaeLayout::kDiffusers;
  ConfigJson config;         // DIR/config.json (original layout: the MiniMaxH3*VAE wrapper)
  ConfigJson source_config;  // original layout: video source/config.json, audio metadata.json's kwargs
  std::string weights_path;  // the safetensors file or index opened
  SafetensorsSet weights;
  // File tensor names a VaeTensorSource over this folder has read (for the unexpected-tensor check).
  std::shared_ptr<std::set<std::string>> consumed = std::make_shared<std::set<std::string>>();
};

// Opens a VAE folder in either layout. The original layout is recognised by its wrapper config
// (`_class_name` `original_class`, or a `source_safetensors_path` key); `what` names the VAE in errors. A config
// of another component than `kind` (e.g. the transformer's, or the other VAE's) is refused naming both.
Result<VaeFolder> open_vae_folder(const std::string& dir, std::string_view what, std::string_view original_class,
                                  ConfigKind kind);
// Reads `name` from the folder's safetensors as host f32 with exactly `shape` (its name recorded as consumed).
Result<Tensor> read_vae_tensor(const VaeFolder& folder, const std::string& name, const Shape& shape);
// A VaeTensorSource over a folder's safetensors by the file's own names (converts to f32, checks the shape).
VaeTensorSource folder_tensor_source(const VaeFolder& folder);
// kFormat naming every file tensor that was neither consumed nor under one of `ignored_prefixes` (encoder
// and training-only tensors the decoder never reads).
Status check_unexpected_vae_tensors(const VaeFolder& folder, const std::vector<std::string>& ignored_prefixes);
// A VaeTensorSource that synthesizes every requested tensor deterministically from (seed, name):
// element = offset + scale * u, u uniform in [-1, 1), with (scale, offset) chosen by `init(name, shape)`.
VaeTensorSource synthetic_tensor_source(uint64_t seed,
                                        std::function<std::pair<float, float>(const std::string&, const Shape&)> init);

// A torch.nn.utils.weight_norm (dim 0) convolution weight of `shape` read from `<base>.weight_g` / `<base>.weight_v`
// and folded in FP64, w = fp32(g * v / ||v||) with the norm over all dims but 0; a source that stores the folded
// `<base>.weight` is read as is. `params` (when given) counts the stored elements read.
Result<Tensor> read_weight_norm_conv(const VaeTensorSource& src, const std::string& base, const Shape& shape,
                                     int64_t* params = nullptr);

// A VAE config's `latents_mean` / `latents_std` (defaults: `channels` zeros / ones) as FP32; their lengths are checked
// by the config's validate().
Status read_latent_stats(const ConfigJson& cfg, int channels, std::vector<float>& mean, std::vector<float>& std);

// Contiguous host copy of `t` as f32 (f32 / bf16 / f16 sources).
Result<Tensor> to_f32_host(const Tensor& t, std::string_view name);
// Contiguous host bf16 copy (RNE) of a host f32 tensor.
Tensor to_bf16_host(const Tensor& f32);

}  // namespace vortex
