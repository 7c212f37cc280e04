// Host-side helpers shared by the op entry points in src/cuda/ops/*.cu: validation messages and the
// 16-byte vector eligibility test. Internal to component `cuda`; tested through tests/cuda/ops_test.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "cuda/ops/ops.h"

namespace vortex::cuda_ops {

// True when every view can be read in 16-byte vectors of 8 bf16: aligned base, ld and cols multiples of 8.
inline bool vector_ok(std::initializer_list<const RowView*> views) {
  for (const RowView* v : views) {
    if (reinterpret_cast<uintptr_t>(v->ptr) % 16 != 0 || v->ld % 8 != 0 || v->cols % 8 != 0) return false;
  }
  return true;
}

inline Status expect_dtype(const RowView& v, DType dtype, const char* what) {
  if (v.dtype == dtype) return Status::Ok();
  return invalid_argument(std::string(what) + " must be " + dtype_short_name(dtype) + ", got " +
                          dtype_short_name(v.dtype));
}

inline Status expect_shape(const RowView& v, int64_t rows, int64_t cols, const char* what) {
  if (v.rows == rows && v.cols == cols) return Status::Ok();
  return invalid_argument(std::string(what) + " must be [" + std::to_string(rows) + ", " + std::to_string(cols) +
                          "], got [" + std::to_string(v.rows) + ", " + std::to_string(v.cols) + "]");
}

// A 1-D contiguous device vector of `n` elements of `dtype` (norm weights).
Result<const void*> device_vector(const Tensor& t, int64_t n, DType dtype, const char* what);

// The AdaLN table argument of `op` is 2-D [rows, C * D].
inline Status expect_table_2d(const Tensor& table, const char* op) {
  if (table.defined() && table.ndim() == 2) return Status::Ok();
  return invalid_argument(std::string(op) + ": table must be 2-D [rows, C * D], got " +
                          (table.defined() ? table.describe() : std::string("undefined")));
}

// An AdaLN table [table_rows, C * D] bf16 read at column chunks `chunks` through `map` for `rows` rows.
inline Status check_table(const RowView& table, int64_t d, std::initializer_list<int> chunks, const DeviceRowMap& map,
                          int64_t rows, const char* op) {
  VORTEX_RETURN_IF_ERROR(expect_dtype(table, DType::kBF16, (std::string(op) + " table").c_str()));
  if (d <= 0 || table.cols % d != 0)
    return invalid_argument(std::string(op) + ": table width " + std::to_string(table.cols) +
                            " is not a multiple of the hidden size " + std::to_string(d));
  for (int c : chunks)
    if (c < 0 || c >= table.cols / d)
      return invalid_argument(std::string(op) + ": chunk " + std::to_string(c) + " outside the table's " +
                              std::to_string(table.cols / d) + " chunks");
  if (map.table_row == nullptr || map.rows != rows)
    return invalid_argument(std::string(op) + ": segment map covers " + std::to_string(map.rows) +
                            " rows, tensor has " + std::to_string(rows));
  if (map.table_rows != table.rows)
    return invalid_argument(std::string(op) + ": segment map was validated for " + std::to_string(map.table_rows) +
                            " table rows, table has " + std::to_string(table.rows));
  return Status::Ok();
}

constexpr int64_t kMaxGridX = 2147483647;

}  // namespace vortex::cuda_ops
