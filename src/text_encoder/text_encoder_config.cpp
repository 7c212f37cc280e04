// Qwen3-VL text-config parsing and validation. transformers' Qwen3VLTextRotaryEmbedding always assigns the
// M-RoPE frequencies interleaved (recomposition_frequencies ignores `mrope_interleaved`), so a config that
// says `mrope_interleaved: false` is refused rather than silently run differently; only rope_type "default"
// (attention_scaling 1) exists for this model. Tested in tests/text_encoder/text_encoder_test.cpp.
#include "text_encoder/text_encoder_config.h"

#include <nlohmann/json.hpp>

#include "core/config_json.h"

namespace vortex {

Status TextEncoderConfig::validate() const {
  if (hidden <= 0 || num_layers <= 0 || num_heads <= 0 || num_kv_heads <= 0 || head_dim <= 0 || ffn <= 0 || vocab <= 0)
    return invalid_argument("text encoder config: every dimension must be positive");
  if (num_heads % num_kv_heads != 0)
    return invalid_argument("text encoder config: num_attention_heads " + std::to_string(num_heads) +
                            " must be a multiple of num_key_value_heads " + std::to_string(num_kv_heads));
  if (head_dim % 2 != 0) return invalid_argument("text encoder config: head_dim must be even");
  const int half = head_dim / 2;
  if (mrope_section[0] < 0 || mrope_section[1] < 0 || mrope_section[2] < 0 ||
      mrope_section[0] + mrope_section[1] + mrope_section[2] != half || 3 * mrope_section[1] > half ||
      3 * mrope_section[2] > half)
    return invalid_argument("text encoder config: mrope_section [" + std::to_string(mrope_section[0]) + ", " +
                            std::to_string(mrope_section[1]) + ", " + std::to_string(mrope_section[2]) +
                            "] must sum to head_dim / 2 = " + std::to_string(half) +
                            " with 3 * h and 3 * w within it (interleaved layout)");
  if (!(rope_theta > 0.0)) return invalid_argument("text encoder config: rope_theta must be positive");
  if (!(rms_norm_eps > 0.0f)) return invalid_argument("text encoder config: rms_norm_eps must be positive");
  return Status::Ok();
}

TextEncoderConfig TextEncoderConfig::qwen3_vl_32b() {
  TextEncoderConfig c;
  c.hidden = 5120;
  c.num_layers = 64;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.ffn = 25600;
  c.vocab = 151936;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 5e6;
  c.mrope_section = {24, 20, 20};
  c.max_positions = 262144;
  return c;
}

std::string TextEncoderConfig::to_config_json() const {
  nlohmann::json text = {{"model_type", "qwen3_vl_text"},
                         {"hidden_size", hidden},
                         {"num_hidden_layers", num_layers},
                         {"num_attention_heads", num_heads},
                         {"num_key_value_heads", num_kv_heads},
                         {"head_dim", head_dim},
                         {"intermediate_size", ffn},
                         {"vocab_size", vocab},
                         {"rms_norm_eps", rms_norm_eps},
                         {"hidden_act", "silu"},
                         {"attention_bias", false},
                         {"tie_word_embeddings", false},
                         {"rope_parameters",
                          {{"rope_type", "default"},
                           {"rope_theta", rope_theta},
                           {"mrope_interleaved", true},
                           {"mrope_section", {mrope_section[0], mrope_section[1], mrope_section[2]}}}}};
  if (max_positions > 0) text["max_position_embeddings"] = max_positions;
  nlohmann::json root = {{"architectures", {"Qwen3VLForConditionalGeneration"}},
                         {"model_type", "qwen3_vl"},
                         {"dtype", "bfloat16"},
                         {"text_config", text}};
  return root.dump(2) + "\n";
}

Result<TextEncoderConfig> TextEncoderConfig::from_json_text(const std::string& text, const std::string& label) {
  VORTEX_ASSIGN_OR_RETURN(const ConfigJson root, ConfigJson::parse(text, label));
  return from_config(root);
}

Result<TextEncoderConfig> TextEncoderConfig::from_config(const ConfigJson& root) {
  VORTEX_RETURN_IF_ERROR(root.expect_kind(ConfigKind::kTextEncoder));
  ConfigJson t = root;
  if (root.has("text_config")) {
    VORTEX_ASSIGN_OR_RETURN(t, root.object("text_config"));
  }
  constexpr int64_t kMax = 1 << 30;
  TextEncoderConfig c;
  VORTEX_ASSIGN_OR_RETURN(c.hidden, t.require_int("hidden_size", 1, kMax));
  VORTEX_ASSIGN_OR_RETURN(c.num_layers, t.require_int("num_hidden_layers", 1, kMax));
  VORTEX_ASSIGN_OR_RETURN(c.num_heads, t.require_int("num_attention_heads", 1, kMax));
  VORTEX_ASSIGN_OR_RETURN(c.num_kv_heads, t.require_int("num_key_value_heads", 1, kMax));
  VORTEX_ASSIGN_OR_RETURN(c.ffn, t.require_int("intermediate_size", 1, kMax));
  VORTEX_ASSIGN_OR_RETURN(c.vocab, t.require_int("vocab_size", 1, kMax));
  if (t.has("head_dim")) {
    VORTEX_ASSIGN_OR_RETURN(c.head_dim, t.require_int("head_dim", 1, kMax));
  } else {
    c.head_dim = c.hidden / c.num_heads;  // transformers' default when head_dim is absent
  }
  VORTEX_ASSIGN_OR_RETURN(const double eps, t.get_number({"rms_norm_eps"}, c.rms_norm_eps));
  c.rms_norm_eps = static_cast<float>(eps);
  // transformers 5.x: rope_parameters {rope_type, rope_theta, mrope_section, mrope_interleaved};
  // 4.x: rope_theta next to rope_scaling {rope_type, mrope_section, mrope_interleaved}.
  const char* rope_key = t.has("rope_parameters") ? "rope_parameters"
                         : t.has("rope_scaling")  ? "rope_scaling"
                                                  : nullptr;
  if (rope_key == nullptr) return format_error(t.label() + " has no rope_parameters / rope_scaling (M-RoPE sections)");
  VORTEX_ASSIGN_OR_RETURN(const ConfigJson rope, t.object(rope_key));
  const ConfigJson& theta_in = rope.has("rope_theta") ? rope : t;  // 5.x inside the rope object, 4.x beside it
  if (!theta_in.has("rope_theta")) return format_error(t.label() + " has no numeric rope_theta");
  VORTEX_ASSIGN_OR_RETURN(c.rope_theta, theta_in.get_number({"rope_theta"}, 0.0));
  VORTEX_ASSIGN_OR_RETURN(const std::string type_alias, rope.get_string("type", "default"));
  VORTEX_ASSIGN_OR_RETURN(const std::string type, rope.get_string("rope_type", type_alias));
  if (type != "default" && type != "mrope")
    return unsupported(root.label() + ": rope_type '" + type + "' is not supported (Qwen3-VL uses 'default')");
  VORTEX_ASSIGN_OR_RETURN(const bool interleaved, rope.get_bool("mrope_interleaved", true));
  if (!interleaved)
    return unsupported(root.label() +
                       ": mrope_interleaved false is not Qwen3-VL's layout (its rotary embedding always interleaves)");
  VORTEX_ASSIGN_OR_RETURN(const std::vector<int> sec, rope.get_ints("mrope_section", {24, 20, 20}));  // default
  if (sec.size() != 3)
    return format_error(rope.label() + ": mrope_section must be 3 integers, got " + std::to_string(sec.size()));
  for (size_t i = 0; i < 3; ++i) c.mrope_section[i] = sec[i];
  if (t.has("max_position_embeddings")) {
    VORTEX_ASSIGN_OR_RETURN(c.max_positions, t.require_int("max_position_embeddings", 1, kMax));
  }
  VORTEX_RETURN_IF_ERROR(c.validate().with_context(root.label()));
  return c;
}

Result<TextEncoderConfig> TextEncoderConfig::from_file(const std::string& path) {
  Result<ConfigJson> root = ConfigJson::read_file(path);
  if (!root.ok() && root.status().code() == ErrorCode::kNotFound)
    return not_found(path + " cannot be opened (a transformers Qwen3-VL folder has config.json)");
  if (!root.ok()) return root.status();
  return from_config(*root);
}

}  // namespace vortex
