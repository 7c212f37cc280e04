// TextEncoderOps: the ops the Qwen3-VL decoder (src/text_encoder) adds to the DiT family in the Backend
// (src/backend/backend.h): transformers' two-rounding RMSNorm, per-head norm + RoPE for grouped-query heads, and
// causal attention. "R" = round to BF16 (RNE). CPU programs: src/ref/ref_ops.h.
#pragma once

#include <string>

#include "backend/identity.h"
#include "backend/segments.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// The text-encoder op family (the Qwen3-VL conditioner, src/text_encoder); kUnsupported where not provided.
class TextEncoderOps : public virtual BackendIdentity {
 public:
  // out = R(fp32(R(fp32(x * r)) * w)), r as in rms_norm: transformers' Qwen3 RMSNorm (two roundings).
  virtual Status rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
    (void)x, (void)weight, (void)eps, (void)out;
    return unsupported("rms_norm_two_rounding: not provided by the " + std::string(name()) +
                       " backend (the cpu and cuda backends provide it)");
  }
  // In place on one strided view x [S, num_heads * head_dim]: per head rms_norm_two_rounding over head_dim,
  // then qk_norm_rope's RoPE. One operand per call, so q and k may have different head counts (GQA).
  virtual Status head_norm_rope(Tensor& x, const Tensor& weight, float eps, const RopeTables* rope, int num_heads,
                                int head_dim) {
    (void)x, (void)weight, (void)eps, (void)rope, (void)num_heads, (void)head_dim;
    return unsupported("head_norm_rope: not provided by the " + std::string(name()) +
                       " backend (the cpu and cuda backends provide it)");
  }
  // out[S, H*hd] = R(softmax_causal(q k^T / sqrt(head_dim)) v): query row i sees key rows j <= i, query head h
  // reads kv head h / (num_heads / num_kv_heads). q, out [S, H*hd]; k, v [S, H_kv*hd]; strided views allowed.
  virtual Status causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                                  int head_dim, Tensor& out) {
    (void)q, (void)k, (void)v, (void)num_heads, (void)num_kv_heads, (void)head_dim, (void)out;
    return unsupported("causal_attention: not provided by the " + std::string(name()) +
                       " backend (the cpu and cuda backends provide it)");
  }
};

}  // namespace vortex
