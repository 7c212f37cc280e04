// fl2va presentation and its M-RoPE positions (see keyframe_presentation.h).
#include "vision/keyframe_presentation.h"

#include <algorithm>
#include <string>

namespace vortex {

Result<Tensor> mrope_positions_with_vision(const std::vector<int32_t>& ids, const std::vector<int32_t>& pad_ids,
                                           const std::vector<std::pair<int, int>>& grids, int merge) {
  if (merge <= 0) return invalid_argument("mrope_positions_with_vision: merge must be positive");
  const int64_t n = static_cast<int64_t>(ids.size());
  Tensor positions = Tensor::empty({3, n}, DType::kI32);
  int32_t* pos = positions.data<int32_t>();
  auto is_pad = [&](int32_t id) { return std::find(pad_ids.begin(), pad_ids.end(), id) != pad_ids.end(); };
  int64_t cur = 0;
  size_t image = 0;
  // Runs of text (every id but a pad) and runs of one pad id, one vision grid per pad run.
  for (int64_t i = 0; i < n;) {
    const int32_t id = ids[static_cast<size_t>(i)];
    const bool pad = is_pad(id);
    int64_t j = i;
    while (j < n && (pad ? ids[static_cast<size_t>(j)] == id : !is_pad(ids[static_cast<size_t>(j)]))) ++j;
    if (!pad) {
      for (int64_t k = i; k < j; ++k) pos[k] = pos[n + k] = pos[2 * n + k] = static_cast<int32_t>(cur + (k - i));
      cur += j - i;
    } else {
      if (image >= grids.size()) return invalid_argument("more vision-pad runs than vision grids");
      const int rows = grids[image].first / merge, cols = grids[image].second / merge;
      if (j - i != static_cast<int64_t>(rows) * cols)
        return invalid_argument("vision-pad run " + std::to_string(image + 1) + " has " + std::to_string(j - i) +
                                " tokens where its grid has " + std::to_string(rows * cols));
      for (int64_t k = i; k < j; ++k) {
        const int64_t q = k - i;
        pos[k] = static_cast<int32_t>(cur);
        pos[n + k] = static_cast<int32_t>(cur + q / cols);
        pos[2 * n + k] = static_cast<int32_t>(cur + q % cols);
      }
      cur += std::max(rows, cols);
      ++image;
    }
    i = j;
  }
  if (image != grids.size()) return invalid_argument("fewer vision-pad runs than vision grids");
  return positions;
}

Result<Tensor> mrope_positions_with_images(const std::vector<int32_t>& ids, int32_t image_pad_id,
                                           const std::vector<std::pair<int, int>>& grids, int merge) {
  return mrope_positions_with_vision(ids, {image_pad_id}, grids, merge);
}

Result<KeyframePresentation> build_keyframe_presentation(const Tokenizer& tokenizer,
                                                         const std::vector<std::pair<int, int>>& grids, int merge,
                                                         std::string_view prompt) {
  const auto start = tokenizer.token_id("<|vision_start|>"), pad = tokenizer.token_id("<|image_pad|>"),
             end = tokenizer.token_id("<|vision_end|>");
  if (!start || !pad || !end)
    return invalid_argument("the tokenizer has no <|vision_start|> / <|image_pad|> / <|vision_end|> tokens");
  if (merge <= 0) return invalid_argument("build_keyframe_presentation: merge must be positive");
  KeyframePresentation p;
  for (size_t i = 0; i < grids.size(); ++i) {
    const auto [gh, gw] = grids[i];
    if (gh <= 0 || gw <= 0 || gh % merge || gw % merge)
      return invalid_argument("keyframe " + std::to_string(i + 1) + ": grid " + std::to_string(gh) + "x" +
                              std::to_string(gw) + " is not a positive multiple of the merge size");
    VORTEX_ASSIGN_OR_RETURN(std::vector<int32_t> label, tokenizer.encode("<Picture " + std::to_string(i + 1) + ">: "));
    p.ids.insert(p.ids.end(), label.begin(), label.end());
    p.tags.insert(p.tags.end(), label.size(), Modality::kText);
    const int64_t tokens = static_cast<int64_t>(gh / merge) * (gw / merge);
    p.ids.push_back(*start);
    for (int64_t k = 0; k < tokens; ++k) {
      p.image_pad_rows.push_back(static_cast<int64_t>(p.ids.size()));
      p.ids.push_back(*pad);
    }
    p.ids.push_back(*end);
    p.tags.insert(p.tags.end(), static_cast<size_t>(tokens + 2), Modality::kVideo);
  }
  VORTEX_ASSIGN_OR_RETURN(std::vector<int32_t> text, tokenizer.encode(prompt));
  for (int32_t id : text)
    if (id == *start || id == *pad || id == *end)
      return invalid_argument("the prompt contains a vision token (<|vision_start|>, <|image_pad|> or <|vision_end|>)");
  p.ids.insert(p.ids.end(), text.begin(), text.end());
  p.tags.insert(p.tags.end(), text.size(), Modality::kText);

  VORTEX_ASSIGN_OR_RETURN(p.positions, mrope_positions_with_images(p.ids, *pad, grids, merge));
  return p;
}

}  // namespace vortex
