// Qwen3-VL's vision side for fl2va keyframes, FP32 CPU reference: the image processor (transformers'
// Qwen2VLImageProcessor as the release's FL2VA/processor configures it: smart_resize check, (x - 127.5) / 127.5,
// the frame repeated over the temporal patch, patches in 2x2-merge-block order) and the vision tower
// (Qwen3VLVisionModel: patch embedding, the learned position grid resampled bilinearly (align_corners), 2-D
// axial rotary, pre-norm ViT blocks with GELU-tanh MLPs, the DeepStack taps and the 2x2 patch merger).
// Tested in tests/vision/vision_tower_test.cpp against transformers 5.x (tests/vision/make_vision_fixtures.py).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
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

// One image for the tower: either the processor's FP32 rows (preprocess_image) or the u8 image itself with the
// processor's normalization (image_input), whose rows the tower builds where it runs (on a backend:
// Backend::vision_pixel_rows from 3 bytes a pixel instead of 24).
struct VisionInput {
  Tensor pixel_values;  // [grid_h * grid_w, 3 * temporal_patch * patch * patch] f32, merge-block order; or undefined
  Tensor rgb;           // [grid_h * patch, grid_w * patch, 3] u8 host, when pixel_values is undefined
  std::array<float, 3> mean255{}, std255{};  // with rgb: rows = (x - mean255[c]) / std255[c] in FP32
  int grid_t = 1, grid_h = 0, grid_w = 0;
  int64_t rows() const { return static_cast<int64_t>(grid_h) * grid_w; }
};

// smart_resize: (height, width) the processor resizes to (multiples of patch * merge within the pixel range).
Result<std::pair<int, int>> smart_resize(int height, int width, const VisionProcessorConfig& cfg);

// One still image through the processor. An image smart_resize would resize is refused (kUnsupported): fl2va
// keyframes sit on a canvas of multiples of 32 inside the pixel range, which passes through unresized.
Result<VisionInput> preprocess_image(const RgbImage& image, const VisionProcessorConfig& cfg);
// The same image as a u8 VisionInput (rgb, mean255 = 255 mean, std255 = 255 std, the grid); the tower's rows from
// it equal preprocess_image's pixel_values (tests/vision/vision_tower_test.cpp). Same refusals as preprocess_image.
Result<VisionInput> image_input(const RgbImage& image, const VisionProcessorConfig& cfg);

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

// The grid tables of one image, built on the host from the config and the patch grid: per token (merge-block
// order) the four bilinear taps into the learned position grid (indices and FP32 weights, taps (h0,w0), (h0,w1),
// (h1,w0), (h1,w1)) and the 2-D rotary cos/sin [N, head_dim] in FP32.
struct VisionGridTables {
  std::vector<int32_t> tap_index;  // [N * 4]
  std::vector<float> tap_weight;   // [N * 4]
  std::vector<float> cos, sin;     // [N * head_dim]
};
VisionGridTables vision_grid_tables(const VisionConfig& cfg, int grid_h, int grid_w);

class VisionTower {
 public:
  // Weights by the checkpoint's names under `prefix` ("model.visual." in transformers 5 checkpoints).
  // The FP32 CPU reference program.
  static Result<VisionTower> from_source(const VisionConfig& cfg, const VaeTensorSource& source,
                                         const std::string& prefix = "model.visual.");
  // backend != nullptr: transformers' BF16 program on that backend (it must outlive the tower). Weights are rounded
  // to BF16 once at load; activations are BF16 rows; LayerNorm statistics FP64 with FP32 affine (Backend::layer_norm,
  // one rounding); GEMMs accumulate in FP32 with the bias in the epilogue (one rounding); q/k rotary in FP32 with one
  // rounding (apply_rotary_pos_emb_vision); attention is the BF16 program per image (the owned sm_90a kernel where the
  // backend's policy runs it, else SDPA). Where the backend has the fused epilogues (has_vision_epilogues: cpu, cuda)
  // the MLP's GELU and the two residual adds run in the FP32 epilogue of their GEMM, one rounding each
  // (Backend::linear_gelu_tanh, linear_residual), where transformers rounds the GEMM output to BF16 first; otherwise
  // GELU in FP32 on the rounded output and residual adds R(x + y), transformers' roundings. Parity target:
  // transformers' BF16 Qwen3VLVisionModel, within 2x the floor (transformers BF16 vs FP32 of the same weights),
  // tests/vision/vision_tower_test.cpp and tests/vision/vision_tower_cuda_test.cpp. backend == nullptr: the FP32 CPU
  // reference above.
  static Result<VisionTower> from_source(const VisionConfig& cfg, const VaeTensorSource& source, Backend* backend,
                                         const std::string& prefix = "model.visual.");
  const VisionConfig& config() const { return cfg_; }
  Backend* backend() const { return backend_; }

  struct Output {
    Tensor last_hidden;             // [N, hidden]: the blocks' output
    Tensor merged;                  // [N / merge^2, out_hidden]: the vision tokens (pooler_output)
    std::vector<Tensor> deepstack;  // per tap: [N / merge^2, out_hidden]
  };
  Result<Output> forward(const VisionInput& input) const;
  // With a backend: the same forward with the outputs left on the backend as BF16 tensors ([N, hidden] and
  // [N / merge^2, out_hidden]), for a consumer on that device. kInvalidArgument without a backend.
  Result<Output> forward_device(const VisionInput& input) const;
  // Several images in one call (a request's keyframes), outputs concatenated in input order: last_hidden
  // [sum N, hidden], merged and each DeepStack feature [sum N / merge^2, out_hidden]. Each image is attended within
  // itself (transformers' cu_seqlens), so the result is the per-image forwards concatenated. On a backend the rows of
  // all images go through every GEMM and elementwise op together and attention is one batched call when the images
  // share a size; without one, the images run one after another.
  // With a backend, forward's host outputs are downloaded as BF16 into page-locked staging (one wait for all) and
  // widened to FP32 on the host threads; with_last_hidden false leaves last_hidden undefined (the conditioner reads
  // only the merged tokens and the DeepStack features).
  Result<Output> forward(const std::vector<VisionInput>& inputs, bool with_last_hidden = true) const;
  Result<Output> forward_device(const std::vector<VisionInput>& inputs) const;
  // On: fc1's GELU and the residual adds run in the GEMM epilogues where the backend has them; off (the default): the
  // separate GELU and residual passes. Opt-in because on the H200 the cuBLASLt residual epilogue misses its CPU
  // program's per-op bound (rel-L2 2.1e-3 against 2e-3, benchmarks/2026-12-02-h200-final5/README.md);
  // bench/fl2va_encoders_bench.cpp times both.
  void set_fused_epilogues(bool on) { fused_epilogues_ = on; }
  bool fused_epilogues() const { return fused_epilogues_ && backend_ != nullptr && backend_->has_vision_epilogues(); }

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
  // The BF16 program's weights on the backend.
  struct DeviceLinear {
    LinearWeight w;  // [out, in] bf16
    Tensor b;        // [out] bf16
  };
  struct DeviceNorm {
    Tensor w, b;  // [n] f32 holding BF16 values
  };
  struct DeviceBlock {
    DeviceNorm norm1, norm2;
    DeviceLinear qkv, proj, fc1, fc2;
  };
  struct DeviceMerger {
    DeviceNorm norm;
    DeviceLinear fc1, fc2;
    bool postshuffle = false;
  };
  struct DeviceGrid {  // vision_grid_tables on the backend
    Tensor tap_index, tap_weight, cos, sin;
    std::vector<Tensor> host;  // their page-locked sources (alloc_host), kept while the grid is cached
  };
  struct DeviceState {
    DeviceLinear patch_embed;
    Tensor pos_table;  // [num_positions, hidden] bf16
    std::vector<DeviceBlock> blocks;
    DeviceMerger merger;
    std::vector<DeviceMerger> deepstack;
    std::mutex grid_mutex;
    std::map<std::vector<std::pair<int, int>>, DeviceGrid> grids;  // by the batch's (grid_h, grid_w) in order
    // Page-locked host rows the BF16 pixels (or the u8 images) are written to and uploaded from (alloc_host, grown
    // as needed); the fence marks the last upload from them, which the next write waits for.
    std::mutex staging_mutex;
    Tensor staging;     // [rows, 3 T P P] bf16
    Tensor staging_u8;  // [bytes] u8
    std::shared_ptr<Backend::Fence> staging_fence;
    // Page-locked BF16 outputs forward() downloads into before widening them on the host.
    std::mutex out_mutex;
    Tensor out_staging;  // [elements] bf16
  };
  Result<const DeviceGrid*> device_grid(const std::vector<VisionInput>& inputs) const;
  Result<Tensor> upload_pixels(const std::vector<VisionInput>& inputs, int64_t rows) const;  // [rows, 3 T P P] bf16
  Result<Output> forward_backend(const std::vector<VisionInput>& inputs,
                                 bool with_last_hidden) const;  // outputs to FP32 host
  Status check_input(const VisionInput& input) const;

  VisionConfig cfg_;
  Backend* backend_ = nullptr;
  bool fused_epilogues_ = false;
  std::shared_ptr<DeviceState> device_;
  Linear patch_embed_;  // [hidden, 3 * T * P * P]
  Tensor pos_embed_;    // [num_positions, hidden]
  std::vector<Block> blocks_;
  Merger merger_;
  std::vector<Merger> deepstack_;
};

}  // namespace vortex
