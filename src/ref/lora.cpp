// Reference LoRA ops: the merge of one low-rank part into a BF16 weight (two named programs) and the
// run-time branch linear. Both are plain loops in a fixed order so every backend and thread count gives the
// same bytes. docs/lora.md states the programs and how they compare with diffusers/PEFT and ComfyUI.
// Tested in tests/lora/lora_test.cpp (FP64 re-derivations, PEFT fixtures).
#include <cmath>
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {
namespace {

Status check_factor(const Tensor& t, const char* what, int64_t rows, int64_t cols, DType dtype) {
  if (!t.defined() || t.ndim() != 2 || t.dtype() != dtype || !t.is_contiguous() || (rows >= 0 && t.dim(0) != rows) ||
      (cols >= 0 && t.dim(1) != cols))
    return invalid_argument(std::string("lora: ") + what + " must be a contiguous [" +
                            (rows >= 0 ? std::to_string(rows) : std::string("rows")) + ", " +
                            (cols >= 0 ? std::to_string(cols) : std::string("r")) + "] " + dtype_short_name(dtype) +
                            " tensor, got " + (t.defined() ? t.describe() : std::string("undefined")));
  return Status::Ok();
}

}  // namespace

Status lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale,
                  LoraMergeProgram program, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_factor(w, "merged weight", -1, -1, DType::kBF16));
  const int64_t n = w.dim(0), k = w.dim(1);
  VORTEX_RETURN_IF_ERROR(check_factor(a, "A", -1, k, DType::kF32));
  const int64_t r = a.dim(0);
  VORTEX_RETURN_IF_ERROR(check_factor(b, "B", -1, r, DType::kF32));
  const int64_t rows = b.dim(0);
  if (row_offset < 0 || row_offset + rows > n)
    return invalid_argument("lora_merge: rows [" + std::to_string(row_offset) + ", " +
                            std::to_string(row_offset + rows) + ") outside the weight's " + std::to_string(n) +
                            " rows");
  if (!std::isfinite(scale)) return invalid_argument("lora_merge: the scale must be finite");
  const float* ap = a.data<float>();  // [r, K]
  const float* bp = b.data<float>();  // [rows, r]
  uint16_t* wp = w.data<uint16_t>() + row_offset * k;
  const float scale_f32 = static_cast<float>(scale);
  run(rows, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      uint16_t* wrow = wp + i * k;
      const float* brow = bp + i * r;
      for (int64_t j = 0; j < k; ++j) {
        if (program == LoraMergeProgram::kSingleRounding) {
          // FP32 factors: every product is exact in FP64; the k-ordered sum rounds at 2^-53.
          double d = 0.0;
          for (int64_t q = 0; q < r; ++q) d += static_cast<double>(brow[q]) * static_cast<double>(ap[q * k + j]);
          wrow[j] = bf16_bits_from_f64(static_cast<double>(f32_from_bf16_bits(wrow[j])) + scale * d);
        } else {
          // torch's CPU fp32 matmul is one FMA chain per element in ascending k (exact products for BF16
          // factors); `* scaling` in FP32; `.to(bf16)`; then the BF16 `+=` (FP32 add, one rounding).
          float d = 0.0f;
          for (int64_t q = 0; q < r; ++q) d = std::fma(brow[q], ap[q * k + j], d);
          volatile float scaled = d * scale_f32;
          const float delta = f32_from_bf16_bits(bf16_bits_from_f32(scaled));
          volatile float sum = f32_from_bf16_bits(wrow[j]) + delta;
          wrow[j] = bf16_bits_from_f32(sum);
        }
      }
    }
  });
  return Status::Ok();
}

Status linear_lora(const Tensor& x, const LinearWeight& w, const Tensor* bias, const LoraBranch& lora, Tensor& out,
                   const RowRunner& run) {
  if (w.format != QuantFormat::kNone)
    return unsupported(std::string("linear_lora: the run-time LoRA branch on a ") + quant_format_name(w.format) +
                       " weight is not implemented; merge the LoRA before quantizing (--lora-mode merge)");
  if (!x.defined() || x.ndim() != 2 || x.dtype() != DType::kBF16 || x.stride(1) != 1)
    return invalid_argument("linear_lora: x must be a [M, K] bf16 row view, got " +
                            (x.defined() ? x.describe() : std::string("undefined")));
  const int64_t m = x.dim(0), k = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_factor(w.weight, "W", -1, k, DType::kBF16));
  const int64_t n = w.weight.dim(0);
  if (!out.defined() || out.ndim() != 2 || out.dtype() != DType::kBF16 || out.dim(0) != m || out.dim(1) != n ||
      out.stride(1) != 1)
    return invalid_argument("linear_lora: out must be a [" + std::to_string(m) + ", " + std::to_string(n) +
                            "] bf16 row view");
  if (bias && (!bias->defined() || bias->dtype() != DType::kBF16 || bias->numel() != n || !bias->is_contiguous()))
    return invalid_argument("linear_lora: bias must be a contiguous [" + std::to_string(n) + "] bf16 tensor");
  for (const LoraBranchPart& p : lora.parts) {
    VORTEX_RETURN_IF_ERROR(check_factor(p.a, "branch A", -1, k, DType::kBF16));
    VORTEX_RETURN_IF_ERROR(check_factor(p.b, "branch B", -1, p.a.dim(0), DType::kBF16));
    if (p.row_offset < 0 || p.row_offset + p.b.dim(0) > n)
      return invalid_argument("linear_lora: a branch part's rows fall outside the layer's " + std::to_string(n) +
                              " rows");
  }
  const uint16_t* wp = w.weight.data<uint16_t>();
  run(m, [&](int64_t begin, int64_t end) {
    std::vector<double> xr(static_cast<size_t>(k));
    std::vector<double> acc(static_cast<size_t>(n));
    std::vector<double> t;
    for (int64_t row = begin; row < end; ++row) {
      const uint16_t* xp = row_ptr<const uint16_t>(x, row);
      for (int64_t i = 0; i < k; ++i) xr[static_cast<size_t>(i)] = f32_from_bf16_bits(xp[i]);
      // Base: the reference linear's program (FP64, ascending k), not yet rounded.
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t i = 0; i < k; ++i) s += xr[static_cast<size_t>(i)] * f32_from_bf16_bits(wp[j * k + i]);
        acc[static_cast<size_t>(j)] = s;
      }
      for (const LoraBranchPart& p : lora.parts) {
        const int64_t r = p.a.dim(0), rows = p.b.dim(0);
        const uint16_t* ap = p.a.data<uint16_t>();
        const uint16_t* bp = p.b.data<uint16_t>();
        // t = R(scale * x A^T) [r]: the sum in FP64, times the scale in FP64, one rounding to BF16.
        t.assign(static_cast<size_t>(r), 0.0);
        for (int64_t q = 0; q < r; ++q) {
          double s = 0.0;
          for (int64_t i = 0; i < k; ++i) s += xr[static_cast<size_t>(i)] * f32_from_bf16_bits(ap[q * k + i]);
          t[static_cast<size_t>(q)] = f32_from_bf16_bits(bf16_bits_from_f64(p.scale * s));
        }
        // acc += t B^T on the part's rows, ascending r, still unrounded.
        for (int64_t j = 0; j < rows; ++j) {
          double s = 0.0;
          for (int64_t q = 0; q < r; ++q) s += t[static_cast<size_t>(q)] * f32_from_bf16_bits(bp[j * r + q]);
          acc[static_cast<size_t>(p.row_offset + j)] += s;
        }
      }
      uint16_t* op = row_ptr<uint16_t>(out, row);
      for (int64_t j = 0; j < n; ++j) {
        double v = acc[static_cast<size_t>(j)];
        if (bias) v += f32_from_bf16_bits(bias->data<uint16_t>()[j]);
        op[j] = bf16_bits_from_f64(v);
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
