// CPU program of the video VAE's clip stitch (Backend::video_stitch_clip, src/backend/vae_ops.h): one temporal clip's
// tile forwards -> its final frames and the next clip's cross-fade frames, diffusers' _stitch_tiles / _blend /
// _decode arithmetic per output pixel. check_video_stitch validates the operands for every backend. Tested in
// tests/vae/video_stitch_test.cpp (against a tile-at-a-time stitch) and tests/cuda/video_stitch_op_test.cpp (CUDA, E0).
#pragma once

#include "backend/vae_ops.h"
#include "ref/ref_ops.h"

namespace vortex::ref {

// The operands of video_stitch_clip on `device`: geometry in range, y [ny * nx * S, C * pt * p * p] bf16, out / next /
// prev contiguous f32 of the documented shapes (next / prev undefined when they hold no frames).
Status check_video_stitch(const Tensor& y, const VideoStitchClip& g, const Tensor& prev, const Tensor& out,
                          const Tensor& next, Device device);

// blend()'s value at one position: a * (1 - i/e) + b * (i/e), each product and the sum one FP32 rounding.
float video_blend(float a, float b, int i, int e);

Status video_stitch_clip(const Tensor& y, const VideoStitchClip& g, const Tensor& prev, Tensor& out, Tensor& next,
                         const RowRunner& run = run_serial);

}  // namespace vortex::ref
