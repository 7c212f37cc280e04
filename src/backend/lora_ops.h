// LoraOps: the LoRA ops of the Backend (src/backend/backend.h): merge one adapter part into a BF16 weight in
// place (two merge programs, docs/lora.md), and linear with an unmerged run-time branch. A backend without them
// returns kUnsupported and src/lora falls back (host merge, merged mode). CPU programs: src/ref/lora.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "backend/identity.h"
#include "backend/linear_weight.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// The LoRA op family (src/lora): merges into weights and the run-time branch; optional.
class LoraOps : public virtual BackendIdentity {
 public:
  // ---- LoRA (src/lora; optional: a backend without them gets kUnsupported and src/lora falls back) ----
  // Merge one LoRA part into a BF16 weight in place, rows [row_offset, row_offset + B.rows):
  //   kSingleRounding: W' = R(W + scale * sum_k B[i,k] A[k,j]), sum and add in FP64 (ascending k), ONE rounding;
  //   kPeft:           W' = R(W + R(fp32(scale) * fma-chain_fp32(B @ A))), PEFT's CPU merge (docs/lora.md).
  // w [N, K] bf16 contiguous; a [r, K] f32, b [rows, r] f32, all on this backend.
  virtual Status lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale,
                            LoraMergeProgram program) {
    (void)w, (void)a, (void)b, (void)row_offset, (void)scale, (void)program;
    return unsupported("lora_merge: not provided by the " + std::string(name()) + " backend");
  }
  // out = linear(x, w, bias) plus the run-time branch (LoraBranch in h3_weights.h): BF16 W and x only.
  virtual Status linear_lora(const Tensor& x, const LinearWeight& w, const Tensor* bias, const LoraBranch& lora,
                             Tensor& out) {
    (void)x, (void)w, (void)bias, (void)lora, (void)out;
    return unsupported("linear_lora (run-time LoRA): not provided by the " + std::string(name()) +
                       " backend; use the merged path (--lora-mode merge, the default)");
  }
};

}  // namespace vortex
