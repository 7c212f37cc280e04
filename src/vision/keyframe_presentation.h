// The conditioner's input for an fl2va request (diffusers' MiniMaxH3FL2VATextEncoderStep): per keyframe a
// "<Picture i>: " label and a vision block (<|vision_start|>, one <|image_pad|> per merged vision token,
// <|vision_end|>), then the prompt verbatim, no special tokens added; the rows of a vision block tagged video.
// The M-RoPE positions are transformers' Qwen3VLModel.get_rope_index: text runs count on along all three axes,
// an image run takes (start, start + row, start + col) over its merged grid and advances by max(rows, cols).
// Tested in tests/vision/presentation_test.cpp against diffusers + transformers (make_presentation_fixtures.py).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"
#include "vortex/config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct KeyframePresentation {
  std::vector<int32_t> ids;
  std::vector<Modality> tags;           // kText, or kVideo for a vision block's rows
  Tensor positions;                     // [3, L] i32 (t, h, w)
  std::vector<int64_t> image_pad_rows;  // where the vision tokens go, in order (all keyframes)
};

// get_rope_index for one sequence: each run of one of pad_ids (<|image_pad|>, <|video_pad|>) is a vision block
// of one frame (grids in sequence order), everything else text. Returns [3, L] i32 (t, h, w).
Result<Tensor> mrope_positions_with_vision(const std::vector<int32_t>& ids, const std::vector<int32_t>& pad_ids,
                                           const std::vector<std::pair<int, int>>& grids, int merge);
// mrope_positions_with_vision over image pads only (fl2va).
Result<Tensor> mrope_positions_with_images(const std::vector<int32_t>& ids, int32_t image_pad_id,
                                           const std::vector<std::pair<int, int>>& grids, int merge);

// grids: each keyframe's patch grid (grid_h, grid_w) from the image processor; merge: its merge size.
Result<KeyframePresentation> build_keyframe_presentation(const Tokenizer& tokenizer,
                                                         const std::vector<std::pair<int, int>>& grids, int merge,
                                                         std::string_view prompt);

}  // namespace vortex
