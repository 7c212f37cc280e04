// Reference 1-D convolution (stride 1, dilation, symmetric zero padding) over a channel-major FP32 signal:
// each output is ONE FP64 chain in (input channel, tap) order plus the bias, rounded once to FP32.
// Rows are output channels. Used by the audio decoder (conv_pre, AMP convs, conv_post, dec_in_proj as K = 1).
// Tested in tests/ref/vae_ops_test.cpp (naive long-double formula, padding and dilation edges).
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
              const RowRunner& run) {
  if (x.defined() && x.ndim() == 3)  // [B, Cin, L] -> [B, Cout, Lout]: each signal on its own
    return for_each_signal("conv1d", x, out, [&](const Tensor& xb, Tensor& ob) {
      return conv1d(xb, weight, bias, dilation, padding, ob, run);
    });
  if (!x.defined() || x.ndim() != 2) return invalid_argument("conv1d: x must be 2-D [Cin, L] f32, got " + x.describe());
  if (!weight.defined() || weight.ndim() != 3 || weight.dtype() != DType::kF32 || !weight.is_contiguous())
    return invalid_argument("conv1d: weight must be a contiguous [Cout, Cin, K] f32 tensor, got " + weight.describe());
  if (dilation < 1 || padding < 0) return invalid_argument("conv1d: dilation must be >= 1 and padding >= 0");
  const int64_t cin = x.dim(0), l = x.dim(1), cout = weight.dim(0), k = weight.dim(2);
  if (weight.dim(1) != cin)
    return invalid_argument("conv1d: weight " + weight.describe() + " does not take " + std::to_string(cin) +
                            " input channels");
  const int64_t lout = conv1d_out_length(l, k, dilation, padding);
  if (lout <= 0)
    return invalid_argument("conv1d: the signal (" + std::to_string(l) + " samples) is shorter than the kernel span");
  VORTEX_RETURN_IF_ERROR(check_rows(x, "conv1d x", DType::kF32, cin, l));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "conv1d out", DType::kF32, cout, lout));
  if (bias && (!bias->defined() || bias->dtype() != DType::kF32 || bias->numel() != cout || !bias->is_contiguous()))
    return invalid_argument("conv1d: bias must be a contiguous [" + std::to_string(cout) + "] f32 tensor, got " +
                            bias->describe());
  const float* w = weight.data<float>();
  run(cout, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(lout));
    for (int64_t o = begin; o < end; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0);
      // Loop order (c, k, t) keeps every output's chain in (c, k) order while the inner loop runs over t.
      for (int64_t c = 0; c < cin; ++c) {
        const float* xc = row_ptr<const float>(x, c);
        for (int64_t kk = 0; kk < k; ++kk) {
          const double wv = w[(o * cin + c) * k + kk];
          const int64_t shift = kk * dilation - padding;  // input index = t + shift
          const int64_t t0 = std::max<int64_t>(0, -shift), t1 = std::min<int64_t>(lout, l - shift);
          for (int64_t t = t0; t < t1; ++t) acc[static_cast<size_t>(t)] += wv * static_cast<double>(xc[t + shift]);
        }
      }
      float* orow = row_ptr<float>(out, o);
      const double b = bias ? static_cast<double>(bias->data<float>()[o]) : 0.0;
      for (int64_t t = 0; t < lout; ++t) orow[t] = static_cast<float>(acc[static_cast<size_t>(t)] + b);
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
