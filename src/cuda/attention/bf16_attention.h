// Owned BF16 attention for sm_90a (AttentionKernel::kBf16Wgmma, the BF16 program of the sdpa mode; E1): a
// FlashAttention-3-style kernel (bf16_attention_sm90.cu). Per CTA 128 query rows of one head; a producer warp
// streams Q once and a 2-stage ring of 128-key K/V tiles with TMA (128-byte swizzle) into shared memory, counted by
// mbarriers; two consumer warpgroups (64 rows each) run wgmma m64n128k16 BF16 with FP32 accumulation for S = Q K^T
// (both operands from shared memory) and O += P V (P from registers, rounded once to BF16; V read N-major through
// the descriptor's transpose bit, no transposing pass). Online softmax in FP32 with exp2 and the scale folded in
// (p = 2^(s*c - m*c), c = log2(e) / sqrt(128)); l sums the unrounded p; out = R_bf16(O / l) once. QK(j) and PV(j-1)
// are issued back to back so the softmax of block j overlaps PV(j-1) (FA3's intra-warpgroup pipelining), and the two
// warpgroups take turns issuing (FA3's inter-warpgroup ping-pong, named barriers). H200 timings against cuDNN:
// docs/performance.md "Owned BF16 attention".
// Reads q, k, v as strided [S, heads*head_dim] bf16 views (e.g. of the [S, 3*I] QKV output) and writes token-major out
// [S, >= heads*head_dim], exactly as the cuDNN path. Non-causal, scale 1/sqrt(head_dim). CPU program:
// ref::attention_flash_fp32 (two-reference rule vs ref::attention); tested in tests/attention/bf16_attention_test.cpp,
// timed by bench/bf16_attention_bench.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// True when this build carries the sm_90a kernel (VORTEX_CUDA_ARCHS has 90a) and `device` is an sm_90 GPU.
bool bf16_attention_supported(int device);

// out = softmax(q k^T / sqrt(head_dim)) v per head. q, k, v: [S, >= heads*head_dim] bf16 CUDA views, unit column
// stride, row stride a multiple of 8 elements, 16-byte aligned base (head h at column h*head_dim); out: [S, >=
// heads*head_dim] bf16, unit column stride, even row stride, 4-byte aligned. head_dim 128, 72 or 64. kUnsupported
// on builds without sm_90a kernels or on other GPUs (checked before any launch).
Status bf16_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim, Tensor& out,
                      cudaStream_t stream);
// head_dim 72 (the Qwen3-VL vision tower's) runs the same program: the kernel's tiles keep 128 columns, Q K^T takes
// 5 k-steps over columns 0-79, whose 72-79 the 3-D tensor maps read as zeros, O += P V has 72 columns. `batch`
// equal sequences stacked in the rows (q.dim(0) = batch * S), each attended within itself, in one launch; the result
// equals `batch` separate calls bit for bit.
// At head_dim 72 P V runs over the head's 72 columns (m64n72k16), or with `Bf16PvWidth::kFullTile` over the tile's 128
// (m64n128k16, the head-128 kernel's P V; columns 72-127 are zero and not stored); both are tested
// (tests/attention/bf16_attention_test.cpp) and timed (bench/fl2va_encoders_bench.cpp).
// head_dim 64 (the video VAE decoder's 32 heads) runs tiles of 64 columns: one TMA box per tile, 4 k-steps of Q K^T,
// O += P V with m64n64k16; the softmax and its rounding are the head-128 kernel's.
enum class Bf16PvWidth : uint8_t { kHead, kFullTile };
Status bf16_attention_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int heads, int head_dim,
                              Tensor& out, cudaStream_t stream, Bf16PvWidth pv = Bf16PvWidth::kHead);

namespace bf16_attention_detail {
struct Bf16AttentionArgs {
  const void* q;
  const void* k;
  const void* v;
  int64_t ld_q, ld_k, ld_v;  // row strides, elements
  void* out;
  int64_t ld_out;
  int64_t seq;  // rows of one sequence
  int heads;
  int head_dim = 128;         // 128, 72 or 64
  int64_t batch = 1;          // sequences stacked in the rows of q, k, v and out
  bool pv_full_tile = false;  // head_dim 72: P V over all 128 tile columns (m64n128k16) instead of 72
};
// bf16_attention_sm90.cu (only in builds with sm_90a, VORTEX_HAVE_SM90_KERNELS): tensor maps + launch.
Status launch_bf16_attention_sm90(const Bf16AttentionArgs& args, cudaStream_t stream);
}  // namespace bf16_attention_detail

}  // namespace vortex
