// rms_norm: out = R(fp32(fp32(x * r) * w)) per row, r from the canonical FP64 mean of squares
// (docs/numerics.md). Kernel -> launcher -> validating entry point. One 256-thread block per row,
// row staged in shared memory by 16-byte loads, then read back in the canonical lane order.
// E0 against the CPU reference in tests/cuda/ops_test.cpp (ragged rows, huge dynamic range, NaN/inf).
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

template <int kV>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_kernel(const uint16_t* x, int64_t ldx, const uint16_t* __restrict__ weight, uint16_t* out, int64_t ldo,
                    int cols, float eps) {
  extern __shared__ __align__(16) unsigned char smem[];
  double* lanes = reinterpret_cast<double*>(smem);
  uint16_t* row = reinterpret_cast<uint16_t*>(smem + kLaneBytes);  // [cols] bf16, the staged x row
  const int64_t r = blockIdx.x;
  stage_row<kV>(x + r * ldx, cols, row);
  const float rinv = staged_row_inverse_rms(row, cols, eps, lanes);
  uint16_t* orow = out + r * ldo;
  for (int c = threadIdx.x * kV; c < cols; c += kRowThreads * kV) {
    const Chunk<kV> xv = load_chunk<kV>(row + c);
    const Chunk<kV> wv = load_chunk<kV>(weight + c);
    Chunk<kV> o;
#pragma unroll
    for (int i = 0; i < kV; ++i)
      o.v[i] = f32_to_bf16(__fmul_rn(__fmul_rn(bf16_to_f32(xv.v[i]), rinv), bf16_to_f32(wv.v[i])));
    store_chunk<kV>(orow + c, o);
  }
}

template <int kV>
Status launch_rms_norm(const RowView& x, const uint16_t* w, const RowView& out, float eps, cudaStream_t stream) {
  const size_t smem = row_smem_bytes(x.cols);
  VORTEX_RETURN_IF_ERROR(prepare_row_kernel(rms_norm_kernel<kV>, smem));
  rms_norm_kernel<kV><<<static_cast<unsigned>(x.rows), kRowThreads, smem, stream>>>(
      static_cast<const uint16_t*>(x.ptr), x.ld, w, static_cast<uint16_t*>(out.ptr), out.ld, static_cast<int>(x.cols),
      eps);
  VORTEX_CUDA_LAUNCH_CHECK("rms_norm_kernel");
  return Status::Ok();
}

}  // namespace

Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, row_view(x, "rms_norm x"));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, row_view(out, "rms_norm out"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(xv, DType::kBF16, "rms_norm x"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(ov, DType::kBF16, "rms_norm out"));
  VORTEX_RETURN_IF_ERROR(expect_shape(ov, xv.rows, xv.cols, "rms_norm out"));
  VORTEX_ASSIGN_OR_RETURN(const void* w, device_vector(weight, xv.cols, DType::kBF16, "rms_norm weight"));
  if (xv.rows == 0) return Status::Ok();
  if (xv.rows > kMaxGridX || xv.cols > (1 << 30)) return invalid_argument("rms_norm: tensor too large");
  if (!(eps >= 0.0f)) return invalid_argument("rms_norm: eps must be >= 0");
  RowView wv{const_cast<void*>(w), 1, xv.cols, xv.cols, DType::kBF16};
  if (vector_ok({&xv, &ov, &wv})) return launch_rms_norm<kVec>(xv, static_cast<const uint16_t*>(w), ov, eps, stream);
  return launch_rms_norm<1>(xv, static_cast<const uint16_t*>(w), ov, eps, stream);
}

}  // namespace vortex::cuda_ops
