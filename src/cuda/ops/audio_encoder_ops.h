// CUDA kernels of the audio VAE encoder's ops (src/backend/vae_ops.h, "Audio VAE encoder ops"), one .cu file per
// op stem with its CPU program in src/ref (src/ref/vae_ops.h). Each function is the ONE validating entry point of
// its file. Programs: every output is the CPU program's FP64 evaluation in the same order with explicit __d*_rn
// steps, rounded once to FP32; conv1d_strided and layer_norm_channels are E0; snake, gelu_tanh_mul and
// pooled_causal_attention call libdevice's FP64 sin / tanh / exp, which may differ from the host libm by a few FP64
// ulps, so their FP32 outputs agree except near an FP32 rounding midpoint (tests state the tolerance).
// Tested in tests/cuda/audio_encoder_ops_test.cpp (label gpu) against the CPU programs.
#pragma once

#include <cuda_runtime.h>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::cuda_ops {

// Snake1d in place on x [B * C, L] f32 rows (row r reads alpha[r % C]).
Status snake(Tensor& x, const Tensor& alpha, cudaStream_t stream);
// out [B, Cout, Lout] = strided dilated conv1d of x [B, Cin, L] with w [Cout, Cin, K] and bias [Cout], f32.
Status conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation, int padding,
                      Tensor& out, cudaStream_t stream);
// LayerNorm over the channels of x [B, D, L] f32 into out (may be x).
Status layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& out,
                           cudaStream_t stream);
// qkv [B, 3D, T] -> out [B, C, T]: causal attention per head, head mean, adaptive average pool to C.
Status pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out, cudaStream_t stream);
// out = fp32(fp32(gelu_tanh(a)) * g), contiguous f32 of one shape.
Status gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out, cudaStream_t stream);

}  // namespace vortex::cuda_ops
