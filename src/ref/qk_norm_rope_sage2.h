// CPU reference of the fused qk_norm_rope + Sage2 Q quantization (src/cuda/ops/qk_norm_rope_sage2.cu): the
// composition of the two unfused references, ref::qk_norm_rope then sage2_quantize_q_reference on the normed
// q. Tested in tests/ref/qk_norm_rope_sage2_test.cpp (CPU) and against the GPU in
// tests/attention/qk_norm_rope_sage2_test.cpp.
#pragma once

#include "ref/ref_ops.h"
#include "ref/sage2_attention.h"

namespace vortex::ref {

// In place on host q, k [S, H * 128] bf16 views (qk_norm_rope's program), then out's Q operand (q, q_scale;
// seq, heads, padded) from the normed q. head_dim must be 128 (the Sage2 head dim).
Status qk_norm_rope_sage2(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                          const RopeTables* rope, int num_heads, int head_dim, Sage2Quantized& out,
                          const RowRunner& run = run_serial);

}  // namespace vortex::ref
