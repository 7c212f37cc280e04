// Text encoder weights: the key spec, the transformers-folder loader (first K layers only) and the synthetic
// weights (see text_encoder_weights.h). The loader opens the index and maps the shards (headers only); pages
// of a tensor are read when it is uploaded, so the vision tower, layers >= K and lm_head are never read.
#include "text_encoder/text_encoder_weights.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/synthetic.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"

namespace vortex {
namespace {

std::string layer_key(int i, const char* rest) {
  return std::string(kTextEncoderKeyPrefix) + "layers." + std::to_string(i) + "." + rest;
}

LinearWeight as_linear(Tensor t) {
  LinearWeight w;
  w.out_features = t.dim(0);
  w.in_features = t.dim(1);
  w.weight = std::move(t);
  return w;
}

// Fills the struct from name -> tensor (every spec name present).
TextEncoderWeights assemble(const TextEncoderConfig& cfg, int layers, std::map<std::string, Tensor>& t) {
  TextEncoderWeights w;
  w.embed_tokens_weight = t[std::string(kTextEncoderKeyPrefix) + "embed_tokens.weight"];
  for (int i = 0; i < layers; ++i) {
    TextEncoderLayerWeights l;
    l.input_layernorm_weight = t[layer_key(i, "input_layernorm.weight")];
    l.self_attn_q_proj = as_linear(t[layer_key(i, "self_attn.q_proj.weight")]);
    l.self_attn_k_proj = as_linear(t[layer_key(i, "self_attn.k_proj.weight")]);
    l.self_attn_v_proj = as_linear(t[layer_key(i, "self_attn.v_proj.weight")]);
    l.self_attn_q_norm_weight = t[layer_key(i, "self_attn.q_norm.weight")];
    l.self_attn_k_norm_weight = t[layer_key(i, "self_attn.k_norm.weight")];
    l.self_attn_o_proj = as_linear(t[layer_key(i, "self_attn.o_proj.weight")]);
    l.post_attention_layernorm_weight = t[layer_key(i, "post_attention_layernorm.weight")];
    l.mlp_gate_proj = as_linear(t[layer_key(i, "mlp.gate_proj.weight")]);
    l.mlp_up_proj = as_linear(t[layer_key(i, "mlp.up_proj.weight")]);
    l.mlp_down_proj = as_linear(t[layer_key(i, "mlp.down_proj.weight")]);
    w.layers.push_back(std::move(l));
  }
  if (layers == cfg.num_layers) w.norm_weight = t[std::string(kTextEncoderKeyPrefix) + "norm.weight"];
  return w;
}

bool is_embedding(const std::string& name) {
  return name == std::string(kTextEncoderKeyPrefix) + "embed_tokens.weight";
}

}  // namespace

Result<std::vector<TextEncoderTensorSpec>> text_encoder_tensor_specs(const TextEncoderConfig& cfg, int layers) {
  VORTEX_RETURN_IF_ERROR(cfg.validate());
  if (layers < 0 || layers > cfg.num_layers)
    return invalid_argument("text encoder: " + std::to_string(layers) + " layers requested; the model has " +
                            std::to_string(cfg.num_layers));
  const int64_t d = cfg.hidden, f = cfg.ffn, hd = cfg.head_dim;
  auto lin = [](int64_t in) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(in))); };
  std::vector<TextEncoderTensorSpec> s;
  s.push_back({std::string(kTextEncoderKeyPrefix) + "embed_tokens.weight", {cfg.vocab, d}, 1.0f, 0.0f});
  for (int i = 0; i < layers; ++i) {
    s.push_back({layer_key(i, "input_layernorm.weight"), {d}, 0.2f, 1.0f});
    s.push_back({layer_key(i, "self_attn.q_proj.weight"), {cfg.q_width(), d}, lin(d), 0.0f});
    s.push_back({layer_key(i, "self_attn.k_proj.weight"), {cfg.kv_width(), d}, lin(d), 0.0f});
    s.push_back({layer_key(i, "self_attn.v_proj.weight"), {cfg.kv_width(), d}, lin(d), 0.0f});
    s.push_back({layer_key(i, "self_attn.q_norm.weight"), {hd}, 0.2f, 1.0f});
    s.push_back({layer_key(i, "self_attn.k_norm.weight"), {hd}, 0.2f, 1.0f});
    s.push_back({layer_key(i, "self_attn.o_proj.weight"), {d, cfg.q_width()}, lin(cfg.q_width()), 0.0f});
    s.push_back({layer_key(i, "post_attention_layernorm.weight"), {d}, 0.2f, 1.0f});
    s.push_back({layer_key(i, "mlp.gate_proj.weight"), {f, d}, lin(d), 0.0f});
    s.push_back({layer_key(i, "mlp.up_proj.weight"), {f, d}, lin(d), 0.0f});
    s.push_back({layer_key(i, "mlp.down_proj.weight"), {d, f}, lin(f), 0.0f});
  }
  if (layers == cfg.num_layers) s.push_back({std::string(kTextEncoderKeyPrefix) + "norm.weight", {d}, 0.2f, 1.0f});
  return s;
}

Result<TextEncoderWeights> load_text_encoder_weights(const std::string& folder, const TextEncoderConfig& cfg,
                                                     int layers, Backend& backend,
                                                     const TextEncoderLoadProgressFn& progress,
                                                     const std::atomic<bool>* cancel) {
  const auto t0 = std::chrono::steady_clock::now();
  VORTEX_ASSIGN_OR_RETURN(std::vector<TextEncoderTensorSpec> specs, text_encoder_tensor_specs(cfg, layers));
  VORTEX_ASSIGN_OR_RETURN(std::string path, resolve_checkpoint_path(folder));
  VORTEX_ASSIGN_OR_RETURN(SafetensorsSet set, SafetensorsSet::open(path));
  std::string problems;
  int n_problems = 0;
  auto problem = [&](const std::string& m) {
    if (n_problems++ < 12) problems += "\n  " + m;
  };
  std::map<std::string, Tensor> host;
  for (const TextEncoderTensorSpec& spec : specs) {
    if (set.find(spec.name) == nullptr) {
      problem("missing " + spec.name + " " + shape_to_string(spec.shape));
      continue;
    }
    VORTEX_ASSIGN_OR_RETURN(Tensor t, set.tensor(spec.name));
    if (t.dtype() != DType::kBF16 || t.shape() != spec.shape) {
      problem(spec.name + " is " + t.describe() + ", expected " + shape_to_string(spec.shape) + " bf16");
      continue;
    }
    host[spec.name] = std::move(t);
  }
  if (n_problems > 0) {
    return format_error(path + ": not the Qwen3-VL language model of its config.json (" + std::to_string(n_problems) +
                        " problem" + (n_problems > 1 ? "s" : "") + "; keys are Qwen3VLForConditionalGeneration's, " +
                        kTextEncoderKeyPrefix + "*):" + problems);
  }
  // Uploaded in checkpoint order (embedding, layer 0, 1, ...) so progress counts whole layers.
  TextEncoderLoadProgress p;
  p.layers_total = layers;
  for (const auto& [name, t] : host) p.bytes_total += t.nbytes();
  const std::string layer_prefix = std::string(kTextEncoderKeyPrefix) + "layers.";
  auto report = [&]() {
    if (!progress) return;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress(p);
  };
  std::map<std::string, Tensor> loaded;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string& name = specs[i].name;
    Tensor& t = host[name];
    p.bytes_done += t.nbytes();
    if (is_embedding(name)) {
      loaded[name] = t;  // host view onto the mapping: rows are gathered per request
      report();
      continue;
    }
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return cancelled("cancelled while loading the text encoder (" + std::to_string(p.layers_done) + " of " +
                       std::to_string(layers) + " layers loaded)");
    }
    Result<Tensor> dev = backend.upload(t);
    if (!dev.ok()) return dev.status().with_context("uploading " + name);
    loaded[name] = std::move(*dev);
    t = Tensor();  // the mapping's view is no longer needed
    const bool last_of_layer = name.rfind(layer_prefix, 0) == 0 &&
                               (i + 1 == specs.size() || specs[i + 1].name.rfind(layer_prefix, 0) != 0 ||
                                specs[i + 1].name.substr(0, specs[i + 1].name.find('.', layer_prefix.size())) !=
                                    name.substr(0, name.find('.', layer_prefix.size())));
    if (last_of_layer) {
      ++p.layers_done;
      report();
    }
  }
  if (p.layers_done != layers) report();
  return assemble(cfg, layers, loaded);
}

Result<TextEncoderWeights> synthesize_text_encoder_weights(const TextEncoderConfig& cfg, int layers, uint64_t seed,
                                                           Backend& backend) {
  VORTEX_ASSIGN_OR_RETURN(std::vector<TextEncoderTensorSpec> specs, text_encoder_tensor_specs(cfg, layers));
  std::map<std::string, Tensor> t;
  for (const TextEncoderTensorSpec& spec : specs) {
    const uint64_t s = synthetic_seed(seed, spec.name);
    if (is_embedding(spec.name)) {
      Tensor host = Tensor::empty(spec.shape, DType::kBF16);
      VORTEX_RETURN_IF_ERROR(fill_synthetic_host(host, s, spec.scale, spec.offset));
      t[spec.name] = std::move(host);
      continue;
    }
    VORTEX_ASSIGN_OR_RETURN(Tensor dev, backend.alloc(spec.shape, DType::kBF16));
    VORTEX_RETURN_IF_ERROR(backend.fill_synthetic(dev, s, spec.scale, spec.offset).with_context(spec.name));
    t[spec.name] = std::move(dev);
  }
  return assemble(cfg, layers, t);
}

Status write_synthetic_text_encoder(const std::string& dir, const TextEncoderConfig& cfg, uint64_t seed) {
  namespace fs = std::filesystem;
  VORTEX_RETURN_IF_ERROR(cfg.validate());
  const fs::path d(dir), config = d / "config.json", weights = d / "model.safetensors";
  std::error_code ec;
  for (const fs::path& p : {config, weights})
    if (fs::exists(p, ec))
      return invalid_argument(p.string() + " exists; the synthetic text encoder is written only into a new folder");
  fs::create_directories(d, ec);
  if (ec) return io_error("cannot create " + d.string() + ": " + ec.message());
  VORTEX_ASSIGN_OR_RETURN(std::vector<TextEncoderTensorSpec> specs, text_encoder_tensor_specs(cfg, cfg.num_layers));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TextEncoderTensorSpec& spec : specs) {
    Tensor host = Tensor::empty(spec.shape, DType::kBF16);  // the values synthesize_text_encoder_weights makes
    VORTEX_RETURN_IF_ERROR(fill_synthetic_host(host, synthetic_seed(seed, spec.name), spec.scale, spec.offset));
    tensors.emplace_back(spec.name, std::move(host));
  }
  {
    std::ofstream out(config, std::ios::binary);
    out << cfg.to_config_json();
    if (!out) return io_error("cannot write " + config.string());
  }
  return write_safetensors(weights.string(), tensors, {{"vortex.synthetic_seed", std::to_string(seed)}});
}

}  // namespace vortex
