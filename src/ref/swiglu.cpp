// Reference SwiGLU (docs/numerics.md): m = R(R(silu(gate)) * value) over u = [gate | value] columns;
// silu(g) = g / (1 + exp(-g)) evaluated in FP64 and rounded once to BF16 (equal to PyTorch's CUDA SiLU on
// all BF16 inputs measured). inf/NaN as that formula in IEEE (as PyTorch): silu(+inf) = +inf,
// silu(-inf) = -inf / inf = NaN, NaN stays NaN.
// Tested in tests/ref/swiglu_test.cpp (all 65,536 BF16 gate inputs vs an independent formula, products).
#include <cmath>
#include <string>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {

uint16_t silu_bf16_bits(uint16_t g_bits) {
  const double g = f32_from_bf16_bits(g_bits);
  return bf16_bits_from_f64(g / (1.0 + std::exp(-g)));
}

Status swiglu(const Tensor& u, Tensor& m, const RowRunner& run) {
  if (!u.defined() || u.ndim() != 2 || u.dim(1) % 2 != 0)
    return invalid_argument("swiglu: u must be 2-D [S, 2F] bf16, got " + u.describe());
  const int64_t s = u.dim(0), f = u.dim(1) / 2;
  VORTEX_RETURN_IF_ERROR(check_rows(u, "swiglu u", DType::kBF16, s, 2 * f));
  VORTEX_RETURN_IF_ERROR(check_rows(m, "swiglu m", DType::kBF16, s, f));
  run(s, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint16_t* gate = row_ptr<const uint16_t>(u, r);
      const uint16_t* value = gate + f;
      uint16_t* mr = row_ptr<uint16_t>(m, r);
      for (int64_t j = 0; j < f; ++j)
        mr[j] = bf16_bits_from_f32(f32_from_bf16_bits(silu_bf16_bits(gate[j])) * f32_from_bf16_bits(value[j]));
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
