// The video decoder's output frames to what the MP4 encoder and the PNGs take, on host threads: ImageNet
// de-normalization, clamp and 8-bit rounding with the bytes of video_to_rgb8 (src/vae/video_vae.h), written
// straight into interleaved RGB8, and the I420 planes of those bytes (src/media/yuv420.h) in the same pass.
// decode_to_mp4 (src/engine/stream_mux.h) runs it on each clip's frames while later clips decode. Tested in
// tests/media/decode_frames_test.cpp.
#pragma once

#include <cstdint>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// decoded [3, F, H, W] f32 host (VideoVae::decode's output), frames [begin, end), n = end - begin:
//   rgb  [n, H, W, 3] u8, contiguous (may be a narrow of a larger frame tensor) <- video_to_rgb8's bytes;
//   i420 [n, H * W * 3 / 2] u8, contiguous, or an undefined tensor (RGB only) <- rgb8_to_i420 of those bytes.
// H and W must be even when i420 is wanted. Work is split over `threads` threads by row pairs.
Status video_frames_to_rgb8_i420(const Tensor& decoded, int64_t begin, int64_t end, Tensor& rgb, Tensor& i420,
                                 int threads);

}  // namespace vortex
