// Host entry of the owned BF16 attention (bf16_attention.h): argument checks on every architecture, then the
// sm_90a launcher (bf16_attention_sm90.cu) where the build has it.
#include "cuda/attention/bf16_attention.h"

#include <string>

#include "cuda/check.h"

namespace vortex {

bool bf16_attention_supported(int device) {
#if defined(VORTEX_HAVE_SM90_KERNELS)
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
#else
  (void)device;
  return false;
#endif
}

namespace {

Status check_input(const Tensor& x, const char* name, int64_t seq, int64_t width) {
  if (!x.defined() || x.device() != Device::kCuda || x.dtype() != DType::kBF16 || x.ndim() != 2)
    return invalid_argument(std::string("bf16_attention: ") + name + " must be a 2-D bf16 CUDA tensor");
  if (x.dim(0) != seq || x.dim(1) < width || x.stride(1) != 1 || x.stride(0) % 8 != 0 || x.stride(0) < width ||
      reinterpret_cast<uintptr_t>(x.raw_data()) % 16 != 0)
    return invalid_argument(std::string("bf16_attention: ") + name + " " + x.describe() + " must be [" +
                            std::to_string(seq) + ", >= " + std::to_string(width) +
                            "] with unit column stride, row stride a multiple of 8, 16-byte aligned (TMA)");
  return Status::Ok();
}

}  // namespace

Status bf16_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim, Tensor& out,
                      cudaStream_t stream) {
  return bf16_attention_batched(q, k, v, 1, heads, head_dim, out, stream);
}

Status bf16_attention_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int heads, int head_dim,
                              Tensor& out, cudaStream_t stream, Bf16PvWidth pv) {
  if (head_dim != 128 && head_dim != 72 && head_dim != 64)
    return unsupported("bf16_attention: head_dim must be 128, 72 or 64, got " + std::to_string(head_dim));
  if (heads <= 0 || heads > 65535) return invalid_argument("bf16_attention: heads must be in 1..65535");
  if (!q.defined() || q.ndim() != 2)
    return invalid_argument("bf16_attention: q must be a 2-D tensor [S, heads*head_dim]");
  if (batch < 1 || batch > 65535 || q.dim(0) % batch != 0)
    return invalid_argument("bf16_attention: " + std::to_string(batch) + " sequences do not split q's " +
                            std::to_string(q.dim(0)) + " rows into equal blocks");
  const int64_t seq = q.dim(0), width = static_cast<int64_t>(heads) * head_dim;
  if (seq <= 0 || seq > (int64_t{1} << 31) - 128)
    return invalid_argument("bf16_attention: S must be in 1..2^31-129, got " + std::to_string(seq));
  VORTEX_RETURN_IF_ERROR(check_input(q, "q", seq, width));
  VORTEX_RETURN_IF_ERROR(check_input(k, "k", seq, width));
  VORTEX_RETURN_IF_ERROR(check_input(v, "v", seq, width));
  if (!out.defined() || out.device() != Device::kCuda || out.dtype() != DType::kBF16 || out.ndim() != 2 ||
      out.dim(0) != seq || out.dim(1) < width || out.stride(1) != 1 || out.stride(0) % 2 != 0 ||
      reinterpret_cast<uintptr_t>(out.raw_data()) % 4 != 0)
    return invalid_argument("bf16_attention: out " + out.describe() + " must be a bf16 CUDA tensor [" +
                            std::to_string(seq) + ", >= " + std::to_string(width) +
                            "] with unit column stride, even row stride, 4-byte aligned");
  int device = 0;
  VORTEX_CUDA_CHECK(cudaGetDevice(&device));
  if (!bf16_attention_supported(device))
    return unsupported(
        "bf16_attention: the owned BF16 attention is sm_90a code; this build has no sm_90a kernels "
        "(VORTEX_CUDA_ARCHS) or the device is not sm_90");
#if defined(VORTEX_HAVE_SM90_KERNELS)
  bf16_attention_detail::Bf16AttentionArgs args{q.raw_data(), k.raw_data(),   v.raw_data(),  q.stride(0), k.stride(0),
                                                v.stride(0),  out.raw_data(), out.stride(0), seq / batch, heads};
  args.head_dim = head_dim;
  args.batch = batch;
  args.pv_full_tile = pv == Bf16PvWidth::kFullTile;
  return bf16_attention_detail::launch_bf16_attention_sm90(args, stream);
#else
  (void)stream, (void)pv;
  return unsupported("bf16_attention: no sm_90a kernels in this build");
#endif
}

}  // namespace vortex
