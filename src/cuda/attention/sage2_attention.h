// Sage2-compatible attention (AttentionKind::kSage2, an E2 approximate mode; mainloops: wgmma on sm_90a, mma.sync
// anywhere): INT8 Q/K with per-thread scales and K smoothing, FP8 E4M3 P and per-channel V, exp2 online softmax with
// the 448 offset, two-level FP32 PV accumulation (src/ref/sage2_attention.h). Reads q, k, v as strided
// [S, heads*128] bf16 views of the QKV buffer and writes token-major out. Quantized bytes are E0 vs
// src/ref/sage2_attention.h; outputs E1 vs its CPU program (two-reference rule). Tested in
// tests/attention/sage2_sm90_test.cpp; timed by bench/sage2_bench.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// Which sm90 mainloop runs (same program; the quantized operands differ only in storage layout):
//   kMmaSync: mma.sync m16n8k32, 8 warps x 16 rows per CTA, cp.async double buffer (FP8 mma.sync runs
//             as 2x HMMA on sm_90). Q/K head dim permuted by sage2_qk_byte_pos, V^T keys by
//             sage2_v_byte_pos. Validated on the H200; 319-334 TOPS at the canonical shape.
//   kWgmma:   warp-specialized: a producer warpgroup streams 16 KB Q/K/V tiles with cp.async.bulk into
//             an mbarrier ring; two consumer warpgroups x 64 query rows run wgmma m64n128k32 s8 (Q and
//             K from shared memory) and e4m3 (P from registers, V^T from shared memory); QK(j) and PV(j-1)
//             are issued together, and one warpgroup's softmax overlaps the other's GEMMs (ptxas places the
//             PV wait right after the QK wait). Operands in the tiled layout (sage2_tiled_pos /
//             sage2_tiled_v_pos). 928 TOPS mainloop, 888-890 TOPS with quantization at the canonical
//             shape (H200: benchmarks/2026-11-29-h200-s9/run1-sage2_bench.log, run3-sage2_bench.log); building
//             the wgmma descriptors per instruction and converting int -> float in two instructions gave
//             839 / 805 (run1-sage2_bench.log).
//             Measured slower, not kept (same logs; run7-sage2_bench.log): no producer warpgroup (256 threads,
//             255 registers, the last releasing warp refills the stage) 667 TOPS; FlashAttention-3's scheduler
//             barriers (a warpgroup issues on its turn, passes it right after issuing) 918 vs 928; a
//             3-stage ring 911 vs 906 and, with staggered scheduler barriers, 908; a quarter of the
//             exponentials as an FMA-pipe polynomial 792 (the kernel pays per instruction).
//             Also slower (benchmarks/2026-11-29-h200-s8/sage2-variants-run3-4.jsonl): the warpgroups taking
//             turns on the tensor core (ping-pong, 685 TOPS) and P through shared memory so softmax(j) overlaps
//             PV(j-1) (stmatrix + SS wgmma, 765 TOPS; ptxas hoists the PV wait into the softmax when P is in
//             registers, and writing P early into registers is unsafe).
// Q stays in shared memory across the key loop: with Q fragments in registers ptxas gave the P fragments the
// same registers, so every block after the first multiplied garbage
// (benchmarks/2026-11-29-h200-sage2-s7/old-wgmma-sass-register-reuse.txt); shared memory also frees 16 registers.
enum class Sage2Mainloop : uint8_t { kMmaSync, kWgmma };
const char* sage2_mainloop_name(Sage2Mainloop m);
// True when the quantized operands are stored in the tiled layout (the wgmma mainloop).
inline bool sage2_tiled_layout(Sage2Mainloop m) { return m == Sage2Mainloop::kWgmma; }

// Device scratch for the quantized operands; grows on demand, reused across calls (one stream).
// Layouts (P = tokens padded to 128, H = heads):
//   q_int8   [H, P, 128]  int8; kMmaSync: rows, head dim permuted by sage2_qk_byte_pos;
//                         kWgmma: sage2_tiled_pos
//   q_scale  [H, P/16*8]  fp32
//   k_int8   [H, P, 128]  int8 of bf16(K - mean), same layouts as q_int8
//   k_scale  [H, P/128*4] fp32
//   k_mean   [H, 128]     bf16 bits
//   v_fp8    [H, 128, P]  e4m3 V^T; kMmaSync: channel rows, keys of each 128-block permuted by
//                         sage2_v_byte_pos; kWgmma: sage2_tiled_v_pos
//   v_scale  [H, 128]     fp32; v_mult [H, 128] fp32 = 448 / amax
//   k_partial_sum [H, chunks, 128] fp64, v_partial_amax [H, chunks, 128] fp32 (pre-pass scratch)
class Sage2Workspace {
 public:
  Sage2Workspace() = default;
  Sage2Workspace(const Sage2Workspace&) = delete;
  Sage2Workspace& operator=(const Sage2Workspace&) = delete;
  ~Sage2Workspace();

  // Makes room for `heads` heads of `seq` tokens (no-op when already large enough).
  Status reserve(int heads, int64_t seq);

  // Where the one device block comes from (unset: cudaMalloc / cudaFree). CudaBackend routes it through
  // its caching allocator so the workspace (~0.8 GB at the canonical shape) counts in its peak memory.
  std::function<Result<void*>(size_t)> device_alloc;
  std::function<void(void*, size_t)> device_free;

  // Chosen by the caller before sage2_quantize; the operand layout written follows it.
  Sage2Mainloop mainloop = Sage2Mainloop::kWgmma;
  Sage2Mainloop quantized_for = Sage2Mainloop::kWgmma;  // set by sage2_quantize
  // cudaFuncSetAttribute (shared-memory limit) done for this workspace's device, per mainloop kernel.
  bool mma_smem_configured = false;
  bool wgmma_smem_configured = false;

  // Q quantized by qk_norm_rope_sage2 and not yet consumed by sage2_quantize_kv (0 tokens: none).
  int64_t q_pending_seq = 0;
  int q_pending_heads = 0;
  Sage2Mainloop q_pending_layout = Sage2Mainloop::kWgmma;

  int heads = 0;
  int64_t seq = 0;     // tokens of the last quantize call
  int64_t padded = 0;  // sage2_padded_tokens(seq)
  int8_t* q_int8 = nullptr;
  float* q_scale = nullptr;
  int8_t* k_int8 = nullptr;
  float* k_scale = nullptr;
  uint16_t* k_mean = nullptr;
  uint8_t* v_fp8 = nullptr;
  float* v_scale = nullptr;
  float* v_mult = nullptr;
  double* k_partial_sum = nullptr;
  float* v_partial_amax = nullptr;

 private:
  void release();
  void* block_ = nullptr;
  size_t capacity_bytes_ = 0;
};

// Quantization pre-pass only: fills `ws` from q, k, v ([S, >= heads*128] bf16 CUDA views, unit
// column stride, row stride a multiple of 8 elements, 16-byte aligned).
Status sage2_quantize(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim, cudaStream_t stream,
                      Sage2Workspace& ws);

// Its two halves (sage2_quantize = both): Q alone (the separate pass qk_norm_rope_sage2 replaces), then K/V.
Status sage2_quantize_q(const Tensor& q, int heads, int head_dim, cudaStream_t stream, Sage2Workspace& ws);
// The pre-pass without Q: K/V into `ws` after qk_norm_rope_sage2 or sage2_quantize_q wrote Q for the same tokens, heads
// and mainloop layout (kInvalidArgument otherwise). Q bytes then equal sage2_quantize's from the normed q.
Status sage2_quantize_kv(const Tensor& k, const Tensor& v, int heads, int head_dim, cudaStream_t stream,
                         Sage2Workspace& ws);

// qk_norm_rope (src/cuda/ops/ops.h) fused with Sage2's Q quantization: q, k normed + RoPE'd in place exactly as
// qk_norm_rope writes them, and in the same pass Q's INT8 bytes and scales into ws (layout of ws.mainloop,
// padding rows zero) exactly as sage2_quantize_q writes them from the normed q; the caller then runs
// sage2_quantize_kv and sage2_attention_quantized.
// head_dim 128, 16-byte aligned views with row stride % 8 == 0, rope_dims % 16 == 0 (or no RoPE); other shapes
// return kUnsupported (the caller runs the unfused ops). src/cuda/ops/qk_norm_rope_sage2.cu.
Status qk_norm_rope_sage2(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                          const Tensor* cos, const Tensor* sin, int rope_dims, int num_heads, int head_dim,
                          cudaStream_t stream, Sage2Workspace& ws);

// Mainloop only, on the operands the last sage2_quantize left in `ws`: out [S, heads*128] bf16.
Status sage2_attention_quantized(Tensor& out, cudaStream_t stream, Sage2Workspace& ws);

// Both: out = Sage2(q, k, v), scale 1/sqrt(head_dim), non-causal. head_dim must be 128.
Status sage2_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim, Tensor& out,
                       cudaStream_t stream, Sage2Workspace& ws);

}  // namespace vortex
