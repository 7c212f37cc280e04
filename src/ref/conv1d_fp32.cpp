// Reference FP32 1-D convolution of the audio decoder (stride 1, dilation, symmetric zero padding): each output is
// ONE FP32 fused-multiply-add chain over (input channel, tap) in ascending order starting from +0, then one FP32 add
// of the bias. The CUDA kernel (src/cuda/ops/conv1d_fp32.cu) runs the same chain per output, so the two agree byte
// for byte. Tested in tests/ref/audio_decoder_ops_test.cpp (against an FP64 formula within the FP32 chain's error
// bound).
#include <cmath>
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {
namespace {

// acc[t] = fma(w, x[t], acc[t]) for t < n: one correctly rounded FP32 FMA per element on either clone (the
// haswell clone vectorizes it; the default one calls libm's fmaf), so the bytes do not depend on the CPU.
__attribute__((target_clones("arch=haswell", "default"))) void fma_row(float* acc, const float* x, float w, int64_t n) {
  for (int64_t t = 0; t < n; ++t) acc[t] = std::fma(w, x[t], acc[t]);
}

}  // namespace

Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
                   const RowRunner& run) {
  if (x.defined() && x.ndim() == 3)  // [B, Cin, L] -> [B, Cout, Lout]: each signal on its own
    return for_each_signal("conv1d_fp32", x, out, [&](const Tensor& xb, Tensor& ob) {
      return conv1d_fp32(xb, weight, bias, dilation, padding, ob, run);
    });
  if (!x.defined() || x.ndim() != 2)
    return invalid_argument("conv1d_fp32: x must be 2-D [Cin, L] f32, got " + x.describe());
  if (!weight.defined() || weight.ndim() != 3 || weight.dtype() != DType::kF32 || !weight.is_contiguous())
    return invalid_argument("conv1d_fp32: weight must be a contiguous [Cout, Cin, K] f32 tensor, got " +
                            weight.describe());
  if (dilation < 1 || padding < 0) return invalid_argument("conv1d_fp32: dilation must be >= 1 and padding >= 0");
  const int64_t cin = x.dim(0), l = x.dim(1), cout = weight.dim(0), k = weight.dim(2);
  if (weight.dim(1) != cin)
    return invalid_argument("conv1d_fp32: weight " + weight.describe() + " does not take " + std::to_string(cin) +
                            " input channels");
  if (k < 1) return invalid_argument("conv1d_fp32: empty kernel");
  const int64_t lout = conv1d_out_length(l, k, dilation, padding);
  if (lout <= 0)
    return invalid_argument("conv1d_fp32: the signal (" + std::to_string(l) +
                            " samples) is shorter than the kernel span");
  VORTEX_RETURN_IF_ERROR(check_rows(x, "conv1d_fp32 x", DType::kF32, cin, l));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "conv1d_fp32 out", DType::kF32, cout, lout));
  if (bias && (!bias->defined() || bias->dtype() != DType::kF32 || bias->numel() != cout || !bias->is_contiguous()))
    return invalid_argument("conv1d_fp32: bias must be a contiguous [" + std::to_string(cout) + "] f32 tensor, got " +
                            bias->describe());
  const float* w = weight.data<float>();
  run(cout, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(lout));
    for (int64_t o = begin; o < end; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      // Loop order (c, k, t) keeps every output's chain in (c, k) order while the inner loop runs over t. Taps in
      // the zero padding are skipped: fma(w, 0, acc) == acc for finite w, since acc is never -0 (it starts at +0
      // and +0 + -0 rounds to +0).
      for (int64_t c = 0; c < cin; ++c) {
        const float* xc = row_ptr<const float>(x, c);
        for (int64_t kk = 0; kk < k; ++kk) {
          const float wv = w[(o * cin + c) * k + kk];
          const int64_t shift = kk * dilation - padding;  // input index = t + shift
          const int64_t t0 = std::max<int64_t>(0, -shift), t1 = std::min<int64_t>(lout, l - shift);
          if (t1 > t0) fma_row(acc.data() + t0, xc + t0 + shift, wv, t1 - t0);
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

Status conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                            const Tensor& residual, Tensor& out, const RowRunner& run) {
  if (!out.defined() || !residual.defined() || residual.shape() != out.shape() || residual.dtype() != DType::kF32)
    return invalid_argument("conv1d_fp32_residual: residual must be an f32 tensor of out's shape, got " +
                            (residual.defined() ? residual.describe() : std::string("undefined")) + " for out " +
                            (out.defined() ? out.describe() : std::string("undefined")));
  if (residual.raw_data() == x.raw_data())
    return invalid_argument("conv1d_fp32_residual: the residual must not be the convolution's input");
  Tensor conv = Tensor::empty(out.shape(), DType::kF32);  // [.., Cout, Lout] f32
  VORTEX_RETURN_IF_ERROR(conv1d_fp32(x, weight, bias, dilation, padding, conv, run));
  // [rows, Lout] views of the three (3-D stacks are contiguous; 2-D views keep their row strides).
  auto rows = [](const Tensor& t) -> Result<Tensor> {
    if (t.ndim() == 3) return t.reshape({t.dim(0) * t.dim(1), t.dim(2)});
    return t;  // a handle on the same storage
  };
  VORTEX_ASSIGN_OR_RETURN(Tensor c2, rows(conv));
  VORTEX_ASSIGN_OR_RETURN(Tensor r2, rows(residual));
  VORTEX_ASSIGN_OR_RETURN(Tensor o2, rows(out));
  VORTEX_RETURN_IF_ERROR(check_rows(r2, "conv1d_fp32_residual residual", DType::kF32, o2.dim(0), o2.dim(1)));
  for (int64_t r = 0; r < o2.dim(0); ++r) {
    const float* cr = row_ptr<const float>(c2, r);
    const float* rr = row_ptr<const float>(r2, r);
    float* orow = row_ptr<float>(o2, r);
    for (int64_t t = 0; t < o2.dim(1); ++t) {
      volatile float sum = cr[t] + rr[t];  // fp32(conv + residual), as add() rounds it
      orow[t] = sum;
    }
  }
  return Status::Ok();
}

}  // namespace vortex::ref
