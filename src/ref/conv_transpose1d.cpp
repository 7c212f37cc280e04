// Reference 1-D transposed convolution over a channel-major FP32 signal (the audio decoder's upsamplers):
// out[o, j] = bias[o] + sum over (c, i, k) with i * stride + k - padding = j of x[c, i] * w[c, o, k], each
// output ONE FP32 FMA chain in (c, i) order from +0, then one FP32 add of the bias (diffusers runs the module in
// FP32). The CUDA op (src/cuda/ops/conv_transpose1d.cu) runs the same chain per output. Rows are output channels.
// Tested in tests/ref/vae_ops_test.cpp (naive scatter formula in long double, within the chain's error bound).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {
namespace {

// acc[t * stride] = fma(x[t], w, acc[t * stride]) for t < n: one correctly rounded FP32 FMA per element on either
// clone (as conv1d_fp32.cpp's fma_row), so the bytes do not depend on the CPU.
__attribute__((target_clones("arch=haswell", "default"))) void fma_strided(float* acc, int64_t stride, const float* x,
                                                                           float w, int64_t n) {
  for (int64_t t = 0; t < n; ++t) acc[t * stride] = std::fma(x[t], w, acc[t * stride]);
}

}  // namespace

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
    std::vector<float> acc(static_cast<size_t>(lout));
    for (int64_t o = begin; o < end; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t c = 0; c < cin; ++c) {
        const float* xc = row_ptr<const float>(x, c);
        const float* wc = w + (c * cout + o) * k;
        // Taps in descending order: output j = i * stride + kk - padding then meets its inputs i in ascending
        // order, so each output's chain stays in (c, i) order.
        for (int64_t kk = k - 1; kk >= 0; --kk) {
          const int64_t num = padding - kk;  // j >= 0  <=>  i * stride >= num
          const int64_t i0 = std::max<int64_t>(0, num <= 0 ? 0 : (num + stride - 1) / stride);
          const int64_t hi = lout - 1 + padding - kk;  // j < lout  <=>  i * stride <= hi
          if (hi < 0) continue;
          const int64_t i1 = std::min<int64_t>(l - 1, hi / stride);
          if (i1 >= i0) fma_strided(acc.data() + (i0 * stride + kk - padding), stride, xc + i0, wc[kk], i1 - i0 + 1);
        }
      }
      float* orow = row_ptr<float>(out, o);
      const float b = bias ? bias->data<float>()[o] : 0.0f;
      for (int64_t t = 0; t < lout; ++t) {
        volatile float sum = acc[static_cast<size_t>(t)] + b;  // one FP32 rounding, never contracted
        orow[t] = sum;
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
