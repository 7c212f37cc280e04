// MP4 writer and probe (see mp4_writer.h): arguments are checked here, then the work goes to
// libvortex_ffmpeg.so (ffmpeg_plugin.cpp), loaded once with dlopen. The temp file is removed on any
// failure, so `path` is either complete or untouched.
#include "media/mp4_writer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "media/atomic_file.h"
#include "media/ffmpeg_module.h"
#include "media/ffmpeg_plugin.h"
#include "media/yuv420.h"

namespace vortex {
namespace {

static_assert(static_cast<int>(ErrorCode::kIo) == 3 && static_cast<int>(ErrorCode::kUnsupported) == 5 &&
                  static_cast<int>(ErrorCode::kOutOfMemory) == 6 && static_cast<int>(ErrorCode::kInternal) == 11,
              "ffmpeg_plugin.cpp returns these ErrorCode values");

constexpr const char* kPluginName = "libvortex_ffmpeg.so";

struct Plugin {
  Status status;
  decltype(&vortex_ffmpeg_stream_open) open = nullptr;
  decltype(&vortex_ffmpeg_stream_write_i420) write_i420 = nullptr;
  decltype(&vortex_ffmpeg_stream_finish) finish = nullptr;
  decltype(&vortex_ffmpeg_stream_free) free = nullptr;
  decltype(&vortex_ffmpeg_probe) probe = nullptr;
  decltype(&vortex_ffmpeg_decode_image) decode_image = nullptr;
  decltype(&vortex_ffmpeg_decode_audio) decode_audio = nullptr;
  decltype(&vortex_ffmpeg_decode_video) decode_video = nullptr;
};

// Candidates in order: $VORTEX_FFMPEG_PLUGIN, next to the executable, <exe>/../lib/vortex, the loader path.
std::vector<std::string> plugin_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("VORTEX_FFMPEG_PLUGIN"); env && *env) return {env};
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / kPluginName).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / "vortex" / kPluginName).string());
  }
  out.push_back(kPluginName);
  return out;
}

Plugin load_plugin() {
  Plugin p;
  std::string tried;
  for (const std::string& path : plugin_candidates()) {
    const bool explicit_path = path.find('/') != std::string::npos;
    if (explicit_path && !std::filesystem::exists(path)) {
      tried += "\n  " + path + ": no such file";
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      tried += "\n  " + path + ": " + dlerror();
      continue;
    }
    auto abi = reinterpret_cast<decltype(&vortex_ffmpeg_abi_version)>(dlsym(handle, "vortex_ffmpeg_abi_version"));
    p.open = reinterpret_cast<decltype(&vortex_ffmpeg_stream_open)>(dlsym(handle, "vortex_ffmpeg_stream_open"));
    p.write_i420 =
        reinterpret_cast<decltype(&vortex_ffmpeg_stream_write_i420)>(dlsym(handle, "vortex_ffmpeg_stream_write_i420"));
    p.finish = reinterpret_cast<decltype(&vortex_ffmpeg_stream_finish)>(dlsym(handle, "vortex_ffmpeg_stream_finish"));
    p.free = reinterpret_cast<decltype(&vortex_ffmpeg_stream_free)>(dlsym(handle, "vortex_ffmpeg_stream_free"));
    p.probe = reinterpret_cast<decltype(&vortex_ffmpeg_probe)>(dlsym(handle, "vortex_ffmpeg_probe"));
    p.decode_image =
        reinterpret_cast<decltype(&vortex_ffmpeg_decode_image)>(dlsym(handle, "vortex_ffmpeg_decode_image"));
    p.decode_audio =
        reinterpret_cast<decltype(&vortex_ffmpeg_decode_audio)>(dlsym(handle, "vortex_ffmpeg_decode_audio"));
    p.decode_video =
        reinterpret_cast<decltype(&vortex_ffmpeg_decode_video)>(dlsym(handle, "vortex_ffmpeg_decode_video"));
    if (!abi || !p.open || !p.write_i420 || !p.finish || !p.free || !p.probe || !p.decode_image || !p.decode_audio ||
        !p.decode_video || abi() != VORTEX_FFMPEG_ABI_VERSION) {
      tried += "\n  " + path + ": not a matching Vortex FFmpeg module (ABI " +
               std::to_string(VORTEX_FFMPEG_ABI_VERSION) + ")";
      dlclose(handle);
      p = Plugin{};
      continue;
    }
    return p;  // the handle stays open for the life of the process
  }
  p.status = unsupported(
      "MP4 output needs FFmpeg's shared libraries (libavformat, libavcodec with libx264, libswscale; "
      "Debian: apt install libavformat59 libavcodec59 libswscale6) and Vortex's " +
      std::string(kPluginName) +
      ", which could not be loaded:" + (tried.empty() ? std::string("\n  (no candidate found)") : tried) +
      "\nKeyframe images (PNG, JPEG, WebP) are read through it too; WAV and --frames-dir PNG output do not need "
      "FFmpeg.");
  return p;
}

const Plugin& plugin() {
  static const Plugin p = load_plugin();
  return p;
}

Status from_plugin(int code, const char* message) {
  if (code == 0) return Status::Ok();
  return Status(static_cast<ErrorCode>(code), message);
}

}  // namespace

Status mp4_support() { return plugin().status; }

int resolved_x264_threads(const Mp4Options& opts) {
  if (opts.x264_threads > 0) return opts.x264_threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Status check_x264_preset(const std::string& name) {
  for (const char* p : kX264Presets)
    if (name == p) return Status::Ok();
  std::string all;
  for (const char* p : kX264Presets) all += std::string(all.empty() ? "" : ", ") + p;
  return invalid_argument("x264 preset must be one of " + all + ", got '" + name + "'");
}

Status check_video_encoder(const std::string& name) {
  if (name == "auto" || name == "libx264" || name == "h264_nvenc") return Status::Ok();
  return invalid_argument("video encoder must be auto, libx264 or h264_nvenc, got '" + name + "'");
}

Status Mp4Stream::check(int width, int height, const Tensor& audio, int sample_rate, const Mp4Options& opts) {
  if (height % 2 || width % 2 || height < 2 || width < 2)
    return invalid_argument("write_mp4: yuv420p needs an even frame size, got " + std::to_string(width) + "x" +
                            std::to_string(height));
  const bool with_audio = audio.defined();
  if (with_audio && (audio.ndim() != 2 || audio.dim(0) != 2 || audio.dtype() != DType::kF32 || !audio.is_contiguous()))
    return invalid_argument("write_mp4: audio must be a contiguous [2, N] f32 tensor, got " + audio.describe());
  if (with_audio && sample_rate <= 0) return invalid_argument("write_mp4: sample rate must be positive");
  if (opts.fps <= 0) return invalid_argument("write_mp4: fps must be positive");
  VORTEX_RETURN_IF_ERROR(check_video_encoder(opts.video_encoder).with_context("write_mp4"));
  VORTEX_RETURN_IF_ERROR(check_x264_preset(opts.preset).with_context("write_mp4"));
  if (opts.x264_rc_lookahead < -1 || opts.x264_rc_lookahead > 250)
    return invalid_argument("write_mp4: x264 rc-lookahead must be -1 (the preset's) or 0..250, got " +
                            std::to_string(opts.x264_rc_lookahead));
  if (opts.x264_threads < 0) return invalid_argument("write_mp4: x264 threads must be 0 (the host's cores) or more");
  return mp4_support();
}

Result<std::unique_ptr<Mp4Stream>> Mp4Stream::open(const std::string& path, int width, int height, const Tensor& audio,
                                                   int sample_rate, const Mp4Options& opts) {
  VORTEX_RETURN_IF_ERROR(check(width, height, audio, sample_rate, opts));
  const bool with_audio = audio.defined();
  std::unique_ptr<Mp4Stream> s(new Mp4Stream());
  s->path_ = path;
  s->temp_ = atomic_temp_path(path);
  s->width_ = width;
  s->height_ = height;
  VortexMp4StreamRequest req{};
  req.path = s->temp_.c_str();
  req.height = height;
  req.width = width;
  req.fps = opts.fps;
  req.audio = with_audio ? audio.data<float>() : nullptr;
  req.samples = with_audio ? audio.dim(1) : 0;
  req.sample_rate = sample_rate;
  req.video_encoder = opts.video_encoder.c_str();
  req.crf = opts.crf;
  req.preset = opts.preset.c_str();
  req.x264_threads = resolved_x264_threads(opts);
  req.x264_rc_lookahead = opts.x264_rc_lookahead;
  req.nvenc_preset = opts.nvenc_preset.c_str();
  req.audio_bitrate = opts.audio_bitrate;
  VortexMp4EncoderInfo info{};
  VortexMp4Stream* handle = nullptr;
  char error[1024] = {0};
  Status st = from_plugin(plugin().open(&req, &handle, &info, error, sizeof(error)), error);
  s->stream_ = handle;  // freed (and the temp file removed) by the destructor, also on failure
  if (!st.ok()) return st;
  s->info_ = Mp4EncoderInfo{info.encoder, info.settings, info.fallback};
  return s;
}

Mp4Stream::~Mp4Stream() {
  if (stream_) plugin().free(static_cast<VortexMp4Stream*>(stream_));
  if (!done_ && !temp_.empty()) std::remove(temp_.c_str());
}

Status Mp4Stream::write(const Tensor& frames) {
  if (done_ || !stream_) return internal_error("write_mp4: the stream is finished");
  if (!frames.defined() || frames.ndim() != 4 || frames.dim(3) != 3 || frames.dtype() != DType::kU8 ||
      !frames.is_contiguous() || frames.dim(1) != height_ || frames.dim(2) != width_)
    return invalid_argument("write_mp4: frames must be a contiguous [F, " + std::to_string(height_) + ", " +
                            std::to_string(width_) + ", 3] u8 tensor, got " +
                            (frames.defined() ? frames.describe() : std::string("nothing")));
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  VORTEX_ASSIGN_OR_RETURN(Tensor i420, rgb8_to_i420(frames, threads));  // [F, H * W * 3 / 2]
  return write_i420(i420);
}

Status Mp4Stream::write_i420(const Tensor& frames) {
  if (done_ || !stream_) return internal_error("write_mp4: the stream is finished");
  if (!frames.defined() || frames.ndim() != 2 || frames.dtype() != DType::kU8 || !frames.is_contiguous() ||
      frames.dim(1) != i420_frame_bytes(width_, height_))
    return invalid_argument("write_mp4: I420 frames must be a contiguous [F, " +
                            std::to_string(i420_frame_bytes(width_, height_)) + "] u8 tensor, got " +
                            (frames.defined() ? frames.describe() : std::string("nothing")));
  char error[1024] = {0};
  VORTEX_RETURN_IF_ERROR(from_plugin(plugin().write_i420(static_cast<VortexMp4Stream*>(stream_), frames.data<uint8_t>(),
                                                         static_cast<int>(frames.dim(0)), error, sizeof(error)),
                                     error));
  frames_ += frames.dim(0);
  return Status::Ok();
}

Status Mp4Stream::finish() {
  if (done_ || !stream_) return internal_error("write_mp4: the stream is finished");
  if (frames_ < 1) return invalid_argument("write_mp4: no frames were written");
  char error[1024] = {0};
  Status st = from_plugin(plugin().finish(static_cast<VortexMp4Stream*>(stream_), error, sizeof(error)), error);
  plugin().free(static_cast<VortexMp4Stream*>(stream_));
  stream_ = nullptr;
  if (st.ok()) st = atomic_commit(temp_, path_);
  if (!st.ok()) return st;  // the destructor removes the temp file
  done_ = true;
  return Status::Ok();
}

Status write_mp4(const std::string& path, const Tensor& frames, const Tensor& audio, int sample_rate,
                 const Mp4Options& opts, Mp4EncoderInfo* info) {
  if (!frames.defined() || frames.ndim() != 4 || frames.dim(3) != 3 || frames.dtype() != DType::kU8 ||
      !frames.is_contiguous() || frames.dim(0) < 1)
    return invalid_argument("write_mp4: frames must be a contiguous [F, H, W, 3] u8 tensor, got " +
                            (frames.defined() ? frames.describe() : std::string("nothing")));
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Mp4Stream> s,
                          Mp4Stream::open(path, static_cast<int>(frames.dim(2)), static_cast<int>(frames.dim(1)), audio,
                                          sample_rate, opts));
  VORTEX_RETURN_IF_ERROR(s->write(frames));
  VORTEX_RETURN_IF_ERROR(s->finish());
  if (info) *info = s->encoder();
  return Status::Ok();
}

Status ffmpeg_decode_image(VortexImageDecode& request) {
  VORTEX_RETURN_IF_ERROR(mp4_support());
  char error[1024] = {0};
  return from_plugin(plugin().decode_image(&request, error, sizeof(error)), error);
}

Status ffmpeg_decode_audio(VortexAudioDecode& request) {
  VORTEX_RETURN_IF_ERROR(mp4_support());
  char error[1024] = {0};
  return from_plugin(plugin().decode_audio(&request, error, sizeof(error)), error);
}

Status ffmpeg_decode_video(VortexVideoDecode& request) {
  VORTEX_RETURN_IF_ERROR(mp4_support());
  char error[1024] = {0};
  return from_plugin(plugin().decode_video(&request, error, sizeof(error)), error);
}

Result<MediaInfo> probe_media(const std::string& path) {
  VORTEX_RETURN_IF_ERROR(mp4_support());
  VortexMediaInfo c{};
  char error[1024] = {0};
  VORTEX_RETURN_IF_ERROR(from_plugin(plugin().probe(path.c_str(), &c, error, sizeof(error)), error));
  MediaInfo info;
  info.streams = c.streams;
  info.video_codec = c.video_codec;
  info.pixel_format = c.pixel_format;
  info.width = c.width;
  info.height = c.height;
  info.fps = c.fps;
  info.video_frames = c.video_frames;
  info.audio_codec = c.audio_codec;
  info.sample_rate = c.sample_rate;
  info.channels = c.channels;
  info.duration_s = c.duration_s;
  info.audio_duration_s = c.audio_duration_s;
  return info;
}

}  // namespace vortex
