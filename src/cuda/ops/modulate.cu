// modulate: x = R(R(x * R(1 + scale)) + shift) in place, scale/shift from the AdaLN table row of the
// row's segment (docs/numerics.md), looked up through the cached device row map. Kernel -> launcher ->
// validating entry point; one 256-thread block per row, 16-byte vectors when aligned.
// E0 against the CPU reference in tests/cuda/ops_test.cpp.
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

template <int kV>
__global__ void __launch_bounds__(kRowThreads)
    modulate_kernel(uint16_t* x, int64_t ldx, const uint16_t* __restrict__ table, int64_t ldt,
                    const int32_t* __restrict__ row_map, int cols, int64_t shift_col, int64_t scale_col) {
  const int64_t r = blockIdx.x;
  const uint16_t* trow = table + static_cast<int64_t>(row_map[r]) * ldt;  // this row's AdaLN table row
  uint16_t* xr = x + r * ldx;
  for (int c = threadIdx.x * kV; c < cols; c += kRowThreads * kV) {
    const Chunk<kV> xv = load_chunk<kV>(xr + c);
    const Chunk<kV> sc = load_chunk<kV>(trow + scale_col + c);
    const Chunk<kV> sh = load_chunk<kV>(trow + shift_col + c);
    Chunk<kV> o;
#pragma unroll
    for (int i = 0; i < kV; ++i)
      o.v[i] = f32_to_bf16(modulate_value(bf16_to_f32(xv.v[i]), bf16_to_f32(sc.v[i]), bf16_to_f32(sh.v[i])));
    store_chunk<kV>(xr + c, o);
  }
}

template <int kV>
Status launch_modulate(const RowView& x, const RowView& table, const DeviceRowMap& map, int shift_chunk,
                       int scale_chunk, cudaStream_t stream) {
  modulate_kernel<kV><<<static_cast<unsigned>(x.rows), kRowThreads, 0, stream>>>(
      static_cast<uint16_t*>(x.ptr), x.ld, static_cast<const uint16_t*>(table.ptr), table.ld, map.table_row,
      static_cast<int>(x.cols), shift_chunk * x.cols, scale_chunk * x.cols);
  VORTEX_CUDA_LAUNCH_CHECK("modulate_kernel");
  return Status::Ok();
}

}  // namespace

Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk, const DeviceRowMap& map,
                cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, row_view(x, "modulate x"));
  VORTEX_RETURN_IF_ERROR(expect_table_2d(table, "modulate"));
  VORTEX_ASSIGN_OR_RETURN(RowView tv, row_view(table, "modulate table"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(xv, DType::kBF16, "modulate x"));
  VORTEX_RETURN_IF_ERROR(check_table(tv, xv.cols, {shift_chunk, scale_chunk}, map, xv.rows, "modulate"));
  if (xv.rows == 0) return Status::Ok();
  if (xv.rows > kMaxGridX || xv.cols > (1 << 30)) return invalid_argument("modulate: tensor too large");
  if (vector_ok({&xv, &tv})) return launch_modulate<kVec>(xv, tv, map, shift_chunk, scale_chunk, stream);
  return launch_modulate<1>(xv, tv, map, shift_chunk, scale_chunk, stream);
}

}  // namespace vortex::cuda_ops
