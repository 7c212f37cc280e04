// Small inline helpers private to the CPU reference op files: row pointers of row-strided 2-D views
// segment iteration over a row range, and the batch loop of the 1-D convolutions. Header-only; covered by every test in
// tests/ref.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/segments.h"
#include "vortex/dtype.h"
#include "vortex/status.h"
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

// A conv over a batch of signals: x [B, Cin, L] and out [B, Cout, Lout], each signal b through `one(x_b, out_b)`
// on its own 2-D views. Shared by ref/conv1d.cpp and ref/conv_transpose1d.cpp.
template <typename Fn>
Status for_each_signal(const char* op, const Tensor& x, Tensor& out, Fn one) {
  if (!x.is_contiguous() || !out.defined() || out.ndim() != 3 || !out.is_contiguous() || out.dim(0) != x.dim(0))
    return invalid_argument(std::string(op) + ": a batched x " + x.describe() +
                            " needs a contiguous out of the same batch, got " +
                            (out.defined() ? out.describe() : std::string("undefined")));
  for (int64_t b = 0; b < x.dim(0); ++b) {
    VORTEX_ASSIGN_OR_RETURN(Tensor xs, x.narrow(0, b, 1));
    VORTEX_ASSIGN_OR_RETURN(Tensor xb, xs.reshape({x.dim(1), x.dim(2)}));  // [Cin, L]
    VORTEX_ASSIGN_OR_RETURN(Tensor os, out.narrow(0, b, 1));
    VORTEX_ASSIGN_OR_RETURN(Tensor ob, os.reshape({out.dim(1), out.dim(2)}));  // [Cout, Lout]
    VORTEX_RETURN_IF_ERROR(one(xb, ob));
  }
  return Status::Ok();
}

}  // namespace vortex::ref
