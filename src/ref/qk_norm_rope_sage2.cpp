// Reference fused qk_norm_rope + Sage2 Q quantization: see qk_norm_rope_sage2.h. Nothing of its own: the
// composition of ref::qk_norm_rope and sage2_quantize_q_reference, so the fused kernel is held to the
// unfused program. Tested in tests/ref/qk_norm_rope_sage2_test.cpp.
#include "ref/qk_norm_rope_sage2.h"

#include <string>

namespace vortex::ref {

Status qk_norm_rope_sage2(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                          const RopeTables* rope, int num_heads, int head_dim, Sage2Quantized& out,
                          const RowRunner& run) {
  if (head_dim != kSage2HeadDim)
    return unsupported("qk_norm_rope_sage2: head_dim " + std::to_string(head_dim) +
                       " (the Sage2 program is written for 128)");
  VORTEX_RETURN_IF_ERROR(qk_norm_rope(q, k, q_weight, k_weight, eps, rope, num_heads, head_dim, run));
  const Sage2HostInput qv{q.data<uint16_t>(), q.stride(0)};
  return sage2_quantize_q_reference(qv, q.dim(0), num_heads, out);
}

}  // namespace vortex::ref
