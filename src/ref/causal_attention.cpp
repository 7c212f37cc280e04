// Reference causal grouped-query SDPA (the Qwen3-VL conditioner's prefill): attention()'s FP64-exact program
// (FP64 scores from BF16 q, k in ascending d, scale 1/sqrt(head_dim), FP64 softmax, FP64 P.V in ascending key
// order, one rounding to BF16) restricted to keys j <= i, with query head h reading kv head h / group.
// Row i therefore equals attention() on query row i against key rows [0, i] with the kv heads repeated.
// Tested in tests/ref/causal_attention_test.cpp (long-double formula, E0 vs attention() on each prefix).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {

Status causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                        int head_dim, Tensor& out, const RowRunner& run) {
  if (num_heads <= 0 || num_kv_heads <= 0 || head_dim <= 0)
    return invalid_argument("causal_attention: num_heads, num_kv_heads and head_dim must be positive");
  if (num_heads % num_kv_heads != 0)
    return invalid_argument("causal_attention: num_heads " + std::to_string(num_heads) +
                            " must be a multiple of num_kv_heads " + std::to_string(num_kv_heads));
  const int64_t inner = static_cast<int64_t>(num_heads) * head_dim;
  const int64_t kv_inner = static_cast<int64_t>(num_kv_heads) * head_dim;
  if (!q.defined() || q.ndim() != 2)
    return invalid_argument("causal_attention: q must be 2-D [S, I] bf16, got " + q.describe());
  const int64_t s = q.dim(0);
  if (s == 0) return invalid_argument("causal_attention: no rows");
  VORTEX_RETURN_IF_ERROR(check_rows(q, "causal_attention q", DType::kBF16, s, inner));
  VORTEX_RETURN_IF_ERROR(check_rows(k, "causal_attention k", DType::kBF16, s, kv_inner));
  VORTEX_RETURN_IF_ERROR(check_rows(v, "causal_attention v", DType::kBF16, s, kv_inner));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "causal_attention out", DType::kBF16, s, inner));
  const int group = num_heads / num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const size_t hd = static_cast<size_t>(head_dim);
  for (int kvh = 0; kvh < num_kv_heads; ++kvh) {
    // The kv head as FP32 (exact) [S, hd]: shared by the `group` query heads that read it.
    std::vector<float> kh(static_cast<size_t>(s) * hd), vh(static_cast<size_t>(s) * hd);
    for (int64_t j = 0; j < s; ++j) {
      const uint16_t* kr = row_ptr<const uint16_t>(k, j) + static_cast<int64_t>(kvh) * head_dim;
      const uint16_t* vr = row_ptr<const uint16_t>(v, j) + static_cast<int64_t>(kvh) * head_dim;
      for (size_t d = 0; d < hd; ++d) {
        kh[static_cast<size_t>(j) * hd + d] = f32_from_bf16_bits(kr[d]);
        vh[static_cast<size_t>(j) * hd + d] = f32_from_bf16_bits(vr[d]);
      }
    }
    for (int g = 0; g < group; ++g) {
      const int h = kvh * group + g;
      run(s, [&](int64_t begin, int64_t end) {
        std::vector<double> qd(hd), scores(static_cast<size_t>(s)), acc(hd);
        for (int64_t i = begin; i < end; ++i) {
          const uint16_t* qr = row_ptr<const uint16_t>(q, i) + static_cast<int64_t>(h) * head_dim;
          for (size_t d = 0; d < hd; ++d) qd[d] = f32_from_bf16_bits(qr[d]);
          const int64_t nk = i + 1;  // keys 0..i
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < nk; ++j) {
            const float* kj = &kh[static_cast<size_t>(j) * hd];
            double dot = 0.0;
            for (size_t d = 0; d < hd; ++d) dot += qd[d] * static_cast<double>(kj[d]);
            const double sc = dot * scale;
            scores[static_cast<size_t>(j)] = sc;
            mx = sc > mx ? sc : mx;
          }
          softmax_pv_row(scores.data(), nk, mx, vh.data(), hd, acc.data(),
                         row_ptr<uint16_t>(out, i) + static_cast<int64_t>(h) * head_dim);
        }
      });
    }
  }
  return Status::Ok();
}

}  // namespace vortex::ref
