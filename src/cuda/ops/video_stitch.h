// CUDA kernel of the video VAE's clip stitch (Backend::video_stitch_clip, src/backend/vae_ops.h): one thread per
// output pixel of a clip's output and cross-fade frames, the program of src/ref/video_stitch.h with explicit
// __f*_rn steps, so the frames are E0 against the CPU program. Tested in tests/cuda/video_stitch_op_test.cpp (label
// gpu).
#pragma once

#include <cuda_runtime.h>

#include "backend/vae_ops.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::cuda_ops {

// Operands as ref::check_video_stitch states them, on the device; queued on `stream`.
Status video_stitch_clip(const Tensor& y, const VideoStitchClip& geometry, const Tensor& prev, Tensor& out,
                         Tensor& next, cudaStream_t stream);

}  // namespace vortex::cuda_ops
