// Small inline helpers private to the CPU reference op files: row pointers of row-strided 2-D views
// and segment iteration over a row range. Header-only; covered by every test in tests/ref.
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/segments.h"
#include "vortex/tensor.h"

namespace vortex::ref {

template <typename T>
inline T* row_ptr(const Tensor& t, int64_t r) {
  return static_cast<T*>(t.raw_data()) + r * t.stride(0);
}

// Calls fn(row, table_row) for rows [begin, end) in ascending order (segments already validated).
template <typename Fn>
inline void for_each_segment_row(const SegmentTable& seg, int64_t begin, int64_t end, Fn fn) {
  auto it = std::upper_bound(seg.segments.begin(), seg.segments.end(), begin,
                             [](int64_t r, const Segment& s) { return r < s.stop; });
  for (int64_t r = begin; r < end; ++r) {
    while (r >= it->stop) ++it;
    fn(r, it->table_row);
  }
}

}  // namespace vortex::ref
