// libvortex_ffmpeg.so: H.264 (h264_nvenc when the driver offers it, else libx264) + AAC in MP4, written as a
// stream of I420 frames, a probe, and still-image decoding (PNG, JPEG, WebP), behind the C interface of
// ffmpeg_plugin.h.
// Every FFmpeg call is checked; errors name the call and carry av_strerror's text. Codes are vortex::ErrorCode values
// (kIo = 3, kUnsupported = 5, kOutOfMemory = 6, kInternal = 11), pinned by a static_assert in mp4_writer.cpp.
#include "media/ffmpeg_plugin.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
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

// One MP4 being written: the muxer, both encoders and the audio still to interleave.
struct VortexMp4Stream {
  Muxer mux;
  Encoder venc, aenc;
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> vframe{nullptr, [](AVFrame* f) { av_frame_free(&f); }};
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> aframe{nullptr, [](AVFrame* f) { av_frame_free(&f); }};
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
    settings = std::string("preset ") + r.preset + ", crf " + crf;
    if (r.x264_threads > 0) {
      c->thread_count = r.x264_threads;
      settings += ", threads " + std::to_string(r.x264_threads);
    }
    if (r.x264_rc_lookahead >= 0) {
      const std::string la = std::to_string(r.x264_rc_lookahead);
      av_opt_set(c->priv_data, "rc-lookahead", la.c_str(), 0);
      settings += ", rc-lookahead " + la;
    }
    settings += ", yuv420p bt709";
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

// Frames arrive as I420 (BT.709 limited range, converted by the caller: src/media/yuv420.h) and are copied plane
// by plane into the encoder's frame.
Error stream_write_i420(VortexMp4Stream& s, const uint8_t* i420, int frames) {
  if (s.finished) return {kInternal, "vortex_ffmpeg_stream_write_i420 after finish"};
  const int cw = s.width / 2, ch = s.height / 2;
  const size_t frame_bytes = static_cast<size_t>(s.width) * s.height + 2 * static_cast<size_t>(cw) * ch;
  for (int i = 0; i < frames; ++i) {
    RETURN_IF_FAILED(write_audio_until(s, static_cast<double>(s.next_video) / s.fps));
    RETURN_IF_FAILED(av_check(av_frame_make_writable(s.vframe.get()), "av_frame_make_writable"));
    const uint8_t* plane = i420 + static_cast<size_t>(i) * frame_bytes;
    const int widths[3] = {s.width, cw, cw}, heights[3] = {s.height, ch, ch};
    for (int p = 0; p < 3; ++p) {
      for (int y = 0; y < heights[p]; ++y)
        std::memcpy(s.vframe->data[p] + static_cast<ptrdiff_t>(y) * s.vframe->linesize[p],
                    plane + static_cast<size_t>(y) * widths[p], static_cast<size_t>(widths[p]));
      plane += static_cast<size_t>(widths[p]) * heights[p];
    }
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

// ---- YCbCr to RGB as the libraries behind Pillow do it ----
// JPEG (libjpeg-turbo, jdsample.c / jdcolor.c): "fancy" triangle-filter chroma upsampling (h2v1, h2v2)
// with replicated edge rows, then 16-bit fixed-point full-range BT.601 tables.
// WebP (libwebp, dsp/upsampling.c / dsp/yuv.h / dec/io_dec.c): its own fancy upsampler over row pairs
// and the 14-bit "mulhi" limited-range conversion.
// Both are integer programs, so with the same decoded planes the RGB is the same bytes.

struct JpegTables {
  int cr_r[256], cb_b[256];
  int64_t cr_g[256], cb_g[256];
  JpegTables() {
    constexpr int kScale = 16;
    constexpr int64_t kHalf = int64_t{1} << (kScale - 1);
    auto fix = [](double x) { return static_cast<int64_t>(x * (1 << kScale) + 0.5); };
    for (int i = 0; i < 256; ++i) {
      const int64_t x = i - 128;
      cr_r[i] = static_cast<int>((fix(1.40200) * x + kHalf) >> kScale);
      cb_b[i] = static_cast<int>((fix(1.77200) * x + kHalf) >> kScale);
      cr_g[i] = -fix(0.71414) * x;
      cb_g[i] = -fix(0.34414) * x + kHalf;
    }
  }
};

inline uint8_t clamp255(int v) { return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v)); }

// One chroma row upsampled horizontally by 2 (h2v1 fancy); in: cw samples, out: 2 * cw.
void jpeg_h2v1(const uint8_t* in, int cw, uint8_t* out) {
  out[0] = in[0];
  out[1] = static_cast<uint8_t>((in[0] * 3 + in[1] + 2) >> 2);
  for (int i = 1; i < cw - 1; ++i) {
    const int v = in[i] * 3;
    out[2 * i] = static_cast<uint8_t>((v + in[i - 1] + 1) >> 2);
    out[2 * i + 1] = static_cast<uint8_t>((v + in[i + 1] + 2) >> 2);
  }
  out[2 * cw - 2] = static_cast<uint8_t>((in[cw - 1] * 3 + in[cw - 2] + 1) >> 2);
  out[2 * cw - 1] = in[cw - 1];
}

// One output row of h2v2 fancy: `near` is the chroma row of this output row, `far` the one above (upper
// output row) or below (lower); out: 2 * cw.
void jpeg_h2v2(const uint8_t* near, const uint8_t* far, int cw, uint8_t* out) {
  int this_sum = near[0] * 3 + far[0];
  int next_sum = near[1] * 3 + far[1];
  out[0] = static_cast<uint8_t>((this_sum * 4 + 8) >> 4);
  out[1] = static_cast<uint8_t>((this_sum * 3 + next_sum + 7) >> 4);
  int last_sum = this_sum;
  this_sum = next_sum;
  for (int i = 2; i < cw; ++i) {
    next_sum = near[i] * 3 + far[i];
    out[2 * i - 2] = static_cast<uint8_t>((this_sum * 3 + last_sum + 8) >> 4);
    out[2 * i - 1] = static_cast<uint8_t>((this_sum * 3 + next_sum + 7) >> 4);
    last_sum = this_sum;
    this_sum = next_sum;
  }
  out[2 * cw - 2] = static_cast<uint8_t>((this_sum * 3 + last_sum + 8) >> 4);
  out[2 * cw - 1] = static_cast<uint8_t>((this_sum * 4 + 7) >> 4);
}

// JPEG planes (chroma subsampled by sx, sy in {1, 2}) to RGB. False when the layout is not one libjpeg's
// fancy upsampler handles this way (a chroma plane narrower than 2 samples).
bool jpeg_to_rgb(const AVFrame* f, int sx, int sy, uint8_t* rgb) {
  static const JpegTables t;
  const int w = f->width, h = f->height;
  const int cw = (w + sx - 1) / sx, ch = (h + sy - 1) / sy;
  if (sx == 2 && cw < 2) return false;
  std::vector<uint8_t> cb(static_cast<size_t>(cw) * sx), cr(static_cast<size_t>(cw) * sx);
  std::vector<uint8_t> tmp_b(static_cast<size_t>(cw)), tmp_r(static_cast<size_t>(cw));
  auto plane = [&](int p, int row) { return f->data[p] + static_cast<ptrdiff_t>(row) * f->linesize[p]; };
  for (int y = 0; y < h; ++y) {
    const int crow = y / sy;
    const uint8_t *nb = plane(1, crow), *nr = plane(2, crow);
    if (sy == 2) {
      // Upper output row of a pair reads the chroma row above, the lower one the row below (edges repeat).
      const int far = (y % 2 == 0) ? std::max(crow - 1, 0) : std::min(crow + 1, ch - 1);
      const uint8_t *fb = plane(1, far), *fr = plane(2, far);
      if (sx == 2) {
        jpeg_h2v2(nb, fb, cw, cb.data());
        jpeg_h2v2(nr, fr, cw, cr.data());
      } else {  // h1v2: vertical triangle only
        for (int i = 0; i < cw; ++i) {
          cb[i] = static_cast<uint8_t>((nb[i] * 3 + fb[i] + (y % 2 == 0 ? 1 : 2)) >> 2);
          cr[i] = static_cast<uint8_t>((nr[i] * 3 + fr[i] + (y % 2 == 0 ? 1 : 2)) >> 2);
        }
      }
    } else if (sx == 2) {
      jpeg_h2v1(nb, cw, cb.data());
      jpeg_h2v1(nr, cw, cr.data());
    } else {
      std::memcpy(cb.data(), nb, static_cast<size_t>(cw));
      std::memcpy(cr.data(), nr, static_cast<size_t>(cw));
    }
    const uint8_t* ly = plane(0, y);
    uint8_t* d = rgb + static_cast<size_t>(y) * w * 3;
    for (int x = 0; x < w; ++x) {
      const int yy = ly[x], b = cb[x], r = cr[x];
      d[x * 3] = clamp255(yy + t.cr_r[r]);
      d[x * 3 + 1] = clamp255(yy + static_cast<int>((t.cb_g[b] + t.cr_g[r]) >> 16));
      d[x * 3 + 2] = clamp255(yy + t.cb_b[b]);
    }
  }
  return true;
}

inline int webp_mult_hi(int v, int coeff) { return (v * coeff) >> 8; }
inline uint8_t webp_clip8(int v) {
  constexpr int kMask = (256 << 6) - 1;
  return static_cast<uint8_t>((v & ~kMask) == 0 ? (v >> 6) : (v < 0 ? 0 : 255));
}
inline void webp_yuv_to_rgb(int y, int u, int v, uint8_t* d) {
  d[0] = webp_clip8(webp_mult_hi(y, 19077) + webp_mult_hi(v, 26149) - 14234);
  d[1] = webp_clip8(webp_mult_hi(y, 19077) - webp_mult_hi(u, 6419) - webp_mult_hi(v, 13320) + 8708);
  d[2] = webp_clip8(webp_mult_hi(y, 19077) + webp_mult_hi(u, 33050) - 17685);
}

// libwebp's fancy upsampler for one pair of output rows: top_y reads chroma rows (top_uv nearer),
// bottom_y (may be null) reads (cur_uv nearer). U and V are packed into one word as libwebp packs them.
void webp_pair(const uint8_t* top_y, const uint8_t* bottom_y, const uint8_t* top_u, const uint8_t* top_v,
               const uint8_t* cur_u, const uint8_t* cur_v, uint8_t* top_dst, uint8_t* bottom_dst, int len) {
  auto load = [](uint8_t u, uint8_t v) { return uint32_t{u} | (uint32_t{v} << 16); };
  auto emit = [](const uint8_t* y, int i, uint32_t uv, uint8_t* dst) {
    webp_yuv_to_rgb(y[i], static_cast<int>(uv & 0xff), static_cast<int>(uv >> 16), dst + i * 3);
  };
  const int last_pair = (len - 1) >> 1;
  uint32_t tl_uv = load(top_u[0], top_v[0]), l_uv = load(cur_u[0], cur_v[0]);
  emit(top_y, 0, (3 * tl_uv + l_uv + 0x00020002u) >> 2, top_dst);
  if (bottom_y) emit(bottom_y, 0, (3 * l_uv + tl_uv + 0x00020002u) >> 2, bottom_dst);
  for (int x = 1; x <= last_pair; ++x) {
    const uint32_t t_uv = load(top_u[x], top_v[x]), uv = load(cur_u[x], cur_v[x]);
    const uint32_t avg = tl_uv + t_uv + l_uv + uv + 0x00080008u;
    const uint32_t diag_12 = (avg + 2 * (t_uv + l_uv)) >> 3;
    const uint32_t diag_03 = (avg + 2 * (tl_uv + uv)) >> 3;
    emit(top_y, 2 * x - 1, (diag_12 + tl_uv) >> 1, top_dst);
    emit(top_y, 2 * x, (diag_03 + t_uv) >> 1, top_dst);
    if (bottom_y) {
      emit(bottom_y, 2 * x - 1, (diag_03 + l_uv) >> 1, bottom_dst);
      emit(bottom_y, 2 * x, (diag_12 + uv) >> 1, bottom_dst);
    }
    tl_uv = t_uv;
    l_uv = uv;
  }
  if (!(len & 1)) {
    emit(top_y, len - 1, (3 * tl_uv + l_uv + 0x00020002u) >> 2, top_dst);
    if (bottom_y) emit(bottom_y, len - 1, (3 * l_uv + tl_uv + 0x00020002u) >> 2, bottom_dst);
  }
}

// 4:2:0 WebP planes to RGB: row 0 alone, then rows (2k - 1, 2k) between chroma rows k - 1 and k, then
// the last row alone when the height is even (io_dec.c's EmitFancyRGB over a whole picture).
void webp_to_rgb(const AVFrame* f, uint8_t* rgb) {
  const int w = f->width, h = f->height;
  auto row = [&](int p, int r) { return f->data[p] + static_cast<ptrdiff_t>(r) * f->linesize[p]; };
  auto out = [&](int r) { return rgb + static_cast<size_t>(r) * w * 3; };
  webp_pair(row(0, 0), nullptr, row(1, 0), row(2, 0), row(1, 0), row(2, 0), out(0), nullptr, w);
  int k = 1;
  for (; 2 * k < h; ++k)
    webp_pair(row(0, 2 * k - 1), row(0, 2 * k), row(1, k - 1), row(2, k - 1), row(1, k), row(2, k), out(2 * k - 1),
              out(2 * k), w);
  if (h % 2 == 0 && h > 1) {
    const int c = h / 2 - 1;
    webp_pair(row(0, h - 1), nullptr, row(1, c), row(2, c), row(1, c), row(2, c), out(h - 1), nullptr, w);
  }
}

// Decoded samples to RGB24 as Pillow's decode + convert("RGB") gives them: packed formats are copied or
// expanded byte for byte (alpha dropped, grey replicated, palette looked up, 1-bit to 0/255); JPEG and
// WebP YCbCr go through the libjpeg / libwebp programs above. Any other layout goes through swscale and
// is reported as inexact.
Error frame_to_rgb(const AVFrame* f, int codec, uint8_t* rgb, int& exact) {
  const int w = f->width, h = f->height;
  const auto fmt = static_cast<AVPixelFormat>(f->format);
  exact = 1;
  if (codec == VORTEX_IMAGE_JPEG) {
    int sx = 0, sy = 0;
    if (fmt == AV_PIX_FMT_YUVJ444P || fmt == AV_PIX_FMT_YUV444P) sx = sy = 1;
    if (fmt == AV_PIX_FMT_YUVJ422P || fmt == AV_PIX_FMT_YUV422P) sx = 2, sy = 1;
    if (fmt == AV_PIX_FMT_YUVJ420P || fmt == AV_PIX_FMT_YUV420P) sx = sy = 2;
    if (fmt == AV_PIX_FMT_YUVJ440P || fmt == AV_PIX_FMT_YUV440P) sx = 1, sy = 2;
    if (sx && jpeg_to_rgb(f, sx, sy, rgb)) return {};
  }
  if (codec == VORTEX_IMAGE_WEBP && (fmt == AV_PIX_FMT_YUV420P || fmt == AV_PIX_FMT_YUVA420P) && w >= 1) {
    webp_to_rgb(f, rgb);
    return {};
  }
  bool packed = true;
  for (int y = 0; y < h && packed; ++y) {
    const uint8_t* s = f->data[0] + static_cast<ptrdiff_t>(y) * f->linesize[0];
    uint8_t* d = rgb + static_cast<size_t>(y) * w * 3;
    switch (fmt) {
      case AV_PIX_FMT_RGB24:
        std::memcpy(d, s, static_cast<size_t>(w) * 3);
        break;
      case AV_PIX_FMT_RGBA:
        for (int x = 0; x < w; ++x) std::memcpy(d + x * 3, s + x * 4, 3);
        break;
      case AV_PIX_FMT_ARGB:
        for (int x = 0; x < w; ++x) std::memcpy(d + x * 3, s + x * 4 + 1, 3);
        break;
      case AV_PIX_FMT_GRAY8:
        for (int x = 0; x < w; ++x) d[x * 3] = d[x * 3 + 1] = d[x * 3 + 2] = s[x];
        break;
      case AV_PIX_FMT_YA8:
        for (int x = 0; x < w; ++x) d[x * 3] = d[x * 3 + 1] = d[x * 3 + 2] = s[x * 2];
        break;
      case AV_PIX_FMT_PAL8: {
        const uint32_t* pal = reinterpret_cast<const uint32_t*>(f->data[1]);  // 0xAARRGGBB, native endian
        for (int x = 0; x < w; ++x) {
          const uint32_t c = pal[s[x]];
          d[x * 3] = static_cast<uint8_t>(c >> 16);
          d[x * 3 + 1] = static_cast<uint8_t>(c >> 8);
          d[x * 3 + 2] = static_cast<uint8_t>(c);
        }
        break;
      }
      case AV_PIX_FMT_MONOBLACK:
      case AV_PIX_FMT_MONOWHITE: {
        const uint8_t one = fmt == AV_PIX_FMT_MONOBLACK ? 255 : 0;
        for (int x = 0; x < w; ++x) {
          const bool bit = (s[x >> 3] >> (7 - (x & 7))) & 1;
          d[x * 3] = d[x * 3 + 1] = d[x * 3 + 2] = bit ? one : static_cast<uint8_t>(255 - one);
        }
        break;
      }
      default:
        packed = false;
        break;
    }
  }
  if (packed) return {};
  exact = 0;
  std::unique_ptr<SwsContext, void (*)(SwsContext*)> sws(
      sws_getContext(w, h, fmt, w, h, AV_PIX_FMT_RGB24, SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr,
                     nullptr, nullptr),
      sws_freeContext);
  if (!sws)
    return {kUnsupported, std::string("no conversion from the decoder's pixel format ") +
                              (av_get_pix_fmt_name(fmt) ? av_get_pix_fmt_name(fmt) : "?") + " to RGB"};
  const int full_range = f->color_range == AVCOL_RANGE_JPEG || codec == VORTEX_IMAGE_JPEG;
  const int* coefs = sws_getCoefficients(SWS_CS_ITU601);
  sws_setColorspaceDetails(sws.get(), coefs, full_range, coefs, 1, 0, 1 << 16, 1 << 16);
  uint8_t* dst[1] = {rgb};
  const int stride[1] = {w * 3};
  if (sws_scale(sws.get(), f->data, f->linesize, 0, h, dst, stride) != h) return {kInternal, "sws_scale failed"};
  return {};
}

Error decode_image(VortexImageDecode& r) {
  const AVCodecID id = r.codec == VORTEX_IMAGE_PNG    ? AV_CODEC_ID_PNG
                       : r.codec == VORTEX_IMAGE_JPEG ? AV_CODEC_ID_MJPEG
                                                      : AV_CODEC_ID_WEBP;
  const AVCodec* codec = avcodec_find_decoder(id);
  if (!codec) return {kUnsupported, std::string("this FFmpeg has no ") + avcodec_get_name(id) + " decoder"};
  // A corrupt file is reported through the returned error; FFmpeg's own log is quiet meanwhile.
  const int level = av_log_get_level();
  av_log_set_level(AV_LOG_FATAL);
  struct LevelGuard {
    int level;
    ~LevelGuard() { av_log_set_level(level); }
  } restore{level};
  std::unique_ptr<AVCodecContext, void (*)(AVCodecContext*)> ctx(avcodec_alloc_context3(codec),
                                                                 [](AVCodecContext* c) { avcodec_free_context(&c); });
  if (!ctx) return {kOutOfMemory, "avcodec_alloc_context3 failed"};
  ctx->max_pixels = r.max_pixels;
  ctx->thread_count = 1;
  // FF_IDCT_INT is FFmpeg's port of the IJG integer IDCT, libjpeg's default (JDCT_ISLOW) that Pillow decodes with.
  if (id == AV_CODEC_ID_MJPEG) ctx->idct_algo = FF_IDCT_INT;
  ctx->err_recognition = AV_EF_CRCCHECK | AV_EF_BITSTREAM | AV_EF_BUFFER | AV_EF_EXPLODE;
  RETURN_IF_FAILED(av_check(avcodec_open2(ctx.get(), codec, nullptr), "avcodec_open2"));
  std::unique_ptr<AVPacket, void (*)(AVPacket*)> pkt(av_packet_alloc(), [](AVPacket* p) { av_packet_free(&p); });
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> frame(av_frame_alloc(), [](AVFrame* f) { av_frame_free(&f); });
  if (!pkt || !frame) return {kOutOfMemory, "av_packet_alloc/av_frame_alloc failed"};
  if (r.size > static_cast<size_t>(INT32_MAX - AV_INPUT_BUFFER_PADDING_SIZE)) return {kIo, "image file too large"};
  RETURN_IF_FAILED(av_check(av_new_packet(pkt.get(), static_cast<int>(r.size)), "av_new_packet"));
  std::memcpy(pkt->data, r.data, r.size);
  pkt->flags |= AV_PKT_FLAG_KEY;
  int ret = avcodec_send_packet(ctx.get(), pkt.get());
  if (ret < 0) return {kIo, "the image data is corrupt: " + av_err(ret)};
  ret = avcodec_receive_frame(ctx.get(), frame.get());
  if (ret == AVERROR(EAGAIN)) {
    avcodec_send_packet(ctx.get(), nullptr);
    ret = avcodec_receive_frame(ctx.get(), frame.get());
  }
  if (ret < 0) return {kIo, "the image data is corrupt: " + av_err(ret)};
  if (frame->decode_error_flags || (frame->flags & AV_FRAME_FLAG_CORRUPT))
    return {kIo, "the image data is corrupt (the decoder flagged the frame)"};
  copy_name(r.pixel_format, av_get_pix_fmt_name(static_cast<AVPixelFormat>(frame->format)));
  if (frame->width != r.width || frame->height != r.height)
    return {kIo, "the decoder returned " + std::to_string(frame->width) + "x" + std::to_string(frame->height) +
                     " pixels where the header says " + std::to_string(r.width) + "x" + std::to_string(r.height)};
  return frame_to_rgb(frame.get(), r.codec, r.rgb, r.exact);
}

// ---- one audio stream to planar float ----

// A decoded frame's samples to float, as libswresample's audioconvert.c converts them to AV_SAMPLE_FMT_FLTP.
Error frame_to_float(const AVFrame* f, int channels, std::vector<std::vector<float>>& planes) {
  const auto fmt = static_cast<AVSampleFormat>(f->format);
  const bool planar = av_sample_fmt_is_planar(fmt) != 0;
  const AVSampleFormat packed = av_get_packed_sample_fmt(fmt);
  const int n = f->nb_samples;
  planes.assign(static_cast<size_t>(channels), std::vector<float>(static_cast<size_t>(n)));
  for (int c = 0; c < channels; ++c) {
    const uint8_t* base = planar ? f->extended_data[c] : f->extended_data[0];
    const int step = planar ? 1 : channels, off = planar ? 0 : c;
    float* out = planes[static_cast<size_t>(c)].data();
    for (int i = 0; i < n; ++i) {
      const int k = i * step + off;
      switch (packed) {
        case AV_SAMPLE_FMT_U8:
          out[i] = (base[k] - 0x80) * (1.0f / (1 << 7));
          break;
        case AV_SAMPLE_FMT_S16:
          out[i] = reinterpret_cast<const int16_t*>(base)[k] * (1.0f / (1 << 15));
          break;
        case AV_SAMPLE_FMT_S32:
          out[i] = static_cast<float>(reinterpret_cast<const int32_t*>(base)[k]) * (1.0f / (1U << 31));
          break;
        case AV_SAMPLE_FMT_FLT:
          out[i] = reinterpret_cast<const float*>(base)[k];
          break;
        case AV_SAMPLE_FMT_DBL:
          out[i] = static_cast<float>(reinterpret_cast<const double*>(base)[k]);
          break;
        default:
          return {kUnsupported, std::string("audio sample format ") + av_get_sample_fmt_name(fmt) +
                                    " is not read (u8, s16, s32, flt, dbl, packed or planar)"};
      }
    }
  }
  return {};
}

// The first stream of `type` in the file, opened for decoding (`max_pixels` > 0 goes to the decoder).
struct DecoderStream {
  std::unique_ptr<AVFormatContext, void (*)(AVFormatContext*)> fc{nullptr,
                                                                  [](AVFormatContext* f) { avformat_close_input(&f); }};
  std::unique_ptr<AVCodecContext, void (*)(AVCodecContext*)> ctx{nullptr,
                                                                 [](AVCodecContext* c) { avcodec_free_context(&c); }};
  int index = -1;
};

Error open_decoder(const char* path, AVMediaType type, int64_t max_pixels, DecoderStream& d) {
  AVFormatContext* fc = nullptr;
  RETURN_IF_FAILED(
      av_check(avformat_open_input(&fc, path, nullptr, nullptr), std::string("avformat_open_input(") + path + ")"));
  d.fc.reset(fc);
  RETURN_IF_FAILED(av_check(avformat_find_stream_info(fc, nullptr), "avformat_find_stream_info"));
  // The first stream of the kind, as references.py takes container.streams.audio[0] / .video[0].
  for (unsigned i = 0; i < fc->nb_streams && d.index < 0; ++i)
    if (fc->streams[i]->codecpar->codec_type == type) d.index = static_cast<int>(i);
  if (d.index < 0)
    return {kUnsupported,
            std::string(path) + " has no " + (type == AVMEDIA_TYPE_AUDIO ? "audio" : "video") + " stream"};
  const AVCodecParameters* par = fc->streams[d.index]->codecpar;
  const AVCodec* codec = avcodec_find_decoder(par->codec_id);
  if (!codec) return {kUnsupported, std::string("no decoder for ") + avcodec_get_name(par->codec_id)};
  d.ctx.reset(avcodec_alloc_context3(codec));
  if (!d.ctx) return {kOutOfMemory, "avcodec_alloc_context3 failed"};
  RETURN_IF_FAILED(av_check(avcodec_parameters_to_context(d.ctx.get(), par), "avcodec_parameters_to_context"));
  if (max_pixels > 0) d.ctx->max_pixels = max_pixels;
  return av_check(avcodec_open2(d.ctx.get(), codec, nullptr), "avcodec_open2");
}

// Every packet of the stream through the decoder, then the flush; `drain` receives the frames after each send.
template <class Drain>
Error feed_decoder(DecoderStream& d, AVPacket* pkt, Drain&& drain) {
  int ret;
  while ((ret = av_read_frame(d.fc.get(), pkt)) >= 0) {
    if (pkt->stream_index == d.index) {
      const int sent = avcodec_send_packet(d.ctx.get(), pkt);
      av_packet_unref(pkt);
      RETURN_IF_FAILED(av_check(sent, "avcodec_send_packet"));
      RETURN_IF_FAILED(drain());
    } else {
      av_packet_unref(pkt);
    }
  }
  if (ret != AVERROR_EOF) RETURN_IF_FAILED(av_check(ret, "av_read_frame"));
  RETURN_IF_FAILED(av_check(avcodec_send_packet(d.ctx.get(), nullptr), "avcodec_send_packet (flush)"));
  return drain();
}

Error decode_audio(VortexAudioDecode& r) {
  DecoderStream d;
  RETURN_IF_FAILED(open_decoder(r.path, AVMEDIA_TYPE_AUDIO, 0, d));
  AVCodecContext* ctx = d.ctx.get();
  r.sample_rate = ctx->sample_rate;
  r.channels = ctx->ch_layout.nb_channels;
  copy_name(r.sample_format, av_get_sample_fmt_name(ctx->sample_fmt));
  if (r.sample_rate <= 0 || r.channels <= 0) return {kUnsupported, "the audio stream has no rate or no channels"};
  std::unique_ptr<AVPacket, void (*)(AVPacket*)> pkt(av_packet_alloc(), [](AVPacket* p) { av_packet_free(&p); });
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> frame(av_frame_alloc(), [](AVFrame* f) { av_frame_free(&f); });
  if (!pkt || !frame) return {kOutOfMemory, "av_packet_alloc / av_frame_alloc failed"};
  std::vector<std::vector<float>> planes;
  std::vector<const float*> ptrs;
  auto drain = [&]() -> Error {
    for (;;) {
      const int ret = avcodec_receive_frame(ctx, frame.get());
      if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return {};
      RETURN_IF_FAILED(av_check(ret, "avcodec_receive_frame"));
      if (frame->ch_layout.nb_channels != r.channels)
        return {kUnsupported, "the audio stream changes its channel count"};
      RETURN_IF_FAILED(frame_to_float(frame.get(), r.channels, planes));
      ptrs.clear();
      for (const auto& p : planes) ptrs.push_back(p.data());
      const int rc = r.sink(r.user, ptrs.data(), r.channels, frame->nb_samples);
      av_frame_unref(frame.get());
      if (rc != 0) return {rc, "stopped by the caller"};
    }
  };
  return feed_decoder(d, pkt.get(), drain);
}

// ---- one video stream to rgb24 ----

// The swscale colorspace of a frame's tag, as sws_scale_frame maps it (unspecified: BT.601).
int sws_colorspace(AVColorSpace cs) {
  switch (cs) {
    case AVCOL_SPC_BT709:
      return SWS_CS_ITU709;
    case AVCOL_SPC_FCC:
      return SWS_CS_FCC;
    case AVCOL_SPC_SMPTE240M:
      return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
      return SWS_CS_BT2020;
    default:
      return SWS_CS_ITU601;
  }
}

// The display matrix's rotation: the stream's side data (what the decoder attaches to every frame).
double stream_rotation(const AVStream* st) {
  size_t size = 0;
  const uint8_t* m = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (m == nullptr || size < 9 * sizeof(int32_t)) return 0.0;
  const double r = av_display_rotation_get(reinterpret_cast<const int32_t*>(m));
  return std::isnan(r) ? 0.0 : static_cast<double>(static_cast<int>(r));
}

Error decode_video(VortexVideoDecode& r) {
  DecoderStream d;
  RETURN_IF_FAILED(open_decoder(r.path, AVMEDIA_TYPE_VIDEO, r.max_pixels, d));
  AVFormatContext* fc = d.fc.get();
  AVStream* st = fc->streams[d.index];
  AVCodecContext* ctx = d.ctx.get();
  const AVRational rate = st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0
                              ? st->avg_frame_rate
                              : av_guess_frame_rate(fc, st, nullptr);
  r.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0.0;
  r.width = st->codecpar->width;
  r.height = st->codecpar->height;
  r.rotation = stream_rotation(st);
  r.frames = 0;
  copy_name(r.pixel_format, av_get_pix_fmt_name(ctx->pix_fmt));
  std::unique_ptr<AVPacket, void (*)(AVPacket*)> pkt(av_packet_alloc(), [](AVPacket* p) { av_packet_free(&p); });
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> frame(av_frame_alloc(), [](AVFrame* f) { av_frame_free(&f); });
  if (!pkt || !frame) return {kOutOfMemory, "av_packet_alloc / av_frame_alloc failed"};
  std::unique_ptr<SwsContext, void (*)(SwsContext*)> sws(nullptr, sws_freeContext);
  std::vector<uint8_t> rgb;
  int sw = 0, sh = 0, sfmt = -1, scs = -1, srange = -1;
  auto drain = [&]() -> Error {
    for (;;) {
      const int ret = avcodec_receive_frame(ctx, frame.get());
      if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return {};
      RETURN_IF_FAILED(av_check(ret, "avcodec_receive_frame"));
      const int w = frame->width, h = frame->height;
      if (w <= 0 || h <= 0 || static_cast<int64_t>(w) * h > r.max_pixels)
        return {kUnsupported, "a decoded frame is " + std::to_string(w) + "x" + std::to_string(h) + " pixels"};
      const auto fmt = static_cast<AVPixelFormat>(frame->format);
      const int cs = sws_colorspace(frame->colorspace), range = frame->color_range == AVCOL_RANGE_JPEG ? 1 : 0;
      if (!sws || w != sw || h != sh || fmt != sfmt || cs != scs || range != srange) {
        // PyAV's reformat: SWS_BILINEAR, source colorspace and range from the frame, full-range RGB out.
        sws.reset(sws_getContext(w, h, fmt, w, h, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr));
        if (!sws)
          return {kUnsupported, std::string("no conversion from the decoder's pixel format ") +
                                    (av_get_pix_fmt_name(fmt) ? av_get_pix_fmt_name(fmt) : "?") + " to rgb24"};
        const int* coefs = sws_getCoefficients(cs);
        sws_setColorspaceDetails(sws.get(), coefs, range, coefs, 1, 0, 1 << 16, 1 << 16);
        sw = w, sh = h, sfmt = fmt, scs = cs, srange = range;
      }
      rgb.resize(static_cast<size_t>(w) * h * 3);
      uint8_t* dst[1] = {rgb.data()};
      const int stride[1] = {w * 3};
      if (sws_scale(sws.get(), frame->data, frame->linesize, 0, h, dst, stride) != h)
        return {kInternal, "sws_scale failed"};
      av_frame_unref(frame.get());
      ++r.frames;
      const int rc = r.sink(r.user, rgb.data(), w, h);
      if (rc != 0) return {rc, "stopped by the caller"};
    }
  };
  return feed_decoder(d, pkt.get(), drain);
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

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_stream_write_i420(VortexMp4Stream* stream,
                                                                                      const uint8_t* i420, int frames,
                                                                                      char* error, size_t error_size) {
  if (!stream || (!i420 && frames > 0) || frames < 0)
    return report({kInternal, "vortex_ffmpeg_stream_write_i420: bad argument"}, error, error_size);
  return report(stream_write_i420(*stream, i420, frames), error, error_size);
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

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_decode_image(VortexImageDecode* request,
                                                                                 char* error, size_t error_size) {
  if (!request || !request->data || !request->rgb)
    return report({kInternal, "vortex_ffmpeg_decode_image: null request"}, error, error_size);
  return report(decode_image(*request), error, error_size);
}

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_decode_audio(VortexAudioDecode* request,
                                                                                 char* error, size_t error_size) {
  if (!request || !request->path || !request->sink)
    return report({kInternal, "vortex_ffmpeg_decode_audio: null request"}, error, error_size);
  return report(decode_audio(*request), error, error_size);
}

extern "C" __attribute__((visibility("default"))) int vortex_ffmpeg_decode_video(VortexVideoDecode* request,
                                                                                 char* error, size_t error_size) {
  if (!request || !request->path || !request->sink)
    return report({kInternal, "vortex_ffmpeg_decode_video: null request"}, error, error_size);
  return report(decode_video(*request), error, error_size);
}
