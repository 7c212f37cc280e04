// H3 checkpoint layouts, inspection, validation and loading (see checkpoint.h for the detection
// rule). Names, shapes and dtypes come from model/h3_spec; quantization markers follow ComfyUI
// (ComfyUI's comfy_quant layout); the diffusers names follow diffusers 0.42.1
// convert_minimax_h3_transformer_checkpoint_to_diffusers.
// Tested in tests/io/checkpoint_test.cpp and tests/io/diffusers_checkpoint_test.cpp.
#include "io/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config_json.h"
#include "io/direct_upload.h"
#include "io/quantized_layers.h"
#include "model/h3_spec.h"
#include "vortex/dtype.h"

namespace vortex {

const char* checkpoint_layout_name(CheckpointLayout layout) {
  switch (layout) {
    case CheckpointLayout::kAuto:
      return "auto";
    case CheckpointLayout::kOriginal:
      return "original";
    case CheckpointLayout::kComfy:
      return "comfy";
    case CheckpointLayout::kDiffusers:
      return "diffusers";
  }
  return "unknown";
}

Result<CheckpointLayout> checkpoint_layout_from_name(std::string_view name) {
  if (name == "auto") return CheckpointLayout::kAuto;
  if (name == "original") return CheckpointLayout::kOriginal;
  if (name == "comfy") return CheckpointLayout::kComfy;
  if (name == "diffusers") return CheckpointLayout::kDiffusers;
  return invalid_argument("unknown checkpoint layout '" + std::string(name) +
                          "': use auto, original, comfy or diffusers");
}

namespace {

// (original, diffusers) renames in the order diffusers applies them; `at_start` ones are top-level modules.
struct KeyRename {
  const char* original;
  const char* diffusers;
  bool at_start;
};
constexpr KeyRename kDiffusersRenames[] = {
    {"token_refiner.blocks.", "token_refiner.refiner_blocks.", false},
    {"time_embedder.proj_in.", "time_embedder.linear_1.", false},
    {"time_embedder.proj_out.", "time_embedder.linear_2.", false},
    {"video_patch_proj.", "proj_in.", true},
    {"audio_patch_proj.", "audio_proj_in.", true},
    {"condition_proj.", "context_embedder.", true},
    {"final_layer.norm.", "norm_out.norm.", true},
    {"final_layer.adaln_proj.linear.", "norm_out.linear.", true},
    {"final_layer.video_out.", "proj_out.", true},
    {"final_layer.audio_out.", "audio_proj_out.", true},
    {".attn.q_norm.", ".attn.norm_q.", false},
    {".attn.k_norm.", ".attn.norm_k.", false},
    {".attn.out_proj.", ".attn.to_out.0.", false},
    {".mlp.fc1.", ".ff.net.0.proj.", false},
    {".mlp.fc2.", ".ff.net.2.", false},
};

std::string replace_once(std::string s, std::string_view from, std::string_view to, bool at_start) {
  const size_t at = at_start ? (s.compare(0, from.size(), from) == 0 ? 0 : std::string::npos) : s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

std::string diffusers_key_for(const std::string& original) {
  std::string k = replace_once(original, "blocks.", "transformer_blocks.", true);
  for (const KeyRename& r : kDiffusersRenames) k = replace_once(k, r.original, r.diffusers, r.at_start);
  return replace_once(k, ".attn.qkv_proj.weight", ".attn.to_q.weight", false);
}

std::vector<std::string> diffusers_qkv_keys(const std::string& original_qkv_weight) {
  const std::string q = diffusers_key_for(original_qkv_weight);
  const std::string stem = q.substr(0, q.size() - std::strlen("to_q.weight"));
  return {q, stem + "to_k.weight", stem + "to_v.weight"};
}

Result<std::string> resolve_checkpoint_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  std::vector<std::string> indexes, files, other;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 23 && name.compare(name.size() - 23, 23, ".safetensors.index.json") == 0) indexes.push_back(name);
    else if (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0) files.push_back(name);
    else other.push_back(name);
  }
  if (ec) return io_error(path + ": cannot list the folder (" + ec.message() + ")");
  std::sort(indexes.begin(), indexes.end());
  std::sort(files.begin(), files.end());
  std::sort(other.begin(), other.end());
  auto listed = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 12; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 12) out += ", ... (" + std::to_string(v.size() - 12) + " more)";
    return v.empty() ? std::string("nothing") : out;
  };
  const std::string dir = path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
  if (indexes.size() == 1) return dir + "/" + indexes[0];
  if (indexes.size() > 1)
    return invalid_argument("checkpoint folder " + dir + " holds " + std::to_string(indexes.size()) +
                            " shard indexes (" + listed(indexes) + "): pass the one to load as --checkpoint FILE");
  if (files.size() == 1) return dir + "/" + files[0];
  if (files.size() > 1)
    return invalid_argument("checkpoint folder " + dir + " holds " + std::to_string(files.size()) +
                            " .safetensors files (" + listed(files) +
                            ") and no *.safetensors.index.json naming the shards: pass one file as --checkpoint FILE");
  std::string hint;
  if (fs::is_directory(dir + "/transformer", ec)) hint = " (a diffusers pipeline folder? pass " + dir + "/transformer)";
  return not_found("checkpoint folder " + dir +
                   " holds no *.safetensors or *.safetensors.index.json; found: " + listed(other) + hint);
}

namespace {

using nlohmann::json;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view x) {
  return s.size() >= x.size() && s.substr(s.size() - x.size()) == x;
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The ComfyUI prefix carried by (nearly) every key, or "".
std::string detect_prefix(const std::vector<std::string>& names) {
  for (const char* prefix : {"model.diffusion_model.", "diffusion_model."}) {
    size_t n = 0;
    for (const std::string& name : names) n += starts_with(name, prefix) ? 1 : 0;
    if (n > 0 && n * 2 >= names.size()) return prefix;
  }
  return "";
}

Result<QuantFormat> quant_format_from_name(const std::string& name) {
  if (name == "float8_e4m3fn") return QuantFormat::kFp8Scaled;
  if (name == "nvfp4") return QuantFormat::kNvfp4;
  return unsupported("quantization format '" + name + "' is not supported (Vortex reads float8_e4m3fn and nvfp4)");
}

std::string format_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1ull << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

struct Opened {
  SafetensorsSet set;
  CheckpointInfo info;
};

bool is_diffusers_qkv_name(std::string_view name) {
  return starts_with(name, "transformer_blocks.") && ends_with(name, ".attn.to_q.weight");
}

Result<Opened> open_and_inspect(const std::string& given_path, CheckpointLayout layout_override) {
  VORTEX_ASSIGN_OR_RETURN(const std::string path, resolve_checkpoint_path(given_path));
  VORTEX_ASSIGN_OR_RETURN(SafetensorsSet set, SafetensorsSet::open(path));
  CheckpointInfo info;
  info.path = path;
  for (const SafetensorsFile& f : set.files()) {
    info.files.push_back(f.path());
    for (const std::string& w : f.header().warnings) info.warnings.push_back(f.path() + ": " + w);
  }
  info.metadata = set.metadata();
  info.key_prefix = detect_prefix(set.names());
  for (const std::string& name : set.names()) {
    const SafetensorsSet::Ref* ref = set.find(name);
    const SafetensorsEntry& e = set.entry(*ref);
    CheckpointTensorInfo t;
    t.name = name;
    t.canonical = starts_with(name, info.key_prefix) ? name.substr(info.key_prefix.size()) : name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.bytes = e.bytes();
    t.file = ref->file;
    info.total_bytes += t.bytes;
    if (is_qkv_weight_name(t.canonical) || is_diffusers_qkv_name(t.canonical)) info.is_h3 = true;
    info.tensors.push_back(std::move(t));
  }
  const bool diffusers_keys = std::any_of(info.tensors.begin(), info.tensors.end(), [](const CheckpointTensorInfo& t) {
    return is_diffusers_qkv_name(t.canonical);
  });

  // Quantization: <layer>.comfy_quant tensors, then __metadata__._quantization_metadata, then legacy
  // scaled fp8 (F8_E4M3 weight + weight_scale, no marker).
  std::map<std::string, LayerQuantInfo> quant;
  for (const CheckpointTensorInfo& t : info.tensors) {
    if (!ends_with(t.canonical, ".comfy_quant")) continue;
    LayerQuantInfo q;
    q.layer = t.canonical.substr(0, t.canonical.size() - std::strlen(".comfy_quant"));
    q.source = "comfy_quant";
    if (t.dtype != DType::kU8 || t.shape.size() != 1)
      return format_error(path + ": " + t.name + " must be a 1-D U8 tensor of JSON bytes, got " +
                          shape_to_string(t.shape) + " " + dtype_name(t.dtype));
    VORTEX_ASSIGN_OR_RETURN(Tensor bytes, set.tensor(t.name));
    std::string text(static_cast<const char*>(bytes.raw_data()), bytes.nbytes());
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("format") || !j["format"].is_string())
      return format_error(path + ": " + t.name + " must hold a JSON object with a string \"format\", got '" +
                          text.substr(0, 200) + "'");
    q.format_name = j["format"].get<std::string>();
    quant[q.layer] = q;
  }
  if (auto it = info.metadata.find("_quantization_metadata"); it != info.metadata.end()) {
    json j = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("layers") || !j["layers"].is_object())
      return format_error(path + ": __metadata__._quantization_metadata must be JSON {\"layers\": {...}}");
    for (auto l = j["layers"].begin(); l != j["layers"].end(); ++l) {
      if (!l.value().is_object() || !l.value().contains("format") || !l.value()["format"].is_string())
        return format_error(path + ": _quantization_metadata layer '" + l.key() + "' has no string \"format\"");
      LayerQuantInfo q;
      q.layer = l.key();
      for (const char* p : {"model.diffusion_model.", "diffusion_model."})
        if (starts_with(q.layer, p)) q.layer = q.layer.substr(std::strlen(p));
      q.format_name = l.value()["format"].get<std::string>();
      q.source = "_quantization_metadata";
      quant.emplace(q.layer, q);  // a comfy_quant tensor wins over the metadata entry
    }
  }
  std::set<std::string> canon;
  for (const CheckpointTensorInfo& t : info.tensors) canon.insert(t.canonical);
  for (const CheckpointTensorInfo& t : info.tensors) {
    if (!ends_with(t.canonical, ".weight") || t.dtype != DType::kF8E4M3) continue;
    std::string layer = t.canonical.substr(0, t.canonical.size() - 7);
    if (quant.count(layer) == 0 && canon.count(layer + ".weight_scale"))
      quant[layer] =
          LayerQuantInfo{layer, QuantFormat::kFp8Scaled, "float8_e4m3fn", "dtype (legacy scaled fp8)", false};
  }
  for (auto& [layer, q] : quant) {
    Result<QuantFormat> f = quant_format_from_name(q.format_name);
    q.format = f.ok() ? *f : QuantFormat::kNone;
    if (!f.ok()) info.warnings.push_back("layer " + layer + ": " + f.status().message());
    q.has_input_scale = canon.count(layer + ".input_scale") > 0;
    info.quantized_layers.push_back(q);
  }

  // Layout (rule in checkpoint.h).
  if (layout_override != CheckpointLayout::kAuto) {
    info.layout = layout_override;
    info.layout_reason = "set explicitly";
  } else if (diffusers_keys) {
    info.layout = CheckpointLayout::kDiffusers;
    info.layout_reason = "diffusers keys (transformer_blocks.N.attn.to_q.weight)";
  } else if (auto it = info.metadata.find(kQkvLayoutMetadataKey); it != info.metadata.end()) {
    if (it->second == kQkvInterleavedValue) info.layout = CheckpointLayout::kOriginal;
    else if (it->second == kQkvBlockedValue) info.layout = CheckpointLayout::kComfy;
    else
      return format_error(path + ": __metadata__." + kQkvLayoutMetadataKey + " is '" + it->second + "'; expected '" +
                          kQkvInterleavedValue + "' or '" + kQkvBlockedValue + "'");
    info.layout_reason = std::string("__metadata__.") + kQkvLayoutMetadataKey + " = " + it->second;
  } else if (!info.key_prefix.empty()) {
    info.layout = CheckpointLayout::kComfy;
    info.layout_reason = "keys carry the ComfyUI prefix '" + info.key_prefix + "'";
  } else if (std::any_of(quant.begin(), quant.end(), [](const auto& kv) {
               return kv.second.source == "comfy_quant" || kv.second.source == "_quantization_metadata";
             })) {
    info.layout = CheckpointLayout::kComfy;
    info.layout_reason = "ComfyUI quantization markers (comfy_quant / _quantization_metadata) present";
  } else {
    info.layout = CheckpointLayout::kOriginal;
    info.layout_reason = "no ComfyUI markers: assuming the original MiniMax release (override with --layout)";
  }
  return Opened{std::move(set), std::move(info)};
}

}  // namespace

Result<CheckpointInfo> inspect_checkpoint(const std::string& path, CheckpointLayout layout_override) {
  VORTEX_ASSIGN_OR_RETURN(Opened o, open_and_inspect(path, layout_override));
  return std::move(o.info);
}

std::string checkpoint_report_text(const CheckpointInfo& info) {
  std::ostringstream os;
  os << "checkpoint: " << info.path << " (" << info.files.size() << " file" << (info.files.size() == 1 ? "" : "s")
     << ")\n";
  os << "tensors: " << info.tensors.size() << ", " << info.total_bytes << " bytes (" << format_bytes(info.total_bytes)
     << ")\n";
  os << "key prefix: " << (info.key_prefix.empty() ? "(none)" : info.key_prefix) << "\n";
  if (info.is_h3) {
    const char* qkv = info.layout == CheckpointLayout::kOriginal    ? " (QKV per-head interleaved)"
                      : info.layout == CheckpointLayout::kDiffusers ? " (to_q/to_k/to_v, SwiGLU [value; gate])"
                                                                    : " (QKV [q|k|v])";
    os << "layout: " << checkpoint_layout_name(info.layout) << qkv << " - " << info.layout_reason << "\n";
  } else {
    os << "layout: not an H3 transformer checkpoint (no blocks.*.attn.qkv_proj.weight or "
          "transformer_blocks.*.attn.to_q.weight)\n";
  }
  std::map<std::string, int> per_format;
  for (const LayerQuantInfo& q : info.quantized_layers) per_format[q.format_name]++;
  os << "quantized layers: " << info.quantized_layers.size();
  for (const auto& [f, n] : per_format) os << ", " << f << " x" << n;
  os << "\n";
  for (const auto& [k, v] : info.metadata)
    os << "metadata: " << k << " = " << (v.size() > 120 ? v.substr(0, 120) + "..." : v) << "\n";
  for (const std::string& w : info.warnings) os << "warning: " << w << "\n";
  std::map<std::string, const LayerQuantInfo*> qmap;
  for (const LayerQuantInfo& q : info.quantized_layers) qmap[q.layer] = &q;
  for (const CheckpointTensorInfo& t : info.tensors) {
    char line[512];
    std::snprintf(line, sizeof line, "  %-56s %-8s %-20s %14llu", t.name.c_str(), dtype_name(t.dtype),
                  shape_to_string(t.shape).c_str(), static_cast<unsigned long long>(t.bytes));
    os << line;
    size_t dot = t.canonical.find_last_of('.');
    if (dot != std::string::npos) {
      auto it = qmap.find(t.canonical.substr(0, dot));
      if (it != qmap.end()) os << "  [" << it->second->format_name << "]";
    }
    if (info.files.size() > 1)
      os << "  (" << info.files[t.file].substr(info.files[t.file].find_last_of('/') + 1) << ")";
    os << "\n";
  }
  return os.str();
}

std::string checkpoint_report_json(const CheckpointInfo& info) {
  nlohmann::ordered_json j;
  j["path"] = info.path;
  j["files"] = info.files;
  j["tensor_count"] = info.tensors.size();
  j["total_bytes"] = info.total_bytes;
  j["key_prefix"] = info.key_prefix;
  j["is_h3"] = info.is_h3;
  j["layout"] = checkpoint_layout_name(info.layout);
  j["layout_reason"] = info.layout_reason;
  j["metadata"] = info.metadata;
  j["warnings"] = info.warnings;
  j["quantized_layers"] = nlohmann::ordered_json::array();
  for (const LayerQuantInfo& q : info.quantized_layers)
    j["quantized_layers"].push_back(
        {{"layer", q.layer}, {"format", q.format_name}, {"source", q.source}, {"input_scale", q.has_input_scale}});
  j["tensors"] = nlohmann::ordered_json::array();
  for (const CheckpointTensorInfo& t : info.tensors)
    j["tensors"].push_back({{"name", t.name},
                            {"dtype", dtype_name(t.dtype)},
                            {"shape", t.shape},
                            {"bytes", t.bytes},
                            {"file", info.files[t.file]}});
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// ---- QKV reorder ------------------------------------------------------------------------------

namespace {

Status qkv_permute(const Tensor& src, Tensor& dst, int num_heads, int head_dim, bool to_blocked) {
  const int64_t rows = 3LL * num_heads * head_dim;
  if (src.ndim() < 1 || src.dim(0) != rows || dst.shape() != src.shape() || dst.dtype() != src.dtype())
    return invalid_argument("qkv reorder: expected src/dst [" + std::to_string(rows) + ", K] of one dtype, got " +
                            src.describe() + " and " + dst.describe());
  if (!src.is_contiguous() || !dst.is_contiguous() || src.device() != Device::kCpu || dst.device() != Device::kCpu)
    return invalid_argument("qkv reorder: src and dst must be contiguous host tensors");
  const size_t row_bytes = rows == 0 ? 0 : src.nbytes() / static_cast<size_t>(rows);
  const char* s = static_cast<const char*>(src.raw_data());
  char* d = static_cast<char*>(dst.raw_data());
  const int64_t inner = static_cast<int64_t>(num_heads) * head_dim;
  for (int h = 0; h < num_heads; ++h)
    for (int p = 0; p < 3; ++p)
      for (int e = 0; e < head_dim; ++e) {
        const int64_t interleaved = (static_cast<int64_t>(h) * 3 + p) * head_dim + e;
        const int64_t blocked = p * inner + static_cast<int64_t>(h) * head_dim + e;
        const int64_t from = to_blocked ? interleaved : blocked;
        const int64_t to = to_blocked ? blocked : interleaved;
        std::memcpy(d + static_cast<size_t>(to) * row_bytes, s + static_cast<size_t>(from) * row_bytes, row_bytes);
      }
  return Status::Ok();
}

}  // namespace

Status qkv_interleaved_to_blocked(const Tensor& src, Tensor& dst, int num_heads, int head_dim) {
  return qkv_permute(src, dst, num_heads, head_dim, true);
}
Status qkv_blocked_to_interleaved(const Tensor& src, Tensor& dst, int num_heads, int head_dim) {
  return qkv_permute(src, dst, num_heads, head_dim, false);
}

// ---- loading ----------------------------------------------------------------------------------

namespace {

std::string list_some(const std::vector<std::string>& items, size_t max_items = 12) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > max_items) out += ", ... (" + std::to_string(items.size() - max_items) + " more)";
  return out;
}

std::string mismatch_error(const std::string& path, const ModelConfig& config, const std::vector<std::string>& missing,
                           const std::vector<std::string>& unexpected, const std::vector<std::string>& mismatched) {
  std::string msg = path + " does not match the '" + config.name + "' H3 config (" + std::to_string(config.num_layers) +
                    " blocks, hidden " + std::to_string(config.hidden) + ")";
  if (!missing.empty()) msg += "; missing " + std::to_string(missing.size()) + ": " + list_some(missing);
  if (!unexpected.empty()) msg += "; unexpected " + std::to_string(unexpected.size()) + ": " + list_some(unexpected);
  if (!mismatched.empty())
    msg += "; wrong shape/dtype/values " + std::to_string(mismatched.size()) + ": " + list_some(mismatched, 6);
  return msg + ". Check --config (or the config.json next to the checkpoint)";
}

// The dtype conversions a diffusers load accepts (checkpoint.h): exact widening, or RNE narrowing of a
// tensor the model reads as BF16.
bool diffusers_dtype_convertible(DType from, DType to) {
  return (from == DType::kBF16 && to == DType::kF32) || (from == DType::kF32 && to == DType::kBF16);
}

// src converted to `to` (host, contiguous); `inexact` counts the values the rounding changed.
Tensor convert_dtype_host(const Tensor& src, DType to, int64_t& inexact) {
  Tensor out = Tensor::empty(src.shape(), to);
  const int64_t n = src.numel();
  if (src.dtype() == DType::kBF16) {
    const uint16_t* a = static_cast<const uint16_t*>(src.raw_data());
    float* b = out.data<float>();
    for (int64_t i = 0; i < n; ++i) b[i] = f32_from_bf16_bits(a[i]);
  } else {
    const float* a = static_cast<const float*>(src.raw_data());
    uint16_t* b = static_cast<uint16_t*>(out.raw_data());
    for (int64_t i = 0; i < n; ++i) {
      b[i] = bf16_bits_from_f32(a[i]);
      const float back = f32_from_bf16_bits(b[i]);
      if (std::memcmp(&back, &a[i], 4) != 0) ++inexact;
    }
  }
  return out;
}

// diffusers layout (checkpoint.h): every spec tensor comes from one renamed key, QKV from three
// (to_q, to_k, to_v rows = the [q|k|v] thirds), fc1 from ff.net.0.proj with its halves swapped.
Result<H3Weights> load_diffusers(const std::string& path, const Opened& o, const ModelConfig& config, Backend& backend,
                                 std::vector<std::string>* notes) {
  const SafetensorsSet& set = o.set;
  const CheckpointInfo& info = o.info;
  const std::string& prefix = info.key_prefix;
  if (!info.quantized_layers.empty())
    return unsupported(path + ": quantized layers in a diffusers-layout checkpoint (" +
                       info.quantized_layers.front().layer +
                       ", ...): Vortex reads quantized layers in the original or ComfyUI layout only; load the BF16 "
                       "diffusers folder or a quantized original/ComfyUI file");
  H3Weights w = make_empty_h3_weights(config);
  const std::vector<TensorSpec> specs = h3_tensor_specs(config);
  auto slots = h3_tensor_slots(w);
  auto keys_of = [](const TensorSpec& spec) {
    return is_qkv_weight_name(spec.name) ? diffusers_qkv_keys(spec.name)
                                         : std::vector<std::string>{diffusers_key_for(spec.name)};
  };
  std::set<std::string> consumed;
  std::vector<std::string> missing, mismatched, widened, narrowed;
  for (const TensorSpec& spec : specs) {
    const std::vector<std::string> keys = keys_of(spec);
    Shape want = spec.shape;
    if (keys.size() == 3) want[0] /= 3;  // each of to_q / to_k / to_v holds one third of the rows
    for (const std::string& key : keys) {
      const SafetensorsSet::Ref* r = set.find(prefix + key);
      if (!r) {
        if (spec.init != SynthInit::kRopeInvFreq) missing.push_back(key);  // diffusers recomputes inv_freq
        continue;
      }
      consumed.insert(key);
      const SafetensorsEntry& e = set.entry(*r);
      if (e.shape != want || (e.dtype != spec.dtype && !diffusers_dtype_convertible(e.dtype, spec.dtype)))
        mismatched.push_back(key + ": expected " + shape_to_string(want) + " " + dtype_name(spec.dtype) + ", got " +
                             shape_to_string(e.shape) + " " + dtype_name(e.dtype));
    }
  }
  std::vector<std::string> unexpected;
  for (const CheckpointTensorInfo& t : info.tensors) {
    if (!prefix.empty() && !starts_with(t.name, prefix)) continue;
    if (!consumed.count(t.canonical)) unexpected.push_back(t.name);
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty())
    return format_error(mismatch_error(path, config, missing, unexpected, mismatched));

  int64_t inexact = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    const std::vector<std::string> keys = keys_of(spec);
    Tensor host = Tensor::empty(spec.shape, spec.dtype);
    if (spec.init == SynthInit::kRopeInvFreq && !set.find(prefix + keys[0])) {
      VORTEX_RETURN_IF_ERROR(fill_spec_host(spec, config, 0, host));  // the reference's own computation
      VORTEX_ASSIGN_OR_RETURN(*slots[i].second, backend.upload(host));
      continue;
    }
    const size_t part_bytes = host.nbytes() / keys.size();
    for (size_t p = 0; p < keys.size(); ++p) {
      VORTEX_ASSIGN_OR_RETURN(Tensor part, set.tensor(prefix + keys[p]));
      if (part.dtype() != spec.dtype) {
        (spec.dtype == DType::kF32 ? widened : narrowed).push_back(keys[p]);
        part = convert_dtype_host(part, spec.dtype, inexact);
      }
      std::memcpy(static_cast<char*>(host.raw_data()) + p * part_bytes, part.raw_data(), part_bytes);
    }
    if (ends_with(spec.name, ".mlp.fc1.weight")) {
      // diffusers' SwiGLU reads [value; gate]; H3Weights keeps the release's [gate; value].
      Tensor swapped = Tensor::empty(spec.shape, spec.dtype);
      const size_t half = host.nbytes() / 2;
      const char* src = static_cast<const char*>(host.raw_data());
      char* dst = static_cast<char*>(swapped.raw_data());
      std::memcpy(dst, src + half, half);
      std::memcpy(dst + half, src, half);
      host = std::move(swapped);
    }
    VORTEX_ASSIGN_OR_RETURN(*slots[i].second, backend.upload(host));
  }
  if (notes) {
    if (!widened.empty())
      notes->push_back(std::to_string(widened.size()) +
                       " BF16 tensors widened to the F32 the model keeps (exact): " + list_some(widened, 4));
    if (!narrowed.empty())
      notes->push_back(std::to_string(narrowed.size()) + " F32 tensors rounded to the BF16 the model reads " +
                       "(round to nearest even; " + std::to_string(inexact) +
                       " values changed): " + list_some(narrowed, 4));
  }
  return w;
}

}  // namespace

Result<H3Weights> load_checkpoint(const std::string& path, const ModelConfig& config, Backend& backend,
                                  CheckpointLayout layout_override, std::vector<std::string>* notes,
                                  DeferredWeights* deferred, CheckpointLoadHooks* hooks) {
  CheckpointLoadHooks no_hooks;
  if (hooks == nullptr) hooks = &no_hooks;
  VORTEX_RETURN_IF_ERROR(config.validate());
  VORTEX_ASSIGN_OR_RETURN(Opened o, open_and_inspect(path, layout_override));
  if (o.info.layout == CheckpointLayout::kDiffusers) {
    if (deferred != nullptr && deferred->wanted) {
      for (const TensorSpec& spec : h3_tensor_specs(config))
        if (deferred->wanted(spec.name))
          deferred->refused.push_back(spec.name + ": a diffusers file stores it renamed and split");
    }
    return load_diffusers(path, o, config, backend, notes);
  }
  const SafetensorsSet& set = o.set;
  const CheckpointInfo& info = o.info;
  const std::string& prefix = info.key_prefix;

  std::map<std::string, const LayerQuantInfo*> quant;
  for (const LayerQuantInfo& q : info.quantized_layers) quant[q.layer] = &q;

  H3Weights w = make_empty_h3_weights(config);
  hooks->placed = &w;
  std::map<std::string, LinearWeight*> linears;
  for (auto& [name, lw] : h3_linear_slots(w)) linears[name] = lw;
  std::vector<TensorSpec> specs = h3_tensor_specs(config);
  auto slots = h3_tensor_slots(w);

  std::set<std::string> consumed;
  std::vector<std::string> missing, mismatched, unsupported_layers;
  auto entry_of = [&](const std::string& canonical) -> const SafetensorsEntry* {
    const SafetensorsSet::Ref* r = set.find(prefix + canonical);
    return r ? &set.entry(*r) : nullptr;
  };
  auto describe_entry = [](const SafetensorsEntry& e) { return shape_to_string(e.shape) + " " + dtype_name(e.dtype); };

  const bool interleaved_file = info.layout == CheckpointLayout::kOriginal;
  const QuantTensorLookup lookup = quant_lookup_in(set);
  std::map<std::string, std::string> quant_metadata;  // layer key -> its _quantization_metadata object
  if (auto it = info.metadata.find("_quantization_metadata"); it != info.metadata.end()) {
    VORTEX_ASSIGN_OR_RETURN(quant_metadata, parse_quantization_metadata(it->second));
  }
  std::map<std::string, LinearWeight> quantized_host;  // validated host views, QKV already in [q|k|v] order
  // Pass 1: validate everything, so one error lists every problem.
  for (const TensorSpec& spec : specs) {
    const SafetensorsEntry* e = entry_of(spec.name);
    if (!e) {
      if (spec.init != SynthInit::kRopeInvFreq) missing.push_back(spec.name);  // inv_freq is optional
      continue;
    }
    consumed.insert(spec.name);
    const std::string layer = spec.name.substr(0, spec.name.size() - (ends_with(spec.name, ".weight") ? 7 : 0));
    auto q = ends_with(spec.name, ".weight") ? quant.find(layer) : quant.end();
    if (q != quant.end()) {
      for (const char* aux : {".comfy_quant", ".weight_scale", ".weight_scale_2", ".input_scale", ".pre_quant_scale"})
        if (entry_of(layer + aux)) consumed.insert(layer + aux);
      const LayerQuantInfo& qi = *q->second;
      if (linears.count(layer) == 0 || qi.format == QuantFormat::kNone) {
        unsupported_layers.push_back(layer + " (" + qi.format_name + ")");
        continue;
      }
      // One validating reader for quantized layers (io/quantized_layers.h): dtypes, padded shapes, scales.
      std::string metadata_entry;  // layer names there may or may not carry a model prefix
      for (const std::string& key :
           {prefix + layer, layer, "diffusion_model." + layer, "model.diffusion_model." + layer})
        if (auto m = quant_metadata.find(key); m != quant_metadata.end()) {
          metadata_entry = m->second;
          break;
        }
      Result<LinearWeight> lw =
          read_quantized_linear(prefix + layer, lookup, spec.shape[0], spec.shape[1], metadata_entry);
      if (lw.ok() && interleaved_file && is_qkv_weight_name(spec.name))
        lw = permute_quantized_rows(*lw, qkv_interleaved_to_blocked_rows(config.num_heads, config.head_dim));
      if (!lw.ok()) {
        (lw.status().code() == ErrorCode::kUnsupported ? unsupported_layers : mismatched)
            .push_back(lw.status().message());
        continue;
      }
      quantized_host.emplace(layer, std::move(lw).value());
      continue;
    }
    if (e->dtype != spec.dtype || e->shape != spec.shape)
      mismatched.push_back(spec.name + ": expected " + shape_to_string(spec.shape) + " " + dtype_name(spec.dtype) +
                           ", got " + describe_entry(*e));
  }
  std::vector<std::string> unexpected;
  for (const CheckpointTensorInfo& t : info.tensors) {
    // A ComfyUI bundle may carry other models (VAE, text encoder) beside the prefixed transformer.
    if (!prefix.empty() && !starts_with(t.name, prefix)) continue;
    if (!consumed.count(t.canonical)) unexpected.push_back(t.name);
  }
  if (!unsupported_layers.empty()) {
    return unsupported(path + ": quantized layers Vortex cannot load: " + list_some(unsupported_layers) +
                       ". Vortex loads float8_e4m3fn (fp8_scaled) and nvfp4 formats on the qkv/out/fc1/fc2 GEMMs of "
                       "the blocks; use a BF16 checkpoint or requantize those layers");
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty())
    return format_error(mismatch_error(path, config, missing, unexpected, mismatched));

  // Pass 2: upload (QKV reordered on the host when the file is per-head interleaved).
  uint64_t total = 0, done = 0;
  for (const TensorSpec& spec : specs)
    if (const SafetensorsEntry* e = entry_of(spec.name);
        e && !(deferred && deferred->wanted && deferred->wanted(spec.name)))
      total += e->bytes();
  DirectUploader direct(backend);
  auto block_of = [](const std::string& name) {
    return name.rfind("blocks.", 0) == 0 ? std::atoi(name.c_str() + 7) : -1;
  };
  auto mapped = [&](uint64_t bytes, const std::string& why) {
    hooks->mapped_bytes += bytes;
    if (hooks->mapped_reason.empty()) hooks->mapped_reason = why;
  };
  // Reports a placed tensor; at a block's (or the model's) last tensor its bytes and all earlier ones are on the
  // device.
  auto placed = [&](size_t i, uint64_t bytes) -> Status {
    done += bytes;
    if (!hooks->loaded) return Status::Ok();
    const int block = block_of(specs[i].name);
    if (i + 1 == specs.size() || block_of(specs[i + 1].name) != block) VORTEX_RETURN_IF_ERROR(direct.finish());
    return hooks->loaded(specs[i].name, done, total);
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    const SafetensorsEntry* entry = entry_of(spec.name);
    if (!entry) continue;
    const std::string layer = spec.name.substr(0, spec.name.size() - (ends_with(spec.name, ".weight") ? 7 : 0));
    if (auto qh = quantized_host.find(layer); qh != quantized_host.end()) {
      if (deferred != nullptr && deferred->wanted && deferred->wanted(spec.name))
        deferred->refused.push_back(spec.name + ": a quantized layer (its scales load with it)");
      const LinearWeight& host = qh->second;
      LinearWeight& lw = *linears.at(layer);
      lw.format = host.format;
      lw.out_features = host.out_features;
      lw.in_features = host.in_features;
      VORTEX_ASSIGN_OR_RETURN(lw.weight, backend.upload(host.weight));
      VORTEX_ASSIGN_OR_RETURN(lw.weight_scale, backend.upload(host.weight_scale));
      if (host.weight_scale_2.defined()) {
        VORTEX_ASSIGN_OR_RETURN(lw.weight_scale_2, backend.upload(host.weight_scale_2));
      }
      if (host.input_scale.defined()) {
        VORTEX_ASSIGN_OR_RETURN(lw.input_scale, backend.upload(host.input_scale));
      }
      mapped(entry->bytes(), "quantized layers are read and checked through the mapping");
      VORTEX_RETURN_IF_ERROR(placed(i, entry->bytes()));
      continue;
    }
    const bool wanted = deferred != nullptr && deferred->wanted && deferred->wanted(spec.name);
    const bool interleaved_qkv = interleaved_file && is_qkv_weight_name(spec.name);
    const SafetensorsSet::Ref* r = set.find(prefix + spec.name);
    const SafetensorsFile& file = set.files()[r->file];
    const FileExtent extent{file.path(), file.header().data_offset + entry->begin, entry->bytes()};
    if (wanted && !interleaved_qkv) {
      // The stored bytes are the loaded bytes (pass 1 checked dtype and shape): left in the file.
      deferred->extents[spec.name] = extent;
      VORTEX_ASSIGN_OR_RETURN(*slots[i].second, set.tensor(prefix + spec.name));  // placeholder: never read here
      VORTEX_RETURN_IF_ERROR(placed(i, 0));
      continue;
    }
    if (wanted) deferred->refused.push_back(spec.name + ": the file stores QKV rows per-head interleaved");
    if (hooks->direct_reads && !interleaved_qkv && direct.direct(extent.path)) {
      bool scanned = false;
      VORTEX_ASSIGN_OR_RETURN(*slots[i].second, direct.load(extent, spec.shape, spec.dtype, spec.name,
                                                            hooks->scan_finite ? &scanned : nullptr));
      if (scanned) hooks->scanned.insert(spec.name);
      hooks->direct_bytes += extent.bytes;
      VORTEX_RETURN_IF_ERROR(placed(i, extent.bytes));
      continue;
    }
    mapped(extent.bytes, !hooks->direct_reads ? "direct reads are off"
                         : interleaved_qkv    ? "per-head-interleaved QKV rows are reordered on the host"
                                              : "the filesystem of " + extent.path + " refuses O_DIRECT");
    VORTEX_ASSIGN_OR_RETURN(Tensor host, set.tensor(prefix + spec.name));
    if (interleaved_qkv) {
      Tensor blocked = Tensor::empty(host.shape(), host.dtype());
      VORTEX_RETURN_IF_ERROR(qkv_interleaved_to_blocked(host, blocked, config.num_heads, config.head_dim));
      host = std::move(blocked);
    }
    VORTEX_ASSIGN_OR_RETURN(*slots[i].second, backend.upload(host));
    VORTEX_RETURN_IF_ERROR(placed(i, extent.bytes));
  }
  VORTEX_RETURN_IF_ERROR(direct.finish());
  return w;
}

std::string describe_checkpoint_load(const CheckpointLoadHooks& hooks, double seconds) {
  auto gb = [](uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f GB", static_cast<double>(b) / 1e9);
    return std::string(buf);
  };
  const uint64_t total = hooks.direct_bytes + hooks.mapped_bytes;
  char rate[64];
  std::snprintf(rate, sizeof(rate), " in %.1f s (%.2f GB/s)", seconds,
                seconds > 0 ? static_cast<double>(total) / 1e9 / seconds : 0.0);
  std::string line = "resident weights: " + gb(total) + rate + ": " + gb(hooks.direct_bytes) + " with direct reads";
  if (hooks.mapped_bytes > 0)
    line += ", " + gb(hooks.mapped_bytes) + " through the file mapping (" + hooks.mapped_reason + ")";
  return line;
}

Result<std::map<std::string, FileExtent>> checkpoint_extents(const std::string& path, const ModelConfig& config,
                                                             const std::function<bool(const std::string&)>& wanted) {
  VORTEX_ASSIGN_OR_RETURN(Opened o, open_and_inspect(path, CheckpointLayout::kAuto));
  if (o.info.layout == CheckpointLayout::kDiffusers)
    return unsupported(path + ": a diffusers file stores weights renamed and split; they cannot be read as stored");
  std::set<std::string> quantized;
  for (const LayerQuantInfo& q : o.info.quantized_layers) quantized.insert(q.layer + ".weight");
  std::map<std::string, FileExtent> out;
  for (const TensorSpec& spec : h3_tensor_specs(config)) {
    if (!wanted(spec.name)) continue;
    const SafetensorsSet::Ref* r = o.set.find(o.info.key_prefix + spec.name);
    if (r == nullptr) return format_error(path + ": no tensor " + spec.name);
    const SafetensorsEntry& e = o.set.entry(*r);
    if (quantized.count(spec.name) != 0 || e.dtype != spec.dtype || e.shape != spec.shape)
      return unsupported(path + ": " + spec.name + " is stored as " + shape_to_string(e.shape) + " " +
                         dtype_name(e.dtype) + (quantized.count(spec.name) != 0 ? " (quantized)" : "") +
                         ", not as the model reads it");
    if (o.info.layout == CheckpointLayout::kOriginal && is_qkv_weight_name(spec.name))
      return unsupported(path + ": " + spec.name + " is stored with per-head-interleaved rows");
    const SafetensorsFile& file = o.set.files()[r->file];
    out[spec.name] = FileExtent{file.path(), file.header().data_offset + e.begin, e.bytes()};
  }
  return out;
}

// ---- config -----------------------------------------------------------------------------------

std::string model_config_to_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["hidden_size"] = c.hidden;
  j["num_layers"] = c.num_layers;
  j["token_refiner_num_layers"] = c.num_refiner_layers;
  j["num_attention_heads"] = c.num_heads;
  j["attention_head_dim"] = c.head_dim;
  j["ffn_hidden_size"] = c.ffn;
  j["patch_size"] = {c.patch_t, c.patch_h, c.patch_w};
  j["latents_dim"] = c.in_channels;
  j["audio_latents_dim"] = c.audio_in_channels;
  j["text_dim"] = c.text_dim;
  j["timestep_input_dim"] = c.freq_dim;
  j["time_embed_hidden_size"] = c.time_embed_hidden;
  j["time_embed_dim"] = c.time_embed_dim;
  j["adaln_out_features"] = c.adaln_features();
  j["final_adaln_out_features"] = c.final_adaln_features();
  j["rope_inv_freq_len"] = c.rope_inv_freq_len;
  j["rope_theta"] = c.rope_theta;
  j["norm_eps"] = c.norm_eps;
  j["qk_norm_eps"] = c.qk_norm_eps;
  j["final_norm_eps"] = c.final_norm_eps;
  j["video_shift"] = c.video_shift;
  j["audio_shift"] = c.audio_shift;
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string model_config_to_diffusers_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["_class_name"] = "MiniMaxH3Transformer3DModel";
  j["_diffusers_version"] = "0.42.1";
  j["num_attention_heads"] = c.num_heads;
  j["attention_head_dim"] = c.head_dim;
  j["hidden_size"] = c.hidden;
  j["num_layers"] = c.num_layers;
  j["num_refiner_layers"] = c.num_refiner_layers;
  j["ffn_dim"] = c.ffn;
  j["in_channels"] = c.in_channels;
  j["audio_in_channels"] = c.audio_in_channels;
  j["patch_size"] = {c.patch_t, c.patch_h, c.patch_w};
  j["text_dim"] = c.text_dim;
  j["freq_dim"] = c.freq_dim;
  j["time_embed_hidden_dim"] = c.time_embed_hidden;
  j["time_embed_dim"] = c.time_embed_dim;
  j["rope_freq_dim"] = c.rope_inv_freq_len;
  j["rope_theta"] = c.rope_theta;
  j["norm_eps"] = c.norm_eps;
  j["qk_norm_eps"] = c.qk_norm_eps;
  j["final_norm_eps"] = c.final_norm_eps;
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

namespace {

// Candidate values of one config dimension; the most frequent wins (ties: the first seen), so a single
// malformed tensor is outvoted by the healthy ones and the loader's spec check names it alone.
class Votes {
 public:
  void add(int64_t v) {
    if (v <= 0) return;
    for (auto& [value, n] : counts_)
      if (value == v) {
        ++n;
        return;
      }
    counts_.emplace_back(v, 1);
  }
  bool empty() const { return counts_.empty(); }
  int best() const {
    auto it = std::max_element(counts_.begin(), counts_.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
    return static_cast<int>(it->first);
  }

 private:
  std::vector<std::pair<int64_t, int>> counts_;  // in first-seen order
};

// The original-layout key of a diffusers key (inverse of diffusers_key_for), to_q/to_k/to_v -> qkv_proj.
std::string original_key_from_diffusers(const std::string& key) {
  std::string k = replace_once(key, "transformer_blocks.", "blocks.", true);
  for (const KeyRename& r : kDiffusersRenames) k = replace_once(k, r.diffusers, r.original, r.at_start);
  for (const char* part : {".attn.to_q.weight", ".attn.to_k.weight", ".attn.to_v.weight"})
    if (ends_with(k, part)) return k.substr(0, k.size() - std::strlen(part)) + ".attn.qkv_proj.weight";
  return k;
}

}  // namespace

Result<ModelConfig> infer_config_from_checkpoint(const SafetensorsSet& set, const std::string& prefix,
                                                 CheckpointLayout layout) {
  // Shapes under their original names (a diffusers to_q counts as the fused QKV with 3x the rows).
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const std::string& full : set.names()) {
    if (!starts_with(full, prefix)) continue;
    std::string name = full.substr(prefix.size());
    Shape shape = set.entry(*set.find(full)).shape;
    if (layout == CheckpointLayout::kDiffusers) {
      const bool to_k_or_v = ends_with(name, ".attn.to_k.weight") || ends_with(name, ".attn.to_v.weight");
      if (to_k_or_v) continue;
      const bool to_q = ends_with(name, ".attn.to_q.weight");
      name = original_key_from_diffusers(name);
      if (to_q && !shape.empty()) shape[0] *= 3;
    }
    shapes.emplace_back(std::move(name), std::move(shape));
  }
  ModelConfig c = ModelConfig::h3();
  c.name = "inferred";
  int blocks = 0, refiner = 0;
  Votes hidden, head_dim, inner, ffn, video_patch, audio, text, freq, time_hidden, time_dim, rope;
  for (const auto& [name, shape] : shapes) {
    std::string_view n(name);
    auto index_after = [&](std::string_view head) -> int {
      if (!starts_with(n, head)) return -1;
      std::string_view rest = n.substr(head.size());
      size_t dot = rest.find('.');
      if (dot == 0 || dot == std::string_view::npos || dot > 6) return -1;
      int v = 0;
      for (char ch : rest.substr(0, dot)) {
        if (ch < '0' || ch > '9') return -1;
        v = v * 10 + (ch - '0');
      }
      return v;
    };
    blocks = std::max(blocks, index_after("blocks.") + 1);
    refiner = std::max(refiner, index_after("token_refiner.blocks.") + 1);
    const int64_t rows = shape.empty() ? 0 : shape[0];
    const int64_t cols = shape.size() == 2 ? shape[1] : 0;
    if (shape.size() == 1) {
      if (ends_with(n, ".norm1.weight") || ends_with(n, ".norm2.weight") || n == "token_refiner.final_norm.weight" ||
          n == "final_layer.norm.weight")
        hidden.add(rows);
      else if (ends_with(n, ".attn.q_norm.weight") || ends_with(n, ".attn.k_norm.weight")) head_dim.add(rows);
      else if (n == "time_embedder.proj_in.bias") time_hidden.add(rows);
      else if (n == "time_embedder.proj_out.bias") time_dim.add(rows);
      else if (n == "rope.inv_freq") rope.add(rows);
      continue;
    }
    if (shape.size() != 2) continue;
    if (ends_with(n, ".attn.qkv_proj.weight")) {
      if (rows % 3 == 0) inner.add(rows / 3);
      hidden.add(cols);
    } else if (ends_with(n, ".attn.out_proj.weight")) {
      hidden.add(rows);
      inner.add(cols);
    } else if (ends_with(n, ".mlp.fc1.weight")) {
      if (rows % 2 == 0) ffn.add(rows / 2);
      hidden.add(cols);
    } else if (ends_with(n, ".mlp.fc2.weight")) {
      hidden.add(rows);
      ffn.add(cols);
    } else if (n == "final_layer.adaln_proj.linear.weight") {
      if (rows % 2 == 0) hidden.add(rows / 2);
      time_dim.add(cols);
    } else if (ends_with(n, ".adaln_proj.linear.weight")) {
      if (rows % 18 == 0) hidden.add(rows / 18);
      time_dim.add(cols);
    } else if (n == "video_patch_proj.weight") {
      hidden.add(rows);
      video_patch.add(cols);
    } else if (n == "final_layer.video_out.weight") {
      video_patch.add(rows);
      hidden.add(cols);
    } else if (n == "audio_patch_proj.weight") {
      hidden.add(rows);
      audio.add(cols);
    } else if (n == "final_layer.audio_out.weight") {
      audio.add(rows);
      hidden.add(cols);
    } else if (n == "condition_proj.weight") {
      hidden.add(rows);
      text.add(cols);
    } else if (n == "time_embedder.proj_in.weight") {
      time_hidden.add(rows);
      freq.add(cols);
    } else if (n == "time_embedder.proj_out.weight") {
      time_dim.add(rows);
      time_hidden.add(cols);
    }
  }
  if (blocks == 0)
    return format_error(set.path() +
                        ": cannot infer the H3 config: no 'blocks.N.*' (or 'transformer_blocks.N.*') tensors");
  c.num_layers = blocks;
  c.num_refiner_layers = refiner;
  const std::pair<const char*, const Votes*> needed[] = {{"blocks.N.norm1.weight", &hidden},
                                                         {"blocks.N.attn.q_norm.weight", &head_dim},
                                                         {"blocks.N.attn.qkv_proj.weight", &inner},
                                                         {"blocks.N.mlp.fc1.weight", &ffn},
                                                         {"video_patch_proj.weight", &video_patch},
                                                         {"audio_patch_proj.weight", &audio},
                                                         {"condition_proj.weight", &text},
                                                         {"time_embedder.proj_in.weight", &freq},
                                                         {"time_embedder.proj_out.weight", &time_hidden},
                                                         {"time_embedder.proj_out.weight", &time_dim}};
  for (const auto& [tensor, votes] : needed)
    if (votes->empty())
      return format_error(set.path() + ": cannot infer the H3 config: no tensor like '" + prefix + tensor + "'");
  c.hidden = hidden.best();
  c.head_dim = head_dim.best();
  if (inner.best() % c.head_dim != 0)
    return format_error(set.path() + ": cannot infer heads: attention width " + std::to_string(inner.best()) +
                        " is not a multiple of head_dim " + std::to_string(c.head_dim));
  c.num_heads = inner.best() / c.head_dim;
  c.ffn = ffn.best();
  const int patch = c.patch_t * c.patch_h * c.patch_w;
  if (video_patch.best() % patch != 0)
    return format_error(set.path() + ": video_patch_proj input " + std::to_string(video_patch.best()) +
                        " is not channels x patch (1, 2, 2)");
  c.in_channels = video_patch.best() / patch;
  c.audio_in_channels = audio.best();
  c.text_dim = text.best();
  c.freq_dim = freq.best();
  c.time_embed_hidden = time_hidden.best();
  c.time_embed_dim = time_dim.best();
  c.rope_inv_freq_len = rope.empty() ? c.head_dim / 8 : rope.best();  // H3 rotates 3/4 of each head: 6L = 0.75 Dh
  VORTEX_RETURN_IF_ERROR(c.validate().with_context(set.path() + ": inferred config"));
  return c;
}

Result<ModelConfig> config_for_checkpoint(const std::string& path) {
  std::error_code ec;
  const std::string config_path = (std::filesystem::is_directory(path, ec) ? path : parent_dir(path)) + "/config.json";
  struct stat st {};
  if (::stat(config_path.c_str(), &st) == 0) {
    std::ifstream in(config_path);
    if (!in) return io_error(config_path + ": cannot read");
    std::stringstream ss;
    ss << in.rdbuf();
    Result<ModelConfig> c = ModelConfig::from_json_text(ss.str());
    if (!c.ok()) return c.status().with_context(config_path);
    return c;
  }
  VORTEX_ASSIGN_OR_RETURN(Opened o, open_and_inspect(path, CheckpointLayout::kAuto));
  return infer_config_from_checkpoint(o.set, o.info.key_prefix, o.info.layout);
}

Status refuse_reference_transformer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::absolute(fs::path(path), ec).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "transformer_ref/"
  if (!fs::is_directory(dir, ec)) dir = dir.parent_path();
  const fs::path parent = dir.parent_path();
  std::string fl2va;
  if (dir.filename() == "transformer_ref") {
    fl2va = (parent / "transformer").string() + " (diffusers layout)";
  } else {
    Result<ConfigJson> index = ConfigJson::read_file((parent / "model_index.json").string());
    if (!index.ok() || !index->has("_minimax_h3")) return Status::Ok();
    Result<ConfigJson> h3 = index->object("_minimax_h3");
    if (!h3.ok()) return Status::Ok();
    Result<std::string> partition = h3->get_string("partition", "");
    if (!partition.ok() || (*partition != "ref2va" && *partition != "Ref2VA")) return Status::Ok();
    fl2va = (parent.parent_path() / "FL2VA" / "transformer").string() + " (original layout)";
  }
  return unsupported(path +
                     " is the Ref2VA transformer (reference-to-video: a request with references, --ref FILE); "
                     "text-to-video and keyframes run on the FL2VA transformer: " +
                     fl2va);
}

}  // namespace vortex
