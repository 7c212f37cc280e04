// Shared host code of the CUDA ops: 2-D row views of device tensors, device vectors, the segment
// row-map cache (built once per segment table and reused by every block of a step), and the
// kernel-image check. Tested through tests/cuda/ops_test.cpp.
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/check.h"
#include "cuda/ops/ops_internal.h"

namespace vortex::cuda_ops {

Result<RowView> row_view(const Tensor& t, const char* what) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is undefined");
  if (t.device() != Device::kCuda)
    return invalid_argument(std::string(what) + " " + t.describe() + " must be a CUDA tensor (upload it first)");
  RowView v;
  v.ptr = t.raw_data();
  v.dtype = t.dtype();
  if (t.ndim() == 2) {
    if (t.dim(1) > 1 && t.stride(1) != 1)
      return invalid_argument(std::string(what) + " " + t.describe() + " must have unit inner stride");
    v.rows = t.dim(0);
    v.cols = t.dim(1);
    v.ld = t.dim(0) > 1 ? t.stride(0) : t.dim(1);
    if (v.ld < v.cols) return invalid_argument(std::string(what) + ": row stride smaller than the row");
  } else if (t.ndim() == 1) {
    if (t.dim(0) > 1 && t.stride(0) != 1)
      return invalid_argument(std::string(what) + " " + t.describe() + " must be contiguous");
    v.rows = 1;
    v.cols = t.dim(0);
    v.ld = v.cols;
  } else {
    if (!t.is_contiguous())
      return invalid_argument(std::string(what) + " " + t.describe() +
                              " with more than 2 dims must be contiguous (or pass a 2-D row view)");
    v.cols = t.ndim() == 0 ? 1 : t.dim(-1);
    v.rows = v.cols == 0 ? 0 : t.numel() / v.cols;
    v.ld = v.cols;
  }
  return v;
}

Result<const void*> device_vector(const Tensor& t, int64_t n, DType dtype, const char* what) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is undefined");
  if (t.device() != Device::kCuda) return invalid_argument(std::string(what) + " must be a CUDA tensor");
  if (t.dtype() != dtype || t.numel() != n || !t.is_contiguous())
    return invalid_argument(std::string(what) + " must be a contiguous [" + std::to_string(n) + "] " +
                            dtype_short_name(dtype) + " tensor, got " + t.describe());
  return static_cast<const void*>(t.raw_data());
}

SegmentRowMapCache::~SegmentRowMapCache() {
  for (Entry& e : entries_) allocator_->release(e.device, e.bytes);
}

Result<DeviceRowMap> table_row_map(SegmentRowMapCache& cache, const SegmentTable& seg, const Tensor& table,
                                   const char* op, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(expect_table_2d(table, op));
  return cache.get(seg, table.dim(0), stream);
}

Result<DeviceRowMap> SegmentRowMapCache::get(const SegmentTable& seg, int64_t table_rows, cudaStream_t stream) {
  auto same_as = [&](const Entry& e) {
    return e.rows == seg.rows && e.table_rows == table_rows && e.segments.size() == seg.segments.size() &&
           std::equal(e.segments.begin(), e.segments.end(), seg.segments.begin(),
                      [](const Segment& a, const Segment& b) {
                        return a.start == b.start && a.stop == b.stop && a.table_row == b.table_row;
                      });
  };
  for (const Entry& e : entries_)
    if (same_as(e))
      return DeviceRowMap{static_cast<const int32_t*>(e.device), e.rows, static_cast<int32_t>(e.table_rows)};

  VORTEX_RETURN_IF_ERROR(seg.validate(table_rows).with_context("segment table"));
  if (seg.rows <= 0) return invalid_argument("segment table has no rows");
  constexpr size_t kMaxEntries = 4;
  if (entries_.size() >= kMaxEntries) {
    // The oldest entry's map may still be read by queued kernels: wait before recycling its memory.
    VORTEX_CUDA_CHECK(cudaStreamSynchronize(stream));
    allocator_->release(entries_.back().device, entries_.back().bytes);
    entries_.pop_back();
  }
  Entry e;
  e.segments = seg.segments;
  e.rows = seg.rows;
  e.table_rows = table_rows;
  e.host.assign(static_cast<size_t>(seg.rows), 0);
  for (const Segment& s : seg.segments) std::fill(e.host.begin() + s.start, e.host.begin() + s.stop, s.table_row);
  e.bytes = e.host.size() * sizeof(int32_t);
  VORTEX_ASSIGN_OR_RETURN(e.device, allocator_->allocate(e.bytes));
  cudaError_t err = cudaMemcpyAsync(e.device, e.host.data(), e.bytes, cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) {
    allocator_->release(e.device, e.bytes);
    return cuda_status(err, "cudaMemcpyAsync(segment row map)", __FILE__, __LINE__);
  }
  ++builds_;
  entries_.push_front(std::move(e));
  const Entry& f = entries_.front();
  return DeviceRowMap{static_cast<const int32_t*>(f.device), f.rows, static_cast<int32_t>(f.table_rows)};
}

}  // namespace vortex::cuda_ops
