// Reference LayerScale residual: x = fp32(x + fp32(a * scale)) on an FP32 residual stream, `a` a BF16 or FP32
// branch output (the video VAE decoder's `x + attn(...) * scale1`, FP32 by type promotion in diffusers).
// Tested in tests/ref/vae_ops_test.cpp (exact values, bf16 and f32 branches).
#include <string>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status scale_add(Tensor& x, const Tensor& a, const Tensor& scale, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("scale_add: x must be 2-D [S, D] f32, got " + x.describe());
  const int64_t s = x.dim(0), d = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "scale_add x", DType::kF32, s, d));
  if (!a.defined() || (a.dtype() != DType::kF32 && a.dtype() != DType::kBF16))
    return invalid_argument("scale_add: a must be f32 or bf16 [S, D], got " + a.describe());
  VORTEX_RETURN_IF_ERROR(check_rows(a, "scale_add a", a.dtype(), s, d));
  if (!scale.defined() || scale.dtype() != DType::kF32 || scale.numel() != d || !scale.is_contiguous())
    return invalid_argument("scale_add: scale must be a contiguous [" + std::to_string(d) + "] f32 tensor, got " +
                            scale.describe());
  const float* sc = scale.data<float>();
  const bool bf16_a = a.dtype() == DType::kBF16;
  run(s, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* xr = row_ptr<float>(x, r);
      for (int64_t i = 0; i < d; ++i) {
        const float av = bf16_a ? f32_from_bf16_bits(row_ptr<const uint16_t>(a, r)[i]) : row_ptr<const float>(a, r)[i];
        volatile float p = av * sc[i];
        xr[i] = xr[i] + p;
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
