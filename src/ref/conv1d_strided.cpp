// Reference strided, dilated 1-D convolution over [B, C, L] stacks (the audio VAE encoder's channel-doubling
// downsampling convolutions): each output is ONE FP64 chain in (input channel, tap) order over the taps inside the
// signal, plus the bias, rounded once to FP32 — conv1d's program (src/ref/conv1d.cpp) with a stride. Rows are
// (signal, output channel). Tested in tests/ref/audio_encoder_ops_test.cpp and tests/cuda/audio_encoder_ops_test.cpp.
#include <algorithm>
#include <string>
#include <vector>

#include "ref/audio_encoder_internal.h"
#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation, int padding,
                      Tensor& out, const RowRunner& run) {
  if (stride < 1 || dilation < 1 || padding < 0)
    return invalid_argument("conv1d_strided: stride and dilation must be >= 1, padding >= 0");
  VORTEX_RETURN_IF_ERROR(check_f32(x, "conv1d_strided x", {-1, -1, -1}));
  VORTEX_RETURN_IF_ERROR(check_f32(weight, "conv1d_strided weight", {-1, x.dim(1), -1}));
  const int64_t b_n = x.dim(0), cin = x.dim(1), l = x.dim(2), cout = weight.dim(0), k = weight.dim(2);
  const int64_t lout = conv1d_strided_out_length(l, k, stride, dilation, padding);
  if (k < 1 || lout <= 0)
    return invalid_argument("conv1d_strided: the signal (" + std::to_string(l) +
                            " samples) is shorter than the kernel span");
  VORTEX_RETURN_IF_ERROR(check_f32(bias, "conv1d_strided bias", {cout}));
  VORTEX_RETURN_IF_ERROR(check_f32(out, "conv1d_strided out", {b_n, cout, lout}));
  const float* w = weight.data<float>();
  run(b_n * cout, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(lout));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / cout, o = row % cout;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t c = 0; c < cin; ++c) {
        const float* xc = x.data<float>() + (b * cin + c) * l;
        for (int64_t kk = 0; kk < k; ++kk) {
          const double wv = w[(o * cin + c) * k + kk];
          const int64_t off = kk * dilation - padding;  // input index = t * stride + off
          for (int64_t t = 0; t < lout; ++t) {
            const int64_t i = t * stride + off;
            if (i >= 0 && i < l) acc[static_cast<size_t>(t)] += wv * static_cast<double>(xc[i]);
          }
        }
      }
      float* orow = out.data<float>() + row * lout;
      const double bv = bias.data<float>()[o];
      for (int64_t t = 0; t < lout; ++t) orow[t] = static_cast<float>(acc[static_cast<size_t>(t)] + bv);
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
