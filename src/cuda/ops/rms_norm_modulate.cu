// rms_norm_modulate: the fused Component 1 kernel: RMSNorm (docs/numerics.md) and the segment modulation
// in one pass over the row, each element through exactly the roundings of rms_norm then modulate: E0 against the two
// kernels and the CPU reference (tests/cuda/ops_test.cpp, the fallback kernel too). Rows <= 6144 bf16, 16-byte
// aligned: row in registers. The table kernel (persistent; weight, R(1 + scale), shift staged in shared memory, next
// row prefetched during the write, native bf16x2): H200 S = 37,810, D = 5376 0.226 ms = 85.9% of copy vs 0.269 ms =
// 72.3% for one warp per row reading the table from L2 (benchmarks/2026-11-29-h200-s8/
// run5-rms-norm-modulate-variants.txt), which stays as the fallback where the table kernel cannot be resident.
// Staging without prefetch or bf16x2, FP64-intcvt: 0.228-0.242 ms. Wide/unaligned rows: block per row. Measured
// slower on H200 and not kept: reread, batched stores, cp.async rings.
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

#include <algorithm>
#include <climits>
#include <mutex>

namespace vortex::cuda_ops {
namespace {

template <int kV>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_modulate_kernel(const uint16_t* x, int64_t ldx, const uint16_t* __restrict__ weight,
                             const uint16_t* __restrict__ table, int64_t ldt, const int32_t* __restrict__ row_map,
                             uint16_t* out, int64_t ldo, int cols, float eps, int64_t shift_col, int64_t scale_col) {
  extern __shared__ __align__(16) unsigned char smem[];
  double* lanes = reinterpret_cast<double*>(smem);
  uint16_t* row = reinterpret_cast<uint16_t*>(smem + kLaneBytes);  // [cols] bf16, the staged x row
  const int64_t r = blockIdx.x;
  stage_row<kV>(x + r * ldx, cols, row);
  const float rinv = staged_row_inverse_rms(row, cols, eps, lanes);
  const uint16_t* trow = table + static_cast<int64_t>(row_map[r]) * ldt;  // this row's AdaLN table row
  uint16_t* orow = out + r * ldo;
  for (int c = threadIdx.x * kV; c < cols; c += kRowThreads * kV) {
    const Chunk<kV> xv = load_chunk<kV>(row + c);
    const Chunk<kV> wv = load_chunk<kV>(weight + c);
    const Chunk<kV> sc = load_chunk<kV>(trow + scale_col + c);
    const Chunk<kV> sh = load_chunk<kV>(trow + shift_col + c);
    Chunk<kV> o;
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      const float n = norm_value(bf16_to_f32(xv.v[i]), rinv, bf16_to_f32(wv.v[i]));
      o.v[i] = f32_to_bf16(modulate_value(n, bf16_to_f32(sc.v[i]), bf16_to_f32(sh.v[i])));
    }
    store_chunk<kV>(orow + c, o);
  }
}

// Warp-per-row fused kernel (the fallback of the table kernel): x read once into registers, canonical r, then the
// per-element roundings.
template <int kChunks>
__global__ void __launch_bounds__(kRowWarpsPerBlock * 32)
    rms_norm_modulate_warp_kernel(const uint16_t* x, int64_t ldx, const uint16_t* __restrict__ weight,
                                  const uint16_t* __restrict__ table, int64_t ldt, const int32_t* __restrict__ row_map,
                                  uint16_t* out, int64_t ldo, int64_t rows, int cols, float eps, int64_t shift_col,
                                  int64_t scale_col) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;  // whole warp exits together
  const int nchunks = cols / 8;
  const uint16_t* trow = table + static_cast<int64_t>(row_map[r]) * ldt;  // this row's AdaLN table row (issued early)
  RegRow<kChunks> xr;  // [cols] bf16 of row r, chunk-distributed over the warp
  load_reg_row<kChunks>(x + r * ldx, nchunks, lane, xr);
  const float rinv = inverse_rms(warp_row_canonical_sum_squares<kChunks>(xr), cols, eps);
  uint16_t* orow = out + r * ldo;
#pragma unroll
  for (int m = 0; m < kChunks; ++m) {
    const int c = lane + 32 * m;
    if (c >= nchunks) break;
    const int64_t e = 8 * static_cast<int64_t>(c);
    const uint4 wv = *reinterpret_cast<const uint4*>(weight + e);
    const uint4 sc = *reinterpret_cast<const uint4*>(trow + scale_col + e);
    const uint4 sh = *reinterpret_cast<const uint4*>(trow + shift_col + e);
    uint4 o;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t xw = word(xr.chunk[m], k), ww = word(wv, k), sw = word(sc, k), hw = word(sh, k);
      // n = R(fp32(fp32(x * r) * w))
      const uint32_t n = f32x2_to_bf16x2(__fmul_rn(__fmul_rn(bf16_lo(xw), rinv), bf16_lo(ww)),
                                         __fmul_rn(__fmul_rn(bf16_hi(xw), rinv), bf16_hi(ww)));
      // t = R(1 + scale); p = R(n * t); o = R(p + shift)
      const uint32_t t = f32x2_to_bf16x2(__fadd_rn(1.0f, bf16_lo(sw)), __fadd_rn(1.0f, bf16_hi(sw)));
      const uint32_t p = f32x2_to_bf16x2(__fmul_rn(bf16_lo(n), bf16_lo(t)), __fmul_rn(bf16_hi(n), bf16_hi(t)));
      set_word(o, k, f32x2_to_bf16x2(__fadd_rn(bf16_lo(p), bf16_lo(hw)), __fadd_rn(bf16_hi(p), bf16_hi(hw))));
    }
    *reinterpret_cast<uint4*>(orow + e) = o;
  }
}

template <int kChunks>
Status launch_rms_norm_modulate_warp(const RowView& x, const uint16_t* w, const RowView& table, const DeviceRowMap& map,
                                     int shift_chunk, int scale_chunk, const RowView& out, float eps,
                                     cudaStream_t stream) {
  const int64_t blocks = (x.rows + kRowWarpsPerBlock - 1) / kRowWarpsPerBlock;
  rms_norm_modulate_warp_kernel<kChunks><<<static_cast<unsigned>(blocks), kRowWarpsPerBlock * 32, 0, stream>>>(
      static_cast<const uint16_t*>(x.ptr), x.ld, w, static_cast<const uint16_t*>(table.ptr), table.ld, map.table_row,
      static_cast<uint16_t*>(out.ptr), out.ld, x.rows, static_cast<int>(x.cols), eps, shift_chunk * x.cols,
      scale_chunk * x.cols);
  VORTEX_CUDA_LAUNCH_CHECK("rms_norm_modulate_warp_kernel");
  return Status::Ok();
}

// ---- Persistent shared-memory-table kernel (the default for register rows) -------------------------------
// Grid: ~2 CTAs per SM, CTA b owns the contiguous rows [rows * b / G, rows * (b + 1) / G), its warps take rows
// r0 + warp, r0 + warp + kTableWarps, ... At start the CTA picks up to `slots` distinct table rows of its range
// (first appearance; rows of one segment are contiguous, so a CTA usually sees one or two) and stages the
// weight and, per picked table row, t = R(1 + scale) and shift in shared memory. Rows whose table row was not
// picked read scale/shift from global memory (correct for ANY row map, only slower). While row i is written,
// its register chunks are refilled with row i + kTableWarps (the warp's next row), so loads overlap the writes.
// Why (run5-rms-norm-modulate-variants.txt, H200): staging alone 0.269 -> 0.239 ms (the write phase was bound on
// three L2 loads per 16-byte output); native bf16x2 0.229, + prefetch 0.226 ms.
constexpr int kTableWarps = 8;  // warps (rows in flight) per CTA
// CTAs per SM the register budget is sized for: 2 (<= 128 registers) up to 21 chunks per lane (D = 5376); the
// 24-chunk rows spill at 128, so they get 1. ptxas (CUDA 13.0, sm_90a), 0 spills everywhere, registers per
// chunks per lane 4 / 8 / 16 / 21 / 24: table 94 / 121 / 122 / 128 / 241, warp kernel 56 / 72 / 134 / 150 / 180;
// block-per-row kernel 32.
// Two CTAs per SM (a 128-register cap) only on sm_90: sm_100a's ptxas spills 12-28 bytes at that cap for 8-21
// chunks, so the other targets take one CTA per SM (256 registers).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
constexpr int table_min_blocks(int) { return 1; }
#else
constexpr int table_min_blocks(int chunks) { return chunks <= 21 ? 2 : 1; }
#endif
constexpr int kMaxTableSlots = 3;    // staged table rows per CTA (H3: text / audio / video)
constexpr int kTableMetaBytes = 32;  // int meta[8]: [0..2] picked table rows, [3] count, [4] pick scratch

inline size_t table_smem_bytes(int64_t nchunks, int slots) {
  const size_t per_row = 16u * static_cast<size_t>(nchunks);  // one [cols] bf16 vector
  return static_cast<size_t>(kTableMetaBytes) + per_row * (1u + 2u * static_cast<size_t>(slots));
}

// t = R(1 + scale) of a packed bf16 pair (the rounding modulate_value does).
__device__ __forceinline__ uint32_t one_plus_bf16x2(uint32_t s) {
  return f32x2_to_bf16x2(__fadd_rn(1.0f, bf16_lo(s)), __fadd_rn(1.0f, bf16_hi(s)));
}
__device__ __forceinline__ uint4 one_plus_chunk(const uint4& s) {
  return make_uint4(one_plus_bf16x2(s.x), one_plus_bf16x2(s.y), one_plus_bf16x2(s.z), one_plus_bf16x2(s.w));
}
// One 16-byte output chunk: n = R(fp32(fp32(x * r) * w)), p = R(n * t), o = R(p + shift); t = R(1 + scale) given.
__device__ __forceinline__ uint4 norm_modulate_chunk(const uint4& xv, const uint4& wv, const uint4& tv, const uint4& hv,
                                                     float rinv) {
  uint4 o;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t xw = word(xv, k), ww = word(wv, k), tw = word(tv, k), hw = word(hv, k);
    const uint32_t n = f32x2_to_bf16x2(__fmul_rn(__fmul_rn(bf16_lo(xw), rinv), bf16_lo(ww)),
                                       __fmul_rn(__fmul_rn(bf16_hi(xw), rinv), bf16_hi(ww)));
    set_word(o, k, bf16x2_add_rn(bf16x2_mul_rn(n, tw), hw));
  }
  return o;
}

// Write phase of one row held in xr. kStaged: t and shift from shared memory (st, sh), else from the global table
// row (gscale, gshift; t rounded here). Chunk m of the next row (xnext, when `more`) is loaded into xr.chunk[m] as
// soon as chunk m of this row is consumed, so the next row streams in during this write phase.
template <int kChunks, bool kStaged>
__device__ __forceinline__ void table_write_row(RegRow<kChunks>& xr, float rinv, const uint4* sw, const uint4* st,
                                                const uint4* sh, const uint16_t* __restrict__ gscale,
                                                const uint16_t* __restrict__ gshift, uint16_t* orow,
                                                const uint16_t* xnext, bool more, int nchunks, int lane) {
#pragma unroll
  for (int m = 0; m < kChunks; ++m) {
    const int c = lane + 32 * m;
    if (c >= nchunks) break;
    const int64_t e = 8 * static_cast<int64_t>(c);
    const uint4 wv = sw[c];
    uint4 tv, hv;
    if constexpr (kStaged) {
      tv = st[c];
      hv = sh[c];
    } else {
      tv = one_plus_chunk(*reinterpret_cast<const uint4*>(gscale + e));
      hv = *reinterpret_cast<const uint4*>(gshift + e);
    }
    const uint4 o = norm_modulate_chunk(xr.chunk[m], wv, tv, hv, rinv);
    if (more) xr.chunk[m] = *reinterpret_cast<const uint4*>(xnext + e);
    *reinterpret_cast<uint4*>(orow + e) = o;
  }
}

template <int kChunks>
__global__ void __launch_bounds__(kTableWarps * 32, table_min_blocks(kChunks))
    rms_norm_modulate_table_kernel(const uint16_t* x, int64_t ldx, const uint16_t* __restrict__ weight,
                                   const uint16_t* __restrict__ table, int64_t ldt, const int32_t* __restrict__ row_map,
                                   uint16_t* out, int64_t ldo, int64_t rows, int cols, float eps, int64_t shift_col,
                                   int64_t scale_col, int max_slots) {
  extern __shared__ __align__(16) unsigned char smem[];
  int* meta = reinterpret_cast<int*>(smem);                      // [8] see kTableMetaBytes
  uint4* sw = reinterpret_cast<uint4*>(smem + kTableMetaBytes);  // [nchunks] weight, then per slot t, shift
  const int nchunks = cols / 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r0 = rows * blockIdx.x / gridDim.x, r1 = rows * (blockIdx.x + 1) / gridDim.x;
  int64_t r = r0 + warp;
  RegRow<kChunks> xr;  // [cols] bf16 of row r, chunk-distributed over the warp; in flight during the staging
  if (r < r1) load_reg_row<kChunks>(x + r * ldx, nchunks, lane, xr);
  int tr = r < r1 ? row_map[r] : -1;

  // Pick up to max_slots distinct table rows of [r0, r1), in order of first appearance.
  if (threadIdx.x < 8) meta[threadIdx.x] = threadIdx.x == 3 ? 0 : -1;
  for (int64_t base = r0; base < r1; base += blockDim.x) {
    const int64_t rr = base + threadIdx.x;
    const int v = rr < r1 ? row_map[rr] : -1;
    bool full = false;
    for (int s = 0; s < max_slots; ++s) {
      __syncthreads();  // meta stable; previous readers of meta[4] done
      if (threadIdx.x == 0) meta[4] = INT_MAX;
      const int n = meta[3];
      __syncthreads();
      if (n >= max_slots) {
        full = true;
        break;
      }
      bool fresh = v >= 0;
      for (int q = 0; q < n; ++q) fresh = fresh && v != meta[q];
      if (fresh) atomicMin(&meta[4], static_cast<int>(threadIdx.x));
      __syncthreads();
      const int pick = meta[4];
      if (pick == INT_MAX) break;  // every row of this piece has a slot
      if (static_cast<int>(threadIdx.x) == pick) {
        meta[n] = v;
        meta[3] = n + 1;
      }
    }
    if (full) break;
  }
  __syncthreads();
  const int nslots = meta[3];
  const int tag0 = meta[0], tag1 = meta[1], tag2 = meta[2];

  // Stage the weight and t = R(1 + scale), shift of each picked table row.
  for (int c = threadIdx.x; c < nchunks; c += blockDim.x)
    sw[c] = *reinterpret_cast<const uint4*>(weight + 8 * static_cast<int64_t>(c));
  for (int s = 0; s < nslots; ++s) {
    const uint16_t* trow = table + static_cast<int64_t>(meta[s]) * ldt;
    uint4* st = sw + static_cast<int64_t>(nchunks) * (1 + 2 * s);
    uint4* sh = st + nchunks;
#pragma unroll 2
    for (int c = threadIdx.x; c < nchunks; c += blockDim.x) {
      const int64_t e = 8 * static_cast<int64_t>(c);
      const uint4 sc = *reinterpret_cast<const uint4*>(trow + scale_col + e);
      const uint4 hv = *reinterpret_cast<const uint4*>(trow + shift_col + e);
      st[c] = one_plus_chunk(sc);
      sh[c] = hv;
    }
  }
  __syncthreads();

  for (; r < r1; r += kTableWarps) {
    const float rinv = inverse_rms(warp_row_canonical_sum_squares<kChunks>(xr), cols, eps);
    const int slot = (nslots > 0 && tr == tag0)   ? 0
                     : (nslots > 1 && tr == tag1) ? 1
                     : (nslots > 2 && tr == tag2) ? 2
                                                  : -1;  // -1: not staged, global fallback
    const int64_t rn = r + kTableWarps;
    const bool more = rn < r1;
    const uint16_t* xnext = x + (more ? rn : r) * ldx;
    const uint16_t* trow = table + static_cast<int64_t>(tr) * ldt;  // used only when the row's table row is not staged
    const int tr_next = more ? row_map[rn] : -1;
    uint16_t* orow = out + r * ldo;
    if (slot >= 0) {
      const uint4* st = sw + static_cast<int64_t>(nchunks) * (1 + 2 * slot);
      table_write_row<kChunks, true>(xr, rinv, sw, st, st + nchunks, nullptr, nullptr, orow, xnext, more, nchunks,
                                     lane);
    } else {
      table_write_row<kChunks, false>(xr, rinv, sw, nullptr, nullptr, trow + scale_col, trow + shift_col, orow, xnext,
                                      more, nchunks, lane);
    }
    tr = tr_next;
  }
}

// Per-instantiation launch facts (SMs, resident CTAs at this shared memory), queried once per device and size.
struct TableLaunchInfo {
  int device = -1;
  size_t smem = 0;
  int sms = 0, per_sm = 0;  // per_sm 0: cannot run (shared memory above the opt-in limit)
};

// Launches the table kernel; *launched = false when it cannot run here (no resident CTA with this shared memory).
template <int kChunks>
Status launch_rms_norm_modulate_table(const RowView& x, const uint16_t* w, const RowView& table,
                                      const DeviceRowMap& map, int shift_chunk, int scale_chunk, const RowView& out,
                                      float eps, cudaStream_t stream, bool* launched) {
  *launched = false;
  auto kernel = rms_norm_modulate_table_kernel<kChunks>;
  const int slots = static_cast<int>(std::min<int64_t>(kMaxTableSlots, table.rows));
  const size_t smem = table_smem_bytes(x.cols / 8, slots);
  static std::mutex mu;
  static TableLaunchInfo cached;
  TableLaunchInfo info;
  int device = 0;
  VORTEX_CUDA_CHECK(cudaGetDevice(&device));
  {
    std::lock_guard<std::mutex> lock(mu);
    info = cached;
  }
  if (info.device != device || info.smem != smem) {
    info = TableLaunchInfo{device, smem, 0, 0};
    int optin = 0;
    VORTEX_CUDA_CHECK(cudaDeviceGetAttribute(&info.sms, cudaDevAttrMultiProcessorCount, device));
    VORTEX_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (smem <= static_cast<size_t>(optin)) {
      VORTEX_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      VORTEX_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info.per_sm, kernel, kTableWarps * 32, smem));
    }
    std::lock_guard<std::mutex> lock(mu);
    cached = info;
  }
  if (info.per_sm < 1) return Status::Ok();
  const int64_t blocks =
      std::min<int64_t>(static_cast<int64_t>(info.sms) * info.per_sm, (x.rows + kTableWarps - 1) / kTableWarps);
  kernel<<<static_cast<unsigned>(blocks), kTableWarps * 32, smem, stream>>>(
      static_cast<const uint16_t*>(x.ptr), x.ld, w, static_cast<const uint16_t*>(table.ptr), table.ld, map.table_row,
      static_cast<uint16_t*>(out.ptr), out.ld, x.rows, static_cast<int>(x.cols), eps, shift_chunk * x.cols,
      scale_chunk * x.cols, slots);
  VORTEX_CUDA_LAUNCH_CHECK("rms_norm_modulate_table_kernel");
  *launched = true;
  return Status::Ok();
}

// The register-row path: the table kernel, or the warp-per-row kernel when the table kernel cannot run here.
template <int kChunks>
Status launch_rms_norm_modulate_reg(const RowView& x, const uint16_t* w, const RowView& table, const DeviceRowMap& map,
                                    int shift_chunk, int scale_chunk, const RowView& out, float eps,
                                    cudaStream_t stream) {
  bool launched = false;
  VORTEX_RETURN_IF_ERROR(
      launch_rms_norm_modulate_table<kChunks>(x, w, table, map, shift_chunk, scale_chunk, out, eps, stream, &launched));
  if (launched) return Status::Ok();
  return launch_rms_norm_modulate_warp<kChunks>(x, w, table, map, shift_chunk, scale_chunk, out, eps, stream);
}

template <int kV>
Status launch_rms_norm_modulate(const RowView& x, const uint16_t* w, const RowView& table, const DeviceRowMap& map,
                                int shift_chunk, int scale_chunk, const RowView& out, float eps, cudaStream_t stream) {
  const size_t smem = row_smem_bytes(x.cols);
  VORTEX_RETURN_IF_ERROR(prepare_row_kernel(rms_norm_modulate_kernel<kV>, smem));
  rms_norm_modulate_kernel<kV><<<static_cast<unsigned>(x.rows), kRowThreads, smem, stream>>>(
      static_cast<const uint16_t*>(x.ptr), x.ld, w, static_cast<const uint16_t*>(table.ptr), table.ld, map.table_row,
      static_cast<uint16_t*>(out.ptr), out.ld, static_cast<int>(x.cols), eps, shift_chunk * x.cols,
      scale_chunk * x.cols);
  VORTEX_CUDA_LAUNCH_CHECK("rms_norm_modulate_kernel");
  return Status::Ok();
}

// Validation (once, here) and dispatch. warp_rows: the register-row fallback kernel instead of the table kernel.
Status run_rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                             int scale_chunk, const DeviceRowMap& map, Tensor& out, cudaStream_t stream,
                             bool warp_rows) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, row_view(x, "rms_norm_modulate x"));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, row_view(out, "rms_norm_modulate out"));
  VORTEX_RETURN_IF_ERROR(expect_table_2d(table, "rms_norm_modulate"));
  VORTEX_ASSIGN_OR_RETURN(RowView tv, row_view(table, "rms_norm_modulate table"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(xv, DType::kBF16, "rms_norm_modulate x"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(ov, DType::kBF16, "rms_norm_modulate out"));
  VORTEX_RETURN_IF_ERROR(expect_shape(ov, xv.rows, xv.cols, "rms_norm_modulate out"));
  VORTEX_ASSIGN_OR_RETURN(const void* w, device_vector(weight, xv.cols, DType::kBF16, "rms_norm_modulate weight"));
  VORTEX_RETURN_IF_ERROR(check_table(tv, xv.cols, {shift_chunk, scale_chunk}, map, xv.rows, "rms_norm_modulate"));
  if (xv.rows == 0) return Status::Ok();
  if (xv.rows > kMaxGridX || xv.cols > (1 << 30)) return invalid_argument("rms_norm_modulate: tensor too large");
  if (!(eps >= 0.0f)) return invalid_argument("rms_norm_modulate: eps must be >= 0");
  RowView wv{const_cast<void*>(w), 1, xv.cols, xv.cols, DType::kBF16};
  const auto* wp = static_cast<const uint16_t*>(w);
  const bool reg_rows = vector_ok({&xv, &ov, &wv, &tv}) && reg_row_chunks(xv.cols) != 0;
  if (warp_rows) {
    if (!reg_rows)
      return invalid_argument("rms_norm_modulate_warp_rows: rows must be <= " + std::to_string(kMaxRegChunks * 256) +
                              " bf16 and 16-byte aligned, got " + x.describe());
    switch (reg_row_chunks(xv.cols)) {
      case 4:
        return launch_rms_norm_modulate_warp<4>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 8:
        return launch_rms_norm_modulate_warp<8>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 16:
        return launch_rms_norm_modulate_warp<16>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 21:
        return launch_rms_norm_modulate_warp<21>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      default:
        return launch_rms_norm_modulate_warp<kMaxRegChunks>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
    }
  }
  if (vector_ok({&xv, &ov, &wv, &tv})) {
    switch (reg_row_chunks(xv.cols)) {
      case 4:
        return launch_rms_norm_modulate_reg<4>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 8:
        return launch_rms_norm_modulate_reg<8>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 16:
        return launch_rms_norm_modulate_reg<16>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 21:
        return launch_rms_norm_modulate_reg<21>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case kMaxRegChunks:
        return launch_rms_norm_modulate_reg<kMaxRegChunks>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      default:
        break;  // wider rows: block-per-row path below
    }
    return launch_rms_norm_modulate<kVec>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
  }
  return launch_rms_norm_modulate<1>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
}

}  // namespace

Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                         int scale_chunk, const DeviceRowMap& map, Tensor& out, cudaStream_t stream) {
  return run_rms_norm_modulate(x, weight, eps, table, shift_chunk, scale_chunk, map, out, stream, false);
}

Status rms_norm_modulate_warp_rows(const Tensor& x, const Tensor& weight, float eps, const Tensor& table,
                                   int shift_chunk, int scale_chunk, const DeviceRowMap& map, Tensor& out,
                                   cudaStream_t stream) {
  return run_rms_norm_modulate(x, weight, eps, table, shift_chunk, scale_chunk, map, out, stream, true);
}

}  // namespace vortex::cuda_ops
