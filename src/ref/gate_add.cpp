// Reference gated residual add (docs/numerics.md): x = R(x + R(gate * a)) per row segment, gate
// from the AdaLN table; without a table (refiner blocks) the plain residual x = R(x + a). FP32 operations,
// one rounding each. Tested in tests/ref/modulate_test.cpp (GateAdd) (FP64 formulation, exact cases, no-table path).
#include <string>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {

Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg,
                const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("gate_add: x must be 2-D [S, D] bf16, got " + x.describe());
  const int64_t s = x.dim(0), d = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "gate_add x", DType::kBF16, s, d));
  VORTEX_RETURN_IF_ERROR(check_rows(a, "gate_add a", DType::kBF16, s, d));
  if (table == nullptr) {
    run(s, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        uint16_t* xr = row_ptr<uint16_t>(x, r);
        const uint16_t* ar = row_ptr<const uint16_t>(a, r);
        for (int64_t j = 0; j < d; ++j)
          xr[j] = bf16_bits_from_f32(f32_from_bf16_bits(xr[j]) + f32_from_bf16_bits(ar[j]));
      }
    });
    return Status::Ok();
  }
  VORTEX_RETURN_IF_ERROR(check_rows(*table, "gate_add table", DType::kBF16, -1, -1));
  if (d == 0 || table->dim(1) % d != 0)
    return invalid_argument("gate_add: table " + table->describe() + " is not [rows, C * " + std::to_string(d) + "]");
  if (gate_chunk < 0 || gate_chunk >= table->dim(1) / d)
    return invalid_argument("gate_add: gate chunk " + std::to_string(gate_chunk) + " outside the table");
  VORTEX_RETURN_IF_ERROR(check_segments(seg, s, table->dim(0)).with_context("gate_add"));
  run(s, [&](int64_t begin, int64_t end) {
    for_each_segment_row(seg, begin, end, [&](int64_t r, int32_t trow) {
      const uint16_t* gate = row_ptr<const uint16_t>(*table, trow) + gate_chunk * d;
      uint16_t* xr = row_ptr<uint16_t>(x, r);
      const uint16_t* ar = row_ptr<const uint16_t>(a, r);
      for (int64_t j = 0; j < d; ++j) {
        const float gated = round_bf16(f32_from_bf16_bits(gate[j]) * f32_from_bf16_bits(ar[j]));
        xr[j] = bf16_bits_from_f32(f32_from_bf16_bits(xr[j]) + gated);
      }
    });
  });
  return Status::Ok();
}

}  // namespace vortex::ref
