// H3 checkpoint spec and synthetic weights. The tensor list is the release checkpoint's
// (original MiniMax keys, FP32 patch projections / time MLP / heads, BF16 elsewhere). Synthetic
// values use core/synthetic.h so the same (seed, name) gives the same bytes on every backend and in
// files written by `vortex synth`. Tested in tests/io/checkpoint_test.cpp.
#include "model/h3_spec.h"

#include <cmath>

#include "core/synthetic.h"

namespace vortex {

namespace {

float weight_scale_for_fan_in(int64_t fan_in) {
  return static_cast<float>(std::sqrt(3.0 / static_cast<double>(fan_in)));
}

constexpr float kBiasScale = 0.02f;
constexpr float kNormScale = 0.1f;
constexpr float kAdaLnGain = 0.1f;
constexpr float kAdaLnBiasScale = 0.05f;

void add_linear(std::vector<TensorSpec>& out, const std::string& prefix, int64_t n, int64_t k, DType dtype, bool bias,
                float gain = 1.0f, float bias_scale = kBiasScale) {
  out.push_back({prefix + ".weight", {n, k}, dtype, SynthInit::kUniform, gain * weight_scale_for_fan_in(k), 0.0f});
  if (bias) out.push_back({prefix + ".bias", {n}, dtype, SynthInit::kUniform, bias_scale, 0.0f});
}

void add_norm(std::vector<TensorSpec>& out, const std::string& name, int64_t d) {
  out.push_back({name, {d}, DType::kBF16, SynthInit::kUniform, kNormScale, 1.0f});
}

void add_block(std::vector<TensorSpec>& out, const std::string& p, const ModelConfig& c, bool adaln) {
  const int64_t d = c.hidden, inner = c.inner(), f = c.ffn;
  add_norm(out, p + ".norm1.weight", d);
  add_linear(out, p + ".attn.qkv_proj", 3 * inner, d, DType::kBF16, false);
  add_norm(out, p + ".attn.q_norm.weight", c.head_dim);
  add_norm(out, p + ".attn.k_norm.weight", c.head_dim);
  add_linear(out, p + ".attn.out_proj", d, inner, DType::kBF16, false);
  add_norm(out, p + ".norm2.weight", d);
  add_linear(out, p + ".mlp.fc1", 2 * f, d, DType::kBF16, false);
  add_linear(out, p + ".mlp.fc2", d, f, DType::kBF16, false);
  if (adaln)
    add_linear(out, p + ".adaln_proj.linear", c.adaln_features(), c.time_embed_dim, DType::kBF16, true, kAdaLnGain,
               kAdaLnBiasScale);
}

void block_slots(std::vector<std::pair<std::string, Tensor*>>& out, const std::string& p, H3BlockWeights& b,
                 bool adaln) {
  out.emplace_back(p + ".norm1.weight", &b.norm1_weight);
  out.emplace_back(p + ".attn.qkv_proj.weight", &b.attn_qkv_proj.weight);
  out.emplace_back(p + ".attn.q_norm.weight", &b.attn_q_norm_weight);
  out.emplace_back(p + ".attn.k_norm.weight", &b.attn_k_norm_weight);
  out.emplace_back(p + ".attn.out_proj.weight", &b.attn_out_proj.weight);
  out.emplace_back(p + ".norm2.weight", &b.norm2_weight);
  out.emplace_back(p + ".mlp.fc1.weight", &b.mlp_fc1.weight);
  out.emplace_back(p + ".mlp.fc2.weight", &b.mlp_fc2.weight);
  if (adaln) {
    out.emplace_back(p + ".adaln_proj.linear.weight", &b.adaln_proj_linear_weight);
    out.emplace_back(p + ".adaln_proj.linear.bias", &b.adaln_proj_linear_bias);
  }
}

}  // namespace

std::vector<TensorSpec> h3_tensor_specs(const ModelConfig& c) {
  std::vector<TensorSpec> s;
  const int64_t d = c.hidden, e = c.time_embed_dim;
  add_linear(s, "video_patch_proj", d, c.video_patch_dim(), DType::kF32, true);
  add_linear(s, "audio_patch_proj", d, c.audio_in_channels, DType::kF32, true);
  add_linear(s, "condition_proj", d, c.text_dim, DType::kBF16, true);
  add_linear(s, "time_embedder.proj_in", c.time_embed_hidden, c.freq_dim, DType::kF32, true);
  add_linear(s, "time_embedder.proj_out", e, c.time_embed_hidden, DType::kF32, true);
  s.push_back({"rope.inv_freq", {c.rope_inv_freq_len}, DType::kF32, SynthInit::kRopeInvFreq, 0.0f, 0.0f});
  for (int i = 0; i < c.num_refiner_layers; ++i) add_block(s, "token_refiner.blocks." + std::to_string(i), c, false);
  add_norm(s, "token_refiner.final_norm.weight", d);
  for (int i = 0; i < c.num_layers; ++i) add_block(s, "blocks." + std::to_string(i), c, true);
  add_norm(s, "final_layer.norm.weight", d);
  add_linear(s, "final_layer.adaln_proj.linear", c.final_adaln_features(), e, DType::kBF16, true, kAdaLnGain,
             kAdaLnBiasScale);
  add_linear(s, "final_layer.video_out", c.video_patch_dim(), d, DType::kF32, true);
  add_linear(s, "final_layer.audio_out", c.audio_in_channels, d, DType::kF32, true);
  return s;
}

int64_t h3_total_bytes(const ModelConfig& config) {
  int64_t total = 0;
  for (const TensorSpec& s : h3_tensor_specs(config)) total += s.bytes();
  return total;
}

bool is_qkv_weight_name(std::string_view name) {
  constexpr std::string_view kSuffix = ".attn.qkv_proj.weight";
  return name.size() >= kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix;
}

H3Weights make_empty_h3_weights(const ModelConfig& config) {
  H3Weights w;
  w.token_refiner_blocks.resize(static_cast<size_t>(config.num_refiner_layers));
  w.blocks.resize(static_cast<size_t>(config.num_layers));
  set_linear_dims(w, config);
  return w;
}

std::vector<std::pair<std::string, Tensor*>> h3_tensor_slots(H3Weights& w) {
  std::vector<std::pair<std::string, Tensor*>> s;
  s.emplace_back("video_patch_proj.weight", &w.video_patch_proj_weight);
  s.emplace_back("video_patch_proj.bias", &w.video_patch_proj_bias);
  s.emplace_back("audio_patch_proj.weight", &w.audio_patch_proj_weight);
  s.emplace_back("audio_patch_proj.bias", &w.audio_patch_proj_bias);
  s.emplace_back("condition_proj.weight", &w.condition_proj_weight);
  s.emplace_back("condition_proj.bias", &w.condition_proj_bias);
  s.emplace_back("time_embedder.proj_in.weight", &w.time_embedder_proj_in_weight);
  s.emplace_back("time_embedder.proj_in.bias", &w.time_embedder_proj_in_bias);
  s.emplace_back("time_embedder.proj_out.weight", &w.time_embedder_proj_out_weight);
  s.emplace_back("time_embedder.proj_out.bias", &w.time_embedder_proj_out_bias);
  s.emplace_back("rope.inv_freq", &w.rope_inv_freq);
  for (size_t i = 0; i < w.token_refiner_blocks.size(); ++i)
    block_slots(s, "token_refiner.blocks." + std::to_string(i), w.token_refiner_blocks[i], false);
  s.emplace_back("token_refiner.final_norm.weight", &w.token_refiner_final_norm_weight);
  for (size_t i = 0; i < w.blocks.size(); ++i) block_slots(s, "blocks." + std::to_string(i), w.blocks[i], true);
  s.emplace_back("final_layer.norm.weight", &w.final_layer_norm_weight);
  s.emplace_back("final_layer.adaln_proj.linear.weight", &w.final_layer_adaln_proj_linear_weight);
  s.emplace_back("final_layer.adaln_proj.linear.bias", &w.final_layer_adaln_proj_linear_bias);
  s.emplace_back("final_layer.video_out.weight", &w.final_layer_video_out_weight);
  s.emplace_back("final_layer.video_out.bias", &w.final_layer_video_out_bias);
  s.emplace_back("final_layer.audio_out.weight", &w.final_layer_audio_out_weight);
  s.emplace_back("final_layer.audio_out.bias", &w.final_layer_audio_out_bias);
  return s;
}

std::vector<std::pair<std::string, LinearWeight*>> h3_linear_slots(H3Weights& w) {
  std::vector<std::pair<std::string, LinearWeight*>> s;
  auto add = [&s](const std::string& p, H3BlockWeights& b) {
    s.emplace_back(p + ".attn.qkv_proj", &b.attn_qkv_proj);
    s.emplace_back(p + ".attn.out_proj", &b.attn_out_proj);
    s.emplace_back(p + ".mlp.fc1", &b.mlp_fc1);
    s.emplace_back(p + ".mlp.fc2", &b.mlp_fc2);
  };
  for (size_t i = 0; i < w.token_refiner_blocks.size(); ++i)
    add("token_refiner.blocks." + std::to_string(i), w.token_refiner_blocks[i]);
  for (size_t i = 0; i < w.blocks.size(); ++i) add("blocks." + std::to_string(i), w.blocks[i]);
  return s;
}

void set_linear_dims(H3Weights& w, const ModelConfig& c) {
  auto set = [&c](H3BlockWeights& b) {
    b.attn_qkv_proj.out_features = 3LL * c.inner();
    b.attn_qkv_proj.in_features = c.hidden;
    b.attn_out_proj.out_features = c.hidden;
    b.attn_out_proj.in_features = c.inner();
    b.mlp_fc1.out_features = 2LL * c.ffn;
    b.mlp_fc1.in_features = c.hidden;
    b.mlp_fc2.out_features = c.hidden;
    b.mlp_fc2.in_features = c.ffn;
  };
  for (H3BlockWeights& b : w.token_refiner_blocks) set(b);
  for (H3BlockWeights& b : w.blocks) set(b);
}

namespace {

// The table the reference ships and diffusers' MiniMaxH3RotaryPosEmbed recomputes, in its FP32 steps:
// inv_freq = 1.0 / (theta ** (arange(0, 2L, 2, float32) / (2L))): exponent fp32(2k) / fp32(2L), the power
// rounded once to FP32, then an FP32 reciprocal. It differs from fp32(theta^(-k/L)) in the last bit for
// some k (3 of 8 for h3-tiny, 4 of 16 for h3). torch's vectorised powf is within 1 ulp, not proven
// correctly rounded: these values match torch wherever its powf rounds correctly (not checked here).
void fill_rope_inv_freq(const ModelConfig& c, Tensor& host) {
  float* p = host.data<float>();
  const float theta = static_cast<float>(c.rope_theta);
  const float two_l = static_cast<float>(2 * c.rope_inv_freq_len);
  for (int k = 0; k < c.rope_inv_freq_len; ++k) {
    const float exponent = static_cast<float>(2 * k) / two_l;
    const float power = static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
    p[k] = 1.0f / power;
  }
}

}  // namespace

Status fill_spec_host(const TensorSpec& spec, const ModelConfig& config, uint64_t seed, Tensor& host) {
  if (host.shape() != spec.shape || host.dtype() != spec.dtype)
    return invalid_argument("fill_spec_host: " + spec.name + " expects " + shape_to_string(spec.shape) + " " +
                            dtype_short_name(spec.dtype) + ", got " + host.describe());
  if (spec.init == SynthInit::kRopeInvFreq) {
    if (!host.is_contiguous()) return invalid_argument("fill_spec_host: rope.inv_freq must be contiguous");
    fill_rope_inv_freq(config, host);
    return Status::Ok();
  }
  return fill_synthetic_host(host, synthetic_seed(seed, spec.name), spec.synth_scale, spec.synth_offset);
}

Result<H3Weights> synthesize_weights(const ModelConfig& config, Backend& backend, uint64_t seed) {
  return synthesize_weights(config, backend, seed, SynthesizedTensorFn());
}

Result<H3Weights> synthesize_weights(const ModelConfig& config, Backend& backend, uint64_t seed,
                                     const SynthesizedTensorFn& after_each) {
  VORTEX_RETURN_IF_ERROR(config.validate());
  H3Weights w = make_empty_h3_weights(config);
  std::vector<TensorSpec> specs = h3_tensor_specs(config);
  auto slots = h3_tensor_slots(w);
  if (slots.size() != specs.size()) return internal_error("h3 spec and H3Weights slot lists differ in length");
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    if (slots[i].first != spec.name) return internal_error("h3 spec/slot order mismatch at " + spec.name);
    if (spec.init == SynthInit::kRopeInvFreq) {
      Tensor host = Tensor::empty(spec.shape, spec.dtype);
      VORTEX_RETURN_IF_ERROR(fill_spec_host(spec, config, seed, host));
      VORTEX_ASSIGN_OR_RETURN(*slots[i].second, backend.upload(host));
    } else {
      VORTEX_ASSIGN_OR_RETURN(Tensor t, backend.alloc(spec.shape, spec.dtype));
      VORTEX_RETURN_IF_ERROR(
          backend.fill_synthetic(t, synthetic_seed(seed, spec.name), spec.synth_scale, spec.synth_offset)
              .with_context("synthesizing " + spec.name));
      *slots[i].second = std::move(t);
    }
    if (after_each) VORTEX_RETURN_IF_ERROR(after_each(spec, *slots[i].second));
  }
  return w;
}

}  // namespace vortex
