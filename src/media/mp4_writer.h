// MP4 output through FFmpeg's libraries: H.264 (libx264, yuv420p, BT.709 limited range, CRF 18 preset
// medium by default) at 24 fps plus AAC-LC (FFmpeg's native encoder, 192 kb/s) at the decoder's sample rate
// in stereo, interleaved by time, written atomically (temp file + rename). probe_media re-opens a file with
// libavformat for checks (tests, `vortex decode` self-check). FFmpeg is reached only through
// libvortex_ffmpeg.so (ffmpeg_plugin.h), loaded on first use: without FFmpeg's shared libraries both
// calls return kUnsupported saying what to install. Tested in tests/media/media_test.cpp.
#pragma once

#include <string>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct Mp4Options {
  int fps = 24;
  int crf = 18;  // x264 constant rate factor: 18 is visually lossless for most content
  std::string preset = "medium";
  int audio_bitrate = 192000;  // bits/s
};

// Ok when MP4 output works here (the FFmpeg module and its libraries load); otherwise kUnsupported naming
// what is missing. Commands that will write an MP4 call it before any expensive work.
Status mp4_support();

// frames [F, H, W, 3] u8 RGB (H, W even: yuv420p), audio [2, N] f32 in [-1, 1] or undefined (no sound).
Status write_mp4(const std::string& path, const Tensor& frames, const Tensor& audio, int sample_rate,
                 const Mp4Options& opts = {});

struct MediaInfo {
  int streams = 0;
  std::string video_codec, pixel_format;
  int width = 0, height = 0;
  double fps = 0.0;
  int64_t video_frames = 0;  // demuxed video packets
  std::string audio_codec;
  int sample_rate = 0, channels = 0;
  double duration_s = 0.0;  // container duration
  double audio_duration_s = 0.0;
};
Result<MediaInfo> probe_media(const std::string& path);

}  // namespace vortex
