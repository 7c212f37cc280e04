// Shared host checks and launch geometry of the VAE decoder kernels (src/cuda/ops/vae_ops.h): 2-D device row
// views of an expected dtype and shape, the no-aliasing check of out-of-place ops, and the grid of the
// row x column elementwise kernels. Included only by the VAE .cu files; tested through tests/cuda/vae_ops_test.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/check.h"
#include "cuda/ops/common.cuh"
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/vae_ops.h"

namespace vortex::cuda_ops {

// A 2-D device row view (unit inner stride) of `dtype` with `rows` x `cols` (-1: any).
inline Result<RowView> vae_rows(const Tensor& t, const char* what, DType dtype, int64_t rows, int64_t cols) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is undefined");
  if (t.ndim() != 2) return invalid_argument(std::string(what) + " must be 2-D, got " + t.describe());
  VORTEX_ASSIGN_OR_RETURN(RowView v, row_view(t, what));
  VORTEX_RETURN_IF_ERROR(expect_dtype(v, dtype, what));
  if ((rows >= 0 && v.rows != rows) || (cols >= 0 && v.cols != cols))
    return invalid_argument(std::string(what) + " must be [" + (rows >= 0 ? std::to_string(rows) : std::string("*")) +
                            ", " + (cols >= 0 ? std::to_string(cols) : std::string("*")) + "], got " + t.describe());
  if (v.rows > INT32_MAX || v.cols > INT32_MAX)
    return invalid_argument(std::string(what) + " " + t.describe() + " has a dimension beyond 2^31 - 1");
  return v;
}

// A signal operand of the convolutions: a 2-D row view [C, L], or a contiguous [B, C, L] stack of B signals
// (batch b starts `batch_stride` elements after batch 0). `first` is batch 0's [C, L] view, `all` the [B * C, L]
// rows (for the aliasing check).
struct BatchedRows {
  RowView first, all;
  int64_t batch = 1, batch_stride = 0;
};
inline Result<BatchedRows> vae_batched_rows(const Tensor& t, const char* what, DType dtype, int64_t rows,
                                            int64_t cols) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is undefined");
  BatchedRows b;
  if (t.ndim() == 2) {
    VORTEX_ASSIGN_OR_RETURN(b.first, vae_rows(t, what, dtype, rows, cols));
    b.all = b.first;
    return b;
  }
  if (t.ndim() != 3 || !t.is_contiguous() || t.dim(0) < 1 || t.dim(0) > 65535)
    return invalid_argument(std::string(what) + " must be a 2-D [C, L] view or a contiguous [B, C, L] tensor with " +
                            "1 <= B <= 65535, got " + t.describe());
  VORTEX_ASSIGN_OR_RETURN(Tensor flat, t.reshape({t.dim(0) * t.dim(1), t.dim(2)}));
  VORTEX_ASSIGN_OR_RETURN(Tensor first, flat.narrow(0, 0, t.dim(1)));
  VORTEX_ASSIGN_OR_RETURN(b.first, vae_rows(first, what, dtype, rows, cols));
  VORTEX_ASSIGN_OR_RETURN(b.all, vae_rows(flat, what, dtype, -1, -1));
  b.batch = t.dim(0);
  b.batch_stride = t.dim(1) * t.dim(2);
  return b;
}

// Byte range [first, last) a row view touches.
inline std::pair<uintptr_t, uintptr_t> view_bytes(const RowView& v) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(v.ptr);
  if (v.rows == 0 || v.cols == 0) return {b, b};
  return {b, b + static_cast<uintptr_t>(((v.rows - 1) * v.ld + v.cols) * static_cast<int64_t>(dtype_size(v.dtype)))};
}

// Out-of-place kernels read their input while writing the output: the two must not share memory.
inline Status expect_disjoint(const RowView& in, const RowView& out, const char* op) {
  const auto a = view_bytes(in), b = view_bytes(out);
  if (a.first < b.second && b.first < a.second)
    return invalid_argument(std::string(op) + ": the output overlaps the input (this op is out of place)");
  return Status::Ok();
}

// Elementwise kernels: blockIdx.y strides over rows, blockIdx.x * kEltThreads + threadIdx.x over columns.
constexpr int kEltThreads = 256;
inline dim3 elementwise_grid(int64_t rows, int64_t cols) {
  const int64_t gx = std::max<int64_t>(1, std::min<int64_t>((cols + kEltThreads - 1) / kEltThreads, 1 << 20));
  const int64_t gy = std::max<int64_t>(1, std::min<int64_t>(rows, 65535));
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), 1);
}

}  // namespace vortex::cuda_ops
