// Device building blocks shared by the two Sage2 mainloops (sage2_attention.cu: mma.sync, every built
// architecture; sage2_sm90.cu: wgmma, sm_90a only): constants, mma.sync fragments, the exp2 online softmax,
// the FP8 P packing, the epilogue and the kernel parameters. Internal to src/cuda/attention.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "cuda/attention/sage2_attention.h"
#include "ref/sage2_attention.h"
#include "vortex/status.h"

namespace vortex::sage2_detail {
constexpr int kD = kSage2HeadDim;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockQ = kWarps * 16;   // 128 query rows per CTA (one 16-row slab per warp)
constexpr int kBlockK = kSage2BlockK;  // 128 keys per block
constexpr int kStages = 2;
constexpr int kSmemRow = 144;  // 128 bytes + 16 pad: conflict-free 16-byte fragment loads
constexpr int kTileBytes = 128 * kSmemRow;
constexpr int kSmemBytes = kStages * 2 * kTileBytes;  // K and V tiles per stage
static_assert(kBlockQ == kSage2RowPad, "Q tiles must cover the padded rows exactly");

__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void mma_s8(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t fp8x4(float p0, float p1, float p2, float p3) {
  // cvt.rn.satfinite.e4m3x2.f32; element 0 in the lowest byte.
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(p0, p1), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(p2, p3), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// Exact int32 -> fp32 for |x| < 2^22 (|S| <= 127*127*128 < 2^21): (1.5 * 2^23 + x) has ulp 1, so the
// integer add on the float's bits is exact; subtracting 1.5 * 2^23 leaves x. Same value as
// __int2float_rz (the conversion is exact either way) on the ALU/FMA pipes instead of the 16/clk
// conversion unit, which the softmax already loads with ex2 and the FP8 packing.
__device__ __forceinline__ float exact_int_to_float(int x) {
  return __fsub_rn(__int_as_float(x + 0x4B400000), 12582912.0f);
}

// Steps 4-7 of one key block once the thread's raw row maxima of rows r / r+8 are known; s holds the values the
// maxima were taken over (float(S), or float(S) * dq in the last block): the candidates fma(max, c, -delta)
// max-reduced over the quad, alpha = ex2(m_old - m_new), d rescaled, then P = ex2(fma(s, c, -m_new)) in place
// and the row sums of the unrounded P.
__device__ __forceinline__ void softmax_rows_from_max(float max_r, float max_r8, float c, float& m_r, float& m_r8,
                                                      float& d_r, float& d_r8, float& alpha_r, float& alpha_r8,
                                                      float (&s)[16][4]) {
  float cand_r = __fmaf_rn(max_r, c, -kSage2Delta), cand_r8 = __fmaf_rn(max_r8, c, -kSage2Delta);
  cand_r = fmaxf(cand_r, __shfl_xor_sync(0xffffffffu, cand_r, 1));
  cand_r = fmaxf(cand_r, __shfl_xor_sync(0xffffffffu, cand_r, 2));
  cand_r8 = fmaxf(cand_r8, __shfl_xor_sync(0xffffffffu, cand_r8, 1));
  cand_r8 = fmaxf(cand_r8, __shfl_xor_sync(0xffffffffu, cand_r8, 2));
  const float mn_r = fmaxf(m_r, cand_r), mn_r8 = fmaxf(m_r8, cand_r8);
  alpha_r = ex2_approx(__fsub_rn(m_r, mn_r));
  alpha_r8 = ex2_approx(__fsub_rn(m_r8, mn_r8));
  m_r = mn_r;
  m_r8 = mn_r8;
  d_r = __fmul_rn(d_r, alpha_r);
  d_r8 = __fmul_rn(d_r8, alpha_r8);
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
    s[nt][0] = ex2_approx(__fmaf_rn(s[nt][0], c, -mn_r));
    s[nt][1] = ex2_approx(__fmaf_rn(s[nt][1], c, -mn_r));
    s[nt][2] = ex2_approx(__fmaf_rn(s[nt][2], c, -mn_r8));
    s[nt][3] = ex2_approx(__fmaf_rn(s[nt][3], c, -mn_r8));
    d_r = __fadd_rn(d_r, __fadd_rn(s[nt][0], s[nt][1]));
    d_r8 = __fadd_rn(d_r8, __fadd_rn(s[nt][2], s[nt][3]));
  }
}

// One 128-key block of the online softmax for the thread's rows r and r+8 (research §1.7 steps 2-8).
// acc: the int32 S fragment, [16 key groups of 8][c0..c3] = rows r (0,1) / r+8 (2,3), keys
// key0 + 8*i + 2t + {0,1}. Updates m, d; returns alpha and the FP8 P A-fragments for the 4 k32 steps
// (k step kk = keys 32kk..32kk+31, logical k 4t+e <-> keys {2t, 2t+1, 8+2t, 9+2t}[e] of each 16).
// online_softmax_probs: the probabilities (unrounded P, FP32) into s; pack_p: P to the FP8 fragments.
__device__ __forceinline__ void online_softmax_probs(const int (&acc)[16][4], bool last, int64_t key0, int t,
                                                     int64_t seq, float c0, float dq, float& m_r, float& m_r8,
                                                     float& d_r, float& d_r8, float& alpha_r, float& alpha_r8,
                                                     float (&s)[16][4]) {
  float c;
  if (!last) {
    c = c0 * dq;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = exact_int_to_float(acc[nt][e]);
  } else {
    c = c0;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = key0 + nt * 8 + 2 * t + (e & 1);
        s[nt][e] = key < seq ? __fmul_rn(exact_int_to_float(acc[nt][e]), dq) : kSage2MaskValue;
      }
  }
  // Row max as a tree (depth 5 instead of a 32-long dependent chain; max is exact in any order).
  float mx[16], mx8[16];
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
    mx[nt] = fmaxf(s[nt][0], s[nt][1]);
    mx8[nt] = fmaxf(s[nt][2], s[nt][3]);
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) mx[i] = fmaxf(mx[i], mx[i + 8]), mx8[i] = fmaxf(mx8[i], mx8[i + 8]);
#pragma unroll
  for (int i = 0; i < 4; ++i) mx[i] = fmaxf(mx[i], mx[i + 4]), mx8[i] = fmaxf(mx8[i], mx8[i + 4]);
#pragma unroll
  for (int i = 0; i < 2; ++i) mx[i] = fmaxf(mx[i], mx[i + 2]), mx8[i] = fmaxf(mx8[i], mx8[i + 2]);
  mx[0] = fmaxf(mx[0], mx[1]);
  mx8[0] = fmaxf(mx8[0], mx8[1]);
  softmax_rows_from_max(mx[0], mx8[0], c, m_r, m_r8, d_r, d_r8, alpha_r, alpha_r8, s);
}
// online_softmax_probs for a block without masked keys (all but the last), for the wgmma kernel: the same
// steps with fewer instructions on the softmax's critical path (ncu: issue-bound, ~665 instructions per warp
// per block before this).
//  - Row max on the int32 S (VIMNMX3, 16 instead of 31 per row; max is exact in any order); the float
//    candidate fma(float(max), c, -delta) is the same value as before (the conversion is exact).
//  - The same per-element arithmetic as the CPU program: float(S) exactly (exact_int_to_float), then
//    ex2(fma(float(S), c, -m)). Folding the int -> float magic into the FFMA (X * c - (1.5 * 2^23 * c + m))
//    saved 64 FADDs per block but rounds that bias once per row and block: on realistic inputs (large Q/K
//    scales, c ~ 2e-2) the output moved from <= 1.2e-3 to 3.3e-3 rel-L2 away from the CPU program (H200
//    benchmarks/2026-11-29-h200-s8/), so it was not kept.
__device__ __forceinline__ int row_max_s32(const int (&acc)[16][4], int e0) {
  // 32 values acc[nt][e0], acc[nt][e0 + 1] in 16 three-input max operations.
  int l1[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) l1[i] = __vimax3_s32(acc[i][e0], acc[i][e0 + 1], acc[i + 8][e0]);
  int l2[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) l2[i] = __vimax3_s32(l1[2 * i], l1[2 * i + 1], acc[8 + 2 * i][e0 + 1]);
  const int l3a = __vimax3_s32(l2[0], l2[1], acc[9][e0 + 1]);
  const int l3b = __vimax3_s32(l2[2], l2[3], acc[13][e0 + 1]);
  return __vimax3_s32(l3a, l3b, max(acc[11][e0 + 1], acc[15][e0 + 1]));
}
// The conversion is one I2FP.F32.S32 (sm_90 emits I2FP, not the 16/clk I2F, for __int2float_rn; exact below
// 2^24, so the same value as exact_int_to_float's two instructions): with the uniform descriptors below, 15%
// fewer instructions per key block and 928 vs 839 TOPS mainloop (H200,
// benchmarks/2026-11-29-h200-s9/run1-sage2_bench.log).
__device__ __forceinline__ void online_softmax_probs_full(const int (&acc)[16][4], float c, float& m_r, float& m_r8,
                                                          float& d_r, float& d_r8, float& alpha_r, float& alpha_r8,
                                                          float (&s)[16][4]) {
  const float max_r = static_cast<float>(row_max_s32(acc, 0)), max_r8 = static_cast<float>(row_max_s32(acc, 2));
#pragma unroll
  for (int nt = 0; nt < 16; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = __int2float_rn(acc[nt][e]);
  softmax_rows_from_max(max_r, max_r8, c, m_r, m_r8, d_r, d_r8, alpha_r, alpha_r8, s);
}
__device__ __forceinline__ void pack_p(const float (&s)[16][4], uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    pa[kk][0] = fp8x4(s[4 * kk][0], s[4 * kk][1], s[4 * kk + 1][0], s[4 * kk + 1][1]);
    pa[kk][1] = fp8x4(s[4 * kk][2], s[4 * kk][3], s[4 * kk + 1][2], s[4 * kk + 1][3]);
    pa[kk][2] = fp8x4(s[4 * kk + 2][0], s[4 * kk + 2][1], s[4 * kk + 3][0], s[4 * kk + 3][1]);
    pa[kk][3] = fp8x4(s[4 * kk + 2][2], s[4 * kk + 2][3], s[4 * kk + 3][2], s[4 * kk + 3][3]);
  }
}
__device__ __forceinline__ void online_softmax_block(const int (&acc)[16][4], bool last, int64_t key0, int t,
                                                     int64_t seq, float c0, float dq, float& m_r, float& m_r8,
                                                     float& d_r, float& d_r8, float& alpha_r, float& alpha_r8,
                                                     uint32_t (&pa)[4][4]) {
  float s[16][4];
  online_softmax_probs(acc, last, key0, t, seq, c0, dq, m_r, m_r8, d_r, d_r8, alpha_r, alpha_r8, s);
  pack_p(s, pa);
}

// Epilogue for rows row0 (r) and row0 + 8: d over the quad, O * rcp(d) * v_scale, bf16 RN stores.
__device__ __forceinline__ void store_output(const float (&o)[16][4], float d_r, float d_r8, int64_t row0, int t,
                                             const float* v_scale_head, __nv_bfloat16* out, int64_t out_stride,
                                             int64_t seq, int h) {
  d_r = __fadd_rn(d_r, __shfl_xor_sync(0xffffffffu, d_r, 1));
  d_r = __fadd_rn(d_r, __shfl_xor_sync(0xffffffffu, d_r, 2));
  d_r8 = __fadd_rn(d_r8, __shfl_xor_sync(0xffffffffu, d_r8, 1));
  d_r8 = __fadd_rn(d_r8, __shfl_xor_sync(0xffffffffu, d_r8, 2));
  const float inv_r = rcp_approx(d_r), inv_r8 = rcp_approx(d_r8);
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
    const int ch = nt * 8 + 2 * t;
    const float2 sc = *reinterpret_cast<const float2*>(v_scale_head + ch);
    if (row0 < seq) {
      const __nv_bfloat162 val = __floats2bfloat162_rn(__fmul_rn(__fmul_rn(o[nt][0], inv_r), sc.x),
                                                       __fmul_rn(__fmul_rn(o[nt][1], inv_r), sc.y));
      *reinterpret_cast<__nv_bfloat162*>(out + row0 * out_stride + h * kD + ch) = val;
    }
    if (row0 + 8 < seq) {
      const __nv_bfloat162 val = __floats2bfloat162_rn(__fmul_rn(__fmul_rn(o[nt][2], inv_r8), sc.x),
                                                       __fmul_rn(__fmul_rn(o[nt][3], inv_r8), sc.y));
      *reinterpret_cast<__nv_bfloat162*>(out + (row0 + 8) * out_stride + h * kD + ch) = val;
    }
  }
}

struct Sage2Params {
  const int8_t* q;       // [H, P, 128] permuted
  const float* q_scale;  // [H, P/16*8]
  const int8_t* k;       // [H, P, 128] permuted
  const float* k_scale;  // [H, P/128*4]
  const uint8_t* v;      // [H, 128, P] V^T, keys permuted per block
  const float* v_scale;  // [H, 128]
  __nv_bfloat16* out;    // [S, out_stride], head h at column h*128
  int64_t out_stride;
  int64_t seq;
  int64_t padded;
};

// The wgmma mainloop's launcher (sage2_sm90.cu; only in builds with sm_90a, VORTEX_HAVE_SM90_KERNELS). Sets
// the kernel's shared-memory limit once per workspace (the attribute is per device; a workspace serves one).
Status launch_sage2_wgmma(const Sage2Params& prm, dim3 grid, cudaStream_t stream, Sage2Workspace& ws);

}  // namespace vortex::sage2_detail
