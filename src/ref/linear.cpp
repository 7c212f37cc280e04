// Reference linear layer: out = x @ W^T (+ bias) with FP64 accumulation in ascending k and one rounding
// (bf16 -> BF16, f32 -> FP32); fp8_scaled weights are dequantized exactly to BF16 first (ComfyUI on Hopper).
// Why FP64: BF16 and FP32 products are exact in FP64, so the only roundings are the k-ordered adds and the
// final one. Tested in tests/ref/linear_test.cpp (vs long-double sums, exact cases, fp8 dequant, strides).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ref/ref_internal.h"
#include "ref/ref_ops.h"

namespace vortex::ref {
namespace {

// W [N, K] as BF16 bits, dequantizing fp8_scaled to R(fp32(fp8 * scale)).
Result<Tensor> bf16_weight(const LinearWeight& w) {
  if (w.format == QuantFormat::kNone) return w.weight;
  if (w.format == QuantFormat::kFp8Scaled) {
    if (w.weight.dtype() != DType::kF8E4M3 || w.weight.ndim() != 2 || !w.weight.is_contiguous())
      return invalid_argument("fp8_scaled weight must be a contiguous [N, K] f8e4m3 tensor, got " +
                              w.weight.describe());
    if (!w.weight_scale.defined() || w.weight_scale.dtype() != DType::kF32 || w.weight_scale.numel() != 1)
      return invalid_argument("fp8_scaled weight needs a per-tensor f32 weight_scale ([] or [1])");
    const float scale = *w.weight_scale.data<float>();
    Tensor out = Tensor::empty(w.weight.shape(), DType::kBF16);
    const uint8_t* src = w.weight.data<uint8_t>();
    uint16_t* dst = out.data<uint16_t>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      volatile float p = f32_from_e4m3(src[i]) * scale;  // FP32 opmath, one rounding, no contraction
      dst[i] = bf16_bits_from_f32(p);
    }
    return out;
  }
  return unsupported(std::string("the CPU reference linear does not take ") +
                     (w.format == QuantFormat::kNvfp4 ? "nvfp4" : "quantized") +
                     " weights directly; dequantize them with the NVFP4 reference first or use --precision bf16");
}

}  // namespace

Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out, const RowRunner& run) {
  if (!x.defined() || x.ndim() != 2) return invalid_argument("linear: x must be 2-D [M, K], got " + x.describe());
  const int64_t m = x.dim(0), k = x.dim(1);
  VORTEX_ASSIGN_OR_RETURN(Tensor wt, bf16_weight(w));
  const DType dt = x.dtype();
  if (dt != DType::kBF16 && dt != DType::kF32)
    return invalid_argument("linear: x must be bf16 or f32, got " + x.describe());
  if (w.format != QuantFormat::kNone && dt != DType::kBF16)
    return invalid_argument("linear: quantized weights take bf16 activations, got " + x.describe());
  if (!wt.is_contiguous()) return invalid_argument("linear: weight must be contiguous [N, K], got " + wt.describe());
  VORTEX_RETURN_IF_ERROR(check_rows(wt, "linear weight", dt, -1, k).with_context("linear"));
  const int64_t n = wt.dim(0);
  VORTEX_RETURN_IF_ERROR(check_rows(x, "linear x", dt, m, k));
  VORTEX_RETURN_IF_ERROR(check_rows(out, "linear out", dt, m, n));
  if (bias) {
    if (!bias->defined() || bias->dtype() != dt || bias->numel() != n || !bias->is_contiguous())
      return invalid_argument("linear: bias must be a contiguous [" + std::to_string(n) + "] " + dtype_short_name(dt) +
                              " tensor, got " + bias->describe());
  }

  const bool bf16_io = dt == DType::kBF16;
  auto w_at = [&](int64_t j, int64_t i) -> double {
    return bf16_io ? f32_from_bf16_bits(wt.data<uint16_t>()[j * k + i]) : wt.data<float>()[j * k + i];
  };
  auto bias_at = [&](int64_t j) -> double {
    return bf16_io ? f32_from_bf16_bits(bias->data<uint16_t>()[j]) : bias->data<float>()[j];
  };
  auto store = [&](int64_t r, int64_t j, double acc) {
    if (bias) acc += bias_at(j);
    if (bf16_io) row_ptr<uint16_t>(out, r)[j] = bf16_bits_from_f64(acc);
    else row_ptr<float>(out, r)[j] = static_cast<float>(acc);
  };

  // Few rows (AdaLN GEMVs, tiny heads): plain dot products over contiguous W rows, no transposed copy.
  if (m < 8) {
    run(m, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        std::vector<double> xr(static_cast<size_t>(k));
        for (int64_t i = 0; i < k; ++i)
          xr[static_cast<size_t>(i)] = bf16_io
                                           ? static_cast<double>(f32_from_bf16_bits(row_ptr<const uint16_t>(x, r)[i]))
                                           : static_cast<double>(row_ptr<const float>(x, r)[i]);
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0.0;
          for (int64_t i = 0; i < k; ++i) acc += xr[static_cast<size_t>(i)] * w_at(j, i);
          store(r, j, acc);
        }
      }
    });
    return Status::Ok();
  }

  // W^T as exact FP32 values [K, N] (BF16 and FP32 values are exact in FP32), so the inner loop runs over
  // contiguous output columns and vectorizes; each output column is still ONE FP64 chain in ascending k,
  // so the bytes equal the plain dot-product loop (linear_test.cpp: ExactAscendingKProgram).
  std::vector<float> w_t(static_cast<size_t>(k * n));       // [K, N] f32
  std::vector<double> bias_d(static_cast<size_t>(n), 0.0);  // [N]
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i)
      w_t[static_cast<size_t>(i * n + j)] =
          bf16_io ? f32_from_bf16_bits(wt.data<uint16_t>()[j * k + i]) : wt.data<float>()[j * k + i];
  if (bias)
    for (int64_t j = 0; j < n; ++j)
      bias_d[static_cast<size_t>(j)] = bf16_io ? f32_from_bf16_bits(bias->data<uint16_t>()[j]) : bias->data<float>()[j];

  constexpr int64_t kRowBlock = 4;    // rows sharing each W^T load
  constexpr int64_t kColBlock = 256;  // accumulators per row kept in L1
  run(m, [&](int64_t begin, int64_t end) {
    std::vector<double> xs(static_cast<size_t>(kRowBlock * k));
    std::vector<double> acc(static_cast<size_t>(kRowBlock * kColBlock));
    for (int64_t r0 = begin; r0 < end; r0 += kRowBlock) {
      const int64_t nr = std::min(kRowBlock, end - r0);
      for (int64_t rr = 0; rr < nr; ++rr)
        for (int64_t i = 0; i < k; ++i)
          xs[static_cast<size_t>(rr * k + i)] =
              bf16_io ? static_cast<double>(f32_from_bf16_bits(row_ptr<const uint16_t>(x, r0 + rr)[i]))
                      : static_cast<double>(row_ptr<const float>(x, r0 + rr)[i]);
      for (int64_t j0 = 0; j0 < n; j0 += kColBlock) {
        const int64_t nc = std::min(kColBlock, n - j0);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t i = 0; i < k; ++i) {
          const float* wrow = &w_t[static_cast<size_t>(i * n + j0)];
          for (int64_t rr = 0; rr < nr; ++rr) {
            const double xv = xs[static_cast<size_t>(rr * k + i)];
            double* a = &acc[static_cast<size_t>(rr * kColBlock)];
            for (int64_t c = 0; c < nc; ++c) a[c] += xv * static_cast<double>(wrow[c]);
          }
        }
        for (int64_t rr = 0; rr < nr; ++rr) {
          const double* a = &acc[static_cast<size_t>(rr * kColBlock)];
          if (bf16_io) {
            uint16_t* o = row_ptr<uint16_t>(out, r0 + rr) + j0;
            for (int64_t c = 0; c < nc; ++c)
              o[c] = bf16_bits_from_f64(bias ? a[c] + bias_d[static_cast<size_t>(j0 + c)] : a[c]);
          } else {
            float* o = row_ptr<float>(out, r0 + rr) + j0;
            for (int64_t c = 0; c < nc; ++c)
              o[c] = static_cast<float>(bias ? a[c] + bias_d[static_cast<size_t>(j0 + c)] : a[c]);
          }
        }
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
