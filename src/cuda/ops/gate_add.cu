// gate_add: the residual update x = R(x + R(gate * a)) in one pass (docs/numerics.md), gate
// from the row's AdaLN table row; without a table x = R(x + a) (refiner blocks). Also the unfused pair
// it replaces (gate_multiply, residual_add) so tests can prove fused == unfused byte for byte.
// Kernel -> launcher -> validating entry point; one 256-thread block per row. Tested in tests/cuda/ops_test.cpp.
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

// kGate: x = R(x + R(gate * a)); otherwise x = R(x + a).
template <int kV, bool kGate>
__global__ void __launch_bounds__(kRowThreads)
    gate_add_kernel(uint16_t* x, int64_t ldx, const uint16_t* __restrict__ a, int64_t lda,
                    const uint16_t* __restrict__ table, int64_t ldt, const int32_t* __restrict__ row_map, int cols,
                    int64_t gate_col) {
  const int64_t r = blockIdx.x;
  const uint16_t* grow = kGate ? table + static_cast<int64_t>(row_map[r]) * ldt + gate_col : nullptr;
  uint16_t* xr = x + r * ldx;
  const uint16_t* ar = a + r * lda;
  for (int c = threadIdx.x * kV; c < cols; c += kRowThreads * kV) {
    const Chunk<kV> xv = load_chunk<kV>(xr + c);
    const Chunk<kV> av = load_chunk<kV>(ar + c);
    Chunk<kV> gv;
    if constexpr (kGate) gv = load_chunk<kV>(grow + c);
    Chunk<kV> o;
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      float y = bf16_to_f32(av.v[i]);
      if constexpr (kGate) y = round_bf16(__fmul_rn(bf16_to_f32(gv.v[i]), y));
      o.v[i] = f32_to_bf16(__fadd_rn(bf16_to_f32(xv.v[i]), y));
    }
    store_chunk<kV>(xr + c, o);
  }
}

// out = R(gate * a): the first half of the unfused residual update.
template <int kV>
__global__ void __launch_bounds__(kRowThreads)
    gate_multiply_kernel(const uint16_t* __restrict__ a, int64_t lda, const uint16_t* __restrict__ table, int64_t ldt,
                         const int32_t* __restrict__ row_map, uint16_t* out, int64_t ldo, int cols, int64_t gate_col) {
  const int64_t r = blockIdx.x;
  const uint16_t* grow = table + static_cast<int64_t>(row_map[r]) * ldt + gate_col;
  for (int c = threadIdx.x * kV; c < cols; c += kRowThreads * kV) {
    const Chunk<kV> av = load_chunk<kV>(a + r * lda + c);
    const Chunk<kV> gv = load_chunk<kV>(grow + c);
    Chunk<kV> o;
#pragma unroll
    for (int i = 0; i < kV; ++i) o.v[i] = f32_to_bf16(__fmul_rn(bf16_to_f32(gv.v[i]), bf16_to_f32(av.v[i])));
    store_chunk<kV>(out + r * ldo + c, o);
  }
}

template <int kV, bool kGate>
Status launch_gate_add(const RowView& x, const RowView& a, const RowView* table, const DeviceRowMap* map,
                       int gate_chunk, cudaStream_t stream) {
  gate_add_kernel<kV, kGate><<<static_cast<unsigned>(x.rows), kRowThreads, 0, stream>>>(
      static_cast<uint16_t*>(x.ptr), x.ld, static_cast<const uint16_t*>(a.ptr), a.ld,
      table ? static_cast<const uint16_t*>(table->ptr) : nullptr, table ? table->ld : 0, map ? map->table_row : nullptr,
      static_cast<int>(x.cols), static_cast<int64_t>(gate_chunk) * x.cols);
  VORTEX_CUDA_LAUNCH_CHECK("gate_add_kernel");
  return Status::Ok();
}

template <int kV>
Status launch_gate_multiply(const RowView& a, const RowView& table, const DeviceRowMap& map, int gate_chunk,
                            const RowView& out, cudaStream_t stream) {
  gate_multiply_kernel<kV><<<static_cast<unsigned>(a.rows), kRowThreads, 0, stream>>>(
      static_cast<const uint16_t*>(a.ptr), a.ld, static_cast<const uint16_t*>(table.ptr), table.ld, map.table_row,
      static_cast<uint16_t*>(out.ptr), out.ld, static_cast<int>(a.cols), static_cast<int64_t>(gate_chunk) * a.cols);
  VORTEX_CUDA_LAUNCH_CHECK("gate_multiply_kernel");
  return Status::Ok();
}

Status check_pair(const RowView& x, const RowView& a, const char* op) {
  VORTEX_RETURN_IF_ERROR(expect_dtype(x, DType::kBF16, (std::string(op) + " x").c_str()));
  VORTEX_RETURN_IF_ERROR(expect_dtype(a, DType::kBF16, (std::string(op) + " a").c_str()));
  VORTEX_RETURN_IF_ERROR(expect_shape(a, x.rows, x.cols, (std::string(op) + " a").c_str()));
  if (x.rows > kMaxGridX || x.cols > (1 << 30)) return invalid_argument(std::string(op) + ": tensor too large");
  return Status::Ok();
}

}  // namespace

Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const DeviceRowMap* map,
                cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, row_view(x, "gate_add x"));
  VORTEX_ASSIGN_OR_RETURN(RowView av, row_view(a, "gate_add a"));
  VORTEX_RETURN_IF_ERROR(check_pair(xv, av, "gate_add"));
  if (table == nullptr) {
    if (xv.rows == 0) return Status::Ok();
    if (vector_ok({&xv, &av})) return launch_gate_add<kVec, false>(xv, av, nullptr, nullptr, 0, stream);
    return launch_gate_add<1, false>(xv, av, nullptr, nullptr, 0, stream);
  }
  if (map == nullptr) return invalid_argument("gate_add: a gate table needs a segment map");
  VORTEX_RETURN_IF_ERROR(expect_table_2d(*table, "gate_add"));
  VORTEX_ASSIGN_OR_RETURN(RowView tv, row_view(*table, "gate_add table"));
  VORTEX_RETURN_IF_ERROR(check_table(tv, xv.cols, {gate_chunk}, *map, xv.rows, "gate_add"));
  if (xv.rows == 0) return Status::Ok();
  if (vector_ok({&xv, &av, &tv})) return launch_gate_add<kVec, true>(xv, av, &tv, map, gate_chunk, stream);
  return launch_gate_add<1, true>(xv, av, &tv, map, gate_chunk, stream);
}

Status gate_multiply(const Tensor& a, const Tensor& table, int gate_chunk, const DeviceRowMap& map, Tensor& out,
                     cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView av, row_view(a, "gate_multiply a"));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, row_view(out, "gate_multiply out"));
  VORTEX_RETURN_IF_ERROR(expect_table_2d(table, "gate_multiply"));
  VORTEX_ASSIGN_OR_RETURN(RowView tv, row_view(table, "gate_multiply table"));
  VORTEX_RETURN_IF_ERROR(check_pair(ov, av, "gate_multiply"));
  VORTEX_RETURN_IF_ERROR(check_table(tv, av.cols, {gate_chunk}, map, av.rows, "gate_multiply"));
  if (av.rows == 0) return Status::Ok();
  if (vector_ok({&av, &ov, &tv})) return launch_gate_multiply<kVec>(av, tv, map, gate_chunk, ov, stream);
  return launch_gate_multiply<1>(av, tv, map, gate_chunk, ov, stream);
}

Status residual_add(Tensor& x, const Tensor& y, cudaStream_t stream) {
  return gate_add(x, y, nullptr, 0, nullptr, stream);
}

}  // namespace vortex::cuda_ops
