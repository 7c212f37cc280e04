// TextEncoderConfig: the text part of a Qwen3-VL config.json (`text_config`), the numbers the conditioner
// needs, plus where H3 reads it (`hidden_states[50]`). Parsed from transformers 5.x (`rope_parameters`) and
// 4.x (`rope_theta` + `rope_scaling`) spellings. Tested in tests/text_encoder/text_encoder_test.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "vortex/status.h"

namespace vortex {
class ConfigJson;
}

namespace vortex {

// H3 conditions on hidden_states[50] of its Qwen3-VL conditioner (diffusers' MiniMaxH3 pipeline
// `text_encoder_layer`): the pre-norm residual after decoder layer index 49.
constexpr int kH3TextEncoderLayer = 50;

struct TextEncoderConfig {
  int hidden = 0;                      // text_config.hidden_size (5120)
  int num_layers = 0;                  // text_config.num_hidden_layers (64): layers of the full stack
  int num_heads = 0;                   // num_attention_heads (64)
  int num_kv_heads = 0;                // num_key_value_heads (8)
  int head_dim = 0;                    // head_dim (128)
  int ffn = 0;                         // intermediate_size (25600)
  int vocab = 0;                       // vocab_size (151936)
  float rms_norm_eps = 1e-6f;          // rms_norm_eps
  double rope_theta = 0.0;             // rope_theta (5e6)
  std::array<int, 3> mrope_section{};  // (t, h, w) frequency counts, sum = head_dim / 2 ([24, 20, 20])
  // text_config.max_position_embeddings (262,144): the longest prompt the conditioner has positions for;
  // 0 when the config does not say.
  int max_positions = 0;

  int64_t q_width() const { return static_cast<int64_t>(num_heads) * head_dim; }
  int64_t kv_width() const { return static_cast<int64_t>(num_kv_heads) * head_dim; }
  Status validate() const;

  // Qwen3-VL-32B's text model (tests/fixtures/release/FL2VA/text_encoder/config.json).
  static TextEncoderConfig qwen3_vl_32b();
  // A Qwen3-VL config.json (text_config inside) or a bare text config object.
  static Result<TextEncoderConfig> from_json_text(const std::string& text, const std::string& label);
  static Result<TextEncoderConfig> from_file(const std::string& path);
  // The same from a parsed file (another component's config, e.g. the transformer's, is refused by name).
  static Result<TextEncoderConfig> from_config(const ConfigJson& root);
  // A Qwen3VLForConditionalGeneration config.json holding this text config (and a minimal vision_config,
  // which the conditioner never reads): what `write_synthetic_text_encoder` puts beside its weights.
  std::string to_config_json() const;
};

}  // namespace vortex
