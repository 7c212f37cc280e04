// CpuBackend: the `cpu` Backend (src/backend/backend.h), i.e. the reference program. Every op validates its
// tensors and runs the src/ref op of the same stem over a RowThreadPool; bytes never depend on `threads`.
// Attention modes: "sdpa" runs the FP64-exact reference; "sage2" is not implemented on the CPU (kUnsupported).
// Tested in tests/ref/cpu_backend_test.cpp (every method vs the ref ops, thread-count invariance).
#pragma once

#include <atomic>
#include <memory>
#include <string_view>

#include "backend/backend.h"
#include "ref/thread_pool.h"

namespace vortex {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads = 0);
  std::string_view name() const override { return "cpu"; }
  Device device() const override { return Device::kCpu; }
  int threads() const { return pool_.threads(); }

  Result<Tensor> alloc(const Shape& shape, DType dtype) override;
  Result<Tensor> upload(const Tensor& host) override;
  Status download(const Tensor& src, Tensor& host_dst) override;
  Status copy(const Tensor& src, Tensor& dst) override;
  Status synchronize() override { return Status::Ok(); }
  void set_cancel_flag(const std::atomic<bool>* flag) override { cancel_.store(flag); }
  Status fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset) override;

  Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) override;
  Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk, const SegmentTable& seg) override;
  Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                           int scale_chunk, const SegmentTable& seg, Tensor& out) override;
  Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                      const RopeTables* rope, int num_heads, int head_dim) override;
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                   const ExecOptions& opts) override;
  Status rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  Status head_norm_rope(Tensor& x, const Tensor& weight, float eps, const RopeTables* rope, int num_heads,
                        int head_dim) override;
  Status causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                          int head_dim, Tensor& out) override;
  Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg) override;
  Status swiglu(const Tensor& u, Tensor& m) override;
  Status cast(const Tensor& src, Tensor& dst) override;
  Status lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale,
                    LoraMergeProgram program) override;
  Status linear_lora(const Tensor& x, const LinearWeight& w, const Tensor* bias, const LoraBranch& lora,
                     Tensor& out) override;

  Status rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  Status layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) override;
  Status scale_add(Tensor& x, const Tensor& a, const Tensor& scale) override;
  Status add(Tensor& x, const Tensor& y, float scale) override;
  Status conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                Tensor& out) override;
  Status conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding,
                          Tensor& out) override;
  Status conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                     Tensor& out) override;
  Status activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                      const Tensor& down_filter, int ratio, Tensor& out) override;
  Status conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                              const Tensor& residual, Tensor& out) override;
  Status snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta) override;
  Status upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) override;
  Status downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) override;
  // Vision tower and video VAE encoder ops (src/ref/encoder_ops.h).
  Status gelu(Tensor& x, bool tanh_approx) override;
  Status rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim) override;
  Status pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight) override;
  Status vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255, const std::array<float, 3>& std255,
                           int patch, int temporal_patch, int merge, Tensor& out) override;  // src/ref/vision_prep.h
  Status linear_gelu_tanh(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& out) override;
  Status linear_residual(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& x) override;
  bool has_vision_epilogues() const override { return true; }
  Status pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right, Tensor& out) override;
  Status group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps, bool silu,
                           Tensor& out) override;
  Status conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s, bool allow_tf32,
                Tensor& out) override;
  // Audio VAE encoder ops (src/ref/vae_ops.h, one FP64 evaluation per output).
  Status snake(Tensor& x, const Tensor& alpha) override;
  Status conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation,
                        int padding, Tensor& out) override;
  Status layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                             Tensor& out) override;
  Status pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out) override;
  Status gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out) override;
  // video VAE clip stitch (src/ref/video_stitch.h)
  Status video_stitch_clip(const Tensor& y, const VideoStitchClip& geometry, const Tensor& prev, Tensor& out,
                           Tensor& next) override;

 private:
  ref::RowThreadPool pool_;
  std::atomic<const std::atomic<bool>*> cancel_{nullptr};  // set_cancel_flag
  ref::RowRunner run_;
};

// The `cpu` entry of make_backend (src/engine/backend_registry.cpp).
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace vortex
