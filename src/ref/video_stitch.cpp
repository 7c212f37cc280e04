// CPU program of the video VAE's clip stitch (src/ref/video_stitch.h): rows of output frames in parallel, every pixel
// computed once from the bf16 tile rows (tile, the original tile above, the original tile to the left, then the
// previous clip's cross-fade frame), the FP32 roundings of diffusers' _blend kept by volatile stores.
#include "ref/video_stitch.h"

#include <cstring>
#include <string>

#include "vortex/dtype.h"

namespace vortex::ref {
namespace {

// A contiguous f32 [C, frames, H, W] tensor on `device`.
Status check_frames(const Tensor& t, const char* what, int64_t c, int64_t frames, int64_t h, int64_t w, Device device) {
  const bool ok = t.defined() && t.device() == device && t.dtype() == DType::kF32 && t.is_contiguous() &&
                  t.ndim() == 4 && t.dim(0) == c && t.dim(1) == frames && t.dim(2) == h && t.dim(3) == w;
  if (ok) return Status::Ok();
  return invalid_argument(std::string("video_stitch_clip ") + what + " must be a contiguous " + device_name(device) +
                          " [" + std::to_string(c) + ", " + std::to_string(frames) + ", " + std::to_string(h) + ", " +
                          std::to_string(w) + "] f32 tensor, got " +
                          (t.defined() ? t.describe() : std::string("undefined")));
}

}  // namespace

Status check_video_stitch(const Tensor& y, const VideoStitchClip& g, const Tensor& prev, const Tensor& out,
                          const Tensor& next, Device device) {
  auto bad = [](const std::string& m) { return invalid_argument("video_stitch_clip: " + m); };
  if (g.channels <= 0 || g.patch <= 0 || g.patch_t <= 0 || g.tile_t <= 0 || g.tile_h <= 0 || g.tile_w <= 0)
    return bad("channels, patch sizes and the tile's token grid must be positive");
  if (g.ny <= 0 || g.nx <= 0 || g.ny > VideoStitchClip::kMaxTiles || g.nx > VideoStitchClip::kMaxTiles)
    return bad("tile rows / columns must be in [1, " + std::to_string(VideoStitchClip::kMaxTiles) + "]");
  const int th = g.tile_h * g.patch, tw = g.tile_w * g.patch, tf = g.tile_t * g.patch_t;
  if (g.rows_per_tile < static_cast<int64_t>(g.tile_t) * g.tile_h * g.tile_w)
    return bad("rows_per_tile " + std::to_string(g.rows_per_tile) + " is below the tile's voxel count");
  if (g.y_off[0] != 0 || g.x_off[0] != 0) return bad("kept extents must start at 0");
  for (int i = 0; i < g.ny; ++i) {
    const int kept = g.y_off[i + 1] - g.y_off[i];
    if (kept <= 0 || kept > th || g.blend_y[i] < 0 || g.blend_y[i] > th || (i == 0 && g.blend_y[i] != 0))
      return bad("tile row " + std::to_string(i) + ": kept rows " + std::to_string(kept) + " / blend " +
                 std::to_string(g.blend_y[i]) + " outside the " + std::to_string(th) + "-pixel tile");
  }
  for (int j = 0; j < g.nx; ++j) {
    const int kept = g.x_off[j + 1] - g.x_off[j];
    if (kept <= 0 || kept > tw || g.blend_x[j] < 0 || g.blend_x[j] > tw || (j == 0 && g.blend_x[j] != 0))
      return bad("tile column " + std::to_string(j) + ": kept columns " + std::to_string(kept) + " / blend " +
                 std::to_string(g.blend_x[j]) + " outside the " + std::to_string(tw) + "-pixel tile");
  }
  if (g.f00 < 0 || g.fe0 < g.f00 || g.fe0 > tf || g.f01 < 0 || g.fe1 < g.f01 || g.fe1 > tf ||
      (g.fe1 > g.f01 && g.f01 < g.fe0 && g.fe1 > g.f00))
    return bad("frame ranges [" + std::to_string(g.f00) + ", " + std::to_string(g.fe0) + ") and [" +
               std::to_string(g.f01) + ", " + std::to_string(g.fe1) + ") must be disjoint within the tile's " +
               std::to_string(tf) + " frames");
  if (g.cross_fade < 0 || g.cross_fade > g.fe0 - g.f00)
    return bad("cross_fade " + std::to_string(g.cross_fade) + " exceeds the clip's output frames");
  const int64_t pv = static_cast<int64_t>(g.channels) * g.patch_t * g.patch * g.patch;
  const int64_t rows = static_cast<int64_t>(g.ny) * g.nx * g.rows_per_tile;
  if (!y.defined() || y.device() != device || y.dtype() != DType::kBF16 || !y.is_contiguous() || y.ndim() != 2 ||
      y.dim(0) != rows || y.dim(1) != pv)
    return bad("y must be a contiguous " + std::string(device_name(device)) + " [" + std::to_string(rows) + ", " +
               std::to_string(pv) + "] bf16 tensor, got " + (y.defined() ? y.describe() : std::string("undefined")));
  const int64_t h = g.y_off[g.ny], w = g.x_off[g.nx];
  VORTEX_RETURN_IF_ERROR(check_frames(out, "out", g.channels, g.fe0 - g.f00, h, w, device));
  if (g.fe1 > g.f01) VORTEX_RETURN_IF_ERROR(check_frames(next, "next", g.channels, g.fe1 - g.f01, h, w, device));
  if (g.cross_fade > 0) {
    VORTEX_RETURN_IF_ERROR(check_frames(prev, "prev", g.channels, prev.defined() ? prev.dim(1) : -1, h, w, device));
    if (prev.dim(1) < g.cross_fade)
      return bad("prev holds " + std::to_string(prev.dim(1)) + " frames, cross_fade needs " +
                 std::to_string(g.cross_fade));
  }
  return Status::Ok();
}

float video_blend(float a, float b, int i, int e) {
  const float p = static_cast<float>(i) / static_cast<float>(e);
  const float wa = 1.0f - p, wb = p;
  volatile float ta = a * wa;
  volatile float tb = b * wb;
  return ta + tb;
}

Status video_stitch_clip(const Tensor& y, const VideoStitchClip& g, const Tensor& prev, Tensor& out, Tensor& next,
                         const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_video_stitch(y, g, prev, out, next, Device::kCpu));
  const int p = g.patch, pt = g.patch_t, th = g.tile_h * p, tw = g.tile_w * p;
  const int64_t pv = static_cast<int64_t>(g.channels) * pt * p * p;
  const int n0 = g.fe0 - g.f00, n1 = g.fe1 - g.f01, frames = n0 + n1;
  const int64_t h = g.y_off[g.ny], w = g.x_off[g.nx];
  const uint16_t* yb = y.data<uint16_t>();
  // Pixel (ch, fi, py, px) of tile (i, j), as unpatchify lays the token rows out.
  auto tile_value = [&](int i, int j, int ch, int fi, int py, int px) {
    const int64_t token = (static_cast<int64_t>(fi / pt) * g.tile_h + py / p) * g.tile_w + px / p;
    const int64_t col = ((static_cast<int64_t>(ch) * pt + fi % pt) * p + py % p) * p + px % p;
    return f32_from_bf16_bits(yb[((static_cast<int64_t>(i) * g.nx + j) * g.rows_per_tile + token) * pv + col]);
  };
  run(static_cast<int64_t>(g.channels) * frames * h, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int ch = static_cast<int>(r / (static_cast<int64_t>(frames) * h));
      const int q = static_cast<int>((r / h) % frames);
      const int yy = static_cast<int>(r % h);
      const bool chunk0 = q < n0;
      const int fi = chunk0 ? g.f00 + q : g.f01 + (q - n0);
      int i = 0;
      while (yy >= g.y_off[i + 1]) ++i;
      const int ly = yy - g.y_off[i], ey = g.blend_y[i];
      float* dst = chunk0 ? out.data<float>() + ((static_cast<int64_t>(ch) * n0 + q) * h + yy) * w
                          : next.data<float>() + ((static_cast<int64_t>(ch) * n1 + (q - n0)) * h + yy) * w;
      const float* fade = nullptr;
      if (chunk0 && q < g.cross_fade)
        fade = prev.data<float>() +
               ((static_cast<int64_t>(ch) * prev.dim(1) + (prev.dim(1) - g.cross_fade + q)) * h + yy) * w;
      for (int j = 0; j < g.nx; ++j) {
        const int ex = g.blend_x[j];
        for (int xx = g.x_off[j]; xx < g.x_off[j + 1]; ++xx) {
          const int lx = xx - g.x_off[j];
          float v = tile_value(i, j, ch, fi, ly, lx);
          if (ly < ey) v = video_blend(tile_value(i - 1, j, ch, fi, th - ey + ly, lx), v, ly, ey);
          if (lx < ex) v = video_blend(tile_value(i, j - 1, ch, fi, ly, tw - ex + lx), v, lx, ex);
          if (fade) v = video_blend(fade[xx], v, q, g.cross_fade);
          dst[xx] = v;
        }
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
