// Qwen3-VL's vision side for fl2va keyframes, FP32 CPU reference: the image processor (transformers'
// Qwen2VLImageProcessor as the release's FL2VA/processor configures it: smart_resize check, (x - 127.5) / 127.5,
// the frame repeated over the temporal patch, patches in 2x2-merge-block order) and the vision tower
// (Qwen3VLVisionModel: patch embedding, the learned position grid resampled bilinearly (align_corners), 2-D
// axial rotary, pre-norm ViT blocks with GELU-tanh MLPs, the DeepStack taps and the 2x2 patch merger).
// Tested in tests/vision/vision_tower_test.cpp against transformers 5.x (tests/vision/make_vision_fixtures.py).
#pragma once

#include <string>
#include <vector>

#include "core/config_json.h"
#include "media/lanczos_resize.h"
#include "vae/vae_checkpoint.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct VisionProcessorConfig {
  int64_t min_pixels = 65536;     // size.shortest_edge
  int64_t max_pixels = 16777216;  // size.longest_edge
  int patch = 16, temporal_patch = 2, merge = 2;
  float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.5f, 0.5f, 0.5f};
  // preprocessor_config.json (missing keys keep the release's values).
  static Result<VisionProcessorConfig> from_json(const ConfigJson& cfg);
};

struct VisionInput {
  Tensor pixel_values;  // [grid_h * grid_w, 3 * temporal_patch * patch * patch] f32, merge-block order
  int grid_t = 1, grid_h = 0, grid_w = 0;
};

// smart_resize: (height, width) the processor resizes to (multiples of patch * merge within the pixel range).
Result<std::pair<int, int>> smart_resize(int height, int width, const VisionProcessorConfig& cfg);

// One still image through the processor. An image smart_resize would resize is refused (kUnsupported): fl2va
// keyframes sit on a canvas of multiples of 32 inside the pixel range, which passes through unresized.
Result<VisionInput> preprocess_image(const RgbImage& image, const VisionProcessorConfig& cfg);

struct VisionConfig {
  int depth = 27, hidden = 1152, heads = 16, intermediate = 4304, in_channels = 3;
  int patch = 16, temporal_patch = 2, merge = 2, out_hidden = 5120, num_positions = 2304;
  std::vector<int> deepstack = {8, 16, 24};
  double rope_theta = 10000.0;
  int head_dim() const { return hidden / heads; }
  Status validate() const;
  // A Qwen3-VL config.json's vision_config (or the object itself); missing keys keep the release's values.
  static Result<VisionConfig> from_json(const ConfigJson& cfg);
};

class VisionTower {
 public:
  // Weights by the checkpoint's names under `prefix` ("model.visual." in transformers 5 checkpoints).
  static Result<VisionTower> from_source(const VisionConfig& cfg, const VaeTensorSource& source,
                                         const std::string& prefix = "model.visual.");
  const VisionConfig& config() const { return cfg_; }

  struct Output {
    Tensor last_hidden;             // [N, hidden]: the blocks' output
    Tensor merged;                  // [N / merge^2, out_hidden]: the vision tokens (pooler_output)
    std::vector<Tensor> deepstack;  // per tap: [N / merge^2, out_hidden]
  };
  Result<Output> forward(const VisionInput& input) const;

 private:
  struct Linear {
    Tensor w, b;  // [out, in], [out]
  };
  struct Norm {
    Tensor w, b;
  };
  struct Block {
    Norm norm1, norm2;
    Linear qkv, proj, fc1, fc2;
  };
  struct Merger {
    Norm norm;  // over hidden (final merger) or merge^2 * hidden (DeepStack, after the shuffle)
    Linear fc1, fc2;
    bool postshuffle = false;
  };
  VisionConfig cfg_;
  Linear patch_embed_;  // [hidden, 3 * T * P * P]
  Tensor pos_embed_;    // [num_positions, hidden]
  std::vector<Block> blocks_;
  Merger merger_;
  std::vector<Merger> deepstack_;
};

}  // namespace vortex
