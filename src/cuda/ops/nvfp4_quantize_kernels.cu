// NVFP4 producer kernels and their launchers (src/ref/nvfp4_quantize.h): amax -> g, then pack: E2M1
// hi-first pairs and the E4M3 scales in the 128x4 tile, for each source of the BF16 input: plain, the modulation of
// the RMSNorm output, or SwiGLU of FC1 (recomputed as modulate.cu / swiglu.cu do, never written). Main path
// (cols % 16 == 0, 16-byte aligned rows): one lane per 16-byte chunk (half a block), warp-contiguous loads/stores,
// E2M1 on the FP32 pipe, row groups walked last-first; the modulated producer stages its CTA's AdaLN table slice in
// shared memory. H200, S = 37810 (benchmarks/2026-11-29-h200-s9/run3-nvfp4_bench.log,
// benchmarks/2026-11-29-h200-s8/run5-nvfp4-producer-variants.txt): plain K 5376 0.225-0.229 ms = 97-99% of copy BW,
// K 14336 0.580-0.583 ms (102%); modulate D 5376 0.276 ms = 80.3% (1.57x unfused); SwiGLU 1.268 ms (87.5%, 1.06x
// unfused). Other shapes (the general path): one thread per (row, 4 blocks), element loads. Encoders in
// nvfp4_encode.cuh; validation in nvfp4_quantize.cpp. E0 vs src/ref/nvfp4_quantize.cpp in
// tests/cuda/nvfp4_quantize_test.cu; timed per pass by bench/nvfp4_bench.cpp.
#include "cuda/ops/nvfp4_quantize_kernels.h"

#include <algorithm>
#include <climits>

#include "cuda/check.h"
#include "cuda/ops/nvfp4_encode.cuh"
#include "cuda/ops/ops_internal.h"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerThread = 4;  // one 4-byte word of a scale tile row

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
    return f32_to_bf16(
        modulate_value(bf16_to_f32(n[r * ld + c]), bf16_to_f32(trow[scale_col + c]), bf16_to_f32(trow[shift_col + c])));
  }
};

// The same values with each rounding done for two elements by one cvt.rn.bf16x2.f32 (the RNE of
// __float2bfloat16_rn per half; NaN -> 0x7FFF either way): half the conversion instructions, which run at 16 per
// clock per SM and bound the fused modulation producer (3 roundings per element, in both passes).
__device__ __forceinline__ uint32_t bf16x2_rn(float lo, float hi) {  // lo -> bits 0..15, hi -> bits 16..31
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float lo_f32(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f32(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

struct ModulatedSourcePacked : ModulatedSource {
  // Chunk c8 of the current row (begin_row) modulated from n's chunk nq.
  __device__ __forceinline__ uint4 modulate(const uint4& nq, int64_t c8) const {
    const uint4 scq = __ldg(reinterpret_cast<const uint4*>(trow + scale_col) + c8);
    const uint4 shq = __ldg(reinterpret_cast<const uint4*>(trow + shift_col) + c8);
    const uint32_t nw[4] = {nq.x, nq.y, nq.z, nq.w}, sc[4] = {scq.x, scq.y, scq.z, scq.w};
    const uint32_t sh[4] = {shq.x, shq.y, shq.z, shq.w};
    uint32_t o[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // modulate_value on elements 2k (low halves) and 2k + 1 (high halves)
      const uint32_t t = bf16x2_rn(__fadd_rn(1.0f, lo_f32(sc[k])), __fadd_rn(1.0f, hi_f32(sc[k])));
      const uint32_t m = bf16x2_rn(__fmul_rn(lo_f32(nw[k]), lo_f32(t)), __fmul_rn(hi_f32(nw[k]), hi_f32(t)));
      o[k] = bf16x2_rn(__fadd_rn(lo_f32(m), lo_f32(sh[k])), __fadd_rn(hi_f32(m), hi_f32(sh[k])));
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
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
__global__ void __launch_bounds__(kThreads)
    amax_kernel(Source src, int64_t rows, int64_t cols, int64_t blocks, int64_t groups, uint32_t* amax) {
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

__global__ void global_scale_kernel(const uint32_t* amax, float* g) { *g = global_scale_from_amax(*amax); }

// Pass 2: thread (r, gq) for r < scale_rows writes blocks 4gq..4gq+3 of row r (data only for r < data_rows)
// and the 4-byte scale word at tile offset (r, 4gq); padding blocks/rows get scale 0.
template <typename Source>
__global__ void __launch_bounds__(kThreads)
    pack_kernel(Source src, int64_t rows, int64_t cols, int64_t blocks, int64_t groups, int64_t data_rows,
                int64_t data_row_bytes, int64_t scale_rows, int64_t scale_cols, const float* g_ptr, uint8_t* data,
                uint8_t* scales) {
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
                    const Nvfp4RunOptions& opt, cudaStream_t stream) {
  const ref::Nvfp4Layout l = ref::nvfp4_layout(rows, cols);
  const int64_t groups = l.scale_cols / kBlocksPerThread;
  if (g.dynamic && opt.amax_pass) {
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
  if (threads == 0 || !opt.pack_pass) return Status::Ok();
  const int64_t grid = (threads + kThreads - 1) / kThreads;
  if (grid > kMaxGridX) return invalid_argument("nvfp4: tensor too large for one launch");
  pack_kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(src, rows, cols, l.blocks, groups, l.data_rows,
                                                                    l.data_row_bytes, l.scale_rows, l.scale_cols, g.g,
                                                                    out.data, out.scales);
  VORTEX_CUDA_LAUNCH_CHECK("nvfp4 pack_kernel");
  return Status::Ok();
}

// ---- main path: warp-contiguous 16-byte accesses --------------------------------------------------------
// Lane = one 16-byte chunk of 8 source elements (half a 16-block): every load, data store (4 bytes per lane)
// and scale-word store is contiguous across the warp; a warp task covers kTaskGroups x 32 chunks of one row,
// all its loads issued first. The two halves of a block combine their amax with one shuffle and compute the
// same d / s / e; the 4-byte scale word of blocks 4k..4k+3 is gathered from 8 lanes with two shuffles. Same
// pinned instructions per element as quantize_block (E2M1 through quantize_half_block_fma, equal on all inputs),
// so the same bytes. The plain and SwiGLU sources provide load8; the modulated source has its own kernels below.
constexpr int kTaskGroups = 7;  // 32-chunk groups per warp task (21 per row at K = 5376, 56 at K = 14336)
constexpr int kChunkWarps = 8;  // warps per CTA
constexpr int kAmaxUnroll = 8;  // chunks per thread in flight in the flat amax pass

// Per-lane amax of bf16 magnitudes, two halves at a time: m2 (two u16 maxima) folded with one 16-byte chunk.
__device__ __forceinline__ uint32_t amax_fold_chunk(uint32_t m2, const uint4& v) {
  m2 = __vimax3_u16x2(m2, v.x & 0x7FFF7FFFu, v.y & 0x7FFF7FFFu);
  return __vimax3_u16x2(m2, v.z & 0x7FFF7FFFu, v.w & 0x7FFF7FFFu);
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
      m2 = amax_fold_chunk(m2, v[u]);
    }
  }
  block_amax_atomic(max(m2 & 0xFFFFu, m2 >> 16), amax);
}

// Pass 1, any source: persistent warps over the row tasks of pack_fma_kernel (rows < rows only).
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
      m2 = amax_fold_chunk(m2, v[u]);
    }
  }
  block_amax_atomic(max(m2 & 0xFFFFu, m2 >> 16), amax);
}

// One warp task: chunks c0 + 32 u + lane (u < kTaskGroups) of row r. kFull: every chunk is data and inside the
// row (the canonical shapes), so no per-chunk bounds. Loads (rows >= rows read as 0):
template <bool kFull, typename Source>
__device__ __forceinline__ void load_task_fma(Source& src, int64_t r, int64_t c0, int lane, int64_t rows,
                                              int64_t data_chunks, uint4 (&v)[kTaskGroups]) {
  if (r < rows) {
    src.begin_row(r);
#pragma unroll
    for (int u = 0; u < kTaskGroups; ++u) {
      const int64_t cc = c0 + 32 * u + lane;
      v[u] = kFull || cc < data_chunks ? src.load8(r, cc) : make_uint4(0, 0, 0, 0);
    }
  } else {
#pragma unroll
    for (int u = 0; u < kTaskGroups; ++u) v[u] = make_uint4(0, 0, 0, 0);
  }
}

// ... then quantize and store (data rows only; scale words for every row < scale_rows, padding blocks 0).
template <bool kFull>
__device__ __forceinline__ void quantize_store_task_fma(const uint4 (&v)[kTaskGroups], int64_t r, int64_t c0, int lane,
                                                        int64_t data_chunks, int64_t data_rows, int64_t data_row_bytes,
                                                        int64_t scale_cols, float g, uint8_t* data, uint8_t* scales) {
  const int64_t row_chunks = 2 * scale_cols;  // chunks incl. padding blocks (scale only)
  const bool data_row = r < data_rows;
  uint8_t* drow = data + r * data_row_bytes + 4 * (c0 + lane);                                        // + 128 u
  uint8_t* srow = scales + ref::nvfp4_scale_offset(r, ((c0 + lane) >> 1) & ~int64_t{3}, scale_cols);  // + 2048 u
  const uint32_t scale_shift = 8u * ((static_cast<uint32_t>(lane) >> 1) & 3u);
#pragma unroll
  for (int u = 0; u < kTaskGroups; ++u) {
    if (!kFull && c0 + 32 * u >= row_chunks) break;  // warp-uniform
    const int64_t cc = c0 + 32 * u + lane;
    const bool data_chunk = data_row && (kFull || cc < data_chunks);
    uint32_t s = 0;
    const uint32_t word = quantize_half_block_fma(v[u], g, data_chunk, s);
    if (data_chunk) *reinterpret_cast<uint32_t*>(drow + 128 * u) = word;
    uint32_t sw = s << scale_shift;
    sw |= __shfl_xor_sync(0xFFFFFFFFu, sw, 2);
    sw |= __shfl_xor_sync(0xFFFFFFFFu, sw, 4);
    if ((lane & 7) == 0 && (kFull || cc < row_chunks)) *reinterpret_cast<uint32_t*>(srow + 2048 * u) = sw;
  }
}

// g for the pack kernels, read on first use (after the first task's loads are issued). kDynamicG: computed from the
// amax word, and block (0, 0) writes it to g_out; otherwise the static *g_in.
template <bool kDynamicG>
struct LazyGlobalScale {
  const float* g_in;
  const uint32_t* amax;
  float* g_out;
  float g = 0.0f;
  bool have = false;
  __device__ __forceinline__ float operator()() {
    if (!have) {
      have = true;
      if constexpr (kDynamicG) {
        g = global_scale_from_amax(*amax);
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *g_out = g;
      } else {
        g = *g_in;
      }
    }
    return g;
  }
};

// One whole task. get_g() is called once the loads are issued (the first task's loads go out before g is read).
template <bool kFull, typename Source, typename GetG>
__device__ __forceinline__ void pack_task_fma(Source& src, int64_t r, int64_t c0, int lane, int64_t rows,
                                              int64_t data_chunks, int64_t data_rows, int64_t data_row_bytes,
                                              int64_t scale_cols, GetG& get_g, uint8_t* data, uint8_t* scales) {
  uint4 v[kTaskGroups];
  load_task_fma<kFull>(src, r, c0, lane, rows, data_chunks, v);
  const float g = get_g();
  quantize_store_task_fma<kFull>(v, r, c0, lane, data_chunks, data_rows, data_row_bytes, scale_cols, g, data, scales);
}

// Pass 2 (plain and SwiGLU sources): block (x, y) = task column x (chunks 224 x .. 224 x + 223 of a row) of the 8-row
// groups y, y + gridDim.y, ... counted from the last group backwards (the amax pass read the tail last: L2 hits); warp
// w takes row 8 group + w. kDynamicG: g from the amax word (block (0, 0) writes it to g_out; no global_scale_kernel
// launch). 2-D grid (no 64-bit division), bounds checks only in partial tasks. Walking the groups last-first: the
// first rows the pack reads may still be in L2 (~35 MB of 406 at K = 5376; 1-3% faster than first-to-last,
// benchmarks/2026-11-29-h200-s8/run5-nvfp4-producer-variants.txt). Fast path per lane and chunk (sm_90a SASS, plain
// source): ~100 instructions, ~42 of them on the ALU pipe; 62-64 registers, no spills.
// <= 64 registers (4 CTAs, 32 warps per SM) on sm_90, where it was measured; sm_100a's ptxas spills 4 bytes at
// that cap, so the other targets take 2 CTAs (128 registers). The grid does not depend on it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
constexpr int kPackFmaBlocksPerSm = 2;
#else
constexpr int kPackFmaBlocksPerSm = 4;
#endif
template <typename Source, bool kDynamicG>
__global__ void __launch_bounds__(kChunkWarps * 32, kPackFmaBlocksPerSm)
    pack_fma_kernel(Source src, int64_t rows, int64_t data_chunks, int64_t row_groups, int64_t data_rows,
                    int64_t data_row_bytes, int64_t scale_cols, const float* g_in, const uint32_t* amax, float* g_out,
                    uint8_t* data, uint8_t* scales) {
  LazyGlobalScale<kDynamicG> get_g{g_in, amax, g_out};
  constexpr int kTaskChunks = kTaskGroups * 32;
  const int lane = threadIdx.x & 31;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTaskChunks;
  const bool full_task = c0 + kTaskChunks <= data_chunks;  // every chunk of the task is data (canonical shapes)
  for (int64_t y = blockIdx.y; y < row_groups; y += gridDim.y) {
    const int64_t r = (row_groups - 1 - y) * kChunkWarps + (threadIdx.x >> 5);  // < scale_rows, last group first
    if (full_task)
      pack_task_fma<true>(src, r, c0, lane, rows, data_chunks, data_rows, data_row_bytes, scale_cols, get_g, data,
                          scales);
    else
      pack_task_fma<false>(src, r, c0, lane, rows, data_chunks, data_rows, data_row_bytes, scale_cols, get_g, data,
                           scales);
  }
  if constexpr (kDynamicG) get_g();  // block (0, 0) writes g even when it had no row group
}

// ---- main path, modulated source: the AdaLN table slice in shared memory ----------------------------------
// Why: modulate_D5376 through pack_fma_kernel (table read from global memory) ran at 66% of copy BW (amax 0.146 ms,
// pack 0.197 ms) vs 99% for the plain producer: per 16-byte chunk of n both passes also load the row's scale and shift
// chunks (two L2 loads) and round t = R(1 + scale). As rms_norm_modulate's table kernel (72% -> 87%), each CTA here
// owns one task column (chunks c0 .. c0 + 223 of every row) of a contiguous row range, picks up to kModSlots distinct
// table rows of that range (first appearance; segment rows are contiguous, so usually 1-2) and stages, for that column
// slice, t = R(1 + scale) (the bf16x2 words ModulatedSourcePacked computes, so the same bits) and shift in shared
// memory. A row whose table row was not picked reads the global table (ModulatedSourcePacked): correct for ANY row map,
// only slower. Quantization, stores and the dynamic-g handling are pack_fma_kernel's (quantize_store_task_fma,
// global_scale_from_amax): the same bytes.
constexpr int kModSlots = 3;                    // staged table rows per CTA (H3: text / audio / video)
constexpr int kSliceChunks = kTaskGroups * 32;  // chunks of one task column (224)
// CTAs per SM each kernel is sized for (launch bounds and its one-wave grid). ptxas hoists a task's 14 shared loads
// next to its 7 global ones (21 live uint4); with pack_fma_kernel's budget (4 CTAs, <= 64 registers) both kernels
// spilled, also when the staged modulation was applied chunk by chunk inside the quantize loop. With the native bf16x2
// modulation both spill at 3 CTAs (pack 32 bytes, amax 16), so both run 2 (<= 128 registers; 111-113
// used, no spills).
constexpr int kPackModBlocksPerSm = 2;
constexpr int kAmaxModBlocksPerSm = 2;

// The modulated source with staged slices: begin_row picks the slot of the row's table row (warp-uniform).
struct ModulatedSourceStaged : ModulatedSourcePacked {
  const uint4* slot_t = nullptr;        // shared [kModSlots][kSliceChunks] t words
  const uint4* slot_sh = nullptr;       // shared [kModSlots][kSliceChunks] shift
  int tag0 = -1, tag1 = -1, tag2 = -1;  // picked table rows (-1: slot unused; row_map values are >= 0)
  int64_t c_lo = 0;                     // first chunk of the CTA's slice
  const uint4* st = nullptr;  // this row's staged t / shift slice, chunk c at [c - c_lo] (nullptr: global fallback)
  const uint4* sh = nullptr;
  __device__ __forceinline__ void begin_row(int64_t r) {
    const int tr = row_map[r];
    trow = table + static_cast<int64_t>(tr) * table_ld;
    const int slot = tr == tag0 ? 0 : tr == tag1 ? 1 : tr == tag2 ? 2 : -1;
    st = slot >= 0 ? slot_t + slot * kSliceChunks : nullptr;
    sh = slot >= 0 ? slot_sh + slot * kSliceChunks : nullptr;
  }
  // The modulated chunk c8 from n's chunk nq and the staged t / shift (begin_row found a slot): R(R(n t) + shift)
  // as ModulatedSourcePacked::modulate computes it, with t read instead of rounded here and the two roundings as
  // native mul.rn / add.rn.bf16x2 (the same BF16 results: common.cuh; 2 instead of ~15 instructions per word).
  // (modulate, inherited, is the global-table path.)
  __device__ __forceinline__ uint4 modulate_staged(const uint4& nq, int64_t c8) const {
    const uint4 tq = st[c8 - c_lo], hq = sh[c8 - c_lo];
    return make_uint4(bf16x2_add_rn(bf16x2_mul_rn(nq.x, tq.x), hq.x), bf16x2_add_rn(bf16x2_mul_rn(nq.y, tq.y), hq.y),
                      bf16x2_add_rn(bf16x2_mul_rn(nq.z, tq.z), hq.z), bf16x2_add_rn(bf16x2_mul_rn(nq.w, tq.w), hq.w));
  }
};

// load_task_fma for the staged source. All kTaskGroups loads of n are issued first, then the row's table row is
// read (row_map) and the staged / global choice is made once per task (warp-uniform): with the row_map load first,
// the n loads waited behind it (two dependent L2 latencies per task; pack pass 0.194 ms vs 0.137 for the plain
// producer, benchmarks/2026-11-29-h200-s9/run2-nvfp4_bench.log), and with the choice per chunk, the compiler put a
// branch between consecutive chunks and each chunk's arithmetic waited for its load before the next load issued (PTX of
// the first draft).
template <bool kFull>
__device__ __forceinline__ void load_task_mod_smem(ModulatedSourceStaged& src, int64_t r, int64_t c0, int lane,
                                                   int64_t rows, int64_t data_chunks, uint4 (&v)[kTaskGroups]) {
  if (r >= rows) {
#pragma unroll
    for (int u = 0; u < kTaskGroups; ++u) v[u] = make_uint4(0, 0, 0, 0);
    return;
  }
  const uint4* nrow = reinterpret_cast<const uint4*>(src.n + r * src.ld);
#pragma unroll
  for (int u = 0; u < kTaskGroups; ++u) {
    const int64_t cc = c0 + 32 * u + lane;
    v[u] = kFull || cc < data_chunks ? nrow[cc] : make_uint4(0, 0, 0, 0);
  }
  src.begin_row(r);
  if (src.st != nullptr) {
#pragma unroll
    for (int u = 0; u < kTaskGroups; ++u) {
      const int64_t cc = c0 + 32 * u + lane;
      if (kFull || cc < data_chunks) v[u] = src.modulate_staged(v[u], cc);
    }
  } else {
#pragma unroll
    for (int u = 0; u < kTaskGroups; ++u) {
      const int64_t cc = c0 + 32 * u + lane;
      if (kFull || cc < data_chunks) v[u] = src.modulate(v[u], cc);
    }
  }
}

// CTA prologue: picks up to kModSlots distinct table rows of rows [r0, r1) (first appearance, by a min-reduction
// over the row indices per slot) and stages t and shift of chunks [c_lo, c_lo + kSliceChunks) ∩ [0, data_chunks) of
// each. All threads of the CTA call it (it synchronizes); returns the staged source.
__device__ __forceinline__ ModulatedSourceStaged stage_table_slice(const ModulatedSource& base, int64_t r0, int64_t r1,
                                                                   int64_t c_lo, int64_t data_chunks) {
  __shared__ uint4 s_t[kModSlots * kSliceChunks], s_sh[kModSlots * kSliceChunks];  // 2 x 10.5 KB
  __shared__ int s_pick[kModSlots + 1];                                            // picked rows, scratch
  ModulatedSourceStaged src;
  static_cast<ModulatedSource&>(src) = base;
  src.slot_t = s_t;
  src.slot_sh = s_sh;
  src.c_lo = c_lo;
  static_assert(kModSlots == 3, "tag0..tag2");
  int n = 0;
#pragma unroll
  for (int slot = 0; slot < kModSlots; ++slot) {
    if (threadIdx.x == 0) s_pick[kModSlots] = INT_MAX;
    __syncthreads();
    int first = INT_MAX;  // first row of the range (offset) whose table row is not picked yet
    for (int64_t rr = r0 + threadIdx.x; rr < r1; rr += blockDim.x) {
      const int v = base.row_map[rr];
      if (v != src.tag0 && v != src.tag1 && v != src.tag2) {
        first = static_cast<int>(rr - r0);
        break;
      }
    }
    first = __reduce_min_sync(0xFFFFFFFFu, first);
    if ((threadIdx.x & 31) == 0 && first != INT_MAX) atomicMin(&s_pick[kModSlots], first);
    __syncthreads();
    const int pick = s_pick[kModSlots];
    __syncthreads();             // everyone read the scratch before the next slot resets it
    if (pick == INT_MAX) break;  // every row of the range has a slot
    const int picked = base.row_map[r0 + pick];
    if (slot == 0) src.tag0 = picked;
    else if (slot == 1) src.tag1 = picked;
    else src.tag2 = picked;
    n = slot + 1;
  }
  const int64_t slice = std::min<int64_t>(kSliceChunks, data_chunks - c_lo);
  for (int s = 0; s < n; ++s) {
    const int tag = s == 0 ? src.tag0 : s == 1 ? src.tag1 : src.tag2;
    const uint16_t* trow = base.table + static_cast<int64_t>(tag) * base.table_ld;
    const uint4* gsc = reinterpret_cast<const uint4*>(trow + base.scale_col) + c_lo;
    const uint4* gsh = reinterpret_cast<const uint4*>(trow + base.shift_col) + c_lo;
    for (int c = threadIdx.x; c < slice; c += blockDim.x) {
      const uint4 sc = __ldg(gsc + c);
      const uint32_t w[4] = {sc.x, sc.y, sc.z, sc.w};
      uint32_t t[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) t[k] = bf16x2_rn(__fadd_rn(1.0f, lo_f32(w[k])), __fadd_rn(1.0f, hi_f32(w[k])));
      s_t[s * kSliceChunks + c] = make_uint4(t[0], t[1], t[2], t[3]);
      s_sh[s * kSliceChunks + c] = __ldg(gsh + c);
    }
  }
  __syncthreads();
  return src;
}

// Pass 1, modulated source: block (x, y) = task column x of rows [rows y / G, rows (y + 1) / G),
// warp w takes rows r0 + w, r0 + w + 8, ...
__global__ void __launch_bounds__(kChunkWarps * 32, kAmaxModBlocksPerSm)
    amax_mod_smem_kernel(ModulatedSource base, int64_t rows, int64_t data_chunks, uint32_t* amax) {
  const int lane = threadIdx.x & 31;
  const int64_t r0 = rows * blockIdx.y / gridDim.y, r1 = rows * (blockIdx.y + 1) / gridDim.y;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kSliceChunks;
  ModulatedSourceStaged src = stage_table_slice(base, r0, r1, c0, data_chunks);
  const bool full_task = c0 + kSliceChunks <= data_chunks;
  uint32_t m2 = 0;
  for (int64_t r = r0 + (threadIdx.x >> 5); r < r1; r += kChunkWarps) {
    uint4 v[kTaskGroups];
    if (full_task) load_task_mod_smem<true>(src, r, c0, lane, rows, data_chunks, v);
    else load_task_mod_smem<false>(src, r, c0, lane, rows, data_chunks, v);
#pragma unroll
    for (int u = 0; u < kTaskGroups; ++u) {
      m2 = amax_fold_chunk(m2, v[u]);
    }
  }
  block_amax_atomic(max(m2 & 0xFFFFu, m2 >> 16), amax);
}

// Pass 2, modulated source: block (x, y) = task column x of the 8-row groups [row_groups y' / G, row_groups (y' + 1)
// / G) with y' = G - 1 - y (one wave, like the amax pass, over about the same row ranges). Each range is walked
// last-first: the amax pass walked its range first-to-last, so every CTA starts on rows likely still in L2 (as
// pack_fma_kernel does, per range). Warp w takes row 8 group + w. Rows >= rows (padding) read 0 and are not mapped.
template <bool kDynamicG>
__global__ void __launch_bounds__(kChunkWarps * 32, kPackModBlocksPerSm)
    pack_mod_smem_kernel(ModulatedSource base, int64_t rows, int64_t data_chunks, int64_t row_groups, int64_t data_rows,
                         int64_t data_row_bytes, int64_t scale_cols, const float* g_in, const uint32_t* amax,
                         float* g_out, uint8_t* data, uint8_t* scales) {
  LazyGlobalScale<kDynamicG> get_g{g_in, amax, g_out};
  const int lane = threadIdx.x & 31;
  const int64_t yy = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;
  const int64_t q0 = row_groups * yy / gridDim.y, q1 = row_groups * (yy + 1) / gridDim.y;  // row groups
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kSliceChunks;
  ModulatedSourceStaged src =
      stage_table_slice(base, std::min(rows, q0 * kChunkWarps), std::min(rows, q1 * kChunkWarps), c0, data_chunks);
  const bool full_task = c0 + kSliceChunks <= data_chunks;
  for (int64_t q = q1 - 1; q >= q0; --q) {
    const int64_t r = q * kChunkWarps + (threadIdx.x >> 5);  // < scale_rows
    uint4 v[kTaskGroups];
    if (full_task) {
      load_task_mod_smem<true>(src, r, c0, lane, rows, data_chunks, v);
      quantize_store_task_fma<true>(v, r, c0, lane, data_chunks, data_rows, data_row_bytes, scale_cols, get_g(), data,
                                    scales);
    } else {
      load_task_mod_smem<false>(src, r, c0, lane, rows, data_chunks, v);
      quantize_store_task_fma<false>(v, r, c0, lane, data_chunks, data_rows, data_row_bytes, scale_cols, get_g(), data,
                                     scales);
    }
  }
  if constexpr (kDynamicG) get_g();  // block (0, 0) writes g even when it had no row group
}

// Measured slower, not kept (benchmarks/2026-11-29-h200-s8/run5-nvfp4-producer-variants.txt, plain K 5376):
// integer E2M1 with g in a separate kernel (0.363-0.367 ms), rows first-to-last (0.231-0.235 ms), programmatic
// dependent launches (0.231-0.235 ms), persistent with the next task's loads in flight (0.238-0.244 ms) vs
// 0.225-0.229 ms. Modulated D = 5376 (benchmarks/2026-11-29-h200-s9/): the table from global memory 0.334-0.340 ms,
// staged without native bf16x2 modulation 0.311 ms (run 1), with it 0.301 ms (run 2), with the n loads issued
// before the row_map load 0.276 ms (run 3: amax 0.104, pack 0.176 ms).

// The main path of every producer (cols % 16 == 0, 16-byte aligned rows). `flat`: the source is a plain
// contiguous tensor, read by the flat amax pass.
template <typename Source>
Status run_producer_chunks(const Source& src, const uint16_t* flat, int64_t rows, int64_t cols,
                           const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, const Nvfp4RunOptions& opt,
                           cudaStream_t stream) {
  const ref::Nvfp4Layout l = ref::nvfp4_layout(rows, cols);
  const int64_t groups_per_row = (2 * l.scale_cols + 31) / 32;
  const int64_t tasks_per_row = (groups_per_row + kTaskGroups - 1) / kTaskGroups;
  const int64_t tasks = l.scale_rows * tasks_per_row;
  const bool g_in_pack = g.dynamic && tasks > 0;  // the pack kernel writes g
  if (g.dynamic && opt.amax_pass) {
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
    if (!g_in_pack) {
      global_scale_kernel<<<1, 1, 0, stream>>>(g.amax_workspace, g.g);
      VORTEX_CUDA_LAUNCH_CHECK("nvfp4 global_scale_kernel");
    }
  }
  if (tasks == 0 || !opt.pack_pass) return Status::Ok();
  // scale_rows is a multiple of 128, so every 8-row group is whole.
  const int64_t row_groups = l.scale_rows / kChunkWarps;
  if (tasks_per_row > kMaxGridX) return invalid_argument("nvfp4: rows too long for one launch");
  const dim3 grid(static_cast<unsigned>(tasks_per_row), static_cast<unsigned>(std::min<int64_t>(row_groups, 65535)));
  auto kernel = g.dynamic ? pack_fma_kernel<Source, true> : pack_fma_kernel<Source, false>;
  kernel<<<grid, kChunkWarps * 32, 0, stream>>>(src, rows, 2 * l.blocks, row_groups, l.data_rows, l.data_row_bytes,
                                                l.scale_cols, g.g, g.amax_workspace, g.g, out.data, out.scales);
  VORTEX_CUDA_LAUNCH_CHECK("nvfp4 pack_fma_kernel");
  return Status::Ok();
}

// The modulated main path: amax_mod_smem_kernel, then pack_mod_smem_kernel (each one wave of its k*ModBlocksPerSm
// CTAs per SM; g from the amax word in the pack when dynamic, as pack_fma_kernel).
Status run_modulated_smem(const ModulatedSource& src, int64_t rows, int64_t cols, const Nvfp4GlobalScale& g,
                          const Nvfp4Buffers& out, const Nvfp4RunOptions& opt, cudaStream_t stream) {
  const ref::Nvfp4Layout l = ref::nvfp4_layout(rows, cols);
  const int64_t data_chunks = 2 * l.blocks;  // cols / 8
  const int64_t tasks_per_row = (2 * l.scale_cols + kSliceChunks - 1) / kSliceChunks;
  const int64_t row_groups = l.scale_rows / kChunkWarps;  // scale_rows is a multiple of 128
  if (tasks_per_row > kMaxGridX) return invalid_argument("nvfp4: rows too long for one launch");
  int device = 0, sms = 0;
  VORTEX_CUDA_CHECK(cudaGetDevice(&device));
  VORTEX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const bool g_in_pack = g.dynamic && row_groups > 0 && tasks_per_row > 0;
  if (g.dynamic && opt.amax_pass) {
    VORTEX_CUDA_CHECK(cudaMemsetAsync(g.amax_workspace, 0, sizeof(uint32_t), stream));
    if (rows > 0 && cols > 0) {
      const int64_t data_tasks = (data_chunks + kSliceChunks - 1) / kSliceChunks;
      const int64_t want_y = std::max<int64_t>(1, static_cast<int64_t>(sms) * kAmaxModBlocksPerSm / data_tasks);
      const int64_t gy = std::min<int64_t>({want_y, (rows + kChunkWarps - 1) / kChunkWarps, 65535});
      amax_mod_smem_kernel<<<dim3(static_cast<unsigned>(data_tasks), static_cast<unsigned>(gy)), kChunkWarps * 32, 0,
                             stream>>>(src, rows, data_chunks, g.amax_workspace);
      VORTEX_CUDA_LAUNCH_CHECK("nvfp4 amax_mod_smem_kernel");
    }
    if (!g_in_pack) {
      global_scale_kernel<<<1, 1, 0, stream>>>(g.amax_workspace, g.g);
      VORTEX_CUDA_LAUNCH_CHECK("nvfp4 global_scale_kernel");
    }
  }
  if (row_groups == 0 || tasks_per_row == 0 || !opt.pack_pass) return Status::Ok();
  const int64_t want_y = std::max<int64_t>(1, static_cast<int64_t>(sms) * kPackModBlocksPerSm / tasks_per_row);
  const int64_t gy = std::min<int64_t>({want_y, row_groups, 65535});
  const dim3 grid(static_cast<unsigned>(tasks_per_row), static_cast<unsigned>(gy));
  auto kernel = g.dynamic ? pack_mod_smem_kernel<true> : pack_mod_smem_kernel<false>;
  kernel<<<grid, kChunkWarps * 32, 0, stream>>>(src, rows, data_chunks, row_groups, l.data_rows, l.data_row_bytes,
                                                l.scale_cols, g.g, g.amax_workspace, g.g, out.data, out.scales);
  VORTEX_CUDA_LAUNCH_CHECK("nvfp4 pack_mod_smem_kernel");
  return Status::Ok();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

Status launch_nvfp4_plain(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g,
                          const Nvfp4Buffers& out, const Nvfp4RunOptions& opt, cudaStream_t stream) {
  const PlainSource src{x, ld};
  if (cols % 16 == 0 && ld % 8 == 0 && aligned16(x))
    return run_producer_chunks(src, ld == cols ? x : nullptr, rows, cols, g, out, opt, stream);
  return run_producer(src, rows, cols, g, out, opt, stream);
}

Status launch_nvfp4_modulated(const uint16_t* n, int64_t rows, int64_t cols, int64_t ld, const uint16_t* table,
                              int64_t table_ld, int shift_chunk, int scale_chunk, const int32_t* row_map,
                              const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, const Nvfp4RunOptions& opt,
                              cudaStream_t stream) {
  const ModulatedSource src{n, ld, table, table_ld, shift_chunk * cols, scale_chunk * cols, row_map};
  if (cols % 16 == 0 && ld % 8 == 0 && table_ld % 8 == 0 && aligned16(n) && aligned16(table))
    return run_modulated_smem(src, rows, cols, g, out, opt, stream);
  return run_producer(src, rows, cols, g, out, opt, stream);
}

Status launch_nvfp4_swiglu(const uint16_t* u, int64_t rows, int64_t f, int64_t ld, const uint16_t* silu_table,
                           const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, const Nvfp4RunOptions& opt,
                           cudaStream_t stream) {
  const SwigluSource src{u, ld, f, silu_table};
  if (f % 16 == 0 && ld % 8 == 0 && aligned16(u))
    return run_producer_chunks(src, nullptr, rows, f, g, out, opt, stream);
  return run_producer(src, rows, f, g, out, opt, stream);
}

}  // namespace vortex::cuda_ops
