// Reference SnakeBeta activation (BigVGAN): x + 1/(exp(beta) + 1e-9) * sin(exp(alpha) * x)^2 per channel, in
// FP32 one operation at a time in diffusers' order (exp of the stored log-space parameters, reciprocal,
// sin of the FP32 product, square, product, sum). The sine is FP32 `sinf` (the host libm's, <= 1 ulp; diffusers'
// FP32 module takes PyTorch's FP32 sine); exp of the per-channel parameters is evaluated in FP64 and rounded once.
// A GPU's sinf (<= 2 ulp) may differ by a few ulps: docs/numerics.md "Audio" states the tolerance. Rows are channels.
// Tested in tests/ref/vae_ops_test.cpp (FP64 formula within the stated bound, x = 0 fixed point).
#include <cmath>
#include <string>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("snake_beta: x must be 2-D [C, L] f32, got " + x.describe());
  const int64_t rows = x.dim(0), l = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "snake_beta x", DType::kF32, rows, l));
  // Rows are B stacked signals of c channels (row r is channel r % c).
  const int64_t c = alpha.defined() ? alpha.numel() : 0;
  if (c < 1 || rows % c != 0)
    return invalid_argument("snake_beta: x " + x.describe() + " does not hold whole signals of " + std::to_string(c) +
                            " channels (alpha " + (alpha.defined() ? alpha.describe() : std::string("undefined")) +
                            ")");
  for (const Tensor* p : {&alpha, &beta})
    if (!p->defined() || p->dtype() != DType::kF32 || p->numel() != c || !p->is_contiguous())
      return invalid_argument("snake_beta: alpha and beta must be contiguous [" + std::to_string(c) +
                              "] f32 tensors, got " + p->describe());
  run(rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t ch = row % c;
      const float a = static_cast<float>(std::exp(static_cast<double>(alpha.data<float>()[ch])));
      const float b = static_cast<float>(std::exp(static_cast<double>(beta.data<float>()[ch])));
      volatile float b_eps = b + 1e-9f;
      const float inv_b = 1.0f / b_eps;
      float* xr = row_ptr<float>(x, row);
      for (int64_t i = 0; i < l; ++i) {
        volatile float ax = a * xr[i];
        const float sn = std::sin(static_cast<float>(ax));  // sinf
        volatile float sq = sn * sn;
        volatile float term = inv_b * sq;
        xr[i] = xr[i] + term;
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
