// activation1d: BigVGAN's anti-aliased SnakeBeta (upsample1d x ratio, snake_beta, downsample1d / ratio) in one pass.
// A block takes kSeg outputs of one row: it computes the upsampled, activated samples that those outputs read (its
// segment plus the low-pass filter's halo, clamped as the replicate padding clamps) into shared memory, then the
// downsampled outputs. Every element runs the single-op kernels' device programs (activation1d.cuh), so the bytes
// equal upsample1d -> snake_beta -> downsample1d on this GPU; against the CPU reference, snake_beta's FP64 sin / exp
// tolerance applies (docs/numerics.md). Tested in tests/cuda/audio_decoder_ops_test.cpp.
#include "cuda/ops/activation1d.cuh"
#include "cuda/ops/audio_decoder_ops.h"
#include "cuda/ops/vae_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kActThreads = 256;
constexpr int kSeg = 512;  // outputs per block

__global__ void __launch_bounds__(kActThreads)
    activation1d_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ alpha,
                        const float* __restrict__ beta, const float* __restrict__ fu, int ku,
                        const float* __restrict__ fd, int kd, int ratio, float* __restrict__ out, int64_t ldo, int rows,
                        int channels, int l) {
  extern __shared__ float up_s[];  // [kSeg * ratio + kd]: the activated upsampled samples of this segment
  const int lu = l * ratio;
  const int pad_left = kd / 2 - (kd % 2 == 0 ? 1 : 0);
  const int t0 = blockIdx.x * kSeg;
  const int n = min(kSeg, l - t0);
  const int u0 = max(0, t0 * ratio - pad_left);
  const int u1 = min(lu - 1, (t0 + n - 1) * ratio - pad_left + kd - 1);
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* xr = x + static_cast<int64_t>(r) * ldx;
    const SnakeBetaCoeffs co = snake_beta_coeffs(alpha[r % channels], beta[r % channels]);
    __syncthreads();  // the previous row's reads of up_s are done
    for (int u = u0 + static_cast<int>(threadIdx.x); u <= u1; u += kActThreads)
      up_s[u - u0] = snake_beta_at(upsample1d_at(xr, l, fu, ku, ratio, u), co);
    __syncthreads();
    auto up_at = [u0](int64_t i) { return up_s[i - u0]; };
    for (int t = t0 + static_cast<int>(threadIdx.x); t < t0 + n; t += kActThreads)
      out[static_cast<int64_t>(r) * ldo + t] = downsample1d_at(up_at, lu, fd, kd, ratio, t);
  }
}

Result<const float*> filter_ptr(const Tensor& f, int64_t min_taps, const char* what) {
  if (!f.defined() || f.device() != Device::kCuda || f.dtype() != DType::kF32 || !f.is_contiguous() ||
      f.numel() < min_taps || f.numel() > 1024)
    return invalid_argument(std::string("activation1d: ") + what + " must be a contiguous device f32 tensor of " +
                            std::to_string(min_taps) + " to 1024 taps, got " +
                            (f.defined() ? f.describe() : std::string("undefined")));
  return static_cast<const float*>(f.raw_data());
}

}  // namespace

Status activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                    const Tensor& down_filter, int ratio, Tensor& out, cudaStream_t stream) {
  if (ratio < 1 || ratio > 64) return invalid_argument("activation1d: ratio must be in [1, 64]");
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "activation1d x", DType::kF32, -1, -1));
  if (xv.cols <= 0) return invalid_argument("activation1d: empty signal");
  if (xv.cols * ratio > INT32_MAX / 2) return invalid_argument("activation1d: signal longer than 2^30 / ratio samples");
  const int64_t ch = alpha.defined() ? alpha.numel() : 0;
  if (ch < 1 || xv.rows % ch != 0)
    return invalid_argument("activation1d: x " + x.describe() + " does not hold whole signals of " +
                            std::to_string(ch) + " channels (alpha " +
                            (alpha.defined() ? alpha.describe() : std::string("undefined")) + ")");
  VORTEX_ASSIGN_OR_RETURN(const void* a, device_vector(alpha, ch, DType::kF32, "activation1d alpha"));
  VORTEX_ASSIGN_OR_RETURN(const void* b, device_vector(beta, ch, DType::kF32, "activation1d beta"));
  VORTEX_ASSIGN_OR_RETURN(const float* fu, filter_ptr(up_filter, ratio, "up_filter"));
  VORTEX_ASSIGN_OR_RETURN(const float* fd, filter_ptr(down_filter, 1, "down_filter"));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, vae_rows(out, "activation1d out", DType::kF32, xv.rows, xv.cols));
  VORTEX_RETURN_IF_ERROR(expect_disjoint(xv, ov, "activation1d"));
  if (xv.rows == 0) return Status::Ok();
  const int kd = static_cast<int>(down_filter.numel());
  const size_t smem = static_cast<size_t>(kSeg * ratio + kd) * sizeof(float);
  if (smem > 48 * 1024) return invalid_argument("activation1d: ratio and filter too large for one block");
  const dim3 grid(static_cast<unsigned>((xv.cols + kSeg - 1) / kSeg),
                  static_cast<unsigned>(std::min<int64_t>(xv.rows, 65535)));
  activation1d_kernel<<<grid, kActThreads, smem, stream>>>(
      static_cast<const float*>(xv.ptr), xv.ld, static_cast<const float*>(a), static_cast<const float*>(b), fu,
      static_cast<int>(up_filter.numel()), fd, kd, ratio, static_cast<float*>(ov.ptr), ov.ld, static_cast<int>(xv.rows),
      static_cast<int>(ch), static_cast<int>(xv.cols));
  VORTEX_CUDA_LAUNCH_CHECK("activation1d_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
