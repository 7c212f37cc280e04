// ModelConfig tests: the h3 / h3-tiny presets (the release's transformer/config.json), by_name,
// config.json parsing with original MiniMax and diffusers keys, type errors naming the key,
// validation, and the config.json written by `vortex synth` (model_config_to_json) read back.
#include "vortex/config.h"

#include <gtest/gtest.h>

#include "io/checkpoint.h"

namespace vortex {
namespace {

TEST(ConfigTest, H3Preset) {
  ModelConfig c = ModelConfig::h3();
  EXPECT_EQ(c.name, "h3");
  EXPECT_EQ(c.num_layers, 50);
  EXPECT_EQ(c.num_refiner_layers, 2);
  EXPECT_EQ(c.hidden, 5376);
  EXPECT_EQ(c.inner(), 7168);
  EXPECT_EQ(c.ffn, 14336);
  EXPECT_EQ(c.video_patch_dim(), 96);
  EXPECT_EQ(c.audio_in_channels, 32);
  EXPECT_EQ(c.text_dim, 5120);
  EXPECT_EQ(c.time_embed_hidden, 5376);
  EXPECT_EQ(c.time_embed_dim, 2688);
  EXPECT_EQ(c.adaln_features(), 96768);
  EXPECT_EQ(c.final_adaln_features(), 10752);
  EXPECT_EQ(c.rope_dims(), 96);
  EXPECT_TRUE(c.validate().ok());
}

TEST(ConfigTest, TinyPreset) {
  ModelConfig c = ModelConfig::h3_tiny();
  EXPECT_EQ(c.name, "h3-tiny");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_refiner_layers, 1);
  EXPECT_EQ(c.hidden, 256);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ffn, 512);
  EXPECT_EQ(c.rope_inv_freq_len, 8);
  EXPECT_EQ(c.rope_dims(), 48);
  EXPECT_EQ(c.text_dim, 128);
  EXPECT_EQ(c.freq_dim, 256);
  EXPECT_EQ(c.time_embed_hidden, 256);
  EXPECT_EQ(c.time_embed_dim, 128);
  EXPECT_EQ(c.video_patch_dim(), 96);
  EXPECT_EQ(c.video_shift, 12.0f);
  EXPECT_EQ(c.audio_shift, 3.0f);
  EXPECT_TRUE(c.validate().ok());
}

TEST(ConfigTest, ByName) {
  EXPECT_EQ(ModelConfig::by_name("h3")->hidden, 5376);
  EXPECT_EQ(ModelConfig::by_name("h3-tiny")->hidden, 256);
  Status s = ModelConfig::by_name("h4").status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("h3-tiny"), std::string::npos);
}

TEST(ConfigTest, OriginalKeys) {
  // The released Ref2VA/transformer/config.json key names.
  const char* text = R"({
    "hidden_size": 512, "num_layers": 3, "token_refiner_num_layers": 1, "num_attention_heads": 8,
    "attention_head_dim": 64, "ffn_hidden_size": 1024, "latents_dim": 16, "audio_latents_dim": 8,
    "text_dim": 300, "timestep_input_dim": 128, "time_embed_hidden_size": 512, "time_embed_dim": 256,
    "rope_inv_freq_len": 8, "rope_theta": 5000.0, "norm_eps": 1e-6, "qk_norm_eps": 2e-6,
    "final_norm_eps": 3e-6, "patch_size": [1, 2, 2], "adaln_out_features": 9216, "unknown_key": [1]})";
  Result<ModelConfig> r = ModelConfig::from_json_text(text);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.hidden, 512);
  EXPECT_EQ(c.num_layers, 3);
  EXPECT_EQ(c.num_refiner_layers, 1);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ffn, 1024);
  EXPECT_EQ(c.in_channels, 16);
  EXPECT_EQ(c.audio_in_channels, 8);
  EXPECT_EQ(c.text_dim, 300);
  EXPECT_EQ(c.freq_dim, 128);
  EXPECT_EQ(c.time_embed_hidden, 512);
  EXPECT_EQ(c.time_embed_dim, 256);
  EXPECT_EQ(c.rope_inv_freq_len, 8);
  EXPECT_EQ(c.rope_theta, 5000.0);
  EXPECT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.qk_norm_eps, 2e-6f);
  EXPECT_EQ(c.final_norm_eps, 3e-6f);
}

TEST(ConfigTest, DiffusersKeysAndDefaults) {
  Result<ModelConfig> r = ModelConfig::from_json_text(
      R"({"_class_name": "MiniMaxH3Transformer3DModel", "num_refiner_layers": 0, "ffn_dim": 2048,
          "in_channels": 12, "audio_in_channels": 16, "freq_dim": 64, "rope_freq_dim": 4, "patch_size": 2})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->num_refiner_layers, 0);
  EXPECT_EQ(r->ffn, 2048);
  EXPECT_EQ(r->in_channels, 12);
  EXPECT_EQ(r->audio_in_channels, 16);
  EXPECT_EQ(r->freq_dim, 64);
  EXPECT_EQ(r->rope_inv_freq_len, 4);
  EXPECT_EQ(r->patch_t, 1);
  EXPECT_EQ(r->patch_h, 2);
  EXPECT_EQ(r->hidden, 5376);  // missing keys keep the h3 defaults
  EXPECT_EQ(r->num_layers, 50);
}

// Every MiniMaxH3Transformer3DModel.__init__ key as diffusers' save_pretrained writes it (h3-tiny values).
TEST(ConfigTest, FullDiffusersConfigJson) {
  Result<ModelConfig> r = ModelConfig::from_json_text(R"({
    "_class_name": "MiniMaxH3Transformer3DModel", "_diffusers_version": "0.42.1",
    "num_attention_heads": 4, "attention_head_dim": 64, "hidden_size": 256, "num_layers": 2,
    "num_refiner_layers": 1, "ffn_dim": 512, "in_channels": 24, "audio_in_channels": 32,
    "patch_size": [1, 2, 2], "text_dim": 128, "freq_dim": 256, "time_embed_hidden_dim": 320,
    "time_embed_dim": 128, "rope_freq_dim": 8, "rope_theta": 10000.0,
    "norm_eps": 1e-5, "qk_norm_eps": 2e-5, "final_norm_eps": 3e-5})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->num_heads, 4);
  EXPECT_EQ(r->head_dim, 64);
  EXPECT_EQ(r->hidden, 256);
  EXPECT_EQ(r->num_layers, 2);
  EXPECT_EQ(r->num_refiner_layers, 1);
  EXPECT_EQ(r->ffn, 512);
  EXPECT_EQ(r->text_dim, 128);
  EXPECT_EQ(r->time_embed_hidden, 320);  // time_embed_hidden_dim: the diffusers spelling
  EXPECT_EQ(r->time_embed_dim, 128);
  EXPECT_EQ(r->rope_inv_freq_len, 8);
  EXPECT_EQ(r->qk_norm_eps, 2e-5f);
  EXPECT_EQ(r->final_norm_eps, 3e-5f);
}

TEST(ConfigTest, BothSpellingsMustAgree) {
  Result<ModelConfig> same =
      ModelConfig::from_json_text(R"({"time_embed_hidden_size": 300, "time_embed_hidden_dim": 300})");
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_EQ(same->time_embed_hidden, 300);
  const char* disagreeing[] = {
      R"({"time_embed_hidden_size": 300, "time_embed_hidden_dim": 301})",
      R"({"ffn_hidden_size": 512, "ffn_dim": 1024})",
      R"({"token_refiner_num_layers": 2, "num_refiner_layers": 1})",
      R"({"latents_dim": 24, "in_channels": 16})",
      R"({"audio_latents_dim": 32, "audio_in_channels": 16})",
      R"({"timestep_input_dim": 256, "freq_dim": 128})",
      R"({"rope_inv_freq_len": 16, "rope_freq_dim": 8})",
  };
  for (const char* text : disagreeing) {
    Status s = ModelConfig::from_json_text(text).status();
    EXPECT_EQ(s.code(), ErrorCode::kFormat) << text << " -> " << s.to_string();
    EXPECT_NE(s.message().find("disagree"), std::string::npos) << text << " -> " << s.message();
  }
  Status s = ModelConfig::from_json_text(R"({"_class_name": "AutoencoderKLMiniMaxH3"})").status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat) << s.to_string();
  EXPECT_NE(s.message().find("AutoencoderKLMiniMaxH3"), std::string::npos) << s.message();
}

// The release's original-layout class name is the transformer too (issue 24: it was refused as "a diffusers
// 'MiniMaxH3DiTModel'"); the release's files themselves are read in tests/engine/release_configs_test.cpp.
TEST(ConfigTest, BothReleaseClassNamesAreTheTransformer) {
  for (const char* cls : {"MiniMaxH3DiTModel", "MiniMaxH3Transformer3DModel"}) {
    Result<ModelConfig> c = ModelConfig::from_json_text(std::string(R"({"_class_name": ")") + cls +
                                                        R"(", "hidden_size": 256, "num_attention_heads": 4,
                                                        "attention_head_dim": 64, "rope_inv_freq_len": 8, "adaln_out_features": 4608,
                                                        "final_adaln_out_features": 512})");
    ASSERT_TRUE(c.ok()) << cls << ": " << c.status().to_string();
    EXPECT_EQ(c->hidden, 256);
  }
  Status s = ModelConfig::from_json_text(R"({"hidden_size": 256, "final_adaln_out_features": 500})").status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat) << s.to_string();
  EXPECT_NE(s.message().find("final_adaln_out_features"), std::string::npos) << s.message();
}

TEST(ConfigTest, BadJsonAndBadValues) {
  struct Case {
    const char* text;
    ErrorCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"{", ErrorCode::kFormat, "not valid JSON"},
      {"[1]", ErrorCode::kFormat, "JSON object"},
      {R"({"hidden_size": "big"})", ErrorCode::kFormat, "hidden_size"},
      {R"({"num_layers": 2.5})", ErrorCode::kFormat, "num_layers"},
      {R"({"rope_theta": "x"})", ErrorCode::kFormat, "rope_theta"},
      {R"({"patch_size": [1, 2]})", ErrorCode::kFormat, "patch_size"},
      {R"({"num_layers": 0})", ErrorCode::kInvalidArgument, "num_layers"},
      {R"({"attention_head_dim": 63})", ErrorCode::kInvalidArgument, "even"},
      {R"({"rope_inv_freq_len": 30})", ErrorCode::kInvalidArgument, "rope_inv_freq_len"},
      {R"({"norm_eps": -1})", ErrorCode::kInvalidArgument, "eps"},
      {R"({"hidden_size": 99999999999})", ErrorCode::kFormat, "out of range"},
      {R"({"adaln_out_features": 5})", ErrorCode::kFormat, "adaln_out_features"},
  };
  for (const Case& c : cases) {
    Status s = ModelConfig::from_json_text(c.text).status();
    EXPECT_EQ(s.code(), c.code) << c.text << " -> " << s.to_string();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.text << " -> " << s.message();
  }
}

TEST(ConfigTest, WrittenConfigReadsBack) {
  for (const ModelConfig& c : {ModelConfig::h3(), ModelConfig::h3_tiny()}) {
    Result<ModelConfig> r = ModelConfig::from_json_text(model_config_to_json(c));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->name, c.name);
    EXPECT_EQ(model_config_to_json(*r), model_config_to_json(c));
  }
}

}  // namespace
}  // namespace vortex
