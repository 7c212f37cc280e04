// Reference AdaLN modulation (docs/numerics.md), in place per row segment:
// t = R(1 + scale), x = R(x * t), x = R(x + shift) — each an FP32 operation rounded once to BF16, in this
// order ((x * (scale + 1)) + shift is part of the contract). Table row per segment (timestep, modality).
// Tested in tests/ref/modulate_test.cpp (FP64 formulation, exact cases, segment boundaries, bad tables).
#include <string>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {

Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk, const SegmentTable& seg,
                const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("modulate: x must be 2-D [S, D] bf16, got " + x.describe());
  const int64_t s = x.dim(0), d = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "modulate x", DType::kBF16, s, d));
  VORTEX_RETURN_IF_ERROR(check_rows(table, "modulate table", DType::kBF16, -1, -1));
  if (d == 0 || table.dim(1) % d != 0)
    return invalid_argument("modulate: table " + table.describe() + " is not [rows, C * " + std::to_string(d) + "]");
  const int64_t chunks = table.dim(1) / d;
  if (shift_chunk < 0 || shift_chunk >= chunks || scale_chunk < 0 || scale_chunk >= chunks)
    return invalid_argument("modulate: chunk index outside the table's " + std::to_string(chunks) + " chunks");
  VORTEX_RETURN_IF_ERROR(check_segments(seg, s, table.dim(0)).with_context("modulate"));
  run(s, [&](int64_t begin, int64_t end) {
    for_each_segment_row(seg, begin, end, [&](int64_t r, int32_t trow) {
      const uint16_t* trp = row_ptr<const uint16_t>(table, trow);
      const uint16_t* shift = trp + shift_chunk * d;
      const uint16_t* scale = trp + scale_chunk * d;
      uint16_t* xr = row_ptr<uint16_t>(x, r);
      for (int64_t j = 0; j < d; ++j) {
        const float t = round_bf16(1.0f + f32_from_bf16_bits(scale[j]));
        const float scaled = round_bf16(f32_from_bf16_bits(xr[j]) * t);
        xr[j] = bf16_bits_from_f32(scaled + f32_from_bf16_bits(shift[j]));
      }
    });
  });
  return Status::Ok();
}

}  // namespace vortex::ref
