// NVFP4 producers (research/nvfp4-fp8-gemm.md §1.13): amax -> g, then pack: E2M1 hi-first pairs and the E4M3
// scales in the 128x4 tile. Main path (cols % 16 == 0, 16-byte aligned rows): one lane per 16-byte chunk (half a
// block), warp-contiguous loads/stores; H200 at S = 37810: plain K 5376 0.367 ms = 60.4% of copy BW (the old
// thread-per-64-elements pack: 0.514), K 14336 0.948 (1.345); modulated 0.578 ms = 0.99x of unfused, SwiGLU 1.480
// ms = 1.15x faster than unfused (benchmarks/2026-11-29-h200-s7-bw/nvfp4_bench.log). Other shapes: one thread per
// (row, 4 blocks), element loads. The BF16 input comes from a Source policy: a plain tensor, the modulation of the
// RMSNorm output, or SwiGLU of the FC1 output (recomputed exactly as modulate.cu / swiglu.cu do, never written).
// rcp/div/mul/min are pinned with inline PTX (.approx.ftz as comfy-kitchen's fast-math build emits them). Also the
// device probes of those instructions. E0 vs src/ref/nvfp4_quantize.cpp in tests/cuda/nvfp4_quantize_test.cu.
#include "cuda/ops/nvfp4_quantize.h"

#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <string>

#include "core/philox.h"
#include "cuda/check.h"
#include "cuda/ops/common.cuh"
#include "cuda/ops/ops_internal.h"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerThread = 4;  // one 4-byte word of a scale tile row
constexpr float kInv2688 = 0x1.861862p-12f;  // 0x39C30C31 = RN_f32(1/2688)

// ---- pinned instructions ------------------------------------------------------------------------------
__device__ __forceinline__ float rcp_approx_ftz(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float div_approx_ftz(float a, float b) {
  float r;
  asm("div.approx.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float mul_ftz(float a, float b) {
  float r;
  asm("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float min_ftz(float a, float b) {
  float r;
  asm("min.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// cvt.rn.satfinite.e4m3x2.f32 (sm_89+): RNE, saturate to 448, NaN -> 0x7F.
__device__ __forceinline__ uint8_t e4m3_code(float d) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(d, __NV_SATFINITE, __NV_E4M3));
}
// Exact E4M3 decode (positive codes; 0x7F/0xFF are NaN).
__device__ __forceinline__ float e4m3_value(uint8_t s) {
  const int exponent = (s >> 3) & 15, mantissa = s & 7;
  float v;
  if ((s & 0x7F) == 0x7F) v = __int_as_float(0x7FFFFFFF);
  else if (exponent == 0) v = static_cast<float>(mantissa) * 0x1p-9f;
  else v = __int_as_float(((exponent + 120) << 23) | (mantissa << 20));
  return (s & 0x80) ? -v : v;
}
// E2M1 RNE satfinite, sign kept on zero, NaN -> 0x7: the decision table of §1.5 (equal to cuda_fp4.h's
// conversion on all 2^32 inputs: nvfp4_check_div_mul_e2m1).
__device__ __forceinline__ uint32_t e2m1_code(float v) {
  if (v != v) return 0x7u;
  const uint32_t sign = (__float_as_uint(v) >> 28) & 0x8u;
  const float a = fabsf(v);
  const uint32_t c = a <= 0.25f ? 0u : a < 0.75f ? 1u : a <= 1.25f ? 2u : a < 1.75f ? 3u
                   : a <= 2.5f ? 4u : a < 3.5f ? 5u : a <= 5.0f ? 6u : 7u;
  return sign | c;
}

// The same E2M1 code by arithmetic (fewer instructions than the 7-comparison table; the main path uses it):
// a = |v|, k = clamp(exponent(a), 0, 2), M = 2^(22 + k) has ulp 2^(k - 1), the grid step of E2M1 on
// [0, 2), [2, 4), [4, 8); fadd.rn(a, M) rounds a to that grid with ties to even, and the grid index n plus 2k is
// the code (saturated at 7). NaN -> 0x7 without sign. Equal to e2m1_code on all 2^32 inputs (checked on the GPU by
// nvfp4_check_div_mul_e2m1's E2M1 sweep against cuda_fp4.h, and on the host when written).
__device__ __forceinline__ uint32_t e2m1_code_arith(float v) {
  const uint32_t u = __float_as_uint(v), ua = u & 0x7FFFFFFFu;
  const uint32_t sign = ua > 0x7F800000u ? 0u : (u >> 28) & 0x8u;
  const int k = min(max(static_cast<int>(ua >> 23) - 127, 0), 2);
  const uint32_t mb = static_cast<uint32_t>(149 + k) << 23;  // bits of 2^(22 + k)
  const uint32_t n = __float_as_uint(__fadd_rn(__uint_as_float(ua), __uint_as_float(mb))) - mb;
  return sign | min(n + 2u * static_cast<uint32_t>(k), 7u);
}

// One 16-element block (bf16 bits) -> scale byte + 8 packed bytes (as two u32, byte order = memory order).
__device__ __forceinline__ uint8_t quantize_block(const uint16_t (&x)[16], float g, uint32_t (&packed)[2]) {
  int amax = -1;  // |x| max in bf16 with NaN-suppressing max (max.bf16); all-NaN -> NaN
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int mag = x[i] & 0x7FFF;
    amax = (mag <= 0x7F80 && mag > amax) ? mag : amax;
  }
  const float a = amax < 0 ? __int_as_float(0x7FFFFFFF) : bf16_to_f32(static_cast<uint16_t>(amax));
  const float d = min_ftz(div_approx_ftz(div_approx_ftz(a, 6.0f), g), 448.0f);
  const uint8_t s = e4m3_code(d);
  const float e = min_ftz(rcp_approx_ftz(mul_ftz(g, e4m3_value(s))), 0x1.fffffep127f);
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    uint32_t word = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // byte k of the word = elements 8w + 2k (high nibble), 8w + 2k + 1
      const uint32_t hi = e2m1_code(mul_ftz(e, bf16_to_f32(x[8 * w + 2 * k])));
      const uint32_t lo = e2m1_code(mul_ftz(e, bf16_to_f32(x[8 * w + 2 * k + 1])));
      word |= ((hi << 4) | lo) << (8 * k);
    }
    packed[w] = word;
  }
  return s;
}

// ---- sources: element (r, c) of the BF16 tensor being quantized ----------------------------------------
// at(r, c): one element (general path); load8(r, c8): elements 8 c8 .. 8 c8 + 7, one 16-byte load per input
// (main path); begin_row(r) before either for row r.
struct PlainSource {
  const uint16_t* x;
  int64_t ld;
  __device__ __forceinline__ void begin_row(int64_t) {}
  __device__ __forceinline__ uint16_t at(int64_t r, int64_t c) const { return x[r * ld + c]; }
  __device__ __forceinline__ uint4 load8(int64_t r, int64_t c8) const {  // elements 8 c8 .. 8 c8 + 7
    return reinterpret_cast<const uint4*>(x + r * ld)[c8];
  }
};

struct ModulatedSource {  // R(R(n * R(1 + scale)) + shift), as modulate.cu
  const uint16_t* n;
  int64_t ld;
  const uint16_t* table;
  int64_t table_ld, shift_col, scale_col;
  const int32_t* row_map;
  const uint16_t* trow = nullptr;
  __device__ __forceinline__ void begin_row(int64_t r) { trow = table + static_cast<int64_t>(row_map[r]) * table_ld; }
  __device__ __forceinline__ uint16_t at(int64_t r, int64_t c) const {
    return f32_to_bf16(modulate_value(bf16_to_f32(n[r * ld + c]), bf16_to_f32(trow[scale_col + c]),
                                      bf16_to_f32(trow[shift_col + c])));
  }
  __device__ __forceinline__ uint4 load8(int64_t r, int64_t c8) const {
    const uint4 nq = reinterpret_cast<const uint4*>(n + r * ld)[c8];
    const uint4 scq = __ldg(reinterpret_cast<const uint4*>(trow + scale_col) + c8);
    const uint4 shq = __ldg(reinterpret_cast<const uint4*>(trow + shift_col) + c8);
    const uint16_t* nv = reinterpret_cast<const uint16_t*>(&nq);
    const uint16_t* sc = reinterpret_cast<const uint16_t*>(&scq);
    const uint16_t* sh = reinterpret_cast<const uint16_t*>(&shq);
    uint4 out;
    uint16_t* o = reinterpret_cast<uint16_t*>(&out);
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = f32_to_bf16(modulate_value(bf16_to_f32(nv[i]), bf16_to_f32(sc[i]), bf16_to_f32(sh[i])));
    return out;
  }
};

struct SwigluSource {  // R(R(silu(gate)) * value), SiLU from the host table, as swiglu.cu
  const uint16_t* u;
  int64_t ld, f;
  const uint16_t* silu;
  __device__ __forceinline__ void begin_row(int64_t) {}
  __device__ __forceinline__ uint16_t at(int64_t r, int64_t c) const {
    const uint16_t* row = u + r * ld;
    return f32_to_bf16(__fmul_rn(bf16_to_f32(__ldg(silu + row[c])), bf16_to_f32(row[f + c])));
  }
  __device__ __forceinline__ uint4 load8(int64_t r, int64_t c8) const {
    const uint4 gq = reinterpret_cast<const uint4*>(u + r * ld)[c8];
    const uint4 vq = reinterpret_cast<const uint4*>(u + r * ld + f)[c8];
    const uint16_t* gv = reinterpret_cast<const uint16_t*>(&gq);
    const uint16_t* vv = reinterpret_cast<const uint16_t*>(&vq);
    uint4 out;
    uint16_t* o = reinterpret_cast<uint16_t*>(&out);
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = f32_to_bf16(__fmul_rn(bf16_to_f32(__ldg(silu + gv[i])), bf16_to_f32(vv[i])));
    return out;
  }
};

// ---- general path (shapes the main path does not cover: cols % 16 != 0 or unaligned rows) ---------------
// Block j of row r, element by element; elements at c >= cols (and rows >= rows) read as 0 (§1.8).
template <typename Source>
__device__ __forceinline__ void load_block(const Source& src, int64_t r, int64_t j, int64_t rows, int64_t cols,
                                           uint16_t (&v)[16]) {
  if (r >= rows) {
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = 0;
    return;
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int64_t c = 16 * j + i;
    v[i] = c < cols ? src.at(r, c) : uint16_t{0};
  }
}

// Pass 1: *amax = max over |x| bf16 bits (an integer max orders magnitudes; a NaN magnitude wins).
template <typename Source>
__global__ void __launch_bounds__(kThreads) amax_kernel(Source src, int64_t rows, int64_t cols, int64_t blocks,
                                                        int64_t groups, uint32_t* amax) {
  uint32_t local = 0;
  const int64_t total = rows * groups;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = t / groups, gq = t % groups;
    src.begin_row(r);
#pragma unroll
    for (int b = 0; b < kBlocksPerThread; ++b) {
      const int64_t j = gq * kBlocksPerThread + b;
      if (j >= blocks) break;
      uint16_t v[16];
      load_block(src, r, j, rows, cols, v);
#pragma unroll
      for (int i = 0; i < 16; ++i) local = max(local, static_cast<uint32_t>(v[i] & 0x7FFFu));
    }
  }
  local = __reduce_max_sync(0xFFFFFFFFu, local);
  if ((threadIdx.x & 31) == 0) atomicMax(amax, local);
}

// g = float(bf16_RNE(fp32(amax) * RN(1/2688))) (§1.2).
__global__ void global_scale_kernel(const uint32_t* amax, float* g) {
  const uint32_t a = *amax;
  const float af = a > 0x7F80u ? __int_as_float(0x7FFFFFFF) : bf16_to_f32(static_cast<uint16_t>(a));
  *g = round_bf16(__fmul_rn(af, kInv2688));
}

// Pass 2: thread (r, gq) for r < scale_rows writes blocks 4gq..4gq+3 of row r (data only for r < data_rows)
// and the 4-byte scale word at tile offset (r, 4gq); padding blocks/rows get scale 0.
template <typename Source>
__global__ void __launch_bounds__(kThreads) pack_kernel(Source src, int64_t rows, int64_t cols, int64_t blocks,
                                                        int64_t groups, int64_t data_rows, int64_t data_row_bytes,
                                                        int64_t scale_rows, int64_t scale_cols, const float* g_ptr,
                                                        uint8_t* data, uint8_t* scales) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (t >= scale_rows * groups) return;
  const int64_t r = t / groups, gq = t % groups;
  uint32_t scale_word = 0;
  if (r < data_rows) {
    const float g = *g_ptr;
    if (r < rows) src.begin_row(r);
    // All loads first: the byte stores below may alias the source (uint8_t), so the compiler would not hoist
    // the next block's loads above them; issuing them together keeps all 64 in flight.
    uint16_t v[kBlocksPerThread][16] = {};
#pragma unroll
    for (int b = 0; b < kBlocksPerThread; ++b) {
      const int64_t j = gq * kBlocksPerThread + b;
      if (j < blocks) load_block(src, r, j, rows, cols, v[b]);
    }
#pragma unroll
    for (int b = 0; b < kBlocksPerThread; ++b) {
      const int64_t j = gq * kBlocksPerThread + b;
      if (j >= blocks) break;
      uint32_t packed[2];
      const uint8_t s = quantize_block(v[b], g, packed);
      *reinterpret_cast<uint2*>(data + r * data_row_bytes + 8 * j) = make_uint2(packed[0], packed[1]);
      scale_word |= static_cast<uint32_t>(s) << (8 * b);
    }
  }
  *reinterpret_cast<uint32_t*>(scales + ref::nvfp4_scale_offset(r, gq * kBlocksPerThread, scale_cols)) = scale_word;
}

template <typename Source>
Status run_producer(const Source& src, int64_t rows, int64_t cols, const Nvfp4GlobalScale& g, const Nvfp4Buffers& out,
                    cudaStream_t stream) {
  const ref::Nvfp4Layout l = ref::nvfp4_layout(rows, cols);
  const int64_t groups = l.scale_cols / kBlocksPerThread;
  if (g.dynamic) {
    VORTEX_CUDA_CHECK(cudaMemsetAsync(g.amax_workspace, 0, sizeof(uint32_t), stream));
    if (rows > 0 && cols > 0) {
      const int64_t want = (rows * groups + kThreads - 1) / kThreads;
      const unsigned grid = static_cast<unsigned>(want < 4096 ? want : 4096);
      amax_kernel<<<grid, kThreads, 0, stream>>>(src, rows, cols, l.blocks, groups, g.amax_workspace);
      VORTEX_CUDA_LAUNCH_CHECK("nvfp4 amax_kernel");
    }
    global_scale_kernel<<<1, 1, 0, stream>>>(g.amax_workspace, g.g);
    VORTEX_CUDA_LAUNCH_CHECK("nvfp4 global_scale_kernel");
  }
  const int64_t threads = l.scale_rows * groups;
  if (threads == 0) return Status::Ok();
  const int64_t grid = (threads + kThreads - 1) / kThreads;
  if (grid > kMaxGridX) return invalid_argument("nvfp4: tensor too large for one launch");
  pack_kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
      src, rows, cols, l.blocks, groups, l.data_rows, l.data_row_bytes, l.scale_rows, l.scale_cols, g.g, out.data,
      out.scales);
  VORTEX_CUDA_LAUNCH_CHECK("nvfp4 pack_kernel");
  return Status::Ok();
}

// ---- main path: warp-contiguous 16-byte accesses --------------------------------------------------------
// Lane = one 16-byte chunk of 8 source elements (half a 16-block): every load, data store (4 bytes per lane)
// and scale-word store is contiguous across the warp; a warp task covers kTaskGroups x 32 chunks of one row,
// all its loads issued first. The two halves of a block combine their amax with one shuffle and compute the
// same d / s / e; the 4-byte scale word of blocks 4k..4k+3 is gathered from 8 lanes with two shuffles. Same
// pinned instructions per element as quantize_block (E2M1 through e2m1_code_arith, equal on all inputs), so the
// same bytes. Sources provide load8.
constexpr int kTaskGroups = 7;   // 32-chunk groups per warp task (21 per row at K = 5376, 56 at K = 14336)
constexpr int kChunkWarps = 8;   // warps per CTA
constexpr int kAmaxUnroll = 8;   // chunks per thread in flight in the flat amax pass

__device__ __forceinline__ uint32_t quantize_half_block(const uint4& v, float g, bool block_valid, uint32_t& scale_byte) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(&v);
  // |x| bits max with packed u16x2 maxima; only when a NaN magnitude (> 0x7F80) is present, recompute it as
  // quantize_block does (NaN-suppressing, -1 when every element is NaN). Same value either way.
  constexpr uint32_t kAbs = 0x7FFF7FFFu;
  const uint32_t m2 = __vimax3_u16x2(__vimax3_u16x2(v.x & kAbs, v.y & kAbs, v.z & kAbs), v.w & kAbs, 0u);
  int amax = static_cast<int>(max(m2 & 0xFFFFu, m2 >> 16));
  if (amax > 0x7F80) {
    amax = -1;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int mag = x[i] & 0x7FFF;
      amax = (mag <= 0x7F80 && mag > amax) ? mag : amax;
    }
  }
  amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));  // the other half of the block
  const float a = amax < 0 ? __int_as_float(0x7FFFFFFF) : bf16_to_f32(static_cast<uint16_t>(amax));
  const float d = min_ftz(div_approx_ftz(div_approx_ftz(a, 6.0f), g), 448.0f);
  const uint8_t s = e4m3_code(d);
  const float e = min_ftz(rcp_approx_ftz(mul_ftz(g, e4m3_value(s))), 0x1.fffffep127f);
  uint32_t word = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // byte k = elements 2k (high nibble), 2k + 1
    const uint32_t hi = e2m1_code_arith(mul_ftz(e, bf16_to_f32(x[2 * k])));
    const uint32_t lo = e2m1_code_arith(mul_ftz(e, bf16_to_f32(x[2 * k + 1])));
    word |= ((hi << 4) | lo) << (8 * k);
  }
  scale_byte = block_valid ? s : 0u;
  return word;
}

// One u32 per CTA into *amax: warp maxima through shared memory, then one atomic.
__device__ __forceinline__ void block_amax_atomic(uint32_t local, uint32_t* amax) {
  __shared__ uint32_t warp_max[32];
  local = __reduce_max_sync(0xFFFFFFFFu, local);
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = local;
  __syncthreads();
  if (threadIdx.x < 32) {
    uint32_t m = threadIdx.x < blockDim.x / 32 ? warp_max[threadIdx.x] : 0u;
    m = __reduce_max_sync(0xFFFFFFFFu, m);
    if (threadIdx.x == 0) atomicMax(amax, m);
  }
}

// Pass 2. Task t -> row r = t / tasks_per_row, chunks (t % tasks_per_row) * kTaskGroups * 32 + 32 u + lane.
template <typename Source>
__global__ void __launch_bounds__(kChunkWarps * 32)
    pack_chunks_kernel(Source src, int64_t rows, int64_t blocks, int64_t tasks, int64_t tasks_per_row, int64_t data_rows,
                       int64_t data_row_bytes, int64_t scale_cols, const float* g_ptr, uint8_t* data, uint8_t* scales) {
  const int lane = threadIdx.x & 31;
  const int64_t task = static_cast<int64_t>(blockIdx.x) * kChunkWarps + (threadIdx.x >> 5);
  if (task >= tasks) return;  // whole warp exits together
  const int64_t r = task / tasks_per_row;
  const int64_t c0 = (task % tasks_per_row) * kTaskGroups * 32;  // first chunk of the task in the row
  const int64_t row_chunks = 2 * scale_cols;                     // chunks incl. padding blocks (scale only)
  const bool data_row = r < data_rows, real_row = r < rows;
  if (real_row) src.begin_row(r);
  uint4 v[kTaskGroups];
#pragma unroll
  for (int u = 0; u < kTaskGroups; ++u) {
    const int64_t cc = c0 + 32 * u + lane;
    v[u] = real_row && cc < 2 * blocks ? src.load8(r, cc) : make_uint4(0, 0, 0, 0);
  }
  const float g = *g_ptr;
#pragma unroll
  for (int u = 0; u < kTaskGroups; ++u) {
    if (c0 + 32 * u >= row_chunks) break;  // warp-uniform
    const int64_t cc = c0 + 32 * u + lane;
    const bool data_chunk = data_row && cc < 2 * blocks;
    uint32_t s = 0;
    const uint32_t word = quantize_half_block(v[u], g, data_chunk, s);
    if (data_chunk) *reinterpret_cast<uint32_t*>(data + r * data_row_bytes + 4 * cc) = word;
    uint32_t sw = s << (8 * ((cc >> 1) & 3));
    sw |= __shfl_xor_sync(0xFFFFFFFFu, sw, 2);
    sw |= __shfl_xor_sync(0xFFFFFFFFu, sw, 4);
    if ((lane & 7) == 0 && cc < row_chunks)
      *reinterpret_cast<uint32_t*>(scales + ref::nvfp4_scale_offset(r, cc >> 1, scale_cols)) = sw;
  }
}

// Pass 1, plain contiguous tensor (ld == cols): max of |x| bits over n16 flat 16-byte chunks (u16x2 maxima).
__global__ void __launch_bounds__(256) amax_flat_kernel(const uint4* x, int64_t n16, uint32_t* amax) {
  uint32_t m2 = 0;  // two u16 maxima
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; base < n16;
       base += stride * kAmaxUnroll) {
    uint4 v[kAmaxUnroll];
#pragma unroll
    for (int u = 0; u < kAmaxUnroll; ++u) {
      const int64_t i = base + u * stride;
      v[u] = i < n16 ? x[i] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kAmaxUnroll; ++u) {
      m2 = __vimax3_u16x2(m2, v[u].x & 0x7FFF7FFFu, v[u].y & 0x7FFF7FFFu);
      m2 = __vimax3_u16x2(m2, v[u].z & 0x7FFF7FFFu, v[u].w & 0x7FFF7FFFu);
    }
  }
  block_amax_atomic(max(m2 & 0xFFFFu, m2 >> 16), amax);
}

// Pass 1, any source: persistent warps over the row tasks of pack_chunks_kernel (rows < rows only).
template <typename Source>
__global__ void __launch_bounds__(kChunkWarps * 32)
    amax_chunks_kernel(Source src, int64_t rows, int64_t cols, int64_t tasks_per_row, uint32_t* amax) {
  const int lane = threadIdx.x & 31;
  const int64_t tasks = rows * tasks_per_row;
  uint32_t m2 = 0;
  for (int64_t task = static_cast<int64_t>(blockIdx.x) * kChunkWarps + (threadIdx.x >> 5); task < tasks;
       task += static_cast<int64_t>(gridDim.x) * kChunkWarps) {
    const int64_t r = task / tasks_per_row;
    const int64_t c0 = (task % tasks_per_row) * kTaskGroups * 32;
    src.begin_row(r);
    uint4 v[kTaskGroups];
#pragma unroll
    for (int u = 0; u < kTaskGroups; ++u) {
      const int64_t cc = c0 + 32 * u + lane;
      v[u] = 8 * cc < cols ? src.load8(r, cc) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kTaskGroups; ++u) {
      m2 = __vimax3_u16x2(m2, v[u].x & 0x7FFF7FFFu, v[u].y & 0x7FFF7FFFu);
      m2 = __vimax3_u16x2(m2, v[u].z & 0x7FFF7FFFu, v[u].w & 0x7FFF7FFFu);
    }
  }
  block_amax_atomic(max(m2 & 0xFFFFu, m2 >> 16), amax);
}

// The main path of every producer (cols % 16 == 0, 16-byte aligned rows). `flat`: the source is a plain
// contiguous tensor, read by the flat amax pass.
template <typename Source>
Status run_producer_chunks(const Source& src, const uint16_t* flat, int64_t rows, int64_t cols, const Nvfp4GlobalScale& g,
                           const Nvfp4Buffers& out, cudaStream_t stream) {
  const ref::Nvfp4Layout l = ref::nvfp4_layout(rows, cols);
  const int64_t groups_per_row = (2 * l.scale_cols + 31) / 32;
  const int64_t tasks_per_row = (groups_per_row + kTaskGroups - 1) / kTaskGroups;
  if (g.dynamic) {
    VORTEX_CUDA_CHECK(cudaMemsetAsync(g.amax_workspace, 0, sizeof(uint32_t), stream));
    if (rows > 0 && cols > 0) {
      int device = 0, sms = 0;
      VORTEX_CUDA_CHECK(cudaGetDevice(&device));
      VORTEX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      if (flat != nullptr) {
        const int64_t n16 = rows * cols / 8;
        const int64_t want = (n16 + 256 * kAmaxUnroll - 1) / (256 * kAmaxUnroll);
        const unsigned grid = static_cast<unsigned>(std::min<int64_t>(want, static_cast<int64_t>(sms) * 8));
        amax_flat_kernel<<<grid, 256, 0, stream>>>(reinterpret_cast<const uint4*>(flat), n16, g.amax_workspace);
        VORTEX_CUDA_LAUNCH_CHECK("nvfp4 amax_flat_kernel");
      } else {
        const int64_t want = (rows * tasks_per_row + kChunkWarps - 1) / kChunkWarps;
        const unsigned grid = static_cast<unsigned>(std::min<int64_t>(want, static_cast<int64_t>(sms) * 8));
        amax_chunks_kernel<<<grid, kChunkWarps * 32, 0, stream>>>(src, rows, cols, tasks_per_row, g.amax_workspace);
        VORTEX_CUDA_LAUNCH_CHECK("nvfp4 amax_chunks_kernel");
      }
    }
    global_scale_kernel<<<1, 1, 0, stream>>>(g.amax_workspace, g.g);
    VORTEX_CUDA_LAUNCH_CHECK("nvfp4 global_scale_kernel");
  }
  const int64_t tasks = l.scale_rows * tasks_per_row;
  if (tasks == 0) return Status::Ok();
  const int64_t grid = (tasks + kChunkWarps - 1) / kChunkWarps;
  if (grid > kMaxGridX) return invalid_argument("nvfp4: tensor too large for one launch");
  pack_chunks_kernel<<<static_cast<unsigned>(grid), kChunkWarps * 32, 0, stream>>>(
      src, rows, l.blocks, tasks, tasks_per_row, l.data_rows, l.data_row_bytes, l.scale_cols, g.g, out.data, out.scales);
  VORTEX_CUDA_LAUNCH_CHECK("nvfp4 pack_chunks_kernel");
  return Status::Ok();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Status check_common(int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g, const Nvfp4Buffers& out,
                    const char* op) {
  const std::string o(op);
  if (rows < 0 || cols < 0 || ld < cols)
    return invalid_argument(o + ": bad shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "] with row stride " +
                            std::to_string(ld));
  if (g.g == nullptr) return invalid_argument(o + ": missing the device global scale g");
  if (g.dynamic && g.amax_workspace == nullptr)
    return invalid_argument(o + ": dynamic global scale needs a device u32 amax workspace");
  if (out.data == nullptr || out.scales == nullptr || !aligned16(out.data) || !aligned16(out.scales))
    return invalid_argument(o + ": data and scale buffers must be non-null and 16-byte aligned (size them with "
                                "ref::nvfp4_layout)");
  if (rows > (int64_t{1} << 31) || cols > (int64_t{1} << 30)) return invalid_argument(o + ": tensor too large");
  return Status::Ok();
}

// ---- probes ------------------------------------------------------------------------------------------
__global__ void rcp_binade_kernel(uint32_t* out) {
  const uint32_t m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m < ref::kRcpBinadeSize) out[m] = __float_as_uint(rcp_approx_ftz(__uint_as_float(0x3F800000u | m)));
}

__device__ __forceinline__ bool same_result(uint32_t a, uint32_t b) {
  const bool nan_a = (a & 0x7FFFFFFFu) > 0x7F800000u, nan_b = (b & 0x7FFFFFFFu) > 0x7F800000u;
  return nan_a || nan_b ? nan_a && nan_b : a == b;
}
__device__ __forceinline__ void record(unsigned long long* count, unsigned long long* example, uint64_t what) {
  atomicAdd(count, 1ull);
  atomicCAS(example, 0ull, static_cast<unsigned long long>(what) + 1ull);
}
__device__ __forceinline__ float flush_model(float x) { return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }
// The host model of mul.rn.ftz (ref::mul_ftz): flush inputs; exact product in FP64; below FLT_MIN it becomes
// +-FLT_MIN when it rounds there on the 24-bit grid (>= FLT_MIN - 2^-151), else a signed zero.
__device__ __forceinline__ float mul_ftz_model(float a, float b) {
  const double exact = __dmul_rn(static_cast<double>(flush_model(a)), static_cast<double>(flush_model(b)));
  if (!(fabs(exact) < 0x1p-126)) return __double2float_rn(exact);
  const float sign = copysignf(1.0f, __double2float_rn(exact));
  return fabs(exact) >= 0x1p-126 - 0x1p-151 ? sign * 0x1p-126f : sign * 0.0f;
}

__global__ void rcp_check_kernel(const uint32_t* binade, unsigned long long* counters) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (uint64_t{1} << 32);
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint32_t x = static_cast<uint32_t>(i);
    const uint32_t hw = __float_as_uint(rcp_approx_ftz(__uint_as_float(x)));
    if (!same_result(hw, ref::rcp_approx_ftz_model_bits(x, binade))) record(&counters[0], &counters[1], x);
  }
}

__device__ __forceinline__ uint32_t moderate(uint32_t w) {  // exponent field in [100, 154], random sign/mantissa
  return (w & 0x807FFFFFu) | ((100u + (w >> 23) % 55u) << 23);
}

__global__ void div_mul_e2m1_check_kernel(const uint32_t* binade, uint64_t seed, uint64_t pairs,
                                          unsigned long long* counters) {
  constexpr uint32_t kSpecial[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x3F800000u,
                                   0x40C00000u, 0x7E800000u, 0x7EC00000u, 0x7F000000u, 0x7F7FFFFFu, 0x7F800000u,
                                   0xFF800000u, 0x7FC00000u, 0x00800001u, 0x3E2AAAABu};
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  for (uint64_t i = first; i < pairs; i += stride) {
    const Philox4x32 w = philox_block(seed, i);
    uint32_t a = w.v[0], b = w.v[1];
    switch (i % 4) {
      case 1: a = moderate(a); break;
      case 2: a = moderate(a); b = moderate(b); break;
      case 3: b = kSpecial[w.v[2] % 16] ^ (w.v[3] & 0x80000000u); break;
      default: break;
    }
    const float fa = __uint_as_float(a), fb = __uint_as_float(b);
    const float hw = div_approx_ftz(fa, fb);
    const float model = mul_ftz_model(fa, __uint_as_float(ref::rcp_approx_ftz_model_bits(b, binade)));
    if (!same_result(__float_as_uint(hw), __float_as_uint(model))) record(&counters[0], &counters[1], i);
    // mul.ftz near the FLT_MIN boundary: a = 2^-63 * (1 + m), b = FLT_MIN / a +- 8 ulps, random signs.
    const float ma = __uint_as_float((64u << 23) | (w.v[2] & 0x7FFFFFu) | (w.v[3] & 0x80000000u));
    const float mb = __uint_as_float(__float_as_uint(__fdiv_rn(0x1p-126f, fabsf(ma))) + (w.v[3] & 15u) - 8u) *
                     ((w.v[3] & 0x40000000u) ? -1.0f : 1.0f);
    if (!same_result(__float_as_uint(mul_ftz(ma, mb)), __float_as_uint(mul_ftz_model(ma, mb))))
      record(&counters[2], &counters[3], i);
  }
  for (uint64_t i = first; i < (uint64_t{1} << 32); i += stride) {
    const float x = __uint_as_float(static_cast<uint32_t>(i));
    const uint32_t want = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) & 0xFu;
    if (e2m1_code(x) != want || e2m1_code_arith(x) != want) record(&counters[4], &counters[5], i);
  }
}

}  // namespace

Status nvfp4_quantize(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g,
                      const Nvfp4Buffers& out, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_common(rows, cols, ld, g, out, "nvfp4_quantize"));
  if (x == nullptr && rows > 0 && cols > 0) return invalid_argument("nvfp4_quantize: x is null");
  const PlainSource src{x, ld};
  if (cols % 16 == 0 && ld % 8 == 0 && aligned16(x))
    return run_producer_chunks(src, ld == cols ? x : nullptr, rows, cols, g, out, stream);
  return run_producer(src, rows, cols, g, out, stream);
}

Status nvfp4_quantize_modulated(const uint16_t* n, int64_t rows, int64_t cols, int64_t ld, const uint16_t* table,
                                int64_t table_ld, int shift_chunk, int scale_chunk, const DeviceRowMap& map,
                                const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_common(rows, cols, ld, g, out, "nvfp4_quantize_modulated"));
  if (n == nullptr || table == nullptr) return invalid_argument("nvfp4_quantize_modulated: n or table is null");
  const int64_t chunks = cols > 0 ? table_ld / cols : 0;
  if (shift_chunk < 0 || scale_chunk < 0 || shift_chunk >= chunks || scale_chunk >= chunks)
    return invalid_argument("nvfp4_quantize_modulated: chunks " + std::to_string(shift_chunk) + "/" +
                            std::to_string(scale_chunk) + " outside a table row of " + std::to_string(table_ld) +
                            " elements (" + std::to_string(chunks) + " chunks of " + std::to_string(cols) + ")");
  if (map.table_row == nullptr || map.rows != rows)
    return invalid_argument("nvfp4_quantize_modulated: segment map covers " + std::to_string(map.rows) +
                            " rows, tensor has " + std::to_string(rows));
  const ModulatedSource src{n, ld, table, table_ld, shift_chunk * cols, scale_chunk * cols, map.table_row};
  if (cols % 16 == 0 && ld % 8 == 0 && table_ld % 8 == 0 && aligned16(n) && aligned16(table))
    return run_producer_chunks(src, nullptr, rows, cols, g, out, stream);
  return run_producer(src, rows, cols, g, out, stream);
}

Status nvfp4_quantize_swiglu(const uint16_t* u, int64_t rows, int64_t f, int64_t ld, const uint16_t* silu_table,
                             const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream) {
  if (ld < 2 * f) return invalid_argument("nvfp4_quantize_swiglu: row stride " + std::to_string(ld) +
                                          " smaller than the FC1 width 2F = " + std::to_string(2 * f));
  VORTEX_RETURN_IF_ERROR(check_common(rows, f, ld, g, out, "nvfp4_quantize_swiglu"));
  if (u == nullptr || silu_table == nullptr) return invalid_argument("nvfp4_quantize_swiglu: u or the SiLU table is null");
  const SwigluSource src{u, ld, f, silu_table};
  if (f % 16 == 0 && ld % 8 == 0 && aligned16(u)) return run_producer_chunks(src, nullptr, rows, f, g, out, stream);
  return run_producer(src, rows, f, g, out, stream);
}

Status nvfp4_probe_rcp_binade(uint32_t* out, cudaStream_t stream) {
  rcp_binade_kernel<<<ref::kRcpBinadeSize / 256, 256, 0, stream>>>(out);
  VORTEX_CUDA_LAUNCH_CHECK("rcp_binade_kernel");
  return Status::Ok();
}

Status nvfp4_check_rcp_model(const uint32_t* binade, unsigned long long* counters, cudaStream_t stream) {
  VORTEX_CUDA_CHECK(cudaMemsetAsync(counters, 0, 2 * sizeof(unsigned long long), stream));
  rcp_check_kernel<<<8192, 256, 0, stream>>>(binade, counters);
  VORTEX_CUDA_LAUNCH_CHECK("rcp_check_kernel");
  return Status::Ok();
}

Status nvfp4_check_div_mul_e2m1(const uint32_t* binade, uint64_t seed, uint64_t pairs, unsigned long long* counters,
                                cudaStream_t stream) {
  VORTEX_CUDA_CHECK(cudaMemsetAsync(counters, 0, 6 * sizeof(unsigned long long), stream));
  div_mul_e2m1_check_kernel<<<8192, 256, 0, stream>>>(binade, seed, pairs, counters);
  VORTEX_CUDA_LAUNCH_CHECK("div_mul_e2m1_check_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
