// Request packing for t2va, fl2va and ref2va (research §2.5-2.7, §7.2): frame snapping, latent grid, the packed
// order [text | keyframe conditions or reference blocks | audio L | audio R | video], per-row modality, FP64 RoPE
// positions (the same formulas and operation order as ComfyUI comfy/ldm/minimax/model.py PackedLayout and diffusers'
// build_packed_sequence / build_ref2va_packed_sequence), segment tables, and (un)patchify between latents and
// packed rows. RoPE cos/sin tables live in rope.cpp.
// Tested in tests/model/packing_test.cpp (canonical 37,810-row request, positions, round trips).
#include "model/packing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace vortex {
namespace {

// The H3 release's pixel-area cap (research §7.1: 768p class, 1344x768 landscape / 768x1344 portrait).
constexpr int64_t kH3MaxPixelArea = 768LL * 1344LL;
constexpr double kFps = 24.0;
// Video time units per pixel frame: 24 fps * 5/3 = 40 units/s, the audio latent rate.
constexpr double kFrameRescale = 5.0 / 3.0;
// Pixel frames covered by latent frame k within its group of 5 (the causal VAE's first frame is 1).
constexpr int kFramesPerLatent[5] = {1, 4, 4, 4, 4};

// Area-normalized axis grid of one latent axis of length d (patch 2): d/2 points of
// np.linspace(left, left + ratio, d/2, endpoint=False) * 32 with ratio = d / A, A = sqrt(lat_h * lat_w),
// left = (1 - ratio) / 2, as diffusers' _spatial_position_grid builds it in FP64. numpy's linspace is
// i * step + start with step = (stop - start) / n, so the step is ((left + ratio) - left) / n, which
// differs from ratio / n in the last ulp for some sizes (tests/parity/fixtures/packing.json).
std::vector<double> axis_grid(int d, double sqrt_area) {
  const double ratio = static_cast<double>(d) / sqrt_area;
  const int n = d / 2;
  std::vector<double> g(static_cast<size_t>(n));
  const double left = (1.0 - ratio) / 2.0;
  const double stop = left + ratio;
  const double step = (stop - left) / static_cast<double>(n);
  for (int i = 0; i < n; ++i) g[static_cast<size_t>(i)] = (static_cast<double>(i) * step + left) * 32.0;
  return g;
}

// numpy's pairwise summation (np.add.reduce over a contiguous float64 array): blocks of at most 128 summed
// with 8 accumulators, longer arrays split in halves rounded to a multiple of 8. The "last" keyframe's
// anchor time is such a sum in diffusers.
double numpy_pairwise_sum(const double* a, int64_t n) {
  if (n < 8) {
    double s = 0.0;  // numpy starts from -0.0; for these non-negative spans the result is the same
    for (int64_t i = 0; i < n; ++i) s += a[i];
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k];
    int64_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int k = 0; k < 8; ++k) r[k] += a[i + k];
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += a[i];
    return s;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_pairwise_sum(a, n2) + numpy_pairwise_sum(a + n2, n - n2);
}

Status check_video_latents(const ModelConfig& cfg, const Tensor& t, const char* what) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is undefined");
  if (t.device() != Device::kCpu) return invalid_argument(std::string(what) + " must be a host tensor");
  if (t.dtype() != DType::kF32) return invalid_argument(std::string(what) + " must be f32, got " + t.describe());
  if (!t.is_contiguous()) return invalid_argument(std::string(what) + " must be contiguous, got " + t.describe());
  return Status::Ok();
}

}  // namespace

int snap_frames_up(int frames) {
  if (frames <= 5) return 5;
  return 5 + (frames - 5 + 16) / 17 * 17;
}

Result<int> frames_for_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0.0) {
    return invalid_argument("--seconds must be a positive number, got " + std::to_string(seconds));
  }
  constexpr double kMaxSeconds = 3600.0;  // far beyond any model's range; keeps the int conversion exact
  if (seconds > kMaxSeconds) {
    return invalid_argument("--seconds " + std::to_string(seconds) + " is more than an hour of video");
  }
  return snap_frames_up(static_cast<int>(std::ceil(seconds * kFps)));
}

Result<RequestGeometry> make_geometry(const ModelConfig& cfg, int width, int height, int frames, int64_t text_rows) {
  if (width <= 0 || height <= 0 || width % 32 != 0 || height % 32 != 0) {
    return invalid_argument("width and height must be positive multiples of 32 (VAE factor 16 x patch 2), got " +
                            std::to_string(width) + "x" + std::to_string(height) + "; e.g. use 1344x768");
  }
  if (cfg.name == "h3" && static_cast<int64_t>(width) * height > kH3MaxPixelArea) {
    return invalid_argument("h3 supports at most 768*1344 = " + std::to_string(kH3MaxPixelArea) +
                            " pixels per frame, got " + std::to_string(width) + "x" + std::to_string(height) + " = " +
                            std::to_string(static_cast<int64_t>(width) * height) + "; reduce the resolution");
  }
  if (frames < 1) {
    return invalid_argument("frames must be >= 1 (it is snapped up to 17n + 5), got " + std::to_string(frames));
  }
  if (text_rows < 0) return invalid_argument("text_rows must be >= 0, got " + std::to_string(text_rows));
  if (cfg.patch_t != 1 || cfg.patch_h != 2 || cfg.patch_w != 2) {
    return unsupported("packing supports patch (1, 2, 2) only, config has (" + std::to_string(cfg.patch_t) + ", " +
                       std::to_string(cfg.patch_h) + ", " + std::to_string(cfg.patch_w) + ")");
  }
  const int n = (snap_frames_up(frames) - 5) / 17;
  RequestGeometry g;
  g.width = width;
  g.height = height;
  g.frames_requested = frames;
  g.frames = 17 * n + 5;
  g.latent_frames = 5 * n + 2;
  g.latent_h = height / 16;
  g.latent_w = width / 16;
  g.video_rows = static_cast<int64_t>(g.latent_frames) * (g.latent_h / 2) * (g.latent_w / 2);
  // round(frames / 24 * 40) = round(5 frames / 3): the fractional part is 0, 1/3 or 2/3, never 1/2, so
  // round-half-away-from-zero and every other rounding of halves agree; integer form floor((5f + 1)/3).
  g.audio_latents = (5 * g.frames + 1) / 3;
  g.audio_rows = 2LL * g.audio_latents;
  g.text_rows = text_rows;
  return g;
}

const char* keyframe_anchor_name(KeyframeAnchor anchor) { return anchor == KeyframeAnchor::kFirst ? "first" : "last"; }

namespace {

Status check_reference(const ReferenceBlock& r, size_t index) {
  const std::string at = "pack_request: reference " + std::to_string(index) + " (" + reference_kind_name(r.kind) + ")";
  const bool visual = r.kind != ReferenceKind::kAudio;
  if (visual && (r.latent_frames <= 0 || r.latent_h <= 0 || r.latent_w <= 0 || r.latent_h % 2 || r.latent_w % 2))
    return invalid_argument(at + " needs positive latent frames and even latent height and width, got " +
                            std::to_string(r.latent_frames) + " x " + std::to_string(r.latent_h) + " x " +
                            std::to_string(r.latent_w));
  if (r.kind == ReferenceKind::kImage && (r.latent_frames != 1 || r.audio_latents != 0))
    return invalid_argument(at + " is one latent frame without audio");
  if (r.kind == ReferenceKind::kAudio && (r.audio_latents <= 0 || r.latent_frames || r.latent_h || r.latent_w))
    return invalid_argument(at + " needs audio latents and no video geometry");
  if (r.audio_latents < 0) return invalid_argument(at + " has a negative audio length");
  return Status::Ok();
}

// One channel-major audio block from `row`: n latents per channel at rotary time t + j, h = 0, w at the two ends
// of `w_grid` (left channel first), tagged audio (diffusers' _fill_audio_positions).
void fill_audio_rows(PackedLayout& layout, int64_t row, int n, double t, const std::vector<double>& w_grid) {
  for (int ch = 0; ch < 2; ++ch) {
    const double w = ch == 0 ? w_grid.front() : w_grid.back();
    for (int j = 0; j < n; ++j) {
      const size_t r = static_cast<size_t>(row + static_cast<int64_t>(ch) * n + j);
      layout.positions[r] = {t + static_cast<double>(j), 0.0, w};
      layout.modality[r] = Modality::kAudio;
    }
  }
}

// `frames` latent frames of an (h_grid x w_grid) block from `row`, frame-major, at origin + the sequential FP64
// cumsum of the frames' spans (diffusers' _temporal_position_grid); returns the sum of all spans.
double fill_video_rows(PackedLayout& layout, int64_t row, int frames, double origin, const std::vector<double>& h_grid,
                       const std::vector<double>& w_grid) {
  const int64_t per = static_cast<int64_t>(h_grid.size() * w_grid.size());
  double offset = 0.0;
  for (int k = 0; k < frames; ++k) {
    const double t = origin + offset;
    offset += kFrameRescale * static_cast<double>(kFramesPerLatent[k % 5]);
    for (size_t hi = 0; hi < h_grid.size(); ++hi)
      for (size_t wi = 0; wi < w_grid.size(); ++wi) {
        const size_t r = static_cast<size_t>(row + k * per + static_cast<int64_t>(hi * w_grid.size() + wi));
        layout.positions[r] = {t, h_grid[hi], w_grid[wi]};
        layout.modality[r] = Modality::kVideo;
      }
  }
  return offset;
}

}  // namespace

Result<PackedLayout> pack_request(const ModelConfig& cfg, const RequestGeometry& geo,
                                  const std::vector<Modality>& text_modality) {
  if (geo.latent_h <= 0 || geo.latent_w <= 0 || geo.latent_h % 2 || geo.latent_w % 2 || geo.latent_frames <= 0 ||
      geo.audio_latents <= 0 || geo.text_rows < 0) {
    return invalid_argument("pack_request: invalid geometry (build it with make_geometry)");
  }
  const int64_t frame_rows = static_cast<int64_t>(geo.latent_h / 2) * (geo.latent_w / 2);
  if (geo.video_rows != geo.latent_frames * frame_rows || geo.audio_rows != 2LL * geo.audio_latents) {
    return invalid_argument("pack_request: geometry row counts are inconsistent (build it with make_geometry)");
  }
  if (!geo.keyframes.empty() && !geo.references.empty())
    return invalid_argument("pack_request: a request has keyframes (fl2va) or references (ref2va), not both");
  for (size_t i = 0; i < geo.references.size(); ++i) VORTEX_RETURN_IF_ERROR(check_reference(geo.references[i], i));
  PackedLayout layout;
  layout.geo = geo;
  const int64_t total = geo.total_rows();
  layout.positions.resize(static_cast<size_t>(total));
  layout.modality.resize(static_cast<size_t>(total));
  const double cursor = static_cast<double>(geo.text_rows);  // media timeline origin L

  if (!text_modality.empty() && static_cast<int64_t>(text_modality.size()) != geo.text_rows)
    return invalid_argument("pack_request: " + std::to_string(text_modality.size()) + " text modality tags for " +
                            std::to_string(geo.text_rows) + " text rows");
  // Text rows: (i, 0, 0).
  for (int64_t i = 0; i < geo.text_rows; ++i) {
    layout.positions[static_cast<size_t>(i)] = {static_cast<double>(i), 0.0, 0.0};
    const Modality m = text_modality.empty() ? Modality::kText : text_modality[static_cast<size_t>(i)];
    if (m == Modality::kAudio) return invalid_argument("pack_request: a text row cannot be tagged audio");
    layout.modality[static_cast<size_t>(i)] = m;
  }

  const double sqrt_area = std::sqrt(static_cast<double>(geo.latent_h) * static_cast<double>(geo.latent_w));
  const std::vector<double> h_grid = axis_grid(geo.latent_h, sqrt_area);  // [latent_h/2]
  const std::vector<double> w_grid = axis_grid(geo.latent_w, sqrt_area);  // [latent_w/2]

  // Keyframe conditioning rows: one latent frame's (h, w) grid per keyframe, at the rotary time of the first
  // latent frame (L) or of the last one (L + the pairwise sum of every frame's span - the span of one unit).
  for (size_t k = 0; k < geo.keyframes.size(); ++k) {
    double t = cursor;
    if (geo.keyframes[k] == KeyframeAnchor::kLast) {
      std::vector<double> spans(static_cast<size_t>(geo.latent_frames));
      for (int f = 0; f < geo.latent_frames; ++f)
        spans[static_cast<size_t>(f)] = kFrameRescale * static_cast<double>(kFramesPerLatent[f % 5]);
      t = cursor + numpy_pairwise_sum(spans.data(), geo.latent_frames) - kFrameRescale;
    }
    const int64_t c0 = geo.condition_start() + static_cast<int64_t>(k) * frame_rows;
    for (size_t hi = 0; hi < h_grid.size(); ++hi)
      for (size_t wi = 0; wi < w_grid.size(); ++wi) {
        const size_t r = static_cast<size_t>(c0 + static_cast<int64_t>(hi * w_grid.size() + wi));
        layout.positions[r] = {t, h_grid[hi], w_grid[wi]};
        layout.modality[r] = Modality::kVideo;
      }
  }

  // ref2va reference blocks, in packed order. `clock` is the shared audio/video rotary clock: it starts where the
  // text rows end and each block advances it by the time it occupies (an image: 1; an audio clip: its latents; a
  // video: the larger of its soundtrack's latents and the sequential sum of its frames' spans).
  double clock = cursor;
  int64_t row = geo.condition_start() + static_cast<int64_t>(geo.keyframes.size()) * frame_rows;
  for (const ReferenceBlock& ref : geo.references) {
    if (ref.kind == ReferenceKind::kAudio) {
      fill_audio_rows(layout, row, ref.audio_latents, clock, w_grid);  // the target's width grid
      row += ref.audio_rows();
      clock += static_cast<double>(ref.audio_latents);
      continue;
    }
    const double ref_area = std::sqrt(static_cast<double>(ref.latent_h) * static_cast<double>(ref.latent_w));
    const std::vector<double> rh = axis_grid(ref.latent_h, ref_area), rw = axis_grid(ref.latent_w, ref_area);
    if (ref.kind == ReferenceKind::kImage) {
      fill_video_rows(layout, row, 1, clock, rh, rw);
      row += ref.video_rows();
      clock += 1.0;  // one integer rotary slot, not a latent frame's 5/3
      continue;
    }
    // A video's soundtrack rows come first, on the video's own width grid, at the video's origin.
    fill_audio_rows(layout, row, ref.audio_latents, clock, rw);
    row += ref.audio_rows();
    const double span = fill_video_rows(layout, row, ref.latent_frames, clock, rh, rw);
    row += ref.video_rows();
    clock += std::max(static_cast<double>(ref.audio_latents), span);
  }

  // The generated audio rows, channel-major: left j = 0..Ta-1 at w = w_grid.front(), then right at w_grid.back(),
  // from the clock the reference blocks left (the text length L without references).
  fill_audio_rows(layout, geo.audio_start(), geo.audio_latents, clock, w_grid);

  // The generated video rows, frame-major then (h, w) row-major. Frame time = origin + exclusive cumsum of (5/3) *
  // span(k) (ComfyUI _video_t_grid; equals origin + (5/3) * pixel_start(k) up to FP64 summation rounding).
  fill_video_rows(layout, geo.video_start(), geo.latent_frames, clock, h_grid, w_grid);
  (void)cfg;
  return layout;
}

SegmentTable PackedLayout::block_segments(int video_slot, int audio_slot, int condition_slot,
                                          int reference_audio_slot) const {
  if (condition_slot < 0) condition_slot = video_slot;
  if (reference_audio_slot < 0) reference_audio_slot = audio_slot;
  SegmentTable t;
  t.rows = geo.total_rows();
  auto add = [&](int64_t start, int64_t stop, int32_t row) {
    if (stop <= start) return;
    if (!t.segments.empty() && t.segments.back().table_row == row && t.segments.back().stop == start) {
      t.segments.back().stop = stop;
    } else {
      t.segments.push_back({start, stop, row});
    }
  };
  // Rows [begin, end) in runs of one modality, each run at the table row `row_of(modality)`.
  auto add_runs = [&](int64_t begin, int64_t end, auto row_of) {
    for (int64_t i = begin; i < end;) {
      int64_t j = i;
      while (j < end && modality[static_cast<size_t>(j)] == modality[static_cast<size_t>(i)]) ++j;
      add(i, j, row_of(modality[static_cast<size_t>(i)]));
      i = j;
    }
  };
  // Text rows (a vision block is tagged video and modulated as video, at the video slot).
  add_runs(geo.text_start(), geo.condition_start(),
           [&](Modality m) { return video_slot * kNumModalities + static_cast<int>(m); });
  // Conditioning rows: visual ones at the condition slot, reference audio at its own.
  add_runs(geo.condition_start(), geo.audio_start(), [&](Modality m) {
    return (m == Modality::kAudio ? reference_audio_slot : condition_slot) * kNumModalities + static_cast<int>(m);
  });
  add(geo.audio_start(), geo.video_start(), audio_slot * kNumModalities + static_cast<int>(Modality::kAudio));
  add(geo.video_start(), t.rows, video_slot * kNumModalities + static_cast<int>(Modality::kVideo));
  return t;
}

SegmentTable PackedLayout::final_segments(int video_slot, int audio_slot, int condition_slot,
                                          int reference_audio_slot) const {
  if (condition_slot < 0) condition_slot = video_slot;
  if (reference_audio_slot < 0) reference_audio_slot = audio_slot;
  SegmentTable t;
  t.rows = geo.total_rows();
  auto add = [&](int64_t start, int64_t stop, int32_t row) {
    if (stop <= start) return;
    if (!t.segments.empty() && t.segments.back().table_row == row && t.segments.back().stop == start) {
      t.segments.back().stop = stop;  // text and video share the video slot; merge when adjacent
    } else {
      t.segments.push_back({start, stop, row});
    }
  };
  add(geo.text_start(), geo.condition_start(), video_slot);
  for (int64_t i = geo.condition_start(); i < geo.audio_start();) {
    int64_t j = i;
    while (j < geo.audio_start() && modality[static_cast<size_t>(j)] == modality[static_cast<size_t>(i)]) ++j;
    add(i, j, modality[static_cast<size_t>(i)] == Modality::kAudio ? reference_audio_slot : condition_slot);
    i = j;
  }
  add(geo.audio_start(), geo.video_start(), audio_slot);
  add(geo.video_start(), t.rows, video_slot);
  return t;
}

Result<Tensor> noise_condition_latents(const Tensor& latents, const Tensor& noise, float t) {
  for (const Tensor* x : {&latents, &noise})
    if (!x->defined() || x->device() != Device::kCpu || x->dtype() != DType::kF32 || !x->is_contiguous() ||
        x->ndim() != 4)
      return invalid_argument("noise_condition_latents: latents and noise must be contiguous host [C, T, H, W] f32");
  if (latents.shape() != noise.shape())
    return invalid_argument("noise_condition_latents: latents " + latents.describe() + " and noise " +
                            noise.describe() + " differ in shape");
  Tensor out = Tensor::empty(latents.shape(), DType::kF32);
  const float keep = t, mix = 1.0f - t;  // torch: timestep * sample + (1.0 - timestep) * noise, all float32
  for (int64_t i = 0; i < latents.numel(); ++i)
    out.data<float>()[i] = keep * latents.data<float>()[i] + mix * noise.data<float>()[i];
  return out;
}

Result<Tensor> patchify_video(const ModelConfig& cfg, const Tensor& latents) {
  VORTEX_RETURN_IF_ERROR(check_video_latents(cfg, latents, "video latents"));
  if (latents.ndim() != 4 || latents.dim(0) != cfg.in_channels || latents.dim(2) % 2 || latents.dim(3) % 2) {
    return invalid_argument("video latents must be [" + std::to_string(cfg.in_channels) +
                            ", T, H, W] f32 with even H and W, got " + latents.describe());
  }
  const int64_t C = latents.dim(0), T = latents.dim(1), H = latents.dim(2), W = latents.dim(3);
  const int64_t h2 = H / 2, w2 = W / 2;
  Tensor rows = Tensor::empty({T * h2 * w2, C * 4}, DType::kF32);  // [T*(H/2)*(W/2), C*4] f32
  const float* src = latents.data<float>();
  float* dst = rows.data<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t hi = 0; hi < h2; ++hi)
      for (int64_t wi = 0; wi < w2; ++wi) {
        float* row = dst + ((t * h2 + hi) * w2 + wi) * C * 4;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ph = 0; ph < 2; ++ph)
            for (int64_t pw = 0; pw < 2; ++pw)
              row[c * 4 + ph * 2 + pw] = src[((c * T + t) * H + hi * 2 + ph) * W + wi * 2 + pw];
      }
  return rows;
}

Result<Tensor> unpatchify_video(const ModelConfig& cfg, const RequestGeometry& geo, const Tensor& rows) {
  VORTEX_RETURN_IF_ERROR(check_video_latents(cfg, rows, "video rows"));
  const int64_t C = cfg.in_channels, T = geo.latent_frames, H = geo.latent_h, W = geo.latent_w;
  const int64_t h2 = H / 2, w2 = W / 2;
  if (rows.ndim() != 2 || rows.dim(0) != T * h2 * w2 || rows.dim(1) != C * 4) {
    return invalid_argument("video rows must be [" + std::to_string(T * h2 * w2) + ", " + std::to_string(C * 4) +
                            "] f32 for this request, got " + rows.describe());
  }
  Tensor lat = Tensor::empty({C, T, H, W}, DType::kF32);  // [C, T, H, W] f32
  const float* src = rows.data<float>();
  float* dst = lat.data<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t hi = 0; hi < h2; ++hi)
      for (int64_t wi = 0; wi < w2; ++wi) {
        const float* row = src + ((t * h2 + hi) * w2 + wi) * C * 4;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ph = 0; ph < 2; ++ph)
            for (int64_t pw = 0; pw < 2; ++pw)
              dst[((c * T + t) * H + hi * 2 + ph) * W + wi * 2 + pw] = row[c * 4 + ph * 2 + pw];
      }
  return lat;
}

Result<Tensor> audio_to_rows(const Tensor& latents) {
  if (!latents.defined() || latents.device() != Device::kCpu || latents.dtype() != DType::kF32 ||
      !latents.is_contiguous() || latents.ndim() != 3 || latents.dim(0) != 2) {
    return invalid_argument("audio latents must be a contiguous host [2, C, Ta] f32 tensor, got " +
                            (latents.defined() ? latents.describe() : std::string("undefined")));
  }
  const int64_t C = latents.dim(1), Ta = latents.dim(2);
  Tensor rows = Tensor::empty({2 * Ta, C}, DType::kF32);  // [2*Ta, C] f32, channel-major
  const float* src = latents.data<float>();
  float* dst = rows.data<float>();
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t j = 0; j < Ta; ++j)
      for (int64_t c = 0; c < C; ++c) dst[(ch * Ta + j) * C + c] = src[(ch * C + c) * Ta + j];
  return rows;
}

Result<Tensor> rows_to_audio(const ModelConfig& cfg, const RequestGeometry& geo, const Tensor& rows) {
  const int64_t C = cfg.audio_in_channels, Ta = geo.audio_latents;
  if (!rows.defined() || rows.device() != Device::kCpu || rows.dtype() != DType::kF32 || !rows.is_contiguous() ||
      rows.ndim() != 2 || rows.dim(0) != 2 * Ta || rows.dim(1) != C) {
    return invalid_argument("audio rows must be a contiguous host [" + std::to_string(2 * Ta) + ", " +
                            std::to_string(C) + "] f32 tensor for this request, got " +
                            (rows.defined() ? rows.describe() : std::string("undefined")));
  }
  Tensor lat = Tensor::empty({2, C, Ta}, DType::kF32);  // [2, C, Ta] f32
  const float* src = rows.data<float>();
  float* dst = lat.data<float>();
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t j = 0; j < Ta; ++j)
      for (int64_t c = 0; c < C; ++c) dst[(ch * C + c) * Ta + j] = src[(ch * Ta + j) * C + c];
  return lat;
}

}  // namespace vortex
