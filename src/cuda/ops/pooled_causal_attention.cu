// pooled_causal_attention: the audio VAE encoder's pre_block attention on channel-major qkv [B, 3D, T] -> [B, C, T].
// Program: src/ref/pooled_causal_attention.cpp's, in FP64 with explicit __d*_rn steps: per head the scores
// s_j = (sum_e q_e k_je, e ascending) * (1 / sqrt(hd)), p_j = exp(s_j - max) summed in ascending j, o_e =
// fp32(sum_j (p_j / sum) v_je, j ascending); the heads' FP32 outputs summed in head order and divided by the head
// count (rounded), then each adaptive-pool bin summed in order and divided by its width (rounded). libdevice's FP64
// exp against the host libm's may differ by an FP64 ulp, so outputs agree except near an FP32 rounding midpoint
// (tests/cuda/audio_encoder_ops_test.cpp states the tolerance). Kernel: a block per (position, signal); scores one
// thread per key, the sum of p by one thread (its order is the program's), P.V one thread per head channel.
// Shared memory holds T FP64 weights and the head means: up to 44 KiB, about 5,000 positions (200 s of 32 kHz audio
// at the released hop).
#include <cmath>

#include "cuda/ops/audio_encoder_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;
constexpr size_t kSmemLimit = 44 * 1024;  // dynamic, beside the 2 KiB static reduction buffer

__global__ void __launch_bounds__(kThreads)
    pooled_causal_attention_kernel(const float* __restrict__ qkv, float* __restrict__ out, int d, int t_n, int heads,
                                   int c, double scale) {
  extern __shared__ double smem[];
  double* p = smem;                                      // [t_n]
  float* head_mean = reinterpret_cast<float*>(p + t_n);  // [hd]
  __shared__ double red[kThreads];
  __shared__ double sum_s;
  const int i = blockIdx.x, b = blockIdx.y, hd = d / heads;
  const float* q = qkv + static_cast<int64_t>(b) * 3 * d * t_n;
  const float* k = q + static_cast<int64_t>(d) * t_n;
  const float* v = q + 2 * static_cast<int64_t>(d) * t_n;
  // Each thread keeps the running head sums of the channels e = threadIdx.x + kThreads * n.
  constexpr int kMaxPer = 8;  // hd <= kThreads * kMaxPer (checked on the host)
  double mean[kMaxPer];
#pragma unroll
  for (int n = 0; n < kMaxPer; ++n) mean[n] = 0.0;
  for (int h = 0; h < heads; ++h) {
    double mx = -INFINITY;
    for (int j = threadIdx.x; j <= i; j += kThreads) {
      double s = 0.0;
      for (int e = 0; e < hd; ++e) {
        const int64_t row = static_cast<int64_t>(h * hd + e) * t_n;
        s = __fma_rn(static_cast<double>(q[row + i]), static_cast<double>(k[row + j]), s);  // exact product
      }
      p[j] = __dmul_rn(s, scale);
      mx = fmax(mx, p[j]);
    }
    red[threadIdx.x] = mx;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {  // max is exact in any order
      if (threadIdx.x < w) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + w]);
      __syncthreads();
    }
    mx = red[0];
    for (int j = threadIdx.x; j <= i; j += kThreads) p[j] = exp(__dsub_rn(p[j], mx));
    __syncthreads();
    if (threadIdx.x == 0) {  // the program's order: ascending j
      double sum = 0.0;
      for (int j = 0; j <= i; ++j) sum = __dadd_rn(sum, p[j]);
      sum_s = sum;
    }
    __syncthreads();
    const double sum = sum_s;
    for (int j = threadIdx.x; j <= i; j += kThreads) p[j] = __ddiv_rn(p[j], sum);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kMaxPer; ++n) {
      const int e = threadIdx.x + kThreads * n;
      if (e >= hd) break;
      const float* ve = v + static_cast<int64_t>(h * hd + e) * t_n;
      double o = 0.0;
      for (int j = 0; j <= i; ++j) o = __dadd_rn(o, __dmul_rn(p[j], static_cast<double>(ve[j])));
      mean[n] = __dadd_rn(mean[n], static_cast<double>(__double2float_rn(o)));
    }
    __syncthreads();  // p is rewritten by the next head
  }
#pragma unroll
  for (int n = 0; n < kMaxPer; ++n) {
    const int e = threadIdx.x + kThreads * n;
    if (e < hd) head_mean[e] = __double2float_rn(__ddiv_rn(mean[n], static_cast<double>(heads)));
  }
  __syncthreads();
  for (int oc = threadIdx.x; oc < c; oc += kThreads) {
    const int lo = static_cast<int>(static_cast<int64_t>(oc) * hd / c);
    const int hi = static_cast<int>((static_cast<int64_t>(oc + 1) * hd + c - 1) / c);
    double s = 0.0;
    for (int e = lo; e < hi; ++e) s = __dadd_rn(s, static_cast<double>(head_mean[e]));
    out[(static_cast<int64_t>(b) * c + oc) * t_n + i] = __double2float_rn(__ddiv_rn(s, static_cast<double>(hi - lo)));
  }
}

}  // namespace

Status pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(const int64_t hd, ref::check_pooled_attention(qkv, heads, out, Device::kCuda));
  const int64_t b_n = qkv.dim(0), t_n = qkv.dim(2), d = qkv.dim(1) / 3, c = out.dim(1);
  if (hd > kThreads * 8)
    return unsupported("pooled_causal_attention: head width " + std::to_string(hd) + " above " +
                       std::to_string(kThreads * 8));
  const size_t smem = static_cast<size_t>(t_n) * sizeof(double) + static_cast<size_t>(hd) * sizeof(float);
  if (smem > kSmemLimit)
    return unsupported("pooled_causal_attention: " + std::to_string(t_n) +
                       " positions need more shared memory than a block has (at most about 5,000 latent frames)");
  VORTEX_RETURN_IF_ERROR(expect_apart(qkv, out, "pooled_causal_attention"));
  if (b_n == 0 || t_n == 0) return Status::Ok();
  if (b_n > 65535) return invalid_argument("pooled_causal_attention: more than 65535 signals");
  pooled_causal_attention_kernel<<<dim3(static_cast<unsigned>(t_n), static_cast<unsigned>(b_n)), kThreads, smem,
                                   stream>>>(qkv.data<float>(), out.data<float>(), static_cast<int>(d),
                                             static_cast<int>(t_n), heads, static_cast<int>(c),
                                             1.0 / std::sqrt(static_cast<double>(hd)));
  VORTEX_CUDA_LAUNCH_CHECK("pooled_causal_attention_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
