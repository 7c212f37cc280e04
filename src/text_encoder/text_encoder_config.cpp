// Qwen3-VL text-config parsing and validation. transformers' Qwen3VLTextRotaryEmbedding always assigns the
// M-RoPE frequencies interleaved (recomposition_frequencies ignores `mrope_interleaved`), so a config that
// says `mrope_interleaved: false` is refused rather than silently run differently; only rope_type "default"
// (attention_scaling 1) exists for this model. Tested in tests/text_encoder/text_encoder_test.cpp.
#include "text_encoder/text_encoder_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace vortex {
namespace {

using nlohmann::json;

Status read_int(const json& j, const char* key, int& out, const std::string& label) {
  auto it = j.find(key);
  if (it == j.end()) return format_error(label + ": text_config." + key + " is missing");
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (1 << 30))
    return format_error(label + ": text_config." + key + " must be a positive integer, got " + it->dump());
  out = it->get<int>();
  return Status::Ok();
}

}  // namespace

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
  json text = {{"model_type", "qwen3_vl_text"},
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
  json root = {{"architectures", {"Qwen3VLForConditionalGeneration"}},
               {"model_type", "qwen3_vl"},
               {"dtype", "bfloat16"},
               {"text_config", text}};
  return root.dump(2) + "\n";
}

Result<TextEncoderConfig> TextEncoderConfig::from_json_text(const std::string& text, const std::string& label) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return format_error(label + ": not valid JSON (" + e.what() + ")");
  }
  if (!root.is_object()) return format_error(label + ": expected a JSON object");
  const json& t = root.contains("text_config") ? root["text_config"] : root;
  if (!t.is_object()) return format_error(label + ": text_config must be an object");
  TextEncoderConfig c;
  VORTEX_RETURN_IF_ERROR(read_int(t, "hidden_size", c.hidden, label));
  VORTEX_RETURN_IF_ERROR(read_int(t, "num_hidden_layers", c.num_layers, label));
  VORTEX_RETURN_IF_ERROR(read_int(t, "num_attention_heads", c.num_heads, label));
  VORTEX_RETURN_IF_ERROR(read_int(t, "num_key_value_heads", c.num_kv_heads, label));
  VORTEX_RETURN_IF_ERROR(read_int(t, "intermediate_size", c.ffn, label));
  VORTEX_RETURN_IF_ERROR(read_int(t, "vocab_size", c.vocab, label));
  if (t.contains("head_dim")) {
    VORTEX_RETURN_IF_ERROR(read_int(t, "head_dim", c.head_dim, label));
  } else {
    c.head_dim = c.hidden / c.num_heads;  // transformers' default when head_dim is absent
  }
  if (t.contains("rms_norm_eps")) {
    if (!t["rms_norm_eps"].is_number()) return format_error(label + ": text_config.rms_norm_eps must be a number");
    c.rms_norm_eps = t["rms_norm_eps"].get<float>();
  }
  // transformers 5.x: rope_parameters {rope_type, rope_theta, mrope_section, mrope_interleaved};
  // 4.x: rope_theta next to rope_scaling {rope_type, mrope_section, mrope_interleaved}.
  const json* rope = nullptr;
  if (t.contains("rope_parameters") && t["rope_parameters"].is_object()) rope = &t["rope_parameters"];
  else if (t.contains("rope_scaling") && t["rope_scaling"].is_object()) rope = &t["rope_scaling"];
  if (rope == nullptr)
    return format_error(label + ": text_config has no rope_parameters / rope_scaling (M-RoPE sections)");
  const json* theta =
      rope->contains("rope_theta") ? &(*rope)["rope_theta"] : (t.contains("rope_theta") ? &t["rope_theta"] : nullptr);
  if (theta == nullptr || !theta->is_number()) return format_error(label + ": text_config has no numeric rope_theta");
  c.rope_theta = theta->get<double>();
  const std::string type = rope->value("rope_type", rope->value("type", std::string("default")));
  if (type != "default" && type != "mrope")
    return unsupported(label + ": rope_type '" + type + "' is not supported (Qwen3-VL uses 'default')");
  if (rope->contains("mrope_interleaved") && (*rope)["mrope_interleaved"] == false)
    return unsupported(label +
                       ": mrope_interleaved false is not Qwen3-VL's layout (its rotary embedding always interleaves)");
  const json sec = rope->value("mrope_section", json::array({24, 20, 20}));  // transformers' default
  if (!sec.is_array() || sec.size() != 3)
    return format_error(label + ": mrope_section must be 3 integers, got " + sec.dump());
  for (size_t i = 0; i < 3; ++i) {
    if (!sec[i].is_number_integer())
      return format_error(label + ": mrope_section must be 3 integers, got " + sec.dump());
    c.mrope_section[i] = sec[i].get<int>();
  }
  if (t.contains("max_position_embeddings") && !t["max_position_embeddings"].is_null())
    VORTEX_RETURN_IF_ERROR(read_int(t, "max_position_embeddings", c.max_positions, label));
  VORTEX_RETURN_IF_ERROR(c.validate().with_context(label));
  return c;
}

Result<TextEncoderConfig> TextEncoderConfig::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found(path + " cannot be opened (a transformers Qwen3-VL folder has config.json)");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path);
}

}  // namespace vortex
