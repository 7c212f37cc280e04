// The C interface of libvortex_ffmpeg.so, the one Vortex module that links FFmpeg. The vortex binary
// loads it with dlopen on the first MP4 request (src/media/mp4_writer.cpp), so Vortex runs, and reports
// what to install, on machines without FFmpeg's shared libraries. Plain C types only: the module and the
// binary share no C++ objects. Every function returns 0 or a vortex::ErrorCode value, with a message.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VORTEX_FFMPEG_ABI_VERSION 1

typedef struct VortexMp4Request {
  const char* path;    // written in place; the caller owns temp-file naming and the atomic rename
  const uint8_t* rgb;  // [frames, height, width, 3] RGB, contiguous
  int frames, height, width;
  const float* audio;  // [2, samples] planar stereo, or NULL (no audio stream)
  int64_t samples;
  int sample_rate;
  int fps;
  int crf;             // libx264 constant rate factor
  const char* preset;  // libx264 preset
  int audio_bitrate;   // AAC bits/s
} VortexMp4Request;

typedef struct VortexMediaInfo {
  int streams;
  char video_codec[32], pixel_format[32];
  int width, height;
  double fps;
  int64_t video_frames;  // demuxed video packets
  char audio_codec[32];
  int sample_rate, channels;
  double duration_s, audio_duration_s;
} VortexMediaInfo;

int vortex_ffmpeg_abi_version(void);
int vortex_ffmpeg_write_mp4(const VortexMp4Request* request, char* error, size_t error_size);
int vortex_ffmpeg_probe(const char* path, VortexMediaInfo* info, char* error, size_t error_size);

#ifdef __cplusplus
}
#endif
