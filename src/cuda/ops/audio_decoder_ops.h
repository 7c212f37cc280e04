// CUDA kernels of the audio VAE decoder's FP32 program (docs/numerics.md "Audio"; src/vae/audio_vae.h), one stem
// per op with its CPU reference in src/ref (src/ref/vae_ops.h): conv1d_fp32, activation1d. Each function is the ONE
// validating entry point of its .cu file. conv1d_fp32 runs each output's FP32 FMA chain in the reference's (channel,
// tap) order, so its bytes equal the reference's (E0 against src/ref/conv1d_fp32.cpp); activation1d fuses
// upsample1d, snake_beta and downsample1d with their device programs (the bytes of the three kernels; snake_beta's
// tolerance against the CPU). Tested in
// tests/cuda/audio_decoder_ops_test.cpp (label gpu).
#pragma once

#include <cuda_runtime.h>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::cuda_ops {

// out[Cout, Lout] = conv1d(x[Cin, L], w[Cout, Cin, K]) + bias, stride 1, zero padding, dilation; all f32, FP32
// accumulation; or x [B, Cin, L] -> out [B, Cout, Lout] (contiguous stacks, one launch).
Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
                   cudaStream_t stream);
// out[B * C, L] = downsample1d(snake_beta(upsample1d(x[B * C, L], up_filter, ratio), alpha, beta), down_filter,
// ratio); alpha, beta [C] f32 (row r is channel r % C), filters f32 device vectors.
Status activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                    const Tensor& down_filter, int ratio, Tensor& out, cudaStream_t stream);

}  // namespace vortex::cuda_ops
