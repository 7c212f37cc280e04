// VAE folder reading and the synthetic tensor source (see vae_checkpoint.h).
#include "vae/vae_checkpoint.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/synthetic.h"

namespace vortex {
namespace {

float f32_from_f16_bits(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint64_t name_hash(const std::string& name) {  // FNV-1a: a stable per-tensor seed
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

Result<Tensor> read_weight_norm_conv(const VaeTensorSource& src, const std::string& base, const Shape& shape,
                                     int64_t* params) {
  auto count = [&](const Tensor& t) {
    if (params != nullptr) *params += t.numel();
  };
  auto g = src(base + ".weight_g", {shape[0], 1, 1});
  if (!g.ok() && g.status().code() == ErrorCode::kNotFound) {
    VORTEX_ASSIGN_OR_RETURN(Tensor wt, src(base + ".weight", shape));
    count(wt);
    return wt;
  }
  if (!g.ok()) return g.status();
  count(*g);
  VORTEX_ASSIGN_OR_RETURN(Tensor v, src(base + ".weight_v", shape));
  count(v);
  Tensor wt = Tensor::empty(shape, DType::kF32);
  const int64_t rows = shape[0], per = v.numel() / rows;
  for (int64_t r = 0; r < rows; ++r) {
    const float* vr = v.data<float>() + r * per;
    double ss = 0.0;
    for (int64_t i = 0; i < per; ++i) ss += static_cast<double>(vr[i]) * vr[i];
    const double scale = static_cast<double>(g->data<float>()[r]) / std::sqrt(ss);
    for (int64_t i = 0; i < per; ++i) wt.data<float>()[r * per + i] = static_cast<float>(vr[i] * scale);
  }
  return wt;
}

Status read_latent_stats(const ConfigJson& cfg, int channels, std::vector<float>& mean, std::vector<float>& std) {
  VORTEX_ASSIGN_OR_RETURN(const std::vector<double> m,
                          cfg.get_numbers("latents_mean", std::vector<double>(static_cast<size_t>(channels), 0.0)));
  VORTEX_ASSIGN_OR_RETURN(const std::vector<double> s,
                          cfg.get_numbers("latents_std", std::vector<double>(static_cast<size_t>(channels), 1.0)));
  mean.assign(m.begin(), m.end());
  std.assign(s.begin(), s.end());
  return Status::Ok();
}

Result<Tensor> to_f32_host(const Tensor& t, std::string_view name) {
  Tensor out = Tensor::empty(t.shape(), DType::kF32);
  const int64_t n = t.numel();
  if (!t.is_contiguous()) return invalid_argument(std::string(name) + ": expected a contiguous tensor");
  float* dst = out.data<float>();
  switch (t.dtype()) {
    case DType::kF32:
      std::memcpy(dst, t.raw_data(), static_cast<size_t>(n) * 4);
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f32_from_bf16_bits(static_cast<const uint16_t*>(t.raw_data())[i]);
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f32_from_f16_bits(static_cast<const uint16_t*>(t.raw_data())[i]);
      break;
    default:
      return format_error(std::string(name) + " is " + dtype_name(t.dtype()) +
                          "; a VAE tensor must be F32, BF16 or F16");
  }
  return out;
}

Tensor to_bf16_host(const Tensor& f32) {
  Tensor out = Tensor::empty(f32.shape(), DType::kBF16);
  const float* src = f32.data<float>();
  uint16_t* dst = out.data<uint16_t>();
  for (int64_t i = 0; i < f32.numel(); ++i) dst[i] = bf16_bits_from_f32(src[i]);
  return out;
}

const char* vae_layout_name(VaeLayout layout) { return layout == VaeLayout::kOriginal ? "original" : "diffusers"; }

namespace {

Result<ConfigJson> read_json_object(const std::string& path, std::string_view what, bool* missing = nullptr) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    if (missing) *missing = true;
    return not_found(std::string(what) + ": " + path + " does not exist");
  }
  Result<ConfigJson> j = ConfigJson::read_file(path);
  if (!j.ok()) return j.status().with_context(std::string(what));
  return j;
}

// A relative path inside the folder: never '..' or absolute (the folder is the unit a user points at).
Result<std::string> relative_path(const ConfigJson& cfg, const char* key, const std::string& fallback) {
  Result<std::string> value = cfg.get_string(key, fallback);
  if (!value.ok()) return value.status();
  const std::string& v = *value;
  if (v.empty() || v[0] == '/' || v.find("..") != std::string::npos)
    return format_error(cfg.label() + ": '" + key + "' must be a relative path inside the folder, got '" + v + "'");
  return v;
}

}  // namespace

Result<VaeFolder> open_vae_folder(const std::string& dir, std::string_view what, std::string_view original_class,
                                  ConfigKind kind) {
  namespace fs = std::filesystem;
  VaeFolder folder;
  folder.dir = dir;
  const std::string cfg_path = dir + "/config.json";
  bool missing = false;
  auto cfg = read_json_object(cfg_path, what, &missing);
  if (!cfg.ok() && missing) {
    std::error_code ec;
    std::string hint =
        " (pass the VAE folder itself: config.json + diffusion_pytorch_model.safetensors, or the "
        "original layout's config.json + weights)";
    if (fs::exists(dir + "/model_index.json", ec) || fs::exists(dir + "/modular_model_index.json", ec))
      hint = " (" + dir + " looks like a whole snapshot; pass its vae/ or audio_vae/ folder)";
    return not_found(std::string(what) + ": no config.json in " + dir + hint);
  }
  if (!cfg.ok()) return cfg.status();
  folder.config = std::move(*cfg);
  VORTEX_RETURN_IF_ERROR(folder.config.expect_kind(kind).with_context(std::string(what)));
  const bool original = folder.config.has("source_safetensors_path") || folder.config.class_name() == original_class;
  std::string weights;
  if (!original) {
    weights = dir + "/diffusion_pytorch_model.safetensors";
    if (!fs::exists(weights)) weights += ".index.json";
    if (!fs::exists(weights))
      return not_found(std::string(what) + ": " + dir + " has neither diffusion_pytorch_model.safetensors nor " +
                       "diffusion_pytorch_model.safetensors.index.json");
  } else {
    folder.layout = VaeLayout::kOriginal;
    // Video: weights and the model config one level down (source_path); audio: beside config.json, with the
    // constructor kwargs in metadata.json.
    const bool video = folder.config.has("source_path");
    VORTEX_ASSIGN_OR_RETURN(const std::string sub, relative_path(folder.config, "source_path", "."));
    const std::string base = video ? dir + "/" + sub : dir;
    VORTEX_ASSIGN_OR_RETURN(const std::string file,
                            relative_path(folder.config, "source_safetensors_path", "model.safetensors"));
    weights = base + "/" + file;
    if (!fs::exists(weights))
      return not_found(std::string(what) + ": " + cfg_path + " names the weights " + weights +
                       ", which does not exist (an incomplete download?)");
    if (video) {
      VORTEX_ASSIGN_OR_RETURN(folder.source_config, read_json_object(base + "/config.json", what));
    } else {
      VORTEX_ASSIGN_OR_RETURN(const std::string meta,
                              relative_path(folder.config, "source_metadata_path", "metadata.json"));
      VORTEX_ASSIGN_OR_RETURN(const ConfigJson m, read_json_object(dir + "/" + meta, what));
      VORTEX_ASSIGN_OR_RETURN(const ConfigJson metadata, m.object("metadata"));
      VORTEX_ASSIGN_OR_RETURN(folder.source_config, metadata.object("kwargs"));
    }
  }
  folder.weights_path = weights;
  VORTEX_ASSIGN_OR_RETURN(folder.weights, SafetensorsSet::open(weights));
  return folder;
}

Result<Tensor> read_vae_tensor(const VaeFolder& f, const std::string& name, const Shape& shape) {
  if (!f.weights.find(name))
    return not_found("tensor '" + name + "' is missing from " + f.weights.path() +
                     " (is this the right VAE folder, and a complete download?)");
  VORTEX_ASSIGN_OR_RETURN(Tensor t, f.weights.tensor(name));
  if (t.shape() != shape)
    return format_error("tensor '" + name + "' in " + f.weights.path() + " has shape " + shape_to_string(t.shape()) +
                        ", expected " + shape_to_string(shape) + " for this config");
  auto r = to_f32_host(t, name);
  if (!r.ok()) return r.status().with_context(f.weights.path());
  f.consumed->insert(name);
  return r;
}

VaeTensorSource folder_tensor_source(const VaeFolder& folder) {
  const VaeFolder* f = &folder;
  return [f](const std::string& name, const Shape& shape) { return read_vae_tensor(*f, name, shape); };
}

Status check_unexpected_vae_tensors(const VaeFolder& folder, const std::vector<std::string>& ignored_prefixes) {
  std::vector<std::string> unexpected;
  for (const std::string& n : folder.weights.names()) {
    if (folder.consumed->count(n)) continue;
    bool ignored = false;
    for (const std::string& p : ignored_prefixes) ignored = ignored || n.rfind(p, 0) == 0;
    if (!ignored) unexpected.push_back(n);
  }
  if (unexpected.empty()) return Status::Ok();
  std::string list;
  for (size_t i = 0; i < unexpected.size() && i < 5; ++i) list += (i ? ", '" : "'") + unexpected[i] + "'";
  if (unexpected.size() > 5) list += ", ...";
  return format_error(folder.weights.path() + " holds " + std::to_string(unexpected.size()) +
                      " tensor(s) this decoder does not use: " + list + " (a " + vae_layout_name(folder.layout) +
                      "-layout folder of another model, or a config.json that does not match the weights?)");
}

VaeTensorSource synthetic_tensor_source(uint64_t seed,
                                        std::function<std::pair<float, float>(const std::string&, const Shape&)> init) {
  return [seed, init](const std::string& name, const Shape& shape) -> Result<Tensor> {
    Tensor t = Tensor::empty(shape, DType::kF32);
    const auto [scale, offset] = init(name, shape);
    VORTEX_RETURN_IF_ERROR(fill_synthetic_host(t, seed ^ name_hash(name), scale, offset));
    return t;
  };
}

}  // namespace vortex
