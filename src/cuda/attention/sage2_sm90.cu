// Sage2 attention mainloops for sm_90a: INT8 QK^T (s32), exp2 online softmax with the 8.807 offset,
// FP8 P from registers, FP8 PV into a fresh accumulator per 128-key block added into FP32 (two-level),
// epilogue R((O / d) * v_scale) to BF16 token-major [S, heads*128]. Implementations of the same program:
// mma.sync m16n8k32 (8 warps x 16 rows, K/V double-buffered with cp.async) and a warp-specialized
// wgmma m64n128k32 kernel (producer warp + cp.async.bulk/mbarrier ring, two consumer warpgroups). Same
// program as sage2_attention_reference (research/sage2-attention.md §1.7); tested in
// tests/attention/sage2_sm90_test.cpp (two-reference rule), timed by bench/sage2_bench.cpp.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <string>
#include <type_traits>

#include "cuda/attention/sage2_attention.h"
#include "cuda/check.h"
#include "ref/sage2_attention.h"

namespace vortex {
namespace {

constexpr int kD = kSage2HeadDim;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockQ = kWarps * 16;   // 128 query rows per CTA (one 16-row slab per warp)
constexpr int kBlockK = kSage2BlockK;  // 128 keys per block
constexpr int kStages = 2;
constexpr int kSmemRow = 144;          // 128 bytes + 16 pad: conflict-free 16-byte fragment loads
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
__device__ __forceinline__ void mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// S (+)= A B^T, A = Q [64 rows x 32 bytes] and B = K [128 keys x 32 bytes], both from shared memory.
__device__ __forceinline__ void wgmma_qk_s8_ss(int (&acc)[16][4], uint64_t a_desc, uint64_t b_desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p;\n}\n"
      : "+r"(acc[0][0]), "+r"(acc[0][1]), "+r"(acc[0][2]), "+r"(acc[0][3]), "+r"(acc[1][0]), "+r"(acc[1][1]), "+r"(acc[1][2]), "+r"(acc[1][3]), "+r"(acc[2][0]), "+r"(acc[2][1]), "+r"(acc[2][2]), "+r"(acc[2][3]), "+r"(acc[3][0]), "+r"(acc[3][1]), "+r"(acc[3][2]), "+r"(acc[3][3]), "+r"(acc[4][0]), "+r"(acc[4][1]), "+r"(acc[4][2]), "+r"(acc[4][3]), "+r"(acc[5][0]), "+r"(acc[5][1]), "+r"(acc[5][2]), "+r"(acc[5][3]), "+r"(acc[6][0]), "+r"(acc[6][1]), "+r"(acc[6][2]), "+r"(acc[6][3]), "+r"(acc[7][0]), "+r"(acc[7][1]), "+r"(acc[7][2]), "+r"(acc[7][3]), "+r"(acc[8][0]), "+r"(acc[8][1]), "+r"(acc[8][2]), "+r"(acc[8][3]), "+r"(acc[9][0]), "+r"(acc[9][1]), "+r"(acc[9][2]), "+r"(acc[9][3]), "+r"(acc[10][0]), "+r"(acc[10][1]), "+r"(acc[10][2]), "+r"(acc[10][3]), "+r"(acc[11][0]), "+r"(acc[11][1]), "+r"(acc[11][2]), "+r"(acc[11][3]), "+r"(acc[12][0]), "+r"(acc[12][1]), "+r"(acc[12][2]), "+r"(acc[12][3]), "+r"(acc[13][0]), "+r"(acc[13][1]), "+r"(acc[13][2]), "+r"(acc[13][3]), "+r"(acc[14][0]), "+r"(acc[14][1]), "+r"(acc[14][2]), "+r"(acc[14][3]), "+r"(acc[15][0]), "+r"(acc[15][1]), "+r"(acc[15][2]), "+r"(acc[15][3])
      : "l"(a_desc), "l"(b_desc), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_pv_e4m3(float (&acc)[16][4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint64_t b_desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(acc[0][0]), "+f"(acc[0][1]), "+f"(acc[0][2]), "+f"(acc[0][3]), "+f"(acc[1][0]), "+f"(acc[1][1]), "+f"(acc[1][2]), "+f"(acc[1][3]), "+f"(acc[2][0]), "+f"(acc[2][1]), "+f"(acc[2][2]), "+f"(acc[2][3]), "+f"(acc[3][0]), "+f"(acc[3][1]), "+f"(acc[3][2]), "+f"(acc[3][3]), "+f"(acc[4][0]), "+f"(acc[4][1]), "+f"(acc[4][2]), "+f"(acc[4][3]), "+f"(acc[5][0]), "+f"(acc[5][1]), "+f"(acc[5][2]), "+f"(acc[5][3]), "+f"(acc[6][0]), "+f"(acc[6][1]), "+f"(acc[6][2]), "+f"(acc[6][3]), "+f"(acc[7][0]), "+f"(acc[7][1]), "+f"(acc[7][2]), "+f"(acc[7][3]), "+f"(acc[8][0]), "+f"(acc[8][1]), "+f"(acc[8][2]), "+f"(acc[8][3]), "+f"(acc[9][0]), "+f"(acc[9][1]), "+f"(acc[9][2]), "+f"(acc[9][3]), "+f"(acc[10][0]), "+f"(acc[10][1]), "+f"(acc[10][2]), "+f"(acc[10][3]), "+f"(acc[11][0]), "+f"(acc[11][1]), "+f"(acc[11][2]), "+f"(acc[11][3]), "+f"(acc[12][0]), "+f"(acc[12][1]), "+f"(acc[12][2]), "+f"(acc[12][3]), "+f"(acc[13][0]), "+f"(acc[13][1]), "+f"(acc[13][2]), "+f"(acc[13][3]), "+f"(acc[14][0]), "+f"(acc[14][1]), "+f"(acc[14][2]), "+f"(acc[14][3]), "+f"(acc[15][0]), "+f"(acc[15][1]), "+f"(acc[15][2]), "+f"(acc[15][3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b_desc), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// Pins register arrays that wgmma reads or writes asynchronously: the compiler cannot see the
// asynchrony, so without these it could read an accumulator before wgmma.wait_group or reuse the
// A-fragment registers while the tensor core still reads them (CUTLASS's warpgroup_fence_operand).
template <int N, int M>
__device__ __forceinline__ void fence_operands(int (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < M; ++e) asm volatile("" : "+r"(x[i][e])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void fence_operands(float (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < M; ++e) asm volatile("" : "+f"(x[i][e])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void fence_operands(uint32_t (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < M; ++e) asm volatile("" : "+r"(x[i][e])::"memory");
}

// Shared-memory matrix descriptor, no swizzle (K-major 8-row x 16-byte core matrices): LBO = bytes
// between core matrices adjacent along K, SBO = bytes between 8-row groups along M/N.
__device__ __forceinline__ uint64_t smem_desc(const void* smem_ptr, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
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
//    scales, c ~ 2e-2) the output moved from <= 1.2e-3 to 3.3e-3 rel-L2 away from the CPU program
//    (benchmarks/2026-11-29-h200-s8/run2-sage2_test.log), so the FFMA keeps the unfolded form.
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
// fewer instructions per key block and 928 vs 839 TOPS mainloop (benchmarks/2026-11-29-h200-s9/run1-sage2_bench.log).
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
  const int8_t* q;        // [H, P, 128] permuted
  const float* q_scale;   // [H, P/16*8]
  const int8_t* k;        // [H, P, 128] permuted
  const float* k_scale;   // [H, P/128*4]
  const uint8_t* v;       // [H, 128, P] V^T, keys permuted per block
  const float* v_scale;   // [H, 128]
  __nv_bfloat16* out;     // [S, out_stride], head h at column h*128
  int64_t out_stride;
  int64_t seq;
  int64_t padded;
};

__global__ void __launch_bounds__(kThreads, 1) sage2_attention_mma_kernel(const Sage2Params prm) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tile = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int r = lane / 4, t = lane % 4;
  const int64_t P = prm.padded;
  const int blocks = static_cast<int>(P / kBlockK);

  const int8_t* k_head = prm.k + static_cast<int64_t>(h) * P * kD;
  const uint8_t* v_head = prm.v + static_cast<int64_t>(h) * kD * P;
  auto k_tile = [&](int stage) { return smem + stage * 2 * kTileBytes; };
  auto v_tile = [&](int stage) { return smem + stage * 2 * kTileBytes + kTileBytes; };
  auto load_block = [&](int stage, int j) {
    const int8_t* ksrc = k_head + static_cast<int64_t>(j) * kBlockK * kD;  // [128 keys, 128] contiguous
    const uint8_t* vsrc = v_head + static_cast<int64_t>(j) * kBlockK;        // 128 rows at stride P
#pragma unroll
    for (int u = 0; u < (128 * 8) / kThreads; ++u) {
      const int i = tid + u * kThreads, row = i / 8, part = i % 8;
      cp_async16(k_tile(stage) + row * kSmemRow + part * 16, ksrc + row * kD + part * 16);
      cp_async16(v_tile(stage) + row * kSmemRow + part * 16, vsrc + static_cast<int64_t>(row) * P + part * 16);
    }
  };

  load_block(0, 0);
  cp_async_commit();

  // This thread's Q fragments: rows r and r+8 of the warp's slab, its 32 permuted bytes each.
  const int64_t slab = static_cast<int64_t>(tile) * kWarps + warp;
  const int64_t row0 = slab * 16 + r;
  uint32_t qa[8], qb[8];
  {
    const uint4* pa = reinterpret_cast<const uint4*>(prm.q + (static_cast<int64_t>(h) * P + row0) * kD + 32 * t);
    const uint4* pb = reinterpret_cast<const uint4*>(prm.q + (static_cast<int64_t>(h) * P + row0 + 8) * kD + 32 * t);
    const uint4 a0 = pa[0], a1 = pa[1], b0 = pb[0], b1 = pb[1];
    qa[0] = a0.x; qa[1] = a0.y; qa[2] = a0.z; qa[3] = a0.w; qa[4] = a1.x; qa[5] = a1.y; qa[6] = a1.z; qa[7] = a1.w;
    qb[0] = b0.x; qb[1] = b0.y; qb[2] = b0.z; qb[3] = b0.w; qb[4] = b1.x; qb[5] = b1.y; qb[6] = b1.z; qb[7] = b1.w;
  }
  const float q_scale = prm.q_scale[(static_cast<int64_t>(h) * (P / 16) + slab) * 8 + r];  // rows r and r+8
  const float c0 = (1.0f / sqrtf(static_cast<float>(kD))) * kSage2Log2e;
  const float* k_scale_head = prm.k_scale + static_cast<int64_t>(h) * blocks * kSage2KGroupsPerBlock;

  float o[16][4];  // [16 channel tiles][c0..c3]: rows r (0,1) and r+8 (2,3), channels nt*8 + 2t + {0,1}
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_r = kSage2MaskValue, m_r8 = kSage2MaskValue, d_r = 1.0f, d_r8 = 1.0f;

  for (int j = 0; j < blocks; ++j) {
    const int stage = j % kStages;
    if (j + 1 < blocks) {
      load_block((j + 1) % kStages, j + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    // ---- S = Q K^T (int32, exact) ----
    int acc[16][4];
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0;
      const uint4* kp = reinterpret_cast<const uint4*>(k_tile(stage) + (nt * 8 + r) * kSmemRow + 32 * t);
      const uint4 k0 = kp[0], k1 = kp[1];
      const uint32_t kb[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        mma_s8(acc[nt], qa[2 * kk], qb[2 * kk], qa[2 * kk + 1], qb[2 * kk + 1], kb[2 * kk], kb[2 * kk + 1]);
    }

    // ---- online softmax (research §1.7 steps 2-7) -> FP8 P fragments ----
    float alpha_r, alpha_r8;
    uint32_t pa[4][4];
    online_softmax_block(acc, j == blocks - 1, static_cast<int64_t>(j) * kBlockK, t, prm.seq, c0,
                         q_scale * k_scale_head[j * kSage2KGroupsPerBlock + t], m_r, m_r8, d_r, d_r8, alpha_r,
                         alpha_r8, pa);

    // ---- O = O * alpha + (P V)_block: fresh FP32 accumulator per 128-key block ----
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      const uint4* vp = reinterpret_cast<const uint4*>(v_tile(stage) + (nt * 8 + r) * kSmemRow + 32 * t);
      const uint4 v0 = vp[0], v1 = vp[1];
      const uint32_t vb[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
      float blk[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) mma_e4m3(blk, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], vb[2 * kk], vb[2 * kk + 1]);
      o[nt][0] = __fadd_rn(__fmul_rn(o[nt][0], alpha_r), blk[0]);
      o[nt][1] = __fadd_rn(__fmul_rn(o[nt][1], alpha_r), blk[1]);
      o[nt][2] = __fadd_rn(__fmul_rn(o[nt][2], alpha_r8), blk[2]);
      o[nt][3] = __fadd_rn(__fmul_rn(o[nt][3], alpha_r8), blk[3]);
    }
    __syncthreads();  // everyone is done with `stage` before it is refilled
  }

  store_output(o, d_r, d_r8, row0, t, prm.v_scale + h * kD, prm.out, prm.out_stride, prm.seq, h);
}

// ---- warp-specialized wgmma mainloop ----------------------------------------------------------------
// CTA = 128 query rows of one head, 3 warpgroups: two consumers (warpgroup g owns rows 64g..64g+63;
// warp w the 16-row slab tile*8 + w, as in the mma.sync kernel, so Q scale groups and accumulator
// fragments are the same) and a producer whose first thread streams the Q tile (16 KB, once) and a
// ring of kStages {K, V^T} tile pairs (32 KB each) with cp.async.bulk. A full barrier per stage counts
// the bytes in (complete_tx), an empty barrier per stage counts the 8 consumer warps out.
// Inside each consumer the softmax of block j overlaps the PV GEMM of block j-1 (FlashAttention-3's
// intra-warpgroup pipelining): per iteration it issues QK(j) and PV(j-1) back to back, waits for QK(j)
// only, computes P(j) in FP32 while the tensor cores run PV(j-1), then folds PV(j-1) into O and packs
// P(j) to FP8 (after PV(j-1) has read P(j-1): packing earlier made ptxas serialize the wgmmas, C7513).
// Live registers (S, the PV accumulator, O, P: ~230) exceed the 168 that 3 warps per SM sub-partition
// allow, so the producer warpgroup gives its registers away: setmaxnreg 24 / 240 (R237 used, no local
// memory). Measured on the H200 (benchmarks/2026-11-29-h200-sage2-s7/bench-variants-runs4-9.txt): 827-834 TOPS
// vs 744 without the overlap; 3 stages = 2 stages; ping-pong turns between the warpgroups cost 2-7%. Descriptors
// from a base plus constants and the I2FP conversion: 928 TOPS vs 839 without them
// (benchmarks/2026-11-29-h200-s9/run1-sage2_bench.log); the softmax runs ~480 instructions per warp and key
// block against ~1,024 tensor cycles per warpgroup pair.
constexpr uint32_t kCoreLbo = 128, kCoreSbo = 1024;  // sage2_tiled_pos: LBO along K, SBO per 8 rows
constexpr int kTileBytes16K = 16384;                 // one 128-row x 128-byte tiled operand tile
constexpr int kWsConsumerWarpgroups = 2;
constexpr int kWsStages = 2;
constexpr int kWsThreads = kWsConsumerWarpgroups * 128 + 128;
constexpr int kWsSmemBytes = kTileBytes16K + kWsStages * 2 * kTileBytes16K + 256;  // Q, ring, barriers

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Global -> shared bulk copy (async proxy) that signals `bar` with its byte count on completion.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

__global__ void __launch_bounds__(kWsThreads, 1) sage2_attention_wgmma_kernel(const Sage2Params prm) {
  constexpr int kStages = kWsStages;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tile = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t P = prm.padded;
  const int blocks = static_cast<int>(P / kBlockK);
  uint8_t* const q_tile = smem;
  auto k_tile = [&](int s) { return smem + kTileBytes16K + s * 2 * kTileBytes16K; };
  auto v_tile = [&](int s) { return smem + kTileBytes16K + s * 2 * kTileBytes16K + kTileBytes16K; };
  uint64_t* const bars = reinterpret_cast<uint64_t*>(smem + kTileBytes16K + kStages * 2 * kTileBytes16K);
  const uint32_t q_full = smem_u32(&bars[0]);
  auto full = [&](int s) { return smem_u32(&bars[1 + s]); };
  auto empty = [&](int s) { return smem_u32(&bars[1 + kStages + s]); };
  const int8_t* k_head = prm.k + static_cast<int64_t>(h) * P * kD;
  const uint8_t* v_head = prm.v + static_cast<int64_t>(h) * kD * P;
  auto load_kv = [&](int j) {  // one thread: block j into stage j % kStages
    const int s = j % kStages;
    mbar_arrive_expect_tx(full(s), 2 * kTileBytes16K);
    bulk_load(smem_u32(k_tile(s)), k_head + static_cast<int64_t>(j) * kTileBytes16K, kTileBytes16K, full(s));
    bulk_load(smem_u32(v_tile(s)), v_head + static_cast<int64_t>(j) * kTileBytes16K, kTileBytes16K, full(s));
  };
  if (tid == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), kWsConsumerWarpgroups * 4);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // The warp no longer reads stage jb % kStages (block jb): one arrival on its empty barrier.
  auto release_stage = [&](int jb) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(jb % kStages));
  };

  if (warp >= kWsConsumerWarpgroups * 4) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (warp == kWsConsumerWarpgroups * 4 && lane == 0) {
      mbar_arrive_expect_tx(q_full, kTileBytes16K);
      bulk_load(smem_u32(q_tile), prm.q + (static_cast<int64_t>(h) * P + static_cast<int64_t>(tile) * 128) * kD,
                kTileBytes16K, q_full);
      for (int j = 0; j < blocks; ++j) {
        if (j >= kStages) mbar_wait(empty(j % kStages), ((j / kStages) + 1) & 1);
        load_kv(j);
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");

  // The warpgroup index through a shuffle so that ptxas knows it is warp-uniform (CUTLASS's
  // canonical_warp_group_idx) and keeps the wgmma descriptors in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, warp / 4, 0), r = lane / 4, t = lane % 4;
  const int64_t slab = static_cast<int64_t>(tile) * 8 + warp;
  const int64_t row0 = slab * 16 + r;
  const float q_scale = prm.q_scale[(static_cast<int64_t>(h) * (P / 16) + slab) * 8 + r];
  const float c0 = (1.0f / sqrtf(static_cast<float>(kD))) * kSage2Log2e;
  const float* k_scale_head = prm.k_scale + static_cast<int64_t>(h) * blocks * kSage2KGroupsPerBlock;
  const uint8_t* q_rows = q_tile + wg * 8192;

  float o[16][4];
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_r = kSage2MaskValue, m_r8 = kSage2MaskValue, d_r = 1.0f, d_r8 = 1.0f;

  // Descriptor of (tile base + kk * 256 bytes) = base descriptor + kk * 16 (the address field is bytes >> 4;
  // shared addresses < 256 KB never carry out of it); stage s adds s * 2 * 16 KB >> 4. Built per wgmma from
  // the address, the descriptors cost ~70 uniform-datapath instructions per key block (cuobjdump -sass).
  const uint64_t q_desc0 = smem_desc(q_rows, kCoreLbo, kCoreSbo);
  const uint64_t k_desc0 = smem_desc(k_tile(0), kCoreLbo, kCoreSbo);
  const uint64_t v_desc0 = smem_desc(v_tile(0), kCoreLbo, kCoreSbo);
  constexpr uint64_t kKkStep = (2 * kCoreLbo) >> 4, kStageStep = (2 * kTileBytes16K) >> 4;
  auto issue_qk = [&](int (&acc)[16][4], int s) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_qk_s8_ss(acc, q_desc0 + kk * kKkStep, k_desc0 + s * kStageStep + kk * kKkStep, kk > 0 ? 1 : 0);
    wgmma_commit();
  };
  auto issue_pv = [&](float (&blk)[16][4], const uint32_t (&pa)[4][4], int s) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_pv_e4m3(blk, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], v_desc0 + s * kStageStep + kk * kKkStep,
                    kk > 0 ? 1 : 0);
    wgmma_commit();
  };
  auto fold = [&](const float (&blk)[16][4], float a_r, float a_r8) {
    if (__all_sync(0xffffffffu, a_r == 1.0f && a_r8 == 1.0f)) {
#pragma unroll
      for (int nt = 0; nt < 16; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[nt][e] = __fadd_rn(o[nt][e], blk[nt][e]);
    } else {
#pragma unroll
      for (int nt = 0; nt < 16; ++nt) {
        o[nt][0] = __fadd_rn(__fmul_rn(o[nt][0], a_r), blk[nt][0]);
        o[nt][1] = __fadd_rn(__fmul_rn(o[nt][1], a_r), blk[nt][1]);
        o[nt][2] = __fadd_rn(__fmul_rn(o[nt][2], a_r8), blk[nt][2]);
        o[nt][3] = __fadd_rn(__fmul_rn(o[nt][3], a_r8), blk[nt][3]);
      }
    }
  };

  // Accumulators are never zeroed: the first wgmma of each GEMM runs with scale-d = 0.
  int acc[16][4];
  float blk[16][4];
  uint32_t pa_prev[4][4];
  float alpha_prev_r, alpha_prev_r8;
  // K scale of the block being softmaxed, loaded one iteration ahead (a global load at the point of
  // use stalled every block on L2 latency: ncu long-scoreboard 0.64 cycles per issued instruction).
  float ks = k_scale_head[t];
  // Prologue: S(0), its softmax and P(0).
  mbar_wait(q_full, 0);
  mbar_wait(full(0), 0);
  {
    fence_operands(acc);
    wgmma_fence();
    issue_qk(acc, 0);
    wgmma_wait_all();
    fence_operands(acc);
    float p[16][4];
    online_softmax_probs(acc, blocks == 1, 0, t, prm.seq, c0, q_scale * ks, m_r, m_r8, d_r, d_r8,
                         alpha_prev_r, alpha_prev_r8, p);
    pack_p(p, pa_prev);
  }
  float ks_next = blocks > 1 ? k_scale_head[kSage2KGroupsPerBlock + t] : 0.0f;
  // Key block j >= 1: QK(j) and PV(j-1) issued together as two groups; ptxas places the PV wait right
  // after the QK wait (cuobjdump -sass), so the softmax overlaps the other warpgroup's GEMMs rather than
  // this warpgroup's PV (a shared-memory-P variant that overlaps both measured slower). P(j) goes into the
  // A registers only after PV(j-1) has been waited for: the PTX rule for register A operands; written
  // earlier, ptxas coalesced the next P with the in-flight A registers (cuobjdump -sass). The last block
  // (masked keys) is peeled off: with its branch inside the loop ptxas spilled 28 bytes.
  auto key_block = [&](int j, auto last_block) {
    constexpr bool kLast = decltype(last_block)::value;
    const int s = j % kStages, s_prev = (j - 1) % kStages;
    ks = ks_next;
    if (!kLast && j + 1 < blocks) ks_next = k_scale_head[(j + 1) * kSage2KGroupsPerBlock + t];
    mbar_wait(full(s), (j / kStages) & 1);
    fence_operands(acc);
    fence_operands(blk);
    fence_operands(pa_prev);
    wgmma_fence();
    issue_qk(acc, s);                 // group: QK(j)
    issue_pv(blk, pa_prev, s_prev);   // group: PV(j-1)
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // QK(j) done; PV(j-1) runs on
    fence_operands(acc);
    float alpha_r, alpha_r8;
    float p[16][4];
    if constexpr (kLast) {
      online_softmax_probs(acc, true, static_cast<int64_t>(j) * kBlockK, t, prm.seq, c0, q_scale * ks, m_r, m_r8,
                           d_r, d_r8, alpha_r, alpha_r8, p);
    } else {
      online_softmax_probs_full(acc, c0 * (q_scale * ks), m_r, m_r8, d_r, d_r8, alpha_r, alpha_r8, p);
    }
    wgmma_wait_all();                 // PV(j-1) done
    fence_operands(blk);
    fence_operands(pa_prev);
    release_stage(j - 1);             // the warp's reads of stage s_prev are complete
    fold(blk, alpha_prev_r, alpha_prev_r8);
    pack_p(p, pa_prev);
    alpha_prev_r = alpha_r;
    alpha_prev_r8 = alpha_r8;
  };
  for (int j = 1; j < blocks - 1; ++j) key_block(j, std::false_type{});
  if (blocks > 1) key_block(blocks - 1, std::true_type{});
  {
    const int s_last = (blocks - 1) % kStages;
    fence_operands(blk);
    fence_operands(pa_prev);
    wgmma_fence();
    issue_pv(blk, pa_prev, s_last);
    wgmma_wait_all();
    fence_operands(blk);
    fence_operands(pa_prev);
    release_stage(blocks - 1);
    fold(blk, alpha_prev_r, alpha_prev_r8);
  }
  store_output(o, d_r, d_r8, row0, t, prm.v_scale + h * kD, prm.out, prm.out_stride, prm.seq, h);
}

}  // namespace

Status sage2_attention_quantized(Tensor& out, cudaStream_t stream, Sage2Workspace& ws) {
  if (ws.seq <= 0 || !ws.q_int8) return invalid_argument("sage2: workspace is empty; call sage2_quantize first");
  if (!out.defined() || out.device() != Device::kCuda || out.dtype() != DType::kBF16 || out.ndim() != 2)
    return invalid_argument("sage2: out must be a 2-D bf16 CUDA tensor [S, heads*128]");
  if (out.dim(0) != ws.seq || out.dim(1) < static_cast<int64_t>(ws.heads) * kD || out.stride(1) != 1 ||
      out.stride(0) % 2 != 0 || reinterpret_cast<uintptr_t>(out.raw_data()) % 4 != 0)
    return invalid_argument("sage2: out " + out.describe() + " must be [" + std::to_string(ws.seq) + ", >= " +
                            std::to_string(ws.heads * kD) + "] with unit column stride, even row stride, 4-byte aligned");
  if (ws.quantized_for != ws.mainloop)
    return invalid_argument(std::string("sage2: the workspace was quantized for the ") +
                            sage2_mainloop_name(ws.quantized_for) + " mainloop, not " +
                            sage2_mainloop_name(ws.mainloop) + "; call sage2_quantize again");
  static bool smem_configured = false;  // per process; the attribute is per device function
  if (!smem_configured) {
    VORTEX_CUDA_CHECK(cudaFuncSetAttribute(sage2_attention_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           kSmemBytes));
    VORTEX_CUDA_CHECK(cudaFuncSetAttribute(sage2_attention_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           kWsSmemBytes));
    smem_configured = true;
  }
  Sage2Params prm{ws.q_int8, ws.q_scale, ws.k_int8, ws.k_scale, ws.v_fp8, ws.v_scale,
                  static_cast<__nv_bfloat16*>(out.raw_data()), out.stride(0), ws.seq, ws.padded};
  const dim3 grid(static_cast<unsigned>(ws.padded / kBlockQ), static_cast<unsigned>(ws.heads));
  if (ws.mainloop == Sage2Mainloop::kWgmma) {
    sage2_attention_wgmma_kernel<<<grid, kWsThreads, kWsSmemBytes, stream>>>(prm);
    VORTEX_CUDA_LAUNCH_CHECK("sage2_attention_wgmma_kernel");
  } else {
    sage2_attention_mma_kernel<<<grid, kThreads, kSmemBytes, stream>>>(prm);
    VORTEX_CUDA_LAUNCH_CHECK("sage2_attention_mma_kernel");
  }
  return Status::Ok();
}

Status sage2_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim, Tensor& out,
                       cudaStream_t stream, Sage2Workspace& ws) {
  VORTEX_RETURN_IF_ERROR(sage2_quantize(q, k, v, heads, head_dim, stream, ws));
  return sage2_attention_quantized(out, stream, ws);
}

}  // namespace vortex
