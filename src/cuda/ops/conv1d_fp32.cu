// conv1d_fp32: the audio decoder's stride-1 dilated 1-D convolution of a channel-major FP32 signal or a [B, C, L]
// stack of them (grid z), with FP32 accumulation. Program: each output is ONE FP32 FMA chain over (input channel,
// tap) in ascending order from +0, then fp32(acc + bias) — src/ref/conv1d_fp32.cpp's, so the bytes are the
// reference's (taps in the zero padding multiply a zero in, which leaves the chain unchanged for finite weights).
// Kernel: a 256-thread block computes a [kTy * kTo output channels] x [(256 / kTy) * kTt positions] tile, each thread
// a kTo x kTt register tile; input channels are staged a chunk at a time in shared memory (the signal window with its
// dilated halo, the weights transposed to [c, tap, o]). The tile shape follows Cout and the grid size (host side).
#include <algorithm>

#include "cuda/ops/audio_decoder_ops.h"
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSmemFloats = 48 * 1024 / 4;

template <int kTy, int kTo>
struct WeightRow {  // shared-memory row stride of the transposed weights: float4-aligned when kTo % 4 == 0
  static constexpr int kBo = kTy * kTo;
  static constexpr int value = kTo % 4 == 0 ? kBo + 4 : kBo + 1;
};

template <int kTy, int kTo, int kTt>
__global__ void __launch_bounds__(kThreads, 2)
    conv1d_fp32_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ w,
                       const float* __restrict__ bias, float* __restrict__ out, int64_t ldo, int cin, int l, int cout,
                       int lout, int k, int dilation, int padding, int cc_chunk, int xs_floats, int64_t x_batch_stride,
                       int64_t out_batch_stride) {
  constexpr int kTx = kThreads / kTy;
  constexpr int kBo = kTy * kTo, kBt = kTx * kTt;
  constexpr int kWs = WeightRow<kTy, kTo>::value;
  x += blockIdx.z * x_batch_stride;  // signal blockIdx.z of a [B, C, L] stack
  out += blockIdx.z * out_batch_stride;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int span = kBt + (k - 1) * dilation;  // input positions one tile reads per channel
  float* xs = smem;                           // [cc_chunk, span]
  float* ws = smem + xs_floats;               // [cc_chunk * k, kWs], xs_floats % 4 == 0
  const int tx = threadIdx.x % kTx, ty = threadIdx.x / kTx;
  const int t_blk = blockIdx.x * kBt, o_blk = blockIdx.y * kBo;
  float acc[kTo][kTt];
#pragma unroll
  for (int i = 0; i < kTo; ++i)
#pragma unroll
    for (int j = 0; j < kTt; ++j) acc[i][j] = 0.0f;
  for (int c0 = 0; c0 < cin; c0 += cc_chunk) {
    const int cc_n = min(cc_chunk, cin - c0);
    __syncthreads();  // the previous chunk's reads are done
    for (int idx = threadIdx.x; idx < cc_n * span; idx += kThreads) {
      const int cc = idx / span, p = idx % span;
      const int64_t src = static_cast<int64_t>(t_blk) - padding + p;
      xs[cc * span + p] = (src >= 0 && src < l) ? x[static_cast<int64_t>(c0 + cc) * ldx + src] : 0.0f;
    }
    const int per_o = cc_n * k;  // w[o, c0 : c0 + cc_n, :] is contiguous
    for (int idx = threadIdx.x; idx < kBo * per_o; idx += kThreads) {
      const int oo = idx / per_o, rem = idx % per_o;
      const int o = o_blk + oo;
      ws[rem * kWs + oo] = o < cout ? w[(static_cast<int64_t>(o) * cin + c0) * k + rem] : 0.0f;
    }
    __syncthreads();
    for (int cc = 0; cc < cc_n; ++cc) {
      const float* xc = xs + cc * span + tx;
      const float* wc = ws + cc * k * kWs + ty * kTo;
      for (int kk = 0; kk < k; ++kk) {
        float wv[kTo], xv[kTt];
        if constexpr (kTo % 4 == 0) {
#pragma unroll
          for (int i = 0; i < kTo; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(wc + kk * kWs + i);
            wv[i] = v.x, wv[i + 1] = v.y, wv[i + 2] = v.z, wv[i + 3] = v.w;
          }
        } else {
#pragma unroll
          for (int i = 0; i < kTo; ++i) wv[i] = wc[kk * kWs + i];
        }
#pragma unroll
        for (int j = 0; j < kTt; ++j) xv[j] = xc[kk * dilation + kTx * j];
#pragma unroll
        for (int i = 0; i < kTo; ++i)
#pragma unroll
          for (int j = 0; j < kTt; ++j) acc[i][j] = __fmaf_rn(wv[i], xv[j], acc[i][j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kTo; ++i) {
    const int o = o_blk + ty * kTo + i;
    if (o >= cout) continue;
    const float b = bias ? bias[o] : 0.0f;
#pragma unroll
    for (int j = 0; j < kTt; ++j) {
      const int t = t_blk + tx + kTx * j;
      if (t < lout) out[static_cast<int64_t>(o) * ldo + t] = __fadd_rn(acc[i][j], b);
    }
  }
}

template <int kTy, int kTo, int kTt>
Status launch(const BatchedRows& xb, const float* w, const float* bias, const BatchedRows& ob, int k, int dilation,
              int padding, cudaStream_t stream) {
  const RowView &xv = xb.first, &ov = ob.first;
  constexpr int kTx = kThreads / kTy;
  constexpr int kBo = kTy * kTo, kBt = kTx * kTt;
  constexpr int kWs = WeightRow<kTy, kTo>::value;
  const int64_t span = kBt + static_cast<int64_t>(k - 1) * dilation;
  auto xs_floats = [&](int64_t cc) { return (cc * span + 3) / 4 * 4; };
  auto floats_for = [&](int64_t cc) { return xs_floats(cc) + cc * k * kWs; };
  int64_t cc = 16;
  while (cc > 1 && floats_for(cc) > kSmemFloats) --cc;
  if (floats_for(cc) > kSmemFloats)
    return unsupported("conv1d_fp32: kernel size " + std::to_string(k) + " with dilation " + std::to_string(dilation) +
                       " needs more shared memory than a block has");
  const int64_t gx = (ov.cols + kBt - 1) / kBt, gy = (ov.rows + kBo - 1) / kBo;
  if (gy > 65535 || gx > kMaxGridX) return invalid_argument("conv1d_fp32: output too large for one launch");
  conv1d_fp32_kernel<kTy, kTo, kTt>
      <<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(xb.batch)), kThreads,
         static_cast<size_t>(floats_for(cc)) * sizeof(float), stream>>>(
          static_cast<const float*>(xv.ptr), xv.ld, w, bias, static_cast<float*>(ov.ptr), ov.ld,
          static_cast<int>(xv.rows), static_cast<int>(xv.cols), static_cast<int>(ov.rows), static_cast<int>(ov.cols), k,
          dilation, padding, static_cast<int>(cc), static_cast<int>(xs_floats(cc)), xb.batch_stride, ob.batch_stride);
  VORTEX_CUDA_LAUNCH_CHECK("conv1d_fp32_kernel");
  return Status::Ok();
}

int64_t tiles(int64_t batch, int64_t cout, int64_t lout, int64_t bo, int64_t bt) {
  return batch * ((cout + bo - 1) / bo) * ((lout + bt - 1) / bt);
}

}  // namespace

Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
                   cudaStream_t stream) {
  if (dilation < 1 || padding < 0) return invalid_argument("conv1d_fp32: dilation must be >= 1 and padding >= 0");
  VORTEX_ASSIGN_OR_RETURN(BatchedRows xb, vae_batched_rows(x, "conv1d_fp32 x", DType::kF32, -1, -1));
  const RowView& xv = xb.first;
  if (!weight.defined() || weight.device() != Device::kCuda || weight.ndim() != 3 || weight.dtype() != DType::kF32 ||
      !weight.is_contiguous())
    return invalid_argument("conv1d_fp32: weight must be a contiguous device [Cout, Cin, K] f32 tensor, got " +
                            (weight.defined() ? weight.describe() : std::string("undefined")));
  const int64_t cin = xv.rows, l = xv.cols, cout = weight.dim(0), k = weight.dim(2);
  if (weight.dim(1) != cin)
    return invalid_argument("conv1d_fp32: weight " + weight.describe() + " does not take " + std::to_string(cin) +
                            " input channels");
  if (k < 1) return invalid_argument("conv1d_fp32: empty kernel");
  const int64_t lout = l + 2 * static_cast<int64_t>(padding) - static_cast<int64_t>(dilation) * (k - 1);
  if (lout <= 0)
    return invalid_argument("conv1d_fp32: the signal (" + std::to_string(l) +
                            " samples) is shorter than the kernel span");
  if (l + 2 * static_cast<int64_t>(padding) > INT32_MAX || k * dilation > INT32_MAX / 2)
    return invalid_argument("conv1d_fp32: signal longer than 2^31 - 1 samples");
  VORTEX_ASSIGN_OR_RETURN(BatchedRows ob, vae_batched_rows(out, "conv1d_fp32 out", DType::kF32, cout, lout));
  if (ob.batch != xb.batch)
    return invalid_argument("conv1d_fp32: x " + x.describe() + " and out " + out.describe() +
                            " hold different batches");
  const float* bp = nullptr;
  if (bias) {
    VORTEX_ASSIGN_OR_RETURN(const void* b, device_vector(*bias, cout, DType::kF32, "conv1d_fp32 bias"));
    bp = static_cast<const float*>(b);
  }
  VORTEX_RETURN_IF_ERROR(expect_disjoint(xb.all, ob.all, "conv1d_fp32"));
  if (cout == 0) return Status::Ok();
  const float* wp = static_cast<const float*>(weight.raw_data());
  const int ki = static_cast<int>(k);
  // Tile rows follow Cout (the late stages are 32 / 16 / 8 channels wide, conv_post 1); wide layers take 128 x 128
  // tiles when the grid still fills two waves of the GPU's SMs, else 64 x 64.
  if (cout >= 128) {
    static const int sms = [] {  // of the first device asked (the GPUs of one host are one model)
      int dev = 0, n = 0;
      if (cudaGetDevice(&dev) != cudaSuccess ||
          cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
        n = 132;  // an H100 / H200
      return n;
    }();
    if (tiles(xb.batch, cout, lout, 128, 128) >= 2 * sms)
      return launch<16, 8, 8>(xb, wp, bp, ob, ki, dilation, padding, stream);
    return launch<16, 4, 4>(xb, wp, bp, ob, ki, dilation, padding, stream);
  }
  if (cout >= 64) return launch<16, 4, 4>(xb, wp, bp, ob, ki, dilation, padding, stream);
  if (cout >= 32) return launch<8, 4, 8>(xb, wp, bp, ob, ki, dilation, padding, stream);
  if (cout >= 16) return launch<4, 4, 4>(xb, wp, bp, ob, ki, dilation, padding, stream);
  if (cout >= 2) return launch<2, 4, 4>(xb, wp, bp, ob, ki, dilation, padding, stream);
  return launch<1, 1, 4>(xb, wp, bp, ob, ki, dilation, padding, stream);
}

}  // namespace vortex::cuda_ops
