// ModelConfig presets (h3, h3-tiny), config.json parsing (original MiniMax and diffusers key names)
// and validation. The numbers come from research/av-dit-architecture.md §2.1 / §7.1; h3-tiny keeps
// every code path (partial RoPE, refiner, fp32 heads) at CI size. Tested in tests/model/config_test.cpp.
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "vortex/config.h"

namespace vortex {

ModelConfig ModelConfig::h3() {
  ModelConfig c;  // the struct defaults are the released 33B model
  c.name = "h3";
  return c;
}

ModelConfig ModelConfig::h3_tiny() {
  ModelConfig c;
  c.name = "h3-tiny";
  c.num_layers = 2;
  c.num_refiner_layers = 1;
  c.hidden = 256;
  c.num_heads = 4;
  c.head_dim = 64;
  c.ffn = 512;
  c.text_dim = 128;
  c.freq_dim = 256;
  c.time_embed_hidden = 256;
  c.time_embed_dim = 128;
  c.rope_inv_freq_len = 8;  // 48 rotated dims of 64
  return c;
}

Result<ModelConfig> ModelConfig::by_name(std::string_view name) {
  if (name == "h3") return h3();
  if (name == "h3-tiny") return h3_tiny();
  return invalid_argument("unknown model config '" + std::string(name) +
                          "': use 'h3' (the 33B release) or 'h3-tiny' (CI size)");
}

namespace {

using nlohmann::json;

// Reads an integer key if present; a non-integer value is a format error naming the key.
Status read_int(const json& j, const char* key, int& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer())
    return format_error(std::string("config key '") + key + "' must be an integer, got " + it->dump());
  int64_t v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX)
    return format_error(std::string("config key '") + key + "' out of range: " + it->dump());
  out = static_cast<int>(v);
  return Status::Ok();
}

template <typename T>
Status read_number(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number())
    return format_error(std::string("config key '") + key + "' must be a number, got " + it->dump());
  out = static_cast<T>(it->get<double>());
  return Status::Ok();
}

// The same integer under its original and its diffusers key: either may be present; both present
// and different is a format error naming the two keys.
Status read_int_either(const json& j, const char* original_key, const char* diffusers_key, int& out) {
  int a = out, b = out;
  VORTEX_RETURN_IF_ERROR(read_int(j, original_key, a));
  VORTEX_RETURN_IF_ERROR(read_int(j, diffusers_key, b));
  const bool has_a = j.contains(original_key) && !j[original_key].is_null();
  const bool has_b = j.contains(diffusers_key) && !j[diffusers_key].is_null();
  if (has_a && has_b && a != b)
    return format_error(std::string("config.json: '") + original_key + "' = " + std::to_string(a) + " and '" +
                        diffusers_key + "' = " + std::to_string(b) +
                        " name the same dimension and disagree; keep one of them");
  out = has_a ? a : b;
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ModelConfig::from_json_text(std::string_view json_text) {
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return format_error("config.json is not valid JSON");
  if (!j.is_object()) return format_error("config.json must be a JSON object, got " + std::string(j.type_name()));
  ModelConfig c = h3();
  c.name = "custom";
  if (auto it = j.find("name"); it != j.end() && it->is_string()) c.name = it->get<std::string>();
  // Keys spelled differently by the original release and by diffusers (MiniMaxH3Transformer3DModel):
  // either spelling is accepted; a file carrying both with different values is refused.
  if (auto it = j.find("_class_name");
      it != j.end() && it->is_string() && it->get<std::string>() != "MiniMaxH3Transformer3DModel")
    return format_error("config.json describes a diffusers '" + it->get<std::string>() +
                        "', not the H3 transformer (MiniMaxH3Transformer3DModel): point --checkpoint at the "
                        "transformer folder");
  VORTEX_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden));
  VORTEX_RETURN_IF_ERROR(read_int(j, "num_layers", c.num_layers));
  VORTEX_RETURN_IF_ERROR(read_int_either(j, "token_refiner_num_layers", "num_refiner_layers", c.num_refiner_layers));
  VORTEX_RETURN_IF_ERROR(read_int(j, "num_attention_heads", c.num_heads));
  VORTEX_RETURN_IF_ERROR(read_int(j, "attention_head_dim", c.head_dim));
  VORTEX_RETURN_IF_ERROR(read_int_either(j, "ffn_hidden_size", "ffn_dim", c.ffn));
  VORTEX_RETURN_IF_ERROR(read_int_either(j, "latents_dim", "in_channels", c.in_channels));
  VORTEX_RETURN_IF_ERROR(read_int_either(j, "audio_latents_dim", "audio_in_channels", c.audio_in_channels));
  VORTEX_RETURN_IF_ERROR(read_int(j, "text_dim", c.text_dim));
  VORTEX_RETURN_IF_ERROR(read_int_either(j, "timestep_input_dim", "freq_dim", c.freq_dim));
  VORTEX_RETURN_IF_ERROR(read_int_either(j, "time_embed_hidden_size", "time_embed_hidden_dim", c.time_embed_hidden));
  VORTEX_RETURN_IF_ERROR(read_int(j, "time_embed_dim", c.time_embed_dim));
  VORTEX_RETURN_IF_ERROR(read_int_either(j, "rope_inv_freq_len", "rope_freq_dim", c.rope_inv_freq_len));
  VORTEX_RETURN_IF_ERROR(read_number(j, "rope_theta", c.rope_theta));
  VORTEX_RETURN_IF_ERROR(read_number(j, "norm_eps", c.norm_eps));
  VORTEX_RETURN_IF_ERROR(read_number(j, "qk_norm_eps", c.qk_norm_eps));
  VORTEX_RETURN_IF_ERROR(read_number(j, "final_norm_eps", c.final_norm_eps));
  VORTEX_RETURN_IF_ERROR(read_number(j, "video_shift", c.video_shift));
  VORTEX_RETURN_IF_ERROR(read_number(j, "audio_shift", c.audio_shift));
  if (auto it = j.find("patch_size"); it != j.end() && !it->is_null()) {
    if (it->is_number_integer()) {
      c.patch_t = 1;
      c.patch_h = c.patch_w = it->get<int>();
    } else if (it->is_array() && it->size() == 3 && (*it)[0].is_number_integer() && (*it)[1].is_number_integer() &&
               (*it)[2].is_number_integer()) {
      c.patch_t = (*it)[0].get<int>();
      c.patch_h = (*it)[1].get<int>();
      c.patch_w = (*it)[2].get<int>();
    } else {
      return format_error("config key 'patch_size' must be an integer or [t, h, w], got " + it->dump());
    }
  }
  // Consistency between the two spellings of the AdaLN width, when a file carries it.
  if (auto it = j.find("adaln_out_features");
      it != j.end() && it->is_number_integer() && it->get<int64_t>() != 18LL * c.hidden)
    return format_error("config.json: adaln_out_features " + it->dump() + " != 18 * hidden_size (" +
                        std::to_string(18LL * c.hidden) + ")");
  VORTEX_RETURN_IF_ERROR(c.validate().with_context("config.json"));
  return c;
}

Status ModelConfig::validate() const {
  auto positive = [](const char* what, int v) -> Status {
    if (v <= 0) return invalid_argument(std::string(what) + " must be positive, got " + std::to_string(v));
    return Status::Ok();
  };
  VORTEX_RETURN_IF_ERROR(positive("num_layers", num_layers));
  if (num_refiner_layers < 0)
    return invalid_argument("num_refiner_layers must be >= 0, got " + std::to_string(num_refiner_layers));
  VORTEX_RETURN_IF_ERROR(positive("hidden", hidden));
  VORTEX_RETURN_IF_ERROR(positive("num_heads", num_heads));
  VORTEX_RETURN_IF_ERROR(positive("head_dim", head_dim));
  VORTEX_RETURN_IF_ERROR(positive("ffn", ffn));
  VORTEX_RETURN_IF_ERROR(positive("patch_t", patch_t));
  VORTEX_RETURN_IF_ERROR(positive("patch_h", patch_h));
  VORTEX_RETURN_IF_ERROR(positive("patch_w", patch_w));
  VORTEX_RETURN_IF_ERROR(positive("in_channels", in_channels));
  VORTEX_RETURN_IF_ERROR(positive("audio_in_channels", audio_in_channels));
  VORTEX_RETURN_IF_ERROR(positive("text_dim", text_dim));
  VORTEX_RETURN_IF_ERROR(positive("freq_dim", freq_dim));
  VORTEX_RETURN_IF_ERROR(positive("time_embed_hidden", time_embed_hidden));
  VORTEX_RETURN_IF_ERROR(positive("time_embed_dim", time_embed_dim));
  VORTEX_RETURN_IF_ERROR(positive("rope_inv_freq_len", rope_inv_freq_len));
  if (head_dim % 2 != 0) return invalid_argument("head_dim must be even, got " + std::to_string(head_dim));
  if (freq_dim % 2 != 0)
    return invalid_argument("freq_dim must be even (cos | sin halves), got " + std::to_string(freq_dim));
  if (rope_dims() > head_dim)
    return invalid_argument("rope_inv_freq_len " + std::to_string(rope_inv_freq_len) + " rotates " +
                            std::to_string(rope_dims()) + " dims, more than head_dim " + std::to_string(head_dim));
  // Sizes must fit the int64 element counts used everywhere (and 32-bit kernel row indices).
  if (static_cast<int64_t>(num_heads) * head_dim > (1 << 24) || hidden > (1 << 24) || ffn > (1 << 24))
    return invalid_argument("model dimensions are implausibly large (hidden/inner/ffn > 16M)");
  if (!(rope_theta > 0.0) || !std::isfinite(rope_theta))
    return invalid_argument("rope_theta must be a positive finite number");
  for (float eps : {norm_eps, qk_norm_eps, final_norm_eps})
    if (!(eps > 0.0f) || !std::isfinite(eps)) return invalid_argument("norm eps values must be positive and finite");
  return Status::Ok();
}

}  // namespace vortex
