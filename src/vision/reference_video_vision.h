// The vision side of a ref2va video reference: the frames the conditioner reads (sample_reference_video_frames in
// src/vision/ref2va_presentation.h) through transformers' Qwen3VLVideoProcessor (its smart_resize with the per-video
// pixel budget, (x - 127.5) / 127.5, two different frames per temporal patch, the last frame repeated to a whole
// pair, 16-pixel patches in 2x2-merge-block order) and the vision tower one pair at a time (Qwen3-VL attends within a
// temporal patch, so a pair is an image of grid_t 1). Tested in tests/vision/ref2va_vision_test.cpp against
// diffusers 0.42.1 and transformers 5.x (tests/vision/make_ref2va_vision_fixtures.py).
#pragma once

#include <utility>
#include <vector>

#include "media/lanczos_resize.h"
#include "vision/vision_tower.h"
#include "vortex/status.h"

namespace vortex {

// The video processor's smart_resize for `frames` sampled frames of height x width: (height, width) it resizes to.
// cfg holds video_preprocessor_config.json's values (size.shortest_edge / longest_edge are the whole video's pixel
// range, frames included). Fewer frames than cfg.temporal_patch are refused, as the processor refuses them.
Result<std::pair<int, int>> video_smart_resize(int frames, int height, int width, const VisionProcessorConfig& cfg);

// The sampled frames of one video (in order, all of one size) -> one VisionInput per temporal pair (grid_t 1, frame
// 2i then 2i + 1 over the temporal patch; an odd count repeats the last frame). Together the pairs' pixel_values
// are the processor's pixel_values_videos, pair after pair. Frames the processor would resize are refused
// (kUnsupported): its bicubic resampling is not reproduced.
Result<std::vector<VisionInput>> preprocess_video_pairs(const std::vector<RgbImage>& frames,
                                                        const VisionProcessorConfig& cfg);

// A video's vision features: each pair through the tower, the outputs' rows concatenated pair after pair
// (last_hidden [pairs * N, hidden], merged and each DeepStack feature [pairs * N / merge^2, out_hidden], f32 host),
// as the tower's get_video_features returns them for a video_grid_thw of [pairs, grid_h, grid_w].
Result<VisionTower::Output> encode_video_pairs(const VisionTower& tower, const std::vector<VisionInput>& pairs);

}  // namespace vortex
