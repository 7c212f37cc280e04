// CPU reference of the Sage2 SM90 attention program (SageAttention2's SM90 kernel).
// Two parts: (1) the quantization pre-pass — K token mean, Q/K INT8 per-thread groups, V per-channel
// FP8 — whose bytes and scales are the E0 contract the CUDA quantization kernels must reproduce;
// (2) the attention program on those bytes (exp2 online softmax with the 8.807 offset, FP8 P,
// two-level PV accumulation), the same-program reference of the two-reference rule (docs/numerics.md).
// Also the storage permutations shared with the kernels. Tested in tests/attention/sage2_ref_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "core/philox.h"  // VORTEX_HD
#include "vortex/status.h"

namespace vortex {

// ---- The program's constants (must match, research §1.12) ---------------------------------------
constexpr int kSage2HeadDim = 128;  // only d = 128 (the H3 head dim)
constexpr int kSage2BlockK = 128;   // keys per block: scale groups + two-level accumulation
constexpr int kSage2SlabQ = 16;     // Q rows per MMA slab; groups are rows {r, r+8}
constexpr int kSage2QGroupsPerSlab = 8;
constexpr int kSage2KGroupsPerBlock = 4;  // keys with (idx mod 8) in {2t, 2t+1}
constexpr int kSage2RowPad = 128;         // Q and K/V token padding (CTA_Q = CTA_K = 128)
constexpr float kSage2Delta = 8.807f;     // S_FP8_OFFSET: log2(448) rounded as in Sage2
constexpr float kSage2MaskValue = -5.0e6f;
constexpr float kSage2Log2e = 1.44269504088896340736f;
constexpr float kSage2Fp8Max = 448.0f;
// V channels whose amax is below this floor use it instead (Sage2 emits NaN for an all-zero
// channel: 0 * (448 / 0)). 1e-30 keeps 448/amax finite in FP32; such a channel quantizes to zeros
// and outputs exact zeros. Values below 1e-30 are far under BF16 activations' useful range.
constexpr float kSage2VAmaxFloor = 1e-30f;
// Canonical K-mean reduction: FP64, tokens in chunks of this size summed in ascending order, chunk
// sums then added in ascending chunk order, divided by S in FP64, rounded once to BF16.
constexpr int kSage2MeanChunk = 256;

inline int64_t sage2_padded_tokens(int64_t seq) { return (seq + kSage2RowPad - 1) / kSage2RowPad * kSage2RowPad; }

// Storage permutations (layout only, numerically irrelevant): byte position, inside one 128-byte
// row, of logical index `i` in [0, 128). Q/K rows are permuted over the head dim so that one thread's
// mma.m16n8k32 A/B fragments (4 consecutive k at 4t and 16+4t of each 32-wide k step) are 32
// contiguous bytes; V^T rows (one channel, one 128-key block) are permuted over keys so that the same
// holds for the FP8 PV B operand AND the logical k order matches the P registers of the QK
// accumulator (keys 2t, 2t+1, 8+2t, 9+2t of each 16 at k = 4t..4t+3; Sage2's 0,1,8,9,2,3,... order).
VORTEX_HD int sage2_qk_byte_pos(int d) {
  const int kk = d / 32, w = d % 32, half = w / 16, j = w % 16;
  return (j / 4) * 32 + kk * 8 + half * 4 + (j % 4);
}
VORTEX_HD int sage2_v_byte_pos(int key_in_block) {
  const int kk = key_in_block / 32, w = key_in_block % 32, half = w / 16, u = w % 16;
  const int t = (u % 8) / 2, e = (u % 2) + 2 * (u / 8);
  return t * 32 + kk * 8 + half * 4 + e;
}

// The same V^T permutation for the wgmma mainloop: keys stored in the wgmma k ("slot") order, so that
// slot 32kk + 16*half + 4t + e holds key 32kk + 16*half + {2t, 2t+1, 8+2t, 9+2t}[e] and 16-byte
// chunks of a row are whole 8x16-byte core matrices rows of the B operand.
VORTEX_HD int sage2_v_slot_pos(int key_in_block) {
  const int kk = key_in_block / 32, w = key_in_block % 32, half = w / 16, u = w % 16;
  const int t = (u % 8) / 2, e = (u % 2) + 2 * (u / 8);
  return kk * 32 + half * 16 + t * 4 + e;
}

// The tiled layout of the warp-specialized wgmma mainloop: Q/K rows (natural head-dim order) and
// V^T channel rows (keys in sage2_v_slot_pos order) stored as K-major 8-row x 16-byte core matrices,
// so one 128-row tile is 16 KB contiguous and lands in shared memory with one bulk copy, already in
// the wgmma no-swizzle operand layout (LBO 128 B along K, SBO 1024 B between 8-row groups).
// Byte offset of (row, byte b) inside a head's [rows, 128] operand:
VORTEX_HD int64_t sage2_tiled_pos(int64_t row, int b) {
  return (row / 8) * 1024 + (b / 16) * 128 + (row % 8) * 16 + (b % 16);
}
// Byte offset of V^T (channel ch, key) inside a head's [128, P] operand: 128-key blocks of 16 KB.
VORTEX_HD int64_t sage2_tiled_v_pos(int ch, int64_t key) {
  return (key / 128) * 16384 + sage2_tiled_pos(ch, sage2_v_slot_pos(static_cast<int>(key % 128)));
}

// One bf16 activation matrix seen as heads: element (token s, head h, dim c) at
// data[s * row_stride + h * 128 + c] (a strided Q/K/V view of the [S, 3*7168] QKV buffer).
struct Sage2HostInput {
  const uint16_t* data = nullptr;  // bf16 bits
  int64_t row_stride = 0;          // elements
};

// The quantized operands, logical (unpermuted) order. P = sage2_padded_tokens(seq).
struct Sage2Quantized {
  int64_t seq = 0;
  int heads = 0;
  int64_t padded = 0;
  std::vector<int8_t> q;         // [H, P, 128] int8, rows >= seq are 0
  std::vector<float> q_scale;    // [H, P/16 * 8] fp32, group (slab, r) = rows slab*16 + {r, r+8}
  std::vector<uint16_t> k_mean;  // [H, 128] bf16 bits, mean over the seq real tokens
  std::vector<int8_t> k;         // [H, P, 128] int8 of bf16(K - mean), rows >= seq are 0
  std::vector<float> k_scale;    // [H, P/128 * 4] fp32, group (block, t)
  std::vector<uint8_t> v;        // [H, 128, P] e4m3 (V^T, keys in order), keys >= seq are 0
  std::vector<float> v_scale;    // [H, 128] fp32 = amax / 448 (amax floored)
};

// Quantization pre-pass (E0 contract). Q/K: scale = amax/127 + 1e-7 (FP32 div, add), x/scale (FP32
// div), + 0.5*sign (FP32 add), truncate: Sage2's default Triton per-thread rule (round half away).
// V: mult = 448/amax (FP32 div), e4m3_rn_satfinite(v * mult), v_scale = amax/448.
Result<Sage2Quantized> sage2_quantize_reference(Sage2HostInput q, Sage2HostInput k, Sage2HostInput v, int64_t seq,
                                                int heads);
// Its two halves, each writing only its own operands of `out` (sized for seq x heads first; fields of another
// shape are discarded): Q alone (what qk_norm_rope_sage2 fuses), and K/V (the pre-pass that stays separate:
// K smoothing needs the mean over all seq tokens). sage2_quantize_reference = both.
Status sage2_quantize_q_reference(Sage2HostInput q, int64_t seq, int heads, Sage2Quantized& out);
Status sage2_quantize_kv_reference(Sage2HostInput k, Sage2HostInput v, int64_t seq, int heads, Sage2Quantized& out);

// The attention program on quantized operands, for the listed query rows of head `head`, with
// sm_scale = 1/sqrt(128). Returns [rows.size(), 128] fp32 values that are exactly representable in
// BF16 (the epilogue's R(...)). exp2 is exp2f here (ex2.approx on the GPU) and the per-block PV sum
// is FP64 rounded to FP32 (the GPU's tensor-core accumulator): the E1 differences.
std::vector<float> sage2_attention_reference(const Sage2Quantized& quant, int head, const std::vector<int64_t>& rows);

// FP64 softmax(q k^T / sqrt(128)) v on the unquantized bf16 inputs, same row selection; fp64 out.
std::vector<double> attention_fp64_reference(Sage2HostInput q, Sage2HostInput k, Sage2HostInput v, int64_t seq,
                                             int head, const std::vector<int64_t>& rows);

}  // namespace vortex
