// H3 checkpoint layouts: detection (original MiniMax vs ComfyUI repack, per-layer quantization),
// the inspect report, validation against h3_spec, the per-head-interleaved -> [q|k|v] QKV reorder,
// loading onto a Backend, and the ModelConfig of a checkpoint (config.json or inferred from shapes).
// Tested in tests/io/checkpoint_test.cpp (synthetic h3-tiny files in both layouts, fp8, malformed).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "model/backend.h"
#include "model/h3_weights.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

// Which QKV row order a checkpoint carries.
//   kOriginal: raw MiniMax release, fused QKV rows per-head interleaved (head0 q, k, v, head1 ...).
//   kComfy:    ComfyUI repack, QKV rows [q_all | k_all | v_all] (ComfyUI splits the fused output into
//              contiguous thirds, so files made for it must carry the reordered layout).
// Detection rule when not overridden (first that applies):
//   1. __metadata__["vortex.qkv_layout"] = "per_head_interleaved" | "qkv_blocked" (written by synth);
//   2. ComfyUI markers: keys prefixed "diffusion_model." / "model.diffusion_model.", any
//      "<layer>.comfy_quant" tensor, or __metadata__["_quantization_metadata"] -> kComfy;
//   3. otherwise kOriginal.
enum class CheckpointLayout : uint8_t { kAuto, kOriginal, kComfy };
const char* checkpoint_layout_name(CheckpointLayout layout);  // "auto" | "original" | "comfy"
Result<CheckpointLayout> checkpoint_layout_from_name(std::string_view name);

constexpr const char* kQkvLayoutMetadataKey = "vortex.qkv_layout";
constexpr const char* kQkvInterleavedValue = "per_head_interleaved";
constexpr const char* kQkvBlockedValue = "qkv_blocked";

struct LayerQuantInfo {
  std::string layer;        // canonical layer prefix, e.g. "blocks.3.mlp.fc1"
  QuantFormat format = QuantFormat::kNone;
  std::string format_name;  // as written in the file ("float8_e4m3fn", "nvfp4", ...)
  std::string source;       // "comfy_quant" | "_quantization_metadata" | "dtype (legacy scaled fp8)"
  bool has_input_scale = false;
};

struct CheckpointTensorInfo {
  std::string name;       // key as stored
  std::string canonical;  // key without the ComfyUI prefix
  DType dtype = DType::kU8;
  Shape shape;
  uint64_t bytes = 0;
  size_t file = 0;        // index into CheckpointInfo::files
};

struct CheckpointInfo {
  std::string path;
  std::vector<std::string> files;
  std::string key_prefix;  // "" | "diffusion_model." | "model.diffusion_model."
  bool is_h3 = false;      // has blocks.*.attn.qkv_proj.weight
  CheckpointLayout layout = CheckpointLayout::kOriginal;
  std::string layout_reason;
  std::vector<CheckpointTensorInfo> tensors;
  std::vector<LayerQuantInfo> quantized_layers;
  uint64_t total_bytes = 0;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> warnings;
};

// Opens (file or index), detects prefix, layout and quantization. Works on any safetensors file.
Result<CheckpointInfo> inspect_checkpoint(const std::string& path,
                                          CheckpointLayout layout_override = CheckpointLayout::kAuto);
std::string checkpoint_report_text(const CheckpointInfo& info);
std::string checkpoint_report_json(const CheckpointInfo& info);  // pretty JSON object

// Loads an H3 checkpoint for `config` onto `backend`: every name/shape/dtype is checked against
// h3_tensor_specs (one error lists all missing / unexpected / mismatched tensors), QKV is converted
// to [q|k|v] rows when the file is per-head interleaved. Quantized qkv/out/fc1/fc2 layers are read
// and validated by read_quantized_linear (io/quantized_layers.h: fp8_scaled and nvfp4; interleaved
// QKV rows permuted with permute_quantized_rows). Unknown formats and quantized non-GEMM tensors
// return kUnsupported.
Result<H3Weights> load_checkpoint(const std::string& path, const ModelConfig& config, Backend& backend,
                                  CheckpointLayout layout_override = CheckpointLayout::kAuto);

// The config of a checkpoint: `config.json` in the same directory, else inferred from tensor shapes.
Result<ModelConfig> config_for_checkpoint(const std::string& path);
Result<ModelConfig> infer_config_from_checkpoint(const SafetensorsSet& set, const std::string& key_prefix);
// config.json text with the original MiniMax key names (read back by ModelConfig::from_json_text).
std::string model_config_to_json(const ModelConfig& config);

// Row permutations of a fused QKV weight [3 * num_heads * head_dim, K] (any dtype, host tensors,
// dst preallocated with src's shape and dtype, both contiguous).
//   interleaved row h*3*Dh + p*Dh + d  <->  blocked row p*H*Dh + h*Dh + d   (p: 0 q, 1 k, 2 v)
Status qkv_interleaved_to_blocked(const Tensor& src, Tensor& dst, int num_heads, int head_dim);
Status qkv_blocked_to_interleaved(const Tensor& src, Tensor& dst, int num_heads, int head_dim);

}  // namespace vortex
