// Keyframe image reading (see image_reader.h). The container is walked here, bounds-checked byte by byte:
// PNG chunks (IHDR, tRNS, acTL, eXIf), JPEG markers up to the scan (SOFn, APP1 Exif) and WebP RIFF
// chunks (VP8, VP8L, VP8X, EXIF, ANIM). The EXIF block's IFD0 gives the Orientation tag. Pixels come
// from the FFmpeg module; orientation is applied afterwards, as PIL's exif_transpose applies it.
#include "media/image_reader.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "media/ffmpeg_module.h"

namespace vortex {
namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t le32(const uint8_t* p) {
  return (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
}
uint32_t le24(const uint8_t* p) { return (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0]; }

// EXIF Orientation from a TIFF-structured block ("II*\0" or "MM\0*", IFD0). 1 when absent or malformed.
int exif_orientation(const uint8_t* d, size_t n) {
  if (n >= 6 && std::memcmp(d, "Exif\0\0", 6) == 0) {
    d += 6;
    n -= 6;
  }
  if (n < 8) return 1;
  const bool le = d[0] == 'I' && d[1] == 'I';
  if (!le && !(d[0] == 'M' && d[1] == 'M')) return 1;
  auto u16 = [&](size_t o) { return le ? static_cast<uint16_t>(d[o] | (d[o + 1] << 8)) : be16(d + o); };
  auto u32 = [&](size_t o) { return le ? le32(d + o) : be32(d + o); };
  if (u16(2) != 42) return 1;
  const size_t ifd = u32(4);
  if (ifd + 2 > n) return 1;
  const size_t count = u16(ifd);
  for (size_t i = 0; i < count; ++i) {
    const size_t e = ifd + 2 + i * 12;
    if (e + 12 > n) return 1;
    if (u16(e) == 0x0112 && u16(e + 2) == 3) {
      const int v = u16(e + 8);
      return v >= 1 && v <= 8 ? v : 1;
    }
  }
  return 1;
}

Result<ImageHeader> parse_png(const uint8_t* d, size_t n) {
  ImageHeader h;
  h.format = ImageFormat::kPng;
  size_t pos = 8;
  bool have_ihdr = false;
  int color_type = 0;
  while (pos + 12 <= n) {
    const uint32_t len = be32(d + pos);
    const uint8_t* type = d + pos + 4;
    if (len > n - pos - 12) return format_error("a PNG chunk runs past the end of the file (truncated?)");
    const uint8_t* body = d + pos + 8;
    if (!have_ihdr) {
      if (std::memcmp(type, "IHDR", 4) != 0 || len != 13) return format_error("a PNG must start with an IHDR chunk");
      h.width = static_cast<int>(std::min<uint32_t>(be32(body), INT32_MAX));
      h.height = static_cast<int>(std::min<uint32_t>(be32(body + 4), INT32_MAX));
      h.bit_depth = body[8];
      color_type = body[9];
      static const char* kColor[] = {"gray", "?", "rgb", "palette", "gray+alpha", "?", "rgba"};
      if (color_type > 6 || std::strcmp(kColor[color_type], "?") == 0)
        return format_error("unknown PNG colour type " + std::to_string(color_type));
      h.color = kColor[color_type];
      h.alpha = color_type == 4 || color_type == 6;
      have_ihdr = true;
    } else if (std::memcmp(type, "tRNS", 4) == 0) {
      h.alpha = true;
    } else if (std::memcmp(type, "acTL", 4) == 0) {
      h.animated = true;
    } else if (std::memcmp(type, "eXIf", 4) == 0) {
      h.orientation = exif_orientation(body, len);
    } else if (std::memcmp(type, "IEND", 4) == 0) {
      break;
    }
    pos += 12 + static_cast<size_t>(len);
  }
  if (!have_ihdr) return format_error("the PNG ends before its IHDR chunk");
  return h;
}

Result<ImageHeader> parse_jpeg(const uint8_t* d, size_t n) {
  ImageHeader h;
  h.format = ImageFormat::kJpeg;
  size_t pos = 2;
  bool have_sof = false;
  while (pos + 4 <= n) {
    if (d[pos] != 0xFF) return format_error("malformed JPEG marker sequence");
    const uint8_t m = d[pos + 1];
    if (m == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  // markers without a length
      pos += 2;
      continue;
    }
    const size_t len = be16(d + pos + 2);
    if (len < 2 || pos + 2 + len > n) return format_error("a JPEG segment runs past the end of the file (truncated?)");
    const uint8_t* body = d + pos + 4;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (len < 8) return format_error("a JPEG frame header is too short");
      h.bit_depth = body[0];
      h.height = be16(body + 1);
      h.width = be16(body + 3);
      const int components = body[5];
      h.color = components == 1 ? "gray" : components == 3 ? "ycbcr" : components == 4 ? "cmyk" : "?";
      if (h.color == "?") return format_error("a JPEG with " + std::to_string(components) + " components");
      have_sof = true;
    } else if (m == 0xE1 && len >= 8 && std::memcmp(body, "Exif\0\0", 6) == 0 && h.orientation == 1) {
      h.orientation = exif_orientation(body, len - 2);
    } else if (m == 0xDA || m == 0xD9) {
      break;
    }
    pos += 2 + len;
  }
  if (!have_sof) return format_error("the JPEG has no frame header before its scan (truncated or not a JPEG)");
  return h;
}

Result<ImageHeader> parse_webp(const uint8_t* d, size_t n) {
  ImageHeader h;
  h.format = ImageFormat::kWebp;
  h.color = "rgb";
  size_t pos = 12;
  bool have_size = false;
  const size_t riff_end = std::min<size_t>(n, size_t{le32(d + 4)} + 8);
  while (pos + 8 <= riff_end) {
    const uint8_t* type = d + pos;
    const size_t len = le32(d + pos + 4);
    if (len > riff_end - pos - 8) return format_error("a WebP chunk runs past the end of the file (truncated?)");
    const uint8_t* body = d + pos + 8;
    if (std::memcmp(type, "VP8X", 4) == 0 && len >= 10) {
      h.alpha = (body[0] & 0x10) != 0;
      h.animated = (body[0] & 0x02) != 0;
      h.width = static_cast<int>(le24(body + 4) + 1);
      h.height = static_cast<int>(le24(body + 7) + 1);
      have_size = true;
    } else if (std::memcmp(type, "VP8 ", 4) == 0 && len >= 10 && !have_size) {
      if (body[3] != 0x9d || body[4] != 0x01 || body[5] != 0x2a) return format_error("malformed WebP VP8 header");
      h.width = (body[6] | (body[7] << 8)) & 0x3fff;
      h.height = (body[8] | (body[9] << 8)) & 0x3fff;
      h.color = "ycbcr";
      have_size = true;
    } else if (std::memcmp(type, "VP8 ", 4) == 0) {
      h.color = "ycbcr";
    } else if (std::memcmp(type, "VP8L", 4) == 0 && len >= 5 && !have_size) {
      if (body[0] != 0x2f) return format_error("malformed WebP VP8L header");
      const uint32_t bits = le32(body + 1);
      h.width = static_cast<int>((bits & 0x3fff) + 1);
      h.height = static_cast<int>(((bits >> 14) & 0x3fff) + 1);
      h.alpha = ((bits >> 28) & 1) != 0;
      have_size = true;
    } else if (std::memcmp(type, "ALPH", 4) == 0) {
      h.alpha = true;
    } else if (std::memcmp(type, "ANIM", 4) == 0 || std::memcmp(type, "ANMF", 4) == 0) {
      h.animated = true;
    } else if (std::memcmp(type, "EXIF", 4) == 0) {
      h.orientation = exif_orientation(body, len);
    }
    pos += 8 + len + (len & 1);
  }
  if (!have_size) return format_error("the WebP has no VP8, VP8L or VP8X chunk (truncated or not a still WebP)");
  return h;
}

std::string describe(const ImageHeader& h) {
  return std::string(image_format_name(h.format)) + " " + std::to_string(h.width) + "x" + std::to_string(h.height);
}

Status check_supported(const ImageHeader& h, const ImageLimits& limits) {
  if (h.width <= 0 || h.height <= 0)
    return format_error("the " + describe(h) + " header gives no pixels (zero width or height)");
  if (static_cast<int64_t>(h.width) * h.height > limits.max_pixels)
    return invalid_argument("the image is " + std::to_string(h.width) + "x" + std::to_string(h.height) + " = " +
                            std::to_string(static_cast<int64_t>(h.width) * h.height) + " pixels, over the limit of " +
                            std::to_string(limits.max_pixels) +
                            " (refused before decoding; scale it down first, the canvas is at most 1344x768)");
  if (h.animated)
    return unsupported("animated " + std::string(image_format_name(h.format)) +
                       " images are refused: a keyframe is one still image; export the frame you want as a PNG");
  if (h.bit_depth == 16)
    return unsupported(std::string(image_format_name(h.format)) +
                       " with 16 bits per sample is refused (Pillow's 8-bit conversion of it is lossy and depends on "
                       "the colour type); convert it to 8 bits per channel first");
  if (h.bit_depth != 8 && !(h.format == ImageFormat::kPng && h.bit_depth < 8))
    return unsupported(std::string(image_format_name(h.format)) + " with " + std::to_string(h.bit_depth) +
                       " bits per sample is not supported; convert it to 8 bits per channel");
  if (h.color == "cmyk")
    return unsupported(
        "CMYK JPEGs are refused (Pillow's naive CMYK to RGB conversion ignores colour profiles, so the colours "
        "would be wrong); convert the image to RGB first");
  return Status::Ok();
}

}  // namespace

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kWebp:
      return "WebP";
  }
  return "?";
}

Result<ImageHeader> parse_image_header(const uint8_t* data, size_t size) {
  if (size >= 8 && std::memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) return parse_png(data, size);
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return parse_jpeg(data, size);
  if (size >= 12 && std::memcmp(data, "RIFF", 4) == 0 && std::memcmp(data + 8, "WEBP", 4) == 0)
    return parse_webp(data, size);
  return format_error("not a PNG, JPEG or WebP file (unrecognised signature)");
}

namespace {

Result<std::vector<uint8_t>> read_file_checked(const std::string& path, const ImageLimits& limits) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found("no such file");
  if (!S_ISREG(st.st_mode)) return invalid_argument("not a regular file");
  if (st.st_size == 0) return format_error("the file is empty (0 bytes)");
  if (st.st_size > limits.max_file_bytes)
    return invalid_argument("the file is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                            std::to_string(limits.max_file_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot be opened for reading (permissions?)");
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (in.gcount() != static_cast<std::streamsize>(bytes.size())) return io_error("could not be read completely");
  return bytes;
}

Result<ImageHeader> probe_bytes(const std::vector<uint8_t>& bytes, const ImageLimits& limits) {
  VORTEX_ASSIGN_OR_RETURN(ImageHeader h, parse_image_header(bytes.data(), bytes.size()));
  VORTEX_RETURN_IF_ERROR(check_supported(h, limits));
  return h;
}

}  // namespace

Result<ImageHeader> probe_image(const std::string& path, const ImageLimits& limits) {
  auto bytes = read_file_checked(path, limits);
  if (!bytes.ok()) return bytes.status().with_context("image " + path);
  auto h = probe_bytes(*bytes, limits);
  if (!h.ok()) return h.status().with_context("image " + path);
  return h;
}

Result<RgbImage> read_image(const std::string& path, const ImageLimits& limits) {
  auto bytes = read_file_checked(path, limits);
  if (!bytes.ok()) return bytes.status().with_context("image " + path);
  auto h = probe_bytes(*bytes, limits);
  if (!h.ok()) return h.status().with_context("image " + path);
  RgbImage img{h->width, h->height, std::vector<uint8_t>(static_cast<size_t>(h->width) * h->height * 3)};
  VortexImageDecode req{};
  req.data = bytes->data();
  req.size = bytes->size();
  req.codec = h->format == ImageFormat::kPng    ? VORTEX_IMAGE_PNG
              : h->format == ImageFormat::kJpeg ? VORTEX_IMAGE_JPEG
                                                : VORTEX_IMAGE_WEBP;
  req.width = h->width;
  req.height = h->height;
  req.max_pixels = limits.max_pixels;
  req.rgb = img.rgb.data();
  Status st = ffmpeg_decode_image(req);
  if (!st.ok()) return st.with_context("image " + path + " (" + describe(*h) + ")");
  return apply_exif_orientation(img, h->orientation);
}

RgbImage apply_exif_orientation(const RgbImage& img, int orientation) {
  if (orientation < 2 || orientation > 8) return img;
  const int w = img.width, h = img.height;
  const bool swap = orientation >= 5;
  RgbImage out{swap ? h : w, swap ? w : h, std::vector<uint8_t>(img.rgb.size())};
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sy = y, sx = x;  // source pixel for output (y, x)
      switch (orientation) {
        case 2:
          sx = w - 1 - x;
          break;  // FLIP_LEFT_RIGHT
        case 3:
          sy = h - 1 - y;
          sx = w - 1 - x;
          break;  // ROTATE_180
        case 4:
          sy = h - 1 - y;
          break;  // FLIP_TOP_BOTTOM
        case 5:
          sy = x;
          sx = y;
          break;  // TRANSPOSE
        case 6:
          sy = h - 1 - x;
          sx = y;
          break;  // ROTATE_270 (90 clockwise)
        case 7:
          sy = h - 1 - x;
          sx = w - 1 - y;
          break;  // TRANSVERSE
        case 8:
          sy = x;
          sx = w - 1 - y;
          break;  // ROTATE_90 (90 counter-clockwise)
      }
      std::memcpy(out.rgb.data() + (static_cast<size_t>(y) * out.width + x) * 3,
                  img.rgb.data() + (static_cast<size_t>(sy) * w + sx) * 3, 3);
    }
  }
  return out;
}

}  // namespace vortex
