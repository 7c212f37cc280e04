// add: x = fp32(x + y), then fp32(x * scale) when scale != 1 (the audio VAE's AMP residuals and the mean over
// its parallel resblocks); E0 vs src/ref/add.cpp. Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

__global__ void __launch_bounds__(kEltThreads)
    add_kernel(float* __restrict__ x, int64_t ldx, const float* __restrict__ y, int64_t ldy, float scale, int rows,
               int cols) {
  const bool scaled = scale != 1.0f;
  for (int r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * kEltThreads + threadIdx.x; c < cols; c += gridDim.x * kEltThreads) {
      float& xr = x[static_cast<int64_t>(r) * ldx + c];
      const float s = __fadd_rn(xr, y[static_cast<int64_t>(r) * ldy + c]);
      xr = scaled ? __fmul_rn(s, scale) : s;
    }
}

}  // namespace

Status add(Tensor& x, const Tensor& y, float scale, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "add x", DType::kF32, -1, -1));
  VORTEX_ASSIGN_OR_RETURN(RowView yv, vae_rows(y, "add y", DType::kF32, xv.rows, xv.cols));
  // y == x (same view) is an exact doubling; partial overlaps would race.
  if (!(yv.ptr == xv.ptr && yv.ld == xv.ld)) VORTEX_RETURN_IF_ERROR(expect_disjoint(yv, xv, "add"));
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  add_kernel<<<elementwise_grid(xv.rows, xv.cols), kEltThreads, 0, stream>>>(
      static_cast<float*>(xv.ptr), xv.ld, static_cast<const float*>(yv.ptr), yv.ld, scale, static_cast<int>(xv.rows),
      static_cast<int>(xv.cols));
  VORTEX_CUDA_LAUNCH_CHECK("add_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
