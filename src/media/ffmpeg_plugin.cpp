// libvortex_ffmpeg.so: H.264 (h264_nvenc when the driver offers it, else libx264) + AAC in MP4, written as a
// stream of frames, and a probe, behind the C interface of ffmpeg_plugin.h. Every FFmpeg call is checked; errors name
// the call and carry av_strerror's text. Codes are vortex::ErrorCode values (kIo = 3, kUnsupported = 5, kOutOfMemory =
// 6, kInternal = 11), pinned by a static_assert in mp4_writer.cpp.
#include "media/ffmpeg_plugin.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

namespace {

constexpr int kIo = 3, kUnsupported = 5, kOutOfMemory = 6, kInternal = 11;

struct Error {
  int code = 0;
  std::string message;
  bool ok() const { return code == 0; }
};

std::string av_err(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(code, buf, sizeof(buf));
  return buf;
}

Error av_check(int ret, const std::string& what) {
  if (ret >= 0) return {};
  return {kIo, what + " failed: " + av_err(ret)};
}

#define RETURN_IF_FAILED(expr) \
  do {                         \
    Error e_ = (expr);         \
    if (!e_.ok()) return e_;   \
  } while (0)

int report(const Error& e, char* error, size_t error_size) {
  if (!e.ok() && error && error_size) std::snprintf(error, error_size, "%s", e.message.c_str());
  return e.code;
}

void copy_name(char (&dst)[32], const char* src) { std::snprintf(dst, sizeof(dst), "%s", src ? src : ""); }

struct Encoder {
  AVCodecContext* ctx = nullptr;
  AVStream* stream = nullptr;
  ~Encoder() { avcodec_free_context(&ctx); }
};

struct Muxer {
  AVFormatContext* oc = nullptr;
  bool io_open = false;
  ~Muxer() {
    if (oc) {
      if (io_open) avio_closep(&oc->pb);
      avformat_free_context(oc);
    }
  }
};

// Sends `frame` (nullptr flushes) and writes every packet it yields.
Error encode_and_write(Muxer& mux, Encoder& enc, AVFrame* frame) {
  RETURN_IF_FAILED(av_check(avcodec_send_frame(enc.ctx, frame), "avcodec_send_frame"));
  std::unique_ptr<AVPacket, void (*)(AVPacket*)> pkt(av_packet_alloc(), [](AVPacket* p) { av_packet_free(&p); });
  if (!pkt) return {kOutOfMemory, "av_packet_alloc failed"};
  while (true) {
    const int ret = avcodec_receive_packet(enc.ctx, pkt.get());
    if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return {};
    RETURN_IF_FAILED(av_check(ret, "avcodec_receive_packet"));
    av_packet_rescale_ts(pkt.get(), enc.ctx->time_base, enc.stream->time_base);
    pkt->stream_index = enc.stream->index;
    RETURN_IF_FAILED(av_check(av_interleaved_write_frame(mux.oc, pkt.get()), "av_interleaved_write_frame"));
  }
}

void set_text(char* dst, size_t n, const std::string& src) { std::snprintf(dst, n, "%s", src.c_str()); }

}  // namespace

// One MP4 being written: the muxer, both encoders, the colour converter and the audio still to interleave.
struct VortexMp4Stream {
  Muxer mux;
  Encoder venc, aenc;
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> vframe{nullptr, [](AVFrame* f) { av_frame_free(&f); }};
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> aframe{nullptr, [](AVFrame* f) { av_frame_free(&f); }};
  std::unique_ptr<SwsContext, void (*)(SwsContext*)> sws{nullptr, sws_freeContext};
  std::vector<float> audio;  // [2, samples] planar
  int64_t samples = 0, next_sample = 0;
  int sample_rate = 0, fps = 24, width = 0, height = 0, frame_size = 1024;
  int64_t next_video = 0;
  bool finished = false;
};

namespace {

// Opens `name` on venc for the request; on failure venc.ctx is freed and the error returned.
Error open_video_encoder(VortexMp4Stream& s, const VortexMp4StreamRequest& r, const char* name, std::string& settings) {
  const AVCodec* codec = avcodec_find_encoder_by_name(name);
  if (!codec) return {kUnsupported, std::string("this FFmpeg has no ") + name + " encoder"};
  avcodec_free_context(&s.venc.ctx);
  s.venc.ctx = avcodec_alloc_context3(codec);
  if (!s.venc.ctx) return {kOutOfMemory, "could not allocate the video encoder"};
  AVCodecContext* c = s.venc.ctx;
  c->width = r.width;
  c->height = r.height;
  c->time_base = AVRational{1, r.fps};
  c->framerate = AVRational{r.fps, 1};
  c->pix_fmt = AV_PIX_FMT_YUV420P;
  c->color_range = AVCOL_RANGE_MPEG;
  c->colorspace = AVCOL_SPC_BT709;
  c->color_primaries = AVCOL_PRI_BT709;
  c->color_trc = AVCOL_TRC_BT709;
  if (s.mux.oc->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  const std::string crf = std::to_string(r.crf);
  if (std::strcmp(name, "h264_nvenc") == 0) {
    // Constant-quality VBR (the NVENC analogue of x264's CRF): rc vbr, cq = crf, no bitrate cap.
    const char* preset = r.nvenc_preset && *r.nvenc_preset ? r.nvenc_preset : "p5";
    av_opt_set(c->priv_data, "preset", preset, 0);
    av_opt_set(c->priv_data, "tune", "hq", 0);
    av_opt_set(c->priv_data, "rc", "vbr", 0);
    av_opt_set(c->priv_data, "cq", crf.c_str(), 0);
    av_opt_set(c->priv_data, "profile", "high", 0);
    c->bit_rate = 0;
    settings = std::string("preset ") + preset + ", tune hq, rc vbr, cq " + crf + ", profile high, yuv420p bt709";
  } else {
    av_opt_set(c->priv_data, "crf", crf.c_str(), 0);
    av_opt_set(c->priv_data, "preset", r.preset, 0);
    settings = std::string("preset ") + r.preset + ", crf " + crf + ", yuv420p bt709";
  }
  // A refused NVENC session (no driver library, a GPU without an encoder engine) is an expected outcome of
  // "auto": FFmpeg's own error lines are silenced and the reason is returned for run.json instead.
  const bool nvenc = std::strcmp(name, "h264_nvenc") == 0;
  const int level = av_log_get_level();
  if (nvenc) av_log_set_level(AV_LOG_QUIET);
  const int ret = avcodec_open2(c, codec, nullptr);
  if (nvenc) av_log_set_level(level);
  if (ret < 0) {
    avcodec_free_context(&s.venc.ctx);
    return {kUnsupported, std::string("avcodec_open2(") + name + ") failed: " + av_err(ret)};
  }
  return {};
}

Error stream_open(const VortexMp4StreamRequest& r, VortexMp4Stream& s, VortexMp4EncoderInfo& info) {
  const bool with_audio = r.audio != nullptr;
  av_log_set_level(AV_LOG_ERROR);  // x264's banner and stats would clutter stderr; errors still print
  s.width = r.width;
  s.height = r.height;
  s.fps = r.fps;
  RETURN_IF_FAILED(av_check(avformat_alloc_output_context2(&s.mux.oc, nullptr, "mp4", r.path),
                            "avformat_alloc_output_context2(mp4)"));
  // ---- video: h264_nvenc or libx264 ----
  const std::string want = r.video_encoder && *r.video_encoder ? r.video_encoder : "auto";
  if (want != "auto" && want != "libx264" && want != "h264_nvenc")
    return {kUnsupported, "unknown video encoder '" + want + "' (auto, libx264, h264_nvenc)"};
  s.venc.stream = avformat_new_stream(s.mux.oc, nullptr);
  if (!s.venc.stream) return {kOutOfMemory, "could not allocate the video stream"};
  std::string settings;
  if (want == "auto" || want == "h264_nvenc") {
    Error e = open_video_encoder(s, r, "h264_nvenc", settings);
    if (e.ok()) {
      set_text(info.encoder, sizeof(info.encoder), "h264_nvenc");
    } else if (want == "h264_nvenc") {
      return e;
    } else {
      set_text(info.fallback, sizeof(info.fallback), e.message);
    }
  }
  if (!s.venc.ctx) {
    Error e = open_video_encoder(s, r, "libx264", settings);
    if (!e.ok())
      return {e.code, e.message + (want == "auto" ? "; install FFmpeg with libx264 (scripts/bootstrap.sh)" : "")};
    set_text(info.encoder, sizeof(info.encoder), "libx264");
  }
  set_text(info.settings, sizeof(info.settings), settings);
  RETURN_IF_FAILED(av_check(avcodec_parameters_from_context(s.venc.stream->codecpar, s.venc.ctx),
                            "avcodec_parameters_from_context"));
  s.venc.stream->time_base = s.venc.ctx->time_base;
  s.venc.stream->avg_frame_rate = s.venc.ctx->framerate;
  // ---- audio: AAC ----
  if (with_audio) {
    const AVCodec* acodec = avcodec_find_encoder(AV_CODEC_ID_AAC);
    if (!acodec) return {kUnsupported, "this FFmpeg has no AAC encoder"};
    s.aenc.stream = avformat_new_stream(s.mux.oc, nullptr);
    s.aenc.ctx = avcodec_alloc_context3(acodec);
    if (!s.aenc.stream || !s.aenc.ctx) return {kOutOfMemory, "could not allocate the audio stream"};
    s.aenc.ctx->sample_fmt = AV_SAMPLE_FMT_FLTP;
    s.aenc.ctx->sample_rate = r.sample_rate;
    av_channel_layout_default(&s.aenc.ctx->ch_layout, 2);
    s.aenc.ctx->bit_rate = r.audio_bitrate;
    s.aenc.ctx->time_base = AVRational{1, r.sample_rate};
    if (s.mux.oc->oformat->flags & AVFMT_GLOBALHEADER) s.aenc.ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    RETURN_IF_FAILED(av_check(avcodec_open2(s.aenc.ctx, acodec, nullptr), "avcodec_open2(aac)"));
    RETURN_IF_FAILED(av_check(avcodec_parameters_from_context(s.aenc.stream->codecpar, s.aenc.ctx),
                              "avcodec_parameters_from_context"));
    s.aenc.stream->time_base = s.aenc.ctx->time_base;
    s.samples = r.samples;
    s.sample_rate = r.sample_rate;
    s.audio.assign(r.audio, r.audio + 2 * r.samples);
    s.frame_size = s.aenc.ctx->frame_size > 0 ? s.aenc.ctx->frame_size : 1024;
  }
  RETURN_IF_FAILED(
      av_check(avio_open(&s.mux.oc->pb, r.path, AVIO_FLAG_WRITE), std::string("avio_open(") + r.path + ")"));
  s.mux.io_open = true;
  RETURN_IF_FAILED(av_check(avformat_write_header(s.mux.oc, nullptr), "avformat_write_header"));
  s.vframe.reset(av_frame_alloc());
  s.aframe.reset(av_frame_alloc());
  if (!s.vframe || !s.aframe) return {kOutOfMemory, "av_frame_alloc failed"};
  s.vframe->format = AV_PIX_FMT_YUV420P;
  s.vframe->width = r.width;
  s.vframe->height = r.height;
  RETURN_IF_FAILED(av_check(av_frame_get_buffer(s.vframe.get(), 0), "av_frame_get_buffer(video)"));
  // Full-range RGB in, BT.709 limited-range YUV out (what players assume for HD H.264).
  s.sws.reset(sws_getContext(r.width, r.height, AV_PIX_FMT_RGB24, r.width, r.height, AV_PIX_FMT_YUV420P, SWS_BICUBIC,
                             nullptr, nullptr, nullptr));
  if (!s.sws) return {kInternal, "sws_getContext(rgb24 -> yuv420p) failed"};
  const int* coefs = sws_getCoefficients(SWS_CS_ITU709);
  sws_setColorspaceDetails(s.sws.get(), coefs, 1, coefs, 0, 0, 1 << 16, 1 << 16);
  return {};
}

// Encodes audio frames while their start time is at or before `until_s` (interleaving by presentation time, so
// the muxer never buffers a whole stream).
Error write_audio_until(VortexMp4Stream& s, double until_s) {
  while (s.next_sample < s.samples && static_cast<double>(s.next_sample) / s.sample_rate <= until_s) {
    const int n = static_cast<int>(std::min<int64_t>(s.frame_size, s.samples - s.next_sample));
    av_frame_unref(s.aframe.get());
    s.aframe->format = AV_SAMPLE_FMT_FLTP;
    s.aframe->sample_rate = s.sample_rate;
    s.aframe->nb_samples = n;
    RETURN_IF_FAILED(
        av_check(av_channel_layout_copy(&s.aframe->ch_layout, &s.aenc.ctx->ch_layout), "av_channel_layout_copy"));
    RETURN_IF_FAILED(av_check(av_frame_get_buffer(s.aframe.get(), 0), "av_frame_get_buffer(audio)"));
    for (int c = 0; c < 2; ++c)
      std::memcpy(s.aframe->data[c], s.audio.data() + c * s.samples + s.next_sample,
                  static_cast<size_t>(n) * sizeof(float));
    s.aframe->pts = s.next_sample;
    s.next_sample += n;
    RETURN_IF_FAILED(encode_and_write(s.mux, s.aenc, s.aframe.get()));
  }
  return {};
}

Error stream_write(VortexMp4Stream& s, const uint8_t* rgb, int frames) {
  if (s.finished) return {kInternal, "vortex_ffmpeg_stream_write after finish"};
  for (int i = 0; i < frames; ++i) {
    RETURN_IF_FAILED(write_audio_until(s, static_cast<double>(s.next_video) / s.fps));
    RETURN_IF_FAILED(av_check(av_frame_make_writable(s.vframe.get()), "av_frame_make_writable"));
    const uint8_t* src[1] = {rgb + static_cast<size_t>(i) * s.height * s.width * 3};
    const int stride[1] = {s.width * 3};
    sws_scale(s.sws.get(), src, stride, 0, s.height, s.vframe->data, s.vframe->linesize);
    s.vframe->pts = s.next_video++;
    RETURN_IF_FAILED(encode_and_write(s.mux, s.venc, s.vframe.get()));
  }
  return {};
}

Error stream_finish(VortexMp4Stream& s) {
  if (s.finished) return {kInternal, "vortex_ffmpeg_stream_finish called twice"};
  s.finished = true;
  RETURN_IF_FAILED(encode_and_write(s.mux, s.venc, nullptr));
  if (s.aenc.ctx) {
    RETURN_IF_FAILED(write_audio_until(s, 1e300));
    RETURN_IF_FAILED(encode_and_write(s.mux, s.aenc, nullptr));
  }
  RETURN_IF_FAILED(av_check(av_write_trailer(s.mux.oc), "av_write_trailer"));
  RETURN_IF_FAILED(av_check(avio_closep(&s.mux.oc->pb), "avio_close"));
  s.mux.io_open = false;
  return {};
}

Error probe(const char* path, VortexMediaInfo& info) {
  AVFormatContext* fc = nullptr;
  RETURN_IF_FAILED(
      av_check(avformat_open_input(&fc, path, nullptr, nullptr), std::string("avformat_open_input(") + path + ")"));
  std::unique_ptr<AVFormatContext*, void (*)(AVFormatContext**)> guard(&fc, avformat_close_input);
  RETURN_IF_FAILED(av_check(avformat_find_stream_info(fc, nullptr), "avformat_find_stream_info"));
  info = VortexMediaInfo{};
  info.streams = static_cast<int>(fc->nb_streams);
  info.duration_s = fc->duration > 0 ? static_cast<double>(fc->duration) / AV_TIME_BASE : 0.0;
  int vindex = -1;
  for (unsigned i = 0; i < fc->nb_streams; ++i) {
    const AVStream* s = fc->streams[i];
    const AVCodecParameters* p = s->codecpar;
    if (p->codec_type == AVMEDIA_TYPE_VIDEO) {
      vindex = static_cast<int>(i);
      copy_name(info.video_codec, avcodec_get_name(p->codec_id));
      copy_name(info.pixel_format, av_get_pix_fmt_name(static_cast<AVPixelFormat>(p->format)));
      info.width = p->width;
      info.height = p->height;
      info.fps = s->avg_frame_rate.den ? av_q2d(s->avg_frame_rate) : 0.0;
    } else if (p->codec_type == AVMEDIA_TYPE_AUDIO) {
      copy_name(info.audio_codec, avcodec_get_name(p->codec_id));
      info.sample_rate = p->sample_rate;
      info.channels = p->ch_layout.nb_channels;
      if (s->duration > 0) info.audio_duration_s = static_cast<double>(s->duration) * av_q2d(s->time_base);
    }
  }
  std::unique_ptr<AVPacket, void (*)(AVPacket*)> pkt(av_packet_alloc(), [](AVPacket* p) { av_packet_free(&p); });
  if (!pkt) return {kOutOfMemory, "av_packet_alloc failed"};
  while (av_read_frame(fc, pkt.get()) >= 0) {
    if (pkt->stream_index == vindex) ++info.video_frames;
    av_packet_unref(pkt.get());
  }
  return {};
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_abi_version(void) {
  return VORTEX_FFMPEG_ABI_VERSION;
}

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_stream_open(const VortexMp4StreamRequest* request,
                                                                                VortexMp4Stream** out,
                                                                                VortexMp4EncoderInfo* info, char* error,
                                                                                size_t error_size) {
  if (!request || !request->path || !out || !info)
    return report({kInternal, "vortex_ffmpeg_stream_open: null argument"}, error, error_size);
  *out = nullptr;
  *info = VortexMp4EncoderInfo{};
  auto s = std::make_unique<VortexMp4Stream>();
  const int code = report(stream_open(*request, *s, *info), error, error_size);
  if (code == 0) *out = s.release();
  return code;
}

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_stream_write(VortexMp4Stream* stream,
                                                                                 const uint8_t* rgb, int frames,
                                                                                 char* error, size_t error_size) {
  if (!stream || (!rgb && frames > 0) || frames < 0)
    return report({kInternal, "vortex_ffmpeg_stream_write: bad argument"}, error, error_size);
  return report(stream_write(*stream, rgb, frames), error, error_size);
}

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_stream_finish(VortexMp4Stream* stream, char* error,
                                                                                  size_t error_size) {
  if (!stream) return report({kInternal, "vortex_ffmpeg_stream_finish: null stream"}, error, error_size);
  return report(stream_finish(*stream), error, error_size);
}

extern "C" __attribute__((visibility("default"))) void vortex_ffmpeg_stream_free(VortexMp4Stream* stream) {
  delete stream;
}

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_probe(const char* path, VortexMediaInfo* info,
                                                                          char* error, size_t error_size) {
  if (!path || !info) return report({kInternal, "vortex_ffmpeg_probe: null argument"}, error, error_size);
  return report(probe(path, *info), error, error_size);
}
