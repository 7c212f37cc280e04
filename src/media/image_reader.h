// Keyframe images in: PNG, JPEG and WebP files read into 8-bit RGB the way diffusers.utils.load_image
// gives them (Pillow's open, ImageOps.exif_transpose, convert("RGB")). The header is parsed here first
// (dimensions, bit depth, colour model, animation, EXIF orientation), so oversized, 16-bit, CMYK and
// animated files are refused before any pixel is decoded; the pixels then come from FFmpeg's decoders in
// libvortex_ffmpeg.so (ffmpeg_plugin.h). Alpha is dropped (not composited), as convert("RGB") drops it.
// Tested in tests/media/image_test.cpp against Pillow's pixels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "media/lanczos_resize.h"
#include "vortex/status.h"

namespace vortex {

struct ImageLimits {
  int64_t max_file_bytes = int64_t{64} << 20;  // 64 MiB
  int64_t max_pixels = int64_t{8192} * 8192;   // checked against the header before decoding
};

enum class ImageFormat { kPng, kJpeg, kWebp };
const char* image_format_name(ImageFormat format);

// What the file's header says (no pixel decoded).
struct ImageHeader {
  ImageFormat format = ImageFormat::kPng;
  int width = 0, height = 0;  // stored size, before EXIF orientation
  int bit_depth = 8;          // bits per sample
  std::string color;          // "rgb", "gray", "palette", "ycbcr", "cmyk", ...
  bool alpha = false;         // an alpha channel or a transparency entry (dropped when reading)
  bool animated = false;      // APNG (acTL) or an animated WebP (VP8X animation flag)
  int orientation = 1;        // EXIF Orientation 1..8 (1: none or absent)
};

// The header of an in-memory file; kFormat for anything that is not a well-formed PNG, JPEG or WebP start.
Result<ImageHeader> parse_image_header(const uint8_t* data, size_t size);

// Checks a keyframe file without decoding pixels: exists, is a regular non-empty file within
// limits.max_file_bytes, has a parseable header, is 8-bit, not CMYK, not animated, within max_pixels.
// Every refusal names the file and the reason. Commands call this before loading any weights.
Result<ImageHeader> probe_image(const std::string& path, const ImageLimits& limits = {});

// probe_image, then the decode: RGB as load_image returns it (EXIF orientation applied, alpha dropped,
// grey and palette expanded).
Result<RgbImage> read_image(const std::string& path, const ImageLimits& limits = {});

// The EXIF orientation transform PIL's ImageOps.exif_transpose applies for an Orientation value
// (2: mirror, 3: rotate 180, 4: flip, 5: transpose, 6: rotate 90 clockwise, 7: transverse,
// 8: rotate 90 counter-clockwise; anything else: unchanged).
RgbImage apply_exif_orientation(const RgbImage& img, int orientation);

}  // namespace vortex
