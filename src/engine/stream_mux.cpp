// decode_to_mp4 (see stream_mux.h): one worker thread takes the finished frame ranges in order, converts them on
// all host threads to RGB8 (into the full frame tensor) and I420 in one pass (src/engine/decode_frames.h) and hands
// the I420 frames to the Mp4Stream; the decode thread only queues ranges.
#include "engine/stream_mux.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "core/clock.h"
#include "engine/decode_frames.h"
#include "media/yuv420.h"

namespace vortex {
namespace {

using Clock = std::chrono::steady_clock;
bool is_set(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(std::memory_order_relaxed); }

// Opens video.mp4 on its own thread (the encoders' start, and h264_nvenc's refusal where NVENC is absent, overlap
// the first clip's decode), then encodes the queued frame ranges in order.
class FrameEncoder {
 public:
  using Opener = std::function<Result<std::unique_ptr<Mp4Stream>>()>;
  FrameEncoder(Opener opener, Tensor& rgb, const std::atomic<bool>* cancel)
      : opener_(std::move(opener)), rgb_(rgb), cancel_(cancel), worker_([this] { run(); }) {}
  ~FrameEncoder() { (void)close(); }

  Status push(const Tensor& video, int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok()) return error_;
    queue_.push_back({video, begin, end});
    cv_.notify_one();
    return Status::Ok();
  }
  // Waits for the open and every queued range; the first error, if any.
  Status close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      cv_.notify_one();
    }
    if (worker_.joinable()) worker_.join();
    return error_;
  }
  // The opened stream, after close() returned Ok.
  std::unique_ptr<Mp4Stream> take_stream() { return std::move(stream_); }
  // Seconds the open took (on the worker, alongside the decode).
  double open_s() const { return open_s_; }

 private:
  struct Range {
    Tensor video;
    int64_t begin, end;
  };
  void fail(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(st);
    queue_.clear();
  }
  void run() {
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const auto t0 = Clock::now();
    Result<std::unique_ptr<Mp4Stream>> opened = opener_();
    open_s_ = seconds_since(t0);
    if (!opened.ok()) return fail(opened.status());
    stream_ = std::move(*opened);
    while (true) {
      Range r;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        r = std::move(queue_.front());
        queue_.pop_front();
      }
      // A cancel drops the queued ranges: their encode (and the flush after them) is not waited for.
      Status st = is_set(cancel_) ? cancelled("cancelled while encoding video.mp4") : encode(r, threads);
      if (!st.ok()) return fail(st);
    }
  }
  Status encode(const Range& r, int threads) {
    const int64_t n = r.end - r.begin, h = rgb_.dim(1), w = rgb_.dim(2);
    VORTEX_ASSIGN_OR_RETURN(Tensor rgb, rgb_.narrow(0, r.begin, n));  // [n, H, W, 3] u8
    Tensor i420 = Tensor::empty({n, i420_frame_bytes(w, h)}, DType::kU8);
    VORTEX_RETURN_IF_ERROR(video_frames_to_rgb8_i420(r.video, r.begin, r.end, rgb, i420, threads));
    return stream_->write_i420(i420);
  }

  Opener opener_;
  std::unique_ptr<Mp4Stream> stream_;
  double open_s_ = 0.0;
  Tensor& rgb_;
  const std::atomic<bool>* cancel_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Range> queue_;
  bool closing_ = false;
  Status error_;
  std::thread worker_;
};

}  // namespace

Result<StreamedDecode> decode_to_mp4(const Tensor& video_latents, const Tensor& audio_latents, VideoVae& video_vae,
                                     AudioVae& audio_vae, const std::string& mp4_path, const Mp4Options& opts,
                                     const VaeProgressFn& progress, const std::atomic<bool>* cancel) {
  VORTEX_RETURN_IF_ERROR(video_vae.check_latents(video_latents).with_context("video_latents"));
  VORTEX_RETURN_IF_ERROR(audio_vae.check_latents(audio_latents).with_context("audio_latents"));
  StreamedDecode out;
  auto t0 = Clock::now();
  VORTEX_ASSIGN_OR_RETURN(out.media.audio, audio_vae.decode(audio_latents, progress));
  out.audio_decode_s = seconds_since(t0);
  if (is_set(cancel)) return cancelled("cancelled after the audio decode");
  out.media.sample_rate = audio_vae.config().sampling_rate;
  out.media.fps = opts.fps;
  const VideoVaeConfig& vc = video_vae.config();
  const int64_t frames = video_vae.frames_for(video_latents.dim(1));
  const int64_t h = video_latents.dim(2) * vc.patch, w = video_latents.dim(3) * vc.patch;
  // Arguments and FFmpeg's presence are checked here, before the video decode; the encoders open on the encoder's
  // thread while the first clip decodes.
  VORTEX_RETURN_IF_ERROR(
      Mp4Stream::check(static_cast<int>(w), static_cast<int>(h), out.media.audio, out.media.sample_rate, opts));
  out.media.frames = Tensor::empty({frames, h, w, 3}, DType::kU8);
  t0 = Clock::now();
  Result<Tensor> video = internal_error("video decode did not run");
  Status enc_status;
  std::unique_ptr<Mp4Stream> stream;
  {
    const Tensor& audio = out.media.audio;
    const int rate = out.media.sample_rate;
    FrameEncoder encoder(
        [&]() { return Mp4Stream::open(mp4_path, static_cast<int>(w), static_cast<int>(h), audio, rate, opts); },
        out.media.frames, cancel);
    video = video_vae.decode(video_latents, progress, [&](const Tensor& v, int64_t begin, int64_t end) {
      // Each clip's frames: a cancel stops the decode here (ops a backend cut short never reach the file).
      if (is_set(cancel)) return cancelled("cancelled while decoding the video (frame " + std::to_string(begin) + ")");
      return encoder.push(v, begin, end);  // the open's error (h264_nvenc refused) stops the decode here
    });
    out.video_decode_s = seconds_since(t0);
    t0 = Clock::now();
    enc_status = encoder.close();  // on a decode error: the ranges queued so far, then the stream is dropped
    out.mp4_open_s = encoder.open_s();
    stream = encoder.take_stream();
  }
  if (!video.ok()) return video.status();
  if (is_set(cancel)) return cancelled("cancelled before video.mp4 was finished");
  VORTEX_RETURN_IF_ERROR(enc_status.with_context("video.mp4"));
  if (!stream) return internal_error("video.mp4: the stream was not opened");
  out.encoder = stream->encoder();
  if (stream->frames_written() != frames)
    return internal_error("video.mp4: " + std::to_string(stream->frames_written()) + " frames encoded of " +
                          std::to_string(frames));
  VORTEX_RETURN_IF_ERROR(stream->finish());
  out.mux_tail_s = seconds_since(t0);
  return out;
}

nlohmann::json describe_mp4(const Mp4Options& opts, const Mp4EncoderInfo& encoder, const Tensor& frames) {
  nlohmann::json m = {{"codec", "h264"},
                      {"encoder", encoder.encoder},
                      {"encoder_settings", encoder.settings},
                      {"pixel_format", "yuv420p"},
                      {"crf", opts.crf},
                      {"preset", encoder.encoder == "h264_nvenc" ? opts.nvenc_preset : opts.preset},
                      {"color", "bt709 limited range, 2x2 box chroma (src/media/yuv420.h)"},
                      {"fps", opts.fps},
                      {"frames", frames.dim(0)},
                      {"height", frames.dim(1)},
                      {"width", frames.dim(2)},
                      {"audio_codec", "aac"},
                      {"audio_bitrate", opts.audio_bitrate}};
  if (!encoder.fallback.empty()) m["encoder_fallback"] = encoder.fallback;
  if (encoder.encoder == "libx264") {
    m["x264_threads"] = resolved_x264_threads(opts);
    m["x264_rc_lookahead"] =
        opts.x264_rc_lookahead >= 0 ? nlohmann::json(opts.x264_rc_lookahead) : nlohmann::json("preset");
  }
  return m;
}

}  // namespace vortex
