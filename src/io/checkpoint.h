// H3 checkpoint layouts: detection (original MiniMax, ComfyUI repack, diffusers, per-layer
// quantization), folders as checkpoints, the inspect report, validation against h3_spec, the
// per-head-interleaved -> [q|k|v] QKV reorder and the diffusers q/k/v split and SwiGLU half swap,
// loading onto a Backend, and the ModelConfig of a checkpoint (config.json or inferred from shapes).
// Tested in tests/io/checkpoint_test.cpp and tests/io/diffusers_checkpoint_test.cpp (synthetic h3-tiny
// files in every layout, fp8, malformed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "io/direct_reader.h"
#include "io/safetensors.h"
#include "model/h3_weights.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

// Which QKV row order a checkpoint carries.
//   kOriginal: raw MiniMax release, fused QKV rows per-head interleaved (head0 q, k, v, head1 ...).
//   kComfy:    ComfyUI repack, QKV rows [q_all | k_all | v_all] (ComfyUI splits the fused output into
//              contiguous thirds, so files made for it must carry the reordered layout).
//   kDiffusers: MiniMaxH3Transformer3DModel.save_pretrained: renamed keys (transformer_blocks.N,
//              attn.to_q/to_k/to_v split from [q|k|v], ff.net.0.proj with halves [value; gate], ...,
//              see diffusers_key_for), no rope.inv_freq (recomputed as the reference does).
// Detection rule when not overridden (first that applies):
//   1. diffusers keys: any "transformer_blocks.N.attn.to_q.weight" -> kDiffusers;
//   2. __metadata__["vortex.qkv_layout"] = "per_head_interleaved" | "qkv_blocked" (written by synth);
//   3. ComfyUI markers: keys prefixed "diffusion_model." / "model.diffusion_model.", any
//      "<layer>.comfy_quant" tensor, or __metadata__["_quantization_metadata"] -> kComfy;
//   4. otherwise kOriginal.
enum class CheckpointLayout : uint8_t { kAuto, kOriginal, kComfy, kDiffusers };
const char* checkpoint_layout_name(CheckpointLayout layout);  // "auto" | "original" | "comfy" | "diffusers"
Result<CheckpointLayout> checkpoint_layout_from_name(std::string_view name);

constexpr const char* kQkvLayoutMetadataKey = "vortex.qkv_layout";
constexpr const char* kQkvInterleavedValue = "per_head_interleaved";
constexpr const char* kQkvBlockedValue = "qkv_blocked";

struct LayerQuantInfo {
  std::string layer;  // canonical layer prefix, e.g. "blocks.3.mlp.fc1"
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
  size_t file = 0;  // index into CheckpointInfo::files
};

struct CheckpointInfo {
  std::string path;
  std::vector<std::string> files;
  std::string key_prefix;  // "" | "diffusion_model." | "model.diffusion_model."
  bool is_h3 = false;      // has blocks.*.attn.qkv_proj.weight (or transformer_blocks.*.attn.to_q.weight)
  CheckpointLayout layout = CheckpointLayout::kOriginal;
  std::string layout_reason;
  std::vector<CheckpointTensorInfo> tensors;
  std::vector<LayerQuantInfo> quantized_layers;
  uint64_t total_bytes = 0;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> warnings;
};

// A checkpoint path as given by the user -> the file to open. A directory (a snapshot folder) resolves
// to its single "*.safetensors.index.json", else its single "*.safetensors"; none, or more than one,
// is an error listing what the folder holds (kNotFound when nothing is loadable, kInvalidArgument when
// ambiguous). Files pass through unchanged.
Result<std::string> resolve_checkpoint_path(const std::string& path);

// Opens (file, index or folder), detects prefix, layout and quantization. Works on any safetensors file.
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
// diffusers files: to_q/to_k/to_v rows are concatenated to [q|k|v], ff.net.0.proj halves swapped back
// to [gate; value], rope.inv_freq computed as MiniMaxH3RotaryPosEmbed does. Their dtypes follow the
// torch_dtype of save_pretrained, so a tensor whose dtype differs from h3_spec is converted when that
// is safe: BF16 -> F32 widening (exact), F32 -> BF16 round-to-nearest-even for tensors the model reads
// as BF16 anyway; each conversion is summarised in `notes` (when given). Other dtypes are refused.
// `deferred` (optional): weights left in the files for streaming from disk (docs/memory.md "Streaming from disk").
// Each spec name `wanted` accepts whose stored bytes are the loaded bytes (a plain tensor of the spec's dtype, not a
// quantized layer, not a per-head-interleaved QKV, not a diffusers file) is not uploaded: its slot holds a host view
// of the file's mapping (a placeholder for its shape and dtype, never read by the loader) and `extents` its byte
// range; a wanted name whose stored bytes differ loads as usual and is listed in `refused` with the reason.
struct DeferredWeights {
  std::function<bool(const std::string&)> wanted;
  std::map<std::string, FileExtent> extents;
  std::vector<std::string> refused;
};
// `hooks` (optional): how the weights are read and who hears of each. Weights stored as the model reads them load with
// direct reads (io/direct_upload.h: aligned O_DIRECT reads into page-locked staging, copied on the copy engine) where
// the filesystem allows O_DIRECT; the others (a tmpfs file, per-head-interleaved QKV rows, quantized layers, diffusers
// files, `direct_reads` false) through the file's mapping.
struct CheckpointLoadHooks {
  bool direct_reads = true;
  // After each spec tensor present in the file is in place, in spec order (blocks ascending): its name, the bytes
  // placed so far and the bytes to place (weights left in the files count as placed, with no bytes). When it runs
  // for the last tensor of a block (or of the model), the bytes of that tensor and of every earlier one are on the
  // device. A non-OK status stops the load and is returned (a cancel, the caller's error).
  std::function<Status(const std::string& name, uint64_t done, uint64_t total)> loaded;
  // Weights read with direct reads are checked for NaN/Inf as they pass through host memory (kFormat naming the
  // tensor and element, as check_weights_finite does); their names go to `scanned`, so no second pass reads them.
  bool scan_finite = false;
  std::set<std::string> scanned;
  // Out: the weights placed so far, set by load_checkpoint before the first `loaded` call and valid until it returns
  // (a loader on another thread publishes each block from it as it lands: engine/load_overlap.h).
  const H3Weights* placed = nullptr;
  // Out: weight bytes read with direct reads and through the mapping; why some went through the mapping ("" if none).
  uint64_t direct_bytes = 0;
  uint64_t mapped_bytes = 0;
  std::string mapped_reason;
};
Result<H3Weights> load_checkpoint(const std::string& path, const ModelConfig& config, Backend& backend,
                                  CheckpointLayout layout_override = CheckpointLayout::kAuto,
                                  std::vector<std::string>* notes = nullptr, DeferredWeights* deferred = nullptr,
                                  CheckpointLoadHooks* hooks = nullptr);
// One line on how a load read its weights, from the hooks' counts and its seconds: "resident weights: 17.2 GB with
// direct reads in 15.1 s (1.14 GB/s)[; 0.3 GB through the file mapping: <reason>]".
std::string describe_checkpoint_load(const CheckpointLoadHooks& hooks, double seconds);
// Where each spec weight of `config` that `wanted` accepts lies in the checkpoint's files, without loading anything;
// kUnsupported naming a weight whose stored bytes are not the loaded bytes (another dtype or shape, a quantized
// layer, per-head-interleaved QKV rows, a diffusers file), kFormat for a missing one.
Result<std::map<std::string, FileExtent>> checkpoint_extents(const std::string& path, const ModelConfig& config,
                                                             const std::function<bool(const std::string&)>& wanted);

// The config of a checkpoint: `config.json` in its folder (the folder itself when `path` is one), else
// inferred from tensor shapes. Each dimension is inferred from every tensor that carries it (majority),
// so one malformed tensor cannot redefine the config and is the one the loader then names.
Result<ModelConfig> config_for_checkpoint(const std::string& path);
// kUnsupported when `path` is (or is inside) the release's Ref2VA transformer: a `transformer_ref/` folder, or the
// transformer/ of a partition whose model_index.json says `_minimax_h3.partition: ref2va`. It runs requests with
// references only (engine/references.h); the message names the FL2VA transformer that runs text-to-video.
Status refuse_reference_transformer(const std::string& path);
Result<ModelConfig> infer_config_from_checkpoint(const SafetensorsSet& set, const std::string& key_prefix,
                                                 CheckpointLayout layout = CheckpointLayout::kOriginal);
// config.json text with the original MiniMax key names (read back by ModelConfig::from_json_text).
std::string model_config_to_json(const ModelConfig& config);
// config.json text as diffusers' MiniMaxH3Transformer3DModel writes it (_class_name, diffusers keys).
std::string model_config_to_diffusers_json(const ModelConfig& config);

// The diffusers key of an original key (diffusers' convert_minimax_h3_transformer_checkpoint_to_diffusers):
// "blocks." -> "transformer_blocks." at the start, then token_refiner.blocks -> refiner_blocks,
// time_embedder.proj_in/out -> linear_1/2, video_patch_proj -> proj_in, audio_patch_proj -> audio_proj_in,
// condition_proj -> context_embedder, final_layer.{norm, adaln_proj.linear, video_out, audio_out} ->
// norm_out.norm, norm_out.linear, proj_out, audio_proj_out, attn.{q_norm, k_norm, out_proj} ->
// attn.{norm_q, norm_k, to_out.0}, mlp.{fc1, fc2} -> ff.net.{0.proj, 2}. A fused ".attn.qkv_proj.weight"
// maps to its ".attn.to_q.weight"; diffusers_qkv_keys gives all three.
std::string diffusers_key_for(const std::string& original);
std::vector<std::string> diffusers_qkv_keys(const std::string& original_qkv_weight);  // to_q, to_k, to_v

// Row permutations of a fused QKV weight [3 * num_heads * head_dim, K] (any dtype, host tensors,
// dst preallocated with src's shape and dtype, both contiguous).
//   interleaved row h*3*Dh + p*Dh + d  <->  blocked row p*H*Dh + h*Dh + d   (p: 0 q, 1 k, 2 v)
Status qkv_interleaved_to_blocked(const Tensor& src, Tensor& dst, int num_heads, int head_dim);
Status qkv_blocked_to_interleaved(const Tensor& src, Tensor& dst, int num_heads, int head_dim);

}  // namespace vortex
