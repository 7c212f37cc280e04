// vision_pixel_rows on the CPU (see src/ref/vision_prep.h): each output row is one patch of the u8 image; every
// value is one FP32 subtraction and one FP32 division (volatile keeps them separate), rounded once to BF16 (RNE).
#include "ref/vision_prep.h"

#include <string>

#include "ref/ref_internal.h"

namespace vortex::ref {

Status check_vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& std255, int patch, int temporal_patch,
                               int merge, const Tensor& out) {
  if (patch <= 0 || temporal_patch <= 0 || merge <= 0)
    return invalid_argument("vision_pixel_rows: patch, temporal_patch and merge must be positive");
  for (float s : std255)
    if (!(s > 0.0f)) return invalid_argument("vision_pixel_rows: std255 must be positive");
  const int64_t side = static_cast<int64_t>(patch) * merge;
  if (!rgb.defined() || rgb.dtype() != DType::kU8 || rgb.ndim() != 3 || rgb.dim(2) != 3 || !rgb.is_contiguous() ||
      rgb.dim(0) <= 0 || rgb.dim(1) <= 0 || rgb.dim(0) % side || rgb.dim(1) % side)
    return invalid_argument(
        "vision_pixel_rows: rgb must be a contiguous [H, W, 3] u8 tensor with H and W multiples of " +
        std::to_string(side) + ", got " + (rgb.defined() ? rgb.describe() : std::string("nothing")));
  const int64_t rows = (rgb.dim(0) / patch) * (rgb.dim(1) / patch), cols = 3LL * temporal_patch * patch * patch;
  if (!out.defined() || out.dtype() != DType::kBF16 || out.ndim() != 2 || out.dim(0) != rows || out.dim(1) != cols ||
      !out.is_contiguous())
    return invalid_argument("vision_pixel_rows: out must be a contiguous [" + std::to_string(rows) + ", " +
                            std::to_string(cols) + "] bf16 tensor, got " +
                            (out.defined() ? out.describe() : std::string("nothing")));
  if (rgb.device() != out.device()) return invalid_argument("vision_pixel_rows: rgb and out on different devices");
  return Status::Ok();
}

Status vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255, const std::array<float, 3>& std255,
                         int patch, int temporal_patch, int merge, Tensor& out, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_vision_pixel_rows(rgb, std255, patch, temporal_patch, merge, out));
  const int64_t width = rgb.dim(1), grid_w = width / patch, blocks_w = grid_w / merge, cols = out.dim(1);
  const uint8_t* px = rgb.data<uint8_t>();
  run(out.dim(0), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      // Row (block_row, block_col, in_row, in_col) in merge-block order.
      const int64_t ic = row % merge, ir = (row / merge) % merge, bc = (row / (merge * merge)) % blocks_w,
                    br = row / (static_cast<int64_t>(merge) * merge * blocks_w);
      const int64_t y0 = (br * merge + ir) * patch, x0 = (bc * merge + ic) * patch;
      uint16_t* o = out.data<uint16_t>() + row * cols;
      for (int c = 0; c < 3; ++c)
        for (int t = 0; t < temporal_patch; ++t)
          for (int py = 0; py < patch; ++py)
            for (int pxi = 0; pxi < patch; ++pxi) {
              volatile float centered = static_cast<float>(px[((y0 + py) * width + x0 + pxi) * 3 + c]) - mean255[c];
              volatile float v = centered / std255[c];
              *o++ = bf16_bits_from_f32(v);
            }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
