// video_frames_to_rgb8_i420 (see decode_frames.h). Per row pair: each channel's f32 row -> u8 through
// u8 = rne(fp32(clamp(fp32(fp32(x * std_c) + mean_c), 0, 1) * 255)) (the build has -ffp-contract=off, so no FMA;
// rne by adding and subtracting 2^23, exact for [0, 255]), interleaved into the RGB rows, then the I420 rows.
#include "engine/decode_frames.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "media/yuv420.h"

namespace vortex {
namespace {

// The ImageNet statistics VideoVae's output is normalized with (src/vae/video_vae.cpp; the test compares the
// bytes with video_to_rgb8's).
constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};

// One channel row, vectorizable: NaN and values below 0 give 0, above 1 give 255.
void row_to_u8(const float* __restrict s, float std_c, float mean_c, int64_t n, uint8_t* __restrict d) {
  constexpr float kRound = 8388608.0f;  // 2^23: (x + 2^23) - 2^23 rounds x in [0, 2^22] to an integer, ties to even
  for (int64_t i = 0; i < n; ++i) {
    const float a = s[i] * std_c;
    float v = a + mean_c;
    v = v > 0.0f ? v : 0.0f;
    v = v < 1.0f ? v : 1.0f;
    const float t = (v * 255.0f + kRound) - kRound;
    d[i] = static_cast<uint8_t>(static_cast<int32_t>(t));
  }
}

}  // namespace

Status video_frames_to_rgb8_i420(const Tensor& decoded, int64_t begin, int64_t end, Tensor& rgb, Tensor& i420,
                                 int threads) {
  if (!decoded.defined() || decoded.ndim() != 4 || decoded.dim(0) != 3 || decoded.dtype() != DType::kF32 ||
      !decoded.is_contiguous())
    return invalid_argument("video_frames_to_rgb8_i420: expected a contiguous [3, F, H, W] f32 tensor, got " +
                            (decoded.defined() ? decoded.describe() : std::string("nothing")));
  const int64_t f = decoded.dim(1), h = decoded.dim(2), w = decoded.dim(3), n = end - begin;
  if (begin < 0 || end > f || begin > end)
    return invalid_argument("video_frames_to_rgb8_i420: frames [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") are outside the " + std::to_string(f) + " decoded frames");
  if (!rgb.defined() || rgb.dtype() != DType::kU8 || !rgb.is_contiguous() || rgb.ndim() != 4 || rgb.dim(0) != n ||
      rgb.dim(1) != h || rgb.dim(2) != w || rgb.dim(3) != 3)
    return invalid_argument("video_frames_to_rgb8_i420: rgb must be a contiguous [" + std::to_string(n) + ", " +
                            std::to_string(h) + ", " + std::to_string(w) + ", 3] u8 tensor, got " +
                            (rgb.defined() ? rgb.describe() : std::string("nothing")));
  const bool yuv = i420.defined();
  if (yuv && (h % 2 || w % 2 || i420.dtype() != DType::kU8 || !i420.is_contiguous() || i420.ndim() != 2 ||
              i420.dim(0) != n || i420.dim(1) != i420_frame_bytes(w, h)))
    return invalid_argument("video_frames_to_rgb8_i420: i420 must be a contiguous [" + std::to_string(n) + ", " +
                            std::to_string(i420_frame_bytes(w, h)) + "] u8 tensor for an even frame size, got " +
                            i420.describe() + " for " + std::to_string(h) + "x" + std::to_string(w));
  const int64_t fp = h * w, plane = f * fp, pairs = (h + 1) / 2, fb = i420_frame_bytes(w, h);
  const float* src = decoded.data<float>();
  uint8_t* drgb = rgb.data<uint8_t>();
  uint8_t* dyuv = yuv ? i420.data<uint8_t>() : nullptr;
  parallel_for_ranges(static_cast<size_t>(n * pairs), std::max(1, threads), 1, [&](size_t p0, size_t p1) {
    std::vector<uint8_t> planar(static_cast<size_t>(6 * w));  // [2 rows][3 channels][W] u8
    for (size_t p = p0; p < p1; ++p) {
      const int64_t fi = static_cast<int64_t>(p) / pairs, y0 = 2 * (static_cast<int64_t>(p) % pairs);
      const int rows = y0 + 1 < h ? 2 : 1;
      for (int r = 0; r < rows; ++r) {
        uint8_t* ch_rows = planar.data() + static_cast<size_t>(r * 3 * w);
        for (int c = 0; c < 3; ++c)
          row_to_u8(src + c * plane + (begin + fi) * fp + (y0 + r) * w, kStd[c], kMean[c], w, ch_rows + c * w);
        uint8_t* d = drgb + ((fi * h) + y0 + r) * w * 3;
        for (int64_t x = 0; x < w; ++x) {
          d[3 * x] = ch_rows[x];
          d[3 * x + 1] = ch_rows[w + x];
          d[3 * x + 2] = ch_rows[2 * w + x];
        }
      }
      if (!yuv) continue;
      const uint8_t* r0[3] = {planar.data(), planar.data() + w, planar.data() + 2 * w};
      const uint8_t* r1[3] = {planar.data() + 3 * w, planar.data() + 4 * w, planar.data() + 5 * w};
      uint8_t* base = dyuv + fi * fb;
      uint8_t* yrow = base + y0 * w;
      rgb_planar_rows_to_i420(r0, r1, w, yrow, yrow + w, base + fp + (y0 / 2) * (w / 2),
                              base + fp + (h / 2) * (w / 2) + (y0 / 2) * (w / 2));
    }
  });
  return Status::Ok();
}

}  // namespace vortex
