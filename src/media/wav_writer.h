// WAV output: IEEE 32-bit float PCM (format tag 3, with the `fact` chunk non-PCM WAV requires), interleaved
// channels, written atomically. The decoder's [-1, 1] samples are stored as they are (no dither, no
// quantization). Tested in tests/media/media_test.cpp (header fields and samples read back).
#pragma once

#include <string>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// audio: [channels, samples] f32 host (planar); sample_rate in Hz.
Status write_wav_f32(const std::string& path, const Tensor& audio, int sample_rate);

}  // namespace vortex
