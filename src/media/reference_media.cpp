// ref2va reference checks and normalizations (see reference_media.h). Probing reads headers only: probe_image for
// images and FFmpeg's demuxer (probe_media in mp4_writer.cpp, through libvortex_ffmpeg.so) for videos and audio.
#include "media/reference_media.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "media/ffmpeg_module.h"
#include "media/image_reader.h"
#include "media/lanczos_resize.h"
#include "media/mp4_writer.h"

namespace vortex {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", s);
  return buf;
}

Status check_media_file(const std::string& path, const ReferenceLimits& limits) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return not_found("reference " + path + ": no such file");
  if (!std::filesystem::is_regular_file(st)) return invalid_argument("reference " + path + ": not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return io_error("reference " + path + ": cannot read its size: " + ec.message());
  if (size == 0) return invalid_argument("reference " + path + ": the file is empty");
  if (static_cast<int64_t>(size) > limits.max_media_file_bytes)
    return invalid_argument("reference " + path + ": " + std::to_string(size) + " bytes, over the " +
                            std::to_string(limits.max_media_file_bytes >> 20) + " MiB a video or audio file may have");
  return Status::Ok();
}

// PNG, JPEG or WebP by signature (the formats probe_image reads).
bool has_image_signature(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char b[12] = {0};
  const size_t n = std::fread(b, 1, sizeof(b), f);
  std::fclose(f);
  if (n >= 8 && std::memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) return true;
  if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return true;
  return n >= 12 && std::memcmp(b, "RIFF", 4) == 0 && std::memcmp(b + 8, "WEBP", 4) == 0;
}

Status check_clip(const std::string& what, const std::string& path, double duration, const ReferenceLimits& limits) {
  if (!(duration >= limits.min_clip_seconds && duration <= limits.max_clip_seconds))
    return invalid_argument("reference " + path + ": " + what + " must be " + seconds(limits.min_clip_seconds) +
                            " to " + seconds(limits.max_clip_seconds) + " long (the Ref2VA checkpoint's limit), got " +
                            seconds(duration));
  return Status::Ok();
}

}  // namespace

Result<ReferenceSpec> parse_reference_spec(const std::string& arg) {
  ReferenceSpec spec;
  spec.path = arg;
  const struct {
    const char* prefix;
    ReferenceKind kind;
  } kinds[] = {{"image:", ReferenceKind::kImage}, {"video:", ReferenceKind::kVideo}, {"audio:", ReferenceKind::kAudio}};
  for (const auto& k : kinds)
    if (arg.rfind(k.prefix, 0) == 0) {
      spec.path = arg.substr(std::string(k.prefix).size());
      spec.kind = k.kind;
      spec.kind_given = true;
    }
  if (spec.path.empty()) return invalid_argument("reference '" + arg + "': no file named");
  return spec;
}

Result<ReferenceProbe> probe_reference(const ReferenceSpec& spec, const ReferenceLimits& limits) {
  ReferenceProbe p;
  p.path = spec.path;
  std::error_code ec;
  if (!std::filesystem::exists(spec.path, ec)) return not_found("reference " + spec.path + ": no such file");
  // An image is recognised by its signature; probe_image applies the image limits (size, pixels, depth).
  if (has_image_signature(spec.path) || (spec.kind_given && spec.kind == ReferenceKind::kImage)) {
    auto image = probe_image(spec.path);
    if (!image.ok()) return image.status();
    if (spec.kind_given && spec.kind != ReferenceKind::kImage)
      return invalid_argument("reference " + spec.path + ": given as " + reference_kind_name(spec.kind) +
                              ", but the file is a " + image_format_name(image->format) + " image");
    const bool swap = image->orientation >= 5;  // EXIF 5..8 exchange the axes
    p.kind = ReferenceKind::kImage;
    p.width = swap ? image->height : image->width;
    p.height = swap ? image->width : image->height;
    VORTEX_RETURN_IF_ERROR(reference_image_size(p.width, p.height).status().with_context("reference " + spec.path));
    return p;
  }
  VORTEX_RETURN_IF_ERROR(check_media_file(spec.path, limits));
  auto info = probe_media(spec.path);
  if (!info.ok())
    return Status(info.status().code() == ErrorCode::kUnsupported ? ErrorCode::kUnsupported : ErrorCode::kFormat,
                  "reference " + spec.path +
                      ": not an image, and FFmpeg cannot read it as a video or audio file: " + info.status().message());
  const bool has_video = info->width > 0 && info->height > 0, has_audio = info->sample_rate > 0;
  p.kind = spec.kind_given ? spec.kind : has_video ? ReferenceKind::kVideo : ReferenceKind::kAudio;
  if (p.kind == ReferenceKind::kVideo) {
    if (!has_video) return invalid_argument("reference " + spec.path + ": no video stream");
    if (!(info->fps > 0.0))
      return invalid_argument("reference " + spec.path + ": the video stream has no frame rate, which 24 fps needs");
    if (info->width > limits.max_video_side || info->height > limits.max_video_side)
      return invalid_argument("reference " + spec.path + ": " + std::to_string(info->width) + "x" +
                              std::to_string(info->height) + " video, over " + std::to_string(limits.max_video_side) +
                              " pixels a side");
    p.width = info->width;
    p.height = info->height;
    p.fps = info->fps;
    p.duration_s = info->video_frames > 0 ? static_cast<double>(info->video_frames) / info->fps : info->duration_s;
    VORTEX_RETURN_IF_ERROR(check_clip("a video", spec.path, p.duration_s, limits));
    VORTEX_RETURN_IF_ERROR(reference_video_canvas(p.width, p.height).status().with_context("reference " + spec.path));
  } else {
    if (!has_audio) return invalid_argument("reference " + spec.path + ": no audio stream");
    p.duration_s = info->audio_duration_s > 0.0 ? info->audio_duration_s : info->duration_s;
  }
  p.has_audio = has_audio;
  if (has_audio) {
    p.sample_rate = info->sample_rate;
    p.channels = info->channels;
    if (p.channels < 1 || p.channels > 2)
      return invalid_argument("reference " + spec.path + ": " + std::to_string(p.channels) +
                              " audio channels; a reference soundtrack is mono or stereo");
  }
  if (p.kind == ReferenceKind::kAudio)
    VORTEX_RETURN_IF_ERROR(check_clip("an audio clip", spec.path, p.duration_s, limits));
  return p;
}

Status check_reference_set(const std::vector<ReferenceProbe>& refs, const ReferenceLimits& limits) {
  if (refs.empty()) return invalid_argument("ref2va needs at least one reference; use t2va for text-only requests");
  int count[3] = {0, 0, 0};
  double video_s = 0.0, audio_s = 0.0;
  for (const ReferenceProbe& r : refs) {
    ++count[static_cast<int>(r.kind)];
    if (r.kind == ReferenceKind::kVideo) video_s += r.duration_s;
    if (r.kind == ReferenceKind::kAudio) audio_s += r.duration_s;
  }
  const struct {
    ReferenceKind kind;
    int limit;
  } per_kind[] = {{ReferenceKind::kImage, limits.max_images},
                  {ReferenceKind::kVideo, limits.max_videos},
                  {ReferenceKind::kAudio, limits.max_audios}};
  for (const auto& k : per_kind)
    if (count[static_cast<int>(k.kind)] > k.limit)
      return invalid_argument("the Ref2VA checkpoint accepts at most " + std::to_string(k.limit) + " " +
                              reference_kind_name(k.kind) + " references, got " +
                              std::to_string(count[static_cast<int>(k.kind)]));
  if (static_cast<int>(refs.size()) > limits.max_references)
    return invalid_argument("the Ref2VA checkpoint accepts at most " + std::to_string(limits.max_references) +
                            " references in total, got " + std::to_string(refs.size()));
  if (count[static_cast<int>(ReferenceKind::kAudio)] == static_cast<int>(refs.size()))
    return invalid_argument(
        "an audio reference has to be paired with at least one image or video reference and cannot be used on its "
        "own");
  if (video_s > limits.max_total_video_seconds)
    return invalid_argument("the video references last " + seconds(video_s) + " in total, over the " +
                            seconds(limits.max_total_video_seconds) + " the Ref2VA checkpoint accepts");
  if (audio_s > limits.max_total_audio_seconds)
    return invalid_argument("the audio references last " + seconds(audio_s) + " in total, over the " +
                            seconds(limits.max_total_audio_seconds) + " the Ref2VA checkpoint accepts");
  return Status::Ok();
}

Result<std::vector<int64_t>> reference_frame_indices(int64_t decoded_frames, double fps, int num_frames,
                                                     double target_fps) {
  if (decoded_frames < 1) return invalid_argument("a reference video has no frames");
  if (!(fps > 0.0) || !std::isfinite(fps))
    return invalid_argument("a reference video must have a positive frame rate, got " + std::to_string(fps));
  if (num_frames < 1) return invalid_argument("num_frames must be positive");
  std::vector<int64_t> out;
  if (fps == target_fps) {
    for (int64_t i = 0; i < decoded_frames && i < num_frames; ++i) out.push_back(i);
    return out;
  }
  const double scale = target_fps / fps;
  auto slot = [&](int64_t i) { return static_cast<int64_t>(std::floor(static_cast<double>(i) * scale + 0.5)); };
  for (int64_t i = 0; i < decoded_frames && static_cast<int64_t>(out.size()) < num_frames; ++i) {
    const int64_t repeat = slot(i + 1) - slot(i);  // the last frame: up to floor(n * scale + 0.5), the same formula
    for (int64_t r = 0; r < repeat && static_cast<int64_t>(out.size()) < num_frames; ++r) out.push_back(i);
  }
  return out;
}

int reference_vae_frames(int frames) {
  // max(1, (n - 5) // 17) * 17 + 5 with Python's floor division.
  const int q = frames >= 5 ? (frames - 5) / 17 : -1;
  return std::max(1, q) * 17 + 5;
}

Result<CanvasSize> reference_video_canvas(int width, int height, const CanvasRule& rule) {
  if (width <= 0 || height <= 0) return invalid_argument("a reference video must have a positive size");
  return resolve_canvas_size(width, height, rule);
}

Result<CanvasSize> reference_image_size(int width, int height, int short_edge, int multiple) {
  if (width <= 0 || height <= 0)
    return invalid_argument("a reference image must have a positive size, got " + std::to_string(width) + "x" +
                            std::to_string(height));
  if (width > 4 * static_cast<int64_t>(height) || height > 4 * static_cast<int64_t>(width))
    return invalid_argument("a reference image must be within 1:4 and 4:1, got " + std::to_string(width) + "x" +
                            std::to_string(height));
  const double scale = static_cast<double>(short_edge) / std::min(width, height);
  // Python's round(): half to even, which nearbyint does in the default rounding mode.
  CanvasSize s;
  s.height = std::max(multiple, static_cast<int>(std::nearbyint(height * scale / multiple)) * multiple);
  s.width = std::max(multiple, static_cast<int>(std::nearbyint(width * scale / multiple)) * multiple);
  return s;
}

Result<SincResampler> SincResampler::create(int orig_rate, int new_rate) {
  if (orig_rate <= 0 || new_rate <= 0)
    return invalid_argument("resampling needs positive sample rates, got " + std::to_string(orig_rate) + " -> " +
                            std::to_string(new_rate));
  constexpr int kLowpassWidth = 6;
  constexpr double kRolloff = 0.99;
  SincResampler r;
  const int g = std::gcd(orig_rate, new_rate);
  r.orig_ = orig_rate / g;
  r.new_ = new_rate / g;
  const double base = std::min(r.orig_, r.new_) * kRolloff;
  r.width_ = static_cast<int>(std::ceil(kLowpassWidth * r.orig_ / base));
  const int taps = 2 * r.width_ + r.orig_;
  r.kernel_.resize(static_cast<size_t>(r.new_) * taps);
  const double scale = base / r.orig_;
  for (int j = 0; j < r.new_; ++j) {
    // torch: arange(0, -new, -1) / new is an int64 tensor divided in float32; the index grid is float64.
    const double phase = static_cast<double>(static_cast<float>(-j) / static_cast<float>(r.new_));
    for (int k = 0; k < taps; ++k) {
      double t = (phase + static_cast<double>(k - r.width_) / r.orig_) * base;
      t = std::min(std::max(t, -static_cast<double>(kLowpassWidth)), static_cast<double>(kLowpassWidth));
      const double c = std::cos(t * M_PI / kLowpassWidth / 2);
      const double window = c * c;
      t *= M_PI;
      const double sinc = t == 0.0 ? 1.0 : std::sin(t) / t;
      r.kernel_[static_cast<size_t>(j) * taps + k] = static_cast<float>(sinc * (window * scale));
    }
  }
  return r;
}

std::vector<float> SincResampler::resample(const float* x, int64_t n) const {
  const int64_t taps = 2 * width_ + orig_;
  const int64_t blocks = n / orig_ + 1;  // conv1d over n + taps - 1 padded samples at stride orig
  const int64_t keep = static_cast<int64_t>(std::ceil(static_cast<double>(new_ * n) / orig_));
  std::vector<float> y(static_cast<size_t>(std::min(keep, blocks * new_)));
  for (int64_t o = 0; o < static_cast<int64_t>(y.size()); ++o) {
    const int64_t b = o / new_, p = o % new_;
    const float* kr = kernel_.data() + p * taps;
    double acc = 0.0;
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t i = b * orig_ + k - width_;  // the zero padding of width_ on the left
      if (i >= 0 && i < n) acc += static_cast<double>(kr[k]) * x[i];
    }
    y[static_cast<size_t>(o)] = static_cast<float>(acc);
  }
  return y;
}

Result<DecodedAudio> read_reference_audio(const std::string& path, double max_seconds) {
  struct Sink {
    std::vector<std::vector<float>> channels;
    int64_t cap = 0;  // samples per channel
  } sink;
  VortexAudioDecode req{};
  req.path = path.c_str();
  req.user = &sink;
  req.sink = [](void* user, const float* const* planes, int channels, int samples) -> int {
    auto& s = *static_cast<Sink*>(user);
    if (s.channels.empty()) s.channels.resize(static_cast<size_t>(channels));
    for (int c = 0; c < channels; ++c) {
      auto& dst = s.channels[static_cast<size_t>(c)];
      dst.insert(dst.end(), planes[c], planes[c] + samples);
    }
    return static_cast<int64_t>(s.channels[0].size()) > s.cap ? static_cast<int>(ErrorCode::kInvalidArgument) : 0;
  };
  // The cap comes from the header's rate, before anything is decoded.
  auto info = probe_media(path);
  if (!info.ok()) return info.status().with_context("reference " + path);
  if (info->sample_rate <= 0) return invalid_argument("reference " + path + ": no audio stream");
  sink.cap = static_cast<int64_t>(max_seconds * info->sample_rate);
  const Status st = ffmpeg_decode_audio(req);
  if (!st.ok()) {
    if (!sink.channels.empty() && static_cast<int64_t>(sink.channels[0].size()) > sink.cap)
      return invalid_argument("reference " + path + ": the audio runs past " + seconds(max_seconds));
    return st.with_context("reference " + path);
  }
  if (sink.channels.empty() || sink.channels[0].empty())
    return invalid_argument("reference " + path + ": the audio stream decodes to no samples");
  const int64_t n = static_cast<int64_t>(sink.channels[0].size());
  DecodedAudio out;
  out.sample_rate = req.sample_rate;
  out.waveform = Tensor::empty({static_cast<int64_t>(sink.channels.size()), n}, DType::kF32);
  for (size_t c = 0; c < sink.channels.size(); ++c)
    std::copy(sink.channels[c].begin(), sink.channels[c].end(),
              out.waveform.data<float>() + static_cast<int64_t>(c) * n);
  return out;
}

Result<Tensor> normalize_reference_audio(const Tensor& waveform, int sample_rate, int target_rate, int num_frames,
                                         double fps) {
  if (!waveform.defined() || waveform.ndim() != 2 || waveform.dtype() != DType::kF32 || !waveform.is_contiguous() ||
      waveform.device() != Device::kCpu || (waveform.dim(0) != 1 && waveform.dim(0) != 2))
    return invalid_argument(
        "a reference soundtrack must be a contiguous host (channels, samples) f32 mono or stereo "
        "waveform, got " +
        (waveform.defined() ? waveform.describe() : std::string("nothing")));
  if (sample_rate <= 0 || target_rate <= 0 || num_frames <= 0 || !(fps > 0.0))
    return invalid_argument("normalize_reference_audio: rates, frame count and fps must be positive");
  const int64_t n_in = waveform.dim(1);
  const int64_t n = std::min(n_in, static_cast<int64_t>(static_cast<double>(num_frames) / fps * sample_rate));
  if (n < 1) return invalid_argument("a reference soundtrack has no samples");
  const float* src = waveform.data<float>();
  const int channels = static_cast<int>(waveform.dim(0));
  if (sample_rate == target_rate) {
    Tensor out = Tensor::empty({2, n}, DType::kF32);
    for (int c = 0; c < 2; ++c)
      std::copy(src + (channels == 2 ? c : 0) * n_in, src + (channels == 2 ? c : 0) * n_in + n,
                out.data<float>() + c * n);
    return out;
  }
  VORTEX_ASSIGN_OR_RETURN(const SincResampler r, SincResampler::create(sample_rate, target_rate));
  std::vector<float> ch[2];
  for (int c = 0; c < channels; ++c) ch[c] = r.resample(src + c * n_in, n);
  if (channels == 1) ch[1] = ch[0];
  const int64_t m = static_cast<int64_t>(ch[0].size());
  Tensor out = Tensor::empty({2, m}, DType::kF32);
  for (int c = 0; c < 2; ++c) std::copy(ch[c].begin(), ch[c].end(), out.data<float>() + c * m);
  return out;
}

RgbImage rotate_quarter_turns(const RgbImage& src, int turns) {
  const int t = ((turns % 4) + 4) % 4;
  if (t == 0) return src;
  const int w = src.width, h = src.height;
  RgbImage out;
  out.width = t == 2 ? w : h;
  out.height = t == 2 ? h : w;
  out.rgb.resize(src.rgb.size());
  for (int r = 0; r < out.height; ++r)
    for (int c = 0; c < out.width; ++c) {
      // np.rot90(m, k=-1)[r][c] = m[h-1-c][r]; k=-2: m[h-1-r][w-1-c]; k=-3 (= 1): m[c][w-1-r].
      const int sr = t == 1 ? h - 1 - c : t == 2 ? h - 1 - r : c;
      const int sc = t == 1 ? r : t == 2 ? w - 1 - c : w - 1 - r;
      std::memcpy(&out.rgb[(static_cast<size_t>(r) * out.width + c) * 3],
                  &src.rgb[(static_cast<size_t>(sr) * w + sc) * 3], 3);
    }
  return out;
}

Result<DecodedVideo> read_reference_video_frames(const std::string& path, const VideoDecodeFilter& filter,
                                                 int64_t max_pixels) {
  struct Sink {
    const VideoDecodeFilter* filter;
    VortexVideoDecode* req;
    DecodedVideo* out;
    bool stopped = false;
  };
  DecodedVideo out;
  VortexVideoDecode req{};
  Sink sink{&filter, &req, &out};
  req.path = path.c_str();
  req.user = &sink;
  req.max_pixels = max_pixels;
  req.sink = [](void* user, const uint8_t* rgb, int width, int height) -> int {
    auto& s = *static_cast<Sink*>(user);
    const int64_t i = s.out->decoded;
    if (s.filter->stop && s.filter->stop(i)) {
      s.stopped = true;
      return static_cast<int>(ErrorCode::kCancelled);
    }
    ++s.out->decoded;
    if (s.filter->keep && !s.filter->keep(i)) return 0;
    // round(rotation / 90) % 4 with Python's round (half to even) and modulo (non-negative).
    const int turns = ((static_cast<int>(std::nearbyint(s.req->rotation / 90.0)) % 4) + 4) % 4;
    s.out->quarter_turns = turns;
    RgbImage frame;
    frame.width = width;
    frame.height = height;
    frame.rgb.assign(rgb, rgb + static_cast<size_t>(width) * height * 3);
    if (turns != 0) frame = rotate_quarter_turns(frame, turns);
    if (s.filter->transform) frame = s.filter->transform(std::move(frame));
    s.out->frames.push_back(std::move(frame));
    s.out->indices.push_back(i);
    return 0;
  };
  const Status st = ffmpeg_decode_video(req);
  if (!st.ok() && !sink.stopped) return st.with_context("reference " + path);
  if (out.decoded == 0) return invalid_argument("reference " + path + ": no video frames to decode");
  out.fps = req.fps;
  out.pixel_format = req.pixel_format;
  return out;
}

Result<ReferenceVideo> read_reference_video(const std::string& path, int num_frames, const CanvasRule& rule,
                                            double target_fps) {
  if (num_frames < 1) return invalid_argument("read_reference_video: num_frames must be positive");
  VORTEX_ASSIGN_OR_RETURN(MediaInfo info, probe_media(path));
  if (!(info.fps > 0.0))
    return invalid_argument("reference " + path + ": the video stream has no frame rate, which 24 fps needs");
  const double fps = info.fps;
  const double scale = target_fps / fps;
  // Frame i starts at 24 fps slot floor(i * scale + 0.5); a frame whose slot is num_frames or later is never shown.
  auto slot = [&](int64_t i) {
    return fps == target_fps ? i : static_cast<int64_t>(std::floor(static_cast<double>(i) * scale + 0.5));
  };
  CanvasSize canvas;
  bool canvas_known = false;
  Status canvas_status = Status::Ok();
  VideoDecodeFilter filter;
  filter.stop = [&](int64_t i) { return slot(i) >= num_frames; };
  filter.transform = [&](RgbImage&& f) -> RgbImage {
    if (!canvas_known) {
      Result<CanvasSize> c = reference_video_canvas(f.width, f.height, rule);
      canvas_known = true;
      if (!c.ok()) {
        canvas_status = c.status();
      } else {
        canvas = *c;
      }
    }
    if (!canvas_status.ok() || (f.width == canvas.width && f.height == canvas.height)) return std::move(f);
    return lanczos_resize(f, canvas.width, canvas.height);
  };
  VORTEX_ASSIGN_OR_RETURN(DecodedVideo d, read_reference_video_frames(path, filter));
  VORTEX_RETURN_IF_ERROR(canvas_status.with_context("reference " + path));
  if (d.fps != fps)
    return internal_error("reference " + path + ": the probe and the decoder disagree on the frame rate");
  for (const RgbImage& f : d.frames)
    if (f.width != canvas.width || f.height != canvas.height)
      return unsupported("reference " + path + ": the video changes its frame size mid-stream");
  // The decode stopped at the first unshown frame, so the last kept frame is held up to num_frames.
  VORTEX_ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                          reference_frame_indices(static_cast<int64_t>(d.frames.size()), fps, num_frames, target_fps));
  ReferenceVideo v;
  v.canvas = canvas;
  v.source_fps = fps;
  v.source_frames = d.decoded;
  v.quarter_turns = d.quarter_turns;
  v.frames.reserve(idx.size());
  for (int64_t i : idx) v.frames.push_back(d.frames[static_cast<size_t>(i)]);
  return v;
}

}  // namespace vortex
