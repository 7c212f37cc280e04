// The C interface of libvortex_ffmpeg.so, the one Vortex module that links FFmpeg. The vortex binary
// loads it with dlopen on the first MP4 request (src/media/mp4_writer.cpp), so Vortex runs, and reports
// what to install, on machines without FFmpeg's shared libraries. Plain C types only: the module and the
// binary share no C++ objects. Every function returns 0 or a vortex::ErrorCode value, with a message.
// An MP4 is written as a stream: open (encoders chosen, audio handed over), frames written in order as they
// are decoded, finish (flush, trailer, close).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VORTEX_FFMPEG_ABI_VERSION 6

typedef struct VortexMp4StreamRequest {
  const char* path;  // written in place; the caller owns temp-file naming and the atomic rename
  int height, width;
  int fps;
  const float* audio;  // [2, samples] planar stereo (copied at open), or NULL (no audio stream)
  int64_t samples;
  int sample_rate;
  const char* video_encoder;  // "auto" (h264_nvenc when it opens here, else libx264) | "libx264" | "h264_nvenc"
  int crf;                    // libx264 constant rate factor; h264_nvenc takes it as its constant quality (cq)
  const char* preset;         // libx264 preset
  int x264_threads;           // libx264 threads (0: FFmpeg's default, 1.5x the cores)
  int x264_rc_lookahead;      // libx264 rc-lookahead in frames (-1: the preset's)
  const char* nvenc_preset;   // h264_nvenc preset (p1 fastest .. p7 slowest)
  int audio_bitrate;          // AAC bits/s
} VortexMp4StreamRequest;

// Which H.264 encoder the stream opened and with what settings; fallback names why "auto" did not take NVENC.
typedef struct VortexMp4EncoderInfo {
  char encoder[32];
  char settings[256];
  char fallback[512];
} VortexMp4EncoderInfo;

typedef struct VortexMp4Stream VortexMp4Stream;

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

// One still image decoded to 8-bit RGB (src/media/image_reader.cpp parses the header first and sizes `rgb`).
#define VORTEX_IMAGE_PNG 0
#define VORTEX_IMAGE_JPEG 1
#define VORTEX_IMAGE_WEBP 2
typedef struct VortexImageDecode {
  const uint8_t* data;  // the whole file
  size_t size;
  int codec;              // VORTEX_IMAGE_*
  int width, height;      // from the header; a decoded frame of another size is an error
  int64_t max_pixels;     // handed to the decoder as AVCodecContext.max_pixels
  uint8_t* rgb;           // out: [height, width, 3]; alpha dropped, grey and palette expanded
  char pixel_format[32];  // out: the decoder's pixel format
  int exact;              // out: 1 when the RGB is the decoded samples themselves (no colour conversion)
} VortexImageDecode;

// The first audio stream of a file (an audio file, or a video's soundtrack) decoded at its own rate and channel
// count, converted to float as libswresample converts to planar float (u8: (x - 128) / 128, s16: x / 2^15,
// s32: float(x) / 2^31, dbl: rounded), and handed to `sink` frame by frame as planar channels. A sink that returns
// nonzero stops the decode (that value is returned).
typedef int (*VortexAudioSink)(void* user, const float* const* planes, int channels, int samples);
typedef struct VortexAudioDecode {
  const char* path;
  VortexAudioSink sink;
  void* user;
  int sample_rate, channels;  // out
  char sample_format[32];     // out: the decoder's sample format
} VortexAudioDecode;

// The first video stream of a file decoded frame by frame to rgb24 as PyAV's `frame.to_ndarray(format="rgb24")`
// converts (swscale, SWS_BILINEAR, the frame's own colorspace and range), in the coded orientation, handed to `sink`
// ([height, width, 3], rows contiguous). `rotation` is set before the first frame: the display matrix's
// counterclockwise rotation in degrees (av_display_rotation_get truncated to an int, as PyAV's frame.rotation reports
// it; 0 without one). A sink
// that returns nonzero stops the decode (that value is returned); `max_frames` frames at most reach it.
typedef int (*VortexVideoSink)(void* user, const uint8_t* rgb, int width, int height);
typedef struct VortexVideoDecode {
  const char* path;
  VortexVideoSink sink;
  void* user;
  int64_t max_pixels;     // a frame of more pixels is refused (also handed to the decoder)
  int width, height;      // out: the coded size
  double fps;             // out: the stream's average rate, else its guessed rate (PyAV's average_rate or guessed_rate)
  double rotation;        // out
  int64_t frames;         // out: frames handed to the sink
  char pixel_format[32];  // out: the decoder's pixel format
} VortexVideoDecode;

int vortex_ffmpeg_abi_version(void);
// Opens the file, both encoders and the header; *out owns everything (release with vortex_ffmpeg_stream_free).
int vortex_ffmpeg_stream_open(const VortexMp4StreamRequest* request, VortexMp4Stream** out, VortexMp4EncoderInfo* info,
                              char* error, size_t error_size);
// Encodes `frames` I420 frames (contiguous, each its Y plane [height, width] then U and V [height / 2, width / 2];
// src/media/yuv420.h makes them), interleaving the audio up to their time.
int vortex_ffmpeg_stream_write_i420(VortexMp4Stream* stream, const uint8_t* i420, int frames, char* error,
                                    size_t error_size);
// Flushes both encoders, writes the remaining audio and the trailer, closes the file.
int vortex_ffmpeg_stream_finish(VortexMp4Stream* stream, char* error, size_t error_size);
void vortex_ffmpeg_stream_free(VortexMp4Stream* stream);
// Decodes one still image (see VortexImageDecode).
int vortex_ffmpeg_decode_image(VortexImageDecode* request, char* error, size_t error_size);
int vortex_ffmpeg_probe(const char* path, VortexMediaInfo* info, char* error, size_t error_size);
// Decodes one audio stream (see VortexAudioDecode).
int vortex_ffmpeg_decode_audio(VortexAudioDecode* request, char* error, size_t error_size);
// Decodes one video stream (see VortexVideoDecode).
int vortex_ffmpeg_decode_video(VortexVideoDecode* request, char* error, size_t error_size);

#ifdef __cplusplus
}
#endif
