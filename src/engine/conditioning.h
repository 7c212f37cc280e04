// fl2va conditioning: what a request with keyframes adds to t2va, assembled from the parts diffusers' modular
// pipeline chains (modular_pipelines/minimax_h3/): the images probed before any weight loads; read, placed on the
// canvas (MiniMaxH3ResizeStep), encoded by the video VAE encoder (encode_vae_condition), noised and packed
// (MiniMaxH3PrepareConditionLatentsStep); and, with a text encoder, the conditioner's presentation of the keyframes
// (MiniMaxH3FL2VATextEncoderStep) with the vision tower's tokens. Pipeline (engine/pipeline.h) calls these.
// Tested end to end in tests/cli/cli_fl2va_test.cpp; the model's side in tests/parity/fl2va_model_parity_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "media/image_reader.h"
#include "media/keyframe_canvas.h"
#include "model/packing.h"
#include "text/tokenizer.h"
#include "text_encoder/text_encoder.h"
#include "vae/video_vae_encoder.h"
#include "vision/vision_tower.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

// The keyframe files of a request (paths; either may be empty). No keyframe: t2va.
struct KeyframeFiles {
  std::string first, last;
  bool any() const { return !first.empty() || !last.empty(); }
  // Packed order: the first keyframe's block, then the last one's.
  std::vector<KeyframeAnchor> anchors() const;
  std::vector<std::string> paths() const;  // in packed order
};

// Checks before any weight loads: each file passes probe_image (exists, a regular non-empty file within the size
// limit, a PNG/JPEG/WebP header within the pixel limit, 8-bit, not CMYK, not animated) and decodes (read_image:
// damaged pixel data is refused too), the transformer is not H3's
// Ref2VA one (its keyframe conditioning is another task), and a video VAE folder is given (the keyframes' latents).
// `first_field` / `last_field` name the inputs in messages ("--first-frame" or "conditions[0]").
Status check_keyframes(const KeyframeFiles& files, const std::string& checkpoint_path, const std::string& vae_dir,
                       const std::string& first_field, const std::string& last_field);

// The tasks the transformer at `checkpoint_path` runs: {"t2va", "fl2va"} for H3's FL2VA transformer (and any other
// checkpoint), {"ref2va"} for the Ref2VA one (transformer_ref/, or a Ref2VA partition's transformer/).
std::vector<std::string> transformer_tasks(const std::string& checkpoint_path);

// The canvas when a request gives neither width nor height, as diffusers' MiniMaxH3ResizeStep resolves it:
// resolve_canvas_size of the first present keyframe's size as load_image returns it (the header's size, the axes
// swapped by EXIF orientations 5 to 8). Reads the header only; an aspect ratio outside 1:4 .. 4:1 is refused
// (kInvalidArgument) naming `field`.
Result<CanvasSize> keyframe_canvas(const KeyframeFiles& files, const std::string& field);

// The keyframes read (read_image: RGB as diffusers' load_image) and placed on the request's canvas
// (place_keyframes: the first stretched, the last cover-cropped, Pillow's LANCZOS).
Result<PlacedKeyframes> read_keyframes(const KeyframeFiles& files, int width, int height);

// The keyframe rows [Nc, 4C] f32 in packed order: per keyframe, encode_condition of its pixels (the posterior sampled
// with the encoder's fixed seed 42, rounded to float16, normalised), then noise_condition_latents with noise from
// Vortex's stream of `seed` starting at `noise_offset` (one block per keyframe, in packed order), then patchify.
// `latents` (optional) receives each keyframe's conditioning latents [C, 1, H/16, W/16].
Result<Tensor> keyframe_condition_rows(const VideoVaeEncoder& encoder, const ModelConfig& cfg,
                                       const PlacedKeyframes& placed, uint64_t seed, uint64_t noise_offset,
                                       std::vector<Tensor>* latents = nullptr);

// The conditioner's input for keyframes on a canvas, before any pixel is read: the presentation's ids, per-row tags
// and M-RoPE positions, and each keyframe's patch grid (the processor passes a canvas of multiples of 32 through
// unresized; any other is refused).
struct KeyframeText {
  std::vector<int32_t> ids;
  std::vector<Modality> tags;  // kVideo for a vision block's rows
  Tensor positions;            // [3, L] i32
  std::vector<int64_t> image_pad_rows;
  std::vector<std::pair<int, int>> grids;  // per keyframe (grid_h, grid_w) in patches
};
Result<KeyframeText> present_keyframes(const Tokenizer& tokenizer, const VisionProcessorConfig& processor, int merge,
                                       int width, int height, int keyframes, const std::string& prompt);

// The image processor's config of a text-encoder folder: its preprocessor_config.json, else the snapshot's
// processor/preprocessor_config.json beside it; kNotFound naming both.
Result<VisionProcessorConfig> keyframe_processor_config(const std::string& text_encoder_dir);

// The vision tower of a Qwen3-VL text-encoder folder (model.visual.* of its safetensors, read as FP32); with a
// backend, transformers' BF16 program on it (vision/vision_tower.h), else the FP32 CPU reference.
Result<VisionTower> load_vision_tower(const std::string& text_encoder_dir, Backend* backend = nullptr);

// The vision embeddings of the placed keyframes for `text`'s image-pad rows: each keyframe through the processor and
// the tower, the merged tokens and DeepStack features concatenated in keyframe order. A tower on a device backend
// hands them over as BF16 tensors left on that backend (for the text encoder on the same backend: no host round trip);
// on the cpu backend or the FP32 reference, as FP32 host rows.
Result<VisionEmbeddings> keyframe_vision(const VisionTower& tower, const VisionProcessorConfig& processor,
                                         const PlacedKeyframes& placed, const KeyframeText& text);

}  // namespace vortex
