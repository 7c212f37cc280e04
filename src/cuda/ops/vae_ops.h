// CUDA kernels of the two VAE decoders (docs/numerics.md "VAE decoders"), one stem per op with its CPU
// reference in src/ref (src/ref/vae_ops.h): rms_norm_fp32, layer_norm, scale_add (and scale_add_rms_norm_fp32, the
// two in one pass), add, conv1d,
// conv_transpose1d, snake_beta, upsample1d, downsample1d. Each function is the ONE validating entry point of its
// .cu file. Programs: the norms reproduce the canonical FP64 reductions (src/core/reduce.h) and every FP32
// step with explicit __f*_rn (E0); conv1d and the resamplers run each output's FP64 chain in the reference's
// order (a product of two FP32 values is exact in FP64, so DFMA == multiply-then-add; E0); conv_transpose1d runs
// each output's FP32 FMA chain in the reference's order (E0); snake_beta takes CUDA's FP32 sinf (within
// docs/numerics.md's stated tolerance of the host's). Tested in tests/cuda/vae_ops_test.cpp (label gpu) against the
// CPU reference.
#pragma once

#include <cuda_runtime.h>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::cuda_ops {

// out[S, D] (f32 or bf16) = fp32(fp32(x * r) * w); x [S, D] f32 row view, w [D] f32.
Status rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out, cudaStream_t stream);
// out[S, D] (f32 or bf16) = fp32(fp32(fp32(x - mean) * r) * w) + b; x [S, D] f32, w/b [D] f32.
Status layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out,
                  cudaStream_t stream);
// x[S, D] f32 = fp32(x + fp32(a * scale)), a [S, D] bf16 or f32, scale [D] f32.
Status scale_add(Tensor& x, const Tensor& a, const Tensor& scale, cudaStream_t stream);
// scale_add, then out[S, D] (f32 or bf16) = rms_norm_fp32(x, weight, eps), in one pass (scale_add_rms_norm.cu);
// D <= 8192.
Status scale_add_rms_norm_fp32(Tensor& x, const Tensor& a, const Tensor& scale, const Tensor& weight, float eps,
                               Tensor& out, cudaStream_t stream);
// x[C, L] f32 = fp32(x + y), then fp32(x * scale) when scale != 1.
Status add(Tensor& x, const Tensor& y, float scale, cudaStream_t stream);
// out[Cout, Lout] = conv1d(x[Cin, L], w[Cout, Cin, K]) + bias (stride 1), all f32; or x [B, Cin, L] ->
// out [B, Cout, Lout] (contiguous stacks, one launch).
Status conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
              cudaStream_t stream);
// out[Cout, (L-1)s - 2p + K] = conv_transpose1d(x[Cin, L], w[Cin, Cout, K]) + bias, all f32; or [B, Cin, L] ->
// [B, Cout, Lout] (contiguous stacks, one launch).
Status conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding, Tensor& out,
                        cudaStream_t stream);
// In place on x[B * C, L] f32 (B >= 1 stacked signals; row r reads channel r % C) with alpha/beta [C] f32
// (log-space).
Status snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta, cudaStream_t stream);
// [C, L] -> [C, L * ratio] (BigVGAN UpSample1d), filter [K] f32.
Status upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out, cudaStream_t stream);
// [C, L] -> [C, (L - 1) / ratio + 1] (BigVGAN LowPassFilter1d at stride ratio), filter [K] f32.
Status downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out, cudaStream_t stream);

}  // namespace vortex::cuda_ops
