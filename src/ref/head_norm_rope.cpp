// Reference per-head RMSNorm + rotate-half RoPE on ONE strided [S, heads * head_dim] view, in place, with
// transformers' Qwen3 q_norm / k_norm rounding (rms_norm_two_rounding_row) and qk_norm_rope's RoPE
// (rope_head_row). One operand per call, so q and k may have different head counts (GQA: the Qwen3-VL
// conditioner has 64 q-heads and 8 kv-heads). Tested in tests/ref/head_norm_rope_test.cpp (E0 vs
// rms_norm_two_rounding + qk_norm_rope's RoPE-only path, GQA views vs an FP64 formulation).
#include <string>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {

Status head_norm_rope(Tensor& x, const Tensor& weight, float eps, const RopeTables* rope, int num_heads, int head_dim,
                      const RowRunner& run) {
  if (num_heads <= 0 || head_dim <= 0)
    return invalid_argument("head_norm_rope: num_heads and head_dim must be positive");
  const int64_t inner = static_cast<int64_t>(num_heads) * head_dim;
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("head_norm_rope: x must be 2-D [S, I] bf16, got " + x.describe());
  const int64_t s = x.dim(0);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "head_norm_rope x", DType::kBF16, s, inner));
  if (!weight.defined() || weight.dtype() != DType::kBF16 || weight.numel() != head_dim || !weight.is_contiguous())
    return invalid_argument("head_norm_rope: the norm weight must be contiguous [" + std::to_string(head_dim) +
                            "] bf16, got " + weight.describe());
  int half = 0;
  if (rope) {
    if (rope->rope_dims <= 0 || rope->rope_dims % 2 != 0 || rope->rope_dims > head_dim)
      return invalid_argument("head_norm_rope: rope_dims " + std::to_string(rope->rope_dims) +
                              " must be even and within head_dim " + std::to_string(head_dim));
    half = rope->rope_dims / 2;
    VORTEX_RETURN_IF_ERROR(check_rows(rope->cos, "rope cos", DType::kBF16, s, half));
    VORTEX_RETURN_IF_ERROR(check_rows(rope->sin, "rope sin", DType::kBF16, s, half));
  }
  const uint16_t* w = weight.data<uint16_t>();
  run(s, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      uint16_t* row = row_ptr<uint16_t>(x, r);
      for (int h = 0; h < num_heads; ++h) {
        uint16_t* xh = row + static_cast<int64_t>(h) * head_dim;
        rms_norm_two_rounding_row(xh, w, head_dim, eps, xh);  // in place: the sum is taken before any write
        if (rope) rope_head_row(xh, row_ptr<const uint16_t>(rope->cos, r), row_ptr<const uint16_t>(rope->sin, r), half);
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
