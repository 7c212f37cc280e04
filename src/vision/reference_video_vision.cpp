// Video reference pixels and features (see reference_video_vision.h). The pixel program is the image processor's
// (src/vision/vision_tower.cpp preprocess_image): the fused rescale + normalize (x - 255 mean) / (255 std) in FP32,
// rows in merge-block order, columns (channel, t, py, px); here t walks the pair's two frames.
#include "vision/reference_video_vision.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace vortex {

Result<std::pair<int, int>> video_smart_resize(int frames, int height, int width, const VisionProcessorConfig& cfg) {
  if (height <= 0 || width <= 0) return invalid_argument("video smart_resize: the frames have no pixels");
  if (frames < cfg.temporal_patch)
    return invalid_argument("video smart_resize: " + std::to_string(frames) +
                            " frames, fewer than the temporal patch " + std::to_string(cfg.temporal_patch));
  const int f = cfg.patch * cfg.merge;
  double hd = height, wd = width;
  if (height < f || width < f) {  // int(height * scale), int(width * scale)
    const double scale = std::max(static_cast<double>(f) / height, static_cast<double>(f) / width);
    hd = std::trunc(height * scale);
    wd = std::trunc(width * scale);
  }
  if (std::max(hd, wd) / std::min(hd, wd) > 200)
    return invalid_argument("video smart_resize: absolute aspect ratio must be smaller than 200");
  auto py_round = [](double v) { return static_cast<int64_t>(std::nearbyint(v)); };  // half to even
  int64_t h = py_round(hd / f) * f, w = py_round(wd / f) * f;
  const int64_t t = py_round(static_cast<double>(frames) / cfg.temporal_patch) * cfg.temporal_patch;
  if (t * h * w > cfg.max_pixels) {
    const double beta = std::sqrt(frames * hd * wd / static_cast<double>(cfg.max_pixels));
    h = std::max<int64_t>(f, static_cast<int64_t>(std::floor(hd / beta / f)) * f);
    w = std::max<int64_t>(f, static_cast<int64_t>(std::floor(wd / beta / f)) * f);
  } else if (t * h * w < cfg.min_pixels) {
    const double beta = std::sqrt(static_cast<double>(cfg.min_pixels) / (frames * hd * wd));
    h = static_cast<int64_t>(std::ceil(hd * beta / f)) * f;
    w = static_cast<int64_t>(std::ceil(wd * beta / f)) * f;
  }
  return std::pair<int, int>{static_cast<int>(h), static_cast<int>(w)};
}

Result<std::vector<VisionInput>> preprocess_video_pairs(const std::vector<RgbImage>& frames,
                                                        const VisionProcessorConfig& cfg) {
  if (frames.empty()) return invalid_argument("preprocess_video_pairs: no frames");
  const int height = frames[0].height, width = frames[0].width;
  for (size_t i = 0; i < frames.size(); ++i) {
    const RgbImage& fr = frames[i];
    if (fr.width <= 0 || fr.height <= 0 || fr.rgb.size() != static_cast<size_t>(fr.width) * fr.height * 3)
      return invalid_argument("preprocess_video_pairs: frame " + std::to_string(i) + " is not a valid RGB image");
    if (fr.width != width || fr.height != height)
      return invalid_argument("preprocess_video_pairs: frame " + std::to_string(i) + " is " + std::to_string(fr.width) +
                              "x" + std::to_string(fr.height) + ", frame 0 " + std::to_string(width) + "x" +
                              std::to_string(height) + "; a video's frames share a size");
  }
  VORTEX_ASSIGN_OR_RETURN(auto size, video_smart_resize(static_cast<int>(frames.size()), height, width, cfg));
  if (size.first != height || size.second != width)
    return unsupported("the video processor would resize " + std::to_string(frames.size()) + " frames of " +
                       std::to_string(width) + "x" + std::to_string(height) + " to " + std::to_string(size.second) +
                       "x" + std::to_string(size.first) +
                       "; only frames it passes through unresized are supported (multiples of " +
                       std::to_string(cfg.patch * cfg.merge) + " inside its pixel range)");
  const int p = cfg.patch, m = cfg.merge, tp = cfg.temporal_patch;
  float mean255[3], std255[3];
  for (int c = 0; c < 3; ++c) {
    mean255[c] = cfg.mean[c] * 255.0f;
    std255[c] = cfg.std[c] * 255.0f;
  }
  const size_t pairs = (frames.size() + tp - 1) / tp;
  std::vector<VisionInput> out;
  out.reserve(pairs);
  for (size_t pi = 0; pi < pairs; ++pi) {
    VisionInput in;
    in.grid_h = height / p;
    in.grid_w = width / p;
    const int64_t n = static_cast<int64_t>(in.grid_h) * in.grid_w, cols = 3LL * tp * p * p;
    in.pixel_values = Tensor::empty({n, cols}, DType::kF32);  // [grid_h * grid_w, 3 * tp * p * p]
    float* o = in.pixel_values.data<float>();
    for (int br = 0; br < in.grid_h / m; ++br)
      for (int bc = 0; bc < in.grid_w / m; ++bc)
        for (int ir = 0; ir < m; ++ir)
          for (int ic = 0; ic < m; ++ic) {
            const int y0 = (br * m + ir) * p, x0 = (bc * m + ic) * p;
            for (int c = 0; c < 3; ++c)
              for (int t = 0; t < tp; ++t) {
                // The processor pads the sampled frames to a whole pair by repeating the last.
                const RgbImage& fr = frames[std::min(pi * tp + t, frames.size() - 1)];
                for (int py = 0; py < p; ++py)
                  for (int px = 0; px < p; ++px) {
                    const uint8_t v = fr.rgb[(static_cast<size_t>(y0 + py) * width + x0 + px) * 3 + c];
                    *o++ = (static_cast<float>(v) - mean255[c]) / std255[c];
                  }
              }
          }
    out.push_back(std::move(in));
  }
  return out;
}

Result<VisionTower::Output> encode_video_pairs(const VisionTower& tower, const std::vector<VisionInput>& pairs) {
  if (pairs.empty()) return invalid_argument("encode_video_pairs: no frame pairs");
  const int64_t n = static_cast<int64_t>(pairs.size());
  VisionTower::Output out;
  // Pair i's rows go to rows [i * r, (i + 1) * r) of each output, r being that output's rows per pair.
  auto place = [&](const Tensor& part, int64_t i, Tensor& whole) {
    if (!whole.defined()) whole = Tensor::empty({n * part.dim(0), part.dim(1)}, DType::kF32);
    std::memcpy(whole.data<float>() + i * part.numel(), part.data<float>(), part.nbytes());
  };
  for (int64_t i = 0; i < n; ++i) {
    const VisionInput& pair = pairs[static_cast<size_t>(i)];
    if (pair.grid_h != pairs[0].grid_h || pair.grid_w != pairs[0].grid_w)
      return invalid_argument("encode_video_pairs: pair " + std::to_string(i) + " has another patch grid than pair 0");
    VORTEX_ASSIGN_OR_RETURN(const VisionTower::Output o, tower.forward(pair));
    place(o.last_hidden, i, out.last_hidden);
    place(o.merged, i, out.merged);
    out.deepstack.resize(o.deepstack.size());
    for (size_t k = 0; k < o.deepstack.size(); ++k) place(o.deepstack[k], i, out.deepstack[k]);
  }
  return out;
}

}  // namespace vortex
