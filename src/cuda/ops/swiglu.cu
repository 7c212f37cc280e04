// swiglu: m = R(R(silu(gate)) * value) (docs/numerics.md), gate = u[:, :F], value = u[:, F:].
// Why a table: silu(g) = g / (1 + exp(-g)) must be evaluated in FP64 and rounded once, and CUDA's FP64
// exp is not guaranteed correctly rounded, so device and host libm may differ by an ulp that can flip a
// BF16 rounding. BF16 has only 65,536 inputs: the host evaluates the CPU reference's own scalar SiLU
// (ref::silu_bf16_bits) for all of them once and the kernel gathers from that 128 KB table — E0 by construction.
// silu_fp64_device_all() computes the device FP64 version so tests can record whether a table-free
// kernel would also have been exact (tests/cuda/ops_test.cpp "SiluExhaustive").
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"
#include "ref/ref_ops.h"

namespace vortex::cuda_ops {
namespace {

template <int kV>
__global__ void __launch_bounds__(kRowThreads)
    swiglu_kernel(const uint16_t* __restrict__ u, int64_t ldu, const uint16_t* __restrict__ silu_table,
                  uint16_t* __restrict__ m, int64_t ldm, int f) {
  const int64_t r = blockIdx.x;
  const uint16_t* gate = u + r * ldu;  // [F] bf16
  const uint16_t* value = gate + f;    // [F] bf16
  for (int c = threadIdx.x * kV; c < f; c += kRowThreads * kV) {
    const Chunk<kV> gv = load_chunk<kV>(gate + c);
    const Chunk<kV> vv = load_chunk<kV>(value + c);
    Chunk<kV> o;
#pragma unroll
    for (int i = 0; i < kV; ++i)
      o.v[i] = f32_to_bf16(__fmul_rn(bf16_to_f32(__ldg(silu_table + gv.v[i])), bf16_to_f32(vv.v[i])));
    store_chunk<kV>(m + r * ldm + c, o);
  }
}

__global__ void silu_fp64_all_kernel(uint16_t* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 65536) return;
  const double g = static_cast<double>(bf16_to_f32(static_cast<uint16_t>(i)));
  out[i] = f64_to_bf16(__ddiv_rn(g, __dadd_rn(1.0, exp(-g))));
}

template <int kV>
Status launch_swiglu(const RowView& u, const RowView& m, const uint16_t* table, cudaStream_t stream) {
  swiglu_kernel<kV><<<static_cast<unsigned>(u.rows), kRowThreads, 0, stream>>>(
      static_cast<const uint16_t*>(u.ptr), u.ld, table, static_cast<uint16_t*>(m.ptr), m.ld, static_cast<int>(m.cols));
  VORTEX_CUDA_LAUNCH_CHECK("swiglu_kernel");
  return Status::Ok();
}

}  // namespace

std::vector<uint16_t> silu_bf16_table_host() {
  std::vector<uint16_t> table(65536);
  for (uint32_t i = 0; i < 65536; ++i) table[i] = ref::silu_bf16_bits(static_cast<uint16_t>(i));
  return table;
}

Status swiglu(const Tensor& u, Tensor& m, const uint16_t* silu_table, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView uv, row_view(u, "swiglu u"));
  VORTEX_ASSIGN_OR_RETURN(RowView mv, row_view(m, "swiglu m"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(uv, DType::kBF16, "swiglu u"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(mv, DType::kBF16, "swiglu m"));
  if (uv.cols % 2 != 0)
    return invalid_argument("swiglu: u must have an even width [gate | value], got " + std::to_string(uv.cols));
  VORTEX_RETURN_IF_ERROR(expect_shape(mv, uv.rows, uv.cols / 2, "swiglu m"));
  if (silu_table == nullptr) return invalid_argument("swiglu: missing the device SiLU table");
  if (uv.rows == 0) return Status::Ok();
  if (uv.rows > kMaxGridX || uv.cols > (1 << 30)) return invalid_argument("swiglu: tensor too large");
  RowView gate_half{uv.ptr, uv.rows, mv.cols, uv.ld, uv.dtype};  // value half starts F elements later
  if (vector_ok({&gate_half, &mv})) return launch_swiglu<kVec>(uv, mv, silu_table, stream);
  return launch_swiglu<1>(uv, mv, silu_table, stream);
}

Status silu_fp64_device_all(uint16_t* out_device, cudaStream_t stream) {
  silu_fp64_all_kernel<<<65536 / 256, 256, 0, stream>>>(out_device);
  VORTEX_CUDA_LAUNCH_CHECK("silu_fp64_all_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
