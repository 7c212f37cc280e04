// Latent preview PNG (see preview.h): fixed 24 -> RGB linear map, 4 frames side by side, x4 nearest.
// The map is a made-up colour wheel (row k = 0.25 cos(2 pi (k/3 + c/24)), 3 decimals), chosen so
// unit-variance latents spread over the 8-bit range; it is not the H3 VAE and promises nothing.
// Tested in tests/cli/cli_test.cpp.
#include "engine/preview.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace vortex {
namespace {

constexpr int kLatentChannels = 24;
// RGB from the 24 latent channels. NOT a VAE decode.
constexpr float kPreviewRgbFromLatent[3][kLatentChannels] = {
    {0.250f,  0.241f,  0.217f,  0.177f,  0.125f,  0.065f,  0.000f, -0.065f, -0.125f, -0.177f, -0.217f, -0.241f,
     -0.250f, -0.241f, -0.217f, -0.177f, -0.125f, -0.065f, 0.000f, 0.065f,  0.125f,  0.177f,  0.217f,  0.241f},
    {-0.125f, -0.177f, -0.217f, -0.241f, -0.250f, -0.241f, -0.217f, -0.177f, -0.125f, -0.065f, 0.000f, 0.065f,
     0.125f,  0.177f,  0.217f,  0.241f,  0.250f,  0.241f,  0.217f,  0.177f,  0.125f,  0.065f,  0.000f, -0.065f},
    {-0.125f, -0.065f, 0.000f, 0.065f,  0.125f,  0.177f,  0.217f,  0.241f,  0.250f,  0.241f,  0.217f,  0.177f,
     0.125f,  0.065f,  0.000f, -0.065f, -0.125f, -0.177f, -0.217f, -0.241f, -0.250f, -0.241f, -0.217f, -0.177f},
};
constexpr float kPreviewBias = 128.0f;
constexpr float kPreviewGain = 64.0f;

uint8_t to_byte(float v) {
  if (!(v > 0.0f)) return 0;  // also NaN -> 0
  if (v >= 255.0f) return 255;
  return static_cast<uint8_t>(std::lround(v));
}

}  // namespace

std::vector<int> preview_frame_indices(int latent_frames) {
  std::vector<int> idx;
  const int n = std::min(latent_frames, kPreviewFrames);
  if (n <= 0) return idx;
  if (n == 1) return {0};
  for (int i = 0; i < n; ++i) {
    idx.push_back(static_cast<int>(std::lround(static_cast<double>(i) * (latent_frames - 1) / (n - 1))));
  }
  return idx;
}

Result<PreviewImage> render_latent_preview(const Tensor& video_latents) {
  if (video_latents.ndim() != 4 || video_latents.dim(0) != kLatentChannels || video_latents.dtype() != DType::kF32 ||
      !video_latents.is_contiguous() || video_latents.device() != Device::kCpu) {
    return invalid_argument("latent preview needs host video latents [24, T, H, W] f32 contiguous, got " +
                            video_latents.describe());
  }
  const int t = static_cast<int>(video_latents.dim(1));
  const int h = static_cast<int>(video_latents.dim(2));
  const int w = static_cast<int>(video_latents.dim(3));
  const std::vector<int> frames = preview_frame_indices(t);
  if (frames.empty() || h <= 0 || w <= 0) {
    return invalid_argument("latent preview: empty video latents " + video_latents.describe());
  }
  const float* x = video_latents.data<float>();  // [24, T, H, W]
  const int64_t plane = static_cast<int64_t>(t) * h * w;
  PreviewImage img;
  img.width = static_cast<int>(frames.size()) * w * kPreviewUpscale;
  img.height = h * kPreviewUpscale;
  img.rgb.assign(static_cast<size_t>(img.width) * img.height * 3, 0);
  for (size_t f = 0; f < frames.size(); ++f) {
    for (int yy = 0; yy < h; ++yy) {
      for (int xx = 0; xx < w; ++xx) {
        const int64_t base = (static_cast<int64_t>(frames[f]) * h + yy) * w + xx;
        uint8_t px[3];
        for (int k = 0; k < 3; ++k) {
          float acc = 0.0f;
          for (int c = 0; c < kLatentChannels; ++c) acc += kPreviewRgbFromLatent[k][c] * x[c * plane + base];
          px[k] = to_byte(kPreviewBias + kPreviewGain * acc);
        }
        for (int dy = 0; dy < kPreviewUpscale; ++dy) {
          const int row = yy * kPreviewUpscale + dy;
          for (int dx = 0; dx < kPreviewUpscale; ++dx) {
            const int col = (static_cast<int>(f) * w + xx) * kPreviewUpscale + dx;
            uint8_t* dst = &img.rgb[(static_cast<size_t>(row) * img.width + col) * 3];
            dst[0] = px[0], dst[1] = px[1], dst[2] = px[2];
          }
        }
      }
    }
  }
  return img;
}

Status write_png_rgb(const PreviewImage& image, const std::string& path) {
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3) {
    return invalid_argument("write_png_rgb: image buffer does not match its size");
  }
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp) return io_error("cannot create " + path + " (check the directory exists and is writable)");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    std::fclose(fp);
    return io_error("libpng could not allocate a writer for " + path);
  }
  // libpng reports errors by longjmp; nothing with a destructor lives between here and the calls below.
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(fp);
    return io_error("libpng failed while writing " + path);
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int row = 0; row < image.height; ++row) {
    png_write_row(png, const_cast<png_bytep>(&image.rgb[static_cast<size_t>(row) * image.width * 3]));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(fp) != 0) return io_error("closing " + path + " failed (disk full?)");
  return Status::Ok();
}

}  // namespace vortex
