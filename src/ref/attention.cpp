// Reference scaled-dot-product attention (docs/numerics.md), non-causal, no mask, per head:
//  * attention: the FP64-exact oracle: FP64 scores from BF16 q, k (exact products, ascending d), scale
//    1/sqrt(head_dim), FP64 softmax, FP64 P.V in ascending key order, one rounding to BF16;
//  * attention_flash_fp32: the FP32 "same low-precision program" of a flash kernel (online softmax over key
//    blocks, BF16 P for P.V, FP32 accumulators) used as the second reference of the two-reference rule.
// Tested in tests/ref/attention_test.cpp (naive long-double formula, uniform/one-hot cases, flash vs FP64).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {
namespace {

Status check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, const Tensor& out) {
  if (num_heads <= 0 || head_dim <= 0) return invalid_argument("attention: num_heads and head_dim must be positive");
  const int64_t inner = static_cast<int64_t>(num_heads) * head_dim;
  if (!q.defined() || q.ndim() != 2)
    return invalid_argument("attention: q must be 2-D [S, I] bf16, got " + q.describe());
  const int64_t s = q.dim(0);
  VORTEX_RETURN_IF_ERROR(check_rows(q, "attention q", DType::kBF16, s, inner));
  if (!k.defined() || k.ndim() != 2)
    return invalid_argument("attention: k must be 2-D [S_kv, I] bf16, got " + k.describe());
  VORTEX_RETURN_IF_ERROR(check_rows(k, "attention k", DType::kBF16, -1, inner));
  VORTEX_RETURN_IF_ERROR(check_rows(v, "attention v", DType::kBF16, k.dim(0), inner));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "attention out", DType::kBF16, s, inner));
  if (k.dim(0) == 0) return invalid_argument("attention: no keys (S_kv = 0); softmax over an empty set is undefined");
  return Status::Ok();
}

// Head h of a [S, I] bf16 view as FP32 values [S, head_dim] (exact).
std::vector<float> head_values(const Tensor& t, int h, int head_dim) {
  const int64_t s = t.dim(0);
  std::vector<float> out(static_cast<size_t>(s * head_dim));
  for (int64_t r = 0; r < s; ++r) {
    const uint16_t* src = row_ptr<const uint16_t>(t, r) + static_cast<int64_t>(h) * head_dim;
    for (int d = 0; d < head_dim; ++d) out[static_cast<size_t>(r * head_dim + d)] = f32_from_bf16_bits(src[d]);
  }
  return out;
}

}  // namespace

Status attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                 const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_qkv(q, k, v, num_heads, head_dim, out));
  const int64_t s = q.dim(0), skv = k.dim(0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const size_t hd = static_cast<size_t>(head_dim);
  for (int h = 0; h < num_heads; ++h) {
    const std::vector<float> kh = head_values(k, h, head_dim);  // [S_kv, hd]
    const std::vector<float> vh = head_values(v, h, head_dim);  // [S_kv, hd]
    std::vector<float> kt(kh.size());                           // [hd, S_kv] (K^T)
    for (int64_t j = 0; j < skv; ++j)
      for (size_t d = 0; d < hd; ++d)
        kt[d * static_cast<size_t>(skv) + static_cast<size_t>(j)] = kh[static_cast<size_t>(j) * hd + d];
    run(s, [&](int64_t begin, int64_t end) {
      std::vector<double> qd(hd), scores(static_cast<size_t>(skv)), acc(hd);
      for (int64_t i = begin; i < end; ++i) {
        const uint16_t* qr = row_ptr<const uint16_t>(q, i) + static_cast<int64_t>(h) * head_dim;
        for (size_t d = 0; d < hd; ++d) qd[d] = f32_from_bf16_bits(qr[d]);
        // Scores: each key's dot product is one FP64 chain in ascending d; the loop runs over contiguous
        // keys of K^T so it vectorizes without changing any chain's order.
        std::fill(scores.begin(), scores.end(), 0.0);
        for (size_t d = 0; d < hd; ++d) {
          const double qv = qd[d];
          const float* krow = &kt[d * static_cast<size_t>(skv)];
          for (int64_t j = 0; j < skv; ++j) scores[static_cast<size_t>(j)] += qv * static_cast<double>(krow[j]);
        }
        for (double& sc : scores) sc *= scale;
        double mx = -std::numeric_limits<double>::infinity();
        for (double sc : scores) mx = sc > mx ? sc : mx;  // NaN scores never win; they propagate via exp below
        softmax_pv_row(scores.data(), skv, mx, vh.data(), hd, acc.data(),
                       row_ptr<uint16_t>(out, i) + static_cast<int64_t>(h) * head_dim);
      }
    });
  }
  return Status::Ok();
}

Status attention_flash_fp32(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                            int key_block, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_qkv(q, k, v, num_heads, head_dim, out));
  if (key_block <= 0) return invalid_argument("attention_flash_fp32: key_block must be positive");
  const int64_t s = q.dim(0), skv = k.dim(0);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const size_t hd = static_cast<size_t>(head_dim);
  for (int h = 0; h < num_heads; ++h) {
    const std::vector<float> kh = head_values(k, h, head_dim);
    const std::vector<float> vh = head_values(v, h, head_dim);
    run(s, [&](int64_t begin, int64_t end) {
      std::vector<float> qf(hd), acc(hd), p(static_cast<size_t>(key_block));
      for (int64_t i = begin; i < end; ++i) {
        const uint16_t* qr = row_ptr<const uint16_t>(q, i) + static_cast<int64_t>(h) * head_dim;
        for (size_t d = 0; d < hd; ++d) qf[d] = f32_from_bf16_bits(qr[d]);
        float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
        for (size_t d = 0; d < hd; ++d) acc[d] = 0.0f;
        for (int64_t j0 = 0; j0 < skv; j0 += key_block) {
          const int64_t nb = std::min<int64_t>(key_block, skv - j0);
          float block_max = -std::numeric_limits<float>::infinity();
          for (int64_t jj = 0; jj < nb; ++jj) {
            const float* kj = &kh[static_cast<size_t>(j0 + jj) * hd];
            float dot = 0.0f;
            for (size_t d = 0; d < hd; ++d) dot += qf[d] * kj[d];
            const float sc = dot * scale;
            p[static_cast<size_t>(jj)] = sc;
            block_max = sc > block_max ? sc : block_max;
          }
          const float m_new = block_max > m ? block_max : m;
          const float correction = std::exp(m - m_new);  // exp(-inf) = 0 on the first block
          float block_sum = 0.0f;
          for (size_t d = 0; d < hd; ++d) acc[d] *= correction;
          for (int64_t jj = 0; jj < nb; ++jj) {
            const float pj = std::exp(p[static_cast<size_t>(jj)] - m_new);
            block_sum += pj;
            const float pb = round_bf16(pj);  // BF16 P for the tensor-core P.V product
            const float* vj = &vh[static_cast<size_t>(j0 + jj) * hd];
            for (size_t d = 0; d < hd; ++d) acc[d] += pb * vj[d];
          }
          l = l * correction + block_sum;
          m = m_new;
        }
        uint16_t* o = row_ptr<uint16_t>(out, i) + static_cast<int64_t>(h) * head_dim;
        for (size_t d = 0; d < hd; ++d) o[d] = bf16_bits_from_f32(acc[d] / l);
      }
    });
  }
  return Status::Ok();
}

}  // namespace vortex::ref
