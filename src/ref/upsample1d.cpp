// Reference anti-aliased upsampler (BigVGAN / alias-free-torch UpSample1d): replicate padding, a depthwise
// transposed convolution with the Kaiser-sinc `filter` at stride `ratio` (each output one FP64 chain in input
// order), the product with `ratio` in FP32, and the crop back to L * ratio samples. Rows are channels.
// Tested in tests/ref/vae_ops_test.cpp (constant signals stay constant, naive padded formula).
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("upsample1d: x must be 2-D [C, L] f32, got " + x.describe());
  if (ratio < 1) return invalid_argument("upsample1d: ratio must be >= 1");
  if (!filter.defined() || filter.dtype() != DType::kF32 || !filter.is_contiguous() || filter.numel() < ratio)
    return invalid_argument("upsample1d: filter must be a contiguous f32 tensor of at least `ratio` taps, got " +
                            filter.describe());
  const int64_t c = x.dim(0), l = x.dim(1), k = filter.numel();
  VORTEX_RETURN_IF_ERROR(check_rows(x, "upsample1d x", DType::kF32, c, l));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "upsample1d out", DType::kF32, c, l * ratio));
  if (l <= 0) return invalid_argument("upsample1d: empty signal");
  const int64_t pad = k / ratio - 1;
  const int64_t pad_left = pad * ratio + (k - ratio) / 2;
  const float* f = filter.data<float>();
  const float scale = static_cast<float>(ratio);
  run(c, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      const float* xr = row_ptr<const float>(x, ch);
      float* orow = row_ptr<float>(out, ch);
      auto xp = [&](int64_t i) { return static_cast<double>(xr[std::clamp<int64_t>(i - pad, 0, l - 1)]); };
      const int64_t lp = l + 2 * pad;  // padded length
      for (int64_t t = 0; t < l * ratio; ++t) {
        const int64_t j = t + pad_left;  // index into the full transposed-conv output
        double acc = 0.0;
        // j = i * ratio + kk: ascending i.
        const int64_t i_lo = std::max<int64_t>(0, (j - (k - 1) + ratio - 1) / ratio);
        const int64_t i_hi = std::min<int64_t>(lp - 1, j / ratio);
        for (int64_t i = i_lo; i <= i_hi; ++i) acc += xp(i) * static_cast<double>(f[j - i * ratio]);
        orow[t] = scale * static_cast<float>(acc);
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
