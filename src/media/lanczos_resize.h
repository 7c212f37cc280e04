// Pillow's LANCZOS resize of 8-bit RGB images, reproduced integer for integer: diffusers 0.42.1 puts
// fl2va keyframes on the canvas with PIL `Image.resize(size, LANCZOS)` (MiniMaxH3ResizeStep), so the
// conditioning pixels are these. The algorithm (Pillow's libImaging/Resample.c, 8 bits per channel):
// a 3-lobe windowed sinc widened by the downscale factor, double coefficients normalised per output
// pixel, rounded to 22-bit fixed point, a horizontal pass then a vertical pass, each rounding to uint8.
// Tested against Pillow's output in tests/media/image_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace vortex {

// An 8-bit RGB image: rgb holds [height, width, 3] bytes, row-major.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

// PIL `image.resize((width, height), Image.Resampling.LANCZOS)` for an RGB image (the whole source box).
// A pass whose axis keeps its size is skipped, as Pillow skips it; same size in and out copies.
RgbImage lanczos_resize(const RgbImage& src, int width, int height);

// PIL `image.crop((left, top, left + width, top + height))`, the box inside the image.
RgbImage crop(const RgbImage& src, int left, int top, int width, int height);

}  // namespace vortex
