// cast: f32 -> bf16 (cvt.rn.bf16.f32: RNE, NaN -> 0x7FFF), bf16 -> f32 (exact), or a same-dtype copy,
// over 2-D row views (the final layer casts [S, D] rows before the FP32 heads). Kernel -> launcher ->
// validating entry point. Also check_kernel_image(): fails loudly when this binary carries no kernel
// for the running GPU. E0 against the CPU reference in tests/cuda/ops_test.cpp (incl. NaN/inf/ties).
#include "core/arch.h"
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

template <typename Src, typename Dst>
__device__ __forceinline__ Dst convert(Src v);
template <>
__device__ __forceinline__ uint16_t convert<float, uint16_t>(float v) {
  return f32_to_bf16(v);
}
template <>
__device__ __forceinline__ float convert<uint16_t, float>(uint16_t v) {
  return bf16_to_f32(v);
}
template <>
__device__ __forceinline__ float convert<float, float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ uint16_t convert<uint16_t, uint16_t>(uint16_t v) {
  return v;
}

template <typename Src, typename Dst>
__global__ void __launch_bounds__(kRowThreads)
    cast_kernel(const Src* __restrict__ src, int64_t lds, Dst* __restrict__ dst, int64_t ldd, int64_t cols) {
  const int64_t r = blockIdx.x;
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) dst[r * ldd + c] = convert<Src, Dst>(src[r * lds + c]);
}

template <typename Src, typename Dst>
Status launch_cast(const RowView& s, const RowView& d, cudaStream_t stream) {
  cast_kernel<Src, Dst><<<static_cast<unsigned>(s.rows), kRowThreads, 0, stream>>>(
      static_cast<const Src*>(s.ptr), s.ld, static_cast<Dst*>(d.ptr), d.ld, s.cols);
  VORTEX_CUDA_LAUNCH_CHECK("cast_kernel");
  return Status::Ok();
}

}  // namespace

Status cast(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  if (src.defined() && dst.defined() && src.shape() != dst.shape())
    return invalid_argument("cast: shapes differ: " + src.describe() + " -> " + dst.describe());
  VORTEX_ASSIGN_OR_RETURN(RowView sv, row_view(src, "cast src"));
  VORTEX_ASSIGN_OR_RETURN(RowView dv, row_view(dst, "cast dst"));
  if (sv.rows == 0 || sv.cols == 0) return Status::Ok();
  if (sv.rows > kMaxGridX) return invalid_argument("cast: too many rows");
  const DType s = sv.dtype, d = dv.dtype;
  if (s == DType::kF32 && d == DType::kBF16) return launch_cast<float, uint16_t>(sv, dv, stream);
  if (s == DType::kBF16 && d == DType::kF32) return launch_cast<uint16_t, float>(sv, dv, stream);
  if (s == DType::kF32 && d == DType::kF32) return launch_cast<float, float>(sv, dv, stream);
  if (s == DType::kBF16 && d == DType::kBF16) return launch_cast<uint16_t, uint16_t>(sv, dv, stream);
  return unsupported(std::string("cast: ") + dtype_short_name(s) + " -> " + dtype_short_name(d) +
                     " is not supported (f32 <-> bf16 and same-dtype copies are)");
}

Status check_kernel_image() {
  cudaFuncAttributes attr{};
  cudaError_t err = cudaFuncGetAttributes(&attr, cast_kernel<float, uint16_t>);
  if (err == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  return unsupported(std::string("this Vortex binary has no CUDA kernels for the running GPU (") +
                     cudaGetErrorName(err) + ": " + cudaGetErrorString(err) + "); it was built for " +
                     build_cuda_targets() +
                     " — rebuild with -DVORTEX_CUDA_ARCHS matching your GPU or use --backend cpu");
}

}  // namespace vortex::cuda_ops
