// CPU reference ops of the two VAE decoders (docs/numerics.md "VAE decoders") and the audio VAE encoder: plain loops
// over host tensors, one source file per op stem, the oracle for any GPU kernel of the same stem. Like ref_ops.h, each
// op validates once and runs its rows (tokens, or output channels for the 1-D signal ops) through a RowRunner, one
// thread per output element in a fixed order: bytes never depend on the thread count. Signal tensors are channel-major
// [C, L] f32 (one mono waveform's feature map). Tested in tests/ref/vae_ops_test.cpp against independent FP64 formulas
// and hand-picked values.
#pragma once

#include <cstdint>

#include "ref/ref_ops.h"

namespace vortex::ref {

// Per row: r = fp32(1 / sqrt(sum(x^2) / D + eps)) with the sum in FP64 (exact FP32 squares, canonical order of
// src/core/reduce.h),
// y = fp32(fp32(x * r) * w), stored as out's dtype (bf16: one RNE rounding of y). x [S, D] f32,
// weight [D] f32, out [S, D] f32 or bf16 (row-strided views allowed).
Status rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out, const RowRunner& run = run_serial);

// Per row: mean and biased variance in FP64 (canonical order of src/core/reduce.h), r = fp32(1 / sqrt(var + eps)), y =
// fp32(fp32(fp32(x - mean) * r)
// * w) + b in FP32, stored as out's dtype. x [S, D] f32, weight/bias [D] f32, out [S, D] f32 or bf16.
Status layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out,
                  const RowRunner& run = run_serial);

// In place: x = fp32(x + fp32(a * scale)) (two FP32 roundings, no FMA): the LayerScale residual of the video
// decoder. x [S, D] f32, a [S, D] bf16 or f32, scale [D] f32.
Status scale_add(Tensor& x, const Tensor& a, const Tensor& scale, const RowRunner& run = run_serial);

// In place: x = fp32(x + y), then x = fp32(x * scale) when scale != 1. x, y [C, L] f32 (any equal 2-D shape).
Status add(Tensor& x, const Tensor& y, float scale, const RowRunner& run = run_serial);

// out[o, t] = bias[o] + sum_{c, k} w[o, c, k] * x[c, t + k * dilation - padding] (zero outside [0, L)), FP64
// sum in (c, k) order, one rounding to FP32. x [Cin, L], w [Cout, Cin, K], bias [Cout] or null,
// out [Cout, L + 2 * padding - dilation * (K - 1)], all f32. Stride 1. A contiguous [B, Cin, L] x and
// [B, Cout, Lout] out convolve each of the B signals (the audio decoder's stereo pair) with the same program.
Status conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
              const RowRunner& run = run_serial);

// The audio decoder's FP32 convolution (docs/numerics.md "Audio"): the same signature and shapes as conv1d, each
// output ONE FP32 chain acc = fma(w[o, c, k], x[c, t + k * dilation - padding], acc) over (c, k) in ascending order
// from +0 (taps in the zero padding leave acc unchanged), then fp32(acc + bias[o]).
Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
                   const RowRunner& run = run_serial);

// The AMP block's residual convolution: out = fp32(conv1d_fp32(x, weight, bias) + residual) per element, residual
// shaped as out (it may be out itself: in place; never x). The bytes of conv1d_fp32 into a temporary, then add().
Status conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                            const Tensor& residual, Tensor& out, const RowRunner& run = run_serial);

// Transposed convolution: out[o, j] = bias[o] + sum_{c, i, k : i * stride + k - padding = j} x[c, i] * w[c, o, k],
// ONE FP32 FMA chain in (c, i) order from +0, then fp32(acc + bias). x [Cin, L], w [Cin, Cout, K], out [Cout, (L - 1) *
// stride - 2 * padding
// + K], all f32; contiguous [B, Cin, L] -> [B, Cout, Lout] stacks as in conv1d.
Status conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding, Tensor& out,
                        const RowRunner& run = run_serial);

// SnakeBeta in place: a = fp32(exp(alpha[c])), b = fp32(exp(beta[c])), x = x + fp32(1 / fp32(b + 1e-9)) * sin(a * x)^2,
// each operation one FP32 rounding in that order (exp and sin evaluated in FP64 and rounded once; sin of the FP32
// product). x [B * C, L] (B >= 1 stacked signals: row r is channel r % C), alpha/beta [C] f32
// (log-space parameters, as stored).
Status snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta, const RowRunner& run = run_serial);

// Anti-aliased upsampling by `ratio` (BigVGAN UpSample1d): replicate-pad x by p = K / ratio - 1 on both
// sides, depthwise transposed convolution with `filter` [K] at stride `ratio` (FP64 sums), times ratio, then
// crop p * ratio + (K - ratio) / 2 on the left and p * ratio + (K - ratio + 1) / 2 on the right.
// x [C, L] -> out [C, L * ratio], f32.
Status upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out, const RowRunner& run = run_serial);

// Anti-aliased downsampling by `ratio` (BigVGAN LowPassFilter1d): replicate-pad K / 2 - (K even) on the left
// and K / 2 on the right, depthwise convolution with `filter` [K] at stride `ratio` (FP64 sums).
// x [C, L] -> out [C, (L - 1) / ratio + 1], f32.
Status downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out, const RowRunner& run = run_serial);

// BigVGAN's anti-aliased SnakeBeta (Activation1d): out = downsample1d(snake_beta(upsample1d(x, up_filter, ratio),
// alpha, beta), down_filter, ratio), each step the program above. x [B * C, L] (row r is channel r % C), out [B * C, L]
// (downsample1d of L * ratio samples keeps L), all f32.
Status activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                    const Tensor& down_filter, int ratio, Tensor& out, const RowRunner& run = run_serial);

// ---- Audio VAE encoder ops (src/vae/audio_vae_encoder.h): every output one FP64 evaluation rounded once to FP32;
// signals are contiguous [B, C, L] f32 stacks. ----

// Snake1d in place: x = fp32(x + (1 / (a + 1e-9)) * s * s), s = sin(a * x), a = alpha[c], all in FP64 (libm sin).
// x [B * C, L] (row r is channel r % C), alpha [C] f32.
Status snake(Tensor& x, const Tensor& alpha, const RowRunner& run = run_serial);

// out[b, o, t] = fp32(sum_{c, k} w[o, c, k] * x[b, c, t * stride + k * dilation - padding] + bias[o]): FP64 sum in
// (c, k) order over the taps inside [0, L), the bias added last. x [B, Cin, L], w [Cout, Cin, K], bias [Cout],
// out [B, Cout, conv1d_strided_out_length(L, K, stride, dilation, padding)].
Status conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation, int padding,
                      Tensor& out, const RowRunner& run = run_serial);

// LayerNorm over channels, per (b, t): mean = (sum_d x) / D, var = (sum_d (x - mean)^2) / D in FP64 (d ascending),
// out = fp32((x - mean) * (1 / sqrt(var + eps)) * w[d] + bias[d]) in FP64, left to right. x, out [B, D, L] f32
// (out may be x), weight/bias [D] f32.
Status layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& out,
                           const RowRunner& run = run_serial);

// The audio encoder's pre_block attention on qkv [B, 3D, T] f32 (channels: q, then k, then v; head h holds channels
// [h * hd, (h + 1) * hd), hd = D / heads). Per (b, t, h): s_j = (sum_e q_e k_je) * (1 / sqrt(hd)) for j <= t (FP64),
// p_j = exp(s_j - max) summed in ascending j, o_e = fp32(sum_j (p_j / sum) * v_je). Then per (b, t):
// m_e = fp32((sum_h o_he) / heads), out[b, c, t] = fp32((sum_{e in bin c} m_e) / |bin c|) with adaptive_avg_pool1d's
// bins [floor(c * hd / C), ceil((c + 1) * hd / C)). out [B, C, T] f32 (C from out).
Status pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out, const RowRunner& run = run_serial);

// out = fp32(fp32(gelu(a)) * g), gelu(a) = 0.5 a (1 + tanh(sqrt(2 / pi) (a + ((0.044715 a) a) a))) in FP64 (libm
// tanh). a, g, out contiguous f32 of one shape (out may be a).
Status gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out, const RowRunner& run = run_serial);

// Shape helpers shared by the ops and their callers.
inline int64_t conv1d_out_length(int64_t l, int64_t k, int dilation, int padding) {
  return l + 2 * padding - static_cast<int64_t>(dilation) * (k - 1);
}
inline int64_t conv1d_strided_out_length(int64_t l, int64_t k, int stride, int dilation, int padding) {
  return (l + 2 * padding - static_cast<int64_t>(dilation) * (k - 1) - 1) / stride + 1;
}
inline int64_t conv_transpose1d_out_length(int64_t l, int64_t k, int stride, int padding) {
  return (l - 1) * stride - 2 * padding + k;
}

}  // namespace vortex::ref
