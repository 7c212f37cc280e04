// The H3 path of qk_norm_rope (head_dim 128, 4 lanes per head): per-head RMS norm + RoPE of one head held
// in registers by a 4-lane group. Shared by qk_norm_rope.cu and qk_norm_rope_sage2.cu (the same program, so
// the fused Sage2 Q producer writes the same normed bytes); tested through both ops' E0 tests.
#pragma once

#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {

// ---- H3 path: 4 lanes per 128-wide head -----------------------------------------------------------------
// Lane l of a head's group holds chunks c = l + 4 m (m < 4, elements 8 c + i), so the canonical steps
// w = 64 and 32 pair chunks m, m + 2 and m, m + 1 inside the lane; only w = 16 and 8 cross lanes (2 shuffle
// levels on 8 doubles instead of 4 levels per 8 elements: ~8x fewer shuffles per element). RoPE partners
// (chunk c +- rope_dims / 16) come through a per-warp shared-memory copy of the normalized head.
constexpr int kQuadLanes = 4;   // lanes per head
constexpr int kQuadChunks = 4;  // 16-byte chunks per lane (hd = 128)
constexpr int kQuadWarps = 8;
constexpr int kQuadPitch = 20;  // uint4 per group row in shared memory: 16 chunks + 64 B pad (bank spread)
constexpr int kQuadHeadsPerWarp = 32 / kQuadLanes;

// Norm + RoPE of one head held as x (chunks l + 4 m) by a 4-lane group. Every lane of the warp must call it
// (shuffles, __syncwarp); `mine` is the group's [kQuadPitch] shared row; cos_row/sin_row: this head's row of
// the tables (unused when rope_chunks == 0). Returns the output chunks in o.
__device__ __forceinline__ void quad_head(const uint4 (&x)[kQuadChunks], const uint4 (&wv)[kQuadChunks], uint4* mine,
                                          const uint16_t* __restrict__ cos_row, const uint16_t* __restrict__ sin_row,
                                          int l, int rope_chunks, int half_chunks, float eps, uint4 (&o)[kQuadChunks]) {
  // Canonical sum of squares: lane t = 8 c + i holds one square; w = 128 adds +0.0 (skipped).
  double a[2][8];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int k2 = 0; k2 < 4; ++k2) {
      const uint32_t w0 = word(x[m], k2), w2 = word(x[m + 2], k2);
      const double l0 = bf16_lo(w0), h0 = bf16_hi(w0), l2 = bf16_lo(w2), h2 = bf16_hi(w2);
      a[m][2 * k2] = __dadd_rn(__dmul_rn(l0, l0), __dmul_rn(l2, l2));  // w = 64: t += t + 64
      a[m][2 * k2 + 1] = __dadd_rn(__dmul_rn(h0, h0), __dmul_rn(h2, h2));
    }
  }
  double b[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = __dadd_rn(a[0][i], a[1][i]);  // w = 32: chunk m = 0 += m = 1
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = __dadd_rn(b[i], __shfl_down_sync(0xFFFFFFFFu, b[i], 2, kQuadLanes));  // w = 16
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = __dadd_rn(b[i], __shfl_down_sync(0xFFFFFFFFu, b[i], 1, kQuadLanes));  // w = 8
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = __dadd_rn(b[i], b[i + 4]);  // w = 4
#pragma unroll
  for (int i = 0; i < 2; ++i) b[i] = __dadd_rn(b[i], b[i + 2]);                      // w = 2
  const double ss = __shfl_sync(0xFFFFFFFFu, __dadd_rn(b[0], b[1]), 0, kQuadLanes);  // w = 1, from lane 0
  const float rinv = inverse_rms(ss, 128, eps);
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) {  // n = R(fp32(fp32(x * r) * w))
#pragma unroll
    for (int k2 = 0; k2 < 4; ++k2) {
      const uint32_t xw = word(x[m], k2), ww = word(wv[m], k2);
      set_word(o[m], k2,
               f32x2_to_bf16x2(__fmul_rn(__fmul_rn(bf16_lo(xw), rinv), bf16_lo(ww)),
                               __fmul_rn(__fmul_rn(bf16_hi(xw), rinv), bf16_hi(ww))));
    }
  }
  if (rope_chunks == 0) return;
  __syncwarp();  // earlier partner reads of this buffer are done
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) mine[l + 4 * m] = o[m];
  __syncwarp();
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) {
    const int c = l + 4 * m;
    if (c < rope_chunks) {
      const bool first = c < half_chunks;
      const int col = first ? c : c - half_chunks;  // angle chunk shared by chunks col and col + half
      const uint4 cw4 = __ldg(reinterpret_cast<const uint4*>(cos_row) + col);
      const uint4 sw4 = __ldg(reinterpret_cast<const uint4*>(sin_row) + col);
      const uint4 other = mine[first ? c + half_chunks : c - half_chunks];  // rot = [-x2, x1]
      uint4 r;
#pragma unroll
      for (int k2 = 0; k2 < 4; ++k2) {
        const uint32_t ow = word(other, k2), nw = word(o[m], k2), cw = word(cw4, k2), sw = word(sw4, k2);
        const float rlo = first ? -bf16_lo(ow) : bf16_lo(ow), rhi = first ? -bf16_hi(ow) : bf16_hi(ow);
        const uint32_t a2 = f32x2_to_bf16x2(__fmul_rn(bf16_lo(nw), bf16_lo(cw)), __fmul_rn(bf16_hi(nw), bf16_hi(cw)));
        const uint32_t b2 = f32x2_to_bf16x2(__fmul_rn(rlo, bf16_lo(sw)), __fmul_rn(rhi, bf16_hi(sw)));
        set_word(r, k2, f32x2_to_bf16x2(__fadd_rn(bf16_lo(a2), bf16_lo(b2)), __fadd_rn(bf16_hi(a2), bf16_hi(b2))));
      }
      o[m] = r;
    }
  }
}

}  // namespace vortex::cuda_ops
