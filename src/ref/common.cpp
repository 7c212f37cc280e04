// Shared validation helpers and the serial row runner of the CPU reference ops (src/ref/ref_ops.h).
// Validation lives here once so every op reports shape/dtype/stride mistakes with the same wording.
// Exercised by every test in tests/ref (including the bad-argument cases in ops_adversarial_test.cpp).
#include <string>

#include "ref/ref_ops.h"

namespace vortex::ref {

void run_serial(int64_t rows, const RowBody& body) {
  if (rows > 0) body(0, rows);
}

Status check_rows(const Tensor& t, const char* what, DType dtype, int64_t rows, int64_t cols) {
  std::string name(what);
  if (!t.defined()) return invalid_argument(name + " is not defined");
  if (t.device() != Device::kCpu)
    return invalid_argument(name + " must be a host tensor for the CPU reference, got " + t.describe());
  if (t.dtype() != dtype)
    return invalid_argument(name + " must be " + dtype_short_name(dtype) + ", got " + t.describe());
  if (t.ndim() != 2) return invalid_argument(name + " must be 2-D [rows, cols], got " + t.describe());
  if (rows >= 0 && t.dim(0) != rows)
    return invalid_argument(name + " must have " + std::to_string(rows) + " rows, got " + t.describe());
  if (cols >= 0 && t.dim(1) != cols)
    return invalid_argument(name + " must have " + std::to_string(cols) + " columns, got " + t.describe());
  if (t.dim(1) > 1 && t.stride(1) != 1)
    return invalid_argument(name + " must have unit stride along columns (row-strided views only), got strides " +
                            shape_to_string(t.strides()));
  return Status::Ok();
}

Status check_segments(const SegmentTable& seg, int64_t rows, int64_t table_rows) {
  if (seg.rows != rows)
    return invalid_argument("segment table covers " + std::to_string(seg.rows) + " rows but the tensor has " +
                            std::to_string(rows) + "; build it from the same layout");
  int64_t next = 0;
  for (const Segment& s : seg.segments) {
    if (s.start != next || s.stop <= s.start)
      return invalid_argument("segment table is not a sorted, contiguous cover of [0, " + std::to_string(rows) +
                              ") with non-empty segments (segment [" + std::to_string(s.start) + ", " +
                              std::to_string(s.stop) + "))");
    if (s.table_row < 0 || s.table_row >= table_rows)
      return invalid_argument("segment table row " + std::to_string(s.table_row) + " is outside the AdaLN table of " +
                              std::to_string(table_rows) + " rows");
    next = s.stop;
  }
  if (next != rows)
    return invalid_argument("segment table stops at row " + std::to_string(next) + " of " + std::to_string(rows));
  return Status::Ok();
}

}  // namespace vortex::ref
