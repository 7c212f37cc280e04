// Reference of the fused RMSNorm + modulation (Component 1): by definition the composition of the two
// unfused references (a fused op's reference is never a copy of the kernel's logic).
// Tested in tests/ref/modulate_test.cpp (RmsNormModulate) (byte-exact against rms_norm then modulate).
#include "ref/ref_ops.h"

namespace vortex::ref {

Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                         int scale_chunk, const SegmentTable& seg, Tensor& out, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(rms_norm(x, weight, eps, out, run).with_context("rms_norm_modulate"));
  return modulate(out, table, shift_chunk, scale_chunk, seg, run).with_context("rms_norm_modulate");
}

}  // namespace vortex::ref
