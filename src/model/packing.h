// Request packing for t2va, fl2va and ref2va (research §2.5-2.7, §7.2): frame snapping, latent grid, packed order
// [text | keyframe conditions or reference blocks | audio L | audio R | video], per-row (timestep slot, modality),
// segment tables, RoPE positions and BF16 cos/sin tables, and (un)patchify between latents and packed rows.
// Canonical request (1344x768, 124 frames, 100 text rows) -> 37,810 rows. Tested in tests/model/packing_test.cpp;
// the fl2va layout against diffusers in tests/parity/fl2va_packing_parity_test.cpp, the ref2va layout in
// tests/parity/ref2va_packing_parity_test.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backend/segments.h"
#include "core/reference_kind.h"
#include "vortex/config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// Which end of the video an fl2va keyframe anchors: its conditioning rows sit at the first latent frame's
// rotary time or at the last one's.
enum class KeyframeAnchor { kFirst, kLast };
const char* keyframe_anchor_name(KeyframeAnchor anchor);  // "first" | "last"

// The t a keyframe's conditioning rows are noised to and held at for every step (diffusers'
// keyframe_noise_aug); their AdaLN timestep is max(t_video, kKeyframeNoiseAug) (build_row_timesteps).
constexpr float kKeyframeNoiseAug = 0.999f;
// A keyframe row's timestep at video timestep `t_video`: max(t_video, 0.999) as diffusers takes it (Python floats,
// then float32 in build_row_timesteps).
inline float keyframe_timestep(float t_video) {
  return static_cast<double>(t_video) >= 0.999 ? t_video : kKeyframeNoiseAug;
}

// The timestep of ref2va reference audio rows (a soundtrack or an audio clip): clean, t = 1.0 at every step
// (MiniMaxH3SetTimestepsStep passes 1.0 as condition_audio_timestep; the rows are never noised).
constexpr float kReferenceAudioTimestep = 1.0f;

// One ref2va reference block (diffusers' MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence), its
// geometry being the shape of what the reference encoders made of it.
struct ReferenceBlock {
  ReferenceKind kind = ReferenceKind::kImage;
  int latent_frames = 0, latent_h = 0, latent_w = 0;  // image (1 frame) and video: the VAE latents' shape
  int audio_latents = 0;  // per channel: an audio reference's, or a video's soundtrack (0: a silent video)
  int64_t video_rows() const { return static_cast<int64_t>(latent_frames) * (latent_h / 2) * (latent_w / 2); }
  int64_t audio_rows() const { return 2LL * audio_latents; }
  int64_t rows() const { return video_rows() + audio_rows(); }
};

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
  // fl2va: one conditioning block of (latent_h/2)*(latent_w/2) rows per keyframe, in packed order, between the
  // text and the audio (diffusers' build_packed_sequence). Empty for t2va.
  std::vector<KeyframeAnchor> keyframes;
  // ref2va: the reference blocks in packed order, between the text and the generated audio: an image's video
  // rows; an audio clip's rows (left, then right); a video's soundtrack rows, then its video rows. Each block
  // advances the shared rotary clock the generated rows start from. Empty for t2va and fl2va.
  std::vector<ReferenceBlock> references;
  int64_t frame_rows() const { return static_cast<int64_t>(latent_h / 2) * (latent_w / 2); }
  int64_t reference_rows() const {
    int64_t n = 0;
    for (const ReferenceBlock& r : references) n += r.rows();
    return n;
  }
  // Every row between the text and the generated audio: keyframe conditions or reference blocks.
  int64_t condition_rows() const { return static_cast<int64_t>(keyframes.size()) * frame_rows() + reference_rows(); }
  int64_t total_rows() const { return text_rows + condition_rows() + audio_rows + video_rows; }
  int64_t text_start() const { return 0; }
  int64_t condition_start() const { return text_rows; }
  int64_t audio_start() const { return text_rows + condition_rows(); }
  int64_t video_start() const { return audio_start() + audio_rows; }
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
  // Block AdaLN segments for the given table slots of t_video / t_audio / the visual conditioning rows / the
  // reference audio rows (row = slot * 3 + tag; condition_slot < 0: the video slot; reference_audio_slot < 0: the
  // audio slot). Text rows tagged video (a vision block) take the video row of the video slot. diffusers'
  // build_row_timesteps holds visual conditioning rows at max(t_video, 0.999) and reference audio at 1.0.
  SegmentTable block_segments(int video_slot, int audio_slot, int condition_slot = -1,
                              int reference_audio_slot = -1) const;
  // Final-layer segments (row = slot; text rows use the video slot, visual conditioning rows condition_slot,
  // reference audio rows reference_audio_slot).
  SegmentTable final_segments(int video_slot, int audio_slot, int condition_slot = -1,
                              int reference_audio_slot = -1) const;
};
// text_modality: the modality of every text row (empty: all text). fl2va tags the rows of a keyframe's vision
// block kVideo (MiniMaxH3FL2VATextEncoderStep); only kText and kVideo are accepted.
Result<PackedLayout> pack_request(const ModelConfig& cfg, const RequestGeometry& geo,
                                  const std::vector<Modality>& text_modality = {});

// MiniMaxH3PrepareConditionLatentsStep's mix, before patchify: t * latents + (1 - t) * noise in FP32
// (scale_noise at t = kKeyframeNoiseAug). latents and noise: [C, T, H, W] f32 of one shape.
Result<Tensor> noise_condition_latents(const Tensor& latents, const Tensor& noise, float t = kKeyframeNoiseAug);

// BF16 cos/sin [S, rope_dims/2] on the host (docs/numerics.md). inv_freq: the checkpoint's
// rope.inv_freq when given (f32 [rope_inv_freq_len]), else theta^(-k/L) in FP64 -> FP32.
Result<RopeTables> make_rope_tables(const ModelConfig& cfg, const PackedLayout& layout, const Tensor* inv_freq);

// Video latents [C, T, H, W] f32 <-> rows [T*(H/2)*(W/2), C*4] f32, feature (c, ph, pw) = c*4 + ph*2 + pw.
Result<Tensor> patchify_video(const ModelConfig& cfg, const Tensor& latents);
Result<Tensor> unpatchify_video(const ModelConfig& cfg, const RequestGeometry& geo, const Tensor& rows);
// Audio latents [2, C, Ta] f32 <-> rows [2*Ta, C] f32 (channel-major: all left, then all right).
Result<Tensor> audio_to_rows(const Tensor& latents);
Result<Tensor> rows_to_audio(const ModelConfig& cfg, const RequestGeometry& geo, const Tensor& rows);

}  // namespace vortex
