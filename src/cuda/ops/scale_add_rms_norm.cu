// scale_add_rms_norm_fp32: the video VAE's LayerScale residual followed by the next RMSNorm in one pass over the
// FP32 stream: x = fp32(x + fp32(a * scale)) (scale_add.cu's program), then out = fp32(fp32(x * r) * w) with r from
// the canonical FP64 sum of squares (rms_norm_fp32.cu's program). One 256-thread block per row keeps the updated row
// in shared memory, so x is read once and written once instead of read twice and written once. E0 vs
// src/ref/scale_add.cpp followed by src/ref/rms_norm_fp32.cpp. Tested in tests/cuda/vae_ops_test.cpp.
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

// Rows up to this width keep their updated values in shared memory (the video decoder's width is 2048).
constexpr int kFusedMaxCols = 8192;

template <bool kBf16A, bool kBf16Out>
__global__ void __launch_bounds__(kRowThreads)
    scale_add_rms_norm_kernel(float* __restrict__ x, int64_t ldx, const void* __restrict__ a, int64_t lda,
                              const float* __restrict__ scale, const float* __restrict__ w, void* __restrict__ out,
                              int64_t ldo, int d, float eps) {
  __shared__ double lanes[kRowThreads];
  extern __shared__ float row[];  // [D] f32: the updated residual row
  const int64_t r = blockIdx.x;
  float* xr = x + r * ldx;  // [D] f32
  for (int j = threadIdx.x; j < d; j += kRowThreads) {
    const int64_t ia = r * lda + j;
    const float av = kBf16A ? bf16_to_f32(static_cast<const uint16_t*>(a)[ia]) : static_cast<const float*>(a)[ia];
    const float v = __fadd_rn(xr[j], __fmul_rn(av, scale[j]));
    xr[j] = v;
    row[j] = v;  // read back below by this same thread (element j belongs to lane j % 256 throughout)
  }
  const double ss = block_canonical_sum_squares(
      d, [&](int j) { return static_cast<double>(row[j]); }, lanes);
  const float rs = inverse_rms(ss, d, eps);
  for (int j = threadIdx.x; j < d; j += kRowThreads) {
    const float y = __fmul_rn(__fmul_rn(row[j], rs), w[j]);
    if constexpr (kBf16Out) static_cast<uint16_t*>(out)[r * ldo + j] = f32_to_bf16(y);
    else static_cast<float*>(out)[r * ldo + j] = y;
  }
}

template <bool kBf16A, bool kBf16Out>
Status launch(const RowView& xv, const RowView& av, const float* s, const float* w, const RowView& ov, float eps,
              cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(xv.cols) * sizeof(float);
  scale_add_rms_norm_kernel<kBf16A, kBf16Out><<<static_cast<unsigned>(xv.rows), kRowThreads, smem, stream>>>(
      static_cast<float*>(xv.ptr), xv.ld, av.ptr, av.ld, s, w, ov.ptr, ov.ld, static_cast<int>(xv.cols), eps);
  VORTEX_CUDA_LAUNCH_CHECK("scale_add_rms_norm_kernel");
  return Status::Ok();
}

}  // namespace

Status scale_add_rms_norm_fp32(Tensor& x, const Tensor& a, const Tensor& scale, const Tensor& weight, float eps,
                               Tensor& out, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "scale_add_rms_norm_fp32 x", DType::kF32, -1, -1));
  if (!a.defined() || (a.dtype() != DType::kF32 && a.dtype() != DType::kBF16))
    return invalid_argument("scale_add_rms_norm_fp32: a must be f32 or bf16 [S, D], got " +
                            (a.defined() ? a.describe() : std::string("undefined")));
  VORTEX_ASSIGN_OR_RETURN(RowView av, vae_rows(a, "scale_add_rms_norm_fp32 a", a.dtype(), xv.rows, xv.cols));
  VORTEX_ASSIGN_OR_RETURN(const void* s, device_vector(scale, xv.cols, DType::kF32, "scale_add_rms_norm_fp32 scale"));
  VORTEX_ASSIGN_OR_RETURN(const void* w, device_vector(weight, xv.cols, DType::kF32, "scale_add_rms_norm_fp32 weight"));
  if (!out.defined() || (out.dtype() != DType::kF32 && out.dtype() != DType::kBF16))
    return invalid_argument("scale_add_rms_norm_fp32: out must be f32 or bf16 [S, D], got " +
                            (out.defined() ? out.describe() : std::string("undefined")));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, vae_rows(out, "scale_add_rms_norm_fp32 out", out.dtype(), xv.rows, xv.cols));
  VORTEX_RETURN_IF_ERROR(expect_disjoint(av, xv, "scale_add_rms_norm_fp32"));
  VORTEX_RETURN_IF_ERROR(expect_disjoint(ov, xv, "scale_add_rms_norm_fp32"));
  VORTEX_RETURN_IF_ERROR(expect_disjoint(ov, av, "scale_add_rms_norm_fp32"));
  if (xv.cols > kFusedMaxCols)
    return unsupported("scale_add_rms_norm_fp32: rows wider than " + std::to_string(kFusedMaxCols) +
                       " values (use scale_add then rms_norm_fp32)");
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  if (xv.rows > kMaxGridX) return invalid_argument("scale_add_rms_norm_fp32: too many rows");
  const float* sp = static_cast<const float*>(s);
  const float* wp = static_cast<const float*>(w);
  const bool a16 = a.dtype() == DType::kBF16, o16 = out.dtype() == DType::kBF16;
  if (a16)
    return o16 ? launch<true, true>(xv, av, sp, wp, ov, eps, stream)
               : launch<true, false>(xv, av, sp, wp, ov, eps, stream);
  return o16 ? launch<false, true>(xv, av, sp, wp, ov, eps, stream)
             : launch<false, false>(xv, av, sp, wp, ov, eps, stream);
}

}  // namespace vortex::cuda_ops
