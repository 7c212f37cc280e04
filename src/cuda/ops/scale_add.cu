// scale_add: the video VAE's LayerScale residual x = fp32(x + fp32(a * scale)) on the FP32 stream, a bf16 or
// f32; E0 vs src/ref/scale_add.cpp (two explicit FP32 roundings, no FMA). Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

template <bool kBf16A>
__global__ void __launch_bounds__(kEltThreads)
    scale_add_kernel(float* __restrict__ x, int64_t ldx, const void* __restrict__ a, int64_t lda,
                     const float* __restrict__ scale, int rows, int cols) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * kEltThreads + threadIdx.x; c < cols; c += gridDim.x * kEltThreads) {
      const int64_t ia = static_cast<int64_t>(r) * lda + c;
      const float av = kBf16A ? bf16_to_f32(static_cast<const uint16_t*>(a)[ia]) : static_cast<const float*>(a)[ia];
      float& xr = x[static_cast<int64_t>(r) * ldx + c];
      xr = __fadd_rn(xr, __fmul_rn(av, scale[c]));
    }
}

}  // namespace

Status scale_add(Tensor& x, const Tensor& a, const Tensor& scale, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "scale_add x", DType::kF32, -1, -1));
  if (!a.defined() || (a.dtype() != DType::kF32 && a.dtype() != DType::kBF16))
    return invalid_argument("scale_add: a must be f32 or bf16 [S, D], got " +
                            (a.defined() ? a.describe() : std::string("undefined")));
  VORTEX_ASSIGN_OR_RETURN(RowView av, vae_rows(a, "scale_add a", a.dtype(), xv.rows, xv.cols));
  VORTEX_ASSIGN_OR_RETURN(const void* s, device_vector(scale, xv.cols, DType::kF32, "scale_add scale"));
  VORTEX_RETURN_IF_ERROR(expect_disjoint(av, xv, "scale_add"));
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  const dim3 grid = elementwise_grid(xv.rows, xv.cols);
  float* xp = static_cast<float*>(xv.ptr);
  const int rows = static_cast<int>(xv.rows), cols = static_cast<int>(xv.cols);
  if (a.dtype() == DType::kBF16) {
    scale_add_kernel<true>
        <<<grid, kEltThreads, 0, stream>>>(xp, xv.ld, av.ptr, av.ld, static_cast<const float*>(s), rows, cols);
    VORTEX_CUDA_LAUNCH_CHECK("scale_add_kernel<bf16>");
  } else {
    scale_add_kernel<false>
        <<<grid, kEltThreads, 0, stream>>>(xp, xv.ld, av.ptr, av.ld, static_cast<const float*>(s), rows, cols);
    VORTEX_CUDA_LAUNCH_CHECK("scale_add_kernel<f32>");
  }
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
