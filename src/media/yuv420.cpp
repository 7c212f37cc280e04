// RGB8 -> I420 (see yuv420.h). Coefficients: BT.709 (Kr 0.2126, Kb 0.0722) scaled to limited range (219 / 255
// luma, 224 / 255 chroma) in units of 2^-16, the green chroma terms set so that each chroma row sums to zero (grey
// stays 128 exactly). Y = (yr R + yg G + yb B + 16.5 * 2^16) >> 16; U, V from the sums of a 2x2 quad, >> 18.
#include "media/yuv420.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace vortex {
namespace {

constexpr double kKr = 0.2126, kKb = 0.0722, kKg = 1.0 - kKr - kKb;
constexpr int32_t fix16(double x) { return static_cast<int32_t>(x * 65536.0 + (x < 0 ? -0.5 : 0.5)); }
constexpr int32_t kYr = fix16(kKr * 219.0 / 255.0), kYg = fix16(kKg * 219.0 / 255.0), kYb = fix16(kKb * 219.0 / 255.0);
constexpr int32_t kUr = fix16(-kKr / (2.0 * (1.0 - kKb)) * 224.0 / 255.0), kUb = fix16(0.5 * 224.0 / 255.0),
                  kUg = -kUr - kUb;
constexpr int32_t kVr = fix16(0.5 * 224.0 / 255.0), kVb = fix16(-kKb / (2.0 * (1.0 - kKr)) * 224.0 / 255.0),
                  kVg = -kVr - kVb;
static_assert(kUr + kUg + kUb == 0 && kVr + kVg + kVb == 0, "grey maps to chroma 128");

inline uint8_t luma(int32_t r, int32_t g, int32_t b) {
  return static_cast<uint8_t>((kYr * r + kYg * g + kYb * b + (16 << 16) + (1 << 15)) >> 16);
}

}  // namespace

void rgb_planar_rows_to_i420(const uint8_t* const r0[3], const uint8_t* const r1[3], int64_t width, uint8_t* y0,
                             uint8_t* y1, uint8_t* u, uint8_t* v) {
  for (int64_t x = 0; x < width; ++x) {
    y0[x] = luma(r0[0][x], r0[1][x], r0[2][x]);
    y1[x] = luma(r1[0][x], r1[1][x], r1[2][x]);
  }
  for (int64_t x = 0; x < width / 2; ++x) {
    const int64_t a = 2 * x, b = 2 * x + 1;
    const int32_t rs = r0[0][a] + r0[0][b] + r1[0][a] + r1[0][b];  // 2x2 sums in [0, 1020]
    const int32_t gs = r0[1][a] + r0[1][b] + r1[1][a] + r1[1][b];
    const int32_t bs = r0[2][a] + r0[2][b] + r1[2][a] + r1[2][b];
    u[x] = static_cast<uint8_t>((kUr * rs + kUg * gs + kUb * bs + (128 << 18) + (1 << 17)) >> 18);
    v[x] = static_cast<uint8_t>((kVr * rs + kVg * gs + kVb * bs + (128 << 18) + (1 << 17)) >> 18);
  }
}

Result<Tensor> rgb8_to_i420(const Tensor& frames, int threads) {
  if (!frames.defined() || frames.ndim() != 4 || frames.dim(3) != 3 || frames.dtype() != DType::kU8 ||
      !frames.is_contiguous() || frames.dim(1) % 2 || frames.dim(2) % 2 || frames.dim(1) < 2 || frames.dim(2) < 2)
    return invalid_argument("rgb8_to_i420: expected a contiguous [F, H, W, 3] u8 tensor of even H and W, got " +
                            (frames.defined() ? frames.describe() : std::string("nothing")));
  const int64_t f = frames.dim(0), h = frames.dim(1), w = frames.dim(2), fb = i420_frame_bytes(w, h);
  Tensor out = Tensor::empty({f, fb}, DType::kU8);
  const uint8_t* src = frames.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  parallel_for_ranges(static_cast<size_t>(f * (h / 2)), std::max(1, threads), 1, [&](size_t p0, size_t p1) {
    std::vector<uint8_t> planar(static_cast<size_t>(6 * w));  // [2 rows][3 channels][W]
    for (size_t p = p0; p < p1; ++p) {
      const int64_t fi = static_cast<int64_t>(p) / (h / 2), yy = 2 * (static_cast<int64_t>(p) % (h / 2));
      const uint8_t* rows[2] = {src + (fi * h + yy) * w * 3, src + (fi * h + yy + 1) * w * 3};
      for (int r = 0; r < 2; ++r)
        for (int64_t x = 0; x < w; ++x)
          for (int c = 0; c < 3; ++c) planar[static_cast<size_t>((r * 3 + c) * w + x)] = rows[r][x * 3 + c];
      const uint8_t* r0[3] = {&planar[0], &planar[static_cast<size_t>(w)], &planar[static_cast<size_t>(2 * w)]};
      const uint8_t* r1[3] = {&planar[static_cast<size_t>(3 * w)], &planar[static_cast<size_t>(4 * w)],
                              &planar[static_cast<size_t>(5 * w)]};
      uint8_t* base = dst + fi * fb;
      uint8_t* y = base + yy * w;
      uint8_t* u = base + h * w + (yy / 2) * (w / 2);
      uint8_t* v = base + h * w + (h / 2) * (w / 2) + (yy / 2) * (w / 2);
      rgb_planar_rows_to_i420(r0, r1, w, y, y + w, u, v);
    }
  });
  return out;
}

}  // namespace vortex
