// CpuBackend: thin validation + dispatch from the Backend interface to the src/ref ops over a row pool.
// Memory ops are host copies (upload always copies, so a device tensor never aliases caller memory);
// fill_synthetic is fill_synthetic_host (src/core/synthetic.h), identical bytes to the GPU fill.
// Tested in tests/ref/cpu_backend_test.cpp.
#include "ref/cpu_backend.h"

#include <algorithm>
#include <string>

#include "core/synthetic.h"
#include "ref/encoder_ops.h"
#include "ref/ref_ops.h"
#include "ref/vae_ops.h"
#include "ref/video_stitch.h"
#include "ref/vision_prep.h"

namespace vortex {

// Rows per cancel check: each thread's range runs in pieces of this many rows (a multiple of every op's
// row blocking), so a cancel stops an op within one piece. Rows are independent in every op (results are
// identical for any split, tests/ref/cpu_backend_test.cpp), so the pieces change no byte.
constexpr int64_t kCancelRows = 64;

CpuBackend::CpuBackend(int threads)
    : pool_(threads), run_([this](int64_t rows, const ref::RowBody& body) {
        const std::atomic<bool>* stop = cancel_.load();
        if (stop == nullptr) return pool_.parallel_for(rows, body);
        pool_.parallel_for(rows, [&](int64_t begin, int64_t end) {
          for (int64_t b = begin; b < end; b += kCancelRows) {
            if (stop->load(std::memory_order_relaxed)) return;
            body(b, std::min(end, b + kCancelRows));
          }
        });
      }) {}

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

Result<Tensor> CpuBackend::alloc(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) return invalid_argument("alloc: negative dimension in " + shape_to_string(shape));
  VORTEX_RETURN_IF_ERROR(take_injected_alloc_failure(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype)));
  return Tensor::empty(shape, dtype);
}

Result<Tensor> CpuBackend::upload(const Tensor& host) {
  if (!host.defined()) return invalid_argument("upload: tensor is not defined");
  if (host.device() != Device::kCpu) return invalid_argument("upload: expected a host tensor, got " + host.describe());
  VORTEX_ASSIGN_OR_RETURN(Tensor out, alloc(host.shape(), host.dtype()));
  VORTEX_RETURN_IF_ERROR(ref::cast(host, out, run_).with_context("upload"));
  return out;
}

Status CpuBackend::download(const Tensor& src, Tensor& host_dst) {
  if (!host_dst.defined())
    return invalid_argument("download: destination is not defined (allocate it with the source shape)");
  if (src.dtype() != host_dst.dtype())
    return invalid_argument("download: dtype differs: " + src.describe() + " -> " + host_dst.describe());
  return ref::cast(src, host_dst, run_).with_context("download");
}

Status CpuBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.defined() && dst.defined() && src.dtype() != dst.dtype())
    return invalid_argument("copy: dtype differs: " + src.describe() + " -> " + dst.describe() + " (use cast)");
  return ref::cast(src, dst, run_).with_context("copy");
}

Status CpuBackend::fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset) {
  return fill_synthetic_host(dst, seed, scale, offset, pool_.threads());
}

Status CpuBackend::linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  return ref::linear(x, w, bias, out, run_);
}

Status CpuBackend::lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale,
                              LoraMergeProgram program) {
  return ref::lora_merge(w, a, b, row_offset, scale, program, run_);
}

Status CpuBackend::linear_lora(const Tensor& x, const LinearWeight& w, const Tensor* bias, const LoraBranch& lora,
                               Tensor& out) {
  return ref::linear_lora(x, w, bias, lora, out, run_);
}

Status CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  return ref::rms_norm(x, weight, eps, out, run_);
}

Status CpuBackend::modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk, const SegmentTable& seg) {
  return ref::modulate(x, table, shift_chunk, scale_chunk, seg, run_);
}

Status CpuBackend::rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table,
                                     int shift_chunk, int scale_chunk, const SegmentTable& seg, Tensor& out) {
  return ref::rms_norm_modulate(x, weight, eps, table, shift_chunk, scale_chunk, seg, out, run_);
}

Status CpuBackend::qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                                const RopeTables* rope, int num_heads, int head_dim) {
  return ref::qk_norm_rope(q, k, q_weight, k_weight, eps, rope, num_heads, head_dim, run_);
}

Status CpuBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim,
                             Tensor& out, const ExecOptions& opts) {
  if (opts.attention != AttentionKind::kSdpa)
    return unsupported(std::string("attention mode '") + attention_name(opts.attention) +
                       "' is not implemented on the cpu backend; use --attention sdpa (the BF16 reference program)");
  return ref::attention(q, k, v, num_heads, head_dim, out, run_);
}

Status CpuBackend::rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  return ref::rms_norm_two_rounding(x, weight, eps, out, run_);
}

Status CpuBackend::head_norm_rope(Tensor& x, const Tensor& weight, float eps, const RopeTables* rope, int num_heads,
                                  int head_dim) {
  return ref::head_norm_rope(x, weight, eps, rope, num_heads, head_dim, run_);
}

Status CpuBackend::causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                                    int head_dim, Tensor& out) {
  return ref::causal_attention(q, k, v, num_heads, num_kv_heads, head_dim, out, run_);
}

Status CpuBackend::gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg) {
  return ref::gate_add(x, a, table, gate_chunk, seg, run_);
}

Status CpuBackend::swiglu(const Tensor& u, Tensor& m) { return ref::swiglu(u, m, run_); }

Status CpuBackend::cast(const Tensor& src, Tensor& dst) { return ref::cast(src, dst, run_); }

Status CpuBackend::rms_norm_fp32(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  return ref::rms_norm_fp32(x, weight, eps, out, run_);
}

Status CpuBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  return ref::layer_norm(x, weight, bias, eps, out, run_);
}

Status CpuBackend::scale_add(Tensor& x, const Tensor& a, const Tensor& scale) {
  return ref::scale_add(x, a, scale, run_);
}

Status CpuBackend::add(Tensor& x, const Tensor& y, float scale) { return ref::add(x, y, scale, run_); }

Status CpuBackend::gelu(Tensor& x, bool tanh_approx) { return ref::gelu(x, tanh_approx, run_); }
Status CpuBackend::linear_gelu_tanh(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  return ref::linear_gelu_tanh(a, w, bias, out, run_);
}
Status CpuBackend::linear_residual(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& x) {
  return ref::linear_residual(a, w, bias, x, run_);
}
Status CpuBackend::rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim) {
  return ref::rope_fp32(x, cos, sin, num_heads, head_dim, run_);
}
Status CpuBackend::pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight) {
  return ref::pos_embed_add(x, table, index, weight, run_);
}

Status CpuBackend::vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255,
                                     const std::array<float, 3>& std255, int patch, int temporal_patch, int merge,
                                     Tensor& out) {
  return ref::vision_pixel_rows(rgb, mean255, std255, patch, temporal_patch, merge, out, run_);
}
Status CpuBackend::pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right,
                                      Tensor& out) {
  return ref::pad_causal_reflect(x, front, top, bottom, left, right, out, run_);
}
Status CpuBackend::group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps,
                                     bool silu, Tensor& out) {
  return ref::group_norm_frames(x, weight, bias, groups, eps, silu, out, run_);
}
Status CpuBackend::conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s,
                          bool allow_tf32, Tensor& out) {
  (void)allow_tf32;  // the CPU program is plain FP32
  return ref::conv3d(x, weight, bias, stride_t, stride_s, out, run_);
}

Status CpuBackend::conv1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                          Tensor& out) {
  return ref::conv1d(x, weight, bias, dilation, padding, out, run_);
}

Status CpuBackend::conv1d_fp32(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation, int padding,
                               Tensor& out) {
  return ref::conv1d_fp32(x, weight, bias, dilation, padding, out, run_);
}

Status CpuBackend::conv1d_fp32_residual(const Tensor& x, const Tensor& weight, const Tensor* bias, int dilation,
                                        int padding, const Tensor& residual, Tensor& out) {
  return ref::conv1d_fp32_residual(x, weight, bias, dilation, padding, residual, out, run_);
}

Status CpuBackend::activation1d(const Tensor& x, const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                                const Tensor& down_filter, int ratio, Tensor& out) {
  return ref::activation1d(x, alpha, beta, up_filter, down_filter, ratio, out, run_);
}

Status CpuBackend::conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor* bias, int stride, int padding,
                                    Tensor& out) {
  return ref::conv_transpose1d(x, weight, bias, stride, padding, out, run_);
}

Status CpuBackend::snake_beta(Tensor& x, const Tensor& alpha, const Tensor& beta) {
  return ref::snake_beta(x, alpha, beta, run_);
}

Status CpuBackend::upsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) {
  return ref::upsample1d(x, filter, ratio, out, run_);
}

Status CpuBackend::downsample1d(const Tensor& x, const Tensor& filter, int ratio, Tensor& out) {
  return ref::downsample1d(x, filter, ratio, out, run_);
}

Status CpuBackend::snake(Tensor& x, const Tensor& alpha) { return ref::snake(x, alpha, run_); }

Status CpuBackend::conv1d_strided(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int dilation,
                                  int padding, Tensor& out) {
  return ref::conv1d_strided(x, weight, bias, stride, dilation, padding, out, run_);
}

Status CpuBackend::layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                       Tensor& out) {
  return ref::layer_norm_channels(x, weight, bias, eps, out, run_);
}

Status CpuBackend::pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out) {
  return ref::pooled_causal_attention(qkv, heads, out, run_);
}

Status CpuBackend::gelu_tanh_mul(const Tensor& a, const Tensor& g, Tensor& out) {
  return ref::gelu_tanh_mul(a, g, out, run_);
}

Status CpuBackend::video_stitch_clip(const Tensor& y, const VideoStitchClip& geometry, const Tensor& prev, Tensor& out,
                                     Tensor& next) {
  return ref::video_stitch_clip(y, geometry, prev, out, next, run_);
}

}  // namespace vortex
