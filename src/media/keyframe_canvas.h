// fl2va keyframes onto the generation canvas, as diffusers 0.42.1's MiniMaxH3ResizeStep and
// resolve_canvas_size (modular_pipelines/minimax_h3/) do it: the canvas follows the first keyframe's
// aspect ratio (768 short edge, at most 768 x 1344 pixels, both axes rounded to multiples of 32) unless
// one is given; the first keyframe is stretched onto it and a second one cover-cropped (scaled to cover,
// centred, cropped), both with Pillow's LANCZOS (lanczos_resize.h). Tested bit for bit against
// diffusers' output in tests/media/image_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "media/lanczos_resize.h"
#include "vortex/status.h"

namespace vortex {

struct CanvasRule {
  int multiple = 32;                // both axes round to this (the video VAE's 16 x the 2x2 patch)
  int short_edge = 768;             // the released checkpoint's canvas
  int64_t max_pixels = 768 * 1344;  // area cap before rounding
};

struct CanvasSize {
  int height = 0, width = 0;
};

// resolve_canvas_size: the canvas for an aspect ratio aspect_width:aspect_height (a keyframe's pixel size
// works). Aspect ratios outside 1:4 .. 4:1 are refused (kInvalidArgument), as diffusers refuses them.
Result<CanvasSize> resolve_canvas_size(double aspect_width, double aspect_height, const CanvasRule& rule = {});

// One or two keyframes (first, last; either may be null, not both) onto the canvas. `canvas` given
// (height and width > 0, multiples of rule.multiple) or resolved from the first present keyframe.
// Returns the placed keyframes in packed order (first, then last), each canvas-sized.
struct PlacedKeyframes {
  CanvasSize canvas;
  std::vector<RgbImage> keyframes;
  std::vector<std::string> anchors;  // "first" / "last", positional with keyframes
};
Result<PlacedKeyframes> place_keyframes(const RgbImage* first, const RgbImage* last, CanvasSize canvas = {},
                                        const CanvasRule& rule = {});

}  // namespace vortex
