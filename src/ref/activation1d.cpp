// Reference anti-aliased SnakeBeta (BigVGAN Activation1d) of the audio decoder: upsample1d (x ratio, Kaiser-sinc),
// snake_beta, downsample1d (/ ratio), each op the reference program of its own stem, through a temporary [rows,
// L * ratio] row buffer. The CUDA kernel (src/cuda/ops/activation1d.cu) fuses the three into one pass with the same
// per-element programs. Tested in tests/ref/audio_decoder_ops_test.cpp (equal to the three ops called one by one).
#include <string>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                    const Tensor& down_filter, int ratio, Tensor& out, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("activation1d: x must be 2-D [B * C, L] f32, got " + x.describe());
  if (ratio < 1) return invalid_argument("activation1d: ratio must be >= 1");
  const int64_t rows = x.dim(0), l = x.dim(1);
  if (l <= 0) return invalid_argument("activation1d: empty signal");
  VORTEX_RETURN_IF_ERROR(check_rows(out, "activation1d out", DType::kF32, rows, l));
  Tensor up = Tensor::empty({rows, l * ratio}, DType::kF32);  // [B * C, L * ratio] f32
  VORTEX_RETURN_IF_ERROR(upsample1d(x, up_filter, ratio, up, run).with_context("activation1d"));
  VORTEX_RETURN_IF_ERROR(snake_beta(up, alpha, beta, run).with_context("activation1d"));
  return downsample1d(up, down_filter, ratio, out, run).with_context("activation1d");
}

}  // namespace vortex::ref
