// Per-element device programs of the audio decoder's anti-aliased SnakeBeta, shared by the single-op kernels
// (upsample1d.cu, snake_beta.cu, downsample1d.cu) and the fused pass (activation1d.cu), so the fused pass computes
// byte for byte what the three ops compute one after another. Each is src/ref's program of the same stem (FP64
// chains of exact FP32 products; SnakeBeta's FP32 steps with the FP32 sine, FP64 exp of the parameters rounded once).
#pragma once

#include <cstdint>

namespace vortex::cuda_ops {

// upsample1d output t of a row xr [l] (replicate padding, transposed convolution with f [k] at stride ratio, the
// FP64 chain in ascending input order, times ratio in FP32).
__device__ __forceinline__ float upsample1d_at(const float* __restrict__ xr, int l, const float* __restrict__ f, int k,
                                               int ratio, int t) {
  const int pad = k / ratio - 1;
  const int pad_left = pad * ratio + (k - ratio) / 2;
  const int lp = l + 2 * pad;  // padded length
  const int j = t + pad_left;  // index into the full transposed-convolution output
  // The reference's bounds, evaluated with the same truncating integer division.
  const int i_lo = max(0, (j - (k - 1) + ratio - 1) / ratio);
  const int i_hi = min(lp - 1, j / ratio);
  double acc = 0.0;
  for (int i = i_lo; i <= i_hi; ++i) {
    const double xv = static_cast<double>(xr[min(max(i - pad, 0), l - 1)]);
    acc = __dadd_rn(acc, __dmul_rn(xv, static_cast<double>(f[j - i * ratio])));
  }
  return __fmul_rn(static_cast<float>(ratio), __double2float_rn(acc));
}

// SnakeBeta's per-channel FP32 constants: a = fp32(exp(alpha)), inv_b = fp32(1 / fp32(fp32(exp(beta)) + 1e-9)).
struct SnakeBetaCoeffs {
  float a, inv_b;
};
__device__ __forceinline__ SnakeBetaCoeffs snake_beta_coeffs(float alpha, float beta) {
  const float a = __double2float_rn(exp(static_cast<double>(alpha)));
  const float b = __double2float_rn(exp(static_cast<double>(beta)));
  return {a, __fdiv_rn(1.0f, __fadd_rn(b, 1e-9f))};
}
// v + inv_b * sinf(fp32(a * v))^2, one FP32 rounding per step. sinf is CUDA's FP32 sine (<= 2 ulp over the full
// range without --use_fast_math; the reference's is the host libm's, docs/numerics.md "Audio").
__device__ __forceinline__ float snake_beta_at(float v, SnakeBetaCoeffs c) {
  const float sn = sinf(__fmul_rn(c.a, v));
  return __fadd_rn(v, __fmul_rn(c.inv_b, __fmul_rn(sn, sn)));
}

// downsample1d output t: replicate padding of k / 2 - (k even) on the left, the FP64 chain in tap order. `x_at(i)`
// reads input i in [0, l).
template <typename XAt>
__device__ __forceinline__ float downsample1d_at(XAt x_at, int l, const float* __restrict__ f, int k, int ratio,
                                                 int t) {
  const int pad_left = k / 2 - (k % 2 == 0 ? 1 : 0);
  double acc = 0.0;
  const int64_t base = static_cast<int64_t>(t) * ratio - pad_left;
  for (int kk = 0; kk < k; ++kk) {
    const int64_t i = min(max(base + kk, int64_t{0}), static_cast<int64_t>(l - 1));
    acc = __dadd_rn(acc, __dmul_rn(static_cast<double>(x_at(i)), static_cast<double>(f[kk])));
  }
  return __double2float_rn(acc);
}

}  // namespace vortex::cuda_ops
