// Reference LayerNorm over FP32 or BF16 rows (read exactly into FP32) with FP32 weight and bias (the video VAE
// decoder's norm_out, pinned to FP32 in diffusers): mean and biased variance in FP64, each sum in the canonical order
// of src/core/reduce.h (the CUDA kernel reproduces it), r = fp32(1/sqrt(var + eps)), y = fp32(fp32(fp32(x - mean) * r)
// * w) + b, stored as out's dtype with one rounding. Tested in tests/ref/vae_ops_test.cpp (FP64 formula, constant rows
// give the bias).
#include <cmath>
#include <string>
#include <vector>

#include "core/reduce.h"
#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out,
                  const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2 || (x.dtype() != DType::kF32 && x.dtype() != DType::kBF16))
    return invalid_argument("layer_norm: x must be 2-D [S, D] f32 or bf16, got " + x.describe());
  const int64_t s = x.dim(0), d = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "layer_norm x", x.dtype(), s, d));
  for (const Tensor* p : {&weight, &bias})
    if (!p->defined() || p->dtype() != DType::kF32 || p->numel() != d || !p->is_contiguous())
      return invalid_argument("layer_norm: weight and bias must be contiguous [" + std::to_string(d) +
                              "] f32 tensors, got " + p->describe());
  if (!out.defined() || (out.dtype() != DType::kF32 && out.dtype() != DType::kBF16))
    return invalid_argument("layer_norm: out must be f32 or bf16 [S, D], got " + out.describe());
  VORTEX_RETURN_IF_ERROR(check_rows(out, "layer_norm out", out.dtype(), s, d));
  const float* w = weight.data<float>();
  const float* b = bias.data<float>();
  const bool bf16_out = out.dtype() == DType::kBF16, bf16_in = x.dtype() == DType::kBF16;
  run(s, [&](int64_t begin, int64_t end) {
    std::vector<float> widened(bf16_in ? static_cast<size_t>(d) : 0);
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = bf16_in ? widened.data() : row_ptr<const float>(x, r);
      if (bf16_in)
        for (int64_t i = 0; i < d; ++i)
          widened[static_cast<size_t>(i)] = f32_from_bf16_bits(row_ptr<uint16_t>(x, r)[i]);
      const double sum = canonical_sum(d, [&](int64_t i) { return static_cast<double>(xr[i]); });
      const double mean = sum / static_cast<double>(d);
      const double var = canonical_sum_squares(d, [&](int64_t i) { return static_cast<double>(xr[i]) - mean; }) /
                         static_cast<double>(d);
      const float rs = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
      const float mean_f = static_cast<float>(mean);
      for (int64_t i = 0; i < d; ++i) {
        volatile float c = xr[i] - mean_f;
        volatile float n = c * rs;
        volatile float nw = n * w[i];
        const float y = nw + b[i];
        if (bf16_out) row_ptr<uint16_t>(out, r)[i] = bf16_bits_from_f32(y);
        else row_ptr<float>(out, r)[i] = y;
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
