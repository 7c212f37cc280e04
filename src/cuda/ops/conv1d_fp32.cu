// conv1d_fp32: the audio decoder's stride-1 dilated 1-D convolution of a channel-major FP32 signal or a [B, C, L]
// stack of them (grid z), with FP32 accumulation; and its FP32 transposed convolution, run on the same kernel as
// `stride` phase convolutions. Program: each output is ONE FP32 FMA chain over (input channel, tap) in ascending
// order from +0, then fp32(acc + bias) — src/ref/conv1d_fp32.cpp's and src/ref/conv_transpose1d.cpp's, so the bytes
// are the reference's (taps in the zero padding, and a transposed phase's missing taps, multiply a zero in, which
// leaves the chain unchanged for finite operands). Kernel: a 256-thread block computes a [kTy * kTo output channels]
// x [(256 / kTy) * kTt positions] tile, each thread a kTo x kTt register tile; input channels are staged a chunk at a
// time in shared memory (the signal window with its dilated halo, the weights transposed to [c, tap, o]).
#include <algorithm>

#include "cuda/ops/audio_decoder_ops.h"
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int64_t kSmemFloats = 48 * 1024 / 4;

// One launch. Position t of (batch b, phase p) is output column t * phases + p - ooff of batch b, written when in
// [0, out_cols); conv1d is phases = 1, ooff = 0, out_cols = lout. Tap u of position t reads input t - padding +
// u * dilation (zero outside [0, l)). Transposed (kTransposed): tap u of phase p is w[c, o, (k - 1 - u) * phases + p]
// of w [Cin, Cout, wk] (zero when >= wk), i.e. the inputs of the output in ascending order.
struct ConvArgs {
  const float *x, *w, *bias;
  const float* res;  // residual added in the epilogue (null: none); may be out itself
  float* out;
  int64_t ldx, ldo, x_batch_stride, out_batch_stride, ldr, res_batch_stride;
  int cin, l, cout, lout, k, dilation, padding;
  int phases, wk, ooff, out_cols;
  int cc_chunk, xs_floats;  // set by launch()
};

template <int kTy, int kTo>
struct WeightRow {  // shared-memory row stride of the transposed weights: float4-aligned when kTo % 4 == 0
  static constexpr int kBo = kTy * kTo;
  static constexpr int value = kTo % 4 == 0 ? kBo + 4 : kBo + 1;
};

template <int kTy, int kTo, int kTt, bool kTransposed>
__global__ void __launch_bounds__(kThreads, 2) conv1d_fp32_kernel(const ConvArgs a) {
  constexpr int kTx = kThreads / kTy;
  constexpr int kBo = kTy * kTo, kBt = kTx * kTt;
  constexpr int kWs = WeightRow<kTy, kTo>::value;
  const int bz = static_cast<int>(blockIdx.z) / a.phases, ph = static_cast<int>(blockIdx.z) - bz * a.phases;
  const float* x = a.x + bz * a.x_batch_stride;  // signal bz of a [B, C, L] stack
  float* out = a.out + bz * a.out_batch_stride;
  const float* res = a.res ? a.res + bz * a.res_batch_stride : nullptr;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int k = a.k, dilation = a.dilation;
  const int span = kBt + (k - 1) * dilation;  // input positions one tile reads per channel
  float* xs = smem;                           // [cc_chunk, span]
  float* ws = smem + a.xs_floats;             // [cc_chunk * k, kWs], xs_floats % 4 == 0
  const int tx = threadIdx.x % kTx, ty = threadIdx.x / kTx;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t_blk = blockIdx.x * kBt, o_blk = blockIdx.y * kBo;
  float acc[kTo][kTt];
#pragma unroll
  for (int i = 0; i < kTo; ++i)
#pragma unroll
    for (int j = 0; j < kTt; ++j) acc[i][j] = 0.0f;
  for (int c0 = 0; c0 < a.cin; c0 += a.cc_chunk) {
    const int cc_n = min(a.cc_chunk, a.cin - c0);
    __syncthreads();  // the previous chunk's reads are done
    const int64_t base = static_cast<int64_t>(t_blk) - a.padding;
    for (int cc = warp; cc < cc_n; cc += kWarps) {  // a warp per channel row, lanes along positions
      const float* xr = x + static_cast<int64_t>(c0 + cc) * a.ldx;
      float* xsr = xs + cc * span;
      for (int p = lane; p < span; p += 32) {
        const int64_t src = base + p;
        xsr[p] = (src >= 0 && src < a.l) ? xr[src] : 0.0f;
      }
    }
    const int per_o = cc_n * k;
    for (int oo = warp; oo < kBo; oo += kWarps) {  // a warp per output channel, lanes along (c, tap)
      const int o = o_blk + oo;
      if (o >= a.cout) {
        for (int rem = lane; rem < per_o; rem += 32) ws[rem * kWs + oo] = 0.0f;
        continue;
      }
      if constexpr (!kTransposed) {
        const float* wr = a.w + (static_cast<int64_t>(o) * a.cin + c0) * k;  // w[o, c0 : c0 + cc_n, :] contiguous
        for (int rem = lane; rem < per_o; rem += 32) ws[rem * kWs + oo] = wr[rem];
      } else {
        for (int rem = lane; rem < per_o; rem += 32) {
          const int cc = rem / k, u = rem - cc * k;
          const int kk = (k - 1 - u) * a.phases + ph;
          ws[rem * kWs + oo] = kk < a.wk ? a.w[(static_cast<int64_t>(c0 + cc) * a.cout + o) * a.wk + kk] : 0.0f;
        }
      }
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
    if (o >= a.cout) continue;
    const float b = a.bias ? a.bias[o] : 0.0f;
#pragma unroll
    for (int j = 0; j < kTt; ++j) {
      const int t = t_blk + tx + kTx * j;
      if (t >= a.lout) continue;
      const int col = t * a.phases + ph - a.ooff;
      if (col < 0 || col >= a.out_cols) continue;
      float v = __fadd_rn(acc[i][j], b);
      if (res) v = __fadd_rn(v, res[static_cast<int64_t>(o) * a.ldr + col]);  // read before the write below
      out[static_cast<int64_t>(o) * a.ldo + col] = v;
    }
  }
}

template <int kTy, int kTo, int kTt, bool kTransposed>
Status launch(ConvArgs a, int64_t gz, cudaStream_t stream) {
  constexpr int kTx = kThreads / kTy;
  constexpr int kBo = kTy * kTo, kBt = kTx * kTt;
  constexpr int kWs = WeightRow<kTy, kTo>::value;
  const int64_t span = kBt + static_cast<int64_t>(a.k - 1) * a.dilation;
  auto xs_floats = [&](int64_t cc) { return (cc * span + 3) / 4 * 4; };
  auto floats_for = [&](int64_t cc) { return xs_floats(cc) + cc * a.k * kWs; };
  int64_t cc = 16;
  while (cc > 1 && floats_for(cc) > kSmemFloats) --cc;
  if (floats_for(cc) > kSmemFloats)
    return unsupported("conv1d_fp32: kernel size " + std::to_string(a.k) + " with dilation " +
                       std::to_string(a.dilation) + " needs more shared memory than a block has");
  const int64_t gx = (a.lout + kBt - 1) / kBt, gy = (a.cout + kBo - 1) / kBo;
  if (gy > 65535 || gx > kMaxGridX || gz > 65535)
    return invalid_argument("conv1d_fp32: output too large for one launch");
  a.cc_chunk = static_cast<int>(cc);
  a.xs_floats = static_cast<int>(xs_floats(cc));
  conv1d_fp32_kernel<kTy, kTo, kTt, kTransposed>
      <<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz)), kThreads,
         static_cast<size_t>(floats_for(cc)) * sizeof(float), stream>>>(a);
  VORTEX_CUDA_LAUNCH_CHECK("conv1d_fp32_kernel");
  return Status::Ok();
}

int64_t tiles(int64_t planes, int64_t cout, int64_t lout, int64_t bo, int64_t bt) {
  return planes * ((cout + bo - 1) / bo) * ((lout + bt - 1) / bt);
}

int sm_count() {
  static const int sms = [] {  // of the first device asked (the GPUs of one host are one model)
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
      n = 132;  // an H100 / H200
    return n;
  }();
  return sms;
}

template <bool kTransposed>
Status dispatch(const ConvArgs& a, int64_t planes, Conv1dTile tile, cudaStream_t stream) {
  if (tile == Conv1dTile::kAuto) tile = conv1d_auto_tile(planes, a.cout, a.lout);
  switch (tile) {
    case Conv1dTile::k128x128:
      return launch<16, 8, 8, kTransposed>(a, planes, stream);
    case Conv1dTile::k128x64:
      return launch<16, 8, 4, kTransposed>(a, planes, stream);
    case Conv1dTile::k64x128:
      return launch<8, 8, 4, kTransposed>(a, planes, stream);
    case Conv1dTile::k64x64:
      return launch<16, 4, 4, kTransposed>(a, planes, stream);
    case Conv1dTile::k32x256:
      return launch<8, 4, 8, kTransposed>(a, planes, stream);
    case Conv1dTile::k16x256:
      return launch<4, 4, 4, kTransposed>(a, planes, stream);
    case Conv1dTile::k8x512:
      return launch<2, 4, 4, kTransposed>(a, planes, stream);
    case Conv1dTile::k1x1024:
      return launch<1, 1, 4, kTransposed>(a, planes, stream);
    case Conv1dTile::kAuto:
      break;
  }
  return invalid_argument("conv1d_fp32: unknown tile");
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }  // b > 0

}  // namespace

// Measured on the H200 for every tile and every decoder layer (benchmarks/2026-12-02-h200-audio5): thin tiles with
// many blocks win, since a layer has too few outputs to fill the GPU with 64- or 128-channel tiles. 32 x 256 (4 x 8
// outputs per thread) when the grid fills two waves of the GPU's SMs (stages 1 to 4), else 16 x 256 (4 x 4 per
// thread: conv_pre, dec_in_proj, stage 0, the 16-channel stage); 8 x 512 for 2 to 15 channels, 1 x 1024 for one.
Conv1dTile conv1d_auto_tile(int64_t planes, int64_t cout, int64_t lout) {
  if (cout >= 32 && tiles(planes, cout, lout, 32, 256) >= 2 * sm_count()) return Conv1dTile::k32x256;
  if (cout >= 16) return Conv1dTile::k16x256;
  if (cout >= 2) return Conv1dTile::k8x512;
  return Conv1dTile::k1x1024;
}

const char* conv1d_tile_name(Conv1dTile tile) {
  switch (tile) {
    case Conv1dTile::kAuto:
      return "auto";
    case Conv1dTile::k128x128:
      return "128x128";
    case Conv1dTile::k128x64:
      return "128x64";
    case Conv1dTile::k64x128:
      return "64x128";
    case Conv1dTile::k64x64:
      return "64x64";
    case Conv1dTile::k32x256:
      return "32x256";
    case Conv1dTile::k16x256:
      return "16x256";
    case Conv1dTile::k8x512:
      return "8x512";
    case Conv1dTile::k1x1024:
      return "1x1024";
  }
  return "?";
}

namespace {

Status conv1d_fp32_impl(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                        const Tensor* residual, Tensor& out, cudaStream_t stream, Conv1dTile tile) {
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
  BatchedRows rb;
  if (residual) {
    VORTEX_ASSIGN_OR_RETURN(rb, vae_batched_rows(*residual, "conv1d_fp32 residual", DType::kF32, cout, lout));
    if (rb.batch != ob.batch)
      return invalid_argument("conv1d_fp32: residual " + residual->describe() + " and out " + out.describe() +
                              " hold different batches");
    VORTEX_RETURN_IF_ERROR(expect_disjoint(xb.all, rb.all, "conv1d_fp32 (residual)"));
    const bool same = rb.first.ptr == ob.first.ptr && rb.first.ld == ob.first.ld && rb.batch_stride == ob.batch_stride;
    if (!same) VORTEX_RETURN_IF_ERROR(expect_disjoint(rb.all, ob.all, "conv1d_fp32 (residual, not in place)"));
  }
  if (cout == 0) return Status::Ok();
  ConvArgs a{};
  if (residual) {
    a.res = static_cast<const float*>(rb.first.ptr);
    a.ldr = rb.first.ld, a.res_batch_stride = rb.batch_stride;
  }
  a.x = static_cast<const float*>(xv.ptr);
  a.w = static_cast<const float*>(weight.raw_data());
  a.bias = bp;
  a.out = static_cast<float*>(ob.first.ptr);
  a.ldx = xv.ld, a.ldo = ob.first.ld, a.x_batch_stride = xb.batch_stride, a.out_batch_stride = ob.batch_stride;
  a.cin = static_cast<int>(cin), a.l = static_cast<int>(l), a.cout = static_cast<int>(cout);
  a.lout = static_cast<int>(lout), a.k = static_cast<int>(k), a.dilation = dilation, a.padding = padding;
  a.phases = 1, a.wk = a.k, a.ooff = 0, a.out_cols = a.lout;
  return dispatch<false>(a, xb.batch, tile, stream);
}

}  // namespace

Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
                   cudaStream_t stream, Conv1dTile tile) {
  return conv1d_fp32_impl(x, weight, bias, dilation, padding, nullptr, out, stream, tile);
}

Status conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                            const Tensor& residual, Tensor& out, cudaStream_t stream, Conv1dTile tile) {
  return conv1d_fp32_impl(x, weight, bias, dilation, padding, &residual, out, stream, tile)
      .with_context("conv1d_fp32_residual");
}

Status conv_transpose1d_fp32_launch(const ConvTransposeLaunch& t, cudaStream_t stream, Conv1dTile tile) {
  // Output j = m * s + p - padding of phase p = (j + padding) mod s reads inputs i = m - u' (u' < taps) through
  // tap (m - i) * s + p; positions m run over [m_min, m_max], the union of the phases' ranges inside [0, lout).
  const int64_t s = t.stride, taps = (t.k + s - 1) / s;
  const int64_t m_min = -floor_div(-(t.padding - s + 1), s), m_max = floor_div(t.lout - 1 + t.padding, s);
  if (t.batch < 1 || t.stride < 1 || m_max < m_min) return invalid_argument("conv_transpose1d: empty output");
  if (static_cast<int64_t>(t.batch) * s > 65535)
    return invalid_argument("conv_transpose1d: batch x stride above 65535");
  ConvArgs a{};
  a.x = t.x, a.w = t.w, a.bias = t.bias, a.out = t.out;
  a.ldx = t.ldx, a.ldo = t.ldo, a.x_batch_stride = t.x_batch_stride, a.out_batch_stride = t.out_batch_stride;
  a.cin = t.cin, a.l = t.l, a.cout = t.cout, a.lout = static_cast<int>(m_max - m_min + 1);
  a.k = static_cast<int>(taps), a.dilation = 1, a.padding = static_cast<int>(taps - 1 - m_min);
  a.phases = t.stride, a.wk = t.k, a.ooff = static_cast<int>(t.padding - m_min * s), a.out_cols = t.lout;
  return dispatch<true>(a, static_cast<int64_t>(t.batch) * s, tile, stream);
}

}  // namespace vortex::cuda_ops
