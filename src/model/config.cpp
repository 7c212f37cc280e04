// ModelConfig presets (h3, h3-tiny), config.json parsing (original MiniMax and diffusers key names)
// and validation. The numbers are the release's (tests/fixtures/release/FL2VA/transformer/config.json); h3-tiny keeps
// every code path (partial RoPE, refiner, fp32 heads) at CI size. Tested in tests/model/config_test.cpp.
#include <cmath>
#include <string>

#include "core/config_json.h"
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

Result<ModelConfig> ModelConfig::from_json_text(std::string_view json_text) {
  VORTEX_ASSIGN_OR_RETURN(const ConfigJson j, ConfigJson::parse(json_text, "config.json"));
  // MiniMaxH3DiTModel (the release's original layout) and MiniMaxH3Transformer3DModel (diffusers) both name the
  // transformer; another component's config (a VAE, the text encoder, a pipeline index) is refused.
  VORTEX_RETURN_IF_ERROR(j.expect_kind(ConfigKind::kTransformer));
  ModelConfig c = h3();
  VORTEX_ASSIGN_OR_RETURN(c.name, j.get_string("name", "custom"));
  // Keys spelled differently by the original release and by diffusers: either spelling is read; a file carrying
  // both with different values is refused.
  VORTEX_ASSIGN_OR_RETURN(c.hidden, j.get_int({"hidden_size"}, c.hidden));
  VORTEX_ASSIGN_OR_RETURN(c.num_layers, j.get_int({"num_layers"}, c.num_layers));
  VORTEX_ASSIGN_OR_RETURN(c.num_refiner_layers,
                          j.get_int({"token_refiner_num_layers", "num_refiner_layers"}, c.num_refiner_layers));
  VORTEX_ASSIGN_OR_RETURN(c.num_heads, j.get_int({"num_attention_heads"}, c.num_heads));
  VORTEX_ASSIGN_OR_RETURN(c.head_dim, j.get_int({"attention_head_dim"}, c.head_dim));
  VORTEX_ASSIGN_OR_RETURN(c.ffn, j.get_int({"ffn_hidden_size", "ffn_dim"}, c.ffn));
  VORTEX_ASSIGN_OR_RETURN(c.in_channels, j.get_int({"latents_dim", "in_channels"}, c.in_channels));
  VORTEX_ASSIGN_OR_RETURN(c.audio_in_channels,
                          j.get_int({"audio_latents_dim", "audio_in_channels"}, c.audio_in_channels));
  VORTEX_ASSIGN_OR_RETURN(c.text_dim, j.get_int({"text_dim"}, c.text_dim));
  VORTEX_ASSIGN_OR_RETURN(c.freq_dim, j.get_int({"timestep_input_dim", "freq_dim"}, c.freq_dim));
  VORTEX_ASSIGN_OR_RETURN(c.time_embed_hidden,
                          j.get_int({"time_embed_hidden_size", "time_embed_hidden_dim"}, c.time_embed_hidden));
  VORTEX_ASSIGN_OR_RETURN(c.time_embed_dim, j.get_int({"time_embed_dim"}, c.time_embed_dim));
  VORTEX_ASSIGN_OR_RETURN(c.rope_inv_freq_len, j.get_int({"rope_inv_freq_len", "rope_freq_dim"}, c.rope_inv_freq_len));
  VORTEX_ASSIGN_OR_RETURN(c.rope_theta, j.get_number({"rope_theta"}, c.rope_theta));
  VORTEX_ASSIGN_OR_RETURN(const double norm_eps, j.get_number({"norm_eps"}, c.norm_eps));
  VORTEX_ASSIGN_OR_RETURN(const double qk_norm_eps, j.get_number({"qk_norm_eps"}, c.qk_norm_eps));
  VORTEX_ASSIGN_OR_RETURN(const double final_norm_eps, j.get_number({"final_norm_eps"}, c.final_norm_eps));
  VORTEX_ASSIGN_OR_RETURN(const double video_shift, j.get_number({"video_shift"}, c.video_shift));
  VORTEX_ASSIGN_OR_RETURN(const double audio_shift, j.get_number({"audio_shift"}, c.audio_shift));
  c.norm_eps = static_cast<float>(norm_eps);
  c.qk_norm_eps = static_cast<float>(qk_norm_eps);
  c.final_norm_eps = static_cast<float>(final_norm_eps);
  c.video_shift = static_cast<decltype(c.video_shift)>(video_shift);
  c.audio_shift = static_cast<decltype(c.audio_shift)>(audio_shift);
  // patch_size: an integer (spatial; t = 1) or [t, h, w].
  if (j.has("patch_size")) {
    if (j.json()["patch_size"].is_number_integer()) {
      VORTEX_ASSIGN_OR_RETURN(c.patch_h, j.get_int({"patch_size"}, 0));
      c.patch_t = 1;
      c.patch_w = c.patch_h;
    } else {
      VORTEX_ASSIGN_OR_RETURN(const std::vector<int> p, j.get_ints("patch_size", {}));
      if (p.size() != 3)
        return format_error("config.json: 'patch_size' must be an integer or [t, h, w], got " +
                            std::to_string(p.size()) + " values");
      c.patch_t = p[0];
      c.patch_h = p[1];
      c.patch_w = p[2];
    }
  }
  // The AdaLN widths the original layout also records: consistent with hidden_size when present.
  VORTEX_ASSIGN_OR_RETURN(const int adaln, j.get_int({"adaln_out_features"}, 0));
  if (j.has("adaln_out_features") && adaln != 18LL * c.hidden)
    return format_error("config.json: adaln_out_features " + std::to_string(adaln) + " != 18 * hidden_size (" +
                        std::to_string(18LL * c.hidden) + ")");
  VORTEX_ASSIGN_OR_RETURN(const int final_adaln, j.get_int({"final_adaln_out_features"}, 0));
  if (j.has("final_adaln_out_features") && final_adaln != 2LL * c.hidden)
    return format_error("config.json: final_adaln_out_features " + std::to_string(final_adaln) +
                        " != 2 * hidden_size (" + std::to_string(2LL * c.hidden) + ")");
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
