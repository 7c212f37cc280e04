// Small inline helpers private to the CPU reference op files: row pointers of row-strided 2-D views
// and segment iteration over a row range. Header-only; covered by every test in tests/ref.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "model/segments.h"
#include "vortex/dtype.h"
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

// The attention reference's softmax and PV for one query row, after its `nk` scaled scores and their max
// `mx` are known: p_j = exp(s_j - mx) summed in ascending j, acc_d = sum_j p_j v_jd in FP64, then
// o_d = R(acc_d / sum). `scores` is overwritten with p; `vh` is [nk, hd] f32; `acc` holds hd doubles.
inline void softmax_pv_row(double* scores, int64_t nk, double mx, const float* vh, size_t hd, double* acc,
                           uint16_t* o) {
  double sum = 0.0;
  for (int64_t j = 0; j < nk; ++j) {
    scores[j] = std::exp(scores[j] - mx);
    sum += scores[j];
  }
  for (size_t d = 0; d < hd; ++d) acc[d] = 0.0;
  for (int64_t j = 0; j < nk; ++j) {
    const double p = scores[j];
    const float* vj = &vh[static_cast<size_t>(j) * hd];
    for (size_t d = 0; d < hd; ++d) acc[d] += p * vj[d];
  }
  for (size_t d = 0; d < hd; ++d) o[d] = bf16_bits_from_f64(acc[d] / sum);
}

}  // namespace vortex::ref
