// layer_norm_channels: LayerNorm over the channels of each position of [B, D, L] f32 (the audio VAE encoder's
// pre_block norms on channel-major activations). Program: src/ref/layer_norm_channels.cpp's — FP64 mean and biased
// variance with d ascending, then (x - mean) * (1 / sqrt(var + eps)) * w + b, every FP64 step an explicit
// __d*_rn (IEEE division and square root), rounded once to FP32: E0. Kernel: one thread per (signal, position),
// adjacent threads on adjacent positions (coalesced). In place allowed: a thread reads its column before writing it.
// Tested in tests/cuda/audio_encoder_ops_test.cpp.
#include "cuda/ops/audio_encoder_common.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    layer_norm_channels_kernel(const float* x, const float* __restrict__ w, const float* __restrict__ bias, float* out,
                               int d, int l, double eps) {
  const int t = blockIdx.x * kThreads + threadIdx.x, b = blockIdx.y;
  if (t >= l) return;
  const int64_t base = static_cast<int64_t>(b) * d * l + t;
  double mean = 0.0;
  for (int j = 0; j < d; ++j) mean = __dadd_rn(mean, static_cast<double>(x[base + static_cast<int64_t>(j) * l]));
  mean = __ddiv_rn(mean, static_cast<double>(d));
  double var = 0.0;
  for (int j = 0; j < d; ++j) {
    const double dv = __dsub_rn(static_cast<double>(x[base + static_cast<int64_t>(j) * l]), mean);
    var = __dadd_rn(var, __dmul_rn(dv, dv));
  }
  var = __ddiv_rn(var, static_cast<double>(d));
  const double inv = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, eps)));
  for (int j = 0; j < d; ++j) {
    const int64_t at = base + static_cast<int64_t>(j) * l;
    const double v = __dmul_rn(__dmul_rn(__dsub_rn(static_cast<double>(x[at]), mean), inv), static_cast<double>(w[j]));
    out[at] = __double2float_rn(__dadd_rn(v, static_cast<double>(bias[j])));
  }
}

}  // namespace

Status layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& out,
                           cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(ref::check_f32(x, "layer_norm_channels x", {-1, -1, -1}, Device::kCuda));
  const int64_t b_n = x.dim(0), d = x.dim(1), l = x.dim(2);
  VORTEX_RETURN_IF_ERROR(ref::check_f32(weight, "layer_norm_channels weight", {d}, Device::kCuda));
  VORTEX_RETURN_IF_ERROR(ref::check_f32(bias, "layer_norm_channels bias", {d}, Device::kCuda));
  VORTEX_RETURN_IF_ERROR(ref::check_f32(out, "layer_norm_channels out", {b_n, d, l}, Device::kCuda));
  if (!(eps >= 0.0)) return invalid_argument("layer_norm_channels: eps must be >= 0");
  if (out.raw_data() != x.raw_data()) VORTEX_RETURN_IF_ERROR(expect_apart(x, out, "layer_norm_channels"));
  if (b_n == 0 || d == 0 || l == 0) return Status::Ok();
  if (b_n > 65535) return invalid_argument("layer_norm_channels: more than 65535 signals");
  const dim3 grid(static_cast<unsigned>((l + kThreads - 1) / kThreads), static_cast<unsigned>(b_n));
  layer_norm_channels_kernel<<<grid, kThreads, 0, stream>>>(x.data<float>(), weight.data<float>(), bias.data<float>(),
                                                            out.data<float>(), static_cast<int>(d), static_cast<int>(l),
                                                            eps);
  VORTEX_CUDA_LAUNCH_CHECK("layer_norm_channels_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
