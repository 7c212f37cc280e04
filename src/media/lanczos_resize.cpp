// Pillow's 8-bit LANCZOS resize (see lanczos_resize.h). Coefficient tables are computed in double exactly
// as Pillow's precompute_coeffs does (float box edges, truncating casts for the window bounds), then
// rounded half away from zero to 22 fractional bits; each pass accumulates in int32 from a half-unit
// bias and clamps the shifted sum to [0, 255].
#include "media/lanczos_resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace vortex {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr double kSupport = 3.0;

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}

double lanczos(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0; }

struct Coeffs {
  int ksize = 0;
  std::vector<int> bounds;  // [out, 2]: first source index, tap count
  std::vector<int32_t> k;   // [out, ksize] fixed point
};

Coeffs precompute(int in_size, int out_size) {
  const float in0 = 0.0f, in1 = static_cast<float>(in_size);
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kSupport * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<size_t>(out_size) * 2);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(static_cast<size_t>(c.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[static_cast<size_t>(x)] = lanczos((x + xmin - center + 0.5) * ss);
      ww += w[static_cast<size_t>(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      double v = w[static_cast<size_t>(x)];
      if (ww != 0.0) v /= ww;
      c.k[static_cast<size_t>(xx) * c.ksize + x] = v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPrecisionBits))
                                                         : static_cast<int32_t>(0.5 + v * (1 << kPrecisionBits));
    }
    c.bounds[static_cast<size_t>(xx) * 2] = xmin;
    c.bounds[static_cast<size_t>(xx) * 2 + 1] = xmax;
  }
  return c;
}

inline uint8_t clip8(int32_t v) {
  const int32_t s = v >> kPrecisionBits;  // arithmetic shift, as Pillow's lookup index
  return static_cast<uint8_t>(s < 0 ? 0 : (s > 255 ? 255 : s));
}

// Horizontal pass: rows [row0, row0 + rows) of src onto out (rows x out_w).
RgbImage horizontal(const RgbImage& src, int row0, int rows, int out_w) {
  const Coeffs c = precompute(src.width, out_w);
  RgbImage out{out_w, rows, std::vector<uint8_t>(static_cast<size_t>(out_w) * rows * 3)};
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in = src.rgb.data() + static_cast<size_t>(y + row0) * src.width * 3;
    uint8_t* o = out.rgb.data() + static_cast<size_t>(y) * out_w * 3;
    for (int xx = 0; xx < out_w; ++xx) {
      const int xmin = c.bounds[static_cast<size_t>(xx) * 2], xmax = c.bounds[static_cast<size_t>(xx) * 2 + 1];
      const int32_t* k = c.k.data() + static_cast<size_t>(xx) * c.ksize;
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < xmax; ++x) {
        const uint8_t* p = in + static_cast<size_t>(x + xmin) * 3;
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      o[xx * 3 + 0] = clip8(s0);
      o[xx * 3 + 1] = clip8(s1);
      o[xx * 3 + 2] = clip8(s2);
    }
  }
  return out;
}

// Vertical pass with precomputed coefficients whose bounds are relative to src's first row.
RgbImage vertical(const RgbImage& src, const Coeffs& c, int out_h) {
  RgbImage out{src.width, out_h, std::vector<uint8_t>(static_cast<size_t>(src.width) * out_h * 3)};
  const size_t row = static_cast<size_t>(src.width) * 3;
  for (int yy = 0; yy < out_h; ++yy) {
    const int ymin = c.bounds[static_cast<size_t>(yy) * 2], ymax = c.bounds[static_cast<size_t>(yy) * 2 + 1];
    const int32_t* k = c.k.data() + static_cast<size_t>(yy) * c.ksize;
    uint8_t* o = out.rgb.data() + static_cast<size_t>(yy) * row;
    for (size_t i = 0; i < row; ++i) {
      int32_t s = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < ymax; ++y) s += src.rgb[static_cast<size_t>(y + ymin) * row + i] * k[y];
      o[i] = clip8(s);
    }
  }
  return out;
}

}  // namespace

RgbImage lanczos_resize(const RgbImage& src, int width, int height) {
  if (width == src.width && height == src.height) return src;
  const bool need_h = width != src.width, need_v = height != src.height;
  Coeffs cv = precompute(src.height, height);
  // Source rows the vertical pass reads: the horizontal pass only produces those.
  const int first = cv.bounds[0];
  const int last = cv.bounds[static_cast<size_t>(height) * 2 - 2] + cv.bounds[static_cast<size_t>(height) * 2 - 1];
  if (!need_h) return vertical(src, cv, height);
  for (int i = 0; i < height; ++i) cv.bounds[static_cast<size_t>(i) * 2] -= first;
  RgbImage tmp = horizontal(src, first, last - first, width);
  if (!need_v) return tmp;
  return vertical(tmp, cv, height);
}

RgbImage crop(const RgbImage& src, int left, int top, int width, int height) {
  RgbImage out{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y)
    std::memcpy(out.rgb.data() + static_cast<size_t>(y) * width * 3,
                src.rgb.data() + (static_cast<size_t>(y + top) * src.width + left) * 3, static_cast<size_t>(width) * 3);
  return out;
}

}  // namespace vortex
