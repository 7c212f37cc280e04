// video_stitch_clip: a clip's tile forwards y [ny * nx * S, C * pt * p * p] bf16 -> its output frames and the next
// clip's cross-fade frames, f32. One block per output row (channel, frame, row), threads over the columns; each pixel
// reads its tile's value, the original tile above and to the left where it blends, and the previous clip's
// cross-fade frame, with the FP32 roundings of src/ref/video_stitch.cpp (__fdiv_rn, __fsub_rn, __fmul_rn, __fadd_rn:
// no contraction). E0 against the CPU program.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/ops/video_stitch.h"
#include "ref/video_stitch.h"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float blend(float a, float b, int i, int e) {
  const float p = __fdiv_rn(static_cast<float>(i), static_cast<float>(e));
  return __fadd_rn(__fmul_rn(a, __fsub_rn(1.0f, p)), __fmul_rn(b, p));
}

__device__ __forceinline__ float tile_value(const uint16_t* __restrict__ y, const VideoStitchClip& g, int64_t pv, int i,
                                            int j, int ch, int fi, int py, int px) {
  const int p = g.patch, pt = g.patch_t;
  const int64_t token = (static_cast<int64_t>(fi / pt) * g.tile_h + py / p) * g.tile_w + px / p;
  const int64_t col = ((static_cast<int64_t>(ch) * pt + fi % pt) * p + py % p) * p + px % p;
  const uint32_t bits = y[((static_cast<int64_t>(i) * g.nx + j) * g.rows_per_tile + token) * pv + col];
  return __uint_as_float(bits << 16);
}

__global__ void __launch_bounds__(kThreads)
    video_stitch_kernel(const uint16_t* __restrict__ y, const VideoStitchClip g, const float* __restrict__ prev,
                        int prev_frames, float* __restrict__ out, float* __restrict__ next, int64_t rows) {
  const int p = g.patch, th = g.tile_h * p, tw = g.tile_w * p;
  const int64_t pv = static_cast<int64_t>(g.channels) * g.patch_t * p * p;
  const int n0 = g.fe0 - g.f00, n1 = g.fe1 - g.f01, frames = n0 + n1;
  const int h = g.y_off[g.ny], w = g.x_off[g.nx];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int ch = static_cast<int>(r / (static_cast<int64_t>(frames) * h));
    const int q = static_cast<int>((r / h) % frames);
    const int yy = static_cast<int>(r % h);
    const bool chunk0 = q < n0;
    const int fi = chunk0 ? g.f00 + q : g.f01 + (q - n0);
    int i = 0;
    while (yy >= g.y_off[i + 1]) ++i;
    const int ly = yy - g.y_off[i], ey = g.blend_y[i];
    float* dst = chunk0 ? out + ((static_cast<int64_t>(ch) * n0 + q) * h + yy) * w
                        : next + ((static_cast<int64_t>(ch) * n1 + (q - n0)) * h + yy) * w;
    const float* fade = nullptr;
    if (chunk0 && q < g.cross_fade)
      fade = prev + ((static_cast<int64_t>(ch) * prev_frames + (prev_frames - g.cross_fade + q)) * h + yy) * w;
    for (int xx = threadIdx.x; xx < w; xx += kThreads) {
      int j = 0;
      while (xx >= g.x_off[j + 1]) ++j;
      const int lx = xx - g.x_off[j], ex = g.blend_x[j];
      float v = tile_value(y, g, pv, i, j, ch, fi, ly, lx);
      if (ly < ey) v = blend(tile_value(y, g, pv, i - 1, j, ch, fi, th - ey + ly, lx), v, ly, ey);
      if (lx < ex) v = blend(tile_value(y, g, pv, i, j - 1, ch, fi, ly, tw - ex + lx), v, lx, ex);
      if (fade) v = blend(fade[xx], v, q, g.cross_fade);
      dst[xx] = v;
    }
  }
}

}  // namespace

Status video_stitch_clip(const Tensor& y, const VideoStitchClip& g, const Tensor& prev, Tensor& out, Tensor& next,
                         cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(ref::check_video_stitch(y, g, prev, out, next, Device::kCuda));
  const int frames = (g.fe0 - g.f00) + (g.fe1 - g.f01);
  const int64_t rows = static_cast<int64_t>(g.channels) * frames * g.y_off[g.ny];
  if (rows == 0) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
  video_stitch_kernel<<<blocks, kThreads, 0, stream>>>(
      y.data<uint16_t>(), g, g.cross_fade > 0 ? prev.data<float>() : nullptr,
      g.cross_fade > 0 ? static_cast<int>(prev.dim(1)) : 0, out.data<float>(),
      g.fe1 > g.f01 ? next.data<float>() : nullptr, rows);
  VORTEX_CUDA_LAUNCH_CHECK("video_stitch_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
