// MP4 writer and probe (see mp4_writer.h). Every FFmpeg call is checked; errors name the call and carry
// av_strerror's text. The temp file is removed on any failure, so `path` is either complete or untouched.
#include "media/mp4_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include "media/atomic_file.h"

namespace vortex {
namespace {

std::string av_err(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(code, buf, sizeof(buf));
  return buf;
}

Status av_check(int ret, const char* what) {
  if (ret >= 0) return Status::Ok();
  return io_error(std::string(what) + " failed: " + av_err(ret));
}

struct Encoder {
  AVCodecContext* ctx = nullptr;
  AVStream* stream = nullptr;
  ~Encoder() { avcodec_free_context(&ctx); }
};

struct Muxer {
  AVFormatContext* oc = nullptr;
  bool io_open = false;
  std::string temp;
  bool committed = false;
  ~Muxer() {
    if (oc) {
      if (io_open) avio_closep(&oc->pb);
      avformat_free_context(oc);
    }
    if (!committed && !temp.empty()) std::remove(temp.c_str());
  }
};

// Sends `frame` (nullptr flushes) and writes every packet it yields.
Status encode_and_write(Muxer& mux, Encoder& enc, AVFrame* frame) {
  VORTEX_RETURN_IF_ERROR(av_check(avcodec_send_frame(enc.ctx, frame), "avcodec_send_frame"));
  std::unique_ptr<AVPacket, void (*)(AVPacket*)> pkt(av_packet_alloc(), [](AVPacket* p) { av_packet_free(&p); });
  if (!pkt) return Status(ErrorCode::kOutOfMemory, "av_packet_alloc failed");
  while (true) {
    const int ret = avcodec_receive_packet(enc.ctx, pkt.get());
    if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return Status::Ok();
    VORTEX_RETURN_IF_ERROR(av_check(ret, "avcodec_receive_packet"));
    av_packet_rescale_ts(pkt.get(), enc.ctx->time_base, enc.stream->time_base);
    pkt->stream_index = enc.stream->index;
    VORTEX_RETURN_IF_ERROR(av_check(av_interleaved_write_frame(mux.oc, pkt.get()), "av_interleaved_write_frame"));
  }
}

}  // namespace

Status write_mp4(const std::string& path, const Tensor& frames, const Tensor& audio, int sample_rate,
                 const Mp4Options& opts) {
  if (!frames.defined() || frames.ndim() != 4 || frames.dim(3) != 3 || frames.dtype() != DType::kU8 ||
      !frames.is_contiguous() || frames.dim(0) < 1)
    return invalid_argument("write_mp4: frames must be a contiguous [F, H, W, 3] u8 tensor, got " +
                            (frames.defined() ? frames.describe() : std::string("nothing")));
  const int nf = static_cast<int>(frames.dim(0)), h = static_cast<int>(frames.dim(1)), w = static_cast<int>(frames.dim(2));
  if (h % 2 || w % 2 || h < 2 || w < 2)
    return invalid_argument("write_mp4: yuv420p needs an even frame size, got " + std::to_string(w) + "x" + std::to_string(h));
  const bool with_audio = audio.defined();
  if (with_audio && (audio.ndim() != 2 || audio.dim(0) != 2 || audio.dtype() != DType::kF32 || !audio.is_contiguous()))
    return invalid_argument("write_mp4: audio must be a contiguous [2, N] f32 tensor, got " + audio.describe());
  if (with_audio && sample_rate <= 0) return invalid_argument("write_mp4: sample rate must be positive");
  if (opts.fps <= 0) return invalid_argument("write_mp4: fps must be positive");

  av_log_set_level(AV_LOG_ERROR);  // x264's banner and stats would clutter stderr; errors still print
  Muxer mux;
  mux.temp = atomic_temp_path(path);
  VORTEX_RETURN_IF_ERROR(av_check(avformat_alloc_output_context2(&mux.oc, nullptr, "mp4", mux.temp.c_str()),
                                  "avformat_alloc_output_context2(mp4)"));
  // ---- video: libx264 ----
  Encoder venc;
  const AVCodec* vcodec = avcodec_find_encoder_by_name("libx264");
  if (!vcodec)
    return unsupported("this FFmpeg has no libx264 encoder; install FFmpeg with libx264 (scripts/bootstrap.sh)");
  venc.stream = avformat_new_stream(mux.oc, nullptr);
  venc.ctx = avcodec_alloc_context3(vcodec);
  if (!venc.stream || !venc.ctx) return Status(ErrorCode::kOutOfMemory, "could not allocate the video stream");
  venc.ctx->width = w;
  venc.ctx->height = h;
  venc.ctx->time_base = AVRational{1, opts.fps};
  venc.ctx->framerate = AVRational{opts.fps, 1};
  venc.ctx->pix_fmt = AV_PIX_FMT_YUV420P;
  venc.ctx->color_range = AVCOL_RANGE_MPEG;
  venc.ctx->colorspace = AVCOL_SPC_BT709;
  venc.ctx->color_primaries = AVCOL_PRI_BT709;
  venc.ctx->color_trc = AVCOL_TRC_BT709;
  if (mux.oc->oformat->flags & AVFMT_GLOBALHEADER) venc.ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  av_opt_set(venc.ctx->priv_data, "crf", std::to_string(opts.crf).c_str(), 0);
  av_opt_set(venc.ctx->priv_data, "preset", opts.preset.c_str(), 0);
  VORTEX_RETURN_IF_ERROR(av_check(avcodec_open2(venc.ctx, vcodec, nullptr), "avcodec_open2(libx264)"));
  VORTEX_RETURN_IF_ERROR(av_check(avcodec_parameters_from_context(venc.stream->codecpar, venc.ctx), "avcodec_parameters_from_context"));
  venc.stream->time_base = venc.ctx->time_base;
  venc.stream->avg_frame_rate = venc.ctx->framerate;
  // ---- audio: AAC ----
  Encoder aenc;
  if (with_audio) {
    const AVCodec* acodec = avcodec_find_encoder(AV_CODEC_ID_AAC);
    if (!acodec) return unsupported("this FFmpeg has no AAC encoder");
    aenc.stream = avformat_new_stream(mux.oc, nullptr);
    aenc.ctx = avcodec_alloc_context3(acodec);
    if (!aenc.stream || !aenc.ctx) return Status(ErrorCode::kOutOfMemory, "could not allocate the audio stream");
    aenc.ctx->sample_fmt = AV_SAMPLE_FMT_FLTP;
    aenc.ctx->sample_rate = sample_rate;
    av_channel_layout_default(&aenc.ctx->ch_layout, 2);
    aenc.ctx->bit_rate = opts.audio_bitrate;
    aenc.ctx->time_base = AVRational{1, sample_rate};
    if (mux.oc->oformat->flags & AVFMT_GLOBALHEADER) aenc.ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    VORTEX_RETURN_IF_ERROR(av_check(avcodec_open2(aenc.ctx, acodec, nullptr), "avcodec_open2(aac)"));
    VORTEX_RETURN_IF_ERROR(av_check(avcodec_parameters_from_context(aenc.stream->codecpar, aenc.ctx), "avcodec_parameters_from_context"));
    aenc.stream->time_base = aenc.ctx->time_base;
  }
  VORTEX_RETURN_IF_ERROR(av_check(avio_open(&mux.oc->pb, mux.temp.c_str(), AVIO_FLAG_WRITE), ("avio_open(" + mux.temp + ")").c_str()));
  mux.io_open = true;
  VORTEX_RETURN_IF_ERROR(av_check(avformat_write_header(mux.oc, nullptr), "avformat_write_header"));

  std::unique_ptr<AVFrame, void (*)(AVFrame*)> vframe(av_frame_alloc(), [](AVFrame* f) { av_frame_free(&f); });
  std::unique_ptr<AVFrame, void (*)(AVFrame*)> aframe(av_frame_alloc(), [](AVFrame* f) { av_frame_free(&f); });
  if (!vframe || !aframe) return Status(ErrorCode::kOutOfMemory, "av_frame_alloc failed");
  vframe->format = AV_PIX_FMT_YUV420P;
  vframe->width = w;
  vframe->height = h;
  VORTEX_RETURN_IF_ERROR(av_check(av_frame_get_buffer(vframe.get(), 0), "av_frame_get_buffer(video)"));
  // Full-range RGB in, BT.709 limited-range YUV out (what players assume for HD H.264).
  std::unique_ptr<SwsContext, void (*)(SwsContext*)> sws(
      sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, AV_PIX_FMT_YUV420P, SWS_BICUBIC, nullptr, nullptr, nullptr),
      sws_freeContext);
  if (!sws) return internal_error("sws_getContext(rgb24 -> yuv420p) failed");
  const int* coefs = sws_getCoefficients(SWS_CS_ITU709);
  sws_setColorspaceDetails(sws.get(), coefs, 1, coefs, 0, 0, 1 << 16, 1 << 16);

  const int64_t samples = with_audio ? audio.dim(1) : 0;
  const int frame_size = with_audio && aenc.ctx->frame_size > 0 ? aenc.ctx->frame_size : 1024;
  int next_video = 0;
  int64_t next_sample = 0;
  const uint8_t* rgb = frames.data<uint8_t>();
  while (next_video < nf || next_sample < samples) {
    // Interleave by presentation time so the muxer never buffers a whole stream.
    const double tv = next_video < nf ? static_cast<double>(next_video) / opts.fps : 1e300;
    const double ta = next_sample < samples ? static_cast<double>(next_sample) / sample_rate : 1e300;
    if (tv <= ta) {
      VORTEX_RETURN_IF_ERROR(av_check(av_frame_make_writable(vframe.get()), "av_frame_make_writable"));
      const uint8_t* src[1] = {rgb + static_cast<size_t>(next_video) * h * w * 3};
      const int stride[1] = {w * 3};
      sws_scale(sws.get(), src, stride, 0, h, vframe->data, vframe->linesize);
      vframe->pts = next_video++;
      VORTEX_RETURN_IF_ERROR(encode_and_write(mux, venc, vframe.get()));
    } else {
      const int n = static_cast<int>(std::min<int64_t>(frame_size, samples - next_sample));
      av_frame_unref(aframe.get());
      aframe->format = AV_SAMPLE_FMT_FLTP;
      aframe->sample_rate = sample_rate;
      aframe->nb_samples = n;
      VORTEX_RETURN_IF_ERROR(av_check(av_channel_layout_copy(&aframe->ch_layout, &aenc.ctx->ch_layout), "av_channel_layout_copy"));
      VORTEX_RETURN_IF_ERROR(av_check(av_frame_get_buffer(aframe.get(), 0), "av_frame_get_buffer(audio)"));
      for (int c = 0; c < 2; ++c)
        std::memcpy(aframe->data[c], audio.data<float>() + c * samples + next_sample, static_cast<size_t>(n) * sizeof(float));
      aframe->pts = next_sample;
      next_sample += n;
      VORTEX_RETURN_IF_ERROR(encode_and_write(mux, aenc, aframe.get()));
    }
  }
  VORTEX_RETURN_IF_ERROR(encode_and_write(mux, venc, nullptr));
  if (with_audio) VORTEX_RETURN_IF_ERROR(encode_and_write(mux, aenc, nullptr));
  VORTEX_RETURN_IF_ERROR(av_check(av_write_trailer(mux.oc), "av_write_trailer"));
  VORTEX_RETURN_IF_ERROR(av_check(avio_closep(&mux.oc->pb), "avio_close"));
  mux.io_open = false;
  VORTEX_RETURN_IF_ERROR(atomic_commit(mux.temp, path));
  mux.committed = true;
  return Status::Ok();
}

Result<MediaInfo> probe_media(const std::string& path) {
  AVFormatContext* fc = nullptr;
  VORTEX_RETURN_IF_ERROR(av_check(avformat_open_input(&fc, path.c_str(), nullptr, nullptr), ("avformat_open_input(" + path + ")").c_str()));
  std::unique_ptr<AVFormatContext*, void (*)(AVFormatContext**)> guard(&fc, avformat_close_input);
  VORTEX_RETURN_IF_ERROR(av_check(avformat_find_stream_info(fc, nullptr), "avformat_find_stream_info"));
  MediaInfo info;
  info.streams = static_cast<int>(fc->nb_streams);
  info.duration_s = fc->duration > 0 ? static_cast<double>(fc->duration) / AV_TIME_BASE : 0.0;
  int vindex = -1;
  for (unsigned i = 0; i < fc->nb_streams; ++i) {
    const AVStream* s = fc->streams[i];
    const AVCodecParameters* p = s->codecpar;
    if (p->codec_type == AVMEDIA_TYPE_VIDEO) {
      vindex = static_cast<int>(i);
      info.video_codec = avcodec_get_name(p->codec_id);
      const char* pf = av_get_pix_fmt_name(static_cast<AVPixelFormat>(p->format));
      info.pixel_format = pf ? pf : "";
      info.width = p->width;
      info.height = p->height;
      info.fps = s->avg_frame_rate.den ? av_q2d(s->avg_frame_rate) : 0.0;
    } else if (p->codec_type == AVMEDIA_TYPE_AUDIO) {
      info.audio_codec = avcodec_get_name(p->codec_id);
      info.sample_rate = p->sample_rate;
      info.channels = p->ch_layout.nb_channels;
      if (s->duration > 0) info.audio_duration_s = static_cast<double>(s->duration) * av_q2d(s->time_base);
    }
  }
  std::unique_ptr<AVPacket, void (*)(AVPacket*)> pkt(av_packet_alloc(), [](AVPacket* p) { av_packet_free(&p); });
  while (av_read_frame(fc, pkt.get()) >= 0) {
    if (pkt->stream_index == vindex) ++info.video_frames;
    av_packet_unref(pkt.get());
  }
  return info;
}

}  // namespace vortex
