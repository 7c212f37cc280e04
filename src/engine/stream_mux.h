// Decode with video.mp4 written while the video decodes: the audio first (tens of milliseconds), then the video
// decode, while a worker thread opens the MP4 with the audio (h264_nvenc when the driver offers it, else libx264 on
// all host threads with a bounded rc-lookahead; src/media/mp4_writer.h) and encodes each clip's finished frames
// (VideoVae::decode's on_frames), converted to RGB8 and I420 (src/engine/decode_frames.h), while later clips
// decode. The file is complete soon after the last clip, not a whole encode later.
// Tested in tests/media/stream_mux_test.cpp (CPU: fallback encoder, same frames as the one-shot path, cancel).
#pragma once

#include <atomic>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/decode.h"
#include "media/mp4_writer.h"
#include "vae/audio_vae.h"
#include "vae/video_vae.h"

namespace vortex {

struct StreamedDecode {
  DecodedMedia media;  // all frames [F, H, W, 3] u8 (for PNG output) and the audio
  Mp4EncoderInfo encoder;
  double audio_decode_s = 0.0, video_decode_s = 0.0;
  double mux_tail_s = 0.0;  // from the end of the video decode to video.mp4 renamed into place
  double mp4_open_s = 0.0;  // opening the encoders (FFmpeg, h264_nvenc's probe), alongside the video decode
};

// Writes `mp4_path` (atomically); both latents are checked before any work. `cancel` (may be null) is read after
// the audio decode, after each clip of the video decode (before its frames are queued), by the encoder thread
// before each queued range, and before the mux's final flush: a set flag ends the decode with kCancelled and
// leaves no video.mp4.
Result<StreamedDecode> decode_to_mp4(const Tensor& video_latents, const Tensor& audio_latents, VideoVae& video_vae,
                                     AudioVae& audio_vae, const std::string& mp4_path, const Mp4Options& opts,
                                     const VaeProgressFn& progress = nullptr,
                                     const std::atomic<bool>* cancel = nullptr);

// run.json's description of a video.mp4: codec, the encoder that ran and its settings, geometry, audio.
nlohmann::json describe_mp4(const Mp4Options& opts, const Mp4EncoderInfo& encoder, const Tensor& frames);

}  // namespace vortex
