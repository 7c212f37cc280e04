// Reference elementwise residual add for FP32 feature maps: x = fp32(x + y), then fp32(x * scale) when
// scale != 1 (the audio decoder's AMP residuals and the mean over its parallel resblocks).
// Tested in tests/ref/vae_ops_test.cpp.
#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status add(Tensor& x, const Tensor& y, float scale, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2) return invalid_argument("add: x must be 2-D [C, L] f32, got " + x.describe());
  VORTEX_RETURN_IF_ERROR(check_rows(x, "add x", DType::kF32, x.dim(0), x.dim(1)));
  VORTEX_RETURN_IF_ERROR(check_rows(y, "add y", DType::kF32, x.dim(0), x.dim(1)));
  const int64_t n = x.dim(1);
  run(x.dim(0), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* xr = row_ptr<float>(x, r);
      const float* yr = row_ptr<const float>(y, r);
      for (int64_t i = 0; i < n; ++i) {
        volatile float s = xr[i] + yr[i];
        xr[i] = scale == 1.0f ? s : s * scale;
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
