// conv_transpose1d: the audio VAE's transposed-convolution upsamplers. Each thread owns kOutPerThread
// consecutive output channels at one position j and runs each one's FP64 chain in the reference's (input
// channel, input position) order, rounding once to FP32 after the bias: E0 vs src/ref/conv_transpose1d.cpp
// (a product of two FP32 values is exact in FP64, so the DFMA equals the reference's multiply-then-add).
// Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kOutPerThread = 4;

__global__ void __launch_bounds__(kEltThreads)
    conv_transpose1d_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ w,
                            const float* __restrict__ bias, float* __restrict__ out, int64_t ldo, int cin, int l,
                            int cout, int k, int stride, int padding, int lout, int64_t x_batch_stride,
                            int64_t out_batch_stride) {
  x += blockIdx.z * x_batch_stride;  // signal blockIdx.z of a [B, C, L] stack
  out += blockIdx.z * out_batch_stride;
  const int o0 = blockIdx.y * kOutPerThread;
  for (int j = blockIdx.x * kEltThreads + threadIdx.x; j < lout; j += gridDim.x * kEltThreads) {
    // Inputs i with 0 <= j + padding - i * stride < k, ascending.
    const int hi_num = j + padding;  // >= 0
    const int lo_num = hi_num - (k - 1);
    const int i_lo = lo_num <= 0 ? 0 : (lo_num + stride - 1) / stride;
    const int i_hi = min(l - 1, hi_num / stride);
    double acc[kOutPerThread];
#pragma unroll
    for (int q = 0; q < kOutPerThread; ++q) acc[q] = 0.0;
    for (int c = 0; c < cin; ++c) {
      const float* xc = x + static_cast<int64_t>(c) * ldx;
      const float* wc = w + (static_cast<int64_t>(c) * cout + o0) * k;  // w[c, o0 + q, kk] = wc[q * k + kk]
      for (int i = i_lo; i <= i_hi; ++i) {
        const double xv = static_cast<double>(__ldg(xc + i));
        const int kk = hi_num - i * stride;
#pragma unroll
        for (int q = 0; q < kOutPerThread; ++q)
          if (o0 + q < cout) acc[q] = __fma_rn(xv, static_cast<double>(__ldg(wc + q * k + kk)), acc[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < kOutPerThread; ++q) {
      const int o = o0 + q;
      if (o >= cout) break;
      const double b = bias ? static_cast<double>(bias[o]) : 0.0;
      out[static_cast<int64_t>(o) * ldo + j] = __double2float_rn(__dadd_rn(acc[q], b));
    }
  }
}

}  // namespace

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
  const int64_t gy = (cout + kOutPerThread - 1) / kOutPerThread;
  if (gy > 65535)
    return invalid_argument("conv_transpose1d: more than " + std::to_string(65535 * kOutPerThread) +
                            " output channels");
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((lout + kEltThreads - 1) / kEltThreads, 1 << 20)),
                  static_cast<unsigned>(gy), static_cast<unsigned>(xb.batch));
  conv_transpose1d_kernel<<<grid, kEltThreads, 0, stream>>>(
      static_cast<const float*>(xv.ptr), xv.ld, static_cast<const float*>(weight.raw_data()), bp,
      static_cast<float*>(ov.ptr), ov.ld, static_cast<int>(cin), static_cast<int>(l), static_cast<int>(cout),
      static_cast<int>(k), stride, padding, static_cast<int>(lout), xb.batch_stride, ob.batch_stride);
  VORTEX_CUDA_LAUNCH_CHECK("conv_transpose1d_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
