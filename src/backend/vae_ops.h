// VaeOps: the FP32 ops of the video and audio VAE decoders and the audio VAE encoder (src/vae) in the Backend
// (src/backend/backend.h): norms, LayerScale residuals, 1-D convolutions and their transposes, Snake activations,
// anti-aliased resampling, and the encoder's strided convolutions and pre_block. Numerics: docs/numerics.md "VAE
// decoders"; CPU programs: src/ref/vae_ops.h.
#pragma once

#include <cstdint>
#include <string>

#include "backend/identity.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// ---- video VAE clip stitch (decode4; src/vae/video_vae.cpp, CPU program src/ref/video_stitch.h) ----
// The geometry of one temporal clip's stitch, as VideoVae::decode derives it from diffusers' _decode / _decode_clip /
// _stitch_tiles / _blend: the clip's ny x nx tiles (row-major), each of tile_t x tile_h x tile_w tokens of
// rows_per_tile rows in y (the voxel rows first), are unpatchified (value ((ch * pt + a) * p + b) * p + c of token (t,
// h, w) -> pixel (ch, t * pt + a, h * p + b, w * p + c)); tile (i, j) keeps output rows [y_off[i], y_off[i + 1]) and
// columns [x_off[j], x_off[j + 1]) from its top-left corner, its first blend_y[i] rows blended with the ORIGINAL tile
// above and its first blend_x[j] columns with the ORIGINAL tile to the left (0 for the first row / column).
struct VideoStitchClip {
  static constexpr int kMaxTiles = 64;  // tiles per axis
  int channels = 3, patch = 16, patch_t = 4;
  int tile_t = 0, tile_h = 0, tile_w = 0;  // tokens per tile along t, h, w
  int64_t rows_per_tile = 0;               // S >= tile_t * tile_h * tile_w
  int ny = 0, nx = 0;
  int y_off[kMaxTiles + 1] = {}, x_off[kMaxTiles + 1] = {};
  int blend_y[kMaxTiles] = {}, blend_x[kMaxTiles] = {};
  // Tile frames [f00, fe0) are the clip's output frames, [f01, fe1) the next clip's cross-fade frames; out frames
  // [0, cross_fade) blend with the previous clip's last cross_fade cross-fade frames.
  int f00 = 0, fe0 = 0, f01 = 0, fe1 = 0, cross_fade = 0;
};

// The VAE decoder op family (src/vae); backends without a kernel report kUnsupported naming the op.
class VaeOps : public virtual BackendIdentity {
 public:
  // ---- VAE decoder ops (docs/numerics.md "VAE decoders"; CPU programs in src/ref/vae_ops.h) ----
  // Backends without a kernel report kUnsupported naming the op; the CPU backend provides all of them.
  // out[S, D] (f32 or bf16) = fp32(fp32(x * r) * w), r = fp32(1/sqrt(mean(x^2) + eps)) from an FP64 sum; x f32, w f32.
  virtual Status rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
    (void)x, (void)weight, (void)eps, (void)out;
    return vae_op_unsupported("rms_norm_fp32");
  }
  // out[S, D] (f32 or bf16) = fp32(fp32(fp32(x - mean) * r) * w) + b, FP64 mean/variance; x f32 or bf16, w, b f32.
  virtual Status layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)eps, (void)out;
    return vae_op_unsupported("layer_norm");
  }
  // x[S, D] f32 = fp32(x + fp32(a * scale[D])), a bf16 or f32 (LayerScale residual).
  virtual Status scale_add(Tensor& x, const Tensor& a, const Tensor& scale) {
    (void)x, (void)a, (void)scale;
    return vae_op_unsupported("scale_add");
  }
  // scale_add(x, a, scale), then out = rms_norm_fp32(x, weight, eps): a LayerScale residual and the RMSNorm that
  // reads it. The default runs the two ops (the CPU program); the CUDA backend fuses them into one pass (same bytes).
  virtual Status scale_add_rms_norm_fp32(Tensor& x, const Tensor& a, const Tensor& scale, const Tensor& weight,
                                         float eps, Tensor& out) {
    VORTEX_RETURN_IF_ERROR(scale_add(x, a, scale));
    return rms_norm_fp32(x, weight, eps, out);
  }
  // x[C, L] f32 = fp32(fp32(x + y) * scale) (the multiply only when scale != 1).
  virtual Status add(Tensor& x, const Tensor& y, float scale) {
    (void)x, (void)y, (void)scale;
    return vae_op_unsupported("add");
  }
  // out[Cout, L + 2p - d(K-1)] = conv1d(x[Cin, L], w[Cout, Cin, K]) + bias, zero padding p, dilation d, f32.
  // Contiguous [B, Cin, L] -> [B, Cout, Lout] stacks convolve B signals in one call (same program per signal).
  virtual Status conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                        Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)dilation, (void)padding, (void)out;
    return vae_op_unsupported("conv1d");
  }
  // out[Cout, (L-1)s - 2p + K] = conv_transpose1d(x[Cin, L], w[Cin, Cout, K]) + bias, f32 ([B, C, L] stacks too).
  virtual Status conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding,
                                  Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)stride, (void)padding, (void)out;
    return vae_op_unsupported("conv_transpose1d");
  }
  // In place on x[B * C, L] f32 (row r is channel r % C): x + 1/(exp(beta) + 1e-9) * sin(exp(alpha) * x)^2,
  // alpha/beta [C] log-space.
  virtual Status snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta) {
    (void)x, (void)alpha, (void)beta;
    return vae_op_unsupported("snake_beta");
  }
  // Anti-aliased x`ratio` upsampling [C, L] -> [C, L * ratio] with a Kaiser-sinc filter [K] f32.
  virtual Status upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) {
    (void)x, (void)filter, (void)ratio, (void)out;
    return vae_op_unsupported("upsample1d");
  }
  // Anti-aliased /`ratio` downsampling [C, L] -> [C, (L - 1) / ratio + 1] with a Kaiser-sinc filter [K] f32.
  virtual Status downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) {
    (void)x, (void)filter, (void)ratio, (void)out;
    return vae_op_unsupported("downsample1d");
  }

  // ---- video VAE clip stitch (decode4; CPU program src/ref/video_stitch.h) ----
  // One clip's tiles y [ny * nx * S, C * pt * p * p] bf16 -> out [C, fe0 - f00, H, W] f32 (H = y_off[ny], W =
  // x_off[nx]) and next [C, fe1 - f01, H, W] f32 (undefined when fe1 == f01); prev [C, Fp >= cross_fade, H, W] f32
  // (undefined when cross_fade == 0). Each blend is diffusers' a * (1 - i/e) + b * (i/e), every product and the sum
  // one FP32 rounding. Pure data movement plus FP32 blends: E0 on every backend.
  virtual Status video_stitch_clip(const Tensor& y, const VideoStitchClip& geometry, const Tensor& prev, Tensor& out,
                                   Tensor& next) {
    (void)y, (void)geometry, (void)prev, (void)out, (void)next;
    return vae_op_unsupported("video_stitch_clip");
  }
  // ---- end of video VAE clip stitch ----

  // ---- Audio VAE encoder ops (src/vae/audio_vae_encoder.h; CPU programs in src/ref/vae_ops.h) ----
  // Every output is one FP64 evaluation rounded once to FP32. Signals are contiguous [B, C, L] f32 stacks.
  // Snake1d in place on x[B * C, L] f32 (row r is channel r % C): x + 1/(alpha + 1e-9) * sin(alpha * x)^2, alpha [C].
  virtual Status snake(Tensor& x, const Tensor& alpha) {
    (void)x, (void)alpha;
    return vae_op_unsupported("snake");
  }
  // out[B, Cout, (L + 2p - d(K-1) - 1) / s + 1] = conv1d(x[B, Cin, L], w[Cout, Cin, K], stride s, padding p,
  // dilation d) + bias; FP64 sum in (c, k) order. f32.
  virtual Status conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation,
                                int padding, Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)stride, (void)dilation, (void)padding, (void)out;
    return vae_op_unsupported("conv1d_strided");
  }
  // LayerNorm over the channels of each position: out[b, :, t] = (x - mean) / sqrt(var + eps) * w + b, FP64.
  // x, out [B, D, L] f32; weight, bias [D] f32.
  virtual Status layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                     Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)eps, (void)out;
    return vae_op_unsupported("layer_norm_channels");
  }
  // The audio encoder's pre_block attention: qkv [B, 3D, T] (q, k, v channel blocks, `heads` heads of D / heads)
  // -> causal softmax(q k^T / sqrt(D / heads)) v per head (FP64, rounded), mean over heads (rounded), then
  // adaptive_avg_pool1d from D / heads to C (rounded) -> out [B, C, T] f32.
  virtual Status pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out) {
    (void)qkv, (void)heads, (void)out;
    return vae_op_unsupported("pooled_causal_attention");
  }
  // GeGLU gate: out = fp32(fp32(gelu_tanh(a)) * g), gelu_tanh in FP64. a, g, out of one shape, contiguous f32.
  virtual Status gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out) {
    (void)a, (void)g, (void)out;
    return vae_op_unsupported("gelu_tanh_mul");
  }

 protected:
  Status vae_op_unsupported(const char* op) const {
    return unsupported(std::string(op) + " is not yet implemented on the " + std::string(name()) +
                       " backend (a VAE decoder op); decode with --backend cpu or cuda");
  }

 public:
  // ---- Audio VAE decoder FP32 ops (src/vae/audio_vae.h; docs/numerics.md "Audio"; CPU programs in
  // src/ref/vae_ops.h) ----
  // conv1d's shapes (and [B, Cin, L] stacks), each output ONE FP32 chain acc = fma(w, x, acc) over (c, k) in ascending
  // order from +0, then fp32(acc + bias): the audio decoder's convolutions (the CUDA kernel gives the same bytes).
  virtual Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                             Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)dilation, (void)padding, (void)out;
    return vae_op_unsupported("conv1d_fp32");
  }
  // BigVGAN's anti-aliased SnakeBeta: out[B * C, L] = downsample1d(snake_beta(upsample1d(x, up_filter, ratio), alpha,
  // beta), down_filter, ratio), each step as its own op above (the CUDA backend runs the three in one pass).
  virtual Status activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                              const Tensor& down_filter, int ratio, Tensor& out) {
    (void)x, (void)alpha, (void)beta, (void)up_filter, (void)down_filter, (void)ratio, (void)out;
    return vae_op_unsupported("activation1d");
  }

  // ---- Audio VAE decoder: the AMP block's residual convolution (src/vae/audio_vae.cpp) ----
  // out = fp32(conv1d_fp32(x, weight, bias) + residual) per element, residual shaped as out; residual may be out
  // itself (in place), never x. The same bytes as conv1d_fp32 into a temporary followed by add(residual, temp).
  virtual Status conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation,
                                      int padding, const Tensor& residual, Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)dilation, (void)padding, (void)residual, (void)out;
    return vae_op_unsupported("conv1d_fp32_residual");
  }
};

}  // namespace vortex
