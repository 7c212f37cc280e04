// RGB8 -> I420 (yuv420p planes Y, U, V) as Vortex's MP4s store it: BT.709 limited range from full-range RGB, an
// integer program (16-bit fixed-point coefficients, round half up), chroma from the 2x2 box of each pixel quad
// (center-sited). One row-pair function serves the one-shot converter here and the threaded decode converter
// (src/engine/decode_frames.h), so both give the same bytes. Tested in tests/media/decode_frames_test.cpp against an
// independent per-pixel reference.
#pragma once

#include <cstdint>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// Bytes of one I420 frame of an even W x H: W * H luma + 2 * (W / 2) * (H / 2) chroma.
inline int64_t i420_frame_bytes(int64_t width, int64_t height) { return width * height + width * height / 2; }

// One row pair: planar u8 rows r0[c], r1[c] (c = R, G, B; `width` even) -> two luma rows y0, y1 and one chroma row
// each of u, v (width / 2 samples).
void rgb_planar_rows_to_i420(const uint8_t* const r0[3], const uint8_t* const r1[3], int64_t width, uint8_t* y0,
                             uint8_t* y1, uint8_t* u, uint8_t* v);

// frames [F, H, W, 3] u8 RGB (H, W even) -> [F, H * W * 3 / 2] u8: each frame's Y plane, then U, then V.
Result<Tensor> rgb8_to_i420(const Tensor& frames, int threads = 1);

}  // namespace vortex
