// ModelConfig: the H3 architecture numbers (the release's transformer/config.json:
// tests/fixtures/release/FL2VA/transformer/config.json). `h3` is the released 33B model; `h3-tiny` keeps every code
// path at CI/demo size. A checkpoint's config.json (original MiniMax or diffusers key names) can override the built-in
// values. Tested in tests/model/config_test.cpp.
#pragma once

#include <string>
#include <string_view>

#include "vortex/status.h"

namespace vortex {

struct ModelConfig {
  std::string name;            // "h3" | "h3-tiny" | from config.json
  int num_layers = 50;         // blocks.{i}
  int num_refiner_layers = 2;  // token_refiner.blocks.{i}
  int hidden = 5376;           // D
  int num_heads = 56;
  int head_dim = 128;
  int ffn = 14336;  // F; fc1 emits 2F = [gate | value]
  int patch_t = 1, patch_h = 2, patch_w = 2;
  int in_channels = 24;          // video latent channels
  int audio_in_channels = 32;    // audio latent channels (no patching)
  int text_dim = 5120;           // Qwen3-VL layer-50 width
  int freq_dim = 256;            // sinusoid width of the time embedding
  int time_embed_hidden = 5376;  // time_embedder.proj_in out
  int time_embed_dim = 2688;     // time_embedder.proj_out out = AdaLN input width E
  int rope_inv_freq_len = 16;    // per axis; rotated dims = 6 * this (96 of 128)
  double rope_theta = 10000.0;
  float norm_eps = 1e-5f;
  float qk_norm_eps = 1e-5f;
  float final_norm_eps = 1e-5f;
  float video_shift = 12.0f;
  float audio_shift = 3.0f;

  int inner() const { return num_heads * head_dim; }                                 // 7168
  int video_patch_dim() const { return in_channels * patch_t * patch_h * patch_w; }  // 96
  int rope_dims() const { return 6 * rope_inv_freq_len; }                            // 96 rotated dims per head
  int adaln_features() const { return 18 * hidden; }                                 // 6 chunks x 3 modalities
  int final_adaln_features() const { return 2 * hidden; }

  static ModelConfig h3();
  static ModelConfig h3_tiny();
  static Result<ModelConfig> by_name(std::string_view name);  // "h3", "h3-tiny"
  // Parse a config.json (original MiniMax or diffusers keys); unknown keys are ignored, missing keys
  // keep the h3 defaults.
  static Result<ModelConfig> from_json_text(std::string_view json_text);
  Status validate() const;
};

// Modality tags of the packed sequence (AdaLN table row = timestep_index * 3 + tag).
enum class Modality : int { kVideo = 0, kText = 1, kAudio = 2 };
constexpr int kNumModalities = 3;
// AdaLN chunks inside one (timestep, modality) row of 6 * D features.
enum AdaLnChunk : int {
  kShiftMsa = 0,
  kScaleMsa = 1,
  kGateMsa = 2,
  kShiftMlp = 3,
  kScaleMlp = 4,
  kGateMlp = 5,
};

}  // namespace vortex
