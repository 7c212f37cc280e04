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

// The register tiles of conv1d_fp32's kernel: [output channels x positions] per 256-thread block. kAuto picks one
// by Cout and the grid size; every tile gives the same bytes (the same chain per output), so the choice is speed
// only (bench/audio_decode_bench.cpp times each on the decoder's layers, tests/cuda/audio_decoder_ops_test.cpp
// checks each byte for byte).
enum class Conv1dTile { kAuto, k128x128, k128x64, k64x128, k64x64, k32x256, k16x256, k8x512, k1x1024 };
const char* conv1d_tile_name(Conv1dTile tile);
// The tile kAuto takes for `planes` (batch, x stride for a transposed convolution) x [Cout, Lout] outputs.
Conv1dTile conv1d_auto_tile(int64_t planes, int64_t cout, int64_t lout);
// out[Cout, Lout] = conv1d(x[Cin, L], w[Cout, Cin, K]) + bias, stride 1, zero padding, dilation; all f32, FP32
// accumulation; or x [B, Cin, L] -> out [B, Cout, Lout] (contiguous stacks, one launch).
Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding, Tensor& out,
                   cudaStream_t stream, Conv1dTile tile = Conv1dTile::kAuto);
// out = fp32(conv1d_fp32(x, weight, bias) + residual) per element in the kernel's epilogue; residual shaped as out,
// either out itself (in place: each element is read and then written by one thread) or disjoint from it, and never
// overlapping x.
Status conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                            const Tensor& residual, Tensor& out, cudaStream_t stream,
                            Conv1dTile tile = Conv1dTile::kAuto);
// The FP32 transposed convolution out[Cout, (L - 1) s - 2 p + K] = conv_transpose1d(x[Cin, L], w[Cin, Cout, K]) +
// bias (or [B, Cin, L] stacks) on conv1d_fp32's kernel as `stride` phase convolutions of ceil(K / s) taps (grid z =
// batch x phase). Arguments are checked by conv_transpose1d (src/cuda/ops/conv_transpose1d.cu), its entry point.
struct ConvTransposeLaunch {
  const float *x, *w, *bias;  // x [B][Cin rows of ldx], w [Cin, Cout, K], bias [Cout] or null
  float* out;                 // [B][Cout rows of ldo]
  int64_t ldx, ldo, x_batch_stride, out_batch_stride;
  int batch, cin, l, cout, k, stride, padding, lout;
};
Status conv_transpose1d_fp32_launch(const ConvTransposeLaunch& a, cudaStream_t stream,
                                    Conv1dTile tile = Conv1dTile::kAuto);
// out[B * C, L] = downsample1d(snake_beta(upsample1d(x[B * C, L], up_filter, ratio), alpha, beta), down_filter,
// ratio); alpha, beta [C] f32 (row r is channel r % C), filters f32 device vectors.
Status activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                    const Tensor& down_filter, int ratio, Tensor& out, cudaStream_t stream);

}  // namespace vortex::cuda_ops
