// MP4 output through FFmpeg's libraries: H.264 (yuv420p, BT.709 limited range converted by src/media/yuv420.h;
// h264_nvenc when the driver offers it, constant quality cq 18 preset p5, else libx264 CRF 18 with the preset,
// threads and rc-lookahead of Mp4Options) at 24 fps plus AAC-LC (FFmpeg's native
// encoder, 192 kb/s) at the decoder's sample rate in stereo, interleaved by time, written atomically (temp file +
// rename). Mp4Stream takes the frames as they are decoded; write_mp4 is the one-call form. probe_media re-opens a file
// with libavformat for checks (tests, `vortex decode` self-check). FFmpeg is reached only through libvortex_ffmpeg.so
// (ffmpeg_plugin.h), loaded on first use: without FFmpeg's shared libraries both calls return kUnsupported saying what
// to install. Tested in tests/media/media_test.cpp.
#pragma once

#include <memory>
#include <string>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// libx264's presets, fastest first (--x264-preset).
inline constexpr const char* kX264Presets[] = {"ultrafast", "superfast", "veryfast", "faster",   "fast",
                                               "medium",    "slow",      "slower",   "veryslow", "placebo"};

struct Mp4Options {
  int fps = 24;
  int crf = 18;  // x264 constant rate factor (NVENC: constant quality cq): 18 is visually lossless for most content
  std::string preset = "veryfast";     // libx264 (one of kX264Presets); docs/decode.md has the cost of each
  int x264_threads = 0;                // libx264 threads; 0: one per hardware thread of this host
  int x264_rc_lookahead = 10;          // libx264 rc-lookahead (frames held back before encoding); -1: the preset's
  std::string nvenc_preset = "p5";     // h264_nvenc
  std::string video_encoder = "auto";  // "auto" (h264_nvenc if it opens, else libx264) | "libx264" | "h264_nvenc"
  int audio_bitrate = 192000;          // bits/s
};

// The H.264 encoder an MP4 was written with (for run.json): "h264_nvenc" or "libx264", its settings, and why
// "auto" fell back to libx264 (empty when it did not).
struct Mp4EncoderInfo {
  std::string encoder, settings, fallback;
};

// An MP4 written while its frames are produced: open() checks the arguments, loads FFmpeg and opens both encoders
// (the audio is handed over whole: it is decoded before the video), write() encodes frames in order, finish()
// flushes and renames the temp file onto `path`. Destroyed unfinished, it removes the temp file.
class Mp4Stream {
 public:
  // width/height even (yuv420p), audio [2, N] f32 in [-1, 1] or undefined (no sound).
  static Result<std::unique_ptr<Mp4Stream>> open(const std::string& path, int width, int height, const Tensor& audio,
                                                 int sample_rate, const Mp4Options& opts = {});
  // open()'s checks of the arguments and of FFmpeg's presence, without opening anything: Ok means that open() can
  // fail only on the encoders themselves (h264_nvenc refused, a full disk).
  static Status check(int width, int height, const Tensor& audio, int sample_rate, const Mp4Options& opts = {});
  ~Mp4Stream();
  // frames [n, H, W, 3] u8 RGB, contiguous, of the opened size (converted with rgb8_to_i420, src/media/yuv420.h).
  Status write(const Tensor& frames);
  // frames [n, H * W * 3 / 2] u8 I420 (each frame's Y, U, V planes), contiguous, of the opened size.
  Status write_i420(const Tensor& frames);
  Status finish();
  const Mp4EncoderInfo& encoder() const { return info_; }
  int64_t frames_written() const { return frames_; }

 private:
  Mp4Stream() = default;
  std::string path_, temp_;
  int width_ = 0, height_ = 0;
  int64_t frames_ = 0;
  void* stream_ = nullptr;  // VortexMp4Stream of the FFmpeg module
  bool done_ = false;
  Mp4EncoderInfo info_;
};

// Ok when MP4 output works here (the FFmpeg module and its libraries load); otherwise kUnsupported naming
// what is missing. Commands that will write an MP4 call it before any expensive work.
Status mp4_support();
// Ok for the Mp4Options::video_encoder names (auto, libx264, h264_nvenc); kInvalidArgument naming them otherwise.
Status check_video_encoder(const std::string& name);
// Ok for libx264's preset names (kX264Presets); kInvalidArgument naming them otherwise.
Status check_x264_preset(const std::string& name);
// The libx264 thread count an Mp4Stream opens with (Mp4Options::x264_threads, 0 resolved to this host's threads).
int resolved_x264_threads(const Mp4Options& opts);

// frames [F, H, W, 3] u8 RGB (H, W even: yuv420p), audio [2, N] f32 in [-1, 1] or undefined (no sound).
// `info` (optional) receives the encoder that ran.
Status write_mp4(const std::string& path, const Tensor& frames, const Tensor& audio, int sample_rate,
                 const Mp4Options& opts = {}, Mp4EncoderInfo* info = nullptr);

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
