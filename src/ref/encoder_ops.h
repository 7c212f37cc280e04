// CPU reference programs of the vision tower and video VAE encoder ops (EncoderOps in
// src/backend/encoder_ops.h): gelu, rope_fp32, pos_embed_add on BF16 rows; pad_causal_reflect, group_norm_frames and
// conv3d on channels-last [B, T, H, W, C] f32 activations. Each FP32 step is one IEEE operation in a fixed order, so
// results never depend on the thread count. Tested against the CUDA kernels in tests/cuda/encoder_ops_test.cpp, and
// through the encoders on the cpu backend in tests/vae/video_vae_encoder_test.cpp and
// tests/vision/vision_tower_test.cpp.
#pragma once

#include "ref/ref_ops.h"

namespace vortex::ref {

Status gelu(Tensor& x, bool tanh_approx, const RowRunner& run = run_serial);
Status rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim,
                 const RowRunner& run = run_serial);
Status pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight,
                     const RowRunner& run = run_serial);
Status pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right, Tensor& out,
                          const RowRunner& run = run_serial);
Status group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps, bool silu,
                         Tensor& out, const RowRunner& run = run_serial);
// Accumulates each output in FP32 over (ci, kt, kh, kw) in that order, then adds the bias: the order of the FP32
// encoder reference (src/vae/video_vae_encoder.cpp).
Status conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s, Tensor& out,
              const RowRunner& run = run_serial);
// The vision tower's GEMMs with their pointwise tail (EncoderOps::linear_gelu_tanh / linear_residual): y = linear()'s
// FP64 ascending-k dot product + bias, rounded once to FP32; then out = R(gelu_tanh(y)) (the gelu() formula in FP32)
// or x = R(fp32(x) + y). a, x, out bf16 rows, w a bf16 [N, K] weight, bias bf16 or null.
Status linear_gelu_tanh(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& out,
                        const RowRunner& run = run_serial);
Status linear_residual(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& x,
                       const RowRunner& run = run_serial);

// Shared argument checks (also the CUDA entry points'): a contiguous 5-D [B, T, H, W, C] f32 tensor; the pad,
// GroupNorm and convolution operands with the output shape each op writes.
Status check_ndhwc(const Tensor& t, const char* what);
Status check_pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right,
                                const Tensor& out);
Status check_group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups,
                               const Tensor& out);
Status check_conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s,
                    const Tensor& out);

}  // namespace vortex::ref
