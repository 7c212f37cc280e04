// Reference per-head Q/K RMSNorm + rotate-half RoPE (docs/numerics.md), in place on strided views of the
// QKV buffer. The norm is rms_norm_row (the same program as rms_norm); RoPE uses the host BF16 cos/sin
// tables: y[j] = R(R(x[j] cos) + R(-x[j+h] sin)), y[j+h] = R(R(x[j+h] cos) + R(x[j] sin)), h = rope_dims/2.
// Tested in tests/ref/qk_norm_rope_test.cpp (FP64 formulation, pass-through dims, no-RoPE path, strides).
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {

void rope_head_row(uint16_t* x, const uint16_t* cos_row, const uint16_t* sin_row, int half) {
  for (int j = 0; j < half; ++j) {
    const float x1 = f32_from_bf16_bits(x[j]);
    const float x2 = f32_from_bf16_bits(x[j + half]);
    const float c = f32_from_bf16_bits(cos_row[j]);
    const float s = f32_from_bf16_bits(sin_row[j]);
    const float y1 = round_bf16(x1 * c) + round_bf16(-x2 * s);
    const float y2 = round_bf16(x2 * c) + round_bf16(x1 * s);
    x[j] = bf16_bits_from_f32(y1);
    x[j + half] = bf16_bits_from_f32(y2);
  }
}

Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                    const RopeTables* rope, int num_heads, int head_dim, const RowRunner& run) {
  if (num_heads <= 0 || head_dim <= 0) return invalid_argument("qk_norm_rope: num_heads and head_dim must be positive");
  const int64_t inner = static_cast<int64_t>(num_heads) * head_dim;
  if (!q.defined() || q.ndim() != 2)
    return invalid_argument("qk_norm_rope: q must be 2-D [S, I] bf16, got " + q.describe());
  const int64_t s = q.dim(0);
  VORTEX_RETURN_IF_ERROR(check_rows(q, "qk_norm_rope q", DType::kBF16, s, inner));
  VORTEX_RETURN_IF_ERROR(check_rows(k, "qk_norm_rope k", DType::kBF16, s, inner));
  for (const Tensor* w : {&q_weight, &k_weight})
    if (!w->defined() || w->dtype() != DType::kBF16 || w->numel() != head_dim || !w->is_contiguous())
      return invalid_argument("qk_norm_rope: q/k norm weights must be contiguous [" + std::to_string(head_dim) +
                              "] bf16, got " + w->describe());
  int half = 0;
  if (rope) {
    if (rope->rope_dims <= 0 || rope->rope_dims % 2 != 0 || rope->rope_dims > head_dim)
      return invalid_argument("qk_norm_rope: rope_dims " + std::to_string(rope->rope_dims) +
                              " must be even and within head_dim " + std::to_string(head_dim));
    half = rope->rope_dims / 2;
    VORTEX_RETURN_IF_ERROR(check_rows(rope->cos, "rope cos", DType::kBF16, s, half));
    VORTEX_RETURN_IF_ERROR(check_rows(rope->sin, "rope sin", DType::kBF16, s, half));
  }
  const uint16_t* qw = q_weight.data<uint16_t>();
  const uint16_t* kw = k_weight.data<uint16_t>();
  run(s, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint16_t* cos_row = rope ? row_ptr<const uint16_t>(rope->cos, r) : nullptr;
      const uint16_t* sin_row = rope ? row_ptr<const uint16_t>(rope->sin, r) : nullptr;
      for (int which = 0; which < 2; ++which) {
        uint16_t* row = which == 0 ? row_ptr<uint16_t>(q, r) : row_ptr<uint16_t>(k, r);
        const uint16_t* w = which == 0 ? qw : kw;
        for (int h = 0; h < num_heads; ++h) {
          uint16_t* x = row + static_cast<int64_t>(h) * head_dim;
          rms_norm_row(x, w, head_dim, eps, x);  // in place: the sum is taken before any write
          if (rope) rope_head_row(x, cos_row, sin_row, half);
        }
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
