// Reference RMSNorm over an FP32 row with an FP32 weight (the video VAE decoder's norm1/norm2, which diffusers
// pins to FP32): FP64 sum of the exact FP32 squares in the canonical order (src/core/reduce.h, which the CUDA
// kernel reproduces), r = fp32(1/sqrt(ms + eps)),
// y = fp32(fp32(x * r) * w), stored as out's dtype with one rounding. NaN/inf propagate as in rms_norm.
// Tested in tests/ref/vae_ops_test.cpp (FP64 formula, bf16 output = RNE of the f32 output).
#include <cmath>
#include <string>

#include "core/reduce.h"
#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("rms_norm_fp32: x must be 2-D [S, D] f32, got " + x.describe());
  const int64_t s = x.dim(0), d = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "rms_norm_fp32 x", DType::kF32, s, d));
  if (!weight.defined() || weight.dtype() != DType::kF32 || weight.numel() != d || !weight.is_contiguous())
    return invalid_argument("rms_norm_fp32: weight must be a contiguous [" + std::to_string(d) + "] f32 tensor, got " +
                            weight.describe());
  if (!out.defined() || (out.dtype() != DType::kF32 && out.dtype() != DType::kBF16))
    return invalid_argument("rms_norm_fp32: out must be f32 or bf16 [S, D], got " + out.describe());
  VORTEX_RETURN_IF_ERROR(check_rows(out, "rms_norm_fp32 out", out.dtype(), s, d));
  const float* w = weight.data<float>();
  const bool bf16_out = out.dtype() == DType::kBF16;
  run(s, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = row_ptr<const float>(x, r);
      const double sum = canonical_sum_squares(d, [&](int64_t i) { return static_cast<double>(xr[i]); });
      const float rs = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(d) + static_cast<double>(eps)));
      for (int64_t i = 0; i < d; ++i) {
        volatile float n = xr[i] * rs;  // one FP32 rounding before the weight (no contraction)
        const float y = n * w[i];
        if (bf16_out) row_ptr<uint16_t>(out, r)[i] = bf16_bits_from_f32(y);
        else row_ptr<float>(out, r)[i] = y;
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
