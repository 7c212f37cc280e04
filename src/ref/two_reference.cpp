// Two-reference rule implementation: read the three tensors as FP64 through ref::cast-compatible views,
// compute max-abs and rel-L2 of kernel and same-program reference against the FP64 reference, and compare.
// Tested in tests/ref/two_reference_test.cpp (pass, fail, NaN, shape mismatch).
#include "ref/two_reference.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "ref/ref_ops.h"

namespace vortex::ref {
namespace {

Result<std::vector<double>> as_f64(const Tensor& t, const char* what) {
  if (!t.defined() || (t.dtype() != DType::kBF16 && t.dtype() != DType::kF32))
    return invalid_argument(std::string("two_reference_rule: ") + what + " must be a bf16 or f32 host tensor");
  Tensor f = Tensor::empty(t.shape(), DType::kF32);
  VORTEX_RETURN_IF_ERROR(cast(t, f).with_context(std::string("two_reference_rule: ") + what));
  return std::vector<double>(f.data<float>(), f.data<float>() + f.numel());
}

}  // namespace

std::string TwoReferenceReport::to_string() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "kernel vs fp64: max-abs %.3e rel-L2 %.3e | same-program vs fp64: max-abs %.3e rel-L2 %.3e | "
                "floor %.1e%s -> %s",
                kernel_max_abs, kernel_rel_l2, program_max_abs, program_rel_l2, floor, kernel_has_nan ? " | NaN" : "",
                pass ? "pass" : "FAIL");
  return buf;
}

Result<TwoReferenceReport> two_reference_rule(const Tensor& kernel, const Tensor& fp64_reference,
                                              const Tensor& same_program_reference, double floor) {
  if (kernel.shape() != fp64_reference.shape() || kernel.shape() != same_program_reference.shape())
    return invalid_argument("two_reference_rule: shapes differ: " + kernel.describe() + ", " +
                            fp64_reference.describe() + ", " + same_program_reference.describe());
  VORTEX_ASSIGN_OR_RETURN(std::vector<double> k, as_f64(kernel, "kernel output"));
  VORTEX_ASSIGN_OR_RETURN(std::vector<double> e, as_f64(fp64_reference, "fp64 reference"));
  VORTEX_ASSIGN_OR_RETURN(std::vector<double> p, as_f64(same_program_reference, "same-program reference"));
  TwoReferenceReport r;
  r.floor = floor;
  double ref_sq = 0, k_sq = 0, p_sq = 0;
  for (size_t i = 0; i < k.size(); ++i) {
    if (std::isnan(k[i])) r.kernel_has_nan = true;
    const double dk = std::fabs(k[i] - e[i]), dp = std::fabs(p[i] - e[i]);
    r.kernel_max_abs = std::max(r.kernel_max_abs, dk);
    r.program_max_abs = std::max(r.program_max_abs, dp);
    k_sq += dk * dk;
    p_sq += dp * dp;
    ref_sq += e[i] * e[i];
  }
  const double norm = ref_sq > 0 ? std::sqrt(ref_sq) : 1.0;
  r.kernel_rel_l2 = std::sqrt(k_sq) / norm;
  r.program_rel_l2 = std::sqrt(p_sq) / norm;
  r.pass = !r.kernel_has_nan && !std::isnan(r.kernel_max_abs) && r.kernel_max_abs <= 2 * r.program_max_abs + floor &&
           r.kernel_rel_l2 <= 2 * r.program_rel_l2 + floor;
  return r;
}

}  // namespace vortex::ref
