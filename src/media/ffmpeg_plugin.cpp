// libvortex_ffmpeg.so: H.264 (libx264) + AAC in MP4, and a probe, behind the C interface of
// ffmpeg_plugin.h. Every FFmpeg call is checked; errors name the call and carry av_strerror's text.
// Codes are vortex::ErrorCode values (kIo = 3, kUnsupported = 5, kOutOfMemory = 6, kInternal = 11),
// pinned by a static_assert in mp4_writer.cpp.
#include "media/ffmpeg_plugin.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

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

Error write_mp4(const VortexMp4Request& r) {
  const int nf = r.frames, h = r.height, w = r.width;
  const bool with_audio = r.audio != nullptr;
  av_log_set_level(AV_LOG_ERROR);  // x264's banner and stats would clutter stderr; errors still print
  Muxer mux;
  RETURN_IF_FAILED(
      av_check(avformat_alloc_output_context2(&mux.oc, nullptr, "mp4", r.path), "avformat_alloc_output_context2(mp4)"));
  // ---- video: libx264 ----
  Encoder venc;
  const AVCodec* vcodec = avcodec_find_encoder_by_name("libx264");
  if (!vcodec)
    return {kUnsupported, "this FFmpeg has no libx264 encoder; install FFmpeg with libx264 (scripts/bootstrap.sh)"};
  venc.stream = avformat_new_stream(mux.oc, nullptr);
  venc.ctx = avcodec_alloc_context3(vcodec);
  if (!venc.stream || !venc.ctx) return {kOutOfMemory, "could not allocate the video stream"};
  venc.ctx->width = w;
  venc.ctx->height = h;
  venc.ctx->time_base = AVRational{1, r.fps};
  venc.ctx->framerate = AVRational{r.fps, 1};
  venc.ctx->pix_fmt = AV_PIX_FMT_YUV420P;
  venc.ctx->color_range = AVCOL_RANGE_MPEG;
  venc.ctx->colorspace = AVCOL_SPC_BT709;
  venc.ctx->color_primaries = AVCOL_PRI_BT709;
  venc.ctx->color_trc = AVCOL_TRC_BT709;
  if (mux.oc->oformat->flags & AVFMT_GLOBALHEADER) venc.ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  av_opt_set(venc.ctx->priv_data, "crf", std::to_string(r.crf).c_str(), 0);
  av_opt_set(venc.ctx->priv_data, "preset", r.preset, 0);
  RETURN_IF_FAILED(av_check(avcodec_open2(venc.ctx, vcodec, nullptr), "avcodec_open2(libx264)"));
  RETURN_IF_FAILED(
      av_check(avcodec_parameters_from_context(venc.stream->codecpar, venc.ctx), "avcodec_parameters_from_context"));
  venc.stream->time_base = venc.ctx->time_base;
  venc.stream->avg_frame_rate = venc.ctx->framerate;
  // ---- audio: AAC ----
  Encoder aenc;
  if (with_audio) {
    const AVCodec* acodec = avcodec_find_encoder(AV_CODEC_ID_AAC);
    if (!acodec) return {kUnsupported, "this FFmpeg has no AAC encoder"};
    aenc.stream = avformat_new_stream(mux.oc, nullptr);
    aenc.ctx = avcodec_alloc_context3(acodec);
    if (!aenc.stream || !aenc.ctx) return {kOutOfMemory, "could not allocate the audio stream"};
    aenc.ctx->sample_fmt = AV_SAMPLE_FMT_FLTP;
    aenc.ctx->sample_rate = r.sample_rate;
    av_channel_layout_default(&aenc.ctx->ch_layout, 2);
    aenc.ctx->bit_rate = r.audio_bitrate;
    aenc.ctx->time_base = AVRational{1, r.sample_rate};
    if (mux.oc->oformat->flags & AVFMT_GLOBALHEADER) aenc.ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    RETURN_IF_FAILED(av_check(avcodec_open2(aenc.ctx, acodec, nullptr), "avcodec_open2(aac)"));
    RETURN_IF_FAILED(
        av_check(avcodec_parameters_from_context(aenc.stream->codecpar, aenc.ctx), "avcodec_parameters_from_context"));
    aenc.stream->time_base = aenc.ctx->time_base;
  }
  RETURN_IF_FAILED(av_check(avio_open(&mux.oc->pb, r.path, AVIO_FLAG_WRITE), std::string("avio_open(") + r.path + ")"));
  mux.io_open = true;
  RETURN_IF_FAILED(av_check(avformat_write_header(mux.oc, nullptr), "avformat_write_header"));

  std::unique_ptr<AVFrame, void (*)(AVFrame*)> vframe(av_frame_alloc(), [](AVFrame* f) { av_frame_free(&f); });
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> aframe(av_frame_alloc(), [](AVFrame* f) { av_frame_free(&f); });
  if (!vframe || !aframe) return {kOutOfMemory, "av_frame_alloc failed"};
  vframe->format = AV_PIX_FMT_YUV420P;
  vframe->width = w;
  vframe->height = h;
  RETURN_IF_FAILED(av_check(av_frame_get_buffer(vframe.get(), 0), "av_frame_get_buffer(video)"));
  // Full-range RGB in, BT.709 limited-range YUV out (what players assume for HD H.264).
  std::unique_ptr<SwsContext, void (*)(SwsContext*)> sws(
      sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, AV_PIX_FMT_YUV420P, SWS_BICUBIC, nullptr, nullptr, nullptr),
      sws_freeContext);
  if (!sws) return {kInternal, "sws_getContext(rgb24 -> yuv420p) failed"};
  const int* coefs = sws_getCoefficients(SWS_CS_ITU709);
  sws_setColorspaceDetails(sws.get(), coefs, 1, coefs, 0, 0, 1 << 16, 1 << 16);

  const int64_t samples = with_audio ? r.samples : 0;
  const int frame_size = with_audio && aenc.ctx->frame_size > 0 ? aenc.ctx->frame_size : 1024;
  int next_video = 0;
  int64_t next_sample = 0;
  while (next_video < nf || next_sample < samples) {
    // Interleave by presentation time so the muxer never buffers a whole stream.
    const double tv = next_video < nf ? static_cast<double>(next_video) / r.fps : 1e300;
    const double ta = next_sample < samples ? static_cast<double>(next_sample) / r.sample_rate : 1e300;
    if (tv <= ta) {
      RETURN_IF_FAILED(av_check(av_frame_make_writable(vframe.get()), "av_frame_make_writable"));
      const uint8_t* src[1] = {r.rgb + static_cast<size_t>(next_video) * h * w * 3};
      const int stride[1] = {w * 3};
      sws_scale(sws.get(), src, stride, 0, h, vframe->data, vframe->linesize);
      vframe->pts = next_video++;
      RETURN_IF_FAILED(encode_and_write(mux, venc, vframe.get()));
    } else {
      const int n = static_cast<int>(std::min<int64_t>(frame_size, samples - next_sample));
      av_frame_unref(aframe.get());
      aframe->format = AV_SAMPLE_FMT_FLTP;
      aframe->sample_rate = r.sample_rate;
      aframe->nb_samples = n;
      RETURN_IF_FAILED(
          av_check(av_channel_layout_copy(&aframe->ch_layout, &aenc.ctx->ch_layout), "av_channel_layout_copy"));
      RETURN_IF_FAILED(av_check(av_frame_get_buffer(aframe.get(), 0), "av_frame_get_buffer(audio)"));
      for (int c = 0; c < 2; ++c)
        std::memcpy(aframe->data[c], r.audio + c * samples + next_sample, static_cast<size_t>(n) * sizeof(float));
      aframe->pts = next_sample;
      next_sample += n;
      RETURN_IF_FAILED(encode_and_write(mux, aenc, aframe.get()));
    }
  }
  RETURN_IF_FAILED(encode_and_write(mux, venc, nullptr));
  if (with_audio) RETURN_IF_FAILED(encode_and_write(mux, aenc, nullptr));
  RETURN_IF_FAILED(av_check(av_write_trailer(mux.oc), "av_write_trailer"));
  RETURN_IF_FAILED(av_check(avio_closep(&mux.oc->pb), "avio_close"));
  mux.io_open = false;
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

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_write_mp4(const VortexMp4Request* request,
                                                                              char* error, size_t error_size) {
  if (!request || !request->path || !request->rgb)
    return report({kInternal, "vortex_ffmpeg_write_mp4: null request"}, error, error_size);
  return report(write_mp4(*request), error, error_size);
}

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_probe(const char* path, VortexMediaInfo* info,
                                                                          char* error, size_t error_size) {
  if (!path || !info) return report({kInternal, "vortex_ffmpeg_probe: null argument"}, error, error_size);
  return report(probe(path, *info), error, error_size);
}
