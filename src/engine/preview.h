// Latent preview: a small PNG that shows roughly what the video latents contain. It is NOT a VAE
// decode: a FIXED linear map (kPreviewRgbFromLatent, documented in docs/outputs.md) takes the 24 latent
// channels to RGB, 4 evenly spaced latent frames are placed side by side, each upscaled x4 (nearest).
// Tested in tests/cli/cli_test.cpp (PNG signature and size of the demo's preview.png).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

constexpr int kPreviewFrames = 4;   // latent frames shown (fewer when the video has fewer)
constexpr int kPreviewUpscale = 4;  // nearest-neighbour factor per latent pixel

struct PreviewImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3] row-major
};

// Indices of the latent frames shown: round(i * (T - 1) / (n - 1)) for i < n = min(T, 4).
std::vector<int> preview_frame_indices(int latent_frames);

// video_latents: [24, T, H, W] f32, contiguous (channel-major, as written to video_latents.safetensors).
// pixel(k) = clamp(round(128 + 64 * sum_c M[k][c] * x_c), 0, 255), M = kPreviewRgbFromLatent.
Result<PreviewImage> render_latent_preview(const Tensor& video_latents);
// Encodes an 8-bit RGB PNG (libpng) at `path`.
Status write_png_rgb(const PreviewImage& image, const std::string& path);

}  // namespace vortex
