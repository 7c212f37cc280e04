// Reference 1-D transposed convolution over a channel-major FP32 signal (the audio decoder's upsamplers):
// out[o, j] = bias[o] + sum over (c, i, k) with i * stride + k - padding = j of x[c, i] * w[c, o, k], each
// output ONE FP64 chain in (c, i) order, rounded once to FP32. Rows are output channels.
// Tested in tests/ref/vae_ops_test.cpp (naive scatter formula in long double).
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding, Tensor& out,
                        const RowRunner& run) {
  if (x.defined() && x.ndim() == 3)  // [B, Cin, L] -> [B, Cout, Lout]: each signal on its own
    return for_each_signal("conv_transpose1d", x, out, [&](const Tensor& xb, Tensor& ob) {
      return conv_transpose1d(xb, weight, bias, stride, padding, ob, run);
    });
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("conv_transpose1d: x must be 2-D [Cin, L] f32, got " + x.describe());
  if (!weight.defined() || weight.ndim() != 3 || weight.dtype() != DType::kF32 || !weight.is_contiguous())
    return invalid_argument("conv_transpose1d: weight must be a contiguous [Cin, Cout, K] f32 tensor, got " +
                            weight.describe());
  if (stride < 1 || padding < 0) return invalid_argument("conv_transpose1d: stride must be >= 1 and padding >= 0");
  const int64_t cin = x.dim(0), l = x.dim(1), cout = weight.dim(1), k = weight.dim(2);
  if (weight.dim(0) != cin)
    return invalid_argument("conv_transpose1d: weight " + weight.describe() + " does not take " + std::to_string(cin) +
                            " input channels");
  const int64_t lout = conv_transpose1d_out_length(l, k, stride, padding);
  if (l <= 0 || lout <= 0) return invalid_argument("conv_transpose1d: empty output for " + x.describe());
  VORTEX_RETURN_IF_ERROR(check_rows(x, "conv_transpose1d x", DType::kF32, cin, l));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "conv_transpose1d out", DType::kF32, cout, lout));
  if (bias && (!bias->defined() || bias->dtype() != DType::kF32 || bias->numel() != cout || !bias->is_contiguous()))
    return invalid_argument("conv_transpose1d: bias must be a contiguous [" + std::to_string(cout) +
                            "] f32 tensor, got " + bias->describe());
  const float* w = weight.data<float>();
  run(cout, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(lout));
    for (int64_t o = begin; o < end; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t c = 0; c < cin; ++c) {
        const float* xc = row_ptr<const float>(x, c);
        const float* wc = w + (c * cout + o) * k;
        // For a fixed (c, i) the taps land on distinct outputs, so each output's chain stays in (c, i) order.
        for (int64_t i = 0; i < l; ++i) {
          const double xv = xc[i];
          for (int64_t kk = 0; kk < k; ++kk) {
            const int64_t j = i * stride + kk - padding;
            if (j >= 0 && j < lout) acc[static_cast<size_t>(j)] += xv * static_cast<double>(wc[kk]);
          }
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
