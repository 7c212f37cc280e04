// Request packing for t2va (research §2.5-2.7, §7.2): frame snapping, latent grid, packed order
// [text | audio L | audio R | video], per-row (timestep slot, modality), segment tables, RoPE
// positions and BF16 cos/sin tables, and (un)patchify between latents and packed rows.
// Canonical request (1344x768, 124 frames, 100 text rows) -> 37,810 rows. Tested in tests/model/packing_test.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/segments.h"
#include "vortex/config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct RequestGeometry {
  int width = 0, height = 0;       // pixels; multiples of 32 (validated)
  int frames_requested = 0;        // pixel frames as asked for
  int frames = 0;                  // pixel frames after snapping up to 17n + 5
  int latent_frames = 0;           // 5n + 2
  int latent_h = 0, latent_w = 0;  // pixels / 16
  int64_t video_rows = 0;          // latent_frames * (latent_h/2) * (latent_w/2)
  int audio_latents = 0;           // round(frames / 24 * 40) per channel
  int64_t audio_rows = 0;          // 2 * audio_latents
  int64_t text_rows = 0;
  int64_t total_rows() const { return text_rows + audio_rows + video_rows; }
  int64_t text_start() const { return 0; }
  int64_t audio_start() const { return text_rows; }
  int64_t video_start() const { return text_rows + audio_rows; }
};

// Frame counts the video VAE decodes are 17n + 5 (n >= 0). snap_frames_up rounds a count up to the next
// one, as diffusers' align_num_frames and h3.c do (96 -> 107, 124 -> 124, 1..5 -> 5).
int snap_frames_up(int frames);
// A duration at 24 fps: ceil(seconds * 24) frames, snapped up (5 s -> 124 frames).
Result<int> frames_for_seconds(double seconds);
// Validates sizes (positive multiples of 32; for cfg.name "h3" at most 768*1344 pixels) with a clear
// message and snaps `frames` (>= 1) up to 17n + 5. Audio latents = round(frames * 40 / 24), never a half.
Result<RequestGeometry> make_geometry(const ModelConfig& cfg, int width, int height, int frames, int64_t text_rows);

struct PackedLayout {
  RequestGeometry geo;
  std::vector<std::array<double, 3>> positions;  // [S] (t, h, w) in FP64, research §2.5
  std::vector<Modality> modality;                // [S]
  // Block AdaLN segments for the given table slots of t_video / t_audio (row = slot * 3 + tag).
  SegmentTable block_segments(int video_slot, int audio_slot) const;
  // Final-layer segments (row = slot; text rows use the video slot).
  SegmentTable final_segments(int video_slot, int audio_slot) const;
};
Result<PackedLayout> pack_request(const ModelConfig& cfg, const RequestGeometry& geo);

// BF16 cos/sin [S, rope_dims/2] on the host (NUMERICS.md step 4). inv_freq: the checkpoint's
// rope.inv_freq when given (f32 [rope_inv_freq_len]), else theta^(-k/L) in FP64 -> FP32.
Result<RopeTables> make_rope_tables(const ModelConfig& cfg, const PackedLayout& layout, const Tensor* inv_freq);

// Video latents [C, T, H, W] f32 <-> rows [T*(H/2)*(W/2), C*4] f32, feature (c, ph, pw) = c*4 + ph*2 + pw.
Result<Tensor> patchify_video(const ModelConfig& cfg, const Tensor& latents);
Result<Tensor> unpatchify_video(const ModelConfig& cfg, const RequestGeometry& geo, const Tensor& rows);
// Audio latents [2, C, Ta] f32 <-> rows [2*Ta, C] f32 (channel-major: all left, then all right).
Result<Tensor> audio_to_rows(const Tensor& latents);
Result<Tensor> rows_to_audio(const ModelConfig& cfg, const RequestGeometry& geo, const Tensor& rows);

}  // namespace vortex
