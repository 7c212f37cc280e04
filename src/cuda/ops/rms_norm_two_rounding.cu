// rms_norm_two_rounding: transformers' Qwen3 RMSNorm, out = R(fp32(R(fp32(x * r)) * w)) per row, with rms_norm's
// r (canonical FP64 mean of squares, FP64 rsqrt, one rounding to FP32): the conditioner's layer norms.
// Kernel -> launcher -> validating entry point, the structure of rms_norm.cu: one 256-thread block per row, the row
// staged in shared memory by 16-byte loads (scalar loads for unaligned views), read back in the canonical lane
// order. E0 against ref::rms_norm_two_rounding in tests/cuda/text_encoder_ops_test.cpp.
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

template <int kV>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_two_rounding_kernel(const uint16_t* x, int64_t ldx, const uint16_t* __restrict__ weight, uint16_t* out,
                                 int64_t ldo, int cols, float eps) {
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
    for (int i = 0; i < kV; ++i) {
      const float normed = round_bf16(__fmul_rn(bf16_to_f32(xv.v[i]), rinv));  // R(fp32(x * r))
      o.v[i] = f32_to_bf16(__fmul_rn(normed, bf16_to_f32(wv.v[i])));
    }
    store_chunk<kV>(orow + c, o);
  }
}

template <int kV>
Status launch_rms_norm_two_rounding(const RowView& x, const uint16_t* w, const RowView& out, float eps,
                                    cudaStream_t stream) {
  const size_t smem = row_smem_bytes(x.cols);
  VORTEX_RETURN_IF_ERROR(prepare_row_kernel(rms_norm_two_rounding_kernel<kV>, smem));
  rms_norm_two_rounding_kernel<kV><<<static_cast<unsigned>(x.rows), kRowThreads, smem, stream>>>(
      static_cast<const uint16_t*>(x.ptr), x.ld, w, static_cast<uint16_t*>(out.ptr), out.ld, static_cast<int>(x.cols),
      eps);
  VORTEX_CUDA_LAUNCH_CHECK("rms_norm_two_rounding_kernel");
  return Status::Ok();
}

}  // namespace

Status rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, row_view(x, "rms_norm_two_rounding x"));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, row_view(out, "rms_norm_two_rounding out"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(xv, DType::kBF16, "rms_norm_two_rounding x"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(ov, DType::kBF16, "rms_norm_two_rounding out"));
  VORTEX_RETURN_IF_ERROR(expect_shape(ov, xv.rows, xv.cols, "rms_norm_two_rounding out"));
  VORTEX_ASSIGN_OR_RETURN(const void* w, device_vector(weight, xv.cols, DType::kBF16, "rms_norm_two_rounding weight"));
  if (!(eps >= 0.0f)) return invalid_argument("rms_norm_two_rounding: eps must be >= 0");
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  if (xv.rows > kMaxGridX || xv.cols > (1 << 30)) return invalid_argument("rms_norm_two_rounding: tensor too large");
  RowView wv{const_cast<void*>(w), 1, xv.cols, xv.cols, DType::kBF16};
  if (vector_ok({&xv, &ov, &wv}))
    return launch_rms_norm_two_rounding<kVec>(xv, static_cast<const uint16_t*>(w), ov, eps, stream);
  return launch_rms_norm_two_rounding<1>(xv, static_cast<const uint16_t*>(w), ov, eps, stream);
}

}  // namespace vortex::cuda_ops
