// Sage2-compatible attention for sm_90a (backend option `attention = "sage2"`, an E2 approximate mode):
// INT8 Q/K with per-thread scales and K smoothing, FP8 E4M3 P and per-channel V, exp2 online softmax
// with the 448 offset, two-level FP32 PV accumulation (research/sage2-attention.md §1.7, §1.12).
// Reads q, k, v as strided [S, heads*128] bf16 views of the QKV buffer and writes token-major out.
// Quantized bytes are E0 vs src/ref/sage2_attention.h; outputs E1 vs its CPU program (two-reference
// rule). Tested in tests/attention/sage2_sm90_test.cpp; timed by bench/sage2_bench.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// Which sm90 mainloop runs (same program, same bytes except the V^T key order):
//   kMmaSync: mma.sync m16n8k32, 8 warps x 16 rows per CTA (FP8 mma.sync runs as 2x HMMA on sm_90);
//             V^T keys in sage2_v_byte_pos order. THE VALIDATED ONE (default): H200 device runs 1
//             and 2 pass every case; 334 TOPS at the canonical shape.
//   kWgmma:   wgmma m64n128k32 s8 (QK^T) and e4m3 (PV, P from registers), two warpgroups per CTA,
//             cp.async double buffer; V^T keys in sage2_v_slot_pos order.
//   kWgmmaOneWarpgroup: the wgmma mainloop with one warpgroup x 64 rows per CTA (Sage2's CTA_Q),
//             two CTAs per SM; same layouts as kWgmma.
// The two wgmma mainloops are NOT correct yet: on the H200 (device run 2) they match the CPU program
// when S <= 128 (one key block) and are wrong from the second key block on (S = 129: rel-L2 0.08-0.17
// vs the CPU program; S >= 1000: garbage). They also measured only 336-385 TOPS. They are refused
// unless Sage2Workspace::allow_unvalidated_wgmma is set (tests/bench opt in to debug them).
enum class Sage2Mainloop : uint8_t { kWgmma, kMmaSync, kWgmmaOneWarpgroup };
// True when the mainloop reads V^T in sage2_v_slot_order (the wgmma ones).
inline bool sage2_v_slot_order(Sage2Mainloop m) { return m != Sage2Mainloop::kMmaSync; }

// Device scratch for the quantized operands; grows on demand, reused across calls (one stream).
// Layouts (P = tokens padded to 128, H = heads):
//   q_int8   [H, P, 128]  int8, head dim permuted by sage2_qk_byte_pos
//   q_scale  [H, P/16*8]  fp32
//   k_int8   [H, P, 128]  int8 of bf16(K - mean), head dim permuted by sage2_qk_byte_pos
//   k_scale  [H, P/128*4] fp32
//   k_mean   [H, 128]     bf16 bits
//   v_fp8    [H, 128, P]  e4m3 V^T, keys of each 128-block permuted (sage2_v_slot_pos for kWgmma,
//                         sage2_v_byte_pos for kMmaSync)
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

  // Chosen by the caller before sage2_quantize; the V^T layout written follows it.
  Sage2Mainloop mainloop = Sage2Mainloop::kMmaSync;
  Sage2Mainloop quantized_for = Sage2Mainloop::kMmaSync;  // set by sage2_quantize
  // Opt-in for the wgmma mainloops, which fail the multi-block test (see Sage2Mainloop).
  bool allow_unvalidated_wgmma = false;
  // Debugging switch for the wgmma mainloops: one smem stage, no load/compute overlap.
  bool wgmma_single_stage = false;

  int heads = 0;
  int64_t seq = 0;      // tokens of the last quantize call
  int64_t padded = 0;   // sage2_padded_tokens(seq)
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
Status sage2_quantize(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim,
                      cudaStream_t stream, Sage2Workspace& ws);

// Mainloop only, on the operands the last sage2_quantize left in `ws`: out [S, heads*128] bf16.
Status sage2_attention_quantized(Tensor& out, cudaStream_t stream, Sage2Workspace& ws);

// Both: out = Sage2(q, k, v), scale 1/sqrt(head_dim), non-causal. head_dim must be 128.
Status sage2_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim, Tensor& out,
                       cudaStream_t stream, Sage2Workspace& ws);

}  // namespace vortex
