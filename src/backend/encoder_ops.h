// EncoderOps: the ops of the Qwen3-VL vision tower (src/vision/vision_tower.h) and the video VAE encoder
// (src/vae/video_vae_encoder.h) in the Backend (src/backend/backend.h): GELU, FP32 rotary, the resampled
// position grid, causal reflect padding, per-frame GroupNorm and conv3d. CPU programs in src/ref/encoder_ops.cpp,
// CUDA in src/cuda/ops/encoder_ops.cu and src/cuda/ops/conv3d_cudnn.cpp.
#pragma once

#include <array>
#include <string>

#include "backend/identity.h"
#include "backend/linear_weight.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// The encoder op family; backends without a kernel report kUnsupported naming the op.
class EncoderOps : public virtual BackendIdentity {
 public:
  // Backends without them report kUnsupported naming the op; the cpu and cuda backends provide all of them.
  // x[S, F] bf16 in place = R(gelu(fp32(x))) in FP32: tanh_approx: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
  // else 0.5 x (1 + erf(x / sqrt(2))) (torch's GELU on BF16 tensors).
  virtual Status gelu(Tensor& x, bool tanh_approx) {
    (void)x, (void)tanh_approx;
    return encoder_op_unsupported("gelu");
  }
  // In place on a bf16 view x [S, num_heads * head_dim] (rows may be strided): per head
  // x = R(fp32(x * cos) + fp32(rot(x) * sin)), rot = [-x2, x1]; cos, sin [S, head_dim] f32 contiguous.
  virtual Status rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim) {
    (void)x, (void)cos, (void)sin, (void)num_heads, (void)head_dim;
    return encoder_op_unsupported("rope_fp32");
  }
  // x[S, D] bf16 = R(x + R(p)), p = sum over t = 0..3 in order of fp32(table[index[s, t]]) * weight[s, t] (FP32);
  // table [P, D] bf16, index [S, 4] i32, weight [S, 4] f32 (the learned position grid resampled bilinearly).
  virtual Status pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight) {
    (void)x, (void)table, (void)index, (void)weight;
    return encoder_op_unsupported("pos_embed_add");
  }
  // Video VAE encoder activations are contiguous [B, T, H, W, C] f32 (channels last).
  // out [B, front + T, top + H + bottom, left + W + right, C]: `front` zero frames, then x reflect-padded in space.
  virtual Status pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right, Tensor& out) {
    (void)x, (void)front, (void)top, (void)bottom, (void)left, (void)right, (void)out;
    return encoder_op_unsupported("pad_causal_reflect");
  }
  // GroupNorm over each frame: per (b, t, group) FP64 mean, then FP64 sum of squared deviations; then
  // v = fp32(fp32(fp32(x - m) * rstd) * w[c]) + b[c] and, with silu, v / (1 + exp(-v)). x, out [B, T, H, W, C] f32
  // (out may be x); weight, bias [C] f32.
  virtual Status group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps,
                                   bool silu, Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)groups, (void)eps, (void)silu, (void)out;
    return encoder_op_unsupported("group_norm_frames");
  }
  // out [B, To, Ho, Wo, Co] = conv3d(x [B, T, H, W, Ci], weight [Co, kt, kh, kw, Ci]) + bias [Co], no padding,
  // stride (stride_t, stride_s, stride_s), f32 in and out with FP32 accumulation. allow_tf32: the device may round
  // the operands to TF32 (torch's default for cuDNN convolutions, torch.backends.cudnn.allow_tf32); the CPU ignores it.
  virtual Status conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s,
                        bool allow_tf32, Tensor& out) {
    (void)x, (void)weight, (void)bias, (void)stride_t, (void)stride_s, (void)allow_tf32, (void)out;
    return encoder_op_unsupported("conv3d");
  }
  // The image processor's pixel rows built on the device from a u8 image (src/vision/vision_tower.h,
  // preprocess_image): rgb [H, W, 3] u8 contiguous, H and W multiples of patch * merge; out [(H / patch) *
  // (W / patch), 3 * temporal_patch * patch * patch] bf16 contiguous, rows in merge-block order (block row, block
  // column, row in block, column in block), columns (channel, t, py, px) with the frame repeated over t:
  // out = R_bf16((fp32(x) - mean255[c]) / std255[c]), one FP32 subtraction and one FP32 division.
  virtual Status vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255,
                                   const std::array<float, 3>& std255, int patch, int temporal_patch, int merge,
                                   Tensor& out) {
    (void)rgb, (void)mean255, (void)std255, (void)patch, (void)temporal_patch, (void)merge, (void)out;
    return encoder_op_unsupported("vision_pixel_rows");
  }
  // The vision tower's GEMMs with their pointwise tail in the GEMM epilogue (FP32, one rounding to BF16); a, x, out
  // 2-D bf16 with unit column stride, w a bf16 [N, K] weight, bias [N] bf16 or null. CPU programs in
  // src/ref/encoder_ops.h: the FP64 dot product of linear(), + bias, rounded to FP32, then the tail in FP32.
  // out[S, N] = R(gelu_tanh(a[S, K] W^T + b)) (the MLP's fc1 and its GELU).
  virtual Status linear_gelu_tanh(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& out) {
    (void)a, (void)w, (void)bias, (void)out;
    return encoder_op_unsupported("linear_gelu_tanh");
  }
  // x[S, N] in place = R(fp32(x) + (a[S, K] W^T + b)) (a block's projection and its residual add).
  virtual Status linear_residual(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& x) {
    (void)a, (void)w, (void)bias, (void)x;
    return encoder_op_unsupported("linear_residual");
  }
  // Whether linear_gelu_tanh and linear_residual run here (the tower falls back to linear + gelu / gate_add).
  virtual bool has_vision_epilogues() const { return false; }

 protected:
  Status encoder_op_unsupported(const char* op) const {
    return unsupported(std::string(op) + " is not implemented on the " + std::string(name()) +
                       " backend (a vision tower / video VAE encoder op); use the cpu or cuda backend");
  }
};

}  // namespace vortex
