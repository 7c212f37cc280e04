// Canvas resolution and keyframe placement (see keyframe_canvas.h). Python's round() is round half to
// even, which std::nearbyint gives under the default rounding mode; the area scale is pow(x, 0.5) as
// Python's `** 0.5` computes it.
#include "media/keyframe_canvas.h"

#include <algorithm>
#include <cmath>

namespace vortex {
namespace {

int64_t py_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

RgbImage cover_crop(const RgbImage& img, const CanvasSize& c) {
  const double scale = std::max(static_cast<double>(c.width) / img.width, static_cast<double>(c.height) / img.height);
  const int rw = static_cast<int>(std::max<int64_t>(c.width, py_round(img.width * scale)));
  const int rh = static_cast<int>(std::max<int64_t>(c.height, py_round(img.height * scale)));
  const int left = std::max(0, (rw - c.width) / 2), top = std::max(0, (rh - c.height) / 2);
  return crop(lanczos_resize(img, rw, rh), left, top, c.width, c.height);
}

}  // namespace

Result<CanvasSize> resolve_canvas_size(double aspect_width, double aspect_height, const CanvasRule& rule) {
  if (!(aspect_width > 0) || !(aspect_height > 0))
    return invalid_argument("the aspect ratio must be positive, got " + std::to_string(aspect_width) + ":" +
                            std::to_string(aspect_height));
  const double ratio = aspect_width / aspect_height;
  if (!(0.25 <= ratio && ratio <= 4.0))
    return invalid_argument("MiniMax-H3 supports aspect ratios from 1:4 to 4:1, got " +
                            std::to_string(static_cast<int64_t>(aspect_width)) + ":" +
                            std::to_string(static_cast<int64_t>(aspect_height)) + " (" + std::to_string(ratio) + ")");
  double width, height;
  if (ratio >= 1.0) {
    width = rule.short_edge * ratio;
    height = rule.short_edge;
  } else {
    width = rule.short_edge;
    height = rule.short_edge / ratio;
  }
  const double area = width * height;
  if (area > static_cast<double>(rule.max_pixels)) {
    const double scale = std::pow(static_cast<double>(rule.max_pixels) / area, 0.5);
    width *= scale;
    height *= scale;
  }
  const int m = rule.multiple;
  CanvasSize c;
  c.height = static_cast<int>(std::max<int64_t>(m, py_round(height / m) * m));
  c.width = static_cast<int>(std::max<int64_t>(m, py_round(width / m) * m));
  return c;
}

Result<PlacedKeyframes> place_keyframes(const RgbImage* first, const RgbImage* last, CanvasSize canvas,
                                        const CanvasRule& rule) {
  std::vector<std::pair<const RgbImage*, const char*>> frames;
  if (first) frames.push_back({first, "first"});
  if (last) frames.push_back({last, "last"});
  if (frames.empty()) return invalid_argument("fl2va needs a first or a last keyframe (or both)");
  for (const auto& [img, anchor] : frames)
    if (img->width <= 0 || img->height <= 0 || img->rgb.size() != static_cast<size_t>(img->width) * img->height * 3)
      return invalid_argument(std::string("the ") + anchor + " keyframe is not a valid RGB image");
  if ((canvas.height > 0) != (canvas.width > 0))
    return invalid_argument("the canvas height and width have to be given together, or neither");
  PlacedKeyframes out;
  if (canvas.height <= 0) {
    auto resolved = resolve_canvas_size(frames[0].first->width, frames[0].first->height, rule);
    if (!resolved.ok())
      return resolved.status().with_context(std::string("the ") + frames[0].second + " keyframe sets the canvas");
    canvas = *resolved;
  } else if (canvas.height % rule.multiple || canvas.width % rule.multiple) {
    return invalid_argument("the canvas height and width must be multiples of " + std::to_string(rule.multiple) +
                            ", got " + std::to_string(canvas.height) + "x" + std::to_string(canvas.width));
  }
  out.canvas = canvas;
  for (size_t i = 0; i < frames.size(); ++i) {
    const RgbImage& img = *frames[i].first;
    if (img.width == canvas.width && img.height == canvas.height) out.keyframes.push_back(img);
    else if (i == 0) out.keyframes.push_back(lanczos_resize(img, canvas.width, canvas.height));
    else out.keyframes.push_back(cover_crop(img, canvas));
    out.anchors.push_back(frames[i].second);
  }
  return out;
}

}  // namespace vortex
