// conv1d: stride-1 dilated 1-D convolution of a channel-major FP32 signal or a [B, C, L] stack of them (grid z; the
// audio VAE's two stereo channels) (dec_in_proj, conv_pre, AMP convs and conv_post). Program: each output is ONE FP64
// chain over (input channel, tap) in ascending order plus the bias, rounded once to FP32 — src/ref/conv1d.cpp's. A
// product of two FP32 values is exact in FP64, so the DFMA equals the reference's multiply-then-add and the result is
// E0 (for finite weights: the zero padding is multiplied in where the reference skips the tap, which adds +-0 to the
// chain). Kernel: a 256-thread block computes a [16 * kTo output channels] x [16 * kTt positions] tile, each thread a
// kTo x kTt register tile; input channels are staged kCc at a time into shared memory as FP64 (the signal
// window with its dilated halo, and the weights transposed to [c, tap, o]). Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kConvThreads = 256;  // 16 (positions) x 16 (output-channel groups)
constexpr size_t kConvSmemLimit = 48 * 1024;

template <int kTo, int kTt>
__global__ void __launch_bounds__(kConvThreads)
    conv1d_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ w, const float* __restrict__ bias,
                  float* __restrict__ out, int64_t ldo, int cin, int l, int cout, int lout, int k, int dilation,
                  int padding, int cc_chunk, int64_t x_batch_stride, int64_t out_batch_stride) {
  x += blockIdx.z * x_batch_stride;  // signal blockIdx.z of a [B, C, L] stack
  out += blockIdx.z * out_batch_stride;
  constexpr int kBo = 16 * kTo, kBt = 16 * kTt;
  constexpr int kWs = kBo + 1;  // padded weight row: the transposing stores hit distinct banks
  extern __shared__ double smem[];
  const int span = kBt + (k - 1) * dilation;  // input positions one tile reads per channel
  double* xs = smem;                          // [cc_chunk, span]
  double* ws = smem + cc_chunk * span;        // [cc_chunk * k, kWs]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int t_blk = blockIdx.x * kBt, o_blk = blockIdx.y * kBo;
  double acc[kTo][kTt];
#pragma unroll
  for (int i = 0; i < kTo; ++i)
#pragma unroll
    for (int j = 0; j < kTt; ++j) acc[i][j] = 0.0;
  for (int c0 = 0; c0 < cin; c0 += cc_chunk) {
    const int cc_n = min(cc_chunk, cin - c0);
    __syncthreads();  // the previous chunk's reads are done
    for (int idx = threadIdx.x; idx < cc_n * span; idx += kConvThreads) {
      const int cc = idx / span, p = idx % span;
      const int64_t src = static_cast<int64_t>(t_blk) - padding + p;
      const float v = (src >= 0 && src < l) ? x[static_cast<int64_t>(c0 + cc) * ldx + src] : 0.0f;
      xs[cc * span + p] = static_cast<double>(v);
    }
    const int per_o = cc_n * k;  // w[o, c0 : c0 + cc_n, :] is contiguous
    for (int idx = threadIdx.x; idx < kBo * per_o; idx += kConvThreads) {
      const int oo = idx / per_o, rem = idx % per_o;
      const int o = o_blk + oo;
      const float v = o < cout ? w[(static_cast<int64_t>(o) * cin + c0) * k + rem] : 0.0f;
      ws[rem * kWs + oo] = static_cast<double>(v);
    }
    __syncthreads();
    for (int cc = 0; cc < cc_n; ++cc) {
      const double* xc = xs + cc * span + tx;
      const double* wc = ws + cc * k * kWs + ty * kTo;
      for (int kk = 0; kk < k; ++kk) {
        double wv[kTo], xv[kTt];
#pragma unroll
        for (int i = 0; i < kTo; ++i) wv[i] = wc[kk * kWs + i];
#pragma unroll
        for (int j = 0; j < kTt; ++j) xv[j] = xc[kk * dilation + 16 * j];
#pragma unroll
        for (int i = 0; i < kTo; ++i)
#pragma unroll
          for (int j = 0; j < kTt; ++j) acc[i][j] = __fma_rn(wv[i], xv[j], acc[i][j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kTo; ++i) {
    const int o = o_blk + ty * kTo + i;
    if (o >= cout) continue;
    const double b = bias ? static_cast<double>(bias[o]) : 0.0;
#pragma unroll
    for (int j = 0; j < kTt; ++j) {
      const int t = t_blk + tx + 16 * j;
      if (t < lout) out[static_cast<int64_t>(o) * ldo + t] = __double2float_rn(__dadd_rn(acc[i][j], b));
    }
  }
}

template <int kTo, int kTt>
Status launch_conv1d(const BatchedRows& xb, const float* w, const float* bias, const BatchedRows& ob, int k,
                     int dilation, int padding, cudaStream_t stream) {
  const RowView &xv = xb.first, &ov = ob.first;
  constexpr int kBo = 16 * kTo, kBt = 16 * kTt;
  const int64_t span = kBt + static_cast<int64_t>(k - 1) * dilation;
  auto smem_for = [&](int64_t cc) { return static_cast<size_t>(cc * span + cc * k * (kBo + 1)) * sizeof(double); };
  int cc = 8;
  while (cc > 1 && smem_for(cc) > kConvSmemLimit) cc /= 2;
  if (smem_for(cc) > kConvSmemLimit)
    return unsupported("conv1d: kernel size " + std::to_string(k) + " with dilation " + std::to_string(dilation) +
                       " needs more shared memory than a block has");
  const int64_t gx = (ov.cols + kBt - 1) / kBt, gy = (ov.rows + kBo - 1) / kBo;
  if (gy > 65535 || gx > kMaxGridX) return invalid_argument("conv1d: output too large for one launch");
  conv1d_kernel<kTo, kTt>
      <<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(xb.batch)), kConvThreads,
         smem_for(cc), stream>>>(static_cast<const float*>(xv.ptr), xv.ld, w, bias, static_cast<float*>(ov.ptr), ov.ld,
                                 static_cast<int>(xv.rows), static_cast<int>(xv.cols), static_cast<int>(ov.rows),
                                 static_cast<int>(ov.cols), k, dilation, padding, cc, xb.batch_stride, ob.batch_stride);
  VORTEX_CUDA_LAUNCH_CHECK("conv1d_kernel");
  return Status::Ok();
}

}  // namespace

Status conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
              cudaStream_t stream) {
  if (dilation < 1 || padding < 0) return invalid_argument("conv1d: dilation must be >= 1 and padding >= 0");
  VORTEX_ASSIGN_OR_RETURN(BatchedRows xb, vae_batched_rows(x, "conv1d x", DType::kF32, -1, -1));
  const RowView& xv = xb.first;
  if (!weight.defined() || weight.device() != Device::kCuda || weight.ndim() != 3 || weight.dtype() != DType::kF32 ||
      !weight.is_contiguous())
    return invalid_argument("conv1d: weight must be a contiguous device [Cout, Cin, K] f32 tensor, got " +
                            (weight.defined() ? weight.describe() : std::string("undefined")));
  const int64_t cin = xv.rows, l = xv.cols, cout = weight.dim(0), k = weight.dim(2);
  if (weight.dim(1) != cin)
    return invalid_argument("conv1d: weight " + weight.describe() + " does not take " + std::to_string(cin) +
                            " input channels");
  if (k < 1) return invalid_argument("conv1d: empty kernel");
  const int64_t lout = l + 2 * static_cast<int64_t>(padding) - static_cast<int64_t>(dilation) * (k - 1);
  if (lout <= 0)
    return invalid_argument("conv1d: the signal (" + std::to_string(l) + " samples) is shorter than the kernel span");
  if (l + 2 * static_cast<int64_t>(padding) > INT32_MAX)
    return invalid_argument("conv1d: signal longer than 2^31 - 1 samples");
  VORTEX_ASSIGN_OR_RETURN(BatchedRows ob, vae_batched_rows(out, "conv1d out", DType::kF32, cout, lout));
  if (ob.batch != xb.batch)
    return invalid_argument("conv1d: x " + x.describe() + " and out " + out.describe() + " hold different batches");
  const float* bp = nullptr;
  if (bias) {
    VORTEX_ASSIGN_OR_RETURN(const void* b, device_vector(*bias, cout, DType::kF32, "conv1d bias"));
    bp = static_cast<const float*>(b);
  }
  VORTEX_RETURN_IF_ERROR(expect_disjoint(xb.all, ob.all, "conv1d"));
  if (cout == 0) return Status::Ok();
  const float* wp = static_cast<const float*>(weight.raw_data());
  const int ki = static_cast<int>(k);
  // Narrow layers (the last stages, conv_post) take 16-channel tiles; short signals take 64-position tiles so
  // the grid still covers the GPU (two 128-position waves of 132 SMs need 264 tiles).
  const bool narrow = cout <= 16;
  const int64_t tiles_wide = xb.batch * ((lout + 127) / 128) * ((cout + (narrow ? 15 : 63)) / (narrow ? 16 : 64));
  const bool short_tiles = tiles_wide < 264;
  if (narrow) {
    return short_tiles ? launch_conv1d<1, 4>(xb, wp, bp, ob, ki, dilation, padding, stream)
                       : launch_conv1d<1, 8>(xb, wp, bp, ob, ki, dilation, padding, stream);
  }
  return short_tiles ? launch_conv1d<4, 4>(xb, wp, bp, ob, ki, dilation, padding, stream)
                     : launch_conv1d<4, 8>(xb, wp, bp, ob, ki, dilation, padding, stream);
}

}  // namespace vortex::cuda_ops
