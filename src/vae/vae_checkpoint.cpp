// VAE folder reading and the synthetic tensor source (see vae_checkpoint.h).
#include "vae/vae_checkpoint.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

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

Result<Tensor> to_f32_host(const Tensor& t, std::string_view name) {
  Tensor out = Tensor::empty(t.shape(), DType::kF32);
  const int64_t n = t.numel();
  if (!t.is_contiguous()) return invalid_argument(std::string(name) + ": expected a contiguous tensor");
  float* dst = out.data<float>();
  switch (t.dtype()) {
    case DType::kF32: std::memcpy(dst, t.raw_data(), static_cast<size_t>(n) * 4); break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f32_from_bf16_bits(static_cast<const uint16_t*>(t.raw_data())[i]);
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f32_from_f16_bits(static_cast<const uint16_t*>(t.raw_data())[i]);
      break;
    default:
      return format_error(std::string(name) + " is " + dtype_name(t.dtype()) + "; a VAE tensor must be F32, BF16 or F16");
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

Result<VaeFolder> open_vae_folder(const std::string& dir, std::string_view what) {
  namespace fs = std::filesystem;
  VaeFolder folder;
  folder.dir = dir;
  const std::string cfg_path = dir + "/config.json";
  std::ifstream in(cfg_path, std::ios::binary);
  if (!in)
    return not_found(std::string(what) + ": no config.json in " + dir +
                     " (pass the VAE folder itself: config.json + diffusion_pytorch_model.safetensors)");
  folder.config = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}), nullptr, false);
  if (folder.config.is_discarded() || !folder.config.is_object())
    return format_error(std::string(what) + ": " + cfg_path + " is not a JSON object");
  std::string weights = dir + "/diffusion_pytorch_model.safetensors";
  if (!fs::exists(weights)) weights += ".index.json";
  if (!fs::exists(weights))
    return not_found(std::string(what) + ": " + dir + " has neither diffusion_pytorch_model.safetensors nor " +
                     "diffusion_pytorch_model.safetensors.index.json");
  VORTEX_ASSIGN_OR_RETURN(folder.weights, SafetensorsSet::open(weights));
  return folder;
}

VaeTensorSource folder_tensor_source(const VaeFolder& folder) {
  const VaeFolder* f = &folder;
  return [f](const std::string& name, const Shape& shape) -> Result<Tensor> {
    if (!f->weights.find(name))
      return not_found("tensor '" + name + "' is missing from " + f->weights.path() +
                       " (is this the right VAE folder, and a complete download?)");
    VORTEX_ASSIGN_OR_RETURN(Tensor t, f->weights.tensor(name));
    if (t.shape() != shape)
      return format_error("tensor '" + name + "' in " + f->weights.path() + " has shape " + shape_to_string(t.shape()) +
                          ", expected " + shape_to_string(shape) + " for this config.json");
    auto r = to_f32_host(t, name);
    if (!r.ok()) return r.status().with_context(f->weights.path());
    return r;
  };
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

Result<int> config_int(const nlohmann::json& cfg, const char* key, int fallback) {
  if (!cfg.contains(key)) return fallback;
  const auto& v = cfg[key];
  if (!v.is_number_integer()) return format_error(std::string("config.json: '") + key + "' must be an integer");
  return v.get<int>();
}

Result<float> config_float(const nlohmann::json& cfg, const char* key, float fallback) {
  if (!cfg.contains(key)) return fallback;
  const auto& v = cfg[key];
  if (!v.is_number()) return format_error(std::string("config.json: '") + key + "' must be a number");
  return v.get<float>();
}

Result<std::vector<int>> config_ints(const nlohmann::json& cfg, const char* key, std::vector<int> fallback) {
  if (!cfg.contains(key)) return fallback;
  const auto& v = cfg[key];
  std::vector<int> out;
  if (!v.is_array()) return format_error(std::string("config.json: '") + key + "' must be a list of integers");
  for (const auto& e : v) {
    if (!e.is_number_integer()) return format_error(std::string("config.json: '") + key + "' must be a list of integers");
    out.push_back(e.get<int>());
  }
  return out;
}

Result<std::vector<float>> config_floats(const nlohmann::json& cfg, const char* key, std::vector<float> fallback) {
  if (!cfg.contains(key) || cfg[key].is_null()) return fallback;
  const auto& v = cfg[key];
  std::vector<float> out;
  if (!v.is_array()) return format_error(std::string("config.json: '") + key + "' must be a list of numbers");
  for (const auto& e : v) {
    if (!e.is_number()) return format_error(std::string("config.json: '") + key + "' must be a list of numbers");
    out.push_back(e.get<float>());
  }
  return out;
}

}  // namespace vortex
