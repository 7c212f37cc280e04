// ref2va presentation, video frame sampling and M-RoPE positions (see ref2va_presentation.h).
#include "vision/ref2va_presentation.h"

#include <cmath>
#include <cstdio>

#include "vision/keyframe_presentation.h"

namespace vortex {

Result<SampledVideoFrames> sample_reference_video_frames(int64_t frames, double fps, double sample_fps,
                                                         int temporal_patch) {
  if (frames < 1 || !(fps > 0.0) || !(sample_fps > 0.0) || temporal_patch < 1)
    return invalid_argument("sample_reference_video_frames: frames, rates and the temporal patch must be positive");
  SampledVideoFrames s;
  const double stride = fps / sample_fps;
  // Python's round(): half to even, as nearbyint rounds in the default mode.
  for (double cursor = 0.0; static_cast<int64_t>(std::nearbyint(cursor)) < frames; cursor += stride) {
    const auto index = static_cast<int64_t>(std::nearbyint(cursor));
    if (s.indices.empty() || index > s.indices.back()) s.indices.push_back(index);
  }
  if (static_cast<int>(s.indices.size()) < temporal_patch) {
    const int64_t minimum = static_cast<int64_t>(std::nearbyint((temporal_patch - 1) * stride)) + 1;
    return invalid_argument("a reference video is read at " + std::to_string(sample_fps) +
                            " fps and its frames are merged in groups of " + std::to_string(temporal_patch) +
                            ", so it must run at least " + std::to_string(minimum) + " frames, got " +
                            std::to_string(frames));
  }
  std::vector<double> t;
  for (size_t i = 0; i < s.indices.size(); ++i) t.push_back(static_cast<double>(i) / sample_fps);
  while (t.size() % static_cast<size_t>(temporal_patch) != 0) t.push_back(t.back());
  for (size_t i = 0; i < t.size(); i += static_cast<size_t>(temporal_patch))
    s.block_timestamps.push_back((t[i] + t[i + static_cast<size_t>(temporal_patch) - 1]) / 2);
  return s;
}

std::string video_block_label(double timestamp) {
  // printf's %.1f rounds the exact binary value (ties to even), as Python's format does.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "<%.1f seconds>", timestamp);
  return buf;
}

Result<Ref2vaPresentation> build_ref2va_presentation(const Tokenizer& tokenizer,
                                                     const std::vector<Ref2vaPresentationReference>& references,
                                                     int merge, std::string_view prompt) {
  const auto start = tokenizer.token_id("<|vision_start|>"), image_pad = tokenizer.token_id("<|image_pad|>"),
             video_pad = tokenizer.token_id("<|video_pad|>"), end = tokenizer.token_id("<|vision_end|>");
  if (!start || !image_pad || !video_pad || !end)
    return invalid_argument(
        "the tokenizer has no <|vision_start|> / <|image_pad|> / <|video_pad|> / <|vision_end|> tokens");
  if (merge <= 0) return invalid_argument("build_ref2va_presentation: merge must be positive");
  Ref2vaPresentation p;
  std::vector<std::pair<int, int>> grids;  // one per vision block, in sequence order
  auto text = [&](const std::string& s) -> Status {
    VORTEX_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(s));
    p.ids.insert(p.ids.end(), ids.begin(), ids.end());
    p.tags.insert(p.tags.end(), ids.size(), Modality::kText);
    return Status::Ok();
  };
  auto vision = [&](int32_t pad, std::pair<int, int> grid, std::vector<int64_t>& rows) {
    const int64_t tokens = static_cast<int64_t>(grid.first / merge) * (grid.second / merge);
    p.ids.push_back(*start);
    for (int64_t k = 0; k < tokens; ++k) {
      rows.push_back(static_cast<int64_t>(p.ids.size()));
      p.ids.push_back(pad);
    }
    p.ids.push_back(*end);
    p.tags.insert(p.tags.end(), static_cast<size_t>(tokens + 2), Modality::kVideo);
    grids.push_back(grid);
  };
  int images = 0, videos = 0, audios = 0;
  for (size_t i = 0; i < references.size(); ++i) {
    const Ref2vaPresentationReference& r = references[i];
    const std::string at = "reference " + std::to_string(i + 1) + " (" + reference_kind_name(r.kind) + ")";
    if (r.kind != ReferenceKind::kAudio) {
      const auto [gh, gw] = r.grid;
      if (gh <= 0 || gw <= 0 || gh % merge || gw % merge)
        return invalid_argument(at + ": grid " + std::to_string(gh) + "x" + std::to_string(gw) +
                                " is not a positive multiple of the merge size");
    }
    if (r.kind == ReferenceKind::kVideo && r.block_timestamps.empty())
      return invalid_argument(at + ": a video needs at least one vision block");
    if (r.has_audio || r.kind == ReferenceKind::kAudio)
      VORTEX_RETURN_IF_ERROR(text("<Audio " + std::to_string(++audios) + ">: "));
    if (r.kind == ReferenceKind::kImage) {
      VORTEX_RETURN_IF_ERROR(text("<Picture " + std::to_string(++images) + ">: "));
      vision(*image_pad, r.grid, p.image_pad_rows);
    } else if (r.kind == ReferenceKind::kVideo) {
      VORTEX_RETURN_IF_ERROR(text("<Video " + std::to_string(++videos) + ">: "));
      for (double t : r.block_timestamps) {
        VORTEX_RETURN_IF_ERROR(text(video_block_label(t)));
        vision(*video_pad, r.grid, p.video_pad_rows);
      }
    }
  }
  VORTEX_ASSIGN_OR_RETURN(std::vector<int32_t> prompt_ids, tokenizer.encode(prompt));
  for (int32_t id : prompt_ids)
    if (id == *start || id == *image_pad || id == *video_pad || id == *end)
      return invalid_argument(
          "the prompt contains a vision token (<|vision_start|>, <|image_pad|>, <|video_pad|> or <|vision_end|>)");
  p.ids.insert(p.ids.end(), prompt_ids.begin(), prompt_ids.end());
  p.tags.insert(p.tags.end(), prompt_ids.size(), Modality::kText);
  VORTEX_ASSIGN_OR_RETURN(p.positions, mrope_positions_with_vision(p.ids, {*image_pad, *video_pad}, grids, merge));
  return p;
}

}  // namespace vortex
