// Reference RMSNorm (docs/numerics.md): canonical FP64 sum of squares (src/core/reduce.h), ms = sum / n
// in FP64, r = fp32(1 / sqrt(ms + eps)) from FP64, out = R(fp32(fp32(x * r) * w)) with one BF16 rounding.
// inf/NaN policy: plain IEEE propagation, as PyTorch: a NaN anywhere in a row makes the row NaN; an inf
// makes ms = inf, r = 0, so the inf lanes become NaN (inf * 0) and finite lanes +-0.
// Tested in tests/ref/rms_norm_test.cpp (independent FP64 formula, exact hand-picked rows, adversarial rows).
#include <cmath>

#include "core/reduce.h"
#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {

void rms_norm_row(const uint16_t* x, const uint16_t* weight, int64_t n, float eps, uint16_t* out) {
  const double sum = canonical_sum_squares(n, [x](int64_t j) { return static_cast<double>(f32_from_bf16_bits(x[j])); });
  const double ms = sum / static_cast<double>(n);
  const float r = static_cast<float>(1.0 / std::sqrt(ms + static_cast<double>(eps)));
  for (int64_t j = 0; j < n; ++j) {
    const float normed = f32_from_bf16_bits(x[j]) * r;              // FP32 product, rounded once
    const float weighted = normed * f32_from_bf16_bits(weight[j]);  // FP32 product, rounded once
    out[j] = bf16_bits_from_f32(weighted);
  }
}

Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("rms_norm: x must be 2-D [S, D] bf16, got " + x.describe());
  const int64_t s = x.dim(0), d = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "rms_norm x", DType::kBF16, s, d));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "rms_norm out", DType::kBF16, s, d));
  if (!weight.defined() || weight.dtype() != DType::kBF16 || weight.numel() != d || !weight.is_contiguous())
    return invalid_argument("rms_norm: weight must be a contiguous [" + std::to_string(d) + "] bf16 tensor, got " +
                            weight.describe());
  if (d == 0) return Status::Ok();
  const uint16_t* w = weight.data<uint16_t>();
  run(s, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      rms_norm_row(row_ptr<const uint16_t>(x, r), w, d, eps, row_ptr<uint16_t>(out, r));
  });
  return Status::Ok();
}

}  // namespace vortex::ref
