// Owned BF16 attention mainloop for sm_90a (compiled only for sm_90a: the vortex_cuda_sm90 object library). The
// program and the interface are in bf16_attention.h; the host checks in bf16_attention.cpp. Tested in
// tests/attention/bf16_attention_test.cpp (two-reference rule, cuDNN on the same inputs), timed by
// bench/bf16_attention_bench.cpp.
//
// CTA = 128 query rows of one head, 384 threads = 3 warpgroups:
//   warpgroup 2 (producer, setmaxnreg 24): its first thread loads the Q tile once and rings of kStages K and V
//     tiles with TMA (cp.async.bulk.tensor.2d, 128-byte swizzle, one 64-column box per half of the head dim);
//     per stage and operand a full barrier counts the bytes in (complete_tx) and an empty barrier counts the 8
//     consumer warps out (K after S(j), V after PV(j): each is refilled about one key block ahead).
//   warpgroups 0 and 1 (consumers, setmaxnreg 240): rows 64g..64g+63. Per key block j they issue S(j) = Q K(j)^T
//     (wgmma m64n128k16, both operands in shared memory, 8 k-steps) and O += P(j-1) V(j-1) (P in registers, V
//     N-major through the transpose bit), wait for S(j) only, run the softmax of block j while PV(j-1) runs,
//     then wait for PV(j-1), scale O by alpha(j) and pack P(j) to BF16 (the A registers are rewritten only after
//     the wgmma reading them has completed). The two warpgroups take turns issuing (FA3's ping-pong: named
//     barriers 1 and 2, warpgroup 0 first), so one warpgroup's softmax runs under the other's GEMMs.
// Shared memory layout of one 128-row x 128-column bf16 tile: two 16 KB halves (columns 0-63, 64-127), each
// 128 rows x 128 bytes with the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)); 1024-byte
// aligned so the TMA swizzle and the wgmma descriptor swizzle agree.
// Descriptors (PTX ISA "Shared Memory Matrix Layout"; CUTLASS make_gmma_desc's canonical layouts):
//   Q, K (K-major, 128B swizzle): SBO = 1024 (8 rows x 128 bytes), LBO unused (1); k-step kk of 16 columns is
//     half kk / 4 plus (kk % 4) * 32 bytes inside the swizzle row.
//   V as B of P V (N-major, 128B swizzle): LBO = 16384 (the next 64 output columns, the other half), SBO = 1024
//     (the next 8 keys); k-step kk of 16 keys is kk * 2048 bytes.
// head_dim 72 (the Qwen3-VL vision tower's) is the same kernel with 3-D maps (column, head, row) whose columns past 72
// read as zeros: 5 k-steps of S (columns 72-79 zero), O with 72 columns (m64n72k16, 9 accumulator groups).
// head_dim 64 (the video VAE decoder's) keeps one 64-column half per tile (16 KB Q, K and V tiles, 80 KB of ring):
// one TMA box per tile, 4 k-steps of S, O with 64 columns (m64n64k16, 8 accumulator groups).
// ptxas (CUDA 13.0, sm_90a, -Xptxas=-v) and the H200 timings: docs/performance.md "Owned BF16 attention".
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/attention/bf16_attention.h"
#include "cuda/attention/hopper_sm90.cuh"
#include "cuda/check.h"

// wgmma, setmaxnreg and TMA exist only on sm_90a: any other device pass of this file (a misconfigured build) gets a
// kernel that traps instead of a ptxas error.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VORTEX_BF16_ATTN_BODY 0
#else
#define VORTEX_BF16_ATTN_BODY 1
#endif

namespace vortex::bf16_attention_detail {
namespace {

using namespace hopper;

constexpr int kBlockM = 128;                   // query rows per CTA
[[maybe_unused]] constexpr int kBlockN = 128;  // keys per block (unused in the trap-only device passes)
constexpr int kStages = 2;
constexpr int kConsumers = 2;  // consumer warpgroups
constexpr int kThreads = (kConsumers + 1) * 128;
constexpr uint32_t kHalfBytes = 128 * 128;  // 128 rows x 64 bf16
// One Q, K or V tile: 128 rows x 128 bf16 (two halves) at head_dim 128 and 72, 128 rows x 64 bf16 (one half) at 64.
constexpr uint32_t tile_bytes(int d) { return d == 64 ? kHalfBytes : 2 * kHalfBytes; }
constexpr uint32_t barrier_offset(int d) { return tile_bytes(d) * (1 + 2 * kStages); }  // after Q and the ring
constexpr uint32_t smem_bytes(int d) { return barrier_offset(d) + 256 + 1024; }         // + barriers + alignment slack
static_assert(8 * (1 + 4 * kStages) <= 256, "barriers fit their slot");
constexpr float kLog2e = 1.4426950408889634f;

struct Params {  // Q, K and V are read through the tensor maps
  __nv_bfloat16* out;
  int64_t ld_out;
  int64_t seq;  // rows of one sequence; sequence b (blockIdx.z) is rows [b seq, (b + 1) seq) of every operand
  float c;      // log2(e) / sqrt(head_dim)
};

#if VORTEX_BF16_ATTN_BODY
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (uint64_t{1} << 62);
}

#define VX_ACC4(a, i) "+f"(a[i][0]), "+f"(a[i][1]), "+f"(a[i][2]), "+f"(a[i][3])
#define VX_ACC64(a)                                                                                                \
  VX_ACC4(a, 0), VX_ACC4(a, 1), VX_ACC4(a, 2), VX_ACC4(a, 3), VX_ACC4(a, 4), VX_ACC4(a, 5), VX_ACC4(a, 6),         \
      VX_ACC4(a, 7), VX_ACC4(a, 8), VX_ACC4(a, 9), VX_ACC4(a, 10), VX_ACC4(a, 11), VX_ACC4(a, 12), VX_ACC4(a, 13), \
      VX_ACC4(a, 14), VX_ACC4(a, 15)
#define VX_D64                                                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "  \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// acc (+)= A B^T, A = 64 rows x 16 columns (K-major descriptor), B = 128 rows x 16 columns (K-major descriptor).
__device__ __forceinline__ void wgmma_ss(float (&acc)[16][4], uint64_t a_desc, uint64_t b_desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " VX_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : VX_ACC64(acc)
      : "l"(a_desc), "l"(b_desc), "r"(accumulate));
}
// acc += A B, A = 64 rows x 16 keys in registers (bf16x2), B = 16 keys x 128 columns (N-major descriptor).
__device__ __forceinline__ void wgmma_rs(float (&acc)[16][4], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " VX_D64 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : VX_ACC64(acc)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "n"(1));
}
#define VX_ACC36(a)                                                                                        \
  VX_ACC4(a, 0), VX_ACC4(a, 1), VX_ACC4(a, 2), VX_ACC4(a, 3), VX_ACC4(a, 4), VX_ACC4(a, 5), VX_ACC4(a, 6), \
      VX_ACC4(a, 7), VX_ACC4(a, 8)
#define VX_D36                                                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}"
// The same with 72 output columns (head_dim 72): B = 16 keys x 72 columns, 64 in the first half and 8 in the second.
__device__ __forceinline__ void wgmma_rs(float (&acc)[9][4], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 " VX_D36 ", {%36, %37, %38, %39}, %40, p, 1, 1, 1;\n}\n"
      : VX_ACC36(acc)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "n"(1));
}
#define VX_ACC32(a) \
  VX_ACC4(a, 0), VX_ACC4(a, 1), VX_ACC4(a, 2), VX_ACC4(a, 3), VX_ACC4(a, 4), VX_ACC4(a, 5), VX_ACC4(a, 6), VX_ACC4(a, 7)
#define VX_D32                                                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"
// The same with 64 output columns (head_dim 64): B = 16 keys x 64 columns, the tile's one half.
__device__ __forceinline__ void wgmma_rs(float (&acc)[8][4], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " VX_D32 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : VX_ACC32(acc)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "n"(1));
}
#undef VX_ACC4
#undef VX_ACC64
#undef VX_ACC36
#undef VX_ACC32
#undef VX_D64
#undef VX_D36
#undef VX_D32

// One TMA box (64 columns x 128 rows) at element column c0, row c1 into dst; completion counted on bar.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// The same from a 3-D map (columns of a head, head, row): head_dim 72's boxes, columns past the head read as zeros.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lower address / lower column) = lo
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Online softmax of one key block for the thread's rows r (elements 0, 1) and r + 8 (elements 2, 3): s holds the
// raw scores q . k of keys key0 + 8 nt + 2t + (e & 1); on return it holds p = 2^(s c - m c) (unrounded FP32).
// m is the running row max of the raw scores (quad-reduced), l the thread's partial row sum of p, alpha the factor
// that moves O and l from the old max to the new one.
template <bool kMask>
__device__ __forceinline__ void softmax_block(float (&s)[16][4], float c, int64_t key0, int t, int64_t seq, float& m_r,
                                              float& m_r8, float& l_r, float& l_r8, float& alpha_r, float& alpha_r8) {
  if constexpr (kMask) {
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (key0 + nt * 8 + 2 * t + (e & 1) >= seq) s[nt][e] = -INFINITY;
  }
  // Row max as a tree (max is exact in any order).
  float mx[8], mx8[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    mx[i] = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i + 8][0], s[i + 8][1]));
    mx8[i] = fmaxf(fmaxf(s[i][2], s[i][3]), fmaxf(s[i + 8][2], s[i + 8][3]));
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) mx[i] = fmaxf(mx[i], mx[i + 4]), mx8[i] = fmaxf(mx8[i], mx8[i + 4]);
  float b_r = fmaxf(fmaxf(mx[0], mx[1]), fmaxf(mx[2], mx[3]));
  float b_r8 = fmaxf(fmaxf(mx8[0], mx8[1]), fmaxf(mx8[2], mx8[3]));
  b_r = fmaxf(b_r, __shfl_xor_sync(0xffffffffu, b_r, 1));
  b_r = fmaxf(b_r, __shfl_xor_sync(0xffffffffu, b_r, 2));
  b_r8 = fmaxf(b_r8, __shfl_xor_sync(0xffffffffu, b_r8, 1));
  b_r8 = fmaxf(b_r8, __shfl_xor_sync(0xffffffffu, b_r8, 2));
  const float mn_r = fmaxf(m_r, b_r), mn_r8 = fmaxf(m_r8, b_r8);  // finite: every block has a valid key
  alpha_r = ex2(__fmul_rn(__fsub_rn(m_r, mn_r), c));              // m = -inf (first block): 0
  alpha_r8 = ex2(__fmul_rn(__fsub_rn(m_r8, mn_r8), c));
  m_r = mn_r;
  m_r8 = mn_r8;
  const float mc_r = __fmul_rn(mn_r, c), mc_r8 = __fmul_rn(mn_r8, c);
  float sum_r = 0.0f, sum_r8 = 0.0f;
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
    s[nt][0] = ex2(__fmaf_rn(s[nt][0], c, -mc_r));
    s[nt][1] = ex2(__fmaf_rn(s[nt][1], c, -mc_r));
    s[nt][2] = ex2(__fmaf_rn(s[nt][2], c, -mc_r8));
    s[nt][3] = ex2(__fmaf_rn(s[nt][3], c, -mc_r8));
    sum_r = __fadd_rn(sum_r, __fadd_rn(s[nt][0], s[nt][1]));
    sum_r8 = __fadd_rn(sum_r8, __fadd_rn(s[nt][2], s[nt][3]));
  }
  l_r = __fmaf_rn(l_r, alpha_r, sum_r);
  l_r8 = __fmaf_rn(l_r8, alpha_r8, sum_r8);
}

// P (FP32, accumulator layout of S) -> the BF16 A fragments of the 8 k-steps of P V: k-step kk covers keys
// 16kk..16kk+15 = accumulator groups 2kk (keys +0..7) and 2kk+1 (keys +8..15); registers {row r, keys 2t..2t+1},
// {row r+8, keys 2t..}, {row r, keys 8+2t..}, {row r+8, keys 8+2t..}.
__device__ __forceinline__ void pack_p(const float (&p)[16][4], uint32_t (&pa)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    pa[kk][0] = pack_bf16(p[2 * kk][0], p[2 * kk][1]);
    pa[kk][1] = pack_bf16(p[2 * kk][2], p[2 * kk][3]);
    pa[kk][2] = pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]);
    pa[kk][3] = pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3]);
  }
}

// kD = 128, or 72: the tiles keep 128 columns, loaded from a 3-D map (column, head, row) whose columns past 72 read as
// zeros (TMA's out-of-bounds fill), so S = Q K^T takes 5 k-steps over columns 0-79 of which 72-79 are zero in Q and
// K; O += P V has 72 columns (m64n72k16). kD = 64: tiles of one 64-column half (one TMA box from the 2-D map), 4
// k-steps of S, O += P V with 64 columns (m64n64k16); the ring's stages are half as large.
template <int kD, int kPvN>
__global__ void __launch_bounds__(kThreads, 1)
    bf16_attention_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                          const __grid_constant__ CUtensorMap tm_v, const Params prm) {
  static_assert(kD == 128 || kD == 72 || kD == 64, "head_dim 128, 72 or 64");
  static_assert(kPvN == kD || (kD == 72 && kPvN == 128), "P V over the head's columns or the whole tile");
  constexpr int kNT = kPvN / 8;            // 8-column groups of O (kPvN 128 at kD 72: columns 72-127 are zero)
  constexpr int kNTStore = kD / 8;         // the groups written out
  constexpr int kKSteps = (kD + 15) / 16;  // 16-column k-steps of Q K^T
  constexpr uint32_t kTileBytes = tile_bytes(kD);
  constexpr uint32_t kBarrierOffset = barrier_offset(kD);
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const int tile = blockIdx.x, h = blockIdx.y;
  const int row_base = static_cast<int>(blockIdx.z * prm.seq);  // this sequence's first row in the operands
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int blocks = static_cast<int>((prm.seq + kBlockN - 1) / kBlockN);
  const uint32_t q_smem = base;
  auto k_smem = [&](int s) { return base + kTileBytes * (1 + 2 * s); };
  auto v_smem = [&](int s) { return base + kTileBytes * (2 + 2 * s); };
  // K and V have their own barriers: a K stage is released once S(j) is computed and a V stage once PV(j) is,
  // so the producer refills each about one key block ahead of its use.
  const uint32_t q_full = base + kBarrierOffset;
  auto full_k = [&](int s) { return base + kBarrierOffset + 8 * (1 + s); };
  auto full_v = [&](int s) { return base + kBarrierOffset + 8 * (1 + kStages + s); };
  auto empty_k = [&](int s) { return base + kBarrierOffset + 8 * (1 + 2 * kStages + s); };
  auto empty_v = [&](int s) { return base + kBarrierOffset + 8 * (1 + 3 * kStages + s); };
  if (tid == 0) {
    mbar_init(q_full, 1);  // one producer thread arrives (with the expected bytes)
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_k(s), 1);
      mbar_init(full_v(s), 1);
      mbar_init(empty_k(s), kConsumers * 4);  // one arrival per consumer warp
      mbar_init(empty_v(s), kConsumers * 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp >= kConsumers * 4) {  // producer warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (warp == kConsumers * 4 && lane == 0) {
      const int col = h * kD;  // kD 128 and 64: the head's first column in the 2-D maps
      (void)col;
      mbar_arrive_expect_tx(q_full, kTileBytes);
      // Two 64-column boxes per tile: 2-D at the head's columns (kD 128), 3-D at (0 | 64, head, row) (kD 72); one
      // 2-D box at the head's columns (kD 64).
      auto load = [&](uint32_t dst, const CUtensorMap* map, int row, uint32_t bar) {
        if constexpr (kD == 64) {
          tma_load_2d(dst, map, col, row, bar);
        } else if constexpr (kD == 72) {
          tma_load_3d(dst, map, 0, h, row, bar);
          tma_load_3d(dst + kHalfBytes, map, 64, h, row, bar);
        } else {
          tma_load_2d(dst, map, col, row, bar);
          tma_load_2d(dst + kHalfBytes, map, col + 64, row, bar);
        }
      };
      load(q_smem, &tm_q, row_base + tile * kBlockM, q_full);
      for (int j = 0; j < blocks; ++j) {
        const int s = j % kStages;
        const uint32_t parity = ((j / kStages) + 1) & 1;  // the release of block j - kStages
        if (j >= kStages) mbar_wait(empty_k(s), parity);
        mbar_arrive_expect_tx(full_k(s), kTileBytes);
        load(k_smem(s), &tm_k, row_base + j * kBlockN, full_k(s));
        if (j >= kStages) mbar_wait(empty_v(s), parity);
        mbar_arrive_expect_tx(full_v(s), kTileBytes);
        load(v_smem(s), &tm_v, row_base + j * kBlockN, full_v(s));
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");

  // Warp-uniform warpgroup index through a shuffle (keeps the descriptors in uniform registers).
  const int wg = __shfl_sync(0xffffffffu, warp / 4, 0);
  const int r = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(tile) * kBlockM + wg * 64 + (warp % 4) * 16 + r;  // in the sequence
  const float c = prm.c;

  // Descriptor arithmetic in 16-byte units (the address field is bytes >> 4; < 256 KB never carries out of it).
  const uint64_t q_desc0 = desc_sw128(q_smem + wg * 64 * 128, 16, 1024);
  const uint64_t k_desc0 = desc_sw128(k_smem(0), 16, 1024);
  const uint64_t v_desc0 = desc_sw128(v_smem(0), kHalfBytes, 1024);
  constexpr uint64_t kStageStep = (2 * kTileBytes) >> 4;
  auto issue_qk = [&](float(&acc)[16][4], int s) {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      const uint64_t off = (kk / 4) * (kHalfBytes >> 4) + (kk % 4) * 2;  // half + 32 bytes per k-step
      wgmma_ss(acc, q_desc0 + off, k_desc0 + s * kStageStep + off, kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](float(&o)[kNT][4], const uint32_t(&pa)[8][4], int s) {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) wgmma_rs(o, pa[kk], v_desc0 + s * kStageStep + kk * (2048 >> 4));
    wgmma_commit();
  };
  auto release = [&](uint32_t bar) {  // this warp no longer reads the stage behind `bar`
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };
  // FA3's warpgroup scheduling: a warpgroup issues on its turn (barrier 1 + wg) and hands the turn over.
  // Warpgroup 1 gives warpgroup 0 the first turn and skips the hand-over after its last one (balanced counts).
  auto turn_begin = [&] { named_sync(1 + wg); };
  auto turn_end = [&](bool last) {
    if (!(last && wg == 1)) named_arrive(1 + (wg ^ 1));
  };
  if (wg == 1) named_arrive(1);

  float o[kNT][4];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_r = -INFINITY, m_r8 = -INFINITY, l_r = 0.0f, l_r8 = 0.0f;
  float acc[16][4];
  uint32_t pa[8][4];

  // Prologue: S(0), its softmax, P(0).
  mbar_wait(q_full, 0);
  mbar_wait(full_k(0), 0);
  {
    turn_begin();
    fence_operands(acc);
    wgmma_fence();
    issue_qk(acc, 0);
    turn_end(false);
    wgmma_wait<0>();
    fence_operands(acc);
    release(empty_k(0));
    float alpha_r, alpha_r8;  // O is zero: nothing to rescale
    if (blocks == 1) softmax_block<true>(acc, c, 0, t, prm.seq, m_r, m_r8, l_r, l_r8, alpha_r, alpha_r8);
    else softmax_block<false>(acc, c, 0, t, prm.seq, m_r, m_r8, l_r, l_r8, alpha_r, alpha_r8);
    pack_p(acc, pa);
  }
  // Key block j >= 1: S(j) and PV(j-1) as two commit groups; the last block (masked keys) is peeled off.
  auto key_block = [&](int j, auto last_block) {
    constexpr bool kLast = decltype(last_block)::value;
    const int s = j % kStages, s_prev = (j - 1) % kStages;
    mbar_wait(full_k(s), (j / kStages) & 1);
    mbar_wait(full_v(s_prev), ((j - 1) / kStages) & 1);
    turn_begin();
    fence_operands(acc);
    fence_operands(o);
    fence_operands(pa);
    wgmma_fence();
    issue_qk(acc, s);         // group: S(j)
    issue_pv(o, pa, s_prev);  // group: O += P(j-1) V(j-1)
    turn_end(false);
    wgmma_wait<1>();  // S(j) done; PV(j-1) runs on
    fence_operands(acc);
    release(empty_k(s));
    float alpha_r, alpha_r8;
    softmax_block<kLast>(acc, c, static_cast<int64_t>(j) * kBlockN, t, prm.seq, m_r, m_r8, l_r, l_r8, alpha_r,
                         alpha_r8);
    wgmma_wait<0>();  // PV(j-1) done: O final for block j-1, the P registers free
    fence_operands(o);
    fence_operands(pa);
    release(empty_v(s_prev));
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      o[nt][0] = __fmul_rn(o[nt][0], alpha_r);
      o[nt][1] = __fmul_rn(o[nt][1], alpha_r);
      o[nt][2] = __fmul_rn(o[nt][2], alpha_r8);
      o[nt][3] = __fmul_rn(o[nt][3], alpha_r8);
    }
    pack_p(acc, pa);
  };
  for (int j = 1; j < blocks - 1; ++j) key_block(j, std::false_type{});
  if (blocks > 1) key_block(blocks - 1, std::true_type{});
  {
    const int s_last = (blocks - 1) % kStages;
    mbar_wait(full_v(s_last), ((blocks - 1) / kStages) & 1);
    turn_begin();
    fence_operands(o);
    fence_operands(pa);
    wgmma_fence();
    issue_pv(o, pa, s_last);
    turn_end(true);
    wgmma_wait<0>();
    fence_operands(o);
    fence_operands(pa);
    release(empty_v(s_last));
  }

  // Epilogue: l over the quad, out = R_bf16(O / l) for rows row0 and row0 + 8.
  l_r = __fadd_rn(l_r, __shfl_xor_sync(0xffffffffu, l_r, 1));
  l_r = __fadd_rn(l_r, __shfl_xor_sync(0xffffffffu, l_r, 2));
  l_r8 = __fadd_rn(l_r8, __shfl_xor_sync(0xffffffffu, l_r8, 1));
  l_r8 = __fadd_rn(l_r8, __shfl_xor_sync(0xffffffffu, l_r8, 2));
  const float inv_r = __frcp_rn(l_r), inv_r8 = __frcp_rn(l_r8);
  __nv_bfloat16* out_r = prm.out + (row_base + row0) * prm.ld_out + static_cast<int64_t>(h) * kD + 2 * t;
  __nv_bfloat16* out_r8 = out_r + 8 * prm.ld_out;
  const bool ok_r = row0 < prm.seq, ok_r8 = row0 + 8 < prm.seq;
#pragma unroll
  for (int nt = 0; nt < kNTStore; ++nt) {
    if (ok_r)
      *reinterpret_cast<__nv_bfloat162*>(out_r + nt * 8) =
          __floats2bfloat162_rn(__fmul_rn(o[nt][0], inv_r), __fmul_rn(o[nt][1], inv_r));
    if (ok_r8)
      *reinterpret_cast<__nv_bfloat162*>(out_r8 + nt * 8) =
          __floats2bfloat162_rn(__fmul_rn(o[nt][2], inv_r8), __fmul_rn(o[nt][3], inv_r8));
  }
}
#else
template <int kD, int kPvN>
__global__ void bf16_attention_kernel(const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap,
                                      const __grid_constant__ CUtensorMap, const Params) {
  __trap();
}
#endif

// cuTensorMapEncodeTiled through the runtime's driver entry point (no libcuda link dependency).
Result<PFN_cuTensorMapEncodeTiled_v12000> tensor_map_encoder() {
  static std::once_flag once;
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static cudaError_t err = cudaSuccess;
  static cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSuccess;
  std::call_once(once, [] {
    void* p = nullptr;
    err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &query);
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  });
  if (err != cudaSuccess || query != cudaDriverEntryPointSuccess || fn == nullptr)
    return Status(ErrorCode::kCuda, std::string("bf16_attention: cuTensorMapEncodeTiled is not available (") +
                                        cudaGetErrorString(err) + ")");
  return fn;
}

// 2-D map over one operand view: columns [0, width) of rows [0, seq), row stride ld elements; boxes of 64 columns
// x 128 rows (128 bytes wide: the 128-byte swizzle span), rows past seq read as zeros.
Result<CUtensorMap> make_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const void* ptr, int64_t width, int64_t seq,
                             int64_t ld, const char* name) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(width), static_cast<cuuint64_t>(seq)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {64, 128};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult res = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS)
    return Status(ErrorCode::kCuda, std::string("bf16_attention: cuTensorMapEncodeTiled(") + name +
                                        ") failed with CUresult " + std::to_string(static_cast<int>(res)));
  return map;
}

// head_dim 72: a 3-D map (72 columns, heads, rows; strides 144 bytes and ld elements) with boxes of 64 columns x 1 head
// x 128 rows, laid out in shared memory as the 2-D box; columns 72-127 of the second box and rows past seq read as
// zeros.
Result<CUtensorMap> make_map_72(PFN_cuTensorMapEncodeTiled_v12000 encode, const void* ptr, int heads, int64_t seq,
                                int64_t ld, const char* name) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {72, static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(seq)};
  const cuuint64_t strides[2] = {72 * 2, static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[3] = {64, 1, 128};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult res = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(ptr), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS)
    return Status(ErrorCode::kCuda, std::string("bf16_attention: cuTensorMapEncodeTiled(") + name +
                                        ", head_dim 72) failed with CUresult " + std::to_string(static_cast<int>(res)));
  return map;
}

template <int kD, int kPvN>
Status launch(const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v, const Params& prm, dim3 grid,
              cudaStream_t stream) {
  // The shared-memory limit is a per-device attribute: set once per device and head size (off the timed path).
  static std::mutex mu;
  static std::vector<int> configured;
  int device = 0;
  VORTEX_CUDA_CHECK(cudaGetDevice(&device));
  {
    std::lock_guard<std::mutex> lock(mu);
    if (std::find(configured.begin(), configured.end(), device) == configured.end()) {
      VORTEX_CUDA_CHECK(cudaFuncSetAttribute(bf16_attention_kernel<kD, kPvN>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes(kD)));
      configured.push_back(device);
    }
  }
  bf16_attention_kernel<kD, kPvN><<<grid, kThreads, smem_bytes(kD), stream>>>(q, k, v, prm);
  VORTEX_CUDA_LAUNCH_CHECK("bf16_attention_kernel");
  return Status::Ok();
}

}  // namespace

Status launch_bf16_attention_sm90(const Bf16AttentionArgs& args, cudaStream_t stream) {
  if (args.head_dim != 128 && args.head_dim != 72 && args.head_dim != 64)
    return unsupported("bf16_attention: head_dim must be 128, 72 or 64, got " + std::to_string(args.head_dim));
  const int kd = args.head_dim;
  const Params prm{static_cast<__nv_bfloat16*>(args.out), args.ld_out, args.seq,
                   kLog2e / std::sqrt(static_cast<float>(kd))};
  const dim3 grid(static_cast<unsigned>((args.seq + kBlockM - 1) / kBlockM), static_cast<unsigned>(args.heads),
                  static_cast<unsigned>(args.batch));
  auto encode = tensor_map_encoder();
  if (!encode.ok()) return encode.status();
  // One map over all sequences' rows; rows past the last read as zeros.
  const int64_t width = static_cast<int64_t>(args.heads) * kd, rows = args.seq * args.batch;
  auto map = [&](const void* p, int64_t ld, const char* name) {
    return kd == 72 ? make_map_72(*encode, p, args.heads, rows, ld, name) : make_map(*encode, p, width, rows, ld, name);
  };
  auto q = map(args.q, args.ld_q, "q");
  if (!q.ok()) return q.status();
  auto k = map(args.k, args.ld_k, "k");
  if (!k.ok()) return k.status();
  auto v = map(args.v, args.ld_v, "v");
  if (!v.ok()) return v.status();
  if (kd == 72)
    return args.pv_full_tile ? launch<72, 128>(*q, *k, *v, prm, grid, stream)
                             : launch<72, 72>(*q, *k, *v, prm, grid, stream);
  if (kd == 64) return launch<64, 64>(*q, *k, *v, prm, grid, stream);
  return launch<128, 128>(*q, *k, *v, prm, grid, stream);
}

}  // namespace vortex::bf16_attention_detail
