// Reference anti-aliased downsampler (BigVGAN / alias-free-torch LowPassFilter1d at stride `ratio`): replicate
// padding of K/2 - (K even) on the left and K/2 on the right, then a depthwise convolution with the
// Kaiser-sinc `filter`, each output one FP64 chain in tap order rounded once. Rows are channels.
// Tested in tests/ref/vae_ops_test.cpp (constant signals stay constant, naive padded formula).
#include <string>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("downsample1d: x must be 2-D [C, L] f32, got " + x.describe());
  if (ratio < 1) return invalid_argument("downsample1d: ratio must be >= 1");
  if (!filter.defined() || filter.dtype() != DType::kF32 || !filter.is_contiguous() || filter.numel() < 1)
    return invalid_argument("downsample1d: filter must be a contiguous f32 tensor, got " + filter.describe());
  const int64_t c = x.dim(0), l = x.dim(1), k = filter.numel();
  if (l <= 0) return invalid_argument("downsample1d: empty signal");
  const int64_t lout = (l - 1) / ratio + 1;
  VORTEX_RETURN_IF_ERROR(check_rows(x, "downsample1d x", DType::kF32, c, l));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "downsample1d out", DType::kF32, c, lout));
  const int64_t pad_left = k / 2 - (k % 2 == 0 ? 1 : 0);
  const float* f = filter.data<float>();
  run(c, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      const float* xr = row_ptr<const float>(x, ch);
      float* orow = row_ptr<float>(out, ch);
      for (int64_t t = 0; t < lout; ++t) {
        double acc = 0.0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t i = std::clamp<int64_t>(t * ratio + kk - pad_left, 0, l - 1);
          acc += static_cast<double>(xr[i]) * static_cast<double>(f[kk]);
        }
        orow[t] = static_cast<float>(acc);
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
