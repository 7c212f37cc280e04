// rms_norm_modulate: the fused Component 1 kernel: RMSNorm (NUMERICS.md step 1) and the segment
// modulation (step 2) in one pass over the row, no BF16 intermediate in HBM. Each element goes
// through exactly the roundings of rms_norm followed by modulate, so the result is E0 against the
// two kernels and the CPU reference (tests/cuda/ops_test.cpp "fused vs unfused"). Fast path: one warp
// per row, row in registers (row_kernels.cuh), packed bf16x2 roundings; wide/unaligned rows: block path.
// Slower on H200 (this: 0.267 ms): reread 0.292, warp_row_batched 0.283, cp.async ring2 0.390 / ring3 0.451 ms (benchmarks/2026-11-29-h200-s7-bw/ops_bench.log).
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

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

// Warp-per-row fused kernel: x read once into registers, canonical r, then the per-element roundings.
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

template <int kV>
Status launch_rms_norm_modulate(const RowView& x, const uint16_t* w, const RowView& table, const DeviceRowMap& map,
                                int shift_chunk, int scale_chunk, const RowView& out, float eps, cudaStream_t stream) {
  const size_t smem = row_smem_bytes(x.cols);
  VORTEX_RETURN_IF_ERROR(prepare_row_kernel(rms_norm_modulate_kernel<kV>, smem));
  rms_norm_modulate_kernel<kV><<<static_cast<unsigned>(x.rows), kRowThreads, smem, stream>>>(
      static_cast<const uint16_t*>(x.ptr), x.ld, w, static_cast<const uint16_t*>(table.ptr), table.ld, map.table_row,
      static_cast<uint16_t*>(out.ptr), out.ld, static_cast<int>(x.cols), eps, shift_chunk * x.cols, scale_chunk * x.cols);
  VORTEX_CUDA_LAUNCH_CHECK("rms_norm_modulate_kernel");
  return Status::Ok();
}

}  // namespace

Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                         int scale_chunk, const DeviceRowMap& map, Tensor& out, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, row_view(x, "rms_norm_modulate x"));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, row_view(out, "rms_norm_modulate out"));
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
  if (vector_ok({&xv, &ov, &wv, &tv})) {
    switch (reg_row_chunks(xv.cols)) {
      case 4: return launch_rms_norm_modulate_warp<4>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 8: return launch_rms_norm_modulate_warp<8>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 16: return launch_rms_norm_modulate_warp<16>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case 21: return launch_rms_norm_modulate_warp<21>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      case kMaxRegChunks:
        return launch_rms_norm_modulate_warp<kMaxRegChunks>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
      default: break;  // wider rows: block-per-row path below
    }
    return launch_rms_norm_modulate<kVec>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
  }
  return launch_rms_norm_modulate<1>(xv, wp, tv, map, shift_chunk, scale_chunk, ov, eps, stream);
}

}  // namespace vortex::cuda_ops
