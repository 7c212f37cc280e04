// The conditioner's input for a ref2va request (diffusers' MiniMaxH3Ref2VATextEncoderStep): per reference, in
// packed order and numbered per modality, "<Audio j>: " for a soundtrack (before its video's label) or an audio
// clip, "<Picture i>: " plus a vision block of <|image_pad|> for an image, "<Video k>: " plus one "<T seconds>"
// label and vision block of <|video_pad|> per merged frame pair for a video; then the prompt verbatim. A video is
// read at 2 fps from its 24 fps frames and merged in pairs (the last frame repeated); a pair's timestamp is the mean
// of its frames', printed with one decimal, ties to even. M-RoPE positions follow get_rope_index, a video block being
// an image run of one frame. Tested in tests/vision/ref2va_presentation_test.cpp
// (make_ref2va_presentation_fixtures.py).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/reference_kind.h"
#include "text/tokenizer.h"
#include "vortex/config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// _sample_video_condition_frames: the 24 fps frames the conditioner reads (every fps / sample_fps-th, the cursor
// summed in FP64 and rounded half to even, deduplicated) and one timestamp per merged group of temporal_patch.
// A video with fewer sampled frames than temporal_patch is refused.
struct SampledVideoFrames {
  std::vector<int64_t> indices;
  std::vector<double> block_timestamps;
};
Result<SampledVideoFrames> sample_reference_video_frames(int64_t frames, double fps = 24.0, double sample_fps = 2.0,
                                                         int temporal_patch = 2);

// "<0.2 seconds>": Python's f"<{t:.1f} seconds>" (the binary value rounded to one decimal, ties to even).
std::string video_block_label(double timestamp);

struct Ref2vaPresentationReference {
  ReferenceKind kind = ReferenceKind::kImage;
  bool has_audio = false;                // a video's soundtrack (an audio clip always has it)
  std::pair<int, int> grid = {0, 0};     // image: its patch grid; video: the patch grid of each block
  std::vector<double> block_timestamps;  // video: one per vision block
};

struct Ref2vaPresentation {
  std::vector<int32_t> ids;
  std::vector<Modality> tags;           // kText, or kVideo for a vision block's rows
  Tensor positions;                     // [3, L] i32 (t, h, w)
  std::vector<int64_t> image_pad_rows;  // the image references' vision tokens, in order
  std::vector<int64_t> video_pad_rows;  // the video references' vision tokens, block after block
};

Result<Ref2vaPresentation> build_ref2va_presentation(const Tokenizer& tokenizer,
                                                     const std::vector<Ref2vaPresentationReference>& references,
                                                     int merge, std::string_view prompt);

}  // namespace vortex
