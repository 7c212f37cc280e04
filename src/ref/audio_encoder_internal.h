// Argument checks shared by the audio VAE encoder's ops, the CPU programs (src/ref/vae_ops.h: snake,
// conv1d_strided, layer_norm_channels, pooled_causal_attention, gelu_tanh_mul) and their CUDA kernels
// (src/cuda/ops/audio_encoder_ops.h): contiguous f32 tensors of an expected shape on an expected device, and the
// pre_block attention's operands. Header-only; covered by tests/ref/audio_encoder_ops_test.cpp and
// tests/cuda/audio_encoder_ops_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::ref {

// A contiguous f32 tensor on `device` of dims.size() dimensions, each equal to dims[i] (dims[i] < 0: any) and below
// 2^31; its description in the message otherwise.
inline Status check_f32(const Tensor& t, const std::string& what, const Shape& dims, Device device = Device::kCpu) {
  bool ok = t.defined() && t.device() == device && t.dtype() == DType::kF32 && t.is_contiguous() &&
            t.ndim() == static_cast<int64_t>(dims.size());
  for (size_t i = 0; ok && i < dims.size(); ++i) {
    const int64_t d = t.dim(static_cast<int>(i));
    ok = (dims[i] < 0 || d == dims[i]) && d <= INT32_MAX;
  }
  if (ok) return Status::Ok();
  std::string want;
  for (int64_t d : dims) want += (want.empty() ? "" : ", ") + (d >= 0 ? std::to_string(d) : std::string("*"));
  return invalid_argument(what + " must be a contiguous " + device_name(device) + " [" + want +
                          "] f32 tensor (dimensions below 2^31), got " +
                          (t.defined() ? t.describe() : std::string("undefined")));
}

// pooled_causal_attention's operands: qkv [B, 3 * heads * hd, T] and out [B, C >= 1, T] on `device`. Returns hd.
inline Result<int64_t> check_pooled_attention(const Tensor& qkv, int heads, const Tensor& out, Device device) {
  VORTEX_RETURN_IF_ERROR(check_f32(qkv, "pooled_causal_attention qkv", {-1, -1, -1}, device));
  if (heads < 1 || qkv.dim(1) % (3LL * heads) != 0 || qkv.dim(1) == 0)
    return invalid_argument("pooled_causal_attention: qkv " + qkv.describe() + " does not hold q, k and v of " +
                            std::to_string(heads) + " heads");
  VORTEX_RETURN_IF_ERROR(check_f32(out, "pooled_causal_attention out", {qkv.dim(0), -1, qkv.dim(2)}, device));
  if (out.dim(1) < 1) return invalid_argument("pooled_causal_attention: out has no channels");
  return qkv.dim(1) / (3LL * heads);
}

}  // namespace vortex::ref
