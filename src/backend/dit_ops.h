// DitOps: the op family of the H3 transformer (src/model/h3_model.cpp) in the Backend (src/backend/backend.h):
// linear (plain, FP8, NVFP4), RMSNorm, AdaLN modulation, QK-norm + RoPE, attention, gate/add, SwiGLU, cast, and
// the optional fused forms (gated-residual epilogue, quantized Q, quantized producers) with their probes. "R" =
// round to BF16 (RNE). Shapes use S = rows, D = hidden, I = inner = heads * head_dim, F = ffn. CPU programs:
// src/ref/ref_ops.h; the CPU backend is the oracle.
#pragma once

#include <cstdint>
#include <string>

#include "backend/exec_options.h"
#include "backend/identity.h"
#include "backend/linear_weight.h"
#include "backend/segments.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// A quantized GEMM activation owned by the backend: views into backend scratch, valid until the backend
// reuses that scratch (it keeps the two most recent producer outputs alive; linear() of an NVFP4 weight
// is a producer call too). Stale views are rejected by linear_quantized.
struct QuantizedActivation {
  QuantFormat format = QuantFormat::kNone;  // kNvfp4
  Tensor data;                       // u8 [roundup(S,16), roundup(K,16)/2] e2m1 pairs (even element in the high nibble)
  Tensor scales;                     // f8e4m3 128x4 tiles [roundup(roundup(S,16),128), roundup(roundup(K,16)/16,4)]
  Tensor global_scale;               // f32 [1]: the dynamic g of this call, or a copy of the consumer's input_scale
  bool static_global_scale = false;  // true: g is the consumer's static input_scale
  int64_t rows = 0, cols = 0;        // logical S, K
  uint64_t generation = 0;           // the backend's producer count when written (stale views are rejected)
};

// The Q operand of a quantized attention program, written by Backend::qk_norm_rope_quantize_q into backend
// scratch and consumed by the next attention_quantized_q (a second use, or a use after another producer, is
// rejected by generation).
struct QuantizedQuery {
  int64_t rows = 0;
  int heads = 0, head_dim = 0;
  uint64_t generation = 0;  // the backend's count of qk_norm_rope_quantize_q calls when written
};

// The DiT op family: GEMMs, norms, modulation, RoPE, attention, gating and the casts of the H3 transformer
// (src/model/h3_model.cpp), with its optional fused forms. The decoders reuse linear, attention and cast.
class DitOps : public virtual BackendIdentity {
 public:
  // ---- fused gated residual (ExecOptions::fp8_gate_epilogue) ----
  // x = R(x + (s_a[r] * fp32(s_w * gate[r])) * (q(a) @ q(W)^T)) in one GEMM epilogue per segment, with a
  // quantized per row (s_a[r] = amax(a[r]) / 448) and gate = table[seg.table_row, gate_chunk * D : +D]:
  // the GEMM output and gate * out are never rounded to BF16 (E2 vs linear() + gate_add()).
  virtual bool has_gate_epilogue(const LinearWeight& w) const { return false; }
  virtual Status linear_gate_residual(const Tensor& a, const LinearWeight& w, Tensor& x, const Tensor& table,
                                      int gate_chunk, const SegmentTable& seg) {
    return unsupported(std::string(name()) + " backend has no fused gated-residual GEMM epilogue");
  }

  // ---- ops ----
  // out[M,N] = x[M,K] @ W[N,K]^T (+ bias[N]), accumulated in FP32 or wider, one rounding to out's dtype.
  // bf16 x -> bf16 out (bias added before the rounding); f32 x -> f32 out. Quantized W per w.format.
  virtual Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) = 0;
  // out = R(fp32(fp32(x * r) * w)), r = fp32(1/sqrt(mean(x^2) + eps)), mean accumulated in FP64.
  virtual Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  // x = R(R(x * R(1 + scale)) + shift) in place, scale/shift = table[seg.table_row, chunk*D : +D].
  // table [rows, C*D] bf16 (C = 6 for blocks, 2 for the final layer).
  virtual Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk,
                          const SegmentTable& seg) = 0;
  // Fused rms_norm + modulate; E0 against the two ops.
  virtual Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table,
                                   int shift_chunk, int scale_chunk, const SegmentTable& seg, Tensor& out) = 0;
  // In place on the strided views q, k [S, I] of the QKV output: per head, RMSNorm over head_dim with
  // weight (one rounding), then (if rope != nullptr) rotate-half RoPE on dims < rope->rope_dims:
  // y = R(R(x * cos) + R(rot(x) * sin)), rot = [-x2, x1]. Dims >= rope_dims pass unchanged.
  virtual Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                              const RopeTables* rope, int num_heads, int head_dim) = 0;
  // out[S, I] = R(softmax(q k^T / sqrt(head_dim)) v) per head; q, k, v may be strided views.
  virtual Status attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                           const ExecOptions& opts) = 0;
  // `batch` independent sequences of equal length packed along the rows: q, k, v, out [batch * L, I], sequence b
  // in rows [b * L, (b + 1) * L); each is attention() of its own rows (same bytes as that call, E1 between
  // backends). The default runs attention() once per sequence on row views; the CUDA backend runs one batched
  // cuDNN call (the video VAE's tiles).
  virtual Status attention_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int num_heads,
                                   int head_dim, Tensor& out, const ExecOptions& opts) {
    return attention_per_sequence(q, k, v, batch, num_heads, head_dim, out, opts);
  }
  // attention_batched realized as one attention() per sequence (the default; also a measured CUDA alternative).
  Status attention_per_sequence(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, int num_heads,
                                int head_dim, Tensor& out, const ExecOptions& opts) {
    if (batch < 1 || !q.defined() || q.ndim() != 2 || q.dim(0) % batch != 0)
      return invalid_argument("attention_batched: " + std::to_string(batch) + " sequences do not split q " +
                              (q.defined() ? q.describe() : std::string("undefined")) + " into equal row blocks");
    for (const Tensor* t : {&k, &v, static_cast<const Tensor*>(&out)})
      if (!t->defined() || t->ndim() != 2 || t->dim(0) != q.dim(0))
        return invalid_argument("attention_batched: k, v and out need q's " + std::to_string(q.dim(0)) + " rows");
    const int64_t len = q.dim(0) / batch;
    for (int64_t b = 0; b < batch; ++b) {
      VORTEX_ASSIGN_OR_RETURN(Tensor qb, q.narrow(0, b * len, len));  // [L, I] views
      VORTEX_ASSIGN_OR_RETURN(Tensor kb, k.narrow(0, b * len, len));
      VORTEX_ASSIGN_OR_RETURN(Tensor vb, v.narrow(0, b * len, len));
      VORTEX_ASSIGN_OR_RETURN(Tensor ob, out.narrow(0, b * len, len));
      VORTEX_RETURN_IF_ERROR(attention(qb, kb, vb, num_heads, head_dim, ob, opts));
    }
    return Status::Ok();
  }
  // ---- attention's Q quantization fused into qk_norm_rope (ExecOptions::fused_q_quantize) ----
  // True when the attention kernel that `opts` selects for [rows, num_heads, head_dim] reads a quantized Q that
  // qk_norm_rope_quantize_q writes in the norm pass (the Sage2 program's INT8 Q and scales).
  virtual bool has_fused_q_quantize(int64_t rows, int num_heads, int head_dim, const ExecOptions& opts) const {
    (void)rows, (void)num_heads, (void)head_dim, (void)opts;
    return false;
  }
  // qk_norm_rope (q and k get the same bytes), and Q quantized as that attention kernel quantizes the normed q
  // (same bytes and scales) into backend scratch, described by `out`.
  virtual Status qk_norm_rope_quantize_q(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight,
                                         float eps, const RopeTables* rope, int num_heads, int head_dim,
                                         const ExecOptions& opts, QuantizedQuery& out) {
    (void)q, (void)k, (void)q_weight, (void)k_weight, (void)eps, (void)rope, (void)num_heads, (void)head_dim,
        (void)opts, (void)out;
    return unsupported("qk_norm_rope_quantize_q: not provided by the " + std::string(name()) +
                       " backend (leave fused_q_quantize=0)");
  }
  // attention() with the Q operand of `q` (its BF16 source is not read again): out gets the same bytes as
  // attention() on the normed q. k, v [S, I] views as in attention().
  virtual Status attention_quantized_q(const QuantizedQuery& q, const Tensor& k, const Tensor& v, int num_heads,
                                       int head_dim, Tensor& out, const ExecOptions& opts) {
    (void)q, (void)k, (void)v, (void)num_heads, (void)head_dim, (void)out, (void)opts;
    return unsupported("attention_quantized_q: not provided by the " + std::string(name()) +
                       " backend (leave fused_q_quantize=0)");
  }
  // x = R(x + R(gate * a)), gate = table[seg.table_row, gate_chunk*D : +D]; table == nullptr: x = R(x + a).
  virtual Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg) = 0;
  // m[S, F] = R(R(silu(u[:, :F])) * u[:, F:]), silu evaluated in FP64 and rounded once.
  virtual Status swiglu(const Tensor& u, Tensor& m) = 0;

  // ---- fused quantized producers (precision nvfp4; optional, E0 vs the eager producers) ----
  // True when modulate_quantize / swiglu_quantize / linear_quantized are provided for `format`.
  virtual bool has_quantized_producers(QuantFormat format) const {
    (void)format;
    return false;
  }
  // x = R(R(n * R(1 + scale)) + shift) quantized to consumer.format without writing x: the bytes and g
  // that linear(x, consumer) quantizes (dynamic g, or the consumer's static input_scale). n [S, D] bf16.
  virtual Status modulate_quantize(const Tensor& n, const Tensor& table, int shift_chunk, int scale_chunk,
                                   const SegmentTable& seg, const LinearWeight& consumer, QuantizedActivation& out) {
    (void)n, (void)table, (void)shift_chunk, (void)scale_chunk, (void)seg, (void)consumer, (void)out;
    return unsupported("modulate_quantize: not provided by the " + std::string(name()) +
                       " backend (fused NVFP4 producers need --backend cuda; leave fused_nvfp4_producers=0)");
  }
  // m = R(R(silu(u[:, :F])) * u[:, F:]) quantized to consumer.format without writing m. u [S, 2F] bf16.
  virtual Status swiglu_quantize(const Tensor& u, const LinearWeight& consumer, QuantizedActivation& out) {
    (void)u, (void)consumer, (void)out;
    return unsupported("swiglu_quantize: not provided by the " + std::string(name()) +
                       " backend (fused NVFP4 producers need --backend cuda; leave fused_nvfp4_producers=0)");
  }
  // out[S, N] = R(g_x * g_w * x' @ w'^T + bias) for an activation from the producers above: the same GEMM
  // that linear() runs after quantizing its input.
  virtual Status linear_quantized(const QuantizedActivation& x, const LinearWeight& w, const Tensor* bias,
                                  Tensor& out) {
    (void)x, (void)w, (void)bias, (void)out;
    return unsupported("linear_quantized: not provided by the " + std::string(name()) +
                       " backend (fused NVFP4 producers need --backend cuda; leave fused_nvfp4_producers=0)");
  }
  // dst = convert(src): f32 -> bf16 (RNE), bf16 -> f32 (exact), same shape; either may be strided.
  virtual Status cast(const Tensor& src, Tensor& dst) = 0;

  // GEMM weight quantization at load, on this backend's device: `w` a BF16 [N, K] weight (format kNone) held by this
  // backend -> `format`: kFp8Scaled (per tensor: scale = amax/448, E4M3 RNE satfinite) or kNvfp4 (E2M1 with tiled
  // E4M3 block scales, global scale from amax/2688, comfy-kitchen's CUDA encode), the bytes of the host quantizers
  // (gemm/gemm.h quantize_weight_fp8, engine/precision.h quantize_weight_nvfp4). Ordered like the backend's ops.
  // kUnsupported where the backend has no device quantizer (the caller quantizes on the host).
  virtual Result<LinearWeight> quantize_weight(const LinearWeight& w, QuantFormat format) {
    (void)w, (void)format;
    return unsupported("quantize_weight: the " + std::string(name()) + " backend has no device weight quantizer");
  }
};

}  // namespace vortex
