// conv1d_strided: strided, dilated 1-D convolution of [B, Cin, L] f32 stacks (the audio VAE encoder's
// channel-doubling downsampling). Program: src/ref/conv1d_strided.cpp's — each output ONE FP64 chain over
// (input channel, tap) ascending, skipping taps outside the signal, plus the bias, rounded once to FP32. A product of
// two FP32 values is exact in FP64, so the DFMA equals the reference's multiply-then-add: E0. Kernel: one thread per
// output position, a block per (position tile, output channel, signal); the output channel's weights are read by
// every thread of the block (one broadcast load). Tested in tests/cuda/audio_encoder_ops_test.cpp.
#include "cuda/ops/audio_encoder_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    conv1d_strided_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                          float* __restrict__ out, int cin, int l, int cout, int lout, int k, int stride, int dilation,
                          int padding) {
  const int t = blockIdx.x * kThreads + threadIdx.x, o = blockIdx.y, b = blockIdx.z;
  if (t >= lout) return;
  const float* xb = x + static_cast<int64_t>(b) * cin * l;
  const float* wo = w + static_cast<int64_t>(o) * cin * k;
  const int64_t start = static_cast<int64_t>(t) * stride - padding;
  double acc = 0.0;
  for (int c = 0; c < cin; ++c) {
    const float* xc = xb + static_cast<int64_t>(c) * l;
    for (int kk = 0; kk < k; ++kk) {
      const int64_t i = start + static_cast<int64_t>(kk) * dilation;
      if (i >= 0 && i < l) acc = __fma_rn(static_cast<double>(__ldg(wo + c * k + kk)), static_cast<double>(xc[i]), acc);
    }
  }
  out[(static_cast<int64_t>(b) * cout + o) * lout + t] =
      __double2float_rn(__dadd_rn(acc, static_cast<double>(bias[o])));
}

}  // namespace

Status conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation, int padding,
                      Tensor& out, cudaStream_t stream) {
  if (stride < 1 || dilation < 1 || padding < 0)
    return invalid_argument("conv1d_strided: stride and dilation must be >= 1, padding >= 0");
  VORTEX_RETURN_IF_ERROR(ref::check_f32(x, "conv1d_strided x", {-1, -1, -1}, Device::kCuda));
  VORTEX_RETURN_IF_ERROR(ref::check_f32(weight, "conv1d_strided weight", {-1, x.dim(1), -1}, Device::kCuda));
  const int64_t b_n = x.dim(0), cin = x.dim(1), l = x.dim(2), cout = weight.dim(0), k = weight.dim(2);
  const int64_t lout = k < 1 ? 0 : (l + 2 * padding - static_cast<int64_t>(dilation) * (k - 1) - 1) / stride + 1;
  if (k < 1 || lout <= 0)
    return invalid_argument("conv1d_strided: the signal (" + std::to_string(l) +
                            " samples) is shorter than the kernel span");
  if (l + 2 * static_cast<int64_t>(padding) > INT32_MAX || cin * k > INT32_MAX)
    return invalid_argument("conv1d_strided: signal or kernel beyond 2^31 - 1 elements");
  VORTEX_RETURN_IF_ERROR(ref::check_f32(bias, "conv1d_strided bias", {cout}, Device::kCuda));
  VORTEX_RETURN_IF_ERROR(ref::check_f32(out, "conv1d_strided out", {b_n, cout, lout}, Device::kCuda));
  VORTEX_RETURN_IF_ERROR(expect_apart(x, out, "conv1d_strided"));
  if (b_n == 0 || cout == 0) return Status::Ok();
  if (cout > 65535 || b_n > 65535) return invalid_argument("conv1d_strided: more than 65535 channels or signals");
  const dim3 grid(static_cast<unsigned>((lout + kThreads - 1) / kThreads), static_cast<unsigned>(cout),
                  static_cast<unsigned>(b_n));
  conv1d_strided_kernel<<<grid, kThreads, 0, stream>>>(x.data<float>(), weight.data<float>(), bias.data<float>(),
                                                       out.data<float>(), static_cast<int>(cin), static_cast<int>(l),
                                                       static_cast<int>(cout), static_cast<int>(lout),
                                                       static_cast<int>(k), stride, dilation, padding);
  VORTEX_CUDA_LAUNCH_CHECK("conv1d_strided_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
