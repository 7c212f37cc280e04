// conv_transpose1d: the audio VAE's transposed-convolution upsamplers in FP32, each output ONE FP32 FMA chain in the
// reference's (input channel, input position) order from +0, then fp32(acc + bias): E0 vs
// src/ref/conv_transpose1d.cpp. The work runs on conv1d_fp32's tiled kernel as `stride` phase convolutions
// (src/cuda/ops/conv1d_fp32.cu, conv_transpose1d_fp32_launch); this file is the op's validating entry point.
// Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/audio_decoder_ops.h"
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {

Status conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding, Tensor& out,
                        cudaStream_t stream) {
  if (stride < 1 || padding < 0) return invalid_argument("conv_transpose1d: stride must be >= 1 and padding >= 0");
  VORTEX_ASSIGN_OR_RETURN(BatchedRows xb, vae_batched_rows(x, "conv_transpose1d x", DType::kF32, -1, -1));
  const RowView& xv = xb.first;
  if (!weight.defined() || weight.device() != Device::kCuda || weight.ndim() != 3 || weight.dtype() != DType::kF32 ||
      !weight.is_contiguous())
    return invalid_argument("conv_transpose1d: weight must be a contiguous device [Cin, Cout, K] f32 tensor, got " +
                            (weight.defined() ? weight.describe() : std::string("undefined")));
  const int64_t cin = xv.rows, l = xv.cols, cout = weight.dim(1), k = weight.dim(2);
  if (weight.dim(0) != cin)
    return invalid_argument("conv_transpose1d: weight " + weight.describe() + " does not take " + std::to_string(cin) +
                            " input channels");
  const int64_t lout = (l - 1) * stride - 2 * static_cast<int64_t>(padding) + k;
  if (l <= 0 || lout <= 0 || k <= 0) return invalid_argument("conv_transpose1d: empty output for " + x.describe());
  if (lout > INT32_MAX || static_cast<int64_t>(l) * stride + padding > INT32_MAX)
    return invalid_argument("conv_transpose1d: signal longer than 2^31 - 1 samples");
  VORTEX_ASSIGN_OR_RETURN(BatchedRows ob, vae_batched_rows(out, "conv_transpose1d out", DType::kF32, cout, lout));
  const RowView& ov = ob.first;
  if (ob.batch != xb.batch)
    return invalid_argument("conv_transpose1d: x " + x.describe() + " and out " + out.describe() +
                            " hold different batches");
  const float* bp = nullptr;
  if (bias) {
    VORTEX_ASSIGN_OR_RETURN(const void* b, device_vector(*bias, cout, DType::kF32, "conv_transpose1d bias"));
    bp = static_cast<const float*>(b);
  }
  VORTEX_RETURN_IF_ERROR(expect_disjoint(xb.all, ob.all, "conv_transpose1d"));
  if (cout == 0) return Status::Ok();
  ConvTransposeLaunch a{};
  a.x = static_cast<const float*>(xv.ptr);
  a.w = static_cast<const float*>(weight.raw_data());
  a.bias = bp;
  a.out = static_cast<float*>(ov.ptr);
  a.ldx = xv.ld, a.ldo = ov.ld, a.x_batch_stride = xb.batch_stride, a.out_batch_stride = ob.batch_stride;
  a.batch = static_cast<int>(xb.batch), a.cin = static_cast<int>(cin), a.l = static_cast<int>(l);
  a.cout = static_cast<int>(cout), a.k = static_cast<int>(k), a.stride = stride, a.padding = padding;
  a.lout = static_cast<int>(lout);
  return conv_transpose1d_fp32_launch(a, stream);
}

}  // namespace vortex::cuda_ops
